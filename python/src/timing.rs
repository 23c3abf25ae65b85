//! The wall time of the last library op a function of this module ran, for the benchmark's
//! "Python overhead" figure (`scripts/bench_python.py`): the time spent in the op itself, from
//! its input view to its result image or device buffer, without argument checks, array
//! conversions and the Python call around it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use pyo3::prelude::*;

/// Nanoseconds of the last op, on any thread (the benchmark calls from one thread).
static LAST_OP_NS: AtomicU64 = AtomicU64::new(0);

/// Runs `op` and records its wall time as the last op's.
pub fn timed<R>(op: impl FnOnce() -> R) -> R {
    let start = Instant::now();
    let out = op();
    let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    LAST_OP_NS.store(ns, Ordering::Relaxed);
    out
}

/// Seconds the last op took inside the extension (see the module docs).
#[pyfunction]
pub fn last_op_seconds() -> f64 {
    LAST_OP_NS.load(Ordering::Relaxed) as f64 * 1e-9
}

/// `py.detach(op)` (the GIL released), timed as the last op.
pub fn detach_timed<R: Send>(py: Python<'_>, op: impl FnOnce() -> R + Send) -> R {
    py.detach(|| timed(op))
}
