//! New analysis settings for a running stream, from any thread (the service's `PATCH`).

use std::sync::{Arc, Mutex, PoisonError};

use crate::analysis::OpSettings;

/// Hands a stream new analysis settings; cheap to clone (clones reach the same stream). The
/// stream passes them to its analyses within a tenth of a second, and they apply from the next
/// frame the analyses take. Settings set twice before the stream took them: the newer win.
#[derive(Clone, Debug, Default)]
pub struct LiveSettings {
    pending: Arc<Mutex<Option<Box<OpSettings>>>>,
}

impl LiveSettings {
    /// A handle nobody has set settings through yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the stream to analyse with `ops` from its next frame on.
    pub fn set(&self, ops: OpSettings) {
        *self.lock() = Some(Box::new(ops));
    }

    /// The settings set and not taken yet.
    pub(super) fn take(&self) -> Option<Box<OpSettings>> {
        self.lock().take()
    }

    /// Puts back settings the analyses could not take yet, unless newer ones were set since.
    pub(super) fn put_back(&self, ops: Box<OpSettings>) {
        self.lock().get_or_insert(ops);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Box<OpSettings>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_settings_win_and_a_put_back_never_hides_a_newer_one() {
        let live = LiveSettings::new();
        assert!(live.take().is_none());
        let mut a = OpSettings::default();
        a.cca.enabled = false;
        let mut b = OpSettings::default();
        b.segmentation.enabled = false;
        live.clone().set(a.clone());
        live.set(b.clone());
        let taken = live.take().unwrap();
        assert_eq!(*taken, b);
        live.set(a.clone());
        live.put_back(taken);
        assert_eq!(*live.take().unwrap(), a, "the newer settings stay");
        live.put_back(Box::new(b.clone()));
        assert_eq!(*live.take().unwrap(), b);
    }
}
