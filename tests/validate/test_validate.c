/* hk-validate run as a plugin author runs it: against plugins with one defect
 * each (bad_plugin.c), which it must fail on the right check while the run
 * goes on (also when a plugin cannot make a handle, or kills its parent);
 * against hk-cpu on checks it passes; its modes and usage errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_shell.h"
#include "hk_test.h"

/* Runs cmd with stderr folded into stdout; returns its exit status (-1 when
 * it did not exit) and its output in *out (malloc'ed, "" on failure). */
static int sh(const char *cmd, char **out)
{
    int st = hk_shell(cmd, "2>&1", out);
    if (!*out)
        *out = calloc(1, 1);
    return st;
}

/* The table row of check name: "name   RESULT   detail" (NULL if absent). */
static const char *row(const char *out, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = out; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
        if (strncmp(s, name, n) == 0 && s[n] == ' ')
            return s;
    return NULL;
}

/* 1 when check name's row has result and its detail contains text. */
static int row_is(const char *out, const char *name, const char *result, const char *text)
{
    const char *r = row(out, name);
    const char *end = r ? strchr(r, '\n') : NULL;
    char line[1024];
    snprintf(line, sizeof line, "%.*s", r ? (int)(end ? end - r : (long)strlen(r)) : 0,
             r ? r : "");
    char want[64];
    snprintf(want, sizeof want, " %s ", result);
    int ok = r && strstr(line, want) && (!text || strstr(line, text));
    if (!ok)
        fprintf(stderr, "\n--- want %s %s \"%s\", got: \"%s\"\n", name, result, text ? text : "",
                r ? line : "(no row)");
    return ok;
}

static int has(const char *out, const char *text)
{
    int ok = strstr(out, text) != NULL;
    if (!ok)
        fprintf(stderr, "\n--- expected \"%s\" in:\n%.3000s\n---\n", text, out);
    return ok;
}

#define V HK_TEST_VALIDATE " "

/* A crash in an op is that check's failure, named with its signal; the
 * checks after it still run. */
static void test_crash_is_one_failure(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_BAD_CRASH " --only 'ops.*'", &out), 1);
    /* "killed by SIGSEGV"; in a sanitizer build the runtime's report of the
     * SEGV, which names it too */
    CU_ASSERT(row_is(out, "ops.saxpy.host", "FAIL", "SEGV"));
    CU_ASSERT(row_is(out, "ops.saxpy.device", "FAIL", "SEGV"));
    CU_ASSERT(row_is(out, "ops.daxpy.host", "PASS", NULL));
    CU_ASSERT(row_is(out, "ops.dnrm2.device", "PASS", NULL));
    CU_ASSERT(has(out, "\n18 passed, 2 failed, 0 skipped\n"));
    free(out);
}

/* OK for a NULL vector: every null-x case fails with the status it gave. */
static void test_ok_on_bad_input_fails(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_BAD_OK " --only 'matrix.*.null-x' --only 'matrix.*.null-y'",
                       &out), 1);
    CU_ASSERT(row_is(out, "matrix.sdot.host.null-x", "FAIL", "OK; want NULL_POINTER"));
    CU_ASSERT(row_is(out, "matrix.dnrm2.device.null-x", "FAIL", "OK; want NULL_POINTER"));
    CU_ASSERT(row_is(out, "matrix.saxpy.host.null-y", "PASS", NULL)); /* y is still checked */
    CU_ASSERT(has(out, "\n12 passed, 20 failed, 0 skipped\n"));
    free(out);
    /* hk-cpu itself passes the same cases: the failures are the defect's */
    CU_ASSERT_EQUAL(sh(V HK_TEST_CPU " --only 'matrix.*.null-x' --only 'matrix.*.null-y'", &out),
                    0);
    CU_ASSERT(has(out, "\n32 passed, 0 failed, 0 skipped\n"));
    free(out);
}

