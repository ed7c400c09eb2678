/* handlekit table "hk.memory/1": memory of the handle's device, so that a host
 * can run one workload on any implementation. For a CPU implementation
 * (HK_PLUGIN_MEMORY_HOST) "device" memory is host memory; for a CUDA one
 * (HK_PLUGIN_MEMORY_CUDA) it is device memory of the handle's device. All
 * slots of this table are ABI 1.0 slots (docs/abi.md).
 *
 * All slots: [handle-safe]; a handle that is not live (NULL, destroyed, of
 * another plugin or another loaded copy of this one) →
 * HK_STATUS_INVALID_HANDLE, checked first. They run in the handle's context
 * and leave the calling thread's current context as it found it. A refused
 * call touches no memory and records a one-line reason (last_error). None of
 * them crashes on a size: a byte count that cannot be allocated or that runs
 * past the end of the address space is refused with a status. A byte count
 * larger than the memory behind a valid pointer is undefined and not
 * detected. Not for the hot path: alloc, free_ and the copies may
 * synchronise. */
#ifndef HK_MEMORY_H
#define HK_MEMORY_H

#include <stddef.h>

#include "hk_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_TABLE_MEMORY_V1 "hk.memory/1"

/* The slots of hk.memory/1, one X(...) each (see HK_TABLE_SLOT in hk_abi.h). */
#define HK_MEMORY_V1_SLOTS(X)                                                                      \
    /* Allocates bytes on the handle's device, aligned to at least 64 bytes.                       \
     * The caller owns *out and frees it with free_ on a handle of the same                        \
     * plugin (any loaded build of it: memory follows a swap) and device.                          \
     * bytes == 0 → *out = NULL, HK_STATUS_OK. A size that cannot be                               \
     * allocated (past what the device or machine has, or so large that                            \
     * rounding it up overflows) → HK_STATUS_OUT_OF_MEMORY with a reason                           \
     * naming the size, *out = NULL. out NULL → HK_STATUS_NULL_POINTER. */                         \
    X(alloc, 0, (hk_handle_t *h, size_t bytes, void **out), (bytes, out))                          \
    /* Frees what alloc returned. NULL → HK_STATUS_OK, nothing done. A pointer                     \
     * that is not the start of a live allocation of this plugin (foreign,                         \
     * already freed, or inside a block) → HK_STATUS_INVALID_VALUE naming it,                      \
     * and nothing is freed. Two threads freeing one pointer at once is                            \
     * undefined. */                                                                               \
    X(free_, 0, (hk_handle_t *h, void *ptr), (ptr))                                                \
    /* Copies bytes host → device; returns when src may be reused and dst                          \
     * holds the data (ordered after earlier work on the handle's stream).                         \
     * bytes == 0 → HK_STATUS_OK, nothing touched (dst, src may be NULL).                          \
     * dst or src NULL with bytes > 0 → HK_STATUS_NULL_POINTER naming it. */                       \
    X(copy_to_device, 0, (hk_handle_t *h, void *dst, const void *src, size_t bytes),               \
      (dst, src, bytes))                                                                           \
    /* Copies bytes device → host; returns when dst holds the data. The same                       \
     * rules as copy_to_device. */                                                                 \
    X(copy_to_host, 0, (hk_handle_t *h, void *dst, const void *src, size_t bytes),                 \
      (dst, src, bytes))                                                                           \
    /* Sets bytes of device memory to (unsigned char)value, ordered on the                         \
     * handle's stream (a CPU plugin: done on return). bytes == 0 →                                \
     * HK_STATUS_OK, nothing touched (dst may be NULL). dst NULL with                              \
     * bytes > 0 → HK_STATUS_NULL_POINTER. */                                                      \
    X(memset_, 0, (hk_handle_t *h, void *dst, int value, size_t bytes), (dst, value, bytes))

typedef struct hk_memory_v1 {
    size_t size; /* sizeof(hk_memory_v1_t) as the plugin was built */
    HK_MEMORY_V1_SLOTS(HK_TABLE_SLOT)
} hk_memory_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_MEMORY_H */
