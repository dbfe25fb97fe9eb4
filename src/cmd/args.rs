//! Argument parsing helpers with Redis's error replies.

use super::errors;
use crate::protocol::parse::parse_i64;
use crate::protocol::Reply;

/// Case-insensitive ASCII comparison of an argument with an option name.
#[inline]
pub fn is(arg: &[u8], opt: &str) -> bool {
    arg.eq_ignore_ascii_case(opt.as_bytes())
}

/// Strict integer (`string2ll`), or `ERR value is not an integer or out of range`.
pub fn int(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(errors::not_int)
}

/// Redis `string2ld`/`strtold`-style float parse: no leading/trailing spaces, accepts
/// `inf`/`-inf`/`+inf` and exponent forms; rejects NaN.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    if arg.is_empty() || arg.len() > 5120 {
        return None;
    }
    if arg[0].is_ascii_whitespace() || arg[arg.len() - 1].is_ascii_whitespace() {
        return None;
    }
    let s = std::str::from_utf8(arg).ok()?;
    let lower = s.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            // Rust accepts forms strtod rejects (e.g. "infinity" handled above); reject
            // anything that is not plain decimal/exponent or hex-free text.
            if lower.contains("nan") || lower.contains("inf") || lower.starts_with("0x") {
                return None;
            }
            lower.parse::<f64>().ok()?
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// Float argument, or `ERR value is not a valid float`.
pub fn float(arg: &[u8]) -> Result<f64, Reply> {
    parse_f64(arg).ok_or_else(|| errors::err(errors::NOT_FLOAT))
}

/// Database index for SELECT/MOVE/COPY/SWAPDB.
pub fn db_index(arg: &[u8], databases: usize) -> Result<usize, Reply> {
    let n = parse_i64(arg).ok_or_else(|| errors::err(errors::NOT_INT))?;
    if n < 0 || n as usize >= databases {
        return Err(errors::err(errors::DB_INDEX));
    }
    Ok(n as usize)
}

/// `addReplyHelp`: the container's usage line, the given lines, then `HELP`, all as status
/// strings.
pub fn help(container: &str, lines: &[&'static str]) -> Reply {
    let mut out = Vec::with_capacity(lines.len() + 3);
    out.push(Reply::Status(
        format!("{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").into(),
    ));
    out.extend(lines.iter().map(|l| Reply::status(l)));
    out.push(Reply::status("HELP"));
    out.push(Reply::status("    Prints this help."));
    Reply::Array(out)
}

/// Redis `getTimeoutFromObjectOrReply` in milliseconds: a non-negative integer. Returns the
/// duration, not the deadline.
pub fn timeout_ms(arg: &[u8]) -> Result<u64, Reply> {
    let t = parse_i64(arg)
        .ok_or_else(|| errors::err("ERR timeout is not an integer or out of range"))?;
    if t < 0 {
        return Err(errors::err("ERR timeout is negative"));
    }
    Ok(t as u64)
}
