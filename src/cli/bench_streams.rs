//! `morphoscope bench --streams N`: how many live streams a machine analyses in real time.
//!
//! N pipelines run side by side, each fed like a camera from frames held in memory (decoded
//! once: the same real frames as `bench`, each stream starting at a different one) on a fixed
//! schedule of `--fps` frames a second for `--seconds` after a warm-up of `--warmup` frames;
//! a frame the pipeline is not ready for is dropped and counted, as a live source does. Streams
//! are spread round-robin over the devices of `--device` (one context a device, shared by its
//! streams). A stream *holds* when it did what a live camera needs ([`HOLD`]): after its
//! warm-up no frame was dropped, every frame taken was delivered, no error occurred, the
//! frames came out within their period (p95 latency at most one frame period, the slowest at
//! most two), and its frames spanned the trial's nominal length (a stream that ran behind real
//! time stretches it); the trial holds when every stream does.
//!
//! `--streams-sweep` looks for the most streams that hold, up to `--streams`: it doubles from 1
//! until a trial fails, then bisects between the last that held and the first that failed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::bail;
use morphoscope::backend::Backend;
use morphoscope::config::Settings;
use morphoscope::pipeline::{Delivery, FrameSource, PictureWant, Pipeline, PipelineEvent};
use morphoscope::source::Frame;
use morphoscope::stats::{CounterSnapshot, Summary};

/// What a trial runs.
pub struct StreamsPlan<'a> {
    /// The settings of every stream.
    pub settings: &'a Settings,
    /// One backend a device; stream i runs on `backends[i % len]`.
    pub backends: &'a [Backend],
    /// The frames the streams replay.
    pub frames: Arc<Vec<Frame>>,
    /// Frames a second of each stream.
    pub fps: f64,
    /// Measured seconds (after the warm-up).
    pub seconds: f64,
    /// Frames of each stream before the measurement.
    pub warmup_frames: u64,
    /// What the consumer asks of each frame.
    pub want: PictureWant,
}

/// What a stream must achieve to hold, relative to its frame period.
#[derive(Clone, Copy, Debug)]
pub struct HoldPolicy {
    /// The p95 source-to-delivery latency of the measured frames, at most, frame periods.
    pub p95_latency_periods: f64,
    /// The slowest frame's latency, at most, frame periods.
    pub max_latency_periods: f64,
    /// How far the time from the first delivery to the last may be off the schedule's, at most:
    /// this share of it, plus `span_slack_periods`.
    pub span_slack_share: f64,
    /// See `span_slack_share`, frame periods.
    pub span_slack_periods: f64,
}

/// The policy `bench --streams` judges by: every frame out before the next comes in (p95), none
/// more than a period late, and the frames delivered at the camera's pace (5 % and two periods
/// of slack for the scheduler of a busy host).
pub const HOLD: HoldPolicy = HoldPolicy {
    p95_latency_periods: 1.0,
    max_latency_periods: 2.0,
    span_slack_share: 0.05,
    span_slack_periods: 2.0,
};

/// The longest `--seconds` of a trial: an hour (a longer one is a soak test, not a benchmark).
pub const MAX_TRIAL_SECONDS: f64 = 3600.0;

/// One stream of a trial.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StreamRow {
    /// Where it ran: "cpu" or "cuda:N".
    pub device: String,
    /// Frames the source offered, all told.
    pub frames_in: u64,
    /// Frames delivered, all told.
    pub frames_out: u64,
    /// Frames dropped during the warm-up.
    pub dropped_warmup: u64,
    /// Frames dropped after it.
    pub dropped: u64,
    /// Delivered frames a second over the measured window.
    pub fps_out: f64,
    /// Source-to-delivery latency of the measured frames, median and p95 (ms).
    pub latency_median_ms: f64,
    /// p95 of the same.
    pub latency_p95_ms: f64,
    /// The slowest of the same.
    pub latency_max_ms: f64,
    /// Seconds from the first frame delivered to the last.
    pub span_seconds: f64,
    /// The stream's error, if it failed.
    pub error: Option<String>,
    /// Why the stream did not hold ([`StreamRow::judge`]); `None`: it held.
    pub not_held: Option<String>,
}

impl StreamRow {
    /// The stream held ([`StreamRow::judge`] found nothing wrong).
    #[must_use]
    pub fn held(&self) -> bool {
        self.not_held.is_none()
    }

