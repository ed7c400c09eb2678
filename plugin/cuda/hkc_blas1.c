/* hk-cuda: table "hk.blas1/1" (plugin_api/hk_blas1.h) over kernels/hk_blas1*.cu.
 *
 * The hot path (device pointer mode) is: argument checks, the context guard
 * (cuCtxGetCurrent, cuCtxGetId, a switch only when needed), one
 * cuLaunchKernelEx. No lock, no allocation, no synchronisation, so calls can be
 * captured into a CUDA graph.
 *
 * dot and nrm2 also look up the workspace of their stream (hkc_ws_get, a
 * lock-free table read after the first call on a stream), so concurrent calls
 * on one handle are right from any threads on any streams. In host pointer
 * mode the handle serialises its dot/nrm2 calls (they synchronise anyway).
 *
 * Argument rules (docs/abi.md, "hk.blas1/1: argument rules"), in this order:
 * handle; nothing to do (n <= 0, and incx <= 0 for scal and nrm2: OK, dot and
 * nrm2 write 0 to a non-NULL result); NULL pointers; increments (INT64_MIN,
 * a destination increment of 0); spans; checked mode's pointer checks. */
#include <stdio.h>
#include <string.h>

#include "hk_blas1.h"
#include "hkc_internal.h"

typedef union scalar {
    float f;
    double d;
} scalar_t;

/* Bytes from element 0 to the last element, plus one element; 0 on overflow
 * (past PTRDIFF_MAX). Overflow-checked multiplies rather than divisions:
 * this runs on every call, and a 64-bit division costs tens of cycles. inc is
 * never INT64_MIN here (refused before). */
static size_t span_bytes(int64_t n, int64_t inc, size_t esz)
{
    uint64_t a = inc < 0 ? (uint64_t)0 - (uint64_t)inc : (uint64_t)inc;
    uint64_t elems, bytes;
    if (__builtin_mul_overflow((uint64_t)(n - 1), a, &elems) ||
        __builtin_add_overflow(elems, 1u, &elems) ||
        __builtin_mul_overflow(elems, (uint64_t)esz, &bytes) || bytes > PTRDIFF_MAX)
        return 0;
    return (size_t)bytes;
}

/* Element 0 of the logical vector: a negative increment starts at the far
 * end (reference BLAS). */
static const char *first(const void *p, int64_t n, int64_t inc, size_t esz)
{
    const char *c = p;
    return inc < 0 ? c + (size_t)(n - 1) * (size_t)(-inc) * esz : c;
}

/* per_sm: 0 for the elementwise kernels (no cap), else the reductions' cap in
 * blocks per SM (also capped at HK__MAX_BLOCKS). */
static unsigned grid_for(const hk_handle_t *h, int64_t n, int contiguous, size_t esz,
                         int per_sm)
{
    /* Elements per block: HK__BLOCK threads x HK__UNROLL items, an item being
     * one 16-byte vector on the contiguous path; all powers of two, so a shift
     * (no division on the per-call path). */
    const int shift = 8 + 2 + (contiguous ? (esz == 4 ? 2 : 1) : 0);
    int64_t g = (n + ((int64_t)1 << shift) - 1) >> shift;
    /* Elementwise kernels: one pass, no cap. On an H200 a grid capped at
     * 2-16 blocks per SM reached 0.90-0.95 of a device-to-device copy, the
     * uncapped one 0.98-1.03. Reductions keep a cap: their last block reads one
     * partial per block. */
    int64_t max = per_sm == 0 ? (int64_t)INT32_MAX : per_sm * (int64_t)h->sm_count;
    if (per_sm != 0 && max > HK__MAX_BLOCKS)
        max = HK__MAX_BLOCKS;
    if (g > max)
        g = max;
    return g < 1 ? 1u : (unsigned)g;
}

_Static_assert(HK__BLOCK == 1 << 8 && HK__UNROLL == 1 << 2, "grid_for's shift assumes these");

/* Every kernel waits for the grid before it in the stream before touching
 * memory (kernels/hk_blas1_common.cuh), so the launch allows programmatic
 * stream serialization: the driver may start it while the previous kernel
 * drains. Measured on an H200: 0.6-1.5 us less per call back to back, and
 * about 0.6 us less host time per launch than a plain cuLaunchKernel. */
static const CUlaunchAttribute overlap_prior = {
    .id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
    .value.programmaticStreamSerializationAllowed = 1,
};

