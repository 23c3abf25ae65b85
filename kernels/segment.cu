// Felzenszwalb-Huttenlocher segmentation in GPU rounds, after the atomics-based Boruvka of
// Baranwal, Hoste, Rethy, Bouchiat, "Graph based image segmentation on the GPU" (ETH Zurich,
// section 3.1, Appendix A Algorithms 1-6: least outgoing edge per vertex, atomicMin per
// component on packed (weight, edge id) keys, mutual-edge cycle removal, predicate, parent
// update, flatten, sizes / Int(C) updated in place), plus the hierarchy of sections 2.2 /
// 3.2.3. Plain Boruvka evaluates the predicate out of Kruskal's order and leaks (whole frames
// collapse); the merge rounds here decide exactly the edges Kruskal would process next (mutual
// least edges, then "joiners" absorbed in key order below a limit), so the result equals a
// sequential f32 Kruskal. src/ops/segment/boruvka.rs is the CPU model of every kernel below
// (same f32 operations, same round structure): keep the two in sync.
//
// Graph: never stored. segment_weights computes per pixel p=(x,y) the four forward weights
// (dir 0 right, 1 down, 2 down-right, 3 down-left; +inf outside) as a float4 from the smoothed
// image (kernels/blur.cu). Edge id = 4p + dir; key = (f32 weight bits << 32) | id, a total
// order (weights are >= 0).
//
// Phases (global round numbers r; every kernel first reads ctl[gate], the event count of the
// previous round of its phase, and returns when it is 0, so rounds after convergence cost one
// tiny launch each and nothing is read back by the host):
//   zero rounds 1..32        Boruvka chains along zero-weight edges (always accepted by the
//                            predicate when k > 0 and they leave Int = 0: exact).
//   merge rounds 33..        segment_least, segment_targets, segment_limits_pairs,
//                            segment_groups (exact Kruskal decisions, see boruvka.rs).
//   min_size rounds          Boruvka chains of components smaller than min_size.
// Chain rounds: segment_least, segment_targets, segment_chain_link, segment_chain_flatten.
// Relabel: segment_final, segment_minpix (first pixel of each segment, at run starts only),
// a block scan of "first pixel" flags (segment_scan_*), segment_labels (raster order).
// segment_level_* extract any hierarchy level from (parent, round) the same way.
//
// Thread mapping: grid-stride loops over pixels (pixel kernels) or over root candidates
// (v with comp[v] == v) with 1-D blocks of 256; event counts are reduced per warp before one
// atomicAdd (every lane reaches the reduction). The scan kernels use 1024-thread blocks and 32
// words of shared memory. In-place relabelling comp[p] = link[comp[p]] is race-free: link maps
// every root of the previous round to its current root and every current root to itself, so a
// neighbour reading the old or the new value gets the same root.
// Border policy: neighbours outside the image are skipped (their +inf weights are never read).
#include "common/util.cuh"

#define SEG_NO_EDGE 0xffffffffffffffffull
#define SEG_NONE 0xffffffffu
#define SEG_NEVER 0xffffu
#define SEG_JOIN_BUFFER 32

#define SEG_MODE_MERGE 0u
#define SEG_MODE_MIN_SIZE 1u
#define SEG_MODE_ZERO 2u

__device__ __forceinline__ float seg_dist(const float* __restrict__ s, u32 channels, u32 p, u32 q) {
    float acc = 0.0f;
    for (u32 c = 0; c < channels; ++c) {
        float d = __fsub_rn(s[(size_t)q * channels + c], s[(size_t)p * channels + c]);
        float sq = __fmul_rn(d, d);
        acc = (c == 0) ? sq : __fadd_rn(acc, sq);
    }
    return __fsqrt_rn(acc);
}

__device__ __forceinline__ u64 seg_key(float w, u32 eid) {
    return ((u64)__float_as_uint(w) << 32) | (u64)eid;
}

__device__ __forceinline__ float seg_key_weight(u64 key) { return __uint_as_float((u32)(key >> 32)); }

