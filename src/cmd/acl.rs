//! ACL: the ACL command family, AUTH against users, and the permission check of every
//! command line (dispatch, EXEC, scripts). The user model and rule language are
//! `instance::acl`; this file feeds it the command table (its [`Catalog`]) and each
//! line's keys (from the key specs: `%R~` / `%W~` follow their read / write flags) and
//! channels.

use super::args::{self, is};
use super::{errors, registry, CommandSpec, Cx, KeySpec};
use crate::instance::acl::{
    self, AclUser, Catalog, CatalogCmd, Context, Denied, Query, Reason, CH_PATTERN, CH_PUBLISH,
    CH_SUBSCRIBE,
};
use crate::instance::session::Session;
use crate::instance::state::Shared;
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::{Arc, OnceLock};

const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

macro_rules! sub {
    ($name:literal, $arity:expr, $flags:expr, $acl:expr, $summary:literal, $cx:literal, $h:expr) => {
        sub!($name, $arity, $flags, $acl, $summary, $cx, $h, "6.0.0")
    };
    ($name:literal, $arity:expr, $flags:expr, $acl:expr, $summary:literal, $cx:literal, $h:expr, $since:literal) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: KeySpec::None,
            acl: $acl,
            group: "server",
            since: $since,
            summary: $summary,
            complexity: $cx,
            handler: $h,
            ..CommandSpec::DEFAULT
        }
    };
}

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "acl",
    arity: -2,
    flags: &[],
    keys: KeySpec::None,
    acl: &["slow"],
    group: "server",
    since: "6.0.0",
    summary: "A container for Access List Control commands ",
    complexity: "Depends on subcommand.",
    handler: container,
    subcommands: &[
        sub!(
            "acl|cat",
            -2,
            &["noscript", "loading", "stale"],
            &["slow"],
            "List the ACL categories or the commands inside a category",
            "O(1) since the categories and commands are a fixed set.",
            cat
        ),
        sub!(
            "acl|deluser",
            -3,
            ADMIN,
            ADMIN_ACL,
            "Remove the specified ACL users and the associated rules",
            "O(1) amortized time considering the typical user.",
            deluser
        ),
        sub!(
            "acl|dryrun",
            -4,
            ADMIN,
            ADMIN_ACL,
            "Returns whether the user can execute the given command without executing the command.",
            "O(1).",
            dryrun,
            "7.0.0"
        ),
        sub!(
            "acl|genpass",
            -2,
            &["noscript", "loading", "stale"],
            &["slow"],
            "Generate a pseudorandom secure password to use for ACL users",
            "O(1)",
            genpass
        ),
        sub!(
            "acl|getuser",
            3,
            ADMIN,
            ADMIN_ACL,
            "Get the rules for a specific ACL user",
            "O(N). Where N is the number of password, command and pattern rules that the user has.",
            getuser
        ),
        sub!(
            "acl|help",
            2,
            &["loading", "stale"],
            &["slow"],
            "Show helpful text about the different subcommands",
            "O(1)",
            help
        ),
        sub!(
            "acl|list",
            2,
            ADMIN,
            ADMIN_ACL,
            "List the current ACL rules in ACL config file format",
            "O(N). Where N is the number of configured users.",
            list
        ),
        sub!(
            "acl|load",
            2,
            ADMIN,
            ADMIN_ACL,
            "Reload the ACLs from the configured ACL file",
            "O(N). Where N is the number of configured users.",
            load
        ),
        sub!(
            "acl|log",
            -2,
            ADMIN,
            ADMIN_ACL,
            "List latest events denied because of ACLs in place",
            "O(N) with N being the number of entries shown.",
            log
        ),
        sub!(
            "acl|save",
            2,
            ADMIN,
            ADMIN_ACL,
            "Save the current ACL rules in the configured ACL file",
            "O(N). Where N is the number of configured users.",
            save
        ),
        sub!(
            "acl|setuser",
            -3,
            ADMIN,
            ADMIN_ACL,
            "Modify or create the rules for a specific ACL user",
            "O(N). Where N is the number of rules provided.",
            setuser
        ),
        sub!(
            "acl|users",
            2,
            ADMIN,
            ADMIN_ACL,
            "List the username of all the configured ACL rules",
            "O(N). Where N is the number of configured users.",
            users
        ),
        sub!(
            "acl|whoami",
            2,
            &["noscript", "loading", "stale"],
            &["slow"],
            "Return the name of the user associated to the current connection",
            "O(1)",
            whoami
        ),
    ],
    ..CommandSpec::DEFAULT
}];

