/* hk-bench P8's run (hkb_p8.h): worker threads, the swaps, the classes of
 * the calls. Makes no CUDA call of its own. */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hk_blas1.h"
#include "hk_loader.h"
#include "hk_memory.h"
#include "hk_status_text.h"
#include "hk_swap.h"
#include "hkb_p8.h"
#include "hk_example.h"

#define P8_BATCH 64 /* flood: calls between two waits for the stream; even, so y returns to 0 */
#define P8_WHY 320

/* What every thread of one run shares; written before the threads start,
 * but for stop and the windows. */
typedef struct p8_run {
    const hkb_p8_setup_t *setup;
    hk_vtable_t vt;
    hk_blas1_v1_t blas;
    hk_memory_v1_t mem;
    hk__lat_windows_t win; /* the swaps' windows, then the quiet one */
    atomic_int stop;
    float *x;              /* host data of n elements: x, then y of 3 rounds */
    float *y[3];
    double expect[3][2];   /* service: x.(y[k] + alpha x), alpha 1 or 2 */
    int64_t n;
} p8_run_t;

/* A swap's longest call of one thread. */
typedef struct p8_longest {
    uint64_t ns, t0; /* how long, and when it began */
    const char *what;
} p8_longest_t;

/* One thread's own: allocated apart, so that no two threads write one line. */
typedef struct p8_worker {
    pthread_t tid;
    int index;
    p8_run_t *run;
    hk_mhandle_t *mh;
    void *stream;
    void *dx, *dy;
    float *back; /* the pinned service's y read back */
    hk__lat_t lat[HKB_P8_CLASSES];
    uint64_t calls;
    p8_longest_t *longest; /* [swaps]: the longest call whose first window it was */
    atomic_int state;  /* 0 starting, 1 running, -1 failed (why says why) */
    char why[P8_WHY];
} p8_worker_t;

const char *hkb_p8_load_name(hkb_p8_load_t load)
{
    return load == HKB_P8_FLOOD ? "flood" : "service";
}

static int say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    for (char *c = why; *c; c++) /* one line, whatever a plugin put into its message */
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return -1;
}

/* A failed call: the first reason of the thread, with the plugin's words. */
static int p8_failed(p8_worker_t *w, const char *what, hk_status_t st)
{
    char err[256];
    if (w->state != -1) {
        hk_mhandle_last_error_copy(w->mh, err, sizeof err);
        say(w->why, sizeof w->why, "thread %d: %s: %s: %s", w->index, what, hk_status_name(st),
            err);
    }
    atomic_store(&w->state, -1);
    return -1;
}

static inline void p8_record(p8_worker_t *w, uint64_t before, uint64_t after, uint64_t t0,
                             uint64_t ns, const char *what)
{
    hkb_p8_class_t cls = HKB_P8_OTHER;
    if (hk__lat_overlaps(before, after)) {
        uint64_t k = hk__lat_window_of(before);
        cls = k < (uint64_t)w->run->setup->swaps ? HKB_P8_DURING : HKB_P8_QUIET;
        if (cls == HKB_P8_DURING && ns > w->longest[k].ns)
            w->longest[k] = (p8_longest_t){ns, t0, what};
    }
    hk__lat_add(&w->lat[cls], ns);
    w->calls++;
}

/* One call, timed around the call alone and classed by the windows. */
#define P8_TIMED(w, what, call)                                                                \
    do {                                                                                       \
        uint64_t before_ = hk__lat_mark(&(w)->run->win), t0_ = hk__lat_now_ns();               \
        hk_status_t st_ = (call);                                                              \
        uint64_t t1_ = hk__lat_now_ns(), after_ = hk__lat_mark(&(w)->run->win);                \
        if (st_ != HK_STATUS_OK)                                                               \
            return p8_failed((w), (what), st_);                                                \
        p8_record((w), before_, after_, t0_, t1_ - t0_, (what));                               \
    } while (0)

