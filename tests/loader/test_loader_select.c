/* Version selection (hk_loader_select, hk_loader_select_explain) over one
 * plugin name installed in several versions side by side:
 *   sel-a/  sel_1_0_0 1.0.0   sel_1_10_0 1.10.0   sel_1_2_0 1.2.0
 *   sel-b/  sel_1_10_0 1.10.0 (a second file)     sel_1_2_0_b5 1.2.0+b5
 *           sel_2_0_0 2.0.0   sel_2_0_0_rc1 2.0.0-rc.1   sel_bad "1.2"
 * all named "tp-sel" (tests/loader/SConscript). Every chosen plugin is
 * checked by path, by the version it negotiated and by its own code (the
 * tp.info/1 table of the module answers its build's version). Semantic
 * version unit tests are in test_semver.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hk_shell.h"
#include "hk_test.h"
#include "test_loader_util.h"
#include "test_select.h"
#include "tp_info.h"

void ts_register_semver(void);     /* test_semver.c */
void ts_register_doc_ranges(void); /* test_doc_ranges.c */

void env_clear(void)
{
    unsetenv("HK_PLUGIN_PIN");
    unsetenv("HK_PLUGIN_EXCLUDE");
}

static int suite_env_clear(void)
{
    env_clear();
    return 0;
}

/* A loader that scanned HK_PLUGIN_PATH="first:second" (second may be NULL). */
hk_loader_t *sel_loader(const char *first, const char *second, hk_log_fn log, void *user)
{
    char path[8192];
    hk_loader_options_t o;
    hk_loader_t *loader = NULL;

    snprintf(path, sizeof(path), "%s%s%s", first, second ? ":" : "", second ? second : "");
    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.log = log;
    o.log_user = user;
    if (setenv("HK_PLUGIN_PATH", path, 1) != 0 || hk_loader_create(&o, &loader) != HK_STATUS_OK)
        return NULL;
    hk_loader_scan(loader);
    unsetenv("HK_PLUGIN_PATH");
    return loader;
}

/* Selects request and checks that it resolved to file (below the test
 * plugin directory) with version, and that the module's code agrees. */
void expect_sel(hk_loader_t *loader, const char *request, const char *file,
                const char *version)
{
    hk_plugin_t *p = NULL;
    hk_status_t st = hk_loader_select(loader, request, &p);
    const char *want = tl_plugin(file);
    int ok = st == HK_STATUS_OK && p && strcmp(hk_plugin_path(p), want) == 0
             && strcmp(hk_plugin_version(p), version) == 0;
    if (!ok)
        fprintf(stderr, "\n  %s: status %d, got %s %s, expected %s %s (%s)", request, (int)st,
                p ? hk_plugin_version(p) : "-", p ? hk_plugin_path(p) : "-", version, want,
                hk_loader_last_error(loader));
    CU_ASSERT(ok);
    if (!p)
        return;
    CU_ASSERT_STRING_EQUAL(hk_plugin_name(p), "tp-sel");
    const tp_info_table_t *t = hk_plugin_table(p, TP_INFO_TABLE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(t->version(), version);
}

/* Selects request and checks NOT_FOUND with a last error containing want. */
void expect_none(hk_loader_t *loader, const char *request, const char *want)
{
    hk_plugin_t *p = (hk_plugin_t *)loader;
    hk_status_t st = hk_loader_select(loader, request, &p);
    const char *e = hk_loader_last_error(loader);
    if (st != HK_STATUS_NOT_FOUND || !strstr(e, want))
        fprintf(stderr, "\n  %s: status %d, error \"%s\", expected \"%s\"", request, (int)st, e,
                want);
    CU_ASSERT_EQUAL(st, HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, want));
    CU_ASSERT_PTR_NULL(strchr(e, '\n'));
}

static void test_highest_in_range(void)
{
    static const struct {
        const char *request, *file, *version;
    } cases[] = {
        {"tp-sel", "sel-b/sel_2_0_0.so", "2.0.0"}, /* not the rc, not the last loaded */
        {"tp-sel@", "sel-b/sel_2_0_0.so", "2.0.0"},
        {"tp-sel@*", "sel-b/sel_2_0_0.so", "2.0.0"},
        {"tp-sel@^1", "sel-a/sel_1_10_0.so", "1.10.0"}, /* 1.10 > 1.2: numeric */
        {"tp-sel@^1.2", "sel-a/sel_1_10_0.so", "1.10.0"},
        {"tp-sel@~1.2", "sel-a/sel_1_2_0.so", "1.2.0"},
        {"tp-sel@1.2.0", "sel-a/sel_1_2_0.so", "1.2.0"},
        {"tp-sel@1.2.0+b5", "sel-a/sel_1_2_0.so", "1.2.0"}, /* build metadata ignored */
        {"tp-sel@~1.0", "sel-a/sel_1_0_0.so", "1.0.0"},
        {"tp-sel@1.0.0", "sel-a/sel_1_0_0.so", "1.0.0"},
        {"tp-sel@>=1.11", "sel-b/sel_2_0_0.so", "2.0.0"},
        {"tp-sel@^2", "sel-b/sel_2_0_0.so", "2.0.0"},
        {"tp-sel@2.0.0-rc.1", "sel-b/sel_2_0_0_rc1.so", "2.0.0-rc.1"},
        {"tp-sel@~2.0.0-rc.0", "sel-b/sel_2_0_0.so", "2.0.0"},
        {"tp-sel@>=2.0.0-rc.1", "sel-b/sel_2_0_0.so", "2.0.0"},
    };
    hk_loader_t *loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL_FATAL(hk_loader_plugin_count(loader), SEL_COUNT);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_sel(loader, cases[i].request, cases[i].file, cases[i].version);
    /* hk_loader_find keeps its meaning: the first loaded */
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(hk_loader_find(loader, "tp-sel")), "1.0.0");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* Equal versions: the plugin loaded first wins, so the search path order
 * decides, and the two files really are two modules. */
