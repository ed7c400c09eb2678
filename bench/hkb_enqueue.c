/* hk-bench: P3, the host cost of enqueueing one op call.
 *
 * The reference is the least any library can do for the same work: a raw
 * cuLaunchKernel of the very kernel hk-cuda launches, taken from the same
 * fatbin (embedded here as hk__bench_fatbin), with the same parameters, grid
 * and block. The launch configuration below mirrors what kernels/hk_blas1.cu
 * and kernels/hk_blas1_reduce.cu document and what grid_for() in
 * plugin/cuda/hkc_blas1.c computes; if hk-cuda changes its grid, change it
 * here too, or the ratio compares different launches. raw_check() catches a
 * parameter list that no longer matches for the reductions.
 *
 * Only the host clock around the enqueue loop counts. Batches of 256 calls
 * stay below the launch queue's depth, so no call waits for the GPU; the
 * stream drains between batches, outside the timed region. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "hkb.h"

#define P3_TARGET 1.05
#define P3_BATCH 256
#define P3_N (INT64_C(1) << 12)
#define BLOCK 256      /* HK_BLAS1_BLOCK */
#define MAX_BLOCKS 1024 /* HK_BLAS1_MAX_BLOCKS, reductions only */

extern const unsigned char hk__bench_fatbin[];

/* Driver entry points, taken through the runtime so that the program does not
 * need libcuda.so.1 to start (it reports the missing driver instead). */
typedef struct drv {
    PFN_cuLibraryLoadData_v12000 library_load;
    PFN_cuLibraryUnload_v12000 library_unload;
    PFN_cuLibraryGetKernel_v12000 library_get_kernel;
    PFN_cuKernelGetFunction_v12000 kernel_get_function;
    PFN_cuLaunchKernel_v4000 launch;
    PFN_cuGetErrorName_v6000 error_name;
} drv_t;

static int drv_sym(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    HKB_CUDA(cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q), fail);
    if (q != cudaDriverEntryPointSuccess || !*fn)
        return hkb_fail("driver entry point %s not found (query result %d)", name, (int)q);
    return 0;
fail:
    return -1;
}

static int drv_load(drv_t *d)
{
    memset(d, 0, sizeof *d);
    HKB_TRY(drv_sym("cuLibraryLoadData", (void **)&d->library_load), fail);
    HKB_TRY(drv_sym("cuLibraryUnload", (void **)&d->library_unload), fail);
    HKB_TRY(drv_sym("cuLibraryGetKernel", (void **)&d->library_get_kernel), fail);
    HKB_TRY(drv_sym("cuKernelGetFunction", (void **)&d->kernel_get_function), fail);
    HKB_TRY(drv_sym("cuLaunchKernel", (void **)&d->launch), fail);
    HKB_TRY(drv_sym("cuGetErrorName", (void **)&d->error_name), fail);
    return 0;
fail:
    return -1;
}

