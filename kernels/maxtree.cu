// maxtree.cu — max-tree construction, attributes and attribute filtering on the GPU.
//
// Algorithm: Blin, Carlinet, Lemaitre, Lacassagne, Géraud, "Max-tree Computation on GPUs" (2022),
// with tile details from Blin's 2021 report. Output: the canonical parent image of §2.2 with the
// total order p ≺ q ⇔ f(p) < f(q) or (f(p) = f(q) and p > q) (raster index): the canonical element
// of a node is its largest raster index. Bit-identical to the CPU union-find (src/ops/maxtree/cpu.rs).
//
// Records (§4.2). parent(x) is a packed record [level(x) | level(parent) | parent index + 1], so
// that comparing records as integers compares candidate parents by (level, index): atomicMax picks
// the closest (highest) parent and, among equal levels, the largest index. 0 in the index field is
// the null parent (root). Local (shared) records: 8-bit images use 32 bits [8|8|16] (§4.2),
// 16-bit images 64 bits [16|16|32] (§5.3, "64-bit records"). Global records are always 64 bits
// [level 16 @48 | parent level 16 @32 | parent index + 1 @0].
//
// Canonical form without a final sort. Invariant: every link between two pixels of the same level
// goes from a smaller to a larger raster index. The 1D column trees are built bottom-to-top (so a
// flat run links to its bottom pixel) and CONNECT swaps (a, b) so that b ≺ a never holds when it
// writes parent(b) ← a (Alg. 6 line 6). Then the level root of every node is its largest index,
// i.e. the canonical element, and flattening (Alg. 5) yields exactly the §2.2 parent image.
//
// Pipeline (one stream, no host sync):
//  maxtree_local_{u8,u16}  (§5.1, Alg. 2, Fig. 8) one block per MT_TW x tile_h tile (tile_h is a
//      launch parameter, MaxTreeTuning::tile_height: 16 by default, up to 128; local indices must
//      fit 16 bits), one thread per column. (a) load the tile into shared records; (b) 1D
//      max-tree of each column (Menotti's algorithm, the stack threaded through the not-yet-set
//      parent fields, so no extra storage);
//      (c) each thread but the last merges its column with the next one by concurrent lock-free
//      CONNECT (Alg. 6, atomicMax on shared records) over the simplified edge set (§5.2);
//      (d) flatten in shared memory; (e) write 64-bit global records with global indices.
//  maxtree_merge  (§4.3) one thread per position along every tile border (vertical borders within
//      a tile row, horizontal borders within a tile column) plus, in 8-connectivity, one per tile
//      corner for the two diagonals crossing it. CONNECT (Alg. 6) on global records, atomicMax on
//      64 bits. Border sequences use the grid simplification of §5.2: Props. 1-2 in 8-connectivity
//      (at most one edge per position) and, in 4-connectivity, Prop. 3 in a corrected form: with
//      w_k = min(f(u_k), f(v_k)), edge k is kept iff (k = 0 or w_{k-1} < w_k) and
//      (k = n-1 or w_{k+1} <= w_k) — as printed in the paper ("removed if a neighbour edge has a
//      smaller min") it drops needed edges; both forms were checked by brute force. Each sequence
//      stays inside one tile, so the "vertical" paths the propositions rely on are intra-tile
//      paths, already exact in the local trees.
//  maxtree_flatten  Alg. 5 FLATTEN: parent(p) ← level root of parent(p); writes the u32 parent
//      image (root → itself), shortcuts the records in place (benign: 64-bit stores of equivalent
//      links), numbers the canonical elements (block-aggregated atomic counter: node ids);
//      MT_FLAT pixels per thread.
//  maxtree_nodes / maxtree_pixels / maxtree_double / maxtree_attr  attributes without the tree
//      leaving the GPU: per-node init; per-pixel own contributions (one thread per pixel of a
//      256-pixel row chunk, one atomic per run of one node); subtree sums / maxima / minima
//      by doubling along ancestor pointers (BITS rounds, O(nodes) work each, no serial walk up the
//      tree — a 16-bit tree is thousands of nodes deep); the attribute of each node. The max rule
//      adds maxtree_amax rounds (subtree maximum of the attribute).
//  maxtree_keep / maxtree_jump / maxtree_restitute_{u8,u16}  filtering rules: each node gets an
//      affine word value(n) = a(n)·value(J(n)) + b(n), J = parent, solved by in-place pointer
//      jumping (a packed 64-bit word per node, so a racing reader sees a consistent pair); then
//      one pass per pixel writes the filtered image and the residue.
//  maxtree_residue_stats_{u8,u16}  the frame's summary without reading the residue back: stats[0]
//      = pixels with a non-zero residue, stats[1] = Σ residue (both zeroed by the host first),
//      stats[2] = the node count. Grid-stride over the pixels, warp-shuffle then shared-memory
//      block reduction in 64 bits, one pair of 64-bit atomics a block.
//
// Thread-to-pixel mapping: local — blockDim.x = MT_TW, thread = tile column, loops over the rows
// (coalesced row loads/stores). Others — 1D grids, one thread per pixel / border position / node
// (node kernels: grid-stride loops over the node count, read from device memory).
// Border policy: pixels outside the image have no neighbours (partial tiles are handled by tw, th).
// Shared memory (dynamic): local kernel MT_TW*tile_h records, row-major (ly*MT_TW + lx): u32 for
//   8-bit (4 KiB at tile_h 16), u64 for 16-bit (8 KiB); column-private accesses are bank-conflict
//   free. maxtree_flatten: 8 bytes (block counter and base).
// The min-tree is the max-tree of f ^ inv (inv = 0xFF / 0xFFFF), applied on every image read.
//
#include "common/util.cuh"

