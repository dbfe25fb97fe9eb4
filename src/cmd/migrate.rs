//! MIGRATE (Redis 7.2 `cluster.c` `migrateCommand`): sends keys to another instance as
//! pipelined `RESTORE key ttl payload [REPLACE]` commands (after `AUTH` and, when the cached
//! connection has another db selected, `SELECT`), and deletes the keys the target accepted
//! unless COPY is given.
//!
//! Like Redis, the command holds the keyspace for the whole exchange, so it is atomic: it
//! takes the keyspace exclusively, as scripts and DEBUG SLEEP do, and every other command
//! waits for it as every command waits in Redis. Each step of the exchange (each 64 KiB
//! written, each reply line) must finish within `timeout`, so a silent or slow target holds
//! the keyspace at most that long per step; the waits run with the worker's core handed to
//! another thread (`off_core`), and the commands waiting for the keyspace wait off-core
//! too, so with `--threads 1` the server still accepts connections and serves SHUTDOWN.
//! (Holding only the keys' shards would let other keys be served meanwhile, but a shard
//! lock is waited for on the worker itself, by other commands and by the active expiry
//! sweep: one slow target would then stall a worker thread.) Connections are cached per
//! target ([`link`]).

mod link;

use super::table::{CommandSpec, KeySpec, Lock};
use super::{args, dump, errors, off_core, Cx};
use crate::protocol::Reply;
use crate::types::rdb::value;
use args::is;
use bytes::Bytes;
use link::{Conn, Fail};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "migrate",
    arity: -6,
    flags: &["write"],
    keys: KeySpec::Custom {
        first: 3,
        last: 3,
        step: 1,
        find: migrate_keys,
    },
    acl: &["keyspace", "write", "slow", "dangerous"],
    group: "generic",
    since: "2.6.0",
    summary: "Atomically transfers a key from one Redis instance to another.",
    complexity: "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.",
    handler: migrate,
    lock: Lock::All,
    ..CommandSpec::DEFAULT
}];

/// INFO `migrate_cached_sockets` of the server `srv`.
pub fn cached_sockets<T>(srv: &T) -> usize {
    link::count(srv)
}

const KEYS_NEED_EMPTY_KEY: &str =
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string";
const CONNECT_FAILED: &str = "IOERR error or timeout connecting to the client";
const WRITE_FAILED: &str = "IOERR error or timeout writing to target instance";
const READ_FAILED: &str = "IOERR error or timeout reading to target instance";

/// The keys as Redis finds them (`getKeysFromCommandWithSpecs`). Its key specs come first:
/// unless a `KEYS` word stands somewhere from the port to the last-but-one argument, they
/// name the key argument alone. Otherwise the KEYS spec is incomplete and Redis falls back
/// on `migrateGetKeys`: every argument after `KEYS` (the arguments of AUTH and AUTH2 are
/// skipped on the way), the key argument when no KEYS option is found, and none when KEYS
/// comes with a non-empty key argument (the command then fails).
fn migrate_keys(a: &[Bytes]) -> Vec<usize> {
    if a.len() < 4 {
        return Vec::new();
    }
    if !a[2..a.len() - 1].iter().any(|x| is(x, "KEYS")) {
        return vec![3];
    }
    let (mut first, mut num) = (3, 1);
    let mut i = 6;
    while i < a.len() {
        if is(&a[i], "KEYS") {
            if a[3].is_empty() {
                first = i + 1;
                num = a.len() - first;
            } else {
                num = 0;
            }
            break;
        }
        if is(&a[i], "AUTH") {
            i += 1;
        } else if is(&a[i], "AUTH2") {
            i += 2;
        }
        i += 1;
    }
    (first..first + num).collect()
}

/// The options after `timeout`, parsed in Redis's order and with its errors.
struct Opts<'a> {
    copy: bool,
    replace: bool,
    username: Option<&'a [u8]>,
    password: Option<&'a [u8]>,
    keys: &'a [Bytes],
}

