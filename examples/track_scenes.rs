//! Renders the tracker's synthetic scenes (`morphoscope::track::scenes::catalogue`) as videos
//! with MOT ground truth, for `scripts/bench_trackers.py`:
//!
//! ```sh
//! cargo run --example track_scenes -- OUT_DIR
//! ```
//!
//! writes, per scene, `OUT_DIR/<set>/<name>/video.mkv` (H.264 by x264 through the project's
//! overlay encoder, grey frames), `gt.txt` (MOT Challenge rows of the visible objects) and
//! `scene.json` (size, frame rate, frame and object counts); `<set>` is `tuning` or
//! `held_out`.

use std::path::PathBuf;

use morphoscope::config::EncoderChoice;
use morphoscope::image::Image;
use morphoscope::output::encoder::{choose_encoder, installed_encoder};
use morphoscope::output::video::{InputLayout, VideoSpec, VideoWriter};
use morphoscope::source::FrameRate;
use morphoscope::track::scenes::catalogue::{held_out, tuning};
use morphoscope::track::scenes::{Scene, mot_truth_rows};

/// Bit rate of the rendered videos: high enough that the encoder keeps every object's edge.
const VIDEO_KBPS: u32 = 8000;

fn render(scene: &Scene, dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    // x264 whatever else is installed: the same videos on every machine.
    let encoder = choose_encoder(
        EncoderChoice::X264,
        scene.width,
        scene.height,
        installed_encoder,
    )?;
    let spec = VideoSpec {
        width: scene.width,
        height: scene.height,
        layout: InputLayout::Rgb,
        frame_rate: FrameRate::new(i32::try_from(scene.fps)?, 1),
        kbps: VIDEO_KBPS,
        encoder,
    };
    let mut video = VideoWriter::create(&dir.join("video.mkv"), spec)?;
    let frame_nanos = 1_000_000_000 / u64::from(scene.fps.max(1));
    let mut gt = String::new();
    for f in 0..scene.frames {
        let (grey, truth) = scene.render(f);
        // Copy: grey to RGB for the encoder.
        let rgb = Image::from_fn(grey.width(), grey.height(), |x, y| [grey.get(x, y); 3]);
        video.push_rgb(&rgb, Some(f as u64 * frame_nanos))?;
        gt.push_str(&mot_truth_rows(f, &truth));
    }
    video.finish()?;
    std::fs::write(dir.join("gt.txt"), gt)?;
    let meta = serde_json::json!({
        "name": scene.name,
        "width": scene.width,
        "height": scene.height,
        "fps": scene.fps,
        "frames": scene.frames,
        "objects": scene.objects.len(),
        "occluders": scene.occluders.len(),
    });
    std::fs::write(dir.join("scene.json"), meta.to_string())?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    morphoscope::source::init_gstreamer()?;
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: track_scenes OUT_DIR")?,
    );
    for (set, scenes) in [("tuning", tuning()), ("held_out", held_out())] {
        for scene in &scenes {
            render(scene, &out.join(set).join(&scene.name))?;
            println!(
                "{set}/{}: {} frames, {} objects",
                scene.name,
                scene.frames,
                scene.objects.len()
            );
        }
    }
    Ok(())
}
