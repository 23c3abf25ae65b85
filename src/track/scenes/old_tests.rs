//! Synthetic scenes with ground truth for the tracker: discs drawn into binary frames, labelled
//! by the CPU labeler (8-connectivity), tracked, and scored with MOTA / IDF1 (IoU >= 0.5).
//!
//! Ground truth per frame is each visible object's own pixel bounding box (clipped to the
//! frame). The hypothesis is every component carrying a confirmed track id, with its pixel box.
//! Each test states the errors the design cannot avoid (the `confirm_hits - 1 = 2` frames
//! before an id is given, one missing detection per frame while two objects touch and form a
//! single component) and holds the metrics just under the value those errors alone allow, so
//! any extra miss, false positive or identity switch beyond a small margin fails.

use crate::image::Image;
use crate::ops::ccl::{Connectivity, label_with_stats};

use super::metrics::{FrameBoxes, MotMetrics, evaluate};
use super::{Tracker, TrackerParams};

const W: usize = 320;
const H: usize = 240;

/// An object: id, radius, and its centre at each frame (`None` = not drawn).
struct Obj {
    id: u64,
    r: f64,
    pos: Box<dyn Fn(usize) -> Option<(f64, f64)>>,
}

fn linear(x0: f64, y0: f64, vx: f64, vy: f64) -> Box<dyn Fn(usize) -> Option<(f64, f64)>> {
    Box::new(move |f| Some((x0 + vx * f as f64, y0 + vy * f as f64)))
}

/// Renders one frame: the mask, the ground-truth boxes, plus extra noise pixels.
fn render(objs: &[Obj], f: usize, noise: &[(usize, usize)]) -> (Image<u8>, FrameBoxes) {
    let mut img = Image::new(W, H, 0u8);
    let mut gt = Vec::new();
    for o in objs {
        let Some((cx, cy)) = (o.pos)(f) else { continue };
        let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0, 0);
        let r2 = o.r * o.r;
        let xs = ((cx - o.r).floor().max(0.0) as usize)..=((cx + o.r).ceil().min(W as f64 - 1.0).max(0.0) as usize);
        for y in ((cy - o.r).floor().max(0.0) as usize)..=((cy + o.r).ceil().min(H as f64 - 1.0).max(0.0) as usize) {
            for x in xs.clone() {
                let (dx, dy) = (x as f64 - cx, y as f64 - cy);
                if dx * dx + dy * dy <= r2 && x < W && y < H {
                    img.set(x, y, 255);
                    (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
                }
            }
        }
        if x0 <= x1 && y0 <= y1 {
            gt.push((o.id, [x0 as f64, y0 as f64, (x1 - x0 + 1) as f64, (y1 - y0 + 1) as f64]));
        }
    }
    for &(x, y) in noise {
        img.set(x % W, y % H, 255);
    }
    (img, gt)
}

/// Runs a scene through labeling + tracking; returns the metrics and the tracker.
fn run(objs: &[Obj], frames: usize, params: TrackerParams, noise: impl Fn(usize) -> Vec<(usize, usize)>) -> MotMetrics {
    let mut tr = Tracker::new(params).expect("params");
    let (mut gts, mut hyps) = (Vec::new(), Vec::new());
    for f in 0..frames {
        let (img, gt) = render(objs, f, &noise(f));
        let (_, table) = label_with_stats(img.view(), Connectivity::Eight).expect("labels");
        let out = tr.update(&table);
        hyps.push(out.table.components.iter().filter_map(|c| c.track_id.map(|id| (id, c.bbox()))).collect());
        gts.push(gt);
    }
    evaluate(&gts, &hyps, 0.5)
}

fn report(name: &str, m: &MotMetrics) {
    println!(
        "scene {name}: GT {} HYP {} FN {} FP {} IDSW {} MOTA {:.4} IDF1 {:.4}",
        m.gt, m.hyp, m.fn_, m.fp, m.idsw, m.mota, m.idf1
    );
}

