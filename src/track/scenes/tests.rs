//! Checks of the scene renderer itself.

use super::catalogue::{held_out, tuning};
use super::*;

#[test]
fn ground_truth_boxes_are_the_visible_pixels() {
    let mut scene = random::RandomSpec {
        objects: 0,
        convoys: 0,
        occluders: 0,
        ..random::RandomSpec::default()
    }
    .build();
    scene.noise = Noise::default();
    scene.frames = 3;
    scene.objects = vec![
        SceneObject {
            id: 1,
            radii: [5.0, 5.0],
            grey: 100,
            path: vec![Some([20.0, 20.0]); 3],
        },
        // Covers the right half of object 1 at frame 1.
        SceneObject {
            id: 2,
            radii: [5.0, 5.0],
            grey: 200,
            path: vec![Some([60.0, 20.0]), Some([25.0, 20.0]), Some([20.0, 20.0])],
        },
    ];
    let (img, truth) = scene.render(0);
    assert_eq!(img.get(20, 20), 100);
    assert_eq!(img.get(0, 0), scene.background);
    assert_eq!(truth[0].bbox, [15.0, 15.0, 11.0, 11.0]);
    assert_eq!(truth[0].visibility, 1.0);
    let (_, truth) = scene.render(1);
    // Object 2 (x 20..=30 on the centre row, narrower above and below) leaves columns 15..=21.
    assert_eq!(truth[0].bbox, [15.0, 15.0, 7.0, 11.0]);
    assert!(truth[0].visibility < 0.6 && truth[0].visibility > 0.3);
    // Fully covered: out of the ground truth.
    let (_, truth) = scene.render(2);
    assert_eq!(truth.iter().map(|t| t.id).collect::<Vec<_>>(), vec![2]);
}

#[test]
fn occluders_and_background_stay_below_the_threshold() {
    for scene in tuning().iter().chain(held_out().iter()) {
        assert!(
            scene.width % 2 == 0 && scene.height % 2 == 0,
            "{}",
            scene.name
        );
        let max_dark = scene
            .background
            .max(scene.occluders.iter().map(|o| o.grey).max().unwrap_or(0))
            + scene.noise.pixel;
        assert!(max_dark < FOREGROUND_THRESHOLD, "{}", scene.name);
        assert!(
            scene
                .objects
                .iter()
                .all(|o| o.grey >= FOREGROUND_THRESHOLD + scene.noise.pixel + 20),
            "{}",
            scene.name
        );
        assert!(
            scene.objects.iter().all(|o| o.path.len() == scene.frames),
            "{}",
            scene.name
        );
    }
}

#[test]
fn rendering_is_deterministic() {
    let s = &tuning()[5];
    assert_eq!(s.render(17), s.render(17));
    assert_ne!(s.render(17).0, s.render(18).0);
}

use crate::ops::cca::{CcaCpu, CcaParams, Source, Threshold};
use crate::track::appearance::mean_grey_levels;
use crate::track::metrics::{FrameBoxes, MotMetrics, evaluate};
use crate::track::{Tracker, TrackerParams};

/// Runs a scene through thresholding at [`FOREGROUND_THRESHOLD`], labeling and tracking (as
/// `morphoscope run --set cca.source=frame` does, without the video encoding), and scores the
/// MOT rows at IoU >= 0.5.
fn track_scene(scene: &Scene, params: &TrackerParams) -> MotMetrics {
    let cca = CcaParams {
        source: Source::Frame,
        threshold: Threshold::Fixed(u32::from(FOREGROUND_THRESHOLD)),
        ..CcaParams::default()
    };
    let mut labeler = CcaCpu::new();
    let mut tracker = Tracker::new(TrackerParams {
        frame_rate: f64::from(scene.fps),
        ..params.clone()
    })
    .expect("params");
    let mut gts: Vec<FrameBoxes> = Vec::new();
    let mut hyps: Vec<FrameBoxes> = vec![Vec::new(); scene.frames];
    for f in 0..scene.frames {
        let (img, truth) = scene.render(f);
        let out = labeler.process(img.view(), &cca).expect("labels");
        let grey = mean_grey_levels(&out.table, img.view(), params.min_area, |v| {
            v > FOREGROUND_THRESHOLD
        });
        let tracked = tracker.update(&out.table, &grey, None);
        for row in tracked.mot_rows() {
            let v: Vec<f64> = row.split(',').map(|x| x.parse().expect("number")).collect();
            hyps[v[0] as usize - 1].push((v[1] as u64, [v[2], v[3], v[4], v[5]]));
        }
        gts.push(truth.iter().map(|t| (t.id, t.bbox)).collect());
    }
    for (f, h) in hyps.iter().enumerate() {
        let mut ids: Vec<u64> = h.iter().map(|r| r.0).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            h.len(),
            "{}: an id twice in frame {f}",
            scene.name
        );
    }
    evaluate(&gts, &hyps, 0.5)
}

