/* hk-bench: P10, the host cost of a launch through hk.kernels/1 against a
 * raw cuLaunchKernel of the same CUfunction.
 *
 * The bench's embedded fatbin (the hk-cuda kernels) is loaded through the
 * table on the lane's handle; saxpy's parameters, grid and block come from
 * hkb_raw_prepare (P3's raw launch, device pointer mode), so both sides
 * launch the same kernel with the same arguments on the same stream. The
 * raw side launches the function the table itself launches in this context
 * (get_function), so the difference is what the table adds: the handle and
 * kernel checks, the dimension checks, the context guard, the in-flight count
 * and the per-context function look-up. Only the host clock around a batch of
 * enqueues counts; batches stay below the launch queue's depth and the
 * stream drains between them, outside the timed region. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hk_kernels.h"
#include "hkb.h"

#define P10_TARGET 1.05
#define P10_BATCH 256
#define P10_N (INT64_C(1) << 12)

extern const unsigned char hk__bench_fatbin[];
extern const unsigned char hk__bench_fatbin_end[];

/* Host nanoseconds per launch over one batch: raw (table NULL) or through
 * the table. The stream is idle before the clock starts. */
static int batch_ns(hkb_lane_t *lane, hkb_raw_t *r, const hk_kernels_v1_t *table,
                    hk_kernel_t *k, double *ns)
{
    HKB_CUDA(cudaStreamSynchronize(lane->stream), fail);
    double t0 = hkb_now_ns();
    for (int i = 0; i < P10_BATCH; i++) {
        if (!table)
            HKB_TRY(hkb_raw_launch(r, lane->stream), fail);
        else
            HKB_TRY(hkb_hk_ok(lane->plug, lane->hk,
                              table->launch(lane->hk, k, r->grid, 1, 1, 256, 1, 1, 0, r->params),
                              "hk.kernels/1 launch"),
                    fail);
    }
    *ns = (hkb_now_ns() - t0) / P10_BATCH;
    return 0;
fail:
    return -1;
}

/* y := y + alpha x through the table must give the raw launch's result. */
static int check_same(hkb_lane_t *lane, hkb_raw_t *r, const hk_kernels_v1_t *table,
                      hk_kernel_t *k, void *y)
{
    static float got[P10_N], want[P10_N];
    HKB_TRY(hkb_fill_random(y, HKB_F32, P10_N, 7), fail);
    HKB_TRY(hkb_raw_launch(r, lane->stream), fail);
    HKB_CUDA(cudaStreamSynchronize(lane->stream), fail);
    HKB_CUDA(cudaMemcpy(want, y, sizeof want, cudaMemcpyDeviceToHost), fail);
    HKB_TRY(hkb_fill_random(y, HKB_F32, P10_N, 7), fail);
    HKB_TRY(hkb_hk_ok(lane->plug, lane->hk,
                      table->launch(lane->hk, k, r->grid, 1, 1, 256, 1, 1, 0, r->params),
                      "hk.kernels/1 launch"),
            fail);
    HKB_CUDA(cudaStreamSynchronize(lane->stream), fail);
    HKB_CUDA(cudaMemcpy(got, y, sizeof got, cudaMemcpyDeviceToHost), fail);
    if (memcmp(got, want, sizeof got) != 0)
        return hkb_fail("P10: the table's launch and the raw launch give different results");
    return 0;
fail:
    return -1;
}

