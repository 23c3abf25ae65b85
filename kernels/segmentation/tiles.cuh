// Merge round 1 in 32x16 tiles (segmentation_tiles): the round on singletons for the trees inside one
// tile, decided in shared memory by one block of 512 threads (a pixel a thread); blocks stride
// over the tiles. It also writes every pixel's starting words as it reads the pixel.
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// Round 1 of the merge phase in tiles (one block of SEG_TILE_W x SEG_TILE_H threads a tile, a
// pixel each, everything in shared memory): the global round 1 (every pixel its own component)
// for the trees that lie inside one tile, in one kernel instead of ten. A pixel's least edge is
// the first of its order word (segmentation_edges); targets, trees (follow targets to the mutual
// pair, named by its smaller pixel), exits (the first edge in key order leaving the tree), the
// core (members below the exit) and the caterpillar (the core in (key, id) order: step j merges
// a singleton into a component of j pixels whose Int is the previous step's weight, up to the
// first failing step) as in the kernels below, decided from shared memory. A tree is left to
// round 2 (its pixels stay singletons) when a member's target is outside the tile, a pixel of
// the halo ring targets a member, or it has more than SEG_TILE_TREE members (the rank of a core
// member is counted over its tree's list). Exact: the rounds' invariant (every component is
// Kruskal's just before its least alive edge) holds whichever trees a round decides; the CPU
// model (boruvka.rs, round 1 with tiles) leaves the same trees.
#define SEG_TILE_W 32    // tile width (boruvka.rs TILE_W: the CPU model leaves the same trees)
#define SEG_TILE_H 16    // tile height (boruvka.rs TILE_H); a 512-thread block, a pixel a thread
#define SEG_TILE_TREE 32 // most members of a tree decided here (each core member ranks itself over the tree)
#define SEG_TILE_PX (SEG_TILE_W * SEG_TILE_H)
#define SEG_TILE_OUT 0xffffu

// Local index of pixel q in the tw x th tile at (x0, y0), or SEG_TILE_OUT (the unsigned
// differences wrap when q is left of or above the tile).
__device__ __forceinline__ u32 seg_tile_local(u32 q, u32 width, u32 x0, u32 y0, u32 tw, u32 th) {
    u32 qx = q % width - x0, qy = q / width - y0;
    return (qx < tw && qy < th) ? qy * SEG_TILE_W + qx : SEG_TILE_OUT;
}

