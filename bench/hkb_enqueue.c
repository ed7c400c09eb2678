/* hk-bench: P3, the host cost of enqueueing one op call, against a raw
 * cuLaunchKernel of the very kernel hk-cuda launches (hkb_raw.c), against the
 * same launch as hk-cuda makes it (cuLaunchKernelEx, programmatic
 * serialization allowed) and against cuBLAS.
 *
 * Only the host clock around the enqueue loop counts. Batches of 256 calls
 * stay below the launch queue's depth, so no call waits for the GPU; the
 * stream drains between batches, outside the timed region. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hkb.h"

#define P3_TARGET 1.05
#define P3_BATCH 256
#define P3_N (INT64_C(1) << 12)

/* Host nanoseconds per call over one batch of P3_BATCH calls through impl
 * (0 raw cuLaunchKernel, 1 hk, 2 cuBLAS, 3 raw launch as hk-cuda makes it).
 * The stream is idle before the clock starts. */
static int batch_ns(hkb_lane_t *lane, hkb_raw_t *r, int impl, hkb_op_t op, hkb_prec_t prec,
                    const void *x, void *y, double *ns)
{
    double t0, t1;

    HKB_CUDA(cudaStreamSynchronize(lane->stream), fail);
    t0 = hkb_now_ns();
    for (int i = 0; i < P3_BATCH; i++) {
        if (impl == 0)
            HKB_TRY(hkb_raw_launch(r, lane->stream), fail);
        else if (impl == 3)
            HKB_TRY(hkb_raw_launch_pdl(r, lane->stream), fail);
        else
            HKB_TRY(hkb_call(lane, impl == 1 ? HKB_HK : HKB_CUBLAS, op, prec, P3_N, x, y), fail);
    }
    t1 = hkb_now_ns();
    *ns = (t1 - t0) / P3_BATCH;
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

int hkb_fig_enqueue(hkb_lane_t *lane, const hkb_opts_t *o)
{
    int reps = o->quick ? 11 : 41, sms = 0, rc = -1;
    size_t vec_bytes = (size_t)P3_N * sizeof(double);
    unsigned char *x = NULL, *y = NULL, *w = NULL, *v = NULL;
    hkb_raw_scratch_t s = {0};

    hkb_where("P3 set-up");
    HKB_TRY(hkb_raw_init(), out);
    HKB_CUDA(cudaSetDevice(lane->device), out);
    HKB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, lane->device), out);
    HKB_CUDA(cudaMalloc((void **)&x, vec_bytes), out);
    HKB_CUDA(cudaMalloc((void **)&y, vec_bytes), out);
    HKB_CUDA(cudaMalloc((void **)&w, vec_bytes), out);
    HKB_CUDA(cudaMalloc((void **)&v, vec_bytes), out);
    HKB_TRY(hkb_raw_scratch_alloc(&s, lane->alpha_f, lane->alpha_d), out);
    HKB_TRY(hkb_lane_set_mode(lane, HK_POINTER_MODE_DEVICE), out);

    for (hkb_prec_t prec = 0; prec < HKB_PREC_COUNT; prec++) {
        HKB_TRY(hkb_fill_random(x, prec, P3_N, 3), out);
        HKB_TRY(hkb_fill_random(y, prec, P3_N, 4), out);
        for (hkb_op_t op = 0; op < HKB_OP_COUNT; op++) {
            double t[4][64], med[4], err = NAN;
            hkb_raw_t r;
            hkb_row_t row;

            hkb_where("P3 %s %s", hkb_prec_name(prec), hkb_op_name(op));
            HKB_TRY(hkb_raw_prepare(&r, op, prec, P3_N, x, y, &s, sms, lane->alpha_f,
                                    lane->alpha_d),
                    out);
            HKB_TRY(raw_check(lane, &r, &s), out);
            HKB_TRY(hkb_verify(lane, op, prec, P3_N, x, y, w, v, &err), out);
            /* Interleaved, so that drift of clocks or of the machine hits the
             * three implementations alike. */
            for (int i = 0; i < reps + 2; i++)
                for (int impl = 0; impl < 4; impl++) {
                    double ns = 0.0;
                    HKB_TRY(batch_ns(lane, &r, impl, op, prec, x, y, &ns), out);
                    if (i >= 2) /* two warm-up batches */
                        t[impl][i - 2] = ns;
                }
            for (int impl = 0; impl < 4; impl++)
                med[impl] = hkb_median(t[impl], (size_t)reps);
            hkb_row_set(&row, "P3", hkb_op_name(op), hkb_prec_name(prec), P3_N, "ns", med[1],
                        med[0], HKB_TARGET_RATIO_LE, P3_TARGET);
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
    (void)hkb__cuda_ok(cudaStreamSynchronize(lane->stream), "cudaStreamSynchronize", __FILE__,
                       __LINE__);
    hkb_raw_scratch_free(&s);
    unsigned char *bufs[4] = {x, y, w, v};
    for (int i = 0; i < 4; i++)
        if (bufs[i])
            (void)hkb__cuda_ok(cudaFree(bufs[i]), "cudaFree", __FILE__, __LINE__);
    return rc;
}