    /// Why a stream of `frames` frames at `fps` did not hold by `policy`, or `None`.
    #[must_use]
    pub fn judge(&self, policy: &HoldPolicy, fps: f64, frames: u64) -> Option<String> {
        let period_ms = 1e3 / fps;
        if let Some(e) = &self.error {
            return Some(format!("error: {e}"));
        }
        if self.frames_out == 0 {
            return Some("no frame delivered".to_owned());
        }
        if self.dropped > 0 {
            return Some(format!("{} frames dropped after the warm-up", self.dropped));
        }
        if self.frames_in != frames
            || self.frames_out + self.dropped + self.dropped_warmup != self.frames_in
        {
            return Some(format!("{} of {frames} frames delivered", self.frames_out));
        }
        if self.latency_p95_ms > policy.p95_latency_periods * period_ms {
            return Some(format!(
                "p95 latency {:.1} ms over {} frame period ({period_ms:.1} ms)",
                self.latency_p95_ms, policy.p95_latency_periods
            ));
        }
        if self.latency_max_ms > policy.max_latency_periods * period_ms {
            return Some(format!(
                "max latency {:.1} ms over {} frame periods ({period_ms:.1} ms each)",
                self.latency_max_ms, policy.max_latency_periods
            ));
        }
        let nominal = frames.saturating_sub(1) as f64 / fps;
        let slack = policy.span_slack_share * nominal + policy.span_slack_periods / fps;
        if (self.span_seconds - nominal).abs() > slack {
            return Some(format!(
                "frames spanned {:.2} s instead of {nominal:.2} s (behind real time)",
                self.span_seconds
            ));
        }
        None
    }
}

/// A trial of N streams.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Trial {
    /// Streams run.
    pub streams: usize,
    /// Every stream held.
    pub held: bool,
    /// Each stream.
    pub rows: Vec<StreamRow>,
}

fn device_label(b: &Backend) -> String {
    match b {
        Backend::Cpu => "cpu".to_owned(),
        Backend::Cuda(g) => format!("cuda:{}", g.info().ordinal),
    }
}

/// Runs `n` paced streams for the plan's duration and reports each.
pub fn trial(plan: &StreamsPlan<'_>, n: usize) -> anyhow::Result<Trial> {
    if plan.backends.is_empty() || plan.frames.is_empty() {
        bail!("bench --streams: no backend or no frames");
    }
    let count = plan.frame_count()?;
    let mut pipelines = Vec::with_capacity(n);
    for i in 0..n {
        let backend = &plan.backends[i % plan.backends.len()];
        let source = FrameSource::Paced {
            frames: plan.frames.clone(),
            first: i,
            fps: plan.fps,
            count,
        };
        let p = Pipeline::start(source, plan.settings, backend, Delivery::All, plan.want)?;
        pipelines.push((device_label(backend), p));
    }
    let warmup = plan.warmup_frames;
    let rows = std::thread::scope(|scope| {
        let handles: Vec<_> = pipelines
            .iter()
            .map(|(device, p)| scope.spawn(move || consume(device, p, warmup)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| StreamRow {
                    device: String::new(),
                    frames_in: 0,
                    frames_out: 0,
                    dropped_warmup: 0,
                    dropped: 0,
                    fps_out: 0.0,
                    latency_median_ms: 0.0,
                    latency_p95_ms: 0.0,
                    latency_max_ms: 0.0,
                    span_seconds: 0.0,
                    error: Some("consumer thread panicked".to_owned()),
                    not_held: None,
                })
            })
            .collect::<Vec<_>>()
    });
    for (_, p) in pipelines {
        p.join();
    }
    let rows: Vec<StreamRow> = rows
        .into_iter()
        .map(|r| StreamRow {
            not_held: r.judge(&HOLD, plan.fps, count),
            ..r
        })
        .collect();
    let held = rows.iter().all(StreamRow::held);
    Ok(Trial {
        streams: n,
        held,
        rows,
    })
}

impl StreamsPlan<'_> {
    /// Frames each stream is fed: the warm-up and the measured ones; an error when `--fps` and
    /// `--seconds` are not finite positive numbers within their bounds.
    pub fn frame_count(&self) -> anyhow::Result<u64> {
        if !(self.fps > 0.0 && self.fps <= 1000.0) {
            bail!("--fps {}: must be in (0, 1000]", self.fps);
        }
        if !(self.seconds > 0.0 && self.seconds <= MAX_TRIAL_SECONDS) {
            bail!(
                "--seconds {}: must be a number of seconds in (0, {MAX_TRIAL_SECONDS}]",
                self.seconds
            );
        }
        // At most 1000 fps for an hour: far within u64.
        Ok(self.warmup_frames + (self.fps * self.seconds).ceil() as u64)
    }
}

