//! Element-wise conversions of results that stay on the device (`kernels/convert.cu`), for a
//! caller that hands them to another library without a host copy (the Python package gives
//! CuPy and PyTorch their label images as `int64` or `int32` and the orientation map in
//! degrees). Each is exact and equals its host twin: `u32` labels widened with `i64::from`,
//! cast with `as i32`, and an index map looked up in a table of `f32` (an index past the table
//! gives 0, as [`super::orientation::OrientationOutput::angle_map_deg`]).
//!
//! Each call allocates its result on `stream` and enqueues one grid-stride kernel there; the
//! lookup's table (a few values) is uploaded on the same stream.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, PushKernelArg, ValidAsZeroBits};

use crate::gpu::{GpuContext, GpuError, launch};
use crate::ops::OpError;

/// Threads per block of the conversions.
const BLOCK: u32 = 256;

/// Checks that `src` holds `n` elements and that `n` fits the kernels' 32-bit count.
fn check_len<T>(src: &CudaSlice<T>, n: usize, what: &str) -> Result<u32, OpError> {
    if src.len() < n {
        return Err(OpError::Unsupported(format!(
            "{what}: {n} elements asked, the buffer holds {}",
            src.len()
        )));
    }
    u32::try_from(n).map_err(|_| {
        OpError::Gpu(GpuError::Unsupported(format!(
            "{what}: {n} elements exceed the kernels' 32-bit count"
        )))
    })
}

/// A new buffer of `n` elements on `stream` (at least one: kernels take a valid pointer).
fn output<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    n: usize,
    what: &str,
) -> Result<CudaSlice<T>, OpError> {
    Ok(launch::alloc_zeroed::<T>(stream, n, what, n, 1)?)
}

/// Enqueues `kernel(src, dst, n)` of module `convert` into a new buffer of `n` elements.
fn widen<D: DeviceRepr + ValidAsZeroBits>(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    src: &CudaSlice<u32>,
    n: usize,
    kernel: &str,
) -> Result<CudaSlice<D>, OpError> {
    let n32 = check_len(src, n, kernel)?;
    let f = gpu.function("convert", kernel)?;
    let mut dst = output::<D>(stream, n, "converted labels")?;
    if n > 0 {
        let mut b = stream.launch_builder(&f);
        b.arg(src).arg(&mut dst).arg(&n32);
        // SAFETY: grid-stride over i < n; src and dst hold at least n elements (checked above).
        unsafe { b.launch(launch::linear(n, BLOCK)) }.map_err(GpuError::from)?;
    }
    Ok(dst)
}

/// The first `n` labels of `labels` as signed 64-bit integers, in a new buffer on `stream`
/// (exact: `i64::from` of each).
pub fn labels_to_i64_gpu(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    labels: &CudaSlice<u32>,
    n: usize,
) -> Result<CudaSlice<i64>, OpError> {
    widen(gpu, stream, labels, n, "convert_u32_to_i64")
}

/// The first `n` labels of `labels` as signed 32-bit integers (the same bits: `as i32`), in a
/// new buffer on `stream`.
pub fn labels_to_i32_gpu(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    labels: &CudaSlice<u32>,
    n: usize,
) -> Result<CudaSlice<i32>, OpError> {
    widen(gpu, stream, labels, n, "convert_u32_to_i32")
}

/// `table[index[i]]` for the first `n` indices of `index` (0 for an index past the table), in
/// a new buffer on `stream`: e.g. an orientation's angle-index map in degrees.
pub fn lookup_f32_gpu(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    index: &CudaSlice<u16>,
    n: usize,
    table: &[f32],
) -> Result<CudaSlice<f32>, OpError> {
    let n32 = check_len(index, n, "convert_lookup_u16_f32")?;
    let entries = u32::try_from(table.len())
        .map_err(|_| OpError::InvalidParam(format!("a lookup table of {} entries", table.len())))?;
    let f = gpu.function("convert", "convert_lookup_u16_f32")?;
    let mut dst = output::<f32>(stream, n, "looked-up map")?;
    if n > 0 {
        // One zero entry stands in for an empty table (never read: every index is past it).
        let table_dev = if table.is_empty() {
            stream.clone_htod(&[0.0f32])
        } else {
            stream.clone_htod(table)
        }
        .map_err(GpuError::from)?;
        let mut b = stream.launch_builder(&f);
        b.arg(index)
            .arg(&table_dev)
            .arg(&entries)
            .arg(&mut dst)
            .arg(&n32);
        // SAFETY: grid-stride over i < n; index and dst hold at least n elements (checked
        // above); the kernel reads table[k] only for k < entries, the table's length.
        unsafe { b.launch(launch::linear(n, BLOCK)) }.map_err(GpuError::from)?;
    }
    Ok(dst)
}
