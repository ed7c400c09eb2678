/* hk-cuda blas1 across threads and streams (docs/targets.md R10): 8 threads
 * on one handle whose stream is the per-thread default stream, the legacy
 * stream, or whichever stream another thread just set; and 8 threads with a
 * handle and a stream each. Every result of every call is checked, against a
 * host reference and, for reductions, bit for bit against the same call in
 * the first round (the reductions are deterministic for a given length).
 * Runs on the simulated driver in CI, which interleaves the blocks of
 * reductions on different streams as a GPU does, and unchanged on a GPU. */
#include <cuda.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_test.h"
#include "test_cuda_blas1.h"

#define NTHREADS 8

static const hkct_plugin_t *plug;
static int on_sim;
static CUcontext p0; /* device 0's primary, which the handles here use */

#define OK(call) CU_ASSERT_EQUAL_FATAL((call), CUDA_SUCCESS)

/* ---- one worker's vectors and results ---- */

enum kind {
    K_PER_THREAD, /* one handle, CU_STREAM_PER_THREAD: every thread its own stream */
    K_LEGACY,     /* one handle, the legacy stream, shared by every thread */
    K_OWN,        /* a handle and a stream per thread */
    K_RACING      /* one handle; each thread sets its own stream before each call */
};

typedef struct worker {
    enum kind kind;
    int index;
    hk_handle_t *h;
    CUstream stream; /* K_OWN, K_RACING: the thread's stream */
    int64_t n;
    int rounds;
    pthread_barrier_t *bar;
    /* host copies */
    float *fx, *fy0;
    double *dx, *dy0;
    /* device memory (through the handle's memory table) */
    void *d_fx, *d_fy0, *d_fy, *d_fz, *d_dx, *d_dy0, *d_dy, *d_dz;
    void *d_scalars; /* float a1, a2; double a1, a2 */
    void *d_fres, *d_dres;
    int errors;
    char why[200];
} worker_t;

static const float FA1 = 0.75f, FA2 = -1.5f;
static const double DA1 = 0.75, DA2 = -1.5;

static void fail(worker_t *w, const char *what, hk_status_t st)
{
    if (w->errors++ == 0)
        snprintf(w->why, sizeof w->why, "thread %d: %s: status %d: %s", w->index, what, (int)st,
                 plug->vt->last_error(w->h));
}

#define CALL(w, what, expr)                                                    \
    do {                                                                       \
        hk_status_t st_ = (expr);                                              \
        if (st_ != HK_STATUS_OK)                                               \
            fail((w), (what), st_);                                            \
    } while (0)

static void *dev_alloc(worker_t *w, size_t bytes)
{
    void *p = NULL;
    CALL(w, "alloc", plug->mem->alloc(w->h, bytes, &p));
    return p;
}

static int setup(worker_t *w)
{
    const int64_t n = w->n;
    size_t fb = (size_t)n * sizeof(float), db = (size_t)n * sizeof(double);
    int per_round = w->kind == K_RACING ? 2 : 3;
    w->fx = malloc(fb);
    w->fy0 = malloc(fb);
    w->dx = malloc(db);
    w->dy0 = malloc(db);
    if (!w->fx || !w->fy0 || !w->dx || !w->dy0) {
        fail(w, "host memory", HK_STATUS_OUT_OF_MEMORY);
        return -1;
    }
    hkct_fill_float(w->fx, (size_t)n, 100u + (unsigned)w->index);
    hkct_fill_float(w->fy0, (size_t)n, 200u + (unsigned)w->index);
    hkct_fill_double(w->dx, (size_t)n, 300u + (unsigned)w->index);
    hkct_fill_double(w->dy0, (size_t)n, 400u + (unsigned)w->index);
    w->d_fx = dev_alloc(w, fb);
    w->d_fy0 = dev_alloc(w, fb);
    w->d_fy = dev_alloc(w, fb);
    w->d_fz = dev_alloc(w, fb);
    w->d_dx = dev_alloc(w, db);
    w->d_dy0 = dev_alloc(w, db);
    w->d_dy = dev_alloc(w, db);
    w->d_dz = dev_alloc(w, db);
    w->d_scalars = dev_alloc(w, 32);
    w->d_fres = dev_alloc(w, (size_t)per_round * w->rounds * sizeof(float));
    w->d_dres = dev_alloc(w, (size_t)per_round * w->rounds * sizeof(double));
    if (w->errors)
        return -1;
    unsigned char sc[32];
    memcpy(sc, &FA1, 4);
    memcpy(sc + 4, &FA2, 4);
    memcpy(sc + 16, &DA1, 8);
    memcpy(sc + 24, &DA2, 8);
    CALL(w, "upload", plug->mem->copy_to_device(w->h, w->d_scalars, sc, sizeof sc));
    CALL(w, "upload", plug->mem->copy_to_device(w->h, w->d_fx, w->fx, fb));
    CALL(w, "upload", plug->mem->copy_to_device(w->h, w->d_fy0, w->fy0, fb));
    CALL(w, "upload", plug->mem->copy_to_device(w->h, w->d_dx, w->dx, db));
    CALL(w, "upload", plug->mem->copy_to_device(w->h, w->d_dy0, w->dy0, db));
    return w->errors ? -1 : 0;
}

