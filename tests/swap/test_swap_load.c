/* Swap under load: 8 threads call through movable handles (one each and one
 * shared by all), every result checked, while the main thread swaps between
 * two builds of hk-cpu 100 times and once tries a plugin that computes
 * wrong. Prints the swap's timings (P8) and the cost of the forwarding path
 * against a direct call (P9); neither figure is asserted. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hk_status_text.h"
#include "swap_test.h"

#define THREADS 8
#define SWAPS 100
#define N 256

typedef struct worker {
    pthread_t tid;
    hk_mhandle_t *own;
    hk_mhandle_t *shared;
    atomic_ullong issued, completed, wrong, failed;
    /* Per phase (0: no swap running, 1: swapping), written by the worker: */
    uint64_t calls[2], slow[2], max_ns[2]; /* calls, calls over 100 us, the longest */
    char first_error[256];
} worker_t;

static atomic_int stop, swapping;
static hk_blas1_v1_t B;
static hk_memory_v1_t M;

static void note_failure(worker_t *w, const char *op, hk_status_t st, hk_mhandle_t *mh)
{
    atomic_fetch_add(&w->failed, 1);
    if (!w->first_error[0]) {
        char why[160];
        hk_mhandle_last_error_copy(mh, why, sizeof why);
        snprintf(w->first_error, sizeof w->first_error, "%s: %s: %s", op, hk_status_name(st), why);
    }
}

/* Counts the call as issued before it and completed after it, and times it. */
#define CALL(w, expr, out)                                                                     \
    do {                                                                                       \
        int during_ = atomic_load_explicit(&swapping, memory_order_relaxed);                   \
        atomic_fetch_add(&(w)->issued, 1);                                                     \
        uint64_t t_ = swp_now_ns();                                                            \
        (out) = (expr);                                                                        \
        t_ = swp_now_ns() - t_;                                                                \
        atomic_fetch_add(&(w)->completed, 1);                                                  \
        (w)->calls[during_]++;                                                                 \
        (w)->slow[during_] += t_ > 100000;                                                     \
        if (t_ > (w)->max_ns[during_])                                                         \
            (w)->max_ns[during_] = t_;                                                         \
    } while (0)

/* Each round: y += x or y -= x on the thread's own handle (y is checked
 * whole), then x.y on the shared handle (checked against the exact sum). */
static void *work(void *arg)
{
    worker_t *w = arg;
    hk_handle_t *own = hk_mhandle_handle(w->own), *shared = hk_mhandle_handle(w->shared);
    float x[N], y[N], y0[N];
    double dot_lo = 0.0, dot_hi = 0.0;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 5 - 2);
        y0[i] = y[i] = (float)(i % 3 - 1);
        dot_lo += (double)x[i] * y0[i];
        dot_hi += (double)x[i] * (y0[i] + x[i]);
    }
    int up = 1;
    while (!atomic_load(&stop)) {
        float alpha = up ? 1.0f : -1.0f, dot = 0.0f;
        hk_status_t st;
        CALL(w, B.saxpy(own, N, &alpha, x, 1, y, 1), st);
        if (st != HK_STATUS_OK) {
            note_failure(w, "saxpy", st, w->own);
            break;
        }
        for (int i = 0; i < N; i++)
            if (y[i] != y0[i] + (up ? x[i] : 0.0f)) {
                atomic_fetch_add(&w->wrong, 1);
                break;
            }
        CALL(w, B.sdot(shared, N, x, 1, y, 1, &dot), st);
        if (st != HK_STATUS_OK) {
            note_failure(w, "sdot", st, w->shared);
            break;
        }
        if ((double)dot != (up ? dot_hi : dot_lo))
            atomic_fetch_add(&w->wrong, 1);
        up = !up;
    }
    return NULL;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static worker_t workers[THREADS];

static void start_workers(hk_loader_t *loader, hk_plugin_t *a, int threads, hk_mhandle_t **shared)
{
    swp_tables(&B, &M);
    atomic_store(&stop, 0);
    atomic_store(&swapping, 0);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, NULL, shared), HK_STATUS_OK);
    for (int t = 0; t < threads; t++) {
        worker_t *w = &workers[t];
        memset(w, 0, sizeof *w);
        w->shared = *shared;
        CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(loader, SWP_A, NULL, &w->own), HK_STATUS_OK);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&w->tid, NULL, work, w), 0);
    }
}

