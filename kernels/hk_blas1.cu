// Level-1 BLAS elementwise kernels: axpy, scal, copy in float and double.
//
// Launch: block (256, 1, 1); grid (G, 1, 1) with any G >= 1 (grid-stride loop).
// hk-cuda uses G = ceil(n / (256 * k)), k = 16 (float) or 8 (double) elements
// per thread when incx = incy = 1, else k = 4, and allows programmatic stream
// serialization (hk_blas1_common.cuh).
//
// Parameters (see hk_blas1_common.cuh for the shared conventions):
//   n          logical length; n <= 0 does nothing
//   alpha      the scalar, used when alpha_ptr is NULL (host pointer mode)
//   alpha_ptr  device pointer to the scalar (device pointer mode) or NULL
//   x, incx    source (axpy, copy) or vector scaled in place (scal): element i
//              at x[i * incx]; incx may be 0 or negative for axpy/copy
//   y, incy    destination: element i at y[i * incy]; incy != 0
// axpy with a zero alpha leaves y untouched (reference BLAS returns early).
// When incx = incy = 1 and x, y share their offset modulo 16 bytes the kernels
// move 16-byte vectors, HK_BLAS1_UNROLL of them in flight per thread.
#include "hk_blas1_map.cuh"

namespace hk {

// The element operations, y = op(x, y), for map (hk_blas1_map.cuh).
template <typename T> struct axpy_op {
    static const bool reads_x = true, reads_y = true;
    T a;
    __device__ __forceinline__ T operator()(const T &x, const T &y) const { return a * x + y; }
    template <typename V> __device__ __forceinline__ V operator()(const V &x, const V &y) const
    {
        return vaxpy(a, x, y);
    }
};

// In place: map gets x as y and reads y only.
template <typename T> struct scal_op {
    static const bool reads_x = false, reads_y = true;
    T a;
    __device__ __forceinline__ T operator()(const T &, const T &y) const { return a * y; }
    template <typename V> __device__ __forceinline__ V operator()(const V &, const V &y) const
    {
        return vscal(a, y);
    }
};

struct copy_op {
    static const bool reads_x = true, reads_y = false;
    template <typename V> __device__ __forceinline__ V operator()(const V &x, const V &) const
    {
        return x;
    }
};

template <typename T>
__device__ __forceinline__ void axpy(long long n, T alpha, const T *alpha_ptr, const T *x,
                                     long long incx, T *y, long long incy)
{
    wait_prior_grids(); // before *alpha_ptr: the grid before may write it
    allow_next_grid();
    const T a = alpha_ptr ? __ldg(alpha_ptr) : alpha;
    if (n <= 0 || a == T(0))
        return;
    map(n, x, incx, y, incy, axpy_op<T>{a});
}

template <typename T>
__device__ __forceinline__ void scal(long long n, T alpha, const T *alpha_ptr, T *x,
                                     long long incx)
{
    wait_prior_grids();
    allow_next_grid();
    const T a = alpha_ptr ? __ldg(alpha_ptr) : alpha;
    if (n <= 0 || incx <= 0)
        return;
    map(n, x, incx, x, incx, scal_op<T>{a});
}

template <typename T>
__device__ __forceinline__ void copy(long long n, const T *x, long long incx, T *y,
                                     long long incy)
{
    wait_prior_grids();
    allow_next_grid();
    if (n <= 0)
        return;
    map(n, x, incx, y, incy, copy_op());
}

} // namespace hk

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_saxpy_kernel(long long n, float alpha, const float *alpha_ptr, const float *x, long long incx,
                float *y, long long incy)
{
    hk::axpy<float>(n, alpha, alpha_ptr, x, incx, y, incy);
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_daxpy_kernel(long long n, double alpha, const double *alpha_ptr, const double *x,
                long long incx, double *y, long long incy)
{
    hk::axpy<double>(n, alpha, alpha_ptr, x, incx, y, incy);
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_sscal_kernel(long long n, float alpha, const float *alpha_ptr, float *x, long long incx)
{
    hk::scal<float>(n, alpha, alpha_ptr, x, incx);
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_dscal_kernel(long long n, double alpha, const double *alpha_ptr, double *x, long long incx)
{
    hk::scal<double>(n, alpha, alpha_ptr, x, incx);
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_scopy_kernel(long long n, const float *x, long long incx, float *y, long long incy)
{
    hk::copy<float>(n, x, incx, y, incy);
}

extern "C" __global__ void __launch_bounds__(HK_BLAS1_BLOCK)
hk_dcopy_kernel(long long n, const double *x, long long incx, double *y, long long incy)
{
    hk::copy<double>(n, x, incx, y, incy);
}
