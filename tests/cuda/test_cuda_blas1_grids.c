/* The eight reduction kernels of kernels/hk_blas1_reduce.cu, launched raw
 * from the fatbin hk-cuda embeds, on every grid their header allows the
 * last block to meet: 1 block, the edges of each 256 partials a thread of
 * the last block loads (255 - 257, 511 - 513, 767 - 769) and the largest,
 * 1024. hk-cuda itself launches at most 4 blocks per SM, so on one GPU the
 * partials past 512 are never read through it. Every block gets elements
 * (n = 2^20 + 3), the values are small integers whose sums are exact in
 * double, so the result must equal the host's exactly whatever the order,
 * and the counter must be back at 0 after each launch. The general kernels
 * run on x one element past a 16-byte boundary (their alignment head), the
 * aligned ones on aligned vectors with a scalar tail. Runs on the simulated
 * driver in CI, whose emulation runs the kernels block by block, and
 * unchanged on a GPU. */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_test.h"
#include "test_cuda_blas1.h"

extern const unsigned char hk__blas1_fatbin[];

#define OK(call) CU_ASSERT_EQUAL_FATAL((call), CUDA_SUCCESS)

/* Elements per run; the vectors hold one more, so a run can start at 1. */
#define N ((1LL << 20) + 3)

static const unsigned grids[] = {1, 255, 256, 257, 511, 512, 513, 767, 768, 769, 1024};

/* Small integers: every product and square, and every sum of N of them, is
 * exact in double, and the dot is small enough to be exact in float too. */
static double xval(long long i)
{
    return (double)(i % 7 - 3);
}
static double yval(long long i)
{
    return (double)(i % 5 - 2);
}

/* A device vector of N + 1 floats or doubles, element i holding f(i). */
static CUdeviceptr upload(double (*f)(long long), int dbl)
{
    size_t esz = dbl ? sizeof(double) : sizeof(float), bytes = (size_t)(N + 1) * esz;
    unsigned char *h = malloc(bytes);
    CUdeviceptr d = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    for (long long i = 0; i <= N; i++) {
        if (dbl)
            ((double *)h)[i] = f(i);
        else
            ((float *)h)[i] = (float)f(i);
    }
    if (cuMemAlloc(&d, bytes) == CUDA_SUCCESS && cuMemcpyHtoD(d, h, bytes) != CUDA_SUCCESS) {
        (void)cuMemFree(d);
        d = 0;
    }
    free(h);
    CU_ASSERT_FATAL(d != 0);
    return d;
}

typedef struct kernel {
    const char *name;
    int dbl, dot, aligned;
} kernel_t;

static const kernel_t kernels[] = {
    {"hk_sdot_kernel", 0, 1, 0},          {"hk_ddot_kernel", 1, 1, 0},
    {"hk_snrm2_kernel", 0, 0, 0},         {"hk_dnrm2_kernel", 1, 0, 0},
    {"hk_sdot_aligned_kernel", 0, 1, 1},  {"hk_ddot_aligned_kernel", 1, 1, 1},
    {"hk_snrm2_aligned_kernel", 0, 0, 1}, {"hk_dnrm2_aligned_kernel", 1, 0, 1},
};

/* What kernel k must return over elements [from, from + N), in its precision. */
static double want(const kernel_t *k, long long from)
{
    double s = 0.0;
    for (long long i = from; i < from + N; i++)
        s += k->dot ? xval(i) * yval(i) : xval(i) * xval(i);
    double r = k->dot ? s : sqrt(s);
    return k->dbl ? r : (double)(float)r;
}

typedef struct gpu {
    CUstream stream;
    CUdeviceptr x[2], y[2]; /* [dbl] */
    CUdeviceptr partials, counter, result;
} gpu_t;

/* Two launches of fn back to back on grid blocks (the second finds the
 * partials and counter the first left), then its result and the counter. */
