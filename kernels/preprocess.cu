// Pre-processing shared by the analyses: colour to grey and 16-bit to 8-bit.
//
// preprocess_rgb_to_gray: ITU-R BT.601 luma with OpenCV's fixed-point rounding
//   (R*4899 + G*9617 + B*1868 + 8192) >> 14, identical to src/image.rs::rgb_to_gray_pixel.
//   Thread mapping: one thread per output pixel, 2D grid of 32x8 blocks; rows of the source are
//   `src_stride` bytes apart (GStreamer pads rows), the output is packed (width bytes a row).
//   Border policy: none needed (pointwise).
// preprocess_gray16_to_gray8: keeps the high byte (v >> 8), as GStreamer's videoconvert does.
// preprocess_downscale: box average of factor x factor blocks of packed interleaved 8-bit
//   samples, (sum + n/2) / n per channel in integers, identical to src/ops/preprocess.rs
//   downscale_box; the out_width x out_height = floor(width / f) x floor(height / f) blocks
//   (trailing columns/rows that do not fill a block are left out). One thread per output pixel.
// preprocess_histogram: 256-bin histogram of n packed 8-bit samples (the grey statistics of the
//   `preprocess` analysis; src/ops/preprocess.rs gray_histogram is its CPU twin). Privatised:
//   each block counts into its own 256 counters in shared memory (shared atomics only), then adds
//   its non-zero bins to the global histogram (at most 256 global atomics a block). Thread
//   mapping: blocks of any multiple of 32 threads (256 by default), grid-stride over the frame
//   as 4-byte words (`src` is the start of a device allocation, 256-byte aligned: a
//   DeviceImage's buffer is a whole CudaSlice), then over the n % 4 trailing bytes. The host
//   zeroes `bins` first and sets the launch shape (src/ops/preprocess.rs PreprocessTuning).
#include "common/util.cuh"

extern "C" __global__ void preprocess_rgb_to_gray(const u8* __restrict__ src, u32 src_stride,
                                                  u8* __restrict__ dst, u32 width, u32 height) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const u8* p = src + (size_t)y * src_stride + 3u * x;
    u32 v = (u32)p[0] * 4899u + (u32)p[1] * 9617u + (u32)p[2] * 1868u + 8192u;
    dst[(size_t)y * width + x] = (u8)(v >> 14);
}

extern "C" __global__ void preprocess_gray16_to_gray8(const u16* __restrict__ src, u32 src_stride,
                                                      u8* __restrict__ dst, u32 width, u32 height) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    dst[(size_t)y * width + x] = (u8)(src[(size_t)y * src_stride + x] >> 8);
}

extern "C" __global__ void preprocess_downscale(const u8* __restrict__ src, u8* __restrict__ dst, u32 width,
                                               u32 out_width, u32 out_height, u32 channels, u32 f) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= out_width || y >= out_height) return;
    u32 n = f * f;
    for (u32 c = 0; c < channels; ++c) {
        u32 sum = 0;
        for (u32 dy = 0; dy < f; ++dy) {
            const u8* row = src + ((size_t)(y * f + dy) * width + (size_t)x * f) * channels + c;
            for (u32 dx = 0; dx < f; ++dx) sum += row[(size_t)dx * channels];
        }
        dst[((size_t)y * out_width + x) * channels + c] = (u8)((sum + n / 2) / n);
    }
}

extern "C" __global__ void preprocess_histogram(const u8* __restrict__ src, u32 n, u32* __restrict__ bins) {
    __shared__ u32 local[256];
    for (u32 i = threadIdx.x; i < 256u; i += blockDim.x) local[i] = 0;
    __syncthreads();
    const u32 words = n >> 2;
    const u32* __restrict__ w = (const u32*)src;
    for (u32 i = global_tid(); i < words; i += global_threads()) {
        const u32 v = w[i];
        atomicAdd(&local[v & 0xffu], 1u);
        atomicAdd(&local[(v >> 8) & 0xffu], 1u);
        atomicAdd(&local[(v >> 16) & 0xffu], 1u);
        atomicAdd(&local[v >> 24], 1u);
    }
    for (u32 i = (words << 2) + global_tid(); i < n; i += global_threads()) atomicAdd(&local[src[i]], 1u);
    __syncthreads();
    for (u32 i = threadIdx.x; i < 256u; i += blockDim.x) {
        const u32 c = local[i];
        if (c != 0) atomicAdd(&bins[i], c);
    }
}
