/* hk-validate: every hk.blas1/1 op on small vectors against a reference in
 * long double, both precisions, both pointer modes, positive, negative and
 * zero source increments, x aliasing y, and nrm2 near overflow and underflow.
 * Data moves through hk.memory/1. Elements between the strided ones must not
 * change. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkv.h"

typedef struct ocase {
    int64_t n, incx, incy;
    int alias;   /* y is x (incx == incy) */
    double big;  /* nrm2: scale of the values (0: ordinary) */
} ocase_t;

static const ocase_t two_cases[] = {
    {1, 1, 1, 0, 0},   {7, 1, 1, 0, 0},  {33, 1, 1, 0, 0},  {5, 2, 3, 0, 0},   {6, -1, 1, 0, 0},
    {6, 1, -2, 0, 0},  {5, -2, -3, 0, 0}, {5, 0, 1, 0, 0},  {5, 0, -1, 0, 0},  {4, 3, 0, 0, 0},
    {9, 1, 1, 1, 0},   {5, 2, 2, 1, 0},  {5, -1, -1, 1, 0},
};
static const ocase_t one_cases[] = {
    {1, 1, 0, 0, 0},     {7, 1, 0, 0, 0},      {33, 1, 0, 0, 0},    {5, 2, 0, 0, 0},
    {4, 3, 0, 0, 0},     {3, 1, 0, 0, 1e300},  {3, 2, 0, 0, 1e-300}, {3, 1, 0, 0, 1e30},
    {3, 1, 0, 0, 1e-30},
};

static size_t span(int64_t n, int64_t inc)
{
    int64_t a = inc < 0 ? -inc : inc;
    return (size_t)((n - 1) * a + 1);
}

static int64_t hkv_start(int64_t n, int64_t inc)
{
    return inc < 0 ? (1 - n) * inc : 0;
}

static void pack(const double *v, size_t n, size_t esz, unsigned char *out)
{
    for (size_t i = 0; i < n; i++) {
        float f = (float)v[i];
        memcpy(out + i * esz, esz == 4 ? (void *)&f : (void *)&v[i], esz);
    }
}

static void unpack(const unsigned char *in, size_t n, size_t esz, double *v)
{
    for (size_t i = 0; i < n; i++) {
        float f;
        if (esz == 4) {
            memcpy(&f, in + i * esz, 4);
            v[i] = f;
        } else {
            memcpy(&v[i], in + i * esz, 8);
        }
    }
}

/* The reference for one case; ref holds the written vector's expected
 * contents (x for scal, y otherwise), *res the scalar result. */
static void hkv_reference(const hkv_op_t *o, const ocase_t *c, double alpha, const double *x,
                          const double *y, double *ref, long double *res, long double *mag)
{
    int64_t ix = hkv_start(c->n, c->incx), iy = hkv_start(c->n, c->incy);
    long double acc = 0, m = 0, scale = 0;
    for (int64_t i = 0; i < c->n; i++, ix += c->incx, iy += c->incy) {
        switch (o->kind) {
        case HKV_AXPY: ref[iy] = (double)((long double)alpha * x[ix] + y[iy]); break;
        case HKV_SCAL: ref[i * c->incx] = (double)((long double)alpha * x[i * c->incx]); break;
        case HKV_COPY: ref[iy] = x[ix]; break;
        case HKV_DOT:
            acc += (long double)x[ix] * y[iy];
            m += fabsl((long double)x[ix] * y[iy]);
            break;
        case HKV_NRM2:
            if (fabsl(x[i * c->incx]) > scale)
                scale = fabsl(x[i * c->incx]);
            break;
        case HKV_OTHER: break; /* no rule: never registered */
        }
    }
    if (o->kind == HKV_NRM2 && scale > 0) {
        for (int64_t i = 0; i < c->n; i++) {
            long double q = x[i * c->incx] / scale;
            acc += q * q;
        }
        acc = scale * sqrtl(acc);
        m = acc;
    }
    *res = acc;
    *mag = m;
}

/* Fills x (and y) with values for case c; returns alpha. */
static double fill(const hkv_op_t *o, const ocase_t *c, uint64_t seed, double *x, size_t nx,
                   double *y, size_t ny)
{
    for (size_t i = 0; i < nx; i++) {
        x[i] = hkv_rand(&seed);
        if (c->big != 0)
            x[i] = (i % 2 ? -1 : 1) * c->big * (1.0 + (double)i / 4);
        if (o->esz == 4)
            x[i] = (float)x[i];
    }
    for (size_t i = 0; i < ny; i++)
        y[i] = o->esz == 4 ? (float)hkv_rand(&seed) : hkv_rand(&seed);
    return -1.75;
}

/* One case's host copies and device buffers. */
typedef struct work {
    const hkv_op_t *o;
    const ocase_t *c;
    size_t nx, ny;
    double alpha, *hx, *hy, *ref, *got;
    unsigned char *buf, rb[8];
    void *dx, *dy, *da, *dr;
    char what[96];
} work_t;

