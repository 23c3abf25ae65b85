//! GPU parity of the shared pre-processing (RGB→grey, downscaling, the grey histogram and its
//! statistics) and the pipeline: the CUDA backend must give the CPU backend's results frame for
//! frame, in order, across frame-size changes, and the same composed pictures.

// Helpers outside `#[test]` functions unwrap and panic as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use morphoscope::analysis::{Analysis, FrameInput, OpSettings};
use morphoscope::backend::Backend;
use morphoscope::compose::{HostRaster, PictureFormat};
use morphoscope::config::{Settings, UploadMode};
use morphoscope::gpu::{KernelTimer, upload_view};
use morphoscope::image::{DynImage, Image};
use morphoscope::ops::preprocess::{
    GrayHistogramGpu, GrayStats, PreprocessTuning, gray_histogram, gray_histogram_gpu, rgb_to_gray,
    rgb_to_gray_gpu,
};
use morphoscope::pipeline::{PictureWant, run_frames, run_frames_with};
use morphoscope::source::Frame;

use crate::common::{Rng, gpu, median, sample_rgb};

fn random_rgb(rng: &mut Rng, w: usize, h: usize) -> Image<[u8; 3]> {
    Image::from_fn(w, h, |_, _| {
        let v = rng.next_u64();
        [v as u8, (v >> 8) as u8, (v >> 16) as u8]
    })
}

#[test]
fn rgb_to_gray_matches_cpu_exactly() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(7);
    for (w, h) in [
        (1, 1),
        (1, 17),
        (17, 1),
        (33, 17),
        (640, 480),
        (1920, 1080),
        (4096, 2160),
    ] {
        let img = random_rgb(&mut rng, w, h);
        assert_eq!(
            rgb_to_gray_gpu(g, img.view()).unwrap(),
            rgb_to_gray(img.view()),
            "{w}x{h}"
        );
    }
    if let Some(real) = sample_rgb("fruits.jpg") {
        assert_eq!(
            rgb_to_gray_gpu(g, real.view()).unwrap(),
            rgb_to_gray(real.view())
        );
    }
}

/// A CUDA backend on a context of its own (on `g`'s device).
fn own_backend(g: &morphoscope::gpu::GpuContext) -> Backend {
    Backend::Cuda(std::sync::Arc::new(
        morphoscope::gpu::GpuContext::new(g.info().ordinal).unwrap(),
    ))
}

#[test]
fn ring_completes_frames_in_order_and_matches_cpu() {
    let Some(g) = gpu() else { return };
    assert_ring_matches_cpu(&own_backend(g), UploadMode::Copy);
}

#[test]
fn ring_with_the_mapped_upload_matches_cpu() {
    // The integrated-GPU (Jetson) upload forced on this GPU: kernels read the frames from
    // mapped pinned host memory.
    let Some(g) = gpu() else { return };
    assert_ring_matches_cpu(&own_backend(g), UploadMode::Mapped);
}

#[test]
fn ring_on_an_sm_budget_matches_cpu() {
    let Some(g) = gpu() else { return };
    let all = g.info().multiprocessors;
    for sms in [8, 16] {
        let budget = morphoscope::gpu::GpuContext::with_sm_limit(g.info().ordinal, sms).unwrap();
        let info = budget.info();
        println!(
            "sm_limit {sms}: {} of {} SMs",
            info.multiprocessors, info.device_multiprocessors
        );
        assert!(info.multiprocessors >= sms as i32, "at least the SMs asked");
        assert!(
            info.multiprocessors < all,
            "fewer SMs than the device's {all}"
        );
        assert_eq!(info.device_multiprocessors, all);
        assert_ring_matches_cpu(
            &Backend::Cuda(std::sync::Arc::new(budget)),
            UploadMode::Copy,
        );
    }
    // 0 and a count at or above the device's: every SM, an ordinary context.
    for sms in [0, all as u32, 4096] {
        let every = morphoscope::gpu::GpuContext::with_sm_limit(g.info().ordinal, sms).unwrap();
        assert_eq!(every.info().multiprocessors, all);
    }
}

