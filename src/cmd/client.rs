//! CLIENT subcommands: ID, SETNAME/GETNAME, SETINFO (7.2), LIST, INFO, KILL, PAUSE/UNPAUSE,
//! REPLY, NO-EVICT, NO-TOUCH (7.2), UNBLOCK, TRACKING, CACHING, GETREDIR, TRACKINGINFO,
//! HELP.

use super::args::{self, is};
use super::{errors, CommandSpec, Cx, KeySpec};
use crate::instance::clients::{ClientHandle, ClientInfo};
use crate::instance::pause::PauseMode;
use crate::instance::session::{ReplyMode, Session};
use crate::instance::state::Shared;
use crate::instance::tracking;
use crate::protocol::Reply;
use bytes::Bytes;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "client",
        arity: -2,
        flags: &[],
        keys: KeySpec::None,
        acl: &["slow"],
        group: "connection",
        since: "2.4.0",
        summary: "A container for client connection commands",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                name: "client|help",
                arity: 2,
                flags: &["loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "5.0.0",
                summary: "Show helpful text about the different subcommands",
                complexity: "O(1)",
                handler: client_help,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|list",
                arity: -2,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous", "connection"],
                group: "connection",
                since: "2.4.0",
                summary: "Get the list of client connections",
                complexity: "O(N) where N is the number of client connections",
                handler: client_list,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|no-evict",
                arity: 3,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous", "connection"],
                group: "connection",
                since: "7.0.0",
                summary: "Set client eviction mode for the current connection",
                complexity: "O(1)",
                handler: client_no_evict,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|getname",
                arity: 2,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "2.6.9",
                summary: "Get the current connection name",
                complexity: "O(1)",
                handler: client_getname,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|pause",
                arity: -3,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous", "connection"],
                group: "connection",
                since: "2.9.50",
                summary: "Stop processing commands from clients for some time",
                complexity: "O(1)",
                handler: client_pause,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|reply",
                arity: 3,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "3.2.0",
                summary: "Instruct the server whether to reply to commands",
                complexity: "O(1)",
                handler: client_reply,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|kill",
                arity: -3,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous", "connection"],
                group: "connection",
                since: "2.4.0",
                summary: "Kill the connection of a client",
                complexity: "O(N) where N is the number of client connections",
                handler: client_kill,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|unblock",
                arity: -3,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous", "connection"],
                group: "connection",
                since: "5.0.0",
                summary: "Unblock a client blocked in a blocking command from a different connection",
                complexity: "O(log N) where N is the number of client connections",
                handler: client_unblock,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|id",
                arity: 2,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "5.0.0",
                summary: "Returns the client ID for the current connection",
                complexity: "O(1)",
                handler: client_id,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|info",
                arity: 2,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "6.2.0",
                summary: "Returns information about the current client connection.",
                complexity: "O(1)",
                handler: client_info,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|unpause",
                arity: 2,
                flags: &["admin", "noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["admin", "slow", "dangerous", "connection"],
                group: "connection",
                since: "6.2.0",
                summary: "Resume processing of clients that were paused",
                complexity: "O(N) Where N is the number of paused clients",
                handler: client_unpause,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|trackinginfo",
                arity: 2,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "6.2.0",
                summary: "Return information about server assisted client side caching for the current connection",
                complexity: "O(1)",
                handler: client_trackinginfo,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|tracking",
                arity: -3,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "6.0.0",
                summary: "Controls server-assisted client-side caching for the connection.",
                complexity: "O(1). Some options may introduce additional complexity.",
                handler: client_tracking,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|caching",
                arity: 3,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "6.0.0",
                summary: "Instructs the server whether to track the keys in the next request.",
                complexity: "O(1)",
                handler: client_caching,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|getredir",
                arity: 2,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "6.0.0",
                summary: "Get tracking notifications redirection client ID if any",
                complexity: "O(1)",
                handler: client_getredir,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|setname",
                arity: 3,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "2.6.9",
                summary: "Set the current connection name",
                complexity: "O(1)",
                handler: client_setname,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|setinfo",
                arity: 4,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "7.2.0",
                summary: "Set client or connection specific info",
                complexity: "O(1)",
                handler: client_setinfo,
                ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "client|no-touch",
                arity: 3,
                flags: &["noscript", "loading", "stale"],
                keys: KeySpec::None,
                acl: &["slow", "connection"],
                group: "connection",
                since: "7.2.0",
                summary: "Controls whether commands sent by the client will alter the LRU/LFU of the keys they access.",
                complexity: "O(1)",
                handler: client_no_touch,
                ..CommandSpec::DEFAULT
            },
        ],
        handler: client,
        ..CommandSpec::DEFAULT
    },
];

