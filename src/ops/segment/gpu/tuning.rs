//! The segmentation's launch shapes, hand-off points and round caps, each with what was measured
//! when it was chosen (H100).

use super::*;

/// Entries of the per-round counters (`ctl[0]` is the always-on gate; merge rounds are
/// `1..=max_rounds`, `min_size` rounds follow).
pub(super) const NCTL: usize = 2 * MAX_ROUNDS_LIMIT as usize + 2;
/// Per-round list counts, `NCTL` entries each: frontier, active roots, trees with members,
/// members, small trees, large trees, range cursor, tiny trees, mid-size trees, giant trees.
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
/// `u64` words of `segment_cat_giant`'s scratch (SEG_GIANT_WORDS: the barrier, the keys' range,
/// the first failing step, then 2048 part counts, part cursors and bucket sums as `u32`).
pub(super) const GIANT_WORDS: usize = 4 + 3 * 2048 / 2;
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
pub(super) const GIANT_BLOCKS: u32 = 64;
/// Pixels per block of the relabel scan.
pub(super) const SCAN_BLOCK: u32 = 1024;
/// Threads per block of the grid-stride kernels.
pub(super) const BLOCK: u32 = 256;
/// Threads per block of `segment_cat_block` (keep in sync with SEG_CAT_THREADS).
pub(super) const CAT_THREADS: u32 = 1024;
/// Most members of a tree `segment_cat_block` sorts whole in shared memory (segment.cu
/// `SEG_CAT_WHOLE`; larger or crowded trees are radix-sorted into scratch, or walked by
/// `segment_cat_giant`). Development switch `MORPHOSCOPE_SEG_WHOLE` (0: no whole sorts, every
/// tree of more than one chunk radix-sorted).
pub(super) const WHOLE_MAX: u32 = 8192;
/// Threads per block of `segment_cat_mid` (keep in sync with SEG_CAT_MID_THREADS).
pub(super) const CAT_MID_THREADS: u32 = 256;
/// Adaptive merge-round caps are rounded up to a multiple of this, so that video frames whose
/// round counts differ a little replay the same captured graph (`min_size` caps are not: that
/// phase takes 1-2 rounds, and the most of the last frames moves rarely).
pub(super) const GRAPH_ROUND_STEP: u32 = 4;
/// Rounds an adaptive cap adds to the most any of the last [`ADAPTIVE_HISTORY`] frames used. A
/// frame that needs more is run again with larger caps before it is downloaded (exact either
/// way), so the margin trades empty rounds (~20 us each at 1080p on the H100) against reruns,
/// which cost a whole frame: with +2 over the last frame alone, 137 of the sample clip's 795
/// frames ran again in the pipeline (H100, 2026-11-25).
pub(super) const ADAPTIVE_MARGIN: u32 = 2;
/// A round that starts with at most this many frontier pixels is left to `segment_finish` (one
/// block runs the rest of the phase); the adaptive caps launch the rounds before it (the most
/// any recent frame needed), rounded up to steps of 4, so on repeated frames the finisher
/// mostly confirms convergence. One block is slower than launched rounds on a real frontier
/// (H100, 2026-11-25: building 1080p's rounds 17-20, frontier 7 797 -> 20 pixels, 350 µs
/// against 126 µs launched); hand-offs at 2 048-16 384 pixels measured the same. What it
/// buys is on video: frames that need a few more rounds than their caps are not run again.
pub(super) const FINISH_FRONTIER: u32 = 32_768;
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
pub(super) const GRID_FINISH_FRONTIER: u32 = 8_192;
/// With the grid finisher, the rounds from the first that starts with at most this many frontier
/// pixels go to `segment_finish` (one block, launched after it): a tiny round costs one block a
/// few `__syncthreads`, the grid 8 barriers of every SM (H100, 2026-11-25, building 1080p:
/// without it k = 500 lost 77 µs to the one-block finisher; 1 024 / 4 096 / 16 384 measured
/// within 1 %).
pub(super) const FINISH_SOLO: u32 = 4_096;
/// First launched merge round whose targets and trees are one kernel
/// ([`SegmentGpu::fuse_from`]); 2 is every launched merge round (round 2 takes the roots
/// `segment_tiles` listed). H100, 2026-11-26, two passes each, against separate kernels: from
/// round 3 / 6 / 10 building 1080p -30 / -10 / -5 µs at k = 100, -20 / -5 / 0 at k = 500, fruits
/// and grey -18 to -38 / -4 to -27 / 0 to -14, the clip frame +8 / -12 / +5 at k = 100 (k = 500
/// -2 / -14 / 0); in another lease from round 2 / 3 / only the `min_size` rounds: building -45 /
/// -22 / 0 and -35 / -12 / 0, fruits -47 / -24 / 0, grey -50 / -35 / 0, the clip frame -18 / -6 / 0.
pub(super) const FUSE_FROM: u32 = 2;
/// First round whose tiny and small trees are walked by one launch
/// ([`SegmentGpu::cat_fuse_from`]; 0: none): one branch of the round's fork instead of two or
/// three. H100, 2026-11-27, two passes each (ms, k = 100 / 500), separate kernels against fused
/// from round 2 with the mid-size trees from round 2 / 4 / 7, and from round 3 with them from 4:
/// building 1080p 2.704-2.713 / 2.844-2.861 against 2.684-2.688 / 2.808-2.849, 2.676 / 2.814-2.816,
/// 2.678-2.691 / 2.808, 2.677-2.681 / 2.799-2.802; fruits RGB 2.968-2.982 / 2.935-2.941 against
/// 2.938-2.939 / 2.901-2.902, 2.926-2.929 / 2.890-2.896, 2.923-2.926 / 2.892-2.898, 2.933 /
/// 2.907-2.927; the clip frame 3.045-3.065 / 2.888-2.918 against 2.967-2.969 / 2.843, 2.973-2.976
/// / 2.843-2.847, 2.977-2.981 / 2.854-2.858, 2.966-2.984 / 2.845-2.851; building 4K 9.920-9.935 /
/// 9.850-9.863 against 9.927-9.952 / 9.863-9.869, 9.904 / 9.812-9.814, 9.887-9.901 / 9.772-9.792,
/// 9.909-9.916 / 9.829-9.835. The 4K frame's rounds 3-6 have 273-2 694 mid-size trees, which
/// the fused grid's blocks walk before their share of the tiny trees (leaving them out of that
/// share was slower everywhere).
pub(super) const CAT_FUSE_FROM: u32 = 2;
/// First fused round whose mid-size trees join that launch ([`SegmentGpu::cat_fuse_mid_from`];
/// measured with [`CAT_FUSE_FROM`]).
pub(super) const CAT_FUSE_MID_FROM: u32 = 4;
/// The most frontier pixels `segment_finish` starts a round with; a frame with more left after
/// its launched rounds is run again with larger caps (one block's rounds at this size would
/// cost about as much as the rerun).
pub(super) const FINISH_LIMIT: u32 = 65_536;
/// Largest blur radius `segment_blur_edges` handles (keep in sync with SEG_GT_MAXR in
/// segment.cu; sigma < 1.125 with scikit-image's truncation at 4 sigma, the default 0.8 is
/// radius 3). Larger ones blur in two passes and build the edge graph after.
pub(super) const FUSED_BLUR_RADIUS: u32 = 4;
/// Pixels of a `segment_blur_edges` tile (SEG_GT_W x SEG_GT_H) and its block size.
pub(super) const FUSED_TILE: (u32, u32) = (32, 16);
pub(super) const FUSED_THREADS: u32 = 512;
/// Frames whose round counts set the adaptive caps (their maximum, per phase).
pub(super) const ADAPTIVE_HISTORY: usize = 8;
/// Captured graphs kept per op (round-count buckets and parameter sets seen recently).
pub(super) const GRAPH_CACHE: usize = 16;
/// Kernel modes (keep in sync with SEG_MODE_* in segment.cu).
pub(super) const MODE_MERGE: u32 = 0;
pub(super) const MODE_MIN_SIZE: u32 = 1;
/// What a phase's first round iterates (`use_list` of the round kernels): every pixel, each its
/// own component in merge mode (`SEG_ALL_SINGLE`), or every pixel in whatever components the
/// steps before it left (`SEG_ALL`: the merge round after `segment_tiles`).
pub(super) const ALL_SINGLE: u32 = 0;
/// The previous round's lists (`SEG_LIST`; the `min_size` phase's first round: the lists of
/// `segment_reset_done`).
pub(super) const LIST: u32 = 1;
pub(super) const ALL: u32 = 2;
/// Threads of a `segment_tiles` block: a pixel each (`SEG_TILE_PX`).
pub(super) const TILE_THREADS: u32 = (TILE_W * TILE_H) as u32;
