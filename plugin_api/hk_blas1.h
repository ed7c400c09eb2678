/* handlekit table "hk.blas1/1": level-1 BLAS in float and double.
 *
 * Every slot follows the rules below, in every plugin and every ABI minor
 * (docs/abi.md, "hk.blas1/1: argument rules"). All slots of this table are
 * ABI 1.0 slots; HK_BLAS1_V1_SLOTS below lists them.
 *
 * Memory: x, y, alpha and result are memory of the handle's device as the
 * pointer mode says (host memory for a CPU plugin, HK_PLUGIN_MEMORY_HOST);
 * the table never owns them and keeps no pointer after the call.
 *
 * Checks, in this order; the first that applies decides:
 *   1. Handle not live (NULL, destroyed, of another plugin or of another
 *      loaded copy of this one) → HK_STATUS_INVALID_HANDLE.
 *   2. Nothing to do → HK_STATUS_OK, nothing read, and x, y, alpha may be NULL:
 *        n <= 0 for every op, in both pointer modes;
 *        incx <= 0 for scal and nrm2 (reference BLAS).
 *      dot and nrm2 then write 0 to *result when result is not NULL (in
 *      device pointer mode asynchronously, on the handle's stream); a NULL
 *      result is allowed here and nothing is written.
 *   3. A NULL x, y, alpha or result → HK_STATUS_NULL_POINTER, naming it.
 *   4. Increments → HK_STATUS_INVALID_VALUE:
 *        an increment equal to INT64_MIN (it has no magnitude);
 *        a destination increment of 0 (incy of axpy and copy): every element
 *        would be written to one place. A source increment of 0 is valid and
 *        reads the one element n times.
 *   5. Span: ((n - 1) * |inc| + 1) * element size must be representable and
 *      at most PTRDIFF_MAX bytes, and pointer + span must not wrap around the
 *      address space → otherwise HK_STATUS_INVALID_VALUE naming the vector.
 *      The span starts at the pointer passed, whatever the increment's sign.
 *   6. Checked mode (HK_CREATE_CHECKED): a pointer that is not memory of the
 *      handle's device → HK_STATUS_POINTER_MISMATCH naming both devices.
 * A refused call reads and writes nothing and records a one-line reason
 * (last_error). Failures of the work itself: HK_STATUS_LAUNCH_FAILED,
 * CUDA_ERROR, CONTEXT_DESTROYED, FORKED..., with the CUDA error's name.
 *
 * Semantics are reference BLAS: a negative increment walks the vector from its
 * far end (element 0 at pointer + (n - 1) * |inc|). axpy with alpha == 0 in
 * host pointer mode returns HK_STATUS_OK after checks 1-5 and leaves y alone
 * (check 6 is skipped: nothing is touched). nrm2 avoids undue overflow and
 * underflow.
 *
 * Aliasing: x == y with incx == incy is allowed for every two-vector op (axpy
 * computes y = alpha*y + y, copy leaves y unchanged, dot sums squares). Any
 * other overlap between a source and a destination is undefined and not
 * detected.
 *
 * Pointer modes (set_pointer_mode):
 *   HK_POINTER_MODE_HOST: alpha is read before the call returns and result is
 *     written before it returns (the call waits for its own work).
 *   HK_POINTER_MODE_DEVICE: alpha and result live in device memory; the call
 *     neither waits nor allocates, and it can be captured into a CUDA graph.
 *   A host-mode dot or nrm2 on a stream that is being captured →
 *   HK_STATUS_NOT_SUPPORTED ("host pointer mode results cannot be captured"),
 *   and the capture is left as it was.
 *
 * Every slot is [handle-safe]: any number of threads may call it at once on one
 * handle, and every result is right (a CUDA plugin orders calls on one handle
 * by its stream). Work still in flight when the handle is destroyed is waited
 * for by handle_destroy before the handle's workspace is freed. Every slot
 * leaves the calling thread's current CUDA context as it found it. */
#ifndef HK_BLAS1_H
#define HK_BLAS1_H

#include <stddef.h>
#include <stdint.h>

#include "hk_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_TABLE_BLAS1_V1 "hk.blas1/1"

/* The slots of hk.blas1/1, one X(...) each (see HK_TABLE_SLOT in hk_abi.h);
 * all are ABI 1.0 slots. */
#define HK_BLAS1_V1_SLOTS(X)                                                                       \
    /* y := alpha * x + y. Destination y: incy 0 → HK_STATUS_INVALID_VALUE. */                     \
    X(saxpy, 0, (hk_handle_t *h, int64_t n, const float *alpha, const float *x, int64_t incx,      \
                 float *y, int64_t incy), (n, alpha, x, incx, y, incy))                            \
    X(daxpy, 0, (hk_handle_t *h, int64_t n, const double *alpha, const double *x,                  \
                 int64_t incx, double *y, int64_t incy), (n, alpha, x, incx, y, incy))             \
    /* x := alpha * x. n <= 0 or incx <= 0: nothing to do (HK_STATUS_OK). */                       \
    X(sscal, 0, (hk_handle_t *h, int64_t n, const float *alpha, float *x, int64_t incx),           \
      (n, alpha, x, incx))                                                                         \
    X(dscal, 0, (hk_handle_t *h, int64_t n, const double *alpha, double *x, int64_t incx),         \
      (n, alpha, x, incx))                                                                         \
    /* y := x. Destination y: incy 0 → HK_STATUS_INVALID_VALUE. */                                 \
    X(scopy, 0, (hk_handle_t *h, int64_t n, const float *x, int64_t incx, float *y,                \
                 int64_t incy), (n, x, incx, y, incy))                                             \
    X(dcopy, 0, (hk_handle_t *h, int64_t n, const double *x, int64_t incx, double *y,              \
                 int64_t incy), (n, x, incx, y, incy))                                             \
    /* *result := sum x[i] * y[i]. n <= 0: *result := 0 when result is not NULL. */                \
    X(sdot, 0, (hk_handle_t *h, int64_t n, const float *x, int64_t incx, const float *y,           \
                int64_t incy, float *result), (n, x, incx, y, incy, result))                       \
    X(ddot, 0, (hk_handle_t *h, int64_t n, const double *x, int64_t incx, const double *y,         \
                int64_t incy, double *result), (n, x, incx, y, incy, result))                      \
    /* *result := sqrt(sum x[i]^2), without undue overflow or underflow.                           \
     * n <= 0 or incx <= 0: *result := 0 when result is not NULL. */                               \
    X(snrm2, 0, (hk_handle_t *h, int64_t n, const float *x, int64_t incx, float *result),          \
      (n, x, incx, result))                                                                        \
    X(dnrm2, 0, (hk_handle_t *h, int64_t n, const double *x, int64_t incx, double *result),        \
      (n, x, incx, result))

typedef struct hk_blas1_v1 {
    size_t size; /* sizeof(hk_blas1_v1_t) as the plugin was built */
    HK_BLAS1_V1_SLOTS(HK_TABLE_SLOT)
} hk_blas1_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_BLAS1_H */
