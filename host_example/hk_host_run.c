/* hk-host run: every hk.blas1/1 op in float and double, in host and device
 * pointer mode, on data placed through hk.memory/1, checked against a
 * double-precision reference computed here.
 *
 * The tables are the host's own copies (hk_plugin_get_table), and every slot
 * is checked for NULL before it is called: an op the plugin lacks, or device
 * pointer mode without set_pointer_mode, is reported as a "not supported" row
 * and the run goes on. Exit status: 0 when everything that ran was right, 1
 * on a wrong result or a failed call, 3 when the workload's memory cannot be
 * had (HKH_EXIT_*). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hk_blas1.h"
#include "hk_host.h"
#include "hk_host_mem.h"
#include "hk_memory.h"
#include "hk_status_text.h"

typedef struct hkh_run_ctx {
    hkh_target_t *t;
    hk_blas1_v1_t b; /* the host's copies: a missing slot reads NULL */
    hk_memory_v1_t m;
    int64_t n;
    unsigned seed;
    int failures;
    int checks;
    int unsupported;
    int no_memory; /* the plugin could not allocate the workload's device memory */
} hkh_run_ctx_t;

/* The five ops of hk.blas1/1, in the order the workload runs them. */
enum { HKH_AXPY, HKH_SCAL, HKH_COPY, HKH_DOT, HKH_NRM2, HKH_NOPS };

/* One element type: its size, its tolerances, and its five slots behind one
 * signature (op: HKH_AXPY...; arguments a slot does not take are ignored). */
typedef struct hkh_type {
    char prefix;       /* 's' or 'd' */
    const char *name;  /* "float", "double" */
    size_t size;
    double tol, rtol;  /* relative tolerance of element-wise results and of
                          reductions (scaled by their magnitude) */
    int (*has)(const hk_blas1_v1_t *b, int op);
    hk_status_t (*call)(const hkh_run_ctx_t *c, int op, const void *alpha, const void *x,
                        void *y, void *result);
} hkh_type_t;

/* One element type in one pointer mode. */
typedef struct hkh_lane {
    const hkh_type_t *type;
    const char *mode;
    hk_pointer_mode_t pm;
    char op[HKH_NOPS][8];  /* "saxpy" ... */
    size_t bytes;          /* n elements */
    void *x, *y, *out;     /* host: inputs, and results read back */
    double *ref;           /* what device y holds after each step */
    void *dx, *dy, *dscal; /* device: x, y, one scalar (alpha, then results) */
    double alpha;
    unsigned char alpha_t[8], result_t[8]; /* host: alpha and a result, as the type */
} hkh_lane_t;

static double hkh_rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffff) / 32768.0 - 1.0; /* in [-1, 1) */
}

static double hkh_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Text: one row. JSON: one element of "rows". result: "ok", "wrong",
 * "failed", "not-supported"; error: the failed call's or the missing slot's
 * line, raw. */
static void hkh_row(hkh_run_ctx_t *c, const char *op, const char *mode, const char *result,
                    hk_status_t st, const char *error, double err, double tol, double dt)
{
    hk__json_t *j = hkh_json();
    hkh_progress_clear();
    if (j) {
        hk__json_open(j, NULL, '{');
        hk__json_str(j, "op", op);
        hk__json_str(j, "mode", mode);
        hk__json_int(j, "n", c->n);
        hk__json_str(j, "result", result);
        hk__json_str(j, "status", st == HK_STATUS_OK ? NULL : hk_status_name(st));
        hk__json_str(j, "error", error);
        int measured = !strcmp(result, "ok") || !strcmp(result, "wrong");
        hk__json_num(j, "rel_err", measured ? err : NAN);
        hk__json_num(j, "tol", measured ? tol : NAN);
        hk__json_num(j, "time_ms", measured ? dt * 1e3 : NAN);
        hk__json_close(j);
    } else if (!strcmp(result, "not-supported")) {
        printf("  %-6s %-6s n=%-9lld not supported (%s)\n", op, mode, (long long)c->n, error);
    } else if (!strcmp(result, "failed")) {
        printf("  %-6s %-6s n=%-9lld FAILED: %s: %s\n", op, mode, (long long)c->n,
               hk_status_name(st), hkh_esc(error));
    } else {
        printf("  %-6s %-6s n=%-9lld %s  rel.err %.2e (tol %.0e)  %.2f ms\n", op, mode,
               (long long)c->n, !strcmp(result, "ok") ? "ok   " : "WRONG", err, tol, dt * 1e3);
    }
    fflush(stdout);
}

