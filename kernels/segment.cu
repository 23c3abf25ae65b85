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
// segment_cat_giant on 64 blocks (-0.02 to -0.03 ms there) with its scatter from per-block part
// bases; seg_grid_sync by a flipping top bit (-0.01). Dropped: every sure step (weight below
// f32(k / S)) joined in segment_core (+0.09 to +0.14 ms on every frame: the joins' atomics moved
// into the core step cost what the caterpillars did, and the per-tree size sums cost every
// round); a round's kernels all on one stream (+0.02 to +0.4 ms: an empty launch in line costs
// ~3 us, more than a fork and join).
#include "common/blur.cuh"

#define SEG_NO_EDGE 0xffffffffffffffffull
#define SEG_NONE 0xffffffffu
#define SEG_NEVER 0xffffu

#define SEG_MODE_MERGE 0u
#define SEG_MODE_MIN_SIZE 1u

// What a round kernel iterates (its use_list argument): every pixel, each its own component
// (the first merge round without a tile pass); the previous round's list; every pixel, in
// whatever components earlier steps left (a phase's first round otherwise).
#define SEG_ALL_SINGLE 0u
#define SEG_LIST 1u
#define SEG_ALL 2u

#define SEG_CAT_CAP 2048      // members a block sorts at once (a chunk of the caterpillar)
#define SEG_CAT_THREADS 1024  // one compare-exchange a thread per step of a full chunk
#define SEG_CAT_MID_CAP 512   // segment_cat_mid: trees of up to this many members, one chunk
#define SEG_CAT_MID_THREADS 256

// A component's flag byte, per pixel id (`done`; the whole array, 2 MB at 1080p, stays in L2 for
// the frontier scans' per-edge lookups). Bit 0: frozen in merge rounds; "at least min_size" in
// min_size rounds (set by segment_reset_done and the caterpillars, so no size word is read per
// lookup). Bit 1 (SEG_JOINED): the component joined another, so it is no longer a root
// (seg_join sets it, nothing clears it): the scans learn "root or not" and "frozen" from one
// byte load and follow link (8 MB) only for stale entries.
typedef u8 seg_done_t;
#define SEG_JOINED 2u
// Bit 2 (SEG_KEEP, merge rounds): the root was an active component outside its tree's core in
// the last round that listed it (segment_core writes it for every active root), so it neither
// merged nor absorbed anything then: its least alive edge is still the key segment_targets took
// (tkey) unless the far side's root has frozen since. segment_least checks that root once per
// pixel and then skips the pixel's walk and its atomicMin (the pixel stays on the frontier);
// segment_targets makes the same check once per root and takes tkey as the key. Nothing else
// tests this bit; freezing, joining and segment_reset_done clear it.
#ifndef SEG_KEEP
#define SEG_KEEP 1
#endif
#define SEG_KEEP_BIT 4u
// min_size rounds (SEG_MS_SINK): a component of at least min_size pixels (flag bit 0) takes no
// edge of its own; it is a sink that absorbs, in one round, every tree whose targets lead into
// it (its members are all smaller than min_size, so every step passes whatever the order, and
// the sink is at least min_size all along, so the tree needs no exit). Every edge a large
// component could merge along is the least edge of the small component on its other side, or
// dead by the time Kruskal reaches it. Sink trees list the sink as an extra member with key 0
// (segment_alloc), so the caterpillars merge into it unchanged. 0 restores the earlier rounds
// (every component takes its least alive edge; a large-large step stops its caterpillar).
#ifndef SEG_MS_SINK
#define SEG_MS_SINK 1
#endif
// Sink trees of more than 32 members merged by segment_cat_mid without a sort (seg_cat_blocks;
// segment_core lists a sink's tree of more than SEG_CAT_MID_CAP members there too). GPU notes
// (H100, 2026-11-26, three passes): the clip frame's first min_size round 118 -> 69 us (k =
// 100); whole frames -39 / -23 us on the clip frame, -12 to -32 us at k = 500 on the photographs.
#ifndef SEG_MID_SINKS
#define SEG_MID_SINKS 1
#endif
// Whether root c (flag fc) is a sink (SEG_MS_SINK, min_size rounds).
#define SEG_SINK(mode, fc) (SEG_MS_SINK && (mode) == SEG_MODE_MIN_SIZE && ((fc) & 1u) != 0)

// sqrt(sum_c (s[q] - s[p])^2), channels summed in order (NumPy's sum over the last axis).
__device__ __forceinline__ double seg_dist(const double* __restrict__ s, u32 channels, u32 p, u32 q) {
    double acc = 0.0;
    for (u32 c = 0; c < channels; ++c) {
        double d = __dsub_rn(s[(size_t)q * channels + c], s[(size_t)p * channels + c]);
        double sq = __dmul_rn(d, d);
        acc = (c == 0) ? sq : __dadd_rn(acc, sq);
    }
    return __dsqrt_rn(acc);
}

__device__ __forceinline__ u64 seg_key(double w, u32 eid, u32 e) {
    return (((u64)__double_as_longlong(w) >> (e - 1)) << e) | (u64)eid;
}

__device__ __forceinline__ u32 seg_eid(u64 key, u32 e) { return (u32)(key & ((1ull << e) - 1ull)); }

// scikit-image's threshold: f32(Int + k/|C|), computed in f64 (cpu.rs threshold_f32).
__device__ __forceinline__ float seg_thr(double cint, double k, u32 size) {
    return __double2float_rn(__dadd_rn(cint, __ddiv_rn(k, (double)size)));
}

// Other pixel of edge `eid` on a grid of `width` columns.
__device__ __forceinline__ u32 seg_other(u32 eid, u32 width) {
    u32 p = eid >> 2, dir = eid & 3u;
    return p + (dir == 0 ? 1u : dir == 1 ? width : dir == 2 ? width + 1 : width - 1);
}

// Warp-reduced event/merge counts of round r (every lane of the warp must call it).
__device__ __forceinline__ void seg_count(u32* ctl, u32* mctl, u32 r, u32 ev, u32 mg) {
    for (int o = 16; o > 0; o >>= 1) {
        ev += __shfl_down_sync(FULL_MASK, ev, o);
        mg += __shfl_down_sync(FULL_MASK, mg, o);
    }
    if ((threadIdx.x & 31u) == 0) {
        if (ev) atomicAdd(&ctl[r], ev);
        if (mg) atomicAdd(&mctl[r], mg);
    }
}

// Neighbour q and edge id of direction d (0 right, 1 down, 2 down-right, 3 down-left: the
// pixel's own edges 4p + d; 4 left, 5 up, 6 up-left, 7 up-right: edge 4q + (d - 4) of q).
__device__ __forceinline__ void seg_dir(u32 p, u32 d, u32 width, u32& q, u32& id) {
    u32 a = d & 3u;
    u32 off = a == 0 ? 1u : a == 1 ? width : a == 2 ? width + 1 : width - 1;
    if (d < 4) {
        q = p + off;
        id = 4u * p + d;
    } else {
        q = p - off;
        id = 4u * q + a;
    }
}

// Edge order word of a pixel: its valid edges' directions sorted by key (3 bits each, rank i at
// bits 3i), the cursor (bits 24-27: edges before it are dead for good) and the edge count
// (bits 28-31).
#define SEG_ORD_CUR(o) (((o) >> 24) & 15u)
#define SEG_ORD_CNT(o) ((o) >> 28)
#define SEG_ORD_DIR(o, i) (((o) >> (3u * (i))) & 7u)

// (key, id) < (key2, id2).
__device__ __forceinline__ bool seg_less(u64 ka, u32 ia, u64 kb, u32 ib) {
    return ka < kb || (ka == kb && ia < ib);
}

// Swaps the (key, id) pairs a and b.
__device__ __forceinline__ void seg_swap2(u64& ka, u32& ia, u64& kb, u32& ib) {
    const u64 tk = ka;
    ka = kb;
    kb = tk;
    const u32 ti = ia;
    ia = ib;
    ib = ti;
}

// Orders (key, id) pairs a <= b.
__device__ __forceinline__ void seg_cswap2(u64& ka, u32& ia, u64& kb, u32& ib) {
    if (seg_less(kb, ib, ka, ia)) seg_swap2(ka, ia, kb, ib);
}

// Orders a pixel's (key, direction) pairs by key alone: a pixel's keys are distinct (each holds
// its edge id) except SEG_NO_EDGE, whose directions rank past the edge count and are never read.
// Fewer instructions in an issue-bound kernel (segment_blur_edges); measured within noise of
// the (key, direction) order, H100, 2026-11-26.
__device__ __forceinline__ void seg_cswap_key(u64& ka, u32& ia, u64& kb, u32& ib) {
    if (kb < ka) seg_swap2(ka, ia, kb, ib);
}

// Sorts 8 (key, direction) pairs held in registers by the 19-comparator network (fully
// unrolled, so the arrays stay in registers).
__device__ __forceinline__ void seg_sort8(u64 (&k)[8], u32 (&d)[8]) {
    seg_cswap_key(k[0], d[0], k[2], d[2]); seg_cswap_key(k[1], d[1], k[3], d[3]);
    seg_cswap_key(k[4], d[4], k[6], d[6]); seg_cswap_key(k[5], d[5], k[7], d[7]);
    seg_cswap_key(k[0], d[0], k[4], d[4]); seg_cswap_key(k[1], d[1], k[5], d[5]);
    seg_cswap_key(k[2], d[2], k[6], d[6]); seg_cswap_key(k[3], d[3], k[7], d[7]);
    seg_cswap_key(k[0], d[0], k[1], d[1]); seg_cswap_key(k[2], d[2], k[3], d[3]);
    seg_cswap_key(k[4], d[4], k[5], d[5]); seg_cswap_key(k[6], d[6], k[7], d[7]);
    seg_cswap_key(k[2], d[2], k[4], d[4]); seg_cswap_key(k[3], d[3], k[5], d[5]);
    seg_cswap_key(k[1], d[1], k[4], d[4]); seg_cswap_key(k[3], d[3], k[6], d[6]);
    seg_cswap_key(k[1], d[1], k[2], d[2]); seg_cswap_key(k[3], d[3], k[4], d[4]);
    seg_cswap_key(k[5], d[5], k[6], d[6]);
}

// Which of pixel (x, y)'s 8 directions (seg_dir's numbering) lead to a pixel of the image.
__device__ __forceinline__ void seg_valid8(u32 x, u32 y, u32 width, u32 height, bool (&valid)[8]) {
    bool l = x > 0, r = x + 1 < width, u = y > 0, dn = y + 1 < height;
    valid[0] = r;
    valid[1] = dn;
    valid[2] = r && dn;
    valid[3] = l && dn;
    valid[4] = l;
    valid[5] = u;
    valid[6] = l && u;
    valid[7] = r && u;
}

// A pixel's order word from its 8 edge keys (SEG_NO_EDGE where there is no edge) and their
// directions d[i] = i: the directions sorted by (key, direction), 3 bits each, and the number of
// real edges in bits 28-31 (the cursor, bits 24-27, starts at 0).
__device__ __forceinline__ u32 seg_order_word(u64 (&k)[8], u32 (&d)[8]) {
    seg_sort8(k, d);
    u32 o = 0, cnt = 0;
#pragma unroll
    for (u32 i = 0; i < 8; ++i) {
        o |= d[i] << (3u * i);
        cnt += k[i] != SEG_NO_EDGE ? 1u : 0u;
    }
    return o | (cnt << 28);
}

// The order word of pixel p = (x, y) from the weights of its 8 directions (w[i] is read only
// where the direction leads into the image): the keys, then seg_order_word.
__device__ __forceinline__ u32 seg_pixel_order(u32 p, u32 x, u32 y, u32 width, u32 height, u32 eb,
                                               const double (&w)[8]) {
    bool valid[8];
    seg_valid8(x, y, width, height, valid);
    u64 k[8];
    u32 d[8];
#pragma unroll
    for (u32 i = 0; i < 8; ++i) {
        u32 q, id;
        seg_dir(p, i, width, q, id);
        d[i] = i;
        k[i] = valid[i] ? seg_key(w[i], id, eb) : SEG_NO_EDGE;
    }
    return seg_order_word(k, d);
}

// The edge graph of a frame in one pass (the weights of the paper's section 3.1, never stored
// as CSR): every pixel writes its own 4 weights (w4[4p + dir]: right, down, down-right,
// down-left; +inf outside the image) and sorts all (up to) 8 of its incident edges by key with
// the 19-comparator network in registers into order[p], cursor 0. The 4 edges owned by the
// left/upper neighbours are recomputed here (seg_dist of the owner, the same operations, so the
// same bits) instead of read back from w4: one pass instead of two (GPU notes: weights 99 us +
// order 49 us at 1080p before). The rounds then walk a pixel's edges from its cursor in key
// order and stop at the first alive one: the pixel's least alive edge, usually after one or two
// neighbour lookups instead of eight. An edge that is dead (both ends in one component, or the
// far side done, or in min_size rounds both sides large) stays dead for the rest of its phase,
// so the cursor only moves forward (segment_reset_done rewinds it for the min_size phase, which
// revives edges to done components).
extern "C" __global__ void segment_edges(const double* __restrict__ s, double* __restrict__ w4, u32* order,
                                         u32 width, u32 height, u32 channels, u32 eb) {
    u32 n = width * height;
    const double inf = __longlong_as_double(0x7ff0000000000000ll);
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 x = p % width, y = p / width;
        bool valid[8];
        seg_valid8(x, y, width, height, valid);
        double w[8];
#pragma unroll
        for (u32 i = 0; i < 8; ++i) {
            u32 q, id;
            seg_dir(p, i, width, q, id);
            w[i] = inf;
            if (valid[i]) w[i] = i < 4 ? seg_dist(s, channels, p, q) : seg_dist(s, channels, q, p);
        }
        double* o4 = w4 + (size_t)p * 4;
#pragma unroll
        for (u32 i = 0; i < 4; ++i) o4[i] = w[i];
        order[p] = seg_pixel_order(p, x, y, width, height, eb, w);
    }
}

// segment_blur_edges: the blur (common/blur.cuh, the arithmetic of kernels/blur.cu's f64 passes)
// and segment_edges in one kernel, from the frame's bytes, a 32x16 tile of pixels a block of 512
// threads, everything in shared memory: (A1) the samples of the rows and columns the tile's blur
// reaches, scaled to [0, 1] once each, at their reflected positions (row and column i of the
// window hold the image's reflect(first + i), so no tap reflects again); (A2) vertical sums of
// the tile's rows and one above and below; (B) horizontal sums of the tile plus the one-pixel
// ring its edges need (one more column either side for the down-left / down-right neighbours);
// (C) the 4 own weights of each pixel of the tile, the row above and the columns either side
// (the owners of the tile's up / left edges); (D) per pixel what segment_edges writes: its own
// weights and its 8 edges sorted by key. Every sample, sum and weight is the same operation
// sequence as blur_vertical_f64 -> blur_horizontal_f64 -> segment_edges (a tap of the window at
// i - j reads the value blur_reflect would), so the bits are the same; the smoothed image never
// reaches global memory. Window entries outside the image (rows or columns past the border of
// (A2) / (B)) hold reflected sums nothing reads.
// Shared memory (46 KB static, radius <= SEG_GT_MAXR): s_a = (A1) [26 rows][132 samples], then
// (B) [18][108]; s_b = (A2) [18][132], then (C) [dir][17][34]. Samples interleaved by channel
// (a warp reads doubles at a stride of 1 or 3: no bank conflicts).
// GPU notes (H100, 2026-11-25, ncu): blur_vertical_f64 51 us, blur_horizontal_f64 50, segment_edges
// 118 (SM clock locked by ncu), all three compute-bound (issue slots 65-77 % busy): the taps
// reloaded and rescaled their bytes and reflected per tap, and segment_edges recomputed 8
// distances a pixel. A first fused version with the per-tap code of blur.cu took 216 us (71 %
// issue-busy, ~2 000 instructions a pixel).
#define SEG_GT_W 32
#define SEG_GT_H 16
#define SEG_GT_THREADS 512
#define SEG_GT_MAXR 4
#define SEG_GT_AR (SEG_GT_H + 2 + 2 * SEG_GT_MAXR)    // (A1) rows
#define SEG_GT_RS ((SEG_GT_W + 4 + 2 * SEG_GT_MAXR) * 3)  // (A1) / (A2) row stride, samples
#define SEG_GT_SR (SEG_GT_H + 2)                      // (A2) / (B) rows
#define SEG_GT_SS ((SEG_GT_W + 4) * 3)                // (B) row stride, samples
#define SEG_GT_WR (SEG_GT_H + 1)
#define SEG_GT_WC (SEG_GT_W + 2)
// segment_blur_edges specialised for radius 3 and 1 or 3 channels (0: the generic body only).
#ifndef SEG_GT_SPECIAL
#define SEG_GT_SPECIAL 1
#endif

// The kernel's body for a blur radius RT and channel count CHT known at compile time (the
// loops over taps and channels unrolled, the divisions by the window's row length by a
// constant), or read from the arguments (RT < 0, CHT 0). The shared arrays are the kernel's (a
// template's own would be allocated once per instantiation). GPU notes (H100, 2026-11-26, ncu):
// with the radius and channels read at run time the kernel issued ~1 480 instructions a pixel
// (146 us at 1080p RGB, issue slots 69 % busy, IPC 2.84).
template <int RT, int CHT>
__device__ __forceinline__ void seg_blur_edges_body(const u8* __restrict__ src, const BlurWeightsF64& wt,
                                                    double* __restrict__ w4, u32* order, u32 width, u32 height,
                                                    u32 channels, u32 eb, double inv255, double* s_a, double* s_b) {
    double* s_w = s_b;  // (C) after (B): 4 * 17 * 34 <= 18 * 132 doubles
    const double inf = __longlong_as_double(0x7ff0000000000000ll);
    const int W = (int)width, H = (int)height, R = RT >= 0 ? RT : wt.radius, ch = CHT > 0 ? CHT : (int)channels;
    const int x0 = (int)(blockIdx.x * SEG_GT_W), y0 = (int)(blockIdx.y * SEG_GT_H);
    const u32 row = width * channels;
    const int tid = (int)threadIdx.x;
    // Window columns: pixels vx0 .. vx0 + pc - 1 (reflected), cols samples a row.
    const int vx0 = x0 - 2 - R, pc = SEG_GT_W + 4 + 2 * R, cols = pc * ch;
    const int arows = SEG_GT_H + 2 + 2 * R;
    // (A1) to (B): a thread keeps one window column (sample sm) and steps over rows, so the
    // column's index arithmetic and reflection are done once. GPU notes (H100, 2026-11-26): the
    // kernel is issue-bound; with one flat index a sample (divided by the row length, reflected
    // and split by channel each time) it took 159-172 us at 1080p RGB, by columns 152-159.
    // (A1) scaled samples of rows reflect(y0 - 1 - R + r), columns reflect(vx0 + px).
    {
        const int rstep = SEG_GT_THREADS / cols, sm = tid % cols, r0 = tid / cols;
        if (r0 < rstep) {
            const int px = ch == 1 ? sm : sm / 3, c = sm - px * ch;
            const u32 gxc = (u32)(blur_reflect(vx0 + px, W) * ch + c);
            for (int r = r0; r < arows; r += rstep) {
                const int gy = blur_reflect(y0 - 1 - R + r, H);
                s_a[r * SEG_GT_RS + sm] = __dmul_rn((double)src[(size_t)gy * row + gxc], inv255);
            }
        }
    }
    __syncthreads();
    // (A2) vertical sums of rows y0 - 1 .. y0 + H (blur_vertical_f64_at's operations).
    auto vsum = [&](int vr, int sm) {
        const double* a = s_a + (vr + R) * SEG_GT_RS + sm;
        double t = __dmul_rn(a[0], wt.half[0]);
#pragma unroll
        for (int j = R; j >= 1; --j) t = __dadd_rn(t, __dmul_rn(__dadd_rn(a[-j * SEG_GT_RS], a[j * SEG_GT_RS]), wt.half[j]));
        s_b[vr * SEG_GT_RS + sm] = t;
    };
    {
        const int rstep = SEG_GT_THREADS / cols, sm = tid % cols, r0 = tid / cols;
        if (r0 < rstep)
            for (int vr = r0; vr < SEG_GT_SR; vr += rstep) vsum(vr, sm);
    }
    __syncthreads();
    // (B) horizontal sums of columns x0 - 2 .. x0 + W + 1 (blur_horizontal_f64_at's operations;
    // window column x - vx0 holds column reflect(x)), into s_a.
    const int bcols = (SEG_GT_W + 4) * ch;
    auto hsum = [&](int sr, int sm) {
        const double* v = s_b + sr * SEG_GT_RS + sm + R * ch;
        double t = __dmul_rn(v[0], wt.half[0]);
#pragma unroll
        for (int j = R; j >= 1; --j) t = __dadd_rn(t, __dmul_rn(__dadd_rn(v[-j * ch], v[j * ch]), wt.half[j]));
        s_a[sr * SEG_GT_SS + sm] = t;
    };
    {
        const int rstep = SEG_GT_THREADS / bcols, sm = tid % bcols, r0 = tid / bcols;
        if (r0 < rstep)
            for (int sr = r0; sr < SEG_GT_SR; sr += rstep) hsum(sr, sm);
    }
    __syncthreads();
    // (C) own weights (seg_dist's operations) of rows y0 - 1 .. y0 + H - 1, columns x0 - 1 ..
    // x0 + W, into s_b.
    for (int i = tid; i < SEG_GT_WR * SEG_GT_WC; i += SEG_GT_THREADS) {
        int wr = i / SEG_GT_WC, wc = i - wr * SEG_GT_WC;
        int x = x0 - 1 + wc, y = y0 - 1 + wr;
        if (x < 0 || x >= W || y < 0 || y >= H) continue;
        const double* sp = s_a + wr * SEG_GT_SS + (wc + 1) * ch;  // (x, y) in (B)
#pragma unroll
        for (int d = 0; d < 4; ++d) {
            int dx = d == 0 ? 1 : d == 1 ? 0 : d == 2 ? 1 : -1, dy = d == 0 ? 0 : 1;
            double w = inf;
            if (x + dx >= 0 && x + dx < W && y + dy < H) {
                const double* sq = sp + dy * SEG_GT_SS + dx * ch;
                double acc = 0.0;
#pragma unroll
                for (int c = 0; c < ch; ++c) {
                    double df = __dsub_rn(sq[c], sp[c]);
                    double sqr = __dmul_rn(df, df);
                    acc = (c == 0) ? sqr : __dadd_rn(acc, sqr);
                }
                w = __dsqrt_rn(acc);
            }
            s_w[(d * SEG_GT_WR + wr) * SEG_GT_WC + wc] = w;
        }
    }
    __syncthreads();
    // (D) each pixel of the tile: its own weights to w4, its edges sorted into order.
    for (int i = (int)threadIdx.x; i < SEG_GT_W * SEG_GT_H; i += SEG_GT_THREADS) {
        int ly = i / SEG_GT_W, lx = i - ly * SEG_GT_W;
        int x = x0 + lx, y = y0 + ly;
        if (x >= W || y >= H) continue;
        u32 p = (u32)y * width + (u32)x;
        // Weight of each direction: own (d < 4) at (lx, ly); left, up, up-left, up-right are the
        // right / down / down-right / down-left weights of the neighbour that owns them.
        const int wr = ly + 1, wc = lx + 1;
        double wd[8];
#pragma unroll
        for (int d = 0; d < 4; ++d) wd[d] = s_w[(d * SEG_GT_WR + wr) * SEG_GT_WC + wc];
        wd[4] = s_w[(0 * SEG_GT_WR + wr) * SEG_GT_WC + wc - 1];
        wd[5] = s_w[(1 * SEG_GT_WR + wr - 1) * SEG_GT_WC + wc];
        wd[6] = s_w[(2 * SEG_GT_WR + wr - 1) * SEG_GT_WC + wc - 1];
        wd[7] = s_w[(3 * SEG_GT_WR + wr - 1) * SEG_GT_WC + wc + 1];
        double2* o4 = (double2*)(w4 + (size_t)p * 4);
        o4[0] = make_double2(wd[0], wd[1]);
        o4[1] = make_double2(wd[2], wd[3]);
        order[p] = seg_pixel_order(p, (u32)x, (u32)y, width, height, eb, wd);
    }
}

