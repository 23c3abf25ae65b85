//! The tracker's per-frame step (outline in the [`crate::track`] docs).
//!
//! Association runs in two rounds over gated candidate pairs ([`associate`]):
//! * **Round 1** — tentative, confirmed and merged tracks against every detection. A pair
//!   passes the gate when the centroids are at most `max_distance + gate_growth · unseen time`
//!   apart, or the boxes' IoU is at least `min_iou`, or the predicted centroid lies in the
//!   detection's box; for a merged track the appearance must also fit
//!   ([`Appearance::may_be`]). Cost: `min(d / gate, 1) + iou_weight · (1 - IoU) +
//!   appearance_weight · difference`.
//! * **Merges** ([`merge`]) — from the confirmed and merged tracks round 1 left unmatched.
//! * **Round 2** — re-identification: the other confirmed, merged and lost tracks against the
//!   detections left over and those taken by tentative tracks (a lost track takes such a
//!   detection over, and the tentative track's frames become its own). Gate: distance within
//!   the widened gate and [`Appearance::may_be`]; cost: `d / gate + appearance_weight ·
//!   difference`.
//!
//! A matched track folds the component into its filter. When the component is a *partial
//! view* (area below [`PARTIAL_AREA`] of the track's: the object is partly behind an occluder
//! or outside the frame), the filter gets the whole object's box instead: on each axis where the
//! component is narrower than the track's size, the edge that agrees best with the prediction is
//! taken as the object's and the centre placed half the track's size from it. So a track keeps
//! its speed and size while its object slides behind an occluder or out of the frame, and its
//! box neither shrinks nor inverts.

use std::collections::{BTreeMap, VecDeque};

use super::appearance::Appearance;
use super::associate::{BoxGrid, Candidate, assign_sparse};
use super::kalman::BoxFilter;
use super::merge::{Group, clip_box, grow_group, place_members};
use super::metrics::iou;
use super::params::{FrameClock, TrackerParams};
use super::{Merge, TrackReport, TrackRow, TrackState, TrackedFrame};
use crate::ops::OpError;
use crate::ops::ccl::ComponentTable;

/// Area ratio (component / track) below which a component is a partial view of its object.
pub const PARTIAL_AREA: f64 = 0.7;
/// Share of a full view blended into a track's appearance and size (a few frames' memory).
const LOOK_RATE: f64 = 0.3;
/// The same for partial views: slow, so a real change of size is followed within a second.
const PARTIAL_LOOK_RATE: f64 = 0.05;
/// Variance of a merged member's corrected centroid, in measurement variances (looser than a
/// measurement: it is inferred from the group).
const MERGED_NOISE: f64 = 4.0;
/// Margin around a component's box within which a predicted centroid counts as inside, pixels.
const INSIDE_MARGIN: f64 = 2.0;

#[derive(Clone, Debug)]
struct Track {
    id: Option<u64>,
    state: TrackState,
    filter: BoxFilter,
    /// Box size `[w, h]` of the whole object, held while it is unseen.
    size: [f64; 2],
    look: Appearance,
    /// Area of the last component matched alone.
    area: u64,
    hits: u32,
    /// Consecutive frames matched (confirmation).
    streak: u32,
    /// Consecutive frames without a component of its own.
    unseen: u32,
    age: u32,
    /// Tentative frames, written when the track is confirmed.
    pending: Vec<TrackRow>,
    trail: VecDeque<[f64; 2]>,
}

/// A component of at least `min_area` pixels.
struct Det {
    ci: usize,
    label: u32,
    bbox: [f64; 4],
    centroid: [f64; 2],
    look: Appearance,
    area: u64,
}

fn inside(p: [f64; 2], b: [f64; 4]) -> bool {
    p[0] >= b[0] - INSIDE_MARGIN && p[0] <= b[0] + b[2] - 1.0 + INSIDE_MARGIN && p[1] >= b[1] - INSIDE_MARGIN && p[1] <= b[1] + b[3] - 1.0 + INSIDE_MARGIN
}

/// Multi-object tracker over component tables.
#[derive(Clone, Debug)]
pub struct Tracker {
    params: TrackerParams,
    clock: FrameClock,
    tracks: Vec<Track>,
    next_id: u64,
    frame: u64,
    grid: BoxGrid,
}

impl Tracker {
    /// A tracker with no tracks.
    pub fn new(params: TrackerParams) -> Result<Self, OpError> {
        params.validate()?;
        Ok(Self { clock: FrameClock::new(params.frame_rate), params, tracks: Vec::new(), next_id: 1, frame: 0, grid: BoxGrid::default() })
    }

