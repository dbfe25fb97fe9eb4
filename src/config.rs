//! Start-up configuration (flags / redis.conf-style file) and the run-time parameter store
//! behind `CONFIG GET/SET`: every standard Redis 7 parameter ([`params::PARAMS`]) validated
//! like config.c ([`kind`]), with Redis's error texts.

pub mod kind;
pub mod params;
pub mod rewrite;

pub use kind::{memtoull, Kind, Num, Special, StrCheck};
pub use params::{Param, HIDDEN, IMMUTABLE, MULTI_ARG, PARAMS, PROTECTED};

use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;

/// Settings fixed at start-up.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub requirepass: Option<String>,
    pub maxclients: usize,
    pub databases: usize,
    /// Worker threads (0 = half the cores, at least one).
    pub threads: usize,
    /// Start with a manual clock (test double).
    pub manual_clock: bool,
    /// Print the bound port on stdout (for `--port 0`).
    pub print_port: bool,
    /// Any other redis.conf parameters given at start-up (`name` → value).
    pub params: Vec<(String, String)>,
    /// `user NAME rule…` lines of the config file: each line's words after `user`.
    pub users: Vec<Vec<bytes::Bytes>>,
    /// `--engine redb`: keep the keyspace durable in `<dir>/respite.redb`.
    pub redb: bool,
    /// The config file the server was started with, as an absolute path (CONFIG REWRITE
    /// writes it back); `None` when it was started without one.
    pub config_file: Option<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            requirepass: None,
            maxclients: 10000,
            databases: 16,
            threads: 0,
            manual_clock: false,
            print_port: false,
            params: Vec::new(),
            users: Vec::new(),
            redb: false,
            config_file: None,
        }
    }
}

/// A parameter as named by the caller: its index in [`PARAMS`] and whether the alias was used
/// (Redis registers aliases as separate entries, so the alias name is what it reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamRef {
    pub index: usize,
    pub alias: bool,
}

impl ParamRef {
    pub fn param(self) -> &'static Param {
        &PARAMS[self.index]
    }
    /// The name Redis reports for this entry.
    pub fn name(self) -> &'static str {
        let p = self.param();
        match (self.alias, p.alias) {
            (true, Some(a)) => a,
            _ => p.name,
        }
    }
}

/// Integer view of a parameter named by a literal, with the name resolved once per call
/// site (hot paths: encoding thresholds read on every write to a small collection).
#[macro_export]
macro_rules! config_num {
    ($store:expr, $name:literal) => {{
        static REF: std::sync::OnceLock<$crate::config::ParamRef> = std::sync::OnceLock::new();
        $store.num(*REF.get_or_init(|| $crate::config::lookup($name).expect($name)))
    }};
}

/// Lowercase name (and alias) → parameter.
type Index = HashMap<&'static str, ParamRef, ahash::RandomState>;

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut m = Index::default();
        for (index, p) in PARAMS.iter().enumerate() {
            m.insert(
                p.name,
                ParamRef {
                    index,
                    alias: false,
                },
            );
            if let Some(a) = p.alias {
                m.insert(a, ParamRef { index, alias: true });
            }
        }
        m
    })
}

/// Case-insensitive lookup of a parameter name or alias.
pub fn lookup(name: &str) -> Option<ParamRef> {
    if let Some(r) = index().get(name) {
        return Some(*r);
    }
    index().get(name.to_ascii_lowercase().as_str()).copied()
}

pub struct ConfigStore {
    /// Values as CONFIG GET prints them, indexed like [`PARAMS`].
    values: RwLock<Vec<String>>,
    /// Numeric view of numeric and boolean parameters, readable without locking.
    nums: Vec<AtomicI64>,
}

impl Default for ConfigStore {
    fn default() -> Self {
        let values: Vec<String> = PARAMS
            .iter()
            .map(|p| match p.kind {
                // Redis reports the working directory; ours is fixed at start-up.
                Kind::Special(Special::Dir) => std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
                _ => p.default.to_string(),
            })
            .collect();
        let nums = values
            .iter()
            .zip(PARAMS)
            .map(|(v, p)| AtomicI64::new(numeric_view(p, v, v)))
            .collect();
        ConfigStore {
            values: RwLock::new(values),
            nums,
        }
    }
}

