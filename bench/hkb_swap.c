/* hk-bench: P8 and P9, live swap (docs/swap.md).
 *
 * P8: 8 threads call saxpy through movable handles on hk-cuda, one stream
 * each, while the main thread swaps every handle between two builds of
 * hk-cuda (the measured hk-cuda.so and its second build, hk-cuda-1.0.1.so of
 * tests/swap) back and forth, each swap prepared (hk_loader_swap_prepare:
 * resolving and reopening the module, verifying it, making the new handles)
 * and then committed. Reported: the time from the commit call until every
 * handle runs the new implementation (the loader's last_switch_ns), median
 * and max; each step's median and both calls' (a one-call hk_loader_swap
 * takes about prepare + switch); and the longest call
 * any thread saw while swapping against the longest in an equal time without
 * swaps right after (each call timed around the op alone; every 64 calls the
 * thread waits for its stream, untimed, so no call waits for a full queue).
 * Every call's status is checked, and at the end every y must be back to 0
 * (x = 1, alternately + and - 1).
 *
 * P9: P3's method (hkb_enqueue.c) through a movable handle: host enqueue time
 * per call through the loader's forwarding table against a raw cuLaunchKernel
 * of the same kernel, and against the direct call of the same hk-cuda on the
 * same stream, interleaved batch by batch. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hk_loader.h"
#include "hk_status_text.h"
#include "hk_swap.h"
#include "hkb.h"

#define P8_THREADS 8
#define P8_SWAPS 50
#define P8_N (INT64_C(1) << 12)
#define P8_BATCH 64 /* calls between two waits for the stream; even, so y returns to 0 */
#define P8_GAP_US 2000
#define P8_SWITCH_TARGET_US 1000.0
#define P8_EXTRA_TARGET_US 100.0
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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
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

typedef struct p8_worker {
    pthread_t tid;
    int index, device, started;
    const hkb_plugin_t *fwd;
    hk_mhandle_t *mh;
    cudaStream_t stream;
    float *x, *y;
    uint64_t calls[2]; /* [0] without swaps, [1] while swapping */
    double max_ns[2];
    atomic_int ready; /* 1 running, -1 failed */
} p8_worker_t;

static atomic_int p8_stop, p8_swapping;

static void *p8_work(void *arg)
{
    p8_worker_t *w = arg;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    const float alpha[2] = {1.0f, -1.0f};
    hkb_where("P8 thread %d", w->index);
    if (hkb__cuda_ok(cudaSetDevice(w->device), "cudaSetDevice", __FILE__, __LINE__) != 0)
        goto failed;
    atomic_store(&w->ready, 1);
    while (!atomic_load(&p8_stop)) {
        for (int i = 0; i < P8_BATCH; i++) {
            int during = atomic_load_explicit(&p8_swapping, memory_order_relaxed);
            double t0 = hkb_now_ns();
            hk_status_t st = w->fwd->blas.saxpy(h, P8_N, &alpha[i & 1], w->x, 1, w->y, 1);
            double ns = hkb_now_ns() - t0;
            if (hkb_hk_ok(w->fwd, h, st, "saxpy through a movable handle") != 0)
                goto failed;
            w->calls[during]++;
            if (ns > w->max_ns[during])
                w->max_ns[during] = ns;
        }
        if (hkb_hk_ok(w->fwd, h, w->fwd->vt.synchronize(h), "synchronize") != 0)
            goto failed;
    }
    return NULL;
failed:
    atomic_store(&w->ready, -1);
    return NULL;
}

