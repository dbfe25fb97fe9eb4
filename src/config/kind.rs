//! Parameter types and their validation, mirroring config.c: each setter turns the text given
//! to CONFIG SET (or found in a config file) into the text CONFIG GET prints, or fails with
//! Redis's message (the part after `CONFIG SET failed (possibly related to argument 'x') - `).

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `yes` / `no`.
    Bool,
    Num(Num),
    /// One of the listed names (case-insensitive; printed as listed).
    Enum(&'static [&'static str]),
    /// Free text, optionally checked.
    Str(StrCheck),
    /// A parameter with its own syntax.
    Special(Special),
}

/// A numeric parameter: bounds and parsing flags as in config.c's `numericConfigData`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Num {
    pub min: i128,
    pub max: i128,
    /// Stored in an unsigned C type: bounds are compared as unsigned and printed with `%llu`.
    pub unsigned: bool,
    /// Accepts memory units (`1gb`, `10mb`, `5k`…).
    pub memory: bool,
    /// Also accepts `N%` (stored negative, printed back as `N%`).
    pub percent: bool,
    /// Parsed and printed in octal.
    pub octal: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StrCheck {
    None,
    Hostname,
    ProcTitle,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Special {
    Save,
    ClientOutputBufferLimit,
    OomScoreAdjValues,
    NotifyKeyspaceEvents,
    Bind,
    ReplicaOf,
    LatencyPercentiles,
    ShutdownFlags,
    Dir,
    ActiveDefrag,
}

/// Splits a multi-argument value the way `sdssplitlen(value, " ")` does: on every single
/// space, keeping empty tokens; the empty string has no tokens.
pub fn split_spaces(v: &str) -> Vec<&str> {
    if v.is_empty() {
        Vec::new()
    } else {
        v.split(' ').collect()
    }
}

/// Redis `memtoull`: digits followed by an optional unit (b, k, kb, m, mb, g, gb, any case).
/// No sign, no spaces; an empty number counts as 0; overflowing digits saturate like
/// `strtoull`, and the unit multiplication wraps as the C code does.
pub fn memtoull(v: &str) -> Option<u64> {
    if v.starts_with('-') {
        return None;
    }
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let unit = v[digits..].to_ascii_lowercase();
    let mul: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    if digits >= 128 {
        return None;
    }
    let val = v[..digits].bytes().fold(0u64, |acc, d| {
        acc.checked_mul(10)
            .and_then(|a| a.checked_add(u64::from(d - b'0')))
            .unwrap_or(u64::MAX)
    });
    Some(val.wrapping_mul(mul))
}

/// C `strtoll(s, &end, 10)`: leading whitespace, optional sign, digits, saturating on
/// overflow. Returns the value and whether the whole string was consumed (`*end == '\0'`);
/// a string without digits converts to 0 with `end` at its start.
pub fn c_strtoll(s: &str) -> (i64, bool) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        neg = b[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut val: i128 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        val = (val * 10 + i128::from(b[i] - b'0')).min(i128::from(u64::MAX) + 1);
        i += 1;
    }
    if i == start {
        return (0, s.is_empty());
    }
    let v = if neg { -val } else { val };
    let v = v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    (v, i == b.len())
}

fn string2ll(s: &str) -> Option<i64> {
    crate::num::parse_i64(s.as_bytes())
}