static hk_status_t launch(hkc_call_t *c, hkc_kernel_id_t k, unsigned grid, void **params,
                          const char *op)
{
    CUlaunchConfig cfg = {
        .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1,
        .blockDimX = HK__BLOCK, .blockDimY = 1, .blockDimZ = 1,
        .hStream = c->stream,
        .attrs = (CUlaunchAttribute *)&overlap_prior, .numAttrs = 1,
    };
    CUresult r = hkc_cu.cuLaunchKernelEx(&cfg, c->arm->fn[k], params, NULL);
    if (r == CUDA_SUCCESS)
        return HK_STATUS_OK;
    char cu[96];
    hk_status_t st = hkc_cu_status(r);
    return hkc_fail(c->h, st == HK_STATUS_CUDA_ERROR ? HK_STATUS_LAUNCH_FAILED : st,
                    "%s: cuLaunchKernelEx failed: %s (device %d)", op, hkc_cu_name(r, cu, sizeof cu),
                    c->h->device);
}

/* Rule 5: the vector's span fits in PTRDIFF_MAX bytes and does not run past
 * the end of the address space from p, its lowest address. */
static hk_status_t check_span(hk_handle_t *h, const void *p, int64_t n, int64_t inc, size_t esz,
                              const char *op, const char *what)
{
    size_t bytes = span_bytes(n, inc, esz);
    if (bytes == 0)
        return hkc_fail(h, HK_STATUS_INVALID_VALUE,
                        "%s: %s spans more than PTRDIFF_MAX bytes (n = %lld, increment %lld)", op,
                        what, (long long)n, (long long)inc);
    if ((uintptr_t)p > UINTPTR_MAX - (bytes - 1))
        return hkc_fail(h, HK_STATUS_INVALID_VALUE,
                        "%s: %s (%p) with n = %lld and increment %lld runs past the end of the "
                        "address space", op, what, p, (long long)n, (long long)inc);
    return HK_STATUS_OK;
}

/* Rule 4: INT64_MIN has no magnitude; the destination of axpy and copy takes
 * one element per i, so its increment cannot be 0. */
static hk_status_t check_inc(hk_handle_t *h, int64_t inc, int dest, const char *op,
                             const char *what)
{
    if (inc == INT64_MIN)
        return hkc_fail(h, HK_STATUS_INVALID_VALUE, "%s: %s is INT64_MIN", op, what);
    if (dest && inc == 0)
        return hkc_fail(h, HK_STATUS_INVALID_VALUE, "%s: %s is 0 (the destination)", op, what);
    return HK_STATUS_OK;
}

/* Checked mode: the whole span, from the lowest address the caller passed
 * (whatever the increment's sign), must be memory of the handle's device. */
static hk_status_t check_mem(hk_handle_t *h, const void *p, int64_t n, int64_t inc, size_t esz,
                             const char *what)
{
    if (!(h->flags & HK_CREATE_CHECKED))
        return HK_STATUS_OK;
    return hk_kit_check_pointer(h->kb, p, span_bytes(n, inc, esz), what);
}

/* ---- axpy, scal, copy ---- */

/* Rules 4 and 5 for x and, when y is not NULL, y; ydest: y is written. */
static hk_status_t check_vectors(hk_handle_t *h, int64_t n, const void *x, int64_t incx,
                                 const void *y, int64_t incy, int ydest, size_t esz,
                                 const char *op)
{
    hk_status_t st = check_inc(h, incx, 0, op, "incx");
    if (st == HK_STATUS_OK && y)
        st = check_inc(h, incy, ydest, op, "incy");
    if (st == HK_STATUS_OK)
        st = check_span(h, x, n, incx, esz, op, "x");
    if (st == HK_STATUS_OK && y)
        st = check_span(h, y, n, incy, esz, op, "y");
    return st;
}

/* alpha as the kernels take it: by value in host pointer mode (*a), as a
 * device pointer in device pointer mode (*dev). Returns the mode. */
static int take_alpha(const hk_handle_t *h, const void *alpha, size_t esz, scalar_t *a,
                      const void **dev)
{
    int device_mode = atomic_load_explicit(&h->pointer_mode, memory_order_relaxed);
    a->d = 0.0;
    *dev = device_mode ? alpha : NULL;
    if (!device_mode)
        memcpy(a, alpha, esz);
    return device_mode;
}

