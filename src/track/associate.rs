//! Association of tracks with detections over gated candidate pairs only, so a frame of a
//! thousand components costs about what a thousand small problems cost.
//!
//! * [`BoxGrid`] buckets the detections' boxes into square cells; a query returns the
//!   detections whose box meets a rectangle (each once).
//! * [`assign_sparse`] takes the candidate pairs (track, detection, cost), splits them into
//!   clusters (connected components of the bipartite candidate graph, union-find), and solves
//!   each cluster optimally with the Hungarian method ([`hungarian::assign`]). A cluster of more
//!   than [`Tuning::hungarian_max`] tracks or detections (a crowd whose gates overlap all over)
//!   is solved greedily, cheapest pair first, which keeps the cost linear-logarithmic.

use super::hungarian;
use super::tuning::TUNING;
#[cfg(doc)]
use super::tuning::Tuning;

/// A gated pair and its cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Candidate {
    /// Track index.
    pub track: usize,
    /// Detection index.
    pub det: usize,
    /// Cost (lower is better).
    pub cost: f64,
}

/// Detection boxes bucketed by square cells.
#[derive(Clone, Debug, Default)]
pub(crate) struct BoxGrid {
    cell: f64,
    cols: usize,
    rows: usize,
    cells: Vec<Vec<u32>>,
    stamp: Vec<u32>,
    epoch: u32,
}

impl BoxGrid {
    /// Fills the grid with `boxes` (`[left, top, width, height]`) over a `width` x `height`
    /// frame (boxes outside are clamped to the border cells).
    pub(crate) fn rebuild(&mut self, width: usize, height: usize, cell: f64, boxes: &[[f64; 4]]) {
        self.cell = cell.max(8.0);
        self.cols = ((width as f64 / self.cell).ceil() as usize).max(1);
        self.rows = ((height as f64 / self.cell).ceil() as usize).max(1);
        self.cells.iter_mut().for_each(Vec::clear);
        self.cells.resize(self.cols * self.rows, Vec::new());
        self.stamp.clear();
        self.stamp.resize(boxes.len(), 0);
        self.epoch = 0;
        for (i, b) in boxes.iter().enumerate() {
            let (c0, r0, c1, r1) = self.span(*b);
            for r in r0..=r1 {
                for c in c0..=c1 {
                    self.cells[r * self.cols + c].push(i as u32);
                }
            }
        }
    }

    /// Cell columns and rows `(c0, r0, c1, r1)` that a rectangle covers.
    fn span(&self, b: [f64; 4]) -> (usize, usize, usize, usize) {
        let col = |x: f64| ((x / self.cell).floor().max(0.0) as usize).min(self.cols - 1);
        let row = |y: f64| ((y / self.cell).floor().max(0.0) as usize).min(self.rows - 1);
        (col(b[0]), row(b[1]), col(b[0] + b[2]), row(b[1] + b[3]))
    }

