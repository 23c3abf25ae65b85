//! How streams' CPU work enters rayon's thread pool without piling up on one stack.
//!
//! Every stream's worker and collector are threads of their own, outside the pool; an op's
//! `par_iter` or `join` called there injects a job into the pool and blocks. A pool thread that
//! waits inside a `join` (its other half was stolen) runs other jobs meanwhile, injected ones
//! included: another stream's op then runs on top of the waiting one's stack, and that one may
//! wait and take a third. With many streams this nesting had no bound (a thousand
//! streams at 160x120 overflowed a pool thread's stack, thousands of frames deep in
//! `join_context`).
//!
//! The gate bounds it: a thread outside the pool takes a permit before its CPU work and gives it
//! back after, and there are as many permits as the pool has threads. Only jobs whose thread
//! holds a permit are in the pool, so a pool thread's stack holds at most that many streams'
//! jobs, each as deep as its own fork-join tree. As many streams work at once as the pool has
//! threads (one per core), which keeps every core busy: the ops split each frame into many
//! pieces. Work already on a pool thread passes without a permit: it injects nothing, and
//! waiting there for a permit held further down the same stack would never end.

use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

/// A counting semaphore in front of a thread pool.
pub(crate) struct CpuGate {
    held: Mutex<usize>,
    freed: Condvar,
    permits: usize,
}

/// A permit of a [`CpuGate`], given back when dropped.
pub(crate) struct CpuPermit<'a> {
    gate: &'a CpuGate,
}

impl CpuGate {
    /// A gate letting `permits` threads (at least one) in at once.
    #[must_use]
    pub fn new(permits: usize) -> Self {
        Self {
            held: Mutex::new(0),
            freed: Condvar::new(),
            permits: permits.max(1),
        }
    }

    /// The gate of rayon's global pool, with one permit per pool thread.
    pub fn global() -> &'static Self {
        static GATE: OnceLock<CpuGate> = OnceLock::new();
        GATE.get_or_init(|| Self::new(rayon::current_num_threads()))
    }

    /// Waits for a permit; `None` (no wait) on a thread of a rayon pool.
    pub(crate) fn enter(&self) -> Option<CpuPermit<'_>> {
        if rayon::current_thread_index().is_some() {
            return None;
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held >= self.permits {
            held = self
                .freed
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *held += 1;
        Some(CpuPermit { gate: self })
    }
}

impl Drop for CpuPermit<'_> {
    fn drop(&mut self) {
        let mut held = self
            .gate
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *held = held.saturating_sub(1);
        self.gate.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fork-join tree as deep as an op's `par_iter` over the rows of a small frame.
    fn fork_join(depth: u32) -> u64 {
        if depth == 0 {
            return std::hint::black_box(1);
        }
        let (a, b) = rayon::join(|| fork_join(depth - 1), || fork_join(depth - 1));
        a + b
    }

    /// Many "streams" (threads outside the pool) feed fork-join work to one small pool whose
    /// threads have small stacks. Without the gate a waiting pool thread nests other streams'
    /// jobs on its stack until it overflows (the process aborts); through it the nesting is at
    /// most one job per pool thread.
    #[test]
    fn many_streams_through_the_gate_stay_within_a_small_stack() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .stack_size(128 * 1024)
            .build()
            .unwrap();
        let gate = CpuGate::new(pool.current_num_threads());
        let (pool, gate) = (&pool, &gate);
        std::thread::scope(|s| {
            for _ in 0..400 {
                s.spawn(move || {
                    for _ in 0..20 {
                        let _permit = gate.enter();
                        assert_eq!(pool.install(|| fork_join(6)), 64);
                    }
                });
            }
        });
        assert_eq!(*gate.held.lock().unwrap(), 0);
    }

    #[test]
    fn a_pool_thread_passes_without_a_permit() {
        let gate = CpuGate::new(1);
        let outside = gate.enter();
        assert!(outside.is_some());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert!(pool.install(|| gate.enter().is_none()));
    }
}
