// Steps 3-5 of a round: trees (the walk along targets to the mutual pair, Baranwal et al.
// Algorithms 4 and 6, or to a sink), exits (each tree's least edge to another tree), the trees'
// ranges (segmentation_alloc) and the core (the members below the exit, in their tree's range, each
// tree listed by its core's size); the caterpillar's predicate (Felzenszwalb & Huttenlocher
// section 3.1), joins and freezes. Thread mapping: grid-stride loops of 256-thread blocks over
// the round's roots or frontier; lanes of a warp that share a tree add to it with one atomic.
// Memory: tree[root] the tree's id (its pair's smaller root or the sink), exitk[tree] its exit,
// tcnt[tree] its counts, jarr[joff[tree] ..] its members.
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// The walk to a tree (seg_trees_body, segmentation_targets_trees) from root x (its target tx) to its tree: at each root y reached, its
// flag (`flags`, or in min_size rounds, for the sink test), its tree (another thread may have
// written it: SEG_NONE or final) and its target (target_of(y, fy); EAGER: loaded beside the other
// two, else only once they have not ended the walk) decide; the walk ends at a sink, at a known
// tree or at the mutual pair (named by its smaller root).
template <bool EAGER, class F>
__device__ __forceinline__ u32 seg_walk(const seg_done_t* done, const u32* tree, u32 mode, bool flags, u32 x,
                                        u32 tx, F target_of) {
    while (true) {
        u32 y = tx;
        u32 fy = (flags || mode == SEG_MODE_MIN_SIZE) ? (u32)((volatile const seg_done_t*)done)[y] : 0u;
        u32 known = ((volatile const u32*)tree)[y];
        u32 ty = EAGER ? target_of(y, fy) : SEG_NONE;
        if (SEG_SINK(mode, fy)) return y;
        if (known != SEG_NONE) return known;
        if (!EAGER) ty = target_of(y, fy);
        if (ty == x || ty == SEG_NONE) return x < y ? x : y;
        x = y;
        tx = ty;
    }
}

// Step 3: the tree of every active root: follow targets (keys fall strictly along them) to the
// mutual pair (the paper's Algorithm 6 finds the same pairs) or, in min_size rounds, a sink
// (see SEG_SINK); the tree is named by the pair's smaller root or the sink. A walk stops early at
// a root whose tree another thread already wrote (a benign race: tree[x] is either SEG_NONE or
// final). Every root counts itself in its tree (tcnt, one atomicAdd per warp and tree), and
// the first to count lists the tree (hlist), so segmentation_alloc can give each tree its range
// while segmentation_exits runs. The finishers' step 3 (the launched rounds fuse it with step 2:
// segmentation_targets_trees).
__device__ __forceinline__ void seg_trees_body(const u32* __restrict__ target, u32* tree,
                                               const seg_done_t* __restrict__ done, u32 mode, u64* tcnt, u32* hlist,
                                               u32* hcount, const u32* __restrict__ rlist, u32 nr) {
    SEG_BLOCK_LOOP(i, nr) {
        bool in = i < nr;
        u32 v = in ? rlist[i] : 0u;
        // Each step loads the next root's flag, target and tree together (one round trip a
        // step, not three).
        u32 t = SEG_NONE;
        if (in) t = seg_walk<true>(done, tree, mode, false, v, target[v], [&](u32 y, u32) { return target[y]; });
        if (in) tree[v] = t;
        u32 lane = threadIdx.x & 31u;
        u32 peers = __match_any_sync(FULL_MASK, t);
        u32 leader = (u32)__ffs(peers) - 1u;
        u32 base = 0;
        if (in && lane == leader) base = (u32)(atomicAdd(&tcnt[t], SEG_TCNT_MEMBER * (u64)__popc(peers)) >> 32);
        base = __shfl_sync(FULL_MASK, base, leader);
        seg_append_block(hlist, hcount, in && base + (u32)__popc(peers & ((1u << lane) - 1u)) == 0, t);
    }
}