/* Reads the op's output back and compares it with the reference. */
static int verify(const hkv_plugin_t *p, hk_handle_t *h, int dev, work_t *w, hkv_result_t *r)
{
    const hkv_op_t *o = w->o;
    const ocase_t *c = w->c;
    const size_t esz = o->esz;
    long double res, mag;
    const double *dest_init = o->kind == HKV_SCAL ? w->hx : w->hy;
    size_t nd = o->kind == HKV_SCAL ? w->nx : w->ny;
    memcpy(w->ref, dest_init, nd * sizeof *w->ref);
    hkv_reference(o, c, w->alpha, w->hx, c->alias ? w->hx : w->hy, w->ref, &res, &mag);
    const double eps = esz == 4 ? FLT_EPSILON : DBL_EPSILON;
    if (o->kind == HKV_DOT || o->kind == HKV_NRM2) {
        if (dev && hkv_get(p, h, w->rb, w->dr, esz, r))
            return -1;
        unpack(w->rb, 1, esz, w->got);
        long double tol = 4 * eps * (mag + fabsl(res)) * (long double)(c->n + 1) +
                          (esz == 4 ? FLT_MIN : DBL_MIN);
        if (!(fabsl(w->got[0] - res) <= tol)) {
            hkv_fail(r, "%s: result %.9g, want %.9Lg", w->what, w->got[0], res);
            return -1;
        }
        return 0;
    }
    if (hkv_get(p, h, w->buf, o->kind == HKV_SCAL ? w->dx : w->dy, nd * esz, r))
        return -1;
    unpack(w->buf, nd, esz, w->got);
    for (size_t i = 0; i < nd; i++) {
        int untouched = w->ref[i] == dest_init[i];
        double tol = untouched ? 0 : 4 * eps * (fabs(w->ref[i]) + fabs(w->alpha) * 2 + 2);
        if (!(fabs(w->got[i] - w->ref[i]) <= tol)) {
            hkv_fail(r, "%s: %s[%zu] = %.9g, want %.9g%s", w->what,
                     o->kind == HKV_SCAL ? "x" : "y", i, w->got[i], w->ref[i],
                     untouched ? " (an element it must not touch)" : "");
            return -1;
        }
    }
    return 0;
}

/* Allocates and fills the device buffers of a case. */
static int hkv_upload(const hkv_plugin_t *p, hk_handle_t *h, int dev, work_t *w, hkv_result_t *r)
{
    const size_t esz = w->o->esz;
    unsigned char ab[8];
    w->dx = hkv_dalloc(p, h, w->nx * esz, r);
    w->dy = w->ny ? (w->c->alias ? w->dx : hkv_dalloc(p, h, w->ny * esz, r)) : NULL;
    w->da = dev ? hkv_dalloc(p, h, esz, r) : NULL;
    w->dr = dev ? hkv_dalloc(p, h, esz, r) : NULL;
    pack(&w->alpha, 1, esz, ab);
    unpack(ab, 1, esz, &w->alpha); /* the value the op sees */
    pack(w->hx, w->nx, esz, w->buf);
    if (!w->dx || (w->ny && !w->dy) || (dev && (!w->da || !w->dr)) ||
        hkv_put(p, h, w->dx, w->buf, w->nx * esz, r))
        return -1;
    pack(w->hy, w->ny, esz, w->buf);
    if ((w->ny && !w->c->alias && hkv_put(p, h, w->dy, w->buf, w->ny * esz, r)) ||
        (dev && hkv_put(p, h, w->da, ab, esz, r)))
        return -1;
    return 0;
}

/* Runs one case; returns 0, or -1 with the failure recorded. after_call,
 * when not NULL, runs between the op and reading its results back. */
