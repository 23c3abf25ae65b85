//! What the host shares with `kernels/segmentation.cu` (keep in sync with it): the buffers'
//! addresses and the finisher's parameter block (`#[repr(C)]`, the kernels' `SegmentationPtrs` and
//! `SegmentationFinish`), the per-round counters' layout, kernel modes and block sizes.

use super::super::MAX_ROUNDS_LIMIT;
use super::super::boruvka::{TILE_H, TILE_W};

/// Raw device addresses of the op's buffers. The kernels of one frame run on one stream in
/// order, so the launches pass these plain addresses instead of tracked `CudaSlice`s: cudarc's
/// per-argument event tracking costs ~1 µs per argument and a frame launches hundreds of
/// kernels with ~20 arguments each. `#[repr(C)]`: `segmentation_finish` takes the whole struct
/// (`SegmentationPtrs` in segmentation/grid.cuh, the same fields in the same order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SegmentationPtrs {
    pub w4: u64,
    pub comp: u64,
    pub link: u64,
    pub size: u64,
    pub cint: u64,
    pub done: u64,
    pub best: u64,
    pub tkey: u64,
    pub target: u64,
    pub tree: u64,
    pub exitk: u64,
    /// Per tree: core members (slots taken, low half) and members not yet counted off (high
    /// half) in one `u64`; each tree's range and the ranges.
    pub tcnt: u64,
    pub joff: u64,
    pub jarr: u64,
    /// Trees of the round, then its tiny, mid-size, small and large trees.
    pub hlist: u64,
    pub tlist: u64,
    pub mlist: u64,
    pub slist: u64,
    pub blist: u64,
    /// Per pixel: its edges' directions sorted by key, a cursor past its dead edges, the count.
    pub order: u64,
    pub round: u64,
    pub minpix: u64,
    pub rootlabel: u64,
    pub labels: u64,
    pub blocksum: u64,
    pub ctl: u64,
    pub mctl: u64,
    pub counts: u64,
    /// The large trees' radix sorts: keys and ids, 2n each.
    pub scr_k: u64,
    pub scr_i: u64,
    /// segmentation_cat_giant's barrier, range, counts and sums ([`GIANT_WORDS`], zero between trees).
    pub giant: u64,
    pub flist: [u64; 2],
    pub rlist: [u64; 2],
    pub info: u64,
}

/// The parameter block of `segmentation_finish` (`SegmentationFinish` in segmentation/grid.cuh, the same layout:
/// the buffers' addresses, then `k`, then the `u32`s).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct SegmentationFinish {
    pub p: SegmentationPtrs,
    pub k: f64,
    /// `segmentation_core`'s weight-0 key limit ([`super::history::zero_key_limit`]).
    pub zlim: u64,
    pub width: u32,
    pub height: u32,
    pub n: u32,
    pub eb: u32,
    pub mode: u32,
    pub min_size: u32,
    pub nctl: u32,
    /// Global number of the phase's first round (its lists' parity counts from it).
    pub first: u32,
    /// First round run here (the rounds before it were launched).
    pub from: u32,
    /// Last round allowed (the parameters' cap).
    pub last: u32,
    /// Most frontier pixels a round here may start with.
    pub limit: u32,
    /// `info[info_slot]` = 1 when a round was left with work (frontier above `limit`).
    pub info_slot: u32,
    /// `segmentation_finish_grid` leaves a round with at most this many frontier pixels to
    /// `segmentation_finish`.
    pub solo: u32,
    /// `segmentation_finish` starts where `segmentation_finish_grid` stopped (`info[6]`), not at `from`.
    pub resume: u32,
}

// SAFETY: plain old data with the C layout of the kernel's struct (8-byte fields first, then
// 4-byte ones; 360 bytes, a multiple of 8), passed by value as a kernel parameter.
unsafe impl cudarc::driver::DeviceRepr for SegmentationFinish {}
const _: () = assert!(std::mem::size_of::<SegmentationFinish>() == 36 * 8 + 8 + 8 + 14 * 4);

