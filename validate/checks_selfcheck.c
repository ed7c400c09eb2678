/* hk-validate: hk.selfcheck/1 (plugin_api/hk_selfcheck.h), for a plugin that
 * offers it. A host that swaps implementations moves its handles to a new
 * build only when that build's self-check says OK, so the verdict is what
 * is checked here: the table's size and slot; run's statuses and its why
 * buffer; the [handle-safe] promise; for a CUDA plugin, the caller's
 * current context after a run; and, where hk-validate can compute the
 * plugin's results on its own (hk.blas1/1), that a self-check saying OK is
 * never said of a plugin whose results are wrong. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "hk_selfcheck.h"
#include "hkv.h"
#include "hkv_cuda.h"

#define SC_THREADS 4 /* with handles of their own, and as many more on one handle */
#define SC_ROUNDS 3
#define SC_WHY 512
#define SC_TINY 6 /* a why_len too short for any reason */
#define SC_UNTOUCHED "(untouched)"

typedef hk_status_t (*run_fn)(hk_handle_t *h, char *why, size_t why_len);

/* The plugin's run slot; NULL with the check skipped (no table) or failed.
 * *size (may be NULL) gets the table's size. */
static run_fn run_of(const hkv_plugin_t *p, hkv_result_t *r, size_t *size_out)
{
    const void *t = NULL;
    if (p->vt.get_table(HK_TABLE_SELFCHECK_V1, &t) != HK_STATUS_OK) {
        hkv_skip(r, "the plugin offers no %s", HK_TABLE_SELFCHECK_V1);
        return NULL;
    }
    if (!t) {
        hkv_fail(r, "get_table(%s) gave OK and a NULL table", HK_TABLE_SELFCHECK_V1);
        return NULL;
    }
    size_t size = *(const size_t *)t;
    if (size < offsetof(hk_selfcheck_v1_t, run) + sizeof(run_fn) || size > 4096) {
        hkv_fail(r, "%s: size %zu is not that of a table whose one slot is run",
                 HK_TABLE_SELFCHECK_V1, size);
        return NULL;
    }
    /* a slot is called only at the ABI minor that added it */
    if (HK_ABI_VERSION_MINOR(p->abi) < 2) {
        hkv_skip(r, "%s: run is of ABI 1.2; the plugin negotiated 1.%u", HK_TABLE_SELFCHECK_V1,
                 (unsigned)HK_ABI_VERSION_MINOR(p->abi));
        return NULL;
    }
    if (size_out)
        *size_out = size;
    run_fn fn = ((const hk_selfcheck_v1_t *)t)->run;
    if (!fn)
        hkv_fail(r, "%s: run is NULL", HK_TABLE_SELFCHECK_V1);
    return fn;
}

static void check_table(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    size_t size = 0;
    if (run_of(p, r, &size))
        hkv_note(r, "size %zu, run present", size);
}

/* One run on a live handle that must say OK; why, when written, stays empty. */
static void run_ok(run_fn fn, hk_handle_t *h, const char *when, hkv_result_t *r)
{
    char why[SC_WHY] = SC_UNTOUCHED;
    hk_status_t st = fn(h, why, sizeof why);
    why[sizeof why - 1] = '\0';
    if (st != HK_STATUS_OK)
        hkv_fail(r, "run %s gave %s: %s", when, hkv_st(st), why);
    else if (why[0] && strcmp(why, SC_UNTOUCHED) != 0)
        hkv_fail(r, "run %s gave OK but wrote a reason: %s", when, why);
}

/* A handle that is not live: INVALID_HANDLE with a one-line reason, and a
 * why_len of SC_TINY respected (nothing written at or past it, the text
 * NUL-terminated within it). */
