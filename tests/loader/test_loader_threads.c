/* The loader's [thread-safe] promises: 8 threads opening, finding and reading
 * reports of one loader at once, every answer checked. */
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#include "hk_test.h"
#include "test_loader_util.h"

#define THREADS 8
#define ROUNDS 50

typedef struct shared {
    hk_loader_t *loader;
    atomic_int wrong;
    hk_plugin_t *seen[THREADS];
} shared_t;

typedef struct arg {
    shared_t *sh;
    int index;
} arg_t;

static void *worker(void *p)
{
    arg_t *a = p;
    shared_t *sh = a->sh;
    hk_plugin_t *first = NULL;
    for (int i = 0; i < ROUNDS; i++) {
        hk_plugin_t *got = NULL;
        int bad = hk_loader_open(sh->loader, tl_plugin("tp_good.so"), &got) != HK_STATUS_OK;
        bad |= !got || (first && got != first);
        first = first ? first : got;
        /* A refused file gives the same status every time, from any thread. */
        bad |= hk_loader_open(sh->loader, tl_plugin("tp_nullvt.so"), NULL) !=
               HK_STATUS_NULL_POINTER;
        hk_plugin_t *found = hk_loader_find(sh->loader, "tp-good");
        bad |= found != NULL && found != got;
        bad |= hk_loader_report_count(sh->loader) > 2;
        bad |= hk_loader_last_error(sh->loader) == NULL;
        if (got) {
            hk_plugin_acquire(got);
            bad |= hk_plugin_vtable(got) == NULL || hk_plugin_name(got) == NULL;
            hk_plugin_release(got);
        }
        if (bad)
            atomic_fetch_add(&sh->wrong, 1);
    }
    sh->seen[a->index] = first;
    return NULL;
}

static void test_one_loader_from_threads(void)
{
    shared_t sh = {.loader = tl_loader(NULL)};
    CU_ASSERT_PTR_NOT_NULL_FATAL(sh.loader);
    pthread_t t[THREADS];
    arg_t args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (arg_t){&sh, i};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CU_ASSERT_EQUAL(atomic_load(&sh.wrong), 0);
    for (int i = 1; i < THREADS; i++)
        CU_ASSERT_PTR_EQUAL(sh.seen[i], sh.seen[0]);
    /* one plugin, one report per file, whatever the interleaving */
    CU_ASSERT_EQUAL(hk_loader_plugin_count(sh.loader), 1);
    CU_ASSERT_EQUAL(hk_loader_report_count(sh.loader), 2);
    CU_ASSERT_EQUAL(hk_loader_destroy(sh.loader), HK_STATUS_OK);
}

/* hk_loader_version ([thread-safe]) from 8 threads at once: every answer
 * the one a single call gives, and well formed. */
static const char *version_text;

static void *version_worker(void *arg)
{
    atomic_int *wrong = arg;
    for (int r = 0; r < ROUNDS * 20; r++) {
        uint32_t lo = 0, hi = 0;
        const char *v = hk_loader_version(&lo, &hi);
        if (!v || strcmp(v, version_text) != 0 || lo != HK_ABI_VERSION(HK_ABI_MAJOR, 0)
            || hi != HK_ABI_CURRENT || hk_loader_version(NULL, NULL) != v)
            atomic_fetch_add(wrong, 1);
    }
    return NULL;
}

static void test_version_from_threads(void)
{
    unsigned a, b, c;
    char tail;
    version_text = hk_loader_version(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(version_text);
    CU_ASSERT_EQUAL(sscanf(version_text, "%u.%u.%u%c", &a, &b, &c, &tail), 3);
    CU_ASSERT_EQUAL(a, HK_ABI_MAJOR);
    atomic_int wrong = 0;
    pthread_t t[THREADS];
    int started = 0;
    for (; started < THREADS; started++)
        if (pthread_create(&t[started], NULL, version_worker, &wrong) != 0)
            break;
    CU_ASSERT_EQUAL(started, THREADS);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    CU_ASSERT_EQUAL(atomic_load(&wrong), 0);
}

void tl_register_threads(void)
{
    CU_pSuite s = hk_test_suite("loader_threads", NULL, NULL);
    hk_test_add(s, "one loader from 8 threads: same plugin, same refusal, one report each",
                test_one_loader_from_threads);
    hk_test_add(s, "hk_loader_version from 8 threads",
                test_version_from_threads);
}
