/* hk-host run: every hk.blas1/1 op in float and double, in host and device
 * pointer mode, on data placed through hk.memory/1, checked against a
 * double-precision reference computed here. Exits 1 on a wrong result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hk_blas1.h"
#include "hk_host.h"
#include "hk_memory.h"
#include "hk_status_text.h"

typedef struct run_ctx {
    hk_host_target_t *t;
    const hk_blas1_v1_t *b;
    const hk_memory_v1_t *m;
    int64_t n;
    unsigned seed;
    int failures;
    int checks;
} run_ctx_t;

static double rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffff) / 32768.0 - 1.0; /* in [-1, 1) */
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int report(run_ctx_t *c, const char *op, const char *mode, hk_status_t st, double err,
                  double tol, double dt)
{
    c->checks++;
    if (st != HK_STATUS_OK) {
        c->failures++;
        printf("  %-6s %-6s n=%-9lld FAILED: %s: %s\n", op, mode, (long long)c->n,
               hk_status_name(st), c->t->vt->last_error(c->t->handle));
        return -1;
    }
    int ok = err <= tol; /* NaN fails too */
    if (!ok)
        c->failures++;
    printf("  %-6s %-6s n=%-9lld %s  rel.err %.2e (tol %.0e)  %.2f ms\n", op, mode,
           (long long)c->n, ok ? "ok   " : "WRONG", err, tol, dt * 1e3);
    fflush(stdout);
    return ok ? 0 : -1;
}

/* Allocates and uploads; returns NULL after reporting on failure. */
static void *upload(run_ctx_t *c, const void *src, size_t bytes)
{
    void *d = NULL;
    hk_status_t st = c->m->alloc(c->t->handle, bytes, &d);
    if (st == HK_STATUS_OK)
        st = c->m->copy_to_device(c->t->handle, d, src, bytes);
    if (st != HK_STATUS_OK) {
        fprintf(stderr, "hk-host: device memory (%zu bytes): %s: %s\n", bytes,
                hk_status_name(st), c->t->vt->last_error(c->t->handle));
        if (d)
            c->m->free_(c->t->handle, d);
        return NULL;
    }
    return d;
}

/* One workload per element type. T: type, P: s or d, TOL: relative tolerance
 * for element-wise results, RTOL: for reductions (scaled by their magnitude). */
