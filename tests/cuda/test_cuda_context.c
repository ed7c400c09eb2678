/* hk-cuda context scenarios: one per row of docs/contexts.md.
 *
 * One program for both machines (see hkct_context.h): the simulated driver
 * in CI, with 1, 2 and 4 devices, and the real driver on a GPU machine, where
 * runtime operations go through tests/common/hk_rt.h. Each scenario starts
 * with nothing current and asserts the status, the numbers, and the context
 * that is current after every call: always the caller's. Only scenarios that
 * need a second device are skipped on a machine with one; the simulation's
 * introspection (reference counts, live blocks) is used only where present. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_rt.h"
#include "hkct_names.h"

#define ctx_id hkct_ctx_id
#define info_of hkct_info
#define workload hkct_workload

/* Asserts that the handle of info i is bound to context ctx of device dev,
 * holding a retain of its primary context or not (owns). */
static void bound_as(const hk_handle_info_t *i, int dev, CUcontext ctx, int owns)
{
    CU_ASSERT_EQUAL(i->device, dev);
    CU_ASSERT_EQUAL(i->owns_primary, owns);
    CU_ASSERT_EQUAL(i->context_id, ctx_id(ctx));
}

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
    bound_as(&i, 0, p0, 1);
    CU_ASSERT_STRING_EQUAL(i.plugin_name, "hk-cuda");
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc + 1);
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p0);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc + 1); /* kept by the kit until unload */
    CU_ASSERT_EQUAL(hkct_pop_all(p0), 1); /* exactly one entry, as a runtime call leaves */
    hkct_reload();
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc);
}

/* The runtime's current device (the last one), its stream and its memory. */
SCENARIO(t_runtime_device)
{
    int dev = ndev - 1;
    OK(hk_rt_set_device(dev));
    CUcontext p = current();
    CU_ASSERT_PTR_EQUAL(p, primary(dev));
    int rc = on_sim ? sim.refcount(dev) : 0;
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_EQUAL(current(), p);
    hk_handle_info_t i = info_of(h);
    CU_ASSERT_EQUAL(i.device, dev);
    CU_ASSERT_EQUAL(i.owns_primary, 1);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(dev), rc + 1);

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
    CU_ASSERT_PTR_EQUAL(current(), p);
    CU_ASSERT_EQUAL(plug.blas->sdot(h, N, dx, 1, dy, 1, &dot), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p);
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
    CU_ASSERT_PTR_EQUAL(current(), p);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(dev), rc + 1); /* kept by the kit until unload */
    hkct_reload();
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(dev), rc);
    OK(hk_rt_free(dx));
    OK(hk_rt_free(dy));
    OK(hk_rt_stream_destroy(s));
    CU_ASSERT_EQUAL(hkct_pop_all(p), 1);
}

SCENARIO(t_user_context)
{
    CUcontext uc = hkct_user_context(0);
    CU_ASSERT_PTR_EQUAL_FATAL(current(), uc);
    int rc = on_sim ? sim.refcount(0) : 0;
    size_t live = on_sim ? sim.live() : 0;
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_EQUAL(current(), uc);
    hk_handle_info_t i = info_of(h);
    bound_as(&i, 0, uc, 0);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc); /* not retained */
    CU_ASSERT_EQUAL(workload(h, uc), HK_STATUS_OK);

    /* The user destroys the context before the handle; it was current, so
     * it is popped and nothing is current. */
    OK(cuCtxDestroy(uc));
    CU_ASSERT_PTR_NULL(current());
    float r = 0.0f, dummy = 0.0f;
    CU_ASSERT_EQUAL(plug.blas->sdot(h, 1, &dummy, 1, &dummy, 1, &r), HK_STATUS_CONTEXT_DESTROYED);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "destroyed"));
    CU_ASSERT_PTR_NULL(current());
    void *p = NULL;
    CU_ASSERT_EQUAL(plug.mem->alloc(h, 64, &p), HK_STATUS_CONTEXT_DESTROYED);
    CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_CONTEXT_DESTROYED);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(current());
    if (on_sim) {
        CU_ASSERT_EQUAL(sim.refcount(0), rc);
        CU_ASSERT_EQUAL(sim.live(), live);
    }
}