// Int(C) + k/|C| with every operation rounded on its own (as boruvka.rs: cint + k / size).
__device__ __forceinline__ float seg_thr(float cint, float k, u32 size) {
    return __fadd_rn(cint, __fdiv_rn(k, __uint2float_rn(size)));
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

// Calls BODY(q, key) for the 8 neighbours q of pixel p at (x, y).
#define SEG_FOR_NEIGHBOURS(p, x, y, width, height, w4, BODY)                                   \
    {                                                                                         \
        bool l_ = (x) > 0, r_ = (x) + 1 < (width), u_ = (y) > 0, d_ = (y) + 1 < (height);     \
        if (r_) { u32 q = (p) + 1; u64 key = seg_key((w4)[(p)].x, (p) * 4u + 0u); BODY }      \
        if (d_) {                                                                             \
            { u32 q = (p) + (width); u64 key = seg_key((w4)[(p)].y, (p) * 4u + 1u); BODY }    \
            if (r_) { u32 q = (p) + (width) + 1; u64 key = seg_key((w4)[(p)].z, (p) * 4u + 2u); BODY } \
            if (l_) { u32 q = (p) + (width) - 1; u64 key = seg_key((w4)[(p)].w, (p) * 4u + 3u); BODY } \
        }                                                                                     \
        if (l_) { u32 o_ = (p) - 1; u32 q = o_; u64 key = seg_key((w4)[o_].x, o_ * 4u + 0u); BODY } \
        if (u_) {                                                                             \
            { u32 o_ = (p) - (width); u32 q = o_; u64 key = seg_key((w4)[o_].y, o_ * 4u + 1u); BODY } \
            if (l_) { u32 o_ = (p) - (width) - 1; u32 q = o_; u64 key = seg_key((w4)[o_].z, o_ * 4u + 2u); BODY } \
            if (r_) { u32 o_ = (p) - (width) + 1; u32 q = o_; u64 key = seg_key((w4)[o_].w, o_ * 4u + 3u); BODY } \
        }                                                                                     \
    }

extern "C" __global__ void segment_weights(const float* __restrict__ s, float4* __restrict__ w4, u32 width,
                                           u32 height, u32 channels) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    u32 p = y * width + x;
    const float inf = __int_as_float(0x7f800000);
    bool right = x + 1 < width, down = y + 1 < height, left = x > 0;
    float4 r;
    r.x = right ? seg_dist(s, channels, p, p + 1) : inf;
    r.y = down ? seg_dist(s, channels, p, p + width) : inf;
    r.z = (right && down) ? seg_dist(s, channels, p, p + width + 1) : inf;
    r.w = (left && down) ? seg_dist(s, channels, p, p + width - 1) : inf;
    w4[p] = r;
}

extern "C" __global__ void segment_init(u32* comp, u32* link, u32* size, u32* cint, u32* done, u64* best,
                                        u32* target, u32* gok, u32* pflag, u32* head, u32* parent, u16* round,
                                        u32* ctl, u32* mctl, u32 n, u32 nctl) {
    for (u32 i = global_tid(); i < n || i < nctl; i += global_threads()) {
        if (i < n) {
            comp[i] = i;
            link[i] = i;
            size[i] = 1;
            cint[i] = 0;
            done[i] = 0;
            best[i] = SEG_NO_EDGE;
            target[i] = SEG_NONE;
            gok[i] = 0;
            pflag[i] = 0;
            head[i] = SEG_NONE;
            parent[i] = i;
            round[i] = SEG_NEVER;
        }
        if (i < nctl) {
            ctl[i] = (i == 0) ? 1u : 0u;
            mctl[i] = 0;
        }
    }
}

// Step 1: relabel, then the least alive key of every active component (atomicMin).
extern "C" __global__ void segment_least(u32* comp, const u32* __restrict__ link, const float4* __restrict__ w4,
                                         u64* best, const u32* __restrict__ size, const u32* __restrict__ done,
                                         u32 width, u32 height, u32 mode, u32 min_size,
                                         const u32* __restrict__ ctl, u32 gate) {
    if (ctl[gate] == 0) return;
    u32 n = width * height;
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 c = link[comp[p]];
        comp[p] = c;
        bool active = mode == SEG_MODE_MERGE ? done[c] == 0 : mode == SEG_MODE_MIN_SIZE ? size[c] < min_size : true;
        if (!active) continue;
        u32 x = p % width, y = p / width;
        u64 bk = SEG_NO_EDGE;
        SEG_FOR_NEIGHBOURS(p, x, y, width, height, w4, {
            u32 e = link[comp[q]];
            if (e != c) {
                bool alive = mode == SEG_MODE_MERGE ? done[e] == 0
                           : mode == SEG_MODE_ZERO ? (u32)(key >> 32) == 0u : true;
                if (alive && key < bk) bk = key;
            }
        })
        if (bk != SEG_NO_EDGE) atomicMin(&best[c], bk);
    }
}