/// Runs mixed frames (sizes, grey and colour) through the ring on `backend` and on the CPU:
/// the same frames in order, the same summaries and composed pictures.
fn assert_ring_matches_cpu(backend: &Backend, upload: UploadMode) {
    // Segmentation without round caps, so the GPU result is the exact one on noise frames too.
    let mut settings = OpSettings::default();
    settings.segmentation.max_rounds = morphoscope::ops::segmentation::MAX_ROUNDS_LIMIT;
    settings.segmentation.max_min_size_rounds = morphoscope::ops::segmentation::MAX_ROUNDS_LIMIT;
    settings.segmentation.adaptive_rounds = false;
    let mut rng = Rng(11);
    let sizes = [
        (64, 48),
        (64, 48),
        (65, 47),
        (1920, 1080),
        (1920, 1080),
        (31, 7),
        (64, 48),
    ];
    let mut frames = Vec::new();
    for (i, &(w, h)) in sizes.iter().cycle().take(20).enumerate() {
        let image = if i % 4 == 3 {
            DynImage::Gray8(Image::from_fn(w, h, |x, y| (x * 7 + y * 3 + i) as u8))
        } else {
            DynImage::Rgb8(random_rgb(&mut rng, w, h))
        };
        frames.push(Frame {
            index: i as u64,
            pts_nanos: Some(i as u64),
            image: image.into(),
            after_gap: false,
        });
    }
    let want_picture = PictureWant::Every(PictureFormat::Rgb);
    let mut whole = Settings {
        ops: settings.clone(),
        ..Settings::default()
    };
    whole.pipeline.ring_size = 3;
    whole.pipeline.upload = upload;
    let got = run_frames_with(backend, &whole, frames.clone(), want_picture).unwrap();
    let want = run_frames(&Backend::Cpu, &settings, 1, frames, want_picture).unwrap();
    assert_eq!((got.len(), want.len()), (20, 20));
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(a.index, k as u64, "frames must complete in order");
        assert_eq!(a.picture, b.picture, "frame {}: composed picture", a.index);
        assert_eq!(a.outputs.len(), b.outputs.len());
        for (x, y) in a.outputs.iter().zip(&b.outputs) {
            if x.op == "segmentation" {
                // The GPU reports its merge rounds, Kruskal on the CPU has none: compare the
                // segment count and the labels.
                assert_eq!(
                    x.summary["capped"], false,
                    "frame {}: round cap reached",
                    a.index
                );
                assert_eq!(
                    x.summary["segments"], y.summary["segments"],
                    "frame {} segments",
                    a.index
                );
                // Equal labels draw equal pictures (compared above).
            } else {
                assert_eq!(x.summary, y.summary, "frame {} op {}", a.index, x.op);
            }
        }
        assert_eq!(a.timings.backend, "cuda");
        assert!(
            a.timings
                .regions
                .iter()
                .any(|r| r.0 == "preprocess_rgb_to_gray")
                || a.rgb.is_none()
        );
    }
}

/// A host raster as comparable parts: kind, size and bytes (labels as their little-endian
/// bytes, with the segment count).
fn raster_parts(r: &HostRaster) -> (&'static str, usize, usize, Vec<u8>) {
    match r {
        HostRaster::Residue(i) => (
            "residue",
            i.width(),
            i.height(),
            i.rows().flatten().copied().collect(),
        ),
        HostRaster::Colour(i) => (
            "colour",
            i.width(),
            i.height(),
            i.rows().flatten().flatten().copied().collect(),
        ),
        HostRaster::Segments { segments, count } => {
            let mut bytes: Vec<u8> = (*count as u32).to_le_bytes().to_vec();
            bytes.extend(
                segments
                    .labels
                    .rows()
                    .flatten()
                    .flat_map(|l| l.to_le_bytes()),
            );
            (
                "segments",
                segments.label_width,
                segments.label_height,
                bytes,
            )
        }
    }
}

