//! The element in real pipelines (CPU backend): metadata equal to `morphoscope run`'s results
//! on the same frames, frames in = frames out, EOS, a format change mid-stream, the latency
//! query, drawing, and every property documented with its range.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::str::FromStr;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use common::{cli_component_lines, element_component_lines, run_pipeline, tracked_in_line};
use morphoscope::backend::Backend;

/// A moving ball: the motion source finds it and the tracker confirms it within a few frames.
const BALL: &str = "videotestsrc pattern=ball num-buffers=40 ! video/x-raw,format=RGB,width=160,height=120,framerate=25/1";
/// Smaller analyses so that debug builds run them quickly (the same on both sides).
const SETS: &[&str] = &[
    "pipeline.backend=cpu",
    "orientation.angles=8",
    "orientation.length=9",
];
const PROPS: &str = "backend=cpu orientation-angles=8 orientation-length=9";

#[test]
fn videotestsrc_metadata_equals_the_cli_component_tables() {
    let out = run_pipeline(
        &format!("{BALL} ! morphoscope {PROPS} ! appsink name=sink sync=false"),
        None,
    );
    assert!(out.eos, "EOS reached the sink");
    assert_eq!(out.frames.len(), 40, "frames in = frames out");
    let cli = cli_component_lines(
        &format!("{BALL} ! appsink name=sink"),
        SETS,
        &Backend::Cpu,
        None,
    );
    assert_eq!(cli.len(), 40);
    let element = element_component_lines(&out);
    assert_eq!(
        element, cli,
        "component tables with track ids, frame by frame"
    );
    let mut tracked = 0;
    for (f, line) in out.frames.iter().zip(&cli) {
        let mut metas: Vec<(u64, [u32; 4], u64)> = f
            .components
            .iter()
            .map(|c| (c.track_id, c.bbox, c.area))
            .collect();
        metas.sort_unstable();
        let mut want = tracked_in_line(line);
        want.sort_unstable();
        assert_eq!(
            metas, want,
            "one region-of-interest meta per tracked component"
        );
        tracked += metas.len();
    }
    assert!(
        tracked > 10,
        "the ball is tracked ({tracked} component metas in all)"
    );
    // The bus got the same summaries, in order.
    let indices: Vec<u64> = out
        .messages
        .iter()
        .map(|s| s.get::<u64>("index").unwrap())
        .collect();
    assert_eq!(indices, (0..40).collect::<Vec<_>>());
    let first = out.frames[0].summary.as_ref().unwrap();
    assert_eq!(first.get::<&str>("backend").unwrap(), "cpu");
    assert!(first.get::<gst::Structure>("timings").is_ok());
    assert!(
        first
            .get::<gst::Structure>("cca")
            .unwrap()
            .get::<u64>("components")
            .is_ok()
    );
}

#[test]
fn a_file_through_decodebin_gives_the_cli_tables() {
    let Some(clip) = common::sample("vtest.avi") else {
        return;
    };
    // The clip is long: 60 frames on both sides, components only (the tables do not depend on
    // the other analyses).
    let props = "backend=cpu maxtree=false orientation=false segmentation=false";
    let sets = [
        "pipeline.backend=cpu",
        "maxtree.enabled=false",
        "orientation.enabled=false",
        "segmentation.enabled=false",
    ];
    let decode = format!(
        "filesrc location=\"{}\" ! decodebin ! videoconvert ! video/x-raw,format=RGB",
        clip.display()
    );
    let out = run_pipeline(
        &format!("{decode} ! morphoscope {props} ! appsink name=sink sync=false"),
        Some(60),
    );
    assert_eq!(out.frames.len(), 60);
    let cli = cli_component_lines(
        &format!("{decode} ! appsink name=sink"),
        &sets,
        &Backend::Cpu,
        Some(60),
    );
    assert_eq!(element_component_lines(&out), cli);
    assert!(
        out.frames.iter().map(|f| f.components.len()).sum::<usize>() > 0,
        "people are tracked"
    );
}

