// The list appends every round kernel uses (a block's entries with one atomicAdd), the round
// counters' reset (segmentation_init), the frontier scans' batched edge walks, and steps 1-2 of a
// round (Baranwal et al. section 3.1 steps 1-2, Algorithms 2-3: the least alive edge of every
// active component, by an atomicMin of its pixels' keys; step 2 (Algorithm 5, the targets) as
// the finishers run it; the launched rounds fuse it with step 3, see trees.cuh). Thread
// mapping: block-uniform grid-stride loops of 256-thread blocks over every pixel or a list.
// Memory: best[root] the component's least key, tkey / target its key and far root, order[p]
// the pixel's sorted edges and cursor; lists of pixel ids with their counts in `counts`.
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// Whether the edge from component c to component e != c... is alive (fe: e's flag byte): merge
// rounds, e is not frozen; min_size rounds, not both sides at least min_size (`big`: c is; bit
// 0 of e's flag says whether e is).
__device__ __forceinline__ bool seg_alive(u32 mode, u32 c, u32 e, bool big, u32 fe) {
    if (e == c) return false;
    if (mode == SEG_MODE_MERGE) return (fe & 1u) == 0;
    return !(big && (fe & 1u) != 0);
}

// Pixel i as a component of its own, before the merge rounds (segmentation_tiles, as it reads the
// pixel).
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

