//! One client connection: read → parse every complete frame → execute in order → one
//! batched write per read (DESIGN.md §2).

use crate::cmd;
use crate::config::{self, ParamRef};
use crate::engine::{KeyHint, Keyspace};
use crate::instance::pause::PauseMode;
use crate::instance::pubsub::Push;
use crate::instance::session::{Blocked, Session};
use crate::instance::state::{Shared, Stats};
use crate::protocol::parse::Peeked;
use crate::protocol::{write_reply, Limits, Next, Parser, Reply};
use crate::tls::Transport;
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
/// Redis's per-client reply buffer (`PROTO_REPLY_CHUNK_BYTES`): replies beyond it are what
/// `client-output-buffer-limit` measures.
const REPLY_CHUNK: usize = 16 * 1024;
/// How often a paused cron (`DEBUG PAUSE-CRON 1`) looks again at an idle client.
const CRON_PAUSED_RETRY_MS: u64 = 100;
/// Argument vectors longer than this are released after their command.
const KEEP_ARGS: usize = 1024;
/// Query buffer resizing as Redis's `clientsCronResizeQueryBuffer` does it: free space
/// past this is worth giving back...
const SHRINK_MIN_FREE: usize = 4 * 1024;
/// ...once the client has been idle this long (all of it, the buffer then goes)...
const IDLE_SHRINK_MS: u64 = 2000;
/// ...or, for a buffer larger than this (`PROTO_RESIZE_THRESHOLD`), when its recent peak is
/// under half of it (down to the peak), checked this often (Redis's cron, at `hz` 10).
const RESIZE_THRESHOLD: usize = 32 * 1024;
const RESIZE_EVERY: Duration = Duration::from_millis(100);
/// A declared bulk this large (`PROTO_MBULK_BIG_ARG`) gets room reserved ahead of its
/// data, as in Redis, but at most this much ahead: a header alone must not cost its
/// declared size (the rest grows as the data arrives).
const BIG_ARG: usize = 32 * 1024;
const BIG_ARG_AHEAD: usize = 4 * 1024 * 1024;

/// Serves a plain TCP client.
pub async fn serve(srv: Arc<Shared>, stream: TcpStream, peer: SocketAddr) {
    let laddr = stream.local_addr().unwrap_or(peer);
    #[cfg(unix)]
    let fd = {
        use std::os::unix::io::AsRawFd;
        stream.as_raw_fd() as i64
    };
    #[cfg(not(unix))]
    let fd = -1;
    serve_on(srv, stream, peer, laddr, fd).await
}

/// Serves a client on `stream` (plain TCP or TLS): `laddr` and `fd` are its socket's, for
/// CLIENT LIST.
pub async fn serve_on<S: Transport>(
    srv: Arc<Shared>,
    mut stream: S,
    peer: SocketAddr,
    laddr: SocketAddr,
    fd: i64,
) {
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
        // TLS: the record goes out with the stream's end.
        stream.close().await;
        return;
    }
    let handle = srv.clients.register(peer, laddr, srv.clock.now_ms());
    handle.info.lock().fd = fd;
    let sess = Session::with_user(
        handle,
        srv.acl.starts_authenticated(),
        srv.acl.default_user(),
    );
    let mut conn = Cleanup {
        srv: srv.clone(),
        sess,
    };
    if run(&srv, &mut stream, &mut conn.sess).await.is_ok() {
        stream.close().await;
    }
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
        cmd::monitor::leave(srv, sess);
        cmd::pubsub::unsubscribe_all(srv, sess);
        cmd::client::tracking_off(srv, sess);
        crate::instance::clients::Pushes::clear(&sess.handle);
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

/// Without any limit on a client's replies (Redis's default `normal 0 0 0` and no
/// `maxmemory-clients`), Redis lets a client that never reads grow its reply list without
/// bound. We keep reading and executing for it as Redis does up to this many unsent bytes,
/// then stop reading from that client alone until its socket drains (back-pressure, as
/// before this cap existed): one hostile client cannot exhaust the server's memory, no
/// other client waits, and nothing is lost or closed. With a hard or soft limit or
/// `maxmemory-clients` configured, those bound it and close the client exactly as Redis.
const UNLIMITED_OUT_CAP: usize = 64 * 1024 * 1024;