    /// Appends to `out` every detection whose cells meet the rectangle `[left, top, width,
    /// height]` (a superset of the boxes that meet it; each detection once per query).
    pub fn query(&mut self, rect: [f64; 4], out: &mut Vec<usize>) {
        if self.cells.is_empty() {
            return;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.epoch = 1;
        }
        let (c0, r0, c1, r1) = self.span(rect);
        for r in r0..=r1 {
            for c in c0..=c1 {
                for &i in &self.cells[r * self.cols + c] {
                    let s = &mut self.stamp[i as usize];
                    if *s != self.epoch {
                        *s = self.epoch;
                        out.push(i as usize);
                    }
                }
            }
        }
    }
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// For each of `tracks` tracks, the detection it is assigned to among the candidates (see the
/// module docs); every detection is assigned at most once.
#[must_use]
pub(crate) fn assign_sparse(
    tracks: usize,
    dets: usize,
    candidates: &[Candidate],
) -> Vec<Option<usize>> {
    let mut out = vec![None; tracks];
    if candidates.is_empty() {
        return out;
    }
    // Nodes: tracks 0..tracks, detections tracks..tracks + dets.
    let mut parent: Vec<usize> = (0..tracks + dets).collect();
    for c in candidates {
        let (a, b) = (
            find(&mut parent, c.track),
            find(&mut parent, tracks + c.det),
        );
        if a != b {
            parent[a] = b;
        }
    }
    // Candidates grouped by cluster (sorted by root; ties in input order).
    let mut order: Vec<(usize, usize)> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (find(&mut parent, c.track), i))
        .collect();
    order.sort_unstable();
    let mut det_taken = vec![false; dets];
    let mut start = 0;
    while start < order.len() {
        let end = start
            + order[start..]
                .iter()
                .take_while(|o| o.0 == order[start].0)
                .count();
        let pairs: Vec<Candidate> = order[start..end].iter().map(|o| candidates[o.1]).collect();
        start = end;
        let mut ts: Vec<usize> = pairs.iter().map(|c| c.track).collect();
        let mut ds: Vec<usize> = pairs.iter().map(|c| c.det).collect();
        ts.sort_unstable();
        ts.dedup();
        ds.sort_unstable();
        ds.dedup();
        if ts.len() == 1 || ds.len() == 1 {
            // One track or one detection: its cheapest pair.
            if let Some(c) = pairs.iter().min_by(|a, b| a.cost.total_cmp(&b.cost)) {
                out[c.track] = Some(c.det);
                det_taken[c.det] = true;
            }
        } else if ts.len() <= TUNING.hungarian_max && ds.len() <= TUNING.hungarian_max {
            const FORBIDDEN: f64 = 1e12;
            let mut cost = vec![vec![FORBIDDEN; ds.len()]; ts.len()];
            for c in &pairs {
                let (r, k) = (
                    ts.binary_search(&c.track).unwrap_or(0),
                    ds.binary_search(&c.det).unwrap_or(0),
                );
                cost[r][k] = cost[r][k].min(c.cost);
            }
            for (r, a) in hungarian::assign(&cost).into_iter().enumerate() {
                if let Some(k) = a
                    && cost[r][k] < FORBIDDEN
                {
                    out[ts[r]] = Some(ds[k]);
                    det_taken[ds[k]] = true;
                }
            }
        } else {
            let mut sorted = pairs;
            sorted.sort_by(|a, b| a.cost.total_cmp(&b.cost));
            for c in sorted {
                if out[c.track].is_none() && !det_taken[c.det] {
                    out[c.track] = Some(c.det);
                    det_taken[c.det] = true;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dense_optimum(tracks: usize, dets: usize, cands: &[Candidate]) -> f64 {
        // Exhaustive: the best total over all partial matchings, counting unmatched pairs as 0
        // and preferring more pairs (each pair is worth -BIG).
        const BIG: f64 = 1e6;
        fn go(t: usize, tracks: usize, used: &mut Vec<bool>, cost: &[Vec<Option<f64>>]) -> f64 {
            if t == tracks {
                return 0.0;
            }
            let mut best = go(t + 1, tracks, used, cost);
            for d in 0..used.len() {
                if let Some(c) = cost[t][d]
                    && !used[d]
                {
                    used[d] = true;
                    best = best.min(c - BIG + go(t + 1, tracks, used, cost));
                    used[d] = false;
                }
            }
            best
        }
        let mut cost = vec![vec![None; dets]; tracks];
        for c in cands {
            cost[c.track][c.det] = Some(c.cost);
        }
        go(0, tracks, &mut vec![false; dets], &cost)
    }

    proptest! {
        #[test]
        fn sparse_assignment_is_optimal(tracks in 1usize..6, dets in 1usize..6, seed in any::<u64>()) {
            let mut rng = crate::track::scenes::Rng(seed);
            let mut cands = Vec::new();
            for t in 0..tracks {
                for d in 0..dets {
                    if rng.unit() < 0.5 {
                        cands.push(Candidate { track: t, det: d, cost: rng.unit() });
                    }
                }
            }
            let got = assign_sparse(tracks, dets, &cands);
            // A valid matching over candidate pairs only.
            let mut seen = std::collections::HashSet::new();
            let mut total = 0.0;
            for (t, d) in got.iter().enumerate() {
                if let Some(d) = d {
                    prop_assert!(seen.insert(*d));
                    let c = cands.iter().find(|c| c.track == t && c.det == *d);
                    prop_assert!(c.is_some());
                    total += c.map_or(0.0, |c| c.cost) - 1e6;
                }
            }
            prop_assert!((total - dense_optimum(tracks, dets, &cands)).abs() < 1e-6);
        }
    }

    #[test]
    fn grid_finds_the_boxes_meeting_a_rectangle() {
        let boxes = [
            [5.0, 5.0, 10.0, 10.0],
            [100.0, 100.0, 5.0, 5.0],
            [0.0, 0.0, 200.0, 4.0],
        ];
        let mut g = BoxGrid::default();
        g.rebuild(200, 200, 32.0, &boxes);
        let mut out = Vec::new();
        g.query([8.0, 8.0, 1.0, 1.0], &mut out);
        out.sort_unstable();
        assert_eq!(out, vec![0, 2]);
        out.clear();
        g.query([90.0, 90.0, 20.0, 20.0], &mut out);
        assert_eq!(out, vec![1]);
        out.clear();
        g.query([-50.0, 500.0, 10.0, 10.0], &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn crowds_fall_back_to_greedy() {
        // A chain of 200 tracks each gated to its own detection and its neighbour's.
        let n = 200;
        let cands: Vec<Candidate> = (0..n)
            .flat_map(|i| {
                [
                    Candidate {
                        track: i,
                        det: i,
                        cost: 0.1,
                    },
                    Candidate {
                        track: i,
                        det: (i + 1) % n,
                        cost: 0.5,
                    },
                ]
            })
            .collect();
        let got = assign_sparse(n, n, &cands);
        assert!(got.iter().enumerate().all(|(i, d)| *d == Some(i)));
    }
}