extern "C" __global__ void __launch_bounds__(SEG_GT_THREADS, 3)
    segment_blur_edges(const u8* __restrict__ src, BlurWeightsF64 wt, double* __restrict__ w4, u32* order,
                       u32 width, u32 height, u32 channels, u32 eb, double inv255) {
    __shared__ double s_a[SEG_GT_AR * SEG_GT_RS];
    __shared__ double s_b[SEG_GT_SR * SEG_GT_RS];
    // sigma 0.8 (the default) has radius 3 (scikit-image: int(4 sigma + 0.5)).
    if (SEG_GT_SPECIAL && wt.radius == 3 && channels == 3)
        seg_blur_edges_body<3, 3>(src, wt, w4, order, width, height, channels, eb, inv255, s_a, s_b);
    else if (SEG_GT_SPECIAL && wt.radius == 3 && channels == 1)
        seg_blur_edges_body<3, 1>(src, wt, w4, order, width, height, channels, eb, inv255, s_a, s_b);
    else
        seg_blur_edges_body<-1, 0>(src, wt, w4, order, width, height, channels, eb, inv255, s_a, s_b);
}

// Whether the edge from component c to component e != c... is alive (fe: e's flag byte): merge
// rounds, e is not frozen; min_size rounds, not both sides at least min_size (`big`: c is; bit
// 0 of e's flag says whether e is).
__device__ __forceinline__ bool seg_alive(u32 mode, u32 c, u32 e, bool big, u32 fe) {
    if (e == c) return false;
    if (mode == SEG_MODE_MERGE) return (fe & 1u) == 0;
    return !(big && (fe & 1u) != 0);
}

// Pixel i as a component of its own, before the merge rounds (segment_init, or segment_tiles as it
// reads the pixel).
__device__ __forceinline__ void seg_init_pixel(u32* comp, u32* link, u32* size, double* cint, seg_done_t* done,
                                               u64* best, u32* target, u32* tree, u64* tcnt, u16* round, u32 i) {
    comp[i] = i;
    link[i] = i;
    size[i] = 1;
    cint[i] = 0.0;
    done[i] = 0;
    best[i] = SEG_NO_EDGE;
    target[i] = SEG_NONE;
    tree[i] = SEG_NONE;
    tcnt[i] = 0;
    round[i] = SEG_NEVER;
}

// Every component a pixel; every pixel's cursor back to its first edge (the edge graph is built
// before the captured rounds, and a frame run again starts from the cursors its first run left).
extern "C" __global__ void segment_init(u32* comp, u32* link, u32* size, double* cint, seg_done_t* done, u64* best,
                                        u32* target, u32* tree, u64* tcnt, u16* round, u32* order, u32* ctl,
                                        u32* mctl, u32* counters, u32 n, u32 nctl, u32 ncounters) {
    for (u32 i = global_tid(); i < n || i < nctl || i < ncounters; i += global_threads()) {
        if (i < ncounters) counters[i] = 0;
        if (i < n) {
            seg_init_pixel(comp, link, size, cint, done, best, target, tree, tcnt, round, i);
            order[i] &= ~(15u << 24);
        }
        if (i < nctl) {
            ctl[i] = (i == 0) ? 1u : 0u;
            mctl[i] = 0;
        }
    }
}

// Root of x: follow link (roots point at themselves).
__device__ __forceinline__ u32 seg_find(const u32* __restrict__ link, u32 x) {
    while (true) {
        u32 y = link[x];
        if (y == x) return x;
        x = y;
    }
}

// Appends `id` to list[*count] when `keep` with one atomicAdd per block: the lists of the first
// rounds take ~2 M entries, and a warp-aggregated append serialises ~65 000 atomics on one
// counter (measured: about half of segment_least's 194 us in round 1). Every thread of the
// block must call it the same number of times (block-uniform loops, see SEG_BLOCK_LOOP); the
// block size is at most 1024.
// One warp turns the block's per-warp counts cnt[0 .. warps) into each warp's offset in the
// list, base included (an inclusive scan by shuffles; lane 0 takes the block's range with one
// atomicAdd). GPU notes (H100, 2026-11-26): one thread looping over the warps' counts before
// its atomicAdd sat on every block's path through every append; the scan took -0 to -13 us off
// a 1080p frame and the finishers' spills from 36 to 8 bytes.
__device__ __forceinline__ void seg_append_scan(u32* cnt, u32* count) {
    const u32 lane = threadIdx.x & 31u, nw = blockDim.x >> 5;
    const u32 c = lane < nw ? cnt[lane] : 0u;
    const u32 incl = warp_inclusive_scan(c);
    const u32 sum = __shfl_sync(FULL_MASK, incl, 31);
    u32 base = 0;
    if (lane == 0 && sum) base = atomicAdd(count, sum);
    base = __shfl_sync(FULL_MASK, base, 0);
    if (lane < nw) cnt[lane] = base + incl - c;
}

__device__ __forceinline__ void seg_append_block(u32* list, u32* count, bool keep, u32 id) {
    __shared__ u32 s_warp[32];
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 ballot = __ballot_sync(FULL_MASK, keep);
    if (lane == 0) s_warp[warp] = (u32)__popc(ballot);
    __syncthreads();
    if (warp == 0) seg_append_scan(s_warp, count);
    __syncthreads();
    if (keep) list[s_warp[warp] + (u32)__popc(ballot & ((1u << lane) - 1u))] = id;
    __syncthreads();
}

// The shared part of K block appends at once: each warp's count of ballot k (s_cnt[k][warp]),
// turned by warp k into the warp's offset in list k, the block's base included (one atomicAdd on
// count(k) a block, the K side by side). Two barriers; the caller then writes its entries at
// s_cnt[k][warp] + its rank in the ballot, then syncs.
template <u32 K, class C>
__device__ __forceinline__ void seg_append_bases(const u32 (&b)[K], u32 (&s_cnt)[K][32], C count) {
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0) {
#pragma unroll
        for (u32 k = 0; k < K; ++k) s_cnt[k][warp] = (u32)__popc(b[k]);
    }
    __syncthreads();
    if (warp < K) seg_append_scan(s_cnt[warp], count(warp));
    __syncthreads();
}

// seg_append_block for two lists at once (each thread may append to both): one round of
// barriers and the two atomicAdds side by side instead of one after the other. SEG_APPEND_PAIR 0
// restores two seg_append_block calls.
#ifndef SEG_APPEND_PAIR
#define SEG_APPEND_PAIR 1
#endif
__device__ __forceinline__ void seg_append_pair(u32* l0, u32* c0, bool k0, u32 id0, u32* l1, u32* c1, bool k1,
                                                u32 id1) {
    if (!SEG_APPEND_PAIR) {
        seg_append_block(l0, c0, k0, id0);
        seg_append_block(l1, c1, k1, id1);
        return;
    }
    __shared__ u32 s_cnt2[2][32];
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const u32 b[2] = {__ballot_sync(FULL_MASK, k0), __ballot_sync(FULL_MASK, k1)};
    seg_append_bases<2>(b, s_cnt2, [&](u32 k) { return k == 0 ? c0 : c1; });
    const u32 below = (1u << lane) - 1u;
    if (k0) l0[s_cnt2[0][warp] + (u32)__popc(b[0] & below)] = id0;
    if (k1) l1[s_cnt2[1][warp] + (u32)__popc(b[1] & below)] = id1;
    __syncthreads();
}

// Appends `id` to list k (l0..l3, counts c0..c3) of class cls = k < 4 (4: to none) and counts
// the `counted` lanes in *xcount: seg_append_block for five lists at once, one round of
// barriers and the (at most five) atomicAdds side by side instead of one after another.
__device__ __forceinline__ void seg_append_by_class(u32* l0, u32* c0, u32* l1, u32* c1, u32* l2, u32* c2, u32* l3,
                                                    u32* c3, u32* xcount, bool counted, u32 cls, u32 id) {
    __shared__ u32 s_cnt[5][32];
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 b[5];
#pragma unroll
    for (u32 k = 0; k < 4; ++k) b[k] = __ballot_sync(FULL_MASK, cls == k);
    b[4] = __ballot_sync(FULL_MASK, counted);
    seg_append_bases<5>(b, s_cnt,
                        [&](u32 k) { return k == 0 ? c0 : k == 1 ? c1 : k == 2 ? c2 : k == 3 ? c3 : xcount; });
    const u32 below = (1u << lane) - 1u;
#pragma unroll
    for (u32 k = 0; k < 4; ++k) {
        if (cls == k) {
            u32* list = k == 0 ? l0 : k == 1 ? l1 : k == 2 ? l2 : l3;
            list[s_cnt[k][warp] + (u32)__popc(b[k] & below)] = id;
        }
    }
    __syncthreads();
}

// A grid-stride loop over items `i` that every thread of a block runs the same number of times
// (for seg_append_block); the body checks i < count itself.
#define SEG_BLOCK_LOOP(i, count)                                                                  \
    for (u32 seg_base_ = blockIdx.x * blockDim.x, i = seg_base_ + threadIdx.x; seg_base_ < (count); \
         seg_base_ += global_threads(), i = seg_base_ + threadIdx.x)

// Edges a frontier scan examines at once (the batch B of seg_batch_load): their neighbour, link
// and far-side loads are issued together, so a batch costs one comp -> link -> flag chain
// instead of one per edge. A wider batch saves round trips where a scan waits on them (the tail
// rounds' short lists, the finishers: SEG_BATCH_TAIL) and costs traffic where the scan is bound
// by it (lists of more than SEG_BATCH_DENSE_MIN entries: the dense rounds, SEG_BATCH_DENSE).
// GPU notes (H100, 2026-11-26): with 4 everywhere, ncu put round 3's exits at 17 M L2 sectors
// for 2 M frontier pixels (8 a pixel, 68 % of them excess: the batch's four neighbours lie in
// three rows); 2 everywhere took building 1080p from 3.00-3.02 to 2.92-2.93 ms (k = 100),
// fruits 3.33-3.34 -> 3.22-3.23, the clip frame 3.66-3.68 -> 3.59-3.60; 3 everywhere was
// slower than 4.
#ifndef SEG_BATCH_DENSE
#define SEG_BATCH_DENSE 2
#endif
#ifndef SEG_BATCH_TAIL
#define SEG_BATCH_TAIL 2
#endif
#ifndef SEG_BATCH_DENSE_MIN
#define SEG_BATCH_DENSE_MIN 131072u
#endif

// The neighbours q[j], edge ids and comp[q] entries of pixel p's edges cur + j (j < B,
// cur + j < cnt) in key order: the first half of seg_batch, which the frontier scans issue early
// (SEG_SPEC) beside the loads of the pixel's own root.
template <u32 B>
__device__ __forceinline__ void seg_batch_load(const u32* comp, u32 p, u32 o, u32 cur, u32 cnt, u32 width,
                                               u32 (&q)[B], u32 (&id)[B], u32 (&cq)[B]) {
#pragma unroll
    for (u32 j = 0; j < B; ++j) {
        q[j] = p;
        id[j] = 0;
        cq[j] = 0;
        if (cur + j < cnt) {
            seg_dir(p, SEG_ORD_DIR(o, cur + j), width, q[j], id[j]);
            cq[j] = comp[q[j]];
        }
    }
}

// The second half: far roots e[j] and their flags from seg_batch_load's entries; compresses
// comp[q] of the neighbours whose entry was stale.
template <u32 B>
__device__ __forceinline__ void seg_batch_resolve(u32* comp, const u32* __restrict__ link,
                                                  const seg_done_t* __restrict__ done, u32 cur, u32 cnt,
                                                  const u32 (&q)[B], const u32 (&cq)[B], u32 (&e)[B], u32 (&fl)[B]) {
#pragma unroll
    for (u32 j = 0; j < B; ++j) fl[j] = cur + j < cnt ? (u32)done[cq[j]] : 0u;
#pragma unroll
    for (u32 j = 0; j < B; ++j) {
        e[j] = cur + j < cnt ? cq[j] : SEG_NONE;
        if (cur + j < cnt && (fl[j] & SEG_JOINED)) {
            e[j] = seg_find(link, cq[j]);
            comp[q[j]] = e[j];
            fl[j] = done[e[j]];
        }
    }
}

// Loads issued before the pixel's (or root's) own lookups decide whether they are needed, in the
// launched kernels: segment_exits' first batch of neighbour entries and the weight of the edge at
// the cursor, beside the pixel's target and tree; segment_targets' last target and key of a
// root, beside its flag. Only for lists of at most SEG_SPEC_MAX entries: there a kernel waits on
// its chain of dependent loads, while the dense rounds are bound by their traffic, which unused
// loads would add to. Not in segment_least (its 32 registers would spill) nor in the finishers
// (their spills grow by half).
#ifndef SEG_SPEC
#define SEG_SPEC 1
#endif
#ifndef SEG_SPEC_MAX
#define SEG_SPEC_MAX 131072u
#endif

// A weight loaded early (SEG_SPEC): plain `ld.global` in an asm statement, which the compiler
// neither drops nor moves past the lookups after it.
__device__ __forceinline__ double seg_ld_weight(const double* w) {
    double v;
    asm volatile("ld.global.f64 %0, [%1];" : "=d"(v) : "l"(w));
    return v;
}

// Root of pixel-component c0 and its flag byte: one byte load when c0 is still a root; else
// link is followed.
__device__ __forceinline__ u32 seg_root_flag(const u32* __restrict__ link, const seg_done_t* __restrict__ done,
                                             u32 c0, u32& fl) {
    fl = done[c0];
    if (!(fl & SEG_JOINED)) return c0;
    u32 c = seg_find(link, c0);
    fl = done[c];
    return c;
}

// atomicMin of a per-component key by many pixels (the frontier scans): with SEG_ATOMIC_FILTER a
// plain load first, and no atomic when the stored key is already at most `key`.
#ifndef SEG_ATOMIC_FILTER
#define SEG_ATOMIC_FILTER 1
#endif
// A tree's counts in one word (tcnt[tree], 0 between rounds): the low half counts its core
// members (their slots: segment_core; a sink's tree starts at 1, its slot 0 is the sink:
// segment_alloc), the high half its members not yet counted off (segment_trees counts them in,
// segment_core out). One atomicAdd a warp and tree in segment_core takes the warp's slots and
// counts its members off at once, so the group that takes the high half to 0 knows the core's
// size from the same atomic.
#define SEG_TCNT_MEMBER (1ull << 32)

__device__ __forceinline__ void seg_atomic_min(u64* slot, u64 key) {
    if (SEG_ATOMIC_FILTER && *(volatile u64*)slot <= key) return;
    atomicMin(slot, key);
}

// Whether root c (flag fc) keeps last round's least edge (SEG_KEEP): it was outside its tree's
// core then, and the far side's root has not frozen since (it cannot be c: c absorbed nothing).
// segment_least and segment_targets decide alike: nothing between them changes flags or links.
// The far side's half of seg_kept, from c's last target t.
__device__ __forceinline__ bool seg_kept_far(const u32* __restrict__ link, const seg_done_t* __restrict__ done,
                                             u32 t) {
    u32 ft = done[t];
    if (ft & SEG_JOINED) ft = done[seg_find(link, t)];
    return (ft & 1u) == 0;
}

__device__ __forceinline__ bool seg_kept(const u32* __restrict__ link, const seg_done_t* __restrict__ done,
                                         const u32* __restrict__ target, u32 c, u32 fc) {
    if (!(fc & SEG_KEEP_BIT)) return false;
    return seg_kept_far(link, done, target[c]);
}

// Step 1: relabel, then the least alive key of every active component (atomicMin; the paper's
// Algorithms 2 and 3). Iterates all pixels (use_list SEG_ALL_*) or in_list[0..*in_count]
// (SEG_LIST); writes the frontier of this round (pixels with an alive edge) to out_list /
// *out_count. A first merge round on singletons (SEG_ALL_SINGLE: no tile pass before it) needs
// no lookups: every pixel is its own component and every edge is alive, so a pixel's least edge
// is the first of its order word.
template <u32 B>
__device__ __forceinline__ void seg_least_body(u32* comp, const u32* __restrict__ link, const double* __restrict__ w4,
                                               u64* best, const seg_done_t* __restrict__ done,
                                               const u32* __restrict__ target, const u64* __restrict__ tkey,
                                               u32* order, u32 width,
                                               u32 height, u32 eb, u32 mode, const u32* __restrict__ ctl, u32 gate,
                                               u32 use_list,
                  const u32* __restrict__ in_list, u32 in_n, u32* out_list, u32* out_count) {
    bool first = mode == SEG_MODE_MERGE && use_list == SEG_ALL_SINGLE;
    u32 count = use_list == SEG_LIST ? in_n : width * height;
    SEG_BLOCK_LOOP(i, count) {
        bool in = i < count;
        u32 p = in ? (use_list == SEG_LIST ? in_list[i] : i) : 0u;
        u64 bk = SEG_NO_EDGE;
        u32 c = SEG_NONE;
        bool kept = false;
        if (in && first) {
            u32 o = order[p];
            if (SEG_ORD_CNT(o) > 0) {
                u32 q, id;
                seg_dir(p, SEG_ORD_DIR(o, 0), width, q, id);
                bk = seg_key(w4[id], id, eb);
                best[p] = bk;  // the component is p alone
            }
        } else if (in) {
            u32 c0 = comp[p];
            u32 o = order[p];
            u32 cur = SEG_ORD_CUR(o), cnt = SEG_ORD_CNT(o), start = cur;
            u32 fc;
            c = seg_root_flag(link, done, c0, fc);
            if (c != c0) comp[p] = c;
            bool active = (mode == SEG_MODE_MIN_SIZE && !SEG_MS_SINK) || (fc & 1u) == 0;
            if (SEG_KEEP && active && mode == SEG_MODE_MERGE && seg_kept(link, done, target, c, fc)) {
                bk = tkey[c];
                kept = true;
            }
            if (active && !kept) {
                // The first alive edge from the cursor in key order is the pixel's least; dead
                // ones before it are skipped for good (see segment_edges).
                bool big = mode == SEG_MODE_MIN_SIZE && fc != 0;
                u32 hit_id = SEG_NONE;
                for (; cur < cnt; cur += B) {
                    u32 q[B], id[B], cq[B];
                    seg_batch_load(comp, p, o, cur, cnt, width, q, id, cq);
                    u32 e[B], fl[B];
                    seg_batch_resolve(comp, link, done, cur, cnt, q, cq, e, fl);
                    bool al[B];
#pragma unroll
                    for (u32 j = 0; j < B; ++j)
                        al[j] = cur + j < cnt && seg_alive(mode, c, e[j], big, fl[j]);
                    u32 hit = B;
#pragma unroll
                    for (int j = B - 1; j >= 0; --j)
                        if (al[j]) hit = (u32)j;
                    if (hit < B) {
#pragma unroll
                        for (u32 j = 0; j < B; ++j)
                            if (j == hit) hit_id = id[j];
                        cur += hit;
                        break;
                    }
                }
                if (cur > cnt) cur = cnt;
                if (cur != start) order[p] = (o & ~(15u << 24)) | (cur << 24);
                if (hit_id != SEG_NONE) bk = seg_key(w4[hit_id], hit_id, eb);
            }
        }
        // A kept component's key is taken by segment_targets itself (no atomic here).
        if (!first && bk != SEG_NO_EDGE && !kept) seg_atomic_min(&best[c], bk);
        seg_append_block(out_list, out_count, bk != SEG_NO_EDGE, p);
    }
}

// The gate word of a round kernel and the count its body reads first, loaded together (one
// L2 round trip at every launch instead of two: in the tail rounds a kernel's few items wait on
// a chain of dependent loads, and these two used to start it); the body takes the count as a
// value (the finishers pass what they read). SEG_GATE_PAIR 0 restores the gate load alone.
#ifndef SEG_GATE_PAIR
#define SEG_GATE_PAIR 1
#endif
__device__ __forceinline__ u32 seg_gate(const u32* ctl, u32 gate, const u32* count, u32& cnt) {
    u32 g;
    if (SEG_GATE_PAIR) {
        asm volatile("ld.global.u32 %0, [%2];\n\tld.global.u32 %1, [%3];"
                     : "=r"(g), "=r"(cnt)
                     : "l"(ctl + gate), "l"(count)
                     : "memory");
        // The exit test reads both words (a count never reaches 2^31), so ptxas cannot sink the
        // count's load below it.
        return g | (cnt >> 31);
    }
    g = ctl[gate];
    if (g != 0) cnt = *count;
    return g;
}