// Steps 2 and 3 in one launch (segmentation_targets_trees, every launched round, over the previous
// round's roots, or the lists of segmentation_tiles and segmentation_reset_done that start a phase): a
// root takes its target as seg_targets_body does, then walks to its tree as seg_trees_body
// does, computing each root's target on the way from that root's least key (seg_target_of)
// instead of reading what another thread may not have written yet. Needs every root's tree
// unset and least key intact when it starts: segmentation_core clears both after its last use, and
// here a root's target is written once, with its final value. One dependent step a round fewer.
__device__ __forceinline__ u32 seg_target_of(const u32* __restrict__ comp, const u32* __restrict__ link,
                                             const u64* best, const u64* tkey, const u32* target,
                                             const seg_done_t* done, u32 width, u32 eb, u32 mode, u32 y, u32 fy,
                                             bool own, u64& key) {
    key = best[y];
    // A kept root's least key is last round's (SEG_KEEP_BIT). Its own thread tells as seg_kept does,
    // from its last target (read before it writes the new one). A walker cannot read that word
    // (its thread may be rewriting it), but every root a walk reaches has an alive edge (to the
    // root it came from), so there "kept" is "no pixel of it posted a key": segmentation_least skips
    // exactly the kept components' pixels, and any other pixel with an alive edge posts one.
    if (mode == SEG_MODE_MERGE && (fy & 1u) == 0 && (fy & SEG_KEEP_BIT)) {
        bool kept = own ? seg_kept_far(link, done, target[y]) : key == SEG_NO_EDGE;
        if (kept) key = tkey[y];
    }
    if (key == SEG_NO_EDGE) return SEG_NONE;
    return seg_far_root(comp, link, done, width, eb, key, y);
}

extern "C" __global__ void __launch_bounds__(256)
    segmentation_targets_trees(const u32* __restrict__ comp, const u32* __restrict__ link, const u64* best, u64* tkey,
                          u32* target, u32* tree, u64* exitk, seg_done_t* done, u32 width, u32 eb, u32 mode,
                          u32* ctl, u32* mctl, u32 gate, u32 r, const u32* __restrict__ in_list,
                          const u32* __restrict__ in_count, u32* out_list, u32* out_count, u64* tcnt, u32* hlist,
                          u32* hcount) {
    u32 count;
    if (!seg_round_start(ctl, gate, in_count, count)) return;
    u32 ev = 0;
    SEG_BLOCK_LOOP(i, count) {
        bool in = i < count, keep = false;
        u32 v = in ? in_list[i] : 0u;
        u32 fv = in ? (u32)done[v] : 1u;
        bool root = in && (fv & SEG_JOINED) == 0;
        u32 dv = fv & 1u, tv = SEG_NONE;
        if (root) {
            exitk[v] = SEG_NO_EDGE;
            if (dv == 0) {
                u64 key;
                tv = seg_target_of(comp, link, best, tkey, target, done, width, eb, mode, v, fv, true, key);
                if (tv == SEG_NONE) {
                    if (mode == SEG_MODE_MERGE) {
                        done[v] = 1;
                        ++ev;
                    }
                } else {
                    keep = true;
                    tkey[v] = key;  // a kept root's is unchanged, so walkers may read it meanwhile
                }
            }
            target[v] = tv;
        }
        // The walk (seg_trees_body), each step's target computed here once the root's flag and
        // tree have not ended it.
        u32 t = SEG_NONE;
        if (keep)
            t = seg_walk<false>(done, tree, mode, true, v, tv, [&](u32 y, u32 fy) {
                u64 ky;
                return seg_target_of(comp, link, best, tkey, target, done, width, eb, mode, y, fy, false, ky);
            });
        if (keep) tree[v] = t;
        u32 lane = threadIdx.x & 31u;
        u32 peers = __match_any_sync(FULL_MASK, keep ? t : SEG_NONE);
        u32 leader = (u32)__ffs(peers) - 1u;
        u32 base = 0;
        if (keep && lane == leader) base = (u32)(atomicAdd(&tcnt[t], SEG_TCNT_MEMBER * (u64)__popc(peers)) >> 32);
        base = __shfl_sync(FULL_MASK, base, leader);
        seg_append_pair(hlist, hcount, keep && base + (u32)__popc(peers & ((1u << lane) - 1u)) == 0, t, out_list,
                        out_count, keep, v);
    }
    seg_count(ctl, mctl, r, ev, 0);
}

