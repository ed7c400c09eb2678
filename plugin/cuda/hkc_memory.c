/* hk-cuda: table "hk.memory/1" (plugin_api/hk_memory.h): device memory of the
 * handle's context, so a host can run one workload on any implementation.
 * Every slot runs under the context guard, so the caller's context is left
 * as it was. Not for the hot path: the copies synchronise the stream.
 *
 * A slot reports failure only when its work was not done, so repeating a
 * failed call is always safe: once cuMemFree has freed the block, free_
 * returns OK whatever happens after it (hkc_call_end never turns a done call
 * into a failure); a repeated free could free a block that another thread
 * was given at the same address meanwhile. */
#include <stdio.h>

#include "hk_memory.h"
#include "hkc_internal.h"

static hk_status_t mem_alloc(hk_handle_t *h, size_t bytes, void **out)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!out)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "alloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return HK_STATUS_OK;
    hkc_call_t c;
    hk_status_t st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    CUdeviceptr p = 0;
    CUresult r = hkc_relaxed_alloc(&p, bytes); /* never refused, nor breaking, in a capture */
    if (r != CUDA_SUCCESS) {
        char what[80]; /* the reason names the size, as hk.memory/1 says */
        snprintf(what, sizeof what, "alloc: cuMemAlloc of %zu bytes", bytes);
        st = hkc_fail_cu(h, r, what);
    }
    st = hkc_call_end(&c, st);
    if (st == HK_STATUS_OK)
        *out = (void *)(uintptr_t)p;
    return st;
}

static hk_status_t mem_free(hk_handle_t *h, void *ptr)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!ptr)
        return HK_STATUS_OK;
    hkc_call_t c;
    hk_status_t st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    CUresult r = hkc_relaxed_free((CUdeviceptr)(uintptr_t)ptr); /* as alloc */
    if (r == CUDA_ERROR_INVALID_VALUE) /* the driver knows no such allocation */
        st = hkc_fail(h, HK_STATUS_INVALID_VALUE,
                      "free_: %p is not the start of a live hk-cuda allocation (foreign, "
                      "already freed, or inside a block); cuMemFree: CUDA_ERROR_INVALID_VALUE",
                      ptr);
    else if (r != CUDA_SUCCESS)
        st = hkc_fail_cu(h, r, "free: cuMemFree");
    return hkc_call_end(&c, st);
}

static hk_status_t copy_to_device(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst || !src)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "copy_to_device: %s is NULL",
                        !dst ? "dst" : "src");
    hkc_call_t c;
    hk_status_t st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    st = hk_kit_check_wait(&c.k, "copy_to_device");
    if (st == HK_STATUS_OK) {
        int mode;
        CUresult r = hkc_relax(&mode);
        if (r == CUDA_SUCCESS) {
            r = hkc_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes, c.stream);
            if (r == CUDA_SUCCESS)
                r = hkc_cu.cuStreamSynchronize(c.stream);
            hkc_relaxed_end(mode);
        }
        if (r != CUDA_SUCCESS)
            st = hkc_fail_cu(h, r, "copy_to_device");
    }
    return hkc_call_end(&c, st);
}

static hk_status_t copy_to_host(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst || !src)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "copy_to_host: %s is NULL",
                        !dst ? "dst" : "src");
    hkc_call_t c;
    hk_status_t st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    st = hk_kit_check_wait(&c.k, "copy_to_host");
    if (st == HK_STATUS_OK) {
        int mode;
        CUresult r = hkc_relax(&mode);
        if (r == CUDA_SUCCESS) {
            r = hkc_cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, bytes, c.stream);
            if (r == CUDA_SUCCESS)
                r = hkc_cu.cuStreamSynchronize(c.stream);
            hkc_relaxed_end(mode);
        }
        if (r != CUDA_SUCCESS)
            st = hkc_fail_cu(h, r, "copy_to_host");
    }
    return hkc_call_end(&c, st);
}

static hk_status_t mem_set(hk_handle_t *h, void *dst, int value, size_t bytes)
{
    if (!hkc_valid(h))
        return HK_STATUS_INVALID_HANDLE;
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst)
        return hkc_fail(h, HK_STATUS_NULL_POINTER, "memset: dst is NULL");
    hkc_call_t c;
    hk_status_t st = hkc_call_begin(h, &c);
    if (st != HK_STATUS_OK)
        return st;
    CUresult r = hkc_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)dst, (unsigned char)value, bytes,
                                        c.stream);
    if (r != CUDA_SUCCESS)
        st = hkc_fail_cu(h, r, "memset: cuMemsetD8Async");
    return hkc_call_end(&c, st);
}

const hk_memory_v1_t hkc_memory_table = {
    .size = sizeof(hk_memory_v1_t),
    .alloc = mem_alloc,
    .free_ = mem_free,
    .copy_to_device = copy_to_device,
    .copy_to_host = copy_to_host,
    .memset_ = mem_set,
};