// A round kernel's prologue: lets the next round kernel start (ExLaunch; it waits for this
// one), waits for the one before, then reads the gate and the count its body starts from
// (seg_gate). False: the phase converged in an earlier round, nothing to do.
__device__ __forceinline__ bool seg_round_start(const u32* ctl, u32 gate, const u32* count, u32& cnt) {
    grid_dep_launch();
    grid_dep_wait();
    return seg_gate(ctl, gate, count, cnt) != 0;
}

// Blocks an SM keeps of segment_least (8: 32 registers, the whole SM's 64 warps; the SEG_KEEP
// path would otherwise take 40 registers and 48 warps an SM).
#ifndef SEG_LEAST_BLOCKS
#define SEG_LEAST_BLOCKS 8
#endif
extern "C" __global__ void __launch_bounds__(256, SEG_LEAST_BLOCKS)
    segment_least(u32* comp, const u32* __restrict__ link, const double* __restrict__ w4, u64* best,
                  const seg_done_t* __restrict__ done, const u32* __restrict__ target, const u64* __restrict__ tkey,
                  u32* order, u32 width, u32 height, u32 eb, u32 mode,
                  const u32* __restrict__ ctl, u32 gate, u32 use_list,
                  const u32* __restrict__ in_list, const u32* __restrict__ in_count, u32* out_list,
                  u32* out_count) {
    u32 in_n;
    if (!seg_round_start(ctl, gate, use_list == SEG_LIST ? in_count : ctl, in_n)) return;
    if ((use_list == SEG_LIST ? in_n : width * height) > SEG_BATCH_DENSE_MIN)
        seg_least_body<SEG_BATCH_DENSE>(comp, link, w4, best, done, target, tkey, order, width, height, eb, mode, ctl, gate,
                                        use_list, in_list, in_n, out_list, out_count);
    else
        seg_least_body<SEG_BATCH_TAIL>(comp, link, w4, best, done, target, tkey, order, width, height, eb, mode, ctl, gate,
                                       use_list, in_list, in_n, out_list, out_count);
}

// Exclusive scan of one value per thread over the block (blockDim.x a multiple of 32, at most
// 1024); the block total goes to *total. Uses 32 words of shared memory.
__device__ u32 seg_block_scan(u32 v, u32* total) {
    __shared__ u32 warp_sums[32];
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 nwarps = blockDim.x >> 5;
    u32 x = warp_inclusive_scan(v);
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        warp_sums[lane] = warp_inclusive_scan(lane < nwarps ? warp_sums[lane] : 0u);
    }
    __syncthreads();
    u32 off = warp > 0 ? warp_sums[warp - 1] : 0;
    *total = warp_sums[nwarps - 1];
    __syncthreads();
    return off + x - v;
}

// The root at the far end of root v's least edge `key`: both ends' component entries and flags
// load together, and link is followed only for a stale entry (`first`: every pixel is its own
// component, so the ends are the roots).
__device__ __forceinline__ u32 seg_far_root(const u32* __restrict__ comp, const u32* __restrict__ link,
                                            const seg_done_t* done, u32 width, u32 eb, u64 key, u32 v,
                                            bool first) {
    const u32 eid = seg_eid(key, eb);
    u32 ra = eid >> 2, rb = seg_other(eid, width);
    if (!first) {
        const u32 ca = comp[ra], cb = comp[rb];
        const u32 fa = done[ca], fb = done[cb];
        ra = (fa & SEG_JOINED) ? seg_find(link, ca) : ca;
        rb = (fb & SEG_JOINED) ? seg_find(link, cb) : cb;
    }
    return ra == v ? rb : ra;
}

// Step 2: targets of the roots (every pixel in a phase's first round, else the previous round's
// active roots): the far component of the least alive edge (the paper's Algorithm 5 'sources');
// a root without alive edges is done in merge rounds. Resets the root's exit (its tree and
// least key are clear already: segment_core clears them after their last use, segment_init or
// segment_tiles set them up); the roots that stay active go to out_list / *out_count.
__device__ __forceinline__ void seg_targets_body(const u32* __restrict__ comp, const u32* __restrict__ link, u64* best, u64* tkey, u32* target,
                    u32* tree, u64* exitk, seg_done_t* done, u32 width, u32 n, u32 eb, u32 mode, u32* ctl, u32* mctl,
                    u32 gate, u32 r, u32 use_list, const u32* __restrict__ in_list,
                    u32 in_n, u32* out_list, u32* out_count, bool allow_spec) {
    // First merge round: every pixel is a root of itself, so an edge's ends are its components.
    bool first = mode == SEG_MODE_MERGE && use_list == SEG_ALL_SINGLE;
    u32 ev = 0;
    u32 count = use_list == SEG_LIST ? in_n : n;
    const bool spec = allow_spec && SEG_SPEC && SEG_KEEP && !first && mode == SEG_MODE_MERGE && count <= SEG_SPEC_MAX;
    SEG_BLOCK_LOOP(i, count) {
        bool in = i < count, keep = false;
        u32 v = in ? (use_list == SEG_LIST ? in_list[i] : i) : 0u;
        // The root's words are loaded together, then both ends of its edge (latency-bound).
        u64 key = in ? best[v] : SEG_NO_EDGE;
        u32 fv = in ? (first ? 0u : (u32)done[v]) : 1u;
        // With SEG_SPEC the last target and key too, before the flag says they are needed.
        u32 tv = in && spec ? target[v] : 0u;
        u64 tk = in && spec ? tkey[v] : 0ull;
        bool root = in && (first || (fv & SEG_JOINED) == 0);
        u32 dv = fv & 1u;
        // A kept component's pixels left best alone (SEG_KEEP): its key is last round's.
        if (SEG_KEEP && root && mode == SEG_MODE_MERGE && dv == 0) {
            if (spec) {
                if ((fv & SEG_KEEP_BIT) && seg_kept_far(link, done, tv)) key = tk;
            } else if (seg_kept(link, done, target, v, fv)) {
                key = tkey[v];
            }
        }
        if (root) {
            target[v] = SEG_NONE;
            exitk[v] = SEG_NO_EDGE;
            if ((mode == SEG_MODE_MIN_SIZE && !SEG_MS_SINK) || dv == 0) {
                if (key == SEG_NO_EDGE) {
                    if (mode == SEG_MODE_MERGE) {
                        done[v] = 1;
                        ++ev;
                    }
                } else {
                    tkey[v] = key;
                    target[v] = seg_far_root(comp, link, done, width, eb, key, v, first);
                    keep = true;
                }
            }
        }
        seg_append_block(out_list, out_count, keep, v);
    }
    seg_count(ctl, mctl, r, ev, 0);
}

extern "C" __global__ void __launch_bounds__(256)
    segment_targets(const u32* __restrict__ comp, const u32* __restrict__ link, u64* best, u64* tkey, u32* target,
                    u32* tree, u64* exitk, seg_done_t* done, u32 width, u32 n, u32 eb, u32 mode, u32* ctl, u32* mctl,
                    u32 gate, u32 r, u32 use_list, const u32* __restrict__ in_list,
                    const u32* __restrict__ in_count, u32* out_list, u32* out_count) {
    u32 in_n;
    if (!seg_round_start(ctl, gate, use_list == SEG_LIST ? in_count : ctl, in_n)) return;
    seg_targets_body(comp, link, best, tkey, target, tree, exitk, done, width, n, eb, mode, ctl, mctl, gate, r, use_list, in_list, in_n, out_list, out_count, true);
}

// The walk of segment_trees from root x (its target tx) to its tree: at each root y reached, its
// flag (`flags`, or in min_size rounds, for the sink test), its tree (another thread may have
// written it: SEG_NONE or final) and its target (target_of(y, fy); EAGER: loaded beside the other
// two, else only once they have not ended the walk) decide; the walk ends at a sink, at a known
// tree or at the mutual pair (named by its smaller root).
template <bool EAGER, class F>
__device__ __forceinline__ u32 seg_walk(const seg_done_t* done, const u32* tree, u32 mode, bool flags, u32 x,
                                        u32 tx, F target_of) {
    while (true) {
        u32 y = tx;
        u32 fy = (flags || (SEG_MS_SINK && mode == SEG_MODE_MIN_SIZE)) ? (u32)((volatile const seg_done_t*)done)[y]
                                                                       : 0u;
        u32 known = ((volatile const u32*)tree)[y];
        u32 ty = EAGER ? target_of(y, fy) : SEG_NONE;
        if (SEG_SINK(mode, fy)) return y;
        if (known != SEG_NONE) return known;
        if (!EAGER) ty = target_of(y, fy);
        if (ty == x || ty == SEG_NONE) return x < y ? x : y;
        x = y;
        tx = ty;
    }
}

// Step 3: the tree of every active root: follow targets (keys fall strictly along them) to the
// mutual pair (the paper's Algorithm 6 finds the same pairs) or, in min_size rounds, a sink
// (SEG_MS_SINK); the tree is named by the pair's smaller root or the sink. A walk stops early at
// a root whose tree another thread already wrote (a benign race: tree[x] is either SEG_NONE or
// final). Every root counts itself in its tree (tcnt, one atomicAdd per warp and tree), and
// the first to count lists the tree (hlist), so segment_alloc can give each tree its range
// while segment_exits runs.
__device__ __forceinline__ void seg_trees_body(const u32* __restrict__ target, u32* tree,
                                         const seg_done_t* __restrict__ done, u32 mode, u64* tcnt, u32* hlist,
                                         u32* hcount, const u32* __restrict__ ctl,
                                         u32 gate, const u32* __restrict__ rlist, u32 nr) {
    SEG_BLOCK_LOOP(i, nr) {
        bool in = i < nr;
        u32 v = in ? rlist[i] : 0u;
        // Each step loads the next root's flag, target and tree together (one round trip a
        // step). (The walk before loaded a root's tree, then its target, then the target's
        // target: three round trips a step; measured 10-20 us slower at 1080p.)
        u32 t = SEG_NONE;
        if (in) t = seg_walk<true>(done, tree, mode, false, v, target[v], [&](u32 y, u32) { return target[y]; });
        if (in) tree[v] = t;
        u32 lane = threadIdx.x & 31u;
        u32 peers = __match_any_sync(FULL_MASK, t);
        u32 leader = (u32)__ffs(peers) - 1u;
        u32 base = 0;
        if (in && lane == leader) base = (u32)(atomicAdd(&tcnt[t], SEG_TCNT_MEMBER * (u64)__popc(peers)) >> 32);
        base = __shfl_sync(FULL_MASK, base, leader);
        seg_append_block(hlist, hcount, in && base + (u32)__popc(peers & ((1u << lane) - 1u)) == 0, t);
    }
}

extern "C" __global__ void __launch_bounds__(256)
    segment_trees(const u32* __restrict__ target, u32* tree, const seg_done_t* __restrict__ done, u32 mode,
                  u64* tcnt, u32* hlist, u32* hcount, const u32* __restrict__ ctl, u32 gate,
                  const u32* __restrict__ rlist, const u32* __restrict__ rcount) {
    u32 nr;
    if (!seg_round_start(ctl, gate, rcount, nr)) return;
    seg_trees_body(target, tree, done, mode, tcnt, hlist, hcount, ctl, gate, rlist, nr);
}

// Steps 2 and 3 in one launch (segment_targets_trees, the launched rounds from
// MORPHOSCOPE_SEG_FUSE_FROM on, over the previous round's roots): a root takes its target as in
// segment_targets, then walks to its tree as segment_trees does, computing each root's target on
// the way from that root's least key (seg_target_of) instead of reading what another thread may
// not have written yet. Needs every root's tree unset and least key intact when it starts:
// segment_core clears both after its last use (segment_targets clears them itself), and here
// a root's target is written once, with its final value. One dependent step a round fewer.
__device__ __forceinline__ u32 seg_target_of(const u32* __restrict__ comp, const u32* __restrict__ link,
                                             const u64* best, const u64* tkey, const u32* target,
                                             const seg_done_t* done, u32 width, u32 eb, u32 mode, u32 y, u32 fy,
                                             bool own, u64& key) {
    key = best[y];
    // A kept root's least key is last round's (SEG_KEEP). Its own thread tells as seg_kept does,
    // from its last target (read before it writes the new one). A walker cannot read that word
    // (its thread may be rewriting it), but every root a walk reaches has an alive edge (to the
    // root it came from), so there "kept" is "no pixel of it posted a key": segment_least skips
    // exactly the kept components' pixels, and any other pixel with an alive edge posts one.
    if (SEG_KEEP && mode == SEG_MODE_MERGE && (fy & 1u) == 0 && (fy & SEG_KEEP_BIT)) {
        bool kept = own ? seg_kept_far(link, done, target[y]) : key == SEG_NO_EDGE;
        if (kept) key = tkey[y];
    }
    if (key == SEG_NO_EDGE) return SEG_NONE;
    return seg_far_root(comp, link, done, width, eb, key, y, false);
}

extern "C" __global__ void __launch_bounds__(256)
    segment_targets_trees(const u32* __restrict__ comp, const u32* __restrict__ link, const u64* best, u64* tkey,
                          u32* target, u32* tree, u64* exitk, seg_done_t* done, u32 width, u32 eb, u32 mode,
                          u32* ctl, u32* mctl, u32 gate, u32 r, const u32* __restrict__ in_list,
                          const u32* __restrict__ in_count, u32* out_list, u32* out_count, u64* tcnt, u32* hlist,
                          u32* hcount) {
    u32 count;
    if (!seg_round_start(ctl, gate, in_count, count)) return;
    u32 ev = 0;
    SEG_BLOCK_LOOP(i, count) {
        bool in = i < count, keep = false;
        u32 v = in ? in_list[i] : 0u;
        u32 fv = in ? (u32)done[v] : 1u;
        bool root = in && (fv & SEG_JOINED) == 0;
        u32 dv = fv & 1u, tv = SEG_NONE;
        if (root) {
            exitk[v] = SEG_NO_EDGE;
            if ((mode == SEG_MODE_MIN_SIZE && !SEG_MS_SINK) || dv == 0) {
                u64 key;
                tv = seg_target_of(comp, link, best, tkey, target, done, width, eb, mode, v, fv, true, key);
                if (tv == SEG_NONE) {
                    if (mode == SEG_MODE_MERGE) {
                        done[v] = 1;
                        ++ev;
                    }
                } else {
                    keep = true;
                    tkey[v] = key;  // a kept root's is unchanged, so walkers may read it meanwhile
                }
            }
            target[v] = tv;
        }
        // The walk (segment_trees), each step's target computed here once the root's flag and
        // tree have not ended it.
        u32 t = SEG_NONE;
        if (keep)
            t = seg_walk<false>(done, tree, mode, true, v, tv, [&](u32 y, u32 fy) {
                u64 ky;
                return seg_target_of(comp, link, best, tkey, target, done, width, eb, mode, y, fy, false, ky);
            });
        if (keep) tree[v] = t;
        u32 lane = threadIdx.x & 31u;
        u32 peers = __match_any_sync(FULL_MASK, keep ? t : SEG_NONE);
        u32 leader = (u32)__ffs(peers) - 1u;
        u32 base = 0;
        if (keep && lane == leader) base = (u32)(atomicAdd(&tcnt[t], SEG_TCNT_MEMBER * (u64)__popc(peers)) >> 32);
        base = __shfl_sync(FULL_MASK, base, leader);
        seg_append_pair(hlist, hcount, keep && base + (u32)__popc(peers & ((1u << lane) - 1u)) == 0, t, out_list,
                        out_count, keep, v);
    }
    seg_count(ctl, mctl, r, ev, 0);
}

// Step 4: exits over the frontier: from the pixel's cursor in key order, the first alive edge
// to a component of another tree; exitk[tree] = min (atomicMin).
template <u32 B>
__device__ __forceinline__ void seg_exits_body(u32* comp, const u32* __restrict__ link,
                                         const double* __restrict__ w4, const seg_done_t* __restrict__ done,
                                         const u32* __restrict__ target, const u32* __restrict__ tree,
                                         const u32* __restrict__ order, u64* exitk, u32 width, u32 eb, u32 mode,
                                         const u32* __restrict__ ctl,
                                         u32 gate, const u32* __restrict__ flist, u32 nf, bool allow_spec) {
    const bool spec = allow_spec && SEG_SPEC && nf <= SEG_SPEC_MAX;
    for (u32 i = global_tid(); i < nf; i += global_threads()) {
        u32 p = flist[i];
        u32 c = comp[p];  // current: segment_least resolved it this round
        u32 o = order[p];
        u32 start = SEG_ORD_CUR(o), cnt = SEG_ORD_CNT(o);
        u32 q[B], id[B], cq[B];
        double w0 = 0.0;
        if (spec) {
            seg_batch_load(comp, p, o, start, cnt, width, q, id, cq);
            if (start < cnt) w0 = seg_ld_weight(w4 + id[0]);
        }
        u32 id0 = spec ? id[0] : SEG_NONE;
        // Inactive roots have neither a target nor a tree (the targets step writes SEG_NONE,
        // segment_core clears trees; ids are below 2^30): testing the two words together loads
        // them together.
        u32 tc = target[c], t = tree[c];
        if ((tc | t) == SEG_NONE || SEG_SINK(mode, (u32)done[t])) continue;  // a sink's tree has no exit
        bool big = mode == SEG_MODE_MIN_SIZE && done[c] != 0;
        if (!spec) seg_batch_load(comp, p, o, start, cnt, width, q, id, cq);
        for (u32 cur = start; cur < cnt; cur += B) {
            if (cur != start) seg_batch_load(comp, p, o, cur, cnt, width, q, id, cq);
            u32 e[B], fl[B];
            seg_batch_resolve(comp, link, done, cur, cnt, q, cq, e, fl);  // link does not change here
            bool ex[B];
#pragma unroll
            for (u32 j = 0; j < B; ++j)
                ex[j] = cur + j < cnt && seg_alive(mode, c, e[j], big, fl[j]) && tree[e[j]] != t;
            u32 hit = SEG_NONE;
#pragma unroll
            for (int j = B - 1; j >= 0; --j)
                if (ex[j]) hit = id[j];
            if (hit != SEG_NONE) {
                seg_atomic_min(&exitk[t], seg_key(spec && hit == id0 && cur == start ? w0 : w4[hit], hit, eb));
                break;
            }
        }
    }
}

extern "C" __global__ void segment_exits(u32* comp, const u32* __restrict__ link,
                                         const double* __restrict__ w4, const seg_done_t* __restrict__ done,
                                         const u32* __restrict__ target, const u32* __restrict__ tree,
                                         const u32* __restrict__ order, u64* exitk, u32 width, u32 eb, u32 mode,
                                         const u32* __restrict__ ctl,
                                         u32 gate, const u32* __restrict__ flist, const u32* __restrict__ fcount) {
    u32 nf;
    if (!seg_round_start(ctl, gate, fcount, nf)) return;
    if (nf > SEG_BATCH_DENSE_MIN)
        seg_exits_body<SEG_BATCH_DENSE>(comp, link, w4, done, target, tree, order, exitk, width, eb, mode, ctl, gate, flist,
                                        nf, true);
    else
        seg_exits_body<SEG_BATCH_TAIL>(comp, link, w4, done, target, tree, order, exitk, width, eb, mode, ctl, gate, flist,
                                       nf, true);
}

// Member c joins the tree's component a in round r (its link and its hierarchy entry).
__device__ __forceinline__ void seg_join(u32* link, seg_done_t* done, u16* round, u32 c, u32 a, u32 r) {
    link[c] = a;
    done[c] = SEG_JOINED;
    round[c] = (u16)r;
}

// Step 5: the core: an active root whose least edge is below its tree's exit takes a slot in
// its tree and writes itself there, into the tree's range that segment_alloc gave it (its
// members before the exit are at most its member count); *xcount counts the round's core
// members. The lanes of a warp that belong to one tree (the active roots are listed in pixel
// order, so a warp's roots are mostly of one tree) take their slots and count themselves off
// the tree with one atomicAdd (tcnt); the group that counts the last members off knows the
// core's size from it and lists the tree for its caterpillar kernel: tiny (at most 8: a thread
// each), small (at most 32: a warp each), mid-size (at most SEG_CAT_MID_CAP: a block of
// SEG_CAT_MID_THREADS each) or large (a block of SEG_CAT_THREADS each).
//
// Weight-0 members (merge rounds, zlim = 1 << eb: a key below it is an edge of weight 0; 0
// where a weight-0 step could fail, i.e. f32(k / n) rounds to 0, and in min_size rounds): a
// member other than the tree's id whose least edge has weight 0 joins the tree's id here, and
// its size is added to the id's, instead of taking a slot. Every such step passes whatever the
// order (0 < f32(Int + k/|C|) for any Int >= 0 and |C| <= n), they all come first in key order
// (the pair's key, the tree's least, is then of weight 0 too, and the id stays first), and
// Int(R) after them is 0, the id's own Int (its least edge is of weight 0, so it merged only
// along such edges): the caterpillar of the members left walks the same steps with the same
// |R| and Int. The tree's id counts as a member; a tree of it alone is not listed. Flat
// regions (video, upscaled frames) made trees of thousands of members whose keys crowd one
// weight, which the large trees' kernel radix-sorted (see SEG_CROWD_SHARED).
__device__ __forceinline__ void seg_core_body(const u32* __restrict__ target, u32* tree, u64* best, const u64* __restrict__ tkey,
                 const u64* __restrict__ exitk, seg_done_t* done, u32 mode, u64* tcnt,
                 const u32* __restrict__ joff, u32* jarr, u32* xcount, u32* tlist, u32* tcount, u32* slist,
                 u32* scount, u32* mlist, u32* mcount, u32* blist, u32* bcount, u32* ctl, u32* mctl,
                 u32 gate, const u32* __restrict__ rlist, u32 nr, u32* link, u32* size, u16* round, u32 r, u64 zlim) {
    u32 ev = 0;
    SEG_BLOCK_LOOP(i, nr) {
        bool in = i < nr;
        u32 v = in ? rlist[i] : 0u;
        u32 t = in ? tree[v] : 0u;
        // The next round's targets (segment_targets_trees, whose walks read other roots' trees
        // and keys, or segment_targets) need every root's tree unset and its least key cleared
        // before they start: nothing reads them after this step.
        if (in) {
            tree[v] = SEG_NONE;
            best[v] = SEG_NO_EDGE;
        }
        bool listed = in && target[v] != SEG_NONE;
        const u64 key = listed ? tkey[v] : SEG_NO_EDGE;
        bool core = listed && key < exitk[t];
        // A weight-0 member joins the tree's id at once (see above).
        const bool zero = core && key < zlim && v != t;
        bool join = core && !zero;
        if (zero) {
            seg_join(link, done, round, v, t, r);
            atomicAdd(&size[t], size[v]);
            ++ev;
        }
        // An active merge-round root (flag 0 or SEG_KEEP_BIT) outside the core keeps its least
        // edge for the next round (SEG_KEEP).
        else if (SEG_KEEP && listed && mode == SEG_MODE_MERGE) done[v] = join ? 0u : SEG_KEEP_BIT;
        u32 lane = threadIdx.x & 31u;
        u32 group = __match_any_sync(FULL_MASK, listed ? t : SEG_NONE);
        u32 joined = __ballot_sync(FULL_MASK, join) & group;
        u32 leader = (u32)__ffs(group) - 1u;
        u64 before = 0;
        if (listed && lane == leader) {
            u64 add = (u64)__popc(joined) - SEG_TCNT_MEMBER * (u64)__popc(group);
            before = atomicAdd(&tcnt[t], add);
        }
        before = __shfl_sync(FULL_MASK, before, leader);
        if (join) jarr[joff[t] + (u32)before + (u32)__popc(joined & ((1u << lane) - 1u))] = v;
        bool last = listed && lane == leader && (u32)(before >> 32) == (u32)__popc(group);
        u32 c = (u32)before + (u32)__popc(joined);
        // The tree's id alone (the rest joined it above): nothing to walk.
        if (last && c <= 1u) tcnt[t] = 0;
        // A sink's tree larger than that goes to the mid-size kernel too, which merges it
        // without a sort (seg_cat_blocks).
        u32 cls = !last || c <= 1u ? 4u
                  : c <= 8u ? 0u
                  : c <= 32u ? 1u
                  : c <= SEG_CAT_MID_CAP || (SEG_MID_SINKS && SEG_SINK(mode, (u32)done[t])) ? 2u
                                                                                          : 3u;
        seg_append_by_class(tlist, tcount, slist, scount, mlist, mcount, blist, bcount, xcount, join, cls, t);
    }
    seg_count(ctl, mctl, r, ev, ev);
}

