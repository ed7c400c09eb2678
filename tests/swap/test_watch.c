/* Hot reload (plugin_api/hk_watch.h): a host computing through 8 movable
 * handles on hk-cpu while new builds are written into its plugin directory
 * in every way a deployment does it, and some it should not: copied in
 * place, ten times in a second, stopped halfway, a build that computes
 * wrong, one outside the requested range; the directory deleted and made
 * writable by others. Every call's result is checked; none may fail. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hk_status_text.h"
#include "hk_watch.h"
#include "swap_test.h"

#define W_THREADS 8
#define W_EVENTS 128
#define W_N 64
#define W_WAIT_MS 20000 /* far above what any step takes: a deadline, not a pause */

typedef struct wev {
    hk_watch_kind_t kind;
    hk_status_t status;
    hk_plugin_t *plugin;
    char path[PATH_MAX];
    char reason[1024];
    uint64_t seen_ns, done_ns;
} wev_t;

typedef struct wfx {
    char dir[PATH_MAX];
    char path[PATH_MAX + 16]; /* dir/hk-cpu.so */
    hk_loader_t *loader;
    hk_watch_t *watch;
    hk_plugin_t *first;
    hk_mhandle_t *mh[W_THREADS];
    pthread_t th[W_THREADS];
    atomic_int stop;
    atomic_long calls, bad;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    wev_t ev[W_EVENTS];
    int nev;
    hk_plugin_t *served[32]; /* each build's first call served, at served_ns */
    uint64_t served_ns[32];
    int nserved;
    hk_status_t in_cb_process; /* hk_watch_process from the callback */
} wfx_t;

static hk_blas1_v1_t B;

static void on_event(void *user, const hk_watch_event_t *e)
{
    wfx_t *f = user;
    pthread_mutex_lock(&f->lock);
    if (f->nev < W_EVENTS) {
        wev_t *w = &f->ev[f->nev++];
        w->kind = e->kind;
        w->status = e->status;
        w->plugin = e->plugin;
        snprintf(w->path, sizeof w->path, "%s", e->path);
        snprintf(w->reason, sizeof w->reason, "%s", e->reason);
        w->seen_ns = e->seen_ns;
        w->done_ns = e->done_ns;
    }
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    f->in_cb_process = hk_watch_process(f->watch);
}

/* The index of the first event of kind at or after *from (then past it),
 * waited for up to W_WAIT_MS; -1 when none came. */
static int wait_event(wfx_t *f, hk_watch_kind_t kind, int *from)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += W_WAIT_MS / 1000;
    pthread_mutex_lock(&f->lock);
    int found = -1;
    for (;;) {
        for (int i = *from; i < f->nev && found < 0; i++)
            if (f->ev[i].kind == kind)
                found = i;
        if (found >= 0 || pthread_cond_timedwait(&f->cond, &f->lock, &dl) == ETIMEDOUT)
            break;
    }
    if (found < 0)
        for (int i = *from; i < f->nev; i++)
            printf("  (event %d: %s %s: %s)\n", i, hk_watch_kind_name(f->ev[i].kind),
                   hk_status_name(f->ev[i].status), f->ev[i].reason);
    else
        *from = found + 1;
    pthread_mutex_unlock(&f->lock);
    return found;
}

static void note_served(wfx_t *f, hk_plugin_t *p)
{
    pthread_mutex_lock(&f->lock);
    int known = 0;
    for (int i = 0; i < f->nserved && !known; i++)
        known = f->served[i] == p;
    if (!known && f->nserved < 32) {
        f->served[f->nserved] = p;
        f->served_ns[f->nserved++] = swp_now_ns();
    }
    pthread_mutex_unlock(&f->lock);
}

static uint64_t served_at(wfx_t *f, hk_plugin_t *p)
{
    uint64_t t = 0;
    pthread_mutex_lock(&f->lock);
    for (int i = 0; i < f->nserved; i++)
        if (f->served[i] == p)
            t = f->served_ns[i];
    pthread_mutex_unlock(&f->lock);
    return t;
}

/* One thread's calls: sscal through its movable handle, every result
 * checked, and the build that served it noted. */