#define MT_TW 64
#define MT_NONE 0xFFFFFFFFu

extern __shared__ u64 mt_smem[];
__device__ __forceinline__ u32 ld_vol(const u32* p) { return *(const volatile u32*)p; }
__device__ __forceinline__ u64 ld_vol(const u64* p) { return *(const volatile u64*)p; }
__device__ __forceinline__ void st_vol(u32* p, u32 v) { *(volatile u32*)p = v; }
__device__ __forceinline__ void st_vol(u64* p, u64 v) { *(volatile u64*)p = v; }

// ---- packed records -----------------------------------------------------------------------
template <typename R> struct Rec;
template <> struct Rec<u32> {  // 8-bit levels, 16-bit local index (shared memory, 8-bit images)
    static __device__ __forceinline__ u32 lv(u32 r) { return r >> 24; }
    static __device__ __forceinline__ u32 plv(u32 r) { return (r >> 16) & 0xFFu; }
    static __device__ __forceinline__ u32 idx1(u32 r) { return r & 0xFFFFu; }
    static __device__ __forceinline__ u32 make(u32 lv, u32 plv, u32 idx1) { return (lv << 24) | (plv << 16) | idx1; }
};
template <> struct Rec<u64> {  // 16-bit levels, 32-bit index (shared for 16-bit, and all global)
    static __device__ __forceinline__ u32 lv(u64 r) { return (u32)(r >> 48); }
    static __device__ __forceinline__ u32 plv(u64 r) { return (u32)(r >> 32) & 0xFFFFu; }
    static __device__ __forceinline__ u32 idx1(u64 r) { return (u32)r; }
    static __device__ __forceinline__ u64 make(u32 lv, u32 plv, u32 idx1) {
        return ((u64)lv << 48) | ((u64)plv << 32) | (u64)idx1;
    }
};
typedef Rec<u64> G;  // global records

// ---- CONNECT (Alg. 6) ---------------------------------------------------------------------
// Merges the trees of a and b (neighbours) in the record array S. Lock-free: the only write is an
// atomicMax of parent(b); a lost race leaves a better parent in place and the loop continues with it.
template <typename R>
__device__ void connect(R* S, u32 a, u32 b) {
    typedef Rec<R> F;
    for (;;) {
        R ra = ld_vol(S + a), rb = ld_vol(S + b);
        if (F::lv(rb) < F::lv(ra)) {
            u32 t = a; a = b; b = t;
            R tr = ra; ra = rb; rb = tr;
        }
        // a ← FIND-LEVEL-ROOT(a): climb while the parent has the same level.
        while (F::idx1(ra) != 0 && F::plv(ra) == F::lv(ra)) {
            a = F::idx1(ra) - 1;
            ra = ld_vol(S + a);
        }
        const u32 la = F::lv(ra);
        // b ← FIND-PEAK-ROOT(b, f(a)): climb while the parent's level is >= f(a).
        while (F::idx1(rb) != 0 && F::plv(rb) >= la) {
            b = F::idx1(rb) - 1;
            rb = ld_vol(S + b);
        }
        if (a == b) return;
        // Make a ≺ b (f(b) >= f(a) here; on a tie the larger index becomes the parent).
        if (F::lv(rb) == la && b > a) {
            u32 t = a; a = b; b = t;
            R tr = ra; ra = rb; rb = tr;
        }
        const R old = atomicMax(S + b, F::make(F::lv(rb), F::lv(ra), a + 1));
        if (F::idx1(old) == 0) return;  // b was a root: now linked under a.
        b = F::idx1(old) - 1;           // connect a with b's former (or better) parent.
    }
}

