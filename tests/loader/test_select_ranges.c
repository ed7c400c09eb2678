/* Selection with ranges that list comparators (">=1.2, <2"), in a request
 * and in HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE, where a comma also separates
 * entries. Over the tp-sel versions of test_loader_select.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_loader_util.h"
#include "test_select.h"

/* 1 when the loader has a report of variable var with exactly reason want. */
static int has_env_report(hk_loader_t *loader, const char *var, const char *want)
{
    for (size_t i = 0; i < hk_loader_report_count(loader); i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        if (strcmp(r->path, var) == 0 && strcmp(r->reason, want) == 0)
            return 1;
    }
    fprintf(stderr, "\n  no %s report \"%s\"", var, want);
    return 0;
}

static size_t env_report_count(hk_loader_t *loader, const char *var)
{
    size_t n = 0;
    for (size_t i = 0; i < hk_loader_report_count(loader); i++)
        n += strcmp(hk_loader_report(loader, i)->path, var) == 0;
    return n;
}

static void test_request_lists(void)
{
    static const struct {
        const char *request, *file, *version;
    } cases[] = {
        {"tp-sel@>=1.2, <2", "sel-a/sel_1_10_0.so", "1.10.0"},
        {"tp-sel@>=1.2,<1.10", "sel-a/sel_1_2_0.so", "1.2.0"}, /* the first loaded 1.2.0 */
        {"tp-sel@>=1.0.0 , ^1 , <1.10.0", "sel-a/sel_1_2_0.so", "1.2.0"},
        {"tp-sel@<2", "sel-a/sel_1_10_0.so", "1.10.0"}, /* not 2.0.0-rc.1 */
        {"tp-sel@<=1.2.0", "sel-a/sel_1_2_0.so", "1.2.0"},
        {"tp-sel@>1.2.0", "sel-b/sel_2_0_0.so", "2.0.0"},
        {"tp-sel@>1.2.0, <2.0.0", "sel-a/sel_1_10_0.so", "1.10.0"},
        {"tp-sel@=1.0.0", "sel-a/sel_1_0_0.so", "1.0.0"},
        {"tp-sel@>=2.0.0-rc.1, <2.0.0", "sel-b/sel_2_0_0_rc1.so", "2.0.0-rc.1"},
    };
    char want[1024];
    hk_loader_t *loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_sel(loader, cases[i].request, cases[i].file, cases[i].version);

    snprintf(want, sizeof(want), "2.0.0-rc.1 (%s/sel_2_0_0_rc1.so: pre-release outside "
             ">1.10.0, <2 (name a pre-release of 2.0.0 in the request or HK_PLUGIN_PIN to "
             "select it))", SEL_B);
    expect_none(loader, "tp-sel@>1.10.0, <2", want);
    expect_none(loader, "tp-sel@>1.10.0, <2", "/sel_1_10_0.so: outside >1.10.0, <2)");

    /* explain names the whole range */
    hk_select_entry_t e[SEL_COUNT];
    size_t n = 0, chosen = 0;
    CU_ASSERT_EQUAL(hk_loader_select_explain(loader, "tp-sel@>=1.2, <2", e, SEL_COUNT, &n),
                    HK_STATUS_OK);
    CU_ASSERT_EQUAL(n, SEL_COUNT);
    for (size_t i = 0; i < n && i < SEL_COUNT; i++)
        if (e[i].verdict == HK_SELECT_CHOSEN) {
            chosen++;
            CU_ASSERT_STRING_EQUAL(e[i].reason, "chosen: highest version in >=1.2, <2 (loaded "
                                                "first of 2 files with 1.10.0)");
        }
    CU_ASSERT_EQUAL(chosen, 1);

    /* malformed lists: INVALID_VALUE, the comparator named */
    static const struct {
        const char *request, *why;
    } bad[] = {
        {"tp-sel@>=1,,<2", "tp-sel@>=1,,<2: bad range: '>=1,,<2': comparator 2 is empty"},
        {"tp-sel@>= 1", "tp-sel@>= 1: bad range: '>= 1': space between '>=' and its version"},
        {"tp-sel@^1,<2.x", "'^1,<2.x': comparator 2 '<2.x': minor is not a number"},
        {"tp-sel@^1 || ^2", "'||' (either of two ranges) is not supported"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hk_plugin_t *p = (hk_plugin_t *)loader;
        CU_ASSERT_EQUAL(hk_loader_select(loader, bad[i].request, &p), HK_STATUS_INVALID_VALUE);
        CU_ASSERT_PTR_NULL(p);
        const char *err = hk_loader_last_error(loader);
        if (!strstr(err, bad[i].why))
            fprintf(stderr, "\n  '%s': error \"%s\", expected \"%s\"", bad[i].request, err,
                    bad[i].why);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].why));
    }
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* In the variables a comma followed by an operator continues the range of
 * the entry before it; anything else starts a new entry. */
static void test_variable_lists(void)
{
    hk_loader_t *loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    size_t reports = hk_loader_report_count(loader);

    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@>=1.2,<1.10", 1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_2_0.so", "1.2.0");
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "other@^1,tp-sel@>=1.2, <1.10,hk-cuda@>=9, <10",
                           1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_2_0.so", "1.2.0");
    expect_none(loader, "tp-sel@^2", "pinned to >=1.2, <1.10 by HK_PLUGIN_PIN");
    /* each kind of operator continues, a pre-release named in a pin too */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@^1,~1.2,>=1.0.0,>1.0.0,<2,<=1.2.0,=1.2.0",
                           1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_2_0.so", "1.2.0");
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@>=2.0.0-rc.1,<2.0.0", 1), 0);
    expect_sel(loader, "tp-sel", "sel-b/sel_2_0_0_rc1.so", "2.0.0-rc.1");
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), reports); /* nothing refused */

    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "", 1), 0);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "tp-sel@>=1.10.0,<3,tp-sel@1.0.0", 1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_2_0.so", "1.2.0");
    expect_none(loader, "tp-sel@^1.10", "excluded by HK_PLUGIN_EXCLUDE entry tp-sel@>=1.10.0,<3)");
    expect_none(loader, "tp-sel@1.0.0", "excluded by HK_PLUGIN_EXCLUDE entry tp-sel@1.0.0)");
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), reports);
    env_clear();
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    /* a malformed list is one ignored entry; a bare version after a comma
     * starts an entry of its own */
    loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@>=1.2,<x,tp-sel@^1,1.2.0", 1), 0);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "tp-sel@<1.2,1.0.0", 1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_10_0.so", "1.10.0");
    CU_ASSERT_EQUAL(env_report_count(loader, "HK_PLUGIN_PIN"), 2);
    CU_ASSERT(has_env_report(loader, "HK_PLUGIN_PIN", "entry 'tp-sel@>=1.2,<x' ignored: bad "
                             "range: '>=1.2,<x': comparator 2 '<x': major is not a number: "
                             "found 'x'"));
    CU_ASSERT(has_env_report(loader, "HK_PLUGIN_PIN", "entry '1.2.0' ignored: a pin is "
                             "NAME@RANGE"));
    /* "1.0.0" is a name there: valid, and it matches no plugin */
    CU_ASSERT_EQUAL(env_report_count(loader, "HK_PLUGIN_EXCLUDE"), 0);
    expect_none(loader, "tp-sel@1.0.0", "excluded by HK_PLUGIN_EXCLUDE entry tp-sel@<1.2)");
    env_clear();
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

void ts_register_select_ranges(CU_pSuite s)
{
    hk_test_add(s, "range lists in a request: every comparator holds", test_request_lists);
    hk_test_add(s, "range lists in HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE", test_variable_lists);
}
