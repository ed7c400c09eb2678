/* hk-host's command line, run as a user would: usage errors, --version,
 * -h and --help on every command (and on hk-validate and hk-bench), decimal
 * sizes of at least 1, sizes whose memory cannot be had, validate by plugin
 * name, -d with a plugin that has no devices, and hk-validate's --json. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_abi.h"
#include "host_util.h"

/* Outside the sanitizer builds, whose shadow memory needs the address space,
 * a run that must be refused is capped by `ulimit -v`, so that a host that
 * allocated all the same could not bring the machine down. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEMORY_CAP ""
#else
#define MEMORY_CAP "ulimit -v 4194304; "
#endif

/* Sizes whose memory cannot be had: one line saying why, exit status 3,
 * before any plugin is loaded. */
static void test_run_refuses_impossible_sizes(void)
{
    char *out = expect_kept(run, NO_DRIVER HK_TEST_HOST " run -n 4611686018427387904", 3,
                            "hk-host: --size 4611686018427387904: the workload needs 32 bytes "
                            "per element, more than this machine can address\n",
                            NULL);
    CU_ASSERT_PTR_NULL(strstr(out, "plugin:"));
    free(out);
    expect(run, NO_DRIVER HK_TEST_HOST " run -n 1099511627776", 3,
           "hk-host: --size 1099511627776: the workload needs 35184372088864 bytes of host "
           "memory; ",
           " bytes are available (", NULL);
    expect(run, NO_DRIVER HK_TEST_HOST " run -n 9223372036854775808", 2,
           "-n 9223372036854775808: not a decimal number from 1 to 9223372036854775807", NULL);
}

