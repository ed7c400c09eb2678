/* hk-example: negotiation, the core vtable and the library of kernels.
 *
 * Everything that makes the handle behave like a CUDA runtime library comes
 * from the kit (hk_kit.h): opening the driver, binding to what is current,
 * the per-call guard, streams, destroy, fork, messages, the handle registry.
 * What is left here is the plugin's own: its name, its tables, and loading
 * its kernels once for all of its handles. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "example_internal.h"

#ifndef EX_VERSION /* a build may answer another version: -DEX_VERSION='"1.0.1"' */
#define EX_VERSION "1.0.0"
#endif

ex_cu_t ex_cu;
hk_kit_kernel_t *ex_kernels[EX_KERNELS];

/* The fatbin, embedded by example_fatbin.S. */
extern const unsigned char example_fatbin[], example_fatbin_end[];

/* The library of kernels is loaded by the first handle and kept until the
 * module is closed, when the kit's destructor unloads it (unloading with the
 * last handle would load and unload it again and again in a program that
 * creates and destroys handles in turn). Under one lock, taken only by
 * create. */
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_kit_library_t *library;
static int entries_taken;

static hk_status_t take_entry_points(void)
{
    static const hk_kit_entry_t entries[] = {
        {"cuMemAlloc", 3020, (void **)&ex_cu.cuMemAlloc},
        {"cuMemFree", 3020, (void **)&ex_cu.cuMemFree},
        {"cuMemcpyHtoDAsync", 3020, (void **)&ex_cu.cuMemcpyHtoDAsync},
        {"cuMemcpyDtoHAsync", 3020, (void **)&ex_cu.cuMemcpyDtoHAsync},
        {"cuMemsetD8Async", 3020, (void **)&ex_cu.cuMemsetD8Async},
        {"cuStreamSynchronize", 2000, (void **)&ex_cu.cuStreamSynchronize},
    };
    if (entries_taken)
        return HK_STATUS_OK;
    hk_status_t st = hk_kit_driver_take(entries, sizeof entries / sizeof entries[0]);
    entries_taken = st == HK_STATUS_OK;
    return st;
}

/* Loads the library (and finds the kernels) the first time. Caller holds
 * lib_lock. */
static hk_status_t library_load(void)
{
    static const char *const names[EX_KERNELS] = {"hk_example_fill", "hk_example_scale"};
    if (library)
        return HK_STATUS_OK;
    hk_kit_library_t *lib = NULL;
    hk_status_t st = hk_kit_library_load(NULL, example_fatbin,
                                         (size_t)(example_fatbin_end - example_fatbin), 0, &lib);
    for (int k = 0; st == HK_STATUS_OK && k < EX_KERNELS; k++)
        st = hk_kit_kernel_find(NULL, lib, names[k], &ex_kernels[k]);
    if (st != HK_STATUS_OK) {
        if (lib) {
            char why[512]; /* the first failure is the one reported */
            snprintf(why, sizeof why, "%s", hk_kit_last_error(NULL));
            hk_kit_library_unload(NULL, lib);
            hk_kit_fail(NULL, st, "%s", why);
        }
        return st;
    }
    library = lib;
    return HK_STATUS_OK;
}

/* Takes every kernel's function in the handle's context now, at the
 * create, rather than at each kernel's first launch: with the driver's lazy
 * loading, taking a function loads its code into the context, and a load
 * waits for the other threads' launches and copies there to pause (they
 * can keep it waiting without end). A create is where a host expects that
 * cost, and where a live swap holds the other calls for it. Cached per
 * context by the kit: later handles of the context pay nothing. */
static hk_status_t functions_take(hk_handle_t *h)
{
    hk_kit_call_t c;
    hk_status_t st = hk_kit_begin(h->kb, &c);
    if (st != HK_STATUS_OK)
        return st;
    for (int k = 0; st == HK_STATUS_OK && k < EX_KERNELS; k++) {
        struct CUfunc_st *f = NULL;
        st = hk_kit_kernel_function(ex_kernels[k], c.arm->ctx_id, h->kb, &f);
    }
    return hk_kit_end(&c, st);
}

/* ---- the core vtable ---- */

