//! Device memory another library owns (CuPy, PyTorch, Numba: anything that hands out a device
//! pointer, e.g. through `__cuda_array_interface__` or DLPack), read in place by the ops.
//!
//! - [`pointer_info`] says where a pointer lives (device ordinal, device or host memory) and
//!   how large its allocation is, so a caller can refuse a pointer the ops cannot read.
//! - [`wait_for_stream`] orders one of our streams after the work the owner queued on its own
//!   stream (the `stream` entry of `__cuda_array_interface__` version 3): an event, no host
//!   wait.
//! - [`ForeignSlice`] shows the memory as a `CudaSlice`, so that a [`DeviceImage`] can wrap it
//!   and any op's `enqueue` can read it, without ever freeing it: its drop hands the pointer
//!   back (cudarc's `leak`) after the work queued on it.
//!
//! Every library that uses the device's primary context (the CUDA runtime's, which CuPy and
//! PyTorch use, and the one [`super::GpuContext`] retains) shares its address space with ours.
//!
//! [`DeviceImage`]: super::DeviceImage

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, sys};

use super::context::GpuContext;
use super::error::GpuError;

/// The driver's handle of the legacy default stream (`CU_STREAM_LEGACY`).
const CU_STREAM_LEGACY: usize = 0x1;

/// What kind of memory a pointer addresses ([`pointer_info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    /// Device memory (`cudaMalloc`, memory pools, managed memory).
    Device,
    /// Page-locked host memory registered with CUDA (readable by kernels over the bus).
    Host,
    /// Something else the driver reports (a CUDA array).
    Other(u32),
}

/// Where a device pointer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerInfo {
    /// Ordinal of the device the memory belongs to.
    pub ordinal: usize,
    /// The memory's kind.
    pub memory: MemoryKind,
    /// Base address and size in bytes of the allocation holding the pointer, when the driver
    /// reports it (`cuMemGetAddressRange`).
    pub allocation: Option<(u64, usize)>,
}

impl PointerInfo {
    /// Bytes from `ptr` to the end of its allocation, when the allocation is known.
    #[must_use]
    pub fn bytes_from(&self, ptr: u64) -> Option<usize> {
        let (base, size) = self.allocation?;
        let offset = usize::try_from(ptr.checked_sub(base)?).ok()?;
        size.checked_sub(offset)
    }
}

/// Where `ptr` lives, as the driver sees it from `gpu`'s context. Fails (a driver error) for
/// a pointer CUDA does not know, such as ordinary host memory.
pub fn pointer_info(gpu: &GpuContext, ptr: u64) -> Result<PointerInfo, GpuError> {
    gpu.cuda().bind_to_thread()?;
    let mut memory: u32 = 0;
    // SAFETY: `memory` is a valid out-pointer for the attribute's unsigned int.
    check(unsafe {
        sys::cuPointerGetAttribute(
            (&raw mut memory).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr,
        )
    })?;
    let mut ordinal: i32 = -1;
    // SAFETY: `ordinal` is a valid out-pointer for the attribute's int.
    check(unsafe {
        sys::cuPointerGetAttribute(
            (&raw mut ordinal).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    })?;
    let (mut base, mut size) = (0, 0);
    // SAFETY: both are valid out-pointers; the call only reads the driver's tables.
    let range = unsafe { sys::cuMemGetAddressRange_v2(&raw mut base, &raw mut size, ptr) };
    let memory = match memory {
        m if m == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
            || m == sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32 =>
        {
            MemoryKind::Device
        }
        m if m == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32 => MemoryKind::Host,
        m => MemoryKind::Other(m),
    };
    Ok(PointerInfo {
        ordinal: usize::try_from(ordinal).unwrap_or(usize::MAX),
        memory,
        allocation: (range == sys::CUresult::CUDA_SUCCESS).then_some((base, size)),
    })
}

fn check(r: sys::CUresult) -> Result<(), GpuError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::Driver(cudarc::driver::DriverError(r)))
    }
}