/* example.ops/1's scale through a pin of the worker's handle. */
static hk_status_t p8_scale(p8_worker_t *w, const float *alpha, void *x)
{
    hk_mhandle_pin_t pin = {.size = sizeof pin};
    hk_status_t st = hk_mhandle_pin(w->mh, EXAMPLE_TABLE_OPS_V1, &pin);
    if (st != HK_STATUS_OK)
        return st;
    const example_ops_v1_t *ops = pin.table;
    st = ops->scale(pin.handle, w->run->n, alpha, x);
    hk_mhandle_unpin(&pin);
    return st;
}

/* The same with fill. */
static hk_status_t p8_fill(p8_worker_t *w, float value, void *x)
{
    hk_mhandle_pin_t pin = {.size = sizeof pin};
    hk_status_t st = hk_mhandle_pin(w->mh, EXAMPLE_TABLE_OPS_V1, &pin);
    if (st != HK_STATUS_OK)
        return st;
    const example_ops_v1_t *ops = pin.table;
    st = ops->fill(pin.handle, w->run->n, value, x);
    hk_mhandle_unpin(&pin);
    return st;
}

static int p8_flood_pinned(p8_worker_t *w)
{
    const float alpha[2] = {2.0f, 0.5f};
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    while (!atomic_load_explicit(&w->run->stop, memory_order_relaxed)) {
        for (int i = 0; i < P8_BATCH; i++)
            P8_TIMED(w, "scale", p8_scale(w, &alpha[i & 1], w->dy));
        hk_status_t st = w->run->vt.synchronize(h);
        if (st != HK_STATUS_OK)
            return p8_failed(w, "synchronize", st);
    }
    return 0;
}

static int p8_service_pinned(p8_worker_t *w)
{
    const p8_run_t *run = w->run;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    size_t bytes = (size_t)run->n * sizeof(float);
    float *back = w->back;
    for (uint64_t round = 0; !atomic_load_explicit(&w->run->stop, memory_order_relaxed);
         round++) {
        int k = (int)(round % 3);
        float alpha = (round & 1) ? 2.0f : 1.0f;
        P8_TIMED(w, "copy_to_device", run->mem.copy_to_device(h, w->dy, run->y[k], bytes));
        P8_TIMED(w, "scale", p8_scale(w, &alpha, w->dy));
        P8_TIMED(w, "copy_to_host", run->mem.copy_to_host(h, back, w->dy, bytes));
        for (int64_t i = 0; i < run->n; i++)
            if (back[i] != alpha * run->y[k][i]) {
                say(w->why, sizeof w->why, "thread %d, round %llu: y[%lld] is %g after scale by "
                    "%g, expected %g (a wrong copy or scale)", w->index,
                    (unsigned long long)round, (long long)i, (double)back[i], (double)alpha,
                    (double)(alpha * run->y[k][i]));
                atomic_store(&w->state, -1);
                return -1;
            }
    }
    return 0;
}

static int p8_flood(p8_worker_t *w)
{
    const p8_run_t *run = w->run;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    const float alpha[2] = {1.0f, -1.0f};
    while (!atomic_load_explicit(&w->run->stop, memory_order_relaxed)) {
        for (int i = 0; i < P8_BATCH; i++)
            P8_TIMED(w, "saxpy", run->blas.saxpy(h, run->n, &alpha[i & 1], w->dx, 1, w->dy, 1));
        hk_status_t st = run->vt.synchronize(h);
        if (st != HK_STATUS_OK)
            return p8_failed(w, "synchronize", st);
    }
    return 0;
}