static void test_ties_follow_load_order(void)
{
    hk_loader_t *ab = sel_loader(SEL_A, SEL_B, NULL, NULL);
    hk_loader_t *ba = sel_loader(SEL_B, SEL_A, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ab);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ba);
    expect_sel(ab, "tp-sel@^1", "sel-a/sel_1_10_0.so", "1.10.0");
    expect_sel(ba, "tp-sel@^1", "sel-b/sel_1_10_0.so", "1.10.0");
    expect_sel(ab, "tp-sel@~1.2", "sel-a/sel_1_2_0.so", "1.2.0");
    expect_sel(ba, "tp-sel@~1.2", "sel-b/sel_1_2_0_b5.so", "1.2.0+b5");
    expect_sel(ba, "tp-sel@1.2.0", "sel-b/sel_1_2_0_b5.so", "1.2.0+b5");
    for (int round = 0; round < 3; round++) /* the same answer every time */
        expect_sel(ba, "tp-sel@^1", "sel-b/sel_1_10_0.so", "1.10.0");

    hk_plugin_t *pa = NULL, *pb = NULL;
    CU_ASSERT_EQUAL(hk_loader_select(ab, "tp-sel@^1", &pa), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_select(ba, "tp-sel@^1", &pb), HK_STATUS_OK);
    const tp_info_table_t *ta = hk_plugin_table(pa, TP_INFO_TABLE);
    const tp_info_table_t *tb = hk_plugin_table(pb, TP_INFO_TABLE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ta);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tb);
    CU_ASSERT_PTR_NOT_EQUAL(ta, tb);
    unsigned a = ta->bump(), b = tb->bump();
    CU_ASSERT_EQUAL(ta->bump(), a + 1);
    CU_ASSERT_EQUAL(tb->bump(), b + 1);
    CU_ASSERT_EQUAL(hk_loader_destroy(ab), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(ba), HK_STATUS_OK);

    /* hk_loader_open order counts the same way */
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("sel-b/sel_1_10_0.so"), NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("sel-a/sel_1_10_0.so"), NULL), HK_STATUS_OK);
    expect_sel(loader, "tp-sel", "sel-b/sel_1_10_0.so", "1.10.0");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_not_found_names_candidates(void)
{
    char want[4096];
    hk_loader_t *loader = sel_loader(SEL_A, NULL, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    snprintf(want, sizeof(want), "tp-sel@^3: found 1.0.0 (%s/sel_1_0_0.so: outside ^3), "
             "1.10.0 (%s/sel_1_10_0.so: outside ^3), 1.2.0 (%s/sel_1_2_0.so: outside ^3); "
             "none in range", SEL_A, SEL_A, SEL_A);
    expect_none(loader, "tp-sel@^3", want);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), want);
    /* the line stays valid after later failures */
    const char *kept = hk_loader_last_error(loader);
    expect_none(loader, "tp-nope", "no plugin named tp-nope is loaded (loaded: tp-sel)");
    expect_none(loader, "tp-sel@^4", "tp-sel@^4: found 1.0.0");
    CU_ASSERT_STRING_EQUAL(kept, want);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    expect_none(loader, "tp-sel@^3", "; none selectable");
    snprintf(want, sizeof(want), "2.0.0-rc.1 (%s/sel_2_0_0_rc1.so: outside ^3)", SEL_B);
    expect_none(loader, "tp-sel@^3", want);
    snprintf(want, sizeof(want), "1.2 (%s/sel_bad.so: version is not a semantic version: "
             "'1.2': needs major.minor.patch)", SEL_B);
    expect_none(loader, "tp-sel@^3", want);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    expect_none(loader, "tp-sel", "no plugin named tp-sel is loaded (no plugin is "
                                  "loaded)");
    /* a pre-release alone: not selected by name unless named */
    CU_ASSERT_EQUAL(hk_loader_open(loader, tl_plugin("sel-b/sel_2_0_0_rc1.so"), NULL),
                    HK_STATUS_OK);
    expect_none(loader, "tp-sel", "2.0.0-rc.1 (" SEL_B "/sel_2_0_0_rc1.so: pre-release outside "
                                  "* (name a pre-release of 2.0.0 in the request or "
                                  "HK_PLUGIN_PIN to select it)); none in range");
    expect_sel(loader, "tp-sel@2.0.0-rc.1", "sel-b/sel_2_0_0_rc1.so", "2.0.0-rc.1");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_malformed_requests(void)
{
    static const struct {
        const char *request, *why;
    } bad[] = {
        {"", "hk_loader_select: the request is empty"},
        {"@1.2.3", "@1.2.3: no plugin name before '@'"},
        {"tp-sel@^x", "tp-sel@^x: bad range: '^x': major is not a number: found 'x'"},
        {"tp-sel@1.2", "an exact version needs major.minor.patch"},
        {"tp sel", "tp sel: the plugin name contains a space or control character"},
        {"tp-sel\n@1.0.0", "tp-sel?@1.0.0: the plugin name contains a space or control"},
        {"tp-sel@99999999999999999999.0.0", "major does not fit in 64 bits"},
        {"tp-sel@^1,,^2", "'^1,,^2': comparator 2 is empty"},
        {"tp-sel@@1", "unknown range: starts with '@'"},
    };
    hk_loader_t *loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    size_t reports = hk_loader_report_count(loader);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hk_plugin_t *p = (hk_plugin_t *)loader;
        CU_ASSERT_EQUAL(hk_loader_select(loader, bad[i].request, &p), HK_STATUS_INVALID_VALUE);
        CU_ASSERT_PTR_NULL(p);
        const char *e = hk_loader_last_error(loader);
        if (!strstr(e, bad[i].why))
            fprintf(stderr, "\n  '%s': error \"%s\", expected \"%s\"", bad[i].request, e,
                    bad[i].why);
        CU_ASSERT_PTR_NOT_NULL(strstr(e, bad[i].why));
        CU_ASSERT_PTR_NULL(strchr(e, '\n'));
    }
    /* refused requests loaded nothing and recorded nothing */
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), reports);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), SEL_COUNT);

    hk_plugin_t *p = (hk_plugin_t *)loader;
    CU_ASSERT_EQUAL(hk_loader_select(NULL, "tp-sel", &p), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(hk_loader_select(loader, NULL, &p), HK_STATUS_NULL_POINTER);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), "hk_loader_select: request is NULL");
    CU_ASSERT_EQUAL(hk_loader_select(loader, "tp-sel", NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), "hk_loader_select: out is NULL");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* A path is exactly that file, whatever the environment says. */
