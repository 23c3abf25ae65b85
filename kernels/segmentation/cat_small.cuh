// Step 6 (the caterpillar: Baranwal et al. section 3.1 steps 5-8 in Kruskal's order) for trees
// of up to 32 core members: a tree per group of 8 lanes (tiny trees) or per warp (small trees),
// sorted by a bitonic network across the lanes, |R| by a group scan, the first failing step by
// a ballot. The two lists are one list of warp tasks (seg_cat_lanes_tasks), walked by
// segmentation_cat_small(_mid) and the finishers. Memory: a tree's members are jarr[joff[t] ..
// joff[t] + tcnt[t]), their keys tkey[member].
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// Step 6, trees of at most 8 members (most of them in the first rounds, where a tree averages
// ~3 members; tlist): by groups of 8 lanes (seg_cat_lanes_group<8>), four trees a warp. (A
// thread per tree, its 8 members sorted in registers, holds 86 registers and walks its loads
// member by member: slower.)
// The parameters of the four caterpillar kernels (the host launches them alike): the tree list
// and its count, the sort scratch (used by segmentation_cat_block only), n, and the round's count of
// giant trees (more than SEG_CAT_GIANT core members: segmentation_cat_block and segmentation_cat_giant
// count those they walk, so the host launches segmentation_cat_giant in the rounds that had some).
#define SEG_CAT_ARGS                                                                                  \
    u32 *link, seg_done_t *done, u32 *size, double *cint, const u64 *__restrict__ tkey, u64 *tcnt,                   \
        const u32 *__restrict__ joff, const u32 *__restrict__ jarr, u16 *round,                \
        const double *__restrict__ w4, u32 eb, u32 mode, u32 min_size, double k, u32 *ctl, u32 *mctl, u32 gate, \
        u32 r, const u32 *__restrict__ list, const u32 *__restrict__ lcount, u64 *scr_k, u32 *scr_i, u32 n,  \
        u32 *gcnt
#define SEG_CAT_PASS                                                                                    \
    link, done, size, cint, tkey, tcnt, joff, jarr, round, w4, eb, mode, min_size, k, ctl, mctl, gate, r, \
        list, lcount, scr_k, scr_i, n, gcnt

// Step 6 by groups of W lanes, a tree a group: trees of at most 32 members (slist, W = 32, a
// warp per tree) and the trees of at most 8 (tlist, W = 8, four trees a warp). Lane i of a group holds member i after a bitonic sort by (key, id) across the group's
// lanes; lane 0 is the pair's smaller root (the tree id, which the others join). A group scan
// gives each step's |R|, the previous lane's weight its Int; the first failing step (ballot)
// ends the merges; a failing side freezes (merge rounds). The groups of a warp stride together
// (every lane reaches every shuffle); a group past the list's end holds no members.
//
// seg_cat_lanes_group: one group's tree of the list (lanes base + lane / W), its events added to ev and mg.
template <u32 W>
__device__ __forceinline__ void seg_cat_lanes_group(SEG_CAT_ARGS, u32 ns, u32 base, u32& ev, u32& mg) {
    const u32 lane = threadIdx.x & 31u, gl = lane & (W - 1u);
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

// The tiny trees (`list`, nt of them) and the small ones (slist, ns) by the lanes of every warp
// (segmentation_cat_small and the finishers): one list of warp tasks, four tiny trees (8 lanes each)
// or one small tree (a warp) each, the tiny ones first, so a warp's first task is one or the
// other and the two lists are under way at once (rather than every warp's tiny trees before
// its small ones).
__device__ __forceinline__ void seg_cat_lanes_tasks(SEG_CAT_ARGS, u32 nt, const u32* slist, u32 ns) {
    const u32 tw = (nt + 3u) / 4u, tasks = tw + ns;
    const u32 warp = global_tid() >> 5, nwarps = global_threads() >> 5;
    u32 ev = 0, mg = 0;
    for (u32 task = warp; task < tasks; task += nwarps) {
        if (task < tw) {
            seg_cat_lanes_group<8>(SEG_CAT_PASS, nt, task * 4u, ev, mg);
        } else {
            const u32* list = slist;
            seg_cat_lanes_group<32>(SEG_CAT_PASS, ns, task - tw, ev, mg);
        }
    }
    seg_count(ctl, mctl, r, ev, mg);
}
