/* hk-prev: a plugin written against the previous ABI minor's headers (the
 * copy in v1.1/, as they were released, compiled without plugin_api/), as a
 * third party built it then: hk.blas1/1 and hk.memory/1 on host memory, the
 * core vtable of ABI 1.1, no memory-domain flags, no last_error_copy. The
 * loader, hk-host and hk-validate of today must take it as it is
 * (test_prev_abi.py). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_abi.h"
#include "hk_blas1.h"
#include "hk_memory.h"

#define PREV_MAGIC 0x70726576u

struct hk_handle {
    uint32_t magic;
    void *stream;
    hk_pointer_mode_t mode;
    char err[160];
};

static _Thread_local char prev_create_err[160];

static int live(const hk_handle_t *h)
{
    return h && h->magic == PREV_MAGIC;
}

static hk_status_t fail(hk_handle_t *h, hk_status_t st, const char *what)
{
    snprintf(h->err, sizeof h->err, "%s", what);
    return st;
}

/* ---- the core vtable (ABI 1.0 and 1.1) ---- */

static hk_status_t prev_create(const hk_create_info_t *info, hk_handle_t **out)
{
    if (!out)
        return HK_STATUS_NULL_POINTER;
    *out = NULL;
    if (info && info->size < 12) {
        snprintf(prev_create_err, sizeof prev_create_err, "create: info->size %u is below 12",
                 (unsigned)info->size);
        return HK_STATUS_INVALID_VALUE;
    }
    if (info && info->device != HK_DEVICE_CURRENT && info->device != -1) {
        snprintf(prev_create_err, sizeof prev_create_err,
                 "create: device %d: this plugin computes on the CPU only", (int)info->device);
        return HK_STATUS_INVALID_DEVICE;
    }
    hk_handle_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(prev_create_err, sizeof prev_create_err, "create: out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    h->magic = PREV_MAGIC;
    prev_create_err[0] = '\0';
    *out = h;
    return HK_STATUS_OK;
}

static hk_status_t prev_destroy(hk_handle_t *h)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    h->magic = 0;
    free(h);
    return HK_STATUS_OK;
}

static hk_status_t prev_set_stream(hk_handle_t *h, void *stream)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    h->stream = stream;
    return HK_STATUS_OK;
}

static hk_status_t prev_get_stream(hk_handle_t *h, void **stream)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!stream)
        return fail(h, HK_STATUS_NULL_POINTER, "get_stream: stream is NULL");
    *stream = h->stream;
    return HK_STATUS_OK;
}

static hk_status_t prev_set_mode(hk_handle_t *h, hk_pointer_mode_t mode)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (mode != HK_POINTER_MODE_HOST && mode != HK_POINTER_MODE_DEVICE)
        return fail(h, HK_STATUS_INVALID_VALUE, "set_pointer_mode: no such mode");
    h->mode = mode;
    return HK_STATUS_OK;
}

static hk_status_t prev_get_mode(hk_handle_t *h, hk_pointer_mode_t *mode)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!mode)
        return fail(h, HK_STATUS_NULL_POINTER, "get_pointer_mode: mode is NULL");
    *mode = h->mode;
    return HK_STATUS_OK;
}

static const char *prev_last_error(const hk_handle_t *h)
{
    return live(h) ? h->err : prev_create_err;
}

static hk_status_t prev_info(hk_handle_t *h, hk_handle_info_t *info)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!info)
        return fail(h, HK_STATUS_NULL_POINTER, "handle_info: info is NULL");
    hk_handle_info_t mine = {.size = sizeof mine, .device = -1, .plugin_name = "hk-prev"};
    uint32_t size = info->size;
    memcpy(info, &mine, size < sizeof mine ? size : sizeof mine);
    info->size = size;
    return HK_STATUS_OK;
}

static hk_status_t prev_sync(hk_handle_t *h)
{
    return live(h) ? HK_STATUS_OK : HK_STATUS_INVALID_HANDLE;
}

/* ---- hk.blas1/1, reference BLAS on host memory ---- */

/* The index of element i of a vector of n with increment inc. */
static int64_t at(int64_t i, int64_t n, int64_t inc)
{
    return inc >= 0 ? i * inc : (n - 1 - i) * -inc;
}

