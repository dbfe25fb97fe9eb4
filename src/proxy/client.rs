//! One client connection to the proxy.
//!
//! Commands of a read batch are all sent to their nodes before the first reply is awaited;
//! replies are then written in request order. The plain single-node commands of a batch
//! are encoded straight into one buffer per node and sent as one request per node when the
//! batch ends ([`Outgoing`]); their replies come back as one chunk per node ([`Inflight`]).
//! Anything else that goes to a node first sends what is buffered, so every node still
//! sees a client's commands in order. Commands that need the replies before them (blocking
//! commands, transactions, WATCH, HELLO, EVALSHA that may be retried) first drain what is
//! pending, then run on their own.

use super::hub::{Incoming, Kind};
use super::local;
use super::node::{BatchWait, Dedicated, Replies, Wait};
use super::pubsub::{self, PubSub};
use super::resp::{self, Frame};
use super::route::{self, Route, Split, CROSSSLOT};
use super::session::{Fan, Pending, Session};
use super::Proxy;
use crate::protocol::{Parsed, Parser};
use bytes::{Buf, Bytes, BytesMut};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
// TSC-based: clock_gettime is dear in a VM (clock.rs).
use crate::clock::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Replies awaited before the batch is written.
const MAX_PENDING: usize = 1024;
/// Output is written once it grows past this.
const FLUSH_AT: usize = 1 << 20;
/// Subscription messages written to the client in one go.
const MESSAGES_BATCH: usize = 256 << 10;

/// Plain commands of the current read batch bound for one node, not sent yet.
#[derive(Default)]
struct Outgoing {
    buf: BytesMut,
    count: usize,
}

/// A node's batched replies, handed out in request order.
#[derive(Default)]
struct Inflight {
    /// Requests sent, oldest first, with how many commands each holds.
    sent: VecDeque<(BatchWait, usize)>,
    /// The replies of the oldest request being handed out, and how many are left.
    cur: Replies,
    left: usize,
}

impl Inflight {
    /// Length of the reply to the next batched command sent to this node, at the front of
    /// `cur.frames`; None when the connection failed before it came ([`Inflight::failure`]).
    async fn next_len(&mut self) -> Option<usize> {
        if self.left == 0 {
            let Some((rx, count)) = self.sent.pop_front() else {
                // Unreachable: each `Pending::Batched` was counted into a sent request.
                self.cur = Replies::default();
                return None;
            };
            self.cur = rx.await.unwrap_or_else(|_| Replies {
                frames: Bytes::new(),
                error: Some(LOST.into()),
            });
            self.left = count;
        }
        self.left -= 1;
        resp::frame_len(&self.cur.frames).ok().flatten()
    }

    fn failure(&self) -> Bytes {
        match &self.cur.error {
            Some(e) => resp::error(e),
            None => bad_reply(),
        }
    }
}

const LOST: &str = "ERR the proxy lost the node connection";

struct Multi {
    cmds: Vec<Vec<Bytes>>,
    node: Option<usize>,
    /// A command was refused while queueing: EXEC aborts.
    dirty: bool,
}

/// A client connection; `R` is its read half (plain TCP or TLS: the loop is compiled for
/// each, and its write half is the methods' `W`).
pub struct Client<R> {
    /// What the commands the proxy answers itself ([`local`]) see and change.
    s: Session,
    multi: Option<Multi>,
    /// WATCH pins the client to a dedicated connection of one node until EXEC/UNWATCH;
    /// the watched keys are kept to check at EXEC that they did not move meanwhile.
    watch: Option<(usize, Dedicated, Vec<Bytes>)>,
    quit: bool,
    /// Closing on an error while the client may still be sending: see [`linger`].
    linger: bool,
    pubsub: PubSub,
    rd: R,
    inbuf: BytesMut,
    /// Per node: batched commands not sent yet, and replies to come.
    outgoing: Vec<Outgoing>,
    inflight: Vec<Inflight>,
    /// Nodes with something in `outgoing`.
    dirty: Vec<usize>,
    /// Per pending reply, in order: the command's id and when it came, for its latency
    /// (none for a refused command).
    timing: VecDeque<Option<(usize, Instant)>>,
    /// When the last read completed: the arrival of the commands parsed from it.
    arrived: Instant,
}

fn err(text: &str) -> Pending {
    Pending::Ready(resp::error(text))
}

fn ok() -> Pending {
    Pending::Ready(Bytes::from_static(b"+OK\r\n"))
}

/// Serves a plain TCP client.
pub async fn serve(p: Arc<Proxy>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    serve_halves(p, rd, wr).await
}

/// Serves a TLS client (its handshake done).
pub async fn serve_tls(p: Arc<Proxy>, stream: tokio_rustls::server::TlsStream<TcpStream>) {
    let (rd, wr) = tokio::io::split(stream);
    serve_halves(p, rd, wr).await
}