/// Deterministic pseudo-random numbers (SplitMix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[test]
fn scene_linear_motion() {
    // Four discs on separate lanes, 1..4 px/frame, 120 frames. Unavoidable: 2 frames per object
    // before confirmation -> FN = 8 of 480, MOTA <= 0.983, IDF1 <= 0.992.
    let objs = vec![
        Obj { id: 1, r: 8.0, pos: linear(20.0, 30.0, 1.0, 0.0) },
        Obj { id: 2, r: 8.0, pos: linear(300.0, 80.0, -2.0, 0.25) },
        Obj { id: 3, r: 6.0, pos: linear(20.0, 140.0, 2.5, 0.5) },
        Obj { id: 4, r: 10.0, pos: linear(40.0, 220.0, 2.0, -0.4) },
    ];
    let m = run(&objs, 120, TrackerParams::default(), |_| Vec::new());
    report("linear", &m);
    assert_eq!((m.fp, m.idsw), (0, 0));
    assert!(m.fn_ <= 8);
    assert!(m.mota >= 0.98 && m.idf1 >= 0.99, "{m:?}");
}

#[test]
fn scene_crossing() {
    // Two discs (r = 8) cross diagonally (vy = +-3 px/frame) and leave through the top and
    // bottom borders (110 GT boxes). Around the crossing they touch for ~7 frames and form one
    // component, whose box matches one of them (IoU >= 0.5): 7 FN, plus 4 FN before
    // confirmation -> MOTA <= 0.90, IDF1 <= 0.947 (measured: exactly these). The hidden one must
    // keep its id through the merge (the Kalman prediction carries it): IDSW = 0.
    let objs = vec![
        Obj { id: 1, r: 8.0, pos: linear(30.0, 60.0, 2.5, 3.0) },
        Obj { id: 2, r: 8.0, pos: linear(30.0, 140.0, 2.5, -3.0) },
    ];
    let m = run(&objs, 60, TrackerParams::default(), |_| Vec::new());
    report("crossing", &m);
    assert_eq!(m.idsw, 0, "{m:?}");
    assert!(m.mota >= 0.88 && m.idf1 >= 0.93, "{m:?}");
}

#[test]
fn scene_stop_and_occlusion() {
    // One disc moves, stops for 25 frames, moves on, then is invisible for 6 frames (occluded)
    // and reappears on its course. Ground truth omits invisible frames, so the only
    // unavoidable errors are the 2 unconfirmed frames: one id throughout (IDSW 0, IDF1 >= 0.98).
    let pos = |f: usize| -> Option<(f64, f64)> {
        let f = f as f64;
        let x = if f < 30.0 { 20.0 + 3.0 * f } else if f < 55.0 { 110.0 } else { 110.0 + 3.0 * (f - 55.0) };
        if (70.0..76.0).contains(&f) { None } else { Some((x, 120.0)) }
    };
    let objs = vec![Obj { id: 1, r: 9.0, pos: Box::new(pos) }];
    let m = run(&objs, 100, TrackerParams::default(), |_| Vec::new());
    report("stop+occlusion", &m);
    assert_eq!((m.fp, m.idsw), (0, 0), "{m:?}");
    assert!(m.fn_ <= 2 && m.idf1 >= 0.98, "{m:?}");
}

#[test]
fn scene_enter_and_leave() {
    // Six discs enter at the left border at staggered times and leave at the right border
    // (partly visible boxes at both borders). Unavoidable: 2 unconfirmed frames each (12 FN of
    // 504, MOTA <= 0.976); slivers at the borders under min_area cost a few more (measured
    // 0.964). Each must get its own id: IDSW 0, MOTA >= 0.95, IDF1 >= 0.95.
    let objs: Vec<Obj> = (0..6u64)
        .map(|i| {
            let t0 = 15.0 * i as f64;
            let y = 25.0 + 35.0 * i as f64;
            Obj {
                id: i + 1,
                r: 7.0,
                pos: Box::new(move |f| {
                    let x = -7.0 + 4.0 * (f as f64 - t0);
                    if (-7.0..=W as f64 + 7.0).contains(&x) { Some((x, y)) } else { None }
                }),
            }
        })
        .collect();
    let m = run(&objs, 180, TrackerParams { min_area: 5, ..TrackerParams::default() }, |_| Vec::new());
    report("enter+leave", &m);
    assert_eq!(m.idsw, 0, "{m:?}");
    assert!(m.mota >= 0.95 && m.idf1 >= 0.95, "{m:?}");
}

