//! Script flags from a `#!lua flags=...` first line (Redis 7 `evalExtractShebangFlags`).
//! A script without a shebang runs in the legacy (compat) mode, where flags do not apply.

use crate::protocol::parse::split_args;

/// The flags a shebang script declared. Parsed once per compiled script.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(u8);

impl Flags {
    pub const NO_WRITES: Flags = Flags(1);
    pub const ALLOW_OOM: Flags = Flags(2);
    pub const ALLOW_STALE: Flags = Flags(4);
    pub const NO_CLUSTER: Flags = Flags(8);
    pub const ALLOW_CROSS_SLOT: Flags = Flags(16);

    pub fn has(self, f: Flags) -> bool {
        self.0 & f.0 != 0
    }

    /// Flags from their bit set (unknown bits dropped).
    pub fn from_bits(bits: u8) -> Flags {
        Flags(bits & 31)
    }

    /// The flag names set, in Redis's `scripts_flags_def` order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        NAMES
            .iter()
            .filter(move |(_, f)| self.has(*f))
            .map(|(n, _)| std::str::from_utf8(n).unwrap_or_default())
    }
}

/// Redis's `scripts_flags_def`, in its order.
const NAMES: &[(&[u8], Flags)] = &[
    (b"no-writes", Flags::NO_WRITES),
    (b"allow-oom", Flags::ALLOW_OOM),
    (b"allow-stale", Flags::ALLOW_STALE),
    (b"no-cluster", Flags::NO_CLUSTER),
    (b"allow-cross-slot-keys", Flags::ALLOW_CROSS_SLOT),
];

/// A parsed script header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shebang {
    /// `None` for a script without shebang (legacy mode: flags do not apply).
    pub flags: Option<Flags>,
    /// Bytes of the shebang line, excluding its `\n`: the code compiled starts at the line
    /// feed, so line numbers stay those the user wrote.
    pub len: usize,
}

/// C string view: Redis compares and prints these with `strcmp` / `%s`.
fn cstr(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// Parses the shebang of `body`. The error text lacks the `ERR ` prefix Redis adds.
pub fn parse(body: &[u8]) -> Result<Shebang, String> {
    if !body.starts_with(b"#!") {
        return Ok(Shebang {
            flags: None,
            len: 0,
        });
    }
    // `strchr` on the body: a NUL before the line feed ends the search.
    let len = match body.iter().position(|&c| c == b'\n' || c == 0) {
        Some(n) if body[n] == b'\n' => n,
        _ => return Err("Invalid script shebang".into()),
    };
    let parts = match split_args(&body[..len]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("Invalid engine in script shebang".into()),
    };
    let engine = cstr(&parts[0]);
    if engine != b"#!lua" {
        return Err(format!(
            "Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = Flags::default();
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "Unknown lua shebang option: {}",
                String::from_utf8_lossy(cstr(part))
            ));
        };
        // `sdssplitlen` of an empty string yields no element at all.
        if list.is_empty() {
            continue;
        }
        for name in list.split(|&c| c == b',') {
            let name = cstr(name);
            match NAMES.iter().find(|(n, _)| *n == name) {
                Some((_, f)) => flags.0 |= f.0,
                None => {
                    return Err(format!(
                        "Unexpected flag in script shebang: {}",
                        String::from_utf8_lossy(name)
                    ))
                }
            }
        }
    }
    Ok(Shebang {
        flags: Some(flags),
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(body: &str) -> Result<Option<Flags>, String> {
        parse(body.as_bytes()).map(|s| s.flags)
    }

    #[test]
    fn legacy_and_plain() {
        assert_eq!(
            parse(b"return 1").unwrap(),
            Shebang {
                flags: None,
                len: 0
            }
        );
        assert_eq!(
            parse(b"#!lua\nreturn 1").unwrap(),
            Shebang {
                flags: Some(Flags::default()),
                len: 5
            }
        );
    }

    #[test]
    fn flag_lists() {
        let f = flags("#!lua flags=no-writes,allow-oom\n").unwrap().unwrap();
        assert!(f.has(Flags::NO_WRITES) && f.has(Flags::ALLOW_OOM));
        assert!(!f.has(Flags::NO_CLUSTER));
        let f = flags("#!lua flags=allow-stale flags=no-cluster,allow-cross-slot-keys\n");
        let f = f.unwrap().unwrap();
        assert!(f.has(Flags::ALLOW_STALE) && f.has(Flags::NO_CLUSTER));
        assert!(f.has(Flags::ALLOW_CROSS_SLOT));
        assert_eq!(flags("#!lua flags=\n"), Ok(Some(Flags::default())));
        assert_eq!(
            flags("#!lua   \"flags=no-writes\"  \r\n"),
            Ok(Some(Flags::NO_WRITES))
        );
    }

    #[test]
    fn errors() {
        assert_eq!(flags("#!lua"), Err("Invalid script shebang".into()));
        assert_eq!(flags("#!lua\0\n"), Err("Invalid script shebang".into()));
        assert_eq!(
            flags("#!lua \"x\n"),
            Err("Invalid engine in script shebang".into())
        );
        assert_eq!(
            flags("#!js\n"),
            Err("Unexpected engine in script shebang: #!js".into())
        );
        assert_eq!(
            flags("#!LUA\n"),
            Err("Unexpected engine in script shebang: #!LUA".into())
        );
        assert_eq!(
            flags("#!lua name=x\n"),
            Err("Unknown lua shebang option: name=x".into())
        );
        assert_eq!(
            flags("#!lua flags=no-writes,bad\n"),
            Err("Unexpected flag in script shebang: bad".into())
        );
        assert_eq!(
            flags("#!lua flags=no-writes,\n"),
            Err("Unexpected flag in script shebang: ".into())
        );
    }
}
