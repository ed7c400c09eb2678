/* hk-bench: P3, the host cost of enqueueing one op call, against a raw
 * cuLaunchKernel of the very kernel hk-cuda launches (hkb_raw.c), against the
 * same launch as hk-cuda makes it (cuLaunchKernelEx, programmatic
 * serialization allowed) and against cuBLAS; and the method P9 (hkb_swap.c)
 * shares with it.
 *
 * Only the host clock around the enqueue loop counts. Batches of
 * HKB_ENQ_BATCH calls stay below the launch queue's depth, so no call waits
 * for the GPU; the stream drains between batches, outside the timed region.
 * The implementations compared are interleaved batch by batch, so that drift
 * of clocks or of the machine hits them alike, and each gets the median of
 * its batches. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hkb.h"

#define P3_TARGET 1.05

/* Host nanoseconds per call over one batch of HKB_ENQ_BATCH calls of one
 * implementation. The stream is idle before the clock starts. */
static int batch_ns(const hkb_enq_impl_t *impl, hkb_raw_t *r, hkb_op_t op, hkb_prec_t prec,
                    const void *x, void *y, double *ns)
{
    hkb_lane_t *lane = impl->lane;
    double t0, t1;

    HKB_CUDA(cudaStreamSynchronize(lane->stream), fail);
    t0 = hkb_now_ns();
    for (int i = 0; i < HKB_ENQ_BATCH; i++) {
        if (impl->raw == HKB_ENQ_RAW)
            HKB_TRY(hkb_raw_launch(r, lane->stream), fail);
        else if (impl->raw == HKB_ENQ_RAW_PDL)
            HKB_TRY(hkb_raw_launch_pdl(r, lane->stream), fail);
        else
            HKB_TRY(hkb_call(lane, impl->impl, op, prec, HKB_ENQ_N, x, y), fail);
    }
    t1 = hkb_now_ns();
    *ns = (t1 - t0) / HKB_ENQ_BATCH;
    return 0;
fail:
    return -1;
}

/* Checks that the raw launch is a working launch of the kernel: it must run,
 * and a reduction must give cuBLAS's result (hkb_verify compares hk itself). */
static int raw_check(hkb_lane_t *lane, hkb_raw_t *r, const hkb_raw_scratch_t *s)
{
    double got = 0.0, want = 0.0;
    int rc = -1;

    HKB_TRY(hkb_raw_launch(r, lane->stream), fail);
    HKB_CUDA(cudaStreamSynchronize(lane->stream), fail);
    if (!hkb_op_is_reduction(r->op))
        return 0;
    HKB_CUBLAS(cublasSetPointerMode(lane->cublas, CUBLAS_POINTER_MODE_HOST), restore);
    if (r->prec == HKB_F32) {
        float g = 0.0f, w = 0.0f;
        HKB_CUDA(cudaMemcpy(&g, s->result, sizeof g, cudaMemcpyDeviceToHost), restore);
        if (r->op == HKB_DOT)
            HKB_CUBLAS(cublasSdot_64(lane->cublas, r->n, r->x, 1, r->y, 1, &w), restore);
        else
            HKB_CUBLAS(cublasSnrm2_64(lane->cublas, r->n, r->x, 1, &w), restore);
        got = g;
        want = w;
    } else {
        HKB_CUDA(cudaMemcpy(&got, s->result, sizeof got, cudaMemcpyDeviceToHost), restore);
        if (r->op == HKB_DOT)
            HKB_CUBLAS(cublasDdot_64(lane->cublas, r->n, r->x, 1, r->y, 1, &want), restore);
        else
            HKB_CUBLAS(cublasDnrm2_64(lane->cublas, r->n, r->x, 1, &want), restore);
    }
    if (!(fabs(got - want) <= 1e-4 * fabs(want))) {
        hkb_fail("raw launch of the kernel gave %.9g, cuBLAS %.9g: the bench's launch "
                 "parameters no longer match kernels/hk_blas1*.cu", got, want);
        goto restore;
    }
    rc = 0;
restore:
    if (hkb_lane_set_mode(lane, HK_POINTER_MODE_DEVICE) != 0)
        rc = -1;
    return rc;
fail:
    return -1;
}

int hkb_enq_setup(hkb_lane_t *lane, const hkb_opts_t *o, hkb_enq_t *e)
{
    size_t vec_bytes = (size_t)HKB_ENQ_N * sizeof(double);

    memset(e, 0, sizeof *e);
    e->reps = o->quick ? 11 : 41;
    HKB_TRY(hkb_raw_init(), fail);
    HKB_CUDA(cudaSetDevice(lane->device), fail);
    HKB_CUDA(cudaDeviceGetAttribute(&e->sms, cudaDevAttrMultiProcessorCount, lane->device), fail);
    HKB_CUDA(cudaMalloc((void **)&e->x, vec_bytes), fail);
    HKB_CUDA(cudaMalloc((void **)&e->y, vec_bytes), fail);
    HKB_CUDA(cudaMalloc((void **)&e->w, vec_bytes), fail);
    HKB_CUDA(cudaMalloc((void **)&e->v, vec_bytes), fail);
    HKB_TRY(hkb_raw_scratch_alloc(&e->s, lane->alpha_f, lane->alpha_d), fail);
    HKB_TRY(hkb_lane_set_mode(lane, HK_POINTER_MODE_DEVICE), fail);
    return 0;
fail:
    return -1;
}