/* A worker's handle on plugin a (device dev), stream, x = 1 and y = 0. */
static int p8_worker_init(p8_worker_t *w, hk_plugin_t *a, const hkb_plugin_t *fwd, int dev)
{
    static float ones[P8_N];
    for (int i = 0; i < P8_N; i++)
        ones[i] = 1.0f;
    w->fwd = fwd;
    w->device = dev;
    hk_create_info_t ci = {sizeof ci, dev, 0};
    HKB_TRY(hkb_hk_ok(fwd, NULL, hk_mhandle_create_on(a, &ci, &w->mh), "hk_mhandle_create_on"),
            fail);
    HKB_CUDA(cudaSetDevice(dev), fail);
    HKB_CUDA(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking), fail);
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    HKB_TRY(hkb_hk_ok(fwd, h, fwd->vt.set_stream(h, (void *)w->stream), "set_stream"), fail);
    HKB_CUDA(cudaMalloc((void **)&w->x, sizeof ones), fail);
    HKB_CUDA(cudaMalloc((void **)&w->y, sizeof ones), fail);
    HKB_CUDA(cudaMemcpy(w->x, ones, sizeof ones, cudaMemcpyHostToDevice), fail);
    HKB_CUDA(cudaMemset(w->y, 0, sizeof ones), fail);
    return 0;
fail:
    return -1;
}

/* Checks y (every element back to 0) and frees the worker. */
static int p8_worker_fini(p8_worker_t *w)
{
    static float y[P8_N];
    int rc = 0;
    if (w->y && w->stream) {
        rc = hkb__cuda_ok(cudaStreamSynchronize(w->stream), "cudaStreamSynchronize", __FILE__,
                          __LINE__);
        if (rc == 0)
            rc = hkb__cuda_ok(cudaMemcpy(y, w->y, sizeof y, cudaMemcpyDeviceToHost),
                              "cudaMemcpy", __FILE__, __LINE__);
        for (int i = 0; rc == 0 && i < P8_N; i++)
            if (y[i] != 0.0f)
                rc = hkb_fail("P8 thread %d: y[%d] is %g after an even number of +x and -x, "
                              "expected 0", w->index, i, (double)y[i]);
    }
    if (w->mh && hkb_hk_ok(w->fwd, NULL, hk_mhandle_destroy(w->mh), "hk_mhandle_destroy") != 0)
        rc = -1;
    if (w->x)
        (void)hkb__cuda_ok(cudaFree(w->x), "cudaFree", __FILE__, __LINE__);
    if (w->y)
        (void)hkb__cuda_ok(cudaFree(w->y), "cudaFree", __FILE__, __LINE__);
    if (w->stream)
        (void)hkb__cuda_ok(cudaStreamDestroy(w->stream), "cudaStreamDestroy", __FILE__, __LINE__);
    return rc;
}

/* Step k of the last swap, in us: open, verify, new handles (the prepare),
 * commit, drain, close; then the switch (from the commit call until every
 * handle runs the new implementation), the whole prepare call and the whole
 * commit call. */
enum { P8_OPEN, P8_VERIFY, P8_CREATE, P8_COMMIT, P8_DRAIN, P8_CLOSE, P8_SWITCH, P8_PREPARE,
       P8_WALL, P8_STEPS };

/* What the swaps held (docs/swap.md, "Held calls"). */
typedef struct p8_holds {
    uint64_t steps;   /* steps that held the calls */
    double longest_us;
} p8_holds_t;