// ---- grid simplification (§5.2) ------------------------------------------------------------
// For position k of a border sequence (u_k | v_k), k = 0..n-1, with levels fu[0..2] / fv[0..2] of
// positions k-1, k, k+1 (entries outside 0..n-1 are ignored), returns the one edge to connect as
// (du, dv) offsets in {-1, 0} of u and v, or false.
__device__ __forceinline__ bool border_edge(const u32* fu, const u32* fv, u32 k, u32 n, int eight, int* du,
                                            int* dv) {
    *du = 0; *dv = 0;
    const bool has_prev = k > 0, has_next = k + 1 < n;
    if (!eight) {
        const u32 w = umin(fu[1], fv[1]);
        if (has_prev && umin(fu[0], fv[0]) >= w) return false;
        if (has_next && umin(fu[2], fv[2]) > w) return false;
        return true;
    }
    if (!has_prev) {  // E'_0 = {(u_0, v_0)}, then Prop. 2.
        return !(has_next && (fu[1] < fu[2] || fv[1] < fv[2]));
    }
    const bool up = fu[1] > fu[0], vp = fv[1] > fv[0];
    if (up && vp) return !(has_next && (fu[1] < fu[2] || fv[1] < fv[2]));  // Prop. 1 case 1, Prop. 2
    if (!up && vp) { *du = -1; return true; }                               // (u_{k-1}, v_k)
    if (up && !vp) { *dv = -1; return true; }                               // (u_k, v_{k-1})
    return false;
}

// ---- local trees (§5.1) ----------------------------------------------------------------------
// 1D max-tree of column lx (th pixels) scanned bottom to top (Alg. 2 with the stack linked through
// the parent fields of the stacked pixels, which are not set until popped).
template <typename R>
__device__ void column_tree(R* S, u32 lx, u32 th) {
    typedef Rec<R> F;
    u32 r = (th - 1) * MT_TW + lx;
    u32 fr = F::lv(S[r]);
    u32 top1 = 0;  // stack top + 1 (0: empty)
    for (int ly = (int)th - 2; ly >= 0; --ly) {
        const u32 p = (u32)ly * MT_TW + lx;
        const u32 fp = F::lv(S[p]);
        if (fr < fp) {  // push r
            S[r] = F::make(fr, 0, top1);
            top1 = r + 1;
            r = p;
            fr = fp;
        } else if (fr == fp) {
            S[p] = F::make(fp, fr, r + 1);
        } else {
            while (top1 != 0) {  // UNSTACK(r, f(p))
                const u32 t = top1 - 1;
                const R st = S[t];
                const u32 ft = F::lv(st);
                if (fp > ft) break;
                S[r] = F::make(fr, ft, t + 1);
                top1 = F::idx1(st);
                r = t;
                fr = ft;
            }
            if (fr > fp) {
                S[r] = F::make(fr, fp, p + 1);
                r = p;
                fr = fp;
            } else {
                S[p] = F::make(fp, fr, r + 1);
            }
        }
    }
    while (top1 != 0) {
        const u32 t = top1 - 1;
        const R st = S[t];
        S[r] = F::make(fr, F::lv(st), t + 1);
        top1 = F::idx1(st);
        r = t;
        fr = F::lv(st);
    }
    S[r] = F::make(fr, 0, 0);
}

// Level root of x's parent (the canonical parent once everything is merged); null stays null.
template <typename R>
__device__ __forceinline__ R flattened(const R* S, R r) {
    typedef Rec<R> F;
    if (F::idx1(r) == 0) return r;
    u32 q = F::idx1(r) - 1;
    R rq = ld_vol(S + q);
    while (F::idx1(rq) != 0 && F::plv(rq) == F::lv(rq)) {
        q = F::idx1(rq) - 1;
        rq = ld_vol(S + q);
    }
    return F::make(F::lv(r), F::plv(r), q + 1);
}

// The same on global records with plain (cacheable) loads, for maxtree_flatten: during that
// kernel records only change by shortcuts to a same-level ancestor (level fields never change), so
// a stale read is still a valid link and the climb ends at the same level root.
__device__ __forceinline__ u64 flattened_global(const u64* S, u64 r) {
    if (G::idx1(r) == 0) return r;
    u32 q = G::idx1(r) - 1;
    u64 rq = S[q];
    while (G::idx1(rq) != 0 && G::plv(rq) == G::lv(rq)) {
        q = G::idx1(rq) - 1;
        rq = S[q];
    }
    return G::make(G::lv(r), G::plv(r), q + 1);
}

