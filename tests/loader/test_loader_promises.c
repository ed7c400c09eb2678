/* The [thread-safe] promises of hk_loader.h, hk_semver.h, hk_status_text.h,
 * hk_swap.h and hk_watch.h that no other test holds to several threads at
 * once: 8 threads start together at a barrier, call the functions in a loop
 * on shared objects (one loader, one plugin, one movable handle, one watch)
 * and check every answer against what one thread got before they started.
 * hk-cpu is the plugin throughout; the loader loads it without the probe
 * process so that the rounds stay cheap. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_blas1.h"
#include "hk_loader.h"
#include "hk_semver.h"
#include "hk_status_text.h"
#include "hk_swap.h"
#include "hk_crowd.h"
#include "hk_test.h"
#include "hk_watch.h"
#include "test_loader_util.h"

#define THREADS 8
#define ROUNDS 500

/* ---- the harness: 8 threads, one start, every failure counted ---- */

typedef hk_crowd_t run_t;
typedef hk_crowd_arg_t arg_t;
#define EXPECT HK_CROWD_EXPECT

/* Runs fn on THREADS threads released together; none may see a wrong answer. */
static void run_threads(run_t *run, void *(*fn)(void *))
{
    hk_crowd_run(run, THREADS, fn);
}

static hk_loader_t *new_loader(const char *dir)
{
    hk_loader_options_t o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.ignore_env = 1;
    o.default_dir = dir;
    o.isolation = HK_ISOLATION_OFF;
    hk_loader_t *loader = NULL;
    return hk_loader_create(&o, &loader) == HK_STATUS_OK ? loader : NULL;
}

/* ---- hk_loader_create, open, find and destroy: a loader per thread ---- */

static void *own_loader_worker(void *p)
{
    arg_t *a = p;
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS / 10; r++) {
        hk_loader_t *loader = new_loader(NULL);
        EXPECT(loader != NULL, "hk_loader_create");
        if (!loader)
            continue;
        hk_plugin_t *p1 = NULL;
        EXPECT(hk_loader_open(loader, HK_TEST_CPU_PLUGIN, &p1) == HK_STATUS_OK && p1,
               "hk_loader_open");
        EXPECT(hk_loader_find(loader, "hk-cpu") == p1, "hk_loader_find");
        EXPECT(hk_loader_plugin_count(loader) == 1 && hk_loader_report_count(loader) == 1,
               "counts");
        EXPECT(hk_loader_destroy(loader) == HK_STATUS_OK, "hk_loader_destroy");
    }
    return NULL;
}

static void test_loaders_per_thread(void)
{
    run_t run;
    run_threads(&run, own_loader_worker);
}

/* ---- one loader, one plugin: every lookup and accessor at once ---- */

/* What one thread saw before the others started. */
static struct {
    hk_loader_t *loader;
    hk_plugin_t *cpu;
    const char *name, *version, *path, *last_error;
    uint32_t abi, flags;
    const hk_vtable_t *vt;
    size_t reports;
    const hk_load_report_t *report[2];
    hk_negotiate_fn negotiate;
    hk_negotiate_answer_t answer;
    const void *blas_storage;     /* get_table's static table */
    const char *table_names[8];
    size_t tables;
} one;

/* Two answers say the same (field by field: the padding is whatever the
 * plugin's copy held). */
static int same_answer(const hk_negotiate_answer_t *x, const hk_negotiate_answer_t *y)
{
    return x->header.struct_type == y->header.struct_type &&
           x->header.struct_size == y->header.struct_size &&
           x->header.struct_version == y->header.struct_version &&
           x->abi_version == y->abi_version && x->flags == y->flags && x->name == y->name &&
           x->version == y->version && x->vtable == y->vtable;
}

