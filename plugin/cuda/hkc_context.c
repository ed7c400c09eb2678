/* hk-cuda: which context a handle uses, and the guard around every call.
 *
 * Implements docs/contexts.md: create-time binding from what is current (or
 * an explicit device), the per-call switch-and-restore, context-ID checks,
 * the transparent re-arm of a reset primary context, and destroy.
 *
 * Failures (plugin/cuda/README.md, "Failures"): whatever a failing call took
 * is given back before it returns, and the caller's context is current again.
 * The handle's context is pushed over the caller's and popped afterwards
 * rather than set and set back: a pop gives back exactly what was current,
 * even a context that died meanwhile, which cuCtxSetCurrent would refuse. */
#include <stdlib.h>
#include <string.h>

#include "hkc_internal.h"

/* ---- arming: what a handle makes in its context ---- */

/* Takes the functions for the handle's context, which the caller has made
 * current, and the memory of its first reduction workspaces. On success
 * publishes a new arm. The workspaces are handed to streams at the first dot
 * or nrm2 there (hk__ws_get), cleared on that stream: create touches no
 * stream, which a green context's per-thread stream would refuse. */
static hk_status_t arm(hk_handle_t *h, hk_handle_t *err_to)
{
    hk_status_t st = HK_STATUS_OK;
    CUresult r;
    hk__arm_t *a = calloc(1, sizeof *a);
    if (!a)
        return hk__fail(err_to, HK_STATUS_OUT_OF_MEMORY, "no memory for the handle's state");
    r = hk__cu.cuCtxGetId(h->ctx, &a->ctx_id);
    if (r != CUDA_SUCCESS) {
        st = hk__fail_cu(err_to, r, "cuCtxGetId");
        goto fail;
    }
    st = hk__kernels_functions(err_to, a->ctx_id, a->fn);
    if (st == HK_STATUS_OK)
        st = hk__ws_reserve(a, err_to);
    if (st != HK_STATUS_OK)
        goto fail;
    a->older = atomic_load(&h->arm);
    atomic_store_explicit(&h->arm, a, memory_order_release);
    return HK_STATUS_OK;
fail:
    hk__ws_free(a);
    hk__arm_free(a);
    return st;
}

/* ---- giving back (see hkc_internal.h) ---- */

CUresult hk__give_back_mem(CUdeviceptr p)
{
    CUresult r = hk__cu.cuMemFree(p);
    return r == CUDA_SUCCESS ? r : hk__cu.cuMemFree(p);
}

CUresult hk__give_back_host(void *p)
{
    CUresult r = hk__cu.cuMemFreeHost(p);
    return r == CUDA_SUCCESS ? r : hk__cu.cuMemFreeHost(p);
}

CUresult hk__give_back_primary(CUdevice dev)
{
    CUresult r = hk__cu.cuDevicePrimaryCtxRelease(dev);
    return r == CUDA_SUCCESS ? r : hk__cu.cuDevicePrimaryCtxRelease(dev);
}

CUresult hk__give_back_library(CUlibrary lib)
{
    CUresult r = hk__cu.cuLibraryUnload(lib);
    return r == CUDA_SUCCESS ? r : hk__cu.cuLibraryUnload(lib);
}

CUresult hk__pop_current(void)
{
    CUcontext popped = NULL;
    CUresult r = hk__cu.cuCtxPopCurrent(&popped);
    return r == CUDA_SUCCESS ? r : hk__cu.cuCtxPopCurrent(&popped);
}

/* ---- binding at create ---- */

static hk_status_t device_ordinal(CUdevice dev, int *ordinal)
{
    int count = 0;
    CUresult r = hk__cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuDeviceGetCount");
    for (int i = 0; i < count; i++) {
        CUdevice d;
        r = hk__cu.cuDeviceGet(&d, i);
        if (r != CUDA_SUCCESS) /* not "not listed": that would hide the driver's answer */
            return hk__fail_cu(NULL, r, "cuDeviceGet");
        if (d == dev) {
            *ordinal = i;
            return HK_STATUS_OK;
        }
    }
    return hk__fail(NULL, HK_STATUS_INVALID_DEVICE, "the current context's device is not listed");
}

/* ---- which primary is which ---- */

