/* hk-cpu: negotiation, the core vtable and the handle's life. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_blas1.h"
#include "hk_memory.h"
#include "hkcpu.h"

/* A failed create has no handle to carry its message: keep it per thread. */
static _Thread_local char thread_msg[HKCPU_MSG];

hk_status_t hk__cpu_fail(hk_handle_t *h, hk_status_t status, const char *fmt, ...)
{
    char line[HKCPU_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (h && h->magic == HKCPU_MAGIC) {
        pthread_mutex_lock(&h->lock);
        memcpy(h->msg, line, sizeof line);
        pthread_mutex_unlock(&h->lock);
    } else {
        memcpy(thread_msg, line, sizeof line);
    }
    return status;
}

hk_status_t hk__cpu_check(hk_handle_t *h, const char *fn)
{
    if (!h)
        return hk__cpu_fail(NULL, HK_STATUS_INVALID_HANDLE, "%s: handle is NULL", fn);
    if (h->magic != HKCPU_MAGIC)
        return hk__cpu_fail(NULL, HK_STATUS_INVALID_HANDLE,
                            "%s: not a live hk-cpu handle (destroyed or foreign)", fn);
    return HK_STATUS_OK;
}

const char *hk__cpu_thread_error(void)
{
    return thread_msg;
}

static hk_status_t cpu_create(const hk_create_info_t *info, hk_handle_t **out)
{
    if (!out)
        return hk__cpu_fail(NULL, HK_STATUS_NULL_POINTER, "handle_create: out is NULL");
    *out = NULL;
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};
    if (info) {
        if (info->size < offsetof(hk_create_info_t, flags) + sizeof info->flags)
            return hk__cpu_fail(NULL, HK_STATUS_INVALID_VALUE,
                                "handle_create: info->size %u is smaller than version 1 (%zu)",
                                info->size, sizeof ci);
        ci.device = info->device;
        ci.flags = info->flags;
    }
    if (ci.device != HK_DEVICE_CURRENT && ci.device != 0)
        return hk__cpu_fail(NULL, HK_STATUS_INVALID_DEVICE,
                            "handle_create: hk-cpu has one device (0); asked for %d", ci.device);
    hk_handle_t *h = calloc(1, sizeof *h);
    if (!h)
        return hk__cpu_fail(NULL, HK_STATUS_OUT_OF_MEMORY, "handle_create: out of memory");
    if (pthread_mutex_init(&h->lock, NULL) != 0) {
        free(h);
        return hk__cpu_fail(NULL, HK_STATUS_INTERNAL, "handle_create: cannot make a mutex");
    }
    h->magic = HKCPU_MAGIC;
    h->pointer_mode = HK_POINTER_MODE_HOST;
    h->flags = ci.flags;
    *out = h;
    return HK_STATUS_OK;
}

static hk_status_t cpu_destroy(hk_handle_t *h)
{
    hk_status_t st = hk__cpu_check(h, "handle_destroy");
    if (st != HK_STATUS_OK)
        return st;
    h->magic = HKCPU_DEAD;
    pthread_mutex_destroy(&h->lock);
    free(h);
    return HK_STATUS_OK;
}

static hk_status_t cpu_set_stream(hk_handle_t *h, void *stream)
{
    hk_status_t st = hk__cpu_check(h, "set_stream");
    if (st != HK_STATUS_OK)
        return st;
    if (stream)
        return hk__cpu_fail(h, HK_STATUS_NOT_SUPPORTED,
                            "set_stream: hk-cpu runs on the calling thread and takes no stream "
                            "(only NULL)");
    return HK_STATUS_OK;
}

static hk_status_t cpu_get_stream(hk_handle_t *h, void **stream)
{
    hk_status_t st = hk__cpu_check(h, "get_stream");
    if (st != HK_STATUS_OK)
        return st;
    if (!stream)
        return hk__cpu_fail(h, HK_STATUS_NULL_POINTER, "get_stream: stream is NULL");
    *stream = NULL;
    return HK_STATUS_OK;
}

