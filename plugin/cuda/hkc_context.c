/* hk-cuda: which context a handle uses, and the guard around every call.
 *
 * Implements DESIGN.md "Context contract": create-time binding from what is
 * current (or an explicit device), the per-call switch-and-restore, context-ID
 * checks, and the transparent re-arm of a reset primary context. */
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

/* ---- binding at create ---- */

static hk_status_t device_ordinal(CUdevice dev, int *ordinal)
{
    int count = 0;
    CUresult r = hk__cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuDeviceGetCount");
    for (int i = 0; i < count; i++) {
        CUdevice d;
        if (hk__cu.cuDeviceGet(&d, i) == CUDA_SUCCESS && d == dev) {
            *ordinal = i;
            return HK_STATUS_OK;
        }
    }
    return hk__fail(NULL, HK_STATUS_INVALID_DEVICE, "the current context's device is not listed");
}

/* The current context answers 709: a destroyed user context, or a primary
 * left current after its last release or a reset (facts 8, 16), which the
 * runtime's next call would re-activate. The retain that identifies it
 * re-activates it, as the runtime would. Every device is tried: another
 * thread may re-activate the primary between our queries. */
static hk_status_t bind_dead_current(hk_handle_t *h, CUcontext cur)
{
    int count = 0;
    CUresult r = hk__cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuDeviceGetCount");
    for (int i = 0; i < count; i++) {
        CUdevice d;
        CUcontext p = NULL;
        if (hk__cu.cuDeviceGet(&d, i) != CUDA_SUCCESS)
            continue;
        r = hk__cu.cuDevicePrimaryCtxRetain(&p, d);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(NULL, r, "cuDevicePrimaryCtxRetain");
        if (p == cur) {
            h->cudev = d;
            h->ctx = cur;
            h->is_primary = h->owns_primary = 1;
            return HK_STATUS_OK;
        }
        hk__cu.cuDevicePrimaryCtxRelease(d);
    }
    return hk__fail(NULL, HK_STATUS_CONTEXT_DESTROYED,
                    "the context current on this thread was destroyed");
}

/* What is current is either a primary (retain it: the handle owns a
 * reference) or a context somebody else owns (user or green: bind without
 * owning). A primary that was reset but is still current (fact 8) is
 * re-activated by the retain, as the runtime's next call would do. */
