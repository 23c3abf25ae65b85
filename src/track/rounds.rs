//! The association rounds of one frame, over gated candidate pairs (`associate`).
//!
//! 1. **Tracked**: tracks matched in the previous frame (tentative and confirmed) against
//!    every detection; pairs that clearly overlap best are matched first
//!    (`Tuning::sure_iou`). A pair passes the gate when the centroids are at most
//!    `max_distance` apart, or the boxes' IoU is at least `min_iou`, or the predicted centroid
//!    lies in the detection's box. Cost: `min(d / gate, 1) + iou_weight · (1 - IoU) +
//!    appearance_weight · difference`.
//! 2. **Merges** ([`merge`](super::merge)) — from the confirmed and merged tracks still
//!    unmatched: a confirmed track joins the component its predicted centroid lies in, a merged
//!    track stays in the one that covers `Tuning::keep_cover` of its predicted box (a group
//!    goes on while its component holds it).
//! 3. **Split**: merged tracks whose group came apart, against the detections left and those of
//!    tentative tracks; the same gate, and their appearance must fit
//!    (`Appearance::may_be`). Tracks matched before them win, as in a matching cascade: a
//!    track just seen is not pushed aside by one whose position is only inferred.
//! 4. **Re-identification**: the other confirmed, merged and lost tracks against the detections
//!    left and those of tentative tracks. Gate: distance within `max_distance` widened by
//!    `gate_growth` for the time the track has been lost, and `Appearance::may_be`; cost:
//!    `d / gate + appearance_weight · difference`.
//!
//! A track that takes a detection held by a tentative track drops that tentative track and
//! inherits its frames (they were this track's object, seen before it was re-identified).

use std::collections::BTreeMap;

use super::TrackRow;
use super::TrackState;
use super::appearance::Appearance;
use super::associate::{BoxGrid, Candidate, assign_sparse};
use super::merge::{Group, grow_group};
use super::metrics::iou;
use super::params::TrackerParams;
use super::tracker::Track;
use super::tuning::TUNING;
#[cfg(doc)]
use super::tuning::Tuning;

/// Share of box `a` covered by box `b`.
#[must_use]
pub(crate) fn covered(a: [f64; 4], b: [f64; 4]) -> f64 {
    let ix = (a[0] + a[2]).min(b[0] + b[2]) - a[0].max(b[0]);
    let iy = (a[1] + a[3]).min(b[1] + b[3]) - a[1].max(b[1]);
    if ix <= 0.0 || iy <= 0.0 {
        0.0
    } else {
        ix * iy / (a[2] * a[3]).max(1e-9)
    }
}

/// A component of at least `min_area` pixels.
#[derive(Clone, Debug)]
pub(crate) struct Det {
    /// Index in the frame's component table.
    pub ci: usize,
    /// Component label.
    pub label: u32,
    /// Pixel box `[left, top, width, height]`.
    pub bbox: [f64; 4],
    /// Centroid `[x, y]`.
    pub centroid: [f64; 2],
    /// Appearance.
    pub look: Appearance,
    /// Pixels.
    pub area: u64,
}

/// The smallest box holding boxes `a` and `b`.
fn union_box(a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
    let (l, t) = (a[0].min(b[0]), a[1].min(b[1]));
    [
        l,
        t,
        (a[0] + a[2]).max(b[0] + b[2]) - l,
        (a[1] + a[3]).max(b[1] + b[3]) - t,
    ]
}

/// Whether point `p` lies in box `b` (with `Tuning::inside_margin`).
#[must_use]
pub fn inside(p: [f64; 2], b: [f64; 4]) -> bool {
    let m = TUNING.inside_margin;
    p[0] >= b[0] - m
        && p[0] <= b[0] + b[2] - 1.0 + m
        && p[1] >= b[1] - m
        && p[1] <= b[1] + b[3] - 1.0 + m
}