// Step 2: targets (and per-round resets) of every root.
extern "C" __global__ void segment_targets(const u32* __restrict__ comp, u64* best, u64* tkey, u32* target,
                                           u32* link, u32* gok, u64* lim, u64* limj, u32* head,
                                           const u32* __restrict__ size, u32* done, u32 width, u32 n, u32 mode,
                                           u32 min_size, u32* ctl, u32* mctl, u32 gate, u32 r) {
    if (ctl[gate] == 0) return;
    u32 ev = 0;
    for (u32 v = global_tid(); v < n; v += global_threads()) {
        if (comp[v] != v) continue;
        link[v] = v;
        target[v] = SEG_NONE;
        gok[v] = 0;
        lim[v] = SEG_NO_EDGE;
        limj[v] = SEG_NO_EDGE;
        head[v] = SEG_NONE;
        u64 key = best[v];
        best[v] = SEG_NO_EDGE;
        if (mode == SEG_MODE_MERGE && done[v] != 0) continue;
        if (mode == SEG_MODE_MIN_SIZE && size[v] >= min_size) continue;
        if (key == SEG_NO_EDGE) {
            if (mode == SEG_MODE_MERGE) {
                done[v] = 1;
                ++ev;
            }
            continue;
        }
        tkey[v] = key;
        u32 eid = (u32)key;
        u32 cp = comp[eid >> 2];
        target[v] = (cp == v) ? comp[seg_other(eid, width)] : cp;
    }
    seg_count(ctl, mctl, r, ev, 0);
}

