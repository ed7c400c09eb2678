/* Test doubles for hk-validate: hk-cpu with one defect each, chosen at build
 * time by HKV_BAD, so that test_validate can check that the validator fails
 * each of them on the right check and goes on with the others (and survives
 * a plugin that kills its parent or its process group).
 *
 * Built from hk-cpu's own sources with its entry point renamed to
 * hk__cpu_entry (see tests/validate/SConscript); this file supplies the real
 * entry point, which wraps hk-cpu's answer. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_blas1.h"
#include "hk_memory.h"
#include "hk_selfcheck.h"
#include "hk_trim.h"

#define HKV_BAD_CRASH 1      /* saxpy writes to an address nothing is mapped at */
#define HKV_BAD_OK_ON_NULL 2 /* every op returns OK for a NULL vector */
#define HKV_BAD_LONG_ANSWER 3 /* the answer is written whole, whatever its declared size */
#define HKV_BAD_HANG 4       /* sscal never returns */
#define HKV_BAD_NULL_SLOTS 5 /* not a defect: slots left NULL ("not supported") */
#define HKV_BAD_CREATE_CRASH 6 /* handle_create writes to an address nothing is mapped at */
#define HKV_BAD_CREATE_EXIT 7  /* handle_create calls exit(0) */
#define HKV_BAD_CREATE_HANG 8  /* handle_create never returns */
#define HKV_BAD_KILL_PARENT 9  /* sscal kills its parent process, then its process group */
#define HKV_BAD_CREATE_KILL_PARENT 10 /* handle_create does what sscal does in 9 */
#define HKV_BAD_TRIM_CRASH 11  /* offers hk.trim/1, whose trim writes to nowhere */
#define HKV_BAD_SELFCHECK_FAILS 12 /* offers hk.selfcheck/1, which always finds a wrong result */
#define HKV_BAD_SELFCHECK_BLIND 13 /* saxpy is wrong, and its hk.selfcheck/1 says OK */

#ifndef HKV_BAD
#error "build with -DHKV_BAD=1..13"
#endif

hk_status_t hk__cpu_entry(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans);

static const hk_vtable_t *inner;
static const hk_blas1_v1_t *inner_blas;
static hk_vtable_t vtable;
static hk_blas1_v1_t blas;
#if HKV_BAD == HKV_BAD_NULL_SLOTS
static hk_memory_v1_t mem;
#endif

#if HKV_BAD == HKV_BAD_CRASH || HKV_BAD == HKV_BAD_CREATE_CRASH || HKV_BAD == HKV_BAD_TRIM_CRASH
/* Loaded at run time, so the compiler cannot turn the store into a trap; not
 * NULL, so UndefinedBehaviorSanitizer lets the store happen. */
static float *volatile nowhere = (float *)16;
#endif

#if HKV_BAD == HKV_BAD_CRASH

static hk_status_t bad_saxpy(hk_handle_t *h, int64_t n, const float *alpha, const float *x,
                             int64_t incx, float *y, int64_t incy)
{
    if (n > 0) {
        /* A sanitizer's handler would turn the crash into an exit status. */
        signal(SIGSEGV, SIG_DFL);
        *nowhere = 1.0f;
    }
    return inner_blas->saxpy(h, n, alpha, x, incx, y, incy);
}
#elif HKV_BAD == HKV_BAD_OK_ON_NULL
#define OK_IF_NULL(p)                                                                  \
    do {                                                                               \
        if (!(p))                                                                      \
            return HK_STATUS_OK;                                                       \
    } while (0)
