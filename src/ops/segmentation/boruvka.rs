//! A sequential CPU model of the GPU rounds (`kernels/segmentation.cu`): the same smoothing, edge
//! weights, packed keys, rounds, decisions, statistics and hierarchy, so the GPU result equals
//! this one bit for bit. It is also a CPU fallback that yields the hierarchy.
//!
//! # Arithmetic
//! scikit-image's: `f64` smoothing ([`blur_f64`], bit-identical to SciPy on the samples), `f64`
//! Euclidean weights, thresholds `f32(Int + k/|C|)` compared with the `f64` weight. Keys order
//! the edges: the top `64 - e` bits of the weight's `f64` bits, then the edge id (`e` =
//! `eid_bits`, 23 bits at 1080p), a total order that follows the weights to ~2^-30 relative.
//! (An `f32` pipeline was tried first; on `text_motion.jpg` at scale 500 its rounding alone
//! changed 35 of 160 segments — the predicate amplifies tiny differences.)
//!
//! # Why the result is exact although the rounds are parallel
//! Felzenszwalb's predicate `w < Int(C) + k/|C|` depends on the order edges are processed in:
//! plain Borůvka (ETH report §3.1: every component merges along its least edge) evaluates it
//! out of Kruskal's order and whole frames collapse; even Kruskal with edges reordered inside
//! 1 % weight buckets drops to ASA 0.91. Two facts make exact parallel rounds possible:
//! 1. **Freezing.** A component `C` whose threshold an edge fails (`w >= Int(C) + k/|C|`) never
//!    merges again: its threshold only changes when it merges, and every later edge is at least
//!    as heavy. Between freezes the process is plain single linkage, whose merges do not depend
//!    on the order (scikit-image's loop merges along every edge of the minimum spanning forest
//!    of the components still alive).
//! 2. **Caterpillars.** Take the least alive edge of every component (Borůvka's step 1 of the
//!    paper's Algorithm 1); they form trees, each with one mutual pair `(A, B)` at its root
//!    (the paper's Algorithm 4, cycle removal), and keys fall strictly towards the pair. Let
//!    `x(T)` be the least alive edge from a tree `T` to another tree. Every member `C` of `T`
//!    whose least edge is below `x(T)` (the *core*) joins the pair's component exactly when
//!    Kruskal reaches that edge, after every core member with a smaller one, and `C` itself is
//!    unchanged until then: nothing else touches `C` or the growing component below `x(T)`. So
//!    sorting the core by key gives Kruskal's own sequence of merges around `T` — a caterpillar:
//!    `|R|` is a prefix sum of the members' sizes and `Int(R)` the previous key's weight — and
//!    the predicate is evaluated at every step with Kruskal's own statistics. The prefix before
//!    the first failure merges; at the failure the failing side(s) freeze; the rest of the tree
//!    waits for the next round.
//!
//! # One round (`r`), model of the kernels
//! 1. **least alive edge** of every active component (`atomicMin` per component on the GPU);
//!    alive = the far side is another component and not frozen (`min_size` phase: and not both
//!    sides at least `min_size`).
//! 2. **targets**: the far component of that edge; a component without alive edges is done.
//! 3. **trees**: follow targets to the mutual pair; the tree's id is the pair's smaller
//!    component id (which the whole core merges into).
//! 4. **exits**: `x(T)`, the least alive edge from a member to a component of another tree.
//! 5. **caterpillars**: per tree, the core sorted by `(key, id)` (the pair first, smaller id
//!    first), prefix sizes, the predicate at each step, merges up to the first failure. (The
//!    GPU's core step joins a tree's members whose least edge has weight 0 at once, at any
//!    scale where `f32(k / n) > 0`: each such step passes whatever the order, they come first,
//!    and `Int(R)` after them is 0, so the merges are these.)
//!
//! **Merge round 1** (every component a single pixel) decides only the trees that lie inside
//! one `TILE_W` x `TILE_H` tile and have at most `TILE_TREE` members: the GPU decides
//! them in one kernel from shared memory (`segmentation_tiles`); the others wait for round 2. That
//! keeps the result exact: whichever trees a round decides, every component it leaves is
//! Kruskal's just before its least alive edge, which is all the next round needs. When round 1
//! decides nothing (every tree crosses a tile), round 2 still runs.
//!
//! The `min_size` phase (scikit-image's second pass: an edge merges when either side is smaller
//! than `min_size`) runs the same rounds with that predicate, and one more fact:
//! 3. **Sinks.** A small component `S` is unchanged until its least edge (every edge touching
//!    it is one of its own) and still small then, so it merges along that edge, whatever the
//!    order. A large component (at least `min_size`) stays large, so it takes no edge of its own:
//!    when Kruskal reaches an edge of it, that edge is either the least edge of the small
//!    component then on its other side, or dead (large on both sides). So only small components
//!    take a least edge; a chain of targets ends in a small mutual pair or in a large component,
//!    a *sink*. A sink's tree merges whole in one round: every member is small when its edge
//!    comes, and the sink is large all along, so no exit bounds it (the sink leads its
//!    caterpillar with key 0). A tree that ends in a small pair stops at its exit as in the merge
//!    phase (whether it is still small when the exit comes decides that edge). Nothing fails or
//!    freezes. 1080p photographs need 1-2 `min_size` rounds this way instead of 5-9.
//!
//! In the CPU model on 1080p tiled samples (sigma 0.8, before `min_size`) this takes 20-23
//! rounds where the previous exact rounds (pairs, joiners below limits, sub-rounds) took 39-66
//! and Kruskal's sequential order ~2 million steps; the labels equal [`kruskal_keys`]
//! (sequential Kruskal and `min_size` pass over the same keys; property-tested), which on the
//! sample images equals scikit-image's labels up to the order of exactly equal weights.