void hkb_enq_teardown(hkb_lane_t *lane, hkb_enq_t *e)
{
    (void)hkb__cuda_ok(cudaStreamSynchronize(lane->stream), "cudaStreamSynchronize", __FILE__,
                       __LINE__);
    hkb_raw_scratch_free(&e->s);
    unsigned char *bufs[4] = {e->x, e->y, e->w, e->v};
    for (int i = 0; i < 4; i++)
        if (bufs[i])
            (void)hkb__cuda_ok(cudaFree(bufs[i]), "cudaFree", __FILE__, __LINE__);
    memset(e, 0, sizeof *e);
}

int hkb_enq_fill(hkb_enq_t *e, hkb_prec_t prec)
{
    HKB_TRY(hkb_fill_random(e->x, prec, HKB_ENQ_N, 3), fail);
    HKB_TRY(hkb_fill_random(e->y, prec, HKB_ENQ_N, 4), fail);
    return 0;
fail:
    return -1;
}

int hkb_enq_prepare(hkb_lane_t *lane, hkb_enq_t *e, hkb_op_t op, hkb_prec_t prec, hkb_raw_t *r,
                    double *err)
{
    HKB_TRY(hkb_raw_prepare(r, op, prec, HKB_ENQ_N, e->x, e->y, &e->s, e->sms, lane->alpha_f,
                            lane->alpha_d),
            fail);
    HKB_TRY(raw_check(lane, r, &e->s), fail);
    HKB_TRY(hkb_verify(lane, op, prec, HKB_ENQ_N, e->x, e->y, e->w, e->v, err), fail);
    return 0;
fail:
    return -1;
}

int hkb_enq_medians(const hkb_enq_impl_t *impls, int n, hkb_raw_t *r, hkb_op_t op,
                    hkb_prec_t prec, const hkb_enq_t *e, double *med, double *diff)
{
    double t[HKB_ENQ_MAX_IMPLS][64];

    if (n > HKB_ENQ_MAX_IMPLS || e->reps > 64 || (diff && n < 2))
        return hkb_fail("hkb_enq_medians: %d implementations, %d repetitions: too many", n,
                        e->reps);
    for (int i = 0; i < e->reps + 2; i++)
        for (int j = 0; j < n; j++) {
            /* every other round in reverse order: no implementation always
             * runs right after the same other one */
            int k = (i & 1) ? n - 1 - j : j;
            double ns = 0.0;
            HKB_TRY(batch_ns(&impls[k], r, op, prec, e->x, e->y, &ns), fail);
            if (i >= 2) /* two warm-up batches */
                t[k][i - 2] = ns;
        }
    for (int i = 0; diff && i < e->reps; i++)
        diff[i] = t[n - 1][i] - t[n - 2][i];
    for (int k = 0; k < n; k++)
        med[k] = hkb_median(t[k], (size_t)e->reps);
    return 0;
fail:
    return -1;
}

int hkb_fig_enqueue(hkb_lane_t *lane, const hkb_opts_t *o)
{
    const hkb_enq_impl_t impls[4] = {{lane, HKB_ENQ_RAW, HKB_HK},
                                     {lane, 0, HKB_HK},
                                     {lane, 0, HKB_CUBLAS},
                                     {lane, HKB_ENQ_RAW_PDL, HKB_HK}};
    hkb_enq_t e;
    int rc = -1;

    hkb_where("P3 set-up");
    HKB_TRY(hkb_enq_setup(lane, o, &e), out);
    for (hkb_prec_t prec = 0; prec < HKB_PREC_COUNT; prec++) {
        HKB_TRY(hkb_enq_fill(&e, prec), out);
        for (hkb_op_t op = 0; op < HKB_OP_COUNT; op++) {
            double med[4], err = NAN;
            hkb_raw_t r;
            hkb_row_t row;

            hkb_where("P3 %s %s", hkb_prec_name(prec), hkb_op_name(op));
            HKB_TRY(hkb_enq_prepare(lane, &e, op, prec, &r, &err), out);
            HKB_TRY(hkb_enq_medians(impls, 4, &r, op, prec, &e, med, NULL), out);
            hkb_row_set(&row, "P3", hkb_op_name(op), hkb_prec_name(prec), HKB_ENQ_N, "ns",
                        med[1], med[0], HKB_TARGET_RATIO_LE, P3_TARGET);
            row.cublas = med[2] / med[0];
            row.err = err;
            /* hk-cuda launches allowing programmatic serialization, which
             * costs the driver less than a plain launch: its own overhead is
             * the difference from the same launch made raw. */
            snprintf(row.note, sizeof row.note, "hk %+.0f ns vs raw, %+.0f ns vs raw PDL; ptr dev",
                     med[1] - med[0], med[1] - med[3]);
            HKB_TRY(hkb_report_add(&row), out);
        }
    }
    hkb_where("%s", "");
    rc = 0;
out:
    hkb_enq_teardown(lane, &e);
    return rc;
}
