/* The probe process against candidates that attack it or its host rather
 * than just failing: signals to the process group or to the probe, a flood
 * of standard error, a negotiation that misbehaves only when it can log.
 * Each host runs in a child of its own process group (tl_host_run), so a
 * candidate that reaches the host ends that child, never the suite; each
 * test checks that the host survived and how every candidate was judged. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_test.h"
#include "test_loader_util.h"

static char tmp[4096];    /* this test's directory, under HK_TEST_TMP_DIR */
static char marker[4200]; /* $HK_TP_MARKER */

static void setup(void)
{
    tl_marked_dir(tmp, sizeof(tmp), marker, sizeof(marker));
}

/* Copies a built plugin into this test's directory as name. */
static void put(const char *src, const char *name)
{
    char p[8400];
    CU_ASSERT_EQUAL_FATAL(tl_copy(src, tmp, name, 0644, p, sizeof(p)), 0);
}

/* 1 when run has the report of tmp/name with this stage, status and
 * reason. */
static int has_report(const tl_host_run_t *run, const char *name, const char *stage,
                      const char *status, const char *reason)
{
    char line[8600];
    snprintf(line, sizeof(line), "report=%s/%s|%s|%s|%s", tmp, name, stage, status, reason);
    return tl_has_line(run, line);
}

/* The good plugins every directory test holds, around the hostile ones in
 * name order, so that candidates before and after a hostile one are probed
 * in its company. */
static const char *const goods[] = {"a_good.so", "b_good.so", "y_good.so", "z_good.so"};

static void put_goods(void)
{
    for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++)
        put(tl_plugin(i % 2 ? "tp_twin1.so" : "tp_twin2.so"), goods[i]);
}

static void expect_goods_loaded(const tl_host_run_t *run)
{
    for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++)
        CU_ASSERT(has_report(run, goods[i], "loaded", "OK", ""));
}

/* Scans this test's directory holding the hostile build file (copied as
 * name) among the goods, with job's other settings; asserts that the host
 * exited with status 0. */
static void scan_among_goods(const char *file, const char *name, tl_host_job_t *job,
                             tl_host_run_t *run)
{
    put(tl_hostile(file), name);
    put_goods();
    job->scan_dir = tmp;
    CU_ASSERT_EQUAL(tl_host_run(job, run), 0);
}

/* One hostile build file among the goods (scan_among_goods, run as a
 * directory scan and nothing else): it alone is refused in the probe stage
 * with reason, the four goods load. */
static void expect_alone_refused(const char *file, const char *name, const char *reason,
                                 tl_host_run_t *run)
{
    tl_host_job_t job = {0};
    scan_among_goods(file, name, &job, run);
    CU_ASSERT(has_report(run, name, "probe", "LOAD_FAILED", reason));
    expect_goods_loaded(run);
    CU_ASSERT(tl_has_line(run, "plugins=4"));
}

/* A swap candidate (a hostile build of hk-cpu of this version) and the
 * reason its verification in the probe fails. */
typedef struct swap_case {
    const char *file, *version, *reason;
} swap_case_t;

/* For each case, a host swaps its movable handle on hk-cpu 1.0.0 to the
 * file: the swap is refused, naming the version and reason, and the handle
 * still works on hk-cpu 1.0.0. With linger_ms (see tl_host_job_t), also
 * that the host survived its loader's destroy. */
static void expect_swaps_refused(const swap_case_t *cases, size_t n, int linger_ms)
{
    char line[8600];
    for (size_t i = 0; i < n; i++) {
        const char *path = tl_hostile(cases[i].file);
        tl_host_job_t job = {.swap_to = path, .deadline_ms = 30000, .linger_ms = linger_ms};
        tl_host_run_t run;
        CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
        snprintf(line, sizeof(line), "swap=LOAD_FAILED|swap to %s refused: hk-cpu %s failed in "
                 "the probe process: %s", path, cases[i].version, cases[i].reason);
        CU_ASSERT(tl_has_line(&run, line));
        CU_ASSERT(tl_has_line(&run, "saxpy=OK|3"));
        CU_ASSERT(tl_has_line(&run, "bound=hk-cpu 1.0.0"));
        if (linger_ms)
            CU_ASSERT(tl_has_line(&run, "survived=1"));
    }
}