static void *lookup_worker(void *p)
{
    arg_t *a = p;
    hk_plugin_t *cpu = one.cpu;
    pthread_barrier_wait(&a->run->start);
    /* The first calls of hk_plugin_table race each other: it makes its copy
     * at the first call, and every thread must get that one copy. */
    const void *table = hk_plugin_table(cpu, HK_TABLE_BLAS1_V1);
    int r = 0;
    EXPECT(table != NULL, "hk_plugin_table");
    for (r = 0; r < ROUNDS; r++) {
        EXPECT(hk_plugin_table(cpu, HK_TABLE_BLAS1_V1) == table, "hk_plugin_table: one copy");
        EXPECT(hk_loader_plugin_count(one.loader) == 1 &&
                   hk_loader_plugin(one.loader, 0) == cpu &&
                   hk_loader_plugin(one.loader, 1) == NULL, "plugin list");
        EXPECT(hk_loader_find(one.loader, "hk-cpu") == cpu &&
                   hk_loader_find(one.loader, "tp-nullvt") == NULL, "hk_loader_find");
        EXPECT(hk_loader_report_count(one.loader) == one.reports &&
                   hk_loader_report(one.loader, 0) == one.report[0] &&
                   hk_loader_report(one.loader, 1) == one.report[1] &&
                   hk_loader_report(one.loader, one.reports) == NULL, "reports");
        EXPECT(strcmp(hk_loader_last_error(one.loader), one.last_error) == 0,
               "hk_loader_last_error");
        EXPECT(hk_plugin_name(cpu) == one.name && hk_plugin_version(cpu) == one.version &&
                   hk_plugin_path(cpu) == one.path && hk_plugin_abi(cpu) == one.abi &&
                   hk_plugin_flags(cpu) == one.flags, "plugin accessors");
        EXPECT(hk_plugin_vtable(cpu) == one.vt, "hk_plugin_vtable");
        hk_blas1_v1_t blas;
        EXPECT(hk_plugin_get_table(cpu, HK_TABLE_BLAS1_V1, &blas, sizeof blas) == HK_STATUS_OK &&
                   blas.size == sizeof blas && blas.saxpy != NULL, "hk_plugin_get_table");
        EXPECT(hk_plugin_get_table(cpu, "hk.none/1", &blas, sizeof blas) ==
                   HK_STATUS_NOT_FOUND, "hk_plugin_get_table of an absent table");
        hk_plugin_acquire(cpu);
        EXPECT(strcmp(hk_load_stage_name(HK_STAGE_NEGOTIATE), "negotiate") == 0 &&
                   strcmp(hk_select_verdict_name(HK_SELECT_SUPERSEDED), "superseded") == 0,
               "stage and verdict names");
        hk_plugin_release(cpu);

        /* The core vtable's [thread-safe] slots of hk-cpu. */
        const void *t = NULL;
        const char *name = NULL;
        EXPECT(one.vt->get_table(HK_TABLE_BLAS1_V1, &t) == HK_STATUS_OK &&
                   t == one.blas_storage, "get_table");
        EXPECT(one.vt->get_table("hk.none/1", &t) == HK_STATUS_NOT_FOUND && t == NULL,
               "get_table of an absent table");
        size_t i = (size_t)(r + a->id) % (one.tables + 1);
        hk_status_t st = one.vt->enum_tables(i, &name);
        EXPECT(i < one.tables ? st == HK_STATUS_OK && name == one.table_names[i]
                              : st == HK_STATUS_NOT_FOUND, "enum_tables");

        /* A failed create of this thread's own, read back through the
         * loader and through last_error(NULL): the thread's own line. */
        hk_create_info_t ci = {sizeof ci, 100 + a->id, 0};
        hk_handle_t *h = NULL;
        char want[128], buf[128];
        size_t needed = 0;
        snprintf(want, sizeof want, "handle_create: hk-cpu has one device (0); asked for %d",
                 100 + a->id);
        EXPECT(one.vt->handle_create(&ci, &h) == HK_STATUS_INVALID_DEVICE && !h, "create");
        EXPECT(hk_plugin_last_error_copy(cpu, NULL, buf, sizeof buf, &needed) == HK_STATUS_OK &&
                   strcmp(buf, want) == 0 && needed == strlen(want) + 1,
               "hk_plugin_last_error_copy: the thread's own create");
        EXPECT(strcmp(one.vt->last_error(NULL), want) == 0, "last_error(NULL)");

        /* The entry point, as a second host in the process would call it. */
        hk_negotiate_request_t req = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1},
                                      HK_ABI_VERSION(HK_ABI_MAJOR, 0), HK_ABI_CURRENT, NULL, NULL};
        hk_negotiate_answer_t ans;
        memset(&ans, 0, sizeof ans);
        ans.header.struct_size = sizeof ans;
        EXPECT(one.negotiate(&req, &ans) == HK_STATUS_OK &&
                   same_answer(&ans, &one.answer), "hk_plugin_negotiate");
    }
    return NULL;
}

