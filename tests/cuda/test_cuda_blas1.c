/* hk-cuda numbers: every blas1 op in float and double, host and device
 * pointer modes, n = 0, 1, 31, 2^20 + 3, increments 1, 3 and negative ones,
 * checked against a double-precision reference on the host and against
 * hk-cpu, the project's oracle, run on the same inputs. Also the
 * documented statuses for bad input. Runs on the simulated driver in CI and
 * unchanged on a GPU; without a driver its tests are skipped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_test.h"
#include "hkct_plugin.h"

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
    void *dx = to_device(hx, lx * esz), *dy = to_device(hy, ly * esz);
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
    plug.mem->free_(h, dx);
    plug.mem->free_(h, dy);
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

static void t_bad_input(void)
{
    float hx[4] = {1, 2, 3, 4}, a = 2.0f, r = 5.0f;
    void *dx = to_device(hx, sizeof hx), *dy = to_device(hx, sizeof hx);
    CU_ASSERT_EQUAL_FATAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.blas->saxpy(h, 4, &a, dx, 1, dy, 0), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "incy"));
    CU_ASSERT_EQUAL(plug.blas->scopy(h, 4, dx, 1, dy, 0), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(plug.blas->saxpy(h, 4, &a, NULL, 1, dy, 1), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(plug.blas->saxpy(h, 4, NULL, dx, 1, dy, 1), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(plug.blas->sdot(h, 4, dx, 1, dy, 1, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "result"));
    CU_ASSERT_EQUAL(plug.blas->sdot(h, 4, dx, 1, NULL, 1, &r), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(plug.blas->saxpy(h, (int64_t)1 << 62, &a, dx, 1 << 20, dy, 1),
                    HK_STATUS_INVALID_VALUE);
    /* n <= 0: no-op, results 0 */
    CU_ASSERT_EQUAL(plug.blas->saxpy(h, -5, &a, NULL, 1, NULL, 1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.blas->sdot(h, -1, NULL, 1, NULL, 1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(r, 0.0f);
    r = 5.0f;
    CU_ASSERT_EQUAL(plug.blas->snrm2(h, 4, dx, -1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(r, 0.0f);
    CU_ASSERT_EQUAL(plug.vt->set_pointer_mode(h, (hk_pointer_mode_t)7), HK_STATUS_INVALID_VALUE);
    hk_pointer_mode_t m;
    CU_ASSERT_EQUAL(plug.vt->get_pointer_mode(h, &m), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m, HK_POINTER_MODE_HOST);
    plug.mem->free_(h, dx);
    plug.mem->free_(h, dy);
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
        {"bad input statuses", t_bad_input},
        {"checked mode refuses foreign pointers", t_checked_mode},
    };
    const char *skip = NULL;
    static char why[600];
    if (hkct_plugin_open(&plug) != 0) {
        snprintf(why, sizeof why, "%s", plug.why);
        skip = why;
    } else {
        hk_status_t st = plug.vt->handle_create(NULL, &h);
        if (st == HK_STATUS_NO_DRIVER || st == HK_STATUS_NO_DEVICE) {
            snprintf(why, sizeof why, "no CUDA driver or device: %s", plug.vt->last_error(NULL));
            skip = why;
        } else if (st != HK_STATUS_OK) {
            fprintf(stderr, "handle_create: %d: %s\n", (int)st, plug.vt->last_error(NULL));
            return 1;
        }
    }
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        CU_pTest test = hk_test_add(s, t[i].name, t[i].fn);
        if (skip)
            hk_test_skip(test, skip);
    }
    return 0;
}
