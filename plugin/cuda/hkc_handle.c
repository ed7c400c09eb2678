/* hk-cuda: the core vtable (handle create/destroy, stream, pointer mode,
 * introspection, synchronize). Binding, the guard, streams and destroy's
 * context half are the kit's (plugin_api/hk_kit.h). */
#include <stdlib.h>
#include <string.h>

#include "hk__trace.h"
#include "hk_status_text.h"
#include "hkc_internal.h"

#ifdef HK_DEBUG
#define HK__DEFAULT_FLAGS HK_CREATE_CHECKED /* debug builds check pointers */
#else
#define HK__DEFAULT_FLAGS 0u
#endif

static void handle_free(hk_handle_t *h)
{
    pthread_mutex_destroy(&h->lock);
    hk_kit_handle_put(h); /* the slot stays the plugin's: stale pointers fail */
}

static hk_status_t handle_create(const hk_create_info_t *info, hk_handle_t **out)
{
    if (!out)
        return hkc_fail(NULL, HK_STATUS_NULL_POINTER, "handle_create: out is NULL");
    *out = NULL;
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};
    if (info) {
        if (info->size < sizeof ci)
            return hkc_fail(NULL, HK_STATUS_INVALID_VALUE,
                            "handle_create: info->size %u is below %zu, the size of the "
                            "version 1.0 struct", info->size, sizeof ci);
        ci.device = info->device;
        ci.flags = info->flags;
    }
    if (ci.device < HK_DEVICE_CURRENT)
        return hkc_fail(NULL, HK_STATUS_INVALID_DEVICE, "handle_create: device %d is not valid",
                        ci.device);
    hk_kit_trace_name("hk-cuda");
    hk_kit_fork_watch();
    if (hk_kit_forked()) {
        HK__TRACE(HK__TRACE_DECISIONS, "fork", "handle_create refused: FORKED: this process is a "
                  "fork() child of a process that used CUDA through hk-cuda");
        return hkc_fail(NULL, HK_STATUS_FORKED,
                        "handle_create: this process is a fork() child of a CUDA process");
    }

    hk_status_t st = hk_kit_driver_load(CUDA_VERSION);
    if (st != HK_STATUS_OK)
        return st;
    pthread_mutex_lock(&hkc_lock);
    st = hkc_driver_take();
    if (st == HK_STATUS_OK)
        st = hkc_kernels_acquire();
    pthread_mutex_unlock(&hkc_lock);
    if (st != HK_STATUS_OK) {
        HK__TRACE(HK__TRACE_DECISIONS, "ctx", "handle_create refused before binding: %s: %s",
                  hk_status_name(st), hk_kit_last_error(NULL));
        return st;
    }

    hk_handle_t *h = hk_kit_handle_take(sizeof *h);
    if (!h) {
        st = hkc_fail(NULL, HK_STATUS_OUT_OF_MEMORY, "handle_create: no memory for the handle");
        goto release;
    }
    pthread_mutex_init(&h->lock, NULL);
    h->flags = ci.flags | HK__DEFAULT_FLAGS;
    st = hk_kit_bind(ci.device, &hkc_arm_ops, h, &h->kb);
    if (st != HK_STATUS_OK) {
        handle_free(h);
        goto release;
    }
    h->device = hk_kit_device(h->kb);
    h->cudev = hk_kit_cudevice(h->kb);
    hk_kit_handle_publish(h);
    *out = h;
    return HK_STATUS_OK;
release:
    hkc_kernels_release();
    return st;
}

