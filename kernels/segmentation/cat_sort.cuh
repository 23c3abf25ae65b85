// Sorting a large tree's members by (key, id) for its caterpillar, by one block: chunk selects
// (a prefix of the remaining keys by a radix select or a range count) and bucket gathers, a
// bitonic network in registers and shared memory, stable LSD radix passes (one block, warp
// ranges, counts in shared memory), and the whole-tree sort in dynamic shared memory. Memory:
// chunks in the static shared area (2048 keys and ids), whole trees in dynamic shared memory,
// radix sorts in the scratch ranges scr_k / scr_i of the tree's jarr range.
// Part of kernels/segmentation.cu (included in order; see the notes at its top).

// Trees above SEG_CAT_SORT members are sorted whole (seg_sort_tree) instead of chunk by chunk
// where chunks are selected (the finishers): the chunks' selects cost O(members^2 /
// SEG_CAT_CAP), the sort O(members), but most trees of a few thousand members stop in their
// first chunk, which a select serves at once.
#define SEG_CAT_SORT 8192   // members above which a tree is sorted once rather than selected chunk by chunk
#define SEG_CAT_GIANT 8192  // core members above which segmentation_cat_giant's grid walks a tree (where launched)

// Members m0 + u * blockDim.x (u < 4) of a tree's range: ids, then keys (SEG_NO_EDGE past
// cnt). The four loads of each kind are independent, so a pass over a large tree keeps four
// member -> key chains in flight a thread instead of one.
__device__ __forceinline__ void seg_members4(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off,
                                             u32 cnt, u32 m0, u32 (&id)[4], u64 (&key)[4]) {
#pragma unroll
    for (u32 u = 0; u < 4; ++u) {
        u32 m = m0 + u * blockDim.x;
        id[u] = m < cnt ? jarr[off + m] : SEG_NONE;
    }
#pragma unroll
    for (u32 u = 0; u < 4; ++u) key[u] = id[u] != SEG_NONE ? tkey[id[u]] : SEG_NO_EDGE;
}

// f(m, id, key) for each member m < cnt of a tree's range that falls to this thread, four
// member -> key chains in flight at a time (seg_members4).
template <class F>
__device__ __forceinline__ void seg_each_member(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off,
                                                u32 cnt, F f) {
    for (u32 m0 = threadIdx.x; m0 < cnt; m0 += 4 * blockDim.x) {
        u32 id[4];
        u64 kk[4];
        seg_members4(tkey, jarr, off, cnt, m0, id, kk);
#pragma unroll
        for (u32 u = 0; u < 4; ++u)
            if (id[u] != SEG_NONE) f(m0 + u * blockDim.x, id[u], kk[u]);
    }
}

// Every member's key and id into sk / si (at its position m in the tree's range) and this
// thread's least and greatest key into mn / mx (seg_block_minmax reduces them over the block).
__device__ __forceinline__ void seg_stage_members(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off,
                                                  u32 cnt, u64* sk, u32* si, u64& mn, u64& mx) {
    mn = SEG_NO_EDGE;
    mx = 0;
    seg_each_member(tkey, jarr, off, cnt, [&](u32 m, u32 id, u64 k) {
        sk[m] = k;
        si[m] = id;
        mn = k < mn ? k : mn;
        mx = k > mx ? k : mx;
    });
}

// Of the members (jarr[off .. off + cnt)) with key > lo (every member when `all`), the key of
// rank `need` (1-based) in key order: an MSB-first radix select, one 8-bit digit a pass, counted
// in a shared histogram (keys are distinct except the pair's, which are the least of a tree).
__device__ u64 seg_select(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt, u64 lo,
                          bool all, u32 need, u32* hist, u64* sprefix, u32* sneed) {
    u64 prefix = 0, mask = 0;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (u32 j = threadIdx.x; j < 256; j += blockDim.x) hist[j] = 0;
        __syncthreads();
        seg_each_member(tkey, jarr, off, cnt, [&](u32, u32, u64 k) {
            if ((all || k > lo) && (k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255u], 1u);
        });
        __syncthreads();
        // The digit whose cumulative count reaches `need` (the last digit when none does): warp
        // 0 scans the 256 counts, 8 a lane.
        if (threadIdx.x < 32) {
            u32 lane = threadIdx.x, c[8], sum = 0;
#pragma unroll
            for (u32 b = 0; b < 8; ++b) {
                c[b] = hist[lane * 8 + b];
                sum += c[b];
            }
            u32 incl = warp_inclusive_scan(sum);
            u32 cum = incl - sum;
            if (cum < need && need <= incl) {
                u32 d = lane * 8;
                for (u32 b = 0; b < 7 && cum + c[b] < need; ++b) {
                    cum += c[b];
                    ++d;
                }
                *sprefix = prefix | ((u64)d << shift);
                *sneed = need - cum;
            } else if (lane == 31 && incl < need) {
                *sprefix = prefix | (255ull << shift);
                *sneed = need - (incl - c[7]);
            }
        }
        __syncthreads();
        prefix = *sprefix;
        need = *sneed;
        mask |= 0xffull << shift;
        __syncthreads();
    }
    return prefix;
}