#[test]
fn a_format_change_mid_stream_restarts_the_analyses_at_the_new_size() {
    common::init();
    let pipeline = gst::Pipeline::new();
    let src = gst_app::AppSrc::builder().format(gst::Format::Time).build();
    let elem = gst::ElementFactory::make("morphoscope")
        .property_from_str("backend", "cpu")
        .property("orientation-angles", 4u32)
        .property("orientation-length", 5u32)
        .build()
        .unwrap();
    let sink = gst_app::AppSink::builder().sync(false).build();
    pipeline
        .add_many([src.upcast_ref(), &elem, sink.upcast_ref()])
        .unwrap();
    gst::Element::link_many([src.upcast_ref(), &elem, sink.upcast_ref()]).unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let mut pts = 0u64;
    for (w, h) in [(64u32, 48u32), (80, 60)] {
        let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::Gray8, w, h)
            .fps(gst::Fraction::new(25, 1))
            .build()
            .unwrap();
        src.set_caps(Some(&info.to_caps().unwrap()));
        for k in 0..5u32 {
            let data: Vec<u8> = (0..w * h)
                .map(|i| if (i % w + k * 3) % 20 < 6 { 200 } else { 10 })
                .map(|v| v as u8)
                .collect();
            let mut b = gst::Buffer::from_mut_slice(data);
            b.get_mut()
                .unwrap()
                .set_pts(gst::ClockTime::from_mseconds(pts * 40));
            pts += 1;
            src.push_buffer(b).unwrap();
        }
    }
    src.end_of_stream().unwrap();
    let mut sizes = Vec::new();
    while let Some(s) = sink.try_pull_sample(gst::ClockTime::from_seconds(60)) {
        let info = gst_video::VideoInfo::from_caps(s.caps().unwrap()).unwrap();
        let summary = gstmorphoscope::metadata::frame_summary_of(s.buffer().unwrap()).unwrap();
        assert_eq!(
            (
                summary.get::<u32>("width").unwrap(),
                summary.get::<u32>("height").unwrap()
            ),
            (info.width(), info.height())
        );
        sizes.push((
            info.width(),
            info.height(),
            summary.get::<u64>("index").unwrap(),
        ));
    }
    assert!(sink.is_eos());
    pipeline.set_state(gst::State::Null).unwrap();
    let want: Vec<(u32, u32, u64)> = (0..10)
        .map(|i| if i < 5 { (64, 48, i) } else { (80, 60, i - 5) })
        .collect();
    assert_eq!(
        sizes, want,
        "every frame out, the new size from the change on, the analyses restarted"
    );
}

/// A latency answer: (live, min, max).
type Latency = (bool, gst::ClockTime, Option<gst::ClockTime>);

/// Plays `desc` (an element named `m` before a sink named `sink`) and answers the latency
/// query upstream of `m` and downstream of it.
fn latency_around_the_element(desc: &str) -> (Latency, Latency) {
    common::init();
    let pipeline = gst::parse::launch(desc)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let (res, state, _) = pipeline.state(gst::ClockTime::from_seconds(30));
    assert!(
        res.is_ok() && state == gst::State::Playing,
        "{res:?} {state:?}"
    );
    let peer_query = |element: &str| {
        let mut q = gst::query::Latency::new();
        let pad = pipeline
            .by_name(element)
            .unwrap()
            .static_pad("sink")
            .unwrap();
        assert!(
            pad.peer_query(&mut q),
            "latency query upstream of {element}"
        );
        q.result()
    };
    let answers = (peer_query("m"), peer_query("sink"));
    pipeline.set_state(gst::State::Null).unwrap();
    answers
}

#[test]
fn the_latency_query_adds_ring_size_frames_to_upstream() {
    let ((up_live, up_min, _), (live, min, max)) = latency_around_the_element(
        "videotestsrc is-live=true ! video/x-raw,format=GRAY8,width=64,height=48,framerate=25/1 ! morphoscope name=m backend=cpu ring-size=4 orientation-angles=4 orientation-length=5 ! fakesink name=sink",
    );
    assert!(live && up_live);
    assert_eq!(
        min,
        up_min + gst::ClockTime::from_mseconds(160),
        "4 frames of 40 ms"
    );
    assert!(max.is_none_or(|m| m >= min));
}