static void test_path_request(void)
{
    const char *rc = tl_plugin("sel-b/sel_2_0_0_rc1.so");
    char rc_path[4096], cwd[4096];
    snprintf(rc_path, sizeof(rc_path), "%s", rc);
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", rc_path, 1), 0);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@^1", 1), 0);
    hk_plugin_t *p = NULL, *again = NULL;
    CU_ASSERT_EQUAL(hk_loader_select(loader, rc_path, &p), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(hk_plugin_path(p), rc_path);
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(p), "2.0.0-rc.1");
    CU_ASSERT_EQUAL(hk_loader_select(loader, rc_path, &again), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(again, p);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 1);
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), 1);
    env_clear();
    CU_ASSERT_EQUAL(hk_loader_select(loader, "/nonexistent-dir/x.so", &p),
                    HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(hk_loader_last_error(loader), "/nonexistent-dir/x.so: scan"));

    /* a bare name ending in ".so" is a file of the current directory */
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof(cwd)));
    CU_ASSERT_EQUAL_FATAL(chdir(HK_TEST_PLUGIN_DIR "/sel-a"), 0);
    CU_ASSERT_EQUAL(hk_loader_select(loader, "sel_1_2_0.so", &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(chdir(cwd), 0);
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(p), "1.2.0");
    CU_ASSERT_STRING_EQUAL(hk_plugin_path(p), "sel_1_2_0.so");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_pin(void)
{
    char want[1024];
    hk_loader_t *loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);

    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@^1", 1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_10_0.so", "1.10.0");
    snprintf(want, sizeof(want), "2.0.0 (%s/sel_2_0_0.so: pinned to ^1 by HK_PLUGIN_PIN)", SEL_B);
    expect_none(loader, "tp-sel@^2", want);

    /* intersection of the request and the pin */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@~1.2", 1), 0);
    expect_sel(loader, "tp-sel@^1", "sel-a/sel_1_2_0.so", "1.2.0");
    expect_none(loader, "tp-sel@1.10.0", "pinned to ~1.2 by HK_PLUGIN_PIN");

    /* every pin of the name applies */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@^1,tp-sel@>=1.2", 1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_10_0.so", "1.10.0");
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@>=1.11,tp-sel@^1", 1), 0);
    expect_none(loader, "tp-sel", "pinned to >=1.11 by HK_PLUGIN_PIN");

    /* pins of other names change nothing */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "other@1.0.0,hk-cuda@^9", 1), 0);
    expect_sel(loader, "tp-sel", "sel-b/sel_2_0_0.so", "2.0.0");

    /* a pin naming a pre-release lets a plain request select it */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@2.0.0-rc.1", 1), 0);
    expect_sel(loader, "tp-sel", "sel-b/sel_2_0_0_rc1.so", "2.0.0-rc.1");
    expect_none(loader, "tp-sel@^2", "outside ^2");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    /* pinned counts as out of range in the summary */
    loader = sel_loader(SEL_A, NULL, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@~1.2", 1), 0);
    snprintf(want, sizeof(want), "tp-sel@^1.3: found 1.0.0 (%s/sel_1_0_0.so: outside ^1.3), "
             "1.10.0 (%s/sel_1_10_0.so: pinned to ~1.2 by HK_PLUGIN_PIN), 1.2.0 "
             "(%s/sel_1_2_0.so: outside ^1.3); none in range", SEL_A, SEL_A, SEL_A);
    expect_none(loader, "tp-sel@^1.3", want);
    env_clear();
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_exclude(void)
{
    char entry[8192];
    hk_loader_t *loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);

    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "tp-sel@2.0.0", 1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_10_0.so", "1.10.0");

    /* by path: the tie's winner goes, the other file of 1.10.0 takes over */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", SEL_A "/sel_1_10_0.so", 1), 0);
    expect_sel(loader, "tp-sel@^1", "sel-b/sel_1_10_0.so", "1.10.0");
    /* the same file spelled another way */
    snprintf(entry, sizeof(entry), "%s/./../sel-a/sel_1_10_0.so", SEL_A);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", entry, 1), 0);
    expect_sel(loader, "tp-sel@^1", "sel-b/sel_1_10_0.so", "1.10.0");

    /* a path with an '@' is still a path */
    char dir[4096], sub[4200], copy[4400];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof(dir)), 0);
    snprintf(sub, sizeof(sub), "%s/v@2", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("sel-b/sel_2_0_0.so"), sub, "x.so", 0644, copy,
                                  sizeof(copy)), 0);
    CU_ASSERT_EQUAL(hk_loader_open(loader, copy, NULL), HK_STATUS_OK);
    snprintf(entry, sizeof(entry), "%s/sel_2_0_0.so,%s", SEL_B, copy);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", entry, 1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_10_0.so", "1.10.0");
    snprintf(entry, sizeof(entry), "%s/sel_2_0_0.so", SEL_B);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", entry, 1), 0);
    hk_plugin_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_select(loader, "tp-sel", &p), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(hk_plugin_path(p), copy);
    unlink(copy);
    rmdir(sub);
    tl_rmtree(dir);

    /* a range entry follows the pre-release rule: ^2 leaves the rc */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "tp-sel@^1,tp-sel@^2", 1), 0);
    expect_none(loader, "tp-sel", "excluded by HK_PLUGIN_EXCLUDE entry tp-sel@^1");
    expect_none(loader, "tp-sel", "excluded by HK_PLUGIN_EXCLUDE entry tp-sel@^2");
    expect_none(loader, "tp-sel", "; none selectable");
    expect_sel(loader, "tp-sel@2.0.0-rc.1", "sel-b/sel_2_0_0_rc1.so", "2.0.0-rc.1");

    /* a bare name removes every version, pre-releases too */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "tp-sel", 1), 0);
    expect_none(loader, "tp-sel@2.0.0-rc.1", "excluded by HK_PLUGIN_EXCLUDE entry tp-sel)");

    /* entries that match nothing here change nothing and are not errors */
    size_t reports = hk_loader_report_count(loader);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "other,/nonexistent/x.so,y.so,/a@^1/b,,", 1), 0);
    expect_sel(loader, "tp-sel", "sel-b/sel_2_0_0.so", "2.0.0");
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), reports);
    env_clear();
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

