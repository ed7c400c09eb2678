/* handlekit live swap: holding calls at their boundary while a swap step
 * that the driver keeps waiting gets its turn (hk__swap.h, "Holding";
 * docs/swap.md, "Calls held during a slow step").
 *
 * A CUDA driver lets launches into a context share what loading code into
 * that context and making a stream there need alone, and launches that never
 * pause keep those out for as long as they go on (docs/contexts.md, fact
 * 25). A swap's verification (whose first handle loads the new plugin's
 * kernels) and its close of the old module are such steps, and the threads
 * launching are the swap's own callers. So a step that runs past the hold
 * time makes the callers of movable handles wait at their next call
 * boundary until it ends: a pause of a few milliseconds instead of a swap
 * that never ends. Steps that end in time hold nothing, and calls then
 * never wait. A hold lasts the hold limit at most: a step still running
 * then may be slow for another reason than the launches (a plugin's create
 * or destroy that takes seconds), and holding on would stop the callers for
 * as long. So the calls run again for the hold time, then are held again for
 * the limit at most, and so on: no caller waits longer than the limit at a
 * time, and driver work that needs the launches to pause still gets its
 * turn in every hold, which a step that simply went on without holding
 * would not get under launches that never pause. */
#include "hk__swap.h"
#include "hk__trace.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Where a held movable handle points (hk__swap.h, "Holding"). */
hk__binding_t hk__held;

/* Counts the releases of holds, so that held callers sleep until one comes
 * instead of polling: a release wakes them at once, where a poll with short
 * sleeps found it up to a timer's slack late (tens of microseconds), and
 * that lateness added to every held call. */
static atomic_uint hk__releases;

_Thread_local hk_mhandle_t *hk__in_call __attribute__((tls_model("initial-exec")));

