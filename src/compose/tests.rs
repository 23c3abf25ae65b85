//! Unit tests of the CPU twin on tiny hand-made frames: each layer kind, each style, shapes,
//! odd sizes and formats, the segment fill against the segmentation's own overlay, and an
//! ignored timing at 1080p and 4K (`cargo test --release --lib compose::tests::bench -- --ignored
//! --nocapture`).

use std::sync::Arc;

use super::naive::naive_i420;
use super::*;
use crate::compose::Shape;
use crate::image::Image;
use crate::ops::segmentation::OverlayMode;
use crate::ops::segmentation::overlay::label_colour;

fn rgb_frame(w: usize, h: usize) -> HostBase {
    HostBase::Rgb(Arc::new(Image::from_fn(w, h, |x, y| {
        [(10 + 40 * x) as u8, (20 + 30 * y) as u8, (x * y) as u8]
    })))
}

fn only_base(base: HostBase) -> HostLayers {
    HostLayers {
        base,
        rasters: Vec::new(),
        shapes: Vec::new(),
    }
}

fn with_raster(base: HostBase, name: &'static str, raster: HostRaster) -> HostLayers {
    HostLayers {
        base,
        rasters: vec![RasterLayer { name, raster }],
        shapes: Vec::new(),
    }
}

fn rgb(layers: &HostLayers, style: &ComposeStyle) -> Image<[u8; 3]> {
    let p = compose_cpu(layers, style, PictureFormat::Rgb).unwrap();
    p.to_rgb_image().unwrap()
}

fn mix(d: u8, s: u8, a: u32) -> u8 {
    ((u32::from(d) * (255 - a) + u32::from(s) * a + 127) / 255) as u8
}

#[test]
fn the_base_is_the_frame_with_its_style() {
    let layers = only_base(rgb_frame(3, 2));
    let HostBase::Rgb(frame) = &layers.base else {
        unreachable!()
    };
    let p = compose_cpu(&layers, &ComposeStyle::default(), PictureFormat::Rgb).unwrap();
    assert_eq!((p.width, p.height), (3, 2));
    assert_eq!(
        p.data,
        frame.data().iter().flatten().copied().collect::<Vec<u8>>()
    );
    let p = compose_cpu(&layers, &ComposeStyle::default(), PictureFormat::Rgba).unwrap();
    assert_eq!(&p.data[4..8], &[50, 20, 0, 255]);
    let hidden = ComposeStyle::default().with(ORIGINAL, LayerStyle::HIDDEN);
    assert!(
        compose_cpu(&layers, &hidden, PictureFormat::Rgb)
            .unwrap()
            .data
            .iter()
            .all(|&b| b == 0)
    );
    // Half opacity over black, mixed or added alike.
    for half in [LayerStyle::mixed(0.5), LayerStyle::added(0.5)] {
        let img = rgb(&layers, &ComposeStyle::default().with(ORIGINAL, half));
        assert_eq!(
            img.get(2, 1),
            [mix(0, 90, 128), mix(0, 50, 128), mix(0, 2, 128)]
        );
    }
    let grey = only_base(HostBase::Gray(Arc::new(
        Image::from_vec(2, 1, vec![7u8, 200]).unwrap(),
    )));
    assert_eq!(
        rgb(&grey, &ComposeStyle::default()).data(),
        &[[7; 3], [200; 3]]
    );
}

#[test]
fn residues_glow_with_their_value() {
    let residue = Arc::new(Image::from_vec(4, 1, vec![0u8, 10, 64, 255]).unwrap());
    let base = HostBase::Gray(Arc::new(Image::new(4, 1, 100u8)));
    let layers = with_raster(base, "residue", HostRaster::Residue(residue));
    let img = rgb(&layers, &ComposeStyle::default());
    let peak = u32::from(style::quantise(style::RESIDUE_PEAK));
    let a10 = (40 * peak + 127) / 255;
    assert_eq!(img.get(0, 0), [100; 3]);
    assert_eq!(
        img.get(1, 0),
        [mix(100, 255, a10), mix(100, 230, a10), mix(100, 0, a10)]
    );
    assert_eq!(
        img.get(2, 0),
        [mix(100, 255, peak), mix(100, 230, peak), mix(100, 0, peak)]
    );
    assert_eq!(img.get(3, 0), img.get(2, 0));
    // Additive at full opacity: the frame plus the highlight, clamped; opacity 0 or hidden: nothing.
    let added = rgb(
        &layers,
        &ComposeStyle::default().with("residue", LayerStyle::added(1.0)),
    );
    assert_eq!(added.get(2, 0), [255, 255, 100]);
    for off in [LayerStyle::mixed(0.0), LayerStyle::HIDDEN] {
        assert_eq!(
            rgb(&layers, &ComposeStyle::default().with("residue", off)).data(),
            &[[100; 3]; 4]
        );
    }
}