struct log_count {
    pthread_mutex_t lock;
    int pin, exclude;
};

static void count_log(void *user, hk_log_level_t level, const char *msg)
{
    struct log_count *c = user;
    pthread_mutex_lock(&c->lock);
    if (level == HK_LOG_WARN && strncmp(msg, "HK_PLUGIN_PIN: ", 15) == 0)
        c->pin++;
    if (level == HK_LOG_WARN && strncmp(msg, "HK_PLUGIN_EXCLUDE: ", 19) == 0)
        c->exclude++;
    pthread_mutex_unlock(&c->lock);
}

/* Reports of one variable, with the reasons checked to be single lines. */
static int env_reports(hk_loader_t *loader, const char *var, const char *want)
{
    int n = 0, found = want == NULL;
    for (size_t i = 0; i < hk_loader_report_count(loader); i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        if (strcmp(r->path, var) != 0)
            continue;
        n++;
        CU_ASSERT_EQUAL(r->stage, HK_STAGE_SCAN);
        CU_ASSERT_EQUAL(r->status, HK_STATUS_INVALID_VALUE);
        CU_ASSERT_PTR_NULL(r->plugin);
        CU_ASSERT_PTR_NULL(strchr(r->reason, '\n'));
        CU_ASSERT(strlen(r->reason) < 400);
        found |= want && strcmp(r->reason, want) == 0;
    }
    if (!found)
        fprintf(stderr, "\n  no %s report \"%s\"", var, want);
    CU_ASSERT(found);
    return n;
}