static void run_dead(run_fn fn, hk_handle_t *h, const char *what, hkv_result_t *r)
{
    char why[SC_WHY];
    memset(why, 0x5a, sizeof why);
    hk_status_t st = fn(h, why, sizeof why);
    char bad[128];
    if (st != HK_STATUS_INVALID_HANDLE) {
        hkv_fail(r, "run on %s gave %s; want INVALID_HANDLE", what, hkv_st(st));
        return;
    }
    if (!memchr(why, '\0', sizeof why) || !hkv_text_ok(why, bad, sizeof bad)) {
        hkv_fail(r, "run on %s: the reason is not one line (%s)", what,
                 memchr(why, '\0', sizeof why) ? bad : "not NUL-terminated");
        return;
    }
    memset(why, 0x5a, sizeof why);
    fn(h, why, SC_TINY);
    size_t at = hkv_guard_broken(why, SC_TINY, sizeof why, 0x5a);
    if (at < sizeof why)
        hkv_fail(r, "run on %s with why_len %d wrote why[%zu]", what, SC_TINY, at);
    else if (!memchr(why, '\0', SC_TINY))
        hkv_fail(r, "run on %s with why_len %d left why without a NUL in its %d bytes", what,
                 SC_TINY, SC_TINY);
}

static void check_run(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    run_fn fn = run_of(p, r, NULL);
    if (!fn)
        return;
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    run_ok(fn, h, "on a fresh handle", r);
    run_ok(fn, h, "again on the same handle", r);
    hk_status_t st = fn(h, NULL, 0);
    if (st != HK_STATUS_OK)
        hkv_fail(r, "run with why NULL and why_len 0 gave %s", hkv_st(st));
    run_dead(fn, NULL, "a NULL handle", r);
    hkv_destroy(p, h, r);
    run_dead(fn, h, "a destroyed handle", r);
    hkv_note(r, "OK twice on a live handle, also with why NULL; INVALID_HANDLE for NULL and "
                "destroyed handles, why_len %d respected", SC_TINY);
}

typedef struct runner {
    const hkv_plugin_t *p;
    run_fn fn;
    hk_handle_t *shared; /* NULL: the thread makes a handle of its own */
    hkv_result_t r;
} runner_t;

static void *run_worker(void *arg)
{
    runner_t *t = arg;
    hk_handle_t *h = t->shared ? t->shared : hkv_handle(t->p, NULL, &t->r);
    for (int i = 0; h && i < SC_ROUNDS && t->r.nfail == 0; i++)
        run_ok(t->fn, h, t->shared ? "on the shared handle" : "on a thread's own handle", &t->r);
    if (!t->shared)
        hkv_destroy(t->p, h, &t->r);
    return NULL;
}

static void check_threads(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    run_fn fn = run_of(p, r, NULL);
    if (!fn)
        return;
    hk_handle_t *shared = hkv_handle(p, NULL, r);
    if (!shared)
        return;
    runner_t t[2 * SC_THREADS];
    pthread_t th[2 * SC_THREADS];
    int started = 0;
    for (; started < 2 * SC_THREADS; started++) {
        t[started] = (runner_t){.p = p, .fn = fn, .shared = started < SC_THREADS ? NULL : shared};
        if (pthread_create(&th[started], NULL, run_worker, &t[started]) != 0)
            break;
    }
    if (started < 2 * SC_THREADS)
        hkv_fail(r, "could start only %d of %d threads", started, 2 * SC_THREADS);
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (t[i].r.nfail && r->nfail == 0)
            hkv_fail(r, "thread %d: %s", i, t[i].r.detail);
    }
    hkv_destroy(p, shared, r);
    hkv_note(r, "%d threads with handles of their own and %d on one handle, %d runs each, "
                "every verdict OK", SC_THREADS, SC_THREADS, SC_ROUNDS);
}

/* A run allocates, launches, copies and frees in the handle's context: the
 * caller's current context must be as it was afterwards, whatever it was
 * (a user context, nothing), on success and on failure. */
