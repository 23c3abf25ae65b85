// Step 6 for trees of more than 32 core members, a block a tree (seg_cat_blocks: 256 threads a
// mid-size tree in segmentation_cat_mid and segmentation_cat_small_mid, 1024 a large tree in
// segmentation_cat_block and _g and in the finishers): the core in chunks of at most 2048 members in
// key order, each chunk evaluated at once with |R| and Int carried from the chunk before; then
// segmentation_cat_small(_mid), the fused launch of the tiny, small (and mid-size) trees.
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// Step 6, trees of more than 32 members: a block per tree (mlist up to SEG_CAT_MID_CAP members,
// blist above), the caterpillar in chunks of at most SEG_CAT_CAP members in key order
// (segmentation_cat_block and _g: from a whole-tree sort, see seg_whole_sort, else from a radix
// sort; the finishers: up to SEG_CAT_SORT members each chunk is selected (seg_select_range: a
// prefix of the remaining keys of at most SEG_CAT_CAP members; seg_select, the exact next
// SEG_CAT_CAP, where it cannot bound one), gathered into shared memory and sorted by a bitonic
// network sized to it; a larger tree is sorted once into scratch (seg_sort_tree: stable LSD
// radix passes over the digits where its keys differ) and read a chunk at a time. Each chunk is
// evaluated as by the lanes of segmentation_cat_small (a block scan for |R|, a shared minimum for
// the first failing step) with |R| and Int carried over from the previous chunk; the tree stops
// at its first failing step, so one round covers the whole core exactly as the CPU model does.
// The caterpillars of the trees in `list` by blocks of CAP / 2 threads (chunks of CAP
// members). LARGE: trees may exceed CAP (chunks selected or the tree sorted, see above); else
// every tree fits one chunk (the mid-size trees). PROLOGUE: the kernel's own gate
// (seg_round_start); SKIP_GIANT: leave the trees above SEG_CAT_GIANT to segmentation_cat_giant;
// BUCKET: the bucket gather (seg_bucket_gather); WHOLE: the whole-tree sort; REVERSE: blocks take
// the trees from the grid's end.
template <u32 CAP, bool LARGE, bool PROLOGUE = true, bool SKIP_GIANT = false, bool BUCKET = true, bool WHOLE = false,
          bool REVERSE = false>
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
    constexpr bool WHOLE_ONLY = WHOLE && LARGE;
    u32 tid = threadIdx.x;
    u32 ev = 0, mg = 0;
    // REVERSE (segmentation_cat_small_mid): the grid's last block takes the first tree (the lanes
    // there take the tiny and small trees from the grid's first warps).
    for (u32 i = REVERSE ? gridDim.x - 1u - blockIdx.x : blockIdx.x; i < nb; i += gridDim.x) {
        u32 t = list[i];
        u32 cnt = (u32)tcnt[t], off = joff[t];
        // segmentation_cat_giant's trees (it zeroes their counts when it is done: 0 is one of its).
        if (SKIP_GIANT && (cnt > SEG_CAT_GIANT || cnt == 0)) continue;
        // A sink's tree (min_size rounds, SEG_SINK; of any size here, segmentation_core): every
        // member merges into the sink whatever the order, so no sort. The sink is the range's
        // first member (key 0, the least there is: a member with key 0 would be the far end of
        // edge 0, which always merges before any sink exists).
        if (!LARGE && SEG_SINK(mode, (u32)done[t])) {
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
        // The pair's smaller root, or the sink: first in key order, the component R grows from.
        // (the lanes of segmentation_cat_small take the first sorted member instead; they differ only if a sink
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
        // WHOLE: the whole tree sorted once in the launch's dynamic shared memory.
        bool whole = false;
        const u64* wk = nullptr;
        const u32* wi = nullptr;
        const u16* word = nullptr;
        if (WHOLE && LARGE) {
            const u32 W = seg_whole_cap();
            if (cnt <= W && W <= 65536u) {
                u64* sk = (u64*)seg_dyn;
                u32* si = (u32*)(seg_dyn + 8u * W);
                u16* ord = (u16*)(seg_dyn + 12u * W);
                whole = seg_whole_sort(tkey, jarr, off, cnt, sk, si, ord, ord + W, (u32*)s_raw, sred);
                wk = sk;
                wi = si;
                word = ord;
            }
        }
        while (taken < cnt) {
            u32 mm;
            u32 left = cnt - taken;
            if (LARGE && !whole && !sorted && (cnt > SEG_CAT_SORT || (WHOLE_ONLY && cnt > CAP))) {
                sorted = true;
                // A crowded tree of at most half the whole-tree area is radix-sorted there, in
                // shared memory (keys and ids twice: 24 bytes a member), else in scratch.
                const u32 W = WHOLE_ONLY ? seg_whole_cap() : 0u;
                const bool sm = WHOLE_ONLY && 2u * cnt <= W;
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
                // BUCKET: the chunk's keys are scattered to their parts of the range
                // seg_select_range counted (in key order part by part), so only keys sharing a
                // part need sorting.
                bool bucket = false;
                u64 base = 0;
                u32 shift = 0, last = 0;
                if (LARGE && !WHOLE_ONLY && (left > CAP || BUCKET)) {
                    // seg_select_range answers lo when it cannot bound a prefix (see there).
                    thr = seg_select_range(tkey, jarr, off, cnt, lo, all, CAP, (u32*)s_raw, sred, base, shift);
                    bucket = BUCKET && thr != lo;
                    if (thr == lo && left > CAP) thr = seg_select(tkey, jarr, off, cnt, lo, all, CAP, hist, &sprefix, &sneed);
                    if (thr == lo) thr = SEG_NO_EDGE;  // (no member above lo: cannot happen, left > 0)
                }
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
                if (unsorted) {
                    u32 pw = 64u;
                    while (pw < mm) pw <<= 1;
                    for (u32 e = mm + tid; e < pw; e += blockDim.x) {
                        skey[e] = SEG_NO_EDGE;
                        sid[e] = SEG_NONE;
                    }
                    __syncthreads();
                    seg_sort_chunk(skey, sid, pw);
                }
            }
            // |R| before each member: carry + block scan (two consecutive members a thread). A
            // thread loads its members' sizes, Ints and weights at once; the Int of R at a step
            // is the previous member's weight: the thread's own, the lane's before (shuffle) or
            // the warp's before (swl). The thread that holds the failing step freezes, the one
            // before it hands the carried weight on (s_cw): no loads after the scan.
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
            if (f < mm) break;
        }
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

extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segmentation_cat_block(SEG_CAT_ARGS) {
    seg_cat_blocks<SEG_CAT_CAP, true, true, false, true, true>(SEG_CAT_PASS);
}

// segmentation_cat_block beside segmentation_cat_giant: the trees above SEG_CAT_GIANT members are its.
extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segmentation_cat_block_g(SEG_CAT_ARGS) {
    seg_cat_blocks<SEG_CAT_CAP, true, true, true, true, true>(SEG_CAT_PASS);
}

// Trees of 33..SEG_CAT_MID_CAP members: one chunk each, by blocks a quarter the size, so four
// times as many trees are under way at once (rounds 4-6 of a 1080p photograph have ~600 such
// trees, ~100 members each).
extern "C" __global__ void __launch_bounds__(SEG_CAT_MID_THREADS) segmentation_cat_mid(SEG_CAT_ARGS) {
    seg_cat_blocks<SEG_CAT_MID_CAP, false>(SEG_CAT_PASS);
}

// Per-round list counts (src/ops/segmentation/gpu/tuning.rs C_*; kind * nctl + round).
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

// The tiny, small and (MID) mid-size trees' caterpillars in one launch of SEG_CAT_MID_THREADS
// threads a block (segmentation_cat_small in every launched round; segmentation_cat_small_mid from the
// round SegmentationTuning::mid_trees_fused_from on): the mid-size trees by blocks from the grid's
// end, then the tiny and small ones by the lanes of every warp from the grid's start. One
// launch and one branch a round instead of three. Its own list (SEG_CAT_ARGS) is the tiny
// trees'. (Leaving the blocks that walked mid-size trees out of the lanes' share was slower.)
template <bool MID>
__device__ __forceinline__ void seg_cat_small_body(SEG_CAT_ARGS, const u32* __restrict__ slist,
                                                   const u32* __restrict__ scount, const u32* __restrict__ mlist,
                                                   const u32* __restrict__ mcount) {
    u32 nt;
    if (!seg_round_start(ctl, gate, lcount, nt)) return;
    if (MID) {
        const u32* list = mlist;
        const u32* lcount = mcount;
        seg_cat_blocks<SEG_CAT_MID_CAP, false, false, false, true, false, true>(SEG_CAT_PASS);
    }
    seg_cat_lanes_tasks(SEG_CAT_PASS, nt, slist, *scount);
}

// Blocks an SM keeps of segmentation_cat_small (and _mid), which bounds the registers ptxas may use:
// 4 (64 registers, no spills); 6 (40 registers) spilled in _mid and was slower, 5 the same.
#define SEG_SMALL_BLOCKS 4
extern "C" __global__ void __launch_bounds__(SEG_CAT_MID_THREADS, SEG_SMALL_BLOCKS)
    segmentation_cat_small(SEG_CAT_ARGS, const u32* __restrict__ slist, const u32* __restrict__ scount,
                      const u32* __restrict__ mlist, const u32* __restrict__ mcount) {
    seg_cat_small_body<false>(SEG_CAT_PASS, slist, scount, mlist, mcount);
}

extern "C" __global__ void __launch_bounds__(SEG_CAT_MID_THREADS, SEG_SMALL_BLOCKS)
    segmentation_cat_small_mid(SEG_CAT_ARGS, const u32* __restrict__ slist, const u32* __restrict__ scount,
                          const u32* __restrict__ mlist, const u32* __restrict__ mcount) {
    seg_cat_small_body<true>(SEG_CAT_PASS, slist, scount, mlist, mcount);
}