use rayon::prelude::*;

use super::cpu::{colour_distance_f64, threshold_f32};
use super::{SegmentationHierarchy, SegmentationOutput, SegmentationParams, raster_relabel};
use crate::image::{Image, ImageView};
use crate::ops::OpError;
use crate::ops::blur::cpu::{blur_f64, pack_gray, pack_rgb};

/// No edge.
pub(crate) const NO_EDGE: u64 = u64::MAX;
/// Tile width of merge round 1 (`SEG_TILE_W` of `segmentation_tiles`).
pub(crate) const TILE_W: usize = 32;
/// Tile height of merge round 1 (`SEG_TILE_H`).
pub(crate) const TILE_H: usize = 16;
/// Most members of a tree that merge round 1 decides (`SEG_TILE_TREE`).
pub(crate) const TILE_TREE: usize = 32;
/// No component.
pub const NONE: u32 = u32::MAX;

/// Forward edges of pixel `p = (x, y)`, as `dir`: 0 right `(x+1, y)`, 1 down `(x, y+1)`,
/// 2 down-right `(x+1, y+1)`, 3 down-left `(x-1, y+1)`. Edge id = `4 p + dir`.
pub(crate) const DIRS: [(i64, i64); 4] = [(1, 0), (0, 1), (1, 1), (-1, 1)];

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
                    w4[d] =
                        colour_distance_f64(s, channels, (ny as usize) * width + nx as usize, p);
                }
            }
            w4
        })
        .collect()
}

/// Bits of the edge id in a key for `n` pixels: `ceil(log2(4 n))` (at least 1).
#[must_use]
pub(crate) fn eid_bits(n: usize) -> u32 {
    let m = (4 * n).max(2) as u64;
    64 - (m - 1).leading_zeros()
}

/// The packed key of an edge: the top `64 - e` bits of the (non-negative) `f64` weight's bits,
/// then the edge id in the low `e` bits. Keys order edges by weight (weights closer than
/// ~2^-(63-e) relative tie and fall back to the id), then by id: a total order.
#[inline]
#[must_use]
pub(crate) fn edge_key(w: f64, eid: u32, e: u32) -> u64 {
    ((w.to_bits() >> (e - 1)) << e) | u64::from(eid)
}

