//! A sequential CPU model of the GPU rounds (`kernels/segment.cu`): the same smoothing, edge
//! weights, packed keys, rounds, decisions, statistics and hierarchy, so the GPU result equals
//! this one bit for bit. It is also a CPU fallback that yields the hierarchy.
//!
//! # Arithmetic
//! scikit-image's: `f64` smoothing ([`blur_f64`], bit-identical to SciPy on the samples), `f64`
//! Euclidean weights, thresholds `f32(Int + k/|C|)` compared with the `f64` weight. Keys order
//! the edges: the top `64 - e` bits of the weight's `f64` bits, then the edge id (`e` =
//! [`eid_bits`], 23 bits at 1080p), a total order that follows the weights to ~2^-30 relative.
//! (An `f32` pipeline was tried first; on `text_motion.jpg` at scale 500 its rounding alone
//! changed 35 of 160 segments — the predicate amplifies tiny differences, see below.)
//!
//! # Why not plain Borůvka
//! Felzenszwalb's predicate `w < Int(C) + k/|C|` depends on the order edges are processed in:
//! with Borůvka's "every component takes its lightest edge", singletons (threshold `k/1`) merge
//! along edges Kruskal would reach only after their neighbours had grown, and the error cascades
//! (on real frames whole images collapse into a few segments). Even Kruskal itself with edges
//! reordered inside 1 % weight buckets drops to ASA 0.91 against the exact order. So the rounds
//! here reproduce Kruskal's decisions exactly, in key order:
//!
//! # One exact round (`r`)
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
//! 6. **sub-rounds** (up to [`SUB_ROUNDS`] − 1, each only while the previous one merged):
//!    components whose least edge leads into an absorbed joiner now lead into the grown group;
//!    they register with it (their least edges are unchanged: the group is alive) and the group
//!    absorbs them the same way, below its *structural* limit `slim` (the least `lim` of its
//!    members: edges to anything but their targets and joiners) and the running `limj` of
//!    what it absorbs. Without them a region grows along a chain of least edges one level per
//!    round; with them a round resolves several levels of the least-edge tree (text_motion
//!    1080p at k = 500: 304 rounds → 56 with 16 sub-rounds; a variant that ran a sequential
//!    Kruskal over each whole least-edge tree needed 55, but one thread per tree is hopeless
//!    on the GPU with trees of 60 000 components).
//!
//! # Phases
//! 1. **zero** (rounds `1..=32`): Borůvka chains along zero-weight edges. They always merge
//!    (every threshold is positive when `k > 0`) and leave `Int = 0`, and Kruskal takes them
//!    first, so this is exact; it removes the long tie chains of flat areas.
//! 2. **merge**: exact rounds until one changes nothing.
//! 3. **min_size**: scikit-image's second pass (an edge merges when either side is smaller than
//!    `min_size`) decided by the same exact rounds, with "alive" = an edge with a small side
//!    and pairs always merging.
//!
//! The labels equal [`kruskal_keys`] (sequential Kruskal and `min_size` pass over the same keys;
//! property-tested), which on the sample images equals scikit-image's labels up to the order
//! of exactly equal weights.

use rayon::prelude::*;

use super::cpu::{colour_distance_f64, threshold_f32};
use super::{SegmentHierarchy, SegmentOutput, SegmentParams, raster_relabel};
use crate::image::{Image, ImageView};
use crate::ops::OpError;
use crate::ops::blur::cpu::{blur_f64, pack_gray, pack_rgb};

/// No edge.
pub const NO_EDGE: u64 = u64::MAX;
/// No component.
pub const NONE: u32 = u32::MAX;
/// Joiners a group considers per round (the kernels' per-thread buffer).
pub const JOIN_BUFFER: usize = 64;

/// Forward edges of pixel `p = (x, y)`, as `dir`: 0 right `(x+1, y)`, 1 down `(x, y+1)`,
/// 2 down-right `(x+1, y+1)`, 3 down-left `(x-1, y+1)`. Edge id = `4 p + dir`.
pub const DIRS: [(i64, i64); 4] = [(1, 0), (0, 1), (1, 1), (-1, 1)];

