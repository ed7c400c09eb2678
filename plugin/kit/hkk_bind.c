/* handlekit kit: which context a handle uses (docs/contexts.md, "Binding at
 * handle_create"), the primary retains, and giving back.
 *
 * Failures (plugin/kit/README.md): whatever a failing bind took is given back
 * before it returns, and the caller's context is current again. The handle's
 * context is pushed over the caller's and popped afterwards rather than set
 * and set back: a pop gives back exactly what was current, even a context that
 * died meanwhile, which cuCtxSetCurrent would refuse. */
#include <stdlib.h>
#include <string.h>

#include "hk_status_text.h"
#include "hkk_internal.h"

/* Why the context a bind chose was chosen, for its trace line: set by the
 * decision that made it (a bind runs on one thread from start to end). */
static _Thread_local const char *bind_why;

#define WHY_NOTHING "nothing was current: device 0's primary, the runtime's default device, made " \
                    "current as a runtime call would"
#define WHY_NAMED "that device was asked for; the caller's current context is left as it was"
#define WHY_CURRENT "it was current"
#define WHY_REVIVED "it was current but inactive (reset or released): re-activated, as the " \
                    "runtime's next call would"
#define WHY_KNOWN "it is current, and its device's primary is another context"
#define WHY_INACTIVE "it is current and alive while its device's primary is inactive, so it " \
                     "is not the primary"

/* ---- arming: what the plugin makes in the bound context ---- */

static void hkk_free_arm(hk_kit_bind_t *b, hk_kit_arm_t *a)
{
    if (b->ops && b->ops->free_arm)
        b->ops->free_arm(b->user, a);
    else
        free(a);
}

void hkk_free_arms(hk_kit_bind_t *b)
{
    hk_kit_arm_t *a = atomic_load(&b->arm);
    while (a) {
        hk_kit_arm_t *older = a->older;
        hkk_free_arm(b, a);
        a = older;
    }
    atomic_store(&b->arm, NULL);
}

hk_status_t hkk_arm(hk_kit_bind_t *b, hk_kit_bind_t *err_to)
{
    unsigned long long id = 0;
    hk_kit_arm_t *a = NULL;
    CUresult r = KCU.cuCtxGetId(b->ctx, &id);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(err_to, r, "cuCtxGetId");
    if (b->ops && b->ops->arm) {
        hk_status_t st = b->ops->arm(b, b->user, id, err_to, &a);
        if (st != HK_STATUS_OK)
            return st;
        if (!a)
            return hk_kit_fail(err_to, HK_STATUS_INTERNAL,
                               "the plugin's arm callback returned OK without its state");
    } else {
        a = calloc(1, sizeof *a);
        if (!a)
            return hk_kit_fail(err_to, HK_STATUS_OUT_OF_MEMORY,
                               "no memory for the handle's state");
    }
    a->ctx_id = id;
    a->older = atomic_load(&b->arm);
    atomic_store_explicit(&b->arm, a, memory_order_release);
    return HK_STATUS_OK;
}

/* ---- binding at create ---- */

static hk_status_t device_ordinal(CUdevice dev, int *ordinal)
{
    int count = 0;
    CUresult r = KCU.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "cuDeviceGetCount");
    for (int i = 0; i < count; i++) {
        CUdevice d;
        r = KCU.cuDeviceGet(&d, i);
        if (r != CUDA_SUCCESS) /* not "not listed": that would hide the driver's answer */
            return hk_kit_fail_cu(NULL, r, "cuDeviceGet");
        if (d == dev) {
            *ordinal = i;
            return HK_STATUS_OK;
        }
    }
    return hk_kit_fail(NULL, HK_STATUS_INVALID_DEVICE,
                       "the current context's device is not listed");
}

/* ---- which primary is which ---- */

/* Primary context pointers by device, learnt from our own retains. A primary
 * keeps its pointer for the life of the process (docs/contexts.md fact 2), so
 * once learnt, a current context is told from its device's primary by
 * pointer: no retain, which would activate an inactive primary, and no race
 * with threads that activate or release it between two queries. */
static _Atomic(CUcontext) known_primaries[HK__KIT_DEVICES];

CUcontext hkk_known_primary(CUdevice dev)
{
    return dev >= 0 && dev < HK__KIT_DEVICES ? atomic_load(&known_primaries[dev]) : NULL;
}

CUresult hkk_retain_primary(CUdevice dev, CUcontext *p)
{
    CUresult r = KCU.cuDevicePrimaryCtxRetain(p, dev);
    if (r == CUDA_SUCCESS && dev >= 0 && dev < HK__KIT_DEVICES)
        atomic_store(&known_primaries[dev], *p);
    return r;
}

