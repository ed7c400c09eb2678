/* A swap called from inside a movable-handle call, and the deadline of a
 * swap step's calls into a plugin.
 *
 * Test doubles: swp_logcall's sscal calls the host's log callback, which
 * here calls hk_loader_swap on the same loader and thread (the swap would
 * wait for its own call to drain). swp_hangcreate's handle_create,
 * swp_hangdestroy's handle_destroy and swp_hangtrim's hk.trim/1 block on a
 * pipe until the test releases it (swap_plugin.c, SWP_HANG_*), so that a
 * step hangs for as long as the test wants; the test always releases them,
 * and waits for the calls to come back, before it ends. Every scenario that
 * could hang runs on a thread (or, when nothing could release it, in a child
 * process) that the test waits for with a deadline. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hk_status_text.h"
#include "swap_test.h"

#define STEP_US 300000 /* the deadline the scenarios give a step */
/* How long a scenario may take beyond it on a loaded 2-core machine before
 * it counts as stuck: far below "never", far above the scheduler's latency. */
#define STUCK_NS 10000000000ull
/* What a create waiting behind a stuck swap may take beyond the deadline. */
#define SLACK_NS 3000000000ull

static atomic_int hangs, hungs;
static pthread_mutex_t line_lock = PTHREAD_MUTEX_INITIALIZER;
static char warn_line[1024]; /* the last HK_LOG_WARN line that names a deadline */

/* The loader whose log callback swaps (the L1 scenario), and what it saw. */
static hk_loader_t *inner_loader;
static atomic_int inner_swaps;
static hk_status_t inner_status = HK_STATUS_OK;
static char inner_error[1024];

static void dl_log(void *user, hk_log_level_t level, const char *msg)
{
    (void)user;
    if (strncmp(msg, "swp-hang ", 9) == 0)
        atomic_fetch_add(&hangs, 1);
    if (strncmp(msg, "swp-hung ", 9) == 0)
        atomic_fetch_add(&hungs, 1);
    if (level == HK_LOG_WARN && strstr(msg, "deadline")) {
        pthread_mutex_lock(&line_lock);
        snprintf(warn_line, sizeof warn_line, "%s", msg);
        pthread_mutex_unlock(&line_lock);
    }
    if (strncmp(msg, "swp-sscal ", 10) == 0 && inner_loader) {
        /* the host's callback, inside a call through a movable handle */
        inner_status = hk_loader_swap(inner_loader, SWP_A, NULL, NULL);
        snprintf(inner_error, sizeof inner_error, "%s", hk_loader_last_error(inner_loader));
        atomic_fetch_add(&inner_swaps, 1);
    }
}

static hk_loader_t *dl_loader(uint32_t deadline_ms)
{
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1, .log = dl_log,
                             .deadline_ms = deadline_ms};
    hk_loader_t *loader = NULL;
    return hk_loader_create(&o, &loader) == HK_STATUS_OK ? loader : NULL;
}

static hk_plugin_t *dl_open(hk_loader_t *loader, const char *path)
{
    hk_plugin_t *p = NULL;
    if (hk_loader_open(loader, path, &p) != HK_STATUS_OK)
        fprintf(stderr, "\ncannot load %s: %s\n", path, hk_loader_last_error(loader));
    return p;
}

/* ---- a swap from inside a call ---- */

/* The scenario of test_swap_inside_call, in a child process: 0 when all
 * went as it should, else the number of the check that failed. */
