//! GStreamer >= 1.24 analytics metadata (cargo feature `analytics`): beside the
//! region-of-interest metas, the buffer's `GstAnalyticsRelationMeta` holds, for each tracked
//! component, an object-detection entry (type `component`, the box, location confidence 1) and
//! a tracking entry (track id; first seen at the running time of the first frame the element
//! pushed with that track, last seen at this frame's), related as "the detection is part of the
//! track" (`IS_PART_OF`) and "the track relates to the detection" (`RELATE_TO`) — the layout
//! of gst-plugins-rs' and DeepStream's analytics elements, read with
//! `gst_analytics_relation_meta_iterate` by downstream elements (e.g. `analyticsoverlay`) or
//! with [`tracked_detections`]. A relation meta an upstream element already attached is
//! extended, not doubled.
//!
//! Written against gstreamer-analytics 0.25 (`AnalyticsRelationMeta::add`,
//! `AnalyticsRelationMetaODExt::add_od_mtd`, `AnalyticsRelationMetaTrackingExt::
//! add_tracking_mtd`, `AnalyticsRelationMeta::set_relation`); it needs the
//! gstreamer-analytics-1.0 library at build time.

use std::collections::HashMap;

use gstreamer as gst;
use gstreamer_analytics as gst_analytics;
use gstreamer_analytics::prelude::*;
use gstreamer_analytics::{AnalyticsODMtd, AnalyticsRelationMeta, AnalyticsTrackingMtd};

use crate::metadata::{ROI_TYPE, TrackedComponent};

/// When each track was first and last pushed (the tracking entries' times). A track unseen for
/// longer than the tracker keeps lost tracks is forgotten, so a stream of days holds only the
/// tracks that may still come back.
#[derive(Debug, Default)]
pub(crate) struct FirstSeen {
    tracks: HashMap<u64, (gst::ClockTime, gst::ClockTime)>,
    forget_after: gst::ClockTime,
}

impl FirstSeen {
    /// No track yet; tracks unseen for `forget_after` (the tracker's `lost_seconds`: it never
    /// brings a track back later, and ids are not reused) are forgotten.
    #[must_use]
    pub(crate) fn new(forget_after: gst::ClockTime) -> Self {
        Self {
            tracks: HashMap::new(),
            forget_after,
        }
    }

    /// The first sighting of `track_id`, which is seen at `now`.
    fn seen(&mut self, track_id: u64, now: gst::ClockTime) -> gst::ClockTime {
        let entry = self.tracks.entry(track_id).or_insert((now, now));
        entry.1 = now;
        entry.0
    }

    /// Forgets the tracks last seen more than `forget_after` before `now`.
    fn forget_old(&mut self, now: gst::ClockTime) {
        let horizon = now.saturating_sub(self.forget_after);
        self.tracks.retain(|_, (_, last)| *last >= horizon);
    }
}

/// Adds an object-detection and a tracking entry for each of `components` to `buffer`'s
/// relation meta (attached when upstream attached none; nothing at all when there are no
/// components); `now` is the buffer's running time.
pub(crate) fn add_relation_meta(
    buffer: &mut gst::BufferRef,
    components: &[TrackedComponent],
    now: gst::ClockTime,
    first_seen: &mut FirstSeen,
) -> Result<(), glib::BoolError> {
    first_seen.forget_old(now);
    if components.is_empty() {
        return Ok(());
    }
    if buffer.meta::<AnalyticsRelationMeta>().is_none() {
        AnalyticsRelationMeta::add(buffer);
    }
    let missing = || glib::bool_error!("the relation meta is gone");
    let kind = glib::Quark::from_str(ROI_TYPE);
    let mut tracks = Vec::with_capacity(components.len());
    {
        let mut meta = buffer
            .meta_mut::<AnalyticsRelationMeta>()
            .ok_or_else(missing)?;
        for c in components {
            let [x, y, w, h] = c.bbox.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
            let od_id = meta.add_od_mtd(kind, x, y, w, h, 1.0)?.id();
            let first = first_seen.seen(c.track_id, now);
            let track_id = meta.add_tracking_mtd(c.track_id, first)?.id();
            meta.set_relation(gst_analytics::RelTypes::IS_PART_OF, od_id, track_id)?;
            meta.set_relation(gst_analytics::RelTypes::RELATE_TO, track_id, od_id)?;
            tracks.push(track_id);
        }
    }
    // A new tracking entry's last sighting is its first: set it to this frame. Apart from the
    // loop above, since the bindings' `mtd_mut` borrows the meta for the rest of its life: each
    // update takes the buffer's meta afresh.
    for id in tracks {
        let mut meta = buffer
            .meta_mut::<AnalyticsRelationMeta>()
            .ok_or_else(missing)?;
        meta.mtd_mut::<AnalyticsTrackingMtd>(id)
            .ok_or_else(missing)?
            .update_last_seen(now)?;
    }
    Ok(())
}

/// One tracked component as the analytics metadata carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TrackedDetection {
    /// The track id (that of the component's region-of-interest meta).
    pub track_id: u64,
    /// The box: x, y, width, height in pixels.
    pub bbox: [i32; 4],
    /// Running time of the first frame pushed with this track.
    pub first_seen: gst::ClockTime,
    /// Running time of this frame.
    pub last_seen: gst::ClockTime,
}

/// The tracked components in `buffer`'s relation meta: each object-detection entry of type
/// `component` with the tracking entry it is part of (none when the buffer has no relation
/// meta). What an application reads where it would read the region-of-interest metas.
#[must_use]
pub fn tracked_detections(buffer: &gst::BufferRef) -> Vec<TrackedDetection> {
    let Some(meta) = buffer.meta::<AnalyticsRelationMeta>() else {
        return Vec::new();
    };
    let kind = glib::Quark::from_str(ROI_TYPE);
    let mut out = Vec::new();
    for od in meta.iter::<AnalyticsODMtd>() {
        if od.obj_type() != Some(kind) {
            continue;
        }
        let Ok(loc) = od.location() else { continue };
        let related = meta.iter_direct_related::<AnalyticsTrackingMtd>(
            od.id(),
            gst_analytics::RelTypes::IS_PART_OF,
        );
        for track in related {
            let (track_id, first_seen, last_seen, _lost) = track.info();
            out.push(TrackedDetection {
                track_id,
                bbox: [loc.x, loc.y, loc.w, loc.h],
                first_seen,
                last_seen,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_track_keeps_its_first_sighting_until_it_is_gone_longer_than_the_tracker_keeps_it() {
        let s = gst::ClockTime::from_seconds;
        let mut seen = FirstSeen::new(s(3));
        assert_eq!(seen.seen(1, s(0)), s(0));
        assert_eq!(seen.seen(2, s(1)), s(1));
        // Track 1 hidden from 0 s to 2 s: still the same track.
        seen.forget_old(s(2));
        assert_eq!(seen.seen(1, s(2)), s(0));
        // At 5 s track 2 (last seen at 1 s) is older than 3 s, track 1 (2 s) is not.
        seen.forget_old(s(5));
        assert_eq!(seen.tracks.len(), 1);
        assert_eq!(seen.seen(1, s(5)), s(0));
        assert_eq!(seen.seen(2, s(5)), s(5), "a forgotten id starts afresh");
    }
}