/* kill(0, SIGKILL) in a negotiation: the probe and its children are in
 * process groups of their own, so it reaches only the candidate's. The host
 * was killed with its probe (wait status 9). */
static void test_kill_process_group(void)
{
    setup();
    tl_host_run_t run;
    expect_alone_refused("tp_neg_killgroup.so", "m_killgroup.so",
                         "negotiation killed by SIGKILL", &run);
    tl_marked_dir_remove(tmp);
}

/* A candidate that kills the probe process costs only itself: the others
 * are probed again in a new probe process, and the one that kills it
 * alone is named. Before, every candidate of the directory was refused. */
static void test_kill_probe(void)
{
    setup();
    tl_host_run_t run;
    expect_alone_refused("tp_neg_killprobe.so", "m_killprobe.so",
                         "the probe process was killed by SIGKILL while it probed this "
                         "candidate alone", &run);
    tl_marked_dir_remove(tmp);
}

/* A candidate that stops the probe (SIGSTOP): the host sees it stopped at
 * once instead of waiting out the probe's deadline, and it costs only that
 * candidate. */
static void test_stop_probe(void)
{
    setup();
    tl_host_run_t run;
    expect_alone_refused("tp_neg_stopprobe.so", "m_stopprobe.so",
                         "the probe process was stopped by SIGSTOP while it probed this "
                         "candidate alone", &run);
    CU_ASSERT(run.ms < 2000); /* the probe's own deadline is 2.6 s here */
    tl_marked_dir_remove(tmp);
}

/* What tp_flood writes first: lines of 63 letters. */
static void flood_text(char *out, size_t n, size_t bytes)
{
    size_t k = 0;
    for (size_t i = 0; i < bytes && k + 3 < n; i++) {
        if (i % 64 == 63) {
            out[k++] = '\\';
            out[k++] = 'n';
        } else {
            out[k++] = (char)('a' + i % 26);
        }
    }
    out[k] = '\0';
}

/* 64 MiB to stderr during negotiation, then a crash: the host's stderr gets
 * none of it; the refusal says how much there was and shows its start. It
 * all went to the host's stderr before. */
static void test_stderr_flood(void)
{
    char prefix[8600], text[4096];
    setup();
    tl_host_job_t job = {.capture_stderr = 1, .timeout_ms = 10000};
    tl_host_run_t run;
    scan_among_goods("tp_neg_stderr.so", "m_stderr.so", &job, &run);
    CU_ASSERT(run.err_bytes == 0);
    if (run.err_bytes != 0)
        printf("\n    the host's stderr got %lld bytes: %.200s", run.err_bytes, run.err_head);
    flood_text(text, sizeof(text), 1024);
    snprintf(prefix, sizeof(prefix), "report=%s/m_stderr.so|probe|LOAD_FAILED|negotiation killed "
             "by SIGSEGV; stderr: 67108864 bytes, the first 1024: \"%s", tmp, text);
    CU_ASSERT(tl_has_line_like(&run, prefix, "\""));
    expect_goods_loaded(&run);
    tl_marked_dir_remove(tmp);
}

/* Negotiations that misbehave only when given a log callback, opened by a
 * host that gives one (with a callback that reads msg as the string the ABI
 * promises): each is refused with its reason, the callback never hears
 * from the plugin (one line per refusal, from the loader, on the host's
 * thread), and the host survives, also past the moment a thread left behind
 * would run in a closed module. Before, the probe negotiated without a
 * callback, every one of them passed, and the host died, hung or got the
 * plugin's calls. Without a callback each loads, in the probe and in the
 * host alike. */
