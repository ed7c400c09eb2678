/* handlekit kit: the guard around every call (docs/contexts.md, "Every
 * call"), the transparent re-arm of a reset primary context, unbind
 * (destroy's half), the accessors and checked mode's pointer checks. The
 * handle's stream setting is hkk_stream.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_status_text.h"
#include "hkk_internal.h"

/* ---- the per-call guard ---- */

/* The stream a call runs on, noted for destroy's wait (hkk_wait.c): a
 * compare when it is the one noted last, two once calls ran on several
 * streams (nothing more to note then). */
static inline void note_stream(hk_kit_bind_t *h, CUstream s)
{
    if (s == CU_STREAM_PER_THREAD) {
        if (!hkk_pt_noted(h))
            hkk_note_stream_slow(h, s);
        return;
    }
    CUstream last = atomic_load_explicit(&h->used_last, memory_order_relaxed);
    if (last != s && last != HKK_MANY_STREAMS)
        hkk_note_stream_slow(h, s);
}

/* Re-arming took a second retain to re-activate the primary; the handle's
 * own retain (which survived the reset) keeps it active, so one goes back.
 * Refused twice, it stays counted in owns_primary for destroy to give back:
 * the call itself is not affected. Caller holds h->lock. */
static void give_back_extra_retain(hk_kit_bind_t *h)
{
    if (h->owns_primary > 1 && hk_kit_give_back_primary(h->cudev) == CUDA_SUCCESS)
        h->owns_primary--;
}

/* Slow path: the handle's context ID did not match. A user context is gone;
 * a primary was reset and is re-armed here: new ID, functions and workspace
 * made again. A reset drops only the runtime's own retain (measured, see
 * tests/conformance): the handle's retain still counts, so re-activating takes
 * one retain, which is given back once the primary is active again. That is
 * impossible when the handle's stream died with the old context. On success
 * the handle's context may already be pushed (c->switched). */
static hk_status_t recover(hk_kit_bind_t *h, hk_kit_call_t *c)
{
    hk_status_t st = HK_STATUS_OK;
    CUresult r, rid;
    unsigned long long id = 0;
    pthread_mutex_lock(&h->lock);
    hk_kit_arm_t *a = atomic_load_explicit(&h->arm, memory_order_acquire);
    /* Ask again under the lock: another thread may have re-armed meanwhile. */
    rid = KCU.cuCtxGetId(h->ctx, &id);
    if (rid == CUDA_SUCCESS && a && id == a->ctx_id)
        goto out;
    if (rid != CUDA_SUCCESS && rid != CUDA_ERROR_CONTEXT_IS_DESTROYED) {
        st = hk_kit_fail_cu(h, rid, "cuCtxGetId");
        goto out;
    }
    if (!h->is_primary) {
        st = hk_kit_fail(h, HK_STATUS_CONTEXT_DESTROYED,
                         "the handle's context (device %d, not owned by the handle) was "
                         "destroyed; destroy the handle", h->device);
        goto out;
    }
    if (atomic_load(&h->user_stream)) {
        st = hk_kit_fail(h, HK_STATUS_CONTEXT_RESET,
                         "the primary context of device %d was reset and the handle's stream "
                         "died with it; set a new stream (set_stream) to continue", h->device);
        goto out;
    }
    CUcontext p = NULL;
    r = hkk_retain_primary(h->cudev, &p);
    if (r != CUDA_SUCCESS) {
        st = hk_kit_fail_cu(h, r, "re-arming after a reset: cuDevicePrimaryCtxRetain");
        goto out;
    }
    h->owns_primary++;
    if (p != h->ctx) {
        st = hk_kit_fail(h, HK_STATUS_CONTEXT_RESET,
                         "the primary context of device %d was reset and came back as another "
                         "context; destroy the handle", h->device);
        goto give_back;
    }
    if (c->prev != h->ctx) {
        r = KCU.cuCtxPushCurrent(h->ctx);
        if (r != CUDA_SUCCESS) {
            st = hk_kit_fail_cu(h, r, "re-arming after a reset: cuCtxPushCurrent");
            goto give_back;
        }
        c->switched = 1;
        if (hk__tracing(HK__TRACE_CALLS))
            hkk_trace_switch(h, c->prev, 1, CUDA_SUCCESS);
    }
    st = hkk_arm(h, h);
    if (st == HK_STATUS_OK)
        hkk_streams_forget(h); /* the old incarnation's died with it */
    if (st != HK_STATUS_OK && c->switched) {
        hk_kit_pop_current(); /* refused twice: the arm's failure is the one reported */
        c->switched = 0;
    }
    if (st == HK_STATUS_OK && hk__tracing(HK__TRACE_DECISIONS))
        hkk_trace_rearmed(h, a ? a->ctx_id : 0);
give_back:
    give_back_extra_retain(h);
out:
    pthread_mutex_unlock(&h->lock);
    if (st != HK_STATUS_OK && hk__tracing(HK__TRACE_DECISIONS))
        hkk_trace_refused(h, st);
    return st;
}

