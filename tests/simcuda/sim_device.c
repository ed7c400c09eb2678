/* simcuda devices and primary contexts: queries, retain/release/reset with
 * their reference counts (docs/contexts.md facts 2, 8, 10), and the runtime-like
 * simcuda_rt_* operations built on them (facts 1, 3, 8). */
#include "sim_internal.h"

#include <stdio.h>
#include <string.h>

#define SIM_DEV_CHECK(dev) SIM_FAIL_IF((dev) < 0 || (dev) >= sim.ndev, CUDA_ERROR_INVALID_DEVICE)

SIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    SIM_BEGIN(cuDeviceGet);
    SIM_FAIL_IF(!device, CUDA_ERROR_INVALID_VALUE);
    SIM_DEV_CHECK(ordinal);
    *device = ordinal;
    SIM_END;
}

SIM_API CUresult cuDeviceGetCount(int *count)
{
    SIM_BEGIN(cuDeviceGetCount);
    SIM_FAIL_IF(!count, CUDA_ERROR_INVALID_VALUE);
    *count = sim.ndev;
    SIM_END;
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SIM_BEGIN(cuDeviceGetName);
    SIM_FAIL_IF(!name || len <= 0, CUDA_ERROR_INVALID_VALUE);
    SIM_DEV_CHECK(dev);
    snprintf(name, (size_t)len, "simcuda device %d", dev);
    SIM_END;
}

/* The few attributes a library asks for, with H200-like values; the rest
 * read as 0. */
static int sim_attribute(CUdevice_attribute a)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return SIM_SM_COUNT;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return SIM_SHARED_OPTIN;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
    default: return 0;
    }
}

SIM_API CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attrib, CUdevice dev)
{
    SIM_BEGIN(cuDeviceGetAttribute);
    SIM_FAIL_IF(!value || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX,
                CUDA_ERROR_INVALID_VALUE);
    SIM_DEV_CHECK(dev);
    *value = sim_attribute(attrib);
    SIM_END;
}

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SIM_BEGIN(cuDeviceTotalMem);
    SIM_FAIL_IF(!bytes, CUDA_ERROR_INVALID_VALUE);
    SIM_DEV_CHECK(dev);
    *bytes = (size_t)SIM_DEVICE_MEM;
    SIM_END;
}

CUresult sim_primary_retain(int dev, struct CUctx_st **out)
{
    sim_device_t *d = &sim.dev[dev];
    if (!d->primary->alive)
        sim_ctx_start(d->primary);
    d->refcount++;
    if (out)
        *out = d->primary;
    return CUDA_SUCCESS;
}

/* Releasing the last retain deactivates the primary (fact 2); a release
 * without a retain is refused (fact 10). */
CUresult sim_primary_release(int dev)
{
    sim_device_t *d = &sim.dev[dev];
    if (d->refcount == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (--d->refcount == 0)
        sim_ctx_end(d->primary);
    return CUDA_SUCCESS;
}

/* Fact 8 as measured: inactive at once; the runtime's own retain goes, the
 * other parties' retains stay (each still releases once, and a retain beyond
 * them brings the same CUcontext back with a new ID). */
void sim_primary_reset(int dev)
{
    sim_device_t *d = &sim.dev[dev];
    sim_ctx_end(d->primary);
    if (d->rt_retained)
        d->refcount--;
    d->rt_retained = 0;
}

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_BEGIN(cuDevicePrimaryCtxRetain);
    SIM_FAIL_IF(!pctx, CUDA_ERROR_INVALID_VALUE);
    SIM_DEV_CHECK(dev);
    SIM_CHECK(sim_primary_retain(dev, pctx));
    SIM_END;
}

static CUresult sim_primary_release_entry(CUdevice dev)
{
    SIM_BEGIN(cuDevicePrimaryCtxRelease);
    SIM_DEV_CHECK(dev);
    SIM_CHECK(sim_primary_release(dev));
    SIM_END;
}

SIM_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return sim_primary_release_entry(dev);
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return sim_primary_release_entry(dev);
}

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SIM_BEGIN(cuDevicePrimaryCtxGetState);
    SIM_FAIL_IF(!flags || !active, CUDA_ERROR_INVALID_VALUE);
    SIM_DEV_CHECK(dev);
    *flags = sim.dev[dev].primary_flags;
    *active = sim.dev[dev].primary->alive;
    SIM_END;
}

static CUresult sim_primary_set_flags(CUdevice dev, unsigned flags)
{
    SIM_BEGIN(cuDevicePrimaryCtxSetFlags);
    SIM_DEV_CHECK(dev);
    SIM_FAIL_IF(flags & ~0xffu, CUDA_ERROR_INVALID_VALUE);
    sim.dev[dev].primary_flags = flags;
    SIM_END;
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return sim_primary_set_flags(dev, flags);
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    return sim_primary_set_flags(dev, flags);
}

static CUresult sim_primary_reset_entry(CUdevice dev)
{
    SIM_BEGIN(cuDevicePrimaryCtxReset);
    SIM_DEV_CHECK(dev);
    sim_primary_reset(dev);
    SIM_END;
}

SIM_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return sim_primary_reset_entry(dev);
}

SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return sim_primary_reset_entry(dev);
}

/* ---- introspection and runtime-like operations (simcuda.h) ---- */

SIM_API int simcuda_is_simulated(void)
{
    return 1;
}

SIM_API int simcuda_primary_refcount(int device)
{
    pthread_mutex_lock(&sim.lock);
    int n = device >= 0 && device < sim.ndev ? sim.dev[device].refcount : -1;
    pthread_mutex_unlock(&sim.lock);
    return n;
}

SIM_API int simcuda_primary_active(int device)
{
    pthread_mutex_lock(&sim.lock);
    int a = device >= 0 && device < sim.ndev ? sim.dev[device].primary->alive : -1;
    pthread_mutex_unlock(&sim.lock);
    return a;
}

SIM_API int simcuda_rt_set_device(int device)
{
    if (sim_forked)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&sim.lock);
    sim_init_locked(); /* the runtime initialises the driver itself */
    CUresult r = CUDA_SUCCESS;
    if (!sim.initialized)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (device < 0 || device >= sim.ndev)
        r = CUDA_ERROR_INVALID_DEVICE;
    else {
        sim_device_t *d = &sim.dev[device];
        if (!d->rt_retained) {
            sim_primary_retain(device, NULL);
            d->rt_retained = 1;
        }
        sim_tls_set_top(d->primary);
    }
    pthread_mutex_unlock(&sim.lock);
    return (int)r;
}

SIM_API int simcuda_rt_get_device(int *device)
{
    if (sim_forked)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim.lock);
    struct CUctx_st *c = sim_tls.depth ? sim_tls.stack[sim_tls.depth - 1] : NULL;
    *device = c ? c->device : 0;
    pthread_mutex_unlock(&sim.lock);
    return 0;
}

SIM_API int simcuda_rt_device_reset(void)
{
    if (sim_forked)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&sim.lock);
    sim_init_locked();
    CUresult r = CUDA_SUCCESS;
    if (!sim.initialized)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        struct CUctx_st *c = sim_tls.depth ? sim_tls.stack[sim_tls.depth - 1] : NULL;
        sim_primary_reset(c ? c->device : 0);
    }
    pthread_mutex_unlock(&sim.lock);
    return (int)r;
}
