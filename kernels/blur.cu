// Separable Gaussian blur with scikit-image's felzenszwalb semantics (src/ops/blur/mod.rs):
// u8 -> f32 in [0, 1] (v * (1/255)), SciPy `gaussian_filter(mode='reflect', truncate=4)`,
// axis 0 (vertical) first, then axis 1 (horizontal), channels never mixed.
//
// Arithmetic is fixed so that the CPU f32 path (src/ops/blur/cpu.rs, blur_interleaved::<f32>)
// is bit-identical: out = x[0]*w[0], then out += (x[-j] + x[+j]) * w[j] for j = r..1 (SciPy's
// symmetric correlate1d order), every operation rounded on its own (__fmul_rn / __fadd_rn, so
// NVRTC cannot contract to FMA).
//
// blur_*_f64: the same in f64 (the segmentation's smoothing, as scikit-image).
// Layout: packed interleaved rows of `row = width * channels` samples (channels = 1 or 3).
// blur_vertical:   one thread per sample (e, y), 2D grid of 32x8 blocks; reads 2r+1 bytes of
//                  its column (L1/L2 cached), writes one f32.
// blur_horizontal: one thread per sample (e, y); reads 2r+1 f32 of its row, same channel.
// Border policy: SciPy 'reflect' (half-sample symmetric, d c b a | a b c d | d c b a), applied
// repeatedly for kernels longer than the line. No shared memory.
#include "common/blur.cuh"

// Half kernel w[0..=radius], centre first, rounded to f32 on the host. Passed by value.
// Keep in sync with BlurWeightsF32 in src/ops/blur/gpu.rs.
struct BlurWeightsF32 {
    float half[BLUR_MAX_RADIUS + 1];
    int radius;
    int pad[3];
};
static_assert(sizeof(BlurWeightsF32) == 528, "BlurWeightsF32 layout");

extern "C" __global__ void blur_vertical(const u8* __restrict__ src, float* __restrict__ dst, BlurWeightsF32 wt,
                                         u32 row, u32 height, float inv255) {
    u32 e = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (e >= row || y >= height) return;
    const int h = (int)height;
    float t = __fmul_rn(__fmul_rn((float)src[(size_t)y * row + e], inv255), wt.half[0]);
    for (int j = wt.radius; j >= 1; --j) {
        int ya = blur_reflect((int)y - j, h);
        int yb = blur_reflect((int)y + j, h);
        float a = __fmul_rn((float)src[(size_t)ya * row + e], inv255);
        float b = __fmul_rn((float)src[(size_t)yb * row + e], inv255);
        t = __fadd_rn(t, __fmul_rn(__fadd_rn(a, b), wt.half[j]));
    }
    dst[(size_t)y * row + e] = t;
}

extern "C" __global__ void blur_horizontal(const float* __restrict__ src, float* __restrict__ dst, BlurWeightsF32 wt,
                                           u32 width, u32 height, u32 channels) {
    u32 row = width * channels;
    u32 e = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (e >= row || y >= height) return;
    const float* line = src + (size_t)y * row;
    int x = (int)(e / channels);
    int c = (int)(e - (u32)x * channels);
    int w = (int)width;
    int ch = (int)channels;
    float t = __fmul_rn(line[e], wt.half[0]);
    for (int j = wt.radius; j >= 1; --j) {
        float a = line[blur_reflect(x - j, w) * ch + c];
        float b = line[blur_reflect(x + j, w) * ch + c];
        t = __fadd_rn(t, __fmul_rn(__fadd_rn(a, b), wt.half[j]));
    }
    dst[(size_t)y * row + e] = t;
}

// f64 variants (what scikit-image computes; src/ops/blur/cpu.rs blur_f64 is bit-identical,
// and on the sample images so is SciPy): the same sums with __dmul_rn / __dadd_rn, written in
// common/blur.cuh (the segmentation's segmentation_blur_edges computes them the same way).
extern "C" __global__ void blur_vertical_f64(const u8* __restrict__ src, double* __restrict__ dst,
                                             BlurWeightsF64 wt, u32 row, u32 height, double inv255) {
    u32 e = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (e >= row || y >= height) return;
    dst[(size_t)y * row + e] = blur_vertical_f64_at(src, wt, row, (int)height, (int)y, e, inv255);
}

extern "C" __global__ void blur_horizontal_f64(const double* __restrict__ src, double* __restrict__ dst,
                                               BlurWeightsF64 wt, u32 width, u32 height, u32 channels) {
    u32 row = width * channels;
    u32 e = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (e >= row || y >= height) return;
    const double* line = src + (size_t)y * row;
    int x = (int)(e / channels);
    int c = (int)(e - (u32)x * channels);
    int ch = (int)channels;
    dst[(size_t)y * row + e] = blur_horizontal_f64_at(wt, (int)width, x, [&](int i) { return line[i * ch + c]; });
}
