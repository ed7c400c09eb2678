/* hk-cuda context scenarios (DESIGN.md "Context contract", TARGETS.md R5).
 *
 * One program for both machines: linked with the driver (the toolkit's stub at
 * link time), it runs against the simulated driver in CI and against the real
 * one on a GPU machine. Runtime operations go through tests/common/hk_rt.h.
 * Each scenario runs in a thread of its own, which starts with no current
 * context (fact 7), and asserts the status, the numbers, and the context that
 * is current after every call: always the caller's. The simulation's
 * introspection (reference counts, live allocations, fault injection) is used
 * only where it is present. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_rt.h"
#include "hk_test.h"
#include "hkct_plugin.h"
#include "simcuda.h"

static hkct_plugin_t plug;
static int ndev;

/* The simulation's test API, found at run time (absent on a real driver). */
static struct {
    int (*refcount)(int);
    size_t (*live)(void);
    void (*fail)(const char *, unsigned, CUresult);
    void (*fail_clear)(void);
    unsigned long (*calls)(const char *);
    void (*reset_counters)(void);
    size_t (*launch_count)(void);
    int (*launch_get)(size_t, simcuda_launch_record_t *);
} sim;
static int on_sim;

#define OK(call) CU_ASSERT_EQUAL_FATAL((call), CUDA_SUCCESS)

static CUcontext current(void)
{
    CUcontext c = NULL;
    CU_ASSERT_EQUAL(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    return c;
}

/* The primary context's pointer (the same for its whole life, fact 2). */
static CUcontext primary(int dev)
{
    CUdevice d;
    CUcontext p = NULL;
    OK(cuDeviceGet(&d, dev));
    OK(cuDevicePrimaryCtxRetain(&p, d));
    OK(cuDevicePrimaryCtxRelease(d));
    return p;
}

static unsigned long long ctx_id(CUcontext c)
{
    unsigned long long id = 0;
    CU_ASSERT_EQUAL(cuCtxGetId(c, &id), CUDA_SUCCESS);
    return id;
}

static hk_handle_info_t info_of(hk_handle_t *h)
{
    hk_handle_info_t i;
    memset(&i, 0, sizeof i);
    i.size = sizeof i;
    CU_ASSERT_EQUAL(plug.vt->handle_info(h, &i), HK_STATUS_OK);
    return i;
}

static hk_handle_t *create(int device, hk_status_t want)
{
    hk_create_info_t ci = {sizeof ci, device, 0};
    hk_handle_t *h = NULL;
    hk_status_t st = plug.vt->handle_create(&ci, &h);
    if (st != want)
        printf("\n  create(device %d): %d (%s)\n", device, (int)st, plug.vt->last_error(NULL));
    CU_ASSERT_EQUAL(st, want);
    return h;
}

/* y := 2x + y and x.y on the handle's own memory, checked; asserts after
 * every call that `expect` is current. Returns the first failing status. */
static hk_status_t workload(hk_handle_t *h, CUcontext expect)
{
    enum { N = 1000 };
    float x[N], y[N], out[N], a = 2.0f, dot = 0.0f;
    void *dx = NULL, *dy = NULL;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 7) - 3.0f;
        y[i] = 1.0f;
    }
    hk_status_t st = plug.mem->alloc(h, sizeof x, &dx);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    if (st == HK_STATUS_OK)
        st = plug.mem->alloc(h, sizeof y, &dy);
    if (st == HK_STATUS_OK)
        st = plug.mem->copy_to_device(h, dx, x, sizeof x);
    if (st == HK_STATUS_OK)
        st = plug.mem->copy_to_device(h, dy, y, sizeof y);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    if (st == HK_STATUS_OK)
        st = plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST);
    if (st == HK_STATUS_OK)
        st = plug.blas->saxpy(h, N, &a, dx, 1, dy, 1);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    if (st == HK_STATUS_OK)
        st = plug.blas->sdot(h, N, dx, 1, dy, 1, &dot);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    if (st == HK_STATUS_OK)
        st = plug.mem->copy_to_host(h, out, dy, sizeof out);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    if (st == HK_STATUS_OK) {
        double want = 0.0;
        int bad = 0;
        for (int i = 0; i < N; i++) {
            bad += out[i] != 2.0f * x[i] + 1.0f;
            want += (double)x[i] * (2.0 * x[i] + 1.0);
        }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_DOUBLE_EQUAL(dot, want, 1e-3);
    }
    if (dx)
        plug.mem->free_(h, dx);
    if (dy)
        plug.mem->free_(h, dy);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    return st;
}

