//! Multi-object tracking of connected components across frames, with stable ids.
//!
//! Per frame ([`Tracker::update`]):
//! 1. **Detections**: the components of the frame's [`ComponentTable`] with
//!    `area >= min_area`.
//! 2. **Prediction**: every track's constant-velocity Kalman filter ([`kalman`]) predicts its
//!    centroid and box size one frame ahead.
//! 3. **Cost and gating**: for each (track, detection) pair, with `d` the distance between the
//!    predicted and measured centroids and `iou` the IoU of the predicted and measured boxes,
//!    the pair is allowed when `d <= max_distance` or `iou >= min_iou`, and costs
//!    `iou_weight·(1 - iou) + (1 - iou_weight)·min(d / max_distance, 1)`.
//! 4. **Assignment**: optimal (Hungarian, [`hungarian`]) over all live tracks; pairs that fail
//!    the gate are dropped after the assignment.
//! 5. **Life cycle**: a new detection starts a *tentative* track; after `confirm_hits`
//!    consecutive hits it is *confirmed* and receives the next id (ids are never reused, also
//!    not after [`Tracker::reset`]); a tentative track that misses once is dropped. A confirmed
//!    track that misses becomes *lost* (its filter keeps predicting), returns to *confirmed* on
//!    a hit, and is *removed* after more than `max_misses` consecutive misses.
//!
//! Output ([`TrackedFrame`]): the component table with `track_id` set on components matched to
//! confirmed tracks, and a report per confirmed or lost track (filtered box, velocity, trail of
//! recent filtered centroids for the overlay). [`TrackedFrame::mot_rows`] formats MOT Challenge
//! rows. [`metrics`] implements MOTA and IDF1 for the tests.

pub mod hungarian;
pub mod kalman;
pub mod metrics;
pub mod scenes;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::ops::OpError;
use crate::ops::ccl::ComponentTable;

use self::kalman::BoxFilter;
use self::metrics::iou;

/// Tracker settings (the `[track]` config section).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrackerParams {
    /// Components smaller than this (pixels) are ignored (default 25).
    pub min_area: u64,
    /// Consecutive hits that confirm a tentative track (k, default 3).
    pub confirm_hits: u32,
    /// Consecutive misses after which a lost track is removed (m, default 10).
    pub max_misses: u32,
    /// Gate on the centroid distance, pixels (default 50).
    pub max_distance: f64,
    /// Pairs with at least this IoU pass the gate whatever their distance (default 0.1).
    pub min_iou: f64,
    /// Weight of `1 - IoU` in the cost, the rest goes to the normalised distance (default 0.5).
    pub iou_weight: f64,
    /// Acceleration noise σa of the constant-velocity model, pixels/frame² (default 1).
    pub process_noise: f64,
    /// Measurement noise σm of centroids and sizes, pixels (default 2).
    pub measurement_noise: f64,
    /// Points kept in each track's trail (default 50).
    pub trail_length: usize,
}

impl Default for TrackerParams {
    fn default() -> Self {
        Self {
            min_area: 25,
            confirm_hits: 3,
            max_misses: 10,
            max_distance: 50.0,
            min_iou: 0.1,
            iou_weight: 0.5,
            process_noise: 1.0,
            measurement_noise: 2.0,
            trail_length: 50,
        }
    }
}

impl TrackerParams {
    /// Checks every field; the error names the field and its allowed values.
    pub fn validate(&self) -> Result<(), OpError> {
        let bad = |m: String| Err(OpError::InvalidParam(m));
        if self.confirm_hits == 0 {
            return bad("confirm_hits must be >= 1".into());
        }
        if !(self.max_distance > 0.0 && self.max_distance.is_finite()) {
            return bad(format!("max_distance must be a positive number of pixels, got {}", self.max_distance));
        }
        if !(0.0..=1.0).contains(&self.min_iou) {
            return bad(format!("min_iou must be in [0, 1], got {}", self.min_iou));
        }
        if !(0.0..=1.0).contains(&self.iou_weight) {
            return bad(format!("iou_weight must be in [0, 1], got {}", self.iou_weight));
        }
        if !(self.process_noise > 0.0 && self.process_noise.is_finite()) {
            return bad(format!("process_noise must be > 0, got {}", self.process_noise));
        }
        if !(self.measurement_noise > 0.0 && self.measurement_noise.is_finite()) {
            return bad(format!("measurement_noise must be > 0, got {}", self.measurement_noise));
        }
        if self.trail_length > 100_000 {
            return bad(format!("trail_length must be <= 100000, got {}", self.trail_length));
        }
        Ok(())
    }
}

