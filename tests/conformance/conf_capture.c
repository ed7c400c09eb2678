/* Conformance, fact 26: what the driver refuses while a stream is being
 * captured, and whether the refusal invalidates the capture, for each
 * capture mode, capturing stream (non-blocking or blocking) and caller (the
 * capturing thread, in its default global mode or switched to relaxed;
 * another thread in global mode; another thread in relaxed mode). Each cell
 * makes one call during a fresh capture that already holds one launch, then
 * asks cuStreamIsCapturing and ends the capture: the call's status and the
 * end's (901 when invalidated) must be the rule's. The rules, as measured on
 * an H200 (driver 580), are in docs/contexts.md. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "hk_test.h"

typedef struct cenv {
    CUcontext ctx;
    CUstream cap, other;
    CUdeviceptr buf, pre;  /* pre: made before the capture, for the free */
    CUevent ev_other;      /* recorded on other before the capture */
    CUlibrary lib;         /* loaded before the capture: its probe kernel is launched */
    CUkernel probe;
    CUlibrary lib2;        /* another copy, never launched: unloaded, or its kernel's */
    CUkernel probe2;       /* function first taken, during the capture */
} cenv_t;

typedef CUresult (*cop_fn)(cenv_t *);

/* What a call does during a capture. */
enum rule {
    R_OK,        /* succeeds, the capture stays valid */
    R_ON_CAP,    /* 900 and invalidated, in every mode, from any thread */
    R_UNSAFE,    /* 900 and invalidated where the capture forbids unsafe calls, else R_OK */
    R_LOAD,      /* succeeds, invalidated where unsafe calls are forbidden */
    R_LEGACY,    /* blocking capture: 906 and invalidated; else R_OK */
    R_LEGACY_UNSAFE, /* blocking capture: 906 and invalidated; else R_UNSAFE */
    R_ISCAP_LEGACY,  /* blocking capture: 906, valid; else R_OK */
    R_CAPTURED_EVENT, /* 907 and invalidated */
    R_ISOLATION  /* 905 and invalidated */
};