static void test_one_loader_lookups(void)
{
    memset(&one, 0, sizeof one);
    one.loader = new_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one.loader);
    CU_ASSERT_EQUAL_FATAL(hk_loader_open(one.loader, HK_TEST_CPU_PLUGIN, &one.cpu), HK_STATUS_OK);
    /* a refusal first, so that the last error and a second report are there */
    char refused[4096];
    snprintf(refused, sizeof refused, "%s/tp_nullvt.so", HK_TEST_PLUGIN_DIR);
    CU_ASSERT_NOT_EQUAL(hk_loader_open(one.loader, refused, NULL), HK_STATUS_OK);
    one.last_error = strdup(hk_loader_last_error(one.loader));
    CU_ASSERT_PTR_NOT_NULL_FATAL(one.last_error);
    CU_ASSERT_NOT_EQUAL(one.last_error[0], '\0');
    one.reports = hk_loader_report_count(one.loader);
    CU_ASSERT_EQUAL_FATAL(one.reports, 2);
    one.report[0] = hk_loader_report(one.loader, 0);
    one.report[1] = hk_loader_report(one.loader, 1);
    one.name = hk_plugin_name(one.cpu);
    one.version = hk_plugin_version(one.cpu);
    one.path = hk_plugin_path(one.cpu);
    one.abi = hk_plugin_abi(one.cpu);
    one.flags = hk_plugin_flags(one.cpu);
    one.vt = hk_plugin_vtable(one.cpu);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one.vt);
    CU_ASSERT_EQUAL_FATAL(one.vt->get_table(HK_TABLE_BLAS1_V1, &one.blas_storage), HK_STATUS_OK);
    while (one.tables < 8 && one.vt->enum_tables(one.tables, &one.table_names[one.tables]) ==
                                 HK_STATUS_OK)
        one.tables++;
    CU_ASSERT(one.tables >= 2);
    /* The entry point of the plugin file, opened once more by the dynamic
     * loader (the loader maps its own snapshot, so this is a second copy). */
    void *dl = dlopen(HK_TEST_CPU_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dl);
    *(void **)&one.negotiate = dlsym(dl, HK_ENTRY_SYMBOL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one.negotiate);
    hk_negotiate_request_t req = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1},
                                  HK_ABI_VERSION(HK_ABI_MAJOR, 0), HK_ABI_CURRENT, NULL, NULL};
    memset(&one.answer, 0, sizeof one.answer);
    one.answer.header.struct_size = sizeof one.answer;
    CU_ASSERT_EQUAL_FATAL(one.negotiate(&req, &one.answer), HK_STATUS_OK);

    run_t run;
    run_threads(&run, lookup_worker);

    dlclose(dl);
    free((void *)one.last_error);
    CU_ASSERT_EQUAL(hk_loader_destroy(one.loader), HK_STATUS_OK);
}

/* ---- scans of one directory from 8 threads, while others look up ---- */

