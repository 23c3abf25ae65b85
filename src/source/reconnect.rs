//! A live source that comes back. `Reconnecting` wraps a [`Source`]: when a live source
//! errors, stalls past its timeout or ends, its GStreamer pipeline is set to NULL and dropped,
//! and a new one is opened after a delay that doubles from `initial` up to `max` (exponential
//! backoff), until a frame arrives again, the interrupt flag is set (a stop) or `give_up` has
//! passed since the loss (then the stream ends with [`SourceError::GaveUp`]).
//!
//! What the consumer sees stays one stream: frame indices keep counting, timestamps stay
//! monotonic (the frames after the gap are shifted to start one gap after the last frame
//! before it, so an overlay video plays on with the real pause), and the first frame after a
//! gap carries [`Frame::after_gap`] (the tracker ends its tracks there). Each change is sent
//! as a [`SourceChange`]. Files and test patterns are not live: their end is the end.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::{Frame, Source, SourceError, SourceOptions, SourceSpec};

/// When to try again after a live source is lost (`source.reconnect`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReconnectPolicy {
    /// The first delay.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
    /// Give up when the source has been lost this long (`None`: never).
    pub give_up: Option<Duration>,
}

impl ReconnectPolicy {
    /// The delay before attempt `attempt` (1, 2, …): `initial`, doubled each time, at most `max`.
    #[must_use]
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(30);
        self.initial
            .saturating_mul(1u32 << doublings)
            .min(self.max.max(self.initial))
    }
}

/// A change of a live source, in the order it happened.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceChange {
    /// The source was lost: its pipeline is torn down and reconnecting begins.
    Lost {
        /// Why: the source's error, its stall, or its end.
        cause: String,
    },
    /// An attempt to reopen failed.
    AttemptFailed {
        /// 1, 2, … since the loss.
        attempt: u32,
        /// Why it failed.
        error: String,
    },
    /// Frames arrive again.
    Back {
        /// Seconds from the last frame before the loss to the first after it.
        gap_seconds: f64,
        /// Attempts it took (the last one succeeded).
        attempts: u32,
    },
}

/// A source that reopens itself when it is live and lost (see the module).
pub(crate) struct Reconnecting {
    src: Option<Source>,
    spec: SourceSpec,
    opts: SourceOptions,
    /// `None`: never reconnect.
    policy: Option<ReconnectPolicy>,
    changes: Sender<SourceChange>,
    /// Index of the next frame handed out.
    next_index: u64,
    /// Timestamp and arrival of the last frame handed out.
    last: Option<(Option<u64>, Instant)>,
    /// Added to the timestamps of the current source (after a gap).
    pts_shift: Option<PtsShift>,
    /// The next frame is the first after a gap.
    after_gap: bool,
    /// A live source that could not be opened at the start: why (reconnecting begins with the
    /// first frame asked for).
    unopened: Option<String>,
}

/// How the timestamps of a reopened source are moved to follow on from the last frame.
#[derive(Clone, Copy, Debug)]
struct PtsShift {
    /// Where the first frame after the gap goes.
    start: u64,
    /// The reopened source's first timestamp (`None` until it arrives).
    first: Option<u64>,
}

impl Reconnecting {
    /// Wraps an open source. `policy`: `None` for a source that must not reconnect.
    #[must_use]
    pub fn new(
        src: Source,
        opts: SourceOptions,
        policy: Option<ReconnectPolicy>,
        changes: Sender<SourceChange>,
    ) -> Self {
        Self {
            spec: src.spec().clone(),
            src: Some(src),
            opts,
            policy,
            changes,
            next_index: 0,
            last: None,
            pts_shift: None,
            after_gap: false,
            unopened: None,
        }
    }

    /// A live source that failed to open (`error`, one that may pass: see
    /// [`SourceError::may_pass`]): the first frame asked for starts reconnecting, as after a
    /// loss, so a stream server that is down when the run starts is waited for
    /// ([`SourceSpec::awaited_at_start`]).
    #[must_use]
    pub(crate) fn unopened(
        spec: SourceSpec,
        opts: SourceOptions,
        policy: ReconnectPolicy,
        changes: Sender<SourceChange>,
        error: &SourceError,
    ) -> Self {
        Self {
            src: None,
            spec,
            opts,
            policy: Some(policy),
            changes,
            next_index: 0,
            last: None,
            pts_shift: None,
            after_gap: false,
            unopened: Some(error.to_string()),
        }
    }

    /// What the current source reported (complete once its first frame was decoded).
    #[must_use]
    pub(crate) fn stream_info(&self) -> super::StreamInfo {
        self.src
            .as_ref()
            .map(Source::stream_info)
            .unwrap_or_default()
    }

