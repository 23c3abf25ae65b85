//! Device→host copies through a page-locked buffer kept between frames. A copy into pageable
//! memory (`clone_dtoh`) is staged by the driver in small chunks and runs at a few GB/s; into
//! pinned memory it runs at PCIe speed, and the copy out of the pinned buffer is a host memcpy.
//! Pageable, the pipeline's per-frame readbacks of 4K pictures took tens of milliseconds
//! (`docs/benchmarks-history.md`).

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DeviceRepr, PinnedHostSlice, ValidAsZeroBits,
};

use super::GpuError;

/// A reusable pinned buffer for reading back one array per frame (grown when a frame needs more).
pub struct Readback<T: DeviceRepr> {
    ctx: Arc<CudaContext>,
    buf: Option<PinnedHostSlice<T>>,
}

impl<T: DeviceRepr> std::fmt::Debug for Readback<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readback")
            .field("len", &self.buf.as_ref().map_or(0, PinnedHostSlice::len))
            .finish()
    }
}

impl<T: DeviceRepr + ValidAsZeroBits + Copy> Readback<T> {
    /// No buffer yet: the first `fetch` allocates it.
    #[must_use]
    pub fn new(ctx: &Arc<CudaContext>) -> Self {
        Self {
            ctx: ctx.clone(),
            buf: None,
        }
    }

    /// Copies the first `n` elements of `src` to the host, waiting for the stream's work.
    pub(crate) fn fetch(
        &mut self,
        stream: &Arc<CudaStream>,
        src: &CudaSlice<T>,
        n: usize,
    ) -> Result<Vec<T>, GpuError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        if self.buf.as_ref().is_none_or(|b| b.len() < n) {
            self.buf = None;
            // SAFETY: the buffer is only read after a device copy into it has completed (below).
            let b = unsafe { self.ctx.alloc_pinned_with_flags::<T>(n, 0) }.map_err(|e| {
                GpuError::from_alloc(
                    e,
                    "pinned readback buffer",
                    n,
                    1,
                    n * std::mem::size_of::<T>(),
                )
            })?;
            self.buf = Some(b);
        }
        let Some(buf) = self.buf.as_mut() else {
            return Ok(Vec::new());
        };
        // Copy into the first n elements only: cudarc copies as many bytes as the destination
        // holds, so passing the whole (possibly larger) buffer would read past `src`.
        let host = &mut buf.as_mut_slice()?[..n];
        stream.memcpy_dtoh(&src.slice(0..n), host)?;
        stream.synchronize()?;
        Ok(host.to_vec())
    }
}
