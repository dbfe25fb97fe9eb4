//! Per-connection state that commands read and change (db, protocol, auth, MULTI, WATCH).

use super::clients::ClientHandle;
use crate::engine::shard::WatchFlag;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only.
    SkipNext,
    /// Skipping the current command's reply (set from SkipNext when a command starts).
    Skipping,
}

pub struct Multi {
    pub queue: Vec<Vec<Bytes>>,
    /// An error while queueing makes EXEC fail with EXECABORT.
    pub aborted: bool,
}

pub struct Session {
    pub id: u64,
    pub db: usize,
    pub resp3: bool,
    pub authenticated: bool,
    /// The ACL user (the default one until AUTH): changed in place by ACL SETUSER.
    pub user: Arc<super::acl::AclUser>,
    pub multi: Option<Multi>,
    /// Raised by any write to a watched key (or flush); checked by EXEC.
    pub watch_dirty: WatchFlag,
    /// (db, key, already expired at WATCH time) for every watched key.
    pub watched: Vec<(usize, Bytes, bool)>,
    pub reply_mode: ReplyMode,
    /// Set by QUIT and protocol errors: flush replies, then close.
    pub close_after_reply: bool,
    pub handle: Arc<ClientHandle>,
    /// Set by a handler that found nothing and wants to block (see `Cx::block`).
    pub block_request: Option<BlockRequest>,
    /// Set by dispatch once the client is registered as blocked; the connection awaits it.
    pub blocked: Option<Blocked>,
    /// Running the queued commands of EXEC: blocking commands must not block.
    pub in_exec: bool,
    /// When the next command starts: the previous command's end within a read batch (set
    /// by the connection per batch), so each command costs one clock read.
    pub mark: Option<crate::clock::Instant>,
    /// When this client's replies first held the soft `client-output-buffer-limit`
    /// (Redis's `obuf_soft_limit_reached_time`); cleared once they drop below it.
    pub obuf_soft_since: Option<std::time::Instant>,
    /// Command statistics not yet added to the shared counters (flushed per batch).
    pub pending: PendingStats,
    /// Pub/Sub state, created by the first (un)subscribe command; `None` keeps connections
    /// that never subscribe free of any pub/sub work.
    pub subs: Option<Box<super::pubsub::Subscriptions>>,
    /// Durable engine: a write ran since the replies were last flushed, so under
    /// `appendfsync always` they wait for the commit holding it.
    pub wrote: std::sync::atomic::AtomicBool,
    /// A test server's inspection session: its commands count nowhere (commandstats,
    /// error stats, keyspace hits) and touch no access times.
    pub internal: bool,
    /// Re-running a blocked command to serve it: the call is recorded once, when it ends
    /// (`cmd::observe::after_unblock`), not by the re-run.
    pub serving_blocked: bool,
    /// `CLIENT NO-TOUCH ON`: this client's lookups leave access times alone.
    pub no_touch: bool,
    /// The id of the command `cmd::execute` last completed for this session (the
    /// connection resets it to `usize::MAX` before each command line): COMMANDLOG's size
    /// logs take only a command that ran, and EXEC's or a script's own id comes last.
    pub last_run: usize,
    /// A command whose removed values are freed after its locks (`Access::drop_later`):
    /// its id and run time so far. It is recorded (commandstats, histogram, SLOWLOG,
    /// LATENCY) once the free is done and counted in, as Redis counts a DEL's free.
    pub observe_after_free: Option<(usize, u64)>,
    /// The current command line's size as received and COMMANDLOG's `large-request`
    /// threshold, set by the connection only while a line that large runs (otherwise
    /// `(0, u64::MAX)`, which never matches): every command the line runs (EXEC's and a
    /// script's included) is logged with it, as Valkey does.
    pub request: (u64, u64),
    /// In MONITOR mode: the lines fed to this client wait here for its connection.
    pub monitor: Option<Arc<super::monitor::Monitor>>,
    /// Scripts running in this session as monitors saw them start: while non-zero, the
    /// commands it runs are the script's (`[db lua]` in MONITOR).
    pub monitor_lua: u32,
    /// A connection's encoded replies not yet written (the connection's, with `conn_out`
    /// set; unused otherwise).
    pub out: BytesMut,
    pub conn_out: bool,
    /// Client-side caching: this client's `instance::tracking` flags (0: not tracking),
    /// kept here too so a read checks them without the table's lock.
    pub tracking: u8,
    /// `CLIENT CACHING yes|no` given for the next command (or transaction).
    pub caching: bool,
}