static hk_status_t cpu_set_pointer_mode(hk_handle_t *h, hk_pointer_mode_t mode)
{
    hk_status_t st = hk__cpu_check(h, "set_pointer_mode");
    if (st != HK_STATUS_OK)
        return st;
    if (mode != HK_POINTER_MODE_HOST && mode != HK_POINTER_MODE_DEVICE)
        return hk__cpu_fail(h, HK_STATUS_INVALID_VALUE,
                            "set_pointer_mode: mode %d is neither HOST (0) nor DEVICE (1)",
                            (int)mode);
    h->pointer_mode = mode;
    return HK_STATUS_OK;
}

static hk_status_t cpu_get_pointer_mode(hk_handle_t *h, hk_pointer_mode_t *mode)
{
    hk_status_t st = hk__cpu_check(h, "get_pointer_mode");
    if (st != HK_STATUS_OK)
        return st;
    if (!mode)
        return hk__cpu_fail(h, HK_STATUS_NULL_POINTER, "get_pointer_mode: mode is NULL");
    *mode = h->pointer_mode;
    return HK_STATUS_OK;
}

static const char *cpu_last_error(const hk_handle_t *h)
{
    if (!h || h->magic != HKCPU_MAGIC)
        return thread_msg;
    return h->msg; /* written under the lock; a torn read shows a mixed line at worst */
}

static const struct {
    const char *name;
    const void *table;
} tables[] = {
    {HK_TABLE_BLAS1_V1, &hk__cpu_blas1},
    {HK_TABLE_MEMORY_V1, &hk__cpu_memory},
};

static hk_status_t cpu_get_table(const char *name, const void **table)
{
    if (!name || !table)
        return hk__cpu_fail(NULL, HK_STATUS_NULL_POINTER, "get_table: NULL argument");
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        if (strcmp(tables[i].name, name) == 0) {
            *table = tables[i].table;
            return HK_STATUS_OK;
        }
    }
    *table = NULL;
    return hk__cpu_fail(NULL, HK_STATUS_NOT_FOUND, "get_table: hk-cpu has no table \"%s\"", name);
}

static hk_status_t cpu_enum_tables(size_t index, const char **name)
{
    if (!name)
        return HK_STATUS_NULL_POINTER;
    if (index >= sizeof tables / sizeof tables[0])
        return HK_STATUS_NOT_FOUND;
    *name = tables[index].name;
    return HK_STATUS_OK;
}

static hk_status_t cpu_handle_info(hk_handle_t *h, hk_handle_info_t *info)
{
    hk_status_t st = hk__cpu_check(h, "handle_info");
    if (st != HK_STATUS_OK)
        return st;
    if (!info)
        return hk__cpu_fail(h, HK_STATUS_NULL_POINTER, "handle_info: info is NULL");
    hk_handle_info_t full = {
        .size = sizeof full,
        .device = -1,
        .context_id = 0,
        .owns_primary = 0,
        .flags = h->flags,
        .plugin_name = HKCPU_NAME,
    };
    uint32_t n = info->size < sizeof full ? info->size : (uint32_t)sizeof full;
    if (n < sizeof info->size)
        return hk__cpu_fail(h, HK_STATUS_INVALID_VALUE, "handle_info: info->size is %u",
                            info->size);
    full.size = n;
    memcpy(info, &full, n);
    return HK_STATUS_OK;
}

static hk_status_t cpu_synchronize(hk_handle_t *h)
{
    return hk__cpu_check(h, "synchronize"); /* every call already finished on return */
}

static const hk_vtable_t cpu_vtable = {
    .size = sizeof(hk_vtable_t),
    .handle_create = cpu_create,
    .handle_destroy = cpu_destroy,
    .set_stream = cpu_set_stream,
    .get_stream = cpu_get_stream,
    .set_pointer_mode = cpu_set_pointer_mode,
    .get_pointer_mode = cpu_get_pointer_mode,
    .last_error = cpu_last_error,
    .get_table = cpu_get_table,
    .enum_tables = cpu_enum_tables,
    .handle_info = cpu_handle_info,
    .synchronize = cpu_synchronize,
};

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
    a.vtable = &cpu_vtable;
    hk_answer_write(ans, &a);
    if (req->log)
        req->log(req->log_user, HK_LOG_DEBUG, "hk-cpu " HKCPU_VERSION ": negotiated");
    return HK_STATUS_OK;
}