/* Writing past the host's declared answer size is caught by the guard. */
static void test_long_answer_fails(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_BAD_LONG " --only 'negotiate.*'", &out), 1);
    CU_ASSERT(row_is(out, "negotiate.short-answer", "FAIL", "declared 12 bytes, the plugin wrote"));
    CU_ASSERT(row_is(out, "negotiate.current", "PASS", NULL));
    CU_ASSERT(row_is(out, "negotiate.long-answer", "PASS", NULL));
    free(out);
}

/* A hang is a named timeout of that check only. */
static void test_hang_is_a_timeout(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_BAD_HANG " --only 'ops.sscal.host' --only 'ops.dscal.host' "
                         "--timeout 1500", &out), 1);
    CU_ASSERT(row_is(out, "ops.sscal.host", "FAIL", "timed out after 1500 ms"));
    CU_ASSERT(row_is(out, "ops.dscal.host", "PASS", NULL));
    CU_ASSERT(has(out, "\n1 passed, 1 failed, 0 skipped\n"));
    free(out);
}

/* A plugin that cannot make a handle fails validation: its handle_create
 * crashing, exiting, hanging or killing its parent is named in the probe's
 * line (each as what it is), fails the create check in its own process, and fails every check that
 * needs a handle; the checks that need none still run. */
static void create_defect(const char *plugin, const char *how, const char *check_how)
{
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, V "%s --only handle.create-destroy --only ops.sscal.host "
             "--only negotiate.current --timeout 1500", plugin);
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    char line[256];
    snprintf(line, sizeof line, "handles: handle_create(NULL) %s", how);
    CU_ASSERT(has(out, line));
    CU_ASSERT(row_is(out, "handle.create-destroy", "FAIL", check_how));
    CU_ASSERT(row_is(out, "ops.sscal.host", "FAIL", "no handle to check with: handle_create"));
    CU_ASSERT(row_is(out, "negotiate.current", "PASS", NULL));
    CU_ASSERT(has(out, "\n1 passed, 2 failed, 0 skipped\n"));
    free(out);
}

static void test_create_crash_fails(void)
{
    create_defect(HK_TEST_CREATE_CRASH, "crashed (killed by SIGSEGV)", "SIGSEGV");
}

static void test_create_exit_fails(void)
{
    create_defect(HK_TEST_CREATE_EXIT, "exited with status 0", "exited with status 0");
}

static void test_create_hang_fails(void)
{
    create_defect(HK_TEST_CREATE_HANG, "did not finish in 1500 ms", "timed out after 1500 ms");
}

static void test_create_kills_parent_fails(void)
{
    create_defect(HK_TEST_CREATE_KILL_PARENT, "killed its parent process (by SIGKILL)",
                  "killed its parent process (by SIGKILL)");
}

/* A host calls hk.trim/1 before it closes the module: a trim that crashes
 * fails the trim checks in their own processes (each as what it is), and
 * the other checks still pass; hk-cpu, which offers no trim, skips them. */
static void test_trim_crash_fails(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_TRIM_CRASH " --only 'trim.*' --only handle.create-destroy",
                       &out), 1);
    CU_ASSERT(row_is(out, "trim.calls", "FAIL", "killed by SIGSEGV"));
    CU_ASSERT(row_is(out, "trim.threads", "FAIL", "killed by SIGSEGV"));
    CU_ASSERT(row_is(out, "handle.create-destroy", "PASS", NULL));
    CU_ASSERT(has(out, "\n1 passed, 2 failed, 0 skipped\n"));
    free(out);
    CU_ASSERT_EQUAL(sh(V HK_TEST_CPU " --only 'trim.*'", &out), 0);
    CU_ASSERT(row_is(out, "trim.calls", "SKIP", "the plugin offers no hk.trim/1"));
    CU_ASSERT(has(out, "\n0 passed, 0 failed, 2 skipped\n"));
    free(out);
}

/* hk.selfcheck/1 is a verdict a host acts on. A self-check that finds a
 * wrong result fails selfcheck.run naming its reason (and threads, which
 * wants every verdict OK); hk-validate's own workload finds nothing wrong
 * with that plugin's hk.blas1/1, so agrees has nothing against it. */