hk_status_t hk_kit_begin(hk_kit_bind_t *h, hk_kit_call_t *c)
{
    if (atomic_load_explicit(&hkk_forked, memory_order_relaxed)) {
        hk_status_t st = hk_kit_fail(h, HK_STATUS_FORKED,
                                     "this process is a fork() child of the one that made the "
                                     "handle; CUDA cannot be used here");
        if (hk__tracing(HK__TRACE_DECISIONS))
            hkk_trace_refused(h, st);
        return st;
    }
    c->b = h;
    c->switched = 0;
    CUresult r = KCU.cuCtxGetCurrent(&c->prev);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(h, r, "cuCtxGetCurrent");
    hk_kit_arm_t *a = atomic_load_explicit(&h->arm, memory_order_acquire);
    unsigned long long id = 0;
    r = KCU.cuCtxGetId(h->ctx, &id);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return hk_kit_fail_cu(h, r, "cuCtxGetId of the handle's context");
    if (r != CUDA_SUCCESS || !a || id != a->ctx_id) {
        hk_status_t st = recover(h, c);
        if (st != HK_STATUS_OK)
            return st;
        a = atomic_load_explicit(&h->arm, memory_order_acquire);
    }
    if (!c->switched && c->prev != h->ctx) {
        r = KCU.cuCtxPushCurrent(h->ctx);
        if (r != CUDA_SUCCESS)
            return hk_kit_fail_cu(h, r, "cuCtxPushCurrent of the handle's context");
        c->switched = 1;
        if (hk__tracing(HK__TRACE_CALLS))
            hkk_trace_switch(h, c->prev, 1, CUDA_SUCCESS);
    }
    c->arm = a;
    hkk_stream_read(h, &c->stream, &c->stream_id);
    note_stream(h, c->stream);
    return HK_STATUS_OK;
}

hk_status_t hk_kit_end(hk_kit_call_t *c, hk_status_t st)
{
    if (!c->switched)
        return st;
    CUresult r = hk_kit_pop_current();
    if (r != CUDA_SUCCESS && st == HK_STATUS_OK) {
        /* The call's work is done (a free, an axpy): reporting a failure would
         * have it done twice. The message tells what is left current. */
        hk_kit_fail_cu(c->b, r, "the call succeeded, but cuCtxPopCurrent restoring the caller's "
                              "context did not; the handle's context is still current");
    }
    if (hk__tracing(r == CUDA_SUCCESS ? HK__TRACE_CALLS : HK__TRACE_DECISIONS))
        hkk_trace_switch(c->b, c->prev, 0, r);
    return st;
}

/* ---- destroy ---- */

/* Frees what the handle made in incarnation a of its context, which is alive
 * (ops->release): after the work issued through the handle is done. Pushes
 * the handle's context for it and pops it again. Returns the first failure. */
