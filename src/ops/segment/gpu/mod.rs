//! CUDA Felzenszwalb segmentation (`kernels/segment.cu`; the CPU model of every kernel is
//! [`super::boruvka`]): the edge graph from the frame's bytes (`segment_blur_edges`: the f64
//! blur, edge weights and each pixel's edges sorted by key in one tiled pass; for blur radii
//! above 4 the blur's two passes ([`BlurGpu`]) and `segment_edges`), then two phases of exact rounds enqueued as a device loop — merge rounds, `min_size` rounds —
//! where every kernel returns at once after the round that changed nothing, so nothing is read
//! back until [`SegmentGpu::download`]; finally raster-order labels by a block scan.
//!
//! A round is 7-10 launches in 6 dependent steps (least edges, targets, trees; exits with the
//! trees' ranges allocated beside them on a side stream; core, which writes its members into
//! those ranges and lists each tree by its core's size; the caterpillars of tiny, small,
//! mid-size and large trees: the tiny and small ones in one launch, `segment_cat_small`, from
//! [`SegmentGpu::cat_fuse_from`] (round 2), joined by the mid-size ones from
//! [`SegmentGpu::cat_fuse_mid_from`] (round 4), the others on side streams forked from the
//! caller's by events;
//! where the device has cooperative launch, the trees above 8 192 core members, which smooth video
//! grows, go to `segment_cat_giant`, a cooperative grid launched after the large trees' kernel in
//! the rounds where recent frames had such a tree (every round before there is a history; without
//! it the large trees' kernel walks them, so the choice never changes the result), instead of one
//! block each); on compute capability 9.0+ each is a programmatic dependent launch
//! ([`ExLaunch`]; the cooperative grid is an ordinary one). Merge
//! round 1 is one kernel instead, `segment_tiles` (the round for the trees inside one 32x16
//! tile, in shared memory; [`SegmentGpu::tile_pass`]), and the launched merge rounds start at
//! 2. 1080p photographs take ~20 merge and 1-2 `min_size` rounds. Once the round caps come from
//! recent frames (`adaptive_rounds`, the merge phase's rounded up to a multiple of 4),
//! everything after the edge graph is captured once as a CUDA graph ([`GraphCache`],
//! keyed by buffers, frame size, parameters, caps and stream) and replayed with one launch. The
//! first frame, fixed caps and [`SegmentGpu::detailed_timing`] launch directly;
//! [`SegmentGpu::use_graphs`] turns graphs off, and a failed capture or graph launch (a driver
//! without graph support) turns them off for good after launching that frame directly.
//!
//! Timer regions: `segment_graph` (the edge graph; `segment_blur` before it for large radii),
//! then with a graph one region, `segment_rounds` (init, rounds, relabelling). Direct launches:
//! `segment_init`, `segment_relabel`, and for the rounds either one region per phase, `segment_merge`,
//! `segment_minsize`, or with `detailed_timing` one region per launch, named after its kernel:
//! `segment_minedge` (least edges), `segment_targets`, `segment_trees` (or, from
//! [`SegmentGpu::fuse_from`] on, `segment_targets_trees`), `segment_exits`,
//! `segment_alloc`, `segment_core`, `segment_cat_small` (or before
//! [`SegmentGpu::cat_fuse_from`] `segment_cat_thread` and `segment_cat_warp`),
//! `segment_cat_mid`, `segment_cat_block`, `segment_finish` (both finishers), and `segment_tiles` (merge
//! round 1, its own region in either mode)
//! (every `min_size` kernel: `segment_minsize`). Per-launch regions add two events per launch,
//! so time the whole op separately.
//!
//! Rounds: a phase stops by itself; `max_rounds` only bounds the launches. With
//! `adaptive_rounds` the next frame launches the rounds that any of the last 8 frames needed
//! before its frontier fell to `FINISH_FRONTIER` pixels, and then the finisher runs the phase's
//! remaining rounds (no launches, no empty gated rounds) until a round changes nothing:
//! `segment_finish_grid` over a cooperative grid of every SM (grid barriers between a round's
//! steps) while a round starts with more than `FINISH_SOLO` frontier pixels, then
//! `segment_finish` in one block; without cooperative launch (or with
//! [`SegmentGpu::set_grid_finisher`] off) `segment_finish` alone. Without
//! [`SegmentGpu::finisher`] the launched rounds are the most any
//! of the last 8 frames used plus 2 (video frames are alike). A frame whose launched rounds
//! left more than `FINISH_LIMIT` frontier pixels (or, without the finisher, whose last round
//! still changed something) is run again with doubled caps inside [`SegmentGpu::download`]
//! (direct launches from the kept edge graph; `segment_init` rewinds its cursors), so every frame is exact and [`SegmentGpu::reruns`]
//! counts the misses.
//!
//! Layout: this module holds the op's state and the structs shared with the kernels (`Ptrs`,
//! `SegFinish`); `tuning` the launch shapes, hand-off points and caps with their measurements;
//! `setup` the kernels, launch shapes and buffers; `enqueue` a frame (graph capture or direct
//! launches, tiles, stamps); `rounds` one phase's launched rounds and finisher; `readback` the
//! numbering, levels and downloads.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};

