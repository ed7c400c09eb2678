/* Scanning: directories, file filtering and order, permissions, the
 * HK_PLUGIN_PATH variable and elevated privileges, the log callback, and
 * concurrent use. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hk_shell.h"
#include "hk_test.h"
#include "test_loader_util.h"

/* The files the build puts in HK_TEST_PLUGIN_DIR (README.txt besides) and
 * which of them load. Sorted: the scan reports in name order. */
static const struct {
    const char *file;
    int loads;
} plugin_dir[] = {
    {"tp_badmajor.so", 0}, {"tp_badminor.so", 0}, {"tp_badsize.so", 0},
    {"tp_badtype.so", 0},  {"tp_class32.so", 0},  {"tp_error.so", 0},
    {"tp_good.so", 1},     {"tp_longvt.so", 1},   {"tp_major2.so", 0},
    {"tp_newer.so", 1},    {"tp_nosym.so", 0},    {"tp_nullname.so", 0},
    {"tp_nullslot.so", 0}, {"tp_nullvt.so", 0},   {"tp_older.so", 1},
    {"tp_shortvt.so", 0},  {"tp_twin1.so", 1},    {"tp_twin2.so", 1},
    {"tp_unload.so", 1},   {"x.so", 0},
};
#define PLUGIN_DIR_FILES (sizeof(plugin_dir) / sizeof(plugin_dir[0]))
#define PLUGIN_DIR_LOADS 7u

/* Every candidate of the build's test-plugin directory has one report, in
 * name order; bad ones never stop the good ones. */
static void check_plugin_dir_scan(const hk_loader_t *loader)
{
    CU_ASSERT_EQUAL_FATAL(hk_loader_report_count(loader), PLUGIN_DIR_FILES);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), PLUGIN_DIR_LOADS);
    for (size_t i = 0; i < PLUGIN_DIR_FILES; i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        CU_ASSERT_STRING_EQUAL(r->path, tl_plugin(plugin_dir[i].file));
        CU_ASSERT_EQUAL(r->stage == HK_STAGE_LOADED, plugin_dir[i].loads);
        CU_ASSERT_EQUAL(r->plugin != NULL, plugin_dir[i].loads);
        CU_ASSERT_EQUAL(r->status == HK_STATUS_OK, plugin_dir[i].loads);
        CU_ASSERT_EQUAL(r->reason[0] == '\0', plugin_dir[i].loads);
    }
}

static void test_scan_plugin_dir(void)
{
    hk_loader_t *loader = tl_loader(HK_TEST_PLUGIN_DIR);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
    check_plugin_dir_scan(loader);
    /* A second scan finds nothing new: one report per candidate. */
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
    check_plugin_dir_scan(loader);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static int log_warns;
static int log_others;
static char log_first[4096];

static void count_log(void *user, hk_log_level_t level, const char *msg)
{
    (void)user;
    if (level == HK_LOG_WARN) {
        if (log_warns++ == 0)
            snprintf(log_first, sizeof(log_first), "%s", msg);
    } else {
        log_others++;
    }
}

/* A directory of good and bad candidates and things that are not
 * candidates: a hidden .so, a text file, a directory named *.so. */
static void test_scan_mixed_dir(void)
{
    char dir[4096], p[8400], sub[4200];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof(dir)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("x.so"), dir, "x.so", 0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), dir, "b_good.so", 0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_nullvt.so"), dir, "c_nullvt.so", 0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), dir, ".hidden.so", 0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("README.txt"), dir, "notes.txt", 0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), dir, "a_good.so.1", 0644, p, sizeof(p)), 0);
    snprintf(sub, sizeof(sub), "%s/d_dir.so", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);

    hk_loader_options_t o;
    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.default_dir = dir;
    o.ignore_env = 1;
    o.log = count_log;
    log_warns = log_others = 0;
    hk_loader_t *loader = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);

    static const struct {
        const char *name;
        hk_load_stage_t stage;
        hk_status_t status;
    } want[] = {
        {"b_good.so", HK_STAGE_LOADED, HK_STATUS_OK},
        {"c_nullvt.so", HK_STAGE_VALIDATE, HK_STATUS_NULL_POINTER},
        {"d_dir.so", HK_STAGE_SCAN, HK_STATUS_LOAD_FAILED},
        {"x.so", HK_STAGE_OPEN, HK_STATUS_LOAD_FAILED},
    };
    CU_ASSERT_EQUAL_FATAL(hk_loader_report_count(loader), 4);
    for (size_t i = 0; i < 4; i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        snprintf(p, sizeof(p), "%s/%s", dir, want[i].name);
        CU_ASSERT_STRING_EQUAL(r->path, p);
        CU_ASSERT_EQUAL(r->stage, want[i].stage);
        CU_ASSERT_EQUAL(r->status, want[i].status);
    }
    CU_ASSERT_STRING_EQUAL(hk_loader_report(loader, 2)->reason, "not a regular file");
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 1);
    /* one warning line per refused candidate, nothing else */
    CU_ASSERT_EQUAL(log_warns, 3);
    CU_ASSERT_EQUAL(log_others, 0);
    snprintf(p, sizeof(p), "%s/c_nullvt.so: validate: answer vtable is NULL", dir);
    CU_ASSERT_STRING_EQUAL(log_first, p);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tl_rmtree(dir);
}