static hk_status_t classify_current(hk_handle_t *h, CUcontext cur)
{
    CUdevice dev;
    unsigned flags = 0;
    int active = 0;
    unsigned long long id = 0;
    CUresult r = hk__cu.cuCtxGetDevice(&dev);
    if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return bind_dead_current(h, cur);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuCtxGetDevice of the current context");
    r = hk__cu.cuDevicePrimaryCtxGetState(dev, &flags, &active);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuDevicePrimaryCtxGetState");
    CUresult rid = hk__cu.cuCtxGetId(cur, &id);
    if (rid != CUDA_SUCCESS && rid != CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return hk__fail_cu(NULL, rid, "cuCtxGetId of the current context");
    h->cudev = dev;
    h->ctx = cur;
    if (active || rid == CUDA_ERROR_CONTEXT_IS_DESTROYED) {
        CUcontext p = NULL;
        r = hk__cu.cuDevicePrimaryCtxRetain(&p, dev);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(NULL, r, "cuDevicePrimaryCtxRetain");
        if (p == cur) {
            h->is_primary = h->owns_primary = 1;
            return HK_STATUS_OK;
        }
        hk__cu.cuDevicePrimaryCtxRelease(dev);
        if (rid == CUDA_ERROR_CONTEXT_IS_DESTROYED)
            return hk__fail(NULL, HK_STATUS_CONTEXT_DESTROYED,
                            "the context current on this thread was destroyed");
    }
    return HK_STATUS_OK; /* a user or green context: not ours to retain */
}

hk_status_t hk__context_bind(hk_handle_t *h, int device)
{
    hk_status_t st = HK_STATUS_OK;
    CUcontext cur = NULL;
    int keep_current = 0;
    CUresult r = hk__cu.cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuCtxGetCurrent");
    if (device == HK_DEVICE_CURRENT && cur) {
        st = classify_current(h, cur);
        if (st == HK_STATUS_OK)
            st = device_ordinal(h->cudev, &h->device);
    } else {
        int count = 0;
        r = hk__cu.cuDeviceGetCount(&count);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(NULL, r, "cuDeviceGetCount");
        if (count == 0)
            return hk__fail(NULL, HK_STATUS_NO_DEVICE, "the CUDA driver lists no device");
        /* Nothing current: device 0, the runtime's default device. */
        int ordinal = device == HK_DEVICE_CURRENT ? 0 : device;
        if (ordinal < 0 || ordinal >= count)
            return hk__fail(NULL, HK_STATUS_INVALID_DEVICE,
                            "device %d does not exist (%d device%s)", ordinal, count,
                            count == 1 ? "" : "s");
        r = hk__cu.cuDeviceGet(&h->cudev, ordinal);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(NULL, r, "cuDeviceGet");
        r = hk__cu.cuDevicePrimaryCtxRetain(&h->ctx, h->cudev);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(NULL, r, "cuDevicePrimaryCtxRetain");
        h->device = ordinal;
        h->is_primary = h->owns_primary = 1;
        keep_current = device == HK_DEVICE_CURRENT;
    }
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
        r = hk__cu.cuCtxSetCurrent(h->ctx);
        if (r != CUDA_SUCCESS) {
            st = hk__fail_cu(NULL, r, "cuCtxSetCurrent");
            goto fail;
        }
    }
    st = arm(h, NULL);
    if (h->ctx != cur && (st != HK_STATUS_OK || !keep_current)) {
        /* With nothing current this pops what we set (fact 15). */
        r = hk__cu.cuCtxSetCurrent(cur);
        if (r != CUDA_SUCCESS && st == HK_STATUS_OK) {
            st = hk__fail_cu(NULL, r, "restoring the caller's context");
            hk__cu.cuCtxSetCurrent(h->ctx);
            hk__arm_t *made = atomic_load(&h->arm);
            hk__ws_free(made);
            hk__arm_free(made);
            atomic_store(&h->arm, NULL);
        }
    }
    if (st != HK_STATUS_OK)
        goto fail;
    return HK_STATUS_OK;
fail:
    if (h->owns_primary)
        hk__cu.cuDevicePrimaryCtxRelease(h->cudev);
    h->owns_primary = h->is_primary = 0;
    return st;
}

/* ---- host pointer mode's result word ---- */

