//! ACL users (Redis 7.2 `acl.c` semantics): the rule language of `ACL SETUSER` and `user`
//! lines, users with their selectors, the permission checks, the rule strings `ACL LIST`
//! prints, and the ACL log.
//!
//! The command table lives above this layer: `cmd` hands in a [`Catalog`] (names, ids,
//! categories and the container/subcommand links of its table) and, for each check, the
//! key and channel positions of the command line. Command ids are the registry's.
//!
//! Hot path: a session holds its user as an `Arc<AclUser>`; [`AclUser::unrestricted`] is
//! one relaxed load, true while some selector of the user allows every command, key and
//! channel (the default user as it starts). Only other users pay for a real check.

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Redis's categories, in its order (ACL CAT, COMMAND INFO).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of a category name (case-insensitive), as a mask.
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1u32 << i)
}

/// Key permissions of a pattern, and what a key spec asks for.
pub const READ: u8 = 1;
pub const WRITE: u8 = 2;

/// Channel flags of a command's channel arguments.
pub const CH_PUBLISH: u8 = 1;
pub const CH_SUBSCRIBE: u8 = 2;
pub const CH_PATTERN: u8 = 4;

/// One command of the table as ACL rules see it.
pub struct CatalogCmd {
    /// Full lowercase name (`config|get`).
    pub name: &'static str,
    /// Category bits ([`category_bit`]).
    pub cats: u32,
    pub parent: Option<usize>,
    pub subs: Vec<usize>,
    /// Redis `no_auth`: every user may run it.
    pub no_auth: bool,
}

/// The command table, by registry id.
pub struct Catalog {
    pub cmds: Vec<CatalogCmd>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    pub fn new(cmds: Vec<CatalogCmd>) -> Catalog {
        let by_name = cmds
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.to_string(), i))
            .collect();
        Catalog { cmds, by_name }
    }

    /// Redis `ACLLookupCommand`: `name` or `container|sub`, case-insensitive.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        self.by_name.get(&lower).copied()
    }
}

/// Why `ACL SETUSER` refused a rule (Redis's errno cases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    UnknownName,
    Syntax,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSub,
}

impl RuleError {
    /// Redis `ACLSetUserStringError`.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::UnknownName => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of \
                 patterns"
            }
            RuleError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list \
                 of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// A set of permissions: the user's root one, or one `(...)` selector.
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    root: bool,
    allkeys: bool,
    allchannels: bool,
    /// Every command bit set (cleared by any removal).
    allcommands: bool,
    /// Redis's reserved "future commands" bit: set by `+@all`, cleared by `-@all` only;
    /// it decides whether the rules are shown from `+@all` or `-@all`.
    future: bool,
    bits: Vec<u64>,
    /// `+cmd|arg` of a command without subcommands: allowed first arguments.
    firstargs: Vec<(usize, Vec<Vec<u8>>)>,
    keys: Vec<(Vec<u8>, u8)>,
    channels: Vec<Vec<u8>>,
    /// The command rules in the order given (Redis 7.2's `command_rules`).
    rules: String,
}