extern "C" __global__ void __launch_bounds__(256)
    segment_core(const u32* __restrict__ target, u32* tree, u64* best, const u64* __restrict__ tkey,
                 const u64* __restrict__ exitk, seg_done_t* done, u32 mode, u64* tcnt,
                 const u32* __restrict__ joff, u32* jarr, u32* xcount, u32* tlist, u32* tcount, u32* slist,
                 u32* scount, u32* mlist, u32* mcount, u32* blist, u32* bcount, u32* ctl, u32* mctl,
                 u32 gate, const u32* __restrict__ rlist, const u32* __restrict__ rcount, u32* link, u32* size,
                 u16* round, u32 r, u64 zlim) {
    u32 nr;
    if (!seg_round_start(ctl, gate, rcount, nr)) return;
    seg_core_body(target, tree, best, tkey, exitk, done, mode, tcnt, joff, jarr, xcount, tlist, tcount, slist, scount,
                  mlist, mcount, blist, bcount, ctl, mctl, gate, rlist, nr, link, size, round, r, zlim);
}

// Step 4b (beside segment_exits, which it does not touch): every tree takes a contiguous range of
// jarr (joff) for all its members (segment_trees counted them in tcnt; segment_core fills the
// range's first slots with the core and lists the tree by the core's size). Before, a pass after
// segment_core counted the core and gave the ranges, and a scatter pass filled them: two more
// dependent launches a round.
__device__ __forceinline__ void seg_alloc_body(u64* tcnt, u32* joff, u32* cursor,
                                         const seg_done_t* __restrict__ done, u32 mode, u32* jarr,
                                         u64* tkey, const u32* __restrict__ ctl, u32 gate,
                                         const u32* __restrict__ hlist, u32 nh) {
    __shared__ u32 s_base;
    SEG_BLOCK_LOOP(i, nh) {
        bool in = i < nh;
        u32 t = in ? hlist[i] : 0u;
        u32 c = in ? (u32)(tcnt[t] >> 32) : 0u;
        // A sink's tree takes one more slot, the first, for the sink itself (key 0: it leads
        // the caterpillar); its core members count on from 1.
        bool sink = in && SEG_SINK(mode, (u32)done[t]);
        c += sink ? 1u : 0u;
        u32 total;
        u32 off = seg_block_scan(c, &total);
        if (threadIdx.x == 0) s_base = total ? atomicAdd(cursor, total) : 0u;
        __syncthreads();
        if (in) joff[t] = s_base + off;
        if (sink) {
            jarr[s_base + off] = t;
            tkey[t] = 0;
            tcnt[t] = SEG_TCNT_MEMBER * (u64)(c - 1u) + 1u;
        }
    }
}

extern "C" __global__ void segment_alloc(u64* tcnt, u32* joff, u32* cursor,
                                         const seg_done_t* __restrict__ done, u32 mode, u32* jarr,
                                         u64* tkey, const u32* __restrict__ ctl, u32 gate,
                                         const u32* __restrict__ hlist, const u32* __restrict__ hcount) {
    u32 nh;
    if (!seg_round_start(ctl, gate, hcount, nh)) return;
    seg_alloc_body(tcnt, joff, cursor, done, mode, jarr, tkey, ctl, gate, hlist, nh);
}

// The predicate of a caterpillar step: member c (size sc, Int ic) joins the tree's component
// R (size sr, Int ir) along an edge of weight w. Merge rounds: w below both thresholds
// (scikit-image's f32(Int + k/|C|)); min_size rounds: either side smaller than min_size.
__device__ __forceinline__ void seg_step(u32 mode, double w, u32 sc, double ic, u32 sr, double ir, double k,
                                         u32 min_size, bool& ok_c, bool& ok_r) {
    if (mode == SEG_MODE_MERGE) {
        ok_c = w < (double)seg_thr(ic, k, sc);
        ok_r = w < (double)seg_thr(ir, k, sr);
    } else {
        bool ok = sr < min_size || sc < min_size;
        ok_c = ok;
        ok_r = ok;
    }
}

// A failing caterpillar step in merge rounds: the side(s) whose own threshold failed freeze.
// Returns the events (frozen components).
__device__ __forceinline__ u32 seg_freeze(seg_done_t* done, u32 mode, u32 c, u32 a, bool ok_c, bool ok_r) {
    if (mode != SEG_MODE_MERGE) return 0;
    u32 ev = 0;
    if (!ok_c) {
        done[c] = 1;
        ++ev;
    }
    if (!ok_r) {
        done[a] = 1;
        ++ev;
    }
    return ev;
}

// Round 1 of the merge phase in tiles (one block of SEG_TILE_W x SEG_TILE_H threads a tile, a
// pixel each, everything in shared memory): the global round 1 (every pixel its own component)
// for the trees that lie inside one tile, in one kernel instead of ten. A pixel's least edge is
// the first of its order word (segment_edges); targets, trees (follow targets to the mutual
// pair, named by its smaller pixel), exits (the first edge in key order leaving the tree), the
// core (members below the exit) and the caterpillar (the core in (key, id) order: step j merges
// a singleton into a component of j pixels whose Int is the previous step's weight, up to the
// first failing step) as in the kernels below, decided from shared memory. A tree is left to
// round 2 (its pixels stay singletons) when a member's target is outside the tile, a pixel of
// the halo ring targets a member, or it has more than SEG_TILE_TREE members (the rank of a core
// member is counted over its tree's list). Exact: the rounds' invariant (every component is
// Kruskal's just before its least alive edge) holds whichever trees a round decides; the CPU
// model (boruvka.rs, round 1 with tiles) leaves the same trees.
#ifndef SEG_TILE_W
#define SEG_TILE_W 32
#endif
#ifndef SEG_TILE_H
#define SEG_TILE_H 16
#endif
#ifndef SEG_TILE_TREE
#define SEG_TILE_TREE 32
#endif
#define SEG_TILE_PX (SEG_TILE_W * SEG_TILE_H)
#define SEG_TILE_OUT 0xffffu

// Local index of pixel q in the tw x th tile at (x0, y0), or SEG_TILE_OUT (the unsigned
// differences wrap when q is left of or above the tile).
__device__ __forceinline__ u32 seg_tile_local(u32 q, u32 width, u32 x0, u32 y0, u32 tw, u32 th) {
    u32 qx = q % width - x0, qy = q / width - y0;
    return (qx < tw && qy < th) ? qy * SEG_TILE_W + qx : SEG_TILE_OUT;
}

extern "C" __global__ void __launch_bounds__(SEG_TILE_PX, 3)
    segment_tiles(u32* comp, u32* link, u32* size, double* cint, seg_done_t* done, u16* round,
                  const double* __restrict__ w4, u32* order, u32 width, u32 height, u32 eb,
                  double k, u32* ctl, u32* mctl, u32* frontier_count, u64* best, u32* target, u32* tree,
                  u64* tcnt, u32 init, u32* root_list, u32* root_count, u32 roots) {
    __shared__ u64 skey[SEG_TILE_PX];      // the pixel's least key
    __shared__ double swt[SEG_TILE_PX];    // its weight
    __shared__ u64 sexit[SEG_TILE_PX];     // per tree (at its id): least key leaving it
    __shared__ double slast[SEG_TILE_PX];  // per tree: weight of the last merging step
    __shared__ u32 scnt[SEG_TILE_PX];      // per tree: members
    __shared__ u32 score[SEG_TILE_PX];     // per tree: core members
    __shared__ u32 sfail[SEG_TILE_PX];     // per tree: first failing step
    __shared__ u16 soff[SEG_TILE_PX];      // per tree: start of its member list
    __shared__ u16 slist[SEG_TILE_PX];     // members, grouped by tree
    __shared__ u16 stgt[SEG_TILE_PX];      // target (local index; SEG_TILE_OUT: outside the tile)
    __shared__ u16 stree[SEG_TILE_PX];     // tree (local id; SEG_TILE_OUT: none, or not known here)
    __shared__ u8 shalo[SEG_TILE_PX];      // a pixel of the halo ring targets this pixel
    __shared__ u8 sbad[SEG_TILE_PX];       // per tree: left to round 2
    const u32 l = threadIdx.x, lx = l % SEG_TILE_W, ly = l / SEG_TILE_W;
    const u32 tiles_x = (width + SEG_TILE_W - 1) / SEG_TILE_W;
    const u32 tiles = tiles_x * ((height + SEG_TILE_H - 1) / SEG_TILE_H);
    if (blockIdx.x == 0 && l == 0) *frontier_count = width * height;  // round 2 scans every pixel
    const float thr1 = seg_thr(0.0, k, 1u);                             // a singleton's threshold
    u32 ev = 0, mg = 0;
    for (u32 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const u32 x0 = (tile % tiles_x) * SEG_TILE_W, y0 = (tile / tiles_x) * SEG_TILE_H;
        const u32 tw = min(SEG_TILE_W, width - x0), th = min(SEG_TILE_H, height - y0);
        const bool in = lx < tw && ly < th;
        const u32 p = (y0 + ly) * width + x0 + lx;
        __syncthreads();  // the previous tile is done with the shared arrays
        stgt[l] = SEG_TILE_OUT;
        stree[l] = SEG_TILE_OUT;
        sexit[l] = SEG_NO_EDGE;
        scnt[l] = 0;
        score[l] = 0;
        sfail[l] = SEG_NONE;
        shalo[l] = 0;
        sbad[l] = 0;
        __syncthreads();
        u32 o = 0, cnt = 0;
        double w = 0.0;
        if (in) {
            o = order[p];
            if (init) {
                // segment_init's per-pixel words, written here (`init`: its launch skipped them),
                // one coalesced pass fewer; the writes below by any thread of the block follow
                // them (the barriers order a block's global writes).
                seg_init_pixel(comp, link, size, cint, done, best, target, tree, tcnt, round, p);
                if (SEG_ORD_CUR(o) != 0) order[p] = o & ~(15u << 24);
            }
            cnt = SEG_ORD_CNT(o);
            if (cnt > 0) {
                u32 q, id;
                seg_dir(p, SEG_ORD_DIR(o, 0), width, q, id);
                w = w4[id];
                skey[l] = seg_key(w, id, eb);
                swt[l] = w;
                stgt[l] = (u16)seg_tile_local(q, width, x0, y0, tw, th);
            } else {
                done[p] = 1;  // no edges at all (a 1x1 image): done
                ++ev;
            }
        }
        // The halo ring: a pixel just outside whose least edge points in belongs to that tree.
        const u32 nh = 2 * (tw + 2) + 2 * th;
        for (u32 h = l; h < nh; h += blockDim.x) {
            int hx, hy;
            if (h < 2 * (tw + 2)) {
                hx = (int)x0 - 1 + (int)(h % (tw + 2));
                hy = h < tw + 2 ? (int)y0 - 1 : (int)(y0 + th);
            } else {
                u32 s2 = h - 2 * (tw + 2);
                hx = s2 < th ? (int)x0 - 1 : (int)(x0 + tw);
                hy = (int)y0 + (int)(s2 % th);
            }
            if (hx < 0 || hy < 0 || hx >= (int)width || hy >= (int)height) continue;
            u32 hp = (u32)hy * width + (u32)hx, ho = order[hp];
            if (SEG_ORD_CNT(ho) == 0) continue;
            u32 q, id;
            seg_dir(hp, SEG_ORD_DIR(ho, 0), width, q, id);
            u32 lq = seg_tile_local(q, width, x0, y0, tw, th);
            if (lq != SEG_TILE_OUT) shalo[lq] = 1;
        }
        __syncthreads();
        // Trees: follow targets to the mutual pair (keys fall strictly along them).
        u32 t = SEG_TILE_OUT, slot = 0;
        if (in && cnt > 0) {
            u32 x = l;
            while (true) {
                u32 y = stgt[x];
                if (y == SEG_TILE_OUT) break;
                if (stgt[y] == x) {
                    t = x < y ? x : y;
                    break;
                }
                x = y;
            }
        }
        if (t != SEG_TILE_OUT) {
            stree[l] = (u16)t;
            slot = atomicAdd(&scnt[t], 1u);
            if (shalo[l]) sbad[t] = 1;
        }
        __syncthreads();
        if (t != SEG_TILE_OUT && scnt[t] > SEG_TILE_TREE) sbad[t] = 1;
        __syncthreads();
        const bool good = t != SEG_TILE_OUT && !sbad[t];
        // Exit: the first edge after the least (which is the target's, inside the tree) whose far
        // pixel is in another tree (outside the tile is always another tree here).
        if (good) {
            for (u32 i = 1; i < cnt; ++i) {
                u32 q, id;
                seg_dir(p, SEG_ORD_DIR(o, i), width, q, id);
                u32 lq = seg_tile_local(q, width, x0, y0, tw, th);
                if (lq == SEG_TILE_OUT || stree[lq] != t) {
                    atomicMin(&sexit[t], seg_key(w4[id], id, eb));
                    break;
                }
            }
        }
        __syncthreads();
        // Member lists: a block scan of the good trees' counts (at their ids).
        u32 total;
        u32 off = seg_block_scan(good && t == l ? scnt[l] : 0u, &total);
        if (good && t == l) soff[l] = (u16)off;
        __syncthreads();
        if (good) slist[soff[t] + slot] = (u16)l;
        __syncthreads();
        // The caterpillar: a core member's step j is its rank by (key, id) among the core; the
        // component it joins has j pixels and the previous step's weight as Int (0 at step 1).
        const bool core = good && skey[l] < sexit[t];
        u32 j = 0;
        bool okc = true, okr = true;
        if (core) {
            u64 mykey = skey[l], ex = sexit[t], pk = 0;
            u32 pm = 0, n_t = scnt[t], base = soff[t];
            double pw = 0.0;
            for (u32 i = 0; i < n_t; ++i) {
                u32 m = slist[base + i];
                u64 km = skey[m];
                if (m == l || km >= ex) continue;
                if (km < mykey || (km == mykey && m < l)) {
                    ++j;
                    if (j == 1 || km > pk || (km == pk && m > pm)) {
                        pk = km;
                        pm = m;
                        pw = swt[m];
                    }
                }
            }
            if (j >= 1) {
                okc = w < (double)thr1;
                okr = w < (double)seg_thr(j == 1 ? 0.0 : pw, k, j);
                if (!(okc && okr)) atomicMin(&sfail[t], j);
            }
            atomicAdd(&score[t], 1u);
        }
        __syncthreads();
        bool joined = false;
        if (core && j >= 1) {
            u32 ff = sfail[t], mcount = min(ff, score[t]);
            u32 root = (y0 + t / SEG_TILE_W) * width + x0 + t % SEG_TILE_W;
            joined = j < ff;
            if (joined) {
                seg_join(link, done, round, p, root, 1);
                comp[p] = root;
                ++mg;
                ++ev;
            } else if (j == ff) {
                ev += seg_freeze(done, SEG_MODE_MERGE, p, root, okc, okr);
            }
            if (j + 1 == mcount) slast[t] = w;
        }
        __syncthreads();
        if (core && j == 0) {
            u32 mcount = min(sfail[t], score[t]);
            if (mcount > 1) {
                size[p] = mcount;
                cint[p] = slast[t];
            }
        }
        // The roots round 1 leaves, for round 2's segment_targets (`roots`; else it scans every
        // pixel for them).
        if (roots) seg_append_block(root_list, root_count, in && !joined, p);
    }
    seg_count(ctl, mctl, 1, ev, mg);
}

// Step 6, trees of at most 8 members (most of them in the first rounds, where a tree averages
// ~3 members; tlist): by groups of 8 lanes (seg_cat_tiny_body), or with SEG_TINY_LANES 0 a
// thread per tree (seg_cat_thread_body: the members sorted by (key, id) with the
// 19-comparator network in registers and the caterpillar walked in order).
// The parameters of the four caterpillar kernels (the host launches them alike): the tree list
// and its count, the sort scratch (used by segment_cat_block only), n, and the round's count of
// giant trees (more than SEG_CAT_GIANT core members: segment_cat_block and segment_cat_giant
// count those they walk, so the host launches segment_cat_giant in the rounds that had some).
#define SEG_CAT_ARGS                                                                                  \
    u32 *link, seg_done_t *done, u32 *size, double *cint, const u64 *__restrict__ tkey, u64 *tcnt,                   \
        const u32 *__restrict__ joff, const u32 *__restrict__ jarr, u16 *round,                \
        const double *__restrict__ w4, u32 eb, u32 mode, u32 min_size, double k, u32 *ctl, u32 *mctl, u32 gate, \
        u32 r, const u32 *__restrict__ list, const u32 *__restrict__ lcount, u64 *scr_k, u32 *scr_i, u32 n,  \
        u32 *gcnt
#define SEG_CAT_PASS                                                                                    \
    link, done, size, cint, tkey, tcnt, joff, jarr, round, w4, eb, mode, min_size, k, ctl, mctl, gate, r, \
        list, lcount, scr_k, scr_i, n, gcnt

__device__ __forceinline__ void seg_cat_thread_body(SEG_CAT_ARGS, u32 nt) {
    u32 ev = 0, mg = 0;
    for (u32 i = global_tid(); i < nt; i += global_threads()) {
        u32 t = list[i];
        u32 cnt = (u32)tcnt[t], off = joff[t];
        u64 kk[8];
        u32 id[8];
#pragma unroll
        for (u32 j = 0; j < 8; ++j) {
            kk[j] = SEG_NO_EDGE;
            id[j] = SEG_NONE;
            if (j < cnt) {
                id[j] = jarr[off + j];
                kk[j] = tkey[id[j]];
            }
        }
        seg_sort8(kk, id);
        // Every member's words at once (the steps below only depend on them, not on each
        // other's loads).
        u32 sz[8];
        double ci[8], wt[8];
#pragma unroll
        for (u32 j = 0; j < 8; ++j) {
            sz[j] = 0;
            ci[j] = 0.0;
            wt[j] = 0.0;
            if (j < cnt) {
                sz[j] = size[id[j]];
                ci[j] = cint[id[j]];
                if (j > 0) wt[j] = w4[seg_eid(kk[j], eb)];
            }
        }
        u32 a = id[0];
        u32 sr = sz[0];
        double ir = ci[0];
        bool merged = false;
#pragma unroll
        for (u32 j = 1; j < 8; ++j) {
            if (j < cnt) {
                u32 c = id[j];
                double w = wt[j];
                u32 sc = sz[j];
                bool ok_c, ok_r;
                seg_step(mode, w, sc, ci[j], sr, ir, k, min_size, ok_c, ok_r);
                if (!(ok_c && ok_r)) {
                    ev += seg_freeze(done, mode, c, a, ok_c, ok_r);
                    cnt = j;  // stop here
                } else {
                    seg_join(link, done, round, c, a, r);
                    sr += sc;
                    ir = w;
                    merged = true;
                    ++ev;
                    ++mg;
                }
            }
        }
        size[a] = sr;
        if (mode == SEG_MODE_MIN_SIZE) done[a] = sr >= min_size;
        if (mode == SEG_MODE_MERGE && merged) cint[a] = ir;
        tcnt[t] = 0;
    }
    seg_count(ctl, mctl, r, ev, mg);
}

