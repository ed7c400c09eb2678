/* Tests of the simulated driver's streams: stream IDs (the per-thread stream
 * is a stream of its own on every thread), the capture modes of threads, the
 * block-by-block execution that makes reductions on different streams
 * interleave as on a GPU while one stream keeps its order, a context
 * synchronisation waiting for launches held running, and memsets and copies
 * captured into graphs; the quiet model is in test_simcuda_quiet.c. The facts
 * shared with the real driver are in tests/conformance (facts 20, 22, 23, 25,
 * 26, 30). */
#include "hk_test.h"
#include "simcuda.h"
#include "test_simcuda_quiet.h"

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

const char simt_probe_ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry hk_probe_kernel(.param .u64 a, .param .u32 b)\n"
                              "{ ret; }\n";

static int init_suite(void)
{
    return cuInit(0) == CUDA_SUCCESS ? 0 : 1;
}

void simt_clear_stack(void)
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
    simt_clear_stack();
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
    simt_clear_stack();
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
    simt_clear_stack();
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
    simt_clear_stack();
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
    simt_clear_stack();
}

/* ---- a context synchronisation waits for launches still running ---- */

typedef struct syncer {
    CUcontext ctx;
    CUresult r;
    int done;
    pthread_mutex_t lock;
    int legacy; /* synchronise the context's legacy stream rather than it */
} syncer_t;

static void *sync_thread(void *arg)
{
    syncer_t *t = arg;
    CUresult r = cuCtxSetCurrent(t->ctx);
    if (r == CUDA_SUCCESS)
        r = t->legacy ? cuStreamSynchronize(CU_STREAM_LEGACY) : cuCtxSynchronize();
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
 * context and a synchronise of its stream waiting, not another context's,
 * nor a synchronise of another stream; the lock is let go meanwhile. */
static void test_sync_waits_for_running(void)
{
    CUcontext a, b, popped;
    CUlibrary lib;
    CUkernel k;
    CUdeviceptr out;
    CUstream other;
    OK(cuCtxCreate(&b, NULL, 0, 0));
    OK(cuCtxCreate(&a, NULL, 0, 0));
    OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    OK(cuLibraryLoadData(&lib, simt_probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_probe_kernel"));
    OK(cuMemAlloc(&out, 4));
    unsigned value = 5;
    void *args[] = {&out, &value};
    simcuda_hold_launches(1);
    OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuStreamSynchronize(other)); /* not the held launch's stream */
    syncer_t ta = {a, CUDA_ERROR_UNKNOWN, 0, PTHREAD_MUTEX_INITIALIZER, 0};
    syncer_t tb = {b, CUDA_ERROR_UNKNOWN, 0, PTHREAD_MUTEX_INITIALIZER, 0};
    pthread_t t1, t2;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t1, NULL, sync_thread, &ta), 0);
    for (int i = 0; i < 5000 && simcuda_syncs_waiting() == 0; i++)
        usleep(1000);
    CU_ASSERT_EQUAL(simcuda_syncs_waiting(), 1);
    syncer_t ts = {a, CUDA_ERROR_UNKNOWN, 0, PTHREAD_MUTEX_INITIALIZER, 1};
    pthread_t t3;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t3, NULL, sync_thread, &ts), 0);
    for (int i = 0; i < 5000 && simcuda_syncs_waiting() < 2; i++)
        usleep(1000);
    CU_ASSERT_EQUAL(simcuda_syncs_waiting(), 2);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t2, NULL, sync_thread, &tb), 0);
    pthread_join(t2, NULL);
    CU_ASSERT_EQUAL(tb.r, CUDA_SUCCESS); /* another context does not wait */
    CU_ASSERT_FALSE(sync_done(&ta));
    CU_ASSERT_FALSE(sync_done(&ts));
    simcuda_finish_launches();
    pthread_join(t1, NULL);
    pthread_join(t3, NULL);
    CU_ASSERT_EQUAL(ta.r, CUDA_SUCCESS);
    CU_ASSERT_EQUAL(ts.r, CUDA_SUCCESS);
    CU_ASSERT_EQUAL(simcuda_syncs_waiting(), 0);
    OK(cuStreamSynchronize(NULL)); /* the held launch's stream: finished */
    OK(cuStreamDestroy(other));
    OK(cuMemFree(out));
    OK(cuLibraryUnload(lib));
    OK(cuCtxPopCurrent(&popped));
    OK(cuCtxDestroy(a));
    OK(cuCtxDestroy(b));
    simt_clear_stack();
}

int hk_test_register(void)
{
    if (!getenv("SIMCUDA_DEVICES"))
        setenv("SIMCUDA_DEVICES", "2", 1);
    CU_pSuite s = hk_test_suite("simcuda streams", init_suite, NULL);
    static const hk_test_case_t tests[] = {
        {"stream IDs: one per stream, the per-thread stream one per thread", test_stream_ids},
        {"capture modes: what a thread may do during another's capture", test_capture_modes},
        {"reductions interleave across streams and keep one stream's order",
         test_interleaved_reductions},
        {"pending blocks finish before a result can be seen", test_pending_completes},
        {"quiet loads: streams and first kernel loads wait for a pause in launches",
         test_quiet_loads},
        {"quiet model: what a service starves, and what it does not (fact 30)", test_quiet_service},
        {"a context synchronisation waits for its launches still running",
         test_sync_waits_for_running},
        {"memsets and copies on a capturing stream run when the graph runs",
         test_captured_memsets_and_copies},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    return 0;
}
