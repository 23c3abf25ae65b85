//! Multi-object tracking of connected components across frames, with stable ids that survive
//! merges, occlusions and short disappearances.
//!
//! Words used throughout: a *detection* is a component of at least `min_area` pixels; a track
//! is *tentative* until matched in every frame for `confirm_seconds`, then *confirmed* (it gets
//! an id); it is *merged* while it shares one component with other tracks, and *lost* while no
//! component explains it (hidden, or gone); a lost track is *removed* after `lost_seconds`, or
//! at once when its prediction leaves the frame. Every duration is set in seconds and turned
//! into frames with the stream's frame rate (`params::FrameClock`: timestamps when the source
//! gives them, else `frame_rate`).
//!
//! Per frame ([`Tracker::update`], details in [`tracker`]):
//! 1. every track's constant-velocity Kalman filter (`kalman`) predicts its centroid and box
//!    (hidden tracks keep their size);
//! 2. tentative, confirmed and merged tracks are matched to detections over gated pairs
//!    (centroid distance, IoU, appearance: `associate`, [`appearance`]);
//! 3. confirmed tracks left over whose prediction lies in a component big enough for several
//!    objects join it as a merge ([`merge`]): each keeps its own predicted box;
//! 4. the other confirmed and lost tracks are re-identified among the detections left (and
//!    those of fresh tentative tracks) by motion, with a gate that widens while a track is
//!    unseen, and by appearance (area, second moments, mean grey level);
//! 5. detections still unmatched start tentative tracks.
//!
//! Output ([`TrackedFrame`]): the component table with `track_id` set on components matched to
//! one confirmed track, the merges, a report per confirmed, merged, lost or just-removed track,
//! and the rows of earlier frames that belong to a track confirmed or re-identified in this
//! frame (its tentative frames: no frame is lost at the start of a track).
//! `TrackedFrame::mot_rows` formats MOT Challenge rows. [`metrics`] implements MOTA and IDF1;
//! [`scenes`] holds synthetic scenes with ground truth to measure the tracker on.

pub mod appearance;
pub(crate) mod associate;
pub(crate) mod hungarian;
pub(crate) mod kalman;
pub mod merge;
pub mod metrics;
pub mod params;
pub mod rounds;
pub mod scenes;
pub mod tracker;
pub mod tuning;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::ops::cca::ComponentTable;

pub use params::TrackerParams;
pub use tracker::Tracker;

/// MOT `conf` of a row whose box is the track's own component.
pub(crate) const CONF_MEASURED: f64 = 1.0;
/// MOT `conf` of a row of a merged track: its predicted box inside a component shared with other
/// tracks.
pub(crate) const CONF_MERGED: f64 = 0.5;

/// Life-cycle state of a track.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrackState {
    /// Seen, not yet confirmed (no id yet).
    Tentative,
    /// Matched alone to a component in this frame (after confirmation).
    Confirmed,
    /// In a component shared with other tracks in this frame; its box is predicted.
    Merged,
    /// Confirmed earlier, explained by no component in this frame (prediction only).
    Lost,
    /// Dropped in this frame (lost too long, or left the frame); reported once.
    Removed,
}

/// One confirmed, merged, lost or just-removed track in a frame's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrackReport {
    /// Stable id (1, 2, ... never reused).
    pub id: u64,
    /// State after this frame.
    pub state: TrackState,
    /// Box `[left, top, width, height]`: filtered, or for a merged track its predicted box
    /// inside the shared component.
    pub bbox: [f64; 4],
    /// Filtered centroid `[x, y]`.
    pub centroid: [f64; 2],
    /// Velocity `[vx, vy]`, pixels per second.
    pub velocity: [f64; 2],
    /// Label of the component matched in this frame (shared with other tracks when merged).
    pub component: Option<u32>,
    /// Area of the track's component when it was last matched to it alone, pixels.
    pub area: u64,
    /// Frames since the track started.
    pub age: u32,
    /// Frames the track was matched alone to a component.
    pub hits: u32,
    /// Time without a component of its own (lost or merged), in frames at the stream's rate
    /// (dropped frames count).
    pub misses: u32,
    /// Recent filtered centroids, oldest first (for the overlay).
    pub trail: Vec<[f32; 2]>,
}

/// A component that holds several confirmed tracks in a frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Merge {
    /// The component's label.
    pub label: u32,
    /// The tracks it holds, ascending.
    pub track_ids: Vec<u64>,
}

/// A track's box in one frame, reported late: a tentative frame of a track confirmed (or
/// re-identified) in a later frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrackRow {
    /// 0-based frame index.
    pub frame: u64,
    /// Track id.
    pub id: u64,
    /// The component's label in that frame.
    pub label: u32,
    /// The component's box `[left, top, width, height]`.
    pub bbox: [f64; 4],
}

/// The tracker's output for one frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrackedFrame {
    /// 0-based frame index (count of `update` calls before this one).
    pub frame: u64,
    /// The frame's components with `track_id` set for those matched to one confirmed track.
    pub table: ComponentTable,
    /// Confirmed, merged, lost and just-removed tracks, by id.
    pub tracks: Vec<TrackReport>,
    /// Components holding several confirmed tracks, by label.
    pub merges: Vec<Merge>,
    /// Earlier frames of tracks confirmed or re-identified in this frame, by frame then id.
    pub backfill: Vec<TrackRow>,
}

/// One MOT Challenge CSV row: `frame,id,bb_left,bb_top,bb_width,bb_height,conf,x,y,z` with a
/// 1-based frame number and `-1` for the world coordinates.
#[must_use]
pub(crate) fn format_mot_row(frame0: u64, id: u64, bbox: [f64; 4], conf: f64) -> String {
    format!(
        "{},{},{},{},{},{},{},-1,-1,-1",
        frame0 + 1,
        id,
        bbox[0],
        bbox[1],
        bbox[2],
        bbox[3],
        conf
    )
}

impl TrackedFrame {
    /// MOT rows of this output: first the late rows of earlier frames ([`TrackedFrame::backfill`],
    /// conf [`CONF_MEASURED`]), then this frame's, by id: a track matched alone gets its
    /// component's pixel box (conf [`CONF_MEASURED`]), a merged track its predicted box (conf
    /// [`CONF_MERGED`]). Lost tracks get no row.
    #[must_use]
    pub(crate) fn mot_rows(&self) -> Vec<String> {
        let mut rows: Vec<String> = self
            .backfill
            .iter()
            .map(|r| format_mot_row(r.frame, r.id, r.bbox, CONF_MEASURED))
            .collect();
        for t in &self.tracks {
            match t.state {
                TrackState::Confirmed => {
                    let c = t
                        .component
                        .and_then(|l| self.table.components.get((l as usize).wrapping_sub(1)));
                    if let Some(c) = c {
                        rows.push(format_mot_row(self.frame, t.id, c.bbox(), CONF_MEASURED));
                    }
                }
                TrackState::Merged => {
                    rows.push(format_mot_row(self.frame, t.id, t.bbox, CONF_MERGED))
                }
                _ => {}
            }
        }
        rows
    }
}
