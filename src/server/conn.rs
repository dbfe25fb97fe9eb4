//! One client connection: read → parse every complete frame → execute in order → one
//! batched write per read (DESIGN.md §2).

use crate::cmd;
use crate::config::{self, ParamRef};
use crate::instance::pause::PauseMode;
use crate::instance::pubsub::Push;
use crate::instance::session::{Blocked, Session};
use crate::instance::state::Shared;
use crate::protocol::{write_reply, Limits, Next, Parser, Reply};
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const READ_CHUNK: usize = 16 * 1024;
/// Buffers larger than this are released after use instead of kept per connection.
const KEEP_BUF: usize = 1024 * 1024;
/// Argument vectors longer than this are released after their command.
const KEEP_ARGS: usize = 1024;

pub async fn serve(srv: Arc<Shared>, mut stream: TcpStream, peer: SocketAddr) {
    srv.stats.total_connections.fetch_add(1, Ordering::Relaxed);
    srv.faults.accepted.fetch_add(1, Ordering::Relaxed);
    // Test double: `RESPITE FAULT REFUSE` accepts and closes at once.
    if srv.faults.refusing() {
        return;
    }
    let max = srv.config.get_i64("maxclients").max(1) as usize;
    if srv.clients.count() >= max {
        srv.stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return;
    }
    let laddr = stream.local_addr().unwrap_or(peer);
    let handle = srv.clients.register(peer, laddr, srv.clock.now_ms());
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        handle.info.lock().fd = stream.as_raw_fd() as i64;
    }
    let sess = Session::new(handle, srv.requirepass().is_none());
    let mut conn = Cleanup {
        srv: srv.clone(),
        sess,
    };
    let _ = run(&srv, &mut stream, &mut conn.sess).await;
}

/// Owns a connection's session and undoes its registrations when dropped, so they are
/// undone however the connection ends: a normal close, or a command that panics (tokio
/// catches the panic and drops the task, running this while unwinding).
struct Cleanup {
    srv: Arc<Shared>,
    sess: Session,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (srv, sess) = (&self.srv, &mut self.sess);
        // The maxclients slot and the CLIENT LIST entry first: they matter most.
        srv.clients.unregister(sess.handle.id);
        cmd::pubsub::unsubscribe_all(srv, sess);
        // Registered as blocked by a command that did not get to wait (see BlockedGuard).
        if let Some(b) = sess.blocked.take() {
            drop(BlockedGuard { srv, b });
        }
        sess.multi = None;
        sess.mark = None;
        cmd::flush_stats(srv, sess);
        // Drop WATCH registrations so shards do not keep dead flags.
        if !sess.watched.is_empty() {
            sess.reply_mode = crate::instance::session::ReplyMode::On;
            let _ = cmd::dispatch(srv, sess, vec![Bytes::from_static(b"UNWATCH")]);
        }
    }
}

/// A blocked command's registration, given up when dropped unless a writer served it
/// (even if the connection's task is dropped or unwinds while the client waits).
struct BlockedGuard<'a> {
    srv: &'a Arc<Shared>,
    b: Blocked,
}

impl Drop for BlockedGuard<'_> {
    fn drop(&mut self) {
        if self.b.waiter.abandon() {
            cmd::blocking::unregister(self.srv, &self.b);
        }
    }
}

type Kill<'a, 'b> = std::pin::Pin<&'a mut tokio::sync::futures::Notified<'b>>;

