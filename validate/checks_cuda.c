/* hk-validate: the context contract (docs/contexts.md) for CUDA plugins:
 * binding at create in each state of the calling thread, a destroyed user
 * context, a reset primary, fork, new threads, streams of other contexts,
 * checked mode, capture, and the caller's current context after every slot
 * (checks_cudacur.c). The validator opens the driver itself (hkv_cuda.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hkv.h"
#include "hkv_cuda.h"

/* Opens the driver in this check's process; 0 or -1 (recorded). */
int hkv_cuda_begin(hkv_result_t *r)
{
    char why[320];
    if (hkv_cu_open(why, sizeof why) != 0) {
        hkv_fail(r, "%s", why);
        return -1;
    }
    return 0;
}

/* Records a failure when the current context is not want. */
void hkv_same_current(hkv_cuctx_t want, const char *after, hkv_result_t *r)
{
    hkv_cuctx_t now = hkv_cu_current();
    if (now != want)
        hkv_fail(r, "after %s the current context is %p; it was %p", after, now, want);
}

static int info_of(const hkv_plugin_t *p, hk_handle_t *h, hk_handle_info_t *i, hkv_result_t *r)
{
    memset(i, 0, sizeof *i);
    i->size = sizeof *i;
    if (!p->vt.handle_info) {
        hkv_note(r, "handle_info not supported: binding not inspected");
        return -1;
    }
    hk_status_t st = p->vt.handle_info(h, i);
    if (st != HK_STATUS_OK) {
        hkv_fail(r, "handle_info gave %s", hkv_st(st));
        return -1;
    }
    return 0;
}

/* The handle is bound to ctx on device dev, owning a primary retain or not. */
static void bound_to(const hkv_plugin_t *p, hk_handle_t *h, hkv_cuctx_t ctx, int dev, int owns,
                     hkv_result_t *r)
{
    hk_handle_info_t i;
    if (info_of(p, h, &i, r) != 0)
        return;
    unsigned long long id = hkv_cu_id(ctx);
    if (i.device != dev || i.context_id != id || i.owns_primary != owns)
        hkv_fail(r, "bound to device %d context %llu owns_primary %d; want device %d context "
                 "%llu owns_primary %d", i.device, (unsigned long long)i.context_id,
                 i.owns_primary, dev, id, owns);
}

static void op_works(const hkv_plugin_t *p, hk_handle_t *h, const char *when, hkv_result_t *r)
{
    if (!p->blas.saxpy || !hkv_can_move(p))
        return;
    hkv_result_t v = {0};
    if (hkv_op_case(p, h, 0, 0, 100, 1, 1, 1, NULL, &v) != 0)
        hkv_fail(r, "%s: %s", when, v.detail);
}

static int second_dev(void)
{
    return hkv.probe.ndev >= 2 ? 1 : 0;
}

/* a = 0: nothing current; 1: a primary current; 2: a user context current. */
static void check_bind(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    if (hkv_cuda_begin(r))
        return;
    int dev = k->a == 0 ? 0 : second_dev();
    hkv_cudevice_t d;
    hkv_cuctx_t ctx = NULL;
    if (hkv_cu.cuDeviceGet(&d, dev) ||
        (k->a == 1 && (hkv_cu.cuDevicePrimaryCtxRetain(&ctx, d) || hkv_cu.cuCtxSetCurrent(ctx))) ||
        (k->a == 2 && hkv_cu.cuCtxCreate(&ctx, 0, d))) {
        hkv_fail(r, "cannot set up the calling thread's context");
        return;
    }
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    hkv_cuctx_t expect = k->a == 0 ? hkv_cu_primary(0) : ctx;
    hkv_same_current(expect, "handle_create", r);
    bound_to(p, h, expect, dev, k->a != 2, r);
    op_works(p, h, "an op after create", r);
    hkv_same_current(expect, "the op", r);
    hkv_destroy(p, h, r);
    hkv_same_current(expect, "handle_destroy", r);
    if (k->a == 2 && hkv_cu_id(ctx) == 0)
        hkv_fail(r, "the user context died with the handle");
    if (k->a == 2)
        hkv_cu.cuCtxDestroy(ctx);
    if (k->a == 1)
        hkv_cu.cuDevicePrimaryCtxRelease(d);
    static const char *const what[] = {
        "nothing current: bound to device 0's primary, which stays current",
        "a primary current: bound to it, with a retain; nothing changed",
        "a user context current: bound to it, without owning it; nothing changed"};
    hkv_note(r, "%s%s", what[k->a], dev == 0 && k->a ? " (one device: device 0)" : "");
}