#[test]
fn layers_read_back_from_the_ring_equal_the_cpu_layers() {
    let Some(g) = gpu() else { return };
    let backend = own_backend(g);
    // Exact segmentation (no round caps), and a downscaled one (labels at their own size).
    for downscale in [1, 2] {
        let mut settings = OpSettings::default();
        settings.segmentation.max_rounds = morphoscope::ops::segmentation::MAX_ROUNDS_LIMIT;
        settings.segmentation.max_min_size_rounds =
            morphoscope::ops::segmentation::MAX_ROUNDS_LIMIT;
        settings.segmentation.adaptive_rounds = false;
        settings.segmentation.downscale = downscale;
        let mut rng = Rng(23);
        let frames: Vec<Frame> = [(64, 48), (320, 240), (65, 47), (320, 240)]
            .iter()
            .enumerate()
            .map(|(i, &(w, h))| Frame {
                index: i as u64,
                pts_nanos: Some(i as u64),
                image: DynImage::Rgb8(random_rgb(&mut rng, w, h)).into(),
                after_gap: false,
            })
            .collect();
        let got = run_frames(&backend, &settings, 3, frames.clone(), PictureWant::Layers).unwrap();
        let want = run_frames(&Backend::Cpu, &settings, 1, frames, PictureWant::Layers).unwrap();
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            assert!(a.picture.is_none(), "no picture is composed for layers");
            let grey = |f: &morphoscope::analysis::AnalysedFrame| {
                f.gray
                    .as_ref()
                    .map(|g| g.rows().flatten().copied().collect::<Vec<u8>>())
            };
            assert!(a.gray.is_some(), "frame {}: grey frame read back", a.index);
            assert_eq!(grey(a), grey(b), "frame {}: grey frame", a.index);
            let mut rasters = 0;
            for (x, y) in a.outputs.iter().zip(&b.outputs) {
                assert_eq!(x.op, y.op);
                let (gx, gy) = (x.layer.raster.as_ref(), y.layer.raster.as_ref());
                assert_eq!(
                    gx.map(raster_parts),
                    gy.map(raster_parts),
                    "frame {} op {} downscale {downscale}",
                    a.index,
                    x.op
                );
                rasters += usize::from(gx.is_some());
            }
            assert_eq!(rasters, 3, "maxtree, orientation and segmentation layers");
        }
    }
}

#[test]
fn segmentation_hierarchy_levels_match_between_backends() {
    let Some(g) = gpu() else { return };
    let Some(real) = sample_rgb("fruits.jpg") else {
        return;
    };
    let backend = own_backend(g);
    for level in [0, 3, 40, 10_000] {
        let mut settings = OpSettings::default();
        settings.maxtree.enabled = false;
        settings.cca.enabled = false;
        settings.orientation.enabled = false;
        settings.segmentation.level = level;
        settings.segmentation.adaptive_rounds = false;
        let frame = Frame {
            index: 0,
            pts_nanos: None,
            image: DynImage::Rgb8(real.clone()).into(),
            after_gap: false,
        };
        let picture = PictureWant::Every(PictureFormat::Rgb);
        let got = run_frames(&backend, &settings, 2, vec![frame.clone()], picture).unwrap();
        let want = run_frames(&Backend::Cpu, &settings, 1, vec![frame], picture).unwrap();
        let seg = |f: &morphoscope::analysis::AnalysedFrame| {
            f.outputs
                .iter()
                .find(|o| o.op == "segmentation")
                .cloned()
                .expect("segmentation output")
        };
        let (x, y) = (seg(&got[0]), seg(&want[0]));
        assert_eq!(
            x.summary, y.summary,
            "level {level}: GPU and the rounds' CPU model"
        );
        assert!(
            got[0].picture.is_some() && got[0].picture == want[0].picture,
            "level {level}: the composed segmentation"
        );
    }
}

/// Settings with only the segmentation on and no round caps (exact on noise frames too),
/// changed by `edit`.
fn segmentation_only(
    edit: impl FnOnce(&mut morphoscope::analysis::segmentation::SegmentationSettings),
) -> OpSettings {
    let mut settings = OpSettings::default();
    settings.maxtree.enabled = false;
    settings.cca.enabled = false;
    settings.orientation.enabled = false;
    settings.segmentation.max_rounds = morphoscope::ops::segmentation::MAX_ROUNDS_LIMIT;
    settings.segmentation.max_min_size_rounds = morphoscope::ops::segmentation::MAX_ROUNDS_LIMIT;
    edit(&mut settings.segmentation);
    settings
}

