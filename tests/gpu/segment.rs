//! GPU Felzenszwalb (`kernels/segment.cu`) against its CPU model (bit for bit: labels, counts,
//! hierarchy), against the scikit-image-exact CPU reference (ASA >= 0.95, UE <= 0.05 per the
//! ETH report §4.2, at scale 100 and 500), label invariants on random and real frames up to
//! 4096x2160, hierarchy levels, and an `#[ignore]`d benchmark (`bench_segment`).

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use morphoscope::gpu::{GpuContext, KernelTimer};
use morphoscope::image::Image;
use morphoscope::ops::blur::cpu::{blur_f64, pack_gray, pack_rgb};
use morphoscope::ops::segment::boruvka::{edge_weights, felzenszwalb_boruvka};
use morphoscope::ops::segment::cpu::felzenszwalb_interleaved;
use morphoscope::ops::segment::{
    SegmentGpu, SegmentHierarchy, SegmentParams, asa, check_labels, undersegmentation_error,
};

use crate::common::{Rng, gpu, sample_rgb};

/// A packed interleaved test frame.
struct Frame {
    name: String,
    data: Vec<u8>,
    width: usize,
    height: usize,
    channels: usize,
}

/// A real RGB sample mirrored to `width` x `height` (grey: BT.601 of it).
fn tiled(name: &str, width: usize, height: usize, channels: usize) -> Option<Frame> {
    let src = sample_rgb(name)?;
    let (sw, sh) = (src.width(), src.height());
    let img = Image::from_fn(width, height, |x, y| {
        let (tx, ty) = ((x / sw) % 2, (y / sh) % 2);
        let sx = if tx == 0 { x % sw } else { sw - 1 - x % sw };
        let sy = if ty == 0 { y % sh } else { sh - 1 - y % sh };
        src.get(sx, sy)
    });
    let data = if channels == 3 {
        pack_rgb(img.view())
    } else {
        pack_gray(img.map(morphoscope::image::rgb_to_gray_pixel).view())
    };
    Some(Frame { name: format!("{name} {width}x{height}x{channels}"), data, width, height, channels })
}

fn random_frame(rng: &mut Rng, width: usize, height: usize, channels: usize, levels: u64) -> Frame {
    let data = (0..width * height * channels).map(|_| (rng.below(levels) * 255 / (levels - 1).max(1)) as u8).collect();
    Frame { name: format!("random{levels} {width}x{height}x{channels}"), data, width, height, channels }
}

/// Flat `block` x `block` squares of random colours (`levels` per channel): edges of weight 0
/// inside the squares, as in flat regions of video.
fn blocky_frame(rng: &mut Rng, width: usize, height: usize, channels: usize, levels: u64, block: usize) -> Frame {
    let (bw, bh) = (width.div_ceil(block), height.div_ceil(block));
    let colours: Vec<u8> =
        (0..bw * bh * channels).map(|_| (rng.below(levels) * 255 / (levels - 1).max(1)) as u8).collect();
    let mut data = Vec::with_capacity(width * height * channels);
    for y in 0..height {
        for x in 0..width {
            let b = (y / block) * bw + x / block;
            data.extend_from_slice(&colours[b * channels..(b + 1) * channels]);
        }
    }
    Frame { name: format!("blocky{levels}/{block} {width}x{height}x{channels}"), data, width, height, channels }
}

/// Uploads and segments a frame on a given op (so hierarchy and levels can be read after).
fn run(
    op: &mut SegmentGpu,
    stream: &Arc<cudarc::driver::CudaStream>,
    f: &Frame,
    p: &SegmentParams,
) -> morphoscope::ops::segment::SegmentOutput {
    let mut timer = KernelTimer::new();
    let input =
        if f.data.is_empty() { stream.alloc_zeros::<u8>(1).unwrap() } else { stream.clone_htod(&f.data).unwrap() };
    op.enqueue_channels(stream, &mut timer, &input, f.width, f.height, f.channels, p).unwrap();
    op.download(stream).unwrap()
}

fn params(scale: f64) -> SegmentParams {
    SegmentParams { scale, adaptive_rounds: false, ..SegmentParams::default() }
}

/// Where two hierarchies first differ: (global round, differing entries, examples).
fn hierarchy_diff(a: &SegmentHierarchy, b: &SegmentHierarchy) -> Option<(u16, usize, Vec<String>)> {
    let mut first = u16::MAX;
    let mut count = 0;
    let mut examples = Vec::new();
    for v in 0..a.parent.len().min(b.parent.len()) {
        if (a.parent[v], a.round[v]) != (b.parent[v], b.round[v]) {
            count += 1;
            let r = a.round[v].min(b.round[v]);
            if r < first {
                first = r;
                examples.clear();
            }
            if r == first && examples.len() < 6 {
                examples.push(format!(
                    "v {v}: gpu ({}, r{}) model ({}, r{})",
                    a.parent[v], a.round[v], b.parent[v], b.round[v]
                ));
            }
        }
    }
    (count > 0).then_some((first, count, examples))
}