void *hk__result_slot(hk_handle_t *h, const hk__arm_t *a, CUdeviceptr *dev)
{
    if (h->slot_ctx != a->ctx_id) {
        /* Optional: if the driver refuses, the caller copies from ws. */
        h->slot_ctx = a->ctx_id;
        if (hk__cu.cuMemHostAlloc(&h->slot, 64, CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS) {
            h->slot = NULL;
        } else if (hk__cu.cuMemHostGetDevicePointer(&h->slot_dev, h->slot, 0) != CUDA_SUCCESS) {
            hk__cu.cuMemFreeHost(h->slot);
            h->slot = NULL;
        }
    }
    *dev = h->slot_dev;
    return h->slot;
}

/* ---- the per-call guard ---- */

/* Slow path: the handle's context ID did not match. A user context is gone;
 * a primary was reset and is re-armed here: new ID, functions and workspace
 * made again. A reset drops only the runtime's own retain (measured, see
 * tests/conformance): the handle's retain still counts, so re-activating takes
 * one retain, which is given back once the primary is active again. That is
 * impossible when the handle's stream died with the old context. */
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
    r = hk__cu.cuDevicePrimaryCtxRetain(&p, h->cudev);
    if (r != CUDA_SUCCESS) {
        st = hk__fail_cu(h, r, "re-arming after a reset: cuDevicePrimaryCtxRetain");
        goto out;
    }
    if (p != h->ctx) {
        hk__cu.cuDevicePrimaryCtxRelease(h->cudev);
        st = hk__fail(h, HK_STATUS_CONTEXT_RESET,
                      "the primary context of device %d was reset and came back as another "
                      "context; destroy the handle", h->device);
        goto out;
    }
    /* The primary is active again; the handle's own retain keeps it so. A
     * handle that lost its retain (a failed bind) keeps this one instead. */
    if (h->owns_primary)
        hk__cu.cuDevicePrimaryCtxRelease(h->cudev);
    h->owns_primary = 1;
    if (c->prev != h->ctx) {
        r = hk__cu.cuCtxSetCurrent(h->ctx);
        if (r != CUDA_SUCCESS) {
            st = hk__fail_cu(h, r, "re-arming after a reset: cuCtxSetCurrent");
            goto out;
        }
    }
    st = arm(h, h);
    if (c->prev != h->ctx)
        hk__cu.cuCtxSetCurrent(c->prev);
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
    if (c->prev != h->ctx) {
        r = hk__cu.cuCtxSetCurrent(h->ctx);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(h, r, "cuCtxSetCurrent to the handle's context");
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
    CUresult r = hk__cu.cuCtxSetCurrent(c->prev);
    if (r != CUDA_SUCCESS && st == HK_STATUS_OK)
        return hk__fail_cu(c->h, r, "restoring the caller's context");
    return st;
}

/* ---- destroy ---- */

hk_status_t hk__context_unbind(hk_handle_t *h)
{
    /* Best effort to the end: the ABI says a destroyed handle is gone whatever
     * destroy returns, so a failing step is reported, never retried. */
    hk_status_t st = HK_STATUS_OK;
    CUcontext cur = NULL;
    unsigned long long id = 0;
    hk__arm_t *a = atomic_load(&h->arm);
    CUresult r = hk__cu.cuCtxGetCurrent(&cur);
    int cur_known = r == CUDA_SUCCESS;
    if (!cur_known)
        st = hk__fail_cu(h, r, "destroy: cuCtxGetCurrent");
    r = hk__cu.cuCtxGetId(h->ctx, &id);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_CONTEXT_IS_DESTROYED && st == HK_STATUS_OK)
        st = hk__fail_cu(h, r, "destroy: cuCtxGetId");
    /* Alive as the handle knew it: what it made is still there to free. After
     * a reset the memory went with the context, but the handle's retain still
     * counts (only the runtime's own retain is dropped) and is released. */
    int alive = r == CUDA_SUCCESS && a && id == a->ctx_id;
    if (alive && cur_known) {
        r = cur != h->ctx ? hk__cu.cuCtxSetCurrent(h->ctx) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS) {
            CUresult rf = hk__ws_free(a);
            if (rf != CUDA_SUCCESS && st == HK_STATUS_OK)
                st = hk__fail_cu(h, rf, "destroy: cuMemFree of the handle's workspaces");
            /* A word made in an earlier incarnation died with it. */
            rf = h->slot && h->slot_ctx == a->ctx_id ? hk__cu.cuMemFreeHost(h->slot)
                                                      : CUDA_SUCCESS;
            if (rf != CUDA_SUCCESS && st == HK_STATUS_OK)
                st = hk__fail_cu(h, rf, "destroy: cuMemFreeHost of the handle's result slot");
            r = cur != h->ctx ? hk__cu.cuCtxSetCurrent(cur) : CUDA_SUCCESS;
            if (r != CUDA_SUCCESS && st == HK_STATUS_OK)
                st = hk__fail_cu(h, r, "destroy: restoring the caller's context");
        } else if (st == HK_STATUS_OK) {
            st = hk__fail_cu(h, r, "destroy: cuCtxSetCurrent to the handle's context");
        }
    }
    if (h->owns_primary) {
        r = hk__cu.cuDevicePrimaryCtxRelease(h->cudev);
        if (r != CUDA_SUCCESS && st == HK_STATUS_OK)
            st = hk__fail_cu(h, r, "destroy: cuDevicePrimaryCtxRelease");
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
    if (r != CUDA_SUCCESS) {
        char cu[96];
        return hk__fail(h, HK_STATUS_POINTER_MISMATCH,
                        "%s (0x%llx): cannot query it (%s); device %d expected", what,
                        (unsigned long long)p, hk__cu_name(r, cu, sizeof cu), h->device);
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
