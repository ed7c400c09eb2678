/* handlekit movable handles: their memory, create and destroy, and the
 * forwarding vtable and tables that send every call to the implementation a
 * handle is bound to (see hk__swap.h for the call path's protocol). */
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

#define HK__POOL_MAX 24

static pthread_mutex_t hk__pool_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_mhandle_t *hk__pool_base[HK__POOL_MAX]; /* written once, before publication */
static size_t hk__pool_len[HK__POOL_MAX];
static atomic_size_t hk__pool_chunks;
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

/* The live movable handle h names, or NULL: h must point at a handle of a
 * chunk (never read otherwise) whose magic says live. */
static inline hk_mhandle_t *hk__mh_of(const void *h)
{
    uintptr_t p = (uintptr_t)h;
    size_t n = atomic_load_explicit(&hk__pool_chunks, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        uintptr_t base = (uintptr_t)hk__pool_base[i];
        if (p < base || p - base >= hk__pool_len[i] * sizeof(hk_mhandle_t))
            continue;
        if ((p - base) % sizeof(hk_mhandle_t) != 0)
            return NULL;
        hk_mhandle_t *mh = (hk_mhandle_t *)(uintptr_t)h;
        return atomic_load_explicit(&mh->magic, memory_order_relaxed) == HK__MH_LIVE ? mh : NULL;
    }
    return NULL;
}

static hk_status_t hk__mh_not_live(const void *h, const char *fn)
{
    hk__mh_thread_error("%s: %s", fn, h ? "not a live movable handle (destroyed or foreign)"
                                        : "handle is NULL");
    return HK_STATUS_INVALID_HANDLE;
}

static hk_status_t hk__mh_missing(const hk__binding_t *b, const char *fn)
{
    hk__mh_thread_error("%s: %s %s does not offer this slot", fn, hk_plugin_name(b->plugin),
                        hk_plugin_version(b->plugin));
    return HK_STATUS_NOT_SUPPORTED;
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
    if (!hk__swap_module(sw, plugin))
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
    hk_status_t st = b->core.handle_destroy(b->raw);
    if (st != HK_STATUS_OK)
        hk__mh_thread_error("hk_mhandle_destroy: %s handle_destroy: %s",
                            hk_plugin_name(b->plugin), hk_status_name(st));
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

/* ---- forwarding ---- */

#define HK__FWD(TBL, NAME, PARAMS, ARGS)                                                       \
    static hk_status_t hk__fw_##NAME PARAMS                                                    \
    {                                                                                          \
        hk_mhandle_t *mh = hk__mh_of(h);                                                       \
        if (!mh)                                                                               \
            return hk__mh_not_live(h, #NAME);                                                  \
        hk__binding_t *b = hk__mh_enter(mh);                                                   \
        hk_status_t st = b->TBL.NAME ? b->TBL.NAME ARGS : hk__mh_missing(b, #NAME);            \
        hk__mh_leave(b);                                                                       \
        return st;                                                                             \
    }

/* Tables' slots take the handle first and the rest as they came. */
#define HK__ARGS(...) __VA_ARGS__
#define HK__FWD_BLAS1(name, minor, params, args) \
    HK__FWD(blas1, name, params, (b->raw, HK__ARGS args))
#define HK__FWD_MEMORY(name, minor, params, args) \
    HK__FWD(memory, name, params, (b->raw, HK__ARGS args))
HK_BLAS1_V1_SLOTS(HK__FWD_BLAS1)
HK_MEMORY_V1_SLOTS(HK__FWD_MEMORY)

HK__FWD(core, get_stream, (hk_handle_t *h, void **stream), (b->raw, stream))
HK__FWD(core, get_pointer_mode, (hk_handle_t *h, hk_pointer_mode_t *mode), (b->raw, mode))
HK__FWD(core, handle_info, (hk_handle_t *h, hk_handle_info_t *info), (b->raw, info))
HK__FWD(core, synchronize, (hk_handle_t *h), (b->raw))

/* Setters run under the handle's lock, which a swap holds while it switches
 * the handle: a setting is either given to the old handle before the swap
 * reads it, or to the new one. */
static hk_status_t hk__fw_set_stream(hk_handle_t *h, void *stream)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_not_live(h, "set_stream");
    hk__binding_t *b = hk__mh_enter_locked(mh);
    hk_status_t st = b->core.set_stream ? b->core.set_stream(b->raw, stream)
                                        : hk__mh_missing(b, "set_stream");
    hk__mh_leave(b);
    if (st == HK_STATUS_OK) {
        mh->stream = stream;
        mh->settings_gen++;
    }
    pthread_mutex_unlock(&mh->lock);
    return st;
}

static hk_status_t hk__fw_set_pointer_mode(hk_handle_t *h, hk_pointer_mode_t mode)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_not_live(h, "set_pointer_mode");
    hk__binding_t *b = hk__mh_enter_locked(mh);
    hk_status_t st = b->core.set_pointer_mode ? b->core.set_pointer_mode(b->raw, mode)
                                              : hk__mh_missing(b, "set_pointer_mode");
    hk__mh_leave(b);
    if (st == HK_STATUS_OK) {
        mh->mode = mode;
        mh->settings_gen++;
    }
    pthread_mutex_unlock(&mh->lock);
    return st;
}

static const char *hk__fw_last_error(const hk_handle_t *h)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_thread_msg();
    hk__binding_t *b = hk__mh_enter_locked(mh);
    snprintf(mh->msg, sizeof(mh->msg), "%s", b->core.last_error(b->raw));
    hk__mh_leave(b);
    pthread_mutex_unlock(&mh->lock);
    return mh->msg;
}

