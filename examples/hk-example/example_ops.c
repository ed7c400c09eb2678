/* hk-example: its own table "example.ops/1" (fill, scale) and hk.memory/1.
 *
 * Every slot that touches the GPU has the same shape: check the handle and
 * the arguments (no driver call for a refused call), then
 *     hk_kit_begin  → the handle's context is current, the caller's saved
 *     the work      → on c.stream (the handle's stream)
 *     hk_kit_end    → the caller's context is current again
 * and every failure records one line (hk_kit_fail). */
#include <stdint.h>
#include <stdio.h>

#include "example_internal.h"

#define EX_BLOCK 256u
#define EX_MAX_BLOCKS 4096u

/* n floats from x, not wrapping around the address space. */
static hk_status_t check_vector(hk_handle_t *h, int64_t n, const float *x, const char *op)
{
    if (!x)
        return hk_kit_fail(h->kb, HK_STATUS_NULL_POINTER, "%s: x is NULL", op);
    if ((uint64_t)n > (UINTPTR_MAX - (uintptr_t)x) / sizeof *x)
        return hk_kit_fail(h->kb, HK_STATUS_INVALID_VALUE,
                           "%s: x (%p) with n = %lld runs past the end of the address space", op,
                           (const void *)x, (long long)n);
    return HK_STATUS_OK;
}

/* One kernel over n elements, on the handle's stream in its context. */
static hk_status_t launch(hk_handle_t *h, int kernel, int64_t n, const float *x, void **args,
                          const char *op)
{
    uint64_t blocks = ((uint64_t)n + EX_BLOCK - 1) / EX_BLOCK;
    const uint32_t grid[3] = {blocks < EX_MAX_BLOCKS ? (uint32_t)blocks : EX_MAX_BLOCKS, 1, 1};
    const uint32_t block[3] = {EX_BLOCK, 1, 1};
    hk_kit_call_t c;
    hk_status_t st = hk_kit_begin(h->kb, &c);
    if (st != HK_STATUS_OK)
        return st;
    if (h->flags & HK_CREATE_CHECKED)
        st = hk_kit_check_pointer(h->kb, x, (size_t)n * sizeof *x, op);
    if (st == HK_STATUS_OK)
        st = hk_kit_launch(&c, ex_kernels[kernel], grid, block, 0, args);
    return hk_kit_end(&c, st);
}

static hk_status_t fill(hk_handle_t *h, int64_t n, float value, float *x)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (n <= 0)
        return HK_STATUS_OK;
    hk_status_t st = check_vector(h, n, x, "fill");
    if (st != HK_STATUS_OK)
        return st;
    long long nn = n;
    void *args[] = {&nn, &value, &x};
    return launch(h, EX_FILL, n, x, args, "fill");
}

hk_status_t ex_scale(hk_handle_t *h, int64_t n, const float *alpha, float *x, int device_mode)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (n <= 0)
        return HK_STATUS_OK;
    if (!alpha)
        return hk_kit_fail(h->kb, HK_STATUS_NULL_POINTER, "scale: alpha is NULL");
    hk_status_t st = check_vector(h, n, x, "scale");
    if (st != HK_STATUS_OK)
        return st;
    /* Host pointer mode: the value now. Device pointer mode: the kernel reads
     * it, so the call neither waits nor copies. */
    long long nn = n;
    float a = device_mode ? 0.0f : *alpha;
    const float *alpha_ptr = device_mode ? alpha : NULL;
    void *args[] = {&nn, &a, &alpha_ptr, &x};
    return launch(h, EX_SCALE, n, x, args, "scale");
}

static hk_status_t scale(hk_handle_t *h, int64_t n, const float *alpha, float *x)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    return ex_scale(h, n, alpha, x, atomic_load(&h->pointer_mode) == HK_POINTER_MODE_DEVICE);
}

const example_ops_v1_t ex_ops_table = {
    .size = sizeof(example_ops_v1_t),
    .fill = fill,
    .scale = scale,
};

/* ---- hk.memory/1 (plugin_api/hk_memory.h) ----
 *
 * Stream capture (docs/contexts.md, "Stream capture"): an allocation, a free
 * or a wait for a stream is an "unsafe" call that a capture in progress
 * elsewhere (another thread's in global mode, this thread's on another
 * stream) would refuse and be invalidated by; run in the relaxed capture mode
 * (hk_kit_capture_relax) it is neither. A copy waits for the handle's
 * stream, which no capture allows: it is refused first (hk_kit_check_wait),
 * before anything is enqueued. memset_ waits for nothing and is captured. */