/* Swaps `swaps` times between the two builds (and once, halfway, to a plugin
 * that fails verification); fills the switch, drain and call times. */
static void swap_many(hk_loader_t *loader, hk_plugin_t *a, hk_plugin_t *b, int swaps,
                      uint64_t *sw_ns, uint64_t *dr_ns, uint64_t *wall_ns)
{
    hk_mhandle_t *probe = workers[0].own;
    for (int i = 0; i < swaps; i++) {
        if (i == swaps / 2) {
            CU_ASSERT_EQUAL(hk_loader_swap(loader, SWP_DOUBLE("swp_wrong"), NULL, NULL),
                            HK_STATUS_LOAD_FAILED);
            hk_mhandle_state_t ms = {.size = sizeof ms};
            CU_ASSERT_EQUAL(hk_mhandle_state(probe, &ms), HK_STATUS_OK);
            CU_ASSERT_PTR_EQUAL(ms.plugin, (i % 2) ? b : a); /* still serving */
        }
        hk_plugin_t *from = (i % 2) ? b : a;
        uint64_t t0 = swp_now_ns();
        hk_status_t st = hk_loader_swap(loader, (i % 2) ? SWP_A : SWP_B, NULL, NULL);
        wall_ns[i] = swp_now_ns() - t0;
        CU_ASSERT_EQUAL(st, HK_STATUS_OK);
        if (st != HK_STATUS_OK)
            fprintf(stderr, "\nswap %d: %s\n", i, hk_loader_last_error(loader));
        swp_state_t ls = swp_state(loader);
        sw_ns[i] = ls.last_switch_ns;
        dr_ns[i] = ls.last_drain_ns;
        hk_swap_plugin_state_t ps = {.size = sizeof ps};
        hk_plugin_swap_state(from, &ps);
        CU_ASSERT_EQUAL(ps.module, HK_MODULE_CLOSED);
        CU_ASSERT_EQUAL(ps.handles + ps.inflight + ps.draining, 0);
        CU_ASSERT(!swp_mapped(hk_plugin_path(from)));
        sleep_us(1000);
    }
}

typedef struct totals {
    unsigned long long issued, completed, wrong, failed;
    uint64_t calls[2], slow[2], max_ns[2];
} totals_t;

static void join_workers(int threads, totals_t *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < threads; i++) {
        worker_t *w = &workers[i];
        pthread_join(w->tid, NULL);
        t->issued += atomic_load(&w->issued);
        t->completed += atomic_load(&w->completed);
        t->wrong += atomic_load(&w->wrong);
        t->failed += atomic_load(&w->failed);
        CU_ASSERT(atomic_load(&w->completed) > 0);
        if (w->first_error[0])
            fprintf(stderr, "\nthread %d: %s\n", i, w->first_error);
        for (int d = 0; d < 2; d++) {
            t->calls[d] += w->calls[d];
            t->slow[d] += w->slow[d];
            t->max_ns[d] = w->max_ns[d] > t->max_ns[d] ? w->max_ns[d] : t->max_ns[d];
        }
    }
}

/* threads call while the main thread swaps `swaps` times, then as long again
 * without swaps (the baseline of the call times). Checks every result and
 * the state after, and prints the figures. */
