//! CLEAR-MOT (MOTA) and identity (IDF1) metrics, as defined by the MOT benchmark.
//!
//! * **MOTA** (Bernardin & Stiefelhagen 2008): per frame, ground-truth objects are matched to
//!   hypotheses with IoU >= `iou_threshold`; a correspondence from the previous frame is kept
//!   while it stays valid, the rest are matched optimally (Hungarian on `1 - IoU`). Unmatched
//!   ground truth are false negatives, unmatched hypotheses false positives, and a ground-truth
//!   object matched to a different hypothesis id than at its last match is an identity switch:
//!   `MOTA = 1 - (FN + FP + IDSW) / GT`.
//! * **IDF1** (Ristani et al. 2016): one global bipartite matching between ground-truth and
//!   hypothesis trajectories maximising the number of frames in which paired trajectories
//!   overlap (IoU >= threshold), `IDF1 = 2·IDTP / (GT + HYP)` (all counts in detections).

use std::collections::HashMap;

use serde::Serialize;

use super::hungarian::assign;

/// The objects of one frame: `(id, [left, top, width, height])`.
pub type FrameBoxes = Vec<(u64, [f64; 4])>;

/// Intersection over union of two `[left, top, width, height]` boxes (pixel boxes: a box of
/// width w covers columns `left..left + w`).
#[must_use]
pub(crate) fn iou(a: [f64; 4], b: [f64; 4]) -> f64 {
    let ix = (a[0] + a[2]).min(b[0] + b[2]) - a[0].max(b[0]);
    let iy = (a[1] + a[3]).min(b[1] + b[3]) - a[1].max(b[1]);
    if ix <= 0.0 || iy <= 0.0 {
        return 0.0;
    }
    let inter = ix * iy;
    inter / (a[2] * a[3] + b[2] * b[3] - inter)
}

/// The MOT figures of a sequence.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MotMetrics {
    /// Ground-truth detections.
    pub gt: usize,
    /// Hypothesis detections.
    pub hyp: usize,
    /// Matched pairs (true positives).
    pub matches: usize,
    /// False positives.
    pub fp: usize,
    /// False negatives (misses).
    pub fn_: usize,
    /// Identity switches.
    pub idsw: usize,
    /// `1 - (FN + FP + IDSW) / GT`.
    pub mota: f64,
    /// Identity true positives.
    pub idtp: usize,
    /// `2·IDTP / (GT + HYP)`.
    pub idf1: f64,
}

