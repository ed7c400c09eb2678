/* hk-validate: every slot leaves the calling thread's current CUDA context as
 * it found it, on success and on failure (docs/abi.md, "The caller's CUDA
 * state"), with nothing current and with a user context current. The one
 * exception, handle_create with the default device while nothing is
 * current, is left out of the "nothing current" state. */
#include <stdio.h>
#include <string.h>

#include "hkv.h"
#include "hkv_cuda.h"

typedef struct cur_env {
    const hkv_plugin_t *p;
    hk_handle_t *h;
    void *x, *y, *alpha, *result; /* memory of the handle's device */
    int user;                      /* a user context is current */
} cur_env_t;

#define NCORE 15
#define NMEM 10
#define NBLAS_EACH 5

/* Makes core call i; returns its name, or NULL when it does not apply. */
static const char *core_call(const cur_env_t *e, int i)
{
    const hkv_plugin_t *p = e->p;
    const hkv_vtable_t *v = &p->vt;
    hk_handle_t *h = e->h, *t = NULL;
    void *s;
    hk_pointer_mode_t m;
    hk_handle_info_t info = {.size = sizeof info}, tiny = {.size = 0};
    char buf[64];
    size_t need;
    hk_create_info_t c0 = {sizeof c0, 0, 0};
    switch (i) {
    case 0:
        if (v->handle_create(&c0, &t) == HK_STATUS_OK)
            v->handle_destroy(t);
        return "handle_create(device 0) and handle_destroy";
    case 1:
        if (!e->user)
            return NULL; /* the documented exception */
        if (v->handle_create(NULL, &t) == HK_STATUS_OK)
            v->handle_destroy(t);
        return "handle_create(NULL) and handle_destroy";
    case 2: return v->set_stream ? (v->set_stream(h, NULL), "set_stream(NULL)") : NULL;
    case 3:
        if (!v->set_stream)
            return NULL;
        v->set_stream(h, HKV_STREAM_PER_THREAD);
        v->set_stream(h, NULL);
        return "set_stream(CU_STREAM_PER_THREAD)";
    case 4: return v->get_stream ? (v->get_stream(h, &s), "get_stream") : NULL;
    case 5: return v->get_stream ? (v->get_stream(h, NULL), "get_stream(h, NULL)") : NULL;
    case 6:
        return v->set_pointer_mode ? (v->set_pointer_mode(h, HK_POINTER_MODE_HOST),
                                      "set_pointer_mode")
                                   : NULL;
    case 7:
        return v->set_pointer_mode ? (v->set_pointer_mode(h, (hk_pointer_mode_t)7),
                                      "set_pointer_mode(7)")
                                   : NULL;
    case 8: return v->get_pointer_mode ? (v->get_pointer_mode(h, &m), "get_pointer_mode") : NULL;
    case 9: return v->handle_info ? (v->handle_info(h, &info), "handle_info") : NULL;
    case 10: return v->handle_info ? (v->handle_info(h, &tiny), "handle_info(size 0)") : NULL;
    case 11: return v->synchronize ? (v->synchronize(h), "synchronize") : NULL;
    case 12: return v->last_error ? (v->last_error(h), "last_error") : NULL;
    case 13:
        return v->last_error_copy ? (v->last_error_copy(h, buf, sizeof buf, &need),
                                     "last_error_copy")
                                  : NULL;
    default: return v->synchronize ? (v->synchronize(NULL), "synchronize(NULL)") : NULL;
    }
}

static const char *mem_call(const cur_env_t *e, int i)
{
    const hk_memory_v1_t *m = &e->p->mem;
    hk_handle_t *h = e->h;
    unsigned char host[64] = {0};
    void *q = NULL;
    switch (i) {
    case 0:
        if (!m->alloc || !m->free_)
            return NULL;
        if (m->alloc(h, 64, &q) == HK_STATUS_OK)
            m->free_(h, q);
        return "alloc and free";
    case 1: return m->alloc ? (m->alloc(h, 64, NULL), "alloc(out NULL)") : NULL;
    case 2: return m->alloc ? (m->alloc(NULL, 64, &q), "alloc(NULL handle)") : NULL;
    case 3: return m->free_ ? (m->free_(h, NULL), "free(NULL)") : NULL;
    case 4:
        return m->copy_to_device ? (m->copy_to_device(h, e->x, host, 64), "copy_to_device") : NULL;
    case 5:
        return m->copy_to_device ? (m->copy_to_device(h, NULL, host, 64), "copy_to_device(NULL)")
                                 : NULL;
    case 6: return m->copy_to_host ? (m->copy_to_host(h, host, e->x, 64), "copy_to_host") : NULL;
    case 7:
        return m->copy_to_host ? (m->copy_to_host(h, host, NULL, 64), "copy_to_host(NULL)") : NULL;
    case 8: return m->memset_ ? (m->memset_(h, e->x, 0, 64), "memset") : NULL;
    default: return m->memset_ ? (m->memset_(h, NULL, 0, 64), "memset(NULL)") : NULL;
    }
}

