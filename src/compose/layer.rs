//! The layers of a frame as the compose step takes them: on the host ([`HostLayers`], holding
//! `Arc`s so a frame's outputs clone cheaply) and on the device ([`DeviceRasterLayer`],
//! borrowing the buffers the analyses' GPU stages own). Shapes are host data on both paths:
//! [`ShapeLayer`]s are expanded into primitives and uploaded per frame.
//!
//! Every raster is frame-sized except segments, whose label image may be a downscaled frame's:
//! frame pixel `(x, y)` takes label `labels[min(y/f, lh-1) * lw + min(x/f, lw-1)]`, exactly
//! [`crate::ops::segmentation::upsample_labels`] (a label image of the frame's own size is used as it
//! is, whatever the factor).

use std::sync::Arc;

use cudarc::driver::CudaSlice;

use super::ComposeError;
use super::shapes::Shape;
use super::style::LayerKind;
use crate::image::Image;
use crate::ops::segmentation::OverlayMode;

/// The frame under the layers.
#[derive(Clone, Debug)]
pub enum HostBase {
    /// A colour frame.
    Rgb(Arc<Image<[u8; 3]>>),
    /// A grey frame, drawn as grey.
    Gray(Arc<Image<u8>>),
}

impl HostBase {
    /// Width and height.
    #[must_use]
    pub fn size(&self) -> (usize, usize) {
        match self {
            Self::Rgb(i) => (i.width(), i.height()),
            Self::Gray(i) => (i.width(), i.height()),
        }
    }
}

/// How many labels of a segmentation are segments: labels `0..count` are filled, any label at
/// or above `count` is drawn black (boundaries still see it).
#[derive(Clone, Copy, Debug)]
pub enum SegmentCount<'a> {
    /// Known on the host.
    Host(usize),
    /// Element 0 of a device buffer (the segmentation's info word), read by the kernels: nothing
    /// is read back. The per-label tables are then sized for the most labels the label image
    /// can hold (`lw * lh`: 36 bytes a label).
    Device(&'a CudaSlice<u32>),
}

/// A segmentation as a layer: labels (dense, `0..count` in raster order) and how to fill them.
#[derive(Clone, Debug)]
pub struct Segments<L> {
    /// The label image: `Arc<Image<u32>>` on the host, a `&CudaSlice<u32>` of
    /// `label_width * label_height` packed labels on the device.
    pub labels: L,
    /// Label image width.
    pub label_width: usize,
    /// Label image height.
    pub label_height: usize,
    /// Integer upsampling factor from the label image to the frame (at least 1).
    pub factor: usize,
    /// Mean colour of the frame's own pixels in each segment, or a random colour per label.
    pub fill: OverlayMode,
    /// Colour of the pixels whose right or lower neighbour has another label; `None`: none.
    pub boundary: Option<[u8; 3]>,
}

impl<L> Segments<L> {
    /// The same segmentation with other labels (e.g. a host layer's labels once uploaded).
    #[must_use]
    pub fn with_labels<M>(&self, labels: M) -> Segments<M> {
        Segments {
            labels,
            label_width: self.label_width,
            label_height: self.label_height,
            factor: self.factor,
            fill: self.fill,
            boundary: self.boundary,
        }
    }

    /// The factor the labels are upsampled with for a `width` x `height` frame: 1 when the label
    /// image has the frame's size (as `upsample_labels`, which returns such labels unchanged).
    #[must_use]
    pub(crate) fn effective_factor(&self, width: usize, height: usize) -> usize {
        if (self.label_width, self.label_height) == (width, height) {
            1
        } else {
            self.factor.max(1)
        }
    }