static void test_selfcheck_failing_fails(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_SELFCHECK_FAILS " --only 'selfcheck.*'", &out), 1);
    CU_ASSERT(row_is(out, "selfcheck.table", "PASS", NULL));
    CU_ASSERT(row_is(out, "selfcheck.run", "FAIL", "INTERNAL: saxpy: y[3] is 0, expected 5"));
    CU_ASSERT(row_is(out, "selfcheck.threads", "FAIL", "saxpy: y[3] is 0, expected 5"));
    CU_ASSERT(row_is(out, "selfcheck.agrees", "PASS", "finds a wrong result"));
    CU_ASSERT(row_is(out, "selfcheck.cuda-current", "SKIP", NULL)); /* hk-cpu underneath */
    CU_ASSERT(has(out, "\n2 passed, 2 failed, 1 skipped\n"));
    free(out);
}

/* A self-check that says OK for a plugin whose saxpy is wrong would let a
 * host move handles to a broken build: agrees fails it, beside the ops
 * check that finds the saxpy; the rest of its contract holds. */
static void test_selfcheck_blind_fails(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_SELFCHECK_BLIND " --only 'selfcheck.*' --only ops.saxpy.host",
                       &out), 1);
    CU_ASSERT(row_is(out, "selfcheck.table", "PASS", NULL));
    CU_ASSERT(row_is(out, "selfcheck.run", "PASS", NULL));
    CU_ASSERT(row_is(out, "selfcheck.threads", "PASS", NULL));
    CU_ASSERT(row_is(out, "selfcheck.agrees", "FAIL",
                     "the self-check passes a plugin whose hk.blas1/1 results are wrong"));
    CU_ASSERT(row_is(out, "selfcheck.agrees", "FAIL", "saxpy"));
    CU_ASSERT(row_is(out, "ops.saxpy.host", "FAIL", NULL));
    CU_ASSERT(has(out, "\n3 passed, 2 failed, 1 skipped\n"));
    free(out);
    /* hk-cpu offers no self-check: each check is skipped, saying so */
    CU_ASSERT_EQUAL(sh(V HK_TEST_CPU " --only 'selfcheck.*'", &out), 0);
    CU_ASSERT(row_is(out, "selfcheck.table", "SKIP", "the plugin offers no hk.selfcheck/1"));
    CU_ASSERT(row_is(out, "selfcheck.agrees", "SKIP", "the plugin offers no hk.selfcheck/1"));
    CU_ASSERT(has(out, "\n0 passed, 0 failed, 5 skipped\n"));
    free(out);
}

/* A check that kills its parent process and its process group ends itself,
 * not the validator: that check fails saying so, the next one runs, and the
 * summary is printed. */
static void test_kill_parent_is_one_failure(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_KILL_PARENT " --only ops.sscal.host --only ops.dscal.host",
                       &out), 1);
    CU_ASSERT(row_is(out, "ops.sscal.host", "FAIL", "killed its parent process (by SIGKILL)"));
    CU_ASSERT(row_is(out, "ops.dscal.host", "PASS", NULL));
    CU_ASSERT(has(out, "\n1 passed, 1 failed, 0 skipped\n"));
    free(out);
}

/* NULL slots are "not supported": reported as such, never called, and every
 * check that needs them says so instead of failing. */