fn client(cx: &mut Cx) -> Reply {
    // Dispatch resolves every subcommand; reaching the container means none was given.
    errors::subcommand_syntax("client", cx.args.get(1).map_or(&b""[..], |a| &a[..]))
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: the reason is checked before the id, as in Redis.
fn client_unblock(cx: &mut Cx) -> Reply {
    let args = cx.args;
    if args.len() > 4 {
        return errors::subcommand_syntax("client", &args[1]);
    }
    let error = match args.get(3) {
        None => false,
        Some(a) if is(a, "TIMEOUT") => false,
        Some(a) if is(a, "ERROR") => true,
        Some(_) => return errors::err(errors::CLIENT_UNBLOCK_REASON),
    };
    let id = match args::int(&args[2]) {
        Ok(id) => id,
        Err(e) => return e,
    };
    let done = u64::try_from(id).is_ok_and(|id| super::blocking::unblock_client(cx.srv, id, error));
    Reply::Int(i64::from(done))
}

fn client_id(cx: &mut Cx) -> Reply {
    Reply::Int(cx.sess.id as i64)
}

/// Client names and SETINFO values: printable ASCII without spaces (CLIENT LIST stays
/// splittable on spaces).
fn valid_attr(v: &[u8]) -> bool {
    v.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn client_setname(cx: &mut Cx) -> Reply {
    let name = &cx.args[2];
    if !valid_attr(name) {
        return errors::err(errors::CLIENT_NAME);
    }
    cx.sess.handle.info.lock().name = (!name.is_empty()).then(|| Bytes::copy_from_slice(name));
    Reply::OK
}

fn client_getname(cx: &mut Cx) -> Reply {
    Reply::opt_bulk(cx.sess.handle.info.lock().name.clone())
}

fn client_setinfo(cx: &mut Cx) -> Reply {
    let (attr, val) = (&cx.args[2], &cx.args[3]);
    let lib_name = is(attr, "LIB-NAME");
    if !lib_name && !is(attr, "LIB-VER") {
        return Reply::error(format!(
            "ERR Unrecognized option '{}'",
            String::from_utf8_lossy(attr)
        ));
    }
    if !valid_attr(val) {
        return Reply::error(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            String::from_utf8_lossy(attr)
        ));
    }
    let v = (!val.is_empty()).then(|| Bytes::copy_from_slice(val));
    let mut info = cx.sess.handle.info.lock();
    if lib_name {
        info.lib_name = v;
    } else {
        info.lib_ver = v;
    }
    Reply::OK
}

/// What the calling connection knows better than its shared [`ClientInfo`].
struct SelfView {
    id: u64,
    db: usize,
    resp: u8,
    multi: i64,
    dirty: bool,
    argv_mem: usize,
    multi_mem: usize,
    /// Closes once this reply is written (a CLIENT KILL of itself earlier in a pipeline).
    closing: bool,
}

fn self_view(cx: &Cx) -> SelfView {
    view_of(cx.sess, cx.args)
}

fn view_of(sess: &crate::instance::session::Session, args: &[Bytes]) -> SelfView {
    SelfView {
        id: sess.id,
        db: sess.db,
        resp: if sess.resp3 { 3 } else { 2 },
        multi: sess.multi.as_ref().map_or(-1, |m| m.queue.len() as i64),
        dirty: sess.watch_dirty.load(std::sync::atomic::Ordering::Relaxed)
            && !sess.watched.is_empty(),
        argv_mem: args.iter().map(|a| a.len()).sum(),
        multi_mem: sess.multi.as_ref().map_or(0, |m| {
            m.queue.iter().flat_map(|c| c.iter().map(|a| a.len())).sum()
        }),
        closing: sess.close_after_reply,
    }
}

/// The session's own CLIENT INFO line while it runs `args` (ACL LOG's `client-info`).
pub fn session_line(
    srv: &crate::instance::state::Shared,
    sess: &crate::instance::session::Session,
    args: &[Bytes],
) -> String {
    let info = sess.handle.info.lock().clone();
    client_line(
        &sess.handle,
        &info,
        srv.clock.now_ms(),
        &view_of(sess, args),
    )
}

/// A client's line for the server log (Redis logs `catClientInfoString` when it closes a
/// client over a limit), as another client's CLIENT LIST would show it.
pub fn describe(srv: &crate::instance::state::Shared, h: &ClientHandle) -> String {
    let info = h.info.lock().clone();
    let none = SelfView {
        id: 0,
        db: 0,
        resp: 2,
        multi: -1,
        dirty: false,
        argv_mem: 0,
        multi_mem: 0,
        closing: false,
    };
    client_line(h, &info, srv.clock.now_ms(), &none)
}

/// One CLIENT LIST / CLIENT INFO line (networking.c `catClientInfoString`, 7.2 fields). The
/// memory fields are what the connection holds (instance/clients.rs `ConnMem`).
fn client_line(h: &ClientHandle, info: &ClientInfo, now_ms: u64, me: &SelfView) -> String {
    let is_me = h.id == me.id;
    let mut mem = h.mem.view();
    let (db, resp, multi) = if is_me {
        // The caller's own command line and MULTI queue are known exactly.
        mem.tot_mem = mem.tot_mem - mem.argv_mem - mem.multi_mem + me.argv_mem + me.multi_mem;
        mem.argv_mem = me.argv_mem;
        mem.multi_mem = me.multi_mem;
        (me.db, me.resp, me.multi)
    } else {
        // Commands queued since MULTI, as the connection last reported them.
        let queued = h.mem.multi_cmds.load(Ordering::Relaxed) as i64;
        let multi = if info.multi >= 0 { queued } else { -1 };
        (info.db, info.resp, multi)
    };
    let mut flags = String::new();
    if info.monitor {
        flags.push('O');
    }
    if info.is_pubsub() {
        flags.push('P');
    }
    if multi >= 0 {
        flags.push('x');
    }
    if info.blocked || info.postponed {
        flags.push('b');
    }
    for (bit, c) in [
        (tracking::ON, 't'),
        (tracking::BROKEN, 'R'),
        (tracking::BCAST, 'B'),
    ] {
        if info.tracking & bit != 0 {
            flags.push(c);
        }
    }
    if is_me && me.dirty {
        flags.push('d');
    }
    if is_me && me.closing {
        flags.push('c');
    }
    if h.is_killed() {
        flags.push('A');
    }
    if info.no_evict {
        flags.push('e');
    }
    if info.no_touch {
        flags.push('T');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let text = |b: &Option<Bytes>| {
        b.as_ref()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    };
    // Redis's `events`: `r` while reading, `w` while output waits for the socket.
    let events = if mem.obl + mem.omem > 0 { "rw" } else { "r" };
    let mut s = String::with_capacity(320);
    let _ = write!(
        s,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={db} sub={} \
         psub={} ssub={} multi={multi} watch={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} \
         rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events={events} cmd={} user={} \
         redir={} resp={resp} lib-name={} lib-ver={}",
        h.id,
        h.addr,
        h.laddr,
        info.fd,
        text(&info.name),
        now_ms.saturating_sub(h.created_ms) / 1000,
        now_ms.saturating_sub(
            h.last_interaction_ms
                .load(std::sync::atomic::Ordering::Relaxed)
        ) / 1000,
        info.sub,
        info.psub,
        info.ssub,
        info.watch,
        mem.qbuf,
        mem.qbuf_free,
        mem.argv_mem,
        mem.multi_mem,
        mem.rbs,
        mem.rbp,
        mem.obl,
        mem.oll,
        mem.omem,
        mem.tot_mem,
        // The last command's name, `NULL` before any (as CLIENT LIST shows it).
        super::registry()
            .specs
            .get(h.last_cmd_id())
            .map_or("NULL", |s| s.name),
        info.user,
        if info.tracking != 0 {
            info.redir as i64
        } else {
            -1
        },
        text(&info.lib_name),
        text(&info.lib_ver),
    );
    s
}

/// Client types for LIST/KILL TYPE (`getClientTypeByName`).
#[derive(Clone, Copy, PartialEq)]
enum ClientType {
    Normal,
    Replica,
    PubSub,
    Master,
}

fn client_type(name: &[u8]) -> Option<ClientType> {
    if is(name, "normal") {
        Some(ClientType::Normal)
    } else if is(name, "slave") || is(name, "replica") {
        Some(ClientType::Replica)
    } else if is(name, "pubsub") {
        Some(ClientType::PubSub)
    } else if is(name, "master") {
        Some(ClientType::Master)
    } else {
        None
    }
}

fn type_of(info: &ClientInfo) -> ClientType {
    if info.is_pubsub() {
        ClientType::PubSub
    } else {
        ClientType::Normal
    }
}

fn unknown_type(name: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR Unknown client type '{}'",
        String::from_utf8_lossy(name)
    ))
}