// Step 4: exits over the frontier: from the pixel's cursor in key order, the first alive edge
// to a component of another tree; exitk[tree] = min (atomicMin).
template <u32 B>
__device__ __forceinline__ void seg_exits_body(u32* comp, const u32* __restrict__ link,
                                         const double* __restrict__ w4, const seg_done_t* __restrict__ done,
                                         const u32* __restrict__ target, const u32* __restrict__ tree,
                                         const u32* __restrict__ order, u64* exitk, u32 width, u32 eb, u32 mode,
                                         const u32* __restrict__ ctl,
                                         u32 gate, const u32* __restrict__ flist, u32 nf, bool allow_spec) {
    const bool spec = allow_spec && nf <= SEG_SPEC_MAX;
    for (u32 i = global_tid(); i < nf; i += global_threads()) {
        u32 p = flist[i];
        u32 c = comp[p];  // current: segmentation_least resolved it this round
        u32 o = order[p];
        u32 start = SEG_ORD_CUR(o), cnt = SEG_ORD_CNT(o);
        u32 q[B], id[B], cq[B];
        double w0 = 0.0;
        if (spec) {
            seg_batch_load(comp, p, o, start, cnt, width, q, id, cq);
            if (start < cnt) w0 = seg_ld_weight(w4 + id[0]);
        }
        u32 id0 = spec ? id[0] : SEG_NONE;
        // Inactive roots have neither a target nor a tree (the targets step writes SEG_NONE,
        // segmentation_core clears trees; ids are below 2^30): testing the two words together loads
        // them together.
        u32 tc = target[c], t = tree[c];
        if ((tc | t) == SEG_NONE || SEG_SINK(mode, (u32)done[t])) continue;  // a sink's tree has no exit
        bool big = mode == SEG_MODE_MIN_SIZE && done[c] != 0;
        if (!spec) seg_batch_load(comp, p, o, start, cnt, width, q, id, cq);
        for (u32 cur = start; cur < cnt; cur += B) {
            if (cur != start) seg_batch_load(comp, p, o, cur, cnt, width, q, id, cq);
            u32 e[B], fl[B];
            seg_batch_resolve(comp, link, done, cur, cnt, q, cq, e, fl);  // link does not change here
            bool ex[B];
#pragma unroll
            for (u32 j = 0; j < B; ++j)
                ex[j] = cur + j < cnt && seg_alive(mode, c, e[j], big, fl[j]) && tree[e[j]] != t;
            u32 hit = SEG_NONE;
#pragma unroll
            for (int j = B - 1; j >= 0; --j)
                if (ex[j]) hit = id[j];
            if (hit != SEG_NONE) {
                seg_atomic_min(&exitk[t], seg_key(spec && hit == id0 && cur == start ? w0 : w4[hit], hit, eb));
                break;
            }
        }
    }
}

extern "C" __global__ void segmentation_exits(u32* comp, const u32* __restrict__ link,
                                         const double* __restrict__ w4, const seg_done_t* __restrict__ done,
                                         const u32* __restrict__ target, const u32* __restrict__ tree,
                                         const u32* __restrict__ order, u64* exitk, u32 width, u32 eb, u32 mode,
                                         const u32* __restrict__ ctl,
                                         u32 gate, const u32* __restrict__ flist, const u32* __restrict__ fcount) {
    u32 nf;
    if (!seg_round_start(ctl, gate, fcount, nf)) return;
    if (nf > SEG_BATCH_DENSE_MIN)
        seg_exits_body<SEG_BATCH_DENSE>(comp, link, w4, done, target, tree, order, exitk, width, eb, mode, ctl, gate, flist,
                                        nf, true);
    else
        seg_exits_body<SEG_BATCH_TAIL>(comp, link, w4, done, target, tree, order, exitk, width, eb, mode, ctl, gate, flist,
                                       nf, true);
}

// Member c joins the tree's component a in round r (its link and its hierarchy entry).
__device__ __forceinline__ void seg_join(u32* link, seg_done_t* done, u16* round, u32 c, u32 a, u32 r) {
    link[c] = a;
    done[c] = SEG_JOINED;
    round[c] = (u16)r;
}

