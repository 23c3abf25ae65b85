//! Per-kernel GPU timings with CUDA events.
//!
//! A [`KernelTimer`] records an event pair around each named region on a stream. Reading the
//! times ([`KernelTimer::read`]) needs the stream's work to be complete (the ring reads them
//! after the slot's `done` event). Events are created with timing enabled (`CU_EVENT_DEFAULT`;
//! `None` would disable timing) and reused across frames, so steady state allocates nothing.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream, sys::CUevent_flags};

use super::error::GpuError;

/// Event pairs around named GPU regions of one frame.
#[derive(Default)]
pub struct KernelTimer {
    marks: Vec<Mark>,
    used: usize,
}

struct Mark {
    name: &'static str,
    start: CudaEvent,
    end: CudaEvent,
}

impl std::fmt::Debug for KernelTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelTimer").field("used", &self.used).finish()
    }
}

impl KernelTimer {
    /// An empty timer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets the previous frame's regions (events are kept for reuse).
    pub fn reset(&mut self) {
        self.used = 0;
    }

    /// Runs `enqueue` (which launches work on `stream`) between two recorded events named `name`.
    pub fn time<R>(
        &mut self,
        stream: &Arc<CudaStream>,
        name: &'static str,
        enqueue: impl FnOnce() -> Result<R, GpuError>,
    ) -> Result<R, GpuError> {
        if self.used == self.marks.len() {
            let ctx = stream.context();
            self.marks.push(Mark {
                name,
                start: ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?,
                end: ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?,
            });
        }
        let i = self.used;
        self.marks[i].name = name;
        self.marks[i].start.record(stream)?;
        let r = enqueue()?;
        self.marks[i].end.record(stream)?;
        self.used += 1;
        Ok(r)
    }

    /// (name, milliseconds) of each region of the frame, in launch order. Blocks until the last
    /// event has completed.
    pub fn read(&self) -> Result<Vec<(&'static str, f64)>, GpuError> {
        let mut out = Vec::with_capacity(self.used);
        for m in &self.marks[..self.used] {
            m.end.synchronize()?;
            out.push((m.name, f64::from(m.start.elapsed_ms(&m.end)?)));
        }
        Ok(out)
    }
}
