//! Helpers for the element's tests: the plugin registered in-process, pipelines run to their
//! end through an appsink, and the reference results of `morphoscope run` on the same frames
//! (the library path `run` takes: `Pipeline` fed by the source spec, `RunSink` writing
//! `components.jsonl`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use gstmorphoscope::metadata::{self, TrackedComponent};
use morphoscope::backend::Backend;
use morphoscope::config::Settings;
use morphoscope::output::{RunEnd, RunSink, SinkOptions};
use morphoscope::pipeline::{Delivery, FrameSource, PictureWant, Pipeline, PipelineEvent};
use morphoscope::source::SourceSpec;

/// Initialises GStreamer and registers the plugin once per test binary.
pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        gst::init().unwrap();
        gstmorphoscope::plugin_register_static().unwrap();
    });
}

/// What came out of the element for one buffer.
#[derive(Debug)]
pub struct OutFrame {
    pub caps: gst::Caps,
    pub pts: Option<gst::ClockTime>,
    pub size: usize,
    /// A hash of the buffer's bytes (mapped to host memory).
    pub digest: u64,
    /// The bytes themselves, when asked for ([`run_pipeline_keeping_bytes`]).
    pub bytes: Option<Vec<u8>>,
    pub summary: Option<gst::Structure>,
    pub components: Vec<TrackedComponent>,
}

/// What a pipeline run gave: every buffer the appsink `sink` got, whether EOS came, the frame
/// summaries posted on the bus.
#[derive(Debug)]
pub struct Outcome {
    pub frames: Vec<OutFrame>,
    pub eos: bool,
    pub messages: Vec<gst::Structure>,
}

/// Parses `desc` (with an appsink named `sink`) and returns it, not yet playing, with its sink.
pub fn parsed(desc: &str) -> (gst::Pipeline, gst_app::AppSink) {
    init();
    let pipeline = gst::parse::launch(desc)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    let sink = pipeline
        .by_name("sink")
        .unwrap()
        .downcast::<gst_app::AppSink>()
        .unwrap();
    (pipeline, sink)
}

/// Parses `desc` (with an appsink named `sink`), sets it playing and returns it with its sink.
pub fn playing(desc: &str) -> (gst::Pipeline, gst_app::AppSink) {
    let (pipeline, sink) = parsed(desc);
    pipeline.set_state(gst::State::Playing).unwrap();
    (pipeline, sink)
}

/// The next buffer out of `sink` (within 30 s) with its frame summary; no buffer fails the test
/// with the errors `pipeline` posted.
pub fn next_summary(
    pipeline: &gst::Pipeline,
    sink: &gst_app::AppSink,
) -> (gst::Buffer, gst::Structure) {
    let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_seconds(30)) else {
        let bus = pipeline.bus().unwrap();
        let errors: Vec<String> = std::iter::from_fn(|| bus.pop())
            .filter_map(|m| match m.view() {
                gst::MessageView::Error(e) => Some(format!("{} {:?}", e.error(), e.debug())),
                _ => None,
            })
            .collect();
        panic!("no frame out; errors posted: {errors:?}");
    };
    let buffer = sample.buffer_owned().unwrap();
    let summary = metadata::frame_summary_of(&buffer).unwrap();
    (buffer, summary)
}

/// Runs `desc` (with an appsink named `sink`) to EOS, or until `max_frames` buffers came out.
pub fn run_pipeline(desc: &str, max_frames: Option<usize>) -> Outcome {
    run(desc, max_frames, false)
}

/// [`run_pipeline`], keeping every buffer's bytes (small streams).
pub fn run_pipeline_keeping_bytes(desc: &str) -> Outcome {
    run(desc, None, true)
}