fn lines_for(cx: &Cx, clients: &[Arc<ClientHandle>], ty: Option<ClientType>) -> String {
    let now = cx.srv.clock.now_ms();
    let me = self_view(cx);
    let mut out = String::new();
    for h in clients {
        // Evicted or killed: Redis frees such a client at once, so it is not listed
        // (here its connection ends a moment later).
        if h.is_killed() && h.id != cx.sess.handle.id {
            continue;
        }
        let info = h.info.lock().clone();
        if ty.is_some_and(|t| type_of(&info) != t) {
            continue;
        }
        out.push_str(&client_line(h, &info, now, &me));
        out.push('\n');
    }
    out
}

fn client_list(cx: &mut Cx) -> Reply {
    // Redis evicts clients before each command: the list shows what is left.
    evict_clients(cx.srv);
    let a = cx.args;
    let all = cx.srv.clients.all();
    let text = if a.len() == 4 && is(&a[2], "TYPE") {
        let Some(t) = client_type(&a[3]) else {
            return unknown_type(&a[3]);
        };
        lines_for(cx, &all, Some(t))
    } else if a.len() > 3 && is(&a[2], "ID") {
        let mut picked = Vec::new();
        for id in &a[3..] {
            let Some(id) = crate::num::parse_i64(id) else {
                return errors::err("ERR Invalid client ID");
            };
            if let Some(h) = u64::try_from(id).ok().and_then(|i| cx.srv.clients.get(i)) {
                picked.push(h);
            }
        }
        lines_for(cx, &picked, None)
    } else if a.len() != 2 {
        return errors::syntax();
    } else {
        lines_for(cx, &all, None)
    };
    Reply::Verbatim(Bytes::from(text))
}

