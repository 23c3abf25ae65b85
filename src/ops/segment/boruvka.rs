//! A sequential CPU model of the GPU's atomics-based Borůvka (`kernels/segment.cu`): the same
//! `f32` smoothing, edge weights, packed keys, rounds, predicate, cycle rule, statistics and
//! hierarchy, so the GPU result equals this one bit for bit. It is also a CPU fallback that
//! yields the hierarchy (the Kruskal reference in [`super::cpu`] has none).
//!
//! One round (mode `Merge`; mode `MinSize` differs where noted):
//! 1. every pixel `p` of component `c` finds the least key `(w bits << 32) | edge id` over its
//!    8 neighbours in other components, and `best[c] = min(best[c], key)` (MinSize: only
//!    components with `size < min_size`);
//! 2. every root `v` with an edge to root `d` links `v -> d` when
//!    `w < min(Int(v) + k/|v|, Int(d) + k/|d|)` (`f32`; MinSize: always), unless the edge is
//!    also `d`'s least edge and `v < d` (a mutual pair keeps the smaller root);
//! 3. chains are followed to their final root, which gains the sizes and
//!    `Int = max(Int, Int(v), w(v))` of the roots absorbed; the absorbed roots record
//!    `(final root, round)` in the hierarchy;
//! 4. every pixel's component becomes the final root of its old one.
//!
//! A phase ends with the first round that links nothing (or at its round cap).

use rayon::prelude::*;

use super::{SegmentHierarchy, SegmentOutput, SegmentParams, raster_relabel};
use crate::image::{Image, ImageView};
use crate::ops::OpError;
use crate::ops::blur::cpu::{blur_interleaved, pack_gray, pack_rgb};

/// No edge (all neighbours in the same component).
pub const NO_EDGE: u64 = u64::MAX;

/// Forward edges of pixel `p = (x, y)`, as `dir`: 0 right `(x+1, y)`, 1 down `(x, y+1)`,
/// 2 down-right `(x+1, y+1)`, 3 down-left `(x-1, y+1)`. Edge id = `4 p + dir`.
pub const DIRS: [(i64, i64); 4] = [(1, 0), (0, 1), (1, 1), (-1, 1)];

/// Euclidean distance in `f32`, channels summed left to right, `q - p` (as the kernels).
#[inline]
#[must_use]
pub fn colour_distance_f32(s: &[f32], channels: usize, p: usize, q: usize) -> f32 {
    let mut acc = 0.0f32;
    for c in 0..channels {
        let d = s[q * channels + c] - s[p * channels + c];
        acc = if c == 0 { d * d } else { acc + d * d };
    }
    acc.sqrt()
}

/// The four forward edge weights of every pixel (`f32::INFINITY` where the neighbour is
/// outside the image).
#[must_use]
pub fn edge_weights(s: &[f32], width: usize, height: usize, channels: usize) -> Vec<[f32; 4]> {
    (0..width * height)
        .into_par_iter()
        .map(|p| {
            let (x, y) = ((p % width) as i64, (p / width) as i64);
            let mut w4 = [f32::INFINITY; 4];
            for (d, &(dx, dy)) in DIRS.iter().enumerate() {
                let (nx, ny) = (x + dx, y + dy);
                if nx >= 0 && nx < width as i64 && ny < height as i64 {
                    w4[d] = colour_distance_f32(s, channels, p, (ny as usize) * width + nx as usize);
                }
            }
            w4
        })
        .collect()
}

/// The packed key of an edge.
#[inline]
#[must_use]
pub fn edge_key(w: f32, eid: u32) -> u64 {
    (u64::from(w.to_bits()) << 32) | u64::from(eid)
}

/// Endpoints `(p, q)` of edge id `eid` on a grid of `width` columns.
#[inline]
#[must_use]
pub fn edge_endpoints(eid: u32, width: usize) -> (usize, usize) {
    let p = (eid >> 2) as usize;
    let q = match eid & 3 {
        0 => p + 1,
        1 => p + width,
        2 => p + width + 1,
        _ => p + width - 1,
    };
    (p, q)
}

/// The least key from pixel `p` to a neighbour whose component differs from `c`.
#[inline]
fn min_key(p: usize, width: usize, height: usize, comp: &[u32], w4: &[[f32; 4]]) -> u64 {
    let c = comp[p];
    let (x, y) = (p % width, p / width);
    let mut best = NO_EDGE;
    let mut consider = |q: usize, owner: usize, dir: usize| {
        if comp[q] != c {
            best = best.min(edge_key(w4[owner][dir], (owner * 4 + dir) as u32));
        }
    };
    let (left, right, up, down) = (x > 0, x + 1 < width, y > 0, y + 1 < height);
    if right {
        consider(p + 1, p, 0);
    }
    if down {
        consider(p + width, p, 1);
        if right {
            consider(p + width + 1, p, 2);
        }
        if left {
            consider(p + width - 1, p, 3);
        }
    }
    if left {
        consider(p - 1, p - 1, 0);
    }
    if up {
        consider(p - width, p - width, 1);
        if left {
            consider(p - width - 1, p - width - 1, 2);
        }
        if right {
            consider(p - width + 1, p - width + 1, 3);
        }
    }
    best
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Merge,
    MinSize,
}

