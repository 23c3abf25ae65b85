//! A request to stop one stream, from any thread (a signal handler, a service, a viewer).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::signal::{SIGINT, SIGTERM};

/// The cause of a stop that no signal asked for: the stream was removed from a running service
/// (`DELETE /streams/{id}`). Above every signal number.
pub const REMOVED: i32 = 1000;

/// The cause of a stop asked by the stream's own reader: a program reading a
/// [`super::StreamOutput::Channel`] closed it (Python's `Video.close()`). Above every signal
/// number.
pub const CLOSED: i32 = 1001;

/// Asks a stream to stop; cheap to clone (clones ask the same stream). The request carries a
/// cause: the number of the signal that asked (the run exits with 128 + it), or [`REMOVED`].
#[derive(Clone, Debug, Default)]
pub struct StopRequest {
    /// Set once asked: the source's and the pipeline's interrupt flag.
    flag: Arc<AtomicBool>,
    /// The cause (0 until asked).
    cause: Arc<AtomicUsize>,
}

impl StopRequest {
    /// A request nobody has made yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the stream to stop, for `cause` (a signal number, at least 1).
    pub fn ask(&self, cause: i32) {
        self.cause
            .store(usize::try_from(cause.max(1)).unwrap_or(1), Ordering::SeqCst);
        self.flag.store(true, Ordering::SeqCst);
    }

    /// The cause, once asked.
    #[must_use]
    pub fn asked(&self) -> Option<i32> {
        match self.cause.load(Ordering::SeqCst) {
            0 => None,
            c => i32::try_from(c).ok(),
        }
    }

    /// What a signal handler sets to ask without calling [`StopRequest::ask`]: first the
    /// cause (store the signal number), then the flag (store `true`).
    #[must_use]
    pub fn handler_targets(&self) -> (Arc<AtomicUsize>, Arc<AtomicBool>) {
        (self.cause.clone(), self.flag.clone())
    }

    /// The flag the pipeline and the source watch.
    pub(super) fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }
}

/// The name of a stop's cause: `SIGINT`, `SIGTERM`, `removed`, `closed`, else `signal`.
#[must_use]
pub fn cause_name(cause: i32) -> &'static str {
    match cause {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        REMOVED => "removed",
        CLOSED => "closed",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_seen_by_every_clone_with_its_cause() {
        let stop = StopRequest::new();
        let seen = stop.clone();
        assert_eq!(seen.asked(), None);
        assert!(!seen.flag().load(Ordering::SeqCst));
        stop.ask(15);
        assert_eq!(seen.asked(), Some(15));
        assert!(seen.flag().load(Ordering::SeqCst));
    }
}
