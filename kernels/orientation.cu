// Linear openings at arbitrary angles and orientation maps (Karas et al. 2015, "GPU
// implementation of linear morphological openings with arbitrary angle": line families, zones,
// every angle in one launch), with each line opened by van Herk / Gil-Werman (van Herk 1992, Gil
// and Werman 1993) instead of the paper's streaming FIFO: the same outputs, a fixed amount of
// work per sample and no data-dependent branch, so the lanes of a warp never diverge (this
// kernel is 2.9 to 3.5 times faster than the FIFO's on 1080p and 4K maps, BENCHMARKS.md).
// Definitions: src/ops/orientation/mod.rs; the CPU reference (src/ops/orientation/van_herk.rs)
// computes the same opening by the same blocks, a line at a time; src/ops/orientation/blocks.rs
// models orientation_open_line step by step for the tests (keep the two in sync).
//
// Working image. A line family runs along a *major* axis a with lines b = c + phi(a),
// phi(a) = sgn(q) * floor((2|q|a + r) / 2r). Row-major families (near-vertical lines) read the
// image I itself (a = y, b = x). Column-major families (near-horizontal lines) read the
// transposed image I^T made once by orientation_transpose_* (a = x, b = y) and write their
// output transposed as well (section 5.3 of the paper: writes along b are coalesced); the reduce
// kernel reads such planes through a shared-memory tile. So in every case consecutive threads
// (consecutive lines c) at the same step a touch consecutive addresses.
//
// orientation_lines_*: one thread per (line, zone) of one angle; blockIdx.y = the angle's slot
//   in the launch (every angle of an orientation map in one launch, section 6.1), blockIdx.x *
//   blockDim.x + threadIdx.x = zone * lines_pad + line (lines_pad = lines rounded up to 32, so a
//   warp never straddles two zones). Zones (section 5.1): the major axis is cut into zones of
//   zone_len samples; a thread reads its zone plus 2r samples on each side (the overlap of
//   2(L-1) of the paper) and writes only its zone: the windows through its outputs never reach
//   past the overlap. Border policy: pixels outside the image are ignored.
//   van Herk / Gil-Werman: the minimum of the window [s, s + L - 1] is min(S[s], P[s + L - 1]),
//   over blocks of L consecutive steps: P the prefix minimum inside the block being read, S the
//   suffix minimum inside the block before, made by one backward pass when a block is complete.
//   The erosion e(c) = min x[c-r..c+r] (x = +inf outside the samples read) comes out r steps
//   after x[c + r] is read; the dilation of e by the same blocks, L - 1 steps after x[a + r]:
//   the opening at a. Both passes share one loop and one ring of L words a thread: the block's
//   inputs and then its suffix minima, the erosion's in the low 16 bits and the inverted erosion
//   (0xffff - e, so that both halves are minima and the backward pass is one __vminu2 a word) in
//   the high 16 bits; a position outside the samples read is ignored by the dilation (inverted
//   value 0xffff). The 32 lanes of a warp step a in lockstep from the warp's first sample to its
//   last output (lanes outside their own range read +inf and write nothing), with the blocks
//   aligned to the warp's first step, so every lane takes the same branches, the backward pass
//   included; loads and stores coalesce. The samples of the next LINES_PREFETCH steps are
//   loaded before they are used. The ring lives in shared memory (slot s of thread t at
//   sh[s * blockDim.x + t]: bank = t mod 32, conflict free), or, for the orientation_lines_global_*
//   variant used when L words a thread do not fit, in global memory (slot s of thread g at
//   ring[s * total_threads + g]). The spectrum (sum of each opening) is accumulated per thread
//   in 64 bits and added with one atomicAdd per thread (integer: deterministic).
// orientation_transpose_*: dst (cols x rows) = src (rows x cols) transposed, 32x32 tiles in
//   shared memory (tile[32][33]), blocks of 32x8 threads, 4 pixels per thread; optional
//   inversion (MAX - v) on the way.
// orientation_reduce_*: per pixel, max and first argmax over the planes of a launch, in
//   increasing angle order (ties keep the smaller index), continuing the running maps of
//   earlier launches. 32x32 tiles, blocks of 32x8 threads; transposed planes pass through a
//   shared tile[32][33].
// orientation_finish_*: strength in the input domain (inverted back for closings) and the
//   HSV colour picture (hue table per angle, value = 8-bit strength), one thread per pixel.
//
// Values are handled as u32 in [0, MAX] (MAX = 255 or 65535); +inf is 0xffff (>= MAX).
#include "common/util.cuh"