static void check_cuda_current(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    run_fn fn = run_of(p, r, NULL);
    if (!fn || hkv_cuda_begin(r))
        return;
    hkv_cuctx_t user = NULL;
    if (hkv_cu_user_context(hkv.probe.ndev >= 2 ? 1 : 0, &user) || hkv_cu.cuCtxSetCurrent(NULL)) {
        hkv_fail(r, "cannot make a user context");
        return;
    }
    /* an explicit device: a handle made with nothing current would make its
     * primary current, as the runtime does, and that is no run's doing */
    hk_create_info_t c0 = {sizeof c0, 0, 0};
    hk_handle_t *h = hkv_handle(p, &c0, r);
    if (h) {
        hkv_cu.cuCtxSetCurrent(user);
        run_ok(fn, h, "with a user context current", r);
        hkv_same_current(user, "run with a user context current", r);
        hkv_cu.cuCtxSetCurrent(NULL);
        run_ok(fn, h, "with nothing current", r);
        hkv_same_current(NULL, "run with nothing current", r);
        hkv_destroy(p, h, r);
        hkv_cu.cuCtxSetCurrent(user);
        fn(h, NULL, 0);
        hkv_same_current(user, "run on a destroyed handle", r);
    }
    hkv_cu.cuCtxSetCurrent(NULL);
    hkv_cu.cuCtxDestroy(user);
    hkv_note(r, "the caller's context unchanged by run with a user context and with nothing "
                "current, and on a destroyed handle");
}

/* hk-validate's own known-answer workload (checks_ops.c): every op of
 * hk.blas1/1 it has rules for, in both pointer modes, with a tail past any
 * block size and with strides. The first wrong result lands in *w. Returns
 * the number of cases run. */
static int blas1_workload(const hkv_plugin_t *p, hk_handle_t *h, hkv_result_t *w)
{
    int ran = 0;
    for (int dev = 0; dev < 2; dev++) {
        if (dev && (!p->vt.set_pointer_mode ||
                    p->vt.set_pointer_mode(h, HK_POINTER_MODE_DEVICE) != HK_STATUS_OK))
            break;
        for (int op = 0; op < HKV_NOPS; op++) {
            if (hkv_ops[op].kind == HKV_OTHER || !hkv_op_present(p, op))
                continue;
            hkv_op_case(p, h, op, dev, 1027, 1, 1, (uint64_t)op, NULL, w);
            hkv_op_case(p, h, op, dev, 300, 2, -3, (uint64_t)op + 77, NULL, w);
            ran += 2;
        }
    }
    if (p->vt.set_pointer_mode)
        p->vt.set_pointer_mode(h, HK_POINTER_MODE_HOST);
    return ran;
}

static void check_agrees(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    run_fn fn = run_of(p, r, NULL);
    if (!fn)
        return;
    if (!p->has_blas || !hkv_can_move(p)) {
        hkv_skip(r, "the plugin offers no %s: no table hk-validate can check on its own",
                 p->has_blas ? "hk.memory/1 to fill hk.blas1/1's vectors" : HK_TABLE_BLAS1_V1);
        return;
    }
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    char why[SC_WHY] = "";
    hk_status_t st = fn(h, why, sizeof why);
    why[sizeof why - 1] = '\0';
    hkv_result_t w = {0};
    int ran = blas1_workload(p, h, &w);
    hkv_destroy(p, h, r);
    if (st == HK_STATUS_OK && w.nfail)
        hkv_fail(r, "the self-check passes a plugin whose hk.blas1/1 results are wrong: %s",
                 w.detail);
    else if (st != HK_STATUS_OK && st != HK_STATUS_INTERNAL)
        hkv_fail(r, "the self-check could not run: %s: %s", hkv_st(st), why);
    else if (st == HK_STATUS_INTERNAL && !w.nfail)
        hkv_note(r, "the self-check finds a wrong result that %d hk.blas1/1 cases of "
                    "hk-validate's do not (selfcheck.run reports it): %s", ran, why);
    else if (st == HK_STATUS_INTERNAL)
        hkv_note(r, "both find a wrong result: the self-check (%s) and hk-validate (%s)", why,
                 w.detail);
    else
        hkv_note(r, "OK, and %d hk.blas1/1 cases of hk-validate's right", ran);
}

void hkv_register_selfcheck(void)
{
    hkv_ops_init();
    hkv_add("selfcheck.table", check_table, HKV_NEED_PLUGIN, 0, 0, 0);
    hkv_add("selfcheck.run", check_run, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("selfcheck.threads", check_threads, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("selfcheck.agrees", check_agrees, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("selfcheck.cuda-current", check_cuda_current, HKV_NEED_HANDLE | HKV_NEED_CUDA, 0, 0,
            0);
}