static hk_status_t free_made(hk_kit_bind_t *h, hk_kit_arm_t *a)
{
    hk_status_t st = HK_STATUS_OK;
    CUresult r = KCU.cuCtxPushCurrent(h->ctx);
    if (r != CUDA_SUCCESS)
        r = KCU.cuCtxPushCurrent(h->ctx); /* without it nothing below can be freed */
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(h, r, "destroy: cuCtxPushCurrent of the handle's context");
    /* Work on the streams the handle used may still read what the plugin
     * made (a workspace, a result word). A failed wait means no more work
     * runs there (an earlier fault), so the frees still go ahead, at once. */
    st = hkk_wait_used(h);
    if (h->ops && h->ops->release) {
        /* The first failure is the one reported: keep its message if the
         * plugin's release records another. */
        char first[HK__KIT_MSG_LEN];
        if (st != HK_STATUS_OK)
            snprintf(first, sizeof first, "%s", hk_kit_last_error(h));
        hk_status_t rst = h->ops->release(h, h->user, a);
        if (st == HK_STATUS_OK)
            st = rst;
        else if (rst != HK_STATUS_OK)
            hk_kit_fail(h, st, "%s", first);
    }
    hk_status_t wst = hkk_wait_freed(h);
    if (st == HK_STATUS_OK)
        st = wst;
    r = hk_kit_pop_current();
    if (r != CUDA_SUCCESS && st == HK_STATUS_OK)
        st = hk_kit_fail_cu(h, r, "destroy: cuCtxPopCurrent restoring the caller's context");
    return st;
}

/* In a fork() child the driver is unusable: free only host memory, and take
 * no lock (another parent thread may have held one at the fork). */
static void unbind_forked(hk_kit_bind_t *h)
{
    hkk_free_arms(h);
    hkk_libs_drop(h);
    free(h); /* its mutexes may be in any state: not destroyed */
}

hk_status_t hk_kit_unbind(hk_kit_bind_t *h)
{
    if (!h)
        return hk_kit_fail(NULL, HK_STATUS_NULL_POINTER, "hk_kit_unbind: the binding is NULL");
    if (atomic_load(&hkk_forked)) {
        HK__TRACE(HK__TRACE_DECISIONS, "fork", "handle %p destroyed in a fork() child: only its "
                  "host memory freed, nothing given back to the driver", WHO(h));
        unbind_forked(h);
        return HK_STATUS_OK;
    }
    /* Best effort to the end: the ABI says a destroyed handle is gone whatever
     * destroy returns, so a failing step is reported and the others still run. */
    hk_status_t st = HK_STATUS_OK;
    unsigned long long id = 0;
    hk_kit_arm_t *a = atomic_load(&h->arm);
    /* Alive as the handle knew it: what it made is still there to free. After
     * a reset or a destroy the memory went with the context; freeing its old
     * addresses could free someone else's new block, so nothing is freed when
     * the driver cannot say. "Destroyed" is asked again too: believed only
     * when the driver says it twice, since taking a live context for gone
     * leaks what the handle made there. */
    CUresult r = KCU.cuCtxGetId(h->ctx, &id);
    if (r != CUDA_SUCCESS)
        r = KCU.cuCtxGetId(h->ctx, &id);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
        st = hk_kit_fail_cu(h, r, "destroy: cuCtxGetId of the handle's context");
    int freed = r == CUDA_SUCCESS && a && id == a->ctx_id;
    int gone = r == CUDA_ERROR_CONTEXT_IS_DESTROYED || (r == CUDA_SUCCESS && a && !freed);
    if (freed)
        st = free_made(h, a);
    int held = h->owns_primary, kept = 0;
    /* The last retain on a live primary goes to the kit, which keeps one per
     * device (hkk_keep.c), unless it holds one already. */
    if (freed && h->is_primary && h->owns_primary > 0 &&
        hkk_keep_primary(h->cudev, h->device, id)) {
        h->owns_primary--;
        kept = 1;
    }
    /* The handle's retains survive a reset (only the runtime's own is dropped). */
    while (h->owns_primary > 0) {
        r = hk_kit_give_back_primary(h->cudev);
        if (r != CUDA_SUCCESS) {
            if (st == HK_STATUS_OK)
                st = hk_kit_fail_cu(h, r, "destroy: cuDevicePrimaryCtxRelease");
            break;
        }
        h->owns_primary--;
    }
    hkk_free_arms(h);
    hkk_libs_drop(h);
    if (st != HK_STATUS_OK) /* the binding's message goes with it */
        hk_kit_fail(NULL, st, "%s", h->err);
    if (hk__tracing(HK__TRACE_DECISIONS))
        hkk_trace_unbound(h, held - h->owns_primary - kept, kept, freed, gone, st);
    pthread_mutex_destroy(&h->lock);
    pthread_mutex_destroy(&h->errlock);
    free(h);
    return st;
}