static hk_status_t bad_saxpy(hk_handle_t *h, int64_t n, const float *a, const float *x,
                             int64_t incx, float *y, int64_t incy)
{
    OK_IF_NULL(x);
    return inner_blas->saxpy(h, n, a, x, incx, y, incy);
}
static hk_status_t bad_daxpy(hk_handle_t *h, int64_t n, const double *a, const double *x,
                             int64_t incx, double *y, int64_t incy)
{
    OK_IF_NULL(x);
    return inner_blas->daxpy(h, n, a, x, incx, y, incy);
}
static hk_status_t bad_sscal(hk_handle_t *h, int64_t n, const float *a, float *x, int64_t incx)
{
    OK_IF_NULL(x);
    return inner_blas->sscal(h, n, a, x, incx);
}
static hk_status_t bad_dscal(hk_handle_t *h, int64_t n, const double *a, double *x, int64_t incx)
{
    OK_IF_NULL(x);
    return inner_blas->dscal(h, n, a, x, incx);
}
static hk_status_t bad_scopy(hk_handle_t *h, int64_t n, const float *x, int64_t incx, float *y,
                             int64_t incy)
{
    OK_IF_NULL(x);
    return inner_blas->scopy(h, n, x, incx, y, incy);
}
static hk_status_t bad_dcopy(hk_handle_t *h, int64_t n, const double *x, int64_t incx,
                             double *y, int64_t incy)
{
    OK_IF_NULL(x);
    return inner_blas->dcopy(h, n, x, incx, y, incy);
}
static hk_status_t bad_sdot(hk_handle_t *h, int64_t n, const float *x, int64_t incx,
                            const float *y, int64_t incy, float *r)
{
    OK_IF_NULL(x);
    return inner_blas->sdot(h, n, x, incx, y, incy, r);
}
static hk_status_t bad_ddot(hk_handle_t *h, int64_t n, const double *x, int64_t incx,
                            const double *y, int64_t incy, double *r)
{
    OK_IF_NULL(x);
    return inner_blas->ddot(h, n, x, incx, y, incy, r);
}
static hk_status_t bad_snrm2(hk_handle_t *h, int64_t n, const float *x, int64_t incx, float *r)
{
    OK_IF_NULL(x);
    return inner_blas->snrm2(h, n, x, incx, r);
}
static hk_status_t bad_dnrm2(hk_handle_t *h, int64_t n, const double *x, int64_t incx, double *r)
{
    OK_IF_NULL(x);
    return inner_blas->dnrm2(h, n, x, incx, r);
}
#elif HKV_BAD == HKV_BAD_HANG
static hk_status_t bad_sscal(hk_handle_t *h, int64_t n, const float *a, float *x, int64_t incx)
{
    (void)h, (void)n, (void)a, (void)x, (void)incx;
    for (;;)
        sleep(1);
    return HK_STATUS_OK;
}
#elif HKV_BAD == HKV_BAD_SELFCHECK_BLIND
static hk_status_t bad_saxpy(hk_handle_t *h, int64_t n, const float *alpha, const float *x,
                             int64_t incx, float *y, int64_t incy)
{
    hk_status_t st = inner_blas->saxpy(h, n, alpha, x, incx, y, incy);
    if (st == HK_STATUS_OK && n > 0)
        y[0] += 1.0f; /* hk-cpu's memory is host memory; y[0] is in every span */
    return st;
}
#elif HKV_BAD == HKV_BAD_KILL_PARENT
static hk_status_t bad_sscal(hk_handle_t *h, int64_t n, const float *a, float *x, int64_t incx)
{
    kill(getppid(), SIGKILL);
    kill(0, SIGKILL);
    return inner_blas->sscal(h, n, a, x, incx);
}
#endif

#if HKV_BAD >= HKV_BAD_CREATE_CRASH && HKV_BAD <= HKV_BAD_CREATE_KILL_PARENT && HKV_BAD != HKV_BAD_KILL_PARENT
#define HKV_BAD_CREATE 1
static hk_status_t bad_create(const hk_create_info_t *info, hk_handle_t **out)
{
#if HKV_BAD == HKV_BAD_CREATE_CRASH
    signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would turn it into an exit */
    *nowhere = 1.0f;
#elif HKV_BAD == HKV_BAD_CREATE_EXIT
    exit(0);
#elif HKV_BAD == HKV_BAD_CREATE_HANG
    for (;;)
        sleep(1);
#else
    kill(getppid(), SIGKILL);
    kill(0, SIGKILL);
#endif
    return inner->handle_create(info, out);
}
#endif

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static hk_status_t bad_get_table_locked(const char *name, const void **table);

/* [thread-safe] like every get_table: the wrapped tables are rebuilt under a
 * lock (the same contents every time). */
static hk_status_t bad_get_table(const char *name, const void **table)
{
    pthread_mutex_lock(&table_lock);
    hk_status_t st = bad_get_table_locked(name, table);
    pthread_mutex_unlock(&table_lock);
    return st;
}

#if HKV_BAD == HKV_BAD_TRIM_CRASH
static hk_status_t bad_trim(void)
{
    signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would turn it into an exit status */
    *nowhere = 1.0f;
    return HK_STATUS_OK;
}

static const hk_trim_v1_t trim_table = {sizeof(hk_trim_v1_t), bad_trim};
#endif

#if HKV_BAD == HKV_BAD_SELFCHECK_FAILS || HKV_BAD == HKV_BAD_SELFCHECK_BLIND
/* No workload at all: the verdict is the defect (12: a wrong result found
 * where there is none; 13: OK whatever saxpy computes). A handle that is not
 * live is still told apart, through hk-cpu's own check. */