static void *scan_worker(void *p)
{
    arg_t *a = p;
    hk_loader_t *loader = a->run->shared;
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS / 20; r++) {
        EXPECT(hk_loader_scan(loader) == HK_STATUS_OK, "hk_loader_scan");
        hk_plugin_t *cpu = hk_loader_find(loader, "hk-cpu");
        EXPECT(cpu && strcmp(hk_plugin_name(cpu), "hk-cpu") == 0, "hk_loader_find after scan");
        /* one file, loaded once, reported once, however many scans */
        EXPECT(hk_loader_plugin_count(loader) == 1 && hk_loader_report_count(loader) == 1,
               "one plugin and one report");
        hk_plugin_t *sel = NULL;
        EXPECT(hk_loader_select(loader, "hk-cpu@^1", &sel) == HK_STATUS_OK && sel == cpu,
               "hk_loader_select");
    }
    return NULL;
}

static void test_scans_from_threads(void)
{
    char dir[4096], path[4096];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof dir), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(HK_TEST_CPU_PLUGIN, dir, "hk-cpu.so", 0755, path, sizeof path),
                          0);
    run_t run;
    run.shared = new_loader(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run.shared);
    run_threads(&run, scan_worker);
    CU_ASSERT_EQUAL(hk_loader_plugin_count(run.shared), 1);
    CU_ASSERT_EQUAL(hk_loader_destroy(run.shared), HK_STATUS_OK);
    tl_rmtree(dir);
}

/* ---- hk_semver.h and hk_status_text.h: no state, so any answer of a
 * thread must be the answer of one thread alone ---- */

static const char *const versions[] = {"1.0.0", "1.2.3-rc.1+b5", "2.0.0-alpha", "01.2.3",
                                       "1.10.0", "1.2", "0.0.1-0.a.b"};
static const char *const ranges[] = {"^1", ">=1.0, <2", "~1.2.3-rc", "*", "=2.0.0-alpha",
                                     "^x", "<=1.10.0"};
#define NV (sizeof versions / sizeof versions[0])
#define NR (sizeof ranges / sizeof ranges[0])

static struct {
    hk_status_t vst[NV], rst[NR];
    char vwhy[NV][128], rwhy[NR][128];
    hk_semver_t v[NV];
    hk_semver_range_t range[NR];
    int cmp[NV][NV], match[NR][NV], skips[NR][NV];
    const char *sname[HK_STATUS__COUNT + 1], *sstring[HK_STATUS__COUNT + 1];
} ref;

static void semver_answers(hk_status_t *vst, char (*vwhy)[128], hk_semver_t *v, hk_status_t *rst,
                           char (*rwhy)[128], hk_semver_range_t *range)
{
    for (size_t i = 0; i < NV; i++)
        vst[i] = hk_semver_parse(versions[i], &v[i], vwhy[i], sizeof vwhy[i]);
    for (size_t i = 0; i < NR; i++)
        rst[i] = hk_semver_range_parse_n(ranges[i], strlen(ranges[i]), &range[i], rwhy[i],
                                         sizeof rwhy[i]);
}

static void *semver_worker(void *p)
{
    arg_t *a = p;
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS; r++) {
        hk_status_t vst[NV], rst[NR];
        char vwhy[NV][128], rwhy[NR][128];
        hk_semver_t v[NV];
        hk_semver_range_t range[NR];
        semver_answers(vst, vwhy, v, rst, rwhy, range);
        for (size_t i = 0; i < NV; i++) {
            EXPECT(vst[i] == ref.vst[i] && strcmp(vwhy[i], ref.vwhy[i]) == 0, "semver parse");
            for (size_t j = 0; j < NV && vst[i] == HK_STATUS_OK; j++)
                EXPECT(vst[j] != HK_STATUS_OK || hk_semver_compare(&v[i], &v[j]) == ref.cmp[i][j],
                       "hk_semver_compare");
        }
        for (size_t i = 0; i < NR; i++) {
            EXPECT(rst[i] == ref.rst[i] && strcmp(rwhy[i], ref.rwhy[i]) == 0, "range parse");
            for (size_t j = 0; j < NV && rst[i] == HK_STATUS_OK; j++)
                EXPECT(vst[j] != HK_STATUS_OK ||
                           (hk_semver_range_match(&range[i], &v[j]) == ref.match[i][j] &&
                            hk_semver_range_skips_pre(&range[i], &v[j]) == ref.skips[i][j]),
                       "range match");
        }
        for (int s = 0; s <= HK_STATUS__COUNT; s++)
            EXPECT(strcmp(hk_status_name(s), ref.sname[s]) == 0 &&
                       strcmp(hk_status_string(s), ref.sstring[s]) == 0, "status text");
    }
    return NULL;
}

