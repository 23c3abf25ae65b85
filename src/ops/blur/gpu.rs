//! CUDA Gaussian blur (`kernels/blur.cu`): a vertical pass from the packed `u8` frame to an
//! `f32` scratch buffer, then a horizontal pass to the output buffer, both over interleaved
//! samples (1 or 3 channels). The kernel weights travel by value in the launch parameters
//! (`BlurWeightsF32`), so changing `sigma` needs no upload and no host synchronisation.
//! No tuning: one thread per sample in 32x8 blocks (a warp along a row) on every device.

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DeviceRepr, PushKernelArg, ValidAsZeroBits,
};

use super::cpu::INV255_F32;
use super::{BlurParams, MAX_RADIUS};
use crate::gpu::launch::{alloc_zeroed, check_frame_size, grid2d};
use crate::gpu::{DeviceImage, GpuContext, GpuError, HostPixel, KernelTimer, round_trip};
use crate::image::ImageView;
use crate::ops::OpError;

/// A half kernel passed by value to the blur kernels: `w[0..=radius]`, centre first, zero beyond
/// `radius`. Keep in sync with `BlurWeightsF32` (`f32`) and `BlurWeightsF64` in `kernels/blur.cu`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlurWeights<T> {
    /// The weights, centre first.
    pub half: [T; MAX_RADIUS + 1],
    /// Kernel radius.
    pub radius: i32,
    pad: [i32; 3],
}

/// The `f32` weights of the 8-bit blur.
pub(crate) type BlurWeightsF32 = BlurWeights<f32>;
/// The `f64` weights of the segmentation's blur (scikit-image's arithmetic).
pub(crate) type BlurWeightsF64 = BlurWeights<f64>;

const _: () = assert!(std::mem::size_of::<BlurWeightsF32>() == 528);
const _: () = assert!(std::mem::size_of::<BlurWeightsF64>() == 1040);

// SAFETY: plain-old-data, `#[repr(C)]`, layouts asserted above and in blur.cu.
unsafe impl DeviceRepr for BlurWeightsF32 {}
// SAFETY: as above.
unsafe impl DeviceRepr for BlurWeightsF64 {}

impl<T: Copy + Default> BlurWeights<T> {
    fn from_half(k: &[T]) -> Self {
        let mut half = [T::default(); MAX_RADIUS + 1];
        half[..k.len()].copy_from_slice(k);
        Self {
            half,
            radius: k.len().saturating_sub(1) as i32,
            pad: [0; 3],
        }
    }
}

impl BlurWeightsF32 {
    /// The weights of validated `params`, rounded to `f32`.
    pub fn new(params: &BlurParams) -> Result<Self, OpError> {
        params.validate()?;
        Ok(Self::from_half(&params.half_kernel_f32()))
    }
}

impl BlurWeightsF64 {
    /// The weights of validated `params`.
    pub fn new(params: &BlurParams) -> Result<Self, OpError> {
        params.validate()?;
        Ok(Self::from_half(&params.half_kernel_f64()))
    }
}

/// A blurred frame read back from the device.
#[derive(Clone, Debug, PartialEq)]
pub struct BlurOutput {
    /// Pixels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Samples per pixel (1 or 3).
    pub channels: usize,
    /// Packed interleaved samples in `[0, 1]`.
    pub data: Vec<f32>,
}

/// The two passes at one precision: kernels and the scratch/output buffers of one frame size.
struct Passes<T: DeviceRepr> {
    vertical: CudaFunction,
    horizontal: CudaFunction,
    tmp: Option<CudaSlice<T>>,
    out: Option<CudaSlice<T>>,
}