async fn serve_halves<R, W>(p: Arc<Proxy>, rd: R, mut wr: W)
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    // `maxclients`, as Redis applies it: the error, then the connection is closed.
    if p.connected.fetch_add(1, Ordering::Relaxed) >= p.cfg.maxclients as u64 {
        p.connected.fetch_sub(1, Ordering::Relaxed);
        p.rejected_connections.fetch_add(1, Ordering::Relaxed);
        let _ = wr
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        let _ = wr.shutdown().await;
        return;
    }
    let id = p.next_client_id.fetch_add(1, Ordering::Relaxed) + 1;
    p.total_connections.fetch_add(1, Ordering::Relaxed);
    let mut c = Client {
        s: Session {
            authed: p.users.starts_authenticated(),
            p: p.clone(),
            id,
            resp3: false,
            name: None,
            fleet: Default::default(),
        },
        multi: None,
        watch: None,
        quit: false,
        linger: false,
        pubsub: PubSub::new(id),
        rd,
        inbuf: BytesMut::with_capacity(16 * 1024),
        outgoing: Vec::new(),
        inflight: Vec::new(),
        dirty: Vec::new(),
        timing: VecDeque::new(),
        arrived: Instant::now(),
    };
    let _ = c.run(&mut wr).await;
    if c.linger {
        linger(&mut c.rd, &mut wr).await;
    } else {
        // TLS: what is still held goes out, then close_notify (plain TCP: a FIN).
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), wr.shutdown()).await;
    }
    drop(c);
    p.connected.fetch_sub(1, Ordering::Relaxed);
}

/// Closing a socket with unread input makes the kernel reset the connection, and the
/// reset can destroy the error reply before the client reads it. So: end our side, then
/// read and discard for a moment (bounded in time), then close.
async fn linger<R, W>(rd: &mut R, wr: &mut W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let _ = wr.shutdown().await;
    let mut sink = vec![0u8; 64 * 1024];
    let discard = async { while matches!(rd.read(&mut sink).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), discard).await;
}

impl<R: AsyncRead + Unpin + Send> Client<R> {
    async fn run<W: AsyncWrite + Unpin + Send>(&mut self, wr: &mut W) -> std::io::Result<()> {
        let mut parser = Parser::default();
        let mut pend: Vec<Pending> = Vec::new();
        let mut out = BytesMut::with_capacity(16 * 1024);
        loop {
            let limits = crate::protocol::Limits {
                authenticated: self.s.authed,
                max_bulk_len: self.s.p.cfg.proto_max_bulk_len as i64,
            };
            match parser.parse(&mut self.inbuf, limits) {
                Ok(Parsed::Command(args)) => {
                    if args.is_empty() {
                        continue;
                    }
                    self.s.p.commands.fetch_add(1, Ordering::Relaxed);
                    self.handle(args, &mut pend, &mut out, wr).await?;
                    if self.quit || pend.len() >= MAX_PENDING {
                        self.drain(&mut pend, &mut out, wr).await?;
                        wr.write_all(&out).await?;
                        out.clear();
                        if self.quit {
                            return Ok(());
                        }
                    }
                }
                Ok(Parsed::Incomplete { .. }) => {
                    self.drain(&mut pend, &mut out, wr).await?;
                    // The batch is done: the next one routes by the fleet as it is then.
                    self.s.release_fleet();
                    if !out.is_empty() {
                        wr.write_all(&out).await?;
                        out.clear();
                    }
                    if !self.read_more(wr).await? {
                        return Ok(());
                    }
                    self.arrived = Instant::now();
                }
                Err(e) => {
                    self.drain(&mut pend, &mut out, wr).await?;
                    out.extend_from_slice(&e.reply_line());
                    wr.write_all(&out).await?;
                    return Ok(());
                }
            }
        }
    }