    /// The settings.
    #[must_use]
    pub fn params(&self) -> &TrackerParams {
        &self.params
    }

    /// Changes the settings; tracks are kept.
    pub fn set_params(&mut self, params: TrackerParams) -> Result<(), OpError> {
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
    pub fn update(&mut self, table: &ComponentTable, grey: &[Option<f64>], pts_nanos: Option<u64>) -> TrackedFrame {
        let p = self.params.clone();
        self.clock.tick(pts_nanos);
        let growth = p.gate_growth / self.clock.fps();
        let q = p.process_noise * p.process_noise;
        let frame = self.frame;
        self.frame += 1;
        let dets: Vec<Det> = table
            .components
            .iter()
            .enumerate()
            .filter(|(_, c)| c.area >= p.min_area)
            .map(|(ci, c)| Det { ci, label: c.label, bbox: c.bbox(), centroid: c.centroid, look: Appearance::of(c, grey.get(ci).copied().flatten()), area: c.area })
            .collect();
        let boxes: Vec<[f64; 4]> = dets.iter().map(|d| d.bbox).collect();
        self.grid.rebuild(table.width, table.height, p.max_distance, &boxes);
        for t in &mut self.tracks {
            t.filter.predict(q);
            if t.unseen > 0 {
                t.filter.hold_size(t.size);
            }
            t.age += 1;
        }
        let n = self.tracks.len();
        let gate = |t: &Track, extra: u32| p.max_distance + growth * f64::from(t.unseen + extra);

        // Round 1.
        let mut cands = Vec::new();
        let mut near = Vec::new();
        for (ti, t) in self.tracks.iter().enumerate() {
            if t.state == TrackState::Lost {
                continue;
            }
            let (g, pc, pb) = (gate(t, 0), t.filter.centroid(), t.filter.bbox());
            near.clear();
            self.grid.query([pc[0] - g, pc[1] - g, 2.0 * g, 2.0 * g], &mut near);
            self.grid.query(pb, &mut near);
            for &di in &near {
                let d = &dets[di];
                let dist = (pc[0] - d.centroid[0]).hypot(pc[1] - d.centroid[1]);
                let overlap = iou(pb, d.bbox);
                let gated = dist <= g || (p.min_iou > 0.0 && overlap >= p.min_iou) || inside(pc, d.bbox);
                if !gated || (t.unseen > 0 && !t.look.may_be(&d.look, p.shape_tolerance, p.grey_tolerance)) {
                    continue;
                }
                let cost = (dist / g).min(1.0) + p.iou_weight * (1.0 - overlap) + p.appearance_weight * t.look.difference(&d.look, p.shape_tolerance, p.grey_tolerance);
                cands.push(Candidate { track: ti, det: di, cost });
            }
        }
        let mut matched = assign_sparse(n, dets.len(), &cands);
        let mut owner: Vec<Option<usize>> = vec![None; dets.len()];
        for (ti, m) in matched.iter().enumerate() {
            if let Some(di) = *m {
                owner[di] = Some(ti);
            }
        }

        // Merges.
        let mut member_cands: BTreeMap<usize, Vec<(usize, f64, f64)>> = BTreeMap::new();
        for (ti, t) in self.tracks.iter().enumerate() {
            if matched[ti].is_some() || !matches!(t.state, TrackState::Confirmed | TrackState::Merged) {
                continue;
            }
            let pc = t.filter.centroid();
            near.clear();
            self.grid.query([pc[0] - INSIDE_MARGIN, pc[1] - INSIDE_MARGIN, 2.0 * INSIDE_MARGIN, 2.0 * INSIDE_MARGIN], &mut near);
            let best = near
                .iter()
                .filter(|&&di| inside(pc, dets[di].bbox))
                .map(|&di| (di, (pc[0] - dets[di].centroid[0]).hypot(pc[1] - dets[di].centroid[1])))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((di, dist)) = best {
                member_cands.entry(di).or_default().push((ti, t.look.area, dist));
            }
        }
        let mut groups: Vec<Group> = Vec::new();
        let mut in_group = vec![false; n];
        let mut det_merged = vec![false; dets.len()];
        for (di, cs) in &member_cands {
            let first = owner[*di].filter(|&ti| self.tracks[ti].state != TrackState::Tentative).map(|ti| (ti, self.tracks[ti].look.area));
            let members = grow_group(dets[*di].look.area, first, cs, p.merge_area_share);
            if members.len() < 2 {
                continue;
            }
            if let Some(ti) = owner[*di] {
                matched[ti] = None;
            }
            owner[*di] = None;
            det_merged[*di] = true;
            for &m in &members {
                in_group[m] = true;
                matched[m] = None;
            }
            groups.push(Group { det: *di, members });
        }

        // Round 2: re-identification.
        cands.clear();
        for (ti, t) in self.tracks.iter().enumerate() {
            if matched[ti].is_some() || in_group[ti] || t.state == TrackState::Tentative {
                continue;
            }
            let (g, pc) = (gate(t, 1), t.filter.centroid());
            near.clear();
            self.grid.query([pc[0] - g, pc[1] - g, 2.0 * g, 2.0 * g], &mut near);
            for &di in &near {
                let d = &dets[di];
                let open = !det_merged[di] && owner[di].is_none_or(|o| self.tracks[o].state == TrackState::Tentative);
                let dist = (pc[0] - d.centroid[0]).hypot(pc[1] - d.centroid[1]);
                if open && dist <= g && t.look.may_be(&d.look, p.shape_tolerance, p.grey_tolerance) {
                    let cost = dist / g + p.appearance_weight * t.look.difference(&d.look, p.shape_tolerance, p.grey_tolerance);
                    cands.push(Candidate { track: ti, det: di, cost });
                }
            }
        }
        let mut dropped = vec![false; n];
        let mut inherited: Vec<(usize, Vec<TrackRow>)> = Vec::new();
        for (ti, m) in assign_sparse(n, dets.len(), &cands).into_iter().enumerate() {
            let Some(di) = m else { continue };
            if let Some(u) = owner[di] {
                // A tentative track held the detection: its frames are this track's.
                matched[u] = None;
                dropped[u] = true;
                inherited.push((ti, std::mem::take(&mut self.tracks[u].pending)));
            }
            owner[di] = Some(ti);
            matched[ti] = Some(di);
        }

        // Updates.
        let mut out_table = table.clone();
        for c in &mut out_table.components {
            c.track_id = None;
        }
        let mut backfill = Vec::new();
        let mut merged_box: Vec<Option<([f64; 4], u32)>> = vec![None; n];
        for g in &groups {
            let d = &dets[g.det];
            let predicted: Vec<[f64; 2]> = g.members.iter().map(|&m| self.tracks[m].filter.centroid()).collect();
            let sizes: Vec<[f64; 2]> = g.members.iter().map(|&m| self.tracks[m].size).collect();
            let areas: Vec<f64> = g.members.iter().map(|&m| self.tracks[m].look.area).collect();
            let placed = place_members(&predicted, &sizes, &areas, d.bbox, d.centroid);
            for (&m, z) in g.members.iter().zip(placed) {
                let t = &mut self.tracks[m];
                if t.unseen == 0 {
                    t.filter.hold_size(t.size);
                }
                t.filter.update_centroid(z, MERGED_NOISE * p.measurement_noise * p.measurement_noise);
                t.state = TrackState::Merged;
                t.unseen += 1;
                t.trail.push_back(t.filter.centroid());
                merged_box[m] = Some((clip_box(t.filter.bbox(), d.bbox), d.label));
            }
        }
        let mut merges: Vec<Merge> = groups
            .iter()
            .filter_map(|g| {
                let mut ids: Vec<u64> = g.members.iter().filter_map(|&m| self.tracks[m].id).collect();
                ids.sort_unstable();
                (ids.len() >= 2).then_some(Merge { label: dets[g.det].label, track_ids: ids })
            })
            .collect();
        merges.sort_by_key(|m| m.label);
        for (ti, rows) in inherited {
            if let Some(id) = self.tracks[ti].id {
                backfill.extend(rows.into_iter().map(|r| TrackRow { id, ..r }));
            }
        }
        let confirm = self.clock.frames(p.confirm_seconds, 1);
        let lost_max = self.clock.frames(p.lost_seconds, 0);
        let trail_len = self.clock.frames(p.trail_seconds, 1) as usize;
        let r = p.measurement_noise * p.measurement_noise;
        let (w, h) = (table.width as f64, table.height as f64);
        let mut reports = Vec::new();
        for (ti, t) in self.tracks.iter_mut().enumerate() {
            if dropped[ti] {
                continue;
            }
            if let Some(di) = matched[ti] {
                let d = &dets[di];
                self::measure(t, d, r);
                t.streak += 1;
                let row = TrackRow { frame, id: t.id.unwrap_or(0), label: d.label, bbox: d.bbox };
                if t.id.is_none() && t.streak >= confirm {
                    let id = self.next_id;
                    self.next_id += 1;
                    t.id = Some(id);
                    backfill.extend(t.pending.drain(..).map(|r| TrackRow { id, ..r }));
                }
                match t.id {
                    Some(id) => {
                        t.state = TrackState::Confirmed;
                        out_table.components[d.ci].track_id = Some(id);
                    }
                    None => t.pending.push(row),
                }
            } else if !in_group[ti] {
                t.streak = 0;
                t.state = match t.state {
                    TrackState::Tentative => TrackState::Removed,
                    _ => {
                        if t.unseen == 0 {
                            t.filter.hold_size(t.size);
                        }
                        t.unseen += 1;
                        let c = t.filter.centroid();
                        let left = c[0] < 0.0 || c[1] < 0.0 || c[0] > w - 1.0 || c[1] > h - 1.0;
                        if t.unseen > lost_max || left { TrackState::Removed } else { TrackState::Lost }
                    }
                };
            }
            while t.trail.len() > trail_len {
                t.trail.pop_front();
            }
            if let Some(id) = t.id {
                let (bbox, component) = match (merged_box[ti], matched[ti]) {
                    (Some((b, label)), _) => (b, Some(label)),
                    (None, Some(di)) => (t.filter.bbox(), Some(dets[di].label)),
                    (None, None) => (t.filter.bbox(), None),
                };
                reports.push(TrackReport {
                    id,
                    state: t.state,
                    bbox,
                    centroid: t.filter.centroid(),
                    velocity: t.filter.velocity(),
                    component,
                    area: t.area,
                    age: t.age,
                    hits: t.hits,
                    misses: t.unseen,
                    trail: t.trail.iter().copied().collect(),
                });
            }
        }
        let mut keep = Vec::with_capacity(n + dets.len());
        for (ti, t) in std::mem::take(&mut self.tracks).into_iter().enumerate() {
            if !dropped[ti] && t.state != TrackState::Removed {
                keep.push(t);
            }
        }
        self.tracks = keep;

        // New tentative tracks from detections no track took.
        let var_vel = (0.5 * p.max_distance).powi(2);
        for (di, d) in dets.iter().enumerate() {
            if owner[di].is_some() || det_merged[di] {
                continue;
            }
            let size = [d.bbox[2], d.bbox[3]];
            let mut t = Track {
                id: None,
                state: TrackState::Tentative,
                filter: BoxFilter::new([d.centroid[0], d.centroid[1], size[0], size[1]], r, var_vel),
                size,
                look: d.look,
                area: d.area,
                hits: 1,
                streak: 1,
                unseen: 0,
                age: 0,
                pending: Vec::new(),
                trail: VecDeque::from([d.centroid]),
            };
            if confirm <= 1 {
                let id = self.next_id;
                self.next_id += 1;
                t.id = Some(id);
                t.state = TrackState::Confirmed;
                out_table.components[d.ci].track_id = Some(id);
                reports.push(TrackReport {
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
                    trail: vec![d.centroid],
                });
            } else {
                t.pending.push(TrackRow { frame, id: 0, label: d.label, bbox: d.bbox });
            }
            self.tracks.push(t);
        }
        reports.sort_by_key(|r| r.id);
        backfill.sort_by_key(|r| (r.frame, r.id));
        TrackedFrame { frame, table: out_table, tracks: reports, merges, backfill }
    }
}

/// Folds detection `d` into track `t` (a partial view as the whole object's box, see the
/// module docs) and updates its appearance.
fn measure(t: &mut Track, d: &Det, r: f64) {
    let pred = t.filter.centroid();
    let partial = t.hits > 0 && d.look.area < PARTIAL_AREA * t.look.area;
    let mut z = [d.centroid[0], d.centroid[1], d.bbox[2], d.bbox[3]];
    if partial {
        for a in 0..2 {
            let full = t.size[a];
            if d.bbox[2 + a] < 0.9 * full {
                let from_low = d.bbox[a] + 0.5 * (full - 1.0);
                let from_high = d.bbox[a] + d.bbox[2 + a] - 1.0 - 0.5 * (full - 1.0);
                z[a] = if (from_low - pred[a]).abs() <= (from_high - pred[a]).abs() { from_low } else { from_high };
                z[2 + a] = full;
            }
        }
    }
    if t.unseen > 0 {
        t.filter.hold_size(t.size);
    }
    t.filter.update(z, r);
    let rate = if partial { PARTIAL_LOOK_RATE } else { LOOK_RATE };
    t.look.blend(&d.look, rate);
    for a in 0..2 {
        t.size[a] += rate * (z[2 + a] - t.size[a]);
    }
    t.area = d.area;
    t.hits += 1;
    t.unseen = 0;
    t.trail.push_back(t.filter.centroid());
}
