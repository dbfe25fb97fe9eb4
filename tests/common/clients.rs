//! redis-rs clients (async, one multiplexed TCP connection each) under RESP2 or RESP3.

use super::HANG_GUARD;
use redis::aio::MultiplexedConnection;
use respite::TestServer;

/// The protocol a redis-rs connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Resp2,
    Resp3,
}

/// The redis-rs URL for `server` under `proto`.
pub fn url(server: &TestServer, proto: Proto) -> String {
    url_for_port(server.port(), proto)
}

pub fn url_for_port(port: u16, proto: Proto) -> String {
    match proto {
        Proto::Resp2 => format!("redis://127.0.0.1:{port}/"),
        Proto::Resp3 => format!("redis://127.0.0.1:{port}/?protocol=resp3"),
    }
}

/// A new multiplexed redis-rs connection (one TCP connection). Without redis-rs's own
/// timeouts (1 s to connect, 500 ms per reply): a debug server on a loaded 2-core CI box
/// can take longer than that to answer, a blocking command or a reply held back for a
/// durable commit is not a failure, and `HANG_GUARD` already catches real hangs.
pub async fn connect(server: &TestServer, proto: Proto) -> MultiplexedConnection {
    connect_url(&url(server, proto)).await
}

/// [`connect`] to a server on a loopback port (a process, or an in-process server by port).
pub async fn connect_port(port: u16, proto: Proto) -> MultiplexedConnection {
    connect_url(&url_for_port(port, proto)).await
}

/// [`connect`] by redis-rs URL.
pub async fn connect_url(url: &str) -> MultiplexedConnection {
    let client = redis::Client::open(url).expect("valid url");
    tokio::time::timeout(
        HANG_GUARD,
        client.get_multiplexed_async_connection_with_config(&no_timeouts()),
    )
    .await
    .expect("connect hung")
    .expect("connect")
}

/// The connection config of [`connect`]: no connect or response timeout.
pub fn no_timeouts() -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None)
}

/// `n` separate connections to `server`.
pub async fn connections(
    server: &TestServer,
    proto: Proto,
    n: usize,
) -> Vec<MultiplexedConnection> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(connect(server, proto).await);
    }
    out
}

/// A connection for commands that block (`connect` has no response timeout either).
pub async fn blocking_conn(server: &TestServer, proto: Proto) -> MultiplexedConnection {
    connect(server, proto).await
}

/// Runs `cmd` and converts the reply, panicking with the command on error.
pub async fn q<T: redis::FromRedisValue>(
    con: &mut impl redis::aio::ConnectionLike,
    cmd: &redis::Cmd,
) -> T {
    match tokio::time::timeout(HANG_GUARD, cmd.query_async::<T>(con)).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!(
            "{:?} failed: {e}",
            String::from_utf8_lossy(&cmd.get_packed_command())
        ),
        Err(_) => panic!(
            "{:?} hung",
            String::from_utf8_lossy(&cmd.get_packed_command())
        ),
    }
}

/// Runs `cmd` and returns redis-rs's result (errors are the test's to check); a hang
/// still panics.
pub async fn try_q<T: redis::FromRedisValue>(
    con: &mut impl redis::aio::ConnectionLike,
    cmd: &redis::Cmd,
) -> redis::RedisResult<T> {
    tokio::time::timeout(HANG_GUARD, cmd.query_async(con))
        .await
        .expect("command hung")
}

/// Builds a command from string-ish arguments: `c(&["SET", "k", "v"])`.
pub fn c(args: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd
}

/// Runs `cmd` (a script or function that will not end by itself) on a connection of its
/// own in the background; [`killed_reply`] collects what it got.
pub async fn spawn_runaway(
    server: &TestServer,
    proto: Proto,
    cmd: redis::Cmd,
) -> tokio::task::JoinHandle<redis::RedisResult<redis::Value>> {
    let mut con = connect(server, proto).await;
    tokio::spawn(async move { cmd.query_async::<redis::Value>(&mut con).await })
}

/// Polls `GET k` on `con` until the server answers BUSY (a script or function is past
/// its time limit); that error's text.
pub async fn until_busy(con: &mut MultiplexedConnection) -> String {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        match c(&["GET", "k"]).query_async::<Option<String>>(con).await {
            Err(e) if e.to_string().contains("BUSY") => return e.to_string(),
            _ => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no BUSY reply while a script ran past lua-time-limit"
                );
                tokio::time::sleep(std::time::Duration::from_millis(10)).await
            }
        }
    }
}

/// The error the caller of a killed script or function got.
pub async fn killed_reply(
    runaway: tokio::task::JoinHandle<redis::RedisResult<redis::Value>>,
) -> redis::RedisError {
    tokio::time::timeout(HANG_GUARD, runaway)
        .await
        .expect("killed script never returned")
        .expect("task")
        .expect_err("a killed script replies an error")
}
