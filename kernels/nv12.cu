// NV12 to packed RGB with the bytes of GStreamer 1.22's VideoConverter, the CUDA twin of
// src/ops/nv12/mod.rs nv12_to_rgb (whose header names the GStreamer functions each step
// reproduces).
//
// nv12_to_rgb: one thread per output pixel, 2D grid of 32x8 blocks. Reads luma (x, y) from `y`
//   (rows `y_pitch` bytes apart) and the U, V pairs it needs from `uv` (rows `uv_pitch` bytes
//   apart, ceil(width/2) pairs a row): plane addresses are raw device pointers (a decoder's
//   buffers). Writes pixel (x, y) of `rgb`, packed (3 * width bytes a row).
//   Chroma: upsampled horizontally on the two chroma rows of the row's pair (the unpacked pair,
//   3:1 / 1:3 blends, or for co-sited chroma the rounded mean of the neighbours on odd columns),
//   then blended 3:1 or 1:3 between the rows of the pair; pairs restart at every band of
//   `band_rows` rows (the converter's threads), the first band's at row -1; rows clamp to the
//   frame. Vertically co-sited chroma pairs a row with itself (repetition).
//   Matrix: orc's video_orc_convert_AYUV_ARGB in integers: samples minus 128 splatted to 16 bits,
//   mulhsw by the 8.8 coefficients computed on the host (Nv12Conversion::coefficients, the one
//   source), sums saturated to -128..127, plus 128.
//   Border policy: rows and columns beyond the frame clamp as above; nothing else reads outside.
#include "common/util.cuh"

// Keep in sync with Nv12Params of src/ops/nv12/gpu.rs.
struct Nv12Params {
    i32 y, r_v, g_u, g_v, b_u;
    u32 h_cosited, v_cosited, band_rows;
};
static_assert(sizeof(Nv12Params) == 32, "Nv12Params layout");

// orc splatbw of a sample centred on 128: the byte v - 128 in both halves of a signed 16-bit word.
__device__ __forceinline__ i32 nv12_splat(u32 v) {
    const u32 b = (v - 128u) & 0xffu;
    return (i32)(short)(unsigned short)((b << 8) | b);
}

// orc mulhsw: the high half of the signed 16 x 16-bit product.
__device__ __forceinline__ i32 nv12_mulhs(i32 w, i32 c) { return (w * c) >> 16; }

// orc convssswb then addb 128.
__device__ __forceinline__ u8 nv12_saturate(i32 v) { return (u8)(imin(imax(v, -128), 127) + 128); }

// Component c (0 U, 1 V) of luma column x upsampled from one chroma row.
__device__ __forceinline__ u32 nv12_upsample_h(const u8* row, u32 x, u32 width, u32 h_cosited, u32 c) {
    const u32 k = 2u * (x >> 1);
    if ((x & 1u) && x + 1u < width) {
        const u32 a = row[k + c], b = row[k + 2u + c];
        return h_cosited ? (a + b + 1u) >> 1 : (3u * a + b + 2u) >> 2;
    }
    if (!(x & 1u) && x >= 2u && !h_cosited) return (row[k - 2u + c] + 3u * row[k + c] + 2u) >> 2;
    return row[k + c];
}

extern "C" __global__ void nv12_to_rgb(const u8* __restrict__ y_plane, u64 y_pitch,
                                       const u8* __restrict__ uv_plane, u64 uv_pitch,
                                       u8* __restrict__ rgb, u32 width, u32 height, Nv12Params p) {
    const u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    u32 r0 = y, r1 = y, first = 1u;
    if (!p.v_cosited) {
        const u32 band = y - y % p.band_rows;
        first = band == 0u ? (y & 1u) : ((y - band) & 1u) == 0u;
        if (first) {
            r1 = min(y + 1u, height - 1u);
        } else {
            r0 = y == 0u ? 0u : y - 1u;
        }
    }
    const u8* c0 = uv_plane + (size_t)(r0 >> 1) * uv_pitch;
    const u8* c1 = uv_plane + (size_t)(r1 >> 1) * uv_pitch;
    u32 uv[2];
#pragma unroll
    for (u32 c = 0; c < 2u; ++c) {
        const u32 a = nv12_upsample_h(c0, x, width, p.h_cosited, c);
        const u32 b = nv12_upsample_h(c1, x, width, p.h_cosited, c);
        uv[c] = first ? (3u * a + b + 2u) >> 2 : (a + 3u * b + 2u) >> 2;
    }
    const i32 wy = nv12_mulhs(nv12_splat(y_plane[(size_t)y * y_pitch + x]), p.y);
    const i32 wu = nv12_splat(uv[0]), wv = nv12_splat(uv[1]);
    u8* out = rgb + ((size_t)y * width + x) * 3u;
    out[0] = nv12_saturate(wy + nv12_mulhs(wv, p.r_v));
    out[1] = nv12_saturate(wy + nv12_mulhs(wu, p.g_u) + nv12_mulhs(wv, p.g_v));
    out[2] = nv12_saturate(wy + nv12_mulhs(wu, p.b_u));
}