impl Selector {
    /// `allchannels`: `acl-pubsub-default` is `allchannels`.
    fn new(root: bool, ncmds: usize, allchannels: bool) -> Selector {
        Selector {
            root,
            allkeys: false,
            allchannels,
            allcommands: false,
            future: false,
            bits: vec![0; ncmds.div_ceil(64)],
            firstargs: Vec::new(),
            keys: Vec::new(),
            channels: Vec::new(),
            rules: String::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.bits
            .get(id / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if let Some(w) = self.bits.get_mut(id / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
                self.allcommands = false;
            }
        }
    }

    fn unrestricted(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }

    /// Redis `ACLChangeSelectorPerm`: a container's subcommands follow it.
    fn change_perm(&mut self, cat: &Catalog, id: usize, on: bool) {
        self.set_bit(id, on);
        self.firstargs.retain(|(i, _)| *i != id);
        for &s in &cat.cmds[id].subs {
            self.set_bit(s, on);
        }
    }

    /// Redis `ACLUpdateCommandRules`: drops the earlier rules this one overrides (the same
    /// name, or a `name|…` of it), then appends it.
    fn update_rules(&mut self, rule: &str, allow: bool) {
        let rule = rule.to_ascii_lowercase();
        let kept: Vec<&str> = self
            .rules
            .split(' ')
            .filter(|r| !r.is_empty())
            .filter(|r| {
                // Every rule starts with its ASCII `+` or `-`.
                let name = &r.as_bytes()[1..];
                let rule = rule.as_bytes();
                !(name == rule
                    || (name.len() > rule.len()
                        && name.starts_with(rule)
                        && name[rule.len()] == b'|'))
            })
            .collect();
        let mut out = kept.join(" ");
        if !out.is_empty() {
            out.push(' ');
        }
        out.push(if allow { '+' } else { '-' });
        out.push_str(&rule);
        self.rules = out;
    }

    /// Redis `ACLSetSelector`: one rule applied to this selector.
    fn apply(&mut self, op: &[u8], cat: &Catalog) -> Result<(), RuleError> {
        if op.is_empty() {
            return Err(RuleError::Syntax);
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.bits.iter_mut().for_each(|w| *w = u64::MAX);
            self.allcommands = true;
            self.future = true;
            self.rules.clear();
            self.firstargs.clear();
        } else if is("nocommands") || is("-@all") {
            self.bits.iter_mut().for_each(|w| *w = 0);
            self.allcommands = false;
            self.future = false;
            self.rules.clear();
            self.firstargs.clear();
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.allkeys {
                return Err(RuleError::KeyAfterAll);
            }
            let mut flags = 0u8;
            let mut offset = 1;
            if op[0] == b'%' {
                loop {
                    // `%R` alone is `%R~` with an empty pattern (as Redis reads it); a bare
                    // `%` is refused (Redis 7.2 took it and then crashed describing it).
                    let Some(&c) = op.get(offset) else {
                        if flags == 0 {
                            return Err(RuleError::Syntax);
                        }
                        break;
                    };
                    if c.eq_ignore_ascii_case(&b'R') && flags & READ == 0 {
                        flags |= READ;
                    } else if c.eq_ignore_ascii_case(&b'W') && flags & WRITE == 0 {
                        flags |= WRITE;
                    } else if c == b'~' && flags != 0 {
                        offset += 1;
                        break;
                    } else {
                        return Err(RuleError::Syntax);
                    }
                    offset += 1;
                }
            } else {
                flags = READ | WRITE;
            }
            let pat = &op[offset..];
            if has_spaces(pat) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|(p, _)| p == pat) {
                Some((_, f)) => *f |= flags,
                None => self.keys.push((pat.to_vec(), flags)),
            }
            self.allkeys = false;
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pat = &op[1..];
            if has_spaces(pat) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|p| p == pat) {
                self.channels.push(pat.to_vec());
            }
            self.allchannels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&c| c == b'|') {
                None => {
                    let id = cat.lookup(name).ok_or(RuleError::UnknownName)?;
                    self.change_perm(cat, id, true);
                    self.update_rules(cat.cmds[id].name, true);
                }
                Some(bar) => {
                    let (base, sub) = (&name[..bar], &name[bar + 1..]);
                    let id = cat.lookup(base).ok_or(RuleError::UnknownName)?;
                    if cat.cmds[id].parent.is_some() {
                        return Err(RuleError::FirstArgOfSub);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !cat.cmds[id].subs.is_empty() {
                        let sid = cat.lookup(name).ok_or(RuleError::UnknownName)?;
                        self.change_perm(cat, sid, true);
                    } else {
                        // `+select|0`: Redis's deprecated first-argument rule.
                        match self.firstargs.iter_mut().find(|(i, _)| *i == id) {
                            Some((_, list)) => {
                                if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                                    list.push(sub.to_vec());
                                }
                            }
                            None => self.firstargs.push((id, vec![sub.to_vec()])),
                        }
                    }
                    self.update_rules(&String::from_utf8_lossy(name), true);
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = cat.lookup(&op[1..]).ok_or(RuleError::UnknownName)?;
            self.change_perm(cat, id, false);
            self.update_rules(cat.cmds[id].name, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let allow = op[0] == b'+';
            let bit = category_bit(&op[2..]).ok_or(RuleError::UnknownName)?;
            self.update_rules(&String::from_utf8_lossy(&op[1..]), allow);
            for (id, c) in cat.cmds.iter().enumerate() {
                if c.cats & bit != 0 {
                    self.change_perm(cat, id, allow);
                }
            }
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// Redis `ACLDescribeSelectorCommandRules`.
    fn command_rules(&self) -> String {
        let mut s = String::from(if self.future { "+@all" } else { "-@all" });
        if !self.rules.is_empty() {
            s.push(' ');
            s.push_str(&self.rules);
        }
        s
    }

    fn key_patterns(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let parts: Vec<String> = self.keys.iter().map(|(p, f)| pattern_text(p, *f)).collect();
        parts.join(" ")
    }

    fn channel_patterns(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let parts: Vec<String> = self
            .channels
            .iter()
            .map(|p| format!("&{}", String::from_utf8_lossy(p)))
            .collect();
        parts.join(" ")
    }

    /// Redis `ACLDescribeSelector`.
    fn describe(&self) -> String {
        let mut s = String::new();
        if self.allkeys {
            s.push_str("~* ");
        } else {
            for (p, f) in &self.keys {
                s.push_str(&pattern_text(p, *f));
                s.push(' ');
            }
        }
        if self.allchannels {
            s.push_str("&* ");
        } else {
            s.push_str("resetchannels ");
            for p in &self.channels {
                s.push('&');
                s.push_str(&String::from_utf8_lossy(p));
                s.push(' ');
            }
        }
        s.push_str(&self.command_rules());
        s
    }

    /// Redis `ACLSelectorCheckCmd`.
    fn check(&self, q: &Query, keys: &mut Option<Vec<(usize, u8)>>) -> Result<(), Denied> {
        if !self.allcommands && !q.no_auth && !self.bit(q.id) {
            let allowed = q.argv.len() >= 2
                && self.firstargs.iter().any(|(i, list)| {
                    *i == q.id && {
                        let idx = if q.parent { 2 } else { 1 };
                        q.argv
                            .get(idx)
                            .is_some_and(|a| list.iter().any(|x| x.eq_ignore_ascii_case(a)))
                    }
                });
            if !allowed {
                return Err(Denied::Command);
            }
        }
        if !self.allkeys {
            let keys = keys.get_or_insert_with(|| (q.keys)());
            for &(pos, need) in keys.iter() {
                let key = &q.argv[pos];
                let ok = self.keys.iter().any(|(p, f)| {
                    f & need == need && crate::types::glob::glob_match(p, key, false)
                });
                if !ok {
                    return Err(Denied::Key(pos));
                }
            }
        }
        if !self.allchannels {
            for &(pos, flags) in q.channels {
                if flags & (CH_PUBLISH | CH_SUBSCRIBE) == 0 {
                    continue;
                }
                if !channel_allowed(&self.channels, &q.argv[pos], flags & CH_PATTERN != 0) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }
}

fn pattern_text(p: &[u8], f: u8) -> String {
    let prefix = match f {
        f if f == READ | WRITE => "~",
        READ => "%R~",
        _ => "%W~",
    };
    format!("{prefix}{}", String::from_utf8_lossy(p))
}

/// Redis `ACLCheckChannelAgainstList`: a PSUBSCRIBE pattern must be listed literally.
fn channel_allowed(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p == channel
        } else {
            crate::types::glob::glob_match(p, channel, false)
        }
    })
}

/// Redis `ACLStringHasSpaces`: spaces or NUL.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c == 0 || c.is_ascii_whitespace() || c == 0x0b)
}

/// Hex SHA-256 of a password, as Redis stores it.
pub fn hash_password(pass: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(pass);
    let mut s = String::with_capacity(64);
    for &b in digest.as_slice() {
        s.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        s.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    s
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// What a check is about: the command (registry id), its line, and how to find its keys
/// (asked lazily, once, and only when a selector restricts keys) and channels.
pub struct Query<'a> {
    pub id: usize,
    pub parent: bool,
    pub no_auth: bool,
    pub argv: &'a [Bytes],
    pub keys: &'a dyn Fn() -> Vec<(usize, u8)>,
    pub channels: &'a [(usize, u8)],
}

/// Why a check failed, with the argument position of the key or channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denied {
    /// Redis's ordering when picking one error among selectors (ACL_DENIED_* values).
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    pub fn reason(self) -> Reason {
        match self {
            Denied::Command => Reason::Command,
            Denied::Key(_) => Reason::Key,
            Denied::Channel(_) => Reason::Channel,
        }
    }

    /// Redis `getAclErrorMessage`: `verbose` is ACL DRYRUN's form.
    pub fn message(self, user: &[u8], cmd: &str, argv: &[Bytes], verbose: bool) -> String {
        let user = String::from_utf8_lossy(user);
        match self {
            Denied::Command => {
                format!("User {user} has no permissions to run the '{cmd}' command")
            }
            Denied::Key(i) if verbose => format!(
                "User {user} has no permissions to access the '{}' key",
                String::from_utf8_lossy(&argv[i])
            ),
            Denied::Key(_) => "No permissions to access a key".into(),
            Denied::Channel(i) if verbose => format!(
                "User {user} has no permissions to access the '{}' channel",
                String::from_utf8_lossy(&argv[i])
            ),
            Denied::Channel(_) => "No permissions to access a channel".into(),
        }
    }
}

/// A user's settings (copied whole when a SETUSER is staged).
#[derive(Clone, Debug, PartialEq)]
pub struct UserState {
    pub enabled: bool,
    pub nopass: bool,
    pub skip_sanitize: bool,
    /// Hex SHA-256 digests, in the order added.
    pub passwords: Vec<String>,
    /// The root selector first.
    selectors: Vec<Selector>,
    /// `acl-pubsub-default allchannels` in force while rules are applied (new selectors
    /// and `reset` start with every channel).
    pub pubsub_all: bool,
}

impl UserState {
    /// A new user: off, no passwords, no permissions (Redis `ACLCreateUser`).
    pub fn new(ncmds: usize, pubsub_all: bool) -> UserState {
        UserState {
            enabled: false,
            nopass: false,
            skip_sanitize: false,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, ncmds, pubsub_all)],
            pubsub_all,
        }
    }

    fn ncmds(&self) -> usize {
        self.selectors[0].bits.len() * 64
    }

    /// Redis `ACLSetUser`: one rule. An empty rule does nothing.
    pub fn apply(&mut self, op: &[u8], cat: &Catalog) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.skip_sanitize = true;
        } else if is("sanitize-payload") {
            self.skip_sanitize = false;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let h = if op[0] == b'>' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            if !self.passwords.contains(&h) {
                self.passwords.push(h);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let h = if op[0] == b'<' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            match self.passwords.iter().position(|p| *p == h) {
                Some(i) => {
                    self.passwords.remove(i);
                }
                None => return Err(RuleError::NoSuchPassword),
            }
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut sel = Selector::new(false, self.ncmds(), self.pubsub_all);
            let inner = &op[1..op.len() - 1];
            // Unbalanced quotes give no rules, so an empty selector (Redis's
            // `sdssplitargs` failing with a count of 0).
            let words = crate::protocol::parse::split_args(inner).unwrap_or_default();
            for w in words {
                sel.apply(&w, cat)?;
            }
            self.selectors.push(sel);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let root = &mut self.selectors[0];
            root.allkeys = false;
            root.keys.clear();
            root.allchannels = self.pubsub_all;
            root.channels.clear();
            self.enabled = false;
            self.skip_sanitize = false;
            self.selectors.truncate(1);
            self.selectors[0].apply(b"-@all", cat)?;
        } else {
            self.selectors[0].apply(op, cat)?;
        }
        Ok(())
    }

    /// Whether some selector allows everything: the check can be skipped.
    pub fn unrestricted(&self) -> bool {
        self.selectors.iter().any(Selector::unrestricted)
    }

    /// Redis `ACLDescribeUser`: the rules as `ACL LIST` and ACL files show them.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for f in self.flag_names() {
            s.push_str(f);
            s.push(' ');
        }
        for p in &self.passwords {
            s.push('#');
            s.push_str(p);
            s.push(' ');
        }
        for sel in &self.selectors {
            if sel.root {
                s.push_str(&sel.describe());
            } else {
                s.push_str(" (");
                s.push_str(&sel.describe());
                s.push(')');
            }
        }
        s
    }

    /// The flags in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut v = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            v.push("nopass");
        }
        v.push(if self.skip_sanitize {
            "skip-sanitize-payload"
        } else {
            "sanitize-payload"
        });
        v
    }

    /// `(commands, keys, channels)` of each selector, root first (ACL GETUSER).
    pub fn selector_fields(&self) -> Vec<[String; 3]> {
        self.selectors
            .iter()
            .map(|s| [s.command_rules(), s.key_patterns(), s.channel_patterns()])
            .collect()
    }

    /// Redis `ACLCheckAllUserCommandPerm`: any selector that allows the command allows it;
    /// otherwise the most relevant refusal (a key or channel over the command, the last
    /// argument over earlier ones).
    pub fn check(&self, q: &Query) -> Result<(), Denied> {
        let mut keys = None;
        let mut worst: Option<Denied> = None;
        for sel in &self.selectors {
            match sel.check(q, &mut keys) {
                Ok(()) => return Ok(()),
                Err(d) => {
                    if worst.is_none_or(|w| d.rank() > w.rank()) {
                        worst = Some(d);
                    }
                }
            }
        }
        Err(worst.unwrap_or(Denied::Command))
    }

    /// Redis `ACLUserCheckCmdWithUnrestrictedKeyAccess`: some selector allows the line and
    /// grants `need` on every key (`allkeys`, or a `*` pattern with those permissions).
    pub fn unrestricted_access(&self, q: &Query, need: u8) -> bool {
        let mut keys = None;
        self.selectors.iter().any(|s| {
            s.check(q, &mut keys).is_ok()
                && (s.allkeys || s.keys.iter().any(|(p, f)| f & need == need && p == b"*"))
        })
    }

    /// Whether one of the user's channel lists allows a channel (SUBSCRIBE-time checks
    /// done outside a command line).
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors
            .iter()
            .any(|s| s.allchannels || channel_allowed(&s.channels, channel, is_pattern))
    }

    /// Redis `ACLKillPubsubClientsIfNeeded`'s first two tests: whether subscribers of the
    /// old settings may keep every subscription under the new ones.
    pub fn channels_superset_of(&self, old: &UserState) -> bool {
        if self.selectors.iter().any(|s| s.allchannels) {
            return true;
        }
        if old.selectors.iter().any(|s| s.allchannels) {
            return false;
        }
        old.selectors
            .iter()
            .flat_map(|s| s.channels.iter())
            .all(|c| self.selectors.iter().any(|s| s.channels.contains(c)))
    }

    /// Every channel pattern of every selector (for checking existing subscriptions).
    pub fn channel_lists(&self) -> Vec<Vec<u8>> {
        self.selectors
            .iter()
            .flat_map(|s| s.channels.iter().cloned())
            .collect()
    }

    /// Whether a password matches (any digest, compared in constant time), or `nopass`.
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let h = hash_password(pass);
        let mut ok = false;
        for p in &self.passwords {
            use subtle::ConstantTimeEq;
            ok |= bool::from(p.as_bytes().ct_eq(h.as_bytes()));
        }
        ok
    }
}