static void teardown(worker_t *w)
{
    void *bufs[] = {w->d_fx, w->d_fy0, w->d_fy, w->d_fz, w->d_dx, w->d_dy0,
                    w->d_dy, w->d_dz, w->d_scalars, w->d_fres, w->d_dres};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            CALL(w, "free", plug->mem->free_(w->h, bufs[i]));
    free(w->fx);
    free(w->fy0);
    free(w->dx);
    free(w->dy0);
}

/* One round of every op, each result in its own slot; y is rebuilt from y0
 * first, so every round computes the same numbers:
 *   y = y0; y += a1 x; r0 = x.y; r1 = |y|; y *= a2; z = y; r2 = z.x */
static void round_all_ops(worker_t *w, int k)
{
    const int64_t n = w->n;
    const hk_blas1_v1_t *b = plug->blas;
    hk_handle_t *h = w->h;
    float *fs = w->d_scalars, *fr = (float *)w->d_fres + 3 * k;
    double *ds = (double *)((char *)w->d_scalars + 16), *dr = (double *)w->d_dres + 3 * k;
    CALL(w, "scopy", b->scopy(h, n, w->d_fy0, 1, w->d_fy, 1));
    CALL(w, "saxpy", b->saxpy(h, n, fs, w->d_fx, 1, w->d_fy, 1));
    CALL(w, "sdot", b->sdot(h, n, w->d_fx, 1, w->d_fy, 1, fr));
    CALL(w, "snrm2", b->snrm2(h, n, w->d_fy, 1, fr + 1));
    CALL(w, "sscal", b->sscal(h, n, fs + 1, w->d_fy, 1));
    CALL(w, "scopy", b->scopy(h, n, w->d_fy, 1, w->d_fz, 1));
    CALL(w, "sdot", b->sdot(h, n, w->d_fz, 1, w->d_fx, 1, fr + 2));
    CALL(w, "dcopy", b->dcopy(h, n, w->d_dy0, 1, w->d_dy, 1));
    CALL(w, "daxpy", b->daxpy(h, n, ds, w->d_dx, 1, w->d_dy, 1));
    CALL(w, "ddot", b->ddot(h, n, w->d_dx, 1, w->d_dy, 1, dr));
    CALL(w, "dnrm2", b->dnrm2(h, n, w->d_dy, 1, dr + 1));
    CALL(w, "dscal", b->dscal(h, n, ds + 1, w->d_dy, 1));
    CALL(w, "dcopy", b->dcopy(h, n, w->d_dy, 1, w->d_dz, 1));
    CALL(w, "ddot", b->ddot(h, n, w->d_dz, 1, w->d_dx, 1, dr + 2));
}

/* K_RACING: the handle's stream is whatever some thread set last, so only
 * calls that do not depend on each other's order: r0 = x.y0, r1 = |x|, z = x. */
static void round_racing(worker_t *w, int k)
{
    const int64_t n = w->n;
    const hk_blas1_v1_t *b = plug->blas;
    hk_handle_t *h = w->h;
    float *fr = (float *)w->d_fres + 2 * k;
    double *dr = (double *)w->d_dres + 2 * k;
#define RACE(what, expr)                                                       \
    do {                                                                       \
        CALL(w, "set_stream", plug->vt->set_stream(h, w->stream));            \
        CALL(w, what, expr);                                                   \
    } while (0)
    RACE("sdot", b->sdot(h, n, w->d_fx, 1, w->d_fy0, 1, fr));
    RACE("snrm2", b->snrm2(h, n, w->d_fx, 1, fr + 1));
    RACE("scopy", b->scopy(h, n, w->d_fx, 1, w->d_fz, 1));
    RACE("ddot", b->ddot(h, n, w->d_dx, 1, w->d_dy0, 1, dr));
    RACE("dnrm2", b->dnrm2(h, n, w->d_dx, 1, dr + 1));
    RACE("dcopy", b->dcopy(h, n, w->d_dx, 1, w->d_dz, 1));
#undef RACE
}