fn client_info(cx: &mut Cx) -> Reply {
    let me = cx.sess.handle.clone();
    Reply::Verbatim(Bytes::from(lines_for(cx, &[me], None)))
}

/// CLIENT KILL filters (new form).
#[derive(Default)]
struct KillFilter<'a> {
    addr: Option<&'a [u8]>,
    laddr: Option<&'a [u8]>,
    ty: Option<ClientType>,
    id: Option<u64>,
    user: Option<&'a [u8]>,
    skipme: bool,
    /// Redis 7.4's MAXAGE: only clients connected at least this many seconds.
    max_age: Option<u64>,
}

fn parse_kill<'a>(srv: &Shared, a: &'a [Bytes]) -> Result<KillFilter<'a>, Reply> {
    let mut f = KillFilter {
        skipme: true,
        ..Default::default()
    };
    if a.len() == 3 {
        // Old form: CLIENT KILL addr:port, which may kill the caller.
        f.addr = Some(&a[2]);
        f.skipme = false;
        return Ok(f);
    }
    let mut i = 2;
    while i < a.len() {
        let (opt, val) = match a.get(i + 1) {
            Some(v) => (&a[i], v),
            None => return Err(errors::syntax()),
        };
        if is(opt, "ID") {
            match crate::num::parse_i64(val) {
                Some(n) if n >= 1 => f.id = Some(n as u64),
                _ => return Err(errors::err("ERR client-id should be greater than 0")),
            }
        } else if is(opt, "MAXAGE") {
            match crate::num::parse_i64(val) {
                None => return Err(errors::err("ERR maxage is not an integer or out of range")),
                Some(n) if n <= 0 => {
                    return Err(errors::err("ERR maxage should be greater than 0"))
                }
                Some(n) => f.max_age = Some(n as u64),
            }
        } else if is(opt, "TYPE") {
            f.ty = Some(client_type(val).ok_or_else(|| unknown_type(val))?);
        } else if is(opt, "ADDR") {
            f.addr = Some(val);
        } else if is(opt, "LADDR") {
            f.laddr = Some(val);
        } else if is(opt, "USER") {
            if srv.acl.get(val).is_none() {
                return Err(Reply::error(format!(
                    "ERR No such user '{}'",
                    String::from_utf8_lossy(val)
                )));
            }
            f.user = Some(val);
        } else if is(opt, "SKIPME") {
            f.skipme = if is(val, "YES") {
                true
            } else if is(val, "NO") {
                false
            } else {
                return Err(errors::syntax());
            };
        } else {
            return Err(errors::syntax());
        }
        i += 2;
    }
    Ok(f)
}

