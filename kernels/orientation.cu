// Linear openings at arbitrary angles and orientation maps (Karas et al. 2015, "GPU
// implementation of linear morphological openings with arbitrary angle"), with the streaming 1D
// opening of Bartovsky et al. 2011 (Alg. 2 of the paper). Definitions: src/ops/orientation/
// mod.rs; the CPU twin of every step is src/ops/orientation/stream.rs (keep them in sync).
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
//   2(L-1) of the paper) and writes only its zone. The 32 lanes of a warp step a in lockstep over
//   the union of their ranges (lanes outside their own range idle), so loads and stores coalesce.
//   Per thread the streaming opening of stream.rs runs on the padded line: r samples of +inf
//   (the FIFO starts with one entry (MAX, 0)), the samples, then at the line's real end r more
//   +inf samples and one 0 sentinel, then a flush. Border policy: pixels outside the image are
//   ignored (this padding). A zone cut inside the line needs no padding: the windows through its
//   outputs never reach past the overlap.
//   FIFO (section 5.2): entries are u32 = (position mod 2^16) << 16 | value; at most L+1 live.
//   The newest sh_cap entries live in shared memory, slot s of thread t at
//   sh[s * blockDim.x + t] (bank = t mod 32: conflict free); older ones spill to a global ring
//   (slot s of thread g at spill[s * total_threads + g]) when sh_cap < L+1: that is the
//   orientation_lines_spill_* variant; orientation_lines_* (sh_cap >= L+1, the common
//   case) compiles the spill paths out and needs fewer registers (36 vs 43 on sm_90). The front,
//   second and back entries are also kept in registers (the paper's Fig. 7), so a step that
//   neither pops nor drops touches shared memory only to push. Positions are compared modulo
//   2^16; the front entry's start is clamped to the output position before it falls 2^14
//   behind. The next input sample is loaded one step ahead. The spectrum (sum of each opening)
//   is accumulated per thread in 64 bits and added with one atomicAdd per thread (integer:
//   deterministic).
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
// Values are handled as u32 in [0, MAX] (MAX = 255 or 65535); +inf is MAX, the sentinel 0.
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
    int line_end;  // 1 when zr1 is the line's real end (padding, sentinel and flush needed)
    int start, end; // stream steps [start, end) along a
};

struct OrientationFifo {
    u32* sh;        // this thread's shared ring (stride sh_stride)
    u32 sh_stride;
    u32 sh_mask;    // shared ring capacity - 1 (power of two)
    u32* gl;        // this thread's global ring (stride gl_stride), null when unused
    u32 gl_stride;
    u32 gl_mask;
    u32 head, split, tail; // logical indices: [head, split) global, [split, tail) shared
    // Register copies of the entries the common steps touch (valid while the queue is long
    // enough): front = [head], second = [head + 1], back = [tail - 1].
    u32 front, second, back;
};

template <bool SPILL>
__device__ __forceinline__ u32 orientation_get(const OrientationFifo& f, u32 i) {
    return !SPILL || i >= f.split ? f.sh[(size_t)(i & f.sh_mask) * f.sh_stride]
                        : f.gl[(size_t)(i & f.gl_mask) * f.gl_stride];
}

template <bool SPILL>
__device__ __forceinline__ void orientation_set(OrientationFifo& f, u32 i, u32 e) {
    if (!SPILL || i >= f.split) {
        f.sh[(size_t)(i & f.sh_mask) * f.sh_stride] = e;
    } else {
        f.gl[(size_t)(i & f.gl_mask) * f.gl_stride] = e;
    }
}

template <bool SPILL>
__device__ __forceinline__ void orientation_push(OrientationFifo& f, u32 e) {
    if (SPILL && f.tail - f.split == f.sh_mask + 1u) {
        // Shared ring full: move its oldest entry to the global ring.
        f.gl[(size_t)(f.split & f.gl_mask) * f.gl_stride] = f.sh[(size_t)(f.split & f.sh_mask) * f.sh_stride];
        f.split++;
    }
    f.sh[(size_t)(f.tail & f.sh_mask) * f.sh_stride] = e;
    const u32 size = f.tail - f.head; // before the push
    f.tail++;
    f.back = e;
    if (size == 0u) f.front = e;
    if (size == 1u) f.second = e;
}

// The entry before the back (size >= 2), from the registers when it is the front or second.
template <bool SPILL>
__device__ __forceinline__ u32 orientation_before_back(const OrientationFifo& f) {
    const u32 size = f.tail - f.head;
    if (size == 2u) return f.front;
    if (size == 3u) return f.second;
    return orientation_get<SPILL>(f, f.tail - 2u);
}

// Pops the back; `prev` is the entry before it (any value when the queue had one entry).
template <bool SPILL>
__device__ __forceinline__ void orientation_pop_back(OrientationFifo& f, u32 prev) {
    f.tail--;
    if (SPILL && f.split > f.tail) f.split = f.tail;
    f.back = prev;
}

