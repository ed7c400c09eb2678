/* hk-bench: P1 (streaming bandwidth ÷ D2D cudaMemcpy) and P2 (time per call
 * at small n ÷ cuBLAS). Both run hk-cuda and cuBLAS on the same stream, the
 * same buffers and the same data, one after the other, in one process. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hkb.h"

#define P1_TARGET 0.95
#define P2_TARGET 1.0
#define P2_TARGET_REDUCTION 0.6
/* Scal and axpy are timed over and over on the same data: an alpha just below
 * one keeps the values finite and away from zero for thousands of calls, and
 * is no special case an implementation could short-cut (as it could 1 or 0). */
#define BENCH_ALPHA 0.999

typedef struct work {
    hkb_lane_t *lane;
    hkb_impl_t impl;
    hkb_op_t op;
    hkb_prec_t prec;
    int64_t n;
    unsigned char *x, *y;
    size_t stride; /* bytes between rotated vector sets; 0: no rotation */
    int sets;
    int batch; /* calls per timed unit */
} work_t;

static int work_memcpy(void *arg, int rep)
{
    work_t *w = arg;
    (void)rep;
    HKB_CUDA(cudaMemcpyAsync(w->y, w->x, (size_t)w->n * hkb_prec_size(w->prec),
                             cudaMemcpyDeviceToDevice, w->lane->stream), fail);
    return 0;
fail:
    return -1;
}

static int work_calls(void *arg, int rep)
{
    work_t *w = arg;
    for (int b = 0; b < w->batch; b++) {
        /* Each call touches the next set, so small vectors come from memory,
         * not from an L2 that the previous call filled. */
        size_t off = w->sets > 1 ? (size_t)(((int64_t)rep * w->batch + b) % w->sets) * w->stride : 0;
        HKB_TRY(hkb_call(w->lane, w->impl, w->op, w->prec, w->n, w->x + off, w->y + off), fail);
    }
    return 0;
fail:
    return -1;
}

typedef struct bufs {
    unsigned char *x, *y, *w, *r;
    int64_t cap; /* elements of the widest precision each buffer holds */
} bufs_t;

static int bufs_alloc(bufs_t *b, int64_t cap)
{
    size_t bytes = (size_t)cap * sizeof(double);
    size_t free_b = 0, total_b = 0;

    memset(b, 0, sizeof *b);
    b->cap = cap;
    HKB_CUDA(cudaMemGetInfo(&free_b, &total_b), fail);
    if (free_b < 4 * bytes + (256u << 20))
        return hkb_fail("needs 4 x %.2f GiB of device memory, %.2f GiB free", bytes / 1073741824.0,
                        free_b / 1073741824.0);
    HKB_CUDA(cudaMalloc((void **)&b->x, bytes), fail);
    HKB_CUDA(cudaMalloc((void **)&b->y, bytes), fail);
    HKB_CUDA(cudaMalloc((void **)&b->w, bytes), fail);
    HKB_CUDA(cudaMalloc((void **)&b->r, bytes), fail);
    return 0;
fail:
    return -1;
}

static void bufs_free(bufs_t *b)
{
    unsigned char *p[4] = {b->x, b->y, b->w, b->r};
    for (int i = 0; i < 4; i++)
        if (p[i])
            (void)hkb__cuda_ok(cudaFree(p[i]), "cudaFree", __FILE__, __LINE__);
    memset(b, 0, sizeof *b);
}

/* Fills all of x and y, in elements of prec: P2 rotates over the whole
 * buffers, which hold twice as many floats as doubles. */
static int fill(const bufs_t *b, hkb_prec_t prec)
{
    int64_t elems = b->cap * (int64_t)sizeof(double) / (int64_t)hkb_prec_size(prec);
    HKB_TRY(hkb_fill_random(b->x, prec, elems, 1), fail);
    HKB_TRY(hkb_fill_random(b->y, prec, elems, 2), fail);
    return 0;
fail:
    return -1;
}

static int p1_one(hkb_lane_t *lane, const bufs_t *b, hkb_prec_t prec, int64_t n, int quick)
{
    int warm = quick ? 2 : 3, reps = quick ? 7 : 15;
    work_t w = {lane, HKB_HK, HKB_AXPY, prec, n, b->x, b->y, 0, 1, 1};
    char ns[16];
    double ms = 0.0, copy_gbs;

    hkb_where("P1 memcpy %s n=%s", hkb_prec_name(prec), hkb_fmt_n(n, ns, sizeof ns));
    HKB_TRY(hkb_time_events(lane->stream, warm, reps, work_memcpy, &w, &ms), fail);
    /* Read and written bytes, as the ops are counted. */
    copy_gbs = 2.0 * (double)n * (double)hkb_prec_size(prec) / (ms * 1e6);
    for (hkb_op_t op = 0; op < HKB_OP_COUNT; op++) {
        double gbs[2], err = NAN;
        hkb_row_t row;

        hkb_where("P1 %s %s n=%s", hkb_prec_name(prec), hkb_op_name(op), ns);
        HKB_TRY(hkb_verify(lane, op, prec, n, b->x, b->y, b->w, b->r, &err), fail);
        for (int i = 0; i < 2; i++) {
            w.impl = i == 0 ? HKB_HK : HKB_CUBLAS;
            w.op = op;
            HKB_TRY(hkb_time_events(lane->stream, warm, reps, work_calls, &w, &ms), fail);
            gbs[i] = hkb_op_bytes(op, prec, n) / (ms * 1e6);
        }
        hkb_row_set(&row, "P1", hkb_op_name(op), hkb_prec_name(prec), n, "GB/s", gbs[0], copy_gbs,
                    HKB_TARGET_RATIO_GE, P1_TARGET);
        row.cublas = gbs[1] / copy_gbs;
        row.err = err;
        snprintf(row.note, sizeof row.note, "cuBLAS %.0f GB/s%s", gbs[1],
                 hkb_op_is_reduction(op) ? "; ptr dev" : "");
        HKB_TRY(hkb_report_add(&row), fail);
    }
    hkb_where("%s", "");
    return 0;
fail:
    return -1;
}

