//! Synthetic analysed frames with every kind of output (grey and colour rasters, boxes with
//! labels, trails, tracks, a spectrum, timings), for the viewer's headless tests and for trying
//! the UI without a source. Frame `i` moves its blobs, so a sequence of frames has tracks, trails
//! and a timing history. Each frame comes with its picture composed by the CPU twin of the
//! compose kernel in the viewer's default look, as the pipeline composes it for the viewer;
//! [`on_device`] gives the same frame as the GPU backend delivers it (no host rasters).
//! Deterministic: no clock, no randomness.

use std::sync::Arc;

use crate::analysis::overlay::layers_of;
use crate::analysis::{AnalysedFrame, FrameTimings, Layer, OpData, OpOutput, TrackInfo};
use crate::compose::{ComposeStyle, HostRaster, PictureFormat, Shape, compose_cpu};
use crate::image::Image;

/// Frame width of the canned frames.
pub(crate) const WIDTH: usize = 320;
/// Frame height of the canned frames.
pub(crate) const HEIGHT: usize = 240;
/// Frame rate the canned tracks' velocities (pixels per second) assume.
const CANNED_FPS: f32 = 25.0;

struct Blob {
    id: u64,
    x: f32,
    y: f32,
    w: f32,
    h: f32,
    vx: f32,
    vy: f32,
}

fn blobs(i: u64) -> Vec<Blob> {
    let t = i as f32;
    vec![
        Blob {
            id: 3,
            x: 40.0 + 2.0 * t,
            y: 60.0,
            w: 22.0,
            h: 48.0,
            vx: 2.0,
            vy: 0.0,
        },
        Blob {
            id: 7,
            x: 150.0,
            y: 130.0 - 1.5 * t,
            w: 18.0,
            h: 40.0,
            vx: 0.0,
            vy: -1.5,
        },
        Blob {
            id: 12,
            x: 230.0 - t,
            y: 150.0 + 0.5 * t,
            w: 26.0,
            h: 52.0,
            vx: -1.0,
            vy: 0.5,
        },
    ]
}

fn inside(b: &Blob, x: f32, y: f32) -> bool {
    x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + b.h
}

/// Stripes at 45° in the upper-right quarter: where the orientation map lights up.
fn stripes(x: usize, y: usize) -> Option<u8> {
    (x > 200 && y < 90).then(|| {
        if ((x + y) / 6).is_multiple_of(2) {
            200
        } else {
            60
        }
    })
}

/// The hue colour of an angle (0..180°) at strength `v` (0..1).
fn hsv(angle_deg: f32, v: f32) -> [u8; 3] {
    let c = eframe::egui::ecolor::Hsva::new(angle_deg / 180.0, 1.0, v, 1.0).to_srgb();
    [c[0], c[1], c[2]]
}

/// Canned frame number `index`.
#[must_use]
pub fn canned_frame(index: u64) -> AnalysedFrame {
    let bl = blobs(index);
    let rgb = scene_rgb(&bl);
    let gray = rgb.map(crate::image::rgb_to_gray_pixel);
    let (shapes, tracks) = boxes_and_tracks(&bl, index);
    let frame = AnalysedFrame {
        index,
        pts_nanos: Some(index * 33_333_333),
        width: gray.width(),
        height: gray.height(),
        gray: Some(Arc::new(gray)),
        rgb: Some(Arc::new(rgb)),
        picture: None,
        outputs: vec![
            output(
                crate::analysis::preprocess::DESCRIPTOR.name,
                None,
                vec![],
                OpData::None,
                serde_json::json!({ "mean_gray": 92.4, "min_gray": 31, "max_gray": 235 }),
            ),
            output(
                crate::analysis::maxtree::DESCRIPTOR.name,
                Some(HostRaster::Residue(Arc::new(residue(&bl)))),
                vec![],
                OpData::None,
                serde_json::json!({ "nodes": 1832, "kept": 3 }),
            ),
            output(
                crate::analysis::cca::DESCRIPTOR.name,
                None,
                shapes,
                OpData::Tracks(tracks),
                serde_json::json!({ "components": 3, "tracks": 3 }),
            ),
            output(
                crate::analysis::orientation::DESCRIPTOR.name,
                Some(HostRaster::Colour(Arc::new(orientation_map()))),
                vec![],
                OpData::Spectrum(spectrum()),
                serde_json::json!({ "dominant_deg": 45.0 }),
            ),
            output(
                crate::analysis::segmentation::DESCRIPTOR.name,
                Some(HostRaster::Colour(Arc::new(segments(&bl)))),
                vec![],
                OpData::None,
                serde_json::json!({ "segments": 7 }),
            ),
        ],
        timings: timings(index),
    };
    with_picture(frame, &super::layers::default_style())
}

