// cca: binarization, connected-component labeling and analysis on the GPU.
//
// Algorithm: HA4 of Hennequin, Lacassagne, Cabaret, Meunier, "A new Direct Connected Component
// Labeling and Analysis Algorithms for GPUs", DASIP 2018, 64-pixel version (§IV-E, Alg. 7),
// with an 8-connectivity variant, raster-order renumbering and second-order moments added.
//
// Data layout
//   bits   u64 per 64 pixels: bit i of bits[y*wpr + c] is pixel (c*64 + i, y); wpr = ceil(W/64);
//          bits past the row end are 0. Built once per frame by cca_binarize from two
//          __ballot_sync masks (pixels x and x+32 of each 64-pixel chunk), then read by every
//          labeling kernel (1 bit per pixel instead of re-reading and re-balloting the frame).
//   L      u32 per pixel: the equivalence forest of HA4 (label = linear address y*W + x). Only
//          segment starts are ever written or read. Roots are the minimum address of their tree,
//          i.e. the component's first pixel in raster order. After renumbering, a root holds
//          CCA_FLAG | final_label.
//   labels u32 per pixel: the output label image (0 background, 1..n raster order).
//   feats  9 x u64 per component (index label-1): area, Σx, Σy, Σx², Σxy, Σy², then u32
//          min_x, max_x, min_y, max_y, then Σg, the frame's grey level over the component
//          (64-bit: a 4K frame of 255s is past 32 bits) (keep in sync with FEAT_WORDS and
//          decode in gpu.rs).
//   info   u32[4]: [0] component count n, [1] threshold used.
//
// Segments (Alg. 1/7): a segment is a maximal run of set bits; inside one 64-pixel chunk, lane t
// of a warp owns the pixel pair (2t, 2t+1), so a pair holds at most one segment start. A "true
// start" has a background left neighbour (across chunks); a "chunk start" is a true start or a
// run continuing at bit 0 of the next chunk. Every chunk start gets an L entry in cca_strip
// (Alg. 3 line 10: a continuing run's bit 0 points at its true start), so relabel and features
// can treat each chunk independently.
//
// Merging (Alg. 2, 3, 4): only true starts merge. A start at x in row R unites its segment
// with the segment of the other row R' containing x when (R', x) is set; with 8-connectivity,
// otherwise with the one containing x-1 when (R', x-1) is set. For runs A (row y) and B (row
// y-1) that touch, the later-starting one sees the other at its start (or, with 8-conn, at
// start-1), so every touching pair is united; a start in both rows at the same x merges once.
// The union is Playne & Hawick's lock-free atomicMin merge; finds read L with ld.global.cg
// (L2) so they see other warps' atomics.
//
// Kernels and mapping
//   cca_hist, cca_otsu   histogram of the source value (shared-memory bins); Otsu's level by
//                        one block of 256 threads (integer prefix sums, IEEE double per level
//                        with __d*_rn intrinsics, same operation order as binarize.rs).
//   cca_binarize         one warp per 64-pixel word; motion background update in 16.16 fixed
//                        point (integer, identical to the CPU).
//   cca_strip            block (32, STRIP_H) per strip and piece of STRIP_PIECE words: one warp
//                        per row of the strip, looping over the piece's chunks (Alg. 3). Phase 1
//                        writes L at chunk starts; __syncthreads; phase 2 merges each row with
//                        the one above. Pieces (an addition to the paper, which gives one block
//                        a whole strip) multiply the warps in flight by wpr / STRIP_PIECE: the
//                        merges are chains of dependent L2 accesses, so more warps hide latency.
//   cca_merge            one warp per (strip border row, chunk) (Alg. 4), then one thread per
//                        (row, piece border): the run crossing the border, and for 8-conn the
//                        two diagonals across it inside strips.
//   cca_count_roots      one warp per row, lane per word: root bitmask and count per row.
//   cca_scan_rows        one block: exclusive scan of the row counts (row label offsets), n.
//   cca_label_roots      one warp per row, lane per word: roots get CCA_FLAG | (offset + rank),
//                        and initialise their feature record (no memset of the table).
//   cca_relabel          one warp per word: the chunk start's lane finds its root label and
//                        __shfl_sync's it to the lanes of its segment (Alg. 5).
//   cca_features         one warp per band of `rows` rows x FEAT_PIECE words: the lane of each
//                        chunk start forms the run's closed-form sums (Alg. 6 + Σx², Σxy, Σy²);
//                        the run's grey sum is a difference of a warp scan of the lanes' pair
//                        sums (a pixel pair never holds pixels of two runs);
//                        a 32-slot per-warp cache (one slot per lane) merges runs of the same
//                        label inside the band before flushing to the table with atomics, which
//                        keeps atomic contention on large components low.
// Border policy: pixels outside the image are background. No pixel indexing past W x H.
#include "common/util.cuh"

