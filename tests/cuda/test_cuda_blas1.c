/* hk-cuda numbers: every blas1 op in float and double, host and device
 * pointer modes, n = 0, 1, 31, 2^20 + 3, increments 1, 3 and negative ones,
 * checked against a double-precision reference on the host and against
 * hk-cpu, the project's oracle, run on the same inputs. Also the
 * documented statuses for bad input. Runs on the simulated driver in CI and
 * unchanged on a GPU; without a driver its tests are skipped. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_test.h"
#include "test_cuda_blas1.h"

static hkct_plugin_t plug;
static hk_handle_t *h;
static hkct_plugin_t oracle; /* hk-cpu */
static hk_handle_t *oh;

enum op { OP_AXPY, OP_SCAL, OP_COPY, OP_DOT, OP_NRM2 };

static const long long sizes[] = {0, 1, 31, (1LL << 20) + 3};
static const long long incs[][2] = {{1, 1}, {3, 3}, {-2, 1}, {1, -3}};

static long long span(long long n, long long inc)
{
    return n <= 0 ? 1 : 1 + (n - 1) * llabs(inc);
}

/* Position of logical element i (reference BLAS). */
static long long pos(long long i, long long n, long long inc)
{
    return inc < 0 ? (n - 1 - i) * -inc : i * inc;
}

/* Device buffers of elements of esz bytes, through the memory table. */
static void *to_device(const void *host, size_t bytes)
{
    void *d = NULL;
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, bytes, &d), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug.mem->copy_to_device(h, d, host, bytes), HK_STATUS_OK);
    return d;
}

static double get(const void *v, int dbl, long long i)
{
    return dbl ? ((const double *)v)[i] : (double)((const float *)v)[i];
}

/* Misaligned vectors (t_misaligned): x and y start this many elements past a
 * block's (256-byte aligned) start. */
static int offx, offy;

/* Device copy of host bytes, off bytes into a new block; *base is the block. */
static void *to_device_at(const void *host, size_t bytes, size_t off, void **base)
{
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, bytes + off, base), HK_STATUS_OK);
    void *d = (char *)*base + off;
    CU_ASSERT_EQUAL_FATAL(plug.mem->copy_to_device(h, d, host, bytes), HK_STATUS_OK);
    return d;
}