/// The scene's colour picture: light blobs, the stripes, a gradient sky and darker ground.
fn scene_rgb(bl: &[Blob]) -> Image<[u8; 3]> {
    Image::from_fn(WIDTH, HEIGHT, |x, y| {
        let (xf, yf) = (x as f32, y as f32);
        if bl.iter().any(|b| inside(b, xf, yf)) {
            return [235, 225, 200];
        }
        if let Some(s) = stripes(x, y) {
            return [s, s, s.saturating_add(20)];
        }
        let g = 50 + (x * 60 / WIDTH) as u8 + (y * 40 / HEIGHT) as u8;
        if y > 190 {
            [g / 2 + 30, g / 2 + 50, g / 2 + 20]
        } else {
            [g, g + 10, g + 25]
        }
    })
}

/// The max-tree filter's residue: the blobs bright, nothing else.
fn residue(bl: &[Blob]) -> Image<u8> {
    Image::from_fn(WIDTH, HEIGHT, |x, y| {
        if bl.iter().any(|b| inside(b, x as f32, y as f32)) {
            220
        } else {
            0
        }
    })
}

/// The orientation map: the stripes' 45° hue, a weaker 0° on the ground.
fn orientation_map() -> Image<[u8; 3]> {
    Image::from_fn(WIDTH, HEIGHT, |x, y| match stripes(x, y) {
        Some(_) => hsv(45.0, 0.9),
        None if y > 190 => hsv(0.0, 0.5),
        None => [0, 0, 0],
    })
}

/// The segmentation's mean colours: blobs, stripes, ground and the sky's two halves.
fn segments(bl: &[Blob]) -> Image<[u8; 3]> {
    Image::from_fn(WIDTH, HEIGHT, |x, y| {
        if bl.iter().any(|b| inside(b, x as f32, y as f32)) {
            [230, 220, 196]
        } else if stripes(x, y).is_some() {
            [130, 130, 150]
        } else if y > 190 {
            [62, 82, 52]
        } else if x < WIDTH / 2 {
            [70, 80, 95]
        } else {
            [90, 100, 115]
        }
    })
}

/// Each blob's labelled box and trail (the tracking layer's shapes) and its track.
fn boxes_and_tracks(bl: &[Blob], index: u64) -> (Vec<Shape>, Vec<TrackInfo>) {
    let mut shapes = Vec::new();
    let mut tracks = Vec::new();
    for b in bl {
        let color = match b.id {
            3 => [80, 220, 255, 255],
            7 => [255, 120, 80, 255],
            _ => [160, 255, 120, 255],
        };
        shapes.push(Shape::Rect {
            left: b.x,
            top: b.y,
            width: b.w,
            height: b.h,
            color,
            label: Some(b.id.to_string()),
        });
        let trail: Vec<[f32; 2]> = (0..8)
            .map(|k| {
                let k = k as f32 * 3.0;
                [b.x + b.w / 2.0 - b.vx * k, b.y + b.h / 2.0 - b.vy * k]
            })
            .collect();
        shapes.push(Shape::Polyline {
            points: trail,
            color,
        });
        tracks.push(TrackInfo {
            id: b.id,
            age: index + b.id,
            area: (b.w * b.h) as u64,
            position: [b.x + b.w / 2.0, b.y + b.h / 2.0],
            velocity: [b.vx * CANNED_FPS, b.vy * CANNED_FPS],
            bbox: [b.x, b.y, b.w, b.h],
        });
    }
    (shapes, tracks)
}