/// A user as sessions hold it: changed in place by ACL SETUSER, so every connection
/// authenticated as it sees the new rules at its next command.
pub struct AclUser {
    flags: HotFlags,
    pub name: Bytes,
    state: RwLock<UserState>,
}

/// What every command reads, on a cache line of its own: the state's lock, taken by the
/// checks of restricted users, never shares it.
#[repr(align(64))]
struct HotFlags {
    unrestricted: AtomicBool,
    removed: AtomicBool,
}

impl AclUser {
    pub fn new(name: Bytes, state: UserState) -> AclUser {
        AclUser {
            flags: HotFlags {
                unrestricted: AtomicBool::new(state.unrestricted()),
                removed: AtomicBool::new(false),
            },
            name,
            state: RwLock::new(state),
        }
    }

    /// The hot-path test: when true, no check is needed.
    #[inline]
    pub fn unrestricted(&self) -> bool {
        self.flags.unrestricted.load(Ordering::Relaxed)
    }

    /// Deleted (ACL DELUSER, ACL LOAD): its connections are being closed.
    pub fn removed(&self) -> bool {
        self.flags.removed.load(Ordering::Relaxed)
    }

    pub fn state(&self) -> parking_lot::RwLockReadGuard<'_, UserState> {
        self.state.read()
    }

    /// Replaces the settings (Redis `ACLCopyUser`).
    pub fn set_state(&self, state: UserState) {
        let mut w = self.state.write();
        self.flags
            .unrestricted
            .store(state.unrestricted(), Ordering::Relaxed);
        *w = state;
    }

    fn mark_removed(&self) {
        self.flags.removed.store(true, Ordering::Relaxed);
        self.flags.unrestricted.store(false, Ordering::Relaxed);
    }
}

