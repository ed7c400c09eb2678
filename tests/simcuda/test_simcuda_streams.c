/* Tests of the simulated driver's streams: stream IDs (the per-thread stream
 * is a stream of its own on every thread), the capture modes of threads, the
 * block-by-block execution that makes reductions on different streams
 * interleave as on a GPU while one stream keeps its order, and the quiet-load
 * model (stream creation and code loading wait for a pause in a flood of
 * launches), a context synchronisation waiting for launches held running, and
 * memsets and copies captured into graphs. The facts shared with the real
 * driver are in tests/conformance (facts 20, 22, 23, 25, 26). */
#include "hk_test.h"
#include "simcuda.h"

#include <cuda.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OK(call) CU_ASSERT_EQUAL_FATAL((call), CUDA_SUCCESS)

/* PTX naming the reduction kernel, whose emulation runs block by block. */
static const char sdot_ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry hk_sdot_kernel(.param .u64 n)\n{ ret; }\n";

/* PTX naming the probe kernel (one thread writes a value), emulated at once. */
static const char probe_ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
                                ".visible .entry hk_probe_kernel(.param .u64 a, .param .u32 b)\n"
                                "{ ret; }\n";

static int init_suite(void)
{
    return cuInit(0) == CUDA_SUCCESS ? 0 : 1;
}

static void clear_stack(void)
{
    CUcontext c;
    while (cuCtxPopCurrent(&c) == CUDA_SUCCESS) {
    }
}

typedef struct ids {
    CUcontext ctx;
    unsigned long long ptds[2], legacy, null;
    CUresult r;
} ids_t;

static void *ids_thread(void *arg)
{
    ids_t *t = arg;
    t->r = cuCtxSetCurrent(t->ctx);
    if (t->r == CUDA_SUCCESS)
        t->r = cuStreamGetId(CU_STREAM_PER_THREAD, &t->ptds[0]);
    if (t->r == CUDA_SUCCESS)
        t->r = cuStreamGetId(CU_STREAM_PER_THREAD, &t->ptds[1]);
    if (t->r == CUDA_SUCCESS)
        t->r = cuStreamGetId(CU_STREAM_LEGACY, &t->legacy);
    if (t->r == CUDA_SUCCESS)
        t->r = cuStreamGetId(NULL, &t->null);
    return NULL;
}

static void test_stream_ids(void)
{
    CUcontext c, other;
    CUstream s1, s2;
    unsigned long long id1, id2, again, mine, in_other;
    OK(cuCtxCreate(&c, NULL, 0, 0));
    OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&s2, 0));
    OK(cuStreamGetId(s1, &id1));
    OK(cuStreamGetId(s2, &id2));
    OK(cuStreamGetId(s1, &again));
    CU_ASSERT_NOT_EQUAL(id1, id2);
    CU_ASSERT_EQUAL(id1, again);
    OK(cuStreamGetId(CU_STREAM_PER_THREAD, &mine));
    ids_t t[2] = {{.ctx = c}, {.ctx = c}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, ids_thread, &t[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(t[i].r, CUDA_SUCCESS);
        CU_ASSERT_EQUAL(t[i].ptds[0], t[i].ptds[1]); /* stable on its thread */
        CU_ASSERT_NOT_EQUAL(t[i].ptds[0], mine);     /* but another stream per thread */
        CU_ASSERT_EQUAL(t[i].legacy, t[i].null);     /* NULL is the legacy stream */
        CU_ASSERT_NOT_EQUAL(t[i].legacy, t[i].ptds[0]);
    }
    CU_ASSERT_NOT_EQUAL(t[0].ptds[0], t[1].ptds[0]);
    CU_ASSERT_EQUAL(t[0].legacy, t[1].legacy); /* one legacy stream per context */
    /* another context: another per-thread stream on the same thread */
    OK(cuCtxCreate(&other, NULL, 0, 0));
    OK(cuStreamGetId(CU_STREAM_PER_THREAD, &in_other));
    CU_ASSERT_NOT_EQUAL(in_other, mine);
    OK(cuCtxDestroy(other));
    OK(cuStreamDestroy(s1));
    OK(cuStreamDestroy(s2));
    OK(cuCtxDestroy(c));
    /* with nothing current, a special stream names no stream */
    CU_ASSERT_EQUAL(cuStreamGetId(CU_STREAM_PER_THREAD, &mine), CUDA_ERROR_INVALID_CONTEXT);
    clear_stack();
}