#define CCA_FLAG 0x80000000u
#define CCA_NONE 0xffffffffu
#define STRIP_H 4
#define FEAT_WORDS 9
#define FEAT_PIECE 8
#define STRIP_PIECE 8

// ---------------------------------------------------------------- bit helpers (Alg. 1, 7)

// Distance from set pixel p of word w to the first pixel of its run inside the word.
__device__ __forceinline__ int start_distance64(u64 w, int p) {
    u64 below = (~w) & ((1ull << p) - 1ull);
    return below ? p - (64 - __clzll((long long)below)) : p;
}

// Last pixel (inside the word) of the run holding set pixel p of word w.
__device__ __forceinline__ int run_end64(u64 w, int p) {
    u64 above = (~w) >> p;  // bit 0 is 0 (p is set)
    return above ? p + __ffsll((long long)above) - 2 : 63;
}

// Chunk-local segment starts.
__device__ __forceinline__ u64 chunk_starts(u64 w) { return w & ~(w << 1); }

// True segment starts, given the previous word of the row (0 at the row start).
__device__ __forceinline__ u64 true_starts(u64 w, u64 prev) { return w & ~((w << 1) | (prev >> 63)); }

// Position of the (single) start among the pair bits sb (bit0 -> 2t, bit1 -> 2t+1).
__device__ __forceinline__ int pair_pos(int p0, u32 sb) { return p0 + ((sb & 1u) ? 0 : 1); }

__device__ __forceinline__ u64 sum_squares_to(u64 m) { return m * (m + 1ull) * (2ull * m + 1ull) / 6ull; }