#define ORIENTATION_NONE 0xffffffffu
#define ORIENTATION_INT_MAX 0x7fffffff
#define ORIENTATION_INT_MIN (-ORIENTATION_INT_MAX - 1)

// Keep in sync with plan.rs `OrientationAngle` (8 x i32).
struct OrientationAngle {
    int q;          // minor rise per r major steps (|q| <= r)
    int transposed; // 1: column-major family, working image I^T (major = x)
    int nlines;     // lines meeting the image
    int cmin;       // index c of the first line
    int zones;      // zones along the major axis
    int zone_len;   // major samples per zone
    int lines_pad;  // nlines rounded up to a multiple of 32
    int plane;      // output plane (and spectrum slot) of this angle in the launch
};

// What one thread does: its line c and its ranges along the major axis.
struct OrientationLine {
    int active;    // 0: no output in this zone
    int c;         // line index
    int zr0, zr1;  // samples read: [zr0, zr1)
    int zo0, zo1;  // outputs written: [zo0, zo1)
};

__device__ __forceinline__ long long orientation_ceil_div(long long n, long long d) { return (n + d - 1) / d; }

// The ranges of line `li` in zone `z` of an angle (A: major extent, B: minor extent).
__device__ __forceinline__ OrientationLine orientation_setup(const OrientationAngle& ang, int li, int z, int A, int B, int r) {
    OrientationLine ln;
    ln.active = 0;
    ln.c = 0;
    ln.zr0 = ln.zr1 = ln.zo0 = ln.zo1 = 0;
    if (li >= ang.nlines) return ln;
    const int c = ang.cmin + li;
    ln.c = c;
    int a0, a1;
    if (ang.q == 0) {
        if (c < 0 || c >= B) return ln;
        a0 = 0;
        a1 = A - 1;
    } else {
        const long long aq = ang.q < 0 ? -(long long)ang.q : (long long)ang.q;
        const long long rr = r;
        long long lo, hi;
        if (ang.q > 0) {
            lo = -(long long)c;
            hi = (long long)B - 1 - c;
        } else {
            lo = (long long)c - B + 1;
            hi = c;
        }
        if (hi < 0) return ln;
        const long long a0l = lo <= 0 ? 0 : orientation_ceil_div(rr * (2 * lo - 1), 2 * aq);
        long long a1l = orientation_ceil_div(rr * (2 * hi + 1), 2 * aq) - 1;
        if (a1l > A - 1) a1l = A - 1;
        if (a0l > a1l) return ln;
        a0 = (int)a0l;
        a1 = (int)a1l;
    }
    const int zlo = z * ang.zone_len;
    const int zhi = imin(A, zlo + ang.zone_len);
    ln.zo0 = imax(a0, zlo);
    ln.zo1 = imin(a1 + 1, zhi);
    if (ln.zo0 >= ln.zo1) return ln;
    ln.zr0 = imax(a0, zlo - 2 * r);
    ln.zr1 = imin(a1 + 1, zhi + 2 * r);
    ln.active = 1;
    return ln;
}

// An incremental phi: base = floor((2|q|a + r) / 2r), num = the remainder.
struct OrientationCursor {
    int base, num;
};

__device__ __forceinline__ OrientationCursor orientation_cursor(int aq, int r, int a) {
    OrientationCursor k;
    if (aq == 0) {
        k.base = 0;
        k.num = 0;
    } else {
        const long long n = 2LL * aq * a + r;
        k.base = (int)(n / (2LL * r));
        k.num = (int)(n % (2LL * r));
    }
    return k;
}

__device__ __forceinline__ void orientation_advance(OrientationCursor& k, int aq, int r) {
    k.num += 2 * aq;
    if (k.num >= 2 * r && aq != 0) {
        k.num -= 2 * r;
        k.base++;
    }
}

