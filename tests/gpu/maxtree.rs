//! GPU parity of the max-tree (kernels/maxtree.cu) with the CPU reference: the canonical parent
//! image, every attribute and rule's filtered image and residue, and the node count must be
//! bit-identical, on random images (few and many levels, odd sizes that do not fill a tile) and
//! on real frames up to 4096x2160, 4/8-connectivity, 8/16-bit, max- and min-trees; and the
//! small results the pipeline reads instead of pictures (the summary reduced on the device, the
//! residue buffer left there).

// Helpers outside `#[test]` functions unwrap and panic as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use morphoscope::gpu::{GpuContext, KernelTimer, upload_view};
use morphoscope::image::{DynImage, Image};
use morphoscope::ops::maxtree::{
    Attribute, Connectivity, GpuGray, MaxTree, MaxTreeGpu, MaxTreeParams, MaxTreeSummary,
    MaxTreeTuning, Rule, TreeKind, maxtree_gpu, maxtree_parent_gpu,
};

use crate::common::{Rng, gpu, random_gray, tiled_gray, tiled_gray16};

const CONNS: [Connectivity; 2] = [Connectivity::Four, Connectivity::Eight];
const RULES: [Rule; 4] = [Rule::Direct, Rule::Min, Rule::Max, Rule::Subtractive];

/// 16-bit random image with `levels` distinct values (65536: arbitrary values).
fn random_gray16(rng: &mut Rng, w: usize, h: usize, levels: u64) -> Image<u16> {
    Image::from_fn(w, h, |_, _| {
        let l = rng.below(levels as usize) as u64;
        if levels >= 65536 {
            l as u16
        } else {
            (l * 65535 / (levels - 1).max(1)) as u16
        }
    })
}

fn check_parent<T: GpuGray>(
    g: &GpuContext,
    img: &Image<T>,
    kind: TreeKind,
    c: Connectivity,
    what: &str,
) {
    let cpu = MaxTree::build(img.view(), kind, c).unwrap();
    let got = maxtree_parent_gpu(g, img.view(), kind, c).unwrap();
    let bad = got
        .data()
        .iter()
        .zip(cpu.parent())
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(
        bad, 0,
        "{what} {kind:?} {c:?}: {bad} parent pixels differ from the CPU"
    );
}

fn as_u32(d: &DynImage) -> Vec<u32> {
    match d {
        DynImage::Gray8(i) => i.data().iter().map(|&v| u32::from(v)).collect(),
        DynImage::Gray16(i) => i.data().iter().map(|&v| u32::from(v)).collect(),
        _ => Vec::new(),
    }
}

/// Every attribute and rule through `MaxTreeGpu` on one tree per (kind, connectivity), two
/// thresholds each (the second through `enqueue_filter`, without rebuilding), vs the CPU, with
/// the device's default tuning.
fn check_filters<T: GpuGray>(
    g: &GpuContext,
    img: &Image<T>,
    kinds: &[TreeKind],
    conns: &[Connectivity],
    what: &str,
) {
    let tuning = MaxTreeTuning::for_device(g.info());
    check_filters_tuned(g, img, kinds, conns, tuning, what);
}

/// [`check_filters`] with `tuning`.
fn check_filters_tuned<T: GpuGray>(
    g: &GpuContext,
    img: &Image<T>,
    kinds: &[TreeKind],
    conns: &[Connectivity],
    tuning: MaxTreeTuning,
    what: &str,
) {
    let stream = g.new_stream().unwrap();
    let uploaded = upload_view(&stream, img.view()).unwrap();
    let input = uploaded.image();
    let mut mt = MaxTreeGpu::with_tuning(g, tuning).unwrap();
    let mut timer = KernelTimer::new();
    for &kind in kinds {
        for &c in conns {
            let cpu = MaxTree::build(img.view(), kind, c).unwrap();
            mt.enqueue_tree(&mut timer, input, kind, c).unwrap();
            assert_eq!(
                mt.download_node_count(&stream).unwrap() as usize,
                cpu.node_count(),
                "{what}: nodes"
            );
            for a in Attribute::ALL {
                mt.enqueue_attribute(&stream, &mut timer, a).unwrap();
                let mut vals = cpu.attribute(a).to_vec();
                vals.sort_by(f64::total_cmp);
                for (i, rule) in RULES.iter().enumerate() {
                    let q = [0.3, 0.9][i % 2];
                    let thr = vals[((vals.len() - 1) as f64 * q) as usize];
                    mt.enqueue_filter(&mut timer, input, thr, *rule).unwrap();
                    let out = mt.download(&stream).unwrap();
                    let want = cpu.filter(a, thr, *rule);
                    let wf: Vec<u32> = want.filtered.data().iter().map(|v| v.to_u32()).collect();
                    let wr: Vec<u32> = want.residue.data().iter().map(|v| v.to_u32()).collect();
                    let bad = as_u32(&out.filtered)
                        .iter()
                        .zip(&wf)
                        .filter(|(a, b)| a != b)
                        .count();
                    assert_eq!(
                        bad, 0,
                        "{what} {kind:?} {c:?} {a:?} {rule:?} thr {thr}: filtered differs at {bad} px"
                    );
                    assert_eq!(
                        as_u32(&out.residue),
                        wr,
                        "{what} {kind:?} {c:?} {a:?} {rule:?}: residue"
                    );
                }
            }
        }
    }
}