#[test]
fn colour_layers_mix_or_add_in_order() {
    let base = HostBase::Rgb(Arc::new(Image::new(2, 2, [100u8, 150, 200])));
    let red = HostRaster::Colour(Arc::new(Image::new(2, 2, [255u8, 0, 0])));
    let blue = HostRaster::Colour(Arc::new(Image::new(2, 2, [0u8, 0, 255])));
    let layers = HostLayers {
        base,
        rasters: vec![
            RasterLayer {
                name: "a",
                raster: red,
            },
            RasterLayer {
                name: "b",
                raster: blue,
            },
        ],
        shapes: Vec::new(),
    };
    let opaque = ComposeStyle::default()
        .with("a", LayerStyle::mixed(1.0))
        .with("b", LayerStyle::mixed(1.0));
    assert_eq!(
        rgb(&layers, &opaque).get(1, 1),
        [0, 0, 255],
        "the later layer is on top"
    );
    let default = rgb(&layers, &ComposeStyle::default()).get(0, 0);
    let first = [mix(100, 255, 102), mix(150, 0, 102), mix(200, 0, 102)];
    assert_eq!(
        default,
        [
            mix(first[0], 0, 102),
            mix(first[1], 0, 102),
            mix(first[2], 255, 102)
        ]
    );
    let added = ComposeStyle::default()
        .with("a", LayerStyle::added(1.0))
        .with("b", LayerStyle::HIDDEN);
    assert_eq!(rgb(&layers, &added).get(0, 1), [255, 150, 200]);
    let none = ComposeStyle::default()
        .with("a", LayerStyle::added(0.0))
        .with("b", LayerStyle::mixed(0.0));
    assert_eq!(rgb(&layers, &none).get(1, 0), [100, 150, 200]);
}

fn segments(
    labels: Image<u32>,
    factor: usize,
    fill: OverlayMode,
    boundary: Option<[u8; 3]>,
) -> Segments<Arc<Image<u32>>> {
    let (label_width, label_height) = (labels.width(), labels.height());
    Segments {
        labels: Arc::new(labels),
        label_width,
        label_height,
        factor,
        fill,
        boundary,
    }
}

#[test]
fn segments_take_their_mean_colour_upsampled() {
    // 5x3 frame, labels 2x1 at factor 3: columns 0-2 label 1, 3-4 label 0 (x / 3, clamped).
    let frame = Image::from_fn(5, 3, |x, y| [(x * 10 + y) as u8, 100, 7]);
    let labels = Image::from_vec(2, 1, vec![1u32, 0]).unwrap();
    let base = HostBase::Rgb(Arc::new(frame));
    let seg = |boundary| HostRaster::Segments {
        segments: segments(labels.clone(), 3, OverlayMode::Mean, boundary),
        count: 2,
    };
    let opaque = ComposeStyle::default().with("segments", LayerStyle::mixed(1.0));
    let img = rgb(&with_raster(base.clone(), "segments", seg(None)), &opaque);
    // r = 10 x + y. Label 1 (x 0..=2, 9 pixels): sum 99, (99 + 4) / 9 = 11; label 0: 216 / 6 = 36.
    assert_eq!(img.get(0, 0), [11, 100, 7]);
    assert_eq!(img.get(2, 2), [11, 100, 7]);
    assert_eq!(img.get(3, 1), [36, 100, 7]);
    let img = rgb(
        &with_raster(base.clone(), "segments", seg(Some([1, 2, 3]))),
        &opaque,
    );
    assert_eq!(img.get(2, 0), [1, 2, 3], "left of another label: boundary");
    assert_eq!(img.get(1, 2), [11, 100, 7]);
    assert_eq!(img.get(4, 2), [36, 100, 7]);
    // Default opacity mixes the fill; labels at or above the count are black.
    let img = rgb(
        &with_raster(base.clone(), "segments", seg(None)),
        &ComposeStyle::default(),
    );
    assert_eq!(img.get(0, 0), [mix(0, 11, 102), 100, 7]);
    let few = HostRaster::Segments {
        segments: segments(labels.clone(), 3, OverlayMode::Mean, None),
        count: 1,
    };
    assert_eq!(
        rgb(&with_raster(base.clone(), "segments", few), &opaque).get(0, 0),
        [0, 0, 0]
    );
    let random = HostRaster::Segments {
        segments: segments(labels, 3, OverlayMode::Random, None),
        count: 2,
    };
    let img = rgb(&with_raster(base, "segments", random), &opaque);
    assert_eq!(
        (img.get(0, 0), img.get(4, 0)),
        (label_colour(1), label_colour(0))
    );
}

