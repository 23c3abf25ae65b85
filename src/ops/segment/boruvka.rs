//! A sequential CPU model of the GPU rounds (`kernels/segment.cu`): the same `f32` smoothing,
//! edge weights, packed keys, rounds, decisions, statistics and hierarchy, so the GPU result
//! equals this one bit for bit. It is also a CPU fallback that yields the hierarchy.
//!
//! # Why not plain Borůvka
//! Felzenszwalb's predicate `w < Int(C) + k/|C|` depends on the order edges are processed in:
//! with Borůvka's "every component takes its lightest edge", singletons (threshold `k/1`) merge
//! along edges Kruskal would reach only after their neighbours had grown, and the error cascades
//! (on real frames whole images collapse into a few segments). Even Kruskal itself with edges
//! reordered inside 1 % weight buckets drops to ASA 0.91 against the exact order. So the rounds
//! here reproduce Kruskal's decisions exactly (in the key order `(weight bits, edge id)`):
//!
//! # One merge round (`r`)
//! 1. **least alive edge**: every pixel of an active component `c` takes the least key to a
//!    neighbour in another active component; `best[c] = min` (`atomicMin` on the GPU). Edges to
//!    finished (`done`) components are dead: Kruskal would reject them.
//! 2. **targets**: `target[c]` = the other end of `best[c]`; a component without alive edges is
//!    done.
//! 3. **limits**: `lim[c]` = least key from `c` to a component other than its target and other
//!    than those targeting `c`; `limj[c]` = least key to a component other than its target.
//! 4. **pairs** (mutual least edges, the only edges Kruskal may process next on both sides):
//!    merge when `w < min(Int + k/|·|)` on both sides, else the side(s) whose own threshold
//!    fails are done (Kruskal: no heavier edge of theirs can pass either). A surviving pair
//!    member, or the merged pair, is a *group*.
//! 5. **joiners**: a component whose least edge leads into a group (one-sided) waits for it. The
//!    group absorbs its joiners in key order, updating `|L|` and `Int(L)` after each, as long as
//!    the joiner's key is below the group's limit (the least edge of the grown group to anything
//!    else: `lim` of the pair, `limj` of each absorbed joiner) — exactly the edges Kruskal would
//!    process next around this group. The lists hold the [`JOIN_BUFFER`] least keys below the
//!    limit; the next key becomes the limit. A joiner whose own threshold fails is done; when
//!    the group's threshold fails, the group is done.
//!
//! Rounds end when one changes nothing. Then `min_size` rounds: every component smaller than
//! `min_size` links along its least edge (chains allowed, mutual pairs keep the smaller root),
//! chains are flattened and sizes summed, until none is small or nothing links.
//!
//! With this rule the labels equal a sequential `f32` Kruskal over the same keys
//! ([`kruskal_f32`]); on the sample images that in turn equals scikit-image's labels (which
//! uses `f64`) — ties between exactly equal weights aside.

use rayon::prelude::*;

use super::{SegmentHierarchy, SegmentOutput, SegmentParams, raster_relabel};
use crate::image::{Image, ImageView};
use crate::ops::OpError;
use crate::ops::blur::cpu::{blur_interleaved, pack_gray, pack_rgb};

/// No edge.
pub const NO_EDGE: u64 = u64::MAX;
/// No component.
pub const NONE: u32 = u32::MAX;
/// Joiners a group considers per round (the kernels' per-thread buffer).
pub const JOIN_BUFFER: usize = 32;

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