impl<T: DeviceRepr + ValidAsZeroBits> Passes<T>
where
    BlurWeights<T>: DeviceRepr,
{
    fn new(gpu: &GpuContext, vertical: &str, horizontal: &str) -> Result<Self, OpError> {
        Ok(Self {
            vertical: gpu.function("blur", vertical)?,
            horizontal: gpu.function("blur", horizontal)?,
            tmp: None,
            out: None,
        })
    }

    /// Enqueues both passes over the interleaved samples of `input` (checked by the caller),
    /// timing them under `regions` (one name: both in one region).
    fn enqueue(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, u8>,
        weights: &BlurWeights<T>,
        inv255: T,
        regions: &[&'static str],
    ) -> Result<(), OpError> {
        let DeviceImage {
            stream,
            data: input,
            width,
            height,
            channels,
        } = input;
        let samples = width * height * channels;
        if self.out.as_ref().is_none_or(|b| b.len() != samples.max(1)) {
            self.tmp = None;
            self.out = None;
            self.tmp = Some(alloc_zeroed::<T>(
                stream,
                samples,
                "blur scratch",
                width,
                height,
            )?);
            self.out = Some(alloc_zeroed::<T>(
                stream,
                samples,
                "blur output",
                width,
                height,
            )?);
        }
        if samples == 0 {
            return Ok(());
        }
        let (Some(tmp), Some(out)) = (self.tmp.as_mut(), self.out.as_mut()) else {
            return Ok(());
        };
        let row = (width * channels) as u32;
        let (w, h, c) = (width as u32, height as u32, channels as u32);
        let cfg = grid2d(width * channels, height, 32, 8);
        let (vertical, horizontal) = (&self.vertical, &self.horizontal);
        let pass_v = |tmp: &mut CudaSlice<T>| -> Result<(), GpuError> {
            let mut l = stream.launch_builder(vertical);
            l.arg(input)
                .arg(tmp)
                .arg(weights)
                .arg(&row)
                .arg(&h)
                .arg(&inv255);
            // SAFETY: one thread per sample, bounded by (row, height) in the kernel; input holds
            // row * height bytes (checked by the caller), tmp as many samples.
            unsafe { l.launch(cfg) }?;
            Ok(())
        };
        let pass_h = |tmp: &CudaSlice<T>, out: &mut CudaSlice<T>| -> Result<(), GpuError> {
            let mut l = stream.launch_builder(horizontal);
            l.arg(tmp).arg(out).arg(weights).arg(&w).arg(&h).arg(&c);
            // SAFETY: as above; reflected column indices stay inside the row.
            unsafe { l.launch(cfg) }?;
            Ok(())
        };
        match regions {
            [both] => timer.time(stream, both, || {
                pass_v(tmp)?;
                pass_h(tmp, out)
            })?,
            [first, second, ..] => {
                timer.time(stream, first, || pass_v(tmp))?;
                timer.time(stream, second, || pass_h(tmp, out))?;
            }
            [] => return Err(OpError::InvalidParam("blur: no timer region".into())),
        }
        Ok(())
    }
}

/// GPU Gaussian blur with buffers for one frame size.
pub struct BlurGpu {
    f32: Passes<f32>,
    f64: Passes<f64>,
    /// (width, height, channels) of the last `f32` blur.
    produced: Option<(usize, usize, usize)>,
    /// Samples of the last `f64` blur.
    produced_f64: usize,
}

impl std::fmt::Debug for BlurGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlurGpu")
            .field("produced", &self.produced)
            .field("produced_f64", &self.produced_f64)
            .finish_non_exhaustive()
    }
}