/* The scan reports a malformed entry already, before any select: a host
 * that reads the reports after scanning can say what its environment
 * changed. */
static void test_env_malformed_reported_by_scan(void)
{
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@^^1,tp-sel@^1", 1), 0);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "a@@", 1), 0);
    hk_loader_t *loader = sel_loader(SEL_A, NULL, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(env_reports(loader, "HK_PLUGIN_PIN", "entry 'tp-sel@^^1' ignored: bad "
                                "range: '^^1': major is not a number: found '^'"), 1);
    CU_ASSERT_EQUAL(env_reports(loader, "HK_PLUGIN_EXCLUDE", NULL), 1);
    /* a select after it adds nothing */
    expect_sel(loader, "tp-sel", "sel-a/sel_1_10_0.so", "1.10.0");
    CU_ASSERT_EQUAL(env_reports(loader, "HK_PLUGIN_PIN", NULL), 1);
    env_clear();
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_env_malformed(void)
{
    struct log_count logs = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    hk_loader_t *loader = sel_loader(SEL_A, SEL_B, count_log, &logs);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN",
                           "tp-sel@^x,,tp-sel@^1,tp-sel, tp-sel@1,@1,tp-sel@1.2,", 1), 0);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "\x01\x7f,a@@,////", 1), 0);
    for (int round = 0; round < 3; round++) {
        /* the good pin applies, the bad entries are ignored */
        expect_sel(loader, "tp-sel", "sel-a/sel_1_10_0.so", "1.10.0");
        hk_select_entry_t e[SEL_COUNT];
        size_t n = 0;
        CU_ASSERT_EQUAL(hk_loader_select_explain(loader, "tp-sel", e, SEL_COUNT, &n),
                        HK_STATUS_OK);
        /* reported once, however often the variables are read */
        CU_ASSERT_EQUAL(env_reports(loader, "HK_PLUGIN_PIN", NULL), 5);
        CU_ASSERT_EQUAL(env_reports(loader, "HK_PLUGIN_EXCLUDE", NULL), 2);
        CU_ASSERT_EQUAL(logs.pin, 5);
        CU_ASSERT_EQUAL(logs.exclude, 2);
    }
    env_reports(loader, "HK_PLUGIN_PIN", "entry 'tp-sel@^x' ignored: bad range: '^x': major is "
                                         "not a number: found 'x'");
    env_reports(loader, "HK_PLUGIN_PIN", "entry 'tp-sel' ignored: a pin is NAME@RANGE");
    env_reports(loader, "HK_PLUGIN_PIN", "entry ' tp-sel@1' ignored: contains a space or "
                                         "control character");
    env_reports(loader, "HK_PLUGIN_PIN", "entry '@1' ignored: no plugin name before '@'");
    env_reports(loader, "HK_PLUGIN_PIN", "entry 'tp-sel@1.2' ignored: bad range: '1.2': an "
                                         "exact version needs major.minor.patch (write ^1.2 "
                                         "or ~1.2 for a range)");
    env_reports(loader, "HK_PLUGIN_EXCLUDE", "entry '?" "?' ignored: contains a space or control "
                                             "character");
    env_reports(loader, "HK_PLUGIN_EXCLUDE", "entry 'a@@' ignored: bad range: '@': unknown "
                                             "range: starts with '@' (a range is *, or "
                                             "comparators such as 1.2.3, ^1.2, ~1.2, >=1.2, <2 "
                                             "joined by commas)");

    /* a huge value: one short report, no crash */
    size_t big = 200000;
    char *huge = malloc(big + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(huge);
    memset(huge, '@', big);
    huge[big] = '\0';
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", huge, 1), 0);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_10_0.so", "1.10.0");
    CU_ASSERT_EQUAL(env_reports(loader, "HK_PLUGIN_EXCLUDE", NULL), 3);
    free(huge);
    env_clear();
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    /* once per loader: a new loader reports again */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel", 1), 0);
    loader = sel_loader(SEL_A, NULL, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    expect_sel(loader, "tp-sel", "sel-a/sel_1_10_0.so", "1.10.0");
    CU_ASSERT_EQUAL(env_reports(loader, "HK_PLUGIN_PIN", NULL), 1);
    env_clear();
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void expect_entry(const hk_select_entry_t *e, const char *file, hk_select_verdict_t v,
                         const char *reason)
{
    int ok = e->plugin && strcmp(hk_plugin_path(e->plugin), tl_plugin(file)) == 0
             && e->verdict == v && strcmp(e->reason, reason) == 0;
    if (!ok)
        fprintf(stderr, "\n  entry %s: %s %s \"%s\", expected %s %s \"%s\"",
                e->plugin ? hk_plugin_path(e->plugin) : "-", hk_select_verdict_name(e->verdict),
                "", e->reason, tl_plugin(file), hk_select_verdict_name(v), reason);
    CU_ASSERT(ok);
}

static void test_explain(void)
{
    hk_select_entry_t e[SEL_COUNT + 1];
    char dup[1024];
    size_t n = 99;
    hk_loader_t *loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);

    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@>=1.2", 1), 0);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "tp-sel@1.2.0", 1), 0);
    CU_ASSERT_EQUAL(hk_loader_select_explain(loader, "tp-sel@^1", e, SEL_COUNT, &n),
                    HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(n, SEL_COUNT);
    snprintf(dup, sizeof(dup), "same version as the chosen 1.10.0, loaded earlier from "
             "%s/sel_1_10_0.so", SEL_A);
    expect_entry(&e[0], "sel-a/sel_1_0_0.so", HK_SELECT_PINNED,
                 "pinned to >=1.2 by HK_PLUGIN_PIN");
    expect_entry(&e[1], "sel-a/sel_1_10_0.so", HK_SELECT_CHOSEN,
                 "chosen: highest version in ^1 and HK_PLUGIN_PIN tp-sel@>=1.2 (loaded first "
                 "of 2 files with 1.10.0)");
    expect_entry(&e[2], "sel-a/sel_1_2_0.so", HK_SELECT_EXCLUDED,
                 "excluded by HK_PLUGIN_EXCLUDE entry tp-sel@1.2.0");
    expect_entry(&e[3], "sel-b/sel_1_10_0.so", HK_SELECT_DUPLICATE, dup);
    expect_entry(&e[4], "sel-b/sel_1_2_0_b5.so", HK_SELECT_EXCLUDED,
                 "excluded by HK_PLUGIN_EXCLUDE entry tp-sel@1.2.0");
    expect_entry(&e[5], "sel-b/sel_2_0_0.so", HK_SELECT_OUT_OF_RANGE, "outside ^1");
    expect_entry(&e[6], "sel-b/sel_2_0_0_rc1.so", HK_SELECT_OUT_OF_RANGE, "outside ^1");
    expect_entry(&e[7], "sel-b/sel_bad.so", HK_SELECT_BAD_VERSION,
                 "version is not a semantic version: '1.2': needs major.minor.patch");
    env_clear();

    CU_ASSERT_EQUAL(hk_loader_select_explain(loader, "tp-sel", e, SEL_COUNT, &n), HK_STATUS_OK);
    expect_entry(&e[0], "sel-a/sel_1_0_0.so", HK_SELECT_LOWER,
                 "lower than 2.0.0, the chosen version");
    expect_entry(&e[5], "sel-b/sel_2_0_0.so", HK_SELECT_CHOSEN,
                 "chosen: highest version in any release");
    expect_entry(&e[6], "sel-b/sel_2_0_0_rc1.so", HK_SELECT_OUT_OF_RANGE,
                 "pre-release outside * (name a pre-release of 2.0.0 in the request or "
                 "HK_PLUGIN_PIN to select it)");

    /* explain and select agree on every request */
    static const char *const requests[] = {"tp-sel", "tp-sel@^1", "tp-sel@~1.2",
                                           "tp-sel@2.0.0-rc.1", "tp-sel@^3", "tp-sel@1.0.0"};
    for (size_t r = 0; r < sizeof(requests) / sizeof(requests[0]); r++) {
        hk_plugin_t *p = NULL, *chosen = NULL;
        hk_status_t st = hk_loader_select(loader, requests[r], &p);
        CU_ASSERT_EQUAL(hk_loader_select_explain(loader, requests[r], e, SEL_COUNT, &n), st);
        int nchosen = 0;
        for (size_t i = 0; i < n; i++)
            if (e[i].verdict == HK_SELECT_CHOSEN) {
                nchosen++;
                chosen = e[i].plugin;
            }
        CU_ASSERT_EQUAL(nchosen, st == HK_STATUS_OK ? 1 : 0);
        CU_ASSERT_PTR_EQUAL(chosen, p);
    }

    /* capacity: count is the total, only capacity entries are written */
    memset(&e[2], 0x5a, sizeof(e[2]));
    CU_ASSERT_EQUAL(hk_loader_select_explain(loader, "tp-sel@^1", e, 2, &n), HK_STATUS_OK);
    CU_ASSERT_EQUAL(n, SEL_COUNT);
    CU_ASSERT_EQUAL(e[2].reason[0], 0x5a);
    CU_ASSERT_EQUAL(hk_loader_select_explain(loader, "tp-sel@^1", NULL, 0, &n), HK_STATUS_OK);
    CU_ASSERT_EQUAL(n, SEL_COUNT);

    /* refusals */
    CU_ASSERT_EQUAL(hk_loader_select_explain(loader, tl_plugin("sel-a/sel_1_0_0.so"), e,
                                             SEL_COUNT, &n), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(hk_loader_last_error(loader), "a path names one file"));
    CU_ASSERT_EQUAL(hk_loader_select_explain(loader, "tp-sel@^x", e, SEL_COUNT, &n),
                    HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(hk_loader_select_explain(loader, "tp-sel", e, SEL_COUNT, NULL),
                    HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_select_explain(loader, "tp-sel", NULL, 3, &n),
                    HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_select_explain(NULL, "tp-sel", e, SEL_COUNT, &n),
                    HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    CU_ASSERT_STRING_EQUAL(hk_select_verdict_name(HK_SELECT_CHOSEN), "chosen");
    CU_ASSERT_STRING_EQUAL(hk_select_verdict_name(HK_SELECT_DUPLICATE), "duplicate");
    CU_ASSERT_STRING_EQUAL(hk_select_verdict_name(HK_SELECT_OUT_OF_RANGE), "out-of-range");
    CU_ASSERT_STRING_EQUAL(hk_select_verdict_name(HK_SELECT_BAD_VERSION), "bad-version");
    CU_ASSERT_STRING_EQUAL(hk_select_verdict_name((hk_select_verdict_t)42), "unknown");
}

/* ---- several threads on one loader ---- */

#define SEL_THREADS 4
#define SEL_ROUNDS 150

struct sel_job {
    hk_loader_t *loader;
    hk_plugin_t *expect[4]; /* per request below; NULL: NOT_FOUND */
    int failures;
};

static const char *const sel_requests[4] = {"tp-sel", "tp-sel@^1", "tp-sel@~1.2", "tp-sel@^3"};

static void *select_thread(void *arg)
{
    struct sel_job *job = arg;
    hk_select_entry_t e[16];
    for (int round = 0; round < SEL_ROUNDS; round++) {
        size_t r = (size_t)round % 4, n = 0;
        hk_plugin_t *p = NULL;
        hk_status_t st = hk_loader_select(job->loader, sel_requests[r], &p);
        if (st != (job->expect[r] ? HK_STATUS_OK : HK_STATUS_NOT_FOUND) || p != job->expect[r])
            job->failures++;
        if (!job->expect[r] && !strstr(hk_loader_last_error(job->loader), ": found "))
            job->failures++;
        st = hk_loader_select_explain(job->loader, sel_requests[r], e, 16, &n);
        if (n < SEL_COUNT || st != (job->expect[r] ? HK_STATUS_OK : HK_STATUS_NOT_FOUND))
            job->failures++;
        if (hk_loader_select(job->loader, "tp-sel@^x", &p) != HK_STATUS_INVALID_VALUE || p)
            job->failures++;
    }
    return NULL;
}

struct open_job {
    hk_loader_t *loader;
    char paths[3][4096];
    int failures;
};

/* Loads more files of versions already loaded: they come later, so they
 * may never change an answer. */
static void *open_thread(void *arg)
{
    struct open_job *job = arg;
    for (int i = 0; i < 3; i++)
        if (hk_loader_open(job->loader, job->paths[i], NULL) != HK_STATUS_OK)
            job->failures++;
    return NULL;
}

static void test_concurrent_select(void)
{
    static const char *const copies[3] = {"sel-b/sel_2_0_0.so", "sel-a/sel_1_10_0.so",
                                          "sel-a/sel_1_2_0.so"};
    char dir[4096];
    struct sel_job jobs[SEL_THREADS];
    struct open_job opener;
    pthread_t threads[SEL_THREADS + 1];
    hk_loader_t *loader = sel_loader(SEL_A, SEL_B, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof(dir)), 0);
    memset(&opener, 0, sizeof(opener));
    opener.loader = loader;
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof(name), "copy%d.so", i);
        CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin(copies[i]), dir, name, 0644, opener.paths[i],
                                      sizeof(opener.paths[i])), 0);
    }
    for (int t = 0; t < SEL_THREADS; t++) {
        memset(&jobs[t], 0, sizeof(jobs[t]));
        jobs[t].loader = loader;
        for (int r = 0; r < 3; r++)
            CU_ASSERT_EQUAL(hk_loader_select(loader, sel_requests[r], &jobs[t].expect[r]),
                            HK_STATUS_OK);
    }
    /* a malformed pin, read by every thread at once: still one report */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@^x", 1), 0);
    for (int t = 0; t < SEL_THREADS; t++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[t], NULL, select_thread, &jobs[t]), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[SEL_THREADS], NULL, open_thread, &opener), 0);
    for (int t = 0; t <= SEL_THREADS; t++)
        pthread_join(threads[t], NULL);
    env_clear();
    CU_ASSERT_EQUAL(env_reports(loader, "HK_PLUGIN_PIN", NULL), 1);
    for (int t = 0; t < SEL_THREADS; t++)
        CU_ASSERT_EQUAL(jobs[t].failures, 0);
    CU_ASSERT_EQUAL(opener.failures, 0);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), SEL_COUNT + 3);
    expect_sel(loader, "tp-sel", "sel-b/sel_2_0_0.so", "2.0.0");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tl_rmtree(dir);
}

