/* The swap of a handle library that is not ours in shape: gen
 * (gen_plugin.c) has neither hk.blas1/1 nor hk.memory/1, only its own
 * table gen.ops/1 and a self-check. Its movable handles reach gen.ops/1
 * through pins, a swap verifies it by its self-check (and the host's own
 * callback), and refuses a build that lacks a table or slot the handles
 * use. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gen_ops.h"
#include "hk_selfcheck.h"
#include "swap_test.h"

#define GEN(file) HK_SWAP_PLUGIN_DIR "/" file
#define GEN_THREADS 8
#define GEN_HANDLES 4
#define GEN_SWAPS 100

typedef struct gen_run {
    hk_mhandle_t *mh[GEN_HANDLES];
    atomic_int stop;
    atomic_long calls, wrong, failed, tags[3];
    char first[256]; /* the first failure (guarded by once) */
    atomic_int once;
} gen_run_t;

static void gen_note(gen_run_t *r, atomic_long *counter, const char *fmt, long long a,
                     long long b)
{
    atomic_fetch_add(counter, 1);
    if (!atomic_exchange(&r->once, 1))
        snprintf(r->first, sizeof(r->first), fmt, a, b);
}

/* One call through a pin: add and tag, every result checked. */
static void gen_call(gen_run_t *r, hk_mhandle_t *mh, int64_t a, int64_t b)
{
    hk_mhandle_pin_t pin = {.size = sizeof(pin)};
    hk_status_t st = hk_mhandle_pin(mh, GEN_TABLE_OPS_V1, &pin);
    if (st != HK_STATUS_OK) {
        gen_note(r, &r->failed, "pin: status %lld (%lld)", st, 0);
        return;
    }
    const gen_ops_v1_t *ops = pin.table;
    int64_t sum = 0;
    int tag = 0;
    st = ops->add(pin.handle, a, b, &sum);
    hk_status_t st2 = ops->tag(pin.handle, &tag);
    hk_mhandle_unpin(&pin);
    if (st != HK_STATUS_OK || st2 != HK_STATUS_OK)
        gen_note(r, &r->failed, "add/tag: status %lld/%lld", st, st2);
    else if (sum != a + b)
        gen_note(r, &r->wrong, "add gave %lld, expected %lld", (long long)sum, (long long)(a + b));
    else if (tag != 1 && tag != 2)
        gen_note(r, &r->wrong, "tag %lld (%lld)", tag, 0);
    else
        atomic_fetch_add(&r->tags[tag], 1);
    atomic_fetch_add(&r->calls, 1);
}

static void *gen_worker(void *arg)
{
    gen_run_t *r = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    for (int i = 0; !atomic_load(&r->stop); i++) {
        int64_t a = (int64_t)(rand_r(&seed) % 1000) - 500, b = (int64_t)(rand_r(&seed) % 1000);
        gen_call(r, r->mh[i % GEN_HANDLES], a, b);
    }
    return NULL;
}

static hk_swap_plugin_state_t gen_state(hk_plugin_t *p)
{
    hk_swap_plugin_state_t s = {.size = sizeof(s)};
    CU_ASSERT_EQUAL(hk_plugin_swap_state(p, &s), HK_STATUS_OK);
    return s;
}

/* 8 threads calling gen.ops/1 through pins on 4 movable handles while the
 * main thread swaps 100 times between two builds (tag 1 and tag 2): every
 * result right, no call failed, both builds served calls, and each build
 * swapped away from is closed and gone from the process. */