static void test_negotiation_with_log(void)
{
    static const tl_refusal_t cases[] = {
        {"tp_neglog_crash.so", "negotiation killed by SIGSEGV"},
        {"tp_neglog_exit.so", "negotiation exited with status 3"},
        {"tp_neglog_hang.so", "negotiation did not answer within 300 ms"},
        {"tp_neglog_unterminated.so", "negotiation broke the log callback's rules: a message "
                                      "whose NUL is not in readable memory (16 bytes read)"},
        {"tp_neglog_null.so", "negotiation broke the log callback's rules: a NULL message"},
        {"tp_neglog_flood.so", "negotiation broke the log callback's rules: more than 256 lines"},
        {"tp_neglog_thread.so", "negotiation broke the log callback's rules: a call from a "
                                "thread other than the one negotiating"},
        {"tp_neglog_after.so", "negotiation left 1 thread running after it returned"},
    };
    char line[8600];
    setup();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *path = tl_hostile(cases[i].file);
        int last = i + 1 == sizeof(cases) / sizeof(cases[0]);
        tl_host_job_t job = {.open_path = path, .log = 1, .linger_ms = last ? 400 : 0,
                             .deadline_ms = 20000};
        tl_host_run_t run;
        CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
        snprintf(line, sizeof(line), "report=%s|probe|LOAD_FAILED|%s", path, cases[i].reason);
        CU_ASSERT(tl_has_line(&run, line));
        CU_ASSERT(tl_has_line(&run, "log_lines=1"));
        CU_ASSERT(tl_has_line(&run, "log_foreign=0"));
        if (last)
            CU_ASSERT(tl_has_line(&run, "survived=1"));

        tl_host_job_t quiet = {.open_path = path};
        CU_ASSERT_EQUAL(tl_host_run(&quiet, &run), 0);
        snprintf(line, sizeof(line), "report=%s|loaded|OK|", path);
        CU_ASSERT(tl_has_line(&run, line));
    }
    tl_marked_dir_remove(tmp);
}

/* A swap to a plugin whose handle_create or verification workload crashes,
 * exits or hangs: the probe process verifies it first, the swap is refused
 * with the reason, the movable handle stays on hk-cpu and works, and the
 * host survives (it died before, the verification running in it). The
 * control: a good one is verified there and in the host, and swapped in. */
static void test_swap_verified_in_probe(void)
{
    static const swap_case_t cases[] = {
        {"tv_create_crash.so", "1.0.6", "verification killed by SIGSEGV"},
        {"tv_saxpy_crash.so", "1.0.7", "verification killed by SIGSEGV"},
        {"tv_saxpy_exit.so", "1.0.8", "verification exited with status 3"},
        {"tv_saxpy_hang.so", "1.0.9", "verification did not finish within 3000 ms"},
    };
    expect_swaps_refused(cases, sizeof(cases) / sizeof(cases[0]), 0);
    tl_host_job_t job = {.swap_to = tl_hostile("tv_good.so")};
    tl_host_run_t run;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    CU_ASSERT(tl_has_line(&run, "swap=OK|"));
    CU_ASSERT(tl_has_line(&run, "saxpy=OK|3"));
    CU_ASSERT(tl_has_line(&run, "bound=hk-cpu 1.0.5"));
}

/* A probe program that the kernel cannot execute (a text file without #!):
 * the spawn fails with ENOEXEC, and the refusal gives that errno's text.
 * Before, the reason held whatever the stack had there: the GNU strerror_r
 * returns its text instead of always filling the buffer. */
static void test_probe_exec_fails(void)
{
    char probe[4200], line[8600];
    setup();
    snprintf(probe, sizeof(probe), "%s/not-a-program", tmp);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0700);
    CU_ASSERT_FATAL(fd >= 0);
    static const char text[] = "this is no program and has no interpreter line\n";
    CU_ASSERT_EQUAL(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    const char *path = tl_plugin("tp_good.so");
    tl_host_job_t job = {.open_path = path, .probe_path = probe};
    tl_host_run_t run;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    snprintf(line, sizeof(line), "report=%s|probe|LOAD_FAILED|cannot start the probe program: "
             "%s", path, strerror(ENOEXEC));
    CU_ASSERT(tl_has_line(&run, line));
    if (!tl_has_line(&run, line))
        printf("\n    the host said:\n%s", run.out);
    tl_marked_dir_remove(tmp);
}

