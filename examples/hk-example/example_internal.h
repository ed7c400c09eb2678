/* hk-example internals shared by its source files. */
#ifndef EXAMPLE_INTERNAL_H
#define EXAMPLE_INTERNAL_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdatomic.h>

#include <hk_kit.h>
#include <hk_memory.h>
#include <hk_selfcheck.h>

#include "hk_example.h"

/* The driver entry points the example calls itself (the kit has its own),
 * taken through cuGetProcAddress at pinned versions (hk_kit_driver_take). */
typedef struct ex_cu {
    PFN_cuMemAlloc_v3020 cuMemAlloc;
    PFN_cuMemFree_v3020 cuMemFree;
    PFN_cuMemcpyHtoDAsync_v3020 cuMemcpyHtoDAsync;
    PFN_cuMemcpyDtoHAsync_v3020 cuMemcpyDtoHAsync;
    PFN_cuMemsetD8Async_v3020 cuMemsetD8Async;
    PFN_cuStreamSynchronize_v2000 cuStreamSynchronize;
} ex_cu_t;
extern ex_cu_t ex_cu;

/* The kernels, found once the library is loaded (example_handle.c). */
enum { EX_FILL, EX_SCALE, EX_KERNELS };
extern hk_kit_kernel_t *ex_kernels[EX_KERNELS];

/* A handle: what the kit needs (the binding) and the example's own settings.
 * It lives in the kit's handle registry, so hk_kit_handle_live tells a live
 * handle from anything else. */
struct hk_handle {
    hk_kit_bind_t *kb;
    uint32_t flags;          /* HK_CREATE_* */
    atomic_int pointer_mode; /* hk_pointer_mode_t */
};

/* A live handle of this plugin? Never reads through h. */
static inline int ex_live(const hk_handle_t *h)
{
    return hk_kit_handle_live(h);
}

/* scale with the pointer mode given rather than the handle's: the
 * self-check runs both modes on a handle that other threads may be using,
 * so it must not switch the handle's mode (example_ops.c). */
hk_status_t ex_scale(hk_handle_t *h, int64_t n, const float *alpha, float *x, int device_mode);

/* The tables (example_ops.c, example_selfcheck.c) and the core vtable
 * (example_handle.c). */
extern const example_ops_v1_t ex_ops_table;
extern const hk_memory_v1_t ex_memory_table;
extern const hk_selfcheck_v1_t ex_selfcheck_table;
extern const hk_vtable_t ex_vtable;

#endif /* EXAMPLE_INTERNAL_H */
