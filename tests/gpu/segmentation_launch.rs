//! How the segmentation launches frames, checked on the GPU: adaptive round caps on repeated
//! and changing frames (reruns), captured graphs against direct launches, the device labels
//! and small readback against the full download, and the tuning values that pick other
//! kernels, streams or hand-offs ([`SegmentationTuning`]): the same labels and hierarchy for each.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns (clippy.toml allows it inside)

use std::sync::Arc;

use cudarc::driver::CudaStream;
use morphoscope::gpu::KernelTimer;
use morphoscope::image::Image;
#[cfg(feature = "profiling")]
use morphoscope::ops::segmentation::SegmentationProfiling;
use morphoscope::ops::segmentation::{
    Finisher, SegmentationGpu, SegmentationHierarchy, SegmentationOutput, SegmentationParams,
    SegmentationTuning,
};

use crate::common::{Rng, gpu};
use crate::segmentation::{Frame, blocky_frame, enqueue, op_with, params, run, tiled, upload};

#[test]
fn adaptive_rounds_keep_results_on_repeated_frames() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let Some(f) = tiled("building.jpg", 960, 540, 3) else {
        return;
    };
    let p = SegmentationParams {
        scale: 500.0,
        adaptive_rounds: true,
        ..SegmentationParams::default()
    };
    let mut op = SegmentationGpu::new(g).unwrap();
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
    let Some(photo) = tiled("building.jpg", 640, 360, 3) else {
        return;
    };
    let flat = flat_frame();
    let p = adaptive_params();
    let mut fixed = SegmentationGpu::new(g).unwrap();
    let want = run(
        &mut fixed,
        &stream,
        &photo,
        &SegmentationParams {
            adaptive_rounds: false,
            ..p
        },
    );
    // The finisher would take the few extra rounds itself (the tile pass leaves a short tail);
    // a low limit makes the frame need the rerun this test is about.
    let mut op = op_with(g, |t| {
        (t.finisher.handoff_frontier, t.finisher.frontier_limit) = (1000, 1000);
    });
    let f0 = run(&mut op, &stream, &flat, &p);
    assert_eq!(f0.segment_count, 1);
    for i in 0..3 {
        let got = run(&mut op, &stream, &photo, &p);
        assert_eq!(got, want, "photo after the flat frame, {i}");
        assert!(!got.capped);
    }
    eprintln!(
        "rounds {}+{}, reruns {}",
        want.rounds,
        want.min_size_rounds,
        op.reruns()
    );
    assert_eq!(
        op.reruns(),
        1,
        "only the first photograph after the flat frame runs again"
    );
    assert_eq!(run(&mut op, &stream, &flat, &p), f0);
}

/// A photograph and smooth video (large trees) at `width` x `height`, k = 100 and 500, with
/// adaptive round caps (the pipeline's settings).
fn photo_and_video(width: usize, height: usize) -> Vec<(Frame, SegmentationParams)> {
    let mut cases = Vec::new();
    for name in ["building.jpg", "vtest_1080.png"] {
        for scale in [100.0, 500.0] {
            if let Some(f) = tiled(name, width, height, 3) {
                cases.push((
                    f,
                    SegmentationParams {
                        scale,
                        adaptive_rounds: true,
                        ..SegmentationParams::default()
                    },
                ));
            }
        }
    }
    cases
}

/// Result and hierarchy of `f` on `op`, a fresh op.
fn reference(
    mut op: SegmentationGpu,
    stream: &Arc<CudaStream>,
    f: &Frame,
    p: &SegmentationParams,
) -> (SegmentationOutput, SegmentationHierarchy) {
    let out = run(&mut op, stream, f, p);
    let (_, hier) = op.download_hierarchy(stream).unwrap();
    (out, hier)
}

/// Segments `f` `runs` times on `op` (the later runs replay its graph) and asserts each result
/// and hierarchy equal the reference's.
fn assert_runs_equal(
    op: &mut SegmentationGpu,
    stream: &Arc<CudaStream>,
    f: &Frame,
    p: &SegmentationParams,
    runs: usize,
    (want, want_h): &(SegmentationOutput, SegmentationHierarchy),
    what: &str,
) {
    for i in 0..runs {
        let got = run(op, stream, f, p);
        assert_eq!(&got, want, "{} k={} {what} frame {i}", f.name, p.scale);
        let (_, got_h) = op.download_hierarchy(stream).unwrap();
        assert_eq!(
            (&got_h.parent, &got_h.round),
            (&want_h.parent, &want_h.round),
            "{} k={} {what}",
            f.name,
            p.scale
        );
    }
}