/* Runs one case and compares with the reference. */
static void run_case(enum op op, int dbl, int device_mode, long long n, long long incx,
                     long long incy)
{
    const size_t esz = dbl ? sizeof(double) : sizeof(float);
    const long long lx = span(n, incx), ly = span(n, incy);
    void *hx = malloc(lx * esz), *hy = malloc(ly * esz), *out = malloc(ly * esz + lx * esz);
    double *ref = malloc((lx > ly ? lx : ly) * sizeof(double));
    CU_ASSERT_FATAL(hx && hy && out && ref);
    if (dbl) {
        hkct_fill_double(hx, lx, 7u + (unsigned)n);
        hkct_fill_double(hy, ly, 11u + (unsigned)n);
    } else {
        hkct_fill_float(hx, lx, 7u + (unsigned)n);
        hkct_fill_float(hy, ly, 11u + (unsigned)n);
    }
    void *bx, *by;
    void *dx = to_device_at(hx, lx * esz, offx * esz, &bx);
    void *dy = to_device_at(hy, ly * esz, offy * esz, &by);
    const double alpha = -0.75;
    float falpha = (float)alpha;
    double dalpha = alpha;
    void *alpha_host = dbl ? (void *)&dalpha : (void *)&falpha;
    void *alpha_dev = to_device(alpha_host, esz);
    const unsigned char junk[8] = {0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42};
    void *res_dev = to_device(junk, esz);
    double res_host_d = 42.0;
    float res_host_f = 42.0f;
    void *res = device_mode ? res_dev : dbl ? (void *)&res_host_d : (void *)&res_host_f;
    void *a = device_mode ? alpha_dev : alpha_host;

    CU_ASSERT_EQUAL_FATAL(plug.vt->set_pointer_mode(h, device_mode ? HK_POINTER_MODE_DEVICE
                                                                   : HK_POINTER_MODE_HOST),
                          HK_STATUS_OK);
    hk_status_t st = HK_STATUS_INTERNAL;
    const hk_blas1_v1_t *b = plug.blas;
    switch (op) {
    case OP_AXPY:
        st = dbl ? b->daxpy(h, n, a, dx, incx, dy, incy) : b->saxpy(h, n, a, dx, incx, dy, incy);
        break;
    case OP_SCAL:
        st = dbl ? b->dscal(h, n, a, dx, incx) : b->sscal(h, n, a, dx, incx);
        break;
    case OP_COPY:
        st = dbl ? b->dcopy(h, n, dx, incx, dy, incy) : b->scopy(h, n, dx, incx, dy, incy);
        break;
    case OP_DOT:
        st = dbl ? b->ddot(h, n, dx, incx, dy, incy, res) : b->sdot(h, n, dx, incx, dy, incy, res);
        break;
    case OP_NRM2:
        st = dbl ? b->dnrm2(h, n, dx, incx, res) : b->snrm2(h, n, dx, incx, res);
        break;
    }
    if (st != HK_STATUS_OK)
        printf("\n  op %d dbl %d mode %d n %lld inc %lld,%lld: status %d: %s\n", (int)op, dbl,
               device_mode, n, incx, incy, (int)st, plug.vt->last_error(h));
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    const double eps = dbl ? 0x1p-52 : 0x1p-23;

    /* The oracle: hk-cpu on copies of the inputs (its memory is host memory). */
    void *ox = malloc(lx * esz), *oy = malloc(ly * esz);
    double ores_d = 0.0;
    float ores_f = 0.0f;
    void *ores = dbl ? (void *)&ores_d : (void *)&ores_f;
    CU_ASSERT_FATAL(ox && oy);
    memcpy(ox, hx, lx * esz);
    memcpy(oy, hy, ly * esz);
    const hk_blas1_v1_t *ob = oracle.blas;
    hk_status_t ost = HK_STATUS_INTERNAL;
    switch (op) {
    case OP_AXPY:
        ost = dbl ? ob->daxpy(oh, n, &dalpha, ox, incx, oy, incy)
                  : ob->saxpy(oh, n, &falpha, ox, incx, oy, incy);
        break;
    case OP_SCAL:
        ost = dbl ? ob->dscal(oh, n, &dalpha, ox, incx) : ob->sscal(oh, n, &falpha, ox, incx);
        break;
    case OP_COPY:
        ost = dbl ? ob->dcopy(oh, n, ox, incx, oy, incy) : ob->scopy(oh, n, ox, incx, oy, incy);
        break;
    case OP_DOT:
        ost = dbl ? ob->ddot(oh, n, ox, incx, oy, incy, ores) : ob->sdot(oh, n, ox, incx, oy, incy, ores);
        break;
    case OP_NRM2:
        ost = dbl ? ob->dnrm2(oh, n, ox, incx, ores) : ob->snrm2(oh, n, ox, incx, ores);
        break;
    }
    CU_ASSERT_EQUAL(ost, HK_STATUS_OK);

    if (op == OP_DOT || op == OP_NRM2) {
        double got;
        if (device_mode) {
            CU_ASSERT_EQUAL(plug.mem->copy_to_host(h, out, res_dev, esz), HK_STATUS_OK);
            got = get(out, dbl, 0);
        } else {
            got = dbl ? res_host_d : res_host_f;
        }
        double want = 0.0, mag = 0.0;
        if (op == OP_DOT) {
            for (long long i = 0; i < n; i++) {
                double p = get(hx, dbl, pos(i, n, incx)) * get(hy, dbl, pos(i, n, incy));
                want += p;
                mag += fabs(p);
            }
        } else if (incx > 0) {
            for (long long i = 0; i < n; i++)
                want += get(hx, dbl, i * incx) * get(hx, dbl, i * incx);
            want = sqrt(want);
            mag = want;
        }
        double tol = (2 * eps + (double)n * 0x1p-52) * mag;
        if (fabs(got - want) > tol)
            printf("\n  op %d dbl %d mode %d n %lld inc %lld,%lld: got %.17g want %.17g\n",
                   (int)op, dbl, device_mode, n, incx, incy, got, want);
        CU_ASSERT(fabs(got - want) <= tol);
        double oracle_got = dbl ? ores_d : ores_f;
        if (fabs(got - oracle_got) > 2 * tol)
            printf("\n  op %d dbl %d mode %d n %lld inc %lld,%lld: got %.17g, hk-cpu %.17g\n",
                   (int)op, dbl, device_mode, n, incx, incy, got, oracle_got);
        CU_ASSERT(fabs(got - oracle_got) <= 2 * tol);
    } else {
        /* The whole written array, strides' gaps included, against the reference. */
        const int in_x = op == OP_SCAL;
        const long long len = in_x ? lx : ly;
        const void *orig = in_x ? hx : hy;
        for (long long i = 0; i < len; i++)
            ref[i] = get(orig, dbl, i);
        for (long long i = 0; i < n; i++) {
            double xi = get(hx, dbl, pos(i, n, incx));
            if (op == OP_AXPY)
                ref[pos(i, n, incy)] += alpha * xi;
            else if (op == OP_COPY)
                ref[pos(i, n, incy)] = xi;
            else if (incx > 0)
                ref[i * incx] = alpha * xi;
        }
        CU_ASSERT_EQUAL(plug.mem->copy_to_host(h, out, in_x ? dx : dy, len * esz), HK_STATUS_OK);
        long long bad = 0;
        for (long long i = 0; i < len; i++) {
            double tol = 4 * eps * (fabs(ref[i]) + fabs(get(orig, dbl, i)) + 1.0);
            if (fabs(get(out, dbl, i) - ref[i]) > tol && bad++ == 0)
                printf("\n  op %d dbl %d mode %d n %lld inc %lld,%lld: [%lld] got %.9g want %.9g\n",
                       (int)op, dbl, device_mode, n, incx, incy, i, get(out, dbl, i), ref[i]);
        }
        CU_ASSERT_EQUAL(bad, 0);
        /* and element for element against hk-cpu, gaps included */
        const void *theirs = in_x ? ox : oy;
        long long differ = 0;
        for (long long i = 0; i < len; i++) {
            double tol = 4 * eps * (fabs(ref[i]) + fabs(get(orig, dbl, i)) + 1.0);
            differ += !(fabs(get(out, dbl, i) - get(theirs, dbl, i)) <= tol);
        }
        if (differ)
            printf("\n  op %d dbl %d mode %d n %lld inc %lld,%lld: %lld elements differ from "
                   "hk-cpu\n", (int)op, dbl, device_mode, n, incx, incy, differ);
        CU_ASSERT_EQUAL(differ, 0);
    }
    free(ox);
    free(oy);
    plug.mem->free_(h, bx);
    plug.mem->free_(h, by);
    plug.mem->free_(h, alpha_dev);
    plug.mem->free_(h, res_dev);
    free(hx);
    free(hy);
    free(out);
    free(ref);
}

