/* hk-bench: P8 and P9, live swap (docs/swap.md).
 *
 * P8: the floor first: the driver's own time to load hk-cuda's kernels into
 * the idle context (hkb_floor.c). Then two workloads, flood and service
 * (hkb_p8.h: 8 threads call through movable handles, a stream each, while
 * the main thread swaps every handle between the measured hk-cuda.so and its
 * second build, hk-cuda-1.0.1.so of tests/swap, 50 times, each swap prepared
 * and then committed, then as long again without swaps). Rows per workload:
 * the switch (the loader's last_switch_ns, from the commit call), each step
 * of the swaps, the holds, and p50, p99, p99.9 and the longest of the calls
 * that overlapped a swap against those of the time without swaps; a line
 * names the steps of the swap in which the longest call ran.
 *
 * P9: P3's method (hkb_enqueue.c) through a movable handle: host enqueue time
 * per call through the loader's forwarding table against a raw cuLaunchKernel
 * of the same kernel, and against the direct call of the same hk-cuda on the
 * same stream, interleaved batch by batch. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_loader.h"
#include "hk_status_text.h"
#include "hk_swap.h"
#include "hkb.h"
#include "hkb_p8.h"

#define P8_THREADS 8
#define P8_SWAPS 50
#define P8_QUICK_SWAPS 20
#define P8_GAP_US 2000
#define P8_SWITCH_TARGET_US 1000.0
#define P8_SERVICE_P999_US 100.0 /* extra p99.9 of a service call */
#define P8_SERVICE_MAX_US 1000.0 /* extra longest service call */
#define P8_FLOOD_MAX_US 500.0    /* extra longest flood call */
#define P9_TARGET 1.05
#define P9_EXTRA_TARGET_NS 25.0

#ifndef HKB_PLUGIN_B_REL
#define HKB_PLUGIN_B_REL "build/release/tests/swap_plugins"
#endif
#define HKB_PLUGIN_B_FILE "hk-cuda-1.0.1.so"

const char *hkb_plugin_b_default_path(char *buf, size_t len)
{
    char exe[4096];
    ssize_t got = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (got > 0) { /* <build>/bin/hk-bench and <build>/tests/swap_plugins */
        exe[got] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            int w = snprintf(buf, len, "%s/../tests/swap_plugins/%s", exe, HKB_PLUGIN_B_FILE);
            if (w > 0 && (size_t)w < len && access(buf, F_OK) == 0)
                return buf;
        }
    }
    snprintf(buf, len, "%s/%s", HKB_PLUGIN_B_REL, HKB_PLUGIN_B_FILE);
    return buf;
}

/* A plugin record whose tables are the loader's forwarding tables, so that
 * hkb_call and hkb_hk_ok work on movable handles. */
static int forwarding_plugin(hkb_plugin_t *fwd, const char *path)
{
    memset(fwd, 0, sizeof *fwd);
    snprintf(fwd->path, sizeof fwd->path, "%s", path);
    fwd->name = "movable handle";
    fwd->version = "-";
    fwd->abi = HK_ABI_CURRENT;
    fwd->vt = *hk_mhandle_vtable();
    if (hk_mhandle_get_table(HK_TABLE_BLAS1_V1, &fwd->blas, sizeof fwd->blas) != HK_STATUS_OK ||
        hk_mhandle_get_table(HK_TABLE_MEMORY_V1, &fwd->mem, sizeof fwd->mem) != HK_STATUS_OK)
        return hkb_fail("the loader offers no forwarding %s or %s table", HK_TABLE_BLAS1_V1,
                        HK_TABLE_MEMORY_V1);
    return 0;
}

static int open_loader(hk_loader_t **loader)
{
    hk_loader_options_t lo = {.size = sizeof lo, .ignore_env = 1};
    hk_status_t st = hk_loader_create(&lo, loader);
    return st == HK_STATUS_OK ? 0
                              : hkb_fail("cannot create a loader: %s", hk_status_string(st));
}

static int open_plugin(hk_loader_t *loader, const char *path, hk_plugin_t **p)
{
    if (hk_loader_open(loader, path, p) == HK_STATUS_OK)
        return 0;
    return hkb_fail("cannot load %s (`scons mode=release bench` builds both builds of "
                    "hk-cuda; or pass --plugin-b PATH)", hk_loader_last_error(loader));
}

/* ---- P9 ---- */

