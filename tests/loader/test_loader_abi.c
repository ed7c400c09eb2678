/* Loader paths of single files: every refusal's stage, status and exact
 * reason, and the version rules of loaded plugins (docs/abi.md). */
#include <stdio.h>
#include <string.h>

#include "hk_test.h"
#include "test_loader_util.h"
#include "tp_info.h"

/* Opens file with a fresh loader and checks the one report it must leave. */
static void expect_refused(const char *file, hk_load_stage_t stage, hk_status_t status,
                           const char *reason)
{
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    const char *path = tl_plugin(file);
    hk_plugin_t *plugin = (hk_plugin_t *)&loader; /* must be overwritten */

    CU_ASSERT_EQUAL(hk_loader_open(loader, path, &plugin), status);
    CU_ASSERT_PTR_NULL(plugin);
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), 1);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 0);
    const hk_load_report_t *r = hk_loader_report(loader, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_STRING_EQUAL(r->path, path);
    CU_ASSERT_EQUAL(r->stage, stage);
    CU_ASSERT_EQUAL(r->status, status);
    CU_ASSERT_PTR_NULL(r->plugin);
    CU_ASSERT_STRING_EQUAL(r->reason, reason);
    CU_ASSERT_PTR_NULL(strchr(r->reason, '\n'));

    /* last_error is "<path>: <stage>: <reason>" */
    char line[8192];
    snprintf(line, sizeof(line), "%s: %s: %s", path, hk_load_stage_name(stage), reason);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), line);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* ELF files are checked by the loader itself before anything maps them. */
static void test_not_elf(void)
{
    expect_refused("x.so", HK_STAGE_OPEN, HK_STATUS_LOAD_FAILED, "not an ELF file");
}

static void test_wrong_elf_class(void)
{
    expect_refused("tp_class32.so", HK_STAGE_OPEN, HK_STATUS_LOAD_FAILED,
                   "ELF class 32, host is 64");
}

static void test_missing_file(void)
{
    expect_refused("no_such_plugin.so", HK_STAGE_SCAN, HK_STATUS_NOT_FOUND,
                   "cannot stat: No such file or directory");
}

static void test_missing_entry(void)
{
    expect_refused("tp_nosym.so", HK_STAGE_SYMBOL, HK_STATUS_NOT_FOUND,
                   "missing entry symbol hk_plugin_negotiate");
}

static void test_entry_error(void)
{
    expect_refused("tp_error.so", HK_STAGE_NEGOTIATE, HK_STATUS_INTERNAL,
                   "hk_plugin_negotiate returned INTERNAL (internal error); "
                   "plugin ABI 1.1, host accepts 1.0-1.2");
}

static void test_major_mismatch(void)
{
    expect_refused("tp_major2.so", HK_STAGE_NEGOTIATE, HK_STATUS_ABI_MISMATCH,
                   "hk_plugin_negotiate returned ABI_MISMATCH (the plugin and host ABI "
                   "versions are incompatible); plugin ABI 2.0, host accepts 1.0-1.2");
}

static void test_answer_major_out_of_range(void)
{
    expect_refused("tp_badmajor.so", HK_STAGE_VALIDATE, HK_STATUS_ABI_MISMATCH,
                   "ABI major out of range: plugin answered 2.0, host accepts 1.0-1.2");
}

static void test_answer_minor_out_of_range(void)
{
    expect_refused("tp_badminor.so", HK_STAGE_VALIDATE, HK_STATUS_ABI_MISMATCH,
                   "ABI minor out of range: plugin answered 1.7, host accepts 1.0-1.2");
}

static void test_null_vtable(void)
{
    expect_refused("tp_nullvt.so", HK_STAGE_VALIDATE, HK_STATUS_NULL_POINTER,
                   "answer vtable is NULL");
}

static void test_null_name(void)
{
    expect_refused("tp_nullname.so", HK_STAGE_VALIDATE, HK_STATUS_NULL_POINTER,
                   "answer name is NULL");
}

static void test_null_required_slot(void)
{
    expect_refused("tp_nullslot.so", HK_STAGE_VALIDATE, HK_STATUS_NULL_POINTER,
                   "required vtable slot get_table is NULL");
}

static void test_short_vtable(void)
{
    char reason[256];
    snprintf(reason, sizeof(reason), "vtable size %zu is smaller than the ABI 1.0 vtable (%zu)",
             (size_t)HK_VTABLE_SIZE_1_0 - sizeof(void *), (size_t)HK_VTABLE_SIZE_1_0);
    expect_refused("tp_shortvt.so", HK_STAGE_VALIDATE, HK_STATUS_INVALID_VALUE, reason);
}