static hk_status_t handle_create(const hk_create_info_t *info, hk_handle_t **out)
{
    if (!out)
        return hk_kit_fail(NULL, HK_STATUS_NULL_POINTER, "handle_create: out is NULL");
    *out = NULL;
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};
    if (info) {
        if (info->size < sizeof ci)
            return hk_kit_fail(NULL, HK_STATUS_INVALID_VALUE,
                               "handle_create: info->size %u is below %zu", info->size,
                               sizeof ci);
        ci.device = info->device;
        ci.flags = info->flags;
    }
    /* The kit's debug trace lines (HK_TRACE) name this plugin. */
    hk_kit_trace_name("hk-example");
    /* The driver is opened at the first create, never at load. */
    hk_status_t st = hk_kit_driver_load(CUDA_VERSION);
    if (st != HK_STATUS_OK)
        return st;
    pthread_mutex_lock(&lib_lock);
    st = take_entry_points();
    if (st == HK_STATUS_OK)
        st = library_load();
    pthread_mutex_unlock(&lib_lock);
    if (st != HK_STATUS_OK)
        return st;
    hk_handle_t *h = hk_kit_handle_take(sizeof *h);
    if (!h) {
        return hk_kit_fail(NULL, HK_STATUS_OUT_OF_MEMORY, "handle_create: no memory");
    }
    h->flags = ci.flags;
    /* No per-context state of its own (ops NULL): the kit keeps the kernels'
     * functions per context, so a reset primary needs nothing from us. */
    st = hk_kit_bind(ci.device, NULL, h, &h->kb);
    if (st != HK_STATUS_OK) {
        hk_kit_handle_put(h);
        return st;
    }
    st = functions_take(h);
    if (st != HK_STATUS_OK) {
        hk_kit_unbind(h->kb);
        hk_kit_handle_put(h);
        return st;
    }
    hk_kit_handle_publish(h);
    *out = h;
    return HK_STATUS_OK;
}

static hk_status_t handle_destroy(hk_handle_t *h)
{
    if (!ex_live(h))
        return hk_kit_fail(NULL, HK_STATUS_INVALID_HANDLE, "handle_destroy: not a live handle");
    if (hk_kit_forked()) {
        /* A fork() child: the kit frees host memory only; our lock may have
         * been held by another thread of the parent, so it is not taken. */
        hk_kit_unbind(h->kb);
        hk_kit_handle_retire(h);
        return HK_STATUS_OK;
    }
    hk_status_t st = hk_kit_unbind(h->kb); /* waits for the handle's work */
    hk_kit_handle_put(h);
    return st;
}

static hk_status_t set_stream(hk_handle_t *h, void *stream)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    return hk_kit_set_stream(h->kb, stream, "set_stream");
}

static hk_status_t get_stream(hk_handle_t *h, void **stream)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!stream)
        return hk_kit_fail(h->kb, HK_STATUS_NULL_POINTER, "get_stream: stream is NULL");
    *stream = hk_kit_get_stream(h->kb);
    return HK_STATUS_OK;
}

static hk_status_t set_pointer_mode(hk_handle_t *h, hk_pointer_mode_t mode)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (mode != HK_POINTER_MODE_HOST && mode != HK_POINTER_MODE_DEVICE)
        return hk_kit_fail(h->kb, HK_STATUS_INVALID_VALUE, "set_pointer_mode: unknown mode %d",
                           (int)mode);
    atomic_store(&h->pointer_mode, (int)mode);
    return HK_STATUS_OK;
}

static hk_status_t get_pointer_mode(hk_handle_t *h, hk_pointer_mode_t *mode)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!mode)
        return hk_kit_fail(h->kb, HK_STATUS_NULL_POINTER, "get_pointer_mode: mode is NULL");
    *mode = (hk_pointer_mode_t)atomic_load(&h->pointer_mode);
    return HK_STATUS_OK;
}

static const char *last_error(const hk_handle_t *h)
{
    if (h && !ex_live(h))
        return "not a live hk-example handle";
    return hk_kit_last_error(h ? h->kb : NULL);
}

static hk_status_t last_error_copy(const hk_handle_t *h, char *buf, size_t len, size_t *needed)
{
    if (h && !ex_live(h)) {
        if (needed)
            *needed = 0;
        if (buf && len > 0)
            buf[0] = '\0';
        return HK_STATUS_INVALID_HANDLE;
    }
    return hk_kit_last_error_copy(h ? h->kb : NULL, buf, len, needed);
}

static hk_status_t handle_info(hk_handle_t *h, hk_handle_info_t *info)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!info)
        return hk_kit_fail(h->kb, HK_STATUS_NULL_POINTER, "handle_info: info is NULL");
    if (info->size < sizeof info->size)
        return hk_kit_fail(h->kb, HK_STATUS_INVALID_VALUE,
                           "handle_info: info->size %u is below 4", info->size);
    hk_handle_info_t v = {sizeof v, hk_kit_device(h->kb), hk_kit_context_id(h->kb),
                          hk_kit_owns_primary(h->kb) != 0, h->flags, "hk-example"};
    size_t n = info->size < sizeof v ? info->size : sizeof v;
    v.size = (uint32_t)n;
    memcpy(info, &v, n);
    return HK_STATUS_OK;
}