static void test_semver_and_status_text(void)
{
    memset(&ref, 0, sizeof ref);
    semver_answers(ref.vst, ref.vwhy, ref.v, ref.rst, ref.rwhy, ref.range);
    int good = 0;
    for (size_t i = 0; i < NV; i++) {
        good += ref.vst[i] == HK_STATUS_OK;
        for (size_t j = 0; j < NV; j++)
            ref.cmp[i][j] = hk_semver_compare(&ref.v[i], &ref.v[j]);
    }
    CU_ASSERT(good >= 4 && good < (int)NV); /* some of each, so both paths run */
    for (size_t i = 0; i < NR; i++)
        for (size_t j = 0; j < NV; j++) {
            ref.match[i][j] = hk_semver_range_match(&ref.range[i], &ref.v[j]);
            ref.skips[i][j] = hk_semver_range_skips_pre(&ref.range[i], &ref.v[j]);
        }
    for (int s = 0; s <= HK_STATUS__COUNT; s++) {
        ref.sname[s] = hk_status_name(s);
        ref.sstring[s] = hk_status_string(s);
        CU_ASSERT_FATAL(ref.sname[s] && ref.sstring[s]);
    }
    run_t run;
    run_threads(&run, semver_worker);
}

/* ---- one movable handle: pins, states and statistics at once ---- */

static struct {
    hk_loader_t *loader;
    hk_plugin_t *cpu;
    hk_mhandle_t *mh;
    const char *stat_name[HK_SWAP_STAT__COUNT + 1];
} mv;

static void *mhandle_worker(void *p)
{
    arg_t *a = p;
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS; r++) {
        float x[64], y[64], alpha = 2;
        for (int i = 0; i < 64; i++) {
            x[i] = (float)(i + a->id);
            y[i] = (float)r;
        }
        hk_mhandle_pin_t pin;
        memset(&pin, 0, sizeof pin);
        pin.size = sizeof pin;
        hk_status_t st = hk_mhandle_pin(mv.mh, HK_TABLE_BLAS1_V1, &pin);
        EXPECT(st == HK_STATUS_OK && pin.plugin == mv.cpu && pin.handle && pin.table,
               "hk_mhandle_pin");
        if (st == HK_STATUS_OK) {
            const hk_blas1_v1_t *b = pin.table;
            EXPECT(b->saxpy(pin.handle, 64, &alpha, x, 1, y, 1) == HK_STATUS_OK,
                   "saxpy on the pinned handle");
            int bad = 0;
            for (int i = 0; i < 64; i++)
                bad += y[i] != (float)r + 2 * x[i];
            EXPECT(!bad, "saxpy result");
            hk_mhandle_unpin(&pin);
            EXPECT(pin.internal[0] == NULL, "unpinned");
            hk_mhandle_unpin(&pin); /* a second unpin does nothing */
        }
        hk_mhandle_state_t ms = {.size = sizeof ms};
        EXPECT(hk_mhandle_state(mv.mh, &ms) == HK_STATUS_OK && ms.plugin == mv.cpu &&
                   ms.generation == 0 && ms.inflight <= THREADS, "hk_mhandle_state");
        hk_swap_state_t ss = {.size = sizeof ss};
        EXPECT(hk_loader_swap_state(mv.loader, &ss) == HK_STATUS_OK &&
                   ss.phase == HK_SWAP_IDLE && ss.handles == 1 && ss.inflight <= THREADS,
               "hk_loader_swap_state");
        hk_swap_plugin_state_t ps = {.size = sizeof ps};
        EXPECT(hk_plugin_swap_state(mv.cpu, &ps) == HK_STATUS_OK &&
                   ps.module == HK_MODULE_OPEN && ps.handles == 1, "hk_plugin_swap_state");
        uint64_t v[HK_SWAP_STAT__COUNT];
        size_t known = 0;
        EXPECT(hk_loader_swap_stats(mv.loader, v, HK_SWAP_STAT__COUNT, &known) == HK_STATUS_OK &&
                   known >= HK_SWAP_STAT__COUNT && v[HK_SWAP_STAT_SWAPS] == 0 &&
                   v[HK_SWAP_STAT_REFUSED] == 0, "hk_loader_swap_stats");
        int s = (r + a->id) % (HK_SWAP_STAT__COUNT + 1);
        EXPECT(strcmp(hk_swap_stat_name((hk_swap_stat_t)s), mv.stat_name[s]) == 0,
               "hk_swap_stat_name");
    }
    return NULL;
}

