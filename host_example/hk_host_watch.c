/* hk-host watch: the swap workload on the plugin a request selects, while
 * the loader watches the search path (plugin_api/hk_watch.h) and swaps
 * every new build the request selects in by itself. Each event is one line
 * as it comes; a swap's line gives its steps and the time from the file's
 * last write to the swap's return, after which every call runs the new
 * build. At the end: the calls (wrong, failed), the builds seen, and the
 * calls' times during the swaps and outside them. Exits 1 on a wrong or
 * failed call; a build refused is an event, not a failure of the host. */
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hk_blas1.h"
#include "hk_host.h"
#include "hk_host_swap.h"
#include "hk_selfcheck.h"
#include "hk_status_text.h"
#include "hk_watch.h"

typedef struct hkh_watch_opts {
    const char *request;
    long threads, seconds, swaps;
    int64_t n;
    uint32_t debounce_ms;
    int report; /* -R: report new builds, swap nothing */
} hkh_watch_opts_t;

/* What the callback saw; written on the watch's thread. */
typedef struct hkh_watch_seen {
    hk_loader_t *loader;
    atomic_long kinds[6]; /* by hk_watch_kind_t */
    uint64_t steps[STEPS * 64];
    atomic_long nsteps;
    double worst_ms; /* the longest last write to swap return */
} hkh_watch_seen_t;

static volatile sig_atomic_t hkh_watch_signal;

static void hkh_watch_on_signal(int sig)
{
    hkh_watch_signal = sig;
}

static const hk__cli_opt_t hkh_watch_options[] = {
    {'r', 'r', NULL, "REQUEST", "the plugin the threads run and new builds must\n"
                                "match: NAME or NAME@RANGE (default hk-cpu)"},
    {'t', 't', NULL, "THREADS", "worker threads, 1 to 256 (default 8)"},
    {'n', 'n', NULL, "N", "vector length, 1 to 67108864 (default 4096)"},
    {'s', 's', NULL, "SECONDS", "stop after SECONDS, 1 to 86400 (default: at\n"
                                "Ctrl-C, SIGTERM, or -k)"},
    {'k', 'k', NULL, "SWAPS", "stop after SWAPS new builds went live, 1 to 1000000"},
    {'D', 'D', NULL, "MS", "the debounce interval, 1 to 60000 ms (default 200)"},
    {'R', 'R', NULL, NULL, "report new builds only; swap nothing"},
    {0, 0, NULL, NULL, NULL},
};

static void hkh_watch_usage(FILE *f)
{
    fprintf(f, "usage: hk-host watch [-r REQUEST] [-t THREADS] [-n N] [-s SECONDS] [-k SWAPS] "
               "[-D MS] [-R]\n"
               "  worker threads call through movable handles on what REQUEST selects,\n"
               "  every result checked, while new builds written into the search path go\n"
               "  live by themselves (docs/deploy.md); exit status 1 on a wrong or failed\n"
               "  call\n"
               "options:\n");
    hk__cli_print_options(f, hkh_watch_options, NULL);
    hkh_usage_more(f);
}

static const hkh_number_t hkh_watch_numbers[] = {
    HKH_NUMBER('t', 1, 256, hkh_watch_opts_t, threads),
    HKH_NUMBER('s', 1, 86400, hkh_watch_opts_t, seconds),
    HKH_NUMBER('k', 1, 1000000, hkh_watch_opts_t, swaps),
    HKH_NUMBER('D', 1, 60000, hkh_watch_opts_t, debounce_ms),
    HKH_NUMBER('n', 1, 1LL << 26, hkh_watch_opts_t, n),
    {0, 0, 0, 0, 0},
};

static const char *hkh_watch_other(int id, const char *value, void *opts)
{
    hkh_watch_opts_t *o = opts;
    if (id == 'R')
        o->report = 1;
    else
        o->request = value;
    return NULL;
}

/* Fills *o from argv (argv[0] is "watch"); -1 to go on, else the exit status. */
static int hkh_watch_parse(int argc, char **argv, hkh_watch_opts_t *o)
{
    hk__cli_t c;
    *o = (hkh_watch_opts_t){"hk-cpu", 8, 0, 0, 4096, 0, 0};
    hk__cli_init(&c, hkh_watch_options, argc, argv);
    return hkh_cli_parse(&c, "watch", hkh_watch_usage, hkh_watch_numbers, hkh_watch_other, o);
}

