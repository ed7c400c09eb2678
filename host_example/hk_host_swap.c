/* hk-host swap: worker threads call through movable handles, every result
 * checked, while the main thread swaps the implementation between two
 * plugins every few milliseconds. One progress line on a terminal, a summary
 * line at the end, a line with the swaps' time step by step, and two with
 * the calls' times (p50, p99, p99.9, longest) during the swaps and outside
 * them; exits 1 on any wrong or failed call or refused swap. Works in any
 * memory domain: data goes through hk.memory/1.
 *
 * Each call is timed around the call alone into a histogram of its thread
 * (common/prog/hk__lat.h: no lock, a few instructions); a swap's window runs from
 * just before the swap call (or its prepare) until it (or the commit) has
 * returned, and a call is "during" when any part of it overlaps one. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hk__lat.h"
#include "hk_blas1.h"
#include "hk_host.h"
#include "hk_memory.h"
#include "hk_selfcheck.h"
#include "hk_status_text.h"
#include "hk_swap.h"
#include "hk_host_swap.h"

typedef struct hkh_swap_opts {
    const char *a, *b;
    long threads, swaps, wait_ms;
    int64_t n;
    int prepared; /* -P: prepare each swap, then commit it */
    int keep_old; /* -K: leave the build swapped away from open */
} hkh_swap_opts_t;

atomic_int hkh_stop;
hk__lat_windows_t hkh_windows;

/* st = call, timed and classed by the swaps' windows. */
#define HKH_TIMED(w, st, call)                                                                 \
    do {                                                                                       \
        uint64_t before_ = hk__lat_mark(&hkh_windows), t0_ = hk__lat_now_ns();                 \
        (st) = (call);                                                                         \
        uint64_t t1_ = hk__lat_now_ns(), after_ = hk__lat_mark(&hkh_windows);                  \
        hk__lat_add(&(w)->lat[hk__lat_overlaps(before_, after_)], t1_ - t0_);                  \
    } while (0)
static hk_blas1_v1_t hkh_blas;
static hk_memory_v1_t hkh_mem;

void hkh_swap_tables(void)
{
    hk_mhandle_get_table(HK_TABLE_BLAS1_V1, &hkh_blas, sizeof hkh_blas);
    hk_mhandle_get_table(HK_TABLE_MEMORY_V1, &hkh_mem, sizeof hkh_mem);
}

/* swap's options; an id is the short letter. */
static const hk__cli_opt_t hkh_swap_options[] = {
    {'p', 'p', NULL, "REQUEST_A", "the plugin the threads start on: NAME, NAME@RANGE\n"
                                  "or a path to a .so file"},
    {'q', 'q', NULL, "REQUEST_B", "the plugin swapped in and out: the same forms"},
    {'t', 't', NULL, "THREADS", "worker threads, 1 to 256 (default 8)"},
    {'k', 'k', NULL, "SWAPS", "swaps, 1 to 1000000 (default 100)"},
    {'n', 'n', NULL, "N", "vector length, 1 to 67108864 (default 4096)"},
    {'w', 'w', NULL, "MS", "milliseconds between swaps, 0 to 10000 (default 2)"},
    {'P', 'P', NULL, NULL, "prepare each swap (open, verify, make the new\n"
                           "handles), then commit it: the switch time counts\n"
                           "from the commit"},
    {'K', 'K', NULL, NULL, "keep the build swapped away from open, its code\n"
                           "loaded (hk_swap_options_t.keep_old): a swap back\n"
                           "opens and loads nothing again"},
    {0, 0, NULL, NULL, NULL},
};

static void hkh_swap_usage(FILE *f)
{
    fprintf(f, "usage: hk-host swap -p REQUEST_A -q REQUEST_B [-t THREADS] [-k SWAPS] [-n N] "
               "[-w MS] [-P] [-K]\n"
               "  worker threads call saxpy and sdot through movable handles, every result\n"
               "  checked, while the implementation is swapped between A and B, which\n"
               "  must be two builds (two files): A and B resolving to the same build is a\n"
               "  usage error (status 2), as a swap to it would move nothing; exit\n"
               "  status 1 on a wrong or failed call or a refused swap\n"
               "options:\n");
    hk__cli_print_options(f, hkh_swap_options, NULL);
    hkh_usage_more(f);
}

static const hkh_number_t hkh_swap_numbers[] = {
    HKH_NUMBER('t', 1, 256, hkh_swap_opts_t, threads),
    HKH_NUMBER('k', 1, 1000000, hkh_swap_opts_t, swaps),
    HKH_NUMBER('w', 0, 10000, hkh_swap_opts_t, wait_ms),
    HKH_NUMBER('n', 1, 1LL << 26, hkh_swap_opts_t, n),
    {0, 0, 0, 0, 0},
};