/// The edge id of a key.
#[inline]
#[must_use]
pub(crate) fn key_eid(key: u64, e: u32) -> u32 {
    (key & ((1u64 << e) - 1)) as u32
}

/// Endpoints `(p, q)` of edge id `eid` on a grid of `width` columns.
#[inline]
#[must_use]
pub(crate) fn edge_endpoints(eid: u32, width: usize) -> (usize, usize) {
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
fn for_neighbours(
    p: usize,
    width: usize,
    height: usize,
    w4: &[[f64; 4]],
    e: u32,
    mut f: impl FnMut(usize, u64),
) {
    let (x, y) = (p % width, p / width);
    let (left, right, up, down) = (x > 0, x + 1 < width, y > 0, y + 1 < height);
    let mut e = |q: usize, owner: usize, dir: usize| {
        f(q, edge_key(w4[owner][dir], (owner * 4 + dir) as u32, e))
    };
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

/// What a round decides.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Felzenszwalb's predicate; a side whose own threshold fails freezes.
    Merge,
    /// scikit-image's `min_size` pass: an edge merges when either side is smaller than
    /// `min_size` (edges between two large components are dead).
    MinSize,
}

/// Events (merges and newly frozen components) and merges of one round.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    events: u32,
    merges: u32,
}

struct State<'a> {
    width: usize,
    height: usize,
    w4: &'a [[f64; 4]],
    ebits: u32,
    k: f64,
    min_size: u32,
    /// Component of every pixel (resolved through `link` at the start of each round).
    comp: Vec<u32>,
    /// Component links: a component is named by one of its pixels; roots link to themselves.
    link: Vec<u32>,
    size: Vec<u32>,
    cint: Vec<f64>,
    /// Frozen (merge phase): no later edge can pass this component's threshold.
    done: Vec<bool>,
    best: Vec<u64>,
    target: Vec<u32>,
    tkey: Vec<u64>,
    tree: Vec<u32>,
    exit: Vec<u64>,
    parent: Vec<u32>,
    round: Vec<u16>,
}