/* The reference values of one round, in double. */
static void reference(const worker_t *w, int dbl, double want[3], double mag[3], double *z_scale)
{
    double s0 = 0, s1 = 0, s2 = 0, m0 = 0, m2 = 0;
    const double a1 = dbl ? DA1 : FA1, a2 = dbl ? DA2 : FA2;
    for (int64_t i = 0; i < w->n; i++) {
        double x = dbl ? w->dx[i] : w->fx[i], y0 = dbl ? w->dy0[i] : w->fy0[i];
        if (w->kind == K_RACING) {
            s0 += x * y0;
            m0 += fabs(x * y0);
            s1 += x * x;
            continue;
        }
        double y = y0 + a1 * x;
        s0 += x * y;
        m0 += fabs(x * y);
        s1 += y * y;
        s2 += a2 * y * x;
        m2 += fabs(a2 * y * x);
    }
    want[0] = s0;
    want[1] = sqrt(s1);
    want[2] = s2;
    mag[0] = m0;
    mag[1] = want[1];
    mag[2] = m2;
    *z_scale = a2;
}

static double get(const void *v, int dbl, int64_t i)
{
    return dbl ? ((const double *)v)[i] : (double)((const float *)v)[i];
}

/* Reads the results back (after the thread's work is complete) and checks
 * them: every round equal to round 0, bit for bit, and round 0 to the
 * reference; z against the reference. */
static void check(worker_t *w)
{
    const int per = w->kind == K_RACING ? 2 : 3;
    for (int dbl = 0; dbl < 2; dbl++) {
        const size_t esz = dbl ? sizeof(double) : sizeof(float);
        const double eps = dbl ? 0x1p-52 : 0x1p-23;
        size_t rb = (size_t)per * w->rounds * esz, zb = (size_t)w->n * esz;
        unsigned char *res = malloc(rb), *z = malloc(zb);
        if (!res || !z) {
            fail(w, "host memory", HK_STATUS_OUT_OF_MEMORY);
            free(res);
            free(z);
            return;
        }
        /* (CUnit's assertions are not for threads: errors are counted here.) */
        if (cuMemcpyDtoH(res, (CUdeviceptr)(uintptr_t)(dbl ? w->d_dres : w->d_fres), rb) !=
                CUDA_SUCCESS ||
            cuMemcpyDtoH(z, (CUdeviceptr)(uintptr_t)(dbl ? w->d_dz : w->d_fz), zb) !=
                CUDA_SUCCESS) {
            fail(w, "cuMemcpyDtoH", HK_STATUS_CUDA_ERROR);
            free(res);
            free(z);
            return;
        }
        double want[3], mag[3], zs;
        reference(w, dbl, want, mag, &zs);
        int bad_rounds = 0;
        for (int k = 1; k < w->rounds; k++)
            bad_rounds += memcmp(res, res + (size_t)k * per * esz, (size_t)per * esz) != 0;
        for (int j = 0; j < per; j++) {
            double got = get(res, dbl, j), tol = (8 * eps + (double)w->n * 0x1p-52) * mag[j];
            if (!(fabs(got - want[j]) <= tol)) {
                if (w->errors++ == 0)
                    snprintf(w->why, sizeof w->why, "thread %d, %s result %d: got %.17g, want "
                             "%.17g", w->index, dbl ? "double" : "float", j, got, want[j]);
            }
        }
        if (bad_rounds && w->errors++ == 0)
            snprintf(w->why, sizeof w->why, "thread %d, %s: %d of %d rounds differ from the "
                     "first", w->index, dbl ? "double" : "float", bad_rounds, w->rounds);
        int64_t bad_z = 0;
        for (int64_t i = 0; i < w->n; i++) {
            double x = dbl ? w->dx[i] : w->fx[i], y0 = dbl ? w->dy0[i] : w->fy0[i];
            double a1 = dbl ? DA1 : FA1;
            double ref = w->kind == K_RACING ? x : zs * (y0 + a1 * x);
            bad_z += !(fabs(get(z, dbl, i) - ref) <= 8 * eps * (fabs(ref) + 1.0));
        }
        if (bad_z && w->errors++ == 0)
            snprintf(w->why, sizeof w->why, "thread %d, %s: %lld elements of z wrong", w->index,
                     dbl ? "double" : "float", (long long)bad_z);
        free(res);
        free(z);
    }
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    int ok = cuCtxSetCurrent(p0) == CUDA_SUCCESS;
    if (!ok)
        fail(w, "cuCtxSetCurrent", HK_STATUS_CUDA_ERROR);
    if (ok && w->kind == K_OWN) {
        hk_create_info_t ci = {sizeof ci, 0, 0};
        hk_status_t st = plug->vt->handle_create(&ci, &w->h);
        if (st == HK_STATUS_OK)
            st = plug->vt->set_stream(w->h, w->stream);
        if (st == HK_STATUS_OK)
            st = plug->vt->set_pointer_mode(w->h, HK_POINTER_MODE_DEVICE);
        if (st != HK_STATUS_OK)
            fail(w, "own handle", st);
        ok = st == HK_STATUS_OK;
    }
    /* K_RACING sets up on the stream it is about to race on. */
    if (ok && w->kind == K_RACING)
        CALL(w, "set_stream", plug->vt->set_stream(w->h, w->stream));
    ok = ok && setup(w) == 0;
    if (w->kind == K_RACING)
        cuCtxSynchronize(); /* the uploads may have gone to any thread's stream */
    for (int k = 0; k < w->rounds; k++) {
        /* lock-step, so that every thread's calls overlap with the others' */
        pthread_barrier_wait(w->bar);
        if (!ok)
            continue;
        if (w->kind == K_RACING)
            round_racing(w, k);
        else
            round_all_ops(w, k);
    }
    pthread_barrier_wait(w->bar);
    if (ok && cuCtxSynchronize() != CUDA_SUCCESS)
        fail(w, "cuCtxSynchronize", HK_STATUS_CUDA_ERROR);
    else if (ok)
        check(w);
    teardown(w);
    if (w->kind == K_OWN && w->h)
        CALL(w, "destroy", plug->vt->handle_destroy(w->h));
    cuCtxSetCurrent(NULL);
    return NULL;
}

