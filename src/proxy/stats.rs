//! Latency histograms for INFO and `/metrics`: per node (round trips on shared
//! connections) and per command (a client's request until its reply is ready). A fixed
//! log-bucketed histogram of atomic counters: recording is two relaxed `fetch_add`s (its
//! bucket, the sum) on the hot path and never locks; the count is the buckets' sum, read
//! only by INFO and `/metrics`.
//!
//! Buckets are in microseconds: values below 16 µs get one bucket each; above that each
//! power of two is split into 8 sub-buckets (≤ 12.5 % relative error), up to ~2^36 µs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
const LINEAR: u64 = 16;
const OCTAVES: usize = 33;
const BUCKETS: usize = LINEAR as usize + OCTAVES * SUB;

#[derive(Default)]
pub struct Histogram {
    /// Allocated on the first sample: one histogram per command id exists from the start,
    /// most of them never used (2 KB each once used).
    buckets: OnceLock<Box<[AtomicU64]>>,
    /// Sum of the samples in µs (Prometheus's `_sum`).
    sum_us: AtomicU64,
}

/// The bucket of a value in µs.
fn bucket(us: u64) -> usize {
    if us < LINEAR {
        return us as usize;
    }
    let msb = 63 - us.leading_zeros(); // ≥ 4
    let octave = (msb - 4) as usize;
    let sub = ((us >> (msb - SUB_BITS)) as usize) & (SUB - 1);
    (LINEAR as usize + octave * SUB + sub).min(BUCKETS - 1)
}

/// The largest value (µs) that falls into bucket `b`.
fn upper(b: usize) -> u64 {
    if b < LINEAR as usize {
        return b as u64;
    }
    let octave = ((b - LINEAR as usize) / SUB) as u32;
    let sub = ((b - LINEAR as usize) % SUB) as u64;
    let msb = octave + 4;
    let width = 1u64 << (msb - SUB_BITS);
    (1u64 << msb) + (sub + 1) * width - 1
}

impl Histogram {
    pub fn record(&self, d: Duration) {
        // Not `as_micros`: its u128 arithmetic was a tenth of the per-command cost.
        let us = d
            .as_secs()
            .saturating_mul(1_000_000)
            .saturating_add(u64::from(d.subsec_micros()));
        let buckets = self
            .buckets
            .get_or_init(|| (0..BUCKETS).map(|_| AtomicU64::new(0)).collect());
        buckets[bucket(us)].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.buckets
            .get()
            .map_or(0, |b| b.iter().map(|c| c.load(Ordering::Relaxed)).sum())
    }

    pub fn sum_us(&self) -> u64 {
        self.sum_us.load(Ordering::Relaxed)
    }

    fn counts(&self) -> Vec<u64> {
        match self.buckets.get() {
            Some(b) => b.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
            None => vec![0; BUCKETS],
        }
    }

    /// Samples per Prometheus bucket: `(le in µs, samples in (previous le, le])` for each
    /// of `les` (ascending), exact because each `le` is a bucket's exclusive upper bound
    /// ([`exposition_bounds`]); samples above the last `le` are left out (`+Inf` covers
    /// them through the count). With the count, from the same reading of the buckets (so
    /// the buckets never add up to more than it).
    pub fn exposition(&self, les: &[u64]) -> (Vec<(u64, u64)>, u64) {
        let counts = self.counts();
        let mut out = Vec::with_capacity(les.len());
        let mut b = 0;
        for &le in les {
            let mut n = 0;
            // A sample of `us` µs lasted less than `us + 1` µs: bucket b is under `le`
            // when its largest value + 1 is.
            while b < BUCKETS && upper(b) < le {
                n += counts[b];
                b += 1;
            }
            out.push((le, n));
        }
        (out, counts.iter().sum())
    }

    /// The p50/p99/p99.9 line Redis's `INFO latencystats` prints
    /// (`p50=…,p99=…,p99.9=…`, µs with three decimals).
    pub fn percentiles_line(&self) -> String {
        let [p50, p99, p999] = self.quantiles([0.5, 0.99, 0.999]);
        format!("p50={p50}.000,p99={p99}.000,p99.9={p999}.000")
    }

    /// The given quantiles (0..=1, ascending) in µs: the upper bound of the bucket holding
    /// the rank; 0 when nothing was recorded. One pass over the buckets for all of them.
    pub fn quantiles<const N: usize>(&self, qs: [f64; N]) -> [u64; N] {
        let counts = self.counts();
        let total: u64 = counts.iter().sum();
        let mut out = [0u64; N];
        if total == 0 {
            return out;
        }
        let mut qi = 0;
        let mut seen = 0u64;
        for (b, &n) in counts.iter().enumerate() {
            seen += n;
            while qi < N {
                // Rank of the quantile, at least 1 (the smallest sample for q = 0).
                let rank = ((qs[qi] * total as f64).ceil() as u64).clamp(1, total);
                if seen >= rank {
                    out[qi] = upper(b);
                    qi += 1;
                } else {
                    break;
                }
            }
            if qi == N {
                break;
            }
        }
        out
    }
}

