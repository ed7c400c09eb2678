/* A handle library that is not ours in shape, for the generic swap: no
 * hk.blas1/1 and no hk.memory/1, one table of its own ("gen.ops/1") and a
 * self-check (hk.selfcheck/1). Built several times by macro:
 *   GEN_VERSION    its version ("1.0.0"); tag() answers GEN_TAG
 *   GEN_TAG        what tag() answers, so a caller tells the builds apart
 *   GEN_WRONG      add() is off by one, and the self-check sees it
 *   GEN_LIAR       add() is off by one, and the self-check says OK anyway
 *   GEN_NO_MUL     the table ends before mul (an older build of the table)
 *   GEN_NO_OPS     no gen.ops/1 at all
 *   GEN_CRASH_CHECK the self-check crashes (SIGSEGV)
 *   GEN_NO_INFO    the core vtable has no handle_info slot
 * Handles are host memory; the plugin is unload-safe. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_ops.h"
#include "hk_abi.h"
#include "hk_selfcheck.h"

#ifndef GEN_VERSION
#define GEN_VERSION "1.0.0"
#endif
#ifndef GEN_TAG
#define GEN_TAG 1
#endif

#define GEN_MAGIC 0x67656e68u

struct hk_handle {
    uint32_t magic;
    int device;
};

static _Thread_local char gen_err[160];

static int gen_live(const hk_handle_t *h)
{
    return h && h->magic == GEN_MAGIC;
}

static hk_status_t gen_add(hk_handle_t *h, int64_t a, int64_t b, int64_t *out)
{
    if (!gen_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!out)
        return HK_STATUS_NULL_POINTER;
#if defined(GEN_WRONG) || defined(GEN_LIAR)
    *out = a + b + 1;
#else
    *out = a + b;
#endif
    return HK_STATUS_OK;
}

static hk_status_t gen_tag(hk_handle_t *h, int *out)
{
    if (!gen_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!out)
        return HK_STATUS_NULL_POINTER;
    *out = GEN_TAG;
    return HK_STATUS_OK;
}

__attribute__((unused)) static hk_status_t gen_mul(hk_handle_t *h, int64_t a, int64_t b, int64_t *out)
{
    if (!gen_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!out)
        return HK_STATUS_NULL_POINTER;
    *out = a * b;
    return HK_STATUS_OK;
}

__attribute__((unused)) static const gen_ops_v1_t gen_ops = {
#ifdef GEN_NO_MUL
    .size = offsetof(gen_ops_v1_t, mul),
#else
    .size = sizeof(gen_ops_v1_t),
    .mul = gen_mul,
#endif
    .add = gen_add,
    .tag = gen_tag,
};

/* Each run of the self-check, in whatever process, adds a byte to the
 * file GEN_CHECK_LOG names (when set): a test counts verifications. */
static void gen_check_noted(void)
{
    const char *log = getenv("GEN_CHECK_LOG");
    FILE *f = log && *log ? fopen(log, "a") : NULL;
    if (f) {
        fputc('v', f);
        fclose(f);
    }
}

/* Known answers: sums of small numbers, checked one by one. */
static hk_status_t gen_check(hk_handle_t *h, char *why, size_t n)
{
    gen_check_noted();
    (void)why; /* a liar never explains */
    (void)n;
    if (!gen_live(h))
        return HK_STATUS_INVALID_HANDLE;
#ifdef GEN_CRASH_CHECK
    raise(SIGSEGV);
#endif
    for (int64_t a = -3; a <= 3; a++) {
        int64_t got = 0;
        gen_add(h, a, 2 * a, &got);
#ifndef GEN_LIAR
        if (got != 3 * a) {
            if (why && n)
                snprintf(why, n, "add(%lld, %lld) gave %lld, expected %lld", (long long)a,
                         (long long)(2 * a), (long long)got, (long long)(3 * a));
            return HK_STATUS_INTERNAL;
        }
#endif
    }
    return HK_STATUS_OK;
}

static const hk_selfcheck_v1_t gen_self = {sizeof(hk_selfcheck_v1_t), gen_check};