static int one_case(const hkv_plugin_t *p, hk_handle_t *h, int opi, int dev, const ocase_t *c,
                    uint64_t seed, void (*after_call)(void), hkv_result_t *r)
{
    work_t w;
    memset(&w, 0, sizeof w);
    w.o = &hkv_ops[opi];
    w.c = c;
    const int has_y = w.o->kind == HKV_AXPY || w.o->kind == HKV_COPY || w.o->kind == HKV_DOT;
    w.nx = span(c->n, c->incx);
    w.ny = has_y ? (c->alias ? w.nx : span(c->n, c->incy)) : 0;
    const size_t most = w.nx > w.ny ? w.nx : w.ny;
    if (most > 4096) {
        hkv_fail(r, "%s: a case of more than 4096 elements (a bug of this program)", w.o->name);
        return -1;
    }
    w.hx = calloc(4 * most, sizeof *w.hx);
    w.buf = malloc(most * w.o->esz);
    int ret = -1;
    if (!w.hx || !w.buf) {
        hkv_fail(r, "out of host memory");
        goto out;
    }
    w.hy = w.hx + most, w.ref = w.hy + most, w.got = w.ref + most;
    seed += 0x9e3779b97f4a7c15ull * (uint64_t)(c->n + 3 * c->incx + 7 * c->incy);
    w.alpha = fill(w.o, c, seed, w.hx, w.nx, w.hy, w.ny);
    if (c->alias)
        memcpy(w.hy, w.hx, w.nx * sizeof *w.hx);
    snprintf(w.what, sizeof w.what, "%s %s n=%lld incx=%lld incy=%lld%s", w.o->name,
             dev ? "device" : "host", (long long)c->n, (long long)c->incx, (long long)c->incy,
             c->alias ? " y=x" : "");
    if (hkv_upload(p, h, dev, &w, r))
        goto out;
    unsigned char ab[8];
    pack(&w.alpha, 1, w.o->esz, ab);
    hk_status_t st = hkv_call(p, opi, h, c->n, dev ? w.da : (void *)ab, w.dx, c->incx, w.dy,
                              c->incy, dev ? w.dr : (void *)w.rb);
    if (st != HK_STATUS_OK) {
        char e[256];
        hkv_fail(r, "%s gave %s: %s", w.what, hkv_st(st), hkv_last_error(p, h, e, sizeof e));
        goto out;
    }
    if (after_call)
        after_call();
    ret = verify(p, h, dev, &w, r);
out:
    hkv_dfree(p, h, w.dx);
    if (w.dy != w.dx)
        hkv_dfree(p, h, w.dy);
    hkv_dfree(p, h, w.da);
    hkv_dfree(p, h, w.dr);
    free(w.hx);
    free(w.buf);
    return ret;
}

static void check_op(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    const hkv_op_t *o = &hkv_ops[k->a];
    const int dev = k->b;
    if (!hkv_op_present(p, k->a)) {
        hkv_notsup(r, o->name);
        return;
    }
    if (!hkv_can_move(p) || (dev && !p->vt.set_pointer_mode)) {
        hkv_notsup(r, hkv_can_move(p) ? "set_pointer_mode" : "hk.memory/1");
        return;
    }
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    if (dev && p->vt.set_pointer_mode(h, HK_POINTER_MODE_DEVICE) != HK_STATUS_OK) {
        hkv_fail(r, "set_pointer_mode(DEVICE) failed");
        hkv_destroy(p, h, r);
        return;
    }
    const int two = o->kind == HKV_AXPY || o->kind == HKV_COPY || o->kind == HKV_DOT;
    const ocase_t *cs = two ? two_cases : one_cases;
    size_t nc = two ? sizeof two_cases / sizeof two_cases[0] : sizeof one_cases / sizeof one_cases[0];
    int ran = 0;
    for (size_t i = 0; i < nc; i++) {
        const ocase_t *c = &cs[i];
        if (c->incy == 0 && o->kind != HKV_DOT && two)
            continue; /* a destination increment of 0 is refused */
        if (c->big != 0 && (o->kind != HKV_NRM2 || (o->esz == 4) != (c->big > 1e-31 && c->big < 1e31)))
            continue; /* extremes of the op's own precision */
        if (one_case(p, h, k->a, dev, c, 0, NULL, r) == 0)
            ran++;
    }
    hkv_destroy(p, h, r);
    hkv_note(r, "%d cases right (strides, negative and zero increments%s)", ran,
             o->kind == HKV_NRM2 ? ", huge and tiny values" : two ? ", y = x" : "");
}

int hkv_op_case(const hkv_plugin_t *p, hk_handle_t *h, int op, int dev, int64_t n, int64_t incx,
                int64_t incy, uint64_t seed, void (*after_call)(void), hkv_result_t *r)
{
    ocase_t c = {n, incx, incy, 0, 0};
    return one_case(p, h, op, dev, &c, seed, after_call, r);
}

/* A slot of hk.blas1/1 that this program knows only from the header's list. */
static void check_unruled(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)p;
    hkv_skip(r, "hk-validate has no rule for %s: its family is none of axpy, scal, copy, dot, "
             "nrm2", hkv_ops[k->a].name);
}

void hkv_register_ops(void)
{
    char name[96];
    hkv_ops_init();
    for (int op = 0; op < HKV_NOPS; op++) {
        if (hkv_ops[op].kind == HKV_OTHER) {
            snprintf(name, sizeof name, "blas1.%s", hkv_ops[op].name);
            hkv_add(name, check_unruled, HKV_NEED_PLUGIN, op, 0, 0);
            continue;
        }
        for (int dev = 0; dev < 2; dev++) {
            snprintf(name, sizeof name, "ops.%s.%s", hkv_ops[op].name, dev ? "device" : "host");
            hkv_add(name, check_op, HKV_NEED_HANDLE, op, dev, 0);
        }
    }
}