#[test]
fn behind_a_source_that_is_not_live_the_element_holds_the_ring_and_the_queue() {
    // Not live: the element holds `ring-size` + `pipeline.queue` (4 by default) frames, and its
    // latency answer counts them (2 + 4 frames of 40 ms).
    let ((up_live, up_min, _), (live, min, _)) = latency_around_the_element(
        "videotestsrc num-buffers=400 ! video/x-raw,format=GRAY8,width=64,height=48,framerate=25/1 ! morphoscope name=m backend=cpu ring-size=2 orientation-angles=4 orientation-length=5 ! fakesink name=sink sync=false",
    );
    assert!(!live && !up_live);
    assert_eq!(
        min,
        up_min + gst::ClockTime::from_mseconds(240),
        "6 frames of 40 ms"
    );
}

#[test]
fn decoder_and_camera_formats_give_the_tables_of_videoconvert_to_rgb() {
    // 161x121: rows of RGB whose length is not a multiple of 4, odd chroma planes.
    for (format, width, height) in [
        ("NV12", 160, 120),
        ("I420", 160, 120),
        ("YUY2", 160, 120),
        ("NV12", 161, 121),
        ("I420", 162, 121),
    ] {
        let src = format!(
            "videotestsrc pattern=ball num-buffers=20 ! video/x-raw,format={format},width={width},height={height},framerate=25/1"
        );
        let inside = run_pipeline(
            &format!("{src} ! morphoscope {PROPS} ! appsink name=sink sync=false"),
            None,
        );
        let before = run_pipeline(
            &format!(
                "{src} ! videoconvert ! video/x-raw,format=RGB ! morphoscope {PROPS} ! appsink name=sink sync=false"
            ),
            None,
        );
        assert!(inside.eos && before.eos);
        assert_eq!(inside.frames.len(), 20, "{format}: frames in = frames out");
        for f in &inside.frames {
            let info = gst_video::VideoInfo::from_caps(&f.caps).unwrap();
            assert_eq!(
                info.format().to_str(),
                format,
                "the frames go on in their own format"
            );
        }
        let lines = element_component_lines(&inside);
        assert_eq!(
            lines,
            element_component_lines(&before),
            "{format}: converted inside = converted by videoconvert"
        );
        assert!(
            inside.frames.iter().any(|f| !f.components.is_empty()),
            "{format}: the ball is found"
        );
    }
    // Drawing gives RGB whatever comes in.
    let drawn = run_pipeline(
        &format!(
            "videotestsrc pattern=ball num-buffers=3 ! video/x-raw,format=NV12,width=96,height=64 ! morphoscope draw=true {PROPS} ! appsink name=sink sync=false"
        ),
        None,
    );
    assert_eq!(drawn.frames.len(), 3);
    let info = gst_video::VideoInfo::from_caps(&drawn.frames[0].caps).unwrap();
    assert_eq!(info.format(), gst_video::VideoFormat::Rgb);
}

#[test]
fn drawing_turns_grey_frames_into_rgb_pictures_with_the_overlays() {
    let desc = "videotestsrc pattern=ball num-buffers=12 ! video/x-raw,format=GRAY8,width=96,height=64,framerate=25/1 ! morphoscope draw=true backend=cpu orientation-angles=4 orientation-length=5 ! appsink name=sink sync=false";
    let out = run_pipeline(desc, None);
    assert_eq!(out.frames.len(), 12);
    for f in &out.frames {
        let info = gst_video::VideoInfo::from_caps(&f.caps).unwrap();
        assert_eq!(
            (info.format(), info.width(), info.height()),
            (gst_video::VideoFormat::Rgb, 96, 64)
        );
        assert_eq!(f.size, info.size());
        assert!(f.summary.is_some(), "metadata kept on the drawn buffer");
    }
    let plain = run_pipeline(&desc.replace("draw=true", "draw=false"), None);
    assert!(plain.frames.iter().all(
        |f| gst_video::VideoInfo::from_caps(&f.caps).unwrap().format()
            == gst_video::VideoFormat::Gray8
    ));
}