/// The outcome of a frame's association.
#[derive(Debug)]
pub(crate) struct Association {
    /// Per track, the detection it took alone.
    pub matched: Vec<Option<usize>>,
    /// Per detection, the track that took it.
    pub owner: Vec<Option<usize>>,
    /// Tentative tracks whose detection another track took over.
    pub dropped: Vec<bool>,
    /// (track, rows) of frames a track inherits from a dropped tentative track.
    pub inherited: Vec<(usize, Vec<TrackRow>)>,
    /// Merge groups.
    pub groups: Vec<Group>,
    /// Per track: a member of a merge group.
    pub in_group: Vec<bool>,
    /// Per detection: a merge group's component.
    pub det_merged: Vec<bool>,
}

#[derive(Clone, Copy, PartialEq)]
enum Round {
    Tracked,
    Merged,
    Reidentify,
}

/// Spatial indexes of a frame's detections: all of them, and those still open when the
/// re-identification round starts (few; a lost track's gate can span hundreds of pixels).
#[derive(Clone, Debug, Default)]
pub(crate) struct Grids {
    /// Every detection.
    pub all: BoxGrid,
    /// Open detections.
    pub open: BoxGrid,
    /// Detection index of each entry of `open`.
    pub open_dets: Vec<usize>,
}

/// The re-identification gate of lost tracks in this frame: it widens with the time a track
/// has been lost, and closes once that time passes `lost_seconds` (after a stretch of dropped
/// frames, a track may be past it before its removal was seen).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LostGate {
    /// `gate_growth` in pixels a frame at the stream's rate.
    pub growth_per_frame: f64,
    /// This frame's [`FrameClock::step`](super::params::FrameClock::step).
    pub step: f64,
    /// `lost_seconds` in frames at the stream's rate, with the tracker's half frame of slack.
    pub lost_max: f64,
}

impl LostGate {
    /// The gate's half side for a track lost for `lost` frames before this one, or `None` when
    /// it has been unseen too long to be re-identified (it is removed in this frame).
    #[must_use]
    pub(crate) fn half_side(&self, p: &TrackerParams, lost: f64) -> Option<f64> {
        let unseen = lost + self.step;
        // At a steady rate a live lost track is never past this: it was removed a frame ago.
        (lost == 0.0 || unseen <= self.lost_max + 1.0)
            .then_some(p.max_distance + self.growth_per_frame * unseen)
    }
}

/// Runs the rounds (see the module docs) for `tracks` (predicted) and `dets` (in
/// `grids.all`), over a `width` x `height` frame.
pub(crate) fn associate(
    tracks: &mut [Track],
    dets: &[Det],
    grids: &mut Grids,
    size: (usize, usize),
    p: &TrackerParams,
    growth: LostGate,
) -> Association {
    let grid = &mut grids.all;
    let (n, m) = (tracks.len(), dets.len());
    let mut a = Association {
        matched: vec![None; n],
        owner: vec![None; m],
        dropped: vec![false; n],
        inherited: Vec::new(),
        groups: Vec::new(),
        in_group: vec![false; n],
        det_merged: vec![false; m],
    };
    let sure = sure_pairs(tracks, dets, grid);
    a.apply(tracks, sure);
    let cands = gather(tracks, dets, (grid, None), p, growth, Round::Tracked, &a);
    a.apply(tracks, assign_sparse(n, m, &cands));
    find_merges(tracks, dets, grid, p, &mut a);
    let cands = gather(tracks, dets, (grid, None), p, growth, Round::Merged, &a);
    a.apply(tracks, assign_sparse(n, m, &cands));
    grids.open_dets.clear();
    grids
        .open_dets
        .extend((0..m).filter(|&di| a.open(tracks, di)));
    let boxes: Vec<[f64; 4]> = grids.open_dets.iter().map(|&di| dets[di].bbox).collect();
    grids
        .open
        .rebuild(size.0, size.1, TUNING.open_cell * p.max_distance, &boxes);
    let cands = gather(
        tracks,
        dets,
        (&mut grids.open, Some(&grids.open_dets)),
        p,
        growth,
        Round::Reidentify,
        &a,
    );
    let cands: Vec<Candidate> = cands
        .into_iter()
        .map(|c| Candidate {
            det: grids.open_dets[c.det],
            ..c
        })
        .collect();
    a.apply(tracks, assign_sparse(n, m, &cands));
    a
}

impl Association {
    /// Whether detection `di` can still be taken: not a merge and free or held by a tentative
    /// track.
    fn open(&self, tracks: &[Track], di: usize) -> bool {
        !self.det_merged[di]
            && self.owner[di].is_none_or(|o| tracks[o].state == TrackState::Tentative)
    }