static int p8_service(p8_worker_t *w)
{
    const p8_run_t *run = w->run;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    size_t bytes = (size_t)run->n * sizeof(float);
    for (uint64_t round = 0; !atomic_load_explicit(&w->run->stop, memory_order_relaxed);
         round++) {
        int k = (int)(round % 3), m = (int)(round & 1);
        float alpha = m ? 2.0f : 1.0f, dot = 0.0f;
        P8_TIMED(w, "copy_to_device", run->mem.copy_to_device(h, w->dy, run->y[k], bytes));
        P8_TIMED(w, "saxpy", run->blas.saxpy(h, run->n, &alpha, w->dx, 1, w->dy, 1));
        P8_TIMED(w, "sdot", run->blas.sdot(h, run->n, w->dx, 1, w->dy, 1, &dot));
        if ((double)dot != run->expect[k][m]) {
            say(w->why, sizeof w->why,
                "thread %d, round %llu: sdot gave %.9g, expected %.9g (a wrong copy, saxpy "
                "or dot)", w->index, (unsigned long long)round, (double)dot, run->expect[k][m]);
            atomic_store(&w->state, -1); /* after why: the main thread reads it then */
            return -1;
        }
    }
    return 0;
}

static void *p8_thread(void *arg)
{
    p8_worker_t *w = arg;
    const hkb_p8_setup_t *s = w->run->setup;
    if (s->thread_init && s->thread_init(s->ctx, w->why, sizeof w->why) != 0) {
        atomic_store(&w->state, -1);
        return NULL;
    }
    atomic_store(&w->state, 1);
    if (s->pinned)
        (void)(s->load == HKB_P8_FLOOD ? p8_flood_pinned(w) : p8_service_pinned(w));
    else if (s->load == HKB_P8_FLOOD)
        (void)p8_flood(w);
    else
        (void)p8_service(w);
    return NULL;
}

/* Host data: the flood's x = 1 (y = 0 is a memset); the service's x and the
 * three y of its rounds, small integers whose dot is exact in float. */
static int p8_host_data(p8_run_t *run, char *why, size_t len)
{
    run->n = run->setup->load == HKB_P8_FLOOD ? HKB_P8_FLOOD_N : HKB_P8_SERVICE_N;
    run->x = malloc(4 * (size_t)run->n * sizeof(float));
    if (!run->x)
        return say(why, len, "out of host memory");
    for (int k = 0; k < 3; k++)
        run->y[k] = run->x + (size_t)(k + 1) * (size_t)run->n;
    double xy[3] = {0, 0, 0}, xx = 0;
    for (int64_t i = 0; i < run->n; i++) {
        float x = run->setup->load == HKB_P8_FLOOD ? 1.0f : (float)(i % 5 - 2);
        run->x[i] = x;
        xx += (double)x * x;
        for (int k = 0; k < 3; k++) {
            run->y[k][i] = (float)((i + k) % 3 - 1);
            xy[k] += (double)x * run->y[k][i];
        }
    }
    for (int k = 0; k < 3; k++) {
        run->expect[k][0] = xy[k] + xx;
        run->expect[k][1] = xy[k] + 2.0 * xx;
    }
    return 0;
}

