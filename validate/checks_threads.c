/* hk-validate: thread rules (docs/abi.md, Handles). Every [handle-safe] slot
 * is called by 8 threads at once on ONE handle, each on its own data, and
 * every result is checked; create/destroy and negotiation run from 8 threads
 * at once. A CUDA plugin's ops run three ways: on the handle's default
 * stream, on CU_STREAM_PER_THREAD (one stream per thread), and with each
 * thread setting its own stream before each call. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkv.h"
#include "hkv_cuda.h"

#define NT 8     /* threads */
#define ITERS 12 /* calls per thread and variant */

typedef struct tctx {
    const hkv_plugin_t *p;
    hk_handle_t *h;
    const hkv_check_t *k;
    int id, dev, streams; /* streams: 0 default, 1 per-thread, 2 own */
    hkv_cuctx_t ctx;      /* the handle's context (own streams) */
    pthread_barrier_t *bar;
    const void *shared;   /* check-specific */
    hkv_custream_t stream; /* its own stream, destroyed once every thread is done */
    hkv_result_t r;
} tctx_t;

typedef void (*tfn_t)(tctx_t *t);

static tfn_t worker_fn;

static void *worker(void *arg)
{
    tctx_t *t = arg;
    pthread_barrier_wait(t->bar);
    worker_fn(t);
    return NULL;
}

/* Runs fn on NT threads at once; merges their results into r. */
static void run_threads(const hkv_plugin_t *p, hk_handle_t *h, const hkv_check_t *k, int dev,
                        int streams, const void *shared, tfn_t fn, hkv_result_t *r)
{
    pthread_t th[NT];
    tctx_t t[NT];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT);
    worker_fn = fn;
    hkv_cuctx_t ctx = streams == 2 ? hkv_cu_primary(0) : NULL; /* what create(NULL) bound */
    int started = 0;
    for (int i = 0; i < NT; i++) {
        t[i] = (tctx_t){p, h, k, i, dev, streams, ctx, &bar, shared, NULL, {0}};
        if (pthread_create(&th[i], NULL, worker, &t[i]) != 0) {
            hkv_fail(r, "cannot start thread %d", i);
            break; /* the started ones wait at the barrier forever: the timeout ends it */
        }
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    if (streams == 2 && p->vt.set_stream) {
        /* The handle may still name any thread's stream: unset it first. */
        p->vt.set_stream(h, NULL);
        hkv_cuctx_t cur = hkv_cu_current();
        hkv_cu.cuCtxSetCurrent(ctx);
        hkv_cu.cuCtxSynchronize();
        for (int i = 0; i < started; i++)
            if (t[i].stream)
                hkv_cu.cuStreamDestroy(t[i].stream);
        hkv_cu.cuCtxSetCurrent(cur);
    }
    for (int i = 0; i < started; i++)
        if (t[i].r.verdict == HKV_FAIL)
            hkv_fail(r, "thread %d: %s", i, t[i].r.detail);
}

static const char *const stream_names[] = {"default stream", "CU_STREAM_PER_THREAD",
                                           "a stream per thread, set before each call"};

/* ---- hk.blas1/1 ---- */

static void sync_context(void)
{
    hkv_cu.cuCtxSynchronize();
}

static void op_worker(tctx_t *t)
{
    static const int64_t shapes[][3] = {{257, 1, 1}, {31, 2, -1}, {64, -1, 3}, {5, 0, 1}};
    hkv_custream_t mine = NULL;
    if (t->streams == 2 && (hkv_cu.cuCtxSetCurrent(t->ctx) || hkv_cu.cuStreamCreate(&mine, 0))) {
        hkv_fail(&t->r, "cannot make a stream in the handle's context");
        return;
    }
    t->stream = mine;
    const hkv_op_t *o = &hkv_ops[t->k->a];
    for (int i = 0; i < ITERS && t->r.verdict != HKV_FAIL; i++) {
        const int64_t *s = shapes[i % 4];
        int64_t incx = s[1], incy = s[2];
        if (o->kind == HKV_SCAL || o->kind == HKV_NRM2)
            incx = incx > 0 ? incx : 1;
        if (t->streams == 2) {
            hk_status_t st = t->p->vt.set_stream(t->h, mine);
            if (st != HK_STATUS_OK) {
                hkv_fail(&t->r, "set_stream(its own stream) gave %s", hkv_st(st));
                break;
            }
        }
        hkv_op_case(t->p, t->h, t->k->a, t->dev, s[0], incx, incy,
                    (uint64_t)t->id * 7919u + (uint64_t)i, t->streams == 2 ? sync_context : NULL,
                    &t->r);
    }
}

