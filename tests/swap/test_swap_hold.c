/* The hold limit and the reporting of a swap's failed destroys.
 *
 * Test doubles: swp_slower's first handle_create (the verification's) and
 * every handle_destroy of swp_slowdestroy take 600 ms, far past the hold
 * time (20 ms here): each such step holds the calls, and the hold limit
 * (5 ms here) must release them long before the step ends, with the swap
 * going on to its usual outcome; the calls are held again 20 ms later, and
 * so on, so that driver work waiting for the launches to pause gets a turn
 * in every hold. swp_baddestroy's handle_destroy fails
 * (after destroying the handle). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "hk_status_text.h"
#include "swap_test.h"

#define HN 256
#define SLOW_NS 600000000u /* the doubles' slow step */
/* What a wait may exceed the hold limit by on a loaded 2-core machine (the
 * watchdog and the callers are threads the scheduler runs late), and still
 * be far below the slow step a hold without limit would last. */
#define SLACK_NS 250000000u

typedef struct hworker {
    pthread_t tid;
    hk_mhandle_t *mh;
    atomic_ullong calls, wrong, failed;
    atomic_ullong max_gap_ns; /* the longest time between two calls returning */
    atomic_ullong max_switches; /* with hcount: most voluntary context switches in one call */
} hworker_t;

static atomic_int hstop;
static atomic_int hcount; /* the workers count their context switches per call */
static hk_blas1_v1_t HB;

static void *hwork(void *arg)
{
    hworker_t *w = arg;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    float x[HN], y[HN];
    for (int i = 0; i < HN; i++) {
        x[i] = (float)(i % 9);
        y[i] = 0.0f;
    }
    uint64_t last = swp_now_ns();
    for (int up = 1; !atomic_load(&hstop); up = !up) {
        const float alpha = up ? 1.0f : -1.0f;
        struct rusage r0, r1;
        int count = atomic_load(&hcount) && getrusage(RUSAGE_THREAD, &r0) == 0;
        hk_status_t st = HB.saxpy(h, HN, &alpha, x, 1, y, 1);
        if (count && getrusage(RUSAGE_THREAD, &r1) == 0 &&
            (unsigned long long)(r1.ru_nvcsw - r0.ru_nvcsw) > atomic_load(&w->max_switches))
            atomic_store(&w->max_switches, (unsigned long long)(r1.ru_nvcsw - r0.ru_nvcsw));
        uint64_t t = swp_now_ns();
        if (t - last > atomic_load(&w->max_gap_ns))
            atomic_store(&w->max_gap_ns, t - last);
        last = t;
        atomic_fetch_add(&w->calls, 1);
        if (st != HK_STATUS_OK) {
            atomic_fetch_add(&w->failed, 1);
            continue;
        }
        for (int i = 0; i < HN; i++) /* y is x after +x, 0 after -x */
            if (y[i] != (up ? x[i] : 0.0f)) {
                atomic_fetch_add(&w->wrong, 1);
                break;
            }
    }
    return NULL;
}

typedef struct hold_fixture {
    hk_loader_t *loader;
    hworker_t w[2];
    pthread_t stall_tid;
    int stall_made;
} hold_fixture_t;

/* The scheduler's longest delay of a thread that only sleeps 200 us at a
 * time: on a loaded machine a caller may wait that long with no hold at
 * all, so a caller's wait is judged against the hold limit plus it. */
static atomic_ullong stall_max_ns;

static void *stall_watch(void *arg)
{
    (void)arg;
    while (!atomic_load(&hstop)) {
        struct timespec d = {0, 200000};
        uint64_t t0 = swp_now_ns();
        nanosleep(&d, NULL);
        uint64_t late = swp_now_ns() - t0;
        late = late > 200000u ? late - 200000u : 0;
        if (late > atomic_load(&stall_max_ns))
            atomic_store(&stall_max_ns, late);
    }
    return NULL;
}