/// The CPU model's edge weights of a frame (its f64 blur, then `edge_weights`), flattened as
/// the GPU's `w4`.
fn cpu_edge_weights(f: &Frame, p: &SegmentParams) -> Vec<f64> {
    let smooth = blur_f64(&f.data, f.width, f.height, f.channels, &p.blur()).unwrap();
    edge_weights(&smooth, f.width, f.height, f.channels).into_iter().flatten().collect()
}

/// How many entries of `a` have the bits of the same entry of `b` (0 when the lengths differ).
fn same_bits(a: &[f64], b: &[f64]) -> usize {
    if a.len() != b.len() {
        return 0;
    }
    a.iter().zip(b).filter(|(x, y)| x.to_bits() == y.to_bits()).count()
}

/// The edge graph's weights, built by `segment_blur_edges` (blur and edges in one tiled pass,
/// radius <= 4) or by the blur's two passes and `segment_edges` (larger radii, or
/// `separate_blur`), have the CPU model's bits: tiles cut off at every image edge, lines shorter
/// than the blur radius (reflected more than once), grey and RGB, radius 1 to 8.
#[test]
fn edge_weights_equal_cpu_model() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut rng = Rng(5);
    let mut frames: Vec<Frame> = tiled("building.jpg", 301, 97, 3).into_iter().collect();
    frames.extend(tiled("fruits.jpg", 64, 48, 1));
    for (w, h, ch) in [(33, 17, 3), (1, 37, 3), (45, 1, 1), (1, 1, 3), (2, 2, 1), (5, 70, 3), (3, 9, 1)] {
        frames.push(random_frame(&mut rng, w, h, ch, 256));
    }
    let mut failures = Vec::new();
    for f in &frames {
        // Radii 1, 3, 4 (the fused kernel's largest) and 8 (two passes).
        for sigma in [0.3, 0.8, 1.0, 1.9] {
            let p = SegmentParams { sigma, ..params(100.0) };
            let cpu = cpu_edge_weights(f, &p);
            for separate in [false, true] {
                let mut op = SegmentGpu::new(g).unwrap();
                op.separate_blur = separate;
                run(&mut op, &stream, f, &p);
                let gpu = op.download_weights(&stream).unwrap();
                let same = same_bits(&gpu, &cpu);
                if same != cpu.len() || cpu.len() != 4 * f.width * f.height {
                    failures.push(format!("{} sigma {sigma} separate {separate}: {same}/{} bit-identical", f.name, cpu.len()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "edge weights differ from the CPU model: {failures:?}");
}

#[test]
fn equals_cpu_model_bit_for_bit() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut frames = Vec::new();
    for (name, w, h) in
        [("fruits.jpg", 512, 480), ("building.jpg", 868, 600), ("text_motion.jpg", 588, 365), ("pic1.png", 400, 300)]
    {
        for ch in [3, 1] {
            frames.extend(tiled(name, w, h, ch));
        }
    }
    let mut rng = Rng(11);
    frames.push(random_frame(&mut rng, 97, 61, 3, 4));
    frames.push(random_frame(&mut rng, 64, 64, 1, 256));
    // Round 1's tiles (32x16) cut off at every edge, a single row, column and pixel.
    for (w, h) in [(33, 17), (1, 37), (45, 1), (1, 1), (2, 2)] {
        frames.push(random_frame(&mut rng, w, h, 3, 3));
    }
    frames.push(blocky_frame(&mut rng, 160, 120, 3, 3, 12));
    let mut failures = Vec::new();
    for f in &frames {
        // Scale 0: no weight-0 member joins early (a weight-0 step fails there).
        let scales: &[f64] = if f.width * f.height <= 20_000 { &[0.0, 1.0, 100.0, 500.0] } else { &[1.0, 100.0, 500.0] };
        for &scale in scales {
            let p = params(scale);
            let mut op = SegmentGpu::new(g).unwrap();
            let out = run(&mut op, &stream, f, &p);
            let (_, hier) = op.download_hierarchy(&stream).unwrap();
            let weights = op.download_weights(&stream).unwrap();
            let cpu_weights = cpu_edge_weights(f, &p);
            let weights_same = same_bits(&weights, &cpu_weights);
            let (model, mhier) = felzenszwalb_boruvka(&f.data, f.width, f.height, f.channels, &p).unwrap();
            let diff = out.labels.data().iter().zip(model.labels.data()).filter(|(a, b)| a != b).count();
            eprintln!(
                "{} k={scale}: gpu {} segments, model {}, rounds {}+{} / {}+{}, {diff} labels differ, weights {weights_same}/{} bit-identical",
                f.name,
                out.segment_count,
                model.segment_count,
                out.rounds,
                out.min_size_rounds,
                model.rounds,
                model.min_size_rounds,
                cpu_weights.len()
            );
            if let Some((r, count, ex)) = hierarchy_diff(&hier, &mhier) {
                eprintln!("  hierarchy differs from round {r} on ({count} entries): {}", ex.join("; "));
            }
            let ok = diff == 0
                && out.segment_count == model.segment_count
                && (out.rounds, out.min_size_rounds, out.capped) == (model.rounds, model.min_size_rounds, model.capped)
                && hier == mhier
                && weights_same == cpu_weights.len();
            if !ok {
                failures.push(format!("{} k={scale}", f.name));
            }
        }
    }
    assert!(failures.is_empty(), "GPU differs from the CPU model: {failures:?}");
}

/// Flat regions: `segment_core` joins the weight-0 members of a tree at once instead of
/// listing them for the caterpillars (`zero_joins`). The labels, counts and hierarchy equal the
/// CPU model's either way, and the core members the caterpillars got are fewer with it (so
/// the path ran), except at scale 0, where a weight-0 step fails and nothing joins early.
#[test]
fn weight_zero_members_join_in_core() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut rng = Rng(29);
    let mut frames = vec![blocky_frame(&mut rng, 640, 360, 3, 4, 24), blocky_frame(&mut rng, 333, 177, 1, 3, 9)];
    frames.extend(tiled("vtest_1080.png", 960, 540, 3));
    for f in &frames {
        for scale in [0.0, 100.0, 500.0] {
            let p = params(scale);
            let (model, mhier) = felzenszwalb_boruvka(&f.data, f.width, f.height, f.channels, &p).unwrap();
            let mut members = Vec::new();
            for zero_joins in [true, false] {
                let mut op = SegmentGpu::new(g).unwrap();
                op.zero_joins = zero_joins;
                op.round_stamps = true;
                let out = run(&mut op, &stream, f, &p);
                let profile = op.round_profile(&stream).unwrap();
                members.push(profile.iter().map(|(_, _, c)| u64::from(c[3])).sum::<u64>());
                let (_, hier) = op.download_hierarchy(&stream).unwrap();
                let diff = out.labels.data().iter().zip(model.labels.data()).filter(|(a, b)| a != b).count();
                assert_eq!(diff, 0, "{} k={scale} zero_joins={zero_joins}: labels differ from the CPU model", f.name);
                assert_eq!(
                    (out.segment_count, out.rounds, out.min_size_rounds),
                    (model.segment_count, model.rounds, model.min_size_rounds),
                    "{} k={scale} zero_joins={zero_joins}",
                    f.name
                );
                if let Some((r, count, ex)) = hierarchy_diff(&hier, &mhier) {
                    panic!("{} k={scale} zero_joins={zero_joins}: hierarchy differs from round {r} on {count} entries: {}", f.name, ex.join("; "));
                }
            }
            eprintln!("{} k={scale}: core members listed {} with weight-0 joins, {} without", f.name, members[0], members[1]);
            if scale == 0.0 {
                assert_eq!(members[0], members[1], "{} k=0: weight-0 members joined early", f.name);
            } else {
                assert!(members[0] < members[1], "{} k={scale}: no weight-0 member joined in segment_core", f.name);
            }
        }
    }
}

/// Smooth video at 1080p grows trees of thousands to tens of thousands of members (the clip
/// frame: 9 000-15 000 at k = 100, up to 36 754 at k = 500), which `segment_cat_giant` walks over a
/// cooperative grid (or, without one, `segment_cat_block` sorts whole with `seg_sort_tree`):
/// labels, counts and hierarchy still equal the CPU model's.
#[test]
fn large_trees_equal_cpu_model() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let Some(f) = tiled("vtest_1080.png", 1920, 1080, 3) else { return };
    for scale in [100.0, 500.0] {
        let p = params(scale);
        let mut op = SegmentGpu::new(g).unwrap();
        op.round_stamps = true;
        let out = run(&mut op, &stream, &f, &p);
        let profile = op.round_profile(&stream).unwrap();
        let large: u32 = profile.iter().map(|(_, _, c)| c[5]).sum();
        assert!(large > 0, "k={scale}: no tree for segment_cat_block, nothing sorted");
        // Trees above 8 192 core members, counted by whichever kernel walked them.
        let giant: u32 = profile.iter().map(|(_, _, c)| c[9]).sum();
        assert!(giant > 0, "k={scale}: no giant tree counted");
        if op.grid_finish_blocks() > 0 && std::env::var_os("MORPHOSCOPE_SEG_NO_GIANT").is_none() {
            assert!(op.giant_blocks() > 0, "cooperative launch, but no grid for the giant trees");
        }
        let (_, hier) = op.download_hierarchy(&stream).unwrap();
        let (model, mhier) = felzenszwalb_boruvka(&f.data, f.width, f.height, f.channels, &p).unwrap();
        let diff = out.labels.data().iter().zip(model.labels.data()).filter(|(a, b)| a != b).count();
        assert_eq!(diff, 0, "k={scale}: labels differ from the CPU model");
        assert_eq!(
            (out.segment_count, out.rounds, out.min_size_rounds),
            (model.segment_count, model.rounds, model.min_size_rounds),
            "k={scale}"
        );
        if let Some((r, count, ex)) = hierarchy_diff(&hier, &mhier) {
            panic!("k={scale}: hierarchy differs from round {r} on {count} entries: {}", ex.join("; "));
        }
    }
}

#[test]
fn quality_against_scikit_image_reference() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut frames = Vec::new();
    for (name, w, h) in [
        ("fruits.jpg", 512, 480),
        ("baboon.jpg", 512, 512),
        ("building.jpg", 868, 600),
        ("text_motion.jpg", 588, 365),
        ("pic1.png", 400, 300),
    ] {
        for ch in [3, 1] {
            frames.extend(tiled(name, w, h, ch));
        }
    }
    frames.extend(tiled("building.jpg", 1920, 1080, 3));
    frames.extend(tiled("fruits.jpg", 1920, 1080, 1));
    frames.extend(tiled("baboon.jpg", 4096, 2160, 3));
    let mut failures = Vec::new();
    for f in &frames {
        for scale in [100.0, 500.0] {
            if f.width > 2000 && scale == 100.0 {
                continue;
            }
            let p = params(scale);
            let mut op = SegmentGpu::new(g).unwrap();
            let out = run(&mut op, &stream, f, &p);
            let t = Instant::now();
            let cpu = felzenszwalb_interleaved(&f.data, f.width, f.height, f.channels, &p).unwrap();
            let cpu_s = t.elapsed().as_secs_f64();
            let a = asa(out.labels.view(), cpu.labels.view()).unwrap();
            let ue = undersegmentation_error(out.labels.view(), cpu.labels.view()).unwrap();
            eprintln!(
                "{} k={scale}: gpu {} vs cpu {} segments, ASA {a:.5}, UE {ue:.5}, identical {}, rounds {}+{}, capped {} (cpu {cpu_s:.2} s)",
                f.name,
                out.segment_count,
                cpu.segment_count,
                out.labels == cpu.labels,
                out.rounds,
                out.min_size_rounds,
                out.capped
            );
            if !(a >= 0.95 && ue <= 0.05) || out.capped {
                failures.push(format!("{} k={scale}: ASA {a} UE {ue} capped {}", f.name, out.capped));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn invariants_on_random_and_real_frames() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut rng = Rng(5);
    // (frame, configurations (scale, min_size)).
    let all = [(100.0, 20), (500.0, 50), (0.0, 5)];
    let mut cases: Vec<(Frame, Vec<(f64, usize)>)> = vec![
        (random_frame(&mut rng, 1, 1, 1, 256), all.to_vec()),
        (random_frame(&mut rng, 1, 37, 1, 256), all.to_vec()),
        (random_frame(&mut rng, 41, 1, 3, 256), all.to_vec()),
        (random_frame(&mut rng, 333, 211, 1, 2), all.to_vec()),
        (random_frame(&mut rng, 640, 480, 3, 256), all.to_vec()),
        (random_frame(&mut rng, 4096, 2160, 1, 16), all.to_vec()),
    ];
    cases.extend(tiled("fruits.jpg", 4096, 2160, 3).map(|f| (f, all.to_vec())));
    cases.extend(tiled("text_motion.jpg", 1920, 1080, 1).map(|f| (f, all.to_vec())));
    let mut failures = Vec::new();
    for (f, configs) in &cases {
        for &(scale, min_size) in configs {
            let p = SegmentParams { scale, min_size, ..params(scale) };
            let mut op = SegmentGpu::new(g).unwrap();
            let out = run(&mut op, &stream, f, &p);
            match check_labels(out.labels.view(), out.segment_count) {
                Err(e) => failures.push(format!("{} k={scale}: {e}", f.name)),
                Ok(c) => {
                    eprintln!(
                        "{} k={scale} m={min_size}: {} segments, sizes {}..{}, rounds {}+{}, capped {}",
                        f.name, c.segments, c.min_size, c.max_size, out.rounds, out.min_size_rounds, out.capped
                    );
                    if out.capped || (c.segments > 1 && c.min_size < min_size) {
                        failures.push(format!("{} k={scale}: capped {} smallest {}", f.name, out.capped, c.min_size));
                    }
                }
            }
        }
    }
    // Empty frames.
    for (w, h) in [(0, 0), (0, 5), (7, 0)] {
        let f = Frame { name: "empty".into(), data: Vec::new(), width: w, height: h, channels: 1 };
        let mut op = SegmentGpu::new(g).unwrap();
        let out = run(&mut op, &stream, &f, &params(100.0));
        assert_eq!((out.segment_count, out.labels.width(), out.labels.height()), (0, w, h));
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// A round cap below what the frame needs (noise at scale 500 takes 14 merge and 7 `min_size`
/// rounds in the CPU model): the result is then a refinement of the exact one (fewer merges,
/// flagged `capped`), still a valid partition.
#[test]
fn capped_runs_still_partition() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let f = random_frame(&mut Rng(9), 1024, 768, 1, 16);
    let p = SegmentParams { scale: 500.0, min_size: 50, max_rounds: 4, max_min_size_rounds: 2, ..params(500.0) };
    let mut op = SegmentGpu::new(g).unwrap();
    let out = run(&mut op, &stream, &f, &p);
    let c = check_labels(out.labels.view(), out.segment_count).unwrap();
    eprintln!("noise 1024x768 k=500 capped at 4+2 rounds: capped {}, {} segments", out.capped, c.segments);
    assert!(out.capped);
}

#[test]
fn hierarchy_levels_without_recomputing() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let Some(f) = tiled("fruits.jpg", 640, 360, 3) else { return };
    let p = params(300.0);
    let mut op = SegmentGpu::new(g).unwrap();
    let out = run(&mut op, &stream, &f, &p);
    let (_, hier) = op.download_hierarchy(&stream).unwrap();
    assert_eq!(hier.levels(), out.levels());
    let mut timer = KernelTimer::new();
    let mut last = usize::MAX;
    let top = out.levels() - 1;
    for level in [0, 1, 2, top / 4, top / 2, top.saturating_sub(1), top, top + 5] {
        op.enqueue_level(&stream, &mut timer, level).unwrap();
        let lv = op.download(&stream).unwrap();
        let (want, count) = hier.labels_at(level.min(top)).unwrap();
        assert_eq!(lv.labels, want, "level {level}");
        assert_eq!(lv.segment_count, count);
        assert_eq!(lv.level, level.min(top));
        check_labels(lv.labels.view(), lv.segment_count).unwrap();
        eprintln!("level {level}: {count} segments");
        if level <= top {
            assert!(count <= last);
            last = count;
        }
    }
    assert_eq!(last, out.segment_count);
}

#[test]
fn adaptive_rounds_keep_results_on_repeated_frames() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let Some(f) = tiled("building.jpg", 960, 540, 3) else { return };
    let p = SegmentParams { scale: 500.0, adaptive_rounds: true, ..SegmentParams::default() };
    let mut op = SegmentGpu::new(g).unwrap();
    let first = run(&mut op, &stream, &f, &p);
    for _ in 0..3 {
        let again = run(&mut op, &stream, &f, &p);
        assert_eq!(again, first);
    }
}

/// A frame that needs many more rounds than the one before it (a flat frame, then a
/// photograph) hits its adaptive caps and is run again before its download: the same result as
/// fixed caps, not a capped refinement.
#[test]
fn adaptive_rounds_rerun_frames_that_need_more() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let Some(photo) = tiled("building.jpg", 640, 360, 3) else { return };
    let flat = Frame { name: "flat".into(), data: vec![90; 640 * 360 * 3], width: 640, height: 360, channels: 3 };
    let p = SegmentParams { scale: 100.0, adaptive_rounds: true, ..SegmentParams::default() };
    let mut fixed = SegmentGpu::new(g).unwrap();
    let want = run(&mut fixed, &stream, &photo, &SegmentParams { adaptive_rounds: false, ..p });
    let mut op = SegmentGpu::new(g).unwrap();
    // The finisher would take the few extra rounds itself (the tile pass leaves a short tail);
    // a low limit makes the frame need the rerun this test is about.
    (op.finish_frontier, op.finish_limit) = (1000, 1000);
    let f0 = run(&mut op, &stream, &flat, &p);
    assert_eq!(f0.segment_count, 1);
    for i in 0..3 {
        let got = run(&mut op, &stream, &photo, &p);
        assert_eq!(got, want, "photo after the flat frame, {i}");
        assert!(!got.capped);
    }
    eprintln!("rounds {}+{}, reruns {}", want.rounds, want.min_size_rounds, op.reruns());
    assert_eq!(op.reruns(), 1, "only the first photograph after the flat frame runs again");
    assert_eq!(run(&mut op, &stream, &flat, &p), f0);
}

/// A photograph and smooth video (large trees) at `width` x `height`, k = 100 and 500, with
/// adaptive round caps (the pipeline's settings).
fn photo_and_video(width: usize, height: usize) -> Vec<(Frame, SegmentParams)> {
    let mut cases = Vec::new();
    for name in ["building.jpg", "vtest_1080.png"] {
        for scale in [100.0, 500.0] {
            if let Some(f) = tiled(name, width, height, 3) {
                cases.push((f, SegmentParams { scale, adaptive_rounds: true, ..SegmentParams::default() }));
            }
        }
    }
    cases
}

/// Result and hierarchy of `f` on a fresh op set up by `configure`.
fn reference(
    g: &GpuContext,
    stream: &Arc<cudarc::driver::CudaStream>,
    f: &Frame,
    p: &SegmentParams,
    configure: impl FnOnce(&mut SegmentGpu),
) -> (morphoscope::ops::segment::SegmentOutput, SegmentHierarchy) {
    let mut op = SegmentGpu::new(g).unwrap();
    configure(&mut op);
    let out = run(&mut op, stream, f, p);
    let (_, hier) = op.download_hierarchy(stream).unwrap();
    (out, hier)
}

/// Segments `f` `runs` times on `op` (the later runs replay its graph) and asserts each result
/// and hierarchy equal the reference's.
#[allow(clippy::too_many_arguments)]
fn assert_runs_equal(
    op: &mut SegmentGpu,
    stream: &Arc<cudarc::driver::CudaStream>,
    f: &Frame,
    p: &SegmentParams,
    runs: usize,
    want: &morphoscope::ops::segment::SegmentOutput,
    want_h: &SegmentHierarchy,
    what: &str,
) {
    for i in 0..runs {
        let got = run(op, stream, f, p);
        assert_eq!(&got, want, "{} k={} {what} frame {i}", f.name, p.scale);
        let (_, got_h) = op.download_hierarchy(stream).unwrap();
        assert_eq!((&got_h.parent, &got_h.round), (&want_h.parent, &want_h.round), "{} k={} {what}", f.name, p.scale);
    }
}

/// Programmatic dependent launches and the caterpillar kernels on side streams (the defaults on
/// an H100) give the same labels and hierarchy as plain launches one after another on one
/// stream (`detailed_timing`), on a photograph and on smooth video with large trees.
#[test]
fn programmatic_and_side_stream_launches_change_nothing() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    for (f, p) in photo_and_video(1280, 720) {
        let (want, want_h) = reference(g, &stream, &f, &p, |op| {
            op.programmatic_launch = false;
            op.detailed_timing = true;
        });
        let mut fast = SegmentGpu::new(g).unwrap();
        assert_runs_equal(&mut fast, &stream, &f, &p, 3, &want, &want_h, "");
    }
}

