//! The element on the CUDA backend: its metadata equals `morphoscope run --backend cuda` on the
//! same frames. Skips without a GPU; fails with `MORPHOSCOPE_REQUIRE_GPU=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::{cli_component_lines, element_component_lines, run_pipeline};
use morphoscope::backend::Backend;
use morphoscope::gpu::GpuContext;

fn cuda() -> Option<Backend> {
    match GpuContext::new(0) {
        Ok(g) => Some(Backend::Cuda(Arc::new(g))),
        Err(e) => {
            assert!(
                std::env::var("MORPHOSCOPE_REQUIRE_GPU").as_deref() != Ok("1"),
                "MORPHOSCOPE_REQUIRE_GPU=1 but the CUDA backend is unavailable: {e}"
            );
            eprintln!("GPU test skipped: {e}");
            None
        }
    }
}

#[test]
fn cuda_element_metadata_equals_the_cli_on_cuda() {
    let Some(backend) = cuda() else { return };
    let src = "videotestsrc pattern=ball num-buffers=60 ! video/x-raw,format=RGB,width=320,height=240,framerate=25/1";
    let out = run_pipeline(
        &format!("{src} ! morphoscope backend=cuda draw=true ! appsink name=sink sync=false"),
        None,
    );
    assert!(out.eos);
    assert_eq!(out.frames.len(), 60);
    assert_eq!(
        out.frames[0]
            .summary
            .as_ref()
            .unwrap()
            .get::<&str>("backend")
            .unwrap(),
        "cuda"
    );
    let cli = cli_component_lines(
        &format!("{src} ! appsink name=sink"),
        &["pipeline.backend=cuda"],
        &backend,
        None,
    );
    assert_eq!(element_component_lines(&out), cli);
    assert!(
        out.frames.iter().map(|f| f.components.len()).sum::<usize>() > 10,
        "the ball is tracked"
    );
}

#[test]
fn cuda_element_on_the_sample_clip_keeps_every_frame() {
    let Some(_) = cuda() else { return };
    // The GPU machine carries the clip as H.264 (`vtest.mp4`, decoded by NVDEC); a checkout
    // has OpenCV's MPEG-4 `vtest.avi`. Same 795 frames.
    let mp4 = common::samples_dir().join("vtest.mp4");
    let clip = if mp4.is_file() {
        mp4
    } else {
        let Some(avi) = common::sample("vtest.avi") else {
            return;
        };
        avi
    };
    let desc = format!(
        "filesrc location=\"{}\" ! decodebin ! videoconvert ! video/x-raw,format=RGB ! morphoscope backend=cuda ! appsink name=sink sync=false",
        clip.display()
    );
    let out = run_pipeline(&desc, None);
    assert!(out.eos);
    assert_eq!(out.frames.len(), 795, "every frame of the clip out");
}
