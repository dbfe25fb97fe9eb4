//! Start-up configuration (flags / redis.conf-style file) and the run-time parameter store
//! behind `CONFIG GET/SET`.

use std::collections::BTreeMap;

/// Settings fixed at start-up.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub requirepass: Option<String>,
    pub maxclients: usize,
    pub databases: usize,
    /// Worker threads (0 = number of cores).
    pub threads: usize,
    /// Start with a manual clock (test double).
    pub manual_clock: bool,
    /// Print the bound port on stdout (for `--port 0`).
    pub print_port: bool,
    /// Any other redis.conf parameters given at start-up (`name` → value).
    pub params: Vec<(String, String)>,
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
        }
    }
}

/// How a run-time parameter's value is validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    /// Memory sizes accept `1gb`, `100mb` … and are reported in bytes.
    Memory,
    Enum(&'static [&'static str]),
    /// Free text.
    Str,
    /// Set at start-up only: CONFIG SET refuses it.
    Immutable,
}

#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: Kind,
}

/// Every standard Redis 7 parameter name with its default. Extend as needed; names not here
/// are unknown to CONFIG GET/SET exactly as in Redis.
pub static PARAMS: &[Param] = &[
    Param {
        name: "port",
        default: "6379",
        kind: Kind::Immutable,
    },
    Param {
        name: "bind",
        default: "127.0.0.1",
        kind: Kind::Str,
    },
    Param {
        name: "requirepass",
        default: "",
        kind: Kind::Str,
    },
    Param {
        name: "maxclients",
        default: "10000",
        kind: Kind::Int {
            min: 1,
            max: i64::MAX,
        },
    },
    Param {
        name: "databases",
        default: "16",
        kind: Kind::Immutable,
    },
    Param {
        name: "timeout",
        default: "0",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "maxmemory",
        default: "0",
        kind: Kind::Memory,
    },
    Param {
        name: "appendonly",
        default: "no",
        kind: Kind::Bool,
    },
    Param {
        name: "appendfsync",
        default: "everysec",
        kind: Kind::Enum(&["always", "everysec", "no"]),
    },
    Param {
        name: "save",
        default: "",
        kind: Kind::Str,
    },
    Param {
        name: "dir",
        default: ".",
        kind: Kind::Str,
    },
    Param {
        name: "proto-max-bulk-len",
        default: "536870912",
        kind: Kind::Memory,
    },
    Param {
        name: "client-query-buffer-limit",
        default: "1073741824",
        kind: Kind::Memory,
    },
];

pub struct ConfigStore {
    values: parking_lot::RwLock<BTreeMap<&'static str, String>>,
}

impl Default for ConfigStore {
    fn default() -> Self {
        ConfigStore {
            values: parking_lot::RwLock::new(
                PARAMS
                    .iter()
                    .map(|p| (p.name, p.default.to_string()))
                    .collect(),
            ),
        }
    }
}

impl ConfigStore {
    pub fn param(name: &str) -> Option<&'static Param> {
        PARAMS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
    }

    pub fn get(&self, name: &str) -> Option<String> {
        let p = Self::param(name)?;
        self.values.read().get(p.name).cloned()
    }

    /// Integer view of a parameter (memory sizes already normalised to bytes).
    pub fn get_i64(&self, name: &str) -> i64 {
        self.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// Matching (name, value) pairs for a glob, in name order.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(&'static str, String)> {
        let v = self.values.read();
        v.iter()
            .filter(|(k, _)| crate::types::glob::glob_match(pattern, k.as_bytes(), true))
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    /// Sets a parameter after validation; the error is Redis's text after `ERR `.
    pub fn set(&self, name: &str, value: &str) -> Result<(), String> {
        let p = Self::param(name).ok_or_else(|| {
            format!("Unknown option or number of arguments for CONFIG SET - '{name}'")
        })?;
        let norm = normalise(p, value)?;
        self.values.write().insert(p.name, norm);
        Ok(())
    }

    /// Start-up setting, allowed even for immutable parameters.
    pub fn set_initial(&self, name: &str, value: &str) -> Result<(), String> {
        let p = Self::param(name)
            .ok_or_else(|| format!("Bad directive or wrong number of arguments: '{name}'"))?;
        let norm = match p.kind {
            Kind::Immutable => value.to_string(),
            _ => normalise(p, value)?,
        };
        self.values.write().insert(p.name, norm);
        Ok(())
    }
}

/// Parses Redis memory units (`memtoull`): b, k, kb, m, mb, g, gb, case-insensitive.
pub fn parse_memory(v: &str) -> Option<i64> {
    let lower = v.to_ascii_lowercase();
    let (num, mul) = [
        ("gb", 1i64 << 30),
        ("g", 1_000_000_000),
        ("mb", 1 << 20),
        ("m", 1_000_000),
        ("kb", 1024),
        ("k", 1000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.to_string(), *m)))
    .unwrap_or((lower.clone(), 1));
    let n: i64 = num.parse().ok()?;
    if n < 0 {
        return None;
    }
    n.checked_mul(mul)
}

fn normalise(p: &Param, value: &str) -> Result<String, String> {
    let bad = |why: &str| {
        format!(
            "CONFIG SET failed (possibly related to argument '{}') - {why}",
            p.name
        )
    };
    match p.kind {
        Kind::Immutable => Err(bad("can't set immutable config")),
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err(bad("argument must be 'yes' or 'no'")),
        },
        Kind::Int { min, max } => match value.parse::<i64>() {
            Ok(n) if n >= min && n <= max => Ok(n.to_string()),
            Ok(_) => Err(bad(&format!(
                "argument must be between {min} and {max} inclusive"
            ))),
            Err(_) => Err(bad("argument couldn't be parsed into an integer")),
        },
        Kind::Memory => parse_memory(value)
            .map(|n| n.to_string())
            .ok_or_else(|| bad("argument must be a memory value")),
        Kind::Enum(opts) => {
            let l = value.to_ascii_lowercase();
            if opts.contains(&l.as_str()) {
                Ok(l)
            } else {
                Err(bad("argument(s) must be one of the following: ") + &opts.join(", "))
            }
        }
        Kind::Str => Ok(value.to_string()),
    }
}
