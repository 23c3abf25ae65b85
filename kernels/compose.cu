// compose: one picture per frame from the frame and its overlay layers, on the device
// (launch code: src/compose/gpu.rs; CPU twin: src/compose/cpu.rs; the pixel arithmetic is
// src/compose/pixel.rs line for line, so both give the same bytes).
//
// Drawing order: the base (the frame, RGB or grey, over black with the base alpha), each raster
// layer in order (residue highlight, colour picture, segments), then the winning shape
// primitive. Blending is integer: mix = (d*(255-a) + s*a + 127) / 255, add = min(d + (s*a +
// 127) / 255, 255), alphas quantised on the host.
//
// Memory layout
//   base      u8, width * height * channels (1 grey, 3 RGB), rows packed.
//   residue   u8 per frame pixel; colour: 3 u8 per frame pixel (RGB).
//   labels    u32 per label pixel, label_width * label_height; frame pixel (x, y) reads
//             labels[min(y/f, lh-1) * lw + min(x/f, lw-1)] (nearest upsampling by f).
//   sums      4 x u64 per label (Σr, Σg, Σb, pixels; grey frames use Σr only). Zero at rest:
//             compose_segment_fill reads a label's sums and clears them for the next frame.
//   fill      u32 per label, r | g << 8 | b << 16.
//   marks     u32 per picture pixel: 1 + the index of the last primitive covering it, 0 for
//             none. Zero at rest: the picture kernel clears every mark it reads.
//   prims     Primitive[prim_count] (24 bytes, src/compose/shapes.rs).
//   out       RGBA (4 u8 a pixel), RGB (3 u8) or I420 (Y plane, then U, then V planes of
//             (w/2) x (h/2), all packed); out_width x out_height is the picture (I420: even).
//
// Kernels and thread mapping
//   compose_segment_sums  one thread per run of `run` pixels of a frame row: sums its pixels
//                         while the label stays the same (a label change mid-run flushes with
//                         atomics), then the warp's lanes that end on the same label
//                         (__match_any_sync) add their sums together and one of them does the
//                         atomics: large segments would otherwise serialise on one address.
//   compose_segment_fill  grid-stride over labels below the count: mean colour (rounded
//                         integer division) or the random colour of the label; clears the sums.
//   compose_shapes        one warp per primitive, lanes striding over its pixels (a line's
//                         pixel i has a closed form, see shapes.rs): atomicMax of 1 + the
//                         primitive's index into marks, so the last primitive wins.
//   compose_rgb(a)        one thread per picture pixel (2D blocks).
//   compose_i420          one thread per 2x2 block of the picture: four pixels composed, four
//                         Y samples, one U and one V from the block's sums (pixel.rs).
//
// The segment count is read on the device when the host does not know it (count_ptr != 0).
#include "common/util.cuh"

#define COMPOSE_MAX_RASTERS 8
#define RASTER_RESIDUE 0u
#define RASTER_COLOUR 1u
#define RASTER_SEGMENTS 2u
#define PRIM_RECT 1u
#define PRIM_ADDITIVE 2u
#define BOUNDARY_ON (1u << 24)
#define NO_LABEL 0xffffffffu
// Keep in sync with RESIDUE_COLOUR and RESIDUE_GAIN in src/compose/style.rs.
#define RESIDUE_R 255u
#define RESIDUE_G 230u
#define RESIDUE_B 0u
#define RESIDUE_GAIN 4u

// One raster layer (keep in sync with ComposeRaster in src/compose/gpu.rs).
struct ComposeRaster {
    u64 data;          // residue / colour pixels, or segment labels
    u64 fill;          // segments: fill table
    u64 count_ptr;     // segments: device word holding the count, 0 when `count` holds it
    u32 kind;          // RASTER_*
    u32 alpha;         // 1..255 (residue: the alpha of the strongest residue)
    u32 additive;      // 1: add, 0: mix
    u32 count;         // segments: labels below this are filled (when count_ptr is 0)
    u32 label_width;
    u32 label_height;
    u32 factor;        // upsampling factor, >= 1
    u32 boundary;      // r | g << 8 | b << 16 | BOUNDARY_ON when boundaries are drawn
};
static_assert(sizeof(ComposeRaster) == 56, "ComposeRaster layout");

// Everything the picture kernels read (keep in sync with ComposeParams in src/compose/gpu.rs).
struct ComposeParams {
    u64 base;
    u64 out;
    u64 marks;
    u64 prims;
    u32 width;         // frame
    u32 height;
    u32 out_width;     // picture
    u32 out_height;
    u32 channels;      // of the base
    u32 base_alpha;    // 0: hidden (black)
    u32 raster_count;
    u32 prim_count;
    ComposeRaster rasters[COMPOSE_MAX_RASTERS];
};
static_assert(sizeof(ComposeParams) == 512, "ComposeParams layout");