/// Writes the batched replies (and pushes). A client killed while its socket does not drain
/// (a subscriber over its output buffer limit, CLIENT KILL) stops waiting at once.
async fn flush(
    stream: &mut TcpStream,
    out: &mut BytesMut,
    srv: &Shared,
    sess: &mut Session,
    kill: Kill<'_, '_>,
) -> std::io::Result<()> {
    // A client that has a reply sees its command counted (INFO, from any connection).
    cmd::flush_stats(srv, sess);
    if sess.wrote.swap(false, Ordering::Relaxed) {
        wait_durable(srv).await?;
    }
    if !out.is_empty() {
        srv.stats
            .net_output_bytes
            .fetch_add(out.len() as u64, Ordering::Relaxed);
        let mem = &sess.handle.mem;
        mem.out_peak.fetch_max(out.len(), Ordering::Relaxed);
        let queued = mem.push_bytes.load(Ordering::Relaxed);
        srv.peaks.record(srv.uptime_secs(), 0, out.len() + queued);
        mem.out_cap.store(out.capacity(), Ordering::Relaxed);
        // Written piece by piece so CLIENT LIST sees what is still pending (`omem`) while
        // a client does not read.
        let write = async {
            let mut done = 0;
            while done < out.len() {
                mem.out_pending.store(out.len() - done, Ordering::Relaxed);
                let n = stream.write(&out[done..]).await?;
                if n == 0 {
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                done += n;
            }
            Ok::<(), std::io::Error>(())
        };
        tokio::select! {
            biased;
            r = write => r?,
            _ = kill => return Err(std::io::Error::other("client killed")),
        }
        mem.out_pending.store(0, Ordering::Relaxed);
        out.clear();
        if out.capacity() > KEEP_BUF {
            *out = BytesMut::with_capacity(READ_CHUNK);
            mem.out_peak.store(0, Ordering::Relaxed);
        }
        mem.out_cap.store(out.capacity(), Ordering::Relaxed);
    }
    if let Some(s) = &sess.subs {
        s.sub.written();
    }
    Ok(())
}

/// Durable engine under `appendfsync always`: holds the replies of a batch that wrote until
/// the commit holding its writes is durable (DESIGN.md §6). In any mode, holds them while
/// the checkpoint backlog is over its limit. If the store fails meanwhile the
/// connection is closed without them: the client must not take an unsaved write as done.
async fn wait_durable(srv: &Shared) -> std::io::Result<()> {
    use crate::persist::Fsync;
    let Some(p) = srv.persist.get() else {
        return Ok(());
    };
    if p.backlogged() {
        // Writes outrun the checkpointer: this writer waits (reading nothing more) until
        // it catches up, so the backlog's memory and log stay bounded. The checkpointer
        // wakes the waiters after every checkpoint.
        p.stats.throttled.fetch_add(1, Ordering::Relaxed);
        let j = &p.journal;
        loop {
            let notified = j.commit_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !p.backlogged() || p.failure().is_some() {
                break;
            }
            notified.await;
        }
    }
    if p.mode() != Fsync::Always {
        return Ok(());
    }
    let j = &p.journal;
    let target = j.appended_seq();
    // No timer: the commit that makes `target` durable wakes this connection (and only
    // those it made durable); a failure or a policy change wakes every waiter.
    loop {
        // Created before the checks, so a failure or policy change between them wakes it.
        let durable = j.durable(target);
        if j.durable_seq() >= target || p.mode() != Fsync::Always {
            return Ok(());
        }
        if let Some(e) = p.failure() {
            return Err(std::io::Error::other(format!("write not persisted: {e}")));
        }
        durable.await;
    }
}

/// Appends the messages and confirmations queued for a subscribed session.
fn take_pushes(sess: &Session, scratch: &mut VecDeque<Push>, out: &mut BytesMut) {
    if let Some(s) = &sess.subs {
        s.sub.drain_encode(scratch, out, sess.resp3);
    }
}

/// Waits while CLIENT PAUSE holds this command back; `Err` if the client is killed
/// meanwhile (CLIENT KILL takes effect at once, as in Redis, not when the pause ends).
async fn wait_for_pause(
    srv: &Shared,
    args: &[Bytes],
    mut kill: Kill<'_, '_>,
    handle: &crate::instance::clients::ClientHandle,
) -> std::io::Result<()> {
    loop {
        // Registered before the checks, so an UNPAUSE between them still wakes us.
        let unpaused = srv.pause.unpaused.notified();
        tokio::pin!(unpaused);
        unpaused.as_mut().enable();
        if handle.is_killed() {
            return Err(std::io::Error::other("client killed"));
        }
        let Some((until, mode)) = srv.pause.current(crate::clock::Clock::system().now_ms()) else {
            return Ok(());
        };
        if mode == PauseMode::Write {
            // A script's shebang flags overrule EVAL's table flags (Redis's
            // `evalGetCommandFlags`): only `no-writes` scripts pass a write pause.
            let writes = crate::script::eval_shebang_writes(srv, args)
                .unwrap_or_else(|| cmd::may_write(args));
            if !writes {
                return Ok(());
            }
        }
        let now = crate::clock::Clock::system().now_ms();
        let wait = Duration::from_millis(until.saturating_sub(now).max(1));
        tokio::select! {
            _ = tokio::time::timeout(wait, unpaused) => {}
            _ = kill.as_mut() => return Err(std::io::Error::other("client killed")),
        }
    }
}

/// The test double's per-command hooks: log the command, hold it while paused, delay it,
/// or fail it (`Some(error)`: reply that instead of running it). A drop (kill) while held
/// ends the connection.
async fn test_faults(
    srv: &Shared,
    stream: &mut TcpStream,
    out: &mut BytesMut,
    sess: &mut Session,
    mut kill: Kill<'_, '_>,
    args: &[Bytes],
    armed: u32,
) -> std::io::Result<Option<String>> {
    use crate::instance::faults::{self, Action};
    if armed & faults::LOG != 0 {
        let known = args
            .first()
            .is_some_and(|n| cmd::registry().lookup(n).is_some());
        srv.cmdlog.record(sess.handle.id, args, known);
    }
    if armed & (faults::PAUSE | faults::DELAY) != 0 && !faults::is_admin(args) {
        // Replies already computed go out; this one waits.
        flush(stream, out, srv, sess, kill.as_mut()).await?;
        let hold = async {
            srv.faults.wait_unpaused(args).await;
            let d = srv.faults.current_delay();
            if !d.is_zero() {
                tokio::time::sleep(d).await;
            }
        };
        tokio::select! {
            _ = hold => {}
            _ = kill.as_mut() => return Err(std::io::Error::other("connection dropped")),
        }
    }
    let keys = || cmd::key_args(args);
    Ok(match srv.faults.check(args, &keys) {
        Action::Run => None,
        Action::Fail(e) => Some(e),
    })
}

/// Parameters the connection loop reads per read batch, resolved by name once.
struct Hot {
    timeout: ParamRef,
    qbuf_limit: ParamRef,
    max_bulk: ParamRef,
}

fn hot() -> &'static Hot {
    static HOT: std::sync::OnceLock<Hot> = std::sync::OnceLock::new();
    HOT.get_or_init(|| {
        let r = |n| config::lookup(n).expect("standard parameter");
        Hot {
            timeout: r("timeout"),
            qbuf_limit: r("client-query-buffer-limit"),
            max_bulk: r("proto-max-bulk-len"),
        }
    })
}