#[test]
fn segments_equal_the_segmentation_overlay() {
    use crate::ops::segmentation::{
        SegmentationParams, felzenszwalb_rgb, overlay_segments_gray, overlay_segments_rgb,
        upsample_labels,
    };
    let img = Image::from_fn(41, 29, |x, y| {
        [(x * 6) as u8, (y * 8) as u8, ((x * y) % 256) as u8]
    });
    let gray = img.map(|p| p[1]);
    let params = SegmentationParams {
        min_size: 5,
        ..SegmentationParams::default()
    };
    let opaque = ComposeStyle::default().with("segments", LayerStyle::mixed(1.0));
    for factor in [1, 2] {
        let small = Image::from_fn(41 / factor, 29 / factor, |x, y| {
            img.get(x * factor, y * factor)
        });
        let seg = felzenszwalb_rgb(small.view(), &params).unwrap();
        assert!(seg.segment_count > 1);
        let big = upsample_labels(seg.clone(), 41, 29, factor);
        for mode in [OverlayMode::Mean, OverlayMode::Random] {
            for boundary in [None, Some([255, 255, 0])] {
                let layer = |base: HostBase| {
                    let raster = HostRaster::Segments {
                        segments: segments(seg.labels.clone(), factor, mode, boundary),
                        count: seg.segment_count,
                    };
                    with_raster(base, "segments", raster)
                };
                let want = overlay_segments_rgb(img.view(), &big, mode, boundary).unwrap();
                assert_eq!(
                    rgb(&layer(HostBase::Rgb(Arc::new(img.clone()))), &opaque),
                    want,
                    "rgb, factor {factor}"
                );
                let want = overlay_segments_gray(gray.view(), &big, mode, boundary).unwrap();
                assert_eq!(
                    rgb(&layer(HostBase::Gray(Arc::new(gray.clone()))), &opaque),
                    want,
                    "grey, factor {factor}"
                );
            }
        }
    }
}

fn boxed(color: [u8; 4], left: f32, label: Option<&str>) -> Shape {
    Shape::Rect {
        left,
        top: 13.0,
        width: 6.0,
        height: 5.0,
        color,
        label: label.map(str::to_owned),
    }
}

#[test]
fn the_last_primitive_wins_once() {
    let base = HostBase::Gray(Arc::new(Image::new(24, 20, 50u8)));
    let first = ShapeLayer {
        name: "boxes",
        shapes: Arc::new(vec![boxed([255, 0, 0, 255], 2.0, Some("8"))]),
    };
    // A half-transparent box over the first one's right edge, in a later layer.
    let second = ShapeLayer {
        name: "other",
        shapes: Arc::new(vec![boxed([0, 0, 255, 128], 7.0, None)]),
    };
    let layers = HostLayers {
        base,
        rasters: Vec::new(),
        shapes: vec![first, second],
    };
    let img = rgb(&layers, &ComposeStyle::default());
    assert_eq!(img.get(2, 13), [255, 0, 0]);
    assert_eq!(img.get(4, 15), [50; 3], "inside the box");
    // x = 7 is both boxes' edge: only the later one is blended, once, over the frame.
    assert_eq!(
        img.get(7, 15),
        [mix(50, 0, 128), mix(50, 0, 128), mix(50, 255, 128)]
    );
    // The label "8" (top row 3 cells wide at scale 2) 12 pixels above the box.
    assert_eq!(
        (img.get(2, 1), img.get(7, 2), img.get(8, 1)),
        ([255, 0, 0], [255, 0, 0], [50; 3])
    );
    // Hidden, transparent and additive shape layers.
    let hidden = ComposeStyle::default()
        .with("boxes", LayerStyle::HIDDEN)
        .with("other", LayerStyle::mixed(0.0));
    assert!(rgb(&layers, &hidden).data().iter().all(|&p| p == [50; 3]));
    let added = ComposeStyle::default().with("boxes", LayerStyle::added(1.0));
    assert_eq!(rgb(&layers, &added).get(2, 13), [255, 50, 50]);
}

