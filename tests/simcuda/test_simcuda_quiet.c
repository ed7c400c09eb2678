/* The simulated driver's quiet model (docs/contexts.md facts 25 and 30):
 * under threads that launch into one context without pause, or run a service
 * there, the calls the real driver holds until they pause wait, and the
 * others do not. Part of the test_simcuda_streams program. */
#include "hk_test.h"
#include "simcuda.h"
#include "test_simcuda_quiet.h"

#include <cuda.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OK(call) CU_ASSERT_EQUAL_FATAL((call), CUDA_SUCCESS)

/* ---- quiet loads (fact 25): a flood of launches holds stream creation and
 * code loading in its context until it pauses ---- */

#define FLOOD_THREADS 4
/* The model's pause while a call is watched being held: far longer than any
 * stall of the launchers (on two loaded cores under a sanitizer, beside
 * another build, the scheduler kept every launcher away for tens of
 * milliseconds, once past 200 ms), so that a flood never looks like it
 * paused. Once the flood is stopped the pause is cut to QUIET_RELEASE_US,
 * which lets the held call go as soon as the launches are that old, and
 * stays so for the set-up calls between the cases. */
#define QUIET_HELD_US 10000000u
#define QUIET_RELEASE_US 20000u
/* How long a condition that needs the scheduler is waited for. */
#define DEADLINE_MS 10000