static int p2_one(hkb_lane_t *lane, const bufs_t *b, hkb_prec_t prec, int64_t n, int quick)
{
    int warm = 2, reps = quick ? 7 : 21;
    size_t vec = (size_t)n * hkb_prec_size(prec);
    int64_t fit = b->cap * (int64_t)sizeof(double) / (int64_t)vec;
    work_t w = {lane, HKB_HK, HKB_AXPY, prec, n, b->x, b->y, vec, fit < 1024 ? (int)fit : 1024, 64};
    char ns[16];

    hkb_fmt_n(n, ns, sizeof ns);
    for (hkb_op_t op = 0; op < HKB_OP_COUNT; op++) {
        int nmodes = hkb_op_is_reduction(op) ? 2 : 1;
        for (int m = 0; m < nmodes; m++) {
            hk_pointer_mode_t mode = m ? HK_POINTER_MODE_DEVICE : HK_POINTER_MODE_HOST;
            double us[2], ms = 0.0, err = NAN;
            char name[24];
            hkb_row_t row;

            snprintf(name, sizeof name, "%s%s", hkb_op_name(op),
                     nmodes == 1 ? "" : (m ? "/dev" : "/host"));
            hkb_where("P2 %s %s n=%s", hkb_prec_name(prec), name, ns);
            HKB_TRY(hkb_lane_set_mode(lane, mode), fail);
            HKB_TRY(hkb_verify(lane, op, prec, n, b->x, b->y, b->w, b->r, &err), fail);
            for (int i = 0; i < 2; i++) {
                w.impl = i == 0 ? HKB_HK : HKB_CUBLAS;
                w.op = op;
                HKB_TRY(hkb_time_events(lane->stream, warm, reps, work_calls, &w, &ms), fail);
                us[i] = ms * 1e3 / w.batch;
            }
            hkb_row_set(&row, "P2", name, hkb_prec_name(prec), n, "us", us[0], us[1],
                        HKB_TARGET_RATIO_LE,
                        hkb_op_is_reduction(op) ? P2_TARGET_REDUCTION : P2_TARGET);
            row.err = err;
            snprintf(row.note, sizeof row.note, "ref = cuBLAS; %d sets rotated", w.sets);
            HKB_TRY(hkb_report_add(&row), fail);
        }
    }
    hkb_where("%s", "");
    return 0;
fail:
    return -1;
}

int hkb_fig_stream(hkb_lane_t *lane, const hkb_opts_t *o, int want_p1, int want_p2)
{
    static const int64_t p1_n[] = {INT64_C(1) << 26, INT64_C(1) << 28};
    static const int64_t p2_n[] = {INT64_C(1) << 16, INT64_C(1) << 20};
    /* --quick keeps 2^26 only: the 2^28 buffers alone take seconds to fill. */
    int p1_count = o->quick ? 1 : 2;
    int64_t cap = want_p1 ? p1_n[p1_count - 1] : INT64_C(1) << 25;
    bufs_t b = {0};
    int rc = -1;

    hkb_where("P1/P2 buffers");
    HKB_TRY(bufs_alloc(&b, cap), out);
    HKB_TRY(hkb_lane_set_alpha(lane, BENCH_ALPHA), out);
    if (want_p1) {
        HKB_TRY(hkb_lane_set_mode(lane, HK_POINTER_MODE_DEVICE), out);
        for (hkb_prec_t prec = 0; prec < HKB_PREC_COUNT; prec++) {
            HKB_TRY(fill(&b, prec), out);
            for (int i = 0; i < p1_count; i++)
                HKB_TRY(p1_one(lane, &b, prec, p1_n[i], o->quick), out);
        }
    }
    if (want_p2) {
        for (hkb_prec_t prec = 0; prec < HKB_PREC_COUNT; prec++) {
            HKB_TRY(fill(&b, prec), out);
            for (int i = 0; i < 2; i++)
                HKB_TRY(p2_one(lane, &b, prec, p2_n[i], o->quick), out);
        }
    }
    rc = 0;
out:
    if (lane->stream)
        (void)hkb__cuda_ok(cudaStreamSynchronize(lane->stream), "cudaStreamSynchronize", __FILE__,
                           __LINE__);
    bufs_free(&b);
    return rc;
}