fn client_kill(cx: &mut Cx) -> Reply {
    let f = match parse_kill(cx.srv, cx.args) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let me = cx.sess.id;
    let now_s = cx.srv.clock.now_ms() / 1000;
    let mut killed = 0;
    for h in cx.srv.clients.all() {
        let info = h.info.lock().clone();
        let matches = f.addr.is_none_or(|a| a == h.addr.to_string().as_bytes())
            && f.max_age
                .is_none_or(|age| now_s.saturating_sub(h.created_ms / 1000) >= age)
            && f.laddr.is_none_or(|a| a == h.laddr.to_string().as_bytes())
            && f.ty.is_none_or(|t| type_of(&info) == t)
            && f.id.is_none_or(|id| id == h.id)
            && f.user.is_none_or(|u| u == info.user.as_bytes())
            && !(h.id == me && f.skipme);
        if !matches {
            continue;
        }
        if h.id == me {
            // Redis closes the caller after this reply.
            cx.sess.close_after_reply = true;
        } else {
            h.kill();
        }
        killed += 1;
    }
    if cx.args.len() == 3 {
        if killed == 0 {
            errors::err("ERR No such client")
        } else {
            Reply::OK
        }
    } else {
        Reply::Int(killed)
    }
}

/// `maxmemory-clients` in bytes, 0 when off (Redis `getClientEvictionLimit`): a
/// percentage is of `maxmemory` (off while that is 0), and never under 128 KB, so a bad
/// setting cannot cut every client off.
pub fn eviction_limit(srv: &Shared) -> usize {
    let v = srv.config.get_i64("maxmemory-clients");
    let bytes = if v < 0 {
        let max = srv.config.get_u64("maxmemory");
        if max == 0 {
            return 0;
        }
        (max as f64 * (-(v as f64)) / 100.0) as u64
    } else if v > 0 {
        v as u64
    } else {
        return 0;
    };
    usize::try_from(bytes).unwrap_or(usize::MAX).max(128 * 1024)
}