#[test]
fn qos_drop_counts_what_it_drops_and_analyse_drops_nothing() {
    common::init();
    let desc = "videotestsrc num-buffers=20 ! video/x-raw,format=GRAY8,width=64,height=48 ! morphoscope name=m qos=drop ring-size=1 backend=cpu orientation-angles=4 orientation-length=5 ! appsink name=sink sync=false";
    let out = run_pipeline(desc, None);
    let dropped = out
        .frames
        .last()
        .and_then(|f| f.summary.as_ref())
        .map_or(0, |s| s.get::<u64>("dropped").unwrap());
    assert_eq!(
        out.frames.len() as u64 + dropped,
        20,
        "every frame is either out or counted as dropped (the count of the last frame out is a lower bound)"
    );
    let out = run_pipeline(&desc.replace("qos=drop", "qos=analyse"), None);
    assert_eq!(out.frames.len(), 20);
}

#[test]
fn every_property_has_a_doc_and_the_element_is_registered() {
    common::init();
    let factory = gst::ElementFactory::find("morphoscope").expect("registered");
    assert_eq!(factory.plugin_name().as_deref(), Some("morphoscope"));
    let elem = factory.create().build().unwrap();
    let props = elem.list_properties();
    for name in [
        "config",
        "backend",
        "device",
        "draw",
        "qos",
        "dropped",
        "ring-size",
        "maxtree",
        "maxtree-threshold",
        "cca",
        "cca-threshold",
        "min-area",
        "orientation",
        "orientation-angles",
        "segmentation",
        "segmentation-scale",
    ] {
        let p = props
            .iter()
            .find(|p| p.name() == name)
            .unwrap_or_else(|| panic!("property {name}"));
        assert!(p.blurb().is_some_and(|b| b.len() > 10), "{name} documented");
    }
    assert_eq!(elem.property::<u32>("ring-size"), 3);
    elem.set_property("ring-size", 5u32);
    assert_eq!(elem.property::<u32>("ring-size"), 5);
}

#[test]
fn a_flushing_seek_drops_the_frames_in_flight_and_restarts_the_analyses() {
    let desc = "videotestsrc pattern=ball ! video/x-raw,format=GRAY8,width=64,height=48,framerate=25/1 ! morphoscope backend=cpu orientation-angles=4 orientation-length=5 ! appsink name=sink sync=false max-buffers=4";
    let (pipeline, sink) = common::playing(desc);
    let pull = || {
        let (b, summary) = common::next_summary(&pipeline, &sink);
        (
            b.pts(),
            summary.get::<u64>("index").unwrap(),
            summary.get::<String>("components-json").unwrap(),
        )
    };
    let before: Vec<_> = (0..10).map(|_| pull()).collect();
    assert_eq!(
        before.iter().map(|f| f.1).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    pipeline
        .seek_simple(
            gst::SeekFlags::FLUSH | gst::SeekFlags::ACCURATE,
            gst::ClockTime::ZERO,
        )
        .unwrap();
    // Frames pushed before the flush may still be in the sink's queue: find the restart.
    let after = (0..20)
        .map(|_| pull())
        .find(|f| f.0 == Some(gst::ClockTime::ZERO))
        .expect("the frame at 0 again");
    pipeline.set_state(gst::State::Null).unwrap();
    assert_eq!(after.1, 0, "the analyses restarted at the seek");
    assert_eq!(
        after.2, before[0].2,
        "same frame, fresh tracker: same table"
    );
}

/// The `morphoscope` binary beside this test's folder (`target/<profile>/morphoscope`), built
/// by `cargo test --workspace`; `MORPHOSCOPE_BIN` names another.
fn morphoscope_binary() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("MORPHOSCOPE_BIN") {
        return Some(p.into());
    }
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("morphoscope");
    bin.is_file().then_some(bin)
}

