// The finishers' parameter structs (mirrored by src/ops/segmentation/gpu/layout.rs, #[repr(C)]) and
// the grid-wide barrier of the cooperative kernels (segmentation_finish_grid, segmentation_cat_giant).
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// Everything segmentation_finish touches (SegmentationFinish in src/ops/segmentation/gpu/layout.rs, the same layout:
// device addresses, then k and zlim, then the u32 scalars).
// The buffers' addresses (SegmentationPtrs in src/ops/segmentation/gpu/layout.rs, #[repr(C)]: the same fields in the
// same order; segmentation_finish reads all but the relabelling's).
struct SegmentationPtrs {
    const double* w4;
    u32* comp;
    u32* link;
    u32* size;
    double* cint;
    seg_done_t* done;
    u64* best;
    u64* tkey;
    u32* target;
    u32* tree;
    u64* exitk;
    u64* tcnt;
    u32* joff;
    u32* jarr;
    u32* hlist;
    u32* tlist;
    u32* mlist;
    u32* slist;
    u32* blist;
    u32* order;
    u16* round;
    u32* minpix;
    u32* rootlabel;
    u32* labels;
    u32* blocksum;
    u32* ctl;
    u32* mctl;
    u32* counts;
    u64* scr_k;
    u32* scr_i;
    u64* giant;
    u32* flist[2];
    u32* rlist[2];
    u32* info;
};

struct SegmentationFinish {
    SegmentationPtrs p;
    double k;
    u64 zlim;  // seg_core_body's weight-0 key limit
    u32 width, height, n, eb, mode, min_size, nctl;
    u32 first;      // global number of the phase's first round (its lists' parity counts from it)
    u32 from;       // first round run here (the rounds before it were launched)
    u32 last;       // last round allowed (the parameters' cap)
    u32 limit;      // most frontier pixels a round here may start with
    u32 info_slot;  // info[info_slot] = 1 when a round was left with work (frontier above limit)
    u32 solo;       // segmentation_finish_grid: a round starting with at most this many frontier pixels
                    // is left to segmentation_finish (one block), which follows it
    u32 resume;     // segmentation_finish: start at info[SEG_INFO_RESUME] (where the grid stopped), not from
};

// Grid-wide barrier of a cooperative launch (segmentation_finish_grid, segmentation_cat_giant: every
// block resident at once). Every block adds to bar[0] once a barrier, block 0 2^31 - (blocks -
// 1) and the others 1, so the word grows by exactly 2^31 a barrier: its top bit flips when the
// last block arrives, and each block spins until the bit differs from the value its own add
// returned. The low 31 bits never change across barriers, so the word must start at 0 or 2^31
// (zeroed at allocation; nothing resets it). The fences order each block's writes before the
// barrier against every block's reads after it (release, then acquire at GPU scope; the block
// barriers extend them to the block). One atomic and no reset on the barrier's path (a count
// reset by the last block and a generation word the others spin on cost three more dependent
// atomics and a fence).
__device__ __forceinline__ void seg_grid_sync(u32* bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const u32 add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1u) : 1u;
        __threadfence();
        const u32 old = atomicAdd(bar, add);
        volatile u32* vb = bar;
        while (((old ^ *vb) & 0x80000000u) == 0u) {
        }
        __threadfence();
    }
    __syncthreads();
}

// Word of `info` that holds segmentation_finish_grid's barrier, and the first round it left to
// segmentation_finish.
#define SEG_INFO_BAR 4u
#define SEG_INFO_RESUME 6u
