//! Device layers read back as host ones: for a program that takes a frame's layers themselves
//! rather than a composed picture (Python's `morphoscope.open(..., layers=True)` on CUDA). Each
//! raster comes back as the CPU backend builds it ([`HostRaster`]), through page-locked buffers
//! kept between frames.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use super::layer::{DeviceRaster, HostRaster, SegmentCount};
use crate::gpu::{DeviceImage, Readback};
use crate::image::Image;
use crate::ops::OpError;

/// Reads device layers and grey frames back to the host.
#[derive(Debug)]
pub struct LayerReadback {
    bytes: Readback<u8>,
    labels: Readback<u32>,
}

impl LayerReadback {
    /// No buffers yet: the first frame allocates them.
    #[must_use]
    pub fn new(ctx: &Arc<CudaContext>) -> Self {
        Self {
            bytes: Readback::new(ctx),
            labels: Readback::new(ctx),
        }
    }

    /// A one-channel device image as a host image (waits for `stream`).
    pub fn gray(
        &mut self,
        stream: &Arc<CudaStream>,
        image: &DeviceImage<'_, u8>,
    ) -> Result<Image<u8>, OpError> {
        let (w, h) = (image.width, image.height);
        let data = self.bytes.fetch(stream, image.data, w * h)?;
        Ok(Image::from_vec(w, h, data)?)
    }

    /// `raster` of a `width` x `height` frame as the host raster of the same kind (waits for
    /// `stream`): a residue or colour picture of the frame's size, a segmentation's labels at
    /// their own size with the segment count read from the device where it stays there.
    pub fn raster(
        &mut self,
        stream: &Arc<CudaStream>,
        raster: &DeviceRaster<'_>,
        width: usize,
        height: usize,
    ) -> Result<HostRaster, OpError> {
        let n = width * height;
        Ok(match raster {
            DeviceRaster::Residue(r) => {
                let data = self.bytes.fetch(stream, r, n)?;
                HostRaster::Residue(Arc::new(Image::from_vec(width, height, data)?))
            }
            DeviceRaster::Colour(c) => {
                let data = self.bytes.fetch(stream, c, 3 * n)?;
                let rgb = data.as_chunks::<3>().0.to_vec();
                HostRaster::Colour(Arc::new(Image::from_vec(width, height, rgb)?))
            }
            DeviceRaster::Segments { segments, count } => {
                let (lw, lh) = (segments.label_width, segments.label_height);
                let labels = self.labels.fetch(stream, segments.labels, lw * lh)?;
                let count = match count {
                    SegmentCount::Host(n) => *n,
                    SegmentCount::Device(word) => self
                        .labels
                        .fetch(stream, word, 1)?
                        .first()
                        .map_or(0, |&c| c as usize),
                };
                HostRaster::Segments {
                    segments: segments.with_labels(Arc::new(Image::from_vec(lw, lh, labels)?)),
                    count,
                }
            }
        })
    }
}