/// Per-connection command counters, flushed to `Shared` when the command changes or the
/// read batch ends: one set of shared atomic adds per run of commands, not per command.
#[derive(Default, Clone, Copy)]
pub struct PendingStats {
    pub id: usize,
    pub calls: u64,
    pub usec: u64,
    pub failed: u64,
    /// A run of `lat_n` latency-histogram samples of this command, all at counter
    /// `lat_idx` (see `cmd::observe`).
    pub lat_idx: u16,
    pub lat_n: u32,
}

/// What a blocking command asks for when it finds nothing to serve.
pub struct BlockRequest {
    pub keys: Vec<Bytes>,
    /// None blocks forever (`0` timeout).
    pub timeout: Option<std::time::Duration>,
    /// The reply when the timeout fires (nil or nil array, per command).
    pub timeout_reply: crate::protocol::Reply,
    /// The command to re-run when served, if it must differ from the original (e.g.
    /// `XREAD … $` resolved to a concrete ID at block time).
    pub args: Option<Vec<Bytes>>,
    /// How long the attempt that blocked ran, in µs (set by `cmd::execute`).
    pub exec_us: u64,
}

/// A client registered as blocked: its waiter and the channel its reply arrives on.
pub struct Blocked {
    pub waiter: Arc<super::blocking::Waiter>,
    pub rx: tokio::sync::oneshot::Receiver<crate::protocol::Reply>,
    pub deadline: Option<tokio::time::Instant>,
    pub timeout_reply: crate::protocol::Reply,
}

impl Session {
    /// In RESP2 subscribed mode: only (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING, QUIT and RESET
    /// are allowed.
    pub fn resp2_subscribed(&self) -> bool {
        !self.resp3 && self.subs.as_ref().is_some_and(|s| s.active())
    }

    /// Where a handler may encode its reply itself, returning [`Reply::NoReply`]
    /// (GET copies its value there once, under the shard lock, instead of into a reply of
    /// its own): the connection's output buffer, for a command the connection runs itself
    /// (not one of EXEC's or a script's, whose replies are collected), with replies on and
    /// nothing to come before the reply (no Pub/Sub pushes, no MONITOR feed).
    ///
    /// [`Reply::NoReply`]: crate::protocol::Reply::NoReply
    #[inline]
    pub fn direct_out(&mut self) -> Option<&mut BytesMut> {
        let direct = self.conn_out
            && !self.in_exec
            && self.reply_mode == ReplyMode::On
            && self.subs.is_none()
            && self.monitor.is_none();
        direct.then_some(&mut self.out)
    }

    /// A session of an unrestricted user of its own (in-process inspection, tests);
    /// connections use [`Session::with_user`].
    pub fn new(handle: Arc<ClientHandle>, authenticated: bool) -> Session {
        let all = super::acl::Acl::new(0).default_user();
        Session::with_user(handle, authenticated, all)
    }

    pub fn with_user(
        handle: Arc<ClientHandle>,
        authenticated: bool,
        user: Arc<super::acl::AclUser>,
    ) -> Session {
        Session {
            user,
            id: handle.id,
            db: 0,
            resp3: false,
            authenticated,
            obuf_soft_since: None,
            multi: None,
            watch_dirty: Arc::new(AtomicBool::new(false)),
            watched: Vec::new(),
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            handle,
            block_request: None,
            blocked: None,
            in_exec: false,
            mark: None,
            serving_blocked: false,
            pending: PendingStats::default(),
            wrote: std::sync::atomic::AtomicBool::new(false),
            subs: None,
            internal: false,
            no_touch: false,
            last_run: usize::MAX,
            observe_after_free: None,
            request: (0, u64::MAX),
            monitor: None,
            monitor_lua: 0,
            out: BytesMut::new(),
            conn_out: false,
            tracking: 0,
            caching: false,
        }
    }
}