/// The weight of a key.
#[inline]
#[must_use]
pub fn key_weight(key: u64) -> f32 {
    f32::from_bits((key >> 32) as u32)
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

/// Calls `f(q, key)` for the 8 neighbours `q` of pixel `p`.
#[inline]
fn for_neighbours(p: usize, width: usize, height: usize, w4: &[[f32; 4]], mut f: impl FnMut(usize, u64)) {
    let (x, y) = (p % width, p / width);
    let (left, right, up, down) = (x > 0, x + 1 < width, y > 0, y + 1 < height);
    let mut e = |q: usize, owner: usize, dir: usize| f(q, edge_key(w4[owner][dir], (owner * 4 + dir) as u32));
    if right {
        e(p + 1, p, 0);
    }
    if down {
        e(p + width, p, 1);
        if right {
            e(p + width + 1, p, 2);
        }
        if left {
            e(p + width - 1, p, 3);
        }
    }
    if left {
        e(p - 1, p - 1, 0);
    }
    if up {
        e(p - width, p - width, 1);
        if left {
            e(p - width - 1, p - width - 1, 2);
        }
        if right {
            e(p - width + 1, p - width + 1, 3);
        }
    }
}

/// Keeps the `JOIN_BUFFER` least `(key, id)` below `limit`; a key pushed out (or arriving to a
/// full buffer) lowers `limit`, since that joiner's edge is then the next one around the group.
fn buffer_insert(buf: &mut Vec<(u64, u32)>, limit: &mut u64, key: u64, id: u32) {
    if key >= *limit {
        return;
    }
    if buf.len() == JOIN_BUFFER {
        let last = buf[JOIN_BUFFER - 1];
        if key > last.0 {
            *limit = (*limit).min(key);
            return;
        }
        *limit = (*limit).min(last.0);
        buf.pop();
    }
    let pos = buf.partition_point(|e| e.0 < key);
    buf.insert(pos, (key, id));
}

/// What a round of Borůvka chains links along.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Chain {
    /// Zero-weight edges only (every component).
    Zero,
    /// Any edge, components smaller than `min_size` only.
    MinSize,
}

/// Rounds reserved for the zero-weight phase (global round numbers `1..=ZERO_ROUNDS`).
pub const ZERO_ROUNDS: u32 = 32;

struct State<'a> {
    width: usize,
    height: usize,
    w4: &'a [[f32; 4]],
    k: f32,
    min_size: u32,
    comp: Vec<u32>,
    link: Vec<u32>,
    size: Vec<u32>,
    cint: Vec<f32>,
    done: Vec<bool>,
    best: Vec<u64>,
    tkey: Vec<u64>,
    target: Vec<u32>,
    lim: Vec<u64>,
    limj: Vec<u64>,
    gok: Vec<bool>,
    gsize: Vec<u32>,
    gint: Vec<f32>,
    joiners: Vec<Vec<u32>>,
    parent: Vec<u32>,
    round: Vec<u16>,
}

