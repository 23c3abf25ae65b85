//! What carries over from frame to frame: the last enqueue, the round counts recent frames used
//! (which set the next frame's round caps and where the giant trees' grid is launched), the
//! frames run again, the captured graphs; and the readings of the counters that feed them.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use super::enqueue::{Body, GraphKey};
use super::tuning::SegmentationTuning;
use super::{SegmentationParams, threshold_f32};
use crate::gpu::GraphCache;

/// What the last enqueue produced.
#[derive(Clone, Copy, Debug)]
pub(super) struct Produced {
    pub width: usize,
    pub height: usize,
    /// Rounds launched per phase: merge, min_size.
    pub caps: [u32; 2],
    /// The finisher ran each phase on to the parameters' caps (`full`).
    pub finish: bool,
    pub full: [u32; 2],
    /// `max_rounds` of the parameters (the `min_size` rounds are numbered after it).
    pub max_rounds: u32,
    /// `Some(level)` after [`super::SegmentationGpu::enqueue_level`].
    pub level: Option<u32>,
}

/// Rounds that changed something, per phase, read from the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RoundsUsed {
    pub used: [u32; 2],
    pub capped: [bool; 2],
    /// Rounds to launch before the finisher takes over (the first round whose frontier was at
    /// most the hand-off frontier, or one past the last that changed something).
    pub handoff: [u32; 2],
}

/// What one downloaded frame wants its successors to launch.
#[derive(Clone, Copy, Debug)]
pub(super) struct Recent {
    /// Rounds per phase.
    pub rounds: [u32; 2],
    /// Rounds with a giant tree ([`Body::giant`]).
    pub giant: [u64; 2],
}

/// The op's memory of earlier frames (interior mutability: downloads take `&self`).
pub(super) struct History {
    pub produced: Cell<Option<Produced>>,
    /// The last frame's launch sequence with the parameters' caps (a capped adaptive frame is
    /// run again from it).
    pub last_body: Cell<Option<Body>>,
    /// Frames run again because they needed more rounds than their adaptive caps.
    pub reruns: Cell<u64>,
    /// What the last downloaded frames wanted launched, newest last.
    pub recent: RefCell<VecDeque<Recent>>,
    /// Whether the last downloaded frame hit its caps, and its rounds.
    pub hint: Cell<Option<RoundsUsed>>,
    /// Captured launch sequences of recent frames.
    pub graphs: RefCell<GraphCache<GraphKey>>,
    /// A capture or graph launch failed (a driver without graph support): launch directly.
    pub graphs_failed: Cell<bool>,
    /// What each round-profile stamp follows (setup, a round, relabelling).
    #[cfg(feature = "profiling")]
    pub stamp_labels: RefCell<Vec<(&'static str, Option<u32>)>>,
}

impl History {
    pub(super) fn new(tuning: &SegmentationTuning) -> Self {
        Self {
            produced: Cell::new(None),
            last_body: Cell::new(None),
            reruns: Cell::new(0),
            recent: RefCell::new(VecDeque::with_capacity(tuning.adaptive_history)),
            hint: Cell::new(None),
            graphs: RefCell::new(GraphCache::new(tuning.graph_cache)),
            graphs_failed: Cell::new(false),
            #[cfg(feature = "profiling")]
            stamp_labels: RefCell::new(Vec::new()),
        }
    }

    /// Round caps for this frame: the parameters' (`false`), or the most rounds recent frames
    /// wanted launched, the merge phase's rounded up to [`SegmentationTuning::round_step`] (`true`). A
    /// phase the last frame ran to its caps (only the parameters' caps stay capped after a
    /// rerun) keeps them.
    pub(super) fn caps(
        &self,
        params: &SegmentationParams,
        tuning: &SegmentationTuning,
    ) -> ([u32; 2], bool) {
        let full = full_caps(params);
        match self.hint.get().filter(|_| params.adaptive_rounds) {
            None => (full, false),
            Some(h) => {
                let recent = self.recent.borrow();
                let c = std::array::from_fn(|i| {
                    let most = recent
                        .iter()
                        .map(|u| u.rounds[i])
                        .max()
                        .unwrap_or(h.used[i] + tuning.adaptive_margin);
                    let want = if h.capped[i] { full[i] } else { most };
                    // min_size phases take 1-2 rounds (sinks): rounding them up to the step would
                    // launch empty rounds on every frame.
                    let step = if i == 0 { tuning.round_step.max(1) } else { 1 };
                    want.div_ceil(step).saturating_mul(step).min(full[i])
                });
                (c, true)
            }
        }
    }