/// Programmatic dependent launches and the caterpillar kernels on side streams (the defaults on
/// an H100) give the same labels and hierarchy as plain launches one after another on one
/// stream ([`SegmentationTuning::pdl`] off, per-kernel timing: the `profiling` feature), on a
/// photograph and on smooth video with large trees.
#[cfg(feature = "profiling")]
#[test]
fn programmatic_and_side_stream_launches_change_nothing() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    for (f, p) in photo_and_video(1280, 720) {
        let mut plain = op_with(g, |t| t.pdl = false);
        plain.set_profiling(SegmentationProfiling {
            per_kernel_timing: true,
            ..SegmentationProfiling::default()
        });
        let want = reference(plain, &stream, &f, &p);
        let mut fast = SegmentationGpu::new(g).unwrap();
        assert_runs_equal(&mut fast, &stream, &f, &p, 3, &want, "");
    }
}

/// The mid-size trees walked in the launch of the tiny and small ones (`segmentation_cat_small_mid`)
/// from round 2, from round 4 (the default), from round 9, or never
/// ([`SegmentationTuning::mid_trees_fused_from`]) give the same labels and hierarchy, in direct
/// launches and graph replays; with the `profiling` feature, per-launch timing of a first frame
/// (every round launched) shows which kernels ran.
#[test]
fn mid_size_trees_fused_from_any_round_change_nothing() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut cases = photo_and_video(1280, 720);
    let mut rng = Rng(31);
    cases.push((blocky_frame(&mut rng, 640, 360, 3, 4, 24), params(100.0)));
    for (f, p) in cases {
        let want = reference(
            op_with(g, |t| t.mid_trees_fused_from = None),
            &stream,
            &f,
            &p,
        );
        for from in [Some(2), Some(4), Some(9), None] {
            let what = format!("mid-size trees fused from {from:?}");
            let mut op = op_with(g, |t| t.mid_trees_fused_from = from);
            assert_runs_equal(&mut op, &stream, &f, &p, 3, &want, &what);
            #[cfg(feature = "profiling")]
            assert_kernels_ran(g, &stream, &f, &p, from, &want.0, &what);
        }
    }
}

/// A first frame timed launch by launch (the `profiling` feature) with the mid-size trees fused
/// from round `from`: the labels are `want`'s, `segmentation_cat_small` ran, and `segmentation_cat_mid`
/// ran unless the mid-size trees are fused from round 2.
#[cfg(feature = "profiling")]
fn assert_kernels_ran(
    g: &morphoscope::gpu::GpuContext,
    stream: &Arc<CudaStream>,
    f: &Frame,
    p: &SegmentationParams,
    from: Option<u32>,
    want: &SegmentationOutput,
    what: &str,
) {
    let mut timed = op_with(g, |t| t.mid_trees_fused_from = from);
    timed.set_profiling(SegmentationProfiling {
        per_kernel_timing: true,
        ..SegmentationProfiling::default()
    });
    let mut timer = KernelTimer::new();
    let input = upload(stream, f);
    enqueue(&mut timed, stream, &input, f, p, &mut timer);
    let got = timed.download(stream).unwrap();
    assert_eq!(&got, want, "{} k={} {what}, timed", f.name, p.scale);
    let regions: Vec<&str> = timer
        .read()
        .unwrap()
        .iter()
        .map(|(name, _)| *name)
        .collect();
    let ran = |kernel: &str| regions.contains(&kernel);
    assert!(
        ran("segmentation_cat_small"),
        "{} {what}: no segmentation_cat_small in {regions:?}",
        f.name
    );
    assert_eq!(
        ran("segmentation_cat_mid"),
        from != Some(2),
        "{} {what}: segmentation_cat_mid",
        f.name
    );
}

