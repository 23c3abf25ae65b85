//! The compose step's definition, pixel by pixel, for tests: `get`/`set` on images, every
//! formula written out again with integers, and a property test that the CPU twin equals it on
//! random frames, layers, shapes, styles and formats. Only the shape expansion and the line
//! closed form are shared with the code under test (they have their own tests in `shapes.rs`).

use std::collections::HashMap;

use super::layer::{HostBase, HostLayers, HostRaster};
use super::shapes::{PRIM_RECT, Primitive, primitives};
use super::style::{ComposeStyle, LayerKind, ORIGINAL};
use super::{Picture, PictureFormat};
use crate::image::Image;
use crate::ops::segmentation::OverlayMode;
use crate::ops::segmentation::overlay::label_colour;

fn q(opacity: f32) -> u32 {
    if opacity.is_nan() {
        0
    } else {
        (opacity.clamp(0.0, 1.0) * 255.0).round() as u32
    }
}

fn put(img: &mut Image<[u8; 3]>, x: usize, y: usize, src: [u8; 3], a: u32, additive: bool) {
    let d = img.get(x, y);
    let mut out = [0u8; 3];
    for k in 0..3 {
        let (dk, sk) = (u32::from(d[k]), u32::from(src[k]));
        out[k] = if additive {
            (dk + (sk * a + 127) / 255).min(255)
        } else {
            (dk * (255 - a) + sk * a + 127) / 255
        } as u8;
    }
    img.set(x, y, out);
}

fn covers(p: &Primitive, x: i64, y: i64) -> bool {
    if p.flags & PRIM_RECT != 0 {
        (i64::from(p.x0)..=i64::from(p.x1)).contains(&x)
            && (i64::from(p.y0)..=i64::from(p.y1)).contains(&y)
    } else {
        (0..=p.steps()).any(|i| p.line_pixel(i) == (x, y))
    }
}

/// The picture of `layers` by the definition.
pub(crate) fn naive_compose(
    layers: &HostLayers,
    style: &ComposeStyle,
    format: PictureFormat,
) -> Picture {
    let (w, h) = layers.base.size();
    let base_style = style.style(ORIGINAL, LayerKind::Base);
    let base_alpha = if base_style.visible {
        q(base_style.opacity)
    } else {
        0
    };
    let mut img = Image::new(w, h, [0u8; 3]);
    for y in 0..h {
        for x in 0..w {
            let p = match &layers.base {
                HostBase::Rgb(i) => i.get(x, y),
                HostBase::Gray(i) => [i.get(x, y); 3],
            };
            put(&mut img, x, y, p, base_alpha, false);
        }
    }
    for layer in &layers.rasters {
        let st = style.style(layer.name, layer.raster.kind());
        if !st.visible {
            continue;
        }
        match &layer.raster {
            HostRaster::Residue(r) => {
                let peak = q(st.opacity * 0.9);
                for y in 0..h {
                    for x in 0..w {
                        let v = u32::from(r.get(x, y));
                        put(
                            &mut img,
                            x,
                            y,
                            [255, 230, 0],
                            ((4 * v).min(255) * peak + 127) / 255,
                            st.additive,
                        );
                    }
                }
            }
            HostRaster::Colour(c) => {
                for y in 0..h {
                    for x in 0..w {
                        put(&mut img, x, y, c.get(x, y), q(st.opacity), st.additive);
                    }
                }
            }
            HostRaster::Segments { segments: s, count } => {
                let (lw, lh) = (s.labels.width(), s.labels.height());
                let f = if (lw, lh) == (w, h) { 1 } else { s.factor };
                let label =
                    |x: usize, y: usize| s.labels.get((x / f).min(lw - 1), (y / f).min(lh - 1));
                let count = (*count).min(lw * lh) as u32;
                let mut sums: HashMap<u32, [u64; 4]> = HashMap::new();
                for y in 0..h {
                    for x in 0..w {
                        let p = match &layers.base {
                            HostBase::Rgb(i) => i.get(x, y),
                            HostBase::Gray(i) => [i.get(x, y); 3],
                        };
                        let e = sums.entry(label(x, y)).or_default();
                        for k in 0..3 {
                            e[k] += u64::from(p[k]);
                        }
                        e[3] += 1;
                    }
                }
                let fill = |l: u32| -> [u8; 3] {
                    if l >= count {
                        return [0; 3];
                    }
                    match s.fill {
                        OverlayMode::Random => label_colour(l),
                        OverlayMode::Mean => {
                            let e = sums.get(&l).copied().unwrap_or_default();
                            let n = e[3].max(1);
                            [0, 1, 2].map(|k| ((e[k] + n / 2) / n) as u8)
                        }
                    }
                };
                for y in 0..h {
                    for x in 0..w {
                        let l = label(x, y);
                        let edge = (x + 1 < w && label(x + 1, y) != l)
                            || (y + 1 < h && label(x, y + 1) != l);
                        let src = match s.boundary {
                            Some(b) if edge => b,
                            _ => fill(l),
                        };
                        put(&mut img, x, y, src, q(st.opacity), st.additive);
                    }
                }
            }
        }
    }
    let (pw, ph) = format.picture_size(w, h);
    let prims = primitives(&layers.shapes, style);
    for y in 0..ph {
        for x in 0..pw {
            if let Some(p) = prims.iter().rev().find(|p| covers(p, x as i64, y as i64)) {
                put(&mut img, x, y, p.rgb(), p.colour >> 24, p.additive());
            }
        }
    }
    let mut data = Vec::new();
    match format {
        PictureFormat::Rgb | PictureFormat::Rgba => {
            for y in 0..ph {
                for x in 0..pw {
                    data.extend_from_slice(&img.get(x, y));
                    if format == PictureFormat::Rgba {
                        data.push(255);
                    }
                }
            }
        }
        PictureFormat::I420 => data = naive_i420(&img, pw, ph),
    }
    Picture {
        format,
        width: pw,
        height: ph,
        data,
    }
}