    /// Reads more of the request stream, meanwhile forwarding subscription messages.
    /// False when the client is gone, was idle for `timeout` (closed silently, as Redis
    /// does), went over `client-query-buffer-limit` (told so) or its subscriptions broke.
    async fn read_more<W: AsyncWrite + Unpin + Send>(
        &mut self,
        wr: &mut W,
    ) -> std::io::Result<bool> {
        // Everything written so far reaches the socket before the client is waited for
        // (TLS may hold a record after `write_all`; a plain socket's flush does nothing).
        wr.flush().await?;
        let idle = self.s.p.cfg.timeout;
        // Subscribers are exempt from the idle timeout, as in Redis.
        let deadline =
            (!idle.is_zero() && !self.pubsub.active()).then(|| tokio::time::Instant::now() + idle);
        if deadline.is_none() && self.pubsub.rx.is_none() {
            // The common case, kept to a plain read.
            if self.rd.read_buf(&mut self.inbuf).await? == 0 {
                return Ok(false);
            }
            return match self.over_query_limit() {
                Some(e) => super::link::send(wr, &e).await.map(|_| false),
                None => Ok(true),
            };
        }
        let mut batch = BytesMut::new();
        loop {
            tokio::select! {
                n = self.rd.read_buf(&mut self.inbuf) => {
                    if n? == 0 {
                        return Ok(false);
                    }
                    if let Some(e) = self.over_query_limit() {
                        super::link::send(wr, &e).await?;
                        return Ok(false);
                    }
                    return Ok(true);
                }
                msg = next_message(&mut self.pubsub.rx) => match msg {
                    Some(Ok(frame)) => {
                        batch.extend_from_slice(&frame);
                        let mut written = frame.len();
                        while batch.len() < MESSAGES_BATCH {
                            match self.pubsub.rx.as_mut().map(|rx| rx.try_recv()) {
                                Some(Ok(Ok(f))) => {
                                    batch.extend_from_slice(&f);
                                    written += f.len();
                                }
                                Some(Ok(Err(e))) => {
                                    tracing::info!("closing a subscribed client: {e}");
                                    return Ok(false);
                                }
                                _ => break,
                            }
                        }
                        // A client that stopped reading cannot hold its queue forever.
                        tokio::select! {
                            r = super::link::send(wr, &batch) => r?,
                            _ = self.pubsub.overflow.notified() => {
                                tracing::info!("closing a subscribed client: subscriber too slow: output limit reached");
                                return Ok(false);
                            }
                        }
                        batch.clear();
                        self.pubsub.queued.fetch_sub(written, Ordering::Relaxed);
                    }
                    Some(Err(e)) => {
                        tracing::info!("closing a subscribed client: {e}");
                        return Ok(false);
                    }
                    None => return Ok(false),
                },
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                    return Ok(false);
                }
            }
        }
    }

    /// The error for a client whose unparsed input went over `client-query-buffer-limit`
    /// (Redis closes such a client; the proxy says why first).
    fn over_query_limit(&mut self) -> Option<Bytes> {
        let limit = self.s.p.cfg.client_query_buffer_limit;
        self.linger = self.inbuf.len() > limit;
        self.linger.then(|| {
            tracing::warn!("closing a client that reached max query buffer length");
            resp::error(&format!(
                "ERR query buffer of {} bytes exceeds client-query-buffer-limit ({limit}); closing the connection",
                self.inbuf.len()
            ))
        })
    }

    /// Subscription messages queued so far go into `out` (before a reply that must follow
    /// them). A broken subscription ends the connection after this reply.
    fn take_messages(&mut self, out: &mut BytesMut) {
        let Some(rx) = &mut self.pubsub.rx else {
            return;
        };
        let mut taken = 0;
        loop {
            match rx.try_recv() {
                Ok(Ok(f)) => {
                    out.extend_from_slice(&f);
                    taken += f.len();
                }
                Ok(Err(e)) => {
                    tracing::info!("closing a subscribed client: {e}");
                    self.quit = true;
                    break;
                }
                Err(_) => break,
            }
        }
        self.pubsub.queued.fetch_sub(taken, Ordering::Relaxed);
    }

    /// Buffers a plain command for `node` (sent by [`Client::send_batches`]).
    fn batch(&mut self, node: usize, args: &[Bytes]) {
        if node >= self.outgoing.len() {
            // The node table grew (a reload): per-node state for the new entries.
            self.outgoing.resize_with(node + 1, Outgoing::default);
            self.inflight.resize_with(node + 1, Inflight::default);
        }
        let o = &mut self.outgoing[node];
        if o.count == 0 {
            self.dirty.push(node);
        }
        resp::encode_command(&mut o.buf, args);
        o.count += 1;
        if o.buf.len() >= FLUSH_AT {
            self.send_batch(node);
        }
    }

    fn send_batch(&mut self, node: usize) {
        let o = &mut self.outgoing[node];
        if o.count == 0 {
            return;
        }
        let bytes = o.buf.split().freeze();
        let count = std::mem::take(&mut o.count);
        let rx = self.s.fleet().nodes[node].send_batch(self.s.resp3, self.s.id, bytes, count);
        self.inflight[node].sent.push_back((rx, count));
    }

    /// Sends every node its buffered commands: before anything else goes to a node, and
    /// before replies are awaited.
    fn send_batches(&mut self) {
        while let Some(node) = self.dirty.pop() {
            self.send_batch(node);
        }
    }

    /// Awaits every pending reply in order into `out`, writing when it grows large.
    async fn drain<W: AsyncWrite + Unpin + Send>(
        &mut self,
        pend: &mut Vec<Pending>,
        out: &mut BytesMut,
        wr: &mut W,
    ) -> std::io::Result<()> {
        self.send_batches();
        let max = self.s.p.cfg.proto_max_bulk_len;
        // Read again only after waiting: the replies of one node chunk are ready together.
        let mut now = Instant::now();
        for p in pend.drain(..) {
            let timing = self.timing.pop_front().flatten();
            let mut bytes = match p {
                Pending::Batched(node) => {
                    let inf = &mut self.inflight[node];
                    let fresh = inf.left == 0;
                    let len = inf.next_len().await;
                    if fresh {
                        now = Instant::now();
                    }
                    record_latency(&self.s.p, timing, now);
                    match len {
                        // The common case: copied out of the node's chunk as it is.
                        Some(n) if n <= max && n < FLUSH_AT => {
                            out.extend_from_slice(&inf.cur.frames[..n]);
                            inf.cur.frames.advance(n);
                            if out.len() >= FLUSH_AT {
                                wr.write_all(out).await?;
                                out.clear();
                            }
                            continue;
                        }
                        Some(n) => inf.cur.frames.split_to(n),
                        None => inf.failure(),
                    }
                }
                p => {
                    let bytes = resolve(p).await;
                    now = Instant::now();
                    record_latency(&self.s.p, timing, now);
                    bytes
                }
            };
            if bytes.len() > max {
                // Node replies are held whole: the limit bounds what one reply may cost.
                bytes = resp::error(&format!(
                    "ERR reply of {} bytes exceeds the proxy's proto-max-bulk-len ({max})",
                    bytes.len()
                ));
            }
            if bytes.len() >= FLUSH_AT {
                // Large replies go out as they are, not copied.
                if !out.is_empty() {
                    wr.write_all(out).await?;
                    out.clear();
                }
                wr.write_all(&bytes).await?;
                continue;
            }
            out.extend_from_slice(&bytes);
            if out.len() >= FLUSH_AT {
                wr.write_all(out).await?;
                out.clear();
            }
        }
        Ok(())
    }

    async fn handle<W: AsyncWrite + Unpin + Send>(
        &mut self,
        args: Vec<Bytes>,
        pend: &mut Vec<Pending>,
        out: &mut BytesMut,
        wr: &mut W,
    ) -> std::io::Result<()> {
        let fleet = self.s.fleet();
        if fleet.moving.is_some() {
            // An online move: the keys' tags first go where this batch's fleet routes them.
            let fleet = fleet.clone();
            // Boxed: this rare path's future would otherwise grow every command's.
            if let Err(e) = Box::pin(super::online::prepare(&fleet, &args)).await {
                if let Some(m) = &mut self.multi {
                    m.dirty = true;
                }
                // Its one reply, with no latency kept (the command did not run).
                self.timing.push_back(None);
                pend.push(err(&e));
                return Ok(());
            }
        }
        let (cmd, r) = route::route_cmd(&args, &self.s.fleet().routing);
        // Exactly one reply is pushed to `pend` below for this command.
        self.timing.push_back(cmd.map(|id| (id, self.arrived)));
        if let Route::Reject(e) = &r {
            if let Some(m) = &mut self.multi {
                m.dirty = true;
            }
            pend.push(err(e));
            return Ok(());
        }
        let name = match &r {
            Route::Local(n) => *n,
            _ => "",
        };
        if !self.s.authed && !matches!(name, "auth" | "hello" | "quit" | "reset") {
            self.untimed();
            pend.push(err("NOAUTH Authentication required."));
            return Ok(());
        }
        if !self.s.resp3 && self.pubsub.active() && !pubsub::allowed_when_subscribed(name) {
            self.untimed();
            pend.push(err(&format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
            )));
            return Ok(());
        }
        if self.multi.is_some()
            && !matches!(
                name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
            )
        {
            // Its latency is EXEC's, as in Redis (where a queued command runs at EXEC).
            self.untimed();
            let reply = self.queue(args, r);
            pend.push(reply);
            return Ok(());
        }
        // Commands that must see the replies before them, or change how later ones go.
        let ordered = match &r {
            Route::Node { blocking, .. } => *blocking || self.known_evalsha(&args).is_some(),
            Route::Local(n) => {
                matches!(
                    *n,
                    "hello" | "exec" | "watch" | "unwatch" | "discard" | "reset" | "quit"
                ) || Kind::of(n).is_some()
            }
            _ => false,
        };
        if ordered {
            self.drain(pend, out, wr).await?;
        }
        if let Route::Local(n) = &r {
            if let Some((kind, subscribe)) = Kind::of(n) {
                // Messages that came before a subscribe precede its confirmation; those
                // that came before an unsubscribe was processed do too.
                if subscribe {
                    self.take_messages(out);
                }
                let reply = self.pubsub_command(kind, subscribe, &args).await;
                if !subscribe {
                    self.take_messages(out);
                }
                pend.push(reply);
                return Ok(());
            }
        }
        if let Route::Node {
            node,
            blocking: false,
        } = r
        {
            if self.known_evalsha(&args).is_none() && self.publish_extra(node, &args).is_none() {
                self.remember_script(&args);
                self.batch(node, &args);
                pend.push(Pending::Batched(node));
                return Ok(());
            }
        }
        // What goes to a node from here must follow what is buffered for it.
        self.send_batches();
        let reply = match r {
            Route::Local(name) => self.local(name, &args).await,
            Route::Node { node, blocking } => {
                if blocking {
                    Pending::Ready(self.blocking(node, &args).await)
                } else if let Some(body) = self.known_evalsha(&args) {
                    Pending::Ready(self.evalsha(node, &args, body).await)
                } else if let Some(extra) = self.publish_extra(node, &args) {
                    Pending::Publish(self.s.send(node, resp::command(&args)), extra)
                } else {
                    self.remember_script(&args);
                    Pending::Wait(self.s.send(node, resp::command(&args)))
                }
            }
            Route::Split { kind, parts } => self.split(kind, parts),
            Route::Reject(e) => err(&e),
        };
        pend.push(reply);
        Ok(())
    }

    /// The command being handled was refused or only queued: Redis keeps no latency for it.
    fn untimed(&mut self) {
        if let Some(t) = self.timing.back_mut() {
            *t = None;
        }
    }

    fn split(&self, kind: Split, parts: Vec<route::Part>) -> Pending {
        let nkeys = parts.iter().map(|p| p.slots.len()).sum();
        let waits = parts
            .into_iter()
            .map(|p| (self.s.send(p.node, resp::command(&p.args)), p.slots))
            .collect();
        Pending::Split(kind, nkeys, waits)
    }

    /// For PUBLISH/SPUBLISH reaching proxy subscribers that share a name: how many more
    /// receivers than the node counts (it sees the node's hub once per name).
    fn publish_extra(&self, node: usize, args: &[Bytes]) -> Option<i64> {
        if args.len() != 3 {
            return None;
        }
        let shard = args[0].eq_ignore_ascii_case(b"spublish");
        if !shard && !args[0].eq_ignore_ascii_case(b"publish") {
            return None;
        }
        let extra = self.s.fleet().nodes[node]
            .hub
            .extra_receivers(shard, &args[1]);
        (extra > 0).then_some(extra)
    }

    /// EVAL bodies are remembered so a later EVALSHA can be retried after NOSCRIPT.
    fn remember_script(&self, args: &[Bytes]) {
        if args.len() > 1
            && (args[0].eq_ignore_ascii_case(b"eval") || args[0].eq_ignore_ascii_case(b"eval_ro"))
        {
            self.s.p.remember_script(&args[1]);
        }
    }

    fn known_evalsha(&self, args: &[Bytes]) -> Option<Bytes> {
        let is_sha =
            args[0].eq_ignore_ascii_case(b"evalsha") || args[0].eq_ignore_ascii_case(b"evalsha_ro");
        if !is_sha || args.len() < 2 {
            return None;
        }
        let sha = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        self.s.p.scripts.lock().get(&sha).cloned()
    }

    /// EVALSHA, retried as EVAL when the node lost the script.
    async fn evalsha(&mut self, node: usize, args: &[Bytes], body: Bytes) -> Bytes {
        let first = wait_bytes(self.s.send(node, resp::command(args))).await;
        if !first.starts_with(b"-NOSCRIPT") {
            return first;
        }
        let mut eval = args.to_vec();
        eval[0] = if args[0].eq_ignore_ascii_case(b"evalsha_ro") {
            Bytes::from_static(b"EVAL_RO")
        } else {
            Bytes::from_static(b"EVAL")
        };
        eval[1] = body;
        wait_bytes(self.s.send(node, resp::command(&eval))).await
    }

    /// A blocking command on a dedicated connection (queued for one when all are taken).
    /// The client's socket is watched meanwhile: if it closes, the dedicated connection is
    /// dropped (it may still block); its input stays under `client-query-buffer-limit`.
    async fn blocking(&mut self, node: usize, args: &[Bytes]) -> Bytes {
        let n = self.s.fleet().nodes[node].clone();
        // Nothing of the batch is pending (blocking commands drain first): a move need not
        // wait for this client while it blocks.
        self.s.release_fleet();
        let got = {
            let acquire = n.dedicated(self.s.resp3);
            tokio::pin!(acquire);
            loop {
                tokio::select! {
                    d = &mut acquire => break d,
                    got = self.rd.read_buf(&mut self.inbuf) => {
                        if let Some(gone) = self.input_while_waiting(got) {
                            return gone;
                        }
                    }
                }
            }
        };
        let mut d = match got {
            Ok(d) => d,
            Err(e) => return resp::error(&e),
        };
        if let Err(e) = d.write(&resp::command(args)).await {
            return resp::error(&n.info.unavailable(&e));
        }
        loop {
            tokio::select! {
                r = d.read_reply() => {
                    return match r {
                        Ok(b) => {
                            n.release(d);
                            b
                        }
                        Err(e) => resp::error(&n.info.unavailable(&e)),
                    };
                }
                got = self.rd.read_buf(&mut self.inbuf) => {
                    if let Some(gone) = self.input_while_waiting(got) {
                        return gone;
                    }
                }
            }
        }
    }

    /// Input read while a blocking command waits: None to keep waiting, else the client is
    /// done (closed, or over the query buffer limit: the reply is the error).
    fn input_while_waiting(&mut self, got: std::io::Result<usize>) -> Option<Bytes> {
        if !matches!(got, Ok(n) if n > 0) {
            self.quit = true;
            return Some(Bytes::new());
        }
        let e = self.over_query_limit()?;
        self.quit = true;
        Some(e)
    }

    /// A command inside MULTI: checked and kept until EXEC (the node sees the whole
    /// transaction at once, on one dedicated connection).
    fn queue(&mut self, args: Vec<Bytes>, r: Route) -> Pending {
        let node = match r {
            Route::Node { node, .. } => Some(node),
            Route::Split { parts, .. } => {
                let first = parts.first().map(|p| p.node);
                if parts.iter().any(|p| Some(p.node) != first) {
                    return self.refuse_in_multi(CROSSSLOT);
                }
                first
            }
            Route::Local("ping" | "echo") => None,
            Route::Local(name) => {
                return self.refuse_in_multi(&format!(
                    "ERR '{}' cannot be used inside MULTI through the proxy",
                    name.replace('|', " ").to_ascii_uppercase()
                ))
            }
            Route::Reject(e) => return self.refuse_in_multi(&e),
        };
        let watched = self.watch.as_ref().map(|w| w.0);
        let Some(m) = &mut self.multi else {
            return err("ERR EXEC without MULTI");
        };
        if let Some(node) = node {
            match m.node.or(watched) {
                Some(n) if n != node => return self.refuse_in_multi(CROSSSLOT),
                _ => m.node = Some(node),
            }
        }
        m.cmds.push(args);
        Pending::Ready(Bytes::from_static(b"+QUEUED\r\n"))
    }

    fn refuse_in_multi(&mut self, e: &str) -> Pending {
        if let Some(m) = &mut self.multi {
            m.dirty = true;
        }
        err(e)
    }

    async fn local(&mut self, name: &'static str, args: &[Bytes]) -> Pending {
        match name {
            "multi" => {
                if self.multi.is_some() {
                    return err("ERR MULTI calls can not be nested");
                }
                self.multi = Some(Multi {
                    cmds: Vec::new(),
                    node: None,
                    dirty: false,
                });
                ok()
            }
            "discard" => {
                if self.multi.take().is_none() {
                    return err("ERR DISCARD without MULTI");
                }
                self.unwatch().await;
                ok()
            }
            "exec" => Pending::Ready(self.exec().await),
            "watch" => Pending::Ready(self.watch_keys(args).await),
            "unwatch" => {
                self.unwatch().await;
                ok()
            }
            "quit" => {
                self.quit = true;
                ok()
            }
            "proxy" => Pending::Ready(self.admin(args)),
            "ping" if !self.s.resp3 && self.pubsub.active() => {
                let arg = args.get(1).map_or(&b""[..], |a| &a[..]);
                Pending::Ready(pubsub::push(false, &[Some(b"pong"), Some(arg)], None))
            }
            "reset" => {
                self.pubsub = PubSub::new(self.s.id);
                self.multi = None;
                self.unwatch().await;
                self.s.resp3 = false;
                self.s.name = None;
                self.s.authed = self.s.p.users.starts_authenticated();
                Pending::Ready(Bytes::from_static(b"+RESET\r\n"))
            }
            _ => local::command(&mut self.s, name, args),
        }
    }

    /// `PROXY RELOAD` (the node list from the config file, as SIGHUP) and
    /// `PROXY REBALANCE [STATUS]` (the progress of an online move, as INFO's section).
    fn admin(&mut self, args: &[Bytes]) -> Bytes {
        let sub = args.get(1).map(|a| a.to_ascii_lowercase());
        match (sub.as_deref(), args.len()) {
            (Some(b"reload"), 2) => match super::online::reload(&self.s.p) {
                Ok(s) => resp::bulk(s.as_bytes()),
                Err(e) => resp::error(&e),
            },
            (Some(b"rebalance"), 2) => resp::bulk(super::online::info(&self.s.p).as_bytes()),
            (Some(b"rebalance"), 3) if args[2].eq_ignore_ascii_case(b"status") => {
                resp::bulk(super::online::info(&self.s.p).as_bytes())
            }
            (Some(b"help"), 2) => resp::array_of(&[
                resp::bulk(b"PROXY RELOAD -- read the node list again from the config file; added or removed nodes start an online rebalance"),
                resp::bulk(b"PROXY REBALANCE [STATUS] -- progress of the online rebalance"),
            ]),
            _ => resp::error("ERR unknown PROXY subcommand: try PROXY HELP"),
        }
    }

    async fn pubsub_command(&mut self, kind: Kind, subscribe: bool, args: &[Bytes]) -> Pending {
        let fleet = self.s.fleet().clone();
        let owner = |k: &[u8]| fleet.owner(k);
        let r = self
            .pubsub
            .command(
                &fleet.nodes,
                owner,
                self.s.resp3,
                kind,
                subscribe,
                &args[1..],
            )
            .await;
        match r {
            Ok(b) => Pending::Ready(b),
            Err(e) => err(&e),
        }
    }

    async fn watch_keys(&mut self, args: &[Bytes]) -> Bytes {
        if self.multi.is_some() {
            return resp::error("ERR WATCH inside MULTI is not allowed");
        }
        let fleet = self.s.fleet().clone();
        let keys: Vec<usize> = (1..args.len()).collect();
        if let Err(e) = super::online::prepare_keys(&fleet, args[1..].iter().map(|k| &k[..])).await
        {
            return resp::error(&e);
        }
        let Some(node) = route::single_node(args, &keys, &fleet.routing) else {
            return resp::error(CROSSSLOT);
        };
        let n = &fleet.nodes[node];
        let (mut d, mut watched) = match self.watch.take() {
            Some((w, d, keys)) if w == node => (d, keys),
            Some(w) => {
                self.watch = Some(w);
                return resp::error(CROSSSLOT);
            }
            None => match n.dedicated(self.s.resp3).await {
                Ok(d) => (d, Vec::new()),
                Err(e) => return resp::error(&e),
            },
        };
        let r = match d.write(&resp::command(args)).await {
            Ok(()) => d.read_prompt_reply().await,
            Err(e) => Err(e),
        };
        match r {
            Ok(b) => {
                watched.extend(args[1..].iter().cloned());
                self.watch = Some((node, d, watched));
                b
            }
            Err(e) => resp::error(&n.info.unavailable(&e)),
        }
    }

    async fn unwatch(&mut self) {
        if let Some((node, mut d, _)) = self.watch.take() {
            let ok = d.write(b"*1\r\n$7\r\nUNWATCH\r\n").await.is_ok()
                && d.read_prompt_reply().await.is_ok();
            if ok {
                self.s.fleet().nodes[node].release(d);
            }
        }
    }

    async fn exec(&mut self) -> Bytes {
        let Some(m) = self.multi.take() else {
            return resp::error("ERR EXEC without MULTI");
        };
        if m.dirty {
            self.unwatch().await;
            return resp::error("EXECABORT Transaction discarded because of previous errors.");
        }
        let fleet = self.s.fleet().clone();
        let mut m = m;
        // The fleet may have changed since the commands were queued: place them again.
        match place_queued(&fleet, &m.cmds).await {
            Ok(node) => m.node = node,
            Err(e) => {
                self.unwatch().await;
                return e;
            }
        }
        let watched = self.watch.take();
        if let Some((w, _, keys)) = &watched {
            let moved = super::online::prepare_keys(&fleet, keys.iter().map(|k| &k[..]))
                .await
                .is_err()
                || keys.iter().any(|k| fleet.owner(k) != *w)
                || m.node.is_some_and(|n| n != *w);
            if moved {
                // A watched key moved to another node since WATCH: as if it was touched.
                self.watch = watched;
                self.unwatch().await;
                return Bytes::from_static(if self.s.resp3 { b"_\r\n" } else { b"*-1\r\n" });
            }
        }
        let node = m
            .node
            .or(watched.as_ref().map(|w| w.0))
            .unwrap_or_else(|| fleet.owner(b""));
        let n = &fleet.nodes[node];
        let mut d = match watched {
            Some((_, d, _)) => d,
            None => match n.dedicated(self.s.resp3).await {
                Ok(d) => d,
                Err(e) => return resp::error(&e),
            },
        };
        let mut req = Vec::new();
        resp::encode_command(&mut req, &["MULTI"]);
        for c in &m.cmds {
            resp::encode_command(&mut req, c);
        }
        resp::encode_command(&mut req, &["EXEC"]);
        if let Err(e) = d.write(&req).await {
            return resp::error(&n.info.unavailable(&e));
        }
        // MULTI's OK, one QUEUED (or error) per command, then EXEC's reply.
        let mut last = Bytes::new();
        for _ in 0..m.cmds.len() + 2 {
            match d.read_prompt_reply().await {
                Ok(b) => last = b,
                Err(e) => return resp::error(&n.info.unavailable(&e)),
            }
        }
        n.release(d);
        last
    }
}