static CUresult probe(CUstream s, cenv_t *e)
{
    unsigned value = 7;
    void *args[] = {&e->buf, &value};
    return cuLaunchKernel((CUfunction)e->probe, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

#define OP(name) static CUresult op_##name(cenv_t *e)
OP(getid_cap) { unsigned long long id; return cuStreamGetId(e->cap, &id); }
OP(getid_other) { unsigned long long id; return cuStreamGetId(e->other, &id); }
OP(getid_legacy) { unsigned long long id; (void)e; return cuStreamGetId(CU_STREAM_LEGACY, &id); }
OP(getid_null) { unsigned long long id; (void)e; return cuStreamGetId(NULL, &id); }
OP(getid_pts) { unsigned long long id; (void)e; return cuStreamGetId(CU_STREAM_PER_THREAD, &id); }
OP(getctx_cap) { CUcontext c; return cuStreamGetCtx(e->cap, &c); }
OP(getctx_legacy) { CUcontext c; (void)e; return cuStreamGetCtx(CU_STREAM_LEGACY, &c); }
OP(iscap_cap) { CUstreamCaptureStatus s; return cuStreamIsCapturing(e->cap, &s); }
OP(iscap_legacy) { CUstreamCaptureStatus s; (void)e; return cuStreamIsCapturing(CU_STREAM_LEGACY, &s); }
OP(capinfo_cap)
{
    CUstreamCaptureStatus s;
    cuuint64_t id;
    return cuStreamGetCaptureInfo(e->cap, &s, &id, NULL, NULL, NULL, NULL);
}
OP(query_cap) { return cuStreamQuery(e->cap); }
OP(query_other) { return cuStreamQuery(e->other); }
OP(query_legacy) { (void)e; return cuStreamQuery(CU_STREAM_LEGACY); }
OP(sync_cap) { return cuStreamSynchronize(e->cap); }
OP(sync_other) { return cuStreamSynchronize(e->other); }
OP(sync_legacy) { (void)e; return cuStreamSynchronize(CU_STREAM_LEGACY); }
OP(ctxsync) { (void)e; return cuCtxSynchronize(); }
OP(memalloc)
{
    CUdeviceptr p;
    CUresult r = cuMemAlloc(&p, 1 << 16);
    (void)e;
    if (r == CUDA_SUCCESS)
        cuMemFree(p);
    return r;
}
OP(memfree)
{
    CUresult r = cuMemFree(e->pre);
    if (r == CUDA_SUCCESS)
        e->pre = 0;
    return r;
}
OP(memhostalloc)
{
    void *p;
    CUresult r = cuMemHostAlloc(&p, 1 << 12, CU_MEMHOSTALLOC_DEVICEMAP);
    (void)e;
    if (r == CUDA_SUCCESS)
        r = cuMemFreeHost(p);
    return r;
}
OP(memset_cap) { return cuMemsetD8Async(e->buf, 0, 64, e->cap); }
OP(memset_sync) { return cuMemsetD8(e->buf, 0, 64); }
OP(memcpy_sync) { static char h[64]; return cuMemcpyHtoD(e->buf, h, sizeof h); }
OP(memcpy_cap) { static char h[64]; return cuMemcpyHtoDAsync(e->buf, h, sizeof h, e->cap); }
OP(launch_cap) { return probe(e->cap, e); }
OP(launch_legacy) { return probe(CU_STREAM_LEGACY, e); }
OP(launch_pts) { return probe(CU_STREAM_PER_THREAD, e); }
OP(launch_other) { return probe(e->other, e); }
OP(event_capev)
{
    CUevent ev;
    CUresult r = cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        return r;
    r = cuEventRecord(ev, e->cap);
    if (r == CUDA_SUCCESS)
        r = cuEventQuery(ev);
    cuEventDestroy(ev);
    return r;
}
OP(waitevent_external) { return cuStreamWaitEvent(e->cap, e->ev_other, 0); }
OP(eventsync_other) { return cuEventSynchronize(e->ev_other); }
OP(streamcreate)
{
    CUstream s;
    CUresult r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    (void)e;
    if (r == CUDA_SUCCESS)
        cuStreamDestroy(s);
    return r;
}
OP(libload)
{
    CUlibrary l;
    CUresult r = cuLibraryLoadData(&l, hk__conf_fatbin, NULL, NULL, 0, NULL, NULL, 0);
    (void)e;
    if (r == CUDA_SUCCESS)
        cuLibraryUnload(l);
    return r;
}
OP(libunload)
{
    CUresult r = cuLibraryUnload(e->lib2);
    if (r == CUDA_SUCCESS)
        e->lib2 = NULL;
    return r;
}
OP(kernelfunc)
{
    CUfunction f;
    return cuKernelGetFunction(&f, e->probe2);
}
OP(ctxid) { unsigned long long id; (void)e; return cuCtxGetId(NULL, &id); }
OP(pushpop)
{
    CUcontext c;
    CUresult r = cuCtxPushCurrent(e->ctx);
    return r == CUDA_SUCCESS ? cuCtxPopCurrent(&c) : r;
}
OP(primaryretain)
{
    CUcontext c;
    CUresult r = cuDevicePrimaryCtxRetain(&c, 0);
    (void)e;
    return r == CUDA_SUCCESS ? cuDevicePrimaryCtxRelease(0) : r;
}
OP(exchange)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUresult r = cuThreadExchangeStreamCaptureMode(&m);
    (void)e;
    return r == CUDA_SUCCESS ? cuThreadExchangeStreamCaptureMode(&m) : r;
}

static const struct cop {
    const char *name;
    cop_fn fn;
    enum rule rule;
} ops[] = {
#define C(name, rule) {#name, op_##name, rule}
    C(getid_cap, R_ON_CAP),       C(getid_other, R_OK),         C(getid_legacy, R_LEGACY),
    C(getid_null, R_LEGACY),      C(getid_pts, R_OK),           C(getctx_cap, R_OK),
    C(getctx_legacy, R_LEGACY),   C(iscap_cap, R_OK),           C(iscap_legacy, R_ISCAP_LEGACY),
    C(capinfo_cap, R_OK),         C(query_cap, R_ON_CAP),       C(query_other, R_UNSAFE),
    C(query_legacy, R_LEGACY_UNSAFE), C(sync_cap, R_ON_CAP),    C(sync_other, R_UNSAFE),
    C(sync_legacy, R_LEGACY_UNSAFE), C(ctxsync, R_ON_CAP),      C(memalloc, R_UNSAFE),
    C(memfree, R_UNSAFE),         C(memhostalloc, R_UNSAFE),    C(memset_cap, R_OK),
    C(memset_sync, R_LEGACY),     C(memcpy_sync, R_LEGACY),     C(memcpy_cap, R_OK),
    C(launch_cap, R_OK),          C(launch_legacy, R_LEGACY),   C(launch_pts, R_OK),
    C(launch_other, R_OK),        C(event_capev, R_CAPTURED_EVENT),
    C(waitevent_external, R_ISOLATION), C(eventsync_other, R_UNSAFE),
    C(streamcreate, R_OK),        C(libload, R_LOAD),           C(libunload, R_UNSAFE),
    C(kernelfunc, R_OK),          C(ctxid, R_OK),               C(pushpop, R_OK),
    C(primaryretain, R_OK),       C(exchange, R_OK),
#undef C
};

/* Who makes the call: the capturing thread (in its default global mode, or
 * switched to relaxed for the call), or another thread (global or relaxed). */
enum caller { SAME, SAME_RELAXED, OTHER_GLOBAL, OTHER_RELAXED, N_CALLERS };
static const char *const caller_names[N_CALLERS] = {"same", "same-relaxed", "other-global",
                                                    "other-relaxed"};
static const CUstreamCaptureMode modes[3] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
                                             CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                             CU_STREAM_CAPTURE_MODE_RELAXED};
