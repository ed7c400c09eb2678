/* handlekit kit: a handle's stream setting (hk_kit_set_stream,
 * hk_kit_get_stream, read whole by hkk_stream_read), a stream's key for
 * per-stream state (hk_kit_stream_ident), and stream capture: the wait
 * check and the relaxed capture mode (docs/contexts.md, "Stream capture"). */
#include <stdio.h>

#include "hkk_internal.h"

/* Publishes a stream setting. Writers exclude each other by the odd sequence
 * count. */
static void stream_publish(hk_kit_bind_t *b, CUstream s, int user, unsigned long long id)
{
    unsigned q = atomic_load_explicit(&b->stream_seq, memory_order_relaxed);
    for (;;) {
        if (!(q & 1u) && atomic_compare_exchange_weak_explicit(
                             &b->stream_seq, &q, q + 1u, memory_order_acquire,
                             memory_order_relaxed))
            break;
        q = atomic_load_explicit(&b->stream_seq, memory_order_relaxed);
    }
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&b->stream, s, memory_order_relaxed);
    atomic_store_explicit(&b->user_stream, user, memory_order_relaxed);
    atomic_store_explicit(&b->stream_id, id, memory_order_relaxed);
    atomic_store_explicit(&b->stream_seq, q + 2u, memory_order_release);
}

void hkk_stream_read(hk_kit_bind_t *b, CUstream *s, unsigned long long *id)
{
    for (;;) {
        unsigned q = atomic_load_explicit(&b->stream_seq, memory_order_acquire);
        *s = atomic_load_explicit(&b->stream, memory_order_relaxed);
        *id = atomic_load_explicit(&b->stream_id, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (!(q & 1u) && atomic_load_explicit(&b->stream_seq, memory_order_relaxed) == q)
            return;
    }
}

/* A stream's ID names it uniquely (its handle value may come back for a
 * later stream): a plugin may key per-stream state by it. It is asked only of
 * a stream that is not capturing: on a capturing stream the driver refuses
 * it and invalidates the capture (docs/contexts.md fact 26), which
 * cuStreamIsCapturing does not. 0 when not asked or not told: the plugin
 * learns it later (hk_kit_stream_ident). */
static unsigned long long stream_id_if_safe(CUstream s)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long id = 0;
    if (KCU.cuStreamIsCapturing(s, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    return KCU.cuStreamGetId(s, &id) == CUDA_SUCCESS ? id : 0;
}

/* Records id as the ID of s when s is still b's stream and its ID was not
 * known: later calls read it with the setting. A setting made meanwhile is
 * left as it is. */
static void stream_learn(hk_kit_bind_t *b, CUstream s, unsigned long long id)
{
    unsigned q = atomic_load_explicit(&b->stream_seq, memory_order_relaxed);
    for (;;) {
        if (!(q & 1u) && atomic_compare_exchange_weak_explicit(
                             &b->stream_seq, &q, q + 1u, memory_order_acquire,
                             memory_order_relaxed))
            break;
        q = atomic_load_explicit(&b->stream_seq, memory_order_relaxed);
    }
    atomic_thread_fence(memory_order_release);
    if (atomic_load_explicit(&b->stream, memory_order_relaxed) == s &&
        atomic_load_explicit(&b->user_stream, memory_order_relaxed) &&
        atomic_load_explicit(&b->stream_id, memory_order_relaxed) == 0)
        atomic_store_explicit(&b->stream_id, id, memory_order_relaxed);
    atomic_store_explicit(&b->stream_seq, q + 2u, memory_order_release);
}

hk_status_t hk_kit_stream_ident(hk_kit_call_t *c, unsigned long long *id,
                                unsigned long long *capture)
{
    *id = c->stream_id;
    *capture = 0;
    if (*id)
        return HK_STATUS_OK;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t seq = 0;
    CUresult r = KCU.cuStreamGetCaptureInfo(c->stream, &cs, &seq, NULL, NULL, NULL, NULL);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(c->b, r, "cuStreamGetCaptureInfo of the handle's stream");
    if (cs == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        *capture = seq;
        return HK_STATUS_OK;
    }
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return hk_kit_fail(c->b, HK_STATUS_NOT_SUPPORTED,
                           "the handle's stream is in a capture that an earlier call "
                           "invalidated; end it (cuStreamEndCapture) first");
    r = KCU.cuStreamGetId(c->stream, id);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(c->b, r, "cuStreamGetId of the handle's stream");
    stream_learn(c->b, c->stream, *id);
    c->stream_id = *id;
    return HK_STATUS_OK;
}

hk_status_t hk_kit_check_wait(hk_kit_call_t *c, const char *what)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = KCU.cuStreamIsCapturing(c->stream, &cs);
    if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
        return hk_kit_fail(c->b, HK_STATUS_NOT_SUPPORTED,
                           "%s: the handle's stream is the legacy stream, which cannot be waited "
                           "for while a blocking stream of its context is being captured; set "
                           "another stream", what);
    if (r != CUDA_SUCCESS) {
        char call[96];
        snprintf(call, sizeof call, "%s: cuStreamIsCapturing", what);
        return hk_kit_fail_cu(c->b, r, call);
    }
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return hk_kit_fail(c->b, HK_STATUS_NOT_SUPPORTED,
                           "%s: the handle's stream is being captured, and a captured stream "
                           "cannot be waited for (the result would not be there until the "
                           "graph runs)", what);
    return HK_STATUS_OK;
}

int hk_kit_capture_relax(int *saved)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUresult r = KCU.cuThreadExchangeStreamCaptureMode(&mode);
    if (r == CUDA_SUCCESS)
        *saved = (int)mode;
    return r;
}