/* ---- elevated privileges ---- */

/* A directory readable by uid 65534 with two versions, and the helper. */
static int setuid_fixture(char *dir, size_t n, char *helper, size_t hn)
{
    char path[4096];
    if (tl_mkdtemp(dir, n) != 0 || chmod(dir, 0755) != 0)
        return -1;
    if (tl_copy(tl_plugin("sel-b/sel_2_0_0.so"), dir, "v2.so", 0644, path, sizeof(path)) != 0
        || tl_copy(tl_plugin("sel-a/sel_1_10_0.so"), dir, "v1.so", 0644, path, sizeof(path)) != 0
        || tl_copy(HK_TEST_SELECT_HELPER, dir, "helper", 0755, helper, hn) != 0)
        return -1;
    return 0;
}

/* The control: without privileges the helper honours the variables. */
static void test_env_read_unprivileged(void)
{
    char dir[4096], helper[4096], cmd[8300], out[65536];
    CU_ASSERT_EQUAL_FATAL(setuid_fixture(dir, sizeof(dir), helper, sizeof(helper)), 0);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "tp-sel@2.0.0", 1), 0);
    snprintf(cmd, sizeof(cmd), "'%s' '%s' tp-sel", helper, dir);
    CU_ASSERT_EQUAL(hk_shell_into(cmd, out, sizeof(out)), 0);
    env_clear();
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "secure=0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "select=OK|1.10.0|"));
    CU_ASSERT_PTR_NULL(strstr(out, "ignored"));
    tl_rmtree(dir);
}

