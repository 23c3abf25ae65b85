// Element-wise conversions of results that stay on the device for another library (the Python
// package hands them to CuPy or PyTorch without a host copy). Launched by src/ops/convert.rs.
//
// convert_u32_to_i64: label images widened to signed 64 bits (NumPy's intp, scikit-image's label
//   dtype); exact.
// convert_u32_to_i32: label images as signed 32 bits, the bits of the u32 (two's complement for
//   values of 2^31 and more, as NumPy's astype(int32) of the 64-bit labels); exact.
// convert_lookup_u16_f32: dst[i] = table[src[i]] (an angle-index map to degrees); an index past
//   the table gives 0, as the host's `angle_map_deg`.
// Thread mapping: grid-stride loops over the n elements (src and dst hold n each).
#include "common/util.cuh"

extern "C" __global__ void convert_u32_to_i64(const u32* __restrict__ src, i64* __restrict__ dst, u32 n) {
    for (u32 i = global_tid(); i < n; i += global_threads()) dst[i] = (i64)src[i];
}

extern "C" __global__ void convert_u32_to_i32(const u32* __restrict__ src, i32* __restrict__ dst, u32 n) {
    for (u32 i = global_tid(); i < n; i += global_threads()) dst[i] = (i32)src[i];
}

extern "C" __global__ void convert_lookup_u16_f32(const u16* __restrict__ src, const float* __restrict__ table,
                                                  u32 entries, float* __restrict__ dst, u32 n) {
    for (u32 i = global_tid(); i < n; i += global_threads()) {
        const u32 k = src[i];
        dst[i] = k < entries ? table[k] : 0.0f;
    }
}