static void check_bind_explicit(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (hkv_cuda_begin(r))
        return;
    hkv_cuctx_t user = NULL;
    if (hkv_cu_user_context(0, &user) || hkv_cu.cuCtxSetCurrent(NULL)) {
        hkv_fail(r, "cannot make a user context on device 0");
        return;
    }
    hkv_cuctx_t states[2] = {NULL, user};
    for (int s = 0; s < 2; s++) {
        hkv_cu.cuCtxSetCurrent(states[s]);
        hk_create_info_t ci = {sizeof ci, 1, 0};
        hk_handle_t *h = hkv_handle(p, &ci, r);
        if (!h)
            return;
        hkv_same_current(states[s], "handle_create(device 1)", r);
        bound_to(p, h, hkv_cu_primary(1), 1, 1, r);
        op_works(p, h, "an op on device 1", r);
        hkv_same_current(states[s], "an op on device 1", r);
        hkv_destroy(p, h, r);
        hkv_same_current(states[s], "handle_destroy", r);
    }
    hkv_cu.cuCtxDestroy(user);
    hkv_note(r, "device 1's primary, with nothing and with a user context of device 0 current; "
             "the caller's context left alone");
}

static void check_user_destroyed(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (hkv_cuda_begin(r))
        return;
    hkv_cuctx_t user = NULL;
    if (hkv_cu_user_context(0, &user)) {
        hkv_fail(r, "cannot make a user context");
        return;
    }
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    float *x = hkv_dalloc(p, h, 64, r), *y = hkv_dalloc(p, h, 64, r), alpha = 1;
    op_works(p, h, "before the context was destroyed", r);
    hkv_cu.cuCtxDestroy(user);
    hkv_cuctx_t now = hkv_cu_current();
    hk_status_t st;
    if (p->blas.saxpy && x && y) {
        st = p->blas.saxpy(h, 16, &alpha, x, 1, y, 1);
        char e[1100], why[128];
        if (st != HK_STATUS_CONTEXT_DESTROYED)
            hkv_fail(r, "saxpy gave %s; want CONTEXT_DESTROYED", hkv_st(st));
        else if (!hkv_text_ok(hkv_last_error(p, h, e, sizeof e), why, sizeof why))
            hkv_fail(r, "CONTEXT_DESTROYED: last_error: %s", why);
    }
    if (p->vt.synchronize && (st = p->vt.synchronize(h)) != HK_STATUS_CONTEXT_DESTROYED)
        hkv_fail(r, "synchronize gave %s; want CONTEXT_DESTROYED", hkv_st(st));
    void *m = NULL;
    if (p->mem.alloc && (st = p->mem.alloc(h, 64, &m)) != HK_STATUS_CONTEXT_DESTROYED)
        hkv_fail(r, "alloc gave %s; want CONTEXT_DESTROYED", hkv_st(st));
    hkv_same_current(now, "the refused calls", r);
    p->vt.handle_destroy(h); /* may report the dead context; the handle goes anyway */
    if ((st = p->vt.handle_destroy(h)) != HK_STATUS_INVALID_HANDLE)
        hkv_fail(r, "the handle outlived handle_destroy (a second one gave %s)", hkv_st(st));
    hkv_note(r, "CONTEXT_DESTROYED from saxpy, synchronize, alloc; destroy still frees it");
}