/* A user context destroyed by another thread stays current, dead, on this
 * one (docs/contexts.md, fact 6 and cuCtxDestroy's documentation). */
static CUcontext doomed;

static void destroy_doomed(void)
{
    CU_ASSERT_EQUAL(cuCtxDestroy(doomed), CUDA_SUCCESS);
}

static void dead_current_thread(void)
{
    CUdevice d0;
    CU_ASSERT_EQUAL(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
    if (cuCtxCreate(&doomed, NULL, 0, d0) != CUDA_SUCCESS) {
        CU_FAIL("cuCtxCreate");
        return;
    }
    int rc[16] = {0};
    for (int d = 0; on_sim && d < ndev && d < 16; d++)
        rc[d] = sim.refcount(d);
    hkct_in_thread(destroy_doomed);
    CU_ASSERT_PTR_EQUAL(current(), doomed);

    /* bound to what is current: a destroyed context, nothing retained */
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_CONTEXT_DESTROYED);
    CU_ASSERT_PTR_NULL(h);
    /* "destroyed" from the simulation, CUDA_ERROR_CONTEXT_IS_DESTROYED from the driver */
    CU_ASSERT_PTR_NOT_NULL(strcasestr(plug.vt->last_error(NULL), "destroyed"));
    CU_ASSERT_PTR_EQUAL(current(), doomed);
    for (int d = 0; on_sim && d < ndev && d < 16; d++)
        CU_ASSERT_EQUAL(sim.refcount(d), rc[d]);

    /* an explicit device works, and the dead context is current again after
     * every call: it is given back as it was, not set anew */
    h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), doomed);
    if (h) {
        CU_ASSERT_EQUAL(workload(h, doomed), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_OK);
        CU_ASSERT_PTR_EQUAL(current(), doomed);
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
        CU_ASSERT_PTR_EQUAL(current(), doomed);
    }
    CU_ASSERT_EQUAL(hkct_pop_all(doomed), 1);
}

SCENARIO(t_destroyed_user_current)
{
    hkct_in_thread(dead_current_thread);
}

/* Device 1 current (held by a retain of our own), handle of device 0. */
SCENARIO(t_other_device_current)
{
    CUcontext p1 = hkct_retain_primary(1);
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
    CU_ASSERT_EQUAL(hkct_pop_all(p1), 1);
    hkct_release_primary(1);
}

/* A stream of a user context of device 0 given to a device-0 primary handle. */
SCENARIO(t_stream_same_device)
{
    CUstream s = NULL;
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CUcontext uc = hkct_user_context(0);
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s), HK_STATUS_STREAM_MISMATCH);
    const char *msg = plug.vt->last_error(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "another context of the same device"));
    CU_ASSERT_PTR_EQUAL(current(), uc);
    void *got = (void *)1;
    CU_ASSERT_EQUAL(plug.vt->get_stream(h, &got), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(got); /* unchanged */
    CU_ASSERT_EQUAL(workload(h, uc), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), uc);
    OK(cuStreamDestroy(s));
    OK(cuCtxDestroy(uc));
    CU_ASSERT_PTR_NULL(current());
}

SCENARIO(t_stream_mismatch)
{
    CUcontext p1 = hkct_retain_primary(1);
    CUstream s1 = NULL;
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
    CU_ASSERT_EQUAL(hkct_pop_all(p1), 1);
    hkct_release_primary(1);
}

