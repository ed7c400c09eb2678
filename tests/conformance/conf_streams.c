/* Conformance: stream facts 20, 22, 23 and 25: the per-thread stream is a
 * stream of its own on every thread, with its own ID; a green context has no
 * per-thread stream (its legacy stream works); what a thread may do while
 * another thread captures, by capture mode; launches that never pause hold
 * stream creation and code loading in their context. */
#include "conf.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hk_test.h"

typedef struct ids {
    CUcontext ctx;
    unsigned long long ptds[2], legacy;
    CUresult r;
} ids_t;

static void *fact20_thread(void *arg)
{
    ids_t *t = arg;
    t->r = cuCtxSetCurrent(t->ctx);
    if (t->r == CUDA_SUCCESS)
        t->r = cuStreamGetId(CU_STREAM_PER_THREAD, &t->ptds[0]);
    if (t->r == CUDA_SUCCESS)
        t->r = cuStreamGetId(CU_STREAM_PER_THREAD, &t->ptds[1]);
    if (t->r == CUDA_SUCCESS)
        t->r = cuStreamGetId(CU_STREAM_LEGACY, &t->legacy);
    cuCtxSetCurrent(NULL);
    return NULL;
}

/* Fact 20: CU_STREAM_PER_THREAD is one value for a different stream on every
 * thread: cuStreamGetId tells them apart (stable on one thread); the legacy
 * stream is one per context; created streams have IDs of their own. */