/// Where a denial happened (ACL LOG `context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    pub fn text(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

impl Context {
    pub fn text(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One ACL LOG entry.
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    pub object: Bytes,
    pub username: Bytes,
    /// Unix ms of the last occurrence.
    pub ctime: u64,
    pub client_info: String,
    pub entry_id: u64,
    pub created: u64,
}

/// Redis `ACL_LOG_GROUPING_MAX_TIME_DELTA`.
const GROUPING_MS: u64 = 60_000;

#[derive(Default)]
struct Log {
    entries: VecDeque<LogEntry>,
    next_id: u64,
}

/// Denial counters for INFO (`acl_access_denied_*`); as in Redis, CONFIG RESETSTAT
/// leaves them alone.
#[derive(Default)]
pub struct Denials {
    pub auth: AtomicU64,
    pub cmd: AtomicU64,
    pub key: AtomicU64,
    pub channel: AtomicU64,
}

/// The server's users and ACL log.
pub struct Acl {
    ncmds: usize,
    catalog: OnceLock<&'static Catalog>,
    default: Arc<AclUser>,
    users: RwLock<BTreeMap<Bytes, Arc<AclUser>>>,
    log: Mutex<Log>,
    /// `acl-pubsub-default` is `allchannels`.
    pubsub_all: AtomicBool,
    pub denials: Denials,
}

/// The result of checking credentials.
pub enum AuthError {
    /// No such user, disabled, or a wrong password: the same answer for all.
    WrongPass,
}

impl Acl {
    /// The default user as Redis creates it: on, nopass, every command, key and channel.
    pub fn new(ncmds: usize) -> Acl {
        let default = Arc::new(AclUser::new(
            Bytes::from_static(b"default"),
            default_state(ncmds),
        ));
        let mut users = BTreeMap::new();
        users.insert(default.name.clone(), default.clone());
        Acl {
            ncmds,
            catalog: OnceLock::new(),
            default,
            users: RwLock::new(users),
            log: Mutex::new(Log::default()),
            pubsub_all: AtomicBool::new(false),
            denials: Denials::default(),
        }
    }