hk_status_t hk_mhandle_last_error_copy(hk_mhandle_t *handle, char *buf, size_t len)
{
    if (!buf || len == 0)
        return HK_STATUS_NULL_POINTER;
    hk_mhandle_t *mh = hk__mh_of(handle);
    if (!mh) {
        snprintf(buf, len, "%s", hk__mh_thread_msg());
        return handle ? HK_STATUS_INVALID_HANDLE : HK_STATUS_OK;
    }
    /* under mh->lock: the plugin's text is only stable between calls */
    hk__binding_t *b = hk__mh_enter_locked(mh);
    snprintf(buf, len, "%s", b->core.last_error(b->raw));
    hk__mh_leave(b);
    pthread_mutex_unlock(&mh->lock);
    return HK_STATUS_OK;
}

/* The vtable's copy-out form (ABI 1.2 rules, docs/abi.md "Errors"). */
static hk_status_t hk__fw_last_error_copy(const hk_handle_t *h, char *buf, size_t len,
                                          size_t *needed)
{
    char text[1024];
    if (needed)
        *needed = 0;
    if (len > 0 && !buf)
        return HK_STATUS_NULL_POINTER;
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh && h) {
        if (len > 0)
            buf[0] = '\0';
        return HK_STATUS_INVALID_HANDLE;
    }
    if (!mh) {
        snprintf(text, sizeof(text), "%s", hk__mh_thread_msg());
    } else {
        /* under mh->lock: the plugin's text is only stable between calls */
    hk__binding_t *b = hk__mh_enter_locked(mh);
        snprintf(text, sizeof(text), "%s", b->core.last_error(b->raw));
        hk__mh_leave(b);
        pthread_mutex_unlock(&mh->lock);
    }
    if (len > 0)
        snprintf(buf, len, "%s", text);
    if (needed)
        *needed = strlen(text) + 1;
    return HK_STATUS_OK;
}

static hk_status_t hk__fw_create(const hk_create_info_t *info, hk_handle_t **out)
{
    (void)info;
    if (!out)
        return HK_STATUS_NULL_POINTER;
    *out = NULL;
    hk__mh_thread_error("handle_create: movable handles are made with hk_mhandle_create");
    return HK_STATUS_NOT_SUPPORTED;
}

static hk_status_t hk__fw_destroy(hk_handle_t *h)
{
    return hk_mhandle_destroy((hk_mhandle_t *)(void *)h);
}

#define HK__FW_SLOT(name, minor, params, args) .name = hk__fw_##name,
static const hk_blas1_v1_t hk__fw_blas1 = {
    .size = sizeof(hk_blas1_v1_t),
    HK_BLAS1_V1_SLOTS(HK__FW_SLOT)
};

static const hk_memory_v1_t hk__fw_memory = {
    .size = sizeof(hk_memory_v1_t),
    HK_MEMORY_V1_SLOTS(HK__FW_SLOT)
};

static const struct {
    const char *name;
    const void *table;
    size_t size;
} hk__fw_tables[] = {
    {HK_TABLE_BLAS1_V1, &hk__fw_blas1, sizeof(hk__fw_blas1)},
    {HK_TABLE_MEMORY_V1, &hk__fw_memory, sizeof(hk__fw_memory)},
};
#define HK__FW_NTABLES (sizeof(hk__fw_tables) / sizeof(hk__fw_tables[0]))

static hk_status_t hk__fw_get_table(const char *name, const void **table)
{
    if (!name || !table)
        return HK_STATUS_NULL_POINTER;
    for (size_t i = 0; i < HK__FW_NTABLES; i++) {
        if (strcmp(hk__fw_tables[i].name, name) == 0) {
            *table = hk__fw_tables[i].table;
            return HK_STATUS_OK;
        }
    }
    *table = NULL;
    return HK_STATUS_NOT_FOUND;
}

static hk_status_t hk__fw_enum_tables(size_t index, const char **name)
{
    if (!name)
        return HK_STATUS_NULL_POINTER;
    if (index >= HK__FW_NTABLES)
        return HK_STATUS_NOT_FOUND;
    *name = hk__fw_tables[index].name;
    return HK_STATUS_OK;
}

static const hk_vtable_t hk__fw_vtable = {
    .size = sizeof(hk_vtable_t),
    .handle_create = hk__fw_create,
    .handle_destroy = hk__fw_destroy,
    .set_stream = hk__fw_set_stream,
    .get_stream = hk__fw_get_stream,
    .set_pointer_mode = hk__fw_set_pointer_mode,
    .get_pointer_mode = hk__fw_get_pointer_mode,
    .last_error = hk__fw_last_error,
    .get_table = hk__fw_get_table,
    .enum_tables = hk__fw_enum_tables,
    .handle_info = hk__fw_handle_info,
    .synchronize = hk__fw_synchronize,
    .last_error_copy = hk__fw_last_error_copy,
};

const hk_vtable_t *hk_mhandle_vtable(void)
{
    return &hk__fw_vtable;
}

hk_status_t hk_mhandle_get_table(const char *name, void *table, size_t size)
{
    if (!name || !table)
        return HK_STATUS_NULL_POINTER;
    if (size < sizeof(size_t))
        return HK_STATUS_INVALID_VALUE;
    for (size_t i = 0; i < HK__FW_NTABLES; i++) {
        if (strcmp(hk__fw_tables[i].name, name) == 0) {
            size_t n = size < hk__fw_tables[i].size ? size : hk__fw_tables[i].size;
            memset(table, 0, size);
            memcpy(table, hk__fw_tables[i].table, n);
            memcpy(table, &n, sizeof(n));
            return HK_STATUS_OK;
        }
    }
    return HK_STATUS_NOT_FOUND;
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
