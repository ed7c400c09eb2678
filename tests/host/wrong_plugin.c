/* Test doubles for hk-host: hk-cpu wrapped to misbehave in one way each, so
 * that a test can check how hk-host run and list cope.
 *
 * Built from hk-cpu's own sources with its entry point renamed to
 * hk__cpu_entry (see tests/host/SConscript); this file supplies the real
 * entry point, which wraps hk-cpu's answer. One source, three builds:
 *   (no macro)           hk-wrong: a blas1 table whose saxpy adds 1 to the
 *                        first element it writes (a wrong result)
 *   HK_TEST_MISSING      hk-missing: a legal plugin that lacks slots: no
 *                        set_pointer_mode in its vtable, no sscal and no sdot
 *                        in its blas1 table, and a blas1 table declared
 *                        short, without snrm2 and dnrm2 (though its storage
 *                        fills them: only the size says they are absent)
 *   HK_TEST_EVIL_NAME    a name and version with control characters, as a
 *                        hostile plugin could answer
 *   HK_TEST_TWIN=VERSION hk-twin: hk-cpu unchanged under another name and the
 *                        given version, built twice to sit side by side
 *   HK_TEST_LATIN1_NAME  a name that is not UTF-8: "hk-caf" and the Latin-1 byte
 *                        0xe9 */
#include <stddef.h>
#include <string.h>

#include "hk_blas1.h"

hk_status_t hk__cpu_entry(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans);

static const hk_vtable_t *inner;
static const hk_blas1_v1_t *inner_blas;
static hk_vtable_t vtable;
static hk_blas1_v1_t blas;

#if !defined(HK_TEST_MISSING) && !defined(HK_TEST_EVIL_NAME) && !defined(HK_TEST_TWIN) &&   \
    !defined(HK_TEST_LATIN1_NAME)
#define HK_TEST_WRONG 1
static hk_status_t wrong_saxpy(hk_handle_t *h, int64_t n, const float *alpha, const float *x,
                               int64_t incx, float *y, int64_t incy)
{
    hk_status_t st = inner_blas->saxpy(h, n, alpha, x, incx, y, incy);
    if (st == HK_STATUS_OK && n > 0)
        y[incy < 0 ? (1 - n) * incy : 0] += 1.0f;
    return st;
}
#endif

static hk_status_t wrap_get_table(const char *name, const void **table)
{
    hk_status_t st = inner->get_table(name, table);
    if (st == HK_STATUS_OK && strcmp(name, HK_TABLE_BLAS1_V1) == 0) {
        inner_blas = *table;
        blas = *inner_blas;
#ifdef HK_TEST_WRONG
        blas.saxpy = wrong_saxpy;
#endif
#ifdef HK_TEST_MISSING
        blas.sscal = NULL;
        blas.sdot = NULL;
        blas.size = offsetof(hk_blas1_v1_t, snrm2);
#endif
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
    vtable.get_table = wrap_get_table;
    ans->vtable = &vtable;
#ifdef HK_TEST_WRONG
    ans->name = "hk-wrong";
#endif
#ifdef HK_TEST_MISSING
    vtable.set_pointer_mode = NULL;
    ans->name = "hk-missing";
#endif
#ifdef HK_TEST_TWIN
    ans->name = "hk-twin";
    ans->version = HK_TEST_TWIN;
#endif
#ifdef HK_TEST_EVIL_NAME
    /* Control characters but no line break: the loader's probe refuses an
     * answer whose strings span lines before any host sees them. */
    ans->name = "hk-\x1b[31mevil\a\tname";
    ans->version = "1.0\x7f";
#endif
#ifdef HK_TEST_LATIN1_NAME
    ans->name = "hk-caf\xe9";
#endif
    return st;
}
