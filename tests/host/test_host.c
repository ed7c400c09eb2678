/* hk-host, run as a user would: list, fallback to hk-cpu without a driver,
 * hk-cuda on the simulated driver, a wrong result, a plugin lacking slots,
 * hostile names, impossible sizes, bad arguments. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_test.h"

/* Runs the shell command cmd (stderr folded into stdout); returns the exit
 * status and the output in a malloc'ed *out. */
static int run(const char *cmd, char **out)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (!p || !buf) {
        free(buf);
        *out = NULL;
        return -1;
    }
    size_t n;
    while ((n = fread(buf + len, 1, cap - 1 - len, p)) > 0) {
        len += n;
        if (len == cap - 1) {
            char *grown = realloc(buf, cap * 2);
            if (!grown)
                break;
            buf = grown;
            cap *= 2;
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int has(const char *out, const char *needle)
{
    int ok = out && strstr(out, needle) != NULL;
    if (!ok)
        fprintf(stderr, "\n--- expected \"%s\" in:\n%s---\n", needle, out ? out : "(nothing)");
    return ok;
}

#define NO_DRIVER "env -u LD_LIBRARY_PATH -u HK_PLUGIN_PATH HK_CUDA_DRIVER=/nonexistent/libcuda.so.1 "

static void test_list(void)
{
    char *out;
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " list", &out), 0);
    CU_ASSERT(has(out, "2 plugin(s) loaded"));
    CU_ASSERT(has(out, "hk-cpu     1.0.0    ABI 1.2"));
    CU_ASSERT(has(out, "hk-cuda"));
    free(out);
}

static void test_list_reports_refused(void)
{
    /* In the build tree: the loader refuses anything below a directory that
     * others can write, /tmp included. */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/../hk_host_testXXXXXX", dirname(strdupa(HK_TEST_HOST)));
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    char path[600], cmd[1400], *out;
    snprintf(path, sizeof path, "%s/notaplugin.so", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    for (int i = 0; i < 8; i++) /* long enough to be read as a header */
        fputs("this is not an ELF file, whatever its name says\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "env HK_PLUGIN_PATH=%s HK_CUDA_DRIVER=/x " HK_TEST_HOST " list",
             dir);
    CU_ASSERT_EQUAL(run(cmd, &out), 0); /* refusals do not stop the others */
    CU_ASSERT(has(out, "1 candidate(s) refused"));
    CU_ASSERT(has(out, "notaplugin.so: open: "));
    CU_ASSERT(has(out, "not an ELF file"));
    CU_ASSERT(has(out, "hk-cpu"));
    /* list prints each refusal once, in its report, not again as a warning */
    const char *first = strstr(out, "notaplugin.so: open");
    CU_ASSERT_PTR_NOT_NULL_FATAL(first);
    CU_ASSERT_PTR_NULL(strstr(first + 1, "notaplugin.so: open"));
    free(out);
    unlink(path);
    rmdir(dir);
}

static void test_run_falls_back_without_driver(void)
{
    char *out;
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " run -n 5000", &out), 0);
    CU_ASSERT(has(out, "plugin: hk-cpu 1.0.0 (hk-cuda is unusable: NO_DRIVER: "));
    CU_ASSERT(has(out, "/nonexistent/libcuda.so.1"));
    CU_ASSERT(has(out, "20 checks, 0 wrong or failed: all results verified"));
    free(out);
}

static void test_run_on_simulated_gpu(void)
{
    char *out;
    CU_ASSERT_EQUAL(run("env LD_LIBRARY_PATH=" HK_TEST_SIM_DIR
                        " HK_CUDA_DRIVER=" HK_TEST_SIM_DIR "/libcuda.so.1 " HK_TEST_HOST
                        " run -n 5000",
                        &out),
                    0);
    CU_ASSERT(has(out, "plugin: hk-cuda "));
    CU_ASSERT(has(out, "(a CUDA device is usable)"));
    CU_ASSERT(has(out, "20 checks, 0 wrong or failed: all results verified"));
    free(out);
}

static void test_run_catches_wrong_result(void)
{
    char *out;
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " run -n 1000 -p " HK_TEST_WRONG, &out), 1);
    CU_ASSERT(has(out, "plugin: hk-wrong"));
    CU_ASSERT(has(out, "saxpy  host   n=1000      WRONG"));
    CU_ASSERT(has(out, "FAILED"));
    free(out);
}

/* A legal plugin without set_pointer_mode, sscal and sdot, whose blas1 table
 * is declared too short for snrm2 and dnrm2: each is a "not supported" row,
 * everything else runs and is checked, and the exit status is 0. */