static hk_status_t bad_selfcheck(hk_handle_t *h, char *why, size_t why_len)
{
    hk_pointer_mode_t mode;
    hk_status_t st = inner->get_pointer_mode(h, &mode);
    const char *text = "saxpy: y[3] is 0, expected 5";
    if (st == HK_STATUS_OK && HKV_BAD == HKV_BAD_SELFCHECK_BLIND)
        return HK_STATUS_OK;
    if (st == HK_STATUS_OK)
        st = HK_STATUS_INTERNAL;
    else
        text = "not a live hk-bad handle";
    if (why && why_len > 0)
        snprintf(why, why_len, "%s", text);
    return st;
}

static const hk_selfcheck_v1_t selfcheck_table = {sizeof(hk_selfcheck_v1_t), bad_selfcheck};
#endif

static hk_status_t bad_get_table_locked(const char *name, const void **table)
{
#if HKV_BAD == HKV_BAD_TRIM_CRASH
    if (name && table && strcmp(name, HK_TABLE_TRIM_V1) == 0) {
        *table = &trim_table;
        return HK_STATUS_OK;
    }
#elif HKV_BAD == HKV_BAD_SELFCHECK_FAILS || HKV_BAD == HKV_BAD_SELFCHECK_BLIND
    if (name && table && strcmp(name, HK_TABLE_SELFCHECK_V1) == 0) {
        *table = &selfcheck_table;
        return HK_STATUS_OK;
    }
#endif
    hk_status_t st = inner->get_table(name, table);
#if HKV_BAD == HKV_BAD_NULL_SLOTS
    static int mem_built;
    if (st == HK_STATUS_OK && strcmp(name, HK_TABLE_MEMORY_V1) == 0) {
        if (!mem_built) {
            mem = *(const hk_memory_v1_t *)*table;
            mem.memset_ = NULL;
            mem_built = 1;
        }
        *table = &mem;
    }
#endif
    if (st != HK_STATUS_OK || strcmp(name, HK_TABLE_BLAS1_V1) != 0)
        return st;
    if (inner_blas) { /* built already: the table others may be calling stays as it is */
        *table = &blas;
        return st;
    }
    inner_blas = *table;
    blas = *inner_blas;
#if HKV_BAD == HKV_BAD_CRASH || HKV_BAD == HKV_BAD_SELFCHECK_BLIND
    blas.saxpy = bad_saxpy;
#elif HKV_BAD == HKV_BAD_OK_ON_NULL
    blas.saxpy = bad_saxpy, blas.daxpy = bad_daxpy, blas.sscal = bad_sscal;
    blas.dscal = bad_dscal, blas.scopy = bad_scopy, blas.dcopy = bad_dcopy;
    blas.sdot = bad_sdot, blas.ddot = bad_ddot, blas.snrm2 = bad_snrm2, blas.dnrm2 = bad_dnrm2;
#elif HKV_BAD == HKV_BAD_HANG || HKV_BAD == HKV_BAD_KILL_PARENT
    blas.sscal = bad_sscal;
#elif HKV_BAD == HKV_BAD_NULL_SLOTS
    blas.sdot = NULL;
    blas.dnrm2 = NULL;
#endif
    *table = &blas;
    return st;
}

static pthread_mutex_t vtable_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans)
{
    hk_negotiate_answer_t full = {{HK_STRUCT_NEGOTIATE_ANSWER, sizeof full, 1}, 0, 0, NULL, NULL,
                                  NULL};
    hk_status_t st = hk__cpu_entry(req, ans ? &full : NULL);
    if (st != HK_STATUS_OK || !ans) {
        if (ans)
            hk_answer_write(ans, &full);
        return st;
    }
    /* The entry point is [thread-safe]: the wrapped vtable is built once. */
    pthread_mutex_lock(&vtable_lock);
    if (!inner) {
        vtable = *full.vtable;
        vtable.get_table = bad_get_table;
#ifdef HKV_BAD_CREATE
        vtable.handle_create = bad_create;
#endif
#if HKV_BAD == HKV_BAD_NULL_SLOTS
        vtable.synchronize = NULL;
        vtable.handle_info = NULL;
#endif
        inner = full.vtable;
    }
    pthread_mutex_unlock(&vtable_lock);
    full.vtable = &vtable;
    full.name = "hk-bad";
#if HKV_BAD == HKV_BAD_LONG_ANSWER
    memcpy(ans, &full, sizeof full); /* the defect: the host's declared size is ignored */
#else
    hk_answer_write(ans, &full);
#endif
    return st;
}
