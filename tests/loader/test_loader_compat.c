/* ABI compatibility in both directions, answer flags and the host's copies of
 * tables (docs/abi.md "Versions" and "Function tables"), with the plugins of
 * tc_plugin.c. */
#include <stdio.h>
#include <string.h>

#include "hk_blas1.h"
#include "hk_memory.h"
#include "hk_test.h"
#include "test_loader_util.h"

/* A loader whose host knows ABI versions up to abi_max (0: the current). */
static hk_loader_t *loader_max(uint32_t abi_max)
{
    hk_loader_options_t o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.ignore_env = 1;
    o.abi_max = abi_max;
    hk_loader_t *loader = NULL;
    return hk_loader_create(&o, &loader) == HK_STATUS_OK ? loader : NULL;
}

static hk_plugin_t *open_ok(hk_loader_t *loader, const char *file)
{
    hk_plugin_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin(file), &p), HK_STATUS_OK);
    return p;
}

/* hk_plugin_last_error_copy on plugin p must give want, whole and cut. */
static void expect_error_text(const hk_plugin_t *p, const hk_handle_t *h, const char *want)
{
    char buf[64];
    size_t needed = 0;
    memset(buf, 'x', sizeof buf);
    CU_ASSERT_EQUAL(hk_plugin_last_error_copy(p, h, buf, sizeof buf, &needed), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(buf, want);
    CU_ASSERT_EQUAL(needed, strlen(want) + 1);
    memset(buf, 'x', sizeof buf);
    CU_ASSERT_EQUAL(hk_plugin_last_error_copy(p, h, buf, 4, &needed), HK_STATUS_OK);
    CU_ASSERT_EQUAL(memcmp(buf, want, 3), 0);
    CU_ASSERT_EQUAL(buf[3], '\0');
    CU_ASSERT_EQUAL(buf[4], 'x'); /* nothing past len */
    CU_ASSERT_EQUAL(needed, strlen(want) + 1);
    CU_ASSERT_EQUAL(hk_plugin_last_error_copy(p, h, NULL, 0, &needed), HK_STATUS_OK);
    CU_ASSERT_EQUAL(needed, strlen(want) + 1);
    CU_ASSERT_EQUAL(hk_plugin_last_error_copy(p, h, NULL, 8, &needed), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(needed, 0);
}

/* A 1.1 plugin (1.1 vtable size, no memory flag) in this 1.2 host: loads as
 * 1.1, last_error_copy reads NULL although the build filled it, and the
 * loader's helper falls back to last_error. */
static void test_v11_plugin_in_v12_host(void)
{
    hk_loader_t *loader = loader_max(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = open_ok(loader, "tc_v11.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 1));
    CU_ASSERT_EQUAL(hk_plugin_flags(p) & HK_PLUGIN_MEMORY_MASK, 0);
    const hk_vtable_t *vt = hk_plugin_vtable(p);
    CU_ASSERT_EQUAL(vt->size, HK_VTABLE_SIZE_1_1);
    CU_ASSERT_PTR_NULL(vt->last_error_copy);
    CU_ASSERT_PTR_NOT_NULL(vt->handle_info);
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    hk_handle_info_t info = {.size = sizeof info};
    CU_ASSERT_EQUAL(vt->handle_info(h, &info), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(info.plugin_name, "tc-v11");
    expect_error_text(p, h, "tc-v11 last_error");
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* A 1.2 plugin: in this host it answers 1.2 with its last_error_copy and its
 * memory flag; in a host that declares abi_max 1.1 it answers 1.1, and the
 * host's copy has last_error_copy cleared although the plugin's vtable is
 * full size, so the helper falls back to last_error. */
static void test_v12_plugin_in_both_hosts(void)
{
    hk_loader_t *loader = loader_max(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = open_ok(loader, "tc_v12.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 2));
    CU_ASSERT_EQUAL(hk_plugin_flags(p), HK_PLUGIN_MEMORY_HOST);
    CU_ASSERT_EQUAL(hk_plugin_vtable(p)->size, sizeof(hk_vtable_t));
    CU_ASSERT_PTR_NOT_NULL(hk_plugin_vtable(p)->last_error_copy);
    expect_error_text(p, NULL, "tc-v12 last_error_copy");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    loader = loader_max(HK_ABI_VERSION(1, 1));
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    p = open_ok(loader, "tc_v12.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 1));
    CU_ASSERT_EQUAL(hk_plugin_flags(p), 0); /* a 1.1 host does not know memory domains */
    const hk_vtable_t *vt = hk_plugin_vtable(p);
    CU_ASSERT_EQUAL(vt->size, HK_VTABLE_SIZE_1_1);
    CU_ASSERT_PTR_NULL(vt->last_error_copy);
    CU_ASSERT_PTR_NOT_NULL(vt->handle_info);
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    expect_error_text(p, h, "tc-v12 last_error");
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* Both memory flags: refused in a 1.2 answer, cleared in a 1.1 one. */
static void test_two_memory_domains(void)
{
    hk_loader_t *loader = NULL;
    const hk_load_report_t *r = tl_open_one("tc_twomem.so", &loader);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->stage, HK_STAGE_VALIDATE);
    CU_ASSERT_EQUAL(r->status, HK_STATUS_INVALID_VALUE);
    CU_ASSERT_STRING_EQUAL(r->reason, "answer flags 0x6 name more than one memory domain "
                                      "(HK_PLUGIN_MEMORY_HOST and HK_PLUGIN_MEMORY_CUDA)");
    CU_ASSERT_PTR_NULL(r->plugin);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    loader = loader_max(HK_ABI_VERSION(1, 1));
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = open_ok(loader, "tc_twomem.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 1));
    CU_ASSERT_EQUAL(hk_plugin_flags(p), 0);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* ---- hk_plugin_get_table ---- */

static hk_loader_t *tables_loader;
static hk_plugin_t *tables;

static int tables_init(void)
{
    tables_loader = loader_max(0);
    if (!tables_loader)
        return -1;
    return hk_loader_open(tables_loader, tl_plugin("tc_tables.so"), &tables) == HK_STATUS_OK
               ? 0
               : -1;
}

static int tables_clean(void)
{
    return hk_loader_destroy(tables_loader) == HK_STATUS_OK ? 0 : -1;
}

static int all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

/* The plugin's blas1 table is one slot longer than the host's: the host's
 * copy stops at what 1.2 defines for hk.blas1/1, even when the host hands a
 * bigger buffer, and its slots are the plugin's own code. */
static void test_table_longer_than_host(void)
{
    struct {
        hk_blas1_v1_t b;
        void *after;
    } buf;
    memset(&buf, 0xa5, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hk_plugin_get_table(tables, HK_TABLE_BLAS1_V1, &buf, sizeof buf),
                          HK_STATUS_OK);
    CU_ASSERT_EQUAL(buf.b.size, sizeof(hk_blas1_v1_t));
    CU_ASSERT_PTR_NULL(buf.after); /* the plugin's extra slot is not taken */
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf.b.saxpy);
    CU_ASSERT_PTR_NOT_NULL(buf.b.sscal);
    CU_ASSERT_PTR_NULL(buf.b.sdot); /* NULL in the plugin: not supported */
    CU_ASSERT_EQUAL(buf.b.saxpy(NULL, 0, NULL, NULL, 1, NULL, 1), HK_STATUS_OK);

    /* A host that knows only the table's first slots gets no more. */
    const size_t part = offsetof(hk_blas1_v1_t, sscal);
    memset(&buf, 0xa5, sizeof buf);
    CU_ASSERT_EQUAL(hk_plugin_get_table(tables, HK_TABLE_BLAS1_V1, &buf, part), HK_STATUS_OK);
    CU_ASSERT_EQUAL(buf.b.size, part);
    CU_ASSERT_PTR_NOT_NULL(buf.b.saxpy);
    const unsigned char *rest = (const unsigned char *)&buf + part;
    int untouched = 1;
    for (size_t i = 0; i < sizeof buf - part; i++)
        untouched &= rest[i] == 0xa5;
    CU_ASSERT(untouched);
}

/* The plugin's memory table is shorter than the host's: the slots it did not
 * declare read NULL, even the one its storage happens to fill. */
static void test_table_shorter_than_host(void)
{
    hk_memory_v1_t m;
    memset(&m, 0xa5, sizeof m);
    CU_ASSERT_EQUAL_FATAL(hk_plugin_get_table(tables, HK_TABLE_MEMORY_V1, &m, sizeof m),
                          HK_STATUS_OK);
    CU_ASSERT_EQUAL(m.size, offsetof(hk_memory_v1_t, copy_to_device));
    CU_ASSERT_PTR_NOT_NULL(m.alloc);
    CU_ASSERT_PTR_NOT_NULL(m.free_);
    CU_ASSERT_PTR_NULL(m.copy_to_device);
    CU_ASSERT_PTR_NULL(m.copy_to_host);
    CU_ASSERT_PTR_NULL(m.memset_);
}

/* Malformed tables and absent ones leave the host's struct zeroed. */
static void test_table_refusals(void)
{
    struct {
        size_t size;
        void *slot[4];
    } t;
    static const struct {
        const char *name;
        hk_status_t st;
        const char *why;
    } cases[] = {
        {"tc.tiny/1", HK_STATUS_INVALID_VALUE, "below sizeof(size_t)"},
        {"tc.huge/1", HK_STATUS_INVALID_VALUE, "HK_TABLE_SIZE_MAX"},
        {"tc.null/1", HK_STATUS_INVALID_VALUE, "NULL table"},
        {"tc.fail/1", HK_STATUS_INTERNAL, "get_table failed"},
        {"tc.absent/1", HK_STATUS_NOT_FOUND, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&t, 0xa5, sizeof t);
        CU_ASSERT_EQUAL(hk_plugin_get_table(tables, cases[i].name, &t, sizeof t), cases[i].st);
        CU_ASSERT(all_zero(&t, sizeof t));
        if (cases[i].why)
            CU_ASSERT_PTR_NOT_NULL(strstr(hk_loader_last_error(tables_loader), cases[i].why));
        CU_ASSERT_PTR_NULL(hk_plugin_table(tables, cases[i].name));
    }
    /* Bad arguments: nothing written at all. */
    memset(&t, 0xa5, sizeof t);
    CU_ASSERT_EQUAL(hk_plugin_get_table(tables, HK_TABLE_BLAS1_V1, &t, 4),
                    HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(t.size, (size_t)0xa5a5a5a5a5a5a5a5ull);
    CU_ASSERT_EQUAL(hk_plugin_get_table(tables, NULL, &t, sizeof t), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_plugin_get_table(tables, HK_TABLE_BLAS1_V1, NULL, 64),
                    HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_plugin_get_table(NULL, HK_TABLE_BLAS1_V1, &t, sizeof t),
                    HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(t.size, (size_t)0xa5a5a5a5a5a5a5a5ull);
}

/* The deprecated hk_plugin_table hands out a loader-owned copy, clamped and
 * zero-filled to the loader's struct, never the plugin's own storage. */
static void test_raw_table_is_a_copy(void)
{
    const void *raw = NULL;
    CU_ASSERT_EQUAL(hk_plugin_vtable(tables)->get_table(HK_TABLE_MEMORY_V1, &raw), HK_STATUS_OK);
    const hk_memory_v1_t *m = hk_plugin_table(tables, HK_TABLE_MEMORY_V1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_PTR_NOT_EQUAL(m, raw);
    CU_ASSERT_EQUAL(m->size, offsetof(hk_memory_v1_t, copy_to_device));
    CU_ASSERT_PTR_NOT_NULL(m->alloc);
    CU_ASSERT_PTR_NULL(m->memset_); /* filled in the plugin's storage, past its size */
    CU_ASSERT_PTR_EQUAL(hk_plugin_table(tables, HK_TABLE_MEMORY_V1), m); /* kept */
    const hk_blas1_v1_t *b = hk_plugin_table(tables, HK_TABLE_BLAS1_V1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(b->size, sizeof(hk_blas1_v1_t));
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("abi_compat", NULL, NULL);
    static const hk_test_case_t compat_tests[] = {
        {"1.1 plugin in a 1.2 host: no last_error_copy, fallback works",
         test_v11_plugin_in_v12_host},
        {"1.2 plugin in 1.2 and 1.1 hosts: last_error_copy only at 1.2",
         test_v12_plugin_in_both_hosts},
        {"two memory-domain flags: refused at 1.2, cleared at 1.1", test_two_memory_domains},
    };
    hk_test_add_all(s, compat_tests, sizeof compat_tests / sizeof compat_tests[0]);
    s = hk_test_suite("abi_tables", tables_init, tables_clean);
    static const hk_test_case_t table_tests[] = {
        {"table longer than the host's: clamped to the known size", test_table_longer_than_host},
        {"table shorter than the host's: missing slots read NULL", test_table_shorter_than_host},
        {"malformed, failing and absent tables: zeroed, with a status", test_table_refusals},
        {"hk_plugin_table returns a clamped loader copy", test_raw_table_is_a_copy},
    };
    hk_test_add_all(s, table_tests, sizeof table_tests / sizeof table_tests[0]);
    return 0;
}