/* One line per event; a swap's line adds its steps and the time from the
 * file's last write. */
static void hkh_watch_event(void *user, const hk_watch_event_t *e)
{
    hkh_watch_seen_t *seen = user;
    if ((unsigned)e->kind < 6)
        atomic_fetch_add(&seen->kinds[e->kind], 1);
    printf("watch: %s %s", hk_watch_kind_name(e->kind), hkh_esc(e->path));
    if (e->plugin)
        printf(" (%s %s)", hkh_esc(hk_plugin_name(e->plugin)),
               hkh_esc(hk_plugin_version(e->plugin)));
    if (e->status != HK_STATUS_OK)
        printf(": %s", hk_status_name(e->status));
    printf("\n");
    if (e->reason[0])
        printf("  %s\n", hkh_esc(e->reason));
    if (e->kind == HK_WATCH_SWAPPED) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        double ms = ((double)now.tv_sec * 1e9 + (double)now.tv_nsec - (double)e->mtime_ns) / 1e6;
        uint64_t v[STEPS];
        hkh_steps_of(seen->loader, v);
        long i = atomic_load(&seen->nsteps);
        if (i < 64) {
            memcpy(&seen->steps[i * STEPS], v, sizeof v);
            atomic_store(&seen->nsteps, i + 1);
        }
        if (ms > seen->worst_ms)
            seen->worst_ms = ms;
        printf("  live: the file's last write to the swap's return %.1f ms (debounce "
               "included); steps: open %.0f, verify %.0f, new handles %.0f, switch %.0f, drain "
               "%.0f, close %.0f us\n", ms, v[STEP_OPEN] / 1e3, v[STEP_VERIFY] / 1e3,
               v[STEP_CREATE] / 1e3, v[STEP_COMMIT] / 1e3, v[STEP_DRAIN] / 1e3,
               v[STEP_CLOSE] / 1e3);
    }
    fflush(stdout);
}

/* Starts the workers on what the request selects. 0, or the exit status. */
static int hkh_watch_start(hk_loader_t *loader, const hkh_watch_opts_t *o, hkh_worker_t *w,
                           long *started)
{
    hk_plugin_t *p = NULL;
    int rc = hkh_select(loader, o->request, "watch: ", &p);
    if (rc != 0)
        return rc;
    hk_blas1_v1_t b;
    hk_selfcheck_v1_t sc;
    int blas = hk_plugin_get_table(p, HK_TABLE_BLAS1_V1, &b, sizeof b) == HK_STATUS_OK;
    if (!blas && (hk_plugin_get_table(p, HK_TABLE_SELFCHECK_V1, &sc, sizeof sc) != HK_STATUS_OK
                  || !sc.run)) {
        hkh_fail("watch: %s %s offers neither %s nor %s: there is no workload to run on it",
                 hk_plugin_name(p), hk_plugin_version(p), HK_TABLE_BLAS1_V1,
                 HK_TABLE_SELFCHECK_V1);
        return 1;
    }
    printf("watch: %s %s (%s) serves %s; %ld threads, n %lld; %s\n", hkh_esc(hk_plugin_name(p)),
           hkh_esc(hk_plugin_version(p)), hkh_esc(hk_plugin_path(p)), hkh_esc(o->request),
           o->threads, (long long)o->n, blas ? "saxpy, copy back, sdot, every result checked"
                                             : "its self-check through pins");
    fflush(stdout);
    hkh_swap_tables();
    for (*started = 0; *started < o->threads; (*started)++) {
        hkh_worker_t *wk = &w[*started];
        wk->n = o->n;
        if (hk_mhandle_create(loader, o->request, NULL, &wk->mh) != HK_STATUS_OK) {
            hkh_fail("watch: %s", hk_loader_last_error(loader));
            return 1;
        }
        if (pthread_create(&wk->tid, NULL, blas ? hkh_work : hkh_work_selfcheck, wk) != 0) {
            hk_mhandle_destroy(wk->mh);
            hkh_fail("watch: cannot start a thread");
            return 1;
        }
        while (atomic_load(&wk->ready) == 0)
            sched_yield();
        if (atomic_load(&wk->ready) < 0) {
            (*started)++;
            hkh_fail("watch: cannot place the data: %s", hk_loader_last_error(loader));
            return 1;
        }
    }
    return 0;
}