fn parse(a: &[Bytes]) -> Result<Opts<'_>, Reply> {
    let mut o = Opts {
        copy: false,
        replace: false,
        username: None,
        password: None,
        keys: &a[3..4],
    };
    let mut j = 6;
    while j < a.len() {
        let more = a.len() - 1 - j;
        if is(&a[j], "COPY") {
            o.copy = true;
        } else if is(&a[j], "REPLACE") {
            o.replace = true;
        } else if is(&a[j], "AUTH") {
            if more < 1 {
                return Err(errors::syntax());
            }
            j += 1;
            o.password = Some(&a[j]);
        } else if is(&a[j], "AUTH2") {
            if more < 2 {
                return Err(errors::syntax());
            }
            o.username = Some(&a[j + 1]);
            o.password = Some(&a[j + 2]);
            j += 2;
        } else if is(&a[j], "KEYS") {
            if !a[3].is_empty() {
                return Err(errors::err(KEYS_NEED_EMPTY_KEY));
            }
            o.keys = &a[j + 1..];
            break;
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    Ok(o)
}

/// Appends one command in RESP to `out`.
fn push_command(out: &mut Vec<u8>, parts: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
    for p in parts {
        out.extend_from_slice(format!("${}\r\n", p.len()).as_bytes());
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
}

fn migrate(cx: &mut Cx) -> Reply {
    let a = cx.args;
    let o = match parse(a) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let timeout = match args::int(&a[5]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let dbid = match args::int(&a[4]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });

    // The keys that are here, serialized with their remaining TTL (at least 1 ms); none
    // here is not an error (they may just have expired).
    let now = cx.now();
    let mut moving: Vec<&Bytes> = Vec::new();
    let mut restores = Vec::new();
    for key in o.keys {
        let Some(e) = cx.ks.get(key) else { continue };
        let ttl = e.expire_at().map_or(0, |at| at.saturating_sub(now).max(1));
        let payload = value::dump(&e.value);
        let ttl = ttl.to_string();
        let mut parts: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), &payload];
        if o.replace {
            parts.push(b"REPLACE");
        }
        push_command(&mut restores, &parts);
        moving.push(key);
    }
    if moving.is_empty() {
        return Reply::status("NOKEY");
    }
    let job = Job {
        host: &a[1],
        port: &a[2],
        dbid,
        timeout,
        username: o.username,
        password: o.password,
        restores: &restores,
        count: moving.len(),
    };
    let srv = cx.srv;
    let (accepted, reply) = off_core(|| job.run(srv));
    if !o.copy {
        for &i in &accepted {
            dump::delete_moved(cx, moving[i]);
        }
    }
    reply
}

/// One MIGRATE's exchange with its target, ready to send.
struct Job<'a> {
    host: &'a [u8],
    port: &'a [u8],
    dbid: i64,
    timeout: Duration,
    username: Option<&'a [u8]>,
    password: Option<&'a [u8]>,
    /// The RESTORE commands, already in RESP.
    restores: &'a [u8],
    count: usize,
}

/// How a try went when it did not end the command.
enum Tried {
    /// The key indices the target accepted, the reply, and whether the connection is
    /// still usable (false after a socket error that came too late to retry).
    Done(Vec<usize>, Reply, bool),
    /// A socket error: retried once on a fresh connection unless it was a timeout.
    Socket { fail: Fail, writing: bool },
}