#[test]
fn scene_split_and_merge() {
    // A and B start glued (one component) and split at frame 20; C and D approach, touch from
    // frame 56 and travel together to the end (frame 90). While glued, one component stands
    // for two objects: one FN per glued frame (21 + 34), plus 2 unconfirmed frames for each of
    // the 4 tracks: 63 FN of 345 GT -> MOTA <= 0.817 (measured 0.8145: one more FN at the
    // split). The track hidden by the merge is removed after max_misses: missed frames, not
    // switches (IDSW 0 measured, <= 1 allowed). Thresholds: MOTA >= 0.80, IDF1 >= 0.88.
    let objs = vec![
        Obj { id: 1, r: 8.0, pos: Box::new(|f| Some((100.0 - if f < 20 { 0.0 } else { 2.0 * (f as f64 - 20.0) }, 60.0))) },
        Obj { id: 2, r: 8.0, pos: Box::new(|f| Some((116.0 + if f < 20 { 0.0 } else { 2.0 * (f as f64 - 20.0) }, 60.0))) },
        Obj { id: 3, r: 8.0, pos: Box::new(|f| Some(((40.0 + 2.0 * f as f64).min(150.0), 170.0))) },
        Obj { id: 4, r: 8.0, pos: Box::new(|f| Some(((280.0 - 2.0 * f as f64).max(166.0), 170.0))) },
    ];
    let m = run(&objs, 90, TrackerParams::default(), |_| Vec::new());
    report("split+merge", &m);
    assert!(m.idsw <= 1, "{m:?}");
    assert!(m.mota >= 0.80 && m.idf1 >= 0.88, "{m:?}");
}

#[test]
fn scene_noise_and_dropouts() {
    // Three moving discs, 150 salt pixels per frame (components far below min_area) and 5 % of
    // detections dropped at random (the object is not drawn, so not in the GT either).
    // Unavoidable: 6 unconfirmed frames of 290 -> MOTA <= 0.979 (measured 0.979). No false
    // positives from the noise (min_area), no switches across dropouts (the lost track keeps
    // predicting): FP 0, IDSW 0, MOTA >= 0.95, IDF1 >= 0.97.
    let drop = |id: u64, f: usize| {
        let mut r = Rng(id * 7919 + f as u64 * 104_729);
        r.next() % 100 < 5
    };
    let objs: Vec<Obj> = (0..3u64)
        .map(|i| {
            let (x0, y0, vx, vy) = [(20.0, 40.0, 2.0, 0.5), (300.0, 120.0, -1.5, 0.3), (280.0, 230.0, 0.0, -1.5)][i as usize];
            Obj { id: i + 1, r: 8.0, pos: Box::new(move |f| if drop(i, f) { None } else { Some((x0 + vx * f as f64, y0 + vy * f as f64)) }) }
        })
        .collect();
    let m = run(&objs, 100, TrackerParams::default(), |f| {
        let mut r = Rng(f as u64 + 1);
        (0..150).map(|_| ((r.next() % W as u64) as usize, (r.next() % H as u64) as usize)).collect()
    });
    report("noise+dropouts", &m);
    assert_eq!((m.fp, m.idsw), (0, 0), "{m:?}");
    assert!(m.mota >= 0.95 && m.idf1 >= 0.97, "{m:?}");
}


