/* hk-cpu: negotiation, the core vtable and the handle's life. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_blas1.h"
#include "hk_memory.h"
#include "hkcpu.h"

static hk_status_t hkcpu_create(const hk_create_info_t *info, hk_handle_t **out)
{
    if (!out)
        return hkcpu_fail(NULL, HK_STATUS_NULL_POINTER, "handle_create: out is NULL");
    *out = NULL;
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};
    if (info) {
        if (info->size < sizeof ci)
            return hkcpu_fail(NULL, HK_STATUS_INVALID_VALUE,
                              "handle_create: info->size %u is below %zu, the size of the "
                              "version 1.0 struct", info->size, sizeof ci);
        ci.device = info->device;
        ci.flags = info->flags;
    }
    if (ci.device != HK_DEVICE_CURRENT && ci.device != 0)
        return hkcpu_fail(NULL, HK_STATUS_INVALID_DEVICE,
                          "handle_create: hk-cpu has one device (0); asked for %d", ci.device);
    hk_handle_t *h = hk__reg_take(&hkcpu_handles);
    if (!h)
        return hkcpu_fail(NULL, HK_STATUS_OUT_OF_MEMORY, "handle_create: out of memory");
    if (pthread_mutex_init(&h->lock, NULL) != 0) {
        hk__reg_put(&hkcpu_handles, h);
        return hkcpu_fail(NULL, HK_STATUS_INTERNAL, "handle_create: cannot make a mutex");
    }
    atomic_init(&h->pointer_mode, HK_POINTER_MODE_HOST);
    h->flags = ci.flags;
    hk__reg_publish(&hkcpu_handles, h);
    *out = h;
    return HK_STATUS_OK;
}

static hk_status_t hkcpu_destroy(hk_handle_t *h)
{
    HKCPU_CHECK(h, "handle_destroy");
    /* Two destroys of one handle racing: only one may free it. */
    if (!hk__reg_retire(&hkcpu_handles, h))
        return hkcpu_stray(HK_STATUS_INVALID_HANDLE,
                           "handle_destroy: %p was destroyed meanwhile", (void *)h);
    pthread_mutex_destroy(&h->lock);
    hk__reg_put(&hkcpu_handles, h);
    return HK_STATUS_OK;
}

static hk_status_t hkcpu_set_stream(hk_handle_t *h, void *stream)
{
    HKCPU_CHECK(h, "set_stream");
    if (stream)
        return hkcpu_fail(h, HK_STATUS_NOT_SUPPORTED,
                          "set_stream: hk-cpu runs on the calling thread and takes no stream "
                          "(only NULL)");
    return HK_STATUS_OK;
}

static hk_status_t hkcpu_get_stream(hk_handle_t *h, void **stream)
{
    HKCPU_CHECK(h, "get_stream");
    if (!stream)
        return hkcpu_fail(h, HK_STATUS_NULL_POINTER, "get_stream: stream is NULL");
    *stream = NULL;
    return HK_STATUS_OK;
}

static hk_status_t hkcpu_set_pointer_mode(hk_handle_t *h, hk_pointer_mode_t mode)
{
    HKCPU_CHECK(h, "set_pointer_mode");
    if (mode != HK_POINTER_MODE_HOST && mode != HK_POINTER_MODE_DEVICE)
        return hkcpu_fail(h, HK_STATUS_INVALID_VALUE,
                          "set_pointer_mode: mode %d is neither HOST (0) nor DEVICE (1)",
                          (int)mode);
    atomic_store_explicit(&h->pointer_mode, (int)mode, memory_order_relaxed);
    return HK_STATUS_OK;
}

static hk_status_t hkcpu_get_pointer_mode(hk_handle_t *h, hk_pointer_mode_t *mode)
{
    HKCPU_CHECK(h, "get_pointer_mode");
    if (!mode)
        return hkcpu_fail(h, HK_STATUS_NULL_POINTER, "get_pointer_mode: mode is NULL");
    *mode = (hk_pointer_mode_t)atomic_load_explicit(&h->pointer_mode, memory_order_relaxed);
    return HK_STATUS_OK;
}

static const struct {
    const char *name;
    const void *table;
} tables[] = {
    {HK_TABLE_BLAS1_V1, &hkcpu_blas1},
    {HK_TABLE_MEMORY_V1, &hkcpu_memory},
};

static hk_status_t hkcpu_get_table(const char *name, const void **table)
{
    if (!name || !table)
        return hkcpu_stray(HK_STATUS_NULL_POINTER, "get_table: %s is NULL",
                           !name ? "name" : "table");
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        if (strcmp(tables[i].name, name) == 0) {
            *table = tables[i].table;
            return HK_STATUS_OK;
        }
    }
    *table = NULL;
    return hkcpu_stray(HK_STATUS_NOT_FOUND, "get_table: hk-cpu has no table \"%.64s\"", name);
}

