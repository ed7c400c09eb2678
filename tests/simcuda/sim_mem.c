/* simcuda device memory: host memory underneath, each block owned by the
 * context that allocated it and so by that context's device (docs/contexts.md fact
 * 11), dropped when that context ends. Copies and memsets check that device
 * ranges lie inside one live block. */
#include "sim_internal.h"

#include <stdlib.h>
#include <string.h>

#define SIM_ALIGN 256

static sim_alloc_t *sim_mem_find_mut(uintptr_t p)
{
    for (size_t i = 0; i < sim.nallocs; i++)
        if (p >= sim.allocs[i].base && p - sim.allocs[i].base < sim.allocs[i].size)
            return &sim.allocs[i];
    return NULL;
}

const sim_alloc_t *sim_mem_find(uintptr_t p)
{
    return sim_mem_find_mut(p);
}

static void sim_mem_remove(sim_alloc_t *a)
{
    free((void *)a->base);
    *a = sim.allocs[--sim.nallocs];
}

void sim_mem_drop_ctx(struct CUctx_st *c)
{
    for (size_t i = 0; i < sim.nallocs;) {
        if (sim.allocs[i].ctx == c)
            sim_mem_remove(&sim.allocs[i]);
        else
            i++;
    }
}

void sim_mem_free_all(void)
{
    while (sim.nallocs)
        sim_mem_remove(&sim.allocs[sim.nallocs - 1]);
    free(sim.allocs);
    sim.allocs = NULL;
    sim.cap_allocs = 0;
}

/* A device range [p, p+n) inside one live block. */
static CUresult sim_range(CUdeviceptr p, size_t n)
{
    const sim_alloc_t *a = sim_mem_find((uintptr_t)p);
    if (!a || n > a->size - ((uintptr_t)p - a->base))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* A new block of the current context: device memory, or page-locked host
 * memory mapped for the device (host = 1), both plain host memory here. */
static CUresult sim_mem_new(size_t bytes, int host, int ordered, void **out)
{
    struct CUctx_st *c;
    CUresult r = sim_current(&c);
    if (r == CUDA_SUCCESS)
        r = sim_capture_forbid();
    if (r != CUDA_SUCCESS)
        return r;
    /* Fact 30: under a service in c, an allocation waits for a pause (only
     * with the quiet model on; a stream-ordered one does not); c may have
     * died meanwhile. */
    if (!ordered) {
        sim_quiet_wait(c);
        if ((r = sim_current(&c)) != CUDA_SUCCESS)
            return r;
    }
    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes > SIM_DEVICE_MEM)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (sim.nallocs == sim.cap_allocs) {
        size_t cap = sim.cap_allocs ? 2 * sim.cap_allocs : 64;
        sim_alloc_t *grown = realloc(sim.allocs, cap * sizeof *grown);
        if (!grown)
            return CUDA_ERROR_OUT_OF_MEMORY;
        sim.allocs = grown;
        sim.cap_allocs = cap;
    }
    void *p = aligned_alloc(SIM_ALIGN, (bytes + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim.allocs[sim.nallocs++] = (sim_alloc_t){(uintptr_t)p, bytes, c, c->device, host};
    *out = p;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    SIM_BEGIN(cuMemAlloc);
    SIM_FAIL_IF(!dptr, CUDA_ERROR_INVALID_VALUE);
    void *p;
    SIM_CHECK(sim_mem_new(bytes, 0, 0, &p));
    *dptr = (CUdeviceptr)(uintptr_t)p;
    SIM_END;
}

/* Page-locked host memory; with unified addressing its device address is its
 * host address, as on the real driver. */
SIM_API CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags)
{
    SIM_BEGIN(cuMemHostAlloc);
    SIM_FAIL_IF(!pp, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                    CU_MEMHOSTALLOC_WRITECOMBINED),
                CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK(sim_mem_new(bytes, 1, 0, pp));
    SIM_END;
}

SIM_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *p, unsigned int flags)
{
    SIM_BEGIN(cuMemHostGetDevicePointer);
    SIM_FAIL_IF(!dptr || flags != 0, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    SIM_CHECK(sim_current(&c));
    const sim_alloc_t *a = sim_mem_find((uintptr_t)p);
    SIM_FAIL_IF(!a || !a->host, CUDA_ERROR_INVALID_VALUE);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    SIM_END;
}

/* Fact 30: a free waits for a pause in a service in the block's context
 * (only with the quiet model on); the block is looked up again after. */
static void sim_mem_free_wait(uintptr_t p)
{
    sim_alloc_t *a = sim_mem_find_mut(p);
    if (a && a->base == p)
        sim_quiet_wait(a->ctx);
}

SIM_API CUresult cuMemFreeHost(void *p)
{
    SIM_BEGIN(cuMemFreeHost);
    SIM_CHECK(sim_capture_forbid());
    sim_mem_free_wait((uintptr_t)p);
    sim_alloc_t *a = sim_mem_find_mut((uintptr_t)p);
    SIM_FAIL_IF(!a || !a->host || a->base != (uintptr_t)p, CUDA_ERROR_INVALID_VALUE);
    sim_mem_remove(a);
    SIM_END;
}

SIM_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    SIM_BEGIN(cuMemFree);
    SIM_CHECK(sim_capture_forbid());
    if (dptr == 0)
        goto out;
    sim_mem_free_wait((uintptr_t)dptr);
    sim_alloc_t *a = sim_mem_find_mut((uintptr_t)dptr);
    SIM_FAIL_IF(!a || a->host || a->base != (uintptr_t)dptr, CUDA_ERROR_INVALID_VALUE);
    sim_mem_remove(a);
    SIM_END;
}