static hk_status_t gen_create(const hk_create_info_t *info, hk_handle_t **out)
{
    if (!out)
        return HK_STATUS_NULL_POINTER;
    *out = NULL;
    if (info && info->device >= 0) {
        snprintf(gen_err, sizeof(gen_err), "gen works in host memory: no device %d",
                 info->device);
        return HK_STATUS_INVALID_DEVICE;
    }
    hk_handle_t *h = calloc(1, sizeof(*h));
    if (!h)
        return HK_STATUS_OUT_OF_MEMORY;
    h->magic = GEN_MAGIC;
    h->device = -1;
    *out = h;
    return HK_STATUS_OK;
}

static hk_status_t gen_destroy(hk_handle_t *h)
{
    if (!gen_live(h))
        return HK_STATUS_INVALID_HANDLE;
    h->magic = 0;
    free(h);
    return HK_STATUS_OK;
}

static const char *gen_last_error(const hk_handle_t *h)
{
    (void)h;
    return gen_err;
}

__attribute__((unused)) static hk_status_t gen_info(hk_handle_t *h, hk_handle_info_t *info)
{
    if (!gen_live(h))
        return HK_STATUS_INVALID_HANDLE;
    if (!info)
        return HK_STATUS_NULL_POINTER;
    hk_handle_info_t mine = {.size = sizeof(mine), .device = -1};
    size_t k = info->size < sizeof(mine) ? info->size : sizeof(mine);
    uint32_t size = info->size;
    memcpy(info, &mine, k);
    info->size = size;
    return HK_STATUS_OK;
}

static const char *const gen_names[] = {
#ifndef GEN_NO_OPS
    GEN_TABLE_OPS_V1,
#endif
    HK_TABLE_SELFCHECK_V1,
};

static hk_status_t gen_get_table(const char *name, const void **table)
{
    if (!name || !table)
        return HK_STATUS_NULL_POINTER;
    *table = NULL;
#ifndef GEN_NO_OPS
    if (!strcmp(name, GEN_TABLE_OPS_V1))
        *table = &gen_ops;
#endif
    if (!strcmp(name, HK_TABLE_SELFCHECK_V1))
        *table = &gen_self;
    return *table ? HK_STATUS_OK : HK_STATUS_NOT_FOUND;
}

static hk_status_t gen_enum_tables(size_t index, const char **name)
{
    if (!name)
        return HK_STATUS_NULL_POINTER;
    if (index >= sizeof(gen_names) / sizeof(gen_names[0]))
        return HK_STATUS_NOT_FOUND;
    *name = gen_names[index];
    return HK_STATUS_OK;
}

static const hk_vtable_t gen_vtable = {
    .size = sizeof(hk_vtable_t),
    .handle_create = gen_create,
    .handle_destroy = gen_destroy,
    .last_error = gen_last_error,
    .get_table = gen_get_table,
    .enum_tables = gen_enum_tables,
#ifndef GEN_NO_INFO
    .handle_info = gen_info,
#endif
};

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans)
{
    if (!req || !ans)
        return HK_STATUS_NULL_POINTER;
    if (req->header.struct_type != HK_STRUCT_NEGOTIATE_REQUEST
        || req->header.struct_size < sizeof(*req))
        return HK_STATUS_INVALID_VALUE;
    hk_negotiate_answer_t a = {
        .header = {HK_STRUCT_NEGOTIATE_ANSWER, sizeof(a), 1},
        .abi_version = HK_ABI_CURRENT,
        .flags = HK_PLUGIN_UNLOAD_SAFE | HK_PLUGIN_MEMORY_HOST,
        .name = "gen",
        .version = GEN_VERSION,
        .vtable = &gen_vtable,
    };
    if (req->abi_max < a.abi_version)
        a.abi_version = req->abi_max;
    hk_status_t st = HK_STATUS_OK;
    if (a.abi_version < req->abi_min || HK_ABI_VERSION_MAJOR(a.abi_version) != HK_ABI_MAJOR
        || a.abi_version < HK_ABI_VERSION(1, 2)) {
        a.abi_version = HK_ABI_CURRENT;
        st = HK_STATUS_ABI_MISMATCH;
    }
    hk_answer_write(ans, &a);
    return st;
}
