//! Draws an analysed frame with its overlays into an RGB picture (for `overlay.mp4` and
//! `--overlay` PNGs): the colour (or grey) frame, each layer's raster alpha-blended, then each
//! layer's shapes (box outlines, polylines) with a 1-pixel pen. Labels are drawn with a tiny
//! built-in 3×5 digit font (track ids are numbers).

use crate::analysis::{AnalysedFrame, Raster, Shape};
use crate::image::Image;

/// Opacity of rasters over the frame.
pub const RASTER_ALPHA: f32 = 0.4;

/// The frame with every layer drawn over it.
#[must_use]
pub fn compose(frame: &AnalysedFrame) -> Image<[u8; 3]> {
    let mut out = match (&frame.rgb, &frame.gray) {
        (Some(rgb), _) => (**rgb).clone(),
        (None, Some(g)) => g.map(|g| [g, g, g]),
        (None, None) => Image::new(frame.width, frame.height, [0, 0, 0]),
    };
    for o in &frame.outputs {
        match &o.layer.raster {
            Some(Raster::Segments(s)) => {
                if let Some(pic) = segments_picture(frame, s) {
                    blend(&mut out, &Raster::Rgb(std::sync::Arc::new(pic)), RASTER_ALPHA);
                }
            }
            Some(r) => blend(&mut out, r, RASTER_ALPHA),
            None => {}
        }
        for s in &o.layer.shapes {
            draw_shape(&mut out, s);
        }
    }
    out
}

/// A segmentation layer drawn over the frame's own pixels (labels scaled back to the frame).
pub(crate) fn segments_picture(frame: &AnalysedFrame, s: &crate::analysis::SegmentsRaster) -> Option<Image<[u8; 3]>> {
    use crate::ops::segment::{SegmentOutput, overlay_segments_gray, overlay_segments_rgb, upsample_labels};
    let seg = SegmentOutput { labels: (*s.labels).clone(), segment_count: s.count, rounds: 0, min_size_rounds: 0, capped: false, level: 0, has_rounds: false };
    let seg = upsample_labels(seg, frame.width, frame.height, s.factor);
    match (&frame.rgb, &frame.gray) {
        (Some(rgb), _) => overlay_segments_rgb(rgb.view(), &seg, s.fill, s.boundary).ok(),
        (None, Some(g)) => overlay_segments_gray(g.view(), &seg, s.fill, s.boundary).ok(),
        (None, None) => None,
    }
}

/// Colour rasters are blended with a constant `alpha`. Grey rasters are residues (top-hats),
/// mostly zero: they are drawn as a yellow highlight whose opacity grows with the value
/// (stretched ×4), so the frame stays visible where the residue is zero.
fn blend(out: &mut Image<[u8; 3]>, r: &Raster, alpha: f32) {
    let (w, h) = (out.width(), out.height());
    for y in 0..h {
        for x in 0..w {
            let (src, a) = match r {
                Raster::Gray(g) if x < g.width() && y < g.height() => {
                    let v = f32::from(g.get(x, y));
                    ([255, 230, 0], (v * 4.0 / 255.0).min(1.0) * 0.9)
                }
                Raster::Rgb(c) if x < c.width() && y < c.height() => (c.get(x, y), alpha),
                Raster::Segments(_) => return,
                _ => continue,
            };
            let mix = |d: u8, s: u8| (f32::from(d) * (1.0 - a) + f32::from(s) * a).round() as u8;
            let d = out.get(x, y);
            out.set(x, y, [mix(d[0], src[0]), mix(d[1], src[1]), mix(d[2], src[2])]);
        }
    }
}

fn put(out: &mut Image<[u8; 3]>, x: i64, y: i64, c: [u8; 4]) {
    if x >= 0 && y >= 0 && (x as usize) < out.width() && (y as usize) < out.height() {
        let a = f32::from(c[3]) / 255.0;
        let d = out.get(x as usize, y as usize);
        let m = |dst: u8, src: u8| (f32::from(dst) * (1.0 - a) + f32::from(src) * a).round() as u8;
        out.set(x as usize, y as usize, [m(d[0], c[0]), m(d[1], c[1]), m(d[2], c[2])]);
    }
}