/* The P9 rows of one precision, from the medians of raw, direct and moved,
 * and the round-by-round differences moved - direct of every op (nd). */
static int p9_rows(hkb_prec_t prec, const double med[HKB_OP_COUNT][3],
                   const double err[HKB_OP_COUNT], double *diffs, size_t nd)
{
    double extra[HKB_OP_COUNT];
    hkb_row_t row;
    for (hkb_op_t op = 0; op < HKB_OP_COUNT; op++) {
        extra[op] = med[op][2] - med[op][1];
        hkb_row_set(&row, "P9", hkb_op_name(op), hkb_prec_name(prec), HKB_ENQ_N, "ns",
                    med[op][2], med[op][0], HKB_TARGET_RATIO_LE, P9_TARGET);
        row.err = err[op];
        snprintf(row.note, sizeof row.note, "moved %+.0f ns vs direct hk", extra[op]);
        HKB_TRY(hkb_report_add(&row), fail);
    }
    /* The extra cost of the forwarding path, a few ns, is far below the
     * spread of one batch's time (hundreds of ns between batches): the
     * figure is the median over every op's rounds of the difference
     * between the moved and the direct batch of the same round. */
    double fwd = hkb_median(diffs, nd);
    hkb_row_set(&row, "P9", "fwd-extra", hkb_prec_name(prec), HKB_ENQ_N, "ns", fwd,
                0.0, HKB_TARGET_VALUE_LE, P9_EXTRA_TARGET_NS);
    char note[sizeof row.note + 64];
    snprintf(note, sizeof note, "%zu pairs; by op %+.0f/%+.0f/%+.0f/%+.0f/%+.0f", nd, extra[0],
             extra[1], extra[2], extra[3], extra[4]);
    memcpy(row.note, note, sizeof row.note - 1);
    row.note[sizeof row.note - 1] = '\0';
    return hkb_report_add(&row);
fail:
    return -1;
}

/* ---- P9 pinned: a table reached through hk_mhandle_pin ---- */

/* Each hk.blas1/1 slot as a host calls a table the loader does not forward:
 * pin, call the implementation's own slot on its own handle, unpin. */
#define PIN_ARGS(...) __VA_ARGS__
#define PIN_SLOT(name, minor, params, args)                                                  \
    static hk_status_t pin_##name params                                                     \
    {                                                                                        \
        hk_mhandle_pin_t p = {.size = sizeof p};                                             \
        hk_status_t st = hk_mhandle_pin((hk_mhandle_t *)h, HK_TABLE_BLAS1_V1, &p);          \
        if (st != HK_STATUS_OK)                                                              \
            return st;                                                                       \
        st = ((const hk_blas1_v1_t *)p.table)->name(p.handle, PIN_ARGS args);                \
        hk_mhandle_unpin(&p);                                                                \
        return st;                                                                           \
    }
HK_BLAS1_V1_SLOTS(PIN_SLOT)
#undef PIN_SLOT

#define PIN_ENTRY(name, minor, params, args) .name = pin_##name,
static const hk_blas1_v1_t pin_blas = {.size = sizeof(hk_blas1_v1_t),
                                       HK_BLAS1_V1_SLOTS(PIN_ENTRY)};
#undef PIN_ENTRY

/* The pinned path against the forwarded one, in float: the median over
 * every op's rounds of pinned - forwarded, side by side in each round. */
static int p9_pinned(hkb_lane_t *lane, hkb_lane_t *moved, const hkb_plugin_t *fwd, hkb_enq_t *e)
{
    hkb_plugin_t pinned = *fwd;
    pinned.name = "pinned movable handle";
    pinned.blas = pin_blas;
    hkb_lane_t pl = *moved;
    pl.plug = &pinned;
    const hkb_enq_impl_t impls[3] = {{lane, HKB_ENQ_RAW, HKB_HK}, {moved, 0, HKB_HK},
                                     {&pl, 0, HKB_HK}};
    double med[3], diffs[HKB_OP_COUNT * 64], ratio = 0.0;
    size_t nd = 0;
    HKB_TRY(hkb_enq_fill(e, HKB_F32), fail);
    for (hkb_op_t op = 0; op < HKB_OP_COUNT; op++) {
        hkb_raw_t r;
        double err = NAN;
        hkb_where("P9 pinned %s", hkb_op_name(op));
        HKB_TRY(hkb_enq_prepare(lane, e, op, HKB_F32, &r, &err), fail);
        HKB_TRY(hkb_verify(&pl, op, HKB_F32, HKB_ENQ_N, e->x, e->y, e->w, e->v, &err), fail);
        HKB_TRY(hkb_enq_medians(impls, 3, &r, op, HKB_F32, e, med, &diffs[nd]), fail);
        nd += (size_t)e->reps;
        ratio = med[2] / med[0] > ratio ? med[2] / med[0] : ratio;
    }
    hkb_row_t row;
    hkb_row_set(&row, "P9", "pinned-extra", hkb_prec_name(HKB_F32), HKB_ENQ_N, "ns",
                hkb_median(diffs, nd), 0.0, HKB_TARGET_NONE, 0.0);
    snprintf(row.note, sizeof row.note, "%zu pairs; pinned/raw <= %.3f", nd, ratio);
    return hkb_report_add(&row);
fail:
    return -1;
}