/// What every write of the batched replies does first: counts the batch's commands (INFO,
/// from any connection), holds the replies for durability, and applies the output limit
/// to all that is unsent. Returns whether there is anything to write.
async fn begin_flush(srv: &Shared, sess: &mut Session) -> std::io::Result<bool> {
    cmd::flush_stats(srv, sess);
    if sess.wrote.swap(false, Ordering::Relaxed) {
        wait_durable(srv).await?;
    }
    if sess.out.len() > REPLY_CHUNK || sess.obuf_soft_since.is_some() {
        over_output_limit(srv, sess)?;
    }
    let out = &sess.out;
    if out.is_empty() {
        return Ok(false);
    }
    // One `writeToClient` in Redis's terms (`total_writes_processed`).
    Stats::bump(&srv.stats.writes_processed, 1);
    let mem = &sess.handle.mem;
    mem.out_peak.fetch_max(out.len(), Ordering::Relaxed);
    let queued = mem.push_bytes.load(Ordering::Relaxed);
    srv.peaks.record(srv.uptime_secs(), 0, out.len() + queued);
    mem.out_cap.store(out.capacity(), Ordering::Relaxed);
    Ok(true)
}

/// `n` more bytes of the replies reached the socket: they leave the buffer; once it is
/// empty, it is kept for the next batch (or released if it grew large).
fn sent(srv: &Shared, sess: &mut Session, n: usize) {
    srv.stats
        .net_output_bytes
        .fetch_add(n as u64, Ordering::Relaxed);
    let (out, mem) = (&mut sess.out, &sess.handle.mem);
    if n < out.len() {
        bytes::Buf::advance(out, n);
        mem.out_pending.store(out.len(), Ordering::Relaxed);
        return;
    }
    mem.out_pending.store(0, Ordering::Relaxed);
    out.clear();
    if out.capacity() > KEEP_BUF {
        *out = BytesMut::with_capacity(READ_CHUNK);
        mem.out_peak.store(0, Ordering::Relaxed);
    }
    mem.out_cap.store(out.capacity(), Ordering::Relaxed);
    if let Some(s) = &sess.subs {
        s.sub.written();
    }
}