/// The command table as ACL rules see it (built once; ids are the registry's).
pub fn catalog() -> &'static Catalog {
    static CAT: OnceLock<Catalog> = OnceLock::new();
    CAT.get_or_init(|| {
        let reg = registry();
        let id_of = |name: &str| reg.lookup(name.as_bytes()).map(|(id, _)| id);
        let cmds = reg
            .specs
            .iter()
            .map(|spec| {
                let parent = spec.name.split_once('|').and_then(|(p, _)| id_of(p));
                CatalogCmd {
                    name: spec.name,
                    cats: spec
                        .acl
                        .iter()
                        .filter_map(|c| acl::category_bit(c.as_bytes()))
                        .fold(0, |a, b| a | b),
                    parent,
                    subs: spec
                        .subcommands
                        .iter()
                        .filter_map(|s| id_of(s.name))
                        .collect(),
                    no_auth: spec.has_flag("no_auth"),
                }
            })
            .collect();
        Catalog::new(cmds)
    })
}

/// The channel arguments of a command line (Redis `getChannelsFromCommand`).
fn channels(spec: &CommandSpec, args: &[Bytes]) -> Vec<(usize, u8)> {
    let (flags, all) = match spec.name {
        "subscribe" | "ssubscribe" => (CH_SUBSCRIBE, true),
        "psubscribe" => (CH_SUBSCRIBE | CH_PATTERN, true),
        "publish" | "spublish" => (CH_PUBLISH, false),
        // Unsubscribing is never refused.
        _ => return Vec::new(),
    };
    let end = if all { args.len() } else { 2.min(args.len()) };
    (1..end).map(|i| (i, flags)).collect()
}