/// Frame `i` = `images[i]` through a 3-slot CUDA ring and the CPU backend, each frame's picture
/// composed: (index, GPU segmentation output, CPU segmentation output, equal pictures) per
/// frame, in order. Equal pictures of segmentation-only settings mean equal segments drawn.
fn segment_both(
    g: &morphoscope::gpu::GpuContext,
    settings: &OpSettings,
    images: Vec<DynImage>,
) -> Vec<(
    u64,
    morphoscope::analysis::OpOutput,
    morphoscope::analysis::OpOutput,
    bool,
)> {
    let backend = own_backend(g);
    let n = images.len();
    let frames: Vec<Frame> = images
        .into_iter()
        .enumerate()
        .map(|(i, image)| Frame {
            index: i as u64,
            pts_nanos: None,
            image: image.into(),
            after_gap: false,
        })
        .collect();
    let picture = PictureWant::Every(PictureFormat::Rgb);
    let got = run_frames(&backend, settings, 3, frames.clone(), picture).unwrap();
    let want = run_frames(&Backend::Cpu, settings, 1, frames, picture).unwrap();
    assert_eq!((got.len(), want.len()), (n, n));
    let seg = |f: &morphoscope::analysis::AnalysedFrame| {
        f.outputs
            .iter()
            .find(|o| o.op == "segmentation")
            .cloned()
            .expect("segmentation output")
    };
    got.iter()
        .zip(&want)
        .map(|(a, b)| {
            (
                a.index,
                seg(a),
                seg(b),
                a.picture.is_some() && a.picture == b.picture,
            )
        })
        .collect()
}

#[test]
fn segmentation_every_n_frames_matches_between_backends() {
    let Some(g) = gpu() else { return };
    let settings = segmentation_only(|s| s.every = 3);
    let mut rng = Rng(5);
    let images = (0..10)
        .map(|_| DynImage::Rgb8(random_rgb(&mut rng, 96, 64)))
        .collect();
    for (index, x, y, same) in segment_both(g, &settings, images) {
        let skipped = index % 3 != 0;
        assert_eq!(
            x.summary.get("skipped").is_some(),
            skipped,
            "frame {index}: {}",
            x.summary
        );
        if skipped {
            assert_eq!(x.summary["from_frame"], serde_json::json!(index / 3 * 3));
        }
        for key in ["skipped", "from_frame", "segments"] {
            assert_eq!(
                x.summary.get(key),
                y.summary.get(key),
                "frame {index} {key}"
            );
        }
        assert!(same, "frame {index}: the composed segmentation");
    }
}

#[test]
fn downscale_matches_cpu() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let func = morphoscope::ops::preprocess::downscale_function(g).unwrap();
    let mut rng = Rng(3);
    for &(w, h, ch, f) in &[
        (97, 61, 3, 2),
        (97, 61, 1, 3),
        (1920, 1080, 3, 2),
        (5, 3, 3, 4),
        (64, 48, 1, 8),
    ] {
        let data: Vec<u8> = (0..w * h * ch).map(|_| rng.below(256) as u8).collect();
        let want = morphoscope::ops::preprocess::downscale_box(&data, w, h, ch, f);
        let src = stream.clone_htod(&data).unwrap();
        let mut dst = stream.alloc_zeros::<u8>(want.len().max(1)).unwrap();
        let image = morphoscope::gpu::DeviceImage::new(&stream, &src, w, h, ch).unwrap();
        let size =
            morphoscope::ops::preprocess::enqueue_downscale(&func, image, &mut dst, f).unwrap();
        assert_eq!(size, morphoscope::ops::preprocess::downscaled_size(w, h, f));
        let got = stream.clone_dtoh(&dst).unwrap();
        assert_eq!(&got[..want.len()], &want[..], "{w}x{h}x{ch} by {f}");
    }
}

