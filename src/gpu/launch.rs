//! Small launch helpers shared by every op's GPU code.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, LaunchConfig, ValidAsZeroBits};

use super::error::GpuError;

/// Blocks of `block` threads needed to cover `n` items (at least 1).
#[must_use]
pub(crate) fn blocks_for(n: usize, block: u32) -> u32 {
    let b = block as usize;
    u32::try_from(n.div_ceil(b).max(1)).unwrap_or(u32::MAX)
}

/// A 1D launch over `n` items with `block` threads per block.
#[must_use]
pub fn linear(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks_for(n, block), 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A launch of one block of `threads` threads (block-wide scans, single-thread bookkeeping).
#[must_use]
pub(crate) fn one_block(threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A 2D launch of `bx` x `by` blocks covering `width` x `height`.
#[must_use]
pub(crate) fn grid2d(width: usize, height: usize, bx: u32, by: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks_for(width, bx), blocks_for(height, by), 1),
        block_dim: (bx, by, 1),
        shared_mem_bytes: 0,
    }
}

/// Checks that a frame fits the kernels' 32-bit pixel indexing.
pub(crate) fn check_frame_size(width: usize, height: usize) -> Result<(), GpuError> {
    let n = width
        .checked_mul(height)
        .ok_or_else(|| GpuError::Unsupported("size overflows".into()))?;
    if n >= (1usize << 31) {
        return Err(GpuError::Unsupported(format!(
            "{width}x{height} has more than 2^31 pixels"
        )));
    }
    Ok(())
}

/// Allocates `len` zeroed elements on `stream`, naming what and for which frame size on OOM.
pub(crate) fn alloc_zeroed<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    len: usize,
    what: &str,
    width: usize,
    height: usize,
) -> Result<CudaSlice<T>, GpuError> {
    stream
        .alloc_zeros::<T>(len.max(1))
        .map_err(|e| GpuError::from_alloc(e, what, width, height, len * std::mem::size_of::<T>()))
}

/// Copies `data` (a packed frame, `width` x `height` pixels of one or more samples) to a new
/// device buffer. An empty frame gets a one-element zero buffer: kernels take a valid pointer
/// even when they have nothing to do.
pub(crate) fn upload_packed<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    data: &[T],
    width: usize,
    height: usize,
) -> Result<CudaSlice<T>, GpuError> {
    check_frame_size(width, height)?;
    if data.is_empty() {
        return alloc_zeroed::<T>(stream, 1, "input frame", width, height);
    }
    stream.clone_htod(data).map_err(|e| {
        GpuError::from_alloc(e, "input frame", width, height, std::mem::size_of_val(data))
    })
}

/// A kernel launch through `cuLaunchKernelEx` that may start before the previous kernel on its
/// stream has finished (programmatic dependent launch, compute capability 9.0+): the kernel's
/// blocks are scheduled once every block of the previous kernel has signalled
/// (`griddepcontrol.launch_dependents`, or its exit) and must wait (`griddepcontrol.wait`,
/// `grid_dep_wait` in `kernels/common/util.cuh`) before they read anything it wrote. Saves
/// most of the launch gap between dependent kernels, in captured graphs too (they become
/// programmatic edges). Without `programmatic` it is an ordinary `cuLaunchKernel`.
///
/// [`ExLaunch::cooperative`] makes it a cooperative launch instead (`cuLaunchCooperativeKernel`:
/// every block is resident at once, so the kernel may synchronise the whole grid).
///
/// Arguments are plain values (raw device addresses, scalars) borrowed until the launch.
pub(crate) struct ExLaunch<'a> {
    stream: &'a CudaStream,
    func: &'a cudarc::driver::CudaFunction,
    args: Vec<*mut std::ffi::c_void>,
    programmatic: bool,
    cooperative: bool,
}

impl<'a> ExLaunch<'a> {
    /// A launch of `func` on `stream`; `programmatic` as above (only on devices that have it).
    #[must_use]
    pub fn new(
        stream: &'a CudaStream,
        func: &'a cudarc::driver::CudaFunction,
        programmatic: bool,
    ) -> Self {
        Self {
            stream,
            func,
            args: Vec::with_capacity(24),
            programmatic,
            cooperative: false,
        }
    }

    /// Makes it a cooperative launch (not programmatic): the driver starts every block at once
    /// or fails the launch when the grid is larger than the device holds.
    #[must_use]
    pub fn cooperative(mut self) -> Self {
        self.cooperative = true;
        self.programmatic = false;
        self
    }

    /// Appends a kernel argument (its bytes are read at launch).
    pub fn arg<T: DeviceRepr>(&mut self, value: &'a T) -> &mut Self {
        self.args.push(std::ptr::from_ref(value).cast_mut().cast());
        self
    }

    /// Enqueues the kernel.
    ///
    /// # Safety
    /// As `cudarc`'s `LaunchArgs::launch`: the arguments must match the kernel's parameters in
    /// number, order and type, and the kernel must stay inside the memory they name. With
    /// `programmatic`, the kernel must call `griddepcontrol.wait` before touching memory the
    /// previous kernel on the stream writes or reads.
    pub unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<(), cudarc::driver::DriverError> {
        use cudarc::driver::sys;
        self.stream.context().bind_to_thread()?;
        if self.cooperative {
            // SAFETY: as below; the caller sizes the grid to what the device holds at once.
            return unsafe {
                sys::cuLaunchCooperativeKernel(
                    self.func.cu_function(),
                    cfg.grid_dim.0,
                    cfg.grid_dim.1,
                    cfg.grid_dim.2,
                    cfg.block_dim.0,
                    cfg.block_dim.1,
                    cfg.block_dim.2,
                    cfg.shared_mem_bytes,
                    self.stream.cu_stream(),
                    self.args.as_mut_ptr(),
                )
                .result()
            };
        }
        if !self.programmatic {
            // cuLaunchKernel: drivers older than CUDA 11.8 (Jetson Xavier) lack cuLaunchKernelEx.
            // SAFETY: as below, without the attribute.
            return unsafe {
                cudarc::driver::result::launch_kernel(
                    self.func.cu_function(),
                    cfg.grid_dim,
                    cfg.block_dim,
                    cfg.shared_mem_bytes,
                    self.stream.cu_stream(),
                    &mut self.args,
                )
            };
        }
        // SAFETY: all-zero bytes are a valid launch attribute (a union of plain integers).
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &raw mut attr,
            numAttrs: 1,
        };
        // SAFETY: the config, attribute and argument pointers live across the call, which copies
        // them; the caller vouches for the arguments (see above).
        unsafe {
            sys::cuLaunchKernelEx(
                &raw const config,
                self.func.cu_function(),
                self.args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
            .result()
        }
    }
}
