/* What the environment changes is said: a directory of HK_PLUGIN_PATH that
 * the loader refuses, and a malformed HK_PLUGIN_PIN or HK_PLUGIN_EXCLUDE
 * entry, give one warning line on stderr in every command, whatever else the
 * command prints; under --json the document lists them too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "host_util.h"

/* Every command, run the quickest way it can; each ends without a GPU.
 * bench runs a copy of hk-host in a directory without hk-bench (it stops
 * there, after its warnings); validate takes a name and a path. */
static const char *const commands[] = {
    HK_TEST_HOST " run -n 8",
    HK_TEST_HOST " info",
    HK_TEST_HOST " list",
    HK_TEST_HOST " swap -p hk-cpu -q hk-cpu -k 1 -t 1 -n 16",
#ifdef HK_TEST_VALIDATE
    HK_TEST_HOST " validate hk-cpu --only 'tables.*'",
    HK_TEST_HOST " validate \"$(dirname " HK_TEST_HOST ")/../plugins/hk-cpu.so\" --only "
    "'tables.*'",
#endif
    "%s/hk-host bench --quick",
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* How many lines of out hold needle. */
static int count_lines(const char *out, const char *needle)
{
    int n = 0;
    for (const char *p = out; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Runs every command with env before it; each must say want exactly once
 * on stderr. */
static void each_command_warns(const char *env, const char *want)
{
    char bin[1024];
    bin_dir(bin, sizeof bin);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        char line[1400], cmd[2048], *out = NULL;
        snprintf(line, sizeof line, commands[i], bin);
        snprintf(cmd, sizeof cmd, "env -u LD_LIBRARY_PATH HK_CUDA_DRIVER=/nonexistent %s %s",
                 env, line);
        run_err(cmd, &out);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        if (count_lines(out, want) != 1)
            fprintf(stderr, "\n%s\nwanted once: %s\ngot: %s\n", cmd, want, out);
        CU_ASSERT_EQUAL(count_lines(out, want), 1);
        free(out);
    }
    remove_tree(bin);
}

static void test_refused_path_dir_warns(void)
{
    char dir[1024], env[1200], want[1300];
    temp_dir(dir, sizeof dir, "open");
    CU_ASSERT_FATAL(chmod(dir, 0777) == 0);
    snprintf(env, sizeof env, "HK_PLUGIN_PATH=%s", dir);
    snprintf(want, sizeof want, "hk-host: warning: HK_PLUGIN_PATH directory %s refused, "
             "nothing in it is loaded: ", dir);
    each_command_warns(env, want);
    /* run still runs the installed hk-cpu, and says why the directory was refused */
    char cmd[1400], *out;
    snprintf(cmd, sizeof cmd, "env -u LD_LIBRARY_PATH HK_CUDA_DRIVER=/x %s " HK_TEST_HOST
             " run -n 8", env);
    out = expect_kept(run, cmd, 0, want, "writable by others (mode 0777)\n", "plugin: hk-cpu",
                      NULL);
    free(out);
    remove_tree(dir);
}

static void test_malformed_pin_and_exclude_warn(void)
{
    each_command_warns("HK_PLUGIN_PIN='hk-cpu@^^1'",
                       "hk-host: warning: HK_PLUGIN_PIN: entry 'hk-cpu@^^1' ignored: bad range: ");
    each_command_warns("HK_PLUGIN_EXCLUDE='hk-cuda@>=x,hk-zz@1'",
                       "hk-host: warning: HK_PLUGIN_EXCLUDE: entry 'hk-cuda@>=x' ignored: ");
    /* a well-formed pair says nothing */
    char *out;
    CU_ASSERT_EQUAL(run_err(NO_DRIVER "HK_PLUGIN_PIN='hk-cpu@^1' HK_PLUGIN_EXCLUDE='hk-zz' "
                            HK_TEST_HOST " run -n 8", &out), 0);
    CU_ASSERT_PTR_NULL(strstr(out, "warning"));
    free(out);
}

/* --json: the warning is in the document's "warnings", and still on stderr. */
static void test_warnings_in_json(void)
{
    char *out;
    CU_ASSERT_EQUAL(run_out(NO_DRIVER "HK_PLUGIN_PIN='hk-cpu@^^1' " HK_TEST_HOST
                            " info --json", &out), 0);
    CU_ASSERT_EQUAL(json_check(out, "len(d[\"warnings\"]) == 1",
                               "d[\"warnings\"][0].startswith(\"HK_PLUGIN_PIN: entry \")",
                               "\"hk-cpu@^^1\" in d[\"warnings\"][0]", NULL), 0);
    free(out);
}

/* -d names a device the GPU does not have: that is the cause, named first;
 * hk-cpu's lack of devices comes after it. */
static void test_missing_device_named_first(void)
{
#ifdef HK_TEST_SIM_DIR
    char *out = expect_kept(run_err, "env -u LD_LIBRARY_PATH -u HK_PLUGIN_PATH SIMCUDA_DEVICES=2 "
                            "HK_CUDA_DRIVER=" HK_TEST_SIM_DIR "/libcuda.so.1 " HK_TEST_HOST
                            " run -d 5 -n 8", 2,
                            "hk-host: -d 5: no such device: hk-cuda: INVALID_DEVICE: device 5 "
                            "does not exist (2 devices); hk-cpu 1.0.0, the fallback, computes on "
                            "the host and has no devices\n", NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
#endif
}

/* A swap between a build and itself moves nothing: refused as bad usage
 * before any thread starts, whether the two requests are alike or one is
 * the path of the file the other selects. */
static void test_swap_to_same_build_refused(void)
{
    static const char *const cases[] = {
        " swap -p hk-cpu -q hk-cpu -k 20",
        " swap -p hk-cpu -q \"$(dirname " HK_TEST_HOST ")/../plugins/hk-cpu.so\" -k 20",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, NO_DRIVER HK_TEST_HOST "%s", cases[i]);
        char *out = expect_kept(run, cmd, 2, "hk-host: swap: -p hk-cpu and -q ",
                                " are the same build (hk-cpu 1.0.0, ",
                                "): a swap to it would move nothing; name two builds", NULL);
        CU_ASSERT_PTR_NULL(strstr(out, "swaps 20 of 20"));
        CU_ASSERT_EQUAL(lines(out), 1);
        free(out);
    }
}

/* --compare that compared nothing (every case skipped on one side: hk-cuda
 * without a driver) is no pass: status 1 and why, from hk-validate and
 * through hk-host. */
static void test_compare_nothing_fails(void)
{
#if defined(HK_TEST_VALIDATE) && defined(HK_TEST_CUDA_PLUGIN)
    static const char *const cases[] = {
        HK_TEST_VALIDATE " --compare \"$(dirname " HK_TEST_HOST ")/../plugins/hk-cpu.so\" "
        "\"$(dirname " HK_TEST_HOST ")/../plugins/hk-cuda.so\" --only matrix.saxpy.host",
        HK_TEST_HOST " validate --compare hk-cpu hk-cuda --only matrix.saxpy.host",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024], *out;
        snprintf(cmd, sizeof cmd, NO_DRIVER "%s", cases[i]);
        out = expect_kept(run_err, cmd, 1, "hk-validate: --compare compared nothing: each of "
                          "the ", " cases was skipped on A or B (matrix.", " on B: ", NULL);
        CU_ASSERT_EQUAL(lines(out), 1);
        free(out);
    }
#endif
}

/* A malformed version range is bad usage in every command that takes a
 * request: status 2, one line. */
static void test_malformed_range_is_usage(void)
{
    static const char *const cases[] = {
        " run -p 'hk-cpu@^^1'",
        " info -p 'hk-cpu@^^1'",
        " swap -p 'hk-cpu@^^1' -q hk-cpu",
        " swap -p hk-cpu -q 'hk-cpu@>=1.0,,<2'",
#ifdef HK_TEST_VALIDATE
        " validate 'hk-cpu@^^1'",
#endif
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, NO_DRIVER HK_TEST_HOST "%s", cases[i]);
        char *out = expect_kept(run, cmd, 2, "hk-cpu@", ": bad range: ", NULL);
        CU_ASSERT_EQUAL(lines(out), 1);
        free(out);
    }
}