static int hold_begin(hold_fixture_t *f)
{
    memset(f, 0, sizeof *f);
    f->loader = swp_loader();
    hk_plugin_t *a = f->loader ? swp_open(f->loader, SWP_A) : NULL;
    if (!a)
        return 0;
    hk_memory_v1_t mem;
    swp_tables(&HB, &mem);
    atomic_store(&hstop, 0);
    for (int i = 0; i < 2; i++)
        if (hk_mhandle_create_on(a, NULL, &f->w[i].mh) != HK_STATUS_OK)
            return 0;
    for (int i = 0; i < 2; i++)
        if (pthread_create(&f->w[i].tid, NULL, hwork, &f->w[i]) != 0)
            return 0;
    f->stall_made = pthread_create(&f->stall_tid, NULL, stall_watch, NULL) == 0;
    /* both calling before any swap: waited for, not assumed after a pause */
    for (int t = 0; t < 10000 && (atomic_load(&f->w[0].calls) < 16 ||
                                  atomic_load(&f->w[1].calls) < 16); t++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return atomic_load(&f->w[0].calls) >= 16 && atomic_load(&f->w[1].calls) >= 16;
}

static void hold_end(hold_fixture_t *f)
{
    atomic_store(&hstop, 1);
    if (f->stall_made)
        pthread_join(f->stall_tid, NULL);
    for (int i = 0; i < 2; i++) {
        pthread_join(f->w[i].tid, NULL);
        CU_ASSERT_EQUAL(atomic_load(&f->w[i].wrong), 0);
        CU_ASSERT_EQUAL(atomic_load(&f->w[i].failed), 0);
        CU_ASSERT_EQUAL(hk_mhandle_destroy(f->w[i].mh), HK_STATUS_OK);
    }
    CU_ASSERT_EQUAL(hk_loader_destroy(f->loader), HK_STATUS_OK);
}

static swp_state_t hstate(hk_loader_t *loader)
{
    return swp_state(loader);
}

/* One swap whose slow step is held and cut: it succeeds, counts a cut hold
 * no longer than the limit (plus slack), and no caller waited longer. */
static void swap_past_the_limit(hold_fixture_t *f, const char *to, const char *what)
{
    hk_swap_options_t o = {.size = sizeof o, .hold_after_us = 20000, .hold_max_us = 5000};
    swp_state_t before = hstate(f->loader);
    unsigned long long calls0 = atomic_load(&f->w[0].calls) + atomic_load(&f->w[1].calls);
    for (int i = 0; i < 2; i++)
        atomic_store(&f->w[i].max_gap_ns, 0);
    atomic_store(&stall_max_ns, 0);
    uint64_t t0 = swp_now_ns();
    hk_status_t st = hk_loader_swap(f->loader, to, &o, NULL);
    uint64_t took = swp_now_ns() - t0;
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    if (st != HK_STATUS_OK)
        fprintf(stderr, "\n    swap to %s: %s\n", to, hk_loader_last_error(f->loader));
    swp_state_t s = hstate(f->loader);
    unsigned long long gap[2] = {atomic_load(&f->w[0].max_gap_ns),
                                 atomic_load(&f->w[1].max_gap_ns)};
    unsigned long long during =
        atomic_load(&f->w[0].calls) + atomic_load(&f->w[1].calls) - calls0;
    unsigned long long stall = atomic_load(&stall_max_ns);
    printf("\n    %s: swap %.0f ms, %llu hold(s) cut, longest hold %.1f ms, longest wait of a "
           "caller %.1f / %.1f ms, longest scheduler delay %.1f ms, %llu calls meanwhile", what,
           took / 1e6, (unsigned long long)(s.holds_cut - before.holds_cut),
           s.max_hold_ns / 1e6, gap[0] / 1e6, gap[1] / 1e6, stall / 1e6, during);
    CU_ASSERT(took >= SLOW_NS - SLOW_NS / 20); /* the step was slow */
    CU_ASSERT(s.holds > before.holds);
    /* Held again and again while the step runs: one cut hold every 25 ms of
     * a 600 ms step, at least half of them on a loaded machine. */
    CU_ASSERT(s.holds_cut - before.holds_cut >= 12);
    /* Every hold so far within the limit, and one reached it. (The last
     * step that held may be another one, shorter: a loaded machine can take
     * longer than the hold time to drain and close.) */
    CU_ASSERT(s.max_hold_ns >= 5000000u && s.max_hold_ns < 5000000u + SLACK_NS);
    for (int i = 0; i < 2; i++) /* the limit, the slack, and what the scheduler took */
        CU_ASSERT(gap[i] < 5000000u + SLACK_NS + 2 * stall);
    CU_ASSERT(during > 0);
}

/* A slow create of the new plugin (the prepare), a slow destroy of the
 * verification handle and of the old handles (after the switch): every
 * hold ends at the limit, every swap succeeds. */
static void test_hold_limit(void)
{
    hold_fixture_t f;
    CU_ASSERT_FATAL(hold_begin(&f));
    swap_past_the_limit(&f, SWP_DOUBLE("swp_slower"), "slow create of the new plugin");
    swap_past_the_limit(&f, SWP_DOUBLE("swp_slowdestroy"), "slow destroy of the verification "
                                                            "handle");
    swap_past_the_limit(&f, SWP_A, "slow destroy of the old handles");
    hk_mhandle_state_t ms = {.size = sizeof ms};
    CU_ASSERT_EQUAL(hk_mhandle_state(f.w[0].mh, &ms), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(ms.plugin), "1.0.0");
    printf("\n    ");
    hold_end(&f);
}

/* A held caller sleeps until the release wakes it: one hold without a
 * limit through the 600 ms of swp_slower's first create. A caller that
 * polled with short sleeps switched out thousands of times in it (one
 * sleep of 20 us plus the timer's slack each); a caller asleep until the
 * release, rechecking once a millisecond, about once a millisecond held. */
static void test_held_callers_sleep(void)
{
    hold_fixture_t f;
    CU_ASSERT_FATAL(hold_begin(&f));
    for (int i = 0; i < 2; i++) {
        atomic_store(&f.w[i].max_gap_ns, 0);
        atomic_store(&f.w[i].max_switches, 0);
    }
    atomic_store(&hcount, 1);
    hk_swap_options_t o = {.size = sizeof o, .hold_after_us = 1000, .hold_max_us = -1};
    uint64_t t0 = swp_now_ns();
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_DOUBLE("swp_slower"), &o, NULL), HK_STATUS_OK);
    uint64_t took = swp_now_ns() - t0;
    atomic_store(&hcount, 0);
    unsigned long long gap = 0, switches = 0;
    for (int i = 0; i < 2; i++) {
        unsigned long long g = atomic_load(&f.w[i].max_gap_ns);
        unsigned long long n = atomic_load(&f.w[i].max_switches);
        gap = g > gap ? g : gap;
        switches = n > switches ? n : switches;
    }
    printf("\n    one hold of a 600 ms step: swap %.0f ms, longest wait of a caller %.0f ms, "
           "most voluntary context switches in one call %llu\n    ", took / 1e6, gap / 1e6,
           switches);
    CU_ASSERT(took >= SLOW_NS - SLOW_NS / 20); /* the step was slow */
    CU_ASSERT(gap >= SLOW_NS / 2);             /* and a caller was held through most of it */
    CU_ASSERT(switches <= gap / 1000000u + 100u);
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_A, NULL, NULL), HK_STATUS_OK);
    hold_end(&f);
}