/* Primary context pointers by device, learnt from our own retains. A primary
 * keeps its pointer for the life of the process (docs/contexts.md fact 2), so
 * once learnt, a current context is told from its device's primary by
 * pointer: no retain, which would activate an inactive primary, and no race
 * with threads that activate or release it between two queries. */
#define HK__KNOWN_PRIMARIES 64
static _Atomic(CUcontext) known_primaries[HK__KNOWN_PRIMARIES];

static CUcontext known_primary(CUdevice dev)
{
    return dev >= 0 && dev < HK__KNOWN_PRIMARIES ? atomic_load(&known_primaries[dev]) : NULL;
}

/* cuDevicePrimaryCtxRetain, learning the pointer. */
static CUresult retain_primary(CUdevice dev, CUcontext *p)
{
    CUresult r = hk__cu.cuDevicePrimaryCtxRetain(p, dev);
    if (r == CUDA_SUCCESS && dev >= 0 && dev < HK__KNOWN_PRIMARIES)
        atomic_store(&known_primaries[dev], *p);
    return r;
}

/* A retain taken only to compare pointers goes back at once. Refused twice,
 * the create fails: a create that returned OK must hold nothing it does not
 * account for. */
static hk_status_t give_back_probe(CUdevice dev)
{
    CUresult r = hk__give_back_primary(dev);
    return r == CUDA_SUCCESS ? HK_STATUS_OK
                             : hk__fail_cu(NULL, r, "cuDevicePrimaryCtxRelease of a probe retain");
}

/* Retains dev's primary; if it is cur, the handle binds it and keeps the
 * retain (*bound = 1), else the retain goes back. */
static hk_status_t bind_if_primary(hk_handle_t *h, CUdevice dev, CUcontext cur, int *bound)
{
    CUcontext p = NULL;
    *bound = 0;
    CUresult r = retain_primary(dev, &p);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuDevicePrimaryCtxRetain");
    if (p != cur)
        return give_back_probe(dev);
    h->cudev = dev;
    h->ctx = cur;
    h->is_primary = 1;
    h->owns_primary = 1;
    *bound = 1;
    return HK_STATUS_OK;
}

/* The current context answers 709: a destroyed user context, or a primary
 * left current after its last release or a reset (docs/contexts.md facts 8,
 * 16), which the runtime's next call would re-activate. The retain that
 * identifies it re-activates it, as the runtime would; a device whose primary
 * is known to be another context is not probed. */
static hk_status_t bind_dead_current(hk_handle_t *h, CUcontext cur)
{
    int count = 0;
    CUresult r = hk__cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuDeviceGetCount");
    for (int i = 0; i < count; i++) {
        CUdevice d;
        int bound = 0;
        r = hk__cu.cuDeviceGet(&d, i);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(NULL, r, "cuDeviceGet");
        CUcontext known = known_primary(d);
        if (known && known != cur)
            continue;
        hk_status_t st = bind_if_primary(h, d, cur, &bound);
        if (st != HK_STATUS_OK || bound)
            return st;
    }
    return hk__fail(NULL, HK_STATUS_CONTEXT_DESTROYED,
                    "the context current on this thread was destroyed");
}

/* Whether cur, a context of dev whose primary pointer is not known yet, may
 * be dev's primary: yes when cur is dead (a reset primary left current) or
 * the primary is active; no when cur is alive and the primary inactive. The
 * state is asked again after cur answered, so that a primary another thread
 * activates while we ask is not taken for a user context. */
