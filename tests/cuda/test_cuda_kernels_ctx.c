/* hk.kernels/1 and hk.cuda/1 through hk-cuda: the caller's context is kept,
 * one library on every device and context, a reset primary, unload while the
 * library is in use, 8 threads on one handle, stream capture, and the
 * handle's CUDA objects for code that uses CUDA itself. See
 * test_cuda_kernels.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_rt.h"
#include "test_cuda_kernels.h"
#include "hkct_names.h"

static hk_kernel_t *find(hk_handle_t *h, hk_library_t *lib, const char *name)
{
    hk_kernel_t *k = NULL;
    CU_ASSERT_EQUAL(tk_k->get_kernel(h, lib, name, &k), HK_STATUS_OK);
    return k;
}

/* Every slot of hk.kernels/1 and hk.cuda/1, from a caller with expect
 * current, leaves it current; the launch ran in the handle's context. */
static void slots_keep(hk_handle_t *h, CUcontext expect, CUcontext handle_ctx)
{
    hk_library_t *lib = NULL;
    void *p = NULL;
    int dev = -1, ord = -1;
    CU_ASSERT_EQUAL(tk_k->load(h, tk_ptx, tk_ptx_size, &lib), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    if (!lib)
        return;
    hk_kernel_t *k = find(h, lib, "hkt_axpy");
    CU_ASSERT_PTR_EQUAL(current(), expect);
    hk_kernel_attributes_t a = {.size = sizeof a};
    CU_ASSERT_EQUAL(tk_k->get_attributes(h, k, &a), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    CU_ASSERT_EQUAL(tk_axpy_checked(h, k, 1000), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    if (on_sim)
        CU_ASSERT_PTR_EQUAL(tk_last_launch_context(), handle_ctx);
    CU_ASSERT_EQUAL(tk_k->launch(h, k, 0, 1, 1, 1, 1, 1, 0, NULL), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(tk_k->get_function(h, k, &p), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), expect);
    CU_ASSERT_EQUAL(tk_c->get_context(h, &p), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(p, handle_ctx);
    CU_ASSERT_EQUAL(tk_c->get_device(h, &dev, &ord), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), expect);
}

/* A handle on device 0 into *h, the PTX image loaded through it into *lib
 * (both asserted, fatally), and its hkt_axpy (asserted found). */
static hk_kernel_t *axpy_on_device0(hk_handle_t **h, hk_library_t **lib)
{
    *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*h);
    *lib = tk_load(*h, tk_ptx, tk_ptx_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*lib);
    return find(*h, *lib, "hkt_axpy");
}

/* A device-0 handle used with nothing, a user context of device 0 and (with
 * two devices) device 1's primary current. */
SCENARIO(t_caller_context)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CUcontext p0 = primary(0), uc = NULL;
    slots_keep(h, NULL, p0);
    CUdevice d0;
    OK(cuDeviceGet(&d0, 0));
    OK(cuCtxCreate(&uc, NULL, 0, d0));
    slots_keep(h, uc, p0);
    OK(cuCtxDestroy(uc));
    if (ndev > 1) {
        CUcontext p1 = hkct_retain_primary(1);
        OK(cuCtxPushCurrent(p1));
        slots_keep(h, p1, p0);
        hkct_clear_current();
        hkct_release_primary(1);
    }
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* One library, loaded once, used by handles on every device and by a handle
 * bound to a user context: each launch right, in its own context. */
SCENARIO(t_every_context)
{
    hk_handle_t *h[4] = {NULL, NULL, NULL, NULL};
    CUcontext want[4] = {NULL, NULL, NULL, NULL}, uc = NULL;
    int n = 0;
    for (int d = 0; d < ndev && d < 3; d++) {
        h[n] = create(d, HK_STATUS_OK);
        want[n++] = primary(d);
    }
    CUdevice d0;
    OK(cuDeviceGet(&d0, 0));
    OK(cuCtxCreate(&uc, NULL, 0, d0));
    h[n] = create(HK_DEVICE_CURRENT, HK_STATUS_OK); /* binds the user context */
    want[n++] = uc;
    hk_library_t *lib = tk_load(h[0], tk_ptx, tk_ptx_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    hk_kernel_t *k = find(h[0], lib, "hkt_axpy");
    for (int i = 0; i < n; i++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(h[i]);
        CU_ASSERT_EQUAL(tk_axpy_checked(h[i], k, 777), HK_STATUS_OK);
        if (on_sim)
            CU_ASSERT_PTR_EQUAL(tk_last_launch_context(), want[i]);
        CU_ASSERT_PTR_EQUAL(current(), uc);
    }
    /* the other handles launched it: not unloadable until they are gone */
    CU_ASSERT_EQUAL(tk_k->unload(h[0], lib), n > 1 ? HK_STATUS_BUSY : HK_STATUS_OK);
    for (int i = n - 1; i >= 1; i--)
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h[i]), HK_STATUS_OK);
    if (n > 1)
        CU_ASSERT_EQUAL(tk_k->unload(h[0], lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h[0]), HK_STATUS_OK);
    hkct_clear_current();
    OK(cuCtxDestroy(uc));
}

/* The runtime resets the device (cudaDeviceReset) between two launches:
 * the next launch re-arms the handle and runs in the new incarnation, with
 * the library loaded before the reset. */
SCENARIO(t_reset)
{
    OK(hk_rt_set_device(0));
    CUcontext p0 = current();
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    hk_library_t *lib = tk_load(h, tk_fatbin, tk_fatbin_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    hk_kernel_t *k = find(h, lib, "hkt_axpy");
    CU_ASSERT_EQUAL(tk_axpy_checked(h, k, 500), HK_STATUS_OK);
    unsigned long long before = hkct_info(h).context_id;
    OK(hk_rt_device_reset());
    CU_ASSERT_PTR_EQUAL(current(), p0);
    CU_ASSERT_EQUAL(tk_axpy_checked(h, k, 500), HK_STATUS_OK);
    CU_ASSERT_NOT_EQUAL(hkct_info(h).context_id, before);
    CU_ASSERT_EQUAL(hkct_info(h).context_id, hkct_ctx_id(p0));
    CU_ASSERT_PTR_EQUAL(current(), p0);
    CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hkct_pop_all(p0), 1);
}

/* ---- unload while in use ---- */

typedef struct launcher {
    hk_handle_t *h;
    hk_kernel_t *k;
    hk_status_t st;
} launcher_t;

static void *launch_block(void *arg)
{
    launcher_t *l = arg;
    l->st = tk_k->launch(l->h, l->k, 1, 1, 1, 1, 1, 1, 0, NULL);
    return NULL;
}

/* A launch held inside the simulated driver: unload from another handle is
 * BUSY (a launch in progress), then BUSY (the launching handle is alive),
 * then, once it is destroyed, done. No driver call is made while refusing. */
SCENARIO(t_unload_in_flight)
{
    hk_handle_t *a = create(0, HK_STATUS_OK), *b = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    size_t libraries = sim.libraries(); /* hk-cuda's own */
    hk_library_t *lib = tk_load(b, tk_block_ptx, strlen(tk_block_ptx) + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    launcher_t l = {a, find(b, lib, "hkt_block"), HK_STATUS_INTERNAL};
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, launch_block, &l), 0);
    tk_block_wait_started();
    /* the simulated driver is held by the launch: these must not call it */
    hk_status_t st = tk_k->unload(b, lib);
    const char *msg = plug.vt->last_error(b);
    tk_block_release();
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(st, HK_STATUS_BUSY);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "in progress"));
    CU_ASSERT_EQUAL(l.st, HK_STATUS_OK);
    CU_ASSERT_EQUAL(tk_k->unload(b, lib), HK_STATUS_BUSY);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(b), "1 other handle"));
    CU_ASSERT_EQUAL(tk_k->launch(l.h, l.k, 1, 1, 1, 1, 1, 1, 0, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(a), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tk_k->unload(b, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.libraries(), libraries);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(b), HK_STATUS_OK);
}

