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

/* ---- helpers for the single-thread tests below ---- */

/* Asserts that an hk call on h returned want, printing the status and the
 * handle's last error otherwise (so a run on a GPU says what went wrong). */
static int hk_expect(hk_handle_t *h, hk_status_t got, hk_status_t want, const char *call,
                     int line)
{
    if (got != want)
        printf("\n  line %d: %s: status %d (want %d): %s\n", line, call, (int)got, (int)want,
               plug->vt->last_error(h));
    CU_ASSERT_EQUAL(got, want);
    return got == want;
}
#define HK_EXPECT(h, call, want) hk_expect((h), (call), (want), #call, __LINE__)
#define HK_OK(h, call) HK_EXPECT(h, call, HK_STATUS_OK)

/* Asserts that a driver call succeeded, printing its error name otherwise. */
static int cu_ok(CUresult r, const char *call, int line)
{
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        cuGetErrorName(r, &name);
        printf("\n  line %d: %s: %d (%s)\n", line, call, (int)r, name ? name : "?");
    }
    CU_ASSERT_EQUAL(r, CUDA_SUCCESS);
    return r == CUDA_SUCCESS;
}
#define CU_OK(call) cu_ok((call), #call, __LINE__)

static CUcontext current(void)
{
    CUcontext c = NULL;
    CU_ASSERT_EQUAL(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    return c;
}

static hk_handle_t *create_on(int device)
{
    hk_create_info_t ci = {sizeof ci, device, 0};
    hk_handle_t *h = NULL;
    hk_status_t st = plug->vt->handle_create(&ci, &h);
    if (st != HK_STATUS_OK)
        printf("\n  handle_create(device %d): %d: %s\n", device, (int)st,
               plug->vt->last_error(NULL));
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    return h;
}

/* Every op once in both pointer modes on the handle's current stream, each
 * result checked, and `expect` current after every call. Returns the first
 * status that was not OK. */
static hk_status_t every_op(hk_handle_t *h, CUcontext expect)
{
    enum { N = 4099 };
    const hk_blas1_v1_t *b = plug->blas;
    static float x[N], y[N], out[N];
    float a = 0.5f, r = 0.0f, dev_in[2] = {0.5f, -1.0f};
    double want_dot = 0.0, want_nrm = 0.0;
    void *dx = NULL, *dy = NULL, *ds = NULL;
    hkct_fill_float(x, N, 5);
    hkct_fill_float(y, N, 6);
    for (int i = 0; i < N; i++) {
        double yi = y[i] + 0.5 * x[i];
        want_dot += x[i] * yi;
        want_nrm += yi * yi;
    }
    want_nrm = sqrt(want_nrm);
    hk_status_t st = plug->mem->alloc(h, sizeof x, &dx);
    if (st == HK_STATUS_OK)
        st = plug->mem->alloc(h, sizeof y, &dy);
    if (st == HK_STATUS_OK)
        st = plug->mem->alloc(h, 64, &ds);
    if (st == HK_STATUS_OK)
        st = plug->mem->copy_to_device(h, ds, dev_in, sizeof dev_in);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    for (int mode = 0; mode < 2 && st == HK_STATUS_OK; mode++) {
        float *res = (float *)ds + 2;
        st = plug->vt->set_pointer_mode(h, mode ? HK_POINTER_MODE_DEVICE : HK_POINTER_MODE_HOST);
        if (st == HK_STATUS_OK)
            st = plug->mem->copy_to_device(h, dx, x, sizeof x);
        if (st == HK_STATUS_OK)
            st = plug->mem->copy_to_device(h, dy, y, sizeof y);
        if (st == HK_STATUS_OK)
            st = b->saxpy(h, N, mode ? (void *)ds : (void *)&a, dx, 1, dy, 1);
        CU_ASSERT_PTR_EQUAL(current(), expect);
        if (st == HK_STATUS_OK)
            st = b->sdot(h, N, dx, 1, dy, 1, mode ? (void *)res : (void *)&r);
        CU_ASSERT_PTR_EQUAL(current(), expect);
        if (st == HK_STATUS_OK && mode)
            st = plug->mem->copy_to_host(h, &r, res, sizeof r);
        CU_ASSERT_DOUBLE_EQUAL(r, want_dot, 1e-4 * (fabs(want_dot) + 1.0));
        if (st == HK_STATUS_OK)
            st = b->snrm2(h, N, dy, 1, mode ? (void *)res : (void *)&r);
        if (st == HK_STATUS_OK && mode)
            st = plug->mem->copy_to_host(h, &r, res, sizeof r);
        CU_ASSERT_DOUBLE_EQUAL(r, want_nrm, 1e-4 * want_nrm);
        if (st == HK_STATUS_OK)
            st = b->sscal(h, N, mode ? (void *)((float *)ds + 1) : (void *)&dev_in[1], dy, 1);
        if (st == HK_STATUS_OK)
            st = b->scopy(h, N, dy, 1, dx, 1);
        if (st == HK_STATUS_OK)
            st = plug->mem->copy_to_host(h, out, dx, sizeof out);
        CU_ASSERT_PTR_EQUAL(current(), expect);
        int bad = 0;
        for (int i = 0; st == HK_STATUS_OK && i < N; i++)
            bad += fabsf(out[i] + (y[i] + 0.5f * x[i])) > 1e-5f;
        CU_ASSERT_EQUAL(bad, 0);
    }
    if (st != HK_STATUS_OK)
        printf("\n  every_op: status %d: %s\n", (int)st, plug->vt->last_error(h));
    void *bufs[3] = {dx, dy, ds};
    for (int i = 0; i < 3; i++)
        if (bufs[i])
            plug->mem->free_(h, bufs[i]);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    return st;
}

/* Empties the calling thread's context stack into saved (at most 8), so that
 * a test starts with nothing current, and puts it back. */
typedef struct saved_stack {
    CUcontext ctx[8];
    int n;
} saved_stack_t;

static void stack_save(saved_stack_t *s)
{
    s->n = 0;
    while (s->n < 8 && cuCtxPopCurrent(&s->ctx[s->n]) == CUDA_SUCCESS)
        s->n++;
}

static void stack_restore(const saved_stack_t *s)
{
    for (int i = s->n - 1; i >= 0; i--)
        CU_ASSERT_EQUAL(cuCtxPushCurrent(s->ctx[i]), CUDA_SUCCESS);
}

/* ---- capture ---- */

typedef struct capturer {
    CUcontext ctx;
    pthread_barrier_t *bar;
    CUresult begin, end;
} capturer_t;

/* Holds a global-mode capture open on a stream of its own while the main
 * thread makes its first reduction on a new stream. */
static void *capture_elsewhere(void *arg)
{
    capturer_t *c = arg;
    CUstream s = NULL;
    CUgraph g = NULL;
    c->begin = cuCtxSetCurrent(c->ctx);
    if (c->begin == CUDA_SUCCESS)
        c->begin = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    if (c->begin == CUDA_SUCCESS)
        c->begin = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    pthread_barrier_wait(c->bar);
    pthread_barrier_wait(c->bar);
    c->end = c->begin == CUDA_SUCCESS ? cuStreamEndCapture(s, &g) : c->begin;
    if (g)
        cuGraphDestroy(g);
    if (s)
        cuStreamDestroy(s);
    cuCtxSetCurrent(NULL);
    return NULL;
}

static void t_capture(void)
{
    enum { N = 40000 };
    const hk_blas1_v1_t *b = plug->blas;
    static float x[N];
    double want = 0.0;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 9) - 4.0f;
        want += (double)x[i] * x[i];
    }
    CUdevice dev;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&p0, dev));
    OK(cuCtxPushCurrent(p0));
    hk_handle_t *h = create_on(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    void *dx = NULL, *dr = NULL;
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, sizeof x, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, 64, &dr), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->copy_to_device(h, dx, x, sizeof x), HK_STATUS_OK);
    CUstream s;
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    CUstreamCaptureStatus cs;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_ASSERT_EQUAL(plug->vt->set_stream(h, s), HK_STATUS_OK);

    /* host pointer mode: refused before anything is enqueued */
    float r = 42.0f;
    CU_ASSERT_EQUAL(plug->vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    HK_EXPECT(h, b->sdot(h, N, dx, 1, dx, 1, &r), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug->vt->last_error(h), "host pointer mode results cannot be captured"));
    HK_EXPECT(h, b->snrm2(h, N, dx, 1, &r), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_EQUAL(r, 42.0f);
    OK(cuStreamIsCapturing(s, &cs));
    CU_ASSERT_EQUAL(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(cuStreamEndCapture(s, &g)); /* still valid */
    OK(cuGraphDestroy(g));
    HK_OK(h, b->sdot(h, N, dx, 1, dx, 1, &r)); /* and fine outside */
    CU_ASSERT_DOUBLE_EQUAL(r, want, 1e-6 * want);

    /* device pointer mode: the first reduction on the per-thread stream is
     * captured (its workspace made on the way); used directly before the
     * graph ever ran, then replayed */
    CU_ASSERT_EQUAL(plug->vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->vt->set_stream(h, CU_STREAM_PER_THREAD), HK_STATUS_OK);
    OK(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL));
    HK_OK(h, b->sdot(h, N, dx, 1, dx, 1, dr));
    HK_OK(h, b->snrm2(h, N, dx, 1, (float *)dr + 1));
    g = NULL;
    CUresult end = cuStreamEndCapture(CU_STREAM_PER_THREAD, &g);
    if (!CU_OK(end) || !CU_OK(cuGraphInstantiate(&ge, g, 0)))
        goto cleanup;
    float back[2] = {0, 0};
    for (int round = 0; round < 3; round++) {
        OK(cuMemsetD8((CUdeviceptr)(uintptr_t)dr, 0, 8));
        if (round == 0) {
            HK_OK(h, b->sdot(h, N, dx, 1, dx, 1, dr));
            HK_OK(h, b->snrm2(h, N, dx, 1, (float *)dr + 1));
        } else {
            OK(cuGraphLaunch(ge, CU_STREAM_PER_THREAD));
        }
        OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
        OK(cuMemcpyDtoH(back, (CUdeviceptr)(uintptr_t)dr, sizeof back));
        CU_ASSERT_DOUBLE_EQUAL(back[0], want, 1e-6 * want);
        CU_ASSERT_DOUBLE_EQUAL(back[1], sqrt(want), 1e-6 * sqrt(want));
    }
    OK(cuGraphExecDestroy(ge));
    OK(cuGraphDestroy(g));
cleanup:;

    /* another thread's global-mode capture survives this thread's first
     * reduction on a new stream, which allocates */
    pthread_barrier_t bar;
    CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&bar, NULL, 2), 0);
    capturer_t cap = {p0, &bar, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, capture_elsewhere, &cap), 0);
    pthread_barrier_wait(&bar);
    CUstream fresh;
    OK(cuStreamCreate(&fresh, CU_STREAM_NON_BLOCKING));
    CU_ASSERT_EQUAL(plug->vt->set_stream(h, fresh), HK_STATUS_OK);
    hk_status_t st = b->sdot(h, N, dx, 1, dx, 1, dr);
    pthread_barrier_wait(&bar);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&bar);
    HK_OK(h, st);
    CU_OK(cap.begin);
    CU_OK(cap.end);
    OK(cuStreamSynchronize(fresh));
    OK(cuMemcpyDtoH(back, (CUdeviceptr)(uintptr_t)dr, sizeof back[0]));
    CU_ASSERT_DOUBLE_EQUAL(back[0], want, 1e-6 * want);

    CU_ASSERT_EQUAL(plug->vt->set_stream(h, NULL), HK_STATUS_OK);
    plug->mem->free_(h, dx);
    plug->mem->free_(h, dr);
    CU_ASSERT_EQUAL(plug->vt->handle_destroy(h), HK_STATUS_OK);
    OK(cuStreamDestroy(s));
    OK(cuStreamDestroy(fresh));
    CUcontext popped;
    OK(cuCtxPopCurrent(&popped));
    OK(cuDevicePrimaryCtxRelease(dev));
}

