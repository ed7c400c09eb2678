/* hk-validate: hk.trim/1 (plugin_api/hk_trim.h), for a plugin that offers
 * it: the table's size and slot; a trim with no handle, and with a live
 * handle that still computes afterwards; and the [thread-safe] promise, 4
 * threads that make, use and destroy handles and trim in between, every
 * status and result checked. A host calls the trim before it closes the
 * module, so a trim that crashes, hangs or prints fails here, in the check's
 * own process. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "hk_trim.h"
#include "hkv.h"

#define TRIM_THREADS 4
#define TRIM_ROUNDS 10

typedef hk_status_t (*trim_fn)(void);

/* The plugin's trim; NULL with the check skipped (no table) or failed. */
static trim_fn trim_of(const hkv_plugin_t *p, hkv_result_t *r)
{
    const void *t = NULL;
    if (p->vt.get_table(HK_TABLE_TRIM_V1, &t) != HK_STATUS_OK || !t) {
        hkv_skip(r, "the plugin offers no %s", HK_TABLE_TRIM_V1);
        return NULL;
    }
    size_t size = *(const size_t *)t;
    if (size < offsetof(hk_trim_v1_t, trim) + sizeof(trim_fn)) {
        hkv_fail(r, "%s: size %zu leaves out trim", HK_TABLE_TRIM_V1, size);
        return NULL;
    }
    trim_fn fn = ((const hk_trim_v1_t *)t)->trim;
    if (!fn)
        hkv_fail(r, "%s: trim is NULL", HK_TABLE_TRIM_V1);
    return fn;
}

/* One trim, which must answer OK (nothing here makes a give-back fail). */
static void trim_ok(const hkv_plugin_t *p, trim_fn fn, const char *when, hkv_result_t *r)
{
    hk_status_t st = fn();
    if (st != HK_STATUS_OK) {
        char e[1100];
        hkv_fail(r, "trim %s gave %s: %s", when, hkv_st(st), hkv_last_error(p, NULL, e, sizeof e));
    }
}

/* A saxpy checked against the reference, where the plugin's memory can be
 * filled from here. */
static void computes(const hkv_plugin_t *p, hk_handle_t *h, uint64_t seed, hkv_result_t *r)
{
    if (p->blas.saxpy && hkv_can_move(p))
        hkv_op_case(p, h, 0, 0, 100, 1, 1, seed, NULL, r);
}

static void check_trim(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    trim_fn fn = trim_of(p, r);
    if (!fn)
        return;
    trim_ok(p, fn, "with no handle", r);
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    computes(p, h, 1, r);
    trim_ok(p, fn, "with a live handle", r);
    computes(p, h, 2, r); /* what the handle uses stays */
    hkv_destroy(p, h, r);
    trim_ok(p, fn, "after the last destroy", r);
    h = hkv_handle(p, NULL, r); /* what a trim gave back is made again */
    if (h) {
        computes(p, h, 3, r);
        hkv_destroy(p, h, r);
    }
    trim_ok(p, fn, "again", r);
    hkv_note(r, "trim with no handle, with a live one that computes on, after the last");
}

typedef struct trimmer {
    const hkv_plugin_t *p;
    trim_fn fn;
    int id;
    hkv_result_t r;
} trimmer_t;

static void *trim_worker(void *arg)
{
    trimmer_t *t = arg;
    for (int i = 0; i < TRIM_ROUNDS && t->r.nfail == 0; i++) {
        hk_handle_t *h = hkv_handle(t->p, NULL, &t->r);
        if (h) {
            computes(t->p, h, (uint64_t)(t->id * 100 + i), &t->r);
            hkv_destroy(t->p, h, &t->r);
        }
        trim_ok(t->p, t->fn, "from a thread", &t->r);
    }
    return NULL;
}

static void check_trim_threads(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    trim_fn fn = trim_of(p, r);
    if (!fn)
        return;
    trimmer_t t[TRIM_THREADS] = {0};
    pthread_t th[TRIM_THREADS];
    int started = 0;
    for (; started < TRIM_THREADS; started++) {
        t[started] = (trimmer_t){.p = p, .fn = fn, .id = started};
        if (pthread_create(&th[started], NULL, trim_worker, &t[started]) != 0)
            break;
    }
    if (started < TRIM_THREADS)
        hkv_fail(r, "could start only %d of %d threads", started, TRIM_THREADS);
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (t[i].r.nfail && r->nfail == 0)
            hkv_fail(r, "thread %d: %s", i, t[i].r.detail);
    }
    trim_ok(p, fn, "after the threads", r);
    hkv_note(r, "%d threads x %d rounds of create, saxpy, destroy, trim", TRIM_THREADS,
             TRIM_ROUNDS);
}

void hkv_register_trim(void)
{
    hkv_add("trim.calls", check_trim, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("trim.threads", check_trim_threads, HKV_NEED_HANDLE, 0, 0, 0);
}
