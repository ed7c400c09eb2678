/* Test double: hk-cpu with a wrong saxpy, so that a test can check that
 * hk-host run notices a wrong result and exits non-zero.
 *
 * Built from hk-cpu's own sources with its entry point renamed to
 * hk__cpu_entry (see tests/host/SConscript); this file supplies the real
 * entry point, which wraps hk-cpu's answer: another name, and a blas1 table
 * whose saxpy adds 1 to the first element it writes. */
#include <string.h>

#include "hk_blas1.h"

hk_status_t hk__cpu_entry(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans);

static const hk_vtable_t *inner;
static const hk_blas1_v1_t *inner_blas;
static hk_vtable_t vtable;
static hk_blas1_v1_t blas;

static hk_status_t wrong_saxpy(hk_handle_t *h, int64_t n, const float *alpha, const float *x,
                               int64_t incx, float *y, int64_t incy)
{
    hk_status_t st = inner_blas->saxpy(h, n, alpha, x, incx, y, incy);
    if (st == HK_STATUS_OK && n > 0)
        y[incy < 0 ? (1 - n) * incy : 0] += 1.0f;
    return st;
}

static hk_status_t wrong_get_table(const char *name, const void **table)
{
    hk_status_t st = inner->get_table(name, table);
    if (st == HK_STATUS_OK && strcmp(name, HK_TABLE_BLAS1_V1) == 0) {
        inner_blas = *table;
        blas = *inner_blas;
        blas.saxpy = wrong_saxpy;
        *table = &blas;
    }
    return st;
}

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans)
{
    hk_status_t st = hk__cpu_entry(req, ans);
    if (st != HK_STATUS_OK)
        return st;
    inner = ans->vtable;
    vtable = *inner;
    vtable.get_table = wrong_get_table;
    ans->vtable = &vtable;
    ans->name = "hk-wrong";
    return st;
}