extern "C" __global__ void __launch_bounds__(SEG_TILE_PX, 3)
    segmentation_tiles(u32* comp, u32* link, u32* size, double* cint, seg_done_t* done, u16* round,
                  const double* __restrict__ w4, u32* order, u32 width, u32 height, u32 eb,
                  double k, u32* ctl, u32* mctl, u32* frontier_count, u64* best, u32* target, u32* tree,
                  u64* tcnt, u32* root_list, u32* root_count) {
    __shared__ u64 skey[SEG_TILE_PX];      // the pixel's least key
    __shared__ double swt[SEG_TILE_PX];    // its weight
    __shared__ u64 sexit[SEG_TILE_PX];     // per tree (at its id): least key leaving it
    __shared__ double slast[SEG_TILE_PX];  // per tree: weight of the last merging step
    __shared__ u32 scnt[SEG_TILE_PX];      // per tree: members
    __shared__ u32 score[SEG_TILE_PX];     // per tree: core members
    __shared__ u32 sfail[SEG_TILE_PX];     // per tree: first failing step
    __shared__ u16 soff[SEG_TILE_PX];      // per tree: start of its member list
    __shared__ u16 slist[SEG_TILE_PX];     // members, grouped by tree
    __shared__ u16 stgt[SEG_TILE_PX];      // target (local index; SEG_TILE_OUT: outside the tile)
    __shared__ u16 stree[SEG_TILE_PX];     // tree (local id; SEG_TILE_OUT: none, or not known here)
    __shared__ u8 shalo[SEG_TILE_PX];      // a pixel of the halo ring targets this pixel
    __shared__ u8 sbad[SEG_TILE_PX];       // per tree: left to round 2
    const u32 l = threadIdx.x, lx = l % SEG_TILE_W, ly = l / SEG_TILE_W;
    const u32 tiles_x = (width + SEG_TILE_W - 1) / SEG_TILE_W;
    const u32 tiles = tiles_x * ((height + SEG_TILE_H - 1) / SEG_TILE_H);
    if (blockIdx.x == 0 && l == 0) *frontier_count = width * height;  // round 2 scans every pixel
    const float thr1 = seg_thr(0.0, k, 1u);                             // a singleton's threshold
    u32 ev = 0, mg = 0;
    for (u32 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const u32 x0 = (tile % tiles_x) * SEG_TILE_W, y0 = (tile / tiles_x) * SEG_TILE_H;
        const u32 tw = min(SEG_TILE_W, width - x0), th = min(SEG_TILE_H, height - y0);
        const bool in = lx < tw && ly < th;
        const u32 p = (y0 + ly) * width + x0 + lx;
        __syncthreads();  // the previous tile is done with the shared arrays
        stgt[l] = SEG_TILE_OUT;
        stree[l] = SEG_TILE_OUT;
        sexit[l] = SEG_NO_EDGE;
        scnt[l] = 0;
        score[l] = 0;
        sfail[l] = SEG_NONE;
        shalo[l] = 0;
        sbad[l] = 0;
        __syncthreads();
        u32 o = 0, cnt = 0;
        double w = 0.0;
        if (in) {
            o = order[p];
            // The pixel's starting words (a component of its own, cursor at its first edge),
            // written as the pixel is read: no pass of its own over the per-pixel arrays; the
            // writes below by any thread of the block follow them (the barriers order a block's
            // global writes).
            seg_init_pixel(comp, link, size, cint, done, best, target, tree, tcnt, round, p);
            if (SEG_ORD_CUR(o) != 0) order[p] = o & ~(15u << 24);
            cnt = SEG_ORD_CNT(o);
            if (cnt > 0) {
                u32 q, id;
                seg_dir(p, SEG_ORD_DIR(o, 0), width, q, id);
                w = w4[id];
                skey[l] = seg_key(w, id, eb);
                swt[l] = w;
                stgt[l] = (u16)seg_tile_local(q, width, x0, y0, tw, th);
            } else {
                done[p] = 1;  // no edges at all (a 1x1 image): done
                ++ev;
            }
        }
        // The halo ring: a pixel just outside whose least edge points in belongs to that tree.
        const u32 nh = 2 * (tw + 2) + 2 * th;
        for (u32 h = l; h < nh; h += blockDim.x) {
            int hx, hy;
            if (h < 2 * (tw + 2)) {
                hx = (int)x0 - 1 + (int)(h % (tw + 2));
                hy = h < tw + 2 ? (int)y0 - 1 : (int)(y0 + th);
            } else {
                u32 s2 = h - 2 * (tw + 2);
                hx = s2 < th ? (int)x0 - 1 : (int)(x0 + tw);
                hy = (int)y0 + (int)(s2 % th);
            }
            if (hx < 0 || hy < 0 || hx >= (int)width || hy >= (int)height) continue;
            u32 hp = (u32)hy * width + (u32)hx, ho = order[hp];
            if (SEG_ORD_CNT(ho) == 0) continue;
            u32 q, id;
            seg_dir(hp, SEG_ORD_DIR(ho, 0), width, q, id);
            u32 lq = seg_tile_local(q, width, x0, y0, tw, th);
            if (lq != SEG_TILE_OUT) shalo[lq] = 1;
        }
        __syncthreads();
        // Trees: follow targets to the mutual pair (keys fall strictly along them).
        u32 t = SEG_TILE_OUT, slot = 0;
        if (in && cnt > 0) {
            u32 x = l;
            while (true) {
                u32 y = stgt[x];
                if (y == SEG_TILE_OUT) break;
                if (stgt[y] == x) {
                    t = x < y ? x : y;
                    break;
                }
                x = y;
            }
        }
        if (t != SEG_TILE_OUT) {
            stree[l] = (u16)t;
            slot = atomicAdd(&scnt[t], 1u);
            if (shalo[l]) sbad[t] = 1;
        }
        __syncthreads();
        if (t != SEG_TILE_OUT && scnt[t] > SEG_TILE_TREE) sbad[t] = 1;
        __syncthreads();
        const bool good = t != SEG_TILE_OUT && !sbad[t];
        // Exit: the first edge after the least (which is the target's, inside the tree) whose far
        // pixel is in another tree (outside the tile is always another tree here).
        if (good) {
            for (u32 i = 1; i < cnt; ++i) {
                u32 q, id;
                seg_dir(p, SEG_ORD_DIR(o, i), width, q, id);
                u32 lq = seg_tile_local(q, width, x0, y0, tw, th);
                if (lq == SEG_TILE_OUT || stree[lq] != t) {
                    atomicMin(&sexit[t], seg_key(w4[id], id, eb));
                    break;
                }
            }
        }
        __syncthreads();
        // Member lists: a block scan of the good trees' counts (at their ids).
        u32 total;
        u32 off = seg_block_scan(good && t == l ? scnt[l] : 0u, &total);
        if (good && t == l) soff[l] = (u16)off;
        __syncthreads();
        if (good) slist[soff[t] + slot] = (u16)l;
        __syncthreads();
        // The caterpillar: a core member's step j is its rank by (key, id) among the core; the
        // component it joins has j pixels and the previous step's weight as Int (0 at step 1).
        const bool core = good && skey[l] < sexit[t];
        u32 j = 0;
        bool okc = true, okr = true;
        if (core) {
            u64 mykey = skey[l], ex = sexit[t], pk = 0;
            u32 pm = 0, n_t = scnt[t], base = soff[t];
            double pw = 0.0;
            for (u32 i = 0; i < n_t; ++i) {
                u32 m = slist[base + i];
                u64 km = skey[m];
                if (m == l || km >= ex) continue;
                if (km < mykey || (km == mykey && m < l)) {
                    ++j;
                    if (j == 1 || km > pk || (km == pk && m > pm)) {
                        pk = km;
                        pm = m;
                        pw = swt[m];
                    }
                }
            }
            if (j >= 1) {
                okc = w < (double)thr1;
                okr = w < (double)seg_thr(j == 1 ? 0.0 : pw, k, j);
                if (!(okc && okr)) atomicMin(&sfail[t], j);
            }
            atomicAdd(&score[t], 1u);
        }
        __syncthreads();
        bool joined = false;
        if (core && j >= 1) {
            u32 ff = sfail[t], mcount = min(ff, score[t]);
            u32 root = (y0 + t / SEG_TILE_W) * width + x0 + t % SEG_TILE_W;
            joined = j < ff;
            if (joined) {
                seg_join(link, done, round, p, root, 1);
                comp[p] = root;
                ++mg;
                ++ev;
            } else if (j == ff) {
                ev += seg_freeze(done, SEG_MODE_MERGE, p, root, okc, okr);
            }
            if (j + 1 == mcount) slast[t] = w;
        }
        __syncthreads();
        if (core && j == 0) {
            u32 mcount = min(sfail[t], score[t]);
            if (mcount > 1) {
                size[p] = mcount;
                cint[p] = slast[t];
            }
        }
        // The roots round 1 leaves: round 2's root list (segmentation_targets_trees).
        seg_append_block(root_list, root_count, in && !joined, p);
    }
    seg_count(ctl, mctl, 1, ev, mg);
}