/// The orientation spectrum: a peak at 45° (the stripes) and a bump at 90°.
fn spectrum() -> Vec<(f32, f64)> {
    (0..12)
        .map(|k| {
            let a = k as f32 * 15.0;
            let d = ((a - 45.0 + 90.0).rem_euclid(180.0) - 90.0) / 30.0;
            (
                a,
                1.0e5 * (0.15 + (-(d * d)).exp() as f64) + if a == 90.0 { 4.0e4 } else { 0.0 },
            )
        })
        .collect()
}

/// Frame `index`'s timings: a region per analysis kernel that wobbles from frame to frame, so
/// that the timing history has a shape.
fn timings(index: u64) -> FrameTimings {
    let wobble = |k: f64| 1.0 + 0.15 * ((index as f64) * 0.7 + k).sin();
    let regions: Vec<(String, f64)> = [
        ("preprocess_rgb_to_gray", 0.05),
        ("maxtree_build", 1.20),
        ("maxtree_filter", 0.30),
        ("cca_label", 0.40),
        ("cca_features", 0.20),
        ("orientation_openings", 2.10),
        ("segment_boruvka", 3.00),
    ]
    .iter()
    .enumerate()
    .map(|(k, (n, v))| ((*n).to_owned(), v * wobble(k as f64)))
    .collect();
    let compute_ms = regions.iter().map(|(_, v)| v).sum::<f64>();
    FrameTimings {
        backend: "cuda",
        regions,
        upload_ms: 0.08,
        download_ms: 0.42,
        queue_wait_ms: 0.10,
        latency_ms: compute_ms + 1.9,
        compute_ms,
    }
}

/// One analysis's output with its host raster and shapes (no device raster).
fn output(
    op: &'static str,
    raster: Option<HostRaster>,
    shapes: Vec<Shape>,
    data: OpData,
    summary: serde_json::Value,
) -> OpOutput {
    OpOutput {
        op,
        summary,
        layer: Layer {
            raster,
            shapes,
            device_raster: None,
        },
        data,
        ..Default::default()
    }
}

/// `frame` with its picture composed from its host layers in `style` (RGBA, as the viewer asks
/// for it); without a picture if the layers cannot be composed.
#[must_use]
pub(crate) fn with_picture(mut frame: AnalysedFrame, style: &ComposeStyle) -> AnalysedFrame {
    frame.picture = compose_cpu(&layers_of(&frame), style, PictureFormat::Rgba)
        .ok()
        .map(Arc::new);
    frame
}

/// `frame` as the GPU backend delivers it: the same picture, but no grey frame on the host and
/// each host raster replaced by the note that its layer is on the device.
#[must_use]
pub fn on_device(mut frame: AnalysedFrame) -> AnalysedFrame {
    frame.gray = None;
    for o in &mut frame.outputs {
        if let Some(r) = o.layer.raster.take() {
            o.layer.device_raster = Some(r.kind());
        }
    }
    frame
}

/// A frame with one output of an op the viewer has never heard of (a grey raster and a box), to
/// show that unknown ops still get a layer.
#[must_use]
pub fn unknown_op_frame(index: u64) -> AnalysedFrame {
    let mut f = canned_frame(index);
    f.outputs.truncate(1);
    let ring = Image::from_fn(WIDTH, HEIGHT, |x, y| {
        let (dx, dy) = (x as f32 - 160.0, y as f32 - 120.0);
        let r = (dx * dx + dy * dy).sqrt();
        if (60.0..70.0).contains(&r) { 255 } else { 0 }
    });
    f.outputs.push(OpOutput {
        op: "future_op",
        summary: serde_json::json!({ "rings": 1 }),
        layer: Layer {
            raster: Some(HostRaster::Residue(Arc::new(ring))),
            shapes: vec![Shape::Rect {
                left: 90.0,
                top: 50.0,
                width: 140.0,
                height: 140.0,
                color: [255, 0, 255, 255],
                label: Some("1".into()),
            }],
            device_raster: None,
        },
        data: OpData::None,
        ..Default::default()
    });
    with_picture(f, &super::layers::default_style())
}