/* a = 1: the handle runs on a stream of the primary, which dies in the reset. */
static void check_reset(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    if (hkv_cuda_begin(r))
        return;
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    hkv_custream_t s = NULL;
    if (k->a && (!p->vt.set_stream || hkv_cu.cuStreamCreate(&s, 0) ||
                 p->vt.set_stream(h, s) != HK_STATUS_OK)) {
        hkv_fail(r, "cannot give the handle a stream of its context");
        return;
    }
    op_works(p, h, "before the reset", r);
    hkv_cudevice_t d;
    hkv_cu.cuDeviceGet(&d, 0);
    hkv_cuctx_t cur = hkv_cu_current();
    if (hkv_cu.cuDevicePrimaryCtxReset(d) != 0) {
        hkv_fail(r, "cuDevicePrimaryCtxReset failed");
        return;
    }
    hk_status_t st = HK_STATUS_OK;
    void *m = NULL;
    if (p->mem.alloc)
        st = p->mem.alloc(h, 64, &m);
    else if (p->vt.synchronize)
        st = p->vt.synchronize(h);
    if (st == HK_STATUS_OK && m)
        p->mem.free_(h, m);
    if (st == HK_STATUS_CONTEXT_RESET && p->vt.set_stream) {
        hk_status_t s2 = p->vt.set_stream(h, NULL);
        if (s2 != HK_STATUS_OK)
            hkv_fail(r, "CONTEXT_RESET, then set_stream(NULL) gave %s", hkv_st(s2));
    } else if (st != HK_STATUS_OK) {
        hkv_fail(r, "the first call after the reset gave %s; want OK or CONTEXT_RESET",
                 hkv_st(st));
    }
    op_works(p, h, "after the reset", r);
    hkv_same_current(cur, "the calls after the reset", r);
    hkv_destroy(p, h, r);
    hkv_note(r, "first call after the reset: %s; then ops work again", hkv_st(st));
}

/* The child of fork() gets FORKED. a = 0: the parent used the plugin;
 * a = 1: the parent only initialised CUDA itself. */
static void check_fork(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    if (hkv_cuda_begin(r))
        return;
    hk_handle_t *h = NULL;
    float *x = NULL, *y = NULL, alpha = 1;
    if (k->a == 0) {
        if (!(h = hkv_handle(p, NULL, r)))
            return;
        x = hkv_dalloc(p, h, 64, r);
        y = hkv_dalloc(p, h, 64, r);
        op_works(p, h, "in the parent", r);
    } else {
        hkv_cuctx_t pc = NULL;
        hkv_cudevice_t d;
        hkv_cu.cuDeviceGet(&d, 0);
        hkv_cu.cuDevicePrimaryCtxRetain(&pc, d); /* as the runtime would */
        hkv_cu.cuCtxSetCurrent(pc);
    }
    int fd[2];
    if (pipe(fd) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        hkv_result_t c = {0};
        hk_status_t st;
        hk_handle_t *h2 = NULL;
        if ((st = p->vt.handle_create(NULL, &h2)) != HK_STATUS_FORKED)
            hkv_fail(&c, "handle_create gave %s; want FORKED", hkv_st(st));
        if (h && p->blas.saxpy && (st = p->blas.saxpy(h, 16, &alpha, x, 1, y, 1)) != HK_STATUS_FORKED)
            hkv_fail(&c, "saxpy gave %s; want FORKED", hkv_st(st));
        if (h && p->vt.synchronize && (st = p->vt.synchronize(h)) != HK_STATUS_FORKED)
            hkv_fail(&c, "synchronize gave %s; want FORKED", hkv_st(st));
        void *m;
        if (h && p->mem.alloc && (st = p->mem.alloc(h, 64, &m)) != HK_STATUS_FORKED)
            hkv_fail(&c, "alloc gave %s; want FORKED", hkv_st(st));
        if (h && p->vt.set_stream && (st = p->vt.set_stream(h, NULL)) != HK_STATUS_FORKED)
            hkv_fail(&c, "set_stream gave %s; want FORKED", hkv_st(st));
        if (h && (st = p->vt.handle_destroy(h)) != HK_STATUS_OK && st != HK_STATUS_FORKED)
            hkv_fail(&c, "handle_destroy gave %s; want OK or FORKED", hkv_st(st));
        hkv_finish(&c);
        ssize_t w = write(fd[1], &c, sizeof c);
        _exit(w == (ssize_t)sizeof c ? 0 : 1);
    }
    close(fd[1]);
    hkv_result_t c;
    ssize_t got = pid > 0 ? read(fd[0], &c, sizeof c) : -1;
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    close(fd[0]);
    if (got != (ssize_t)sizeof c)
        hkv_fail(r, "the fork() child died (status 0x%x) without a result", status);
    else if (c.verdict == HKV_FAIL)
        hkv_fail(r, "in the fork() child: %s", c.detail);
    if (h) {
        op_works(p, h, "in the parent after the fork", r);
        hkv_dfree(p, h, x);
        hkv_dfree(p, h, y);
        hkv_destroy(p, h, r);
    }
    hkv_note(r, "FORKED in the child%s", k->a ? " (CUDA initialised by the parent itself)" : "");
}