/// Parses a numeric parameter (config.c `numericParseString` + `numericBoundaryCheck`) into
/// the value as the C `long long` it would hold.
pub fn parse_num(n: &Num, v: &str) -> Result<i64, String> {
    let mut parsed = None;
    if n.memory {
        parsed = memtoull(v).map(|x| x as i64);
    }
    if parsed.is_none() && n.percent && v.len() > 1 && v.ends_with('%') {
        if let Some(p) = string2ll(&v[..v.len() - 1]).filter(|p| *p >= 0) {
            parsed = Some(-p);
        }
    }
    if parsed.is_none() && n.octal {
        parsed = i64::from_str_radix(v, 8)
            .ok()
            .filter(|_| !v.starts_with('+'));
    }
    if parsed.is_none() && !n.memory && !n.percent && !n.octal {
        parsed = string2ll(v);
    }
    let Some(ll) = parsed else {
        return Err(if n.memory && n.percent {
            "argument must be a memory or percent value"
        } else if n.memory {
            "argument must be a memory value"
        } else if n.octal {
            "argument couldn't be parsed as an octal number"
        } else {
            "argument couldn't be parsed into an integer"
        }
        .into());
    };
    if n.unsigned {
        let u = i128::from(ll as u64);
        if u > n.max || u < n.min {
            return Err(if n.octal {
                format!(
                    "argument must be between {:o} and {:o} inclusive",
                    n.min, n.max
                )
            } else {
                format!("argument must be between {} and {} inclusive", n.min, n.max)
            });
        }
    } else if n.percent && ll < 0 {
        if i128::from(ll) < n.min {
            return Err(format!(
                "percentage argument must be less or equal to {}",
                -n.min
            ));
        }
    } else if i128::from(ll) > n.max || i128::from(ll) < n.min {
        return Err(format!(
            "argument must be between {} and {} inclusive",
            n.min, n.max
        ));
    }
    Ok(ll)
}

/// How CONFIG GET prints a numeric value.
pub fn format_num(n: &Num, ll: i64) -> String {
    if n.percent && ll < 0 {
        format!("{}%", -(ll as i128))
    } else if n.memory {
        (ll as u64).to_string()
    } else if n.octal {
        format!("{ll:o}")
    } else {
        ll.to_string()
    }
}

pub fn parse_bool(v: &str) -> Result<bool, String> {
    if v.eq_ignore_ascii_case("yes") {
        Ok(true)
    } else if v.eq_ignore_ascii_case("no") {
        Ok(false)
    } else {
        Err("argument must be 'yes' or 'no'".into())
    }
}

pub fn parse_enum(opts: &[&'static str], v: &str) -> Result<&'static str, String> {
    opts.iter()
        .find(|o| o.eq_ignore_ascii_case(v))
        .copied()
        .ok_or_else(|| {
            format!(
                "argument(s) must be one of the following: {}",
                opts.join(", ")
            )
        })
}

pub fn check_str(check: StrCheck, v: &str, port: &str) -> Result<(), String> {
    match check {
        StrCheck::None => Ok(()),
        StrCheck::Hostname => {
            if v.len() >= 256 {
                return Err("Hostnames must be less than 256 characters".into());
            }
            if v.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
            {
                Ok(())
            } else {
                Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into())
            }
        }
        StrCheck::ProcTitle => match expand_proc_title(v, port) {
            Some(s) if !s.is_empty() => Ok(()),
            _ => Err("template format is invalid or contains unknown variables".into()),
        },
    }
}

/// `sdstemplate` expansion of a proc-title template with an empty title, trimmed of spaces
/// (Redis rejects templates that expand to nothing).
fn expand_proc_title(t: &str, port: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return None;
        }
        if let Some(r) = after.strip_prefix('{') {
            out.push('{');
            rest = r;
            continue;
        }
        let close = after.find('}')?;
        let var = &after[..close];
        out.push_str(match var {
            "title" | "server-mode" | "unixsocket" | "config-file" => "",
            "listen-addr" => "*",
            "port" => port,
            "tls-port" => "0",
            _ => return None,
        });
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out.trim_matches(' ').to_string())
}