int hkb_fig_moved_calls(hkb_lane_t *lane, const hkb_opts_t *o)
{
    hk_loader_t *loader = NULL;
    hk_plugin_t *p = NULL;
    hk_mhandle_t *mh = NULL;
    hkb_plugin_t fwd;
    hkb_lane_t moved;
    hkb_enq_t e;
    int rc = -1, enq_up = 0;

    hkb_where("P9 set-up");
    memset(&e, 0, sizeof e);
    memset(&fwd, 0, sizeof fwd);
    HKB_TRY(open_loader(&loader), out);
    HKB_TRY(open_plugin(loader, lane->plug->path, &p), out);
    HKB_TRY(forwarding_plugin(&fwd, lane->plug->path), out);
    hk_create_info_t ci = {sizeof ci, lane->device, 0};
    HKB_TRY(hkb_hk_ok(&fwd, NULL, hk_mhandle_create_on(p, &ci, &mh), "hk_mhandle_create_on"),
            out);
    moved = *lane; /* the same stream, device scalars and cuBLAS handle */
    moved.plug = &fwd;
    moved.hk = hk_mhandle_handle(mh);
    HKB_TRY(hkb_hk_ok(&fwd, moved.hk, fwd.vt.set_stream(moved.hk, (void *)lane->stream),
                      "set_stream"),
            out);
    enq_up = 1;
    HKB_TRY(hkb_enq_setup(lane, o, &e), out);
    HKB_TRY(hkb_lane_set_mode(&moved, HK_POINTER_MODE_DEVICE), out);
    const hkb_enq_impl_t impls[3] = {{lane, HKB_ENQ_RAW, HKB_HK}, {lane, 0, HKB_HK}, {&moved, 0, HKB_HK}};
    for (hkb_prec_t prec = 0; prec < HKB_PREC_COUNT; prec++) {
        double med[HKB_OP_COUNT][3], err[HKB_OP_COUNT], diffs[HKB_OP_COUNT * 64];
        HKB_TRY(hkb_enq_fill(&e, prec), out);
        for (hkb_op_t op = 0; op < HKB_OP_COUNT; op++) {
            hkb_raw_t r;
            double direct_err = NAN;
            hkb_where("P9 %s %s", hkb_prec_name(prec), hkb_op_name(op));
            HKB_TRY(hkb_enq_prepare(lane, &e, op, prec, &r, &direct_err), out);
            HKB_TRY(hkb_verify(&moved, op, prec, HKB_ENQ_N, e.x, e.y, e.w, e.v, &err[op]), out);
            HKB_TRY(hkb_enq_medians(impls, 3, &r, op, prec, &e, med[op], &diffs[op * e.reps]),
                    out);
        }
        HKB_TRY(p9_rows(prec, (const double(*)[3])med, err, diffs,
                        (size_t)HKB_OP_COUNT * (size_t)e.reps),
                out);
    }
    HKB_TRY(p9_pinned(lane, &moved, &fwd, &e), out);
    hkb_where("%s", "");
    rc = 0;
out:
    if (enq_up)
        hkb_enq_teardown(lane, &e);
    if (mh && hkb_hk_ok(&fwd, NULL, hk_mhandle_destroy(mh), "hk_mhandle_destroy") != 0)
        rc = -1;
    if (loader && hk_loader_destroy(loader) != HK_STATUS_OK && rc == 0)
        rc = hkb_fail("loader destroy: %s", hk_loader_last_error(loader));
    return rc;
}

