//! The tracker's per-frame step (outline in the [`crate::track`] docs; association rounds in
//! [`rounds`]).
//!
//! A matched track folds its component into its filter. When the component is a *partial
//! view* (the object is partly behind an occluder or outside the frame: on some axis the box is
//! below `Tuning::partial_size` of the track's size and `Tuning::partial_pixels` short of
//! it), the filter gets the whole object's box instead: on each such axis the edge that agrees
//! best with the prediction is taken as the object's and the centre placed half the track's
//! size from it. Partial views (those, and components below `Tuning::partial_area` of the
//! track's area) change the track's appearance and size only slowly. So a track keeps its speed
//! and size while its object slides behind an occluder or out of the frame, and its box neither
//! shrinks nor inverts.
//!
//! Members of a merge are placed by `place_members`; the placement is folded into each
//! member's filter as a loose measurement (its velocity follows the group) and becomes its
//! position.

use std::collections::VecDeque;

use super::appearance::Appearance;
use super::kalman::BoxFilter;
use super::merge::{Group, clip_box, place_members};
use super::params::{FrameClock, TrackerParams};
use super::rounds::{self, Det};
use super::tuning::TUNING;
#[cfg(doc)]
use super::tuning::Tuning;
use super::{Merge, TrackReport, TrackRow, TrackState, TrackedFrame};
use crate::ops::OpError;
use crate::ops::cca::ComponentTable;

/// One track's state.
#[derive(Clone, Debug)]
pub struct Track {
    /// Id once confirmed.
    pub id: Option<u64>,
    /// Life-cycle state after the last frame.
    pub state: TrackState,
    /// Centroid and box size.
    pub filter: BoxFilter,
    /// Box size `[w, h]` of the whole object, held while it is unseen.
    pub size: [f64; 2],
    /// Running appearance of its full views.
    pub look: Appearance,
    /// Area of the last component matched alone.
    pub area: u64,
    /// Frames matched alone.
    pub hits: u32,
    /// Time matched in every frame (confirmation), in frames at the stream's rate
    /// (`FrameClock::step`s: fractional with timestamps).
    pub streak: f64,
    /// Time without a component of its own (lost or merged), in frames at the stream's rate.
    pub unseen: f64,
    /// Time lost (explained by no component), in frames at the stream's rate.
    pub lost: f64,
    /// Frames since it started.
    pub age: u32,
    /// Tentative frames, written when the track is confirmed.
    pub pending: Vec<TrackRow>,
    /// Last frame a row was written for it (matched alone, or merged).
    pub last_row: Option<u64>,
    /// Recent centroids.
    pub trail: VecDeque<[f32; 2]>,
}

/// Multi-object tracker over component tables.
#[derive(Clone, Debug)]
pub struct Tracker {
    params: TrackerParams,
    clock: FrameClock,
    tracks: Vec<Track>,
    next_id: u64,
    frame: u64,
    grids: rounds::Grids,
}

impl Tracker {
    /// A tracker with no tracks.
    pub fn new(params: TrackerParams) -> Result<Self, OpError> {
        params.validate()?;
        Ok(Self {
            clock: FrameClock::new(params.frame_rate),
            params,
            tracks: Vec::new(),
            next_id: 1,
            frame: 0,
            grids: rounds::Grids::default(),
        })
    }

    /// The settings.
    #[must_use]
    pub fn params(&self) -> &TrackerParams {
        &self.params
    }

