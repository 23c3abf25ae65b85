//! Images on the device. A [`DeviceImage`] is what every op's GPU code takes as its input: a
//! packed buffer (`width * height * channels` samples, rows without padding), its size and
//! channel count, and the stream its work is ordered on. It replaces the
//! `(stream, input, width, height, channels)` parameter lists the ops used to repeat.
//!
//! [`upload_view`] and [`HostPixel`] are the one upload path for host images (the CLI's `image`
//! command and the parity tests); the ring fills its own buffers and wraps them with
//! [`DeviceImage::new`]. [`round_trip`] is the one upload → enqueue → download path every op's
//! one-shot wrapper (`maxtree_gpu`, `cca_gpu`, `orientation_gpu`, `blur_gpu`, …) is made of.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};

use super::error::GpuError;
use super::launch;
use super::timer::KernelTimer;
use crate::image::ImageView;

/// A packed image on the device, borrowed for the duration of an enqueue.
pub struct DeviceImage<'a, T: DeviceRepr> {
    /// The stream every kernel reading this image is launched on.
    pub stream: &'a Arc<CudaStream>,
    /// `width * height * channels` samples, channel-interleaved, rows packed.
    pub data: &'a CudaSlice<T>,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Samples per pixel (1 grey, 3 RGB).
    pub channels: usize,
}

impl<T: DeviceRepr> Clone for DeviceImage<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: DeviceRepr> Copy for DeviceImage<'_, T> {}

impl<T: DeviceRepr> std::fmt::Debug for DeviceImage<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceImage")
            .field("width", &self.width)
            .field("height", &self.height)
            .field("channels", &self.channels)
            .finish()
    }
}

impl<'a, T: DeviceRepr> DeviceImage<'a, T> {
    /// Wraps `data`; fails when the size overflows the kernels' 32-bit indexing or the buffer
    /// holds fewer than `width * height * channels` samples.
    pub fn new(
        stream: &'a Arc<CudaStream>,
        data: &'a CudaSlice<T>,
        width: usize,
        height: usize,
        channels: usize,
    ) -> Result<Self, GpuError> {
        let image = Self {
            stream,
            data,
            width,
            height,
            channels,
        };
        image.check(channels, "device image")?;
        Ok(image)
    }

    /// Checks what an op's kernels rely on: `channels` samples a pixel, rows of samples within
    /// the kernels' 32-bit indexing, and a buffer that holds the image (the fields are public,
    /// so an op checks the image it is given). `op` names the op in the error.
    pub fn check(&self, channels: usize, op: &str) -> Result<(), GpuError> {
        if self.channels != channels {
            return Err(GpuError::Unsupported(format!(
                "{op} takes {channels} channel(s) a pixel, the image has {}",
                self.channels
            )));
        }
        let row = self.width.checked_mul(channels).ok_or_else(|| {
            GpuError::Unsupported(format!(
                "{op}: {} x {channels} samples overflow",
                self.width
            ))
        })?;
        launch::check_frame_size(row, self.height)?;
        if self.data.len() < self.samples() {
            return Err(GpuError::Unsupported(format!(
                "{op}: a {}x{}x{channels} image needs {} samples, its buffer holds {}",
                self.width,
                self.height,
                self.samples(),
                self.data.len()
            )));
        }
        Ok(())
    }

    /// Pixels (`width * height`).
    #[must_use]
    pub fn pixels(&self) -> usize {
        self.width * self.height
    }

    /// Samples (`width * height * channels`).
    #[must_use]
    pub fn samples(&self) -> usize {
        self.pixels() * self.channels
    }

    /// The same image on another stream (its buffer must be ready for that stream's work).
    #[must_use]
    pub fn on(self, stream: &'a Arc<CudaStream>) -> Self {
        Self { stream, ..self }
    }
}

/// A host pixel type that uploads as `CHANNELS` samples of `Sample`.
pub trait HostPixel: Copy {
    /// The device sample type.
    type Sample: DeviceRepr + ValidAsZeroBits + Copy;
    /// Samples per pixel.
    const CHANNELS: usize;
    /// Appends the pixel's samples.
    fn push_samples(self, out: &mut Vec<Self::Sample>);
}

macro_rules! scalar_pixel {
    ($($t:ty),*) => {$(
        impl HostPixel for $t {
            type Sample = $t;
            const CHANNELS: usize = 1;
            fn push_samples(self, out: &mut Vec<$t>) {
                out.push(self);
            }
        }
    )*};
}
scalar_pixel!(u8, u16, f32);

impl HostPixel for [u8; 3] {
    type Sample = u8;
    const CHANNELS: usize = 3;
    fn push_samples(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self);
    }
}

/// An owned upload of a host image: the device buffer and its size.
pub struct Uploaded<T: DeviceRepr> {
    /// The stream it was uploaded on.
    pub stream: Arc<CudaStream>,
    /// The packed samples.
    pub data: CudaSlice<T>,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Samples per pixel.
    pub channels: usize,
}

impl<T: DeviceRepr> Uploaded<T> {
    /// The uploaded image as a [`DeviceImage`] on its stream.
    #[must_use]
    pub fn image(&self) -> DeviceImage<'_, T> {
        DeviceImage {
            stream: &self.stream,
            data: &self.data,
            width: self.width,
            height: self.height,
            channels: self.channels,
        }
    }
}

/// Uploads the visible pixels of `img` packed (rows without their padding) on `stream`. Copy:
/// the rows are gathered into one host vector first.
pub fn upload_view<P: HostPixel>(
    stream: &Arc<CudaStream>,
    img: ImageView<'_, P>,
) -> Result<Uploaded<P::Sample>, GpuError> {
    let mut samples = Vec::with_capacity(img.width() * img.height() * P::CHANNELS);
    for row in img.rows() {
        for &p in row {
            p.push_samples(&mut samples);
        }
    }
    let data = launch::upload_packed(stream, &samples, img.width(), img.height())?;
    Ok(Uploaded {
        stream: stream.clone(),
        data,
        width: img.width(),
        height: img.height(),
        channels: P::CHANNELS,
    })
}

/// One host image through an op on the device: uploads `img` on `stream` ([`upload_view`]),
/// runs `enqueue(op, timer, image)` with a fresh [`KernelTimer`], then returns
/// `download(op, stream)` (a blocking readback). The upload is freed when this returns (in
/// stream order, so after the work that reads it).
pub fn round_trip<P, Op, R, E>(
    stream: &Arc<CudaStream>,
    img: ImageView<'_, P>,
    op: &mut Op,
    enqueue: impl FnOnce(&mut Op, &mut KernelTimer, DeviceImage<'_, P::Sample>) -> Result<(), E>,
    download: impl FnOnce(&Op, &Arc<CudaStream>) -> Result<R, E>,
) -> Result<R, E>
where
    P: HostPixel,
    E: From<GpuError>,
{
    let input = upload_view(stream, img)?;
    let mut timer = KernelTimer::new();
    enqueue(op, &mut timer, input.image())?;
    download(op, stream)
}
