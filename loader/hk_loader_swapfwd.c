/* handlekit movable handles: the forwarding vtable and tables that send
 * every call to the implementation a handle is bound to (the call path's
 * protocol is in hk__swap.h), each table made from its header's slot list,
 * and the handle's last error: the loader's own refusal or the plugin's. */
#include "hk__swap.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hk_status_text.h"

/* ---- the handle's last error ---- */

/* The loader refuses a call on a live handle: the line becomes the
 * handle's last error (and this thread's). Caller holds mh->lock. */
static void hk__mh_own(hk_mhandle_t *mh, const char *fmt, va_list ap)
{
    vsnprintf(mh->own_msg, sizeof(mh->own_msg), fmt, ap);
    atomic_store(&mh->own_err, 1);
    hk__mh_thread_error("%s", mh->own_msg);
}

/* hk__mh_own under mh->lock. Returns st. */
static hk_status_t hk__mh_refuse(hk_mhandle_t *mh, hk_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static hk_status_t hk__mh_refuse(hk_mhandle_t *mh, hk_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&mh->lock);
    hk__mh_own(mh, fmt, ap);
    pthread_mutex_unlock(&mh->lock);
    va_end(ap);
    return st;
}

/* The handle's last error: the loader's refusal, or the plugin's line.
 * Caller holds mh->lock and entered b. */
static const char *hk__mh_text(hk_mhandle_t *mh, const hk__binding_t *b)
{
    return atomic_load(&mh->own_err) ? mh->own_msg : b->core.last_error(b->raw);
}

/* A call the plugin refused: its last error is the handle's again. */
static inline void hk__mh_plugin_failed(hk_mhandle_t *mh)
{
    if (atomic_load_explicit(&mh->own_err, memory_order_relaxed))
        atomic_store_explicit(&mh->own_err, 0, memory_order_relaxed);
}

static hk_status_t hk__mh_missing(hk_mhandle_t *mh, const hk__binding_t *b, const char *fn)
{
    return hk__mh_refuse(mh, HK_STATUS_NOT_SUPPORTED, "%s: %s %s does not offer this slot", fn,
                         hk_plugin_name(b->plugin), hk_plugin_version(b->plugin));
}

/* The same with mh->lock held (the setters). */
static void hk__mh_missing_locked(hk_mhandle_t *mh, const hk__binding_t *b, const char *fn)
{
    snprintf(mh->own_msg, sizeof(mh->own_msg), "%s: %s %s does not offer this slot", fn,
             hk_plugin_name(b->plugin), hk_plugin_version(b->plugin));
    atomic_store(&mh->own_err, 1);
    hk__mh_thread_error("%s", mh->own_msg);
}

/* ---- forwarding ---- */