static int hkh_report(hkh_run_ctx_t *c, const char *op, const char *mode, hk_status_t st,
                      double err, double tol, double dt)
{
    c->checks++;
    if (st != HK_STATUS_OK) {
        char msg[1024];
        c->failures++;
        hkh_row(c, op, mode, "failed", st, hkh_error(c->t, c->t->handle, msg, sizeof msg), 0, 0, 0);
        return -1;
    }
    int ok = err <= tol; /* NaN fails too */
    if (!ok)
        c->failures++;
    hkh_row(c, op, mode, ok ? "ok" : "wrong", st, NULL, err, tol, dt);
    return ok ? 0 : -1;
}

static void hkh_unsupported(hkh_run_ctx_t *c, const char *op, const char *mode, const char *why)
{
    c->unsupported++;
    hkh_row(c, op, mode, "not-supported", HK_STATUS_OK, why, 0, 0, 0);
}

/* The progress line before an op: which one, of the 20 rows. */
static void hkh_step(hkh_run_ctx_t *c, const char *op, const char *mode)
{
    hkh_progress(c->checks + c->unsupported + 1, "%s %s n=%lld", op, mode, (long long)c->n);
}

/* Waits for the op's work when the plugin can say so, and times it. */
static hk_status_t hkh_finish(hkh_run_ctx_t *c, hk_status_t st, double t0, double *dt)
{
    if (st == HK_STATUS_OK && c->t->vt->synchronize)
        st = c->t->vt->synchronize(c->t->handle);
    *dt = hkh_seconds() - t0;
    return st;
}

/* Allocates and uploads; returns NULL after reporting on failure. */
static void *hkh_upload(hkh_run_ctx_t *c, const void *src, size_t bytes)
{
    void *d = NULL;
    hk_status_t st = c->m.alloc(c->t->handle, bytes, &d);
    if (st == HK_STATUS_OK)
        st = c->m.copy_to_device(c->t->handle, d, src, bytes);
    if (st != HK_STATUS_OK) {
        char msg[1024];
        hkh_fail("device memory (%zu bytes): %s: %s", bytes, hk_status_name(st),
                 hkh_error(c->t, c->t->handle, msg, sizeof msg));
        if (st == HK_STATUS_OUT_OF_MEMORY)
            c->no_memory = 1;
        if (d)
            c->m.free_(c->t->handle, d);
        return NULL;
    }
    return d;
}

static void hkh_lane_free(hkh_run_ctx_t *c, hkh_lane_t *l)
{
    void *dev[] = {l->dx, l->dy, l->dscal};
    for (int i = 0; i < 3; i++)
        if (dev[i])
            c->m.free_(c->t->handle, dev[i]);
    free(l->x);
    free(l->y);
    free(l->out);
    free(l->ref);
}

/* ---- the two element types ---- */

static int hkh_s_has(const hk_blas1_v1_t *b, int op)
{
    switch (op) {
    case HKH_AXPY: return b->saxpy != NULL;
    case HKH_SCAL: return b->sscal != NULL;
    case HKH_COPY: return b->scopy != NULL;
    case HKH_DOT: return b->sdot != NULL;
    default: return b->snrm2 != NULL;
    }
}

static hk_status_t hkh_s_call(const hkh_run_ctx_t *c, int op, const void *alpha, const void *x,
                              void *y, void *result)
{
    hk_handle_t *h = c->t->handle;
    switch (op) {
    case HKH_AXPY: return c->b.saxpy(h, c->n, alpha, x, 1, y, 1);
    case HKH_SCAL: return c->b.sscal(h, c->n, alpha, y, 1);
    case HKH_COPY: return c->b.scopy(h, c->n, x, 1, y, 1);
    case HKH_DOT: return c->b.sdot(h, c->n, x, 1, y, 1, result);
    default: return c->b.snrm2(h, c->n, x, 1, result);
    }
}