impl State<'_> {
    /// The exact `f64` weight of an edge key.
    fn weight(&self, key: u64) -> f64 {
        let eid = key_eid(key, self.ebits);
        self.w4[(eid >> 2) as usize][(eid & 3) as usize]
    }

    fn find(&self, mut x: usize) -> usize {
        while self.link[x] as usize != x {
            x = self.link[x] as usize;
        }
        x
    }

    /// Whether component `c` looks for its least alive edge: merge rounds, while it is not
    /// frozen; `min_size` rounds, while it is smaller than `min_size` (a large component is a
    /// sink: see [`State::sink`]).
    fn active(&self, mode: Mode, c: usize) -> bool {
        match mode {
            Mode::Merge => !self.done[c],
            Mode::MinSize => self.size[c] < self.min_size,
        }
    }

    /// `min_size` rounds: a component of at least `min_size` pixels never takes an edge of its
    /// own (when Kruskal reaches one of its edges, that edge is the least edge of the small
    /// component then on the other side, or dead); it only absorbs the trees that lead into it.
    fn sink(&self, mode: Mode, c: usize) -> bool {
        mode == Mode::MinSize && self.size[c] >= self.min_size
    }

    /// Whether the edge from component `c` to `e` is alive in `mode`.
    fn alive(&self, mode: Mode, c: usize, e: usize) -> bool {
        e != c
            && match mode {
                Mode::Merge => !self.done[e],
                Mode::MinSize => self.size[c] < self.min_size || self.size[e] < self.min_size,
            }
    }

    /// Per component, the least key over its pixels of `edge(p, c)` (the least qualifying
    /// edge of pixel `p` in component `c`, or [`NO_EDGE`]), into `out[c]`.
    fn least_per_component(&self, out: &mut [u64], edge: impl Fn(usize, usize) -> u64 + Sync) {
        let keys: Vec<u64> = (0..self.comp.len())
            .into_par_iter()
            .map(|p| edge(p, self.comp[p] as usize))
            .collect();
        out.iter_mut().for_each(|b| *b = NO_EDGE);
        for (p, key) in keys.into_iter().enumerate() {
            let c = self.comp[p] as usize;
            out[c] = out[c].min(key);
        }
    }

    fn other_end(&self, key: u64, v: usize) -> usize {
        let (a, b) = edge_endpoints(key_eid(key, self.ebits), self.width);
        let ca = self.comp[a] as usize;
        if ca == v { self.comp[b] as usize } else { ca }
    }

    /// One round (numbered `r` in the hierarchy).
    fn round(&mut self, mode: Mode, r: u16) -> Counts {
        let n = self.comp.len();
        let mut counts = Counts::default();
        // 1. Relabel, then the least alive edge of every active component.
        for p in 0..n {
            self.comp[p] = self.find(self.comp[p] as usize) as u32;
        }
        let (w, h, w4, eb) = (self.width, self.height, self.w4, self.ebits);
        let mut best = std::mem::take(&mut self.best);
        self.least_per_component(&mut best, |p, c| {
            let mut b = NO_EDGE;
            if self.active(mode, c) {
                for_neighbours(p, w, h, w4, eb, |q, key| {
                    if key < b && self.alive(mode, c, self.comp[q] as usize) {
                        b = key;
                    }
                });
            }
            b
        });
        self.best = best;
        // 2. Targets of the roots; a root without alive edges is done.
        let roots: Vec<usize> = (0..n).filter(|&v| self.link[v] as usize == v).collect();
        for &v in &roots {
            self.target[v] = NONE;
            self.tree[v] = NONE;
            if !self.active(mode, v) {
                continue;
            }
            let key = self.best[v];
            if key == NO_EDGE {
                if mode == Mode::Merge {
                    self.done[v] = true;
                    counts.events += 1;
                }
                continue;
            }
            self.tkey[v] = key;
            self.target[v] = self.other_end(key, v) as u32;
        }
        // 3. Trees: follow targets to the mutual pair; the tree is named by its smaller id.
        self.trees(mode, &roots);
        // 4. Exits: the least alive edge from each tree to another tree.
        let mut exit = std::mem::take(&mut self.exit);
        self.least_per_component(&mut exit, |p, c| {
            let mut b = NO_EDGE;
            if self.target[c] != NONE && !self.sink(mode, self.tree[c] as usize) {
                let t = self.tree[c];
                for_neighbours(p, w, h, w4, eb, |q, key| {
                    let e = self.comp[q] as usize;
                    if key < b && self.alive(mode, c, e) && self.tree[e] != t {
                        b = key;
                    }
                });
            }
            b
        });
        // `exit` is per component so far; reduce it to the trees.
        let mut tree_exit = vec![NO_EDGE; n];
        for &v in &roots {
            if self.target[v] != NONE {
                let t = self.tree[v] as usize;
                tree_exit[t] = tree_exit[t].min(exit[v]);
            }
        }
        self.exit = exit;
        // Merge round 1 decides only the trees inside one tile (the others wait for round 2).
        let local = if mode == Mode::Merge && r == 1 {
            self.tile_local_trees(&roots)
        } else {
            Vec::new()
        };
        // 5. Caterpillars: each tree's core in key order.
        let core = self.cores(mode, &roots, &tree_exit, &local);
        for members in core.chunk_by(|a, b| a.0 == b.0) {
            let c = self.caterpillar(mode, members, r);
            counts.events += c.events;
            counts.merges += c.merges;
        }
        counts
    }

    /// Step 3 of a round: each root with a target gets its tree, found by following targets to
    /// a sink or the mutual pair (named by the pair's smaller id).
    fn trees(&mut self, mode: Mode, roots: &[usize]) {
        for &v in roots {
            if self.target[v] == NONE {
                continue;
            }
            let mut x = v;
            loop {
                let t = self.target[x] as usize;
                if self.sink(mode, t) {
                    self.tree[v] = t as u32;
                    break;
                }
                if self.target[t] as usize == x {
                    self.tree[v] = x.min(t) as u32;
                    break;
                }
                x = t;
            }
        }
    }

    /// Per tree id, whether merge round 1 decides it: all its members in its tile and at most
    /// TILE_TREE of them (`segmentation_tiles` works on a tile in shared memory).
    fn tile_local_trees(&self, roots: &[usize]) -> Vec<bool> {
        let (n, w) = (self.comp.len(), self.width);
        let tile = |v: usize| ((v % w) / TILE_W, (v / w) / TILE_H);
        let mut members = vec![0usize; n];
        let mut local = vec![true; n];
        for &v in roots {
            if self.target[v] != NONE {
                let t = self.tree[v] as usize;
                members[t] += 1;
                local[t] &= tile(v) == tile(t);
            }
        }
        for (t, l) in local.iter_mut().enumerate() {
            *l &= members[t] <= TILE_TREE;
        }
        local
    }

    /// The round's core members as `(tree, key, id)`, sorted: the roots whose least edge is
    /// below their tree's exit (`tree_exit`), of the trees `local` allows (empty: all). A
    /// sink's tree has no exit (the sink is at least min_size all along, so when its members
    /// join does not matter); the sink leads its caterpillar with key 0.
    fn cores(
        &self,
        mode: Mode,
        roots: &[usize],
        tree_exit: &[u64],
        local: &[bool],
    ) -> Vec<(u32, u64, u32)> {
        let mut core: Vec<(u32, u64, u32)> = roots
            .iter()
            .filter(|&&v| self.target[v] != NONE && self.tkey[v] < tree_exit[self.tree[v] as usize])
            .filter(|&&v| local.is_empty() || local[self.tree[v] as usize])
            .map(|&v| (self.tree[v], self.tkey[v], v as u32))
            .collect();
        let mut sinks: Vec<u32> = core
            .iter()
            .map(|m| m.0)
            .filter(|&t| self.sink(mode, t as usize))
            .collect();
        sinks.sort_unstable();
        sinks.dedup();
        core.extend(sinks.into_iter().map(|t| (t, 0, t)));
        core.sort_unstable();
        core
    }

    /// Merges one tree's core (`(tree, key, id)` sorted by key then id: the pair first, the
    /// tree's own id first) into the tree's id up to the first step the predicate rejects.
    fn caterpillar(&mut self, mode: Mode, members: &[(u32, u64, u32)], r: u16) -> Counts {
        // The tree's id (the pair's smaller root, or the sink), unless a member's least edge has
        // key 0 and a smaller id than the sink (then the sink joins that member: the same
        // partition under another name, as the GPU's sort does it).
        let a = members[0].2 as usize;
        debug_assert!(members[0].0 as usize == a || (members[0].1 == 0 && mode == Mode::MinSize));
        let mut counts = Counts::default();
        let (mut size, mut int) = (self.size[a], self.cint[a]);
        let mut merged = 0;
        for &(_, key, c) in &members[1..] {
            let c = c as usize;
            let w = self.weight(key);
            let (ok_c, ok_r) = match mode {
                Mode::Merge => (
                    w < f64::from(threshold_f32(self.cint[c], self.k, self.size[c] as usize)),
                    w < f64::from(threshold_f32(int, self.k, size as usize)),
                ),
                Mode::MinSize => {
                    let ok = size < self.min_size || self.size[c] < self.min_size;
                    (ok, ok)
                }
            };
            if !(ok_c && ok_r) {
                if mode == Mode::Merge {
                    for (v, ok) in [(c, ok_c), (a, ok_r)] {
                        if !ok {
                            self.done[v] = true;
                            counts.events += 1;
                        }
                    }
                }
                break;
            }
            self.link[c] = a as u32;
            self.parent[c] = a as u32;
            self.round[c] = r;
            size += self.size[c];
            int = w;
            merged += 1;
        }
        self.size[a] = size;
        if mode == Mode::Merge {
            self.cint[a] = int;
        }
        counts.events += merged;
        counts.merges += merged;
        counts
    }
}