/* A worker's handle on a, its stream, its data on the device. */
static int p8_worker_init(p8_worker_t *w, hk_plugin_t *a, char *why, size_t len)
{
    const p8_run_t *run = w->run;
    const hkb_p8_setup_t *s = run->setup;
    size_t bytes = (size_t)run->n * sizeof(float);
    hk_create_info_t ci = {sizeof ci, s->device, 0};
    hk_status_t st = hk_mhandle_create_on(a, &ci, &w->mh);
    if (st != HK_STATUS_OK) {
        (void)hk_mhandle_last_error_copy(NULL, w->why, sizeof w->why); /* this thread's line */
        return say(why, len, "hk_mhandle_create_on: %s: %s", hk_status_name(st), w->why);
    }
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    if (s->stream_create && s->stream_create(s->ctx, &w->stream, why, len) != 0)
        return -1;
    const char *what = "set_stream";
    if (w->stream && (st = run->vt.set_stream(h, w->stream)) != HK_STATUS_OK)
        goto fail;
    what = "set_pointer_mode";
    if ((st = run->vt.set_pointer_mode(h, HK_POINTER_MODE_HOST)) != HK_STATUS_OK)
        goto fail;
    what = "alloc";
    if ((st = run->mem.alloc(h, bytes, &w->dx)) != HK_STATUS_OK ||
        (st = run->mem.alloc(h, bytes, &w->dy)) != HK_STATUS_OK)
        goto fail;
    what = "copy_to_device";
    if ((st = run->mem.copy_to_device(h, w->dx, run->x, bytes)) != HK_STATUS_OK)
        goto fail;
    what = s->pinned ? "fill (example.ops/1)" : "memset_";
    if ((st = s->pinned ? p8_fill(w, 1.0f, w->dy) : run->mem.memset_(h, w->dy, 0, bytes))
        != HK_STATUS_OK)
        goto fail;
    if (s->pinned && s->load != HKB_P8_FLOOD && !(w->back = malloc(bytes)))
        return say(why, len, "out of host memory");
    /* The service's swaps meet a service that runs: one whose handles have
     * made their first host-mode reduction (and with it their result word,
     * whose first allocation in a process waits for a pause in other
     * threads' launches, docs/contexts.md fact 30). */
    float dot = 0.0f;
    what = "sdot";
    if (s->load != HKB_P8_FLOOD && !s->pinned &&
        (st = run->blas.sdot(h, run->n, w->dx, 1, w->dx, 1, &dot)) != HK_STATUS_OK)
        goto fail;
    return 0;
fail:
    p8_failed(w, what, st);
    return say(why, len, "set-up: %s", w->why);
}

/* The flood's y is back to 0 (an even number of +x and -x). */
static int p8_worker_check(p8_worker_t *w, char *why, size_t len)
{
    const p8_run_t *run = w->run;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    size_t bytes = (size_t)run->n * sizeof(float);
    if (run->setup->load != HKB_P8_FLOOD)
        return 0;
    float *y = malloc(bytes);
    if (!y)
        return say(why, len, "out of host memory");
    int rc = 0;
    hk_status_t st = run->vt.synchronize(h);
    if (st == HK_STATUS_OK)
        st = run->mem.copy_to_host(h, y, w->dy, bytes);
    if (st != HK_STATUS_OK) {
        p8_failed(w, "reading y back", st);
        rc = say(why, len, "%s", w->why);
    }
    float want = run->setup->pinned ? 1.0f : 0.0f; /* x2 and x1/2, or +x and -x, in turn */
    for (int64_t i = 0; rc == 0 && i < run->n; i++)
        if (y[i] != want)
            rc = say(why, len, "thread %d: y[%lld] is %g after an even number of %s, expected "
                     "%g", w->index, (long long)i, (double)y[i],
                     run->setup->pinned ? "scales by 2 and 1/2" : "+x and -x", (double)want);
    free(y);
    return rc;
}

static void p8_worker_fini(p8_worker_t *w)
{
    const hkb_p8_setup_t *s = w->run->setup;
    if (w->mh) {
        hk_handle_t *h = hk_mhandle_handle(w->mh);
        if (w->dx)
            (void)w->run->mem.free_(h, w->dx);
        if (w->dy)
            (void)w->run->mem.free_(h, w->dy);
        (void)hk_mhandle_destroy(w->mh);
    }
    if (w->stream && s->stream_destroy)
        s->stream_destroy(s->ctx, w->stream);
    free(w->longest);
    free(w->back);
    free(w);
}

/* The main thread's side of one run. */
typedef struct p8_main {
    p8_run_t run;
    hk_loader_t *loader;
    hk_plugin_t *a, *b;
    p8_worker_t *w[HKB_P8_MAX_THREADS];
    int made, running;
} p8_main_t;

static void p8_sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    nanosleep(&ts, NULL);
}

/* The first failure of a thread, as the run's reason. */
static int p8_failure(p8_main_t *m, char *why, size_t len)
{
    for (int t = 0; t < m->running; t++)
        if (atomic_load(&m->w[t]->state) < 0)
            return say(why, len, "%s", m->w[t]->why);
    return 0;
}