static void check_op_threads(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    const hkv_op_t *o = &hkv_ops[k->a];
    if (!hkv_op_present(p, k->a) || !hkv_can_move(p)) {
        hkv_notsup(r, hkv_op_present(p, k->a) ? "hk.memory/1" : o->name);
        return;
    }
    char why[320];
    int cuda = hkv.probe.cuda && hkv_cu_open(why, sizeof why) == 0;
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    int nvar = 0;
    for (int dev = 0; dev < 2; dev++) {
        if (dev && !p->vt.set_pointer_mode)
            continue;
        if (p->vt.set_pointer_mode &&
            p->vt.set_pointer_mode(h, dev ? HK_POINTER_MODE_DEVICE : HK_POINTER_MODE_HOST))
            hkv_fail(r, "set_pointer_mode failed");
        for (int s = 0; s < (cuda && p->vt.set_stream ? 3 : 1); s++) {
            if (p->vt.set_stream &&
                p->vt.set_stream(h, s == 1 ? HKV_STREAM_PER_THREAD : NULL) != HK_STATUS_OK)
                hkv_fail(r, "set_stream(%s) failed", stream_names[s]);
            hkv_result_t v = {0};
            run_threads(p, h, k, dev, s, NULL, op_worker, &v);
            if (v.verdict == HKV_FAIL)
                hkv_fail(r, "%s pointer mode, %s: %s", dev ? "device" : "host", stream_names[s],
                         v.detail);
            nvar++;
        }
    }
    if (p->vt.set_stream)
        p->vt.set_stream(h, NULL);
    hkv_destroy(p, h, r);
    hkv_note(r, "%d threads x %d calls, %d variant(s) (pointer modes%s), every result right", NT,
             ITERS, nvar, cuda ? ", default/per-thread/own streams" : "");
}

/* ---- hk.memory/1 ---- */

static void mem_worker(tctx_t *t)
{
    const hkv_plugin_t *p = t->p;
    for (int i = 0; i < ITERS * 2 && t->r.verdict != HKV_FAIL; i++) {
        size_t bytes = 64 + (size_t)((t->id * 131 + i * 17) % 4000);
        unsigned char in[4096], out[4096];
        for (size_t j = 0; j < bytes; j++)
            in[j] = (unsigned char)(j * 7 + (size_t)t->id * 31 + (size_t)i);
        void *d = hkv_dalloc(p, t->h, bytes, &t->r);
        if (!d)
            break;
        if (t->k->a == 4 && p->mem.memset_) { /* memset */
            hk_status_t st = p->mem.memset_(t->h, d, t->id + 1, bytes);
            if (st != HK_STATUS_OK)
                hkv_fail(&t->r, "memset gave %s", hkv_st(st));
            memset(in, t->id + 1, bytes);
        } else {
            hkv_put(p, t->h, d, in, bytes, &t->r);
        }
        if (!hkv_get(p, t->h, out, d, bytes, &t->r) && memcmp(in, out, bytes) != 0)
            hkv_fail(&t->r, "%zu bytes did not come back as written", bytes);
        hkv_dfree(p, t->h, d);
    }
}

static void check_mem_threads(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    void *slots[] = {(void *)p->mem.alloc, (void *)p->mem.free_, (void *)p->mem.copy_to_device,
                     (void *)p->mem.copy_to_host, (void *)p->mem.memset_};
    static const char *const names[] = {"alloc", "free", "copy_to_device", "copy_to_host",
                                        "memset"};
    if (!slots[k->a] || !hkv_can_move(p) || !p->mem.alloc) {
        hkv_notsup(r, !slots[k->a] ? names[k->a] : "hk.memory/1");
        return;
    }
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    run_threads(p, h, k, 0, 0, NULL, mem_worker, r);
    hkv_destroy(p, h, r);
    hkv_note(r, "%d threads x %d alloc/%s/copy back/free, every byte right", NT, ITERS * 2,
             k->a == 4 ? "memset" : "copy");
}