static int p8_swaps(hk_loader_t *loader, const char *pa, const char *pb, hk_plugin_t *a,
                    hk_plugin_t *b, int swaps, double *steps, int *stayed, p8_holds_t *held)
{
    for (int i = 0; i < swaps; i++) {
        const char *to = (i % 2) ? pa : pb;
        /* Prepared first (the module opened, verified, the new handles
         * made: milliseconds on a GPU), then committed: the switch is what
         * the callers see. */
        hk_swap_prepared_t *prep = NULL;
        double t0 = hkb_now_ns();
        hk_status_t st = hk_loader_swap_prepare(loader, to, NULL, &prep);
        double t1 = hkb_now_ns();
        if (st == HK_STATUS_OK)
            st = hk_loader_swap_commit(prep, NULL);
        double wall = hkb_now_ns() - t1;
        if (st != HK_STATUS_OK)
            return hkb_fail("swap %d to %s: %s", i, to, hk_loader_last_error(loader));
        hk_swap_state_t s = {.size = sizeof s};
        hk_loader_swap_state(loader, &s);
        const uint64_t v[P8_PREPARE] = {s.last_open_ns,   s.last_verify_ns, s.last_create_ns,
                                        s.last_commit_ns, s.last_drain_ns,  s.last_close_ns,
                                        s.last_switch_ns};
        for (int k = 0; k < P8_PREPARE; k++)
            steps[k * swaps + i] = (double)v[k] / 1e3;
        steps[P8_PREPARE * swaps + i] = (t1 - t0) / 1e3;
        held->steps = s.holds;
        held->longest_us = (double)s.max_hold_ns / 1e3;
        steps[P8_WALL * swaps + i] = wall / 1e3;
        hk_swap_plugin_state_t ps = {.size = sizeof ps};
        hk_plugin_swap_state((i % 2) ? b : a, &ps);
        *stayed += ps.module != HK_MODULE_CLOSED;
        struct timespec gap = {0, P8_GAP_US * 1000L};
        nanosleep(&gap, NULL);
    }
    return 0;
}

static int p8_rows(double *steps, int swaps, const p8_worker_t *w, int stayed,
                   const p8_holds_t *held)
{
    static const char *const names[P8_STEPS] = {"open",   "verify", "new-handle",
                                                "commit", "drain",  "close",
                                                "switch", "prepare-call", "commit-call"};
    double med[P8_STEPS], max[P8_STEPS], longest[2] = {0.0, 0.0};
    uint64_t calls[2] = {0, 0};
    hkb_row_t row;
    for (int k = 0; k < P8_STEPS; k++) {
        qsort(&steps[k * swaps], (size_t)swaps, sizeof *steps, cmp_double);
        med[k] = steps[k * swaps + swaps / 2];
        max[k] = steps[k * swaps + swaps - 1];
    }
    for (int t = 0; t < P8_THREADS; t++)
        for (int d = 0; d < 2; d++) {
            calls[d] += w[t].calls[d];
            longest[d] = w[t].max_ns[d] > longest[d] ? w[t].max_ns[d] : longest[d];
        }
    hkb_row_set(&row, "P8", "switch", "-", 0, "us", med[P8_SWITCH], 0.0, HKB_TARGET_VALUE_LE,
                P8_SWITCH_TARGET_US);
    snprintf(row.note, sizeof row.note, "from commit; median of %d swaps, %d thr", swaps,
             P8_THREADS);
    HKB_TRY(hkb_report_add(&row), fail);
    hkb_row_set(&row, "P8", "switch-max", "-", 0, "us", max[P8_SWITCH], 0.0, HKB_TARGET_VALUE_LE,
                P8_SWITCH_TARGET_US);
    snprintf(row.note, sizeof row.note, "old module not gone: %d of %d", stayed, swaps);
    HKB_TRY(hkb_report_add(&row), fail);
    for (int k = 0; k < P8_STEPS; k++) {
        if (k == P8_SWITCH)
            continue;
        hkb_row_set(&row, "P8", names[k], "-", 0, "us", med[k], 0.0, HKB_TARGET_NONE, 0.0);
        snprintf(row.note, sizeof row.note, "%s median; max %.0f us",
                 k >= P8_PREPARE ? "whole call" : "step", max[k]);
        HKB_TRY(hkb_report_add(&row), fail);
    }
    hkb_row_set(&row, "P8", "call-max", "-", 0, "us", longest[1] / 1e3, longest[0] / 1e3,
                HKB_TARGET_NONE, 0.0);
    snprintf(row.note, sizeof row.note, "swapping vs not; %.2g and %.2g calls",
             (double)calls[1], (double)calls[0]);
    HKB_TRY(hkb_report_add(&row), fail);
    hkb_row_set(&row, "P8", "hold-max", "-", 0, "us", held->longest_us, 0.0, HKB_TARGET_NONE,
                0.0);
    snprintf(row.note, sizeof row.note, "calls held by %llu steps of %d swaps",
             (unsigned long long)held->steps, swaps);
    HKB_TRY(hkb_report_add(&row), fail);
    hkb_row_set(&row, "P8", "call-extra", "-", 0, "us", (longest[1] - longest[0]) / 1e3, 0.0,
                HKB_TARGET_VALUE_LE, P8_EXTRA_TARGET_US);
    snprintf(row.note, sizeof row.note, "longest call %.0f us swapping, %.0f not",
             longest[1] / 1e3, longest[0] / 1e3);
    return hkb_report_add(&row);
fail:
    return -1;
}

