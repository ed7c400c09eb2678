/* hk-validate: results, text rules, handles and memory through hk.memory/1,
 * and calling hk.blas1/1 slots by index. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hk_status_text.h"
#include "hkv.h"

/* The run's settings (hkv.h): here, below the runner, the spawner and the
 * plugin's loading that all read them. */
hkv_env_t hkv;

/* ---- results ---- */

void hkv_fail(hkv_result_t *r, const char *fmt, ...)
{
    if (r->nfail++ > 0)
        return;
    r->verdict = HKV_FAIL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
}

void hkv_note(hkv_result_t *r, const char *fmt, ...)
{
    if (r->verdict != HKV_PASS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
}

void hkv_skip(hkv_result_t *r, const char *fmt, ...)
{
    if (r->verdict == HKV_FAIL)
        return;
    r->verdict = HKV_SKIP;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
}

void hkv_notsup(hkv_result_t *r, const char *slot)
{
    if (r->verdict == HKV_FAIL)
        return;
    r->verdict = HKV_NOTSUP;
    snprintf(r->detail, sizeof r->detail, "%s is NULL: not supported", slot);
    snprintf(r->observed, sizeof r->observed, "NOT-SUPPORTED");
}

void hkv_finish(hkv_result_t *r)
{
    if (r->verdict != HKV_FAIL || r->nfail < 2)
        return;
    size_t len = strlen(r->detail);
    char more[32];
    int m = snprintf(more, sizeof more, " (+%d more)", r->nfail - 1);
    if (len + (size_t)m >= sizeof r->detail)
        len = sizeof r->detail - (size_t)m - 1;
    memcpy(r->detail + len, more, (size_t)m + 1);
}

const char *hkv_st(hk_status_t st)
{
    return hk_status_name((int)st);
}

/* ---- text ---- */

int hkv_text_ok(const char *s, char *why, size_t len)
{
    if (!s) {
        snprintf(why, len, "the text is NULL");
        return 0;
    }
    size_t n = strnlen(s, 4096);
    if (n == 0) {
        snprintf(why, len, "the text is empty");
        return 0;
    }
    if (n >= 1024) {
        snprintf(why, len, "the text is %s1023 bytes long", n >= 4096 ? "over 4095 (unterminated?), not under " : "not under ");
        return 0;
    }
    if (strpbrk(s, "\n\r")) {
        snprintf(why, len, "the text \"%.60s...\" has a line break", s);
        return 0;
    }
    return 1;
}

static int ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

int hkv_names(const char *text, const char *word)
{
    size_t w = strlen(word);
    for (const char *s = text; s && (s = strstr(s, word)) != NULL; s++) {
        int before = s == text || !ident_char(s[-1]);
        int after = !ident_char(s[w]);
        if (before && after)
            return 1;
    }
    return 0;
}

const char *hkv_last_error(const hkv_plugin_t *p, const hk_handle_t *h, char *buf, size_t len)
{
    const char *s = p->vt.last_error ? p->vt.last_error(h) : "(last_error is NULL)";
    if (!s)
        s = "(null)";
    size_t n = strnlen(s, len - 1);
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

/* ---- handles ---- */

hk_handle_t *hkv_handle(const hkv_plugin_t *p, const hk_create_info_t *info, hkv_result_t *r)
{
    hk_handle_t *h = NULL;
    hk_status_t st = p->vt.handle_create(info, &h);
    if (st != HK_STATUS_OK || !h) {
        char e[256];
        hkv_fail(r, "handle_create gave %s%s: %s", hkv_st(st), h || st != HK_STATUS_OK ? "" : " and NULL",
                 hkv_last_error(p, NULL, e, sizeof e));
        return NULL;
    }
    return h;
}

void hkv_destroy(const hkv_plugin_t *p, hk_handle_t *h, hkv_result_t *r)
{
    if (!h)
        return;
    hk_status_t st = p->vt.handle_destroy(h);
    if (st != HK_STATUS_OK) {
        char e[256];
        hkv_fail(r, "handle_destroy gave %s: %s", hkv_st(st), hkv_last_error(p, NULL, e, sizeof e));
    }
}

/* ---- memory ---- */

/* Without hk.memory/1 a plugin whose memory is host memory is still usable. */
static int host_fallback(const hkv_plugin_t *p)
{
    return !p->mem.alloc && hkv.probe.host_memory;
}

int hkv_can_move(const hkv_plugin_t *p)
{
    if (host_fallback(p))
        return 1;
    return p->mem.alloc && p->mem.free_ && p->mem.copy_to_device && p->mem.copy_to_host;
}

void *hkv_dalloc(const hkv_plugin_t *p, hk_handle_t *h, size_t bytes, hkv_result_t *r)
{
    void *ptr = NULL;
    if (host_fallback(p)) {
        ptr = calloc(1, bytes ? bytes : 1);
        if (!ptr)
            hkv_fail(r, "out of host memory");
        return ptr;
    }
    hk_status_t st = p->mem.alloc(h, bytes, &ptr);
    if (st != HK_STATUS_OK || !ptr) {
        char e[256];
        hkv_fail(r, "hk.memory/1 alloc(%zu) gave %s%s: %s", bytes, hkv_st(st),
                 st == HK_STATUS_OK ? " and NULL" : "", hkv_last_error(p, h, e, sizeof e));
        return NULL;
    }
    return ptr;
}

void hkv_dfree(const hkv_plugin_t *p, hk_handle_t *h, void *ptr)
{
    if (!ptr)
        return;
    if (host_fallback(p))
        free(ptr);
    else
        p->mem.free_(h, ptr);
}

/* A copy to (to_device) or from the handle's memory; 0 or -1 (recorded). */
static int move(const hkv_plugin_t *p, hk_handle_t *h, void *dst, const void *src, size_t bytes,
                int to_device, hkv_result_t *r)
{
    if (host_fallback(p)) {
        memcpy(dst, src, bytes);
        return 0;
    }
    hk_status_t st = to_device ? p->mem.copy_to_device(h, dst, src, bytes)
                               : p->mem.copy_to_host(h, dst, src, bytes);
    if (st != HK_STATUS_OK) {
        char e[256];
        hkv_fail(r, "hk.memory/1 %s gave %s: %s", to_device ? "copy_to_device" : "copy_to_host",
                 hkv_st(st), hkv_last_error(p, h, e, sizeof e));
        return -1;
    }
    return 0;
}

int hkv_put(const hkv_plugin_t *p, hk_handle_t *h, void *dst, const void *src, size_t bytes,
            hkv_result_t *r)
{
    return move(p, h, dst, src, bytes, 1, r);
}

int hkv_get(const hkv_plugin_t *p, hk_handle_t *h, void *dst, const void *src, size_t bytes,
            hkv_result_t *r)
{
    return move(p, h, dst, src, bytes, 0, r);
}

void *hkv_noaccess_page(void)
{
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

size_t hkv_guard_broken(const void *b, size_t from, size_t to, unsigned char pattern)
{
    const unsigned char *c = b;
    while (from < to && c[from] == pattern)
        from++;
    return from;
}

/* ---- hk.blas1/1 ---- */

#define OP(name, minor, params, args) {#name, HKV_OTHER, 0, offsetof(hk_blas1_v1_t, name)},
hkv_op_t hkv_ops[HKV_NOPS] = {HK_BLAS1_V1_SLOTS(OP)};
#undef OP

void hkv_ops_init(void)
{
    static const struct {
        const char *family;
        hkv_kind_t kind;
    } rules[] = {{"axpy", HKV_AXPY}, {"scal", HKV_SCAL}, {"copy", HKV_COPY}, {"dot", HKV_DOT},
                 {"nrm2", HKV_NRM2}};
    for (int op = 0; op < HKV_NOPS; op++) {
        hkv_op_t *o = &hkv_ops[op];
        char t = o->name[0];
        o->kind = HKV_OTHER;
        o->esz = t == 's' ? 4 : t == 'd' ? 8 : 0;
        for (size_t i = 0; o->esz && i < sizeof rules / sizeof rules[0]; i++)
            if (strcmp(o->name + 1, rules[i].family) == 0)
                o->kind = rules[i].kind;
    }
}

int hkv_op_present(const hkv_plugin_t *p, int op)
{
    void *slot;
    memcpy(&slot, (const char *)&p->blas + hkv_ops[op].offset, sizeof slot);
    return slot != NULL;
}

hk_status_t hkv_call(const hkv_plugin_t *p, int op, hk_handle_t *h, int64_t n, const void *alpha,
                     const void *x, int64_t incx, void *y, int64_t incy, void *result)
{
    const hk_blas1_v1_t *b = &p->blas;
    int d = hkv_ops[op].esz == 8;
    switch (hkv_ops[op].kind) {
    case HKV_AXPY:
        return d ? b->daxpy(h, n, alpha, x, incx, y, incy)
                 : b->saxpy(h, n, alpha, x, incx, y, incy);
    case HKV_SCAL:
        return d ? b->dscal(h, n, alpha, (double *)x, incx)
                 : b->sscal(h, n, alpha, (float *)x, incx);
    case HKV_COPY:
        return d ? b->dcopy(h, n, x, incx, y, incy) : b->scopy(h, n, x, incx, y, incy);
    case HKV_DOT:
        return d ? b->ddot(h, n, x, incx, y, incy, result)
                 : b->sdot(h, n, x, incx, y, incy, result);
    case HKV_NRM2:
        return d ? b->dnrm2(h, n, x, incx, result) : b->snrm2(h, n, x, incx, result);
    default: return HK_STATUS_NOT_SUPPORTED;
    }
}

double hkv_rand(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(int64_t)(*state >> 11 << 11) / 9223372036854775808.0;
}