// Integer HSV (full saturation) to RGB; the same as mod.rs `hsv_to_rgb`.
__device__ __forceinline__ void orientation_hsv(u32 hue, u32 v, u8* rgb) {
    const u32 sextant = (hue >> 8) % 6u;
    const u32 frac = hue & 255u;
    const u32 rising = v * frac / 255u;
    const u32 falling = v * (255u - frac) / 255u;
    u32 R, G, Bc;
    switch (sextant) {
        case 0: R = v; G = rising; Bc = 0; break;
        case 1: R = falling; G = v; Bc = 0; break;
        case 2: R = 0; G = v; Bc = rising; break;
        case 3: R = 0; G = falling; Bc = v; break;
        case 4: R = rising; G = 0; Bc = v; break;
        default: R = v; G = 0; Bc = falling; break;
    }
    rgb[0] = (u8)R;
    rgb[1] = (u8)G;
    rgb[2] = (u8)Bc;
}

// Samples loaded ahead of the steps that use them (their latency overlaps four steps' work).
#define LINES_PREFETCH 4

__device__ __forceinline__ u32 orientation_umin(u32 a, u32 b) { return a < b ? a : b; }

// One thread's opening of its line in its zone over the warp's lockstep steps [lo, hi) (see the
// header); returns the sum of the outputs written. flags: bit 0 inverts the input (closings),
// bit 1 inverts the output written. ring: slot 0 of this thread's ring, slots `stride` apart.
template <typename T>
__device__ unsigned long long orientation_open_line(const OrientationLine& ln, int q, int lo, int hi,
                                                    const T* __restrict__ src, T* __restrict__ dst, int B,
                                                    int r, u32 maxv, int flags, u32* ring, u32 stride) {
    const int L = 2 * r + 1;
    const int aq = q < 0 ? -q : q;
    const int sg = q < 0 ? -1 : 1;
    OrientationCursor rd = orientation_cursor(aq, r, lo);
    OrientationCursor wr = orientation_cursor(aq, r, ln.zo0);
    const u32 out_inv = (flags & 2) ? maxv : 0u;
    const u32 in_inv = (flags & 1) ? maxv : 0u;
    // The block before the first: nothing (+inf in both halves).
    for (int s = 0; s < L; ++s) ring[(size_t)s * stride] = 0xffffffffu;
    unsigned long long sum = 0;
    u32 pe = 0xffffu, pd = 0xffffu; // prefix minima (erosion, inverted erosion) of the block
    int j = 0;                      // offset of step p in its block: the same in every lane
    for (int p0 = lo; p0 < hi; p0 += LINES_PREFETCH) {
        u32 xs[LINES_PREFETCH];
#pragma unroll
        for (int k = 0; k < LINES_PREFETCH; ++k) {
            const int p = p0 + k;
            xs[k] = 0xffffu;
            if (p >= ln.zr0 && p < ln.zr1) xs[k] = (u32)__ldg(src + (size_t)p * B + (ln.c + sg * rd.base)) ^ in_inv;
            orientation_advance(rd, aq, r);
        }
#pragma unroll
        for (int k = 0; k < LINES_PREFETCH; ++k) {
            const int p = p0 + k;
            if (p >= hi) break;
            const u32 x = xs[k];
            // Suffix minima of the block before at offset j + 1 (none when the window is this block).
            const u32 w = j + 1 < L ? ring[(size_t)(j + 1) * stride] : 0xffffffffu;
            pe = j == 0 ? x : orientation_umin(pe, x);
            const int c = p - r;
            const u32 e = orientation_umin(w & 0xffffu, pe); // erosion at c
            const u32 ei = c >= ln.zr0 && c < ln.zr1 ? 0xffffu - e : 0xffffu;
            pd = j == 0 ? ei : orientation_umin(pd, ei);
            const u32 o = 0xffffu - orientation_umin(w >> 16, pd); // opening at p - 2r
            ring[(size_t)j * stride] = x | (ei << 16);
            const int aw = p - 2 * r;
            if (aw >= ln.zo0 && aw < ln.zo1) {
                dst[(size_t)aw * B + (ln.c + sg * wr.base)] = (T)(o ^ out_inv);
                sum += o;
                orientation_advance(wr, aq, r);
            }
            if (j == L - 1) {
                // The block is complete: its suffix minima, in place.
                u32 cur = ring[(size_t)(L - 1) * stride];
#pragma unroll 4
                for (int s = L - 2; s >= 0; --s) {
                    cur = __vminu2(ring[(size_t)s * stride], cur);
                    ring[(size_t)s * stride] = cur;
                }
                j = 0;
            } else {
                ++j;
            }
        }
    }
    return sum;
}

