//! The CUDA twin of [`super::nv12_to_rgb`] (`kernels/nv12.cu`): one thread per output pixel,
//! reading the planes from raw device addresses with their pitches (a decoder's buffers, which
//! are not `CudaSlice`s) and writing packed RGB. No tuning: 32x8 blocks (a warp along a row) on
//! every device.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, PushKernelArg};

use super::Nv12Conversion;
use crate::gpu::{GpuContext, launch};
use crate::image::Image;
use crate::ops::OpError;

/// Device addresses and pitches of an NV12 frame's planes, e.g. a decoder's CUDA buffers.
#[derive(Clone, Copy, Debug)]
pub struct Nv12Planes {
    /// The Y plane: rows of `width` luma bytes.
    pub y: u64,
    /// Bytes between the starts of two Y rows.
    pub y_pitch: usize,
    /// The UV plane: rows of `ceil(width / 2)` interleaved U, V pairs.
    pub uv: u64,
    /// Bytes between the starts of two UV rows.
    pub uv_pitch: usize,
}

/// Arguments of `nv12_to_rgb` besides the buffers (keep in sync with `Nv12Params` of
/// `kernels/nv12.cu`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Nv12Params {
    y: i32,
    r_v: i32,
    g_u: i32,
    g_v: i32,
    b_u: i32,
    h_cosited: u32,
    v_cosited: u32,
    band_rows: u32,
}

const _: () = assert!(size_of::<Nv12Params>() == 32);
// SAFETY: plain-old-data, `#[repr(C)]`, layout asserted above and in nv12.cu.
unsafe impl DeviceRepr for Nv12Params {}

/// Enqueues [`super::nv12_to_rgb`] of the frame at `planes` on `stream`: `rgb` receives
/// `height` rows of `3 * width` bytes, packed.
///
/// # Safety
///
/// `planes.y` must address `(height - 1) * y_pitch + width` bytes and `planes.uv`
/// `(ceil(height / 2) - 1) * uv_pitch + 2 * ceil(width / 2)` bytes of device memory usable in
/// `gpu`'s context, holding the frame from the moment the kernel runs on `stream` until it
/// ends: the caller orders the writes of the frame before this call's work on `stream` and any
/// reuse of the buffers after it (an event, a synchronisation).
pub(crate) unsafe fn enqueue_nv12_to_rgb(
    gpu: &GpuContext,
    stream: &Arc<CudaStream>,
    planes: &Nv12Planes,
    conv: &Nv12Conversion,
    rgb: &mut CudaSlice<u8>,
    width: usize,
    height: usize,
) -> Result<(), OpError> {
    launch::check_frame_size(width, height)?;
    if width == 0 || height == 0 {
        return Ok(());
    }
    if planes.y_pitch < width || planes.uv_pitch < 2 * width.div_ceil(2) {
        return Err(OpError::InvalidParam(format!(
            "NV12 pitches {} and {} are too small for a width of {width}",
            planes.y_pitch, planes.uv_pitch
        )));
    }
    if rgb.len() < 3 * width * height {
        return Err(OpError::InvalidParam(format!(
            "RGB buffer of {} bytes too small for {width}x{height}",
            rgb.len()
        )));
    }
    let c = conv.coefficients();
    let band_rows = u32::try_from(conv.band_rows(height))
        .map_err(|_| OpError::Unsupported(format!("{height} rows exceed 32 bits")))?;
    let params = Nv12Params {
        y: c.y,
        r_v: c.r_v,
        g_u: c.g_u,
        g_v: c.g_v,
        b_u: c.b_u,
        h_cosited: u32::from(conv.h_cosited),
        v_cosited: u32::from(conv.v_cosited),
        band_rows,
    };
    let f = gpu.function("nv12", "nv12_to_rgb")?;
    let (w, h) = (width as u32, height as u32);
    let (y_pitch, uv_pitch) = (planes.y_pitch as u64, planes.uv_pitch as u64);
    let mut b = stream.launch_builder(&f);
    b.arg(&planes.y)
        .arg(&y_pitch)
        .arg(&planes.uv)
        .arg(&uv_pitch)
        .arg(rgb)
        .arg(&w)
        .arg(&h)
        .arg(&params);
    // SAFETY: the planes cover the frame at their pitches (this function's contract, pitches
    // checked above), `rgb` holds 3 * width * height bytes (checked above); the kernel reads
    // luma (x, y), chroma rows <= (height - 1) / 2 and pairs <= (width - 1) / 2, writes pixel
    // (x, y) only, and bounds-checks x < width, y < height.
    unsafe { b.launch(launch::grid2d(width, height, 32, 8)) }?;
    Ok(())
}

/// [`super::nv12_to_rgb`] on the GPU for host planes (upload, kernel, download): the parity
/// tests.
#[allow(clippy::too_many_arguments)]
pub fn nv12_to_rgb_gpu(
    gpu: &GpuContext,
    y_plane: &[u8],
    y_stride: usize,
    uv_plane: &[u8],
    uv_stride: usize,
    width: usize,
    height: usize,
    conv: &Nv12Conversion,
) -> Result<Image<[u8; 3]>, OpError> {
    super::plane_views(y_plane, y_stride, uv_plane, uv_stride, width, height)?;
    launch::check_frame_size(width, height)?;
    if width == 0 || height == 0 {
        return Ok(Image::new(width, height, [0; 3]));
    }
    let stream = gpu.new_stream()?;
    // The planes are copied as they are, row padding included.
    let y_dev = stream.clone_htod(y_plane)?;
    let uv_dev = stream.clone_htod(uv_plane)?;
    let n = 3 * width * height;
    let mut rgb = launch::alloc_zeroed::<u8>(&stream, n, "RGB frame", width, height)?;
    {
        let (y, _y_read) = y_dev.device_ptr(&stream);
        let (uv, _uv_read) = uv_dev.device_ptr(&stream);
        let planes = Nv12Planes {
            y,
            y_pitch: y_stride,
            uv,
            uv_pitch: uv_stride,
        };
        // SAFETY: `y_dev` and `uv_dev` hold the host planes, checked above to cover the frame
        // at these strides, were written on `stream` before the launch and are freed after the
        // readback below, which waits for the kernel.
        unsafe { enqueue_nv12_to_rgb(gpu, &stream, &planes, conv, &mut rgb, width, height) }?;
    }
    let bytes = stream.clone_dtoh(&rgb.slice(0..n))?;
    stream.synchronize()?;
    let (pixels, _) = bytes.as_chunks::<3>();
    Ok(Image::from_vec(width, height, pixels.to_vec())?)
}