/* Stream-ordered allocation and free. Every pending block runs at entry, so
 * the stream's earlier work is done and the block is made or freed at once,
 * which is when the stream reaches it. A free of a block cuMemAlloc made is
 * allowed, as on an H200 (docs/contexts.md fact 30). On a capturing stream
 * the driver would add a graph node: not modelled, refused with
 * CUDA_ERROR_NOT_SUPPORTED (the capture is left as it was). Neither waits
 * for a pause in other threads' launches (fact 30). */
static CUresult sim_mem_async_stream(CUstream stream)
{
    struct CUctx_st *c;
    struct CUstream_st *s;
    CUresult r = sim_stream_target(stream, &c, &s);
    if (r == CUDA_SUCCESS && s->capturing)
        r = CUDA_ERROR_NOT_SUPPORTED;
    return r;
}

SIM_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
    SIM_BEGIN(cuMemAllocAsync);
    SIM_FAIL_IF(!dptr, CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK(sim_mem_async_stream(stream));
    void *p;
    SIM_CHECK(sim_mem_new(bytes, 0, 1, &p));
    *dptr = (CUdeviceptr)(uintptr_t)p;
    SIM_END;
}

SIM_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    SIM_BEGIN(cuMemFreeAsync);
    SIM_CHECK(sim_mem_async_stream(stream));
    sim_alloc_t *a = sim_mem_find_mut((uintptr_t)dptr);
    SIM_FAIL_IF(!a || a->host || a->base != (uintptr_t)dptr, CUDA_ERROR_INVALID_VALUE);
    sim_mem_remove(a);
    SIM_END;
}

SIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    SIM_BEGIN(cuMemGetInfo);
    SIM_FAIL_IF(!free_bytes || !total, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    SIM_CHECK(sim_current(&c));
    size_t used = 0;
    for (size_t i = 0; i < sim.nallocs; i++)
        if (sim.allocs[i].device == c->device)
            used += sim.allocs[i].size;
    *total = (size_t)SIM_DEVICE_MEM;
    *free_bytes = *total - used;
    SIM_END;
}

/* The stream a copy or memset goes to: the given one for the async forms,
 * else the current context's legacy stream; the legacy stream is refused
 * while a blocking stream of its context captures (sim_capture.c). */
static CUresult sim_mem_stream(int async, CUstream stream, struct CUstream_st **s)
{
    struct CUctx_st *c;
    CUresult r = sim_stream_target(async ? stream : CU_STREAM_LEGACY, &c, s);
    return r == CUDA_SUCCESS ? sim_capture_legacy(c, *s) : r;
}

/* The common part of every copy: a usable current context and, for the async
 * forms, a stream of that context. Device sides must be live ranges; a host
 * side is taken on trust, as the real driver does. On a capturing stream the
 * copy becomes a node of its graph. */
static CUresult sim_copy(void *dst, const void *src, size_t n, int dst_dev, int src_dev,
                         int async, CUstream stream)
{
    struct CUstream_st *s;
    CUresult r = sim_mem_stream(async, stream, &s);
    if (r == CUDA_SUCCESS && n && dst_dev)
        r = sim_range((CUdeviceptr)(uintptr_t)dst, n);
    if (r == CUDA_SUCCESS && n && src_dev)
        r = sim_range((CUdeviceptr)(uintptr_t)src, n);
    if (r == CUDA_SUCCESS && n && (!dst || !src))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && n && s->capturing)
        return sim_capture_copy(s, dst, src, n);
    if (r == CUDA_SUCCESS && n)
        memmove(dst, src, n);
    return r;
}

#define SIM_PTR(d) ((void *)(uintptr_t)(d))

SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    SIM_BEGIN(cuMemcpyHtoD);
    SIM_CHECK(sim_copy(SIM_PTR(dst), src, n, 1, 0, 0, NULL));
    SIM_END;
}

SIM_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    SIM_BEGIN(cuMemcpyDtoH);
    SIM_CHECK(sim_copy(dst, SIM_PTR(src), n, 0, 1, 0, NULL));
    SIM_END;
}

SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    SIM_BEGIN(cuMemcpyDtoD);
    SIM_CHECK(sim_copy(SIM_PTR(dst), SIM_PTR(src), n, 1, 1, 0, NULL));
    SIM_END;
}

SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    SIM_BEGIN(cuMemcpyHtoDAsync);
    SIM_CHECK(sim_copy(SIM_PTR(dst), src, n, 1, 0, 1, s));
    SIM_END;
}