/// Takes every event of one stream; counts drops before and after its warm-up.
fn consume(device: &str, p: &Pipeline, warmup: u64) -> StreamRow {
    let mut latencies = Vec::new();
    let mut at_warmup: Option<(CounterSnapshot, std::time::Instant, u64)> = None;
    let mut delivered = 0u64;
    let mut first_last: Option<(std::time::Instant, std::time::Instant)> = None;
    let mut error = None;
    loop {
        match p.events.recv_timeout(Duration::from_secs(30)) {
            Ok(PipelineEvent::Frame(f)) => {
                delivered += 1;
                let now = std::time::Instant::now();
                first_last = Some((first_last.map_or(now, |(first, _)| first), now));
                if f.index >= warmup {
                    if at_warmup.is_none() {
                        at_warmup =
                            Some((p.counters.snapshot(), std::time::Instant::now(), delivered));
                    }
                    latencies.push(f.timings.latency_ms);
                }
            }
            Ok(PipelineEvent::Error(e)) => {
                error = Some(e);
                break;
            }
            Ok(PipelineEvent::End) => break,
            Err(_) => {
                error = Some("no event for 30 s".to_owned());
                break;
            }
        }
    }
    let end = p.counters.snapshot();
    let (dropped_warmup, fps_out) = match at_warmup {
        Some((c, t, d)) => {
            let secs = t.elapsed().as_secs_f64();
            (
                c.dropped,
                if secs > 0.0 {
                    (delivered - d) as f64 / secs
                } else {
                    0.0
                },
            )
        }
        None => (end.dropped, 0.0),
    };
    let lat = Summary::of(&latencies);
    StreamRow {
        latency_max_ms: lat.max_ms,
        span_seconds: first_last.map_or(0.0, |(first, last)| (last - first).as_secs_f64()),
        not_held: None,
        device: device.to_owned(),
        frames_in: end.frames_in,
        frames_out: p.counters.frames_out.load(Ordering::Relaxed),
        dropped_warmup,
        dropped: end.dropped - dropped_warmup,
        fps_out,
        latency_median_ms: lat.median_ms,
        latency_p95_ms: lat.p95_ms,
        error,
    }
}

/// Prints a trial: a row per stream, then whether it held.
pub fn print_trial(t: &Trial, fps: f64) {
    println!(
        "{:>6} | {:<8} | {:>7} | {:>7} | {:>9} | {:>7} | {:>7} | {:>11} | {:>8}",
        "stream", "device", "in", "out", "drop w-up", "dropped", "fps", "latency med", "p95 ms"
    );
    for (i, r) in t.rows.iter().enumerate() {
        println!(
            "{i:>6} | {:<8} | {:>7} | {:>7} | {:>9} | {:>7} | {:>7.1} | {:>11.1} | {:>8.1}{}",
            r.device,
            r.frames_in,
            r.frames_out,
            r.dropped_warmup,
            r.dropped,
            r.fps_out,
            r.latency_median_ms,
            r.latency_p95_ms,
            r.not_held
                .as_ref()
                .map(|why| format!("  not held: {why}"))
                .unwrap_or_default()
        );
    }
    println!("{}", verdict(t, fps));
}

/// One line: the trial held or not, and how.
#[must_use]
pub fn verdict(t: &Trial, fps: f64) -> String {
    let dropped: u64 = t.rows.iter().map(|r| r.dropped).sum();
    let failing = t.rows.iter().filter(|r| !r.held()).count();
    let worst_p95 = t.rows.iter().map(|r| r.latency_p95_ms).fold(0.0, f64::max);
    let period_ms = 1e3 / fps;
    if t.held {
        format!(
            "{} streams at {fps} fps: held (no frame dropped after the warm-up, every frame within its {period_ms:.1} ms period at real-time pace; worst p95 latency {worst_p95:.1} ms)",
            t.streams
        )
    } else {
        let first = t
            .rows
            .iter()
            .find_map(|r| r.not_held.as_deref())
            .unwrap_or("");
        format!(
            "{} streams at {fps} fps: NOT held ({failing} streams did not hold, {dropped} frames dropped after the warm-up, worst p95 latency {worst_p95:.1} ms; first reason: {first})",
            t.streams
        )
    }
}

/// Counts of streams to try, in order, given the results so far: doubling from 1 up to `max`
/// while trials hold, then bisecting between the most that held and the fewest that failed.
/// `None` when the answer is known.
#[must_use]
pub fn next_count(results: &[(usize, bool)], max: usize) -> Option<usize> {
    let best_held = results
        .iter()
        .filter(|r| r.1)
        .map(|r| r.0)
        .max()
        .unwrap_or(0);
    let first_failed = results.iter().filter(|r| !r.1).map(|r| r.0).min();
    match first_failed {
        None if best_held >= max => None,
        None if best_held == 0 => Some(1),
        None => Some((best_held * 2).min(max)),
        Some(f) if f <= best_held + 1 => None,
        Some(f) => Some(best_held + (f - best_held) / 2),
    }
}