impl BlurGpu {
    /// Resolves the kernels (buffers are allocated on the first frame).
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        Ok(Self {
            f32: Passes::new(gpu, "blur_vertical", "blur_horizontal")?,
            f64: Passes::new(gpu, "blur_vertical_f64", "blur_horizontal_f64")?,
            produced: None,
            produced_f64: 0,
        })
    }

    /// Enqueues the blur of a packed grey or interleaved RGB image (timer regions
    /// `blur_vertical`, `blur_horizontal`).
    pub fn enqueue(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, u8>,
        params: &BlurParams,
    ) -> Result<(), OpError> {
        check_input(input.data, input.width, input.height, input.channels)?;
        let weights = BlurWeightsF32::new(params)?;
        self.produced = Some((input.width, input.height, input.channels));
        self.f32.enqueue(
            timer,
            input,
            &weights,
            INV255_F32,
            &["blur_vertical", "blur_horizontal"],
        )
    }

    /// Enqueues the `f64` blur (scikit-image's arithmetic, what the segmentation uses) of a
    /// packed grey or interleaved RGB image into `BlurGpu::output_f64`, both passes timed as
    /// `region`.
    pub fn enqueue_f64_named(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, u8>,
        params: &BlurParams,
        region: &'static str,
    ) -> Result<(), OpError> {
        check_input(input.data, input.width, input.height, input.channels)?;
        let weights = BlurWeightsF64::new(params)?;
        self.produced_f64 = input.samples();
        self.f64
            .enqueue(timer, input, &weights, 1.0 / 255.0, &[region])
    }

    /// The device buffer holding the last `f64` blur (packed interleaved).
    #[must_use]
    pub(crate) fn output_f64(&self) -> Option<&CudaSlice<f64>> {
        self.f64.out.as_ref()
    }

    /// Blocking readback of the last `f64` blur (packed interleaved).
    pub fn download_f64(&self, stream: &Arc<CudaStream>) -> Result<Vec<f64>, OpError> {
        let samples = self.produced_f64;
        let data = match self.f64.out.as_ref() {
            Some(b) if samples > 0 && b.len() >= samples => {
                stream.clone_dtoh(&b.slice(0..samples))?
            }
            _ => Vec::new(),
        };
        stream.synchronize()?;
        Ok(data)
    }

    /// The device buffer holding the last blurred frame (packed interleaved `f32`).
    #[must_use]
    pub fn output(&self) -> Option<&CudaSlice<f32>> {
        self.f32.out.as_ref()
    }

    /// Blocking readback of the last enqueued frame.
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<BlurOutput, OpError> {
        let Some((width, height, channels)) = self.produced else {
            return Err(OpError::InvalidParam("download before any enqueue".into()));
        };
        let n = width * height * channels;
        let data = match self.f32.out.as_ref() {
            Some(b) if n > 0 => stream.clone_dtoh(&b.slice(0..n))?,
            _ => Vec::new(),
        };
        stream.synchronize()?;
        Ok(BlurOutput {
            width,
            height,
            channels,
            data,
        })
    }
}

/// Uploads a grey or RGB image, blurs it on the GPU and downloads the result (packed
/// interleaved samples): the parity tests.
pub fn blur_gpu<P: HostPixel<Sample = u8>>(
    gpu: &GpuContext,
    img: ImageView<'_, P>,
    params: &BlurParams,
) -> Result<BlurOutput, OpError> {
    round_trip(
        &gpu.new_stream()?,
        img,
        &mut BlurGpu::new(gpu)?,
        |op, timer, input| op.enqueue(timer, input, params),
        |op, stream| op.download(stream),
    )
}

/// Checks that `input` holds a `width` x `height` frame of 1 or 3 interleaved channels.
pub(crate) fn check_input(
    input: &CudaSlice<u8>,
    width: usize,
    height: usize,
    channels: usize,
) -> Result<(), OpError> {
    if channels != 1 && channels != 3 {
        return Err(OpError::Unsupported(format!(
            "blur needs 1 or 3 channels, got {channels}"
        )));
    }
    check_frame_size(width * channels, height)?;
    let samples = width * height * channels;
    if input.len() < samples {
        return Err(OpError::Unsupported(format!(
            "input holds {} bytes, {width}x{height}x{channels} needs {samples}",
            input.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_padded_with_zeros() {
        let w = BlurWeightsF32::new(&BlurParams::with_sigma(0.8)).unwrap();
        assert_eq!(w.radius, 3);
        assert!(w.half[4..].iter().all(|&v| v == 0.0));
        assert!(BlurWeightsF32::new(&BlurParams::with_sigma(-1.0)).is_err());
    }
}