/* Runs NTHREADS workers of one kind and asserts that each got every result
 * right. */
static void run_kind(enum kind kind)
{
    worker_t w[NTHREADS];
    pthread_t t[NTHREADS];
    CUstream streams[NTHREADS] = {0};
    pthread_barrier_t bar;
    hk_handle_t *shared = NULL;
    CUdevice dev;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&p0, dev));
    OK(cuCtxPushCurrent(p0));
    if (kind != K_OWN) {
        hk_create_info_t ci = {sizeof ci, 0, 0};
        CU_ASSERT_EQUAL_FATAL(plug->vt->handle_create(&ci, &shared), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug->vt->set_pointer_mode(shared, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug->vt->set_stream(shared, kind == K_PER_THREAD ? CU_STREAM_PER_THREAD
                                                                           : NULL),
                        HK_STATUS_OK);
    }
    if (kind == K_OWN || kind == K_RACING)
        for (int i = 0; i < NTHREADS; i++)
            OK(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
    CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&bar, NULL, NTHREADS), 0);
    for (int i = 0; i < NTHREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].kind = kind;
        w[i].index = i;
        w[i].h = shared;
        w[i].stream = streams[i];
        w[i].n = on_sim ? (INT64_C(1) << 16) + 3 : (INT64_C(1) << 20) + 3;
        w[i].rounds = on_sim ? 4 : 100;
        w[i].bar = &bar;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    int errors = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        if (w[i].errors)
            printf("\n  %s", w[i].why);
        errors += w[i].errors;
    }
    CU_ASSERT_EQUAL(errors, 0);
    pthread_barrier_destroy(&bar);
    if (shared) {
        CU_ASSERT_EQUAL(plug->vt->set_stream(shared, NULL), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug->vt->handle_destroy(shared), HK_STATUS_OK);
    }
    for (int i = 0; i < NTHREADS; i++)
        if (streams[i])
            OK(cuStreamDestroy(streams[i]));
    CUcontext popped;
    OK(cuCtxPopCurrent(&popped));
    OK(cuDevicePrimaryCtxRelease(dev));
}

