//! Small launch helpers shared by every op's GPU code.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, LaunchConfig, ValidAsZeroBits};

use super::error::GpuError;

/// Blocks of `block` threads needed to cover `n` items (at least 1).
#[must_use]
pub fn blocks_for(n: usize, block: u32) -> u32 {
    let b = block as usize;
    u32::try_from(n.div_ceil(b).max(1)).unwrap_or(u32::MAX)
}

/// A 1D launch over `n` items with `block` threads per block.
#[must_use]
pub fn linear(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks_for(n, block), 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 }
}

/// A 2D launch of `bx` x `by` blocks covering `width` x `height`.
#[must_use]
pub fn grid2d(width: usize, height: usize, bx: u32, by: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks_for(width, bx), blocks_for(height, by), 1),
        block_dim: (bx, by, 1),
        shared_mem_bytes: 0,
    }
}

/// Checks that a frame fits the kernels' 32-bit pixel indexing.
pub fn check_frame_size(width: usize, height: usize) -> Result<(), GpuError> {
    let n = width.checked_mul(height).ok_or_else(|| GpuError::Unsupported("size overflows".into()))?;
    if n >= (1usize << 31) {
        return Err(GpuError::Unsupported(format!("{width}x{height} has more than 2^31 pixels")));
    }
    Ok(())
}

/// Allocates `len` zeroed elements on `stream`, naming what and for which frame size on OOM.
pub fn alloc_zeroed<T: DeviceRepr + ValidAsZeroBits>(
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
pub fn upload_packed<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    data: &[T],
    width: usize,
    height: usize,
) -> Result<CudaSlice<T>, GpuError> {
    check_frame_size(width, height)?;
    if data.is_empty() {
        return alloc_zeroed::<T>(stream, 1, "input frame", width, height);
    }
    stream.clone_htod(data).map_err(|e| GpuError::from_alloc(e, "input frame", width, height, std::mem::size_of_val(data)))
}

/// Uploads the visible pixels of `img` packed (rows without their padding).
pub fn upload_image<T: DeviceRepr + ValidAsZeroBits + Copy>(
    stream: &Arc<CudaStream>,
    img: crate::image::ImageView<'_, T>,
) -> Result<CudaSlice<T>, GpuError> {
    let px: Vec<T> = img.rows().flat_map(|r| r.iter().copied()).collect();
    upload_packed(stream, &px, img.width(), img.height())
}
