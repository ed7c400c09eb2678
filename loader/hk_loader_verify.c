/* handlekit loader: the verification a new implementation must pass before
 * a swap moves handles to it (hk_loader_swap.c), in the probe process first
 * (hk_loader_probe_run.c) and then in the host. Which one fits the plugin
 * (hk__verify_handle): its own known-answer workload when it offers
 * hk.selfcheck/1 (it knows its tables; the loader does not), else the
 * loader's workload when it offers hk.blas1/1 and hk.memory/1 (every slot of
 * both present, then dot, nrm2, axpy, scal and copy in float and double on
 * data whose every result is exact, each checked), else nothing beyond the
 * handle that was made. */
#include "hk__loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_selfcheck.h"
#include "hk_status_text.h"

#define HK__VN 1027 /* odd and past a power of two: tails get exercised */

/* Small integers: every sum and product below is exact in float and double. */
static double hk__vx(int i) { return (double)(i % 7 - 3); }
static double hk__vy(int i) { return (double)(i % 5 - 2); }

typedef struct hk__vctx {
    const hk_vtable_t *core;
    const hk_blas1_v1_t *b;
    const hk_memory_v1_t *m;
    hk_handle_t *h;
    char *why;
    size_t n;
} hk__vctx_t;

static hk_status_t hk__vfail(const hk__vctx_t *c, const char *what, hk_status_t st)
{
    snprintf(c->why, c->n, "%s: %s: %s", what, hk_status_name(st), c->core->last_error(c->h));
    return st;
}

/* Places the workload's data: dy zeroed by memset_ and checked through a
 * download, then x and y uploaded. T: type, P: s or d. */
#define HK__VPLACE(T, P)                                                                       \
    static hk_status_t hk__vplace_##P(const hk__vctx_t *c, T *hx, T *hy, void *dx, void *dy)  \
    {                                                                                          \
        const size_t bytes = HK__VN * sizeof(T);                                               \
        hk_status_t st;                                                                        \
        if ((st = c->m->memset_(c->h, dy, 0, bytes)) != HK_STATUS_OK                           \
            || (st = c->m->copy_to_host(c->h, hx, dy, bytes)) != HK_STATUS_OK)                 \
            return hk__vfail(c, "memset", st);                                                 \
        for (int i = 0; i < HK__VN; i++)                                                       \
            if (hx[i] != (T)0) {                                                               \
                snprintf(c->why, c->n, "memset left %g at element %d", (double)hx[i], i);      \
                return HK_STATUS_LOAD_FAILED;                                                  \
            }                                                                                  \
        for (int i = 0; i < HK__VN; i++) {                                                     \
            hx[i] = (T)hk__vx(i);                                                              \
            hy[i] = (T)hk__vy(i);                                                              \
        }                                                                                      \
        if ((st = c->m->copy_to_device(c->h, dx, hx, bytes)) != HK_STATUS_OK                   \
            || (st = c->m->copy_to_device(c->h, dy, hy, bytes)) != HK_STATUS_OK)               \
            return hk__vfail(c, "upload", st);                                                 \
        return HK_STATUS_OK;                                                                   \
    }

/* 1 when the first n elements of v (type T) equal the reference f(i);
 * otherwise why names the first wrong element. */
#define HK__VCHECK(T, P)                                                                       \
    static int hk__vcheck_##P(const hk__vctx_t *c, const char *op, const T *v,                 \
                              double (*f)(int))                                                \
    {                                                                                          \
        for (int i = 0; i < HK__VN; i++)                                                       \
            if ((double)v[i] != f(i)) {                                                        \
                snprintf(c->why, c->n, "%s gave %g at element %d, expected %g", op,            \
                         (double)v[i], i, f(i));                                               \
                return 0;                                                                      \
            }                                                                                  \
        return 1;                                                                              \
    }

/* One precision of the workload: dot and nrm2 of the placed data, then
 * y = 2x + y (downloaded and checked), then x = -x/2 and y = x (checked).
 * T: type, P: s or d, TOL: nrm2's relative tolerance. */