/// The rounds the finisher runs after the launched ones (`segmentation_finish`, one block, and
/// `segmentation_finish_grid`, a cooperative grid, alone or handing the smallest rounds on to
/// `segmentation_finish`) give the labels and hierarchy of launched rounds (a first frame: every
/// round launched): with the default hand-offs, with early ones, and with every round after the
/// first few of each phase left to them (a frame's whole tail in the finisher, inside the graph).
#[test]
fn finisher_rounds_change_nothing() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut cases = photo_and_video(640, 360);
    cases.extend(photo_and_video(1920, 1080).into_iter().take(2));
    let everything = |f: Finisher| Finisher {
        handoff_frontier: u32::MAX,
        frontier_limit: u32::MAX,
        ..f
    };
    let setups = [
        Finisher::block(),
        everything(Finisher::block()),
        Finisher::grid(),
        Finisher {
            handoff_frontier: 262_144,
            solo_frontier: 0,
            ..Finisher::grid()
        },
        Finisher {
            solo_frontier: 100_000,
            ..everything(Finisher::grid())
        },
        Finisher {
            solo_frontier: 0,
            ..everything(Finisher::grid())
        },
    ];
    for (f, p) in cases {
        let fixed = SegmentationParams {
            adaptive_rounds: false,
            ..p
        };
        let want = reference(SegmentationGpu::new(g).unwrap(), &stream, &f, &fixed);
        for finisher in setups {
            let mut op = op_with(g, |t| t.finisher = finisher);
            assert_eq!(
                op.finisher(),
                finisher,
                "cooperative launch on a GPU that runs these tests"
            );
            let what = format!("{finisher:?}");
            assert_runs_equal(&mut op, &stream, &f, &p, 4, &want, &what);
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
    let (Some(a), Some(b)) = (
        tiled("building.jpg", 640, 360, 3),
        tiled("fruits.jpg", 640, 360, 3),
    ) else {
        return;
    };
    let mut graphed = SegmentationGpu::new(g).unwrap();
    let mut direct = op_with(g, |t| t.graphs = false);
    let p = |scale: f64| SegmentationParams {
        scale,
        adaptive_rounds: true,
        ..SegmentationParams::default()
    };
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
    assert_eq!(
        graphed.graph_captures(),
        settled,
        "a repeated frame captured again"
    );
}

/// The device labels and the small readback (what a frame path that leaves the labels on the
/// device uses) against the full download of the same frame on another op: after a frame, after
/// a hierarchy level, and after a frame that hit its adaptive caps and ran again inside the
/// small readback (its device labels are then the rerun's, the exact ones).
#[test]
fn device_labels_and_summary_equal_the_full_download() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let (Some(photo), Some(video)) = (
        tiled("building.jpg", 640, 360, 3),
        tiled("vtest_1080.png", 480, 270, 1),
    ) else {
        return;
    };
    let flat = flat_frame();
    let p = adaptive_params();
    // Low finisher limits: the photograph after the flat frame needs a rerun.
    let tight = |t: &mut SegmentationTuning| {
        (t.finisher.handoff_frontier, t.finisher.frontier_limit) = (1000, 1000)
    };
    let mut light = op_with(g, tight);
    let mut full = op_with(g, tight);
    let mut timer = KernelTimer::new();
    let device_labels = |op: &SegmentationGpu| -> Image<u32> {
        let (labels, w, h) = op.device_labels().expect("device labels after a frame");
        let data = stream.clone_dtoh(&labels.slice(0..w * h)).unwrap();
        Image::from_vec(w, h, data).unwrap()
    };
    assert!(
        light.device_labels().is_none(),
        "device labels before any frame"
    );
    for (i, f) in [&video, &flat, &photo, &photo, &video]
        .into_iter()
        .enumerate()
    {
        let input = upload(&stream, f);
        enqueue(&mut light, &stream, &input, f, &p, &mut timer);
        enqueue(&mut full, &stream, &input, f, &p, &mut timer);
        let summary = light.download_summary(&stream).unwrap();
        let want = full.download(&stream).unwrap();
        assert_eq!(
            (summary.labels.width(), summary.labels.height()),
            (0, 0),
            "{} frame {i}",
            f.name
        );
        assert_eq!(
            SegmentationOutput {
                labels: want.labels.clone(),
                ..summary
            },
            want,
            "{} frame {i}: summary",
            f.name
        );
        assert_eq!(
            device_labels(&light),
            want.labels,
            "{} frame {i}: device labels",
            f.name
        );
        assert_eq!(
            light.reruns(),
            full.reruns(),
            "{} frame {i}: reruns",
            f.name
        );
        // A hierarchy level of the same frame.
        let level = want.levels() / 2;
        light.enqueue_level(&stream, &mut timer, level).unwrap();
        full.enqueue_level(&stream, &mut timer, level).unwrap();
        let summary = light.download_summary(&stream).unwrap();
        let want = full.download(&stream).unwrap();
        assert_eq!(summary.level, level, "{} frame {i}", f.name);
        assert_eq!(
            SegmentationOutput {
                labels: want.labels.clone(),
                ..summary
            },
            want,
            "{} frame {i}: level summary",
            f.name
        );
        assert_eq!(
            device_labels(&light),
            want.labels,
            "{} frame {i}: level {level} device labels",
            f.name
        );
    }
    // Whether a frame outgrew the caps the previous one left (and ran again inside the summary
    // readback) depends on the frames; the labels above were final either way.
    assert!(
        light.reruns() <= 1,
        "at most the photograph after the flat frame ran again"
    );
    // An empty frame has no device labels; its summary has no segments.
    let empty = Frame {
        name: "empty".into(),
        data: Vec::new(),
        width: 0,
        height: 5,
        channels: 1,
    };
    let input = upload(&stream, &empty);
    enqueue(&mut light, &stream, &input, &empty, &p, &mut timer);
    assert!(light.device_labels().is_none());
    assert_eq!(light.download_summary(&stream).unwrap().segment_count, 0);
}

/// A flat 640x360 RGB frame: one segment, the smallest work a launch variant can get.
fn flat_frame() -> Frame {
    Frame {
        name: "flat".into(),
        data: vec![90; 640 * 360 * 3],
        width: 640,
        height: 360,
        channels: 3,
    }
}

/// The shipped settings (k = 100) with the adaptive round caps the launch variants replay.
fn adaptive_params() -> SegmentationParams {
    SegmentationParams {
        scale: 100.0,
        adaptive_rounds: true,
        ..SegmentationParams::default()
    }
}