static hk_status_t hkcpu_enum_tables(size_t index, const char **name)
{
    if (!name)
        return hkcpu_stray(HK_STATUS_NULL_POINTER, "enum_tables: name is NULL");
    if (index >= sizeof tables / sizeof tables[0])
        return hkcpu_stray(HK_STATUS_NOT_FOUND, "enum_tables: index %zu is past the %zu tables",
                           index, sizeof tables / sizeof tables[0]);
    *name = tables[index].name;
    return HK_STATUS_OK;
}

static hk_status_t hkcpu_handle_info(hk_handle_t *h, hk_handle_info_t *info)
{
    HKCPU_CHECK(h, "handle_info");
    if (!info)
        return hkcpu_fail(h, HK_STATUS_NULL_POINTER, "handle_info: info is NULL");
    if (info->size < sizeof info->size)
        return hkcpu_fail(h, HK_STATUS_INVALID_VALUE,
                          "handle_info: info->size %u is below 4 (the size field itself)",
                          info->size);
    hk_handle_info_t full = {
        .size = sizeof full,
        .device = -1,
        .context_id = 0,
        .owns_primary = 0,
        .flags = h->flags,
        .plugin_name = HKCPU_NAME,
    };
    uint32_t n = info->size < sizeof full ? info->size : (uint32_t)sizeof full;
    full.size = n;
    memcpy(info, &full, n);
    return HK_STATUS_OK;
}

static hk_status_t hkcpu_synchronize(hk_handle_t *h)
{
    return hkcpu_check(h, "synchronize"); /* every call already finished on return */
}

static const hk_vtable_t cpu_vtable = {
    .size = sizeof(hk_vtable_t),
    .handle_create = hkcpu_create,
    .handle_destroy = hkcpu_destroy,
    .set_stream = hkcpu_set_stream,
    .get_stream = hkcpu_get_stream,
    .set_pointer_mode = hkcpu_set_pointer_mode,
    .get_pointer_mode = hkcpu_get_pointer_mode,
    .last_error = hkcpu_last_error,
    .get_table = hkcpu_get_table,
    .enum_tables = hkcpu_enum_tables,
    .handle_info = hkcpu_handle_info,
    .synchronize = hkcpu_synchronize,
    .last_error_copy = hkcpu_last_error_copy,
};

/* hk-cpu is unload-safe: when its module is closed, give back the registry's
 * chunks (only if no handle is left: one still held points there). Blocks of
 * hk.memory/1 stay: they belong to the host until it frees them, with this
 * build or another one of hk-cpu. Runs nothing at load. */
__attribute__((destructor)) static void cpu_unload(void)
{
    hk__reg_fini(&hkcpu_handles);
}

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans)
{
    if (!req || !ans)
        return HK_STATUS_NULL_POINTER;
    if (req->header.struct_type != HK_STRUCT_NEGOTIATE_REQUEST ||
        req->header.struct_size < sizeof(hk_negotiate_request_t))
        return HK_STATUS_INVALID_VALUE;
    hk_negotiate_answer_t a = {
        .header = {HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1},
        .name = HKCPU_NAME,
        .version = HKCPU_VERSION,
        .flags = HK_PLUGIN_UNLOAD_SAFE, /* no threads, no atexit, nothing outlives a handle */
        .abi_version = HK_ABI_CURRENT,
    };
    uint32_t lo = req->abi_min, hi = req->abi_max;
    /* Highest version both know: ours, or the host's max when it is older. */
    uint32_t v = HK_ABI_VERSION_MAJOR(hi) > HK_ABI_MAJOR ? HK_ABI_CURRENT
                 : hi < HK_ABI_CURRENT                     ? hi
                                                           : HK_ABI_CURRENT;
    if (lo > hi || v < lo || HK_ABI_VERSION_MAJOR(v) != HK_ABI_MAJOR) {
        hk_answer_write(ans, &a);
        return HK_STATUS_ABI_MISMATCH;
    }
    a.abi_version = v;
    if (HK_ABI_VERSION_MINOR(v) >= 2)
        a.flags |= HK_PLUGIN_MEMORY_HOST; /* the flag means nothing to older hosts */
    a.vtable = &cpu_vtable;
    hk_answer_write(ans, &a);
    if (req->log)
        req->log(req->log_user, HK_LOG_DEBUG, "hk-cpu " HKCPU_VERSION ": negotiated");
    return HK_STATUS_OK;
}