// One stable LSD radix pass (8-bit digit at `shift`) of cnt (key, id) pairs from (sk, si) to
// (dk, di) by one block. Warp w owns the contiguous range [w * per, (w + 1) * per) of the input;
// its digit counts go to wcnt (256 x warps words, 8192 at 1024 threads) at SEG_WC(digit, w),
// whose exclusive scan in (digit, warp) order is where each warp's pairs of each digit start, so
// equal digits keep their order. Then each warp walks its range again, 32 pairs a step, ranks a
// pair among its step's pairs of the same digit (seg_peers) and bumps its own count: three
// block barriers a pass, four loads a lane in flight. A pass is bound by one SM's throughput of
// two scattered 8- and 4-byte stores a pair (which is why giant trees take a grid instead).
// Counts of (digit, warp): a row of `warps` words per digit, the warp index XOR-swizzled by the
// digit so one warp's counters of different digits fall in different banks.
#define SEG_WC(d, w, nw) ((d) * (nw) + ((w) ^ ((d) & ((nw) - 1u))))

// The right shift that maps keys base .. base + span into 2^nlog equal parts ((k - base) >> shift).
__device__ __forceinline__ u32 seg_part_shift(u64 span, u32 nlog) {
    const u32 bits = span == 0 ? 0u : 64u - (u32)__clzll((long long)span);
    return bits > nlog ? bits - nlog : 0u;
}

// The block's least of every thread's mn and greatest of its mx, into every thread's mn and mx
// (red: 64 words of shared memory; blockDim.x a multiple of 32, at most 1024). The threads read
// red after one barrier; a caller syncs again before it writes red.
__device__ __forceinline__ void seg_block_minmax(u64& mn, u64& mx, u64* red) {
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
    for (u32 o = 16; o > 0; o >>= 1) {
        u64 a = __shfl_xor_sync(FULL_MASK, mn, o), b = __shfl_xor_sync(FULL_MASK, mx, o);
        mn = a < mn ? a : mn;
        mx = b > mx ? b : mx;
    }
    if (lane == 0) {
        red[warp] = mn;
        red[32 + warp] = mx;
    }
    __syncthreads();
    // Every warp reduces the warps' partials itself (no second barrier, no serial loop over the
    // 32 partials).
    const u32 nw = blockDim.x >> 5;
    mn = lane < nw ? red[lane] : SEG_NO_EDGE;
    mx = lane < nw ? red[32 + lane] : 0;
#pragma unroll
    for (u32 o = 16; o > 0; o >>= 1) {
        u64 a = __shfl_xor_sync(FULL_MASK, mn, o), b = __shfl_xor_sync(FULL_MASK, mx, o);
        mn = a < mn ? a : mn;
        mx = b > mx ? b : mx;
    }
}