// Step 6 by groups of W lanes, a tree a group: trees of at most 32 members (slist, W = 32, a
// warp per tree) and, with SEG_TINY_LANES, the trees of at most 8 (tlist, W = 8, four trees a
// warp). Lane i of a group holds member i after a bitonic sort by (key, id) across the group's
// lanes; lane 0 is the pair's smaller root (the tree id, which the others join). A group scan
// gives each step's |R|, the previous lane's weight its Int; the first failing step (ballot)
// ends the merges; a failing side freezes (merge rounds). The groups of a warp stride together
// (every lane reaches every shuffle); a group past the list's end holds no members.
template <u32 W>
__device__ __forceinline__ void seg_cat_lanes_body(SEG_CAT_ARGS, u32 ns) {
    const u32 lane = threadIdx.x & 31u, gl = lane & (W - 1u);
    const u32 per = 32u / W;
    const u32 warp = global_tid() >> 5, nwarps = global_threads() >> 5;
    u32 ev = 0, mg = 0;
    for (u32 base = warp * per; base < ns; base += nwarps * per) {
        const u32 i = base + lane / W;
        u32 t = 0, cnt = 0, off = 0;
        if (i < ns) {
            t = list[i];
            cnt = (u32)tcnt[t];
            off = joff[t];
        }
        bool valid = gl < cnt;
        u64 key = SEG_NO_EDGE;
        u32 id = SEG_NONE;
        if (valid) {
            id = jarr[off + gl];
            key = tkey[id];
        }
#pragma unroll
        for (u32 kk = 2; kk <= W; kk <<= 1) {
#pragma unroll
            for (u32 j = kk >> 1; j > 0; j >>= 1) {
                u64 ok = __shfl_xor_sync(FULL_MASK, key, j);
                u32 oi = __shfl_xor_sync(FULL_MASK, id, j);
                bool lower = ((gl & kk) == 0) == ((gl & j) == 0);
                if (lower ? seg_less(ok, oi, key, id) : seg_less(key, id, ok, oi)) {
                    key = ok;
                    id = oi;
                }
            }
        }
        u32 a = __shfl_sync(FULL_MASK, id, 0, W);
        double w = valid ? w4[seg_eid(key, eb)] : 0.0;
        u32 sz = valid ? size[id] : 0u;
        double ci = valid ? cint[id] : 0.0;
        u32 incl = sz;
#pragma unroll
        for (u32 o = 1; o < W; o <<= 1) {
            const u32 y = __shfl_up_sync(FULL_MASK, incl, o, W);
            if (gl >= o) incl += y;
        }
        u32 sr = incl - sz;
        double wprev = __shfl_up_sync(FULL_MASK, w, 1, W);
        double c0 = __shfl_sync(FULL_MASK, ci, 0, W);
        double ir = gl == 1 ? c0 : wprev;
        bool ok_c = true, ok_r = true;
        if (valid && gl >= 1) seg_step(mode, w, sz, ci, sr, ir, k, min_size, ok_c, ok_r);
        u32 fail = __ballot_sync(FULL_MASK, !(ok_c && ok_r));
        if (W < 32) fail = (fail >> (lane - gl)) & ((1u << (W & 31u)) - 1u);
        u32 f = fail ? (u32)(__ffs(fail) - 1) : cnt;
        u32 total = __shfl_sync(FULL_MASK, incl, (f - 1u) & (W - 1u), W);
        double wlast = __shfl_sync(FULL_MASK, w, (f - 1u) & (W - 1u), W);
        if (gl >= 1 && gl < f) {
            seg_join(link, done, round, id, a, r);
            ++ev;
            ++mg;
        }
        if (valid && gl == f) ev += seg_freeze(done, mode, id, a, ok_c, ok_r);
        if (gl == 0 && cnt > 0) {
            size[a] = total;
            if (mode == SEG_MODE_MIN_SIZE) done[a] = total >= min_size;
            if (mode == SEG_MODE_MERGE && f > 1) cint[a] = wlast;
            tcnt[t] = 0;
        }
    }
    seg_count(ctl, mctl, r, ev, mg);
}

__device__ __forceinline__ void seg_cat_warp_body(SEG_CAT_ARGS, u32 ns) { seg_cat_lanes_body<32>(SEG_CAT_PASS, ns); }

// The trees of at most 8 members by groups of 8 lanes (seg_cat_lanes_body) instead of a thread
// each (SEG_TINY_LANES 0): a thread per tree holds 8 keys, ids, sizes, Ints and weights (86
// registers, a quarter of an SM's threads) and walks its loads member by member.
#ifndef SEG_TINY_LANES
#define SEG_TINY_LANES 1
#endif
__device__ __forceinline__ void seg_cat_tiny_body(SEG_CAT_ARGS, u32 nt) {
    if (SEG_TINY_LANES) seg_cat_lanes_body<8>(SEG_CAT_PASS, nt);
    else seg_cat_thread_body(SEG_CAT_PASS, nt);
}

#ifndef SEG_TINY_BLOCKS
#define SEG_TINY_BLOCKS 6
#endif
extern "C" __global__ void __launch_bounds__(256, SEG_TINY_BLOCKS) segment_cat_thread(SEG_CAT_ARGS) {
    u32 nt;
    if (!seg_round_start(ctl, gate, lcount, nt)) return;
    seg_cat_tiny_body(SEG_CAT_PASS, nt);
}

extern "C" __global__ void segment_cat_warp(SEG_CAT_ARGS) {
    u32 ns;
    if (!seg_round_start(ctl, gate, lcount, ns)) return;
    seg_cat_warp_body(SEG_CAT_PASS, ns);
}

// Trees above this many members are sorted whole (seg_sort_tree) instead of chunk by chunk:
// the chunks' selects cost O(members^2 / SEG_CAT_CAP), the sort O(members) (H100, 2026-11-25:
// whole sorts of every tree above SEG_CAT_CAP took the clip frame at k = 500 from 8.3 to 6.4 ms
// but photographs' 2 000-6 000-member trees, which mostly stop in their first chunk, from
// 0.62 to 0.73 ms of segment_cat_block).
#ifndef SEG_CAT_SORT
#define SEG_CAT_SORT 8192
#endif
// Trees above this many core members go to segment_cat_giant (a cooperative grid) where it is
// launched (segment_cat_block_g leaves them to it).
#ifndef SEG_CAT_GIANT
#define SEG_CAT_GIANT 8192
#endif

// Members m0 + u * blockDim.x (u < 4) of a tree's range: ids, then keys (SEG_NO_EDGE past
// cnt). The four loads of each kind are independent, so a pass over a large tree keeps four
// member -> key chains in flight a thread instead of one.
__device__ __forceinline__ void seg_members4(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off,
                                             u32 cnt, u32 m0, u32 (&id)[4], u64 (&key)[4]) {
#pragma unroll
    for (u32 u = 0; u < 4; ++u) {
        u32 m = m0 + u * blockDim.x;
        id[u] = m < cnt ? jarr[off + m] : SEG_NONE;
    }
#pragma unroll
    for (u32 u = 0; u < 4; ++u) key[u] = id[u] != SEG_NONE ? tkey[id[u]] : SEG_NO_EDGE;
}

// f(m, id, key) for each member m < cnt of a tree's range that falls to this thread, four
// member -> key chains in flight at a time (seg_members4).
template <class F>
__device__ __forceinline__ void seg_each_member(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off,
                                                u32 cnt, F f) {
    for (u32 m0 = threadIdx.x; m0 < cnt; m0 += 4 * blockDim.x) {
        u32 id[4];
        u64 kk[4];
        seg_members4(tkey, jarr, off, cnt, m0, id, kk);
#pragma unroll
        for (u32 u = 0; u < 4; ++u)
            if (id[u] != SEG_NONE) f(m0 + u * blockDim.x, id[u], kk[u]);
    }
}

// Every member's key and id into sk / si (at its position m in the tree's range) and this
// thread's least and greatest key into mn / mx (seg_block_minmax reduces them over the block).
__device__ __forceinline__ void seg_stage_members(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off,
                                                  u32 cnt, u64* sk, u32* si, u64& mn, u64& mx) {
    mn = SEG_NO_EDGE;
    mx = 0;
    seg_each_member(tkey, jarr, off, cnt, [&](u32 m, u32 id, u64 k) {
        sk[m] = k;
        si[m] = id;
        mn = k < mn ? k : mn;
        mx = k > mx ? k : mx;
    });
}

// Of the members (jarr[off .. off + cnt)) with key > lo (every member when `all`), the key of
// rank `need` (1-based) in key order: an MSB-first radix select, one 8-bit digit a pass, counted
// in a shared histogram (keys are distinct except the pair's, which are the least of a tree).
__device__ u64 seg_select(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt, u64 lo,
                          bool all, u32 need, u32* hist, u64* sprefix, u32* sneed) {
    u64 prefix = 0, mask = 0;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (u32 j = threadIdx.x; j < 256; j += blockDim.x) hist[j] = 0;
        __syncthreads();
        seg_each_member(tkey, jarr, off, cnt, [&](u32, u32, u64 k) {
            if ((all || k > lo) && (k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255u], 1u);
        });
        __syncthreads();
        // The digit whose cumulative count reaches `need` (the last digit when none does): warp
        // 0 scans the 256 counts, 8 a lane.
        if (threadIdx.x < 32) {
            u32 lane = threadIdx.x, c[8], sum = 0;
#pragma unroll
            for (u32 b = 0; b < 8; ++b) {
                c[b] = hist[lane * 8 + b];
                sum += c[b];
            }
            u32 incl = warp_inclusive_scan(sum);
            u32 cum = incl - sum;
            if (cum < need && need <= incl) {
                u32 d = lane * 8;
                for (u32 b = 0; b < 7 && cum + c[b] < need; ++b) {
                    cum += c[b];
                    ++d;
                }
                *sprefix = prefix | ((u64)d << shift);
                *sneed = need - cum;
            } else if (lane == 31 && incl < need) {
                *sprefix = prefix | (255ull << shift);
                *sneed = need - (incl - c[7]);
            }
        }
        __syncthreads();
        prefix = *sprefix;
        need = *sneed;
        mask |= 0xffull << shift;
        __syncthreads();
    }
    return prefix;
}

// One stable LSD radix pass (8-bit digit at `shift`) of cnt (key, id) pairs from (sk, si) to
// (dk, di) by one block. Warp w owns the contiguous range [w * per, (w + 1) * per) of the input;
// its digit counts go to wcnt (256 x warps words, 8192 at 1024 threads) at SEG_WC(digit, w),
// whose exclusive scan in (digit, warp) order is where each warp's pairs of each digit start, so
// equal digits keep their order. Then each warp walks its range again, 32 pairs a step, ranks a
// pair among its step's pairs of the same digit (seg_peers) and bumps its own count: three
// block barriers a pass, four loads a lane in flight. GPU notes (H100, 2026-11-25; a tree's sort
// timed by %globaltimer printf in a throwaway build): the previous pass ranked tiles of blockDim
// pairs with four barriers and a 32-step serial scan each; the clip frame's 14 712-member tree
// (7 passes) sorted in 327 us with this one under __match_any_sync, 269 us with ballots (about
// 35 us a pass, so the whole op 6.27 -> 5.98 ms at k = 100, 6.41 -> 5.88 at k = 500). What is
// left is one SM's throughput: two scattered 8- and 4-byte stores a pair a pass; staging in
// shared memory or a cluster of blocks per tree would be next.
// Counts of (digit, warp): a row of `warps` words per digit, the warp index XOR-swizzled by the
// digit so one warp's counters of different digits fall in different banks.
#define SEG_WC(d, w, nw) ((d) * (nw) + ((w) ^ ((d) & ((nw) - 1u))))

// The right shift that maps keys base .. base + span into 2^nlog equal parts ((k - base) >> shift).
__device__ __forceinline__ u32 seg_part_shift(u64 span, u32 nlog) {
    const u32 bits = span == 0 ? 0u : 64u - (u32)__clzll((long long)span);
    return bits > nlog ? bits - nlog : 0u;
}

// The block's least of every thread's mn and greatest of its mx, into every thread's mn and mx
// (red: 64 words of shared memory; blockDim.x a multiple of 32, at most 1024). The threads read
// red after one barrier; a caller syncs again before it writes red.
__device__ __forceinline__ void seg_block_minmax(u64& mn, u64& mx, u64* red) {
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
    for (u32 o = 16; o > 0; o >>= 1) {
        u64 a = __shfl_xor_sync(FULL_MASK, mn, o), b = __shfl_xor_sync(FULL_MASK, mx, o);
        mn = a < mn ? a : mn;
        mx = b > mx ? b : mx;
    }
    if (lane == 0) {
        red[warp] = mn;
        red[32 + warp] = mx;
    }
    __syncthreads();
    // Every warp reduces the warps' partials itself (no second barrier). GPU notes (H100,
    // 2026-11-26, SEG_CAT_TRACE): a serial loop over the 32 partials a thread took ~3 us of a
    // large tree's sort.
    const u32 nw = blockDim.x >> 5;
    mn = lane < nw ? red[lane] : SEG_NO_EDGE;
    mx = lane < nw ? red[32 + lane] : 0;
#pragma unroll
    for (u32 o = 16; o > 0; o >>= 1) {
        u64 a = __shfl_xor_sync(FULL_MASK, mn, o), b = __shfl_xor_sync(FULL_MASK, mx, o);
        mn = a < mn ? a : mn;
        mx = b > mx ? b : mx;
    }
}

// Of the members with key > lo (every member when `all`), a key thr such that between 1 and cap
// of them are at most thr: a prefix of the caterpillar in key order (not always the longest,
// which seg_select finds). One pass takes the keys' range, one counts them in 2048 equal parts of
// it (`bins`: 2048 words of shared memory; blockDim.x a power of two, 256 to 1024), and thr ends
// the last part whose cumulative count is at most cap; when the first part alone holds more,
// the range narrows to it and the count repeats (rare: one part holds ~1/2048 of the keys'
// span). Three passes over the tree with the gathering pass, against seg_select's nine. Returns
// `lo` when it cannot bound a prefix (more than cap equal keys, or no member above lo: neither
// happens with distinct keys); the caller then takes seg_select's key. Otherwise `bins` still
// holds the counts of the parts (part (k - base_o) >> shift_o) and thr ends a part.
#ifndef SEG_SELECT_RANGE
#define SEG_SELECT_RANGE 1
#endif
__device__ u64 seg_select_range(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt, u64 lo,
                                bool all, u32 cap, u32* bins, u64* sred, u64& base_o, u32& shift_o) {
    const u32 tid = threadIdx.x;
    u64 mn = SEG_NO_EDGE, mx = 0;
    seg_each_member(tkey, jarr, off, cnt, [&](u32, u32, u64 k) {
        if (all || k > lo) {
            mn = k < mn ? k : mn;
            mx = k > mx ? k : mx;
        }
    });
    seg_block_minmax(mn, mx, sred);
    u64 base = mn, top = mx;
    if (base > top) {
        __syncthreads();  // every thread has read sred
        return lo;
    }
    const u32 per = 2048u / blockDim.x;
    while (true) {
        const u64 span = top - base;
        const u32 shift = seg_part_shift(span, 11u);
        __syncthreads();  // sred and bins are free
        for (u32 j = tid; j < 2048u; j += blockDim.x) bins[j] = 0;
        if (tid == 0) sred[0] = 0;
        __syncthreads();
        seg_each_member(tkey, jarr, off, cnt, [&](u32, u32, u64 k) {
            if ((all || k > lo) && k >= base && k <= top) atomicAdd(&bins[(u32)((k - base) >> shift)], 1u);
        });
        __syncthreads();
        u32 sum = 0;
        for (u32 b = 0; b < per; ++b) sum += bins[tid * per + b];
        u32 total;
        u32 incl = seg_block_scan(sum, &total);
        for (u32 b = 0; b < per; ++b) {
            const u32 d = tid * per + b;
            incl += bins[d];
            const u32 next = d + 1 < 2048u ? incl + bins[d + 1] : 0xffffffffu;
            if (incl <= cap && next > cap) {
                sred[0] = 1;
                // The end of part d, at most top (no overflow past the last part).
                const u64 end = (u64)(d + 1) << shift;
                sred[1] = end - 1 >= span ? top : base + end - 1;
            }
        }
        __syncthreads();
        const bool found = sred[0] != 0;
        const u64 thr = sred[1];
        if (found || shift == 0) {
            __syncthreads();  // every thread has read sred
            base_o = base;
            shift_o = shift;
            return found ? thr : lo;
        }
        top = base + (1ull << shift) - 1;  // the first part alone holds more than cap
    }
}

// Lanes whose 8-bit digit equals this lane's (among `valid` lanes): eight ballots, one a bit
// (__match_any_sync costs far more).
__device__ __forceinline__ u32 seg_peers(u32 d, bool valid) {
    u32 peers = __ballot_sync(FULL_MASK, valid);
#pragma unroll
    for (u32 b = 0; b < 8; ++b) {
        u32 bit = (d >> b) & 1u;
        u32 bal = __ballot_sync(FULL_MASK, bit);
        peers &= bit ? bal : ~bal;
    }
    return peers;
}

__device__ void seg_radix_pass(const u64* __restrict__ sk, const u32* __restrict__ si, u64* dk, u32* di, u32 cnt,
                               u32 shift, u32* wcnt) {
    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5, nw = blockDim.x >> 5;
    u32 per = (cnt + nw - 1) / nw;
    u32 beg = min(cnt, warp * per), end = min(cnt, beg + per);
    u32 below = (1u << lane) - 1u;
    for (u32 j = tid; j < 256u * nw; j += blockDim.x) wcnt[j] = 0;
    __syncthreads();
    for (u32 m0 = beg; m0 < end; m0 += 4u * 32u) {
        u32 d[4];
#pragma unroll
        for (u32 u = 0; u < 4; ++u) {
            u32 m = m0 + u * 32u + lane;
            d[u] = m < end ? (u32)((sk[m] >> shift) & 255u) : 256u;
        }
#pragma unroll
        for (u32 u = 0; u < 4; ++u) {
            if (m0 + u * 32u >= end) break;  // warp-uniform
            bool valid = d[u] < 256u;
            u32 peers = seg_peers(d[u], valid);
            if (valid && (peers & below) == 0) wcnt[SEG_WC(d[u], warp, nw)] += (u32)__popc(peers);
            __syncwarp();
        }
    }
    __syncthreads();
    // Exclusive scan of the 256 * nw counts in (digit, warp) order: eight consecutive a thread.
    u32 v[8], sum = 0;
#pragma unroll
    for (u32 b = 0; b < 8; ++b) {
        u32 f = 8u * tid + b, d = f / nw, w = f % nw;
        v[b] = wcnt[SEG_WC(d, w, nw)];
        sum += v[b];
    }
    u32 total;
    u32 x = seg_block_scan(sum, &total);
#pragma unroll
    for (u32 b = 0; b < 8; ++b) {
        u32 f = 8u * tid + b, d = f / nw, w = f % nw;
        wcnt[SEG_WC(d, w, nw)] = x;
        x += v[b];
    }
    __syncthreads();
    for (u32 m0 = beg; m0 < end; m0 += 4u * 32u) {
        u64 k[4];
        u32 id[4], d[4];
#pragma unroll
        for (u32 u = 0; u < 4; ++u) {
            u32 m = m0 + u * 32u + lane;
            bool valid = m < end;
            k[u] = valid ? sk[m] : 0ull;
            id[u] = valid ? si[m] : 0u;
            d[u] = valid ? (u32)((k[u] >> shift) & 255u) : 256u;
        }
#pragma unroll
        for (u32 u = 0; u < 4; ++u) {
            if (m0 + u * 32u >= end) break;  // warp-uniform
            bool valid = d[u] < 256u;
            u32 peers = seg_peers(d[u], valid);
            u32 at = 0;
            if (valid) {
                at = wcnt[SEG_WC(d[u], warp, nw)];
                u32 dst = at + (u32)__popc(peers & below);
                dk[dst] = k[u];
                di[dst] = id[u];
            }
            __syncwarp();
            if (valid && (peers & below) == 0) wcnt[SEG_WC(d[u], warp, nw)] = at + (u32)__popc(peers);
            __syncwarp();
        }
    }
    __syncthreads();
}

// Sorts cnt (key, id) pairs at sk/si whose keys lie in [kmin, kmax] by stable LSD radix passes
// over the digits below the highest bit where those differ, sk/si <-> sk2/si2; with `pair` the
// first two (the mutual pair's equal keys, the least of a tree) are then ordered by id. Returns
// which half holds the result (0: sk/si). wcnt: 256 words a warp of shared memory.
__device__ __forceinline__ u32 seg_radix_sort(u64* sk, u32* si, u64* sk2, u32* si2, u32 cnt, u64 kmin, u64 kmax, u32* wcnt,
                              bool pair) {
    const u64 diff = kmin ^ kmax;
    const u32 top = diff ? 64u - (u32)__clzll((long long)diff) : 0u;  // bits that differ: [0, top)
    u32 half = 0;
    for (u32 shift = 0; shift < top; shift += 8) {
        if (half == 0) seg_radix_pass(sk, si, sk2, si2, cnt, shift, wcnt);
        else seg_radix_pass(sk2, si2, sk, si, cnt, shift, wcnt);
        half ^= 1u;
    }
    if (pair && threadIdx.x == 0 && cnt >= 2) {
        u64* k = half ? sk2 : sk;
        u32* d = half ? si2 : si;
        if (k[0] == k[1] && d[1] < d[0]) {
            u32 t = d[0];
            d[0] = d[1];
            d[1] = t;
        }
    }
    __syncthreads();
    return half;
}

// Sorts a large tree's core by (key, id) into scratch (2 x cnt pairs at sk/si and sk2/si2):
// the members are gathered once (four member -> key chains in flight a thread), then stable
// LSD radix passes over the digits below the highest bit where the keys differ. Keys are unique
// except the mutual pair's (the same edge, the least key of the tree), whose order by id is
// fixed at the end. Returns which half holds the result (0: sk/si). Shared: wcnt 256 words a
// warp (8192 at 1024 threads), red 2 x 32 u64.
__device__ u32 seg_sort_tree(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt, u64* sk,
                             u32* si, u64* sk2, u32* si2, u32* wcnt, u64* red) {
    u64 kmin, kmax;
    seg_stage_members(tkey, jarr, off, cnt, sk, si, kmin, kmax);
    seg_block_minmax(kmin, kmax, red);
    __syncthreads();
    return seg_radix_sort(sk, si, sk2, si2, cnt, kmin, kmax, wcnt, true);
}

// Step `j` of bitonic level `kk` for element e held in registers (k, i), its partner e ^ j held by
// lane ^ j of the same warp: the lower index keeps the smaller (key, id) where the level sorts
// ascending ((e & kk) == 0), the larger elsewhere.
__device__ __forceinline__ void seg_bitonic_shfl(u64& k, u32& i, u32 e, u32 j, u32 kk) {
    const u64 ok = __shfl_xor_sync(FULL_MASK, k, j);
    const u32 oi = __shfl_xor_sync(FULL_MASK, i, j);
    const bool asc = (e & kk) == 0, lower = (e & j) == 0;
    const bool take = lower == asc ? seg_less(ok, oi, k, i) : seg_less(k, i, ok, oi);
    if (take) {
        k = ok;
        i = oi;
    }
}

