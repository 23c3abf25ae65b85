//! Results as buffer metadata, written by the element and read by applications with standard
//! GStreamer API (these readers are a convenience; any language binding reads the same metas).
//!
//! - Each **tracked component** (a component the tracker matched to a confirmed track) becomes a
//!   `GstVideoRegionOfInterestMeta` of type [`ROI_TYPE`] (`"component"`), id = track id, the
//!   component's pixel bounding box, and one param structure [`COMPONENT_PARAM`]
//!   (`morphoscope/component`) with `track-id`, `label`, `area`, `centroid-x`, `centroid-y`,
//!   the central second moments `mu20`, `mu11`, `mu02` (sums over the pixels, as in
//!   `components.jsonl`), `orientation` (radians), `eccentricity` and the track's `velocity-x`,
//!   `velocity-y` (pixels a frame; 0 before the tracker has a velocity).
//! - The **frame summary** is a structure [`FRAME_STRUCTURE`] (`morphoscope/frame`): `index`,
//!   `pts` (ns, -1 when the buffer has none), `width`, `height`, `backend`, `dropped` (frames the
//!   element dropped so far, QoS), `input-memory` ([`INPUT_MEMORY_CUDA`] when the frame went to
//!   the analyses in CUDA memory, as the decoder left it; else [`INPUT_MEMORY_SYSTEM`]), one sub-structure per analysis with the numbers `frames.jsonl`
//!   holds for it (counts, threshold, spectrum, …), `timings` (milliseconds per region) and
//!   `components-json`: the frame's line of `components.jsonl`, the whole component table
//!   with track ids, byte for byte as `morphoscope run` writes it. It travels on the buffer as
//!   the custom meta [`FRAME_META`] and on the bus as an element message.

use gstreamer as gst;
use gstreamer_video as gst_video;

use glib::value::ToSendValue;
use morphoscope::analysis::{AnalysedFrame, OpData};
use morphoscope::ops::cca::ComponentTable;

/// `roi_type` of a tracked component's region-of-interest meta.
pub const ROI_TYPE: &str = "component";
/// Name of the param structure on each component's region-of-interest meta.
pub const COMPONENT_PARAM: &str = "morphoscope/component";
/// Name of the custom meta holding the frame summary.
pub const FRAME_META: &str = "MorphoscopeFrameMeta";
/// Name of the frame summary structure (custom meta and bus message).
pub const FRAME_STRUCTURE: &str = "morphoscope/frame";
/// `input-memory` of a frame the analyses read in CUDA memory, where the decoder left it.
pub const INPUT_MEMORY_CUDA: &str = "cuda";
/// `input-memory` of a frame copied from system memory (or mapped to it).
pub const INPUT_MEMORY_SYSTEM: &str = "system";

/// Registers [`FRAME_META`] (once per process; the plugin does it when it loads).
pub fn register_frame_meta() {
    if !gst::meta::CustomMeta::is_registered(FRAME_META) {
        // No tags: elements that copy "any" metadata keep it, transforms of the picture
        // (scaling) drop nothing they should not.
        gst::meta::CustomMeta::register(FRAME_META, &[]);
    }
}

/// One tracked component as read back from a buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct TrackedComponent {
    /// The confirmed track's id (the meta's id).
    pub track_id: u64,
    /// Bounding box: left, top, width, height in pixels.
    pub bbox: [u32; 4],
    /// Label in the frame's label image.
    pub label: u32,
    /// Pixel count.
    pub area: u64,
    /// `[x, y]` mean of the pixels.
    pub centroid: [f64; 2],
    /// Central second moments `[mu20, mu11, mu02]`.
    pub moments: [f64; 3],
    /// Major-axis angle in radians.
    pub orientation: f64,
    /// Eccentricity in [0, 1].
    pub eccentricity: f64,
    /// The track's velocity, pixels a frame.
    pub velocity: [f64; 2],
}

/// The frame's component table with track ids, parsed from the `cca` analysis' line of
/// `components.jsonl` (`None` when `cca` did not run).
#[must_use]
pub fn component_line(frame: &AnalysedFrame) -> Option<&str> {
    frame
        .output("cca")?
        .records
        .iter()
        .find(|(file, _)| *file == "components.jsonl")
        .map(|(_, line)| line.as_str())
}

fn component_table(line: &str) -> Option<ComponentTable> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    serde_json::from_value(value.get("table")?.clone()).ok()
}