// Of the members with key > lo (every member when `all`), a key thr such that between 1 and cap
// of them are at most thr: a prefix of the caterpillar in key order (not always the longest,
// which seg_select finds). One pass takes the keys' range, one counts them in 2048 equal parts of
// it (`bins`: 2048 words of shared memory; blockDim.x a power of two, 256 to 1024), and thr ends
// the last part whose cumulative count is at most cap; when the first part alone holds more,
// the range narrows to it and the count repeats (rare: one part holds ~1/2048 of the keys'
// span). Three passes over the tree with the gathering pass, against seg_select's nine. Returns
// `lo` when it cannot bound a prefix (more than cap equal keys, or no member above lo: neither
// happens with distinct keys); the caller then takes seg_select's key. Otherwise `bins` still
// holds the counts of the parts (part (k - base_o) >> shift_o) and thr ends a part.
__device__ u64 seg_select_range(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt, u64 lo,
                                bool all, u32 cap, u32* bins, u64* sred, u64& base_o, u32& shift_o) {
    const u32 tid = threadIdx.x;
    u64 mn = SEG_NO_EDGE, mx = 0;
    seg_each_member(tkey, jarr, off, cnt, [&](u32, u32, u64 k) {
        if (all || k > lo) {
            mn = k < mn ? k : mn;
            mx = k > mx ? k : mx;
        }
    });
    seg_block_minmax(mn, mx, sred);
    u64 base = mn, top = mx;
    if (base > top) {
        __syncthreads();  // every thread has read sred
        return lo;
    }
    const u32 per = 2048u / blockDim.x;
    while (true) {
        const u64 span = top - base;
        const u32 shift = seg_part_shift(span, 11u);
        __syncthreads();  // sred and bins are free
        for (u32 j = tid; j < 2048u; j += blockDim.x) bins[j] = 0;
        if (tid == 0) sred[0] = 0;
        __syncthreads();
        seg_each_member(tkey, jarr, off, cnt, [&](u32, u32, u64 k) {
            if ((all || k > lo) && k >= base && k <= top) atomicAdd(&bins[(u32)((k - base) >> shift)], 1u);
        });
        __syncthreads();
        u32 sum = 0;
        for (u32 b = 0; b < per; ++b) sum += bins[tid * per + b];
        u32 total;
        u32 incl = seg_block_scan(sum, &total);
        for (u32 b = 0; b < per; ++b) {
            const u32 d = tid * per + b;
            incl += bins[d];
            const u32 next = d + 1 < 2048u ? incl + bins[d + 1] : 0xffffffffu;
            if (incl <= cap && next > cap) {
                sred[0] = 1;
                // The end of part d, at most top (no overflow past the last part).
                const u64 end = (u64)(d + 1) << shift;
                sred[1] = end - 1 >= span ? top : base + end - 1;
            }
        }
        __syncthreads();
        const bool found = sred[0] != 0;
        const u64 thr = sred[1];
        if (found || shift == 0) {
            __syncthreads();  // every thread has read sred
            base_o = base;
            shift_o = shift;
            return found ? thr : lo;
        }
        top = base + (1ull << shift) - 1;  // the first part alone holds more than cap
    }
}

// Lanes whose 8-bit digit equals this lane's (among `valid` lanes): eight ballots, one a bit
// (__match_any_sync costs far more).
__device__ __forceinline__ u32 seg_peers(u32 d, bool valid) {
    u32 peers = __ballot_sync(FULL_MASK, valid);
#pragma unroll
    for (u32 b = 0; b < 8; ++b) {
        u32 bit = (d >> b) & 1u;
        u32 bal = __ballot_sync(FULL_MASK, bit);
        peers &= bit ? bal : ~bal;
    }
    return peers;
}