/* Checked mode: the two vectors, and alpha when it is a device pointer. */
static hk_status_t check_operands(hk_handle_t *h, int64_t n, const void *x, int64_t incx,
                                  const void *y, int64_t incy, const void *alpha_dev,
                                  size_t esz)
{
    if (!(h->flags & HK_CREATE_CHECKED))
        return HK_STATUS_OK; /* the per-call path pays one test */
    hk_status_t st = check_mem(h, x, n, incx, esz, "x");
    if (st == HK_STATUS_OK && y)
        st = check_mem(h, y, n, incy, esz, "y");
    if (st == HK_STATUS_OK && alpha_dev)
        st = check_mem(h, alpha_dev, 1, 1, esz, "alpha");
    return st;
}

static hk_status_t axpy(hk_handle_t *h, int64_t n, const void *alpha, const void *x, int64_t incx,
                        void *y, int64_t incy, size_t esz, hkc_kernel_id_t k, const char *op)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (n <= 0)
        return HK_STATUS_OK;
    if (!alpha || !x || !y)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "%s: %s is NULL", op,
                        !alpha ? "alpha" : !x ? "x" : "y");
    hk_status_t st = check_vectors(h, n, x, incx, y, incy, 1, esz, op);
    if (st != HK_STATUS_OK)
        return st;
    scalar_t a;
    const void *alpha_ptr;
    int device_mode = take_alpha(h, alpha, esz, &a, &alpha_ptr);
    hkc_call_t c;
    st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    st = check_operands(h, n, x, incx, y, incy, alpha_ptr, esz);
    /* reference BLAS returns early with a zero alpha: y is left alone */
    if (st == HK_STATUS_OK && (device_mode || (esz == 4 ? a.f != 0.0f : a.d != 0.0))) {
        long long nn = n, ix = incx, iy = incy;
        const void *x0 = first(x, n, incx, esz);
        void *y0 = (void *)first(y, n, incy, esz);
        void *params[] = {&nn, &a, &alpha_ptr, &x0, &ix, &y0, &iy};
        st = launch(&c, k, grid_for(h, n, incx == 1 && incy == 1, esz, 0), params, op);
    }
    return hkc_call_end(&c, st);
}

static hk_status_t scal(hk_handle_t *h, int64_t n, const void *alpha, void *x, int64_t incx,
                        size_t esz, hkc_kernel_id_t k, const char *op)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (n <= 0 || incx <= 0)
        return HK_STATUS_OK; /* reference BLAS: nothing to do */
    if (!alpha || !x)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "%s: %s is NULL", op, !alpha ? "alpha" : "x");
    hk_status_t st = check_vectors(h, n, x, incx, NULL, 0, 0, esz, op);
    if (st != HK_STATUS_OK)
        return st;
    scalar_t a;
    const void *alpha_ptr;
    take_alpha(h, alpha, esz, &a, &alpha_ptr);
    hkc_call_t c;
    st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    st = check_operands(h, n, x, incx, NULL, 0, alpha_ptr, esz);
    if (st == HK_STATUS_OK) {
        long long nn = n, ix = incx;
        void *params[] = {&nn, &a, &alpha_ptr, &x, &ix};
        st = launch(&c, k, grid_for(h, n, incx == 1, esz, 0), params, op);
    }
    return hkc_call_end(&c, st);
}

static hk_status_t copy(hk_handle_t *h, int64_t n, const void *x, int64_t incx, void *y,
                        int64_t incy, size_t esz, hkc_kernel_id_t k, const char *op)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (n <= 0)
        return HK_STATUS_OK;
    if (!x || !y)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "%s: %s is NULL", op, !x ? "x" : "y");
    hk_status_t st = check_vectors(h, n, x, incx, y, incy, 1, esz, op);
    if (st != HK_STATUS_OK)
        return st;
    hkc_call_t c;
    st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    st = check_operands(h, n, x, incx, y, incy, NULL, esz);
    if (st == HK_STATUS_OK) {
        long long nn = n, ix = incx, iy = incy;
        const void *x0 = first(x, n, incx, esz);
        void *y0 = (void *)first(y, n, incy, esz);
        void *params[] = {&nn, &x0, &ix, &y0, &iy};
        st = launch(&c, k, grid_for(h, n, incx == 1 && incy == 1, esz, 0), params, op);
    }
    return hkc_call_end(&c, st);
}

/* ---- dot, nrm2 ---- */

/* Nothing to do: 0 to a non-NULL result, synchronously in host pointer mode,
 * in stream order in device pointer mode (a memset: no workspace needed). */
