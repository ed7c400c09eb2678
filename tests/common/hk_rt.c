/* hk_rt: cudart on a real driver, simcuda_rt_* on the simulation (see hk_rt.h).
 *
 * Nothing here includes cuda.h or cuda_runtime.h: the few signatures needed are
 * spelled with plain C types (CUresult and cudaError_t are int-sized enums,
 * CUdeviceptr is unsigned long long, handles are pointers), so any test program
 * can link this file without the toolkit's headers. */
#include "hk_rt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HK__RT_CTX_DESTROYED 709 /* CUDA_ERROR_CONTEXT_IS_DESTROYED */

typedef int (*hk__rt_int_fn)(int);
typedef int (*hk__rt_intp_fn)(int *);
typedef int (*hk__rt_void_fn)(void);
typedef int (*hk__rt_malloc_fn)(void **, size_t);
typedef int (*hk__rt_ptr_fn)(void *);
typedef int (*hk__rt_ptrp_fn)(void **);
typedef void *(*hk__rt_ctx_fn)(void);
typedef int (*hk__drv_alloc_fn)(unsigned long long *, size_t);
typedef int (*hk__drv_free_fn)(unsigned long long);
typedef int (*hk__drv_stream_create_fn)(void **, unsigned);
typedef int (*hk__drv_ctx_id_fn)(void *, unsigned long long *);

static struct {
    pthread_once_t once;
    int sim;
    int available;
    char why[512];
    /* real driver: cudart */
    hk__rt_int_fn set_device;
    hk__rt_intp_fn get_device;
    hk__rt_void_fn device_reset;
    hk__rt_malloc_fn malloc_;
    hk__rt_ptr_fn free_;
    hk__rt_ptrp_fn stream_create;
    hk__rt_ptr_fn stream_destroy;
    /* simulation: simcuda_rt_* and the driver entries the runtime would use */
    hk__rt_ctx_fn sim_current;
    hk__drv_alloc_fn mem_alloc;
    hk__drv_free_fn mem_free;
    hk__drv_stream_create_fn drv_stream_create;
    hk__rt_ptr_fn drv_stream_destroy;
    hk__drv_ctx_id_fn ctx_get_id;
} rt = {.once = PTHREAD_ONCE_INIT};

/* The library handles stay open for the life of the process on purpose: the
 * driver and the runtime are never unloaded by the programs that use them. */
static void *hk__rt_sym(void *lib, const char *name, int *missing)
{
    void *p = dlsym(lib, name);
    if (!p && !*missing) {
        *missing = 1;
        snprintf(rt.why, sizeof rt.why, "symbol %s not found", name);
    }
    return p;
}

static void hk__rt_open_sim(void *drv)
{
    int missing = 0;
    rt.set_device = (hk__rt_int_fn)hk__rt_sym(drv, "simcuda_rt_set_device", &missing);
    rt.get_device = (hk__rt_intp_fn)hk__rt_sym(drv, "simcuda_rt_get_device", &missing);
    rt.device_reset = (hk__rt_void_fn)hk__rt_sym(drv, "simcuda_rt_device_reset", &missing);
    rt.sim_current = (hk__rt_ctx_fn)hk__rt_sym(drv, "simcuda_current_context", &missing);
    rt.mem_alloc = (hk__drv_alloc_fn)hk__rt_sym(drv, "cuMemAlloc_v2", &missing);
    rt.mem_free = (hk__drv_free_fn)hk__rt_sym(drv, "cuMemFree_v2", &missing);
    rt.drv_stream_create = (hk__drv_stream_create_fn)hk__rt_sym(drv, "cuStreamCreate", &missing);
    rt.drv_stream_destroy = (hk__rt_ptr_fn)hk__rt_sym(drv, "cuStreamDestroy_v2", &missing);
    rt.ctx_get_id = (hk__drv_ctx_id_fn)hk__rt_sym(drv, "cuCtxGetId", &missing);
    rt.available = !missing;
}