template <typename T, typename R>
__device__ void local_tree(const T* img, u64* grec, u32 W, u32 H, u32 tile_h, u32 inv, int eight) {
    typedef Rec<R> F;
    R* S = (R*)mt_smem;
    const u32 lx = threadIdx.x;
    const u32 x0 = blockIdx.x * MT_TW, y0 = blockIdx.y * tile_h;
    const u32 tw = umin(MT_TW, W - x0), th = umin(tile_h, H - y0);
    const bool active = lx < tw;
    // (a) load: row by row, coalesced across the block.
    if (active) {
#pragma unroll 4
        for (u32 ly = 0; ly < th; ++ly) {
            const u32 v = (u32)img[(u64)(y0 + ly) * W + x0 + lx] ^ inv;
            S[ly * MT_TW + lx] = F::make(v, 0, 0);
        }
        // (b) column max-tree, private to the thread.
        column_tree(S, lx, th);
    }
    __syncthreads();
    // (c) merge column lx with column lx + 1 (edges along the column pair, simplified).
    if (lx + 1 < tw) {
        u32 fu[3], fv[3];
        fu[1] = F::lv(S[lx]);
        fv[1] = F::lv(S[lx + 1]);
        fu[0] = fu[2] = fu[1];
        fv[0] = fv[2] = fv[1];
        for (u32 k = 0; k < th; ++k) {
            // Levels never change, so these reads need no synchronisation.
            if (k + 1 < th) {
                fu[2] = F::lv(ld_vol(S + (k + 1) * MT_TW + lx));
                fv[2] = F::lv(ld_vol(S + (k + 1) * MT_TW + lx + 1));
            }
            const u32 u = k * MT_TW + lx, v = u + 1;
            int du, dv;
            if (border_edge(fu, fv, k, th, eight, &du, &dv)) {
                connect(S, (u32)((int)u + du * MT_TW), (u32)((int)v + dv * MT_TW));
            }
            fu[0] = fu[1]; fu[1] = fu[2];
            fv[0] = fv[1]; fv[1] = fv[2];
        }
    }
    __syncthreads();
    // (d) flatten inside the tile, (e) write global records.
    if (active) {
        for (u32 ly = 0; ly < th; ++ly) {
            const u32 i = ly * MT_TW + lx;
            const R r = flattened(S, ld_vol(S + i));
            st_vol(S + i, r);
            u64 g = G::make(F::lv(r), F::plv(r), 0);
            if (F::idx1(r) != 0) {
                const u32 q = F::idx1(r) - 1;
                const u32 gq = (y0 + q / MT_TW) * W + x0 + q % MT_TW;
                g = G::make(F::lv(r), F::plv(r), gq + 1);
            }
            grec[(u64)(y0 + ly) * W + x0 + lx] = g;
        }
    }
}

// Grid (ceil(W / MT_TW), ceil(H / tile_h)), MT_TW threads, MT_TW * tile_h records of shared memory.
extern "C" __global__ void maxtree_local_u8(const u8* img, u64* grec, u32 W, u32 H, u32 tile_h, u32 inv,
                                           int eight) {
    local_tree<u8, u32>(img, grec, W, H, tile_h, inv, eight);
}
extern "C" __global__ void maxtree_local_u16(const u16* img, u64* grec, u32 W, u32 H, u32 tile_h, u32 inv,
                                            int eight) {
    local_tree<u16, u64>(img, grec, W, H, tile_h, inv, eight);
}

// ---- tile-border merge (§4.3) -----------------------------------------------------------------
// Threads [0, nv): vertical borders, t = b*H + y (border b between tile columns b and b+1).
// Threads [nv, nv+nh): horizontal borders, t = b*W + x (between tile rows b and b+1).
// Threads [nv+nh, nv+nh+nc): tile corners (8-connectivity), t = j*(ntx-1) + i.
extern "C" __global__ void maxtree_merge(u64* grec, u32 W, u32 H, u32 tile_h, int eight) {
    const u32 ntx = (W + MT_TW - 1) / MT_TW, nty = (H + tile_h - 1) / tile_h;
    const u32 nv = (ntx - 1) * H, nh = (nty - 1) * W, nc = eight ? (ntx - 1) * (nty - 1) : 0;
    u32 t = global_tid();
    if (t < nv) {
        const u32 b = t / H, y = t % H;
        const u32 xu = (b + 1) * MT_TW - 1;
        const u32 ty0 = (y / tile_h) * tile_h, n = umin(tile_h, H - ty0), k = y - ty0;
        const u32 u = y * W + xu, v = u + 1;
        u32 fu[3], fv[3];
        for (int d = -1; d <= 1; ++d) {
            const int kk = (int)k + d;
            const u32 ok = (kk >= 0 && kk < (int)n) ? (u32)((int)y + d) : y;
            fu[d + 1] = G::lv(ld_vol(grec + (u64)ok * W + xu));
            fv[d + 1] = G::lv(ld_vol(grec + (u64)ok * W + xu + 1));
        }
        int du, dv;
        if (border_edge(fu, fv, k, n, eight, &du, &dv)) {
            connect(grec, (u32)((int)u + du * (int)W), (u32)((int)v + dv * (int)W));
        }
        return;
    }
    t -= nv;
    if (t < nh) {
        const u32 b = t / W, x = t % W;
        const u32 yu = (b + 1) * tile_h - 1;
        const u32 tx0 = (x / MT_TW) * MT_TW, n = umin(MT_TW, W - tx0), k = x - tx0;
        const u32 u = yu * W + x, v = u + W;
        u32 fu[3], fv[3];
        for (int d = -1; d <= 1; ++d) {
            const int kk = (int)k + d;
            const u32 ox = (kk >= 0 && kk < (int)n) ? (u32)((int)x + d) : x;
            fu[d + 1] = G::lv(ld_vol(grec + (u64)yu * W + ox));
            fv[d + 1] = G::lv(ld_vol(grec + (u64)(yu + 1) * W + ox));
        }
        int du, dv;
        if (border_edge(fu, fv, k, n, eight, &du, &dv)) {
            connect(grec, (u32)((int)u + du), (u32)((int)v + dv));
        }
        return;
    }
    t -= nh;
    if (t < nc) {
        const u32 i = t % (ntx - 1), j = t / (ntx - 1);
        const u32 xu = (i + 1) * MT_TW - 1, yu = (j + 1) * tile_h - 1;
        const u32 p = yu * W + xu;
        connect(grec, p, p + W + 1);      // (xu, yu) - (xu+1, yu+1)
        connect(grec, p + 1, p + W);      // (xu+1, yu) - (xu, yu+1)
    }
}