static hk_status_t reduce_empty(hk_handle_t *h, void *result, size_t esz, int device_mode,
                                const char *op)
{
    if (!result)
        return HK_STATUS_OK;
    if (!device_mode) {
        memset(result, 0, esz);
        return HK_STATUS_OK;
    }
    hkc_call_t c;
    hk_status_t st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    CUresult r = hkc_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)result, 0, esz, c.stream);
    if (r != CUDA_SUCCESS)
        st = hkc_fail_cu(h, r, op);
    return hkc_call_end(&c, st);
}

/* Host pointer mode waits for its result, which a stream being captured
 * never gives: refused before anything is enqueued, the capture untouched
 * (the kit asks cuStreamIsCapturing only). */
static hk_status_t refuse_capture(hkc_call_t *c, const char *op)
{
    hk_status_t st = hk_kit_check_wait(&c->k, op);
    if (st != HK_STATUS_NOT_SUPPORTED)
        return st;
    char why[400];
    snprintf(why, sizeof why, "%s", hkc_last_error(c->h));
    return hkc_fail(c->h, st, "%s; host pointer mode results cannot be captured: use device "
                              "pointer mode", why);
}

/* Launches a reduction on the stream's workspace. In host pointer mode the
 * result goes to the handle's mapped word (or the workspace's, copied) and
 * the call waits for it; the handle's lock serialises those calls. */
static hk_status_t reduce_launch(hkc_call_t *c, hkc_kernel_id_t k, unsigned grid,
                                 void **params, CUdeviceptr *partials, CUdeviceptr *counter,
                                 CUdeviceptr *slot, void *result, size_t esz, int device_mode,
                                 const char *op)
{
    hk_handle_t *h = c->h;
    hkc_ws_t *ws = NULL;
    hk_status_t st = hkc_ws_get(c, &ws);
    if (st != HK_STATUS_OK)
        return st;
    *partials = ws->base + HK__WS_PARTIALS;
    *counter = ws->base + HK__WS_COUNTER;
    if (device_mode)
        return launch(c, k, grid, params, op);
    void *mapped = NULL;
    CUdeviceptr mapped_dev = 0;
    /* The stream is not being captured (refuse_capture), but another may be:
     * making the mapped word and waiting run in relaxed mode (hkc_relax). */
    int mode;
    CUresult rr = hkc_relax(&mode);
    if (rr != CUDA_SUCCESS)
        return hkc_fail_cu(h, rr, op);
    pthread_mutex_lock(&h->lock);
    mapped = hkc_result_slot(h, c->arm, &mapped_dev);
    *slot = mapped ? mapped_dev : ws->base + HK__WS_RESULT;
    st = launch(c, k, grid, params, op);
    if (st == HK_STATUS_OK) {
        CUresult r = mapped ? CUDA_SUCCESS
                            : hkc_cu.cuMemcpyDtoHAsync(result, *slot, esz, c->stream);
        if (r == CUDA_SUCCESS)
            r = hkc_cu.cuStreamSynchronize(c->stream);
        if (r == CUDA_SUCCESS && mapped)
            memcpy(result, mapped, esz);
        if (r != CUDA_SUCCESS)
            st = hkc_fail_cu(h, r, op);
    }
    pthread_mutex_unlock(&h->lock);
    hkc_relaxed_end(mode);
    return st;
}