template <typename T, bool GLOBAL>
__device__ void orientation_lines(const T* __restrict__ img, const T* __restrict__ img_t, int W, int H, int r,
                                  const OrientationAngle* __restrict__ angles, T* __restrict__ planes,
                                  u32* __restrict__ ring_global, unsigned long long* __restrict__ spectrum,
                                  u32 maxv, int flags) {
    extern __shared__ u32 orientation_sh[];
    const OrientationAngle ang = angles[blockIdx.y];
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ang.zones * ang.lines_pad) return; // whole warps: lines_pad is a multiple of 32
    const int z = t / ang.lines_pad;
    const int li = t - z * ang.lines_pad;
    const int A = ang.transposed ? W : H;
    const int B = ang.transposed ? H : W;
    const OrientationLine ln = orientation_setup(ang, li, z, A, B, r);
    // Lockstep steps of the warp: from its first sample read to its last output + 2r.
    int lo = ln.active ? ln.zr0 : ORIENTATION_INT_MAX;
    int hi = ln.active ? ln.zo1 + 2 * r : ORIENTATION_INT_MIN;
    for (int off = 16; off > 0; off >>= 1) {
        lo = imin(lo, __shfl_xor_sync(FULL_MASK, lo, off));
        hi = imax(hi, __shfl_xor_sync(FULL_MASK, hi, off));
    }
    if (!ln.active) return;
    u32* ring;
    u32 stride;
    if (GLOBAL) {
        ring = ring_global + (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
        stride = gridDim.x * gridDim.y * blockDim.x;
    } else {
        ring = orientation_sh + threadIdx.x;
        stride = blockDim.x;
    }
    const T* src = ang.transposed ? img_t : img;
    T* dst = planes + (size_t)ang.plane * (size_t)W * (size_t)H;
    const unsigned long long sum =
        orientation_open_line<T>(ln, ang.q, lo, hi, src, dst, B, r, maxv, flags, ring, stride);
    if (spectrum && sum) atomicAdd(spectrum + ang.plane, sum);
}

#define ORIENTATION_LINES(T, GLOBAL, NAME, MAXV)                                                     \
    extern "C" __global__ void NAME(const T* __restrict__ img, const T* __restrict__ img_t, int W,  \
                                    int H, int r, const OrientationAngle* __restrict__ angles,      \
                                    T* __restrict__ planes, u32* __restrict__ ring_global,          \
                                    unsigned long long* __restrict__ spectrum, int flags) {         \
        orientation_lines<T, GLOBAL>(img, img_t, W, H, r, angles, planes, ring_global, spectrum,    \
                                        MAXV, flags);                                               \
    }
// The ring in shared memory (L words a thread fit: the common case) and in global memory.
ORIENTATION_LINES(u8, false, orientation_lines_u8, 255u)
ORIENTATION_LINES(u16, false, orientation_lines_u16, 65535u)
ORIENTATION_LINES(u8, true, orientation_lines_global_u8, 255u)
ORIENTATION_LINES(u16, true, orientation_lines_global_u16, 65535u)

template <typename T>
__device__ void orientation_transpose(const T* __restrict__ src, T* __restrict__ dst, int rows, int cols, u32 inv) {
    __shared__ T tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) {
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = src[(size_t)(y + j) * cols + x];
    }
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x; // a row of src = a column of dst
    y = blockIdx.x * 32 + threadIdx.y; // a column of src = a row of dst
    for (int j = 0; j < 32; j += 8) {
        if (x < rows && y + j < cols) dst[(size_t)(y + j) * rows + x] = (T)(tile[threadIdx.x][threadIdx.y + j] ^ inv);
    }
}

extern "C" __global__ void orientation_transpose_u8(const u8* __restrict__ src, u8* __restrict__ dst, int rows,
                                                       int cols, int invert) {
    orientation_transpose<u8>(src, dst, rows, cols, invert ? 255u : 0u);
}
extern "C" __global__ void orientation_transpose_u16(const u16* __restrict__ src, u16* __restrict__ dst,
                                                        int rows, int cols, int invert) {
    orientation_transpose<u16>(src, dst, rows, cols, invert ? 65535u : 0u);
}