// A drawing primitive (keep in sync with Primitive in src/compose/shapes.rs).
struct Primitive {
    i32 x0, y0, x1, y1;
    u32 colour;        // r | g << 8 | b << 16 | alpha << 24
    u32 flags;         // PRIM_RECT, PRIM_ADDITIVE
};
static_assert(sizeof(Primitive) == 24, "Primitive layout");

struct Rgb {
    u32 r, g, b;
};

__device__ __forceinline__ u32 mix8(u32 d, u32 s, u32 a) { return (d * (255u - a) + s * a + 127u) / 255u; }
__device__ __forceinline__ u32 add8(u32 d, u32 s, u32 a) { return min(d + (s * a + 127u) / 255u, 255u); }

__device__ __forceinline__ void blend(Rgb& d, u32 r, u32 g, u32 b, u32 a, bool additive) {
    if (additive) {
        d.r = add8(d.r, r, a);
        d.g = add8(d.g, g, a);
        d.b = add8(d.b, b, a);
    } else {
        d.r = mix8(d.r, r, a);
        d.g = mix8(d.g, g, a);
        d.b = mix8(d.b, b, a);
    }
}

__device__ __forceinline__ void blend_packed(Rgb& d, u32 c, u32 a, bool additive) {
    blend(d, c & 0xffu, (c >> 8) & 0xffu, (c >> 16) & 0xffu, a, additive);
}

// The segment count: the host's, or the device word clamped to the label image's size.
__device__ __forceinline__ u32 segment_count(u64 count_ptr, u32 count, u32 capacity) {
    return count_ptr ? min(*reinterpret_cast<const u32*>(count_ptr), capacity) : count;
}

__device__ __forceinline__ u32 label_at(const ComposeRaster& r, u32 x, u32 y) {
    const u32* labels = reinterpret_cast<const u32*>(r.data);
    const u32 lx = min(x / r.factor, r.label_width - 1u);
    const u32 ly = min(y / r.factor, r.label_height - 1u);
    return labels[ly * r.label_width + lx];
}

// The picture's pixel (x, y): base, rasters, shapes. Clears the pixel's mark.
__device__ __forceinline__ Rgb compose_pixel(const ComposeParams& p, u32 x, u32 y) {
    const u32 i = y * p.width + x;
    const u8* base = reinterpret_cast<const u8*>(p.base);
    Rgb c;
    if (p.channels == 3u) {
        c.r = mix8(0u, base[3u * i], p.base_alpha);
        c.g = mix8(0u, base[3u * i + 1u], p.base_alpha);
        c.b = mix8(0u, base[3u * i + 2u], p.base_alpha);
    } else {
        c.r = c.g = c.b = mix8(0u, base[i], p.base_alpha);
    }
#pragma unroll
    for (int k = 0; k < COMPOSE_MAX_RASTERS; ++k) {
        if (k >= (int)p.raster_count) break;
        const ComposeRaster& r = p.rasters[k];
        const bool additive = r.additive != 0u;
        if (r.kind == RASTER_RESIDUE) {
            const u32 v = reinterpret_cast<const u8*>(r.data)[i];
            if (v != 0u) {
                const u32 a = (min(v * RESIDUE_GAIN, 255u) * r.alpha + 127u) / 255u;
                blend(c, RESIDUE_R, RESIDUE_G, RESIDUE_B, a, additive);
            }
        } else if (r.kind == RASTER_COLOUR) {
            const u8* s = reinterpret_cast<const u8*>(r.data) + 3u * i;
            blend(c, s[0], s[1], s[2], r.alpha, additive);
        } else {
            const u32 l = label_at(r, x, y);
            u32 src;
            bool edge = false;
            if (r.boundary & BOUNDARY_ON) {
                edge = (x + 1u < p.width && label_at(r, x + 1u, y) != l) ||
                       (y + 1u < p.height && label_at(r, x, y + 1u) != l);
            }
            if (edge) {
                src = r.boundary;
            } else {
                const u32 count = segment_count(r.count_ptr, r.count, r.label_width * r.label_height);
                src = l < count ? reinterpret_cast<const u32*>(r.fill)[l] : 0u;
            }
            blend_packed(c, src, r.alpha, additive);
        }
    }
    if (p.prim_count != 0u) {
        u32* marks = reinterpret_cast<u32*>(p.marks);
        const u32 m = marks[y * p.out_width + x];
        if (m != 0u) {
            marks[y * p.out_width + x] = 0u;
            const Primitive q = reinterpret_cast<const Primitive*>(p.prims)[m - 1u];
            blend_packed(c, q.colour, q.colour >> 24, (q.flags & PRIM_ADDITIVE) != 0u);
        }
    }
    return c;
}