static void *worker(void *arg)
{
    wfx_t *f = ((void **)arg)[0];
    hk_mhandle_t *mh = ((void **)arg)[1];
    free(arg);
    float x[W_N], alpha = 2.0f;
    hk_plugin_t *last = NULL;
    while (!atomic_load(&f->stop)) {
        for (int i = 0; i < W_N; i++)
            x[i] = (float)(i + 1);
        int ok = B.sscal(hk_mhandle_handle(mh), W_N, &alpha, x, 1) == HK_STATUS_OK;
        for (int i = 0; ok && i < W_N; i++)
            ok = x[i] == 2.0f * (float)(i + 1);
        atomic_fetch_add(&f->calls, 1);
        if (!ok)
            atomic_fetch_add(&f->bad, 1);
        hk_mhandle_state_t s = {.size = sizeof s};
        if (hk_mhandle_state(mh, &s) == HK_STATUS_OK && s.plugin != last)
            note_served(f, last = s.plugin);
    }
    return NULL;
}

static int copy_bytes(const char *from, const char *to, long limit)
{
    FILE *in = fopen(from, "rb");
    int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char buf[65536];
    long done = 0;
    size_t n;
    int rc = in && fd >= 0 ? 0 : -1;
    while (rc == 0 && (limit < 0 || done < limit) && (n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (limit >= 0 && done + (long)n > limit)
            n = (size_t)(limit - done);
        rc = write(fd, buf, n) == (ssize_t)n ? 0 : -1;
        done += (long)n;
    }
    if (in)
        fclose(in);
    if (fd >= 0 && close(fd) != 0)
        rc = -1;
    return rc;
}

/* The file at f->path rewritten in place with the bytes of from. */
static uint64_t rewrite(wfx_t *f, const char *from)
{
    CU_ASSERT_EQUAL_FATAL(copy_bytes(from, f->path, -1), 0);
    return swp_now_ns();
}

/* A directory with hk-cpu 1.0.0, scanned; 8 threads calling through
 * movable handles on "hk-cpu@^1"; a watch with policy and debounce,
 * started on its thread unless fd_loop. */
static int wfx_up(wfx_t *f, uint32_t policy, uint32_t debounce_ms, int fd_loop)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    snprintf(f->dir, sizeof f->dir, "%s/watch-XXXXXX", HK_SWAP_PLUGIN_DIR);
    if (!mkdtemp(f->dir))
        return 0;
    snprintf(f->path, sizeof f->path, "%s/hk-cpu.so", f->dir);
    if (copy_bytes(SWP_A, f->path, -1) != 0)
        return 0;
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1, .default_dir = f->dir};
    if (hk_loader_create(&o, &f->loader) != HK_STATUS_OK || hk_loader_scan(f->loader))
        return 0;
    f->first = hk_loader_find(f->loader, "hk-cpu");
    hk_watch_options_t wo = {sizeof wo, policy, "hk-cpu@^1", debounce_ms, on_event, f, NULL};
    if (!f->first || hk_watch_create(f->loader, &wo, &f->watch) != HK_STATUS_OK
        || (!fd_loop && hk_watch_start(f->watch) != HK_STATUS_OK))
        return 0;
    swp_tables(&B, NULL);
    for (int i = 0; i < W_THREADS; i++) {
        void **arg = malloc(2 * sizeof(void *));
        if (!arg || hk_mhandle_create(f->loader, "hk-cpu@^1", NULL, &f->mh[i]) != HK_STATUS_OK)
            return 0;
        arg[0] = f;
        arg[1] = f->mh[i];
        pthread_create(&f->th[i], NULL, worker, arg);
    }
    return 1;
}

/* Stops the calls and the watch; every call was right. */
static void wfx_down(wfx_t *f)
{
    atomic_store(&f->stop, 1);
    for (int i = 0; i < W_THREADS; i++)
        if (f->mh[i])
            pthread_join(f->th[i], NULL);
    CU_ASSERT_EQUAL(hk_watch_destroy(f->watch), HK_STATUS_OK);
    for (int i = 0; i < W_THREADS; i++)
        if (f->mh[i])
            hk_mhandle_destroy(f->mh[i]);
    CU_ASSERT(atomic_load(&f->calls) > 0);
    CU_ASSERT_EQUAL(atomic_load(&f->bad), 0);
    if (atomic_load(&f->bad))
        printf("  %ld of %ld calls failed or were wrong\n", atomic_load(&f->bad),
               atomic_load(&f->calls));
    CU_ASSERT_EQUAL(hk_loader_destroy(f->loader), HK_STATUS_OK);
    chmod(f->dir, 0700);
    unlink(f->path);
    rmdir(f->dir);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
}