static void *new_thread(void *arg)
{
    void **a = arg;
    const hkv_plugin_t *p = a[0];
    hk_handle_t *h = a[1];
    hkv_result_t *r = a[2];
    hkv_cuctx_t user = NULL;
    if (a[3]) { /* a user context of this thread's own */
        if (hkv_cu_user_context(0, &user)) {
            hkv_fail(r, "cannot make a user context");
            return NULL;
        }
    }
    op_works(p, h, user ? "on a thread with its own context" : "on a new thread", r);
    hkv_same_current(user, user ? "ops on a thread with its own context" : "ops on a new thread",
                     r);
    if (user)
        hkv_cu.cuCtxDestroy(user);
    return NULL;
}

static void check_new_thread(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (hkv_cuda_begin(r))
        return;
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    for (int i = 0; i < 2; i++) {
        pthread_t t;
        void *args[4] = {p, h, r, i ? (void *)1 : NULL};
        if (pthread_create(&t, NULL, new_thread, args) == 0)
            pthread_join(t, NULL);
    }
    hkv_destroy(p, h, r);
    hkv_note(r, "ops from a thread with nothing current and one with its own context; "
             "neither thread's context changed");
}

static void check_stream_mismatch(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (hkv_cuda_begin(r) || !p->vt.set_stream) {
        if (!p->vt.set_stream)
            hkv_notsup(r, "set_stream");
        return;
    }
    int two = hkv.probe.ndev >= 2;
    hkv_cudevice_t d;
    hkv_cuctx_t other = NULL;
    hkv_custream_t s = NULL;
    if (hkv_cu.cuDeviceGet(&d, two ? 1 : 0) ||
        (two ? (hkv_cu.cuDevicePrimaryCtxRetain(&other, d) || hkv_cu.cuCtxSetCurrent(other))
             : hkv_cu.cuCtxCreate(&other, 0, d)) ||
        hkv_cu.cuStreamCreate(&s, 0)) {
        hkv_fail(r, "cannot make a stream in another context");
        return;
    }
    hk_create_info_t ci = {sizeof ci, 0, 0};
    hk_handle_t *h = hkv_handle(p, &ci, r);
    if (!h)
        return;
    hk_status_t st = p->vt.set_stream(h, s);
    char e[1100], why[128];
    hkv_last_error(p, h, e, sizeof e);
    if (st != HK_STATUS_STREAM_MISMATCH)
        hkv_fail(r, "a stream of %s gave %s; want STREAM_MISMATCH",
                 two ? "device 1" : "a user context of device 0", hkv_st(st));
    else if (!hkv_text_ok(e, why, sizeof why))
        hkv_fail(r, "STREAM_MISMATCH: last_error: %s", why);
    else if (two && (!hkv_names(e, "0") || !hkv_names(e, "1")))
        hkv_fail(r, "STREAM_MISMATCH: \"%.100s\" does not name both devices", e);
    hkv_same_current(other, "the refused set_stream", r);
    op_works(p, h, "after the refused stream", r);
    hkv_destroy(p, h, r);
    hkv_note(r, "STREAM_MISMATCH naming the devices: \"%.80s\"", e);
}

static void check_checked_mode(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (hkv_cuda_begin(r))
        return;
    if (!p->blas.saxpy || !p->mem.alloc) {
        hkv_notsup(r, p->blas.saxpy ? "hk.memory/1" : "saxpy");
        return;
    }
    hk_create_info_t c0 = {sizeof c0, 0, HK_CREATE_CHECKED}, c1 = {sizeof c1, 1, 0};
    hk_handle_t *h0 = hkv_handle(p, &c0, r), *h1 = hkv_handle(p, &c1, r);
    if (!h0 || !h1)
        return;
    float *x = hkv_dalloc(p, h1, 64, r), *y = hkv_dalloc(p, h1, 64, r), alpha = 1;
    if (x && y) {
        hk_status_t st = p->blas.saxpy(h0, 16, &alpha, x, 1, y, 1);
        char e[1100], why[128];
        hkv_last_error(p, h0, e, sizeof e);
        if (st != HK_STATUS_POINTER_MISMATCH)
            hkv_fail(r, "checked handle of device 0, vectors of device 1: %s; want "
                     "POINTER_MISMATCH", hkv_st(st));
        else if (!hkv_text_ok(e, why, sizeof why))
            hkv_fail(r, "POINTER_MISMATCH: last_error: %s", why);
        else if (!hkv_names(e, "0") || !hkv_names(e, "1"))
            hkv_fail(r, "POINTER_MISMATCH: \"%.100s\" does not name both devices", e);
        hkv_note(r, "POINTER_MISMATCH: \"%.100s\"", e);
    }
    hkv_dfree(p, h1, x);
    hkv_dfree(p, h1, y);
    hkv_destroy(p, h0, r);
    hkv_destroy(p, h1, r);
}