    /// [`Body::giant`] for this frame: the rounds where any recent frame had a giant tree, or
    /// every round without adaptive caps or a history (a new size, parameters, the first frame)
    /// or without the giant trees' grid.
    pub(super) fn giant_rounds(&self, adaptive: bool, giant_grid: bool) -> [u64; 2] {
        let recent = self.recent.borrow();
        if !adaptive || recent.is_empty() || !giant_grid {
            return [u64::MAX; 2];
        }
        recent
            .iter()
            .fold([0; 2], |acc, u| [acc[0] | u.giant[0], acc[1] | u.giant[1]])
    }

    /// Records what a downloaded frame wants its successors to launch (keeping `len` frames).
    pub(super) fn remember(&self, frame: Recent, len: usize) {
        let mut recent = self.recent.borrow_mut();
        while recent.len() >= len.max(1) {
            recent.pop_front();
        }
        recent.push_back(frame);
    }
}

/// Round caps of the parameters: merge rounds, `min_size` rounds (none when `min_size` <= 1).
pub(super) fn full_caps(params: &SegmentationParams) -> [u32; 2] {
    let ms = if params.min_size > 1 {
        params.max_min_size_rounds
    } else {
        0
    };
    [params.max_rounds, ms]
}

/// Per phase, bit i set where the phase's round i + 1 walked a giant tree (`counts`: the
/// per-round giant-tree counts, merge rounds from 1, `min_size` rounds from `max_rounds + 1`);
/// rounds past 64 are always launched with `segmentation_cat_giant` and need no bit.
pub(super) fn giant_masks(counts: &[u32], max_rounds: u32) -> [u64; 2] {
    let firsts = [1usize, max_rounds as usize + 1];
    std::array::from_fn(|ph| {
        (0..64)
            .filter(|&i| counts.get(firsts[ph] + i).is_some_and(|&c| c > 0))
            .fold(0u64, |m, i| m | (1 << i))
    })
}

/// Levels (rounds that merged) and per-phase use from the counters. `frontier`: each round's
/// frontier count; `info`: the op's info words (the finisher reports a phase it left undone in
/// `info[2 + phase]`); `hand`: the finisher's hand-off frontier.
pub(super) fn read_rounds(
    ctl: &[u32],
    mctl: &[u32],
    frontier: &[u32],
    info: &[u32],
    prod: &Produced,
    hand: u32,
) -> (Vec<u16>, RoundsUsed) {
    let firsts = [1, prod.max_rounds + 1];
    let mut used = RoundsUsed::default();
    let mut levels = Vec::new();
    for (ph, &first) in firsts.iter().enumerate() {
        // With the finisher the phase ran on past its launched rounds.
        let cap = if prod.finish {
            prod.full[ph]
        } else {
            prod.caps[ph]
        };
        for i in 0..cap {
            let r = (first + i) as usize;
            if ctl.get(r).is_some_and(|&c| c > 0) {
                used.used[ph] = i + 1;
            }
            if mctl.get(r).is_some_and(|&c| c > 0) {
                levels.push(r as u16);
            }
        }
        let left = prod.finish && prod.caps[ph] < cap && info.get(2 + ph).is_some_and(|&f| f != 0);
        used.capped[ph] =
            left || (cap > 0 && ctl.get((first + cap - 1) as usize).is_some_and(|&c| c > 0));
        // The first round after which at most `hand` frontier pixels were left.
        let last = used.used[ph] + 1;
        used.handoff[ph] = (1..last)
            .find(|&i| {
                frontier
                    .get((first + i - 1) as usize)
                    .is_some_and(|&f| f <= hand)
            })
            .unwrap_or(last)
            .min(cap.max(1));
    }
    (levels, used)
}

/// `segmentation_core`'s weight-0 key limit: `1 << eb` (a key below it is an edge of weight 0,
/// whose caterpillar step passes whatever the order) in merge rounds where every threshold is
/// above 0, i.e. `f32(k / n)` does not round to 0 (thresholds are `f32(Int + k/|C|)` with
/// `Int >= 0`, `|C| <= n`); 0 (no member is joined early) in `min_size` rounds or at scale 0.
pub(super) fn zero_key_limit(min_size_phase: bool, k: f64, n: u32, eb: u32) -> u64 {
    let pass = threshold_f32(0.0, k, n.max(1) as usize) > 0.0;
    if !min_size_phase && pass {
        1u64 << eb
    } else {
        0
    }
}
