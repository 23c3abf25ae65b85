//! CUDA Felzenszwalb segmentation (`kernels/segment.cu`; the CPU model of every kernel is
//! [`super::boruvka`]): the edge graph from the frame's bytes (`segment_blur_edges`: the f64
//! blur, edge weights and each pixel's edges sorted by key in one tiled pass; for blur radii
//! above 4 the blur's two passes ([`BlurGpu`]) and `segment_edges`), then two phases of exact rounds enqueued as a device loop — merge rounds, `min_size` rounds —
//! where every kernel returns at once after the round that changed nothing, so nothing is read
//! back until [`SegmentGpu::download`]; finally raster-order labels by a block scan.
//!
//! A round is 10 launches in 6 dependent steps (least edges, targets, trees; exits with the
//! trees' ranges allocated beside them on a side stream; core, which writes its members into
//! those ranges and lists each tree by its core's size; the caterpillars of tiny, small,
//! mid-size and large trees, the last three on side streams forked from the caller's by events;
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
//! `segment_alloc`, `segment_core`, `segment_cat_thread`, `segment_cat_warp`,
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

/// Entries of the per-round counters (`ctl[0]` is the always-on gate; merge rounds are
/// `1..=max_rounds`, `min_size` rounds follow).
const NCTL: usize = 2 * MAX_ROUNDS_LIMIT as usize + 2;
/// Per-round list counts, `NCTL` entries each: frontier, active roots, trees with members,
/// members, small trees, large trees, range cursor, tiny trees, mid-size trees, giant trees.
const NCOUNTS: usize = 10;
const C_FRONTIER: u64 = 0;
const C_ROOTS: u64 = 1;
const C_TREES: u64 = 2;
const C_MEMBERS: u64 = 3;
const C_SMALL: u64 = 4;
const C_LARGE: u64 = 5;
const C_CURSOR: u64 = 6;
const C_TINY: u64 = 7;
const C_MID: u64 = 8;
const C_GIANT: u64 = 9;
/// `u64` words of `segment_cat_giant`'s scratch (SEG_GIANT_WORDS: the barrier, the keys' range,
/// the first failing step, then 2048 part counts, part cursors and bucket sums as `u32`).
const GIANT_WORDS: usize = 4 + 3 * 2048 / 2;
/// Blocks of `segment_cat_giant` at most (fewer where the device holds fewer at once). A
/// smaller grid starts sooner beside the other caterpillar kernels: H100, 2026-11-26, 1080p,
/// launched in every round, against no giant kernel: 132 blocks +45 to +75 µs on the
/// photographs (which have no giant tree), 64 / 32 / 16 / 8 blocks +24 to +47; the clip frame's
/// 4.31 / 4.47 ms (k = 100 / 500) 3.76 / 3.72 (132), 3.71 / 3.76 (64), 3.73 / 3.72 (32),
/// 3.75 / 3.75 (16), 3.80 / 3.80 (8). Since it is launched only in the rounds where recent
/// frames had a giant tree ([`Body::giant`]) the photographs pay nothing (run 11: building
/// 3.021 / 3.320 ms against 3.017 / 3.325), the clip frame 3.69 / 3.68. With the rounds
/// around it cheaper (H100, 2026-11-26, clip frame, two passes: its giant tree of 36 793
/// members in round 11 is now the only large tree there) 48 / 64 / 132 blocks measured 3.060 /
/// 3.060-3.062 / 3.063-3.073 ms at k = 100 against 3.083-3.095 with 32 (k = 500: 2.923-2.938 /
/// 2.925-2.930 / 2.922-2.932 against 2.949-2.959): more blocks sort the ~40 buckets at once.
/// Development switch `MORPHOSCOPE_SEG_GIANT_BLOCKS`.
const GIANT_BLOCKS: u32 = 64;
/// Pixels per block of the relabel scan.
const SCAN_BLOCK: u32 = 1024;
/// Threads per block of the grid-stride kernels.
const BLOCK: u32 = 256;
/// Threads per block of `segment_cat_block` (keep in sync with SEG_CAT_THREADS).
const CAT_THREADS: u32 = 1024;
/// Most members of a tree `segment_cat_block` sorts whole in shared memory (segment.cu
/// `SEG_CAT_WHOLE`; larger or crowded trees are radix-sorted into scratch, or walked by
/// `segment_cat_giant`). Development switch `MORPHOSCOPE_SEG_WHOLE` (0: no whole sorts, every
/// tree of more than one chunk radix-sorted).
const WHOLE_MAX: u32 = 8192;
/// Threads per block of `segment_cat_mid` (keep in sync with SEG_CAT_MID_THREADS).
const CAT_MID_THREADS: u32 = 256;
/// Adaptive merge-round caps are rounded up to a multiple of this, so that video frames whose
/// round counts differ a little replay the same captured graph (`min_size` caps are not: that
/// phase takes 1-2 rounds, and the most of the last frames moves rarely).
const GRAPH_ROUND_STEP: u32 = 4;
/// Rounds an adaptive cap adds to the most any of the last [`ADAPTIVE_HISTORY`] frames used. A
/// frame that needs more is run again with larger caps before it is downloaded (exact either
/// way), so the margin trades empty rounds (~20 us each at 1080p on the H100) against reruns,
/// which cost a whole frame: with +2 over the last frame alone, 137 of the sample clip's 795
/// frames ran again in the pipeline (H100, 2026-11-25).
const ADAPTIVE_MARGIN: u32 = 2;
/// A round that starts with at most this many frontier pixels is left to `segment_finish` (one
/// block runs the rest of the phase); the adaptive caps launch the rounds before it (the most
/// any recent frame needed), rounded up to steps of 4, so on repeated frames the finisher
/// mostly confirms convergence. One block is slower than launched rounds on a real frontier
/// (H100, 2026-11-25: building 1080p's rounds 17-20, frontier 7 797 -> 20 pixels, 350 µs
/// against 126 µs launched); hand-offs at 2 048-16 384 pixels measured the same. What it
/// buys is on video: frames that need a few more rounds than their caps are not run again.
const FINISH_FRONTIER: u32 = 32_768;
/// `FINISH_FRONTIER` for `segment_finish_grid` (the same rounds over a cooperative grid, a
/// grid barrier between steps instead of a launch). It takes rounds of any size, but a grid
/// round at 100 k+ frontier pixels costs more than a launched one (one 1024-thread block an
/// SM, no overlap between steps): H100, 2026-11-25, building 1080p, hand-off at 32 768 /
/// 65 536 / 262 144 / 1 M pixels 3.69 / 3.69 / 3.89 / 4.04 ms at k = 100 (4.26 / 4.35 / 4.58 /
/// 4.76 at k = 500; the last two without `FINISH_SOLO`). Once the launched rounds got cheaper
/// (2026-11-26: the gate and count loaded together, a one-round-trip tree walk, early loads in the
/// tail) the launched rounds won further down: 32 768 / 16 384 / 8 192 measured building 1080p
/// 3.18 / 3.13 / 3.12-3.13 ms at k = 100 (k = 500 within 15 µs), fruits 3.55 / 3.46 / 3.47, the
/// clip frame 4.66 / 4.66 / 4.59.
const GRID_FINISH_FRONTIER: u32 = 8_192;
/// With the grid finisher, the rounds from the first that starts with at most this many frontier
/// pixels go to `segment_finish` (one block, launched after it): a tiny round costs one block a
/// few `__syncthreads`, the grid 8 barriers of every SM (H100, 2026-11-25, building 1080p:
/// without it k = 500 lost 77 µs to the one-block finisher; 1 024 / 4 096 / 16 384 measured
/// within 1 %).
const FINISH_SOLO: u32 = 4_096;
/// First launched merge round whose targets and trees are one kernel
/// ([`SegmentGpu::fuse_from`]); 2 is every launched merge round (round 2 takes the roots
/// `segment_tiles` listed). H100, 2026-11-26, two passes each, against separate kernels: from
/// round 3 / 6 / 10 building 1080p -30 / -10 / -5 µs at k = 100, -20 / -5 / 0 at k = 500, fruits
/// and grey -18 to -38 / -4 to -27 / 0 to -14, the clip frame +8 / -12 / +5 at k = 100 (k = 500
/// -2 / -14 / 0); in another lease from round 2 / 3 / only the `min_size` rounds: building -45 /
/// -22 / 0 and -35 / -12 / 0, fruits -47 / -24 / 0, grey -50 / -35 / 0, the clip frame -18 / -6 / 0.
const FUSE_FROM: u32 = 2;
/// The most frontier pixels `segment_finish` starts a round with; a frame with more left after
/// its launched rounds is run again with larger caps (one block's rounds at this size would
/// cost about as much as the rerun).
const FINISH_LIMIT: u32 = 65_536;
/// Largest blur radius `segment_blur_edges` handles (keep in sync with SEG_GT_MAXR in
/// segment.cu; sigma < 1.125 with scikit-image's truncation at 4 sigma, the default 0.8 is
/// radius 3). Larger ones blur in two passes and build the edge graph after.
const FUSED_BLUR_RADIUS: u32 = 4;
/// Pixels of a `segment_blur_edges` tile (SEG_GT_W x SEG_GT_H) and its block size.
const FUSED_TILE: (u32, u32) = (32, 16);
const FUSED_THREADS: u32 = 512;
/// Frames whose round counts set the adaptive caps (their maximum, per phase).
const ADAPTIVE_HISTORY: usize = 8;
/// Captured graphs kept per op (round-count buckets and parameter sets seen recently).
const GRAPH_CACHE: usize = 16;
/// Kernel modes (keep in sync with SEG_MODE_* in segment.cu).
const MODE_MERGE: u32 = 0;
const MODE_MIN_SIZE: u32 = 1;
/// What a phase's first round iterates (`use_list` of the round kernels): every pixel, each its
/// own component in merge mode (`SEG_ALL_SINGLE`), or every pixel in whatever components the
/// steps before it left (`SEG_ALL`: the merge round after `segment_tiles`).
const ALL_SINGLE: u32 = 0;
/// The previous round's lists (`SEG_LIST`; the `min_size` phase's first round: the lists of
/// `segment_reset_done`).
const LIST: u32 = 1;
const ALL: u32 = 2;
/// Threads of a `segment_tiles` block: a pixel each (`SEG_TILE_PX`).
const TILE_THREADS: u32 = (TILE_W * TILE_H) as u32;

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
    /// ([`zero_key_limit`]; same result). Development switch `MORPHOSCOPE_SEG_ZERO_SORT` leaves
    /// them to the caterpillars.
    pub zero_joins: bool,
    /// Launched merge rounds from this one on (and every `min_size` round) take their targets and
    /// trees in one kernel (`segment_targets_trees`: one dependent step a round fewer, each walk
    /// computing the targets it passes), where their roots come as a list (not in merge round 2
    /// without the tile pass); 0: never. Development switch `MORPHOSCOPE_SEG_FUSE_FROM`.
    pub fuse_from: u32,
}