static const char *const mode_names[3] = {"global", "thread-local", "relaxed"};

/* The capture forbids this caller's unsafe calls (the rule of
 * cuThreadExchangeStreamCaptureMode's documentation, as measured). */
static int forbids(int mode, enum caller who)
{
    if (who == SAME_RELAXED || who == OTHER_RELAXED)
        return 0;
    return modes[mode] == CU_STREAM_CAPTURE_MODE_GLOBAL ||
           (modes[mode] == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && who == SAME);
}

/* The expected status of the call and whether the capture is invalidated. */
static void expected(enum rule rule, int mode, int blocking, enum caller who, CUresult *want,
                     int *inv)
{
    int f = forbids(mode, who);
    *want = CUDA_SUCCESS;
    *inv = 0;
    switch (rule) {
    case R_OK:
        break;
    case R_ON_CAP:
        *want = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, *inv = 1;
        break;
    case R_LEGACY_UNSAFE:
        if (!blocking) {
            *want = f ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS, *inv = f;
            break;
        }
        /* fall through */
    case R_LEGACY:
        if (blocking)
            *want = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, *inv = 1;
        break;
    case R_UNSAFE:
        *want = f ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS, *inv = f;
        break;
    case R_LOAD:
        *inv = f;
        break;
    case R_ISCAP_LEGACY:
        if (blocking)
            *want = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        break;
    case R_CAPTURED_EVENT:
        *want = CUDA_ERROR_CAPTURED_EVENT, *inv = 1;
        break;
    case R_ISOLATION:
        *want = CUDA_ERROR_STREAM_CAPTURE_ISOLATION, *inv = 1;
        break;
    }
}

typedef struct callarg {
    cenv_t *e;
    cop_fn fn;
    int relaxed;
    CUresult r;
} callarg_t;

static void *call_elsewhere(void *arg)
{
    callarg_t *a = arg;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    a->r = cuCtxSetCurrent(a->e->ctx);
    if (a->r == CUDA_SUCCESS && a->relaxed)
        a->r = cuThreadExchangeStreamCaptureMode(&m);
    if (a->r == CUDA_SUCCESS)
        a->r = a->fn(a->e);
    cuCtxSetCurrent(NULL);
    return NULL;
}