static int inside_call_child(void)
{
    inner_loader = dl_loader(0);
    hk_plugin_t *a = inner_loader ? dl_open(inner_loader, SWP_A) : NULL;
    hk_plugin_t *lc = inner_loader ? dl_open(inner_loader, SWP_DOUBLE("swp_logcall")) : NULL;
    hk_mhandle_t *mh = NULL;
    if (!a || !lc || hk_mhandle_create_on(lc, NULL, &mh) != HK_STATUS_OK)
        return 2;
    hk_blas1_v1_t blas;
    hk_memory_v1_t mem;
    swp_tables(&blas, &mem);
    float x[4] = {1, 2, 3, 4}, alpha = 2.0f;
    if (blas.sscal(hk_mhandle_handle(mh), 4, &alpha, x, 1) != HK_STATUS_OK || x[3] != 8.0f)
        return 3;
    if (atomic_load(&inner_swaps) != 1 || inner_status != HK_STATUS_BUSY)
        return 4;
    if (!strstr(inner_error, "swap to " SWP_A " refused: called from inside a call through a "
                             "movable handle of this loader"))
        return 5;
    hk_mhandle_state_t ms = {.size = sizeof ms};
    if (hk_mhandle_state(mh, &ms) != HK_STATUS_OK || ms.plugin != lc || ms.inflight != 0)
        return 6;
    hk_loader_t *loader = inner_loader;
    inner_loader = NULL; /* outside a call the same swap goes through */
    if (hk_loader_swap(loader, SWP_A, NULL, NULL) != HK_STATUS_OK)
        return 7;
    if (hk_mhandle_state(mh, &ms) != HK_STATUS_OK || ms.plugin != a)
        return 8;
    if (hk_mhandle_destroy(mh) != HK_STATUS_OK || hk_loader_destroy(loader) != HK_STATUS_OK)
        return 9;
    return 0;
}

/* Runs child() in a child process that must end within STUCK_NS and exit
 * 0; what names the scenario in the failure. */