extern "C" __global__ void compose_rgb(const ComposeParams p) {
    const u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.out_width || y >= p.out_height) return;
    const Rgb c = compose_pixel(p, x, y);
    u8* o = reinterpret_cast<u8*>(p.out) + 3u * (y * p.out_width + x);
    o[0] = (u8)c.r;
    o[1] = (u8)c.g;
    o[2] = (u8)c.b;
}

extern "C" __global__ void compose_rgba(const ComposeParams p) {
    const u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.out_width || y >= p.out_height) return;
    const Rgb c = compose_pixel(p, x, y);
    reinterpret_cast<u32*>(p.out)[y * p.out_width + x] = c.r | (c.g << 8) | (c.b << 16) | 0xff000000u;
}

__device__ __forceinline__ u8 luma(const Rgb& c) {
    return (u8)((((int)(66u * c.r + 129u * c.g + 25u * c.b) + 128) >> 8) + 16);
}

extern "C" __global__ void compose_i420(const ComposeParams p) {
    const u32 bx = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 by = blockIdx.y * blockDim.y + threadIdx.y;
    const u32 cw = p.out_width / 2u, ch = p.out_height / 2u;
    if (bx >= cw || by >= ch) return;
    const u32 x = 2u * bx, y = 2u * by;
    const Rgb a = compose_pixel(p, x, y), b = compose_pixel(p, x + 1u, y);
    const Rgb c = compose_pixel(p, x, y + 1u), d = compose_pixel(p, x + 1u, y + 1u);
    u8* out = reinterpret_cast<u8*>(p.out);
    out[y * p.out_width + x] = luma(a);
    out[y * p.out_width + x + 1u] = luma(b);
    out[(y + 1u) * p.out_width + x] = luma(c);
    out[(y + 1u) * p.out_width + x + 1u] = luma(d);
    const int r = (int)(a.r + b.r + c.r + d.r), g = (int)(a.g + b.g + c.g + d.g), bl = (int)(a.b + b.b + c.b + d.b);
    const int u = ((-38 * r - 74 * g + 112 * bl + 512) >> 10) + 128;
    const int v = ((112 * r - 94 * g - 18 * bl + 512) >> 10) + 128;
    u8* planes = out + p.out_width * p.out_height;
    planes[by * cw + bx] = (u8)u;
    planes[cw * ch + by * cw + bx] = (u8)v;
}

// Adds a run's sums into its label's slot.
__device__ __forceinline__ void add_sums(u64* sums, u32 label, u64 r, u64 g, u64 b, u64 n, bool grey) {
    u64* s = sums + 4ull * label;
    atomicAdd(reinterpret_cast<unsigned long long*>(s), (unsigned long long)r);
    if (!grey) {
        atomicAdd(reinterpret_cast<unsigned long long*>(s + 1), (unsigned long long)g);
        atomicAdd(reinterpret_cast<unsigned long long*>(s + 2), (unsigned long long)b);
    }
    atomicAdd(reinterpret_cast<unsigned long long*>(s + 3), (unsigned long long)n);
}

// Per-label sums of the frame's pixels (see the header). Every lane of every warp reaches the
// warp step: the grid is whole blocks and lanes without pixels carry NO_LABEL.
extern "C" __global__ void compose_segment_sums(const u8* __restrict__ base, u32 channels, u32 width, u32 height,
                                                const u32* __restrict__ labels, u32 label_width, u32 label_height,
                                                u32 factor, u64 count_ptr, u32 count, u32 run, u64* sums) {
    const bool grey = channels == 1u;
    const u32 cnt = segment_count(count_ptr, count, label_width * label_height);
    const u32 runs_per_row = (width + run - 1u) / run;
    const u32 t = global_tid();
    u32 key = NO_LABEL;
    u64 r = 0, g = 0, b = 0, n = 0;
    if (t < runs_per_row * height) {
        const u32 y = t / runs_per_row;
        const u32 x0 = (t - y * runs_per_row) * run;
        const u32 x1 = min(x0 + run, width);
        const u32* row = labels + min(y / factor, label_height - 1u) * label_width;
        const u8* px = base + (u64)y * width * channels;
        for (u32 x = x0; x < x1; ++x) {
            const u32 l = row[min(x / factor, label_width - 1u)];
            if (l != key) {
                if (key < cnt) add_sums(sums, key, r, g, b, n, grey);
                key = l;
                r = g = b = n = 0;
            }
            if (grey) {
                r += px[x];
            } else {
                r += px[3u * x];
                g += px[3u * x + 1u];
                b += px[3u * x + 2u];
            }
            n += 1;
        }
        if (key >= cnt) key = NO_LABEL;
    }
    // Lanes ending on the same label add their sums in a tree over their ranks (Westphal's
    // reduction of peers): at step k the lanes whose rank is a multiple of 2^(k+1) add the
    // partial sum of the next remaining peer above them, which covers 2^k ranks.
    const u32 lane = threadIdx.x & 31u;
    const u32 peers = __match_any_sync(FULL_MASK, key);
    const u32 leader = __ffs(peers) - 1u;
    u32 rank = __popc(peers & ((1u << lane) - 1u));
    u32 above = peers & (0xfffffffeu << lane);
    while (__any_sync(FULL_MASK, above != 0u)) {
        const int next = __ffs(above);
        const int src = next ? next - 1 : (int)lane;
        const u64 rr = __shfl_sync(FULL_MASK, r, src), gg = __shfl_sync(FULL_MASK, g, src);
        const u64 bb = __shfl_sync(FULL_MASK, b, src), nn = __shfl_sync(FULL_MASK, n, src);
        if (next) {
            r += rr;
            g += gg;
            b += bb;
            n += nn;
        }
        above &= ~__ballot_sync(FULL_MASK, rank & 1u);
        rank >>= 1;
    }
    if (lane == leader && key != NO_LABEL) add_sums(sums, key, r, g, b, n, grey);
}

