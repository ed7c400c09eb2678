/* handlekit movable handles: their memory, their bindings, create and
 * destroy, and their state (see hk__swap.h for the call path's protocol;
 * the forwarding vtable and tables are in hk_loader_swapfwd.c). */
#include "hk__swap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_status_text.h"

/* ---- the pool ----
 * Movable handles live in chunks that are never given back while the
 * process runs: a destroyed handle's memory stays ours, so a call on it is
 * recognised as "not live" from our own records (the chunk list and the
 * magic word) without reading memory we did not hand out. Chunk k holds
 * 16 << k handles, so a lookup scans a handful of chunks at most. */

static pthread_mutex_t hk__pool_lock = PTHREAD_MUTEX_INITIALIZER;
hk_mhandle_t *hk__pool_base[HK__POOL_MAX]; /* written once, before publication */
size_t hk__pool_len[HK__POOL_MAX];
atomic_size_t hk__pool_chunks;
static hk_mhandle_t *hk__pool_free; /* under hk__pool_lock */

static hk_mhandle_t *hk__pool_get(void)
{
    hk_mhandle_t *mh = NULL;
    pthread_mutex_lock(&hk__pool_lock);
    if (!hk__pool_free) {
        size_t k = atomic_load_explicit(&hk__pool_chunks, memory_order_relaxed);
        size_t len = (size_t)16 << k;
        hk_mhandle_t *chunk = k < HK__POOL_MAX ? aligned_alloc(64, len * sizeof(*chunk)) : NULL;
        if (!chunk)
            goto out;
        memset(chunk, 0, len * sizeof(*chunk));
        for (size_t i = len; i-- > 0;) {
            atomic_init(&chunk[i].magic, HK__MH_DEAD);
            chunk[i].next_free = hk__pool_free;
            hk__pool_free = &chunk[i];
        }
        hk__pool_base[k] = chunk;
        hk__pool_len[k] = len;
        atomic_store_explicit(&hk__pool_chunks, k + 1, memory_order_release);
    }
    mh = hk__pool_free;
    hk__pool_free = mh->next_free;
    mh->next_free = NULL;
out:
    pthread_mutex_unlock(&hk__pool_lock);
    return mh;
}

static void hk__pool_put(hk_mhandle_t *mh)
{
    pthread_mutex_lock(&hk__pool_lock);
    mh->next_free = hk__pool_free;
    hk__pool_free = mh;
    pthread_mutex_unlock(&hk__pool_lock);
}

hk_status_t hk__mh_not_live(const void *h, const char *fn)
{
    hk__mh_thread_error("%s: %s", fn, h ? "not a live movable handle (destroyed or foreign)"
                                        : "handle is NULL");
    return HK_STATUS_INVALID_HANDLE;
}

/* ---- bindings ---- */

int hk__table_copy(const hk_vtable_t *core, const char *name, void *dst, size_t size)
{
    const void *t = NULL;
    memset(dst, 0, size);
    if (!core->get_table || core->get_table(name, &t) != HK_STATUS_OK || !t)
        return 0;
    size_t have;
    memcpy(&have, t, sizeof(have));
    if (have < sizeof(size_t))
        return 0;
    size_t n = have < size ? have : size;
    memcpy(dst, t, n);
    memcpy(dst, &n, sizeof(n));
    return 1;
}

void hk__binding_fill(hk__binding_t *b, hk_plugin_t *plugin, hk_handle_t *raw)
{
    b->plugin = plugin;
    b->raw = raw;
    b->core = plugin->vtable;
    hk__table_copy(&b->core, HK_TABLE_BLAS1_V1, &b->blas1, sizeof(b->blas1));
    hk__table_copy(&b->core, HK_TABLE_MEMORY_V1, &b->memory, sizeof(b->memory));
    hk__table_copy(&b->core, HK_TABLE_KERNELS_V1, &b->kernels, sizeof(b->kernels));
    hk__table_copy(&b->core, HK_TABLE_CUDA_V1, &b->cuda, sizeof(b->cuda));
    b->ext = plugin->swap_ext; /* made by hk__ext_of before the binding is */
}

/* ---- create and destroy ---- */

static hk_status_t hk__mh_list_add(struct hk__swap *sw, hk_mhandle_t *mh)
{
    hk_status_t st = HK_STATUS_OK;
    pthread_mutex_lock(&sw->list_lock);
    if (sw->nhandles == sw->caphandles) {
        size_t cap = sw->caphandles ? 2 * sw->caphandles : 16;
        hk_mhandle_t **grown = realloc(sw->handles, cap * sizeof(*grown));
        if (!grown) {
            st = HK_STATUS_OUT_OF_MEMORY;
            goto out;
        }
        sw->handles = grown;
        sw->caphandles = cap;
    }
    sw->handles[sw->nhandles++] = mh;
out:
    pthread_mutex_unlock(&sw->list_lock);
    return st;
}

