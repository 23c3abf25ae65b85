// The finishers: a phase's last rounds without launches, every step of a round as the device
// function the round kernels use, in one block of 1024 threads (segmentation_finish) or over a
// cooperative grid of every SM (segmentation_finish_grid), with a barrier between steps.
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// The last rounds of a phase (segmentation_finish, segmentation_finish_grid): every step of a round (the
// same device functions as the round kernels, their grid-stride loops running over this grid),
// a barrier between steps (the block's, or with GRID the grid's), until a round changes nothing
// or its frontier exceeds `limit`. The caterpillars of the four sizes touch disjoint trees, so
// they follow each other without a grid barrier (only the block's, for their shared memory).
// Every block reads the same counters after the same barrier, so all leave the loop together.
// It reads what its own earlier steps wrote, so its loads must not take the non-coherent path
// that the round kernels' const __restrict__ parameters allow: its pointers come from a plain
// struct, and tests/kernels_compile.rs checks the PTX of both kernels has no ld.global.nc.
// The tiny and small trees are one list of warp tasks (seg_cat_lanes_tasks), as in
// segmentation_cat_small; the larger ones are walked without the bucket gather (BUCKET false: the
// finishers' registers spill more with it).
template <bool GRID>
__device__ __forceinline__ void seg_finish_rounds(const SegmentationFinish& a) {
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
        if (GRID && C[SEG_C_FRONTIER * N + gate] <= a.solo) break;  // left to segmentation_finish
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
        seg_targets_body(a.p.comp, a.p.link, a.p.best, a.p.tkey, a.p.target, a.p.exitk, a.p.done, a.width, a.eb, a.mode,
                         a.p.ctl, a.p.mctl, r, rin, *rcin, rout, rcout);
        SEG_FIN_SYNC();
        seg_trees_body(a.p.target, a.p.tree, a.p.done, a.mode, a.p.tcnt, a.p.hlist, hcount, rout, *rcout);
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
        seg_cat_lanes_tasks(SEG_CAT_PASS, *lcount, a.p.slist, *scount);
        __syncthreads();
        list = a.p.mlist;
        lcount = mcount;
        seg_cat_blocks<SEG_CAT_CAP, true, false, false, false>(SEG_CAT_PASS);
        __syncthreads();
        list = a.p.blist;
        lcount = bcount;
        seg_cat_blocks<SEG_CAT_CAP, true, false, false, false>(SEG_CAT_PASS);
    }
    SEG_FIN_SYNC();
#undef SEG_FIN_SYNC
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        a.p.info[a.info_slot] = (r <= a.last && a.p.ctl[r - 1] != 0) ? 1u : 0u;
        if (GRID) a.p.info[SEG_INFO_RESUME] = r;
    }
}

// The last rounds of a phase in one block of SEG_CAT_THREADS threads (seg_finish_rounds). The
// launched rounds before it are the adaptive caps (src/ops/segmentation/gpu/), so the tail of
// small rounds costs no launches and no gated empty rounds, and a frame that needs a few more
// rounds than its caps is finished here instead of run again. One block is sure to be resident
// wherever it runs; segmentation_finish_grid is the same over a whole cooperative grid.
extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segmentation_finish(SegmentationFinish a) {
    grid_dep_wait();
    seg_finish_rounds<false>(a);
}

// The same rounds over a cooperative grid (every block resident, seg_grid_sync between steps):
// 8 grid barriers a round instead of 11 launches, and a whole GPU instead of one block's serial
// loops. It stops at the first round with at most `solo` frontier pixels, which it leaves to
// segmentation_finish launched after it with `resume` (one block's barriers are cheaper there).
extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segmentation_finish_grid(SegmentationFinish a) {
    seg_finish_rounds<true>(a);
}