static void run_all(enum op op, int dbl, int device_mode)
{
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t k = 0; k < sizeof incs / sizeof incs[0]; k++)
            run_case(op, dbl, device_mode, sizes[s], incs[k][0], incs[k][1]);
}

/* Vectors that start 1 to 3 elements off a 16-byte boundary, alone or both,
 * at the same or at different offsets: the kernels' vector path must align
 * itself (or give way to the strided one) and still cover every element. */
static void t_misaligned(void)
{
    static const int offs[][2] = {{1, 0}, {0, 3}, {2, 1}, {3, 3}, {1, 2}};
    const long long n = (1LL << 16) + 5;
    for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
        offx = offs[k][0];
        offy = offs[k][1];
        for (int op = OP_AXPY; op <= OP_NRM2; op++)
            for (int dbl = 0; dbl < 2; dbl++)
                for (int mode = 0; mode < 2; mode++)
                    run_case((enum op)op, dbl, mode, n, 1, 1);
        run_case(OP_DOT, 0, 1, n, -1, 1);
    }
    offx = offy = 0;
}

#define CASE(name, op, dbl, mode) \
    static void name(void) { run_all(op, dbl, mode); }
CASE(t_saxpy_host, OP_AXPY, 0, 0) CASE(t_saxpy_dev, OP_AXPY, 0, 1)
CASE(t_daxpy_host, OP_AXPY, 1, 0) CASE(t_daxpy_dev, OP_AXPY, 1, 1)
CASE(t_sscal_host, OP_SCAL, 0, 0) CASE(t_sscal_dev, OP_SCAL, 0, 1)
CASE(t_dscal_host, OP_SCAL, 1, 0) CASE(t_dscal_dev, OP_SCAL, 1, 1)
CASE(t_scopy_host, OP_COPY, 0, 0) CASE(t_scopy_dev, OP_COPY, 0, 1)
CASE(t_dcopy_host, OP_COPY, 1, 0) CASE(t_dcopy_dev, OP_COPY, 1, 1)
CASE(t_sdot_host, OP_DOT, 0, 0) CASE(t_sdot_dev, OP_DOT, 0, 1)
CASE(t_ddot_host, OP_DOT, 1, 0) CASE(t_ddot_dev, OP_DOT, 1, 1)
CASE(t_snrm2_host, OP_NRM2, 0, 0) CASE(t_snrm2_dev, OP_NRM2, 0, 1)
CASE(t_dnrm2_host, OP_NRM2, 1, 0) CASE(t_dnrm2_dev, OP_NRM2, 1, 1)

