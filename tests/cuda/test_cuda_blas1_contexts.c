/* hk-cuda blas1 in particular situations: stream capture (host pointer mode
 * refused, device pointer mode captured on a stream's first call), green
 * contexts (create, every op, the caller's context kept), every failing
 * driver call on the way to a new stream's workspace (simulation only), and
 * more than 2^31 elements (a real GPU only). */
#include <cuda.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_test.h"
#include "test_cuda_blas1.h"

static const hkct_plugin_t *plug;
static int on_sim;
static CUcontext p0; /* device 0's primary */

#define OK(call) CU_ASSERT_EQUAL_FATAL((call), CUDA_SUCCESS)

/* ---- helpers ---- */

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
    CU_ASSERT_PTR_NOT_NULL(
        strstr(plug->vt->last_error(h), "host pointer mode results cannot be captured"));
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
     * reductions on 9 new streams, past the handle's first workspaces: one of
     * them allocates more */
    enum { FRESH = 9 };
    pthread_barrier_t bar;
    CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&bar, NULL, 2), 0);
    capturer_t cap = {p0, &bar, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, capture_elsewhere, &cap), 0);
    pthread_barrier_wait(&bar);
    CUstream fresh[FRESH];
    hk_status_t st[FRESH];
    for (int i = 0; i < FRESH; i++) {
        OK(cuStreamCreate(&fresh[i], CU_STREAM_NON_BLOCKING));
        CU_ASSERT_EQUAL(plug->vt->set_stream(h, fresh[i]), HK_STATUS_OK);
        st[i] = b->sdot(h, N, dx, 1, dx, 1, (float *)dr + 2 + i);
    }
    pthread_barrier_wait(&bar);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&bar);
    CU_OK(cap.begin);
    CU_OK(cap.end);
    float many[FRESH];
    for (int i = 0; i < FRESH; i++) {
        HK_OK(h, st[i]);
        OK(cuStreamSynchronize(fresh[i]));
    }
    OK(cuMemcpyDtoH(many, (CUdeviceptr)(uintptr_t)dr + 8, sizeof many));
    for (int i = 0; i < FRESH; i++)
        CU_ASSERT_DOUBLE_EQUAL(many[i], want, 1e-6 * want);

    CU_ASSERT_EQUAL(plug->vt->set_stream(h, NULL), HK_STATUS_OK);
    plug->mem->free_(h, dx);
    plug->mem->free_(h, dr);
    CU_ASSERT_EQUAL(plug->vt->handle_destroy(h), HK_STATUS_OK);
    OK(cuStreamDestroy(s));
    for (int i = 0; i < FRESH; i++)
        OK(cuStreamDestroy(fresh[i]));
    CUcontext popped;
    OK(cuCtxPopCurrent(&popped));
    OK(cuDevicePrimaryCtxRelease(dev));
}

/* ---- green contexts ---- */

/* The whole check with a green context made of res (all of the device's SMs,
 * or a group split off them). */
static void green_context_with(CUdevice dev, CUdevResource *res)
{
    saved_stack_t saved;
    stack_save(&saved);
    CUdevResourceDesc desc;
    CUgreenCtx g;
    CUcontext gc = NULL;
    OK(cuDevicePrimaryCtxRetain(&p0, dev));
    OK(cuDevResourceGenerateDesc(&desc, res, 1));
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

static void t_green_context(void)
{
    CUdevice dev;
    CUdevResource res;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDeviceGetDevResource(dev, &res, CU_DEV_RESOURCE_TYPE_SM));
    green_context_with(dev, &res);
}

/* A green context on part of the device: 72 of an H200's 132 SMs (the rest
 * left to others), so the handle's grids, sized for the whole device, run on
 * fewer SMs than it has. */