static void *trampoline(void *arg)
{
    void (**fn)(void) = arg;
    (*fn)();
    return NULL;
}

/* Runs fn in a new thread (nothing current there, fact 7) and waits for it.
 * fn must use no _FATAL assertion: CUnit cannot jump across threads. */
static void in_thread(void (*fn)(void))
{
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, trampoline, &fn), 0);
    pthread_join(t, NULL);
}

/* Empties the calling thread's context stack: cuCtxSetCurrent(NULL) pops
 * (fact 15), so every scenario starts with nothing current. */
static void clear_current(void)
{
    for (int k = 0; k < 64; k++) {
        CUcontext c = NULL;
        if (cuCtxGetCurrent(&c) != CUDA_SUCCESS || !c)
            return;
        cuCtxSetCurrent(NULL);
    }
}

#define SCENARIO(name)                                                       \
    static void name##_body(void);                                           \
    static void name(void)                                                   \
    {                                                                        \
        clear_current();                                                     \
        name##_body();                                                       \
        clear_current();                                                     \
    }                                                                        \
    static void name##_body(void)

/* ---- the contract's table ---- */

SCENARIO(t_nothing_current)
{
    CU_ASSERT_PTR_NULL_FATAL(current());
    CUcontext p0 = primary(0);
    int rc = on_sim ? sim.refcount(0) : 0;
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    /* binds device 0's primary, which becomes current, retained */
    CU_ASSERT_PTR_EQUAL(current(), p0);
    hk_handle_info_t i = info_of(h);
    CU_ASSERT_EQUAL(i.device, 0);
    CU_ASSERT_EQUAL(i.owns_primary, 1);
    CU_ASSERT_EQUAL(i.context_id, ctx_id(p0));
    CU_ASSERT_STRING_EQUAL(i.plugin_name, "hk-cuda");
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc + 1);
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p0);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc);
}

SCENARIO(t_runtime_device_1)
{
    OK(hk_rt_set_device(1));
    CUcontext p1 = current();
    CU_ASSERT_PTR_EQUAL(p1, primary(1));
    int rc = on_sim ? sim.refcount(1) : 0;
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_EQUAL(current(), p1);
    hk_handle_info_t i = info_of(h);
    CU_ASSERT_EQUAL(i.device, 1);
    CU_ASSERT_EQUAL(i.owns_primary, 1);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(1), rc + 1);

    /* runtime stream and runtime memory passed in */
    enum { N = 333 };
    float x[N], y[N], a = 3.0f, dot = 0.0f;
    for (int k = 0; k < N; k++) {
        x[k] = (float)k;
        y[k] = 0.5f;
    }
    void *s = NULL, *dx = NULL, *dy = NULL;
    OK(hk_rt_stream_create(&s));
    OK(hk_rt_malloc(&dx, sizeof x));
    OK(hk_rt_malloc(&dy, sizeof y));
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s), HK_STATUS_OK);
    void *got = NULL;
    CU_ASSERT_EQUAL(plug.vt->get_stream(h, &got), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(got, s);
    CU_ASSERT_EQUAL(plug.mem->copy_to_device(h, dx, x, sizeof x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->copy_to_device(h, dy, y, sizeof y), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.blas->saxpy(h, N, &a, dx, 1, dy, 1), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p1);
    CU_ASSERT_EQUAL(plug.blas->sdot(h, N, dx, 1, dy, 1, &dot), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p1);
    CU_ASSERT_EQUAL(plug.mem->copy_to_host(h, y, dy, sizeof y), HK_STATUS_OK);
    double want = 0.0;
    int bad = 0;
    for (int k = 0; k < N; k++) {
        bad += y[k] != 3.0f * k + 0.5f;
        want += (double)k * (3.0 * k + 0.5);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_DOUBLE_EQUAL(dot, want, want * 1e-6);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p1);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(1), rc);
    OK(hk_rt_free(dx));
    OK(hk_rt_free(dy));
    OK(hk_rt_stream_destroy(s));
}

