//! GPU parity of linear openings and orientation maps: the CUDA results must equal the CPU's
//! bit for bit (u8 and u16) for every angle, on random and real images up to 4096x2160, for
//! every launch tuning (zones, rings in shared or global memory, block size, dedup, chunked
//! launches). Plus the timing bench (`--ignored bench_orientation`), which prints a table.

// Helpers outside `#[test]` functions unwrap and panic as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaStream, sys::CUevent_flags};
use morphoscope::gpu::{GpuContext, KernelTimer, Uploaded, upload_view};
use morphoscope::image::Image;
use morphoscope::ops::orientation::{
    self, LinearOpeningGpu, LinearOpeningParams, OrientationGpu, OrientationParams,
    OrientationTuning,
};

use crate::common::{Rng, gpu, median, random_gray, tiled_gray};

/// A random image with values in 1..=255 (never 0: an unwritten output pixel shows).
fn random_nonzero(rng: &mut Rng, w: usize, h: usize, levels: u32) -> Image<u8> {
    random_gray(rng, w, h, levels).map(|v| v.max(1))
}

fn to_u16(img: &Image<u8>, salt: u64) -> Image<u16> {
    Image::from_fn(img.width(), img.height(), |x, y| {
        let n = ((x as u64 * 31 + y as u64 * 17 + salt) % 251) as u16;
        u16::from(img.get(x, y)) * 257 - n.min(u16::from(img.get(x, y)) * 257)
    })
}

fn upload<T: orientation::GpuSample>(stream: &Arc<CudaStream>, img: &Image<T>) -> Uploaded<T> {
    upload_view(stream, img.view()).unwrap()
}

/// One reused `LinearOpeningGpu` per image: checks `angles` x `lengths` (closing on odd angles).
fn check_openings<T: orientation::GpuSample>(
    g: &GpuContext,
    img: &Image<T>,
    angles: &[f64],
    lengths: &[u32],
    tuning: OrientationTuning,
    what: &str,
) -> usize {
    let stream = g.new_stream().unwrap();
    let input = upload(&stream, img);
    let mut op = LinearOpeningGpu::<T>::new(g).unwrap();
    op.set_tuning(tuning);
    let mut timer = KernelTimer::new();
    let mut n = 0;
    for &length in lengths {
        for &angle in angles {
            let closing = (angle as i64) % 2 == 1;
            let p = LinearOpeningParams {
                length,
                angle,
                closing,
            };
            timer.reset();
            op.enqueue(&mut timer, input.image(), &p).unwrap();
            let got = op.download(&stream).unwrap();
            let want = orientation::linear_opening(img.view(), &p).unwrap();
            if got != want {
                let diff = got
                    .data()
                    .iter()
                    .zip(want.data())
                    .filter(|(a, b)| a != b)
                    .count();
                panic!(
                    "{what}: {}x{} L={length} angle={angle} closing={closing} {:?}: {diff} pixels differ",
                    img.width(),
                    img.height(),
                    orientation::LineFamily::new(angle, length)
                );
            }
            n += 1;
        }
    }
    n
}

fn every_degree() -> Vec<f64> {
    (0..180).map(f64::from).collect()
}

#[test]
fn openings_every_angle_random_small() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(0x5eed_0001);
    let mut n = 0;
    for (w, h) in [(1, 1), (1, 37), (37, 1), (13, 29), (97, 61)] {
        let img = random_nonzero(&mut rng, w, h, 5);
        n += check_openings(
            g,
            &img,
            &every_degree(),
            &[1, 3, 5, 9, 21, 41],
            OrientationTuning::default(),
            "u8",
        );
    }
    let img16 = to_u16(&random_nonzero(&mut rng, 45, 33, 7), 3);
    n += check_openings(
        g,
        &img16,
        &every_degree(),
        &[5, 31],
        OrientationTuning::default(),
        "u16",
    );
    eprintln!("{n} openings equal the CPU");
}