static void in_child(int (*child)(void), const char *what)
{
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        _exit(child());
    int status = 0;
    pid_t got = 0;
    for (uint64_t t0 = swp_now_ns(); (got = waitpid(pid, &status, WNOHANG)) == 0;) {
        if (swp_now_ns() - t0 > STUCK_NS) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fprintf(stderr, "\n%s: did not end within 10 s\n", what);
            CU_FAIL("the scenario's child process did not end within 10 s");
            return;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* polling the child's end, with the deadline above */
    }
    CU_ASSERT_EQUAL(got, pid);
    CU_ASSERT(WIFEXITED(status));
    if (WIFSIGNALED(status))
        fprintf(stderr, "\n%s: killed by signal %d\n", what, WTERMSIG(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        fprintf(stderr, "\n%s: check %d failed\n", what, WEXITSTATUS(status));
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Before the check the swap waited for its own call for ever. */
static void test_swap_inside_call(void)
{
    in_child(inside_call_child, "hk_loader_swap from inside a call");
}

/* The threads of this process, from /proc/self/task; -1 if unreadable. */
static int task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* swp_threadexit's handle_destroy leaves work for its thread's end (300 ms
 * in the plugin's code). The swap destroys the old handle on a thread of
 * the deadline's: that thread must have ended before the swap closes the
 * module, or it would come back into unmapped code. */
static int thread_exit_child(void)
{
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1,
                             .isolation = HK_ISOLATION_OFF};
    hk_loader_t *loader = NULL;
    if (hk_loader_create(&o, &loader) != HK_STATUS_OK)
        return 2;
    hk_plugin_t *te = dl_open(loader, SWP_DOUBLE("swp_threadexit"));
    hk_plugin_t *a = dl_open(loader, SWP_A);
    hk_mhandle_t *mh = NULL;
    if (!te || !a || hk_mhandle_create_on(te, NULL, &mh) != HK_STATUS_OK)
        return 3;
    int before = task_count();
    if (hk_loader_swap(loader, SWP_A, NULL, NULL) != HK_STATUS_OK) {
        fprintf(stderr, "\nswap: %s\n", hk_loader_last_error(loader));
        return 4;
    }
    int after = task_count();
    if (before < 1 || after != before) {
        fprintf(stderr, "\nthreads before the swap %d, after it returned %d\n", before, after);
        return 5;
    }
    hk_swap_plugin_state_t ps = {.size = sizeof ps};
    if (hk_plugin_swap_state(te, &ps) != HK_STATUS_OK || ps.module != HK_MODULE_CLOSED)
        return 6;
    if (hk_mhandle_destroy(mh) != HK_STATUS_OK || hk_loader_destroy(loader) != HK_STATUS_OK)
        return 7;
    return 0;
}

static void test_thread_exit_before_close(void)
{
    in_child(thread_exit_child, "a plugin's thread-exit work during a swap");
}

/* ---- deadlines ---- */

static int hang_fds[2] = {-1, -1};

/* Makes the SWP_HANG_* doubles block in this process from now on. */
static int hang_arm(void)
{
    if (pipe2(hang_fds, O_CLOEXEC) != 0) /* the probe process must not inherit it */
        return 0;
    char spec[64];
    snprintf(spec, sizeof spec, "%ld:%d", (long)getpid(), hang_fds[0]);
    atomic_store(&hangs, 0);
    atomic_store(&hungs, 0);
    return setenv("SWP_HANG", spec, 1) == 0;
}

/* Releases every blocked call and waits until each one came back. */
static void hang_release(void)
{
    if (hang_fds[1] >= 0)
        close(hang_fds[1]); /* end of file: every read returns */
    hang_fds[1] = -1;
    uint64_t t0 = swp_now_ns();
    while (atomic_load(&hungs) < atomic_load(&hangs) && swp_now_ns() - t0 < STUCK_NS)
        sched_yield();
    CU_ASSERT_EQUAL(atomic_load(&hungs), atomic_load(&hangs));
    unsetenv("SWP_HANG");
    if (hang_fds[0] >= 0)
        close(hang_fds[0]);
    hang_fds[0] = -1;
}

/* One call that may hang, on a thread of its own. */
typedef struct run {
    pthread_t tid;
    hk_loader_t *loader;
    const char *request;
    int64_t deadline_us;
    int destroy;       /* hk_loader_destroy instead of a swap */
    hk_plugin_t *on;   /* hk_mhandle_create_on and destroy instead of a swap */
    atomic_int done;
    hk_status_t st;
    uint64_t ns;
    char error[1024];
} run_t;

static void *run_main(void *arg)
{
    run_t *r = arg;
    uint64_t t0 = swp_now_ns();
    if (r->destroy) {
        r->st = hk_loader_destroy(r->loader);
    } else if (r->on) {
        hk_mhandle_t *mh = NULL;
        r->st = hk_mhandle_create_on(r->on, NULL, &mh);
        if (mh && hk_mhandle_destroy(mh) != HK_STATUS_OK)
            r->st = HK_STATUS_INTERNAL;
    } else {
        hk_swap_options_t o = {.size = sizeof o, .deadline_us = r->deadline_us};
        r->st = hk_loader_swap(r->loader, r->request, &o, NULL);
        snprintf(r->error, sizeof r->error, "%s", hk_loader_last_error(r->loader));
    }
    r->ns = swp_now_ns() - t0;
    atomic_store(&r->done, 1);
    return NULL;
}

static void run_start(run_t *r)
{
    atomic_store(&r->done, 0);
    CU_ASSERT_FATAL(pthread_create(&r->tid, NULL, run_main, r) == 0);
}

/* Whether cond (an atomic flag or counter) reaches want within STUCK_NS. */
static int wait_for(atomic_int *cond, int want)
{
    for (uint64_t t0 = swp_now_ns(); atomic_load(cond) < want;) {
        if (swp_now_ns() - t0 > STUCK_NS)
            return 0;
        sched_yield();
    }
    return 1;
}

/* Waits for r within STUCK_NS; a run still stuck then is released (so that
 * the program can go on) and counts as a failure. Returns 1 when it ended
 * in time. */
static int run_end(run_t *r, const char *what)
{
    int in_time = wait_for(&r->done, 1);
    if (!in_time) {
        fprintf(stderr, "\n%s did not return within 10 s\n", what);
        CU_FAIL("the call did not return within 10 s of its deadline");
        hang_release();
    }
    pthread_join(r->tid, NULL);
    return in_time;
}

/* While the step hangs: calls on mh go on, and a create on plugin a (and
 * the destroy of what it made) waits for the swap within the deadline and a
 * slack. */
static void calls_go_on(hk_plugin_t *a, hk_mhandle_t *mh)
{
    hk_blas1_v1_t blas;
    hk_memory_v1_t mem;
    swp_tables(&blas, &mem);
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8] = {0}, alpha = 1.0f;
    CU_ASSERT_EQUAL(blas.saxpy(hk_mhandle_handle(mh), 8, &alpha, x, 1, y, 1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(y[7], 8.0f);
    run_t c = {.on = a};
    run_start(&c);
    if (!run_end(&c, "a create of a movable handle while a swap step hangs"))
        return;
    CU_ASSERT_EQUAL(c.st, HK_STATUS_OK);
    CU_ASSERT(c.ns < (uint64_t)STEP_US * 1000u + SLACK_NS);
}

static hk_plugin_t *bound_to(hk_mhandle_t *mh)
{
    hk_mhandle_state_t ms = {.size = sizeof ms};
    return hk_mhandle_state(mh, &ms) == HK_STATUS_OK ? ms.plugin : NULL;
}

static hk_module_state_t module_of(hk_plugin_t *p)
{
    hk_swap_plugin_state_t ps = {.size = sizeof ps};
    hk_plugin_swap_state(p, &ps);
    return ps.module;
}

/* A hung handle_create of the verification: the swap is given up after the
 * deadline, the old implementation keeps serving, creates do not wait for
 * the stuck call, and the stuck plugin's module is never closed. */
static void test_deadline_create(void)
{
    hk_loader_t *loader = dl_loader(0);
    hk_plugin_t *a = loader ? dl_open(loader, SWP_A) : NULL;
    hk_plugin_t *hc = a ? dl_open(loader, SWP_DOUBLE("swp_hangcreate")) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(hc);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, NULL, &mh), HK_STATUS_OK);
    CU_ASSERT_FATAL(hang_arm());
    run_t r = {.loader = loader, .request = SWP_DOUBLE("swp_hangcreate"),
               .deadline_us = STEP_US};
    run_start(&r);
    CU_ASSERT(wait_for(&hangs, 1)); /* the verification's create is stuck */
    calls_go_on(a, mh);
    if (!run_end(&r, "a swap whose handle_create hangs"))
        goto out;
    CU_ASSERT_EQUAL(r.st, HK_STATUS_TIMED_OUT);
    CU_ASSERT(r.ns >= (uint64_t)STEP_US * 1000u);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.error, "refused: hk-cpu 1.0.12 handle_create (the "
                                           "verification handle) did not return within 300 ms"));
    CU_ASSERT_PTR_EQUAL(bound_to(mh), a); /* the old implementation serves */
    CU_ASSERT_EQUAL(module_of(hc), HK_MODULE_OPEN);
    /* the loader is not stalled: another swap goes through */
    CU_ASSERT_EQUAL(hk_loader_swap(loader, SWP_B, NULL, NULL), HK_STATUS_OK);
    hang_release();
out:
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    /* its call was stuck: the module is left open for the process */
    CU_ASSERT(swp_mapped(SWP_DOUBLE("swp_hangcreate")));
}

