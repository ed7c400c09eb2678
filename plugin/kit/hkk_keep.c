/* handlekit kit: the primary retain the kit keeps between handles
 * (docs/contexts.md, "What the kit keeps between handles").
 *
 * Releasing the last retain of a primary context tears the context down, and
 * the next retain builds it again (fact 2): in a process without the CUDA
 * runtime, whose own retain would keep it, every create/destroy cycle of a
 * lone handle would pay for a whole context. So the last retain a handle gives
 * back on a device is kept here instead, one per device, until hk_kit_trim or
 * the module's unload (hkk_driver.c) gives it back, as the runtime keeps its
 * own until the process ends or the device is reset.
 *
 * A kept retain is a count, not an incarnation: a reset drops only the
 * runtime's own retain (fact 8), so a retain kept before a reset still counts
 * afterwards and is given back exactly once. The incarnation it was kept in
 * (its context ID) is remembered only to notice, and trace, a kept retain
 * whose context was reset since. */
#include <stdio.h>

#include "hk_status_text.h"
#include "hkk_internal.h"

/* Guards kept[]; taken by unbind, trim and unload, never on a call's path. */
static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;

static struct kept {
    int held;               /* one retain of this device's primary is the kit's */
    int ordinal;            /* for messages */
    unsigned long long id;  /* the incarnation it was last seen alive in */
} kept[HK__KIT_DEVICES];

int hkk_keep_primary(CUdevice dev, int ordinal, unsigned long long id)
{
    if (dev < 0 || dev >= HK__KIT_DEVICES)
        return 0;
    pthread_mutex_lock(&keep_lock);
    struct kept *k = &kept[dev];
    int took = !k->held;
    if (took) {
        k->held = 1;
        k->ordinal = ordinal;
    } else if (k->id != id) {
        /* Kept in an incarnation that was reset since: it still counts (a
         * reset takes only the runtime's retain), and now keeps this one. */
        HK__TRACE(HK__TRACE_DECISIONS, "ctx", "device %d: the primary retain kept since context "
                  "id %llu (reset since) keeps context id %llu now", ordinal, k->id, id);
    }
    k->id = id;
    pthread_mutex_unlock(&keep_lock);
    if (took)
        HK__TRACE(HK__TRACE_DECISIONS, "ctx", "device %d: the kit keeps a retain of the primary "
                  "context (context id %llu) until trim or unload, so the next handle finds it "
                  "active", ordinal, id);
    return took;
}

/* Gives back dev's kept retain; keep_lock held. A refusal other than "not
 * retained" keeps it held for a later trim. */
static hk_status_t give_back_kept(CUdevice dev)
{
    struct kept *k = &kept[dev];
    unsigned long long now = 0;
    CUcontext p = hkk_known_primary(dev);
    CUresult q = p ? KCU.cuCtxGetId(p, &now) : CUDA_ERROR_INVALID_CONTEXT;
    if (q == CUDA_ERROR_CONTEXT_IS_DESTROYED || (q == CUDA_SUCCESS && now != k->id))
        HK__TRACE(HK__TRACE_DECISIONS, "ctx", "device %d: the primary context kept since context "
                  "id %llu was reset since; its retain still counts and is given back once",
                  k->ordinal, k->id);
    CUresult r = hk_kit_give_back_primary(dev);
    if (r == CUDA_ERROR_INVALID_CONTEXT) {
        /* Not retained: somebody released more than they retained and took
         * ours with theirs. Nothing is left to give back. */
        HK__TRACE(HK__TRACE_DECISIONS, "ctx", "device %d: the kept primary retain was already "
                  "released by someone else; nothing given back", k->ordinal);
        k->held = 0;
        return HK_STATUS_OK;
    }
    if (r != CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "trim: cuDevicePrimaryCtxRelease of device %d's kept retain",
                 k->ordinal);
        return hk_kit_fail_cu(NULL, r, what);
    }
    k->held = 0;
    HK__TRACE(HK__TRACE_DECISIONS, "ctx", "device %d: the kit's kept primary retain given back",
              k->ordinal);
    return HK_STATUS_OK;
}

static _Atomic(hk_status_t (*)(void)) plugin_trim;

void hk_kit_set_trim(hk_status_t (*fn)(void))
{
    atomic_store(&plugin_trim, fn);
}

/* One trim at a time: what the plugin keeps in a primary context lives while
 * the kit's kept retain does, so another trim must not give that retain back
 * while this one still frees there. */
static pthread_mutex_t trim_lock = PTHREAD_MUTEX_INITIALIZER;

hk_status_t hk_kit_trim(void)
{
    if (atomic_load(&hkk_forked)) /* the driver is unusable there: nothing to give back */
        return HK_STATUS_OK;
    pthread_mutex_lock(&trim_lock);
    /* The plugin's first: what it keeps lives in contexts the kept retains
     * keep alive. */
    hk_status_t (*fn)(void) = atomic_load(&plugin_trim);
    hk_status_t st = fn ? fn() : HK_STATUS_OK;
    /* Then the memory kept for the next create, in contexts the kept
     * retains still keep alive. It reads the driver table only for blocks
     * kept (after the driver was opened: their keeping, under the kept
     * blocks' lock, orders the table's writes before these reads). */
    hk_status_t kst = hkk_kept_trim();
    if (st == HK_STATUS_OK)
        st = kst;
    pthread_mutex_lock(&keep_lock);
    for (int d = 0; d < HK__KIT_DEVICES; d++) {
        if (!kept[d].held)
            continue;
        hk_status_t s = KCU.cuDevicePrimaryCtxRelease ? give_back_kept(d) : HK_STATUS_NO_DRIVER;
        if (st == HK_STATUS_OK)
            st = s;
    }
    pthread_mutex_unlock(&keep_lock);
    pthread_mutex_unlock(&trim_lock);
    return st;
}