/* Norms of values whose squares overflow (or underflow) the type. */
static void t_nrm2_extremes(void)
{
    CU_ASSERT_EQUAL_FATAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    const double scales[] = {1e300, 1e-300, 1.0};
    for (int s = 0; s < 3; s++) {
        double hx[31];
        for (int i = 0; i < 31; i++)
            hx[i] = (i % 2 ? -3.0 : 4.0) * scales[s];
        void *dx = to_device(hx, sizeof hx);
        double r = 0.0;
        CU_ASSERT_EQUAL(plug.blas->dnrm2(h, 31, dx, 1, &r), HK_STATUS_OK);
        double want = sqrt(16.0 * 16 + 9.0 * 15) * scales[s];
        CU_ASSERT(fabs(r - want) <= 1e-14 * want);
        plug.mem->free_(h, dx);
    }
    float fx[31];
    for (int i = 0; i < 31; i++)
        fx[i] = 3e30f;
    void *dx = to_device(fx, sizeof fx);
    float r = 0.0f;
    CU_ASSERT_EQUAL(plug.blas->snrm2(h, 31, dx, 1, &r), HK_STATUS_OK);
    CU_ASSERT(fabs((double)r - 3e30 * sqrt(31.0)) <= 1e-6 * 3e30 * sqrt(31.0));
    plug.mem->free_(h, dx);
}

/* ---- the argument rules of docs/abi.md ("hk.blas1/1: argument rules") ---- */

/* Launches so far on the simulation (0 on a real driver, where the untouched
 * destination shows that nothing ran). */
static size_t (*sim_launch_count)(void);

static size_t launches(void)
{
    return sim_launch_count ? sim_launch_count() : 0;
}

/* A refusal: its status, one line naming the culprit. */
static void refused(hk_status_t got, hk_status_t want, const char *word, const char *call,
                    int line)
{
    const char *msg = plug.vt->last_error(h);
    if (got != want || !strstr(msg, word))
        printf("\n  line %d: %s: status %d (want %d), \"%s\" (want \"%s\" in it)\n", line, call,
               (int)got, (int)want, msg, word);
    CU_ASSERT_EQUAL(got, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, word));
}
#define REFUSED(call, want, word) refused((call), (want), (word), #call, __LINE__)

static void expect_unchanged(const void *dev, const float *want, size_t n)
{
    float back[16];
    CU_ASSERT_EQUAL_FATAL(plug.mem->copy_to_host(h, back, dev, n * sizeof *back), HK_STATUS_OK);
    CU_ASSERT_EQUAL(memcmp(back, want, n * sizeof *back), 0);
}