__device__ void seg_radix_pass(const u64* __restrict__ sk, const u32* __restrict__ si, u64* dk, u32* di, u32 cnt,
                               u32 shift, u32* wcnt) {
    u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5, nw = blockDim.x >> 5;
    u32 per = (cnt + nw - 1) / nw;
    u32 beg = min(cnt, warp * per), end = min(cnt, beg + per);
    u32 below = (1u << lane) - 1u;
    for (u32 j = tid; j < 256u * nw; j += blockDim.x) wcnt[j] = 0;
    __syncthreads();
    for (u32 m0 = beg; m0 < end; m0 += 4u * 32u) {
        u32 d[4];
#pragma unroll
        for (u32 u = 0; u < 4; ++u) {
            u32 m = m0 + u * 32u + lane;
            d[u] = m < end ? (u32)((sk[m] >> shift) & 255u) : 256u;
        }
#pragma unroll
        for (u32 u = 0; u < 4; ++u) {
            if (m0 + u * 32u >= end) break;  // warp-uniform
            bool valid = d[u] < 256u;
            u32 peers = seg_peers(d[u], valid);
            if (valid && (peers & below) == 0) wcnt[SEG_WC(d[u], warp, nw)] += (u32)__popc(peers);
            __syncwarp();
        }
    }
    __syncthreads();
    // Exclusive scan of the 256 * nw counts in (digit, warp) order: eight consecutive a thread.
    u32 v[8], sum = 0;
#pragma unroll
    for (u32 b = 0; b < 8; ++b) {
        u32 f = 8u * tid + b, d = f / nw, w = f % nw;
        v[b] = wcnt[SEG_WC(d, w, nw)];
        sum += v[b];
    }
    u32 total;
    u32 x = seg_block_scan(sum, &total);
#pragma unroll
    for (u32 b = 0; b < 8; ++b) {
        u32 f = 8u * tid + b, d = f / nw, w = f % nw;
        wcnt[SEG_WC(d, w, nw)] = x;
        x += v[b];
    }
    __syncthreads();
    for (u32 m0 = beg; m0 < end; m0 += 4u * 32u) {
        u64 k[4];
        u32 id[4], d[4];
#pragma unroll
        for (u32 u = 0; u < 4; ++u) {
            u32 m = m0 + u * 32u + lane;
            bool valid = m < end;
            k[u] = valid ? sk[m] : 0ull;
            id[u] = valid ? si[m] : 0u;
            d[u] = valid ? (u32)((k[u] >> shift) & 255u) : 256u;
        }
#pragma unroll
        for (u32 u = 0; u < 4; ++u) {
            if (m0 + u * 32u >= end) break;  // warp-uniform
            bool valid = d[u] < 256u;
            u32 peers = seg_peers(d[u], valid);
            u32 at = 0;
            if (valid) {
                at = wcnt[SEG_WC(d[u], warp, nw)];
                u32 dst = at + (u32)__popc(peers & below);
                dk[dst] = k[u];
                di[dst] = id[u];
            }
            __syncwarp();
            if (valid && (peers & below) == 0) wcnt[SEG_WC(d[u], warp, nw)] = at + (u32)__popc(peers);
            __syncwarp();
        }
    }
    __syncthreads();
}

// Sorts cnt (key, id) pairs at sk/si whose keys lie in [kmin, kmax] by stable LSD radix passes
// over the digits below the highest bit where those differ, sk/si <-> sk2/si2; with `pair` the
// first two (the mutual pair's equal keys, the least of a tree) are then ordered by id. Returns
// which half holds the result (0: sk/si). wcnt: 256 words a warp of shared memory.
__device__ __forceinline__ u32 seg_radix_sort(u64* sk, u32* si, u64* sk2, u32* si2, u32 cnt, u64 kmin, u64 kmax, u32* wcnt,
                              bool pair) {
    const u64 diff = kmin ^ kmax;
    const u32 top = diff ? 64u - (u32)__clzll((long long)diff) : 0u;  // bits that differ: [0, top)
    u32 half = 0;
    for (u32 shift = 0; shift < top; shift += 8) {
        if (half == 0) seg_radix_pass(sk, si, sk2, si2, cnt, shift, wcnt);
        else seg_radix_pass(sk2, si2, sk, si, cnt, shift, wcnt);
        half ^= 1u;
    }
    if (pair && threadIdx.x == 0 && cnt >= 2) {
        u64* k = half ? sk2 : sk;
        u32* d = half ? si2 : si;
        if (k[0] == k[1] && d[1] < d[0]) {
            u32 t = d[0];
            d[0] = d[1];
            d[1] = t;
        }
    }
    __syncthreads();
    return half;
}

// Sorts a large tree's core by (key, id) into scratch (2 x cnt pairs at sk/si and sk2/si2):
// the members are gathered once (four member -> key chains in flight a thread), then stable
// LSD radix passes over the digits below the highest bit where the keys differ. Keys are unique
// except the mutual pair's (the same edge, the least key of the tree), whose order by id is
// fixed at the end. Returns which half holds the result (0: sk/si). Shared: wcnt 256 words a
// warp (8192 at 1024 threads), red 2 x 32 u64.
__device__ u32 seg_sort_tree(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt, u64* sk,
                             u32* si, u64* sk2, u32* si2, u32* wcnt, u64* red) {
    u64 kmin, kmax;
    seg_stage_members(tkey, jarr, off, cnt, sk, si, kmin, kmax);
    seg_block_minmax(kmin, kmax, red);
    __syncthreads();
    return seg_radix_sort(sk, si, sk2, si2, cnt, kmin, kmax, wcnt, true);
}