SCENARIO(t_user_context)
{
    CUdevice d0;
    CUcontext uc = NULL;
    OK(cuDeviceGet(&d0, 0));
    OK(cuCtxCreate(&uc, NULL, 0, d0));
    CU_ASSERT_PTR_EQUAL_FATAL(current(), uc);
    int rc = on_sim ? sim.refcount(0) : 0;
    size_t live = on_sim ? sim.live() : 0;
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_EQUAL(current(), uc);
    hk_handle_info_t i = info_of(h);
    CU_ASSERT_EQUAL(i.owns_primary, 0);
    CU_ASSERT_EQUAL(i.device, 0);
    CU_ASSERT_EQUAL(i.context_id, ctx_id(uc));
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc); /* not retained */
    CU_ASSERT_EQUAL(workload(h, uc), HK_STATUS_OK);

    /* the user destroys the context before the handle */
    OK(cuCtxDestroy(uc));
    CUcontext after = current();
    float r = 0.0f, dummy = 0.0f;
    CU_ASSERT_EQUAL(plug.blas->sdot(h, 1, &dummy, 1, &dummy, 1, &r), HK_STATUS_CONTEXT_DESTROYED);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "destroyed"));
    CU_ASSERT_PTR_EQUAL(current(), after);
    void *p = NULL;
    CU_ASSERT_EQUAL(plug.mem->alloc(h, 64, &p), HK_STATUS_CONTEXT_DESTROYED);
    CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_CONTEXT_DESTROYED);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), after);
    if (on_sim) {
        CU_ASSERT_EQUAL(sim.refcount(0), rc);
        CU_ASSERT_EQUAL(sim.live(), live);
    }
}

/* Device 1 current (held by a retain of our own), handle of device 0. */
SCENARIO(t_other_device_current)
{
    CUdevice d1;
    CUcontext p1 = NULL;
    OK(cuDeviceGet(&d1, 1));
    OK(cuDevicePrimaryCtxRetain(&p1, d1));
    OK(cuCtxSetCurrent(p1));
    hk_handle_t *h = create(0, HK_STATUS_OK); /* explicit device: p1 stays current */
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_EQUAL(current(), p1);
    CU_ASSERT_EQUAL(info_of(h).device, 0);
    if (on_sim)
        sim.reset_counters();
    CU_ASSERT_EQUAL(workload(h, p1), HK_STATUS_OK);
    if (on_sim) {
        /* every launch ran in device 0's primary, none in the caller's */
        size_t n = sim.launch_count();
        CU_ASSERT(n >= 2);
        for (size_t k = 0; k < n; k++) {
            simcuda_launch_record_t rec;
            CU_ASSERT_EQUAL(sim.launch_get(k, &rec), 0);
            CU_ASSERT_EQUAL(rec.device, 0);
            CU_ASSERT_PTR_EQUAL(rec.ctx, primary(0));
            CU_ASSERT_EQUAL(rec.result, CUDA_SUCCESS);
        }
    }
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p1);
    OK(cuDevicePrimaryCtxRelease(d1));
}