// Merge steps 3 and 4: limits (pixel role), mutual pairs and joiner lists (root role).
extern "C" __global__ void segment_limits_pairs(const u32* __restrict__ comp, const float4* __restrict__ w4,
                                                const u32* __restrict__ done, const u32* __restrict__ target,
                                                const u64* __restrict__ tkey, u64* lim, u64* limj, u32* link,
                                                u32* gok, u32* gsize, u32* gint, u32* pflag, u32* head, u32* next,
                                                const u32* __restrict__ size, const u32* __restrict__ cint,
                                                u32* parent, u16* round, u32 width, u32 height, float k, u32* ctl,
                                                u32* mctl, u32 gate, u32 r) {
    if (ctl[gate] == 0) return;
    u32 n = width * height;
    u32 ev = 0, mg = 0;
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 c = comp[p];
        u32 t = target[c];
        if (t == SEG_NONE) continue;
        // Limits of component c through pixel p.
        u32 x = p % width, y = p / width;
        u64 lm = SEG_NO_EDGE, lj = SEG_NO_EDGE;
        SEG_FOR_NEIGHBOURS(p, x, y, width, height, w4, {
            u32 e = comp[q];
            if (e != c && e != t && done[e] == 0) {
                if (key < lj) lj = key;
                if (target[e] != c && key < lm) lm = key;
            }
        })
        if (lj != SEG_NO_EDGE) atomicMin(&limj[c], lj);
        if (lm != SEG_NO_EDGE) atomicMin(&lim[c], lm);
        if (c != p) continue;
        // Root role: v = p.
        u32 v = p;
        if (target[t] != v) {
            next[v] = atomicExch(&head[t], v);
            continue;
        }
        if (v > t) continue;
        float w = seg_key_weight(tkey[v]);
        float cv = __uint_as_float(cint[v]), ct = __uint_as_float(cint[t]);
        float tv = seg_thr(cv, k, size[v]), tt = seg_thr(ct, k, size[t]);
        if (w < fminf(tv, tt)) {
            link[t] = v;
            gok[v] = 1;
            gok[t] = 1;
            gsize[v] = size[v] + size[t];
            gint[v] = __float_as_uint(fmaxf(fmaxf(cv, ct), w));
            parent[t] = v;
            round[t] = (u16)r;
            ++ev;
            ++mg;
        } else {
            if (w >= tv) {
                pflag[v] = 1;
                ++ev;
            } else {
                gok[v] = 1;
                gsize[v] = size[v];
                gint[v] = cint[v];
            }
            if (w >= tt) {
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

// Keeps the SEG_JOIN_BUFFER least keys below `limit` (boruvka.rs buffer_insert).
__device__ __forceinline__ void seg_buffer_insert(u64* bk, u32* bx, u32& nb, u64& limit, u64 key, u32 id) {
    if (key >= limit) return;
    if (nb == SEG_JOIN_BUFFER) {
        u64 last = bk[SEG_JOIN_BUFFER - 1];
        if (key > last) {
            if (key < limit) limit = key;
            return;
        }
        if (last < limit) limit = last;
        --nb;
    }
    u32 pos = nb;
    while (pos > 0 && bk[pos - 1] > key) {
        bk[pos] = bk[pos - 1];
        bx[pos] = bx[pos - 1];
        --pos;
    }
    bk[pos] = key;
    bx[pos] = id;
    ++nb;
}

// Merge step 5: pair decisions become final, groups absorb their joiners in key order.
extern "C" __global__ void segment_groups(const u32* __restrict__ comp, u32* link, u32* done, u32* pflag,
                                          const u32* __restrict__ gok, const u32* __restrict__ target,
                                          const u64* __restrict__ tkey, const u64* __restrict__ lim,
                                          const u64* __restrict__ limj, const u32* __restrict__ head,
                                          const u32* __restrict__ next, const u32* __restrict__ gsize,
                                          const u32* __restrict__ gint, u32* size, u32* cint, u32* parent,
                                          u16* round, u32 n, float k, u32* ctl, u32* mctl, u32 gate, u32 r) {
    if (ctl[gate] == 0) return;
    u32 ev = 0, mg = 0;
    u64 bk[SEG_JOIN_BUFFER];
    u32 bx[SEG_JOIN_BUFFER];
    for (u32 g = global_tid(); g < n; g += global_threads()) {
        if (comp[g] != g) continue;
        if (pflag[g] != 0) {
            pflag[g] = 0;
            done[g] = 1;
        }
        if (gok[g] == 0 || link[g] != g) continue;
        u32 t = target[g];
        bool merged = t != SEG_NONE && t != g && link[t] == g;
        u64 limit = lim[g];
        if (merged && lim[t] < limit) limit = lim[t];
        u32 nb = 0;
        for (u32 x = head[g]; x != SEG_NONE; x = next[x]) seg_buffer_insert(bk, bx, nb, limit, tkey[x], x);
        if (merged)
            for (u32 x = head[t]; x != SEG_NONE; x = next[x]) seg_buffer_insert(bk, bx, nb, limit, tkey[x], x);
        u32 sz = gsize[g];
        float it = __uint_as_float(gint[g]);
        for (u32 i = 0; i < nb; ++i) {
            u64 key = bk[i];
            if (key > limit) break;
            u32 x = bx[i];
            float w = seg_key_weight(key);
            float tl = seg_thr(it, k, sz);
            float cx = __uint_as_float(cint[x]);
            float tx = seg_thr(cx, k, size[x]);
            if (w < fminf(tl, tx)) {
                link[x] = g;
                sz += size[x];
                it = fmaxf(it, fmaxf(w, cx));
                if (limj[x] < limit) limit = limj[x];
                parent[x] = g;
                round[x] = (u16)r;
                ++ev;
                ++mg;
            } else {
                if (w >= tx) {
                    done[x] = 1;
                    ++ev;
                }
                if (w >= tl) {
                    done[g] = 1;
                    ++ev;
                    break;
                }
            }
        }
        size[g] = sz;
        cint[g] = __float_as_uint(it);
    }
    seg_count(ctl, mctl, r, ev, mg);
}

// Chain step 3: every component with a target links to it, mutual pairs keep the smaller root.
extern "C" __global__ void segment_chain_link(const u32* __restrict__ comp, const u32* __restrict__ target,
                                              u32* link, u32 n, u32* ctl, u32* mctl, u32 gate, u32 r) {
    if (ctl[gate] == 0) return;
    u32 ev = 0;
    for (u32 v = global_tid(); v < n; v += global_threads()) {
        if (comp[v] != v) continue;
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
extern "C" __global__ void segment_chain_flatten(const u32* __restrict__ comp, u32* link, u32* size, u32* parent,
                                                 u16* round, u32 n, const u32* __restrict__ ctl, u32 gate,
                                                 u32 r) {
    if (ctl[gate] == 0 || ctl[r] == 0) return;
    volatile u32* vl = link;
    for (u32 v = global_tid(); v < n; v += global_threads()) {
        if (comp[v] != v) continue;
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

extern "C" __global__ void segment_final(u32* comp, const u32* __restrict__ link, u32* minpix, u32 n) {
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        comp[p] = link[comp[p]];
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