// Step `j` of bitonic level `kk` for element e held in registers (k, i), its partner e ^ j held by
// lane ^ j of the same warp: the lower index keeps the smaller (key, id) where the level sorts
// ascending ((e & kk) == 0), the larger elsewhere.
__device__ __forceinline__ void seg_bitonic_shfl(u64& k, u32& i, u32 e, u32 j, u32 kk) {
    const u64 ok = __shfl_xor_sync(FULL_MASK, k, j);
    const u32 oi = __shfl_xor_sync(FULL_MASK, i, j);
    const bool asc = (e & kk) == 0, lower = (e & j) == 0;
    const bool take = lower == asc ? seg_less(ok, oi, k, i) : seg_less(k, i, ok, oi);
    if (take) {
        k = ok;
        i = oi;
    }
}

// Sorts skey / sid[0, pw) by (key, id) with a bitonic network (pw a power of two, 64 <= pw <= 2 *
// blockDim.x; callers pad with SEG_NO_EDGE). A warp holds 64 consecutive elements in registers
// (lane l: b + l and b + 32 + l), so every step with j < 64 runs in registers and shuffles; only
// the steps with j >= 64 go through shared memory with a barrier each (21 barriers at pw = 2048
// instead of 66).
__device__ void seg_sort_chunk(u64* skey, u32* sid, u32 pw) {
    const u32 tid = threadIdx.x;
    auto shared_step = [&](u32 kk, u32 j) {
        for (u32 e = tid; e < pw; e += blockDim.x) {
            u32 o = e ^ j;
            if (o > e) {
                bool asc = (e & kk) == 0;
                bool swap = asc ? seg_less(skey[o], sid[o], skey[e], sid[e]) : seg_less(skey[e], sid[e], skey[o], sid[o]);
                if (swap) {
                    u64 tk = skey[e];
                    skey[e] = skey[o];
                    skey[o] = tk;
                    u32 ti = sid[e];
                    sid[e] = sid[o];
                    sid[o] = ti;
                }
            }
        }
        __syncthreads();
    };
    const u32 lane = tid & 31u, e0 = (tid >> 5) * 64u + lane, e1 = e0 + 32u;
    const bool act = e0 < pw;  // whole warps (pw is a multiple of 64)
    // Steps j < 64 of levels kk_lo..kk_hi, in registers (the level's steps from min(kk / 2, 32)).
    auto in_registers = [&](u32 kk_lo, u32 kk_hi) {
        if (!act) return;
        u64 k0 = skey[e0], k1 = skey[e1];
        u32 i0 = sid[e0], i1 = sid[e1];
        for (u32 kk = kk_lo; kk <= kk_hi; kk <<= 1) {
            for (u32 j = kk >> 1 < 32u ? kk >> 1 : 32u; j > 0; j >>= 1) {
                if (j == 32u) {
                    // e0 and e1 are partners, in one block of the level (kk >= 64)
                    if ((e0 & kk) == 0) seg_cswap2(k0, i0, k1, i1);
                    else seg_cswap2(k1, i1, k0, i0);
                } else {
                    seg_bitonic_shfl(k0, i0, e0, j, kk);
                    seg_bitonic_shfl(k1, i1, e1, j, kk);
                }
            }
        }
        skey[e0] = k0;
        skey[e1] = k1;
        sid[e0] = i0;
        sid[e1] = i1;
    };
    in_registers(2u, 64u);
    __syncthreads();
    for (u32 kk = 128u; kk <= pw; kk <<= 1) {
        for (u32 j = kk >> 1; j >= 64u; j >>= 1) shared_step(kk, j);
        in_registers(kk, kk);
        __syncthreads();
    }
}

// The bucket gather (seg_cat_blocks' BUCKET): a large tree's chunk is gathered in key order part
// by part, from the counts of the parts of the keys' range that seg_select_range leaves in
// `bins`, instead of gathered in any order and sorted by seg_sort_chunk's bitonic network (which
// took about half of a 2 048-member chunk's time). The finishers gather without it (their
// registers spill more with it).
// The most keys a part may hold for the bucket gather to sort them alone (insertion, one thread a
// part); a chunk with a fuller part is sorted whole. (Parts of 17-64 keys sorted by a warp each
// cost what the bitonic network saved.)
#define SEG_BUCKET_SORT_MAX 16u

