//! Per-connection state that commands read and change (db, protocol, auth, MULTI, WATCH).

use super::clients::ClientHandle;
use crate::engine::shard::WatchFlag;
use bytes::Bytes;
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
    pub multi: Option<Multi>,
    /// Raised by any write to a watched key (or flush); checked by EXEC.
    pub watch_dirty: WatchFlag,
    /// (db, key, already expired at WATCH time) for every watched key.
    pub watched: Vec<(usize, Bytes, bool)>,
    pub reply_mode: ReplyMode,
    /// Set by QUIT and protocol errors: flush replies, then close.
    pub close_after_reply: bool,
    pub handle: Arc<ClientHandle>,
}

impl Session {
    pub fn new(handle: Arc<ClientHandle>, authenticated: bool) -> Session {
        Session {
            id: handle.id,
            db: 0,
            resp3: false,
            authenticated,
            multi: None,
            watch_dirty: Arc::new(AtomicBool::new(false)),
            watched: Vec::new(),
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            handle,
        }
    }
}