static void test_generic_swap_under_calls(void)
{
    static gen_run_t r;
    memset(&r, 0, sizeof(r));
    hk_loader_t *loader = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = swp_open(loader, GEN("gen-a.so")), *b = swp_open(loader, GEN("gen-b.so"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    for (int i = 0; i < GEN_HANDLES; i++)
        CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, NULL, &r.mh[i]), HK_STATUS_OK);
    pthread_t t[GEN_THREADS];
    for (int i = 0; i < GEN_THREADS; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, gen_worker, &r), 0);
    int swaps = 0, closed = 0;
    for (int k = 0; k < GEN_SWAPS; k++) {
        hk_plugin_t *to = NULL, *from = k % 2 ? b : a;
        hk_status_t st = hk_loader_swap(loader, k % 2 ? GEN("gen-a.so") : GEN("gen-b.so"),
                                        NULL, &to);
        if (st != HK_STATUS_OK) {
            printf("\n    swap %d: %s\n", k, hk_loader_last_error(loader));
            break;
        }
        swaps++;
        closed += gen_state(from).module == HK_MODULE_CLOSED && !swp_mapped(hk_plugin_path(from));
    }
    atomic_store(&r.stop, 1);
    for (int i = 0; i < GEN_THREADS; i++)
        pthread_join(t[i], NULL);
    printf("\n    %d swaps, %ld calls (%ld on build 1, %ld on build 2), %ld wrong, %ld failed, "
           "%d old modules closed%s%s\n", swaps, atomic_load(&r.calls), atomic_load(&r.tags[1]),
           atomic_load(&r.tags[2]), atomic_load(&r.wrong), atomic_load(&r.failed), closed,
           r.first[0] ? "; first: " : "", r.first);
    CU_ASSERT_EQUAL(swaps, GEN_SWAPS);
    CU_ASSERT_EQUAL(closed, GEN_SWAPS);
    CU_ASSERT_EQUAL(atomic_load(&r.wrong), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.failed), 0);
    CU_ASSERT(atomic_load(&r.tags[1]) > 0 && atomic_load(&r.tags[2]) > 0);
    for (int i = 0; i < GEN_HANDLES; i++)
        CU_ASSERT_EQUAL(hk_mhandle_destroy(r.mh[i]), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* A swap to path is refused with status st and a reason containing why;
 * the handle keeps computing on its implementation. */
static void gen_refused(hk_loader_t *loader, hk_mhandle_t *mh, const char *path, hk_status_t st,
                        const char *why, const hk_swap_options_t *opts)
{
    gen_run_t r;
    memset(&r, 0, sizeof(r));
    CU_ASSERT_EQUAL(hk_loader_swap(loader, path, opts, NULL), st);
    const char *e = hk_loader_last_error(loader);
    if (!strstr(e, why))
        printf("\n    %s: want \"%s\" in \"%s\"\n", path, why, e);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, why));
    gen_call(&r, mh, 20, 22);
    CU_ASSERT_EQUAL(atomic_load(&r.calls), 1);
    CU_ASSERT_EQUAL(atomic_load(&r.wrong) + atomic_load(&r.failed), 0);
}

/* The host's callback: gen.ops/1's add checked on the verification handle. */
static hk_status_t gen_host_verify(void *user, hk_plugin_t *plugin, hk_handle_t *h, char *why,
                                   size_t n)
{
    atomic_fetch_add((atomic_int *)user, 1);
    gen_ops_v1_t ops;
    if (hk_plugin_get_table(plugin, GEN_TABLE_OPS_V1, &ops, sizeof(ops)) != HK_STATUS_OK)
        return HK_STATUS_NOT_SUPPORTED;
    int64_t s = 0;
    if (ops.add(h, 1, 1, &s) != HK_STATUS_OK || s != 2) {
        snprintf(why, n, "the host's own check: add(1, 1) gave %lld", (long long)s);
        return HK_STATUS_INTERNAL;
    }
    return HK_STATUS_OK;
}

/* loader (made by the caller) with gen-a opened and one movable handle on
 * it in *mh; the test ends when any of it fails. */
static hk_loader_t *gen_on_a(hk_loader_t *loader, hk_mhandle_t **mh)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = swp_open(loader, GEN("gen-a.so"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, NULL, mh), HK_STATUS_OK);
    return loader;
}

/* Refusals: a build lacking a used table, or a slot of it the old one
 * sets, or a forwarded slot of the core vtable; a self-check that finds a wrong result, or crashes (in the probe
 * process); a self-check that lies, caught by the host's callback. */