SCENARIO(t_stream_mismatch)
{
    CUdevice d1;
    CUcontext p1 = NULL;
    CUstream s1 = NULL;
    OK(cuDeviceGet(&d1, 1));
    OK(cuDevicePrimaryCtxRetain(&p1, d1));
    OK(cuCtxSetCurrent(p1));
    OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s1), HK_STATUS_STREAM_MISMATCH);
    const char *msg = plug.vt->last_error(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "device 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "device 0"));
    void *got = (void *)1;
    CU_ASSERT_EQUAL(plug.vt->get_stream(h, &got), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(got); /* unchanged */
    CU_ASSERT_PTR_EQUAL(current(), p1);
    CU_ASSERT_EQUAL(workload(h, p1), HK_STATUS_OK); /* the handle still works */
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    OK(cuStreamDestroy(s1));
    OK(cuDevicePrimaryCtxRelease(d1));
}

SCENARIO(t_explicit_device)
{
    int last = ndev - 1;
    hk_handle_t *h = create(last, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NULL(current()); /* the caller's (empty) state is left alone */
    hk_handle_info_t i = info_of(h);
    CU_ASSERT_EQUAL(i.device, last);
    CU_ASSERT_EQUAL(i.owns_primary, 1);
    CU_ASSERT_EQUAL(i.context_id, ctx_id(primary(last)));
    CU_ASSERT_EQUAL(workload(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(current());
    CU_ASSERT_PTR_NULL(create(ndev, HK_STATUS_INVALID_DEVICE));
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(NULL), "does not exist"));
    CU_ASSERT_PTR_NULL(create(-7, HK_STATUS_INVALID_DEVICE));
    CU_ASSERT_PTR_NULL(current());
}

static hk_handle_t *shared_handle;

static void use_shared(void)
{
    CU_ASSERT_PTR_NULL(current());
    CU_ASSERT_EQUAL(workload(shared_handle, NULL), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(current());
}

SCENARIO(t_new_thread)
{
    shared_handle = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(shared_handle);
    in_thread(use_shared);
    in_thread(use_shared);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(shared_handle), HK_STATUS_OK);
}

SCENARIO(t_device_reset)
{
    OK(hk_rt_set_device(0));
    CUcontext p0 = current();
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    unsigned long long id1 = info_of(h).context_id;
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_OK);

    OK(hk_rt_device_reset());
    CUcontext after = current();
    hk_status_t st = workload(h, after);
    CU_ASSERT(st == HK_STATUS_OK || st == HK_STATUS_CONTEXT_RESET);
    if (st == HK_STATUS_OK) { /* re-armed: a new incarnation of the primary */
        hk_handle_info_t i = info_of(h);
        CU_ASSERT_NOT_EQUAL(i.context_id, id1);
        CU_ASSERT_EQUAL(i.context_id, ctx_id(p0));
        CU_ASSERT_EQUAL(i.owns_primary, 1);
    }

    /* With a stream of the old context, re-arming is impossible. */
    void *s = NULL;
    OK(hk_rt_stream_create(&s));
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s), HK_STATUS_OK);
    CU_ASSERT_EQUAL(workload(h, current()), HK_STATUS_OK);
    OK(hk_rt_device_reset());
    after = current();
    CU_ASSERT_EQUAL(workload(h, after), HK_STATUS_CONTEXT_RESET);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "stream"));
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(workload(h, after), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), after);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), 0); /* the runtime's retain went with the reset */
}

/* ---- threads, graphs, fork ---- */

static void *create_destroy_loop(void *arg)
{
    int *errors = arg;
    for (int k = 0; k < 25; k++) {
        hk_handle_t *h = NULL;
        hk_create_info_t ci = {sizeof ci, k % 2 ? HK_DEVICE_CURRENT : 1, 0};
        hk_status_t st = plug.vt->handle_create(&ci, &h);
        if (st != HK_STATUS_OK) {
            printf("\n  create: %d: %s\n", (int)st, plug.vt->last_error(NULL));
            (*errors)++;
            continue;
        }
        float r = -1.0f;
        if (plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST) != HK_STATUS_OK ||
            plug.blas->sdot(h, 0, NULL, 1, NULL, 1, &r) != HK_STATUS_OK || r != 0.0f)
            (*errors)++;
        if (plug.vt->handle_destroy(h) != HK_STATUS_OK)
            (*errors)++;
    }
    return NULL;
}

