/* tc-all: a plugin of ABI 1.2 that offers every table the loader knows
 * (hk.blas1/1, hk.memory/1, hk.kernels/1, hk.cuda/1, hk.selfcheck/1,
 * hk.trim/1), each whole and with every slot set, so that a test sees the
 * loader's copy of each clamped to the negotiated minor
 * (test_loader_clamp.c). Its slots are never called: each points at one
 * function that only says it was not meant to be. */
#include <stdlib.h>
#include <string.h>

#include "hk_abi.h"
#include "hk_blas1.h"
#include "hk_cuda.h"
#include "hk_kernels.h"
#include "hk_memory.h"
#include "hk_selfcheck.h"
#include "hk_trim.h"

struct hk_handle {
    int unused;
};

/* What every table slot points at; its type is no slot's, so it is cast. */
static hk_status_t tc_never(void)
{
    return HK_STATUS_INTERNAL;
}

#define TC_SLOT(name, minor, params, args) .name = (hk_status_t(*) params)(void (*)(void))tc_never,
static const hk_blas1_v1_t tc_blas1 = {sizeof(hk_blas1_v1_t), HK_BLAS1_V1_SLOTS(TC_SLOT)};
static const hk_memory_v1_t tc_memory = {sizeof(hk_memory_v1_t), HK_MEMORY_V1_SLOTS(TC_SLOT)};
static const hk_kernels_v1_t tc_kernels = {sizeof(hk_kernels_v1_t),
                                           HK_KERNELS_V1_SLOTS(TC_SLOT)};
static const hk_cuda_v1_t tc_cuda = {sizeof(hk_cuda_v1_t), HK_CUDA_V1_SLOTS(TC_SLOT)};
static const hk_selfcheck_v1_t tc_selfcheck = {sizeof(hk_selfcheck_v1_t),
                                               HK_SELFCHECK_V1_SLOTS(TC_SLOT)};
static const hk_trim_v1_t tc_trim = {sizeof(hk_trim_v1_t), HK_TRIM_V1_SLOTS(TC_SLOT)};
#undef TC_SLOT

static const struct {
    const char *name;
    const void *table;
} tc_tables[] = {
    {HK_TABLE_BLAS1_V1, &tc_blas1},         {HK_TABLE_MEMORY_V1, &tc_memory},
    {HK_TABLE_KERNELS_V1, &tc_kernels},     {HK_TABLE_CUDA_V1, &tc_cuda},
    {HK_TABLE_SELFCHECK_V1, &tc_selfcheck}, {HK_TABLE_TRIM_V1, &tc_trim},
};
#define TC_NTABLES (sizeof tc_tables / sizeof tc_tables[0])

static hk_status_t tc_create(const hk_create_info_t *info, hk_handle_t **out)
{
    (void)info;
    if (!out)
        return HK_STATUS_NULL_POINTER;
    *out = calloc(1, sizeof(**out));
    return *out ? HK_STATUS_OK : HK_STATUS_OUT_OF_MEMORY;
}

static hk_status_t tc_destroy(hk_handle_t *h)
{
    if (!h)
        return HK_STATUS_INVALID_HANDLE;
    free(h);
    return HK_STATUS_OK;
}

static const char *tc_last_error(const hk_handle_t *h)
{
    (void)h;
    return "";
}

static hk_status_t tc_get_table(const char *name, const void **table)
{
    if (!name || !table)
        return HK_STATUS_NULL_POINTER;
    for (size_t i = 0; i < TC_NTABLES; i++)
        if (strcmp(tc_tables[i].name, name) == 0) {
            *table = tc_tables[i].table;
            return HK_STATUS_OK;
        }
    *table = NULL;
    return HK_STATUS_NOT_FOUND;
}

static hk_status_t tc_enum_tables(size_t index, const char **name)
{
    if (!name)
        return HK_STATUS_NULL_POINTER;
    if (index >= TC_NTABLES)
        return HK_STATUS_NOT_FOUND;
    *name = tc_tables[index].name;
    return HK_STATUS_OK;
}

static const hk_vtable_t tc_vtable = {
    .size = sizeof(hk_vtable_t),
    .handle_create = tc_create,
    .handle_destroy = tc_destroy,
    .last_error = tc_last_error,
    .get_table = tc_get_table,
    .enum_tables = tc_enum_tables,
};

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans)
{
    if (!req || !ans)
        return HK_STATUS_NULL_POINTER;
    if (req->header.struct_type != HK_STRUCT_NEGOTIATE_REQUEST
        || req->header.struct_size < sizeof(*req))
        return HK_STATUS_INVALID_VALUE;
    hk_negotiate_answer_t a;
    memset(&a, 0, sizeof a);
    a.header = (hk_struct_header_t){HK_STRUCT_NEGOTIATE_ANSWER, sizeof(a), 1};
    a.abi_version = req->abi_max < HK_ABI_CURRENT ? req->abi_max : HK_ABI_CURRENT;
    a.flags = HK_ABI_VERSION_MINOR(a.abi_version) >= 2 ? HK_PLUGIN_MEMORY_HOST : 0;
    a.name = "tc-all";
    a.version = "1.0.0";
    a.vtable = &tc_vtable;
    hk_status_t st = HK_STATUS_OK;
    if (HK_ABI_VERSION_MAJOR(a.abi_version) != HK_ABI_MAJOR || a.abi_version < req->abi_min) {
        a.abi_version = HK_ABI_CURRENT;
        st = HK_STATUS_ABI_MISMATCH;
    }
    hk_answer_write(ans, &a);
    return st;
}
