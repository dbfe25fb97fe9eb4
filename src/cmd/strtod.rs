//! C `strtod` on a byte string, as glibc parses it (leading spaces, sign, decimal and hex
//! floats, `inf`/`infinity`, `nan`), for the commands whose Redis code calls it: sorted-set
//! scores and ranges (zsets/parse.rs, under `string2d`'s checks) and SORT weights.

/// Result of C `strtod` on a byte string: the value, how many bytes it consumed (0 when no
/// conversion happened) and whether it overflowed or underflowed to zero (`ERANGE`).
pub struct Strtod {
    pub value: f64,
    pub used: usize,
    pub range_err: bool,
}

pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// What C's number parsers skip first: leading white space, then one optional sign.
/// Returns whether the sign was `-` and where the digits start.
pub fn space_and_sign(s: &[u8]) -> (bool, usize) {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    match s.get(i) {
        Some(b'-') => (true, i + 1),
        Some(b'+') => (false, i + 1),
        _ => (false, i),
    }
}

pub fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        used: 0,
        range_err: false,
    };
    let (neg, i) = space_and_sign(s);
    let sign = |v: f64| if neg { -v } else { v };
    let rest = &s[i..];
    let starts =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts(b"infinity") {
        return Strtod {
            value: sign(f64::INFINITY),
            used: i + 8,
            range_err: false,
        };
    }
    if starts(b"inf") {
        return Strtod {
            value: sign(f64::INFINITY),
            used: i + 3,
            range_err: false,
        };
    }
    if starts(b"nan") {
        let mut used = i + 3;
        // "nan(n-char-sequence)" is consumed whole when the parenthesis closes.
        if s.get(used) == Some(&b'(') {
            let mut j = used + 1;
            while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
                j += 1;
            }
            if s.get(j) == Some(&b')') {
                used = j + 1;
            }
        }
        return Strtod {
            value: f64::NAN,
            used,
            range_err: false,
        };
    }
    if (rest.starts_with(b"0x") || rest.starts_with(b"0X")) && hex_digits_follow(&rest[2..]) {
        let (v, used) = hex_float(&rest[2..]);
        let v = sign(v);
        let range_err = v.is_infinite() || (v == 0.0 && used.1);
        return Strtod {
            value: v,
            used: i + 2 + used.0,
            range_err,
        };
    }
    // Decimal: digits [. digits] [e [sign] digits], at least one mantissa digit.
    let mut j = 0;
    let mut mantissa_digits = 0;
    let mut nonzero = false;
    while j < rest.len() && rest[j].is_ascii_digit() {
        nonzero |= rest[j] != b'0';
        mantissa_digits += 1;
        j += 1;
    }
    if j < rest.len() && rest[j] == b'.' {
        j += 1;
        while j < rest.len() && rest[j].is_ascii_digit() {
            nonzero |= rest[j] != b'0';
            mantissa_digits += 1;
            j += 1;
        }
    }
    if mantissa_digits == 0 {
        return none;
    }
    if j < rest.len() && (rest[j] == b'e' || rest[j] == b'E') {
        let mut k = j + 1;
        if k < rest.len() && (rest[k] == b'+' || rest[k] == b'-') {
            k += 1;
        }
        if k < rest.len() && rest[k].is_ascii_digit() {
            while k < rest.len() && rest[k].is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    // The slice is ASCII by construction; Rust's parser rounds correctly, like glibc.
    let text = std::str::from_utf8(&rest[..j]).unwrap_or("0");
    let v: f64 = text.parse().unwrap_or(0.0);
    Strtod {
        value: sign(v),
        used: i + j,
        // glibc reports ERANGE for an inexact subnormal too, and a decimal subnormal
        // is never exact.
        range_err: v.is_infinite()
            || (v == 0.0 && nonzero)
            || v.abs() < f64::MIN_POSITIVE && v != 0.0,
    }
}

fn hex_digits_follow(s: &[u8]) -> bool {
    match s.first() {
        Some(c) if c.is_ascii_hexdigit() => true,
        Some(b'.') => s.get(1).is_some_and(|c| c.is_ascii_hexdigit()),
        _ => false,
    }
}

/// Hex float body after `0x`: returns the value and (bytes used, nonzero digits seen).
fn hex_float(s: &[u8]) -> (f64, (usize, bool)) {
    let mut mant: u64 = 0;
    let mut exp: i64 = 0;
    let mut sticky = false;
    let mut nonzero = false;
    let mut j = 0;
    let mut seen_dot = false;
    while j < s.len() {
        let c = s[j];
        if c == b'.' && !seen_dot {
            seen_dot = true;
            j += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else {
            break;
        };
        nonzero |= d != 0;
        if mant >> 56 == 0 {
            mant = mant * 16 + u64::from(d);
            if seen_dot {
                exp -= 4;
            }
        } else {
            // Beyond 60 significant bits: keep only whether anything non-zero was dropped.
            sticky |= d != 0;
            if !seen_dot {
                exp += 4;
            }
        }
        j += 1;
    }
    if j < s.len() && (s[j] == b'p' || s[j] == b'P') {
        let mut k = j + 1;
        let eneg = match s.get(k) {
            Some(b'-') => {
                k += 1;
                true
            }
            Some(b'+') => {
                k += 1;
                false
            }
            _ => false,
        };
        if k < s.len() && s[k].is_ascii_digit() {
            let mut e: i64 = 0;
            while k < s.len() && s[k].is_ascii_digit() {
                e = (e * 10 + i64::from(s[k] - b'0')).min(1 << 20);
                k += 1;
            }
            exp += if eneg { -e } else { e };
            j = k;
        }
    }
    if sticky {
        mant |= 1;
    }
    let mut v = mant as f64;
    // Scale in steps that stay exact until the final one.
    let mut e = exp.clamp(-3000, 3000);
    while e > 0 {
        let step = e.min(1000);
        v *= 2f64.powi(step as i32);
        e -= step;
    }
    while e < 0 {
        let step = (-e).min(1000);
        v /= 2f64.powi(step as i32);
        e += step;
    }
    (v, (j, nonzero))
}