static int hkh_d_has(const hk_blas1_v1_t *b, int op)
{
    switch (op) {
    case HKH_AXPY: return b->daxpy != NULL;
    case HKH_SCAL: return b->dscal != NULL;
    case HKH_COPY: return b->dcopy != NULL;
    case HKH_DOT: return b->ddot != NULL;
    default: return b->dnrm2 != NULL;
    }
}

static hk_status_t hkh_d_call(const hkh_run_ctx_t *c, int op, const void *alpha, const void *x,
                              void *y, void *result)
{
    hk_handle_t *h = c->t->handle;
    switch (op) {
    case HKH_AXPY: return c->b.daxpy(h, c->n, alpha, x, 1, y, 1);
    case HKH_SCAL: return c->b.dscal(h, c->n, alpha, y, 1);
    case HKH_COPY: return c->b.dcopy(h, c->n, x, 1, y, 1);
    case HKH_DOT: return c->b.ddot(h, c->n, x, 1, y, 1, result);
    default: return c->b.dnrm2(h, c->n, x, 1, result);
    }
}

static const hkh_type_t hkh_float = {'s', "float", sizeof(float), 1e-6, 1e-5, hkh_s_has,
                                     hkh_s_call};
static const hkh_type_t hkh_double = {'d', "double", sizeof(double), 1e-15, 1e-13, hkh_d_has,
                                      hkh_d_call};

/* Element i of a vector of the lane's type, as a double, and back. */
static double hkh_get(const hkh_lane_t *l, const void *v, int64_t i)
{
    return l->type->size == sizeof(float) ? ((const float *)v)[i] : ((const double *)v)[i];
}

static void hkh_put(const hkh_lane_t *l, void *v, int64_t i, double value)
{
    if (l->type->size == sizeof(float))
        ((float *)v)[i] = (float)value;
    else
        ((double *)v)[i] = value;
}

/* ---- the ops, checked ---- */

/* Before op: the progress line, and whether the plugin has the slot (a "not
 * supported" row when not). */
static int hkh_begin(hkh_run_ctx_t *c, const hkh_lane_t *l, int op)
{
    hkh_step(c, l->op[op], l->mode);
    if (l->type->has(&c->b, op))
        return 1;
    char why[64];
    snprintf(why, sizeof why, "hk.blas1/1 has no %s", l->op[op]);
    hkh_unsupported(c, l->op[op], l->mode, why);
    return 0;
}

/* Calls op, waits for its work and reads device y back into out (element
 * ops) or the result into result_t (reductions). */
static hk_status_t hkh_call(hkh_run_ctx_t *c, hkh_lane_t *l, int op, double *dt)
{
    int dev = l->pm == HK_POINTER_MODE_DEVICE, reduce = op == HKH_DOT || op == HKH_NRM2;
    const void *alpha = dev ? l->dscal : (const void *)l->alpha_t;
    void *result = dev ? l->dscal : (void *)l->result_t;
    double t0 = hkh_seconds();
    hk_status_t st = l->type->call(c, op, alpha, l->dx, l->dy, result);
    st = hkh_finish(c, st, t0, dt);
    if (st == HK_STATUS_OK && !reduce)
        st = c->m.copy_to_host(c->t->handle, l->out, l->dy, l->bytes);
    else if (st == HK_STATUS_OK && dev)
        st = c->m.copy_to_host(c->t->handle, l->result_t, l->dscal, l->type->size);
    return st;
}

/* y := alpha x + y. Without the slot y stays as uploaded. */
static void hkh_axpy(hkh_run_ctx_t *c, hkh_lane_t *l)
{
    double dt, err = 0;
    if (!hkh_begin(c, l, HKH_AXPY)) {
        for (int64_t i = 0; i < c->n; i++)
            l->ref[i] = hkh_get(l, l->y, i);
        return;
    }
    hk_status_t st = hkh_call(c, l, HKH_AXPY, &dt);
    for (int64_t i = 0; i < c->n; i++) {
        double x = hkh_get(l, l->x, i), y = hkh_get(l, l->y, i);
        l->ref[i] = l->alpha * x + y;
        double e = fabs(hkh_get(l, l->out, i) - l->ref[i]) / (fabs(l->alpha * x) + fabs(y) + 1e-30);
        if (!(e <= err))
            err = e;
    }
    hkh_report(c, l->op[HKH_AXPY], l->mode, st, err, l->type->tol, dt);
}