/* ---- P8 ---- */

/* Each worker on the bench's device, with a stream of its own. */
static int p8_stream_create(void *ctx, void **stream, char *why, size_t len)
{
    const int *device = ctx;
    cudaStream_t s = NULL;
    cudaError_t e = cudaSetDevice(*device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaStreamCreateWithFlags: %s", cudaGetErrorName(e));
        return -1;
    }
    *stream = s;
    return 0;
}

static void p8_stream_destroy(void *ctx, void *stream)
{
    (void)ctx;
    (void)hkb__cuda_ok(cudaStreamDestroy((cudaStream_t)stream), "cudaStreamDestroy", __FILE__,
                       __LINE__);
}

/* The device current in the worker thread, as in a program that uses it. */
static int p8_thread_init(void *ctx, char *why, size_t len)
{
    cudaError_t e = cudaSetDevice(*(const int *)ctx);
    if (e == cudaSuccess)
        return 0;
    snprintf(why, len, "cudaSetDevice: %s", cudaGetErrorName(e));
    return -1;
}

/* Median and longest of step k over the committed swaps (NAN when none). */
static int p8_step(const hkb_p8_result_t *r, int k, double *med, double *max)
{
    double *v = malloc((size_t)r->swaps * sizeof *v);
    size_t n = 0;
    if (!v)
        return hkb_fail("out of host memory");
    for (int i = 0; i < r->swaps; i++)
        if (r->swap[i].ok)
            v[n++] = r->swap[i].us[k];
    *max = NAN;
    for (size_t i = 0; i < n; i++)
        *max = isnan(*max) || v[i] > *max ? v[i] : *max;
    *med = n ? hkb_median(v, n) : NAN;
    free(v);
    return 0;
}

