//! MEMORY: USAGE (a key's footprint in respite's structures, sampled as Redis samples),
//! STATS and DOCTOR (from the counting allocator's live bytes, see `crate::alloc`),
//! MALLOC-STATS, PURGE and HELP.

use super::super::args::{self, is};
use super::super::{errors, Cx};
use crate::engine::{Access, SHARDS};
use crate::instance::state::Shared;
use crate::num::parse_i64;
use crate::protocol::Reply;
use crate::types::set::Member;
use crate::types::value::{Entry, StrVal, Value};
use bytes::Bytes;

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

/// Redis's `OBJ_COMPUTE_SIZE_DEF_SAMPLES`.
const DEFAULT_SAMPLES: usize = 5;

/// `MEMORY USAGE key [SAMPLES count]` (Redis `memoryCommand` + `objectComputeSize`): the
/// key's footprint in respite's own structures. As in Redis, a collection's elements are
/// sampled (the first `count`, default 5, 0 for all) and their average stands for every
/// element, so a huge value is never walked unless asked; what does not depend on the
/// elements (the headers, the per-element slots of respite's tables) is counted exactly.
/// Options are checked before the key is looked up, as Redis does.
pub fn usage(cx: &mut Cx) -> Reply {
    let a = cx.args;
    let mut samples = DEFAULT_SAMPLES;
    let mut j = 3;
    while j < a.len() {
        if is(&a[j], "SAMPLES") && j + 1 < a.len() {
            match parse_i64(&a[j + 1]) {
                None => return errors::not_int(),
                Some(n) if n < 0 => return errors::syntax(),
                Some(0) => samples = usize::MAX,
                Some(n) => samples = usize::try_from(n).unwrap_or(usize::MAX),
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
            // The key's buffer and its slot in the shard's map (the entry holds the value
            // header inline).
            let key = std::mem::size_of::<Bytes>() + alloc_size(key_len);
            let n = key + std::mem::size_of::<Entry>() + value_size(&e.value, samples);
            Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
        }
    }
}

/// What the allocator hands out for a request of `n` bytes: mimalloc's size classes, in
/// 8-byte steps up to 64 bytes, then four classes per power of two.
pub(crate) fn alloc_size(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    if n <= 64 {
        return (n + 7) & !7;
    }
    let step = 1usize << (usize::BITS - 1 - n.leading_zeros() - 2);
    (n + step - 1) & !(step - 1)
}

/// A stored element: its `Bytes` handle plus its buffer.
fn bytes_cost(b: &[u8]) -> usize {
    std::mem::size_of::<Bytes>() + alloc_size(b.len())
}

/// Redis's extrapolation: the average of `cost` over the first `samples` items, times
/// `len`.
fn sampled<T>(
    items: impl Iterator<Item = T>,
    len: usize,
    samples: usize,
    cost: impl Fn(T) -> usize,
) -> usize {
    let (mut total, mut n) = (0usize, 0usize);
    for item in items.take(samples) {
        total += cost(item);
        n += 1;
    }
    if n == 0 {
        0
    } else if n == len {
        total
    } else {
        (total as f64 / n as f64 * len as f64) as usize
    }
}

/// A string kept in a hashtable slot: only a long one has a buffer of its own.
fn slot_string_cost(b: &[u8]) -> usize {
    if b.len() > crate::types::set::flat::INLINE {
        alloc_size(b.len())
    } else {
        0
    }
}

/// Sorted set member: its map entry, tree node and score.
const ZSET_SLOT: usize = 112 - 32;

fn value_size(v: &Value, samples: usize) -> usize {
    use std::mem::size_of;
    match v {
        Value::Str(StrVal::Int(_)) => 0,
        Value::Str(StrVal::Bytes { data, .. }) => alloc_size(data.capacity()),
        Value::List(l) => {
            size_of::<crate::types::list::List>()
                + sampled(l.iter(), l.len(), samples, |b| bytes_cost(b))
        }
        Value::Set(s) => {
            let head = size_of::<crate::types::set::SetValue>();
            let per = |m: Member| match m {
                Member::Int(_) => 8,
                Member::Str(b) => bytes_cost(b),
            };
            if s.is_intset() {
                head + s.len() * 8
            } else if s.encoding() == "hashtable" {
                let per = |m: Member| m.with_text(slot_string_cost);
                head + s.table_bytes() + sampled(s.iter(), s.len(), samples, per)
            } else {
                head + sampled(s.iter(), s.len(), samples, per)
            }
        }
        Value::Hash(h) => {
            let head = size_of::<crate::types::hash::HashValue>();
            if h.is_listpack() {
                head + sampled(h.iter(), h.len(), samples, |(f, v)| {
                    bytes_cost(f) + bytes_cost(v)
                })
            } else {
                head + h.table_bytes()
                    + sampled(h.iter(), h.len(), samples, |(f, v)| {
                        slot_string_cost(f) + slot_string_cost(v)
                    })
            }
        }
        Value::ZSet(z) => {
            size_of::<crate::types::zset::ZSet>()
                + sampled(z.iter(), z.len(), samples, |it| {
                    ZSET_SLOT + bytes_cost(&it.member)
                })
        }
        // The engine keeps the stream's listpack bytes as it goes (no walk), and groups
        // are few.
        Value::Stream(s) => size_of::<crate::types::stream::Stream>() + s.approx_size(),
    }
}

/// Redis answers this for any allocator but jemalloc; respite's is mimalloc, whose release
/// build keeps no per-size-class statistics to report.
pub fn malloc_stats(_cx: &mut Cx) -> Reply {
    Reply::bulk_static("Stats not supported for the current allocator")
}

/// Has mimalloc return the pages it holds free (`mi_collect`), as Redis has jemalloc purge
/// its dirty pages.
pub fn purge(_cx: &mut Cx) -> Reply {
    crate::alloc::purge();
    Reply::OK
}

/// Redis `getMemoryOverheadData`: where the live bytes go, in Redis's terms.
pub(in crate::cmd) struct Overhead {
    pub total: u64,
    pub startup: u64,
    pub peak: u64,
    pub rss: u64,
    pub lua_caches: u64,
    pub functions_caches: u64,
    /// What the connections hold (`mem_clients_normal`: Redis 7.2 sums its normal and
    /// pub/sub clients there), as CLIENT LIST's `tot-mem` adds it up.
    pub clients_normal: u64,
    /// (db, main table bytes, expires index bytes) of each database with keys.
    pub dbs: Vec<(usize, u64, u64)>,
    pub overhead_total: u64,
    pub keys: u64,
    pub bytes_per_key: u64,
    pub dataset: u64,
    pub dataset_perc: f64,
    pub peak_perc: f64,
    /// Redis's stand-ins when the allocator reports nothing (`cronUpdateMemoryStats`):
    /// allocated = used, active = resident = RSS less Lua's VM.
    pub allocator_allocated: u64,
    pub allocator_active: u64,
    pub allocator_resident: u64,
    pub cached_scripts: u64,
}

impl Overhead {
    pub fn allocator_frag(&self) -> (f64, i64) {
        ratio(self.allocator_active, self.allocator_allocated)
    }
    pub fn allocator_rss(&self) -> (f64, i64) {
        ratio(self.allocator_resident, self.allocator_active)
    }
    pub fn rss_extra(&self) -> (f64, i64) {
        ratio(self.rss, self.allocator_resident)
    }
    /// `mem_fragmentation_ratio` / `fragmentation`: RSS over live bytes.
    pub fn total_frag(&self) -> (f64, i64) {
        ratio(self.rss, self.total)
    }
}

fn ratio(a: u64, b: u64) -> (f64, i64) {
    let r = if b == 0 { 0.0 } else { a as f64 / b as f64 };
    (r, a as i64 - b as i64)
}

/// Visits the shards through `ks`, the command's view (a handler holds the gate already).
pub(in crate::cmd) fn overhead(srv: &Shared, ks: &mut Access) -> Overhead {
    let total = super::super::refusals::used_memory();
    let rss = super::super::refusals::rss();
    let startup = srv.ks.startup_memory.min(total);
    let peak = crate::alloc::peak().unwrap_or(total).max(total);
    let m = crate::script::memory_info(srv);
    let clients_normal: u64 = srv.clients.all().iter().map(|h| h.mem.total() as u64).sum();
    let mut overhead_total = startup + clients_normal + m.scripts_eval + m.functions_bytes;
    let mut dbs = Vec::new();
    let mut keys = 0u64;
    for db in 0..srv.ks.databases() {
        let (mut n, mut main, mut expires) = (0u64, 0u64, 0u64);
        for s in 0..SHARDS {
            ks.visit_shard(db, s, |sh| {
                n += sh.len() as u64;
                let (a, b) = sh.overhead();
                main += a as u64;
                expires += b as u64;
            });
        }
        if n == 0 {
            continue;
        }
        keys += n;
        overhead_total += main + expires;
        dbs.push((db, main, expires));
    }
    let dataset = total.saturating_sub(overhead_total);
    let net = if total > startup { total - startup } else { 1 };
    let resident = rss.saturating_sub(m.vm_eval);
    Overhead {
        total,
        startup,
        peak,
        rss,
        lua_caches: m.scripts_eval,
        clients_normal,
        functions_caches: m.functions_bytes,
        dbs,
        overhead_total,
        keys,
        bytes_per_key: net.checked_div(keys).unwrap_or(0),
        dataset,
        dataset_perc: dataset as f64 * 100.0 / net as f64,
        peak_perc: if peak == 0 {
            0.0
        } else {
            total as f64 * 100.0 / peak as f64
        },
        allocator_allocated: total,
        allocator_active: resident,
        allocator_resident: resident,
        cached_scripts: m.cached_scripts as u64,
    }
}

/// `MEMORY STATS`: Redis 7.2's fields, in its order and with its types.
pub fn stats(cx: &mut Cx) -> Reply {
    let o = overhead(cx.srv, cx.ks);
    let int = |n: u64| Reply::Int(n as i64);
    let key = |k: &str| Reply::Bulk(Bytes::copy_from_slice(k.as_bytes()));
    let mut m = vec![
        (key("peak.allocated"), int(o.peak)),
        (key("total.allocated"), int(o.total)),
        (key("startup.allocated"), int(o.startup)),
        (key("replication.backlog"), int(0)),
        (key("clients.slaves"), int(0)),
        (key("clients.normal"), int(o.clients_normal)),
        (key("cluster.links"), int(0)),
        (key("aof.buffer"), int(0)),
        (key("lua.caches"), int(o.lua_caches)),
        (key("functions.caches"), int(o.functions_caches)),
    ];
    for &(db, main, expires) in &o.dbs {
        m.push((
            key(&format!("db.{db}")),
            Reply::Map(vec![
                (key("overhead.hashtable.main"), int(main)),
                (key("overhead.hashtable.expires"), int(expires)),
                (key("overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    let (af, afb) = o.allocator_frag();
    let (ar, arb) = o.allocator_rss();
    let (rr, rrb) = o.rss_extra();
    let (tf, tfb) = o.total_frag();
    m.extend([
        (key("overhead.total"), int(o.overhead_total)),
        (key("keys.count"), int(o.keys)),
        (key("keys.bytes-per-key"), int(o.bytes_per_key)),
        (key("dataset.bytes"), int(o.dataset)),
        (
            key("dataset.percentage"),
            Reply::Double(f64::from(o.dataset_perc as f32)),
        ),
        (
            key("peak.percentage"),
            Reply::Double(f64::from(o.peak_perc as f32)),
        ),
        (key("allocator.allocated"), int(o.allocator_allocated)),
        (key("allocator.active"), int(o.allocator_active)),
        (key("allocator.resident"), int(o.allocator_resident)),
        (
            key("allocator-fragmentation.ratio"),
            Reply::Double(f64::from(af as f32)),
        ),
        (key("allocator-fragmentation.bytes"), Reply::Int(afb)),
        (
            key("allocator-rss.ratio"),
            Reply::Double(f64::from(ar as f32)),
        ),
        (key("allocator-rss.bytes"), Reply::Int(arb)),
        (
            key("rss-overhead.ratio"),
            Reply::Double(f64::from(rr as f32)),
        ),
        (key("rss-overhead.bytes"), Reply::Int(rrb)),
        (key("fragmentation"), Reply::Double(f64::from(tf as f32))),
        (key("fragmentation.bytes"), Reply::Int(tfb)),
    ]);
    Reply::Map(m)
}

/// `MEMORY DOCTOR`: Redis's report (`getMemoryDoctorReport`) for the conditions this
/// server can see. Replica buffers cannot arise here, and client buffers are not yet
/// counted, so those two findings never appear.
pub fn doctor(cx: &mut Cx) -> Reply {
    let o = overhead(cx.srv, cx.ks);
    Reply::Verbatim(Bytes::from(doctor_report(&o)))
}

const MIB: i64 = 1 << 20;

fn doctor_report(o: &Overhead) -> String {
    if o.total < 5 * MIB as u64 {
        return "Hi Sam, this instance is empty or is using very little memory, my issues \
                detector can't be used in these conditions. Please, leave for your mission on \
                Earth and fill it with some data. The new Sam and I will be back to our \
                programming as soon as I finished rebooting.\n"
            .to_string();
    }
    let big_peak = o.peak as f32 / o.total as f32 > 1.5;
    let (tf, tfb) = o.total_frag();
    let (af, afb) = o.allocator_frag();
    let (ar, arb) = o.allocator_rss();
    let (rr, rrb) = o.rss_extra();
    let high = |r: f64, b: i64, over: f64| r as f32 > over as f32 && b > 10 * MIB;
    let findings = [
        (big_peak, DOCTOR_PEAK.to_string()),
        (high(tf, tfb, 1.4), DOCTOR_FRAG.replace("%s", "mimalloc")),
        (high(af, afb, 1.1), DOCTOR_ALLOC_FRAG.to_string()),
        (high(ar, arb, 1.1), DOCTOR_ALLOC_RSS.to_string()),
        (high(rr, rrb, 1.1), DOCTOR_PROC_RSS.to_string()),
        (o.cached_scripts > 1000, DOCTOR_SCRIPTS.to_string()),
    ];
    if !findings.iter().any(|(on, _)| *on) {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account \
                for what occurs on this base.\n"
            .to_string();
    }
    let mut s =
        "Sam, I detected a few issues in this Redis instance memory implants:\n\n".to_string();
    for (on, text) in findings {
        if on {
            s.push_str(" * ");
            s.push_str(&text);
            s.push_str("\n\n");
        }
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}

// The findings' texts, as Redis 7.2 prints them (object.c, `getMemoryDoctorReport`).
const DOCTOR_PEAK: &str =
    "Peak memory: In the past this instance used more than 150% the memory that is \
    currently using. The allocator is normally not able to release memory after a peak, so \
    you can expect to see a big fragmentation ratio, however this is actually harmless and \
    is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is \
    currently bigger than expected, the memory will be used as soon as you fill the Redis \
    instance with more data. If the memory peak was only occasional and you want to try to \
    reclaim memory, please try the MEMORY PURGE command, otherwise the only other option \
    is to shutdown and restart the instance.";

const DOCTOR_FRAG: &str =
    "High total RSS: This instance has a memory fragmentation and RSS overhead greater than \
    1.4 (this means that the Resident Set Size of the Redis process is much larger than \
    the sum of the logical allocations Redis performed). This problem is usually due \
    either to a large peak memory (check if there is a peak memory entry above in the \
    report) or may result from a workload that causes the allocator to fragment memory a \
    lot. If the problem is a large peak memory, then there is no issue. Otherwise, make \
    sure you are using the Jemalloc allocator and not the default libc malloc. Note: The \
    currently used allocator is \"%s\".";

const DOCTOR_ALLOC_FRAG: &str =
    "High allocator fragmentation: This instance has an allocator external fragmentation \
    greater than 1.1. This problem is usually due either to a large peak memory (check if \
    there is a peak memory entry above in the report) or may result from a workload that \
    causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' \
    config option.";

const DOCTOR_ALLOC_RSS: &str =
    "High allocator RSS overhead: This instance has an RSS memory overhead is greater than \
    1.1 (this means that the Resident Set Size of the allocator is much larger than the \
    sum what the allocator actually holds). This problem is usually due to a large peak \
    memory (check if there is a peak memory entry above in the report), you can try the \
    MEMORY PURGE command to reclaim it.";

const DOCTOR_PROC_RSS: &str =
    "High process RSS overhead: This instance has non-allocator RSS memory overhead is \
    greater than 1.1 (this means that the Resident Set Size of the Redis process is much \
    larger than the RSS the allocator holds). This problem may be due to Lua scripts or \
    Modules.";

const DOCTOR_SCRIPTS: &str =
    "Many scripts: There seem to be many cached scripts in this instance (more than 1000). \
    This may be because scripts are generated and `EVAL`ed, instead of being parameterized \
    (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called \
    periodically, the scripts' caches may end up consuming most of your memory.";
#[cfg(test)]
mod usage_tests {
    use super::*;
    use crate::instance::session::Session;
    use crate::TestServer;

    fn run(srv: &TestServer, sess: &mut Session, line: &[&str]) -> Reply {
        let args = line
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect();
        crate::cmd::dispatch(&srv.shared(), sess, args)
    }

    fn usage_of(srv: &TestServer, sess: &mut Session, line: &[&str]) -> i64 {
        match run(srv, sess, line) {
            Reply::Int(n) => n,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn allocator_classes_round_up() {
        assert_eq!(alloc_size(0), 0);
        assert_eq!(alloc_size(1), 8);
        assert_eq!(alloc_size(64), 64);
        assert_eq!(alloc_size(65), 80);
        assert_eq!(alloc_size(1000), 1024);
        let mut last = 0;
        for n in 0..5000 {
            let a = alloc_size(n);
            assert!(a >= n && a >= last, "{n}: {a}");
            last = a;
        }
    }

    #[test]
    fn bigger_values_estimate_bigger() {
        let srv = TestServer::start().expect("server");
        let addr = "127.0.0.1:1".parse().expect("addr");
        let mut sess = Session::new(srv.shared().clients.register(addr, addr, 0), true);
        run(&srv, &mut sess, &["SET", "int", "12345"]);
        let long = "x".repeat(1000);
        run(&srv, &mut sess, &["SET", "long", &long]);
        let int = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "int"]);
        let big = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "long"]);
        assert!(int > 0 && big >= int + 1000, "{int} {big}");
        let mut sizes = Vec::new();
        for (kind, n) in [("small", 10), ("large", 2000)] {
            let key = format!("s-{kind}");
            let mut line = vec!["SADD".to_string(), key.clone()];
            line.extend((0..n).map(|i| format!("member:{i}")));
            let line: Vec<&str> = line.iter().map(String::as_str).collect();
            run(&srv, &mut sess, &line);
            sizes.push(usage_of(&srv, &mut sess, &["MEMORY", "USAGE", &key]));
        }
        assert!(sizes[1] > sizes[0] * 50, "{sizes:?}");
        let mut line = vec!["ZADD".to_string(), "z".to_string()];
        for i in 0..500 {
            line.push(i.to_string());
            line.push(format!("m{i}"));
        }
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        run(&srv, &mut sess, &line);
        assert!(usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "z"]) > 500 * 8);
    }

    /// The first elements stand for all of them unless SAMPLES 0 asks for every one (a
    /// list: its first elements are known, where a hashtable's follow its hash order).
    #[test]
    fn samples_extrapolate_from_the_first_elements() {
        let srv = TestServer::start().expect("server");
        let addr = "127.0.0.1:1".parse().expect("addr");
        let mut sess = Session::new(srv.shared().clients.register(addr, addr, 0), true);
        let huge = "v".repeat(10_000);
        run(&srv, &mut sess, &["RPUSH", "h", &huge]);
        for i in 0..999 {
            run(&srv, &mut sess, &["RPUSH", "h", &format!("f{i}")]);
        }
        let one = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "h", "SAMPLES", "1"]);
        let all = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "h", "SAMPLES", "0"]);
        let default = usage_of(&srv, &mut sess, &["MEMORY", "USAGE", "h"]);
        assert!(one > 1000 * 10_000, "{one}");
        assert!(all > 10_000 && all < 200_000, "{all}");
        assert!(default < one && default > all, "{default}");
        // SAMPLES past the size is every element.
        let many = usage_of(
            &srv,
            &mut sess,
            &["MEMORY", "USAGE", "h", "SAMPLES", "5000"],
        );
        assert_eq!(many, all);
    }

    #[test]
    fn options_are_checked_like_redis() {
        let srv = TestServer::start().expect("server");
        let addr = "127.0.0.1:1".parse().expect("addr");
        let mut sess = Session::new(srv.shared().clients.register(addr, addr, 0), true);
        assert_eq!(
            run(&srv, &mut sess, &["MEMORY", "USAGE", "nokey"]),
            Reply::Nil
        );
        let err = |r: Reply| match r {
            Reply::Error(e) => e.to_string(),
            other => panic!("expected an error: {other:?}"),
        };
        assert!(err(run(
            &srv,
            &mut sess,
            &["MEMORY", "USAGE", "k", "SAMPLES", "-1"]
        ))
        .starts_with("ERR syntax error"));
        assert!(err(run(
            &srv,
            &mut sess,
            &["MEMORY", "USAGE", "k", "SAMPLES", "x"]
        ))
        .starts_with("ERR value is not an integer"));
        assert!(
            err(run(&srv, &mut sess, &["MEMORY", "USAGE", "k", "SAMPLES"]))
                .starts_with("ERR syntax error")
        );
    }
}