impl State<'_> {
    fn thr(&self, v: usize) -> f32 {
        self.cint[v] + self.k / self.size[v] as f32
    }

    fn other_end(&self, key: u64, v: usize) -> usize {
        let (a, b) = edge_endpoints(key as u32, self.width);
        let ca = self.comp[a] as usize;
        if ca == v { self.comp[b] as usize } else { ca }
    }

    /// Step 1: relabel through `link`, then least keys per component (`mode` None: merge
    /// phase, alive edges of active components).
    fn least_edges(&mut self, mode: Option<Chain>) {
        for i in 0..self.comp.len() {
            self.comp[i] = self.link[self.comp[i] as usize];
        }
        let (w, h, w4) = (self.width, self.height, self.w4);
        let (comp, done, size, ms) = (&self.comp, &self.done, &self.size, self.min_size);
        let keys: Vec<u64> = (0..comp.len())
            .into_par_iter()
            .map(|p| {
                let c = comp[p] as usize;
                let active = match mode {
                    None => !done[c],
                    Some(Chain::Zero) => true,
                    Some(Chain::MinSize) => size[c] < ms,
                };
                let mut best = NO_EDGE;
                if active {
                    for_neighbours(p, w, h, w4, |q, key| {
                        let e = comp[q] as usize;
                        let alive = match mode {
                            None => !done[e],
                            Some(Chain::Zero) => key_weight(key) == 0.0,
                            Some(Chain::MinSize) => true,
                        };
                        if e != c && alive {
                            best = best.min(key);
                        }
                    });
                }
                best
            })
            .collect();
        for (p, key) in keys.into_iter().enumerate() {
            let c = self.comp[p] as usize;
            self.best[c] = self.best[c].min(key);
        }
    }

    /// Step 2: targets; returns newly finished components (merge phase).
    fn targets(&mut self, roots: &[usize], mode: Option<Chain>) -> u32 {
        let mut events = 0;
        for &v in roots {
            self.link[v] = v as u32;
            self.target[v] = NONE;
            self.gok[v] = false;
            self.lim[v] = NO_EDGE;
            self.limj[v] = NO_EDGE;
            self.joiners[v].clear();
            let key = self.best[v];
            self.best[v] = NO_EDGE;
            if mode.is_none() && self.done[v] {
                continue;
            }
            if mode == Some(Chain::MinSize) && self.size[v] >= self.min_size {
                continue;
            }
            if key == NO_EDGE {
                if mode.is_none() {
                    self.done[v] = true;
                    events += 1;
                }
                continue;
            }
            self.tkey[v] = key;
            self.target[v] = self.other_end(key, v) as u32;
        }
        events
    }

    /// One merge round; returns (events, merges).
    fn merge_round(&mut self, r: u16) -> (u32, u32) {
        let n = self.comp.len();
        self.least_edges(None);
        let roots: Vec<usize> = (0..n).filter(|&v| self.comp[v] as usize == v).collect();
        let mut events = self.targets(&roots, None);
        let mut merges = 0;
        // Step 3: limits.
        for p in 0..n {
            let c = self.comp[p] as usize;
            let t = self.target[c];
            if t == NONE {
                continue;
            }
            let (comp, done, target) = (&self.comp, &self.done, &self.target);
            let (mut lim, mut limj) = (self.lim[c], self.limj[c]);
            for_neighbours(p, self.width, self.height, self.w4, |q, key| {
                let e = comp[q] as usize;
                if e != c && !done[e] && e as u32 != t {
                    limj = limj.min(key);
                    if target[e] as usize != c {
                        lim = lim.min(key);
                    }
                }
            });
            self.lim[c] = lim;
            self.limj[c] = limj;
        }
        // Step 4: mutual pairs; joiners register with their target.
        for &v in &roots {
            let t = self.target[v];
            if t == NONE {
                continue;
            }
            let t = t as usize;
            if self.target[t] as usize != v {
                self.joiners[t].push(v as u32);
                continue;
            }
            if v > t {
                continue;
            }
            let w = key_weight(self.tkey[v]);
            let (tv, tt) = (self.thr(v), self.thr(t));
            if w < tv.min(tt) {
                self.link[t] = v as u32;
                self.gok[v] = true;
                self.gok[t] = true;
                self.gsize[v] = self.size[v] + self.size[t];
                self.gint[v] = self.cint[v].max(self.cint[t]).max(w);
                self.parent[t] = v as u32;
                self.round[t] = r;
                events += 1;
                merges += 1;
            } else {
                for (a, ta) in [(v, tv), (t, tt)] {
                    if w >= ta {
                        self.done[a] = true;
                        events += 1;
                    } else {
                        self.gok[a] = true;
                        self.gsize[a] = self.size[a];
                        self.gint[a] = self.cint[a];
                    }
                }
            }
        }
        // Step 5: groups absorb joiners in key order below their limit.
        for &g in &roots {
            if !self.gok[g] || self.link[g] as usize != g {
                continue;
            }
            let t = self.target[g] as usize;
            let merged = self.link[t] as usize == g && t != g;
            let mut limit = self.lim[g];
            if merged {
                limit = limit.min(self.lim[t]);
            }
            let mut buf: Vec<(u64, u32)> = Vec::with_capacity(JOIN_BUFFER);
            let centres: &[usize] = if merged { &[g, t] } else { &[g] };
            for &c in centres {
                for &x in &self.joiners[c] {
                    buffer_insert(&mut buf, &mut limit, self.tkey[x as usize], x);
                }
            }
            let (mut sz, mut it) = (self.gsize[g], self.gint[g]);
            for (key, x) in buf {
                if key > limit {
                    break;
                }
                let x = x as usize;
                let w = key_weight(key);
                let tl = it + self.k / sz as f32;
                let tx = self.thr(x);
                if w < tl.min(tx) {
                    self.link[x] = g as u32;
                    sz += self.size[x];
                    it = it.max(w.max(self.cint[x]));
                    limit = limit.min(self.limj[x]);
                    self.parent[x] = g as u32;
                    self.round[x] = r;
                    events += 1;
                    merges += 1;
                } else {
                    if w >= tx {
                        self.done[x] = true;
                        events += 1;
                    }
                    if w >= tl {
                        self.done[g] = true;
                        events += 1;
                        break;
                    }
                }
            }
            self.size[g] = sz;
            self.cint[g] = it;
        }
        (events, merges)
    }

    /// One round of Borůvka chains (zero-weight or `min_size` phase); returns the links.
    fn chain_round(&mut self, mode: Chain, r: u16) -> u32 {
        let n = self.comp.len();
        self.least_edges(Some(mode));
        let roots: Vec<usize> = (0..n).filter(|&v| self.comp[v] as usize == v).collect();
        self.targets(&roots, Some(mode));
        let mut links = 0;
        for &v in &roots {
            let t = self.target[v];
            if t == NONE {
                continue;
            }
            let t = t as usize;
            if self.target[t] as usize == v && v < t {
                continue;
            }
            self.link[v] = t as u32;
            links += 1;
        }
        if links == 0 {
            return 0;
        }
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
                self.parent[v] = f as u32;
                self.round[v] = r;
            }
        }
        for &v in &roots {
            self.link[v] = fin[v];
        }
        links
    }
}