#[test]
fn downscaled_segmentation_matches_between_backends() {
    let Some(g) = gpu() else { return };
    let settings = segmentation_only(|s| s.downscale = 2);
    let mut rng = Rng(9);
    // Random and gradient frames (real photographs can hold near-ties where Kruskal's f64 order
    // and the GPU's keys differ, see the segmentation quality test).
    let mut images = vec![
        DynImage::Rgb8(Image::from_fn(97, 61, |x, y| {
            [(x * 2) as u8, (y * 3) as u8, (x + y) as u8]
        })),
        DynImage::Gray8(Image::from_fn(97, 61, |x, y| ((x * 5 + y * 3) % 251) as u8)),
    ];
    images.extend((0..4).map(|_| DynImage::Rgb8(random_rgb(&mut rng, 97, 61))));
    for (index, x, y, same) in segment_both(g, &settings, images) {
        assert_eq!(x.summary["downscale"], 2, "frame {index}");
        assert_eq!(x.summary["capped"], false, "frame {index}");
        assert_eq!(
            x.summary["segments"], y.summary["segments"],
            "frame {index} segments"
        );
        assert!(same, "frame {index}: the composed segmentation");
    }
}

/// The `preprocess` analysis' summary of `img`, computed on the CPU as the pipeline does today.
fn analysis_summary(img: &Image<u8>) -> serde_json::Value {
    let mut a = morphoscope::analysis::preprocess::Preprocess::new(&Default::default());
    let input = FrameInput {
        index: 0,
        gray: std::sync::Arc::new(img.clone()),
        rgb: None,
        gray16: None,
    };
    a.run_cpu(&input, &mut Vec::new()).unwrap().summary
}

#[test]
fn gray_histogram_and_statistics_match_cpu() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(17);
    let mut images: Vec<(String, Image<u8>)> = Vec::new();
    // Sizes whose pixel count is not a multiple of 4 exercise the kernel's byte tail.
    for (w, h) in [
        (1, 1),
        (3, 1),
        (7, 3),
        (33, 17),
        (640, 480),
        (1920, 1080),
        (4096, 2160),
    ] {
        images.push((
            format!("random {w}x{h}"),
            crate::common::random_gray(&mut rng, w, h, 256),
        ));
    }
    images.push((
        "few levels".into(),
        crate::common::random_gray(&mut rng, 301, 7, 3),
    ));
    // Every pixel in one bin: the worst case for the shared-memory atomics.
    images.push(("constant 255".into(), Image::new(1921, 1081, 255u8)));
    if let Some(real) = crate::common::sample_gray("fruits.jpg") {
        images.push(("fruits".into(), real));
    }
    let strided =
        Image::from_strided(5, 3, 8, (0..24u8).map(|v| v.wrapping_mul(29)).collect()).unwrap();
    images.push(("strided 5x3".into(), strided));
    for (what, img) in &images {
        let got = gray_histogram_gpu(g, img.view()).unwrap();
        let want = gray_histogram(img.view());
        assert!(got == want, "{what}: histogram differs");
        assert_eq!(
            got.iter().sum::<u64>(),
            img.len() as u64,
            "{what}: pixel count"
        );
        let stats = GrayStats::from_histogram(&got);
        assert_eq!(stats.summary(), analysis_summary(img), "{what}: statistics");
    }
}

#[test]
fn gray_histogram_op_is_reused_across_frames() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut op = GrayHistogramGpu::new(g).unwrap();
    let mut timer = KernelTimer::new();
    let mut rng = Rng(29);
    let frames = [
        crate::common::random_gray(&mut rng, 64, 48, 256),
        Image::new(64, 48, 9u8),
        Image::new(0, 48, 0u8),
        crate::common::random_gray(&mut rng, 97, 13, 5),
    ];
    for (i, img) in frames.iter().enumerate() {
        let input = upload_view(&stream, img.view()).unwrap();
        op.enqueue(&mut timer, input.image()).unwrap();
        let got = op.download(&stream).unwrap();
        assert!(
            got == gray_histogram(img.view()),
            "frame {i}: histogram (bins not cleared?)"
        );
    }
    let rgb = upload_view(&stream, random_rgb(&mut rng, 4, 4).view()).unwrap();
    assert!(
        op.enqueue(&mut timer, rgb.image()).is_err(),
        "an RGB image has no grey histogram"
    );
    // A device image never names more samples than its buffer holds.
    let small = stream.alloc_zeros::<u8>(10).unwrap();
    assert!(morphoscope::gpu::DeviceImage::new(&stream, &small, 4, 3, 1).is_err());
    assert!(morphoscope::gpu::DeviceImage::new(&stream, &small, 5, 2, 1).is_ok());
    assert!(
        morphoscope::gpu::DeviceImage::new(&stream, &small, 2, 2, 3).is_err(),
        "12 samples in 10"
    );
    assert!(morphoscope::gpu::DeviceImage::new(&stream, &small, 3, 1, 3).is_ok());
    assert!(
        morphoscope::gpu::DeviceImage::new(&stream, &small, 3, 1, 3)
            .unwrap()
            .check(1, "test")
            .is_err()
    );
}