// Sorts skey / sid[0, pw) by (key, id) with a bitonic network (pw a power of two, 64 <= pw <= 2 *
// blockDim.x; callers pad with SEG_NO_EDGE). SEG_SORT_SHFL: a warp holds 64 consecutive elements
// in registers (lane l: b + l and b + 32 + l), so every step with j < 64 runs in registers and
// shuffles; only the steps with j >= 64 go through shared memory with a barrier each (21
// barriers at pw = 2048 instead of 66). Else every step is a shared-memory step.
#ifndef SEG_SORT_SHFL
#define SEG_SORT_SHFL 1
#endif
__device__ void seg_sort_chunk(u64* skey, u32* sid, u32 pw) {
    const u32 tid = threadIdx.x;
    auto shared_step = [&](u32 kk, u32 j) {
        for (u32 e = tid; e < pw; e += blockDim.x) {
            u32 o = e ^ j;
            if (o > e) {
                bool asc = (e & kk) == 0;
                bool swap = asc ? seg_less(skey[o], sid[o], skey[e], sid[e]) : seg_less(skey[e], sid[e], skey[o], sid[o]);
                if (swap) {
                    u64 tk = skey[e];
                    skey[e] = skey[o];
                    skey[o] = tk;
                    u32 ti = sid[e];
                    sid[e] = sid[o];
                    sid[o] = ti;
                }
            }
        }
        __syncthreads();
    };
    if (!SEG_SORT_SHFL) {
        for (u32 kk = 2; kk <= pw; kk <<= 1)
            for (u32 j = kk >> 1; j > 0; j >>= 1) shared_step(kk, j);
        return;
    }
    const u32 lane = tid & 31u, e0 = (tid >> 5) * 64u + lane, e1 = e0 + 32u;
    const bool act = e0 < pw;  // whole warps (pw is a multiple of 64)
    // Steps j < 64 of levels kk_lo..kk_hi, in registers (the level's steps from min(kk / 2, 32)).
    auto in_registers = [&](u32 kk_lo, u32 kk_hi) {
        if (!act) return;
        u64 k0 = skey[e0], k1 = skey[e1];
        u32 i0 = sid[e0], i1 = sid[e1];
        for (u32 kk = kk_lo; kk <= kk_hi; kk <<= 1) {
            for (u32 j = kk >> 1 < 32u ? kk >> 1 : 32u; j > 0; j >>= 1) {
                if (j == 32u) {
                    // e0 and e1 are partners, in one block of the level (kk >= 64)
                    if ((e0 & kk) == 0) seg_cswap2(k0, i0, k1, i1);
                    else seg_cswap2(k1, i1, k0, i0);
                } else {
                    seg_bitonic_shfl(k0, i0, e0, j, kk);
                    seg_bitonic_shfl(k1, i1, e1, j, kk);
                }
            }
        }
        skey[e0] = k0;
        skey[e1] = k1;
        sid[e0] = i0;
        sid[e1] = i1;
    };
    in_registers(2u, 64u);
    __syncthreads();
    for (u32 kk = 128u; kk <= pw; kk <<= 1) {
        for (u32 j = kk >> 1; j >= 64u; j >>= 1) shared_step(kk, j);
        in_registers(kk, kk);
        __syncthreads();
    }
}

// SEG_CAT_BUCKET: a large tree's chunk is gathered in key order part by part, from the counts of
// the parts of the keys' range that seg_select_range leaves in `bins`, instead of gathered in
// any order and sorted by seg_sort_chunk's bitonic network. GPU notes (H100, 2026-11-26,
// %globaltimer around each phase of segment_cat_block, the clip frame at 1080p): the bitonic
// sort of a 2 048-member chunk took 15-22 us of a chunk's 30-40 (selects 7-10, evaluation
// 8-10), so a round with a tree walking three chunks spent ~50 us of it sorting.
#ifndef SEG_CAT_BUCKET
#define SEG_CAT_BUCKET 1
#endif
// The finishers' caterpillars gather by parts too (their registers spill more with it).
#ifndef SEG_FIN_BUCKET
#define SEG_FIN_BUCKET 0
#endif
// The most keys a part may hold for the bucket gather to sort them alone (insertion, one thread a
// part); a chunk with a fuller part is sorted whole. (Parts of 17-64 keys sorted by a warp each
// instead measured the same: the warps' sorts cost what the bitonic network saved.)
#ifndef SEG_BUCKET_SORT_MAX
#define SEG_BUCKET_SORT_MAX 16u
#endif

// The chunk (members with key > lo, or every member when `all`, up to thr, the end of part `last`
// of the keys' range: part (k - base) >> shift) into skey / sid in (key, id) order: the parts'
// starts by a block scan of their counts (`bins`, which alias skey, read before it is written)
// into pend, every member takes the next slot of its part, then one thread a part sorts the
// keys that share it by insertion. *fill = the chunk's size. False (the chunk gathered part by
// part, not sorted) when a part of the chunk holds more than SEG_BUCKET_SORT_MAX keys.
// 2048 / blockDim.x parts a thread.
__device__ bool seg_bucket_gather(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt, u64 lo,
                                  bool all, u64 thr, u64 base, u32 shift, u32 last, u64* skey, u32* sid, u32* pend,
                                  u32* fill) {
    __shared__ u32 s_most;
    const u32 tid = threadIdx.x, per = 2048u / blockDim.x;
    const u32* bins = (const u32*)skey;
    if (tid == 0) s_most = 0;
    u32 sum = 0, most = 0;
    for (u32 b = 0; b < per; ++b) {
        const u32 d = tid * per + b, v = d <= last ? bins[d] : 0u;
        sum += v;
        most = v > most ? v : most;
    }
    u32 total;
    u32 ex = seg_block_scan(sum, &total);  // its barriers publish s_most = 0
    atomicMax(&s_most, most);
    for (u32 b = 0; b < per; ++b) {
        const u32 d = tid * per + b;
        pend[d] = ex;
        ex += d <= last ? bins[d] : 0u;
    }
    __syncthreads();  // bins read: skey may be written
    if (tid == 0) *fill = total;
    seg_each_member(tkey, jarr, off, cnt, [&](u32, u32 id, u64 k) {
        if ((all || k > lo) && k <= thr) {
            const u32 slot = atomicAdd(&pend[(u32)((k - base) >> shift)], 1u);
            skey[slot] = k;
            sid[slot] = id;
        }
    });
    __syncthreads();
    const bool ok = s_most <= SEG_BUCKET_SORT_MAX;
    if (ok) {
        for (u32 b = 0; b < per; ++b) {
            const u32 d = tid * per + b;
            if (d > last) break;
            const u32 st = d ? pend[d - 1] : 0u, en = pend[d];
            for (u32 x = st + 1; x < en; ++x) {
                const u64 kx = skey[x];
                const u32 ix = sid[x];
                u32 y = x;
                while (y > st && seg_less(kx, ix, skey[y - 1], sid[y - 1])) {
                    skey[y] = skey[y - 1];
                    sid[y] = sid[y - 1];
                    --y;
                }
                skey[y] = kx;
                sid[y] = ix;
            }
        }
        __syncthreads();
    }
    return ok;
}

// SEG_CAT_TRACE: phase times of the large trees (and with 2 the mid-size ones) by printf.
#ifndef SEG_CAT_TRACE
#define SEG_CAT_TRACE 0
#endif
__device__ __forceinline__ u64 seg_gtime() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// SEG_CAT_WHOLE: segment_cat_block (and _g) sort a large tree of at most W members once, in the
// dynamic shared memory its launch brings (W = seg_whole_cap(): 16 bytes a member; the host gives
// 8 192 members' worth where the device allows it, none elsewhere), and then walk its chunks from
// there, instead of reading every member from global memory three times a chunk (range, counts,
// gather: seg_select_range, seg_bucket_gather). Sort: one pass stages every member's key and id
// and takes their range; the range in SEG_WHOLE_BINS equal parts is counted (in the static chunk
// area), a block scan gives each part's start, every member takes the next slot of its part (an
// order of 16-bit member indices), and each member moves to its rank among its part's keys. A
// part of more than SEG_WHOLE_PART_MAX keys (members crowded into a narrow range: many with one
// weight, keys that differ only in their edge ids) makes it give up before the scatter, and the
// tree is radix-sorted into scratch instead (seg_sort_tree; a tree of one chunk is gathered and
// sorted at once): the whole-tree kernels never select chunks (WHOLE_ONLY in seg_cat_blocks).
// GPU notes (H100, 2026-11-26, SEG_CAT_TRACE, the 1080p frames): before, a 4 192-member tree of
// the clip frame took 76 us in 3 chunks (selects 31, gathers 19, evaluations 25), a 7 702-member
// one 81 us in 2 (22 of them sorting a crowded chunk); sorted whole, 59 and 55 us (the sort
// 15-25 us, the rest the chunks' evaluations). Trees that stop in their first chunk gain nothing
// (their chunk was one gather already). Crowded trees (round 3 of the clip frame, 3 044 and 3 364
// members) refined part by part over each full part's own range (a second level) were slower
// than the chunked walk (+60-80 us a tree: the crowding repeats at every distinct weight), so
// they fall back at once. Whole frames (two passes each against chunks only): building k = 500
// -22 / -27 us, the clip frame k = 500 -28 / -42, the others within +-15.
// Sixteenth pass (H100, 2026-11-26, A/B in one lease, three passes): with the whole sort, the
// chunk selects and bucket gathers served only crowded trees, yet their code held registers in
// segment_cat_block: ptxas spilled 74 / 76 bytes (store / load) there, 66 / 68 in _g. Crowded
// trees radix-sorted instead and that code compiled out of the two kernels: 36 / 60 and 4 / 8
// bytes; every 1080p frame -8 to -39 us (building 2.73 / 2.89 -> 2.72 / 2.87 ms, fruits RGB
// 3.00 / 2.99 -> 2.98 / 2.97, grey 2.89 / 2.91 -> 2.88 / 2.88, the clip frame 3.22 / 3.08 ->
// 3.18 / 3.04), though the two crowded trees of the clip frame's round 3 take about as long
// radix-sorted (72-81 us, 57-66 of them the eight radix passes) as walked in chunks (67-78).
// Tried: sorting those trees whole after all, with the tree's least weight split off (its keys,
// which differ only in their edge ids, in half the parts by their own range; trace: 31-37 us a
// tree), measured -40 us on the clip frame at k = 100 but +10 to +30 us on the photographs at
// k = 500 in three forms (two part maps, a not-inlined split or sort, an increasing key map
// applied in place), each from the registers its code took in segment_cat_block (up to 124 /
// 136 bytes of spills); the key map on top of the compiled-out selects measured likewise (clip
// -1 to -25 us, photographs +6 to +36 against this code).
#ifndef SEG_CAT_WHOLE
#define SEG_CAT_WHOLE 1
#endif
// A crowded tree that fits half the whole-tree area is radix-sorted there instead of in
// global scratch (seg_cat_blocks). GPU notes (H100, 2026-11-26): the clip frame's two crowded
// trees 72-81 -> 64-72 us (the eight passes are barrier-bound either way), whole frames -0 to
// -19 us (ptxas spilled less in segment_cat_block: 16 / 8 bytes, none in _g).
#ifndef SEG_CROWD_SHARED
#define SEG_CROWD_SHARED 1
#endif
#define SEG_WHOLE_BINS 8192u
#define SEG_WHOLE_BINS_LOG 13u

extern __shared__ __align__(16) unsigned char seg_dyn[];

// Members the launch's dynamic shared memory holds for seg_whole_sort (0: none given).
__device__ __forceinline__ u32 seg_whole_cap() {
    u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    return (dyn / 16u) & ~7u;
}

// Most keys a part may hold for seg_whole_sort (each member ranks itself among its part's keys:
// a load pair a key of the part).
#ifndef SEG_WHOLE_PART_MAX
#define SEG_WHOLE_PART_MAX 64u
#endif

// The tree's members (jarr[off .. off + cnt), cnt <= W) into sk / si (staged in range order)
// and ord (their indices in (key, id) order; ord2: the order by parts before the ranking);
// bins: SEG_WHOLE_BINS words (the static chunk area, 16-byte aligned). False: a part too full
// (see above); ord is then incomplete. The part counts are read and written as uint4 (a
// thread's 8 contiguous counts: scalar accesses at that stride conflicted 8 ways), and each
// member takes its place in its part by counting the part's smaller keys (GPU notes, H100,
// 2026-11-26, SEG_CAT_TRACE: one thread a part sorting by insertion took 2.5-13 us of a tree's
// 15-27 us sort, the scan 4 us, the range's reduction 3 us).
__device__ bool seg_whole_sort(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt,
                               u64* sk, u32* si, u16* ord, u16* ord2, u32* bins, u64* sred, u64 (&ph)[6]) {
#define SEG_PH(i) if (SEG_CAT_TRACE) ph[i] = seg_gtime()
    __shared__ u32 s_full;
    const u32 tid = threadIdx.x, bd = blockDim.x;
    u64 mn, mx;
    seg_stage_members(tkey, jarr, off, cnt, sk, si, mn, mx);
    SEG_PH(0);
    seg_block_minmax(mn, mx, sred);  // its barrier publishes sk / si
    SEG_PH(1);
    const u32 shift = seg_part_shift(mx - mn, SEG_WHOLE_BINS_LOG);
    uint4* bins4 = (uint4*)bins;
    for (u32 j = tid; j < SEG_WHOLE_BINS / 4u; j += bd) bins4[j] = make_uint4(0u, 0u, 0u, 0u);
    if (tid == 0) s_full = 0;
    __syncthreads();
    for (u32 m = tid; m < cnt; m += bd) atomicAdd(&bins[(u32)((sk[m] - mn) >> shift)], 1u);
    __syncthreads();
    SEG_PH(2);
    // Counts to starts: a block scan of each thread's SEG_WHOLE_BINS / bd (8 at 1 024 threads)
    // contiguous counts, read and written two uint4 at a time.
    const u32 q4 = SEG_WHOLE_BINS / 4u / bd;
    u32 sum = 0, most = 0;
    for (u32 b = 0; b < q4; ++b) {
        const uint4 c = bins4[tid * q4 + b];
        sum += c.x + c.y + c.z + c.w;
        most = max(most, max(max(c.x, c.y), max(c.z, c.w)));
    }
    if (most > SEG_WHOLE_PART_MAX) s_full = 1;
    u32 total;
    u32 ex = seg_block_scan(sum, &total);  // its barriers publish s_full
    for (u32 b = 0; b < q4; ++b) {
        const uint4 c = bins4[tid * q4 + b];
        uint4 o;
        o.x = ex;
        o.y = o.x + c.x;
        o.z = o.y + c.y;
        o.w = o.z + c.z;
        ex = o.w + c.w;
        bins4[tid * q4 + b] = o;
    }
    __syncthreads();
    SEG_PH(3);
    if (s_full) return false;  // every thread read s_full after the barriers
    for (u32 m = tid; m < cnt; m += bd) ord2[atomicAdd(&bins[(u32)((sk[m] - mn) >> shift)], 1u)] = (u16)m;
    __syncthreads();
    SEG_PH(4);
    // bins[d] is now the end of part d (its start: the end of part d - 1). Each member's place:
    // its part's start plus the part's members before it in (key, id) order.
    for (u32 x = tid; x < cnt; x += bd) {
        const u16 px = ord2[x];
        const u64 kx = sk[px];
        const u32 ix = si[px], d = (u32)((kx - mn) >> shift);
        const u32 st = d ? bins[d - 1] : 0u, en = bins[d];
        u32 rank = st;
        for (u32 y = st; y < en; ++y) {
            const u16 py = ord2[y];
            rank += seg_less(sk[py], si[py], kx, ix) ? 1u : 0u;
        }
        ord[rank] = px;
    }
    __syncthreads();
    SEG_PH(5);
#undef SEG_PH
    return true;
}

// Step 6, trees of more than 32 members: a block per tree (mlist up to SEG_CAT_MID_CAP members,
// blist above), the caterpillar in chunks
// of at most SEG_CAT_CAP members in key order (segment_cat_block and _g: from a whole-tree sort,
// SEG_CAT_WHOLE above, else as follows with radix sorts only): up to SEG_CAT_SORT members each chunk is
// selected (seg_select_range: a prefix of the remaining keys of at most SEG_CAT_CAP members;
// seg_select, the exact next SEG_CAT_CAP, with SEG_SELECT_RANGE 0), gathered into shared memory
// and sorted by a bitonic network sized to it; a larger tree is sorted once into scratch (seg_sort_tree: stable
// LSD radix passes over the digits where its keys differ) and read a chunk at a time. Each chunk is evaluated as in segment_cat_warp (a block scan for |R|,
// a shared minimum for the first failing step) with |R| and Int carried over from the previous
// chunk; the tree stops at its first failing step, so one round covers the whole core exactly
// as the CPU model does. GPU notes (H100): the chunks used to be radix-selected from the
// unsorted tree (8 passes over every member per chunk: O(members^2 / 2048), 4.7 of 8.3 ms on
// the clip frame at k = 500, whose largest tree has 36 754 members).
// The caterpillars of the trees in `list` by blocks of CAP / 2 threads (chunks of CAP
// members). LARGE: trees may exceed CAP (chunks selected or the tree sorted, see above); else
// every tree fits one chunk (the mid-size kernel).
template <u32 CAP, bool LARGE, bool PROLOGUE = true, bool SKIP_GIANT = false, bool BUCKET = SEG_CAT_BUCKET != 0,
          bool WHOLE = false>