/* A loader of the run's own with both builds; the forwarding tables. */
static int p8_open(p8_main_t *m, hkb_p8_result_t *r, char *why, size_t len)
{
    const hkb_p8_setup_t *s = m->run.setup;
    hk_loader_options_t lo = {.size = sizeof lo, .ignore_env = 1,
                              .isolation = s->isolation_off ? HK_ISOLATION_OFF
                                                            : HK_ISOLATION_PROBE};
    hk_status_t st = hk_loader_create(&lo, &m->loader);
    if (st != HK_STATUS_OK)
        return say(why, len, "cannot create a loader: %s", hk_status_name(st));
    if (hk_loader_open(m->loader, s->path_a, &m->a) != HK_STATUS_OK ||
        hk_loader_open(m->loader, s->path_b, &m->b) != HK_STATUS_OK)
        return say(why, len, "cannot load %s", hk_loader_last_error(m->loader));
    snprintf(r->name_a, sizeof r->name_a, "%s %s", hk_plugin_name(m->a), hk_plugin_version(m->a));
    snprintf(r->name_b, sizeof r->name_b, "%s %s", hk_plugin_name(m->b), hk_plugin_version(m->b));
    m->run.vt = *hk_mhandle_vtable();
    if (hk_mhandle_get_table(HK_TABLE_BLAS1_V1, &m->run.blas, sizeof m->run.blas) !=
            HK_STATUS_OK ||
        hk_mhandle_get_table(HK_TABLE_MEMORY_V1, &m->run.mem, sizeof m->run.mem) != HK_STATUS_OK)
        return say(why, len, "the loader offers no forwarding %s or %s table", HK_TABLE_BLAS1_V1,
                   HK_TABLE_MEMORY_V1);
    return 0;
}

/* Makes every worker, then starts them and waits until each one runs. */
static int p8_start(p8_main_t *m, char *why, size_t len)
{
    const hkb_p8_setup_t *s = m->run.setup;
    for (int t = 0; t < s->threads; t++) {
        p8_worker_t *w = calloc(1, sizeof *w);
        p8_longest_t *longest = calloc((size_t)s->swaps, sizeof *longest);
        if (!w || !longest) {
            free(w);
            free(longest);
            return say(why, len, "out of host memory for the threads' histograms");
        }
        hk__lat_prefault(w, sizeof *w);
        hk__lat_prefault(longest, (size_t)s->swaps * sizeof *longest);
        w->index = t;
        w->run = &m->run;
        w->longest = longest;
        m->w[m->made++] = w;
        if (p8_worker_init(w, m->a, why, len) != 0)
            return -1;
    }
    for (; m->running < s->threads; m->running++)
        if (pthread_create(&m->w[m->running]->tid, NULL, p8_thread, m->w[m->running]) != 0)
            return say(why, len, "cannot start a thread");
    for (int t = 0; t < m->running; t++)
        while (atomic_load(&m->w[t]->state) == 0)
            sched_yield();
    return p8_failure(m, why, len);
}