SCENARIO(t_eight_threads)
{
    size_t live = on_sim ? sim.live() : 0;
    int rc1 = on_sim ? sim.refcount(1) : 0;
    pthread_t t[8];
    int errors[8] = {0};
    for (int k = 0; k < 8; k++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[k], NULL, create_destroy_loop, &errors[k]), 0);
    for (int k = 0; k < 8; k++) {
        pthread_join(t[k], NULL);
        CU_ASSERT_EQUAL(errors[k], 0);
    }
    if (on_sim) {
        CU_ASSERT_EQUAL(sim.live(), live);
        CU_ASSERT_EQUAL(sim.refcount(1), rc1);
    }
}

SCENARIO(t_graph_capture)
{
    enum { N = 4099 };
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CUcontext p0 = primary(0);
    OK(cuCtxSetCurrent(p0));
    CUstream s = NULL;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    float x[N], y[N], a = 0.5f, res = 0.0f;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 5);
        y[i] = 1.0f;
    }
    void *dx, *dy, *da, *dr;
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, sizeof x, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, sizeof y, &dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, sizeof a, &da), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, sizeof res, &dr), HK_STATUS_OK);
    plug.mem->copy_to_device(h, dx, x, sizeof x);
    plug.mem->copy_to_device(h, dy, y, sizeof y);
    plug.mem->copy_to_device(h, da, &a, sizeof a);
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);

    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    hk_status_t st1 = plug.blas->saxpy(h, N, da, dx, 1, dy, 1);
    hk_status_t st2 = plug.blas->sdot(h, N, dx, 1, dy, 1, dr);
    OK(cuStreamEndCapture(s, &g));
    CU_ASSERT_EQUAL(st1, HK_STATUS_OK);
    CU_ASSERT_EQUAL(st2, HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p0);
    OK(cuGraphInstantiate(&ge, g, 0));
    for (int rep = 1; rep <= 3; rep++) {
        OK(cuGraphLaunch(ge, s));
        OK(cuStreamSynchronize(s));
        CU_ASSERT_EQUAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
        plug.mem->copy_to_host(h, y, dy, sizeof y);
        plug.mem->copy_to_host(h, &res, dr, sizeof res);
        CU_ASSERT_EQUAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
        double want = 0.0;
        int bad = 0;
        for (int i = 0; i < N; i++) {
            float yi = 1.0f + rep * 0.5f * x[i];
            bad += y[i] != yi;
            want += (double)x[i] * yi;
        }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_DOUBLE_EQUAL(res, want, want * 1e-6);
    }
    OK(cuGraphExecDestroy(ge));
    OK(cuGraphDestroy(g));
    plug.mem->free_(h, dx);
    plug.mem->free_(h, dy);
    plug.mem->free_(h, da);
    plug.mem->free_(h, dr);
    OK(cuStreamDestroy(s)); /* before the handle, whose retain keeps p0 alive */
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

SCENARIO(t_fork_child)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    fflush(stdout);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        /* The child reports through its exit status only. */
        int bad = 0;
        float r = 0.0f, v = 1.0f;
        bad |= plug.blas->sdot(h, 1, &v, 1, &v, 1, &r) != HK_STATUS_FORKED;
        bad |= plug.vt->synchronize(h) != HK_STATUS_FORKED;
        bad |= strstr(plug.vt->last_error(h), "fork") == NULL;
        hk_handle_t *h2 = NULL;
        bad |= plug.vt->handle_create(NULL, &h2) != HK_STATUS_FORKED;
        bad |= plug.vt->handle_destroy(h) != HK_STATUS_OK;
        _exit(bad ? 1 : 0);
    }
    int status = -1;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT_EQUAL(workload(h, NULL), HK_STATUS_OK); /* the parent is unaffected */
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- fault walk (simulation only, TARGETS.md R3) ---- */

static const char *const walk_entries[] = {
    "cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxGetId", "cuCtxGetDevice",
    "cuDeviceGet", "cuDeviceGetCount", "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxGetState",
    "cuLibraryLoadData", "cuLibraryGetKernel", "cuLibraryUnload", "cuKernelGetFunction",
    "cuMemAlloc", "cuMemFree", "cuMemsetD8Async", "cuStreamSynchronize",
    "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuLaunchKernel", "cuPointerGetAttributes",
    "cuMemFreeHost",
    /* from here on, entries whose failure hk-cuda may absorb with a fallback
     * (host pointer mode then copies the result instead of mapping it) */
    "cuMemHostAlloc", "cuMemHostGetDevicePointer",
};
#define WALK_FIRST_OPTIONAL 23 /* index of "cuMemHostAlloc" */