int hk_kit_capture_restore(int saved)
{
    CUstreamCaptureMode mode = (CUstreamCaptureMode)saved;
    CUresult r = KCU.cuThreadExchangeStreamCaptureMode(&mode);
    return r == CUDA_SUCCESS ? r : KCU.cuThreadExchangeStreamCaptureMode(&mode);
}

/* The ordinal of the device of context c, looked up inside c, pushed over the
 * caller's and popped again (only a message depends on it: -1 when the
 * driver will not say). A refused pop is the call's failure. */
static CUresult stream_device(CUcontext c, int *sdev)
{
    CUdevice d;
    *sdev = -1;
    if (KCU.cuCtxPushCurrent(c) != CUDA_SUCCESS)
        return CUDA_SUCCESS;
    if (KCU.cuCtxGetDevice(&d) == CUDA_SUCCESS) {
        int count = 0;
        if (KCU.cuDeviceGetCount(&count) != CUDA_SUCCESS)
            count = 0;
        for (int i = 0; i < count; i++) {
            CUdevice di;
            if (KCU.cuDeviceGet(&di, i) == CUDA_SUCCESS && di == d)
                *sdev = i;
        }
    }
    return hk_kit_pop_current();
}

hk_status_t hk_kit_set_stream(hk_kit_bind_t *b, struct CUstream_st *stream, const char *what)
{
    if (atomic_load(&hkk_forked))
        return hk_kit_fail(b, HK_STATUS_FORKED, "%s: CUDA is unusable in a fork() child", what);
    CUstream s = stream;
    int user = s != NULL && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD;
    if (user) {
        CUcontext sctx = NULL;
        char call[96];
        CUresult r = KCU.cuStreamGetCtx(s, &sctx);
        if (r != CUDA_SUCCESS) {
            snprintf(call, sizeof call, "%s: cuStreamGetCtx", what);
            return hk_kit_fail_cu(b, r, call);
        }
        if (sctx != b->ctx) {
            int sdev = -1;
            r = stream_device(sctx, &sdev);
            if (r != CUDA_SUCCESS) {
                snprintf(call, sizeof call, "%s: cuCtxPopCurrent restoring the caller's context",
                         what);
                return hk_kit_fail_cu(b, r, call);
            }
            hk_status_t st = hk_kit_fail(b, HK_STATUS_STREAM_MISMATCH,
                                         "%s: the stream belongs to a context of device %d, the "
                                         "handle's context is on device %d%s", what, sdev,
                                         b->device, sdev == b->device
                                         ? " (another context of the same device)" : "");
            if (hk__tracing(HK__TRACE_DECISIONS))
                hkk_trace_refused(b, st);
            return st;
        }
    }
    unsigned long long id = user ? stream_id_if_safe(s) : 0;
    stream_publish(b, s, user, id);
    HK__TRACE(HK__TRACE_VERBOSE, "stream", "handle %p (device %d): stream %p set (id %llu)",
              WHO(b), b->device, (void *)s, id);
    return HK_STATUS_OK;
}

struct CUstream_st *hk_kit_get_stream(const hk_kit_bind_t *b)
{
    return atomic_load(&((hk_kit_bind_t *)b)->stream);
}
