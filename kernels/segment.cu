// Felzenszwalb-Huttenlocher segmentation in GPU rounds, after the atomics-based Boruvka of
// Baranwal, Hoste, Rethy, Bouchiat, "Graph based image segmentation on the GPU" (ETH Zurich,
// section 3.1, Appendix A Algorithms 1-6: least outgoing edge per vertex, atomicMin per
// component on packed (weight, edge id) keys, mutual-edge cycle removal, predicate, parent
// update, flatten, sizes / Int(C) updated in place), plus the hierarchy of sections 2.2 /
// 3.2.3. Plain Boruvka evaluates the predicate out of Kruskal's order and leaks (whole frames
// collapse); the merge rounds here decide exactly the edges Kruskal would process next (mutual
// least edges, then "joiners" absorbed in key order below a limit), so the result equals a
// sequential Kruskal over the same keys. src/ops/segment/boruvka.rs is the CPU model of every
// kernel below (same f64/f32 operations, same round structure): keep the two in sync.
//
// Arithmetic is scikit-image's: the smoothed image is f64 (kernels/blur.cu blur_*_f64),
// weights are f64 Euclidean distances (w4[4p + dir]: dir 0 right, 1 down, 2 down-right,
// 3 down-left; +inf outside; edge id = 4p + dir), thresholds are f32(Int + k/|C|) compared with
// the f64 weight, Int is f64. Key = (top 64-e bits of the f64 weight bits) << e | id with
// e = ceil(log2(4n)) id bits: a total order that follows the weights (closer than ~2^-(63-e)
// relative they tie and the id decides). The graph is never stored as CSR.
//
// Setup: segment_init, segment_weights, segment_order (each pixel's 8 edges sorted by key once;
// the rounds walk them from a cursor past the edges that are dead for good).
// Phases (global round numbers r; every kernel first reads ctl[gate], the event count of the
// previous round of its phase, and returns when it is 0, so rounds after convergence cost one
// tiny launch each and nothing is read back by the host; on video the host replays the whole
// sequence as one captured CUDA graph, src/gpu/graph.rs):
//   zero rounds 1..32        Boruvka chains along zero-weight edges (always accepted by the
//                            predicate when k > 0 and they leave Int = 0: exact):
//                            segment_least, segment_targets, segment_chain_link,
//                            segment_chain_flatten.
//   merge rounds 33..        segment_least, segment_targets, segment_limits, segment_pairs,
//                            segment_push, segment_alloc, segment_scatter,
//                            segment_groups_plain, segment_groups_warp (exact Kruskal
//                            decisions, see boruvka.rs), then up to SUB_ROUNDS - 1 sub-rounds
//                            of segment_push_sub, segment_alloc, segment_scatter,
//                            segment_groups_warp (joiners of absorbed joiners; each gated on
//                            the merges of the pass before it, smerge[]).
//   min_size rounds          segment_reset_done, then the merge kernels in mode MIN_SIZE:
//                            scikit-image's second pass (an edge merges when either side is
//                            smaller than min_size), decided exactly the same way.
// Relabel: segment_final, segment_minpix (first pixel of each segment, at run starts only),
// a block scan of "first pixel" flags (segment_scan_*), segment_labels (raster order).
// segment_level_* extract any hierarchy level from (parent, round) the same way.
//
// Thread mapping: grid-stride loops (1-D blocks of 256, a fixed grid) over pixels or roots.
// A pixel v is a root iff link[v] == v. Exact rounds after the first of their phase run over
// two compacted lists rebuilt every round (warp-aggregated appends): the frontier (pixels of an
// active component with an alive edge; a pixel leaves it for good once interior or done) and
// the active roots. comp[] of pixels off the frontier goes stale; seg_find follows link to the
// root (link never changes inside a kernel that reads it this way) and segment_final resolves
// every pixel at the end. Joiners register (segment_push / segment_push_sub: a slot from an
// atomicAdd on their group's count) only when their key is below the group's limit, which is
// exactly what the group keeps of them; registration also lists the joiner (xlist) and, for a
// group's first joiner, the group (hlist); segment_alloc gives each listed group a contiguous
// range and lists its root for the warps, segment_scatter fills the ranges from xlist, and
// segment_groups_warp works on each listed group with a warp (32-thread blocks x 4 of them;
// 12 KB of shared memory a block).
// Event counts are reduced per warp before one atomicAdd (every lane reaches the reduction).
// The scan kernels use 1024-thread blocks and 32 words of shared memory.
// Border policy: neighbours outside the image are skipped (their +inf weights are never read).
//
// GPU notes (H100, 1080p building / fruits, k = 100 / 500; BENCHMARKS.md has every version):
// without sub-rounds 45-200 ms a frame (90-190 rounds of ~0.45 ms); 8 passes per round 39-142
// ms; compacting the pending components per pass, or walking only the absorbed components'
// children, made it slower; loading the joiners' data one iteration ahead 38-132 ms; 4 passes
// 32-130 ms. Nsight Compute then: a thread-per-group pass ran 150-260 us at 7-10 % achieved
// occupancy - as long as its slowest group (lists up to 1400 joiners at k = 500, 64 dependent
// absorption steps). A warp per group with joiners (bitonic top-64, parallel loads, decisions
// from shared memory; predicted 3-5x on those passes): 24-43 ms, the absorption passes 3-5x
// cheaper as predicted; then the frontier passes were ~60 % of a frame at 1080p, ~75 % at 4K.
// Nsight Compute on segment_least / limits: 250-370 us per early round at 19-25 % of DRAM
// bandwidth and 67 % occupancy - latency-bound on 8 dependent neighbour lookups per pixel.
// Replaying the frame as a CUDA graph: 24.4 -> 22.9 ms, host enqueue 19 -> 0.1 ms (the headless
// clip run, 50 fps with direct launches of an earlier version, now 110-120 fps). Sorted edge
// order + cursor (predicted
// 2-3x on least/limits): least edges 6.3 -> 4.9 ms, limits ~10 % cheaper, whole frame 22.9 ->
// 21.2 ms - the walk stops early, but the finds and the atomicMin per frontier pixel remain.
// Joiner lists instead of alloc/scatter passes over every active root: 21.2 -> 20.7 ms.
// Grid of 4 / 8 / 16 blocks per SM for the grid-stride kernels: 21.3 / 20.6 / 20.9 ms (8 kept).
#include "common/util.cuh"