#define PREV_CHECK(h, n, ...)                                                    \
    do {                                                                         \
        if (!live(h))                                                            \
            return HK_STATUS_INVALID_HANDLE;                                     \
        if ((n) > 0) {                                                           \
            const void *p_[] = {__VA_ARGS__};                                    \
            for (size_t k_ = 0; k_ < sizeof p_ / sizeof p_[0]; k_++)             \
                if (!p_[k_])                                                     \
                    return fail(h, HK_STATUS_NULL_POINTER, "a pointer is NULL"); \
        }                                                                        \
    } while (0)

#define PREV_OPS(T, P)                                                                         \
    static hk_status_t prev_##P##axpy(hk_handle_t *h, int64_t n, const T *alpha, const T *x,  \
                                      int64_t incx, T *y, int64_t incy)                       \
    {                                                                                          \
        PREV_CHECK(h, n, alpha, x, y);                                                         \
        for (int64_t i = 0; i < n; i++)                                                        \
            y[at(i, n, incy)] += *alpha * x[at(i, n, incx)];                                   \
        return HK_STATUS_OK;                                                                   \
    }                                                                                          \
    static hk_status_t prev_##P##scal(hk_handle_t *h, int64_t n, const T *alpha, T *x,        \
                                      int64_t incx)                                            \
    {                                                                                          \
        PREV_CHECK(h, n, alpha, x);                                                            \
        for (int64_t i = 0; incx > 0 && i < n; i++)                                            \
            x[i * incx] *= *alpha;                                                             \
        return HK_STATUS_OK;                                                                   \
    }                                                                                          \
    static hk_status_t prev_##P##copy(hk_handle_t *h, int64_t n, const T *x, int64_t incx,    \
                                      T *y, int64_t incy)                                      \
    {                                                                                          \
        PREV_CHECK(h, n, x, y);                                                                \
        for (int64_t i = 0; i < n; i++)                                                        \
            y[at(i, n, incy)] = x[at(i, n, incx)];                                             \
        return HK_STATUS_OK;                                                                   \
    }                                                                                          \
    static hk_status_t prev_##P##dot(hk_handle_t *h, int64_t n, const T *x, int64_t incx,     \
                                     const T *y, int64_t incy, T *result)                      \
    {                                                                                          \
        PREV_CHECK(h, n, x, y, result);                                                        \
        if (!result)                                                                           \
            return fail(h, HK_STATUS_NULL_POINTER, "dot: result is NULL");                     \
        double s = 0;                                                                          \
        for (int64_t i = 0; i < n; i++)                                                        \
            s += (double)x[at(i, n, incx)] * (double)y[at(i, n, incy)];                        \
        *result = (T)s;                                                                        \
        return HK_STATUS_OK;                                                                   \
    }                                                                                          \
    static hk_status_t prev_##P##nrm2(hk_handle_t *h, int64_t n, const T *x, int64_t incx,    \
                                      T *result)                                               \
    {                                                                                          \
        PREV_CHECK(h, n, x, result);                                                           \
        if (!result)                                                                           \
            return fail(h, HK_STATUS_NULL_POINTER, "nrm2: result is NULL");                    \
        long double scale = 0, ssq = 1;                                                        \
        for (int64_t i = 0; incx > 0 && i < n; i++) {                                          \
            long double a = fabsl((long double)x[i * incx]);                                   \
            if (a == 0)                                                                        \
                continue;                                                                      \
            if (scale < a) {                                                                   \
                ssq = 1 + ssq * (scale / a) * (scale / a);                                     \
                scale = a;                                                                     \
            } else {                                                                           \
                ssq += (a / scale) * (a / scale);                                              \
            }                                                                                  \
        }                                                                                      \
        *result = (T)(scale * sqrtl(ssq));                                                     \
        return HK_STATUS_OK;                                                                   \
    }

PREV_OPS(float, s)
PREV_OPS(double, d)

