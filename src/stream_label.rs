//! Which stream a thread works for, so that a log line of a run with several streams says whose
//! it is (`stream 2: …`). A stream's thread sets its label ([`set`]); the threads a pipeline
//! starts for it (source, worker, collector) take the label of the thread that started them
//! ([`spawn`]); the log format reads it ([`current`]). Threads without one (a single-stream run,
//! the viewer) log as before.

use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static LABEL: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Labels this thread's log lines (`stream 2`).
pub fn set(label: impl Into<Arc<str>>) {
    LABEL.with(|l| *l.borrow_mut() = Some(label.into()));
}

/// This thread's label, if it has one.
#[must_use]
pub fn current() -> Option<Arc<str>> {
    LABEL.with(|l| l.borrow().clone())
}

/// Spawns a named thread that carries this thread's label.
pub fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    let label = current();
    std::thread::Builder::new().name(name).spawn(move || {
        if let Some(label) = label {
            set(label);
        }
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_started_for_a_stream_carry_its_label() {
        let outer = std::thread::spawn(|| {
            set("stream 3");
            spawn("inner".into(), current).unwrap().join().unwrap()
        });
        assert_eq!(outer.join().unwrap().as_deref(), Some("stream 3"));
        assert_eq!(
            spawn("plain".into(), current).unwrap().join().unwrap(),
            None
        );
    }
}
