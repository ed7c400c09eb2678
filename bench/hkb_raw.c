/* hk-bench: raw launches of hk-cuda's own kernels, the reference of P3 and P5.
 *
 * The reference is the least any library can do for the same work: a raw
 * cuLaunchKernel of the very kernel hk-cuda launches, taken from the same
 * fatbin (embedded here as hk__bench_fatbin), with the same parameters, grid
 * and block. The launch configuration below mirrors what kernels/hk_blas1.cu
 * and kernels/hk_blas1_reduce.cu document and what grid_for() in
 * plugin/cuda/hkc_blas1.c computes; if hk-cuda changes its grid, change it
 * here too, or the ratio compares different launches. hkb_fig_enqueue checks
 * a reduction's raw result against cuBLAS, which catches a parameter list
 * that no longer matches. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "hkb.h"

#define BLOCK 256       /* HK_BLAS1_BLOCK */
#define MAX_BLOCKS 1024 /* HK_BLAS1_MAX_BLOCKS, reductions only */

extern const unsigned char hk__bench_fatbin[];

/* Driver entry points, taken through the runtime so that the program does not
 * need libcuda.so.1 to start (it reports the missing driver instead). */
static struct {
    PFN_cuLibraryLoadData_v12000 library_load;
    PFN_cuLibraryGetKernel_v12000 library_get_kernel;
    PFN_cuKernelGetFunction_v12000 kernel_get_function;
    PFN_cuLaunchKernel_v4000 launch;
    PFN_cuLaunchKernelEx_v11060 launch_ex;
    PFN_cuGetErrorName_v6000 error_name;
    CUlibrary lib; /* loaded once, kept until exit */
} drv;

static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;

int hkb_raw_entry(const char *name, int version, void **fn)
{
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    HKB_CUDA(cudaGetDriverEntryPointByVersion(name, fn, version, cudaEnableDefault, &q), fail);
    if (q != cudaDriverEntryPointSuccess || !*fn)
        return hkb_fail("driver entry point %s not found (query result %d)", name, (int)q);
    return 0;
fail:
    return -1;
}

static int drv_sym(const char *name, void **fn)
{
    return hkb_raw_entry(name, 12000, fn);
}