static const char *hkh_swap_other(int id, const char *value, void *opts)
{
    hkh_swap_opts_t *o = opts;
    if (id == 'P')
        o->prepared = 1;
    else if (id == 'K')
        o->keep_old = 1;
    else
        *(id == 'p' ? &o->a : &o->b) = value;
    return NULL;
}

/* Fills *o from argv (argv[0] is "swap"); returns -1 to go on, else the
 * exit status. */
static int hkh_swap_parse(int argc, char **argv, hkh_swap_opts_t *o)
{
    hk__cli_t c;
    *o = (hkh_swap_opts_t){NULL, NULL, 8, 100, 2, 4096, 0, 0};
    hk__cli_init(&c, hkh_swap_options, argc, argv);
    int rc = hkh_cli_parse(&c, "swap", hkh_swap_usage, hkh_swap_numbers, hkh_swap_other, o);
    if (rc < 0 && (!o->a || !o->b))
        return hkh_usage_error("swap", o->a ? "-q is missing" : "-p is missing");
    return rc;
}

static void hkh_worker_fail(hkh_worker_t *w, const char *op, hk_status_t st)
{
    atomic_fetch_add(&w->failed, 1);
    if (!w->first[0]) {
        char why[256];
        hk_mhandle_last_error_copy(w->mh, why, sizeof why);
        snprintf(w->first, sizeof w->first, "%s: %s: %s", op, hk_status_name(st), why);
    }
}

/* Rounds of: y += x or y -= x, read y back, x.y; each call counted and
 * each result checked exactly (small integers). */
void *hkh_work(void *arg)
{
    hkh_worker_t *w = arg;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    size_t bytes = (size_t)w->n * sizeof(float);
    float *x = malloc(bytes), *y0 = malloc(bytes), *y = malloc(bytes);
    void *dx = NULL, *dy = NULL;
    double dot[2] = {0.0, 0.0};
    if (!x || !y0 || !y || hkh_mem.alloc(h, bytes, &dx) != HK_STATUS_OK
        || hkh_mem.alloc(h, bytes, &dy) != HK_STATUS_OK) {
        atomic_store(&w->ready, -1);
        goto out;
    }
    for (int64_t i = 0; i < w->n; i++) {
        x[i] = (float)(i % 5 - 2);
        y0[i] = (float)(i % 3 - 1);
        dot[0] += (double)x[i] * y0[i];
        dot[1] += (double)x[i] * (y0[i] + x[i]);
    }
    if (hkh_mem.copy_to_device(h, dx, x, bytes) != HK_STATUS_OK
        || hkh_mem.copy_to_device(h, dy, y0, bytes) != HK_STATUS_OK) {
        atomic_store(&w->ready, -1);
        goto out;
    }
    atomic_store(&w->ready, 1);
    for (int up = 1; !atomic_load(&hkh_stop); up = !up) {
        float alpha = up ? 1.0f : -1.0f, r = 0.0f;
        hk_status_t st;
        HKH_TIMED(w, st, hkh_blas.saxpy(h, w->n, &alpha, dx, 1, dy, 1));
        atomic_fetch_add(&w->calls, 1);
        if (st != HK_STATUS_OK) {
            hkh_worker_fail(w, "saxpy", st);
            break;
        }
        HKH_TIMED(w, st, hkh_mem.copy_to_host(h, y, dy, bytes));
        atomic_fetch_add(&w->calls, 1);
        if (st != HK_STATUS_OK) {
            hkh_worker_fail(w, "copy_to_host", st);
            break;
        }
        for (int64_t i = 0; i < w->n; i++)
            if (y[i] != y0[i] + (up ? x[i] : 0.0f)) {
                atomic_fetch_add(&w->wrong, 1);
                break;
            }
        HKH_TIMED(w, st, hkh_blas.sdot(h, w->n, dx, 1, dy, 1, &r));
        atomic_fetch_add(&w->calls, 1);
        if (st != HK_STATUS_OK) {
            hkh_worker_fail(w, "sdot", st);
            break;
        }
        if ((double)r != dot[up])
            atomic_fetch_add(&w->wrong, 1);
    }
out:
    if (dx)
        hkh_mem.free_(h, dx);
    if (dy)
        hkh_mem.free_(h, dy);
    free(x);
    free(y0);
    free(y);
    return NULL;
}

