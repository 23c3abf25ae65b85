// Shared device helpers for every morphoscope kernel module.
// Included textually by the registry (src/gpu/compile.rs expands `#include "common/util.cuh"`),
// so this header must stay self-contained: no system includes (NVRTC has no libc headers).
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define FULL_MASK 0xffffffffu

// Global linear thread index and total thread count of a 1D launch.
__device__ __forceinline__ u32 global_tid() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ u32 global_threads() { return gridDim.x * blockDim.x; }

// Inclusive prefix sum of one value per lane across the full warp (every lane must call it).
__device__ __forceinline__ u32 warp_inclusive_scan(u32 x) {
    const u32 lane = threadIdx.x & 31u;
#pragma unroll
    for (u32 o = 1; o < 32; o <<= 1) {
        const u32 y = __shfl_up_sync(FULL_MASK, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

// Programmatic dependent launch (compute capability 9.0+, src/gpu/launch.rs ExLaunch): a kernel
// launched with it may start while the kernel before it on the stream is still running, and
// must call grid_dep_wait() before it touches what that kernel writes or reads;
// grid_dep_launch() lets the next such kernel start (its blocks then wait in grid_dep_wait).
// Both are no-ops on older devices and for kernels launched the ordinary way.
__device__ __forceinline__ void grid_dep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }
