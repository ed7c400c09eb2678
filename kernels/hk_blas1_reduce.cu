// Level-1 BLAS reductions: dot and nrm2 in float and double, one launch each.
//
// Launch: block (256, 1, 1) exactly; grid (G, 1, 1) with 1 <= G <= 1024
// (HK_BLAS1_MAX_BLOCKS). hk-cuda uses G = min(ceil(n / (256 * k)), 4 * SMs,
// 1024), k as in hk_blas1.cu.
//
// Parameters (conventions in hk_blas1_common.cuh):
//   n           logical length; n <= 0 (or incx <= 0 for nrm2) writes 0
//   x, incx     first vector, element i at x[i * incx] (incx may be 0 or
//               negative for dot)
//   y, incy     second vector of dot, same rules
//   partials    device scratch of G doubles (dot, snrm2) or 3 * G doubles
//               (dnrm2), left holding this launch's per-block partials
//   counter     device unsigned int that must be 0 before the launch; the
//               last block puts it back to 0
//   result      device pointer receiving the one result
// Each block reduces its share into partials[blockIdx.x]; the last block to
// finish (atomic counter) reduces the partials in a fixed order and writes
// *result, so the result is deterministic for a given G.
// Accuracy: sdot and snrm2 accumulate in double (float squares cannot overflow
// or underflow there); dnrm2 uses Blue's three-accumulator scaling.
#include "hk_blas1_common.cuh"

namespace hk {

template <typename T>
__device__ __forceinline__ double dot_partial(long long n, const T *x, long long incx,
                                              const T *y, long long incy)
{
    const long long tid = global_tid(), nth = grid_threads();
    const int U = HK_BLAS1_UNROLL;
    double acc = 0.0;
    if (incx == 1 && incy == 1) {
        long long head = head_to_align16(x, n);
        if (head >= 0 && (((uintptr_t)(y + head)) & 15) == 0) {
            typedef typename vec16<T>::type V;
            const int W = vec16<T>::width;
            if (tid < head)
                acc += (double)x[tid] * (double)y[tid];
            const long long nv = (n - head) / W;
            const V *xv = reinterpret_cast<const V *>(x + head);
            const V *yv = reinterpret_cast<const V *>(y + head);
            for (long long base = tid; base < nv; base += nth * U) {
                V xr[U], yr[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv) {
                        xr[u] = __ldg(xv + i);
                        yr[u] = __ldg(yv + i);
                    }
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv)
                        acc += vdot(xr[u], yr[u]);
                }
            }
            const long long t = head + nv * W + tid;
            if (t < n)
                acc += (double)x[t] * (double)y[t];
            return acc;
        }
    }
    for (long long base = tid; base < n; base += nth * U) {
        T xr[U], yr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long i = base + u * nth;
            xr[u] = yr[u] = T(0);
            if (i < n) {
                xr[u] = x[i * incx];
                yr[u] = y[i * incy];
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            acc += (double)xr[u] * (double)yr[u];
    }
    return acc;
}

template <typename T>
__device__ __forceinline__ void dot(long long n, const T *x, long long incx, const T *y,
                                    long long incy, double *partials, unsigned int *counter,
                                    T *result)
{
    double acc = n > 0 ? dot_partial<T>(n, x, incx, y, incy) : 0.0;
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
    if (!arrive_last(counter))
        return;
    double v = 0.0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x)
        v += ((volatile double *)partials)[b];
    v = block_sum(v);
    if (threadIdx.x == 0) {
        *result = (T)v;
        *counter = 0u;
    }
}

// Sum of squares of float x in double: no scaling needed, as every float
// square is a normal double.
__device__ __forceinline__ double ssq_partial(long long n, const float *x, long long incx)
{
    const long long tid = global_tid(), nth = grid_threads();
    const int U = HK_BLAS1_UNROLL;
    double acc = 0.0;
    if (incx == 1) {
        long long head = head_to_align16(x, n);
        if (head >= 0) {
            if (tid < head)
                acc += (double)x[tid] * (double)x[tid];
            const long long nv = (n - head) / 4;
            const float4 *xv = reinterpret_cast<const float4 *>(x + head);
            for (long long base = tid; base < nv; base += nth * U) {
                float4 xr[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv)
                        xr[u] = __ldg(xv + i);
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv)
                        acc += vdot(xr[u], xr[u]);
                }
            }
            const long long t = head + nv * 4 + tid;
            if (t < n)
                acc += (double)x[t] * (double)x[t];
            return acc;
        }
    }
    for (long long base = tid; base < n; base += nth * U) {
        float xr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long i = base + u * nth;
            xr[u] = i < n ? x[i * incx] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            acc += (double)xr[u] * (double)xr[u];
    }
    return acc;
}

// Blue's constants for IEEE double (as in reference LAPACK's dnrm2): values
// above TBIG are scaled down by SBIG, values below TSML up by SSML, the rest
// squared as they are, so no square overflows or underflows.
#define HK_BLUE_TSML 0x1p-511
#define HK_BLUE_TBIG 0x1p+486
#define HK_BLUE_SSML 0x1p+537
#define HK_BLUE_SBIG 0x1p-538