static double since_ms(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1e3 + (t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Waits until cond holds, polling every millisecond, for up to DEADLINE_MS
 * by the clock; evaluates to whether it holds. */
#define WAIT_FOR(cond)                                                                         \
    __extension__({                                                                            \
        struct timespec t0_;                                                                   \
        clock_gettime(CLOCK_MONOTONIC, &t0_);                                                  \
        while (!(cond) && since_ms(&t0_) < DEADLINE_MS)                                        \
            usleep(1000);                                                                      \
        (cond) ? 1 : 0;                                                                        \
    })

typedef struct flood flood_t;

typedef struct launcher {
    flood_t *fl;
    int i;
    CUresult r;
} launcher_t;

struct flood {
    CUcontext ctx;
    CUfunction f;           /* the probe, already loaded in ctx */
    CUdeviceptr out;        /* one slot per launcher, one for the call under test */
    CUstream streams[FLOOD_THREADS];
    pthread_t th[FLOOD_THREADS];
    launcher_t l[FLOOD_THREADS];
    int started;            /* launchers created */
    int service;            /* each round as a service's: a copy in, a launch, a copy out,
                               a synchronise (fact 30); else launches (fact 25) */
    int stop;               /* atomic: the launchers end */
    unsigned long launches; /* atomic */
};

/* Launches the probe on its own stream without pause (a synchronise every
 * 64 launches, as the measurement on an H200 did) until told to stop. */
static void *flood_thread(void *arg)
{
    launcher_t *l = arg;
    flood_t *fl = l->fl;
    CUstream st = fl->streams[l->i];
    CUdeviceptr out = fl->out + (CUdeviceptr)l->i * sizeof(unsigned);
    unsigned value = 100u + (unsigned)l->i;
    void *args[] = {&out, &value};
    CUresult r = cuCtxSetCurrent(fl->ctx);
    unsigned in = value, back = 0;
    for (unsigned n = 1; r == CUDA_SUCCESS && !__atomic_load_n(&fl->stop, __ATOMIC_ACQUIRE);
         n++) {
        if (fl->service)
            r = cuMemcpyHtoDAsync(out, &in, sizeof in, st);
        if (r == CUDA_SUCCESS)
            r = cuLaunchKernel(fl->f, 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
        if (r == CUDA_SUCCESS && fl->service)
            r = cuMemcpyDtoHAsync(&back, out, sizeof back, st);
        if (r == CUDA_SUCCESS && (fl->service || n % 64 == 0))
            r = cuStreamSynchronize(st);
        __atomic_add_fetch(&fl->launches, 1, __ATOMIC_RELAXED);
    }
    if (r == CUDA_SUCCESS)
        r = cuStreamSynchronize(st);
    l->r = r;
    cuCtxSetCurrent(NULL);
    return NULL;
}

static unsigned long flood_count(flood_t *fl)
{
    return __atomic_load_n(&fl->launches, __ATOMIC_RELAXED);
}

/* Starts the launchers and returns once they have launched a few hundred
 * times. Returns 0, or -1 when they could not start (checked). */
static int flood_start(flood_t *fl)
{
    __atomic_store_n(&fl->stop, 0, __ATOMIC_RELEASE);
    unsigned long before = flood_count(fl);
    for (fl->started = 0; fl->started < FLOOD_THREADS; fl->started++) {
        fl->l[fl->started] = (launcher_t){fl, fl->started, CUDA_ERROR_UNKNOWN};
        if (pthread_create(&fl->th[fl->started], NULL, flood_thread, &fl->l[fl->started]))
            break;
    }
    CU_ASSERT_EQUAL(fl->started, FLOOD_THREADS);
    CU_ASSERT(WAIT_FOR(flood_count(fl) >= before + 256));
    return fl->started == FLOOD_THREADS ? 0 : -1;
}

static void flood_stop(flood_t *fl)
{
    __atomic_store_n(&fl->stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < fl->started; i++) {
        pthread_join(fl->th[i], NULL);
        CU_ASSERT_EQUAL(fl->l[i].r, CUDA_SUCCESS);
    }
    fl->started = 0;
}

typedef enum call_kind {
    CALL_STREAM, CALL_FUNCTION, CALL_LAUNCH, CALL_LIBRARY,
    /* fact 30: held under a service */
    CALL_ALLOC, CALL_FREE, CALL_STREAM_DESTROY, CALL_EVENT, CALL_HOST_ALLOC, CALL_HOST_FREE,
    CALL_LIBRARY_UNLOAD,
    /* fact 30: not held */
    CALL_ORDERED, CALL_FREE_ASYNC, CALL_CTX_SYNC, CALL_STREAM_SYNC, CALL_RETAIN, CALL_CTX_ID
} call_kind_t;

/* A driver call made on a thread of its own in the flooded context. */
typedef struct call {
    call_kind_t kind;
    CUcontext ctx;
    CUkernel k;        /* CALL_FUNCTION, CALL_LAUNCH */
    CUdeviceptr out;   /* CALL_LAUNCH: where the probe writes */
    CUstream s;        /* made by CALL_STREAM */
    CUfunction f;      /* got by CALL_FUNCTION */
    CUlibrary lib;     /* loaded by CALL_LIBRARY */
    CUlibrary unload;  /* unloaded while the call waits (NULL: none) */
    CUdeviceptr p;     /* made by CALL_ALLOC; freed by CALL_FREE, CALL_FREE_ASYNC */
    void *host;        /* made by CALL_HOST_ALLOC; freed by CALL_HOST_FREE */
    CUresult want;     /* what the call must return */
    CUresult r;
    int done;          /* atomic */
} call_t;

/* The calls of fact 30, in the call's context (current). */
static CUresult service_call(call_t *c)
{
    CUevent e = NULL;
    CUcontext p = NULL;
    CUdeviceptr q = 0;
    unsigned long long id = 0;
    CUresult r = CUDA_SUCCESS;
    switch (c->kind) {
    case CALL_ALLOC: return cuMemAlloc(&c->p, 1 << 20);
    case CALL_FREE: return cuMemFree(c->p);
    case CALL_STREAM_DESTROY: return cuStreamDestroy(c->s);
    case CALL_EVENT:
        r = cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
        return r == CUDA_SUCCESS ? cuEventDestroy(e) : r;
    case CALL_HOST_ALLOC: return cuMemHostAlloc(&c->host, 1 << 20, 0);
    case CALL_HOST_FREE: return cuMemFreeHost(c->host);
    case CALL_LIBRARY_UNLOAD: return cuLibraryUnload(c->lib);
    case CALL_ORDERED:
        r = cuMemAllocAsync(&q, 1 << 20, c->s);
        if (r == CUDA_SUCCESS)
            r = cuMemFreeAsync(q, c->s);
        return r == CUDA_SUCCESS ? cuStreamSynchronize(c->s) : r;
    case CALL_FREE_ASYNC:
        r = cuMemFreeAsync(c->p, c->s);
        return r == CUDA_SUCCESS ? cuStreamSynchronize(c->s) : r;
    case CALL_CTX_SYNC: return cuCtxSynchronize();
    case CALL_STREAM_SYNC: return cuStreamSynchronize(c->s);
    case CALL_RETAIN:
        r = cuDevicePrimaryCtxRetain(&p, 0);
        return r == CUDA_SUCCESS ? cuDevicePrimaryCtxRelease(0) : r;
    case CALL_CTX_ID: return cuCtxGetId(NULL, &id);
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static void *call_thread(void *arg)
{
    call_t *c = arg;
    unsigned value = 77;
    void *args[] = {&c->out, &value};
    CUresult r = cuCtxSetCurrent(c->ctx);
    if (r == CUDA_SUCCESS && c->kind >= CALL_ALLOC) {
        r = service_call(c);
    } else if (r == CUDA_SUCCESS) {
        switch (c->kind) {
        case CALL_STREAM: r = cuStreamCreate(&c->s, CU_STREAM_NON_BLOCKING); break;
        case CALL_FUNCTION: r = cuKernelGetFunction(&c->f, c->k); break;
        case CALL_LAUNCH:
            r = cuLaunchKernel((CUfunction)c->k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
            break;
        case CALL_LIBRARY:
            r = cuLibraryLoadData(&c->lib, simt_probe_ptx, NULL, NULL, 0, NULL, NULL, 0);
            break;
        default: break; /* service_call's */
        }
    }
    c->r = r;
    cuCtxSetCurrent(NULL);
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Waits up to ms for the call to return; 1 when it has. */
static int call_wait(call_t *c, int ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE) && since_ms(&t0) < ms)
        usleep(1000);
    return __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
}

/* Ends a call that has not returned in time (the test has failed by then) by
 * turning the model off, and joins its thread. */
static void call_join(call_t *c, pthread_t t)
{
    if (!call_wait(c, DEADLINE_MS))
        simcuda_quiet_loads(0);
    pthread_join(t, NULL);
}

/* The call must wait while the flood goes on (for at least 150 ms and 64 more
 * launches, counted by simcuda_loads_waiting) and return c->want once it
 * stops. Every wait is for a condition, with a deadline: on a loaded machine
 * no step is assumed to take any given time. */
static void expect_held(flood_t *fl, call_t *c)
{
    pthread_t t;
    simcuda_quiet_loads(QUIET_HELD_US);
    if (flood_start(fl) != 0 || pthread_create(&t, NULL, call_thread, c) != 0) {
        CU_FAIL("could not start the flood or the call");
        flood_stop(fl);
        simcuda_quiet_loads(QUIET_RELEASE_US);
        return;
    }
    /* the call first has to get its turn among the launchers */
    CU_ASSERT(WAIT_FOR(simcuda_loads_waiting() || __atomic_load_n(&c->done, __ATOMIC_ACQUIRE)));
    CU_ASSERT_EQUAL(simcuda_loads_waiting(), 1);
    unsigned long before = flood_count(fl);
    struct timespec held;
    clock_gettime(CLOCK_MONOTONIC, &held);
    /* the launches go on meanwhile, and the call stays held */
    CU_ASSERT(WAIT_FOR(since_ms(&held) >= 150.0 && flood_count(fl) > before + 64));
    CU_ASSERT_EQUAL(__atomic_load_n(&c->done, __ATOMIC_ACQUIRE), 0);
    /* A call that waits in turn for each context of a library is between
     * two waits for an instant, and on a loaded machine its thread may not
     * run again for a while: look again until it waits. */
    CU_ASSERT(WAIT_FOR(simcuda_loads_waiting() == 1));
    if (c->unload)
        CU_ASSERT_EQUAL(cuLibraryUnload(c->unload), CUDA_SUCCESS);
    flood_stop(fl);
    simcuda_quiet_loads(QUIET_RELEASE_US);
    CU_ASSERT(call_wait(c, DEADLINE_MS));
    call_join(c, t);
    CU_ASSERT_EQUAL(c->r, c->want);
    CU_ASSERT_EQUAL(simcuda_loads_waiting(), 0);
}

/* The call must return CUDA_SUCCESS while the flood still goes on. */
static void expect_free(flood_t *fl, call_t *c)
{
    pthread_t t;
    if (flood_start(fl) != 0 || pthread_create(&t, NULL, call_thread, c) != 0) {
        CU_FAIL("could not start the flood or the call");
        flood_stop(fl);
        return;
    }
    CU_ASSERT(call_wait(c, DEADLINE_MS));
    CU_ASSERT_EQUAL(__atomic_load_n(&fl->stop, __ATOMIC_ACQUIRE), 0);
    flood_stop(fl);
    call_join(c, t);
    CU_ASSERT_EQUAL(c->r, CUDA_SUCCESS);
}

/* Under the model, stream creation, the first load of a library's kernel into
 * the context (cuKernelGetFunction or a CUkernel launch) wait while launches
 * go on and proceed when they stop (a library unloaded meanwhile: 400); a
 * library load does not wait; with the model off nothing waits. */
void test_quiet_loads(void)
{
    size_t libs = simcuda_live_libraries(), blocks = simcuda_live_allocations();
    size_t ctxs = simcuda_live_contexts();
    flood_t fl;
    memset(&fl, 0, sizeof fl);
    CUlibrary lib, fresh;
    CUkernel k, kf;
    unsigned got = 0;
    OK(cuCtxCreate(&fl.ctx, NULL, 0, 0));
    OK(cuLibraryLoadData(&lib, simt_probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_probe_kernel"));
    OK(cuKernelGetFunction(&fl.f, k));
    OK(cuMemAlloc(&fl.out, (FLOOD_THREADS + 1) * sizeof(unsigned)));
    for (int i = 0; i < FLOOD_THREADS; i++)
        OK(cuStreamCreate(&fl.streams[i], CU_STREAM_NON_BLOCKING));
    simcuda_quiet_loads(QUIET_RELEASE_US);
    /* from here on nothing fatal: the model must be turned off at the end */

    call_t mk = {.kind = CALL_STREAM, .ctx = fl.ctx};
    expect_held(&fl, &mk);
    if (mk.r == CUDA_SUCCESS)
        CU_ASSERT_EQUAL(cuStreamDestroy(mk.s), CUDA_SUCCESS);

    call_t load = {.kind = CALL_LIBRARY, .ctx = fl.ctx};
    expect_free(&fl, &load);
    CU_ASSERT_EQUAL(cuLibraryGetKernel(&kf, load.lib, "hk_probe_kernel"), CUDA_SUCCESS);
    call_t get = {.kind = CALL_FUNCTION, .ctx = fl.ctx, .k = kf};
    expect_held(&fl, &get);
    CU_ASSERT_PTR_NOT_NULL(get.f);

    CU_ASSERT_EQUAL(cuLibraryLoadData(&fresh, simt_probe_ptx, NULL, NULL, 0, NULL, NULL, 0),
                    CUDA_SUCCESS);
    call_t launch = {.kind = CALL_LAUNCH, .ctx = fl.ctx, .out = fl.out + FLOOD_THREADS * 4};
    CU_ASSERT_EQUAL(cuLibraryGetKernel(&launch.k, fresh, "hk_probe_kernel"), CUDA_SUCCESS);
    expect_held(&fl, &launch);
    CU_ASSERT_EQUAL(cuMemcpyDtoH(&got, launch.out, sizeof got), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(got, 77);

    /* a library unloaded while its first load waits: 400 once the wait ends */
    call_t gone = {.kind = CALL_FUNCTION, .ctx = fl.ctx, .want = CUDA_ERROR_INVALID_HANDLE};
    CU_ASSERT_EQUAL(cuLibraryLoadData(&gone.unload, simt_probe_ptx, NULL, NULL, 0, NULL, NULL, 0),
                    CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuLibraryGetKernel(&gone.k, gone.unload, "hk_probe_kernel"), CUDA_SUCCESS);
    expect_held(&fl, &gone);

    simcuda_quiet_loads(0);
    call_t off = {.kind = CALL_STREAM, .ctx = fl.ctx};
    expect_free(&fl, &off);
    if (off.r == CUDA_SUCCESS)
        CU_ASSERT_EQUAL(cuStreamDestroy(off.s), CUDA_SUCCESS);

    for (int i = 0; i < FLOOD_THREADS; i++)
        CU_ASSERT_EQUAL(cuStreamDestroy(fl.streams[i]), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFree(fl.out), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuLibraryUnload(fresh), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuLibraryUnload(load.lib), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuLibraryUnload(lib), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuCtxDestroy(fl.ctx), CUDA_SUCCESS);
    simt_clear_stack();
    CU_ASSERT_EQUAL(simcuda_live_libraries(), libs);
    CU_ASSERT_EQUAL(simcuda_live_allocations(), blocks);
    CU_ASSERT_EQUAL(simcuda_live_contexts(), ctxs);
}

/* Fact 30 under the model, with a service running (a copy in, a launch, a
 * copy out, a synchronise, in a loop on each of its threads): allocations,
 * frees, stream destruction, event creation, page-locked host memory and the
 * unload of a library loaded into the context wait for a pause; stream-ordered
 * allocations and frees (of a block cuMemAlloc made too), context and stream
 * synchronisations, primary retains and context IDs do not. */
void test_quiet_service(void)
{
    size_t blocks = simcuda_live_allocations(), ctxs = simcuda_live_contexts();
    flood_t fl;
    memset(&fl, 0, sizeof fl);
    fl.service = 1;
    CUlibrary lib, other;
    CUkernel k;
    CUstream mine;
    CUfunction f;
    OK(cuCtxCreate(&fl.ctx, NULL, 0, 0));
    OK(cuLibraryLoadData(&lib, simt_probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_probe_kernel"));
    OK(cuKernelGetFunction(&fl.f, k));
    OK(cuMemAlloc(&fl.out, (FLOOD_THREADS + 1) * sizeof(unsigned)));
    for (int i = 0; i < FLOOD_THREADS; i++)
        OK(cuStreamCreate(&fl.streams[i], CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&mine, CU_STREAM_NON_BLOCKING));
    OK(cuLibraryLoadData(&other, simt_probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, other, "hk_probe_kernel"));
    OK(cuKernelGetFunction(&f, k)); /* its code is in the context */
    simcuda_quiet_loads(QUIET_RELEASE_US);
    /* from here on nothing fatal: the model must be turned off at the end */

    call_t alloc = {.kind = CALL_ALLOC, .ctx = fl.ctx};
    expect_held(&fl, &alloc);
    call_t free_ = {.kind = CALL_FREE, .ctx = fl.ctx, .p = alloc.p};
    expect_held(&fl, &free_);
    call_t made = {.kind = CALL_STREAM, .ctx = fl.ctx};
    expect_held(&fl, &made);
    call_t gone = {.kind = CALL_STREAM_DESTROY, .ctx = fl.ctx, .s = made.s};
    expect_held(&fl, &gone);
    call_t event = {.kind = CALL_EVENT, .ctx = fl.ctx};
    expect_held(&fl, &event);
    call_t host = {.kind = CALL_HOST_ALLOC, .ctx = fl.ctx};
    expect_held(&fl, &host);
    call_t unhost = {.kind = CALL_HOST_FREE, .ctx = fl.ctx, .host = host.host};
    expect_held(&fl, &unhost);
    call_t unload = {.kind = CALL_LIBRARY_UNLOAD, .ctx = fl.ctx, .lib = other};
    expect_held(&fl, &unload);

    call_t ordered = {.kind = CALL_ORDERED, .ctx = fl.ctx, .s = mine};
    expect_free(&fl, &ordered);
    call_t block = {.kind = CALL_FREE_ASYNC, .ctx = fl.ctx, .s = mine};
    CU_ASSERT_EQUAL(cuCtxPushCurrent(fl.ctx), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAlloc(&block.p, 1 << 20), CUDA_SUCCESS);
    simt_clear_stack();
    expect_free(&fl, &block);
    call_t sync = {.kind = CALL_CTX_SYNC, .ctx = fl.ctx};
    expect_free(&fl, &sync);
    call_t ssync = {.kind = CALL_STREAM_SYNC, .ctx = fl.ctx, .s = mine};
    expect_free(&fl, &ssync);
    call_t retain = {.kind = CALL_RETAIN, .ctx = fl.ctx};
    expect_free(&fl, &retain);
    call_t id = {.kind = CALL_CTX_ID, .ctx = fl.ctx};
    expect_free(&fl, &id);

    simcuda_quiet_loads(0);
    for (int i = 0; i < FLOOD_THREADS; i++)
        CU_ASSERT_EQUAL(cuStreamDestroy(fl.streams[i]), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuStreamDestroy(mine), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFree(fl.out), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuLibraryUnload(lib), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuCtxDestroy(fl.ctx), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(simcuda_live_allocations(), blocks);
    CU_ASSERT_EQUAL(simcuda_live_contexts(), ctxs);
    simt_clear_stack();
}