/// The segmentation of a smoothed interleaved `f64` image (the GPU's computation). Merge
/// rounds are numbered `1..=max_rounds` in the hierarchy, `min_size` rounds after them.
pub(crate) fn boruvka_from_smoothed(
    smoothed: &[f64],
    width: usize,
    height: usize,
    channels: usize,
    params: &SegmentationParams,
) -> Result<(SegmentationOutput, SegmentationHierarchy), OpError> {
    params.validate()?;
    let n = width * height;
    if n >= (1 << 30) {
        return Err(OpError::Unsupported(format!(
            "{width}x{height}: edge ids need 4 * pixels < 2^32"
        )));
    }
    let w4 = edge_weights(smoothed, width, height, channels);
    let ids: Vec<u32> = (0..n as u32).collect();
    let mut st = State {
        width,
        height,
        w4: &w4,
        ebits: eid_bits(n),
        k: params.k(),
        min_size: params.min_size as u32,
        comp: ids.clone(),
        link: ids.clone(),
        size: vec![1; n],
        cint: vec![0.0; n],
        done: vec![false; n],
        best: vec![NO_EDGE; n],
        target: vec![NONE; n],
        tkey: vec![NO_EDGE; n],
        tree: vec![NONE; n],
        exit: vec![NO_EDGE; n],
        parent: ids,
        round: vec![u16::MAX; n],
    };
    let mut level_rounds = Vec::new();
    let (mut rounds, mut capped) = (0, false);
    for r in 1..=params.max_rounds {
        let c = st.round(Mode::Merge, r as u16);
        // Round 1 leaves the trees that cross tiles to round 2: deciding nothing, it still
        // leaves work.
        if c.events == 0 && r > 1 {
            break;
        }
        if c.merges > 0 {
            rounds += 1;
            level_rounds.push(r as u16);
        }
        capped = r == params.max_rounds && c.events > 0;
    }
    let mut ms_rounds = 0;
    if params.min_size > 1 {
        for m in 1..=params.max_min_size_rounds {
            let r = params.max_rounds + m;
            let c = st.round(Mode::MinSize, r as u16);
            if c.events == 0 {
                break;
            }
            if c.merges > 0 {
                ms_rounds += 1;
                level_rounds.push(r as u16);
            }
            capped |= m == params.max_min_size_rounds;
        }
    }
    let comp: Vec<u32> = (0..n)
        .map(|p| st.find(st.comp[p] as usize) as u32)
        .collect();
    let (labels, count) = raster_relabel(&comp);
    let out = SegmentationOutput {
        labels: Image::from_vec(width, height, labels)?,
        segment_count: count,
        rounds,
        min_size_rounds: ms_rounds,
        capped,
        level: rounds + ms_rounds,
        has_rounds: true,
    };
    let hier = SegmentationHierarchy {
        width,
        height,
        parent: st.parent,
        round: st.round,
        level_rounds,
    };
    Ok((out, hier))
}

