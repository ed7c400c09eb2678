/* handlekit kit: the streams a handle's calls ran on, and what its destroy
 * waits for (docs/contexts.md, "Destroy").
 *
 * Destroy must not free what the handle made while work issued through it
 * may still use it. Waiting for the whole context (cuCtxSynchronize) also
 * waits for every other thread's queue there, and the frees that follow
 * (cuMemFree) wait, on an H200, until the other threads' calls pause (fact
 * 30): under a service that never pauses, a destroy would not return. So
 * each call notes the stream it ran on (a compare on the call's path; a
 * change is noted under the binding's lock), and destroy waits for that
 * stream alone and has the plugin free in order on it (cuMemFreeAsync, then
 * a wait for that stream), when it can:
 *   - every call of the live incarnation ran on one stream, the handle's
 *     setting now (a stream it no longer has may be gone: its owner may
 *     destroy it once another is set), or on the destroying thread's
 *     per-thread stream (another thread's cannot be named from here);
 *   - that stream is not being captured (a wait there would fail and
 *     invalidate the capture; the legacy stream beside a blocking capture
 *     answers 906), asked with cuStreamIsCapturing, which changes nothing;
 *   - a created stream whose ID set_stream learnt still answers that ID.
 * Otherwise it waits for the context as a whole, as it always did, and the
 * plugin frees at once. The waits run in the relaxed capture mode, like every
 * wait of the kit for a stream that is not capturing. */
#include "hkk_internal.h"

/* A number per thread, never reused (a pthread_t may be, after an exit). */
static atomic_ullong thread_serials;
static _Thread_local unsigned long long my_serial;
/* The binding serial whose per-thread stream use this thread noted last. */
static _Thread_local unsigned long long pt_noted;

static unsigned long long thread_serial(void)
{
    if (!my_serial)
        my_serial = atomic_fetch_add(&thread_serials, 1) + 1;
    return my_serial;
}

static atomic_ullong binding_serials;

void hkk_streams_forget(hk_kit_bind_t *b)
{
    atomic_store_explicit(&b->used_last, HKK_NO_STREAM, memory_order_relaxed);
    atomic_store(&b->serial, atomic_fetch_add(&binding_serials, 1) + 1);
    b->pt_thread = 0;
}

void hkk_note_stream_slow(hk_kit_bind_t *b, CUstream s)
{
    pthread_mutex_lock(&b->lock);
    if (s == CU_STREAM_PER_THREAD) {
        unsigned long long me = thread_serial();
        if (!b->pt_thread)
            b->pt_thread = me;
        else if (b->pt_thread != me)
            b->pt_thread = ~0ull;
        pt_noted = atomic_load(&b->serial);
    } else {
        CUstream last = atomic_load_explicit(&b->used_last, memory_order_relaxed);
        if (last != HKK_MANY_STREAMS) /* several streams: settled, the calls compare only */
            atomic_store_explicit(&b->used_last, last == HKK_NO_STREAM || last == s
                                  ? s : HKK_MANY_STREAMS, memory_order_relaxed);
    }
    pthread_mutex_unlock(&b->lock);
}

int hkk_pt_noted(hk_kit_bind_t *b)
{
    return pt_noted == atomic_load_explicit(&b->serial, memory_order_relaxed);
}

/* The one stream destroy may wait for alone (*s, and *used: whether a call
 * ran there at all), or 0: the context as a whole. */
static int wait_target(hk_kit_bind_t *h, CUstream *s, int *used)
{
    CUstream cur;
    unsigned long long cur_id;
    hkk_stream_read(h, &cur, &cur_id);
    pthread_mutex_lock(&h->lock);
    CUstream last = atomic_load_explicit(&h->used_last, memory_order_relaxed);
    unsigned long long pt = h->pt_thread;
    pthread_mutex_unlock(&h->lock);
    int on_stream = last != HKK_NO_STREAM;
    if (last == HKK_MANY_STREAMS || (pt && pt != thread_serial()) || (pt && on_stream) ||
        (on_stream && last != cur))
        return 0;
    *used = on_stream || pt;
    *s = pt ? CU_STREAM_PER_THREAD : cur;
    return 1;
}

/* Whether s can be waited for here without touching a capture, and is still
 * the stream the handle was given (when set_stream learnt its ID). */
static int waitable(hk_kit_bind_t *h, CUstream s)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (KCU.cuStreamIsCapturing(s, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    CUstream cur;
    unsigned long long want = 0, id = 0;
    hkk_stream_read(h, &cur, &want);
    if (s != cur || !want)
        return 1;
    return KCU.cuStreamGetId(s, &id) == CUDA_SUCCESS && id == want;
}

/* cuStreamSynchronize in the relaxed capture mode, tried twice. */
static CUresult sync_stream(CUstream s)
{
    int mode;
    CUresult r = hk_kit_capture_relax(&mode);
    if (r != CUDA_SUCCESS)
        return r;
    r = KCU.cuStreamSynchronize(s);
    if (r != CUDA_SUCCESS)
        r = KCU.cuStreamSynchronize(s);
    (void)hk_kit_capture_restore(mode);
    return r;
}

hk_status_t hkk_wait_used(hk_kit_bind_t *h)
{
    CUstream s = NULL;
    int used = 0;
    CUresult r;
    h->rel_ordered = 0;
    if (wait_target(h, &s, &used) && waitable(h, s)) {
        r = used ? sync_stream(s) : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS) /* no more work runs there: the frees go ahead at once */
            return hk_kit_fail_cu(h, r, "destroy: cuStreamSynchronize waiting for the "
                                        "handle's stream");
        h->rel_stream = s;
        h->rel_ordered = 1;
        return HK_STATUS_OK;
    }
    r = KCU.cuCtxSynchronize();
    if (r != CUDA_SUCCESS)
        r = KCU.cuCtxSynchronize();
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(h, r, "destroy: cuCtxSynchronize waiting for the handle's work");
    return HK_STATUS_OK;
}

hk_status_t hkk_wait_freed(hk_kit_bind_t *h)
{
    if (!h->rel_ordered)
        return HK_STATUS_OK;
    h->rel_ordered = 0;
    CUresult r = sync_stream(h->rel_stream);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(h, r, "destroy: cuStreamSynchronize after the stream-ordered "
                                    "frees");
    return HK_STATUS_OK;
}

int hk_kit_release_stream(const hk_kit_bind_t *b, struct CUstream_st **s)
{
    if (!b || !s || !b->rel_ordered)
        return 0;
    *s = b->rel_stream;
    return 1;
}