#[test]
fn tiny_and_odd_sizes() {
    let one = only_base(rgb_frame(1, 1));
    let p = compose_cpu(&one, &ComposeStyle::default(), PictureFormat::Rgb).unwrap();
    assert_eq!((p.width, p.height, p.data), (1, 1, vec![10, 20, 0]));
    let p = compose_cpu(&one, &ComposeStyle::default(), PictureFormat::I420).unwrap();
    assert_eq!((p.width, p.height, p.data.len()), (0, 0, 0));
    let column = only_base(rgb_frame(1, 5));
    assert_eq!(
        compose_cpu(&column, &ComposeStyle::default(), PictureFormat::Rgba)
            .unwrap()
            .data
            .len(),
        20
    );
    let empty = only_base(HostBase::Gray(Arc::new(Image::new(0, 0, 0u8))));
    assert!(
        compose_cpu(&empty, &ComposeStyle::default(), PictureFormat::Rgba)
            .unwrap()
            .data
            .is_empty()
    );
    // A box partly outside a 1xN frame.
    let line = HostLayers {
        base: HostBase::Gray(Arc::new(Image::new(1, 6, 0u8))),
        rasters: Vec::new(),
        shapes: vec![ShapeLayer {
            name: "boxes",
            shapes: Arc::new(vec![Shape::Rect {
                left: -3.0,
                top: 1.0,
                width: 4.0,
                height: 3.0,
                color: [9, 9, 9, 255],
                label: None,
            }]),
        }],
    };
    let img = rgb(&line, &ComposeStyle::default());
    assert_eq!(
        img.data(),
        &[[0; 3], [9; 3], [9; 3], [9; 3], [0; 3], [0; 3]]
    );
}

#[test]
fn i420_is_the_rgb_picture_converted() {
    for (w, h) in [(7, 5), (2, 2), (8, 3), (1, 4)] {
        let layers = HostLayers {
            base: rgb_frame(w, h),
            rasters: vec![RasterLayer {
                name: "angles",
                raster: HostRaster::Colour(Arc::new(Image::from_fn(w, h, |x, y| {
                    [(x * 70) as u8, 255, (y * 50) as u8]
                }))),
            }],
            shapes: Vec::new(),
        };
        let style = ComposeStyle::default();
        let full = rgb(&layers, &style);
        let p = compose_cpu(&layers, &style, PictureFormat::I420).unwrap();
        assert_eq!((p.width, p.height), (w & !1, h & !1));
        assert_eq!(p.data, naive_i420(&full, w & !1, h & !1), "{w}x{h}");
    }
}

#[test]
fn layers_of_the_wrong_size_are_errors() {
    let bad = with_raster(
        rgb_frame(4, 4),
        "residue",
        HostRaster::Residue(Arc::new(Image::new(4, 3, 0u8))),
    );
    let e = compose_cpu(&bad, &ComposeStyle::default(), PictureFormat::Rgb).unwrap_err();
    assert!(
        e.to_string().contains("residue") && e.to_string().contains("4x3"),
        "{e}"
    );
    let labels = Image::new(5, 2, 0u32);
    let big = with_raster(
        rgb_frame(4, 4),
        "s",
        HostRaster::Segments {
            segments: segments(labels, 1, OverlayMode::Mean, None),
            count: 1,
        },
    );
    assert!(compose_cpu(&big, &ComposeStyle::default(), PictureFormat::Rgb).is_err());
    let mut lying = segments(Image::new(2, 2, 0u32), 2, OverlayMode::Mean, None);
    lying.label_width = 3;
    let lying = with_raster(
        rgb_frame(4, 4),
        "s",
        HostRaster::Segments {
            segments: lying,
            count: 1,
        },
    );
    assert!(compose_cpu(&lying, &ComposeStyle::default(), PictureFormat::Rgb).is_err());
}