impl std::fmt::Debug for SegmentGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentGpu").field("produced", &self.produced.get()).finish_non_exhaustive()
    }
}

/// A development switch's value.
/// `segment_core`'s weight-0 key limit: `1 << eb` (a key below it is an edge of weight 0,
/// whose caterpillar step passes whatever the order) in merge rounds where every threshold
/// is above 0, i.e. `f32(k / n)` does not round to 0 (thresholds are `f32(Int + k/|C|)` with
/// `Int >= 0`, `|C| <= n`); 0 (no member is joined early) in `min_size` rounds, at scale 0 or
/// when `enabled` is off.
fn zero_key_limit(enabled: bool, min_size_phase: bool, k: f64, n: u32, eb: u32) -> u64 {
    let pass = threshold_f32(0.0, k, n.max(1) as usize) > 0.0;
    if enabled && !min_size_phase && pass { 1u64 << eb } else { 0 }
}

fn env_u32(name: &str) -> Option<u32> {
    std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok())
}

/// `FINISH_FRONTIER` and `FINISH_LIMIT` of the grid or the one-block finisher (development
/// switches `MORPHOSCOPE_SEG_FINISH_FRONTIER`, `MORPHOSCOPE_SEG_FINISH_LIMIT`).
fn hand_off(grid: bool) -> (u32, u32) {
    let (frontier, limit) = if grid { (GRID_FINISH_FRONTIER, u32::MAX) } else { (FINISH_FRONTIER, FINISH_LIMIT) };
    (
        env_u32("MORPHOSCOPE_SEG_FINISH_FRONTIER").unwrap_or(frontier),
        env_u32("MORPHOSCOPE_SEG_FINISH_LIMIT").unwrap_or(limit),
    )
}

/// Blocks of `threads` threads of `f` that every SM holds at once, times the SMs (at most
/// `per_sm` an SM; development switch `switch`=N: N an SM whatever fits, for A/B runs):
/// the grid of a kernel whose blocks stride over their work, so that no second, partial wave of
/// blocks runs after the first. H100, 2026-11-26: `segment_cat_thread` at 40 registers holds 6
/// blocks of 256 an SM; launched with 8 an SM (1.33 waves, ncu) it took 87-89 µs in round 2 of a
/// 1080p frame, 79 µs with 6. `segment_tiles` (40 registers, 512 threads) holds 3 blocks an SM
/// and was launched with 4.
fn resident_grid(f: &CudaFunction, threads: u32, sms: u32, per_sm: u32, switch: &str) -> Result<u32, GpuError> {
    if let Some(n) = env_u32(switch) {
        return Ok(n.max(1) * sms);
    }
    let fits = f.occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)?;
    Ok(fits.clamp(1, per_sm.max(1)) * sms)
}

/// Members a large tree may have for `segment_cat_block` to sort it whole in shared memory
/// (segment.cu `SEG_CAT_WHOLE`: 16 bytes a member beside the kernel's own static shared
/// memory), at most `WHOLE_MAX`; 0 where the device cannot give 1 024 members' worth or with
/// `MORPHOSCOPE_SEG_WHOLE=0`. Sets the two kernels' dynamic shared memory limit to it.
fn whole_tree_members(gpu: &GpuContext, fs: [&CudaFunction; 2]) -> Result<u32, GpuError> {
    use cudarc::driver::sys::{CUdevice_attribute as A, CUfunction_attribute as F};
    let cap = env_u32("MORPHOSCOPE_SEG_WHOLE").unwrap_or(WHOLE_MAX).min(WHOLE_MAX);
    let optin = u32::try_from(gpu.cuda().attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?).unwrap_or(0);
    let mut members = cap;
    for f in fs {
        let fixed = u32::try_from(f.get_attribute(F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?).unwrap_or(u32::MAX);
        let room = optin.saturating_sub(fixed) / 16;
        members = members.min(room & !7);
    }
    if members < 1024 {
        return Ok(0);
    }
    for f in fs {
        let bytes = i32::try_from(whole_tree_bytes(members)).unwrap_or(i32::MAX);
        f.set_attribute(F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)?;
    }
    Ok(members)
}

/// Dynamic shared memory of `segment_cat_block` for trees of up to `members` (0: none).
fn whole_tree_bytes(members: u32) -> u32 {
    16 * members
}

/// Blocks of `segment_finish_grid` on this device: every SM's share of resident blocks of
/// `CAT_THREADS` threads (0: no cooperative launch).
fn grid_finish_blocks(gpu: &GpuContext, f: &CudaFunction, sms: u32) -> Result<u32, GpuError> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    if gpu.cuda().attribute(A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? == 0 {
        return Ok(0);
    }
    let per_sm = f.occupancy_max_active_blocks_per_multiprocessor(CAT_THREADS, 0, None)?;
    let cap = env_u32("MORPHOSCOPE_SEG_FINISH_BLOCKS").unwrap_or(u32::MAX);
    Ok(per_sm.saturating_mul(sms).min(cap))
}

/// Per phase, bit i set where the phase's round i + 1 walked a giant tree (`counts`: the
/// per-round giant-tree counts, merge rounds from 1, `min_size` rounds from `max_rounds + 1`);
/// rounds past 64 are always launched with `segment_cat_giant` and need no bit.
fn giant_masks(counts: &[u32], max_rounds: u32) -> [u64; 2] {
    let firsts = [1usize, max_rounds as usize + 1];
    std::array::from_fn(|ph| {
        (0..64).filter(|&i| counts.get(firsts[ph] + i).is_some_and(|&c| c > 0)).fold(0u64, |m, i| m | (1 << i))
    })
}

/// Round caps of the parameters: merge rounds, `min_size` rounds (none when `min_size` <= 1).
fn full_caps(params: &SegmentParams) -> [u32; 2] {
    let ms = if params.min_size > 1 { params.max_min_size_rounds } else { 0 };
    [params.max_rounds, ms]
}

fn cfg_scan(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks_for(n, SCAN_BLOCK), 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// Runs `f` inside a timer region when `timer` is given.
fn timed(
    timer: &mut Option<&mut KernelTimer>,
    stream: &Arc<CudaStream>,
    name: &'static str,
    f: impl FnOnce() -> Result<(), GpuError>,
) -> Result<(), GpuError> {
    match timer {
        Some(t) => t.time(stream, name, f),
        None => f(),
    }
}

fn raw<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _record) = s.device_ptr(stream);
    p
}