fn line(out: &mut Image<[u8; 3]>, a: [f32; 2], b: [f32; 2], c: [u8; 4]) {
    let (mut x0, mut y0) = (a[0].round() as i64, a[1].round() as i64);
    let (x1, y1) = (b[0].round() as i64, b[1].round() as i64);
    let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
    let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
    let mut err = dx + dy;
    let mut guard = 0;
    loop {
        put(out, x0, y0, c);
        if (x0 == x1 && y0 == y1) || guard > 100_000 {
            break;
        }
        guard += 1;
        let e2 = 2 * err;
        if e2 >= dy {
            err += dy;
            x0 += sx;
        }
        if e2 <= dx {
            err += dx;
            y0 += sy;
        }
    }
}

/// 3×5 glyphs for 0-9, rows top to bottom, 3 bits a row.
const DIGITS: [[u8; 5]; 10] = [
    [7, 5, 5, 5, 7],
    [2, 6, 2, 2, 7],
    [7, 1, 7, 4, 7],
    [7, 1, 7, 1, 7],
    [5, 5, 7, 1, 1],
    [7, 4, 7, 1, 7],
    [7, 4, 7, 5, 7],
    [7, 1, 2, 2, 2],
    [7, 5, 7, 5, 7],
    [7, 5, 7, 1, 7],
];

fn text(out: &mut Image<[u8; 3]>, x: i64, y: i64, s: &str, c: [u8; 4]) {
    let scale = 2;
    let mut cx = x;
    for ch in s.chars() {
        if let Some(d) = ch.to_digit(10) {
            for (row, bits) in DIGITS[d as usize].iter().enumerate() {
                for col in 0..3 {
                    if bits & (4 >> col) != 0 {
                        for sy in 0..scale {
                            for sx in 0..scale {
                                put(out, cx + col * scale + sx, y + row as i64 * scale + sy, c);
                            }
                        }
                    }
                }
            }
        }
        cx += 4 * scale;
    }
}

fn draw_shape(out: &mut Image<[u8; 3]>, s: &Shape) {
    match s {
        Shape::Rect { left, top, width, height, color, label } => {
            // Two-pixel outline (the inner pixel inside the box) so boxes read on busy frames.
            for inset in [0.0, 1.0] {
                let (l, t, r, b) = (left + inset, top + inset, left + width - 1.0 - inset, top + height - 1.0 - inset);
                line(out, [l, t], [r, t], *color);
                line(out, [r, t], [r, b], *color);
                line(out, [r, b], [l, b], *color);
                line(out, [l, b], [l, t], *color);
            }
            let l = *left;
            let t = *top;
            if let Some(label) = label {
                text(out, l as i64, t as i64 - 12, label, *color);
            }
        }
        Shape::Polyline { points, color } => {
            for w in points.windows(2) {
                line(out, w[0], w[1], *color);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::analysis::{FrameTimings, Layer, OpData, OpOutput};

    #[test]
    fn draws_boxes_over_the_grey_frame() {
        let gray = Arc::new(Image::new(20, 20, 10u8));
        let f = AnalysedFrame {
            index: 0,
            pts_nanos: None,
            width: 20,
            height: 20,
            gray: Some(gray),
            rgb: None,
            picture: None,
            outputs: vec![OpOutput {
                op: "t",
                summary: serde_json::Value::Null,
                layer: Layer {
                    raster: None,
                    shapes: vec![Shape::Rect { left: 2.0, top: 2.0, width: 5.0, height: 5.0, color: [255, 0, 0, 255], label: Some("7".into()) }],
                },
                data: OpData::None,
                ..Default::default()
            }],
            timings: FrameTimings::default(),
        };
        let img = compose(&f);
        assert_eq!(img.get(2, 2), [255, 0, 0]);
        assert_eq!(img.get(6, 6), [255, 0, 0]);
        assert_eq!(img.get(4, 4), [10, 10, 10]);
    }
}