/* ---- driver failures (simulated driver) ---- */

/* One hk.kernels/1 sequence with the k-th call of entry failing: every call
 * either succeeds (the failure given back by a second try) or fails naming
 * the driver's error; afterwards nothing is left loaded and the caller's
 * context (none) is as it was. Returns whether the failure happened. */
static int fault_run(hk_handle_t *h, void *dx, void *dy, const char *entry, unsigned k,
                     size_t libraries, int *problems)
{
    static const char *const absorbable = " cuCtxPopCurrent cuLibraryUnload ";
    hk_library_t *lib = NULL;
    hk_kernel_t *kern = NULL;
    hk_kernel_attributes_t a = {.size = sizeof a};
    void *fn = NULL;
    hk_status_t st[6] = {HK_STATUS_OK, HK_STATUS_OK, HK_STATUS_OK, HK_STATUS_OK,
                         HK_STATUS_OK, HK_STATUS_OK};
    int n = 0;
    char key[64];
    snprintf(key, sizeof key, " %s ", entry);
    sim.reset_counters();
    sim.fail(entry, k, CUDA_ERROR_UNKNOWN);
    if ((st[n++] = tk_k->load(h, tk_ptx, tk_ptx_size, &lib)) == HK_STATUS_OK &&
        (st[n++] = tk_k->get_kernel(h, lib, "hkt_axpy", &kern)) == HK_STATUS_OK &&
        (st[n++] = tk_k->get_attributes(h, kern, &a)) == HK_STATUS_OK &&
        (st[n++] = tk_axpy(h, kern, 100, 1.0f, dx, dy)) == HK_STATUS_OK &&
        (st[n++] = tk_k->get_function(h, kern, &fn)) == HK_STATUS_OK)
        st[n++] = tk_k->unload(h, lib);
    int landed = sim.calls(entry) >= k;
    sim.fail_clear();
    hk_status_t last = st[n - 1];
    if (last != HK_STATUS_OK && !strstr(plug.vt->last_error(h), "CUDA_ERROR_UNKNOWN")) {
        printf("\n  %s #%u: status %d, message \"%s\"", entry, k, (int)last,
               plug.vt->last_error(h));
        (*problems)++;
    }
    if (last == HK_STATUS_OK && landed && !strstr(absorbable, key)) {
        printf("\n  %s #%u: the failure was swallowed", entry, k);
        (*problems)++;
    }
    if (lib && (n < 6 || last != HK_STATUS_OK) && tk_k->unload(h, lib) != HK_STATUS_OK)
        (*problems)++;
    if (sim.libraries() != libraries || sim.depth() != 0) {
        printf("\n  %s #%u: %zu libraries (were %zu), stack depth %d", entry, k,
               sim.libraries(), libraries, sim.depth());
        (*problems)++;
    }
    return landed;
}