__device__ __forceinline__ void seg_cat_blocks(SEG_CAT_ARGS) {
    // A chunk's keys, ids and |R| before each member; while a tree is sorted, the radix passes'
    // warp counts (8192 words: CAP 2048).
    __shared__ __align__(16) u64 s_raw[2 * CAP];
    __shared__ u32 hist[256], sbase[256];
    __shared__ u64 sred[64];
    __shared__ u64 sprefix;
    __shared__ u32 sneed, sfill, sfail;
    __shared__ double swl[32], s_cw;  // each warp's last weight; the weight carried to the next chunk
    u64* skey = s_raw;
    u32* sid = (u32*)(s_raw + CAP);
    u32* ssr = sid + CAP;
    u32 nb;
    if (PROLOGUE) {
        if (!seg_round_start(ctl, gate, lcount, nb)) return;
    } else {
        nb = *lcount;
    }
    // The whole-tree kernels never select chunks: a large tree is sorted whole in shared
    // memory, or (crowded, larger than the shared memory holds, or none given) radix-sorted
    // into scratch when it has more than one chunk (one chunk is gathered and sorted at once).
    constexpr bool WHOLE_ONLY = WHOLE && LARGE && SEG_CAT_WHOLE;
    u32 tid = threadIdx.x;
    u32 ev = 0, mg = 0;
    for (u32 i = blockIdx.x; i < nb; i += gridDim.x) {
        u32 t = list[i];
        u32 cnt = (u32)tcnt[t], off = joff[t];
        // segment_cat_giant's trees (it zeroes their counts when it is done: 0 is one of its).
        if (SKIP_GIANT && (cnt > SEG_CAT_GIANT || cnt == 0)) continue;
        // A sink's tree (min_size rounds, SEG_MS_SINK; of any size here, segment_core): every
        // member merges into the sink whatever the order, so no sort. The sink is the range's
        // first member (key 0, the least there is: a member with key 0 would be the far end of
        // edge 0, which always merges before any sink exists).
        if (!LARGE && SEG_MID_SINKS && SEG_SINK(mode, (u32)done[t])) {
            // A member's size is read and its link, flag and round written by its thread only.
            u32 sum = 0;
            for (u32 m = 1u + tid; m < cnt; m += blockDim.x) {
                const u32 c = jarr[off + m];
                sum += size[c];
                seg_join(link, done, round, c, t, r);
                ++ev;
                ++mg;
            }
            u32 total;
            seg_block_scan(sum, &total);
            if (tid == 0) {
                size[t] += total;
                tcnt[t] = 0;
            }
            __syncthreads();
            continue;
        }
        u64 tr_t0 = SEG_CAT_TRACE ? seg_gtime() : 0, tr_sel = 0, tr_gat = 0, tr_sort = 0, tr_eval = 0, tr_m = 0;
        u32 tr_chunks = 0;
        u64 tr_ph[6] = {0, 0, 0, 0, 0, 0}, tr_ev[4] = {0, 0, 0, 0};
        // The pair's smaller root, or the sink: first in key order, the component R grows from.
        // (segment_cat_warp takes the first sorted member instead; they differ only if a sink
        // tree's member had key 0 like the sink, i.e. edge 0 at weight 0, which merges before any
        // sink exists: first of all edges in the merge rounds at any scale above 0, and in the
        // first min_size round, as a mutual pair of singletons, at scale 0.)
        u32 a = t;
        double int_a = cint[a];
        u32 carry_size = 0;
        double carry_w = 0.0;  // weight of the last merged member (Int of R after it)
        bool merged = false;
        u32 taken = 0;
        // A tree of more than SEG_CAT_SORT members is sorted once into scratch (its range of
        // jarr, twice) and read a chunk at a time; a smaller one radix-selects each chunk.
        bool sorted = false;
        const u64* rk = scr_k + off;
        const u32* ri = scr_i + off;
        u64 lo = 0;
        // SEG_CAT_WHOLE: the whole tree sorted once in the launch's dynamic shared memory.
        bool whole = false;
        const u64* wk = nullptr;
        const u32* wi = nullptr;
        const u16* word = nullptr;
        if (WHOLE && LARGE && SEG_CAT_WHOLE) {
            const u32 W = seg_whole_cap();
            if (cnt <= W && W <= 65536u) {
                u64* sk = (u64*)seg_dyn;
                u32* si = (u32*)(seg_dyn + 8u * W);
                u16* ord = (u16*)(seg_dyn + 12u * W);
                whole = seg_whole_sort(tkey, jarr, off, cnt, sk, si, ord, ord + W, (u32*)s_raw, sred, tr_ph);
                wk = sk;
                wi = si;
                word = ord;
                if (SEG_CAT_TRACE) { u64 x = seg_gtime(); tr_sort += x - tr_t0; }
            }
        }
        while (taken < cnt) {
            if (SEG_CAT_TRACE) tr_m = seg_gtime();
            u32 mm;
            u32 left = cnt - taken;
            if (LARGE && !whole && !sorted && (cnt > SEG_CAT_SORT || (WHOLE_ONLY && cnt > CAP))) {
                sorted = true;
                // A crowded tree of at most half the whole-tree area is radix-sorted there, in
                // shared memory (keys and ids twice: 24 bytes a member), else in scratch.
                const u32 W = WHOLE_ONLY ? seg_whole_cap() : 0u;
                const bool sm = WHOLE_ONLY && SEG_CROWD_SHARED && 2u * cnt <= W;
                u64* k1 = sm ? (u64*)seg_dyn : scr_k + off;
                u32* i1 = sm ? (u32*)(seg_dyn + 8u * W) : scr_i + off;
                u64* k2 = sm ? (u64*)seg_dyn + cnt : scr_k + n + off;
                u32* i2 = sm ? (u32*)(seg_dyn + 8u * W) + cnt : scr_i + n + off;
                rk = k1;
                ri = i1;
                if (seg_sort_tree(tkey, jarr, off, cnt, k1, i1, k2, i2, (u32*)s_raw, sred)) {
                    rk = k2;
                    ri = i2;
                }
            }
            if (whole) {
                mm = left < CAP ? left : CAP;
                for (u32 e = tid; e < mm; e += blockDim.x) {
                    const u16 m = word[taken + e];
                    skey[e] = wk[m];
                    sid[e] = wi[m];
                }
                __syncthreads();
            } else if (sorted) {
                mm = left < CAP ? left : CAP;
                for (u32 e = tid; e < mm; e += blockDim.x) {
                    skey[e] = rk[taken + e];
                    sid[e] = ri[taken + e];
                }
                __syncthreads();
            } else {
                bool all = taken == 0;
                u64 thr = SEG_NO_EDGE;
                // SEG_CAT_BUCKET: the chunk's keys are scattered to their parts of the range
                // seg_select_range counted (in key order part by part), so only keys sharing a
                // part need sorting.
                bool bucket = false;
                u64 base = 0;
                u32 shift = 0, last = 0;
                if (LARGE && !WHOLE_ONLY && (left > CAP || BUCKET)) {
                    // seg_select_range answers lo when it cannot bound a prefix (see there).
                    thr = SEG_SELECT_RANGE ? seg_select_range(tkey, jarr, off, cnt, lo, all, CAP, (u32*)s_raw, sred, base, shift)
                                           : lo;
                    bucket = BUCKET && SEG_SELECT_RANGE && thr != lo;
                    if (thr == lo && left > CAP) thr = seg_select(tkey, jarr, off, cnt, lo, all, CAP, hist, &sprefix, &sneed);
                    if (thr == lo) thr = SEG_NO_EDGE;  // (no member above lo: cannot happen, left > 0)
                }
                if (SEG_CAT_TRACE) { u64 x = seg_gtime(); tr_sel += x - tr_m; tr_m = x; }
                // Whether the chunk still needs its sort (a part held too many keys to sort alone).
                bool unsorted = true;
                if (bucket) {
                    last = (u32)((thr - base) >> shift);
                    unsorted = !seg_bucket_gather(tkey, jarr, off, cnt, lo, all, thr, base, shift, last, skey, sid, ssr, &sfill);
                    mm = sfill;
                } else {
                    if (tid == 0) sfill = 0;
                    __syncthreads();
                    seg_each_member(tkey, jarr, off, cnt, [&](u32, u32 id, u64 k) {
                        if ((all || k > lo) && k <= thr) {
                            u32 slot = atomicAdd(&sfill, 1u);
                            skey[slot] = k;
                            sid[slot] = id;
                        }
                    });
                    __syncthreads();
                    mm = sfill;
                }
                if (SEG_CAT_TRACE) { u64 x = seg_gtime(); tr_gat += x - tr_m; tr_m = x; }
                if (unsorted) {
                    u32 pw = SEG_SORT_SHFL ? 64u : 2u;
                    while (pw < mm) pw <<= 1;
                    for (u32 e = mm + tid; e < pw; e += blockDim.x) {
                        skey[e] = SEG_NO_EDGE;
                        sid[e] = SEG_NONE;
                    }
                    __syncthreads();
                    seg_sort_chunk(skey, sid, pw);
                }
                if (SEG_CAT_TRACE) { u64 x = seg_gtime(); tr_sort += x - tr_m; tr_m = x; }
            }
            // |R| before each member: carry + block scan (two consecutive members a thread). A
            // thread loads its members' sizes, Ints and weights at once; the Int of R at a step
            // is the previous member's weight: the thread's own, the lane's before (shuffle) or
            // the warp's before (swl). The thread that holds the failing step freezes, the one
            // before it hands the carried weight on (s_cw): no loads after the scan.
            if (SEG_CAT_TRACE) { u64 x = seg_gtime(); tr_ev[0] += x - tr_m; tr_m = x; }
            const u32 e0 = 2 * tid, e1 = e0 + 1, lane = tid & 31u, warp = tid >> 5;
            const bool v0 = e0 < mm, v1 = e1 < mm;
            const u32 c0 = v0 ? sid[e0] : 0u, c1 = v1 ? sid[e1] : 0u;
            const u32 s0 = v0 ? size[c0] : 0u, s1 = v1 ? size[c1] : 0u;
            const double i0 = v0 ? cint[c0] : 0.0, i1 = v1 ? cint[c1] : 0.0;
            const double w0 = v0 ? w4[seg_eid(skey[e0], eb)] : 0.0, w1 = v1 ? w4[seg_eid(skey[e1], eb)] : 0.0;
            if (lane == 31) swl[warp] = w1;
            if (tid == 0) sfail = mm;
            u32 total;
            const u32 x0 = seg_block_scan(s0 + s1, &total);  // its barriers publish swl and sfail
            if (SEG_CAT_TRACE) { u64 x = seg_gtime(); tr_ev[1] += x - tr_m; tr_m = x; }
            if (v0) ssr[e0] = carry_size + x0;
            if (v1) ssr[e1] = carry_size + x0 + s0;
            const double wb = __shfl_up_sync(FULL_MASK, w1, 1);
            const double wp0 = e0 == 0 ? carry_w : (lane > 0 ? wb : swl[warp - 1]);
            bool okc0 = true, okr0 = true, okc1 = true, okr1 = true;
            if (v0 && taken + e0 >= 1)
                seg_step(mode, w0, s0, i0, carry_size + x0, taken + e0 == 1 ? int_a : wp0, k, min_size, okc0, okr0);
            if (v1 && taken + e1 >= 1)
                seg_step(mode, w1, s1, i1, carry_size + x0 + s0, taken + e1 == 1 ? int_a : w0, k, min_size, okc1, okr1);
            if (!(okc0 && okr0)) atomicMin(&sfail, e0);
            else if (!(okc1 && okr1)) atomicMin(&sfail, e1);
            __syncthreads();
            if (SEG_CAT_TRACE) { u64 x = seg_gtime(); tr_ev[2] += x - tr_m; tr_m = x; }
            const u32 f = sfail;
            if (v0 && taken + e0 >= 1 && e0 < f) {
                seg_join(link, done, round, c0, a, r);
                ++ev;
                ++mg;
            }
            if (v1 && taken + e1 >= 1 && e1 < f) {
                seg_join(link, done, round, c1, a, r);
                ++ev;
                ++mg;
            }
            if (f < mm && e0 == f) ev += seg_freeze(done, mode, c0, a, okc0, okr0);
            if (f < mm && e1 == f) ev += seg_freeze(done, mode, c1, a, okc1, okr1);
            // Carry to the next chunk (or the final statistics of R).
            const u32 upto = f;  // members merged or a taken before the failure: [0, f)
            const bool carried = upto > 0 && taken + upto >= 2;
            if (upto > 0) carry_size = upto < mm ? ssr[upto] : carry_size + total;
            if (carried && e0 == upto - 1) s_cw = w0;
            if (carried && e1 == upto - 1) s_cw = w1;
            lo = skey[mm - 1];
            taken += mm;
            __syncthreads();
            if (carried) {
                carry_w = s_cw;
                merged = true;
            }
            if (SEG_CAT_TRACE) { u64 x = seg_gtime(); tr_ev[3] += x - tr_m; tr_eval += tr_ev[0] + tr_ev[1] + tr_ev[2] + tr_ev[3]; ++tr_chunks; }
            if (f < mm) break;
        }
        if (SEG_CAT_TRACE && tid == 0 && LARGE && cnt > CAP)
            printf("TRACE r=%u cnt=%u chunks=%u sorted=%d whole=%d total=%llu sel=%llu gat=%llu sort=%llu eval=%llu "
                   "ph=%lld,%lld,%lld,%lld,%lld,%lld ev=%llu,%llu,%llu,%llu\n", r, cnt, tr_chunks, (int)sorted, (int)whole, seg_gtime() - tr_t0,
                   tr_sel, tr_gat, tr_sort, tr_eval, (long long)(tr_ph[0] - tr_t0), (long long)(tr_ph[1] - tr_ph[0]),
                   (long long)(tr_ph[2] - tr_ph[1]), (long long)(tr_ph[3] - tr_ph[2]), (long long)(tr_ph[4] - tr_ph[3]),
                   (long long)(tr_ph[5] - tr_ph[4]), tr_ev[0], tr_ev[1], tr_ev[2], tr_ev[3]);
        if (tid == 0) {
            size[a] = carry_size;
            if (mode == SEG_MODE_MIN_SIZE) done[a] = carry_size >= min_size;
            if (mode == SEG_MODE_MERGE && merged) cint[a] = carry_w;
            tcnt[t] = 0;
            if (LARGE && cnt > SEG_CAT_GIANT) atomicAdd(gcnt, 1u);
        }
        __syncthreads();
    }
    seg_count(ctl, mctl, r, ev, mg);
}

extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segment_cat_block(SEG_CAT_ARGS) {
    seg_cat_blocks<SEG_CAT_CAP, true, true, false, SEG_CAT_BUCKET != 0, true>(SEG_CAT_PASS);
}

// segment_cat_block beside segment_cat_giant: the trees above SEG_CAT_GIANT members are its.
extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segment_cat_block_g(SEG_CAT_ARGS) {
    seg_cat_blocks<SEG_CAT_CAP, true, true, true, SEG_CAT_BUCKET != 0, true>(SEG_CAT_PASS);
}

// Trees of 33..SEG_CAT_MID_CAP members: one chunk each, by blocks a quarter the size, so four
// times as many trees are under way at once (rounds 4-6 of a 1080p photograph have ~600 such
// trees, ~100 members each).
extern "C" __global__ void __launch_bounds__(SEG_CAT_MID_THREADS) segment_cat_mid(SEG_CAT_ARGS) {
    seg_cat_blocks<SEG_CAT_MID_CAP, false>(SEG_CAT_PASS);
}

// Per-round list counts (src/ops/segment/gpu.rs C_*; kind * nctl + round).
#define SEG_C_FRONTIER 0u
#define SEG_C_ROOTS 1u
#define SEG_C_TREES 2u
#define SEG_C_MEMBERS 3u
#define SEG_C_SMALL 4u
#define SEG_C_LARGE 5u
#define SEG_C_CURSOR 6u
#define SEG_C_TINY 7u
#define SEG_C_MID 8u
#define SEG_C_GIANT 9u

// Everything segment_finish touches (SegFinish in src/ops/segment/gpu.rs, the same layout:
// device addresses, then k, then the u32 scalars).
// The buffers' addresses (Ptrs in src/ops/segment/gpu.rs, #[repr(C)]: the same fields in the
// same order; segment_finish reads all but the relabelling's and the stamps).
struct SegPtrs {
    const double* w4;
    u32* comp;
    u32* link;
    u32* size;
    double* cint;
    seg_done_t* done;
    u64* best;
    u64* tkey;
    u32* target;
    u32* tree;
    u64* exitk;
    u64* tcnt;
    u32* joff;
    u32* jarr;
    u32* hlist;
    u32* tlist;
    u32* mlist;
    u32* slist;
    u32* blist;
    u32* order;
    u16* round;
    u32* minpix;
    u32* rootlabel;
    u32* labels;
    u32* blocksum;
    u32* ctl;
    u32* mctl;
    u32* counts;
    u64* scr_k;
    u32* scr_i;
    u64* giant;
    u32* flist[2];
    u32* rlist[2];
    u32* info;
    u64* stamps;
};

struct SegFinish {
    SegPtrs p;
    double k;
    u64 zlim;  // seg_core_body's weight-0 key limit
    u32 width, height, n, eb, mode, min_size, nctl;
    u32 first;      // global number of the phase's first round (its lists' parity counts from it)
    u32 from;       // first round run here (the rounds before it were launched)
    u32 last;       // last round allowed (the parameters' cap)
    u32 limit;      // most frontier pixels a round here may start with
    u32 info_slot;  // info[info_slot] = 1 when a round was left with work (frontier above limit)
    u32 solo;       // segment_finish_grid: a round starting with at most this many frontier pixels
                    // is left to segment_finish (one block), which follows it
    u32 resume;     // segment_finish: start at info[SEG_INFO_RESUME] (where the grid stopped), not from
};

// Grid-wide barrier of a cooperative launch (segment_finish_grid, segment_cat_giant: every
// block resident at once). Every block adds to bar[0] once a barrier, block 0 2^31 - (blocks -
// 1) and the others 1, so the word grows by exactly 2^31 a barrier: its top bit flips when the
// last block arrives, and each block spins until the bit differs from the value its own add
// returned. The low 31 bits never change across barriers, so the word must start at 0 or 2^31
// (zeroed at allocation; nothing resets it). The fences order each block's writes before the
// barrier against every block's reads after it (release, then acquire at GPU scope; the block
// barriers extend them to the block). SEG_GRID_SYNC_FLIP 0: the earlier form, where the last
// block to arrive reset the count and bumped a generation word (bar[1]) that the others spun
// on: three more dependent atomics and a fence on the barrier's path.
#ifndef SEG_GRID_SYNC_FLIP
#define SEG_GRID_SYNC_FLIP 1
#endif
__device__ __forceinline__ void seg_grid_sync(u32* bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        if (SEG_GRID_SYNC_FLIP) {
            const u32 add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1u) : 1u;
            __threadfence();
            const u32 old = atomicAdd(bar, add);
            volatile u32* vb = bar;
            while (((old ^ *vb) & 0x80000000u) == 0u) {
            }
        } else {
            volatile u32* gen = bar + 1;
            u32 g = *gen;
            __threadfence();
            if (atomicAdd(bar, 1u) == gridDim.x - 1) {
                atomicExch(bar, 0u);
                __threadfence();
                atomicAdd(bar + 1, 1u);
            } else {
                while (*gen == g) {
                }
            }
        }
        __threadfence();
    }
    __syncthreads();
}

// Words of `info` that hold segment_finish_grid's barrier (count, generation), and the first
// round it left to segment_finish.
#define SEG_INFO_BAR 4u
#define SEG_INFO_RESUME 6u