static void run_load(int threads, int swaps)
{
    hk_loader_t *loader = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = swp_open(loader, SWP_A), *b = swp_open(loader, SWP_B);
    CU_ASSERT_FATAL(a && b);
    hk_mhandle_t *shared = NULL;
    start_workers(loader, a, threads, &shared);
    static uint64_t sw_ns[SWAPS], dr_ns[SWAPS], wall_ns[SWAPS];
    atomic_store(&swapping, 1);
    uint64_t t0 = swp_now_ns();
    swap_many(loader, a, b, swaps, sw_ns, dr_ns, wall_ns);
    uint64_t busy = swp_now_ns() - t0;
    atomic_store(&swapping, 0);
    sleep_us((long)(busy / 1000));
    atomic_store(&stop, 1);
    totals_t t;
    join_workers(threads, &t);
    CU_ASSERT_EQUAL(t.issued, t.completed); /* no call lost */
    CU_ASSERT_EQUAL(t.wrong, 0);
    CU_ASSERT_EQUAL(t.failed, 0);

    swp_state_t ls = swp_state(loader);
    CU_ASSERT_EQUAL(ls.swaps, (uint64_t)swaps);
    CU_ASSERT_EQUAL(ls.refused, 1);
    CU_ASSERT_EQUAL(ls.modules_closed, (uint64_t)swaps);
    CU_ASSERT_EQUAL(ls.handles, (uint64_t)threads + 1);
    CU_ASSERT_EQUAL(ls.inflight, 0);
    hk_swap_plugin_state_t pa = {.size = sizeof pa}, pb = {.size = sizeof pb};
    hk_plugin_swap_state(a, &pa);
    hk_plugin_swap_state(b, &pb);
    CU_ASSERT_EQUAL(pa.handles, (uint64_t)threads + 1); /* an even number of swaps: back on a */
    CU_ASSERT_EQUAL(pa.reopens, (uint64_t)swaps / 2);
    CU_ASSERT_EQUAL(pb.module, HK_MODULE_CLOSED);

    qsort(sw_ns, swaps, sizeof *sw_ns, cmp_u64);
    qsort(dr_ns, swaps, sizeof *dr_ns, cmp_u64);
    qsort(wall_ns, swaps, sizeof *wall_ns, cmp_u64);
    printf("\n    R4: %d thread(s), %d swaps: %llu calls, %llu wrong, %llu failed, %llu lost\n"
           "    P8: swap call until every handle runs the new implementation: median %.1f us, "
           "max %.1f us (target 1000 us)\n"
           "    P8: then drain and destroy of the old handles: median %.1f us, max %.1f us; "
           "whole swap call: median %.1f us, max %.1f us\n"
           "    P8: calls over 100 us: %llu of %llu while swapping (longest %.1f us), %llu of "
           "%llu in as long without swaps (longest %.1f us)\n    ",
           threads, swaps, t.issued, t.wrong, t.failed, t.issued - t.completed,
           sw_ns[swaps / 2] / 1e3, sw_ns[swaps - 1] / 1e3, dr_ns[swaps / 2] / 1e3,
           dr_ns[swaps - 1] / 1e3, wall_ns[swaps / 2] / 1e3, wall_ns[swaps - 1] / 1e3,
           (unsigned long long)t.slow[1], (unsigned long long)t.calls[1], t.max_ns[1] / 1e3,
           (unsigned long long)t.slow[0], (unsigned long long)t.calls[0], t.max_ns[0] / 1e3);

    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_BUSY); /* handles still live */
    for (int i = 0; i < threads; i++)
        CU_ASSERT_EQUAL(hk_mhandle_destroy(workers[i].own), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(shared), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_swap_under_load(void)
{
    run_load(THREADS, SWAPS);
}

/* One calling thread, so that the machine is not oversubscribed and the
 * call times show the swap rather than the scheduler. */
static void test_swap_one_caller(void)
{
    run_load(1, SWAPS);
}

/* Best of several rounds of calls per second through one table. */
static double ns_per_call(const hk_blas1_v1_t *t, hk_handle_t *h, int calls)
{
    float x[1] = {1.0f}, y[1] = {0.0f}, alpha = 0.0f; /* alpha 0: y stays bounded */
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        uint64_t t0 = swp_now_ns();
        for (int i = 0; i < calls; i++)
            if (t->saxpy(h, 1, &alpha, x, 1, y, 1) != HK_STATUS_OK)
                return -1.0;
        double ns = (double)(swp_now_ns() - t0) / calls;
        best = ns < best ? ns : best;
    }
    return best;
}

static void test_forwarding_cost(void)
{
    hk_loader_t *loader = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = swp_open(loader, SWP_A);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    hk_plugin_acquire(a); /* raw handle and table: the loader cannot see them */
    hk_handle_t *raw = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_plugin_vtable(a)->handle_create(NULL, &raw), HK_STATUS_OK);
    const hk_blas1_v1_t *direct = hk_plugin_table(a, HK_TABLE_BLAS1_V1);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, NULL, &mh), HK_STATUS_OK);
    hk_blas1_v1_t fw;
    hk_memory_v1_t mem;
    swp_tables(&fw, &mem);
    int calls = 200000;
    double d = ns_per_call(direct, raw, calls), m = ns_per_call(&fw, hk_mhandle_handle(mh), calls);
    CU_ASSERT(d > 0 && m > 0);