impl SegmentGpu {
    /// Resolves the kernels (buffers are allocated on the first frame).
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        let f = |name: &str| gpu.function("segment", name);
        let sms = u32::try_from(gpu.info().multiprocessors.max(1)).unwrap_or(1);
        let stream = || gpu.cuda().new_stream().map_err(GpuError::from);
        let event = || gpu.cuda().new_event(None).map_err(GpuError::from);
        let f_finish_grid = f("segment_finish_grid")?;
        let f_cat_giant = f("segment_cat_giant")?;
        let giant_blocks = if std::env::var_os("MORPHOSCOPE_SEG_NO_GIANT").is_some() {
            0
        } else {
            grid_finish_blocks(gpu, &f_cat_giant, sms)?.min(env_u32("MORPHOSCOPE_SEG_GIANT_BLOCKS").unwrap_or(GIANT_BLOCKS))
        };
        let grid_finish_blocks = grid_finish_blocks(gpu, &f_finish_grid, sms)?;
        let f_cat_block = f("segment_cat_block")?;
        let f_cat_block_g = f("segment_cat_block_g")?;
        let whole_members = whole_tree_members(gpu, [&f_cat_block, &f_cat_block_g])?;
        let f_cat_thread = f("segment_cat_thread")?;
        let f_cat_warp = f("segment_cat_warp")?;
        let f_cat_mid = f("segment_cat_mid")?;
        let tiny_grid = resident_grid(&f_cat_thread, BLOCK, sms, 8, "MORPHOSCOPE_SEG_CAT_GRID_PER_SM")?;
        let warp_grid = resident_grid(&f_cat_warp, 128, sms, 8, "MORPHOSCOPE_SEG_CAT_GRID_PER_SM")?;
        let mid_grid = resident_grid(&f_cat_mid, CAT_MID_THREADS, sms, 5, "MORPHOSCOPE_SEG_CAT_GRID_PER_SM")?;
        let f_tiles = f("segment_tiles")?;
        let f_edges = f("segment_edges")?;
        let tiles_grid = resident_grid(&f_tiles, TILE_THREADS, sms, 4, "MORPHOSCOPE_SEG_TILE_GRID_PER_SM")?;
        let edges_grid = resident_grid(&f_edges, BLOCK, sms, 8, "MORPHOSCOPE_SEG_EDGES_GRID_PER_SM")?;
        let grid_finisher = grid_finish_blocks > 0 && std::env::var_os("MORPHOSCOPE_SEG_BLOCK_FINISH").is_none();
        let (finish_frontier, finish_limit) = hand_off(grid_finisher);
        Ok(Self {
            blur: BlurGpu::new(gpu)?,
            f_init: f("segment_init")?,
            f_edges,
            f_blur_edges: f("segment_blur_edges")?,
            f_least: f("segment_least")?,
            f_targets: f("segment_targets")?,
            f_trees: f("segment_trees")?,
            f_targets_trees: f("segment_targets_trees")?,
            f_exits: f("segment_exits")?,
            f_core: f("segment_core")?,
            f_alloc: f("segment_alloc")?,
            f_cat_thread,
            f_cat_warp,
            f_cat_block,
            f_cat_block_g,
            giant_blocks,
            f_cat_giant,
            f_cat_mid,
            f_reset_done: f("segment_reset_done")?,
            f_final: f("segment_final")?,
            f_minpix: f("segment_minpix")?,
            f_scan_count: f("segment_scan_count")?,
            f_scan_blocks: f("segment_scan_blocks")?,
            f_scan_label: f("segment_scan_label")?,
            f_labels: f("segment_labels")?,
            f_level_threshold: f("segment_level_threshold")?,
            f_level_comp: f("segment_level_comp")?,
            f_stamp: f("segment_stamp")?,
            f_finish: f("segment_finish")?,
            f_finish_grid,
            grid_finish_blocks,
            f_tiles,
            tiles_grid,
            edges_grid,
            max_blocks: sms * 8,
            round_step: env_u32("MORPHOSCOPE_SEG_ROUND_STEP").filter(|&s| s > 0).unwrap_or(GRAPH_ROUND_STEP),
            finish_frontier,
            finish_limit,
            tiny_cfg: LaunchConfig {
                grid_dim: (tiny_grid, 1, 1),
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes: 0,
            },
            warp_cfg: LaunchConfig {
                grid_dim: (warp_grid, 1, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            },
            // With a whole tree's shared memory one block fits an SM.
            block_cfg: LaunchConfig {
                grid_dim: (if whole_members > 0 { sms } else { sms * 2 }, 1, 1),
                block_dim: (CAT_THREADS, 1, 1),
                shared_mem_bytes: whole_tree_bytes(whole_members),
            },
            mid_cfg: LaunchConfig {
                grid_dim: (mid_grid, 1, 1),
                block_dim: (CAT_MID_THREADS, 1, 1),
                shared_mem_bytes: 0,
            },
            side: [stream()?, stream()?, stream()?],
            fork: event()?,
            joins: [event()?, event()?, event()?],
            bufs: None,
            produced: Cell::new(None),
            last_body: Cell::new(None),
            reruns: Cell::new(0),
            hint: Cell::new(None),
            recent: RefCell::new(std::collections::VecDeque::with_capacity(ADAPTIVE_HISTORY)),
            labels_readback: RefCell::new(Readback::new(gpu.cuda())),
            graphs: RefCell::new(GraphCache::new(GRAPH_CACHE)),
            stamp_labels: RefCell::new(Vec::new()),
            round_stamps: false,
            finisher: std::env::var_os("MORPHOSCOPE_SEG_NO_FINISH").is_none(),
            grid_finisher,
            finish_solo: env_u32("MORPHOSCOPE_SEG_FINISH_SOLO").unwrap_or(FINISH_SOLO),
            detailed_timing: false,
            // Development switch: MORPHOSCOPE_NO_PDL set turns programmatic launches off.
            programmatic_launch: std::env::var_os("MORPHOSCOPE_NO_PDL").is_none(),
            has_pdl: gpu.info().compute_capability.0 >= 9,
            use_graphs: true,
            tile_pass: std::env::var_os("MORPHOSCOPE_SEG_NO_TILES").is_none(),
            separate_blur: std::env::var_os("MORPHOSCOPE_SEG_SEPARATE_BLUR").is_some(),
            init_in_tiles: std::env::var_os("MORPHOSCOPE_SEG_INIT_SEPARATE").is_none(),
            min_size_lists: std::env::var_os("MORPHOSCOPE_SEG_MS_ALL").is_none(),
            tile_roots: std::env::var_os("MORPHOSCOPE_SEG_TILE_ROOTS_SCAN").is_none(),
            zero_joins: std::env::var_os("MORPHOSCOPE_SEG_ZERO_SORT").is_none(),
            fuse_from: env_u32("MORPHOSCOPE_SEG_FUSE_FROM").unwrap_or(FUSE_FROM),
        })
    }

    /// Ends each phase with `segment_finish_grid` (`on`, where the device has cooperative
    /// launch: the default there, unless `MORPHOSCOPE_SEG_BLOCK_FINISH` is set), the finisher's
    /// rounds over a cooperative grid of every SM, a grid barrier between steps, or with
    /// `segment_finish` (one block). Resets [`SegmentGpu::finish_frontier`] and
    /// [`SegmentGpu::finish_limit`] to that finisher's defaults. Returns whether the grid
    /// finisher is on.
    pub fn set_grid_finisher(&mut self, on: bool) -> bool {
        self.grid_finisher = on && self.grid_finish_blocks > 0;
        (self.finish_frontier, self.finish_limit) = hand_off(self.grid_finisher);
        self.grid_finisher
    }

    /// Blocks `segment_cat_giant` launches with (0: trees above 8 192 core members stay with
    /// `segment_cat_block`: no cooperative launch, or `MORPHOSCOPE_SEG_NO_GIANT` set).
    #[must_use]
    pub fn giant_blocks(&self) -> u32 {
        self.giant_blocks
    }

    /// Blocks `segment_finish_grid` launches with (0: the device has no cooperative launch).
    #[must_use]
    pub fn grid_finish_blocks(&self) -> u32 {
        self.grid_finish_blocks
    }

    /// A grid-stride launch over at most `items` items.
    fn stride(&self, items: usize) -> LaunchConfig {
        Self::stride_within(items, self.max_blocks)
    }