/* Creates the first plugin handle and the movable handle around it. Caller
 * holds sw->lock. */
static hk_status_t hk__mh_make(hk_loader_t *loader, struct hk__swap *sw, hk_plugin_t *plugin,
                               const hk_create_info_t *ci, hk_mhandle_t **out)
{
    char why[512];
    hk_handle_t *raw = NULL;
    hk_mhandle_t *mh = NULL;
    const char *pname = hk_plugin_name(plugin);

    hk_status_t st = hk__swap_ensure_open(loader, plugin, why, sizeof(why));
    if (st != HK_STATUS_OK)
        return hk__swap_fail(loader, st, "hk_mhandle_create: %s: %s", pname, why);
    if (!hk__swap_module(sw, plugin) || !hk__ext_of(sw, plugin))
        return hk__swap_fail(loader, HK_STATUS_OUT_OF_MEMORY, "hk_mhandle_create: out of memory");
    const hk_vtable_t *vt = &plugin->vtable;
    st = vt->handle_create(ci, &raw);
    if (st != HK_STATUS_OK)
        return hk__swap_fail(loader, st, "hk_mhandle_create: %s %s: handle_create: %s: %s", pname,
                             hk_plugin_version(plugin), hk_status_name(st), vt->last_error(NULL));
    mh = hk__pool_get();
    if (!mh) {
        vt->handle_destroy(raw);
        return hk__swap_fail(loader, HK_STATUS_OUT_OF_MEMORY, "hk_mhandle_create: out of memory");
    }
    pthread_mutex_init(&mh->lock, NULL);
    mh->loader = loader;
    mh->info = *ci;
    memset(&mh->bound, 0, sizeof(mh->bound));
    mh->bound.size = sizeof(mh->bound);
    if (!vt->handle_info || vt->handle_info(raw, &mh->bound) != HK_STATUS_OK)
        mh->bound.size = 0; /* unknown: the swap then trusts the create info */
    mh->bound.plugin_name = NULL; /* the plugin's storage; gone if its module closes */
    mh->stream = NULL;
    mh->mode = HK_POINTER_MODE_HOST;
    mh->settings_gen = 0;
    mh->msg[0] = '\0';
    mh->own_msg[0] = '\0';
    atomic_store(&mh->own_err, 0);
    atomic_store(&mh->generation, 0);
    atomic_store(&mh->slot[0].inflight, 0);
    atomic_store(&mh->slot[1].inflight, 0);
    mh->slot[1].raw = NULL;
    mh->slot[1].plugin = NULL;
    hk__binding_fill(&mh->slot[0], plugin, raw);
    atomic_store_explicit(&mh->cur, &mh->slot[0], memory_order_release);
    atomic_store_explicit(&mh->magic, HK__MH_LIVE, memory_order_release);
    if (hk__mh_list_add(sw, mh) != HK_STATUS_OK) {
        atomic_store(&mh->magic, HK__MH_DEAD);
        pthread_mutex_destroy(&mh->lock);
        hk__pool_put(mh);
        vt->handle_destroy(raw);
        return hk__swap_fail(loader, HK_STATUS_OUT_OF_MEMORY, "hk_mhandle_create: out of memory");
    }
    *out = mh;
    return HK_STATUS_OK;
}

hk_status_t hk_mhandle_create_on(hk_plugin_t *plugin, const hk_create_info_t *info,
                                 hk_mhandle_t **out)
{
    if (!out || !plugin) {
        hk__mh_thread_error("hk_mhandle_create: %s is NULL", !out ? "out" : "plugin");
        if (out)
            *out = NULL;
        return HK_STATUS_NULL_POINTER;
    }
    *out = NULL;
    hk_loader_t *loader = plugin->loader;
    hk_create_info_t ci = {sizeof(ci), HK_DEVICE_CURRENT, 0};
    if (info) {
        if (info->size < offsetof(hk_create_info_t, flags) + sizeof(info->flags))
            return hk__swap_fail(loader, HK_STATUS_INVALID_VALUE,
                                 "hk_mhandle_create: info->size %u is smaller than version 1 (%zu)",
                                 (unsigned)info->size, sizeof(ci));
        ci.device = info->device;
        ci.flags = info->flags;
    }
    struct hk__swap *sw = hk__swap_get(loader);
    if (!sw)
        return hk__swap_fail(loader, HK_STATUS_OUT_OF_MEMORY, "hk_mhandle_create: out of memory");
    pthread_mutex_lock(&sw->lock);
    hk_status_t st = hk__mh_make(loader, sw, plugin, &ci, out);
    pthread_mutex_unlock(&sw->lock);
    return st;
}

