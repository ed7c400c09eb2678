/* hk-example's own table, "example.ops/1": two operations on float vectors
 * in the memory of the handle's device (hk.memory/1 gives that memory).
 *
 * Both slots: [handle-safe]; a handle that is not live →
 * HK_STATUS_INVALID_HANDLE; n <= 0 → HK_STATUS_OK and nothing touched (x may
 * be NULL); x NULL → HK_STATUS_NULL_POINTER; n * 4 bytes past the end of the
 * address space → HK_STATUS_INVALID_VALUE; with HK_CREATE_CHECKED, x not
 * memory of the handle's device → HK_STATUS_POINTER_MISMATCH. They run on the
 * handle's stream, in the handle's context, leave the caller's context as it
 * was, neither wait nor allocate (so they can be captured into a CUDA graph),
 * and keep no pointer after the call. */
#ifndef HK_EXAMPLE_H
#define HK_EXAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include <hk_abi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EXAMPLE_TABLE_OPS_V1 "example.ops/1"

typedef struct example_ops_v1 {
    size_t size; /* sizeof(example_ops_v1_t) as the plugin was built */

    /* x[i] = value for 0 <= i < n. */
    hk_status_t (*fill)(hk_handle_t *h, int64_t n, float value, float *x);

    /* x[i] *= *alpha for 0 <= i < n. alpha is read as the pointer mode says:
     * HK_POINTER_MODE_HOST, a host pointer read before the call returns;
     * HK_POINTER_MODE_DEVICE, device memory read by the kernel. alpha NULL
     * (with n > 0) → HK_STATUS_NULL_POINTER. */
    hk_status_t (*scale)(hk_handle_t *h, int64_t n, const float *alpha, float *x);
} example_ops_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_EXAMPLE_H */
