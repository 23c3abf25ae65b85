//! Keeping graph captures apart from other threads' work on the same device.
//!
//! A stream capture records what one thread enqueues on one stream into a graph (see
//! [`super::graph`]). Even in thread-local capture mode, work that another thread enqueues on
//! the same device at that moment invalidated a capture on the H100 (the collector composing a
//! finished frame while the worker captured the next one's segmentation). Captures are rare
//! (once per new graph key), enqueues happen every frame on every stream, so the rule is a
//! shared/exclusive lock per device:
//!
//! - every thread that enqueues work on a device (each stream's worker, and its collector while
//!   it reads back and composes) holds the **shared** side, [`capture_exclusion`], while it does;
//!   any number of threads hold it at once, so the streams on a device never wait for each other;
//! - a capture takes the **exclusive** side: it waits until no other thread enqueues on that
//!   device, and new shared holders wait while a capture is waiting or running (captures are not
//!   starved by a steady flow of frames).
//!
//! The capturing thread is itself inside its own enqueue (the worker holds the shared side when
//! the segmentation captures): the exclusive side gives back that thread's own shared holds while
//! it waits and captures, and takes them again after, so it never waits for itself. A thread
//! that already holds the shared side and asks for it again does not wait for a waiting capture
//! (which waits for that thread). Devices are independent: a capture on device 0 never waits for
//! work on device 1.

use std::cell::RefCell;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The lock of one device.
#[derive(Default)]
struct CaptureLock {
    state: Mutex<LockState>,
    changed: Condvar,
}

/// Who holds a device's lock.
#[derive(Default, Debug)]
struct LockState {
    /// Shared holds, over every thread.
    shared: usize,
    /// A capture runs.
    capturing: bool,
    /// Captures waiting for the shared holds to end.
    captures_waiting: usize,
}

impl CaptureLock {
    fn state(&self) -> MutexGuard<'_, LockState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, g: MutexGuard<'a, LockState>) -> MutexGuard<'a, LockState> {
        self.changed.wait(g).unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every device's lock, by ordinal (a handful of devices: a list is enough). Each lock is
/// leaked once so that guards can borrow it for `'static`.
static LOCKS: Mutex<Vec<(usize, &'static CaptureLock)>> = Mutex::new(Vec::new());

fn lock_of(ordinal: usize) -> &'static CaptureLock {
    let mut locks = LOCKS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, l)) = locks.iter().find(|(o, _)| *o == ordinal) {
        return l;
    }
    let l: &'static CaptureLock = Box::leak(Box::default());
    locks.push((ordinal, l));
    l
}

thread_local! {
    /// The devices this thread holds the shared side of, once per hold.
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

fn held_here(ordinal: usize) -> usize {
    HELD.with(|h| h.borrow().iter().filter(|&&o| o == ordinal).count())
}

/// The shared side of a device's lock: no capture starts on the device while it lives.
#[must_use = "captures are kept out only while the guard lives"]
pub struct CaptureExclusion {
    ordinal: usize,
    lock: &'static CaptureLock,
}

impl std::fmt::Debug for CaptureExclusion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureExclusion")
            .field("ordinal", &self.ordinal)
            .finish()
    }
}

/// Waits until no graph is being captured on device `ordinal` and keeps captures there out while
/// the guard lives. Hold it around work enqueued on the device from a thread that does not
/// capture itself, or around a worker's whole enqueue (its own captures pass).
pub fn capture_exclusion(ordinal: usize) -> CaptureExclusion {
    let lock = lock_of(ordinal);
    let reentrant = held_here(ordinal) > 0;
    let mut s = lock.state();
    while !reentrant && (s.capturing || s.captures_waiting > 0) {
        s = lock.wait(s);
    }
    s.shared += 1;
    drop(s);
    HELD.with(|h| h.borrow_mut().push(ordinal));
    CaptureExclusion { ordinal, lock }
}

impl Drop for CaptureExclusion {
    fn drop(&mut self) {
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().rposition(|&o| o == self.ordinal) {
                h.swap_remove(i);
            }
        });
        let mut s = self.lock.state();
        s.shared = s.shared.saturating_sub(1);
        drop(s);
        self.lock.changed.notify_all();
    }
}

/// The exclusive side, held by a capture.
pub(crate) struct CaptureGuard {
    lock: &'static CaptureLock,
    /// The calling thread's own shared holds, given back while the capture runs.
    own: usize,
}

/// Waits until no other thread enqueues on device `ordinal` and no other capture runs there,
/// then keeps them out while the guard lives.
pub(crate) fn capture_guard(ordinal: usize) -> CaptureGuard {
    let lock = lock_of(ordinal);
    let own = held_here(ordinal);
    let mut s = lock.state();
    s.shared = s.shared.saturating_sub(own);
    s.captures_waiting += 1;
    lock.changed.notify_all();
    while s.capturing || s.shared > 0 {
        s = lock.wait(s);
    }
    s.captures_waiting -= 1;
    s.capturing = true;
    CaptureGuard { lock, own }
}

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        let mut s = self.lock.state();
        s.capturing = false;
        s.shared += self.own;
        drop(s);
        self.lock.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    // Each test uses its own ordinals: the locks are process-wide.

    #[test]
    fn shared_holds_on_many_threads_overlap() {
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|sc| {
            for _ in 0..4 {
                let (inside, most) = (inside.clone(), most.clone());
                sc.spawn(move || {
                    let _g = capture_exclusion(900);
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(100));
                    inside.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        assert!(
            most.load(Ordering::SeqCst) >= 2,
            "shared holders ran one at a time"
        );
    }

    #[test]
    fn a_capture_waits_for_other_threads_but_not_for_its_own_hold() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let other = capture_exclusion(901);
        let o = order.clone();
        let capturer = std::thread::spawn(move || {
            let _mine = capture_exclusion(901);
            let _c = capture_guard(901);
            o.lock().unwrap().push("capture");
            // Asking again for the shared side inside the capture does not deadlock.
            let _again = capture_exclusion(901);
        });
        std::thread::sleep(Duration::from_millis(150));
        order.lock().unwrap().push("other done");
        drop(other);
        capturer.join().unwrap();
        assert_eq!(*order.lock().unwrap(), vec!["other done", "capture"]);
    }

    #[test]
    fn new_shared_holds_wait_for_a_waiting_capture_and_devices_are_independent() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = capture_exclusion(902);
        let o = order.clone();
        let capturer = std::thread::spawn(move || {
            let _c = capture_guard(902);
            o.lock().unwrap().push("capture");
            std::thread::sleep(Duration::from_millis(50));
        });
        std::thread::sleep(Duration::from_millis(100));
        // Another device is not held up by the capture waiting on device 902.
        drop(capture_exclusion(903));
        let o = order.clone();
        let late = std::thread::spawn(move || {
            let _g = capture_exclusion(902);
            o.lock().unwrap().push("late shared");
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            order.lock().unwrap().is_empty(),
            "nobody passed the first hold"
        );
        drop(first);
        capturer.join().unwrap();
        late.join().unwrap();
        assert_eq!(*order.lock().unwrap(), vec!["capture", "late shared"]);
    }
}
