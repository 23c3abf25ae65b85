//! Compose parity: the picture `ComposeGpu` draws on the device equals the CPU twin's
//! (`compose_cpu`) byte for byte, on real photographs with real layers (the max-tree residue,
//! the orientation colours, Felzenszwalb labels at downscale factors 1 and 2, boxes with track
//! ids and trails), in every format, with several styles, at odd sizes and on tiny random
//! frames. One `ComposeGpu` serves every case of a test, so buffer reuse (the marks and sums
//! that are zero at rest, reallocation on a new size) is exercised too.
//!
//! `bench_compose` (ignored) times the kernels with CUDA events at 1080p and 4K with all
//! layers, and the CPU twin on the same frames.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaStream};
use morphoscope::compose::Shape;
use morphoscope::compose::{
    ComposeGpu, ComposeStyle, DeviceRaster, DeviceRasterLayer, HostBase, HostLayers, HostRaster,
    LayerStyle, ORIGINAL, Picture, PictureFormat, RasterLayer, SegmentCount, Segments, ShapeLayer,
    compose_cpu,
};
use morphoscope::gpu::{DeviceImage, KernelTimer};
use morphoscope::image::Image;
use morphoscope::ops::maxtree::{MaxTreeParams, attribute_filter};
use morphoscope::ops::orientation::{OrientationParams, orientation, orientation_colour};
use morphoscope::ops::preprocess::{downscale_box, downscaled_size, rgb_to_gray};
use morphoscope::ops::segmentation::cpu::felzenszwalb_interleaved;
use morphoscope::ops::segmentation::{OverlayMode, SegmentationParams};

use crate::common::{Rng, gpu, sample_rgb};

const FORMATS: [PictureFormat; 3] = [PictureFormat::Rgba, PictureFormat::Rgb, PictureFormat::I420];

/// A layer's buffers on the device.
enum Owned {
    Bytes(CudaSlice<u8>),
    Labels {
        labels: CudaSlice<u32>,
        count: Option<CudaSlice<u32>>,
    },
}

/// Uploads `host` and composes it on the device; the segment count goes through device memory
/// when `count_on_device`.
fn gpu_picture(
    compose: &mut ComposeGpu,
    stream: &Arc<CudaStream>,
    host: &HostLayers,
    style: &ComposeStyle,
    format: PictureFormat,
    count_on_device: bool,
) -> Picture {
    let (w, h) = host.base.size();
    let (base, channels) = match &host.base {
        HostBase::Rgb(img) => (
            stream
                .clone_htod(img.to_packed().data().as_flattened())
                .unwrap(),
            3,
        ),
        HostBase::Gray(img) => (stream.clone_htod(img.to_packed().data()).unwrap(), 1),
    };
    let owned: Vec<Owned> = host
        .rasters
        .iter()
        .map(|l| match &l.raster {
            HostRaster::Residue(img) => {
                Owned::Bytes(stream.clone_htod(img.to_packed().data()).unwrap())
            }
            HostRaster::Colour(img) => Owned::Bytes(
                stream
                    .clone_htod(img.to_packed().data().as_flattened())
                    .unwrap(),
            ),
            HostRaster::Segments { segments, count } => Owned::Labels {
                labels: stream
                    .clone_htod(segments.labels.to_packed().data())
                    .unwrap(),
                count: count_on_device.then(|| stream.clone_htod(&[*count as u32]).unwrap()),
            },
        })
        .collect();
    let rasters: Vec<DeviceRasterLayer<'_>> = host
        .rasters
        .iter()
        .zip(&owned)
        .map(|(l, o)| {
            let raster = match (&l.raster, o) {
                (HostRaster::Residue(_), Owned::Bytes(d)) => DeviceRaster::Residue(d),
                (HostRaster::Colour(_), Owned::Bytes(d)) => DeviceRaster::Colour(d),
                (
                    HostRaster::Segments { segments, count },
                    Owned::Labels {
                        labels,
                        count: on_device,
                    },
                ) => DeviceRaster::Segments {
                    segments: segments.with_labels(labels),
                    count: on_device
                        .as_ref()
                        .map_or(SegmentCount::Host(*count), SegmentCount::Device),
                },
                _ => unreachable!("uploads follow the layers"),
            };
            DeviceRasterLayer {
                name: l.name,
                raster,
            }
        })
        .collect();
    let image = DeviceImage::new(stream, &base, w, h, channels).unwrap();
    let mut timer = KernelTimer::new();
    compose
        .enqueue(image, &rasters, &host.shapes, style, format, &mut timer)
        .unwrap();
    compose.read_back(stream).unwrap()
}

