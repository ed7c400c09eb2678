/* Conformance: stream facts 20, 22 and 23: the per-thread stream is a stream
 * of its own on every thread, with its own ID; a green context has no
 * per-thread stream (its legacy stream works); what a thread may do while
 * another thread captures, by capture mode. */
#include "conf.h"

#include <pthread.h>
#include <string.h>

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

void conf_register_streams(CU_pSuite s)
{
    hk_test_add(s, "fact 20: the per-thread stream is another stream, with its own ID, per thread",
                fact20_per_thread_stream_ids);
    hk_test_add(s, "fact 22: no per-thread stream in a green context (400); legacy works",
                fact22_green_context_streams);
    hk_test_add(s, "fact 23: another thread's allocation during a global capture, by mode",
                fact23_capture_modes);
}
