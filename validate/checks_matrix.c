/* hk-validate: the bad-input matrix. Every slot of hk.blas1/1 (in both
 * pointer modes) and of hk.memory/1 gets every bad input that applies to it,
 * one case per process, with the status docs/abi.md ("hk.blas1/1: argument
 * rules") prescribes. A failed case must also leave a one-line reason naming
 * the argument; a case with nothing to do must write nothing but the 0
 * result. --matrix prints each case's status; --compare compares two plugins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkv.h"

#define K_AXPY (1u << HKV_AXPY)
#define K_SCAL (1u << HKV_SCAL)
#define K_COPY (1u << HKV_COPY)
#define K_DOT (1u << HKV_DOT)
#define K_NRM2 (1u << HKV_NRM2)
#define K_ALL (K_AXPY | K_SCAL | K_COPY | K_DOT | K_NRM2)
#define K_TWO (K_AXPY | K_COPY | K_DOT) /* ops with a y */
#define K_RES (K_DOT | K_NRM2)          /* ops with a result */

typedef enum mid {
    M_NULL_HANDLE, M_NULL_HANDLE_N0, M_DESTROYED, M_FOREIGN, M_N_NEG, M_N0_NULL_ARGS,
    M_N0_NULL_RESULT, M_NNEG_NULL_RESULT, M_INCX0_NOTHING, M_INCXNEG_NULL, M_INCXMIN_NOTHING,
    M_NULL_X, M_NULL_Y, M_NULL_ALPHA, M_NULL_RESULT, M_INCX_MIN, M_INCY_MIN, M_INCY0_DEST,
    M_INCX0_SOURCE, M_INCY0_SOURCE, M_INCX_MAX, M_INCY_MAX, M_SPAN_X, M_SPAN_Y, M_WRAP_X,
    M_WRAP_X_NEG, M_WRAP_Y, M_COUNT
} mid_t;

typedef struct mcase {
    const char *name;
    unsigned kinds;     /* ops it applies to */
    hk_status_t expect;
    const char *names;  /* "a|b": the reason must name one of these */
    int nothing;        /* nothing to do: no write but the 0 result */
} mcase_t;

static const mcase_t cases[M_COUNT] = {
    [M_NULL_HANDLE] = {"null-handle", K_ALL, HK_STATUS_INVALID_HANDLE, NULL, 0},
    [M_NULL_HANDLE_N0] = {"null-handle-n0", K_ALL, HK_STATUS_INVALID_HANDLE, NULL, 0},
    [M_DESTROYED] = {"destroyed-handle", K_ALL, HK_STATUS_INVALID_HANDLE, NULL, 0},
    [M_FOREIGN] = {"foreign-handle", K_ALL, HK_STATUS_INVALID_HANDLE, NULL, 0},
    [M_N_NEG] = {"n-negative", K_ALL, HK_STATUS_OK, NULL, 1},
    [M_N0_NULL_ARGS] = {"n-zero-null-vectors", K_ALL, HK_STATUS_OK, NULL, 1},
    [M_N0_NULL_RESULT] = {"n-zero-null-result", K_RES, HK_STATUS_OK, NULL, 1},
    [M_NNEG_NULL_RESULT] = {"n-negative-null-result", K_RES, HK_STATUS_OK, NULL, 1},
    [M_INCX0_NOTHING] = {"incx-zero", K_SCAL | K_NRM2, HK_STATUS_OK, NULL, 1},
    [M_INCXNEG_NULL] = {"incx-negative-null-x", K_SCAL | K_NRM2, HK_STATUS_OK, NULL, 1},
    [M_INCXMIN_NOTHING] = {"incx-min", K_SCAL | K_NRM2, HK_STATUS_OK, NULL, 1},
    [M_NULL_X] = {"null-x", K_ALL, HK_STATUS_NULL_POINTER, "x", 0},
    [M_NULL_Y] = {"null-y", K_TWO, HK_STATUS_NULL_POINTER, "y", 0},
    [M_NULL_ALPHA] = {"null-alpha", K_AXPY | K_SCAL, HK_STATUS_NULL_POINTER, "alpha", 0},
    [M_NULL_RESULT] = {"null-result", K_RES, HK_STATUS_NULL_POINTER, "result", 0},
    [M_INCX_MIN] = {"incx-min", K_TWO, HK_STATUS_INVALID_VALUE, "incx|x", 0},
    [M_INCY_MIN] = {"incy-min", K_TWO, HK_STATUS_INVALID_VALUE, "incy|y", 0},
    [M_INCY0_DEST] = {"incy-zero-destination", K_AXPY | K_COPY, HK_STATUS_INVALID_VALUE,
                      "incy|y", 0},
    [M_INCX0_SOURCE] = {"incx-zero-source", K_TWO, HK_STATUS_OK, NULL, 0},
    [M_INCY0_SOURCE] = {"incy-zero-source", K_DOT, HK_STATUS_OK, NULL, 0},
    [M_INCX_MAX] = {"incx-max-span-overflow", K_ALL, HK_STATUS_INVALID_VALUE, "incx|x", 0},
    [M_INCY_MAX] = {"incy-max-span-overflow", K_TWO, HK_STATUS_INVALID_VALUE, "incy|y", 0},
    [M_SPAN_X] = {"span-x-over-ptrdiff-max", K_ALL, HK_STATUS_INVALID_VALUE, "x|y|n", 0},
    [M_SPAN_Y] = {"span-y-over-ptrdiff-max", K_TWO, HK_STATUS_INVALID_VALUE, "y|n", 0},
    [M_WRAP_X] = {"x-wraps-address-space", K_ALL, HK_STATUS_INVALID_VALUE, "x", 0},
    [M_WRAP_X_NEG] = {"x-wraps-negative-inc", K_TWO, HK_STATUS_INVALID_VALUE, "x", 0},
    [M_WRAP_Y] = {"y-wraps-address-space", K_TWO, HK_STATUS_INVALID_VALUE, "y", 0},
};