/// Waits for a blocked command's reply: served by a writer, or the timeout reply. Input that
/// arrives meanwhile is buffered (pipelined commands run after the reply, as in Redis).
/// `None` means the client went away (or was killed) while blocked.
async fn wait_blocked(
    srv: &Arc<Shared>,
    stream: &mut TcpStream,
    inbuf: &mut BytesMut,
    b: &mut Blocked,
    mut kill: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> std::io::Result<Option<Reply>> {
    let gone = |b: &Blocked| {
        if b.waiter.abandon() {
            cmd::blocking::unregister(srv, b);
        }
    };
    loop {
        let deadline = b.deadline;
        let timer = async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = &mut b.rx => {
                return Ok(Some(r.unwrap_or_else(|_| b.timeout_reply.clone())));
            }
            _ = timer => {
                loop {
                    if b.waiter.abandon() {
                        cmd::blocking::unregister(srv, b);
                        return Ok(Some(b.timeout_reply.clone()));
                    }
                    // A writer is serving us right now: its reply (or a release) is imminent.
                    match b.rx.try_recv() {
                        Ok(r) => return Ok(Some(r)),
                        Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                            return Ok(Some(b.timeout_reply.clone()))
                        }
                        Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {
                            tokio::time::sleep(Duration::from_millis(1)).await
                        }
                    }
                }
            }
            r = stream.read_buf(inbuf) => {
                match r {
                    Ok(0) | Err(_) => {
                        gone(b);
                        return Ok(None);
                    }
                    Ok(n) => {
                        srv.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                        let h = &b.waiter.handle;
                        report_read(srv, h, inbuf);
                        // Redis's `readQueryFromClient` checks blocked clients too.
                        if over_query_limit(srv, h, inbuf) {
                            gone(b);
                            return Ok(None);
                        }
                        if inbuf.capacity() - inbuf.len() < READ_CHUNK / 2 {
                            inbuf.reserve(READ_CHUNK);
                        }
                    }
                }
            }
            _ = kill.as_mut() => {
                gone(b);
                return Ok(None);
            }
        }
    }
}

