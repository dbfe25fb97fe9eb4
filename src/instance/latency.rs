//! Latency observations (Redis `latency.c` and the per-command histograms of `server.c`).
//!
//! - [`Monitor`]: the latency monitor's events (`command`, `fast-command`), each a ring of
//!   [`TS_LEN`] per-second samples (the worst latency of that second, in ms) and its
//!   all-time maximum, fed only by calls at or above `latency-monitor-threshold`.
//! - [`Histograms`]: one histogram per command id, laid out exactly as Redis's
//!   `hdr_histogram` (lowest 1 ns, highest 1 s, 2 significant figures), so LATENCY
//!   HISTOGRAM's buckets and INFO latencystats' percentiles are computed the way Redis
//!   computes them. A histogram is allocated on its command's first recorded call; counts
//!   are relaxed atomics added once per run of equal samples (see `cmd::execute`).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Samples kept per event (Redis `LATENCY_TS_LEN`).
pub const TS_LEN: usize = 160;

#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix seconds; 0 for a slot never written.
    pub time: i64,
    /// Milliseconds.
    pub latency: u64,
}

#[derive(Clone, Debug)]
pub struct Series {
    pub samples: [Sample; TS_LEN],
    /// Next slot to write.
    pub idx: usize,
    /// All-time maximum (ms).
    pub max: u64,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            samples: [Sample::default(); TS_LEN],
            idx: 0,
            max: 0,
        }
    }
}

impl Series {
    /// Redis `latencyAddSample`: one sample per second, the worst of that second.
    pub fn add(&mut self, now: i64, latency: u64) {
        self.max = self.max.max(latency);
        let prev = (self.idx + TS_LEN - 1) % TS_LEN;
        if self.samples[prev].time == now {
            let s = &mut self.samples[prev];
            s.latency = s.latency.max(latency);
            return;
        }
        self.samples[self.idx] = Sample { time: now, latency };
        self.idx = (self.idx + 1) % TS_LEN;
    }

    /// The written samples, oldest first.
    pub fn in_order(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..TS_LEN)
            .map(move |j| self.samples[(self.idx + j) % TS_LEN])
            .filter(|s| s.time != 0)
    }

    /// The most recent sample (Redis reads the slot before `idx`).
    pub fn last(&self) -> Sample {
        self.samples[(self.idx + TS_LEN - 1) % TS_LEN]
    }
}

/// The latency monitor's events, in the order they first occurred. Bounded: only the
/// server's own event names are ever added.
#[derive(Default)]
pub struct Monitor {
    events: Mutex<Vec<(&'static str, Series)>>,
}

impl Monitor {
    pub fn add(&self, event: &'static str, now: i64, latency_ms: u64) {
        let mut g = self.events.lock();
        match g.iter_mut().find(|(e, _)| *e == event) {
            Some((_, s)) => s.add(now, latency_ms),
            None => {
                let mut s = Series::default();
                s.add(now, latency_ms);
                g.push((event, s));
            }
        }
    }

    /// Every event and its series.
    pub fn snapshot(&self) -> Vec<(&'static str, Series)> {
        self.events.lock().clone()
    }

    /// The series of `event` (case-sensitive, as Redis's dict lookup).
    pub fn get(&self, event: &[u8]) -> Option<(&'static str, Series)> {
        self.events
            .lock()
            .iter()
            .find(|(e, _)| e.as_bytes() == event)
            .cloned()
    }