/// I420 of the top-left `pw` x `ph` (even) pixels of `img`, pixel by pixel.
pub(crate) fn naive_i420(img: &Image<[u8; 3]>, pw: usize, ph: usize) -> Vec<u8> {
    let c = |p: [u8; 3]| p.map(i32::from);
    let mut data = Vec::new();
    for y in 0..ph {
        for x in 0..pw {
            let [r, g, b] = c(img.get(x, y));
            data.push((((66 * r + 129 * g + 25 * b + 128) >> 8) + 16) as u8);
        }
    }
    let mut u = Vec::new();
    let mut v = Vec::new();
    for by in 0..ph / 2 {
        for bx in 0..pw / 2 {
            let mut s = [0i32; 3];
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let p = c(img.get(2 * bx + dx, 2 * by + dy));
                for k in 0..3 {
                    s[k] += p[k];
                }
            }
            u.push((((-38 * s[0] - 74 * s[1] + 112 * s[2] + 512) >> 10) + 128) as u8);
            v.push((((112 * s[0] - 94 * s[1] - 18 * s[2] + 512) >> 10) + 128) as u8);
        }
    }
    data.extend(u);
    data.extend(v);
    data
}

#[cfg(test)]
mod proptests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::compose::Shape;
    use crate::compose::{LayerStyle, RasterLayer, Segments, ShapeLayer, compose_cpu};

    /// SplitMix64, so one seed makes a whole case.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        fn byte(&mut self) -> u8 {
            self.next() as u8
        }
        fn coord(&mut self, extent: usize) -> f32 {
            self.below(extent + 12) as f32 - 6.0 + self.below(4) as f32 * 0.25
        }
    }

    const NAMES: [&str; 5] = ["residue", "angles", "segments", "boxes", "extra"];

    /// A random case: frame, layers, shapes, style and format.
    pub fn case(w: usize, h: usize, seed: u64) -> (HostLayers, ComposeStyle, PictureFormat) {
        let mut r = Rng(seed);
        let base = if r.below(2) == 0 {
            HostBase::Rgb(Arc::new(Image::from_fn(w, h, |_, _| {
                [r.byte(), r.byte(), r.byte()]
            })))
        } else {
            HostBase::Gray(Arc::new(Image::from_fn(w, h, |_, _| r.byte())))
        };
        let mut rasters = Vec::new();
        for _ in 0..r.below(4) {
            let name = NAMES[r.below(NAMES.len())];
            let raster = match r.below(3) {
                0 => HostRaster::Residue(Arc::new(Image::from_fn(w, h, |_, _| {
                    if r.below(3) == 0 {
                        r.byte() >> r.below(8)
                    } else {
                        0
                    }
                }))),
                1 => HostRaster::Colour(Arc::new(Image::from_fn(w, h, |_, _| {
                    [r.byte(), r.byte(), r.byte()]
                }))),
                _ => {
                    let factor = 1 + r.below(3);
                    let (lw, lh) = (1 + r.below(w), 1 + r.below(h));
                    let kinds = 1 + r.below(6);
                    let labels = Arc::new(Image::from_fn(lw, lh, |_, _| r.below(kinds) as u32));
                    let fill = if r.below(3) == 0 {
                        OverlayMode::Random
                    } else {
                        OverlayMode::Mean
                    };
                    let boundary = (r.below(2) == 0).then(|| [r.byte(), r.byte(), r.byte()]);
                    let segments = Segments {
                        labels,
                        label_width: lw,
                        label_height: lh,
                        factor,
                        fill,
                        boundary,
                    };
                    HostRaster::Segments {
                        segments,
                        count: r.below(kinds + 2),
                    }
                }
            };
            rasters.push(RasterLayer { name, raster });
        }
        let mut shapes = Vec::new();
        for _ in 0..r.below(3) {
            let mut list = Vec::new();
            for _ in 0..r.below(4) {
                let color = [
                    r.byte(),
                    r.byte(),
                    r.byte(),
                    if r.below(2) == 0 { 255 } else { r.byte() },
                ];
                list.push(if r.below(2) == 0 {
                    let label = match r.below(3) {
                        0 => None,
                        1 => Some(r.below(1000).to_string()),
                        _ => Some("a1".to_owned()),
                    };
                    let (left, top) = (r.coord(w), r.coord(h) + 12.0 * r.below(2) as f32);
                    Shape::Rect {
                        left,
                        top,
                        width: r.below(9) as f32,
                        height: r.below(9) as f32,
                        color,
                        label,
                    }
                } else {
                    let points = (0..r.below(5)).map(|_| [r.coord(w), r.coord(h)]).collect();
                    Shape::Polyline { points, color }
                });
            }
            shapes.push(ShapeLayer {
                name: NAMES[r.below(NAMES.len())],
                shapes: Arc::new(list),
            });
        }
        let mut style = ComposeStyle::default();
        for name in NAMES.iter().chain(&[ORIGINAL]) {
            let opacity = [0.0, 0.2, 0.4, 0.5, 1.0, r.below(1000) as f32 / 999.0][r.below(6)];
            match r.below(5) {
                0 => {}
                1 => style.set(*name, LayerStyle::HIDDEN),
                2 | 3 => style.set(*name, LayerStyle::mixed(opacity)),
                _ => style.set(*name, LayerStyle::added(opacity)),
            }
        }
        let format = [PictureFormat::Rgb, PictureFormat::Rgba, PictureFormat::I420][r.below(3)];
        (
            HostLayers {
                base,
                rasters,
                shapes,
            },
            style,
            format,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn the_cpu_twin_is_the_definition(w in 1usize..14, h in 1usize..14, seed in any::<u64>()) {
            let (layers, style, format) = case(w, h, seed);
            let fast = compose_cpu(&layers, &style, format).unwrap();
            let slow = naive_compose(&layers, &style, format);
            prop_assert_eq!(fast, slow);
        }
    }
}