#ifdef HK_DEBUG
    const char *build = "debug build, -O0";
#else
    const char *build = "release build";
#endif
    printf("\n    P9: saxpy n=1 on hk-cpu: direct %.1f ns/call, through a movable handle %.1f "
           "ns/call: +%.1f ns (target 25 ns; %s)\n    ", d, m, m - d, build);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_plugin_vtable(a)->handle_destroy(raw), HK_STATUS_OK);
    hk_plugin_release(a);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* ---- held calls ---- */

typedef struct gap_worker {
    pthread_t tid;
    hk_mhandle_t *mh;
    atomic_ullong calls, wrong, failed;
    atomic_ullong max_gap_ns; /* longest time between two calls' starts */
} gap_worker_t;

static void *gap_work(void *arg)
{
    gap_worker_t *w = arg;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    float x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 7 - 3);
        y[i] = 0.0f;
    }
    uint64_t last = swp_now_ns();
    for (int up = 1; !atomic_load(&stop); up = !up) {
        float alpha = up ? 1.0f : -1.0f;
        uint64_t t = swp_now_ns();
        if (t - last > atomic_load(&w->max_gap_ns))
            atomic_store(&w->max_gap_ns, t - last);
        last = t;
        hk_status_t st = B.saxpy(h, N, &alpha, x, 1, y, 1);
        atomic_fetch_add(&w->calls, 1);
        if (st != HK_STATUS_OK) {
            atomic_fetch_add(&w->failed, 1);
            continue;
        }
        for (int i = 0; i < N; i++) /* y is x after +x, 0 after -x */
            if (y[i] != (up ? x[i] : 0.0f)) {
                atomic_fetch_add(&w->wrong, 1);
                break;
            }
    }
    return NULL;
}

/* Setters and the error text take the handle's lock before they enter it:
 * called without pause on worker 0's handle while the swaps hold it, each
 * must still reach an implementation (never the held marker). */
static void *setter_work(void *arg)
{
    gap_worker_t *w = arg;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    const hk_vtable_t *vt = hk_mhandle_vtable();
    char text[256];
    while (!atomic_load(&stop)) {
        if (vt->set_pointer_mode(h, HK_POINTER_MODE_HOST) != HK_STATUS_OK
            || hk_mhandle_last_error_copy(w->mh, text, sizeof text) != HK_STATUS_OK)
            atomic_fetch_add(&w->failed, 1);
    }
    return NULL;
}

/* swp_slow's first handle (the verification's) takes 150 ms, as a driver that
 * keeps a first kernel load waiting makes it: with a hold time of 20 ms and
 * no hold limit (test_swap_hold.c tests the limit), the
 * calls through both movable handles are held until the prepare ends (their
 * longest gap shows it), every call before and after is right, and the hold
 * is counted; with holding switched off the same swap holds nothing. A
 * third thread calls the setter and the error text on one of the handles
 * throughout. */