template <bool SPILL>
__device__ __forceinline__ void orientation_pop_front(OrientationFifo& f) {
    f.head++;
    if (SPILL && f.split < f.head) f.split = f.head;
    const u32 size = f.tail - f.head; // after the pop, >= 1 (the caller keeps two entries)
    f.front = f.second;
    if (size >= 3u) {
        f.second = orientation_get<SPILL>(f, f.head + 1u);
    } else if (size == 2u) {
        f.second = f.back;
    }
}

// Alg. 2's loop body for sample x at stream position rp (mod 2^16); see stream.rs `step`.
template <bool SPILL>
__device__ __forceinline__ void orientation_step(OrientationFifo& f, u32 x, u32 rp16, u32 len) {
    u32 erased = ORIENTATION_NONE;
    while (f.tail != f.head) {
        const u32 b = f.back;
        const u32 bv = b & 0xffffu;
        if (bv <= x) break;
        const u32 bs = b >> 16;
        if (((rp16 - bs) & 0xffffu) >= len) break; // a wide peak: passed
        const bool single = f.tail - f.head < 2u;
        const u32 prev = single ? 0u : orientation_before_back<SPILL>(f);
        if (!single && (prev & 0xffffu) >= bv) break; // its level starts before bs: wide
        orientation_pop_back<SPILL>(f, prev);
        erased = bs;
    }
    if (f.tail != f.head) {
        const u32 bv = f.back & 0xffffu;
        if (bv == x) return;
        if (bv > x) {
            orientation_push<SPILL>(f, (rp16 << 16) | x);
            return;
        }
    }
    orientation_push<SPILL>(f, ((erased != ORIENTATION_NONE ? erased : rp16) << 16) | x);
}

// Drops the front entries ending before wp and returns the value at wp; see stream.rs `front_at`.
template <bool SPILL>
__device__ __forceinline__ u32 orientation_front(OrientationFifo& f, u32 wp16) {
    while (f.tail - f.head >= 2u) {
        const u32 s1 = f.second >> 16;
        if (((wp16 - s1) & 0x8000u) != 0u) break; // s1 > wp (16-bit signed difference < 0)
        orientation_pop_front<SPILL>(f);
    }
    const u32 e = f.front;
    if (((wp16 - (e >> 16)) & 0xffffu) >= 0x4000u) {
        // Keep the front's start within 2^14 of the output position (16-bit arithmetic).
        const u32 c = (wp16 << 16) | (e & 0xffffu);
        orientation_set<SPILL>(f, f.head, c);
        f.front = c;
        if (f.tail - f.head == 1u) f.back = c;
    }
    return e & 0xffffu;
}

__device__ __forceinline__ long long orientation_ceil_div(long long n, long long d) { return (n + d - 1) / d; }