/// A command's latency, from its arrival to its reply being ready (`now`).
fn record_latency(p: &Proxy, timing: Option<(usize, Instant)>, now: Instant) {
    if let Some((id, at)) = timing {
        p.command_latency
            .record(id, now.saturating_duration_since(at));
    }
}

/// The node a transaction's commands go to under `fleet` (None: they name no keys);
/// during an online move their tags are made to be there first.
async fn place_queued(
    fleet: &super::fleet::Fleet,
    cmds: &[Vec<Bytes>],
) -> Result<Option<usize>, Bytes> {
    let mut node = None;
    for c in cmds {
        super::online::prepare(fleet, c)
            .await
            .map_err(|e| resp::error(&e))?;
        let n = match route::route(c, &fleet.routing) {
            Route::Node { node, .. } => node,
            Route::Split { parts, .. } => match parts.first() {
                Some(p) if parts.iter().all(|q| q.node == p.node) => p.node,
                _ => return Err(resp::error(CROSSSLOT)),
            },
            _ => continue,
        };
        match node {
            Some(m) if m != n => return Err(resp::error(CROSSSLOT)),
            _ => node = Some(n),
        }
    }
    Ok(node)
}

/// The next subscription message (never, for a client that never subscribed).
async fn next_message(
    rx: &mut Option<tokio::sync::mpsc::UnboundedReceiver<Incoming>>,
) -> Option<Incoming> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn wait_result(w: Wait) -> Result<Bytes, Bytes> {
    match w.await {
        Ok(Ok(b)) if matches!(b.first(), Some(b'-') | Some(b'!')) => Err(b),
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => Err(resp::error(&e)),
        Err(_) => Err(resp::error(LOST)),
    }
}

