/* hk-host swap as a user runs it: two builds of hk-cpu swapped under load,
 * a swap target that fails verification, bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "hk_shell.h"
#include "swap_test.h"

#define HOST "env -u HK_PLUGIN_PATH HK_CUDA_DRIVER=/nonexistent/libcuda.so.1 " HK_TEST_HOST

/* Runs cmd with stderr folded in; the exit status, and the output in *out. */
static int run(const char *cmd, char **out)
{
    return hk_shell(cmd, "2>&1", out);
}

static int has(const char *out, const char *needle)
{
    int ok = out && strstr(out, needle) != NULL;
    if (!ok)
        fprintf(stderr, "\n--- expected \"%s\" in:\n%s---\n", needle, out ? out : "(nothing)");
    return ok;
}

/* The two lines of call times: their numbers in order, and the calls of
 * both adding up to the summary's count. */
static void check_times(const char *out)
{
    const char *d = out ? strstr(out, "\nswap: call time during swaps (") : NULL;
    const char *o = out ? strstr(out, "\nswap: call time outside swaps (") : NULL;
    unsigned long long calls = 0, n[2] = {0, 0};
    double v[2][4];
    CU_ASSERT_FATAL(d != NULL && o != NULL && d < o);
    CU_ASSERT_EQUAL(sscanf(strstr(out, "swap: calls "), "swap: calls %llu", &calls), 1);
    for (int i = 0; i < 2; i++) {
        const char *line = strchr((i ? o : d) + 1, '(');
        CU_ASSERT_EQUAL(sscanf(line, "(%llu calls): p50 %lf, p99 %lf, p99.9 %lf, longest %lf us",
                               &n[i], &v[i][0], &v[i][1], &v[i][2], &v[i][3]), 5);
        CU_ASSERT(v[i][0] > 0.0 && v[i][0] <= v[i][1] && v[i][1] <= v[i][2] &&
                  v[i][2] <= v[i][3]);
    }
    CU_ASSERT(n[0] > 0 && n[1] > 0);
    CU_ASSERT_EQUAL(n[0] + n[1], calls);
}

static void test_host_swap(void)
{
    char *out;
    int rc = run(HOST " swap -p " SWP_A " -q " SWP_B " -t 8 -k 100 -n 1000", &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(has(out, "swap: hk-cpu 1.0.0 ("));
    CU_ASSERT(has(out, "<-> hk-cpu 1.0.1 ("));
    CU_ASSERT(has(out, "wrong 0, failed 0, swaps 100 of 100 (0 refused)"));
    CU_ASSERT(has(out, "modules still open: 1 of 2"));
    CU_ASSERT(has(out, "\nswap: time by step, median (slowest switch, "));
    CU_ASSERT(has(out, ", drain "));
    check_times(out);
    CU_ASSERT(out && !strchr(out, '\r')); /* no progress line off a terminal */
    printf("\n    %s    ", out && strrchr(out, '\n') ? strstr(out, "swap: calls") : "");
    free(out);
}

static void test_host_swap_prepared(void)
{
    char *out;
    int rc = run(HOST " swap -p " SWP_A " -q " SWP_B " -t 8 -k 40 -n 1000 -P", &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(has(out, "wrong 0, failed 0, swaps 40 of 40 (0 refused)"));
    CU_ASSERT(has(out, "modules still open: 1 of 2"));
    check_times(out);
    printf("\n    %s    ", out && strrchr(out, '\n') ? strstr(out, "swap: calls") : "");
    free(out);
}

static void test_host_swap_refused(void)
{
    char *out;
    int rc = run(HOST " swap -p " SWP_A " -q " SWP_DOUBLE("swp_wrong") " -t 2 -k 4", &out);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT(has(out, "refused: hk-cpu 1.0.2 failed verification (the loader's hk.blas1/1 "
                       "workload): saxpy gave"));
    CU_ASSERT(has(out, "wrong 0, failed 0, swaps 2 of 4 (2 refused)"));
    free(out);
}

static void test_host_swap_usage(void)
{
    char *out;
    CU_ASSERT_EQUAL(run(HOST " swap -p " SWP_A, &out), 2);
    CU_ASSERT(has(out, "swap: -q is missing (see hk-host swap --help)"));
    free(out);
    CU_ASSERT_EQUAL(run(HOST " swap -p a -q b -t 0", &out), 2);
    CU_ASSERT(has(out, "-t 0: not a decimal number from 1 to 256"));
    free(out);
    CU_ASSERT_EQUAL(run(HOST " swap -p no-such -q hk-cpu", &out), 1);
    CU_ASSERT(has(out, "no-such"));
    free(out);
}

void swp_register_host(void)
{
    CU_pSuite s = hk_test_suite("hk-host swap", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"two builds of hk-cpu, 8 threads, 100 swaps", test_host_swap},
        {"the same, each swap prepared and then committed (-P)", test_host_swap_prepared},
        {"a target that fails verification: exit 1", test_host_swap_refused},
        {"bad arguments", test_host_swap_usage},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