// The chunk (members with key > lo, or every member when `all`, up to thr, the end of part `last`
// of the keys' range: part (k - base) >> shift) into skey / sid in (key, id) order: the parts'
// starts by a block scan of their counts (`bins`, which alias skey, read before it is written)
// into pend, every member takes the next slot of its part, then one thread a part sorts the
// keys that share it by insertion. *fill = the chunk's size. False (the chunk gathered part by
// part, not sorted) when a part of the chunk holds more than SEG_BUCKET_SORT_MAX keys.
// 2048 / blockDim.x parts a thread.
__device__ bool seg_bucket_gather(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt, u64 lo,
                                  bool all, u64 thr, u64 base, u32 shift, u32 last, u64* skey, u32* sid, u32* pend,
                                  u32* fill) {
    __shared__ u32 s_most;
    const u32 tid = threadIdx.x, per = 2048u / blockDim.x;
    const u32* bins = (const u32*)skey;
    if (tid == 0) s_most = 0;
    u32 sum = 0, most = 0;
    for (u32 b = 0; b < per; ++b) {
        const u32 d = tid * per + b, v = d <= last ? bins[d] : 0u;
        sum += v;
        most = v > most ? v : most;
    }
    u32 total;
    u32 ex = seg_block_scan(sum, &total);  // its barriers publish s_most = 0
    atomicMax(&s_most, most);
    for (u32 b = 0; b < per; ++b) {
        const u32 d = tid * per + b;
        pend[d] = ex;
        ex += d <= last ? bins[d] : 0u;
    }
    __syncthreads();  // bins read: skey may be written
    if (tid == 0) *fill = total;
    seg_each_member(tkey, jarr, off, cnt, [&](u32, u32 id, u64 k) {
        if ((all || k > lo) && k <= thr) {
            const u32 slot = atomicAdd(&pend[(u32)((k - base) >> shift)], 1u);
            skey[slot] = k;
            sid[slot] = id;
        }
    });
    __syncthreads();
    const bool ok = s_most <= SEG_BUCKET_SORT_MAX;
    if (ok) {
        for (u32 b = 0; b < per; ++b) {
            const u32 d = tid * per + b;
            if (d > last) break;
            const u32 st = d ? pend[d - 1] : 0u, en = pend[d];
            for (u32 x = st + 1; x < en; ++x) {
                const u64 kx = skey[x];
                const u32 ix = sid[x];
                u32 y = x;
                while (y > st && seg_less(kx, ix, skey[y - 1], sid[y - 1])) {
                    skey[y] = skey[y - 1];
                    sid[y] = sid[y - 1];
                    --y;
                }
                skey[y] = kx;
                sid[y] = ix;
            }
        }
        __syncthreads();
    }
    return ok;
}

// The whole-tree sort (seg_cat_blocks' WHOLE): segmentation_cat_block (and _g) sort a large tree of
// at most W members once, in the dynamic shared memory its launch brings (W = seg_whole_cap():
// 16 bytes a member; the host gives up to 8 192 members' worth where the device allows it),
// and then walk its chunks from there, instead of reading every member from global memory three
// times a chunk (range, counts, gather: seg_select_range, seg_bucket_gather). Sort: one pass
// stages every member's key and id and takes their range; the range in SEG_WHOLE_BINS equal
// parts is counted (in the static chunk area), a block scan gives each part's start, every
// member takes the next slot of its part (an order of 16-bit member indices), and each member
// moves to its rank among its part's keys. A part of more than SEG_WHOLE_PART_MAX keys
// (members crowded into a narrow range: many with one weight, keys that differ only in their
// edge ids) makes it give up before the scatter, and the tree is radix-sorted instead
// (seg_sort_tree; in the dynamic shared memory when twice the tree fits there, else in global
// scratch; a tree of one chunk is gathered and sorted at once): the whole-tree kernels never
// select chunks (WHOLE_ONLY in seg_cat_blocks), which keeps the select code's registers out of
// them. Refining a crowded tree part by part (a second level) was slower than the radix sort:
// the crowding repeats at every distinct weight.
#define SEG_WHOLE_BINS 8192u
#define SEG_WHOLE_BINS_LOG 13u