/* A retain taken only to compare pointers goes back at once. Refused twice,
 * the create fails: a create that returned OK must hold nothing it does not
 * account for. */
static hk_status_t give_back_probe(CUdevice dev)
{
    CUresult r = hk_kit_give_back_primary(dev);
    if (r == CUDA_SUCCESS)
        return HK_STATUS_OK;
    return hk_kit_fail_cu(NULL, r, "cuDevicePrimaryCtxRelease of a probe retain");
}

/* Retains dev's primary; if it is cur, the handle binds it and keeps the
 * retain (*bound = 1), else the retain goes back. */
static hk_status_t bind_if_primary(hk_kit_bind_t *h, CUdevice dev, CUcontext cur, int *bound)
{
    CUcontext p = NULL;
    *bound = 0;
    CUresult r = hkk_retain_primary(dev, &p);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "cuDevicePrimaryCtxRetain");
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
static hk_status_t bind_dead_current(hk_kit_bind_t *h, CUcontext cur)
{
    int count = 0;
    CUresult r = KCU.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "cuDeviceGetCount");
    for (int i = 0; i < count; i++) {
        CUdevice d;
        int bound = 0;
        r = KCU.cuDeviceGet(&d, i);
        if (r != CUDA_SUCCESS)
            return hk_kit_fail_cu(NULL, r, "cuDeviceGet");
        CUcontext known = hkk_known_primary(d);
        if (known && known != cur)
            continue;
        hk_status_t st = bind_if_primary(h, d, cur, &bound);
        bind_why = WHY_REVIVED;
        if (st != HK_STATUS_OK || bound)
            return st;
    }
    return hk_kit_fail(NULL, HK_STATUS_CONTEXT_DESTROYED,
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
        CUresult r = KCU.cuDevicePrimaryCtxGetState(dev, &flags, &active);
        if (r != CUDA_SUCCESS)
            return hk_kit_fail_cu(NULL, r, "cuDevicePrimaryCtxGetState");
        *maybe = active;
        if (pass == 0) {
            r = KCU.cuCtxGetId(cur, &id);
            if (r != CUDA_SUCCESS && r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
                return hk_kit_fail_cu(NULL, r, "cuCtxGetId of the current context");
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
static hk_status_t classify_current(hk_kit_bind_t *h, CUcontext cur)
{
    CUdevice dev;
    int maybe = 1, dead = 0, bound = 0;
    CUresult r = KCU.cuCtxGetDevice(&dev);
    if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return bind_dead_current(h, cur);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "cuCtxGetDevice of the current context");
    h->cudev = dev;
    h->ctx = cur;
    CUcontext known = hkk_known_primary(dev);
    bind_why = WHY_KNOWN;
    if (known && known != cur)
        return HK_STATUS_OK; /* a user or green context: not ours to retain */
    if (!known) {
        hk_status_t st = maybe_primary(dev, cur, &maybe, &dead);
        if (st != HK_STATUS_OK)
            return st;
    }
    bind_why = WHY_INACTIVE;
    if (!maybe)
        return HK_STATUS_OK;
    hk_status_t st = bind_if_primary(h, dev, cur, &bound);
    bind_why = !bound ? WHY_KNOWN : dead ? WHY_REVIVED : WHY_CURRENT;
    if (st == HK_STATUS_OK && !bound && dead)
        return hk_kit_fail(NULL, HK_STATUS_CONTEXT_DESTROYED,
                           "the context current on this thread was destroyed");
    return st;
}

/* Which context, device and retain: from what is current, or device 0's or
 * the named device's primary. *keep_current: leave the bound primary current
 * (nothing was current and no device was named, as a runtime call would). */
static hk_status_t choose_context(hk_kit_bind_t *h, int device, CUcontext cur, int *keep_current)
{
    *keep_current = 0;
    if (device == HK_DEVICE_CURRENT && cur) {
        hk_status_t st = classify_current(h, cur);
        return st == HK_STATUS_OK ? device_ordinal(h->cudev, &h->device) : st;
    }
    int count = 0;
    CUresult r = KCU.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "cuDeviceGetCount");
    if (count == 0)
        return hk_kit_fail(NULL, HK_STATUS_NO_DEVICE, "the CUDA driver lists no device");
    /* Nothing current: device 0, the runtime's default device. */
    int ordinal = device == HK_DEVICE_CURRENT ? 0 : device;
    if (ordinal < 0 || ordinal >= count)
        return hk_kit_fail(NULL, HK_STATUS_INVALID_DEVICE, "device %d does not exist (%d device%s)",
                           ordinal, count, count == 1 ? "" : "s");
    r = KCU.cuDeviceGet(&h->cudev, ordinal);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "cuDeviceGet");
    r = hkk_retain_primary(h->cudev, &h->ctx);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "cuDevicePrimaryCtxRetain");
    h->device = ordinal;
    h->is_primary = 1;
    h->owns_primary = 1;
    *keep_current = device == HK_DEVICE_CURRENT;
    bind_why = *keep_current ? WHY_NOTHING : WHY_NAMED;
    return HK_STATUS_OK;
}