/// The tiny, small and mid-size trees' caterpillars in one launch (`segment_cat_small`, `_mid`),
/// from round 2 or from later rounds, give the labels and hierarchy of the separate kernels on
/// side streams, in direct launches and graph replays; per-launch timing shows which kernels ran.
#[test]
fn fused_caterpillar_launches_change_nothing() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut cases = photo_and_video(1280, 720);
    let mut rng = Rng(31);
    cases.push((blocky_frame(&mut rng, 640, 360, 3, 4, 24), params(100.0)));
    // (caterpillars fused from, mid-size trees with them from)
    let setups: [(u32, u32); 4] = [(2, 2), (2, 0), (2, 4), (5, 9)];
    for (f, p) in cases {
        let (want, want_h) = reference(g, &stream, &f, &p, |op| op.cat_fuse_from = 0);
        for (cat_from, mid_from) in setups {
            let configure = |op: &mut SegmentGpu| {
                op.cat_fuse_from = cat_from;
                op.cat_fuse_mid_from = mid_from;
            };
            let what = format!("caterpillars fused from {cat_from}, mid-size from {mid_from}");
            let mut op = SegmentGpu::new(g).unwrap();
            configure(&mut op);
            assert_runs_equal(&mut op, &stream, &f, &p, 3, &want, &want_h, &what);
            // Timed launch by launch, every round launched (no finisher): the kernels that ran.
            let mut timed = SegmentGpu::new(g).unwrap();
            configure(&mut timed);
            timed.detailed_timing = true;
            timed.finisher = false;
            let mut timer = KernelTimer::new();
            let input = stream.clone_htod(&f.data).unwrap();
            timed.enqueue_channels(&stream, &mut timer, &input, f.width, f.height, f.channels, &p).unwrap();
            let got = timed.download(&stream).unwrap();
            assert_eq!(&got, &want, "{} k={} {what}, timed", f.name, p.scale);
            let regions: Vec<&str> = timer.read().unwrap().iter().map(|(name, _)| *name).collect();
            let ran = |kernel: &str| regions.contains(&kernel);
            assert!(ran("segment_cat_small"), "{} {what}: no segment_cat_small in {regions:?}", f.name);
            assert_eq!(ran("segment_cat_thread"), cat_from > 2, "{} {what}: segment_cat_thread", f.name);
            assert_eq!(ran("segment_cat_mid"), cat_from > 2 || mid_from != 2, "{} {what}: segment_cat_mid", f.name);
        }
    }
}