// ---- flatten (Alg. 5) and node numbering ------------------------------------------------------
// parent[p] (u32, root → p), node_id[p] and node_pix[id] for canonical p; *count = nodes.
// A block of blockDim.x threads handles MT_FLAT consecutive chunks of blockDim.x pixels
// (coalesced), numbering its canonical pixels with a shared counter and one global atomicAdd.
#define MT_FLAT 8
extern "C" __global__ void maxtree_flatten(u64* grec, u32* parent, u32* node_id, u32* node_pix, u32* count, u32 N) {
    u32* s = (u32*)mt_smem;  // s[0]: block count, s[1]: block base
    if (threadIdx.x == 0) s[0] = 0;
    __syncthreads();
    const u32 base = blockIdx.x * blockDim.x * MT_FLAT + threadIdx.x;
    u32 canon_mask = 0, local[MT_FLAT];
#pragma unroll
    for (int i = 0; i < MT_FLAT; ++i) {
        const u32 p = base + (u32)i * blockDim.x;
        local[i] = 0;
        if (p < N) {
            const u64 r0 = grec[p];
            const u64 r = flattened_global(grec, r0);
            if (r != r0) st_vol(grec + p, r);
            parent[p] = G::idx1(r) == 0 ? p : G::idx1(r) - 1;
            if (G::idx1(r) == 0 || G::plv(r) < G::lv(r)) {
                canon_mask |= 1u << i;
                local[i] = atomicAdd(&s[0], 1u);
            }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) s[1] = s[0] ? atomicAdd(count, s[0]) : 0;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < MT_FLAT; ++i) {
        if (canon_mask & (1u << i)) {
            const u32 p = base + (u32)i * blockDim.x;
            const u32 id = s[1] + local[i];
            node_id[p] = id;
            node_pix[id] = p;
        }
    }
}

// ---- attributes ---------------------------------------------------------------------------------
// Attribute codes (src/ops/maxtree/mod.rs, Attribute::index): 0 area, 1 height, 2 volume,
// 3 bbox width, 4 bbox height, 5 diameter (longest bbox side), 6 diagonal.
//
// Subtree accumulation by doubling: with J_r(m) the ancestor of m at distance exactly 2^r (J_0 =
// parent) and A_r(n) the accumulation over the descendants of n at distance < 2^r,
//   A_{r+1}(n) = A_r(n) ⊕ ⨁_{m : J_r(m) = n} A_r(m),   J_{r+1}(m) = J_r(J_r(m)),
// one launch per round, BITS rounds (a root path has at most 2^BITS nodes), O(nodes) work each;
// no serial walk up the tree (16-bit trees are thousands of nodes deep).
// Buffers: q32 = [4 slots][NQ][N] u32 — NQ = 1 (area, or the max level for the height) or 4 for
// the bounding box (xmin, xmax, ymin, ymax) — and q64 = [4 slots][N] u64 (Σ levels, for the
// volume; reused for the subtree max of the attribute, the max rule). Slot 0 (CUR) holds each
// node's own A_r, touched only by the node's thread; slots 1..3 (INC) rotate: round r folds
// INC[(r+2)%3] (what round r-1 scattered) into CUR, scatters A_r into INC[r%3] of J_r(n) with one
// atomic, and resets INC[(r+1)%3] to the identity for round r+1. After R rounds
// A_R = CUR ⊕ INC[(R-1)%3].
#define NQ (attr >= 3 ? 4u : 1u)
#define Q32(s, q, n) q32[((u64)(s) * NQ + (q)) * N + (n)]
#define Q64(s, n) q64[(u64)(s) * N + (n)]
#define INC(b) (1 + (b))

// Node-id loops: grid-stride over [0, *count) (the count is written by maxtree_flatten, an
// earlier launch, so a plain load is right; it is read once per thread).
#define FOR_NODES(n, count) for (u32 n = global_tid(), n##_end = *(count); n < n##_end; n += global_threads())

