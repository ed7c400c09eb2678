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
    (void)deadline_ms;
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1, .log = dl_log};
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

/* Before the check the swap waited for its own call for ever, so the
 * scenario runs in a child process that must end within STUCK_NS. */
static void test_swap_inside_call(void)
{
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        _exit(inside_call_child());
    int status = 0;
    pid_t got = 0;
    for (uint64_t t0 = swp_now_ns(); (got = waitpid(pid, &status, WNOHANG)) == 0;) {
        if (swp_now_ns() - t0 > STUCK_NS) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            CU_FAIL("hk_loader_swap from inside a call did not return within 10 s "
                    "(it waits for its own call to drain)");
            return;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* polling the child's end, with the deadline above */
    }
    CU_ASSERT_EQUAL(got, pid);
    CU_ASSERT(WIFEXITED(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        fprintf(stderr, "\ninside-call child: check %d failed\n", WEXITSTATUS(status));
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

void swp_register_deadline(void)
{
    CU_pSuite s = hk_test_suite("swap from inside a call", NULL, NULL);
    hk_test_add(s, "hk_loader_swap inside a movable-handle call is refused BUSY",
                test_swap_inside_call);
}