/* ---- green contexts ---- */

static void t_green_context(void)
{
    saved_stack_t saved;
    stack_save(&saved);
    CUdevResource res;
    CUdevResourceDesc desc;
    CUgreenCtx g;
    CUcontext gc = NULL;
    CUdevice dev;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&p0, dev));
    OK(cuDeviceGetDevResource(dev, &res, CU_DEV_RESOURCE_TYPE_SM));
    OK(cuDevResourceGenerateDesc(&desc, &res, 1));
    OK(cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
    OK(cuCtxFromGreenCtx(&gc, g));

    /* created with the green context current: bound to it, which stays current */
    OK(cuCtxPushCurrent(gc));
    hk_handle_t *h = create_on(HK_DEVICE_CURRENT);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_EQUAL(current(), gc);
    hk_handle_info_t info = {sizeof info, 0, 0, 0, 0, NULL};
    unsigned long long gid = 0;
    CU_ASSERT_EQUAL(plug->vt->handle_info(h, &info), HK_STATUS_OK);
    OK(cuCtxGetId(gc, &gid));
    CU_ASSERT_EQUAL(info.context_id, gid);
    CU_ASSERT_EQUAL(info.owns_primary, 0);
    CU_ASSERT_EQUAL(every_op(h, gc), HK_STATUS_OK); /* the legacy stream */
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_ASSERT_EQUAL(plug->vt->set_stream(h, s), HK_STATUS_OK);
    CU_ASSERT_EQUAL(every_op(h, gc), HK_STATUS_OK); /* a stream of the green context */

    /* called while the primary is current, and with nothing current */
    OK(cuCtxPushCurrent(p0));
    CU_ASSERT_EQUAL(every_op(h, p0), HK_STATUS_OK);
    CUcontext popped;
    OK(cuCtxPopCurrent(&popped));
    OK(cuCtxPopCurrent(&popped));
    CU_ASSERT_PTR_NULL(current());
    CU_ASSERT_EQUAL(every_op(h, NULL), HK_STATUS_OK);

    /* a green context has no per-thread stream: the driver's refusal comes
     * back as a status, and the handle goes on with another stream */
    float one = 1.0f, r = 0.0f;
    void *dx = NULL;
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, sizeof one, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->copy_to_device(h, dx, &one, sizeof one), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->vt->set_stream(h, CU_STREAM_PER_THREAD), HK_STATUS_OK);
    CU_ASSERT_NOT_EQUAL(plug->blas->sdot(h, 1, dx, 1, dx, 1, &r), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug->vt->last_error(h), "CUDA_ERROR_INVALID_HANDLE"));
    CU_ASSERT_EQUAL(plug->vt->set_stream(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->blas->sdot(h, 1, dx, 1, dx, 1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(r, 1.0f);
    plug->mem->free_(h, dx);
    CU_ASSERT_PTR_NULL(current());
    CU_ASSERT_EQUAL(plug->vt->handle_destroy(h), HK_STATUS_OK);

    /* a handle of the primary, called while the green context is current */
    OK(cuCtxPushCurrent(gc));
    h = create_on(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_EQUAL(current(), gc);
    CU_ASSERT_EQUAL(every_op(h, gc), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->vt->handle_destroy(h), HK_STATUS_OK);
    OK(cuCtxPopCurrent(&popped));
    OK(cuCtxPushCurrent(gc));
    OK(cuStreamDestroy(s));
    OK(cuCtxPopCurrent(&popped));
    OK(cuGreenCtxDestroy(g));
    OK(cuDevicePrimaryCtxRelease(dev));
    stack_restore(&saved);
}

/* ---- the first reduction on a stream, with a failing driver call ---- */

static struct {
    void (*fail)(const char *, unsigned, CUresult);
    void (*fail_clear)(void);
    unsigned long (*calls)(const char *);
    size_t (*live)(void);
} sim;

/* A new handle whose first 8 streams have their workspaces (its first slab is
 * full), then the first sdot on a 9th stream with the k-th call of entry
 * failing, then the same call again. */
typedef struct fault_trial {
    const char *entry;
    unsigned k;
    hk_status_t first, again;
    float result;
    unsigned long calls;
    size_t leaked;
    char why[300];
} fault_trial_t;

static void fault_trial(fault_trial_t *t)
{
    enum { NS = 9 };
    float x[300];
    for (int i = 0; i < 300; i++)
        x[i] = 1.0f;
    CUstream s[NS] = {0};
    size_t live = sim.live();
    hk_handle_t *h = create_on(0);
    void *dx = NULL, *dr = NULL;
    t->first = t->again = HK_STATUS_INTERNAL;
    t->result = -1.0f;
    int ok = h && plug->vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE) == HK_STATUS_OK &&
             plug->mem->alloc(h, sizeof x, &dx) == HK_STATUS_OK &&
             plug->mem->alloc(h, 4, &dr) == HK_STATUS_OK &&
             plug->mem->copy_to_device(h, dx, x, sizeof x) == HK_STATUS_OK;
    for (int i = 0; ok && i < NS; i++)
        ok = cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
             plug->vt->set_stream(h, s[i]) == HK_STATUS_OK &&
             (i == NS - 1 || plug->blas->sdot(h, 300, dx, 1, dx, 1, dr) == HK_STATUS_OK);
    if (ok) {
        unsigned long before = sim.calls(t->entry);
        sim.fail(t->entry, t->k, CUDA_ERROR_UNKNOWN);
        t->first = plug->blas->sdot(h, 300, dx, 1, dx, 1, dr);
        t->calls = sim.calls(t->entry) - before;
        snprintf(t->why, sizeof t->why, "%s", plug->vt->last_error(h));
        sim.fail_clear();
        t->again = plug->blas->sdot(h, 300, dx, 1, dx, 1, dr);
        if (plug->mem->copy_to_host(h, &t->result, dr, sizeof t->result) != HK_STATUS_OK)
            t->result = -1.0f;
    }
    if (h) {
        plug->vt->set_stream(h, NULL);
        plug->mem->free_(h, dx);
        plug->mem->free_(h, dr);
        plug->vt->handle_destroy(h);
    }
    for (int i = 0; i < NS; i++)
        if (s[i])
            cuStreamDestroy(s[i]);
    /* a slab made before a failing clear stays for the next call, and goes
     * with the handle like the others */
    t->leaked = sim.live() - live;
}

static void t_workspace_faults(void)
{
    static const char *const entries[] = {"cuStreamIsCapturing",
                                          "cuThreadExchangeStreamCaptureMode", "cuMemAlloc",
                                          "cuMemsetD8Async"};
    CUcontext p;
    CUdevice dev;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&p, dev));
    OK(cuCtxPushCurrent(p));
    int walked = 0;
    for (size_t e = 0; e < sizeof entries / sizeof entries[0]; e++) {
        for (unsigned k = 1; k < 10; k++) {
            fault_trial_t t = {entries[e], k, 0, 0, 0.0f, 0, 0, ""};
            fault_trial(&t);
            if (t.calls < k)
                break; /* the first call makes fewer: this entry is walked */
            walked++;
            if (t.first == HK_STATUS_OK || t.leaked || t.again != HK_STATUS_OK ||
                t.result != 300.0f)
                printf("\n  %s #%u: first %d (%s), leaked %zu, again %d, result %g\n",
                       t.entry, k, (int)t.first, t.why, t.leaked, (int)t.again,
                       (double)t.result);
            CU_ASSERT_NOT_EQUAL(t.first, HK_STATUS_OK);
            CU_ASSERT_PTR_NOT_NULL(strstr(t.why, "CUDA_ERROR_UNKNOWN"));
            CU_ASSERT_EQUAL(t.leaked, 0);
            CU_ASSERT_EQUAL(t.again, HK_STATUS_OK);
            CU_ASSERT_EQUAL(t.result, 300.0f);
        }
    }
    CU_ASSERT_EQUAL(walked, 5); /* 1 + 2 + 1 + 1 calls on the way to a new slab */

    /* set_stream cannot learn the stream's ID: the call asks for it itself */
    hk_handle_t *h = create_on(0);
    CUstream s;
    float one = 1.0f, r = 0.0f;
    void *dx = NULL;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, sizeof one, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->copy_to_device(h, dx, &one, sizeof one), HK_STATUS_OK);
    sim.fail("cuStreamGetId", 1, CUDA_ERROR_UNKNOWN);
    CU_ASSERT_EQUAL(plug->vt->set_stream(h, s), HK_STATUS_OK);
    unsigned long before = sim.calls("cuStreamGetId");
    CU_ASSERT_EQUAL(plug->blas->sdot(h, 1, dx, 1, dx, 1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.calls("cuStreamGetId"), before + 1);
    CU_ASSERT_EQUAL(r, 1.0f);
    sim.fail("cuStreamGetId", 1, CUDA_ERROR_UNKNOWN);
    CU_ASSERT_EQUAL(plug->blas->sdot(h, 1, dx, 1, dx, 1, &r), HK_STATUS_CUDA_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug->vt->last_error(h), "cuStreamGetId"));
    sim.fail_clear();
    CU_ASSERT_EQUAL(plug->vt->set_stream(h, NULL), HK_STATUS_OK);
    plug->mem->free_(h, dx);
    CU_ASSERT_EQUAL(plug->vt->handle_destroy(h), HK_STATUS_OK);
    OK(cuStreamDestroy(s));
    CUcontext popped;
    OK(cuCtxPopCurrent(&popped));
    OK(cuDevicePrimaryCtxRelease(dev));
}