#[test]
fn parent_matches_cpu_on_random_images() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(41);
    let sizes = [
        (1, 1),
        (1, 300),
        (300, 1),
        (33, 17),
        (64, 32),
        (65, 33),
        (127, 95),
        (640, 480),
        (1920, 1080),
    ];
    for (w, h) in sizes {
        for levels in [2, 16, 256] {
            let img = random_gray(&mut rng, w, h, levels);
            for kind in [TreeKind::Max, TreeKind::Min] {
                for c in CONNS {
                    check_parent(
                        g,
                        &img,
                        kind,
                        c,
                        &format!("random u8 {w}x{h} levels {levels}"),
                    );
                }
            }
        }
        for levels in [3, 1000, 65536] {
            let img = random_gray16(&mut rng, w, h, levels);
            for c in CONNS {
                check_parent(
                    g,
                    &img,
                    TreeKind::Max,
                    c,
                    &format!("random u16 {w}x{h} levels {levels}"),
                );
            }
        }
    }
}

#[test]
fn parent_matches_cpu_on_real_frames() {
    let Some(g) = gpu() else { return };
    for (name, w, h) in [
        ("baboon.jpg", 1920, 1080),
        ("building.jpg", 4096, 2160),
        ("fruits.jpg", 3840, 2160),
    ] {
        let Some(img) = tiled_gray(name, w, h) else {
            return;
        };
        for kind in [TreeKind::Max, TreeKind::Min] {
            for c in CONNS {
                check_parent(g, &img, kind, c, &format!("{name} {w}x{h}"));
            }
        }
        let Some(img16) = tiled_gray16(name, w, h) else {
            return;
        };
        for c in CONNS {
            check_parent(g, &img16, TreeKind::Max, c, &format!("{name} u16 {w}x{h}"));
        }
    }
}

#[test]
fn every_tile_height_gives_the_cpu_tree() {
    let Some(g) = gpu() else { return };
    let Some(img) = tiled_gray("fruits.jpg", 1001, 517) else {
        return;
    };
    let Some(img16) = tiled_gray16("building.jpg", 777, 301) else {
        return;
    };
    let stream = g.new_stream().unwrap();
    let input = upload_view(&stream, img.view()).unwrap();
    let input16 = upload_view(&stream, img16.view()).unwrap();
    let mut mt = MaxTreeGpu::new(g).unwrap();
    let mut timer = KernelTimer::new();
    for c in CONNS {
        let cpu = MaxTree::build(img.view(), TreeKind::Min, c).unwrap();
        let cpu16 = MaxTree::build(img16.view(), TreeKind::Max, c).unwrap();
        for th in [16, 32, 64, 128] {
            mt.set_tuning(MaxTreeTuning {
                tile_height: th,
                ..MaxTreeTuning::default()
            })
            .unwrap();
            mt.enqueue_tree(&mut timer, input.image(), TreeKind::Min, c)
                .unwrap();
            assert_eq!(
                mt.download_parent(&stream).unwrap().data(),
                cpu.parent(),
                "tile height {th} {c:?}"
            );
            let r = mt.enqueue_tree(&mut timer, input16.image(), TreeKind::Max, c);
            if th == 128 {
                assert!(
                    r.is_err(),
                    "16-bit tiles of 64x128 exceed the shared memory budget"
                );
            } else {
                r.unwrap();
                assert_eq!(
                    mt.download_parent(&stream).unwrap().data(),
                    cpu16.parent(),
                    "u16 tile height {th} {c:?}"
                );
            }
        }
    }
}

#[test]
fn other_launch_shapes_give_the_same_pictures() {
    let Some(g) = gpu() else { return };
    let Some(img) = tiled_gray("fruits.jpg", 641, 479) else {
        return;
    };
    let d = MaxTreeTuning::default();
    for tuning in [
        MaxTreeTuning {
            block_threads: 64,
            node_blocks_per_sm: 1,
            ..d
        },
        MaxTreeTuning {
            tile_height: 64,
            block_threads: 1024,
            ..d
        },
    ] {
        check_filters_tuned(
            g,
            &img,
            &[TreeKind::Max],
            &CONNS,
            tuning,
            &format!("fruits 641x479 {tuning:?}"),
        );
    }
}