async fn wait_bytes(w: Wait) -> Bytes {
    wait_result(w).await.unwrap_or_else(|e| e)
}

fn bad_reply() -> Bytes {
    resp::error("ERR unexpected reply from a node")
}

/// Turns a pending reply into the bytes to send the client.
async fn resolve(pending: Pending) -> Bytes {
    match pending {
        Pending::Ready(b) => b,
        // Handed out by the client's `Inflight` (never reaches here).
        Pending::Batched(_) => bad_reply(),
        Pending::Wait(w) => wait_bytes(w).await,
        Pending::Split(kind, nkeys, waits) => {
            merge_split(kind, nkeys, waits).await.unwrap_or_else(|e| e)
        }
        Pending::Fan(kind, waits) => merge_fan(kind, waits).await.unwrap_or_else(|e| e),
        Pending::Scan(node, n, w) => scan_reply(node, n, w).await.unwrap_or_else(|e| e),
        Pending::Publish(w, extra) => {
            let b = wait_bytes(w).await;
            match resp::decode(&b) {
                Ok(Frame::Int(n)) => resp::int(n.saturating_add(extra)),
                _ => b,
            }
        }
    }
}

async fn merge_split(
    kind: Split,
    nkeys: usize,
    waits: Vec<(Wait, Vec<usize>)>,
) -> Result<Bytes, Bytes> {
    let mut values: Vec<Bytes> = vec![Bytes::new(); nkeys];
    let mut sum: i64 = 0;
    let mut first_err = None;
    // Every reply is awaited (even after an error) so none is left behind.
    for (w, slots) in waits {
        let r = wait_result(w).await;
        let b = match r {
            Ok(b) => b,
            Err(e) => {
                first_err.get_or_insert(e);
                continue;
            }
        };
        match (kind, resp::decode(&b)) {
            (Split::Values, Ok(Frame::Array(kids))) if kids.len() == slots.len() => {
                for (kid, slot) in kids.into_iter().zip(slots) {
                    if let Some(v) = values.get_mut(slot) {
                        *v = kid;
                    }
                }
            }
            (Split::Sum, Ok(Frame::Int(n))) => sum = sum.saturating_add(n),
            (Split::AllOk, Ok(Frame::Status(_))) => {}
            _ => {
                first_err.get_or_insert_with(bad_reply);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(match kind {
        Split::Values => resp::array_of(&values),
        Split::Sum => resp::int(sum),
        Split::AllOk => Bytes::from_static(b"+OK\r\n"),
    })
}

async fn merge_fan(kind: Fan, waits: Vec<Wait>) -> Result<Bytes, Bytes> {
    let mut replies = Vec::with_capacity(waits.len());
    let mut first_err = None;
    for w in waits {
        match wait_result(w).await {
            Ok(b) => replies.push(b),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    match kind {
        Fan::Sum => {
            let mut sum: i64 = 0;
            for b in &replies {
                match resp::decode(b) {
                    Ok(Frame::Int(n)) => sum = sum.saturating_add(n),
                    _ => return Err(bad_reply()),
                }
            }
            Ok(resp::int(sum))
        }
        Fan::Concat => {
            let mut all = Vec::new();
            for b in &replies {
                match resp::decode(b) {
                    Ok(Frame::Array(kids)) => all.extend(kids),
                    _ => return Err(bad_reply()),
                }
            }
            Ok(resp::array_of(&all))
        }
        Fan::ConcatUpTo(max) => {
            let mut all = Vec::new();
            for b in &replies {
                match resp::decode(b) {
                    Ok(Frame::Array(kids)) => all.extend(kids),
                    _ => return Err(bad_reply()),
                }
            }
            all.truncate(max);
            Ok(resp::array_of(&all))
        }
        Fan::AllOk => Ok(Bytes::from_static(b"+OK\r\n")),
        Fan::First => replies.into_iter().next().ok_or_else(bad_reply),
        Fan::And => {
            let mut acc: Option<Vec<bool>> = None;
            for b in &replies {
                let Ok(Frame::Array(kids)) = resp::decode(b) else {
                    return Err(bad_reply());
                };
                let flags: Vec<bool> = kids.iter().map(|k| &k[..] == b":1\r\n").collect();
                acc = Some(match acc {
                    None => flags,
                    Some(a) => a.iter().zip(flags).map(|(x, y)| *x && y).collect(),
                });
            }
            let ints: Vec<Bytes> = acc
                .unwrap_or_default()
                .into_iter()
                .map(|f| resp::int(f as i64))
                .collect();
            Ok(resp::array_of(&ints))
        }
    }
}

async fn scan_reply(node: usize, nodes: usize, w: Wait) -> Result<Bytes, Bytes> {
    let b = wait_result(w).await?;
    let Ok(Frame::Array(kids)) = resp::decode(&b) else {
        return Err(bad_reply());
    };
    let [cursor, keys] = &kids[..] else {
        return Err(bad_reply());
    };
    let Ok(Frame::Bulk(c)) = resp::decode(cursor) else {
        return Err(bad_reply());
    };
    let node_cursor = std::str::from_utf8(&c)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(bad_reply)?;
    let next = super::scan::next_cursor(node, nodes, node_cursor)
        .ok_or_else(|| resp::error("ERR a node's SCAN cursor is too large for the proxy"))?;
    Ok(resp::array_of(&[
        resp::bulk(next.to_string().as_bytes()),
        keys.clone(),
    ]))
}