SIM_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    SIM_BEGIN(cuMemcpyDtoHAsync);
    SIM_CHECK(sim_copy(dst, SIM_PTR(src), n, 0, 1, 1, s));
    SIM_END;
}

SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    SIM_BEGIN(cuMemcpyDtoDAsync);
    SIM_CHECK(sim_copy(SIM_PTR(dst), SIM_PTR(src), n, 1, 1, 1, s));
    SIM_END;
}

/* Unified addressing: each side is device memory when it lies in a block. */
SIM_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    SIM_BEGIN(cuMemcpy);
    SIM_CHECK(sim_copy(SIM_PTR(dst), SIM_PTR(src), n, sim_mem_find(dst) != NULL,
                       sim_mem_find(src) != NULL, 0, NULL));
    SIM_END;
}

SIM_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    SIM_BEGIN(cuMemcpyAsync);
    SIM_CHECK(sim_copy(SIM_PTR(dst), SIM_PTR(src), n, sim_mem_find(dst) != NULL,
                       sim_mem_find(src) != NULL, 1, s));
    SIM_END;
}

static CUresult sim_memset(CUdeviceptr dst, unsigned value, size_t n, size_t unit, int async,
                           CUstream stream)
{
    struct CUstream_st *s;
    CUresult r = sim_mem_stream(async, stream, &s);
    if (r == CUDA_SUCCESS && unit == 4 && (dst & 3))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && n)
        r = sim_range(dst, n * unit);
    if (r != CUDA_SUCCESS || n == 0)
        return r;
    if (s->capturing)
        return sim_capture_memset(s, SIM_PTR(dst), value, unit, n);
    if (unit == 1) {
        memset(SIM_PTR(dst), (int)(value & 0xff), n);
    } else {
        uint32_t *p = SIM_PTR(dst);
        for (size_t i = 0; i < n; i++)
            p[i] = value;
    }
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)
{
    SIM_BEGIN(cuMemsetD8);
    SIM_CHECK(sim_memset(dst, uc, n, 1, 0, NULL));
    SIM_END;
}

SIM_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int ui, size_t n)
{
    SIM_BEGIN(cuMemsetD32);
    SIM_CHECK(sim_memset(dst, ui, n, 4, 0, NULL));
    SIM_END;
}

SIM_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s)
{
    SIM_BEGIN(cuMemsetD8Async);
    SIM_CHECK(sim_memset(dst, uc, n, 1, 1, s));
    SIM_END;
}

SIM_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s)
{
    SIM_BEGIN(cuMemsetD32Async);
    SIM_CHECK(sim_memset(dst, ui, n, 4, 1, s));
    SIM_END;
}

/* One attribute of a pointer in block a (NULL: not device memory). */
static CUresult sim_attr(CUpointer_attribute attr, void *data, const sim_alloc_t *a, int strict)
{
    if (!a && strict)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = a ? a->ctx : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = !a ? 0 : a->host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = a ? (CUdeviceptr)a->base : 0;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = a ? a->size : 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = a ? a->device : -2; /* what the driver reports for host memory */
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = a ? (unsigned long long)a->base : 0;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = a != NULL;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    SIM_BEGIN(cuPointerGetAttribute);
    SIM_FAIL_IF(!data, CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK(sim_attr(attr, data, sim_mem_find((uintptr_t)ptr), 1));
    SIM_END;
}

/* The plural form answers for host pointers too (NULL context, type 0). */
SIM_API CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
                                        CUdeviceptr ptr)
{
    SIM_BEGIN(cuPointerGetAttributes);
    SIM_FAIL_IF(!attrs || !data, CUDA_ERROR_INVALID_VALUE);
    const sim_alloc_t *a = sim_mem_find((uintptr_t)ptr);
    for (unsigned i = 0; i < n; i++)
        SIM_CHECK(sim_attr(attrs[i], data[i], a, 0));
    SIM_END;
}

SIM_API size_t simcuda_live_allocations(void)
{
    pthread_mutex_lock(&sim.lock);
    size_t n = sim.nallocs;
    pthread_mutex_unlock(&sim.lock);
    return n;
}

SIM_API size_t simcuda_live_host_allocations(void)
{
    pthread_mutex_lock(&sim.lock);
    size_t n = 0;
    for (size_t i = 0; i < sim.nallocs; i++)
        n += sim.allocs[i].host != 0;
    pthread_mutex_unlock(&sim.lock);
    return n;
}

SIM_API CUresult simcuda_emu_check(const simcuda_launch_t *launch, const void *ptr, size_t bytes)
{
    /* Called by an emulation during a launch, which holds sim.lock. */
    const sim_alloc_t *a = sim_mem_find((uintptr_t)ptr);
    /* Mapped host memory is reachable from any device; device memory only
     * from its own (no peer access is modelled). */
    if (!a || !launch || (!a->host && a->device != launch->device) ||
        bytes > a->size - ((uintptr_t)ptr - a->base))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_SUCCESS;
}