use super::boruvka::{TILE_H, TILE_W, eid_bits};
use super::cpu::threshold_f32;
use super::{MAX_ROUNDS_LIMIT, SegmentHierarchy, SegmentOutput, SegmentParams};
use crate::gpu::launch::{ExLaunch, alloc_zeroed, blocks_for, check_frame_size, upload_packed};
use crate::gpu::{GpuContext, GpuError, GraphCache, KernelTimer, Readback};
use crate::image::{Image, ImageView};
use crate::ops::OpError;
use crate::ops::blur::BlurGpu;
use crate::ops::blur::gpu::BlurWeightsF64;
use crate::ops::blur::cpu::{pack_gray, pack_rgb};

mod enqueue;
mod readback;
mod rounds;
mod setup;
#[cfg(test)]
mod tests;
mod tuning;

pub use readback::{segment_gpu, segment_gpu_rgb};
use setup::*;
use tuning::*;

/// Raw device addresses of the op's buffers. The kernels of one frame run on one stream in
/// order, so the launches pass these plain addresses instead of tracked `CudaSlice`s: cudarc's
/// per-argument event tracking costs ~1 µs per argument and a frame launches hundreds of
/// kernels with ~20 arguments each. `#[repr(C)]`: `segment_finish` takes the whole struct
/// (`SegPtrs` in segment.cu, the same fields in the same order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Ptrs {
    w4: u64,
    comp: u64,
    link: u64,
    size: u64,
    cint: u64,
    done: u64,
    best: u64,
    tkey: u64,
    target: u64,
    tree: u64,
    exitk: u64,
    /// Per tree: core members (slots taken, low half) and members not yet counted off (high
    /// half) in one `u64`; each tree's range and the ranges.
    tcnt: u64,
    joff: u64,
    jarr: u64,
    /// Trees of the round, then its tiny, small and large trees.
    hlist: u64,
    tlist: u64,
    mlist: u64,
    slist: u64,
    blist: u64,
    /// Per pixel: its edges' directions sorted by key, a cursor past its dead edges, the count.
    order: u64,
    round: u64,
    minpix: u64,
    rootlabel: u64,
    labels: u64,
    blocksum: u64,
    ctl: u64,
    mctl: u64,
    counts: u64,
    /// segment_cat_block's sort of large trees: keys and ids, 2n each.
    scr_k: u64,
    scr_i: u64,
    /// segment_cat_giant's barrier, range, counts and sums ([`GIANT_WORDS`], zero between trees).
    giant: u64,
    flist: [u64; 2],
    rlist: [u64; 2],
    info: u64,
    /// `%globaltimer` stamps of [`SegmentGpu::round_stamps`].
    stamps: u64,
}