/// Makes `stream` wait (on the device, through an event) for the work queued so far on another
/// library's stream, named as `__cuda_array_interface__` version 3 names it: 1 the legacy
/// default stream, 2 the per-thread default stream, anything else a `CUstream` (a
/// `cudaStream_t`) of `stream`'s context. 0 is ambiguous under that protocol and refused.
///
/// # Safety
///
/// A handle other than 1 and 2 must be a live stream of `stream`'s context (the owner keeps it
/// alive while the caller holds it).
pub unsafe fn wait_for_stream(stream: &Arc<CudaStream>, handle: usize) -> Result<(), GpuError> {
    if handle == 0 {
        return Err(GpuError::Unsupported(
            "stream 0 is ambiguous (__cuda_array_interface__ asks for 1 or 2 for the default \
             streams)"
                .into(),
        ));
    }
    // SAFETY: 1 and 2 are CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, valid in every context;
    // any other handle is a live stream of this context (the caller's contract). The wrapper
    // does not destroy it.
    let producer = unsafe {
        stream
            .context()
            .wrap_borrowed_stream(std::ptr::without_provenance_mut(handle))
    };
    stream.join(&producer)?;
    Ok(())
}

/// Device memory owned elsewhere, seen as a `CudaSlice<T>` of `len` elements for the ops, and
/// never freed by us: dropping it waits (on its stream, not the host) for the work cudarc
/// tracked on it and hands the pointer back.
pub struct ForeignSlice<T> {
    slice: ManuallyDrop<CudaSlice<T>>,
}

impl<T: DeviceRepr> ForeignSlice<T> {
    /// Wraps `len` elements at `ptr` on `stream`.
    ///
    /// # Safety
    ///
    /// `ptr` must address at least `len * size_of::<T>()` bytes of device memory readable from
    /// `stream`'s context, holding valid `T`s, that stay allocated, and are not written by
    /// anyone else, until the work queued on it through this slice is done (the caller
    /// synchronises `stream`, or orders the owner's later work after it).
    pub unsafe fn new(stream: &Arc<CudaStream>, ptr: u64, len: usize) -> Self {
        // SAFETY: the caller's contract; the slice is never dropped as a CudaSlice (see Drop).
        let slice = unsafe { stream.upgrade_device_ptr::<T>(ptr, len) };
        Self {
            slice: ManuallyDrop::new(slice),
        }
    }

    /// The memory as a `CudaSlice` (for [`super::DeviceImage::new`]); read it only: the owner
    /// did not lend it for writing.
    #[must_use]
    pub fn slice(&self) -> &CudaSlice<T> {
        &self.slice
    }
}

impl<T> Drop for ForeignSlice<T> {
    fn drop(&mut self) {
        // SAFETY: taken exactly once, here; `leak` releases cudarc's bookkeeping (events,
        // stream) without freeing the memory, which is not ours.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        let _ = slice.leak();
    }
}

impl<T> std::fmt::Debug for ForeignSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForeignSlice")
            .field("len", &self.slice.len())
            .finish_non_exhaustive()
    }
}

/// Frees `slice` in the order of the legacy default stream rather than its own: after the work
/// queued so far on the legacy default stream, hence on every blocking stream of the context
/// (the default streams of CuPy and PyTorch, `cupy.cuda.Stream()`), without a host wait. For
/// memory handed to another library, whose work on it cudarc does not see (work on a
/// non-blocking stream of that library must be ordered by its owner first). Falls back to a
/// synchronous free where the device has no memory pools (cudarc allocated it synchronously).
pub fn free_after_default_stream<T>(slice: CudaSlice<T>) -> Result<(), GpuError> {
    let ctx = slice.context().clone();
    let pooled = ctx.has_async_alloc();
    let ptr = slice.leak();
    ctx.bind_to_thread()?;
    // SAFETY: `ptr` is a live allocation of this context that cudarc no longer tracks (leaked
    // above), freed once; CU_STREAM_LEGACY names the legacy stream of the current context,
    // bound above.
    let r = unsafe {
        if pooled {
            sys::cuMemFreeAsync(ptr, std::ptr::without_provenance_mut(CU_STREAM_LEGACY))
        } else {
            sys::cuMemFree_v2(ptr)
        }
    };
    check(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_from_counts_to_the_end_of_the_allocation() {
        let info = PointerInfo {
            ordinal: 0,
            memory: MemoryKind::Device,
            allocation: Some((1000, 64)),
        };
        assert_eq!(info.bytes_from(1000), Some(64));
        assert_eq!(info.bytes_from(1060), Some(4));
        assert_eq!(info.bytes_from(1064), Some(0));
        assert_eq!(info.bytes_from(1065), None);
        assert_eq!(info.bytes_from(999), None);
        let unknown = PointerInfo {
            allocation: None,
            ..info
        };
        assert_eq!(unknown.bytes_from(1000), None);
    }
}