    /// `acl-pubsub-default`, as CONFIG sets it.
    pub fn set_pubsub_default(&self, value: &str) {
        self.pubsub_all
            .store(value.eq_ignore_ascii_case("allchannels"), Ordering::Relaxed);
    }

    fn pubsub_all(&self) -> bool {
        self.pubsub_all.load(Ordering::Relaxed)
    }

    /// Set once by `cmd` with its command table.
    pub fn set_catalog(&self, cat: &'static Catalog) {
        let _ = self.catalog.set(cat);
    }

    pub fn catalog(&self) -> &'static Catalog {
        static EMPTY: OnceLock<Catalog> = OnceLock::new();
        self.catalog
            .get()
            .copied()
            .unwrap_or_else(|| EMPTY.get_or_init(|| Catalog::new(Vec::new())))
    }

    pub fn default_user(&self) -> Arc<AclUser> {
        self.default.clone()
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<AclUser>> {
        self.users.read().get(name).cloned()
    }

    /// All users in name order (Redis's rax order).
    pub fn users(&self) -> Vec<Arc<AclUser>> {
        self.users.read().values().cloned().collect()
    }

    /// Redis `authRequired`'s server side: the default user asks for a password.
    pub fn auth_required(&self) -> bool {
        let d = self.default.state();
        !d.nopass || !d.enabled
    }

    /// Whether a new connection starts authenticated (Redis `clientSetDefaultAuth`).
    pub fn starts_authenticated(&self) -> bool {
        !self.auth_required()
    }

    /// Redis `ACLCheckUserCredentials`.
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> Result<Arc<AclUser>, AuthError> {
        let u = self.get(name).ok_or(AuthError::WrongPass)?;
        let ok = {
            let s = u.state();
            s.enabled && s.password_ok(pass)
        };
        if ok {
            Ok(u)
        } else {
            Err(AuthError::WrongPass)
        }
    }

    /// Redis `ACLStringSetUser`: merges `(`…`)` arguments, stages every rule on a copy,
    /// and applies them all or none. Returns the user and its settings before the change
    /// (`None` for a new user).
    #[allow(clippy::type_complexity)]
    pub fn set_user(
        &self,
        name: &[u8],
        rules: &[Bytes],
    ) -> Result<(Arc<AclUser>, Option<UserState>), String> {
        let merged = merge_selectors(rules).map_err(|at| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&rules[at])
            )
        })?;
        let cat = self.catalog();
        let mut users = self.users.write();
        let existing = users.get(name).cloned();
        let mut staged = match &existing {
            Some(u) => u.state().clone(),
            None => UserState::new(self.ncmds, self.pubsub_all()),
        };
        staged.pubsub_all = self.pubsub_all();
        for op in &merged {
            staged.apply(op, cat).map_err(|e| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                )
            })?;
        }
        match existing {
            Some(u) => {
                let old = u.state().clone();
                u.set_state(staged);
                Ok((u, Some(old)))
            }
            None => {
                let u = Arc::new(AclUser::new(Bytes::copy_from_slice(name), staged));
                users.insert(u.name.clone(), u.clone());
                Ok((u, None))
            }
        }
    }

    /// ACL DELUSER of one user (never `default`): the removed user, if it existed.
    pub fn delete(&self, name: &[u8]) -> Option<Arc<AclUser>> {
        let u = self.users.write().remove(name)?;
        u.mark_removed();
        Some(u)
    }

    /// `requirepass` (Redis `ACLUpdateDefaultUserPassword`): empty means nopass.
    pub fn set_default_password(&self, pass: &[u8]) {
        let cat = self.catalog();
        let mut s = self.default.state().clone();
        let _ = s.apply(b"resetpass", cat);
        if pass.is_empty() {
            let _ = s.apply(b"nopass", cat);
        } else {
            let mut op = Vec::with_capacity(pass.len() + 1);
            op.push(b'>');
            op.extend_from_slice(pass);
            let _ = s.apply(&op, cat);
        }
        self.default.set_state(s);
    }

    /// Loads `user …` definitions (config-file lines, each as its words after `user`)
    /// at start-up (Redis `ACLLoadConfiguredUsers`): a `default` line resets the default
    /// user first.
    pub fn load_configured(&self, defs: &[Vec<Bytes>]) -> Result<(), String> {
        let cat = self.catalog();
        let mut seen: Vec<&[u8]> = Vec::new();
        for def in defs {
            let Some(name) = def.first() else { continue };
            if seen.contains(&&name[..]) {
                return Err(format!(
                    "Duplicate user found. A user can only be defined once in config files \
                     (user '{}')",
                    String::from_utf8_lossy(name)
                ));
            }
            seen.push(name);
            if has_spaces(name) {
                return Err("Spaces not allowed in ACL usernames".into());
            }
            let merged = merge_selectors(&def[1..]).map_err(|at| {
                format!(
                    "Unmatched parenthesis in acl selector starting at '{}'.",
                    String::from_utf8_lossy(&def[1 + at])
                )
            })?;
            let mut state = UserState::new(self.ncmds, self.pubsub_all());
            for op in &merged {
                state.apply(op, cat).map_err(|e| {
                    format!(
                        "Error loading ACL rule '{}' for the user named '{}': {}",
                        String::from_utf8_lossy(op),
                        String::from_utf8_lossy(name),
                        e.text()
                    )
                })?;
            }
            if name[..] == b"default"[..] {
                self.default.set_state(state);
            } else {
                let u = Arc::new(AclUser::new(name.clone(), state));
                self.users.write().insert(u.name.clone(), u);
            }
        }
        Ok(())
    }

    /// Redis `ACLLoadFromFile`: every line checked; on any error nothing changes and the
    /// error text is returned. On success, the users replaced (all but `default`, whose
    /// settings are copied into the existing one) are returned, for their connections to
    /// be closed.
    pub fn load_file(&self, path: &str) -> Result<Vec<Arc<AclUser>>, String> {
        let text = std::fs::read(path).map_err(|e| {
            format!(
                "Error loading ACLs, opening file '{path}': {}",
                super::errors::strerror(&e)
            )
        })?;
        let cat = self.catalog();
        let mut errors = String::new();
        let mut fresh: BTreeMap<Bytes, UserState> = BTreeMap::new();
        for (i, line) in text.split(|&c| c == b'\n').enumerate() {
            let linenum = i + 1;
            let line = trim(line, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&[u8]> = line.split(|&c| c == b' ').collect();
            if argv[0] != &b"user"[..] || argv.len() < 2 {
                errors.push_str(&format!(
                    "{path}:{linenum} should start with user keyword followed by the \
                     username. "
                ));
                continue;
            }
            let name = argv[1];
            if has_spaces(name) {
                errors.push_str(&format!(
                    "'{path}:{linenum}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            if fresh.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            let mut state = UserState::new(self.ncmds, self.pubsub_all());
            let rest: Vec<Bytes> = argv[2..]
                .iter()
                .map(|a| Bytes::copy_from_slice(a))
                .collect();
            let merged = match merge_selectors(&rest) {
                Ok(m) => m,
                Err(_) => {
                    errors.push_str(&format!(
                        "{path}:{linenum}: Unmatched parenthesis in selector definition."
                    ));
                    Vec::new()
                }
            };
            let mut syntax_error = false;
            for op in &merged {
                let op = trim(op, b"\t\r\n");
                if let Err(e) = state.apply(op, cat) {
                    if e == RuleError::UnknownName {
                        errors.push_str(&format!(
                            "{path}:{linenum}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(op),
                            e.text()
                        ));
                    } else if !syntax_error {
                        errors.push_str(&format!("{path}:{linenum}: {}. ", e.text()));
                        syntax_error = true;
                    }
                }
            }
            fresh.insert(Bytes::copy_from_slice(name), state);
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules \
                 was performed",
            );
            return Err(errors);
        }
        let default_state = fresh
            .remove(&b"default"[..])
            .unwrap_or_else(|| default_state(self.ncmds));
        let mut users = self.users.write();
        let old: Vec<Arc<AclUser>> = users
            .values()
            .filter(|u| !Arc::ptr_eq(u, &self.default))
            .cloned()
            .collect();
        for u in &old {
            u.mark_removed();
        }
        users.clear();
        self.default.set_state(default_state);
        users.insert(self.default.name.clone(), self.default.clone());
        for (name, state) in fresh {
            users.insert(name.clone(), Arc::new(AclUser::new(name, state)));
        }
        Ok(old)
    }

    /// The ACL file's text (Redis `ACLSaveToFile`'s content).
    pub fn file_text(&self) -> String {
        let mut s = String::new();
        for u in self.users() {
            s.push_str("user ");
            s.push_str(&String::from_utf8_lossy(&u.name));
            s.push(' ');
            s.push_str(&u.state().describe());
            s.push('\n');
        }
        s
    }

    /// Redis `addACLLogEntry`: an entry like one of the 10 newest (same reason, context,
    /// object and user, within a minute) is bumped instead of added.
    #[allow(clippy::too_many_arguments)]
    pub fn log(
        &self,
        reason: Reason,
        context: Context,
        object: Bytes,
        username: Bytes,
        client_info: String,
        now_ms: u64,
        max_len: usize,
    ) {
        let counter = match reason {
            Reason::Auth => &self.denials.auth,
            Reason::Command => &self.denials.cmd,
            Reason::Key => &self.denials.key,
            Reason::Channel => &self.denials.channel,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut log = self.log.lock();
        let found = log.entries.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && e.ctime.abs_diff(now_ms) <= GROUPING_MS
                && e.object == object
                && e.username == username
        });
        if let Some(i) = found {
            if let Some(mut e) = log.entries.remove(i) {
                e.count += 1;
                e.ctime = now_ms;
                e.client_info = client_info;
                log.entries.push_front(e);
            }
            return;
        }
        let entry_id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object,
            username,
            ctime: now_ms,
            client_info,
            entry_id,
            created: now_ms,
        });
        log.entries.truncate(max_len);
    }

    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.log
            .lock()
            .entries
            .iter()
            .take(count)
            .cloned()
            .collect()
    }

    pub fn log_reset(&self) {
        self.log.lock().entries.clear();
    }
}

