// The two loop skeletons of the level-1 BLAS kernels: map (axpy, scal, copy)
// and partial_sum (the per-thread sums of dot and nrm2). Both cover the n
// logical elements with a grid-stride loop, element i belonging to thread
// i mod (gridDim.x * blockDim.x) on the strided path, and take one of two
// paths:
// - vector path, when the increments are 1 and both vectors can be brought to
//   a 16-byte boundary at the same element: a scalar head up to that boundary
//   (at most one element per thread), then 16-byte vectors with
//   HK_BLAS1_UNROLL independent loads in flight per thread before any store or
//   accumulation, then a scalar tail (fewer than one vector's worth). Vectors
//   that are only read are loaded through the read-only cache (__ldg).
// - strided path otherwise: HK_BLAS1_UNROLL scalar loads in flight per thread.
// The operation is a small functor giving both the scalar and the 16-byte
// vector form (vec16<T>::type); see each kernel file for the functors.
#ifndef HK_BLAS1_MAP_CUH
#define HK_BLAS1_MAP_CUH

#include "hk_blas1_common.cuh"

namespace hk {

// One element of map: y[iy] = op(x[ix], y[iy]), loading only what op reads.
template <typename T, typename Op>
__device__ __forceinline__ void map_one(const Op &op, const T *x, long long ix, T *y, long long iy)
{
    T xs, ys;
    if (Op::reads_x)
        xs = x[ix];
    if (Op::reads_y)
        ys = y[iy];
    y[iy] = op(xs, ys);
}

// y[i * incy] = op(x[i * incx], y[i * incy]) for i in [0, n), n > 0.
// Op: T operator()(const T &x, const T &y) and the same over vec16<T>::type;
// Op::reads_x and Op::reads_y say which of the two it reads (an operand it does
// not read is never loaded). y is aligned first, as the stores go there. An
// in-place operation (scal) passes the vector as y, with x == y, and reads y
// only; x, being written, then never goes through __ldg.
template <typename T, typename Op>
__device__ __forceinline__ void map(long long n, const T *x, long long incx, T *y, long long incy,
                                    const Op &op)
{
    const long long tid = global_tid(), nth = grid_threads();
    const int U = HK_BLAS1_UNROLL;
    if ((!Op::reads_x || incx == 1) && incy == 1) {
        const long long head = head_to_align16(y, n);
        if (head >= 0 && (!Op::reads_x || (((uintptr_t)(x + head)) & 15) == 0)) {
            typedef typename vec16<T>::type V;
            const int W = vec16<T>::width;
            if (tid < head)
                map_one(op, x, tid, y, tid);
            const long long nv = (n - head) / W;
            const V *xv = reinterpret_cast<const V *>(x + head);
            V *yv = reinterpret_cast<V *>(y + head);
            for (long long base = tid; base < nv; base += nth * U) {
                V xr[U], yr[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const long long i = base + u * nth;
                    if (i < nv) {
                        if (Op::reads_x)
                            xr[u] = __ldg(xv + i);
                        if (Op::reads_y)
                            yr[u] = yv[i];
                    }
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const long long i = base + u * nth;
                    if (i < nv)
                        yv[i] = op(xr[u], yr[u]);
                }
            }
            const long long t = head + nv * W + tid;
            if (t < n)
                map_one(op, x, t, y, t);
            return;
        }
    }
    for (long long base = tid; base < n; base += nth * U) {
        T xr[U], yr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long i = base + u * nth;
            if (i < n) {
                if (Op::reads_x)
                    xr[u] = x[i * incx];
                if (Op::reads_y)
                    yr[u] = y[i * incy];
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long i = base + u * nth;
            if (i < n)
                y[i * incy] = op(xr[u], yr[u]);
        }
    }
}

// One element of partial_sum: op(acc, x[ix], y[iy]), y loaded only for pairs.
template <typename T, typename Op>
__device__ __forceinline__ void sum_one(const Op &op, typename Op::acc_type &acc, const T *x,
                                        long long ix, const T *y, long long iy)
{
    const T xs = x[ix];
    T ys;
    if (Op::pair)
        ys = y[iy];
    op(acc, xs, ys);
}

// This thread's share of op over nv 16-byte vectors (xv, and yv for pairs),
// HK_BLAS1_UNROLL independent loads in flight before any accumulation.
template <typename V, typename Op>
__device__ __forceinline__ void vector_sum(const Op &op, typename Op::acc_type &acc, const V *xv,
                                           const V *yv, long long nv)
{
    const long long tid = global_tid(), nth = grid_threads();
    const int U = HK_BLAS1_UNROLL;
    for (long long base = tid; base < nv; base += nth * U) {
        V xr[U], yr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long i = base + u * nth;
            if (i < nv) {
                xr[u] = __ldg(xv + i);
                if (Op::pair)
                    yr[u] = __ldg(yv + i);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long i = base + u * nth;
            if (i < nv)
                op(acc, xr[u], yr[u]);
        }
    }
}

// This thread's share of the sum over i in [0, n) of op(x[i * incx], y[i * incy]).
// Op::acc_type: the accumulator (value-initialised to zero); Op::pair: whether
// op reads y (dot) or x alone (nrm2: pass x, incx again as y, incy; y is then
// never loaded); void operator()(acc_type &, const T &x, const T &y) and the
// same over vec16<T>::type. x is aligned first. The strided path pads the
// last round with zeros and accumulates all HK_BLAS1_UNROLL values, so op(acc,
// 0, 0) must leave the sums as they are.
template <typename T, typename Op>
__device__ __forceinline__ typename Op::acc_type partial_sum(long long n, const T *x,
                                                             long long incx, const T *y,
                                                             long long incy, const Op &op)
{
    const long long tid = global_tid(), nth = grid_threads();
    const int U = HK_BLAS1_UNROLL;
    typename Op::acc_type acc{};
    if (incx == 1 && (!Op::pair || incy == 1)) {
        const long long head = head_to_align16(x, n);
        if (head >= 0 && (!Op::pair || (((uintptr_t)(y + head)) & 15) == 0)) {
            typedef typename vec16<T>::type V;
            const int W = vec16<T>::width;
            if (tid < head)
                sum_one(op, acc, x, tid, y, tid);
            const long long nv = (n - head) / W;
            vector_sum(op, acc, reinterpret_cast<const V *>(x + head),
                       reinterpret_cast<const V *>(y + head), nv);
            const long long t = head + nv * W + tid;
            if (t < n)
                sum_one(op, acc, x, t, y, t);
            return acc;
        }
    }
    for (long long base = tid; base < n; base += nth * U) {
        T xr[U], yr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long i = base + u * nth;
            xr[u] = T(0);
            if (Op::pair)
                yr[u] = T(0);
            if (i < n) {
                xr[u] = x[i * incx];
                if (Op::pair)
                    yr[u] = y[i * incy];
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            op(acc, xr[u], yr[u]);
    }
    return acc;
}

// The start of the _aligned dot kernels, in place of wait_prior_grids: lets
// the next grid launch at once, asks L2 to prefetch this thread's first round
// of x (the HK_BLAS1_UNROLL vectors aligned_sum loads first), then waits for
// the grid before. hk-cuda gives these kernels at most 2 blocks per SM, which
// leaves room for the next grid's blocks: they start while this grid ends,
// and their prefetches overlap its block sums and last-block step. On an
// H200, back to back at 2^20, side by side with waiting first on 4 blocks per
// SM: sdot 7.5 % and ddot 5.6 % less time per call; at 2^26 the same time.
// Prefetching y as well, or triggering the next grid after the loads, was
// slower. nrm2, which streams x alone, keeps the plain start and 4 blocks
// per SM: with this start on 2 it read 2^26 - 2^28 elements at 0.90 - 0.93 of
// a device-to-device copy instead of 0.96 - 1.04 (likely too few loads in
// flight with one vector per thread instead of two).
template <typename T>
__device__ __forceinline__ void dot_start(long long n, const T *x)
{
    typedef typename vec16<T>::type V;
    const long long nv = n / vec16<T>::width, tid = global_tid(), nth = grid_threads();
    allow_next_grid();
#pragma unroll
    for (int u = 0; u < HK_BLAS1_UNROLL; u++) {
        const long long i = tid + u * nth;
        if (i < nv)
            prefetch_l2(reinterpret_cast<const V *>(x) + i);
    }
    wait_prior_grids();
}

// partial_sum for x (and y) 16-byte aligned with unit increments, n >= 1:
// the vector loop alone, then the scalar tail, behind a test of n that the
// whole grid takes alike. The reductions have a kernel of their own for this
// case: on an H200 it ran 0.3 - 1.4 us faster per call than the general
// kernel on the same aligned data (sdot, ddot at 2^16 and 2^20), although the
// loop is the same; the general kernel's larger code is the likely cause in
// kernels this short. For the same reason the tail is skipped as a whole
// when n is a multiple of the vector width, and the kernels do not test
// n > 0 (hk-cuda never launches them otherwise): ddot at 2^20 took 7.04 us
// instead of 7.20 that way (medians of 30 batches of 64 calls, side by side).
template <typename T, typename Op>
__device__ __forceinline__ typename Op::acc_type aligned_sum(long long n, const T *x, const T *y,
                                                             const Op &op)
{
    typedef typename vec16<T>::type V;
    const int W = vec16<T>::width;
    const long long nv = n / W;
    typename Op::acc_type acc{};
    vector_sum(op, acc, reinterpret_cast<const V *>(x), reinterpret_cast<const V *>(y), nv);
    if (n & (W - 1)) {
        const long long t = nv * W + global_tid();
        if (t < n)
            sum_one(op, acc, x, t, y, t);
    }
    return acc;
}

} // namespace hk

#endif // HK_BLAS1_MAP_CUH