/// The rounds the finisher runs after the launched ones (`segment_finish`, one block, and
/// `segment_finish_grid`, a cooperative grid, alone or handing the smallest rounds on to
/// `segment_finish`) give the labels and hierarchy of launched rounds: with the default
/// hand-offs, with early ones, and with every round after the first few of each phase left to
/// them (a frame's whole tail in the finisher, inside the graph).
#[test]
fn finisher_rounds_change_nothing() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut cases = photo_and_video(640, 360);
    cases.extend(photo_and_video(1920, 1080).into_iter().take(2));
    // (grid, launched rounds end at this frontier, grid leaves rounds below this to one block)
    let setups: [(bool, Option<u32>, Option<u32>); 6] = [
        (false, None, None),
        (false, Some(u32::MAX), None),
        (true, None, None),
        (true, Some(262_144), Some(0)),
        (true, Some(u32::MAX), Some(100_000)),
        (true, Some(u32::MAX), Some(0)),
    ];
    for (f, p) in cases {
        let (want, want_h) = reference(g, &stream, &f, &p, |op| op.finisher = false);
        for (grid, hand, solo) in setups {
            let mut op = SegmentGpu::new(g).unwrap();
            op.finisher = true;
            assert_eq!(op.set_grid_finisher(grid), grid, "cooperative launch on a GPU that runs these tests");
            if let Some(h) = hand {
                op.finish_frontier = h;
                op.finish_limit = u32::MAX;
            }
            if let Some(s) = solo {
                op.finish_solo = s;
            }
            let what = format!("grid={grid} hand-off={hand:?} solo={solo:?}");
            assert_runs_equal(&mut op, &stream, &f, &p, 4, &want, &want_h, &what);
            assert_eq!(op.reruns(), 0, "{} k={} {what}", f.name, p.scale);
        }
    }
}