/* Swap i, inside its window; the handles are on a when *on_a. */
static void p8_swap_once(p8_main_t *m, int i, int *on_a, hkb_p8_result_t *r)
{
    const hkb_p8_setup_t *s = m->run.setup;
    hkb_p8_swap_t *sw = &r->swap[i];
    uint64_t before[HK_SWAP_STAT__COUNT], mid[HK_SWAP_STAT__COUNT], end[HK_SWAP_STAT__COUNT];
    hk_swap_prepared_t *prep = NULL;
    hk_loader_swap_stats(m->loader, before, HK_SWAP_STAT__COUNT, NULL);
    hk__lat_window_open(&m->run.win);
    uint64_t t0 = hk__lat_now_ns();
    sw->t0_ns = t0;
    hk_swap_options_t so = {.size = sizeof so, .hold_after_us = s->hold_after_us,
                            .hold_max_us = s->hold_max_us,
                            .keep_old = (uint32_t)(s->keep_old != 0)};
    hk_status_t st = hk_loader_swap_prepare(m->loader, *on_a ? s->path_b : s->path_a, &so, &prep);
    uint64_t t1 = hk__lat_now_ns();
    if (st == HK_STATUS_OK) {
        hk_loader_swap_stats(m->loader, mid, HK_SWAP_STAT__COUNT, NULL);
        st = hk_loader_swap_commit(prep, NULL);
    }
    uint64_t t2 = hk__lat_now_ns();
    hk__lat_window_close(&m->run.win);
    if (st != HK_STATUS_OK && r->refused++ == 0)
        snprintf(r->refusal, sizeof r->refusal, "%s", hk_loader_last_error(m->loader));
    hk_loader_swap_stats(m->loader, end, HK_SWAP_STAT__COUNT, NULL);
    if (st != HK_STATUS_OK)
        return;
    sw->ok = 1;
    sw->holds_prepare = mid[HK_SWAP_STAT_HOLDS] - before[HK_SWAP_STAT_HOLDS];
    sw->hold_prepare_us = sw->holds_prepare ? (double)mid[HK_SWAP_STAT_LAST_HOLD_NS] / 1e3 : 0.0;
    sw->holds_commit = end[HK_SWAP_STAT_HOLDS] - mid[HK_SWAP_STAT_HOLDS];
    sw->hold_commit_us = sw->holds_commit ? (double)end[HK_SWAP_STAT_LAST_HOLD_NS] / 1e3 : 0.0;
    const uint64_t v[HKB_P8_PREPARE_CALL] = {
        end[HK_SWAP_STAT_LAST_OPEN_NS],   end[HK_SWAP_STAT_LAST_VERIFY_NS],
        end[HK_SWAP_STAT_LAST_CREATE_NS], end[HK_SWAP_STAT_LAST_COMMIT_NS],
        end[HK_SWAP_STAT_LAST_DRAIN_NS],  end[HK_SWAP_STAT_LAST_CLOSE_NS],
        end[HK_SWAP_STAT_LAST_SWITCH_NS]};
    for (int k = 0; k < HKB_P8_PREPARE_CALL; k++)
        sw->us[k] = (double)v[k] / 1e3;
    sw->us[HKB_P8_PREPARE_CALL] = (double)(t1 - t0) / 1e3;
    sw->us[HKB_P8_COMMIT_CALL] = (double)(t2 - t1) / 1e3;
    hk_swap_plugin_state_t ps = {.size = sizeof ps};
    hk_plugin_swap_state(*on_a ? m->a : m->b, &ps);
    sw->module_stayed = ps.module != HK_MODULE_CLOSED;
    *on_a = !*on_a;
}

/* The swaps, gap_us apart, then the quiet window, as long as they took. */
static int p8_phases(p8_main_t *m, hkb_p8_result_t *r, char *why, size_t len)
{
    const hkb_p8_setup_t *s = m->run.setup;
    int on_a = 1;
    uint64_t t0 = hk__lat_now_ns();
    for (int i = 0; i < s->swaps; i++) {
        p8_swap_once(m, i, &on_a, r);
        if (p8_failure(m, why, len) != 0)
            return -1;
        p8_sleep_us((uint64_t)s->gap_us);
    }
    uint64_t busy = hk__lat_now_ns() - t0, waited = 0;
    r->swapping_s = (double)busy / 1e9;
    hk__lat_window_open(&m->run.win);
    t0 = hk__lat_now_ns();
    while (waited < busy) { /* in slices, so that a failed thread ends the wait */
        uint64_t left = (busy - waited) / 1000u;
        p8_sleep_us(left < 100000u ? left : 100000u);
        if (p8_failure(m, why, len) != 0)
            break;
        waited = hk__lat_now_ns() - t0;
    }
    hk__lat_window_close(&m->run.win);
    r->quiet_s = (double)(hk__lat_now_ns() - t0) / 1e9;
    return p8_failure(m, why, len);
}