fn default_state(ncmds: usize) -> UserState {
    let mut s = UserState::new(ncmds, false);
    let root = &mut s.selectors[0];
    root.bits.iter_mut().for_each(|w| *w = u64::MAX);
    root.allcommands = true;
    root.future = true;
    root.allkeys = true;
    root.allchannels = true;
    s.enabled = true;
    s.nopass = true;
    s
}

fn trim<'a>(mut s: &'a [u8], set: &[u8]) -> &'a [u8] {
    while let [first, rest @ ..] = s {
        if !set.contains(first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !set.contains(last) {
            break;
        }
        s = rest;
    }
    s
}

/// Redis `ACLMergeSelectorArguments`: a selector spread over several arguments
/// (`(~x* +get)` given as `(~x*` and `+get)`) is joined with spaces; `Err` holds the index
/// of an opening argument never closed.
pub fn merge_selectors(args: &[Bytes]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if let Some((_, sel)) = &mut open {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                if let Some((_, sel)) = open.take() {
                    out.push(sel);
                }
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

/// `bits` of random hex (ACL GENPASS), `(bits + 3) / 4` characters.
pub fn genpass(bits: usize) -> String {
    use rand::RngCore;
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let mut s = String::with_capacity(chars + 1);
    for b in bytes {
        s.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        s.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    s.truncate(chars);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> &'static Catalog {
        static C: OnceLock<Catalog> = OnceLock::new();
        C.get_or_init(|| {
            let c = |name, cats: &[&str], parent, subs: Vec<usize>| CatalogCmd {
                name,
                cats: cats
                    .iter()
                    .map(|c| category_bit(c.as_bytes()).unwrap())
                    .fold(0, |a, b| a | b),
                parent,
                subs,
                no_auth: false,
            };
            Catalog::new(vec![
                c("get", &["read", "string", "fast"], None, vec![]),
                c("set", &["write", "string", "slow"], None, vec![]),
                c("config", &["slow"], None, vec![3, 4]),
                c(
                    "config|get",
                    &["admin", "slow", "dangerous"],
                    Some(2),
                    vec![],
                ),
                c(
                    "config|set",
                    &["admin", "slow", "dangerous"],
                    Some(2),
                    vec![],
                ),
                c("select", &["fast", "connection"], None, vec![]),
            ])
        })
    }

    fn state(rules: &[&str]) -> Result<UserState, RuleError> {
        let mut s = UserState::new(catalog().cmds.len(), false);
        for r in rules {
            s.apply(r.as_bytes(), catalog())?;
        }
        Ok(s)
    }

    #[test]
    fn rules_describe_as_redis_72_prints_them() {
        let s = state(&["on", ">pw", "~x*", "%R~r*", "&ch*", "+@string", "-set"]).unwrap();
        assert_eq!(
            s.describe(),
            format!(
                "on sanitize-payload #{} ~x* %R~r* resetchannels &ch* -@all +@string -set",
                hash_password(b"pw")
            )
        );
        // A later rule for the same name replaces the earlier one; `+config` drops its
        // subcommand rules.
        let s = state(&["+config|get", "+get", "-get", "+config"]).unwrap();
        assert_eq!(
            s.describe(),
            "off sanitize-payload resetchannels -@all -get +config"
        );
        let s = state(&["allcommands", "-config|set", "%RW~k", "(+get ~a)"]).unwrap();
        assert_eq!(
            s.describe(),
            "off sanitize-payload ~k resetchannels +@all -config|set \
             (~a resetchannels -@all +get)"
        );
    }

    #[test]
    fn rule_errors() {
        assert_eq!(state(&["+nosuch"]), Err(RuleError::UnknownName));
        assert_eq!(state(&["+@nosuch"]), Err(RuleError::UnknownName));
        assert_eq!(state(&["+config|get|x"]), Err(RuleError::FirstArgOfSub));
        assert_eq!(state(&["+select|"]), Err(RuleError::Syntax));
        assert_eq!(state(&["allkeys", "~x"]), Err(RuleError::KeyAfterAll));
        assert_eq!(state(&["&*", "&x"]), Err(RuleError::ChannelAfterAll));
        assert_eq!(state(&["%X~k"]), Err(RuleError::Syntax));
        assert_eq!(state(&["%RR~k"]), Err(RuleError::Syntax));
        assert_eq!(state(&["%"]), Err(RuleError::Syntax));
        assert_eq!(state(&["%R"]).unwrap().selector_fields()[0][1], "%R~");
        assert_eq!(state(&["<nope"]), Err(RuleError::NoSuchPassword));
        assert_eq!(state(&["#abc"]), Err(RuleError::BadHash));
        assert_eq!(state(&["bogus"]), Err(RuleError::Syntax));
    }

    #[test]
    fn checks_commands_keys_and_selectors() {
        let s = state(&["+get", "%R~r*", "~rw*", "(+set ~w*)"]).unwrap();
        let argv = |w: &[&str]| -> Vec<Bytes> {
            w.iter()
                .map(|x| Bytes::copy_from_slice(x.as_bytes()))
                .collect()
        };
        let q = |id, a: &[Bytes], flags: u8| {
            let keys = move || vec![(1usize, flags)];
            s.check(&Query {
                id,
                parent: false,
                no_auth: false,
                argv: a,
                keys: &keys,
                channels: &[],
            })
        };
        assert_eq!(q(0, &argv(&["get", "r1"]), READ), Ok(()));
        assert_eq!(q(0, &argv(&["get", "x"]), READ), Err(Denied::Key(1)));
        assert_eq!(q(1, &argv(&["set", "r1", "v"]), WRITE), Err(Denied::Key(1)));
        assert_eq!(q(1, &argv(&["set", "w1", "v"]), WRITE), Ok(()));
        assert_eq!(
            q(1, &argv(&["set", "rw1", "v"]), WRITE),
            Err(Denied::Key(1))
        );
        assert_eq!(
            q(3, &argv(&["config", "get", "x"]), 0),
            Err(Denied::Command)
        );
    }

    #[test]
    fn passwords_match_exactly() {
        let s = state(&[">s3cret", ">"]).unwrap();
        assert!(s.password_ok(b"s3cret"));
        assert!(s.password_ok(b""));
        for other in [&b"s3cre"[..], b"s3cret ", b"S3cret", b"s3creu", b"s3cret\0"] {
            assert!(!s.password_ok(other), "{other:?}");
        }
        assert_eq!(s.passwords[0], hash_password(b"s3cret"));
        assert!(state(&["nopass"]).unwrap().password_ok(b"anything"));
    }

    #[test]
    fn merges_selector_arguments() {
        let a: Vec<Bytes> = ["on", "(~x", "+get)", "(+set)"]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        assert_eq!(
            merge_selectors(&a).unwrap(),
            vec![b"on".to_vec(), b"(~x +get)".to_vec(), b"(+set)".to_vec()]
        );
        assert_eq!(merge_selectors(&a[..2]), Err(1));
    }
}