/* create, ops, destroy, as a careful user would: a failed free is retried.
 * Returns how many calls returned non-OK (+1000 for a wrong number without
 * a failing status); *destroy_failed tells whether destroy reported one. */
static int walk_sequence(int *destroy_failed)
{
    int failures = 0;
    hk_handle_t *h = NULL;
    hk_create_info_t ci = {sizeof ci, 1, HK_CREATE_CHECKED};
    *destroy_failed = 0;
    if (plug.vt->handle_create(&ci, &h) != HK_STATUS_OK)
        return 1;
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, r = 0.0f, a = 2.0f;
    void *d = NULL;
    hk_status_t st = plug.mem->alloc(h, sizeof v, &d);
    failures += st != HK_STATUS_OK;
    if (st == HK_STATUS_OK) {
        /* stop at the first failure, as a caller would: later ops would read
         * memory the failed step left unwritten */
        int ok = plug.mem->copy_to_device(h, d, v, sizeof v) == HK_STATUS_OK &&
                 plug.blas->sscal(h, 8, &a, d, 1) == HK_STATUS_OK &&
                 plug.blas->snrm2(h, 8, d, 1, &r) == HK_STATUS_OK;
        failures += !ok;
        if (ok && (r < 28.56f || r > 28.57f)) /* 2 * sqrt(204) */
            failures += 1000;
        size_t before = sim.live();
        if (plug.mem->free_(h, d) != HK_STATUS_OK) {
            failures++;
            /* retry when the block is still there (the failure may also have
             * been the restore of the caller's context after the free) */
            if (sim.live() == before)
                failures += 1000 * (plug.mem->free_(h, d) != HK_STATUS_OK);
        }
    }
    st = plug.vt->handle_destroy(h);
    if (st != HK_STATUS_OK) {
        failures++;
        *destroy_failed = 1;
    }
    return failures;
}

SCENARIO(t_fault_walk)
{
    int destroy_failed = 0;
    CU_ASSERT_EQUAL_FATAL(walk_sequence(&destroy_failed), 0); /* clean run first */
    size_t live = sim.live();
    int rc = sim.refcount(1);
    unsigned walked = 0, destroy_leaks = 0;
    for (size_t e = 0; e < sizeof walk_entries / sizeof walk_entries[0]; e++) {
        for (unsigned k = 1; k < 200; k++) {
            clear_current();
            sim.reset_counters();
            sim.fail(walk_entries[e], k, CUDA_ERROR_UNKNOWN);
            int failures = walk_sequence(&destroy_failed);
            unsigned long calls = sim.calls(walk_entries[e]);
            sim.fail_clear();
            if (failures >= 1000)
                printf("\n  %s #%u: wrong result or unfreeable memory without a status\n",
                       walk_entries[e], k);
            CU_ASSERT(failures < 1000);
            if (calls >= k && failures == 0 && e < WALK_FIRST_OPTIONAL)
                printf("\n  %s #%u failed silently\n", walk_entries[e], k);
            /* the failure surfaced, or was absorbed by a fallback where allowed */
            CU_ASSERT(calls < k || failures > 0 || e >= WALK_FIRST_OPTIONAL);
            if (destroy_failed) {
                /* destroy cannot be retried (the ABI frees the handle), so what
                 * the failing step held stays; count it and measure anew */
                destroy_leaks += sim.live() != live || sim.refcount(1) != rc;
                live = sim.live();
                rc = sim.refcount(1);
            } else {
                if (sim.live() != live || sim.refcount(1) != rc)
                    printf("\n  %s #%u leaked: %zu allocations (was %zu), refcount %d (was %d)\n",
                           walk_entries[e], k, sim.live(), live, sim.refcount(1), rc);
                CU_ASSERT_EQUAL(sim.live(), live);
                CU_ASSERT_EQUAL(sim.refcount(1), rc);
            }
            if (calls < k)
                break; /* the sequence makes fewer calls: this entry is walked */
            walked++;
        }
    }
    printf("\n  fault walk: %u injected failures, %u left a leak behind a failed destroy\n",
           walked, destroy_leaks);
    CU_ASSERT(walked > 40);
    CU_ASSERT_STRING_EQUAL(walk_entries[WALK_FIRST_OPTIONAL], "cuMemHostAlloc");
}

