/* hk-validate: its own access to the CUDA driver, for the context checks.
 *
 * The driver is the file named by HK_CUDA_DRIVER, else libcuda.so.1 (what a
 * CUDA plugin opens), so both talk to one driver instance. Entry points come
 * from cuGetProcAddress_v2 at pinned versions, which fixes their signatures;
 * the types are spelled in plain C, so no CUDA header is needed to build. */
#ifndef HKV_CUDA_H
#define HKV_CUDA_H

#include <stddef.h>

#include "hkv.h"

typedef int hkv_curesult_t;   /* CUresult */
typedef int hkv_cudevice_t;   /* CUdevice */
typedef void *hkv_cuctx_t;    /* CUcontext */
typedef void *hkv_custream_t; /* CUstream */
typedef void *hkv_cugraph_t;  /* CUgraph */

#define HKV_CU_CTX_DESTROYED 709 /* CUDA_ERROR_CONTEXT_IS_DESTROYED */

/* X(name, version, return, parameters) */
#define HKV_CU_ENTRIES(X)                                                                   \
    X(cuInit, 2000, (unsigned flags))                                                       \
    X(cuDeviceGetCount, 2000, (int *count))                                                 \
    X(cuDeviceGet, 2000, (hkv_cudevice_t * dev, int ordinal))                               \
    X(cuCtxGetCurrent, 4000, (hkv_cuctx_t * ctx))                                           \
    X(cuCtxSetCurrent, 4000, (hkv_cuctx_t ctx))                                             \
    X(cuCtxCreate, 3020, (hkv_cuctx_t * ctx, unsigned flags, hkv_cudevice_t dev))           \
    X(cuCtxDestroy, 4000, (hkv_cuctx_t ctx))                                                \
    X(cuCtxGetId, 12000, (hkv_cuctx_t ctx, unsigned long long *id))                         \
    X(cuCtxSynchronize, 2000, (void))                                                       \
    X(cuDevicePrimaryCtxRetain, 7000, (hkv_cuctx_t * ctx, hkv_cudevice_t dev))              \
    X(cuDevicePrimaryCtxRelease, 11000, (hkv_cudevice_t dev))                               \
    X(cuDevicePrimaryCtxReset, 11000, (hkv_cudevice_t dev))                                 \
    X(cuStreamCreate, 2000, (hkv_custream_t * s, unsigned flags))                           \
    X(cuStreamDestroy, 4000, (hkv_custream_t s))                                            \
    X(cuStreamSynchronize, 2000, (hkv_custream_t s))                                        \
    X(cuStreamBeginCapture, 10010, (hkv_custream_t s, int mode))                            \
    X(cuStreamEndCapture, 10000, (hkv_custream_t s, hkv_cugraph_t * g))                     \
    X(cuStreamIsCapturing, 10000, (hkv_custream_t s, int *status))                          \
    X(cuGraphDestroy, 10000, (hkv_cugraph_t g))

typedef struct hkv_cu {
#define HKV_CU_FIELD(name, ver, params) hkv_curesult_t(*name) params;
    HKV_CU_ENTRIES(HKV_CU_FIELD)
#undef HKV_CU_FIELD
} hkv_cu_t;

extern hkv_cu_t hkv_cu;

/* Opens the driver, takes the entry points, cuInit(0). 0, or -1 and why. */
int hkv_cu_open(char *why, size_t len);

/* The primary context of device ordinal dev, without keeping a retain (the
 * pointer stays the same across activations). NULL on failure. */
hkv_cuctx_t hkv_cu_primary(int dev);

/* Makes a user context on device ordinal dev into *ctx (cuCtxCreate makes it
 * current on the calling thread). 0, or the driver's error. */
hkv_curesult_t hkv_cu_user_context(int dev, hkv_cuctx_t *ctx);

/* The current context, or (void *)-1 when the query failed. */
hkv_cuctx_t hkv_cu_current(void);

/* The ID of ctx; 0 when the query failed. */
unsigned long long hkv_cu_id(hkv_cuctx_t ctx);

/* For the context checks (checks_cuda.c): opens the driver in the check's
 * process (0, or -1 recorded in r); records a failure when the current
 * context is not want after the call named by after. */
int hkv_cuda_begin(hkv_result_t *r);
void hkv_same_current(hkv_cuctx_t want, const char *after, hkv_result_t *r);

#endif /* HKV_CUDA_H */