/// The connection loop, after a read, while `maxmemory-clients` is set: sums the clients
/// if this one now holds a good part of the limit, or if no one did for a while (the
/// cron covers clients that grow without reading, by their output).
pub fn evict_after_read(srv: &Shared, me: &ClientHandle) {
    let limit = eviction_limit(srv);
    if limit == 0 {
        return;
    }
    let now = srv.clock.now_us();
    let last = srv.client_eviction.last_check_us.load(Ordering::Relaxed);
    if me.mem.total() >= limit / 8
        || now.saturating_sub(last) >= crate::instance::clients::Eviction::EVERY_US
    {
        evict_clients(srv);
    }
}

/// Redis `evictClients`: while the normal and pub/sub clients together hold at least
/// `maxmemory-clients`, closes the ones that may be evicted (not `CLIENT NO-EVICT on`) by
/// memory bucket, largest first
/// ([`crate::instance::clients::Eviction::order`]), counting each in INFO
/// `evicted_clients`. Returns the memory of the clients it closed, which their
/// connections give back as they end (Redis frees them on the spot).
pub fn evict_clients(srv: &Shared) -> usize {
    let limit = eviction_limit(srv);
    if limit == 0 {
        return 0;
    }
    let ev = &srv.client_eviction;
    ev.last_check_us
        .store(srv.clock.now_us(), Ordering::Relaxed);
    let mut total = 0usize;
    let mut candidates = Vec::new();
    for h in srv.clients.all() {
        // Already closing: its memory is about to go.
        if h.is_killed() {
            continue;
        }
        let used = h.mem.total();
        total += used;
        if !h.info.lock().no_evict {
            candidates.push((used, h));
        }
    }
    if total < limit {
        ev.warned.store(false, Ordering::Relaxed);
        return 0;
    }
    ev.order(&mut candidates);
    let mut freed = 0;
    for (used, h) in candidates {
        if total < limit {
            return freed;
        }
        tracing::info!("Evicting client: {}", describe(srv, &h));
        h.kill();
        ev.evicted.fetch_add(1, Ordering::Relaxed);
        total -= used;
        freed += used;
    }
    if total >= limit && !ev.warned.swap(true, Ordering::Relaxed) {
        tracing::warn!("Over client maxmemory after evicting all evictable clients");
    }
    freed
}