    /// Checks the label image against a `width` x `height` frame.
    pub(crate) fn check(
        &self,
        name: &str,
        labels_len: usize,
        width: usize,
        height: usize,
    ) -> Result<(), ComposeError> {
        let err = |what: String| {
            Err(ComposeError::Layer {
                layer: name.to_owned(),
                what,
            })
        };
        let (lw, lh) = (self.label_width, self.label_height);
        if width * height > 0 && (lw == 0 || lh == 0) {
            return err(format!(
                "empty label image ({lw}x{lh}) for a {width}x{height} frame"
            ));
        }
        if labels_len < lw * lh {
            return err(format!(
                "label image {lw}x{lh} needs {} labels, holds {labels_len}",
                lw * lh
            ));
        }
        if lw > width.max(1) || lh > height.max(1) {
            return err(format!(
                "label image {lw}x{lh} larger than the {width}x{height} frame"
            ));
        }
        Ok(())
    }
}

/// A raster layer on the host.
#[derive(Clone, Debug)]
pub enum HostRaster {
    /// A frame-sized residue (max-tree top-hat), drawn as a highlight
    /// (`super::style::RESIDUE_COLOUR`) whose alpha grows with the value.
    Residue(Arc<Image<u8>>),
    /// A frame-sized colour picture (orientation map).
    Colour(Arc<Image<[u8; 3]>>),
    /// A segmentation.
    Segments {
        /// Labels and fill.
        segments: Segments<Arc<Image<u32>>>,
        /// Labels `0..count` are segments (see [`SegmentCount`]).
        count: usize,
    },
}

impl HostRaster {
    /// The layer's kind (for its default style).
    #[must_use]
    pub fn kind(&self) -> LayerKind {
        match self {
            Self::Residue(_) => LayerKind::Residue,
            Self::Colour(_) => LayerKind::Colour,
            Self::Segments { .. } => LayerKind::Segments,
        }
    }
}

/// A named raster layer on the host (`name` keys its style).
#[derive(Clone, Debug)]
pub struct RasterLayer {
    /// Analysis name.
    pub name: &'static str,
    /// What it draws.
    pub raster: HostRaster,
}

/// A named list of shapes (boxes, polylines) in frame coordinates.
#[derive(Clone, Debug)]
pub struct ShapeLayer {
    /// Analysis name.
    pub name: &'static str,
    /// The shapes, drawn in order (a later one covers an earlier one).
    pub shapes: Arc<Vec<Shape>>,
}

/// Everything drawn into one frame's picture, on the host.
#[derive(Clone, Debug)]
pub struct HostLayers {
    /// The frame.
    pub base: HostBase,
    /// Raster layers, drawn in order over the frame.
    pub rasters: Vec<RasterLayer>,
    /// Shape layers, drawn in order over the rasters.
    pub shapes: Vec<ShapeLayer>,
}

/// A raster layer on the device: buffers owned by an analysis' GPU stage, packed rows, ready
/// for the compose stream when the compose is enqueued (cudarc's per-buffer events order the
/// stream that wrote them before it).
#[derive(Clone, Copy, Debug)]
pub enum DeviceRaster<'a> {
    /// `width * height` residue values.
    Residue(&'a CudaSlice<u8>),
    /// `width * height` RGB pixels, 3 bytes each.
    Colour(&'a CudaSlice<u8>),
    /// A segmentation.
    Segments {
        /// Labels (`label_width * label_height` packed) and fill.
        segments: Segments<&'a CudaSlice<u32>>,
        /// Where the segment count is.
        count: SegmentCount<'a>,
    },
}

impl DeviceRaster<'_> {
    /// The layer's kind (for its default style).
    #[must_use]
    pub fn kind(&self) -> LayerKind {
        match self {
            Self::Residue(_) => LayerKind::Residue,
            Self::Colour(_) => LayerKind::Colour,
            Self::Segments { .. } => LayerKind::Segments,
        }
    }
}

impl<L: Copy> Copy for Segments<L> {}

/// A named raster layer on the device.
#[derive(Clone, Copy, Debug)]
pub struct DeviceRasterLayer<'a> {
    /// Analysis name.
    pub name: &'static str,
    /// What it draws.
    pub raster: DeviceRaster<'a>,
}