static int p8_add(const char *op, const char *label, double hk, double ref,
                  hkb_target_kind_t kind, double target, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static int p8_add(const char *op, const char *label, double hk, double ref,
                  hkb_target_kind_t kind, double target, const char *fmt, ...)
{
    hkb_row_t row;
    char name[sizeof row.op];
    va_list ap;
    snprintf(name, sizeof name, "%s/%s", op, label);
    hkb_row_set(&row, "P8", name, "-", 0, "us", hk, ref, kind, target);
    va_start(ap, fmt);
    vsnprintf(row.note, sizeof row.note, fmt, ap);
    va_end(ap);
    return hkb_report_add(&row);
}

/* The switch, then each step of the swaps (median; the note the longest). */
static int p8_step_rows(const hkb_p8_result_t *r, const char *label)
{
    static const char *const names[HKB_P8_STEPS] = {
        "open", "verify", "new-handle", "commit", "drain", "close", "switch", "prepare-call",
        "commit-call"};
    double med, max;
    int stayed = 0;
    for (int i = 0; i < r->swaps; i++)
        stayed += r->swap[i].ok && r->swap[i].module_stayed;
    HKB_TRY(p8_step(r, HKB_P8_SWITCH, &med, &max), fail);
    HKB_TRY(p8_add("switch", label, med, 0.0, HKB_TARGET_VALUE_LE, P8_SWITCH_TARGET_US,
                   "from commit; %d swaps, %d refused", r->swaps - r->refused, r->refused),
            fail);
    HKB_TRY(p8_add("switch-max", label, max, 0.0, HKB_TARGET_VALUE_LE, P8_SWITCH_TARGET_US,
                   "old module not gone: %d of %d", stayed, r->swaps - r->refused),
            fail);
    for (int k = 0; k < HKB_P8_STEPS; k++) {
        if (k == HKB_P8_SWITCH)
            continue;
        HKB_TRY(p8_step(r, k, &med, &max), fail);
        HKB_TRY(p8_add(names[k], label, med, 0.0, HKB_TARGET_NONE, 0.0, "%s median; max %.0f us",
                       k >= HKB_P8_PREPARE_CALL ? "whole call" : "step", max),
                fail);
    }
    return p8_add("hold-max", label, r->max_hold_us, 0.0, HKB_TARGET_NONE, 0.0,
                  "calls held by %llu steps of %d swaps", (unsigned long long)r->holds,
                  r->swaps);
fail:
    return -1;
}

/* The calls' times during the swaps (hk) against the quiet time (ref). */
/* label: the workload's name, "-noprobe" added for the run without isolation,
 * whose rows are for information. */
static int p8_call_rows(const hkb_p8_result_t *r, hkb_p8_load_t load, const char *label,
                        int noprobe, int worst)
{
    hk__lat_summary_t d, q, o;
    int svc = load == HKB_P8_SERVICE && !noprobe;
    hk__lat_summarize(&r->lat[HKB_P8_DURING], &d);
    hk__lat_summarize(&r->lat[HKB_P8_QUIET], &q);
    hk__lat_summarize(&r->lat[HKB_P8_OTHER], &o);
    if (d.count == 0 || q.count == 0)
        return hkb_fail("P8 %s: no call %s", label,
                        d.count ? "in the time without swaps" : "overlapped a swap");
    HKB_TRY(p8_add("p50", label, d.p50_us, q.p50_us, HKB_TARGET_NONE, 0.0,
                   "extra %+.1f us; %.3g calls swapping", d.p50_us - q.p50_us, (double)d.count),
            fail);
    HKB_TRY(p8_add("p99", label, d.p99_us, q.p99_us, HKB_TARGET_NONE, 0.0,
                   "extra %+.1f us; %.3g calls quiet", d.p99_us - q.p99_us, (double)q.count),
            fail);
    HKB_TRY(p8_add("p99.9", label, d.p999_us, q.p999_us,
                   svc ? HKB_TARGET_EXTRA_LE : HKB_TARGET_NONE, svc ? P8_SERVICE_P999_US : 0.0,
                   "extra %+.1f us", d.p999_us - q.p999_us),
            fail);
    HKB_TRY(p8_add("max", label, d.max_us, q.max_us,
                   noprobe ? HKB_TARGET_NONE : HKB_TARGET_EXTRA_LE,
                   svc ? P8_SERVICE_MAX_US : noprobe ? 0.0 : P8_FLOOD_MAX_US,
                   "extra %+.1f us; in swap %d",
                   d.max_us - q.max_us, worst),
            fail);
    return p8_add("other-max", label, o.max_us, q.max_us, HKB_TARGET_NONE, 0.0,
                  "between swaps: p99.9 %.1f us, %.3g calls", o.p999_us, (double)o.count);
fail:
    return -1;
}

/* One line on the swap with the longest call: where its time went. */
static int p8_worst(const hkb_p8_result_t *r, const char *label)
{
    int worst = 0;
    for (int i = 1; i < r->swaps; i++)
        if (r->swap[i].longest_call_us > r->swap[worst].longest_call_us)
            worst = i;
    const hkb_p8_swap_t *s = &r->swap[worst];
    if (!s->ok) {
        printf("P8 %s: longest call %.0f us in swap %d (refused)\n", label,
               s->longest_call_us, worst);
    } else {
        printf("P8 %s: longest call %.0f us (%s, began %.0f us after the swap call began) in "
               "swap %d: open %.0f, verify %.0f (held %.0f), "
               "new handles %.0f, switch %.1f, drain %.0f, close %.0f (held %.0f); "
               "prepare call %.0f, commit call %.0f us\n",
               label, s->longest_call_us,
               s->longest_what ? s->longest_what : "-", s->longest_at_us, worst,
               s->us[HKB_P8_OPEN],
               s->us[HKB_P8_VERIFY], s->hold_prepare_us, s->us[HKB_P8_CREATE],
               s->us[HKB_P8_SWITCH], s->us[HKB_P8_DRAIN], s->us[HKB_P8_CLOSE], s->hold_commit_us,
               s->us[HKB_P8_PREPARE_CALL], s->us[HKB_P8_COMMIT_CALL]);
    }
    if (r->refused)
        printf("P8 %s: %d of %d swaps refused; the first: %s\n", label,
               r->refused, r->swaps, r->refusal);
    fflush(stdout);
    return worst;
}

/* One workload: the run, then its rows. noprobe: the loader's isolation off
 * (verification in this process only), rows for information. */
static int p8_load(const char *path_a, const char *path_b, const hkb_opts_t *o,
                   hkb_p8_load_t load, int noprobe, int pinned, int keep)
{
    int device = o->device;
    hkb_p8_setup_t s = {.load = load, .isolation_off = noprobe, .path_a = path_a,
                        .path_b = path_b, .device = device, .threads = P8_THREADS,
                        .swaps = o->quick ? P8_QUICK_SWAPS : P8_SWAPS, .gap_us = P8_GAP_US,
                        .stream_create = p8_stream_create, .stream_destroy = p8_stream_destroy,
                        .thread_init = p8_thread_init, .ctx = &device, .pinned = pinned,
                        .keep_old = keep, .hold_after_us = o->hold_after_us,
                        .hold_max_us = o->hold_max_us};
    hkb_p8_result_t r;
    char why[512], label[40];
    snprintf(label, sizeof label, "%s%s%s%s", pinned ? "example-" : "", hkb_p8_load_name(load),
             noprobe ? "-noprobe" : "", keep ? "-keep" : "");
    hkb_where("P8 %s", label);
    if (hkb_p8_run(&s, &r, why, sizeof why) != 0)
        return hkb_fail("%s", why);
    printf("P8 %s: %s <-> %s, %d threads, %.2f s swapping, %.2f s quiet", label, r.name_a,
           r.name_b, P8_THREADS, r.swapping_s, r.quiet_s);
    if (o->hold_after_us || o->hold_max_us)
        printf("; hold after %lld us, at most %lld us (0: the default)", o->hold_after_us,
               o->hold_max_us);
    printf("\n");
    int worst = p8_worst(&r, label);
    int rc = p8_step_rows(&r, label);
    if (rc == 0)
        rc = p8_call_rows(&r, load, label, noprobe, worst);
    hkb_p8_result_free(&r);
    return rc;
}

/* ---- P8 prepare of a build never seen ---- */

#define P8_NEW_BUILDS 12 /* copies of build b, each a build the loader never saw */

/* Copies the file from to the new file to (mode 0644). 0 or -1. */
static int p8_copy(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wbx");
    char buf[1 << 16];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        rc = fwrite(buf, 1, n, out) == n ? 0 : -1;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        rc = -1;
    return rc;
}

/* The prepare call (open, verify, new handle) of P8_NEW_BUILDS builds the
 * loader never saw (copies of b in a private directory), each cancelled,
 * with a movable handle on a on the bench's device; us[i] each one's. */
static int p8_new_run(const char *a, const char *dir, uint32_t verifier, int device,
                      double *us)
{
    hk_loader_options_t lo = {.size = sizeof lo, .ignore_env = 1, .verifier = verifier};
    hk_loader_t *loader = NULL;
    hk_mhandle_t *mh = NULL;
    hk_plugin_t *pa = NULL;
    hk_create_info_t ci = {sizeof ci, device, 0};
    int rc = -1;
    if (hk_loader_create(&lo, &loader) != HK_STATUS_OK || hk_loader_open(loader, a, &pa)
        || hk_mhandle_create_on(pa, &ci, &mh) != HK_STATUS_OK) {
        rc = hkb_fail("P8 prepare-new: %s", loader ? hk_loader_last_error(loader) : "loader");
        goto out;
    }
    for (int i = 0; i < P8_NEW_BUILDS; i++) {
        char path[4200];
        hk_swap_prepared_t *prep = NULL;
        snprintf(path, sizeof path, "%s/hk-cuda-new%d-%u.so", dir, i, (unsigned)verifier);
        uint64_t t0 = hk__lat_now_ns();
        hk_status_t st = hk_loader_swap_prepare(loader, path, NULL, &prep);
        us[i] = (double)(hk__lat_now_ns() - t0) / 1e3;
        if (st != HK_STATUS_OK) {
            rc = hkb_fail("P8 prepare-new: %s", hk_loader_last_error(loader));
            goto out;
        }
        hk_loader_swap_cancel(prep);
    }
    rc = 0;
out:
    if (mh)
        hk_mhandle_destroy(mh);
    if (loader)
        hk_loader_destroy(loader);
    return rc;
}

/* Side by side: the loader's verifier kept (the default) against a probe
 * process per verification; the median of the builds after the first
 * (which starts the verifier) against the target. */
static int p8_prepare_new_rows(const char *a, const char *b, const hkb_opts_t *o)
{
    char dir[] = "/tmp/hk-bench-XXXXXX";
    double keep[P8_NEW_BUILDS], per[P8_NEW_BUILDS];
    int rc = -1;
    hkb_where("P8 prepare-new");
    if (!mkdtemp(dir))
        return hkb_fail("P8 prepare-new: mkdtemp: %s", strerror(errno));
    for (int i = 0; i < P8_NEW_BUILDS; i++)
        for (unsigned v = 0; v < 2; v++) {
            char path[sizeof dir + 64];
            snprintf(path, sizeof path, "%s/hk-cuda-new%d-%u.so", dir, i, v);
            if (p8_copy(b, path) != 0) {
                hkb_fail("P8 prepare-new: cannot copy %s to %s", b, path);
                goto out;
            }
        }
    HKB_TRY(p8_new_run(a, dir, HK_VERIFIER_KEEP, o->device, keep), out);
    HKB_TRY(p8_new_run(a, dir, HK_VERIFIER_PER_SWAP, o->device, per), out);
    double mk = hkb_median(keep + 1, P8_NEW_BUILDS - 1);
    double mp = hkb_median(per + 1, P8_NEW_BUILDS - 1);
    rc = p8_add("prepare-new", "verifier", mk, mp, HKB_TARGET_VALUE_LE, 25000.0,
                "builds never seen, median of %d after the first; ref: a probe process per "
                "verification; first %.0f / %.0f us", P8_NEW_BUILDS - 1, keep[0], per[0]);
out:
    for (int i = 0; i < P8_NEW_BUILDS; i++)
        for (unsigned v = 0; v < 2; v++) {
            char path[sizeof dir + 64];
            snprintf(path, sizeof path, "%s/hk-cuda-new%d-%u.so", dir, i, v);
            unlink(path);
        }
    rmdir(dir);
    return rc;
}

/* The floor: the driver's own time to load the new build's code into the
 * idle context, and to unload it. */
static int p8_floor_rows(const hkb_opts_t *o)
{
    hkb_floor_t f;
    hkb_row_t row;
    hkb_where("P8 floor");
    HKB_CUDA(cudaSetDevice(o->device), fail);
    HKB_CUDA(cudaDeviceSynchronize(), fail);
    HKB_TRY(hkb_load_floor(o->quick ? 5 : 20, &f), fail);
    hkb_row_set(&row, "P8", "floor-load", "-", 0, "us", f.load_us, 0.0, HKB_TARGET_NONE, 0.0);
    snprintf(row.note, sizeof row.note, "%u kernels, %s; max %.0f us", f.kernels,
             f.lazy ? "lazy" : "eager", f.load_max_us);
    HKB_TRY(hkb_report_add(&row), fail);
    hkb_row_set(&row, "P8", "floor-unload", "-", 0, "us", f.unload_us, 0.0, HKB_TARGET_NONE,
                0.0);
    snprintf(row.note, sizeof row.note, "cuLibraryUnload; max %.0f us", f.unload_max_us);
    return hkb_report_add(&row);
fail:
    return -1;
}

int hkb_fig_swap(const char *path_a, const char *path_b, const hkb_opts_t *o)
{
    int rc = -1;
    HKB_TRY(p8_floor_rows(o), out);
    HKB_TRY(p8_prepare_new_rows(path_a, path_b, o), out);
    HKB_TRY(p8_load(path_a, path_b, o, HKB_P8_FLOOD, 0, 0, 0), out);
    /* the same flood with the builds swapped away from kept open: only the
     * first two swaps open a build and load its code */
    HKB_TRY(p8_load(path_a, path_b, o, HKB_P8_FLOOD, 0, 0, 1), out);
    HKB_TRY(p8_load(path_a, path_b, o, HKB_P8_SERVICE, 0, 0, 0), out);
    HKB_TRY(p8_load(path_a, path_b, o, HKB_P8_SERVICE, 0, 0, 1), out);
    /* the same service with the verification in this process only: what
     * the probe process (a context of another process on the device) costs */
    HKB_TRY(p8_load(path_a, path_b, o, HKB_P8_SERVICE, 1, 0, 0), out);
    /* the same rows for a plugin without hk.blas1/1: hk-example's own ops
     * through pins, verified by its self-check */
    if (o->example_a && o->example_b) {
        HKB_TRY(p8_load(o->example_a, o->example_b, o, HKB_P8_FLOOD, 0, 1, 0), out);
        HKB_TRY(p8_load(o->example_a, o->example_b, o, HKB_P8_SERVICE, 0, 1, 0), out);
    } else {
        printf("P8 example: skipped (no --example A,B: two builds of hk-example)\n");
    }
    rc = 0;
out:
    hkb_where("%s", "");
    return rc;
}