// planes: nplanes planes of W*H; transposed[p] = 1 when plane p is stored as I^T (W rows of H);
// angle_index[p] = the angle index reported for plane p. init = 1 for the first launch.
template <typename T>
__device__ void orientation_reduce(const T* __restrict__ planes, const int* __restrict__ transposed,
                          const int* __restrict__ angle_index, int nplanes, T* __restrict__ best,
                          u16* __restrict__ index, int W, int H, int init) {
    __shared__ T tile[32][33];
    const int x = blockIdx.x * 32 + threadIdx.x;
    const int y0 = blockIdx.y * 32 + threadIdx.y;
    const size_t n = (size_t)W * (size_t)H;
    u32 bv[4];
    u32 bi[4];
    for (int j = 0; j < 4; ++j) {
        const int y = y0 + 8 * j;
        if (!init && x < W && y < H) {
            bv[j] = best[(size_t)y * W + x];
            bi[j] = index[(size_t)y * W + x];
        } else {
            bv[j] = 0;
            bi[j] = ORIENTATION_NONE;
        }
    }
    for (int p = 0; p < nplanes; ++p) {
        const T* plane = planes + (size_t)p * n;
        const u32 k = (u32)angle_index[p];
        u32 v[4];
        if (transposed[p]) {
            // Tile of I^T: rows x in [bx*32, +32), columns y in [by*32, +32).
            __syncthreads();
            const int ty = blockIdx.y * 32 + threadIdx.x;
            for (int j = 0; j < 4; ++j) {
                const int tx = blockIdx.x * 32 + threadIdx.y + 8 * j;
                if (tx < W && ty < H) tile[threadIdx.y + 8 * j][threadIdx.x] = plane[(size_t)tx * H + ty];
            }
            __syncthreads();
            for (int j = 0; j < 4; ++j) v[j] = tile[threadIdx.x][threadIdx.y + 8 * j];
        } else {
            for (int j = 0; j < 4; ++j) {
                const int y = y0 + 8 * j;
                v[j] = (x < W && y < H) ? (u32)plane[(size_t)y * W + x] : 0u;
            }
        }
        for (int j = 0; j < 4; ++j) {
            if (bi[j] == ORIENTATION_NONE || v[j] > bv[j]) {
                bv[j] = v[j];
                bi[j] = k;
            }
        }
    }
    for (int j = 0; j < 4; ++j) {
        const int y = y0 + 8 * j;
        if (x < W && y < H) {
            best[(size_t)y * W + x] = (T)bv[j];
            index[(size_t)y * W + x] = (u16)bi[j];
        }
    }
}

extern "C" __global__ void orientation_reduce_u8(const u8* __restrict__ planes, const int* __restrict__ transposed,
                                                    const int* __restrict__ angle_index, int nplanes,
                                                    u8* __restrict__ best, u16* __restrict__ index, int W, int H,
                                                    int init) {
    orientation_reduce<u8>(planes, transposed, angle_index, nplanes, best, index, W, H, init);
}
extern "C" __global__ void orientation_reduce_u16(const u16* __restrict__ planes,
                                                     const int* __restrict__ transposed,
                                                     const int* __restrict__ angle_index, int nplanes,
                                                     u16* __restrict__ best, u16* __restrict__ index, int W,
                                                     int H, int init) {
    orientation_reduce<u16>(planes, transposed, angle_index, nplanes, best, index, W, H, init);
}

// best: sup of the openings (of the inverted image for closings); strength = best, or MAX - best
// for closings; rgb = HSV(hue[index], 8-bit best).
template <typename T>
__device__ void orientation_finish(const T* __restrict__ best, const u16* __restrict__ index, const u16* __restrict__ hue,
                          T* __restrict__ strength, u8* __restrict__ rgb, u32 n, u32 inv, u32 shift) {
    const u32 i = global_tid();
    if (i >= n) return;
    const u32 b = best[i];
    strength[i] = (T)(b ^ inv);
    orientation_hsv(hue[index[i]], b >> shift, rgb + 3u * (size_t)i);
}

extern "C" __global__ void orientation_finish_u8(const u8* __restrict__ best, const u16* __restrict__ index,
                                                    const u16* __restrict__ hue, u8* __restrict__ strength,
                                                    u8* __restrict__ rgb, u32 n, int closing) {
    orientation_finish<u8>(best, index, hue, strength, rgb, n, closing ? 255u : 0u, 0u);
}
extern "C" __global__ void orientation_finish_u16(const u16* __restrict__ best, const u16* __restrict__ index,
                                                     const u16* __restrict__ hue, u16* __restrict__ strength,
                                                     u8* __restrict__ rgb, u32 n, int closing) {
    orientation_finish<u16>(best, index, hue, strength, rgb, n, closing ? 65535u : 0u, 8u);
}