/* Each kernel reads what the one before it in the stream wrote, alpha
 * included: the kernels are launched allowing the next one to start early
 * (programmatic serialization), so only their wait keeps this right. With
 * x = 1 and y0 = z0 = 0, round k (1..K) does y += x (alpha 1), a = x.y = n k,
 * z += a x; at the end y = K and z = n K (K + 1) / 2 exactly in float (n a
 * power of two). The rounds are queued back to back, nothing waits between. */
static void t_dependent_chain(void)
{
    const int64_t n = on_sim ? INT64_C(1) << 14 : INT64_C(1) << 20;
    const int K = 16;
    const size_t bytes = (size_t)n * sizeof(float);
    CUdevice dev;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&p0, dev));
    hk_create_info_t ci = {sizeof ci, 0, 0};
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(plug->vt->handle_create(&ci, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    float *hx = malloc(bytes), one = 1.0f;
    void *x = NULL, *y = NULL, *z = NULL, *a = NULL, *d_one = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(hx);
    for (int64_t i = 0; i < n; i++)
        hx[i] = 1.0f;
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, bytes, &x), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, bytes, &y), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, bytes, &z), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, (size_t)K * sizeof(float), &a), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, sizeof one, &d_one), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->copy_to_device(h, x, hx, bytes), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->copy_to_device(h, d_one, &one, sizeof one), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->memset_(h, y, 0, bytes), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->memset_(h, z, 0, bytes), HK_STATUS_OK);
    const hk_blas1_v1_t *b = plug->blas;
    for (int k = 0; k < K; k++) {
        float *ak = (float *)a + k;
        CU_ASSERT_EQUAL(b->saxpy(h, n, d_one, x, 1, y, 1), HK_STATUS_OK);
        CU_ASSERT_EQUAL(b->sdot(h, n, x, 1, y, 1, ak), HK_STATUS_OK);
        CU_ASSERT_EQUAL(b->saxpy(h, n, ak, x, 1, z, 1), HK_STATUS_OK);
    }
    float ha[16], *hy = malloc(bytes), *hz = hx;
    CU_ASSERT_PTR_NOT_NULL_FATAL(hy);
    CU_ASSERT_EQUAL(plug->mem->copy_to_host(h, ha, a, sizeof ha), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->copy_to_host(h, hy, y, bytes), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->copy_to_host(h, hz, z, bytes), HK_STATUS_OK);
    int64_t bad_a = 0, bad_y = 0, bad_z = 0;
    for (int k = 0; k < K; k++)
        bad_a += ha[k] != (float)(n * (k + 1));
    for (int64_t i = 0; i < n; i++) {
        bad_y += hy[i] != (float)K;
        bad_z += hz[i] != (float)(n * K * (K + 1) / 2);
    }
    CU_ASSERT_EQUAL(bad_a, 0);
    CU_ASSERT_EQUAL(bad_y, 0);
    CU_ASSERT_EQUAL(bad_z, 0);
    void *bufs[] = {x, y, z, a, d_one};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        CU_ASSERT_EQUAL(plug->mem->free_(h, bufs[i]), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->vt->handle_destroy(h), HK_STATUS_OK);
    free(hx);
    free(hy);
    OK(cuDevicePrimaryCtxRelease(dev));
}

static void t_per_thread_stream(void)
{
    run_kind(K_PER_THREAD);
}

static void t_legacy_stream(void)
{
    run_kind(K_LEGACY);
}

static void t_handle_per_thread(void)
{
    run_kind(K_OWN);
}

static void t_racing_set_stream(void)
{
    run_kind(K_RACING);
}

int blas1_register_streams(const hkct_plugin_t *p, const char *skip)
{
    plug = p;
    on_sim = dlsym(RTLD_DEFAULT, "simcuda_is_simulated") != NULL;
    if (!skip && cuInit(0) != CUDA_SUCCESS)
        skip = "cuInit failed";
    CU_pSuite s = hk_test_suite("hk-cuda blas1 across threads and streams", NULL, NULL);
    struct {
        const char *name;
        CU_TestFunc fn;
    } t[] = {
        {"8 threads, one handle on the per-thread stream, every op", t_per_thread_stream},
        {"8 threads, one handle on the legacy stream, every op", t_legacy_stream},
        {"8 threads, a handle and a stream each, every op", t_handle_per_thread},
        {"8 threads, one handle, each setting its own stream before every call",
         t_racing_set_stream},
        {"a chain of ops each reading the last one's output, alpha included, back to back",
         t_dependent_chain},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        hk_test_add_or_skip(s, t[i].name, t[i].fn, skip);
    return blas1_register_contexts(p, skip);
}