struct State<'a> {
    width: usize,
    height: usize,
    w4: &'a [[f32; 4]],
    k: f32,
    min_size: u32,
    comp: Vec<u32>,
    size: Vec<u32>,
    cint: Vec<f32>,
    best: Vec<u64>,
    link: Vec<u32>,
    mw: Vec<f32>,
    parent: Vec<u32>,
    round: Vec<u16>,
}

impl State<'_> {
    /// One round; true when it linked anything.
    fn round(&mut self, mode: Mode, r: u16) -> bool {
        let n = self.comp.len();
        let (w, h) = (self.width, self.height);
        // 1. Least outgoing edge per pixel, reduced per component.
        let keys: Vec<u64> = {
            let (comp, size, w4, ms) = (&self.comp, &self.size, self.w4, self.min_size);
            (0..n)
                .into_par_iter()
                .map(|p| {
                    if mode == Mode::MinSize && size[comp[p] as usize] >= ms {
                        NO_EDGE
                    } else {
                        min_key(p, w, h, comp, w4)
                    }
                })
                .collect()
        };
        for (p, &key) in keys.iter().enumerate() {
            let c = self.comp[p] as usize;
            self.best[c] = self.best[c].min(key);
        }
        // 2. Predicate, cycle rule, links.
        let mut links = 0usize;
        let roots: Vec<usize> = (0..n).filter(|&v| self.comp[v] as usize == v).collect();
        for &v in &roots {
            self.link[v] = v as u32;
            let key = self.best[v];
            if key == NO_EDGE {
                continue;
            }
            let (a, b) = edge_endpoints((key & 0xffff_ffff) as u32, w);
            let (ca, cb) = (self.comp[a] as usize, self.comp[b] as usize);
            let d = if ca == v { cb } else { ca };
            let wv = f32::from_bits((key >> 32) as u32);
            if mode == Mode::Merge {
                let tv = self.cint[v] + self.k / self.size[v] as f32;
                let td = self.cint[d] + self.k / self.size[d] as f32;
                if !(wv < tv.min(td)) {
                    continue;
                }
            }
            if self.best[d] == key && v < d {
                continue;
            }
            self.link[v] = d as u32;
            self.mw[v] = wv;
            links += 1;
        }
        if links == 0 {
            for &v in &roots {
                self.best[v] = NO_EDGE;
            }
            return false;
        }
        // 3. Final roots, statistics, hierarchy.
        let mut fin = vec![0u32; n];
        for &v in &roots {
            let mut f = v;
            while self.link[f] as usize != f {
                f = self.link[f] as usize;
            }
            fin[v] = f as u32;
        }
        for &v in &roots {
            let f = fin[v] as usize;
            if f != v {
                self.size[f] += self.size[v];
                self.cint[f] = self.cint[f].max(self.cint[v].max(self.mw[v]));
                self.parent[v] = f as u32;
                self.round[v] = r;
            }
            self.best[v] = NO_EDGE;
        }
        // 4. Relabel pixels.
        for c in &mut self.comp {
            *c = fin[*c as usize];
        }
        true
    }
}

/// The Borůvka segmentation of a smoothed interleaved `f32` image.
pub fn boruvka_from_smoothed(
    smoothed: &[f32],
    width: usize,
    height: usize,
    channels: usize,
    params: &SegmentParams,
) -> Result<(SegmentOutput, SegmentHierarchy), OpError> {
    params.validate()?;
    let n = width * height;
    if n >= (1 << 30) {
        return Err(OpError::Unsupported(format!("{width}x{height}: edge ids need 4 * pixels < 2^32")));
    }
    let w4 = edge_weights(smoothed, width, height, channels);
    let mut st = State {
        width,
        height,
        w4: &w4,
        k: params.k_f32(),
        min_size: params.min_size as u32,
        comp: (0..n as u32).collect(),
        size: vec![1; n],
        cint: vec![0.0; n],
        best: vec![NO_EDGE; n],
        link: (0..n as u32).collect(),
        mw: vec![0.0; n],
        parent: (0..n as u32).collect(),
        round: vec![u16::MAX; n],
    };
    let mut level_rounds = Vec::new();
    let mut capped = false;
    let mut rounds = 0;
    for r in 1..=params.max_rounds {
        if !st.round(Mode::Merge, r as u16) {
            break;
        }
        rounds += 1;
        level_rounds.push(r as u16);
        capped = r == params.max_rounds;
    }
    let mut ms_rounds = 0;
    if params.min_size > 1 {
        for m in 1..=params.max_min_size_rounds {
            let r = params.max_rounds + m;
            if !st.round(Mode::MinSize, r as u16) {
                break;
            }
            ms_rounds += 1;
            level_rounds.push(r as u16);
            capped |= m == params.max_min_size_rounds;
        }
    }
    let (labels, count) = raster_relabel(&st.comp);
    let out = SegmentOutput {
        labels: Image::from_vec(width, height, labels)?,
        segment_count: count,
        rounds,
        min_size_rounds: ms_rounds,
        capped,
        level: rounds + ms_rounds,
    };
    let hier = SegmentHierarchy { width, height, parent: st.parent, round: st.round, level_rounds };
    Ok((out, hier))
}

