//! Per-kernel GPU timings with CUDA events.
//!
//! A [`KernelTimer`] records an event pair around each named region on a stream. Reading the
//! times ([`KernelTimer::read`]) needs the stream's work to be complete (the ring reads them
//! after the slot's `done` event). Events are created with timing enabled (`CU_EVENT_DEFAULT`;
//! `None` would disable timing) and reused across frames, so steady state allocates nothing.
//!
//! The elapsed time is read through `event_elapsed_millis`, not cudarc's `elapsed_ms`: with
//! the CUDA 13 bindings cudarc calls `cuEventElapsedTime_v2`, which drivers older than CUDA 12.8
//! (JetPack 6 ships 12.2 and 12.6) do not export, and a missing symbol panics. The function
//! takes `_v2` where the driver has it and the original `cuEventElapsedTime` (same signature)
//! otherwise.

use std::sync::Arc;

use std::sync::OnceLock;

use cudarc::driver::sys::{CUevent, CUevent_flags, CUresult};
use cudarc::driver::{CudaEvent, CudaStream, DriverError};

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
        f.debug_struct("KernelTimer")
            .field("used", &self.used)
            .finish()
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
            out.push((m.name, f64::from(event_elapsed_millis(&m.start, &m.end)?)));
        }
        Ok(out)
    }
}

type ElapsedFn = unsafe extern "C" fn(*mut f32, CUevent, CUevent) -> CUresult;

/// The driver's elapsed-time entry point: `cuEventElapsedTime_v2` (CUDA 12.8 and later) or
/// `cuEventElapsedTime` (every CUDA 12 and 13 driver); `None` when the driver has neither.
fn elapsed_entry_point() -> Option<ElapsedFn> {
    static ENTRY: OnceLock<Option<ElapsedFn>> = OnceLock::new();
    *ENTRY.get_or_init(|| {
        // SAFETY: only called after a context exists, so libcuda is loaded; both symbols have
        // the signature `CUresult (float*, CUevent, CUevent)` in every CUDA 12 and 13 header.
        unsafe {
            let lib = cudarc::driver::sys::culib();
            lib.get::<ElapsedFn>(b"cuEventElapsedTime_v2\0")
                .or_else(|_| lib.get::<ElapsedFn>(b"cuEventElapsedTime\0"))
                .ok()
                .map(|f| *f)
        }
    })
}

/// Milliseconds between two recorded events of one context (blocks until `end` completes).
pub(crate) fn event_elapsed_millis(start: &CudaEvent, end: &CudaEvent) -> Result<f32, GpuError> {
    let not_supported = DriverError(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    let elapsed = elapsed_entry_point().ok_or(not_supported)?;
    start.context().bind_to_thread()?;
    end.synchronize()?;
    let mut millis = 0.0f32;
    // SAFETY: both events are live (borrowed), recorded with timing enabled, and their context
    // is current on this thread; `millis` is a valid out-pointer.
    let r = unsafe { elapsed(&mut millis, start.cu_event(), end.cu_event()) };
    if r == CUresult::CUDA_SUCCESS {
        Ok(millis)
    } else {
        Err(DriverError(r).into())
    }
}
