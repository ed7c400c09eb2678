/* hk-cuda: tables "hk.kernels/1" (plugin_api/hk_kernels.h: the caller's own
 * kernels) and "hk.cuda/1" (plugin_api/hk_cuda.h: what a handle is bound
 * to), and the look-up of every table by name (the core vtable's get_table
 * and enum_tables). The work is the kit's (libraries, kernels, launches; the context
 * guard); these slots check the handle, the pointers and the order of the
 * checks the headers give. */
#include <string.h>

#include "hk_blas1.h"
#include "hk_cuda.h"
#include "hk_kernels.h"
#include "hk_memory.h"
#include "hk_trim.h"
#include "hkc_internal.h"

/* ---- hk.kernels/1 ---- */

static hk_status_t k_load(hk_handle_t *h, const void *image, size_t size, hk_library_t **out)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!out || !image) {
        if (out)
            *out = NULL;
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "load: %s is NULL", !out ? "out" : "image");
    }
    *out = NULL;
    /* Inside the handle's context: the library is also loaded into it, so a
     * PTX image is compiled now, with its log, not at a later launch. */
    hkc_call_t c;
    hk_status_t st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    hk_kit_library_t *lib = NULL;
    st = hk_kit_library_load(h->kb, image, size, HK_KIT_LOAD_INTO_CURRENT, &lib);
    st = hkc_call_end(&c, st);
    if (st == HK_STATUS_OK)
        *out = (hk_library_t *)lib;
    return st;
}

static hk_status_t k_unload(hk_handle_t *h, hk_library_t *lib)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    return hk_kit_library_unload(h->kb, (hk_kit_library_t *)lib);
}

static hk_status_t k_get_kernel(hk_handle_t *h, hk_library_t *lib, const char *name,
                                hk_kernel_t **out)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    hk_kit_kernel_t *k = NULL;
    hk_status_t st = hk_kit_kernel_find(h->kb, (hk_kit_library_t *)lib, name, out ? &k : NULL);
    if (out)
        *out = (hk_kernel_t *)k;
    return st;
}

/* NULL → NULL_POINTER, not one of ours → INVALID_VALUE (decided without
 * reading through it). */
static hk_status_t check_kernel(hk_handle_t *h, const hk_kernel_t *k, const char *slot)
{
    if (!k)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "%s: kernel is NULL", slot);
    if (!hk_kit_kernel_live(k))
        return hkc_fail(h, HK_STATUS_INVALID_VALUE,
                        "%s: %p is not a live kernel of hk-cuda (its library unloaded?)", slot,
                        (const void *)k);
    return HK_STATUS_OK;
}

static hk_status_t k_get_attributes(hk_handle_t *h, hk_kernel_t *kernel,
                                    hk_kernel_attributes_t *attrs)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    hk_status_t st = check_kernel(h, kernel, "get_attributes");
    if (st != HK_STATUS_OK)
        return st;
    if (!attrs)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "get_attributes: attrs is NULL");
    hkc_call_t c;
    st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    st = hk_kit_kernel_attributes(&c.k, (hk_kit_kernel_t *)kernel, attrs);
    return hkc_call_end(&c, st);
}

static hk_status_t k_launch(hk_handle_t *h, hk_kernel_t *kernel, uint32_t grid_x, uint32_t grid_y,
                            uint32_t grid_z, uint32_t block_x, uint32_t block_y, uint32_t block_z,
                            uint32_t shared_bytes, void **args)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    hk_status_t st = check_kernel(h, kernel, "launch");
    if (st != HK_STATUS_OK)
        return st;
    const uint32_t grid[3] = {grid_x, grid_y, grid_z}, block[3] = {block_x, block_y, block_z};
    st = hk_kit_check_dims(h->kb, grid, block);
    if (st != HK_STATUS_OK)
        return st;
    hkc_call_t c;
    st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    st = hk_kit_launch(&c.k, (hk_kit_kernel_t *)kernel, grid, block, shared_bytes, args);
    return hkc_call_end(&c, st);
}

static hk_status_t k_get_function(hk_handle_t *h, hk_kernel_t *kernel, void **function)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    hk_status_t st = check_kernel(h, kernel, "get_function");
    if (st != HK_STATUS_OK)
        return st;
    if (!function)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "get_function: function is NULL");
    *function = NULL;
    hkc_call_t c;
    st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    CUfunction fn = NULL;
    st = hk_kit_kernel_function((hk_kit_kernel_t *)kernel, c.arm->base.ctx_id, h->kb, &fn);
    st = hkc_call_end(&c, st);
    if (st == HK_STATUS_OK)
        *function = fn;
    return st;
}

const hk_kernels_v1_t hkc_kernels_table = {
    .size = sizeof(hk_kernels_v1_t),
    .load = k_load,
    .unload = k_unload,
    .get_kernel = k_get_kernel,
    .get_attributes = k_get_attributes,
    .launch = k_launch,
    .get_function = k_get_function,
};

/* ---- hk.cuda/1 ---- */

static hk_status_t c_get_context(hk_handle_t *h, void **context)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!context)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "get_context: context is NULL");
    *context = hk_kit_context(h->kb);
    return HK_STATUS_OK;
}

static hk_status_t c_get_device(hk_handle_t *h, int *device, int *ordinal)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!device || !ordinal)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "get_device: %s is NULL",
                        !device ? "device" : "ordinal");
    *device = h->cudev;
    *ordinal = h->device;
    return HK_STATUS_OK;
}

static hk_status_t c_get_stream(hk_handle_t *h, void **stream)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!stream)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "get_stream: stream is NULL");
    *stream = hk_kit_get_stream(h->kb);
    return HK_STATUS_OK;
}

const hk_cuda_v1_t hkc_cuda_table = {
    .size = sizeof(hk_cuda_v1_t),
    .get_context = c_get_context,
    .get_device = c_get_device,
    .get_stream = c_get_stream,
};

/* ---- the look-up ---- */

static const hk_trim_v1_t trim_table = {sizeof(hk_trim_v1_t), hk_kit_trim};

static const struct {
    const char *name;
    const void *table;
} tables[] = {
    {HK_TABLE_BLAS1_V1, &hkc_blas1_table},
    {HK_TABLE_MEMORY_V1, &hkc_memory_table},
    {HK_TABLE_KERNELS_V1, &hkc_kernels_table},
    {HK_TABLE_CUDA_V1, &hkc_cuda_table},
    {HK_TABLE_TRIM_V1, &trim_table},
};

hk_status_t hkc_get_table(const char *name, const void **table)
{
    if (!table)
        return HK_STATUS_NULL_POINTER;
    *table = NULL;
    if (!name)
        return HK_STATUS_NULL_POINTER;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        if (strcmp(tables[i].name, name) == 0) {
            *table = tables[i].table;
            return HK_STATUS_OK;
        }
    }
    return HK_STATUS_NOT_FOUND;
}

hk_status_t hkc_enum_tables(size_t index, const char **name)
{
    if (!name)
        return HK_STATUS_NULL_POINTER;
    if (index >= sizeof tables / sizeof tables[0]) {
        *name = NULL;
        return HK_STATUS_NOT_FOUND;
    }
    *name = tables[index].name;
    return HK_STATUS_OK;
}