/* ---- registration ---- */

int hk_test_register(void)
{
    static char why[700];
    const char *skip = NULL, *rt_skip = NULL;
    on_sim = dlsym(RTLD_DEFAULT, "simcuda_is_simulated") != NULL;
    if (on_sim) {
        *(void **)&sim.refcount = dlsym(RTLD_DEFAULT, "simcuda_primary_refcount");
        *(void **)&sim.live = dlsym(RTLD_DEFAULT, "simcuda_live_allocations");
        *(void **)&sim.fail = dlsym(RTLD_DEFAULT, "simcuda_fail");
        *(void **)&sim.fail_clear = dlsym(RTLD_DEFAULT, "simcuda_fail_clear");
        *(void **)&sim.calls = dlsym(RTLD_DEFAULT, "simcuda_call_count");
        *(void **)&sim.reset_counters = dlsym(RTLD_DEFAULT, "simcuda_reset_counters");
        *(void **)&sim.launch_count = dlsym(RTLD_DEFAULT, "simcuda_launch_count");
        *(void **)&sim.launch_get = dlsym(RTLD_DEFAULT, "simcuda_launch_get");
        on_sim = sim.refcount && sim.live && sim.fail && sim.fail_clear && sim.calls &&
                 sim.reset_counters && sim.launch_count && sim.launch_get;
    }
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetCount(&ndev);
    if (r != CUDA_SUCCESS) {
        snprintf(why, sizeof why, "no usable CUDA driver (cuInit/cuDeviceGetCount: %d)", (int)r);
        skip = why;
    } else if (ndev < 2) {
        snprintf(why, sizeof why, "needs two devices, found %d", ndev);
        skip = why;
    } else if (hkct_plugin_open(&plug) != 0) {
        snprintf(why, sizeof why, "%s", plug.why);
        skip = why;
    }
    if (!hk_rt_available())
        rt_skip = hk_rt_why_unavailable();

    CU_pSuite s = hk_test_suite("hk-cuda context scenarios", NULL, NULL);
    struct {
        const char *name;
        CU_TestFunc fn;
        int needs_rt, needs_sim;
    } t[] = {
        {"nothing current: device 0 primary, current, retained", t_nothing_current, 0, 0},
        {"runtime device 1, runtime stream and memory", t_runtime_device_1, 1, 0},
        {"user context: not retained; destroyed first", t_user_context, 0, 0},
        {"device-0 handle called while device 1 is current", t_other_device_current, 0, 0},
        {"stream of device 1 given to a device-0 handle", t_stream_mismatch, 0, 0},
        {"explicit device leaves the caller's context alone", t_explicit_device, 0, 0},
        {"handle used from new threads", t_new_thread, 0, 0},
        {"device reset while a handle exists", t_device_reset, 1, 0},
        {"create/destroy from 8 threads at once", t_eight_threads, 0, 0},
        {"graph capture in device pointer mode replays", t_graph_capture, 0, 0},
        {"fork child gets FORKED", t_fork_child, 0, 0},
        {"fault walk over create/op/destroy", t_fault_walk, 0, 1},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        CU_pTest test = hk_test_add(s, t[k].name, t[k].fn);
        if (skip)
            hk_test_skip(test, skip);
        else if (t[k].needs_rt && rt_skip)
            hk_test_skip(test, rt_skip);
        else if (t[k].needs_sim && !on_sim)
            hk_test_skip(test, "fault injection needs the simulated driver");
    }
    return 0;
}