/// Adds a region-of-interest meta per tracked component of `frame` to `buffer`; returns how
/// many.
pub fn add_component_metas(buffer: &mut gst::BufferRef, frame: &AnalysedFrame) -> usize {
    let Some(table) = component_line(frame).and_then(component_table) else {
        return 0;
    };
    let velocities: Vec<(u64, [f32; 2])> = match frame.output("cca").map(|o| &o.data) {
        Some(OpData::Tracks(tracks)) => tracks.iter().map(|t| (t.id, t.velocity)).collect(),
        _ => Vec::new(),
    };
    let mut added = 0;
    for c in &table.components {
        let Some(track_id) = c.track_id else { continue };
        let velocity = velocities
            .iter()
            .find(|(id, _)| *id == track_id)
            .map_or([0.0; 2], |(_, v)| *v);
        let param = gst::Structure::builder(COMPONENT_PARAM)
            .field("track-id", track_id)
            .field("label", c.label)
            .field("area", c.area)
            .field("centroid-x", c.centroid[0])
            .field("centroid-y", c.centroid[1])
            .field("mu20", c.moments.mu20)
            .field("mu11", c.moments.mu11)
            .field("mu02", c.moments.mu02)
            .field("orientation", c.moments.orientation)
            .field("eccentricity", c.moments.eccentricity)
            .field("velocity-x", f64::from(velocity[0]))
            .field("velocity-y", f64::from(velocity[1]))
            .build();
        let mut roi = gst_video::VideoRegionOfInterestMeta::add(
            buffer,
            ROI_TYPE,
            (c.left, c.top, c.width, c.height),
        );
        roi.set_id(i32::try_from(track_id).unwrap_or(i32::MAX));
        roi.add_param(param);
        added += 1;
    }
    added
}

/// The frame summary structure (see the module docs).
#[must_use]
pub fn frame_summary(frame: &AnalysedFrame, dropped: u64) -> gst::Structure {
    let pts = frame
        .pts_nanos
        .and_then(|p| i64::try_from(p).ok())
        .unwrap_or(-1);
    let mut s = gst::Structure::builder(FRAME_STRUCTURE)
        .field("index", frame.index)
        .field("pts", pts)
        .field("width", u32::try_from(frame.width).unwrap_or(u32::MAX))
        .field("height", u32::try_from(frame.height).unwrap_or(u32::MAX))
        .field("backend", frame.timings.backend)
        .field("dropped", dropped)
        .build();
    for o in &frame.outputs {
        if let Some(v) = send_value_of_json(o.op, &o.summary) {
            s.set_value(o.op, v);
        }
    }
    let t = &frame.timings;
    let mut timings = gst::Structure::builder("timings")
        .field("upload", t.upload_ms)
        .field("download", t.download_ms)
        .field("queue-wait", t.queue_wait_ms)
        .field("latency", t.latency_ms)
        .field("compute-total", t.compute_ms)
        .build();
    for (region, ms) in &t.regions {
        timings.set(region.as_str(), *ms);
    }
    s.set("timings", timings);
    if let Some(line) = component_line(frame) {
        s.set("components-json", line);
    }
    s
}

/// Attaches the frame summary to `buffer` as the custom meta [`FRAME_META`].
pub fn add_frame_meta(
    buffer: &mut gst::BufferRef,
    summary: &gst::Structure,
) -> Result<(), glib::BoolError> {
    let mut meta = gst::meta::CustomMeta::add(buffer, FRAME_META)?;
    let s = meta.mut_structure();
    s.set_name(FRAME_STRUCTURE);
    for (name, value) in summary.iter() {
        s.set_value(name, value.clone());
    }
    Ok(())
}

/// A JSON value as a GStreamer value: objects become structures named `name`, arrays
/// `GstValueArray`s, integers 64-bit integers, other numbers doubles; `null` is left out.
fn send_value_of_json(name: &str, v: &serde_json::Value) -> Option<glib::SendValue> {
    use serde_json::Value;
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => b.to_send_value(),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_send_value(),
            (None, Some(i), _) => i.to_send_value(),
            (None, None, f) => f.unwrap_or(f64::NAN).to_send_value(),
        },
        Value::String(s) => s.to_send_value(),
        Value::Array(items) => {
            gst::Array::from_values(items.iter().filter_map(|i| send_value_of_json(name, i)))
                .to_send_value()
        }
        Value::Object(map) => {
            let mut s = gst::Structure::new_empty(name);
            for (k, item) in map {
                if let Some(value) = send_value_of_json(k, item) {
                    s.set_value(k.as_str(), value);
                }
            }
            s.to_send_value()
        }
    })
}

/// The tracked components on `buffer` (its `component` region-of-interest metas).
#[must_use]
pub fn tracked_components(buffer: &gst::BufferRef) -> Vec<TrackedComponent> {
    buffer
        .iter_meta::<gst_video::VideoRegionOfInterestMeta>()
        .filter(|m| m.roi_type() == ROI_TYPE)
        .filter_map(|m| {
            let p = m.param(COMPONENT_PARAM)?;
            let f = |k: &str| p.get::<f64>(k).ok();
            let (x, y, w, h) = m.rect();
            Some(TrackedComponent {
                track_id: p.get::<u64>("track-id").ok()?,
                bbox: [x, y, w, h],
                label: p.get::<u32>("label").ok()?,
                area: p.get::<u64>("area").ok()?,
                centroid: [f("centroid-x")?, f("centroid-y")?],
                moments: [f("mu20")?, f("mu11")?, f("mu02")?],
                orientation: f("orientation")?,
                eccentricity: f("eccentricity")?,
                velocity: [f("velocity-x")?, f("velocity-y")?],
            })
        })
        .collect()
}

/// The frame summary on `buffer` (its [`FRAME_META`]), if the element attached one.
#[must_use]
pub fn frame_summary_of(buffer: &gst::BufferRef) -> Option<gst::Structure> {
    gst::meta::CustomMeta::from_buffer(buffer, FRAME_META)
        .ok()
        .map(|m| m.structure().to_owned())
}
