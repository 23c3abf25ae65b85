//! Max-tree timings (run with --ignored --nocapture): GPU (CUDA events, median of MAXTREE_BENCH_RUNS runs after
//! MAXTREE_BENCH_WARMUP) per kernel region and total, for tree construction and the full area opening, on real
//! 1080p and 4K frames (tiled samples), 8-bit 4/8-conn and 16-bit (paper §6.3 luminance
//! protocol); and the CPU backend (median of MAXTREE_BENCH_CPU_RUNS) in the same run. Results as markdown rows
//! on stdout and in $MAXTREE_BENCH_OUT (if set).

// Helpers outside `#[test]` functions unwrap and panic as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::fmt::Write as _;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use morphoscope::gpu::{GpuContext, KernelTimer, upload_view};
use morphoscope::image::Image;
use morphoscope::ops::maxtree::{
    Attribute, Connectivity, GpuGray, MaxTree, MaxTreeGpu, MaxTreeTuning, Rule, TreeKind,
};

fn env(name: &str, d: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(d)
}

fn gpu_case<T: GpuGray>(
    g: &GpuContext,
    img: &Image<T>,
    c: Connectivity,
    full: bool,
    label: &str,
    out: &mut String,
) {
    gpu_case_th(g, img, c, full, None, label, out)
}

/// One timed case; `th`: a tile height other than the device's default.
fn gpu_case_th<T: GpuGray>(
    g: &GpuContext,
    img: &Image<T>,
    c: Connectivity,
    full: bool,
    th: Option<usize>,
    label: &str,
    out: &mut String,
) {
    let (w, h) = (img.width(), img.height());
    let stream = g.new_stream().unwrap();
    let uploaded = upload_view(&stream, img.view()).unwrap();
    let input = uploaded.image();
    let default = MaxTreeTuning::for_device(g.info());
    let tuning = MaxTreeTuning {
        tile_height: th.unwrap_or(default.tile_height),
        ..default
    };
    let mut mt = MaxTreeGpu::with_tuning(g, tuning).unwrap();
    let mut timer = KernelTimer::new();
    let (warm, iters) = (
        env("MAXTREE_BENCH_WARMUP", 5),
        env("MAXTREE_BENCH_RUNS", 60),
    );
    let mut totals = Vec::new();
    let mut regions: Vec<(&'static str, Vec<f64>)> = Vec::new();
    for i in 0..warm + iters {
        timer.reset();
        let start = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap();
        mt.enqueue_tree(&mut timer, input, TreeKind::Max, c)
            .unwrap();
        if full {
            mt.enqueue_attribute(&stream, &mut timer, Attribute::Area)
                .unwrap();
            mt.enqueue_filter(&mut timer, input, 100.0, Rule::Direct)
                .unwrap();
        }
        let end = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .unwrap();
        end.synchronize().unwrap();
        if i < warm {
            continue;
        }
        totals.push(f64::from(start.elapsed_ms(&end).unwrap()));
        for (name, ms) in timer.read().unwrap() {
            match regions.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => v.push(ms),
                None => regions.push((name, vec![ms])),
            }
        }
    }
    let nodes = mt.download_node_count(&stream).unwrap();
    let t = common::median(&mut totals);
    let mpix = (w * h) as f64 / 1e6;
    let mut parts = String::new();
    for (name, v) in regions.iter_mut() {
        let _ = write!(
            parts,
            "{}={:.3} ",
            name.trim_start_matches("maxtree_"),
            common::median(v)
        );
    }
    let line = format!(
        "| {label} | {w}x{h} | {} | {}{} | {:.3} | {:.0} | {parts}| {nodes} |",
        if full { "area opening λ=100" } else { "tree" },
        tuning.tile_height,
        if th.is_none() { " (default)" } else { "" },
        t,
        mpix / (t / 1e3),
    );
    println!("{line}");
    out.push_str(&line);
    out.push('\n');
}

fn cpu_case<T: morphoscope::image::Gray>(
    img: &Image<T>,
    c: Connectivity,
    label: &str,
    out: &mut String,
) {
    let iters = env("MAXTREE_BENCH_CPU_RUNS", 5);
    let (mut tb, mut tf) = (Vec::new(), Vec::new());
    for _ in 0..iters {
        let t0 = Instant::now();
        let t = MaxTree::build(img.view(), TreeKind::Max, c).unwrap();
        let t1 = Instant::now();
        let o = t.filter(Attribute::Area, 100.0, Rule::Direct);
        let t2 = Instant::now();
        std::hint::black_box(o);
        tb.push((t1 - t0).as_secs_f64() * 1e3);
        tf.push((t2 - t0).as_secs_f64() * 1e3);
    }
    let (b, f) = (common::median(&mut tb), common::median(&mut tf));
    let mpix = (img.width() * img.height()) as f64 / 1e6;
    let line = format!(
        "| CPU {label} | {}x{} | tree {:.1} ms ({:.1} MPix/s) | area opening {:.1} ms ({:.1} MPix/s) |",
        img.width(),
        img.height(),
        b,
        mpix / (b / 1e3),
        f,
        mpix / (f / 1e3)
    );
    println!("{line}");
    out.push_str(&line);
    out.push('\n');
}

#[test]
#[ignore]
fn bench_maxtree() {
    let mut out = String::new();
    let names = ["baboon.jpg", "building.jpg", "fruits.jpg"];
    let sizes = [(1920usize, 1080usize), (3840, 2160)];
    let g = common::gpu();
    if let Some(g) = g {
        println!(
            "device: {} ({:?})",
            g.info().name,
            g.info().compute_capability
        );
        if let Ok(p) = std::env::var("MAXTREE_BENCH_PROFILE") {
            // For ncu: the same work twice (the profiler skips the first, warm-up, run).
            let img = common::tiled_gray("baboon.jpg", 3840, 2160).unwrap();
            let img16 = common::tiled_gray16("baboon.jpg", 3840, 2160).unwrap();
            let stream = g.new_stream().unwrap();
            let mut mt = MaxTreeGpu::new(g).unwrap();
            let mut timer = KernelTimer::new();
            for _ in 0..2 {
                timer.reset();
                if p == "8" {
                    let input = upload_view(&stream, img.view()).unwrap();
                    mt.enqueue_tree(&mut timer, input.image(), TreeKind::Max, Connectivity::Four)
                        .unwrap();
                    mt.enqueue_attribute(&stream, &mut timer, Attribute::Area)
                        .unwrap();
                    mt.enqueue_filter(&mut timer, input.image(), 100.0, Rule::Direct)
                        .unwrap();
                } else {
                    let input = upload_view(&stream, img16.view()).unwrap();
                    mt.enqueue_tree(&mut timer, input.image(), TreeKind::Max, Connectivity::Four)
                        .unwrap();
                }
                stream.synchronize().unwrap();
            }
            return;
        }
        println!(
            "| frame | size | work | tile h | median ms | MPix/s | regions (median ms) | nodes |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for &(w, h) in &sizes {
            for name in names {
                let Some(img) = common::tiled_gray(name, w, h) else {
                    return;
                };
                for (c, cs) in [(Connectivity::Four, "4"), (Connectivity::Eight, "8")] {
                    for full in [false, true] {
                        gpu_case(g, &img, c, full, &format!("{name} u8 {cs}-conn"), &mut out);
                    }
                }
                if w > 2000 {
                    for th in [32, 64] {
                        gpu_case_th(
                            g,
                            &img,
                            Connectivity::Four,
                            false,
                            Some(th),
                            &format!("{name} u8 4-conn"),
                            &mut out,
                        );
                    }
                }
                let Some(img16) = common::tiled_gray16(name, w, h) else {
                    return;
                };
                for full in [false, true] {
                    gpu_case(
                        g,
                        &img16,
                        Connectivity::Four,
                        full,
                        &format!("{name} u16 4-conn"),
                        &mut out,
                    );
                }
                gpu_case(
                    g,
                    &img16,
                    Connectivity::Eight,
                    false,
                    &format!("{name} u16 8-conn"),
                    &mut out,
                );
                if w > 2000 {
                    gpu_case_th(
                        g,
                        &img16,
                        Connectivity::Four,
                        false,
                        Some(32),
                        &format!("{name} u16 4-conn"),
                        &mut out,
                    );
                }
            }
        }
    }
    if env("MAXTREE_BENCH_CPU", 1) == 1 {
        for &(w, h) in &sizes {
            let Some(img) = common::tiled_gray("building.jpg", w, h) else {
                return;
            };
            cpu_case(&img, Connectivity::Four, "building u8 4-conn", &mut out);
            cpu_case(&img, Connectivity::Eight, "building u8 8-conn", &mut out);
            let Some(img16) = common::tiled_gray16("building.jpg", w, h) else {
                return;
            };
            cpu_case(&img16, Connectivity::Four, "building u16 4-conn", &mut out);
        }
    }
    if let Ok(p) = std::env::var("MAXTREE_BENCH_OUT") {
        std::fs::write(p, out).unwrap();
    }
}