static void test_run_on_plugin_missing_slots(void)
{
    char *out;
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " run -n 1000 -p " HK_TEST_MISSING, &out), 0);
    CU_ASSERT(has(out, "plugin: hk-missing"));
    CU_ASSERT(has(out, "sscal  host   n=1000      not supported (hk.blas1/1 has no sscal)"));
    CU_ASSERT(has(out, "sdot   host   n=1000      not supported (hk.blas1/1 has no sdot)"));
    CU_ASSERT(has(out, "snrm2  host   n=1000      not supported (hk.blas1/1 has no snrm2)"));
    CU_ASSERT(has(out, "dnrm2  host   n=1000      not supported (hk.blas1/1 has no dnrm2)"));
    CU_ASSERT(has(out, "ddot   host   n=1000      ok"));
    CU_ASSERT(has(out, "saxpy  device n=1000      not supported (the plugin has no "
                       "set_pointer_mode)"));
    CU_ASSERT(has(out, "6 checks, 0 wrong or failed, 14 not supported: all results verified"));
    free(out);
}

/* A plugin's name and version and a file's name reach the terminal escaped:
 * no raw control character from them is printed. */
static void test_plugin_strings_escaped(void)
{
    /* In the build tree: the loader refuses directories others can write. */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/../hk_host_escXXXXXX", dirname(strdupa(HK_TEST_HOST)));
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    char path[600], cmd[1400], *out;
    snprintf(path, sizeof path, "%s/evil\001\nname.so", dir);
    FILE *in = fopen(HK_TEST_EVIL, "rb"), *to = fopen(path, "wb");
    CU_ASSERT_FATAL(in && to);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        CU_ASSERT_FATAL(fwrite(buf, 1, n, to) == n);
    fclose(in);
    CU_ASSERT_FATAL(fclose(to) == 0);
    snprintf(cmd, sizeof cmd, "env HK_PLUGIN_PATH=%s HK_CUDA_DRIVER=/x " HK_TEST_HOST " list", dir);
    CU_ASSERT_EQUAL(run(cmd, &out), 0);
    CU_ASSERT(has(out, "hk-\\x1b[31mevil\\x07\\x09name 1.0\\x7f  ABI 1.2"));
    CU_ASSERT(has(out, "/evil\\x01\\x0aname.so\n"));
    int raw = 0;
    for (const char *c = out; c && *c; c++)
        raw += (*c > 0 && *c < 0x20 && *c != '\n') || *c == 0x7f;
    CU_ASSERT_EQUAL(raw, 0);
    free(out);
    unlink(path);
    rmdir(dir);
}

/* Sizes whose memory cannot be had: one line saying why, exit status 3,
 * before any plugin is loaded. */
static void test_run_refuses_impossible_sizes(void)
{
    char *out;
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " run -n 4611686018427387904", &out), 3);
    CU_ASSERT(has(out, "hk-host: --size 4611686018427387904: the workload needs 32 bytes per "
                       "element, more than this machine can address\n"));
    CU_ASSERT_PTR_NULL(strstr(out, "plugin:"));
    free(out);
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " run -n 1099511627776", &out), 3);
    CU_ASSERT(has(out, "hk-host: --size 1099511627776: the workload needs 35184372088864 bytes "
                       "of host memory, this machine has "));
    free(out);
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " run -n 9223372036854775808", &out), 2);
    CU_ASSERT(has(out, "not a number in 0..2^63-1"));
    free(out);
}

static void test_bad_arguments(void)
{
    char *out;
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " run -p no-such-plugin", &out), 1);
    CU_ASSERT(has(out, "plugin \"no-such-plugin\" was not found"));
    free(out);
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " frobnicate", &out), 2);
    CU_ASSERT(has(out, "unknown command \"frobnicate\""));
    free(out);
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " run -n lots", &out), 2);
    CU_ASSERT(has(out, "--size lots: not a number"));
    free(out);
    CU_ASSERT_EQUAL(run(NO_DRIVER HK_TEST_HOST " --help", &out), 0);
    CU_ASSERT(has(out, "usage: hk-host"));
    free(out);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk-host", NULL, NULL);
    hk_test_add(s, "list shows every plugin", test_list);
    hk_test_add(s, "list reports a refused candidate with its reason", test_list_reports_refused);
    hk_test_add(s, "run without a driver falls back to hk-cpu, saying why",
                test_run_falls_back_without_driver);
    CU_pTest t = hk_test_add(s, "run uses hk-cuda on the simulated GPU", test_run_on_simulated_gpu);
#ifndef HK_TEST_SIM_DIR
    hk_test_skip(t, "no simulated driver: built without the CUDA toolkit");
#else
    (void)t;
#endif
    hk_test_add(s, "run exits 1 on a wrong result", test_run_catches_wrong_result);
    hk_test_add(s, "bad arguments: status 1 or 2 with the reason", test_bad_arguments);
    hk_test_add(s, "run on a plugin lacking slots: not supported rows, exit 0",
                test_run_on_plugin_missing_slots);
    hk_test_add(s, "plugin and file names with control characters are escaped",
                test_plugin_strings_escaped);
    hk_test_add(s, "run refuses sizes it cannot allocate: exit 3 with the reason",
                test_run_refuses_impossible_sizes);
    return 0;
}