/// The device buffers (owned; `p` holds their addresses).
struct Buffers {
    width: usize,
    height: usize,
    p: Ptrs,
    // Owners of the memory `p` points into (read only through `p`).
    _u32s: Vec<CudaSlice<u32>>,
    _u64s: Vec<CudaSlice<u64>>,
    w4: CudaSlice<f64>,
    _flags: CudaSlice<u8>,
    round: CudaSlice<u16>,
    link: CudaSlice<u32>,
    labels: CudaSlice<u32>,
    ctl: CudaSlice<u32>,
    mctl: CudaSlice<u32>,
    info: CudaSlice<u32>,
    counts: CudaSlice<u32>,
    stamps: CudaSlice<u64>,
}

/// Entry points of `kernels/segment.cu` (checked by the registry at start).
pub const FUNCTIONS: &[&str] = &[
    "segment_init",
    "segment_edges",
    "segment_blur_edges",
    "segment_least",
    "segment_targets",
    "segment_trees",
    "segment_targets_trees",
    "segment_exits",
    "segment_core",
    "segment_alloc",
    "segment_cat_thread",
    "segment_cat_warp",
    "segment_cat_block",
    "segment_cat_block_g",
    "segment_cat_giant",
    "segment_cat_mid",
    "segment_cat_small",
    "segment_cat_small_mid",
    "segment_reset_done",
    "segment_final",
    "segment_minpix",
    "segment_scan_count",
    "segment_scan_blocks",
    "segment_scan_label",
    "segment_labels",
    "segment_level_threshold",
    "segment_level_comp",
    "segment_stamp",
    "segment_finish",
    "segment_finish_grid",
    "segment_tiles",
];

/// What a download reads back of a frame's counters.
struct FrameCounts {
    /// Hierarchy levels (rounds that merged).
    levels: Vec<u16>,
    used: RoundsUsed,
    /// Rounds with a giant tree ([`Body::giant`]).
    giant: [u64; 2],
    /// The op's info words (`info[0]`: the segment count).
    info: Vec<u32>,
}

/// What one downloaded frame wants its successors to launch.
#[derive(Clone, Copy, Debug)]
struct Recent {
    /// Rounds per phase ([`SegmentGpu::caps`]).
    rounds: [u32; 2],
    /// Rounds with a giant tree ([`Body::giant`]).
    giant: [u64; 2],
}

/// What the last enqueue produced.
#[derive(Clone, Copy, Debug)]
struct Produced {
    width: usize,
    height: usize,
    /// Rounds launched per phase: merge, min_size.
    caps: [u32; 2],
    /// `segment_finish` ran each phase on to the parameters' caps (`full`).
    finish: bool,
    full: [u32; 2],
    /// `max_rounds` of the parameters (the `min_size` rounds are numbered after it).
    max_rounds: u32,
    /// `Some(level)` after [`SegmentGpu::enqueue_level`].
    level: Option<u32>,
}

/// What one frame's launch sequence depends on (the key of its captured graph).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Body {
    width: usize,
    height: usize,
    /// Device address of the first buffer (identifies this allocation of the buffers).
    comp: u64,
    caps: [u32; 2],
    /// `k = scale / 255` as bits (compared exactly).
    k_bits: u64,
    min_size: u32,
    max_rounds: u32,
    /// [`SegmentGpu::programmatic_launch`] on a device that has it.
    programmatic: bool,
    /// [`SegmentGpu::tile_pass`].
    tiles: bool,
    /// [`SegmentGpu::round_stamps`].
    stamps: bool,
    /// `segment_finish` after the launched rounds of each phase, up to `full` rounds.
    finish: bool,
    full: [u32; 2],
    /// Per phase, the rounds that launch `segment_cat_giant` (bit i: the phase's round i + 1;
    /// rounds past 64 always): those where recent frames had a giant tree, every round before
    /// there is a history. Either way exact: without it the large trees' kernel walks them.
    giant: [u64; 2],
}

/// One phase of rounds to enqueue.
struct Phase {
    mode: u32,
    /// Global number of its first round.
    first: u32,
    /// What its first round iterates ([`ALL_SINGLE`] or [`ALL`]).
    first_iter: u32,
    /// Rounds enqueued.
    count: u32,
    k: f64,
    min_size: u32,
    programmatic: bool,
    stamps: bool,
    /// Rounds `segment_finish` may run after the launched ones (0: none).
    finish: u32,
    /// [`Body::giant`] of this phase.
    giant: u64,
    /// Slot of `info` where `segment_finish` reports rounds left undone.
    info_slot: u32,
}