static void test_one_mhandle(void)
{
    memset(&mv, 0, sizeof mv);
    mv.loader = new_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mv.loader);
    CU_ASSERT_EQUAL_FATAL(hk_loader_open(mv.loader, HK_TEST_CPU_PLUGIN, &mv.cpu), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(mv.cpu, NULL, &mv.mh), HK_STATUS_OK);
    for (int s = 0; s <= HK_SWAP_STAT__COUNT; s++) {
        mv.stat_name[s] = hk_swap_stat_name((hk_swap_stat_t)s);
        CU_ASSERT_PTR_NOT_NULL_FATAL(mv.stat_name[s]);
    }
    run_t run;
    run_threads(&run, mhandle_worker);
    hk_mhandle_state_t ms = {.size = sizeof ms};
    CU_ASSERT_EQUAL(hk_mhandle_state(mv.mh, &ms), HK_STATUS_OK);
    CU_ASSERT_EQUAL(ms.inflight, 0);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mv.mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(mv.loader), HK_STATUS_OK);
}

/* ---- watches of one loader: create, fd and start from 8 threads ---- */

static struct {
    hk_loader_t *loader;
    hk_watch_t *shared;
    int shared_fd;
    hk_watch_t *made[THREADS];
} wt;

static void *watch_worker(void *p)
{
    arg_t *a = p;
    int r = 0;
    hk_watch_options_t wo = {sizeof wo, HK_WATCH_REPORT, NULL, 0, NULL, NULL, NULL};
    pthread_barrier_wait(&a->run->start);
    /* Each thread makes a watch of its own on the one loader... */
    EXPECT(hk_watch_create(wt.loader, &wo, &wt.made[a->id]) == HK_STATUS_OK &&
               wt.made[a->id] && hk_watch_fd(wt.made[a->id]) >= 0, "hk_watch_create");
    /* ...and all start the shared one: exactly one start wins. */
    hk_status_t st = hk_watch_start(wt.shared);
    EXPECT(st == HK_STATUS_OK || st == HK_STATUS_BUSY, "hk_watch_start");
    if (st == HK_STATUS_OK)
        atomic_fetch_add(&a->run->ok_count, 1);
    for (r = 0; r < ROUNDS; r++)
        EXPECT(hk_watch_fd(wt.shared) == wt.shared_fd, "hk_watch_fd");
    return NULL;
}

