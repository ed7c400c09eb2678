/* The host's copy of every table the loader knows, clamped to the ABI minor
 * the plugin was negotiated at (docs/abi.md, "Versions" and "Function
 * tables"): tc-all offers all six whole, and a host that negotiates 1.0,
 * 1.1 or 1.2 gets of each exactly the slots its minor defines: hk.blas1/1
 * and hk.memory/1 came with 1.0, the other four with 1.2, so below 1.2 those
 * are a size field alone and every slot reads NULL. hk_plugin_get_table and
 * the loader-owned copy of hk_plugin_table alike. */
#include <stdio.h>
#include <string.h>

#include "hk_blas1.h"
#include "hk_cuda.h"
#include "hk_kernels.h"
#include "hk_memory.h"
#include "hk_selfcheck.h"
#include "hk_test.h"
#include "hk_trim.h"
#include "test_loader_util.h"

static const struct table {
    const char *name;
    size_t size;    /* sizeof its struct in these headers */
    uint32_t minor; /* the ABI minor that added its slots */
} tables[] = {
    {HK_TABLE_BLAS1_V1, sizeof(hk_blas1_v1_t), 0},
    {HK_TABLE_MEMORY_V1, sizeof(hk_memory_v1_t), 0},
    {HK_TABLE_KERNELS_V1, sizeof(hk_kernels_v1_t), 2},
    {HK_TABLE_CUDA_V1, sizeof(hk_cuda_v1_t), 2},
    {HK_TABLE_SELFCHECK_V1, sizeof(hk_selfcheck_v1_t), 2},
    {HK_TABLE_TRIM_V1, sizeof(hk_trim_v1_t), 2},
};
#define NTABLES (sizeof tables / sizeof tables[0])

/* A loader whose host accepts ABI 1.0 up to 1.abi_minor, with tc-all open. */
static hk_plugin_t *open_at(uint32_t abi_minor, hk_loader_t **loader)
{
    hk_loader_options_t o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.ignore_env = 1;
    o.abi_max = HK_ABI_VERSION(HK_ABI_MAJOR, abi_minor);
    *loader = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, loader), HK_STATUS_OK);
    hk_plugin_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_open(*loader, tl_plugin("tc_all.so"), &p), HK_STATUS_OK);
    if (p)
        CU_ASSERT_EQUAL(hk_plugin_abi(p), o.abi_max);
    return p;
}

/* 1 when every pointer-sized slot after the size field of the n bytes at t
 * is set (want 1) or NULL (want 0). */
static int slots_are(const void *t, size_t n, int want)
{
    for (size_t at = sizeof(size_t); at + sizeof(void *) <= n; at += sizeof(void *)) {
        void *slot;
        memcpy(&slot, (const char *)t + at, sizeof slot);
        if ((slot != NULL) != want)
            return 0;
    }
    return 1;
}

/* Every table through both accessors, at ABI 1.abi_minor. */
static void check_minor(uint32_t abi_minor)
{
    hk_loader_t *loader;
    hk_plugin_t *p = open_at(abi_minor, &loader);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (size_t i = 0; i < NTABLES; i++) {
        const struct table *t = &tables[i];
        int whole = t->minor <= abi_minor;
        size_t want = whole ? t->size : sizeof(size_t);
        unsigned char buf[512];
        memset(buf, 0xa5, sizeof buf);
        CU_ASSERT_FATAL(t->size <= sizeof buf);
        CU_ASSERT_EQUAL(hk_plugin_get_table(p, t->name, buf, t->size), HK_STATUS_OK);
        size_t got;
        memcpy(&got, buf, sizeof got);
        if (got != want)
            printf("\n    %s at 1.%u: size %zu, want %zu", t->name, abi_minor, got, want);
        CU_ASSERT_EQUAL(got, want);
        CU_ASSERT(slots_are(buf, t->size, whole)); /* the struct past the copy is zeroed */
        const void *copy = hk_plugin_table(p, t->name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
        memcpy(&got, copy, sizeof got);
        CU_ASSERT_EQUAL(got, want);
        CU_ASSERT(slots_are(copy, want, whole));
    }
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_at_1_2(void)
{
    check_minor(2);
}

static void test_at_1_1(void)
{
    check_minor(1);
}

static void test_at_1_0(void)
{
    check_minor(0);
}

int hk_test_register(void)
{
    static const hk_test_case_t tests[] = {
        {"every known table whole at 1.2", test_at_1_2},
        {"at 1.1: the 1.2 tables are a size field, no slot", test_at_1_1},
        {"at 1.0: the same", test_at_1_0},
    };
    hk_test_add_all(hk_test_suite("loader_clamp", NULL, NULL), tests,
                    sizeof tests / sizeof tests[0]);
    return 0;
}