static void check_capture(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (hkv_cuda_begin(r))
        return;
    if (!p->blas.sdot || !p->vt.set_stream || !p->vt.set_pointer_mode || !hkv_can_move(p)) {
        hkv_notsup(r, !p->blas.sdot ? "sdot" : "set_stream, set_pointer_mode or hk.memory/1");
        return;
    }
    hk_handle_t *h = hkv_handle(p, NULL, r);
    hkv_custream_t s = NULL;
    if (!h || hkv_cu.cuStreamCreate(&s, 0) || p->vt.set_stream(h, s) != HK_STATUS_OK) {
        hkv_fail(r, "cannot give the handle a stream");
        return;
    }
    float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, res = -1;
    float *x = hkv_dalloc(p, h, sizeof ones, r), *dres = hkv_dalloc(p, h, sizeof res, r);
    if (!x || !dres || hkv_put(p, h, x, ones, sizeof ones, r))
        return;
    int cs = -1;
    hkv_cugraph_t g = NULL;
    if (hkv_cu.cuStreamBeginCapture(s, 0)) {
        hkv_fail(r, "cuStreamBeginCapture failed");
        return;
    }
    hk_status_t st = p->blas.sdot(h, 16, x, 1, x, 1, &res);
    char e[1100], why[128];
    if (st != HK_STATUS_NOT_SUPPORTED)
        hkv_fail(r, "host-mode sdot during capture gave %s; want NOT_SUPPORTED", hkv_st(st));
    else if (!hkv_text_ok(hkv_last_error(p, h, e, sizeof e), why, sizeof why))
        hkv_fail(r, "NOT_SUPPORTED: last_error: %s", why);
    if (hkv_cu.cuStreamIsCapturing(s, &cs) || cs != 1)
        hkv_fail(r, "after the refused call the capture is not active (status %d)", cs);
    p->vt.set_pointer_mode(h, HK_POINTER_MODE_DEVICE);
    if ((st = p->blas.sdot(h, 16, x, 1, x, 1, dres)) != HK_STATUS_OK)
        hkv_fail(r, "device-mode sdot during capture gave %s; want OK", hkv_st(st));
    if (hkv_cu.cuStreamEndCapture(s, &g) || !g)
        hkv_fail(r, "the capture ended invalid");
    if (g)
        hkv_cu.cuGraphDestroy(g);
    p->vt.set_stream(h, NULL);
    hkv_destroy(p, h, r);
    hkv_cu.cuStreamDestroy(s);
    hkv_note(r, "host-mode result refused during capture, capture intact, device mode captured");
}

/* One slot's answer during the capture: OK, or NOT_SUPPORTED with a
 * one-line reason; the capture of s must still be active. */
static void capture_answer(const hkv_plugin_t *p, hk_handle_t *h, hkv_custream_t s,
                           hk_status_t st, const char *slot, hkv_result_t *r)
{
    char e[1100], why[128];
    int cs = -1;
    if (st != HK_STATUS_OK && st != HK_STATUS_NOT_SUPPORTED)
        hkv_fail(r, "%s during capture gave %s; want OK or NOT_SUPPORTED", slot, hkv_st(st));
    else if (st != HK_STATUS_OK && !hkv_text_ok(hkv_last_error(p, h, e, sizeof e), why, sizeof why))
        hkv_fail(r, "%s: NOT_SUPPORTED: last_error: %s", slot, why);
    if (hkv_cu.cuStreamIsCapturing(s, &cs) || cs != 1)
        hkv_fail(r, "after %s the capture is not active (status %d)", slot, cs);
}