/* The workload of a plugin without hk.blas1/1: its own self-check, run
 * again and again through pins (hk_mhandle_pin), each verdict counted. */
void *hkh_work_selfcheck(void *arg)
{
    hkh_worker_t *w = arg;
    char why[256];
    atomic_store(&w->ready, 1);
    while (!atomic_load(&hkh_stop)) {
        hk_mhandle_pin_t pin = {.size = sizeof pin};
        hk_status_t st;
        HKH_TIMED(w, st, hk_mhandle_pin(w->mh, HK_TABLE_SELFCHECK_V1, &pin));
        if (st != HK_STATUS_OK) {
            hkh_worker_fail(w, "hk_mhandle_pin", st);
            break;
        }
        const hk_selfcheck_v1_t *sc = pin.table;
        why[0] = '\0';
        HKH_TIMED(w, st, sc->run(pin.handle, why, sizeof why));
        hk_mhandle_unpin(&pin);
        atomic_fetch_add(&w->calls, 1);
        if (st == HK_STATUS_INTERNAL) {
            atomic_fetch_add(&w->wrong, 1);
        } else if (st != HK_STATUS_OK) {
            hkh_worker_fail(w, "self-check", st);
            break;
        }
    }
    return NULL;
}

void hkh_totals(hkh_worker_t *w, long n, unsigned long long t[3])
{
    t[0] = t[1] = t[2] = 0;
    for (long i = 0; i < n; i++) {
        t[0] += atomic_load(&w[i].calls);
        t[1] += atomic_load(&w[i].wrong);
        t[2] += atomic_load(&w[i].failed);
    }
}

uint64_t hkh_stat(hk_loader_t *loader, hk_swap_stat_t stat)
{
    uint64_t v[HK_SWAP_STAT__COUNT];
    hk_loader_swap_stats(loader, v, HK_SWAP_STAT__COUNT, NULL);
    return v[stat];
}

void hkh_steps_of(hk_loader_t *loader, uint64_t v[STEPS])
{
    uint64_t s[HK_SWAP_STAT__COUNT];
    hk_loader_swap_stats(loader, s, HK_SWAP_STAT__COUNT, NULL);
    v[STEP_OPEN] = s[HK_SWAP_STAT_LAST_OPEN_NS];
    v[STEP_VERIFY] = s[HK_SWAP_STAT_LAST_VERIFY_NS];
    v[STEP_CREATE] = s[HK_SWAP_STAT_LAST_CREATE_NS];
    v[STEP_COMMIT] = s[HK_SWAP_STAT_LAST_COMMIT_NS];
    v[STEP_DRAIN] = s[HK_SWAP_STAT_LAST_DRAIN_NS];
    v[STEP_CLOSE] = s[HK_SWAP_STAT_LAST_CLOSE_NS];
    v[STEP_SWITCH] = s[HK_SWAP_STAT_LAST_SWITCH_NS];
}

static int hkh_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The second summary line: the median of every step over the n swaps that
 * succeeded (steps[i * STEPS + k]), and the steps of the one whose switch
 * took longest. */
void hkh_print_steps(uint64_t *steps, long n)
{
    static const char *const names[STEPS - 1] = {"open", "verify", "new handles", "switch",
                                                 "drain", "close"};
    if (n <= 0)
        return;
    long slow = 0;
    for (long i = 1; i < n; i++)
        if (steps[i * STEPS + STEP_SWITCH] > steps[slow * STEPS + STEP_SWITCH])
            slow = i;
    uint64_t worst[STEPS], *col = malloc((size_t)n * sizeof(*col));
    memcpy(worst, &steps[slow * STEPS], sizeof worst);
    if (!col)
        return;
    printf("swap: time by step, median (slowest switch, %.0f us): ", worst[STEP_SWITCH] / 1e3);
    for (int k = 0; k < STEPS - 1; k++) {
        for (long i = 0; i < n; i++)
            col[i] = steps[i * STEPS + k];
        qsort(col, (size_t)n, sizeof(*col), hkh_cmp_u64);
        printf("%s%s %.0f (%.0f)", k ? ", " : "", names[k], col[n / 2] / 1e3, worst[k] / 1e3);
    }
    printf(" us\n");
    free(col);
}

/* The last two lines: the calls' times during the swaps and outside them,
 * over every thread (read after the threads ended); with windows 0 (the
 * swaps ran on another thread, unmarked) one line for every call. */