/// Publishes the argument bytes a MULTI has queued (`multi-mem`). `seen` is (queue
/// address, commands, bytes) of the last report: commands queued since are added, and a
/// different queue (a new MULTI) is summed afresh.
fn report_multi(sess: &Session, seen: &mut (usize, usize, usize)) {
    let queue = sess.multi.as_ref().map_or(&[][..], |m| &m.queue[..]);
    if queue.is_empty() {
        if seen.2 != 0 {
            *seen = (0, 0, 0);
            sess.handle.mem.multi.store(0, Ordering::Relaxed);
        }
        return;
    }
    let at = queue.as_ptr() as usize;
    if at != seen.0 || queue.len() < seen.1 {
        *seen = (at, 0, 0);
    }
    let new: usize = queue[seen.1..]
        .iter()
        .flat_map(|c| c.iter().map(|a| a.len()))
        .sum();
    *seen = (at, queue.len(), seen.2 + new);
    sess.handle.mem.multi.store(seen.2, Ordering::Relaxed);
}

/// Publishes the input buffer's state for CLIENT LIST (`qbuf`, `qbuf-free`).
fn report_input(h: &crate::instance::clients::ClientHandle, inbuf: &BytesMut) {
    h.mem.qbuf.store(inbuf.len(), Ordering::Relaxed);
    h.mem.qbuf_cap.store(inbuf.capacity(), Ordering::Relaxed);
}

/// [`report_input`] after a read, also noted for INFO's recent peaks.
fn report_read(srv: &Shared, h: &crate::instance::clients::ClientHandle, inbuf: &BytesMut) {
    report_input(h, inbuf);
    srv.peaks
        .record(srv.uptime_secs(), h.mem.input_usage(), h.mem.output_usage());
}

/// `client-query-buffer-limit` (at least 1 MB, as Redis enforces for the parameter).
fn query_limit(srv: &Shared) -> usize {
    srv.config.num(hot().qbuf_limit).max(1024 * 1024) as usize
}

/// True (and logged as Redis logs it) if the unparsed input is over the query buffer
/// limit: the caller closes the connection without a reply.
fn over_query_limit(
    srv: &Shared,
    h: &crate::instance::clients::ClientHandle,
    inbuf: &BytesMut,
) -> bool {
    if inbuf.len() <= query_limit(srv) {
        return false;
    }
    tracing::warn!(
        "Closing client that reached max query buffer length: {} (qbuf initial bytes: {})",
        cmd::client::describe(srv, h),
        repr(&inbuf[..inbuf.len().min(64)])
    );
    true
}

/// Bytes quoted as Redis's `sdscatrepr` prints them in logs.
fn repr(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() + 2);
    s.push('"');
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            c if c.is_ascii_graphic() || c == b' ' => s.push(c as char),
            c => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}

