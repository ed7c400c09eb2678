/* handlekit table "hk.memory/1": memory of the handle's device, so that a host
 * can run one workload on any implementation. For a CPU implementation "device"
 * memory is host memory.
 * All slots: [handle-safe]; NULL handle → HK_STATUS_INVALID_HANDLE; they run in
 * the handle's context and leave the caller's current context as it was. */
#ifndef HK_MEMORY_H
#define HK_MEMORY_H

#include <stddef.h>

#include "hk_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_TABLE_MEMORY_V1 "hk.memory/1"

typedef struct hk_memory_v1 {
    size_t size; /* sizeof(hk_memory_v1_t) as the plugin was built */

    /* Allocates bytes on the handle's device. The caller owns *out and frees it
     * with free_ on a handle of the same device. bytes == 0 → *out = NULL, OK.
     * out NULL → HK_STATUS_NULL_POINTER. Not for the hot path: may synchronise. */
    hk_status_t (*alloc)(hk_handle_t *h, size_t bytes, void **out);
    /* Frees what alloc returned; NULL is a no-op. */
    hk_status_t (*free_)(hk_handle_t *h, void *ptr);
    /* Copies host → device; returns when src may be reused and dst holds the data
     * (ordered after earlier work on the handle's stream). */
    hk_status_t (*copy_to_device)(hk_handle_t *h, void *dst, const void *src, size_t bytes);
    /* Copies device → host; returns when dst holds the data. */
    hk_status_t (*copy_to_host)(hk_handle_t *h, void *dst, const void *src, size_t bytes);
    /* Sets bytes of device memory to (unsigned char)value, on the handle's stream. */
    hk_status_t (*memset_)(hk_handle_t *h, void *dst, int value, size_t bytes);
} hk_memory_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_MEMORY_H */