#define HK_HOST_RUN(T, P, TOL, RTOL)                                                    \
    static int run_##P(run_ctx_t *c, hk_pointer_mode_t mode)                            \
    {                                                                                   \
        const char *mname = mode == HK_POINTER_MODE_HOST ? "host" : "device";           \
        int64_t n = c->n;                                                               \
        size_t bytes = (size_t)n * sizeof(T);                                           \
        T *x = malloc(bytes + sizeof(T)), *y = malloc(bytes + sizeof(T));               \
        T *out = malloc(bytes + sizeof(T));                                             \
        double *ref = malloc((size_t)n * sizeof(double) + sizeof(double));              \
        T *dx = NULL, *dy = NULL, *dscal = NULL;                                        \
        int rc = -1;                                                                    \
        if (!x || !y || !out || !ref) {                                                 \
            fprintf(stderr, "hk-host: out of host memory for n=%lld\n", (long long)n);  \
            goto out;                                                                   \
        }                                                                               \
        unsigned s = c->seed;                                                           \
        for (int64_t i = 0; i < n; i++) {                                               \
            x[i] = (T)rnd(&s);                                                          \
            y[i] = (T)rnd(&s);                                                          \
        }                                                                               \
        T alpha = (T)0.75;                                                              \
        if (!(dx = upload(c, x, bytes)) && n)                                           \
            goto out;                                                                   \
        if (!(dy = upload(c, y, bytes)) && n)                                           \
            goto out;                                                                   \
        if (!(dscal = upload(c, &alpha, sizeof alpha)))                                 \
            goto out;                                                                   \
        hk_status_t st = c->t->vt->set_pointer_mode(c->t->handle, mode);                \
        if (st != HK_STATUS_OK) {                                                       \
            report(c, "mode", mname, st, 0, 0, 0);                                      \
            goto out;                                                                   \
        }                                                                               \
        const T *pa = mode == HK_POINTER_MODE_HOST ? &alpha : dscal;                    \
        T res = 0, *pres = mode == HK_POINTER_MODE_HOST ? &res : dscal;                 \
        double t0, err;                                                                 \
        /* axpy: y := alpha x + y */                                                    \
        t0 = seconds();                                                                 \
        st = c->b->P##axpy(c->t->handle, n, pa, dx, 1, dy, 1);                          \
        if (st == HK_STATUS_OK && c->t->vt->synchronize)                                \
            st = c->t->vt->synchronize(c->t->handle);                                   \
        double dt = seconds() - t0;                                                     \
        if (st == HK_STATUS_OK)                                                         \
            st = c->m->copy_to_host(c->t->handle, out, dy, bytes);                      \
        err = 0;                                                                        \
        for (int64_t i = 0; i < n; i++) {                                               \
            ref[i] = (double)alpha * x[i] + y[i];                                       \
            double scale = fabs((double)alpha * x[i]) + fabs((double)y[i]) + 1e-30;     \
            double e = fabs(out[i] - ref[i]) / scale;                                   \
            if (!(e <= err))                                                            \
                err = e;                                                                \
        }                                                                               \
        report(c, #P "axpy", mname, st, err, TOL, dt);                                  \
        /* scal: y := alpha y (y now holds axpy's result, ref too) */                   \
        t0 = seconds();                                                                 \
        st = c->b->P##scal(c->t->handle, n, pa, dy, 1);                                 \
        if (st == HK_STATUS_OK && c->t->vt->synchronize)                                \
            st = c->t->vt->synchronize(c->t->handle);                                   \
        dt = seconds() - t0;                                                            \
        if (st == HK_STATUS_OK)                                                         \
            st = c->m->copy_to_host(c->t->handle, out, dy, bytes);                      \
        err = 0;                                                                        \
        for (int64_t i = 0; i < n; i++) {                                               \
            double r = (double)alpha * ref[i];                                          \
            double e = fabs(out[i] - r) / (fabs(r) + fabs(ref[i]) + 1e-30);             \
            if (!(e <= err))                                                            \
                err = e;                                                                \
        }                                                                               \
        report(c, #P "scal", mname, st, err, 2 * TOL, dt);                              \
        /* copy: y := x, every element exact */                                         \
        t0 = seconds();                                                                 \
        st = c->b->P##copy(c->t->handle, n, dx, 1, dy, 1);                              \
        if (st == HK_STATUS_OK && c->t->vt->synchronize)                                \
            st = c->t->vt->synchronize(c->t->handle);                                   \
        dt = seconds() - t0;                                                            \
        if (st == HK_STATUS_OK)                                                         \
            st = c->m->copy_to_host(c->t->handle, out, dy, bytes);                      \
        err = (st == HK_STATUS_OK && memcmp(out, x, bytes) != 0) ? 1.0 : 0.0;           \
        report(c, #P "copy", mname, st, err, 0.0, dt);                                  \
        /* dot: x . x, after copy y == x */                                             \
        double want = 0, mag = 0;                                                       \
        for (int64_t i = 0; i < n; i++) {                                               \
            want += (double)x[i] * x[i];                                                \
            mag += fabs((double)x[i] * x[i]);                                           \
        }                                                                               \
        t0 = seconds();                                                                 \
        st = c->b->P##dot(c->t->handle, n, dx, 1, dy, 1, pres);                         \
        if (st == HK_STATUS_OK && c->t->vt->synchronize)                                \
            st = c->t->vt->synchronize(c->t->handle);                                   \
        dt = seconds() - t0;                                                            \
        if (st == HK_STATUS_OK && mode == HK_POINTER_MODE_DEVICE)                       \
            st = c->m->copy_to_host(c->t->handle, &res, dscal, sizeof res);             \
        report(c, #P "dot", mname, st, fabs(res - want) / (mag + 1e-300), RTOL, dt);    \
        /* nrm2: sqrt(x . x) */                                                         \
        if (mode == HK_POINTER_MODE_DEVICE)                                             \
            c->m->copy_to_device(c->t->handle, dscal, &alpha, sizeof alpha);            \
        t0 = seconds();                                                                 \
        st = c->b->P##nrm2(c->t->handle, n, dx, 1, pres);                               \
        if (st == HK_STATUS_OK && c->t->vt->synchronize)                                \
            st = c->t->vt->synchronize(c->t->handle);                                   \
        dt = seconds() - t0;                                                            \
        if (st == HK_STATUS_OK && mode == HK_POINTER_MODE_DEVICE)                       \
            st = c->m->copy_to_host(c->t->handle, &res, dscal, sizeof res);             \
        double nrm = sqrt(want);                                                        \
        report(c, #P "nrm2", mname, st, fabs(res - nrm) / (nrm + 1e-300), RTOL, dt);    \
        rc = 0;                                                                         \
    out:                                                                                \
        if (dx)                                                                         \
            c->m->free_(c->t->handle, dx);                                              \
        if (dy)                                                                         \
            c->m->free_(c->t->handle, dy);                                              \
        if (dscal)                                                                      \
            c->m->free_(c->t->handle, dscal);                                           \
        free(x);                                                                        \
        free(y);                                                                        \
        free(out);                                                                      \
        free(ref);                                                                      \
        return rc;                                                                      \
    }

HK_HOST_RUN(float, s, 1e-6, 1e-5)
HK_HOST_RUN(double, d, 1e-15, 1e-13)

int hk_host_cmd_run(const hk_host_opts_t *opts)
{
    hk_loader_t *loader = hk_host_loader(opts->verbose, 0);
    if (!loader)
        return 1;
    hk_host_target_t t;
    int rc = hk_host_pick(loader, opts, &t);
    if (rc != 0)
        goto out;
    run_ctx_t c = {.t = &t, .n = opts->n, .seed = opts->seed};
    c.b = hk_plugin_table(t.plugin, HK_TABLE_BLAS1_V1);
    c.m = hk_plugin_table(t.plugin, HK_TABLE_MEMORY_V1);
    if (!c.b || !c.m) {
        fprintf(stderr, "hk-host: %s lacks table %s\n", hk_plugin_name(t.plugin),
                !c.b ? HK_TABLE_BLAS1_V1 : HK_TABLE_MEMORY_V1);
        rc = 1;
        goto release;
    }
    printf("workload: hk.blas1/1, every op in float and double, n = %lld, seed %u\n",
           (long long)opts->n, opts->seed);
    static const hk_pointer_mode_t modes[] = {HK_POINTER_MODE_HOST, HK_POINTER_MODE_DEVICE};
    for (int k = 0; k < 2; k++) {
        if (run_s(&c, modes[k]) != 0 || run_d(&c, modes[k]) != 0) {
            rc = 1;
            goto release;
        }
    }
    printf("%d checks, %d wrong or failed: %s\n", c.checks, c.failures,
           c.failures ? "FAILED" : "all results verified");
    rc = c.failures ? 1 : 0;
release:
    hk_host_release(&t);
out:
    hk_loader_destroy(loader);
    return rc;
}