/// Replayed CUDA graphs (the default once the round caps come from the previous frame) give
/// the same output as direct launches, alternating two frames and two scales on one op, and a
/// repeated frame replays its graph instead of capturing a new one.
#[test]
fn graph_replays_equal_direct_launches() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let (Some(a), Some(b)) = (tiled("building.jpg", 640, 360, 3), tiled("fruits.jpg", 640, 360, 3)) else { return };
    let mut graphed = SegmentGpu::new(g).unwrap();
    let mut direct = SegmentGpu::new(g).unwrap();
    direct.use_graphs = false;
    let p = |scale: f64| SegmentParams { scale, adaptive_rounds: true, ..SegmentParams::default() };
    for i in 0..8 {
        let f = if i % 2 == 0 { &a } else { &b };
        let scale = if i < 4 { 100.0 } else { 500.0 };
        let want = run(&mut direct, &stream, f, &p(scale));
        let got = run(&mut graphed, &stream, f, &p(scale));
        assert_eq!(got, want, "{} scale {scale}, frame {i}", f.name);
        assert!(got.segment_count > 1 && !got.capped, "{}: {got:?}", f.name);
    }
    assert_eq!(direct.graph_captures(), 0);
    let captured = graphed.graph_captures();
    assert!((1..=7).contains(&captured), "captures {captured}");
    // The caps come from the last 8 frames: once those are all this frame, its caps stay, and
    // it replays one graph (while the other frames leave the history the caps may still move).
    let want = run(&mut direct, &stream, &b, &p(500.0));
    for _ in 0..8 {
        assert_eq!(run(&mut graphed, &stream, &b, &p(500.0)), want);
    }
    let settled = graphed.graph_captures();
    for _ in 0..4 {
        assert_eq!(run(&mut graphed, &stream, &b, &p(500.0)), want);
    }
    assert_eq!(graphed.graph_captures(), settled, "a repeated frame captured again");
}