/// Prometheus bucket bounds (µs) near 50 µs, 100 µs, 250 µs … 10 s, each the exclusive
/// upper bound of one of the histogram's buckets (so counts under it are exact).
pub fn exposition_bounds() -> Vec<u64> {
    [
        50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
        1_000_000, 2_500_000, 5_000_000, 10_000_000,
    ]
    .iter()
    .map(|&us| upper(bucket(us)) + 1)
    .collect()
}

/// One histogram per command of the table (by its id), plus FCALL/FCALL_RO/FUNCTION, which
/// the table does not list but the proxy forwards.
pub struct CommandLatency {
    names: Vec<&'static str>,
    hists: Box<[Histogram]>,
}

/// Ids of the commands the table lacks: `table len + index` here.
pub const EXTRA_COMMANDS: [&str; 3] = ["fcall", "fcall_ro", "function"];

impl Default for CommandLatency {
    fn default() -> Self {
        let names: Vec<&'static str> = crate::cmd::registry()
            .specs
            .iter()
            .map(|s| s.name)
            .chain(EXTRA_COMMANDS)
            .collect();
        CommandLatency {
            hists: names.iter().map(|_| Histogram::default()).collect(),
            names,
        }
    }
}

impl CommandLatency {
    /// Records a command's latency; an unknown id is ignored.
    pub fn record(&self, id: usize, d: Duration) {
        if let Some(h) = self.hists.get(id) {
            h.record(d);
        }
    }

    /// Commands with samples, by name: (`get`, `client|id`, …, histogram).
    pub fn used(&self) -> Vec<(&'static str, &Histogram)> {
        let mut v: Vec<_> = self
            .names
            .iter()
            .zip(self.hists.iter())
            .filter(|(_, h)| h.count() > 0)
            .map(|(n, h)| (*n, h))
            .collect();
        v.sort_unstable_by_key(|(n, _)| *n);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_bound_their_values() {
        let mut last = 0;
        for us in (0..100_000u64).chain([1 << 30, u64::MAX / 2, u64::MAX]) {
            let b = bucket(us);
            assert!(b >= last, "{us}");
            last = b;
            if b < BUCKETS - 1 {
                assert!(upper(b) >= us, "{us} > upper({b})");
                // Relative error bound above the linear range.
                if us >= LINEAR {
                    assert!((upper(b) - us) as f64 <= us as f64 / 8.0 + 1.0, "{us}");
                }
            }
        }
        for b in 1..BUCKETS {
            assert!(upper(b) > upper(b - 1));
            assert_eq!(bucket(upper(b)), b);
        }
    }

    #[test]
    fn quantiles() {
        let h = Histogram::default();
        assert_eq!(h.quantiles([0.5, 0.99]), [0, 0]);
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        h.record(Duration::from_secs(2));
        assert_eq!(h.count(), 1001);
        let [p50, p99, p999, max] = h.quantiles([0.5, 0.99, 0.999, 1.0]);
        assert!((500..=570).contains(&p50), "{p50}");
        assert!((990..=1120).contains(&p99), "{p99}");
        assert!((1000..=1120).contains(&p999), "{p999}");
        assert!((2_000_000..=2_300_000).contains(&max), "{max}");
        assert_eq!(h.sum_us(), 500_500 + 2_000_000);
        assert_eq!(
            h.percentiles_line(),
            format!("p50={p50}.000,p99={p99}.000,p99.9={p999}.000")
        );
    }

    #[test]
    fn exposition_counts_are_exact_at_the_bounds() {
        let les = exposition_bounds();
        assert!(les.windows(2).all(|w| w[0] < w[1]), "{les:?}");
        for (&le, nice) in les.iter().zip([50u64, 100, 250, 500, 1_000]) {
            assert!(le > nice && le <= nice + nice / 8 + 1, "{le} for {nice}");
        }
        let h = Histogram::default();
        assert_eq!(h.exposition(&les).1, 0);
        // Just under and at each bound: the sample under it counts there, the one at it
        // in the next bucket.
        for &le in &les[..3] {
            h.record(Duration::from_micros(le - 1));
            h.record(Duration::from_micros(le));
        }
        h.record(Duration::from_secs(60));
        let (e, count) = h.exposition(&les);
        assert_eq!(count, 7);
        assert_eq!(e[0], (les[0], 1));
        assert_eq!(e[1], (les[1], 2));
        assert_eq!(e[2], (les[2], 2));
        assert_eq!(e[3], (les[3], 1));
        // The 60 s sample is above every bound: only the count has it.
        assert_eq!(e.iter().map(|b| b.1).sum::<u64>(), h.count() - 1);
    }

    #[test]
    fn command_latency_by_id() {
        let c = CommandLatency::default();
        let (get, _) = crate::cmd::registry().lookup(b"get").unwrap();
        c.record(get, Duration::from_micros(5));
        c.record(usize::MAX, Duration::from_micros(5));
        let fcall = crate::cmd::registry().len();
        c.record(fcall, Duration::from_micros(7));
        let used: Vec<_> = c.used().iter().map(|(n, h)| (*n, h.count())).collect();
        assert_eq!(used, [("fcall", 1), ("get", 1)]);
    }
}
