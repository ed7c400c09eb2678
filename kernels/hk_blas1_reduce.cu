// Level-1 BLAS reductions: dot and nrm2 in float and double, one launch each.
//
// Launch: block (256, 1, 1) exactly; grid (G, 1, 1) with 1 <= G <= 1024
// (HK_BLAS1_MAX_BLOCKS). hk-cuda uses G = min(ceil(n / (256 * k)), 4 * SMs,
// 1024), k as in hk_blas1.cu, 2 * SMs in place of 4 * SMs for the _aligned
// dot kernels (dot_start in hk_blas1_map.cuh says why), and allows
// programmatic stream serialization.
//
// Parameters (conventions in hk_blas1_common.cuh):
//   n           logical length; n <= 0 (or incx <= 0 for nrm2) writes 0 (the
//               _aligned kernels need n >= 1)
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
#include "hk_blas1_map.cuh"

namespace hk {

// The accumulations, op(acc, x, y), for partial_sum (hk_blas1_map.cuh).
struct dot_op {
    typedef double acc_type;
    static const bool pair = true;
    template <typename T>
    __device__ __forceinline__ void operator()(double &acc, const T &x, const T &y) const
    {
        acc += (double)x * (double)y;
    }
    __device__ __forceinline__ void operator()(double &acc, const float4 &x, const float4 &y) const
    {
        acc += vdot(x, y);
    }
    __device__ __forceinline__ void operator()(double &acc, const double2 &x,
                                               const double2 &y) const
    {
        acc += vdot(x, y);
    }
};

template <typename T>
__device__ __forceinline__ void dot(long long n, const T *x, long long incx, const T *y,
                                    long long incy, double *partials, unsigned int *counter,
                                    T *result)
{
    wait_prior_grids();
    double s[1] = {n > 0 ? partial_sum(n, x, incx, y, incy, dot_op()) : 0.0};
    allow_next_grid(); // after the loads: the next grid's blocks would compete for them
    if (grid_sum(s, partials, counter)) {
        *result = (T)s[0];
        *counter = 0u;
    }
}

// Sum of squares of float x in double: no scaling needed, as every float
// square is a normal double. x alone: partial_sum gets it as y too.
struct ssq_op {
    typedef double acc_type;
    static const bool pair = false;
    __device__ __forceinline__ void operator()(double &acc, const float &x, const float &) const
    {
        acc += (double)x * (double)x;
    }
    __device__ __forceinline__ void operator()(double &acc, const float4 &x, const float4 &) const
    {
        acc += vdot(x, x);
    }
};

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

// Blue's sums of double x (x alone, as for ssq_op).
struct blue_op {
    typedef blue_acc acc_type;
    static const bool pair = false;
    __device__ __forceinline__ void operator()(blue_acc &a, const double &x, const double &) const
    {
        blue_add(a, x);
    }
    __device__ __forceinline__ void operator()(blue_acc &a, const double2 &x,
                                               const double2 &) const
    {
        blue_add(a, x.x);
        blue_add(a, x.y);
    }
};

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

namespace hk {

// dot on 16-byte aligned vectors with unit increments (incx, incy unused),
// n >= 1.
template <typename T>
__device__ __forceinline__ void dot_aligned(long long n, const T *x, const T *y,
                                            double *partials, unsigned int *counter, T *result)
{
    dot_start(n, x);
    double s[1] = {aligned_sum(n, x, y, dot_op())};
    if (grid_sum(s, partials, counter)) {
        *result = (T)s[0];
        *counter = 0u;
    }
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
    hk::wait_prior_grids();
    double s[1] = {(n > 0 && incx > 0) ? hk::partial_sum(n, x, incx, x, incx, hk::ssq_op())
                                       : 0.0};
    hk::allow_next_grid();
    if (hk::grid_sum(s, partials, counter)) {
        *result = (float)sqrt(s[0]);
        *counter = 0u;
    }
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_dnrm2_kernel(long long n, const double *x, long long incx, double *partials,
                unsigned int *counter, double *result)
{
    hk::wait_prior_grids();
    hk::blue_acc a = {0.0, 0.0, 0.0};
    if (n > 0 && incx > 0)
        a = hk::partial_sum(n, x, incx, x, incx, hk::blue_op());
    hk::allow_next_grid();
    // The three sums are linear, so blocks reduce them independently.
    double s[3] = {a.big, a.med, a.sml};
    if (hk::grid_sum(s, partials, counter)) {
        *result = hk::blue_finish(s[0], s[1], s[2]);
        *counter = 0u;
    }
}

// The same four for x (and y) 16-byte aligned with unit increments and
// n >= 1 (n <= 0 is the general kernels' case), the parameter lists
// unchanged (the increments are not read).
extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_sdot_aligned_kernel(long long n, const float *x, long long, const float *y, long long,
                       double *partials, unsigned int *counter, float *result)
{
    hk::dot_aligned<float>(n, x, y, partials, counter, result);
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_ddot_aligned_kernel(long long n, const double *x, long long, const double *y, long long,
                       double *partials, unsigned int *counter, double *result)
{
    hk::dot_aligned<double>(n, x, y, partials, counter, result);
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_snrm2_aligned_kernel(long long n, const float *x, long long, double *partials,
                        unsigned int *counter, float *result)
{
    hk::wait_prior_grids();
    double s[1] = {hk::aligned_sum(n, x, x, hk::ssq_op())};
    hk::allow_next_grid();
    if (hk::grid_sum(s, partials, counter)) {
        *result = (float)sqrt(s[0]);
        *counter = 0u;
    }
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_dnrm2_aligned_kernel(long long n, const double *x, long long, double *partials,
                        unsigned int *counter, double *result)
{
    hk::wait_prior_grids();
    hk::blue_acc a = hk::aligned_sum(n, x, x, hk::blue_op());
    hk::allow_next_grid();
    double s[3] = {a.big, a.med, a.sml};
    if (hk::grid_sum(s, partials, counter)) {
        *result = hk::blue_finish(s[0], s[1], s[2]);
        *counter = 0u;
    }
}
