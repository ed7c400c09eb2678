/* hk-validate: the CUDA driver, opened by the validator itself (hkv_cuda.h). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkv_cuda.h"

hkv_cu_t hkv_cu;

typedef hkv_curesult_t (*hkv_getproc_fn)(const char *symbol, void **pfn, int version,
                                         unsigned long long flags, int *status);

int hkv_cu_open(char *why, size_t len)
{
    const char *path = getenv("HK_CUDA_DRIVER");
    if (!path || !*path)
        path = "libcuda.so.1";
    /* The driver stays loaded for the life of the check process on purpose. */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, len, "cannot open the CUDA driver %s: %s", path, e ? e : "unknown error");
        return -1;
    }
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    if (!sym) {
        snprintf(why, len, "the CUDA driver %s has no cuGetProcAddress_v2", path);
        return -1;
    }
    hkv_getproc_fn getproc;
    memcpy(&getproc, &sym, sizeof sym);
    void *fn;
    int st;
#define HKV_CU_TAKE(name, ver, params)                                                       \
    fn = NULL;                                                                             \
    st = 0;                                                                                \
    if (getproc(#name, &fn, ver, 0, &st) != 0 || !fn) {                                    \
        snprintf(why, len, "the CUDA driver %s gives no %s at version %d", path, #name, ver); \
        return -1;                                                                         \
    }                                                                                      \
    memcpy(&hkv_cu.name, &fn, sizeof fn);
    HKV_CU_ENTRIES(HKV_CU_TAKE)
#undef HKV_CU_TAKE
    hkv_curesult_t r = hkv_cu.cuInit(0);
    if (r != 0) {
        snprintf(why, len, "cuInit failed with CUDA error %d", r);
        return -1;
    }
    return 0;
}

hkv_cuctx_t hkv_cu_primary(int dev)
{
    hkv_cudevice_t d;
    hkv_cuctx_t ctx = NULL;
    if (hkv_cu.cuDeviceGet(&d, dev) != 0 || hkv_cu.cuDevicePrimaryCtxRetain(&ctx, d) != 0)
        return NULL;
    hkv_cu.cuDevicePrimaryCtxRelease(d);
    return ctx;
}

hkv_curesult_t hkv_cu_user_context(int dev, hkv_cuctx_t *ctx)
{
    hkv_cudevice_t d;
    hkv_curesult_t res = hkv_cu.cuDeviceGet(&d, dev);
    return res ? res : hkv_cu.cuCtxCreate(ctx, 0, d);
}

hkv_cuctx_t hkv_cu_current(void)
{
    hkv_cuctx_t ctx = NULL;
    if (hkv_cu.cuCtxGetCurrent(&ctx) != 0)
        return (hkv_cuctx_t)(intptr_t)-1;
    return ctx;
}

unsigned long long hkv_cu_id(hkv_cuctx_t ctx)
{
    unsigned long long id = 0;
    if (hkv_cu.cuCtxGetId(ctx, &id) != 0)
        return 0;
    return id;
}