/// Runs trials chosen by [`next_count`] and returns them all (the answer: the most that held).
pub fn sweep(plan: &StreamsPlan<'_>, max: usize) -> anyhow::Result<Vec<Trial>> {
    let mut trials: Vec<Trial> = Vec::new();
    loop {
        let done: Vec<(usize, bool)> = trials.iter().map(|t| (t.streams, t.held)).collect();
        let Some(n) = next_count(&done, max.max(1)) else {
            break;
        };
        let t = trial(plan, n)?;
        println!("sweep: {}", verdict(&t, plan.fps));
        trials.push(t);
    }
    Ok(trials)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against a machine that holds up to `limit` streams.
    fn search(limit: usize, max: usize) -> (Vec<usize>, usize) {
        let mut done = Vec::new();
        while let Some(n) = next_count(&done, max) {
            assert!(
                !done.iter().any(|d: &(usize, bool)| d.0 == n),
                "{n} tried twice"
            );
            done.push((n, n <= limit));
        }
        let best = done.iter().filter(|d| d.1).map(|d| d.0).max().unwrap_or(0);
        (done.iter().map(|d| d.0).collect(), best)
    }

    fn row(frames: u64, p95_ms: f64, max_ms: f64, span_seconds: f64) -> StreamRow {
        StreamRow {
            device: "cpu".into(),
            frames_in: frames,
            frames_out: frames,
            dropped_warmup: 0,
            dropped: 0,
            fps_out: 10.0,
            latency_median_ms: p95_ms / 2.0,
            latency_p95_ms: p95_ms,
            latency_max_ms: max_ms,
            span_seconds,
            error: None,
            not_held: None,
        }
    }

    #[test]
    fn a_stream_holds_only_with_every_frame_in_its_period_at_real_time_pace() {
        // 10 fps: a period of 100 ms; 21 frames span 2 s.
        let judge = |r: StreamRow| r.judge(&HOLD, 10.0, 21);
        assert_eq!(judge(row(21, 40.0, 90.0, 2.0)), None);
        let why = judge(row(21, 6500.0, 7000.0, 2.0)).unwrap();
        assert!(why.contains("p95 latency 6500.0 ms"), "{why}");
        let why = judge(row(21, 40.0, 250.0, 2.0)).unwrap();
        assert!(why.contains("max latency"), "{why}");
        let why = judge(row(21, 40.0, 90.0, 3.5)).unwrap();
        assert!(why.contains("spanned 3.50 s"), "{why}");
        let why = judge(row(0, 0.0, 0.0, 0.0)).unwrap();
        assert!(why.contains("no frame"), "{why}");
        let why = judge(row(20, 40.0, 90.0, 2.0)).unwrap();
        assert!(why.contains("20 of 21"), "{why}");
    }

    #[test]
    fn seconds_must_be_finite_and_bounded() {
        let settings = Settings::default();
        let plan = |seconds: f64| StreamsPlan {
            settings: &settings,
            backends: &[],
            frames: Arc::new(Vec::new()),
            fps: 1.0,
            seconds,
            warmup_frames: 1,
            want: PictureWant::None,
        };
        assert_eq!(plan(1.0).frame_count().unwrap(), 2);
        assert_eq!(plan(MAX_TRIAL_SECONDS).frame_count().unwrap(), 3601);
        for (seconds, shown) in [
            (f64::INFINITY, "inf"),
            (f64::NAN, "NaN"),
            (1e20, "100000000000000000000"),
            (0.0, "0"),
            (-1.0, "-1"),
        ] {
            let e = plan(seconds).frame_count().unwrap_err().to_string();
            assert!(e.contains(&format!("--seconds {shown}")), "{e}");
        }
    }

    #[test]
    fn the_sweep_finds_the_most_streams_that_hold() {
        for limit in 0..40 {
            for max in [1, 7, 16, 64] {
                let (tried, best) = search(limit, max);
                assert_eq!(
                    best,
                    limit.min(max),
                    "limit {limit}, max {max}: tried {tried:?}"
                );
                assert!(
                    tried.len() <= 2 * (usize::BITS - max.leading_zeros()) as usize + 1,
                    "{tried:?}"
                );
            }
        }
        assert_eq!(search(11, 64).0, vec![1, 2, 4, 8, 16, 12, 10, 11]);
    }
}
