/* hk-cpu: table "hk.memory/1". "Device" memory is host memory, 64-byte aligned
 * like a GPU allocation would be, so hosts can run one workload anywhere. */
#include <stdlib.h>
#include <string.h>

#include "hk_memory.h"
#include "hkcpu.h"

#define CHECK_HANDLE(h, fn)                                                         \
    do {                                                                            \
        hk_status_t st_ = hk__cpu_check((h), fn);                                   \
        if (st_ != HK_STATUS_OK)                                                    \
            return st_;                                                             \
    } while (0)

static hk_status_t cpu_alloc(hk_handle_t *h, size_t bytes, void **out)
{
    CHECK_HANDLE(h, "alloc");
    if (!out)
        return hk__cpu_fail(h, HK_STATUS_NULL_POINTER, "alloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return HK_STATUS_OK;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes)
        return hk__cpu_fail(h, HK_STATUS_INVALID_VALUE, "alloc: %zu bytes is too large", bytes);
    void *p = aligned_alloc(64, rounded);
    if (!p)
        return hk__cpu_fail(h, HK_STATUS_OUT_OF_MEMORY, "alloc: %zu bytes: out of memory", bytes);
    *out = p;
    return HK_STATUS_OK;
}

static hk_status_t cpu_free(hk_handle_t *h, void *ptr)
{
    CHECK_HANDLE(h, "free");
    free(ptr);
    return HK_STATUS_OK;
}

static hk_status_t copy_checked(hk_handle_t *h, const char *fn, void *dst, const void *src,
                                size_t bytes)
{
    CHECK_HANDLE(h, fn);
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst || !src)
        return hk__cpu_fail(h, HK_STATUS_NULL_POINTER, "%s: %s is NULL", fn,
                            !dst ? "dst" : "src");
    memmove(dst, src, bytes);
    return HK_STATUS_OK;
}

static hk_status_t cpu_copy_to_device(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    return copy_checked(h, "copy_to_device", dst, src, bytes);
}

static hk_status_t cpu_copy_to_host(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    return copy_checked(h, "copy_to_host", dst, src, bytes);
}

static hk_status_t cpu_memset(hk_handle_t *h, void *dst, int value, size_t bytes)
{
    CHECK_HANDLE(h, "memset");
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst)
        return hk__cpu_fail(h, HK_STATUS_NULL_POINTER, "memset: dst is NULL");
    memset(dst, (unsigned char)value, bytes);
    return HK_STATUS_OK;
}

const hk_memory_v1_t hk__cpu_memory = {
    .size = sizeof(hk_memory_v1_t),
    .alloc = cpu_alloc,
    .free_ = cpu_free,
    .copy_to_device = cpu_copy_to_device,
    .copy_to_host = cpu_copy_to_host,
    .memset_ = cpu_memset,
};
