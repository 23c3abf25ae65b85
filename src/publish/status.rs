//! The once-a-second status message of a stream: a [`StatusClock`] turns the run's counters
//! into a [`StreamStatus`] (fps over the last period) and hands it to the stream's publisher
//! when a period has passed, so a frame loop calls `StatusClock::tick` as often as it likes.

use std::time::{Duration, Instant};

use super::{StreamPublisher, StreamStatus};
use crate::stats::CounterSnapshot;

/// Time between two status messages of a stream.
pub(crate) const STATUS_EVERY: Duration = Duration::from_secs(1);

/// Sends a stream's status every `STATUS_EVERY`.
pub struct StatusClock {
    publisher: StreamPublisher,
    last: Instant,
    frames_out_at_last: u64,
    reconnecting: bool,
}

impl StatusClock {
    /// A clock for `publisher`'s stream; the first status goes out a period from now.
    #[must_use]
    pub fn new(publisher: StreamPublisher) -> Self {
        Self {
            publisher,
            last: Instant::now(),
            frames_out_at_last: 0,
            reconnecting: false,
        }
    }

    /// Whether the stream's live source is lost and being reopened, from the next status on
    /// (which goes out at once).
    pub(crate) fn set_reconnecting(&mut self, reconnecting: bool) {
        self.reconnecting = reconnecting;
        self.last = Instant::now()
            .checked_sub(STATUS_EVERY)
            .unwrap_or(self.last);
    }

    /// Sends a status when a period has passed since the last one (or at once with `now`:
    /// the final status of a run). `errors`: the stream's errors so far.
    pub(crate) fn tick(&mut self, counters: &CounterSnapshot, errors: u64, now: bool) {
        let elapsed = self.last.elapsed();
        if !now && elapsed < STATUS_EVERY {
            return;
        }
        let status = StreamStatus {
            reconnecting: self.reconnecting,
            ..status_over(counters, errors, self.frames_out_at_last, elapsed)
        };
        self.publisher.status(&status);
        self.last = Instant::now();
        self.frames_out_at_last = counters.frames_out;
    }
}

/// The status of a stream whose `frames_out` was `frames_out_before` `elapsed` ago. Counters
/// read at slightly different moments are made consistent: `frames_in` is at least
/// `frames_out + dropped`.
#[must_use]
pub(crate) fn status_over(
    counters: &CounterSnapshot,
    errors: u64,
    frames_out_before: u64,
    elapsed: Duration,
) -> StreamStatus {
    let seconds = elapsed.as_secs_f64();
    let frames = counters.frames_out.saturating_sub(frames_out_before);
    StreamStatus {
        fps: if seconds > 0.0 {
            frames as f64 / seconds
        } else {
            0.0
        },
        frames_in: counters
            .frames_in
            .max(counters.frames_out + counters.dropped),
        frames_out: counters.frames_out,
        dropped: counters.dropped,
        errors,
        reconnecting: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fps_is_over_the_last_period() {
        let c = CounterSnapshot {
            frames_in: 130,
            frames_out: 120,
            dropped: 10,
        };
        let s = status_over(&c, 0, 100, Duration::from_millis(500));
        assert_eq!(s.fps, 40.0);
        assert_eq!(
            (s.frames_in, s.frames_out, s.dropped, s.errors),
            (130, 120, 10, 0)
        );
        assert_eq!(status_over(&c, 1, 120, Duration::ZERO).fps, 0.0);
        let stale = CounterSnapshot {
            frames_in: 100,
            ..c
        };
        assert_eq!(status_over(&stale, 0, 0, Duration::ZERO).frames_in, 130);
    }
}