fn run(desc: &str, max_frames: Option<usize>, keep_bytes: bool) -> Outcome {
    let (pipeline, sink) = playing(desc);
    let bus = pipeline.bus().unwrap();
    let mut frames = Vec::new();
    let mut eos = false;
    let mut messages = Vec::new();
    loop {
        if max_frames.is_some_and(|m| frames.len() >= m) {
            break;
        }
        if let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_mseconds(200)) {
            let buffer = sample.buffer().unwrap();
            frames.push(OutFrame {
                caps: sample.caps().unwrap().to_owned(),
                pts: buffer.pts(),
                size: buffer.size(),
                digest: {
                    use std::hash::{Hash, Hasher};
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    buffer.map_readable().unwrap().as_slice().hash(&mut h);
                    h.finish()
                },
                bytes: keep_bytes.then(|| buffer.map_readable().unwrap().as_slice().to_vec()),
                summary: metadata::frame_summary_of(buffer),
                components: metadata::tracked_components(buffer),
            });
        } else if sink.is_eos() {
            eos = true;
            break;
        }
        while let Some(msg) = bus.pop() {
            match msg.view() {
                gst::MessageView::Error(e) => {
                    panic!("pipeline error: {} ({:?})", e.error(), e.debug())
                }
                gst::MessageView::Element(e) => {
                    if let Some(s) = e
                        .structure()
                        .filter(|s| s.name() == metadata::FRAME_STRUCTURE)
                    {
                        messages.push(s.to_owned());
                    }
                }
                _ => {}
            }
        }
    }
    while let Some(msg) = bus.timed_pop(gst::ClockTime::from_mseconds(10)) {
        if let gst::MessageView::Element(e) = msg.view()
            && let Some(s) = e
                .structure()
                .filter(|s| s.name() == metadata::FRAME_STRUCTURE)
        {
            messages.push(s.to_owned());
        }
    }
    pipeline.set_state(gst::State::Null).unwrap();
    Outcome {
        frames,
        eos,
        messages,
    }
}

/// The `components.jsonl` lines `morphoscope run` writes for the source `desc` (a pipeline
/// ending in `appsink name=sink`) with `sets` (`section.key=value`), at most `max_frames`.
pub fn cli_component_lines(
    desc: &str,
    sets: &[&str],
    backend: &Backend,
    max_frames: Option<u64>,
) -> Vec<String> {
    init();
    let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
    let settings = Settings::load(None, &sets).unwrap();
    let spec = SourceSpec::parse(desc).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opts = SinkOptions {
        stream: 0,
        video: false,
        video_kbps: 1000,
        encoder: settings.output.encoder,
        source: desc.to_owned(),
        backend: backend.describe(),
        segments: Default::default(),
    };
    let (mut sink, _) = RunSink::create(dir.path(), opts).unwrap();
    let p = Pipeline::start_limited(
        FrameSource::Spec(spec),
        &settings,
        backend,
        Delivery::All,
        PictureWant::None,
        max_frames,
    )
    .unwrap();
    loop {
        match p.events.recv_timeout(Duration::from_secs(300)).unwrap() {
            PipelineEvent::Frame(f) => sink.write(&f).unwrap(),
            PipelineEvent::End => break,
            PipelineEvent::Error(e) => panic!("{e}"),
        }
    }
    let counters = p.counters.snapshot();
    p.join();
    let finished = sink.finish(&RunEnd {
        counters,
        wall_seconds: 0.0,
        ended: "end of stream".into(),
    });
    assert!(finished.error.is_none());
    let text = std::fs::read_to_string(dir.path().join("components.jsonl")).unwrap_or_default();
    text.lines().map(str::to_owned).collect()
}

/// The element's `components-json` of each frame, in order.
pub fn element_component_lines(out: &Outcome) -> Vec<String> {
    out.frames
        .iter()
        .map(|f| {
            f.summary
                .as_ref()
                .and_then(|s| s.get::<String>("components-json").ok())
                .expect("a frame summary with the component table")
        })
        .collect()
}

/// The tracked components a `components.jsonl` line lists, as the ROI metas carry them (the
/// velocity is not in the line: it is left out of the comparison).
pub fn tracked_in_line(line: &str) -> Vec<(u64, [u32; 4], u64)> {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["table"]["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let id = c.get("track_id")?.as_u64()?;
            let n = |k: &str| c[k].as_u64().unwrap();
            Some((
                id,
                [
                    n("left") as u32,
                    n("top") as u32,
                    n("width") as u32,
                    n("height") as u32,
                ],
                n("area"),
            ))
        })
        .collect()
}

#[path = "../../../tests/common/samples.rs"]
mod samples;
pub use samples::samples_dir;

/// `name` in the samples, or `None` (skip) — a failure with `MORPHOSCOPE_REQUIRE_SAMPLES=1`.
pub fn sample(name: &str) -> Option<PathBuf> {
    let p = samples_dir().join(name);
    if p.is_file() {
        return Some(std::fs::canonicalize(&p).unwrap());
    }
    assert!(
        std::env::var("MORPHOSCOPE_REQUIRE_SAMPLES").as_deref() != Ok("1"),
        "sample {} missing",
        p.display()
    );
    eprintln!("sample {} missing; skipped", p.display());
    None
}