__device__ __forceinline__ void q32_identity(u32* q32, u32 N, int s, u32 n, int attr) {
    if (attr <= 2) Q32(s, 0, n) = 0;
    if (attr >= 3) {
        Q32(s, 0, n) = 0xFFFFFFFFu;
        Q32(s, 1, n) = 0;
        Q32(s, 2, n) = 0xFFFFFFFFu;
        Q32(s, 3, n) = 0;
    }
}

// Per node: parent node, level, CUR and the INC slots read or written by round 0 set to the
// identity (CUR of the height: the node's own level).
extern "C" __global__ void maxtree_nodes(const u64* grec, const u32* parent, const u32* node_id, const u32* node_pix,
                                         const u32* count, u32* npar, u32* nlev, u32* q32, u64* q64, u32 N,
                                         int attr) {
    FOR_NODES(id, count) {
        const u32 p = node_pix[id];
        const u32 q = parent[p];
        npar[id] = q == p ? MT_NONE : node_id[q];
        const u32 lvl = G::lv(grec[p]);
        nlev[id] = lvl;
        q32_identity(q32, N, 0, id, attr);
        if (attr == 1) Q32(0, 0, id) = lvl;
        q32_identity(q32, N, INC(0), id, attr);
        q32_identity(q32, N, INC(2), id, attr);
        if (attr == 2) {
            Q64(INC(0), id) = 0;
            Q64(INC(2), id) = 0;
        }
    }
}

// Grid (ceil(W / 256), H), 256 threads, 1 KiB of shared memory: one thread per pixel of a
// 256-pixel row chunk (coalesced): each pixel's node (pix_node); then each run of one node in the
// chunk adds its own-pixel contributions (area, bounding box) into CUR with one atomic per run.
extern "C" __global__ void maxtree_pixels(const u64* grec, const u32* parent, const u32* node_id, u32* pix_node,
                                          u32* q32, u32 W, u32 H, int attr) {
    u32* s_id = (u32*)mt_smem;
    const u32 N = W * H;
    const u32 t = threadIdx.x, x = blockIdx.x * 256 + t, y = blockIdx.y;
    u32 id = MT_NONE;
    if (x < W) {
        const u32 p = y * W + x;
        const u64 r = grec[p];
        const bool canonical = G::idx1(r) == 0 || G::plv(r) < G::lv(r);
        id = node_id[canonical ? p : parent[p]];
        pix_node[p] = id;
    }
    s_id[t] = id;
    __syncthreads();
    if (id == MT_NONE || (t > 0 && s_id[t - 1] == id) || attr == 1) return;
    u32 len = 1;
    while (t + len < 256 && s_id[t + len] == id) ++len;
    if (attr == 0 || attr == 2) atomicAdd(&Q32(0, 0, id), len);
    if (attr >= 3) {
        atomicMin(&Q32(0, 0, id), x);
        atomicMax(&Q32(0, 1, id), x + len - 1);
        atomicMin(&Q32(0, 2, id), y);
        atomicMax(&Q32(0, 3, id), y);
    }
}

// One doubling round (see above). Round 0 derives Σ levels from the own area (every own pixel of a
// node is at the node's level).
extern "C" __global__ void maxtree_double(const u32* count, const u32* npar, const u32* nlev, u32* jb, u32* q32,
                                          u64* q64, u32 N, int round, int attr) {
    const u32* Jc = round == 0 ? npar : jb + (u64)(round & 1) * N;
    u32* Jn = jb + (u64)((round + 1) & 1) * N;
    const int in = INC((round + 2) % 3), out = INC(round % 3), sp = INC((round + 1) % 3);
    FOR_NODES(n, count) {
        const u32 j = Jc[n];
        Jn[n] = j == MT_NONE ? MT_NONE : Jc[j];
        if (attr == 0 || attr == 2) {
            const u32 v = Q32(0, 0, n) + Q32(in, 0, n);
            Q32(0, 0, n) = v;
            if (j != MT_NONE) atomicAdd(&Q32(out, 0, j), v);
            Q32(sp, 0, n) = 0;
            if (attr == 2) {
                const u64 v64 = round == 0 ? (u64)v * nlev[n] : Q64(0, n) + Q64(in, n);
                Q64(0, n) = v64;
                if (j != MT_NONE) atomicAdd(&Q64(out, j), v64);
                Q64(sp, n) = 0;
            }
        } else if (attr == 1) {
            const u32 v = umax(Q32(0, 0, n), Q32(in, 0, n));
            Q32(0, 0, n) = v;
            if (j != MT_NONE) atomicMax(&Q32(out, 0, j), v);
            Q32(sp, 0, n) = 0;
        } else {
            const u32 v0 = umin(Q32(0, 0, n), Q32(in, 0, n)), v1 = umax(Q32(0, 1, n), Q32(in, 1, n));
            const u32 v2 = umin(Q32(0, 2, n), Q32(in, 2, n)), v3 = umax(Q32(0, 3, n), Q32(in, 3, n));
            Q32(0, 0, n) = v0;
            Q32(0, 1, n) = v1;
            Q32(0, 2, n) = v2;
            Q32(0, 3, n) = v3;
            if (j != MT_NONE) {
                atomicMin(&Q32(out, 0, j), v0);
                atomicMax(&Q32(out, 1, j), v1);
                atomicMin(&Q32(out, 2, j), v2);
                atomicMax(&Q32(out, 3, j), v3);
            }
            q32_identity(q32, N, sp, n, attr);
        }
    }
}

