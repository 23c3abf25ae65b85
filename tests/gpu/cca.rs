//! GPU parity tests for cca: the CUDA label image and component table must equal the CPU's
//! exactly (both derive features from the same integer sums), on random masks of every density
//! and odd sizes, percolation worst cases, structured worst cases (checkerboard, serpentines,
//! chunk-border diagonals), real frames up to 4096x2160 with Otsu's level in both polarities,
//! the OpenCV golden crops, and motion sequences (background kept on the device).
//!
//! `bench_cca` (ignored) times the kernels with CUDA events on real frames and writes the masks
//! for `src/ops/cca/bench_opencv.py` (OpenCV on the CPU of the same machine).

// Helpers outside `#[test]` functions unwrap and panic as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use cudarc::driver::CudaStream;
use cudarc::driver::sys::CUevent_flags;
use morphoscope::gpu::{GpuContext, KernelTimer, round_trip, upload_view};
use morphoscope::image::Image;
use morphoscope::ops::cca::gpu::CcaGpu;
use morphoscope::ops::cca::{
    CcaCpu, CcaOutput, CcaParams, CcaTuning, Polarity, Source, Threshold, cca_cpu,
};

use crate::common::{Rng, gpu, median, sample_gray, samples_dir, tiled_gray};

struct Rig {
    op: CcaGpu,
    stream: Arc<CudaStream>,
    timer: KernelTimer,
}