#[test]
fn openings_every_tuning() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(0x5eed_0002);
    let img = random_nonzero(&mut rng, 200, 150, 6);
    let img16 = to_u16(&img, 9);
    let angles = [
        0.0, 13.0, 44.0, 45.0, 77.0, 90.0, 100.0, 135.0, 169.0, 179.5, -30.0,
    ];
    let tunings = [
        OrientationTuning::default(),
        OrientationTuning {
            zones: Some(1),
            ..OrientationTuning::default()
        },
        OrientationTuning {
            zones: Some(7),
            ..OrientationTuning::default()
        },
        OrientationTuning {
            zones: Some(150),
            ..OrientationTuning::default()
        },
        OrientationTuning {
            shared_ring_words: 4,
            ..OrientationTuning::default()
        },
        OrientationTuning {
            shared_ring_words: 1,
            zones: Some(3),
            ..OrientationTuning::default()
        },
        OrientationTuning {
            block: 64,
            ..OrientationTuning::default()
        },
        OrientationTuning {
            block: 256,
            shared_ring_words: 32,
            ..OrientationTuning::default()
        },
    ];
    for t in tunings {
        check_openings(g, &img, &angles, &[3, 31, 101, 255], t, "u8 tuning");
        check_openings(g, &img16, &angles, &[31, 101], t, "u16 tuning");
    }
}

#[test]
fn openings_real_images_up_to_4k() {
    let Some(g) = gpu() else { return };
    let angles = [0.0, 7.0, 30.0, 45.0, 60.0, 90.0, 105.0, 135.0, 160.0];
    let Some(b4k) = tiled_gray("building.jpg", 4096, 2160) else {
        return;
    };
    check_openings(
        g,
        &b4k,
        &angles,
        &[31],
        OrientationTuning::default(),
        "building 4096x2160 u8",
    );
    check_openings(
        g,
        &to_u16(&b4k, 1),
        &[0.0, 33.0, 90.0, 121.0],
        &[31, 61],
        OrientationTuning::default(),
        "building 4K u16",
    );
    let Some(hd) = tiled_gray("baboon.jpg", 1920, 1080) else {
        return;
    };
    check_openings(
        g,
        &hd,
        &angles,
        &[15, 41],
        OrientationTuning::default(),
        "baboon 1080p u8",
    );
    let Some(txt) = tiled_gray("text_motion.jpg", 641, 479) else {
        return;
    };
    check_openings(
        g,
        &txt,
        &every_degree(),
        &[11],
        OrientationTuning::default(),
        "text 641x479 u8",
    );
}

fn check_orientation<T: orientation::GpuSample>(
    g: &GpuContext,
    img: &Image<T>,
    p: &OrientationParams,
    tuning: OrientationTuning,
    what: &str,
) {
    let stream = g.new_stream().unwrap();
    let input = upload(&stream, img);
    let mut op = OrientationGpu::<T>::new(g).unwrap();
    op.set_tuning(tuning);
    let mut timer = KernelTimer::new();
    // Twice: the second run reuses every buffer.
    for _ in 0..2 {
        timer.reset();
        op.enqueue(&mut timer, input.image(), p).unwrap();
    }
    let got = op.download(&stream).unwrap();
    let want = orientation::orientation(img.view(), p).unwrap();
    let tag = format!(
        "{what} {}x{} L={} K={} closing={}",
        img.width(),
        img.height(),
        p.length,
        got.angles_deg.len(),
        p.closing
    );
    let d = got
        .strength
        .data()
        .iter()
        .zip(want.strength.data())
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(d, 0, "{tag}: strength differs at {d} pixels");
    let d = got
        .angle_index
        .data()
        .iter()
        .zip(want.angle_index.data())
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(d, 0, "{tag}: orientation differs at {d} pixels");
    assert_eq!(got.spectrum, want.spectrum, "{tag}: spectrum");
    assert_eq!(got, want, "{tag}");
    let colour = op.download_colour(&stream).unwrap();
    assert!(colour == want.colour(), "{tag}: colour picture differs");
    // The picture the compose step reads where it is: packed RGB, frame-sized.
    let on_device = op.colour().expect("colour buffer");
    assert_eq!(
        on_device.len(),
        3 * img.width() * img.height(),
        "{tag}: colour buffer size"
    );
    let bytes = stream.clone_dtoh(on_device).unwrap();
    stream.synchronize().unwrap();
    assert!(
        bytes == want.colour().data().as_flattened(),
        "{tag}: device colour buffer differs"
    );
}