int hkb_fig_swap(const char *path_a, const char *path_b, const hkb_opts_t *o)
{
    int swaps = o->quick ? 20 : P8_SWAPS, rc = -1, stayed = 0, running = 0, st = -1;
    p8_holds_t held = {0, 0.0};
    double t0 = 0.0, busy = 0.0;
    hk_loader_t *loader = NULL;
    hk_plugin_t *a = NULL, *b = NULL;
    hkb_plugin_t fwd;
    static p8_worker_t w[P8_THREADS];
    double *steps = calloc((size_t)swaps * P8_STEPS, sizeof *steps);

    hkb_where("P8 set-up");
    memset(w, 0, sizeof w);
    atomic_store(&p8_stop, 0);
    atomic_store(&p8_swapping, 0);
    if (!steps)
        return hkb_fail("out of host memory");
    HKB_TRY(open_loader(&loader), out);
    HKB_TRY(open_plugin(loader, path_a, &a), out);
    HKB_TRY(open_plugin(loader, path_b, &b), out);
    printf("P8: %s %s <-> %s %s (%s)\n", hk_plugin_name(a), hk_plugin_version(a),
           hk_plugin_name(b), hk_plugin_version(b), hk_plugin_path(b));
    fflush(stdout);
    HKB_TRY(forwarding_plugin(&fwd, path_a), out);
    for (int t = 0; t < P8_THREADS; t++) {
        w[t].index = t;
        HKB_TRY(p8_worker_init(&w[t], a, &fwd, o->device), out);
    }
    for (; running < P8_THREADS; running++)
        if (pthread_create(&w[running].tid, NULL, p8_work, &w[running]) != 0) {
            hkb_fail("cannot start a thread");
            goto stop;
        }
    for (int t = 0; t < P8_THREADS; t++)
        while (atomic_load(&w[t].ready) == 0)
            sched_yield();
    hkb_where("P8 swaps");
    atomic_store(&p8_swapping, 1);
    t0 = hkb_now_ns();
    st = p8_swaps(loader, path_a, path_b, a, b, swaps, steps, &stayed, &held);
    busy = hkb_now_ns() - t0;
    atomic_store(&p8_swapping, 0);
    if (st == 0) { /* as long again without swaps: the baseline of the call times */
        struct timespec quiet = {(time_t)(busy / 1e9), (long)fmod(busy, 1e9)};
        nanosleep(&quiet, NULL);
    }
stop:
    atomic_store(&p8_stop, 1);
    for (int t = 0; t < running; t++)
        pthread_join(w[t].tid, NULL);
    if (running == P8_THREADS && !hkb_failure())
        rc = p8_rows(steps, swaps, w, stayed, &held);
out:
    atomic_store(&p8_stop, 1);
    for (int t = 0; t < P8_THREADS; t++)
        if (p8_worker_fini(&w[t]) != 0)
            rc = -1;
    if (loader && hk_loader_destroy(loader) != HK_STATUS_OK && rc == 0)
        rc = hkb_fail("loader destroy: %s", hk_loader_last_error(loader));
    free(steps);
    hkb_where("%s", "");
    return rc;
}