SCENARIO(t_explicit_device)
{
    int last = ndev - 1;
    hk_handle_t *h = create(last, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_NULL(current()); /* the caller's (empty) state is left alone */
    hk_handle_info_t i = info_of(h);
    bound_as(&i, last, primary(last), 1);
    CU_ASSERT_EQUAL(workload(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(current());
    CU_ASSERT_PTR_NULL(create(ndev, HK_STATUS_INVALID_DEVICE));
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(NULL), "does not exist"));
    CU_ASSERT_PTR_NULL(create(-7, HK_STATUS_INVALID_DEVICE));
    CU_ASSERT_EQUAL(hkct_pop_all(NULL), 0);
}

static hk_handle_t *shared_handle;

static void use_shared(void)
{
    CU_ASSERT_PTR_NULL(current());
    CU_ASSERT_EQUAL(workload(shared_handle, NULL), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(current());
}

/* Made on one thread, used on new ones, where nothing is current. */
SCENARIO(t_new_thread)
{
    shared_handle = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(shared_handle);
    hkct_in_thread(use_shared);
    hkct_in_thread(use_shared);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(shared_handle), HK_STATUS_OK);
}

static void create_in_thread(void)
{
    CU_ASSERT_PTR_NULL(current());
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    if (!h)
        return;
    CUcontext p0 = primary(0);
    CU_ASSERT_PTR_EQUAL(current(), p0);
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hkct_pop_all(p0), 1);
}

/* A new thread has nothing current, whatever the creating thread has. */
SCENARIO(t_create_in_new_thread)
{
    CUcontext uc = hkct_user_context(0);
    hkct_in_thread(create_in_thread);
    CU_ASSERT_PTR_EQUAL(current(), uc);
    OK(cuCtxDestroy(uc));
}

SCENARIO(t_device_reset)
{
    OK(hk_rt_set_device(0));
    CUcontext p0 = current();
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    unsigned long long id1 = info_of(h).context_id;
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_OK);

    /* Reset: the primary stays current, inactive; the handle's default
     * stream died with nothing of the caller's, so it is re-armed. */
    OK(hk_rt_device_reset());
    CU_ASSERT_PTR_EQUAL(current(), p0);
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_OK);
    hk_handle_info_t i = info_of(h);
    CU_ASSERT_NOT_EQUAL(i.context_id, id1);
    CU_ASSERT_EQUAL(i.context_id, ctx_id(p0));
    CU_ASSERT_EQUAL(i.owns_primary, 1);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), 1); /* the handle's; the runtime's went */

    /* With a stream of the old incarnation, re-arming is impossible. */
    void *s = NULL;
    OK(hk_rt_stream_create(&s));
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s), HK_STATUS_OK);
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_OK);
    OK(hk_rt_device_reset());
    CU_ASSERT_PTR_EQUAL(current(), p0);
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_CONTEXT_RESET);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "stream"));
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p0);
    if (on_sim) /* the runtime's retain went with the reset; the handle's is kept */
        CU_ASSERT_EQUAL(sim.refcount(0), 1);
    CU_ASSERT_EQUAL(hkct_pop_all(p0), 1);
    hkct_reload();
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), 0);
}

/* A reset primary left current is bound and re-activated, as the runtime's
 * next call would treat it. */
SCENARIO(t_reset_primary_current)
{
    OK(hk_rt_set_device(0));
    CUcontext p0 = current();
    OK(hk_rt_device_reset());
    CU_ASSERT_PTR_EQUAL(current(), p0);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.active(0), 0);
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_PTR_EQUAL(current(), p0);
    hk_handle_info_t i = info_of(h);
    bound_as(&i, 0, p0, 1); /* active again */
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), 1);
    CU_ASSERT_EQUAL(workload(h, p0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p0);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), 1); /* kept by the kit until unload */
    CU_ASSERT_EQUAL(hkct_pop_all(p0), 1);
    hkct_reload();
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), 0);
}

/* docs/contexts.md, "What the kit keeps between handles". n create/destroy cycles
 * of a lone handle in a process where nothing else holds the primary (the
 * runtime's retain dropped by a reset) return every time with the same
 * incarnation (its context ID): the primary is not torn down and built again
 * between them. The kit's one retain survives a reset, which the next handle
 * re-activates; the module's unload gives it back exactly once. */