/* Under --json a usage error is a document too, wherever --json stands:
 * the error in "errors", "exit_status" 2; hk-validate's is an object with
 * the error. */
static void test_json_usage_errors(void)
{
    static const char *const cases[] = {
        " run --json -n 0", " run -n 0 --json", " --json run -n lots", " list --json extra",
        " info --json -p 'hk-cpu@^^1'", " run --json -p 'hk-cpu@^^1'", " --json frobnicate",
        " --json validate x.so",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[512], *out;
        snprintf(cmd, sizeof cmd, NO_DRIVER HK_TEST_HOST "%s", cases[i]);
        CU_ASSERT_EQUAL(run_out(cmd, &out), 2);
        if (json_check(out, "d[\"exit_status\"] == 2", "len(d[\"errors\"]) == 1", NULL) != 0)
            fprintf(stderr, "\n%s: %s\n", cmd, out);
        CU_ASSERT_EQUAL(json_check(out, "d[\"exit_status\"] == 2", "len(d[\"errors\"]) == 1",
                                   NULL), 0);
        free(out);
    }
#ifdef HK_TEST_VALIDATE
    static const char *const vcases[] = {
        HK_TEST_VALIDATE " --json --timeout 0 x.so",
        HK_TEST_VALIDATE " --json",
        HK_TEST_VALIDATE " x.so --json --frob",
    };
    for (size_t i = 0; i < sizeof vcases / sizeof vcases[0]; i++) {
        char *out;
        CU_ASSERT_EQUAL(run_out(vcases[i], &out), 2);
        CU_ASSERT_EQUAL(json_check(out, "d[\"exit_status\"] == 2",
                                   "d[\"error\"].startswith(\"hk-validate: \")", NULL), 0);
        free(out);
    }
#endif
}

void host_register_warn(CU_pSuite s)
{
    static const hk_test_case_t tests[] = {
        {"a refused HK_PLUGIN_PATH directory: one warning in every command",
         test_refused_path_dir_warns},
        {"a malformed HK_PLUGIN_PIN or EXCLUDE entry: one warning in every command",
         test_malformed_pin_and_exclude_warn},
        {"--json lists the warnings", test_warnings_in_json},
        {"a malformed range is bad usage: status 2", test_malformed_range_is_usage},
        {"--json: a usage error is a document too", test_json_usage_errors},
        {"swap to the same build: refused as bad usage", test_swap_to_same_build_refused},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    CU_pTest t = hk_test_add(s, "validate --compare that compared nothing: status 1, why",
                             test_compare_nothing_fails);
#if !defined(HK_TEST_VALIDATE) || !defined(HK_TEST_CUDA_PLUGIN)
    hk_test_skip(t, "needs hk-validate and hk-cuda");
#endif
    t = hk_test_add(s, "-d of a device the GPU lacks: that cause first",
                             test_missing_device_named_first);
#ifndef HK_TEST_SIM_DIR
    hk_test_skip(t, "no simulated driver: built without the CUDA toolkit");
#else
    (void)t;
#endif
}
