/* Loader test program: plugin identity, side-by-side versions, references
 * and unloading. Refusal paths are in test_loader_abi.c, directories and the
 * environment in test_loader_scan.c. */
#include <string.h>
#include <unistd.h>

#include "hk_test.h"
#include "test_loader_util.h"
#include "tp_info.h"

static void test_same_file_twice(void)
{
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = NULL, *b = NULL;
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("tp_good.so"), &a), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("tp_good.so"), &b), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_PTR_EQUAL(a, b);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 1);
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), 1);

    /* A refused file opened again gives the same status and no new report. */
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("tp_nullvt.so"), NULL),
                    HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("tp_nullvt.so"), NULL),
                    HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(hk_loader_last_error(loader), "answer vtable is NULL"));
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* Two builds of one plugin (same name, versions 1.0.0 and 2.0.0) live side
 * by side: local binding keeps each module's code and data its own. */
static void test_two_versions_side_by_side(void)
{
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *v1 = NULL, *v2 = NULL;
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("tp_twin1.so"), &v1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("tp_twin2.so"), &v2), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v2);
    CU_ASSERT_PTR_NOT_EQUAL(v1, v2);
    CU_ASSERT_STRING_EQUAL(hk_plugin_name(v1), "tp-twin");
    CU_ASSERT_STRING_EQUAL(hk_plugin_name(v2), "tp-twin");
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(v1), "1.0.0");
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(v2), "2.0.0");

    const tp_info_table_t *t1 = hk_plugin_table(v1, TP_INFO_TABLE);
    const tp_info_table_t *t2 = hk_plugin_table(v2, TP_INFO_TABLE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t2);
    CU_ASSERT_PTR_NOT_EQUAL(t1, t2);
    CU_ASSERT_STRING_EQUAL(t1->version(), "1.0.0");
    CU_ASSERT_STRING_EQUAL(t2->version(), "2.0.0");
    unsigned a = t1->bump();
    CU_ASSERT_EQUAL(t1->bump(), a + 1);
    unsigned b = t2->bump();
    CU_ASSERT_EQUAL(t2->bump(), b + 1);
    CU_ASSERT_EQUAL(t1->bump(), a + 2); /* v2's calls did not touch v1's counter */

    /* find returns the first loaded of that name */
    CU_ASSERT_PTR_EQUAL(hk_loader_find(loader, "tp-twin"), v1);
    CU_ASSERT_PTR_NULL(hk_loader_find(loader, "tp-none"));
    CU_ASSERT_PTR_EQUAL(hk_loader_plugin(loader, 0), v1);
    CU_ASSERT_PTR_EQUAL(hk_loader_plugin(loader, 1), v2);
    CU_ASSERT_PTR_NULL(hk_loader_plugin(loader, 2));
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_acquire_blocks_destroy(void)
{
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_loader_open(loader, tl_plugin("tp_good.so"), &p), HK_STATUS_OK);
    hk_plugin_acquire(p);
    hk_plugin_acquire(p);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_BUSY);
    hk_plugin_release(p);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_BUSY);
    /* the loader is intact after a refused destroy */
    CU_ASSERT_STRING_EQUAL(hk_plugin_name(p), "tp-good");
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 1);
    hk_plugin_release(p);
    hk_plugin_release(p); /* unbalanced: must not wrap the count */
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* Only a plugin that declares HK_PLUGIN_UNLOAD_SAFE is unmapped at destroy.
 * Fresh copies give paths no other test has mapped. */
static void test_unload_only_when_safe(void)
{
    char dir[4096], safe[4096], unsafe[4096];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof(dir)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_unload.so"), dir, "safe.so", 0644, safe,
                                  sizeof(safe)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), dir, "unsafe.so", 0644, unsafe,
                                  sizeof(unsafe)), 0);
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_open(loader, safe, &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_plugin_flags(p), HK_PLUGIN_UNLOAD_SAFE);
    CU_ASSERT_EQUAL(hk_loader_open(loader, unsafe, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tl_is_mapped(safe), 1);
    CU_ASSERT_EQUAL(tl_is_mapped(unsafe), 1);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tl_is_mapped(safe), 0);
    CU_ASSERT_EQUAL(tl_is_mapped(unsafe), 1);

    /* A later loader opening the kept module again gets working code. */
    loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(hk_loader_open(loader, unsafe, &p), HK_STATUS_OK);
    const tp_info_table_t *t = hk_plugin_table(p, TP_INFO_TABLE);
    CU_ASSERT_PTR_NOT_NULL(t);
    if (t)
        CU_ASSERT_STRING_EQUAL(t->version(), "1.1.0");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tl_rmtree(dir);
}

/* A refused module is closed at once: nothing of it was handed out. */
static void test_refused_module_closed(void)
{
    char dir[4096], path[4096];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof(dir)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_nullvt.so"), dir, "bad.so", 0644, path,
                                  sizeof(path)), 0);
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(hk_loader_open(loader, path, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(tl_is_mapped(path), 0);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tl_rmtree(dir);
}

/* A bare file name means the file in the current directory, never a search
 * of the library path. */
static void test_bare_name_is_current_dir(void)
{
    char cwd[4096];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof(cwd)));
    CU_ASSERT_EQUAL_FATAL(chdir(HK_TEST_PLUGIN_DIR), 0);
    hk_loader_t *loader = tl_loader(NULL);
    hk_plugin_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_open(loader, "tp_twin2.so", &p), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(p), "2.0.0");
    CU_ASSERT_EQUAL(hk_loader_open(loader, "x.so", NULL), HK_STATUS_LOAD_FAILED);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), "x.so: open: not an ELF file");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(chdir(cwd), 0);
}

static void test_null_arguments(void)
{
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = (hk_plugin_t *)&loader;
    CU_ASSERT_EQUAL(hk_loader_open(NULL, "x", &p), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(hk_loader_open(loader, NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), "hk_loader_open: path is NULL");
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), 0);
    CU_ASSERT_EQUAL(hk_loader_scan(NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NULL(hk_loader_report(loader, 0));
    CU_ASSERT_PTR_NULL(hk_loader_find(loader, NULL));
    CU_ASSERT_PTR_NULL(hk_plugin_name(NULL));
    CU_ASSERT_PTR_NULL(hk_plugin_vtable(NULL));
    CU_ASSERT_PTR_NULL(hk_plugin_table(NULL, TP_INFO_TABLE));
    CU_ASSERT_EQUAL(hk_plugin_abi(NULL), 0);
    hk_plugin_acquire(NULL);
    hk_plugin_release(NULL);
    CU_ASSERT_STRING_EQUAL(hk_load_stage_name(HK_STAGE_VALIDATE), "validate");
    CU_ASSERT_STRING_EQUAL(hk_load_stage_name((hk_load_stage_t)99), "unknown");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("loader_plugins", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"same file twice: same plugin, one report", test_same_file_twice},
        {"two versions of one plugin side by side", test_two_versions_side_by_side},
        {"acquired plugin: destroy returns BUSY", test_acquire_blocks_destroy},
        {"destroy unmaps only unload-safe plugins", test_unload_only_when_safe},
        {"refused module is closed at once", test_refused_module_closed},
        {"bare file name opens the one in the current dir", test_bare_name_is_current_dir},
        {"NULL arguments: statuses, no crash", test_null_arguments},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    tl_register_abi();
    tl_register_scan();
    tl_register_hostile();
    tl_register_trust();
    tl_register_fork();
    tl_register_threads();
    tl_register_probe();
    return 0;
}
