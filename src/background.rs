//! A service on its own thread and tokio runtime, stopped and joined on drop: the in-process
//! server of tests ([`crate::TestServer`]) and the embeddable proxy
//! ([`crate::proxy::ProxyServer`]) share it.

pub mod lazyfree;

use std::future::Future;
use std::io;
use std::time::Duration;

/// The running service's thread; dropping it stops the service and waits for it.
pub struct Background {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Starts a thread named `name` with a 2-worker runtime and runs `start` on it. Its value
    /// `T` is returned to the caller; its state `S` lives until the stop, then goes to
    /// `on_stop` (cleanup such as a final durable commit).
    pub fn spawn<T, S, F, Fut>(
        name: &str,
        start: F,
        on_stop: impl FnOnce(S) + Send + 'static,
    ) -> io::Result<(T, Background)>
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = io::Result<(T, S)>>,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    match start().await {
                        Ok((value, state)) => {
                            let _ = tx.send(Ok(value));
                            let _ = stop_rx.await;
                            on_stop(state);
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
                // Waits for the tasks (listeners included) to be dropped, so a port is free
                // once `drop` returns; blocking work gets a bounded grace period.
                rt.shutdown_timeout(Duration::from_secs(1));
            })?;
        let value = rx.recv().map_err(io::Error::other)??;
        Ok((
            value,
            Background {
                stop: Some(stop_tx),
                thread: Some(thread),
            },
        ))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