static void test_generic_refusals(void)
{
    hk_mhandle_t *mh = NULL;
    hk_loader_t *loader = gen_on_a(swp_loader(), &mh);
    /* gen.ops/1 unused yet: a build without it may take the handle over. */
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GEN("gen-noops.so"), NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GEN("gen-a.so"), NULL, NULL), HK_STATUS_OK);
    gen_run_t r;
    memset(&r, 0, sizeof(r));
    gen_call(&r, mh, 1, 2); /* now it is used */
    gen_refused(loader, mh, GEN("gen-noops.so"), HK_STATUS_NOT_SUPPORTED,
                "gen 1.3.0 lacks table gen.ops/1, which gen 1.0.0 offers and the movable "
                "handles use", NULL);
    gen_refused(loader, mh, GEN("gen-nomul.so"), HK_STATUS_NOT_SUPPORTED,
                "gen 1.4.0 lacks slot 2 of table gen.ops/1", NULL);
    /* A forwarded slot of the core vtable counts whether used or not. */
    gen_refused(loader, mh, GEN("gen-noinfo.so"), HK_STATUS_NOT_SUPPORTED,
                "gen 1.7.0 lacks slot handle_info of the core vtable, which gen 1.0.0 offers",
                NULL);
    gen_refused(loader, mh, GEN("gen-wrong.so"), HK_STATUS_INTERNAL,
                "its self-check (hk.selfcheck/1) says INTERNAL: add(-3, -6) gave -8, expected -9",
                NULL);
    gen_refused(loader, mh, GEN("gen-crash.so"), HK_STATUS_LOAD_FAILED,
                "gen 1.6.0 failed in the probe process", NULL);
    atomic_int asked = 0;
    hk_swap_options_t o = {.size = sizeof(o), .verify = gen_host_verify, .verify_user = &asked};
    gen_refused(loader, mh, GEN("gen-liar.so"), HK_STATUS_INTERNAL,
                "failed verification (the host's verify callback): the host's own check: "
                "add(1, 1) gave 3", &o);
    CU_ASSERT_EQUAL(atomic_load(&asked), 1);
    /* The same callback lets a right build through. */
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GEN("gen-b.so"), &o, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(atomic_load(&asked), 2);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* Bad input to pins: a documented status each, and nothing pinned. */
static void test_pin_bad_input(void)
{
    hk_mhandle_t *mh = NULL;
    hk_loader_t *loader = gen_on_a(swp_loader(), &mh);
    hk_mhandle_pin_t pin = {.size = sizeof(pin)};
    CU_ASSERT_EQUAL(hk_mhandle_pin(mh, NULL, &pin), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_mhandle_pin(mh, GEN_TABLE_OPS_V1, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_mhandle_pin(NULL, GEN_TABLE_OPS_V1, &pin), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(hk_mhandle_pin((hk_mhandle_t *)&pin, GEN_TABLE_OPS_V1, &pin),
                    HK_STATUS_INVALID_HANDLE);
    hk_mhandle_pin_t small = {.size = 4};
    CU_ASSERT_EQUAL(hk_mhandle_pin(mh, GEN_TABLE_OPS_V1, &small), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(hk_mhandle_pin(mh, "no.such/1", &pin), HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NULL(pin.internal[0]);
    char msg[256];
    hk_mhandle_last_error_copy(mh, msg, sizeof(msg));
    CU_ASSERT_STRING_EQUAL(msg, "hk_mhandle_pin: gen 1.0.0 offers no table no.such/1");
    hk_mhandle_unpin(NULL);
    hk_mhandle_unpin(&pin); /* not pinned: nothing */
    hk_mhandle_state_t s = {.size = sizeof(s)};
    CU_ASSERT_EQUAL(hk_mhandle_state(mh, &s), HK_STATUS_OK);
    CU_ASSERT_EQUAL(s.inflight, 0);
    /* A pin counts as a call in flight: destroy is BUSY meanwhile. */
    CU_ASSERT_EQUAL(hk_mhandle_pin(mh, HK_TABLE_SELFCHECK_V1, &pin), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_BUSY);
    hk_mhandle_unpin(&pin);
    hk_mhandle_unpin(&pin); /* twice: nothing */
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* How many self-check runs the file at path counts. */
static long gen_checks(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* One verification per build: with isolation on, a build never seen is
 * verified in the probe process only (the host does not run it again); a
 * build verified before on the device runs nothing at all. 10 swaps
 * between two builds: 2 self-check runs, not 20. With isolation off, the
 * host runs it once per build: 2 again. */
static void test_one_verification_per_build(void)
{
    char path[] = "/tmp/hk-gen-checks-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    setenv("GEN_CHECK_LOG", path, 1);
    for (int iso = 0; iso < 2; iso++) {
        hk_loader_options_t lo = {.size = sizeof(lo), .ignore_env = 1,
                                  .isolation = iso ? HK_ISOLATION_OFF : HK_ISOLATION_PROBE};
        hk_loader_t *loader = NULL;
        hk_mhandle_t *mh = NULL;
        CU_ASSERT_EQUAL_FATAL(hk_loader_create(&lo, &loader), HK_STATUS_OK);
        gen_on_a(loader, &mh);
        long before = gen_checks(path);
        for (int k = 0; k < 10; k++)
            CU_ASSERT_EQUAL(hk_loader_swap(loader, k % 2 ? GEN("gen-a.so") : GEN("gen-b.so"),
                                           NULL, NULL), HK_STATUS_OK);
        long runs = gen_checks(path) - before;
        printf("\n    isolation %s: 10 swaps, %ld self-check runs", iso ? "off" : "on", runs);
        CU_ASSERT_EQUAL(runs, 2);
        CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
        CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    }
    printf("\n");
    unsetenv("GEN_CHECK_LOG");
    unlink(path);
}

void swp_register_generic(void)
{
    CU_pSuite s = hk_test_suite("swap of a plugin without hk.blas1/1", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"8 threads through pins, 100 swaps between two builds: every result right, "
         "every old module closed", test_generic_swap_under_calls},
        {"refused: a used table or slot lacking, a self-check that fails, crashes "
         "or lies (the host's callback)", test_generic_refusals},
        {"pins: bad input, a pin counts as a call in flight", test_pin_bad_input},
        {"one verification per build: 10 swaps between two builds run 2 self-checks",
         test_one_verification_per_build},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