/// Smoke run on a real clip (ignored; needs `CCL_SMOKE_FRAMES`, raw 8-bit 768x576 frames, e.g.
/// the pedestrian clip `vtest.avi` decoded to grey): motion binarization on the CPU, tracking,
/// MOT rows and overlay PNGs (boxes and trails coloured by id) in `CCL_SMOKE_OUT` for a look.
#[test]
#[ignore]
fn smoke_real_clip_motion_tracking() {
    use crate::ops::ccl::{CclCpu, CclParams, Source, Threshold};
    let Some(path) = std::env::var_os("CCL_SMOKE_FRAMES") else { return };
    let out = std::path::PathBuf::from(std::env::var_os("CCL_SMOKE_OUT").unwrap_or_else(|| "/tmp/ccl_smoke".into()));
    std::fs::create_dir_all(&out).expect("out dir");
    let (w, h) = (768usize, 576usize);
    let raw = std::fs::read(path).expect("frames");
    let lr = std::env::var("CCL_SMOKE_LR").ok().and_then(|s| s.parse().ok()).unwrap_or(0.05);
    let params = CclParams { source: Source::Motion, threshold: Threshold::Fixed(25), learning_rate: lr, ..CclParams::default() };
    let tparams = TrackerParams { min_area: 150, ..TrackerParams::default() };
    let mut ccl = CclCpu::new();
    let mut tr = Tracker::new(tparams).expect("params");
    let mut csv = String::new();
    let (mut comps, mut dets, mut ids) = (0usize, 0usize, std::collections::BTreeSet::new());
    let frames = raw.len() / (w * h);
    for f in 0..frames {
        let img = Image::from_vec(w, h, raw[f * w * h..(f + 1) * w * h].to_vec()).expect("frame");
        let o = ccl.process(img.view(), &params).expect("ccl");
        let t = tr.update(&o.table);
        comps += o.table.len();
        dets += o.table.components.iter().filter(|c| c.area >= 150).count();
        for r in t.mot_rows() {
            csv.push_str(&r);
            csv.push('\n');
        }
        for r in &t.tracks {
            ids.insert(r.id);
        }
        if f % 50 == 49 {
            let mut rgb = image::RgbImage::from_fn(w as u32, h as u32, |x, y| {
                let v = img.get(x as usize, y as usize) / 2;
                if o.labels.get(x as usize, y as usize) != 0 { image::Rgb([v, v + 100, v]) } else { image::Rgb([v, v, v]) }
            });
            for r in t.tracks.iter().filter(|r| r.state == super::TrackState::Confirmed) {
                let col = image::Rgb([((r.id * 97) % 200 + 55) as u8, ((r.id * 57) % 200 + 55) as u8, 255]);
                let [l, tp, bw, bh] = r.bbox.map(|v| v.max(0.0) as u32);
                for x in l..(l + bw).min(w as u32) {
                    for y in [tp, (tp + bh).min(h as u32 - 1)] {
                        rgb.put_pixel(x, y.min(h as u32 - 1), col);
                    }
                }
                for y in tp..(tp + bh).min(h as u32) {
                    for x in [l, (l + bw).min(w as u32 - 1)] {
                        rgb.put_pixel(x.min(w as u32 - 1), y, col);
                    }
                }
                for p in &r.trail {
                    let (x, y) = (p[0].clamp(0.0, w as f64 - 2.0) as u32, p[1].clamp(0.0, h as f64 - 2.0) as u32);
                    for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                        rgb.put_pixel(x + dx, y + dy, image::Rgb([255, 40, 40]));
                    }
                }
            }
            rgb.save(out.join(format!("frame{f:04}.png"))).expect("png");
        }
    }
    std::fs::write(out.join("tracks.csv"), &csv).expect("csv");
    println!(
        "smoke: {frames} frames, {:.1} components/frame, {:.1} detections/frame (area >= 150), {} track ids, {} MOT rows",
        comps as f64 / frames as f64,
        dets as f64 / frames as f64,
        ids.len(),
        csv.lines().count()
    );
}