/// Life-cycle state of a track.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrackState {
    /// Seen, not yet confirmed (no id yet).
    Tentative,
    /// Matched in this frame (after confirmation).
    Confirmed,
    /// Confirmed earlier, unmatched in this frame (prediction only).
    Lost,
    /// Dropped in this frame after too many misses (reported once).
    Removed,
}

/// One confirmed, lost or just-removed track in a frame's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrackReport {
    /// Stable id (1, 2, ... never reused).
    pub id: u64,
    /// State after this frame.
    pub state: TrackState,
    /// Filtered box `[left, top, width, height]`.
    pub bbox: [f64; 4],
    /// Filtered centroid `[x, y]`.
    pub centroid: [f64; 2],
    /// Velocity `[vx, vy]`, pixels per frame.
    pub velocity: [f64; 2],
    /// Label of the component matched in this frame, if any.
    pub component: Option<u32>,
    /// Frames since the track started.
    pub age: u32,
    /// Frames the track was matched.
    pub hits: u32,
    /// Consecutive misses.
    pub misses: u32,
    /// Recent filtered centroids, oldest first (for the overlay).
    pub trail: Vec<[f64; 2]>,
}

/// The tracker's output for one frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrackedFrame {
    /// 0-based frame index (count of `update` calls before this one).
    pub frame: u64,
    /// The frame's components with `track_id` set for those matched to confirmed tracks.
    pub table: ComponentTable,
    /// Confirmed, lost and just-removed tracks.
    pub tracks: Vec<TrackReport>,
}

/// One MOT Challenge CSV row: `frame,id,bb_left,bb_top,bb_width,bb_height,conf,x,y,z` with a
/// 1-based frame number and `-1` for the world coordinates.
#[must_use]
pub fn format_mot_row(frame0: u64, id: u64, bbox: [f64; 4], conf: f64) -> String {
    format!("{},{},{},{},{},{},{},-1,-1,-1", frame0 + 1, id, bbox[0], bbox[1], bbox[2], bbox[3], conf)
}

impl TrackedFrame {
    /// MOT rows of this frame: one per component matched to a confirmed track (its pixel
    /// bounding box, confidence 1), sorted by id.
    #[must_use]
    pub fn mot_rows(&self) -> Vec<String> {
        let mut rows: Vec<(u64, String)> = self
            .table
            .components
            .iter()
            .filter_map(|c| c.track_id.map(|id| (id, format_mot_row(self.frame, id, c.bbox(), 1.0))))
            .collect();
        rows.sort_by_key(|r| r.0);
        rows.into_iter().map(|r| r.1).collect()
    }
}

#[derive(Clone, Debug)]
struct Track {
    id: Option<u64>,
    state: TrackState,
    filter: BoxFilter,
    hits: u32,
    misses: u32,
    age: u32,
    trail: VecDeque<[f64; 2]>,
}

/// Multi-object tracker over component tables.
#[derive(Clone, Debug)]
pub struct Tracker {
    params: TrackerParams,
    tracks: Vec<Track>,
    next_id: u64,
    frame: u64,
}

/// Cost of a pair failing the gate (dropped after the assignment).
const FORBIDDEN: f64 = 1e6;

impl Tracker {
    /// A tracker with no tracks.
    pub fn new(params: TrackerParams) -> Result<Self, OpError> {
        params.validate()?;
        Ok(Self { params, tracks: Vec::new(), next_id: 1, frame: 0 })
    }

    /// The settings.
    #[must_use]
    pub fn params(&self) -> &TrackerParams {
        &self.params
    }