static CUresult call_as(cenv_t *e, cop_fn fn, enum caller who)
{
    if (who == SAME)
        return fn(e);
    if (who == SAME_RELAXED) {
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
        CUresult r = cuThreadExchangeStreamCaptureMode(&m);
        if (r != CUDA_SUCCESS)
            return r;
        r = fn(e);
        EXPECT(cuThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
        return r;
    }
    callarg_t a = {e, fn, who == OTHER_RELAXED, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    if (pthread_create(&t, NULL, call_elsewhere, &a) != 0)
        return CUDA_ERROR_UNKNOWN;
    pthread_join(t, NULL);
    return a.r;
}

/* Streams, memory, an event and a library made before the capture. */
static int env_up(cenv_t *e, CUcontext ctx, int blocking)
{
    memset(e, 0, sizeof *e);
    e->ctx = ctx;
    int ok = cuStreamCreate(&e->cap, blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING) == 0 &&
             cuStreamCreate(&e->other, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
             cuMemAlloc(&e->buf, 4096) == CUDA_SUCCESS &&
             cuMemAlloc(&e->pre, 4096) == CUDA_SUCCESS &&
             cuEventCreate(&e->ev_other, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
             cuEventRecord(e->ev_other, e->other) == CUDA_SUCCESS &&
             conf_load_probe(&e->lib, &e->probe) == CUDA_SUCCESS &&
             conf_load_probe(&e->lib2, &e->probe2) == CUDA_SUCCESS;
    return ok && cuStreamSynchronize(e->other) == CUDA_SUCCESS;
}

static void env_down(cenv_t *e)
{
    EXPECT(cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(e->cap), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(e->other), CUDA_SUCCESS);
    EXPECT(cuMemFree(e->buf), CUDA_SUCCESS);
    if (e->pre)
        EXPECT(cuMemFree(e->pre), CUDA_SUCCESS);
    EXPECT(cuEventDestroy(e->ev_other), CUDA_SUCCESS);
    EXPECT(cuLibraryUnload(e->lib), CUDA_SUCCESS);
    if (e->lib2)
        EXPECT(cuLibraryUnload(e->lib2), CUDA_SUCCESS);
}

/* One cell; prints it when it disagrees with the rule. Returns 1 when right. */
static int cell(CUcontext ctx, const struct cop *op, int mode, int blocking, enum caller who)
{
    cenv_t e;
    if (!env_up(&e, ctx, blocking)) {
        CU_FAIL("setting up the cell's streams, memory, event and library");
        return 0;
    }
    CUresult want, got = CUDA_ERROR_UNKNOWN, begin, end;
    int inv, ok = 0;
    expected(op->rule, mode, blocking, who, &want, &inv);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph g = NULL;
    begin = cuStreamBeginCapture(e.cap, modes[mode]);
    if (begin == CUDA_SUCCESS && probe(e.cap, &e) == CUDA_SUCCESS) {
        got = call_as(&e, op->fn, who);
        cuStreamIsCapturing(e.cap, &cs);
        end = cuStreamEndCapture(e.cap, &g);
        ok = got == want &&
             cs == (inv ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE) &&
             end == (inv ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS);
        if (!ok)
            fprintf(stderr, "\n  fact 26: %s, %s capture of a %s stream, caller %s: %d, capture "
                            "status %d, end %d; want %d, %s\n", op->name, mode_names[mode],
                    blocking ? "blocking" : "non-blocking", caller_names[who], (int)got, (int)cs,
                    (int)end, (int)want, inv ? "invalidated" : "valid");
        if (g)
            cuGraphDestroy(g);
    } else {
        fprintf(stderr, "\n  fact 26: beginning the capture gave %d\n", (int)begin);
    }
    env_down(&e);
    return ok;
}

static void fact26_matrix(int blocking)
{
    CUcontext p0;
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT_FATAL(cuCtxPushCurrent(p0), CUDA_SUCCESS);
    int bad = 0, cells = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        for (int mode = 0; mode < 3; mode++)
            for (int who = 0; who < N_CALLERS; who++, cells++)
                bad += !cell(p0, &ops[i], mode, blocking, (enum caller)who);
    if (bad)
        fprintf(stderr, "fact 26 (%s capturing stream): %d of %d cells differ from the rules\n",
                blocking ? "blocking" : "non-blocking", bad, cells);
    CU_ASSERT_EQUAL(bad, 0);
    conf_clear_stack();
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

static void fact26_nonblocking(void)
{
    fact26_matrix(0);
}

static void fact26_blocking(void)
{
    fact26_matrix(1);
}

/* cuStreamGetCaptureInfo during a capture: active, a sequence ID unique to
 * each capture, and the graph; nothing invalidated by asking. */
static void fact26_capture_info(void)
{
    CUcontext p0;
    CUstream s;
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT_FATAL(cuCtxPushCurrent(p0), CUDA_SUCCESS);
    EXPECT_FATAL(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    cuuint64_t ids[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        CUgraph live = NULL, g = NULL;
        EXPECT(cuStreamGetCaptureInfo(s, &cs, &ids[i], NULL, NULL, NULL, NULL), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(cs, CU_STREAM_CAPTURE_STATUS_NONE);
        EXPECT_FATAL(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
        EXPECT(cuStreamGetCaptureInfo(s, &cs, &ids[i], &live, NULL, NULL, NULL), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
        CU_ASSERT_NOT_EQUAL(ids[i], 0);
        CU_ASSERT_PTR_NOT_NULL(live);
        EXPECT(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
        if (g)
            EXPECT(cuGraphDestroy(g), CUDA_SUCCESS);
    }
    CU_ASSERT_NOT_EQUAL(ids[0], ids[1]);
    EXPECT(cuStreamDestroy(s), CUDA_SUCCESS);
    conf_clear_stack();
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

void conf_register_capture(CU_pSuite s)
{
    static const hk_test_case_t tests[] = {
        {"fact 26: calls during a capture of a non-blocking stream: status and "
         "invalidation, by mode and caller", fact26_nonblocking},
        {"fact 26: the same during a capture of a blocking stream (the legacy "
         "stream refused)", fact26_blocking},
        {"fact 26: cuStreamGetCaptureInfo: active, a sequence ID per capture", fact26_capture_info},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