static void test_world_writable_file(void)
{
    char dir[4096], path[4096], reason[4200];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof(dir)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), dir, "ww.so", 0666, path,
                                  sizeof(path)), 0);
    hk_loader_t *loader = tl_loader(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(hk_loader_open(loader, path, NULL), HK_STATUS_INSECURE);
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_loader_report_count(loader), 1);
    const hk_load_report_t *r = hk_loader_report(loader, 0);
    CU_ASSERT_EQUAL(r->stage, HK_STAGE_SCAN);
    CU_ASSERT_EQUAL(r->status, HK_STATUS_INSECURE);
    CU_ASSERT_STRING_EQUAL(r->reason, "file is writable by others (mode 0666)");
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 0);
    CU_ASSERT_EQUAL(tl_is_mapped(path), 0);

    /* Fixed on disk, it is a new candidate and loads. */
    CU_ASSERT_EQUAL_FATAL(chmod(path, 0644), 0);
    CU_ASSERT_EQUAL(hk_loader_open(loader, path, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), 2);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    /* A world-writable directory refuses everything in it. */
    CU_ASSERT_EQUAL_FATAL(chmod(dir, 0777), 0);
    loader = tl_loader(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_loader_report_count(loader), 1);
    r = hk_loader_report(loader, 0);
    CU_ASSERT_STRING_EQUAL(r->path, dir);
    CU_ASSERT_EQUAL(r->stage, HK_STAGE_SCAN);
    CU_ASSERT_EQUAL(r->status, HK_STATUS_INSECURE);
    CU_ASSERT_STRING_EQUAL(r->reason, "directory is writable by others (mode 0777)");
    CU_ASSERT_EQUAL(hk_loader_open(loader, path, NULL), HK_STATUS_INSECURE);
    r = tl_report(loader, path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    snprintf(reason, sizeof(reason), "directory %s is writable by others (mode 0777)", dir);
    CU_ASSERT_STRING_EQUAL(r->reason, reason);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 0);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tl_rmtree(dir);
}

static void test_missing_dir(void)
{
    hk_loader_t *loader = tl_loader("/nonexistent/hk-plugins");
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_loader_report_count(loader), 1);
    const hk_load_report_t *r = hk_loader_report(loader, 0);
    CU_ASSERT_STRING_EQUAL(r->path, "/nonexistent/hk-plugins");
    CU_ASSERT_EQUAL(r->stage, HK_STAGE_SCAN);
    CU_ASSERT_EQUAL(r->status, HK_STATUS_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(r->reason, "cannot read directory: No such file or directory");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* HK_PLUGIN_PATH: colon-separated, empty entries skipped, searched before
 * the default directory; ignore_env turns it off. */
static void test_env_path(void)
{
    char a[4096], b[4096], p[4096], env[8400];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(a, sizeof(a)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(b, sizeof(b)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_twin2.so"), a, "p.so", 0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_twin1.so"), b, "p.so", 0644, p, sizeof(p)), 0);
    snprintf(env, sizeof(env), "%s::%s", a, b);
    CU_ASSERT_EQUAL_FATAL(setenv("HK_PLUGIN_PATH", env, 1), 0);

    hk_loader_options_t o;
    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.default_dir = HK_TEST_PLUGIN_DIR;
    hk_loader_t *loader = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 2 + PLUGIN_DIR_LOADS);
    /* the environment's directories come first, in their order */
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(hk_loader_plugin(loader, 0)), "2.0.0");
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(hk_loader_plugin(loader, 1)), "1.0.0");
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(hk_loader_find(loader, "tp-twin")), "2.0.0");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);

    o.ignore_env = 1;
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), PLUGIN_DIR_LOADS);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    unsetenv("HK_PLUGIN_PATH");
    tl_rmtree(a);
    tl_rmtree(b);
}

/* Without elevated privileges the helper honours HK_PLUGIN_PATH: the control
 * for the set-user-ID test below. */
static void test_env_path_unprivileged_helper(void)
{
    char out[65536];
    CU_ASSERT_EQUAL_FATAL(setenv("HK_PLUGIN_PATH", HK_TEST_PLUGIN_DIR, 1), 0);
    CU_ASSERT_EQUAL(hk_shell_into(HK_TEST_SECURE_HELPER, out, sizeof(out)), 0);
    unsetenv("HK_PLUGIN_PATH");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "secure=0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "plugins=7\n"));
    CU_ASSERT_PTR_NULL(strstr(out, "ignored"));
}

/* A set-user-ID copy (owner 65534) runs with AT_SECURE: HK_PLUGIN_PATH is
 * ignored and one report says so. */
