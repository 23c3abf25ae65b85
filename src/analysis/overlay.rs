//! Draws an analysed frame with its overlays into an RGB picture (for `overlay.mp4` and
//! `--overlay` PNGs) with the default [`ComposeStyle`]: the frame's outputs become compose
//! layers (grey rasters are residues, colour rasters colour pictures, shapes shape layers) and
//! [`crate::compose::compose_cpu`] draws them.

use std::sync::Arc;

use crate::analysis::AnalysedFrame;
use crate::compose::{
    ComposeStyle, HostBase, HostLayers, HostRaster, PictureFormat, RasterLayer, ShapeLayer,
    compose_cpu,
};
use crate::image::Image;

pub use crate::compose::RASTER_ALPHA;

/// The compose layers of an analysed frame. Rasters not of the frame's size are left out.
#[must_use]
pub(crate) fn layers_of(frame: &AnalysedFrame) -> HostLayers {
    let base = match (&frame.rgb, &frame.gray) {
        (Some(rgb), _) => HostBase::Rgb(rgb.clone()),
        (None, Some(g)) => HostBase::Gray(g.clone()),
        (None, None) => HostBase::Gray(Arc::new(Image::new(frame.width, frame.height, 0))),
    };
    let size = frame.size();
    let mut rasters = Vec::new();
    let mut shapes = Vec::new();
    for o in &frame.outputs {
        let raster = match &o.layer.raster {
            Some(HostRaster::Residue(g)) if (g.width(), g.height()) == size => {
                Some(HostRaster::Residue(g.clone()))
            }
            Some(HostRaster::Colour(c)) if (c.width(), c.height()) == size => {
                Some(HostRaster::Colour(c.clone()))
            }
            Some(s @ HostRaster::Segments { .. }) => Some(s.clone()),
            Some(_) => {
                log::warn!(
                    "{}: overlay raster not of the frame's size, not drawn",
                    o.op
                );
                None
            }
            None => None,
        };
        if let Some(raster) = raster {
            rasters.push(RasterLayer { name: o.op, raster });
        }
        if !o.layer.shapes.is_empty() {
            shapes.push(ShapeLayer {
                name: o.op,
                shapes: Arc::new(o.layer.shapes.clone()),
            });
        }
    }
    HostLayers {
        base,
        rasters,
        shapes,
    }
}

/// The frame with every layer drawn over it.
#[must_use]
pub fn compose(frame: &AnalysedFrame) -> Image<[u8; 3]> {
    let picture = compose_cpu(
        &layers_of(frame),
        &ComposeStyle::default(),
        PictureFormat::Rgb,
    );
    match picture
        .as_ref()
        .ok()
        .and_then(crate::compose::Picture::to_rgb_image)
    {
        Some(img) => img,
        None => {
            if let Err(e) = picture {
                log::warn!("frame {}: overlays not drawn: {e}", frame.index);
            }
            match (&frame.rgb, &frame.gray) {
                (Some(rgb), _) => (**rgb).clone(),
                (None, Some(g)) => g.map(|g| [g, g, g]),
                (None, None) => Image::new(frame.width, frame.height, [0, 0, 0]),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{FrameTimings, Layer, OpData, OpOutput};
    use crate::compose::Shape;

    fn frame(raster: Option<HostRaster>, shapes: Vec<Shape>) -> AnalysedFrame {
        AnalysedFrame {
            index: 0,
            pts_nanos: None,
            width: 20,
            height: 20,
            gray: Some(Arc::new(Image::new(20, 20, 10u8))),
            rgb: None,
            picture: None,
            outputs: vec![OpOutput {
                op: "t",
                summary: serde_json::Value::Null,
                layer: Layer {
                    raster,
                    shapes,
                    device_raster: None,
                },
                data: OpData::None,
                ..Default::default()
            }],
            timings: FrameTimings::default(),
        }
    }

    #[test]
    fn draws_boxes_over_the_grey_frame() {
        let rect = Shape::Rect {
            left: 2.0,
            top: 2.0,
            width: 5.0,
            height: 5.0,
            color: [255, 0, 0, 255],
            label: Some("7".into()),
        };
        let img = compose(&frame(None, vec![rect]));
        assert_eq!(img.get(2, 2), [255, 0, 0]);
        assert_eq!(img.get(6, 6), [255, 0, 0]);
        assert_eq!(img.get(4, 4), [10, 10, 10]);
    }

    #[test]
    fn rasters_blend_as_before() {
        // A grey raster is a residue highlight, a colour raster is mixed at RASTER_ALPHA.
        let mut residue = Image::new(20, 20, 0u8);
        residue.set(3, 4, 200);
        let img = compose(&frame(
            Some(HostRaster::Residue(Arc::new(residue))),
            Vec::new(),
        ));
        assert_eq!(img.get(0, 0), [10, 10, 10]);
        // Peak alpha 230 of 255 (0.9): (10 * 25 + 255 * 230 + 127) / 255 = 231, then 208 and 1.
        assert_eq!(img.get(3, 4), [231, 208, 1]);
        let colour = Image::new(20, 20, [200u8, 100, 0]);
        let img = compose(&frame(
            Some(HostRaster::Colour(Arc::new(colour))),
            Vec::new(),
        ));
        assert_eq!(img.get(5, 5), [86, 46, 6]);
        // A raster of another size is left out rather than failing the frame.
        let img = compose(&frame(
            Some(HostRaster::Colour(Arc::new(Image::new(3, 3, [255u8; 3])))),
            Vec::new(),
        ));
        assert_eq!(img.get(1, 1), [10, 10, 10]);
    }
}
