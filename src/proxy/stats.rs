//! Per-node round-trip latency: a fixed log-bucketed histogram of atomic counters, so
//! recording is one `fetch_add` on the connection task's hot path and never locks.
//!
//! Buckets are in microseconds: values below 16 µs get one bucket each; above that each
//! power of two is split into 8 sub-buckets (≤ 12.5 % relative error), up to ~2^36 µs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
const LINEAR: u64 = 16;
const OCTAVES: usize = 33;
const BUCKETS: usize = LINEAR as usize + OCTAVES * SUB;

pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
        }
    }
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
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket(us)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The given quantiles (0..=1, ascending) in µs: the upper bound of the bucket holding
    /// the rank; 0 when nothing was recorded. One pass over the buckets for all of them.
    pub fn quantiles<const N: usize>(&self, qs: [f64; N]) -> [u64; N] {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
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
    }
}