typedef struct alloc_try {
    CUstreamCaptureMode mode;
    CUresult r;
} alloc_try_t;

static void *alloc_thread(void *arg)
{
    alloc_try_t *a = arg;
    CUcontext c;
    CUdeviceptr p;
    CUstreamCaptureMode m = a->mode;
    a->r = cuDevicePrimaryCtxRetain(&c, 0);
    if (a->r == CUDA_SUCCESS)
        a->r = cuCtxSetCurrent(c);
    if (a->r == CUDA_SUCCESS)
        a->r = cuThreadExchangeStreamCaptureMode(&m);
    if (a->r == CUDA_SUCCESS) {
        a->r = cuMemAlloc(&p, 64);
        if (a->r == CUDA_SUCCESS)
            cuMemFree(p);
    }
    cuDevicePrimaryCtxRelease(0);
    return NULL;
}

/* cuThreadExchangeStreamCaptureMode: what another thread may do while this
 * one captures in global mode. */
static void test_capture_modes(void)
{
    CUcontext p;
    CUstream s;
    CUgraph g = NULL;
    CUdeviceptr d;
    OK(cuDevicePrimaryCtxRetain(&p, 0));
    OK(cuCtxSetCurrent(p));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    static const CUstreamCaptureMode modes[3] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                 CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                 CU_STREAM_CAPTURE_MODE_RELAXED};
    static const CUresult want[3] = {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, CUDA_SUCCESS,
                                     CUDA_SUCCESS};
    for (int i = 0; i < 3; i++) {
        alloc_try_t a = {modes[i], CUDA_ERROR_UNKNOWN};
        pthread_t t;
        OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, alloc_thread, &a), 0);
        pthread_join(t, NULL);
        CU_ASSERT_EQUAL(a.r, want[i]);
        g = NULL;
        /* a forbidden call invalidates the capture; allowed ones leave it */
        CU_ASSERT_EQUAL(cuStreamEndCapture(s, &g), i == 0 ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                                           : CUDA_SUCCESS);
        if (g)
            OK(cuGraphDestroy(g));
    }
    /* the capturing thread itself, in relaxed mode */
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_ASSERT_EQUAL(cuMemAlloc(&d, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuStreamEndCapture(s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ? CUDA_SUCCESS
                                                                           : CUDA_ERROR_UNKNOWN);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuThreadExchangeStreamCaptureMode(&m));
    CU_ASSERT_EQUAL(m, CU_STREAM_CAPTURE_MODE_GLOBAL); /* the previous mode comes back */
    OK(cuMemAlloc(&d, 64));
    OK(cuThreadExchangeStreamCaptureMode(&m));
    CU_ASSERT_EQUAL(m, CU_STREAM_CAPTURE_MODE_RELAXED);
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphDestroy(g));
    OK(cuMemFree(d));
    m = (CUstreamCaptureMode)7;
    CU_ASSERT_EQUAL(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
    clear_stack();
    OK(cuDevicePrimaryCtxRelease(0));
}

/* ---- reductions interleave across streams, keep their order on one ---- */

enum { N = 4096 * 8 + 5 }; /* 9 blocks of hk-cuda's float grid */

typedef struct scratch {
    CUdeviceptr partials, counter, result;
} scratch_t;

static void make_scratch(scratch_t *s)
{
    OK(cuMemAlloc(&s->partials, 1024 * sizeof(double)));
    OK(cuMemAlloc(&s->counter, 64));
    OK(cuMemAlloc(&s->result, 64));
    OK(cuMemsetD8(s->counter, 0, 64));
}

static void free_scratch(scratch_t *s)
{
    OK(cuMemFree(s->partials));
    OK(cuMemFree(s->counter));
    OK(cuMemFree(s->result));
}

static CUresult launch_sdot(CUkernel k, CUstream st, CUdeviceptr x, CUdeviceptr y, scratch_t *s)
{
    long long n = N, inc = 1;
    void *args[] = {&n, &x, &inc, &y, &inc, &s->partials, &s->counter, &s->result};
    return cuLaunchKernel((CUfunction)k, 9, 1, 1, 256, 1, 1, 0, st, args, NULL);
}

static float result_of(const scratch_t *s)
{
    float r = -1.0f;
    CU_ASSERT_EQUAL(cuMemcpyDtoH(&r, s->result, sizeof r), CUDA_SUCCESS);
    return r;
}