#[test]
fn gray_histogram_is_the_same_for_other_launch_shapes() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut rng = Rng(31);
    let img = crate::common::random_gray(&mut rng, 333, 97, 256);
    let want = gray_histogram(img.view());
    let input = upload_view(&stream, img.view()).unwrap();
    let mut timer = KernelTimer::new();
    let d = PreprocessTuning::default();
    for tuning in [
        PreprocessTuning {
            histogram_threads: 32,
            histogram_words_per_thread: 1,
            ..d
        },
        PreprocessTuning {
            histogram_threads: 1024,
            histogram_max_blocks: 1,
            ..d
        },
    ] {
        let mut op = GrayHistogramGpu::with_tuning(g, tuning).unwrap();
        op.enqueue(&mut timer, input.image()).unwrap();
        assert!(op.download(&stream).unwrap() == want, "{tuning:?}");
    }
    let bad = PreprocessTuning {
        histogram_threads: 100,
        ..d
    };
    assert!(GrayHistogramGpu::with_tuning(g, bad).is_err());
}

/// The grey statistics' cost at 1080p and 4K (run with `--ignored --nocapture` on the GPU
/// machine): the histogram kernel (CUDA events), the kernel with its 1 KiB readback (wall
/// clock), and on the CPU the histogram twin and the scan the `preprocess` analysis runs today;
/// medians of 50 runs after 10 warm-up runs.
#[test]
#[ignore = "timing bench: run explicitly on the GPU machine"]
fn bench_preprocess() {
    let Some(g) = gpu() else { return };
    println!("device: {}", g.info().name);
    println!(
        "| frame | GPU kernel ms | GPU kernel + readback ms | CPU histogram ms | CPU scan ms |"
    );
    println!("|---|---|---|---|---|");
    for (w, h) in [(1920, 1080), (3840, 2160)] {
        let Some(img) = crate::common::tiled_gray("fruits.jpg", w, h) else {
            return;
        };
        let stream = g.new_stream().unwrap();
        let input = upload_view(&stream, img.view()).unwrap();
        let mut op = GrayHistogramGpu::new(g).unwrap();
        let mut timer = KernelTimer::new();
        let want = gray_histogram(img.view());
        let (mut kernel, mut wall, mut cpu_hist, mut cpu_scan) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..60 {
            timer.reset();
            let t = Instant::now();
            op.enqueue(&mut timer, input.image()).unwrap();
            let bins = op.download(&stream).unwrap();
            let wall_ms = t.elapsed().as_secs_f64() * 1e3;
            assert!(bins == want, "{w}x{h}: histogram");
            let t = Instant::now();
            let cpu = gray_histogram(img.view());
            let hist_ms = t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let summary = analysis_summary(&img);
            let scan_ms = t.elapsed().as_secs_f64() * 1e3;
            assert_eq!(GrayStats::from_histogram(&cpu).summary(), summary);
            if i >= 10 {
                kernel.push(timer.read().unwrap()[0].1);
                wall.push(wall_ms);
                cpu_hist.push(hist_ms);
                cpu_scan.push(scan_ms);
            }
        }
        println!(
            "| {w}x{h} | {:.4} | {:.4} | {:.3} | {:.3} |",
            median(&mut kernel),
            median(&mut wall),
            median(&mut cpu_hist),
            median(&mut cpu_scan)
        );
    }
}