static void hk__rt_open_cudart(void)
{
    static const char *const names[] = {"libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so.13"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib && i == 0) {
            const char *err = dlerror();
            snprintf(rt.why, sizeof rt.why, "cannot open libcudart.so.13: %s",
                     err ? err : "unknown error");
        }
    }
    if (!lib)
        return;
    int missing = 0;
    rt.set_device = (hk__rt_int_fn)hk__rt_sym(lib, "cudaSetDevice", &missing);
    rt.get_device = (hk__rt_intp_fn)hk__rt_sym(lib, "cudaGetDevice", &missing);
    rt.device_reset = (hk__rt_void_fn)hk__rt_sym(lib, "cudaDeviceReset", &missing);
    rt.malloc_ = (hk__rt_malloc_fn)hk__rt_sym(lib, "cudaMalloc", &missing);
    rt.free_ = (hk__rt_ptr_fn)hk__rt_sym(lib, "cudaFree", &missing);
    rt.stream_create = (hk__rt_ptrp_fn)hk__rt_sym(lib, "cudaStreamCreate", &missing);
    rt.stream_destroy = (hk__rt_ptr_fn)hk__rt_sym(lib, "cudaStreamDestroy", &missing);
    if (missing)
        return;
    rt.available = 1;
    rt.why[0] = '\0';
}

static void hk__rt_init(void)
{
    const char *path = getenv("HK_CUDA_DRIVER");
    void *drv = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (drv && dlsym(drv, "simcuda_is_simulated")) {
        rt.sim = 1;
        hk__rt_open_sim(drv);
        return;
    }
    hk__rt_open_cudart();
}

static int hk__rt_ready(void)
{
    pthread_once(&rt.once, hk__rt_init);
    return rt.available;
}

int hk_rt_is_sim(void)
{
    pthread_once(&rt.once, hk__rt_init);
    return rt.sim;
}

int hk_rt_available(void)
{
    return hk__rt_ready();
}

const char *hk_rt_why_unavailable(void)
{
    return hk__rt_ready() ? "" : rt.why;
}

int hk_rt_set_device(int dev)
{
    return hk__rt_ready() ? rt.set_device(dev) : -1;
}

int hk_rt_get_device(int *dev)
{
    return hk__rt_ready() ? rt.get_device(dev) : -1;
}

int hk_rt_device_reset(void)
{
    return hk__rt_ready() ? rt.device_reset() : -1;
}

/* What every runtime call does first: use the current context, but when none
 * is current, or the current one is a primary that a reset made inactive, take
 * (again) the runtime's retain of the current device's primary. */
static int hk__rt_sim_lazy_init(void)
{
    unsigned long long id;
    if (rt.sim_current() && rt.ctx_get_id(NULL, &id) != HK__RT_CTX_DESTROYED)
        return 0;
    int dev = 0;
    int r = rt.get_device(&dev);
    return r ? r : rt.set_device(dev);
}

int hk_rt_malloc(void **p, size_t bytes)
{
    if (!hk__rt_ready())
        return -1;
    if (!rt.sim)
        return rt.malloc_(p, bytes);
    int r = hk__rt_sim_lazy_init();
    if (r)
        return r;
    unsigned long long d = 0;
    r = rt.mem_alloc(&d, bytes);
    if (r == 0)
        *p = (void *)(uintptr_t)d;
    return r;
}

int hk_rt_free(void *p)
{
    if (!hk__rt_ready())
        return -1;
    if (!rt.sim)
        return rt.free_(p);
    return p ? rt.mem_free((unsigned long long)(uintptr_t)p) : 0;
}

int hk_rt_stream_create(void **stream)
{
    if (!hk__rt_ready())
        return -1;
    if (!rt.sim)
        return rt.stream_create(stream);
    int r = hk__rt_sim_lazy_init();
    return r ? r : rt.drv_stream_create(stream, 0);
}

int hk_rt_stream_destroy(void *stream)
{
    if (!hk__rt_ready())
        return -1;
    return rt.sim ? rt.drv_stream_destroy(stream) : rt.stream_destroy(stream);
}