    /// Drops `event` (case-insensitive, as `latencyResetEvent`), or every event for None;
    /// how many were dropped.
    pub fn reset(&self, event: Option<&[u8]>) -> usize {
        let mut g = self.events.lock();
        let before = g.len();
        g.retain(|(e, _)| event.is_some_and(|x| !e.as_bytes().eq_ignore_ascii_case(x)));
        before - g.len()
    }
}

// The layout of Redis's command histograms: `hdr_init(1, 1_000_000_000, 2)`.
/// Lowest and highest trackable values, in ns (`LATENCY_HISTOGRAM_MIN/MAX_VALUE`).
pub const MIN_NS: u64 = 1;
pub const MAX_NS: u64 = 1_000_000_000;
/// `sub_bucket_half_count_magnitude` for 2 significant figures (2·10² → 2⁸ sub-buckets).
const HALF_MAG: u32 = 7;
const HALF: i64 = 1 << HALF_MAG;
const SUB_COUNT: i64 = 2 * HALF;
const SUB_MASK: u64 = (SUB_COUNT as u64) - 1;
/// Buckets needed to cover `MAX_NS` (`buckets_needed_to_cover_value`).
const BUCKETS: usize = {
    let mut smallest_untrackable = SUB_COUNT as u64;
    let mut n = 1;
    while smallest_untrackable <= MAX_NS {
        smallest_untrackable <<= 1;
        n += 1;
    }
    n
};
/// Counters per histogram (`counts_len`).
pub const COUNTS_LEN: usize = (BUCKETS + 1) * HALF as usize;

const fn bucket_index(v: u64) -> i64 {
    let pow2ceiling = 64 - (v | SUB_MASK).leading_zeros() as i64;
    pow2ceiling - (HALF_MAG as i64 + 1)
}

/// The counter of value `v` (ns), for values within the histogram's range.
pub const fn counts_index(v: u64) -> usize {
    let b = bucket_index(v);
    let sub = (v >> b) as i64;
    (((b + 1) << HALF_MAG) + (sub - HALF)) as usize
}

/// The lowest value counted at `index` (`hdr_value_at_index`).
pub fn value_at_index(index: usize) -> u64 {
    let mut b = (index as i64 >> HALF_MAG) - 1;
    let mut sub = (index as i64 & (HALF - 1)) + HALF;
    if b < 0 {
        sub -= HALF;
        b = 0;
    }
    (sub as u64) << b
}

fn lowest_equivalent(v: u64) -> u64 {
    let b = bucket_index(v);
    (v >> b) << b
}

fn equivalent_range(v: u64) -> u64 {
    let b = bucket_index(v);
    let sub = (v >> b) as i64;
    let adj = if sub >= SUB_COUNT { b + 1 } else { b };
    1u64 << adj
}

fn highest_equivalent(v: u64) -> u64 {
    lowest_equivalent(v) + equivalent_range(v) - 1
}

/// The counter a call of `usec` microseconds is recorded at: Redis records
/// `duration_us * 1000` ns clamped to the trackable range (a 0 µs call counts as 1 ns).
#[inline]
pub fn index_for_usec(usec: u64) -> u16 {
    // Most calls take a few µs: their counters are looked up.
    const SMALL: [u16; 32] = {
        let mut t = [0u16; 32];
        let mut us = 0;
        while us < 32 {
            let ns = if us == 0 { MIN_NS } else { us as u64 * 1000 };
            t[us] = counts_index(ns) as u16;
            us += 1;
        }
        t
    };
    if let Some(&i) = SMALL.get(usec as usize) {
        return i;
    }
    let ns = usec.saturating_mul(1000).clamp(MIN_NS, MAX_NS);
    counts_index(ns) as u16
}

/// The call duration (µs) from which `cmd::observe` has something to record beyond the
/// histogram: the lower of `slowlog-log-slower-than` (when not negative) and
/// `latency-monitor-threshold` (when set), cached so that a call costs one load to check.
/// Refreshed by CONFIG SET and at start-up.
#[derive(Default)]
pub struct Floor(AtomicU64);

impl Floor {
    pub fn refresh(&self, config: &crate::config::ConfigStore) {
        let slower = config.get_i64("slowlog-log-slower-than");
        let monitor = config.get_i64("latency-monitor-threshold");
        let slow = u64::try_from(slower).unwrap_or(u64::MAX);
        let mon = match monitor {
            m if m > 0 => (m as u64).saturating_mul(1000),
            _ => u64::MAX,
        };
        self.0.store(slow.min(mon), Ordering::Relaxed);
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// `hdr_value_at_percentile` over a snapshot of counts.
pub fn value_at_percentile(counts: &[u64], percentile: f64) -> u64 {
    let total: u64 = counts.iter().sum();
    let p = percentile.min(100.0);
    let want = (((p / 100.0) * total as f64) + 0.5) as i64;
    let want = want.max(1) as u64;
    let mut seen = 0;
    let mut value = 0;
    for (i, &c) in counts.iter().enumerate() {
        seen += c;
        if seen >= want {
            value = value_at_index(i);
            break;
        }
    }
    if percentile == 0.0 {
        lowest_equivalent(value)
    } else {
        highest_equivalent(value)
    }
}

/// LATENCY HISTOGRAM's buckets (Redis `fillCommandCDF`): hdr's logarithmic iteration from
/// 1024 ns, base 2, as (µs, cumulative count) for each step that added calls.
pub fn cdf(counts: &[u64]) -> Vec<(u64, u64)> {
    let total: u64 = counts.iter().sum();
    let mut out = Vec::new();
    // The iterator's state (`hdr_iter` with `hdr_iter_log`).
    let mut index: i64 = -1;
    let mut cumulative = 0u64;
    let mut value = 0u64;
    let mut highest = 0u64;
    let mut level = 1024u64;
    let mut level_lowest = lowest_equivalent(level);
    let mut previous = 0u64;
    let len = counts.len() as i64;
    loop {
        let more = cumulative < total
            || (index < len && value_at_index((index + 1) as usize) > level_lowest);
        if !more {
            break;
        }
        // One `log_iter_next` step.
        loop {
            if value >= level_lowest {
                level = level.saturating_mul(2);
                level_lowest = lowest_equivalent(level);
                break;
            }
            index += 1;
            if index >= len {
                break;
            }
            let c = counts[index as usize];
            cumulative += c;
            value = value_at_index(index as usize);
            highest = lowest_equivalent(value) + equivalent_range(value) - 1;
        }
        if cumulative > previous {
            out.push((highest / 1000, cumulative));
        }
        previous = cumulative;
        if index >= len {
            break;
        }
    }
    out
}

/// Per-command histograms, indexed by command id, each allocated on first use.
pub struct Histograms {
    by_id: Vec<OnceLock<Box<[AtomicU64]>>>,
}

impl Histograms {
    pub fn new(commands: usize) -> Histograms {
        Histograms {
            by_id: (0..commands).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Adds `n` calls at counter `index` of command `id`.
    pub fn add(&self, id: usize, index: u16, n: u64) {
        let Some(slot) = self.by_id.get(id) else {
            return;
        };
        let counts = slot.get_or_init(|| (0..COUNTS_LEN).map(|_| AtomicU64::new(0)).collect());
        if let Some(c) = counts.get(index as usize) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The counts of command `id`, None when it has no histogram (never recorded, or
    /// reset with no call since).
    pub fn counts(&self, id: usize) -> Option<Vec<u64>> {
        let counts: Vec<u64> = self
            .by_id
            .get(id)?
            .get()?
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        counts.iter().any(|&c| c > 0).then_some(counts)
    }

    /// CONFIG RESETSTAT: every histogram emptied (Redis frees them; an empty one is
    /// reported as absent).
    pub fn reset(&self) {
        for slot in &self.by_id {
            if let Some(counts) = slot.get() {
                counts.iter().for_each(|c| c.store(0, Ordering::Relaxed));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts_of(usecs: &[u64]) -> Vec<u64> {
        let mut c = vec![0; COUNTS_LEN];
        for &u in usecs {
            c[index_for_usec(u) as usize] += 1;
        }
        c
    }

    #[test]
    fn layout_matches_redis_hdr_histogram() {
        // hdr_init(1, 1e9, 2): 23 buckets of 128 half-buckets.
        assert_eq!(BUCKETS, 23);
        assert_eq!(COUNTS_LEN, 3072);
        assert_eq!(counts_index(1), 1);
        assert_eq!(counts_index(255), 255);
        assert_eq!(counts_index(256), 256);
        assert_eq!(counts_index(1024), 512);
        assert_eq!(value_at_index(512), 1024);
        assert_eq!(highest_equivalent(1024), 1031);
        assert!(counts_index(MAX_NS) < COUNTS_LEN);
        for i in [0, 1, 200, 300, 1000, 2000, 3071] {
            assert_eq!(counts_index(value_at_index(i)), i);
        }
    }

    #[test]
    fn cdf_buckets_are_redis_power_of_two_steps() {
        // 0 µs counts as 1 ns; each step reports its bucket's highest value in µs.
        let c = counts_of(&[0, 1, 2, 20, 1000]);
        assert_eq!(cdf(&c), [(1, 2), (2, 3), (33, 4), (1056, 5)]);
        // Every key Redis can print, from 1 µs to past 1 s (recorded as 1 s, the last
        // counter's highest value).
        let all: Vec<u64> = (0..21).map(|k| 1u64 << k).collect();
        let keys: Vec<u64> = cdf(&counts_of(&all)).iter().map(|k| k.0).collect();
        assert_eq!(
            keys,
            [
                1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454, 16908, 33816, 67633,
                135266, 270532, 541065, 1073741
            ]
        );
        assert!(cdf(&vec![0; COUNTS_LEN]).is_empty());
    }

    #[test]
    fn percentiles_match_hdr_value_at_percentile() {
        let c = counts_of(&[10; 100]);
        // 10 µs = 10000 ns, in a bucket 64 ns wide: 10047 ns.
        assert_eq!(value_at_percentile(&c, 50.0), 10047);
        assert_eq!(value_at_percentile(&c, 0.0), 9984);
        let mut v = vec![1u64; 99];
        v.push(1000);
        let c = counts_of(&v);
        assert_eq!(value_at_percentile(&c, 50.0), 1003);
        assert_eq!(value_at_percentile(&c, 99.0), 1003);
        assert_eq!(value_at_percentile(&c, 99.9), 1_003_519);
        assert_eq!(value_at_percentile(&c, 100.0), 1_003_519);
    }

    #[test]
    fn series_keeps_the_worst_sample_per_second_and_wraps() {
        let mut s = Series::default();
        s.add(100, 5);
        s.add(100, 3);
        s.add(100, 9);
        assert_eq!(
            s.in_order().collect::<Vec<_>>(),
            [Sample {
                time: 100,
                latency: 9
            }]
        );
        for t in 0..TS_LEN as i64 + 5 {
            s.add(200 + t, 1);
        }
        assert_eq!(s.in_order().count(), TS_LEN);
        assert_eq!(s.in_order().next().map(|x| x.time), Some(205));
        assert_eq!(s.last().time, 200 + TS_LEN as i64 + 4);
        assert_eq!(s.max, 9);
        let m = Monitor::default();
        m.add("command", 1, 2);
        m.add("fast-command", 1, 2);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert!(m.get(b"command").is_none());
        assert_eq!(m.reset(None), 1);
    }

    #[test]
    fn small_durations_use_the_same_counters() {
        for us in 0..100 {
            let ns = (us * 1000).clamp(MIN_NS, MAX_NS);
            assert_eq!(index_for_usec(us) as usize, counts_index(ns), "{us}");
        }
        assert_eq!(index_for_usec(u64::MAX) as usize, counts_index(MAX_NS));
    }

    #[test]
    fn the_floor_is_the_lower_threshold() {
        let c = crate::config::ConfigStore::default();
        let f = Floor::default();
        f.refresh(&c);
        assert_eq!(f.get(), 10_000);
        c.set("latency-monitor-threshold", "5").unwrap();
        f.refresh(&c);
        assert_eq!(f.get(), 5_000);
        c.set("slowlog-log-slower-than", "-1").unwrap();
        c.set("latency-monitor-threshold", "0").unwrap();
        f.refresh(&c);
        assert_eq!(f.get(), u64::MAX);
        c.set("slowlog-log-slower-than", "0").unwrap();
        f.refresh(&c);
        assert_eq!(f.get(), 0);
    }

    #[test]
    fn histograms_allocate_lazily_and_reset() {
        let h = Histograms::new(4);
        assert!(h.counts(2).is_none());
        h.add(2, index_for_usec(3), 2);
        h.add(9, 0, 1);
        assert_eq!(h.counts(2).map(|c| c.iter().sum::<u64>()), Some(2));
        h.reset();
        assert!(h.counts(2).is_none());
    }
}