static hk_status_t synchronize(hk_handle_t *h)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    hk_kit_call_t c;
    hk_status_t st = hk_kit_begin(h->kb, &c);
    if (st != HK_STATUS_OK)
        return st;
    /* as a copy waits (example_ops.c, "hk.memory/1") */
    st = hk_kit_check_wait(&c, "synchronize");
    int mode;
    CUresult r = st == HK_STATUS_OK ? hk_kit_capture_relax(&mode) : CUDA_SUCCESS;
    if (st == HK_STATUS_OK && r == CUDA_SUCCESS) {
        r = ex_cu.cuStreamSynchronize(c.stream);
        hk_kit_capture_restore(mode);
    }
    if (r != CUDA_SUCCESS)
        st = hk_kit_fail_cu(h->kb, r, "synchronize: cuStreamSynchronize");
    return hk_kit_end(&c, st);
}

/* ---- tables and negotiation ---- */

static const struct {
    const char *name;
    const void *table;
} tables[] = {
    {EXAMPLE_TABLE_OPS_V1, &ex_ops_table},
    {HK_TABLE_MEMORY_V1, &ex_memory_table},
    {HK_TABLE_SELFCHECK_V1, &ex_selfcheck_table},
};

static hk_status_t get_table(const char *name, const void **table)
{
    if (!table)
        return HK_STATUS_NULL_POINTER;
    *table = NULL;
    if (!name)
        return HK_STATUS_NULL_POINTER;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (strcmp(tables[i].name, name) == 0) {
            *table = tables[i].table;
            return HK_STATUS_OK;
        }
    return HK_STATUS_NOT_FOUND;
}

static hk_status_t enum_tables(size_t index, const char **name)
{
    if (!name)
        return HK_STATUS_NULL_POINTER;
    *name = index < sizeof tables / sizeof tables[0] ? tables[index].name : NULL;
    return *name ? HK_STATUS_OK : HK_STATUS_NOT_FOUND;
}

const hk_vtable_t ex_vtable = {
    .size = sizeof(hk_vtable_t),
    .handle_create = handle_create,
    .handle_destroy = handle_destroy,
    .set_stream = set_stream,
    .get_stream = get_stream,
    .set_pointer_mode = set_pointer_mode,
    .get_pointer_mode = get_pointer_mode,
    .last_error = last_error,
    .get_table = get_table,
    .enum_tables = enum_tables,
    .handle_info = handle_info,
    .synchronize = synchronize,
    .last_error_copy = last_error_copy,
};

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *request, hk_negotiate_answer_t *answer);

/* Makes no CUDA call and allocates nothing: loading the plugin must cost
 * nothing and work on a machine without a driver. */
hk_status_t hk_plugin_negotiate(const hk_negotiate_request_t *request,
                                hk_negotiate_answer_t *answer)
{
    if (!request || !answer)
        return HK_STATUS_NULL_POINTER;
    if (request->header.struct_type != HK_STRUCT_NEGOTIATE_REQUEST ||
        request->header.struct_size < offsetof(hk_negotiate_request_t, log))
        return HK_STATUS_INVALID_VALUE;
    /* Unload-safe: when the module is closed, the kit's destructor unloads
     * the library and gives back the driver; glibc drops the kit's fork
     * handler with the module. */
    hk_negotiate_answer_t a = {{HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1}, HK_ABI_CURRENT,
                               HK_PLUGIN_UNLOAD_SAFE,
                               "hk-example", EX_VERSION, &ex_vtable};
    uint32_t lo = request->abi_min, hi = request->abi_max;
    uint32_t chosen = hi < HK_ABI_CURRENT ? hi : HK_ABI_CURRENT;
    hk_status_t st = HK_STATUS_OK;
    if (lo > hi || chosen < lo || HK_ABI_VERSION_MAJOR(chosen) != HK_ABI_MAJOR)
        st = HK_STATUS_ABI_MISMATCH;
    else
        a.abi_version = chosen;
    if (st == HK_STATUS_OK && HK_ABI_VERSION_MINOR(chosen) >= 2)
        a.flags |= HK_PLUGIN_MEMORY_CUDA; /* its memory is CUDA device memory */
    hk_answer_write(answer, &a);
    return st;
}