/// Borůvka Felzenszwalb of a packed interleaved `u8` image (1 or 3 channels): exactly what the
/// GPU computes, with its hierarchy.
pub fn felzenszwalb_boruvka(
    data: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    params: &SegmentParams,
) -> Result<(SegmentOutput, SegmentHierarchy), OpError> {
    params.validate()?;
    let s = blur_interleaved::<f32>(data, width, height, channels, &params.blur())?;
    boruvka_from_smoothed(&s, width, height, channels, params)
}

/// [`felzenszwalb_boruvka`] of a grey view.
pub fn felzenszwalb_boruvka_gray(
    img: ImageView<'_, u8>,
    params: &SegmentParams,
) -> Result<(SegmentOutput, SegmentHierarchy), OpError> {
    felzenszwalb_boruvka(&pack_gray(img), img.width(), img.height(), 1, params)
}

/// [`felzenszwalb_boruvka`] of an RGB view.
pub fn felzenszwalb_boruvka_rgb(
    img: ImageView<'_, [u8; 3]>,
    params: &SegmentParams,
) -> Result<(SegmentOutput, SegmentHierarchy), OpError> {
    felzenszwalb_boruvka(&pack_rgb(img), img.width(), img.height(), 3, params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::segment::metrics::check_labels;

    #[test]
    fn endpoints_roundtrip() {
        let w = 7;
        for p in [8usize, 20, 30] {
            for d in 0..4 {
                let (a, b) = edge_endpoints((p * 4 + d) as u32, w);
                assert_eq!(a, p);
                let (dx, dy) = DIRS[d];
                assert_eq!(b as i64, p as i64 + dy * w as i64 + dx);
            }
        }
    }

    #[test]
    fn two_halves_and_hierarchy() {
        let img = Image::from_fn(16, 8, |x, _| if x < 8 { 20u8 } else { 220 });
        let p = SegmentParams { scale: 100.0, sigma: 0.0, min_size: 0, ..SegmentParams::default() };
        let (out, hier) = felzenszwalb_boruvka_gray(img.view(), &p).unwrap();
        assert_eq!(out.segment_count, 2);
        assert_eq!(out.labels.get(0, 0), 0);
        assert_eq!(out.labels.get(15, 7), 1);
        assert_eq!(hier.levels(), out.levels());
        let (top, n) = hier.labels_at(out.level).unwrap();
        assert_eq!((top, n), (out.labels.clone(), 2));
        let (bottom, n0) = hier.labels_at(0).unwrap();
        assert_eq!(n0, 128);
        assert_eq!(bottom.get(3, 1), 19);
        // Counts never increase with the level.
        let counts: Vec<usize> = (0..hier.levels()).map(|l| hier.labels_at(l).unwrap().1).collect();
        assert!(counts.windows(2).all(|c| c[1] <= c[0]), "{counts:?}");
    }

    #[test]
    fn min_size_is_enforced_and_segments_connect() {
        let img = Image::from_fn(24, 20, |x, y| ((x * 53 + y * 97 + x * y) % 256) as u8);
        let p = SegmentParams { scale: 10.0, sigma: 0.5, min_size: 10, ..SegmentParams::default() };
        let (out, _) = felzenszwalb_boruvka_gray(img.view(), &p).unwrap();
        let c = check_labels(out.labels.view(), out.segment_count).unwrap();
        assert!(c.min_size >= 10, "{c:?}");
        assert!(!out.capped);
    }

    #[test]
    fn empty_and_single_pixel() {
        let p = SegmentParams::default();
        let (out, h) = felzenszwalb_boruvka_gray(Image::<u8>::new(0, 0, 0).view(), &p).unwrap();
        assert_eq!((out.segment_count, h.levels()), (0, 1));
        let (out, _) = felzenszwalb_boruvka_gray(Image::new(1, 1, 9u8).view(), &p).unwrap();
        assert_eq!(out.segment_count, 1);
    }
}