// The round counters back to their start: the gate ctl[0] open, every round's events, merges and
// list counts zero. (Every pixel's words, its cursor included, are set up by segmentation_tiles as it
// reads the pixel: a frame run again starts from the cursors its first run left.)
extern "C" __global__ void segmentation_init(u32* ctl, u32* mctl, u32* counters, u32 nctl, u32 ncounters) {
    for (u32 i = global_tid(); i < nctl || i < ncounters; i += global_threads()) {
        if (i < ncounters) counters[i] = 0;
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
// rounds take ~2 M entries, and a warp-aggregated append would serialise ~65 000 atomics on one
// counter. Every thread of the block must call it the same number of times (block-uniform
// loops, see SEG_BLOCK_LOOP); the block size is at most 1024.
// One warp turns the block's per-warp counts cnt[0 .. warps) into each warp's offset in the
// list, base included (an inclusive scan by shuffles, not one thread's loop over the counts;
// lane 0 takes the block's range with one atomicAdd).
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
// barriers and the two atomicAdds side by side instead of one after the other.
__device__ __forceinline__ void seg_append_pair(u32* l0, u32* c0, bool k0, u32 id0, u32* l1, u32* c1, bool k1,
                                                u32 id1) {
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
// Batches of 4 measured slower than 2 (a batch's four neighbours lie in three rows: most of the
// L2 sectors it loads are wasted), and 3 slower than 4.
#define SEG_BATCH_DENSE 2              // edges a batch in the dense rounds (traffic-bound)
#define SEG_BATCH_TAIL 2               // edges a batch in the tail rounds and the finishers (latency-bound)
#define SEG_BATCH_DENSE_MIN 131072u    // list length above which a scan counts as dense

// The neighbours q[j], edge ids and comp[q] entries of pixel p's edges cur + j (j < B,
// cur + j < cnt) in key order: the first half of seg_batch, which the frontier scans issue early
// (speculative loads, see seg_ld_weight) beside the loads of the pixel's own root.
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

// Speculative loads: issued before the pixel's (or root's) own lookups decide whether they are
// needed, in the launched kernels: segmentation_exits' first batch of neighbour entries and the
// weight of the edge at the cursor, beside the pixel's target and tree. Only for lists of at most SEG_SPEC_MAX entries:
// there a kernel waits on its chain of dependent loads, while the dense rounds are bound by
// their traffic, which unused loads would add to. Not in segmentation_least (its 32 registers would
// spill) nor in the finishers (their spills grow by half).
#define SEG_SPEC_MAX 131072u  // longest list the launched scans load speculatively for

// A weight loaded early (speculatively): plain `ld.global` in an asm statement, which the compiler
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

// atomicMin of a per-component key by many pixels (the frontier scans): a plain load first, and
// no atomic when the stored key is already at most `key` (same-address atomics from many
// pixels, not the lookups, were the scans' hidden cost).
// A tree's counts in one word (tcnt[tree], 0 between rounds): the low half counts its core
// members (their slots: segmentation_core; a sink's tree starts at 1, its slot 0 is the sink:
// segmentation_alloc), the high half its members not yet counted off (the tree walk counts them in,
// segmentation_core out). One atomicAdd a warp and tree in segmentation_core takes the warp's slots and
// counts its members off at once, so the group that takes the high half to 0 knows the core's
// size from the same atomic.
#define SEG_TCNT_MEMBER (1ull << 32)

__device__ __forceinline__ void seg_atomic_min(u64* slot, u64 key) {
    if (*(volatile u64*)slot <= key) return;
    atomicMin(slot, key);
}

// Whether root c (flag fc) keeps last round's least edge (SEG_KEEP_BIT): it was outside its tree's
// core then, and the far side's root has not frozen since (it cannot be c: c absorbed nothing).
// segmentation_least and the targets step decide alike: nothing between them changes flags or links.
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
// Algorithms 2 and 3). Iterates all pixels (use_list SEG_ALL: merge round 2, after
// segmentation_tiles) or in_list[0..*in_count] (SEG_LIST); writes the frontier of this round (pixels
// with an alive edge) to out_list / *out_count.
template <u32 B>
__device__ __forceinline__ void seg_least_body(u32* comp, const u32* __restrict__ link, const double* __restrict__ w4,
                                               u64* best, const seg_done_t* __restrict__ done,
                                               const u32* __restrict__ target, const u64* __restrict__ tkey,
                                               u32* order, u32 width,
                                               u32 height, u32 eb, u32 mode, const u32* __restrict__ ctl, u32 gate,
                                               u32 use_list,
                  const u32* __restrict__ in_list, u32 in_n, u32* out_list, u32* out_count) {
    u32 count = use_list == SEG_LIST ? in_n : width * height;
    SEG_BLOCK_LOOP(i, count) {
        bool in = i < count;
        u32 p = in ? (use_list == SEG_LIST ? in_list[i] : i) : 0u;
        u64 bk = SEG_NO_EDGE;
        u32 c = SEG_NONE;
        bool kept = false;
        if (in) {
            u32 c0 = comp[p];
            u32 o = order[p];
            u32 cur = SEG_ORD_CUR(o), cnt = SEG_ORD_CNT(o), start = cur;
            u32 fc;
            c = seg_root_flag(link, done, c0, fc);
            if (c != c0) comp[p] = c;
            bool active = (fc & 1u) == 0;
            if (active && mode == SEG_MODE_MERGE && seg_kept(link, done, target, c, fc)) {
                bk = tkey[c];
                kept = true;
            }
            if (active && !kept) {
                // The first alive edge from the cursor in key order is the pixel's least; dead
                // ones before it are skipped for good (see segmentation_edges).
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
        // A kept component's key is taken by the targets step itself (no atomic here).
        if (bk != SEG_NO_EDGE && !kept) seg_atomic_min(&best[c], bk);
        seg_append_block(out_list, out_count, bk != SEG_NO_EDGE, p);
    }
}

// The gate word of a round kernel and the count its body reads first, loaded together (one
// L2 round trip at every launch instead of two: in the tail rounds a kernel's few items wait on
// a chain of dependent loads, and these two used to start it); the body takes the count as a
// value (the finishers pass what they read).
__device__ __forceinline__ u32 seg_gate(const u32* ctl, u32 gate, const u32* count, u32& cnt) {
    u32 g;
    asm volatile("ld.global.u32 %0, [%2];\n\tld.global.u32 %1, [%3];"
                 : "=r"(g), "=r"(cnt)
                 : "l"(ctl + gate), "l"(count)
                 : "memory");
    // The exit test reads both words (a count never reaches 2^31), so ptxas cannot sink the
    // count's load below it.
    return g | (cnt >> 31);
}

// A round kernel's prologue: lets the next round kernel start (ExLaunch; it waits for this
// one), waits for the one before, then reads the gate and the count its body starts from
// (seg_gate). False: the phase converged in an earlier round, nothing to do.
__device__ __forceinline__ bool seg_round_start(const u32* ctl, u32 gate, const u32* count, u32& cnt) {
    grid_dep_launch();
    grid_dep_wait();
    return seg_gate(ctl, gate, count, cnt) != 0;
}

// Blocks an SM keeps of segmentation_least: 8 caps it at 32 registers, the whole SM's 64 warps (the
// kept-edge path would otherwise take 40 registers and 48 warps an SM; 40 measured slower).
#define SEG_LEAST_BLOCKS 8
extern "C" __global__ void __launch_bounds__(256, SEG_LEAST_BLOCKS)
    segmentation_least(u32* comp, const u32* __restrict__ link, const double* __restrict__ w4, u64* best,
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
// load together, and link is followed only for a stale entry.
__device__ __forceinline__ u32 seg_far_root(const u32* __restrict__ comp, const u32* __restrict__ link,
                                            const seg_done_t* done, u32 width, u32 eb, u64 key, u32 v) {
    const u32 eid = seg_eid(key, eb);
    const u32 pa = eid >> 2, pb = seg_other(eid, width);
    const u32 ca = comp[pa], cb = comp[pb];
    const u32 fa = done[ca], fb = done[cb];
    const u32 ra = (fa & SEG_JOINED) ? seg_find(link, ca) : ca;
    const u32 rb = (fb & SEG_JOINED) ? seg_find(link, cb) : cb;
    return ra == v ? rb : ra;
}

// Step 2 in the finishers (the launched rounds fuse it with step 3: segmentation_targets_trees):
// targets of the previous round's active roots: the far component of the least alive edge (the
// paper's Algorithm 5 'sources'); a root without alive edges is done in merge rounds. Resets the
// root's exit (its tree and least key are clear already: segmentation_core clears them after their
// last use, segmentation_tiles sets them up); the roots that stay active go to out_list / *out_count.
__device__ __forceinline__ void seg_targets_body(const u32* __restrict__ comp, const u32* __restrict__ link, u64* best,
                                                 u64* tkey, u32* target, u64* exitk, seg_done_t* done, u32 width,
                                                 u32 eb, u32 mode, u32* ctl, u32* mctl, u32 r,
                                                 const u32* __restrict__ in_list, u32 in_n, u32* out_list,
                                                 u32* out_count) {
    u32 ev = 0;
    SEG_BLOCK_LOOP(i, in_n) {
        bool in = i < in_n, keep = false;
        u32 v = in ? in_list[i] : 0u;
        // The root's words are loaded together, then both ends of its edge (latency-bound).
        u64 key = in ? best[v] : SEG_NO_EDGE;
        u32 fv = in ? (u32)done[v] : 1u;
        bool root = in && (fv & SEG_JOINED) == 0;
        u32 dv = fv & 1u;
        // A kept component's pixels left best alone (SEG_KEEP_BIT): its key is last round's.
        if (root && mode == SEG_MODE_MERGE && dv == 0 && seg_kept(link, done, target, v, fv)) key = tkey[v];
        if (root) {
            target[v] = SEG_NONE;
            exitk[v] = SEG_NO_EDGE;
            if (dv == 0) {
                if (key == SEG_NO_EDGE) {
                    if (mode == SEG_MODE_MERGE) {
                        done[v] = 1;
                        ++ev;
                    }
                } else {
                    tkey[v] = key;
                    target[v] = seg_far_root(comp, link, done, width, eb, key, v);
                    keep = true;
                }
            }
        }
        seg_append_block(out_list, out_count, keep, v);
    }
    seg_count(ctl, mctl, r, ev, 0);
}