/* Waits for the end: SECONDS, SWAPS builds live, or a signal. A progress
 * line on a terminal. */
static void hkh_watch_wait(const hkh_watch_opts_t *o, hkh_worker_t *w, hkh_watch_seen_t *seen)
{
    int tty = isatty(STDOUT_FILENO);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec tick = {0, 100000000L};
        nanosleep(&tick, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long secs = (long)(now.tv_sec - t0.tv_sec);
        if (hkh_watch_signal || (o->seconds && secs >= o->seconds)
            || (o->swaps && atomic_load(&seen->kinds[HK_WATCH_SWAPPED]) >= o->swaps))
            break;
        if (tty) {
            unsigned long long t[3];
            hkh_totals(w, o->threads, t);
            printf("\rwatch %lds  calls %llu  wrong %llu  failed %llu  live %ld  refused %ld ",
                   secs, t[0], t[1], t[2], atomic_load(&seen->kinds[HK_WATCH_SWAPPED]),
                   atomic_load(&seen->kinds[HK_WATCH_REFUSED]));
            fflush(stdout);
        }
    }
    if (tty)
        printf("\n");
}

int hkh_cmd_watch(const hkh_opts_t *opts)
{
    hkh_watch_opts_t o;
    int rc = hkh_watch_parse(opts->argc, opts->argv, &o);
    if (rc >= 0)
        return rc;
    hk_loader_t *loader = hkh_loader(0, 0);
    if (!loader)
        return 1;
    hkh_worker_t *w = calloc((size_t)o.threads, sizeof(*w));
    hkh_watch_seen_t *seen = calloc(1, sizeof(*seen));
    hk_watch_t *watch = NULL;
    long started = 0;
    atomic_store(&hkh_stop, 0);
    hk__lat_windows_init(&hkh_windows);
    rc = w && seen ? hkh_watch_start(loader, &o, w, &started) : 1;
    if (rc == 0) {
        seen->loader = loader;
        hk_watch_options_t wo = {sizeof wo, o.report ? HK_WATCH_REPORT : HK_WATCH_SWAP,
                                 o.request, o.debounce_ms, hkh_watch_event, seen, NULL};
        if (hk_watch_create(loader, &wo, &watch) != HK_STATUS_OK
            || hk_watch_start(watch) != HK_STATUS_OK) {
            hkh_fail("watch: %s", hk_loader_last_error(loader));
            rc = 1;
        }
    }
    if (rc == 0) {
        signal(SIGINT, hkh_watch_on_signal);
        signal(SIGTERM, hkh_watch_on_signal);
        printf("watch: watching the search path (debounce %u ms, %s)\n",
               o.debounce_ms ? o.debounce_ms : HK_WATCH_DEBOUNCE_MS,
               o.report ? "report only" : "new builds go live");
        fflush(stdout);
        hkh_watch_wait(&o, w, seen);
    }
    hk_watch_destroy(watch);
    atomic_store(&hkh_stop, 1);
    for (long i = 0; i < started; i++) {
        pthread_join(w[i].tid, NULL);
        if (w[i].first[0])
            hkh_fail("watch: thread %ld: %s", i, w[i].first);
        hk_mhandle_destroy(w[i].mh);
    }
    if (rc == 0) {
        unsigned long long t[3];
        hkh_totals(w, o.threads, t);
        printf("watch: calls %llu, wrong %llu, failed %llu; builds: live %ld, loaded %ld, not "
               "taken %ld, refused %ld; directory events %ld; longest last write to live %.1f "
               "ms\n", t[0], t[1], t[2], atomic_load(&seen->kinds[HK_WATCH_SWAPPED]),
               atomic_load(&seen->kinds[HK_WATCH_LOADED]),
               atomic_load(&seen->kinds[HK_WATCH_NOT_TAKEN]),
               atomic_load(&seen->kinds[HK_WATCH_REFUSED]),
               atomic_load(&seen->kinds[HK_WATCH_DIRECTORY]), seen->worst_ms);
        hkh_print_steps(seen->steps, atomic_load(&seen->nsteps));
        hkh_print_times(w, started, 0);
        rc = (t[1] || t[2]) ? 1 : 0;
    }
    free(seen);
    free(w);
    if (hk_loader_destroy(loader) != HK_STATUS_OK)
        hkh_fail("watch: %s", hk_loader_last_error(loader));
    return rc;
}