/// The lock-free view of a parameter from its value as given (`raw`) and as validated.
fn numeric_view(p: &Param, raw: &str, v: &str) -> i64 {
    match p.kind {
        Kind::Num(n) => kind::parse_num(&n, v).unwrap_or(0),
        Kind::Bool => i64::from(v == "yes"),
        // The event classes, parsed from the value as given: the rendering drops `n` under
        // `A`, yet Redis keeps it enabled.
        Kind::Special(Special::NotifyKeyspaceEvents) => {
            kind::keyspace_events_from_str(raw).map_or(0, i64::from)
        }
        _ => 0,
    }
}

impl ConfigStore {
    pub fn param(name: &str) -> Option<&'static Param> {
        lookup(name).map(ParamRef::param)
    }

    pub fn get(&self, name: &str) -> Option<String> {
        let r = lookup(name)?;
        Some(self.values.read()[r.index].clone())
    }

    /// Integer view of a numeric parameter (memory sizes in bytes; percentages negative,
    /// as Redis stores them); booleans are 1/0; 0 for anything else or unknown names.
    pub fn get_i64(&self, name: &str) -> i64 {
        lookup(name).map_or(0, |r| self.nums[r.index].load(Ordering::Relaxed))
    }

    /// Integer view through a reference resolved once with [`lookup`] (hot paths: the
    /// connection loop reads its limits per read batch without hashing names).
    pub fn num(&self, r: ParamRef) -> i64 {
        self.nums[r.index].load(Ordering::Relaxed)
    }

    /// Unsigned view (for `maxmemory` and other unsigned 64-bit parameters).
    pub fn get_u64(&self, name: &str) -> u64 {
        self.get_i64(name) as u64
    }

    pub fn get_bool(&self, name: &str) -> bool {
        self.get_i64(name) != 0
    }

    /// Matching (name, value) pairs for one glob, in table order (aliases included, hidden
    /// parameters excluded).
    pub fn matching(&self, pattern: &[u8]) -> Vec<(&'static str, String)> {
        self.get_patterns(&[pattern])
            .into_iter()
            .filter_map(|(n, v)| lookup(&n).map(|r| (r.name(), v)))
            .collect()
    }

    /// CONFIG GET: every parameter matching any of the patterns, each once. A pattern without
    /// glob characters is an exact (case-insensitive) lookup reported under the name as
    /// given; glob matches report the canonical name and skip hidden parameters.
    pub fn get_patterns(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let values = self.values.read();
        let mut seen: Vec<ParamRef> = Vec::new();
        let mut out = Vec::new();
        for pat in patterns {
            if !pat.iter().any(|c| matches!(c, b'[' | b'*' | b'?')) {
                let name = String::from_utf8_lossy(pat).into_owned();
                let Some(r) = lookup(&name) else { continue };
                if !seen.contains(&r) {
                    seen.push(r);
                    out.push((name, values[r.index].clone()));
                }
                continue;
            }
            for (index, p) in PARAMS.iter().enumerate() {
                if p.has(HIDDEN) {
                    continue;
                }
                let names = std::iter::once((p.name, false)).chain(p.alias.map(|a| (a, true)));
                for (n, alias) in names {
                    let r = ParamRef { index, alias };
                    if !seen.contains(&r) && crate::types::glob::glob_match(pat, n.as_bytes(), true)
                    {
                        seen.push(r);
                        out.push((n.to_string(), values[index].clone()));
                    }
                }
            }
        }
        out
    }

    /// Sets one parameter; the error is Redis's text after `ERR `.
    pub fn set(&self, name: &str, value: &str) -> Result<(), String> {
        self.set_many(&[(name.as_bytes(), value.as_bytes())])
    }

    /// CONFIG SET with any number of pairs, all or nothing, with Redis's precedence of
    /// errors: unknown names first, then immutable/protected/duplicate names, then the first
    /// invalid value, then changes we cannot apply at run time.
    pub fn set_many(&self, pairs: &[(&[u8], &[u8])]) -> Result<(), String> {
        let mut refs: Vec<ParamRef> = Vec::with_capacity(pairs.len());
        let mut failure: Option<String> = None;
        for (name, _) in pairs {
            let name_s = String::from_utf8_lossy(name);
            // The first bad name decides the error; later ones are not reported.
            if failure.is_some() {
                continue;
            }
            let Some(r) = lookup(&name_s) else {
                failure = Some(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{name_s}'"
                ));
                continue;
            };
            let p = r.param();
            if p.has(IMMUTABLE) || (p.has(PROTECTED) && !self.protected_allowed()) {
                let why = if p.has(IMMUTABLE) {
                    "can't set immutable config"
                } else {
                    "can't set protected config"
                };
                failure = Some(set_failed(&name_s, why));
                continue;
            }
            if refs.contains(&r) {
                failure = Some(set_failed(&name_s, "duplicate parameter"));
                continue;
            }
            refs.push(r);
        }
        if let Some(f) = failure {
            return Err(f);
        }
        let mut values = self.values.write();
        let mut staged = values.clone();
        for (r, (_, value)) in refs.iter().zip(pairs) {
            let value = String::from_utf8_lossy(value);
            let v = self
                .validate(r.param(), &value, &staged)
                .map_err(|e| set_failed(r.name(), &e))?;
            staged[r.index] = v;
        }
        for r in &refs {
            if let Some(e) = cannot_apply(r.param(), &values[r.index], &staged[r.index]) {
                return Err(set_failed(r.name(), e));
            }
        }
        for (r, (_, raw)) in refs.iter().zip(pairs) {
            let view = numeric_view(r.param(), &String::from_utf8_lossy(raw), &staged[r.index]);
            self.nums[r.index].store(view, Ordering::Relaxed);
        }
        *values = staged;
        Ok(())
    }

    /// Start-up setting (flags or config file): validated, but immutable and protected
    /// parameters are allowed. The error is the config-file message.
    pub fn set_initial(&self, name: &str, value: &str) -> Result<(), String> {
        let r = lookup(name)
            .ok_or_else(|| format!("Bad directive or wrong number of arguments: '{name}'"))?;
        let mut values = self.values.write();
        let v = self.validate(r.param(), value, &values)?;
        self.nums[r.index].store(numeric_view(r.param(), value, &v), Ordering::Relaxed);
        values[r.index] = v;
        Ok(())
    }

    fn protected_allowed(&self) -> bool {
        // `local` would depend on the client; protected parameters stay refused unless the
        // server was started with `enable-protected-configs yes`.
        self.get("enable-protected-configs").as_deref() == Some("yes")
    }

    /// Turns a value into what CONFIG GET prints, or the validation error.
    fn validate(&self, p: &Param, value: &str, current: &[String]) -> Result<String, String> {
        let idx = |n: &str| lookup(n).map(|r| r.index);
        match p.kind {
            Kind::Bool => kind::parse_bool(value).map(|b| if b { "yes" } else { "no" }.into()),
            Kind::Num(n) => {
                let mut v = kind::parse_num(&n, value)?;
                if p.name == "hz" {
                    // updateHZ: out-of-range values are accepted but capped.
                    v = v.clamp(1, 500);
                }
                Ok(kind::format_num(&n, v))
            }
            Kind::Enum(opts) => kind::parse_enum(opts, value).map(str::to_string),
            Kind::Str(check) => {
                let port = idx("port").map_or("0", |i| current[i].as_str());
                kind::check_str(check, value, port)?;
                Ok(value.to_string())
            }
            Kind::Special(sp) => {
                let cur = PARAMS
                    .iter()
                    .position(|q| q.name == p.name)
                    .map_or("", |i| current[i].as_str());
                kind::parse_special(sp, value, cur)
            }
        }
    }
}