static int cu_ok(const drv_t *d, CUresult r, const char *what)
{
    const char *name = NULL;
    if (r == CUDA_SUCCESS)
        return 0;
    if (!d->error_name || d->error_name(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUresult";
    return hkb_fail("%s: %s (%d)", what, name, (int)r);
}

/* Device scratch of the raw launches: alpha (float, double), the result (one
 * double wide), the reductions' counter, and their partials. */
typedef struct scratch {
    unsigned char *base;
    float *alpha_f;
    double *alpha_d;
    void *result;
    unsigned int *counter;
    double *partials;
} scratch_t;

#define SCRATCH_BYTES (64 + 3 * MAX_BLOCKS * sizeof(double))

/* One raw launch, ready to repeat: function, grid and the parameter array. */
typedef struct raw {
    CUfunction fn;
    unsigned grid;
    long long n, incx, incy;
    float alpha_f;
    double alpha_d;
    const void *alpha_ptr, *x, *y, *partials, *counter, *result;
    void *params[8];
} raw_t;

static unsigned grid_for(hkb_op_t op, hkb_prec_t prec, int64_t n, int sms)
{
    /* Elements per thread on the unit-stride path: 16 float, 8 double. */
    int64_t k = prec == HKB_F32 ? 16 : 8;
    int64_t g = (n + BLOCK * k - 1) / (BLOCK * k);
    /* Only reductions are capped (4 blocks per SM, MAX_BLOCKS); elementwise
     * kernels take one pass over n. */
    if (hkb_op_is_reduction(op) && g > 4 * (int64_t)sms)
        g = 4 * (int64_t)sms;
    if (hkb_op_is_reduction(op) && g > MAX_BLOCKS)
        g = MAX_BLOCKS;
    return g < 1 ? 1u : (unsigned)g;
}

static int raw_prepare(const drv_t *d, CUlibrary lib, raw_t *r, hkb_op_t op, hkb_prec_t prec,
                       int64_t n, const void *x, void *y, const scratch_t *s, int sms)
{
    char name[32];
    CUkernel k = NULL;
    int f = prec == HKB_F32;
    void **p = r->params;

    memset(r, 0, sizeof *r);
    snprintf(name, sizeof name, "hk_%c%s_kernel", f ? 's' : 'd', hkb_op_name(op));
    HKB_TRY(cu_ok(d, d->library_get_kernel(&k, lib, name), name), fail);
    /* The CUfunction of the current (the lane's primary) context: what a
     * library that caches per context ends up launching. */
    HKB_TRY(cu_ok(d, d->kernel_get_function(&r->fn, k), "cuKernelGetFunction"), fail);
    r->grid = grid_for(op, prec, n, sms);
    r->n = n;
    r->incx = r->incy = 1;
    r->alpha_ptr = f ? (const void *)s->alpha_f : (const void *)s->alpha_d;
    r->x = x;
    r->y = y;
    r->partials = s->partials;
    r->counter = s->counter;
    r->result = s->result;
    /* Parameter lists as the kernels declare them (kernels/hk_blas1*.cu);
     * device pointer mode, so alpha itself is ignored in favour of alpha_ptr. */
    switch (op) {
    case HKB_AXPY: /* n, alpha, alpha_ptr, x, incx, y, incy */
        *p++ = &r->n;
        *p++ = f ? (void *)&r->alpha_f : (void *)&r->alpha_d;
        *p++ = &r->alpha_ptr;
        *p++ = &r->x;
        *p++ = &r->incx;
        *p++ = &r->y;
        *p++ = &r->incy;
        break;
    case HKB_SCAL: /* n, alpha, alpha_ptr, x, incx -- scales y, as hkb_call does */
        *p++ = &r->n;
        *p++ = f ? (void *)&r->alpha_f : (void *)&r->alpha_d;
        *p++ = &r->alpha_ptr;
        *p++ = &r->y;
        *p++ = &r->incy;
        break;
    case HKB_COPY: /* n, x, incx, y, incy */
        *p++ = &r->n;
        *p++ = &r->x;
        *p++ = &r->incx;
        *p++ = &r->y;
        *p++ = &r->incy;
        break;
    case HKB_DOT: /* n, x, incx, y, incy, partials, counter, result */
        *p++ = &r->n;
        *p++ = &r->x;
        *p++ = &r->incx;
        *p++ = &r->y;
        *p++ = &r->incy;
        *p++ = &r->partials;
        *p++ = &r->counter;
        *p++ = &r->result;
        break;
    case HKB_NRM2: /* n, x, incx, partials, counter, result */
        *p++ = &r->n;
        *p++ = &r->x;
        *p++ = &r->incx;
        *p++ = &r->partials;
        *p++ = &r->counter;
        *p++ = &r->result;
        break;
    default:
        return hkb_fail("raw launch: unknown op %d", (int)op);
    }
    return 0;
fail:
    return -1;
}

/* Host nanoseconds per call over one batch of P3_BATCH calls through impl
 * (0 raw, 1 hk, 2 cuBLAS). The stream is idle before the clock starts. */
static int batch_ns(const drv_t *d, hkb_lane_t *lane, raw_t *r, int impl, hkb_op_t op,
                    hkb_prec_t prec, const void *x, void *y, double *ns)
{
    double t0, t1;

    HKB_CUDA(cudaStreamSynchronize(lane->stream), fail);
    t0 = hkb_now_ns();
    for (int i = 0; i < P3_BATCH; i++) {
        if (impl == 0) {
            CUresult c = d->launch(r->fn, r->grid, 1, 1, BLOCK, 1, 1, 0, (CUstream)lane->stream,
                                   r->params, NULL);
            if (c != CUDA_SUCCESS)
                return cu_ok(d, c, "cuLaunchKernel");
        } else {
            HKB_TRY(hkb_call(lane, impl == 1 ? HKB_HK : HKB_CUBLAS, op, prec, P3_N, x, y), fail);
        }
    }
    t1 = hkb_now_ns();
    *ns = (t1 - t0) / P3_BATCH;
    return 0;
fail:
    return -1;
}

/* Checks that the raw launch is a working launch of the kernel: it must run,
 * and a reduction must give cuBLAS's result (hkb_verify compares hk itself). */
static int raw_check(const drv_t *d, hkb_lane_t *lane, raw_t *r, hkb_op_t op, hkb_prec_t prec,
                     const scratch_t *s)
{
    CUresult c = d->launch(r->fn, r->grid, 1, 1, BLOCK, 1, 1, 0, (CUstream)lane->stream,
                           r->params, NULL);
    double got = 0.0, want = 0.0;
    int rc = -1;

    HKB_TRY(cu_ok(d, c, "cuLaunchKernel"), fail);
    HKB_CUDA(cudaStreamSynchronize(lane->stream), fail);
    if (!hkb_op_is_reduction(op))
        return 0;
    HKB_CUBLAS(cublasSetPointerMode(lane->cublas, CUBLAS_POINTER_MODE_HOST), restore);
    if (prec == HKB_F32) {
        float g = 0.0f, w = 0.0f;
        HKB_CUDA(cudaMemcpy(&g, s->result, sizeof g, cudaMemcpyDeviceToHost), restore);
        if (op == HKB_DOT)
            HKB_CUBLAS(cublasSdot_64(lane->cublas, r->n, r->x, 1, r->y, 1, &w), restore);
        else
            HKB_CUBLAS(cublasSnrm2_64(lane->cublas, r->n, r->x, 1, &w), restore);
        got = g;
        want = w;
    } else {
        HKB_CUDA(cudaMemcpy(&got, s->result, sizeof got, cudaMemcpyDeviceToHost), restore);
        if (op == HKB_DOT)
            HKB_CUBLAS(cublasDdot_64(lane->cublas, r->n, r->x, 1, r->y, 1, &want), restore);
        else
            HKB_CUBLAS(cublasDnrm2_64(lane->cublas, r->n, r->x, 1, &want), restore);
    }
    if (!(fabs(got - want) <= 1e-4 * fabs(want))) {
        hkb_fail("raw launch of the kernel gave %.9g, cuBLAS %.9g: the bench's launch "
                 "parameters no longer match kernels/hk_blas1*.cu", got, want);
        goto restore;
    }
    rc = 0;
restore:
    if (hkb_lane_set_mode(lane, HK_POINTER_MODE_DEVICE) != 0)
        rc = -1;
    return rc;
fail:
    return -1;
}

int hkb_fig_enqueue(hkb_lane_t *lane, const hkb_opts_t *o)
{
    int reps = o->quick ? 11 : 41, sms = 0, rc = -1;
    size_t vec_bytes = (size_t)P3_N * sizeof(double);
    unsigned char *x = NULL, *y = NULL, *w = NULL, *v = NULL;
    CUlibrary lib = NULL;
    scratch_t s = {0};
    drv_t d;

    hkb_where("P3 set-up");
    HKB_TRY(drv_load(&d), out);
    HKB_CUDA(cudaSetDevice(lane->device), out);
    HKB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, lane->device), out);
    HKB_TRY(cu_ok(&d, d.library_load(&lib, hk__bench_fatbin, NULL, NULL, 0, NULL, NULL, 0),
                  "cuLibraryLoadData(embedded kernels fatbin)"),
            out);
    HKB_CUDA(cudaMalloc((void **)&x, vec_bytes), out);
    HKB_CUDA(cudaMalloc((void **)&y, vec_bytes), out);
    HKB_CUDA(cudaMalloc((void **)&w, vec_bytes), out);
    HKB_CUDA(cudaMalloc((void **)&v, vec_bytes), out);
    HKB_CUDA(cudaMalloc((void **)&s.base, SCRATCH_BYTES), out);
    s.alpha_f = (float *)s.base;
    s.alpha_d = (double *)(s.base + 8);
    s.result = s.base + 16;
    s.counter = (unsigned int *)(s.base + 24);
    s.partials = (double *)(s.base + 64);
    HKB_CUDA(cudaMemset(s.base, 0, SCRATCH_BYTES), out);
    HKB_CUDA(cudaMemcpy(s.alpha_f, &lane->alpha_f, sizeof(float), cudaMemcpyHostToDevice), out);
    HKB_CUDA(cudaMemcpy(s.alpha_d, &lane->alpha_d, sizeof(double), cudaMemcpyHostToDevice), out);
    HKB_TRY(hkb_lane_set_mode(lane, HK_POINTER_MODE_DEVICE), out);

    for (hkb_prec_t prec = 0; prec < HKB_PREC_COUNT; prec++) {
        HKB_TRY(hkb_fill_random(x, prec, P3_N, 3), out);
        HKB_TRY(hkb_fill_random(y, prec, P3_N, 4), out);
        for (hkb_op_t op = 0; op < HKB_OP_COUNT; op++) {
            double t[3][64], med[3], err = NAN;
            raw_t r;
            hkb_row_t row;

            hkb_where("P3 %s %s", hkb_prec_name(prec), hkb_op_name(op));
            HKB_TRY(raw_prepare(&d, lib, &r, op, prec, P3_N, x, y, &s, sms), out);
            r.alpha_f = lane->alpha_f;
            r.alpha_d = lane->alpha_d;
            HKB_TRY(raw_check(&d, lane, &r, op, prec, &s), out);
            HKB_TRY(hkb_verify(lane, op, prec, P3_N, x, y, w, v, &err), out);
            /* Interleaved, so that drift of clocks or of the machine hits the
             * three implementations alike. */
            for (int i = 0; i < reps + 2; i++)
                for (int impl = 0; impl < 3; impl++) {
                    double ns = 0.0;
                    HKB_TRY(batch_ns(&d, lane, &r, impl, op, prec, x, y, &ns), out);
                    if (i >= 2) /* two warm-up batches */
                        t[impl][i - 2] = ns;
                }
            for (int impl = 0; impl < 3; impl++)
                med[impl] = hkb_median(t[impl], (size_t)reps);
            hkb_row_set(&row, "P3", hkb_op_name(op), hkb_prec_name(prec), P3_N, "ns", med[1],
                        med[0], HKB_TARGET_RATIO_LE, P3_TARGET);
            row.cublas = med[2] / med[0];
            row.err = err;
            snprintf(row.note, sizeof row.note, "hk %+.0f ns vs raw; ptr dev", med[1] - med[0]);
            HKB_TRY(hkb_report_add(&row), out);
        }
    }
    hkb_where("%s", "");
    rc = 0;
out:
    (void)hkb__cuda_ok(cudaStreamSynchronize(lane->stream), "cudaStreamSynchronize", __FILE__,
                       __LINE__);
    if (lib)
        (void)cu_ok(&d, d.library_unload(lib), "cuLibraryUnload");
    if (s.base)
        (void)hkb__cuda_ok(cudaFree(s.base), "cudaFree", __FILE__, __LINE__);
    unsigned char *bufs[4] = {x, y, w, v};
    for (int i = 0; i < 4; i++)
        if (bufs[i])
            (void)hkb__cuda_ok(cudaFree(bufs[i]), "cudaFree", __FILE__, __LINE__);
    return rc;
}