static void test_interleaved_reductions(void)
{
    CUcontext c;
    CUlibrary lib;
    CUkernel k;
    CUstream a, b;
    CUdeviceptr x, y;
    scratch_t s1, s2;
    static float hx[N], hy[N];
    double want = 0.0;
    for (int i = 0; i < N; i++) {
        hx[i] = (float)(i % 7) - 3.0f;
        hy[i] = (float)(i % 5) - 1.5f;
        want += (double)hx[i] * hy[i];
    }
    OK(cuCtxCreate(&c, NULL, 0, 0));
    OK(cuLibraryLoadData(&lib, sdot_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_sdot_kernel"));
    OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    OK(cuMemAlloc(&x, sizeof hx));
    OK(cuMemAlloc(&y, sizeof hy));
    OK(cuMemcpyHtoD(x, hx, sizeof hx));
    OK(cuMemcpyHtoD(y, hy, sizeof hy));
    make_scratch(&s1);
    make_scratch(&s2);

    /* one stream, one scratch: in order, both right */
    OK(launch_sdot(k, a, x, y, &s1));
    OK(launch_sdot(k, a, x, y, &s1));
    CU_ASSERT_DOUBLE_EQUAL(result_of(&s1), want, 1e-3);
    /* two streams, a scratch each: both right */
    OK(cuMemsetD8(s1.result, 0, 4));
    OK(launch_sdot(k, a, x, y, &s1));
    OK(launch_sdot(k, b, x, y, &s2));
    CU_ASSERT_DOUBLE_EQUAL(result_of(&s1), want, 1e-3);
    CU_ASSERT_DOUBLE_EQUAL(result_of(&s2), want, 1e-3);
    /* two streams, one partials and counter (results apart): the blocks
     * interleave, the counter no longer tells the last block, and a result
     * sums partials of the other launch, or is not written at all */
    double want_yy = 0.0;
    for (int i = 0; i < N; i++)
        want_yy += (double)hy[i] * hy[i];
    OK(cuMemsetD8(s1.result, 0, 4));
    OK(cuMemsetD8(s2.result, 0, 4));
    scratch_t shared = {s1.partials, s1.counter, s2.result};
    OK(launch_sdot(k, a, x, y, &s1));
    OK(launch_sdot(k, b, y, y, &shared));
    unsigned counter = 0;
    OK(cuMemcpyDtoH(&counter, s1.counter, sizeof counter));
    CU_ASSERT(fabs(result_of(&s1) - want) > 1e-3 || fabs(result_of(&s2) - want_yy) > 1e-3 ||
              counter != 0);
    OK(cuMemsetD8(s1.counter, 0, 4));
    /* the legacy stream waits for a blocking stream's work, and the other way
     * round: in order again, on a fresh scratch */
    CUstream blocking;
    OK(cuStreamCreate(&blocking, 0));
    OK(launch_sdot(k, blocking, x, y, &s2));
    OK(launch_sdot(k, NULL, x, y, &s2));
    OK(launch_sdot(k, blocking, x, y, &s2));
    CU_ASSERT_DOUBLE_EQUAL(result_of(&s2), want, 1e-3);
    OK(cuStreamDestroy(blocking));

    free_scratch(&s1);
    free_scratch(&s2);
    OK(cuMemFree(x));
    OK(cuMemFree(y));
    OK(cuStreamDestroy(a));
    OK(cuStreamDestroy(b));
    OK(cuLibraryUnload(lib));
    OK(cuCtxDestroy(c));
    clear_stack();
}

/* A pending grid completes before anything could see its result, including
 * the end of its context. */
static void test_pending_completes(void)
{
    CUcontext c;
    CUlibrary lib;
    CUkernel k;
    CUstream a;
    CUdeviceptr x, host_result;
    scratch_t s;
    static float hx[N];
    for (int i = 0; i < N; i++)
        hx[i] = 1.0f;
    OK(cuCtxCreate(&c, NULL, 0, 0));
    OK(cuLibraryLoadData(&lib, sdot_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_sdot_kernel"));
    OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    OK(cuMemAlloc(&x, sizeof hx));
    OK(cuMemcpyHtoD(x, hx, sizeof hx));
    make_scratch(&s);
    /* the result in mapped host memory: read after a synchronise */
    float *mapped = NULL;
    OK(cuMemHostAlloc((void **)&mapped, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    OK(cuMemHostGetDevicePointer(&host_result, mapped, 0));
    *mapped = -1.0f;
    s.result = host_result;
    OK(launch_sdot(k, a, x, x, &s));
    CU_ASSERT_EQUAL(*mapped, -1.0f); /* half of its blocks ran */
    OK(cuStreamSynchronize(a));
    CU_ASSERT_EQUAL(*mapped, (float)N);
    *mapped = -1.0f;
    OK(launch_sdot(k, a, x, x, &s));
    OK(cuCtxSynchronize());
    CU_ASSERT_EQUAL(*mapped, (float)N);
    OK(cuMemFreeHost(mapped));
    OK(cuMemFree(s.partials));
    OK(cuMemFree(s.counter));
    OK(cuMemFree(x));
    OK(cuStreamDestroy(a));
    OK(cuLibraryUnload(lib));
    OK(cuCtxDestroy(c));
    clear_stack();
}

/* ---- quiet loads (fact 25): a flood of launches holds stream creation and
 * code loading in its context until it pauses ---- */

#define FLOOD_THREADS 4
/* The pause that lets a held call go: long, because on two loaded cores under
 * a sanitizer the scheduler can keep every launcher away for some
 * milliseconds (2 ms and 5 ms let calls through in such runs; 50 ms did not),
 * and a flood must not look like it paused. */
#define QUIET_US 50000u

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
    for (unsigned n = 1; r == CUDA_SUCCESS && !__atomic_load_n(&fl->stop, __ATOMIC_ACQUIRE);
         n++) {
        r = cuLaunchKernel(fl->f, 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
        if (r == CUDA_SUCCESS && n % 64 == 0)
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
    for (int t = 0; t < 5000 && flood_count(fl) < before + 256; t++)
        usleep(1000);
    CU_ASSERT(flood_count(fl) >= before + 256);
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

typedef enum call_kind { CALL_STREAM, CALL_FUNCTION, CALL_LAUNCH, CALL_LIBRARY } call_kind_t;

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
    CUresult want;     /* what the call must return */
    CUresult r;
    int done;          /* atomic */
} call_t;

static void *call_thread(void *arg)
{
    call_t *c = arg;
    unsigned value = 77;
    void *args[] = {&c->out, &value};
    CUresult r = cuCtxSetCurrent(c->ctx);
    if (r == CUDA_SUCCESS) {
        switch (c->kind) {
        case CALL_STREAM: r = cuStreamCreate(&c->s, CU_STREAM_NON_BLOCKING); break;
        case CALL_FUNCTION: r = cuKernelGetFunction(&c->f, c->k); break;
        case CALL_LAUNCH:
            r = cuLaunchKernel((CUfunction)c->k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
            break;
        case CALL_LIBRARY:
            r = cuLibraryLoadData(&c->lib, probe_ptx, NULL, NULL, 0, NULL, NULL, 0);
            break;
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
    for (int t = 0; t < ms && !__atomic_load_n(&c->done, __ATOMIC_ACQUIRE); t++)
        usleep(1000);
    return __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
}

/* Ends a call that has not returned in time (the test has failed by then) by
 * turning the model off, and joins its thread. */
static void call_join(call_t *c, pthread_t t)
{
    if (!call_wait(c, 5000))
        simcuda_quiet_loads(0);
    pthread_join(t, NULL);
}

static double since_ms(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1e3 + (t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The call must wait while the flood goes on (150 ms, counted by
 * simcuda_loads_waiting) and return c->want soon (< 1 s) after it stops. */
static void expect_held(flood_t *fl, call_t *c)
{
    pthread_t t;
    if (flood_start(fl) != 0 || pthread_create(&t, NULL, call_thread, c) != 0) {
        CU_FAIL("could not start the flood or the call");
        flood_stop(fl);
        return;
    }
    /* the call first has to get its turn among the launchers */
    for (int i = 0; i < 5000 && !simcuda_loads_waiting() && !call_wait(c, 0); i++)
        usleep(1000);
    CU_ASSERT_EQUAL(simcuda_loads_waiting(), 1);
    unsigned long before = flood_count(fl);
    usleep(150 * 1000);
    CU_ASSERT_EQUAL(__atomic_load_n(&c->done, __ATOMIC_ACQUIRE), 0);
    CU_ASSERT_EQUAL(simcuda_loads_waiting(), 1);
    CU_ASSERT(flood_count(fl) > before + 64); /* the launches went on meanwhile */
    if (c->unload)
        CU_ASSERT_EQUAL(cuLibraryUnload(c->unload), CUDA_SUCCESS);
    flood_stop(fl);
    struct timespec stopped;
    clock_gettime(CLOCK_MONOTONIC, &stopped);
    CU_ASSERT(call_wait(c, 1000));
    CU_ASSERT(since_ms(&stopped) < 1000.0);
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
    CU_ASSERT(call_wait(c, 5000));
    CU_ASSERT_EQUAL(__atomic_load_n(&fl->stop, __ATOMIC_ACQUIRE), 0);
    flood_stop(fl);
    call_join(c, t);
    CU_ASSERT_EQUAL(c->r, CUDA_SUCCESS);
}

/* Under the model, stream creation, the first load of a library's kernel into
 * the context (cuKernelGetFunction or a CUkernel launch) wait while launches
 * go on and proceed when they stop (a library unloaded meanwhile: 400); a
 * library load does not wait; with the model off nothing waits. */
static void test_quiet_loads(void)
{
    size_t libs = simcuda_live_libraries(), blocks = simcuda_live_allocations();
    size_t ctxs = simcuda_live_contexts();
    flood_t fl;
    memset(&fl, 0, sizeof fl);
    CUlibrary lib, fresh;
    CUkernel k, kf;
    unsigned got = 0;
    OK(cuCtxCreate(&fl.ctx, NULL, 0, 0));
    OK(cuLibraryLoadData(&lib, probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_probe_kernel"));
    OK(cuKernelGetFunction(&fl.f, k));
    OK(cuMemAlloc(&fl.out, (FLOOD_THREADS + 1) * sizeof(unsigned)));
    for (int i = 0; i < FLOOD_THREADS; i++)
        OK(cuStreamCreate(&fl.streams[i], CU_STREAM_NON_BLOCKING));
    simcuda_quiet_loads(QUIET_US);
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

    CU_ASSERT_EQUAL(cuLibraryLoadData(&fresh, probe_ptx, NULL, NULL, 0, NULL, NULL, 0),
                    CUDA_SUCCESS);
    call_t launch = {.kind = CALL_LAUNCH, .ctx = fl.ctx, .out = fl.out + FLOOD_THREADS * 4};
    CU_ASSERT_EQUAL(cuLibraryGetKernel(&launch.k, fresh, "hk_probe_kernel"), CUDA_SUCCESS);
    expect_held(&fl, &launch);
    CU_ASSERT_EQUAL(cuMemcpyDtoH(&got, launch.out, sizeof got), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(got, 77);

    /* a library unloaded while its first load waits: 400 once the wait ends */
    call_t gone = {.kind = CALL_FUNCTION, .ctx = fl.ctx, .want = CUDA_ERROR_INVALID_HANDLE};
    CU_ASSERT_EQUAL(cuLibraryLoadData(&gone.unload, probe_ptx, NULL, NULL, 0, NULL, NULL, 0),
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
    clear_stack();
    CU_ASSERT_EQUAL(simcuda_live_libraries(), libs);
    CU_ASSERT_EQUAL(simcuda_live_allocations(), blocks);
    CU_ASSERT_EQUAL(simcuda_live_contexts(), ctxs);
}

/* ---- a context synchronisation waits for launches still running ---- */

typedef struct syncer {
    CUcontext ctx;
    CUresult r;
    int done;
    pthread_mutex_t lock;
} syncer_t;

static void *sync_thread(void *arg)
{
    syncer_t *t = arg;
    CUresult r = cuCtxSetCurrent(t->ctx);
    if (r == CUDA_SUCCESS)
        r = cuCtxSynchronize();
    cuCtxSetCurrent(NULL);
    pthread_mutex_lock(&t->lock);
    t->r = r;
    t->done = 1;
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static int sync_done(syncer_t *t)
{
    pthread_mutex_lock(&t->lock);
    int d = t->done;
    pthread_mutex_unlock(&t->lock);
    return d;
}

/* A launch held running (simcuda_hold_launches) keeps cuCtxSynchronize of its
 * context waiting, not another context's, nor a stream synchronise; the
 * lock is let go meanwhile. */
static void test_sync_waits_for_running(void)
{
    CUcontext a, b, popped;
    CUlibrary lib;
    CUkernel k;
    CUdeviceptr out;
    OK(cuCtxCreate(&b, NULL, 0, 0));
    OK(cuCtxCreate(&a, NULL, 0, 0));
    OK(cuLibraryLoadData(&lib, probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_probe_kernel"));
    OK(cuMemAlloc(&out, 4));
    unsigned value = 5;
    void *args[] = {&out, &value};
    simcuda_hold_launches(1);
    OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuStreamSynchronize(NULL)); /* its work was done at the launch */
    syncer_t ta = {a, CUDA_ERROR_UNKNOWN, 0, PTHREAD_MUTEX_INITIALIZER};
    syncer_t tb = {b, CUDA_ERROR_UNKNOWN, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t t1, t2;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t1, NULL, sync_thread, &ta), 0);
    for (int i = 0; i < 5000 && simcuda_syncs_waiting() == 0; i++)
        usleep(1000);
    CU_ASSERT_EQUAL(simcuda_syncs_waiting(), 1);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t2, NULL, sync_thread, &tb), 0);
    pthread_join(t2, NULL);
    CU_ASSERT_EQUAL(tb.r, CUDA_SUCCESS); /* another context does not wait */
    CU_ASSERT_FALSE(sync_done(&ta));
    simcuda_finish_launches();
    pthread_join(t1, NULL);
    CU_ASSERT_EQUAL(ta.r, CUDA_SUCCESS);
    CU_ASSERT_EQUAL(simcuda_syncs_waiting(), 0);
    OK(cuMemFree(out));
    OK(cuLibraryUnload(lib));
    OK(cuCtxPopCurrent(&popped));
    OK(cuCtxDestroy(a));
    OK(cuCtxDestroy(b));
    clear_stack();
}

/* Memsets and copies on a capturing stream are nodes of its graph: they run
 * when it is launched, in order with its kernels. */
static void test_captured_memsets_and_copies(void)
{
    CUcontext c;
    CUstream s;
    CUdeviceptr d;
    CUgraph g = NULL;
    CUgraphExec x = NULL;
    unsigned host[4] = {1, 2, 3, 4}, back[4] = {0, 0, 0, 0};
    OK(cuCtxCreate(&c, NULL, 0, 0));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuMemAlloc(&d, sizeof host));
    OK(cuMemsetD8(d, 0, sizeof host));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemsetD32Async(d, 9, 4, s));
    OK(cuMemcpyHtoDAsync(d + 8, host, 8, s));
    OK(cuMemcpyDtoHAsync(back, d, sizeof back, s));
    OK(cuStreamEndCapture(s, &g));
    CU_ASSERT_EQUAL(back[0], 0); /* nothing ran */
    OK(cuMemcpyDtoH(back, d, sizeof back));
    CU_ASSERT_EQUAL(back[0], 0);
    host[0] = 7; /* a copy reads the host memory when the graph runs */
    OK(cuGraphInstantiate(&x, g, 0));
    OK(cuGraphLaunch(x, s));
    OK(cuStreamSynchronize(s));
    CU_ASSERT_EQUAL(back[0], 9);
    CU_ASSERT_EQUAL(back[1], 9);
    CU_ASSERT_EQUAL(back[2], 7);
    CU_ASSERT_EQUAL(back[3], 2);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
    OK(cuMemFree(d));
    OK(cuStreamDestroy(s));
    OK(cuCtxDestroy(c));
    clear_stack();
}

int hk_test_register(void)
{
    if (!getenv("SIMCUDA_DEVICES"))
        setenv("SIMCUDA_DEVICES", "2", 1);
    CU_pSuite s = hk_test_suite("simcuda streams", init_suite, NULL);
    hk_test_add(s, "stream IDs: one per stream, the per-thread stream one per thread",
                test_stream_ids);
    hk_test_add(s, "capture modes: what a thread may do during another's capture",
                test_capture_modes);
    hk_test_add(s, "reductions interleave across streams and keep one stream's order",
                test_interleaved_reductions);
    hk_test_add(s, "pending blocks finish before a result can be seen", test_pending_completes);
    hk_test_add(s, "quiet loads: streams and first kernel loads wait for a pause in launches",
                test_quiet_loads);
    hk_test_add(s, "a context synchronisation waits for its launches still running",
                test_sync_waits_for_running);
    hk_test_add(s, "memsets and copies on a capturing stream run when the graph runs",
                test_captured_memsets_and_copies);
    return 0;
}