/* y := alpha y; y holds ref. */
static void hkh_scal(hkh_run_ctx_t *c, hkh_lane_t *l)
{
    double dt, err = 0;
    if (!hkh_begin(c, l, HKH_SCAL))
        return;
    hk_status_t st = hkh_call(c, l, HKH_SCAL, &dt);
    for (int64_t i = 0; i < c->n; i++) {
        double r = l->alpha * l->ref[i];
        double e = fabs(hkh_get(l, l->out, i) - r) / (fabs(r) + fabs(l->ref[i]) + 1e-30);
        if (!(e <= err))
            err = e;
    }
    hkh_report(c, l->op[HKH_SCAL], l->mode, st, err, 2 * l->type->tol, dt);
}

/* y := x, every element exact. Without copy, y gets x by an upload, so that
 * dot still computes x . x. */
static void hkh_copy(hkh_run_ctx_t *c, hkh_lane_t *l)
{
    double dt;
    if (!hkh_begin(c, l, HKH_COPY)) {
        hk_status_t st = c->m.copy_to_device(c->t->handle, l->dy, l->x, l->bytes);
        if (st != HK_STATUS_OK)
            hkh_report(c, "upload", l->mode, st, 0, 0, 0);
        return;
    }
    hk_status_t st = hkh_call(c, l, HKH_COPY, &dt);
    double err = (st == HK_STATUS_OK && memcmp(l->out, l->x, l->bytes) != 0) ? 1.0 : 0.0;
    hkh_report(c, l->op[HKH_COPY], l->mode, st, err, 0.0, dt);
}

/* dot: x . y with y == x; nrm2: sqrt(x . x), the scalar reset to alpha first
 * in device mode so that a stale dot cannot pass for it. */
static void hkh_reduce(hkh_run_ctx_t *c, hkh_lane_t *l, int op)
{
    double want = 0, mag = 0, dt;
    for (int64_t i = 0; i < c->n; i++) {
        double x = hkh_get(l, l->x, i);
        want += x * x;
        mag += fabs(x * x);
    }
    if (!hkh_begin(c, l, op))
        return;
    if (op == HKH_NRM2 && l->pm == HK_POINTER_MODE_DEVICE)
        c->m.copy_to_device(c->t->handle, l->dscal, l->alpha_t, l->type->size);
    hk_status_t st = hkh_call(c, l, op, &dt);
    double res = hkh_get(l, l->result_t, 0);
    double err = op == HKH_DOT ? fabs(res - want) / (mag + 1e-300)
                               : fabs(res - sqrt(want)) / (sqrt(want) + 1e-300);
    hkh_report(c, l->op[op], l->mode, st, err, l->type->rtol, dt);
}

/* ---- one lane: one type in one pointer mode ---- */

/* The host vectors, random x and y, the device copies and the pointer mode.
 * Returns 0, or -1 after reporting. */
static int hkh_lane_setup(hkh_run_ctx_t *c, hkh_lane_t *l)
{
    l->x = malloc(l->bytes);
    l->y = malloc(l->bytes);
    l->out = malloc(l->bytes);
    l->ref = malloc((size_t)c->n * sizeof(double));
    if (!l->x || !l->y || !l->out || !l->ref) {
        hkh_fail("--size %lld: cannot allocate %zu bytes of host memory", (long long)c->n,
                 3 * l->bytes + (size_t)c->n * sizeof(double));
        c->no_memory = 1;
        return -1;
    }
    hkh_progress(c->checks + c->unsupported + 1, "%s %s: preparing n=%lld", l->type->name,
                 l->mode, (long long)c->n);
    unsigned s = c->seed;
    for (int64_t i = 0; i < c->n; i++) {
        hkh_put(l, l->x, i, hkh_rnd(&s));
        hkh_put(l, l->y, i, hkh_rnd(&s));
    }
    hkh_put(l, l->alpha_t, 0, l->alpha);
    if (!(l->dx = hkh_upload(c, l->x, l->bytes)) || !(l->dy = hkh_upload(c, l->y, l->bytes)) ||
        !(l->dscal = hkh_upload(c, l->alpha_t, l->type->size)))
        return -1;
    if (c->t->vt->set_pointer_mode) {
        hk_status_t st = c->t->vt->set_pointer_mode(c->t->handle, l->pm);
        if (st != HK_STATUS_OK) {
            hkh_report(c, "mode", l->mode, st, 0, 0, 0);
            return -1;
        }
    }
    return 0;
}