#define SEG_NO_EDGE 0xffffffffffffffffull
#define SEG_NONE 0xffffffffu
#define SEG_NEVER 0xffffu
#define SEG_JOIN_BUFFER 64  // two per lane in segment_groups_warp: the bitonic network is for 64

#define SEG_MODE_MERGE 0u
#define SEG_MODE_MIN_SIZE 1u
#define SEG_MODE_ZERO 2u

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

extern "C" __global__ void segment_weights(const double* __restrict__ s, double* __restrict__ w4, u32 width,
                                           u32 height, u32 channels) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    u32 p = y * width + x;
    const double inf = __longlong_as_double(0x7ff0000000000000ll);
    bool right = x + 1 < width, down = y + 1 < height, left = x > 0;
    double* o = w4 + (size_t)p * 4;
    o[0] = right ? seg_dist(s, channels, p, p + 1) : inf;
    o[1] = down ? seg_dist(s, channels, p, p + width) : inf;
    o[2] = (right && down) ? seg_dist(s, channels, p, p + width + 1) : inf;
    o[3] = (left && down) ? seg_dist(s, channels, p, p + width - 1) : inf;
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

__device__ __forceinline__ void seg_cswap(u64& ka, u32& da, u64& kb, u32& db) {
    if (kb < ka) {
        u64 tk = ka; ka = kb; kb = tk;
        u32 td = da; da = db; db = td;
    }
}

// Sorts every pixel's (up to) 8 incident edges by key once a frame (a 19-comparator network in
// registers) into order[p], cursor 0. The rounds then walk a pixel's edges from its cursor in
// key order and stop at the first alive one: the pixel's least alive edge, usually after one or
// two neighbour lookups instead of eight. An edge that is dead (both ends in one component, or
// the far side done, or in min_size rounds both sides large) stays dead for the rest of its
// phase, so the cursor only moves forward (segment_reset_done rewinds it for the min_size
// phase, which revives edges to done components).
extern "C" __global__ void segment_order(const double* __restrict__ w4, u32* order, u32 width, u32 height,
                                         u32 eb) {
    u32 n = width * height;
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 x = p % width, y = p / width;
        bool l = x > 0, r = x + 1 < width, u = y > 0, dn = y + 1 < height;
        bool valid[8] = {r, dn, r && dn, l && dn, l, u, l && u, r && u};
        u64 k[8];
        u32 d[8];
#pragma unroll
        for (u32 i = 0; i < 8; ++i) {
            u32 q, id;
            seg_dir(p, i, width, q, id);
            k[i] = SEG_NO_EDGE;
            if (valid[i]) k[i] = seg_key(w4[id], id, eb);
            d[i] = i;
        }
        seg_cswap(k[0], d[0], k[2], d[2]); seg_cswap(k[1], d[1], k[3], d[3]);
        seg_cswap(k[4], d[4], k[6], d[6]); seg_cswap(k[5], d[5], k[7], d[7]);
        seg_cswap(k[0], d[0], k[4], d[4]); seg_cswap(k[1], d[1], k[5], d[5]);
        seg_cswap(k[2], d[2], k[6], d[6]); seg_cswap(k[3], d[3], k[7], d[7]);
        seg_cswap(k[0], d[0], k[1], d[1]); seg_cswap(k[2], d[2], k[3], d[3]);
        seg_cswap(k[4], d[4], k[5], d[5]); seg_cswap(k[6], d[6], k[7], d[7]);
        seg_cswap(k[2], d[2], k[4], d[4]); seg_cswap(k[3], d[3], k[5], d[5]);
        seg_cswap(k[1], d[1], k[4], d[4]); seg_cswap(k[3], d[3], k[6], d[6]);
        seg_cswap(k[1], d[1], k[2], d[2]); seg_cswap(k[3], d[3], k[4], d[4]);
        seg_cswap(k[5], d[5], k[6], d[6]);
        u32 o = 0, cnt = 0;
#pragma unroll
        for (u32 i = 0; i < 8; ++i) {
            o |= d[i] << (3u * i);
            cnt += k[i] != SEG_NO_EDGE ? 1u : 0u;
        }
        order[p] = o | (cnt << 28);
    }
}