static hk_status_t handle_destroy(hk_handle_t *h)
{
    if (!hkc_valid(h))
        return hkc_fail(NULL, HK_STATUS_INVALID_HANDLE, "handle_destroy: not a live handle");
    if (!hk_kit_forked()) {
        /* The handle goes whatever fails; the first failure is returned (the
         * kit leaves its message as the create message). */
        hk_status_t st = hk_kit_unbind(h->kb);
        h->kb = NULL;
        hk_status_t lst = hkc_kernels_release(); /* takes hkc_lock itself */
        handle_free(h);
        return st != HK_STATUS_OK ? st : lst;
    }
    /* In a fork() child the driver is unusable: the kit frees only host
     * memory, and hkc_lock, which another parent thread may have held at
     * fork, is not touched. */
    hk_kit_unbind(h->kb);
    /* Its mutexes may be in any state in the child, and so may the
     * registry's lock: retire the slot without giving it back. */
    hk_kit_handle_retire(h);
    return HK_STATUS_OK;
}

static hk_status_t set_stream(hk_handle_t *h, void *stream)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    return hk_kit_set_stream(h->kb, (CUstream)stream, "set_stream");
}

static hk_status_t get_stream(hk_handle_t *h, void **stream)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!stream)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "get_stream: stream is NULL");
    *stream = (void *)hk_kit_get_stream(h->kb);
    return HK_STATUS_OK;
}

static hk_status_t set_pointer_mode(hk_handle_t *h, hk_pointer_mode_t mode)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (mode != HK_POINTER_MODE_HOST && mode != HK_POINTER_MODE_DEVICE)
        return hkc_fail(h, HK_STATUS_INVALID_VALUE, "set_pointer_mode: unknown mode %d",
                        (int)mode);
    atomic_store(&h->pointer_mode, (int)mode);
    return HK_STATUS_OK;
}

static hk_status_t get_pointer_mode(hk_handle_t *h, hk_pointer_mode_t *mode)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!mode)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "get_pointer_mode: mode is NULL");
    *mode = (hk_pointer_mode_t)atomic_load(&h->pointer_mode);
    return HK_STATUS_OK;
}

static const char *last_error(const hk_handle_t *h)
{
    return hkc_last_error(h);
}

static hk_status_t handle_info(hk_handle_t *h, hk_handle_info_t *info)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!info)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "handle_info: info is NULL");
    if (info->size < sizeof info->size)
        return hkc_fail(h, HK_STATUS_INVALID_VALUE,
                        "handle_info: info->size %u is below 4 (the size field itself)",
                        info->size);
    hk_handle_info_t v = {sizeof v, h->device, 0, 0, h->flags, "hk-cuda"};
    v.context_id = hk_kit_context_id(h->kb);
    v.owns_primary = hk_kit_owns_primary(h->kb) != 0;
    size_t n = info->size < sizeof v ? info->size : sizeof v;
    v.size = (uint32_t)n;
    memcpy(info, &v, n);
    return HK_STATUS_OK;
}

static hk_status_t synchronize(hk_handle_t *h)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    hkc_call_t c;
    hk_status_t st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    st = hk_kit_check_wait(&c.k, "synchronize");
    if (st == HK_STATUS_OK) { /* as copy_to_host waits (hkc_memory.c) */
        int mode;
        CUresult r = hkc_relax(&mode);
        if (r == CUDA_SUCCESS) {
            r = hkc_cu.cuStreamSynchronize(c.stream);
            hkc_relaxed_end(mode);
        }
        if (r != CUDA_SUCCESS)
            st = hkc_fail_cu(h, r, "synchronize: cuStreamSynchronize");
    }
    st = hkc_call_end(&c, st);
    if (st != HK_STATUS_OK)
        return st;
    return HK_STATUS_OK;
}

const hk_vtable_t hkc_vtable = {
    .size = sizeof(hk_vtable_t),
    .handle_create = handle_create,
    .handle_destroy = handle_destroy,
    .set_stream = set_stream,
    .get_stream = get_stream,
    .set_pointer_mode = set_pointer_mode,
    .get_pointer_mode = get_pointer_mode,
    .last_error = last_error,
    .get_table = hkc_get_table,
    .enum_tables = hkc_enum_tables,
    .handle_info = handle_info,
    .synchronize = synchronize,
    .last_error_copy = hkc_last_error_copy,
};