/* Every handle runs p (waited for: a swap switches them at their next call). */
static int all_on(wfx_t *f, hk_plugin_t *p)
{
    for (int i = 0; i < W_THREADS; i++) {
        hk_mhandle_state_t s = {.size = sizeof s};
        if (hk_mhandle_state(f->mh[i], &s) != HK_STATUS_OK || s.plugin != p)
            return 0;
    }
    return 1;
}

static const char *version_of(hk_plugin_t *p)
{
    return p ? hk_plugin_version(p) : "(none)";
}

/* Waits for an event of kind from *from on (wait_event), asserting, fatally,
 * that it came and that its plugin is of version. Returns its index. */
static int expect_event(wfx_t *f, hk_watch_kind_t kind, int *from, const char *version)
{
    int i = wait_event(f, kind, from);
    CU_ASSERT_FATAL(i >= 0);
    CU_ASSERT_STRING_EQUAL(version_of(f->ev[i].plugin), version);
    return i;
}

/* cp of a new build over the loaded file: it goes live by itself, from the
 * last write to its first call within the target (printed), and the build
 * it replaced is closed and superseded. */
static void test_in_place(void)
{
    wfx_t f;
    int from = 0;
    CU_ASSERT_FATAL(wfx_up(&f, HK_WATCH_SWAP, 100, 0));
    uint64_t t_write = rewrite(&f, SWP_B);
    int i = wait_event(&f, HK_WATCH_SWAPPED, &from);
    CU_ASSERT_FATAL(i >= 0);
    hk_plugin_t *p = f.ev[i].plugin;
    CU_ASSERT_STRING_EQUAL(version_of(p), "1.0.1");
    CU_ASSERT_STRING_EQUAL(f.ev[i].path, f.path);
    CU_ASSERT(all_on(&f, p));
    while (!served_at(&f, p) && swp_now_ns() - t_write < (uint64_t)W_WAIT_MS * 1000000u)
        sched_yield();
    uint64_t served = served_at(&f, p);
    CU_ASSERT(served > t_write);
    printf("  last write to the first call served by the new build: %.1f ms (debounce 100 ms)\n",
           (double)(served - t_write) / 1e6);
    hk_swap_plugin_state_t s = {.size = sizeof s};
    CU_ASSERT_EQUAL(hk_plugin_swap_state(f.first, &s), HK_STATUS_OK);
    CU_ASSERT_EQUAL(s.module, HK_MODULE_CLOSED);
    hk_select_entry_t e[4];
    size_t n = 0;
    CU_ASSERT_EQUAL(hk_loader_select_explain(f.loader, "hk-cpu@^1", e, 4, &n), HK_STATUS_OK);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT(e[0].plugin == f.first && e[0].verdict == HK_SELECT_SUPERSEDED);
    CU_ASSERT(e[1].plugin == p && e[1].verdict == HK_SELECT_CHOSEN);
    wfx_down(&f);
}

/* Ten builds written in a second, alternately 1.0.1 and 1.0.0: the debounce
 * takes far fewer, and what runs at the end is the last one written. */
static void test_ten_rebuilds(void)
{
    wfx_t f;
    int from = 0;
    CU_ASSERT_FATAL(wfx_up(&f, HK_WATCH_SWAP, 300, 0));
    for (int k = 0; k < 10; k++) {
        rewrite(&f, k % 2 ? SWP_A : SWP_B);
        usleep(100000); /* the pace of the writer under test, not a wait for a result */
    }
    /* The last written is 1.0.0 (k = 9): the first build that file gave,
     * written again, is a new build, and it supersedes the 1.0.1 builds. */
    int i, last = -1;
    while ((i = wait_event(&f, HK_WATCH_SWAPPED, &from)) >= 0) {
        last = i;
        hk_mhandle_state_t s = {.size = sizeof s};
        hk_mhandle_state(f.mh[0], &s);
        if (strcmp(version_of(s.plugin), "1.0.0") == 0 && s.plugin != f.first)
            break;
    }
    CU_ASSERT_FATAL(last >= 0);
    hk_plugin_t *p = f.ev[last].plugin;
    CU_ASSERT_STRING_EQUAL(version_of(p), "1.0.0");
    CU_ASSERT(p != f.first);
    CU_ASSERT(all_on(&f, p));
    CU_ASSERT(p == hk_loader_plugin(f.loader, hk_loader_plugin_count(f.loader) - 1));
    int swaps = 0;
    for (int k = 0; k < f.nev; k++)
        swaps += f.ev[k].kind == HK_WATCH_SWAPPED;
    printf("  10 builds written, %d taken and swapped in\n", swaps);
    CU_ASSERT(swaps >= 1 && swaps < 10);
    wfx_down(&f);
}