    /// Records an assignment of a round (every assigned detection is open).
    fn apply(&mut self, tracks: &mut [Track], assignment: Vec<Option<usize>>) {
        for (ti, m) in assignment.into_iter().enumerate() {
            let Some(di) = m else { continue };
            if let Some(u) = self.owner[di] {
                self.matched[u] = None;
                self.dropped[u] = true;
                self.inherited
                    .push((ti, std::mem::take(&mut tracks[u].pending)));
            }
            self.owner[di] = Some(ti);
            self.matched[ti] = Some(di);
        }
    }
}

/// Candidate pairs of one round; `grid` holds every detection, or for re-identification the
/// open ones (`open_dets`), whose positions the candidates then carry as `det`.
fn gather(
    tracks: &[Track],
    dets: &[Det],
    (grid, open_dets): (&mut BoxGrid, Option<&[usize]>),
    p: &TrackerParams,
    growth: LostGate,
    round: Round,
    a: &Association,
) -> Vec<Candidate> {
    let mut cands = Vec::new();
    let mut near = Vec::new();
    for (ti, t) in tracks.iter().enumerate() {
        let seeks = a.matched[ti].is_none()
            && !a.dropped[ti]
            && match round {
                Round::Tracked => {
                    t.unseen == 0.0
                        && matches!(t.state, TrackState::Tentative | TrackState::Confirmed)
                }
                Round::Merged => t.state == TrackState::Merged && !a.in_group[ti],
                Round::Reidentify => !a.in_group[ti] && t.state != TrackState::Tentative,
            };
        if !seeks {
            continue;
        }
        let g = if round == Round::Reidentify {
            match growth.half_side(p, t.lost) {
                Some(g) => g,
                None => continue,
            }
        } else {
            p.max_distance
        };
        let (pc, pb) = (t.filter.centroid(), t.filter.bbox());
        let gate = [pc[0] - g, pc[1] - g, 2.0 * g, 2.0 * g];
        near.clear();
        grid.query(
            if round == Round::Reidentify {
                gate
            } else {
                union_box(gate, pb)
            },
            &mut near,
        );
        for &k in &near {
            let di = open_dets.map_or(k, |o| o[k]);
            let d = &dets[di];
            let free = if round == Round::Tracked {
                a.owner[di].is_none()
            } else {
                a.open(tracks, di)
            };
            if !free {
                continue;
            }
            let (dx, dy) = (pc[0] - d.centroid[0], pc[1] - d.centroid[1]);
            let close = dx * dx + dy * dy <= g * g;
            let fits = || t.look.may_be(&d.look, p.shape_tolerance, p.grey_tolerance);
            let (motion, overlap) = if round == Round::Reidentify {
                if !close || !fits() {
                    continue;
                }
                ((dx * dx + dy * dy).sqrt() / g, None)
            } else {
                let overlap = iou(pb, d.bbox);
                let gated =
                    close || (p.min_iou > 0.0 && overlap >= p.min_iou) || inside(pc, d.bbox);
                if !gated || (round == Round::Merged && !fits()) {
                    continue;
                }
                (((dx * dx + dy * dy).sqrt() / g).min(1.0), Some(overlap))
            };
            let difference = t
                .look
                .difference(&d.look, p.shape_tolerance, p.grey_tolerance);
            let cost = motion
                + overlap.map_or(0.0, |o| p.iou_weight * (1.0 - o))
                + p.appearance_weight * difference;
            cands.push(Candidate {
                track: ti,
                det: k,
                cost,
            });
        }
    }
    cands
}