/* dot (y not NULL) or nrm2 (y NULL). */
static hk_status_t reduce(hk_handle_t *h, int64_t n, const void *x, int64_t incx, const void *y,
                          int64_t incy, void *result, size_t esz, hkc_kernel_id_t k,
                          const char *op)
{
    const int is_dot = k == HK__K_SDOT || k == HK__K_DDOT;
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    int device_mode = atomic_load_explicit(&h->pointer_mode, memory_order_relaxed);
    if (n <= 0 || (!is_dot && incx <= 0))
        return reduce_empty(h, result, esz, device_mode, op);
    if (!x || (is_dot && !y) || !result)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "%s: %s is NULL", op,
                        !x ? "x" : is_dot && !y ? "y" : "result");
    hk_status_t st = check_vectors(h, n, x, incx, is_dot ? y : NULL, incy, 0, esz, op);
    if (st != HK_STATUS_OK)
        return st;
    hkc_call_t c;
    st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    st = check_operands(h, n, x, incx, is_dot ? y : NULL, incy, NULL, esz);
    if (st == HK_STATUS_OK && device_mode)
        st = check_mem(h, result, 1, 1, esz, "result");
    if (st == HK_STATUS_OK && !device_mode)
        st = refuse_capture(&c, op);
    if (st == HK_STATUS_OK) {
        long long nn = n, ix = incx, iy = incy;
        const void *x0 = first(x, n, incx, esz);
        const void *y0 = is_dot ? first(y, n, incy, esz) : NULL;
        CUdeviceptr partials = 0, counter = 0;
        CUdeviceptr slot = (CUdeviceptr)(uintptr_t)result;
        const int unit = incx == 1 && (!is_dot || incy == 1);
        /* 16-byte aligned unit-stride vectors (what an allocator gives) have
         * a kernel of their own (kernels/hk_blas1_map.cuh, aligned_sum); dot's
         * runs on at most 2 blocks per SM, so the next grid's blocks fit
         * beside it (dot_start there says why) */
        const int aligned = unit && (((uintptr_t)x | (is_dot ? (uintptr_t)y : 0)) & 15) == 0;
        unsigned grid = grid_for(h, n, unit, esz, aligned && is_dot ? 2 : 4);
        if (aligned)
            k = HK__K_ALIGNED(k);
        void *dot_params[] = {&nn, &x0, &ix, &y0, &iy, &partials, &counter, &slot};
        void *nrm_params[] = {&nn, &x0, &ix, &partials, &counter, &slot};
        st = reduce_launch(&c, k, grid, is_dot ? dot_params : nrm_params, &partials, &counter,
                           &slot, result, esz, device_mode, op);
    }
    return hkc_call_end(&c, st);
}

/* ---- the table ---- */

static hk_status_t saxpy(hk_handle_t *h, int64_t n, const float *alpha, const float *x,
                         int64_t incx, float *y, int64_t incy)
{
    return axpy(h, n, alpha, x, incx, y, incy, sizeof(float), HK__K_SAXPY, "saxpy");
}
static hk_status_t daxpy(hk_handle_t *h, int64_t n, const double *alpha, const double *x,
                         int64_t incx, double *y, int64_t incy)
{
    return axpy(h, n, alpha, x, incx, y, incy, sizeof(double), HK__K_DAXPY, "daxpy");
}
static hk_status_t sscal(hk_handle_t *h, int64_t n, const float *alpha, float *x, int64_t incx)
{
    return scal(h, n, alpha, x, incx, sizeof(float), HK__K_SSCAL, "sscal");
}
static hk_status_t dscal(hk_handle_t *h, int64_t n, const double *alpha, double *x, int64_t incx)
{
    return scal(h, n, alpha, x, incx, sizeof(double), HK__K_DSCAL, "dscal");
}
static hk_status_t scopy(hk_handle_t *h, int64_t n, const float *x, int64_t incx, float *y,
                         int64_t incy)
{
    return copy(h, n, x, incx, y, incy, sizeof(float), HK__K_SCOPY, "scopy");
}
static hk_status_t dcopy(hk_handle_t *h, int64_t n, const double *x, int64_t incx, double *y,
                         int64_t incy)
{
    return copy(h, n, x, incx, y, incy, sizeof(double), HK__K_DCOPY, "dcopy");
}
static hk_status_t sdot(hk_handle_t *h, int64_t n, const float *x, int64_t incx, const float *y,
                        int64_t incy, float *result)
{
    return reduce(h, n, x, incx, y, incy, result, sizeof(float), HK__K_SDOT, "sdot");
}
static hk_status_t ddot(hk_handle_t *h, int64_t n, const double *x, int64_t incx,
                        const double *y, int64_t incy, double *result)
{
    return reduce(h, n, x, incx, y, incy, result, sizeof(double), HK__K_DDOT, "ddot");
}
static hk_status_t snrm2(hk_handle_t *h, int64_t n, const float *x, int64_t incx, float *result)
{
    return reduce(h, n, x, incx, NULL, 0, result, sizeof(float), HK__K_SNRM2, "snrm2");
}
static hk_status_t dnrm2(hk_handle_t *h, int64_t n, const double *x, int64_t incx,
                         double *result)
{
    return reduce(h, n, x, incx, NULL, 0, result, sizeof(double), HK__K_DNRM2, "dnrm2");
}

const hk_blas1_v1_t hkc_blas1_table = {
    .size = sizeof(hk_blas1_v1_t),
    .saxpy = saxpy, .daxpy = daxpy,
    .sscal = sscal, .dscal = dscal,
    .scopy = scopy, .dcopy = dcopy,
    .sdot = sdot,   .ddot = ddot,
    .snrm2 = snrm2, .dnrm2 = dnrm2,
};
