/* hk-cuda: the core vtable (handle create/destroy, stream, pointer mode,
 * introspection, synchronize). */
#include <stdlib.h>
#include <string.h>

#include "hkc_internal.h"

#ifdef HK_DEBUG
#define HK__DEFAULT_FLAGS HK_CREATE_CHECKED /* debug builds check pointers */
#else
#define HK__DEFAULT_FLAGS 0u
#endif

hk__registry_t hk__handles = HK__REGISTRY_INIT(sizeof(struct hk_handle));

_Static_assert(HK__REG_SLOT_BYTES(sizeof(struct hk_handle)) != 0, "handle too big for a slot");

static void handle_free(hk_handle_t *h)
{
    pthread_mutex_destroy(&h->lock);
    pthread_mutex_destroy(&h->errlock);
    hk__reg_put(&hk__handles, h); /* the slot stays the plugin's: stale pointers fail */
}

static hk_status_t handle_create(const hk_create_info_t *info, hk_handle_t **out)
{
    if (!out)
        return hk__fail(NULL, HK_STATUS_NULL_POINTER, "handle_create: out is NULL");
    *out = NULL;
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};
    if (info) {
        if (info->size < sizeof ci)
            return hk__fail(NULL, HK_STATUS_INVALID_VALUE,
                            "handle_create: info->size %u is below %zu, the size of the "
                            "version 1.0 struct", info->size, sizeof ci);
        ci.device = info->device;
        ci.flags = info->flags;
    }
    if (ci.device < HK_DEVICE_CURRENT)
        return hk__fail(NULL, HK_STATUS_INVALID_DEVICE, "handle_create: device %d is not valid",
                        ci.device);
    hk__fork_watch();
    if (atomic_load(&hk__forked))
        return hk__fail(NULL, HK_STATUS_FORKED,
                        "handle_create: this process is a fork() child of a CUDA process");

    pthread_mutex_lock(&hk__lock);
    hk_status_t st = hk__driver_load();
    if (st == HK_STATUS_OK)
        st = hk__kernels_acquire();
    pthread_mutex_unlock(&hk__lock);
    if (st != HK_STATUS_OK)
        return st;

    hk_handle_t *h = hk__reg_take(&hk__handles);
    if (!h) {
        st = hk__fail(NULL, HK_STATUS_OUT_OF_MEMORY, "handle_create: no memory for the handle");
        goto release;
    }
    pthread_mutex_init(&h->lock, NULL);
    pthread_mutex_init(&h->errlock, NULL);
    h->flags = ci.flags | HK__DEFAULT_FLAGS;
    st = hk__context_bind(h, ci.device);
    if (st != HK_STATUS_OK) {
        handle_free(h);
        goto release;
    }
    hk__reg_publish(&hk__handles, h);
    *out = h;
    return HK_STATUS_OK;
release:
    pthread_mutex_lock(&hk__lock);
    hk__kernels_release();
    pthread_mutex_unlock(&hk__lock);
    return st;
}

static hk_status_t handle_destroy(hk_handle_t *h)
{
    if (!hk__valid(h))
        return hk__fail(NULL, HK_STATUS_INVALID_HANDLE, "handle_destroy: not a live handle");
    if (!atomic_load(&hk__forked)) {
        /* The handle goes whatever fails; the first failure is returned. */
        hk_status_t st = hk__context_unbind(h);
        pthread_mutex_lock(&hk__lock);
        hk_status_t lst = hk__kernels_release();
        pthread_mutex_unlock(&hk__lock);
        if (st != HK_STATUS_OK) /* the handle's message would go with it */
            hk__fail(NULL, st, "%s", h->err);
        handle_free(h);
        return st != HK_STATUS_OK ? st : lst;
    }
    /* In a fork() child the driver is unusable: free only host memory, and do
     * not touch hk__lock, which another parent thread may have held at fork. */
    hk__arm_t *a = atomic_load(&h->arm);
    while (a) {
        hk__arm_t *older = a->older;
        hk__arm_free(a);
        a = older;
    }
    /* Its mutexes may be in any state in the child, and so may the
     * registry's lock: retire the slot without giving it back. */
    hk__reg_retire(&hk__handles, h);
    return HK_STATUS_OK;
}