/* A hung handle_destroy of an old handle, after the switch: the swap stops
 * waiting at the deadline, the handles run the new plugin, and the old
 * module, whose code may still run, is not closed. */
static void test_deadline_destroy(void)
{
    hk_loader_t *loader = dl_loader(0);
    hk_plugin_t *a = loader ? dl_open(loader, SWP_A) : NULL;
    hk_plugin_t *hd = a ? dl_open(loader, SWP_DOUBLE("swp_hangdestroy")) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(hd);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(hd, NULL, &mh), HK_STATUS_OK);
    CU_ASSERT_FATAL(hang_arm());
    run_t r = {.loader = loader, .request = SWP_A, .deadline_us = STEP_US};
    run_start(&r);
    CU_ASSERT(wait_for(&hangs, 1));
    calls_go_on(a, mh);
    if (!run_end(&r, "a swap whose old handle's handle_destroy hangs"))
        goto out;
    CU_ASSERT_EQUAL(r.st, HK_STATUS_TIMED_OUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.error, ": hk-cpu 1.0.13 handle_destroy (an old handle) "
                                           "did not return within 300 ms"));
    CU_ASSERT_PTR_EQUAL(bound_to(mh), a); /* switched before the drain */
    CU_ASSERT_EQUAL(module_of(hd), HK_MODULE_OPEN);
    CU_ASSERT(swp_mapped(SWP_DOUBLE("swp_hangdestroy")));
    hang_release();