#[test]
fn every_filter_matches_cpu_on_random_images() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(5);
    for (w, h) in [(1, 1), (1, 77), (33, 17), (130, 67)] {
        let img = random_gray(&mut rng, w, h, 8);
        check_filters(
            g,
            &img,
            &[TreeKind::Max, TreeKind::Min],
            &CONNS,
            &format!("random u8 {w}x{h}"),
        );
        let img = random_gray16(&mut rng, w, h, 65536);
        check_filters(
            g,
            &img,
            &[TreeKind::Max],
            &CONNS,
            &format!("random u16 {w}x{h}"),
        );
    }
}

#[test]
fn every_filter_matches_cpu_on_real_frames() {
    let Some(g) = gpu() else { return };
    let Some(img) = tiled_gray("fruits.jpg", 641, 479) else {
        return;
    };
    check_filters(
        g,
        &img,
        &[TreeKind::Max, TreeKind::Min],
        &CONNS,
        "fruits 641x479",
    );
    let Some(img16) = tiled_gray16("baboon.jpg", 500, 301) else {
        return;
    };
    check_filters(
        g,
        &img16,
        &[TreeKind::Max, TreeKind::Min],
        &[Connectivity::Eight],
        "baboon u16 500x301",
    );
}

#[test]
fn area_opening_matches_cpu_on_large_real_frames() {
    let Some(g) = gpu() else { return };
    for (name, w, h) in [("building.jpg", 1920, 1080), ("baboon.jpg", 4096, 2160)] {
        let Some(img) = tiled_gray(name, w, h) else {
            return;
        };
        for (tree, c) in [(TreeKind::Max, 4), (TreeKind::Min, 8)] {
            let p = MaxTreeParams {
                tree,
                threshold: 100.0,
                connectivity: c,
                ..MaxTreeParams::default()
            };
            let out = maxtree_gpu(g, img.view(), &p).unwrap();
            let cpu = morphoscope::ops::maxtree::attribute_filter(img.view(), &p).unwrap();
            assert_eq!(
                out.filtered,
                DynImage::Gray8(cpu.filtered),
                "{name} {w}x{h} {tree:?} {c}"
            );
            assert_eq!(
                out.residue,
                DynImage::Gray8(cpu.residue),
                "{name} {w}x{h} residue"
            );
            assert!(out.summary()["maxtree_nodes"].as_u64().unwrap() > 0);
        }
        let Some(img16) = tiled_gray16(name, w, h) else {
            return;
        };
        let p = MaxTreeParams {
            threshold: 50.0,
            connectivity: 8,
            ..MaxTreeParams::default()
        };
        let out = maxtree_gpu(g, img16.view(), &p).unwrap();
        let cpu = morphoscope::ops::maxtree::attribute_filter(img16.view(), &p).unwrap();
        assert_eq!(
            out.filtered,
            DynImage::Gray16(cpu.filtered),
            "{name} u16 {w}x{h}"
        );
    }
}

#[test]
fn strided_and_empty_inputs() {
    let Some(g) = gpu() else { return };
    let img =
        Image::from_strided(5, 3, 8, (0..24u8).map(|v| v.wrapping_mul(37)).collect()).unwrap();
    let p = MaxTreeParams {
        threshold: 3.0,
        ..MaxTreeParams::default()
    };
    let out = maxtree_gpu(g, img.view(), &p).unwrap();
    let cpu = morphoscope::ops::maxtree::attribute_filter(img.view(), &p).unwrap();
    assert_eq!(out.filtered, DynImage::Gray8(cpu.filtered));
    let empty = Image::<u16>::new(0, 7, 0);
    let out = maxtree_gpu(g, empty.view(), &p).unwrap();
    assert_eq!(out.node_count, 0);
    assert_eq!(out.filtered, DynImage::Gray16(Image::new(0, 7, 0)));
}