/// Entries of the per-round counters (`ctl[0]` is the always-on gate; merge rounds are
/// `1..=max_rounds`, `min_size` rounds follow).
pub(super) const NCTL: usize = 2 * MAX_ROUNDS_LIMIT as usize + 2;
/// Per-round list counts, `NCTL` entries each: frontier, active roots, trees with members,
/// members, small trees, large trees, range cursor, tiny trees, mid-size trees, giant trees
/// (`SEG_C_*` in segmentation/cat_large.cuh).
pub(super) const NCOUNTS: usize = 10;
pub(super) const C_FRONTIER: u64 = 0;
pub(super) const C_ROOTS: u64 = 1;
pub(super) const C_TREES: u64 = 2;
pub(super) const C_MEMBERS: u64 = 3;
pub(super) const C_SMALL: u64 = 4;
pub(super) const C_LARGE: u64 = 5;
pub(super) const C_CURSOR: u64 = 6;
pub(super) const C_TINY: u64 = 7;
pub(super) const C_MID: u64 = 8;
pub(super) const C_GIANT: u64 = 9;
/// Words of the info buffer: 0 the segment count, 1 the level threshold, 2-3 the phases the
/// finisher left undone, 4 `segmentation_finish_grid`'s barrier (zero at allocation), 6 the round it
/// stopped at.
pub(super) const INFO_WORDS: usize = 8;
/// `u64` words of `segmentation_cat_giant`'s scratch (SEG_GIANT_WORDS: the barrier, the keys' range,
/// the first failing step, then 2048 part counts and 2048 bucket sums as `u32`).
pub(super) const GIANT_WORDS: usize = 4 + 2048;
/// Pixels per block of the relabel scan.
pub(super) const SCAN_BLOCK: u32 = 1024;
/// Threads per block of the grid-stride kernels.
pub(super) const BLOCK: u32 = 256;
/// Threads per block of `segmentation_cat_block`, `_giant` and the finishers (SEG_CAT_THREADS).
pub(super) const CAT_THREADS: u32 = 1024;
/// Threads per block of `segmentation_cat_mid` and `segmentation_cat_small` (SEG_CAT_MID_THREADS).
pub(super) const CAT_MID_THREADS: u32 = 256;
/// Dynamic shared memory a member takes in `segmentation_cat_block`'s whole-tree sort (its key, id
/// and two 16-bit order entries; see `seg_whole_cap`).
pub(super) const WHOLE_TREE_BYTES_PER_MEMBER: u32 = 16;
/// Largest blur radius `segmentation_blur_edges` handles (SEG_GT_MAXR; sigma < 1.125 with
/// scikit-image's truncation at 4 sigma, the default 0.8 is radius 3). Larger ones blur in two
/// passes and build the edge graph after.
pub(super) const FUSED_BLUR_RADIUS: u32 = 4;
/// Pixels of a `segmentation_blur_edges` tile (SEG_GT_W x SEG_GT_H) and its block size.
pub(super) const FUSED_TILE: (u32, u32) = (32, 16);
pub(super) const FUSED_THREADS: u32 = 512;
/// Kernel modes (SEG_MODE_*).
pub(super) const MODE_MERGE: u32 = 0;
pub(super) const MODE_MIN_SIZE: u32 = 1;
/// What `segmentation_least` iterates: the previous round's lists (SEG_LIST; a phase's first round:
/// the lists of `segmentation_tiles` or `segmentation_reset_done`), or every pixel (SEG_ALL: merge round 2).
pub(super) const LIST: u32 = 1;
pub(super) const ALL: u32 = 2;
/// Threads of a `segmentation_tiles` block: a pixel each (SEG_TILE_PX).
pub(super) const TILE_THREADS: u32 = (TILE_W * TILE_H) as u32;
