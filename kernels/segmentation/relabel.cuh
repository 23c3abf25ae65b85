// Between and after the phases: segmentation_reset_done (the min_size phase's start), the
// raster-order relabelling (the first pixel of each segment flagged, a block scan of the flags
// in 1024-pixel blocks, then every pixel's label), hierarchy levels (Baranwal et al. sections
// 2.2 and 3.2.3: a level is the merges of the rounds up to one, read from link and round) and
// the profiling stamps. Thread mapping: grid-stride loops over pixels, except the scans.
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// Start of the min_size phase: no component is done, and every pixel's cursor goes back to its
// first edge (edges to components that were done are alive again). Bit 0 of the flags says
// instead whether a root is at least min_size (what the edge scans read). It also resolves
// every pixel's component once and lists the pixels of components smaller than min_size
// (flist / *fcount) and those components' roots (rlist / *rcount), the phase's first round's
// lists: it scans the few pixels that can merge instead of all of them (a component of at
// least min_size takes no edge, SEG_SINK).
// The roots left off the root list keep their last target (read nowhere: a walk stops at a sink
// before its target) and an unset tree (segmentation_core clears every tree it saw set).
extern "C" __global__ void segmentation_reset_done(seg_done_t* done, u32* order, const u32* __restrict__ size,
                                              u32 min_size, u32 n, u32* comp, const u32* __restrict__ link,
                                              u32* flist, u32* fcount, u32* rlist, u32* rcount) {
    grid_dep_launch();
    grid_dep_wait();
    SEG_BLOCK_LOOP(i, n) {
        bool px_small = false, root_small = false;
        if (i < n) {
            u32 fl = done[i], si = size[i];
            bool root = (fl & SEG_JOINED) == 0;
            // Bit 0 is read at roots only; the joined bit stays.
            done[i] = (fl & SEG_JOINED) | (si >= min_size ? 1u : 0u);
            order[i] &= ~(15u << 24);
            u32 c = seg_find(link, comp[i]);  // link does not change here
            comp[i] = c;
            px_small = (c == i ? si : size[c]) < min_size;
            root_small = root && si < min_size;
        }
        seg_append_pair(flist, fcount, px_small, i, rlist, rcount, root_small, i);
    }
}

// The relabelling kernels (and segmentation_reset_done) start with grid_dep_launch / grid_dep_wait:
// the host launches them as programmatic dependent launches like the round kernels, so each
// one's blocks are scheduled while the kernel before it drains.
extern "C" __global__ void segmentation_final(u32* comp, const u32* __restrict__ link, u32* minpix, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        comp[p] = seg_find(link, comp[p]);
        minpix[p] = SEG_NONE;
    }
}

extern "C" __global__ void segmentation_minpix(const u32* __restrict__ comp, u32* minpix, u32 width, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 c = comp[p];
        // The first raster pixel of a segment starts a run: its left neighbour is elsewhere.
        if (p % width == 0 || comp[p - 1] != c) atomicMin(&minpix[c], p);
    }
}

extern "C" __global__ void segmentation_scan_count(const u32* __restrict__ comp, const u32* __restrict__ minpix,
                                              u32* blocksum, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    int flag = (p < n && minpix[comp[p]] == p) ? 1 : 0;
    int c = __syncthreads_count(flag);
    if (threadIdx.x == 0) blocksum[blockIdx.x] = (u32)c;
}

extern "C" __global__ void segmentation_scan_blocks(u32* blocksum, u32 nblocks, u32* info) {
    grid_dep_launch();
    grid_dep_wait();
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

extern "C" __global__ void segmentation_scan_label(const u32* __restrict__ comp, const u32* __restrict__ minpix,
                                              const u32* __restrict__ blocksum, u32* rootlabel, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    bool flag = p < n && minpix[comp[p]] == p;
    u32 total;
    u32 ex = seg_block_scan(flag ? 1u : 0u, &total);
    if (flag) rootlabel[comp[p]] = blocksum[blockIdx.x] + ex;
}

extern "C" __global__ void segmentation_labels(const u32* __restrict__ comp, const u32* __restrict__ rootlabel,
                                          u32* labels, u32 n) {
    grid_dep_launch();
    grid_dep_wait();
    for (u32 p = global_tid(); p < n; p += global_threads()) labels[p] = rootlabel[comp[p]];
}

// Global round number of hierarchy level `level` (rounds that merged; 0: none; past the last
// level: the last) into info[1].
extern "C" __global__ void segmentation_level_threshold(const u32* __restrict__ mctl, u32 rounds_total, u32 level,
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

extern "C" __global__ void segmentation_level_comp(u32* comp, const u32* __restrict__ link,
                                              const u16* __restrict__ round, u32* minpix,
                                              const u32* __restrict__ info, u32 n) {
    u32 thr = info[1];
    for (u32 p = global_tid(); p < n; p += global_threads()) {
        u32 v = p;
        while ((u32)round[v] <= thr) v = link[v];
        comp[p] = v;
        minpix[p] = SEG_NONE;
    }
}

// Profiling (SegmentationProfiling::round_stamps, the crate's `profiling` feature): the global timer
// after everything before it on the stream, in stamps[i].
extern "C" __global__ void segmentation_stamp(u64* stamps, u32 i) {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    stamps[i] = t;
}