/* A field of /proc/meminfo ("MemTotal") in bytes, or 0. */
static unsigned long long meminfo(const char *field)
{
    unsigned long long kb = 0;
    char line[256], want[64];
    snprintf(want, sizeof want, "%s: %%llu kB", field);
    FILE *f = fopen("/proc/meminfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, want, &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

/* Sizes whose memory the machine has, but not free. The workload needs all
 * of MemTotal, always more than MemAvailable: refused with exit status 3
 * (naming MemAvailable, or a cgroup's limit where that leaves less room)
 * before anything is loaded, naming both figures (the kernel would otherwise
 * kill the process once the pages are touched). With hk-cpu, whose device
 * vectors are host memory too, a size whose host vectors alone would fit. */
static void test_run_refuses_size_beyond_available(void)
{
    unsigned long long total = meminfo("MemTotal"), avail = meminfo("MemAvailable");
    CU_ASSERT_FATAL(total > 1024 * 1024 && avail > 1024 * 1024);
    long long n = (long long)(total / 32) - 1; /* 32 (n + 1) bytes: at most MemTotal */
    char cmd[512], want[200];
    snprintf(cmd, sizeof cmd, MEMORY_CAP NO_DRIVER HK_TEST_HOST " run -n %lld", n);
    snprintf(want, sizeof want, "hk-host: --size %lld: the workload needs %llu bytes of host "
             "memory; ", n, 32ULL * (unsigned long long)(n + 1));
    char *out = expect_kept(run, cmd, 3, want, " bytes are available (", NULL);
    CU_ASSERT_PTR_NULL(strstr(out, "plugin:"));
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    /* 32 bytes an element are 8/9 of what is available, 48 are 4/3 of it */
    n = (long long)(avail / 36);
    snprintf(cmd, sizeof cmd, MEMORY_CAP NO_DRIVER HK_TEST_HOST " run -p hk-cpu -n %lld", n);
    snprintf(want, sizeof want, "hk-host: --size %lld: the workload needs %llu bytes of host "
             "memory (hk-cpu keeps its device vectors in host memory too); ", n,
             48ULL * (unsigned long long)(n + 1));
    out = expect_kept(run, cmd, 3, want, " bytes are available (", NULL);
    CU_ASSERT_PTR_NULL(strstr(out, "workload:"));
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
}

/* Sizes are decimal and at least 1: "010" is ten, "0x10" and 0 are usage
 * errors, not a workload of nothing reported as verified. */
static void test_sizes_are_decimal_and_meaningful(void)
{
    expect(run, NO_DRIVER HK_TEST_HOST " run -n 010", 0,
           "workload: hk.blas1/1, every op in float and double, n = 10, seed 1\n",
           "saxpy  host   n=10 ", "20 checks, 0 wrong or failed", NULL);
    expect(run, NO_DRIVER HK_TEST_HOST " run --size=010 -s 010", 0, "n = 10, seed 10\n", NULL);
    static const char *const bad[][2] = {
        {" run -n 0", "-n 0: not a decimal number from 1 to 9223372036854775807"},
        {" run --size 0", "--size 0: not a decimal number from 1 "},
        {" run -n 0x10", "-n 0x10: not a decimal number"},
        {" run -n -5", "-n -5: not a decimal number"},
        {" run -n ' 5'", "-n  5: not a decimal number"},
        {" run -n +5", "-n +5: not a decimal number"},
        {" run -d 0x1", "-d 0x1: not a decimal number from 0 to "},
        {" swap -p hk-cpu -q hk-cpu -n 0", "-n 0: not a decimal number from 1 "},
        {" swap -p hk-cpu -q hk-cpu -k 0", "-k 0: not a decimal number from 1 "},
        {" swap -p hk-cpu -q hk-cpu -t 0x8", "-t 0x8: not a decimal number from 1 "},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[512], *out;
        snprintf(cmd, sizeof cmd, NO_DRIVER HK_TEST_HOST "%s", bad[i][0]);
        out = expect_kept(run, cmd, 2, bad[i][1], NULL);
        CU_ASSERT_EQUAL(lines(out), 1);
        CU_ASSERT_PTR_NULL(strstr(out, "verified"));
        free(out);
    }
}

/* -h and --help on hk-host and on every command, wherever they stand:
 * the usage on stdout, exit status 0; also where the program a command
 * runs is not there. */
static void test_help_everywhere(void)
{
    static const char *const cases[][2] = {
        {" --help", "usage: hk-host [options] <command>"},
        {" -h", "usage: hk-host [options] <command>"},
        {" list --help", "usage: hk-host list [--json]"},
        {" info -h", "usage: hk-host info [-p REQUEST]"},
        {" run --help", "usage: hk-host run [-p REQUEST]"},
        {" run -n 5 -h", "usage: hk-host run [-p REQUEST]"},
        {" swap --help", "usage: hk-host swap -p REQUEST_A -q REQUEST_B"},
        {" swap -h", "usage: hk-host swap -p REQUEST_A -q REQUEST_B"},
        {" swap -p a --help", "usage: hk-host swap -p REQUEST_A -q REQUEST_B"},
        {" validate --help", "usage: hk-host validate PLUGIN [OPTIONS]"},
        {" validate -h", "usage: hk-host validate PLUGIN [OPTIONS]"},
        {" bench --help", "usage: hk-host bench [--csv FILE]"},
        {" bench -h", "usage: hk-host bench [--csv FILE]"},
    };
    char dir[512], cmd[1200];
    bin_dir(dir, sizeof dir); /* validate and bench: no hk-validate, no hk-bench there */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s/hk-host%s", dir, cases[i][0]);
        expect(run_out, cmd, 0, cases[i][1], NULL);
        snprintf(cmd, sizeof cmd, HK_TEST_HOST "%s", cases[i][0]);
        expect(run_out, cmd, 0, cases[i][1], NULL);
    }
    remove_tree(dir);
#ifdef HK_TEST_VALIDATE
    expect(run_out, HK_TEST_VALIDATE " --help", 0, "usage: hk-validate PLUGIN.so", NULL);
    expect(run_out, HK_TEST_VALIDATE " -h", 0, "usage: hk-validate PLUGIN.so", NULL);
    expect(run_out, HK_TEST_VALIDATE " x.so --only a -h", 0, "usage: hk-validate", NULL);
    /* hk-host validate --help adds hk-validate's own when it is there */
    expect(run_out, HK_TEST_HOST " validate --help", 0, "usage: hk-validate PLUGIN.so", NULL);
#endif
    /* hk-bench, where it is built (beside hk-host: nvcc and cuBLAS) */
    char *copy = strdup(HK_TEST_HOST), bench[1100], probe[1100];
    snprintf(bench, sizeof bench, "%s/hk-bench", dirname(copy));
    snprintf(probe, sizeof probe, "%s/hk-probe", copy);
    free(copy);
    /* hk-probe, which only the loader starts, still answers a help request */
    snprintf(cmd, sizeof cmd, "%s --help", probe);
    expect(run_out, cmd, 0, "usage: hk-probe", NULL);
    snprintf(cmd, sizeof cmd, "%s -h", probe);
    expect(run_out, cmd, 0, "usage: hk-probe", NULL);
    snprintf(cmd, sizeof cmd, "%s x", probe);
    expect(run_err, cmd, 2, "hk-probe: started by the handlekit loader only", NULL);
    if (access(bench, X_OK) == 0) {
        snprintf(cmd, sizeof cmd, "%s --help", bench);
        expect(run_out, cmd, 0, "usage: hk-bench [--quick]", NULL);
        snprintf(cmd, sizeof cmd, "%s --quick -h", bench);
        expect(run_out, cmd, 0, "usage: hk-bench [--quick]", NULL);
        snprintf(cmd, sizeof cmd, "%s --device 010x", bench);
        expect(run_err, cmd, 2, "hk-bench: --device 010x: not a decimal number from 0 to 1024",
               NULL);
        snprintf(cmd, sizeof cmd, HK_TEST_HOST " bench --help");
        expect(run_out, cmd, 0, "usage: hk-host bench", "hk-bench's own help:\nusage: hk-bench",
               NULL);
    }
}

/* validate takes what -p takes: a name, NAME@RANGE or a path, wherever the
 * plugin stands among hk-validate's options. */
static void test_validate_takes_requests(void)
{
#ifdef HK_TEST_VALIDATE
    expect(run, NO_DRIVER HK_TEST_HOST " validate hk-cpu --only tables.enum", 0,
           "plugin: hk-cpu 1.0.0, ABI 1.2", "1 passed, 0 failed", NULL);
    expect(run, TWINS HK_TEST_HOST " validate --only tables.enum hk-twin@~1.4", 0,
           "plugin: hk-twin 1.4.1, ABI 1.2", "/hk-twin-a.so)", NULL);
    expect(run, TWINS HK_TEST_HOST " validate --timeout 20000 hk-twin --only tables.enum", 0,
           "plugin: hk-twin 1.10.0, ABI 1.2", "/hk-twin-b.so)", NULL);
    expect(run, NO_DRIVER HK_TEST_HOST " validate --only 'matrix.sscal.host.n-*' --compare "
           "hk-cpu " HK_TEST_TWIN_A, 0, " 0 differ,", NULL);
    char *out = expect_kept(run, NO_DRIVER HK_TEST_HOST " validate no-such-plugin", 1,
                            "hk-host: validate: no plugin named no-such-plugin is loaded", NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    expect(run, NO_DRIVER HK_TEST_HOST " validate hk-cpu hk-cpu", 2, "one plugin at a time",
           NULL);
    /* its --json too */
    CU_ASSERT_EQUAL(run_out(NO_DRIVER HK_TEST_HOST " validate hk-cpu --json --only tables.enum",
                            &out), 0);
    CU_ASSERT_EQUAL(json_check(out, "d[\"plugin\"] == \"hk-cpu\" and d[\"passed\"] == 1", NULL),
                    0);
    free(out);
#endif
}

/* -d names a device; a plugin that computes on the host has none. run and
 * info say so alike, with the reason the plugin was chosen, and exit 2. */
static void test_device_on_host_plugin(void)
{
    static const char *const cases[] = {" run -p hk-cpu -d 7", " info -p hk-cpu -d 7",
                                        " run -p hk-cpu -d 0", " info -d 0 -p hk-cpu"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[512], *out;
        snprintf(cmd, sizeof cmd, NO_DRIVER HK_TEST_HOST "%s", cases[i]);
        out = expect_kept(run_err, cmd, 2, "hk-host: -d ", ": hk-cpu 1.0.0 computes on the host "
                          "and has no devices (its handles report device -1); -d applies to "
                          "plugins with CUDA devices (hk-cpu was chosen by -p hk-cpu)\n", NULL);
        CU_ASSERT_EQUAL(lines(out), 1);
        free(out);
    }
    /* chosen because hk-cuda is unusable: the same line, with that reason */
    char *out = expect_kept(run_err, NO_DRIVER HK_TEST_HOST " run -d 1", 2,
                            "hk-host: -d 1: hk-cpu 1.0.0 computes on the host and has no devices",
                            "(hk-cpu was chosen because hk-cuda is unusable: NO_DRIVER: ", NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    /* info shows the binding it would report, with no -d */
    expect(run, NO_DRIVER HK_TEST_HOST " info -p hk-cpu", 0, "handle: device -1, context id 0",
           NULL);
}

/* hk-validate's --json is written by the same writer as hk-host's: a name
 * that is not UTF-8 still gives a valid document. */
static void test_json_validate(void)
{
#ifdef HK_TEST_VALIDATE
    char *out;
    CU_ASSERT_EQUAL(run_out(HK_TEST_VALIDATE " " HK_TEST_LATIN1 " --json --only 'tables.*'",
                            &out), 0);
    CU_ASSERT_EQUAL(json_check(out, "d[\"plugin\"] == \"hk-caf\\ufffd\"",
                               "[c[\"name\"] for c in d[\"checks\"]][0] == \"tables.enum\"",
                               "all(c[\"result\"] == \"PASS\" for c in d[\"checks\"])",
                               "d[\"passed\"] == len(d[\"checks\"]) and d[\"failed\"] == 0",
                               NULL),
                    0);
    free(out);
#endif
}

/* Usage errors: status 2 and one line; a plugin that is not there: 1. */
static void test_bad_arguments(void)
{
    static const struct {
        const char *args, *says;
        int rc;
    } cases[] = {
        {" run -p no-such-plugin", "hk-host: no plugin named no-such-plugin is "
                                   "loaded (loaded: hk-cpu",
         1},
        {" frobnicate", "unknown command \"frobnicate\"", 2},
        {" run -n lots", "-n lots: not a decimal number", 2},
        {" run --size", "--size needs a value (N)", 2},
        {" run --json=yes", "--json takes no value", 2},
        {" swap -p a", "swap: -q is missing", 2},
        {" swap -p a -q b extra", "swap: unexpected argument \"extra\"", 2},
        {" swap -x", "swap: unknown option -x", 2},
        {"", "no command given", 2},
        {" --frob list", "unknown option --frob", 2},
        {" list -x", "unknown option -x", 2},
        {" run -n", "-n needs a value (N)", 2},
        {" list -n 5", "list: -n/--size does not apply to it", 2},
        {" -v validate x.so", "validate: put its options after it", 2},
        {" run extra", "run: unexpected argument \"extra\"", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, NO_DRIVER HK_TEST_HOST "%s", cases[i].args);
        char *out = expect_kept(run, cmd, cases[i].rc, cases[i].says, NULL);
        CU_ASSERT_EQUAL(lines(out), 1);
        free(out);
    }
}

static void test_version(void)
{
    char *out, want[128];
    snprintf(want, sizeof want, "handlekit " HK_TEST_HANDLEKIT_VERSION ": plugin ABI %d.%d "
             "(loads plugins of ABI %d.0 to %d.%d)\n", HK_ABI_MAJOR, HK_ABI_MINOR, HK_ABI_MAJOR,
             HK_ABI_MAJOR, HK_ABI_MINOR);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(run(k ? HK_TEST_HOST " -V" : HK_TEST_HOST " --version", &out), 0);
        CU_ASSERT_EQUAL(strncmp(out, "hk-host 1.", 10), 0);
        CU_ASSERT(has(out, want));
        CU_ASSERT_EQUAL(lines(out), 2);
        free(out);
    }
}

static void test_help(void)
{
    char *out = expect_kept(run_out, HK_TEST_HOST " --help", 0, "usage: hk-host", NULL);
    static const char *const want[] = {
        "\n  list [--json]\n", "\n  info [-p REQUEST]", "\n  run [-p REQUEST]",
        "\n  validate PLUGIN [OPTIONS]\n", "\n  bench [--csv FILE]",
        "\n  swap -p REQUEST_A -q REQUEST_B", "NAME@RANGE", "--json",
        "numbers are decimal (010 is ten)",
        "exit status:\n  0  everything that ran was right", "\n  1  a wrong result",
        "\n  2  bad usage, -d with a plugin that has no devices\n",
        "\n  3  the workload's host or device memory cannot be had"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CU_ASSERT(has(out, want[i]));
    free(out);
    /* a command's own: its options only */
    out = expect_kept(run_out, HK_TEST_HOST " list --help", 0, "usage: hk-host list [--json]\n",
                      "\n      --json ", "\n  -v, --verbose ", "\n  -h, --help ", NULL);
    CU_ASSERT_PTR_NULL(strstr(out, "--plugin"));
    free(out);
}

void host_register_cli(CU_pSuite s)
{
    CU_pTest t;
    static const hk_test_case_t tests[] = {
        {"bad arguments: status 1 or 2 with one line", test_bad_arguments},
        {"--version: hk-host's version and the plugin ABI", test_version},
        {"--help lists the commands and the exit statuses", test_help},
        {"-h and --help exit 0 on every command", test_help_everywhere},
        {"sizes are decimal and at least 1", test_sizes_are_decimal_and_meaningful},
        {"run refuses sizes it cannot allocate: exit 3 with the reason",
         test_run_refuses_impossible_sizes},
        {"run refuses a size beyond the available memory: exit 3, both figures",
         test_run_refuses_size_beyond_available},
        {"-d on a plugin without devices: one line, exit 2", test_device_on_host_plugin},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    t = hk_test_add(s, "validate takes a name, NAME@RANGE or a path",
                    test_validate_takes_requests);
#ifndef HK_TEST_VALIDATE
    hk_test_skip(t, "hk-validate is not built");
#endif
    t = hk_test_add(s, "hk-validate --json: a strict document, names not UTF-8 replaced",
                    test_json_validate);
#ifndef HK_TEST_VALIDATE
    hk_test_skip(t, "hk-validate is not built");
#else
    (void)t;
#endif
}
