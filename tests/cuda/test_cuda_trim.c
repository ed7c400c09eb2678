/* hk.trim/1 racing creates, calls and destroys (docs/contexts.md, "What the
 * kit keeps between handles"): the trim is [thread-safe], so what it frees
 * must be nobody's, and the context it frees in must not end under it.
 *
 * One scenario makes the interleaving that broke this happen every time, with
 * the simulated driver's paused calls: a destroy that found the kit's retain
 * kept gives back its own retain, the last one once a trim has given the
 * kit's back, between another trim's check of the kept memory's context and
 * its frees there. The other is the stress that found it: six threads making,
 * using (host and device pointer mode) and destroying handles on two devices
 * while two threads trim, with the windows between those steps widened on
 * the simulation (simcuda_slow_calls); every status and every result is
 * checked. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hkct_context.h"

#define plug hkct_plug
#define sim hkct_sim
#define SCENARIO HKCT_SCENARIO
#define create hkct_create

/* The simulation's race hooks (simcuda.h); NULL on a real driver. */
static struct {
    int (*pause_next)(const char *);
    int (*wait_paused)(unsigned, unsigned);
    int (*resume_entry)(const char *);
    void (*resume)(void);
    int (*slow_calls)(const char *, unsigned);
} hooks;

static int find_hooks(void)
{
    *(void **)&hooks.pause_next = dlsym(RTLD_DEFAULT, "simcuda_pause_next");
    *(void **)&hooks.wait_paused = dlsym(RTLD_DEFAULT, "simcuda_wait_paused");
    *(void **)&hooks.resume_entry = dlsym(RTLD_DEFAULT, "simcuda_resume_entry");
    *(void **)&hooks.resume = dlsym(RTLD_DEFAULT, "simcuda_resume");
    *(void **)&hooks.slow_calls = dlsym(RTLD_DEFAULT, "simcuda_slow_calls");
    return hooks.pause_next && hooks.wait_paused && hooks.resume_entry && hooks.resume &&
           hooks.slow_calls;
}

enum { N = 256 };

/* x.y of the vectors below, exact in float. */
static float want_dot(void)
{
    double d = 0.0;
    for (int i = 0; i < N; i++)
        d += (double)((i % 5) - 2) * (double)((i % 3) + 1);
    return (float)d;
}

/* One round on h: x.y in host pointer mode (the result word) and in device
 * pointer mode (into device memory, copied back), on memory made and freed
 * here. Returns the number of wrong statuses and results; the first one's
 * reason goes to why. */
static int use_handle(hk_handle_t *h, char *why, size_t len)
{
    const hk_memory_v1_t *m = plug.mem;
    float x[N], y[N], host = -1.0f, dev = -1.0f, want = want_dot();
    void *dx = NULL, *dy = NULL, *dr = NULL;
    int bad = 0;
    for (int i = 0; i < N; i++) {
        x[i] = (float)((i % 5) - 2);
        y[i] = (float)((i % 3) + 1);
    }
#define STEP(call)                                                                    \
    do {                                                                              \
        hk_status_t st_ = (call);                                                     \
        if (st_ != HK_STATUS_OK && bad++ == 0)                                        \
            snprintf(why, len, "%s: %d (%s)", #call, (int)st_, plug.vt->last_error(h)); \
    } while (0)
    STEP(m->alloc(h, sizeof x, &dx));
    STEP(m->alloc(h, sizeof y, &dy));
    STEP(m->alloc(h, sizeof dev, &dr));
    if (bad)
        goto out;
    STEP(m->copy_to_device(h, dx, x, sizeof x));
    STEP(m->copy_to_device(h, dy, y, sizeof y));
    STEP(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST));
    STEP(plug.blas->sdot(h, N, dx, 1, dy, 1, &host));
    STEP(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE));
    STEP(plug.blas->sdot(h, N, dx, 1, dy, 1, dr));
    STEP(m->copy_to_host(h, &dev, dr, sizeof dev));
    if (host != want && bad++ == 0)
        snprintf(why, len, "host pointer mode sdot: %g, want %g", host, want);
    if (dev != want && bad++ == 0)
        snprintf(why, len, "device pointer mode sdot: %g, want %g", dev, want);
out:
    STEP(m->free_(h, dx));
    STEP(m->free_(h, dy));
    STEP(m->free_(h, dr));
#undef STEP
    return bad;
}

/* ---- the interleaving, made every time ---- */

typedef struct racer {
    hk_handle_t *h; /* destroyed by the racer, NULL: the racer trims */
    const char *pause_at;
    hk_status_t st;
    char why[256];
} racer_t;

static void *racer_run(void *arg)
{
    racer_t *r = arg;
    hooks.pause_next(r->pause_at);
    r->st = r->h ? plug.vt->handle_destroy(r->h) : plug.trim->trim();
    snprintf(r->why, sizeof r->why, "%s", plug.vt->last_error(NULL));
    return NULL;
}

