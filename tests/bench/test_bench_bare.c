/* hk-bench-bare, P4's handle cycle in a process without the CUDA runtime,
 * on hk-cuda over the simulated driver: its line of figures, usage errors,
 * and a create that fails. The times are the simulation's; none is
 * asserted. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "hk_shell.h"
#include "hk_test.h"

void hkb_test_register_bare(void);

#ifndef HKB_TEST_BARE
static void test_bare_cycles(void)
{
    CU_FAIL("not built");
}
#define test_bare_failures test_bare_cycles
#else
#define BARE_ENV "HK_CUDA_DRIVER=" HKB_TEST_SIM " "
/* Runs cmd with stderr folded in; the exit status, the output in out. */
static int run(const char *cmd, char *out, size_t len)
{
    char full[2048];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    return hk_shell_into(full, out, len);
}

static void test_bare_cycles(void)
{
    char out[1024];
    int cycles = 0;
    double f[6];
    CU_ASSERT_EQUAL(run(BARE_ENV HKB_TEST_BARE " --plugin " HKB_TEST_CUDA " --cycles 5", out,
                        sizeof out), 0);
    CU_ASSERT_EQUAL(sscanf(out, "cycles %d first_us %lf cycle_us %lf cycle_max_us %lf "
                                "create_us %lf destroy_us %lf use_us %lf",
                           &cycles, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5]), 7);
    CU_ASSERT_EQUAL(cycles, 5);
    CU_ASSERT(f[1] > 0.0 && f[1] <= f[2] && f[3] > 0.0 && f[4] > 0.0 && f[5] > 0.0);
    printf("\n    %s    ", out);
}

static void test_bare_failures(void)
{
    char out[1024];
    CU_ASSERT_EQUAL(run(BARE_ENV HKB_TEST_BARE " --cycles 5", out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--plugin is missing"));
    CU_ASSERT_EQUAL(run(BARE_ENV HKB_TEST_BARE " --plugin " HKB_TEST_CUDA " --cycles 1", out,
                        sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--cycles 1: not a decimal number from 2"));
    /* a device the simulated driver does not have: the plugin's reason */
    CU_ASSERT_EQUAL(run("SIMCUDA_DEVICES=1 " BARE_ENV HKB_TEST_BARE " --plugin " HKB_TEST_CUDA
                        " --device 3", out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "hk-bench-bare: error: handle_create: "));
}
#endif

void hkb_test_register_bare(void)
{
    CU_pSuite s = hk_test_suite("hk-bench-bare", NULL, NULL);
    CU_pTest t[2] = {
        hk_test_add(s, "cycles on hk-cuda over the simulated driver", test_bare_cycles),
        hk_test_add(s, "usage errors and a failing create", test_bare_failures)};
#ifndef HKB_TEST_BARE
    for (int i = 0; i < 2; i++)
        hk_test_skip(t[i], "hk-cuda, the simulated driver or hk-bench-bare not built (no nvcc)");
#else
    (void)t;
#endif
}