/* ---- core slots ---- */

typedef struct core_shared {
    hk_handle_info_t info;
    char lines[2][1100]; /* the two failure lines (last_error_copy) */
} core_shared_t;

static void core_worker(tctx_t *t)
{
    const hkv_plugin_t *p = t->p;
    const core_shared_t *sh = t->shared;
    hk_handle_t *h = t->h;
    int cuda = hkv.probe.cuda;
    for (int i = 0; i < ITERS * 8 && t->r.verdict != HKV_FAIL; i++) {
        hk_status_t st = HK_STATUS_OK;
        void *s = (void *)1;
        hk_pointer_mode_t m;
        switch (t->k->a) {
        case 0: /* set_stream */
            st = p->vt.set_stream(h, cuda && (i + t->id) % 2 ? HKV_STREAM_PER_THREAD : NULL);
            break;
        case 1: /* get_stream */
            st = p->vt.get_stream(h, &s);
            if (st == HK_STATUS_OK && s != (cuda ? HKV_STREAM_PER_THREAD : NULL))
                hkv_fail(&t->r, "get_stream gave %p, not the stream set", s);
            break;
        case 2: /* set_pointer_mode */
            st = p->vt.set_pointer_mode(h, (i + t->id) % 2 ? HK_POINTER_MODE_DEVICE
                                                           : HK_POINTER_MODE_HOST);
            break;
        case 3: /* get_pointer_mode */
            st = p->vt.get_pointer_mode(h, &m);
            if (st == HK_STATUS_OK && m != HK_POINTER_MODE_DEVICE)
                hkv_fail(&t->r, "get_pointer_mode gave %d, not DEVICE as set", (int)m);
            break;
        case 4: /* last_error: the pointer is only valid until the next call */
            if (!p->vt.last_error(h))
                hkv_fail(&t->r, "last_error returned NULL");
            break;
        case 5: { /* handle_info */
            hk_handle_info_t in = {.size = sizeof in};
            st = p->vt.handle_info(h, &in);
            if (st == HK_STATUS_OK && memcmp(&in, &sh->info, sizeof in) != 0)
                hkv_fail(&t->r, "handle_info gave other values than before the threads");
            break;
        }
        case 6: /* synchronize, between ops */
            if (i % 8 == 0 && p->blas.saxpy && hkv_can_move(p))
                hkv_op_case(p, h, 0, 0, 100, 1, 1, (uint64_t)(t->id * 100 + i), NULL, &t->r);
            st = p->vt.synchronize(h);
            break;
        default: { /* last_error_copy while other threads fail calls */
            char buf[1100];
            size_t need = 0;
            if (t->id % 2)
                p->vt.set_pointer_mode(h, (hk_pointer_mode_t)7);
            else
                p->vt.get_pointer_mode(h, NULL);
            st = p->vt.last_error_copy(h, buf, sizeof buf, &need);
            if (st == HK_STATUS_OK && strcmp(buf, sh->lines[0]) && strcmp(buf, sh->lines[1]))
                hkv_fail(&t->r, "last_error_copy gave \"%.60s\", neither failure's line", buf);
            else if (st == HK_STATUS_OK && need != strlen(buf) + 1)
                hkv_fail(&t->r, "last_error_copy: *needed %zu for a %zu-byte line", need,
                         strlen(buf));
            break;
        }
        }
        if (st != HK_STATUS_OK)
            hkv_fail(&t->r, "call %d gave %s", i, hkv_st(st));
    }
}

