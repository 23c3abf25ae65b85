//! The element on the CUDA backend: its metadata equals `morphoscope run --backend cuda` on the
//! same frames. Skips without a GPU; fails with `MORPHOSCOPE_REQUIRE_GPU=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::{
    cli_component_lines, element_component_lines, run_pipeline, run_pipeline_keeping_bytes,
};
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

/// Whether GStreamer's nvcodec plugin registered `factory` here (it does where CUDA, and for
/// the decoders NVDEC, work); a missing one fails the test under `MORPHOSCOPE_REQUIRE_GPU=1`.
fn nvcodec(factory: &str) -> bool {
    common::init();
    let found = gstreamer::ElementFactory::find(factory).is_some();
    assert!(
        found || std::env::var("MORPHOSCOPE_REQUIRE_GPU").as_deref() != Ok("1"),
        "MORPHOSCOPE_REQUIRE_GPU=1 but nvcodec's {factory} is not registered"
    );
    found
}

/// Each frame's `input-memory` (where the analyses read it).
fn input_memory(out: &common::Outcome) -> Vec<String> {
    out.frames
        .iter()
        .map(|f| {
            f.summary
                .as_ref()
                .and_then(|s| s.get::<String>("input-memory").ok())
                .unwrap_or_default()
        })
        .collect()
}

/// Where two runs' buffers differ: (frame, byte offset, device byte, host byte) of the first
/// differing byte of each frame that differs.
fn differences(device: &common::Outcome, host: &common::Outcome) -> Vec<(usize, usize, u8, u8)> {
    device
        .frames
        .iter()
        .zip(&host.frames)
        .enumerate()
        .filter_map(|(i, (d, h))| {
            let (d, h) = (d.bytes.as_ref()?, h.bytes.as_ref()?);
            let at = d.iter().zip(h.iter()).position(|(a, b)| a != b)?;
            Some((i, at, d[at], h[at]))
        })
        .collect()
}

#[test]
fn cuda_memory_is_read_in_place_and_gives_the_pictures_and_tables_of_system_memory() {
    let Some(_) = cuda() else { return };
    if !nvcodec("cudaupload") {
        return;
    }
    // Odd size: the last chroma column and row cover one pixel.
    let src = "videotestsrc pattern=ball num-buffers=40 ! video/x-raw,format=NV12,width=321,height=241,framerate=25/1";
    // The caps filter asks for CUDA memory (cudaupload prefers passing system memory through).
    let upload = "cudaupload ! video/x-raw(memory:CUDAMemory)";
    let both = |props: &str| {
        let tail = format!("morphoscope backend=cuda {props} ! appsink name=sink sync=false");
        let device = run_pipeline_keeping_bytes(&format!("{src} ! {upload} ! {tail}"));
        let host = run_pipeline_keeping_bytes(&format!("{src} ! {tail}"));
        assert_eq!(device.frames.len(), 40);
        assert_eq!(host.frames.len(), 40);
        assert!(
            input_memory(&device).iter().all(|m| m == "cuda"),
            "every frame read in CUDA memory: {:?}",
            input_memory(&device)
        );
        assert!(input_memory(&host).iter().all(|m| m == "system"));
        (device, host)
    };
    // No analysis: the picture is the converted frame itself.
    let (device, host) =
        both("draw=true maxtree=false cca=false orientation=false segmentation=false");
    assert_eq!(differences(&device, &host), [], "conversions differ");
    // Every analysis: equal tables, equal pictures with the overlays.
    let (device, host) = both("draw=true");
    assert_eq!(
        element_component_lines(&device),
        element_component_lines(&host)
    );
    assert!(
        device
            .frames
            .iter()
            .map(|f| f.components.len())
            .sum::<usize>()
            > 10,
        "the ball is tracked"
    );
    assert_eq!(differences(&device, &host), [], "pictures differ");
}

#[test]
fn nvdec_frames_stay_on_the_gpu_with_the_tables_of_system_memory() {
    let Some(_) = cuda() else { return };
    let clip = common::samples_dir().join("vtest.mp4");
    if !clip.is_file() || !nvcodec("nvh264dec") {
        return;
    }
    let dec = format!(
        "filesrc location=\"{}\" ! qtdemux ! h264parse ! nvh264dec",
        clip.display()
    );
    let tail = "morphoscope backend=cuda ! appsink name=sink sync=false";
    let device = run_pipeline(&format!("{dec} ! {tail}"), None);
    // The caps filter keeps the decoder's frames in system memory.
    let host = run_pipeline(&format!("{dec} ! video/x-raw,format=NV12 ! {tail}"), None);
    assert_eq!(device.frames.len(), 795);
    assert_eq!(host.frames.len(), 795);
    assert!(
        input_memory(&device).iter().all(|m| m == "cuda"),
        "decoded frames read in CUDA memory: {:?}",
        &input_memory(&device)[..3]
    );
    assert!(input_memory(&host).iter().all(|m| m == "system"));
    assert_eq!(
        element_component_lines(&device),
        element_component_lines(&host)
    );
}

#[test]
fn nvdec_frames_stay_on_the_gpu_after_a_stop_and_a_restart() {
    use gstreamer::prelude::*;
    let Some(_) = cuda() else { return };
    let clip = common::samples_dir().join("vtest.mp4");
    if !clip.is_file() || !nvcodec("nvh264dec") {
        return;
    }
    // The H.264 stream out of its MP4 first: a demuxer's pads are not linked again after a
    // restart by a `gst::parse::launch` pipeline.
    let dir = tempfile::tempdir().unwrap();
    let h264 = dir.path().join("vtest.h264");
    let extract = gstreamer::parse::launch(&format!(
        "filesrc location=\"{}\" ! qtdemux ! h264parse ! video/x-h264,stream-format=byte-stream ! filesink location=\"{}\"",
        clip.display(),
        h264.display()
    ))
    .unwrap();
    extract.set_state(gstreamer::State::Playing).unwrap();
    extract
        .bus()
        .unwrap()
        .timed_pop_filtered(
            gstreamer::ClockTime::from_seconds(30),
            &[gstreamer::MessageType::Eos, gstreamer::MessageType::Error],
        )
        .expect("the stream extracted");
    extract.set_state(gstreamer::State::Null).unwrap();
    let (pipeline, sink) = common::playing(&format!(
        "filesrc location=\"{}\" ! h264parse ! nvh264dec ! morphoscope backend=cuda ! appsink name=sink sync=false",
        h264.display()
    ));
    let memory_of_next = || {
        common::next_summary(&pipeline, &sink)
            .1
            .get::<String>("input-memory")
            .unwrap()
    };
    let before: Vec<_> = (0..10).map(|_| memory_of_next()).collect();
    // READY stops the element (and the decoder keeps the context it took from it).
    pipeline.set_state(gstreamer::State::Ready).unwrap();
    pipeline.set_state(gstreamer::State::Playing).unwrap();
    let after: Vec<_> = (0..10).map(|_| memory_of_next()).collect();
    pipeline.set_state(gstreamer::State::Null).unwrap();
    assert!(before.iter().all(|m| m == "cuda"), "{before:?}");
    assert!(
        after.iter().all(|m| m == "cuda"),
        "after the restart: {after:?}"
    );
}