struct blue_acc {
    double big, med, sml;
};

__device__ __forceinline__ void blue_add(blue_acc &a, double v)
{
    const double ax = fabs(v);
    if (ax > HK_BLUE_TBIG) {
        const double t = ax * HK_BLUE_SBIG;
        a.big = fma(t, t, a.big);
    } else if (ax < HK_BLUE_TSML) {
        const double t = ax * HK_BLUE_SSML;
        a.sml = fma(t, t, a.sml);
    } else {
        a.med = fma(ax, ax, a.med); // NaN lands here and propagates
    }
}

__device__ __forceinline__ blue_acc blue_partial(long long n, const double *x, long long incx)
{
    const long long tid = global_tid(), nth = grid_threads();
    const int U = HK_BLAS1_UNROLL;
    blue_acc a = {0.0, 0.0, 0.0};
    if (incx == 1) {
        long long head = head_to_align16(x, n);
        if (head >= 0) {
            if (tid < head)
                blue_add(a, x[tid]);
            const long long nv = (n - head) / 2;
            const double2 *xv = reinterpret_cast<const double2 *>(x + head);
            for (long long base = tid; base < nv; base += nth * U) {
                double2 xr[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv)
                        xr[u] = __ldg(xv + i);
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv) {
                        blue_add(a, xr[u].x);
                        blue_add(a, xr[u].y);
                    }
                }
            }
            const long long t = head + nv * 2 + tid;
            if (t < n)
                blue_add(a, x[t]);
            return a;
        }
    }
    for (long long base = tid; base < n; base += nth * U) {
        double xr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long i = base + u * nth;
            xr[u] = i < n ? x[i * incx] : 0.0;
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            blue_add(a, xr[u]);
    }
    return a;
}

// Combines the three sums into the norm, as reference LAPACK's dnrm2 does.
__device__ __forceinline__ double blue_finish(double big, double med, double sml)
{
    double scl = 1.0, sumsq;
    if (big > 0.0) {
        if (med > 0.0 || isnan(med))
            big += (med * HK_BLUE_SBIG) * HK_BLUE_SBIG;
        scl = 1.0 / HK_BLUE_SBIG;
        sumsq = big;
    } else if (sml > 0.0) {
        if (med > 0.0 || isnan(med)) {
            const double m = sqrt(med), s = sqrt(sml) / HK_BLUE_SSML;
            const double ymin = m > s ? s : m, ymax = m > s ? m : s;
            const double r = ymin / ymax;
            sumsq = ymax * ymax * (1.0 + r * r);
        } else {
            scl = 1.0 / HK_BLUE_SSML;
            sumsq = sml;
        }
    } else {
        sumsq = med;
    }
    return scl * sqrt(sumsq);
}

} // namespace hk

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_sdot_kernel(long long n, const float *x, long long incx, const float *y, long long incy,
               double *partials, unsigned int *counter, float *result)
{
    hk::dot<float>(n, x, incx, y, incy, partials, counter, result);
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_ddot_kernel(long long n, const double *x, long long incx, const double *y, long long incy,
               double *partials, unsigned int *counter, double *result)
{
    hk::dot<double>(n, x, incx, y, incy, partials, counter, result);
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_snrm2_kernel(long long n, const float *x, long long incx, double *partials,
                unsigned int *counter, float *result)
{
    double acc = (n > 0 && incx > 0) ? hk::ssq_partial(n, x, incx) : 0.0;
    acc = hk::block_sum(acc);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
    if (!hk::arrive_last(counter))
        return;
    double v = 0.0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x)
        v += ((volatile double *)partials)[b];
    v = hk::block_sum(v);
    if (threadIdx.x == 0) {
        *result = (float)sqrt(v);
        *counter = 0u;
    }
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_dnrm2_kernel(long long n, const double *x, long long incx, double *partials,
                unsigned int *counter, double *result)
{
    hk::blue_acc a = {0.0, 0.0, 0.0};
    if (n > 0 && incx > 0)
        a = hk::blue_partial(n, x, incx);
    // The three sums are linear, so blocks reduce them independently.
    const double big = hk::block_sum(a.big);
    const double med = hk::block_sum(a.med);
    const double sml = hk::block_sum(a.sml);
    if (threadIdx.x == 0) {
        partials[3 * blockIdx.x + 0] = big;
        partials[3 * blockIdx.x + 1] = med;
        partials[3 * blockIdx.x + 2] = sml;
    }
    if (!hk::arrive_last(counter))
        return;
    double s[3] = {0.0, 0.0, 0.0};
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
        s[0] += ((volatile double *)partials)[3 * b + 0];
        s[1] += ((volatile double *)partials)[3 * b + 1];
        s[2] += ((volatile double *)partials)[3 * b + 2];
    }
    s[0] = hk::block_sum(s[0]);
    s[1] = hk::block_sum(s[1]);
    s[2] = hk::block_sum(s[2]);
    if (threadIdx.x == 0) {
        *result = hk::blue_finish(s[0], s[1], s[2]);
        *counter = 0u;
    }
}
