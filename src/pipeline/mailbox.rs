//! The latest-frame mailbox between the worker and the viewer: the worker overwrites the slot,
//! the UI takes the newest frame when it repaints; a waker (the UI's `request_repaint`) is
//! called on every put. Frames the UI never took are simply replaced (counted as not shown).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::analysis::AnalysedFrame;

type Waker = Box<dyn Fn() + Send + Sync>;

/// Newest-wins single slot.
#[derive(Default)]
pub struct Mailbox {
    slot: Mutex<Option<AnalysedFrame>>,
    waker: Mutex<Option<Waker>>,
    /// Frames overwritten before the UI took them.
    pub replaced: AtomicU64,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox")
            .field("replaced", &self.replaced)
            .finish_non_exhaustive()
    }
}

impl Mailbox {
    /// An empty mailbox.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the function called after every put (the viewer's repaint).
    #[cfg(feature = "viewer")]
    pub(crate) fn set_waker(&self, w: impl Fn() + Send + Sync + 'static) {
        if let Ok(mut g) = self.waker.lock() {
            *g = Some(Box::new(w));
        }
    }
    /// Stores a frame (replacing an untaken one) and wakes the UI.
    pub fn put(&self, f: AnalysedFrame) {
        if let Ok(mut g) = self.slot.lock()
            && g.replace(f).is_some()
        {
            self.replaced.fetch_add(1, Ordering::Relaxed);
        }
        self.wake();
    }
    /// Calls the waker.
    pub(crate) fn wake(&self) {
        if let Ok(g) = self.waker.lock()
            && let Some(w) = g.as_ref()
        {
            w();
        }
    }
    /// True when no frame waits to be taken (the viewer took the last one).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slot.lock().map_or(true, |g| g.is_none())
    }
    /// Takes the newest frame, if any arrived since the last take.
    pub fn take(&self) -> Option<AnalysedFrame> {
        self.slot.lock().ok().and_then(|mut g| g.take())
    }
}