__device__ __forceinline__ u64 dbits(double d) { return (u64)__double_as_longlong(d); }
__device__ __forceinline__ double bitsd(u64 b) { return __longlong_as_double((long long)b); }

// Final attribute of every node: A_R = CUR ⊕ INC[fin], fin = (R - 1) % 3.
extern "C" __global__ void maxtree_attr(const u32* count, const u32* npar, const u32* nlev, const u32* q32,
                                        const u64* q64, double* attrv, u32 N, int fin, int attr) {
    const int f = INC(fin);
    FOR_NODES(n, count) {
        const u32 p = npar[n];
        const u32 lvl = nlev[n];
        const u32 plvl = p == MT_NONE ? lvl : nlev[p];
        double a;
        if (attr == 0) {
            a = (double)(Q32(0, 0, n) + Q32(f, 0, n));
        } else if (attr == 1) {
            a = (double)(umax(Q32(0, 0, n), Q32(f, 0, n)) - plvl);
        } else if (attr == 2) {
            const u64 area = Q32(0, 0, n) + Q32(f, 0, n);
            a = (double)(Q64(0, n) + Q64(f, n) - area * plvl);
        } else {
            const u32 x0 = umin(Q32(0, 0, n), Q32(f, 0, n)), x1 = umax(Q32(0, 1, n), Q32(f, 1, n));
            const u32 y0 = umin(Q32(0, 2, n), Q32(f, 2, n)), y1 = umax(Q32(0, 3, n), Q32(f, 3, n));
            const double w = (double)(x1 - x0 + 1), h = (double)(y1 - y0 + 1);
            a = attr == 3 ? w : attr == 4 ? h : attr == 5 ? fmax(w, h) : sqrt(w * w + h * h);
        }
        attrv[n] = a;
    }
}

// One doubling round of the subtree maximum of the attribute (max rule), in q64 (as the bits of a
// non-negative double, whose order is the integer order); round 0 reads the attribute itself. The
// maximum ends in CUR ⊕ INC[(R-1)%3]; maxtree_amax_fold folds it into CUR.
extern "C" __global__ void maxtree_amax(const u32* count, const u32* npar, const double* attrv, u32* jb, u64* q64,
                                        u32 N, int round) {
    const u32* Jc = round == 0 ? npar : jb + (u64)(round & 1) * N;
    u32* Jn = jb + (u64)((round + 1) & 1) * N;
    const int in = INC((round + 2) % 3), out = INC(round % 3), sp = INC((round + 1) % 3);
    FOR_NODES(n, count) {
        const u32 j = Jc[n];
        Jn[n] = j == MT_NONE ? MT_NONE : Jc[j];
        const u64 c = round == 0 ? dbits(attrv[n]) : Q64(0, n);
        const u64 v = c > Q64(in, n) ? c : Q64(in, n);
        Q64(0, n) = v;
        if (j != MT_NONE) atomicMax(&Q64(out, j), v);
        Q64(sp, n) = 0;
    }
}

// Before maxtree_amax: the INC slots read or written by round 0 set to 0 (the identity).
extern "C" __global__ void maxtree_amax_init(const u32* count, u64* q64, u32 N) {
    FOR_NODES(n, count) {
        Q64(INC(0), n) = 0;
        Q64(INC(2), n) = 0;
    }
}

// After maxtree_amax: CUR ← CUR ⊕ INC[fin] (the subtree maximum, read by maxtree_keep).
extern "C" __global__ void maxtree_amax_fold(const u32* count, u64* q64, u32 N, int fin) {
    const int f = INC(fin);
    FOR_NODES(n, count) {
        if (Q64(f, n) > Q64(0, n)) Q64(0, n) = Q64(f, n);
    }
}

// ---- filtering rules: affine words solved by pointer jumping ----------------------------------
// word = (J + 1) << 32 | a << 31 | b: value(n) = a·value(J) + b, J + 1 = 0: value(n) = b.
__device__ __forceinline__ u64 word(u32 j1, u32 a, u32 b) { return ((u64)j1 << 32) | ((u64)a << 31) | (u64)b; }