    /// Changes the settings; tracks are kept.
    pub(crate) fn set_params(&mut self, params: TrackerParams) -> Result<(), OpError> {
        params.validate()?;
        self.clock.set_default_fps(params.frame_rate);
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

    /// The stream's frame rate as the tracker sees it (timestamps, else `frame_rate`).
    #[must_use]
    pub fn frame_rate(&self) -> f64 {
        self.clock.fps()
    }

    /// Associates this frame's components with the tracks and advances every track.
    /// `grey[i]` is the mean grey level of component `i` (an empty slice when unknown:
    /// appearance is then area and shape only); `pts_nanos` the frame's presentation timestamp,
    /// when the source gives one.
    pub fn update(
        &mut self,
        table: &ComponentTable,
        grey: &[Option<f64>],
        pts_nanos: Option<u64>,
    ) -> TrackedFrame {
        let p = self.params.clone();
        self.clock.tick(pts_nanos);
        let step = self.clock.step();
        // Durations in frames at the stream's rate; half a frame of slack absorbs timestamp
        // jitter.
        let confirm = f64::from(self.clock.frames(p.confirm_seconds, 1)) - 0.5;
        let lost_max = f64::from(self.clock.frames(p.lost_seconds, 0)) + 0.5;
        let lost_gate = rounds::LostGate {
            growth_per_frame: p.gate_growth / self.clock.fps(),
            step,
            lost_max,
        };
        let q = p.process_noise * p.process_noise;
        let frame = self.frame;
        self.frame += 1;
        let dets = detections(table, grey, p.min_area);
        let boxes: Vec<[f64; 4]> = dets.iter().map(|d| d.bbox).collect();
        self.grids
            .all
            .rebuild(table.width, table.height, p.max_distance, &boxes);
        self.predict(q, step);
        let n = self.tracks.len();
        let assoc = rounds::associate(
            &mut self.tracks,
            &dets,
            &mut self.grids,
            (table.width, table.height),
            &p,
            lost_gate,
        );

        // Updates.
        let mut out = FrameOut {
            table: table.clone(),
            reports: Vec::new(),
            backfill: Vec::new(),
        };
        for c in &mut out.table.components {
            c.track_id = None;
        }
        let merged_box = self.place_groups(&dets, &assoc.groups, n, step, p.measurement_noise);
        let merges = self.merges(&dets, &assoc.groups);
        let rounds::Association {
            matched,
            owner,
            dropped,
            inherited,
            in_group,
            det_merged,
            ..
        } = assoc;
        self.inherit_rows(inherited, &mut out.backfill);
        let fs = FrameStep {
            frame,
            step,
            confirm,
            lost_max,
            r: p.measurement_noise * p.measurement_noise,
            fps: self.clock.fps(),
            trail_len: self.clock.frames(p.trail_seconds, 1) as usize,
            size: (table.width as f64, table.height as f64),
        };
        for (ti, t) in self.tracks.iter_mut().enumerate() {
            if dropped[ti] {
                continue;
            }
            if let Some(di) = matched[ti] {
                advance_matched(t, &dets[di], &fs, &mut self.next_id, &mut out);
            } else if !in_group[ti] {
                advance_unmatched(t, &fs);
            }
            while t.trail.len() > fs.trail_len {
                t.trail.pop_front();
            }
            let component = matched[ti].map(|di| dets[di].label);
            out.reports
                .extend(report(t, &fs, merged_box[ti], component));
        }
        let mut ti = 0;
        self.tracks.retain(|t| {
            ti += 1;
            !dropped[ti - 1] && t.state != TrackState::Removed
        });

        // New tentative tracks from detections no track took.
        let var_vel = (0.5 * p.max_distance).powi(2);
        for (di, d) in dets.iter().enumerate() {
            if owner[di].is_some() || det_merged[di] {
                continue;
            }
            let t = self.start_track(d, &fs, var_vel, &mut out);
            self.tracks.push(t);
        }
        let FrameOut {
            table: out_table,
            mut reports,
            mut backfill,
        } = out;
        reports.sort_by_key(|r| r.id);
        backfill.sort_by_key(|r| (r.frame, r.id));
        TrackedFrame {
            frame,
            table: out_table,
            tracks: reports,
            merges,
            backfill,
        }
    }

    /// Every track's filter one step ahead (an unseen track keeps its size), one frame older.
    fn predict(&mut self, q: f64, step: f64) {
        for t in &mut self.tracks {
            t.filter.predict(q, step);
            if t.unseen > 0.0 {
                t.filter.hold_size(t.size);
            }
            t.age += 1;
        }
    }

    /// Places the members of each merge group in its component ([`place_members`]) and folds
    /// the placement into their filters as a loose measurement; per track of the `n`, the box
    /// (clipped to the component) and component label of the group it is in.
    fn place_groups(
        &mut self,
        dets: &[Det],
        groups: &[Group],
        n: usize,
        step: f64,
        measurement_noise: f64,
    ) -> Vec<Option<([f64; 4], u32)>> {
        let mut merged_box: Vec<Option<([f64; 4], u32)>> = vec![None; n];
        for g in groups {
            let d = &dets[g.det];
            let predicted: Vec<[f64; 2]> = g
                .members
                .iter()
                .map(|&m| self.tracks[m].filter.centroid())
                .collect();
            let sizes: Vec<[f64; 2]> = g.members.iter().map(|&m| self.tracks[m].size).collect();
            let areas: Vec<f64> = g
                .members
                .iter()
                .map(|&m| self.tracks[m].look.area)
                .collect();
            let placed = place_members(&predicted, &sizes, &areas, d.bbox, d.centroid);
            for (&m, z) in g.members.iter().zip(placed) {
                let t = &mut self.tracks[m];
                if t.unseen == 0.0 {
                    t.filter.hold_size(t.size);
                }
                t.filter.update_centroid(
                    z,
                    TUNING.merged_noise * measurement_noise * measurement_noise,
                );
                t.filter.axes[0].x[0] = z[0];
                t.filter.axes[1].x[0] = z[1];
                t.state = TrackState::Merged;
                t.unseen += step;
                t.lost = 0.0;
                t.trail.push_back(point(t.filter.centroid()));
                merged_box[m] = Some((clip_box(t.filter.bbox(), d.bbox), d.label));
            }
        }
        merged_box
    }

    /// The merges of this frame: each group holding at least two confirmed tracks, by
    /// component label.
    fn merges(&self, dets: &[Det], groups: &[Group]) -> Vec<Merge> {
        let mut merges: Vec<Merge> = groups
            .iter()
            .filter_map(|g| {
                let mut ids: Vec<u64> = g
                    .members
                    .iter()
                    .filter_map(|&m| self.tracks[m].id)
                    .collect();
                ids.sort_unstable();
                (ids.len() >= 2).then_some(Merge {
                    label: dets[g.det].label,
                    track_ids: ids,
                })
            })
            .collect();
        merges.sort_by_key(|m| m.label);
        merges
    }

    /// Rows a confirmed track inherits from a dropped tentative track, under its id, into
    /// `backfill` (frames it has rows for already, from being merged then, keep those).
    fn inherit_rows(&self, inherited: Vec<(usize, Vec<TrackRow>)>, backfill: &mut Vec<TrackRow>) {
        for (ti, rows) in inherited {
            let t = &self.tracks[ti];
            if let Some(id) = t.id {
                let after = |r: &TrackRow| t.last_row.is_none_or(|l| r.frame > l);
                backfill.extend(rows.into_iter().filter(after).map(|r| TrackRow { id, ..r }));
            }
        }
    }

    /// A tentative track for detection `d` that no track took; confirmed at once (with its
    /// report and the component's track id) when confirmation takes a single frame.
    fn start_track(&mut self, d: &Det, fs: &FrameStep, var_vel: f64, out: &mut FrameOut) -> Track {
        let size = [d.bbox[2], d.bbox[3]];
        let mut t = Track {
            id: None,
            state: TrackState::Tentative,
            filter: BoxFilter::new(
                [d.centroid[0], d.centroid[1], size[0], size[1]],
                fs.r,
                var_vel,
            ),
            size,
            look: d.look,
            area: d.area,
            hits: 1,
            streak: 1.0,
            unseen: 0.0,
            lost: 0.0,
            age: 0,
            pending: Vec::new(),
            last_row: None,
            trail: VecDeque::from([point(d.centroid)]),
        };
        if fs.confirm <= 1.0 {
            let id = self.next_id;
            self.next_id += 1;
            t.id = Some(id);
            t.state = TrackState::Confirmed;
            t.last_row = Some(fs.frame);
            out.table.components[d.ci].track_id = Some(id);
            out.reports.push(TrackReport {
                id,
                state: t.state,
                bbox: t.filter.bbox(),
                centroid: d.centroid,
                velocity: [0.0, 0.0],
                component: Some(d.label),
                area: d.area,
                age: 0,
                hits: 1,
                misses: 0,
                trail: vec![point(d.centroid)],
            });
        } else {
            t.pending.push(TrackRow {
                frame: fs.frame,
                id: 0,
                label: d.label,
                bbox: d.bbox,
            });
        }
        t
    }
}

/// What one frame's step derives once from the clock and the settings and hands to each
/// track's update: the frame number and time step, the confirmation and loss durations in
/// frames, the measurement variance, the frame rate, the trail length and the frame size.
struct FrameStep {
    frame: u64,
    step: f64,
    confirm: f64,
    lost_max: f64,
    r: f64,
    fps: f64,
    trail_len: usize,
    size: (f64, f64),
}

/// What a frame's step writes as it goes: the table with track ids, the track reports and the
/// rows written late (confirmed tracks' tentative frames, inherited rows).
struct FrameOut {
    table: ComponentTable,
    reports: Vec<TrackReport>,
    backfill: Vec<TrackRow>,
}

/// The frame's detections: the components of at least `min_area` pixels, with their
/// appearance (`grey[i]`: component `i`'s mean grey level, when known).
fn detections(table: &ComponentTable, grey: &[Option<f64>], min_area: u64) -> Vec<Det> {
    table
        .components
        .iter()
        .enumerate()
        .filter(|(_, c)| c.area >= min_area)
        .map(|(ci, c)| Det {
            ci,
            label: c.label,
            bbox: c.bbox(),
            centroid: c.centroid,
            look: Appearance::of(c, grey.get(ci).copied().flatten()),
            area: c.area,
        })
        .collect()
}

/// Track `t` took detection `d` alone: the measurement folded in, the streak grown, the track
/// confirmed (a new id from `next_id`, its tentative rows written) once the streak reaches the
/// confirmation time; a confirmed track's id goes to the component, a tentative one keeps the
/// row for later.
fn advance_matched(t: &mut Track, d: &Det, fs: &FrameStep, next_id: &mut u64, out: &mut FrameOut) {
    measure(t, d, fs.r);
    t.streak += if t.streak == 0.0 { 1.0 } else { fs.step };
    let row = TrackRow {
        frame: fs.frame,
        id: t.id.unwrap_or(0),
        label: d.label,
        bbox: d.bbox,
    };
    if t.id.is_none() && t.streak >= fs.confirm {
        let id = *next_id;
        *next_id += 1;
        t.id = Some(id);
        out.backfill
            .extend(t.pending.drain(..).map(|r| TrackRow { id, ..r }));
    }
    match t.id {
        Some(id) => {
            t.state = TrackState::Confirmed;
            out.table.components[d.ci].track_id = Some(id);
        }
        None => t.pending.push(row),
    }
}

/// Track `t` took no detection and is in no merge: a tentative track is removed; another is
/// lost (its size held) until it has been lost longer than the loss time or its centre left
/// the frame.
fn advance_unmatched(t: &mut Track, fs: &FrameStep) {
    let (w, h) = fs.size;
    t.streak = 0.0;
    t.state = match t.state {
        TrackState::Tentative => TrackState::Removed,
        _ => {
            if t.unseen == 0.0 {
                t.filter.hold_size(t.size);
            }
            t.unseen += fs.step;
            t.lost += fs.step;
            let c = t.filter.centroid();
            let left = c[0] < 0.0 || c[1] < 0.0 || c[0] > w - 1.0 || c[1] > h - 1.0;
            if t.lost > fs.lost_max || left {
                TrackState::Removed
            } else {
                TrackState::Lost
            }
        }
    };
}

/// A confirmed track's report of this frame (`None` while tentative): its box is its merge
/// group's clipped box when it is in one (`merged`), else its filter's; `component`: the label
/// of the detection it took alone. A track matched or merged this frame has a row in it.
fn report(
    t: &mut Track,
    fs: &FrameStep,
    merged: Option<([f64; 4], u32)>,
    component: Option<u32>,
) -> Option<TrackReport> {
    let id = t.id?;
    if matches!(t.state, TrackState::Confirmed | TrackState::Merged) {
        t.last_row = Some(fs.frame);
    }
    let (bbox, component) = match merged {
        Some((b, label)) => (b, Some(label)),
        None => (t.filter.bbox(), component),
    };
    Some(TrackReport {
        id,
        state: t.state,
        bbox,
        centroid: t.filter.centroid(),
        velocity: t.filter.velocity().map(|v| v * fs.fps),
        component,
        area: t.area,
        age: t.age,
        hits: t.hits,
        misses: t.unseen.round() as u32,
        trail: t.trail.iter().copied().collect(),
    })
}

/// A trail point (the overlay draws in `f32`).
fn point(p: [f64; 2]) -> [f32; 2] {
    [p[0] as f32, p[1] as f32]
}

/// Folds detection `d` into track `t` (a partial view as the whole object's box, see the
/// module docs) and updates its appearance.
fn measure(t: &mut Track, d: &Det, r: f64) {
    let pred = t.filter.centroid();
    let mut z = [d.centroid[0], d.centroid[1], d.bbox[2], d.bbox[3]];
    let mut partial = t.hits > 0 && d.look.area < TUNING.partial_area * t.look.area;
    for a in 0..2 {
        let full = t.size[a];
        if t.hits > 0
            && d.bbox[2 + a] < TUNING.partial_size * full
            && d.bbox[2 + a] <= full - TUNING.partial_pixels
        {
            let from_low = d.bbox[a] + 0.5 * (full - 1.0);
            let from_high = d.bbox[a] + d.bbox[2 + a] - 1.0 - 0.5 * (full - 1.0);
            z[a] = if (from_low - pred[a]).abs() <= (from_high - pred[a]).abs() {
                from_low
            } else {
                from_high
            };
            z[2 + a] = full;
            partial = true;
        }
    }
    if t.unseen > 0.0 {
        t.filter.hold_size(t.size);
    }
    t.filter.update(z, r);
    let rate = if partial {
        TUNING.partial_look_rate
    } else {
        TUNING.look_rate
    };
    t.look.blend(&d.look, rate);
    for a in 0..2 {
        t.size[a] += rate * (z[2 + a] - t.size[a]);
    }
    t.area = d.area;
    t.hits += 1;
    t.unseen = 0.0;
    t.lost = 0.0;
    t.trail.push_back(point(t.filter.centroid()));
}