/* Op op, variant i: host mode, device mode, NULL x, INT64_MIN incx, NULL handle. */
static const char *blas_call(const cur_env_t *e, int op, int i, char *name, size_t len)
{
    if (!hkv_op_present(e->p, op) || hkv_ops[op].kind == HKV_OTHER)
        return NULL;
    static const char *const what[] = {"host mode", "device mode", "x NULL", "incx INT64_MIN",
                                       "NULL handle"};
    double two = 2;
    float twof = 2;
    unsigned char res[8];
    const void *alpha = hkv_ops[op].esz == 4 ? (const void *)&twof : (const void *)&two;
    void *result = res;
    int dev = i == 1 && e->p->vt.set_pointer_mode;
    if (i == 1 && !dev)
        return NULL;
    if (dev) {
        e->p->vt.set_pointer_mode(e->h, HK_POINTER_MODE_DEVICE);
        alpha = e->alpha;
        result = e->result;
    }
    hkv_call(e->p, op, i == 4 ? NULL : e->h, 16, alpha, i == 2 ? NULL : e->x,
             i == 3 ? INT64_MIN : 1, e->y, 1, result);
    if (dev)
        e->p->vt.set_pointer_mode(e->h, HK_POINTER_MODE_HOST);
    snprintf(name, len, "%s (%s)", hkv_ops[op].name, what[i]);
    return name;
}

static void check_current(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    if (hkv_cuda_begin(r))
        return;
    hkv_cuctx_t user = NULL;
    if (hkv_cu_user_context(hkv.probe.ndev >= 2 ? 1 : 0, &user) || hkv_cu.cuCtxSetCurrent(NULL)) {
        hkv_fail(r, "cannot make a user context");
        return;
    }
    hk_create_info_t c0 = {sizeof c0, 0, 0};
    hk_handle_t *h = hkv_handle(p, &c0, r);
    if (!h)
        return;
    cur_env_t e = {p, h, NULL, NULL, NULL, NULL, 0};
    if (k->a != 0) {
        if (!hkv_can_move(p)) {
            hkv_notsup(r, "hk.memory/1");
            hkv_destroy(p, h, r);
            return;
        }
        e.x = hkv_dalloc(p, h, 128, r);
        e.y = hkv_dalloc(p, h, 128, r);
        e.alpha = hkv_dalloc(p, h, 8, r);
        e.result = hkv_dalloc(p, h, 8, r);
        unsigned char zero[128] = {0};
        if (!e.x || !e.y || !e.alpha || !e.result || hkv_put(p, h, e.x, zero, 128, r) ||
            hkv_put(p, h, e.y, zero, 128, r) || hkv_put(p, h, e.alpha, zero, 8, r))
            return;
    }
    int calls = 0;
    for (int state = 0; state < 2; state++) {
        hkv_cuctx_t want = state ? user : NULL;
        hkv_cu.cuCtxSetCurrent(want);
        e.user = state;
        int n = k->a == 0 ? NCORE : k->a == 1 ? HKV_NOPS * NBLAS_EACH : NMEM;
        for (int i = 0; i < n; i++) {
            char name[96], after[160];
            const char *what = k->a == 0   ? core_call(&e, i)
                               : k->a == 1 ? blas_call(&e, i / NBLAS_EACH, i % NBLAS_EACH, name,
                                                       sizeof name)
                                           : mem_call(&e, i);
            if (!what)
                continue;
            calls++;
            snprintf(after, sizeof after, "%s with %s current", what,
                     state ? "a user context" : "nothing");
            hkv_same_current(want, after, r);
            hkv_cu.cuCtxSetCurrent(want);
        }
    }
    hkv_cu.cuCtxSetCurrent(NULL);
    hkv_dfree(p, h, e.x);
    hkv_dfree(p, h, e.y);
    hkv_dfree(p, h, e.alpha);
    hkv_dfree(p, h, e.result);
    hkv_destroy(p, h, r);
    hkv_cu.cuCtxDestroy(user);
    hkv_note(r, "%d calls (successes and failures), nothing and a user context current: "
             "the context unchanged after each", calls);
}

void hkv_register_cuda_current(void)
{
    const unsigned c = HKV_NEED_HANDLE | HKV_NEED_CUDA;
    hkv_ops_init();
    hkv_add("cuda.current-unchanged.core", check_current, c, 0, 0, 0);
    hkv_add("cuda.current-unchanged.blas1", check_current, c, 1, 0, 0);
    hkv_add("cuda.current-unchanged.memory", check_current, c, 2, 0, 0);
}
