/* handlekit table "hk.blas1/1": level-1 BLAS in float and double.
 *
 * Semantics of reference BLAS: n <= 0 is a no-op (dot returns 0, nrm2 returns 0);
 * a negative increment walks the vector backwards from its far end as in
 * reference BLAS for axpy, copy and dot; scal and nrm2 with incx <= 0 do nothing
 * (result 0 for nrm2). An increment of 0 is valid for axpy/copy/dot sources.
 * x and y are device pointers of the handle's device (host memory for a CPU
 * implementation). alpha and result follow the handle's pointer mode:
 * HK_POINTER_MODE_HOST → host pointers, results written before return;
 * HK_POINTER_MODE_DEVICE → device pointers, asynchronous on the handle's stream.
 * All slots: [handle-safe]; NULL handle → HK_STATUS_INVALID_HANDLE; a NULL vector,
 * alpha or result pointer when n > 0 → HK_STATUS_NULL_POINTER; pointers are
 * never owned by the table. */
#ifndef HK_BLAS1_H
#define HK_BLAS1_H

#include <stddef.h>
#include <stdint.h>

#include "hk_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_TABLE_BLAS1_V1 "hk.blas1/1"

typedef struct hk_blas1_v1 {
    size_t size; /* sizeof(hk_blas1_v1_t) as the plugin was built */

    /* y := alpha * x + y */
    hk_status_t (*saxpy)(hk_handle_t *h, int64_t n, const float *alpha,
                         const float *x, int64_t incx, float *y, int64_t incy);
    hk_status_t (*daxpy)(hk_handle_t *h, int64_t n, const double *alpha,
                         const double *x, int64_t incx, double *y, int64_t incy);
    /* x := alpha * x */
    hk_status_t (*sscal)(hk_handle_t *h, int64_t n, const float *alpha, float *x, int64_t incx);
    hk_status_t (*dscal)(hk_handle_t *h, int64_t n, const double *alpha, double *x, int64_t incx);
    /* y := x */
    hk_status_t (*scopy)(hk_handle_t *h, int64_t n, const float *x, int64_t incx,
                         float *y, int64_t incy);
    hk_status_t (*dcopy)(hk_handle_t *h, int64_t n, const double *x, int64_t incx,
                         double *y, int64_t incy);
    /* *result := sum x[i] * y[i] */
    hk_status_t (*sdot)(hk_handle_t *h, int64_t n, const float *x, int64_t incx,
                        const float *y, int64_t incy, float *result);
    hk_status_t (*ddot)(hk_handle_t *h, int64_t n, const double *x, int64_t incx,
                        const double *y, int64_t incy, double *result);
    /* *result := sqrt(sum x[i]^2), without undue overflow or underflow */
    hk_status_t (*snrm2)(hk_handle_t *h, int64_t n, const float *x, int64_t incx, float *result);
    hk_status_t (*dnrm2)(hk_handle_t *h, int64_t n, const double *x, int64_t incx, double *result);
} hk_blas1_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_BLAS1_H */