/* ---- checked mode ---- */

/* The plural query answers for any address (a host pointer reads as memory
 * type 0), so checked mode makes no failing driver call: a foreign pointer is
 * our finding, not a driver error for tools such as compute-sanitizer. */
static hk_status_t check_one(hk_kit_bind_t *h, CUdeviceptr p, const char *what)
{
    unsigned type = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *data[2] = {&type, &ordinal};
    CUresult r = KCU.cuPointerGetAttributes(2, attrs, data, p);
    if (r != CUDA_SUCCESS) { /* the driver failed: nothing is known of the pointer */
        char cu[96];
        return hk_kit_fail(h, hk_kit_cu_status(r),
                           "checking %s (0x%llx): cuPointerGetAttributes failed: %s (handle on "
                           "device %d)", what, (unsigned long long)p,
                           hk_kit_cu_name(r, cu, sizeof cu), h->device);
    }
    if (type != CU_MEMORYTYPE_DEVICE)
        return hk_kit_fail(h, HK_STATUS_POINTER_MISMATCH,
                           "%s (0x%llx) is not device memory (memory type %u); the handle is on "
                           "device %d", what, (unsigned long long)p, type, h->device);
    if (ordinal != h->device)
        return hk_kit_fail(h, HK_STATUS_POINTER_MISMATCH,
                           "%s (0x%llx) is memory of device %d, the handle is on device %d",
                           what, (unsigned long long)p, ordinal, h->device);
    return HK_STATUS_OK;
}

hk_status_t hk_kit_check_pointer(hk_kit_bind_t *h, const void *p, size_t bytes,
                                 const char *what)
{
    hk_status_t st = check_one(h, (CUdeviceptr)(uintptr_t)p, what);
    if (st == HK_STATUS_OK && bytes > 1)
        st = check_one(h, (CUdeviceptr)(uintptr_t)p + bytes - 1, what);
    return st;
}

/* ---- accessors ---- */

struct CUctx_st *hk_kit_context(const hk_kit_bind_t *b)
{
    return b->ctx;
}

int hk_kit_cudevice(const hk_kit_bind_t *b)
{
    return b->cudev;
}

int hk_kit_device(const hk_kit_bind_t *b)
{
    return b->device;
}

int hk_kit_is_primary(const hk_kit_bind_t *b)
{
    return b->is_primary;
}

unsigned long long hk_kit_context_id(const hk_kit_bind_t *b)
{
    return hkk_context_id(b);
}

int hk_kit_owns_primary(hk_kit_bind_t *b)
{
    pthread_mutex_lock(&b->lock); /* changes under it on re-arm */
    int n = b->owns_primary;
    pthread_mutex_unlock(&b->lock);
    return n;
}

void *hk_kit_user(const hk_kit_bind_t *b)
{
    return b->user;
}