// Step 5: the core: an active root whose least edge is below its tree's exit takes a slot in
// its tree and writes itself there, into the tree's range that segmentation_alloc gave it (its
// members before the exit are at most its member count); *xcount counts the round's core
// members. The lanes of a warp that belong to one tree (the active roots are listed in pixel
// order, so a warp's roots are mostly of one tree) take their slots and count themselves off
// the tree with one atomicAdd (tcnt); the group that counts the last members off knows the
// core's size from it and lists the tree for its caterpillar kernel: tiny (at most 8: a thread
// each), small (at most 32: a warp each), mid-size (at most SEG_CAT_MID_CAP: a block of
// SEG_CAT_MID_THREADS each) or large (a block of SEG_CAT_THREADS each).
//
// Weight-0 members (merge rounds, zlim = 1 << eb: a key below it is an edge of weight 0; 0
// where a weight-0 step could fail, i.e. f32(k / n) rounds to 0, and in min_size rounds): a
// member other than the tree's id whose least edge has weight 0 joins the tree's id here, and
// its size is added to the id's, instead of taking a slot. Every such step passes whatever the
// order (0 < f32(Int + k/|C|) for any Int >= 0 and |C| <= n), they all come first in key order
// (the pair's key, the tree's least, is then of weight 0 too, and the id stays first), and
// Int(R) after them is 0, the id's own Int (its least edge is of weight 0, so it merged only
// along such edges): the caterpillar of the members left walks the same steps with the same
// |R| and Int. The tree's id counts as a member; a tree of it alone is not listed. Flat
// regions (video, upscaled frames) made trees of thousands of members whose keys crowd one
// weight, which the large trees' kernel would otherwise radix-sort (crowded keys).
__device__ __forceinline__ void seg_core_body(const u32* __restrict__ target, u32* tree, u64* best, const u64* __restrict__ tkey,
                 const u64* __restrict__ exitk, seg_done_t* done, u32 mode, u64* tcnt,
                 const u32* __restrict__ joff, u32* jarr, u32* xcount, u32* tlist, u32* tcount, u32* slist,
                 u32* scount, u32* mlist, u32* mcount, u32* blist, u32* bcount, u32* ctl, u32* mctl,
                 u32 gate, const u32* __restrict__ rlist, u32 nr, u32* link, u32* size, u16* round, u32 r, u64 zlim) {
    u32 ev = 0;
    SEG_BLOCK_LOOP(i, nr) {
        bool in = i < nr;
        u32 v = in ? rlist[i] : 0u;
        u32 t = in ? tree[v] : 0u;
        // The next round's targets (segmentation_targets_trees, whose walks read other roots' trees
        // and keys, or the finishers' seg_targets_body) need every root's tree unset and its least key cleared
        // before they start: nothing reads them after this step.
        if (in) {
            tree[v] = SEG_NONE;
            best[v] = SEG_NO_EDGE;
        }
        bool listed = in && target[v] != SEG_NONE;
        const u64 key = listed ? tkey[v] : SEG_NO_EDGE;
        bool core = listed && key < exitk[t];
        // A weight-0 member joins the tree's id at once (see above).
        const bool zero = core && key < zlim && v != t;
        bool join = core && !zero;
        if (zero) {
            seg_join(link, done, round, v, t, r);
            atomicAdd(&size[t], size[v]);
            ++ev;
        }
        // An active merge-round root (flag 0 or SEG_KEEP_BIT) outside the core keeps its least
        // edge for the next round.
        else if (listed && mode == SEG_MODE_MERGE) done[v] = join ? 0u : SEG_KEEP_BIT;
        u32 lane = threadIdx.x & 31u;
        u32 group = __match_any_sync(FULL_MASK, listed ? t : SEG_NONE);
        u32 joined = __ballot_sync(FULL_MASK, join) & group;
        u32 leader = (u32)__ffs(group) - 1u;
        u64 before = 0;
        if (listed && lane == leader) {
            u64 add = (u64)__popc(joined) - SEG_TCNT_MEMBER * (u64)__popc(group);
            before = atomicAdd(&tcnt[t], add);
        }
        before = __shfl_sync(FULL_MASK, before, leader);
        if (join) jarr[joff[t] + (u32)before + (u32)__popc(joined & ((1u << lane) - 1u))] = v;
        bool last = listed && lane == leader && (u32)(before >> 32) == (u32)__popc(group);
        u32 c = (u32)before + (u32)__popc(joined);
        // The tree's id alone (the rest joined it above): nothing to walk.
        if (last && c <= 1u) tcnt[t] = 0;
        // A sink's tree larger than that goes to the mid-size kernel too, which merges it
        // without a sort (seg_cat_blocks).
        u32 cls = !last || c <= 1u ? 4u
                  : c <= 8u ? 0u
                  : c <= 32u ? 1u
                  : c <= SEG_CAT_MID_CAP || SEG_SINK(mode, (u32)done[t]) ? 2u
                                                                         : 3u;
        seg_append_by_class(tlist, tcount, slist, scount, mlist, mcount, blist, bcount, xcount, join, cls, t);
    }
    seg_count(ctl, mctl, r, ev, ev);
}