/* A copy that stops halfway is refused at the loader's ELF checks; the old
 * build keeps serving, and the complete copy then goes live. */
static void test_halfway(void)
{
    wfx_t f;
    int from = 0;
    struct stat st;
    CU_ASSERT_FATAL(wfx_up(&f, HK_WATCH_SWAP, 100, 0));
    CU_ASSERT_FATAL(stat(SWP_B, &st) == 0);
    CU_ASSERT_EQUAL_FATAL(copy_bytes(SWP_B, f.path, st.st_size / 2), 0);
    int i = wait_event(&f, HK_WATCH_REFUSED, &from);
    CU_ASSERT_FATAL(i >= 0);
    CU_ASSERT_EQUAL(f.ev[i].status, HK_STATUS_LOAD_FAILED);
    CU_ASSERT(strstr(f.ev[i].reason, "open: ") == f.ev[i].reason);
    CU_ASSERT(f.ev[i].plugin == NULL);
    CU_ASSERT(all_on(&f, f.first));
    rewrite(&f, SWP_B);
    expect_event(&f, HK_WATCH_SWAPPED, &from, "1.0.1");
    wfx_down(&f);
}

/* A build that computes wrong fails its verification: refused, never
 * selected again, and the old build keeps serving. */
static void test_fails_verification(void)
{
    wfx_t f;
    int from = 0;
    CU_ASSERT_FATAL(wfx_up(&f, HK_WATCH_SWAP, 100, 0));
    rewrite(&f, SWP_DOUBLE("swp_wrong"));
    int i = expect_event(&f, HK_WATCH_REFUSED, &from, "1.0.2");
    CU_ASSERT(strstr(f.ev[i].reason, "verification") != NULL);
    CU_ASSERT(all_on(&f, f.first));
    hk_plugin_t *sel = NULL;
    CU_ASSERT_EQUAL(hk_loader_select(f.loader, "hk-cpu@^1", &sel), HK_STATUS_OK);
    CU_ASSERT(sel == f.first);
    hk_select_entry_t e[4];
    size_t n = 0;
    hk_loader_select_explain(f.loader, "hk-cpu", e, 4, &n);
    CU_ASSERT(n == 2 && e[1].verdict == HK_SELECT_FAILED
              && strstr(e[1].reason, "failed verification") != NULL);
    wfx_down(&f);
}

/* A build outside the requested range is loaded and verified, not taken. */
static void test_out_of_range(void)
{
    wfx_t f;
    int from = 0;
    CU_ASSERT_FATAL(wfx_up(&f, HK_WATCH_SWAP, 100, 0));
    rewrite(&f, SWP_DOUBLE("swp_major2"));
    int i = expect_event(&f, HK_WATCH_NOT_TAKEN, &from, "2.0.0");
    CU_ASSERT(strstr(f.ev[i].reason, "outside ^1") != NULL);
    CU_ASSERT(all_on(&f, f.first));
    wfx_down(&f);
}

/* The plugin directory deleted under the host: reported, the host keeps
 * computing, and a directory made again with a new build goes live. */