/* Undoes the arm for a bind that fails after it: the handle's context is
 * current. */
static void disarm(hk_kit_bind_t *b)
{
    hk_kit_arm_t *made = atomic_load(&b->arm);
    if (made && b->ops && b->ops->release)
        (void)b->ops->release(b, b->user, made); /* the pop's failure is the one reported */
    hkk_free_arms(b);
}

static hk_status_t context_bind(hk_kit_bind_t *h, int device)
{
    CUcontext cur = NULL;
    int keep_current = 0, pushed = 0;
    CUresult r = KCU.cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "cuCtxGetCurrent");
    hk_status_t st = choose_context(h, device, cur, &keep_current);
    if (st != HK_STATUS_OK)
        goto fail;
    if (h->ctx != cur) {
        r = KCU.cuCtxPushCurrent(h->ctx);
        if (r != CUDA_SUCCESS) {
            st = hk_kit_fail_cu(NULL, r, "cuCtxPushCurrent of the handle's context");
            goto fail;
        }
        pushed = 1;
    }
    st = hkk_arm(h, NULL);
    if (pushed && (st != HK_STATUS_OK || !keep_current)) {
        /* With keep_current nothing was current, and the pushed primary
         * stays as the only entry of the stack, as after a runtime call. */
        r = hk_kit_pop_current();
        if (r != CUDA_SUCCESS && st == HK_STATUS_OK) {
            /* The work can be undone, so the create fails: the handle's
             * context is still current for the frees. */
            st = hk_kit_fail_cu(NULL, r, "cuCtxPopCurrent restoring the caller's context");
            disarm(h);
        }
    }
    if (st == HK_STATUS_OK) {
        if (hk__tracing(HK__TRACE_DECISIONS))
            hkk_trace_bound(h, bind_why ? bind_why : "");
        return HK_STATUS_OK;
    }
fail:
    /* The first failure is reported; a retain the driver refuses twice to
     * take back stays with it. */
    while (h->owns_primary > 0 && hk_kit_give_back_primary(h->cudev) == CUDA_SUCCESS)
        h->owns_primary--;
    h->owns_primary = h->is_primary = 0;
    return st;
}

/* hk_kit_bind's work; out is not NULL. */
static hk_status_t bind_new(int device, const hk_kit_ops_t *ops, void *user, hk_kit_bind_t **out)
{
    if (device < HK_DEVICE_CURRENT)
        return hk_kit_fail(NULL, HK_STATUS_INVALID_DEVICE, "device %d is not valid", device);
    if (atomic_load(&hkk_forked))
        return hk_kit_fail(NULL, HK_STATUS_FORKED,
                           "this process is a fork() child of a CUDA process");
    if (!KCU.cuCtxGetCurrent)
        return hk_kit_fail(NULL, HK_STATUS_NO_DRIVER,
                           "hk_kit_bind before hk_kit_driver_load succeeded");
    hk_kit_bind_t *b = calloc(1, sizeof *b);
    if (!b)
        return hk_kit_fail(NULL, HK_STATUS_OUT_OF_MEMORY, "no memory for the handle's binding");
    pthread_mutex_init(&b->lock, NULL);
    pthread_mutex_init(&b->errlock, NULL);
    b->ops = ops;
    b->user = user;
    hkk_streams_forget(b);
    hk_status_t st = context_bind(b, device);
    if (st != HK_STATUS_OK) {
        pthread_mutex_destroy(&b->lock);
        pthread_mutex_destroy(&b->errlock);
        free(b);
        return st;
    }
    *out = b;
    return HK_STATUS_OK;
}

hk_status_t hk_kit_bind(int device, const hk_kit_ops_t *ops, void *user, hk_kit_bind_t **out)
{
    if (!out)
        return hk_kit_fail(NULL, HK_STATUS_NULL_POINTER, "hk_kit_bind: out is NULL");
    *out = NULL;
    bind_why = NULL;
    hk_status_t st = bind_new(device, ops, user, out);
    if (st != HK_STATUS_OK)
        HK__TRACE(HK__TRACE_DECISIONS, "ctx", "handle %p: create refused: %s: %s", user,
                  hk_status_name(st), hk_kit_last_error(NULL));
    return st;
}