/// True when zero-weight edges certainly merge: `k > 0` and `k / n` does not underflow, so
/// every threshold `Int + k/|C|` is positive.
#[must_use]
pub fn zero_phase(params: &SegmentParams, n: usize) -> bool {
    params.k_f32() / n.max(1) as f32 > 0.0
}

/// The segmentation of a smoothed interleaved `f32` image (the GPU's computation).
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
    let ids: Vec<u32> = (0..n as u32).collect();
    let mut st = State {
        width,
        height,
        w4: &w4,
        k: params.k_f32(),
        min_size: params.min_size as u32,
        comp: ids.clone(),
        link: ids.clone(),
        size: vec![1; n],
        cint: vec![0.0; n],
        done: vec![false; n],
        best: vec![NO_EDGE; n],
        tkey: vec![NO_EDGE; n],
        target: vec![NONE; n],
        lim: vec![NO_EDGE; n],
        limj: vec![NO_EDGE; n],
        gok: vec![false; n],
        gsize: vec![0; n],
        gint: vec![0.0; n],
        joiners: vec![Vec::new(); n],
        parent: ids,
        round: vec![u16::MAX; n],
    };
    let mut level_rounds = Vec::new();
    let (mut rounds, mut capped) = (0, false);
    if zero_phase(params, n) {
        for r in 1..=ZERO_ROUNDS {
            if st.chain_round(Chain::Zero, r as u16) == 0 {
                break;
            }
            rounds += 1;
            level_rounds.push(r as u16);
        }
    }
    for m in 1..=params.max_rounds {
        let r = ZERO_ROUNDS + m;
        let (events, merges) = st.merge_round(r as u16);
        if events == 0 {
            break;
        }
        if merges > 0 {
            rounds += 1;
            level_rounds.push(r as u16);
        }
        capped = m == params.max_rounds;
    }
    let mut ms_rounds = 0;
    if params.min_size > 1 {
        for m in 1..=params.max_min_size_rounds {
            let r = ZERO_ROUNDS + params.max_rounds + m;
            if st.chain_round(Chain::MinSize, r as u16) == 0 {
                break;
            }
            ms_rounds += 1;
            level_rounds.push(r as u16);
            capped |= m == params.max_min_size_rounds;
        }
    }
    for i in 0..n {
        st.comp[i] = st.link[st.comp[i] as usize];
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

/// Felzenszwalb of a packed interleaved `u8` image (1 or 3 channels) by the GPU's rounds, on the
/// CPU: exactly what the GPU computes, with its hierarchy.
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

/// Sequential Kruskal over the same `f32` weights and key order as the rounds (what the merge
/// rounds reproduce); no `min_size`. Labels in raster order.
#[must_use]
pub fn kruskal_f32(w4: &[[f32; 4]], width: usize, height: usize, k: f32) -> Vec<u32> {
    let n = width * height;
    let mut keys: Vec<u64> = Vec::with_capacity(4 * n);
    for (p, w) in w4.iter().enumerate() {
        for (d, &wd) in w.iter().enumerate() {
            if wd.is_finite() {
                keys.push(edge_key(wd, (p * 4 + d) as u32));
            }
        }
    }
    keys.par_sort_unstable();
    let mut parent: Vec<usize> = (0..n).collect();
    let mut size = vec![1u32; n];
    let mut cint = vec![0f32; n];
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for key in keys {
        let (a, b) = edge_endpoints(key as u32, width);
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra == rb {
            continue;
        }
        let w = key_weight(key);
        let ta = cint[ra] + k / size[ra] as f32;
        let tb = cint[rb] + k / size[rb] as f32;
        if w < ta.min(tb) {
            parent[rb] = ra;
            size[ra] += size[rb];
            cint[ra] = cint[ra].max(cint[rb]).max(w);
        }
    }
    let roots: Vec<u32> = (0..n).map(|p| find(&mut parent, p) as u32).collect();
    raster_relabel(&roots).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::segment::metrics::check_labels;

    #[test]
    fn endpoints_roundtrip() {
        let w = 7;
        for p in [8usize, 20, 30] {
            for (d, &(dx, dy)) in DIRS.iter().enumerate() {
                let (a, b) = edge_endpoints((p * 4 + d) as u32, w);
                assert_eq!(a, p);
                assert_eq!(b as i64, p as i64 + dy * w as i64 + dx);
            }
        }
    }

    #[test]
    fn join_buffer_keeps_the_least_keys_and_lowers_the_limit() {
        let mut buf = Vec::new();
        let mut limit = 1000u64;
        for k in (0..40u64).rev().map(|i| i * 10 + 5) {
            buffer_insert(&mut buf, &mut limit, k, k as u32);
        }
        buffer_insert(&mut buf, &mut limit, 2000, 1);
        assert_eq!(buf.len(), JOIN_BUFFER);
        assert_eq!(buf[0].0, 5);
        assert_eq!(buf[JOIN_BUFFER - 1].0, 315);
        assert_eq!(limit, 325);
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
        let counts: Vec<usize> = (0..hier.levels()).map(|l| hier.labels_at(l).unwrap().1).collect();
        assert!(counts.windows(2).all(|c| c[1] < c[0]), "{counts:?}");
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

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// The merge rounds decide exactly what sequential Kruskal decides (same keys), ties
        /// and all, on random images with few grey levels.
        #[test]
        fn rounds_equal_kruskal(
            w in 1usize..24, h in 1usize..24, channels in prop::sample::select(vec![1usize, 3]),
            levels in 2u32..9, seed in any::<u64>(),
            scale in prop::sample::select(vec![0.0, 3.0, 30.0, 300.0, 3000.0]),
            sigma in prop::sample::select(vec![0.0, 0.5, 0.8]),
        ) {
            let mut st = seed;
            let data: Vec<u8> = (0..w * h * channels).map(|_| {
                st = st.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (((st >> 33) as u32 % levels) * 255 / (levels - 1)) as u8
            }).collect();
            let p = SegmentParams { scale, sigma, min_size: 0, max_rounds: 1000, ..SegmentParams::default() };
            let s = blur_interleaved::<f32>(&data, w, h, channels, &p.blur()).unwrap();
            let (out, hier) = boruvka_from_smoothed(&s, w, h, channels, &p).unwrap();
            let k = kruskal_f32(&edge_weights(&s, w, h, channels), w, h, p.k_f32());
            prop_assert_eq!(out.labels.data(), &k[..]);
            prop_assert!(!out.capped);
            let (top, _) = hier.labels_at(out.level).unwrap();
            prop_assert_eq!(top, out.labels);
        }
    }
}
