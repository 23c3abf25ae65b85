// Step 6 for giant trees (more than SEG_CAT_GIANT core members) over a cooperative grid of 1024-
// thread blocks (segmentation_cat_giant): a bucket sort across the blocks, six grid barriers a tree.
// Memory: the tree's members staged and sorted in its scratch ranges (scr_k / scr_i, halves A
// and B), the grid's counts and sums in `gs` (SEG_GIANT_WORDS).
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// Step 6 for giant trees (more than SEG_CAT_GIANT core members: smooth video, where one tree can
// hold tens of thousands), over a cooperative grid of every SM instead of one block, whose
// radix passes one SM would issue store by store. A bucket sort spreads it: the grid stages the
// members (key, id) in scratch (half A) and takes the keys' range; counts them in
// SEG_GIANT_BINS equal parts of it; every block derives the same buckets (runs of parts whose
// first position / SEG_GIANT_HALF is equal: at most 2 x SEG_GIANT_HALF members unless one part
// alone holds more) and scatters the members to their parts (half B, parts in key order), each
// member's slot taken from its block's first slot in its part (the block's count atomic
// returned it); each block sorts whole buckets in shared memory (a bucket whose parts hold at
// most SEG_GIANT_RANK_MAX keys by each member counting the keys before it in its part, else by
// seg_sort_chunk; an oversize bucket by radix passes in global memory) and stashes each
// member's weight and |R| within its bucket, with the flag of its own failing threshold, in
// half A; every step is then evaluated at once (|R| = the bucket's carry + the stash), the
// least failing step ends the caterpillar, the members before it join and its side(s) freeze,
// as in seg_cat_blocks. Six grid barriers a tree. Trees are taken from the large-tree list
// (segmentation_cat_block_g leaves them); the grid returns at once without one.
// gs: SEG_GIANT_WORDS u64 of scratch, zero between trees: [0] the barrier, [1] ~least key,
// [2] greatest key, [3] members - first failing step (atomicMax), then as u32 the parts' counts
// and the buckets' size sums (SEG_GIANT_BINS each).
#define SEG_GIANT_BINS 2048u        // parts of the keys' range (two a thread of a block)
#define SEG_GIANT_HALF 1024u        // half a bucket's members at most (a bucket fits a chunk)
#define SEG_GIANT_WORDS (4u + SEG_GIANT_BINS)
#define SEG_XS_FAIL 0x80000000u
#define SEG_GIANT_RANK_MAX 256u     // most keys a part may hold for its members to rank themselves
#define SEG_GIANT_FIT SEG_CAT_CAP   // most members of a bucket sorted in shared memory
extern "C" __global__ void __launch_bounds__(SEG_CAT_THREADS) segmentation_cat_giant(SEG_CAT_ARGS, u64* gs) {
    __shared__ u64 s_raw[2 * SEG_CAT_CAP];  // a bucket's keys and ids; part starts; bucket carries
    __shared__ u32 s_bs[SEG_GIANT_BINS + 1];  // bucket starts (positions), s_bs[nbk] = members
    __shared__ u64 sred[64];
    __shared__ u32 s_fail;
    // Not seg_round_start: a cooperative grid must not let its dependents launch early
    // (griddepcontrol.launch_dependents), or their waiting blocks could hold the SMs that its
    // own blocks need to reach its barriers.
    u32 nb;
    grid_dep_wait();
    if (!seg_gate(ctl, gate, lcount, nb)) return;
    u32* bar = (u32*)gs;
    u32* hist = (u32*)(gs + 4);
    u32* bsum = hist + SEG_GIANT_BINS;
    const u32 tid = threadIdx.x, bd = blockDim.x;
    const u32 nthreads = gridDim.x * bd, gtid = blockIdx.x * bd + tid;
    u64* skey = s_raw;
    u32* sid = (u32*)(s_raw + SEG_CAT_CAP);
    u32 ev = 0, mg = 0;
    for (u32 i = 0; i < nb; ++i) {
        const u32 t = list[i];
        // Read by every block before any barrier of this tree; only this kernel zeroes a giant
        // tree's count, after its last barrier.
        const u32 cnt = (u32)__ldcg(&tcnt[t]);
        if (cnt <= SEG_CAT_GIANT) continue;
        const u32 off = joff[t], a = t;
        u64* ak = scr_k + off;
        u32* ai = scr_i + off;
        u64* bk = scr_k + n + off;
        u32* bi = scr_i + n + off;
        // 1. Stage the members; the keys' range.
        u64 mn = SEG_NO_EDGE, mx = 0;
        for (u32 m = gtid; m < cnt; m += nthreads) {
            const u32 id = jarr[off + m];
            const u64 key = tkey[id];
            ak[m] = key;
            ai[m] = id;
            mn = key < mn ? key : mn;
            mx = key > mx ? key : mx;
        }
        seg_block_minmax(mn, mx, sred);
        if (tid == 0) {
            atomicMax(&gs[1], ~mn);
            atomicMax(&gs[2], mx);
        }
        seg_grid_sync(bar);
        // 2. Counts of the parts.
        const u64 kmin = ~__ldcg(&gs[1]), span = __ldcg(&gs[2]) - kmin;
        const u32 shift = seg_part_shift(span, 11u);
        // The block's counts, then its first slot in each part: the scatter below takes its
        // members' slots from these in shared memory.
        u32* sh = (u32*)s_raw;
        for (u32 j = tid; j < SEG_GIANT_BINS; j += bd) sh[j] = 0;
        __syncthreads();
        for (u32 m = gtid; m < cnt; m += nthreads) atomicAdd(&sh[(u32)((__ldcg(&ak[m]) - kmin) >> shift)], 1u);
        __syncthreads();
        for (u32 j = tid; j < SEG_GIANT_BINS; j += bd)
            if (sh[j]) {
                const u32 base = atomicAdd(&hist[j], sh[j]);
                sh[j] = base;
            }
        seg_grid_sync(bar);
        // 3. Parts' starts and the buckets (the same in every block), then the scatter (the
        // starts past the block's first slots, sh).
        u32* pstart = (u32*)s_raw + 3u * SEG_CAT_CAP;  // past a bucket's keys and ids (step 4)
        const u32 j0 = 2u * tid, j1 = j0 + 1u;  // SEG_CAT_THREADS x 2 = SEG_GIANT_BINS
        const u32 h0 = __ldcg(&hist[j0]), h1 = __ldcg(&hist[j1]);
        u32 total;
        const u32 p0 = seg_block_scan(h0 + h1, &total);
        pstart[j0] = p0;
        pstart[j1] = p0 + h0;
        __syncthreads();
        const bool beg0 = j0 == 0 || p0 / SEG_GIANT_HALF != pstart[j0 - 1] / SEG_GIANT_HALF;
        const bool beg1 = (p0 + h0) / SEG_GIANT_HALF != p0 / SEG_GIANT_HALF;
        u32 nbk;
        const u32 q = seg_block_scan((u32)beg0 + (u32)beg1, &nbk);
        if (beg0) s_bs[q] = p0;
        if (beg1) s_bs[q + (u32)beg0] = p0 + h0;
        if (tid == 0) s_bs[nbk] = cnt;
        for (u32 m = gtid; m < cnt; m += nthreads) {
            const u64 key = __ldcg(&ak[m]);
            const u32 j = (u32)((key - kmin) >> shift);
            const u32 pos = pstart[j] + atomicAdd(&sh[j], 1u);
            bk[pos] = key;
            bi[pos] = __ldcg(&ai[m]);
        }
        seg_grid_sync(bar);
        // 4. Each block sorts whole buckets and stashes weight, |R| within the bucket and flag.
        // A bucket holds whole parts, each in a range of its own: a bucket whose parts hold at
        // most SEG_GIANT_RANK_MAX keys is sorted by each member counting the
        // keys before it in its part (written back to half B), else by the bitonic network.
        // (The radix passes of an oversize bucket take all of s_raw, the parts' starts too: the
        // block's later buckets then use the network.)
        bool pvalid = true;
        for (u32 b = blockIdx.x; b < nbk; b += gridDim.x) {
            const u32 lo = s_bs[b], mm = s_bs[b + 1] - lo;
            const bool fits = mm <= SEG_GIANT_FIT;
            bool ranked = false;
            if (fits) {
                u32 pw = 64u;
                while (pw < mm) pw <<= 1;
                if (tid == 0) s_fail = 0;  // here: a part of the bucket too full to rank in
                __syncthreads();
                for (u32 e = tid; e < pw; e += bd) {
                    const u64 key = e < mm ? __ldcg(&bk[lo + e]) : SEG_NO_EDGE;
                    skey[e] = key;
                    sid[e] = e < mm ? __ldcg(&bi[lo + e]) : SEG_NONE;
                    if (pvalid && e < mm) {
                        const u32 j = (u32)((key - kmin) >> shift);
                        const u32 pe = j + 1u < SEG_GIANT_BINS ? pstart[j + 1u] : cnt;
                        if (pe - pstart[j] > SEG_GIANT_RANK_MAX) s_fail = 1;
                    }
                }
                __syncthreads();
                ranked = pvalid && !s_fail;
                if (ranked) {
                    for (u32 x = tid; x < mm; x += bd) {
                        const u64 kx = skey[x];
                        const u32 ix = sid[x], j = (u32)((kx - kmin) >> shift);
                        const u32 ps = pstart[j] - lo, pe = (j + 1u < SEG_GIANT_BINS ? pstart[j + 1u] : cnt) - lo;
                        u32 rank = ps;
                        for (u32 y = ps; y < pe; ++y) rank += seg_less(skey[y], sid[y], kx, ix) ? 1u : 0u;
                        bk[lo + rank] = kx;
                        bi[lo + rank] = ix;
                    }
                    __syncthreads();
                } else {
                    seg_sort_chunk(skey, sid, pw);
                }
            } else {
                pvalid = false;
                // One part holds more than SEG_GIANT_HALF members: radix passes over the digits
                // where its keys differ, half B <-> half A, the result back in half B.
                u64 bmn = SEG_NO_EDGE, bmx = 0;
                for (u32 e = tid; e < mm; e += bd) {
                    const u64 key = __ldcg(&bk[lo + e]);
                    bmn = key < bmn ? key : bmn;
                    bmx = key > bmx ? key : bmx;
                }
                seg_block_minmax(bmn, bmx, sred);
                __syncthreads();
                // Bucket 0 holds the mutual pair (equal keys, ordered by id).
                if (seg_radix_sort(bk + lo, bi + lo, ak + lo, ai + lo, mm, bmn, bmx, (u32*)s_raw, lo == 0)) {
                    for (u32 e = tid; e < mm; e += bd) {
                        bk[lo + e] = __ldcg(&ak[lo + e]);
                        bi[lo + e] = __ldcg(&ai[lo + e]);
                    }
                }
                __syncthreads();
            }
            // Two members a thread a step: size, own threshold, weight; a block scan for |R|.
            u32 carry = 0;
            for (u32 c0 = 0; c0 < mm; c0 += 2u * bd) {
                u32 sz[2] = {0u, 0u}, c[2] = {0u, 0u};
                u64 key[2] = {0ull, 0ull};
                double w[2] = {0.0, 0.0}, ci[2] = {0.0, 0.0};
#pragma unroll
                for (u32 u = 0; u < 2; ++u) {
                    const u32 e = c0 + 2u * tid + u;
                    if (e < mm) {
                        key[u] = fits && !ranked ? skey[e] : __ldcg(&bk[lo + e]);
                        c[u] = fits && !ranked ? sid[e] : __ldcg(&bi[lo + e]);
                    }
                }
#pragma unroll
                for (u32 u = 0; u < 2; ++u) {
                    const u32 e = c0 + 2u * tid + u;
                    if (e < mm) {
                        sz[u] = size[c[u]];
                        if (mode == SEG_MODE_MERGE) ci[u] = cint[c[u]];
                        if (lo + e >= 1) w[u] = w4[seg_eid(key[u], eb)];
                    }
                }
                u32 step_total;
                const u32 x = seg_block_scan(sz[0] + sz[1], &step_total);
#pragma unroll
                for (u32 u = 0; u < 2; ++u) {
                    const u32 e = c0 + 2u * tid + u;
                    if (e < mm) {
                        const u32 g = lo + e;
                        // merge: the member's own threshold fails; min_size: it is not small,
                        // so the step needs |R| < min_size
                        const bool flag = mode == SEG_MODE_MERGE
                                              ? g >= 1 && !(w[u] < (double)seg_thr(ci[u], k, sz[u]))
                                              : sz[u] >= min_size;
                        ak[g] = (u64)__double_as_longlong(w[u]);
                        ai[g] = (carry + x + (u == 1 ? sz[0] : 0u)) | (flag ? SEG_XS_FAIL : 0u);
                        if (fits && !ranked) bk[g] = key[u], bi[g] = c[u];
                    }
                }
                carry += step_total;
            }
            if (tid == 0) bsum[b] = carry;
            __syncthreads();
        }
        seg_grid_sync(bar);
        // 5. Every step: |R| = the bucket's carry + the stash; the least failing step.
        u32* bcarry = (u32*)s_raw;  // exclusive sums of the buckets' sizes, s_raw[nbk] = |all|
        {
            const u32 v0 = j0 < nbk ? __ldcg(&bsum[j0]) : 0u, v1 = j1 < nbk ? __ldcg(&bsum[j1]) : 0u;
            u32 all;
            const u32 x = seg_block_scan(v0 + v1, &all);
            bcarry[j0] = x;
            bcarry[j1] = x + v0;
            if (tid == 0) {
                bcarry[SEG_GIANT_BINS] = all;
                s_fail = cnt;
            }
            __syncthreads();
        }
        const double int_a = cint[a];
        // The step at position g (g >= 1) of bucket b: whether each side's threshold holds.
        auto step = [&](u32 b, u32 g, bool& ok_c, bool& ok_r, u32& rs) {
            const u32 x = __ldcg(&ai[g]);
            rs = bcarry[b] + (x & ~SEG_XS_FAIL);
            if (mode == SEG_MODE_MERGE) {
                const double w = __longlong_as_double((long long)__ldcg(&ak[g]));
                const double ir = g == 1 ? int_a : __longlong_as_double((long long)__ldcg(&ak[g - 1]));
                ok_c = (x & SEG_XS_FAIL) == 0;
                ok_r = w < (double)seg_thr(ir, k, rs);
            } else {
                ok_c = ok_r = (x & SEG_XS_FAIL) == 0 || rs < min_size;
            }
        };
        for (u32 b = blockIdx.x; b < nbk; b += gridDim.x) {
            const u32 lo = s_bs[b], hi = s_bs[b + 1];
            for (u32 g = lo + tid; g < hi; g += bd) {
                if (g == 0) continue;
                bool ok_c, ok_r;
                u32 rs;
                step(b, g, ok_c, ok_r, rs);
                if (!(ok_c && ok_r)) {
                    atomicMin(&s_fail, g);
                    break;  // later steps of this thread's bucket fail later
                }
            }
        }
        __syncthreads();
        if (tid == 0 && s_fail < cnt) atomicMax(&gs[3], (u64)(cnt - s_fail));
        seg_grid_sync(bar);
        // 6. The members before the first failing step join; the step's side(s) freeze.
        const u32 f = cnt - (u32)__ldcg(&gs[3]);
        for (u32 g = gtid; g < f; g += nthreads) {
            if (g >= 1) {
                seg_join(link, done, round, __ldcg(&bi[g]), a, r);
                ++ev;
                ++mg;
            }
        }
        if (gtid == 0) {
            u32 rs = bcarry[SEG_GIANT_BINS];
            if (f < cnt) {
                u32 b = 0;  // the bucket of position f: the last start at most f
                for (u32 lo2 = 0, hi2 = nbk; lo2 < hi2;) {
                    const u32 mid = (lo2 + hi2) >> 1;
                    if (s_bs[mid] <= f) {
                        b = mid;
                        lo2 = mid + 1;
                    } else {
                        hi2 = mid;
                    }
                }
                bool ok_c, ok_r;
                step(b, f, ok_c, ok_r, rs);
                ev += seg_freeze(done, mode, __ldcg(&bi[f]), a, ok_c, ok_r);
            }
            size[a] = rs;
            if (mode == SEG_MODE_MIN_SIZE) done[a] = rs >= min_size;
            if (mode == SEG_MODE_MERGE && f >= 2) cint[a] = __longlong_as_double((long long)__ldcg(&ak[f - 1]));
            tcnt[t] = 0;
            atomicAdd(gcnt, 1u);
        }
        // Scratch back to zero for the next tree.
        for (u32 j = gtid; j < 2u * SEG_GIANT_BINS; j += nthreads) hist[j] = 0;
        if (gtid == 0) gs[1] = gs[2] = gs[3] = 0;
        seg_grid_sync(bar);
    }
    seg_count(ctl, mctl, r, ev, mg);
}