/// The parameter block of `segment_finish` (`SegFinish` in segment.cu, the same layout: the
/// buffers' addresses, then `k`, then the `u32`s).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct SegFinish {
    p: Ptrs,
    k: f64,
    /// `segment_core`'s weight-0 key limit ([`zero_key_limit`]).
    zlim: u64,
    width: u32,
    height: u32,
    n: u32,
    eb: u32,
    mode: u32,
    min_size: u32,
    nctl: u32,
    first: u32,
    from: u32,
    last: u32,
    limit: u32,
    info_slot: u32,
    /// `segment_finish_grid` leaves a round with at most this many frontier pixels to
    /// `segment_finish`.
    solo: u32,
    /// `segment_finish` starts where `segment_finish_grid` stopped (`info[6]`), not at `from`.
    resume: u32,
}

// SAFETY: plain old data with the C layout of the kernel's struct (8-byte fields first, then
// 4-byte ones; 368 bytes, a multiple of 8), passed by value as a kernel parameter.
unsafe impl cudarc::driver::DeviceRepr for SegFinish {}

/// A captured frame: its body and the stream it replays on.
#[derive(Clone, Copy, Debug, PartialEq)]
struct GraphKey {
    stream: usize,
    body: Body,
}

/// Rounds that changed something, per phase, read from the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RoundsUsed {
    used: [u32; 2],
    capped: [bool; 2],
    /// Rounds to launch before `segment_finish` takes over (the first round whose frontier was
    /// at most `FINISH_FRONTIER`, or one past the last that changed something).
    handoff: [u32; 2],
}

