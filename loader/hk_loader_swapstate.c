/* handlekit live swap: its record, made on first use and freed with the
 * loader through the hooks it registers; the failure lines of movable
 * handles and swaps; the times of the last swap; reading the state
 * (hk_loader_swap_state, hk_plugin_swap_state) and the statistics
 * (hk_loader_swap_stats) without waiting for a running swap, and the names
 * of its phases, module states and statistics. */
#include "hk__swap.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The calling thread's last failure of a movable-handle function. */
static _Thread_local char hk__mh_msg[HK__MH_MSG];

const char *hk__mh_thread_msg(void)
{
    return hk__mh_msg;
}

void hk__mh_thread_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(hk__mh_msg, sizeof(hk__mh_msg), fmt, ap);
    va_end(ap);
}

/* ---- the record and the loader's lifetime ---- */

/* Nonzero (with the last error set) while a movable handle lives: its
 * binding still calls into a module. */
static int hk__swap_busy(hk_loader_t *loader)
{
    struct hk__swap *sw = atomic_load(&loader->swap);
    if (!sw)
        return 0;
    pthread_mutex_lock(&sw->list_lock);
    size_t n = sw->nhandles;
    pthread_mutex_unlock(&sw->list_lock);
    if (n == 0)
        return 0;
    hk__swap_fail(loader, HK_STATUS_BUSY,
                  "loader destroy refused: %zu movable handle(s) still live (hk_mhandle_destroy "
                  "them first)", n);
    return 1;
}

static void hk__swap_free(hk_loader_t *loader)
{
    struct hk__swap *sw = atomic_load(&loader->swap);
    if (!sw)
        return;
    hk__ext_free_all(sw); /* the plugins are gone already: only the copies */
    for (size_t i = 0; i < sw->nmodules; i++)
        free(sw->modules[i]);
    free(sw->modules);
    free(sw->handles);
    /* sw->libs is empty: a library goes with the last movable handle on its
     * implementation, and the loader is destroyed only without them. */
    pthread_mutex_destroy(&sw->lock);
    pthread_mutex_destroy(&sw->kern_lock);
    pthread_mutex_destroy(&sw->list_lock);
    free(sw);
    atomic_store(&loader->swap, NULL);
}

static const hk__loader_hook_t hk__swap_hook = {hk__swap_busy, hk__swap_free};

struct hk__swap *hk__swap_get(hk_loader_t *loader)
{
    struct hk__swap *sw = atomic_load_explicit(&loader->swap, memory_order_acquire);
    if (sw)
        return sw;
    /* Before the record exists: the loader never holds one it cannot free. */
    if (hk__loader_hook_add(loader, &hk__swap_hook) != HK_STATUS_OK)
        return NULL;
    sw = calloc(1, sizeof(*sw));
    if (!sw)
        return NULL;
    pthread_mutex_init(&sw->lock, NULL);
    pthread_mutex_init(&sw->kern_lock, NULL);
    pthread_mutex_init(&sw->list_lock, NULL);
    struct hk__swap *expected = NULL;
    if (!atomic_compare_exchange_strong(&loader->swap, &expected, sw)) {
        /* Another thread made it first. */
        pthread_mutex_destroy(&sw->lock);
        pthread_mutex_destroy(&sw->kern_lock);
        pthread_mutex_destroy(&sw->list_lock);
        free(sw);
        return expected;
    }
    return sw;
}

hk_status_t hk__swap_fail(hk_loader_t *loader, hk_status_t st, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    snprintf(hk__mh_msg, sizeof(hk__mh_msg), "%s", line);
    hk__loader_keep_error(loader, line, "out of memory");
    return st;
}

/* ---- times ---- */