/// Median of a sample.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

/// Whole-op GPU time (events around one enqueue), host enqueue time, and per-region medians.
#[test]
#[ignore = "benchmark: run with --ignored on the GPU machine"]
fn bench_segment() {
    let Some(g) = gpu() else { return };
    bench_on(g);
}

/// Per-region medians of timer readings (regions summed per run).
fn region_medians(runs: &[Vec<(&'static str, f64)>]) -> String {
    let mut regions: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for r in runs {
        let mut sums: std::collections::BTreeMap<&str, f64> = Default::default();
        for (n, ms) in r {
            *sums.entry(n).or_default() += ms;
        }
        for (n, ms) in sums {
            regions.entry(n).or_default().push(ms);
        }
    }
    regions.iter_mut().map(|(n, v)| format!("{n} {:.3}", median(v))).collect::<Vec<_>>().join(", ")
}

fn bench_on(g: &GpuContext) {
    let stream = g.new_stream().unwrap();
    let runs: usize = std::env::var("SEG_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let mut probe = SegmentGpu::new(g).unwrap();
    println!(
        "device: {} ({} SMs); finisher: {} blocks, hand-off at {} frontier pixels, limit {}, solo {}",
        g.info().name,
        g.info().multiprocessors,
        if probe.set_grid_finisher(true) && std::env::var_os("MORPHOSCOPE_SEG_BLOCK_FINISH").is_none() { probe.grid_finish_blocks() } else { 1 },
        SegmentGpu::new(g).unwrap().finish_frontier,
        SegmentGpu::new(g).unwrap().finish_limit,
        probe.finish_solo
    );
    println!(
        "| frame | scale | segments | rounds (merge / min_size) | GPU ms median (min), graph | first frame (full caps) ms | enqueue host ms, graph | direct launches: GPU / host ms | regions, graph (ms) | per phase, direct (ms) | per kernel, detailed (ms) |"
    );
    for (name, w, h, ch) in [
        ("building.jpg", 1920, 1080, 3),
        ("fruits.jpg", 1920, 1080, 3),
        ("fruits.jpg", 1920, 1080, 1),
        ("building.jpg", 4096, 2160, 3),
        // A frame of the sample clip scaled to 1080p by GStreamer (smooth: the hard case).
        ("vtest_1080.png", 1920, 1080, 3),
    ] {
        // SEG_BENCH_ONLY=<substring>: only the frames whose name contains it.
        if std::env::var("SEG_BENCH_ONLY").is_ok_and(|o| !format!("{name} {w}x{h}x{ch}").contains(&o)) {
            continue;
        }
        let Some(f) = tiled(name, w, h, ch) else { continue };
        let input = stream.clone_htod(&f.data).unwrap();
        for scale in [100.0, 500.0] {
            let p = SegmentParams { scale, adaptive_rounds: true, ..SegmentParams::default() };
            let mut op = SegmentGpu::new(g).unwrap();
            // SEG_BENCH_PDL=0: measure without programmatic dependent launches.
            op.programmatic_launch = std::env::var("SEG_BENCH_PDL").map_or(true, |v| v != "0");
            let ctx = g.cuda();
            let e0 = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
            let e1 = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
            let mut timer = KernelTimer::new();
            // First frame: full round caps (no hint yet).
            let mut first_ms = Vec::new();
            for _ in 0..2 {
                let mut fresh = SegmentGpu::new(g).unwrap();
                fresh.enqueue_channels(&stream, &mut timer, &input, w, h, ch, &p).unwrap();
                stream.synchronize().unwrap();
                timer.reset();
                e0.record(&stream).unwrap();
                fresh
                    .enqueue_channels(
                        &stream,
                        &mut timer,
                        &input,
                        w,
                        h,
                        ch,
                        &SegmentParams { adaptive_rounds: false, ..p },
                    )
                    .unwrap();
                e1.record(&stream).unwrap();
                e1.synchronize().unwrap();
                first_ms.push(f64::from(e0.elapsed_ms(&e1).unwrap()));
            }
            for _ in 0..3 {
                timer.reset();
                op.enqueue_channels(&stream, &mut timer, &input, w, h, ch, &p).unwrap();
                op.download(&stream).unwrap();
            }
            let mut steady = |op: &mut SegmentGpu| {
                let (mut gpu_ms, mut host_ms, mut phases, mut out) = (Vec::new(), Vec::new(), Vec::new(), None);
                for _ in 0..runs {
                    timer.reset();
                    e0.record(&stream).unwrap();
                    let t = Instant::now();
                    op.enqueue_channels(&stream, &mut timer, &input, w, h, ch, &p).unwrap();
                    host_ms.push(t.elapsed().as_secs_f64() * 1e3);
                    e1.record(&stream).unwrap();
                    e1.synchronize().unwrap();
                    gpu_ms.push(f64::from(e0.elapsed_ms(&e1).unwrap()));
                    phases.push(timer.read().unwrap());
                    out = Some(op.download(&stream).unwrap());
                }
                (gpu_ms, host_ms, phases, out.unwrap())
            };
            let (mut gpu_ms, mut host_ms, phases, out) = steady(&mut op);
            // The same steady state with direct launches instead of the captured graph.
            op.use_graphs = false;
            let (mut direct_gpu, mut direct_host, direct_phases, direct_out) = steady(&mut op);
            assert_eq!(direct_out, out);
            op.detailed_timing = true;
            let mut detailed = Vec::new();
            for _ in 0..runs.min(5) {
                timer.reset();
                op.enqueue_channels(&stream, &mut timer, &input, w, h, ch, &p).unwrap();
                stream.synchronize().unwrap();
                detailed.push(timer.read().unwrap());
            }
            // SEG_BENCH_KERNELS=1: the last detailed run's launches (events around each, so
            // serialised), a line per round (a round starts at its least-edge kernel).
            if std::env::var("SEG_BENCH_KERNELS").as_deref() == Ok("1") {
                println!("kernels {} k={scale}:", f.name);
                let mut line = String::new();
                for (n, ms) in detailed.last().map(Vec::as_slice).unwrap_or(&[]) {
                    if *n == "segment_minedge" && !line.is_empty() {
                        println!("  {line}");
                        line.clear();
                    }
                    line.push_str(&format!("{} {:.0} ", n.trim_start_matches("segment_"), ms * 1e3));
                }
                println!("  {line}");
            }
            // SEG_BENCH_PROFILE=1: each round's time as the graph replays it (stamped), with its
            // list counts, median over the runs.
            if std::env::var("SEG_BENCH_PROFILE").as_deref() == Ok("1") {
                op.detailed_timing = false;
                op.use_graphs = true;
                op.round_stamps = true;
                let mut per: Vec<(String, Vec<f64>, Vec<u32>)> = Vec::new();
                for run in 0..runs + 1 {
                    timer.reset();
                    op.enqueue_channels(&stream, &mut timer, &input, w, h, ch, &p).unwrap();
                    stream.synchronize().unwrap();
                    let prof = op.round_profile(&stream).unwrap();
                    if run == 0 {
                        continue; // the capture
                    }
                    for (i, (label, us, counts)) in prof.into_iter().enumerate() {
                        if per.len() <= i {
                            per.push((label, Vec::new(), counts));
                        }
                        per[i].1.push(us);
                    }
                }
                let total: f64 = per.iter_mut().map(|(_, v, _)| median(v)).sum();
                println!("profile {} k={scale}: {total:.1} us stamped (frontier roots trees members small large cursor tiny mid giant)", f.name);
                for (label, v, c) in &mut per {
                    println!("  {label:14} {:8.1} us  {c:?}", median(v));
                }
                op.round_stamps = false;
            }
            let min = gpu_ms.iter().copied().fold(f64::INFINITY, f64::min);
            println!(
                "| {} | {scale} | {} | {}/{}{} | {:.3} ({min:.3}) | {:.3} | {:.3} | {:.3} / {:.3} | {} | {} | {} |",
                f.name,
                out.segment_count,
                out.rounds,
                out.min_size_rounds,
                if out.capped { " capped" } else { "" },
                median(&mut gpu_ms),
                median(&mut first_ms),
                median(&mut host_ms),
                median(&mut direct_gpu),
                median(&mut direct_host),
                region_medians(&phases),
                region_medians(&direct_phases),
                region_medians(&detailed)
            );
        }
        // The scikit-image-exact CPU reference (rayon sort) on the same frame, once.
        let t = Instant::now();
        let cpu = felzenszwalb_interleaved(&f.data, w, h, ch, &params(500.0)).unwrap();
        println!(
            "| {} | 500 | {} | CPU reference (Rust, {} threads): {:.1} ms | | | | | | | |",
            f.name,
            cpu.segment_count,
            rayon_threads(),
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