/* 60 candidates (copies of hk-cpu) in a directory, scanned by a host with
 * 90 descriptors free: every loaded plugin keeps one, which leaves 30 for
 * the checks and the probe. Each candidate holds a descriptor from its
 * check until it is finished, and the probe takes another for it, so the
 * loader admits them in batches that fit: all 60 load. Before, the whole
 * directory was checked at once and the probe could not be started (too
 * many open files): every one was refused. */
static void test_scan_fits_descriptors(void)
{
    char name[32], line[8600];
    enum { COUNT = 60 };
    setup();
    CU_ASSERT_EQUAL_FATAL(chmod(tmp, 0700), 0);
    for (int i = 0; i < COUNT; i++) {
        snprintf(name, sizeof(name), "cpu_%02d.so", i);
        put(HK_TEST_CPU_PLUGIN, name);
    }
    tl_host_job_t job = {.scan_dir = tmp, .nofile_free = COUNT + 30, .timeout_ms = 10000};
    tl_host_run_t run;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    int loaded = 0;
    for (int i = 0; i < COUNT; i++) {
        snprintf(name, sizeof(name), "cpu_%02d.so", i);
        loaded += has_report(&run, name, "loaded", "OK", "");
    }
    CU_ASSERT_EQUAL(loaded, COUNT);
    snprintf(line, sizeof(line), "plugins=%d", COUNT);
    CU_ASSERT(tl_has_line(&run, line));
    if (loaded != COUNT)
        printf("\n    %d of %d loaded; the host said:\n%.3000s", loaded, COUNT, run.out);
    tl_marked_dir_remove(tmp);
}

/* A swap to a plugin whose hk.trim/1 crashes or exits: the probe's
 * verification destroys its handle and calls the trim, as a host does
 * before it closes the module, so the swap is refused with a reason naming
 * the trim, the movable handle stays on hk-cpu and works, and the host
 * survives its loader's destroy. Before, the swap passed, and the host died
 * at the close (the destroy's trim). */
static void test_swap_trim_in_probe(void)
{
    static const swap_case_t cases[] = {
        {"tv_trim_crash.so", "1.0.10", "trim (hk.trim/1) killed by SIGSEGV"},
        {"tv_trim_exit.so", "1.0.11", "trim (hk.trim/1) exited with status 3"},
    };
    expect_swaps_refused(cases, sizeof(cases) / sizeof(cases[0]), 1);
}

void tl_register_probe(void)
{
    CU_pSuite s = hk_test_suite("loader_probe", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"kill(0, SIGKILL) in a negotiation: only that candidate dies", test_kill_process_group},
        {"a candidate that kills the probe costs only itself", test_kill_probe},
        {"a candidate that stops the probe costs only itself", test_stop_probe},
        {"64 MiB of stderr: kept from the host, its start in the reason", test_stderr_flood},
        {"negotiations that misbehave only with a log callback: refused",
         test_negotiation_with_log},
        {"a swap's verification crashes, exits, hangs: refused in the probe",
         test_swap_verified_in_probe},
        {"a swap to a plugin whose trim crashes or exits: refused in the probe",
         test_swap_trim_in_probe},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    CU_pTest exec = hk_test_add(s, "a probe program that cannot be executed: the errno's text",
                                test_probe_exec_fails);
    CU_pTest fds = hk_test_add(s, "60 candidates with 90 free descriptors: admitted in "
                               "batches, all load", test_scan_fits_descriptors);
    /* valgrind runs a program's exec itself (a failed one is an exit of 127,
     * not the errno) and keeps descriptors of its own below the limit. */
    const char *vg = getenv("HK_TEST_UNDER_VALGRIND");
    if (vg && *vg) {
        hk_test_skip(exec, "under valgrind an exec that fails is an exit status of 127");
        hk_test_skip(fds, "valgrind keeps descriptors of its own below the limit");
    }
}