void hkh_print_times(const hkh_worker_t *w, long n, int windows)
{
    static const char *const when[2] = {"outside swaps", "during swaps"};
    hk__lat_t *all = calloc(2, sizeof *all);
    if (!all)
        return;
    for (long i = 0; i < n; i++)
        for (int c = 0; c < 2; c++)
            hk__lat_merge(&all[windows ? c : 0], &w[i].lat[c]);
    for (int c = windows; c >= 0; c--) {
        hk__lat_summary_t s;
        hk__lat_summarize(&all[c], &s);
        printf("%s: call time%s%s (%llu calls): p50 %.1f, p99 %.1f, p99.9 %.1f, longest %.1f "
               "us\n", windows ? "swap" : "watch", windows ? " " : "", windows ? when[c] : "",
               (unsigned long long)s.count, s.p50_us, s.p99_us, s.p999_us, s.max_us);
    }
    free(all);
}

/* One swap to request: in one call, or prepared and then committed. */
static hk_status_t hkh_swap_once(hk_loader_t *loader, const char *request,
                                 const hkh_swap_opts_t *o)
{
    hk_swap_options_t so = {.size = sizeof so, .keep_old = (uint32_t)o->keep_old};
    if (!o->prepared)
        return hk_loader_swap(loader, request, &so, NULL);
    hk_swap_prepared_t *p = NULL;
    hk_status_t st = hk_loader_swap_prepare(loader, request, &so, &p);
    return st == HK_STATUS_OK ? hk_loader_swap_commit(p, NULL) : st;
}

/* Swaps o->swaps times, B first; returns the number refused. Each successful
 * swap's steps go to steps[*done * STEPS ...] (steps may be NULL). */