    /// Changes the settings; tracks are kept.
    pub fn set_params(&mut self, params: TrackerParams) -> Result<(), OpError> {
        params.validate()?;
        self.params = params;
        Ok(())
    }

    /// Drops every track (ids already given out are not reused).
    pub fn reset(&mut self) {
        self.tracks.clear();
    }

    /// Tracks currently alive (tentative included).
    #[must_use]
    pub fn live_tracks(&self) -> usize {
        self.tracks.len()
    }

    /// Associates this frame's components with the tracks and advances every track.
    pub fn update(&mut self, table: &ComponentTable) -> TrackedFrame {
        let p = self.params.clone();
        let q = p.process_noise * p.process_noise;
        let r = p.measurement_noise * p.measurement_noise;
        let mut out_table = table.clone();
        for c in &mut out_table.components {
            c.track_id = None;
        }
        let dets: Vec<usize> = (0..table.components.len()).filter(|&i| table.components[i].area >= p.min_area).collect();
        let meas = |i: usize| {
            let c = &table.components[i];
            [c.centroid[0], c.centroid[1], f64::from(c.width), f64::from(c.height)]
        };
        for t in &mut self.tracks {
            t.filter.predict(q);
            t.age += 1;
        }
        // Cost matrix and optimal assignment.
        let cost: Vec<Vec<f64>> = self
            .tracks
            .iter()
            .map(|t| {
                let (pc, pb) = (t.filter.centroid(), t.filter.bbox());
                dets.iter()
                    .map(|&i| {
                        let c = &table.components[i];
                        let d = (pc[0] - c.centroid[0]).hypot(pc[1] - c.centroid[1]);
                        let o = iou(pb, c.bbox());
                        let allowed = d <= p.max_distance || (p.min_iou > 0.0 && o >= p.min_iou);
                        if allowed {
                            p.iou_weight * (1.0 - o) + (1.0 - p.iou_weight) * (d / p.max_distance).min(1.0)
                        } else {
                            FORBIDDEN
                        }
                    })
                    .collect()
            })
            .collect();
        let assignment = hungarian::assign(&cost);
        let mut det_used = vec![false; dets.len()];
        let mut matched: Vec<Option<usize>> = vec![None; self.tracks.len()];
        for (ti, a) in assignment.iter().enumerate() {
            if let Some(di) = *a
                && cost[ti][di] < FORBIDDEN
            {
                det_used[di] = true;
                matched[ti] = Some(dets[di]);
            }
        }
        // Life cycle.
        let mut reports = Vec::new();
        let mut keep = Vec::with_capacity(self.tracks.len());
        for (mut t, m) in std::mem::take(&mut self.tracks).into_iter().zip(matched) {
            match m {
                Some(ci) => {
                    t.filter.update(meas(ci), r);
                    t.hits += 1;
                    t.misses = 0;
                    if t.state == TrackState::Tentative && t.hits >= p.confirm_hits {
                        t.id = Some(self.next_id);
                        self.next_id += 1;
                    }
                    if t.id.is_some() {
                        t.state = TrackState::Confirmed;
                        out_table.components[ci].track_id = t.id;
                    }
                    t.trail.push_back(t.filter.centroid());
                    while t.trail.len() > p.trail_length {
                        t.trail.pop_front();
                    }
                }
                None => {
                    t.misses += 1;
                    t.state = match t.state {
                        TrackState::Tentative => TrackState::Removed,
                        _ if t.misses > p.max_misses => TrackState::Removed,
                        _ => TrackState::Lost,
                    };
                }
            }
            if let Some(id) = t.id {
                reports.push(TrackReport {
                    id,
                    state: t.state,
                    bbox: t.filter.bbox(),
                    centroid: t.filter.centroid(),
                    velocity: t.filter.velocity(),
                    component: m.map(|ci| table.components[ci].label),
                    age: t.age,
                    hits: t.hits,
                    misses: t.misses,
                    trail: t.trail.iter().copied().collect(),
                });
            }
            if t.state != TrackState::Removed {
                keep.push(t);
            }
        }
        // New tentative tracks from unmatched detections.
        let var_vel = (0.5 * p.max_distance).powi(2);
        for (di, &ci) in dets.iter().enumerate() {
            if det_used[di] {
                continue;
            }
            let mut t = Track {
                id: None,
                state: TrackState::Tentative,
                filter: BoxFilter::new(meas(ci), r, var_vel),
                hits: 1,
                misses: 0,
                age: 0,
                trail: VecDeque::new(),
            };
            t.trail.push_back(t.filter.centroid());
            if p.confirm_hits <= 1 {
                t.id = Some(self.next_id);
                self.next_id += 1;
                t.state = TrackState::Confirmed;
                out_table.components[ci].track_id = t.id;
                reports.push(TrackReport {
                    id: self.next_id - 1,
                    state: t.state,
                    bbox: t.filter.bbox(),
                    centroid: t.filter.centroid(),
                    velocity: [0.0, 0.0],
                    component: Some(table.components[ci].label),
                    age: 0,
                    hits: 1,
                    misses: 0,
                    trail: t.trail.iter().copied().collect(),
                });
            }
            keep.push(t);
        }
        self.tracks = keep;
        reports.sort_by_key(|r| r.id);
        let frame = self.frame;
        self.frame += 1;
        TrackedFrame { frame, table: out_table, tracks: reports }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ccl::{ComponentSums, ComponentTable};

    fn table(boxes: &[(u32, u32, u32)]) -> ComponentTable {
        // Squares (x, y, side).
        let sums: Vec<ComponentSums> = boxes
            .iter()
            .map(|&(x, y, s)| {
                let mut c = ComponentSums::empty();
                for yy in y..y + s {
                    c.add_run(x, x + s - 1, yy);
                }
                c
            })
            .collect();
        ComponentTable::from_sums(640, 480, 8, 0, &sums)
    }

    #[test]
    fn life_cycle_and_ids() {
        let mut tr = Tracker::new(TrackerParams { max_misses: 2, ..TrackerParams::default() }).unwrap();
        // Frames 0-2: tentative, confirmed on the third hit with id 1.
        for f in 0..3u32 {
            let out = tr.update(&table(&[(10 + 2 * f, 10, 8)]));
            assert_eq!(out.table.components[0].track_id, if f == 2 { Some(1) } else { None });
        }
        // A too-small component never becomes a detection.
        let out = tr.update(&table(&[(16, 10, 8), (300, 300, 2)]));
        assert_eq!(out.table.components[0].track_id, Some(1));
        assert_eq!(out.table.components[1].track_id, None);
        // Three misses: lost, lost, removed.
        let states: Vec<TrackState> = (0..3).map(|_| tr.update(&table(&[])).tracks[0].state).collect();
        assert_eq!(states, vec![TrackState::Lost, TrackState::Lost, TrackState::Removed]);
        assert_eq!(tr.live_tracks(), 0);
        // A new object gets id 2, never 1 again.
        for _ in 0..3 {
            tr.update(&table(&[(100, 100, 8)]));
        }
        let out = tr.update(&table(&[(101, 100, 8)]));
        assert_eq!(out.tracks.len(), 1);
        assert_eq!(out.tracks[0].id, 2);
        assert_eq!(out.mot_rows(), vec!["11,2,101,100,8,8,1,-1,-1,-1".to_owned()]);
        assert!(out.tracks[0].trail.len() >= 3);
    }

    #[test]
    fn params_validate_and_serde() {
        assert!(TrackerParams { confirm_hits: 0, ..TrackerParams::default() }.validate().unwrap_err().to_string().contains("confirm_hits"));
        assert!(TrackerParams { min_iou: 2.0, ..TrackerParams::default() }.validate().is_err());
        let p: TrackerParams = serde_json::from_str(r#"{"min_area": 5}"#).unwrap();
        assert_eq!(p.min_area, 5);
        assert!(serde_json::from_str::<TrackerParams>(r#"{"min_aera": 5}"#).is_err());
        assert_eq!(format_mot_row(0, 3, [1.5, 2.0, 3.0, 4.0], 1.0), "1,3,1.5,2,3,4,1,-1,-1,-1");
    }
}
