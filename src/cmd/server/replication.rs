//! The replication surface of a standalone primary with no replicas, as Redis 7.2 answers
//! it: ROLE, WAITAOF, REPLICAOF/SLAVEOF NO ONE. respite never replicates, so nothing can
//! acknowledge a write but the local durable store.

use super::super::args::{is, long_in_range};
use super::super::{errors, Cx};
use crate::num::parse_i64;
use crate::protocol::Reply;
use std::time::Duration;

/// `ROLE` of a primary: role, replication offset, replicas (none).
pub fn role(_cx: &mut Cx) -> Reply {
    Reply::Array(vec![
        Reply::bulk_static("master"),
        Reply::Int(0),
        Reply::Array(Vec::new()),
    ])
}

/// Redis `getTimeoutFromObjectOrReply` in milliseconds, with its overflow check against
/// the current time.
pub fn timeout(arg: &[u8], now_ms: u64) -> Result<u64, Reply> {
    let t = super::super::args::timeout_ms(arg)?;
    if t > 0 && t > (i64::MAX as u64).saturating_sub(now_ms) {
        return Err(errors::err(errors::TIMEOUT_OUT_OF_RANGE));
    }
    Ok(t)
}

/// `WAITAOF numlocal numreplicas timeout` (7.2): how many of "this server's AOF" and "the
/// replicas' AOFs" hold every write the connection made. The local one is the durable
/// engine's log: the answer forces a durable commit of everything appended so far and
/// reports whether it completed within the timeout. No replica ever acknowledges, so
/// there is nothing to wait for on their side (as WAIT, it answers at once).
pub fn waitaof(cx: &mut Cx) -> Reply {
    let numlocal = match long_in_range(&cx.args[1], 0, 1, None) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if let Err(e) = long_in_range(
        &cx.args[2],
        0,
        i64::MAX,
        Some("ERR value is out of range, must be positive"),
    ) {
        return e;
    }
    let t = match timeout(&cx.args[3], cx.now()) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let Some(p) = cx.srv.persist.get() else {
        if numlocal > 0 {
            return errors::err(
                "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
            );
        }
        // Redis without AOF: the fsynced offset is -1, below any client's.
        return Reply::Array(vec![Reply::Int(0), Reply::Int(0)]);
    };
    // A failing log makes nothing durable: report it without waiting.
    let acklocal = p.failure().is_none() && {
        // Timeout 0 blocks until done, as in Redis; a day stands for "forever".
        let wait = if t == 0 { 86_400_000 } else { t };
        super::super::off_core(|| p.sync(Duration::from_millis(wait)))
    };
    Reply::Array(vec![Reply::Int(acklocal.into()), Reply::Int(0)])
}

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (and SLAVEOF). A primary stays one: NO ONE
/// is OK; following another server is refused after Redis's own argument checks, since
/// respite cannot replicate.
pub fn replicaof(cx: &mut Cx) -> Reply {
    if is(&cx.args[1], "NO") && is(&cx.args[2], "ONE") {
        return Reply::OK;
    }
    if let Err(e) = long_in_range(&cx.args[2], 0, 65535, Some("ERR Invalid master port")) {
        return e;
    }
    errors::err("ERR REPLICAOF is not supported: respite is a standalone primary and cannot replicate from another server")
}

/// `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]` (replication.c): Redis's
/// argument checks, then, as a primary that never has replicas, its answer for that case.
pub fn failover(cx: &mut Cx) -> Reply {
    let a = cx.args;
    if a.len() == 2 && is(&a[1], "ABORT") {
        return errors::err("ERR No failover in progress.");
    }
    let (mut timeout, mut host, mut force) = (0i64, false, false);
    let mut j = 1;
    while j < a.len() {
        if is(&a[j], "TIMEOUT") && j + 1 < a.len() && timeout == 0 {
            timeout = match parse_i64(&a[j + 1]) {
                Some(t) => t,
                None => return errors::not_int(),
            };
            if timeout <= 0 {
                return errors::err("ERR FAILOVER timeout must be greater than 0");
            }
            j += 1;
        } else if is(&a[j], "TO") && j + 2 < a.len() && !host {
            if parse_i64(&a[j + 2]).is_none() {
                return errors::not_int();
            }
            host = true;
            j += 2;
        } else if is(&a[j], "FORCE") && !force {
            force = true;
        } else {
            return errors::syntax();
        }
        j += 1;
    }
    errors::err("ERR FAILOVER requires connected replicas.")
}
