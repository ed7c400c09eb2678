/* hk-cpu: table "hk.blas1/1" with reference-BLAS semantics (plugin_api/hk_blas1.h).
 *
 * This implementation is the correctness oracle of the project, so it favours
 * accuracy over speed: float dot and nrm2 accumulate in double, double nrm2
 * uses a scaled sum of squares so that neither huge nor tiny inputs overflow
 * or underflow. */
#include <math.h>
#include <stddef.h>

#include "hk_blas1.h"
#include "hkcpu.h"

/* First index touched by a vector of n elements with increment inc: reference
 * BLAS starts a negative-increment walk at the far end. */
static inline int64_t start_of(int64_t n, int64_t inc)
{
    return inc < 0 ? (1 - n) * inc : 0;
}

#define CHECK_HANDLE(h, fn)                                                         \
    do {                                                                            \
        hk_status_t st_ = hk__cpu_check((h), fn);                                   \
        if (st_ != HK_STATUS_OK)                                                    \
            return st_;                                                             \
    } while (0)

#define REQUIRE(h, ptr, fn)                                                         \
    do {                                                                            \
        if (!(ptr))                                                                 \
            return hk__cpu_fail((h), HK_STATUS_NULL_POINTER, "%s: %s is NULL with n > 0", \
                                fn, #ptr);                                          \
    } while (0)

/* One body per op, instantiated for float (s) and double (d). */
#define HKCPU_AXPY(NAME, T)                                                         \
    static hk_status_t NAME(hk_handle_t *h, int64_t n, const T *alpha, const T *x,  \
                            int64_t incx, T *y, int64_t incy)                       \
    {                                                                               \
        CHECK_HANDLE(h, #NAME);                                                     \
        if (n <= 0)                                                                 \
            return HK_STATUS_OK;                                                    \
        REQUIRE(h, alpha, #NAME);                                                   \
        REQUIRE(h, x, #NAME);                                                       \
        REQUIRE(h, y, #NAME);                                                       \
        T a = *alpha;                                                               \
        if (a == (T)0)                                                              \
            return HK_STATUS_OK;                                                    \
        int64_t ix = start_of(n, incx), iy = start_of(n, incy);                     \
        for (int64_t i = 0; i < n; i++, ix += incx, iy += incy)                     \
            y[iy] += a * x[ix];                                                     \
        return HK_STATUS_OK;                                                        \
    }

#define HKCPU_SCAL(NAME, T)                                                         \
    static hk_status_t NAME(hk_handle_t *h, int64_t n, const T *alpha, T *x,        \
                            int64_t incx)                                           \
    {                                                                               \
        CHECK_HANDLE(h, #NAME);                                                     \
        if (n <= 0 || incx <= 0)                                                    \
            return HK_STATUS_OK;                                                    \
        REQUIRE(h, alpha, #NAME);                                                   \
        REQUIRE(h, x, #NAME);                                                       \
        T a = *alpha;                                                               \
        for (int64_t i = 0; i < n; i++)                                             \
            x[i * incx] *= a;                                                       \
        return HK_STATUS_OK;                                                        \
    }

#define HKCPU_COPY(NAME, T)                                                         \
    static hk_status_t NAME(hk_handle_t *h, int64_t n, const T *x, int64_t incx,    \
                            T *y, int64_t incy)                                     \
    {                                                                               \
        CHECK_HANDLE(h, #NAME);                                                     \
        if (n <= 0)                                                                 \
            return HK_STATUS_OK;                                                    \
        REQUIRE(h, x, #NAME);                                                       \
        REQUIRE(h, y, #NAME);                                                       \
        int64_t ix = start_of(n, incx), iy = start_of(n, incy);                     \
        for (int64_t i = 0; i < n; i++, ix += incx, iy += incy)                     \
            y[iy] = x[ix];                                                          \
        return HK_STATUS_OK;                                                        \
    }

#define HKCPU_DOT(NAME, T)                                                          \
    static hk_status_t NAME(hk_handle_t *h, int64_t n, const T *x, int64_t incx,    \
                            const T *y, int64_t incy, T *result)                    \
    {                                                                               \
        CHECK_HANDLE(h, #NAME);                                                     \
        REQUIRE(h, result, #NAME);                                                  \
        double acc = 0.0;                                                           \
        if (n > 0) {                                                                \
            REQUIRE(h, x, #NAME);                                                   \
            REQUIRE(h, y, #NAME);                                                   \
            int64_t ix = start_of(n, incx), iy = start_of(n, incy);                 \
            for (int64_t i = 0; i < n; i++, ix += incx, iy += incy)                 \
                acc += (double)x[ix] * (double)y[iy];                               \
        }                                                                           \
        *result = (T)acc;                                                           \
        return HK_STATUS_OK;                                                        \
    }

#define HKCPU_NRM2(NAME, T)                                                         \
    static hk_status_t NAME(hk_handle_t *h, int64_t n, const T *x, int64_t incx,    \
                            T *result)                                              \
    {                                                                               \
        CHECK_HANDLE(h, #NAME);                                                     \
        REQUIRE(h, result, #NAME);                                                  \
        if (n <= 0 || incx <= 0) {                                                  \
            *result = (T)0;                                                         \
            return HK_STATUS_OK;                                                    \
        }                                                                           \
        REQUIRE(h, x, #NAME);                                                       \
        *result = (T)scaled_norm_##T(n, x, incx);                                   \
        return HK_STATUS_OK;                                                        \
    }

/* sqrt(sum x^2) kept as scale * sqrt(ssq) with scale = max |x| seen so far, so
 * that squares never overflow or vanish. */
static double scaled_norm_double(int64_t n, const double *x, int64_t incx)
{
    double scale = 0.0, ssq = 1.0;
    for (int64_t i = 0; i < n; i++) {
        double a = fabs(x[i * incx]);
        if (a == 0.0)
            continue;
        if (isnan(a))
            return a;
        if (scale < a) {
            double r = scale / a;
            ssq = 1.0 + ssq * r * r;
            scale = a;
        } else {
            double r = a / scale;
            ssq += r * r;
        }
    }
    return scale * sqrt(ssq);
}

/* Float squares cannot overflow a double accumulator. */
static double scaled_norm_float(int64_t n, const float *x, int64_t incx)
{
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double a = x[i * incx];
        acc += a * a;
    }
    return sqrt(acc);
}

HKCPU_AXPY(cpu_saxpy, float)
HKCPU_AXPY(cpu_daxpy, double)
HKCPU_SCAL(cpu_sscal, float)
HKCPU_SCAL(cpu_dscal, double)
HKCPU_COPY(cpu_scopy, float)
HKCPU_COPY(cpu_dcopy, double)
HKCPU_DOT(cpu_sdot, float)
HKCPU_DOT(cpu_ddot, double)
HKCPU_NRM2(cpu_snrm2, float)
HKCPU_NRM2(cpu_dnrm2, double)

const hk_blas1_v1_t hk__cpu_blas1 = {
    .size = sizeof(hk_blas1_v1_t),
    .saxpy = cpu_saxpy,
    .daxpy = cpu_daxpy,
    .sscal = cpu_sscal,
    .dscal = cpu_dscal,
    .scopy = cpu_scopy,
    .dcopy = cpu_dcopy,
    .sdot = cpu_sdot,
    .ddot = cpu_ddot,
    .snrm2 = cpu_snrm2,
    .dnrm2 = cpu_dnrm2,
};
