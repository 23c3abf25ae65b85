//! `#[ignore]`d benchmarks of the segmentation (run with `--ignored` on the GPU machine; built
//! only with the `profiling` feature, whose per-launch timing and round stamps they read):
//! `bench_segmentation` (whole-op GPU time with captured graphs, the first frame, direct launches,
//! per-phase and per-kernel regions, optionally each round's stamped time) and
//! `bench_segmentation_tuning` (a few [`SegmentationTuning`] fields swept around the device's defaults).
//! `SEGMENTATION_BENCH_RUNS` (30), `SEGMENTATION_BENCH_ONLY` (a frame name substring), `SEGMENTATION_BENCH_KERNELS=1`,
//! `SEGMENTATION_BENCH_PROFILE=1`:
//!
//! ```sh
//! SEGMENTATION_BENCH_RUNS=21 cargo test --release --features profiling --test gpu -- --ignored bench_segmentation --nocapture --test-threads=1
//! ```
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns (clippy.toml allows it inside)

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaStream;
use cudarc::driver::sys::CUevent_flags;
use morphoscope::gpu::{GpuContext, KernelTimer};
use morphoscope::ops::segmentation::cpu::felzenszwalb_interleaved;
use morphoscope::ops::segmentation::{
    Finisher, SegmentationGpu, SegmentationOutput, SegmentationParams, SegmentationProfiling,
    SegmentationTuning,
};

use crate::common::gpu;
use crate::segmentation::{Frame, enqueue, params, tiled, upload};

