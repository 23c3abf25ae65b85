//! Cost of the tracker per frame at about a thousand components:
//!
//! ```sh
//! cargo bench --bench tracker_cost
//! ```
//!
//! A random scene of 1920 x 1080 with 1 250 wandering objects (semi-axes 4-9 px, 30-150 px a
//! second, convoys and occluders as in the project's scenes, so objects merge, split and hide)
//! is rendered and labeled once (CPU labeler, `cca.source = "frame"`); then the tracker alone
//! ([`Tracker::update`]) is timed over the frames' component tables, after the mean grey
//! levels ([`mean_grey_levels`], part of what `cca` does for the tracker, timed apart). Prints
//! the components and detections a frame and the median, 95th percentile, maximum and mean
//! milliseconds a frame of both steps over every frame after the first second (tracks still
//! being born): for the tracker, each frame's fastest of five passes (the work is the same in
//! every pass; on a shared machine the others include waits for other processes), and every
//! pass.

use std::time::Instant;

use morphoscope::ops::cca::{CcaCpu, CcaParams, ComponentTable, Source, Threshold};
use morphoscope::track::appearance::mean_grey_levels;
use morphoscope::track::scenes::random::RandomSpec;
use morphoscope::track::scenes::{FOREGROUND_THRESHOLD, Noise};
use morphoscope::track::{Tracker, TrackerParams};

/// Frames rendered (6 s at 25 fps).
const FRAMES: usize = 150;
/// Frames left out of the statistics while the tracks are born.
const WARM_UP: usize = 25;
/// Passes over the frames.
const PASSES: usize = 5;

fn stats(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    let pick = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    format!(
        "median {:.3} ms, p95 {:.3} ms, max {:.3} ms, mean {:.3} ms ({} frames)",
        pick(0.5),
        pick(0.95),
        pick(1.0),
        mean,
        ms.len()
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = RandomSpec {
        name: "cost",
        seed: 7,
        width: 1920,
        height: 1080,
        seconds: FRAMES as f64 / 25.0,
        objects: 1250,
        radius: [4.0, 9.0],
        speed: [30.0, 150.0],
        entering: 0.2,
        convoys: 100,
        occluders: 3,
        noise: Noise {
            pixel: 4,
            specks: 400,
            clutter_per_second: 50.0,
        },
        ..RandomSpec::default()
    };
    let scene = spec.build();
    let params = TrackerParams::default();
    let cca = CcaParams {
        source: Source::Frame,
        threshold: Threshold::Fixed(u32::from(FOREGROUND_THRESHOLD)),
        ..CcaParams::default()
    };
    let mut labeler = CcaCpu::new();
    let mut frames: Vec<(ComponentTable, Vec<Option<f64>>)> = Vec::with_capacity(FRAMES);
    let mut grey_ms = Vec::new();
    for f in 0..scene.frames {
        let (img, _) = scene.render(f);
        let out = labeler.process(img.view(), &cca)?;
        let t = Instant::now();
        let grey = mean_grey_levels(&out.table, img.view(), params.min_area, |v| {
            v > FOREGROUND_THRESHOLD
        });
        if f >= WARM_UP {
            grey_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        frames.push((out.table, grey));
    }
    let n = frames.len().max(1) as f64;
    let components = frames.iter().map(|(t, _)| t.len()).sum::<usize>() as f64 / n;
    let detections = frames
        .iter()
        .map(|(t, _)| {
            t.components
                .iter()
                .filter(|c| c.area >= params.min_area)
                .count()
        })
        .sum::<usize>() as f64
        / n;
    println!(
        "{} frames of 1920x1080: {components:.0} components, {detections:.0} detections (>= {} px) a frame",
        frames.len(),
        params.min_area
    );
    println!("mean grey levels: {}", stats(grey_ms));
    // Per frame, the fastest of the passes (the work is the same every pass: the slower ones
    // waited for other processes).
    let mut update_ms = vec![f64::INFINITY; frames.len()];
    let mut all_ms = Vec::new();
    let mut tracks = 0;
    for _ in 0..PASSES {
        let mut tracker = Tracker::new(params.clone())?;
        for (f, (table, grey)) in frames.iter().enumerate() {
            let t = Instant::now();
            let out = tracker.update(table, grey, None);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            update_ms[f] = update_ms[f].min(ms);
            if f >= WARM_UP {
                all_ms.push(ms);
            }
            tracks = tracks.max(out.tracks.len());
        }
    }
    println!(
        "tracker update, best of {PASSES} passes: {}",
        stats(update_ms.split_off(WARM_UP))
    );
    println!("tracker update, every pass:     {}", stats(all_ms));
    println!("up to {tracks} confirmed, merged or lost tracks a frame");
    Ok(())
}