static void test_bad_answer_type(void)
{
    expect_refused("tp_badtype.so", HK_STAGE_VALIDATE, HK_STATUS_INVALID_VALUE,
                   "answer struct_type is 0x12345678, expected 0x484b0002");
}

static void test_bad_answer_size(void)
{
    char reason[256];
    snprintf(reason, sizeof(reason),
             "answer struct_size is 16, smaller than the version 1 answer (%zu)",
             sizeof(hk_negotiate_answer_t));
    expect_refused("tp_badsize.so", HK_STAGE_VALIDATE, HK_STATUS_INVALID_VALUE, reason);
}

/* Opens file and checks the report of a loaded plugin; returns the plugin. */
static hk_plugin_t *expect_loaded(hk_loader_t *loader, const char *file)
{
    hk_plugin_t *plugin = NULL;
    const char *path = tl_plugin(file);
    CU_ASSERT_EQUAL(hk_loader_open(loader, path, &plugin), HK_STATUS_OK);
    const hk_load_report_t *r = tl_report(loader, path);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r) {
        CU_ASSERT_EQUAL(r->stage, HK_STAGE_LOADED);
        CU_ASSERT_EQUAL(r->status, HK_STATUS_OK);
        CU_ASSERT_STRING_EQUAL(r->reason, "");
        CU_ASSERT_PTR_EQUAL(r->plugin, plugin);
    }
    return plugin;
}

/* Creates a handle through the host's vtable copy and asks handle_info when
 * the copy has it: the plugin's own code must answer with its name. */
static void check_handle_roundtrip(const hk_plugin_t *p, const char *name)
{
    const hk_vtable_t *vt = hk_plugin_vtable(p);
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    if (vt->handle_info) {
        hk_handle_info_t info;
        memset(&info, 0, sizeof(info));
        info.size = sizeof(info);
        CU_ASSERT_EQUAL(vt->handle_info(h, &info), HK_STATUS_OK);
        CU_ASSERT_STRING_EQUAL(info.plugin_name, name);
        CU_ASSERT_EQUAL(info.device, -1);
    }
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

static void test_good_plugin(void)
{
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = expect_loaded(loader, "tp_good.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(hk_plugin_name(p), "tp-good");
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(p), "1.1.0");
    CU_ASSERT_STRING_EQUAL(hk_plugin_path(p), tl_plugin("tp_good.so"));
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 1));
    CU_ASSERT_EQUAL(hk_plugin_flags(p), 0);
    const hk_vtable_t *vt = hk_plugin_vtable(p);
    CU_ASSERT_EQUAL(vt->size, HK_VTABLE_SIZE_1_1); /* a 1.1 answer: no 1.2 slot */
    CU_ASSERT_PTR_NOT_NULL(vt->handle_info);
    CU_ASSERT_PTR_NOT_NULL(vt->synchronize);
    check_handle_roundtrip(p, "tp-good");
    const tp_info_table_t *info = hk_plugin_table(p, TP_INFO_TABLE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(info);
    CU_ASSERT_STRING_EQUAL(info->version(), "1.1.0");
    CU_ASSERT_PTR_NULL(hk_plugin_table(p, "hk.blas1/1"));
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), "");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* A 1.0 plugin: its vtable is the 1.0 size, so the 1.1 slots read NULL even
 * though this build filled them. */