fn set_failed(name: &str, why: &str) -> String {
    format!("CONFIG SET failed (possibly related to argument '{name}') - {why}")
}

/// Run-time changes respite cannot carry out (Redis would re-bind its listeners); setting the
/// current value again is fine, as in Redis. (`port` is re-bound by CONFIG SET itself.)
fn cannot_apply(p: &Param, old: &str, new: &str) -> Option<&'static str> {
    match p.name {
        "bind" if old != new => Some("Failed to bind to specified addresses."),
        _ => None,
    }
}

/// Parses Redis memory units (`memtoull`): b, k, kb, m, mb, g, gb, case-insensitive.
pub fn parse_memory(v: &str) -> Option<i64> {
    memtoull(v).and_then(|n| i64::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(c: &ConfigStore, pairs: &[(&str, &str)]) -> Result<(), String> {
        let p: Vec<(&[u8], &[u8])> = pairs
            .iter()
            .map(|(a, b)| (a.as_bytes(), b.as_bytes()))
            .collect();
        c.set_many(&p)
    }

    fn failed(name: &str, why: &str) -> Result<(), String> {
        Err(set_failed(name, why))
    }

    #[test]
    fn names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for p in PARAMS {
            assert!(seen.insert(p.name), "{}", p.name);
            if let Some(a) = p.alias {
                assert!(seen.insert(a), "{a}");
            }
        }
    }

    #[test]
    fn defaults_are_valid() {
        let c = ConfigStore::default();
        for p in PARAMS {
            let cur = c.values.read().clone();
            // `dir` follows the working directory; an empty `replicaof` means "no one".
            if !matches!(
                p.kind,
                Kind::Special(Special::Dir) | Kind::Special(Special::ReplicaOf)
            ) {
                let v = c.validate(p, p.default, &cur);
                assert_eq!(v.as_deref(), Ok(p.default), "{}", p.name);
            }
        }
    }

    #[test]
    fn memory_units() {
        assert_eq!(memtoull("1gb"), Some(1 << 30));
        assert_eq!(memtoull("1G"), Some(1_000_000_000));
        assert_eq!(memtoull("10kB"), Some(10240));
        assert_eq!(memtoull(""), Some(0));
        assert_eq!(memtoull("kb"), Some(0));
        assert_eq!(memtoull("99999999999999999999"), Some(u64::MAX));
        assert_eq!(memtoull("-1"), None);
        assert_eq!(memtoull("+1"), None);
        assert_eq!(memtoull(" 1"), None);
        assert_eq!(memtoull("1.5gb"), None);
        assert_eq!(memtoull("99999999999gb"), Some(15140462030378500096));
        assert_eq!(parse_memory("2mb"), Some(2 << 20));
    }

    #[test]
    fn numbers_validate_like_redis() {
        let c = ConfigStore::default();
        assert_eq!(
            set(&c, &[("timeout", "-1")]),
            failed(
                "timeout",
                "argument must be between 0 and 2147483647 inclusive"
            )
        );
        for bad in ["abc", "1.5", "", " 5", "+5", "05"] {
            assert_eq!(
                set(&c, &[("timeout", bad)]),
                failed("timeout", "argument couldn't be parsed into an integer")
            );
        }
        assert_eq!(
            set(&c, &[("maxmemory", "-1")]),
            failed("maxmemory", "argument must be a memory value")
        );
        assert_eq!(
            set(&c, &[("maxclients", "4294967296")]),
            failed(
                "maxclients",
                "argument must be between 1 and 4294967295 inclusive"
            )
        );
        assert_eq!(
            set(&c, &[("hash-max-listpack-entries", "-1")]),
            failed(
                "hash-max-listpack-entries",
                "argument must be between 0 and 9223372036854775807 inclusive"
            )
        );
        assert_eq!(
            set(&c, &[("proto-max-bulk-len", "99999999999999999999")]),
            failed(
                "proto-max-bulk-len",
                "argument must be between 1048576 and 9223372036854775807 inclusive"
            )
        );
        assert_eq!(set(&c, &[("maxmemory", "99999999999999999999")]), Ok(()));
        assert_eq!(c.get("maxmemory").unwrap(), "18446744073709551615");
        assert_eq!(c.get_u64("maxmemory"), u64::MAX);
        assert_eq!(set(&c, &[("maxmemory", "1KB")]), Ok(()));
        assert_eq!(c.get_i64("maxmemory"), 1024);
        assert_eq!(set(&c, &[("hash-max-listpack-value", "1kb")]), Ok(()));
        assert_eq!(c.get("hash-max-ziplist-value").unwrap(), "1024");
        assert_eq!(set(&c, &[("hz", "1000")]), Ok(()));
        assert_eq!(c.get("hz").unwrap(), "500");
    }

    #[test]
    fn percent_values() {
        let c = ConfigStore::default();
        assert_eq!(set(&c, &[("maxmemory-clients", "10%")]), Ok(()));
        assert_eq!(c.get("maxmemory-clients").unwrap(), "10%");
        assert_eq!(c.get_i64("maxmemory-clients"), -10);
        assert_eq!(
            set(&c, &[("maxmemory-clients", "101%")]),
            failed(
                "maxmemory-clients",
                "percentage argument must be less or equal to 100"
            )
        );
        assert_eq!(
            set(&c, &[("maxmemory-clients", "-5")]),
            failed(
                "maxmemory-clients",
                "argument must be a memory or percent value"
            )
        );
    }

    #[test]
    fn bools_and_enums() {
        let c = ConfigStore::default();
        assert_eq!(set(&c, &[("appendonly", "YES")]), Ok(()));
        assert_eq!(c.get("appendonly").unwrap(), "yes");
        assert!(c.get_bool("appendonly"));
        assert_eq!(
            set(&c, &[("appendonly", "maybe")]),
            failed("appendonly", "argument must be 'yes' or 'no'")
        );
        assert_eq!(
            set(&c, &[("appendfsync", "foo")]),
            failed(
                "appendfsync",
                "argument(s) must be one of the following: everysec, always, no"
            )
        );
        assert_eq!(set(&c, &[("maxmemory-policy", "ALLKEYS-LRU")]), Ok(()));
        assert_eq!(c.get("maxmemory-policy").unwrap(), "allkeys-lru");
    }

    #[test]
    fn special_parameters() {
        let c = ConfigStore::default();
        for bad in ["abc", "100", "0 1", "10 -1", "3600 1 300"] {
            assert_eq!(
                set(&c, &[("save", bad)]),
                failed("save", "Invalid save parameters")
            );
        }
        assert_eq!(set(&c, &[("save", "3600 1 300 100")]), Ok(()));
        assert_eq!(c.get("save").unwrap(), "3600 1 300 100");
        assert_eq!(set(&c, &[("save", "")]), Ok(()));
        assert_eq!(c.get("save").unwrap(), "");

        let obl = "client-output-buffer-limit";
        assert_eq!(
            set(&c, &[(obl, "normal 0 0")]),
            failed(
                obl,
                "Wrong number of arguments in buffer limit configuration."
            )
        );
        assert_eq!(
            set(&c, &[(obl, "master 0 0 0")]),
            failed(
                obl,
                "Invalid client class specified in buffer limit configuration."
            )
        );
        assert_eq!(
            set(&c, &[(obl, "normal 1 2 x")]),
            failed(
                obl,
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
            )
        );
        assert_eq!(set(&c, &[(obl, "normal 1mb 2kb 3")]), Ok(()));
        assert_eq!(
            c.get(obl).unwrap(),
            "normal 1048576 2048 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );

        let nke = "notify-keyspace-events";
        for (v, want) in [
            ("A", "A"),
            ("An", "A"),
            ("Kg", "gK"),
            ("EA", "AE"),
            ("nK", "nK"),
            ("g$lshzxetd", "A"),
            ("Kmn", "nKm"),
            ("", ""),
        ] {
            assert_eq!(set(&c, &[(nke, v)]), Ok(()));
            assert_eq!(c.get(nke).unwrap(), want, "{v}");
        }
        assert_eq!(
            set(&c, &[(nke, "xyz")]),
            failed(nke, "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
        );

        let sig = "shutdown-on-sigint";
        assert_eq!(set(&c, &[(sig, "now save")]), Ok(()));
        assert_eq!(c.get(sig).unwrap(), "save now");
        assert_eq!(set(&c, &[(sig, "default")]), Ok(()));
        assert_eq!(c.get(sig).unwrap(), "default");
        assert_eq!(
            set(&c, &[(sig, "nosave save")]),
            failed(
                sig,
                "shutdown options SAVE and NOSAVE can't be used simultaneously"
            )
        );

        let lat = "latency-tracking-info-percentiles";
        assert_eq!(set(&c, &[(lat, "1.5 99.99 50")]), Ok(()));
        assert_eq!(c.get(lat).unwrap(), "1.5 99.99 50");
        assert_eq!(
            set(&c, &[(lat, "50 101")]),
            failed(
                lat,
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
            )
        );
        assert_eq!(
            set(&c, &[("oom-score-adj-values", "1 2 9999")]),
            failed(
                "oom-score-adj-values",
                "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
            )
        );
        assert_eq!(
            set(&c, &[("cluster-announce-hostname", "a_b")]),
            failed(
                "cluster-announce-hostname",
                "Hostnames may only contain alphanumeric characters, hyphens or dots"
            )
        );
        assert_eq!(
            set(&c, &[("proc-title-template", "{foo}")]),
            failed(
                "proc-title-template",
                "template format is invalid or contains unknown variables"
            )
        );
        assert_eq!(set(&c, &[("proc-title-template", "{title} x")]), Ok(()));
    }

    #[test]
    fn set_many_is_atomic_and_orders_errors_like_redis() {
        let c = ConfigStore::default();
        assert_eq!(
            set(&c, &[("maxmemory", "100"), ("timeout", "abc")]),
            failed("timeout", "argument couldn't be parsed into an integer")
        );
        assert_eq!(c.get("maxmemory").unwrap(), "0");
        assert_eq!(
            set(&c, &[("timeout", "abc"), ("foo", "1")]),
            Err("Unknown option or number of arguments for CONFIG SET - 'foo'".into())
        );
        assert_eq!(
            set(&c, &[("maxmemory", "1"), ("MAXMEMORY", "2")]),
            failed("MAXMEMORY", "duplicate parameter")
        );
        assert_eq!(
            set(&c, &[("databases", "3"), ("foo", "1")]),
            failed("databases", "can't set immutable config")
        );
        assert_eq!(
            set(&c, &[("maxmemory", "1"), ("DATABASES", "3")]),
            failed("DATABASES", "can't set immutable config")
        );
        assert_eq!(
            set(&c, &[("dir", "/tmp")]),
            failed("dir", "can't set protected config")
        );
        assert_eq!(
            set(&c, &[("lua-time-limit", "x")]),
            failed(
                "lua-time-limit",
                "argument couldn't be parsed into an integer"
            )
        );
        assert_eq!(set(&c, &[("Maxmemory", "5"), ("timeout", "7")]), Ok(()));
        assert_eq!(c.get_i64("maxmemory"), 5);
        assert_eq!(c.get_i64("timeout"), 7);
        let bind = c.get("bind").unwrap();
        assert_eq!(set(&c, &[("bind", &bind)]), Ok(()));
        assert_eq!(
            set(&c, &[("bind", "10.1.2.3")]),
            failed("bind", "Failed to bind to specified addresses.")
        );
    }

    #[test]
    fn config_get_patterns() {
        let c = ConfigStore::default();
        let got = c.get_patterns(&[b"MAXMEMORY", b"maxmemory"]);
        assert_eq!(got, vec![("MAXMEMORY".to_string(), "0".to_string())]);
        let names: Vec<String> = c
            .get_patterns(&[b"hash-max-*"])
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names.len(), 4);
        assert!(names.contains(&"hash-max-ziplist-entries".to_string()));
        assert!(c.get_patterns(&[b"use-exit*"]).is_empty());
        assert_eq!(c.get_patterns(&[b"use-exit-on-panic"]).len(), 1);
        assert!(c.get_patterns(&[b"nonexistent"]).is_empty());
        // Redis 7.2's 196, and Valkey 8.1's six `commandlog-*` names (two of them the
        // primary names of `slowlog-*`).
        assert_eq!(c.get_patterns(&[b"*"]).len(), 196 + 6);
    }

    #[test]
    fn initial_values_bypass_immutability() {
        let c = ConfigStore::default();
        assert_eq!(c.set_initial("databases", "32"), Ok(()));
        assert_eq!(c.get_i64("databases"), 32);
        assert!(c.set_initial("databases", "x").is_err());
        assert!(c.set_initial("nope", "1").is_err());
    }
}