/// Writes all the batched replies (and pushes), waiting for the socket to take them: before
/// a client waits (blocked, paused) or closes, and for pushes. A client killed while its
/// socket does not drain (a subscriber over its output buffer limit, CLIENT KILL) stops
/// waiting at once.
async fn flush<S: Transport>(
    stream: &mut S,
    srv: &Shared,
    sess: &mut Session,
    mut kill: Kill<'_, '_>,
) -> std::io::Result<()> {
    if !begin_flush(srv, sess).await? {
        sent(srv, sess, 0);
        return Ok(());
    }
    while !sess.out.is_empty() {
        // Written piece by piece so CLIENT LIST sees what is still pending (`omem`) while
        // a client does not read.
        sess.handle
            .mem
            .out_pending
            .store(sess.out.len(), Ordering::Relaxed);
        let n = tokio::select! {
            biased;
            r = stream.write(&sess.out) => r?,
            _ = kill.as_mut() => return Err(std::io::Error::other("client killed")),
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        sent(srv, sess, n);
    }
    // TLS records still held (the socket was full): out before the client waits or closes.
    if stream.backlog() {
        tokio::select! {
            biased;
            r = stream.flush() => r?,
            _ = kill.as_mut() => return Err(std::io::Error::other("client killed")),
        }
    }
    Ok(())
}

/// Writes what the socket takes now of the batched replies, without waiting: the rest stays
/// pending (CLIENT LIST `omem`, `tot-mem`, counted against the output limit and
/// `maxmemory-clients`) and goes out as the socket drains, while the connection keeps
/// reading and executing as Redis does (the main loop waits for both).
async fn flush_ready<S: Transport>(
    stream: &mut S,
    srv: &Shared,
    sess: &mut Session,
) -> std::io::Result<()> {
    if !begin_flush(srv, sess).await? {
        sent(srv, sess, 0);
        return Ok(());
    }
    while !sess.out.is_empty() {
        match stream.try_write_now(&sess.out) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => sent(srv, sess, n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                sess.handle
                    .mem
                    .out_pending
                    .store(sess.out.len(), Ordering::Relaxed);
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether a client with unsent replies may still be read from (see UNLIMITED_OUT_CAP).
fn may_read_more(srv: &Shared, sess: &Session) -> bool {
    if sess.out.len() <= UNLIMITED_OUT_CAP {
        return true;
    }
    let l = srv.normal_obuf.get();
    l.hard != 0 || l.soft != 0 || srv.config.num(hot().maxmemory_clients) != 0
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

/// Redis's `closeClientOnOutputBufferLimitReached` for a normal client's replies: what a
/// batch holds beyond the 16 KB reply buffer (Redis counts only its reply list) against
/// the `normal` class; over the hard limit, or over the soft one for longer than its
/// seconds, the client is closed and the replies are not sent. Subscribers and monitors
/// are held to their own queues' limits where those queues fill (`instance::pubsub`,
/// `instance::monitor`).
fn over_output_limit(srv: &Shared, sess: &mut Session) -> std::io::Result<()> {
    if sess.subs.is_some() || sess.monitor.is_some() {
        return Ok(());
    }
    let limits = srv.normal_obuf.get();
    if limits.hard == 0 && limits.soft == 0 {
        return Ok(());
    }
    let held = sess.out.len().saturating_sub(REPLY_CHUNK) as u64;
    if !limits.exceeded(held, limits.hard, &mut sess.obuf_soft_since) {
        return Ok(());
    }
    tracing::warn!(
        "Client id={} scheduled to be closed ASAP for overcoming of output buffer limits.",
        sess.id
    );
    srv.pubsub
        .obuf_disconnections
        .fetch_add(1, Ordering::Relaxed);
    sess.out.clear();
    Err(std::io::Error::other("output buffer limit"))
}

/// Appends the messages and confirmations queued for a subscribed session.
fn take_pushes(sess: &mut Session, scratch: &mut VecDeque<Push>) {
    if let Some(s) = &sess.subs {
        s.sub.drain_encode(scratch, &mut sess.out, sess.resp3);
    }
}

/// Appends the MONITOR lines fed to a monitoring session (after the reply of the command
/// that just ran: Redis feeds monitors once a command has replied).
#[inline]
fn take_monitor(sess: &mut Session) {
    if let Some(m) = &sess.monitor {
        m.drain(&mut sess.out);
    }
}

/// Appends the invalidations queued for this client (client-side caching), after the
/// reply of the command that just ran.
#[inline]
fn take_invalidations(sess: &mut Session) {
    if sess.handle.pushes.pending() {
        crate::instance::clients::Pushes::drain(&sess.handle, &mut sess.out, sess.resp3);
    }
}

/// What woke the connection loop.
enum Wake {
    /// Bytes read (0: closed or killed).
    Read(usize),
    /// Pub/Sub pushes or MONITOR lines are queued.
    Pushed,
    /// Invalidations are queued (client-side caching).
    Invalidated,
    /// This many more unsent reply bytes reached the socket.
    Wrote(usize),
    /// The idle timer: time to see whether the query buffer should be given back.
    Idle,
}

/// Redis's idle branch of `clientsCronResizeQueryBuffer`: a client that sent nothing for
/// more than [`IDLE_SHRINK_MS`] (since `last_read`: Redis's `lastinteraction` moves on
/// every read) gives back its query buffer's free space (all of the buffer when nothing
/// is pending; `parked` then means "allocate again when input comes"). Returns when to
/// look again, or `None` until the next read.
fn idle_shrink(
    h: &crate::instance::clients::ClientHandle,
    last_read: crate::clock::Instant,
    inbuf: &mut BytesMut,
    parked: &mut bool,
) -> Option<Duration> {
    let idle = crate::clock::Instant::now()
        .saturating_duration_since(last_read)
        .as_millis() as u64;
    if idle <= IDLE_SHRINK_MS {
        return Some(Duration::from_millis(IDLE_SHRINK_MS + 1 - idle));
    }
    if inbuf.capacity() - inbuf.len() > SHRINK_MIN_FREE {
        *inbuf = exact_copy(inbuf);
        *parked = true;
        report_input(h, inbuf);
    }
    None
}

/// A buffer holding just `b`'s bytes (the parser's offsets into it stay valid).
fn exact_copy(b: &BytesMut) -> BytesMut {
    if b.is_empty() {
        return BytesMut::new();
    }
    let mut n = BytesMut::with_capacity(b.len());
    n.extend_from_slice(b);
    n
}

/// Redis's busy branch of `clientsCronResizeQueryBuffer`, for buffers over
/// [`RESIZE_THRESHOLD`]: one more than twice its recent peak shrinks to the peak (and
/// what it holds), at most once per [`RESIZE_EVERY`]; the peak then restarts.
fn busy_shrink(inbuf: &mut BytesMut, peak: &mut usize, checked: &mut crate::clock::Instant) {
    let now = crate::clock::Instant::now();
    if now.saturating_duration_since(*checked) < RESIZE_EVERY {
        return;
    }
    *checked = now;
    let cap = inbuf.capacity();
    if cap - inbuf.len() > SHRINK_MIN_FREE && cap / 2 > (*peak).max(READ_CHUNK) {
        let keep = inbuf.len().max(*peak).max(READ_CHUNK);
        let mut n = BytesMut::with_capacity(keep);
        n.extend_from_slice(inbuf);
        *inbuf = n;
    }
    *peak = inbuf.len();
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
async fn test_faults<S: Transport>(
    srv: &Shared,
    stream: &mut S,
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
        flush(stream, srv, sess, kill.as_mut()).await?;
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
    maxmemory_clients: ParamRef,
}

fn hot() -> &'static Hot {
    static HOT: std::sync::OnceLock<Hot> = std::sync::OnceLock::new();
    HOT.get_or_init(|| {
        let r = |n| config::lookup(n).expect("standard parameter");
        Hot {
            timeout: r("timeout"),
            qbuf_limit: r("client-query-buffer-limit"),
            max_bulk: r("proto-max-bulk-len"),
            maxmemory_clients: r("maxmemory-clients"),
        }
    })
}

/// Waits for a blocked command's reply: served by a writer, or the timeout reply. Input that
/// arrives meanwhile is buffered (pipelined commands run after the reply, as in Redis).
/// `None` means the client went away (or was killed) while blocked.
async fn wait_blocked<S: Transport>(
    srv: &Arc<Shared>,
    stream: &mut S,
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
                        cmd::blocking::timed_out(srv, &b.waiter);
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
                Stats::bump(&srv.stats.reads_processed, 1);
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
        if seen.1 != 0 {
            *seen = (0, 0, 0);
            sess.handle.mem.multi.store(0, Ordering::Relaxed);
            sess.handle.mem.multi_cmds.store(0, Ordering::Relaxed);
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
    sess.handle
        .mem
        .multi_cmds
        .store(queue.len(), Ordering::Relaxed);
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

/// `maxmemory-clients`: this client's growth (its input, or replies it leaves unread) may
/// put the clients over it (Redis evicts before each command and before it sleeps); true
/// if that evicted this very client, which then ends.
fn evicted_self(srv: &Shared, h: &crate::instance::clients::ClientHandle) -> bool {
    if srv.config.num(hot().maxmemory_clients) == 0 {
        return false;
    }
    cmd::client::evict_after_read(srv, h);
    h.is_killed()
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
    crate::instance::state::Stats::bump(&srv.stats.qbuf_limit_disconnections, 1);
    tracing::warn!(
        "Closing client that reached max query buffer length: {} (qbuf initial bytes: {})",
        cmd::client::describe(srv, h),
        crate::instance::monitor::repr(&inbuf[..inbuf.len().min(64)])
    );
    true
}

/// Frames looked at ahead per read batch: enough for redis-benchmark's `-P 16` and more.
const AHEAD_MAX: usize = 64;

/// A frame of the read batch looked at ahead: its offset in the batch, its key's shard and
/// hash, and its third argument (a member, maybe) as a range of the batch.
type Ahead = (usize, KeyHint, Option<std::ops::Range<usize>>);

/// Finds the key (second argument) of each complete frame in a fresh read batch, with its
/// shard and hash, so `prefetch_ahead` can start their lookups' cache misses early. Done
/// once per batch: each frame is peeked at once, whatever the depth of the look-ahead.
fn look_ahead(inbuf: &[u8], peeked: &mut Vec<Peeked>, ahead: &mut Vec<Ahead>) {
    peeked.clear();
    ahead.clear();
    crate::protocol::parse::peek_keys(inbuf, AHEAD_MAX, peeked);
    // One command alone gains nothing: its lookup is next anyway.
    if peeked.len() > 1 {
        ahead.extend(peeked.drain(..).map(|p| {
            let member = p.third.filter(|_| names_a_member(&inbuf[p.name]));
            (p.at, Keyspace::key_hint(&inbuf[p.key]), member)
        }));
    }
}

/// Whether a command's third argument is likely a member of the set or hash at its key:
/// the hash commands (`H…`) and the set commands (`S…` but not `SET…`, whose third
/// argument is a string value, where a member stage would be a wasted lookup).
fn names_a_member(name: &[u8]) -> bool {
    match name {
        [h, ..] if h.eq_ignore_ascii_case(&b'h') => true,
        [s, e, t, ..] if s.eq_ignore_ascii_case(&b's') => {
            !(e.eq_ignore_ascii_case(&b'e') && t.eq_ignore_ascii_case(&b't'))
        }
        _ => false,
    }
}

/// Before running the command that ends at `pos` (bytes into the batch), moves each of the
/// next five frames' keys one stage closer to the cache (`Keyspace::prefetch`): the
/// fifth one's shard, the fourth one's index line, the third one's slot, the second one's
/// value, the next one's member. A command's data thus reach the cache over the five
/// commands before it. `rest` is the read buffer from `pos` on. Hints only: a frame that is
/// not what was peeked (another db after SELECT, a command whose key is elsewhere) costs a
/// wasted fetch, nothing else.
fn prefetch_ahead(
    srv: &Shared,
    db: usize,
    ahead: &[Ahead],
    next: &mut usize,
    pos: usize,
    rest: &[u8],
) {
    while *next < ahead.len() && ahead[*next].0 < pos {
        *next += 1;
    }
    for (i, (_, hint, member)) in ahead[*next..].iter().take(5).enumerate() {
        // The member's range was taken on the whole batch; `rest` starts at `pos`.
        let member = member
            .as_ref()
            .filter(|_| i == 0)
            .and_then(|m| rest.get(m.start - pos..m.end - pos));
        srv.ks.prefetch(db, *hint, i as u8 + 1, member);
    }
}

async fn run<S: Transport>(
    srv: &Arc<Shared>,
    stream: &mut S,
    sess: &mut Session,
) -> std::io::Result<()> {
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    // The replies of a read batch: the session's, so a handler may encode its reply there
    // itself (see `Session::direct_out`).
    sess.out = BytesMut::with_capacity(READ_CHUNK);
    sess.conn_out = true;
    let mut parser = Parser::default();
    // Every command's arguments, in one vector reused from command to command.
    let mut args: Vec<Bytes> = Vec::new();
    let handle = sess.handle.clone();
    // One long-lived registration for CLIENT KILL, rather than a new one per read.
    let kill = handle.kill.notified();
    tokio::pin!(kill);
    // Likewise for invalidations other connections queue (client-side caching); renewed
    // each time it fires.
    let invalidated = handle.pushes.notify.notified();
    tokio::pin!(invalidated);
    // Reused to move pushes out of the subscriber's queue (stays empty if never subscribed).
    let mut scratch: VecDeque<Push> = VecDeque::new();
    // The MULTI queue last reported (see `report_multi`).
    let mut multi_mem = (0usize, 0usize, 0usize);
    handle
        .mem
        .out_cap
        .store(sess.out.capacity(), Ordering::Relaxed);
    report_input(&handle, &inbuf);
    // Query buffer resizing (see `idle_shrink` and `busy_shrink`): released while idle
    // (`parked`), the most it held since the last check, and when that was. One timer per
    // connection, moved only when it fires: a busy connection pays nothing per read.
    let mut parked = false;
    let mut qpeak = 0usize;
    let mut resize_checked = crate::clock::Instant::now();
    let mut last_read = resize_checked;
    let idle_timer = tokio::time::sleep(Duration::from_millis(IDLE_SHRINK_MS + 1));
    tokio::pin!(idle_timer);
    let mut idle_armed = true;
    // The look-ahead of a read batch (see `prefetch_ahead`): each frame's offset and key.
    let mut peeked = Vec::new();
    let mut ahead: Vec<Ahead> = Vec::new();
    loop {
        if !parked && inbuf.capacity() - inbuf.len() < READ_CHUNK / 2 {
            inbuf.reserve(READ_CHUNK);
        }
        // `timeout` (seconds, 0 = never) closes idle clients, as Redis does; clients in
        // MULTI are idle like any other, pub/sub clients are exempt.
        let sub = sess.subs.as_ref().map(|s| s.sub.clone());
        let mon = sess.monitor.clone();
        let idle = match &sess.subs {
            Some(s) if s.active() => 0,
            _ => srv.config.num(hot().timeout),
        };
        // Replies not yet taken by the socket go out as it drains while the client is read
        // on (Redis keeps reading a client that does not read its replies).
        // (TLS: or records a write accepted are still held; a plain socket has none.)
        let pending = !sess.out.is_empty() || stream.backlog();
        let reading = sess.out.is_empty() || may_read_more(srv, sess);
        let (mut rd, mut wr) = stream.halves();
        let read = async {
            let read = async {
                if parked {
                    // The buffer was given back while idle: allocate once input is here.
                    std::future::poll_fn(|cx| S::poll_readable(&rd, cx)).await?;
                    inbuf.reserve(READ_CHUNK);
                }
                let r = rd.read_buf(&mut inbuf).await;
                // Redis's `total_reads_processed` counts end-of-file and error reads too.
                Stats::bump(&srv.stats.reads_processed, 1);
                r
            };
            if idle > 0 {
                match tokio::time::timeout(Duration::from_secs(idle as u64), read).await {
                    Ok(r) => r,
                    Err(_) => Ok(0),
                }
            } else {
                read.await
            }
        };
        // Never fires for a connection that never subscribed nor monitors.
        let pushed = async {
            match (&sub, &mon) {
                (None, None) => std::future::pending::<()>().await,
                (Some(s), None) => s.wait().await,
                (None, Some(m)) => m.wait().await,
                (Some(s), Some(m)) => tokio::select! {
                    _ = s.wait() => {},
                    _ = m.wait() => {},
                },
            }
        };
        let wake = tokio::select! {
            biased;
            r = wr.write(&sess.out), if pending => Wake::Wrote(r?),
            r = read, if reading => Wake::Read(r?),
            _ = pushed => Wake::Pushed,
            _ = invalidated.as_mut() => Wake::Invalidated,
            _ = kill.as_mut() => Wake::Read(0),
            _ = idle_timer.as_mut(), if idle_armed => Wake::Idle,
        };
        // The halves borrow the stream: given back before anything else writes to it.
        drop((rd, wr));
        let n = match wake {
            Wake::Read(n) => n,
            // An empty write pushed held TLS records out (see `Transport::backlog`).
            Wake::Wrote(0) if sess.out.is_empty() => continue,
            Wake::Wrote(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Wake::Wrote(n) => {
                sent(srv, sess, n);
                continue;
            }
            Wake::Pushed => {
                take_pushes(sess, &mut scratch);
                if sess.monitor.is_some() {
                    srv.monitors.refresh_limits(&srv.config);
                    take_monitor(sess);
                }
                flush(stream, srv, sess, kill.as_mut()).await?;
                continue;
            }
            Wake::Invalidated => {
                invalidated.set(handle.pushes.notify.notified());
                take_invalidations(sess);
                flush(stream, srv, sess, kill.as_mut()).await?;
                continue;
            }
            Wake::Idle => {
                // DEBUG PAUSE-CRON holds the shrink back, as it holds Redis's clientsCron.
                let paused = srv.cron_paused.load(Ordering::Relaxed);
                let shrunk = if paused {
                    Some(Duration::from_millis(CRON_PAUSED_RETRY_MS))
                } else {
                    idle_shrink(&handle, last_read, &mut inbuf, &mut parked)
                };
                match shrunk {
                    Some(again) => idle_timer
                        .as_mut()
                        .reset(tokio::time::Instant::now() + again),
                    None => idle_armed = false,
                }
                continue;
            }
        };
        if n == 0 || handle.is_killed() {
            return Ok(());
        }
        parked = false;
        idle_armed = true;
        qpeak = qpeak.max(inbuf.len());
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
        if evicted_self(srv, &handle) {
            return Ok(());
        }
        // The batch's clock (Session::mark): each command starts where the previous one
        // ended, so a command costs one clock read and its statistics are added to the
        // shared counters once per batch, not once per command. Reset after every wait.
        let batch_start = crate::clock::Instant::now();
        sess.mark = Some(batch_start);
        last_read = batch_start;
        // The batch ends inside a bulk argument whose room is reserved: not to be shrunk
        // (Redis never resizes below the pending bulk).
        let mid_bulk: bool;
        // A batch's replies are written as they pass this (not only at its end).
        let mut flush_at = sess.out.len() + KEEP_BUF;
        let batch_len = inbuf.len();
        let mut next_ahead = 0;
        look_ahead(&inbuf, &mut peeked, &mut ahead);
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
                            test_faults(srv, stream, sess, kill.as_mut(), &args, armed).await?
                        {
                            let reply = cmd::reject_injected(srv, sess, &args, &err);
                            write_reply(&mut sess.out, &reply, sess.resp3);
                            sess.mark = Some(crate::clock::Instant::now());
                            continue;
                        }
                        sess.mark = Some(crate::clock::Instant::now());
                    }
                    // Monitors are replicas to Redis, and replicas are never paused.
                    if srv.pause.maybe_active()
                        && sess.monitor.is_none()
                        && srv
                            .pause
                            .current(crate::clock::Clock::system().now_ms())
                            .is_some()
                    {
                        flush(stream, srv, sess, kill.as_mut()).await?;
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
                    // Only a line at COMMANDLOG's `large-request` size is noted in the
                    // session (its default never matches), and only while it runs.
                    let large = request >= size_limits.0;
                    if large {
                        sess.request = (request, size_limits.0);
                    }
                    if ahead.len() > 1 {
                        prefetch_ahead(
                            srv,
                            sess.db,
                            &ahead,
                            &mut next_ahead,
                            batch_len - inbuf.len(),
                            &inbuf,
                        );
                    }
                    let mut written = sess.out.len();
                    let reply = cmd::dispatch_in(srv, sess, &mut args);
                    if large {
                        sess.request = (0, u64::MAX);
                    }
                    // Pushes queued so far (including this command's own confirmations or
                    // its self-published messages) precede its reply, as in Redis.
                    take_pushes(sess, &mut scratch);
                    // A reply the handler encoded itself is already there (only when no
                    // pushes can be queued: `direct_out`), and counts as this line's.
                    if sess.subs.is_some() {
                        written = sess.out.len();
                    }
                    write_reply(&mut sess.out, &reply, sess.resp3);
                    let reply_len = (sess.out.len() - written) as u64;
                    if reply_len >= size_limits.1 {
                        cmd::commandlog_reply(srv, sess, &args, reply_len);
                    }
                    take_monitor(sess);
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
                        // INFO `clients_in_timeout_table`: blocked with a timeout.
                        handle.info.lock().block_timeout = blocked.b.deadline.is_some();
                        report_input(&handle, &inbuf);
                        // Replies so far go out now; this client waits, others don't.
                        flush(stream, srv, sess, kill.as_mut()).await?;
                        let r =
                            wait_blocked(srv, stream, &mut inbuf, &mut blocked.b, kill.as_mut())
                                .await;
                        handle.mem.argv.store(0, Ordering::Relaxed);
                        handle.info.lock().block_timeout = false;
                        match r? {
                            Some(reply) => {
                                // Served by another client's write (the pop is journaled
                                // before the hand-over): under `appendfsync always` the
                                // reply waits for its commit like any write's.
                                sess.wrote.store(true, Ordering::Relaxed);
                                write_reply(&mut sess.out, &reply, sess.resp3)
                            }
                            None => return Ok(()),
                        }
                        sess.mark = Some(crate::clock::Instant::now());
                    }
                    take_invalidations(sess);
                    if sess.close_after_reply {
                        flush(stream, srv, sess, kill.as_mut()).await?;
                        return Ok(());
                    }
                    // Redis checks the output limit as each reply is added.
                    if sess.out.len() > REPLY_CHUNK {
                        over_output_limit(srv, sess)?;
                    }
                    if sess.out.len() > flush_at {
                        flush_ready(stream, srv, sess).await?;
                        // Unsent replies stay: the next try when as much again is added.
                        flush_at = sess.out.len() + KEEP_BUF;
                        if !sess.out.is_empty() && evicted_self(srv, &handle) {
                            return Ok(());
                        }
                        sess.mark = Some(crate::clock::Instant::now());
                    }
                }
                Ok(Next::Incomplete { hint }) => {
                    mid_bulk = hint > 0;
                    if hint > 0 {
                        // Grow toward a declared bulk at most by what already arrived, or
                        // for a big argument by up to BIG_ARG_AHEAD at once (Redis reserves
                        // a big bulk's room ahead): a header declaring 500 MB whose data
                        // never comes must not make us allocate 500 MB; a real large value
                        // still grows geometrically.
                        let ahead = if hint >= BIG_ARG { BIG_ARG_AHEAD } else { 0 };
                        let grow = inbuf.len().max(READ_CHUNK).max(ahead);
                        inbuf.reserve(hint.min(qlimit).min(grow));
                    }
                    break;
                }
                Err(e) => {
                    srv.stats.error_replies.fetch_add(1, Ordering::Relaxed);
                    sess.out.extend_from_slice(&e.reply_line());
                    flush(stream, srv, sess, kill.as_mut()).await?;
                    return Ok(());
                }
            }
        }
        sess.mark = None;
        report_multi(sess, &mut multi_mem);
        if !sess.out.is_empty() {
            // The replies go out once the other connections ready now have run their
            // commands too, as Redis writes all its clients' replies after the event
            // loop's reads: the client is then woken once per round, not once per write.
            tokio::task::yield_now().await;
        }
        flush_ready(stream, srv, sess).await?;
        if !sess.out.is_empty() && evicted_self(srv, &handle) {
            return Ok(());
        }
        if inbuf.is_empty() && inbuf.capacity() > KEEP_BUF {
            inbuf = BytesMut::with_capacity(READ_CHUNK);
        } else if inbuf.is_empty() && inbuf.capacity() < READ_CHUNK {
            // The bytes consumed from the front come back when nothing else holds them
            // (no allocation): an idle client shows its whole read buffer, as Redis's.
            let _ = inbuf.try_reclaim(READ_CHUNK);
        } else if inbuf.capacity() > RESIZE_THRESHOLD
            && !mid_bulk
            && !srv.cron_paused.load(Ordering::Relaxed)
        {
            busy_shrink(&mut inbuf, &mut qpeak, &mut resize_checked);
        }
        report_input(&handle, &inbuf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_stage_only_for_set_and_hash_commands() {
        for yes in [
            &b"SADD"[..],
            b"sismember",
            b"HSET",
            b"hget",
            b"SREM",
            b"hincrby",
        ] {
            assert!(names_a_member(yes), "{yes:?}");
        }
        for no in [
            &b"SET"[..],
            b"setex",
            b"SETRANGE",
            b"GET",
            b"ZADD",
            b"LPUSH",
            b"S",
            b"",
        ] {
            assert!(!names_a_member(no), "{no:?}");
        }
    }

    #[test]
    fn busy_buffers_shrink_to_their_recent_peak() {
        let mut b = BytesMut::with_capacity(400 * 1024);
        b.extend_from_slice(b"*1\r\n");
        let long_ago = crate::clock::Instant::now() - Duration::from_secs(1);
        // The peak was the whole buffer: kept.
        let (mut peak, mut at) = (400 * 1024, long_ago);
        busy_shrink(&mut b, &mut peak, &mut at);
        assert!(b.capacity() >= 400 * 1024);
        assert_eq!(peak, 4, "the peak restarts from what is held");
        // Checked again too soon: kept, whatever the peak.
        busy_shrink(&mut b, &mut peak, &mut at);
        assert!(b.capacity() >= 400 * 1024);
        // A small recent peak: down to the read size, contents kept.
        at = long_ago;
        busy_shrink(&mut b, &mut peak, &mut at);
        assert!(b.capacity() >= READ_CHUNK && b.capacity() < 2 * READ_CHUNK);
        assert_eq!(&b[..], b"*1\r\n");
    }

    #[test]
    fn exact_copies_keep_the_bytes_only() {
        let mut b = BytesMut::with_capacity(1 << 20);
        assert_eq!(exact_copy(&b).capacity(), 0);
        b.extend_from_slice(b"*3\r\n$3\r\nset\r\n");
        let c = exact_copy(&b);
        assert_eq!(&c[..], &b[..]);
        assert!(c.capacity() < 64);
    }
}