impl Job<'_> {
    /// Redis's `try_again` loop: at most one retry, after a socket error that was not a
    /// timeout and came before any key was acknowledged.
    fn run<T: Any + Send + Sync>(&self, owner: &Arc<T>) -> (Vec<usize>, Reply) {
        let mut may_retry = true;
        loop {
            let Some(mut taken) = link::take(owner, self.host, self.port) else {
                return (Vec::new(), errors::err(CONNECT_FAILED));
            };
            match self.exchange(&mut taken.conn, may_retry) {
                Tried::Done(accepted, reply, usable) => {
                    if usable {
                        link::give_back(owner, taken);
                    } else {
                        link::close(owner, taken);
                    }
                    return (accepted, reply);
                }
                Tried::Socket { fail, writing } => {
                    link::close(owner, taken);
                    if fail != Fail::Timeout && may_retry {
                        may_retry = false;
                        continue;
                    }
                    let msg = if writing { WRITE_FAILED } else { READ_FAILED };
                    return (Vec::new(), errors::err(msg));
                }
            }
        }
    }

    /// One try on `conn`. A socket error after some keys were acknowledged (or after the
    /// target refused one) still ends the command: those keys moved.
    fn exchange(&self, conn: &mut Conn, may_retry: bool) -> Tried {
        let mut req = Vec::new();
        if let Some(pass) = self.password {
            match self.username {
                Some(user) => push_command(&mut req, &[b"AUTH", user, pass]),
                None => push_command(&mut req, &[b"AUTH", pass]),
            }
        }
        let select = conn.last_dbid != self.dbid;
        if select {
            let db = self.dbid.to_string();
            push_command(&mut req, &[b"SELECT", db.as_bytes()]);
        }
        req.extend_from_slice(self.restores);
        if let Err(fail) = conn.send(&req, self.timeout) {
            return Tried::Socket {
                fail,
                writing: true,
            };
        }
        let mut auth_reply = Vec::new();
        if self.password.is_some() {
            match conn.read_line(self.timeout) {
                Ok(l) => auth_reply = l,
                Err(fail) => {
                    return Tried::Socket {
                        fail,
                        writing: false,
                    }
                }
            }
        }
        let mut select_reply = Vec::new();
        if select {
            match conn.read_line(self.timeout) {
                Ok(l) => select_reply = l,
                Err(fail) => {
                    return Tried::Socket {
                        fail,
                        writing: false,
                    }
                }
            }
        }
        let failed = |l: &[u8]| l.first() == Some(&b'-');
        let mut target_error: Option<String> = None;
        let mut accepted = Vec::new();
        let mut socket_fail = None;
        for j in 0..self.count {
            let line = match conn.read_line(self.timeout) {
                Ok(l) => l,
                Err(fail) => {
                    socket_fail = Some((fail, j));
                    break;
                }
            };
            let bad = [&auth_reply, &select_reply, &line]
                .into_iter()
                .find(|l| failed(l));
            match bad {
                Some(err) => {
                    if target_error.is_none() {
                        conn.last_dbid = -1;
                        target_error = Some(String::from_utf8_lossy(&err[1..]).into_owned());
                    }
                }
                None => accepted.push(j),
            }
        }
        if let Some((fail, j)) = socket_fail {
            if target_error.is_none() && j == 0 && may_retry && fail != Fail::Timeout {
                return Tried::Socket {
                    fail,
                    writing: false,
                };
            }
            let reply = match target_error {
                Some(e) => Reply::error(format!("ERR Target instance replied with error: {e}")),
                None => errors::err(READ_FAILED),
            };
            return Tried::Done(accepted, reply, false);
        }
        match target_error {
            Some(e) => Tried::Done(
                accepted,
                Reply::error(format!("ERR Target instance replied with error: {e}")),
                true,
            ),
            None => {
                conn.last_dbid = self.dbid;
                Tried::Done(accepted, Reply::OK, true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::migrate_keys;
    use bytes::Bytes;

    fn line(s: &str) -> Vec<Bytes> {
        s.split(' ')
            .map(|w| Bytes::copy_from_slice(if w == "''" { b"" } else { w.as_bytes() }))
            .collect()
    }

    #[test]
    fn keys_as_migrate_get_keys_finds_them() {
        assert_eq!(migrate_keys(&line("migrate h p k 0 5")), vec![3]);
        assert_eq!(
            migrate_keys(&line("migrate h p '' 0 5 copy keys a b")),
            vec![8, 9]
        );
        // AUTH's and AUTH2's arguments are skipped, even when they read "keys".
        assert_eq!(
            migrate_keys(&line("migrate h p '' 0 5 auth2 keys keys a b")),
            vec![3]
        );
        assert_eq!(
            migrate_keys(&line("migrate h p '' 0 5 auth keys keys a")),
            vec![9]
        );
        assert!(migrate_keys(&line("migrate h p k 0 5 keys a")).is_empty());
        // KEYS as the last argument: the key specs answer (the key argument).
        assert_eq!(migrate_keys(&line("migrate h p '' 0 5 keys")), vec![3]);
        assert_eq!(migrate_keys(&line("migrate h p '' 0 5 copy keys")), vec![3]);
    }
}