impl Rig {
    fn new(g: &GpuContext) -> Self {
        Self {
            op: CcaGpu::new(g).expect("cca kernels"),
            stream: g.new_stream().expect("stream"),
            timer: KernelTimer::new(),
        }
    }
    /// Sets the rows per feature warp (the other tuning values stay the defaults).
    fn feature_rows(&mut self, rows: u32) {
        self.op
            .set_tuning(CcaTuning {
                feature_rows: rows,
                ..CcaTuning::default()
            })
            .expect("tuning");
    }
    /// Median milliseconds (CUDA events) of `iters` runs of `f` after 20 warm-up runs, and the
    /// median of each timer region.
    fn time(
        &mut self,
        iters: usize,
        f: &mut dyn FnMut(&mut Rig),
    ) -> (f64, Vec<(&'static str, f64)>) {
        let ctx = self.stream.context().clone();
        let ev = || {
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .expect("event")
        };
        let (e0, e1) = (ev(), ev());
        for _ in 0..20 {
            f(self);
        }
        self.stream.synchronize().expect("sync");
        let mut totals = Vec::with_capacity(iters);
        let mut regions: Vec<(&'static str, Vec<f64>)> = Vec::new();
        for _ in 0..iters {
            self.timer.reset();
            e0.record(&self.stream).expect("record");
            f(self);
            e1.record(&self.stream).expect("record");
            e1.synchronize().expect("sync");
            totals.push(f64::from(e0.elapsed_ms(&e1).expect("elapsed")));
            for (i, (n, ms)) in self.timer.read().expect("timer").into_iter().enumerate() {
                if regions.len() <= i {
                    regions.push((n, Vec::new()));
                }
                regions[i].1.push(ms);
            }
        }
        let regions = regions
            .into_iter()
            .map(|(n, mut v)| (n, median(&mut v)))
            .collect();
        (median(&mut totals), regions)
    }

    fn run(&mut self, img: &Image<u8>, p: &CcaParams) -> CcaOutput {
        round_trip(
            &self.stream,
            img.view(),
            &mut self.op,
            |op, timer, input| op.enqueue(timer, input, p),
            |op, stream| op.download(stream),
        )
        .expect("gpu cca")
    }
}

fn assert_same(cpu: &CcaOutput, gpu: &CcaOutput, what: &str) {
    assert_eq!(
        cpu.table.threshold, gpu.table.threshold,
        "{what}: threshold"
    );
    if cpu.labels != gpu.labels {
        let w = cpu.labels.width();
        let bad: Vec<usize> = cpu
            .labels
            .data()
            .iter()
            .zip(gpu.labels.data())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| i)
            .collect();
        let i = bad[0];
        panic!(
            "{what}: {} label mismatches, first at ({}, {}): cpu {} gpu {} (cpu n = {}, gpu n = {})",
            bad.len(),
            i % w,
            i / w,
            cpu.labels.data()[i],
            gpu.labels.data()[i],
            cpu.table.len(),
            gpu.table.len()
        );
    }
    assert_eq!(cpu.table.len(), gpu.table.len(), "{what}: component count");
    for (a, b) in cpu.table.components.iter().zip(&gpu.table.components) {
        assert_eq!(a, b, "{what}: component {}", a.label);
    }
    assert_eq!(cpu.table, gpu.table, "{what}: table");
}

fn mask_params(conn: u8) -> CcaParams {
    CcaParams {
        threshold: Threshold::Fixed(127),
        connectivity: conn,
        ..CcaParams::default()
    }
}

fn random_mask(rng: &mut Rng, w: usize, h: usize, per_mille: u64) -> Image<u8> {
    Image::from_fn(w, h, |_, _| {
        if (rng.below(1000) as u64) < per_mille {
            255
        } else {
            0
        }
    })
}

fn check(rig: &mut Rig, img: &Image<u8>, p: &CcaParams, what: &str) {
    let cpu = cca_cpu(img.view(), p).expect("cpu cca");
    let gpu = rig.run(img, p);
    assert_same(&cpu, &gpu, what);
}

/// Each component's grey sum (its mean grey level, for the tracker) equals the CPU's exactly:
/// random grey frames of odd widths (runs ending mid-pair, at chunk and row ends) in both
/// polarities and connectivities, and an 8K frame of 255s, one component whose sum passes
/// 32 bits.
#[test]
fn cca_mean_grey_matches_cpu() {
    let Some(g) = gpu() else { return };
    let mut rig = Rig::new(g);
    let mut rng = Rng(37);
    for (w, h) in [(67usize, 13usize), (129, 40), (1001, 77)] {
        let img = Image::from_fn(w, h, |_, _| rng.below(256) as u8);
        for (polarity, conn) in [(Polarity::Bright, 8u8), (Polarity::Dark, 4)] {
            let p = CcaParams {
                threshold: Threshold::Fixed(140),
                polarity,
                connectivity: conn,
                ..CcaParams::default()
            };
            let what = format!("{w}x{h} {polarity:?} {conn}-conn");
            let cpu = cca_cpu(img.view(), &p).expect("cpu cca");
            assert!(
                cpu.table.components.iter().any(|c| c.grey_sum > 0),
                "{what}"
            );
            let gpu_out = rig.run(&img, &p);
            assert_same(&cpu, &gpu_out, &what);
            for (a, b) in cpu.table.components.iter().zip(&gpu_out.table.components) {
                assert_eq!(a.mean_grey(), b.mean_grey(), "{what}: label {}", a.label);
            }
        }
    }
    let (w, h) = (8192usize, 4320usize);
    let full = Image::new(w, h, 255u8);
    let p = mask_params(8);
    let out = rig.run(&full, &p);
    assert_eq!(out.table.len(), 1);
    let c = &out.table.components[0];
    assert_eq!(c.grey_sum, 255 * (w * h) as u64);
    assert!(c.grey_sum > u64::from(u32::MAX));
    assert_eq!(c.mean_grey(), 255.0);
}

/// The table path (what the pipeline reads: count, threshold, feature records — nothing
/// frame-sized) gives the table of the full readback and of the CPU, frame after frame.
#[test]
fn table_readback_is_the_full_readbacks_table() {
    let Some(g) = gpu() else { return };
    let mut rig = Rig::new(g);
    for (name, w, h) in [("fruits.jpg", 1280, 720), ("baboon.jpg", 333, 251)] {
        let Some(img) = tiled_gray(name, w, h) else {
            return;
        };
        let uploaded = upload_view(&rig.stream, img.view()).expect("upload");
        for (conn, polarity) in [(4u8, Polarity::Bright), (8, Polarity::Dark)] {
            let p = CcaParams {
                connectivity: conn,
                polarity,
                ..CcaParams::default()
            };
            rig.op
                .enqueue(&mut rig.timer, uploaded.image(), &p)
                .expect("enqueue");
            let table = rig.op.download_table(&rig.stream).expect("table");
            let full = rig.op.download(&rig.stream).expect("download");
            assert!(
                !table.components.is_empty(),
                "{name} {conn}: no components, a weak test"
            );
            assert_eq!(table, full.table, "{name} {conn}: table path");
            assert_eq!(
                table,
                cca_cpu(img.view(), &p).expect("cpu").table,
                "{name} {conn}: CPU table"
            );
        }
    }
}

#[test]
fn cca_random_densities_small_and_odd_sizes() {
    let Some(g) = gpu() else { return };
    let mut rig = Rig::new(g);
    let mut rng = Rng(0x05ee_dcc1);
    let sizes = [
        (1, 1),
        (2, 1),
        (1, 2),
        (63, 1),
        (64, 1),
        (65, 2),
        (31, 33),
        (127, 129),
        (128, 128),
        (333, 555),
        (1000, 7),
        (7, 1000),
    ];
    for &(w, h) in &sizes {
        for d in (0..=100).step_by(5) {
            for conn in [4u8, 8] {
                let m = random_mask(&mut rng, w, h, d * 10);
                check(
                    &mut rig,
                    &m,
                    &mask_params(conn),
                    &format!("{w}x{h} density {d}% conn {conn}"),
                );
            }
        }
    }
}

#[test]
fn cca_percolation_and_structured_worst_cases() {
    let Some(g) = gpu() else { return };
    let mut rig = Rig::new(g);
    let mut rng = Rng(42);
    for &(w, h) in &[(1920usize, 1080usize), (4096, 2160), (1023, 777)] {
        // Site-percolation thresholds: 0.593 (4-conn), 0.407 (8-conn), and around them.
        for d in [407u64, 500, 593, 650] {
            for conn in [4u8, 8] {
                let m = random_mask(&mut rng, w, h, d);
                check(
                    &mut rig,
                    &m,
                    &mask_params(conn),
                    &format!("{w}x{h} p={d}/1000 conn {conn}"),
                );
            }
        }
        let patterns: Vec<(&str, Image<u8>)> = vec![
            ("all foreground", Image::new(w, h, 255)),
            ("all background", Image::new(w, h, 0)),
            (
                "checkerboard",
                Image::from_fn(w, h, |x, y| if (x + y) % 2 == 0 { 255 } else { 0 }),
            ),
            (
                "horizontal serpentine",
                Image::from_fn(w, h, |x, y| {
                    if y % 2 == 0 || (y % 4 == 1 && x == w - 1) || (y % 4 == 3 && x == 0) {
                        255
                    } else {
                        0
                    }
                }),
            ),
            (
                "vertical serpentine",
                Image::from_fn(w, h, |x, y| {
                    if x % 2 == 0 || (x % 4 == 1 && y == h - 1) || (x % 4 == 3 && y == 0) {
                        255
                    } else {
                        0
                    }
                }),
            ),
            (
                "chunk-border diagonals",
                Image::from_fn(w, h, |x, y| {
                    if (x % 64 == 63 && y % 2 == 0) || (x % 64 == 0 && y % 2 == 1) {
                        255
                    } else {
                        0
                    }
                }),
            ),
            (
                "diagonal stripes",
                Image::from_fn(w, h, |x, y| if (x + y) % 7 < 3 { 255 } else { 0 }),
            ),
            (
                "comb",
                Image::from_fn(w, h, |x, y| if y == 0 || x % 3 == 0 { 255 } else { 0 }),
            ),
        ];
        for (name, m) in &patterns {
            for conn in [4u8, 8] {
                check(
                    &mut rig,
                    m,
                    &mask_params(conn),
                    &format!("{w}x{h} {name} conn {conn}"),
                );
            }
        }
    }
}

#[test]
fn cca_other_launch_shapes_give_the_same_table() {
    let Some(g) = gpu() else { return };
    let Some(img) = tiled_gray("fruits.jpg", 1023, 777) else {
        return;
    };
    let mut rig = Rig::new(g);
    let d = CcaTuning::default();
    for tuning in [
        CcaTuning {
            warps_per_block: 1,
            hist_threads: 32,
            hist_pixels_per_thread: 1,
            ..d
        },
        CcaTuning {
            warps_per_block: 32,
            feature_rows: 64,
            hist_threads: 1024,
            hist_max_blocks: 3,
            ..d
        },
    ] {
        rig.op.set_tuning(tuning).expect("tuning");
        for conn in [4u8, 8] {
            let p = CcaParams {
                threshold: Threshold::Otsu,
                connectivity: conn,
                ..CcaParams::default()
            };
            check(&mut rig, &img, &p, &format!("conn {conn} {tuning:?}"));
        }
    }
    assert!(
        rig.op
            .set_tuning(CcaTuning {
                warps_per_block: 0,
                ..d
            })
            .is_err()
    );
}

#[test]
fn cca_real_frames_otsu_both_polarities() {
    let Some(g) = gpu() else { return };
    let mut rig = Rig::new(g);
    for name in [
        "fruits.jpg",
        "baboon.jpg",
        "building.jpg",
        "text_motion.jpg",
        "pic1.png",
    ] {
        for &(w, h) in &[
            (4096usize, 2160usize),
            (1920, 1080),
            (1023, 777),
            (641, 479),
        ] {
            let Some(img) = tiled_gray(name, w, h) else {
                return;
            };
            for pol in [Polarity::Bright, Polarity::Dark] {
                for conn in [4u8, 8] {
                    let p = CcaParams {
                        threshold: Threshold::Otsu,
                        polarity: pol,
                        connectivity: conn,
                        ..CcaParams::default()
                    };
                    // Cover every feature_rows variant across the cases.
                    let rows = [1, 2, 4, 3][(w + conn as usize + pol as usize) % 4];
                    rig.feature_rows(rows);
                    check(
                        &mut rig,
                        &img,
                        &p,
                        &format!("{name} {w}x{h} {pol:?} conn {conn} feature_rows {rows}"),
                    );
                }
            }
            rig.feature_rows(CcaTuning::default().feature_rows);
        }
        // The untiled sample, fixed levels.
        let Some(img) = sample_gray(name) else { return };
        for t in [0u32, 64, 200, 255] {
            check(
                &mut rig,
                &img,
                &CcaParams {
                    threshold: Threshold::Fixed(t),
                    ..CcaParams::default()
                },
                &format!("{name} T={t}"),
            );
        }
    }
}

/// Shape and values (widened to f64) of a `.npy` file, if it reads.
fn read_npy(path: &std::path::Path) -> Option<(Vec<usize>, Vec<f64>)> {
    let a = morphoscope::io::npy::read_file(path).ok()?;
    Some((a.shape.clone(), a.to_f64()))
}

#[test]
fn cca_opencv_golden_crops() {
    let Some(g) = gpu() else { return };
    let mut rig = Rig::new(g);
    let dir = samples_dir().join("..").join("data").join("cca");
    let dir = if dir.is_dir() {
        dir
    } else {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/cca")
    };
    let mut seen = 0;
    for stem in ["baboon", "building", "fruits", "pic1", "text_motion"] {
        let Some((shape, px)) = read_npy(&dir.join(format!("{stem}_gray.npy"))) else {
            continue;
        };
        let img = Image::from_vec(shape[1], shape[0], px.iter().map(|&v| v as u8).collect())
            .expect("crop");
        let (_, t) = read_npy(&dir.join(format!("{stem}_otsu.npy"))).expect("otsu npy");
        let t_cv = t[0] as u32;
        let dark = t[1] != 0.0;
        for conn in [4u8, 8] {
            let p = CcaParams {
                threshold: Threshold::Otsu,
                polarity: if dark {
                    Polarity::Dark
                } else {
                    Polarity::Bright
                },
                connectivity: conn,
                ..CcaParams::default()
            };
            let out = rig.run(&img, &p);
            assert_eq!(out.table.threshold, t_cv, "{stem}: Otsu level vs OpenCV");
            let (gshape, gd) =
                read_npy(&dir.join(format!("{stem}_c{conn}.npy"))).expect("golden npy");
            assert_eq!(
                out.table.len(),
                gshape[0],
                "{stem} conn {conn}: count vs OpenCV"
            );
            for (i, c) in out.table.components.iter().enumerate() {
                let r = &gd[i * 11..(i + 1) * 11];
                assert_eq!(
                    out.labels.data()[r[0] as usize],
                    c.label,
                    "{stem}: raster order"
                );
                assert_eq!(
                    [c.left, c.top, c.width, c.height].map(f64::from),
                    [r[1], r[2], r[3], r[4]],
                    "{stem} #{i} bbox"
                );
                assert_eq!(c.area as f64, r[5], "{stem} #{i} area");
                assert!(
                    (c.centroid[0] - r[6]).abs() < 1e-6 && (c.centroid[1] - r[7]).abs() < 1e-6,
                    "{stem} #{i} centroid"
                );
            }
            assert_same(&cca_cpu(img.view(), &p).expect("cpu"), &out, stem);
            seen += 1;
        }
    }
    assert!(
        seen > 0 || std::env::var("MORPHOSCOPE_REQUIRE_SAMPLES").as_deref() != Ok("1"),
        "golden crops missing in {}",
        dir.display()
    );
}

#[test]
fn cca_motion_sequence_matches_cpu() {
    let Some(g) = gpu() else { return };
    let mut rig = Rig::new(g);
    let Some(base) = tiled_gray("baboon.jpg", 1300, 731) else {
        return;
    };
    for (threshold, pol) in [
        (Threshold::Fixed(25), Polarity::Bright),
        (Threshold::Otsu, Polarity::Bright),
        (Threshold::Fixed(3), Polarity::Dark),
    ] {
        let p = CcaParams {
            source: Source::Motion,
            threshold,
            polarity: pol,
            learning_rate: 0.1,
            connectivity: 8,
        };
        let mut cpu = CcaCpu::new();
        rig.op.background.reset();
        for k in 0..6usize {
            // A bright square walking over the real texture, and the texture drifting a little.
            let f = Image::from_fn(base.width(), base.height(), |x, y| {
                if (100 + 40 * k..160 + 40 * k).contains(&x) && (200..260).contains(&y) {
                    250
                } else {
                    base.get((x + k) % base.width(), y)
                }
            });
            let a = cpu.process(f.view(), &p).expect("cpu motion");
            let b = rig.run(&f, &p);
            assert_same(&a, &b, &format!("motion {threshold:?} {pol:?} frame {k}"));
            if k == 0 && pol == Polarity::Bright {
                assert!(b.table.is_empty(), "the seeding frame has no motion");
            }
        }
        let bg_gpu = rig
            .op
            .background
            .download(&rig.stream)
            .expect("bg")
            .expect("seeded");
        assert_eq!(
            bg_gpu,
            cpu.background().background::<u8>(),
            "background images"
        );
    }
}

#[test]
fn cca_empty_and_strided() {
    let Some(g) = gpu() else { return };
    let mut rig = Rig::new(g);
    for (w, h) in [(0usize, 0usize), (0, 5), (5, 0)] {
        let out = rig.run(&Image::new(w, h, 255), &mask_params(8));
        assert_eq!(
            (out.labels.width(), out.labels.height(), out.table.len()),
            (w, h, 0)
        );
    }
    let s = Image::from_strided(3, 2, 5, vec![255u8, 0, 255, 9, 9, 0, 255, 0]).expect("strided");
    let cpu = cca_cpu(s.view(), &mask_params(4)).expect("cpu");
    assert_same(&cpu, &rig.run(&s.to_packed(), &mask_params(4)), "strided");
    assert_eq!(cpu.table.len(), 3);
}

fn write_npy_u8(path: &std::path::Path, img: &Image<u8>) {
    let mut header = format!(
        "{{'descr': '|u1', 'fortran_order': False, 'shape': ({}, {}), }}",
        img.height(),
        img.width()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&img.to_packed_vec());
    std::fs::write(path, bytes).expect("write npy");
}

/// Kernel timings with CUDA events (median of `CCA_BENCH_RUNS`, default 200, after 20 warm-up
/// runs) on real frames; prints one row per case.
#[test]
#[ignore]
fn bench_cca() {
    let Some(g) = gpu() else { return };
    let iters: usize = std::env::var("CCA_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let out_dir = std::env::var_os("CCA_BENCH_DIR").map(std::path::PathBuf::from);
    if let Some(d) = &out_dir {
        std::fs::create_dir_all(d).expect("bench dir");
    }
    let mut rig = Rig::new(g);
    let ctx = g.cuda();
    let ev = || {
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .expect("event")
    };
    let (e0, e1) = (ev(), ev());
    println!(
        "device: {} | iters {iters} (median, CUDA events)",
        g.info().name
    );
    println!(
        "case | n comps | binarize ms | labels ms | labels+features ms (feature_rows 1/2/4) | labels MPix/s | labels+feat MPix/s (rows 2) | regions (ms, labels+features, rows 2) | CPU run-based ms"
    );
    let cases: Vec<(&str, &str, usize, usize)> = vec![
        ("1080p", "fruits.jpg", 1920, 1080),
        ("1080p", "baboon.jpg", 1920, 1080),
        ("4K", "fruits.jpg", 4096, 2160),
        ("4K", "baboon.jpg", 4096, 2160),
        ("4K", "text_motion.jpg", 4096, 2160),
    ];
    for (size, name, w, h) in cases {
        let Some(img) = tiled_gray(name, w, h) else {
            return;
        };
        let uploaded = upload_view(&rig.stream, img.view()).expect("upload");
        let input = uploaded.image();
        let p = CcaParams::default();
        for conn in [4u8, 8] {
            rig.timer.reset();
            rig.op
                .enqueue_binarize(&mut rig.timer, input, &p)
                .expect("binarize");
            rig.op
                .enqueue_labeling(&rig.stream, &mut rig.timer, conn, Some(input.data))
                .expect("label");
            let out = rig.op.download(&rig.stream).expect("download");
            let mut cpu_out = CcaCpu::new();
            let pc = CcaParams {
                connectivity: conn,
                ..p.clone()
            };
            let cpu_ref = cpu_out.process(img.view(), &pc).expect("cpu");
            assert_same(&cpu_ref, &out, &format!("bench {size} {name} conn {conn}"));
            if let Some(d) = &out_dir {
                let mask = Image::from_fn(w, h, |x, y| u8::from(out.labels.get(x, y) != 0));
                write_npy_u8(
                    &d.join(format!(
                        "{size}_{}.npy",
                        name.split('.').next().unwrap_or(name)
                    )),
                    &mask,
                );
            }
            let pf = CcaParams {
                threshold: Threshold::Fixed(out.table.threshold),
                ..p.clone()
            };
            let (bin_ms, _) = rig.time(iters, &mut |r: &mut Rig| {
                r.op.enqueue_binarize(&mut r.timer, input, &pf)
                    .expect("binarize");
            });
            let (lab_ms, _) = rig.time(iters, &mut |r: &mut Rig| {
                r.op.enqueue_labeling(&r.stream, &mut r.timer, conn, None)
                    .expect("labels");
            });
            let mut variants = Vec::new();
            for rows in [1u32, 2, 4] {
                rig.feature_rows(rows);
                rig.timer.reset();
                rig.op
                    .enqueue_labeling(&rig.stream, &mut rig.timer, conn, Some(input.data))
                    .expect("label");
                let o = rig.op.download(&rig.stream).expect("download");
                assert_same(
                    &cpu_ref,
                    &o,
                    &format!("bench {size} {name} conn {conn} feature_rows {rows}"),
                );
                variants.push(rig.time(iters, &mut |r: &mut Rig| {
                    r.op.enqueue_labeling(&r.stream, &mut r.timer, conn, Some(input.data))
                        .expect("labels+features");
                }));
            }
            rig.feature_rows(CcaTuning::default().feature_rows);
            let (all_ms, regions) = variants[1].clone();
            let mut cpu_ms = Vec::new();
            for _ in 0..5 {
                let t0 = std::time::Instant::now();
                let _ = cpu_out.process(img.view(), &pc).expect("cpu");
                cpu_ms.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            let mpix = (w * h) as f64 / 1e6;
            let regs: Vec<String> = regions
                .iter()
                .map(|(n, ms)| format!("{}={:.4}", n.trim_start_matches("cca_"), ms))
                .collect();
            println!(
                "{size} {name} {conn}-conn | {} | {:.4} | {:.4} | {:.4}/{:.4}/{:.4} | {:.0} | {:.0} | {} | {:.2}",
                out.table.len(),
                bin_ms,
                lab_ms,
                variants[0].0,
                variants[1].0,
                variants[2].0,
                mpix / (lab_ms / 1e3),
                mpix / (all_ms / 1e3),
                regs.join(" "),
                median(&mut cpu_ms)
            );
        }
    }
    // Worst cases for context (4K, labels + features).
    for (label, per_mille, conn) in [
        ("random p=0.593", 593u64, 4u8),
        ("random p=0.407", 407, 8),
        ("checkerboard", 0, 4),
        ("all foreground", 1000, 8),
    ] {
        let mut rng = Rng(7);
        let img = if label == "checkerboard" {
            Image::from_fn(4096, 2160, |x, y| if (x + y) % 2 == 0 { 255u8 } else { 0 })
        } else {
            random_mask(&mut rng, 4096, 2160, per_mille)
        };
        let input = upload_view(&rig.stream, img.view()).expect("upload");
        let p = mask_params(conn);
        rig.timer.reset();
        rig.op
            .enqueue_binarize(&mut rig.timer, input.image(), &p)
            .expect("binarize");
        let mut totals = Vec::new();
        for i in 0..(iters / 4 + 10) {
            rig.timer.reset();
            e0.record(&rig.stream).expect("record");
            rig.op
                .enqueue_labeling(&rig.stream, &mut rig.timer, conn, Some(input.image().data))
                .expect("label");
            e1.record(&rig.stream).expect("record");
            e1.synchronize().expect("sync");
            if i >= 10 {
                totals.push(f64::from(e0.elapsed_ms(&e1).expect("elapsed")));
            }
        }
        let regs: Vec<String> = rig
            .timer
            .read()
            .expect("timer")
            .iter()
            .map(|(n, ms)| format!("{}={:.3}", n.trim_start_matches("cca_"), ms))
            .collect();
        let ms = median(&mut totals);
        println!(
            "4K worst case {label} {conn}-conn | labels+features {ms:.4} ms | {:.0} MPix/s | last: {}",
            8.847_36 / (ms / 1e3),
            regs.join(" ")
        );
    }
}
