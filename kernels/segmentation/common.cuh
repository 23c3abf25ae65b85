// Shared definitions of the segmentation (kernels/segmentation.cu): sentinels, kernel modes, the
// per-component flag byte, keys and thresholds, the warp-reduced round counters, neighbour
// directions and each pixel's sorted edge word.
//
// Keys (the total order every step uses, section 3.1 of Baranwal et al.): an edge's f64 weight
// with its low e bits dropped, shifted up by e = ceil(log2(4n)), OR its edge id 4p + dir, so
// equal weights tie on the id. Thresholds are scikit-image's f32(Int + k/|C|) (Felzenszwalb &
// Huttenlocher 2004, section 3.1: MInt), compared with the f64 weight.
// Memory: every array is indexed by pixel id (p = y * width + x); a component is named by its
// root pixel. The flag byte array (`done`, one byte a pixel) is the one the edge scans read per
// neighbour, small enough to stay in L2.
// Part of kernels/segmentation.cu (included in order).

#define SEG_NO_EDGE 0xffffffffffffffffull
#define SEG_NONE 0xffffffffu
#define SEG_NEVER 0xffffu

#define SEG_MODE_MERGE 0u
#define SEG_MODE_MIN_SIZE 1u

// What segmentation_least iterates (its use_list argument): the previous round's list (or the lists
// that start a phase), or every pixel, in whatever components segmentation_tiles left (merge round 2).
#define SEG_LIST 1u
#define SEG_ALL 2u

#define SEG_CAT_CAP 2048      // members a block sorts at once (a chunk of the caterpillar)
#define SEG_CAT_THREADS 1024  // one compare-exchange a thread per step of a full chunk
#define SEG_CAT_MID_CAP 512   // segmentation_cat_mid: trees of up to this many members, one chunk
#define SEG_CAT_MID_THREADS 256

// A component's flag byte, per pixel id (`done`; the whole array, 2 MB at 1080p, stays in L2 for
// the frontier scans' per-edge lookups). Bit 0: frozen in merge rounds; "at least min_size" in
// min_size rounds (set by segmentation_reset_done and the caterpillars, so no size word is read per
// lookup). Bit 1 (SEG_JOINED): the component joined another, so it is no longer a root
// (seg_join sets it, nothing clears it): the scans learn "root or not" and "frozen" from one
// byte load and follow link (8 MB) only for stale entries.
typedef u8 seg_done_t;
#define SEG_JOINED 2u
// Bit 2 (SEG_KEEP_BIT, merge rounds): the root was an active component outside its tree's core in
// the last round that listed it (segmentation_core writes it for every active root), so it neither
// merged nor absorbed anything then: its least alive edge is still the key the targets step took
// (tkey) unless the far side's root has frozen since. segmentation_least checks that root once per
// pixel and then skips the pixel's walk and its atomicMin (the pixel stays on the frontier);
// the targets step makes the same check once per root and takes tkey as the key. Nothing else
// tests this bit; freezing, joining and segmentation_reset_done clear it.
#define SEG_KEEP_BIT 4u
// min_size rounds: a component of at least min_size pixels (flag bit 0) takes no
// edge of its own; it is a sink that absorbs, in one round, every tree whose targets lead into
// it (its members are all smaller than min_size, so every step passes whatever the order, and
// the sink is at least min_size all along, so the tree needs no exit). Every edge a large
// component could merge along is the least edge of the small component on its other side, or
// dead by the time Kruskal reaches it. Sink trees list the sink as an extra member with key 0
// (segmentation_alloc), so the caterpillars merge into it unchanged. Sink trees of more than 32
// members, of any size, are merged by the mid-size kernel without a sort (seg_cat_blocks).
// Whether root c (flag fc) is a sink (min_size rounds).
#define SEG_SINK(mode, fc) ((mode) == SEG_MODE_MIN_SIZE && ((fc) & 1u) != 0)

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
// Fewer instructions in an issue-bound kernel (segmentation_blur_edges) than a (key, direction) order.
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