/* FN forwards slot NAME of table TBL. */
#define HK__FWD(FN, TBL, NAME, PARAMS, ARGS)                                                   \
    static hk_status_t FN PARAMS                                                               \
    {                                                                                          \
        hk_mhandle_t *mh = hk__mh_of(h);                                                       \
        if (!mh)                                                                               \
            return hk__mh_not_live(h, #NAME);                                                  \
        hk_mhandle_t *was;                                                                     \
        hk__binding_t *b = hk__mh_enter(mh, &was);                                             \
        hk_status_t st;                                                                        \
        if (__builtin_expect(b->TBL.NAME != NULL, 1)) {                                        \
            st = b->TBL.NAME ARGS;                                                             \
            if (__builtin_expect(st != HK_STATUS_OK, 0))                                       \
                hk__mh_plugin_failed(mh);                                                      \
        } else {                                                                               \
            st = hk__mh_missing(mh, b, #NAME);                                                 \
        }                                                                                      \
        hk__mh_leave(b, was);                                                                  \
        return st;                                                                             \
    }

/* Tables' slots take the handle first and the rest as they came. */
#define HK__ARGS(...) __VA_ARGS__
#define HK__FWD_BLAS1(name, minor, params, args) \
    HK__FWD(hk__fw_##name, blas1, name, params, (b->raw, HK__ARGS args))
#define HK__FWD_MEMORY(name, minor, params, args) \
    HK__FWD(hk__fw_##name, memory, name, params, (b->raw, HK__ARGS args))
#define HK__FWD_CUDA(name, minor, params, args) \
    HK__FWD(hk__fwc_##name, cuda, name, params, (b->raw, HK__ARGS args))
HK_BLAS1_V1_SLOTS(HK__FWD_BLAS1)
HK_MEMORY_V1_SLOTS(HK__FWD_MEMORY)
HK_CUDA_V1_SLOTS(HK__FWD_CUDA)

/* The core vtable's slots that a movable handle forwards, written once:
 * X(name, params, args) forwards as it is; S(name, field, type) is a
 * setting, remembered in the movable handle's field and given to the next
 * implementation at a swap (hk__apply in hk_loader_swap.c). The forwarders,
 * the forwarding vtable and what a swap's new implementation must offer
 * (hk__fwd_lacking) are all made from this list. */
#define HK__CORE_FWD_SLOTS(X, S)                                                         \
    S(set_stream, stream, void *)                                                        \
    X(get_stream, (hk_handle_t *h, void **stream), (b->raw, stream))                     \
    S(set_pointer_mode, mode, hk_pointer_mode_t)                                         \
    X(get_pointer_mode, (hk_handle_t *h, hk_pointer_mode_t *mode), (b->raw, mode))       \
    X(handle_info, (hk_handle_t *h, hk_handle_info_t *info), (b->raw, info))             \
    X(synchronize, (hk_handle_t *h), (b->raw))

/* Setters run under the handle's lock, which a swap holds while it switches
 * the handle: a setting is either given to the old handle before the swap
 * reads it, or to the new one. */
#define HK__FWD_SETTING(NAME, FIELD, TYPE)                                                   \
    static hk_status_t hk__fw_##NAME(hk_handle_t *h, TYPE value)                            \
    {                                                                                        \
        hk_mhandle_t *mh = hk__mh_of(h);                                                     \
        if (!mh)                                                                             \
            return hk__mh_not_live(h, #NAME);                                                \
        hk_mhandle_t *was;                                                                   \
        hk__binding_t *b = hk__mh_enter_locked(mh, &was);                                    \
        hk_status_t st = b->core.NAME ? b->core.NAME(b->raw, value) : HK_STATUS_NOT_SUPPORTED; \
        if (st == HK_STATUS_NOT_SUPPORTED && !b->core.NAME)                                  \
            hk__mh_missing_locked(mh, b, #NAME);                                             \
        else if (st != HK_STATUS_OK)                                                         \
            hk__mh_plugin_failed(mh);                                                        \
        hk__mh_leave(b, was);                                                                \
        if (st == HK_STATUS_OK) {                                                            \
            mh->FIELD = value;                                                               \
            mh->settings_gen++;                                                              \
        }                                                                                    \
        pthread_mutex_unlock(&mh->lock);                                                     \
        return st;                                                                           \
    }
#define HK__FWD_CORE(NAME, PARAMS, ARGS) HK__FWD(hk__fw_##NAME, core, NAME, PARAMS, ARGS)
HK__CORE_FWD_SLOTS(HK__FWD_CORE, HK__FWD_SETTING)
#undef HK__FWD_CORE
#undef HK__FWD_SETTING

static const char *hk__fw_last_error(const hk_handle_t *h)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_thread_msg();
    hk_mhandle_t *was;
    hk__binding_t *b = hk__mh_enter_locked(mh, &was);
    snprintf(mh->msg, sizeof(mh->msg), "%s", hk__mh_text(mh, b));
    hk__mh_leave(b, was);
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
    hk_mhandle_t *was;
    hk__binding_t *b = hk__mh_enter_locked(mh, &was);
    snprintf(buf, len, "%s", hk__mh_text(mh, b));
    hk__mh_leave(b, was);
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
        hk_mhandle_t *was;
        hk__binding_t *b = hk__mh_enter_locked(mh, &was);
        snprintf(text, sizeof(text), "%s", hk__mh_text(mh, b));
        hk__mh_leave(b, was);
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

/* ---- hk.kernels/1: the loader's libraries and kernels ----
 * A program gets the loader's objects (hk_loader_swapkern.c), which follow a
 * swap; each slot gives the plugin the implementation's own. A launch takes
 * no lock: the same in-flight count as every call, and a look-up. */

/* The end of a slot that made or unmade a loader object: the loader's
 * refusal (why set) or the plugin's (its last error). */
static hk_status_t hk__fwk_result(hk_mhandle_t *mh, hk_status_t st, const char *why)
{
    if (st == HK_STATUS_OK)
        return st;
    if (why[0])
        return hk__mh_refuse(mh, st, "%s", why);
    hk__mh_plugin_failed(mh);
    return st;
}

/* Why a kernel's slot did not reach the plugin. */
static hk_status_t hk__fwk_refuse(hk_mhandle_t *mh, const hk__binding_t *b, int has_slot,
                                  const void *kernel, const char *slot)
{
    if (!has_slot)
        return hk__mh_missing(mh, b, slot);
    if (!kernel)
        return hk__mh_refuse(mh, HK_STATUS_NULL_POINTER, "%s: kernel is NULL", slot);
    char why[512];
    hk__kern_why(mh->loader, b->plugin, kernel, slot, why, sizeof(why));
    return hk__mh_refuse(mh, HK_STATUS_INVALID_VALUE, "%s", why);
}

static hk_status_t hk__fwk_load(hk_handle_t *h, const void *image, size_t size,
                                hk_library_t **out)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_not_live(h, "load");
    struct hk__swap *sw = atomic_load(&mh->loader->swap);
    char why[512] = "";
    pthread_mutex_lock(&sw->lock); /* libraries come and go between swaps */
    hk_mhandle_t *was;
    hk__binding_t *b = hk__mh_enter(mh, &was);
    int has = b->kernels.load != NULL;
    hk_status_t st = has ? hk__kern_load(sw, mh->loader, b, image, size, out, why, sizeof(why))
                         : hk__mh_missing(mh, b, "load");
    hk__mh_leave(b, was);
    pthread_mutex_unlock(&sw->lock);
    if (!has && out)
        *out = NULL;
    return has ? hk__fwk_result(mh, st, why) : st;
}

static hk_status_t hk__fwk_unload(hk_handle_t *h, hk_library_t *lib)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_not_live(h, "unload");
    struct hk__swap *sw = atomic_load(&mh->loader->swap);
    char why[512] = "";
    pthread_mutex_lock(&sw->lock);
    hk_mhandle_t *was;
    hk__binding_t *b = hk__mh_enter(mh, &was);
    int has = b->kernels.unload != NULL;
    hk_status_t st = has ? hk__kern_unload(sw, mh->loader, b, lib, why, sizeof(why))
                         : hk__mh_missing(mh, b, "unload");
    hk__mh_leave(b, was);
    pthread_mutex_unlock(&sw->lock);
    return has ? hk__fwk_result(mh, st, why) : st;
}

static hk_status_t hk__fwk_get_kernel(hk_handle_t *h, hk_library_t *lib, const char *name,
                                      hk_kernel_t **out)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_not_live(h, "get_kernel");
    struct hk__swap *sw = atomic_load(&mh->loader->swap);
    char why[512] = "";
    hk_status_t st;
    int retry = 0;
    do { /* again when a swap moved the handle while it waited */
        hk_mhandle_t *was;
        hk__binding_t *b = hk__mh_enter(mh, &was);
        if (!b->kernels.get_kernel) {
            st = hk__mh_missing(mh, b, "get_kernel");
            hk__mh_leave(b, was);
            if (out)
                *out = NULL;
            return st;
        }
        st = hk__kern_get(sw, mh, b, lib, name, out, why, sizeof(why), &retry);
        hk__mh_leave(b, was);
    } while (retry);
    return hk__fwk_result(mh, st, why);
}

static hk_status_t hk__fwk_get_attributes(hk_handle_t *h, hk_kernel_t *kernel,
                                          hk_kernel_attributes_t *attrs)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_not_live(h, "get_attributes");
    hk_mhandle_t *was;
    hk__binding_t *b = hk__mh_enter(mh, &was);
    hk_kernel_t *k = hk__kern_resolve(mh->loader, b->plugin, kernel);
    hk_status_t st;
    if (k && b->kernels.get_attributes) {
        st = b->kernels.get_attributes(b->raw, k, attrs);
        if (st != HK_STATUS_OK)
            hk__mh_plugin_failed(mh);
    } else {
        st = hk__fwk_refuse(mh, b, b->kernels.get_attributes != NULL, kernel, "get_attributes");
    }
    hk__mh_leave(b, was);
    return st;
}

static hk_status_t hk__fwk_launch(hk_handle_t *h, hk_kernel_t *kernel, uint32_t grid_x,
                                  uint32_t grid_y, uint32_t grid_z, uint32_t block_x,
                                  uint32_t block_y, uint32_t block_z, uint32_t shared_bytes,
                                  void **args)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_not_live(h, "launch");
    hk_mhandle_t *was;
    hk__binding_t *b = hk__mh_enter(mh, &was);
    hk_kernel_t *k = hk__kern_resolve(mh->loader, b->plugin, kernel);
    hk_status_t st;
    if (__builtin_expect(k && b->kernels.launch, 1)) {
        st = b->kernels.launch(b->raw, k, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                               shared_bytes, args);
        if (__builtin_expect(st != HK_STATUS_OK, 0))
            hk__mh_plugin_failed(mh);
    } else {
        st = hk__fwk_refuse(mh, b, b->kernels.launch != NULL, kernel, "launch");
    }
    hk__mh_leave(b, was);
    return st;
}

static hk_status_t hk__fwk_get_function(hk_handle_t *h, hk_kernel_t *kernel, void **function)
{
    hk_mhandle_t *mh = hk__mh_of(h);
    if (!mh)
        return hk__mh_not_live(h, "get_function");
    hk_mhandle_t *was;
    hk__binding_t *b = hk__mh_enter(mh, &was);
    hk_kernel_t *k = hk__kern_resolve(mh->loader, b->plugin, kernel);
    hk_status_t st;
    if (k && b->kernels.get_function) {
        st = b->kernels.get_function(b->raw, k, function);
        if (st != HK_STATUS_OK)
            hk__mh_plugin_failed(mh);
    } else {
        st = hk__fwk_refuse(mh, b, b->kernels.get_function != NULL, kernel, "get_function");
    }
    hk__mh_leave(b, was);
    return st;
}

/* ---- the tables, each made from its header's slot list ---- */

#define HK__FW_SLOT(name, minor, params, args) .name = hk__fw_##name,
static const hk_blas1_v1_t hk__fw_blas1 = {
    .size = sizeof(hk_blas1_v1_t),
    HK_BLAS1_V1_SLOTS(HK__FW_SLOT)
};

static const hk_memory_v1_t hk__fw_memory = {
    .size = sizeof(hk_memory_v1_t),
    HK_MEMORY_V1_SLOTS(HK__FW_SLOT)
};

#define HK__FWK_SLOT(name, minor, params, args) .name = hk__fwk_##name,
static const hk_kernels_v1_t hk__fw_kernels = {
    .size = sizeof(hk_kernels_v1_t),
    HK_KERNELS_V1_SLOTS(HK__FWK_SLOT)
};

#define HK__FWC_SLOT(name, minor, params, args) .name = hk__fwc_##name,
static const hk_cuda_v1_t hk__fw_cuda = {
    .size = sizeof(hk_cuda_v1_t),
    HK_CUDA_V1_SLOTS(HK__FWC_SLOT)
};

static const struct {
    const char *name;
    const void *table;
    size_t size;
} hk__fw_tables[] = {
    {HK_TABLE_BLAS1_V1, &hk__fw_blas1, sizeof(hk__fw_blas1)},
    {HK_TABLE_MEMORY_V1, &hk__fw_memory, sizeof(hk__fw_memory)},
    {HK_TABLE_KERNELS_V1, &hk__fw_kernels, sizeof(hk__fw_kernels)},
    {HK_TABLE_CUDA_V1, &hk__fw_cuda, sizeof(hk__fw_cuda)},
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
    .last_error = hk__fw_last_error,
    .get_table = hk__fw_get_table,
    .enum_tables = hk__fw_enum_tables,
    .last_error_copy = hk__fw_last_error_copy,
#define HK__INIT(NAME, ...) .NAME = hk__fw_##NAME,
    HK__CORE_FWD_SLOTS(HK__INIT, HK__INIT)
#undef HK__INIT
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


/* ---- what a swap's new implementation must offer of the forwarded ---- */

const char *hk__fwd_lacking(const hk__binding_t *old, const hk__binding_t *neu, char *what,
                            size_t n)
{
    /* A table the old one offers and the new one does not, named as such;
     * then each slot, as the tables' headers list them. */
#define HK__TABLE(TBL, NAME)                                    \
    if (old->TBL.size && !neu->TBL.size) {                      \
        snprintf(what, n, "table %s", NAME);                    \
        return what;                                            \
    }
#define HK__SLOT(TBL, TNAME, NAME)                              \
    if (old->TBL.NAME && !neu->TBL.NAME) {                      \
        snprintf(what, n, "slot %s of %s", #NAME, TNAME);       \
        return what;                                            \
    }
#define HK__BLAS1(name, minor, params, args) HK__SLOT(blas1, HK_TABLE_BLAS1_V1, name)
#define HK__MEMORY(name, minor, params, args) HK__SLOT(memory, HK_TABLE_MEMORY_V1, name)
#define HK__KERNELS(name, minor, params, args) HK__SLOT(kernels, HK_TABLE_KERNELS_V1, name)
#define HK__CUDA(name, minor, params, args) HK__SLOT(cuda, HK_TABLE_CUDA_V1, name)
    HK__TABLE(blas1, HK_TABLE_BLAS1_V1)
    HK__TABLE(memory, HK_TABLE_MEMORY_V1)
    HK__TABLE(kernels, HK_TABLE_KERNELS_V1)
    HK__TABLE(cuda, HK_TABLE_CUDA_V1)
#define HK__CORE(NAME, ...) HK__SLOT(core, "the core vtable", NAME)
    HK__CORE_FWD_SLOTS(HK__CORE, HK__CORE)
#undef HK__CORE
    HK_BLAS1_V1_SLOTS(HK__BLAS1)
    HK_MEMORY_V1_SLOTS(HK__MEMORY)
    HK_KERNELS_V1_SLOTS(HK__KERNELS)
    HK_CUDA_V1_SLOTS(HK__CUDA)
#undef HK__CUDA
#undef HK__KERNELS
#undef HK__MEMORY
#undef HK__BLAS1
#undef HK__SLOT
#undef HK__TABLE
    return NULL;
}

/* ---- pins: the tables a movable handle does not forward ---- */

/* The forwarded table of b named name (the implementation's own copy), or
 * NULL. */
static const void *hk__fwd_raw_table(const hk__binding_t *b, const char *name)
{
    const void *t = !strcmp(name, HK_TABLE_BLAS1_V1)     ? (const void *)&b->blas1
                    : !strcmp(name, HK_TABLE_MEMORY_V1)  ? (const void *)&b->memory
                    : !strcmp(name, HK_TABLE_KERNELS_V1) ? (const void *)&b->kernels
                    : !strcmp(name, HK_TABLE_CUDA_V1)    ? (const void *)&b->cuda
                                                         : NULL;
    size_t size = 0;
    if (t)
        memcpy(&size, t, sizeof(size));
    return size ? t : NULL;
}

hk_status_t hk_mhandle_pin(hk_mhandle_t *handle, const char *table, hk_mhandle_pin_t *pin)
{
    if (!table || !pin) {
        hk__mh_thread_error("hk_mhandle_pin: %s is NULL", !table ? "table" : "pin");
        return HK_STATUS_NULL_POINTER;
    }
    if (pin->size < sizeof(*pin)) {
        hk__mh_thread_error("hk_mhandle_pin: pin->size %u is below %zu", (unsigned)pin->size,
                            sizeof(*pin));
        return HK_STATUS_INVALID_VALUE;
    }
    pin->internal[0] = NULL;
    hk_mhandle_t *mh = hk__mh_of(handle);
    if (!mh)
        return hk__mh_not_live(handle, "hk_mhandle_pin");
    hk_mhandle_t *was;
    hk__binding_t *b = hk__mh_enter(mh, &was);
    const void *t = hk__fwd_raw_table(b, table);
    if (!t) {
        hk__ext_table_t *e = hk__ext_find(b->ext, table);
        if (e && !atomic_load_explicit(&e->used, memory_order_relaxed))
            atomic_store(&e->used, 1); /* a swap now needs it in the new one */
        t = e ? e->table : NULL;
    }
    if (!t) {
        hk__mh_leave(b, was);
        return hk__mh_refuse(mh, HK_STATUS_NOT_FOUND, "hk_mhandle_pin: %s %s offers no table %s",
                             hk_plugin_name(b->plugin), hk_plugin_version(b->plugin), table);
    }
    pin->handle = b->raw;
    pin->table = t;
    pin->plugin = b->plugin;
    pin->internal[0] = b;
    pin->internal[1] = was;
    return HK_STATUS_OK;
}

void hk_mhandle_unpin(hk_mhandle_pin_t *pin)
{
    if (!pin || !pin->internal[0])
        return;
    hk__binding_t *b = pin->internal[0];
    pin->internal[0] = NULL;
    hk__mh_leave(b, pin->internal[1]);
}