SCENARIO(t_faults)
{
    static const char *const entries[] = {
        "cuLibraryLoadData", "cuLibraryGetModule", "cuLibraryGetKernel", "cuKernelGetFunction",
        "cuKernelGetAttribute", "cuLaunchKernel", "cuLibraryUnload", "cuCtxGetCurrent",
        "cuCtxGetId", "cuCtxPushCurrent", "cuCtxPopCurrent",
    };
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    void *dx = NULL, *dy = NULL;
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, 400, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, 400, &dy), HK_STATUS_OK);
    size_t libraries = sim.libraries();
    int problems = 0, injected = 0;
    for (size_t e = 0; e < sizeof entries / sizeof entries[0]; e++)
        for (unsigned k = 1; k < 100 && fault_run(h, dx, dy, entries[e], k, libraries,
                                                  &problems); k++)
            injected++;
    printf("\n  %d failures injected, %d problems ", injected, problems);
    CU_ASSERT_EQUAL(problems, 0);
    CU_ASSERT(injected >= 20);
    CU_ASSERT_EQUAL(plug.mem->free_(h, dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->free_(h, dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- 8 threads on one handle ---- */

enum { T_THREADS = 8, T_N = 2048, T_ROUNDS = 25 };

typedef struct worker {
    hk_handle_t *h;
    hk_kernel_t *k;
    void *dx, *dy;
    int user_context; /* run with a user context of device 0 current */
    int bad;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    CUcontext uc = NULL;
    CUdevice d0;
    if (w->user_context && (cuDeviceGet(&d0, 0) != CUDA_SUCCESS ||
                            cuCtxCreate(&uc, NULL, 0, d0) != CUDA_SUCCESS))
        w->bad++;
    for (int r = 0; r < T_ROUNDS; r++)
        w->bad += tk_axpy(w->h, w->k, T_N, 1.0f, w->dx, w->dy) != HK_STATUS_OK;
    CUcontext now = NULL;
    w->bad += cuCtxGetCurrent(&now) != CUDA_SUCCESS || now != uc;
    if (uc)
        w->bad += cuCtxDestroy(uc) != CUDA_SUCCESS;
    return NULL;
}

/* [handle-safe]: 8 threads launch at once on one handle, half of them with a
 * user context current; every result checked. */
SCENARIO(t_threads)
{
    const hk_memory_v1_t *m = plug.mem;
    hk_handle_t *h;
    hk_library_t *lib;
    hk_kernel_t *k = axpy_on_device0(&h, &lib);
    static float x[T_N], y[T_N];
    worker_t w[T_THREADS];
    pthread_t t[T_THREADS];
    for (int i = 0; i < T_N; i++)
        x[i] = (float)(i % 9);
    memset(w, 0, sizeof w);
    for (int i = 0; i < T_THREADS; i++) {
        w[i] = (worker_t){h, k, NULL, NULL, i % 2, 0};
        CU_ASSERT_EQUAL_FATAL(m->alloc(h, sizeof x, &w[i].dx), HK_STATUS_OK);
        CU_ASSERT_EQUAL_FATAL(m->alloc(h, sizeof y, &w[i].dy), HK_STATUS_OK);
        CU_ASSERT_EQUAL(m->copy_to_device(h, w[i].dx, x, sizeof x), HK_STATUS_OK);
        CU_ASSERT_EQUAL(m->memset_(h, w[i].dy, 0, sizeof y), HK_STATUS_OK);
    }
    for (int i = 0; i < T_THREADS; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, work, &w[i]), 0);
    for (int i = 0; i < T_THREADS; i++)
        pthread_join(t[i], NULL);
    CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_OK);
    for (int i = 0; i < T_THREADS; i++) {
        CU_ASSERT_EQUAL(w[i].bad, 0);
        CU_ASSERT_EQUAL(m->copy_to_host(h, y, w[i].dy, sizeof y), HK_STATUS_OK);
        int bad = 0;
        for (int j = 0; j < T_N; j++)
            bad += y[j] != (float)T_ROUNDS * x[j];
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(m->free_(h, w[i].dx), HK_STATUS_OK);
        CU_ASSERT_EQUAL(m->free_(h, w[i].dy), HK_STATUS_OK);
    }
    CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- capture, and the handle's CUDA objects ---- */

/* A launch through the table, captured on the handle's stream into a graph,
 * replayed three times. */
SCENARIO(t_capture)
{
    enum { N = 3001 };
    const hk_memory_v1_t *m = plug.mem;
    hk_handle_t *h;
    hk_library_t *lib;
    hk_kernel_t *k = axpy_on_device0(&h, &lib);
    CUcontext p0 = primary(0);
    OK(cuCtxPushCurrent(p0));
    CUstream s = NULL;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    static float x[N], y[N];
    void *dx = NULL, *dy = NULL;
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 7);
    CU_ASSERT_EQUAL_FATAL(m->alloc(h, sizeof x, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(m->alloc(h, sizeof y, &dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->copy_to_device(h, dx, x, sizeof x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->memset_(h, dy, 0, sizeof y), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s), HK_STATUS_OK);
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    hk_status_t st = tk_axpy(h, k, N, 2.0f, dx, dy);
    OK(cuStreamEndCapture(s, &g));
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(current(), p0);
    OK(cuGraphInstantiate(&ge, g, 0));
    for (int rep = 1; rep <= 3; rep++)
        OK(cuGraphLaunch(ge, s));
    OK(cuStreamSynchronize(s));
    CU_ASSERT_EQUAL(m->copy_to_host(h, y, dy, sizeof y), HK_STATUS_OK);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += y[i] != 6.0f * x[i];
    CU_ASSERT_EQUAL(bad, 0);
    OK(cuGraphExecDestroy(ge));
    OK(cuGraphDestroy(g));
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->free_(h, dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->free_(h, dy), HK_STATUS_OK);
    OK(cuStreamDestroy(s));
    CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    hkct_clear_current();
}

/* hk.cuda/1: the context, device and stream, used by the driver directly:
 * memory allocated in the handle's context and a raw launch of the kernel's
 * function there work with the handle's own launches. */
SCENARIO(t_cuda_table)
{
    hk_handle_t *h = create(HK_DEVICE_CURRENT, HK_STATUS_OK); /* nothing current: device 0 */
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    void *ctx = NULL, *stream = (void *)1;
    int dev = -1, ord = -1;
    CU_ASSERT_EQUAL(tk_c->get_context(h, &ctx), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(ctx, current()); /* the runtime's rule: it stays current */
    CU_ASSERT_PTR_EQUAL(ctx, primary(0));
    CU_ASSERT_EQUAL(tk_c->get_device(h, &dev, &ord), HK_STATUS_OK);
    CUdevice d0;
    OK(cuDeviceGet(&d0, 0));
    CU_ASSERT_EQUAL(dev, d0);
    CU_ASSERT_EQUAL(ord, hkct_info(h).device);
    CU_ASSERT_EQUAL(tk_c->get_stream(h, &stream), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(stream);
    CU_ASSERT_EQUAL(tk_c->get_context(h, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(tk_c->get_device(h, &dev, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(tk_c->get_stream(h, NULL), HK_STATUS_NULL_POINTER);
    hkct_clear_current();
    /* the caller's own driver work in the handle's context */
    CUcontext popped = NULL;
    CUstream s = NULL;
    CUdeviceptr dy = 0;
    OK(cuCtxPushCurrent((CUcontext)ctx));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuMemAlloc(&dy, 64 * sizeof(float)));
    OK(cuCtxPopCurrent(&popped));
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tk_c->get_stream(h, &stream), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(stream, s);
    hk_library_t *lib = tk_load(h, tk_ptx, tk_ptx_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    hk_kernel_t *k = find(h, lib, "hkt_axpy");
    void *fn = NULL;
    CU_ASSERT_EQUAL(tk_k->get_function(h, k, &fn), HK_STATUS_OK);
    long long n = 64;
    float a = 1.0f;
    void *px = (void *)(uintptr_t)dy, *py = (void *)(uintptr_t)dy;
    void *args[] = {&n, &a, &px, &py};
    OK(cuCtxPushCurrent((CUcontext)ctx));
    OK(cuMemsetD32(dy, 0x3f800000u, 64)); /* 1.0f */
    OK(cuLaunchKernel((CUfunction)fn, 1, 1, 1, 64, 1, 1, 0, s, args, NULL)); /* y = 2 */
    OK(cuCtxPopCurrent(&popped));
    CU_ASSERT_EQUAL(tk_axpy(h, k, n, 1.0f, px, py), HK_STATUS_OK); /* y = 4 */
    float y[64];
    OK(cuCtxPushCurrent((CUcontext)ctx));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH(y, dy, sizeof y));
    int bad = 0;
    for (int i = 0; i < 64; i++)
        bad += y[i] != 4.0f;
    CU_ASSERT_EQUAL(bad, 0);
    OK(cuMemFree(dy));
    OK(cuCtxPopCurrent(&popped));
    CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, NULL), HK_STATUS_OK);
    OK(cuCtxPushCurrent((CUcontext)ctx));
    OK(cuStreamDestroy(s));
    OK(cuCtxPopCurrent(&popped));
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    /* a handle bound to a user context gives that context */
    CUcontext uc = NULL;
    OK(cuCtxCreate(&uc, NULL, 0, d0));
    h = create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(tk_c->get_context(h, &ctx), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(ctx, uc);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    OK(cuCtxDestroy(uc));
}

const hkct_scenario_t tk_ctx_scenarios[] = {
    {"every slot keeps the caller's context (nothing, user, other device)", t_caller_context,
     1, 0, 0},
    {"one library on every device and on a user context", t_every_context, 1, 0, 0},
    {"the device reset by the runtime between launches", t_reset, 1, 1, 0},
    {"unload while a launch is in progress, then while referenced", t_unload_in_flight, 1, 0,
     1},
    {"every driver failure of load, find, launch, unload leaves nothing", t_faults, 1, 0, 1},
    {"8 threads launch on one handle", t_threads, 1, 0, 0},
    {"a launch captured into a graph and replayed", t_capture, 1, 0, 0},
    {"hk.cuda/1: context, device, stream, and raw driver work beside", t_cuda_table, 1, 0, 0},
};
const size_t tk_ctx_scenario_count = sizeof tk_ctx_scenarios / sizeof tk_ctx_scenarios[0];
