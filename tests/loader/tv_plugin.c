/* Swap candidates that load and negotiate like hk-cpu (its own sources,
 * their entry point renamed to tv__cpu_inner, see tests/loader/SConscript)
 * but misbehave once a swap verifies them, by macros:
 *   TV_CREATE=1     handle_create crashes (SIGSEGV)
 *   TV_SAXPY=1..3   saxpy, which the verification workload calls, 1 crashes,
 *                   2 calls exit(3), 3 hangs
 *   TV_TRIM=1..3    it offers hk.trim/1 (hk-cpu has none), whose trim does
 *                   the same: a host calls it before it closes the module
 * The answer names "hk-cpu" with version TV_VERSION. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_blas1.h"
#include "hk_trim.h"

#ifndef TV_VERSION
#define TV_VERSION "1.0.9"
#endif

hk_status_t tv__cpu_inner(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans);

static const hk_vtable_t *inner;
static const hk_blas1_v1_t *inner_blas;
static hk_vtable_t vtable;
static hk_blas1_v1_t blas;

__attribute__((unused)) static void tv_misbehave(int how)
{
    if (how == 1) {
        *(volatile int *)(uintptr_t)16 = 1;
        raise(SIGSEGV); /* should the store not fault */
    } else if (how == 2) {
        exit(3);
    } else if (how == 3) {
        for (;;)
            pause();
    }
}

static hk_status_t tv_create(const hk_create_info_t *info, hk_handle_t **out)
{
#ifdef TV_CREATE
    tv_misbehave(TV_CREATE);
#endif
    return inner->handle_create(info, out);
}

static hk_status_t tv_saxpy(hk_handle_t *h, int64_t n, const float *alpha, const float *x,
                            int64_t incx, float *y, int64_t incy)
{
#ifdef TV_SAXPY
    tv_misbehave(TV_SAXPY);
#endif
    return inner_blas->saxpy(h, n, alpha, x, incx, y, incy);
}

#ifdef TV_TRIM
static hk_status_t tv_trim(void)
{
    tv_misbehave(TV_TRIM);
    return HK_STATUS_OK;
}

static const hk_trim_v1_t trim_table = {sizeof(hk_trim_v1_t), tv_trim};
#endif

static hk_status_t tv_get_table(const char *name, const void **table)
{
#ifdef TV_TRIM
    if (name && table && strcmp(name, HK_TABLE_TRIM_V1) == 0) {
        *table = &trim_table;
        return HK_STATUS_OK;
    }
#endif
    hk_status_t st = inner->get_table(name, table);
    if (st == HK_STATUS_OK && name && strcmp(name, HK_TABLE_BLAS1_V1) == 0) {
        inner_blas = *table;
        blas = *inner_blas;
        blas.saxpy = tv_saxpy;
        *table = &blas;
    }
    return st;
}

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans)
{
    hk_status_t st = tv__cpu_inner(req, ans);
    if (st != HK_STATUS_OK)
        return st;
    inner = ans->vtable;
    vtable = *inner;
    vtable.handle_create = tv_create;
    vtable.get_table = tv_get_table;
    ans->vtable = &vtable;
    ans->version = TV_VERSION;
    return st;
}