/// GPU Felzenszwalb segmentation with buffers for one frame size. Use one per stream: the
/// internal buffers are ordered by the stream that enqueues, not by cudarc's event tracking.
pub struct SegmentGpu {
    blur: BlurGpu,
    f_init: CudaFunction,
    f_edges: CudaFunction,
    f_blur_edges: CudaFunction,
    f_least: CudaFunction,
    f_targets: CudaFunction,
    f_trees: CudaFunction,
    f_targets_trees: CudaFunction,
    f_exits: CudaFunction,
    f_core: CudaFunction,
    f_alloc: CudaFunction,
    f_cat_thread: CudaFunction,
    f_cat_small: CudaFunction,
    f_cat_small_mid: CudaFunction,
    /// Launch of `segment_cat_small` / `_mid` (blocks of `CAT_MID_THREADS`, as many as the SMs
    /// hold).
    small_cfg: LaunchConfig,
    small_mid_cfg: LaunchConfig,
    f_cat_warp: CudaFunction,
    f_cat_block: CudaFunction,
    f_cat_block_g: CudaFunction,
    f_cat_giant: CudaFunction,
    /// Blocks of `segment_cat_giant` (a cooperative grid, at most [`GIANT_BLOCKS`]); 0: giant
    /// trees stay with `segment_cat_block` (no cooperative launch, or the development switch
    /// `MORPHOSCOPE_SEG_NO_GIANT`).
    giant_blocks: u32,
    f_cat_mid: CudaFunction,
    f_reset_done: CudaFunction,
    f_final: CudaFunction,
    f_minpix: CudaFunction,
    f_scan_count: CudaFunction,
    f_scan_blocks: CudaFunction,
    f_scan_label: CudaFunction,
    f_labels: CudaFunction,
    f_level_threshold: CudaFunction,
    f_level_comp: CudaFunction,
    f_stamp: CudaFunction,
    f_finish: CudaFunction,
    f_finish_grid: CudaFunction,
    f_tiles: CudaFunction,
    max_blocks: u32,
    /// Blocks of `segment_finish_grid` (every one resident at once: the SMs times the blocks of
    /// SEG_CAT_THREADS an SM holds; development switch `MORPHOSCOPE_SEG_FINISH_BLOCKS` caps it);
    /// 0 where the device has no cooperative launch.
    grid_finish_blocks: u32,
    /// Adaptive caps are multiples of this ([`GRAPH_ROUND_STEP`]; development switch
    /// `MORPHOSCOPE_SEG_ROUND_STEP`).
    round_step: u32,
    /// With [`SegmentGpu::finisher`]: the rounds launched are those before the first that starts
    /// with at most this many frontier pixels, in recent frames (`FINISH_FRONTIER`;
    /// development switch `MORPHOSCOPE_SEG_FINISH_FRONTIER`).
    pub finish_frontier: u32,
    /// The most frontier pixels `segment_finish` takes a round with (`FINISH_LIMIT`;
    /// development switch `MORPHOSCOPE_SEG_FINISH_LIMIT`); a frame with more is run again.
    pub finish_limit: u32,
    /// Blocks of `segment_tiles` (tiles are strided over) and of `segment_edges` (pixels): as
    /// many as the SMs hold at once ([`resident_grid`]).
    tiles_grid: u32,
    edges_grid: u32,
    /// Launch of `segment_cat_thread` (the tiny trees, 8 lanes each): blocks of 256, as many as
    /// the SMs hold at once ([`resident_grid`]), striding over the trees.
    tiny_cfg: LaunchConfig,
    /// Launch of `segment_cat_warp`: 4 warps a block, as many blocks as the SMs hold, warps
    /// striding over trees.
    warp_cfg: LaunchConfig,
    /// Launch of `segment_cat_block`: 2 blocks of 1024 an SM striding over the large trees.
    block_cfg: LaunchConfig,
    /// Launch of `segment_cat_mid`: blocks of 256, as many as the SMs hold, striding over the
    /// mid-size trees.
    mid_cfg: LaunchConfig,
    /// Streams that run the small, mid-size and large trees' caterpillars beside the tiny trees'
    /// (the four kernels touch disjoint trees), forked from and joined back to the caller's
    /// stream by events; inside a captured graph they become parallel branches.
    side: [Arc<CudaStream>; 3],
    fork: CudaEvent,
    joins: [CudaEvent; 3],
    bufs: Option<Buffers>,
    produced: Cell<Option<Produced>>,
    /// The last frame's launch sequence (a capped adaptive frame is run again from it).
    last_body: Cell<Option<Body>>,
    /// Frames run again because they needed more rounds than their adaptive caps.
    reruns: Cell<u64>,
    /// What the last [`ADAPTIVE_HISTORY`] downloaded frames wanted launched, newest last.
    recent: RefCell<std::collections::VecDeque<Recent>>,
    /// Whether the last downloaded frame hit its caps, and its rounds (for `adaptive_rounds`).
    hint: Cell<Option<RoundsUsed>>,
    /// Pinned buffer for the labels' readback.
    labels_readback: RefCell<Readback<u32>>,
    /// Captured launch sequences of recent frames (see [`SegmentGpu::use_graphs`]).
    graphs: RefCell<GraphCache<GraphKey>>,
    /// What each stamp of [`SegmentGpu::round_stamps`] follows (setup, a round, relabelling).
    stamp_labels: RefCell<Vec<(&'static str, Option<u32>)>>,
    /// End each phase with `segment_finish` (one block runs the rounds after the launched ones:
    /// no empty gated rounds, and a frame that needs a few more rounds than its caps is
    /// finished instead of run again). Development switch `MORPHOSCOPE_SEG_NO_FINISH` turns it off.
    pub finisher: bool,
    /// The finisher is `segment_finish_grid` (see [`SegmentGpu::set_grid_finisher`]).
    grid_finisher: bool,
    /// With the grid finisher: a round that starts with at most this many frontier pixels is
    /// left to `segment_finish` (one block), launched after the grid (`FINISH_SOLO`;
    /// development switch `MORPHOSCOPE_SEG_FINISH_SOLO`; 0: the grid runs every round).
    pub finish_solo: u32,
    /// Development diagnostic: a one-thread kernel writes `%globaltimer` after the setup, after
    /// every round and after the relabelling (inside the captured graph too), so
    /// [`SegmentGpu::round_profile`] gives each round's time as the graph replays it.
    pub round_stamps: bool,
    /// Time every kernel of every round separately (many event pairs per frame; never graphs).
    pub detailed_timing: bool,
    /// Launch the round kernels as programmatic dependent launches (compute capability 9.0+;
    /// ignored elsewhere): each may start while the one before it drains and waits for it on the
    /// device (`griddepcontrol.wait`).
    pub programmatic_launch: bool,
    /// The device has programmatic dependent launch (compute capability 9.0+).
    has_pdl: bool,
    /// Replay a captured CUDA graph of the whole frame (edge graph, rounds, relabelling) when
    /// the round caps come from the previous frame (`adaptive_rounds`): one launch instead of
    /// ~20 a round. The timer then has one region, `segment_rounds`, instead of one per phase.
    pub use_graphs: bool,
    /// Merge round 1 is `segment_tiles` (the first round for the trees inside one tile, in
    /// shared memory; see [`super::boruvka`]), the launched rounds start at 2. Development
    /// switch `MORPHOSCOPE_SEG_NO_TILES` turns it off (round 1 is then a global round: the labels
    /// are the same, the hierarchy's levels no longer equal the CPU model's).
    pub tile_pass: bool,
    /// Blur in two passes and build the edge graph after (`segment_edges`) even where
    /// `segment_blur_edges` could do both in one (same bits; for A/B measurements and tests).
    /// Development switch `MORPHOSCOPE_SEG_SEPARATE_BLUR`.
    pub separate_blur: bool,
    /// With [`SegmentGpu::tile_pass`], `segment_tiles` writes every pixel's starting words
    /// (component, size, flags, ...) as it reads the pixel, and `segment_init` only zeroes the
    /// round counters: one pass over the per-pixel arrays fewer. Development switch
    /// `MORPHOSCOPE_SEG_INIT_SEPARATE` keeps `segment_init`'s own pass.
    pub init_in_tiles: bool,
    /// `segment_reset_done` lists the pixels and roots of the components below `min_size`, and
    /// the `min_size` phase's first round scans those instead of every pixel. Development switch
    /// `MORPHOSCOPE_SEG_MS_ALL` scans every pixel.
    pub min_size_lists: bool,
    /// `segment_tiles` lists the roots it leaves, and merge round 2's `segment_targets` takes
    /// them instead of scanning every pixel for roots. Development switch
    /// `MORPHOSCOPE_SEG_TILE_ROOTS_SCAN` scans.
    pub tile_roots: bool,
    /// Merge rounds: `segment_core` joins a tree's weight-0 members to the tree at once (every
    /// such step passes, whatever the order), so the caterpillars sort and walk only the rest
    /// (`zero_key_limit`; same result). Development switch `MORPHOSCOPE_SEG_ZERO_SORT` leaves
    /// them to the caterpillars.
    pub zero_joins: bool,
    /// Launched merge rounds from this one on (and every `min_size` round) take their targets and
    /// trees in one kernel (`segment_targets_trees`: one dependent step a round fewer, each walk
    /// computing the targets it passes), where their roots come as a list (not in merge round 2
    /// without the tile pass); 0: never. Development switch `MORPHOSCOPE_SEG_FUSE_FROM`.
    pub fuse_from: u32,
    /// Rounds from this one on (merge rounds by number, and every `min_size` round) walk their
    /// tiny and small trees (and with
    /// [`SegmentGpu::cat_fuse_mid_from`] the mid-size ones) in one launch (`segment_cat_small`,
    /// `_mid`) instead of one kernel a list on its own stream; 0: never. Development switch
    /// `MORPHOSCOPE_SEG_CAT_FUSE_FROM`.
    pub cat_fuse_from: u32,
    /// Fused rounds (see [`SegmentGpu::cat_fuse_from`]) from this one on walk the mid-size trees
    /// in the same launch (`segment_cat_small_mid`) rather than keeping `segment_cat_mid` on a
    /// side stream; 0: never. Development switch `MORPHOSCOPE_SEG_CAT_FUSE_MID_FROM`.
    pub cat_fuse_mid_from: u32,
}

impl std::fmt::Debug for SegmentGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentGpu").field("produced", &self.produced.get()).finish_non_exhaustive()
    }
}