// SplitMix64 of the label (keep in sync with label_colour in src/ops/segmentation/overlay.rs).
__device__ __forceinline__ u32 label_colour(u32 label) {
    u64 z = (u64)label + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (((u32)z & 0xffu) | 0x30u) | ((((u32)(z >> 8) & 0xffu) | 0x30u) << 8) | ((((u32)(z >> 16) & 0xffu) | 0x30u) << 16);
}

// Fill colour of every label below the count: mean = (Σ + n/2) / n per channel (n >= 1), or
// the label's random colour (`mean` 0). Clears the sums it read.
extern "C" __global__ void compose_segment_fill(u64* sums, u32* fill, u64 count_ptr, u32 count, u32 capacity, u32 mean,
                                                u32 channels) {
    const u32 cnt = segment_count(count_ptr, count, capacity);
    for (u32 l = global_tid(); l < cnt; l += global_threads()) {
        if (!mean) {
            fill[l] = label_colour(l);
            continue;
        }
        u64* s = sums + 4ull * l;
        const u64 n = s[3] > 0 ? s[3] : 1;
        const u32 r = (u32)((s[0] + n / 2) / n);
        const u32 g = channels == 1u ? r : (u32)((s[1] + n / 2) / n);
        const u32 b = channels == 1u ? r : (u32)((s[2] + n / 2) / n);
        fill[l] = r | (g << 8) | (b << 16);
        s[0] = s[1] = s[2] = s[3] = 0;
    }
}

// floor(a / b) for b > 0.
__device__ __forceinline__ i64 floor_div(i64 a, i64 b) {
    const i64 q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Marks every picture pixel of every primitive with 1 + the primitive's index (the largest
// wins). One warp a primitive.
extern "C" __global__ void compose_shapes(const Primitive* __restrict__ prims, u32 prim_count, u32* marks, u32 out_width,
                                          u32 out_height) {
    const u32 k = global_tid() / 32u;
    const u32 lane = threadIdx.x & 31u;
    if (k >= prim_count) return;
    const Primitive q = prims[k];
    const i64 w = out_width, h = out_height;
    if (q.flags & PRIM_RECT) {
        const i64 xa = max((i64)q.x0, (i64)0), xb = min((i64)q.x1, w - 1);
        const i64 ya = max((i64)q.y0, (i64)0), yb = min((i64)q.y1, h - 1);
        if (xa > xb || ya > yb) return;
        const i64 rw = xb - xa + 1, total = rw * (yb - ya + 1);
        for (i64 j = lane; j < total; j += 32) {
            const i64 x = xa + j % rw, y = ya + j / rw;
            atomicMax(marks + (y * w + x), k + 1u);
        }
        return;
    }
    const i64 dx = (i64)q.x1 - q.x0, dy = (i64)q.y1 - q.y0;
    const i64 n = max(dx < 0 ? -dx : dx, dy < 0 ? -dy : dy);
    for (i64 i = lane; i <= n; i += 32) {
        const i64 x = n == 0 ? q.x0 : q.x0 + floor_div(2 * i * dx + n, 2 * n);
        const i64 y = n == 0 ? q.y0 : q.y0 + floor_div(2 * i * dy + n, 2 * n);
        if (x >= 0 && x < w && y >= 0 && y < h) atomicMax(marks + (y * w + x), k + 1u);
    }
}