/// The obvious pairs of the tracked round (see [`Tuning::sure_iou`]): in a crowd most tracks pair off
/// here, cheaply, and the optimal assignment is left with the few contested ones.
fn sure_pairs(tracks: &[Track], dets: &[Det], grid: &mut BoxGrid) -> Vec<Option<usize>> {
    // Per track and per detection: best IoU with its partner, and the runner-up IoU.
    let mut track_best: Vec<(f64, usize, f64)> = vec![(0.0, usize::MAX, 0.0); tracks.len()];
    let mut det_best: Vec<(f64, usize, f64)> = vec![(0.0, usize::MAX, 0.0); dets.len()];
    let keep = |b: &mut (f64, usize, f64), o: f64, who: usize| {
        if o > b.0 {
            *b = (o, who, b.0);
        } else if o > b.2 {
            b.2 = o;
        }
    };
    let mut near = Vec::new();
    for (ti, t) in tracks.iter().enumerate() {
        if t.unseen > 0.0 || !matches!(t.state, TrackState::Tentative | TrackState::Confirmed) {
            continue;
        }
        let pb = t.filter.bbox();
        near.clear();
        grid.query(pb, &mut near);
        for &di in &near {
            let o = iou(pb, dets[di].bbox);
            if o > 0.0 {
                keep(&mut track_best[ti], o, di);
                keep(&mut det_best[di], o, ti);
            }
        }
    }
    track_best
        .iter()
        .enumerate()
        .map(|(ti, &(o, di, runner_up))| {
            let clear = |o: f64, r: f64| o >= TUNING.sure_iou && r < 0.5 * o;
            (di != usize::MAX
                && clear(o, runner_up)
                && det_best[di].1 == ti
                && clear(det_best[di].0, det_best[di].2))
            .then_some(di)
        })
        .collect()
}

/// Merge groups from the confirmed and merged tracks left unmatched (see [`merge`]).
fn find_merges(
    tracks: &[Track],
    dets: &[Det],
    grid: &mut BoxGrid,
    p: &TrackerParams,
    a: &mut Association,
) {
    let mut member_cands: BTreeMap<usize, Vec<(usize, f64, f64)>> = BTreeMap::new();
    let mut near = Vec::new();
    for (ti, t) in tracks.iter().enumerate() {
        if a.matched[ti].is_some()
            || a.dropped[ti]
            || !matches!(t.state, TrackState::Confirmed | TrackState::Merged)
        {
            continue;
        }
        let (pc, pb) = (t.filter.centroid(), t.filter.bbox());
        near.clear();
        grid.query(pb, &mut near);
        // A track already merged stays with its group while its box mostly overlaps the
        // component; others join when their predicted centroid lies in it.
        let joins = |b: [f64; 4]| {
            if t.state == TrackState::Merged {
                covered(pb, b) >= TUNING.keep_cover
            } else {
                inside(pc, b)
            }
        };
        let best = near
            .iter()
            .filter(|&&di| joins(dets[di].bbox))
            .map(|&di| {
                (
                    di,
                    (pc[0] - dets[di].centroid[0]).hypot(pc[1] - dets[di].centroid[1]),
                )
            })
            .min_by(|x, y| x.1.total_cmp(&y.1));
        if let Some((di, dist)) = best {
            member_cands
                .entry(di)
                .or_default()
                .push((ti, t.look.area, dist));
        }
    }
    for (di, cs) in member_cands {
        // The track that took the component leads the group when its prediction lies in it; a
        // tentative track that took it gives way to the merge.
        let owner = a.owner[di];
        let tentative_owner = owner.is_some_and(|o| tracks[o].state == TrackState::Tentative);
        let first = owner
            .filter(|&o| !tentative_owner && inside(tracks[o].filter.centroid(), dets[di].bbox))
            .map(|o| (o, tracks[o].look.area));
        if owner.is_some() && !tentative_owner && first.is_none() {
            continue;
        }
        let was_merged = cs
            .iter()
            .map(|c| c.0)
            .chain(first.map(|f| f.0))
            .filter(|&t| tracks[t].state == TrackState::Merged)
            .count();
        let share = if was_merged >= 2 {
            p.merge_area_share.min(TUNING.keep_share)
        } else {
            p.merge_area_share
        };
        let members = grow_group(dets[di].look.area, first, &cs, share);
        if members.len() < 2 {
            continue;
        }
        if let Some(o) = owner {
            a.matched[o] = None;
            a.dropped[o] |= tentative_owner;
        }
        a.owner[di] = None;
        a.det_merged[di] = true;
        for &mi in &members {
            a.in_group[mi] = true;
            a.matched[mi] = None;
        }
        a.groups.push(Group { det: di, members });
    }
}
