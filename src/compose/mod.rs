//! Composing a frame and its overlay layers into one picture, on the host ([`cpu`]) or on the
//! device ([`gpu`], `kernels/compose.cu`), bit for bit the same on both.
//!
//! A frame's picture is drawn in a fixed order: the *base* (the frame itself, colour or grey),
//! then each *raster* layer in the order given (a max-tree *residue*, an orientation *colour*
//! map, a segmentation's *segments* filled with their mean or a random colour, with
//! boundaries), then every *shape* layer (boxes with track ids, trails), expanded on the host
//! into a short list of *primitives* (line segments and filled rectangles) of which the last
//! one covering a pixel wins. Each layer is drawn with the [`LayerStyle`] of its analysis
//! ([`ComposeStyle`], keyed by the analysis name; `"original"` for the base): hidden, mixed
//! (`dst*(1-a) + src*a`) or added (`dst + src*a`, clamped) with an opacity `a`.
//!
//! All arithmetic is on integers: opacities are quantised to `0..=255` once on the host
//! ([`style`]), pixels are blended with `pixel::mix` / [`pixel::add`], segment means are
//! rounded integer divisions, and line pixels have a closed form ([`shapes`]). That is what
//! makes the CPU and GPU pictures identical, which the parity tests check byte for byte.
//!
//! The picture comes out as RGBA (the viewer), RGB (PNG files) or I420 (the video encoder,
//! BT.601 limited range, `pixel::luma` and [`pixel::chroma`]; odd sizes cropped to even).

pub mod cpu;
pub mod gpu;
pub mod layer;
pub mod pixel;
pub mod readback;
pub mod shapes;
pub mod style;

#[cfg(test)]
mod naive;
#[cfg(test)]
mod tests;

use thiserror::Error;

use crate::gpu::GpuError;

pub use cpu::compose_cpu;
pub use gpu::{ComposeGpu, ComposeTuning};
pub use layer::{
    DeviceRaster, DeviceRasterLayer, HostBase, HostLayers, HostRaster, RasterLayer, SegmentCount,
    Segments, ShapeLayer,
};
pub use readback::LayerReadback;
pub use shapes::Shape;
pub use style::{ComposeStyle, LayerKind, LayerStyle, ORIGINAL, RASTER_ALPHA};

/// Errors of the compose step.
#[derive(Debug, Error)]
pub enum ComposeError {
    /// A layer's picture is not the size its kind needs.
    #[error("layer `{layer}`: {what}")]
    Layer {
        /// The layer's analysis name.
        layer: String,
        /// What is wrong with it (sizes expected and found).
        what: String,
    },
    /// More raster layers than the compose kernel takes.
    #[error("{count} raster layers to compose, at most {max}")]
    TooManyLayers {
        /// Raster layers given.
        count: usize,
        /// The kernel's limit (`gpu::MAX_RASTERS`).
        max: usize,
    },
    /// The GPU failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

impl From<cudarc::driver::DriverError> for ComposeError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Self::Gpu(GpuError::Driver(e))
    }
}

/// The pixel layout of a composed picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PictureFormat {
    /// 4 bytes a pixel, R G B A, alpha 255 (the viewer's textures).
    Rgba,
    /// 3 bytes a pixel, R G B (PNG files).
    Rgb,
    /// Planar YUV 4:2:0 for the video encoder: the Y plane (`width * height` bytes), then U and
    /// V (`width/2 * height/2` bytes each), every plane packed without row padding; BT.601
    /// limited range. The picture is the frame cropped to even sizes (an odd last column or row
    /// is left out).
    I420,
}

impl PictureFormat {
    /// The picture's size for a `width` x `height` frame (I420 crops to even sizes).
    #[must_use]
    pub(crate) fn picture_size(self, width: usize, height: usize) -> (usize, usize) {
        match self {
            Self::Rgba | Self::Rgb => (width, height),
            Self::I420 => (width & !1, height & !1),
        }
    }

    /// Bytes of a `width` x `height` picture (a size [`PictureFormat::picture_size`] returned).
    #[must_use]
    pub(crate) fn byte_len(self, width: usize, height: usize) -> usize {
        match self {
            Self::Rgba => width * height * 4,
            Self::Rgb => width * height * 3,
            Self::I420 => width * height + 2 * (width / 2) * (height / 2),
        }
    }
}

/// A composed picture on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    /// Pixel layout of `data`.
    pub format: PictureFormat,
    /// Width in pixels (even for I420).
    pub width: usize,
    /// Height in pixels (even for I420).
    pub height: usize,
    /// The bytes, `format.byte_len(width, height)` of them.
    pub data: Vec<u8>,
}

impl Picture {
    /// An RGB picture as an image; `None` for the other formats. Copy: the bytes are regrouped
    /// into pixels.
    #[must_use]
    pub(crate) fn to_rgb_image(&self) -> Option<crate::image::Image<[u8; 3]>> {
        if self.format != PictureFormat::Rgb {
            return None;
        }
        let px = self.data.as_chunks::<3>().0.to_vec();
        crate::image::Image::from_vec(self.width, self.height, px).ok()
    }
}