/* Each failed handle_destroy of a swap is counted and named; the swaps
 * themselves succeed (or, for a cancel, are given up as asked). */
static void test_failed_destroys_reported(void)
{
    hold_fixture_t f;
    CU_ASSERT_FATAL(hold_begin(&f));
    swp_state_t s = hstate(f.loader);
    CU_ASSERT_EQUAL(s.destroys_failed, 0);
    CU_ASSERT_EQUAL(s.last_destroy_status, HK_STATUS_OK);

    /* To it: its verification handle's destroy fails. */
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_DOUBLE("swp_baddestroy"), NULL, NULL),
                    HK_STATUS_OK);
    s = hstate(f.loader);
    CU_ASSERT_EQUAL(s.destroys_failed, 1);
    CU_ASSERT_EQUAL(s.last_destroy_status, HK_STATUS_INTERNAL);
    const char *e = hk_loader_last_error(f.loader);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, ": 1 handle_destroy call failed; the last: hk-cpu 1.0.8 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "verification handle"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "INTERNAL"));

    /* Away from it: both old handles' destroys fail. */
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_A, NULL, NULL), HK_STATUS_OK);
    s = hstate(f.loader);
    CU_ASSERT_EQUAL(s.destroys_failed, 3);
    e = hk_loader_last_error(f.loader);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "swap to " SWP_A ": 2 handle_destroy calls failed; the "
                                     "last: hk-cpu 1.0.8 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "old handle"));

    /* A swap to it given up: the two new handles and the verification handle. */
    hk_swap_prepared_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_swap_prepare(f.loader, SWP_DOUBLE("swp_baddestroy"), NULL, &p),
                    HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap_cancel(p), HK_STATUS_OK);
    s = hstate(f.loader);
    CU_ASSERT_EQUAL(s.destroys_failed, 6);
    CU_ASSERT_EQUAL(s.swaps, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(hk_loader_last_error(f.loader),
                                  ": 3 handle_destroy calls failed; the last: hk-cpu 1.0.8 "));
    hold_end(&f);
}

void swp_register_hold(void)
{
    CU_pSuite s = hk_test_suite("swap hold limit and failed destroys", NULL, NULL);
    hk_test_add(s, "a hold never lasts past the hold limit; the swaps succeed",
                test_hold_limit);
    hk_test_add(s, "a held caller sleeps until the release wakes it", test_held_callers_sleep);
    hk_test_add(s, "every failed handle_destroy of a swap is counted and named",
                test_failed_destroys_reported);
}