static void test_null_slots_not_supported(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_NULL_SLOTS " --only 'ops.*' --only 'matrix.memset.*' "
                         "--only 'matrix.sdot.*' --only 'threads.*' --only 'handle.info-*' "
                         "--only negotiate.vtable", &out), 0);
    CU_ASSERT(row_is(out, "negotiate.vtable", "PASS", "not supported: handle_info synchronize"));
    CU_ASSERT(row_is(out, "ops.sdot.host", "NOT-SUPPORTED", "sdot is NULL"));
    CU_ASSERT(row_is(out, "ops.dnrm2.device", "NOT-SUPPORTED", "dnrm2 is NULL"));
    CU_ASSERT(row_is(out, "ops.ddot.host", "PASS", NULL));
    CU_ASSERT(row_is(out, "matrix.sdot.host.null-x", "NOT-SUPPORTED", NULL));
    CU_ASSERT(row_is(out, "matrix.memset.null-dst", "NOT-SUPPORTED", "memset is NULL"));
    CU_ASSERT(row_is(out, "threads.synchronize", "NOT-SUPPORTED", NULL));
    CU_ASSERT(row_is(out, "threads.memset", "NOT-SUPPORTED", NULL));
    CU_ASSERT(row_is(out, "handle.info-size", "NOT-SUPPORTED", NULL));
    CU_ASSERT(!strstr(out, "killed by"));
    CU_ASSERT(has(out, " 0 failed, "));
    free(out);
}

static void test_passes_what_it_should(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V HK_TEST_CPU " --only 'ops.*' --only 'negotiate.*' --only 'tables.*'",
                       &out), 0);
    CU_ASSERT(has(out, "plugin: hk-cpu 1.0.0"));
    CU_ASSERT(row_is(out, "ops.dnrm2.host", "PASS", "huge and tiny values"));
    CU_ASSERT(row_is(out, "tables.enum", "PASS", "hk.blas1/1 hk.memory/1"));
    CU_ASSERT(has(out, " 0 failed, "));
    free(out);
}

static void test_modes(void)
{
    char *out;
    CU_ASSERT_EQUAL(sh(V "--list", &out), 0);
    CU_ASSERT(has(out, "negotiate.short-answer\n"));
    CU_ASSERT(has(out, "matrix.saxpy.device.incy-zero-destination\n"));
    CU_ASSERT(has(out, "cuda.fork-child\n"));
    CU_ASSERT(has(out, "selfcheck.agrees\n"));
    free(out);
    CU_ASSERT_EQUAL(sh(V HK_TEST_CPU " --matrix --only 'matrix.sscal.host.n-*'", &out), 0);
    CU_ASSERT_STRING_EQUAL(out, "matrix.sscal.host.n-negative OK\n"
                                "matrix.sscal.host.n-zero-null-vectors OK\n");
    free(out);
    CU_ASSERT_EQUAL(sh(V HK_TEST_CPU " --json --only tables.enum", &out), 0);
    CU_ASSERT(has(out, "{\n  \"plugin\": \"hk-cpu\",\n  \"checks\": [\n    {\n      \"name\": "
                       "\"tables.enum\",\n      \"result\": \"PASS\",\n"));
    CU_ASSERT(has(out, "\n  ],\n  \"passed\": 1,\n  \"failed\": 0,\n"));
    free(out);
    /* the same plugin twice: no difference */
    CU_ASSERT_EQUAL(sh(V "--compare " HK_TEST_CPU " " HK_TEST_CPU " --only 'matrix.s*'", &out), 0);
    CU_ASSERT(has(out, " 0 differ,"));
    free(out);
    /* a defect shows as differences, named by case */
    CU_ASSERT_EQUAL(sh(V "--compare " HK_TEST_CPU " " HK_TEST_BAD_OK " --only 'matrix.s*'", &out),
                    1);
    CU_ASSERT(has(out, "differs: matrix.sdot.host.null-x"));
    CU_ASSERT(has(out, "A=NULL_POINTER"));
    CU_ASSERT(has(out, "B=OK"));
    free(out);
}