/* The handle's stream first given to it inside a capture (mode k->a: 0
 * global, 1 thread-local, 2 relaxed), as PyTorch users do, then every slot of
 * hk.memory/1 and synchronize: each gives OK or NOT_SUPPORTED with a reason,
 * the capture stays active after each and ends valid (docs/contexts.md,
 * "Stream capture"). */
static void check_capture_inside(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    if (hkv_cuda_begin(r))
        return;
    if (!p->vt.set_stream || !p->mem.memset_ || !p->mem.copy_to_host || !p->mem.alloc) {
        hkv_notsup(r, "set_stream or hk.memory/1");
        return;
    }
    hk_handle_t *h = hkv_handle(p, NULL, r);
    hkv_custream_t s = NULL;
    unsigned char host[64] = {0};
    void *d = h ? hkv_dalloc(p, h, sizeof host, r) : NULL, *more = NULL;
    if (!d || hkv_cu.cuStreamCreate(&s, 1 /* non-blocking */)) {
        hkv_fail(r, "cannot set up a stream and memory");
        goto out;
    }
    hkv_cugraph_t g = NULL;
    if (hkv_cu.cuStreamBeginCapture(s, k->a)) {
        hkv_fail(r, "cuStreamBeginCapture failed");
        goto out;
    }
    capture_answer(p, h, s, p->vt.set_stream(h, s), "set_stream", r);
    capture_answer(p, h, s, p->mem.memset_(h, d, 7, sizeof host), "memset_", r);
    capture_answer(p, h, s, p->mem.copy_to_host(h, host, d, sizeof host), "copy_to_host", r);
    capture_answer(p, h, s, p->mem.copy_to_device(h, d, host, sizeof host), "copy_to_device", r);
    capture_answer(p, h, s, p->mem.alloc(h, 256, &more), "alloc", r);
    if (more)
        capture_answer(p, h, s, p->mem.free_(h, more), "free_", r);
    if (p->vt.synchronize)
        capture_answer(p, h, s, p->vt.synchronize(h), "synchronize", r);
    int end = hkv_cu.cuStreamEndCapture(s, &g);
    if (end || !g)
        hkv_fail(r, "the capture ended invalid (%d)", end);
    if (g)
        hkv_cu.cuGraphDestroy(g);
    hkv_note(r, "stream set inside the capture; every memory slot and synchronize answered, "
                "the capture intact");
out:
    if (h && p->vt.set_stream)
        p->vt.set_stream(h, NULL);
    if (s)
        hkv_cu.cuStreamDestroy(s);
    if (d)
        hkv_dfree(p, h, d);
    hkv_destroy(p, h, r);
}

void hkv_register_cuda(void)
{
    const unsigned c = HKV_NEED_HANDLE | HKV_NEED_CUDA;
    hkv_add("cuda.bind-nothing-current", check_bind, c, 0, 0, 0);
    hkv_add("cuda.bind-primary-current", check_bind, c, 1, 0, 0);
    hkv_add("cuda.bind-user-context", check_bind, c, 2, 0, 0);
    hkv_add("cuda.bind-explicit-device", check_bind_explicit, c | HKV_NEED_2DEV, 0, 0, 0);
    hkv_add("cuda.user-context-destroyed", check_user_destroyed, c, 0, 0, 0);
    hkv_add("cuda.primary-reset", check_reset, c, 0, 0, 0);
    hkv_add("cuda.primary-reset-user-stream", check_reset, c, 1, 0, 0);
    hkv_add("cuda.fork-child", check_fork, c, 0, 0, 0);
    hkv_add("cuda.fork-child-driver-only", check_fork, c, 1, 0, 0);
    hkv_add("cuda.new-threads", check_new_thread, c, 0, 0, 0);
    hkv_add("cuda.stream-mismatch", check_stream_mismatch, c, 0, 0, 0);
    hkv_add("cuda.checked-pointer-mismatch", check_checked_mode, c | HKV_NEED_2DEV, 0, 0, 0);
    hkv_add("cuda.capture-host-result", check_capture, c, 0, 0, 0);
    hkv_add("cuda.capture-stream-set-inside-global", check_capture_inside, c, 0, 0, 0);
    hkv_add("cuda.capture-stream-set-inside-thread-local", check_capture_inside, c, 1, 0, 0);
    hkv_add("cuda.capture-stream-set-inside-relaxed", check_capture_inside, c, 2, 0, 0);
}
