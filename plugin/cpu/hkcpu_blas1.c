/* hk-cpu: table "hk.blas1/1" with reference-BLAS semantics and the argument
 * rules of plugin_api/hk_blas1.h (docs/abi.md, "hk.blas1/1: argument rules").
 *
 * This implementation is the correctness oracle of the project, so it favours
 * accuracy over speed: float dot and nrm2 accumulate in double, double nrm2
 * uses a scaled sum of squares so that neither huge nor tiny inputs overflow
 * or underflow.
 *
 * Index arithmetic stays in int64_t and never overflows: once a vector's span
 * ((n - 1) * |inc| + 1) * esz is known to be at most PTRDIFF_MAX, every index
 * the loops form, including the one past the last element, is below 2^62 in
 * magnitude (n >= 2 bounds |inc| by 2^61; n == 1 takes one step of |inc|). */
#include <math.h>
#include <stddef.h>

#include "hk_blas1.h"
#include "hkcpu.h"

/* First index touched by a vector of n elements with increment inc: reference
 * BLAS starts a negative-increment walk at the far end. */
static inline int64_t hkcpu_start_of(int64_t n, int64_t inc)
{
    return inc < 0 ? (1 - n) * inc : 0;
}

/* Rule 4: an increment without a magnitude, or a destination increment of 0. */
static hk_status_t hkcpu_check_inc(hk_handle_t *h, const char *op, const char *name, int64_t inc,
                                   int destination)
{
    if (inc == INT64_MIN)
        return hkcpu_fail(h, HK_STATUS_INVALID_VALUE,
                          "%s: %s is INT64_MIN, an increment without a magnitude", op, name);
    if (inc == 0 && destination)
        return hkcpu_fail(h, HK_STATUS_INVALID_VALUE,
                          "%s: %s is 0 for the destination: every element would be written "
                          "to one place", op, name);
    return HK_STATUS_OK;
}

/* Rule 5: ((n - 1) * |inc| + 1) * esz representable and at most PTRDIFF_MAX,
 * and p + span not wrapping around the address space. n > 0, inc is not
 * INT64_MIN. */
static hk_status_t hkcpu_check_span(hk_handle_t *h, const char *op, const char *name, const void *p,
                                    int64_t n, int64_t inc, size_t esz)
{
    uint64_t mag = inc < 0 ? (uint64_t)0 - (uint64_t)inc : (uint64_t)inc;
    uint64_t elems, bytes;
    if (__builtin_mul_overflow((uint64_t)(n - 1), mag, &elems) ||
        __builtin_add_overflow(elems, (uint64_t)1, &elems) ||
        __builtin_mul_overflow(elems, (uint64_t)esz, &bytes) || bytes > (uint64_t)PTRDIFF_MAX)
        return hkcpu_fail(h, HK_STATUS_INVALID_VALUE,
                          "%s: %s: n = %lld with increment %lld spans more than PTRDIFF_MAX "
                          "bytes", op, name, (long long)n, (long long)inc);
    if ((uintptr_t)p > UINTPTR_MAX - (uintptr_t)bytes)
        return hkcpu_fail(h, HK_STATUS_INVALID_VALUE,
                          "%s: %s: %llu bytes from %p wrap around the address space", op, name,
                          (unsigned long long)bytes, p);
    return HK_STATUS_OK;
}

/* Rules 4 and 5 for an op on vectors x and y of n elements of esz bytes; y is
 * written when y_dest. n > 0. */
static hk_status_t hkcpu_check_xy(hk_handle_t *h, const char *op, int64_t n, const void *x,
                                  int64_t incx, const void *y, int64_t incy, size_t esz, int y_dest)
{
    HKCPU_TRY(hkcpu_check_inc(h, op, "incx", incx, 0));
    HKCPU_TRY(hkcpu_check_inc(h, op, "incy", incy, y_dest));
    HKCPU_TRY(hkcpu_check_span(h, op, "x", x, n, incx, esz));
    return hkcpu_check_span(h, op, "y", y, n, incy, esz);
}