void hk__swap_record_times(struct hk__swap *sw, const uint64_t t[5], uint64_t t_commit,
                           uint64_t t_drained, uint64_t t_closed)
{
    uint64_t t_switch = t[4] - t[0], t_drain = t_drained - t[4];
    atomic_store(&sw->last_open_ns, t[1] - t[0]);
    atomic_store(&sw->last_verify_ns, t[2] - t[1]);
    atomic_store(&sw->last_create_ns, t[3] - t[2]);
    atomic_store(&sw->last_commit_ns, t[4] - t[3]);
    if (t_commit) { /* prepared beforehand: the switch counts from the commit */
        t_switch = t[4] - t_commit;
        atomic_store(&sw->last_commit_ns, t_switch);
    }
    atomic_store(&sw->last_close_ns, t_closed - t_drained);
    atomic_store(&sw->last_switch_ns, t_switch);
    atomic_store(&sw->last_drain_ns, t_drain);
    if (t_switch > atomic_load(&sw->max_switch_ns))
        atomic_store(&sw->max_switch_ns, t_switch);
    if (t_drain > atomic_load(&sw->max_drain_ns))
        atomic_store(&sw->max_drain_ns, t_drain);
}

/* ---- reading the state ---- */

hk_status_t hk_loader_swap_state(hk_loader_t *loader, hk_swap_state_t *state)
{
    if (!loader || !state)
        return HK_STATUS_NULL_POINTER;
    if (state->size < sizeof(uint32_t))
        return HK_STATUS_INVALID_VALUE;
    hk_swap_state_t s;
    memset(&s, 0, sizeof(s));
    struct hk__swap *sw = atomic_load(&loader->swap);
    if (sw) {
        s.phase = (hk_swap_phase_t)atomic_load(&sw->phase);
        s.draining = atomic_load(&sw->draining);
        s.libraries = atomic_load(&sw->libraries);
        pthread_mutex_lock(&sw->list_lock);
        s.handles = sw->nhandles;
        for (size_t i = 0; i < sw->nhandles; i++)
            s.inflight += atomic_load(&sw->handles[i]->slot[0].inflight)
                          + atomic_load(&sw->handles[i]->slot[1].inflight);
        pthread_mutex_unlock(&sw->list_lock);
    }
    size_t n = state->size < sizeof(s) ? state->size : sizeof(s);
    s.size = (uint32_t)n;
    memcpy(state, &s, n);
    return HK_STATUS_OK;
}

/* ---- the statistics ---- */

/* Each statistic's name and where the record keeps it, in the order of
 * hk_swap_stat_t (LAST_DESTROY_STATUS, an int of its own, has no field
 * here). */
#define HK__STAT(NAME, FIELD) {NAME, offsetof(struct hk__swap, FIELD)}
static const struct {
    const char *name;
    size_t at;
} hk__stats[HK_SWAP_STAT__COUNT] = {
    [HK_SWAP_STAT_SWAPS] = HK__STAT("swaps", generation),
    [HK_SWAP_STAT_REFUSED] = HK__STAT("refused", failed),
    [HK_SWAP_STAT_MODULES_CLOSED] = HK__STAT("modules_closed", closed),
    [HK_SWAP_STAT_LAST_SWITCH_NS] = HK__STAT("last_switch_ns", last_switch_ns),
    [HK_SWAP_STAT_LAST_DRAIN_NS] = HK__STAT("last_drain_ns", last_drain_ns),
    [HK_SWAP_STAT_MAX_SWITCH_NS] = HK__STAT("max_switch_ns", max_switch_ns),
    [HK_SWAP_STAT_MAX_DRAIN_NS] = HK__STAT("max_drain_ns", max_drain_ns),
    [HK_SWAP_STAT_LAST_OPEN_NS] = HK__STAT("last_open_ns", last_open_ns),
    [HK_SWAP_STAT_LAST_VERIFY_NS] = HK__STAT("last_verify_ns", last_verify_ns),
    [HK_SWAP_STAT_LAST_CREATE_NS] = HK__STAT("last_create_ns", last_create_ns),
    [HK_SWAP_STAT_LAST_COMMIT_NS] = HK__STAT("last_commit_ns", last_commit_ns),
    [HK_SWAP_STAT_LAST_CLOSE_NS] = HK__STAT("last_close_ns", last_close_ns),
    [HK_SWAP_STAT_HOLDS] = HK__STAT("holds", holds),
    [HK_SWAP_STAT_LAST_HOLD_NS] = HK__STAT("last_hold_ns", last_hold_ns),
    [HK_SWAP_STAT_MAX_HOLD_NS] = HK__STAT("max_hold_ns", max_hold_ns),
    [HK_SWAP_STAT_HOLDS_CUT] = HK__STAT("holds_cut", holds_cut),
    [HK_SWAP_STAT_DESTROYS_FAILED] = HK__STAT("destroys_failed", destroys_failed),
    [HK_SWAP_STAT_UNLOADS_FAILED] = HK__STAT("unloads_failed", unloads_failed),
    [HK_SWAP_STAT_LAST_DESTROY_STATUS] = {"last_destroy_status", 0},
};
#undef HK__STAT