/* The threads' histograms merged, each swap's longest call, the holds. */
static void p8_collect(p8_main_t *m, hkb_p8_result_t *r)
{
    uint64_t s[HK_SWAP_STAT__COUNT];
    for (int t = 0; t < m->made; t++) {
        const p8_worker_t *w = m->w[t];
        for (int c = 0; c < HKB_P8_CLASSES; c++)
            hk__lat_merge(&r->lat[c], &w->lat[c]);
        r->calls += w->calls;
        for (int i = 0; i < r->swaps; i++)
            if ((double)w->longest[i].ns / 1e3 > r->swap[i].longest_call_us) {
                r->swap[i].longest_call_us = (double)w->longest[i].ns / 1e3;
                r->swap[i].longest_what = w->longest[i].what;
                r->swap[i].longest_at_us =
                    ((double)w->longest[i].t0 - (double)r->swap[i].t0_ns) / 1e3;
            }
    }
    hk_loader_swap_stats(m->loader, s, HK_SWAP_STAT__COUNT, NULL);
    r->holds = s[HK_SWAP_STAT_HOLDS];
    r->max_hold_us = (double)s[HK_SWAP_STAT_MAX_HOLD_NS] / 1e3;
}

/* Stops and joins the threads, checks their data, collects, frees. */
static int p8_finish(p8_main_t *m, hkb_p8_result_t *r, int rc, char *why, size_t len)
{
    atomic_store(&m->run.stop, 1);
    for (int t = 0; t < m->running; t++)
        pthread_join(m->w[t]->tid, NULL);
    if (rc == 0)
        rc = p8_failure(m, why, len); /* a failure in the last calls */
    for (int t = 0; rc == 0 && t < m->made; t++)
        rc = p8_worker_check(m->w[t], why, len);
    if (rc == 0)
        p8_collect(m, r);
    for (int t = 0; t < m->made; t++)
        p8_worker_fini(m->w[t]);
    if (m->loader && hk_loader_destroy(m->loader) != HK_STATUS_OK && rc == 0)
        rc = say(why, len, "loader destroy: %s", hk_loader_last_error(m->loader));
    return rc;
}

int hkb_p8_run(const hkb_p8_setup_t *s, hkb_p8_result_t *r, char *why, size_t len)
{
    p8_main_t m;
    int rc = -1;
    memset(r, 0, sizeof *r);
    if (!s || !s->path_a || !s->path_b || s->threads < 1 || s->threads > HKB_P8_MAX_THREADS ||
        s->swaps < 1 || s->gap_us < 0)
        return say(why, len, "P8: a bad set-up (threads 1 to %d, swaps >= 1)",
                   HKB_P8_MAX_THREADS);
    memset(&m, 0, sizeof m);
    m.run.setup = s;
    atomic_init(&m.run.stop, 0);
    hk__lat_windows_init(&m.run.win);
    r->swaps = s->swaps;
    r->lat = calloc(HKB_P8_CLASSES, sizeof *r->lat);
    r->swap = calloc((size_t)s->swaps, sizeof *r->swap);
    if (!r->lat || !r->swap) {
        say(why, len, "out of host memory");
        goto out;
    }
    if (p8_host_data(&m.run, why, len) != 0 || p8_open(&m, r, why, len) != 0 ||
        p8_start(&m, why, len) != 0 || p8_phases(&m, r, why, len) != 0)
        goto out;
    rc = 0;
out:
    rc = p8_finish(&m, r, rc, why, len);
    free(m.run.x);
    if (rc != 0)
        hkb_p8_result_free(r);
    return rc;
}

void hkb_p8_result_free(hkb_p8_result_t *r)
{
    free(r->lat);
    free(r->swap);
    r->lat = NULL;
    r->swap = NULL;
}
