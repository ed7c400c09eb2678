/* handlekit table "hk.cuda/1": what a CUDA handle is bound to, for
 * interoperation with code that uses CUDA itself (the CUDA runtime,
 * PyTorch, CuPy, JCuda, another library's driver calls).
 *
 * The types are plain so that this header needs no CUDA header:
 *   void *context  a CUcontext: the context the handle's calls run in (a
 *                  primary context, or the user or green context that was
 *                  current at create; see docs/contexts.md). A primary keeps
 *                  its pointer after cudaDeviceReset.
 *   int device     a CUdevice (the driver's device handle; cudaSetDevice and
 *                  torch.cuda take the ordinal instead).
 *   int ordinal    the device ordinal, as cudaSetDevice and
 *                  cuDeviceGet(&dev, ordinal) take it.
 *   void *stream   a CUstream (the same value as a cudaStream_t): what
 *                  set_stream was given, NULL for the context's default
 *                  (legacy) stream, or CU_STREAM_PER_THREAD.
 * Nothing is transferred: the handle keeps owning its context retain, and the
 * caller keeps owning its stream. The values are those of the moment of the
 * call: the context may be destroyed or reset later by others.
 *
 * Every slot: [handle-safe]; makes no CUDA call and leaves the caller's CUDA
 * state alone; a handle that is not live → HK_STATUS_INVALID_HANDLE, checked
 * first; an out pointer NULL → HK_STATUS_NULL_POINTER. A CPU plugin does not
 * offer this table. */
#ifndef HK_CUDA_H
#define HK_CUDA_H

#include <stddef.h>

#include "hk_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_TABLE_CUDA_V1 "hk.cuda/1"

/* The slots of hk.cuda/1, one X(...) each (see HK_TABLE_SLOT in hk_abi.h);
 * all are ABI 1.2 slots, the table's own minor. */
#define HK_CUDA_V1_SLOTS(X)                                                                        \
    /* Writes the handle's CUcontext to *context. */                                               \
    X(get_context, 2, (hk_handle_t *h, void **context), (context))                                 \
    /* Writes the handle's CUdevice to *device and its ordinal to *ordinal. */                     \
    X(get_device, 2, (hk_handle_t *h, int *device, int *ordinal), (device, ordinal))               \
    /* Writes the handle's CUstream to *stream (NULL: the default stream). */                      \
    X(get_stream, 2, (hk_handle_t *h, void **stream), (stream))

typedef struct hk_cuda_v1 {
    size_t size; /* sizeof(hk_cuda_v1_t) as the plugin was built */
    HK_CUDA_V1_SLOTS(HK_TABLE_SLOT)
} hk_cuda_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_CUDA_H */