// Step 6 for giant trees (more than SEG_CAT_GIANT core members: smooth video, where one tree can
// hold tens of thousands), over a cooperative grid of every SM instead of one block. One block
// sorted such a tree with radix passes whose scattered stores one SM issues one by one (H100,
// 2026-11-26: the clip frame's round 11, one tree of ~45 000 members, took 0.80 / 1.00 ms at
// k = 100 / 500, against ~0.15 ms for its other work). Here a bucket sort spreads it: the grid
// stages the members (key, id) in scratch (half A) and takes the keys' range; counts them in
// SEG_GIANT_BINS equal parts of it; every block derives the same buckets (runs of parts whose
// first position / SEG_GIANT_HALF is equal: at most 2 x SEG_GIANT_HALF members unless one part
// alone holds more) and scatters the members to their parts (half B, parts in key order); each
// block sorts whole buckets in shared memory (seg_sort_chunk; an oversize bucket by radix passes
// in global memory) and stashes each member's weight and |R| within its bucket, with the flag of
// its own failing threshold, in half A; every step is then evaluated at once (|R| = the bucket's
// carry + the stash), the least failing step ends the caterpillar, the members before it join
// and its side(s) freeze, as in seg_cat_blocks. Six grid barriers a tree. Trees are taken from
// the large-tree list (segment_cat_block_g leaves them); the grid returns at once without one.
// Measured (H100, 32 blocks): the clip frame's round 11 (one tree of ~45 000 members) 0.80 ->
// 0.16 ms at k = 100, 1.00 -> 0.17 at k = 500. Tests: segmentation GPU tests with
// SEG_CAT_GIANT=600 (every tree above 600 members here) equal the CPU model bit for bit.
// gs: SEG_GIANT_WORDS u64 of scratch, zero between trees: [0] the barrier, [1] ~least key,
// [2] greatest key, [3] members - first failing step (atomicMax), then as u32 the parts' counts
// and cursors and the buckets' size sums (SEG_GIANT_BINS each).
#define SEG_GIANT_BINS 2048u
#ifndef SEG_GIANT_HALF
#define SEG_GIANT_HALF 1024u
#endif
#define SEG_GIANT_WORDS (4u + 3u * SEG_GIANT_BINS / 2u)
#define SEG_XS_FAIL 0x80000000u
// The scatter (step 3) takes each member's slot in its part from the block's first slot there,
// which the block's count atomic returned (SEG_GIANT_BASES; 0: a global atomic a member). GPU
// notes (H100, 2026-11-26, SEG_CAT_TRACE, the clip frame's round 11 at k = 100, 36 793 members
// in 36 buckets, block 0's phases): stage 3 us, counts 3, scatter 9-10 -> 5.3, bucket sorts
// and stashes 27, steps 3.6; the whole frame within noise (three passes). Tried: ranking each
// member within its part (as seg_whole_sort) instead of the bitonic network for buckets whose
// parts hold at most SEG_WHOLE_PART_MAX keys: step 4 unchanged at 27 us, so the slowest bucket
// is not one of those (an oversize or crowded one: a part of equal weights, whose keys differ
// only in edge ids, takes the radix passes).
#ifndef SEG_GIANT_BASES
#define SEG_GIANT_BASES 1
#endif
// Buckets up to this many members are sorted in shared memory, larger ones by radix passes in
// global memory (a test switch: SEG_GIANT_FIT=64 sends nearly every bucket through them).
#ifndef SEG_GIANT_FIT
#define SEG_GIANT_FIT SEG_CAT_CAP
#endif
extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segment_cat_giant(SEG_CAT_ARGS, u64* gs) {
    __shared__ u64 s_raw[2 * SEG_CAT_CAP];  // a bucket's keys and ids; part starts; bucket carries
    __shared__ u32 s_bs[SEG_GIANT_BINS + 1];  // bucket starts (positions), s_bs[nbk] = members
    __shared__ u64 sred[64];
    __shared__ u32 s_fail;
    // Not seg_round_start: a cooperative grid must not let its dependents launch early
    // (griddepcontrol.launch_dependents), or their waiting blocks could hold the SMs that its
    // own blocks need to reach its barriers.
    u32 nb;
    grid_dep_wait();
    if (!seg_gate(ctl, gate, lcount, nb)) return;
    u32* bar = (u32*)gs;
    u32* hist = (u32*)(gs + 4);
    u32* cursor = hist + SEG_GIANT_BINS;
    u32* bsum = cursor + SEG_GIANT_BINS;
    const u32 tid = threadIdx.x, bd = blockDim.x;
    const u32 nthreads = gridDim.x * bd, gtid = blockIdx.x * bd + tid;
    u64* skey = s_raw;
    u32* sid = (u32*)(s_raw + SEG_CAT_CAP);
    u32 ev = 0, mg = 0;
    for (u32 i = 0; i < nb; ++i) {
        const u32 t = list[i];
        // Read by every block before any barrier of this tree; only this kernel zeroes a giant
        // tree's count, after its last barrier.
        const u32 cnt = (u32)__ldcg(&tcnt[t]);
        if (cnt <= SEG_CAT_GIANT) continue;
        const u32 off = joff[t], a = t;
        // SEG_CAT_TRACE: block 0's times at the tree's start and after each barrier.
        u64 gt[7] = {0, 0, 0, 0, 0, 0, 0};
#define SEG_GT(i) if (SEG_CAT_TRACE && blockIdx.x == 0 && tid == 0) gt[i] = seg_gtime()
        SEG_GT(0);
        u64* ak = scr_k + off;
        u32* ai = scr_i + off;
        u64* bk = scr_k + n + off;
        u32* bi = scr_i + n + off;
        // 1. Stage the members; the keys' range.
        u64 mn = SEG_NO_EDGE, mx = 0;
        for (u32 m = gtid; m < cnt; m += nthreads) {
            const u32 id = jarr[off + m];
            const u64 key = tkey[id];
            ak[m] = key;
            ai[m] = id;
            mn = key < mn ? key : mn;
            mx = key > mx ? key : mx;
        }
        seg_block_minmax(mn, mx, sred);
        if (tid == 0) {
            atomicMax(&gs[1], ~mn);
            atomicMax(&gs[2], mx);
        }
        seg_grid_sync(bar);
        SEG_GT(1);
        // 2. Counts of the parts.
        const u64 kmin = ~__ldcg(&gs[1]), span = __ldcg(&gs[2]) - kmin;
        const u32 shift = seg_part_shift(span, 11u);
        // The block's counts, then (SEG_GIANT_BASES) its first slot in each part: the scatter
        // below takes its members' slots from these in shared memory.
        u32* sh = (u32*)s_raw;
        for (u32 j = tid; j < SEG_GIANT_BINS; j += bd) sh[j] = 0;
        __syncthreads();
        for (u32 m = gtid; m < cnt; m += nthreads) atomicAdd(&sh[(u32)((__ldcg(&ak[m]) - kmin) >> shift)], 1u);
        __syncthreads();
        for (u32 j = tid; j < SEG_GIANT_BINS; j += bd)
            if (sh[j]) {
                const u32 base = atomicAdd(&hist[j], sh[j]);
                if (SEG_GIANT_BASES) sh[j] = base;
            }
        seg_grid_sync(bar);
        SEG_GT(2);
        // 3. Parts' starts and the buckets (the same in every block), then the scatter (the
        // starts past the block's first slots, sh).
        u32* pstart = (u32*)s_raw + SEG_GIANT_BINS;
        const u32 j0 = 2u * tid, j1 = j0 + 1u;  // SEG_CAT_THREADS x 2 = SEG_GIANT_BINS
        const u32 h0 = __ldcg(&hist[j0]), h1 = __ldcg(&hist[j1]);
        u32 total;
        const u32 p0 = seg_block_scan(h0 + h1, &total);
        pstart[j0] = p0;
        pstart[j1] = p0 + h0;
        __syncthreads();
        const bool beg0 = j0 == 0 || p0 / SEG_GIANT_HALF != pstart[j0 - 1] / SEG_GIANT_HALF;
        const bool beg1 = (p0 + h0) / SEG_GIANT_HALF != p0 / SEG_GIANT_HALF;
        u32 nbk;
        const u32 q = seg_block_scan((u32)beg0 + (u32)beg1, &nbk);
        if (beg0) s_bs[q] = p0;
        if (beg1) s_bs[q + (u32)beg0] = p0 + h0;
        if (tid == 0) s_bs[nbk] = cnt;
        for (u32 m = gtid; m < cnt; m += nthreads) {
            const u64 key = __ldcg(&ak[m]);
            const u32 j = (u32)((key - kmin) >> shift);
            const u32 pos = pstart[j] + (SEG_GIANT_BASES ? atomicAdd(&sh[j], 1u) : atomicAdd(&cursor[j], 1u));
            bk[pos] = key;
            bi[pos] = __ldcg(&ai[m]);
        }
        seg_grid_sync(bar);
        SEG_GT(3);
        // 4. Each block sorts whole buckets and stashes weight, |R| within the bucket and flag.
        for (u32 b = blockIdx.x; b < nbk; b += gridDim.x) {
            const u32 lo = s_bs[b], mm = s_bs[b + 1] - lo;
            const bool fits = mm <= SEG_GIANT_FIT;
            if (fits) {
                u32 pw = 64u;
                while (pw < mm) pw <<= 1;
                for (u32 e = tid; e < pw; e += bd) {
                    skey[e] = e < mm ? __ldcg(&bk[lo + e]) : SEG_NO_EDGE;
                    sid[e] = e < mm ? __ldcg(&bi[lo + e]) : SEG_NONE;
                }
                __syncthreads();
                seg_sort_chunk(skey, sid, pw);
            } else {
                // One part holds more than SEG_GIANT_HALF members: radix passes over the digits
                // where its keys differ, half B <-> half A, the result back in half B.
                u64 bmn = SEG_NO_EDGE, bmx = 0;
                for (u32 e = tid; e < mm; e += bd) {
                    const u64 key = __ldcg(&bk[lo + e]);
                    bmn = key < bmn ? key : bmn;
                    bmx = key > bmx ? key : bmx;
                }
                seg_block_minmax(bmn, bmx, sred);
                __syncthreads();
                // Bucket 0 holds the mutual pair (equal keys, ordered by id).
                if (seg_radix_sort(bk + lo, bi + lo, ak + lo, ai + lo, mm, bmn, bmx, (u32*)s_raw, lo == 0)) {
                    for (u32 e = tid; e < mm; e += bd) {
                        bk[lo + e] = __ldcg(&ak[lo + e]);
                        bi[lo + e] = __ldcg(&ai[lo + e]);
                    }
                }
                __syncthreads();
            }
            // Two members a thread a step: size, own threshold, weight; a block scan for |R|.
            u32 carry = 0;
            for (u32 c0 = 0; c0 < mm; c0 += 2u * bd) {
                u32 sz[2] = {0u, 0u}, c[2] = {0u, 0u};
                u64 key[2] = {0ull, 0ull};
                double w[2] = {0.0, 0.0}, ci[2] = {0.0, 0.0};
#pragma unroll
                for (u32 u = 0; u < 2; ++u) {
                    const u32 e = c0 + 2u * tid + u;
                    if (e < mm) {
                        key[u] = fits ? skey[e] : __ldcg(&bk[lo + e]);
                        c[u] = fits ? sid[e] : __ldcg(&bi[lo + e]);
                    }
                }
#pragma unroll
                for (u32 u = 0; u < 2; ++u) {
                    const u32 e = c0 + 2u * tid + u;
                    if (e < mm) {
                        sz[u] = size[c[u]];
                        if (mode == SEG_MODE_MERGE) ci[u] = cint[c[u]];
                        if (lo + e >= 1) w[u] = w4[seg_eid(key[u], eb)];
                    }
                }
                u32 step_total;
                const u32 x = seg_block_scan(sz[0] + sz[1], &step_total);
#pragma unroll
                for (u32 u = 0; u < 2; ++u) {
                    const u32 e = c0 + 2u * tid + u;
                    if (e < mm) {
                        const u32 g = lo + e;
                        // merge: the member's own threshold fails; min_size: it is not small,
                        // so the step needs |R| < min_size
                        const bool flag = mode == SEG_MODE_MERGE
                                              ? g >= 1 && !(w[u] < (double)seg_thr(ci[u], k, sz[u]))
                                              : sz[u] >= min_size;
                        ak[g] = (u64)__double_as_longlong(w[u]);
                        ai[g] = (carry + x + (u == 1 ? sz[0] : 0u)) | (flag ? SEG_XS_FAIL : 0u);
                        if (fits) bk[g] = key[u], bi[g] = c[u];
                    }
                }
                carry += step_total;
            }
            if (tid == 0) bsum[b] = carry;
            __syncthreads();
        }
        seg_grid_sync(bar);
        SEG_GT(4);
        // 5. Every step: |R| = the bucket's carry + the stash; the least failing step.
        u32* bcarry = (u32*)s_raw;  // exclusive sums of the buckets' sizes, s_raw[nbk] = |all|
        {
            const u32 v0 = j0 < nbk ? __ldcg(&bsum[j0]) : 0u, v1 = j1 < nbk ? __ldcg(&bsum[j1]) : 0u;
            u32 all;
            const u32 x = seg_block_scan(v0 + v1, &all);
            bcarry[j0] = x;
            bcarry[j1] = x + v0;
            if (tid == 0) {
                bcarry[SEG_GIANT_BINS] = all;
                s_fail = cnt;
            }
            __syncthreads();
        }
        const double int_a = cint[a];
        // The step at position g (g >= 1) of bucket b: whether each side's threshold holds.
        auto step = [&](u32 b, u32 g, bool& ok_c, bool& ok_r, u32& rs) {
            const u32 x = __ldcg(&ai[g]);
            rs = bcarry[b] + (x & ~SEG_XS_FAIL);
            if (mode == SEG_MODE_MERGE) {
                const double w = __longlong_as_double((long long)__ldcg(&ak[g]));
                const double ir = g == 1 ? int_a : __longlong_as_double((long long)__ldcg(&ak[g - 1]));
                ok_c = (x & SEG_XS_FAIL) == 0;
                ok_r = w < (double)seg_thr(ir, k, rs);
            } else {
                ok_c = ok_r = (x & SEG_XS_FAIL) == 0 || rs < min_size;
            }
        };
        for (u32 b = blockIdx.x; b < nbk; b += gridDim.x) {
            const u32 lo = s_bs[b], hi = s_bs[b + 1];
            for (u32 g = lo + tid; g < hi; g += bd) {
                if (g == 0) continue;
                bool ok_c, ok_r;
                u32 rs;
                step(b, g, ok_c, ok_r, rs);
                if (!(ok_c && ok_r)) {
                    atomicMin(&s_fail, g);
                    break;  // later steps of this thread's bucket fail later
                }
            }
        }
        __syncthreads();
        if (tid == 0 && s_fail < cnt) atomicMax(&gs[3], (u64)(cnt - s_fail));
        seg_grid_sync(bar);
        SEG_GT(5);
        // 6. The members before the first failing step join; the step's side(s) freeze.
        const u32 f = cnt - (u32)__ldcg(&gs[3]);
        for (u32 g = gtid; g < f; g += nthreads) {
            if (g >= 1) {
                seg_join(link, done, round, __ldcg(&bi[g]), a, r);
                ++ev;
                ++mg;
            }
        }
        if (gtid == 0) {
            u32 rs = bcarry[SEG_GIANT_BINS];
            if (f < cnt) {
                u32 b = 0;  // the bucket of position f: the last start at most f
                for (u32 lo2 = 0, hi2 = nbk; lo2 < hi2;) {
                    const u32 mid = (lo2 + hi2) >> 1;
                    if (s_bs[mid] <= f) {
                        b = mid;
                        lo2 = mid + 1;
                    } else {
                        hi2 = mid;
                    }
                }
                bool ok_c, ok_r;
                step(b, f, ok_c, ok_r, rs);
                ev += seg_freeze(done, mode, __ldcg(&bi[f]), a, ok_c, ok_r);
            }
            size[a] = rs;
            if (mode == SEG_MODE_MIN_SIZE) done[a] = rs >= min_size;
            if (mode == SEG_MODE_MERGE && f >= 2) cint[a] = __longlong_as_double((long long)__ldcg(&ak[f - 1]));
            tcnt[t] = 0;
            atomicAdd(gcnt, 1u);
        }
        if (SEG_CAT_TRACE && blockIdx.x == 0 && tid == 0)
            printf("GIANT r=%u cnt=%u nbk=%u f=%u stage=%llu count=%llu scatter=%llu sort=%llu steps=%llu\n", r, cnt, nbk,
                   cnt - (u32)__ldcg(&gs[3]), gt[1] - gt[0], gt[2] - gt[1], gt[3] - gt[2], gt[4] - gt[3], gt[5] - gt[4]);
        // Scratch back to zero for the next tree.
        for (u32 j = gtid; j < 3u * SEG_GIANT_BINS; j += nthreads) hist[j] = 0;
        if (gtid == 0) gs[1] = gs[2] = gs[3] = 0;
        seg_grid_sync(bar);
        SEG_GT(6);
    }
    seg_count(ctl, mctl, r, ev, mg);
#undef SEG_GT
}

// The last rounds of a phase (segment_finish, segment_finish_grid): every step of a round (the
// same device functions as the round kernels, their grid-stride loops running over this grid),
// a barrier between steps (the block's, or with GRID the grid's), until a round changes nothing
// or its frontier exceeds `limit`. The caterpillars of the four sizes touch disjoint trees, so
// they follow each other without a grid barrier (only the block's, for their shared memory).
// Every block reads the same counters after the same barrier, so all leave the loop together.
// It reads what its own earlier steps wrote, so its loads must not take the non-coherent path
// that the round kernels' const __restrict__ parameters allow: its pointers come from a plain
// struct, and tests/kernels_compile.rs checks the PTX of both kernels has no ld.global.nc.
template <bool GRID>
__device__ __forceinline__ void seg_finish_rounds(const SegFinish& a) {
    const u32 N = a.nctl;
    u32* C = a.p.counts;
    u32* bar = a.p.info + SEG_INFO_BAR;
#define SEG_FIN_SYNC()              \
    do {                            \
        if (GRID) seg_grid_sync(bar); \
        else __syncthreads();       \
    } while (0)
    u32 from = (!GRID && a.resume) ? a.p.info[SEG_INFO_RESUME] : a.from;
    u32 r = from;
    for (; r <= a.last; ++r) {
        if (r > from) SEG_FIN_SYNC();
        u32 gate = r - 1;
        if (a.p.ctl[gate] == 0) break;                          // the phase converged
        if (C[SEG_C_FRONTIER * N + gate] > a.limit) break;    // left to the launched rounds
        if (GRID && C[SEG_C_FRONTIER * N + gate] <= a.solo) break;  // left to segment_finish
        u32 cur = (r - a.first) & 1u;
        u32 *fin = cur ? a.p.flist[0] : a.p.flist[1], *fout = cur ? a.p.flist[1] : a.p.flist[0];
        u32 *rin = cur ? a.p.rlist[0] : a.p.rlist[1], *rout = cur ? a.p.rlist[1] : a.p.rlist[0];
        u32 *fcin = C + SEG_C_FRONTIER * N + gate, *fcout = C + SEG_C_FRONTIER * N + r;
        u32 *rcin = C + SEG_C_ROOTS * N + gate, *rcout = C + SEG_C_ROOTS * N + r;
        u32 *hcount = C + SEG_C_TREES * N + r, *xcount = C + SEG_C_MEMBERS * N + r;
        u32 *scount = C + SEG_C_SMALL * N + r, *bcount = C + SEG_C_LARGE * N + r;
        u32 *cursor = C + SEG_C_CURSOR * N + r, *tcount = C + SEG_C_TINY * N + r;
        u32* mcount = C + SEG_C_MID * N + r;
        seg_least_body<SEG_BATCH_TAIL>(a.p.comp, a.p.link, a.p.w4, a.p.best, a.p.done, a.p.target, a.p.tkey, a.p.order, a.width, a.height,
                       a.eb, a.mode, a.p.ctl, gate, 1u, fin, *fcin, fout, fcout);
        SEG_FIN_SYNC();
        seg_targets_body(a.p.comp, a.p.link, a.p.best, a.p.tkey, a.p.target, a.p.tree, a.p.exitk, a.p.done, a.width, a.n, a.eb,
                         a.mode, a.p.ctl, a.p.mctl, gate, r, 1u, rin, *rcin, rout, rcout, false);
        SEG_FIN_SYNC();
        seg_trees_body(a.p.target, a.p.tree, a.p.done, a.mode, a.p.tcnt, a.p.hlist, hcount, a.p.ctl, gate, rout, *rcout);
        SEG_FIN_SYNC();
        // Exits and the trees' ranges touch different words: no barrier between them.
        seg_exits_body<SEG_BATCH_TAIL>(a.p.comp, a.p.link, a.p.w4, a.p.done, a.p.target, a.p.tree, a.p.order, a.p.exitk, a.width, a.eb, a.mode, a.p.ctl,
                       gate, fout, *fcout, false);
        seg_alloc_body(a.p.tcnt, a.p.joff, cursor, a.p.done, a.mode, a.p.jarr, a.p.tkey, a.p.ctl, gate, a.p.hlist,
                       *hcount);
        SEG_FIN_SYNC();
        seg_core_body(a.p.target, a.p.tree, a.p.best, a.p.tkey, a.p.exitk, a.p.done, a.mode, a.p.tcnt, a.p.joff, a.p.jarr,
                      xcount, a.p.tlist, tcount, a.p.slist, scount, a.p.mlist, mcount, a.p.blist, bcount, a.p.ctl,
                      a.p.mctl, gate, rout, *rcout, a.p.link, a.p.size, a.p.round, r, a.zlim);
        SEG_FIN_SYNC();
        // The caterpillars (SEG_CAT_PASS names): tiny and small trees, then each larger one by
        // a whole block.
        u32* link = a.p.link;
        seg_done_t* done = a.p.done;
        u32* size = a.p.size;
        double* cint = a.p.cint;
        const u64* tkey = a.p.tkey;
        u64* tcnt = a.p.tcnt;
        const u32* joff = a.p.joff;
        const u32* jarr = a.p.jarr;
        u16* round = a.p.round;
        const double* w4 = a.p.w4;
        u32 eb = a.eb, mode = a.mode, min_size = a.min_size, n = a.n;
        double k = a.k;
        u32 *ctl = a.p.ctl, *mctl = a.p.mctl;
        u64* scr_k = a.p.scr_k;
        u32* scr_i = a.p.scr_i;
        const u32* list = a.p.tlist;
        const u32* lcount = tcount;
        u32* gcnt = C + SEG_C_GIANT * N + r;
        seg_cat_tiny_body(SEG_CAT_PASS, *lcount);
        list = a.p.slist;
        lcount = scount;
        seg_cat_warp_body(SEG_CAT_PASS, *lcount);
        __syncthreads();
        list = a.p.mlist;
        lcount = mcount;
        seg_cat_blocks<SEG_CAT_CAP, true, false, false, SEG_FIN_BUCKET != 0>(SEG_CAT_PASS);
        __syncthreads();
        list = a.p.blist;
        lcount = bcount;
        seg_cat_blocks<SEG_CAT_CAP, true, false, false, SEG_FIN_BUCKET != 0>(SEG_CAT_PASS);
    }
    SEG_FIN_SYNC();
#undef SEG_FIN_SYNC
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        a.p.info[a.info_slot] = (r <= a.last && a.p.ctl[r - 1] != 0) ? 1u : 0u;
        if (GRID) a.p.info[SEG_INFO_RESUME] = r;
    }
}

// The last rounds of a phase in one block of SEG_CAT_THREADS threads (seg_finish_rounds). The
// launched rounds before it are the adaptive caps (src/ops/segment/gpu.rs), so the tail of
// small rounds costs no launches and no gated empty rounds, and a frame that needs a few more
// rounds than its caps is finished here instead of run again. One block is sure to be resident
// wherever it runs; segment_finish_grid is the same over a whole cooperative grid.
extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segment_finish(SegFinish a) {
    grid_dep_wait();
    seg_finish_rounds<false>(a);
}

// The same rounds over a cooperative grid (every block resident, seg_grid_sync between steps):
// 8 grid barriers a round instead of 11 launches, and a whole GPU instead of one block's serial
// loops. It stops at the first round with at most `solo` frontier pixels, which it leaves to
// segment_finish launched after it with `resume` (one block's barriers are cheaper there).
extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segment_finish_grid(SegFinish a) {
    seg_finish_rounds<true>(a);
}

// Start of the min_size phase: no component is done, and every pixel's cursor goes back to its
// first edge (edges to components that were done are alive again). Bit 0 of the flags says
// instead whether a root is at least min_size (what the edge scans read).
// With `lists` (SEG_LIST for the phase's first round) it also resolves every pixel's component
// once and lists the pixels of components smaller than min_size (flist / *fcount) and those
// components' roots (rlist / *rcount): the phase's first round then scans the ~4 % of the pixels
// that can merge instead of all of them (a component of at least min_size takes no edge, SEG_MS_SINK).
// The roots left off the root list keep their last target (read nowhere: a walk stops at a sink
// before its target) and an unset tree (segment_core clears every tree it saw set).
extern "C" __global__ void segment_reset_done(seg_done_t* done, u32* order, const u32* __restrict__ size,
                                              u32 min_size, u32 n, u32* comp, const u32* __restrict__ link,
                                              u32* flist, u32* fcount, u32* rlist, u32* rcount, u32 lists) {
    grid_dep_launch();
    grid_dep_wait();
    SEG_BLOCK_LOOP(i, n) {
        bool px_small = false, root_small = false;
        if (i < n) {
            u32 fl = done[i], si = size[i];
            bool root = (fl & SEG_JOINED) == 0;
            // Bit 0 is read at roots only; the joined bit stays.
            done[i] = (fl & SEG_JOINED) | (si >= min_size ? 1u : 0u);
            order[i] &= ~(15u << 24);
            if (lists) {
                u32 c = seg_find(link, comp[i]);  // link does not change here
                comp[i] = c;
                // Without sinks every component takes edges: everything is listed.
                px_small = !SEG_MS_SINK || (c == i ? si : size[c]) < min_size;
                root_small = root && (!SEG_MS_SINK || si < min_size);
            }
        }
        if (lists) seg_append_pair(flist, fcount, px_small, i, rlist, rcount, root_small, i);
    }
}

// The relabelling kernels (and segment_reset_done) start with grid_dep_launch / grid_dep_wait:
// the host launches them as programmatic dependent launches like the round kernels, so each
// one's blocks are scheduled while the kernel before it drains.
extern "C" __global__ void segment_final(u32* comp, const u32* __restrict__ link, u32* minpix, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        comp[p] = seg_find(link, comp[p]);
        minpix[p] = SEG_NONE;
    }
}

extern "C" __global__ void segment_minpix(const u32* __restrict__ comp, u32* minpix, u32 width, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 c = comp[p];
        // The first raster pixel of a segment starts a run: its left neighbour is elsewhere.
        if (p % width == 0 || comp[p - 1] != c) atomicMin(&minpix[c], p);
    }
}

extern "C" __global__ void segment_scan_count(const u32* __restrict__ comp, const u32* __restrict__ minpix,
                                              u32* blocksum, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    int flag = (p < n && minpix[comp[p]] == p) ? 1 : 0;
    int c = __syncthreads_count(flag);
    if (threadIdx.x == 0) blocksum[blockIdx.x] = (u32)c;
}

extern "C" __global__ void segment_scan_blocks(u32* blocksum, u32 nblocks, u32* info) {
    grid_dep_launch();
    grid_dep_wait();
    u32 carry = 0;
    for (u32 base = 0; base < nblocks; base += blockDim.x) {
        u32 i = base + threadIdx.x;
        u32 v = i < nblocks ? blocksum[i] : 0;
        u32 total;
        u32 ex = seg_block_scan(v, &total);
        if (i < nblocks) blocksum[i] = carry + ex;
        carry += total;
    }
    if (threadIdx.x == 0) info[0] = carry;
}

extern "C" __global__ void segment_scan_label(const u32* __restrict__ comp, const u32* __restrict__ minpix,
                                              const u32* __restrict__ blocksum, u32* rootlabel, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    bool flag = p < n && minpix[comp[p]] == p;
    u32 total;
    u32 ex = seg_block_scan(flag ? 1u : 0u, &total);
    if (flag) rootlabel[comp[p]] = blocksum[blockIdx.x] + ex;
}

extern "C" __global__ void segment_labels(const u32* __restrict__ comp, const u32* __restrict__ rootlabel,
                                          u32* labels, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    for (u32 p = global_tid(); p < n; p += global_threads()) labels[p] = rootlabel[comp[p]];
}

// Global round number of hierarchy level `level` (rounds that merged; 0: none; past the last
// level: the last) into info[1].
extern "C" __global__ void segment_level_threshold(const u32* __restrict__ mctl, u32 rounds_total, u32 level,
                                                   u32* info) {
    if (global_tid() != 0) return;
    u32 k = 0, thr = 0;
    for (u32 r = 1; r <= rounds_total; ++r) {
        if (mctl[r] != 0) {
            ++k;
            if (k <= level) thr = r;
        }
    }
    info[1] = thr;
}

extern "C" __global__ void segment_level_comp(u32* comp, const u32* __restrict__ link,
                                              const u16* __restrict__ round, u32* minpix,
                                              const u32* __restrict__ info, u32 n) {
    u32 thr = info[1];
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 v = p;
        while ((u32)round[v] <= thr) v = link[v];
        comp[p] = v;
        minpix[p] = SEG_NONE;
    }
}

// Development diagnostic (SegmentGpu::round_stamps): the global timer after everything before
// it on the stream, in stamps[i].
extern "C" __global__ void segment_stamp(u64* stamps, u32 i) {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    stamps[i] = t;
}