static void check_racer(pthread_t t, racer_t *r, const char *what)
{
    pthread_join(t, NULL);
    if (r->st != HK_STATUS_OK)
        printf("\n  %s: %d (%s)\n", what, (int)r->st, r->why);
    CU_ASSERT_EQUAL(r->st, HK_STATUS_OK);
}

static void check_use(hk_handle_t *h, const char *when)
{
    char why[256] = "";
    int bad = use_handle(h, why, sizeof why);
    if (bad)
        printf("\n  %s: %d wrong (first: %s)\n", when, bad, why);
    CU_ASSERT_EQUAL(bad, 0);
}

/* Trim 1 has copied the kept set of handle A (device 0) and waits; B's
 * destroy leaves its own set, finds the kit's retain kept and waits at giving
 * back its own. Trim 1 goes on and gives the kit's retain back: B's is the
 * last. Trim 2 finds B's set, checks that its context lives in B's
 * incarnation and waits before its frees; B's destroy goes on and gives back
 * the last retain, so the primary ends. A new handle C builds it again and
 * computes; then trim 2 frees. Trim 2 must neither fail nor free C's memory,
 * and C must compute right afterwards. */
SCENARIO(t_trim_races_last_release)
{
    CU_ASSERT_TRUE_FATAL(find_hooks());
    size_t live = sim.live();
    int rc = sim.refcount(0);
    hk_handle_t *a = create(0, HK_STATUS_OK), *b = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    check_use(a, "handle A");
    check_use(b, "handle B");
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(a), HK_STATUS_OK); /* the kit keeps A's retain */
    CU_ASSERT_EQUAL(sim.refcount(0), rc + 2);

    racer_t t1 = {NULL, "cuCtxGetId", HK_STATUS_OK, ""};
    racer_t db = {b, "cuDevicePrimaryCtxRelease", HK_STATUS_OK, ""};
    racer_t t2 = {NULL, "cuCtxPushCurrent", HK_STATUS_OK, ""};
    pthread_t th1, thb, th2;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th1, NULL, racer_run, &t1), 0);
    CU_ASSERT_EQUAL_FATAL(hooks.wait_paused(1, 10000), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&thb, NULL, racer_run, &db), 0);
    CU_ASSERT_EQUAL_FATAL(hooks.wait_paused(2, 10000), 0);
    hooks.resume_entry("cuCtxGetId");
    check_racer(th1, &t1, "trim 1");
    CU_ASSERT_EQUAL(sim.refcount(0), rc + 1); /* B's alone: the kit gave its own back */
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th2, NULL, racer_run, &t2), 0);
    CU_ASSERT_EQUAL_FATAL(hooks.wait_paused(2, 10000), 0);
    hooks.resume_entry("cuDevicePrimaryCtxRelease");
    check_racer(thb, &db, "destroy B");

    hk_handle_t *c = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(c);
    if (c)
        check_use(c, "handle C before trim 2 frees");
    hooks.resume_entry("cuCtxPushCurrent");
    check_racer(th2, &t2, "trim 2");
    if (c) {
        check_use(c, "handle C after trim 2 freed");
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(c), HK_STATUS_OK);
    }
    hooks.resume(); /* nothing should wait; a failed step above must not hang exit */
    hkct_trim();
    CU_ASSERT_EQUAL(sim.live(), live);
    CU_ASSERT_EQUAL(sim.refcount(0), rc);
}

/* ---- the stress ---- */

#define STRESS_WORKERS 6
#define STRESS_TRIMMERS 2
#define STRESS_SECONDS 1.0
/* What the stress slows on the simulation, in microseconds: a worker's
 * destroy between finding the kit's retain kept and giving back its own; a
 * trim between checking a kept set's context and freeing there; and a
 * worker's create before it retains the primary, so that a device is more
 * often left without a live handle and its primary ends. Without them the
 * broken interleaving came once in several seconds; with them dozens of
 * times a second. */
#define STRESS_RELEASE_US 1000u
#define STRESS_PUSH_US 500u
#define STRESS_RETAIN_US 1000u

typedef struct stress {
    atomic_int stop;
    atomic_long rounds, trims, bad;
    atomic_long bad_trims; /* of bad, the trims that failed */
    pthread_mutex_t why_lock;
    char why[256]; /* the first failure */
} stress_t;

typedef struct worker {
    stress_t *s;
    int device;
} worker_t;

static void stress_fail(stress_t *s, long n, const char *why)
{
    if (atomic_fetch_add(&s->bad, n) != 0)
        return;
    pthread_mutex_lock(&s->why_lock);
    snprintf(s->why, sizeof s->why, "%s", why);
    pthread_mutex_unlock(&s->why_lock);
}