/* Rules 1, 3, 4, 5, in both pointer modes: each refusal runs nothing. */
static void t_rules_refused(void)
{
    const hk_blas1_v1_t *b = plug.blas;
    float hx[8] = {1, 2, 3, 4, 5, 6, 7, 8}, hy[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    double dd[8] = {0};
    void *dx = to_device(hx, sizeof hx), *dy = to_device(hy, sizeof hy);
    void *ddx = to_device(dd, sizeof dd);
    void *top = (void *)(uintptr_t)(UINTPTR_MAX - 15); /* 8 floats from here wrap around */
    const int64_t MIN = INT64_MIN;
    for (int mode = 0; mode < 2; mode++) {
        CU_ASSERT_EQUAL_FATAL(plug.vt->set_pointer_mode(h, mode ? HK_POINTER_MODE_DEVICE
                                                                : HK_POINTER_MODE_HOST),
                              HK_STATUS_OK);
        float ha = 2.0f, hr = 42.0f;
        void *a = mode ? to_device(&ha, sizeof ha) : (void *)&ha;
        void *r = mode ? to_device(&hr, sizeof hr) : (void *)&hr;
        double hdr = 42.0;
        void *rd = mode ? to_device(&hdr, sizeof hdr) : (void *)&hdr;
        size_t mark = launches();
        /* 1: the handle */
        CU_ASSERT_EQUAL(b->saxpy(NULL, 8, a, dx, 1, dy, 1), HK_STATUS_INVALID_HANDLE);
        CU_ASSERT_EQUAL(b->sscal(NULL, 8, a, dy, 1), HK_STATUS_INVALID_HANDLE);
        CU_ASSERT_EQUAL(b->scopy(NULL, 8, dx, 1, dy, 1), HK_STATUS_INVALID_HANDLE);
        CU_ASSERT_EQUAL(b->sdot(NULL, 8, dx, 1, dy, 1, r), HK_STATUS_INVALID_HANDLE);
        CU_ASSERT_EQUAL(b->dnrm2(NULL, 8, ddx, 1, rd), HK_STATUS_INVALID_HANDLE);
        /* 3: NULL pointers, named; before the increments */
        REFUSED(b->saxpy(h, 8, NULL, dx, 1, dy, 1), HK_STATUS_NULL_POINTER, "alpha");
        REFUSED(b->saxpy(h, 8, a, NULL, MIN, dy, 1), HK_STATUS_NULL_POINTER, "x");
        REFUSED(b->saxpy(h, 8, a, dx, 1, NULL, 0), HK_STATUS_NULL_POINTER, "y");
        REFUSED(b->sscal(h, 8, NULL, dy, 1), HK_STATUS_NULL_POINTER, "alpha");
        REFUSED(b->sscal(h, 8, a, NULL, 1), HK_STATUS_NULL_POINTER, "x");
        REFUSED(b->scopy(h, 8, NULL, 1, dy, 1), HK_STATUS_NULL_POINTER, "x");
        REFUSED(b->scopy(h, 8, dx, 1, NULL, 1), HK_STATUS_NULL_POINTER, "y");
        REFUSED(b->sdot(h, 8, dx, 1, dy, 1, NULL), HK_STATUS_NULL_POINTER, "result");
        REFUSED(b->sdot(h, 8, dx, 1, NULL, MIN, r), HK_STATUS_NULL_POINTER, "y");
        REFUSED(b->snrm2(h, 8, NULL, 1, r), HK_STATUS_NULL_POINTER, "x");
        REFUSED(b->dnrm2(h, 8, ddx, 1, NULL), HK_STATUS_NULL_POINTER, "result");
        /* 4: INT64_MIN has no magnitude; a destination increment of 0 */
        REFUSED(b->saxpy(h, 8, a, dx, MIN, dy, 1), HK_STATUS_INVALID_VALUE, "incx");
        REFUSED(b->saxpy(h, 8, a, dx, 1, dy, MIN), HK_STATUS_INVALID_VALUE, "incy");
        REFUSED(b->saxpy(h, 8, a, dx, 1, dy, 0), HK_STATUS_INVALID_VALUE, "incy");
        REFUSED(b->scopy(h, 8, dx, MIN, dy, 1), HK_STATUS_INVALID_VALUE, "incx");
        REFUSED(b->scopy(h, 8, dx, 1, dy, 0), HK_STATUS_INVALID_VALUE, "incy");
        REFUSED(b->sdot(h, 8, dx, MIN, dy, 1, r), HK_STATUS_INVALID_VALUE, "incx");
        REFUSED(b->sdot(h, 8, dx, 1, dy, MIN, r), HK_STATUS_INVALID_VALUE, "incy");
        /* ... and before the span */
        REFUSED(b->scopy(h, 8, dx, 1, top, 0), HK_STATUS_INVALID_VALUE, "incy");
        /* 5: spans past PTRDIFF_MAX bytes, or past the end of the address space */
        REFUSED(b->saxpy(h, INT64_C(1) << 62, a, dx, 1 << 20, dy, 1), HK_STATUS_INVALID_VALUE,
                "x spans more than PTRDIFF_MAX");
        REFUSED(b->sdot(h, INT64_MAX, dx, 1, dy, 1, r), HK_STATUS_INVALID_VALUE, "x spans");
        REFUSED(b->sscal(h, INT64_MAX / 2, a, dy, 3), HK_STATUS_INVALID_VALUE, "x spans");
        REFUSED(b->scopy(h, 8, dx, 1, top, 1), HK_STATUS_INVALID_VALUE,
                "y (0xfffffffffffffff0) with n = 8 and increment 1 runs past the end");
        REFUSED(b->sdot(h, 8, top, -1, dy, 1, r), HK_STATUS_INVALID_VALUE, "x (");
        REFUSED(b->snrm2(h, 4, top, 2, r), HK_STATUS_INVALID_VALUE, "past the end");
        CU_ASSERT_EQUAL(launches(), mark);
        expect_unchanged(dy, hy, 8);
        if (mode) {
            float back = 0.0f;
            CU_ASSERT_EQUAL(plug.mem->copy_to_host(h, &back, r, sizeof back), HK_STATUS_OK);
            CU_ASSERT_EQUAL(back, 42.0f);
            plug.mem->free_(h, a);
            plug.mem->free_(h, r);
            plug.mem->free_(h, rd);
        } else {
            CU_ASSERT_EQUAL(hr, 42.0f);
            CU_ASSERT_EQUAL(hdr, 42.0);
        }
    }
    plug.mem->free_(h, dx);
    plug.mem->free_(h, dy);
    plug.mem->free_(h, ddx);
}
/* Rule 2: nothing to do is OK, reads nothing (NULL vectors, any increments),
 * and dot and nrm2 write 0 to a non-NULL result: at once in host pointer
 * mode, in stream order in device pointer mode. No kernel runs. */
static void t_rules_nothing_to_do(void)
{
    const hk_blas1_v1_t *b = plug.blas;
    const int64_t MIN = INT64_MIN;
    float hy[8] = {8, 7, 6, 5, 4, 3, 2, 1}, fr = 42.0f;
    double dr = 42.0;
    void *dy = to_device(hy, sizeof hy);
    CU_ASSERT_EQUAL_FATAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    size_t mark = launches();
    CU_ASSERT_EQUAL(b->saxpy(h, 0, NULL, NULL, MIN, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->daxpy(h, -7, NULL, NULL, 1, NULL, 1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->scopy(h, -1, NULL, 0, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->sscal(h, 8, NULL, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->dscal(h, 8, NULL, NULL, MIN), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->sscal(h, 8, NULL, dy, -1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->sdot(h, 0, NULL, MIN, NULL, 0, &fr), HK_STATUS_OK);
    CU_ASSERT_EQUAL(fr, 0.0f);
    dr = 42.0;
    CU_ASSERT_EQUAL(b->ddot(h, -3, NULL, 1, NULL, 1, &dr), HK_STATUS_OK);
    CU_ASSERT_EQUAL(dr, 0.0);
    fr = 42.0f;
    CU_ASSERT_EQUAL(b->snrm2(h, 8, dy, 0, &fr), HK_STATUS_OK);
    CU_ASSERT_EQUAL(fr, 0.0f);
    dr = 42.0;
    CU_ASSERT_EQUAL(b->dnrm2(h, 8, NULL, MIN, &dr), HK_STATUS_OK);
    CU_ASSERT_EQUAL(dr, 0.0);
    CU_ASSERT_EQUAL(b->sdot(h, 0, NULL, 1, NULL, 1, NULL), HK_STATUS_OK); /* NULL result */
    CU_ASSERT_EQUAL(b->snrm2(h, -1, NULL, 1, NULL), HK_STATUS_OK);

    CU_ASSERT_EQUAL_FATAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    const double junk[4] = {42.0, 42.0, 42.0, 42.0};
    void *res = to_device(junk, sizeof junk);
    float *rf = res;
    double *rd = (double *)res + 1;
    CU_ASSERT_EQUAL(b->sdot(h, 0, NULL, 1, NULL, 1, rf), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->dnrm2(h, 5, NULL, -2, rd), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->ddot(h, 0, NULL, MIN, NULL, 1, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->saxpy(h, -2, NULL, NULL, 1, NULL, 1), HK_STATUS_OK);
    double back[4];
    CU_ASSERT_EQUAL(plug.mem->copy_to_host(h, back, res, sizeof back), HK_STATUS_OK);
    float first;
    memcpy(&first, back, sizeof first);
    CU_ASSERT_EQUAL(first, 0.0f);
    /* only sizeof(float) written */
    CU_ASSERT_EQUAL(memcmp((char *)back + 4, (const char *)junk + 4, 4), 0);
    CU_ASSERT_EQUAL(back[1], 0.0);
    CU_ASSERT_EQUAL(back[2], 42.0);
    CU_ASSERT_EQUAL(launches(), mark);
    expect_unchanged(dy, hy, 8);
    plug.mem->free_(h, res);
    plug.mem->free_(h, dy);
}

/* A source increment of 0 is valid: the one element, n times. */
static void t_rules_zero_source_increment(void)
{
    const hk_blas1_v1_t *b = plug.blas;
    float hx[4] = {3, 100, 100, 100}, hy[6] = {1, 2, 3, 4, 5, 6}, back[6], a = 0.5f, r = 0.0f;
    double dx[2] = {-2, 100}, dy[3] = {1, 2, 4}, dback[3], dr = 0.0;
    void *fx = to_device(hx, sizeof hx), *fy = to_device(hy, sizeof hy);
    void *gx = to_device(dx, sizeof dx), *gy = to_device(dy, sizeof dy);
    CU_ASSERT_EQUAL_FATAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b->sdot(h, 6, fx, 0, fy, 1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(r, 3.0f * 21.0f);
    CU_ASSERT_EQUAL(b->ddot(h, 3, gy, 1, gx, 0, &dr), HK_STATUS_OK);
    CU_ASSERT_EQUAL(dr, -2.0 * 7.0);
    CU_ASSERT_EQUAL(b->saxpy(h, 6, &a, fx, 0, fy, 1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->copy_to_host(h, back, fy, sizeof back), HK_STATUS_OK);
    for (int i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(back[i], hy[i] + 1.5f);
    CU_ASSERT_EQUAL(b->dcopy(h, 3, gx, 0, gy, -1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->copy_to_host(h, dback, gy, sizeof dback), HK_STATUS_OK);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(dback[i], -2.0);
    plug.mem->free_(h, fx);
    plug.mem->free_(h, fy);
    plug.mem->free_(h, gx);
    plug.mem->free_(h, gy);
}

/* Checked mode refuses a host pointer where device memory is needed. */
static void t_checked_mode(void)
{
    hk_create_info_t ci = {sizeof ci, 0, HK_CREATE_CHECKED};
    hk_handle_t *c = NULL;
    CU_ASSERT_EQUAL_FATAL(plug.vt->handle_create(&ci, &c), HK_STATUS_OK);
    hk_handle_info_t info = {sizeof info, 0, 0, 0, 0, NULL};
    CU_ASSERT_EQUAL(plug.vt->handle_info(c, &info), HK_STATUS_OK);
    CU_ASSERT(info.flags & HK_CREATE_CHECKED);
    float hx[4] = {1, 2, 3, 4}, a = 2.0f;
    void *dy = NULL;
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(c, sizeof hx, &dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.blas->saxpy(c, 4, &a, hx, 1, dy, 1), HK_STATUS_POINTER_MISMATCH);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(c), "x ("));
    /* Device memory of the handle's device passes, and the numbers are right
     * (x and y alias: y := 2y + y). */
    CU_ASSERT_EQUAL(plug.mem->copy_to_device(c, dy, hx, sizeof hx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.blas->saxpy(c, 4, &a, dy, 1, dy, 1), HK_STATUS_OK);
    float back[4] = {0};
    CU_ASSERT_EQUAL(plug.mem->copy_to_host(c, back, dy, sizeof back), HK_STATUS_OK);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(back[i], 3.0f * hx[i]);
    CU_ASSERT_EQUAL(plug.mem->free_(c, dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(c), HK_STATUS_OK);
}

static int suite_clean(void)
{
    int bad = 0;
    if (h)
        bad |= plug.vt->handle_destroy(h) != HK_STATUS_OK;
    if (oh)
        bad |= oracle.vt->handle_destroy(oh) != HK_STATUS_OK;
    h = oh = NULL;
    return bad;
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk-cuda blas1 numbers", NULL, suite_clean);
    if (hkct_plugin_open_sibling(&oracle, "hk-cpu.so") != 0 ||
        oracle.vt->handle_create(NULL, &oh) != HK_STATUS_OK) {
        fprintf(stderr, "the oracle hk-cpu is unusable: %s\n", oracle.why);
        return 1;
    }
    struct {
        const char *name;
        CU_TestFunc fn;
    } t[] = {
        {"saxpy host", t_saxpy_host}, {"saxpy device", t_saxpy_dev},
        {"daxpy host", t_daxpy_host}, {"daxpy device", t_daxpy_dev},
        {"sscal host", t_sscal_host}, {"sscal device", t_sscal_dev},
        {"dscal host", t_dscal_host}, {"dscal device", t_dscal_dev},
        {"scopy host", t_scopy_host}, {"scopy device", t_scopy_dev},
        {"dcopy host", t_dcopy_host}, {"dcopy device", t_dcopy_dev},
        {"sdot host", t_sdot_host},   {"sdot device", t_sdot_dev},
        {"ddot host", t_ddot_host},   {"ddot device", t_ddot_dev},
        {"snrm2 host", t_snrm2_host}, {"snrm2 device", t_snrm2_dev},
        {"dnrm2 host", t_dnrm2_host}, {"dnrm2 device", t_dnrm2_dev},
        {"nrm2 without overflow or underflow", t_nrm2_extremes},
        {"vectors 1 to 3 elements off alignment, every op", t_misaligned},
        {"argument rules: refusals, in order, run nothing", t_rules_refused},
        {"argument rules: nothing to do writes 0 results, reads nothing",
         t_rules_nothing_to_do},
        {"argument rules: a source increment of 0 reads one element",
         t_rules_zero_source_increment},
        {"checked mode refuses foreign pointers", t_checked_mode},
    };
    const char *skip = NULL;
    static char why[600];
    *(void **)&sim_launch_count = dlsym(RTLD_DEFAULT, "simcuda_launch_count");
    if (hkct_plugin_open(&plug) != 0) {
        snprintf(why, sizeof why, "%s", plug.why);
        skip = why;
    } else {
        int found = hkct_first_handle(&plug, &h, why, sizeof why);
        if (found < 0)
            return 1;
        if (found > 0)
            skip = why;
    }
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        hk_test_add_or_skip(s, t[i].name, t[i].fn, skip);
    return blas1_register_streams(&plug, skip);
}