static void test_usage_errors(void)
{
    static const struct {
        const char *args, *text;
    } cases[] = {
        {"", "no plugin file given"},
        {HK_TEST_CPU " --frobnicate", "unknown option --frobnicate"},
        {HK_TEST_CPU " --timeout soon", "--timeout soon: not a decimal number"},
        {HK_TEST_CPU " --only", "--only needs a value (PATTERN)"},
        {"/nonexistent/plugin.so", "/nonexistent/plugin.so: not a readable plugin file"},
        {HK_TEST_CPU " " HK_TEST_CPU, "one plugin at a time"},
        {HK_TEST_CPU " --only no-such-check", "no check matches"},
        {"--compare " HK_TEST_CPU, "--compare needs two plugin files"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[2048], *out;
        snprintf(cmd, sizeof cmd, V "%s", cases[i].args);
        CU_ASSERT_EQUAL(sh(cmd, &out), 2);
        CU_ASSERT(has(out, cases[i].text));
        free(out);
    }
    char *out;
    CU_ASSERT_EQUAL(sh(V "--help", &out), 0);
    CU_ASSERT(has(out, "usage: hk-validate PLUGIN.so"));
    free(out);
}

/* Plugin paths are held to the trust rule (docs/security.md): a copy of
 * hk-cpu in a directory others can write is refused with the reason, and
 * loaded only under --insecure-path; /dev/fd/N is a descriptor the caller
 * opened and checked, loaded as such and shown under its file's name. */
static void test_trust_rule(void)
{
    char dir[256], cmd[1200], *out;
    snprintf(dir, sizeof dir, "%s", HK_TEST_TMP_DIR "/hk-validate-wwXXXXXX");
    CU_ASSERT_FATAL(mkdir(HK_TEST_TMP_DIR, 0755) == 0 || errno == EEXIST);
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    CU_ASSERT_FATAL(chmod(dir, 0777) == 0);
    snprintf(cmd, sizeof cmd, "cp " HK_TEST_CPU " %s/hk-cpu.so", dir);
    CU_ASSERT_FATAL(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, V "%s/hk-cpu.so --only tables.enum", dir);
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    char want[1200];
    snprintf(want, sizeof want, "hk-validate: %s/hk-cpu.so is refused: directory %s is writable "
             "by others (mode 0777) (--insecure-path loads your own file as it is)\n", dir, dir);
    CU_ASSERT(has(out, want));
    CU_ASSERT_PTR_NULL(strstr(out, "plugin: hk-cpu"));
    free(out);
    snprintf(cmd, sizeof cmd, V "%s/hk-cpu.so --only tables.enum --insecure-path", dir);
    CU_ASSERT_EQUAL(sh(cmd, &out), 0);
    CU_ASSERT(has(out, "1 passed, 0 failed"));
    free(out);
    CU_ASSERT_EQUAL(sh(V "/dev/fd/3 --only tables.enum 3<" HK_TEST_CPU, &out), 0);
    CU_ASSERT(has(out, "1 passed, 0 failed"));
    CU_ASSERT(has(out, "(" HK_TEST_CPU ")"));
    free(out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CU_ASSERT(system(cmd) == 0);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk-validate", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"a crash fails its check, named by signal, and the run goes on",
         test_crash_is_one_failure},
        {"OK on bad input fails the matrix cases", test_ok_on_bad_input_fails},
        {"writing past the declared answer size fails", test_long_answer_fails},
        {"a hang is a named timeout", test_hang_is_a_timeout},
        {"handle_create crashing fails validation", test_create_crash_fails},
        {"handle_create calling exit fails validation", test_create_exit_fails},
        {"handle_create hanging fails validation", test_create_hang_fails},
        {"a check that kills its parent and group fails alone", test_kill_parent_is_one_failure},
        {"handle_create killing its parent and group fails validation",
         test_create_kills_parent_fails},
        {"a crashing hk.trim/1 fails the trim checks; hk-cpu skips them", test_trim_crash_fails},
        {"a self-check that finds a wrong result fails selfcheck.run with its reason",
         test_selfcheck_failing_fails},
        {"a self-check that passes a wrong saxpy fails selfcheck.agrees; hk-cpu skips",
         test_selfcheck_blind_fails},
        {"NULL slots are reported not supported and never called", test_null_slots_not_supported},
        {"hk-cpu passes negotiation, tables and numbers", test_passes_what_it_should},
        {"--list, --matrix, --json, --compare", test_modes},
        {"usage errors exit 2 with the reason", test_usage_errors},
        {"hk-validate holds plugin paths to the trust rule; --insecure-path; /dev/fd/N",
         test_trust_rule},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    return 0;
}