int hkb_fig_kernels(hkb_lane_t *lane, const hkb_opts_t *o)
{
    int reps = o->quick ? 11 : 41, sms = 0, rc = -1;
    unsigned char *x = NULL, *y = NULL;
    hkb_raw_scratch_t s = {0};
    hk_kernels_v1_t table;
    const void *t = NULL;
    hk_library_t *lib = NULL;
    hk_kernel_t *k = NULL;
    void *fn = NULL;
    hkb_raw_t r;

    hkb_where("P10 set-up");
    memset(&table, 0, sizeof table);
    if (!lane->plug->vt.get_table ||
        lane->plug->vt.get_table(HK_TABLE_KERNELS_V1, &t) != HK_STATUS_OK || !t)
        return hkb_fail("the plugin offers no %s table", HK_TABLE_KERNELS_V1);
    memcpy(&table, t, *(const size_t *)t < sizeof table ? *(const size_t *)t : sizeof table);
    if (!table.load || !table.unload || !table.get_kernel || !table.launch ||
        !table.get_function)
        return hkb_fail("the plugin's %s table lacks a slot P10 needs", HK_TABLE_KERNELS_V1);
    HKB_TRY(hkb_raw_init(), out);
    HKB_CUDA(cudaSetDevice(lane->device), out);
    HKB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, lane->device), out);
    HKB_CUDA(cudaMalloc((void **)&x, P10_N * sizeof(float)), out);
    HKB_CUDA(cudaMalloc((void **)&y, P10_N * sizeof(float)), out);
    HKB_TRY(hkb_fill_random(x, HKB_F32, P10_N, 3), out);
    HKB_TRY(hkb_raw_scratch_alloc(&s, lane->alpha_f, lane->alpha_d), out);
    HKB_TRY(hkb_hk_ok(lane->plug, lane->hk,
                      table.load(lane->hk, hk__bench_fatbin,
                                 (size_t)(hk__bench_fatbin_end - hk__bench_fatbin), &lib),
                      "hk.kernels/1 load"),
            out);
    HKB_TRY(hkb_hk_ok(lane->plug, lane->hk, table.get_kernel(lane->hk, lib, "hk_saxpy_kernel", &k),
                      "hk.kernels/1 get_kernel"),
            out);
    HKB_TRY(hkb_hk_ok(lane->plug, lane->hk, table.get_function(lane->hk, k, &fn),
                      "hk.kernels/1 get_function"),
            out);
    HKB_TRY(hkb_raw_prepare(&r, HKB_AXPY, HKB_F32, P10_N, x, y, &s, sms, lane->alpha_f,
                            lane->alpha_d),
            out);
    r.fn = fn; /* the very function the table launches in this context */
    HKB_TRY(check_same(lane, &r, &table, k, y), out);

    double tm[2][64], med[2];
    hkb_where("P10 launch f32");
    for (int i = 0; i < reps + 2; i++) /* interleaved; two warm-up batches */
        for (int impl = 0; impl < 2; impl++) {
            double ns = 0.0;
            HKB_TRY(batch_ns(lane, &r, impl ? &table : NULL, k, &ns), out);
            if (i >= 2)
                tm[impl][i - 2] = ns;
        }
    for (int impl = 0; impl < 2; impl++)
        med[impl] = hkb_median(tm[impl], (size_t)reps);
    hkb_row_t row;
    hkb_row_set(&row, "P10", "launch", "f32", P10_N, "ns", med[1], med[0], HKB_TARGET_RATIO_LE,
                P10_TARGET);
    row.cublas = NAN;
    row.err = NAN;
    snprintf(row.note, sizeof row.note, "hk.kernels %+.0f ns vs raw, same fn", med[1] - med[0]);
    HKB_TRY(hkb_report_add(&row), out);
    hkb_where("%s", "");
    rc = 0;
out:
    (void)hkb__cuda_ok(cudaStreamSynchronize(lane->stream), "cudaStreamSynchronize", __FILE__,
                       __LINE__);
    if (lib && table.unload(lane->hk, lib) != HK_STATUS_OK && rc == 0)
        rc = hkb_fail("hk.kernels/1 unload: %s", lane->plug->vt.last_error(lane->hk));
    hkb_raw_scratch_free(&s);
    if (x)
        (void)hkb__cuda_ok(cudaFree(x), "cudaFree", __FILE__, __LINE__);
    if (y)
        (void)hkb__cuda_ok(cudaFree(y), "cudaFree", __FILE__, __LINE__);
    return rc;
}