static unsigned long long keep_cycles(int n, CUdevice d0, int rc)
{
    unsigned long long first = 0;
    unsigned flags = 0;
    int active = 0;
    for (int k = 0; k < n; k++) {
        hk_handle_t *h = create(0, HK_STATUS_OK);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        unsigned long long id = info_of(h).context_id;
        if (k == 0)
            first = id;
        CU_ASSERT_EQUAL(id, first);
        CU_ASSERT_EQUAL(workload(h, NULL), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
        CU_ASSERT_PTR_NULL(current());
        OK(cuDevicePrimaryCtxGetState(d0, &flags, &active));
        CU_ASSERT_EQUAL(active, 1);
        if (on_sim)
            CU_ASSERT_EQUAL(sim.refcount(0), rc + 1); /* the kit's one retain */
    }
    return first;
}

static void reset_device0(void)
{
    OK(hk_rt_set_device(0));
    OK(hk_rt_device_reset());
    hkct_clear_current();
}

SCENARIO(t_cycles_keep_primary)
{
    CUdevice d0;
    unsigned flags = 0;
    int active = 1;
    OK(cuDeviceGet(&d0, 0));
    reset_device0();
    int rc = on_sim ? sim.refcount(0) : 0;
    OK(cuDevicePrimaryCtxGetState(d0, &flags, &active));
    CU_ASSERT_EQUAL_FATAL(active, 0); /* nothing holds it: a cycle could tear it down */
    unsigned long long first = keep_cycles(8, d0, rc);

    /* A reset between cycles: the kept retain still counts; the next handle
     * activates a new incarnation, which stays for the cycles after it. */
    reset_device0();
    OK(cuDevicePrimaryCtxGetState(d0, &flags, &active));
    CU_ASSERT_EQUAL(active, 0);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc + 1);
    CU_ASSERT_NOT_EQUAL(keep_cycles(3, d0, rc), first);

    /* Reset again, so the kept retain is of a dead incarnation, while a
     * retain of our own keeps the primary active: the unload gives the kit's
     * back once (a second release would take ours). */
    reset_device0();
    CUcontext p = NULL;
    OK(cuDevicePrimaryCtxRetain(&p, d0));
    hkct_reload();
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc + 1); /* ours */
    OK(cuDevicePrimaryCtxRelease(d0));
    OK(cuDevicePrimaryCtxGetState(d0, &flags, &active));
    CU_ASSERT_EQUAL(active, 0); /* nothing is left holding it */
    if (on_sim)
        CU_ASSERT_EQUAL(sim.refcount(0), rc);
}

/* ---- threads, graphs, fork ---- */

static int busy_device;

static void *create_destroy_loop(void *arg)
{
    int *errors = arg;
    /* Half the handles bind device 0's primary from nothing current, which
     * other threads activate and release meanwhile: many rounds on the
     * simulation, where they are cheap, to catch a race in the binding. */
    int rounds = on_sim ? 200 : 25;
    for (int k = 0; k < rounds; k++) {
        hk_handle_t *h = NULL;
        hk_create_info_t ci = {sizeof ci, k % 2 ? HK_DEVICE_CURRENT : busy_device, 0};
        hk_status_t st = plug.vt->handle_create(&ci, &h);
        if (st != HK_STATUS_OK) {
            printf("\n  create: %d: %s\n", (int)st, plug.vt->last_error(NULL));
            (*errors)++;
            continue;
        }
        float r = -1.0f;
        if (plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST) != HK_STATUS_OK ||
            (st = plug.blas->sdot(h, 0, NULL, 1, NULL, 1, &r)) != HK_STATUS_OK || r != 0.0f) {
            printf("\n  sdot: %d, %g: %s\n", (int)st, r, plug.vt->last_error(h));
            (*errors)++;
        }
        if ((st = plug.vt->handle_destroy(h)) != HK_STATUS_OK) {
            printf("\n  destroy: %d: %s\n", (int)st, plug.vt->last_error(NULL));
            (*errors)++;
        }
    }
    return NULL;
}

