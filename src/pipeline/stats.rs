//! Counters shared between the source thread, the worker and whoever watches (progress bar,
//! viewer): frames in, out, dropped. Per-frame hiccups are counters, not errors.

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
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        let rank = ((0.95 * n as f64).ceil() as usize).clamp(1, n) - 1;
        Self { count: n, median_ms: median, p95_ms: v[rank], max_ms: v[n - 1], mean_ms: v.iter().sum::<f64>() / n as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_statistics() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((s.count, s.median_ms, s.max_ms, s.mean_ms), (5, 3.0, 5.0, 3.0));
        assert_eq!(s.p95_ms, 5.0);
        assert_eq!(Summary::of(&[1.0, 2.0]).median_ms, 1.5);
        assert_eq!(Summary::of(&[]).count, 0);
    }
}