/// Validates a special parameter; returns the text CONFIG GET will print.
/// `current` is the present value (client-output-buffer-limit updates only named classes).
pub fn parse_special(sp: Special, v: &str, current: &str) -> Result<String, String> {
    match sp {
        Special::Save => parse_save(v),
        Special::ClientOutputBufferLimit => parse_obuf_limits(v, current),
        Special::OomScoreAdjValues => {
            let args = split_spaces(v);
            if args.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            let mut vals = Vec::new();
            for a in args {
                match c_strtoll(a) {
                    (n, true) if (-2000..=2000).contains(&n) => vals.push(n.to_string()),
                    _ => {
                        return Err("Invalid oom-score-adj-values, elements must be between \
                                    -2000 and 2000."
                            .into())
                    }
                }
            }
            Ok(vals.join(" "))
        }
        Special::NotifyKeyspaceEvents => keyspace_events_from_str(v)
            .map(keyspace_events_to_string)
            .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        Special::Bind => {
            let args = split_spaces(v);
            if args.len() > 16 {
                return Err("Too many bind addresses specified.".into());
            }
            Ok(args.join(" "))
        }
        Special::ReplicaOf => {
            let args = split_spaces(v);
            if args.len() != 2 {
                return Err("wrong number of arguments".into());
            }
            if args[0].eq_ignore_ascii_case("no") && args[1].eq_ignore_ascii_case("one") {
                return Ok(String::new());
            }
            match c_strtoll(args[1]) {
                (p, true) if (0..=65535).contains(&p) => Ok(format!("{} {p}", args[0])),
                _ => Err("Invalid master port".into()),
            }
        }
        Special::LatencyPercentiles => {
            let mut out = Vec::new();
            for a in split_spaces(v) {
                let p = parse_double(a)
                    .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
                if !(0.0..=100.0).contains(&p) {
                    return Err("latency-tracking-info-percentiles parameters should sit \
                                between [0.0,100.0]"
                        .into());
                }
                out.push(trim_double(&format!("{p:.6}")));
            }
            Ok(out.join(" "))
        }
        Special::ShutdownFlags => {
            const NAMES: [&str; 5] = ["default", "save", "nosave", "now", "force"];
            let mut set = [false; 5];
            for a in split_spaces(v) {
                let i = NAMES
                    .iter()
                    .position(|n| n.eq_ignore_ascii_case(a))
                    .ok_or_else(|| {
                        format!(
                            "argument(s) must be one of the following: {}",
                            NAMES.join(", ")
                        )
                    })?;
                set[i] = true;
            }
            if set[1] && set[2] {
                return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
            }
            let names: Vec<&str> = (1..5).filter(|&i| set[i]).map(|i| NAMES[i]).collect();
            Ok(if names.is_empty() {
                "default".into()
            } else {
                names.join(" ")
            })
        }
        Special::Dir => Ok(v.to_string()),
        Special::ActiveDefrag => {
            if parse_bool(v)? {
                Err(
                    "Active defragmentation cannot be enabled: it requires a Redis server \
                     compiled with a modified Jemalloc like the one shipped by default with the \
                     Redis source distribution"
                        .into(),
                )
            } else {
                Ok("no".into())
            }
        }
    }
}

fn parse_save(v: &str) -> Result<String, String> {
    let args = split_spaces(v);
    let bad = || "Invalid save parameters".to_string();
    if args.len() % 2 == 1 {
        return Err(bad());
    }
    let mut out = Vec::new();
    for (j, a) in args.iter().enumerate() {
        let (n, all) = c_strtoll(a);
        if !all || (j % 2 == 0 && n < 1) || (j % 2 == 1 && n < 0) {
            return Err(bad());
        }
        // Seconds are a time_t, changes an int (truncated like the C cast).
        out.push(if j % 2 == 0 {
            n.to_string()
        } else {
            (n as i32).to_string()
        });
    }
    Ok(out.join(" "))
}