#define NE 64 /* elements of each test vector */

/* 1 when the reason names one of the '|'-separated words. */
static int names_any(const char *text, const char *words)
{
    char w[64];
    for (const char *s = words; s && *s;) {
        const char *bar = strchr(s, '|');
        size_t n = bar ? (size_t)(bar - s) : strlen(s);
        snprintf(w, sizeof w, "%.*s", (int)n, s);
        if (hkv_names(text, w))
            return 1;
        s = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* The reason left by a failed call on a live handle. */
static void reason_ok(const hkv_plugin_t *p, hk_handle_t *h, const char *words, hkv_result_t *r)
{
    char e[1100], why[128];
    hkv_last_error(p, h, e, sizeof e);
    if (!hkv_text_ok(e, why, sizeof why))
        hkv_fail(r, "right status, but last_error: %s", why);
    else if (words && !names_any(e, words))
        hkv_fail(r, "right status, but the reason \"%.100s\" does not name %s", e, words);
    if (p->vt.last_error_copy) {
        char c[1100];
        size_t need = 0;
        if (p->vt.last_error_copy(h, c, sizeof c, &need) != HK_STATUS_OK || strcmp(c, e) != 0)
            hkv_fail(r, "last_error_copy does not give last_error's line");
    }
}

/* 256 bytes below the top of the address space, aligned for both
 * precisions: 128 elements from there wrap around. */
static void *near_top(void)
{
    return (void *)(~(uintptr_t)0 - 255u);
}

typedef struct args {
    hk_handle_t *h;
    int64_t n, incx, incy;
    const void *alpha, *x;
    void *y, *result;
} args_t;

/* Turns the good arguments into case id's. */
static void make_case(mid_t id, const hkv_op_t *o, args_t *a, hk_handle_t *dead, hk_handle_t *fake)
{
    switch (id) {
    case M_NULL_HANDLE: a->h = NULL; break;
    case M_NULL_HANDLE_N0: a->h = NULL, a->n = 0, a->x = a->alpha = NULL, a->y = NULL; break;
    case M_DESTROYED: a->h = dead; break;
    case M_FOREIGN: a->h = fake; break;
    case M_N_NEG: a->n = -1; break;
    case M_N0_NULL_ARGS: a->n = 0, a->x = a->alpha = NULL, a->y = NULL; break;
    case M_N0_NULL_RESULT: a->n = 0, a->result = NULL; break;
    case M_NNEG_NULL_RESULT: a->n = -3, a->result = NULL; break;
    case M_INCX0_NOTHING: a->incx = 0; break;
    case M_INCXNEG_NULL: a->incx = -1, a->x = a->alpha = NULL; break;
    case M_INCXMIN_NOTHING: a->incx = INT64_MIN; break;
    case M_NULL_X: a->x = NULL; break;
    case M_NULL_Y: a->y = NULL; break;
    case M_NULL_ALPHA: a->alpha = NULL; break;
    case M_NULL_RESULT: a->result = NULL; break;
    case M_INCX_MIN: a->incx = INT64_MIN; break;
    case M_INCY_MIN: a->incy = INT64_MIN; break;
    case M_INCY0_DEST: a->incy = 0; break;
    case M_INCX0_SOURCE: a->incx = 0; break;
    case M_INCY0_SOURCE: a->incy = 0; break;
    case M_INCX_MAX: a->n = 2, a->incx = INT64_MAX; break;
    case M_INCY_MAX: a->n = 2, a->incy = INT64_MAX; break;
    case M_SPAN_X:
        a->n = (int64_t)(PTRDIFF_MAX / (ptrdiff_t)o->esz) + 1;
        if (o->kind == HKV_DOT)
            a->incy = 0; /* only x is too long */
        break;
    case M_SPAN_Y: a->n = (int64_t)(PTRDIFF_MAX / (ptrdiff_t)o->esz) + 1, a->incx = 0; break;
    case M_WRAP_X: a->x = near_top(), a->n = 128; break;
    case M_WRAP_X_NEG: a->x = near_top(), a->n = 128, a->incx = -1; break;
    case M_WRAP_Y: a->y = near_top(), a->n = 128; break;
    default: break;
    }
}

static int equal_bytes(const void *a, const void *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

/* After a case with nothing to do: the written vector as it was, result 0. */
static void nothing_written(const hkv_plugin_t *p, hk_handle_t *h, const hkv_op_t *o,
                            const args_t *a, void *x, void *y, const unsigned char *init,
                            void *result, int dev, hkv_result_t *r)
{
    unsigned char now[NE * 8];
    size_t bytes = NE * o->esz;
    void *dest = o->kind == HKV_SCAL ? x : (o->kind == HKV_AXPY || o->kind == HKV_COPY) ? y : NULL;
    if (dest && !hkv_get(p, h, now, dest, bytes, r) && !equal_bytes(now, init, bytes))
        hkv_fail(r, "OK, but it wrote into %s with nothing to do", dest == x ? "x" : "y");
    if (((1u << o->kind) & K_RES) && a->result) {
        double d = 1;
        float f = 1;
        void *to = o->esz == 4 ? (void *)&f : (void *)&d;
        if (dev ? hkv_get(p, h, to, result, o->esz, r) : (memcpy(to, result, o->esz), 0))
            return;
        if ((o->esz == 4 ? (double)f : d) != 0.0)
            hkv_fail(r, "OK, but *result is %g, not 0", o->esz == 4 ? (double)f : d);
    }
}

/* The handles a case picks from: a live one, one made and destroyed here,
 * and a zeroed block nobody made. 0, or -1 (recorded) when none can be made. */
static int case_handles(const hkv_plugin_t *p, hk_handle_t **live, hk_handle_t **dead,
                        hk_handle_t **foreign, hkv_result_t *r)
{
    static _Alignas(64) unsigned char zeroed[4096];
    *foreign = (hk_handle_t *)(void *)zeroed;
    *live = hkv_handle(p, NULL, r);
    *dead = hkv_handle(p, NULL, r);
    if (!*live || !*dead)
        return -1;
    hkv_destroy(p, *dead, r);
    return 0;
}

static void run_blas_case(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    const hkv_op_t *o = &hkv_ops[k->a];
    const int dev = k->b;
    const mcase_t *c = &cases[k->c];
    if (!hkv_op_present(p, k->a) || (dev && !p->vt.set_pointer_mode) || !hkv_can_move(p)) {
        hkv_notsup(r, !hkv_op_present(p, k->a) ? o->name
                      : !hkv_can_move(p)       ? "hk.memory/1"
                                               : "set_pointer_mode");
        return;
    }
    hk_handle_t *h, *dead, *foreign;
    if (case_handles(p, &h, &dead, &foreign, r) != 0)
        return;
    if (dev && p->vt.set_pointer_mode(h, HK_POINTER_MODE_DEVICE) != HK_STATUS_OK)
        hkv_fail(r, "set_pointer_mode(DEVICE) failed");
    unsigned char init[NE * 8], two[8], seven[8];
    for (int i = 0; i < NE; i++) {
        float f = (float)(i + 1);
        double d = i + 1;
        memcpy(init + (size_t)i * o->esz, o->esz == 4 ? (void *)&f : (void *)&d, o->esz);
    }
    float f2 = 2, f7 = 7;
    double d2 = 2, d7 = 7;
    memcpy(two, o->esz == 4 ? (void *)&f2 : (void *)&d2, o->esz);
    memcpy(seven, o->esz == 4 ? (void *)&f7 : (void *)&d7, o->esz);
    size_t bytes = NE * o->esz;
    void *x = hkv_dalloc(p, h, bytes, r), *y = hkv_dalloc(p, h, bytes, r);
    void *alpha = dev ? hkv_dalloc(p, h, o->esz, r) : two;
    void *result = dev ? hkv_dalloc(p, h, o->esz, r) : seven;
    if (r->verdict == HKV_FAIL || hkv_put(p, h, x, init, bytes, r) ||
        hkv_put(p, h, y, init, bytes, r) || (dev && hkv_put(p, h, alpha, two, o->esz, r)) ||
        (dev && hkv_put(p, h, result, seven, o->esz, r))) {
        snprintf(r->observed, sizeof r->observed, "SETUP-FAILED");
        return;
    }
    args_t a = {h, 4, 1, 1, alpha, x, y, result};
    make_case((mid_t)k->c, o, &a, dead, foreign);
    hk_status_t st = hkv_call(p, k->a, a.h, a.n, a.alpha, a.x, a.incx, a.y, a.incy, a.result);
    snprintf(r->observed, sizeof r->observed, "%s", hkv_st(st));
    if (st != c->expect)
        hkv_fail(r, "%s; want %s", hkv_st(st), hkv_st(c->expect));
    else if (st != HK_STATUS_OK && a.h == h)
        reason_ok(p, h, c->names, r);
    else if (st == HK_STATUS_OK && c->nothing)
        nothing_written(p, h, o, &a, x, y, init, result, dev, r);
    hkv_note(r, "%s", hkv_st(st));
    hkv_dfree(p, h, x);
    hkv_dfree(p, h, y);
    if (dev) {
        hkv_dfree(p, h, alpha);
        hkv_dfree(p, h, result);
    }
    hkv_destroy(p, h, r);
}

/* ---- hk.memory/1 ---- */

enum { S_ALLOC, S_FREE, S_TO_DEVICE, S_TO_HOST, S_MEMSET, S_COUNT };
static const char *const mem_slots[S_COUNT] = {"alloc", "free", "copy_to_device", "copy_to_host",
                                              "memset"};
enum { MC_NULL_HANDLE, MC_DESTROYED, MC_FOREIGN, MC_NULL_OUT, MC_ZERO_BYTES, MC_NULL_PTR,
       MC_NULL_DST, MC_NULL_SRC, MC_COUNT };
static const struct {
    const char *name;
    unsigned slots;
    hk_status_t expect;
    const char *names;
} mem_cases[MC_COUNT] = {
    [MC_NULL_HANDLE] = {"null-handle", 0x1f, HK_STATUS_INVALID_HANDLE, NULL},
    [MC_DESTROYED] = {"destroyed-handle", 0x1f, HK_STATUS_INVALID_HANDLE, NULL},
    [MC_FOREIGN] = {"foreign-handle", 0x1f, HK_STATUS_INVALID_HANDLE, NULL},
    [MC_NULL_OUT] = {"null-out", 1u << S_ALLOC, HK_STATUS_NULL_POINTER, "out"},
    [MC_ZERO_BYTES] = {"zero-bytes", 1u << S_ALLOC, HK_STATUS_OK, NULL},
    [MC_NULL_PTR] = {"null-pointer", 1u << S_FREE, HK_STATUS_OK, NULL},
    [MC_NULL_DST] = {"null-dst", (1u << S_TO_DEVICE) | (1u << S_TO_HOST) | (1u << S_MEMSET),
                     HK_STATUS_NULL_POINTER, "dst"},
    [MC_NULL_SRC] = {"null-src", (1u << S_TO_DEVICE) | (1u << S_TO_HOST), HK_STATUS_NULL_POINTER,
                     "src"},
};

static void run_mem_case(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    const int slot = k->a, id = k->c;
    void *fns[S_COUNT] = {(void *)p->mem.alloc, (void *)p->mem.free_, (void *)p->mem.copy_to_device,
                          (void *)p->mem.copy_to_host, (void *)p->mem.memset_};
    if (!fns[slot] || !p->mem.alloc) {
        hkv_notsup(r, fns[slot] ? "alloc" : mem_slots[slot]);
        return;
    }
    hk_handle_t *h, *dead, *foreign;
    if (case_handles(p, &h, &dead, &foreign, r) != 0)
        return;
    unsigned char host[256] = {1, 2, 3};
    void *dptr = NULL;
    if (p->mem.alloc(h, sizeof host, &dptr) != HK_STATUS_OK || !dptr) {
        hkv_fail(r, "alloc(256) on a live handle failed");
        snprintf(r->observed, sizeof r->observed, "SETUP-FAILED");
        return;
    }
    hk_handle_t *hh = id == MC_NULL_HANDLE ? NULL
                      : id == MC_DESTROYED ? dead
                      : id == MC_FOREIGN   ? foreign
                                           : h;
    void *dst = id == MC_NULL_DST ? NULL : slot == S_TO_HOST ? (void *)host : dptr;
    const void *src = id == MC_NULL_SRC ? NULL : slot == S_TO_HOST ? dptr : (const void *)host;
    void *out = (void *)&out, **outp = id == MC_NULL_OUT ? NULL : &out;
    size_t bytes = id == MC_ZERO_BYTES ? 0 : sizeof host;
    hk_status_t st;
    switch (slot) {
    case S_ALLOC: st = p->mem.alloc(hh, bytes, outp); break;
    case S_FREE: st = p->mem.free_(hh, id == MC_NULL_PTR ? NULL : dptr); break;
    case S_TO_DEVICE: st = p->mem.copy_to_device(hh, dst, src, bytes); break;
    case S_TO_HOST: st = p->mem.copy_to_host(hh, dst, src, bytes); break;
    default: st = p->mem.memset_(hh, dst, 0, bytes); break;
    }
    snprintf(r->observed, sizeof r->observed, "%s", hkv_st(st));
    if (st != mem_cases[id].expect)
        hkv_fail(r, "%s; want %s", hkv_st(st), hkv_st(mem_cases[id].expect));
    else if (st != HK_STATUS_OK && hh == h)
        reason_ok(p, h, mem_cases[id].names, r);
    if (slot == S_ALLOC && st == HK_STATUS_OK && id == MC_ZERO_BYTES && out != NULL)
        hkv_fail(r, "alloc of 0 bytes: OK, but *out is not NULL");
    if (slot == S_ALLOC && st == HK_STATUS_OK && out && out != (void *)&out)
        p->mem.free_(h, out);
    if (!(slot == S_FREE && st == HK_STATUS_OK && id != MC_NULL_PTR))
        p->mem.free_(h, dptr);
    hkv_note(r, "%s", hkv_st(st));
    hkv_destroy(p, h, r);
}

void hkv_register_matrix(void)
{
    char name[96];
    hkv_ops_init();
    for (int op = 0; op < HKV_NOPS; op++)
        for (int dev = 0; dev < 2; dev++)
            for (int c = 0; c < M_COUNT; c++) {
                if (!(cases[c].kinds & (1u << hkv_ops[op].kind)))
                    continue;
                snprintf(name, sizeof name, "matrix.%s.%s.%s", hkv_ops[op].name,
                         dev ? "device" : "host", cases[c].name);
                hkv_add(name, run_blas_case, HKV_NEED_HANDLE | HKV_MATRIX, op, dev, c);
            }
    for (int s = 0; s < S_COUNT; s++)
        for (int c = 0; c < MC_COUNT; c++) {
            if (!(mem_cases[c].slots & (1u << s)))
                continue;
            snprintf(name, sizeof name, "matrix.%s.%s", mem_slots[s], mem_cases[c].name);
            hkv_add(name, run_mem_case, HKV_NEED_HANDLE | HKV_MATRIX, s, 0, c);
        }
}
