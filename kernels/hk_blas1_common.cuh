// Shared device helpers of the level-1 BLAS kernels (kernels/hk_blas1*.cu).
//
// Conventions every kernel follows, so a bench can launch them raw:
// - block: HK_BLAS1_BLOCK (256) threads, 1-D; grid: 1-D, any size >= 1. The
//   elementwise kernels cover all n with a grid-stride loop; hk-cuda launches
//   ceil(n / (256 * per-thread items)) blocks. Reductions need exactly
//   HK_BLAS1_BLOCK threads and at most HK_BLAS1_MAX_BLOCKS blocks; hk-cuda caps
//   their grid at 4 blocks per SM, 2 for the _aligned dot kernels (see
//   hk_blas1_reduce.cu).
// - n is the logical length; x (and y) point at logical element 0, and element
//   i lives at x[i * incx]. For a BLAS-style negative increment, pass
//   base + (n - 1) * |incx| and the negative incx.
// - alpha: when alpha_ptr is not NULL the kernel reads *alpha_ptr (device
//   pointer mode) and ignores alpha; otherwise it uses alpha.
// - programmatic dependent launch: every kernel waits for the grids before it
//   in the stream (wait_prior_grids) before touching memory, and lets the next
//   grid launch (allow_next_grid) once its own loads are under way (the
//   _aligned dot kernels: at their start). hk-cuda launches them with
//   programmatic stream serialization allowed, so the next kernel's launch
//   and block start overlap this one's tail; launched plainly they behave the
//   same. Before waiting, the _aligned dot kernels ask L2 to prefetch their
//   first loads of x (prefetch_l2), a hint that changes no loaded value.
#ifndef HK_BLAS1_COMMON_CUH
#define HK_BLAS1_COMMON_CUH

#include <stdint.h>

#define HK_BLAS1_BLOCK 256
#define HK_BLAS1_MAX_BLOCKS 1024 // a multiple of HK_BLAS1_BLOCK (grid_sum)
#ifndef HK_BLAS1_UNROLL
#define HK_BLAS1_UNROLL 4
#endif