/// Fails with the first differing pixel and the number of differing bytes.
fn assert_same(cpu: &Picture, gpu: &Picture, what: &str) {
    assert_eq!(
        (cpu.format, cpu.width, cpu.height, cpu.data.len()),
        (gpu.format, gpu.width, gpu.height, gpu.data.len()),
        "{what}: shape"
    );
    if cpu.data != gpu.data {
        let bad: Vec<usize> = (0..cpu.data.len())
            .filter(|&i| cpu.data[i] != gpu.data[i])
            .collect();
        let i = bad[0];
        let place = match cpu.format {
            PictureFormat::Rgba => {
                format!("pixel ({}, {})", (i / 4) % cpu.width, (i / 4) / cpu.width)
            }
            PictureFormat::Rgb => {
                format!("pixel ({}, {})", (i / 3) % cpu.width, (i / 3) / cpu.width)
            }
            PictureFormat::I420 if i < cpu.width * cpu.height => {
                format!("Y ({}, {})", i % cpu.width, i / cpu.width)
            }
            PictureFormat::I420 => format!("chroma byte {}", i - cpu.width * cpu.height),
        };
        panic!(
            "{what}: {} bytes differ, first at byte {i} ({place}): cpu {} gpu {}",
            bad.len(),
            cpu.data[i],
            gpu.data[i]
        );
    }
}

/// Boxes with track ids and trails over a `w` x `h` frame, some partly outside it.
fn tracks(w: usize, h: usize, n: usize) -> Vec<Shape> {
    let mut shapes = Vec::new();
    for i in 0..n {
        let (x, y) = (
            (i * 131 % (w + 40)) as f32 - 20.0,
            (i * 71 % (h + 30)) as f32 - 10.0,
        );
        let color = [
            (50 + i * 40) as u8,
            (200 + i * 13) as u8,
            (i * 90) as u8,
            if i % 3 == 0 { 160 } else { 255 },
        ];
        let label = Some((i * 37 + 1).to_string());
        shapes.push(Shape::Rect {
            left: x + 0.4,
            top: y + 12.6,
            width: 31.0 + i as f32,
            height: 45.5,
            color,
            label,
        });
        let points = (0..12)
            .map(|k| [x + 2.5 * k as f32, y + (k * k) as f32 * 0.7])
            .collect();
        shapes.push(Shape::Polyline { points, color });
    }
    shapes
}

/// Real layers of a photograph cropped to `w` x `h`: residue, orientation colours, labels of
/// the frame box-downscaled by `factor`, tracks.
fn real_layers(
    rgb: &Image<[u8; 3]>,
    w: usize,
    h: usize,
    factor: usize,
) -> (HostLayers, HostLayers) {
    let img = Image::from_fn(w, h, |x, y| rgb.get(x, y));
    let gray = rgb_to_gray(img.view());
    let residue = attribute_filter(gray.view(), &MaxTreeParams::default())
        .unwrap()
        .residue;
    let params = OrientationParams {
        length: 15,
        angles: 12,
        ..OrientationParams::default()
    };
    let colour = orientation_colour(&orientation(gray.view(), &params).unwrap());
    let packed: Vec<u8> = img.data().as_flattened().to_vec();
    let (sw, sh) = downscaled_size(w, h, factor);
    let small = downscale_box(&packed, w, h, 3, factor);
    let seg = felzenszwalb_interleaved(
        &small,
        sw,
        sh,
        3,
        &SegmentationParams {
            min_size: 20,
            ..SegmentationParams::default()
        },
    )
    .unwrap();
    let segments = Segments {
        labels: Arc::new(seg.labels),
        label_width: sw,
        label_height: sh,
        factor,
        fill: OverlayMode::Mean,
        boundary: Some([255, 255, 0]),
    };
    let rasters = vec![
        RasterLayer {
            name: "maxtree",
            raster: HostRaster::Residue(Arc::new(residue)),
        },
        RasterLayer {
            name: "orientation",
            raster: HostRaster::Colour(Arc::new(colour)),
        },
        RasterLayer {
            name: "segmentation",
            raster: HostRaster::Segments {
                segments,
                count: seg.segment_count,
            },
        },
    ];
    let shapes = vec![ShapeLayer {
        name: "cca",
        shapes: Arc::new(tracks(w, h, 8)),
    }];
    let colour_frame = HostLayers {
        base: HostBase::Rgb(Arc::new(img)),
        rasters: rasters.clone(),
        shapes: shapes.clone(),
    };
    let grey_frame = HostLayers {
        base: HostBase::Gray(Arc::new(gray)),
        rasters,
        shapes,
    };
    (colour_frame, grey_frame)
}

/// The styles every real frame is composed with.
fn styles() -> Vec<(&'static str, ComposeStyle)> {
    let additive = ["maxtree", "orientation", "segmentation", "cca"]
        .into_iter()
        .fold(ComposeStyle::default(), |s, n| {
            s.with(n, LayerStyle::added(0.6))
        });
    vec![
        ("default", ComposeStyle::default()),
        ("additive", additive),
        (
            "hidden base, opaque segments, no residue",
            ComposeStyle::default()
                .with(ORIGINAL, LayerStyle::HIDDEN)
                .with("segmentation", LayerStyle::mixed(1.0))
                .with("maxtree", LayerStyle::mixed(0.0)),
        ),
        (
            "half frame, random-ish opacities",
            ComposeStyle::default()
                .with(ORIGINAL, LayerStyle::mixed(0.5))
                .with("orientation", LayerStyle::mixed(0.73))
                .with("segmentation", LayerStyle::added(0.21))
                .with("cca", LayerStyle::mixed(0.35)),
        ),
    ]
}

#[test]
fn real_frames_compose_the_same_on_both_sides() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut compose = ComposeGpu::new(g).unwrap();
    let mut cases = 0;
    for name in ["fruits.jpg", "baboon.jpg", "building.jpg"] {
        let Some(rgb) = sample_rgb(name) else { return };
        let (w, h) = (rgb.width(), rgb.height());
        for (cw, ch) in [(w, h), ((w - 1) | 1, (h - 2) | 1)] {
            for factor in [1, 2] {
                let (colour, grey) = real_layers(&rgb, cw, ch, factor);
                for (base_name, layers) in [("rgb", &colour), ("grey", &grey)] {
                    for (style_name, style) in styles() {
                        for (k, format) in FORMATS.into_iter().enumerate() {
                            let on_device = (k + factor) % 2 == 0;
                            let what = format!(
                                "{name} {cw}x{ch} {base_name} f{factor} {style_name} {format:?} count on device {on_device}"
                            );
                            let cpu = compose_cpu(layers, &style, format).unwrap();
                            let gpu = gpu_picture(
                                &mut compose,
                                &stream,
                                layers,
                                &style,
                                format,
                                on_device,
                            );
                            assert_same(&cpu, &gpu, &what);
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    eprintln!("{cases} composed pictures equal");
}

#[test]
fn random_layers_at_tiny_and_odd_sizes() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut compose = ComposeGpu::new(g).unwrap();
    let mut rng = Rng(0x5eed);
    let sizes = [
        (1, 1),
        (1, 7),
        (7, 1),
        (2, 2),
        (3, 2),
        (5, 9),
        (33, 17),
        (64, 3),
        (131, 67),
    ];
    for round in 0..12 {
        for &(w, h) in &sizes {
            let mut byte = || rng.below(256) as u8;
            let base = if round % 2 == 0 {
                HostBase::Rgb(Arc::new(Image::from_fn(w, h, |_, _| {
                    [byte(), byte(), byte()]
                })))
            } else {
                HostBase::Gray(Arc::new(Image::from_fn(w, h, |_, _| byte())))
            };
            let residue = Image::from_fn(w, h, |_, _| {
                if rng.below(3) == 0 {
                    rng.below(256) as u8
                } else {
                    0
                }
            });
            let colour = Image::from_fn(w, h, |_, _| {
                [
                    rng.below(256) as u8,
                    rng.below(256) as u8,
                    rng.below(256) as u8,
                ]
            });
            let factor = 1 + rng.below(3);
            let (lw, lh) = (1 + rng.below(w), 1 + rng.below(h));
            let kinds = 1 + rng.below(9);
            let labels = Image::from_fn(lw, lh, |_, _| rng.below(kinds) as u32);
            let fill = if round % 3 == 0 {
                OverlayMode::Random
            } else {
                OverlayMode::Mean
            };
            let boundary = (round % 4 != 1).then_some([1, 2, 250]);
            let segments = Segments {
                labels: Arc::new(labels),
                label_width: lw,
                label_height: lh,
                factor,
                fill,
                boundary,
            };
            let count = rng.below(kinds + 2);
            let layers = HostLayers {
                base,
                rasters: vec![
                    RasterLayer {
                        name: "segmentation",
                        raster: HostRaster::Segments { segments, count },
                    },
                    RasterLayer {
                        name: "maxtree",
                        raster: HostRaster::Residue(Arc::new(residue)),
                    },
                    RasterLayer {
                        name: "orientation",
                        raster: HostRaster::Colour(Arc::new(colour)),
                    },
                ],
                shapes: vec![ShapeLayer {
                    name: "cca",
                    shapes: Arc::new(tracks(w, h, 1 + round % 3)),
                }],
            };
            let style = &styles()[round % 4].1;
            for format in FORMATS {
                let on_device = rng.below(2) == 0;
                let cpu = compose_cpu(&layers, style, format).unwrap();
                let gpu = gpu_picture(&mut compose, &stream, &layers, style, format, on_device);
                assert_same(
                    &cpu,
                    &gpu,
                    &format!(
                        "round {round} {w}x{h} f{factor} {format:?} count on device {on_device}"
                    ),
                );
            }
        }
    }
}

#[test]
fn layers_that_do_not_fit_the_frame_are_errors() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut compose = ComposeGpu::new(g).unwrap();
    let base = stream.alloc_zeros::<u8>(3 * 16 * 8).unwrap();
    let short = stream.alloc_zeros::<u8>(16 * 8 - 1).unwrap();
    let image = DeviceImage::new(&stream, &base, 16, 8, 3).unwrap();
    let mut timer = KernelTimer::new();
    let rasters = [DeviceRasterLayer {
        name: "maxtree",
        raster: DeviceRaster::Residue(&short),
    }];
    let e = compose
        .enqueue(
            image,
            &rasters,
            &[],
            &ComposeStyle::default(),
            PictureFormat::Rgba,
            &mut timer,
        )
        .unwrap_err();
    assert!(e.to_string().contains("maxtree"), "{e}");
    let colour = stream.alloc_zeros::<u8>(3 * 16 * 8).unwrap();
    let many: Vec<DeviceRasterLayer<'_>> = (0..9)
        .map(|_| DeviceRasterLayer {
            name: "orientation",
            raster: DeviceRaster::Colour(&colour),
        })
        .collect();
    let e = compose
        .enqueue(
            image,
            &many,
            &[],
            &ComposeStyle::default(),
            PictureFormat::Rgba,
            &mut timer,
        )
        .unwrap_err();
    assert!(e.to_string().contains("at most 8"), "{e}");
    // Hidden layers do not count.
    let hidden = ComposeStyle::default().with("orientation", LayerStyle::HIDDEN);
    compose
        .enqueue(image, &many, &[], &hidden, PictureFormat::Rgba, &mut timer)
        .unwrap();
    assert_eq!(
        compose.read_back(&stream).unwrap().data,
        [[0, 0, 0, 255]; 16 * 8].as_flattened()
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "timing: run on the GPU machine with --ignored --nocapture"]
fn bench_compose() {
    let Some(g) = gpu() else { return };
    let iters: usize = std::env::var("COMPOSE_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let Some(photo) = sample_rgb("fruits.jpg") else {
        return;
    };
    let stream = g.new_stream().unwrap();
    let mut compose = ComposeGpu::new(g).unwrap();
    let ctx = g.cuda();
    let (e0, e1) = (
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap(),
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap(),
    );
    println!(
        "device: {} | {iters} iterations after 30 warm-up, medians; CPU twin: {} rayon threads, median of 15",
        g.info().name,
        rayon::current_num_threads()
    );
    println!("size | labels | format | GPU compose ms (events) | readback ms (wall) | CPU twin ms");
    for (w, h) in [(1920, 1080), (3840, 2160)] {
        let img = photo.mirror_tiled(w, h);
        for factor in [1, 2] {
            let (layers, _) = real_layers(&img, w, h, factor);
            let host_shapes = vec![ShapeLayer {
                name: "cca",
                shapes: Arc::new(tracks(w, h, 40)),
            }];
            let layers = HostLayers {
                shapes: host_shapes,
                ..layers
            };
            let style = ComposeStyle::default();
            for format in FORMATS {
                // Upload once; time the enqueue (all compose kernels) with events.
                let cpu_picture = compose_cpu(&layers, &style, format).unwrap();
                let check = gpu_picture(&mut compose, &stream, &layers, &style, format, true);
                assert_same(
                    &cpu_picture,
                    &check,
                    &format!("bench {w}x{h} f{factor} {format:?}"),
                );
                let (gpu_ms, readback_ms) = time_gpu(
                    &mut compose,
                    &stream,
                    &layers,
                    &style,
                    format,
                    iters,
                    (&e0, &e1),
                );
                let mut cpu = Vec::new();
                for _ in 0..15 {
                    let t = std::time::Instant::now();
                    std::hint::black_box(compose_cpu(&layers, &style, format).unwrap());
                    cpu.push(t.elapsed().as_secs_f64() * 1e3);
                }
                println!(
                    "{w}x{h} | 1/{factor} | {format:?} | {gpu_ms:.3} | {readback_ms:.3} | {:.2}",
                    median(cpu)
                );
            }
        }
    }
}

/// Median GPU time of the compose kernels (events around `enqueue`) and median wall time of
/// `read_back`, with the layers uploaded once.
fn time_gpu(
    compose: &mut ComposeGpu,
    stream: &Arc<CudaStream>,
    layers: &HostLayers,
    style: &ComposeStyle,
    format: PictureFormat,
    iters: usize,
    (e0, e1): (&cudarc::driver::CudaEvent, &cudarc::driver::CudaEvent),
) -> (f64, f64) {
    let (w, h) = layers.base.size();
    let HostBase::Rgb(base_img) = &layers.base else {
        unreachable!("bench frames are colour")
    };
    let base = stream.clone_htod(base_img.data().as_flattened()).unwrap();
    let bytes: Vec<CudaSlice<u8>> = layers
        .rasters
        .iter()
        .filter_map(|l| match &l.raster {
            HostRaster::Residue(i) => Some(stream.clone_htod(i.data()).unwrap()),
            HostRaster::Colour(i) => Some(stream.clone_htod(i.data().as_flattened()).unwrap()),
            HostRaster::Segments { .. } => None,
        })
        .collect();
    let HostRaster::Segments { segments, count } = &layers.rasters[2].raster else {
        unreachable!("third layer: segments")
    };
    let labels = stream.clone_htod(segments.labels.data()).unwrap();
    let count_word = stream.clone_htod(&[*count as u32]).unwrap();
    let rasters = [
        DeviceRasterLayer {
            name: "maxtree",
            raster: DeviceRaster::Residue(&bytes[0]),
        },
        DeviceRasterLayer {
            name: "orientation",
            raster: DeviceRaster::Colour(&bytes[1]),
        },
        DeviceRasterLayer {
            name: "segmentation",
            raster: DeviceRaster::Segments {
                segments: segments.with_labels(&labels),
                count: SegmentCount::Device(&count_word),
            },
        },
    ];
    let image = DeviceImage::new(stream, &base, w, h, 3).unwrap();
    let mut timer = KernelTimer::new();
    let mut gpu = Vec::with_capacity(iters);
    let mut readback = Vec::with_capacity(iters);
    for i in 0..iters + 30 {
        timer.reset();
        e0.record(stream).unwrap();
        compose
            .enqueue(image, &rasters, &layers.shapes, style, format, &mut timer)
            .unwrap();
        e1.record(stream).unwrap();
        e1.synchronize().unwrap();
        let t = std::time::Instant::now();
        std::hint::black_box(compose.read_back(stream).unwrap());
        if i >= 30 {
            gpu.push(f64::from(e0.elapsed_ms(e1).unwrap()));
            readback.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    (median(gpu), median(readback))
}
