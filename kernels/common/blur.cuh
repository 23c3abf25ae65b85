// The f64 Gaussian blur's arithmetic (scikit-image's felzenszwalb smoothing), shared by
// kernels/blur.cu (blur_vertical_f64 / blur_horizontal_f64, a pass each over the frame) and
// the segmentation's segmentation_blur_edges (both passes and the edge graph in one tile): the same
// operations in the same order, so every copy of a smoothed sample has the same bits.
// SciPy gaussian_filter(mode='reflect'): out = x[0] * w[0], then out += (x[-j] + x[+j]) * w[j]
// for j = radius..1, each operation rounded on its own (__dmul_rn / __dadd_rn, no contraction);
// the vertical pass scales each byte to [0, 1] first (v * (1/255)).
#pragma once
#include "common/util.cuh"

#define BLUR_MAX_RADIUS 127

// Half kernel w[0..=radius], centre first. Passed by value; keep in sync with BlurWeightsF64 in
// src/ops/blur/gpu.rs.
struct BlurWeightsF64 {
    double half[BLUR_MAX_RADIUS + 1];
    int radius;
    int pad[3];
};
static_assert(sizeof(BlurWeightsF64) == 1040, "BlurWeightsF64 layout");

// SciPy 'reflect' (half-sample symmetric: d c b a | a b c d | d c b a), applied repeatedly for
// kernels longer than the line.
__device__ __forceinline__ int blur_reflect(int i, int n) {
    if (i >= 0 && i < n) return i;
    int p = 2 * n;
    int m = i % p;
    if (m < 0) m += p;
    return m < n ? m : p - 1 - m;
}

// Vertical pass at row y of the sample column `col` (src: rows of `row` bytes).
__device__ __forceinline__ double blur_vertical_f64_at(const u8* __restrict__ src, const BlurWeightsF64& wt, u32 row,
                                                       int height, int y, u32 col, double inv255) {
    double t = __dmul_rn(__dmul_rn((double)src[(size_t)y * row + col], inv255), wt.half[0]);
    for (int j = wt.radius; j >= 1; --j) {
        int ya = blur_reflect(y - j, height);
        int yb = blur_reflect(y + j, height);
        double a = __dmul_rn((double)src[(size_t)ya * row + col], inv255);
        double b = __dmul_rn((double)src[(size_t)yb * row + col], inv255);
        t = __dadd_rn(t, __dmul_rn(__dadd_rn(a, b), wt.half[j]));
    }
    return t;
}

// Horizontal pass at column x of a line of vertical sums: at(i) is the line's value at column
// i (in [0, width)).
template <class At>
__device__ __forceinline__ double blur_horizontal_f64_at(const BlurWeightsF64& wt, int width, int x, At at) {
    double t = __dmul_rn(at(x), wt.half[0]);
    for (int j = wt.radius; j >= 1; --j) {
        double a = at(blur_reflect(x - j, width));
        double b = at(blur_reflect(x + j, width));
        t = __dadd_rn(t, __dmul_rn(__dadd_rn(a, b), wt.half[j]));
    }
    return t;
}
