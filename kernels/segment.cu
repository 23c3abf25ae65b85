// Felzenszwalb-Huttenlocher segmentation with atomics-based Boruvka (Baranwal, Hoste, Rethy,
// Bouchiat: "Graph based image segmentation on the GPU", ETH Zurich, section 3.1 and
// Appendix A, Algorithms 1-6), plus the segmentation hierarchy of sections 2.2 / 3.2.3.
// The CPU model src/ops/segment/boruvka.rs performs the same steps with the same f32
// arithmetic, so results match bit for bit (keep the two in sync).
//
// Graph: never stored as CSR. segment_weights computes, once per frame, the four forward
// edge weights of every pixel p=(x,y) from the smoothed image (kernels/blur.cu): dir 0 right
// (x+1,y), 1 down (x,y+1), 2 down-right (x+1,y+1), 3 down-left (x-1,y+1), as a float4;
// +inf where the neighbour is outside. Edge id = 4p + dir; key = (weight bits << 32) | id, a
// total order on edges (weights are >= 0, so their bits order them).
//
// One Boruvka round r (device loop: every kernel first reads ctl[gate], the link count of the
// previous round, and returns at once when it is 0, so no host synchronisation is needed):
//   segment_minedge (Alg. 2+3): one thread per pixel (2D grid, 32x8 blocks). Relabels its
//     pixel in place, comp[p] = fin[comp[p]] (fin maps every root of the previous round to
//     its final root and every final root to itself, so a neighbour reading the old or the
//     new value gets the same root). Scans its 8 neighbours in other components (weights of
//     backward edges read from the neighbour's float4 only when needed) and atomicMin's its
//     least key into best[component].
//   segment_decide (Alg. 4-6 + predicate): one thread per pixel, acting for roots only
//     (comp[v] == v). Edge of best[v] leads to root d; links v -> d when
//     w < min(Int(v) + k/|v|, Int(d) + k/|d|) (all f32, rounded per operation), unless the
//     edge is also d's least edge (mutual pair, the only possible cycle) and v < d. Counts
//     links in ctl[r] (warp-aggregated atomicAdd).
//   segment_flatten: one thread per root: follows links to the final root with concurrent
//     path halving (every write is a shortcut to an ancestor, so races are benign), writes
//     fin[v], resets best[v], and for absorbed roots atomicAdd's |v| and atomicMax's
//     max(Int(v), w(v)) (f32 bits, non-negative) into the final root; records the hierarchy
//     parent[v] = final root, round[v] = r.
// min_size rounds: the same three kernels with mode = 1: only components smaller than
// min_size look for edges and they link without the predicate.
// Relabel: segment_final (comp = fin[comp]), segment_minpix (atomicMin of the first pixel of
// each segment, only at run starts), then a block scan of the "first pixel" flags
// (segment_scan_count / _blocks / _label) numbers segments in raster order, and
// segment_labels writes them. segment_level_* extract any hierarchy level the same way.
//
// Border policy: neighbours outside the image are skipped (weights +inf are never read).
// Shared memory: 32 words in the scan kernels only.
#include "common/util.cuh"

#define SEG_NO_EDGE 0xffffffffffffffffull
#define SEG_NEVER 0xffffu
#define SEG_NO_PIXEL 0xffffffffu