__device__ __forceinline__ u32 warp_sum_u32(u32 v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// ---------------------------------------------------------------- binarization

// Source value of pixel k: the frame, or |f - round(bg)| (0 when seeding).
__device__ __forceinline__ u32 source_value(const u8* frame, const u32* bg, u32 k, int motion, int seed) {
    u32 f = frame[k];
    if (!motion || seed) return motion ? 0u : f;
    int b = (int)((bg[k] + 32768u) >> 16);
    int d = (int)f - b;
    return (u32)(d < 0 ? -d : d);
}

extern "C" __global__ void cca_hist(const u8* __restrict__ frame, const u32* __restrict__ bg, u32* hist, int n,
                                    int motion, int seed) {
    __shared__ u32 h[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) h[i] = 0;
    __syncthreads();
    for (u32 k = global_tid(); k < (u32)n; k += global_threads()) {
        atomicAdd(&h[source_value(frame, bg, k, motion, seed)], 1u);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
        if (h[i]) atomicAdd(&hist[i], h[i]);
    }
}

// One block of 256 threads. Reads and clears hist; writes info[1].
extern "C" __global__ void cca_otsu(u32* hist, u32* info) {
    __shared__ unsigned long long sw[256];
    __shared__ unsigned long long sm[256];
    __shared__ double bs[256];
    __shared__ int bi[256];
    const int i = threadIdx.x;
    const u64 h = hist[i];
    hist[i] = 0;
    sw[i] = h;
    sm[i] = h * (u64)i;
    for (int off = 1; off < 256; off <<= 1) {
        __syncthreads();
        u64 a = i >= off ? sw[i - off] : 0ull;
        u64 b = i >= off ? sm[i - off] : 0ull;
        __syncthreads();
        sw[i] += a;
        sm[i] += b;
    }
    __syncthreads();
    const u64 n = sw[255], s = sm[255], w0 = sw[i], m0 = sm[i];
    double sigma = 0.0;
    if (n > 0) {
        const double eps = 1.1920928955078125e-07;  // FLT_EPSILON
        const double one_minus_eps = __dsub_rn(1.0, eps);
        double q1 = __ddiv_rn((double)w0, (double)n);
        double q2 = __dsub_rn(1.0, q1);
        if (!(q1 < eps || q2 < eps || q1 > one_minus_eps || q2 > one_minus_eps)) {
            double mu1 = __ddiv_rn((double)m0, (double)w0);
            double mu2 = __ddiv_rn((double)(s - m0), (double)(n - w0));
            double d = __dsub_rn(mu1, mu2);
            sigma = __dmul_rn(__dmul_rn(__dmul_rn(q1, q2), d), d);
        }
    }
    bs[i] = sigma;
    bi[i] = i;
    for (int half = 128; half > 0; half >>= 1) {
        __syncthreads();
        if (i < half) {
            double o = bs[i + half];
            int oi = bi[i + half];
            if (o > bs[i] || (o == bs[i] && oi < bi[i])) {
                bs[i] = o;
                bi[i] = oi;
            }
        }
    }
    if (i == 0) info[1] = bs[0] > 0.0 ? (u32)bi[0] : 0u;
}

// One warp per 64-pixel word. Threshold: info[1] when use_otsu, else t_fixed (then stored in
// info[1]). Updates the motion background in place (seeds it when seed != 0).
extern "C" __global__ void cca_binarize(const u8* __restrict__ frame, u32* bg, u64* bits, u32* info, int width,
                                        int height, int wpr, u32 t_fixed, int use_otsu, int dark, int motion,
                                        int seed, u32 alpha) {
    const int lane = threadIdx.x & 31;
    const u32 t = use_otsu ? info[1] : t_fixed;
    if (!use_otsu && global_tid() == 0) info[1] = t_fixed;
    const u32 words = (u32)height * (u32)wpr;
    const u32 nwarps = global_threads() >> 5;
    for (u32 wi = global_tid() >> 5; wi < words; wi += nwarps) {
        const u32 y = wi / (u32)wpr, c = wi - y * (u32)wpr;
        bool f[2] = {false, false};
        for (int half = 0; half < 2; ++half) {
            const u32 x = c * 64u + (u32)(half * 32 + lane);
            if (x < (u32)width) {
                const u32 k = y * (u32)width + x;
                const u32 s = source_value(frame, bg, k, motion, seed);
                f[half] = dark ? (s <= t) : (s > t);
                if (motion) {
                    const long long fv = (long long)frame[k] << 16;
                    if (seed) {
                        bg[k] = (u32)fv;
                    } else {
                        const long long b = (long long)bg[k];
                        bg[k] = (u32)(b + (((fv - b) * (long long)alpha) >> 16));
                    }
                }
            }
        }
        const u32 lo = __ballot_sync(FULL_MASK, f[0]);
        const u32 hi = __ballot_sync(FULL_MASK, f[1]);
        if (lane == 0) bits[wi] = (u64)lo | ((u64)hi << 32);
    }
}

// ---------------------------------------------------------------- union-find (Alg. 2)

__device__ __forceinline__ u32 find_root(const u32* L, u32 a) {
    u32 p = __ldcg(L + a);
    while (p != a) {
        a = p;
        p = __ldcg(L + a);
    }
    return a;
}

__device__ void merge(u32* L, u32 a, u32 b) {
    while (true) {
        a = find_root(L, a);
        b = find_root(L, b);
        if (a == b) return;
        if (a < b) {
            const u32 old = atomicMin(L + b, a);
            if (old == b) return;
            b = old;
        } else {
            const u32 old = atomicMin(L + a, b);
            if (old == a) return;
            a = old;
        }
    }
}

// Address of the chunk start of the run holding pixel p (set) of row word w at address k0 + p;
// p == -1 means bit 63 of the previous word `prev` (at address k0 - 1).
__device__ __forceinline__ u32 segment_at(u64 w, u64 prev, u32 k0, int p) {
    if (p >= 0) return k0 + (u32)(p - start_distance64(w, p));
    return k0 - 1u - (u32)start_distance64(prev, 63);
}

// The segment of row word `o` (previous word `op`, bit-0 address `ko`) that a start at p of
// the other row touches, or CCA_NONE.
__device__ __forceinline__ u32 touching(u64 o, u64 op, u32 ko, int p, int conn8) {
    if ((o >> p) & 1ull) return segment_at(o, op, ko, p);
    if (conn8) {
        if (p > 0) {
            if ((o >> (p - 1)) & 1ull) return segment_at(o, op, ko, p - 1);
        } else if (op >> 63) {
            return segment_at(o, op, ko, -1);
        }
    }
    return CCA_NONE;
}

// Merges the runs of chunk c of rows y (word wl, previous word pl) and y-1 (wu, pu).
__device__ __forceinline__ void merge_chunk(u32* L, u64 wl, u64 wu, u64 pl, u64 pu, u32 y, u32 c, u32 width,
                                            int lane, int conn8) {
    // Warp-uniform early exit when no pixel pair of the two rows touches inside this chunk
    // (8-conn also: lower bit 0 with upper bit 63 of the previous chunk, and the converse).
    const u64 touch = conn8 ? ((wl & (wu | (wu << 1) | (wu >> 1) | (pu >> 63))) | (wu & (pl >> 63))) : (wl & wu);
    if (touch == 0ull) return;
    const u32 kl0 = y * width + c * 64u;
    const u32 ku0 = kl0 - width;
    const u64 tl = true_starts(wl, pl);
    const u64 tu = true_starts(wu, pu);
    const int p0 = 2 * lane;
    const u32 sbl = (u32)(tl >> p0) & 3u;
    const u32 sbu = (u32)(tu >> p0) & 3u;
    if (sbl) {
        const int p = pair_pos(p0, sbl);
        const u32 other = touching(wu, pu, ku0, p, conn8);
        if (other != CCA_NONE) merge(L, kl0 + (u32)p, other);
    }
    if (sbu) {
        const int p = pair_pos(p0, sbu);
        if (!((tl >> p) & 1ull)) {  // a start in both rows at p was merged above
            const u32 other = touching(wl, pl, kl0, p, conn8);
            if (other != CCA_NONE) merge(L, ku0 + (u32)p, other);
        }
    }
}

// ---------------------------------------------------------------- HA4 labeling (Alg. 3, 4)

extern "C" __global__ void cca_strip(const u64* __restrict__ bits, u32* L, int width, int height, int wpr,
                                     int conn8) {
    const int lane = threadIdx.x;
    const u32 y = blockIdx.x * STRIP_H + threadIdx.y;
    const bool row_ok = y < (u32)height;
    const u64* row = bits + (size_t)y * (size_t)wpr;
    // This block's piece of the strip: words [cb, ce). Piece borders act as image borders
    // here; cca_merge links across them.
    const int cb = blockIdx.y * STRIP_PIECE;
    const int ce = imin(cb + STRIP_PIECE, wpr);
    if (row_ok) {
        // Phase 1: L at every chunk start (true starts point at themselves, continuations at
        // their true start, Alg. 3 line 10).
        const u32 base = y * (u32)width;
        const int p0 = 2 * lane;
        u32 carry = 0;  // length of the run ending at bit 63 of the previous words
        for (int c = cb; c < ce; ++c) {
            const u64 w = row[c];
            const u32 sb = (u32)(chunk_starts(w) >> p0) & 3u;
            if (sb) {
                const int p = pair_pos(p0, sb);
                const u32 k = base + (u32)c * 64u + (u32)p;
                L[k] = (p == 0 && carry) ? k - carry : k;
            }
            carry = (w == ~0ull) ? carry + 64u : (u32)__clzll((long long)~w);
        }
    }
    __syncthreads();
    if (row_ok && threadIdx.y > 0) {
        // Phase 2: merge with the row above, inside the strip.
        const u64* up = row - wpr;
        u64 pl = 0, pu = 0;
        for (int c = cb; c < ce; ++c) {
            const u64 wl = row[c], wu = up[c];
            merge_chunk(L, wl, wu, pl, pu, y, (u32)c, (u32)width, lane, conn8);
            pl = wl;
            pu = wu;
        }
    }
}

// Links across the piece border at word c of row y: the run continuing over the border, and
// (8-conn, rows inside a strip; strip border rows are whole-row merged) both diagonals.
__device__ void merge_piece_border(u32* L, const u64* bits, int wpr, u32 width, u32 y, u32 c, int conn8) {
    const u64* row = bits + (size_t)y * (size_t)wpr;
    const u64 w = row[c], prev = row[c - 1];
    const u32 k0 = y * width + c * 64u;
    if ((w & 1ull) && (prev >> 63)) merge(L, segment_at(w, prev, k0, -1), k0);
    if (conn8 && (y % STRIP_H) != 0) {
        // A diagonal is needed only when neither other pixel of the 2x2 block is set (else a
        // 4-connected path through it is linked already).
        const u64* up = row - wpr;
        const u64 wu = up[c], pu = up[c - 1];
        const u32 ku0 = k0 - width;
        const bool a = w & 1ull, b = prev >> 63, cu = wu & 1ull, d = pu >> 63;
        if (a && d && !b && !cu) merge(L, k0, segment_at(wu, pu, ku0, -1));
        if (b && cu && !a && !d) merge(L, segment_at(w, prev, k0, -1), ku0);
    }
}

// Warps over (strip border row, word) (Alg. 4), then threads over (row, piece border).
extern "C" __global__ void cca_merge(const u64* __restrict__ bits, u32* L, int width, int height, int wpr,
                                     int conn8) {
    const int lane = threadIdx.x & 31;
    const u32 borders = (u32)(height - 1) / STRIP_H;
    const u32 total = borders * (u32)wpr;
    const u32 nwarps = global_threads() >> 5;
    for (u32 wi = global_tid() >> 5; wi < total; wi += nwarps) {
        const u32 b = wi / (u32)wpr, c = wi - b * (u32)wpr;
        const u32 y = (b + 1) * STRIP_H;
        const u64* row = bits + (size_t)y * (size_t)wpr;
        const u64* up = row - wpr;
        const u64 pl = c ? row[c - 1] : 0ull;
        const u64 pu = c ? up[c - 1] : 0ull;
        merge_chunk(L, row[c], up[c], pl, pu, y, c, (u32)width, lane, conn8);
    }
    const u32 pb = ((u32)wpr + STRIP_PIECE - 1) / STRIP_PIECE - 1;  // piece borders per row
    const u32 items = pb * (u32)height;
    for (u32 i = global_tid(); i < items; i += global_threads()) {
        const u32 y = i / pb, j = i - y * pb;
        merge_piece_border(L, bits, wpr, (u32)width, y, (j + 1) * STRIP_PIECE, conn8);
    }
}

// ---------------------------------------------------------------- raster-order renumbering

extern "C" __global__ void cca_count_roots(const u64* __restrict__ bits, const u32* __restrict__ L, u64* roots,
                                           u32* rowcount, int width, int height, int wpr) {
    const int lane = threadIdx.x & 31;
    const u32 nwarps = global_threads() >> 5;
    for (u32 y = global_tid() >> 5; y < (u32)height; y += nwarps) {
        const u64* row = bits + (size_t)y * (size_t)wpr;
        u32 total = 0;
        for (int c0 = 0; c0 < wpr; c0 += 32) {
            const int c = c0 + lane;
            u32 cnt = 0;
            if (c < wpr) {
                u64 ts = true_starts(row[c], c ? row[c - 1] : 0ull);
                u64 r = 0;
                const u32 k0 = y * (u32)width + (u32)c * 64u;
                while (ts) {
                    const int p = __ffsll((long long)ts) - 1;
                    ts &= ts - 1ull;
                    if (L[k0 + p] == k0 + (u32)p) r |= 1ull << p;
                }
                roots[(size_t)y * wpr + c] = r;
                cnt = (u32)__popcll((long long)r);
            }
            total += warp_sum_u32(cnt);
        }
        if (lane == 0) rowcount[y] = total;
    }
}

// One block of 1024 threads: rowoff = exclusive scan of rowcount; info[0] = total.
extern "C" __global__ void cca_scan_rows(const u32* __restrict__ rowcount, u32* rowoff, u32* info, int height) {
    __shared__ u32 part[1024];
    const int t = threadIdx.x;
    const int per = (height + 1023) / 1024;
    const int b = t * per, e = imin(b + per, height);
    u32 s = 0;
    for (int i = b; i < e; ++i) s += rowcount[i];
    part[t] = s;
    for (int off = 1; off < 1024; off <<= 1) {
        __syncthreads();
        const u32 a = t >= off ? part[t - off] : 0u;
        __syncthreads();
        part[t] += a;
    }
    __syncthreads();
    u32 run = part[t] - s;
    for (int i = b; i < e; ++i) {
        rowoff[i] = run;
        run += rowcount[i];
    }
    if (t == 1023) info[0] = part[1023];
}

extern "C" __global__ void cca_label_roots(const u64* __restrict__ roots, const u32* __restrict__ rowoff, u32* L,
                                           u64* feats, int width, int height, int wpr, int init_feats) {
    const int lane = threadIdx.x & 31;
    const u32 nwarps = global_threads() >> 5;
    for (u32 y = global_tid() >> 5; y < (u32)height; y += nwarps) {
        u32 running = rowoff[y];
        for (int c0 = 0; c0 < wpr; c0 += 32) {
            const int c = c0 + lane;
            u64 r = c < wpr ? roots[(size_t)y * wpr + c] : 0ull;
            const u32 cnt = (u32)__popcll((long long)r);
            const u32 incl = warp_inclusive_scan(cnt);
            u32 lab = running + incl - cnt;
            const u32 k0 = y * (u32)width + (u32)c * 64u;
            while (r) {
                const int p = __ffsll((long long)r) - 1;
                r &= r - 1ull;
                ++lab;
                L[k0 + p] = CCA_FLAG | lab;
                if (init_feats) {
                    u64* rec = feats + (size_t)(lab - 1u) * FEAT_WORDS;
                    const u64 x = (u64)c * 64ull + (u64)p;
                    rec[0] = 0; rec[1] = 0; rec[2] = 0; rec[3] = 0; rec[4] = 0; rec[5] = 0;
                    rec[6] = x | (x << 32);
                    rec[7] = (u64)y | ((u64)y << 32);
                    rec[8] = 0;
                }
            }
            running += __shfl_sync(FULL_MASK, incl, 31);
        }
    }
}

// ---------------------------------------------------------------- final labels (Alg. 5)

extern "C" __global__ void cca_relabel(const u64* __restrict__ bits, const u32* __restrict__ L, u32* labels,
                                       int width, int height, int wpr) {
    const int lane = threadIdx.x & 31;
    const int p0 = 2 * lane;
    const u32 words = (u32)height * (u32)wpr;
    const u32 nwarps = global_threads() >> 5;
    for (u32 wi = global_tid() >> 5; wi < words; wi += nwarps) {
        const u32 y = wi / (u32)wpr, c = wi - y * (u32)wpr;
        const u64 w = bits[wi];
        const u32 k0 = y * (u32)width + c * 64u;
        const u32 pr = (u32)(w >> p0) & 3u;
        u32 lab = 0;
        const u32 sb = (u32)(chunk_starts(w) >> p0) & 3u;
        if (sb) {
            u32 v = L[k0 + (u32)pair_pos(p0, sb)];
            while (!(v & CCA_FLAG)) {
                const u32 nv = L[v];
                if (nv == v) break;  // unflagged root: cannot happen; label 0 rather than hang
                v = nv;
            }
            lab = (v & CCA_FLAG) ? (v & ~CCA_FLAG) : 0u;
        }
        int src = 0;
        if (pr) {
            const int rep = (pr & 1u) ? p0 : p0 + 1;
            src = (rep - start_distance64(w, rep)) >> 1;
        }
        const u32 l = __shfl_sync(FULL_MASK, lab, src);
        const u32 x = c * 64u + (u32)p0;
        if (x < (u32)width) labels[k0 + p0] = (pr & 1u) ? l : 0u;
        if (x + 1u < (u32)width) labels[k0 + p0 + 1] = (pr & 2u) ? l : 0u;
    }
}

// ---------------------------------------------------------------- features (Alg. 6 + moments)

struct Slot {
    u32 label, area, min_x, max_x, max_y;
    u64 sx, sxx, sy, sxy, syy, sg;
};

__device__ __forceinline__ void flush_slot(u64* feats, const Slot& s) {
    u64* rec = feats + (size_t)(s.label - 1u) * FEAT_WORDS;
    atomicAdd((unsigned long long*)rec + 0, (unsigned long long)s.area);
    atomicAdd((unsigned long long*)rec + 1, (unsigned long long)s.sx);
    atomicAdd((unsigned long long*)rec + 2, (unsigned long long)s.sy);
    atomicAdd((unsigned long long*)rec + 3, (unsigned long long)s.sxx);
    atomicAdd((unsigned long long*)rec + 4, (unsigned long long)s.sxy);
    atomicAdd((unsigned long long*)rec + 5, (unsigned long long)s.syy);
    atomicAdd((unsigned long long*)rec + 8, (unsigned long long)s.sg);
    u32* r32 = (u32*)rec;
    atomicMin(r32 + 12, s.min_x);
    atomicMax(r32 + 13, s.max_x);
    atomicMax(r32 + 15, s.max_y);  // min_y is the root's row, set at initialisation
}

// One warp per block of `rows` rows x FEAT_PIECE words, rows outer, words inner.
extern "C" __global__ void cca_features(const u64* __restrict__ bits, const u32* __restrict__ labels,
                                        const u8* __restrict__ frame, u64* feats, int width, int height,
                                        int wpr, int rows) {
    const int lane = threadIdx.x & 31;
    const int p0 = 2 * lane;
    const u32 pieces = ((u32)wpr + FEAT_PIECE - 1) / FEAT_PIECE;
    const u32 bands = ((u32)height + (u32)rows - 1) / (u32)rows;
    const u32 total = bands * pieces;
    const u32 nwarps = global_threads() >> 5;
    for (u32 wi = global_tid() >> 5; wi < total; wi += nwarps) {
        const u32 band = wi / pieces, piece = wi - band * pieces;
        const u32 c_begin = piece * FEAT_PIECE;
        const u32 c_end = c_begin + FEAT_PIECE < (u32)wpr ? c_begin + FEAT_PIECE : (u32)wpr;
        const u32 y_begin = band * (u32)rows;
        const u32 y_end = y_begin + (u32)rows < (u32)height ? y_begin + (u32)rows : (u32)height;
        Slot slot = {0u, 0u, 0u, 0u, 0u, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull};
        int victim = 0;
        for (u32 y = y_begin; y < y_end; ++y)
        for (u32 c = c_begin; c < c_end; ++c) {
            const u64 w = bits[(size_t)y * wpr + c];
            if (w == 0ull) continue;
            const u32 sb = (u32)(chunk_starts(w) >> p0) & 3u;
            // Grey of this lane's pixel pair (set bits only: they lie inside the row).
            const size_t k0 = (size_t)y * width + c * 64u + (u32)p0;
            const u32 pg = (((w >> p0) & 1ull) ? (u32)frame[k0] : 0u) +
                           (((w >> (p0 + 1)) & 1ull) ? (u32)frame[k0 + 1] : 0u);
            const u32 pg_incl = warp_inclusive_scan(pg);
            u32 lab = 0, x0 = 0, n = 0, end_lane = (u32)lane;
            if (sb) {
                const int p = pair_pos(p0, sb);
                const int e = run_end64(w, p);
                x0 = c * 64u + (u32)p;
                n = (u32)(e - p + 1);
                end_lane = (u32)e >> 1;
                lab = labels[(size_t)y * width + x0];
            }
            // The run covers pairs lane..end_lane: its grey sum is their part of the scan.
            const u32 g = __shfl_sync(FULL_MASK, pg_incl, end_lane) - (pg_incl - pg);
            u32 todo = __ballot_sync(FULL_MASK, sb != 0u);
            while (todo) {
                const int j = __ffs(todo) - 1;
                todo &= todo - 1u;
                const u32 L_ = __shfl_sync(FULL_MASK, lab, j);
                const u32 X0 = __shfl_sync(FULL_MASK, x0, j);
                const u32 N = __shfl_sync(FULL_MASK, n, j);
                const u64 G = __shfl_sync(FULL_MASK, g, j);
                const u32 X1 = X0 + N - 1u;
                const u64 yy = y;
                const u64 sx = ((u64)X0 + (u64)X1) * (u64)N / 2ull;
                const u64 sxx = sum_squares_to(X1) - (X0 ? sum_squares_to(X0 - 1u) : 0ull);
                const u32 hit = __ballot_sync(FULL_MASK, slot.label == L_);
                if (hit) {
                    if (lane == __ffs(hit) - 1) {
                        slot.area += N;
                        slot.sx += sx;
                        slot.sxx += sxx;
                        slot.sy += yy * N;
                        slot.sxy += yy * sx;
                        slot.syy += yy * yy * N;
                        slot.sg += G;
                        slot.min_x = X0 < slot.min_x ? X0 : slot.min_x;
                        slot.max_x = X1 > slot.max_x ? X1 : slot.max_x;
                        slot.max_y = y;  // rows are visited in increasing order
                    }
                } else {
                    if (lane == victim) {
                        if (slot.label) flush_slot(feats, slot);
                        slot.label = L_;
                        slot.area = N;
                        slot.sx = sx;
                        slot.sxx = sxx;
                        slot.sy = yy * N;
                        slot.sxy = yy * sx;
                        slot.syy = yy * yy * N;
                        slot.sg = G;
                        slot.min_x = X0;
                        slot.max_x = X1;
                        slot.max_y = y;
                    }
                    victim = (victim + 1) & 31;
                }
            }
        }
        if (slot.label) flush_slot(feats, slot);
    }
}