/* A set-user-ID copy (owner 65534) runs with AT_SECURE: both variables are
 * ignored, and one report each says so. */
static void test_env_ignored_when_setuid(void)
{
    char dir[4096], helper[4096], cmd[8300], out[65536];
    CU_ASSERT_EQUAL_FATAL(setuid_fixture(dir, sizeof(dir), helper, sizeof(helper)), 0);
    CU_ASSERT_EQUAL_FATAL(chown(helper, 65534, 65534), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(helper, 04755), 0); /* after chown, which clears it */
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_EXCLUDE", "tp-sel@2.0.0", 1), 0);
    CU_ASSERT_EQUAL(setenv("HK_PLUGIN_PIN", "tp-sel@^1", 1), 0);
    snprintf(cmd, sizeof(cmd), "'%s' '%s' tp-sel", helper, dir);
    CU_ASSERT_EQUAL(hk_shell_into(cmd, out, sizeof(out)), 0);
    env_clear();
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "secure=1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "select=OK|2.0.0|"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "report=HK_PLUGIN_PIN|INSECURE|HK_PLUGIN_PIN ignored: "
                                       "the process runs with elevated privileges (AT_SECURE)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "report=HK_PLUGIN_EXCLUDE|INSECURE|HK_PLUGIN_EXCLUDE "
                                       "ignored: the process runs with elevated privileges "
                                       "(AT_SECURE)\n"));
    tl_rmtree(dir);
}