static void fact20_per_thread_stream_ids(void)
{
    CUcontext p0;
    CUstream s;
    unsigned long long mine = 0, sid = 0, null_id = 0, legacy = 0;
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT(cuCtxPushCurrent(p0), CUDA_SUCCESS);
    EXPECT(cuStreamGetId(CU_STREAM_PER_THREAD, &mine), CUDA_SUCCESS);
    EXPECT(cuStreamGetId(NULL, &null_id), CUDA_SUCCESS);
    EXPECT(cuStreamGetId(CU_STREAM_LEGACY, &legacy), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(null_id, legacy);
    EXPECT_FATAL(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT(cuStreamGetId(s, &sid), CUDA_SUCCESS);
    CU_ASSERT_NOT_EQUAL(sid, mine);
    CU_ASSERT_NOT_EQUAL(sid, legacy);
    ids_t t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].ctx = p0;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, fact20_thread, &t[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        EXPECT(t[i].r, CUDA_SUCCESS);
        CU_ASSERT_EQUAL(t[i].ptds[0], t[i].ptds[1]);
        CU_ASSERT_NOT_EQUAL(t[i].ptds[0], mine);
        CU_ASSERT_EQUAL(t[i].legacy, legacy);
    }
    CU_ASSERT_NOT_EQUAL(t[0].ptds[0], t[1].ptds[0]);
    conf_observe_int("fact 20: per-thread stream ID (this thread)", (long)mine);
    conf_observe_int("fact 20: legacy stream ID", (long)legacy);
    EXPECT(cuStreamDestroy(s), CUDA_SUCCESS);
    conf_clear_stack();
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

/* Fact 22: with a green context current, CU_STREAM_PER_THREAD names no stream:
 * a memset, a launch, a synchronise, cuStreamGetId and cuStreamGetCtx on it
 * give 400 (the memset and synchronise are what made hk-cuda's create fail
 * in a green context). Its legacy stream, which the green context's default
 * stream flag provides, and its created streams (blocking ones too) work. */
static void fact22_green_context_streams(void)
{
    CUdevResource res;
    CUdevResourceDesc desc;
    CUgreenCtx g;
    CUcontext gc = NULL, p0;
    CUstream s = NULL;
    CUdeviceptr d = 0;
    CUlibrary lib;
    CUkernel k;
    unsigned long long id = 0;
    EXPECT_FATAL(cuDeviceGetDevResource(0, &res, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
    EXPECT_FATAL(cuDevResourceGenerateDesc(&desc, &res, 1), CUDA_SUCCESS);
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT_FATAL(cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
    EXPECT_FATAL(cuCtxFromGreenCtx(&gc, g), CUDA_SUCCESS);
    EXPECT(cuCtxPushCurrent(gc), CUDA_SUCCESS);
    EXPECT_FATAL(conf_load_probe(&lib, &k), CUDA_SUCCESS);
    EXPECT_FATAL(cuMemAlloc(&d, 64), CUDA_SUCCESS);

    EXPECT(cuMemsetD8Async(d, 0, 4, CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(conf_probe((CUfunction)k, CU_STREAM_PER_THREAD, 71), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE);
    /* both measured on an H200 (driver 580.159.04) */
    EXPECT(cuStreamGetId(CU_STREAM_PER_THREAD, &id), CUDA_ERROR_INVALID_HANDLE);
    CUcontext owner = NULL;
    EXPECT(cuStreamGetCtx(CU_STREAM_PER_THREAD, &owner), CUDA_ERROR_INVALID_HANDLE);

    EXPECT(cuMemsetD8Async(d, 0, 4, NULL), CUDA_SUCCESS);
    EXPECT(cuMemsetD8Async(d, 0, 4, CU_STREAM_LEGACY), CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    EXPECT(conf_probe((CUfunction)k, NULL, 72), CUDA_SUCCESS);
    EXPECT(cuStreamGetId(NULL, &id), CUDA_SUCCESS);
    EXPECT_FATAL(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT(cuMemsetD8Async(d, 0, 4, s), CUDA_SUCCESS);
    EXPECT(conf_probe((CUfunction)k, s, 73), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT_FATAL(cuStreamCreate(&s, 0), CUDA_SUCCESS); /* measured: a blocking one works */
    EXPECT(cuMemsetD8Async(d, 0, 4, s), CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s), CUDA_SUCCESS);
    /* the primary, current again, still has its per-thread stream */
    EXPECT(cuCtxPushCurrent(p0), CUDA_SUCCESS);
    EXPECT(cuMemsetD8Async(d, 0, 4, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    CUcontext popped;
    EXPECT(cuCtxPopCurrent(&popped), CUDA_SUCCESS);

    EXPECT(cuMemFree(d), CUDA_SUCCESS);
    EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);
    conf_clear_stack();
    EXPECT(cuGreenCtxDestroy(g), CUDA_SUCCESS);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

typedef struct alloc_try {
    CUcontext ctx;
    CUstreamCaptureMode mode;
    CUresult set, alloc;
} alloc_try_t;

static void *fact23_thread(void *arg)
{
    alloc_try_t *a = arg;
    CUstreamCaptureMode m = a->mode;
    CUdeviceptr p;
    a->set = cuCtxSetCurrent(a->ctx);
    if (a->set == CUDA_SUCCESS)
        a->set = cuThreadExchangeStreamCaptureMode(&m);
    if (a->set == CUDA_SUCCESS) {
        a->alloc = cuMemAlloc(&p, 256);
        if (a->alloc == CUDA_SUCCESS)
            cuMemFree(p);
    }
    cuCtxSetCurrent(NULL);
    return NULL;
}

/* Fact 23: while one thread captures in global mode, another thread's
 * cuMemAlloc gives 900 and invalidates the capture in that thread's default
 * (global) mode, and is allowed, leaving the capture valid, in thread-local
 * or relaxed mode (cuThreadExchangeStreamCaptureMode). */
static void fact23_capture_modes(void)
{
    CUcontext p0;
    CUstream s;
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT(cuCtxPushCurrent(p0), CUDA_SUCCESS);
    EXPECT_FATAL(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    static const CUstreamCaptureMode modes[3] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                 CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                 CU_STREAM_CAPTURE_MODE_RELAXED};
    for (int i = 0; i < 3; i++) {
        alloc_try_t a = {p0, modes[i], CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
        pthread_t t;
        CUgraph g = NULL;
        EXPECT_FATAL(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, fact23_thread, &a), 0);
        pthread_join(t, NULL);
        EXPECT(a.set, CUDA_SUCCESS);
        EXPECT(a.alloc, i == 0 ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS);
        EXPECT(cuStreamEndCapture(s, &g), i == 0 ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                                 : CUDA_SUCCESS);
        if (g)
            EXPECT(cuGraphDestroy(g), CUDA_SUCCESS);
    }
    EXPECT(cuStreamDestroy(s), CUDA_SUCCESS);
    conf_clear_stack();
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

/* ---- fact 25: launches that never pause hold stream creation and code
 * loading in their context ---- */

#define F25_THREADS 8
/* The simulation's pause (simcuda_quiet_loads) while a call is watched being
 * held: far above any scheduler stall on two loaded cores under a sanitizer
 * (2 ms and 5 ms let calls through in such runs, and a stall can pass 200
 * ms), so that it never looks like a pause in the launches; once they are
 * told to stop it is cut to F25_RELEASE_US, which lets the call go. The real
 * driver holds the calls until the launches stop. */
#define F25_HELD_US 10000000u
#define F25_RELEASE_US 50000u
/* How long a step that needs the scheduler is waited for. */
#define F25_DEADLINE_MS 10000
/* The pauses that let a held call in, as a swap's holds do (docs/swap.md,
 * "Held calls", with the loader's default hold time and limit): the
 * launchers stop at their next launch for F25_PAUSE_US, launch again for
 * F25_GAP_US, and so on, F25_PAUSES times at most. On the simulation the
 * model's pause is F25_SIM_QUIET_US meanwhile: a load there needs that long
 * without a launch, less than one pause. */
#define F25_PAUSE_US 400L
#define F25_GAP_US 2000L
#define F25_PAUSES 50
#define F25_SIM_QUIET_US 200u

enum f25_call { F25_STREAM, F25_FUNCTION };

/* Shared by the test and its threads; the last one to let go frees it, so a
 * thread still blocked in the driver when the test gives up stays safe. */
typedef struct f25_run {
    int refs;                      /* atomic */
    CUcontext ctx;
    CUfunction f;                  /* the probe, loaded in ctx before the flood */
    CUdeviceptr out;               /* one slot per launcher */
    CUstream streams[F25_THREADS]; /* made before the flood */
    int next;                      /* atomic: launcher index */
    int stop;                      /* atomic: the launchers end */
    int pause;                     /* atomic: the launchers wait before their next launch */
    int ended;                     /* atomic: launchers that ended */
    unsigned long launches;        /* atomic */
    CUresult flood_r;              /* atomic: a launcher's failure */
    enum f25_call call;
    int stage;          /* atomic: 1 the caller is ready (context query, library load), 2 done */
    CUresult ready_r, call_r;
    CUlibrary lib;      /* F25_FUNCTION: loaded by the caller */
    CUstream made;      /* F25_STREAM: made by the caller */
    CUfunction got;     /* F25_FUNCTION */
    long ready_us;      /* the caller's context query and library load */
} f25_run_t;

static long f25_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

static void f25_unref(f25_run_t *run)
{
    if (__atomic_sub_fetch(&run->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(run);
}

/* Launches the probe on its own stream without pause, a synchronise every
 * 64 launches, until told to stop. */
static void *f25_launcher(void *arg)
{
    f25_run_t *run = arg;
    int i = __atomic_fetch_add(&run->next, 1, __ATOMIC_RELAXED);
    CUstream st = run->streams[i];
    CUdeviceptr out = run->out + (CUdeviceptr)i * sizeof(unsigned);
    unsigned value = 250u + (unsigned)i;
    void *args[] = {&out, &value};
    CUresult r = cuCtxSetCurrent(run->ctx);
    for (unsigned n = 1; r == CUDA_SUCCESS && !__atomic_load_n(&run->stop, __ATOMIC_ACQUIRE);
         n++) {
        while (__atomic_load_n(&run->pause, __ATOMIC_ACQUIRE)
               && !__atomic_load_n(&run->stop, __ATOMIC_ACQUIRE)) {
            struct timespec nap = {0, 20000}; /* as a held call waits: off the CPU */
            nanosleep(&nap, NULL);
        }
        r = cuLaunchKernel(run->f, 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
        if (r == CUDA_SUCCESS && n % 64 == 0)
            r = cuStreamSynchronize(st);
        __atomic_add_fetch(&run->launches, 1, __ATOMIC_RELAXED);
    }
    if (r == CUDA_SUCCESS)
        r = cuStreamSynchronize(st);
    if (r != CUDA_SUCCESS)
        __atomic_store_n(&run->flood_r, r, __ATOMIC_RELAXED);
    cuCtxSetCurrent(NULL);
    __atomic_add_fetch(&run->ended, 1, __ATOMIC_RELEASE);
    f25_unref(run);
    return NULL;
}

/* The call under test, after a context query and (F25_FUNCTION) a library
 * load, which the launches do not hold up. */
static void *f25_caller(void *arg)
{
    f25_run_t *run = arg;
    unsigned long long id;
    CUkernel k = NULL;
    long t0 = f25_now_us();
    CUresult r = cuCtxSetCurrent(run->ctx);
    if (r == CUDA_SUCCESS)
        r = cuCtxGetId(run->ctx, &id);
    if (r == CUDA_SUCCESS && run->call == F25_FUNCTION) {
        r = cuLibraryLoadData(&run->lib, hk__conf_fatbin, NULL, NULL, 0, NULL, NULL, 0);
        if (r == CUDA_SUCCESS && (r = cuLibraryGetKernel(&k, run->lib, "hk_probe_kernel")))
            cuLibraryUnload(run->lib);
    }
    run->ready_us = f25_now_us() - t0;
    run->ready_r = r;
    __atomic_store_n(&run->stage, 1, __ATOMIC_RELEASE);
    if (r == CUDA_SUCCESS)
        r = run->call == F25_STREAM ? cuStreamCreate(&run->made, CU_STREAM_NON_BLOCKING)
                                    : cuKernelGetFunction(&run->got, k);
    run->call_r = r;
    cuCtxSetCurrent(NULL);
    __atomic_store_n(&run->stage, 2, __ATOMIC_RELEASE);
    f25_unref(run);
    return NULL;
}

/* Waits up to ms for *flag to reach want; 1 when it has. */
static int f25_wait(int *flag, int want, long ms)
{
    long end = f25_now_us() + ms * 1000;
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < want && f25_now_us() < end)
        usleep(1000);
    return __atomic_load_n(flag, __ATOMIC_ACQUIRE) >= want;
}

/* Starts the thread with a reference to run; detached when it cannot be
 * waited for (join then). Returns 0 or -1. */
static int f25_start(f25_run_t *run, void *(*fn)(void *), pthread_t *t)
{
    __atomic_add_fetch(&run->refs, 1, __ATOMIC_ACQ_REL);
    if (pthread_create(t, NULL, fn, run) == 0)
        return 0;
    f25_unref(run);
    return -1;
}

/* Starts the launchers; returns how many started, once they have launched
 * 1024 times (or after 5 s). */
static int f25_flood(f25_run_t *run, pthread_t t[F25_THREADS])
{
    int n = 0;
    while (n < F25_THREADS && f25_start(run, f25_launcher, &t[n]) == 0)
        n++;
    CU_ASSERT_EQUAL(n, F25_THREADS);
    long end = f25_now_us() + 5000000L;
    while (__atomic_load_n(&run->launches, __ATOMIC_RELAXED) < 1024 && f25_now_us() < end)
        usleep(1000);
    CU_ASSERT(__atomic_load_n(&run->launches, __ATOMIC_RELAXED) >= 1024);
    return n;
}

/* The caller must be ready (a context query and a library load are not held
 * up, with lazy loading) and then still wait 300 ms into the launches. */
static void f25_check_held(f25_run_t *run, const char *what)
{
    const char *loading = getenv("CUDA_MODULE_LOADING");
    int eager = loading && strcmp(loading, "EAGER") == 0; /* then the load is held too */
    char line[160];
    int ready = f25_wait(&run->stage, 1, F25_DEADLINE_MS);
    if (!eager)
        CU_ASSERT(ready);
    if (ready) {
        EXPECT(run->ready_r, CUDA_SUCCESS);
        snprintf(line, sizeof line, "fact 25: %s: the caller's cuCtxGetId%s under launches, us",
                 what, run->call == F25_FUNCTION ? " and cuLibraryLoadData" : "");
        conf_observe_int(line, run->ready_us);
    }
    unsigned long before = __atomic_load_n(&run->launches, __ATOMIC_RELAXED);
    usleep(300 * 1000);
    long end = f25_now_us() + F25_DEADLINE_MS * 1000L; /* on a loaded machine: at least one */
    while (__atomic_load_n(&run->launches, __ATOMIC_RELAXED) == before && f25_now_us() < end)
        usleep(1000);
    unsigned long during = __atomic_load_n(&run->launches, __ATOMIC_RELAXED) - before;
    int held = __atomic_load_n(&run->stage, __ATOMIC_ACQUIRE) < 2;
    CU_ASSERT(held);
    CU_ASSERT(during > 0);
    snprintf(line, sizeof line, "fact 25: %s still waiting 300 ms into the launches (1 yes)", what);
    conf_observe_int(line, held);
    snprintf(line, sizeof line, "fact 25: launches by %d threads in those 300 ms", F25_THREADS);
    conf_observe_int(line, (long)during);
}

/* While the call is held: the launchers pause as a swap's holds make them
 * (F25_PAUSE_US, then F25_GAP_US of launches, and again), and the call must
 * return during the pauses, long before the launches stop. Observed: how
 * many pauses it took and how far into the last one it returned. */
static void f25_pauses(f25_run_t *run, const char *what, void (*quiet)(unsigned))
{
    char line[160];
    long into = -1;
    int k = 0;
    if (quiet)
        quiet(F25_SIM_QUIET_US);
    while (k < F25_PAUSES && __atomic_load_n(&run->stage, __ATOMIC_ACQUIRE) < 2) {
        long t0 = f25_now_us();
        k++;
        __atomic_store_n(&run->pause, 1, __ATOMIC_RELEASE);
        while (f25_now_us() - t0 < F25_PAUSE_US
               && __atomic_load_n(&run->stage, __ATOMIC_ACQUIRE) < 2)
            sched_yield();
        __atomic_store_n(&run->pause, 0, __ATOMIC_RELEASE);
        if (__atomic_load_n(&run->stage, __ATOMIC_ACQUIRE) >= 2)
            into = f25_now_us() - t0;
        else
            usleep((useconds_t)F25_GAP_US);
    }
    int returned = __atomic_load_n(&run->stage, __ATOMIC_ACQUIRE) >= 2;
    CU_ASSERT(returned);
    snprintf(line, sizeof line, "fact 25: %s: pauses of %ld us (%ld us apart) until it returned",
             what, F25_PAUSE_US, F25_GAP_US);
    conf_observe_int(line, returned ? k : -1);
    snprintf(line, sizeof line, "fact 25: %s: us into the last pause when it returned (-1: "
             "between two)", what);
    conf_observe_int(line, into);
    if (quiet)
        quiet(F25_HELD_US);
}

/* Stops the launchers; the call (caller NULL: none started) must then
 * return CUDA_SUCCESS within F25_DEADLINE_MS (on the simulation the model's
 * pause is cut to F25_RELEASE_US first, and a call still waiting then is let
 * go: model off, then on again). Returns 1 when every thread has ended
 * (and is joined); threads that did not are detached, keeping their
 * reference to run. */
static int f25_stop(f25_run_t *run, pthread_t *launchers, int n, const pthread_t *caller,
                    const char *what, void (*quiet)(unsigned))
{
    char line[160];
    long stopped = f25_now_us();
    __atomic_store_n(&run->stop, 1, __ATOMIC_RELEASE);
    if (quiet)
        quiet(F25_RELEASE_US);
    int returned = 1;
    if (caller) {
        returned = f25_wait(&run->stage, 2, F25_DEADLINE_MS);
        CU_ASSERT(returned);
        snprintf(line, sizeof line, "fact 25: %s returned, ms after the launches were told to stop",
                 what);
        conf_observe_int(line, returned ? (f25_now_us() - stopped) / 1000 : -1);
        if (!returned && quiet) {
            quiet(0);
            quiet(F25_RELEASE_US);
        }
        returned = f25_wait(&run->stage, 2, 10000);
        returned ? pthread_join(*caller, NULL) : pthread_detach(*caller);
        if (returned)
            EXPECT(run->call_r, CUDA_SUCCESS);
    }
    int ended = f25_wait(&run->ended, n, 10000);
    for (int i = 0; i < n; i++)
        ended ? pthread_join(launchers[i], NULL) : pthread_detach(launchers[i]);
    EXPECT(__atomic_load_n(&run->flood_r, __ATOMIC_RELAXED), CUDA_SUCCESS);
    return ended && returned;
}

/* One flood with one call in it. Returns 1 when every thread has ended. */
static int f25_phase(f25_run_t *run, void (*quiet)(unsigned))
{
    static const char *const names[2] = {"cuStreamCreate",
                                         "cuKernelGetFunction of a fresh library"};
    const char *what = names[run->call];
    pthread_t launchers[F25_THREADS], caller;
    int n = f25_flood(run, launchers);
    if (quiet)
        quiet(F25_HELD_US);
    if (f25_start(run, f25_caller, &caller) != 0) {
        CU_FAIL("could not start the calling thread");
        f25_stop(run, launchers, n, NULL, what, quiet);
        return 0;
    }
    f25_check_held(run, what);
    f25_pauses(run, what, quiet);
    return f25_stop(run, launchers, n, &caller, what, quiet);
}

/* Fact 25: while 8 threads launch into the primary context of device 0
 * without pause, each on its own stream, another thread's cuStreamCreate and
 * its first cuKernelGetFunction of a freshly loaded library (the first load
 * of that code into the context) do not return; when the launchers pause
 * for 0.4 ms at a time, 2 ms apart (a swap's holds), they return during the
 * pauses, with CUDA_SUCCESS. A context query and the library load itself (lazy
 * loading) are not held. On the simulation the quiet-load model is on for
 * the test. */
static void fact25_launches_hold_loads(void)
{
    void (*quiet)(unsigned) = NULL;
    if (conf_sim) {
        quiet = (void (*)(unsigned))dlsym(RTLD_DEFAULT, "simcuda_quiet_loads");
        CU_ASSERT_PTR_NOT_NULL_FATAL(quiet);
    }
    CUcontext p0;
    CUlibrary lib;
    CUkernel k;
    CUfunction f;
    CUdeviceptr out;
    CUstream streams[F25_THREADS];
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT(cuCtxPushCurrent(p0), CUDA_SUCCESS);
    EXPECT_FATAL(conf_load_probe(&lib, &k), CUDA_SUCCESS);
    EXPECT_FATAL(cuKernelGetFunction(&f, k), CUDA_SUCCESS); /* loaded before the flood */
    EXPECT_FATAL(cuMemAlloc(&out, F25_THREADS * sizeof(unsigned)), CUDA_SUCCESS);
    for (int i = 0; i < F25_THREADS; i++)
        EXPECT_FATAL(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    if (quiet)
        quiet(F25_RELEASE_US);
    int clean = 1;
    for (int c = F25_STREAM; c <= F25_FUNCTION && clean; c++) {
        f25_run_t *run = calloc(1, sizeof *run);
        CU_ASSERT_PTR_NOT_NULL(run);
        if (!run)
            break;
        *run = (f25_run_t){.refs = 1, .ctx = p0, .f = f, .out = out, .call = (enum f25_call)c};
        memcpy(run->streams, streams, sizeof streams);
        clean = f25_phase(run, quiet);
        if (clean && run->call_r == CUDA_SUCCESS && run->call == F25_STREAM)
            EXPECT(cuStreamDestroy(run->made), CUDA_SUCCESS);
        if (clean && run->ready_r == CUDA_SUCCESS && run->call == F25_FUNCTION)
            EXPECT(cuLibraryUnload(run->lib), CUDA_SUCCESS);
        f25_unref(run);
    }
    if (quiet)
        quiet(0);
    if (!clean) {
        CU_FAIL("a thread did not end: what it uses is left in place");
        return;
    }
    for (int i = 0; i < F25_THREADS; i++)
        EXPECT(cuStreamDestroy(streams[i]), CUDA_SUCCESS);
    EXPECT(cuMemFree(out), CUDA_SUCCESS);
    EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);
    conf_clear_stack();
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

void conf_register_streams(CU_pSuite s)
{
    static const hk_test_case_t tests[] = {
        {"fact 20: the per-thread stream is another stream, with its own ID, per thread",
         fact20_per_thread_stream_ids},
        {"fact 22: no per-thread stream in a green context (400); legacy works",
         fact22_green_context_streams},
        {"fact 23: another thread's allocation during a global capture, by mode",
         fact23_capture_modes},
        {"fact 25: launches that never pause hold cuStreamCreate and a first code load",
         fact25_launches_hold_loads},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
