/* One source for the ABI compatibility test plugins (test_loader_compat.c).
 * Each build defines a few TC_* macros (tests/loader/SConscript):
 *
 *   TC_NAME                 the answer's name
 *   TC_ABI_MAX              the highest ABI version the build serves
 *   TC_VTABLE_SIZE          overrides vtable->size (a 1.1 build declares the
 *                           1.1 size; its last_error_copy slot is filled all
 *                           the same, so only the size keeps a host from it)
 *   TC_FLAGS                HK_PLUGIN_* flags of the answer
 *   TC_TABLES               serves the malformed and odd tables below
 *
 * Every build's last_error and last_error_copy say which slot answered, so a
 * test can tell whether a host called one or fell back to the other. */
#include <stdlib.h>
#include <string.h>

#include "hk_abi.h"
#include "hk_blas1.h"
#include "hk_memory.h"

#ifndef TC_NAME
#define TC_NAME "tc-plugin"
#endif
#ifndef TC_ABI_MAX
#define TC_ABI_MAX HK_ABI_CURRENT
#endif
#ifndef TC_FLAGS
#define TC_FLAGS 0u
#endif

#define TC_EXPORT __attribute__((visibility("default")))

struct hk_handle {
    hk_pointer_mode_t mode;
};

#define TP_HANDLE_NAME TC_NAME
#include "tp_handle.h"

static const char *tc_last_error(const hk_handle_t *h)
{
    (void)h;
    return TC_NAME " last_error";
}

static hk_status_t tc_last_error_copy(const hk_handle_t *h, char *buf, size_t len,
                                      size_t *needed)
{
    static const char msg[] = TC_NAME " last_error_copy";
    (void)h;
    if (needed)
        *needed = 0;
    if (!buf && len > 0)
        return HK_STATUS_NULL_POINTER;
    if (len > 0) {
        size_t k = sizeof msg - 1 < len - 1 ? sizeof msg - 1 : len - 1;
        memcpy(buf, msg, k);
        buf[k] = '\0';
    }
    if (needed)
        *needed = sizeof msg;
    return HK_STATUS_OK;
}

#ifdef TC_TABLES
/* A blas1 table longer than the host's (one slot more), a memory table
 * shorter (alloc and free_ only), and tables whose size fields are corrupt. */
static unsigned tc_saxpy_calls;

static hk_status_t tc_saxpy(hk_handle_t *h, int64_t n, const float *alpha, const float *x,
                            int64_t incx, float *y, int64_t incy)
{
    (void)h, (void)n, (void)alpha, (void)x, (void)incx, (void)y, (void)incy;
    tc_saxpy_calls++;
    return HK_STATUS_OK;
}

static hk_status_t tc_sscal(hk_handle_t *h, int64_t n, const float *alpha, float *x,
                            int64_t incx)
{
    (void)h, (void)n, (void)alpha, (void)x, (void)incx;
    return HK_STATUS_OK;
}

/* The extra slot: the number of saxpy calls, so a test can see its call land. */
static unsigned tc_calls(void)
{
    return tc_saxpy_calls;
}

static const struct {
    hk_blas1_v1_t blas;
    unsigned (*calls)(void);
} tc_blas_long = {
    .blas = {.size = sizeof(tc_blas_long), .saxpy = tc_saxpy, .sscal = tc_sscal},
    .calls = tc_calls,
};

static hk_status_t tc_alloc(hk_handle_t *h, size_t bytes, void **out)
{
    (void)h, (void)bytes;
    *out = NULL;
    return HK_STATUS_OK;
}

static hk_status_t tc_free(hk_handle_t *h, void *p)
{
    (void)h, (void)p;
    return HK_STATUS_OK;
}

static hk_status_t tc_memset(hk_handle_t *h, void *dst, int value, size_t bytes)
{
    (void)h, (void)dst, (void)value, (void)bytes;
    return HK_STATUS_INTERNAL;
}

/* Declares the memory table cut after free_, though it fills memset_: the
 * size field alone must keep a host from the slots past it. */
static const hk_memory_v1_t tc_memory_short = {
    .size = offsetof(hk_memory_v1_t, copy_to_device),
    .alloc = tc_alloc,
    .free_ = tc_free,
    .memset_ = tc_memset,
};

static const size_t tc_tiny = 4;                           /* below sizeof(size_t) */
static const size_t tc_huge = (size_t)1 << 20;             /* "1 MiB table": corrupt */
#endif

static hk_status_t tc_get_table(const char *name, const void **table)
{
    if (!name || !table)
        return HK_STATUS_NULL_POINTER;
    *table = NULL;
#ifdef TC_TABLES
    if (strcmp(name, HK_TABLE_BLAS1_V1) == 0)
        *table = &tc_blas_long;
    else if (strcmp(name, HK_TABLE_MEMORY_V1) == 0)
        *table = &tc_memory_short;
    else if (strcmp(name, "tc.tiny/1") == 0)
        *table = &tc_tiny;
    else if (strcmp(name, "tc.huge/1") == 0)
        *table = &tc_huge;
    else if (strcmp(name, "tc.null/1") == 0)
        return HK_STATUS_OK; /* OK with a NULL table: malformed */
    else if (strcmp(name, "tc.fail/1") == 0)
        return HK_STATUS_INTERNAL;
#endif
    return *table ? HK_STATUS_OK : HK_STATUS_NOT_FOUND;
}

static const hk_vtable_t tc_vtable = {
#ifdef TC_VTABLE_SIZE
    .size = TC_VTABLE_SIZE,
#else
    .size = sizeof(hk_vtable_t),
#endif
    .handle_create = tp_handle_create,
    .handle_destroy = tp_handle_destroy,
    .set_pointer_mode = tp_set_pointer_mode,
    .last_error = tc_last_error,
    .get_table = tc_get_table,
    .handle_info = tp_handle_info,
    .last_error_copy = tc_last_error_copy,
};

TC_EXPORT hk_status_t hk_plugin_negotiate(const hk_negotiate_request_t *req,
                                          hk_negotiate_answer_t *ans);
TC_EXPORT hk_status_t hk_plugin_negotiate(const hk_negotiate_request_t *req,
                                          hk_negotiate_answer_t *ans)
{
    if (!req || !ans)
        return HK_STATUS_NULL_POINTER;
    hk_negotiate_answer_t a = {{HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1}, TC_ABI_MAX, 0u,
                               TC_NAME, "1.0.0", &tc_vtable};
    uint32_t v = req->abi_max < TC_ABI_MAX ? req->abi_max : TC_ABI_MAX;
    if (HK_ABI_VERSION_MAJOR(req->abi_max) != HK_ABI_MAJOR || v < req->abi_min) {
        hk_answer_write(ans, &a);
        return HK_STATUS_ABI_MISMATCH;
    }
    a.abi_version = v;
    a.flags = TC_FLAGS; /* set whatever the version: the loader must clear what 1.1 lacks */
    hk_answer_write(ans, &a);
    return HK_STATUS_OK;
}
