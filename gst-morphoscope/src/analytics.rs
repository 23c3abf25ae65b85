//! GStreamer >= 1.24 analytics metadata (cargo feature `analytics`): beside the
//! region-of-interest metas, one `GstAnalyticsRelationMeta` per buffer holding, for each
//! tracked component, an object-detection entry (type `component`, the box, location
//! confidence 1) and a tracking entry (track id, first seen at the running time of the first
//! frame the element pushed with that track), related as "the detection is part of the
//! track" (`IS_PART_OF`) and "the track relates to the detection" (`RELATE_TO`) — the layout
//! of gst-plugins-rs' and DeepStream's analytics elements, read with
//! `gst_analytics_relation_meta_iterate` by downstream elements (e.g. `analyticsoverlay`).
//!
//! Written against gstreamer-analytics 0.25 (`AnalyticsRelationMeta::add`,
//! `AnalyticsRelationMetaODExt::add_od_mtd`, `AnalyticsRelationMetaTrackingExt::
//! add_tracking_mtd`, `AnalyticsRelationMeta::set_relation`); it needs the
//! gstreamer-analytics-1.0 library at build time.

use std::collections::HashMap;

use gstreamer as gst;
use gstreamer_analytics as gst_analytics;
use gstreamer_analytics::prelude::*;

use crate::metadata::{ROI_TYPE, TrackedComponent};

/// When each track was first pushed (for the tracking entries' `first_seen`).
#[derive(Debug, Default)]
pub struct FirstSeen(HashMap<u64, gst::ClockTime>);

impl FirstSeen {
    /// Forgets every track (a new stream).
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// Adds the analytics relation meta for `components` to `buffer` (nothing when there are
/// none); `now` is the buffer's time.
pub fn add_relation_meta(
    buffer: &mut gst::BufferRef,
    components: &[TrackedComponent],
    now: gst::ClockTime,
    first_seen: &mut FirstSeen,
) -> Result<(), glib::BoolError> {
    if components.is_empty() {
        return Ok(());
    }
    let mut meta = gst_analytics::AnalyticsRelationMeta::add(buffer);
    let kind = glib::Quark::from_str(ROI_TYPE);
    for c in components {
        let [x, y, w, h] = c.bbox.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
        let od_id = meta.add_od_mtd(kind, x, y, w, h, 1.0)?.id();
        let seen = *first_seen.0.entry(c.track_id).or_insert(now);
        let track_id = meta.add_tracking_mtd(c.track_id, seen)?.id();
        meta.set_relation(gst_analytics::RelTypes::IS_PART_OF, od_id, track_id)?;
        meta.set_relation(gst_analytics::RelTypes::RELATE_TO, track_id, od_id)?;
    }
    Ok(())
}