static void test_dir_deleted(void)
{
    wfx_t f;
    int from = 0;
    CU_ASSERT_FATAL(wfx_up(&f, HK_WATCH_SWAP, 100, 0));
    CU_ASSERT_EQUAL(unlink(f.path), 0);
    CU_ASSERT_EQUAL(rmdir(f.dir), 0);
    int i = wait_event(&f, HK_WATCH_DIRECTORY, &from);
    CU_ASSERT_FATAL(i >= 0);
    CU_ASSERT_EQUAL(f.ev[i].status, HK_STATUS_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(f.ev[i].path, f.dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(f.dir, 0700), 0);
    rewrite(&f, SWP_B);
    i = wait_event(&f, HK_WATCH_DIRECTORY, &from);
    CU_ASSERT_FATAL(i >= 0);
    CU_ASSERT_EQUAL(f.ev[i].status, HK_STATUS_OK);
    i = expect_event(&f, HK_WATCH_SWAPPED, &from, "1.0.1");
    CU_ASSERT(all_on(&f, f.ev[i].plugin));
    wfx_down(&f);
}

/* The directory made writable by others: reported, and what is written into
 * it then is not taken until it is the owner's alone again. */
static void test_dir_writable(void)
{
    wfx_t f;
    int from = 0;
    CU_ASSERT_FATAL(wfx_up(&f, HK_WATCH_SWAP, 100, 0));
    CU_ASSERT_EQUAL_FATAL(chmod(f.dir, 0777), 0);
    int i = wait_event(&f, HK_WATCH_DIRECTORY, &from);
    CU_ASSERT_FATAL(i >= 0);
    CU_ASSERT_EQUAL(f.ev[i].status, HK_STATUS_INSECURE);
    CU_ASSERT(strstr(f.ev[i].reason, "writable") != NULL);
    rewrite(&f, SWP_B);
    /* Nothing may come of it: three intervals without an event about the
     * file (the absence of an event can only be waited for this way). */
    usleep(300000);
    pthread_mutex_lock(&f.lock);
    int events = f.nev;
    pthread_mutex_unlock(&f.lock);
    CU_ASSERT_EQUAL(events, from);
    CU_ASSERT(all_on(&f, f.first));
    CU_ASSERT_EQUAL(chmod(f.dir, 0700), 0);
    i = wait_event(&f, HK_WATCH_DIRECTORY, &from);
    CU_ASSERT_FATAL(i >= 0);
    CU_ASSERT_EQUAL(f.ev[i].status, HK_STATUS_OK);
    expect_event(&f, HK_WATCH_SWAPPED, &from, "1.0.1");
    wfx_down(&f);
}

/* HK_WATCH_REPORT: a new build is loaded, verified and reported; the
 * handles move only when the host swaps. */
static void test_report(void)
{
    wfx_t f;
    int from = 0;
    CU_ASSERT_FATAL(wfx_up(&f, HK_WATCH_REPORT, 100, 0));
    rewrite(&f, SWP_B);
    int i = wait_event(&f, HK_WATCH_LOADED, &from);
    CU_ASSERT_FATAL(i >= 0);
    hk_plugin_t *p = f.ev[i].plugin;
    CU_ASSERT_STRING_EQUAL(version_of(p), "1.0.1");
    CU_ASSERT(strstr(f.ev[i].reason, "selects it") != NULL);
    CU_ASSERT(all_on(&f, f.first));
    hk_plugin_t *to = NULL;
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, "hk-cpu@^1", NULL, &to), HK_STATUS_OK);
    CU_ASSERT(to == p && all_on(&f, p));
    wfx_down(&f);
}

/* A host with its own loop: poll the descriptor, process when readable. */
static void test_fd_loop(void)
{
    wfx_t f;
    CU_ASSERT_FATAL(wfx_up(&f, HK_WATCH_SWAP, 100, 1));
    int fd = hk_watch_fd(f.watch);
    CU_ASSERT_FATAL(fd >= 0);
    rewrite(&f, SWP_B);
    uint64_t t0 = swp_now_ns();
    int swapped = 0;
    while (!swapped && swp_now_ns() - t0 < (uint64_t)W_WAIT_MS * 1000000u) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 1000) == 1)
            CU_ASSERT_EQUAL(hk_watch_process(f.watch), HK_STATUS_OK);
        pthread_mutex_lock(&f.lock);
        for (int k = 0; k < f.nev; k++)
            swapped |= f.ev[k].kind == HK_WATCH_SWAPPED;
        pthread_mutex_unlock(&f.lock);
    }
    CU_ASSERT(swapped);
    /* hk_watch_process from the callback: refused, nothing done. */
    CU_ASSERT_EQUAL(f.in_cb_process, HK_STATUS_BUSY);
    wfx_down(&f);
}