hk_status_t hk_loader_swap_stats(hk_loader_t *loader, uint64_t *values, size_t count,
                                 size_t *known)
{
    if (!loader || (!values && count > 0))
        return HK_STATUS_NULL_POINTER;
    struct hk__swap *sw = atomic_load(&loader->swap);
    for (size_t i = 0; i < count; i++) {
        values[i] = 0;
        if (!sw || i >= HK_SWAP_STAT__COUNT)
            continue;
        if (i == HK_SWAP_STAT_LAST_DESTROY_STATUS)
            values[i] = (uint64_t)atomic_load(&sw->last_destroy_status);
        else
            values[i] = atomic_load((atomic_uint_fast64_t *)((char *)sw + hk__stats[i].at));
    }
    if (known)
        *known = HK_SWAP_STAT__COUNT;
    return HK_STATUS_OK;
}

const char *hk_swap_stat_name(hk_swap_stat_t stat)
{
    return (unsigned)stat < HK_SWAP_STAT__COUNT ? hk__stats[stat].name : "unknown";
}

hk_status_t hk_plugin_swap_state(hk_plugin_t *plugin, hk_swap_plugin_state_t *state)
{
    if (!plugin || !state)
        return HK_STATUS_NULL_POINTER;
    if (state->size < sizeof(uint32_t))
        return HK_STATUS_INVALID_VALUE;
    hk_swap_plugin_state_t s;
    memset(&s, 0, sizeof(s));
    s.module = HK_MODULE_OPEN;
    struct hk__swap *sw = atomic_load(&plugin->loader->swap);
    if (sw) {
        pthread_mutex_lock(&sw->list_lock);
        for (size_t i = 0; i < sw->nmodules; i++) {
            if (sw->modules[i]->plugin == plugin) {
                s.module = (hk_module_state_t)atomic_load(&sw->modules[i]->state);
                s.closes = atomic_load(&sw->modules[i]->closes);
                s.reopens = atomic_load(&sw->modules[i]->reopens);
            }
        }
        for (size_t i = 0; i < sw->nhandles; i++) {
            hk_mhandle_t *mh = sw->handles[i];
            hk__binding_t *cur = hk__mh_bound(mh);
            for (int k = 0; k < 2; k++) {
                if (mh->slot[k].plugin != plugin)
                    continue;
                s.inflight += atomic_load(&mh->slot[k].inflight);
                if (&mh->slot[k] == cur)
                    s.handles++;
                else
                    s.draining++;
            }
        }
        pthread_mutex_unlock(&sw->list_lock);
    }
    size_t n = state->size < sizeof(s) ? state->size : sizeof(s);
    s.size = (uint32_t)n;
    memcpy(state, &s, n);
    return HK_STATUS_OK;
}

const char *hk_swap_phase_name(hk_swap_phase_t phase)
{
    switch (phase) {
    case HK_SWAP_IDLE: return "idle";
    case HK_SWAP_PENDING: return "pending";
    case HK_SWAP_DRAINING: return "draining";
    case HK_SWAP_CLOSING: return "closing";
    }
    return "unknown";
}

const char *hk_module_state_name(hk_module_state_t state)
{
    switch (state) {
    case HK_MODULE_OPEN: return "open";
    case HK_MODULE_CLOSED: return "closed";
    case HK_MODULE_STILL_MAPPED: return "still-mapped";
    }
    return "unknown";
}