/// Both sets' figures, scene by scene (`cargo test --lib track::scenes::tests::figures --
/// --ignored --nocapture`).
#[test]
#[ignore]
fn figures() {
    let p = TrackerParams::default();
    for (set, scenes) in [("tuning", tuning()), ("held_out", held_out())] {
        for s in &scenes {
            let m = track_scene(s, &p);
            println!(
                "{set:8} {:12} MOTA {:.3} IDF1 {:.3} IDSW {:3} FP {:4} FN {:4} GT {}",
                s.name, m.mota, m.idf1, m.idsw, m.fp, m.fn_, m.gt
            );
        }
        let (mota, idf1, idsw) = set_figures(&scenes, &p);
        println!(
            "{set:8} {:12} MOTA {mota:.3} IDF1 {idf1:.3} IDSW {idsw:3}",
            "all"
        );
    }
}

/// Summed figures of a set of scenes: (MOTA, IDF1, ID switches).
fn set_figures(scenes: &[Scene], params: &TrackerParams) -> (f64, f64, usize) {
    let (mut gt, mut hyp, mut errors, mut idtp, mut idsw) = (0, 0, 0, 0, 0);
    for s in scenes {
        let m = track_scene(s, params);
        gt += m.gt;
        hyp += m.hyp;
        errors += m.fp + m.fn_ + m.idsw;
        idtp += m.idtp;
        idsw += m.idsw;
    }
    (
        1.0 - errors as f64 / gt as f64,
        2.0 * idtp as f64 / (gt + hyp) as f64,
        idsw,
    )
}

/// How the tuning scenes' figures move with each setting around the defaults (the
/// measurement the defaults were chosen by): `cargo test --lib
/// track::scenes::tests::defaults_sweep -- --ignored --nocapture`.
#[test]
#[ignore]
fn defaults_sweep() {
    let scenes = tuning();
    let d = TrackerParams::default();
    let variants: Vec<(&str, Vec<(f64, TrackerParams)>)> = vec![
        (
            "confirm_seconds",
            [0.04, 0.1, 0.2, 0.4]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            confirm_seconds: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "lost_seconds",
            [0.4, 1.0, 2.0, 4.0, 8.0]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            lost_seconds: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "max_distance",
            [25.0, 50.0, 100.0]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            max_distance: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "gate_growth",
            [0.0, 50.0, 100.0, 200.0, 400.0]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            gate_growth: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "appearance_weight",
            [0.0, 0.25, 0.5, 1.0, 2.0]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            appearance_weight: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "iou_weight",
            [0.0, 0.5, 1.0]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            iou_weight: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "grey_tolerance",
            [10.0, 20.0, 40.0, 80.0]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            grey_tolerance: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "shape_tolerance",
            [1.25, 1.5, 2.0]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            shape_tolerance: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "merge_area_share",
            [0.1, 0.2, 0.3, 0.5]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            merge_area_share: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "process_noise",
            [0.3, 1.0, 3.0]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            process_noise: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
        (
            "measurement_noise",
            [1.0, 2.0, 4.0]
                .map(|v| {
                    (
                        v,
                        TrackerParams {
                            measurement_noise: v,
                            ..d.clone()
                        },
                    )
                })
                .to_vec(),
        ),
    ];
    for (name, list) in variants {
        for (v, p) in list {
            let (mota, idf1, idsw) = set_figures(&scenes, &p);
            println!(
                "{name:18} {v:6} MOTA {:.1} IDF1 {:.1} IDSW {idsw}",
                100.0 * mota,
                100.0 * idf1
            );
        }
    }
}

/// Each scene's floor, a little under what the tracker measures with its defaults
/// (`figures`): (scene, MOTA, IDF1, most ID switches).
const FLOORS: [(&str, f64, f64, usize); 8] = [
    ("crossing", 0.98, 0.99, 0),
    ("convoy", 0.97, 0.98, 0),
    ("occluder", 0.95, 0.97, 0),
    ("bounce", 0.99, 0.99, 0),
    ("enter_exit", 0.98, 0.99, 0),
    ("noise", 0.99, 0.99, 0),
    ("random_a", 0.94, 0.78, 9),
    ("random_b", 0.92, 0.87, 13),
];

#[test]
fn every_tuning_scene_keeps_its_figures() {
    let p = TrackerParams::default();
    let scenes = tuning();
    assert_eq!(scenes.len(), FLOORS.len());
    for (s, (name, mota, idf1, idsw)) in scenes.iter().zip(FLOORS) {
        assert_eq!(s.name, name);
        let m = track_scene(s, &p);
        assert!(
            m.mota >= mota && m.idf1 >= idf1 && m.idsw <= idsw,
            "{name}: {m:?}"
        );
    }
}