#define HK__VERIFY(T, P, TOL)                                                                  \
    HK__VPLACE(T, P)                                                                           \
    HK__VCHECK(T, P)                                                                           \
    static hk_status_t hk__vops_##P(const hk__vctx_t *c, T *hy, void *dx, void *dy)           \
    {                                                                                          \
        const size_t bytes = HK__VN * sizeof(T);                                               \
        T alpha = (T)2, half = (T)-0.5, r = 0;                                                 \
        double dot = 0.0, sq = 0.0;                                                            \
        hk_status_t st;                                                                        \
        for (int i = 0; i < HK__VN; i++) {                                                     \
            dot += hk__vx(i) * hk__vy(i);                                                      \
            sq += hk__vx(i) * hk__vx(i);                                                       \
        }                                                                                      \
        if ((st = c->b->P##dot(c->h, HK__VN, dx, 1, dy, 1, &r)) != HK_STATUS_OK)               \
            return hk__vfail(c, #P "dot", st);                                                 \
        if ((double)r != dot) {                                                                \
            snprintf(c->why, c->n, #P "dot gave %g, expected %g", (double)r, dot);             \
            return HK_STATUS_LOAD_FAILED;                                                      \
        }                                                                                      \
        if ((st = c->b->P##nrm2(c->h, HK__VN, dx, 1, &r)) != HK_STATUS_OK)                     \
            return hk__vfail(c, #P "nrm2", st);                                                \
        /* Compared squared: the loader does not link the math library. */                    \
        double rr = (double)r * (double)r;                                                     \
        if (!(rr - sq <= 2 * TOL * sq && sq - rr <= 2 * TOL * sq)) {                           \
            snprintf(c->why, c->n, #P "nrm2 gave %.9g, expected the root of %.9g", (double)r,  \
                     sq);                                                                      \
            return HK_STATUS_LOAD_FAILED;                                                      \
        }                                                                                      \
        if ((st = c->b->P##axpy(c->h, HK__VN, &alpha, dx, 1, dy, 1)) != HK_STATUS_OK           \
            || (st = c->m->copy_to_host(c->h, hy, dy, bytes)) != HK_STATUS_OK)                 \
            return hk__vfail(c, #P "axpy", st);                                                \
        if (!hk__vcheck_##P(c, #P "axpy", hy, hk__vaxpy))                                      \
            return HK_STATUS_LOAD_FAILED;                                                      \
        if ((st = c->b->P##scal(c->h, HK__VN, &half, dx, 1)) != HK_STATUS_OK                   \
            || (st = c->b->P##copy(c->h, HK__VN, dx, 1, dy, 1)) != HK_STATUS_OK                \
            || (st = c->m->copy_to_host(c->h, hy, dy, bytes)) != HK_STATUS_OK)                 \
            return hk__vfail(c, #P "scal, " #P "copy", st);                                    \
        if (!hk__vcheck_##P(c, #P "scal and " #P "copy", hy, hk__vscal))                       \
            return HK_STATUS_LOAD_FAILED;                                                      \
        return HK_STATUS_OK;                                                                   \
    }                                                                                          \
    static hk_status_t hk__verify_##P(const hk__vctx_t *c, T *hx, T *hy)                       \
    {                                                                                          \
        void *dx = NULL, *dy = NULL;                                                           \
        hk_status_t st = c->m->alloc(c->h, HK__VN * sizeof(T), &dx);                           \
        if (st == HK_STATUS_OK)                                                                \
            st = c->m->alloc(c->h, HK__VN * sizeof(T), &dy);                                   \
        if (st != HK_STATUS_OK)                                                                \
            st = hk__vfail(c, "alloc", st);                                                    \
        if (st == HK_STATUS_OK)                                                                \
            st = hk__vplace_##P(c, hx, hy, dx, dy);                                            \
        if (st == HK_STATUS_OK)                                                                \
            st = hk__vops_##P(c, hy, dx, dy);                                                  \
        if (dx)                                                                                \
            c->m->free_(c->h, dx);                                                             \
        if (dy)                                                                                \
            c->m->free_(c->h, dy);                                                             \
        return st;                                                                             \
    }

static double hk__vaxpy(int i) { return 2.0 * hk__vx(i) + hk__vy(i); }
static double hk__vscal(int i) { return -0.5 * hk__vx(i); }

HK__VERIFY(float, s, 1e-5)
HK__VERIFY(double, d, 1e-12)

hk_status_t hk__verify_workload(const hk_vtable_t *core, const hk_blas1_v1_t *b,
                                const hk_memory_v1_t *m, hk_handle_t *h, char *why, size_t n)
{
    hk__vctx_t c = {core, b, m, h, why, n};
    const char *missing = NULL;
    /* Every slot of both tables, as their headers list them. */
#define HK__HAS_MEMORY(name, minor, params, args) && m->name
#define HK__HAS_BLAS1(name, minor, params, args) && b->name
    if (!(1 HK_MEMORY_V1_SLOTS(HK__HAS_MEMORY)))
        missing = HK_TABLE_MEMORY_V1;
    else if (!(1 HK_BLAS1_V1_SLOTS(HK__HAS_BLAS1)))
        missing = HK_TABLE_BLAS1_V1;
#undef HK__HAS_BLAS1
#undef HK__HAS_MEMORY
    if (missing) {
        snprintf(why, n, "its %s table is incomplete", missing);
        return HK_STATUS_NOT_SUPPORTED;
    }
    double *hx = malloc(HK__VN * sizeof(double)), *hy = malloc(HK__VN * sizeof(double));
    hk_status_t st = HK_STATUS_OUT_OF_MEMORY;
    if (!hx || !hy) {
        snprintf(why, n, "out of memory");
        goto out;
    }
    st = hk__verify_s(&c, (float *)hx, (float *)hy);
    if (st == HK_STATUS_OK)
        st = hk__verify_d(&c, hx, hy);
out:
    free(hx);
    free(hy);
    return st;
}

/* The plugin's own self-check on h. */
static hk_status_t hk__verify_self(const hk_selfcheck_v1_t *sc, hk_handle_t *h, char *why,
                                   size_t n)
{
    char said[HK__REASON_MAX];
    said[0] = '\0';
    hk_status_t st = sc->run(h, said, sizeof(said));
    said[sizeof(said) - 1] = '\0';
    if (st != HK_STATUS_OK)
        snprintf(why, n, "its self-check (hk.selfcheck/1) says %s: %s", hk_status_name(st),
                 said[0] ? said : "(no reason given)");
    return st;
}

hk_status_t hk__verify_handle(const hk_plugin_t *p, hk_handle_t *h, const char **how, char *why,
                              size_t n)
{
    hk_selfcheck_v1_t sc;
    hk_blas1_v1_t b;
    hk_memory_v1_t m;
    if (hk_plugin_get_table(p, HK_TABLE_SELFCHECK_V1, &sc, sizeof(sc)) == HK_STATUS_OK
        && sc.run) {
        *how = "its self-check (hk.selfcheck/1)";
        return hk__verify_self(&sc, h, why, n);
    }
    if (hk_plugin_get_table(p, HK_TABLE_BLAS1_V1, &b, sizeof(b)) == HK_STATUS_OK
        && hk_plugin_get_table(p, HK_TABLE_MEMORY_V1, &m, sizeof(m)) == HK_STATUS_OK) {
        *how = "the loader's hk.blas1/1 workload";
        return hk__verify_workload(&p->vtable, &b, &m, h, why, n);
    }
    *how = "a handle made (it offers neither hk.selfcheck/1 nor hk.blas1/1 and hk.memory/1)";
    return HK_STATUS_OK;
}

/* The bit of device in hk_plugin_t.verified; 0 beyond what 64 bits hold. */
static uint64_t hk__verified_bit(int device)
{
    return device >= -1 && device < 63 ? UINT64_C(1) << (device + 1) : 0;
}

int hk__verified(const hk_plugin_t *plugin, int device)
{
    uint64_t bit = hk__verified_bit(device);
    return plugin->from_snap && bit && (atomic_load(&plugin->verified) & bit);
}

void hk__verified_note(hk_plugin_t *plugin, int device)
{
    atomic_fetch_or(&plugin->verified, hk__verified_bit(device));
}

void hk__failed_note(hk_plugin_t *plugin, const char *why)
{
    char *copy = strdup(why ? why : "");
    char *none = NULL;
    if (copy && !atomic_compare_exchange_strong(&plugin->failed_why, &none, copy))
        free(copy); /* the first reason stays */
    atomic_store(&plugin->failed, 1);
}

const char *hk__failed_why(const hk_plugin_t *plugin)
{
    const char *why = atomic_load(&((hk_plugin_t *)plugin)->failed_why);
    return atomic_load(&plugin->failed) && why ? why : "";
}