static void test_env_path_ignored_when_setuid(void)
{
    char dir[4096], path[4096], out[65536];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof(dir)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(HK_TEST_SECURE_HELPER, dir, "helper", 0755, path,
                                  sizeof(path)), 0);
    CU_ASSERT_EQUAL_FATAL(chown(path, 65534, 65534), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(path, 04755), 0); /* after chown, which clears it */
    CU_ASSERT_EQUAL_FATAL(setenv("HK_PLUGIN_PATH", HK_TEST_PLUGIN_DIR, 1), 0);
    CU_ASSERT_EQUAL(hk_shell_into(path, out, sizeof(out)), 0);
    unsetenv("HK_PLUGIN_PATH");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "secure=1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "plugins=0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "report=HK_PLUGIN_PATH|scan|INSECURE|HK_PLUGIN_PATH "
                                       "ignored: the process runs with elevated privileges "
                                       "(AT_SECURE)\n"));
    tl_rmtree(dir);
}

struct scan_job {
    hk_loader_t *loader;
    int open_each; /* 1: open the files one by one instead of scanning */
};

static void *scan_thread(void *arg)
{
    struct scan_job *job = arg;
    for (int round = 0; round < 3; round++) {
        if (!job->open_each) {
            hk_loader_scan(job->loader);
            continue;
        }
        for (size_t i = PLUGIN_DIR_FILES; i-- > 0;) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", HK_TEST_PLUGIN_DIR, plugin_dir[i].file);
            hk_loader_open(job->loader, path, NULL);
        }
    }
    return NULL;
}

/* One loader, one thread scanning while another opens the same files in
 * reverse order: each file ends with exactly one report and loads once.
 * Two more loaders scan at the same time to share libltdl's global state. */
static void test_concurrent_scan_and_open(void)
{
    hk_loader_t *shared = tl_loader(HK_TEST_PLUGIN_DIR);
    hk_loader_t *other1 = tl_loader(HK_TEST_PLUGIN_DIR);
    hk_loader_t *other2 = tl_loader(HK_TEST_PLUGIN_DIR);
    CU_ASSERT_FATAL(shared && other1 && other2);
    struct scan_job jobs[4] = {{shared, 0}, {shared, 1}, {other1, 0}, {other2, 0}};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, scan_thread, &jobs[i]), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);

    CU_ASSERT_EQUAL(hk_loader_report_count(shared), PLUGIN_DIR_FILES);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(shared), PLUGIN_DIR_LOADS);
    for (size_t i = 0; i < PLUGIN_DIR_FILES; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", HK_TEST_PLUGIN_DIR, plugin_dir[i].file);
        const hk_load_report_t *r = tl_report(shared, path);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        CU_ASSERT_EQUAL(r->stage == HK_STAGE_LOADED, plugin_dir[i].loads);
    }
    check_plugin_dir_scan(other1);
    check_plugin_dir_scan(other2);
    CU_ASSERT_EQUAL(hk_loader_destroy(shared), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(other1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(other2), HK_STATUS_OK);
}

/* Discover + load + negotiate 20 plugins: a benchmark figure, printed here
 * for information, with the isolated probe (the default) and without; the
 * test asserts the loads. Each round uses fresh copies: a file already
 * mapped in the process would not be probed and opened again for real. */
static void test_scan_twenty(void)
{
    char dir[4096], p[4096], name[32];
    for (uint32_t iso = HK_ISOLATION_PROBE; iso <= HK_ISOLATION_OFF; iso++) {
        CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof(dir)), 0);
        for (int i = 0; i < 20; i++) {
            snprintf(name, sizeof(name), "p%02d.so", i);
            CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), dir, name, 0644, p,
                                          sizeof(p)), 0);
        }
        hk_loader_options_t o;
        memset(&o, 0, sizeof(o));
        o.size = sizeof(o);
        o.default_dir = dir;
        o.ignore_env = 1;
        o.isolation = iso;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        hk_loader_t *loader = NULL;
        CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
        CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CU_ASSERT_EQUAL(hk_loader_plugin_count(loader), 20);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3
                    + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        printf("\n    [P7] create + scan + load + negotiate 20 plugins, isolation %s: %.2f ms ",
               iso == HK_ISOLATION_PROBE ? "on " : "off", ms);
        CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
        tl_rmtree(dir);
    }
}

void tl_register_scan(void)
{
    CU_pSuite s = hk_test_suite("loader_scan", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"test-plugin dir: one report per file, in order", test_scan_plugin_dir},
        {"mixed dir: filtering, bad never stops good, log", test_scan_mixed_dir},
        {"world-writable file and directory refused", test_world_writable_file},
        {"missing directory reported", test_missing_dir},
        {"HK_PLUGIN_PATH order and ignore_env", test_env_path},
        {"helper without privileges reads HK_PLUGIN_PATH", test_env_path_unprivileged_helper},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    CU_pTest t = hk_test_add(s, "set-user-ID helper ignores HK_PLUGIN_PATH (AT_SECURE)",
                             test_env_path_ignored_when_setuid);
    const char *why = tl_setuid_unavailable();
    if (why)
        hk_test_skip(t, why);
    hk_test_add(s, "concurrent scan and open", test_concurrent_scan_and_open);
    hk_test_add(s, "20 plugins scanned and loaded", test_scan_twenty);
}