#[test]
fn orientation_random_and_tunings() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(0x5eed_0003);
    let img = random_nonzero(&mut rng, 77, 53, 6);
    let img16 = to_u16(&img, 5);
    let all = OrientationParams {
        length: 9,
        angles: 180,
        ..Default::default()
    };
    let list = OrientationParams {
        length: 21,
        angle_list: vec![-10.0, -3.5, 0.0, 2.25, 10.0, 45.0, 91.0, 135.0],
        closing: true,
        ..Default::default()
    };
    for t in [
        OrientationTuning::default(),
        OrientationTuning {
            dedup: false,
            ..OrientationTuning::default()
        },
        OrientationTuning {
            stack_bytes: 77 * 53 * 2 * 3,
            zones: Some(2),
            ..OrientationTuning::default()
        },
        OrientationTuning {
            shared_ring_words: 2,
            block: 64,
            ..OrientationTuning::default()
        },
    ] {
        check_orientation(g, &img, &all, t, "u8");
        check_orientation(g, &img, &list, t, "u8 list");
        check_orientation(g, &img16, &all, t, "u16");
        check_orientation(
            g,
            &img16,
            &OrientationParams {
                closing: true,
                ..all.clone()
            },
            t,
            "u16 closing",
        );
    }
    let one = OrientationParams {
        length: 1,
        angles: 3,
        ..Default::default()
    };
    check_orientation(g, &img, &one, OrientationTuning::default(), "L=1");
}

#[test]
fn orientation_real_images() {
    let Some(g) = gpu() else { return };
    let Some(hd) = tiled_gray("building.jpg", 1920, 1080) else {
        return;
    };
    let p36 = OrientationParams {
        length: 31,
        angles: 36,
        ..Default::default()
    };
    check_orientation(g, &hd, &p36, OrientationTuning::default(), "building 1080p");
    check_orientation(
        g,
        &to_u16(&hd, 2),
        &OrientationParams {
            closing: true,
            ..p36.clone()
        },
        OrientationTuning::default(),
        "building 1080p u16",
    );
    let Some(sq) = tiled_gray("baboon.jpg", 640, 640) else {
        return;
    };
    let p180 = OrientationParams {
        length: 31,
        angles: 180,
        ..Default::default()
    };
    check_orientation(g, &sq, &p180, OrientationTuning::default(), "baboon 640");
    check_orientation(
        g,
        &sq,
        &p180,
        OrientationTuning {
            dedup: false,
            ..OrientationTuning::default()
        },
        "baboon 640 no dedup",
    );
    let Some(b4k) = tiled_gray("building.jpg", 4096, 2160) else {
        return;
    };
    let p8 = OrientationParams {
        length: 31,
        angles: 8,
        ..Default::default()
    };
    check_orientation(
        g,
        &to_u16(&b4k, 4),
        &p8,
        OrientationTuning::default(),
        "building 4K u16",
    );
}

#[test]
fn empty_and_strided_inputs() {
    let Some(g) = gpu() else { return };
    let p = LinearOpeningParams {
        length: 5,
        angle: 30.0,
        closing: false,
    };
    let empty = Image::<u8>::from_vec(0, 7, vec![]).unwrap();
    assert_eq!(
        orientation::linear_opening_gpu(g, empty.view(), &p)
            .unwrap()
            .height(),
        7
    );
    let o = orientation::orientation_gpu(g, empty.view(), &OrientationParams::default()).unwrap();
    assert_eq!(o.spectrum, vec![0.0; 36]);
    let mut rng = Rng(0x5eed_0004);
    let packed = random_nonzero(&mut rng, 30, 20, 4);
    let mut data = Vec::new();
    for y in 0..20 {
        data.extend_from_slice(packed.row(y));
        data.extend_from_slice(&[0, 0, 0, 0, 0]);
    }
    let strided = Image::from_strided(30, 20, 35, data).unwrap();
    assert_eq!(
        orientation::linear_opening_gpu(g, strided.view(), &p).unwrap(),
        orientation::linear_opening(packed.view(), &p).unwrap()
    );
    let bad = LinearOpeningParams { length: 4, ..p };
    assert!(orientation::linear_opening_gpu(g, packed.view(), &bad).is_err());
}

// ---------------------------------------------------------------------------------------------
// Timing bench: `gpu --ignored bench_orientation --nocapture`. CUDA events around the
// enqueue of one frame's work, median of `RUNS` after `WARM` warm-up runs, real images (tiled
// samples). With ORIENTATION_BENCH_DIR=DIR it also writes the inputs as raw u8 files there, for the
// OpenCV script to time the same pixels.