extern __shared__ __align__(16) unsigned char seg_dyn[];

// Members the launch's dynamic shared memory holds for seg_whole_sort (0: none given).
__device__ __forceinline__ u32 seg_whole_cap() {
    u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    return (dyn / 16u) & ~7u;
}

// Most keys a part may hold for seg_whole_sort (each member ranks itself among its part's keys:
// a load pair a key of the part).
#define SEG_WHOLE_PART_MAX 64u

// The tree's members (jarr[off .. off + cnt), cnt <= W) into sk / si (staged in range order)
// and ord (their indices in (key, id) order; ord2: the order by parts before the ranking);
// bins: SEG_WHOLE_BINS words (the static chunk area, 16-byte aligned). False: a part too full
// (see above); ord is then incomplete. The part counts are read and written as uint4 (a
// thread's 8 contiguous counts: scalar accesses at that stride conflicted 8 ways), and each
// member takes its place in its part by counting the part's smaller keys (faster than one
// thread a part sorting by insertion).
__device__ bool seg_whole_sort(const u64* __restrict__ tkey, const u32* __restrict__ jarr, u32 off, u32 cnt,
                               u64* sk, u32* si, u16* ord, u16* ord2, u32* bins, u64* sred) {
    __shared__ u32 s_full;
    const u32 tid = threadIdx.x, bd = blockDim.x;
    u64 mn, mx;
    seg_stage_members(tkey, jarr, off, cnt, sk, si, mn, mx);
    seg_block_minmax(mn, mx, sred);  // its barrier publishes sk / si
    const u32 shift = seg_part_shift(mx - mn, SEG_WHOLE_BINS_LOG);
    uint4* bins4 = (uint4*)bins;
    for (u32 j = tid; j < SEG_WHOLE_BINS / 4u; j += bd) bins4[j] = make_uint4(0u, 0u, 0u, 0u);
    if (tid == 0) s_full = 0;
    __syncthreads();
    for (u32 m = tid; m < cnt; m += bd) atomicAdd(&bins[(u32)((sk[m] - mn) >> shift)], 1u);
    __syncthreads();
    // Counts to starts: a block scan of each thread's SEG_WHOLE_BINS / bd (8 at 1 024 threads)
    // contiguous counts, read and written two uint4 at a time.
    const u32 q4 = SEG_WHOLE_BINS / 4u / bd;
    u32 sum = 0, most = 0;
    for (u32 b = 0; b < q4; ++b) {
        const uint4 c = bins4[tid * q4 + b];
        sum += c.x + c.y + c.z + c.w;
        most = max(most, max(max(c.x, c.y), max(c.z, c.w)));
    }
    if (most > SEG_WHOLE_PART_MAX) s_full = 1;
    u32 total;
    u32 ex = seg_block_scan(sum, &total);  // its barriers publish s_full
    for (u32 b = 0; b < q4; ++b) {
        const uint4 c = bins4[tid * q4 + b];
        uint4 o;
        o.x = ex;
        o.y = o.x + c.x;
        o.z = o.y + c.y;
        o.w = o.z + c.z;
        ex = o.w + c.w;
        bins4[tid * q4 + b] = o;
    }
    __syncthreads();
    if (s_full) return false;  // every thread read s_full after the barriers
    for (u32 m = tid; m < cnt; m += bd) ord2[atomicAdd(&bins[(u32)((sk[m] - mn) >> shift)], 1u)] = (u16)m;
    __syncthreads();
    // bins[d] is now the end of part d (its start: the end of part d - 1). Each member's place:
    // its part's start plus the part's members before it in (key, id) order.
    for (u32 x = tid; x < cnt; x += bd) {
        const u16 px = ord2[x];
        const u64 kx = sk[px];
        const u32 ix = si[px], d = (u32)((kx - mn) >> shift);
        const u32 st = d ? bins[d - 1] : 0u, en = bins[d];
        u32 rank = st;
        for (u32 y = st; y < en; ++y) {
            const u16 py = ord2[y];
            rank += seg_less(sk[py], si[py], kx, ix) ? 1u : 0u;
        }
        ord[rank] = px;
    }
    __syncthreads();
    return true;
}