#[test]
fn the_morphoscope_binary_writes_the_tables_the_element_carries() {
    let Some(bin) = morphoscope_binary() else {
        eprintln!("morphoscope binary not built (cargo test --workspace builds it); skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(&bin);
    cmd.args([
        "run",
        &format!("{BALL} ! appsink name=sink"),
        "--backend",
        "cpu",
        "--no-video",
        "--quiet",
        "--out",
    ])
    .arg(dir.path());
    for s in &SETS[1..] {
        cmd.args(["--set", s]);
    }
    let status = cmd.status().unwrap();
    assert!(status.success(), "{} run failed", bin.display());
    let cli: Vec<String> = std::fs::read_to_string(dir.path().join("components.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let out = run_pipeline(
        &format!("{BALL} ! morphoscope {PROPS} ! appsink name=sink sync=false"),
        None,
    );
    assert_eq!(element_component_lines(&out), cli);
}

#[test]
fn an_analysis_switched_off_while_playing_stops_from_a_later_frame() {
    let desc = "videotestsrc pattern=ball num-buffers=60 ! video/x-raw,format=GRAY8,width=64,height=48,framerate=25/1 ! morphoscope name=m backend=cpu orientation-angles=4 orientation-length=5 ! appsink name=sink sync=false max-buffers=2";
    let (pipeline, sink) = common::playing(desc);
    let has_segmentation = || {
        common::next_summary(&pipeline, &sink)
            .1
            .has_field("segmentation")
    };
    assert!((0..5).all(|_| has_segmentation()));
    pipeline
        .by_name("m")
        .unwrap()
        .set_property("segmentation", false);
    let later: Vec<bool> = (0..20).map(|_| has_segmentation()).collect();
    pipeline.set_state(gst::State::Null).unwrap();
    let first_off = later.iter().position(|s| !s).expect("segmentation stopped");
    assert!(
        later[first_off..].iter().all(|s| !s),
        "and stays off: {later:?}"
    );
}

#[test]
fn frames_leave_from_the_elements_own_thread_while_upstream_goes_on() {
    common::init();
    let pipeline = gst::parse::launch(
        "videotestsrc num-buffers=30 ! video/x-raw,format=GRAY8,width=64,height=48 ! morphoscope name=m backend=cpu ! fakesink sync=false",
    )
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    let m = pipeline.by_name("m").unwrap();
    let threads = std::sync::Arc::new(std::sync::Mutex::new((
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    )));
    for (pad, input) in [("sink", true), ("src", false)] {
        let threads = threads.clone();
        m.static_pad(pad)
            .unwrap()
            .add_probe(gst::PadProbeType::BUFFER, move |_, _| {
                let id = format!("{:?}", std::thread::current().id());
                let mut t = threads.lock().unwrap();
                if input {
                    t.0.insert(id)
                } else {
                    t.1.insert(id)
                };
                gst::PadProbeReturn::Ok
            });
    }
    pipeline.set_state(gst::State::Playing).unwrap();
    let bus = pipeline.bus().unwrap();
    let msg = bus
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(60),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        )
        .expect("the run ends");
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(matches!(msg.view(), gst::MessageView::Eos(_)), "{msg:?}");
    let (input, output) = threads.lock().unwrap().clone();
    assert_eq!(input.len(), 1, "one input thread: {input:?}");
    assert_eq!(output.len(), 1, "one output thread: {output:?}");
    assert!(
        input.is_disjoint(&output),
        "output pushed from the input's thread"
    );
}

#[test]
fn an_output_linked_to_nothing_ends_the_run_with_an_error_not_a_hang() {
    common::init();
    let pipeline = gst::Pipeline::new();
    let src = gst::ElementFactory::make("videotestsrc").build().unwrap();
    let m = gst::ElementFactory::make("morphoscope")
        .property_from_str("backend", "cpu")
        .build()
        .unwrap();
    pipeline.add_many([&src, &m]).unwrap();
    src.link(&m).unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let msg = pipeline
        .bus()
        .unwrap()
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(60),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        )
        .expect("an error, not a hang");
    pipeline.set_state(gst::State::Null).unwrap();
    let gst::MessageView::Error(e) = msg.view() else {
        panic!("expected an error, got {msg:?}");
    };
    assert!(
        format!("{:?}", e.debug()).contains("NotLinked"),
        "the reason is named: {:?}",
        e.debug()
    );
}

#[test]
fn cuda_memory_is_offered_only_where_the_backend_may_be_cuda() {
    common::init();
    let cuda_nv12 = gst::Caps::from_str("video/x-raw(memory:CUDAMemory),format=NV12").unwrap();
    let offered = |backend: &str| {
        let m = gst::ElementFactory::make("morphoscope")
            .property_from_str("backend", backend)
            .build()
            .unwrap();
        let caps = m.static_pad("sink").unwrap().query_caps(None);
        (caps.can_intersect(&cuda_nv12), caps)
    };
    let (auto, caps) = offered("auto");
    assert!(auto, "auto offers CUDA memory: {caps}");
    assert!(
        caps.structure(0)
            .zip(caps.features(0))
            .is_some_and(
                |(s, f)| f.contains("memory:CUDAMemory") && s.get::<&str>("format") == Ok("NV12")
            ),
        "CUDA memory first (preferred): {caps}"
    );
    assert!(offered("cuda").0);
    let (cpu, caps) = offered("cpu");
    assert!(
        !cpu,
        "the CPU backend would copy it to the host anyway: {caps}"
    );
    // The pad template lists it, so gst-inspect shows it.
    let template = gst::ElementFactory::find("morphoscope")
        .unwrap()
        .static_pad_templates()
        .into_iter()
        .find(|t| t.name_template() == "sink")
        .unwrap()
        .caps();
    assert!(template.can_intersect(&cuda_nv12));
}

#[test]
fn drawn_frames_have_their_row_padding_zeroed() {
    // 161 RGB pixels are 483 bytes: GStreamer pads each row to 484.
    let out = common::run_pipeline_keeping_bytes(
        "videotestsrc pattern=ball num-buffers=30 ! video/x-raw,format=GRAY8,width=161,height=121 ! morphoscope backend=cpu draw=true segmentation=false ! appsink name=sink sync=false",
    );
    assert_eq!(out.frames.len(), 30);
    for f in &out.frames {
        let bytes = f.bytes.as_ref().unwrap();
        assert_eq!(bytes.len(), 484 * 121);
        assert!(
            bytes.chunks(484).all(|row| row[483] == 0),
            "padding is zero"
        );
        assert!(bytes.iter().any(|&b| b != 0), "the picture is there");
    }
}

#[test]
fn a_stop_and_a_restart_analyse_the_stream_again() {
    let (pipeline, sink) = common::playing(
        "videotestsrc pattern=ball num-buffers=40 ! video/x-raw,format=NV12,width=64,height=48 ! morphoscope backend=cpu segmentation=false ! appsink name=sink sync=false",
    );
    let index_of_next = || {
        common::next_summary(&pipeline, &sink)
            .1
            .get::<u64>("index")
            .unwrap()
    };
    let before: Vec<_> = (0..5).map(|_| index_of_next()).collect();
    pipeline.set_state(gst::State::Ready).unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let after: Vec<_> = (0..5).map(|_| index_of_next()).collect();
    pipeline.set_state(gst::State::Null).unwrap();
    assert_eq!(before, [0, 1, 2, 3, 4]);
    assert_eq!(after, [0, 1, 2, 3, 4], "a fresh engine after the restart");
}

/// The error the element posts when it cannot start with `props` (`config` and analysis
/// properties), as one text: the message and its debug detail.
fn start_error(props: &[(&str, &str)]) -> String {
    common::init();
    let pipeline = gst::Pipeline::new();
    let src = gst::ElementFactory::make("videotestsrc")
        .property("num-buffers", 5)
        .build()
        .unwrap();
    let mut builder = gst::ElementFactory::make("morphoscope").property_from_str("backend", "cpu");
    for (name, value) in props {
        builder = builder.property_from_str(name, value);
    }
    let m = builder.build().unwrap();
    let sink = gst::ElementFactory::make("fakesink").build().unwrap();
    pipeline.add_many([&src, &m, &sink]).unwrap();
    gst::Element::link_many([&src, &m, &sink]).unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let msg = pipeline
        .bus()
        .unwrap()
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(60),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        )
        .expect("an error, not a hang");
    pipeline.set_state(gst::State::Null).unwrap();
    let gst::MessageView::Error(e) = msg.view() else {
        panic!("expected an error, got {msg:?}");
    };
    format!("{} {:?}", e.error(), e.debug())
}

#[test]
fn the_bus_never_shows_a_password_and_names_the_property() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("login.toml");
    std::fs::write(
        &config,
        "[publish]\nusername = \"cam\"\npassword = \"hunter2-secret\n",
    )
    .unwrap();
    let e = start_error(&[("config", config.to_str().unwrap())]);
    assert!(!e.contains("hunter2-secret"), "{e}");
    assert!(e.contains("line 3"), "{e}");
    let e = start_error(&[("cca-threshold", "abc")]);
    assert!(
        e.contains("property cca-threshold=abc") && !e.contains("--set"),
        "{e}"
    );
}
