/* Host emulations of kernels/hk_blas1*.cu for the simulated driver.
 *
 * Each computes what the whole grid computes, with the kernels' argument
 * layout, and leaves device memory as the kernels leave it: for dot and nrm2
 * the per-block partials (blocks own elements as in the kernels' strided
 * path: element i belongs to thread i mod (grid * 256)), the counter back at
 * 0, and the result. A counter that is not 0 at launch behaves as on the GPU:
 * no block sees itself last, the result is not written and the counter ends
 * G higher. Every pointer is checked with simcuda_emu_check first, so a
 * pointer of another device or a freed one fails the launch. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simcuda_emu.h"

#define EMU_BLOCK 256

#define P(type, i) (*(type *)params[i])

/* Lowest address and byte length of a vector whose element 0 is at p. */
static CUresult check_vec(const simcuda_launch_t *l, const void *p, long long n, long long inc,
                          size_t esz)
{
    if (n <= 0)
        return CUDA_SUCCESS;
    long long a = inc < 0 ? -inc : inc;
    const char *lo = (const char *)p - (inc < 0 ? (size_t)((n - 1) * a) * esz : 0);
    return simcuda_emu_check(l, lo, ((size_t)((n - 1) * a) + 1) * esz);
}

static CUresult check_launch(const simcuda_launch_t *l)
{
    if (l->block[0] != EMU_BLOCK || l->block[1] != 1 || l->block[2] != 1 || l->grid[0] < 1 ||
        l->grid[1] != 1 || l->grid[2] != 1)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ---- axpy, scal, copy ---- */

#define EMU_AXPY(T, name)                                                                    \
    static CUresult name(const simcuda_launch_t *l, void **params)                          \
    {                                                                                        \
        long long n = P(long long, 0), incx = P(long long, 4), incy = P(long long, 6);       \
        T alpha = P(T, 1);                                                                   \
        const T *ap = P(const T *, 2), *x = P(const T *, 3);                                 \
        T *y = P(T *, 5);                                                                    \
        CUresult r = check_launch(l);                                                        \
        if (r == CUDA_SUCCESS && ap)                                                         \
            r = simcuda_emu_check(l, ap, sizeof(T));                                         \
        if (r != CUDA_SUCCESS)                                                               \
            return r;                                                                        \
        if (ap)                                                                              \
            alpha = *ap;                                                                     \
        if (n <= 0 || alpha == (T)0)                                                         \
            return CUDA_SUCCESS;                                                             \
        if ((r = check_vec(l, x, n, incx, sizeof(T))) != CUDA_SUCCESS ||                     \
            (r = check_vec(l, y, n, incy, sizeof(T))) != CUDA_SUCCESS)                       \
            return r;                                                                        \
        for (long long i = 0; i < n; i++)                                                    \
            y[i * incy] = alpha * x[i * incx] + y[i * incy];                                 \
        return CUDA_SUCCESS;                                                                 \
    }

#define EMU_SCAL(T, name)                                                                    \
    static CUresult name(const simcuda_launch_t *l, void **params)                          \
    {                                                                                        \
        long long n = P(long long, 0), incx = P(long long, 4);                               \
        T alpha = P(T, 1);                                                                   \
        const T *ap = P(const T *, 2);                                                       \
        T *x = P(T *, 3);                                                                    \
        CUresult r = check_launch(l);                                                        \
        if (r == CUDA_SUCCESS && ap)                                                         \
            r = simcuda_emu_check(l, ap, sizeof(T));                                         \
        if (r != CUDA_SUCCESS)                                                               \
            return r;                                                                        \
        if (ap)                                                                              \
            alpha = *ap;                                                                     \
        if (n <= 0 || incx <= 0)                                                             \
            return CUDA_SUCCESS;                                                             \
        if ((r = check_vec(l, x, n, incx, sizeof(T))) != CUDA_SUCCESS)                       \
            return r;                                                                        \
        for (long long i = 0; i < n; i++)                                                    \
            x[i * incx] = alpha * x[i * incx];                                               \
        return CUDA_SUCCESS;                                                                 \
    }

#define EMU_COPY(T, name)                                                                    \
    static CUresult name(const simcuda_launch_t *l, void **params)                          \
    {                                                                                        \
        long long n = P(long long, 0), incx = P(long long, 2), incy = P(long long, 4);       \
        const T *x = P(const T *, 1);                                                        \
        T *y = P(T *, 3);                                                                    \
        CUresult r = check_launch(l);                                                        \
        if (r != CUDA_SUCCESS || n <= 0)                                                     \
            return r;                                                                        \
        if ((r = check_vec(l, x, n, incx, sizeof(T))) != CUDA_SUCCESS ||                     \
            (r = check_vec(l, y, n, incy, sizeof(T))) != CUDA_SUCCESS)                       \
            return r;                                                                        \
        for (long long i = 0; i < n; i++)                                                    \
            y[i * incy] = x[i * incx];                                                       \
        return CUDA_SUCCESS;                                                                 \
    }

EMU_AXPY(float, emu_saxpy)
EMU_AXPY(double, emu_daxpy)
EMU_SCAL(float, emu_sscal)
EMU_SCAL(double, emu_dscal)
EMU_COPY(float, emu_scopy)
EMU_COPY(double, emu_dcopy)

/* ---- dot, nrm2: the last-block-done protocol ---- */

/* Checks the scratch, then counts the grid's blocks in. Returns 1 when the
 * last block would run (the counter was 0), and puts the counter where the
 * kernel leaves it. */
static CUresult finish_protocol(const simcuda_launch_t *l, double *partials, size_t per_block,
                                unsigned *counter, void *result, size_t rsz, int *last)
{
    unsigned g = l->grid[0];
    CUresult r;
    if ((r = simcuda_emu_check(l, partials, g * per_block * sizeof(double))) != CUDA_SUCCESS ||
        (r = simcuda_emu_check(l, counter, sizeof *counter)) != CUDA_SUCCESS ||
        (r = simcuda_emu_check(l, result, rsz)) != CUDA_SUCCESS)
        return r;
    unsigned before = *counter;
    *last = before == 0u;
    *counter = *last ? 0u : before + g;
    return CUDA_SUCCESS;
}

#define EMU_DOT(T, name)                                                                     \
    static CUresult name(const simcuda_launch_t *l, void **params)                          \
    {                                                                                        \
        long long n = P(long long, 0), incx = P(long long, 2), incy = P(long long, 4);       \
        const T *x = P(const T *, 1), *y = P(const T *, 3);                                  \
        double *partials = P(double *, 5);                                                   \
        unsigned *counter = P(unsigned *, 6);                                                \
        T *result = P(T *, 7);                                                               \
        int last = 0;                                                                        \
        CUresult r = check_launch(l);                                                        \
        if (r == CUDA_SUCCESS && n > 0 &&                                                    \
            ((r = check_vec(l, x, n, incx, sizeof(T))) != CUDA_SUCCESS ||                    \
             (r = check_vec(l, y, n, incy, sizeof(T))) != CUDA_SUCCESS))                     \
            return r;                                                                        \
        if (r == CUDA_SUCCESS)                                                               \
            r = finish_protocol(l, partials, 1, counter, result, sizeof(T), &last);          \
        if (r != CUDA_SUCCESS)                                                               \
            return r;                                                                        \
        unsigned g = l->grid[0];                                                             \
        long long threads = (long long)g * EMU_BLOCK;                                        \
        memset(partials, 0, g * sizeof(double));                                             \
        for (long long i = 0; i < n; i++)                                                    \
            partials[(i % threads) / EMU_BLOCK] += (double)x[i * incx] * (double)y[i * incy]; \
        double s = 0.0;                                                                      \
        for (unsigned b = 0; b < g; b++)                                                     \
            s += partials[b];                                                                \
        if (last)                                                                            \
            *result = (T)s;                                                                  \
        return CUDA_SUCCESS;                                                                 \
    }

EMU_DOT(float, emu_sdot)
EMU_DOT(double, emu_ddot)

static CUresult emu_snrm2(const simcuda_launch_t *l, void **params)
{
    long long n = P(long long, 0), incx = P(long long, 2);
    const float *x = P(const float *, 1);
    double *partials = P(double *, 3);
    unsigned *counter = P(unsigned *, 4);
    float *result = P(float *, 5);
    int last = 0;
    int any = n > 0 && incx > 0;
    CUresult r = check_launch(l);
    if (r == CUDA_SUCCESS && any)
        r = check_vec(l, x, n, incx, sizeof(float));
    if (r == CUDA_SUCCESS)
        r = finish_protocol(l, partials, 1, counter, result, sizeof(float), &last);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned g = l->grid[0];
    long long threads = (long long)g * EMU_BLOCK;
    memset(partials, 0, g * sizeof(double));
    for (long long i = 0; any && i < n; i++)
        partials[(i % threads) / EMU_BLOCK] += (double)x[i * incx] * (double)x[i * incx];
    double s = 0.0;
    for (unsigned b = 0; b < g; b++)
        s += partials[b];
    if (last)
        *result = (float)sqrt(s);
    return CUDA_SUCCESS;
}

/* dnrm2 keeps three sums per block (Blue's scaling, as the kernel does). */
static CUresult emu_dnrm2(const simcuda_launch_t *l, void **params)
{
    const double tsml = 0x1p-511, tbig = 0x1p+486, ssml = 0x1p+537, sbig = 0x1p-538;
    long long n = P(long long, 0), incx = P(long long, 2);
    const double *x = P(const double *, 1);
    double *partials = P(double *, 3);
    unsigned *counter = P(unsigned *, 4);
    double *result = P(double *, 5);
    int last = 0;
    int any = n > 0 && incx > 0;
    CUresult r = check_launch(l);
    if (r == CUDA_SUCCESS && any)
        r = check_vec(l, x, n, incx, sizeof(double));
    if (r == CUDA_SUCCESS)
        r = finish_protocol(l, partials, 3, counter, result, sizeof(double), &last);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned g = l->grid[0];
    long long threads = (long long)g * EMU_BLOCK;
    memset(partials, 0, 3 * g * sizeof(double));
    for (long long i = 0; any && i < n; i++) {
        double *p = partials + 3 * ((i % threads) / EMU_BLOCK);
        double ax = fabs(x[i * incx]);
        if (ax > tbig)
            p[0] += (ax * sbig) * (ax * sbig);
        else if (ax < tsml)
            p[2] += (ax * ssml) * (ax * ssml);
        else
            p[1] += ax * ax;
    }
    double big = 0.0, med = 0.0, sml = 0.0;
    for (unsigned b = 0; b < g; b++) {
        big += partials[3 * b];
        med += partials[3 * b + 1];
        sml += partials[3 * b + 2];
    }
    double scl = 1.0, sumsq = med;
    if (big > 0.0) {
        if (med > 0.0 || isnan(med))
            big += (med * sbig) * sbig;
        scl = 1.0 / sbig;
        sumsq = big;
    } else if (sml > 0.0) {
        if (med > 0.0 || isnan(med)) {
            double m = sqrt(med), s = sqrt(sml) / ssml;
            double ymin = m > s ? s : m, ymax = m > s ? m : s;
            sumsq = ymax * ymax * (1.0 + (ymin / ymax) * (ymin / ymax));
        } else {
            scl = 1.0 / ssml;
            sumsq = sml;
        }
    }
    if (last)
        *result = scl * sqrt(sumsq);
    return CUDA_SUCCESS;
}

#define SZ_LL sizeof(long long)
#define SZ_P sizeof(void *)

SIMCUDA_EMULATION_ARGS(hk_saxpy_kernel, emu_saxpy, SZ_LL, sizeof(float), SZ_P, SZ_P, SZ_LL,
                       SZ_P, SZ_LL);
SIMCUDA_EMULATION_ARGS(hk_daxpy_kernel, emu_daxpy, SZ_LL, sizeof(double), SZ_P, SZ_P, SZ_LL,
                       SZ_P, SZ_LL);
SIMCUDA_EMULATION_ARGS(hk_sscal_kernel, emu_sscal, SZ_LL, sizeof(float), SZ_P, SZ_P, SZ_LL);
SIMCUDA_EMULATION_ARGS(hk_dscal_kernel, emu_dscal, SZ_LL, sizeof(double), SZ_P, SZ_P, SZ_LL);
SIMCUDA_EMULATION_ARGS(hk_scopy_kernel, emu_scopy, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_LL);
SIMCUDA_EMULATION_ARGS(hk_dcopy_kernel, emu_dcopy, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_LL);
SIMCUDA_EMULATION_ARGS(hk_sdot_kernel, emu_sdot, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_P,
                       SZ_P);
SIMCUDA_EMULATION_ARGS(hk_ddot_kernel, emu_ddot, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_P,
                       SZ_P);
SIMCUDA_EMULATION_ARGS(hk_snrm2_kernel, emu_snrm2, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_P, SZ_P);
SIMCUDA_EMULATION_ARGS(hk_dnrm2_kernel, emu_dnrm2, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_P, SZ_P);
