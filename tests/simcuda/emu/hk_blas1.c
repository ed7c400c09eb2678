/* Host emulations of kernels/hk_blas1*.cu for the simulated driver.
 *
 * axpy, scal and copy compute what the whole grid computes, with the kernels'
 * argument layout. dot and nrm2 run block by block (SIMCUDA_EMULATION_BLOCKS),
 * so that the simulation can interleave them with launches on other streams:
 * each block leaves device memory as the kernel's block leaves it (its
 * partials, the counter, and for the last block the result and the counter
 * back at 0), and two launches sharing partials and counter from different
 * streams go wrong as they do on a GPU. Every pointer is checked with
 * simcuda_emu_check first, so a pointer of another device or a freed one
 * fails the launch. */
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

/* ---- dot, nrm2: the last-block-done protocol, block by block ---- */

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

/* The arguments of a reduction kernel, by name. */
typedef struct red_args {
    long long n, incx, incy;
    const void *x, *y;
    double *partials;
    unsigned *counter;
    void *result;
    int any; /* there are elements to read */
} red_args_t;

static red_args_t red_args(void **params, const reduction_t *op)
{
    const int k = op->dot ? 2 : 0; /* where partials, counter, result start, less 3 */
    red_args_t a;
    a.n = P(long long, 0);
    a.x = P(const void *, 1);
    a.incx = P(long long, 2);
    a.y = op->dot ? P(const void *, 3) : NULL;
    a.incy = op->dot ? P(long long, 4) : 0;
    a.partials = P(double *, 3 + k);
    a.counter = P(unsigned *, 4 + k);
    a.result = P(void *, 5 + k);
    a.any = a.n > 0 && (op->dot || a.incx > 0);
    return a;
}

static double elem(const void *v, long long i, size_t esz)
{
    return esz == sizeof(float) ? (double)((const float *)v)[i] : ((const double *)v)[i];
}

/* Every pointer the grid will touch, before any block runs. */
static CUresult red_check(const simcuda_launch_t *l, void **params, const reduction_t *op)
{
    red_args_t a = red_args(params, op);
    CUresult r = check_launch(l);
    if (r == CUDA_SUCCESS && a.any)
        r = op->dot ? check_pair(l, a.n, a.x, a.incx, a.y, a.incy, op->esz)
                    : check_vec(l, a.x, a.n, a.incx, op->esz);
    if (r == CUDA_SUCCESS)
        r = simcuda_emu_check(l, a.partials, l->grid[0] * op->sums * sizeof(double));
    if (r == CUDA_SUCCESS)
        r = simcuda_emu_check(l, a.counter, sizeof *a.counter);
    if (r == CUDA_SUCCESS)
        r = simcuda_emu_check(l, a.result, op->esz);
    return r;
}

/* Block b as the kernel runs it: its share of the elements (element i
 * belongs to block (i mod (grid * 256)) / 256, as on the kernels' strided
 * path) into its partials, then it counts itself in; the block that counts
 * last (the counter read G - 1) adds every block's partials in block order,
 * writes the result and puts the counter back to 0. A counter that did not
 * start at 0 makes no block, or the wrong one, see itself last, as on a GPU. */