__device__ __forceinline__ float seg_dist(const float* __restrict__ s, u32 channels, u32 p, u32 q) {
    float acc = 0.0f;
    for (u32 c = 0; c < channels; ++c) {
        float d = __fsub_rn(s[(size_t)q * channels + c], s[(size_t)p * channels + c]);
        float sq = __fmul_rn(d, d);
        acc = (c == 0) ? sq : __fadd_rn(acc, sq);
    }
    return __fsqrt_rn(acc);
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

extern "C" __global__ void segment_init(u32* comp, u32* fin, u32* size, u32* cint, u64* best, u32* link,
                                        u32* parent, u16* round, u32* ctl, u32 n, u32 nctl) {
    u32 i = global_tid();
    if (i < n) {
        comp[i] = i;
        fin[i] = i;
        size[i] = 1;
        cint[i] = 0;
        best[i] = SEG_NO_EDGE;
        link[i] = i;
        parent[i] = i;
        round[i] = SEG_NEVER;
    }
    if (i < nctl) ctl[i] = (i == 0) ? 1u : 0u;
}

__device__ __forceinline__ u64 seg_key(float w, u32 eid) {
    return ((u64)__float_as_uint(w) << 32) | (u64)eid;
}

extern "C" __global__ void segment_minedge(u32* comp, const u32* __restrict__ fin, const float4* __restrict__ w4,
                                           u64* best, const u32* __restrict__ size, u32 width, u32 height, u32 mode,
                                           u32 min_size, const u32* __restrict__ ctl, u32 gate) {
    if (ctl[gate] == 0) return;
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    u32 p = y * width + x;
    u32 c = fin[comp[p]];
    comp[p] = c;
    if (mode != 0 && size[c] >= min_size) return;
    bool left = x > 0, right = x + 1 < width, up = y > 0, down = y + 1 < height;
    u64 bk = SEG_NO_EDGE;
#define SEG_CONSIDER(q, owner, dir, field)                              \
    {                                                                   \
        u32 cq = fin[comp[(q)]];                                        \
        if (cq != c) {                                                  \
            u64 k = seg_key(w4[(owner)].field, (owner) * 4u + (dir));   \
            bk = k < bk ? k : bk;                                       \
        }                                                               \
    }
    if (right) SEG_CONSIDER(p + 1, p, 0u, x);
    if (down) {
        SEG_CONSIDER(p + width, p, 1u, y);
        if (right) SEG_CONSIDER(p + width + 1, p, 2u, z);
        if (left) SEG_CONSIDER(p + width - 1, p, 3u, w);
    }
    if (left) SEG_CONSIDER(p - 1, p - 1, 0u, x);
    if (up) {
        SEG_CONSIDER(p - width, p - width, 1u, y);
        if (left) SEG_CONSIDER(p - width - 1, p - width - 1, 2u, z);
        if (right) SEG_CONSIDER(p - width + 1, p - width + 1, 3u, w);
    }
#undef SEG_CONSIDER
    if (bk != SEG_NO_EDGE) atomicMin(&best[c], bk);
}

extern "C" __global__ void segment_decide(const u32* __restrict__ comp, const u64* __restrict__ best, u32* link,
                                          float* mw, const u32* __restrict__ size, const u32* __restrict__ cint,
                                          u32 width, u32 n, float k, u32 mode, u32 min_size, u32* ctl, u32 gate,
                                          u32 r) {
    if (ctl[gate] == 0) return;
    u32 v = global_tid();
    bool linked = false;
    if (v < n && comp[v] == v) {
        u32 to = v;
        u64 key = best[v];
        if (key != SEG_NO_EDGE && !(mode != 0 && size[v] >= min_size)) {
            u32 eid = (u32)key;
            u32 p = eid >> 2;
            u32 dir = eid & 3u;
            u32 q = p + (dir == 0 ? 1u : dir == 1 ? width : dir == 2 ? width + 1 : width - 1);
            u32 cp = comp[p], cq = comp[q];
            u32 d = (cp == v) ? cq : cp;
            float w = __uint_as_float((u32)(key >> 32));
            bool pass = true;
            if (mode == 0) {
                float tv = __fadd_rn(__uint_as_float(cint[v]), __fdiv_rn(k, __uint2float_rn(size[v])));
                float td = __fadd_rn(__uint_as_float(cint[d]), __fdiv_rn(k, __uint2float_rn(size[d])));
                pass = w < fminf(tv, td);
            }
            if (pass && !(best[d] == key && v < d)) {
                to = d;
                mw[v] = w;
                linked = true;
            }
        }
        link[v] = to;
    }
    u32 m = __ballot_sync(FULL_MASK, linked);
    if ((threadIdx.x & 31u) == 0 && m != 0) atomicAdd(&ctl[r], (u32)__popc(m));
}

extern "C" __global__ void segment_flatten(const u32* __restrict__ comp, u32* link, u32* fin, u32* size, u32* cint,
                                           const float* __restrict__ mw, u64* best, u32* parent, u16* round,
                                           const u32* __restrict__ ctl, u32 gate, u32 r, u32 n) {
    if (ctl[gate] == 0) return;
    u32 v = global_tid();
    if (v >= n || comp[v] != v) return;
    best[v] = SEG_NO_EDGE;
    volatile u32* vl = link;
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
    fin[v] = f;
    if (f != v) {
        atomicAdd(&size[f], size[v]);
        u32 c = max(cint[v], __float_as_uint(mw[v]));
        atomicMax(&cint[f], c);
        parent[v] = f;
        round[v] = (u16)r;
    }
}

extern "C" __global__ void segment_final(u32* comp, const u32* __restrict__ fin, u32* minpix, u32 n) {
    u32 p = global_tid();
    if (p >= n) return;
    comp[p] = fin[comp[p]];
    minpix[p] = SEG_NO_PIXEL;
}

extern "C" __global__ void segment_minpix(const u32* __restrict__ comp, u32* minpix, u32 width, u32 n) {
    u32 p = global_tid();
    if (p >= n) return;
    u32 c = comp[p];
    // The first raster pixel of a segment starts a run: its left neighbour is elsewhere.
    if (p % width == 0 || comp[p - 1] != c) atomicMin(&minpix[c], p);
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
    u32 p = global_tid();
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
    u32 p = global_tid();
    bool flag = p < n && minpix[comp[p]] == p;
    u32 total;
    u32 ex = seg_block_scan(flag ? 1u : 0u, &total);
    if (flag) rootlabel[comp[p]] = blocksum[blockIdx.x] + ex;
}

extern "C" __global__ void segment_labels(const u32* __restrict__ comp, const u32* __restrict__ rootlabel,
                                          u32* labels, u32 n) {
    u32 p = global_tid();
    if (p < n) labels[p] = rootlabel[comp[p]];
}

// Global round number of hierarchy level `level` (0: none; past the last level: the last).
extern "C" __global__ void segment_level_threshold(const u32* __restrict__ ctl, u32 rounds_total, u32 level,
                                                   u32* info) {
    if (global_tid() != 0) return;
    u32 k = 0, thr = 0;
    for (u32 r = 1; r <= rounds_total; ++r) {
        if (ctl[r] != 0) {
            ++k;
            if (k <= level) thr = r;
        }
    }
    info[1] = thr;
}

extern "C" __global__ void segment_level_comp(u32* comp, const u32* __restrict__ parent,
                                              const u16* __restrict__ round, u32* minpix,
                                              const u32* __restrict__ info, u32 n) {
    u32 p = global_tid();
    if (p >= n) return;
    u32 thr = info[1];
    u32 v = p;
    while ((u32)round[v] <= thr) v = parent[v];
    comp[p] = v;
    minpix[p] = SEG_NO_PIXEL;
}