/* Rule 3, in argument order. */
#define REQUIRE(h, ptr, fn)                                                                \
    do {                                                                                   \
        if (!(ptr))                                                                        \
            return hkcpu_fail((h), HK_STATUS_NULL_POINTER, "%s: %s is NULL with n = %lld", \
                              fn, #ptr, (long long)n);                                     \
    } while (0)

/* One body per op, instantiated for float (s) and double (d): hkcpu_NAME,
 * whose messages name it "cpu_NAME". */
#define HKCPU_AXPY(NAME, T)                                                                \
    static hk_status_t hkcpu_##NAME(hk_handle_t *h, int64_t n, const T *alpha, const T *x, \
                                    int64_t incx, T *y, int64_t incy)                      \
    {                                                                                      \
        HKCPU_CHECK(h, "cpu_" #NAME);                                                      \
        if (n <= 0)                                                                        \
            return HK_STATUS_OK;                                                           \
        REQUIRE(h, alpha, "cpu_" #NAME);                                                   \
        REQUIRE(h, x, "cpu_" #NAME);                                                       \
        REQUIRE(h, y, "cpu_" #NAME);                                                       \
        HKCPU_TRY(hkcpu_check_xy(h, "cpu_" #NAME, n, x, incx, y, incy, sizeof(T), 1));     \
        T a = *alpha;                                                                      \
        if (a == (T)0)                                                                     \
            return HK_STATUS_OK;                                                           \
        int64_t ix = hkcpu_start_of(n, incx), iy = hkcpu_start_of(n, incy);                \
        for (int64_t i = 0; i < n; i++, ix += incx, iy += incy)                            \
            y[iy] += a * x[ix];                                                            \
        return HK_STATUS_OK;                                                               \
    }

#define HKCPU_SCAL(NAME, T)                                                          \
    static hk_status_t hkcpu_##NAME(hk_handle_t *h, int64_t n, const T *alpha, T *x, \
                                    int64_t incx)                                    \
    {                                                                                \
        HKCPU_CHECK(h, "cpu_" #NAME);                                                \
        if (n <= 0 || incx <= 0)                                                     \
            return HK_STATUS_OK;                                                     \
        REQUIRE(h, alpha, "cpu_" #NAME);                                             \
        REQUIRE(h, x, "cpu_" #NAME);                                                 \
        HKCPU_TRY(hkcpu_check_span(h, "cpu_" #NAME, "x", x, n, incx, sizeof(T)));    \
        T a = *alpha;                                                                \
        for (int64_t i = 0; i < n; i++)                                              \
            x[i * incx] *= a;                                                        \
        return HK_STATUS_OK;                                                         \
    }

#define HKCPU_COPY(NAME, T)                                                              \
    static hk_status_t hkcpu_##NAME(hk_handle_t *h, int64_t n, const T *x, int64_t incx, \
                                    T *y, int64_t incy)                                  \
    {                                                                                    \
        HKCPU_CHECK(h, "cpu_" #NAME);                                                    \
        if (n <= 0)                                                                      \
            return HK_STATUS_OK;                                                         \
        REQUIRE(h, x, "cpu_" #NAME);                                                     \
        REQUIRE(h, y, "cpu_" #NAME);                                                     \
        HKCPU_TRY(hkcpu_check_xy(h, "cpu_" #NAME, n, x, incx, y, incy, sizeof(T), 1));   \
        int64_t ix = hkcpu_start_of(n, incx), iy = hkcpu_start_of(n, incy);              \
        for (int64_t i = 0; i < n; i++, ix += incx, iy += incy)                          \
            y[iy] = x[ix];                                                               \
        return HK_STATUS_OK;                                                             \
    }

#define HKCPU_DOT(NAME, T)                                                               \
    static hk_status_t hkcpu_##NAME(hk_handle_t *h, int64_t n, const T *x, int64_t incx, \
                                    const T *y, int64_t incy, T *result)                 \
    {                                                                                    \
        HKCPU_CHECK(h, "cpu_" #NAME);                                                    \
        if (n <= 0) {                                                                    \
            if (result)                                                                  \
                *result = (T)0;                                                          \
            return HK_STATUS_OK;                                                         \
        }                                                                                \
        REQUIRE(h, x, "cpu_" #NAME);                                                     \
        REQUIRE(h, y, "cpu_" #NAME);                                                     \
        REQUIRE(h, result, "cpu_" #NAME);                                                \
        HKCPU_TRY(hkcpu_check_xy(h, "cpu_" #NAME, n, x, incx, y, incy, sizeof(T), 0));   \
        double acc = 0.0;                                                                \
        int64_t ix = hkcpu_start_of(n, incx), iy = hkcpu_start_of(n, incy);              \
        for (int64_t i = 0; i < n; i++, ix += incx, iy += incy)                          \
            acc += (double)x[ix] * (double)y[iy];                                        \
        *result = (T)acc;                                                                \
        return HK_STATUS_OK;                                                             \
    }

#define HKCPU_NRM2(NAME, T)                                                              \
    static hk_status_t hkcpu_##NAME(hk_handle_t *h, int64_t n, const T *x, int64_t incx, \
                                    T *result)                                           \
    {                                                                                    \
        HKCPU_CHECK(h, "cpu_" #NAME);                                                    \
        if (n <= 0 || incx <= 0) {                                                       \
            if (result)                                                                  \
                *result = (T)0;                                                          \
            return HK_STATUS_OK;                                                         \
        }                                                                                \
        REQUIRE(h, x, "cpu_" #NAME);                                                     \
        REQUIRE(h, result, "cpu_" #NAME);                                                \
        HKCPU_TRY(hkcpu_check_span(h, "cpu_" #NAME, "x", x, n, incx, sizeof(T)));        \
        *result = (T)hkcpu_scaled_norm_##T(n, x, incx);                                  \
        return HK_STATUS_OK;                                                             \
    }

/* sqrt(sum x^2) kept as scale * sqrt(ssq) with scale = max |x| seen so far, so
 * that squares never overflow or vanish. */
static double hkcpu_scaled_norm_double(int64_t n, const double *x, int64_t incx)
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
static double hkcpu_scaled_norm_float(int64_t n, const float *x, int64_t incx)
{
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double a = x[i * incx];
        acc += a * a;
    }
    return sqrt(acc);
}

HKCPU_AXPY(saxpy, float)
HKCPU_AXPY(daxpy, double)
HKCPU_SCAL(sscal, float)
HKCPU_SCAL(dscal, double)
HKCPU_COPY(scopy, float)
HKCPU_COPY(dcopy, double)
HKCPU_DOT(sdot, float)
HKCPU_DOT(ddot, double)
HKCPU_NRM2(snrm2, float)
HKCPU_NRM2(dnrm2, double)

/* Every slot of the header's list is hkcpu_<slot>: a slot added there is
 * one more body above. */
#define HKCPU_SLOT(name, minor, params, args) .name = hkcpu_##name,
const hk_blas1_v1_t hkcpu_blas1 = {
    .size = sizeof(hk_blas1_v1_t),
    HK_BLAS1_V1_SLOTS(HKCPU_SLOT)
};