int hkb_raw_cu_ok(int r, const char *what)
{
    const char *name = NULL;
    if (r == CUDA_SUCCESS)
        return 0;
    if (!drv.error_name || drv.error_name((CUresult)r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUresult";
    return hkb_fail("%s: %s (%d)", what, name, r);
}

int hkb_raw_init(void)
{
    int rc = -1;
    pthread_mutex_lock(&drv_lock);
    if (drv.lib) {
        rc = 0;
        goto out;
    }
    HKB_TRY(drv_sym("cuLibraryLoadData", (void **)&drv.library_load), out);
    HKB_TRY(drv_sym("cuLibraryGetKernel", (void **)&drv.library_get_kernel), out);
    HKB_TRY(drv_sym("cuKernelGetFunction", (void **)&drv.kernel_get_function), out);
    HKB_TRY(drv_sym("cuLaunchKernel", (void **)&drv.launch), out);
    HKB_TRY(drv_sym("cuLaunchKernelEx", (void **)&drv.launch_ex), out);
    HKB_TRY(drv_sym("cuGetErrorName", (void **)&drv.error_name), out);
    HKB_TRY(hkb_raw_cu_ok(drv.library_load(&drv.lib, hk__bench_fatbin, NULL, NULL, 0, NULL, NULL,
                                           0),
                          "cuLibraryLoadData(embedded kernels fatbin)"),
            out);
    rc = 0;
out:
    pthread_mutex_unlock(&drv_lock);
    return rc;
}

int hkb_raw_scratch_alloc(hkb_raw_scratch_t *s, float alpha_f, double alpha_d)
{
    memset(s, 0, sizeof *s);
    HKB_CUDA(cudaMalloc((void **)&s->base, HKB_RAW_SCRATCH_BYTES), fail);
    s->alpha_f = (float *)s->base;
    s->alpha_d = (double *)(s->base + 8);
    s->result = s->base + 16;
    s->counter = (unsigned int *)(s->base + 24);
    s->partials = (double *)(s->base + 64);
    HKB_CUDA(cudaMemset(s->base, 0, HKB_RAW_SCRATCH_BYTES), fail);
    HKB_CUDA(cudaMemcpy(s->alpha_f, &alpha_f, sizeof alpha_f, cudaMemcpyHostToDevice), fail);
    HKB_CUDA(cudaMemcpy(s->alpha_d, &alpha_d, sizeof alpha_d, cudaMemcpyHostToDevice), fail);
    return 0;
fail:
    return -1;
}

void hkb_raw_scratch_free(hkb_raw_scratch_t *s)
{
    if (s->base)
        (void)hkb__cuda_ok(cudaFree(s->base), "cudaFree", __FILE__, __LINE__);
    s->base = NULL;
}

static unsigned grid_for(hkb_op_t op, hkb_prec_t prec, int64_t n, int sms, int aligned)
{
    /* Elements per thread on the unit-stride path: 16 float, 8 double. */
    int64_t k = prec == HKB_F32 ? 16 : 8;
    int64_t g = (n + BLOCK * k - 1) / (BLOCK * k);
    /* Only reductions are capped (4 blocks per SM, 2 for the _aligned dot
     * kernels, MAX_BLOCKS), as hk-cuda caps them; elementwise kernels take
     * one pass over n. */
    int64_t per_sm = aligned && op == HKB_DOT ? 2 : 4;
    if (hkb_op_is_reduction(op) && g > per_sm * sms)
        g = per_sm * sms;
    if (hkb_op_is_reduction(op) && g > MAX_BLOCKS)
        g = MAX_BLOCKS;
    return g < 1 ? 1u : (unsigned)g;
}

/* Parameter lists as the kernels declare them (kernels/hk_blas1*.cu);
 * device pointer mode, so alpha itself is ignored in favour of alpha_ptr. */
static int raw_params(hkb_raw_t *r, hkb_op_t op, int f)
{
    void **p = r->params;

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
}

int hkb_raw_prepare(hkb_raw_t *r, hkb_op_t op, hkb_prec_t prec, int64_t n, const void *x,
                    void *y, const hkb_raw_scratch_t *s, int sms, float alpha_f, double alpha_d)
{
    char name[32];
    CUkernel k = NULL;
    int f = prec == HKB_F32;

    memset(r, 0, sizeof *r);
    /* hk-cuda's reductions on 16-byte aligned unit-stride vectors (these:
     * cudaMalloc'ed) use kernels of their own with the same parameters. */
    int aligned = hkb_op_is_reduction(op) && (((uintptr_t)x | (uintptr_t)y) & 15) == 0;
    snprintf(name, sizeof name, "hk_%c%s%s_kernel", f ? 's' : 'd', hkb_op_name(op),
             aligned ? "_aligned" : "");
    HKB_TRY(hkb_raw_cu_ok(drv.library_get_kernel(&k, drv.lib, name), name), fail);
    /* The CUfunction of the current (the primary) context: what a library
     * that caches per context ends up launching. */
    CUfunction fn = NULL;
    HKB_TRY(hkb_raw_cu_ok(drv.kernel_get_function(&fn, k), "cuKernelGetFunction"), fail);
    r->fn = fn;
    r->op = op;
    r->prec = prec;
    r->grid = grid_for(op, prec, n, sms, aligned);
    r->n = n;
    r->incx = r->incy = 1;
    r->alpha_f = alpha_f;
    r->alpha_d = alpha_d;
    r->alpha_ptr = f ? (const void *)s->alpha_f : (const void *)s->alpha_d;
    r->x = x;
    r->y = y;
    r->partials = s->partials;
    r->counter = s->counter;
    r->result = s->result;
    return raw_params(r, op, f);
fail:
    return -1;
}

int hkb_raw_launch(hkb_raw_t *r, cudaStream_t stream)
{
    CUresult c = drv.launch((CUfunction)r->fn, r->grid, 1, 1, BLOCK, 1, 1, 0, (CUstream)stream,
                            r->params, NULL);
    return c == CUDA_SUCCESS ? 0 : hkb_raw_cu_ok(c, "cuLaunchKernel");
}

int hkb_raw_launch_pdl(hkb_raw_t *r, cudaStream_t stream)
{
    CUlaunchAttribute a = {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                           .value.programmaticStreamSerializationAllowed = 1};
    CUlaunchConfig cfg = {.gridDimX = r->grid, .gridDimY = 1, .gridDimZ = 1,
                          .blockDimX = BLOCK, .blockDimY = 1, .blockDimZ = 1,
                          .hStream = (CUstream)stream, .attrs = &a, .numAttrs = 1};
    CUresult c = drv.launch_ex(&cfg, (CUfunction)r->fn, r->params, NULL);
    return c == CUDA_SUCCESS ? 0 : hkb_raw_cu_ok(c, "cuLaunchKernelEx");
}