static hk_status_t maybe_primary(CUdevice dev, CUcontext cur, int *maybe, int *dead)
{
    unsigned flags = 0;
    int active = 0;
    unsigned long long id = 0;
    *maybe = *dead = 0;
    for (int pass = 0; pass < 2 && !*maybe; pass++) {
        CUresult r = hk__cu.cuDevicePrimaryCtxGetState(dev, &flags, &active);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(NULL, r, "cuDevicePrimaryCtxGetState");
        *maybe = active;
        if (pass == 0) {
            r = hk__cu.cuCtxGetId(cur, &id);
            if (r != CUDA_SUCCESS && r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
                return hk__fail_cu(NULL, r, "cuCtxGetId of the current context");
            *dead = r == CUDA_ERROR_CONTEXT_IS_DESTROYED;
            *maybe |= *dead;
        }
    }
    return HK_STATUS_OK;
}

/* What is current is either a primary (retain it: the handle owns a
 * reference) or a context somebody else owns (user or green: bind without
 * owning). A primary that was reset but is still current (fact 8) is
 * re-activated by the retain, as the runtime's next call would do. */
static hk_status_t classify_current(hk_handle_t *h, CUcontext cur)
{
    CUdevice dev;
    int maybe = 1, dead = 0, bound = 0;
    CUresult r = hk__cu.cuCtxGetDevice(&dev);
    if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return bind_dead_current(h, cur);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuCtxGetDevice of the current context");
    h->cudev = dev;
    h->ctx = cur;
    CUcontext known = known_primary(dev);
    if (known && known != cur)
        return HK_STATUS_OK; /* a user or green context: not ours to retain */
    if (!known) {
        hk_status_t st = maybe_primary(dev, cur, &maybe, &dead);
        if (st != HK_STATUS_OK)
            return st;
    }
    if (!maybe)
        return HK_STATUS_OK;
    hk_status_t st = bind_if_primary(h, dev, cur, &bound);
    if (st == HK_STATUS_OK && !bound && dead)
        return hk__fail(NULL, HK_STATUS_CONTEXT_DESTROYED,
                        "the context current on this thread was destroyed");
    return st;
}

/* Which context, device and retain: from what is current, or device 0's or
 * the named device's primary. *keep_current: leave the bound primary current
 * (nothing was current and no device was named, as a runtime call would). */
static hk_status_t choose_context(hk_handle_t *h, int device, CUcontext cur, int *keep_current)
{
    *keep_current = 0;
    if (device == HK_DEVICE_CURRENT && cur) {
        hk_status_t st = classify_current(h, cur);
        return st == HK_STATUS_OK ? device_ordinal(h->cudev, &h->device) : st;
    }
    int count = 0;
    CUresult r = hk__cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuDeviceGetCount");
    if (count == 0)
        return hk__fail(NULL, HK_STATUS_NO_DEVICE, "the CUDA driver lists no device");
    /* Nothing current: device 0, the runtime's default device. */
    int ordinal = device == HK_DEVICE_CURRENT ? 0 : device;
    if (ordinal < 0 || ordinal >= count)
        return hk__fail(NULL, HK_STATUS_INVALID_DEVICE, "device %d does not exist (%d device%s)",
                        ordinal, count, count == 1 ? "" : "s");
    r = hk__cu.cuDeviceGet(&h->cudev, ordinal);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuDeviceGet");
    r = retain_primary(h->cudev, &h->ctx);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuDevicePrimaryCtxRetain");
    h->device = ordinal;
    h->is_primary = 1;
    h->owns_primary = 1;
    *keep_current = device == HK_DEVICE_CURRENT;
    return HK_STATUS_OK;
}

/* Undoes arm() for a create that fails after it: the handle's context is
 * current. */
static void disarm(hk_handle_t *h)
{
    hk__arm_t *made = atomic_load(&h->arm);
    if (made) {
        hk__ws_free(made);
        hk__arm_free(made);
    }
    atomic_store(&h->arm, NULL);
}

hk_status_t hk__context_bind(hk_handle_t *h, int device)
{
    CUcontext cur = NULL;
    int keep_current = 0, pushed = 0;
    CUresult r = hk__cu.cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuCtxGetCurrent");
    hk_status_t st = choose_context(h, device, cur, &keep_current);
    if (st != HK_STATUS_OK)
        goto fail;
    r = hk__cu.cuDeviceGetAttribute(&h->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                    h->cudev);
    if (r != CUDA_SUCCESS) {
        st = hk__fail_cu(NULL, r, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
        goto fail;
    }
    if (h->sm_count < 1)
        h->sm_count = 1;
    if (h->ctx != cur) {
        r = hk__cu.cuCtxPushCurrent(h->ctx);
        if (r != CUDA_SUCCESS) {
            st = hk__fail_cu(NULL, r, "cuCtxPushCurrent of the handle's context");
            goto fail;
        }
        pushed = 1;
    }
    st = arm(h, NULL);
    if (pushed && (st != HK_STATUS_OK || !keep_current)) {
        /* With keep_current nothing was current, and the pushed primary
         * stays as the only entry of the stack, as after a runtime call. */
        r = hk__pop_current();
        if (r != CUDA_SUCCESS && st == HK_STATUS_OK) {
            /* The work can be undone, so the create fails: the handle's
             * context is still current for the frees. */
            st = hk__fail_cu(NULL, r, "cuCtxPopCurrent restoring the caller's context");
            disarm(h);
        }
    }
    if (st == HK_STATUS_OK)
        return HK_STATUS_OK;
fail:
    /* The first failure is reported; a retain the driver refuses twice to
     * take back stays with it. */
    while (h->owns_primary > 0 && hk__give_back_primary(h->cudev) == CUDA_SUCCESS)
        h->owns_primary--;
    h->owns_primary = h->is_primary = 0;
    return st;
}

/* ---- host pointer mode's result word ---- */

void *hk__result_slot(hk_handle_t *h, const hk__arm_t *a, CUdeviceptr *dev)
{
    if (h->slot_ctx != a->ctx_id) {
        /* Optional: if the driver refuses, the caller copies from ws. A word
         * of an earlier incarnation died with it. */
        h->slot_ctx = a->ctx_id;
        h->slot_dev = 0;
        if (hk__cu.cuMemHostAlloc(&h->slot, 64, CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS) {
            h->slot = NULL;
        } else if (hk__cu.cuMemHostGetDevicePointer(&h->slot_dev, h->slot, 0) != CUDA_SUCCESS) {
            h->slot_dev = 0;
            if (hk__give_back_host(h->slot) == CUDA_SUCCESS)
                h->slot = NULL; /* else kept, unused, for destroy to free */
        }
    }
    *dev = h->slot_dev;
    return h->slot_dev ? h->slot : NULL;
}

/* ---- the per-call guard ---- */

/* Re-arming took a second retain to re-activate the primary; the handle's
 * own retain (which survived the reset) keeps it active, so one goes back.
 * Refused twice, it stays counted in owns_primary for destroy to give back:
 * the call itself is not affected. Caller holds h->lock. */
static void give_back_extra_retain(hk_handle_t *h)
{
    if (h->owns_primary > 1 && hk__give_back_primary(h->cudev) == CUDA_SUCCESS)
        h->owns_primary--;
}

/* Slow path: the handle's context ID did not match. A user context is gone;
 * a primary was reset and is re-armed here: new ID, functions and workspace
 * made again. A reset drops only the runtime's own retain (measured, see
 * tests/conformance): the handle's retain still counts, so re-activating takes
 * one retain, which is given back once the primary is active again. That is
 * impossible when the handle's stream died with the old context. On success
 * the handle's context may already be pushed (c->switched). */
static hk_status_t recover(hk_handle_t *h, hk__call_t *c)
{
    hk_status_t st = HK_STATUS_OK;
    CUresult r, rid;
    unsigned long long id = 0;
    pthread_mutex_lock(&h->lock);
    hk__arm_t *a = atomic_load_explicit(&h->arm, memory_order_acquire);
    /* Ask again under the lock: another thread may have re-armed meanwhile. */
    rid = hk__cu.cuCtxGetId(h->ctx, &id);
    if (rid == CUDA_SUCCESS && a && id == a->ctx_id)
        goto out;
    if (rid != CUDA_SUCCESS && rid != CUDA_ERROR_CONTEXT_IS_DESTROYED) {
        st = hk__fail_cu(h, rid, "cuCtxGetId");
        goto out;
    }
    if (!h->is_primary) {
        st = hk__fail(h, HK_STATUS_CONTEXT_DESTROYED,
                      "the handle's context (device %d, not owned by the handle) was "
                      "destroyed; destroy the handle", h->device);
        goto out;
    }
    if (atomic_load(&h->user_stream)) {
        st = hk__fail(h, HK_STATUS_CONTEXT_RESET,
                      "the primary context of device %d was reset and the handle's stream "
                      "died with it; set a new stream (set_stream) to continue", h->device);
        goto out;
    }
    CUcontext p = NULL;
    r = retain_primary(h->cudev, &p);
    if (r != CUDA_SUCCESS) {
        st = hk__fail_cu(h, r, "re-arming after a reset: cuDevicePrimaryCtxRetain");
        goto out;
    }
    h->owns_primary++;
    if (p != h->ctx) {
        st = hk__fail(h, HK_STATUS_CONTEXT_RESET,
                      "the primary context of device %d was reset and came back as another "
                      "context; destroy the handle", h->device);
        goto give_back;
    }
    if (c->prev != h->ctx) {
        r = hk__cu.cuCtxPushCurrent(h->ctx);
        if (r != CUDA_SUCCESS) {
            st = hk__fail_cu(h, r, "re-arming after a reset: cuCtxPushCurrent");
            goto give_back;
        }
        c->switched = 1;
    }
    st = arm(h, h);
    if (st != HK_STATUS_OK && c->switched) {
        hk__pop_current(); /* refused twice: the arm's failure is the one reported */
        c->switched = 0;
    }
give_back:
    give_back_extra_retain(h);
out:
    pthread_mutex_unlock(&h->lock);
    return st;
}

hk_status_t hk__call_begin(hk_handle_t *h, hk__call_t *c)
{
    if (atomic_load_explicit(&hk__forked, memory_order_relaxed))
        return hk__fail(h, HK_STATUS_FORKED,
                        "this process is a fork() child of the one that made the handle; "
                        "CUDA cannot be used here");
    c->h = h;
    c->switched = 0;
    CUresult r = hk__cu.cuCtxGetCurrent(&c->prev);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(h, r, "cuCtxGetCurrent");
    hk__arm_t *a = atomic_load_explicit(&h->arm, memory_order_acquire);
    unsigned long long id = 0;
    r = hk__cu.cuCtxGetId(h->ctx, &id);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return hk__fail_cu(h, r, "cuCtxGetId of the handle's context");
    if (r != CUDA_SUCCESS || !a || id != a->ctx_id) {
        hk_status_t st = recover(h, c);
        if (st != HK_STATUS_OK)
            return st;
        a = atomic_load_explicit(&h->arm, memory_order_acquire);
    }
    if (!c->switched && c->prev != h->ctx) {
        r = hk__cu.cuCtxPushCurrent(h->ctx);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(h, r, "cuCtxPushCurrent of the handle's context");
        c->switched = 1;
    }
    c->arm = a;
    hk__stream_read(h, &c->stream, &c->stream_id);
    return HK_STATUS_OK;
}

hk_status_t hk__call_end(hk__call_t *c, hk_status_t st)
{
    if (!c->switched)
        return st;
    CUresult r = hk__pop_current();
    if (r != CUDA_SUCCESS && st == HK_STATUS_OK) {
        /* The call's work is done (a free, an axpy): reporting a failure would
         * have it done twice. The message tells what is left current. */
        hk__fail_cu(c->h, r, "the call succeeded, but cuCtxPopCurrent restoring the caller's "
                              "context did not; the handle's context is still current");
    }
    return st;
}

/* ---- destroy ---- */

/* Frees what the handle made in incarnation a of its context, which is alive:
 * after the work issued through the handle is done. Pushes the handle's
 * context for it and pops it again. Returns the first failure. */
static hk_status_t free_made(hk_handle_t *h, hk__arm_t *a)
{
    hk_status_t st = HK_STATUS_OK;
    CUresult r = hk__cu.cuCtxPushCurrent(h->ctx);
    if (r != CUDA_SUCCESS)
        r = hk__cu.cuCtxPushCurrent(h->ctx); /* without it nothing below can be freed */
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(h, r, "destroy: cuCtxPushCurrent of the handle's context");
    /* Work on any stream the handle used may still read the workspace or
     * write the result word. A failed synchronisation means the context can
     * run no more work (an earlier fault), so the frees still go ahead. */
    r = hk__cu.cuCtxSynchronize();
    if (r != CUDA_SUCCESS)
        r = hk__cu.cuCtxSynchronize();
    if (r != CUDA_SUCCESS)
        st = hk__fail_cu(h, r, "destroy: cuCtxSynchronize waiting for the handle's work");
    r = hk__ws_free(a);
    if (r != CUDA_SUCCESS && st == HK_STATUS_OK)
        st = hk__fail_cu(h, r, "destroy: cuMemFree of the handle's workspaces");
    /* A word made in an earlier incarnation died with it. */
    if (h->slot && h->slot_ctx == a->ctx_id) {
        r = hk__give_back_host(h->slot);
        if (r != CUDA_SUCCESS && st == HK_STATUS_OK)
            st = hk__fail_cu(h, r, "destroy: cuMemFreeHost of the handle's result word");
    }
    r = hk__pop_current();
    if (r != CUDA_SUCCESS && st == HK_STATUS_OK)
        st = hk__fail_cu(h, r, "destroy: cuCtxPopCurrent restoring the caller's context");
    return st;
}

hk_status_t hk__context_unbind(hk_handle_t *h)
{
    /* Best effort to the end: the ABI says a destroyed handle is gone whatever
     * destroy returns, so a failing step is reported and the others still run. */
    hk_status_t st = HK_STATUS_OK;
    unsigned long long id = 0;
    hk__arm_t *a = atomic_load(&h->arm);
    /* Alive as the handle knew it: what it made is still there to free. After
     * a reset or a destroy the memory went with the context; freeing its old
     * addresses could free someone else's new block, so nothing is freed when
     * the driver cannot say. */
    CUresult r = hk__cu.cuCtxGetId(h->ctx, &id);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
        r = hk__cu.cuCtxGetId(h->ctx, &id);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
        st = hk__fail_cu(h, r, "destroy: cuCtxGetId of the handle's context");
    if (r == CUDA_SUCCESS && a && id == a->ctx_id)
        st = free_made(h, a);
    /* The handle's retains survive a reset (only the runtime's own is dropped). */
    while (h->owns_primary > 0) {
        r = hk__give_back_primary(h->cudev);
        if (r != CUDA_SUCCESS) {
            if (st == HK_STATUS_OK)
                st = hk__fail_cu(h, r, "destroy: cuDevicePrimaryCtxRelease");
            break;
        }
        h->owns_primary--;
    }
    h->owns_primary = 0;
    while (a) {
        hk__arm_t *older = a->older;
        hk__arm_free(a);
        a = older;
    }
    atomic_store(&h->arm, NULL);
    return st;
}

/* ---- checked mode ---- */

/* The plural query answers for any address (a host pointer reads as memory
 * type 0), so checked mode makes no failing driver call: a foreign pointer is
 * our finding, not a driver error for tools such as compute-sanitizer. */
static hk_status_t check_one(hk_handle_t *h, CUdeviceptr p, const char *what)
{
    unsigned type = 0;
    int ordinal = -1;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *data[2] = {&type, &ordinal};
    CUresult r = hk__cu.cuPointerGetAttributes(2, attrs, data, p);
    if (r != CUDA_SUCCESS) { /* the driver failed: nothing is known of the pointer */
        char cu[96];
        return hk__fail(h, hk__cu_status(r),
                        "checking %s (0x%llx): cuPointerGetAttributes failed: %s (handle on "
                        "device %d)", what, (unsigned long long)p, hk__cu_name(r, cu, sizeof cu),
                        h->device);
    }
    if (type != CU_MEMORYTYPE_DEVICE)
        return hk__fail(h, HK_STATUS_POINTER_MISMATCH,
                        "%s (0x%llx) is not device memory (memory type %u); the handle is on "
                        "device %d", what, (unsigned long long)p, type, h->device);
    if (ordinal != h->device)
        return hk__fail(h, HK_STATUS_POINTER_MISMATCH,
                        "%s (0x%llx) is memory of device %d, the handle is on device %d", what,
                        (unsigned long long)p, ordinal, h->device);
    return HK_STATUS_OK;
}

hk_status_t hk__check_pointer(hk_handle_t *h, const void *p, size_t bytes, const char *what)
{
    hk_status_t st = check_one(h, (CUdeviceptr)(uintptr_t)p, what);
    if (st == HK_STATUS_OK && bytes > 1)
        st = check_one(h, (CUdeviceptr)(uintptr_t)p + bytes - 1, what);
    return st;
}