/* Bad arguments: statuses and reasons, nothing made. */
static void test_bad_input(void)
{
    hk_loader_t *loader = NULL;
    hk_watch_t *w = (hk_watch_t *)1;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/watchbad-XXXXXX", HK_SWAP_PLUGIN_DIR);
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1, .default_dir = dir};
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    hk_watch_options_t wo = {.size = sizeof wo, .policy = HK_WATCH_SWAP, .request = "hk-cpu"};
    CU_ASSERT_EQUAL(hk_watch_create(NULL, &wo, &w), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_watch_create(loader, NULL, &w), HK_STATUS_NULL_POINTER);
    CU_ASSERT(w == NULL);
    CU_ASSERT_EQUAL(hk_watch_create(loader, &wo, NULL), HK_STATUS_NULL_POINTER);
    struct { hk_watch_options_t o; const char *text; } bad[] = {
        {{.size = 4, .policy = HK_WATCH_SWAP, .request = "hk-cpu"}, "opts->size"},
        {{.size = sizeof wo, .policy = 7, .request = "hk-cpu"}, "policy 7"},
        {{.size = sizeof wo, .policy = HK_WATCH_SWAP}, "needs a request"},
        {{.size = sizeof wo, .policy = HK_WATCH_SWAP, .request = "hk-cpu@^^1"}, "bad range"},
        {{.size = sizeof wo, .policy = HK_WATCH_REPORT, .debounce_ms = 60001}, "a minute"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CU_ASSERT_EQUAL(hk_watch_create(loader, &bad[i].o, &w), HK_STATUS_INVALID_VALUE);
        CU_ASSERT(w == NULL);
        CU_ASSERT(strstr(hk_loader_last_error(loader), bad[i].text) != NULL);
    }
    CU_ASSERT_EQUAL(hk_watch_process(NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_watch_start(NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_watch_destroy(NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_watch_fd(NULL), -1);
    CU_ASSERT_STRING_EQUAL(hk_watch_kind_name(HK_WATCH_SWAPPED), "swapped");
    CU_ASSERT_STRING_EQUAL(hk_watch_kind_name((hk_watch_kind_t)99), "unknown");
    /* A live watch keeps its loader, and starts once. */
    CU_ASSERT_EQUAL_FATAL(hk_watch_create(loader, &wo, &w), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_watch_start(w), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_watch_start(w), HK_STATUS_BUSY);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_BUSY);
    CU_ASSERT(strstr(hk_loader_last_error(loader), "watch") != NULL);
    CU_ASSERT_EQUAL(hk_watch_destroy(w), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    /* No directory to watch. */
    hk_loader_options_t none = {.size = sizeof none, .ignore_env = 1};
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&none, &loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_watch_create(loader, &wo, &w), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT(strstr(hk_loader_last_error(loader), "no directory") != NULL);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    rmdir(dir);
}

/* hk-host watch as a user runs it: a new build written while it computes
 * goes live, the event and the swap's line printed, every call right. */
static void test_host_watch(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 16], cmd[3 * PATH_MAX], line[2048];
    snprintf(dir, sizeof dir, "%s/watchhost-XXXXXX", HK_SWAP_PLUGIN_DIR);
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/hk-cpu.so", dir);
    CU_ASSERT_EQUAL_FATAL(copy_bytes(SWP_A, path, -1), 0);
    snprintf(cmd, sizeof cmd, "env HK_PLUGIN_PATH=%s %s watch -r 'hk-cpu@^1' -k 1 -s 60 -t 4 "
             "-n 1000 -D 100 2>&1", dir, HK_TEST_HOST);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_FATAL(p != NULL);
    int watching = 0, swapped = 0, live = 0, summary = 0, times = 0;
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        if (strncmp(line, "watch: watching the search path", 31) == 0 && !watching++)
            CU_ASSERT_EQUAL(copy_bytes(SWP_B, path, -1), 0);
        swapped |= strstr(line, "watch: swapped ") && strstr(line, "(hk-cpu 1.0.1)");
        live |= strstr(line, "live: the file's last write to the swap's return") != NULL;
        summary |= strstr(line, "wrong 0, failed 0; builds: live 1,") != NULL;
        times |= strncmp(line, "watch: call time (", 18) == 0;
    }
    CU_ASSERT_EQUAL(pclose(p), 0);
    CU_ASSERT(watching && swapped && live && summary && times);
    unlink(path);
    rmdir(dir);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("watch", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"a build copied in place over the loaded file goes live", test_in_place},
        {"ten builds in a second: the last one runs", test_ten_rebuilds},
        {"a copy stopped halfway is refused; the old build serves", test_halfway},
        {"a build that fails verification is refused and never selected", test_fails_verification},
        {"a build outside the requested range is not taken", test_out_of_range},
        {"the plugin directory deleted, then made again", test_dir_deleted},
        {"the directory made writable by others: refused until fixed", test_dir_writable},
        {"report policy: loaded and verified, the host swaps", test_report},
        {"a host's own poll loop", test_fd_loop},
        {"bad input", test_bad_input},
        {"hk-host watch", test_host_watch},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    return 0;
}
