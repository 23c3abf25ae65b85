//! The analytics relation meta (cargo feature `analytics`, GStreamer >= 1.24): one
//! object-detection entry per tracked component with the box of its region-of-interest meta,
//! part of a tracking entry with the track id, first seen at the frame the track first came
//! out and last seen at this frame; a relation meta attached upstream is extended, not doubled.
#![cfg(feature = "analytics")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_analytics as gst_analytics;
use gstreamer_analytics::prelude::*;

use gstmorphoscope::analytics::{TrackedDetection, tracked_detections};
use gstmorphoscope::metadata::{TrackedComponent, tracked_components};

/// A moving ball the tracker confirms within a few frames (as in the element's tests).
const BALL: &str = "videotestsrc pattern=ball num-buffers=40 ! video/x-raw,format=RGB,width=160,height=120,framerate=25/1";
const PROPS: &str = "backend=cpu orientation-angles=8 orientation-length=9";
/// The object type of the entry the test's "upstream detector" adds.
const UPSTREAM_TYPE: &str = "upstream-car";

/// One buffer out of the element: its running time, ROI metas, analytics entries, the number
/// of relation metas and the upstream entries found in them.
struct Out {
    running_time: gst::ClockTime,
    components: Vec<TrackedComponent>,
    detections: Vec<TrackedDetection>,
    relation_metas: usize,
    upstream_entries: usize,
}

/// Runs `BALL ! morphoscope ! appsink`; with `upstream`, a probe in front of the element adds
/// a relation meta with one detection of another type to every buffer.
fn run(upstream: bool) -> Vec<Out> {
    let (pipeline, sink) = common::parsed(&format!(
        "{BALL} ! morphoscope name=m {PROPS} ! appsink name=sink sync=false"
    ));
    if upstream {
        let pad = pipeline.by_name("m").unwrap().static_pad("sink").unwrap();
        pad.add_probe(gst::PadProbeType::BUFFER, |_, info| {
            if let Some(gst::PadProbeData::Buffer(buffer)) = info.data.as_mut() {
                let mut meta = gst_analytics::AnalyticsRelationMeta::add(buffer.make_mut());
                let kind = glib::Quark::from_str(UPSTREAM_TYPE);
                meta.add_od_mtd(kind, 1, 2, 3, 4, 0.5).unwrap();
            }
            gst::PadProbeReturn::Ok
        });
    }
    pipeline.set_state(gst::State::Playing).unwrap();
    let mut out = Vec::new();
    while let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_seconds(60)) {
        let buffer = sample.buffer().unwrap();
        let segment = sample
            .segment()
            .unwrap()
            .downcast_ref::<gst::ClockTime>()
            .unwrap();
        let kind = glib::Quark::from_str(UPSTREAM_TYPE);
        let upstream_entries = buffer
            .iter_meta::<gst_analytics::AnalyticsRelationMeta>()
            .map(|m| {
                m.iter::<gst_analytics::AnalyticsODMtd>()
                    .filter(|od| od.obj_type() == Some(kind))
                    .count()
            })
            .sum();
        out.push(Out {
            running_time: segment.to_running_time(buffer.pts().unwrap()).unwrap(),
            components: tracked_components(buffer),
            detections: tracked_detections(buffer),
            relation_metas: buffer
                .iter_meta::<gst_analytics::AnalyticsRelationMeta>()
                .count(),
            upstream_entries,
        });
    }
    if let Some(msg) = pipeline
        .bus()
        .unwrap()
        .pop_filtered(&[gst::MessageType::Error])
    {
        panic!("pipeline error: {msg:?}");
    }
    pipeline.set_state(gst::State::Null).unwrap();
    out
}

#[test]
fn each_tracked_component_is_a_detection_part_of_its_track() {
    let out = run(false);
    assert_eq!(out.len(), 40, "frames in = frames out");
    let mut first_seen: HashMap<u64, gst::ClockTime> = HashMap::new();
    let mut tracked = 0;
    for (i, f) in out.iter().enumerate() {
        let mut rois: Vec<(u64, [i32; 4])> = f
            .components
            .iter()
            .map(|c| (c.track_id, c.bbox.map(|v| i32::try_from(v).unwrap())))
            .collect();
        rois.sort_unstable();
        let mut detections: Vec<(u64, [i32; 4])> =
            f.detections.iter().map(|d| (d.track_id, d.bbox)).collect();
        detections.sort_unstable();
        assert_eq!(
            detections, rois,
            "frame {i}: one detection per ROI meta, same box and id"
        );
        for d in &f.detections {
            let first = *first_seen.entry(d.track_id).or_insert(f.running_time);
            assert_eq!(
                d.first_seen, first,
                "frame {i}, track {}: first seen",
                d.track_id
            );
            assert_eq!(
                d.last_seen, f.running_time,
                "frame {i}, track {}: last seen",
                d.track_id
            );
        }
        assert_eq!(
            f.relation_metas,
            usize::from(!f.components.is_empty()),
            "frame {i}: a relation meta where there are components"
        );
        tracked += detections.len();
    }
    assert!(
        tracked > 10,
        "the ball is tracked ({tracked} detections in all)"
    );
    assert!(
        first_seen.values().any(|t| *t > gst::ClockTime::ZERO),
        "tracks start after the first frame (the tracker confirms them first)"
    );
}

#[test]
fn a_relation_meta_from_upstream_is_extended_not_doubled() {
    let out = run(true);
    assert_eq!(out.len(), 40);
    let mut tracked = 0;
    for (i, f) in out.iter().enumerate() {
        assert_eq!(f.relation_metas, 1, "frame {i}: one relation meta");
        assert_eq!(
            f.upstream_entries, 1,
            "frame {i}: upstream's detection kept"
        );
        assert_eq!(f.detections.len(), f.components.len(), "frame {i}");
        tracked += f.detections.len();
    }
    assert!(
        tracked > 10,
        "the ball is tracked ({tracked} detections in all)"
    );
}