async fn run(srv: &Arc<Shared>, stream: &mut TcpStream, sess: &mut Session) -> std::io::Result<()> {
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = BytesMut::with_capacity(READ_CHUNK);
    let mut parser = Parser::default();
    // Every command's arguments, in one vector reused from command to command.
    let mut args: Vec<Bytes> = Vec::new();
    let handle = sess.handle.clone();
    // One long-lived registration for CLIENT KILL, rather than a new one per read.
    let kill = handle.kill.notified();
    tokio::pin!(kill);
    // Reused to move pushes out of the subscriber's queue (stays empty if never subscribed).
    let mut scratch: VecDeque<Push> = VecDeque::new();
    // The MULTI queue last reported (see `report_multi`).
    let mut multi_mem = (0usize, 0usize, 0usize);
    handle.mem.out_cap.store(out.capacity(), Ordering::Relaxed);
    report_input(&handle, &inbuf);
    loop {
        if inbuf.capacity() - inbuf.len() < READ_CHUNK / 2 {
            inbuf.reserve(READ_CHUNK);
        }
        // `timeout` (seconds, 0 = never) closes idle clients, as Redis does; clients in
        // MULTI are idle like any other, pub/sub clients are exempt.
        let sub = sess.subs.as_ref().map(|s| s.sub.clone());
        let idle = match &sess.subs {
            Some(s) if s.active() => 0,
            _ => srv.config.num(hot().timeout),
        };
        let read = async {
            if idle > 0 {
                match tokio::time::timeout(
                    Duration::from_secs(idle as u64),
                    stream.read_buf(&mut inbuf),
                )
                .await
                {
                    Ok(r) => r,
                    Err(_) => Ok(0),
                }
            } else {
                stream.read_buf(&mut inbuf).await
            }
        };
        // Never fires for a connection that never subscribed.
        let pushed = async {
            match &sub {
                Some(s) => s.wait().await,
                None => std::future::pending::<()>().await,
            }
        };
        let n = tokio::select! {
            biased;
            r = read => Some(r?),
            _ = pushed => None,
            _ = kill.as_mut() => Some(0),
        };
        let Some(n) = n else {
            take_pushes(sess, &mut scratch, &mut out);
            flush(stream, &mut out, srv, sess, kill.as_mut()).await?;
            continue;
        };
        if n == 0 || handle.is_killed() {
            return Ok(());
        }
        srv.stats
            .net_input_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        // Read the limits once per read batch: a config lookup allocates, too slow per command.
        let qlimit = query_limit(srv);
        let max_bulk_len = srv.config.num(hot().max_bulk);
        let size_limits = cmd::commandlog_limits(srv);
        report_read(srv, &handle, &inbuf);
        if over_query_limit(srv, &handle, &inbuf) {
            // Redis logs and closes without a reply.
            return Ok(());
        }
        // The batch's clock (Session::mark): each command starts where the previous one
        // ended, so a command costs one clock read and its statistics are added to the
        // shared counters once per batch, not once per command. Reset after every wait.
        sess.mark = Some(crate::clock::Instant::now());
        loop {
            let limits = Limits {
                max_bulk_len,
                authenticated: sess.authenticated,
            };
            // What is left of this batch, the next command included (CLIENT LIST `qbuf`
            // mid-batch; a client's own CLIENT INFO counts its command, as in Redis).
            let unparsed = inbuf.len();
            handle.mem.qbuf.store(unparsed, Ordering::Relaxed);
            match parser.parse_into(&mut inbuf, limits, &mut args) {
                Ok(Next::Command) => {
                    if args.is_empty() {
                        continue;
                    }
                    // The command's bytes as received (a command is parsed once whole).
                    let request = (unparsed - inbuf.len()) as u64;
                    // Test double (instance/faults.rs): 0 unless a test armed something.
                    let armed = srv.faults.armed();
                    if armed != 0 {
                        if let Some(err) =
                            test_faults(srv, stream, &mut out, sess, kill.as_mut(), &args, armed)
                                .await?
                        {
                            let reply = cmd::reject_injected(srv, sess, &args, &err);
                            write_reply(&mut out, &reply, sess.resp3);
                            sess.mark = Some(crate::clock::Instant::now());
                            continue;
                        }
                        sess.mark = Some(crate::clock::Instant::now());
                    }
                    if srv.pause.maybe_active()
                        && srv
                            .pause
                            .current(crate::clock::Clock::system().now_ms())
                            .is_some()
                    {
                        flush(stream, &mut out, srv, sess, kill.as_mut()).await?;
                        // As in Redis, a postponed client shows its command and flag `b`.
                        if let Ok((id, _)) = cmd::registry().resolve(&args) {
                            handle.last_cmd.store(id, Ordering::Relaxed);
                        }
                        handle.info.lock().postponed = true;
                        let r = wait_for_pause(srv, &args, kill.as_mut(), &handle).await;
                        handle.info.lock().postponed = false;
                        r?;
                        sess.mark = Some(crate::clock::Instant::now());
                    }
                    sess.last_run = usize::MAX;
                    sess.request = (request, size_limits.0);
                    let reply = cmd::dispatch_in(srv, sess, &mut args);
                    // Pushes queued so far (including this command's own confirmations or
                    // its self-published messages) precede its reply, as in Redis.
                    take_pushes(sess, &mut scratch, &mut out);
                    let written = out.len();
                    write_reply(&mut out, &reply, sess.resp3);
                    let reply_len = (out.len() - written) as u64;
                    if reply_len >= size_limits.1 {
                        cmd::commandlog_reply(srv, sess, &args, reply_len);
                    }
                    // The arguments go now (they hold the read buffer); the vector stays.
                    args.clear();
                    if args.capacity() > KEEP_ARGS {
                        args = Vec::new();
                    }
                    if let Some(blocked) = sess.blocked.take() {
                        let mut blocked = BlockedGuard { srv, b: blocked };
                        // A blocked client keeps its command's arguments (`argv-mem`).
                        let argv: usize = blocked.b.waiter.args.iter().map(|a| a.len()).sum();
                        handle.mem.argv.store(argv, Ordering::Relaxed);
                        report_input(&handle, &inbuf);
                        // Replies so far go out now; this client waits, others don't.
                        flush(stream, &mut out, srv, sess, kill.as_mut()).await?;
                        let r =
                            wait_blocked(srv, stream, &mut inbuf, &mut blocked.b, kill.as_mut())
                                .await;
                        handle.mem.argv.store(0, Ordering::Relaxed);
                        match r? {
                            Some(reply) => {
                                // Served by another client's write (the pop is journaled
                                // before the hand-over): under `appendfsync always` the
                                // reply waits for its commit like any write's.
                                sess.wrote.store(true, Ordering::Relaxed);
                                write_reply(&mut out, &reply, sess.resp3)
                            }
                            None => return Ok(()),
                        }
                        sess.mark = Some(crate::clock::Instant::now());
                    }
                    if sess.close_after_reply {
                        flush(stream, &mut out, srv, sess, kill.as_mut()).await?;
                        return Ok(());
                    }
                    if out.len() > KEEP_BUF {
                        flush(stream, &mut out, srv, sess, kill.as_mut()).await?;
                        sess.mark = Some(crate::clock::Instant::now());
                    }
                }
                Ok(Next::Incomplete { hint }) => {
                    if hint > 0 {
                        // Grow toward a declared bulk at most by what already arrived: a
                        // header declaring 500 MB whose data never comes must not make us
                        // allocate 500 MB; a real large value still grows geometrically.
                        inbuf.reserve(hint.min(qlimit).min(inbuf.len().max(READ_CHUNK)));
                    }
                    break;
                }
                Err(e) => {
                    srv.stats.error_replies.fetch_add(1, Ordering::Relaxed);
                    out.extend_from_slice(&e.reply_line());
                    flush(stream, &mut out, srv, sess, kill.as_mut()).await?;
                    return Ok(());
                }
            }
        }
        sess.mark = None;
        report_multi(sess, &mut multi_mem);
        flush(stream, &mut out, srv, sess, kill.as_mut()).await?;
        if inbuf.is_empty() && inbuf.capacity() > KEEP_BUF {
            inbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        report_input(&handle, &inbuf);
    }
}