static CUresult run(const gpu_t *g, const kernel_t *k, CUfunction fn, unsigned grid,
                    double *got, unsigned *counter)
{
    const long long from = k->aligned ? 0 : 1; /* 1: 4 or 8 bytes off 16 */
    size_t esz = k->dbl ? sizeof(double) : sizeof(float);
    CUdeviceptr x = g->x[k->dbl] + (CUdeviceptr)from * esz;
    CUdeviceptr y = g->y[k->dbl] + (CUdeviceptr)from * esz;
    CUdeviceptr partials = g->partials, cnt = g->counter, result = g->result;
    long long n = N, inc = 1;
    void *dot_params[] = {&n, &x, &inc, &y, &inc, &partials, &cnt, &result};
    void *nrm_params[] = {&n, &x, &inc, &partials, &cnt, &result};
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < 2 && r == CUDA_SUCCESS; i++)
        r = cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, g->stream,
                           k->dot ? dot_params : nrm_params, NULL);
    if (r == CUDA_SUCCESS)
        r = cuStreamSynchronize(g->stream);
    if (r == CUDA_SUCCESS && k->dbl)
        r = cuMemcpyDtoH(got, result, sizeof *got);
    if (r == CUDA_SUCCESS && !k->dbl) {
        float f = 0.0f;
        r = cuMemcpyDtoH(&f, result, sizeof f);
        *got = f;
    }
    if (r == CUDA_SUCCESS)
        r = cuMemcpyDtoH(counter, cnt, sizeof *counter);
    return r;
}

static void t_grids(void)
{
    CUdevice dev;
    CUcontext ctx = NULL;
    CUmodule mod = NULL;
    gpu_t g;
    int bad = 0, runs = 0;
    char first[200] = "";

    memset(&g, 0, sizeof g);
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxPushCurrent(ctx));
    OK(cuModuleLoadData(&mod, hk__blas1_fatbin));
    OK(cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING));
    for (int dbl = 0; dbl < 2; dbl++) {
        g.x[dbl] = upload(xval, dbl);
        g.y[dbl] = upload(yval, dbl);
    }
    /* Partials for 1024 blocks of dnrm2 (3 sums each). */
    OK(cuMemAlloc(&g.partials, 3 * 1024 * sizeof(double)));
    OK(cuMemAlloc(&g.counter, sizeof(unsigned)));
    OK(cuMemsetD32(g.counter, 0, 1));
    OK(cuMemAlloc(&g.result, sizeof(double)));

    for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++) {
        const kernel_t *k = &kernels[ki];
        CUfunction fn = NULL;
        double w = want(k, k->aligned ? 0 : 1);
        OK(cuModuleGetFunction(&fn, mod, k->name));
        for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++) {
            double got = NAN;
            unsigned counter = 1u;
            OK(cuMemsetD32(g.result, 0xffffffffu, 2)); /* NaN in either precision */
            OK(run(&g, k, fn, grids[gi], &got, &counter));
            runs++;
            if (got != w || counter != 0) {
                if (bad++ == 0)
                    snprintf(first, sizeof first, "%s on %u blocks: %.17g (want %.17g), counter %u",
                             k->name, grids[gi], got, w, counter);
            }
        }
    }
    if (bad)
        fprintf(stderr, "\n    %d of %d runs wrong; first: %s\n", bad, runs, first);
    CU_ASSERT_EQUAL(bad, 0);

    CU_ASSERT_EQUAL(cuMemFree(g.result), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFree(g.counter), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFree(g.partials), CUDA_SUCCESS);
    for (int dbl = 0; dbl < 2; dbl++) {
        CU_ASSERT_EQUAL(cuMemFree(g.x[dbl]), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(cuMemFree(g.y[dbl]), CUDA_SUCCESS);
    }
    CU_ASSERT_EQUAL(cuStreamDestroy(g.stream), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuModuleUnload(mod), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuCtxPopCurrent(NULL), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
}

int blas1_register_grids(const char *skip)
{
    CU_pSuite s = hk_test_suite("hk-cuda reduction kernels, raw, on every grid size", NULL, NULL);
    hk_test_add_or_skip(
        s, "the 8 reduction kernels on 1 to 1024 blocks: exact sums, counter back at 0",
        t_grids, skip);
    return 0;
}