static void check_core_threads(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    static const char *const names[] = {"set_stream", "get_stream", "set_pointer_mode",
                                        "get_pointer_mode", "last_error", "handle_info",
                                        "synchronize", "last_error_copy"};
    void *slots[] = {(void *)p->vt.set_stream, (void *)p->vt.get_stream,
                     (void *)p->vt.set_pointer_mode, (void *)p->vt.get_pointer_mode,
                     (void *)p->vt.last_error, (void *)p->vt.handle_info,
                     (void *)p->vt.synchronize, (void *)p->vt.last_error_copy};
    if (!slots[k->a] || (k->a == 7 && (!p->vt.set_pointer_mode || !p->vt.get_pointer_mode))) {
        hkv_notsup(r, slots[k->a] ? "set_pointer_mode or get_pointer_mode" : names[k->a]);
        return;
    }
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    static core_shared_t sh;
    sh.info.size = sizeof sh.info;
    if (p->vt.handle_info)
        p->vt.handle_info(h, &sh.info);
    if (k->a == 1 && hkv.probe.cuda)
        p->vt.set_stream(h, HKV_STREAM_PER_THREAD);
    if (k->a == 3)
        p->vt.set_pointer_mode(h, HK_POINTER_MODE_DEVICE);
    if (k->a == 7) {
        size_t need;
        p->vt.set_pointer_mode(h, (hk_pointer_mode_t)7);
        p->vt.last_error_copy(h, sh.lines[0], sizeof sh.lines[0], &need);
        p->vt.get_pointer_mode(h, NULL);
        p->vt.last_error_copy(h, sh.lines[1], sizeof sh.lines[1], &need);
    }
    run_threads(p, h, k, 0, 0, &sh, core_worker, r);
    if (p->vt.set_stream)
        p->vt.set_stream(h, NULL);
    hkv_destroy(p, h, r);
    hkv_note(r, "%d threads x %d calls on one handle, every result right", NT, ITERS * 8);
}

/* ---- [thread-safe] slots ---- */

static void create_worker(tctx_t *t)
{
    const hkv_plugin_t *p = t->p;
    for (int i = 0; i < ITERS * 2 && t->r.verdict != HKV_FAIL; i++) {
        hk_handle_t *h = hkv_handle(p, NULL, &t->r);
        if (!h)
            break;
        if (i % 4 == 0 && p->blas.saxpy && hkv_can_move(p))
            hkv_op_case(p, h, 0, 0, 33, 1, 1, (uint64_t)(t->id * 1000 + i), NULL, &t->r);
        hkv_destroy(p, h, &t->r);
    }
}

/* A CUDA plugin's handles retain the device's primary context, and the
 * last destroy gives it back: with no other retain the driver tears the
 * context down and the next create builds it again (about 0.1 s on an
 * H200, so 8 x 24 cycles took 26 s there). A host that uses the CUDA runtime
 * holds its own retain for as long as it runs; the check does the same for
 * device 0, so that it times the plugin, not the making of contexts. */
static void check_create_threads(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    hkv_cudevice_t d = 0;
    hkv_cuctx_t pc = NULL;
    char why[320];
    int held = hkv.probe.cuda && hkv_cu_open(why, sizeof why) == 0 && hkv_cu.cuDeviceGet(&d, 0) == 0
               && hkv_cu.cuDevicePrimaryCtxRetain(&pc, d) == 0;
    run_threads(p, NULL, k, 0, 0, NULL, create_worker, r);
    if (held)
        hkv_cu.cuDevicePrimaryCtxRelease(d);
    hkv_note(r, "%d threads x %d create/use/destroy%s", NT, ITERS * 2,
             held ? " (device 0's primary context retained by the check, as the runtime of "
                    "a host would)" : "");
}

static void negotiate_worker(tctx_t *t)
{
    const hkv_plugin_t *p = t->p;
    for (int i = 0; i < ITERS * 4 && t->r.verdict != HKV_FAIL; i++) {
        hk_negotiate_answer_t a;
        hk_status_t st = hkv_negotiate(p, HKV_ABI_1_0, HKV_ABI_MAX, sizeof a, &a);
        if (st != HK_STATUS_OK || a.vtable != p->answer.vtable || a.name != p->answer.name ||
            a.abi_version != p->abi)
            hkv_fail(&t->r, "negotiation %d gave %s or another answer", i, hkv_st(st));
    }
}

static void check_negotiate_threads(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    run_threads(p, NULL, k, 0, 0, NULL, negotiate_worker, r);
    hkv_note(r, "%d threads x %d negotiations, one answer", NT, ITERS * 4);
}