static void red_block(const simcuda_launch_t *l, void **params, unsigned b,
                      const reduction_t *op)
{
    red_args_t a = red_args(params, op);
    unsigned g = l->grid[0];
    long long threads = (long long)g * EMU_BLOCK;
    double *mine = a.partials + (size_t)op->sums * b;
    for (unsigned j = 0; j < op->sums; j++)
        mine[j] = 0.0;
    for (long long start = (long long)b * EMU_BLOCK; a.any && start < a.n; start += threads)
        for (long long i = start; i < start + EMU_BLOCK && i < a.n; i++) {
            double xi = elem(a.x, i * a.incx, op->esz);
            op->add(mine, xi, op->dot ? elem(a.y, i * a.incy, op->esz) : xi);
        }
    unsigned before = (*a.counter)++;
    if (before != g - 1)
        return;
    double s[3] = {0.0, 0.0, 0.0};
    for (unsigned k = 0; k < g; k++)
        for (unsigned j = 0; j < op->sums; j++)
            s[j] += a.partials[(size_t)op->sums * k + j];
    double v = op->finish(s);
    if (op->esz == sizeof(float))
        *(float *)a.result = (float)v;
    else
        *(double *)a.result = v;
    *a.counter = 0u;
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
    static const reduction_t name##_op = {dot, sizeof(T), sums, add, finish};                \
    static CUresult name##_check(const simcuda_launch_t *l, void **params)                  \
    {                                                                                        \
        return red_check(l, params, &name##_op);                                             \
    }                                                                                        \
    static void name##_block(const simcuda_launch_t *l, void **params, unsigned b)          \
    {                                                                                        \
        red_block(l, params, b, &name##_op);                                                 \
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
SIMCUDA_EMULATION_BLOCKS(hk_sdot_kernel, emu_sdot_check, emu_sdot_block, SZ_LL, SZ_P, SZ_LL,
                         SZ_P, SZ_LL, SZ_P, SZ_P, SZ_P);
SIMCUDA_EMULATION_BLOCKS(hk_ddot_kernel, emu_ddot_check, emu_ddot_block, SZ_LL, SZ_P, SZ_LL,
                         SZ_P, SZ_LL, SZ_P, SZ_P, SZ_P);
SIMCUDA_EMULATION_BLOCKS(hk_snrm2_kernel, emu_snrm2_check, emu_snrm2_block, SZ_LL, SZ_P, SZ_LL,
                         SZ_P, SZ_P, SZ_P);
SIMCUDA_EMULATION_BLOCKS(hk_dnrm2_kernel, emu_dnrm2_check, emu_dnrm2_block, SZ_LL, SZ_P, SZ_LL,
                         SZ_P, SZ_P, SZ_P);
/* The aligned kernels take the same parameters and compute the same sums,
 * but read 16-byte vectors and ignore the increments: a misaligned vector
 * faults as it would on a GPU, and an increment other than 1, which a GPU
 * would silently read as 1, is refused so that a test sees the misuse. */
static CUresult aligned_check(const simcuda_launch_t *l, void **params, const reduction_t *op)
{
    red_args_t a = red_args(params, op);
    if (a.n > 0 && (a.incx != 1 || (op->dot && a.incy != 1)))
        return CUDA_ERROR_INVALID_VALUE;
    if (a.n > 0 && (((uintptr_t)a.x | (uintptr_t)a.y) & 15) != 0)
        return CUDA_ERROR_MISALIGNED_ADDRESS;
    return red_check(l, params, op);
}

#define EMU_ALIGNED(name)                                                                    \
    static CUresult name##_aligned_check(const simcuda_launch_t *l, void **params)          \
    {                                                                                        \
        return aligned_check(l, params, &name##_op);                                         \
    }

EMU_ALIGNED(emu_sdot)
EMU_ALIGNED(emu_ddot)
EMU_ALIGNED(emu_snrm2)
EMU_ALIGNED(emu_dnrm2)

SIMCUDA_EMULATION_BLOCKS(hk_sdot_aligned_kernel, emu_sdot_aligned_check, emu_sdot_block, SZ_LL,
                         SZ_P, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_P, SZ_P);
SIMCUDA_EMULATION_BLOCKS(hk_ddot_aligned_kernel, emu_ddot_aligned_check, emu_ddot_block, SZ_LL,
                         SZ_P, SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_P, SZ_P);
SIMCUDA_EMULATION_BLOCKS(hk_snrm2_aligned_kernel, emu_snrm2_aligned_check, emu_snrm2_block,
                         SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_P, SZ_P);
SIMCUDA_EMULATION_BLOCKS(hk_dnrm2_aligned_kernel, emu_dnrm2_aligned_check, emu_dnrm2_block,
                         SZ_LL, SZ_P, SZ_LL, SZ_P, SZ_P, SZ_P);