/// Every layer kind over a real-looking frame of `w` x `h`: residue, orientation colours,
/// segments of 16x16 blocks at factor 2, and 40 boxes with labels and trails.
pub(crate) fn busy_layers(w: usize, h: usize) -> HostLayers {
    let frame = Image::from_fn(w, h, |x, y| {
        [(x ^ y) as u8, (x / 3 + y / 5) as u8, (x * y / 7) as u8]
    });
    let residue = Image::from_fn(w, h, |x, y| {
        if (x * 7 + y * 13) % 29 == 0 {
            (x + y) as u8
        } else {
            0
        }
    });
    let colour = Image::from_fn(w, h, |x, y| {
        [(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8]
    });
    let (lw, lh) = (w / 2, h / 2);
    let per_row = lw.div_ceil(8);
    let labels = Image::from_fn(lw, lh, |x, y| ((y / 8) * per_row + x / 8) as u32);
    let count = per_row * lh.div_ceil(8);
    let seg = Segments {
        labels: Arc::new(labels),
        label_width: lw,
        label_height: lh,
        factor: 2,
        fill: OverlayMode::Mean,
        boundary: Some([255, 255, 0]),
    };
    let mut shapes = Vec::new();
    for i in 0..40 {
        let (x, y) = ((i * 97) % w.max(1), (i * 53) % h.max(1));
        let color = [200, (i * 6) as u8, 40, 255];
        shapes.push(Shape::Rect {
            left: x as f32,
            top: y as f32,
            width: 60.0,
            height: 90.0,
            color,
            label: Some(i.to_string()),
        });
        let points = (0..30)
            .map(|k| [(x + 3 * k) as f32, (y + 2 * k) as f32])
            .collect();
        shapes.push(Shape::Polyline { points, color });
    }
    HostLayers {
        base: HostBase::Rgb(Arc::new(frame)),
        rasters: vec![
            RasterLayer {
                name: "residue",
                raster: HostRaster::Residue(Arc::new(residue)),
            },
            RasterLayer {
                name: "angles",
                raster: HostRaster::Colour(Arc::new(colour)),
            },
            RasterLayer {
                name: "segments",
                raster: HostRaster::Segments {
                    segments: seg,
                    count,
                },
            },
        ],
        shapes: vec![ShapeLayer {
            name: "boxes",
            shapes: Arc::new(shapes),
        }],
    }
}

#[test]
fn busy_frames_equal_the_definition() {
    let layers = busy_layers(67, 45);
    for format in [PictureFormat::Rgb, PictureFormat::Rgba, PictureFormat::I420] {
        let style = ComposeStyle::default();
        assert_eq!(
            compose_cpu(&layers, &style, format).unwrap(),
            super::naive::naive_compose(&layers, &style, format)
        );
    }
}

#[test]
#[ignore = "timing: run with --release -- --ignored --nocapture"]
fn bench_compose_cpu() {
    println!(
        "CPU compose, all layers, {} rayon threads (median of 15 after 3 warm-up)",
        rayon::current_num_threads()
    );
    for (w, h) in [(1920, 1080), (3840, 2160)] {
        let layers = busy_layers(w, h);
        for format in [PictureFormat::Rgba, PictureFormat::Rgb, PictureFormat::I420] {
            let style = ComposeStyle::default();
            let mut ms = Vec::new();
            for i in 0..18 {
                let t = std::time::Instant::now();
                let p = compose_cpu(&layers, &style, format).unwrap();
                assert_eq!(p.width, w);
                if i >= 3 {
                    ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            ms.sort_by(f64::total_cmp);
            println!("{w}x{h} {format:?}: {:.2} ms", ms[ms.len() / 2]);
        }
    }
}