extern "C" __global__ void __launch_bounds__(256)
    segmentation_core(const u32* __restrict__ target, u32* tree, u64* best, const u64* __restrict__ tkey,
                 const u64* __restrict__ exitk, seg_done_t* done, u32 mode, u64* tcnt,
                 const u32* __restrict__ joff, u32* jarr, u32* xcount, u32* tlist, u32* tcount, u32* slist,
                 u32* scount, u32* mlist, u32* mcount, u32* blist, u32* bcount, u32* ctl, u32* mctl,
                 u32 gate, const u32* __restrict__ rlist, const u32* __restrict__ rcount, u32* link, u32* size,
                 u16* round, u32 r, u64 zlim) {
    u32 nr;
    if (!seg_round_start(ctl, gate, rcount, nr)) return;
    seg_core_body(target, tree, best, tkey, exitk, done, mode, tcnt, joff, jarr, xcount, tlist, tcount, slist, scount,
                  mlist, mcount, blist, bcount, ctl, mctl, gate, rlist, nr, link, size, round, r, zlim);
}

// Step 4b (beside segmentation_exits, which it does not touch): every tree takes a contiguous range of
// jarr (joff) for all its members (the tree walk counted them in tcnt; segmentation_core fills the
// range's first slots with the core and lists the tree by the core's size), off the round's
// critical path.
__device__ __forceinline__ void seg_alloc_body(u64* tcnt, u32* joff, u32* cursor,
                                         const seg_done_t* __restrict__ done, u32 mode, u32* jarr,
                                         u64* tkey, const u32* __restrict__ ctl, u32 gate,
                                         const u32* __restrict__ hlist, u32 nh) {
    __shared__ u32 s_base;
    SEG_BLOCK_LOOP(i, nh) {
        bool in = i < nh;
        u32 t = in ? hlist[i] : 0u;
        u32 c = in ? (u32)(tcnt[t] >> 32) : 0u;
        // A sink's tree takes one more slot, the first, for the sink itself (key 0: it leads
        // the caterpillar); its core members count on from 1.
        bool sink = in && SEG_SINK(mode, (u32)done[t]);
        c += sink ? 1u : 0u;
        u32 total;
        u32 off = seg_block_scan(c, &total);
        if (threadIdx.x == 0) s_base = total ? atomicAdd(cursor, total) : 0u;
        __syncthreads();
        if (in) joff[t] = s_base + off;
        if (sink) {
            jarr[s_base + off] = t;
            tkey[t] = 0;
            tcnt[t] = SEG_TCNT_MEMBER * (u64)(c - 1u) + 1u;
        }
    }
}

extern "C" __global__ void segmentation_alloc(u64* tcnt, u32* joff, u32* cursor,
                                         const seg_done_t* __restrict__ done, u32 mode, u32* jarr,
                                         u64* tkey, const u32* __restrict__ ctl, u32 gate,
                                         const u32* __restrict__ hlist, const u32* __restrict__ hcount) {
    u32 nh;
    if (!seg_round_start(ctl, gate, hcount, nh)) return;
    seg_alloc_body(tcnt, joff, cursor, done, mode, jarr, tkey, ctl, gate, hlist, nh);
}

// The predicate of a caterpillar step: member c (size sc, Int ic) joins the tree's component
// R (size sr, Int ir) along an edge of weight w. Merge rounds: w below both thresholds
// (scikit-image's f32(Int + k/|C|)); min_size rounds: either side smaller than min_size.
__device__ __forceinline__ void seg_step(u32 mode, double w, u32 sc, double ic, u32 sr, double ir, double k,
                                         u32 min_size, bool& ok_c, bool& ok_r) {
    if (mode == SEG_MODE_MERGE) {
        ok_c = w < (double)seg_thr(ic, k, sc);
        ok_r = w < (double)seg_thr(ir, k, sr);
    } else {
        bool ok = sr < min_size || sc < min_size;
        ok_c = ok;
        ok_r = ok;
    }
}

// A failing caterpillar step in merge rounds: the side(s) whose own threshold failed freeze.
// Returns the events (frozen components).
__device__ __forceinline__ u32 seg_freeze(seg_done_t* done, u32 mode, u32 c, u32 a, bool ok_c, bool ok_r) {
    if (mode != SEG_MODE_MERGE) return 0;
    u32 ev = 0;
    if (!ok_c) {
        done[c] = 1;
        ++ev;
    }
    if (!ok_r) {
        done[a] = 1;
        ++ev;
    }
    return ev;
}