static void test_slow_step_holds_calls(void)
{
    hk_loader_t *loader = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = swp_open(loader, SWP_A);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    hk_memory_v1_t mem;
    swp_tables(&B, &mem);
    gap_worker_t w[2];
    memset(w, 0, sizeof w);
    atomic_store(&stop, 0);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, NULL, &w[i].mh), HK_STATUS_OK);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&w[i].tid, NULL, gap_work, &w[i]), 0);
    pthread_t setter;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&setter, NULL, setter_work, &w[0]), 0);
    /* both calling before the swap: waited for, not assumed after a pause */
    for (int t = 0; t < 10000 && (atomic_load(&w[0].calls) < 16 || atomic_load(&w[1].calls) < 16);
         t++)
        sleep_us(1000);
    CU_ASSERT(atomic_load(&w[0].calls) >= 16 && atomic_load(&w[1].calls) >= 16);
    unsigned long long before[2] = {atomic_load(&w[0].calls), atomic_load(&w[1].calls)};

    hk_swap_options_t o = {.size = sizeof o, .hold_after_us = 20000, .hold_max_us = -1};
    uint64_t t0 = swp_now_ns();
    CU_ASSERT_EQUAL(hk_loader_swap(loader, SWP_DOUBLE("swp_slow"), &o, NULL), HK_STATUS_OK);
    uint64_t took = swp_now_ns() - t0;
    swp_state_t st = swp_state(loader);
    /* The prepare's hold, the longest; the step after the drain may hold
     * too when closing a module takes past 20 ms (under TSan it does). */
    CU_ASSERT(st.holds >= 1);
    CU_ASSERT(st.max_hold_ns >= 100000000u && st.max_hold_ns <= took);
    /* each calls again after the swap: waited for, up to 10 s */
    unsigned long long after[2] = {atomic_load(&w[0].calls), atomic_load(&w[1].calls)};
    for (int t = 0; t < 10000 && (atomic_load(&w[0].calls) <= after[0] ||
                                  atomic_load(&w[1].calls) <= after[1]); t++)
        sleep_us(1000);
    for (int i = 0; i < 2; i++) {
        /* held for the hold's length, then calling again */
        CU_ASSERT(atomic_load(&w[i].max_gap_ns) >= 90000000u);
        CU_ASSERT(atomic_load(&w[i].calls) > before[i]);
    }
    printf("\n    hold: swap %.1f ms, %llu hold(s), calls held %.1f ms at most, longest gap "
           "between calls %.1f / %.1f ms\n    ", took / 1e6, (unsigned long long)st.holds,
           st.max_hold_ns / 1e6, atomic_load(&w[0].max_gap_ns) / 1e6,
           atomic_load(&w[1].max_gap_ns) / 1e6);

    /* Back to A (swp_slow is closed, so its next first create is slow again),
     * then to swp_slow with holding off: the slow step holds nothing. */
    CU_ASSERT_EQUAL(hk_loader_swap(loader, SWP_A, &o, NULL), HK_STATUS_OK);
    st = swp_state(loader);
    const uint64_t holds = st.holds; /* the swaps below add none */
    hk_swap_options_t huge = {.size = sizeof huge, .hold_after_us = INT64_MAX}; /* a day */
    CU_ASSERT_EQUAL(hk_loader_swap(loader, SWP_B, &huge, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, SWP_A, &huge, NULL), HK_STATUS_OK);
    hk_swap_options_t never = {.size = sizeof never, .hold_after_us = -1};
    t0 = swp_now_ns();
    CU_ASSERT_EQUAL(hk_loader_swap(loader, SWP_DOUBLE("swp_slow"), &never, NULL), HK_STATUS_OK);
    CU_ASSERT(swp_now_ns() - t0 >= 140000000u); /* it was slow again */
    st = swp_state(loader);
    CU_ASSERT_EQUAL(st.holds, holds);

    /* A hold time of 1 us: the handles may be held before the prepare even
     * looks at them (when the watchdog thread starts before the prepare gets
     * there, which is up to the scheduler), and it must still see the
     * bindings they had: this crashed before it did. */
    hk_swap_options_t at_once = {.size = sizeof at_once, .hold_after_us = 1};
    for (int i = 0; i < 20; i++)
        CU_ASSERT_EQUAL(hk_loader_swap(loader, i % 2 ? SWP_B : SWP_A, &at_once, NULL),
                        HK_STATUS_OK);

    atomic_store(&stop, 1);
    pthread_join(setter, NULL);
    for (int i = 0; i < 2; i++) {
        pthread_join(w[i].tid, NULL);
        CU_ASSERT_EQUAL(atomic_load(&w[i].wrong), 0);
        CU_ASSERT_EQUAL(atomic_load(&w[i].failed), 0);
        CU_ASSERT_EQUAL(hk_mhandle_destroy(w[i].mh), HK_STATUS_OK);
    }
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

void swp_register_load(void)
{
    CU_pSuite s = hk_test_suite("swap under load", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"8 threads x 100 swaps: no failed, wrong or lost call", test_swap_under_load},
        {"1 thread x 100 swaps: call times (printed)", test_swap_one_caller},
        {"cost of the forwarding path (printed)", test_forwarding_cost},
        {"a step past the hold time holds the calls until it ends", test_slow_step_holds_calls},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