static const hk_blas1_v1_t prev_blas1 = {
    .size = sizeof(hk_blas1_v1_t),
    .saxpy = prev_saxpy, .daxpy = prev_daxpy, .sscal = prev_sscal, .dscal = prev_dscal,
    .scopy = prev_scopy, .dcopy = prev_dcopy, .sdot = prev_sdot, .ddot = prev_ddot,
    .snrm2 = prev_snrm2, .dnrm2 = prev_dnrm2,
};

/* ---- hk.memory/1 on host memory ---- */

static hk_status_t prev_alloc(hk_handle_t *h, size_t bytes, void **out)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!out)
        return fail(h, HK_STATUS_NULL_POINTER, "alloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return HK_STATUS_OK;
    *out = malloc(bytes);
    return *out ? HK_STATUS_OK : fail(h, HK_STATUS_OUT_OF_MEMORY, "alloc: out of memory");
}

static hk_status_t prev_free(hk_handle_t *h, void *p)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    free(p);
    return HK_STATUS_OK;
}

static hk_status_t prev_copy(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (bytes && (!dst || !src))
        return fail(h, HK_STATUS_NULL_POINTER, "copy: a pointer is NULL");
    if (bytes)
        memmove(dst, src, bytes);
    return HK_STATUS_OK;
}

static hk_status_t prev_memset(hk_handle_t *h, void *dst, int value, size_t bytes)
{
    if (!live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (bytes && !dst)
        return fail(h, HK_STATUS_NULL_POINTER, "memset: dst is NULL");
    if (bytes)
        memset(dst, value, bytes);
    return HK_STATUS_OK;
}

static const hk_memory_v1_t prev_memory = {
    .size = sizeof(hk_memory_v1_t),
    .alloc = prev_alloc, .free_ = prev_free, .copy_to_device = prev_copy,
    .copy_to_host = prev_copy, .memset_ = prev_memset,
};

static hk_status_t prev_get_table(const char *name, const void **table)
{
    if (!name || !table)
        return HK_STATUS_NULL_POINTER;
    *table = !strcmp(name, HK_TABLE_BLAS1_V1)    ? (const void *)&prev_blas1
             : !strcmp(name, HK_TABLE_MEMORY_V1) ? (const void *)&prev_memory
                                                 : NULL;
    return *table ? HK_STATUS_OK : HK_STATUS_NOT_FOUND;
}

static hk_status_t prev_enum_tables(size_t index, const char **name)
{
    static const char *const names[] = {HK_TABLE_BLAS1_V1, HK_TABLE_MEMORY_V1};
    if (!name)
        return HK_STATUS_NULL_POINTER;
    if (index >= 2)
        return HK_STATUS_NOT_FOUND;
    *name = names[index];
    return HK_STATUS_OK;
}

static const hk_vtable_t prev_vtable = {
    .size = sizeof(hk_vtable_t),
    .handle_create = prev_create, .handle_destroy = prev_destroy,
    .set_stream = prev_set_stream, .get_stream = prev_get_stream,
    .set_pointer_mode = prev_set_mode, .get_pointer_mode = prev_get_mode,
    .last_error = prev_last_error, .get_table = prev_get_table,
    .enum_tables = prev_enum_tables, .handle_info = prev_info, .synchronize = prev_sync,
};

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans)
{
    if (!req || !ans)
        return HK_STATUS_NULL_POINTER;
    if (req->header.struct_type != HK_STRUCT_NEGOTIATE_REQUEST
        || req->header.struct_size < sizeof *req)
        return HK_STATUS_INVALID_VALUE;
    hk_negotiate_answer_t a = {
        .header = {HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1},
        .abi_version = HK_ABI_CURRENT,
        .flags = HK_PLUGIN_UNLOAD_SAFE,
        .name = "hk-prev",
        .version = "1.1.0",
        .vtable = &prev_vtable,
    };
    hk_status_t st = HK_STATUS_OK;
    if (req->abi_max < a.abi_version)
        a.abi_version = req->abi_max;
    if (HK_ABI_VERSION_MAJOR(a.abi_version) != HK_ABI_MAJOR || a.abi_version < req->abi_min) {
        a.abi_version = HK_ABI_CURRENT;
        st = HK_STATUS_ABI_MISMATCH;
    }
    hk_answer_write(ans, &a);
    return st;
}
