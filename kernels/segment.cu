// Felzenszwalb-Huttenlocher segmentation in exact GPU rounds, after the atomics-based Boruvka of
// Baranwal, Hoste, Rethy, Bouchiat, "Graph based image segmentation on the GPU" (ETH Zurich,
// section 3.1, Appendix A Algorithms 1-6: least outgoing edge per vertex, atomicMin per
// component on packed (weight, edge id) keys, mutual-edge cycle removal, predicate, parent
// update, flatten), plus the hierarchy of sections 2.2 / 3.2.3. The paper evaluates the predicate
// on every component's least edge at once, out of Kruskal's order, and reports the lower quality
// that follows (section 4.2; on our frames whole images collapse). Here each round decides
// exactly what a sequential Kruskal decides, so the labels equal scikit-image's:
//  - a component whose own threshold an edge fails never merges again (it freezes); between
//    freezes the process is single linkage, whose merges do not depend on the order;
//  - the least alive edges form trees with a mutual pair at the root and keys falling towards
//    it; the members whose least edge is below the tree's least edge to another tree (the
//    core) join the pair's component in key order, exactly when Kruskal reaches their edge, so
//    sorting a tree's core gives Kruskal's own merges there - a caterpillar whose sizes are
//    prefix sums and whose Int is the previous key's weight - and the predicate is evaluated at
//    each step with Kruskal's statistics, up to the first failing step.
// src/ops/segment/boruvka.rs is the CPU model of every kernel below (same f64/f32 operations,
// same rounds, same hierarchy); keep the two in sync.
//
// Arithmetic is scikit-image's: the smoothed image is f64 (kernels/blur.cu blur_*_f64),
// weights are f64 Euclidean distances (w4[4p + dir]: dir 0 right, 1 down, 2 down-right,
// 3 down-left; +inf outside; edge id = 4p + dir), thresholds are f32(Int + k/|C|) compared with
// the f64 weight, Int is f64. Key = (top 64-e bits of the f64 weight bits) << e | id with
// e = ceil(log2(4n)) id bits: a total order that follows the weights (closer than ~2^-(63-e)
// relative they tie and the id decides). The graph is never stored as CSR.
//
// Setup: segment_blur_edges (the f64 blur, the weights, and each pixel's 8 edges sorted by key,
// in one tiled pass from the frame's bytes; for blur radii above 4 kernels/blur.cu's two passes
// and segment_edges), then segment_init (inside the captured rounds). The rounds walk a pixel's
// sorted edges from a cursor past the edges that are dead for good.
// Merge round 1: segment_tiles (every pixel its own component: the round below for the trees
// that lie inside one 32x16 tile, decided in shared memory by one kernel; the trees that cross
// a tile wait for round 2, which is the first launched round and scans every pixel).
// A round r (merge rounds 1.., then min_size rounds; every kernel first reads ctl[gate], the
// event count of the previous round of its phase, and returns when it is 0, so rounds after
// convergence cost one tiny launch each and nothing is read back by the host; on video the host
// replays the whole sequence as one captured CUDA graph, src/gpu/graph.rs):
//   segment_least    least alive edge of every active component (frontier pixels; a component
//                    outside its tree's core last round keeps its edge, SEG_KEEP)
//   segment_targets  its far component; a component without alive edges is done
//   segment_trees    tree id: the smaller component of the mutual pair the targets lead to
//                    (or a min_size sink); members counted per tree, each tree listed once
//   (segment_targets_trees: both steps in one launch, in the rounds after the dense ones)
//   segment_exits    least alive edge from a tree to another tree (frontier pixels), and
//   segment_alloc    beside it (a forked stream): each tree takes a contiguous range for all
//                    its members
//   segment_core     members below their tree's exit take a slot in their tree's range; the
//                    last of a tree's members to count itself off lists the tree by core size
//   segment_cat_thread / segment_cat_warp / segment_cat_mid / segment_cat_block
//                    8 lanes per tree of up to 8 members and a warp per tree of up to 32
//                    (bitonic sort across the lanes, group scan, first failure by ballot), a
//                    block of 256 per tree of up to 512 and of 1024 per larger tree (the
//                    caterpillar in chunks of at most 2048 in key order: a tree of up to 8192
//                    sorted once in dynamic shared memory (SEG_CAT_WHOLE), else (crowded keys,
//                    or above 8192 members) radix-sorted into scratch; the finishers select
//                    each chunk by key range and gather it part by part of that range);
//                    merges up to the first failing step, freezes the failing side(s). The
//                    four kernels touch disjoint trees and run side by side (forked streams).
//   segment_cat_small / segment_cat_small_mid (from SegmentGpu::cat_fuse_from, round 2):
//                    the tiny and small trees' lanes in one launch instead of two branches,
//                    joined by the mid-size trees' blocks from round 4 (cat_fuse_mid_from)
//   segment_cat_giant (where the device has cooperative launch; segment_cat_block_g then
//                    leaves it the trees above SEG_CAT_GIANT members): those trees over a
//                    cooperative grid, a bucket sort across its blocks, every step evaluated
//                    at once (launched after segment_cat_block_g on its stream).
// Every round kernel starts with griddepcontrol.launch_dependents / .wait (grid_dep_*): on
// sm_90 the host launches them as programmatic dependent launches (src/gpu/launch.rs
// ExLaunch), so each one's blocks are scheduled while the previous kernel drains.
// segment_finish_grid: the rounds after the launched ones (from the first that starts with at
// most 32 768 frontier pixels) over a cooperative grid of every SM (each step above as a device
// function over the grid, seg_grid_sync between them), until a round changes nothing or starts
// with at most 4 096 frontier pixels; segment_finish then runs the rest in one block
// (__syncthreads between steps). Without cooperative launch segment_finish takes the whole tail.
// min_size rounds: segment_reset_done, then the same kernels in mode MIN_SIZE (an edge merges
// when either side is smaller than min_size; nothing freezes; a component of at least min_size
// takes no edge and absorbs whole the trees that lead into it: a sink, SEG_MS_SINK).
// Relabel: segment_final, segment_minpix (first pixel of each segment, at run starts only),
// a block scan of "first pixel" flags (segment_scan_*), segment_labels (raster order).
// segment_level_* extract any hierarchy level from (link, round) the same way: link is only
// ever written when a component joins another (seg_join), so it is the hierarchy's parent.
//
// Thread mapping: grid-stride loops (1-D blocks of 256, a fixed grid) over pixels or roots.
// A pixel v is a root iff link[v] == v (iff its flag's joined bit is clear). Rounds after the
// first of their phase run over two compacted lists rebuilt every round (block-aggregated
// appends): the frontier (pixels of an active component with an alive edge; a pixel leaves it
// for good once interior or done) and the active roots. comp[] of pixels off the frontier goes stale; seg_find follows link to the
// root (link never changes inside a kernel that reads it this way) and segment_final resolves
// every pixel at the end. A tree's members are written by the one warp or block of that tree.
// Event counts are reduced per warp before one atomicAdd (every lane reaches the reduction).
// The scan kernels use 1024-thread blocks and 32 words of shared memory.
// Border policy: neighbours outside the image are skipped (their +inf weights are never read).
//
// GPU notes (H100, BENCHMARKS.md has every version): the previous exact rounds (mutual pairs,
// joiners absorbed below limits by a warp per group, 3 sub-rounds; ~22 launches a round) took
// 39-66 merge rounds and 20.7-36.5 ms at 1080p (smooth video: 89-202 rounds, ~95 ms). Predicted
// from the CPU model: 19-22 rounds on the same frames, 22-26 on smooth video. Measured
// (2026-11-25): the same round counts, 7.9-8.9 ms at 1080p, 35 ms at 4K, 10-12.5 ms on the
// clip scaled to 1080p. A first version capped a large tree at its 1024 least keys per round
// (more rounds, and one block chunk-sorting 36 000-member trees: 74 ms on the clip at k = 500);
// the chunked caterpillar with a radix select made that 12.5 ms. Per kernel at 1080p k = 100
// (sums over rounds): least edges 2.3 ms, targets 1.3, exits 1.3, caterpillars 1.7, core /
// trees / alloc / scatter 1.4, the min_size phase 1.0; a round ~340 us, ~45 % frontier passes.
// ncu (round 2, least edges): 93 % of stall cycles waiting on loads, 21 % of DRAM bandwidth,
// 0.11 eligible warps per scheduler - latency, not bytes. Two causes, two changes: (1) list
// appends aggregated per warp serialised ~65 000 atomics on one counter per 2 M-entry list
// (predicted: about half of least/targets/core in round 1); one atomic per block instead
// (seg_append_block): round 1 least 194 -> 81 us, targets 191 -> 43, core 173 -> 61. (2) the
// frontier scans walked one edge at a time (comp -> link -> done per edge); SEG_BATCH edges'
// loads issued together, and targets / cat_thread load their words at once. Whole op
// 7.71 -> 4.90 ms (building 1080p), 34.4 -> 18.7 ms at 4K, 10.0 -> 7.2 ms on the clip frame.
// Tried and dropped: the tree's keys copied next to its members at scatter time (the
// caterpillars' loads contiguous): caterpillars -50 us, scatter +50 us, no net change.
// segment_cat_block's passes over a large tree keep four member -> key chains in flight a thread
// (seg_members4) and warp 0 scans the digit counts: predicted 5.4 -> ~2 ms on the clip frame at
// k = 500, measured 5.4 -> 4.8 ms (the chunks' barriers and sorts remain; 9.71 -> 9.07 ms whole).
// Third pass (2026-11-25, building 1080p k = 100 unless stated): one edge-graph kernel (graph
// 0.19 -> 0.14 ms), a first merge round without lookups (least 81 -> 41 us), adaptive caps
// +2 with a rerun of frames that need more (4.83 -> 4.42 ms with the two before), the
// caterpillar kernels side by side (-> 4.35), programmatic dependent launches (-> 4.21), trees
// above 8192 members sorted once (clip frame k = 500 8.28 -> 6.42 ms) and a mid-size caterpillar
// kernel (-> 4.14; 4K 16.9 -> 16.2). Measured slower and dropped: per-warp staged appends (5.36
// ms: the lists lose their spatial order), one atomicMin per run of lanes (4.71), cat_thread at
// 64 registers (4.52), skipping exit scans above the tree's largest member key (4.54).
// Fourth pass (2026-11-25; per-round times inside the replayed graph from segment_stamp):
// rounds 1-8 are 65 % of the frame and their scans miss L2 (ncu: least 116 MB, exits 127 MB
// of DRAM reads a round, L2 hits 40-65 %; the per-pixel arrays are ~160 MB at 1080p). Flags in
// bytes that stay in L2 (frozen; "at least min_size" in min_size rounds; a joined bit, so "root
// or not" needs no link read) and no separate parent array: building 1080p 4.20 -> 3.95 ms, 4K
// 16.2 -> 14.4. Measured slower and dropped: 32-byte per-root records (4.76: the dense first
// rounds touch one field of many roots), least handing its hit to exits (+70 us), a tree-id
// hash in the flag byte (+150 us), a 4-member caterpillar kernel (round 1 +37 us), batches of
// 8 or 3 edges.
// Fifth pass (2026-11-25): segment_finish (predicted -250 us at 1080p: no empty gated rounds).
// Measured: the bench unchanged, because one block takes building 1080p's rounds 17-20
// (frontier 7 797 -> 20) in 350 us against 126 us launched, so the caps hand over only near
// convergence; on the clip pipeline no frame is run again (12 before), segment_rounds 2.16 ->
// 2.03 ms. Large trees: segment_cat_block was 138-430 us a round in rounds 7-12 of the clip
// frame, ~80 % of it the whole-tree radix sort (seg_radix_pass notes): 6.27 -> 6.00 ms (k =
// 100), 6.41 -> 5.89 (k = 500) with the warp-range pass.
// Sixth pass (2026-11-25, H200: no H100 was lent; A/B in one run): round 1 was ~11 % of the
// frame as ten launched kernels over every pixel. Tried first: sequential Kruskal inside tiles,
// exact by sealing (a component stops at its least edge leaving the tile; branch tile-pass):
// it merges what ~1.5-1.8 rounds do, but sorting a tile's keys and the warp-serial decisions
// cost 0.97 ms (16x16 tiles, a warp each; 1.6 ms with 32x16 and a block) for the ~0.5 ms of
// rounds it saved. Shipped: segment_tiles, round 1 itself in tiles (141 us; it merges 978 k of
// the 1.13 M pixels round 1 merges at 1080p): building 1080p 3.58 -> 3.43 ms, clip frame 5.60 ->
// 5.21 (k = 100), 4K 12.09 -> 11.77; on the H100 (run 8) 3.97 -> 3.75, 5.98 -> 5.58, 14.37 ->
// 13.60.
// Seventh pass (2026-11-25, H100; BENCHMARKS.md, branch seg-fused-graph): blur + edge graph in
// one tiled kernel (-40 us: those passes are instruction-bound), a cache of the key at each
// pixel's cursor for segment_least (-40 to -90 us), comps resolved once before min_size (-10 to
// -50 us), each measured against its own switch; together the binary was still 1-3 % slower
// than this code in the same lease (merge rounds +90 us at 1080p, +500 us at 4K even with the
// cache off), so none shipped until that shared cost is found.
// Eighth pass (2026-11-25, H100, A/B in one lease): segment_finish_grid. Predicted: the one-block
// finisher's rounds 17-20 (350 us at 1080p) at launched-round speed without their launches.
// Measured: handing over at 262 144 or 1 M frontier pixels was slower (a grid round at 100 k+
// pixels costs more than a launched one: one 1024-thread block an SM, no overlap between
// steps), at 32 768 the grid alone won at k = 100 (merge 3.20 -> 3.05 ms) but lost at k = 500
// (+77 us: a round of a few pixels costs 8 grid barriers); with the smallest rounds left to
// one block: building 1080p 3.92 -> 3.69 ms (k = 100), 4.28 -> 4.26 (k = 500), fruits RGB
// 5.10 -> 4.27, grey 4.23 -> 4.03, clip frame 5.70 -> 5.53, 4K unchanged. Blur + edge graph in
// one kernel shipped (bisected on top of it: -5 to -50 us). The cursor-key cache's commit cost
// +70-90 us (+120 with the cache compiled out) with the same register counts and with buffer
// placement, its extra 16 MB write and segment_init's skipped `order` rewrite each measured free;
// left as suspects: segment_least's and the finishers' code (their spills moved: 168 -> 160
// bytes of stack at 64 registers), BENCHMARKS.md.
// Ninth pass (2026-11-25, H100, A/B in one lease): fewer global atomics. Predicted from the CPU
// model: in rounds 4-16 only 36-55 % of the frontier pixels belong to a component whose least
// edge can have changed, so skipping the rest's walks (SEG_KEEP) would save ~150 us at 1080p.
// Measured: skipping the walks alone saved nothing; skipping those pixels' atomicMin as well did
// (-30 to -170 us), and a load before every frontier atomicMin (SEG_ATOMIC_FILTER) more (-60 to
// -170 us; 4K -650 us), warp-aggregated core slots (SEG_CORE_AGG) -25 us: building 1080p 3.66 ->
// 3.54 ms (k = 100), 4.21 -> 3.99 (k = 500), clip frame 5.49 -> 5.13, 4K 13.36 -> 12.19. Same-
// address atomics from many pixels, not the lookups, were the scans' hidden cost. Dropped: a
// per-warp run dedup on top of the filter (noise), exits skipping pixels whose component's least
// key is above the tree's exit so far (+10 to +50 us), segment_least at 40 registers (+200 us).
// Tenth pass (2026-11-26, A/B in one lease): min_size sinks (SEG_MS_SINK). The profile put ~0.37
// ms of a 1080p frame in 5-9 min_size rounds, most of them trees that stopped at a large-large
// step or at an exit. Predicted from the CPU model: 1-2 rounds (building 1080p 5 -> 2 at k =
// 100, 7 -> 1 at k = 500), so ~-150 us. Measured on the H100: building 1080p 3.551 -> 3.311 ms
// (k = 100), 3.996 -> 3.729 (k = 500), fruits RGB 4.03 -> 3.69 / 4.01 -> 3.68, clip frame 5.16
// -> 4.83 / 5.19 -> 4.98, 4K 12.11 -> 11.58 (with the min_size caps no longer rounded up to 4:
// no empty gated rounds after the 1-2 that merge). Then fewer dependent steps a round: a tail
// round of tiny lists still took ~45 us for 8 steps. segment_trees counts each tree's members,
// segment_alloc gives the ranges beside segment_exits (forked stream), segment_core writes the
// core into them and lists each tree by its core size (no segment_scatter): predicted ~-190 us
// from the serialised per-kernel sums (alloc + scatter off the critical path). Measured: sized
// and listed by all members (not the core), photographs got slower (building 1080p 3.32 ->
// 3.39 ms: trees went to larger caterpillar kernels); listed by the core, -20 to -50 us at
// 1080p, -250 us at 4K; the core's five block appends as one (seg_append_by_class) -35 to -40 us
// more, one 64-bit counter a tree (core slots and the count-off in one atomic, no fences) -55 to
// -65 us more (round 2's core 62 -> 49 us). segment_cat_thread at 80 registers (a float
// threshold per member instead of its Int; three blocks an SM instead of two) measured within
// noise (-10 us at 1080p, +40 us at 4K), the round counters added once a block instead of once a
// warp +35 to +55 us (its barriers): both left out. Probed in the CPU model, not built: a second
// Boruvka level per round (trees joined along their exits up to the exit of the tree of trees,
// exact: property-tested) cuts merge rounds 20 -> 16 (building k = 100), 23 -> 17, clip frame
// 27 -> 19, but needs a far-tree pass, a walk, a second frontier scan and a union-find over each
// tree of trees every round: ~4 more dependent steps at ~5 us each plus the scan's ~30 us,
// against ~45 us for a tail round saved (BENCHMARKS.md).
// Eleventh pass (2026-11-26, H100, A/B in one lease): round trips inside a step. Predicted: a tail
// step waits on a chain of dependent L2 loads (~0.2-0.5 us each), so each trip taken off the
// chain saves that much in every step of ~20 rounds. Measured (building / fruits / clip 1080p):
// the gate and the list count in one trip (seg_gate; ptxas sank the count's load below the exit
// until the exit test read it) -10 to -50 us; the tree walk loading a root's target and tree
// together -5 to -25 us; the exits' first batch and the targets' kept words loaded early in the
// tail rounds (SEG_SPEC) 0 to -30 us, but +50 us in the dense rounds (traffic), so only for lists
// of at most SEG_SPEC_MAX. Two passes over every pixel gone: segment_init's per-pixel words
// written by segment_tiles (-20 to -45 us), the first min_size round over lists of the pixels and
// roots below min_size that segment_reset_done makes (-6 to -61 us, 4K -140 us); round 2's roots
// listed by segment_tiles (-10 to -30 us); the grid finisher from 8 192 frontier pixels (the
// launched rounds got cheaper; -50 to -80 us at k = 100). Together building 1080p 3.26 -> 3.12 ms
// (k = 100), 3.68 -> 3.59 (k = 500). Then targets and trees in one launch in every launched round
// (segment_targets_trees; each walk computes the targets it passes; round 2 and the first
// min_size round take the lists of segment_tiles and segment_reset_done): predicted ~-3 us a
// step a round, less the walks' extra lookups; measured -35 to -58 us on the photographs (from
// round 3 only: -18 to -38, 4K -215 us), -15 to -18 us on the clip frame, +14 us a frame on the
// clip's pipeline (smooth video: deeper trees, longer walks). Dropped: L1 prefetch of the caterpillars' member words
// (+10-20 us), the first list entry loaded with the gate (+0-25 us: the idle blocks of a wide
// grid wait on its DRAM miss), the weight at the cursor loaded early in segment_least (spills).
// Twelfth pass (2026-11-26, H100, A/B in one lease): the caterpillars' sorts and selects. The
// per-round profile put +60-70 us on every round with a tree of more than SEG_CAT_CAP core
// members (building 1080p k = 100: rounds 7-8, trees of 2 300-5 900 members that mostly stop in
// their first chunk, CPU model), and seg_select took nine passes over such a tree (eight 8-bit
// radix digits, then the gather). A chunk needs only some key prefix of at most SEG_CAT_CAP
// members, not the longest: seg_select_range takes the keys' range, counts them in 2 048 equal
// parts and ends the chunk with the last part that fits (three passes). Predicted ~-25 us a
// round with such trees; measured building 1080p -10 to -27 us (k = 100) and -51 (k = 500),
// fruits -25 to -37, clip frame -45 to -87, 4K k = 500 -61 us. Then the chunks' bitonic sort
// (segment_cat_mid and segment_cat_block, a barrier each of 45-66 steps): every step with
// partners within 64 elements in a warp's registers (seg_sort_chunk; 21 barriers at 2 048).
// Predicted ~-15 us a round with a large tree; measured far more, because the mid-size trees of
// every round from 4 on sort too and the side-by-side caterpillar kernels wait on the slowest:
// building 1080p 3.14 -> 3.03 ms (k = 100), 3.57 -> 3.35 (k = 500), fruits RGB 3.49 -> 3.36,
// 3.57 -> 3.39, clip frame 4.60 -> 4.34, 4.80 -> 4.50, 4K 11.33 -> 11.21, 11.56 -> 11.28.
// Then two list appends in one round of barriers (seg_append_pair: segment_targets_trees,
// segment_reset_done): -5 to -20 us (building 1080p k = 100 3.03 -> 3.01-3.02 ms).
// Tried and not shipped: each segment's first pixel found in segment_final (within noise); a
// later chunk reusing the first chunk's range (one pass fewer) hung the
// invariants test on a random 4096x2160 frame (run 5; not understood: seg_select_range now
// answers lo when it cannot bound a prefix, and the caller takes seg_select); SEG_CAT_SORT 4 096
// / 16 384 / 32 768 (within noise or worse at k = 100). Branch seg-tile-round2: merge round 2 in
// 64x32 tiles in shared memory (segment_tile_round, the CPU model's round 2 in tiles as round 1
// is; exact, 15 / 15 tests): round 2 430 -> 266 us at building 1080p, but it decides 77 % of the
// members the global round does, and the frontier it leaves lags by that much in every later
// round (+10 to +65 us each): building 3.16 -> 3.30 ms, fruits 3.51 -> 3.66 (one round more),
// clip frame 4.65 -> 4.61, 4.88 -> 4.75. Its root list in thread order (not pixel order) cost
// round 3 +20 us by itself.
// Thirteenth pass (2026-11-26, H100): smooth video's giant trees. The clip frame's per-round
// profile showed one round, 11, at 0.80 / 1.00 ms (k = 100 / 500) of a 4.3 / 4.5 ms frame: one
// tree of ~45 000 core members, sorted and walked by one block on one SM while the rest of the
// GPU idled (the radix passes' scattered stores are one SM's throughput). segment_cat_giant
// spreads it over a cooperative grid (a bucket sort, every step at once): round 11 0.80 -> 0.16
// ms, 1.00 -> 0.17; the clip frame 4.31 -> 3.73 ms, 4.47 -> 3.72. Launched in every round, its
// empty launches cost the photographs, which have no such tree, +20 to +47 us at 32 blocks (+45
// to +75 at 132); the host now launches it only in the rounds where recent frames had a giant
// tree (segment_cat_block and segment_cat_giant count them, SEG_C_GIANT; without it the large
// trees' kernel walks them, exact either way): photographs at their old times (building 1080p
// 3.02 / 3.32 ms), the clip frame 3.69 / 3.68, 4K 11.15 / 11.27. Tried and dropped first (no
// gain): copying a large tree's keys to scratch before its chunk passes (SEG_CAT_STAGE: building
// 3.03 / 3.02 ms against 3.02 / 3.03 without, clip 4.37 / 4.33 against 4.33 / 4.32), and the one
// block walking a sorted tree in three whole-tree passes instead of chunks (clip 4.31 -> 4.40:
// the chunks were not the cost, the sort is). A field added to Ptrs (Rust) but not to SegPtrs
// shifted the grid finisher's barrier into another buffer and hung every graph replay: the unit
// test ptrs_fields_match_the_kernel_struct now compares the two structs' field names.
// Fourteenth pass (2026-11-26, H100, A/B in one lease each; BENCHMARKS.md): old choices measured
// again after the passes above changed the kernels around them, and phase times inside a kernel
// by %globaltimer (SEG_CAT_TRACE). The frontier scans' batch of 4 edges was the traffic ncu saw
// (round 3's exits: 17 M L2 sectors for 2 M pixels, 68 % excess): 2 edges a batch took building
// 1080p from 3.06 to 2.88 ms (k = 100), the clip frame from 3.72 to 3.55. The trace put 15-22 us
// of a large tree's 30-40 us chunk in its bitonic sort, so chunks are now gathered part by part
// of the range seg_select_range counted (SEG_CAT_BUCKET): clip frame k = 500 3.52 -> 3.42. Then
// the tiny trees by 8 lanes each (-10 to -35 us), a chunk's evaluation without loads after its
// scan (-20 to -45 us), the edge graph's window by columns (-7 us), and grids of the strided
// kernels sized to what the SMs hold at once (segment_tiles asked 4 blocks an SM where 3 fit:
// round 1 164 -> 133 us; the tiny trees' kernel 8 where 6 fit). Together (run 1 -> run 19):
// building 1080p 3.02 / 3.32 -> 2.81 / 3.05 ms, fruits 3.35 / 3.38 -> 3.10 / 3.14, the clip frame
// 3.69 / 3.68 -> 3.37 / 3.29, 4K 11.15 / 11.27 -> 10.12 / 10.13. Measured and dropped: staging
// a large tree in shared memory for its selects (no gain: the sort was the cost), warps sorting
// the fuller parts, exits skipping two-member trees (+10-25 us: the extra load), the hand-off
// and cap constants again (all within noise), segment_least at 40 registers (+270 us).
// Fifteenth pass (2026-11-26, H100, A/B in one lease each; BENCHMARKS.md): a large tree of up to
// 8 192 core members sorted once in dynamic shared memory and walked from there (SEG_CAT_WHOLE;
// predicted from the trace: its chunks re-read every member three times, 19-31 us of a 3-chunk
// tree's 76; measured 76 -> 59 us for that tree, whole frames -20 to -40 us at k = 500, nothing
// for trees that stop in their first chunk; crowded trees fall back to chunks, a second level
// of parts for them cost +45 us on the clip frame), segment_blur_edges compiled with the radius
// and channels as constants (ncu: ~1 480 instructions a pixel; 151 -> 125 us), then phase stamps
// inside the whole-tree sort: the block min/max looped over 32 partials a thread (3 us), the part
// counts' scan conflicted 8 ways (4 us), insertion sorts by one thread a part (2.5-13 us); fixed
// (seg_block_minmax by shuffles, uint4 counts, ranks within parts), -35 to -110 us a frame, the
// reduction also starting every chunk and giant tree; the relabelling as programmatic launches
// (-0 to -12 us); list appends scanned by one warp's shuffles (-0 to -13 us). Building 1080p
// 2.81 / 3.04 -> 2.74 / 2.90 ms, fruits 3.10 / 3.13 -> 3.00-3.01 / 3.00, grey 2.99 / 3.07 ->
// 2.88 / 2.91, clip frame 3.38 / 3.31 -> 3.22 / 3.10, 4K 10.12 / 10.13 -> 9.94 / 9.92. A large
// tree's chunk evaluation is now its cost: three scattered loads and three scattered stores a
// member from one SM. Dropped: deferred per-pixel writes in segment_tiles (+19 us), the tiles
// as a programmatic launch with fewer reset_done writes (+17 us on building k = 100).
// Sixteenth pass (2026-11-26, H100, A/B in one lease each, three passes; BENCHMARKS.md): the
// chunk selects compiled out of segment_cat_block and _g, which sort every large tree whole or
// radix-sort it (their spills 74 / 76 -> 36 / 60 bytes): -8 to -39 us on every 1080p frame
// (notes at SEG_CAT_WHOLE); sink trees of the min_size rounds merged without a sort by
// segment_cat_mid (SEG_MID_SINKS; the clip frame's first min_size round held a sink tree of
// over 512 members that segment_cat_block sorted: 118 -> 69 us), -0 to -39 us; a crowded tree
// radix-sorted in shared memory (SEG_CROWD_SHARED; spills 36 / 60 -> 16 / 8), -0 to -19 us.
// Dropped: crowded trees sorted whole with their least weight split
// off (clip frame -40 us, photographs +10 to +30: the code's registers), and the finisher's
// rounds on one thread block cluster of 8 or 16 SMs with the hardware cluster barrier between
// steps (merge finisher 74 -> 99 us at k = 100, 138 -> 162 at k = 500 on the clip frame; from
// 32 768 or 131 072 frontier pixels slower still: a tail round waits on its longest chain of
// dependent loads, not on barriers or threads).
// Seventeenth pass (2026-11-26, H100, A/B in one lease, two or three passes; BENCHMARKS.md):
// segment_core joins a tree's weight-0 members at once (notes at seg_core_body; the clip
// frame's crowded trees of round 3 were flat regions), -0.05 to -0.08 ms on the clip frame;
// segment_cat_giant on 64 blocks (-0.02 to -0.03 ms there), its scatter from per-block part
// bases and its buckets ranked within their parts (-0.02); seg_grid_sync by a flipping top bit
// (-0.01). Dropped: every sure step (weight below
// f32(k / S)) joined in segment_core (+0.09 to +0.14 ms on every frame: the joins' atomics moved
// into the core step cost what the caterpillars did, and the per-tree size sums cost every
// round); a round's kernels all on one stream (+0.02 to +0.4 ms: an empty launch in line costs
// ~3 us, more than a fork and join).
//
// Layout: the module is this file's notes and the parts below, included in this order (each
// part uses what the ones before it define; src/kernels.rs embeds them as headers): shared
// definitions; the edge graph; round set-up and steps 1-2 (least edges, targets); steps 3-5
// (trees, exits, ranges, core); merge round 1 in tiles; the caterpillars of small trees; the
// sorts of large trees; the caterpillars of large trees; the finishers' structs and the grid
// barrier; giant trees; the finishers; the min_size start, relabelling and levels.
#include "common/blur.cuh"

#include "segment/common.cuh"
#include "segment/edges.cuh"
#include "segment/scan.cuh"
#include "segment/trees.cuh"
#include "segment/tiles.cuh"
#include "segment/cat_small.cuh"
#include "segment/cat_sort.cuh"
#include "segment/cat_large.cuh"
#include "segment/grid.cuh"
#include "segment/giant.cuh"
#include "segment/finish.cuh"
#include "segment/relabel.cuh"