/* The workload of one type in one mode; -1 when it could not be set up. */
static int hkh_run_lane(hkh_run_ctx_t *c, const hkh_type_t *type, hk_pointer_mode_t pm)
{
    static const char *const ops[HKH_NOPS] = {"axpy", "scal", "copy", "dot", "nrm2"};
    hkh_lane_t l = {.type = type, .pm = pm, .alpha = 0.75};
    l.mode = pm == HK_POINTER_MODE_HOST ? "host" : "device";
    l.bytes = (size_t)c->n * type->size;
    for (int k = 0; k < HKH_NOPS; k++)
        snprintf(l.op[k], sizeof l.op[k], "%c%s", type->prefix, ops[k]);
    if (pm != HK_POINTER_MODE_HOST && !c->t->vt->set_pointer_mode) {
        for (int k = 0; k < HKH_NOPS; k++)
            hkh_unsupported(c, l.op[k], l.mode, "the plugin has no set_pointer_mode");
        return 0;
    }
    int rc = hkh_lane_setup(c, &l);
    if (rc == 0) {
        hkh_axpy(c, &l);
        hkh_scal(c, &l);
        hkh_copy(c, &l);
        hkh_reduce(c, &l, HKH_DOT);
        hkh_reduce(c, &l, HKH_NRM2);
    }
    hkh_lane_free(c, &l);
    return rc;
}

/* Refuses a size whose memory cannot be had, before it is allocated: past
 * what can be had the kernel would not refuse the allocation but kill the
 * process once its pages are touched. per_element: bytes the workload needs
 * on the host for each element (n + 1 of them); why: "" or why so many.
 * Returns 0 or prints the reason and returns -1. */
static int hkh_size_fits(int64_t n, unsigned per_element, const char *why)
{
    unsigned long long need;
    if (__builtin_mul_overflow((uint64_t)n + 1, (uint64_t)per_element, &need) ||
        need > SIZE_MAX) {
        hkh_fail("--size %lld: the workload needs %u bytes per element, more than this "
                 "machine can address", (long long)n, per_element);
        return -1;
    }
    char source[1400];
    unsigned long long have = hkh_mem_available(source, sizeof source);
    if (source[0] && need > have) {
        hkh_fail("--size %lld: the workload needs %llu bytes of host memory%s; %llu bytes are "
                 "available (%s)", (long long)n, need, why, have, source);
        return -1;
    }
    return 0;
}

/* The host's bytes for each element: the double lane's x, y, read-back and
 * reference, and its device vectors too when they are host memory. */
#define HKH_HOST_BYTES (4 * sizeof(double))
#define HKH_HOST_DEVICE_BYTES (6 * sizeof(double))

/* The tables as the host's own copies; the memory slots the workload cannot
 * do without. Returns 0 or prints why and returns -1. */
static int hkh_take_tables(hkh_run_ctx_t *c)
{
    const char *name = hk_plugin_name(c->t->plugin);
    hk_status_t st = hk_plugin_get_table(c->t->plugin, HK_TABLE_BLAS1_V1, &c->b, sizeof c->b);
    if (st == HK_STATUS_OK)
        st = hk_plugin_get_table(c->t->plugin, HK_TABLE_MEMORY_V1, &c->m, sizeof c->m);
    if (st != HK_STATUS_OK) {
        hkh_fail("%s: cannot take table %s: %s: %s", name,
                 c->b.size ? HK_TABLE_MEMORY_V1 : HK_TABLE_BLAS1_V1, hk_status_name(st),
                 st == HK_STATUS_NOT_FOUND ? "the plugin has none" : hk_status_string(st));
        return -1;
    }
    const char *missing = !c->m.alloc            ? "alloc"
                          : !c->m.free_          ? "free_"
                          : !c->m.copy_to_device ? "copy_to_device"
                          : !c->m.copy_to_host   ? "copy_to_host"
                                                 : NULL;
    if (missing) {
        hkh_fail("%s: %s has no %s: the workload cannot place its data", name, HK_TABLE_MEMORY_V1,
                 missing);
        return -1;
    }
    return 0;
}