static void test_minor_older(void)
{
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = expect_loaded(loader, "tp_older.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 0));
    const hk_vtable_t *vt = hk_plugin_vtable(p);
    CU_ASSERT_EQUAL(vt->size, HK_VTABLE_SIZE_1_0);
    CU_ASSERT_PTR_NULL(vt->handle_info);
    CU_ASSERT_PTR_NULL(vt->synchronize);
    CU_ASSERT_PTR_NOT_NULL(vt->enum_tables);
    check_handle_roundtrip(p, "tp-good");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* A 1.3 plugin negotiates down to 1.2; its longer vtable tail is ignored. */
static void test_minor_newer(void)
{
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = expect_loaded(loader, "tp_newer.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 2));
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(p), "1.3.0");
    const hk_vtable_t *vt = hk_plugin_vtable(p);
    CU_ASSERT_EQUAL(vt->size, sizeof(hk_vtable_t));
    CU_ASSERT_PTR_NOT_NULL(vt->handle_info);
    check_handle_roundtrip(p, "tp-good");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* A 1.1 answer with a vtable longer than the host's: the copy stops at the
 * end of what 1.1 defines. */
static void test_long_vtable(void)
{
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = expect_loaded(loader, "tp_longvt.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 1));
    CU_ASSERT_EQUAL(hk_plugin_vtable(p)->size, HK_VTABLE_SIZE_1_1);
    check_handle_roundtrip(p, "tp-good");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* A host that only knows 1.0 gets a 1.0 answer from a 1.1 plugin and must
 * not see the 1.1 slots the plugin's full-size vtable carries. */
static void test_host_1_0_clears_newer_slots(void)
{
    hk_loader_options_t o;
    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.ignore_env = 1;
    o.abi_max = HK_ABI_VERSION(1, 0);
    hk_loader_t *loader = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    hk_plugin_t *p = expect_loaded(loader, "tp_good.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 0));
    CU_ASSERT_EQUAL(hk_plugin_vtable(p)->size, HK_VTABLE_SIZE_1_0);
    CU_ASSERT_PTR_NULL(hk_plugin_vtable(p)->handle_info);
    CU_ASSERT_PTR_NULL(hk_plugin_vtable(p)->synchronize);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    /* The refusal names the host's range as configured, not the built one. */
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    hk_loader_open(loader, tl_plugin("tp_major2.so"), NULL);
    const hk_load_report_t *r = hk_loader_report(loader, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->reason, "plugin ABI 2.0, host accepts 1.0-1.0"));
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_create_options(void)
{
    hk_loader_t *loader = (hk_loader_t *)&loader;
    hk_loader_options_t o;

    CU_ASSERT_EQUAL(hk_loader_create(NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_create(NULL, &loader), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(loader);
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), 0);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), "");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(NULL), HK_STATUS_OK);

    memset(&o, 0, sizeof(o));
    o.size = 0;
    CU_ASSERT_EQUAL(hk_loader_create(&o, &loader), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NULL(loader);
    o.size = sizeof(o);
    o.abi_max = HK_ABI_VERSION(2, 0);
    CU_ASSERT_EQUAL(hk_loader_create(&o, &loader), HK_STATUS_INVALID_VALUE);
    o.abi_max = HK_ABI_VERSION(HK_ABI_MAJOR, HK_ABI_MINOR + 1);
    CU_ASSERT_EQUAL(hk_loader_create(&o, &loader), HK_STATUS_INVALID_VALUE);
    o.abi_min = HK_ABI_VERSION(1, 1);
    o.abi_max = HK_ABI_VERSION(1, 0);
    CU_ASSERT_EQUAL(hk_loader_create(&o, &loader), HK_STATUS_INVALID_VALUE);

    /* An older, shorter options struct: the fields it lacks keep defaults. */
    memset(&o, 0, sizeof(o));
    o.size = (uint32_t)offsetof(hk_loader_options_t, log);
    o.ignore_env = 1;
    o.abi_max = HK_ABI_VERSION(1, 0); /* beyond the declared size: not read */
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    hk_plugin_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("tp_good.so"), &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_plugin_abi(p), HK_ABI_VERSION(1, 1)); /* tp_good's highest */
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

void tl_register_abi(void)
{
    CU_pSuite s = hk_test_suite("loader_refusals", NULL, NULL);
    static const hk_test_case_t refusal_tests[] = {
        {"non-ELF file: open stage, refused before mapping", test_not_elf},
        {"wrong ELF class: open stage, class named", test_wrong_elf_class},
        {"missing file: scan stage, NOT_FOUND", test_missing_file},
        {"missing entry symbol: symbol stage, names it", test_missing_entry},
        {"entry returns an error: negotiate stage, its status", test_entry_error},
        {"major 2.0 plugin: negotiate stage, 2.0 vs 1.0-1.2", test_major_mismatch},
        {"answer with major 2: validate stage", test_answer_major_out_of_range},
        {"answer with minor 7: validate stage", test_answer_minor_out_of_range},
        {"NULL vtable: validate stage", test_null_vtable},
        {"NULL name: validate stage", test_null_name},
        {"NULL required slot: validate stage names it", test_null_required_slot},
        {"short vtable: validate stage, both sizes", test_short_vtable},
        {"bad answer struct_type: validate stage", test_bad_answer_type},
        {"short answer struct_size: validate stage", test_bad_answer_size},
    };
    hk_test_add_all(s, refusal_tests, sizeof refusal_tests / sizeof refusal_tests[0]);

    s = hk_test_suite("loader_versions", NULL, NULL);
    static const hk_test_case_t version_tests[] = {
        {"good 1.1 plugin loads with its name, version, slots", test_good_plugin},
        {"minor older (1.0): 1.1 slots read NULL", test_minor_older},
        {"minor newer (1.3): loads as 1.2", test_minor_newer},
        {"long vtable: tail ignored, loads as 1.1", test_long_vtable},
        {"1.0 host: a 1.1 plugin's 1.1 slots are cleared", test_host_1_0_clears_newer_slots},
        {"create: options size and ABI range checked", test_create_options},
    };
    hk_test_add_all(s, version_tests, sizeof version_tests / sizeof version_tests[0]);
}