extern "C" __global__ void segment_init(u32* comp, u32* link, u32* size, double* cint, u32* done, u64* best,
                                        u32* target, u32* gok, u32* pflag, u32* jcnt, u32* parent, u16* round,
                                        u32* ctl, u32* mctl, u32* fcnt, u32* rcnt, u32* counters, u32 n, u32 nctl,
                                        u32 ncounters) {
    for (u32 i = global_tid(); i < n || i < nctl || i < ncounters; i += global_threads()) {
        if (i < ncounters) counters[i] = 0;
        if (i < n) {
            comp[i] = i;
            link[i] = i;
            size[i] = 1;
            cint[i] = 0.0;
            done[i] = 0;
            best[i] = SEG_NO_EDGE;
            target[i] = SEG_NONE;
            gok[i] = 0;
            pflag[i] = 0;
            jcnt[i] = 0;
            parent[i] = i;
            round[i] = SEG_NEVER;
        }
        if (i < nctl) {
            ctl[i] = (i == 0) ? 1u : 0u;
            mctl[i] = 0;
            fcnt[i] = 0;
            rcnt[i] = 0;
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

// Appends `id` to list[*count] when `keep` (warp-aggregated among the lanes executing here).
__device__ __forceinline__ void seg_append(u32* list, u32* count, bool keep, u32 id) {
    u32 mask = __activemask();
    u32 ballot = __ballot_sync(mask, keep);
    if (ballot == 0) return;
    u32 lane = threadIdx.x & 31u;
    u32 leader = __ffs(ballot) - 1;
    u32 base = 0;
    if (lane == leader) base = atomicAdd(count, (u32)__popc(ballot));
    base = __shfl_sync(mask, base, leader);
    if (keep) list[base + __popc(ballot & ((1u << lane) - 1u))] = id;
}

// Step 1: relabel, then the least alive key of every active component (atomicMin). Iterates
// all pixels (use_list 0) or in_list[0..*in_count]; in merge mode writes the frontier of this
// round to out_list / *out_count.
extern "C" __global__ void segment_least(u32* comp, const u32* __restrict__ link, const double* __restrict__ w4,
                                         u64* best, const u32* __restrict__ size, const u32* __restrict__ done,
                                         u32* order, u32 width, u32 height, u32 eb, u32 mode, u32 min_size,
                                         const u32* __restrict__ ctl, u32 gate, u32 use_list,
                                         const u32* __restrict__ in_list, const u32* __restrict__ in_count,
                                         u32* out_list, u32* out_count) {
    if (ctl[gate] == 0) return;
    u32 count = use_list ? *in_count : width * height;
    for (u32 i = global_tid(); i < count; i += global_threads()) {
        u32 p = use_list ? in_list[i] : i;
        u32 c = seg_find(link, comp[p]);
        comp[p] = c;
        bool active = mode == SEG_MODE_ZERO || done[c] == 0;
        u64 bk = SEG_NO_EDGE;
        if (active) {
            // The first alive edge from the cursor in key order is the pixel's least; dead ones
            // before it are skipped for good (see segment_order).
            u32 o = order[p];
            u32 cur = SEG_ORD_CUR(o), cnt = SEG_ORD_CNT(o), start = cur;
            bool big = mode == SEG_MODE_MIN_SIZE && size[c] >= min_size;
            for (; cur < cnt; ++cur) {
                u32 q, id;
                seg_dir(p, SEG_ORD_DIR(o, cur), width, q, id);
                double w = w4[id];
                if (mode == SEG_MODE_ZERO && w != 0.0) break;  // zero-weight edges sort first
                u32 cq = comp[q];
                u32 e = seg_find(link, cq);
                if (e != cq) comp[q] = e;
                if (e == c || (mode != SEG_MODE_ZERO && (done[e] != 0 || (big && size[e] >= min_size)))) continue;
                bk = seg_key(w, id, eb);
                break;
            }
            if (cur != start) order[p] = (o & ~(15u << 24)) | (cur << 24);
            if (bk != SEG_NO_EDGE) atomicMin(&best[c], bk);
        }
        if (mode != SEG_MODE_ZERO) seg_append(out_list, out_count, bk != SEG_NO_EDGE, p);
    }
}

// Step 2: targets (and per-round resets) of every root: all pixels v with link[v] == v
// (use_list 0) or in_list[0..*in_count]; in merge mode the roots that stay active go to
// out_list / *out_count.
extern "C" __global__ void segment_targets(const u32* __restrict__ comp, const u32* __restrict__ link, u64* best,
                                           u64* tkey, u32* target, u32* gok, u64* lim, u64* limj, u32* jcnt,
                                           u32* done, u32 width, u32 n, u32 eb, u32 mode,
                                           u32* ctl, u32* mctl, u32 gate, u32 r, u32 use_list,
                                           const u32* __restrict__ in_list, const u32* __restrict__ in_count,
                                           u32* out_list, u32* out_count) {
    if (ctl[gate] == 0) return;
    u32 ev = 0;
    u32 count = use_list ? *in_count : n;
    for (u32 i = global_tid(); i < count; i += global_threads()) {
        u32 v = use_list ? in_list[i] : i;
        bool keep = false;
        if (link[v] != v) {
            // Not a root: clear a stale target (segment_chain_flatten reads targets).
            if (target[v] != SEG_NONE) target[v] = SEG_NONE;
        } else {
            target[v] = SEG_NONE;
            gok[v] = 0;
            lim[v] = SEG_NO_EDGE;
            limj[v] = SEG_NO_EDGE;
            jcnt[v] = 0;
            u64 key = best[v];
            best[v] = SEG_NO_EDGE;
            bool skip = mode != SEG_MODE_ZERO && done[v] != 0;
            if (!skip) {
                if (key == SEG_NO_EDGE) {
                    if (mode != SEG_MODE_ZERO) {
                        done[v] = 1;
                        ++ev;
                    }
                } else {
                    tkey[v] = key;
                    u32 eid = seg_eid(key, eb);
                    u32 cp = seg_find(link, comp[eid >> 2]);
                    target[v] = (cp == v) ? seg_find(link, comp[seg_other(eid, width)]) : cp;
                    keep = true;
                }
            }
        }
        if (mode != SEG_MODE_ZERO) seg_append(out_list, out_count, keep, v);
    }
    seg_count(ctl, mctl, r, ev, 0);
}

// Merge step 3: limits over the frontier (flist). From the pixel's cursor in key order, limj is
// the first alive edge to a component other than the target and lim the first such edge whose
// far side does not target this component (so the walk usually stops after an edge or two).
// (min_size rounds: the same with "alive" = either side smaller than min_size.)
extern "C" __global__ void segment_limits(const u32* __restrict__ comp, const u32* __restrict__ link,
                                          const double* __restrict__ w4, const u32* __restrict__ done,
                                          const u32* __restrict__ target, const u32* __restrict__ order,
                                          u64* lim, u64* limj, const u32* __restrict__ size, u32 width, u32 eb,
                                          u32 mode, u32 min_size, const u32* __restrict__ ctl, u32 gate,
                                          const u32* __restrict__ flist, const u32* __restrict__ fcount) {
    if (ctl[gate] == 0) return;
    u32 nf = *fcount;
    for (u32 i = global_tid(); i < nf; i += global_threads()) {
        u32 p = flist[i];
        u32 c = comp[p];  // current: segment_least resolved it this round
        u32 t = target[c];
        if (t == SEG_NONE) continue;
        u32 o = order[p];
        bool big = mode == SEG_MODE_MIN_SIZE && size[c] >= min_size;
        u64 lm = SEG_NO_EDGE, lj = SEG_NO_EDGE;
        for (u32 j = SEG_ORD_CUR(o), cnt = SEG_ORD_CNT(o); j < cnt; ++j) {
            u32 q, id;
            seg_dir(p, SEG_ORD_DIR(o, j), width, q, id);
            u32 e = seg_find(link, comp[q]);  // link does not change in this kernel
            if (e == c || e == t || done[e] != 0 || (big && size[e] >= min_size)) continue;
            u64 key = seg_key(w4[id], id, eb);
            if (lj == SEG_NO_EDGE) lj = key;
            if (target[e] != c) {
                lm = key;
                break;
            }
        }
        if (lj != SEG_NO_EDGE) atomicMin(&limj[c], lj);
        if (lm != SEG_NO_EDGE) atomicMin(&lim[c], lm);
    }
}

// Merge step 4: mutual pairs over the active roots (min_size rounds: pairs always merge).
extern "C" __global__ void segment_pairs(const double* __restrict__ w4, const u32* __restrict__ target,
                                         const u64* __restrict__ tkey, u32* link, u32* gok, u32* gsize,
                                         double* gint, u32* pflag, const u32* __restrict__ size,
                                         const double* __restrict__ cint, u32* parent, u16* round, u32 eb,
                                         u32 mode, double k, u32* ctl, u32* mctl, u32 gate, u32 r,
                                         const u32* __restrict__ rlist, const u32* __restrict__ rcount) {
    if (ctl[gate] == 0) return;
    u32 ev = 0, mg = 0;
    u32 nr = *rcount;
    for (u32 i = global_tid(); i < nr; i += global_threads()) {
        u32 v = rlist[i];
        u32 t = target[v];
        if (t == SEG_NONE || target[t] != v || v > t) continue;
        double w = w4[seg_eid(tkey[v], eb)];
        double cv = cint[v], ct = cint[t];
        float tv = seg_thr(cv, k, size[v]), tt = seg_thr(ct, k, size[t]);
        // min_size: the pair's edge is alive, so it merges.
        if (mode == SEG_MODE_MIN_SIZE || w < (double)fminf(tv, tt)) {
            link[t] = v;
            gok[v] = 1;
            gok[t] = 1;
            gsize[v] = size[v] + size[t];
            gint[v] = fmax(fmax(cv, ct), w);
            parent[t] = v;
            round[t] = (u16)r;
            ++ev;
            ++mg;
        } else {
            if (w >= (double)tv) {
                pflag[v] = 1;
                ++ev;
            } else {
                gok[v] = 1;
                gsize[v] = size[v];
                gint[v] = cint[v];
            }
            if (w >= (double)tt) {
                pflag[t] = 1;
                ++ev;
            } else {
                gok[t] = 1;
                gsize[t] = size[t];
                gint[t] = cint[t];
            }
        }
    }
    seg_count(ctl, mctl, r, ev, mg);
}

// Registers joiner v with group t: a slot in t's range (jcnt[t] counts them), t on the list of
// groups with joiners when v is its first (hlist), v on the list of this pass's joiners (xlist).
// (The list appends are warp-aggregated over the lanes that call it.)
__device__ __forceinline__ void seg_register(bool join, u32 v, u32 t, u32* jcnt, u32* jslot, u32* jtgt, u32* hlist,
                                             u32* hcount, u32* xlist, u32* xcount) {
    bool head = false;
    if (join) {
        u32 slot = atomicAdd(&jcnt[t], 1u);
        jslot[v] = slot;
        jtgt[v] = t;
        head = slot == 0;
    }
    seg_append(hlist, hcount, head, t);
    seg_append(xlist, xcount, join, v);
}

// Merge step 4b: a joiner (one-sided least edge into a group) registers with its target when
// its key is below the group's limit (the least edge of the pair to others): jcnt[t] counts the
// group's joiners, jslot[v] / jtgt[v] hold the joiner's slot and group (set for joiners only).
// segment_alloc and segment_scatter then lay every group's joiners out contiguously in jarr,
// so segment_groups_warp reads arrays instead of chasing list pointers (a group with a thousand
// joiners held its whole pass up for a millisecond).
extern "C" __global__ void segment_push(const u32* __restrict__ link, const u32* __restrict__ gok,
                                        const u32* __restrict__ target, const u64* __restrict__ tkey,
                                        const u64* __restrict__ lim, u32* jcnt, u32* jslot, u32* jtgt,
                                        u32* hlist, u32* hcount, u32* xlist, u32* xcount,
                                        const u32* __restrict__ ctl, u32 gate, const u32* __restrict__ rlist,
                                        const u32* __restrict__ rcount) {
    if (ctl[gate] == 0) return;
    u32 nr = *rcount;
    for (u32 i = global_tid(); i < nr; i += global_threads()) {
        u32 v = rlist[i];
        u32 t = target[v];
        bool join = false;
        if (t != SEG_NONE && target[t] != v && gok[t] != 0) {
            u64 limit = lim[t];
            u32 o = target[t];
            if (o != SEG_NONE && (link[o] == t || link[t] == o) && lim[o] < limit) limit = lim[o];
            join = tkey[v] < limit;
        }
        seg_register(join, v, t, jcnt, jslot, jtgt, hlist, hcount, xlist, xcount);
    }
}

// Joiner layout step 1: every group with joiners (hlist) takes a contiguous range of jarr and
// an entry in glist (the groups segment_groups_warp works on).
extern "C" __global__ void segment_alloc(const u32* __restrict__ jcnt, const u32* __restrict__ link, u32* joff,
                                         u32* cursor, u32* glist, u32* gcount, const u32* __restrict__ ctl,
                                         u32 gate, const u32* __restrict__ sgate, const u32* __restrict__ hlist,
                                         const u32* __restrict__ hcount) {
    if (ctl[gate] == 0 || *sgate == 0) return;
    u32 nh = *hcount;
    for (u32 i = global_tid(); i < nh; i += global_threads()) {
        u32 h = hlist[i];
        u32 c = jcnt[h];
        joff[h] = atomicAdd(cursor, c);
        // A pair member merged into its partner (first pass) brings its joiners to the pair's
        // root, which is listed once: by itself when it has joiners too, else here.
        u32 g = link[h];
        if (g == h || jcnt[g] == 0) glist[atomicAdd(gcount, 1u)] = g;
    }
}

// Joiner layout step 2: every registered joiner (xlist) writes itself into its group's range.
extern "C" __global__ void segment_scatter(const u32* __restrict__ jslot, const u32* __restrict__ jtgt,
                                           const u32* __restrict__ joff, u32* jarr, const u32* __restrict__ ctl,
                                           u32 gate, const u32* __restrict__ sgate,
                                           const u32* __restrict__ xlist, const u32* __restrict__ xcount) {
    if (ctl[gate] == 0 || *sgate == 0) return;
    u32 nx = *xcount;
    for (u32 i = global_tid(); i < nx; i += global_threads()) {
        u32 v = xlist[i];
        jarr[joff[jtgt[v]] + jslot[v]] = v;
    }
}

// Merge step 5, groups without joiners (first pass only; thread per active root): deferred
// "done" flags of failed pair sides become final, and each group's statistics and structural
// limit are set from the pair step. Groups with joiners are left to segment_groups_warp.
extern "C" __global__ void segment_groups_plain(u32* done, u32* pflag, const u32* __restrict__ gok,
                                                const u32* __restrict__ link, const u32* __restrict__ target,
                                                const u64* __restrict__ lim, const u32* __restrict__ jcnt,
                                                const u32* __restrict__ gsize, const double* __restrict__ gint,
                                                u32* size, double* cint, u64* slim, const u32* __restrict__ ctl,
                                                u32 gate, const u32* __restrict__ rlist,
                                                const u32* __restrict__ rcount) {
    if (ctl[gate] == 0) return;
    u32 nr = *rcount;
    for (u32 i = global_tid(); i < nr; i += global_threads()) {
        u32 g = rlist[i];
        if (pflag[g] != 0) {
            pflag[g] = 0;
            done[g] = 1;
        }
        if (gok[g] == 0 || link[g] != g) continue;
        u32 t = target[g];
        bool merged = t != SEG_NONE && t != g && link[t] == g;
        if (jcnt[g] != 0 || (merged && jcnt[t] != 0)) continue;
        u64 sl = lim[g];
        if (merged && lim[t] < sl) sl = lim[t];
        size[g] = gsize[g];
        cint[g] = gint[g];
        slim[g] = sl;
    }
}

// One compare-exchange stage of a bitonic network over 64 (key, id) pairs held two per lane
// (element e = slot * 32 + lane): partner e ^ j, ascending where (e & kk) == 0.
__device__ __forceinline__ void seg_bitonic_step(u64* key, u32* id, u32 kk, u32 j) {
    u32 lane = threadIdx.x & 31u;
    if (j == 32) {
        // Partners share a lane (kk == 64: ascending).
        if (key[1] < key[0]) {
            u64 tk = key[0]; key[0] = key[1]; key[1] = tk;
            u32 ti = id[0]; id[0] = id[1]; id[1] = ti;
        }
        return;
    }
    for (u32 s = 0; s < 2; ++s) {
        u32 e = s * 32 + lane;
        u64 ok = __shfl_xor_sync(FULL_MASK, key[s], j);
        u32 oi = __shfl_xor_sync(FULL_MASK, id[s], j);
        bool lower = (e & j) == 0;
        bool asc = (e & kk) == 0;
        bool take_other = (lower == asc) ? ok < key[s] : ok > key[s];
        if (take_other) {
            key[s] = ok;
            id[s] = oi;
        }
    }
}

// Sorts 64 (key, id) pairs held two per lane ascending (keys distinct except SEG_NO_EDGE).
__device__ __forceinline__ void seg_bitonic_sort64(u64* key, u32* id) {
    for (u32 kk = 2; kk <= 64; kk <<= 1)
        for (u32 j = kk >> 1; j > 0; j >>= 1) seg_bitonic_step(key, id, kk, j);
}

// Merge step 5 (and every sub-round pass), groups with joiners: one warp per group listed by
// segment_alloc. The lanes read the group's joiner ranges 64 at a time, sort each chunk with a
// bitonic network and keep the SEG_JOIN_BUFFER (64) least keys below the limit in registers
// (elementwise min of the sorted buffer and the reversed chunk, then a bitonic merge; the least
// key discarded lowers the limit, as boruvka.rs buffer_insert does), then load every kept
// joiner's weight, size, Int and limits into shared memory at once; lane 0 runs the dependent
// absorption decisions from there. (A thread per group walking its list and inserting into a
// local-memory buffer left each pass waiting 150-260 us for its longest list; BENCHMARKS.md.)
#define SEG_WARPS_PER_BLOCK 4
extern "C" __global__ void __launch_bounds__(32 * SEG_WARPS_PER_BLOCK)
segment_groups_warp(u32* link, u32* done, const u32* __restrict__ target, const u64* __restrict__ tkey,
                    const u64* __restrict__ lim, const u64* __restrict__ limj, u32* jcnt,
                    const u32* __restrict__ joff, const u32* __restrict__ jarr, const u32* __restrict__ gsize,
                    const double* __restrict__ gint, u32* size, double* cint, u32* parent, u16* round,
                    const double* __restrict__ w4, u32 eb, u32 mode, u32 min_size, double k, u32* ctl, u32* mctl,
                    u32 gate, u32 r, const u32* __restrict__ glist, const u32* __restrict__ gcount, u64* slim,
                    u32 first, const u32* __restrict__ sgate, u32* smerge) {
    if (ctl[gate] == 0) return;
    if (!first && *sgate == 0) return;
    __shared__ double s_w[SEG_WARPS_PER_BLOCK][SEG_JOIN_BUFFER];
    __shared__ double s_cx[SEG_WARPS_PER_BLOCK][SEG_JOIN_BUFFER];
    __shared__ u64 s_key[SEG_WARPS_PER_BLOCK][SEG_JOIN_BUFFER];
    __shared__ u64 s_lj[SEG_WARPS_PER_BLOCK][SEG_JOIN_BUFFER];
    __shared__ u64 s_lm[SEG_WARPS_PER_BLOCK][SEG_JOIN_BUFFER];
    __shared__ u32 s_x[SEG_WARPS_PER_BLOCK][SEG_JOIN_BUFFER];
    __shared__ u32 s_sx[SEG_WARPS_PER_BLOCK][SEG_JOIN_BUFFER];
    u32 lane = threadIdx.x & 31u, wib = threadIdx.x >> 5;
    u32 warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    u32 nwarps = (gridDim.x * blockDim.x) >> 5;
    u32 ev = 0, mg = 0;
    u32 ng = *gcount;
    for (u32 gi = warp; gi < ng; gi += nwarps) {
        u32 g = glist[gi];
        u32 t = target[g];
        bool merged = first && t != SEG_NONE && t != g && link[t] == g;
        u64 sl = first ? lim[g] : slim[g];
        if (merged && lim[t] < sl) sl = lim[t];
        u64 limit = sl;
        const u64 limit0 = sl;
        u32 c1 = jcnt[g], c2 = merged ? jcnt[t] : 0u;
        u32 o1 = c1 ? joff[g] : 0u, o2 = c2 ? joff[t] : 0u;
        __syncwarp();
        if (lane == 0) {
            jcnt[g] = 0;
            if (merged) jcnt[t] = 0;
        }
        // The 64 least keys below limit0, sorted, two per lane.
        u64 bkey[2] = {SEG_NO_EDGE, SEG_NO_EDGE};
        u32 bid[2] = {0u, 0u};
        u32 total = c1 + c2;
        for (u32 base = 0; base < total; base += 64) {
            u64 ck[2];
            u32 ci[2];
            for (u32 s = 0; s < 2; ++s) {
                u32 q = base + s * 32 + lane;
                ck[s] = SEG_NO_EDGE;
                ci[s] = 0u;
                if (q < total) {
                    u32 x = q < c1 ? jarr[o1 + q] : jarr[o2 + (q - c1)];
                    u64 kx = tkey[x];
                    if (kx < limit0) {
                        ck[s] = kx;
                        ci[s] = x;
                    }
                }
            }
            seg_bitonic_sort64(ck, ci);
            if (base == 0) {
                bkey[0] = ck[0]; bkey[1] = ck[1];
                bid[0] = ci[0]; bid[1] = ci[1];
                continue;
            }
            // Element e of the buffer against element 63 - e of the chunk (other slot, lane 31 - lane).
            u64 dropped = SEG_NO_EDGE;
            for (u32 s = 0; s < 2; ++s) {
                u64 rk = __shfl_sync(FULL_MASK, ck[1 - s], 31 - lane);
                u32 ri = __shfl_sync(FULL_MASK, ci[1 - s], 31 - lane);
                if (rk < bkey[s]) {
                    if (bkey[s] < dropped) dropped = bkey[s];
                    bkey[s] = rk;
                    bid[s] = ri;
                } else if (rk < dropped) {
                    dropped = rk;
                }
            }
            for (int o = 16; o > 0; o >>= 1) {
                u64 od = __shfl_xor_sync(FULL_MASK, dropped, o);
                if (od < dropped) dropped = od;
            }
            if (dropped < limit) limit = dropped;
            for (u32 j = 32; j > 0; j >>= 1) seg_bitonic_step(bkey, bid, 64, j);
        }
        // Keys dropped while fewer than 64 chunks' worth were seen are none; the buffer holds
        // the least keys below limit0 and `limit` is the least key left out.
        for (u32 s = 0; s < 2; ++s) {
            u32 e = s * 32 + lane;
            s_key[wib][e] = bkey[s];
            s_x[wib][e] = bid[s];
            if (bkey[s] != SEG_NO_EDGE) {
                u32 x = bid[s];
                s_w[wib][e] = w4[seg_eid(bkey[s], eb)];
                s_cx[wib][e] = cint[x];
                s_sx[wib][e] = size[x];
                s_lj[wib][e] = limj[x];
                s_lm[wib][e] = lim[x];
            }
        }
        __syncwarp();
        if (lane == 0) {
            u32 sz = first ? gsize[g] : size[g];
            double it = first ? gint[g] : cint[g];
            for (u32 e = 0; e < SEG_JOIN_BUFFER; ++e) {
                u64 key = s_key[wib][e];
                if (key == SEG_NO_EDGE || key > limit) break;
                u32 x = s_x[wib][e];
                double w = s_w[wib][e], cx = s_cx[wib][e];
                u32 sx = s_sx[wib][e];
                float tl = seg_thr(it, k, sz);
                float tx = seg_thr(cx, k, sx);
                bool join = mode == SEG_MODE_MIN_SIZE ? (sz < min_size || sx < min_size) : w < (double)fminf(tl, tx);
                if (join) {
                    link[x] = g;
                    sz += sx;
                    it = fmax(it, fmax(w, cx));
                    u64 ljx = s_lj[wib][e], lmx = s_lm[wib][e];
                    if (ljx < limit) limit = ljx;
                    if (lmx < sl) sl = lmx;
                    parent[x] = g;
                    round[x] = (u16)r;
                    ++ev;
                    ++mg;
                } else if (mode == SEG_MODE_MERGE) {
                    if (w >= (double)tx) {
                        done[x] = 1;
                        ++ev;
                    }
                    if (w >= (double)tl) {
                        done[g] = 1;
                        ++ev;
                        break;
                    }
                }
            }
            size[g] = sz;
            cint[g] = it;
            slim[g] = sl;
        }
        __syncwarp();
    }
    seg_count(ctl, mctl, r, ev, mg);
    for (int o = 16; o > 0; o >>= 1) mg += __shfl_down_sync(FULL_MASK, mg, o);
    if (lane == 0 && mg) atomicAdd(smerge, mg);
}

// Merge step 6, a sub-round: a component whose least edge leads into a joiner absorbed since
// (its target now resolves to a live group) registers with that group when its key is below
// the group's structural limit (as in segment_push); segment_groups_warp (first = 0) then
// absorbs it. Runs only when the previous absorption pass merged (*sgate).
extern "C" __global__ void segment_push_sub(const u32* __restrict__ link, const u32* __restrict__ gok,
                                            const u32* __restrict__ done, const u32* __restrict__ target,
                                            const u64* __restrict__ tkey, const u64* __restrict__ slim, u32* jcnt,
                                            u32* jslot, u32* jtgt, u32* hlist, u32* hcount, u32* xlist,
                                            u32* xcount, const u32* __restrict__ ctl, u32 gate,
                                            const u32* __restrict__ sgate, const u32* __restrict__ rlist,
                                            const u32* __restrict__ rcount) {
    if (ctl[gate] == 0 || *sgate == 0) return;
    u32 nr = *rcount;
    for (u32 i = global_tid(); i < nr; i += global_threads()) {
        u32 v = rlist[i];
        u32 t = target[v];
        bool join = false;
        if (link[v] == v && done[v] == 0 && gok[v] == 0 && t != SEG_NONE) {
            t = seg_find(link, t);
            join = t != v && gok[t] != 0 && done[t] == 0 && tkey[v] < slim[t];
        }
        seg_register(join, v, t, jcnt, jslot, jtgt, hlist, hcount, xlist, xcount);
    }
}

// Chain step 3: every component with a target links to it, mutual pairs keep the smaller root.
extern "C" __global__ void segment_chain_link(const u32* __restrict__ target, u32* link, u32 n, u32* ctl,
                                              u32* mctl, u32 gate, u32 r) {
    if (ctl[gate] == 0) return;
    u32 ev = 0;
    for (u32 v = global_tid(); v < n; v += global_threads()) {
        if (link[v] != v) continue;
        u32 t = target[v];
        if (t == SEG_NONE) continue;
        if (target[t] == v && v < t) continue;
        link[v] = t;
        ++ev;
    }
    seg_count(ctl, mctl, r, ev, ev);
}

// Chain step 4: follow links to the final root (concurrent path halving: every write is a
// shortcut to an ancestor), sum sizes there, record the hierarchy, point link at the root.
// Roots of this round are the v with target[v] != NONE or link[v] == v.
extern "C" __global__ void segment_chain_flatten(const u32* __restrict__ target, u32* link, u32* size,
                                                 u32* parent, u16* round, u32 n, const u32* __restrict__ ctl,
                                                 u32 gate, u32 r) {
    if (ctl[gate] == 0 || ctl[r] == 0) return;
    volatile u32* vl = link;
    for (u32 v = global_tid(); v < n; v += global_threads()) {
        if (target[v] == SEG_NONE) continue;
        u32 f = v;
        while (true) {
            u32 nx = vl[f];
            if (nx == f) break;
            u32 gp = vl[nx];
            if (gp == nx) {
                f = nx;
                break;
            }
            vl[f] = gp;
            f = gp;
        }
        if (f != v) {
            atomicAdd(&size[f], size[v]);
            parent[v] = f;
            round[v] = (u16)r;
            vl[v] = f;
        }
    }
}

// Start of the min_size phase: no component is done, and every pixel's cursor goes back to its
// first edge (edges to components that were done are alive again).
extern "C" __global__ void segment_reset_done(u32* done, u32* order, u32 n) {
    for (u32 i = global_tid(); i < n; i += global_threads()) {
        done[i] = 0;
        order[i] &= ~(15u << 24);
    }
}

extern "C" __global__ void segment_final(u32* comp, const u32* __restrict__ link, u32* minpix, u32 n) {
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        comp[p] = seg_find(link, comp[p]);
        minpix[p] = SEG_NONE;
    }
}

extern "C" __global__ void segment_minpix(const u32* __restrict__ comp, u32* minpix, u32 width, u32 n) {
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 c = comp[p];
        // The first raster pixel of a segment starts a run: its left neighbour is elsewhere.
        if (p % width == 0 || comp[p - 1] != c) atomicMin(&minpix[c], p);
    }
}

// Exclusive scan of one value per thread over the block (blockDim.x a multiple of 32, at most
// 1024); the block total goes to *total. Uses 32 words of shared memory.
__device__ u32 seg_block_scan(u32 v, u32* total) {
    __shared__ u32 warp_sums[32];
    u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 nwarps = blockDim.x >> 5;
    u32 x = v;
    for (u32 o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(FULL_MASK, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u32 s = lane < nwarps ? warp_sums[lane] : 0;
        for (u32 o = 1; o < 32; o <<= 1) {
            u32 y = __shfl_up_sync(FULL_MASK, s, o);
            if (lane >= o) s += y;
        }
        warp_sums[lane] = s;
    }
    __syncthreads();
    u32 off = warp > 0 ? warp_sums[warp - 1] : 0;
    *total = warp_sums[nwarps - 1];
    __syncthreads();
    return off + x - v;
}

extern "C" __global__ void segment_scan_count(const u32* __restrict__ comp, const u32* __restrict__ minpix,
                                              u32* blocksum, u32 n) {
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    int flag = (p < n && minpix[comp[p]] == p) ? 1 : 0;
    int c = __syncthreads_count(flag);
    if (threadIdx.x == 0) blocksum[blockIdx.x] = (u32)c;
}

extern "C" __global__ void segment_scan_blocks(u32* blocksum, u32 nblocks, u32* info) {
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
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    bool flag = p < n && minpix[comp[p]] == p;
    u32 total;
    u32 ex = seg_block_scan(flag ? 1u : 0u, &total);
    if (flag) rootlabel[comp[p]] = blocksum[blockIdx.x] + ex;
}

extern "C" __global__ void segment_labels(const u32* __restrict__ comp, const u32* __restrict__ rootlabel,
                                          u32* labels, u32 n) {
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

extern "C" __global__ void segment_level_comp(u32* comp, const u32* __restrict__ parent,
                                              const u16* __restrict__ round, u32* minpix,
                                              const u32* __restrict__ info, u32 n) {
    u32 thr = info[1];
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 v = p;
        while ((u32)round[v] <= thr) v = parent[v];
        comp[p] = v;
        minpix[p] = SEG_NONE;
    }
}