static hk_status_t set_stream(hk_handle_t *h, void *stream)
{
    if (!hk__valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (atomic_load(&hk__forked))
        return hk__fail(h, HK_STATUS_FORKED, "set_stream: CUDA is unusable in a fork() child");
    CUstream s = (CUstream)stream;
    int user = s != NULL && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD;
    if (user) {
        CUcontext sctx = NULL;
        CUresult r = hk__cu.cuStreamGetCtx(s, &sctx);
        if (r != CUDA_SUCCESS)
            return hk__fail_cu(h, r, "set_stream: cuStreamGetCtx");
        if (sctx != h->ctx) {
            /* Name the stream's device: look it up inside its own context,
             * pushed over the caller's and popped again (only the message
             * depends on it; -1 when the driver will not say). */
            int sdev = -1;
            CUdevice d;
            if (hk__cu.cuCtxPushCurrent(sctx) == CUDA_SUCCESS) {
                if (hk__cu.cuCtxGetDevice(&d) == CUDA_SUCCESS) {
                    int count = 0;
                    if (hk__cu.cuDeviceGetCount(&count) != CUDA_SUCCESS)
                        count = 0;
                    for (int i = 0; i < count; i++) {
                        CUdevice di;
                        if (hk__cu.cuDeviceGet(&di, i) == CUDA_SUCCESS && di == d)
                            sdev = i;
                    }
                }
                CUresult rp = hk__pop_current();
                if (rp != CUDA_SUCCESS)
                    return hk__fail_cu(h, rp, "set_stream: cuCtxPopCurrent restoring the "
                                              "caller's context");
            }
            return hk__fail(h, HK_STATUS_STREAM_MISMATCH,
                            "set_stream: the stream belongs to a context of device %d, the "
                            "handle's context is on device %d%s", sdev, h->device,
                            sdev == h->device ? " (another context of the same device)" : "");
        }
    }
    /* A stream's ID names it uniquely (its handle value may come back for a
     * later stream): the reductions keep a workspace per ID. Looked up per
     * call instead (0) if the driver will not tell it here. */
    unsigned long long id = 0;
    if (user && hk__cu.cuStreamGetId(s, &id) != CUDA_SUCCESS)
        id = 0;
    hk__stream_publish(h, s, user, id);
    return HK_STATUS_OK;
}

static hk_status_t get_stream(hk_handle_t *h, void **stream)
{
    if (!hk__valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!stream)
        return hk__fail(h, HK_STATUS_NULL_POINTER, "get_stream: stream is NULL");
    *stream = (void *)atomic_load(&h->stream);
    return HK_STATUS_OK;
}

static hk_status_t set_pointer_mode(hk_handle_t *h, hk_pointer_mode_t mode)
{
    if (!hk__valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (mode != HK_POINTER_MODE_HOST && mode != HK_POINTER_MODE_DEVICE)
        return hk__fail(h, HK_STATUS_INVALID_VALUE, "set_pointer_mode: unknown mode %d",
                        (int)mode);
    atomic_store(&h->pointer_mode, (int)mode);
    return HK_STATUS_OK;
}

static hk_status_t get_pointer_mode(hk_handle_t *h, hk_pointer_mode_t *mode)
{
    if (!hk__valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!mode)
        return hk__fail(h, HK_STATUS_NULL_POINTER, "get_pointer_mode: mode is NULL");
    *mode = (hk_pointer_mode_t)atomic_load(&h->pointer_mode);
    return HK_STATUS_OK;
}

static const char *last_error(const hk_handle_t *h)
{
    return hk__last_error(h);
}

static hk_status_t handle_info(hk_handle_t *h, hk_handle_info_t *info)
{
    if (!hk__valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!info)
        return hk__fail(h, HK_STATUS_NULL_POINTER, "handle_info: info is NULL");
    if (info->size < sizeof info->size)
        return hk__fail(h, HK_STATUS_INVALID_VALUE,
                        "handle_info: info->size %u is below 4 (the size field itself)",
                        info->size);
    hk_handle_info_t v = {sizeof v, h->device, 0, 0, h->flags, "hk-cuda"};
    pthread_mutex_lock(&h->lock); /* owns_primary changes under it on re-arm */
    const hk__arm_t *a = atomic_load(&h->arm);
    v.context_id = a ? a->ctx_id : 0;
    v.owns_primary = h->owns_primary != 0;
    pthread_mutex_unlock(&h->lock);
    size_t n = info->size < sizeof v ? info->size : sizeof v;
    v.size = (uint32_t)n;
    memcpy(info, &v, n);
    return HK_STATUS_OK;
}

static hk_status_t synchronize(hk_handle_t *h)
{
    if (!hk__valid(h))
        return HK_STATUS_INVALID_HANDLE;
    hk__call_t c;
    hk_status_t st = hk__call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    CUresult r = hk__cu.cuStreamSynchronize(c.stream);
    if (r != CUDA_SUCCESS)
        st = hk__fail_cu(h, r, "synchronize: cuStreamSynchronize");
    st = hk__call_end(&c, st);
    if (st != HK_STATUS_OK)
        return st;
    return HK_STATUS_OK;
}

hk_status_t hk__get_table(const char *name, const void **table);
hk_status_t hk__enum_tables(size_t index, const char **name);

const hk_vtable_t hk__vtable = {
    .size = sizeof(hk_vtable_t),
    .handle_create = handle_create,
    .handle_destroy = handle_destroy,
    .set_stream = set_stream,
    .get_stream = get_stream,
    .set_pointer_mode = set_pointer_mode,
    .get_pointer_mode = get_pointer_mode,
    .last_error = last_error,
    .get_table = hk__get_table,
    .enum_tables = hk__enum_tables,
    .handle_info = handle_info,
    .synchronize = synchronize,
    .last_error_copy = hk__last_error_copy,
};
