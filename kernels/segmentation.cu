// Felzenszwalb-Huttenlocher graph segmentation (Felzenszwalb & Huttenlocher 2004: the predicate
// of section 3.1, D(C1, C2) true unless the edge between them is below both MInt thresholds,
// Int(C) + k/|C|; Algorithm 1 of section 4, edges taken in non-decreasing weight order; the
// grid graph of section 5, 8 neighbours after a Gaussian blur; scikit-image's arithmetic and its
// min_size pass) in exact Boruvka rounds on the GPU, after the atomics-based Boruvka of
// Baranwal, Hoste, Rethy, Bouchiat, "Graph based image segmentation on the GPU" (ETH Zurich,
// section 3.1 steps 1-9 and Appendix A Algorithms 2-6: least outgoing edge per vertex, an
// atomicMin per component on packed (weight, edge id) keys, mutual edges as the roots of the
// merge trees, predicate, parent update, flatten), with the hierarchy of its sections 2.2 and
// 3.2.3. That paper evaluates the predicate on every component's least edge at once, out of
// Kruskal's order, and reports the lower quality that follows (section 4.2). Here each round
// merges exactly what a sequential Kruskal merges, so the labels equal scikit-image's:
//  - a component whose own threshold an edge fails never merges again (it freezes); between
//    freezes the process is single linkage, whose merges do not depend on the order;
//  - the least alive edges form trees with a mutual pair at the root and keys falling towards
//    it; the members whose least edge is below the tree's least edge to another tree (the
//    core) join the pair's component in key order, exactly when Kruskal reaches their edge, so
//    sorting a tree's core gives Kruskal's own merges there - a caterpillar whose sizes are
//    prefix sums and whose Int is the previous key's weight - and the predicate is evaluated at
//    each step with Kruskal's statistics, up to the first failing step.
// src/ops/segmentation/boruvka.rs is the CPU model of every kernel (same f64/f32 operations, same
// rounds, same hierarchy); keep the two in sync. The words used here (component, root, tree,
// core, caterpillar, tiny/small/mid-size/large/giant trees, frontier, sink, rounds, phases,
// finisher) are defined in src/ops/segmentation/gpu/mod.rs.
//
// Arithmetic is scikit-image's: the smoothed image is f64 (common/blur.cuh), weights are f64
// Euclidean distances (w4[4p + dir]: dir 0 right, 1 down, 2 down-right, 3 down-left; +inf
// outside; edge id = 4p + dir), thresholds are f32(Int + k/|C|) compared with the f64 weight,
// Int is f64. Key = (top 64-e bits of the f64 weight bits) << e | id with e = ceil(log2(4n))
// id bits: a total order that follows the weights (closer than ~2^-(63-e) relative they tie and
// the id decides). The graph is never stored as CSR: each pixel keeps its 8 edges' directions
// sorted by key in one word (order[p]) with a cursor past the edges that are dead for good.
//
// A frame (src/ops/segmentation/gpu/ launches it; from the counters' reset on, a captured CUDA graph
// on video):
//   segmentation_blur_edges  the blur, the weights and every pixel's sorted edges in one tiled pass
//                       from the frame's bytes (blur radius <= 4; else kernels/blur.cu's two f64
//                       passes and segmentation_edges)
//   segmentation_init        the round counters (ctl[0], the always-open gate, to 1; the rest to 0)
//   segmentation_tiles       merge round 1 for the trees inside one 32x16 tile, decided in shared
//                       memory; it sets up every pixel's words as it reads them and lists the
//                       roots it leaves (round 2's roots)
//   merge rounds 2..    each gated on the previous round of its phase (every kernel first reads
//                       ctl[gate], the events of that round, and returns when it is 0, so a phase
//                       stops by itself and nothing is read back by the host):
//     segmentation_least          least alive key of every active component (frontier pixels;
//                            Algorithms 2-3); a component outside its tree's core last round
//                            keeps its key (SEG_KEEP_BIT)
//     segmentation_targets_trees  each root's target (the far component, Algorithm 5) and its tree
//                            (the walk along targets to the mutual pair or a sink, Algorithms
//                            4 and 6); members counted per tree, each tree listed once
//     segmentation_exits          least alive key from a tree to another tree (frontier pixels), and
//     segmentation_alloc          beside it on a forked stream: each tree's range for its members
//     segmentation_core           members below their tree's exit take a slot in its range (weight-0
//                            members join at once); each tree is listed by its core's size
//     segmentation_cat_small(_mid) the tiny and small trees by lanes (and the mid-size ones by
//                            blocks), beside segmentation_cat_mid and segmentation_cat_block(_g) on side
//                            streams, and segmentation_cat_giant (a cooperative grid) after _g: the
//                            caterpillars (predicate, merges up to the first failing step,
//                            freezes; steps 5-8 of section 3.1)
//   segmentation_finish_grid / segmentation_finish  the phase's remaining rounds without launches (over a
//                       cooperative grid, then one block), from where the launched ones stop
//   segmentation_reset_done  the min_size phase's start (flags, cursors, its first lists); then the
//                       same rounds in SEG_MODE_MIN_SIZE (an edge merges while either side is
//                       smaller than min_size; nothing freezes; a component of at least min_size
//                       is a sink)
//   segmentation_final, segmentation_minpix, segment_scan_*, segmentation_labels  raster-order labels (the
//                       first pixel of each segment, a block scan of those flags)
//   segment_level_*     any hierarchy level from (link, round): link is only ever written when a
//                       component joins another (seg_join), so it is the hierarchy's parent
// Every round kernel starts with griddepcontrol.launch_dependents / .wait (grid_dep_*): on
// sm_90 the host launches them as programmatic dependent launches, so each one's blocks are
// scheduled while the previous kernel drains.
//
// Thread mapping: grid-stride loops (1-D blocks of 256, a fixed grid) over pixels or over the
// round's lists; block-uniform loops where a block appends to a list (one atomicAdd a block,
// seg_append_block). The caterpillars: 8 lanes per tiny tree, a warp per small tree, a block of
// 256 per mid-size tree, a block of 1024 per large tree, a cooperative grid for giant trees;
// the finishers run every step's loop over their grid (or one block) with barriers between.
// Memory: every array is indexed by pixel id; a pixel v is a root iff link[v] == v (iff its
// flag's joined bit is clear). Rounds after the first of their phase run over two compacted
// lists rebuilt every round: the frontier (pixels of an active component with an alive edge) and
// the active roots. comp[] of pixels off the frontier goes stale; seg_find follows link to the
// root (link never changes inside a kernel that reads it this way) and segmentation_final resolves
// every pixel at the end. A tree's members are written by the one lane group, block or grid of
// that tree. Per-round counters: ctl (events), mctl (merges), counts (list lengths, SEG_C_*).
// Border policy: neighbours outside the image are skipped (their +inf weights are never read).
//
// The parts below are included in this order (each uses what the ones before it define;
// src/kernels.rs embeds them as headers): shared definitions; the edge graph; the list appends,
// the counters' reset and steps 1-2; steps 3-5; merge round 1 in tiles; the caterpillars of
// tiny and small trees; the sorts of large trees; the caterpillars of larger trees; the
// finishers' structs and the grid barrier; giant trees; the finishers; the min_size start,
// relabelling and levels.
#include "common/blur.cuh"

#include "segmentation/common.cuh"
#include "segmentation/edges.cuh"
#include "segmentation/scan.cuh"
#include "segmentation/trees.cuh"
#include "segmentation/tiles.cuh"
#include "segmentation/cat_small.cuh"
#include "segmentation/cat_sort.cuh"
#include "segmentation/cat_large.cuh"
#include "segmentation/grid.cuh"
#include "segmentation/giant.cuh"
#include "segmentation/finish.cuh"
#include "segmentation/relabel.cuh"