/* ---- more than 2^31 elements (a real GPU: 8 GiB vectors) ---- */

static void tail_is(hk_handle_t *h, const float *d, int64_t at, float want, int64_t count)
{
    float back[16];
    if (!HK_OK(h, plug->mem->copy_to_host(h, back, d + at, count * sizeof *back)))
        return;
    int bad = 0;
    for (int64_t i = 0; i < count; i++)
        bad += back[i] != want;
    if (bad)
        printf("\n  elements %lld..%lld: %d not %g\n", (long long)at, (long long)(at + count - 1),
               bad, (double)want);
    CU_ASSERT_EQUAL(bad, 0);
}

static void t_beyond_2_31(void)
{
    const int64_t n = (INT64_C(1) << 31) + 5, mid = INT64_C(1) << 31;
    const hk_blas1_v1_t *b = plug->blas;
    hk_handle_t *h = create_on(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    float *x = NULL, *y = NULL, *one = NULL, c[2] = {1.0f, 2.0f}, r = 0.0f;
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, (size_t)n * sizeof *x, (void **)&x), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, (size_t)n * sizeof *y, (void **)&y), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, sizeof c, (void **)&one), HK_STATUS_OK);
    HK_OK(h, plug->mem->copy_to_device(h, one, c, sizeof c));
    CU_ASSERT_EQUAL(plug->vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    /* x = 1, y = 2 everywhere: copies of one element (increment 0) */
    /* each op waited for, so that a fault names its op */
    HK_OK(h, b->scopy(h, n, one, 0, x, 1));
    HK_OK(h, plug->vt->synchronize(h));
    HK_OK(h, b->scopy(h, n, one + 1, 0, y, 1));
    HK_OK(h, plug->vt->synchronize(h));
    float half = 0.5f, two = 2.0f;
    HK_OK(h, b->saxpy(h, n, &half, x, 1, y, 1)); /* y = 2.5 */
    HK_OK(h, plug->vt->synchronize(h));
    tail_is(h, y, mid - 8, 2.5f, 16);
    tail_is(h, y, n - 16, 2.5f, 16);
    HK_OK(h, b->sdot(h, n, x, 1, y, 1, &r));
    CU_ASSERT_EQUAL(r, (float)(2.5 * (double)n));
    CU_ASSERT_EQUAL(b->snrm2(h, n, x, 1, &r), HK_STATUS_OK);
    CU_ASSERT_DOUBLE_EQUAL(r, sqrt((double)n), 1e-6 * sqrt((double)n));
    HK_OK(h, b->sscal(h, n, &two, y, 1)); /* y = 5 */
    tail_is(h, y, n - 16, 5.0f, 16);
    /* strided, both ways, past element 2^31 */
    int64_t m = n / 2 - 1;
    HK_OK(h, b->sdot(h, m, x, 2, y, -2, &r));
    CU_ASSERT_EQUAL(r, (float)(5.0 * (double)m));
    HK_OK(h, b->saxpy(h, m, &two, x, -2, y + 1, 2)); /* odd y = 7 */
    float back[4];
    HK_OK(h, plug->mem->copy_to_host(h, back, y + 2 * (m - 1), sizeof back));
    CU_ASSERT_EQUAL(back[0], 5.0f);
    CU_ASSERT_EQUAL(back[1], 7.0f);
    CU_ASSERT_EQUAL(back[2], 5.0f);
    CU_ASSERT_EQUAL(back[3], 5.0f);
    plug->mem->free_(h, x);
    plug->mem->free_(h, y);
    plug->mem->free_(h, one);
    CU_ASSERT_EQUAL(plug->vt->handle_destroy(h), HK_STATUS_OK);
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
        {"capture: host pointer mode refused, device mode captured on a new stream",
         t_capture},
        {"green context: create, every op, the caller's context restored", t_green_context},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        CU_pTest test = hk_test_add(s, t[i].name, t[i].fn);
        if (skip)
            hk_test_skip(test, skip);
    }
    *(void **)&sim.fail = dlsym(RTLD_DEFAULT, "simcuda_fail");
    *(void **)&sim.fail_clear = dlsym(RTLD_DEFAULT, "simcuda_fail_clear");
    *(void **)&sim.calls = dlsym(RTLD_DEFAULT, "simcuda_call_count");
    *(void **)&sim.live = dlsym(RTLD_DEFAULT, "simcuda_live_allocations");
    CU_pTest test = hk_test_add(s, "first reduction on a new stream: every failing driver call",
                                t_workspace_faults);
    if (skip)
        hk_test_skip(test, skip);
    else if (!on_sim || !sim.fail || !sim.fail_clear || !sim.calls || !sim.live)
        hk_test_skip(test, "fault injection needs the simulated driver");
    test = hk_test_add(s, "2^31 + 5 elements: every op reaches past element 2^31", t_beyond_2_31);
    if (skip)
        hk_test_skip(test, skip);
    else if (on_sim)
        hk_test_skip(test, "needs a real GPU: two vectors of 8 GiB, beyond what CI machines "
                           "hold");
    return 0;
}
