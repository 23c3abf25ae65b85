//! Counters shared between the source thread, the worker and whoever watches (progress bar,
//! viewer): frames in, out, dropped. Per-frame hiccups are counters, not errors. They add up:
//! every frame taken from the source is analysed and delivered (out), dropped (a live source
//! outpacing the analyses), or still in flight when a run ends on an error.

use std::sync::atomic::{AtomicU64, Ordering};

/// Lock-free frame counters.
#[derive(Debug, Default)]
pub struct Counters {
    /// Frames the source delivered.
    pub frames_in: AtomicU64,
    /// Frames fully analysed and handed on.
    pub frames_out: AtomicU64,
    /// Frames dropped because the worker was full (live sources only).
    pub dropped: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CounterSnapshot {
    /// Frames the source delivered.
    pub frames_in: u64,
    /// Frames analysed.
    pub frames_out: u64,
    /// Frames dropped.
    pub dropped: u64,
}

impl CounterSnapshot {
    /// Frames taken from the source but neither delivered nor dropped: zero at a clean end, the
    /// frames lost in the queue and the ring when a run ends on an error.
    #[must_use]
    pub fn in_flight(&self) -> u64 {
        self.frames_in
            .saturating_sub(self.frames_out + self.dropped)
    }
}

impl Counters {
    /// Reads all counters.
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            frames_in: self.frames_in.load(Ordering::Relaxed),
            frames_out: self.frames_out.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// Median, 95th percentile and max of a set of milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Samples.
    pub count: usize,
    /// Median.
    pub median_ms: f64,
    /// 95th percentile (nearest rank).
    pub p95_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

impl Summary {
    /// Summarises samples (empty gives zeros).
    #[must_use]
    pub fn of(samples: &[f64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let rank = ((0.95 * n as f64).ceil() as usize).clamp(1, n) - 1;
        Self {
            count: n,
            median_ms: median,
            p95_ms: v[rank],
            max_ms: v[n - 1],
            mean_ms: v.iter().sum::<f64>() / n as f64,
        }
    }
}

/// Samples of one measured quantity in bounded memory, so a run of any length keeps a constant
/// footprint: count, mean and max are exact; the median and p95 come from a uniform random
/// reservoir of at most [`Series::RESERVOIR`] samples (exact while there are fewer).
#[derive(Clone, Debug, Default)]
pub(crate) struct Series {
    count: u64,
    sum: f64,
    max: f64,
    reservoir: Vec<f64>,
    rng: u64,
}

impl Series {
    /// Samples kept for the percentiles (64 KiB a series; the median of 8192 uniform samples is
    /// within about 1 % of ranks of the true one).
    pub(crate) const RESERVOIR: usize = 8192;

    /// Adds a sample.
    pub fn push(&mut self, v: f64) {
        self.count += 1;
        self.sum += v;
        self.max = if self.count == 1 { v } else { self.max.max(v) };
        if self.reservoir.len() < Self::RESERVOIR {
            self.reservoir.push(v);
        } else {
            // Algorithm R: the new sample replaces a kept one with probability RESERVOIR/count.
            let j = self.next_random() % self.count;
            if let Some(slot) = usize::try_from(j)
                .ok()
                .and_then(|j| self.reservoir.get_mut(j))
            {
                *slot = v;
            }
        }
    }

    /// The summary: exact count, mean and max; median and p95 of the reservoir.
    #[must_use]
    pub fn summary(&self) -> Summary {
        if self.count == 0 {
            return Summary::default();
        }
        let mut s = Summary::of(&self.reservoir);
        s.count = usize::try_from(self.count).unwrap_or(usize::MAX);
        s.max_ms = self.max;
        s.mean_ms = self.sum / self.count as f64;
        s
    }

    /// splitmix64: deterministic, so the same run gives the same summary.
    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_in_flight_are_what_the_other_counters_leave() {
        let c = CounterSnapshot {
            frames_in: 66,
            frames_out: 60,
            dropped: 2,
        };
        assert_eq!(c.in_flight(), 4);
        assert_eq!(
            CounterSnapshot {
                frames_in: 5,
                frames_out: 5,
                dropped: 0
            }
            .in_flight(),
            0
        );
    }

    #[test]
    fn a_series_is_exact_while_small_and_bounded_when_long() {
        let mut small = Series::default();
        for v in [5.0, 1.0, 3.0, 2.0, 4.0] {
            small.push(v);
        }
        assert_eq!(small.summary(), Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]));
        // 200 000 samples 0..200 000 in a scrambled order: exact count, mean, max; median and
        // p95 near the true ones; memory capped.
        let n = 200_000u64;
        let mut long = Series::default();
        for i in 0..n {
            long.push(((i * 7919) % n) as f64);
        }
        let s = long.summary();
        assert_eq!(
            (s.count, s.max_ms, s.mean_ms),
            (n as usize, (n - 1) as f64, (n - 1) as f64 / 2.0)
        );
        assert!(
            (s.median_ms - n as f64 / 2.0).abs() < n as f64 * 0.02,
            "median {}",
            s.median_ms
        );
        assert!(
            (s.p95_ms - n as f64 * 0.95).abs() < n as f64 * 0.02,
            "p95 {}",
            s.p95_ms
        );
        assert_eq!(long.reservoir.len(), Series::RESERVOIR);
        assert_eq!(Series::default().summary(), Summary::default());
    }

    #[test]
    fn summary_statistics() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(
            (s.count, s.median_ms, s.max_ms, s.mean_ms),
            (5, 3.0, 5.0, 3.0)
        );
        assert_eq!(s.p95_ms, 5.0);
        assert_eq!(Summary::of(&[1.0, 2.0]).median_ms, 1.5);
        assert_eq!(Summary::of(&[]).count, 0);
    }
}