static void test_watches_of_one_loader(void)
{
    char dir[4096];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof dir), 0);
    memset(&wt, 0, sizeof wt);
    wt.loader = new_loader(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wt.loader);
    hk_watch_options_t wo = {sizeof wo, HK_WATCH_REPORT, NULL, 0, NULL, NULL, NULL};
    CU_ASSERT_EQUAL_FATAL(hk_watch_create(wt.loader, &wo, &wt.shared), HK_STATUS_OK);
    wt.shared_fd = hk_watch_fd(wt.shared);
    CU_ASSERT(wt.shared_fd >= 0);
    run_t run;
    run_threads(&run, watch_worker);
    CU_ASSERT_EQUAL(atomic_load(&run.ok_count), 1);
    int fds_distinct = 1;
    for (int i = 0; i < THREADS; i++)
        for (int j = 0; j < i; j++)
            fds_distinct &= !wt.made[i] || !wt.made[j] ||
                            hk_watch_fd(wt.made[i]) != hk_watch_fd(wt.made[j]);
    CU_ASSERT(fds_distinct);
    for (int i = 0; i < THREADS; i++)
        CU_ASSERT_EQUAL(hk_watch_destroy(wt.made[i]), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_watch_destroy(wt.shared), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(wt.loader), HK_STATUS_OK);
    tl_rmtree(dir);
}

/* ---- the host's log sink, called by the loader from 8 threads ---- */

typedef struct log_count {
    atomic_int lines, bad;
    char path[THREADS][512]; /* the refused candidate each thread opens */
} log_count_t;

static void count_line(void *user, hk_log_level_t level, const char *msg)
{
    log_count_t *lc = user;
    atomic_fetch_add(&lc->lines, 1);
    if (level != HK_LOG_WARN || !msg || !strstr(msg, "tp_nullvt") || strchr(msg, '\n'))
        atomic_fetch_add(&lc->bad, 1);
}

static void *log_worker(void *p)
{
    arg_t *a = p;
    hk_loader_t *loader = ((void **)a->run->shared)[0];
    log_count_t *lc = ((void **)a->run->shared)[1];
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS; r++) {
        hk_plugin_t *p2 = NULL;
        EXPECT(hk_loader_open(loader, lc->path[a->id], &p2) == HK_STATUS_NULL_POINTER && !p2,
               "a refused candidate's status");
    }
    return NULL;
}

/* 8 threads each open their own refused candidate again and again: the
 * loader calls the host's log sink from them, one warning line per
 * candidate (a candidate is reported once per loader), whole each time. */
static void test_log_from_threads(void)
{
    char dir[512];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, sizeof dir), 0);
    log_count_t lc;
    memset(&lc, 0, sizeof lc);
    for (int i = 0; i < THREADS; i++) {
        char name[64];
        snprintf(name, sizeof name, "tp_nullvt_%d.so", i);
        CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_nullvt.so"), dir, name, 0644, lc.path[i],
                                      sizeof lc.path[i]), 0);
    }
    hk_loader_options_t o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.ignore_env = 1;
    o.isolation = HK_ISOLATION_OFF;
    o.log = count_line;
    o.log_user = &lc;
    hk_loader_t *loader = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    void *shared[2] = {loader, &lc};
    hk_crowd_t run = {.shared = shared};
    hk_crowd_run(&run, THREADS, log_worker);
    CU_ASSERT_EQUAL(atomic_load(&lc.lines), THREADS);
    CU_ASSERT_EQUAL(atomic_load(&lc.bad), 0);
    CU_ASSERT_EQUAL(hk_loader_report_count(loader), THREADS);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tl_rmtree(dir);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("loader promises from 8 threads", NULL, NULL);
    hk_test_add(s, "create, open, find and destroy a loader each", test_loaders_per_thread);
    hk_test_add(s, "one loader and plugin: lookups, accessors, tables, entry point, errors",
                test_one_loader_lookups);
    hk_test_add(s, "one loader: scan and select", test_scans_from_threads);
    hk_test_add(s, "hk_semver.h and hk_status_text.h", test_semver_and_status_text);
    hk_test_add(s, "one movable handle: pin, unpin, states, statistics", test_one_mhandle);
    hk_test_add(s, "one loader: watch create, fd and start", test_watches_of_one_loader);
    hk_test_add(s, "the host's log sink: one line per refused candidate, from 8 threads",
                test_log_from_threads);
    return 0;
}
