// Level-1 BLAS elementwise kernels: axpy, scal, copy in float and double.
//
// Launch: block (256, 1, 1); grid (G, 1, 1) with any G >= 1 (grid-stride loop).
// hk-cuda uses G = min(ceil(n / (256 * k)), 4 * SMs), k = 16 (float) or 8
// (double) elements per thread when incx = incy = 1, else k = 4.
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
#include "hk_blas1_common.cuh"

namespace hk {

template <typename T>
__device__ __forceinline__ void axpy(long long n, T alpha, const T *alpha_ptr, const T *x,
                                     long long incx, T *y, long long incy)
{
    const T a = alpha_ptr ? __ldg(alpha_ptr) : alpha;
    if (n <= 0 || a == T(0))
        return;
    const long long tid = global_tid(), nth = grid_threads();
    const int U = HK_BLAS1_UNROLL;
    if (incx == 1 && incy == 1) {
        long long head = head_to_align16(y, n);
        if (head >= 0 && (((uintptr_t)(x + head)) & 15) == 0) {
            typedef typename vec16<T>::type V;
            const int W = vec16<T>::width;
            if (tid < head)
                y[tid] = a * x[tid] + y[tid];
            const long long nv = (n - head) / W;
            const V *xv = reinterpret_cast<const V *>(x + head);
            V *yv = reinterpret_cast<V *>(y + head);
            for (long long base = tid; base < nv; base += nth * U) {
                V xr[U], yr[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv) {
                        xr[u] = __ldg(xv + i);
                        yr[u] = yv[i];
                    }
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv)
                        yv[i] = vaxpy(a, xr[u], yr[u]);
                }
            }
            const long long t = head + nv * W + tid;
            if (t < n)
                y[t] = a * x[t] + y[t];
            return;
        }
    }
    for (long long base = tid; base < n; base += nth * U) {
        T xr[U], yr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long i = base + u * nth;
            if (i < n) {
                xr[u] = x[i * incx];
                yr[u] = y[i * incy];
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long i = base + u * nth;
            if (i < n)
                y[i * incy] = a * xr[u] + yr[u];
        }
    }
}

template <typename T>
__device__ __forceinline__ void scal(long long n, T alpha, const T *alpha_ptr, T *x,
                                     long long incx)
{
    const T a = alpha_ptr ? __ldg(alpha_ptr) : alpha;
    if (n <= 0 || incx <= 0)
        return;
    const long long tid = global_tid(), nth = grid_threads();
    const int U = HK_BLAS1_UNROLL;
    if (incx == 1) {
        long long head = head_to_align16(x, n);
        if (head >= 0) {
            typedef typename vec16<T>::type V;
            const int W = vec16<T>::width;
            if (tid < head)
                x[tid] = a * x[tid];
            const long long nv = (n - head) / W;
            V *xv = reinterpret_cast<V *>(x + head);
            for (long long base = tid; base < nv; base += nth * U) {
                V xr[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv)
                        xr[u] = xv[i];
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long i = base + u * nth;
                    if (i < nv)
                        xv[i] = vscal(a, xr[u]);
                }
            }
            const long long t = head + nv * W + tid;
            if (t < n)
                x[t] = a * x[t];
            return;
        }
    }
    for (long long base = tid; base < n; base += nth * U) {
        T xr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long i = base + u * nth;
            if (i < n)
                xr[u] = x[i * incx];
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long i = base + u * nth;
            if (i < n)
                x[i * incx] = a * xr[u];
        }
    }
}

template <typename T>
__device__ __forceinline__ void copy(long long n, const T *x, long long incx, T *y,
                                     long long incy)
{
    if (n <= 0)
        return;
    const long long tid = global_tid(), nth = grid_threads();
    const int U = HK_BLAS1_UNROLL;
    if (incx == 1 && incy == 1) {
        long long head = head_to_align16(y, n);
        if (head >= 0 && (((uintptr_t)(x + head)) & 15) == 0) {
            typedef typename vec16<T>::type V;
            const int W = vec16<T>::width;
            if (tid < head)
                y[tid] = x[tid];
            const long long nv = (n - head) / W;
            const V *xv = reinterpret_cast<const V *>(x + head);
            V *yv = reinterpret_cast<V *>(y + head);
            for (long long base = tid; base < nv; base += nth * U) {
                V xr[U];
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
                        yv[i] = xr[u];
                }
            }
            const long long t = head + nv * W + tid;
            if (t < n)
                y[t] = x[t];
            return;
        }
    }
    for (long long base = tid; base < n; base += nth * U) {
        T xr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long i = base + u * nth;
            if (i < n)
                xr[u] = x[i * incx];
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long i = base + u * nth;
            if (i < n)
                y[i * incy] = xr[u];
        }
    }
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