static void hkh_summary(const hkh_run_ctx_t *c)
{
    const char *verdict = c->failures ? "FAILED" : "all results verified";
    hk__json_t *j = hkh_json();
    hkh_progress_clear();
    if (j) {
        hk__json_open(j, "summary", '{');
        hk__json_int(j, "checks", c->checks);
        hk__json_int(j, "wrong_or_failed", c->failures);
        hk__json_int(j, "not_supported", c->unsupported);
        hk__json_str(j, "verdict", verdict);
        hk__json_close(j);
    } else if (c->unsupported) {
        printf("%d checks, %d wrong or failed, %d not supported: %s\n", c->checks, c->failures,
               c->unsupported, verdict);
    } else {
        printf("%d checks, %d wrong or failed: %s\n", c->checks, c->failures, verdict);
    }
}

/* Both types in both pointer modes. Returns the exit status. */
static int hkh_workload(hkh_run_ctx_t *c, const hkh_opts_t *opts)
{
    hk__json_t *j = hkh_json();
    if (j) {
        hk__json_open(j, "workload", '{');
        hk__json_str(j, "table", HK_TABLE_BLAS1_V1);
        hk__json_int(j, "n", opts->n);
        hk__json_int(j, "seed", opts->seed);
        hk__json_close(j);
        hk__json_open(j, "rows", '[');
    } else {
        printf("workload: hk.blas1/1, every op in float and double, n = %lld, seed %u\n",
               (long long)opts->n, opts->seed);
    }
    hkh_progress_start(opts, 20);
    static const hk_pointer_mode_t modes[] = {HK_POINTER_MODE_HOST, HK_POINTER_MODE_DEVICE};
    for (int k = 0; k < 2; k++) {
        if (hkh_run_lane(c, &hkh_float, modes[k]) != 0 ||
            hkh_run_lane(c, &hkh_double, modes[k]) != 0) {
            hkh_progress_clear();
            return c->no_memory ? HKH_EXIT_MEMORY : HKH_EXIT_FAIL;
        }
    }
    if (j)
        hk__json_close(j); /* rows */
    hkh_summary(c);
    return c->failures ? HKH_EXIT_FAIL : HKH_EXIT_OK;
}

int hkh_cmd_run(const hkh_opts_t *opts)
{
    hkh_doc_begin(opts, "run");
    if (hkh_size_fits(opts->n, HKH_HOST_BYTES, "") != 0)
        return hkh_doc_end(HKH_EXIT_MEMORY);
    hk_loader_t *loader = hkh_loader(opts->verbose, 1);
    if (!loader)
        return hkh_doc_end(HKH_EXIT_FAIL);
    hkh_target_t t;
    int rc = hkh_choose(loader, opts, &t);
    if (rc != 0)
        goto out;
    if ((hk_plugin_flags(t.plugin) & HK_PLUGIN_MEMORY_MASK) == HK_PLUGIN_MEMORY_HOST) {
        char why[160];
        snprintf(why, sizeof why, " (%s keeps its device vectors in host memory too)",
                 hk_plugin_name(t.plugin));
        if (hkh_size_fits(opts->n, HKH_HOST_DEVICE_BYTES, why) != 0) {
            rc = HKH_EXIT_MEMORY;
            hkh_release(&t);
            goto out;
        }
    }
    hkh_print_choice(&t);
    if (!t.handle) {
        hkh_fail("%s: cannot create a handle: %s", hk_plugin_name(t.plugin), t.handle_error);
        rc = HKH_EXIT_FAIL;
        goto out;
    }
    hkh_run_ctx_t c = {.t = &t, .n = opts->n, .seed = opts->seed};
    rc = hkh_take_tables(&c) != 0 ? HKH_EXIT_FAIL : hkh_workload(&c, opts);
    hkh_release(&t);
out:
    hk_loader_destroy(loader);
    return hkh_doc_end(rc);
}