    /// The next frame; `Ok(None)` at the end (of a source that does not reconnect) or once the
    /// interrupt flag is set, an error when a source that does not reconnect fails or when
    /// reconnecting gives up.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, SourceError> {
        let (cause, policy) = match (self.unopened.take(), self.policy) {
            (Some(cause), Some(policy)) => (cause, policy),
            _ => {
                let Some(src) = self.src.as_mut() else {
                    return Ok(None);
                };
                let got = src.next_frame();
                let live = src.stream_info().live;
                let end = match got {
                    Ok(Some(f)) => return Ok(Some(self.hand_out(f))),
                    Ok(None) if self.interrupted() => return Ok(None),
                    end => end,
                };
                let policy = match self.policy {
                    Some(p) if live => p,
                    _ => return end,
                };
                let cause = match end {
                    Ok(_) => format!("{}: the stream ended", self.spec),
                    Err(e) => e.to_string(),
                };
                // NULL and dropped before anything else: nothing of it stays open.
                self.src = None;
                (cause, policy)
            }
        };
        let lost_at = Instant::now();
        log::warn!("{cause}; reconnecting");
        let _ = self.changes.send(SourceChange::Lost {
            cause: cause.clone(),
        });
        let Some((src, first, attempts)) = self.reopen(policy, lost_at, &cause)? else {
            return Ok(None);
        };
        self.src = Some(src);
        let gap = self.last.map_or(lost_at, |(_, at)| at).elapsed();
        log::warn!(
            "{}: back after {:.1} s without frames",
            self.spec,
            gap.as_secs_f64()
        );
        let _ = self.changes.send(SourceChange::Back {
            gap_seconds: gap.as_secs_f64(),
            attempts,
        });
        let last_pts = self.last.and_then(|(pts, _)| pts).unwrap_or(0);
        self.pts_shift = Some(PtsShift {
            start: last_pts.saturating_add(gap.as_nanos() as u64),
            first: None,
        });
        self.after_gap = true;
        Ok(Some(self.hand_out(first)))
    }

    /// Numbers, shifts and marks a frame of the current source, and remembers it.
    fn hand_out(&mut self, mut f: Frame) -> Frame {
        f.index = self.next_index;
        self.next_index += 1;
        if let Some(shift) = &mut self.pts_shift {
            f.pts_nanos = f.pts_nanos.map(|pts| {
                let first = *shift.first.get_or_insert(pts);
                shift.start.saturating_add(pts.saturating_sub(first))
            });
        }
        f.after_gap = std::mem::take(&mut self.after_gap);
        self.last = Some((f.pts_nanos, Instant::now()));
        f
    }

    /// Tries to reopen until a first frame arrives (`Some`), the interrupt flag is set (`None`)
    /// or `give_up` has passed (an error naming the source and the last cause).
    fn reopen(
        &self,
        policy: ReconnectPolicy,
        lost_at: Instant,
        cause: &str,
    ) -> Result<Option<(Source, Frame, u32)>, SourceError> {
        let mut last_error = cause.to_owned();
        for attempt in 1u32.. {
            let delay = policy.delay(attempt);
            if let Some(limit) = policy.give_up
                && lost_at.elapsed() + delay > limit
            {
                return Err(SourceError::GaveUp {
                    source_name: self.spec.to_string(),
                    seconds: limit.as_secs_f64(),
                    cause: last_error,
                });
            }
            if !self.sleep(delay) {
                return Ok(None);
            }
            let opened = Source::open_with(&self.spec, &self.opts).and_then(|mut src| {
                match src.next_frame() {
                    Ok(Some(f)) => Ok((src, f)),
                    Ok(None) => Err(SourceError::Stream {
                        source_name: self.spec.to_string(),
                        message: "the stream ended at once".into(),
                        debug: None,
                    }),
                    Err(e) => Err(e),
                }
            });
            match opened {
                Ok((src, f)) => return Ok(Some((src, f, attempt))),
                Err(_) if self.interrupted() => return Ok(None),
                Err(e) => {
                    log::debug!("{}: reconnect attempt {attempt} failed: {e}", self.spec);
                    last_error = e.to_string();
                    let _ = self.changes.send(SourceChange::AttemptFailed {
                        attempt,
                        error: last_error.clone(),
                    });
                }
            }
        }
        Ok(None)
    }

    /// Sleeps `d` in short slices; `false` when the interrupt flag was set meanwhile.
    fn sleep(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while Instant::now() < until {
            if self.interrupted() {
                return false;
            }
            std::thread::sleep((until - Instant::now()).min(SLICE));
        }
        !self.interrupted()
    }

    fn interrupted(&self) -> bool {
        self.opts
            .interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }
}

/// How often a wait between attempts looks at the interrupt flag.
const SLICE: Duration = Duration::from_millis(20);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_up_to_the_longest() {
        let p = ReconnectPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            give_up: None,
        };
        let delays: Vec<u64> = (1..=7).map(|a| p.delay(a).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(p.delay(1000).as_secs(), 30, "no overflow");
    }
}