int hk_test_register(void)
{
    ts_register_semver();
    CU_pSuite s = hk_test_suite("loader_select", suite_env_clear, suite_env_clear);
    static const hk_test_case_t tests[] = {
        {"highest version in range, per request", test_highest_in_range},
        {"equal versions: the first loaded wins", test_ties_follow_load_order},
        {"NOT_FOUND names every candidate", test_not_found_names_candidates},
        {"malformed requests: INVALID_VALUE, nothing loaded", test_malformed_requests},
        {"path request: exactly that file, env not applied", test_path_request},
        {"HK_PLUGIN_PIN: intersection with the request", test_pin},
        {"HK_PLUGIN_EXCLUDE: by version, path and name", test_exclude},
        {"malformed variables: ignored, reported once", test_env_malformed},
        {"malformed variables: reported by the scan", test_env_malformed_reported_by_scan},
        {"explain: a verdict and reason per plugin", test_explain},
        {"concurrent select and explain while opening", test_concurrent_select},
        {"helper without privileges reads the variables", test_env_read_unprivileged},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    CU_pTest t = hk_test_add(s, "set-user-ID helper ignores the variables (AT_SECURE)",
                             test_env_ignored_when_setuid);
    const char *why = tl_setuid_loading_unavailable();
    if (why)
        hk_test_skip(t, why);
    ts_register_select_ranges(s);
    ts_register_causes(s);
    ts_register_doc_ranges();
    return 0;
}