/// The four forward edge weights of every pixel, scikit-image's `f64` Euclidean distances of
/// the `f64`-smoothed colours (`f64::INFINITY` where the neighbour is outside the image).
#[must_use]
pub fn edge_weights(s: &[f64], width: usize, height: usize, channels: usize) -> Vec<[f64; 4]> {
    (0..width * height)
        .into_par_iter()
        .map(|p| {
            let (x, y) = ((p % width) as i64, (p / width) as i64);
            let mut w4 = [f64::INFINITY; 4];
            for (d, &(dx, dy)) in DIRS.iter().enumerate() {
                let (nx, ny) = (x + dx, y + dy);
                if nx >= 0 && nx < width as i64 && ny < height as i64 {
                    w4[d] = colour_distance_f64(s, channels, (ny as usize) * width + nx as usize, p);
                }
            }
            w4
        })
        .collect()
}

/// Bits of the edge id in a key for `n` pixels: `ceil(log2(4 n))` (at least 1).
#[must_use]
pub fn eid_bits(n: usize) -> u32 {
    let m = (4 * n).max(2) as u64;
    64 - (m - 1).leading_zeros()
}

/// The packed key of an edge: the top `64 - e` bits of the (non-negative) `f64` weight's bits,
/// then the edge id in the low `e` bits. Keys order edges by weight (weights closer than
/// ~2^-(63-e) relative tie and fall back to the id), then by id: a total order.
#[inline]
#[must_use]
pub fn edge_key(w: f64, eid: u32, e: u32) -> u64 {
    ((w.to_bits() >> (e - 1)) << e) | u64::from(eid)
}

/// The edge id of a key.
#[inline]
#[must_use]
pub fn key_eid(key: u64, e: u32) -> u32 {
    (key & ((1u64 << e) - 1)) as u32
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

/// Calls `f(q, key)` for the 8 neighbours `q` of pixel `p` (`e` edge-id bits).
#[inline]
fn for_neighbours(p: usize, width: usize, height: usize, w4: &[[f64; 4]], e: u32, mut f: impl FnMut(usize, u64)) {
    let (x, y) = (p % width, p / width);
    let (left, right, up, down) = (x > 0, x + 1 < width, y > 0, y + 1 < height);
    let mut e = |q: usize, owner: usize, dir: usize| f(q, edge_key(w4[owner][dir], (owner * 4 + dir) as u32, e));
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

/// What a round works on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Exact Kruskal rounds with the Felzenszwalb predicate.
    Merge,
    /// Exact rounds of scikit-image's `min_size` pass: an edge merges when either side is
    /// smaller than `min_size` (edges between two large components are dead).
    MinSize,
    /// Borůvka chains along zero-weight edges.
    Zero,
}

/// Absorption passes per exact round (the first plus `SUB_ROUNDS - 1` sub-rounds in which the
/// joiners of absorbed joiners join the grown group). In the model, rounds on 1080p frames
/// fall 2-5x from 1 to 16 passes; on the H100 4 passes were faster than 8 (every pass costs
/// launches and waits for its slowest group; BENCHMARKS.md).
pub const SUB_ROUNDS: usize = 4;

/// Rounds reserved for the zero-weight phase (global round numbers `1..=ZERO_ROUNDS`).
pub const ZERO_ROUNDS: u32 = 32;

struct State<'a> {
    width: usize,
    height: usize,
    w4: &'a [[f64; 4]],
    ebits: u32,
    k: f64,
    min_size: u32,
    comp: Vec<u32>,
    link: Vec<u32>,
    size: Vec<u32>,
    cint: Vec<f64>,
    done: Vec<bool>,
    best: Vec<u64>,
    tkey: Vec<u64>,
    target: Vec<u32>,
    lim: Vec<u64>,
    limj: Vec<u64>,
    gok: Vec<bool>,
    gsize: Vec<u32>,
    gint: Vec<f64>,
    joiners: Vec<Vec<u32>>,
    parent: Vec<u32>,
    round: Vec<u16>,
    /// Structural limit of a group: the least key from its members to components other than
    /// their targets and their joiners (kept across sub-rounds).
    slim: Vec<u64>,
}

