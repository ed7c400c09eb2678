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

/* Both vectors of axpy, copy and dot. */
static CUresult check_pair(const simcuda_launch_t *l, long long n, const void *x, long long incx,
                           const void *y, long long incy, size_t esz)
{
    CUresult r = check_vec(l, x, n, incx, esz);
    return r == CUDA_SUCCESS ? check_vec(l, y, n, incy, esz) : r;
}

/* ---- axpy, scal, copy ---- */

/* Checks the launch, then reads alpha (params 1 and 2: alpha, alpha_ptr) as
 * the kernels do: *alpha_ptr, checked first, when alpha_ptr is not NULL. */
static CUresult get_alpha(const simcuda_launch_t *l, void **params, void *alpha, size_t esz)
{
    const void *ap = P(const void *, 2);
    CUresult r = check_launch(l);
    if (r == CUDA_SUCCESS && ap)
        r = simcuda_emu_check(l, ap, esz);
    if (r == CUDA_SUCCESS)
        memcpy(alpha, ap ? ap : params[1], esz);
    return r;
}

#define EMU_AXPY(T, name)                                                                    \
    static CUresult name(const simcuda_launch_t *l, void **params)                          \
    {                                                                                        \
        long long n = P(long long, 0), incx = P(long long, 4), incy = P(long long, 6);       \
        const T *x = P(const T *, 3);                                                        \
        T *y = P(T *, 5), alpha;                                                             \
        CUresult r = get_alpha(l, params, &alpha, sizeof alpha);                             \
        if (r != CUDA_SUCCESS || n <= 0 || alpha == (T)0 ||                                  \
            (r = check_pair(l, n, x, incx, y, incy, sizeof(T))) != CUDA_SUCCESS)             \
            return r;                                                                        \
        for (long long i = 0; i < n; i++)                                                    \
            y[i * incy] = alpha * x[i * incx] + y[i * incy];                                 \
        return CUDA_SUCCESS;                                                                 \
    }

#define EMU_SCAL(T, name)                                                                    \
    static CUresult name(const simcuda_launch_t *l, void **params)                          \
    {                                                                                        \
        long long n = P(long long, 0), incx = P(long long, 4);                               \
        T *x = P(T *, 3), alpha;                                                             \
        CUresult r = get_alpha(l, params, &alpha, sizeof alpha);                             \
        if (r != CUDA_SUCCESS || n <= 0 || incx <= 0 ||                                      \
            (r = check_vec(l, x, n, incx, sizeof(T))) != CUDA_SUCCESS)                       \
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
        if (r != CUDA_SUCCESS || n <= 0 ||                                                   \
            (r = check_pair(l, n, x, incx, y, incy, sizeof(T))) != CUDA_SUCCESS)             \
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

/* One reduction kernel: add folds element i (x[i * incx], and y[i * incy] for
 * dot, else x again) into its block's sums p; finish turns the grid's sums s
 * into the result. Elements are read as double, which every float is. */
typedef struct reduction {
    int dot;       /* x and y (params n, x, incx, y, incy, ...) or x alone */
    size_t esz;    /* sizeof(float) or sizeof(double) */
    unsigned sums; /* doubles per block in partials */
    void (*add)(double *p, double x, double y);
    double (*finish)(const double *s);
} reduction_t;

static double elem(const void *v, long long i, size_t esz)
{
    return esz == sizeof(float) ? (double)((const float *)v)[i] : ((const double *)v)[i];
}

static CUresult emu_reduce(const simcuda_launch_t *l, void **params, const reduction_t *op)
{
    const int k = op->dot ? 2 : 0; /* where partials, counter, result start, less 3 */
    long long n = P(long long, 0), incx = P(long long, 2), incy = op->dot ? P(long long, 4) : 0;
    const void *x = P(const void *, 1), *y = op->dot ? P(const void *, 3) : NULL;
    double *partials = P(double *, 3 + k);
    unsigned *counter = P(unsigned *, 4 + k);
    void *result = P(void *, 5 + k);
    int last = 0;
    int any = n > 0 && (op->dot || incx > 0);
    CUresult r = check_launch(l);
    if (r == CUDA_SUCCESS && any)
        r = op->dot ? check_pair(l, n, x, incx, y, incy, op->esz)
                    : check_vec(l, x, n, incx, op->esz);
    if (r == CUDA_SUCCESS)
        r = finish_protocol(l, partials, op->sums, counter, result, op->esz, &last);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned g = l->grid[0];
    long long threads = (long long)g * EMU_BLOCK;
    memset(partials, 0, g * op->sums * sizeof(double));
    for (long long i = 0; any && i < n; i++) {
        double xi = elem(x, i * incx, op->esz);
        op->add(partials + op->sums * ((i % threads) / EMU_BLOCK), xi,
                op->dot ? elem(y, i * incy, op->esz) : xi);
    }
    double s[3] = {0.0, 0.0, 0.0};
    for (unsigned b = 0; b < g; b++)
        for (unsigned j = 0; j < op->sums; j++)
            s[j] += partials[op->sums * b + j];
    if (last) {
        double v = op->finish(s);
        if (op->esz == sizeof(float))
            *(float *)result = (float)v;
        else
            *(double *)result = v;
    }
    return CUDA_SUCCESS;
}

static void add_prod(double *p, double x, double y)
{
    p[0] += x * y;
}

static double sum_of(const double *s)
{
    return s[0];
}

static double sqrt_of(const double *s)
{
    return sqrt(s[0]);
}

/* dnrm2 keeps three sums per block (Blue's scaling, as the kernel does). */
static const double tsml = 0x1p-511, tbig = 0x1p+486, ssml = 0x1p+537, sbig = 0x1p-538;

static void add_blue(double *p, double x, double y)
{
    (void)y;
    double ax = fabs(x);
    if (ax > tbig)
        p[0] += (ax * sbig) * (ax * sbig);
    else if (ax < tsml)
        p[2] += (ax * ssml) * (ax * ssml);
    else
        p[1] += ax * ax;
}

static double blue_finish(const double *s)
{
    double big = s[0], med = s[1], sml = s[2];
    double scl = 1.0, sumsq = med;
    if (big > 0.0) {
        if (med > 0.0 || isnan(med))
            big += (med * sbig) * sbig;
        scl = 1.0 / sbig;
        sumsq = big;
    } else if (sml > 0.0) {
        if (med > 0.0 || isnan(med)) {
            double m = sqrt(med), q = sqrt(sml) / ssml;
            double ymin = m > q ? q : m, ymax = m > q ? m : q;
            sumsq = ymax * ymax * (1.0 + (ymin / ymax) * (ymin / ymax));
        } else {
            scl = 1.0 / ssml;
            sumsq = sml;
        }
    }
    return scl * sqrt(sumsq);
}

#define EMU_REDUCE(name, dot, T, sums, add, finish)                                          \
    static CUresult name(const simcuda_launch_t *l, void **params)                          \
    {                                                                                        \
        static const reduction_t op = {dot, sizeof(T), sums, add, finish};                   \
        return emu_reduce(l, params, &op);                                                   \
    }

EMU_REDUCE(emu_sdot, 1, float, 1, add_prod, sum_of)
EMU_REDUCE(emu_ddot, 1, double, 1, add_prod, sum_of)
EMU_REDUCE(emu_snrm2, 0, float, 1, add_prod, sqrt_of)
EMU_REDUCE(emu_dnrm2, 0, double, 3, add_blue, blue_finish)

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