static void t_green_context_split(void)
{
    CUdevice dev;
    CUdevResource all, part, rest;
    unsigned groups = 1;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
    unsigned want = all.sm.smCount * 6 / 11; /* 72 of 132 */
    OK(cuDevSmResourceSplitByCount(&part, &groups, &all, &rest, 0, want));
    CU_ASSERT_EQUAL_FATAL(groups, 1);
    CU_ASSERT_TRUE(part.sm.smCount >= want && part.sm.smCount < all.sm.smCount);
    CU_ASSERT_EQUAL(part.sm.smCount + rest.sm.smCount, all.sm.smCount);
    green_context_with(dev, &part);
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
    /* nothing kept by the kit from the last trial: the 9th stream's slab is
     * a new one */
    if (plug->trim)
        CU_ASSERT_EQUAL(plug->trim->trim(), HK_STATUS_OK);
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
     * with the handle like the others (to the kit, which a trim empties) */
    if (plug->trim)
        CU_ASSERT_EQUAL(plug->trim->trim(), HK_STATUS_OK);
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
            /* giving the thread its capture mode back is tried twice: one
             * refusal there costs nothing */
            int absorbed = k == 2 && strcmp(t.entry, "cuThreadExchangeStreamCaptureMode") == 0;
            if ((t.first == HK_STATUS_OK) != absorbed || t.leaked ||
                t.again != HK_STATUS_OK || t.result != 300.0f)
                printf("\n  %s #%u: first %d (%s), leaked %zu, again %d, result %g\n",
                       t.entry, k, (int)t.first, t.why, t.leaked, (int)t.again,
                       (double)t.result);
            CU_ASSERT_EQUAL(t.first == HK_STATUS_OK, absorbed);
            if (!absorbed)
                CU_ASSERT_PTR_NOT_NULL(strstr(t.why, "CUDA_ERROR_UNKNOWN"));
            CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
            OK(cuThreadExchangeStreamCaptureMode(&mode));
            CU_ASSERT_EQUAL(mode, CU_STREAM_CAPTURE_MODE_GLOBAL); /* given back */
            CU_ASSERT_EQUAL(t.leaked, 0);
            CU_ASSERT_EQUAL(t.again, HK_STATUS_OK);
            CU_ASSERT_EQUAL(t.result, 300.0f);
        }
    }
    CU_ASSERT_EQUAL(walked, 5); /* 1 + 2 + 1 + 1 calls on the way to a new slab */

    /* set_stream cannot learn the stream's ID: the first reduction asks for
     * it (a refusal there is its failure), and keeps it for the next */
    hk_handle_t *h = create_on(0);
    CUstream s;
    float one = 1.0f, r = 0.0f;
    void *dx = NULL;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_ASSERT_EQUAL_FATAL(plug->mem->alloc(h, sizeof one, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug->mem->copy_to_device(h, dx, &one, sizeof one), HK_STATUS_OK);
    sim.fail("cuStreamGetId", 1, CUDA_ERROR_UNKNOWN);
    CU_ASSERT_EQUAL(plug->vt->set_stream(h, s), HK_STATUS_OK);
    sim.fail("cuStreamGetId", 1, CUDA_ERROR_UNKNOWN);
    CU_ASSERT_EQUAL(plug->blas->sdot(h, 1, dx, 1, dx, 1, &r), HK_STATUS_CUDA_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug->vt->last_error(h), "cuStreamGetId"));
    unsigned long before = sim.calls("cuStreamGetId");
    CU_ASSERT_EQUAL(plug->blas->sdot(h, 1, dx, 1, dx, 1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.calls("cuStreamGetId"), before + 1);
    CU_ASSERT_EQUAL(r, 1.0f);
    CU_ASSERT_EQUAL(plug->blas->sdot(h, 1, dx, 1, dx, 1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.calls("cuStreamGetId"), before + 1); /* learnt */
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
    tail_is(h, y, mid - 8, 2.5f, n - (mid - 8)); /* elements 2^31 - 8 .. n - 1 */
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


int blas1_register_contexts(const hkct_plugin_t *p, const char *skip)
{
    plug = p;
    on_sim = dlsym(RTLD_DEFAULT, "simcuda_is_simulated") != NULL;
    CU_pSuite s = hk_test_suite("hk-cuda blas1 in capture, green contexts, faults, 2^31", NULL,
                                NULL);
    struct {
        const char *name;
        CU_TestFunc fn;
    } t[] = {
        {"capture: host pointer mode refused, device mode captured on a new stream",
         t_capture},
        {"green context: create, every op, the caller's context restored", t_green_context},
        {"green context on 6/11 of the SMs (72 of 132 on an H200): create, every op, restore",
         t_green_context_split},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        hk_test_add_or_skip(s, t[i].name, t[i].fn, skip);
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
    return blas1_register_grids(skip);
}