/// Whether `user` may run this resolved command line.
pub fn check_line(
    user: &AclUser,
    id: usize,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Result<(), Denied> {
    let keys = || super::command::acl_keys(spec, args);
    let ch = channels(spec, args);
    user.state().check(&Query {
        id,
        parent: spec.name.contains('|'),
        no_auth: spec.has_flag("no_auth"),
        argv: args,
        keys: &keys,
        channels: &ch,
    })
}

/// Redis `ACLUserCheckCmdWithUnrestrictedKeyAccess` for reads: some selector allows the
/// command line and every key to be read (SORT's BY and GET patterns need it).
pub fn full_key_read(user: &AclUser, spec: &'static CommandSpec, args: &[Bytes]) -> bool {
    if user.unrestricted() {
        return true;
    }
    let Some((id, _)) = registry().lookup(spec.name.as_bytes()) else {
        return false;
    };
    let keys = || super::command::acl_keys(spec, args);
    let ch = channels(spec, args);
    user.state().unrestricted_access(
        &Query {
            id,
            parent: spec.name.contains('|'),
            no_auth: spec.has_flag("no_auth"),
            argv: args,
            keys: &keys,
            channels: &ch,
        },
        acl::READ,
    )
}

/// Adds an ACL LOG entry for this session (Redis `addACLLogEntry`).
fn log_denial(
    srv: &Shared,
    sess: &Session,
    args: &[Bytes],
    reason: Reason,
    context: Context,
    object: Bytes,
    username: Bytes,
) {
    let info = super::client::session_line(srv, sess, args);
    let max = srv.config.get_u64("acllog-max-len") as usize;
    srv.acl.log(
        reason,
        context,
        object,
        username,
        info,
        srv.clock.now_ms(),
        max,
    );
}

/// [`check_line`] for the session's user; a denial also goes to ACL LOG under `context`.
fn check_logged(
    srv: &Shared,
    sess: &Session,
    id: usize,
    spec: &CommandSpec,
    args: &[Bytes],
    context: Context,
) -> Result<(), Denied> {
    let Err(d) = check_line(&sess.user, id, spec, args) else {
        return Ok(());
    };
    let object = denied_object(d, spec, args);
    log_denial(
        srv,
        sess,
        args,
        d.reason(),
        context,
        object,
        sess.user.name.clone(),
    );
    Err(d)
}

/// The object Redis logs for a denial: the command's full name, or the key / channel.
fn denied_object(d: Denied, spec: &CommandSpec, args: &[Bytes]) -> Bytes {
    match d {
        Denied::Command => Bytes::from_static(spec.name.as_bytes()),
        // A copy: the argument is a slice of the client's read buffer, which a log entry
        // must not keep alive.
        Denied::Key(i) | Denied::Channel(i) => Bytes::copy_from_slice(&args[i]),
    }
}

/// Dispatch's check for a session whose user is restricted (Redis `processCommand`'s
/// ACL step, after the auth check): `Err` is the refusal's reply text and its prefix.
#[cold]
#[inline(never)]
pub(super) fn gate(
    srv: &Arc<Shared>,
    sess: &mut Session,
    id: usize,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Result<(), (String, &'static str)> {
    if sess.user.removed() {
        // Its user was deleted: the connection is closing; meanwhile it is the default
        // user, not authenticated (Redis `ACLFreeUserAndKillClients`).
        sess.user = srv.acl.default_user();
        sess.authenticated = false;
        sess.handle.info.lock().user = "default".into();
        if srv.acl.auth_required() && !spec.has_flag("no_auth") {
            return Err((errors::NOAUTH.into(), ""));
        }
        if sess.user.unrestricted() {
            return Ok(());
        }
    }
    // A command refused inside MULTI for its own flag is refused for that first.
    if sess.multi.is_some() && spec.has_flag("no_multi") {
        return Ok(());
    }
    let Err(d) = check_line(&sess.user, id, spec, args) else {
        return Ok(());
    };
    sess.handle
        .last_cmd
        .store(id, std::sync::atomic::Ordering::Relaxed);
    let context = if sess.multi.is_some() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    let user = sess.user.name.clone();
    log_denial(
        srv,
        sess,
        args,
        d.reason(),
        context,
        denied_object(d, spec, args),
        user.clone(),
    );
    Err((d.message(&user, spec.name, args, false), "NOPERM "))
}

/// EXEC's check of a queued command (Redis `execCommand`): the rules may have changed
/// since it was queued. `Err` is the command's reply.
pub(super) fn exec_gate(
    srv: &Arc<Shared>,
    sess: &Session,
    id: usize,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Result<(), Reply> {
    if sess.user.unrestricted() {
        return Ok(());
    }
    let Err(d) = check_logged(srv, sess, id, spec, args, Context::Multi) else {
        return Ok(());
    };
    let why = match d {
        Denied::Command => "no permission to execute the command or subcommand",
        Denied::Key(_) => "no permission to touch the specified keys",
        Denied::Channel(_) => "no permission to access one of the channels used as arguments",
    };
    Err(Reply::error(format!(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the \
         EXEC call. This command is no longer allowed for the following reason: {why}"
    )))
}

/// The user a client is authenticated as, by its CLIENT LIST name (a deleted user's
/// clients are closing: they count as the default user meanwhile).
pub(super) fn user_of(srv: &Shared, h: &crate::instance::clients::ClientHandle) -> Arc<AclUser> {
    let name = h.info.lock().user.clone();
    if name == "default" {
        return srv.acl.default_user();
    }
    srv.acl
        .get(name.as_bytes())
        .unwrap_or_else(|| srv.acl.default_user())
}

/// The check of a blocked command re-run once its key is ready (Redis reprocesses it
/// through `processCommand`): `Err` is its NOPERM reply.
pub(super) fn blocked_gate(
    srv: &Shared,
    sess: &Session,
    id: usize,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Result<(), Reply> {
    if sess.user.unrestricted() {
        return Ok(());
    }
    let Err(d) = check_logged(srv, sess, id, spec, args, Context::Toplevel) else {
        return Ok(());
    };
    Err(Reply::error(format!(
        "NOPERM {}",
        d.message(&sess.user.name, spec.name, args, false)
    )))
}

/// A script's `redis.call` check (Redis `scriptVerifyACL`): `Err` is the error text.
pub(super) fn script_gate(
    srv: &Arc<Shared>,
    sess: &Session,
    id: usize,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Result<(), String> {
    if sess.user.unrestricted() {
        return Ok(());
    }
    let Err(d) = check_logged(srv, sess, id, spec, args, Context::Lua) else {
        return Ok(());
    };
    Err(format!(
        "ERR ACL failure in script: {}",
        d.message(&sess.user.name, spec.name, args, false)
    ))
}

/// AUTH / HELLO AUTH (Redis `ACLAuthenticateUser`): on success the session is the
/// user's; a failure is logged and answered with WRONGPASS.
pub(super) fn authenticate(cx: &mut Cx, user: &Bytes, pass: &[u8]) -> Result<(), Reply> {
    match cx.srv.acl.authenticate(user, pass) {
        Ok(u) => {
            cx.sess.authenticated = true;
            cx.sess.handle.info.lock().user = String::from_utf8_lossy(&u.name).into_owned();
            cx.sess.user = u;
            Ok(())
        }
        Err(acl::AuthError::WrongPass) => {
            let context = if cx.sess.multi.is_some() || cx.sess.in_exec {
                Context::Multi
            } else {
                Context::Toplevel
            };
            log_denial(
                cx.srv,
                cx.sess,
                cx.args,
                Reason::Auth,
                context,
                cx.args[0].clone(),
                user.clone(),
            );
            Err(errors::err(errors::WRONGPASS))
        }
    }
}

/// Closes the connections authenticated as `users` (deleted or replaced), the caller's
/// own after its reply (Redis `ACLFreeUserAndKillClients`).
fn disconnect(srv: &Shared, sess: &mut Session, users: &[Arc<AclUser>]) {
    if users.is_empty() {
        return;
    }
    for h in srv.clients.all() {
        let name = h.info.lock().user.clone();
        if !users.iter().any(|u| u.name == name.as_bytes()) {
            continue;
        }
        if h.id == sess.id {
            sess.close_after_reply = true;
            sess.authenticated = false;
            sess.user = srv.acl.default_user();
        } else {
            h.kill();
        }
    }
}

/// Redis `ACLKillPubsubClientsIfNeeded`: when a user's channel rules shrink, its
/// subscribers holding a subscription the new rules refuse are disconnected.
fn drop_revoked_subscribers(
    srv: &Shared,
    sess: &mut Session,
    user: &AclUser,
    old: &acl::UserState,
) {
    use crate::instance::pubsub::Kind;
    let new = user.state().clone();
    if new.channels_superset_of(old) {
        return;
    }
    // Redis checks against the union of the selectors' channel lists.
    let allowed = new.channel_lists();
    let ok = |name: &[u8], pattern: bool| {
        allowed.iter().any(|p| {
            if pattern {
                p[..] == *name
            } else {
                crate::types::glob::glob_match(p, name, false)
            }
        })
    };
    for h in srv.clients.all() {
        let info = h.info.lock().clone();
        if info.user.as_bytes() != &user.name[..] || info.sub + info.psub + info.ssub == 0 {
            continue;
        }
        let revoked = srv
            .pubsub
            .subscribed_by(Kind::Pattern, h.id)
            .iter()
            .any(|p| !ok(p, true))
            || [Kind::Channel, Kind::Shard].into_iter().any(|k| {
                srv.pubsub
                    .subscribed_by(k, h.id)
                    .iter()
                    .any(|c| !ok(c, false))
            });
        if !revoked {
            continue;
        }
        if h.id == sess.id {
            sess.close_after_reply = true;
        } else {
            h.kill();
        }
    }
}

fn container(cx: &mut Cx) -> Reply {
    errors::subcommand_syntax("acl", cx.args.get(1).map_or(&b""[..], |a| &a[..]))
}

fn wrong_form(cx: &Cx) -> Reply {
    errors::subcommand_syntax("acl", &cx.args[1])
}

fn setuser(cx: &mut Cx) -> Reply {
    let name = &cx.args[2];
    if acl::has_spaces(name) {
        return errors::err("ERR Usernames can't contain spaces or null characters");
    }
    match cx.srv.acl.set_user(name, &cx.args[3..]) {
        Ok((user, Some(old))) => {
            drop_revoked_subscribers(cx.srv, cx.sess, &user, &old);
            Reply::OK
        }
        Ok(_) => Reply::OK,
        // Redis `addReplyErrorSdsSafe`: no line breaks in an error.
        Err(e) => Reply::error(format!("ERR {}", e.replace(['\r', '\n'], " "))),
    }
}

fn deluser(cx: &mut Cx) -> Reply {
    if cx.args[2..].iter().any(|u| u[..] == b"default"[..]) {
        return errors::err("ERR The 'default' user cannot be removed");
    }
    let mut gone = Vec::new();
    for name in &cx.args[2..] {
        if let Some(u) = cx.srv.acl.delete(name) {
            gone.push(u);
        }
    }
    disconnect(cx.srv, cx.sess, &gone);
    Reply::Int(gone.len() as i64)
}

fn selector_map(f: &[String; 3]) -> Vec<(Reply, Reply)> {
    vec![
        (Reply::bulk_static("commands"), Reply::bulk(f[0].clone())),
        (Reply::bulk_static("keys"), Reply::bulk(f[1].clone())),
        (Reply::bulk_static("channels"), Reply::bulk(f[2].clone())),
    ]
}

fn getuser(cx: &mut Cx) -> Reply {
    let Some(u) = cx.srv.acl.get(&cx.args[2]) else {
        return Reply::Nil;
    };
    let s = u.state();
    let sels = s.selector_fields();
    let mut m = vec![
        (
            Reply::bulk_static("flags"),
            Reply::Set(s.flag_names().into_iter().map(Reply::bulk_static).collect()),
        ),
        (
            Reply::bulk_static("passwords"),
            Reply::Array(s.passwords.iter().map(|p| Reply::bulk(p.clone())).collect()),
        ),
    ];
    m.extend(selector_map(&sels[0]));
    m.push((
        Reply::bulk_static("selectors"),
        Reply::Array(
            sels[1..]
                .iter()
                .map(|f| Reply::Map(selector_map(f)))
                .collect(),
        ),
    ));
    Reply::Map(m)
}

fn list(cx: &mut Cx) -> Reply {
    Reply::Array(
        cx.srv
            .acl
            .users()
            .iter()
            .map(|u| {
                Reply::bulk(format!(
                    "user {} {}",
                    String::from_utf8_lossy(&u.name),
                    u.state().describe()
                ))
            })
            .collect(),
    )
}

fn users(cx: &mut Cx) -> Reply {
    Reply::Array(
        cx.srv
            .acl
            .users()
            .iter()
            .map(|u| Reply::Bulk(u.name.clone()))
            .collect(),
    )
}

fn whoami(cx: &mut Cx) -> Reply {
    Reply::Bulk(cx.sess.user.name.clone())
}

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You \
    may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE \
    (assuming you have a Redis configuration file set) in order to store users in the Redis \
    configuration.";

fn acl_file(cx: &Cx) -> Option<String> {
    cx.srv.config.get("aclfile").filter(|f| !f.is_empty())
}

fn load(cx: &mut Cx) -> Reply {
    let Some(path) = acl_file(cx) else {
        return errors::err(NO_ACL_FILE);
    };
    match cx.srv.acl.load_file(&path) {
        Ok(replaced) => {
            disconnect(cx.srv, cx.sess, &replaced);
            Reply::OK
        }
        Err(e) => Reply::error(format!("ERR {e}")),
    }
}

fn save(cx: &mut Cx) -> Reply {
    let Some(path) = acl_file(cx) else {
        return errors::err(NO_ACL_FILE);
    };
    match write_file(&path, cx.srv.acl.file_text().as_bytes()) {
        Ok(()) => Reply::OK,
        Err(e) => {
            tracing::warn!("ACL SAVE to {path}: {e}");
            errors::err(
                "ERR There was an error trying to save the ACLs. Please check the server logs \
                 for more information",
            )
        }
    }
}

/// Writes a temporary file beside `path`, syncs it and renames it over `path`.
fn write_file(path: &str, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = format!("{path}.tmp-{}", std::process::id());
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn cat(cx: &mut Cx) -> Reply {
    match cx.args.len() {
        2 => Reply::Array(
            acl::CATEGORIES
                .iter()
                .map(|&c| Reply::bulk_static(c))
                .collect(),
        ),
        3 => {
            let Some(bit) = acl::category_bit(&cx.args[2]) else {
                let name = &cx.args[2][..cx.args[2].len().min(128)];
                return Reply::error(format!(
                    "ERR Unknown category '{}'",
                    String::from_utf8_lossy(name)
                ));
            };
            Reply::Array(
                catalog()
                    .cmds
                    .iter()
                    .filter(|c| c.cats & bit != 0)
                    .map(|c| Reply::bulk_static(c.name))
                    .collect(),
            )
        }
        _ => wrong_form(cx),
    }
}

fn genpass(cx: &mut Cx) -> Reply {
    let bits = match cx.args.len() {
        2 => 256,
        3 => match args::int(&cx.args[2]) {
            Ok(n) => n,
            Err(e) => return e,
        },
        _ => return wrong_form(cx),
    };
    if bits <= 0 || bits > 4096 {
        return errors::err(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a \
             positive number up to 4096",
        );
    }
    Reply::bulk(acl::genpass(bits as usize))
}

fn log(cx: &mut Cx) -> Reply {
    let mut count = 10;
    match cx.args.len() {
        2 => {}
        3 if is(&cx.args[2], "reset") => {
            cx.srv.acl.log_reset();
            return Reply::OK;
        }
        3 => match args::int(&cx.args[2]) {
            Ok(n) => count = n.max(0),
            Err(e) => return e,
        },
        _ => return wrong_form(cx),
    }
    let now = cx.srv.clock.now_ms();
    let entries = cx.srv.acl.log_entries(count as usize);
    Reply::Array(
        entries
            .into_iter()
            .map(|e| {
                let f = Reply::bulk_static;
                Reply::Map(vec![
                    (f("count"), Reply::Int(e.count as i64)),
                    (f("reason"), f(e.reason.text())),
                    (f("context"), f(e.context.text())),
                    (f("object"), Reply::Bulk(e.object)),
                    (f("username"), Reply::Bulk(e.username)),
                    (
                        f("age-seconds"),
                        Reply::Double(now.saturating_sub(e.ctime) as f64 / 1000.0),
                    ),
                    (f("client-info"), Reply::bulk(e.client_info)),
                    (f("entry-id"), Reply::Int(e.entry_id as i64)),
                    (f("timestamp-created"), Reply::Int(e.created as i64)),
                    (f("timestamp-last-updated"), Reply::Int(e.ctime as i64)),
                ])
            })
            .collect(),
    )
}

fn dryrun(cx: &mut Cx) -> Reply {
    let Some(u) = cx.srv.acl.get(&cx.args[2]) else {
        return Reply::error(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(&cx.args[2])
        ));
    };
    let line = &cx.args[3..];
    let Ok((id, spec)) = registry().resolve(line) else {
        return Reply::error(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(&line[0])
        ));
    };
    if !spec.arity_ok(line.len()) {
        return Reply::error(format!(
            "ERR wrong number of arguments for '{}' command",
            spec.name
        ));
    }
    match check_line(&u, id, spec, line) {
        Ok(()) => Reply::OK,
        Err(d) => Reply::bulk(d.message(&u.name, spec.name, line, true)),
    }
}

fn help(_cx: &mut Cx) -> Reply {
    args::help(
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    )
}

/// Start-up users (Redis `ACLLoadUsersAtStartup`): `user` lines of the config file, or
/// the `aclfile`, never both.
pub fn load_at_startup(srv: &Shared) -> Result<(), String> {
    let defs = &srv.startup.users;
    let file = srv.config.get("aclfile").filter(|f| !f.is_empty());
    if file.is_some() && !defs.is_empty() {
        return Err(
            "Configuring Redis with users defined in redis.conf and at the same \
                    setting an ACL file path is invalid. This setup is very likely to lead \
                    to configuration errors and security holes, please define either an ACL \
                    file or declare users directly in your redis.conf, but not both."
                .into(),
        );
    }
    srv.acl.load_configured(defs)?;
    if let Some(path) = file {
        srv.acl
            .load_file(&path)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
    }
    Ok(())
}