static hk_status_t mem_alloc(hk_handle_t *h, size_t bytes, void **out)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!out)
        return hk_kit_fail(h->kb, HK_STATUS_NULL_POINTER, "alloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return HK_STATUS_OK;
    hk_kit_call_t c;
    hk_status_t st = hk_kit_begin(h->kb, &c);
    if (st != HK_STATUS_OK)
        return st;
    CUdeviceptr p = 0;
    int mode;
    CUresult r = hk_kit_capture_relax(&mode);
    if (r == CUDA_SUCCESS) {
        r = ex_cu.cuMemAlloc(&p, bytes);
        hk_kit_capture_restore(mode);
    }
    if (r != CUDA_SUCCESS) {
        char what[80];
        snprintf(what, sizeof what, "alloc: cuMemAlloc of %zu bytes", bytes);
        st = hk_kit_fail_cu(h->kb, r, what);
    }
    st = hk_kit_end(&c, st);
    if (st == HK_STATUS_OK)
        *out = (void *)(uintptr_t)p;
    return st;
}

static hk_status_t mem_free(hk_handle_t *h, void *ptr)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!ptr)
        return HK_STATUS_OK;
    hk_kit_call_t c;
    hk_status_t st = hk_kit_begin(h->kb, &c);
    if (st != HK_STATUS_OK)
        return st;
    int mode;
    CUresult r = hk_kit_capture_relax(&mode);
    if (r == CUDA_SUCCESS) {
        r = ex_cu.cuMemFree((CUdeviceptr)(uintptr_t)ptr);
        hk_kit_capture_restore(mode);
    }
    if (r == CUDA_ERROR_INVALID_VALUE)
        st = hk_kit_fail(h->kb, HK_STATUS_INVALID_VALUE,
                         "free_: %p is not the start of a live allocation", ptr);
    else if (r != CUDA_SUCCESS)
        st = hk_kit_fail_cu(h->kb, r, "free_: cuMemFree");
    return hk_kit_end(&c, st);
}

/* A copy or a memset: ordered on the handle's stream; the copies wait. */
static hk_status_t transfer(hk_handle_t *h, void *dst, const void *src, int value, size_t bytes,
                            int kind, const char *op)
{
    if (!ex_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst || (kind != 2 && !src))
        return hk_kit_fail(h->kb, HK_STATUS_NULL_POINTER, "%s: %s is NULL", op,
                           !dst ? "dst" : "src");
    hk_kit_call_t c;
    hk_status_t st = hk_kit_begin(h->kb, &c);
    if (st != HK_STATUS_OK)
        return st;
    if (kind == 2) {
        CUresult r = ex_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)dst, (unsigned char)value,
                                           bytes, c.stream);
        if (r != CUDA_SUCCESS)
            st = hk_kit_fail_cu(h->kb, r, op);
        return hk_kit_end(&c, st);
    }
    st = hk_kit_check_wait(&c, op);
    int mode;
    CUresult r = st == HK_STATUS_OK ? hk_kit_capture_relax(&mode) : CUDA_SUCCESS;
    if (st == HK_STATUS_OK && r == CUDA_SUCCESS) {
        if (kind == 0)
            r = ex_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes, c.stream);
        else
            r = ex_cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, bytes, c.stream);
        if (r == CUDA_SUCCESS)
            r = ex_cu.cuStreamSynchronize(c.stream);
        hk_kit_capture_restore(mode);
    }
    if (r != CUDA_SUCCESS)
        st = hk_kit_fail_cu(h->kb, r, op);
    return hk_kit_end(&c, st);
}

static hk_status_t copy_to_device(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    return transfer(h, dst, src, 0, bytes, 0, "copy_to_device");
}

static hk_status_t copy_to_host(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    return transfer(h, dst, src, 0, bytes, 1, "copy_to_host");
}

static hk_status_t mem_set(hk_handle_t *h, void *dst, int value, size_t bytes)
{
    return transfer(h, dst, NULL, value, bytes, 2, "memset_");
}

const hk_memory_v1_t ex_memory_table = {
    .size = sizeof(hk_memory_v1_t),
    .alloc = mem_alloc,
    .free_ = mem_free,
    .copy_to_device = copy_to_device,
    .copy_to_host = copy_to_host,
    .memset_ = mem_set,
};