static void *stress_worker(void *arg)
{
    worker_t *w = arg;
    char why[256];
    if (hooks.slow_calls) {
        hooks.slow_calls("cuDevicePrimaryCtxRelease", STRESS_RELEASE_US);
        hooks.slow_calls("cuDevicePrimaryCtxRetain", STRESS_RETAIN_US);
    }
    while (!atomic_load(&w->s->stop)) {
        hk_create_info_t ci = {sizeof ci, w->device, 0};
        hk_handle_t *h = NULL;
        hk_status_t st = plug.vt->handle_create(&ci, &h);
        if (st != HK_STATUS_OK) {
            snprintf(why, sizeof why, "create on device %d: %d (%s)", w->device, (int)st,
                     plug.vt->last_error(NULL));
            stress_fail(w->s, 1, why);
            continue;
        }
        int bad = use_handle(h, why, sizeof why);
        if (bad)
            stress_fail(w->s, bad, why);
        st = plug.vt->handle_destroy(h);
        if (st != HK_STATUS_OK) {
            snprintf(why, sizeof why, "destroy on device %d: %d (%s)", w->device, (int)st,
                     plug.vt->last_error(NULL));
            stress_fail(w->s, 1, why);
        }
        atomic_fetch_add(&w->s->rounds, 1);
    }
    if (hooks.slow_calls) {
        hooks.slow_calls("cuDevicePrimaryCtxRelease", 0);
        hooks.slow_calls("cuDevicePrimaryCtxRetain", 0);
    }
    return NULL;
}

static void *stress_trimmer(void *arg)
{
    stress_t *s = arg;
    char why[300];
    if (hooks.slow_calls)
        hooks.slow_calls("cuCtxPushCurrent", STRESS_PUSH_US);
    while (!atomic_load(&s->stop)) {
        hk_status_t st = plug.trim->trim();
        if (st != HK_STATUS_OK) {
            snprintf(why, sizeof why, "trim: %d (%s)", (int)st, plug.vt->last_error(NULL));
            atomic_fetch_add(&s->bad_trims, 1);
            stress_fail(s, 1, why);
        }
        atomic_fetch_add(&s->trims, 1);
    }
    if (hooks.slow_calls)
        hooks.slow_calls("cuCtxPushCurrent", 0);
    return NULL;
}

static void sleep_seconds(double t)
{
    struct timespec d = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
    while (nanosleep(&d, &d) != 0) {
    }
}

SCENARIO(t_trim_stress)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(plug.trim);
    find_hooks(); /* the windows are widened where the simulation offers it */
    hkct_snapshot_t before = {0};
    if (hkct_on_sim)
        before = hkct_snap();
    static stress_t s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.why_lock, NULL);
    worker_t w[STRESS_WORKERS];
    pthread_t tw[STRESS_WORKERS], tt[STRESS_TRIMMERS];
    for (int k = 0; k < STRESS_WORKERS; k++) {
        w[k] = (worker_t){&s, k % 2};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&tw[k], NULL, stress_worker, &w[k]), 0);
    }
    for (int k = 0; k < STRESS_TRIMMERS; k++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&tt[k], NULL, stress_trimmer, &s), 0);
    sleep_seconds(STRESS_SECONDS);
    atomic_store(&s.stop, 1);
    for (int k = 0; k < STRESS_WORKERS; k++)
        pthread_join(tw[k], NULL);
    for (int k = 0; k < STRESS_TRIMMERS; k++)
        pthread_join(tt[k], NULL);
    long bad = atomic_load(&s.bad);
    if (bad)
        printf("\n  %ld wrong (%ld failed trims) in %ld rounds and %ld trims (first: %s)\n",
               bad, atomic_load(&s.bad_trims), atomic_load(&s.rounds), atomic_load(&s.trims),
               s.why);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(atomic_load(&s.rounds) >= STRESS_WORKERS);
    CU_ASSERT(atomic_load(&s.trims) >= STRESS_TRIMMERS);
    pthread_mutex_destroy(&s.why_lock);
    hkct_trim();
    if (hkct_on_sim) {
        char diff[200];
        hkct_snapshot_t after = hkct_snap();
        CU_ASSERT_STRING_EQUAL(hkct_snap_diff(&after, &before, diff, sizeof diff), "");
    }
}

const hkct_scenario_t hkct_trim_scenarios[] = {
    {"a trim's frees while a destroy gives back the primary's last retain",
     t_trim_races_last_release, 1, 0, 1},
    {"hk.trim/1 from 2 threads while 6 make, use and destroy handles on 2 devices",
     t_trim_stress, 2, 0, 0},
};
const size_t hkct_trim_scenario_count = sizeof hkct_trim_scenarios / sizeof hkct_trim_scenarios[0];