/// Evaluates hypotheses against ground truth, frame by frame (both slices indexed by frame).
#[must_use]
pub fn evaluate(gt: &[FrameBoxes], hyp: &[FrameBoxes], iou_threshold: f64) -> MotMetrics {
    let frames = gt.len().max(hyp.len());
    let empty = Vec::new();
    let mut m = MotMetrics::default();
    let mut last: HashMap<u64, u64> = HashMap::new(); // gt id -> hyp id of its last match
    let mut overlap: HashMap<(u64, u64), usize> = HashMap::new();
    let (mut gt_len, mut hyp_len): (HashMap<u64, usize>, HashMap<u64, usize>) =
        (HashMap::new(), HashMap::new());
    for f in 0..frames {
        let g = gt.get(f).unwrap_or(&empty);
        let h = hyp.get(f).unwrap_or(&empty);
        m.gt += g.len();
        m.hyp += h.len();
        for (id, _) in g {
            *gt_len.entry(*id).or_default() += 1;
        }
        for (id, _) in h {
            *hyp_len.entry(*id).or_default() += 1;
        }
        for (gid, gb) in g {
            for (hid, hb) in h {
                if iou(*gb, *hb) >= iou_threshold {
                    *overlap.entry((*gid, *hid)).or_default() += 1;
                }
            }
        }
        // CLEAR MOT: keep valid correspondences first.
        let mut g_used = vec![false; g.len()];
        let mut h_used = vec![false; h.len()];
        for (gi, (gid, gb)) in g.iter().enumerate() {
            if let Some(prev) = last.get(gid)
                && let Some(hi) = h
                    .iter()
                    .position(|(hid, hb)| hid == prev && iou(*gb, *hb) >= iou_threshold)
                && !h_used[hi]
            {
                g_used[gi] = true;
                h_used[hi] = true;
                m.matches += 1;
            }
        }
        let gi: Vec<usize> = (0..g.len()).filter(|&i| !g_used[i]).collect();
        let hi: Vec<usize> = (0..h.len()).filter(|&i| !h_used[i]).collect();
        if !gi.is_empty() && !hi.is_empty() {
            const FORBIDDEN: f64 = 1e9;
            let cost: Vec<Vec<f64>> = gi
                .iter()
                .map(|&a| {
                    hi.iter()
                        .map(|&b| {
                            let o = iou(g[a].1, h[b].1);
                            if o >= iou_threshold {
                                1.0 - o
                            } else {
                                FORBIDDEN
                            }
                        })
                        .collect()
                })
                .collect();
            for (r, c) in assign(&cost).into_iter().enumerate() {
                let Some(c) = c else { continue };
                if cost[r][c] >= FORBIDDEN {
                    continue;
                }
                let (gid, hid) = (g[gi[r]].0, h[hi[c]].0);
                g_used[gi[r]] = true;
                h_used[hi[c]] = true;
                m.matches += 1;
                if last.get(&gid).is_some_and(|&p| p != hid) {
                    m.idsw += 1;
                }
                last.insert(gid, hid);
            }
        }
        m.fn_ += g_used.iter().filter(|u| !**u).count();
        m.fp += h_used.iter().filter(|u| !**u).count();
    }
    m.mota = if m.gt > 0 {
        1.0 - (m.fn_ + m.fp + m.idsw) as f64 / m.gt as f64
    } else {
        0.0
    };
    // IDF1: global trajectory matching maximising overlapping frames.
    let gids: Vec<u64> = {
        let mut v: Vec<u64> = gt_len.keys().copied().collect();
        v.sort_unstable();
        v
    };
    let hids: Vec<u64> = {
        let mut v: Vec<u64> = hyp_len.keys().copied().collect();
        v.sort_unstable();
        v
    };
    if !gids.is_empty() && !hids.is_empty() {
        let maxo = overlap.values().copied().max().unwrap_or(0) as f64;
        let cost: Vec<Vec<f64>> = gids
            .iter()
            .map(|g| {
                hids.iter()
                    .map(|h| maxo - overlap.get(&(*g, *h)).copied().unwrap_or(0) as f64)
                    .collect()
            })
            .collect();
        for (r, c) in assign(&cost).into_iter().enumerate() {
            if let Some(c) = c {
                m.idtp += overlap.get(&(gids[r], hids[c])).copied().unwrap_or(0);
            }
        }
    }
    m.idf1 = if m.gt + m.hyp > 0 {
        2.0 * m.idtp as f64 / (m.gt + m.hyp) as f64
    } else {
        0.0
    };
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(x: f64) -> [f64; 4] {
        [x, 0.0, 10.0, 10.0]
    }

    #[test]
    fn iou_basics() {
        assert_eq!(iou(b(0.0), b(0.0)), 1.0);
        assert_eq!(iou(b(0.0), b(10.0)), 0.0);
        assert!((iou(b(0.0), b(5.0)) - 50.0 / 150.0).abs() < 1e-12);
    }

    #[test]
    fn perfect_and_switched_tracks() {
        let gt: Vec<FrameBoxes> = (0..10)
            .map(|f| vec![(1, b(f as f64)), (2, b(100.0 + f as f64))])
            .collect();
        let m = evaluate(&gt, &gt, 0.5);
        assert_eq!((m.fp, m.fn_, m.idsw), (0, 0, 0));
        assert_eq!(m.mota, 1.0);
        assert_eq!(m.idf1, 1.0);
        // Hypothesis swaps ids halfway: 2 switches, IDF1 halves.
        let hyp: Vec<FrameBoxes> = (0..10)
            .map(|f| {
                let (a, c) = if f < 5 { (7, 8) } else { (8, 7) };
                vec![(a, b(f as f64)), (c, b(100.0 + f as f64))]
            })
            .collect();
        let m = evaluate(&gt, &hyp, 0.5);
        assert_eq!(m.idsw, 2);
        assert!((m.mota - (1.0 - 2.0 / 20.0)).abs() < 1e-12);
        assert!((m.idf1 - 0.5).abs() < 1e-12);
        // Missing the second object entirely, plus one false positive far away.
        let hyp: Vec<FrameBoxes> = (0..10)
            .map(|f| vec![(3, b(f as f64)), (4, b(500.0))])
            .collect();
        let m = evaluate(&gt, &hyp, 0.5);
        assert_eq!((m.fn_, m.fp, m.idsw, m.matches), (10, 10, 0, 10));
        assert_eq!(m.mota, 0.0);
        assert!((m.idf1 - 0.5).abs() < 1e-12);
    }
}