fn client_pause(cx: &mut Cx) -> Reply {
    let a = cx.args;
    if a.len() > 4 {
        return errors::subcommand_syntax("client", &a[1]);
    }
    let mode = match a.get(3) {
        None => PauseMode::All,
        Some(m) if is(m, "WRITE") => PauseMode::Write,
        Some(m) if is(m, "ALL") => PauseMode::All,
        Some(_) => return errors::err("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let ms = match args::timeout_ms(&a[2]) {
        Ok(ms) => ms,
        Err(e) => return e,
    };
    // Pauses run on real time (conn.rs checks them against the system clock).
    let now = crate::clock::Clock::system().now_ms();
    let until = if ms == 0 {
        0
    } else {
        match now.checked_add(ms).filter(|u| *u <= i64::MAX as u64) {
            Some(u) => u,
            None => return errors::err(errors::TIMEOUT_OUT_OF_RANGE),
        }
    };
    cx.srv.pause.pause(until, mode);
    Reply::OK
}

fn client_unpause(cx: &mut Cx) -> Reply {
    cx.srv.pause.unpause();
    Reply::OK
}

fn client_reply(cx: &mut Cx) -> Reply {
    let v = &cx.args[2];
    if is(v, "ON") {
        cx.sess.reply_mode = ReplyMode::On;
        Reply::OK
    } else if is(v, "OFF") {
        cx.sess.reply_mode = ReplyMode::Off;
        Reply::NoReply
    } else if is(v, "SKIP") {
        if cx.sess.reply_mode != ReplyMode::Off {
            cx.sess.reply_mode = ReplyMode::SkipNext;
        }
        Reply::NoReply
    } else {
        errors::syntax()
    }
}

fn on_off(v: &[u8]) -> Option<bool> {
    if is(v, "ON") {
        Some(true)
    } else if is(v, "OFF") {
        Some(false)
    } else {
        None
    }
}

fn client_no_evict(cx: &mut Cx) -> Reply {
    match on_off(&cx.args[2]) {
        Some(on) => {
            cx.sess.handle.info.lock().no_evict = on;
            Reply::OK
        }
        None => errors::syntax(),
    }
}

fn client_no_touch(cx: &mut Cx) -> Reply {
    match on_off(&cx.args[2]) {
        Some(on) => {
            cx.sess.handle.info.lock().no_touch = on;
            cx.sess.no_touch = on;
            Reply::OK
        }
        None => errors::syntax(),
    }
}

/// Turns client-side caching off for a session (CLIENT TRACKING off, RESET, a closed
/// connection).
pub fn tracking_off(srv: &Shared, sess: &mut Session) {
    if sess.tracking != 0 {
        srv.tracking.disable(srv, &sess.handle);
        sess.tracking = 0;
        sess.caching = false;
    }
}

/// CLIENT TRACKING on|off [REDIRECT id] [BCAST] [PREFIX p]... [OPTIN] [OPTOUT] [NOLOOP]:
/// options and their checks in Redis's order and texts (networking.c).
fn client_tracking(cx: &mut Cx) -> Reply {
    let a = cx.args;
    let mut redirect: i64 = 0;
    let mut flags = 0u8;
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "redirect") && more {
            j += 1;
            if redirect != 0 {
                return errors::err("ERR A client can only redirect to a single other client");
            }
            redirect = match args::int(&a[j]) {
                Ok(n) => n,
                Err(e) => return e,
            };
            // The target must exist now, though it may go away later.
            if u64::try_from(redirect)
                .ok()
                .and_then(|id| cx.srv.clients.get(id))
                .is_none()
            {
                return errors::err("ERR The client ID you want redirect to does not exist");
            }
        } else if is(&a[j], "bcast") {
            flags |= tracking::BCAST;
        } else if is(&a[j], "optin") {
            flags |= tracking::OPTIN;
        } else if is(&a[j], "optout") {
            flags |= tracking::OPTOUT;
        } else if is(&a[j], "noloop") {
            flags |= tracking::NOLOOP;
        } else if is(&a[j], "prefix") && more {
            j += 1;
            prefixes.push(a[j].clone());
        } else {
            return errors::syntax();
        }
        j += 1;
    }
    if is(&a[2], "off") {
        tracking_off(cx.srv, cx.sess);
        return Reply::OK;
    }
    if !is(&a[2], "on") {
        return errors::syntax();
    }
    let cur = cx.sess.tracking;
    if flags & tracking::BCAST == 0 && !prefixes.is_empty() {
        return errors::err("ERR PREFIX option requires BCAST mode to be enabled");
    }
    if cur != 0 && (cur & tracking::BCAST) != (flags & tracking::BCAST) {
        return errors::err(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        );
    }
    if flags & tracking::BCAST != 0 && flags & (tracking::OPTIN | tracking::OPTOUT) != 0 {
        return errors::err("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if flags & tracking::OPTIN != 0 && flags & tracking::OPTOUT != 0 {
        return errors::err("ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if (flags & tracking::OPTIN != 0 && cur & tracking::OPTOUT != 0)
        || (flags & tracking::OPTOUT != 0 && cur & tracking::OPTIN != 0)
    {
        return errors::err(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        );
    }
    if flags & tracking::BCAST != 0 {
        if let Err(e) = cx.srv.tracking.check_prefixes(cx.sess.id, &prefixes) {
            return Reply::error(e);
        }
    }
    cx.srv
        .tracking
        .enable(cx.srv, &cx.sess.handle, redirect as u64, flags, &prefixes);
    cx.sess.tracking = tracking::ON | flags;
    Reply::OK
}

/// CLIENT CACHING yes|no: whether the next command's keys are tracked (OPTIN / OPTOUT).
fn client_caching(cx: &mut Cx) -> Reply {
    let t = cx.sess.tracking;
    if t == 0 {
        return errors::err(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with \
             OPTIN or OPTOUT mode enabled",
        );
    }
    let v = &cx.args[2];
    if is(v, "yes") {
        if t & tracking::OPTIN == 0 {
            return errors::err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if is(v, "no") {
        if t & tracking::OPTOUT == 0 {
            return errors::err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return errors::syntax();
    }
    cx.sess.caching = true;
    Reply::OK
}

fn client_getredir(cx: &mut Cx) -> Reply {
    match cx.srv.tracking.view(cx.sess.id) {
        Some(v) => Reply::Int(v.redirect as i64),
        None => Reply::Int(-1),
    }
}

fn client_trackinginfo(cx: &mut Cx) -> Reply {
    let view = cx.srv.tracking.view(cx.sess.id);
    let mut flags = Vec::new();
    let (redirect, prefixes) = match view {
        None => {
            flags.push(Reply::bulk_static("off"));
            (-1, Vec::new())
        }
        Some(v) => {
            let caching = cx.sess.caching;
            flags.push(Reply::bulk_static("on"));
            for (bit, name, extra) in [
                (tracking::BCAST, "bcast", None),
                (tracking::OPTIN, "optin", Some("caching-yes")),
                (tracking::OPTOUT, "optout", Some("caching-no")),
                (tracking::NOLOOP, "noloop", None),
                (tracking::BROKEN, "broken_redirect", None),
            ] {
                if v.flags & bit != 0 {
                    flags.push(Reply::bulk_static(name));
                    if let (Some(e), true) = (extra, caching) {
                        flags.push(Reply::bulk_static(e));
                    }
                }
            }
            (
                v.redirect as i64,
                v.prefixes.into_iter().map(Reply::Bulk).collect(),
            )
        }
    };
    Reply::Map(vec![
        (Reply::bulk_static("flags"), Reply::Set(flags)),
        (Reply::bulk_static("redirect"), Reply::Int(redirect)),
        (Reply::bulk_static("prefixes"), Reply::Array(prefixes)),
    ])
}

fn client_help(_cx: &mut Cx) -> Reply {
    args::help(
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "    * MAXAGE <maxage>",
            "      Kill connections older than the specified age.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attrs_are_printable_without_spaces() {
        assert!(valid_attr(b"redis-py"));
        assert!(valid_attr(b""));
        assert!(!valid_attr(b"a b"));
        assert!(!valid_attr(b"a\nb"));
        assert!(!valid_attr("é".as_bytes()));
    }

    #[test]
    fn kill_filters_parse() {
        let srv = crate::cmd::new_shared(Default::default(), crate::clock::Clock::system());
        let a: Vec<Bytes> = ["client", "kill", "id", "0"]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        assert!(parse_kill(&srv, &a).is_err());
        let a: Vec<Bytes> = ["client", "kill", "type", "pubsub", "skipme", "no"]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        let f = parse_kill(&srv, &a).ok().unwrap();
        assert!(f.ty == Some(ClientType::PubSub) && !f.skipme);
        // USER names an existing user.
        let a: Vec<Bytes> = ["client", "kill", "user", "nobody"]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        assert!(parse_kill(&srv, &a).is_err());
        let a: Vec<Bytes> = ["client", "kill", "user", "default"]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        assert_eq!(
            parse_kill(&srv, &a).ok().unwrap().user,
            Some(&b"default"[..])
        );
    }
}