static uint64_t hk__hold_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hk__swap_pause(unsigned spins, unsigned yields)
{
    if (spins < yields) {
        sched_yield();
    } else {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

void hk__mh_wait_released(hk_mhandle_t *mh)
{
    /* A hold lasts until the driver work of a step got in, or the hold
     * limit: yields first, then sleeps until a release (rechecked at least
     * every millisecond), so that the waiting callers leave the CPU to the
     * step they wait for and run again as soon as they may. */
    for (unsigned spins = 0; atomic_load(&mh->cur) == &hk__held; spins++) {
        if (spins < 64) {
            sched_yield();
            continue;
        }
        unsigned seen = atomic_load(&hk__releases);
        if (atomic_load(&mh->cur) != &hk__held)
            break;
        struct timespec most = {0, 1000000};
        (void)syscall(SYS_futex, &hk__releases, FUTEX_WAIT_PRIVATE, seen, &most, NULL, 0);
    }
}

/* Points every movable handle of sw at hk__held. Caller holds g->m. */
static void hk__hold_all(hk__guard_t *g)
{
    struct hk__swap *sw = g->sw;
    pthread_mutex_lock(&sw->list_lock);
    for (size_t i = 0; i < sw->nhandles; i++) {
        hk_mhandle_t *mh = sw->handles[i];
        mh->held_from = atomic_load(&mh->cur);
        atomic_store(&mh->cur, &hk__held);
    }
    pthread_mutex_unlock(&sw->list_lock);
    g->held = 1;
    g->t_held = hk__hold_now_ns();
}

/* Gives every held handle its binding back. Caller holds g->m. */
static void hk__release_all(hk__guard_t *g)
{
    struct hk__swap *sw = g->sw;
    pthread_mutex_lock(&sw->list_lock);
    for (size_t i = 0; i < sw->nhandles; i++) {
        hk_mhandle_t *mh = sw->handles[i];
        if (atomic_load(&mh->cur) == &hk__held)
            atomic_store(&mh->cur, mh->held_from);
        mh->held_from = NULL;
    }
    pthread_mutex_unlock(&sw->list_lock);
    g->held = 0;
    atomic_fetch_add(&hk__releases, 1u);
    (void)syscall(SYS_futex, &hk__releases, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Waits on g->cv until the monotonic time deadline; 1 when it came and the
 * step is not done. Caller holds g->m. */
static int hk__guard_wait(hk__guard_t *g, uint64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
    while (!g->done)
        if (pthread_cond_timedwait(&g->cv, &g->m, &ts) == ETIMEDOUT)
            return !g->done;
    return 0;
}

/* Ends the hold under way: counts it, keeps the longest, releases the
 * calls. Caller holds g->m. */
static void hk__guard_release(hk__guard_t *g)
{
    uint64_t held = hk__hold_now_ns() - g->t_held;
    if (held > g->held_ns)
        g->held_ns = held;
    g->holds++;
    hk__release_all(g);
}

/* Holds once the step has run for after_ns; a hold that reaches max_ns is
 * cut: the calls run for another after_ns, then are held again, and so on
 * until the step ends. Each hold gives the driver work that waits for the
 * launches to pause its turn; between them the callers run. */
static void *hk__guard_main(void *arg)
{
    hk__guard_t *g = arg;
    /* This thread's deadlines are the hold's: without the default timer
     * slack (50 us) the calls are held and released on time. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&g->m);
    uint64_t from = g->t_begin;
    while (hk__guard_wait(g, from + g->after_ns)) {
        hk__hold_all(g);
        if (!g->max_ns || !hk__guard_wait(g, g->t_held + g->max_ns))
            break; /* held until the step ends (hk__guard_end releases) */
        hk__guard_release(g);
        g->cut++;
        from = hk__hold_now_ns();
    }
    pthread_mutex_unlock(&g->m);
    return NULL;
}

void hk__guard_begin(hk__guard_t *g, struct hk__swap *sw, uint64_t after_ns, uint64_t max_ns)
{
    g->sw = sw;
    g->after_ns = after_ns;
    g->max_ns = max_ns;
    g->t_begin = hk__hold_now_ns();
    g->t_held = g->held_ns = 0;
    g->started = g->done = g->held = 0;
    g->cut = g->holds = 0;
    if (after_ns == 0)
        return;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return;
    int ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0
             && pthread_cond_init(&g->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok)
        return;
    if (pthread_mutex_init(&g->m, NULL) != 0) {
        pthread_cond_destroy(&g->cv);
        return;
    }
    if (pthread_create(&g->tid, NULL, hk__guard_main, g) != 0) {
        pthread_mutex_destroy(&g->m);
        pthread_cond_destroy(&g->cv);
        return;
    }
    g->started = 1;
}

uint64_t hk__guard_end(hk__guard_t *g, unsigned *holds, unsigned *cut)
{
    if (holds)
        *holds = 0;
    if (cut)
        *cut = 0;
    if (!g->started)
        return 0;
    pthread_mutex_lock(&g->m);
    g->done = 1;
    pthread_cond_signal(&g->cv);
    if (g->held) /* held when the step ended: this hold was not cut */
        hk__guard_release(g);
    uint64_t held_ns = g->held_ns;
    unsigned n = g->holds, was_cut = g->cut;
    pthread_mutex_unlock(&g->m);
    pthread_join(g->tid, NULL);
    pthread_mutex_destroy(&g->m);
    pthread_cond_destroy(&g->cv);
    g->started = 0;
    if (n) {
        struct hk__swap *sw = g->sw;
        atomic_fetch_add(&sw->holds, n);
        atomic_fetch_add(&sw->holds_cut, was_cut);
        atomic_store(&sw->last_hold_ns, held_ns);
        if (held_ns > atomic_load(&sw->max_hold_ns))
            atomic_store(&sw->max_hold_ns, held_ns);
    }
    if (holds)
        *holds = n;
    if (cut)
        *cut = was_cut;
    return held_ns;
}

void hk__guard_done(hk__guard_t *g, const char *step)
{
    unsigned holds = 0, cut = 0;
    uint64_t after_ns = g->after_ns, held = hk__guard_end(g, &holds, &cut);
    if (held && !cut)
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "%s ran past %.1f ms (the driver kept it "
                  "waiting?): calls through movable handles were held for %.1f ms until it "
                  "ended", step, (double)after_ns / 1e6, (double)held / 1e6);
    else if (held)
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "%s ran past %.1f ms: calls through movable "
                  "handles were held %u time%s, %u of them cut by the hold limit; the longest "
                  "hold %.1f ms", step, (double)after_ns / 1e6, holds, holds == 1 ? "" : "s",
                  cut, (double)held / 1e6);
}