namespace hk {

// One 16-byte vector of T, so the contiguous path issues 128-bit loads.
template <typename T> struct vec16;
template <> struct vec16<float> {
    typedef float4 type;
    static const int width = 4;
};
template <> struct vec16<double> {
    typedef double2 type;
    static const int width = 2;
};

__device__ __forceinline__ float4 vaxpy(float a, float4 x, float4 y)
{
    return make_float4(fmaf(a, x.x, y.x), fmaf(a, x.y, y.y), fmaf(a, x.z, y.z), fmaf(a, x.w, y.w));
}
__device__ __forceinline__ double2 vaxpy(double a, double2 x, double2 y)
{
    return make_double2(fma(a, x.x, y.x), fma(a, x.y, y.y));
}
__device__ __forceinline__ float4 vscal(float a, float4 x)
{
    return make_float4(a * x.x, a * x.y, a * x.z, a * x.w);
}
__device__ __forceinline__ double2 vscal(double a, double2 x)
{
    return make_double2(a * x.x, a * x.y);
}
__device__ __forceinline__ double vdot(float4 x, float4 y)
{
    return (double)x.x * y.x + (double)x.y * y.y + (double)x.z * y.z + (double)x.w * y.w;
}
__device__ __forceinline__ double vdot(double2 x, double2 y)
{
    return fma(x.x, y.x, x.y * y.y);
}

// Elements to skip so that p becomes 16-byte aligned, capped at n; -1 when p
// is not even aligned to its element size (then no vector path is possible).
template <typename T>
__device__ __forceinline__ long long head_to_align16(const T *p, long long n)
{
    uintptr_t a = (uintptr_t)p;
    if (a % sizeof(T))
        return -1;
    long long h = (long long)(((16 - (a & 15)) & 15) / sizeof(T));
    return h < n ? h : n;
}

// The previous grid in the stream complete and its memory visible. A no-op
// when the kernel was launched without programmatic serialization.
__device__ __forceinline__ void wait_prior_grids()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The next grid in the stream (if launched with programmatic serialization)
// may start launching once every block of this one has passed here; it still
// waits in wait_prior_grids for this grid to end.
__device__ __forceinline__ void allow_next_grid()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Asks L2 to fetch the line holding p. A hint: no value reaches a register or
// L1 before wait_prior_grids, and the grid before stores through to L2 (L1
// keeps no written line), so a line fetched early is updated there as any.
__device__ __forceinline__ void prefetch_l2(const void *p)
{
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

__device__ __forceinline__ long long global_tid()
{
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ long long grid_threads()
{
    return (long long)gridDim.x * blockDim.x;
}

// Sum of v over the block; the total is valid in thread 0. Callable more than
// once per kernel: the trailing barrier protects the shared scratch.
__device__ __forceinline__ double block_sum(double v)
{
    __shared__ double warp_sums[HK_BLAS1_BLOCK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, off);
    }
    __syncthreads();
    return v;
}

// Last-block-done protocol: every block stores its partials, then counts
// itself in; the block that counts last sees every partial and finishes. It
// also puts the counter back to 0, so the next launch (or a graph replay) on
// the same workspace starts clean. Returns true in every thread of the last
// block.
// Thread 0 stored the block's partials and counts the block in with one
// acquire-release atomic: the release publishes its partials, the acquire
// (passed on to the block by the barrier) makes every earlier block's visible
// to the last one. On an H200 this took 0.3 us less per call than two full
// fences around a relaxed atomic.
__device__ __forceinline__ bool arrive_last(unsigned int *counter)
{
    __shared__ bool last;
    if (threadIdx.x == 0) {
        unsigned int prev;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                     : "=r"(prev)
                     : "l"(counter)
                     : "memory");
        last = (prev == gridDim.x - 1);
    }
    __syncthreads();
    return last;
}

// A partial another block stored, read by the last block (after arrive_last).
__device__ __forceinline__ double load_partial(const double *p)
{
    double v;
    asm volatile("ld.relaxed.gpu.global.f64 %0, [%1];" : "=d"(v) : "l"(p) : "memory");
    return v;
}

// The grid-wide sums of K per-thread values s[0..K-1], through the
// last-block-done protocol: each block sums s over its threads and stores the
// K totals at partials[K * blockIdx.x + k]; the last block adds up every
// block's partials in block order and leaves the grid totals in s. Returns
// true only in thread 0 of the last block, which then writes the result and
// must put *counter back to 0.
template <int K>
__device__ __forceinline__ bool grid_sum(double (&s)[K], double *partials, unsigned int *counter)
{
#pragma unroll
    for (int k = 0; k < K; k++)
        s[k] = block_sum(s[k]);
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < K; k++)
            partials[K * blockIdx.x + k] = s[k];
    }
    if (!arrive_last(counter))
        return false;
    // Every partial of this thread is loaded before the first is added, so
    // the loads wait for L2 once, not once per partial (ddot at 2^20, 512
    // blocks: 0.1 us less per call on an H200); the adds keep block order.
    const int P = HK_BLAS1_MAX_BLOCKS / HK_BLAS1_BLOCK;
    double v[P][K];
#pragma unroll
    for (int j = 0; j < P; j++) {
        const unsigned int b = threadIdx.x + j * HK_BLAS1_BLOCK;
#pragma unroll
        for (int k = 0; k < K; k++)
            v[j][k] = b < gridDim.x ? load_partial(partials + K * b + k) : 0.0;
    }
#pragma unroll
    for (int k = 0; k < K; k++) {
        s[k] = 0.0;
#pragma unroll
        for (int j = 0; j < P; j++)
            s[k] += v[j][k];
        s[k] = block_sum(s[k]);
    }
    return threadIdx.x == 0;
}

} // namespace hk

#endif // HK_BLAS1_COMMON_CUH