/// Median of a sample.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Whole-op GPU time (events around one enqueue), host enqueue time, and per-region medians.
#[test]
#[ignore = "benchmark: run with --ignored on the GPU machine"]
fn bench_segmentation() {
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
    regions
        .iter_mut()
        .map(|(n, v)| format!("{n} {:.3}", median(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// GPU ms, host enqueue ms and timer regions of each run, and the last output.
type Steady = (
    Vec<f64>,
    Vec<f64>,
    Vec<Vec<(&'static str, f64)>>,
    SegmentationOutput,
);

/// Steady-state GPU time of `op` on one frame: events around each enqueue after 3 warm-up
/// frames; (GPU ms, host enqueue ms, timer regions) per run, and the last output.
fn steady(
    op: &mut SegmentationGpu,
    stream: &Arc<CudaStream>,
    input: &cudarc::driver::CudaSlice<u8>,
    f: &Frame,
    p: &SegmentationParams,
    runs: usize,
) -> Steady {
    let ctx = stream.context();
    let e0 = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .unwrap();
    let e1 = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .unwrap();
    let mut timer = KernelTimer::new();
    for _ in 0..3 {
        timer.reset();
        enqueue(op, stream, input, f, p, &mut timer);
        op.download(stream).unwrap();
    }
    let (mut gpu_ms, mut host_ms, mut regions, mut out) =
        (Vec::new(), Vec::new(), Vec::new(), None);
    for _ in 0..runs {
        timer.reset();
        e0.record(stream).unwrap();
        let t = Instant::now();
        enqueue(op, stream, input, f, p, &mut timer);
        host_ms.push(t.elapsed().as_secs_f64() * 1e3);
        e1.record(stream).unwrap();
        e1.synchronize().unwrap();
        gpu_ms.push(f64::from(e0.elapsed_ms(&e1).unwrap()));
        regions.push(timer.read().unwrap());
        out = Some(op.download(stream).unwrap());
    }
    (gpu_ms, host_ms, regions, out.unwrap())
}

/// The benchmark's frames: 1080p photographs (RGB and grey), 4K, and a frame of the sample clip
/// scaled to 1080p by GStreamer (smooth: large and giant trees, the hard case). `SEGMENTATION_BENCH_ONLY`
/// (a substring of the name) keeps some of them.
fn bench_frames() -> Vec<Frame> {
    let mut frames = Vec::new();
    for (name, w, h, ch) in [
        ("building.jpg", 1920, 1080, 3),
        ("fruits.jpg", 1920, 1080, 3),
        ("fruits.jpg", 1920, 1080, 1),
        ("building.jpg", 4096, 2160, 3),
        ("vtest_1080.png", 1920, 1080, 3),
    ] {
        if std::env::var("SEGMENTATION_BENCH_ONLY")
            .is_ok_and(|o| !format!("{name} {w}x{h}x{ch}").contains(&o))
        {
            continue;
        }
        frames.extend(tiled(name, w, h, ch));
    }
    frames
}

fn bench_runs() -> usize {
    std::env::var("SEGMENTATION_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

fn bench_on(g: &GpuContext) {
    let stream = g.new_stream().unwrap();
    let runs = bench_runs();
    let probe = SegmentationGpu::new(g).unwrap();
    println!(
        "device: {} ({} SMs); tuning {:?}; finisher as run {:?}, grid {} blocks, giant grid {} blocks",
        g.info().name,
        g.info().multiprocessors,
        probe.tuning(),
        probe.finisher(),
        probe.grid_finish_blocks(),
        probe.giant_blocks()
    );
    println!(
        "| frame | scale | segments | rounds (merge / min_size) | GPU ms median (min), graph | first frame (full caps) ms | enqueue host ms, graph | direct launches: GPU / host ms | regions, graph (ms) | per phase, direct (ms) | per kernel, detailed (ms) |"
    );
    for f in bench_frames() {
        let input = upload(&stream, &f);
        for scale in [100.0, 500.0] {
            let p = SegmentationParams {
                scale,
                adaptive_rounds: true,
                ..SegmentationParams::default()
            };
            let ctx = g.cuda();
            let e0 = ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .unwrap();
            let e1 = ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .unwrap();
            let mut timer = KernelTimer::new();
            // First frame: full round caps (no hint yet).
            let mut first_ms = Vec::new();
            for _ in 0..2 {
                let mut fresh = SegmentationGpu::new(g).unwrap();
                enqueue(&mut fresh, &stream, &input, &f, &p, &mut timer);
                stream.synchronize().unwrap();
                timer.reset();
                e0.record(&stream).unwrap();
                enqueue(
                    &mut fresh,
                    &stream,
                    &input,
                    &f,
                    &SegmentationParams {
                        adaptive_rounds: false,
                        ..p
                    },
                    &mut timer,
                );
                e1.record(&stream).unwrap();
                e1.synchronize().unwrap();
                first_ms.push(f64::from(e0.elapsed_ms(&e1).unwrap()));
            }
            let mut op = SegmentationGpu::new(g).unwrap();
            let (mut gpu_ms, mut host_ms, phases, out) =
                steady(&mut op, &stream, &input, &f, &p, runs);
            // The same steady state with direct launches instead of the captured graph.
            op.set_tuning(SegmentationTuning {
                graphs: false,
                ..*op.tuning()
            })
            .unwrap();
            let (mut direct_gpu, mut direct_host, direct_phases, direct_out) =
                steady(&mut op, &stream, &input, &f, &p, runs);
            assert_eq!(direct_out, out);
            op.set_profiling(SegmentationProfiling {
                per_kernel_timing: true,
                ..SegmentationProfiling::default()
            });
            let mut detailed = Vec::new();
            for _ in 0..runs.min(5) {
                timer.reset();
                enqueue(&mut op, &stream, &input, &f, &p, &mut timer);
                stream.synchronize().unwrap();
                detailed.push(timer.read().unwrap());
            }
            // SEGMENTATION_BENCH_KERNELS=1: the last detailed run's launches (events around each, so
            // serialised), a line per round (a round starts at its least-edge kernel).
            if std::env::var("SEGMENTATION_BENCH_KERNELS").as_deref() == Ok("1") {
                println!("kernels {} k={scale}:", f.name);
                let mut line = String::new();
                for (n, ms) in detailed.last().map(Vec::as_slice).unwrap_or(&[]) {
                    if *n == "segment_minedge" && !line.is_empty() {
                        println!("  {line}");
                        line.clear();
                    }
                    line.push_str(&format!(
                        "{} {:.0} ",
                        n.trim_start_matches("segmentation_"),
                        ms * 1e3
                    ));
                }
                println!("  {line}");
            }
            // SEGMENTATION_BENCH_PROFILE=1: each round's time as the graph replays it (stamped), with its
            // list counts, median over the runs.
            if std::env::var("SEGMENTATION_BENCH_PROFILE").as_deref() == Ok("1") {
                op.set_tuning(SegmentationTuning {
                    graphs: true,
                    ..*op.tuning()
                })
                .unwrap();
                op.set_profiling(SegmentationProfiling {
                    round_stamps: true,
                    ..SegmentationProfiling::default()
                });
                let mut per: Vec<(String, Vec<f64>, Vec<u32>)> = Vec::new();
                for run in 0..runs + 1 {
                    timer.reset();
                    enqueue(&mut op, &stream, &input, &f, &p, &mut timer);
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
                println!(
                    "profile {} k={scale}: {total:.1} us stamped (frontier roots trees members small large cursor tiny mid giant)",
                    f.name
                );
                for (label, v, c) in &mut per {
                    println!("  {label:14} {:8.1} us  {c:?}", median(v));
                }
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
        let cpu = felzenszwalb_interleaved(&f.data, f.width, f.height, f.channels, &params(500.0))
            .unwrap();
        println!(
            "| {} | 500 | {} | CPU reference (Rust, {} threads): {:.1} ms | | | | | | | |",
            f.name,
            cpu.segment_count,
            rayon_threads(),
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}

/// Sweeps a few tuning fields around the device's defaults: steady-state GPU ms (median of
/// `SEGMENTATION_BENCH_RUNS`, graph replays) per frame and scale, every value on one op's fresh copy in
/// the same run, each result checked against the defaults'.
#[test]
#[ignore = "benchmark: run with --ignored on the GPU machine"]
fn bench_segmentation_tuning() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let runs = bench_runs();
    let base = SegmentationTuning::for_device(g.info());
    let sweeps: Vec<(String, SegmentationTuning)> = [
        ("defaults".to_owned(), base),
        (
            "mid_trees_fused_from 2".to_owned(),
            SegmentationTuning {
                mid_trees_fused_from: Some(2),
                ..base
            },
        ),
        (
            "mid_trees_fused_from 7".to_owned(),
            SegmentationTuning {
                mid_trees_fused_from: Some(7),
                ..base
            },
        ),
        (
            "mid_trees_fused_from none".to_owned(),
            SegmentationTuning {
                mid_trees_fused_from: None,
                ..base
            },
        ),
        (
            "giant_blocks 32".to_owned(),
            SegmentationTuning {
                giant_blocks: 32,
                ..base
            },
        ),
        (
            "giant_blocks 132".to_owned(),
            SegmentationTuning {
                giant_blocks: 132,
                ..base
            },
        ),
        (
            "handoff_frontier 4096".to_owned(),
            SegmentationTuning {
                finisher: Finisher {
                    handoff_frontier: 4_096,
                    ..base.finisher
                },
                ..base
            },
        ),
        (
            "handoff_frontier 16384".to_owned(),
            SegmentationTuning {
                finisher: Finisher {
                    handoff_frontier: 16_384,
                    ..base.finisher
                },
                ..base
            },
        ),
        (
            "solo_frontier 1024".to_owned(),
            SegmentationTuning {
                finisher: Finisher {
                    solo_frontier: 1_024,
                    ..base.finisher
                },
                ..base
            },
        ),
        (
            "small_blocks_per_sm 6".to_owned(),
            SegmentationTuning {
                small_blocks_per_sm: 6,
                ..base
            },
        ),
        (
            "round_step 2".to_owned(),
            SegmentationTuning {
                round_step: 2,
                ..base
            },
        ),
    ]
    .into_iter()
    .collect();
    println!(
        "device: {} ({} SMs); GPU ms median of {runs} (min)",
        g.info().name,
        g.info().multiprocessors
    );
    for f in bench_frames() {
        let input = upload(&stream, &f);
        for scale in [100.0, 500.0] {
            let p = SegmentationParams {
                scale,
                adaptive_rounds: true,
                ..SegmentationParams::default()
            };
            let mut want = None;
            let mut line = format!("| {} | {scale} |", f.name);
            for (what, tuning) in &sweeps {
                let mut op = SegmentationGpu::with_tuning(g, *tuning).unwrap();
                let (mut gpu_ms, _, _, out) = steady(&mut op, &stream, &input, &f, &p, runs);
                let want = want.get_or_insert_with(|| out.clone());
                assert_eq!(
                    &out, want,
                    "{} k={scale}: {what} changed the result",
                    f.name
                );
                let min = gpu_ms.iter().copied().fold(f64::INFINITY, f64::min);
                line.push_str(&format!(" {what}: {:.3} ({min:.3}) |", median(&mut gpu_ms)));
            }
            println!("{line}");
        }
    }
}
fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