static long hkh_swap_loop(hk_loader_t *loader, const hkh_swap_opts_t *o, hkh_worker_t *w,
                          uint64_t *steps, long *done)
{
    int tty = isatty(STDOUT_FILENO);
    long refused = 0;
    *done = 0;
    for (long i = 0; i < o->swaps; i++) {
        const char *to = (i % 2) ? o->a : o->b;
        hk__lat_window_open(&hkh_windows);
        hk_status_t st = hkh_swap_once(loader, to, o);
        hk__lat_window_close(&hkh_windows);
        if (st != HK_STATUS_OK) {
            if (refused++ == 0)
                hkh_fail("swap: %s", hk_loader_last_error(loader));
        } else if (steps) {
            hkh_steps_of(loader, &steps[(*done)++ * STEPS]);
        }
        if (tty) {
            unsigned long long t[3];
            hk_swap_state_t s = {.size = sizeof s};
            hkh_totals(w, o->threads, t);
            hk_loader_swap_state(loader, &s);
            printf("\rswap %ld/%ld  calls %llu  wrong %llu  failed %llu  in flight %llu  "
                   "last switch %.0f us ",
                   i + 1, o->swaps, t[0], t[1], t[2], (unsigned long long)s.inflight,
                   hkh_stat(loader, HK_SWAP_STAT_LAST_SWITCH_NS) / 1e3);
            fflush(stdout);
        }
        struct timespec ts = {o->wait_ms / 1000, (o->wait_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (tty)
        printf("\n");
    return refused;
}

/* Resolves both requests (the plugins stay loaded), starts the workers on A. */
static int hkh_start(hk_loader_t *loader, const hkh_swap_opts_t *o, hkh_worker_t *w, long *started)
{
    hk_plugin_t *pa = NULL, *pb = NULL;
    int rc = hkh_select(loader, o->a, "swap: ", &pa);
    if (rc != 0 || (rc = hkh_select(loader, o->b, "swap: ", &pb)) != 0)
        return rc;
    /* A swap to the build the handles are on moves nothing: refused, not
     * counted as done. */
    if (pa == pb) {
        char text[HK__CLI_ERROR_MAX + 1200];
        snprintf(text, sizeof text, "-p %s and -q %s are the same build (%s %s, %s): a swap "
                 "to it would move nothing; name two builds", o->a, o->b, hk_plugin_name(pa),
                 hk_plugin_version(pa), hk_plugin_path(pa));
        return hkh_usage_error("swap", text);
    }
    /* The workload: hk.blas1/1 where A offers it, else A's own self-check. */
    hk_blas1_v1_t b;
    hk_selfcheck_v1_t sc;
    int blas = hk_plugin_get_table(pa, HK_TABLE_BLAS1_V1, &b, sizeof b) == HK_STATUS_OK;
    if (!blas && (hk_plugin_get_table(pa, HK_TABLE_SELFCHECK_V1, &sc, sizeof sc) != HK_STATUS_OK
                  || !sc.run)) {
        hkh_fail("swap: %s %s offers neither %s nor %s: there is no workload to run on it",
                 hk_plugin_name(pa), hk_plugin_version(pa), HK_TABLE_BLAS1_V1,
                 HK_TABLE_SELFCHECK_V1);
        return 1;
    }
    printf("swap: %s %s (%s) <-> %s %s (%s), %ld threads, %ld swaps, n %lld\n",
           hk_plugin_name(pa), hk_plugin_version(pa), hk_plugin_path(pa), hk_plugin_name(pb),
           hk_plugin_version(pb), hk_plugin_path(pb), o->threads, o->swaps, (long long)o->n);
    printf("workload: %s\n", blas ? "saxpy, copy back, sdot through the forwarding tables, "
                                    "every result checked"
                                  : "its self-check (hk.selfcheck/1) through pins, every "
                                    "verdict counted");
    fflush(stdout);
    hkh_swap_tables();
    for (*started = 0; *started < o->threads; (*started)++) {
        hkh_worker_t *wk = &w[*started];
        wk->n = o->n;
        if (hk_mhandle_create_on(pa, NULL, &wk->mh) != HK_STATUS_OK) {
            hkh_fail("swap: %s", hk_loader_last_error(loader));
            return 1;
        }
        if (pthread_create(&wk->tid, NULL, blas ? hkh_work : hkh_work_selfcheck, wk) != 0) {
            hk_mhandle_destroy(wk->mh);
            hkh_fail("swap: cannot start a thread");
            return 1;
        }
        while (atomic_load(&wk->ready) == 0)
            sched_yield();
        if (atomic_load(&wk->ready) < 0) {
            (*started)++;
            hkh_fail("swap: cannot place the data: %s", hk_loader_last_error(loader));
            return 1;
        }
    }
    return 0;
}

/* Counts the modules of A and B that are still open. */
static void hkh_open_modules(hk_loader_t *loader, const hkh_swap_opts_t *o, int *open, int *total)
{
    hk_plugin_t *p[2] = {NULL, NULL};
    hk_loader_select(loader, o->a, &p[0]);
    hk_loader_select(loader, o->b, &p[1]);
    *open = *total = 0;
    for (int i = 0; i < 2; i++) {
        if (!p[i] || (i == 1 && p[1] == p[0]))
            continue;
        hk_swap_plugin_state_t s = {.size = sizeof s};
        (*total)++;
        if (hk_plugin_swap_state(p[i], &s) == HK_STATUS_OK && s.module != HK_MODULE_CLOSED)
            (*open)++;
    }
}

int hkh_cmd_swap(const hkh_opts_t *opts)
{
    hkh_swap_opts_t o;
    int rc = hkh_swap_parse(opts->argc, opts->argv, &o);
    if (rc >= 0)
        return rc;
    hk_loader_t *loader = hkh_loader(0, 0);
    if (!loader)
        return 1;
    hkh_worker_t *w = calloc((size_t)o.threads, sizeof(*w));
    uint64_t *steps = calloc((size_t)o.swaps + 1, STEPS * sizeof(*steps));
    long started = 0, refused = 0, done = 0;
    if (w)
        hk__lat_prefault(w, (size_t)o.threads * sizeof(*w));
    atomic_store(&hkh_stop, 0);
    hk__lat_windows_init(&hkh_windows);
    rc = w ? hkh_start(loader, &o, w, &started) : 1;
    if (rc == 0)
        refused = hkh_swap_loop(loader, &o, w, steps, &done);
    atomic_store(&hkh_stop, 1);
    for (long i = 0; i < started; i++) {
        pthread_join(w[i].tid, NULL);
        if (w[i].first[0])
            hkh_fail("swap: thread %ld: %s", i, w[i].first);
        hk_mhandle_destroy(w[i].mh);
    }
    if (rc == 0) {
        unsigned long long t[3];
        int open, total;
        hkh_totals(w, o.threads, t);
        hkh_open_modules(loader, &o, &open, &total);
        printf("swap: calls %llu, wrong %llu, failed %llu, swaps %ld of %ld (%ld refused), "
               "longest switch %.0f us, modules still open: %d of %d\n",
               t[0], t[1], t[2], o.swaps - refused, o.swaps, refused,
               hkh_stat(loader, HK_SWAP_STAT_MAX_SWITCH_NS) / 1e3,
               open, total);
        if (steps)
            hkh_print_steps(steps, done);
        hkh_print_times(w, started, 1);
        rc = (t[1] || t[2] || refused) ? 1 : 0;
    }
    free(steps);
    free(w);
    if (hk_loader_destroy(loader) != HK_STATUS_OK)
        hkh_fail("swap: %s", hk_loader_last_error(loader));
    return rc;
}