/* One thread flips the pointer mode while the others compute with scalars
 * valid in both modes (host memory): each op uses the old or the new mode,
 * never a mix, so every result is right. */
static void switch_worker(tctx_t *t)
{
    const hkv_plugin_t *p = t->p;
    for (int i = 0; i < ITERS * 4 && t->r.verdict != HKV_FAIL; i++) {
        if (t->id == 0) {
            p->vt.set_pointer_mode(t->h, i % 2 ? HK_POINTER_MODE_DEVICE : HK_POINTER_MODE_HOST);
            continue;
        }
        float *v = hkv_dalloc(p, t->h, 3 * sizeof(float) * 64, &t->r);
        if (!v)
            break;
        float *x = v, *y = v + 64, *sc = v + 128; /* sc[0] alpha, sc[1] result */
        for (int j = 0; j < 64; j++)
            x[j] = (float)(j + t->id), y[j] = 1.0f;
        sc[0] = 2.0f;
        hk_status_t st = p->blas.saxpy(t->h, 64, &sc[0], x, 1, y, 1);
        if (st == HK_STATUS_OK && p->blas.sdot)
            st = p->blas.sdot(t->h, 64, x, 1, x, 1, &sc[1]);
        if (st == HK_STATUS_OK && p->vt.synchronize)
            st = p->vt.synchronize(t->h);
        double dot = 0;
        for (int j = 0; j < 64; j++)
            dot += (double)x[j] * x[j];
        if (st != HK_STATUS_OK)
            hkv_fail(&t->r, "saxpy/sdot/synchronize gave %s", hkv_st(st));
        else if (y[63] != 2.0f * (float)(63 + t->id) + 1.0f || (p->blas.sdot && sc[1] != (float)dot))
            hkv_fail(&t->r, "a result is wrong while the pointer mode changes");
        hkv_dfree(p, t->h, v);
    }
}

static void check_mode_switch(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    if (!hkv.probe.host_memory) {
        hkv_skip(r, "needs scalars valid in both pointer modes: only for host-memory plugins");
        return;
    }
    if (!p->blas.saxpy || !p->vt.set_pointer_mode || !hkv_can_move(p)) {
        hkv_notsup(r, !p->blas.saxpy ? "saxpy" : p->vt.set_pointer_mode ? "hk.memory/1"
                                                                         : "set_pointer_mode");
        return;
    }
    hk_handle_t *h = hkv_handle(p, NULL, r);
    if (!h)
        return;
    run_threads(p, h, k, 0, 0, NULL, switch_worker, r);
    hkv_destroy(p, h, r);
    hkv_note(r, "1 thread switching modes, %d computing: every result right", NT - 1);
}

void hkv_register_threads(void)
{
    char name[96];
    hkv_add("threads.negotiate", check_negotiate_threads, HKV_NEED_PLUGIN, 0, 0, 0);
    hkv_add("threads.create-destroy", check_create_threads, HKV_NEED_HANDLE, 0, 0, 0);
    static const char *const core[] = {"set_stream", "get_stream", "set_pointer_mode",
                                       "get_pointer_mode", "last_error", "handle_info",
                                       "synchronize", "last_error_copy"};
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "threads.%s", core[i]);
        hkv_add(name, check_core_threads, HKV_NEED_HANDLE, i, 0, 0);
    }
    hkv_add("threads.pointer-mode-switch", check_mode_switch, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_ops_init();
    for (int op = 0; op < HKV_NOPS; op++) {
        if (hkv_ops[op].kind == HKV_OTHER)
            continue; /* no rule for it: listed once, by hkv_register_ops */
        snprintf(name, sizeof name, "threads.%s", hkv_ops[op].name);
        hkv_add(name, check_op_threads, HKV_NEED_HANDLE, op, 0, 0);
    }
    static const char *const mem[] = {"alloc", "free", "copy_to_device", "copy_to_host",
                                      "memset"};
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "threads.%s", mem[i]);
        hkv_add(name, check_mem_threads, HKV_NEED_HANDLE, i, 0, 0);
    }
}