const WARM: usize = 5;
const RUNS: usize = 40;

/// Median ms of `f` (which enqueues work on `stream`) with events, plus the median per region.
fn time_gpu(
    stream: &Arc<CudaStream>,
    timer: &mut KernelTimer,
    mut f: impl FnMut(&mut KernelTimer),
) -> (f64, Vec<(&'static str, f64)>) {
    let ctx = stream.context();
    let start = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .unwrap();
    let end = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .unwrap();
    let mut totals = Vec::new();
    let mut regions: Vec<(&'static str, Vec<f64>)> = Vec::new();
    for i in 0..WARM + RUNS {
        timer.reset();
        start.record(stream).unwrap();
        f(timer);
        end.record(stream).unwrap();
        end.synchronize().unwrap();
        if i >= WARM {
            totals.push(f64::from(start.elapsed_ms(&end).unwrap()));
            let mut sums: Vec<(&'static str, f64)> = Vec::new();
            for (name, ms) in timer.read().unwrap() {
                match sums.iter_mut().find(|(n, _)| *n == name) {
                    Some(s) => s.1 += ms,
                    None => sums.push((name, ms)),
                }
            }
            for (name, ms) in sums {
                match regions.iter_mut().find(|(n, _)| *n == name) {
                    Some(r) => r.1.push(ms),
                    None => regions.push((name, vec![ms])),
                }
            }
        }
    }
    (
        median(&mut totals),
        regions
            .into_iter()
            .map(|(n, mut v)| (n, median(&mut v)))
            .collect(),
    )
}

fn fmt_regions(r: &[(&'static str, f64)]) -> String {
    r.iter()
        .map(|(n, ms)| format!("{}={ms:.3}", n.trim_start_matches("orientation_")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn time_opening(
    g: &GpuContext,
    img: &Image<u8>,
    angle: f64,
    length: u32,
    tuning: OrientationTuning,
) -> (f64, String) {
    let stream = g.new_stream().unwrap();
    let input = upload(&stream, img);
    let mut op = LinearOpeningGpu::<u8>::new(g).unwrap();
    op.set_tuning(tuning);
    let p = LinearOpeningParams {
        length,
        angle,
        closing: false,
    };
    let mut timer = KernelTimer::new();
    let (ms, regions) = time_gpu(&stream, &mut timer, |t| {
        op.enqueue(t, input.image(), &p).unwrap();
    });
    assert_eq!(
        op.download(&stream).unwrap(),
        orientation::linear_opening(img.view(), &p).unwrap()
    );
    (ms, fmt_regions(&regions))
}

fn time_orientation<T: orientation::GpuSample>(
    g: &GpuContext,
    img: &Image<T>,
    p: &OrientationParams,
    tuning: OrientationTuning,
) -> (f64, String) {
    let stream = g.new_stream().unwrap();
    let input = upload(&stream, img);
    let mut op = OrientationGpu::<T>::new(g).unwrap();
    op.set_tuning(tuning);
    let mut timer = KernelTimer::new();
    let (ms, regions) = time_gpu(&stream, &mut timer, |t| {
        op.enqueue(t, input.image(), p).unwrap();
    });
    (ms, fmt_regions(&regions))
}

fn cpu_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut runs: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    median(&mut runs)
}

#[test]
#[ignore = "timing bench: run explicitly on the GPU machine"]
fn bench_orientation() {
    let Some(g) = gpu() else { return };
    let info = g.info();
    println!(
        "device: {} (sm {}.{}, {} SMs), rayon threads {}",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.multiprocessors,
        rayon::current_num_threads()
    );
    let hd = tiled_gray("building.jpg", 1920, 1080).expect("samples");
    let k4 = tiled_gray("building.jpg", 4096, 2160).expect("samples");
    let sq = tiled_gray("building.jpg", 640, 640).expect("samples");
    if let Some(dir) = std::env::var_os("ORIENTATION_BENCH_DIR") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, img) in [("hd", &hd), ("k4", &k4), ("sq", &sq)] {
            std::fs::write(
                dir.join(format!("{name}_{}x{}.u8", img.width(), img.height())),
                img.data(),
            )
            .unwrap();
        }
    }
    let d = OrientationTuning::default();
    println!("\n== one opening, u8, L = 31 (ms, median of {RUNS}) ==");
    for (name, img) in [("1920x1080", &hd), ("4096x2160", &k4)] {
        for angle in [0.0, 30.0, 45.0, 90.0] {
            let (ms, regions) = time_opening(g, img, angle, 31, d);
            let p = LinearOpeningParams {
                length: 31,
                angle,
                closing: false,
            };
            let cpu = cpu_ms(5, || {
                let _ = orientation::linear_opening(img.view(), &p).unwrap();
            });
            println!(
                "opening {name} angle {angle:>4}: gpu {ms:.3} ms [{regions}]  cpu(rayon) {cpu:.1} ms"
            );
        }
    }
    println!("\n== orientation maps (ms, median of {RUNS}) ==");
    let p36 = OrientationParams {
        length: 31,
        angles: 36,
        ..Default::default()
    };
    let p180 = OrientationParams {
        length: 31,
        angles: 180,
        ..Default::default()
    };
    let nodedup = OrientationTuning { dedup: false, ..d };
    let cases: Vec<(&str, &Image<u8>, &OrientationParams, OrientationTuning)> = vec![
        ("1080p x 36 x L31", &hd, &p36, d),
        ("640x640 x 180 x L31 dedup", &sq, &p180, d),
        ("640x640 x 180 x L31 all 180", &sq, &p180, nodedup),
        ("4096x2160 x 36 x L31", &k4, &p36, d),
    ];
    for (name, img, p, t) in &cases {
        let (ms, regions) = time_orientation(g, *img, p, *t);
        println!("orientation {name}: gpu {ms:.3} ms [{regions}]");
    }
    let hd16 = to_u16(&hd, 0);
    let (ms, regions) = time_orientation(g, &hd16, &p36, d);
    println!("orientation 1080p x 36 x L31 u16: gpu {ms:.3} ms [{regions}]");
    let p180_41 = OrientationParams {
        length: 41,
        angles: 180,
        ..Default::default()
    };
    let (ms, regions) = time_orientation(g, &sq, &p180_41, nodedup);
    println!("orientation 640x640 x 180 x L41 all 180: gpu {ms:.3} ms [{regions}]");
    let p36_101 = OrientationParams {
        length: 101,
        angles: 36,
        ..Default::default()
    };
    let (ms, regions) = time_orientation(g, &hd, &p36_101, d);
    println!("orientation 1080p x 36 x L101 (rings in global memory): gpu {ms:.3} ms [{regions}]");

    println!("\n== CPU orientation (rayon) ==");
    let cpu = cpu_ms(2, || {
        let _ = orientation::orientation(hd.view(), &p36).unwrap();
    });
    println!("cpu orientation 1080p x 36 x L31: {cpu:.1} ms");
    let cpu = cpu_ms(2, || {
        let _ = orientation::orientation(sq.view(), &p180).unwrap();
    });
    println!("cpu orientation 640x640 x 180 x L31 (dedup): {cpu:.1} ms");

    println!("\n== tuning sweep (whole enqueue, ms) ==");
    for (name, img, p) in [("1080p x 36", &hd, &p36), ("640^2 x 180 all", &sq, &p180)] {
        for block in [128u32, 256] {
            for zones in [None, Some(2), Some(4), Some(6), Some(8), Some(12)] {
                let t = OrientationTuning {
                    block,
                    zones,
                    dedup: !name.contains("all"),
                    ..d
                };
                let (ms, _) = time_orientation(g, img, p, t);
                println!("sweep {name}: block {block} zones {zones:?}: {ms:.3} ms");
            }
        }
    }
    for zones in [None, Some(16), Some(32), Some(64)] {
        for angle in [0.0, 30.0, 90.0] {
            let (ms, _) = time_opening(g, &hd, angle, 31, OrientationTuning { zones, ..d });
            println!("sweep opening 1080p angle {angle}: zones {zones:?}: {ms:.3} ms");
        }
    }
    println!("\n== repeat of the two targets (noise) ==");
    for _ in 0..3 {
        let (a, _) = time_orientation(g, &hd, &p36, d);
        let (b, _) = time_orientation(g, &sq, &p180, nodedup);
        let (c, _) = time_orientation(g, &sq, &p180, d);
        println!("repeat: 1080p x 36 {a:.3} ms, 640^2 x 180 all {b:.3} ms, dedup {c:.3} ms");
    }
}
