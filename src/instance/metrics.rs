//! INFO stats that a periodic task measures rather than a command counts: Redis's
//! instantaneous rates (`trackInstantaneousMetric`: every 100 ms the rate since the last
//! sample goes into a ring of 16, and INFO shows their mean) and the active expire
//! cycle's time.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Samples per metric (Redis's `STATS_METRIC_SAMPLES`).
const SAMPLES: usize = 16;

/// The rates INFO stats shows.
#[derive(Debug, Clone, Copy)]
pub enum Metric {
    /// `instantaneous_ops_per_sec`: commands per second.
    Commands = 0,
    /// `instantaneous_input_kbps`: bytes read per second.
    NetInput = 1,
    /// `instantaneous_output_kbps`: bytes written per second.
    NetOutput = 2,
}
const METRICS: usize = 3;

#[derive(Default, Clone, Copy)]
struct Track {
    samples: [u64; SAMPLES],
    idx: usize,
    /// Milliseconds of the last sample (0 = none yet) and the counter then.
    last_ms: u64,
    last_value: u64,
}

#[derive(Default)]
pub struct Instantaneous {
    tracks: Mutex<[Track; METRICS]>,
}

impl Instantaneous {
    /// One sample of every metric: `values` are the counters now (indexed by [`Metric`]),
    /// `now_ms` a monotonic time above 0.
    pub fn sample(&self, now_ms: u64, values: [u64; METRICS]) {
        let mut tracks = self.tracks.lock();
        for (t, v) in tracks.iter_mut().zip(values) {
            if t.last_ms > 0 {
                let base = now_ms.saturating_sub(t.last_ms);
                // A counter reset by CONFIG RESETSTAT between samples reads as 0, not a wrap.
                let value = v.saturating_sub(t.last_value);
                t.samples[t.idx] = (value * 1000).checked_div(base).unwrap_or(0);
                t.idx = (t.idx + 1) % SAMPLES;
            }
            t.last_ms = now_ms;
            t.last_value = v;
        }
    }

    /// The mean of a metric's samples, per second (Redis's `getInstantaneousMetric`).
    pub fn get(&self, m: Metric) -> u64 {
        self.tracks.lock()[m as usize].samples.iter().sum::<u64>() / SAMPLES as u64
    }

    /// CONFIG RESETSTAT (Redis's `resetServerStats` clears the samples too).
    pub fn reset(&self) {
        *self.tracks.lock() = Default::default();
    }
}

/// The active expire cycle's running time (INFO `expire_cycle_cpu_milliseconds`, which
/// Redis measures as the cycle's elapsed time).
#[derive(Default)]
pub struct ExpireCycle {
    pub us: AtomicU64,
}

impl ExpireCycle {
    pub fn add(&self, us: u64) {
        self.us.fetch_add(us, Ordering::Relaxed);
    }

    pub fn ms(&self) -> u64 {
        self.us.load(Ordering::Relaxed) / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_the_mean_of_sixteen_samples() {
        let m = Instantaneous::default();
        // The first sample only sets the base.
        m.sample(100, [0, 0, 0]);
        assert_eq!(m.get(Metric::Commands), 0);
        // 160 commands in 100 ms: 1600/s in one sample of sixteen.
        m.sample(200, [160, 1024, 0]);
        assert_eq!(m.get(Metric::Commands), 100);
        assert_eq!(m.get(Metric::NetInput), 640);
        for i in 0..15 {
            m.sample(300 + i * 100, [160 * (i + 2), 1024, 0]);
        }
        assert_eq!(m.get(Metric::Commands), 1600);
        // A counter that went back (RESETSTAT) gives a zero sample, not a huge one.
        m.sample(1800, [0, 0, 0]);
        assert_eq!(m.get(Metric::Commands), 1500);
        m.reset();
        assert_eq!(m.get(Metric::Commands), 0);
    }
}
