//! MEMORY: USAGE (an estimate of a key's footprint from the engine's own accounting),
//! MALLOC-STATS, PURGE and HELP. DOCTOR and STATS are not offered (their reports are
//! built from allocator and server statistics respite does not keep the way Redis does).

use super::super::args::{self, is};
use super::super::{errors, Cx};
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::types::value::Entry;

pub fn help(_cx: &mut Cx) -> Reply {
    args::help(
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    )
}

/// `MEMORY USAGE key [SAMPLES count]`: options are checked first, as Redis does; the
/// estimate always covers the whole value (the engine keeps sizes, so sampling buys
/// nothing).
pub fn usage(cx: &mut Cx) -> Reply {
    let a = cx.args;
    let mut j = 3;
    while j < a.len() {
        if is(&a[j], "SAMPLES") && j + 1 < a.len() {
            match parse_i64(&a[j + 1]) {
                None => return errors::not_int(),
                Some(n) if n < 0 => return errors::syntax(),
                Some(_) => {}
            }
            j += 2;
        } else {
            return errors::syntax();
        }
    }
    let key_len = a[2].len();
    match cx.ks.get_notouch(&a[2]) {
        None => Reply::Nil,
        Some(e) => {
            let n = e.value.approx_size() + key_len + std::mem::size_of::<Entry>();
            Reply::Int(n as i64)
        }
    }
}

/// Redis answers this for any allocator but jemalloc; respite's is mimalloc.
pub fn malloc_stats(_cx: &mut Cx) -> Reply {
    Reply::bulk_static("Stats not supported for the current allocator")
}

/// Redis answers OK whatever the allocator could give back.
pub fn purge(_cx: &mut Cx) -> Reply {
    Reply::OK
}