// The ranges of line `li` in zone `z` of an angle (A: major extent, B: minor extent).
__device__ __forceinline__ OrientationLine orientation_setup(const OrientationAngle& ang, int li, int z, int A, int B, int r) {
    OrientationLine ln;
    ln.active = 0;
    ln.c = 0;
    ln.zr0 = ln.zr1 = ln.zo0 = ln.zo1 = ln.line_end = ln.start = ln.end = 0;
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
    ln.line_end = ln.zr1 == a1 + 1;
    ln.start = ln.zr0;
    ln.end = ln.line_end ? ln.zr1 + r + 1 : ln.zr1;
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

// Runs one thread's streaming opening over the lockstep range [a_lo, a_hi) of its warp.
// flags: bit 0 inverts the input (closings), bit 1 inverts the output written.
template <typename T, bool SPILL>
__device__ unsigned long long orientation_run(const OrientationLine& ln, int q, int a_lo, int a_hi,
                                     const T* __restrict__ src, T* __restrict__ dst, int B, int r,
                                     u32 maxv, int flags, OrientationFifo& f) {
    const u32 len = 2u * (u32)r + 1u;
    const int aq = q < 0 ? -q : q;
    const int sg = q < 0 ? -1 : 1;
    OrientationCursor rd = orientation_cursor(aq, r, ln.zr0);
    OrientationCursor wr = orientation_cursor(aq, r, ln.zo0);
    const u32 out_inv = (flags & 2) ? maxv : 0u;
    unsigned long long sum = 0;
    orientation_push<SPILL>(f, maxv); // (MAX, position 0): the r samples of left padding
    int aw = ln.zo0;  // next output position
    // The next sample is loaded one step ahead (its latency overlaps the FIFO work).
    u32 x_next = 0;
    if (ln.zr0 < ln.zr1) x_next = (u32)__ldg(src + (size_t)ln.zr0 * B + (ln.c + sg * rd.base));
    for (int a = a_lo; a < a_hi; ++a) {
        if (a < ln.start || a >= ln.end) continue;
        u32 x;
        if (a < ln.zr1) {
            x = x_next;
            if (flags & 1) x = maxv - x;
            orientation_advance(rd, aq, r);
            if (a + 1 < ln.zr1) x_next = (u32)__ldg(src + (size_t)(a + 1) * B + (ln.c + sg * rd.base));
        } else {
            x = a < ln.zr1 + r ? maxv : 0u;
        }
        const u32 rp = (u32)(a - ln.zr0 + r);
        orientation_step<SPILL>(f, x, rp & 0xffffu, len);
        if (rp >= 2u * (u32)r) {
            const u32 v = orientation_front<SPILL>(f, (rp - 2u * (u32)r) & 0xffffu);
            if (a - 2 * r == aw && aw < ln.zo1) {
                const int b = ln.c + sg * wr.base;
                dst[(size_t)aw * B + b] = (T)(v ^ out_inv);
                sum += v;
                orientation_advance(wr, aq, r);
                aw++;
            }
        }
    }
    if (ln.line_end) {
        // After the sentinel every pending value is final.
        for (; aw < ln.zo1; ++aw) {
            const u32 v = orientation_front<SPILL>(f, (u32)(aw - ln.zr0 + r) & 0xffffu);
            const int b = ln.c + sg * wr.base;
            dst[(size_t)aw * B + b] = (T)(v ^ out_inv);
            sum += v;
            orientation_advance(wr, aq, r);
        }
    }
    return sum;
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

template <typename T, bool SPILL>
__device__ void orientation_lines(const T* __restrict__ img, const T* __restrict__ img_t, int W, int H, int r,
                         const OrientationAngle* __restrict__ angles, T* __restrict__ planes,
                         u32* __restrict__ spill, u32 gl_mask, u32 sh_mask,
                         unsigned long long* __restrict__ spectrum, u32 maxv, int flags) {
    extern __shared__ u32 orientation_sh[];
    const OrientationAngle ang = angles[blockIdx.y];
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ang.zones * ang.lines_pad) return; // whole warps: lines_pad is a multiple of 32
    const int z = t / ang.lines_pad;
    const int li = t - z * ang.lines_pad;
    const int A = ang.transposed ? W : H;
    const int B = ang.transposed ? H : W;
    const OrientationLine ln = orientation_setup(ang, li, z, A, B, r);
    // Lockstep range of the warp: the union of its lanes' ranges.
    int lo = ln.active ? ln.start : ORIENTATION_INT_MAX;
    int hi = ln.active ? ln.end : ORIENTATION_INT_MIN;
    for (int off = 16; off > 0; off >>= 1) {
        lo = imin(lo, __shfl_xor_sync(FULL_MASK, lo, off));
        hi = imax(hi, __shfl_xor_sync(FULL_MASK, hi, off));
    }
    if (!ln.active) return;
    const u32 gid = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
    OrientationFifo f;
    f.sh = orientation_sh + threadIdx.x;
    f.sh_stride = blockDim.x;
    f.sh_mask = sh_mask;
    f.gl = gl_mask ? spill + gid : (u32*)0; // gl_mask == 0: no spill (sh_cap >= L+1)
    f.gl_stride = gridDim.x * gridDim.y * blockDim.x;
    f.gl_mask = gl_mask;
    f.head = f.split = f.tail = 0;
    f.front = f.second = f.back = 0;
    const T* src = ang.transposed ? img_t : img;
    T* dst = planes + (size_t)ang.plane * (size_t)W * (size_t)H;
    const unsigned long long sum = orientation_run<T, SPILL>(ln, ang.q, lo, hi, src, dst, B, r, maxv, flags, f);
    if (spectrum && sum) atomicAdd(spectrum + ang.plane, sum);
}

#define ORIENTATION_LINES(T, SPILL, NAME, MAXV)                                                              \
    extern "C" __global__ void NAME(const T* __restrict__ img, const T* __restrict__ img_t, int W,  \
                                    int H, int r, const OrientationAngle* __restrict__ angles,              \
                                    T* __restrict__ planes, u32* __restrict__ spill, u32 gl_mask,   \
                                    u32 sh_mask, unsigned long long* __restrict__ spectrum,         \
                                    int flags) {                                                    \
        orientation_lines<T, SPILL>(img, img_t, W, H, r, angles, planes, spill, gl_mask, sh_mask, spectrum,  \
                           MAXV, flags);                                                            \
    }
// Without spill (L+1 <= shared entries: the common case, fewer registers) and with.
ORIENTATION_LINES(u8, false, orientation_lines_u8, 255u)
ORIENTATION_LINES(u16, false, orientation_lines_u16, 65535u)
ORIENTATION_LINES(u8, true, orientation_lines_spill_u8, 255u)
ORIENTATION_LINES(u16, true, orientation_lines_spill_u16, 65535u)

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
