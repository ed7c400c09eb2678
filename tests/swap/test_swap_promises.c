/* [thread-safe] and [handle-safe] promises of the swap that the other
 * programs only use from one thread at a time: hk.selfcheck/1's run slot
 * on one handle from 8 threads (gen, a right build and a wrong one), and
 * hk_loader_swap_prepare from 8 threads at once on one loader, each
 * committing its own prepared swap while a movable handle computes. */
#include <stdio.h>
#include <string.h>

#include "hk_crowd.h"
#include "hk_selfcheck.h"
#include "swap_test.h"

#define THREADS 8
#define ROUNDS 50
#define SWAPS 6 /* each thread's prepared swaps */

typedef hk_crowd_arg_t arg_t;
#define EXPECT HK_CROWD_EXPECT

/* What the self-check threads share: one handle of one build, its table,
 * and the status and reason its run must give. */
typedef struct check_run {
    hk_handle_t *h;
    hk_selfcheck_v1_t sc;
    hk_status_t want;
    const char *want_why; /* in the reason; "" when OK */
} check_run_t;

static void *check_worker(void *p)
{
    arg_t *a = p;
    check_run_t *c = a->run->shared;
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS; r++) {
        char why[256] = "x";
        hk_status_t st = c->sc.run(c->h, why, sizeof why);
        EXPECT(st == c->want, "run: wrong status");
        EXPECT(c->want != HK_STATUS_OK || why[0] == '\0' || strcmp(why, "x") == 0,
               "run: a reason when OK");
        EXPECT(c->want == HK_STATUS_OK || strstr(why, c->want_why), "run: wrong reason");
    }
    return NULL;
}

/* 8 threads run one handle's self-check of build file; every run gives
 * want, with want_why in its reason. */
static void self_checks(const char *file, hk_status_t want, const char *want_why)
{
    hk_loader_t *loader = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = swp_open(loader, file);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    check_run_t c = {.want = want, .want_why = want_why};
    CU_ASSERT_EQUAL_FATAL(hk_plugin_get_table(p, HK_TABLE_SELFCHECK_V1, &c.sc, sizeof c.sc),
                          HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.sc.run);
    CU_ASSERT_EQUAL_FATAL(hk_plugin_vtable(p)->handle_create(NULL, &c.h), HK_STATUS_OK);
    hk_crowd_t run = {.shared = &c};
    hk_crowd_run(&run, THREADS, check_worker);
    CU_ASSERT_EQUAL(hk_plugin_vtable(p)->handle_destroy(c.h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

static void test_selfcheck_from_threads(void)
{
    self_checks(HK_SWAP_PLUGIN_DIR "/gen-a.so", HK_STATUS_OK, "");
    self_checks(HK_SWAP_PLUGIN_DIR "/gen-wrong.so", HK_STATUS_INTERNAL,
                "add(-3, -6) gave -8, expected -9");
}

/* What the preparing threads share: the loader and its movable handle. */
typedef struct prep_run {
    hk_loader_t *loader;
    hk_mhandle_t *mh;
    atomic_int stop;
} prep_run_t;

static void *prep_worker(void *p)
{
    arg_t *a = p;
    prep_run_t *s = a->run->shared;
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < SWAPS; r++) {
        hk_swap_prepared_t *prep = NULL;
        const char *to = (a->id + r) % 2 ? SWP_B : SWP_A;
        hk_status_t st = hk_loader_swap_prepare(s->loader, to, NULL, &prep);
        EXPECT(st == HK_STATUS_OK && prep, "prepare refused");
        if (st != HK_STATUS_OK || !prep)
            continue;
        hk_plugin_t *got = NULL;
        EXPECT(hk_loader_swap_commit(prep, &got) == HK_STATUS_OK, "commit refused");
        EXPECT(got && strcmp(hk_plugin_path(got), to) == 0, "commit: another build");
        atomic_fetch_add(&a->run->ok_count, 1);
    }
    return NULL;
}

/* The movable handle computes (saxpy checked) until the preparers end. */
static void *compute(void *p)
{
    prep_run_t *s = p;
    hk_blas1_v1_t b;
    CU_ASSERT_EQUAL(hk_mhandle_get_table(HK_TABLE_BLAS1_V1, &b, sizeof b), HK_STATUS_OK);
    hk_handle_t *h = hk_mhandle_handle(s->mh);
    long bad = 0;
    while (!atomic_load(&s->stop)) {
        float x[64], y[64], two = 2.0f;
        for (int i = 0; i < 64; i++)
            x[i] = (float)i, y[i] = 1.0f;
        if (b.saxpy(h, 64, &two, x, 1, y, 1) != HK_STATUS_OK)
            bad++;
        for (int i = 0; i < 64; i++)
            bad += y[i] != 1.0f + 2.0f * (float)i;
    }
    return (void *)bad;
}

static void test_prepare_from_threads(void)
{
    prep_run_t s = {.loader = swp_loader()};
    atomic_init(&s.stop, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s.loader);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(s.loader, SWP_A, NULL, &s.mh), HK_STATUS_OK);
    pthread_t worker;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&worker, NULL, compute, &s), 0);
    hk_crowd_t run = {.shared = &s};
    hk_crowd_run(&run, THREADS, prep_worker);
    atomic_store(&s.stop, 1);
    void *bad = NULL;
    pthread_join(worker, &bad);
    CU_ASSERT_PTR_NULL(bad); /* no wrong or failed call through the swaps */
    CU_ASSERT_EQUAL(atomic_load(&run.ok_count), THREADS * SWAPS);
    swp_state_t st = swp_state(s.loader);
    CU_ASSERT_EQUAL(st.refused, 0);
    CU_ASSERT_EQUAL(st.phase, HK_SWAP_IDLE);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(s.mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(s.loader), HK_STATUS_OK);
}

void swp_register_promises(void)
{
    static const hk_test_case_t tests[] = {
        {"hk.selfcheck/1 run from 8 threads on one handle: every answer right",
         test_selfcheck_from_threads},
        {"8 threads prepare and commit swaps at once while a handle computes",
         test_prepare_from_threads},
    };
    hk_test_add_all(hk_test_suite("swap: promises from several threads", NULL, NULL), tests,
                    sizeof tests / sizeof tests[0]);
}