/// The frame's summary reduced on the device against the CPU filter's residue, and (8-bit) the
/// device residue buffer against the CPU residue, for every rule on one tree, then a second
/// threshold through `enqueue_filter` (the statistics are recomputed, not accumulated).
fn check_summary<T: GpuGray>(
    g: &GpuContext,
    img: &Image<T>,
    kind: TreeKind,
    c: Connectivity,
    what: &str,
) {
    let stream = g.new_stream().unwrap();
    let uploaded = upload_view(&stream, img.view()).unwrap();
    let input = uploaded.image();
    let mut mt = MaxTreeGpu::new(g).unwrap();
    let mut timer = KernelTimer::new();
    let cpu = MaxTree::build(img.view(), kind, c).unwrap();
    mt.enqueue_tree(&mut timer, input, kind, c).unwrap();
    mt.enqueue_attribute(&stream, &mut timer, Attribute::Area)
        .unwrap();
    for (rule, threshold) in [
        (Rule::Direct, 30.0),
        (Rule::Subtractive, 30.0),
        (Rule::Max, 400.0),
        (Rule::Min, 4.0),
    ] {
        mt.enqueue_filter(&mut timer, input, threshold, rule)
            .unwrap();
        let got = mt.download_summary(&stream).unwrap();
        let want = cpu.filter(Attribute::Area, threshold, rule);
        let residue: Vec<u64> = want
            .residue
            .data()
            .iter()
            .map(|v| u64::from(v.to_u32()))
            .collect();
        let expected = MaxTreeSummary {
            node_count: cpu.node_count() as u32,
            changed_pixels: residue.iter().filter(|&&v| v > 0).count() as u64,
            residue_sum: residue.iter().sum(),
            pixels: residue.len() as u64,
        };
        assert_eq!(
            got, expected,
            "{what} {kind:?} {c:?} {rule:?} {threshold}: summary"
        );
        if residue.len() >= 100 {
            assert!(
                got.changed_pixels > 0,
                "{what} {rule:?} {threshold}: the filter changes nothing, a weak test"
            );
        }
        match mt.residue() {
            Some(device) if T::BITS == 8 => {
                let bytes = stream.clone_dtoh(device).unwrap();
                stream.synchronize().unwrap();
                let wanted: Vec<u8> = want
                    .residue
                    .data()
                    .iter()
                    .map(|v| v.to_u32() as u8)
                    .collect();
                assert!(
                    bytes == wanted,
                    "{what} {kind:?} {c:?} {rule:?}: device residue differs"
                );
            }
            None if T::BITS == 16 => {}
            other => panic!(
                "{what}: residue buffer {:?} for {}-bit input",
                other.map(|b| b.len()),
                T::BITS
            ),
        }
    }
}

#[test]
fn summary_and_device_residue_match_cpu() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(23);
    for (w, h) in [(1, 3), (33, 17), (130, 67)] {
        let img = random_gray(&mut rng, w, h, 16);
        check_summary(
            g,
            &img,
            TreeKind::Max,
            Connectivity::Four,
            &format!("random u8 {w}x{h}"),
        );
        let img16 = random_gray16(&mut rng, w, h, 1000);
        check_summary(
            g,
            &img16,
            TreeKind::Max,
            Connectivity::Eight,
            &format!("random u16 {w}x{h}"),
        );
    }
    for (name, w, h) in [
        ("fruits.jpg", 641, 479),
        ("baboon.jpg", 1920, 1080),
        ("building.jpg", 4096, 2160),
    ] {
        let Some(img) = tiled_gray(name, w, h) else {
            return;
        };
        check_summary(
            g,
            &img,
            TreeKind::Max,
            Connectivity::Eight,
            &format!("{name} {w}x{h}"),
        );
        check_summary(
            g,
            &img,
            TreeKind::Min,
            Connectivity::Four,
            &format!("{name} {w}x{h}"),
        );
        let Some(img16) = tiled_gray16(name, w, h) else {
            return;
        };
        check_summary(
            g,
            &img16,
            TreeKind::Max,
            Connectivity::Four,
            &format!("{name} u16 {w}x{h}"),
        );
    }
}

#[test]
fn summary_json_is_the_full_readbacks() {
    let Some(g) = gpu() else { return };
    let Some(img) = tiled_gray("text_motion.jpg", 800, 600) else {
        return;
    };
    let stream = g.new_stream().unwrap();
    let mut mt = MaxTreeGpu::new(g).unwrap();
    let mut timer = KernelTimer::new();
    let p = MaxTreeParams {
        threshold: 64.0,
        ..MaxTreeParams::default()
    };
    // Two frames through one op: the statistics of the second do not include the first's.
    for frame in [img.clone(), img.map(|v| 255 - v)] {
        let uploaded = upload_view(&stream, frame.view()).unwrap();
        mt.enqueue(&mut timer, uploaded.image(), &p).unwrap();
        let full = mt.download(&stream).unwrap();
        let small = mt.download_summary(&stream).unwrap();
        assert_eq!(small, full.stats());
        assert_eq!(small.summary(), full.summary());
        let cpu = morphoscope::ops::maxtree::attribute_filter(frame.view(), &p).unwrap();
        assert_eq!(full.residue, DynImage::Gray8(cpu.residue));
    }
    let empty = Image::<u8>::new(0, 5, 0);
    let uploaded = upload_view(&stream, empty.view()).unwrap();
    mt.enqueue(&mut timer, uploaded.image(), &p).unwrap();
    assert_eq!(
        mt.download_summary(&stream).unwrap(),
        MaxTreeSummary::default()
    );
    assert!(mt.residue().is_none());
}