// mode 0: direct/max/min-second-pass restitution (kept → b = level; else follow the parent);
// mode 1: subtractive; mode 2: min rule, first pass (value = 1 iff a node on the path fails).
// rule: 0 direct, 1 min, 2 max, 3 subtractive. amax: q64 buffer holding the subtree maxima (max
// rule). active[0] is set for the first jump round.
extern "C" __global__ void maxtree_keep(const u32* count, const u32* npar, const u32* nlev, const double* attrv,
                                        const u64* amax, u64* words, u32* active, double threshold, int rule,
                                        int mode) {
    FOR_NODES(n, count) {
        const u32 p = npar[n];
        const u32 j1 = p == MT_NONE ? 0 : p + 1;
        const u32 lvl = nlev[n];
        const bool pass = attrv[n] >= threshold;
        u64 w;
        if (mode == 2) {
            w = pass ? word(j1, 1, 0) : word(0, 0, 1);
        } else if (mode == 1) {
            const u32 plvl = p == MT_NONE ? 0 : nlev[p];
            w = word(j1, 1, pass ? lvl - plvl : 0);
        } else {
            bool kept = pass;
            if (rule == 2) kept = bitsd(amax[n]) >= threshold;
            if (rule == 1) kept = ((u32)words[n] & 0x7FFFFFFFu) == 0;  // first pass: no failing node on the path
            w = kept ? word(0, 0, lvl) : word(j1, 1, 0);
        }
        words[n] = w;
        if ((w >> 32) != 0) active[0] = 1;
    }
}

// One pointer-jumping round, in place (each 64-bit word is read and written whole, so a racing
// reader sees a consistent pair; reading an already-advanced word only jumps further). Skipped
// once no node has a pointer left (active[round] == 0).
extern "C" __global__ void maxtree_jump(const u32* count, u64* words, u32* active, int round) {
    if (active[round] == 0) return;
    FOR_NODES(n, count) {
        const u64 w = ld_vol(words + n);
        const u32 j1 = (u32)(w >> 32);
        if (j1 == 0) continue;
        const u64 w2 = ld_vol(words + (j1 - 1));
        const u32 b = (u32)w & 0x7FFFFFFFu, b2 = (u32)w2 & 0x7FFFFFFFu;
        const u32 a2 = (u32)(w2 >> 31) & 1u;
        // value(n) = value(J) + b (a(n) = 1 whenever J is set) = a2·value(J2) + b2 + b.
        const u32 jj1 = (u32)(w2 >> 32);
        st_vol(words + n, word(jj1, a2, b2 + b));
        if (jj1 != 0) active[round + 1] = 1;
    }
}

// One thread per pixel: filtered = value(node) (back to image space), residue = g - value.
template <typename T>
__device__ void restitute(const T* img, const u32* pix_node, const u64* words, T* out, T* residue, u32 N, u32 inv) {
    const u32 p = global_tid();
    if (p >= N) return;
    const u32 g = (u32)img[p] ^ inv;
    const u32 v = (u32)words[pix_node[p]] & 0x7FFFFFFFu;
    out[p] = (T)(v ^ inv);
    residue[p] = (T)(g - v);
}
extern "C" __global__ void maxtree_restitute_u8(const u8* img, const u32* pix_node, const u64* words, u8* out,
                                                u8* residue, u32 N, u32 inv) {
    restitute<u8>(img, pix_node, words, out, residue, N, inv);
}
extern "C" __global__ void maxtree_restitute_u16(const u16* img, const u32* pix_node, const u64* words, u16* out,
                                                 u16* residue, u32 N, u32 inv) {
    restitute<u16>(img, pix_node, words, out, residue, N, inv);
}

// ---- residue statistics ---------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ void residue_stats(const T* residue, const u32* count, u64* stats, u32 N) {
    __shared__ u64 part[2][32];
    u64 changed = 0, sum = 0;
    for (u32 p = global_tid(); p < N; p += global_threads()) {
        const u32 v = residue[p];
        changed += v != 0u;
        sum += v;
    }
#pragma unroll
    for (u32 o = 16; o > 0; o >>= 1) {
        changed += __shfl_down_sync(FULL_MASK, changed, o);
        sum += __shfl_down_sync(FULL_MASK, sum, o);
    }
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0) {
        part[0][warp] = changed;
        part[1][warp] = sum;
    }
    __syncthreads();
    if (warp == 0) {
        const u32 warps = (blockDim.x + 31u) >> 5;
        changed = lane < warps ? part[0][lane] : 0;
        sum = lane < warps ? part[1][lane] : 0;
#pragma unroll
        for (u32 o = 16; o > 0; o >>= 1) {
            changed += __shfl_down_sync(FULL_MASK, changed, o);
            sum += __shfl_down_sync(FULL_MASK, sum, o);
        }
        if (lane == 0) {
            if (changed != 0) atomicAdd(&stats[0], changed);
            if (sum != 0) atomicAdd(&stats[1], sum);
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) stats[2] = *count;
}
extern "C" __global__ void maxtree_residue_stats_u8(const u8* residue, const u32* count, u64* stats, u32 N) {
    residue_stats<u8>(residue, count, stats, N);
}
extern "C" __global__ void maxtree_residue_stats_u16(const u16* residue, const u32* count, u64* stats, u32 N) {
    residue_stats<u16>(residue, count, stats, N);
}