fn parse_obuf_limits(v: &str, current: &str) -> Result<String, String> {
    let args = split_spaces(v);
    if !args.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut classes: Vec<[String; 3]> = {
        let cur = split_spaces(current);
        (0..3)
            .map(|c| {
                let at = |k: usize| cur.get(c * 4 + k).unwrap_or(&"0").to_string();
                [at(1), at(2), at(3)]
            })
            .collect()
    };
    let mut updates = Vec::new();
    for chunk in args.chunks(4) {
        let class = match chunk[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let (hard, soft) = (memtoull(chunk[1]), memtoull(chunk[2]));
        let (secs, all) = c_strtoll(chunk[3]);
        match (hard, soft) {
            (Some(h), Some(s)) if all && secs >= 0 => updates.push((
                class,
                [h.to_string(), s.to_string(), (secs as i32).to_string()],
            )),
            _ => {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit \
                            configuration."
                        .into(),
                )
            }
        }
    }
    for (c, vals) in updates {
        classes[c] = vals;
    }
    Ok(["normal", "slave", "pubsub"]
        .iter()
        .zip(classes)
        .map(|(n, [h, s, sec])| format!("{n} {h} {s} {sec}"))
        .collect::<Vec<_>>()
        .join(" "))
}

/// Redis `string2d`: a strtod-style float with nothing around it; no NaN.
fn parse_double(s: &str) -> Option<f64> {
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// `trimDoubleString`: drop trailing zeros (and a trailing dot) of a `%f` rendering.
fn trim_double(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

// Keyspace notification classes (notify.c `NOTIFY_*`), the bits of the parsed
// `notify-keyspace-events` value that `instance::notify` tests on every event.
pub const N_KEYSPACE: u32 = 1 << 0;
pub const N_KEYEVENT: u32 = 1 << 1;
pub const N_GENERIC: u32 = 1 << 2;
pub const N_STRING: u32 = 1 << 3;
pub const N_LIST: u32 = 1 << 4;
pub const N_SET: u32 = 1 << 5;
pub const N_HASH: u32 = 1 << 6;
pub const N_ZSET: u32 = 1 << 7;
pub const N_EXPIRED: u32 = 1 << 8;
pub const N_EVICTED: u32 = 1 << 9;
pub const N_STREAM: u32 = 1 << 10;
pub const N_KEY_MISS: u32 = 1 << 11;
pub const N_MODULE: u32 = 1 << 12;
pub const N_NEW: u32 = 1 << 13;
pub const N_ALL: u32 = N_GENERIC
    | N_STRING
    | N_LIST
    | N_SET
    | N_HASH
    | N_ZSET
    | N_EXPIRED
    | N_EVICTED
    | N_STREAM
    | N_MODULE;

/// Class letters in the order Redis prints them (inside the `A` shorthand).
const CLASS_LETTERS: [(u8, u32); 11] = [
    (b'g', N_GENERIC),
    (b'$', N_STRING),
    (b'l', N_LIST),
    (b's', N_SET),
    (b'h', N_HASH),
    (b'z', N_ZSET),
    (b'x', N_EXPIRED),
    (b'e', N_EVICTED),
    (b't', N_STREAM),
    (b'd', N_MODULE),
    (b'n', N_NEW),
];

/// notify.c `keyspaceEventsStringToFlags`: None on a letter outside `Ag$lshzxeKEtmdn`.
/// The value is read as a C string: it ends at its first NUL byte.
pub fn keyspace_events_from_str(v: &str) -> Option<u32> {
    let mut flags = 0;
    for c in v.bytes().take_while(|&c| c != 0) {
        flags |= match c {
            b'A' => N_ALL,
            b'K' => N_KEYSPACE,
            b'E' => N_KEYEVENT,
            b'm' => N_KEY_MISS,
            _ => CLASS_LETTERS.iter().find(|(l, _)| *l == c)?.1,
        };
    }
    Some(flags)
}

/// notify.c `keyspaceEventsFlagsToString`: with every `A` class set, `A` stands for them and
/// `n` is not printed (so `AKEn` reads back as `AKE` while `new` events stay enabled).
pub fn keyspace_events_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & N_ALL == N_ALL {
        s.push('A');
    } else {
        for (l, f) in CLASS_LETTERS {
            if flags & f != 0 {
                s.push(l as char);
            }
        }
    }
    for (l, f) in [(b'K', N_KEYSPACE), (b'E', N_KEYEVENT), (b'm', N_KEY_MISS)] {
        if flags & f != 0 {
            s.push(l as char);
        }
    }
    s
}