out:
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    CU_ASSERT(swp_mapped(SWP_DOUBLE("swp_hangdestroy")));
}

/* A hung hk.trim/1 before the close of the old module. */
static void test_deadline_trim_swap(void)
{
    hk_loader_t *loader = dl_loader(0);
    hk_plugin_t *a = loader ? dl_open(loader, SWP_A) : NULL;
    hk_plugin_t *ht = a ? dl_open(loader, SWP_DOUBLE("swp_hangtrim")) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(ht);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(ht, NULL, &mh), HK_STATUS_OK);
    CU_ASSERT_FATAL(hang_arm());
    run_t r = {.loader = loader, .request = SWP_A, .deadline_us = STEP_US};
    run_start(&r);
    CU_ASSERT(wait_for(&hangs, 1));
    calls_go_on(a, mh);
    if (!run_end(&r, "a swap whose old plugin's trim hangs"))
        goto out;
    CU_ASSERT_EQUAL(r.st, HK_STATUS_TIMED_OUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.error, ": hk-cpu 1.0.14 hk.trim/1 (before its module is "
                                           "closed) did not return within 300 ms"));
    CU_ASSERT_PTR_EQUAL(bound_to(mh), a);
    CU_ASSERT_EQUAL(module_of(ht), HK_MODULE_OPEN);
    CU_ASSERT(swp_mapped(SWP_DOUBLE("swp_hangtrim")));
    hang_release();
out:
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    CU_ASSERT(swp_mapped(SWP_DOUBLE("swp_hangtrim")));
}

/* hk_loader_destroy with a hung trim returns after the loader's deadline,
 * leaves that module open and says so through the log callback. */
static void test_deadline_trim_destroy(void)
{
    hk_loader_t *loader = dl_loader(STEP_US / 1000);
    hk_plugin_t *ht = loader ? dl_open(loader, SWP_DOUBLE("swp_hangtrim")) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(ht);
    pthread_mutex_lock(&line_lock);
    warn_line[0] = '\0';
    pthread_mutex_unlock(&line_lock);
    CU_ASSERT_FATAL(hang_arm());
    run_t r = {.loader = loader, .destroy = 1};
    run_start(&r);
    CU_ASSERT(wait_for(&hangs, 1));
    if (!run_end(&r, "hk_loader_destroy whose plugin's trim hangs"))
        return;
    CU_ASSERT_EQUAL(r.st, HK_STATUS_OK);
    CU_ASSERT(r.ns >= (uint64_t)STEP_US * 1000u);
    pthread_mutex_lock(&line_lock);
    CU_ASSERT_PTR_NOT_NULL(strstr(warn_line, "hk-cpu 1.0.14 hk.trim/1 (before its module is "
                                             "closed) did not return within 300 ms"));
    pthread_mutex_unlock(&line_lock);
    CU_ASSERT(swp_mapped(SWP_DOUBLE("swp_hangtrim")));
    hang_release();
    CU_ASSERT(swp_mapped(SWP_DOUBLE("swp_hangtrim")));
}

void swp_register_deadline(void)
{
    CU_pSuite s = hk_test_suite("swap from inside a call", NULL, NULL);
    hk_test_add(s, "hk_loader_swap inside a movable-handle call is refused BUSY",
                test_swap_inside_call);
    hk_test_add(s, "a step's thread has ended, its thread-exit work in the plugin done, "
                   "before the swap closes the module", test_thread_exit_before_close);
    s = hk_test_suite("swap step deadlines", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"a hung handle_create gives the swap up; the old plugin serves", test_deadline_create},
        {"a hung handle_destroy of an old handle ends the swap's wait", test_deadline_destroy},
        {"a hung hk.trim/1 before a swap's close leaves the module open", test_deadline_trim_swap},
        {"hk_loader_destroy returns on a hung hk.trim/1, module left open",
         test_deadline_trim_destroy},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
