/* hk-bench: P4, the cost of making and freeing a handle, hk-cuda against
 * cublasCreate/cublasDestroy on the same thread and device.
 *
 * "first" is the first handle of the process; it must run before anything
 * else makes an hk handle, so main runs P4 first. The runtime's primary
 * context exists already (main made it): its birth is neither library's cost.
 * "later" creates happen while another handle of the same library is alive,
 * as in an application that already uses the library; "alone" creates happen
 * with no other handle alive, where hk-cuda may load its kernels again. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hkb.h"

#define P4_FIRST_US 2000.0
#define P4_LATER_US 20.0
#define P4_DESTROY_US 20.0

static int hk_create(const hkb_plugin_t *p, hk_handle_t **h, double *us)
{
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};
    double t0 = hkb_now_ns();
    hk_status_t st = p->vt.handle_create(&ci, h);
    *us = (hkb_now_ns() - t0) / 1e3;
    return hkb_hk_ok(p, NULL, st, "handle_create");
}

static int hk_destroy(const hkb_plugin_t *p, hk_handle_t *h, double *us)
{
    double t0 = hkb_now_ns();
    hk_status_t st = p->vt.handle_destroy(h);
    *us = (hkb_now_ns() - t0) / 1e3;
    return hkb_hk_ok(p, NULL, st, "handle_destroy");
}

static int cb_create(cublasHandle_t *h, double *us)
{
    double t0 = hkb_now_ns();
    cublasStatus_t st = cublasCreate(h);
    *us = (hkb_now_ns() - t0) / 1e3;
    return hkb__cublas_ok(st, "cublasCreate", __FILE__, __LINE__);
}

static int cb_destroy(cublasHandle_t h, double *us)
{
    double t0 = hkb_now_ns();
    cublasStatus_t st = cublasDestroy(h);
    *us = (hkb_now_ns() - t0) / 1e3;
    return hkb__cublas_ok(st, "cublasDestroy", __FILE__, __LINE__);
}

static int add(const char *op, double hk, double ref, hkb_target_kind_t kind, double target,
               const char *note)
{
    hkb_row_t row;
    hkb_row_set(&row, "P4", op, "-", 0, "us", hk, ref, kind, target);
    snprintf(row.note, sizeof row.note, "%s", note);
    return hkb_report_add(&row);
}

int hkb_fig_handles(const hkb_plugin_t *p, const hkb_opts_t *o)
{
    enum { MAXR = 64 };
    int reps = o->quick ? 15 : MAXR, rc = -1;
    hk_handle_t *keep_hk = NULL, *h = NULL;
    cublasHandle_t keep_cb = NULL, c = NULL;
    double first[2], t[6][MAXR], m[6];

    hkb_where("P4");
    HKB_CUDA(cudaSetDevice(o->device), out);
    /* The first handle of each library is kept alive for the "later" loop. */
    HKB_TRY(hk_create(p, &keep_hk, &first[0]), out);
    HKB_TRY(cb_create(&keep_cb, &first[1]), out);
    HKB_TRY(add("create1st", first[0], first[1], HKB_TARGET_VALUE_LE, P4_FIRST_US,
                "ref = cublasCreate; first in process"), out);

    /* Rows of t: hk create, hk destroy, cuBLAS create, cuBLAS destroy, then
     * hk create and destroy with no other handle alive. */
    for (int i = 0; i < reps; i++) {
        HKB_TRY(hk_create(p, &h, &t[0][i]), out);
        /* A handle is gone after destroy, failed or not: never destroy twice. */
        hk_handle_t *dead = h;
        h = NULL;
        HKB_TRY(hk_destroy(p, dead, &t[1][i]), out);
        HKB_TRY(cb_create(&c, &t[2][i]), out);
        cublasHandle_t cdead = c;
        c = NULL;
        HKB_TRY(cb_destroy(cdead, &t[3][i]), out);
    }
    hk_handle_t *last = keep_hk;
    keep_hk = NULL;
    HKB_TRY(hk_destroy(p, last, &first[0]), out);
    for (int i = 0; i < reps; i++) {
        HKB_TRY(hk_create(p, &h, &t[4][i]), out);
        hk_handle_t *dead = h;
        h = NULL;
        HKB_TRY(hk_destroy(p, dead, &t[5][i]), out);
    }
    for (int k = 0; k < 6; k++)
        m[k] = hkb_median(t[k], (size_t)reps);
    HKB_TRY(add("create", m[0], m[2], HKB_TARGET_VALUE_LE, P4_LATER_US,
                "ref = cublasCreate; another handle alive"), out);
    HKB_TRY(add("destroy", m[1], m[3], HKB_TARGET_VALUE_LE, P4_DESTROY_US,
                "ref = cublasDestroy; another handle alive"), out);
    HKB_TRY(add("create0", m[4], m[2], HKB_TARGET_NONE, NAN, "no other hk handle alive"), out);
    HKB_TRY(add("destroy0", m[5], m[3], HKB_TARGET_NONE, NAN, "last hk handle of the process"),
            out);
    hkb_where("%s", "");
    rc = 0;
out:
    if (h)
        (void)hkb_hk_ok(p, NULL, p->vt.handle_destroy(h), "handle_destroy");
    if (keep_hk)
        (void)hkb_hk_ok(p, NULL, p->vt.handle_destroy(keep_hk), "handle_destroy");
    if (c)
        (void)hkb__cublas_ok(cublasDestroy(c), "cublasDestroy", __FILE__, __LINE__);
    if (keep_cb)
        (void)hkb__cublas_ok(cublasDestroy(keep_cb), "cublasDestroy", __FILE__, __LINE__);
    return rc;
}