SCENARIO(t_eight_threads)
{
    busy_device = ndev - 1;
    size_t live = on_sim ? sim.live() : 0;
    int rc = on_sim ? sim.refcount(busy_device) : 0;
    pthread_t t[8];
    int errors[8] = {0};
    for (int k = 0; k < 8; k++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[k], NULL, create_destroy_loop, &errors[k]), 0);
    for (int k = 0; k < 8; k++) {
        pthread_join(t[k], NULL);
        CU_ASSERT_EQUAL(errors[k], 0);
    }
    if (on_sim) {
        /* what the destroys left for later creates goes with a trim; the
         * kit's retain too */
        CU_ASSERT(sim.live() >= live);
        CU_ASSERT_EQUAL(sim.refcount(busy_device), rc + 1); /* the kit's */
        hkct_trim();
        CU_ASSERT_EQUAL(sim.live(), live);
        CU_ASSERT_EQUAL(sim.refcount(busy_device), rc);
        hkct_reload();
        CU_ASSERT_EQUAL(sim.refcount(busy_device), rc);
    }
}

SCENARIO(t_graph_capture)
{
    enum { N = 4099 };
    const hk_memory_v1_t *m = plug.mem;
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
    CU_ASSERT_EQUAL_FATAL(m->alloc(h, sizeof x, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(m->alloc(h, sizeof y, &dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(m->alloc(h, sizeof a, &da), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(m->alloc(h, sizeof res, &dr), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->copy_to_device(h, dx, x, sizeof x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->copy_to_device(h, dy, y, sizeof y), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->copy_to_device(h, da, &a, sizeof a), HK_STATUS_OK);
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
        CU_ASSERT_EQUAL(m->copy_to_host(h, y, dy, sizeof y), HK_STATUS_OK);
        CU_ASSERT_EQUAL(m->copy_to_host(h, &res, dr, sizeof res), HK_STATUS_OK);
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
    CU_ASSERT_EQUAL(m->free_(h, dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->free_(h, dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->free_(h, da), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->free_(h, dr), HK_STATUS_OK);
    OK(cuStreamDestroy(s)); /* before the handle, whose retain keeps p0 alive */
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p0);
}

/* Runs child() in a fork() child; it reports through its exit status. */
static void in_child(int (*child)(void *), void *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        _exit(child(arg));
    int status = -1;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        printf("\n  the fork child found %d wrong answers\n", WEXITSTATUS(status));
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int forked_with_handle(void *arg)
{
    hk_handle_t *h = arg;
    int bad = 0;
    float r = 0.0f, v = 1.0f;
    bad += plug.blas->sdot(h, 1, &v, 1, &v, 1, &r) != HK_STATUS_FORKED;
    bad += plug.vt->synchronize(h) != HK_STATUS_FORKED;
    bad += strstr(plug.vt->last_error(h), "fork") == NULL;
    hk_handle_t *h2 = NULL;
    bad += plug.vt->handle_create(NULL, &h2) != HK_STATUS_FORKED;
    bad += strstr(plug.vt->last_error(NULL), "fork") == NULL;
    bad += plug.vt->handle_destroy(h) != HK_STATUS_OK;
    return bad;
}

/* hk-cuda initialised CUDA before the fork: its fork handler marks the child. */
SCENARIO(t_fork_child)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    in_child(forked_with_handle, h);
    CU_ASSERT_EQUAL(workload(h, NULL), HK_STATUS_OK); /* the parent is unaffected */
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

static int forked_fresh(void *arg)
{
    hkct_plugin_t *fresh = arg;
    hk_handle_t *h = NULL;
    int bad = 0;
    hk_status_t st = fresh->vt->handle_create(NULL, &h);
    if (st != HK_STATUS_FORKED)
        printf("\n  child: create gave %d: %s\n", (int)st, fresh->vt->last_error(NULL));
    bad += st != HK_STATUS_FORKED;
    bad += h != NULL;
    bad += strstr(fresh->vt->last_error(NULL), "fork") == NULL;
    return bad;
}

/* The program called cuInit itself; a copy of hk-cuda that has done nothing
 * yet (so no fork handler of its own) is first used in the fork child. */
SCENARIO(t_fork_child_app_first)
{
    hkct_plugin_t fresh;
    if (hkct_plugin_open_copy(&fresh) != 0) {
        printf("\n  %s\n", fresh.why);
        CU_FAIL_FATAL("cannot load a copy of hk-cuda");
    }
    in_child(forked_fresh, &fresh);
    /* the same copy works in the parent: the child's answer was about fork */
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL(fresh.vt->handle_create(NULL, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(fresh.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(dlclose(fresh.dl), 0); /* the copy's kit gives back the retain it keeps */
}

/* ---- registration ---- */

static const hkct_scenario_t scenarios[] = {
    {"nothing current: device 0 primary, current, retained", t_nothing_current, 1, 0, 0},
    {"runtime's device current: its primary, stream and memory", t_runtime_device, 1, 1, 0},
    {"user context: not retained; destroyed first", t_user_context, 1, 0, 0},
    {"user context destroyed by another thread, still current", t_destroyed_user_current, 1,
     0, 0},
    {"device-0 handle called while device 1 is current", t_other_device_current, 2, 0, 0},
    {"stream of another context of the same device", t_stream_same_device, 1, 0, 0},
    {"stream of device 1 given to a device-0 handle", t_stream_mismatch, 2, 0, 0},
    {"explicit device leaves the caller's context alone", t_explicit_device, 1, 0, 0},
    {"handle used from new threads", t_new_thread, 1, 0, 0},
    {"handle made on a new thread", t_create_in_new_thread, 1, 0, 0},
    {"device reset while a handle exists: re-armed or CONTEXT_RESET", t_device_reset, 1, 1, 0},
    {"reset primary current at create: re-activated and bound", t_reset_primary_current, 1, 1,
     0},
    {"create/destroy cycles keep the primary; unload gives it back", t_cycles_keep_primary, 1,
     1, 0},
    {"create/destroy from 8 threads at once", t_eight_threads, 1, 0, 0},
    {"graph capture in device pointer mode replays", t_graph_capture, 1, 0, 0},
    {"fork child gets FORKED (hk-cuda initialised CUDA)", t_fork_child, 1, 0, 0},
    {"fork child gets FORKED (the program initialised CUDA)", t_fork_child_app_first, 1, 0, 0},
};

int hk_test_register(void)
{
    static char why[700];
    const char *skip = hkct_setup(why, sizeof why) == 0 ? NULL : why;
    const char *rt_skip = hk_rt_available() ? NULL : hk_rt_why_unavailable();
    CU_pSuite s = hk_test_suite("hk-cuda context scenarios", NULL, NULL);
    const char *sim_why = "needs the simulated driver (fault injection)";
    hkct_add_scenarios(s, scenarios, sizeof scenarios / sizeof scenarios[0], skip, rt_skip,
                       sim_why);
    CU_pSuite c = hk_test_suite("hk-cuda calls leave nothing behind", NULL, NULL);
    hkct_add_scenarios(c, hkct_call_scenarios, hkct_call_scenario_count, skip, rt_skip, sim_why);
    hkct_add_scenarios(c, hkct_refused_scenarios, hkct_refused_scenario_count, skip, rt_skip,
                       sim_why);
    CU_pSuite d = hk_test_suite("hk-cuda destroy waits for the handle's streams", NULL, NULL);
    hkct_add_scenarios(d, hkct_destroy_scenarios, hkct_destroy_scenario_count, skip, rt_skip,
                       "needs the simulated driver (it counts the driver calls)");
    CU_pSuite t = hk_test_suite("hk-cuda trim racing creates, calls and destroys", NULL, NULL);
    hkct_add_scenarios(t, hkct_trim_scenarios, hkct_trim_scenario_count, skip, rt_skip,
                       "needs the simulated driver (paused calls)");
    return 0;
}