/// Felzenszwalb of a packed interleaved `u8` image (1 or 3 channels) by the GPU's rounds, on the
/// CPU: exactly what the GPU computes, with its hierarchy.
pub fn felzenszwalb_boruvka(
    data: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    params: &SegmentationParams,
) -> Result<(SegmentationOutput, SegmentationHierarchy), OpError> {
    params.validate()?;
    let s = blur_f64(data, width, height, channels, &params.blur())?;
    boruvka_from_smoothed(&s, width, height, channels, params)
}

/// [`felzenszwalb_boruvka`] of a grey view.
pub fn felzenszwalb_boruvka_gray(
    img: ImageView<'_, u8>,
    params: &SegmentationParams,
) -> Result<(SegmentationOutput, SegmentationHierarchy), OpError> {
    felzenszwalb_boruvka(&pack_gray(img), img.width(), img.height(), 1, params)
}

/// [`felzenszwalb_boruvka`] of an RGB view.
pub fn felzenszwalb_boruvka_rgb(
    img: ImageView<'_, [u8; 3]>,
    params: &SegmentationParams,
) -> Result<(SegmentationOutput, SegmentationHierarchy), OpError> {
    felzenszwalb_boruvka(&pack_rgb(img), img.width(), img.height(), 3, params)
}

/// Sequential Kruskal over the same weights and key order as the rounds, with scikit-image's
/// predicate, then its `min_size` pass over the same order (what the rounds reproduce). Labels
/// in raster order.
#[must_use]
pub fn kruskal_keys(
    w4: &[[f64; 4]],
    width: usize,
    height: usize,
    k: f64,
    min_size: u32,
) -> Vec<u32> {
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
    use crate::ops::segmentation::metrics::check_labels;

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
    fn two_halves_and_hierarchy() {
        let img = Image::from_fn(16, 8, |x, _| if x < 8 { 20u8 } else { 220 });
        let p = SegmentationParams {
            scale: 100.0,
            sigma: 0.0,
            min_size: 0,
            ..SegmentationParams::default()
        };
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
        let counts: Vec<usize> = (0..hier.levels())
            .map(|l| hier.labels_at(l).unwrap().1)
            .collect();
        assert!(counts.windows(2).all(|c| c[1] < c[0]), "{counts:?}");
    }

    #[test]
    fn min_size_is_enforced_and_segments_connect() {
        let img = Image::from_fn(24, 20, |x, y| ((x * 53 + y * 97 + x * y) % 256) as u8);
        let p = SegmentationParams {
            scale: 10.0,
            sigma: 0.5,
            min_size: 10,
            ..SegmentationParams::default()
        };
        let (out, _) = felzenszwalb_boruvka_gray(img.view(), &p).unwrap();
        let c = check_labels(out.labels.view(), out.segment_count).unwrap();
        assert!(c.min_size >= 10, "{c:?}");
        assert!(!out.capped);
    }

    #[test]
    fn capped_rounds_are_flagged_and_refine_the_exact_result() {
        let img = Image::from_fn(40, 30, |x, y| ((x * 37 + y * 11 + (x * y) % 7) % 256) as u8);
        let full = SegmentationParams {
            scale: 300.0,
            sigma: 0.5,
            min_size: 0,
            ..SegmentationParams::default()
        };
        let (exact, _) = felzenszwalb_boruvka_gray(img.view(), &full).unwrap();
        assert!(!exact.capped);
        assert!(exact.rounds >= 2, "{exact:?}");
        let (cut, _) = felzenszwalb_boruvka_gray(
            img.view(),
            &SegmentationParams {
                max_rounds: 1,
                ..full
            },
        )
        .unwrap();
        assert!(cut.capped);
        assert!(cut.segment_count > exact.segment_count);
        // Every segment of the capped run lies inside one exact segment.
        let mut owner = vec![u32::MAX; cut.segment_count];
        for (c, e) in cut.labels.data().iter().zip(exact.labels.data()) {
            let o = &mut owner[*c as usize];
            assert!(*o == u32::MAX || *o == *e);
            *o = *e;
        }
    }

    #[test]
    fn empty_and_single_pixel() {
        let p = SegmentationParams::default();
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
            w in 1usize..80, h in 1usize..40, channels in prop::sample::select(vec![1usize, 3]),
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
            let p = SegmentationParams { scale, sigma, min_size, max_rounds: 4000, max_min_size_rounds: 4000, ..SegmentationParams::default() };
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