impl State<'_> {
    /// scikit-image's threshold `f32(Int + k/|C|)`.
    fn thr(&self, v: usize) -> f32 {
        threshold_f32(self.cint[v], self.k, self.size[v] as usize)
    }

    /// The exact `f64` weight of an edge key.
    fn weight(&self, key: u64) -> f64 {
        let eid = key_eid(key, self.ebits);
        self.w4[(eid >> 2) as usize][(eid & 3) as usize]
    }

    fn other_end(&self, key: u64, v: usize) -> usize {
        let (a, b) = edge_endpoints(key_eid(key, self.ebits), self.width);
        let ca = self.comp[a] as usize;
        if ca == v { self.comp[b] as usize } else { ca }
    }

    /// Whether the edge `key` from component `c` to `e != c` is alive in `mode`.
    fn alive(&self, mode: Mode, c: usize, e: usize, key: u64) -> bool {
        match mode {
            Mode::Merge => !self.done[e],
            Mode::MinSize => !self.done[e] && (self.size[c] < self.min_size || self.size[e] < self.min_size),
            Mode::Zero => self.weight(key) == 0.0,
        }
    }

    /// Step 1: relabel through `link`, then the least alive key of every active component.
    fn least_edges(&mut self, mode: Mode) {
        for i in 0..self.comp.len() {
            let mut c = self.comp[i] as usize;
            while self.link[c] as usize != c {
                c = self.link[c] as usize;
            }
            self.comp[i] = c as u32;
        }
        let (w, h, w4, eb) = (self.width, self.height, self.w4, self.ebits);
        let this = &*self;
        let keys: Vec<u64> = (0..this.comp.len())
            .into_par_iter()
            .map(|p| {
                let c = this.comp[p] as usize;
                let mut best = NO_EDGE;
                if mode == Mode::Zero || !this.done[c] {
                    for_neighbours(p, w, h, w4, eb, |q, key| {
                        let e = this.comp[q] as usize;
                        if e != c && this.alive(mode, c, e, key) {
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

    /// Step 2: targets; a component without alive edges is done (exact modes). Returns the
    /// number of components found done.
    fn targets(&mut self, roots: &[usize], mode: Mode) -> u32 {
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
            if mode != Mode::Zero && self.done[v] {
                continue;
            }
            if key == NO_EDGE {
                if mode != Mode::Zero {
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

    /// One exact round (merge or `min_size` pass); returns (events, merges).
    fn exact_round(&mut self, mode: Mode, r: u16) -> (u32, u32) {
        let n = self.comp.len();
        self.least_edges(mode);
        let roots: Vec<usize> = (0..n).filter(|&v| self.comp[v] as usize == v).collect();
        let mut events = self.targets(&roots, mode);
        let mut merges = 0;
        // Step 3: limits.
        for p in 0..n {
            let c = self.comp[p] as usize;
            let t = self.target[c];
            if t == NONE {
                continue;
            }
            let (mut lim, mut limj) = (self.lim[c], self.limj[c]);
            let this = &*self;
            for_neighbours(p, this.width, this.height, this.w4, this.ebits, |q, key| {
                let e = this.comp[q] as usize;
                if e != c && e as u32 != t && this.alive(mode, c, e, key) {
                    limj = limj.min(key);
                    if this.target[e] as usize != c {
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
            let w = self.weight(self.tkey[v]);
            let (tv, tt) = (self.thr(v), self.thr(t));
            // min_size: the pair's edge is alive, so it merges.
            if mode == Mode::MinSize || w < f64::from(tv.min(tt)) {
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
                    if w >= f64::from(ta) {
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
        // Step 5: groups absorb joiners in key order below their limit; then sub-rounds:
        // joiners of absorbed joiners join the grown group the same way, without recomputing
        // least edges (they are unchanged while the group is alive).
        for sub in 0..SUB_ROUNDS {
            if sub > 0 {
                for &v in &roots {
                    self.joiners[v].clear();
                }
                let mut any = false;
                for &x in &roots {
                    if self.link[x] as usize != x || self.done[x] || self.gok[x] || self.target[x] == NONE {
                        continue;
                    }
                    let mut t = self.target[x] as usize;
                    while self.link[t] as usize != t {
                        t = self.link[t] as usize;
                    }
                    if t == x || !self.gok[t] || self.done[t] || self.tkey[x] >= self.slim[t] {
                        continue;
                    }
                    self.joiners[t].push(x as u32);
                    any = true;
                }
                if !any {
                    break;
                }
            }
            let (e, m) = self.absorb(mode, r, &roots, sub == 0);
            events += e;
            merges += m;
            if m == 0 {
                break;
            }
        }
        (events, merges)
    }


    /// Step 5 (and its sub-rounds): every group absorbs its registered joiners in key order
    /// below its limit. Returns (events, merges).
    fn absorb(&mut self, mode: Mode, r: u16, roots: &[usize], first: bool) -> (u32, u32) {
        let (mut events, mut merges) = (0, 0);
        for &g in roots {
            if !self.gok[g] || self.link[g] as usize != g {
                continue;
            }
            if self.done[g] {
                continue;
            }
            let t = self.target[g] as usize;
            let merged = first && self.link[t] as usize == g && t != g;
            let mut slim = if first { self.lim[g] } else { self.slim[g] };
            if merged {
                slim = slim.min(self.lim[t]);
            }
            let mut limit = slim;
            let mut buf: Vec<(u64, u32)> = Vec::with_capacity(JOIN_BUFFER);
            let centres: &[usize] = if merged { &[g, t] } else { &[g] };
            for &c in centres {
                for &x in &self.joiners[c] {
                    buffer_insert(&mut buf, &mut limit, self.tkey[x as usize], x);
                }
            }
            let (mut sz, mut it) = if first { (self.gsize[g], self.gint[g]) } else { (self.size[g], self.cint[g]) };
            for (key, x) in buf {
                if key > limit {
                    break;
                }
                let x = x as usize;
                let w = self.weight(key);
                let tl = threshold_f32(it, self.k, sz as usize);
                let tx = self.thr(x);
                let join = match mode {
                    Mode::MinSize => sz < self.min_size || self.size[x] < self.min_size,
                    _ => w < f64::from(tl.min(tx)),
                };
                if join {
                    self.link[x] = g as u32;
                    sz += self.size[x];
                    it = it.max(w.max(self.cint[x]));
                    limit = limit.min(self.limj[x]);
                    slim = slim.min(self.lim[x]);
                    self.parent[x] = g as u32;
                    self.round[x] = r;
                    events += 1;
                    merges += 1;
                } else if mode == Mode::Merge {
                    if w >= f64::from(tx) {
                        self.done[x] = true;
                        events += 1;
                    }
                    if w >= f64::from(tl) {
                        self.done[g] = true;
                        events += 1;
                        break;
                    }
                }
            }
            self.size[g] = sz;
            self.cint[g] = it;
            self.slim[g] = slim;
        }
        (events, merges)
    }

    /// One round of Borůvka chains along zero-weight edges; returns the links.
    fn zero_round(&mut self, r: u16) -> u32 {
        let n = self.comp.len();
        self.least_edges(Mode::Zero);
        let roots: Vec<usize> = (0..n).filter(|&v| self.comp[v] as usize == v).collect();
        self.targets(&roots, Mode::Zero);
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
    threshold_f32(0.0, params.scale / 255.0, n.max(1)) > 0.0
}

/// The segmentation of a smoothed interleaved `f64` image (the GPU's computation).
pub fn boruvka_from_smoothed(
    smoothed: &[f64],
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
        ebits: eid_bits(n),
        k: params.scale / 255.0,
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
        slim: vec![NO_EDGE; n],
    };
    let mut level_rounds = Vec::new();
    let (mut rounds, mut capped) = (0, false);
    if zero_phase(params, n) {
        for r in 1..=ZERO_ROUNDS {
            if st.zero_round(r as u16) == 0 {
                break;
            }
            rounds += 1;
            level_rounds.push(r as u16);
        }
    }
    for m in 1..=params.max_rounds {
        let r = ZERO_ROUNDS + m;
        let (events, merges) = st.exact_round(Mode::Merge, r as u16);
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
        st.done.iter_mut().for_each(|d| *d = false);
        for m in 1..=params.max_min_size_rounds {
            let r = ZERO_ROUNDS + params.max_rounds + m;
            let (events, merges) = st.exact_round(Mode::MinSize, r as u16);
            if events == 0 {
                break;
            }
            if merges > 0 {
                ms_rounds += 1;
                level_rounds.push(r as u16);
            }
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
        has_rounds: true,
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
    let s = blur_f64(data, width, height, channels, &params.blur())?;
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

/// Sequential Kruskal over the same weights and key order as the rounds, with scikit-image's
/// predicate, then its `min_size` pass over the same order (what the rounds reproduce). Labels
/// in raster order.
#[must_use]
pub fn kruskal_keys(w4: &[[f64; 4]], width: usize, height: usize, k: f64, min_size: u32) -> Vec<u32> {
    let n = width * height;
    let e = eid_bits(n);
    let mut keys: Vec<u64> = Vec::with_capacity(4 * n);
    for (p, w) in w4.iter().enumerate() {
        for (d, &wd) in w.iter().enumerate() {
            if wd.is_finite() {
                keys.push(edge_key(wd, (p * 4 + d) as u32, e));
            }
        }
    }
    keys.par_sort_unstable();
    let mut parent: Vec<usize> = (0..n).collect();
    let mut size = vec![1u32; n];
    let mut cint = vec![0f64; n];
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let weight = |key: u64| {
        let eid = key_eid(key, e);
        w4[(eid >> 2) as usize][(eid & 3) as usize]
    };
    for &key in &keys {
        let (a, b) = edge_endpoints(key_eid(key, e), width);
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra == rb {
            continue;
        }
        let w = weight(key);
        let ta = threshold_f32(cint[ra], k, size[ra] as usize);
        let tb = threshold_f32(cint[rb], k, size[rb] as usize);
        if w < f64::from(ta.min(tb)) {
            parent[rb] = ra;
            size[ra] += size[rb];
            cint[ra] = cint[ra].max(cint[rb]).max(w);
        }
    }
    if min_size > 1 {
        for &key in &keys {
            let (a, b) = edge_endpoints(key_eid(key, e), width);
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            if ra != rb && (size[ra] < min_size || size[rb] < min_size) {
                parent[rb] = ra;
                size[ra] += size[rb];
            }
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
        let mut limit = 10_000u64;
        let n = JOIN_BUFFER as u64 + 8;
        for k in (0..n).rev().map(|i| i * 10 + 5) {
            buffer_insert(&mut buf, &mut limit, k, k as u32);
        }
        buffer_insert(&mut buf, &mut limit, 20_000, 1);
        assert_eq!(buf.len(), JOIN_BUFFER);
        assert_eq!(buf[0].0, 5);
        assert_eq!(buf[JOIN_BUFFER - 1].0, (JOIN_BUFFER as u64 - 1) * 10 + 5);
        assert_eq!(limit, JOIN_BUFFER as u64 * 10 + 5);
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
        /// The rounds decide exactly what sequential Kruskal and the sequential `min_size` pass
        /// decide (same keys), ties and all, on random images with few grey levels.
        #[test]
        fn rounds_equal_kruskal(
            w in 1usize..24, h in 1usize..24, channels in prop::sample::select(vec![1usize, 3]),
            levels in 2u32..9, seed in any::<u64>(),
            scale in prop::sample::select(vec![0.0, 3.0, 30.0, 300.0, 3000.0]),
            sigma in prop::sample::select(vec![0.0, 0.5, 0.8]),
            min_size in prop::sample::select(vec![0usize, 2, 5, 20]),
        ) {
            let mut st = seed;
            let data: Vec<u8> = (0..w * h * channels).map(|_| {
                st = st.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (((st >> 33) as u32 % levels) * 255 / (levels - 1)) as u8
            }).collect();
            let p = SegmentParams { scale, sigma, min_size, max_rounds: 4000, max_min_size_rounds: 4000, ..SegmentParams::default() };
            let s = blur_f64(&data, w, h, channels, &p.blur()).unwrap();
            let (out, hier) = boruvka_from_smoothed(&s, w, h, channels, &p).unwrap();
            let k = kruskal_keys(&edge_weights(&s, w, h, channels), w, h, p.scale / 255.0, min_size as u32);
            prop_assert_eq!(out.labels.data(), &k[..]);
            prop_assert!(!out.capped);
            let (top, _) = hier.labels_at(out.level).unwrap();
            prop_assert_eq!(top, out.labels);
        }
    }
}