hk_status_t hk_mhandle_create(hk_loader_t *loader, const char *request,
                              const hk_create_info_t *info, hk_mhandle_t **out)
{
    if (out)
        *out = NULL;
    if (!loader || !request || !out) {
        hk__mh_thread_error("hk_mhandle_create: %s is NULL",
                            !loader ? "loader" : !request ? "request" : "out");
        return HK_STATUS_NULL_POINTER;
    }
    hk_plugin_t *plugin = NULL;
    hk_status_t st = hk_loader_select(loader, request, &plugin);
    if (st != HK_STATUS_OK) {
        hk__mh_thread_error("hk_mhandle_create: %s", hk_loader_last_error(loader));
        return st;
    }
    return hk_mhandle_create_on(plugin, info, out);
}

static void hk__mh_list_remove(struct hk__swap *sw, hk_mhandle_t *mh)
{
    for (size_t i = 0; i < sw->nhandles; i++) {
        if (sw->handles[i] == mh) {
            memmove(&sw->handles[i], &sw->handles[i + 1],
                    (sw->nhandles - i - 1) * sizeof(*sw->handles));
            sw->nhandles--;
            return;
        }
    }
}

hk_status_t hk_mhandle_destroy(hk_mhandle_t *handle)
{
    hk_mhandle_t *mh = hk__mh_of(handle);
    if (!mh)
        return hk__mh_not_live(handle, "hk_mhandle_destroy");
    hk_loader_t *loader = mh->loader;
    struct hk__swap *sw = atomic_load(&loader->swap);
    pthread_mutex_lock(&sw->lock);
    if (atomic_load(&mh->magic) != HK__MH_LIVE) { /* another destroy came first */
        pthread_mutex_unlock(&sw->lock);
        return hk__mh_not_live(handle, "hk_mhandle_destroy");
    }
    unsigned busy = atomic_load(&mh->slot[0].inflight) + atomic_load(&mh->slot[1].inflight);
    if (busy) {
        pthread_mutex_unlock(&sw->lock);
        hk__mh_thread_error("hk_mhandle_destroy: %u call(s) in flight on the handle", busy);
        return HK_STATUS_BUSY;
    }
    hk__binding_t *b = atomic_load(&mh->cur);
    atomic_store(&mh->magic, HK__MH_DEAD);
    pthread_mutex_lock(&sw->list_lock);
    hk__mh_list_remove(sw, mh);
    pthread_mutex_unlock(&sw->list_lock);
    /* The last movable handle on its implementation: the libraries loaded
     * through movable handles go from there with it. */
    char why[512];
    unsigned unloads = hk__kern_drop(sw, b, why, sizeof(why));
    hk_status_t st = b->core.handle_destroy(b->raw);
    if (st != HK_STATUS_OK)
        hk__mh_thread_error("hk_mhandle_destroy: %s handle_destroy: %s",
                            hk_plugin_name(b->plugin), hk_status_name(st));
    else if (unloads)
        hk__mh_thread_error("hk_mhandle_destroy: %u unload(s) failed; the last: %s", unloads,
                            why);
    b->raw = NULL;
    b->plugin = NULL;
    pthread_mutex_destroy(&mh->lock);
    hk__pool_put(mh);
    pthread_mutex_unlock(&sw->lock);
    return st;
}

hk_handle_t *hk_mhandle_handle(hk_mhandle_t *mh)
{
    return (hk_handle_t *)(void *)mh;
}

hk_status_t hk_mhandle_state(hk_mhandle_t *handle, hk_mhandle_state_t *state)
{
    hk_mhandle_t *mh = hk__mh_of(handle);
    if (!mh)
        return hk__mh_not_live(handle, "hk_mhandle_state");
    if (!state)
        return HK_STATUS_NULL_POINTER;
    if (state->size < sizeof(uint32_t))
        return HK_STATUS_INVALID_VALUE;
    hk_mhandle_state_t s;
    memset(&s, 0, sizeof(s));
    struct hk__swap *sw = atomic_load(&mh->loader->swap);
    pthread_mutex_lock(&sw->list_lock); /* no wait: a held handle reads its binding */
    s.plugin = hk__mh_bound(mh)->plugin;
    pthread_mutex_unlock(&sw->list_lock);
    s.generation = atomic_load(&mh->generation);
    s.inflight = atomic_load(&mh->slot[0].inflight) + atomic_load(&mh->slot[1].inflight);
    size_t n = state->size < sizeof(s) ? state->size : sizeof(s);
    s.size = (uint32_t)n;
    memcpy(state, &s, n);
    return HK_STATUS_OK;
}