    /// A grid-stride launch over at most `items` items with at most `blocks` blocks of [`BLOCK`].
    fn stride_within(items: usize, blocks: u32) -> LaunchConfig {
        LaunchConfig { grid_dim: (blocks_for(items, BLOCK).min(blocks), 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
    }

    fn ensure_buffers(&mut self, stream: &Arc<CudaStream>, width: usize, height: usize) -> Result<(), GpuError> {
        if self.bufs.as_ref().is_some_and(|b| b.width == width && b.height == height) {
            return Ok(());
        }
        self.bufs = None;
        self.graphs.borrow_mut().clear();
        let n = width * height;
        let a = |len: usize, what: &str| alloc_zeroed::<u32>(stream, len, what, width, height);
        let a64 = |len: usize, what: &str| alloc_zeroed::<u64>(stream, len, what, width, height);
        let w4 = alloc_zeroed::<f64>(stream, 4 * n, "segment edge weights", width, height)?;
        let round = alloc_zeroed::<u16>(stream, n, "segment hierarchy rounds", width, height)?;
        // Union-find links; a link is only written when its component joins another, so the
        // links are also the hierarchy's parents.
        let link = a(n, "segment links (hierarchy parents)")?;
        // A flag byte per component (frozen / at least min_size, joined): see segment.cu.
        let flags = alloc_zeroed::<u8>(stream, n, "segment component flags", width, height)?;
        let labels = a(n, "segment labels")?;
        let ctl = a(NCTL, "segment round events")?;
        let mctl = a(NCTL, "segment round merges")?;
        // Words 0-3: segment count, level threshold, phases left undone; 4-5: the barrier of
        // segment_finish_grid (zero here, back to zero after every barrier).
        let info = a(8, "segment info")?;
        let names32 = [
            "components",
            "sizes",
            "targets",
            "trees",
            "tree ranges",
            "members by tree",
            "trees of the round",
            "small trees",
            "large trees",
            "edge orders",
            "first pixels",
            "root labels",
            "frontier list A",
            "frontier list B",
            "root list A",
            "root list B",
            "tiny trees",
            "mid-size trees",
        ];
        let mut u32s = Vec::with_capacity(names32.len() + 2);
        for what in names32 {
            u32s.push(a(n, what)?);
        }
        u32s.push(a(blocks_for(n, SCAN_BLOCK) as usize, "scan blocks")?);
        let counts = a(NCOUNTS * NCTL, "per-round list counts")?;
        let stamps = a64(NCTL + 4, "round stamps")?;
        let mut u64s = Vec::with_capacity(6);
        for what in ["least edges", "target keys", "tree exits", "internal differences"] {
            u64s.push(a64(n, what)?);
        }
        // Large trees sorted by segment_cat_block: (key, id) twice over each tree's range.
        u64s.push(a64(2 * n, "large-tree sort keys")?);
        u32s.push(a(2 * n, "large-tree sort ids")?);
        // Per tree: core members and members not yet counted off (see segment.cu's tcnt).
        u64s.push(a64(n, "tree counts")?);
        u64s.push(a64(GIANT_WORDS, "giant-tree scratch")?);
        let r32 = |i: usize| raw(&u32s[i], stream);
        let r64 = |i: usize| raw(&u64s[i], stream);
        let p = Ptrs {
            w4: raw(&w4, stream),
            comp: r32(0),
            link: raw(&link, stream),
            size: r32(1),
            done: raw(&flags, stream),
            target: r32(2),
            tree: r32(3),
            tcnt: r64(5),
            joff: r32(4),
            jarr: r32(5),
            hlist: r32(6),
            slist: r32(7),
            blist: r32(8),
            order: r32(9),
            minpix: r32(10),
            rootlabel: r32(11),
            flist: [r32(12), r32(13)],
            rlist: [r32(14), r32(15)],
            tlist: r32(16),
            mlist: r32(17),
            blocksum: r32(18),
            counts: raw(&counts, stream),
            stamps: raw(&stamps, stream),
            scr_i: r32(19),
            scr_k: r64(4),
            giant: r64(6),
            best: r64(0),
            tkey: r64(1),
            exitk: r64(2),
            cint: r64(3),
            round: raw(&round, stream),
            labels: raw(&labels, stream),
            ctl: raw(&ctl, stream),
            mctl: raw(&mctl, stream),
            info: raw(&info, stream),
        };
        self.bufs = Some(Buffers {
            width,
            height,
            p,
            _u32s: u32s,
            _u64s: u64s,
            w4,
            _flags: flags,
            round,
            link,
            labels,
            ctl,
            mctl,
            info,
            counts,
            stamps,
        });
        Ok(())
    }

    /// Enqueues the segmentation of a packed grey frame.
    pub fn enqueue(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        self.enqueue_channels(stream, timer, input, width, height, 1, params)
    }

    /// Enqueues the segmentation of a packed interleaved RGB frame (`3 * width` bytes a row).
    pub fn enqueue_rgb(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        self.enqueue_channels(stream, timer, input, width, height, 3, params)
    }

    /// Frames that needed more rounds than their adaptive caps and were run again before their
    /// download (see [`SegmentParams::adaptive_rounds`]).
    #[must_use]
    pub fn reruns(&self) -> u64 {
        self.reruns.get()
    }

    /// Round caps for this frame: the parameters (`false`), or the most rounds recent frames
    /// wanted launched (the rounds they used plus [`ADAPTIVE_MARGIN`], or with
    /// [`SegmentGpu::finisher`] the rounds before the hand-off), the merge phase's rounded up to
    /// [`GRAPH_ROUND_STEP`] (`true`). A phase the last frame
    /// ran to its caps (only the parameters' caps stay capped after a rerun) keeps them.
    fn caps(&self, params: &SegmentParams) -> ([u32; 2], bool) {
        let full = full_caps(params);
        match self.hint.get().filter(|_| params.adaptive_rounds) {
            None => (full, false),
            Some(h) => {
                let recent = self.recent.borrow();
                let c = std::array::from_fn(|i| {
                    let most = recent.iter().map(|u| u.rounds[i]).max().unwrap_or(h.used[i] + ADAPTIVE_MARGIN);
                    let want = if h.capped[i] { full[i] } else { most };
                    // min_size phases take 1-2 rounds (sinks): rounding them up to the step would
                    // launch 2-3 empty rounds (~20 us each at 1080p) on every frame.
                    let step = if i == 0 { self.round_step } else { 1 };
                    want.div_ceil(step).saturating_mul(step).min(full[i])
                });
                (c, true)
            }
        }
    }

    /// [`Body::giant`] for this frame: the rounds where any recent frame had a giant tree, or
    /// every round without adaptive caps or a history (a new size, parameters, the first frame).
    fn giant_rounds(&self, adaptive: bool) -> [u64; 2] {
        let recent = self.recent.borrow();
        if !adaptive || recent.is_empty() || self.giant_blocks == 0 {
            return [u64::MAX; 2];
        }
        recent.iter().fold([0; 2], |acc, u| [acc[0] | u.giant[0], acc[1] | u.giant[1]])
    }

    /// Enqueues the segmentation of `channels` (1 or 3) interleaved samples per pixel.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_channels(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        channels: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        params.validate()?;
        check_frame_size(width * channels, height)?;
        let n = width * height;
        if n >= (1 << 30) {
            return Err(OpError::Unsupported(format!("{width}x{height}: edge ids need 4 * pixels < 2^32")));
        }
        crate::ops::blur::gpu::check_input(input, width, height, channels)?;
        self.ensure_buffers(stream, width, height)?;
        self.enqueue_graph(stream, timer, input, width, height, channels, params)?;
        let (caps, adaptive) = self.caps(params);
        let full = full_caps(params);
        let finish = adaptive && self.finisher;
        self.produced.set(Some(Produced { width, height, caps, finish, full, max_rounds: params.max_rounds, level: None }));
        self.last_body.set(None);
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        if n == 0 {
            return Ok(());
        }
        let body = Body {
            width,
            height,
            comp: b.p.comp,
            caps,
            k_bits: params.k().to_bits(),
            min_size: params.min_size as u32,
            max_rounds: params.max_rounds,
            programmatic: self.programmatic_launch && self.has_pdl,
            tiles: self.tile_pass,
            stamps: self.round_stamps,
            finish,
            full,
            giant: self.giant_rounds(adaptive),
        };
        if adaptive {
            self.last_body.set(Some(Body { caps: full_caps(params), ..body }));
        }
        if adaptive && self.use_graphs && !self.detailed_timing {
            let key = GraphKey { stream: stream.cu_stream() as usize, body };
            let replayed = {
                let mut graphs = self.graphs.borrow_mut();
                timer.time(stream, "segment_rounds", || {
                    graphs.launch(stream, key, || self.enqueue_body(stream, &mut None, &body))
                })
            };
            match replayed {
                Ok(()) => return Ok(()),
                // Nothing of the frame ran (a failed capture is ended and dropped): launch it
                // directly, and from now on (a driver without graph support fails every time).
                Err(e) => {
                    log::warn!("segmentation: CUDA graph capture or launch failed ({e}); launching kernels directly");
                    self.use_graphs = false;
                    self.graphs.borrow_mut().clear();
                }
            }
        }
        self.enqueue_body(stream, &mut Some(timer), &body)?;
        Ok(())
    }

    /// Graphs captured so far (each a new round-count bucket, parameter set or stream).
    #[must_use]
    pub fn graph_captures(&self) -> u64 {
        self.graphs.borrow().captures()
    }

    /// The frame's edge graph (weights `w4` and each pixel's edges sorted by key, `order`) from
    /// its bytes, launched before the rounds (so a frame run again starts from the same graph):
    /// `segment_blur_edges` (blur and edges in one tiled pass) when the blur's radius is at most
    /// [`FUSED_BLUR_RADIUS`], else the blur's two passes and `segment_edges` (timer regions
    /// `segment_blur` and `segment_graph`).
    #[allow(clippy::too_many_arguments)]
    fn enqueue_graph(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        input: &CudaSlice<u8>,
        width: usize,
        height: usize,
        channels: usize,
        params: &SegmentParams,
    ) -> Result<(), OpError> {
        let n = width * height;
        let Some(p) = self.bufs.as_ref().map(|b| b.p) else { return Ok(()) };
        if n == 0 {
            return Ok(());
        }
        let weights = BlurWeightsF64::new(&params.blur())?;
        let (w, h, c, eb) = (width as u32, height as u32, channels as u32, eid_bits(n));
        if weights.radius as u32 <= FUSED_BLUR_RADIUS && !self.separate_blur {
            let cfg = LaunchConfig {
                grid_dim: (w.div_ceil(FUSED_TILE.0), h.div_ceil(FUSED_TILE.1), 1),
                block_dim: (FUSED_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let inv255 = 1.0f64 / 255.0;
            timer.time(stream, "segment_graph", || {
                let mut l = stream.launch_builder(&self.f_blur_edges);
                l.arg(input).arg(&weights).arg(&p.w4).arg(&p.order).arg(&w).arg(&h).arg(&c).arg(&eb).arg(&inv255);
                // SAFETY: one block per 32x16 tile (grid above); the kernel reads input samples
                // of in-image pixels only (input holds n * channels bytes, checked by the
                // caller), radius <= SEG_GT_MAXR, and writes w4 (4n) and order (n) of its tile.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            return Ok(());
        }
        self.blur.enqueue_f64_named(stream, timer, input, width, height, channels, &params.blur(), "segment_blur")?;
        let Some(smooth) = self.blur.output_f64().map(|s| raw(s, stream)) else { return Ok(()) };
        timer.time(stream, "segment_graph", || {
            let mut l = stream.launch_builder(&self.f_edges);
            l.arg(&smooth).arg(&p.w4).arg(&p.order).arg(&w).arg(&h).arg(&c).arg(&eb);
            // SAFETY: grid-stride over pixels < n; only in-image neighbours are read; smooth
            // holds n * channels doubles (this frame's blur), w4 holds 4n, order n.
            unsafe { l.launch(Self::stride_within(n, self.edges_grid)) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Everything after the edge graph: init, the two phases of rounds, relabelling. With
    /// `timer` `None` it only launches kernels (what a graph capture records).
    fn enqueue_body(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        body: &Body,
    ) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let n = body.width * body.height;
        let nn = n as u32;
        let (nctl, ncounts) = (NCTL as u32, (NCOUNTS * NCTL) as u32);
        if body.stamps {
            self.stamp_labels.borrow_mut().clear();
            self.stamp(stream, "start", None)?;
        }
        // Pixels segment_init sets up (none when segment_tiles does it).
        let init_px = if body.tiles && self.init_in_tiles { 0 } else { nn };
        timed(timer, stream, "segment_init", || {
            let mut l = stream.launch_builder(&self.f_init);
            l.arg(&p.comp).arg(&p.link).arg(&p.size).arg(&p.cint).arg(&p.done).arg(&p.best).arg(&p.target);
            l.arg(&p.tree).arg(&p.tcnt).arg(&p.round).arg(&p.order).arg(&p.ctl).arg(&p.mctl).arg(&p.counts);
            l.arg(&init_px).arg(&nctl).arg(&ncounts);
            // SAFETY: grid-stride over max(init_px, NCOUNTS * NCTL); each array is written only
            // below its own length (init_px <= n, NCTL or NCOUNTS * NCTL), checked in the kernel.
            unsafe { l.launch(self.stride((init_px as usize).max(NCOUNTS * NCTL))) }?;
            Ok(())
        })?;
        if body.stamps {
            self.stamp(stream, "graph", None)?;
        }
        let k = f64::from_bits(body.k_bits);
        let min_size = body.min_size;
        let phases = [
            (MODE_MERGE, 1u32, body.caps[0], body.full[0], "segment_merge"),
            (MODE_MIN_SIZE, body.max_rounds + 1, body.caps[1], body.full[1], "segment_minsize"),
        ];
        for (slot, (mode, mut first, mut count, full, name)) in phases.into_iter().enumerate() {
            if count == 0 {
                continue;
            }
            let mut finish = if body.finish { full.saturating_sub(count) } else { 0 };
            let mut first_iter = ALL_SINGLE;
            if mode == MODE_MERGE && body.tiles {
                timed(timer, stream, "segment_tiles", || self.enqueue_tiles(stream, body))?;
                if body.stamps {
                    self.stamp(stream, "merge", Some(1))?;
                }
                (first, count, first_iter) = (2, count - 1, ALL);
                if count == 0 {
                    finish = 0;  // segment_finish continues from the lists of a launched round
                }
            }
            let ph = Phase {
                mode,
                first,
                first_iter,
                count,
                k,
                min_size,
                programmatic: body.programmatic,
                stamps: body.stamps,
                finish,
                giant: body.giant[slot],
                info_slot: 2 + slot as u32,
            };
            match timer {
                Some(t) if self.detailed_timing => self.enqueue_phase(stream, &mut Some(&mut **t), &ph)?,
                _ => timed(timer, stream, name, || self.enqueue_phase(stream, &mut None, &ph))?,
            }
        }
        // The relabelling kernels wait for the kernel before them themselves (grid_dep_wait).
        let pdl = body.programmatic && timer.is_none();
        timed(timer, stream, "segment_relabel", || {
            let mut l = ExLaunch::new(stream, &self.f_final, pdl);
            l.arg(&p.comp).arg(&p.link).arg(&p.minpix).arg(&nn);
            // SAFETY: grid-stride over pixels < n; link chains end at roots < n.
            unsafe { l.launch(self.stride(n)) }?;
            Ok(())
        })?;
        self.enqueue_numbering(stream, timer, pdl)?;
        if body.stamps {
            self.stamp(stream, "relabel", None)?;
        }
        Ok(())
    }

    /// Round 1 of the merge phase: `segment_tiles`, blocks of a pixel a thread striding over
    /// the tiles.
    fn enqueue_tiles(&self, stream: &Arc<CudaStream>, body: &Body) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let (w, h) = (body.width as u32, body.height as u32);
        let eb = eid_bits(body.width * body.height);
        let k = f64::from_bits(body.k_bits);
        let tiles = (body.width.div_ceil(TILE_W) * body.height.div_ceil(TILE_H)) as u32;
        let (ctl, mctl) = (p.ctl, p.mctl);
        let frontier = p.counts + 4 * (C_FRONTIER * NCTL as u64 + 1);
        let mut l = stream.launch_builder(&self.f_tiles);
        l.arg(&p.comp).arg(&p.link).arg(&p.size).arg(&p.cint).arg(&p.done).arg(&p.round).arg(&p.w4).arg(&p.order);
        l.arg(&w).arg(&h).arg(&eb).arg(&k).arg(&ctl).arg(&mctl).arg(&frontier);
        let init = u32::from(self.init_in_tiles);
        l.arg(&p.best).arg(&p.target).arg(&p.tree).arg(&p.tcnt).arg(&init);
        // The roots it leaves: round 2's input root list (rlist[1], count of round 1).
        let (roots, rcount) = (u32::from(self.tile_roots), p.counts + 4 * (C_ROOTS * NCTL as u64 + 1));
        l.arg(&p.rlist[1]).arg(&rcount).arg(&roots);
        // Blocks stride over the tiles (the kernel counts them from its own SEG_TILE_W / _H).
        let grid = tiles.min(self.tiles_grid).max(1);
        let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (TILE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: blocks of SEG_TILE_PX threads stride over the SEG_TILE_W x SEG_TILE_H tiles,
        // each tile writing only its own pixels (< n; the per-pixel arrays and the root list
        // hold n entries, a root at most once) and
        // reading order (n) and w4 (4n) at in-image pixels and edges; ctl/mctl have NCTL > 1
        // entries, counts NCOUNTS * NCTL.
        unsafe { l.launch(cfg) }?;
        Ok(())
    }

    /// Launches `segment_stamp` (the next entry of the stamp buffer) after what `stream` holds;
    /// `round`: the global number of the round it follows.
    fn stamp(&self, stream: &Arc<CudaStream>, label: &'static str, round: Option<u32>) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let mut labels = self.stamp_labels.borrow_mut();
        let i = labels.len() as u32;
        if i as usize >= NCTL + 4 {
            return Ok(());
        }
        let mut l = stream.launch_builder(&self.f_stamp);
        l.arg(&b.p.stamps).arg(&i);
        // SAFETY: one thread writes stamps[i], i < NCTL + 4 (the buffer's length).
        unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 }) }?;
        labels.push((label, round));
        Ok(())
    }

    /// Development diagnostic ([`SegmentGpu::round_stamps`] on): each interval of the last frame
    /// (setup, every round, relabelling) in microseconds, with the round's list counts (frontier,
    /// active roots, trees, members, small, large, cursor, tiny, mid-size; zeros elsewhere).
    /// Labels: `graph`, `merge N`, `min_size N` (N the global round number), `relabel`.
    pub fn round_profile(&self, stream: &Arc<CudaStream>) -> Result<Vec<(String, f64, Vec<u32>)>, OpError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(Vec::new()) };
        let labels = self.stamp_labels.borrow().clone();
        let t = stream.clone_dtoh(&b.stamps)?;
        let counts = stream.clone_dtoh(&b.counts)?;
        stream.synchronize()?;
        let mut out = Vec::new();
        for i in 1..labels.len() {
            let us = t[i].wrapping_sub(t[i - 1]) as f64 / 1e3;
            let (label, round) = labels[i];
            let (name, c) = match round.map(|r| r as usize).filter(|&r| r < NCTL) {
                Some(r) => (format!("{label} {r}"), (0..NCOUNTS).map(|k| counts[k * NCTL + r]).collect()),
                None => (label.to_owned(), vec![0; NCOUNTS]),
            };
            out.push((name, us, c));
        }
        Ok(out)
    }

    /// `count` rounds of `mode` with global numbers `first..`, each gated on the previous.
    fn enqueue_phase(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        ph: &Phase,
    ) -> Result<(), GpuError> {
        let (mode, first, count, k, min_size) = (ph.mode, ph.first, ph.count, ph.k, ph.min_size);
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let (w, h) = (b.width as u32, b.height as u32);
        let n = b.width * b.height;
        let nn = n as u32;
        let eb = eid_bits(n);
        let cfg = self.stride(n);
        let ms = mode == MODE_MIN_SIZE;
        let zlim = zero_key_limit(self.zero_joins, ms, k, nn, eb);
        // Every round kernel starts while the one before it drains (programmatic dependent
        // launch; each waits on the device first) unless every launch is timed (the timer's
        // events sit between them).
        let pdl = ph.programmatic && timer.is_none();
        let name = |merge: &'static str| if ms { "segment_minsize" } else { merge };
        // Address of list count `kind` of round `r`.
        let count_of = |kind: u64, r: u32| p.counts + 4 * (kind * NCTL as u64 + u64::from(r));
        // The min_size phase's first round runs over lists segment_reset_done makes (the pixels
        // and roots of components below min_size), which it counts in the unused slot of
        // round 0 (zeroed by segment_init) and writes where the first round reads its input
        // (flist[1], rlist[1]: the lists of "the previous round").
        let ms_lists = ms && self.min_size_lists;
        if ms {
            timed(timer, stream, "segment_minsize", || {
                let mut l = ExLaunch::new(stream, &self.f_reset_done, pdl);
                l.arg(&p.done).arg(&p.order).arg(&p.size).arg(&min_size).arg(&nn);
                let lists = u32::from(ms_lists);
                let (fc0, rc0) = (count_of(C_FRONTIER, 0), count_of(C_ROOTS, 0));
                l.arg(&p.comp).arg(&p.link);
                l.arg(&p.flist[1]).arg(&fc0).arg(&p.rlist[1]).arg(&rc0).arg(&lists);
                // SAFETY: block-uniform grid-stride over pixels < n; link chains end at roots
                // < n; each list gets at most n entries (one a pixel), counts NCOUNTS * NCTL.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
        }
        // Round r's index in its phase's giant mask (merge rounds count from 1, min_size rounds
        // from the phase's first).
        let phase_first = if ms { first } else { 1 };
        for i in 0..count {
            let r = first + i;
            let gi = r - phase_first;
            let giant_here = self.giant_blocks > 0 && (gi >= 64 || (ph.giant >> gi) & 1 == 1);
            let gcnt = count_of(C_GIANT, r);
            let gate = if i == 0 { 0 } else { r - 1 };
            // The caterpillar kernels' parameters (SEG_CAT_ARGS) for tree list `$list`.
            macro_rules! cat_args {
                ($l:ident, $list:expr, $lcount:expr) => {
                    $l.arg(&p.link).arg(&p.done).arg(&p.size).arg(&p.cint).arg(&p.tkey).arg(&p.tcnt).arg(&p.joff);
                    $l.arg(&p.jarr).arg(&p.round).arg(&p.w4).arg(&eb).arg(&mode).arg(&min_size);
                    $l.arg(&k).arg(&p.ctl).arg(&p.mctl).arg(&gate).arg(&r).arg($list).arg($lcount);
                    $l.arg(&p.scr_k).arg(&p.scr_i).arg(&nn).arg(&gcnt);
                };
            }
            // Rounds after the first of their phase run over the previous round's lists.
            let from_lists = i == 0 && ms_lists;
            let use_list = if i > 0 || from_lists { LIST } else { ph.first_iter };
            // Round 2 after segment_tiles: its targets take the roots tiles listed.
            let targets_list = if !ms && i == 0 && ph.first_iter == ALL && self.tile_roots { LIST } else { use_list };
            let (cur, prev) = ((i & 1) as usize, ((i + 1) & 1) as usize);
            let (fin, fout) = (p.flist[prev], p.flist[cur]);
            let (rin, rout) = (p.rlist[prev], p.rlist[cur]);
            let input = if from_lists { 0 } else { r - 1 };
            let (fcin, fcout) = (count_of(C_FRONTIER, input), count_of(C_FRONTIER, r));
            let (rcin, rcout) = (count_of(C_ROOTS, input), count_of(C_ROOTS, r));
            let (hcount, xcount) = (count_of(C_TREES, r), count_of(C_MEMBERS, r));
            let (scount, bcount, cursor) = (count_of(C_SMALL, r), count_of(C_LARGE, r), count_of(C_CURSOR, r));
            let (tcount, mcount) = (count_of(C_TINY, r), count_of(C_MID, r));
            timed(timer, stream, name("segment_minedge"), || {
                let mut l = ExLaunch::new(stream, &self.f_least, pdl);
                l.arg(&p.comp).arg(&p.link).arg(&p.w4).arg(&p.best).arg(&p.done).arg(&p.target).arg(&p.tkey);
                l.arg(&p.order).arg(&w).arg(&h).arg(&eb).arg(&mode).arg(&p.ctl).arg(&gate).arg(&use_list);
                l.arg(&fin).arg(&fcin).arg(&fout).arg(&fcout);
                // SAFETY: grid-stride over pixels < n (or list entries < the list's count, which
                // hold pixel ids); neighbours are bounds-checked; lists hold n entries.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            // Targets and trees in one launch, over a list of roots (the previous round's, or the
            // lists of segment_tiles and segment_reset_done that start a phase).
            let fused = targets_list == LIST && self.fuse_from > 0 && (ms || r >= self.fuse_from);
            if fused {
                timed(timer, stream, name("segment_targets_trees"), || {
                    let mut l = ExLaunch::new(stream, &self.f_targets_trees, pdl);
                    l.arg(&p.comp).arg(&p.link).arg(&p.best).arg(&p.tkey).arg(&p.target).arg(&p.tree);
                    l.arg(&p.exitk).arg(&p.done).arg(&w).arg(&eb).arg(&mode).arg(&p.ctl).arg(&p.mctl);
                    l.arg(&gate).arg(&r).arg(&rin).arg(&rcin).arg(&rout).arg(&rcout).arg(&p.tcnt);
                    l.arg(&p.hlist).arg(&hcount);
                    // SAFETY: grid-stride over the previous round's roots (list entries < its
                    // count, ids < n); edge ids decode to pixels < n; each walk follows targets
                    // to a mutual pair or a sink; a tree is listed once; r < NCTL.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
            } else {
                timed(timer, stream, name("segment_targets"), || {
                    let mut l = ExLaunch::new(stream, &self.f_targets, pdl);
                    l.arg(&p.comp).arg(&p.link).arg(&p.best).arg(&p.tkey).arg(&p.target).arg(&p.tree).arg(&p.exitk);
                    l.arg(&p.done).arg(&w).arg(&nn).arg(&eb).arg(&mode).arg(&p.ctl).arg(&p.mctl).arg(&gate).arg(&r);
                    l.arg(&targets_list).arg(&rin).arg(&rcin).arg(&rout).arg(&rcout);
                    // SAFETY: grid-stride over roots < n; edge ids decode to pixels < n; r < NCTL.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
                timed(timer, stream, name("segment_trees"), || {
                    let mut l = ExLaunch::new(stream, &self.f_trees, pdl);
                    l.arg(&p.target).arg(&p.tree).arg(&p.done).arg(&mode).arg(&p.tcnt).arg(&p.hlist).arg(&hcount);
                    l.arg(&p.ctl).arg(&gate).arg(&rout).arg(&rcout);
                    // SAFETY: grid-stride over this round's active roots (ids < n, each with a
                    // target whose chain ends in a mutual pair or a sink); a tree is listed once (by
                    // its first counted member), at most n trees.
                    unsafe { l.launch(cfg) }?;
                    Ok(())
                })?;
            }
            // With per-launch timing everything stays on `stream` (the timer's events are there);
            // else the trees' ranges are allocated on a side stream while the exits are scanned.
            let concurrent = timer.is_none();
            if concurrent {
                self.fork.record(stream)?;
                self.side[0].wait(&self.fork)?;
            }
            let on = if concurrent { &self.side[0] } else { stream };
            timed(timer, stream, name("segment_alloc"), || {
                let mut l = ExLaunch::new(on, &self.f_alloc, pdl);
                l.arg(&p.tcnt).arg(&p.joff).arg(&cursor);
                l.arg(&p.done).arg(&mode).arg(&p.jarr).arg(&p.tkey);
                l.arg(&p.ctl).arg(&gate).arg(&p.hlist).arg(&hcount);
                // SAFETY: grid-stride over the listed trees (ids < n, each once); the ranges sum
                // to the round's active roots plus one slot per sink tree (the sink, a root
                // outside them), at most n. It reads and writes nothing segment_exits touches.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            timed(timer, stream, name("segment_exits"), || {
                let mut l = ExLaunch::new(stream, &self.f_exits, pdl);
                l.arg(&p.comp).arg(&p.link).arg(&p.w4).arg(&p.done).arg(&p.target).arg(&p.tree).arg(&p.order);
                l.arg(&p.exitk).arg(&w).arg(&eb).arg(&mode).arg(&p.ctl).arg(&gate);
                l.arg(&fout).arg(&fcout);
                // SAFETY: grid-stride over this round's frontier (pixel ids < n); the order
                // words only name in-image neighbours; tree ids are roots < n.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            if concurrent {
                self.joins[0].record(&self.side[0])?;
                stream.wait(&self.joins[0])?;
            }
            timed(timer, stream, name("segment_core"), || {
                let mut l = ExLaunch::new(stream, &self.f_core, pdl);
                l.arg(&p.target).arg(&p.tree).arg(&p.best).arg(&p.tkey).arg(&p.exitk).arg(&p.done).arg(&mode);
                l.arg(&p.tcnt).arg(&p.joff).arg(&p.jarr).arg(&xcount);
                l.arg(&p.tlist).arg(&tcount).arg(&p.slist).arg(&scount).arg(&p.mlist).arg(&mcount);
                l.arg(&p.blist).arg(&bcount).arg(&p.ctl).arg(&p.mctl).arg(&gate).arg(&rout).arg(&rcout);
                l.arg(&p.link).arg(&p.size).arg(&p.round).arg(&r).arg(&zlim);
                // SAFETY: grid-stride over the active roots (ids < n); a weight-0 member joins
                // its tree's id (< n) directly; r < NCTL; a core member's slot is
                // below its tree's member count (its range's length, from segment_alloc, which
                // this stream has waited for), so it lands in the tree's range inside jarr; each
                // tree is listed once (by the group that counts its members off to 0), at most
                // n trees.
                unsafe { l.launch(cfg) }?;
                Ok(())
            })?;
            if concurrent {
                self.fork.record(stream)?;
                for side in &self.side {
                    side.wait(&self.fork)?;
                }
            }
            for (j, (f, list, lcount, lcfg, region)) in [
                (&self.f_cat_thread, p.tlist, tcount, self.tiny_cfg, "segment_cat_thread"),
                (&self.f_cat_warp, p.slist, scount, self.warp_cfg, "segment_cat_warp"),
                (&self.f_cat_mid, p.mlist, mcount, self.mid_cfg, "segment_cat_mid"),
                (
                    if giant_here { &self.f_cat_block_g } else { &self.f_cat_block },
                    p.blist,
                    bcount,
                    self.block_cfg,
                    "segment_cat_block",
                ),
            ]
            .into_iter()
            .enumerate()
            {
                let on = if concurrent && j > 0 { &self.side[j - 1] } else { stream };
                timed(timer, stream, name(region), || {
                    let mut l = ExLaunch::new(on, f, pdl);
                    cat_args!(l, &list, &lcount);
                    // SAFETY: one thread (warp, block) per listed tree, each tree listed once, the
                    // four lists disjoint (so the kernels may run at once); a member is in one
                    // tree's range, so its link/round and the tree root's size/Int/done
                    // are written by that thread (warp, block) only, as is the tree's range of the
                    // sort scratch (2n keys and ids: [off, off + count) and n past it); the block
                    // launches have their kernels' SEG_CAT_THREADS / SEG_CAT_MID_THREADS threads;
                    // segment_cat_block stages a whole tree only when it fits the dynamic shared
                    // memory given here (its capacity read from %dynamic_smem_size).
                    unsafe { l.launch(lcfg) }?;
                    Ok(())
                })?;
            }
            if giant_here {
                // After segment_cat_block_g on its stream (a branch of its own cost more).
                let on = if concurrent { &self.side[2] } else { stream };
                timed(timer, stream, name("segment_cat_giant"), || {
                    let mut l = ExLaunch::new(on, &self.f_cat_giant, false).cooperative();
                    cat_args!(l, &p.blist, &bcount);
                    l.arg(&p.giant);
                    let gcfg = LaunchConfig {
                        grid_dim: (self.giant_blocks, 1, 1),
                        block_dim: (CAT_THREADS, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    // SAFETY: the large trees' list, of which it takes the trees above
                    // SEG_CAT_GIANT members and segment_cat_block_g the others (a tree's count is
                    // zeroed by the one that walked it, and both read a zero as "not mine"); a
                    // cooperative grid of at most the blocks the device holds at once, so its
                    // barriers (in the GIANT_WORDS scratch, zero between trees) complete; the
                    // scratch ranges of its trees are theirs alone.
                    unsafe { l.launch(gcfg) }?;
                    Ok(())
                })?;
            }
            if concurrent {
                for (side, join) in self.side.iter().zip(&self.joins) {
                    join.record(side)?;
                    stream.wait(join)?;
                }
            }
            if ph.stamps {
                self.stamp(stream, if ms { "min_size" } else { "merge" }, Some(r))?;
            }
        }
        if ph.finish > 0 {
            let from = first + count;
            let a = SegFinish {
                p,
                k,
                zlim,
                width: w,
                height: h,
                n: nn,
                eb,
                mode,
                min_size,
                nctl: NCTL as u32,
                first,
                from,
                last: from + ph.finish - 1,
                limit: self.finish_limit,
                info_slot: ph.info_slot,
                solo: self.finish_solo,
                resume: 0,
            };
            timed(timer, stream, name("segment_finish"), || {
                if self.grid_finisher {
                    let mut l = ExLaunch::new(stream, &self.f_finish_grid, false).cooperative();
                    l.arg(&a);
                    let cfg = LaunchConfig {
                        grid_dim: (self.grid_finish_blocks, 1, 1),
                        block_dim: (CAT_THREADS, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    // SAFETY: as below over a cooperative grid of at most the blocks the device
                    // holds at once (so its barriers, info[4..6], complete); info has 8 entries.
                    unsafe { l.launch(cfg) }?;
                    if self.finish_solo == 0 {
                        return Ok(());
                    }
                }
                // After the grid: the rounds it left, from the one it recorded in info[6].
                let a = SegFinish { resume: u32::from(self.grid_finisher), ..a };
                // A programmatic launch where allowed: segment_finish starts with grid_dep_wait.
                let mut l = ExLaunch::new(stream, &self.f_finish, pdl);
                l.arg(&a);
                // SAFETY: one block of SEG_CAT_THREADS threads runs rounds from..=last (< NCTL)
                // over this frame's buffers, the same accesses as the round kernels (each step's
                // grid-stride loops over one block); info has 8 entries (info_slot 2 or 3).
                unsafe {
                    l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (CAT_THREADS, 1, 1), shared_mem_bytes: 0 })
                }?;
                Ok(())
            })?;
            if ph.stamps {
                self.stamp(stream, if ms { "min_size finish" } else { "merge finish" }, None)?;
            }
        }
        Ok(())
    }

    /// Raster-order numbering of `comp` (minpix must hold `SEG_NONE`); `pdl`: as programmatic
    /// dependent launches (each kernel waits for the one before it itself).
    fn enqueue_numbering(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        pdl: bool,
    ) -> Result<(), GpuError> {
        let Some(b) = self.bufs.as_ref() else { return Ok(()) };
        let p = b.p;
        let n = b.width * b.height;
        let (w, nn) = (b.width as u32, n as u32);
        let nblocks = blocks_for(n, SCAN_BLOCK);
        let cfg = self.stride(n);
        timed(timer, stream, "segment_relabel", || {
            let mut l = ExLaunch::new(stream, &self.f_minpix, pdl);
            l.arg(&p.comp).arg(&p.minpix).arg(&w).arg(&nn);
            // SAFETY: grid-stride over pixels < n; comp values are roots < n.
            unsafe { l.launch(cfg) }?;
            let mut l = ExLaunch::new(stream, &self.f_scan_count, pdl);
            l.arg(&p.comp).arg(&p.minpix).arg(&p.blocksum).arg(&nn);
            // SAFETY: SCAN_BLOCK threads per block, one block sum each (blocksum has nblocks).
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = ExLaunch::new(stream, &self.f_scan_blocks, pdl);
            l.arg(&p.blocksum).arg(&nblocks).arg(&p.info);
            // SAFETY: a single block scanning nblocks entries.
            unsafe {
                l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (SCAN_BLOCK, 1, 1), shared_mem_bytes: 0 })
            }?;
            let mut l = ExLaunch::new(stream, &self.f_scan_label, pdl);
            l.arg(&p.comp).arg(&p.minpix).arg(&p.blocksum).arg(&p.rootlabel).arg(&nn);
            // SAFETY: as scan_count; rootlabel is indexed by roots < n.
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = ExLaunch::new(stream, &self.f_labels, pdl);
            l.arg(&p.comp).arg(&p.rootlabel).arg(&p.labels).arg(&nn);
            // SAFETY: grid-stride over pixels < n.
            unsafe { l.launch(cfg) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues the labels of hierarchy `level` (0: one segment per pixel; `levels() - 1` or
    /// more: the final segmentation) of the last segmented frame, without recomputing it.
    /// [`SegmentGpu::download`] then returns that level.
    pub fn enqueue_level(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        level: u32,
    ) -> Result<(), OpError> {
        let Some(mut prod) = self.produced.get() else {
            return Err(OpError::InvalidParam("enqueue_level needs a segmented frame (call enqueue)".into()));
        };
        prod.level = Some(level);
        self.produced.set(Some(prod));
        let n = prod.width * prod.height;
        let total = NCTL as u32 - 1;
        let Some(b) = self.bufs.as_ref().filter(|_| n > 0) else { return Ok(()) };
        let p = b.p;
        let nn = n as u32;
        timer.time(stream, "segment_relabel", || {
            let mut l = stream.launch_builder(&self.f_level_threshold);
            l.arg(&p.mctl).arg(&total).arg(&level).arg(&p.info);
            // SAFETY: one thread reads mctl[1..=total] (total < NCTL) and writes info[1].
            unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }?;
            let mut l = stream.launch_builder(&self.f_level_comp);
            l.arg(&p.comp).arg(&p.link).arg(&p.round).arg(&p.minpix).arg(&p.info).arg(&nn);
            // SAFETY: grid-stride over pixels < n; link chains end at never-absorbed roots.
            unsafe { l.launch(self.stride(n)) }?;
            Ok(())
        })?;
        Ok(self.enqueue_numbering(stream, &mut Some(timer), false)?)
    }

    /// Levels (rounds that merged) and per-phase use from the counters.
    /// `frontier`: each round's frontier count; `info`: the op's info words (`segment_finish`
    /// reports a phase it left undone in `info[2 + phase]`); `hand`: `FINISH_FRONTIER`.
    fn read_rounds(ctl: &[u32], mctl: &[u32], frontier: &[u32], info: &[u32], prod: &Produced, hand: u32) -> (Vec<u16>, RoundsUsed) {
        let firsts = [1, prod.max_rounds + 1];
        let mut used = RoundsUsed::default();
        let mut levels = Vec::new();
        for (ph, &first) in firsts.iter().enumerate() {
            // With segment_finish the phase ran on past its launched rounds.
            let cap = if prod.finish { prod.full[ph] } else { prod.caps[ph] };
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
            used.capped[ph] = left || (cap > 0 && ctl.get((first + cap - 1) as usize).is_some_and(|&c| c > 0));
            // The first round after which at most `hand` frontier pixels were left.
            let last = used.used[ph] + 1;
            used.handoff[ph] = (1..last)
                .find(|&i| frontier.get((first + i - 1) as usize).is_some_and(|&f| f <= hand))
                .unwrap_or(last)
                .min(cap.max(1));
        }
        (levels, used)
    }

    /// Blocking readback of the last enqueued frame (or level).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<SegmentOutput, OpError> {
        self.download_with(stream, None)
    }

    fn download_with(
        &self,
        stream: &Arc<CudaStream>,
        hier: Option<&mut Option<SegmentHierarchy>>,
    ) -> Result<SegmentOutput, OpError> {
        let Some(mut p) = self.produced.get() else {
            return Err(OpError::InvalidParam("download before any enqueue".into()));
        };
        let n = p.width * p.height;
        let Some(b) = self.bufs.as_ref().filter(|_| n > 0) else {
            return Ok(SegmentOutput {
                labels: Image::new(p.width, p.height, 0),
                segment_count: 0,
                rounds: 0,
                min_size_rounds: 0,
                capped: false,
                level: 0,
                has_rounds: true,
            });
        };
        // Round counters, each round's frontier (C_FRONTIER is the counts' first row), the
        // rounds with a giant tree ([`Body::giant`]) and the info words (the segment count).
        let read = |p: &Produced| -> Result<FrameCounts, OpError> {
            let ctl = stream.clone_dtoh(&b.ctl)?;
            let mctl = stream.clone_dtoh(&b.mctl)?;
            let frontier = stream.clone_dtoh(&b.counts.slice(0..NCTL))?;
            let giants = stream.clone_dtoh(&b.counts.slice(C_GIANT as usize * NCTL..(C_GIANT as usize + 1) * NCTL))?;
            let info = stream.clone_dtoh(&b.info)?;
            stream.synchronize()?;
            let (levels, used) = Self::read_rounds(&ctl, &mctl, &frontier, &info, p, self.finish_frontier);
            Ok(FrameCounts { levels, used, giant: giant_masks(&giants, p.max_rounds), info })
        };
        let max_rounds = p.max_rounds;
        let FrameCounts { mut levels, mut used, giant: mut giants, mut info } = read(&p)?;
        // A frame that hit its adaptive caps (video that changed) is run again with larger caps
        // (doubled, up to the parameters'), so every frame is the exact result.
        let mut rerun = false;
        while p.level.is_none() && (used.capped[0] || used.capped[1]) {
            let Some(full) = self.last_body.get() else { break };
            let mut caps = p.caps;
            for ((c, &capped), &most) in caps.iter_mut().zip(&used.capped).zip(&full.caps) {
                if capped {
                    *c = c.saturating_mul(2).max(self.round_step).min(most);
                }
            }
            if caps == p.caps {
                break;
            }
            if !rerun {
                self.reruns.set(self.reruns.get() + 1);
                rerun = true;
            }
            log::debug!("segmentation: frame needed more rounds than {:?}, running it again with {caps:?}", p.caps);
            self.enqueue_body(stream, &mut None, &Body { caps, ..full })?;
            p.caps = caps;
            self.produced.set(Some(p));
            FrameCounts { levels, used, giant: giants, info } = read(&p)?;
        }
        let labels = self.labels_readback.borrow_mut().fetch(stream, &b.labels, n)?;
        self.hint.set(Some(used));
        if p.level.is_none() {
            let mut recent = self.recent.borrow_mut();
            if recent.len() == ADAPTIVE_HISTORY {
                recent.pop_front();
            }
            // What this frame wants launched: the rounds before the hand-off to segment_finish,
            // or the rounds it used plus a margin; the rounds that walked a giant tree.
            recent.push_back(Recent {
                rounds: std::array::from_fn(|i| {
                    if p.finish { used.handoff[i].max(1) } else { used.used[i] + ADAPTIVE_MARGIN }
                }),
                giant: giants,
            });
        }
        let ms_first = max_rounds + 1;
        let ms = levels.iter().filter(|&&r| u32::from(r) >= ms_first).count() as u32;
        let top = levels.len() as u32;
        if let Some(hs) = hier {
            let parent = stream.clone_dtoh(&b.link.slice(0..n))?;
            let round = stream.clone_dtoh(&b.round.slice(0..n))?;
            stream.synchronize()?;
            *hs = Some(SegmentHierarchy {
                width: p.width,
                height: p.height,
                parent,
                round,
                level_rounds: levels.clone(),
            });
        }
        Ok(SegmentOutput {
            labels: Image::from_vec(p.width, p.height, labels)?,
            segment_count: info[0] as usize,
            rounds: top - ms,
            min_size_rounds: ms,
            capped: used.capped[0] || used.capped[1],
            level: p.level.map_or(top, |l| l.min(top)),
            has_rounds: true,
        })
    }

    /// Blocking readback of the labels and the whole hierarchy of the last segmented frame.
    pub fn download_hierarchy(&self, stream: &Arc<CudaStream>) -> Result<(SegmentOutput, SegmentHierarchy), OpError> {
        let mut h = None;
        let out = self.download_with(stream, Some(&mut h))?;
        let p = self.produced.get().map_or((0, 0), |p| (p.width, p.height));
        let hier = h.unwrap_or(SegmentHierarchy {
            width: p.0,
            height: p.1,
            parent: Vec::new(),
            round: Vec::new(),
            level_rounds: Vec::new(),
        });
        Ok((out, hier))
    }

    /// The edge weights of the last enqueue, `4 * pixels` (right, down, down-right, down-left of
    /// each pixel; +inf outside the image), for parity tests of the blur and edge graph.
    pub fn download_weights(&self, stream: &Arc<CudaStream>) -> Result<Vec<f64>, OpError> {
        let n = self.produced.get().map_or(0, |p| p.width * p.height);
        match self.bufs.as_ref() {
            Some(b) if n > 0 => Ok(stream.clone_dtoh(&b.w4.slice(0..4 * n))?),
            _ => Ok(Vec::new()),
        }
    }
}

/// Uploads `data` (packed, `channels` samples a pixel), segments it on the GPU and downloads
/// the labels.
fn run_packed(
    gpu: &GpuContext,
    data: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    params: &SegmentParams,
) -> Result<SegmentOutput, OpError> {
    let mut op = SegmentGpu::new(gpu)?;
    let stream = gpu.new_stream()?;
    let mut timer = KernelTimer::new();
    let input = upload_packed(&stream, data, width, height)?;
    op.enqueue_channels(&stream, &mut timer, &input, width, height, channels, params)?;
    op.download(&stream)
}

/// Uploads a grey image, segments it on the GPU and downloads the labels (CLI and tests).
pub fn segment_gpu(gpu: &GpuContext, img: ImageView<'_, u8>, params: &SegmentParams) -> Result<SegmentOutput, OpError> {
    run_packed(gpu, &pack_gray(img), img.width(), img.height(), 1, params)
}

/// Uploads an RGB image, segments it on the GPU and downloads the labels.
pub fn segment_gpu_rgb(
    gpu: &GpuContext,
    img: ImageView<'_, [u8; 3]>,
    params: &SegmentParams,
) -> Result<SegmentOutput, OpError> {
    run_packed(gpu, &pack_rgb(img), img.width(), img.height(), 3, params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_parameters_have_the_kernel_layout() {
        // 37 device addresses (SegPtrs), k, zlim, 14 u32s (SegFinish in segment.cu).
        assert_eq!(std::mem::size_of::<Ptrs>(), 37 * 8);
        assert_eq!(std::mem::size_of::<SegFinish>(), 37 * 8 + 8 + 8 + 14 * 4);
        assert_eq!(std::mem::align_of::<SegFinish>(), 8);
    }

    #[test]
    fn giant_masks_mark_the_rounds_with_giant_trees() {
        let max_rounds = 100;
        let mut counts = vec![0u32; NCTL];
        counts[1] = 1; // merge round 1
        counts[11] = 2; // merge round 11
        counts[70] = 1; // merge round 70: past the mask, always launched
        counts[max_rounds as usize + 2] = 1; // min_size round 2
        let m = giant_masks(&counts, max_rounds);
        assert_eq!(m, [1 | (1 << 10), 1 << 1]);
        assert_eq!(giant_masks(&vec![0; NCTL], max_rounds), [0, 0]);
    }

    /// `Ptrs` and segment.cu's `SegPtrs` name the same fields in the same order (a field added
    /// on one side only shifts every address after it: the grid finisher's barrier then lands
    /// in another buffer and the frame never finishes).
    #[test]
    fn ptrs_fields_match_the_kernel_struct() {
        let dbg = format!("{:?}", Ptrs::default());
        let body = &dbg[dbg.find('{').unwrap() + 1..dbg.rfind('}').unwrap()];
        let parts: Vec<&str> = body.split(": ").collect();
        let rust: Vec<&str> =
            parts[..parts.len() - 1].iter().map(|p| p.rsplit([' ', ',']).next().unwrap()).collect();
        let src = include_str!("../../../kernels/segment/grid.cuh");
        let start = src.find("struct SegPtrs {").unwrap();
        let end = start + src[start..].find("};").unwrap();
        let kernel: Vec<&str> = src[start..end]
            .lines()
            .skip(1)
            .filter_map(|l| l.trim().strip_suffix(';'))
            .map(|decl| {
                let name = decl.rsplit(['*', ' ']).next().unwrap();
                name.split('[').next().unwrap()
            })
            .collect();
        assert_eq!(rust, kernel);
    }

    #[test]
    fn rounds_from_counters() {
        let prod =
            Produced { width: 1, height: 1, caps: [4, 3], finish: false, full: [4, 3], max_rounds: 4, level: None };
        let mut ctl = vec![0u32; NCTL];
        let mut mctl = vec![0u32; NCTL];
        let mut frontier = vec![0u32; NCTL];
        let mut info = vec![0u32; 4];
        ctl[0] = 1;
        // Merge rounds 1..=4 (round 2 froze components but merged nothing), min_size 5..=7.
        for (r, e, m, f) in [(1, 5, 5, 900), (2, 1, 0, 500), (3, 2, 2, 90), (5, 9, 3, 700), (6, 1, 1, 600)] {
            ctl[r] = e;
            mctl[r] = m;
            frontier[r] = f;
        }
        let read = |ctl: &[u32], frontier: &[u32], info: &[u32], prod: &Produced| {
            SegmentGpu::read_rounds(ctl, &mctl, frontier, info, prod, 100)
        };
        let (lv, used) = read(&ctl, &frontier, &info, &prod);
        assert_eq!(lv, vec![1, 3, 5, 6]);
        assert_eq!(used.used, [3, 2]);
        assert_eq!(used.capped, [false, false]);
        // Merge: round 3 left 90 <= 100 frontier pixels; min_size: never, so one past its last.
        assert_eq!(used.handoff, [3, 3]);
        ctl[4] = 1;
        assert!(read(&ctl, &frontier, &info, &prod).1.capped[0]);
        ctl[4] = 0;
        // segment_finish ran each phase on to the parameters' caps (8 / 4 rounds here): its
        // rounds count, and a phase it left undone is capped.
        let fin = Produced { caps: [2, 1], finish: true, full: [8, 4], max_rounds: 8, ..prod };
        let (mut ctl8, mut mctl8, mut front8) = (vec![0u32; NCTL], vec![0u32; NCTL], vec![0u32; NCTL]);
        for (r, e, f) in [(1, 5, 900), (2, 3, 400), (3, 2, 50), (4, 1, 10), (9, 4, 300), (10, 1, 20)] {
            ctl8[r] = e;
            mctl8[r] = e;
            front8[r] = f;
        }
        let (lv, used) = SegmentGpu::read_rounds(&ctl8, &mctl8, &front8, &info, &fin, 100);
        assert_eq!(lv, vec![1, 2, 3, 4, 9, 10]);
        assert_eq!(used.used, [4, 2]);
        assert_eq!(used.capped, [false, false]);
        assert_eq!(used.handoff, [3, 2]);
        info[3] = 1;
        assert_eq!(SegmentGpu::read_rounds(&ctl8, &mctl8, &front8, &info, &fin, 100).1.capped, [false, true]);
    }
}
