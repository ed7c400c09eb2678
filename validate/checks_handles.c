/* hk-validate: handles, the create and query structs, and the error rules
 * (docs/abi.md: Handles, Create and query structs, Errors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hkv.h"

/* The plugin's create error, checked against the one-line rule. */
static void create_text(const hkv_plugin_t *p, const char *what, hkv_result_t *r)
{
    char e[1100], why[128];
    if (!p->vt.last_error)
        return;
    if (!hkv_text_ok(hkv_last_error(p, NULL, e, sizeof e), why, sizeof why))
        hkv_fail(r, "%s: last_error(NULL): %s", what, why);
}

static void check_create_destroy(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (!hkv.probe.handle_ok && hkv.probe.env_missing) {
        hkv_skip(r, "%s", hkv.probe.create_why); /* no driver or device here: not the plugin's fault */
        return;
    }
    enum { N = 16 };
    hk_handle_t *h[N] = {0};
    for (int i = 0; i < N; i++) {
        h[i] = hkv_handle(p, NULL, r);
        for (int j = 0; j < i && h[i]; j++)
            if (h[j] == h[i])
                hkv_fail(r, "two live handles are the same pointer");
    }
    for (int i = 0; i < N; i += 2) /* every other first: not in creation order */
        hkv_destroy(p, h[i], r);
    for (int i = N - 1; i > 0; i -= 2)
        hkv_destroy(p, h[i], r);
    hkv_note(r, "%d handles made and destroyed out of order", N);
}

static void check_create_null_out(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};
    hk_status_t st = p->vt.handle_create(NULL, NULL);
    if (st != HK_STATUS_NULL_POINTER)
        hkv_fail(r, "handle_create(NULL, NULL) gave %s; want NULL_POINTER", hkv_st(st));
    create_text(p, "handle_create(NULL, NULL)", r);
    st = p->vt.handle_create(&ci, NULL);
    if (st != HK_STATUS_NULL_POINTER)
        hkv_fail(r, "handle_create(&info, NULL) gave %s; want NULL_POINTER", hkv_st(st));
    hkv_note(r, "out NULL: NULL_POINTER with a one-line reason");
}

/* A create that must fail with want: *out NULL afterwards, a one-line reason. */
static void create_refused(const hkv_plugin_t *p, const void *info, hk_status_t want,
                           const char *what, hkv_result_t *r)
{
    hk_handle_t *h = (hk_handle_t *)(uintptr_t)0x10;
    hk_status_t st = p->vt.handle_create(info, &h);
    if (st != want) {
        hkv_fail(r, "%s gave %s; want %s", what, hkv_st(st), hkv_st(want));
        if (st == HK_STATUS_OK && h && h != (hk_handle_t *)(uintptr_t)0x10)
            p->vt.handle_destroy(h);
        return;
    }
    if (h != NULL)
        hkv_fail(r, "%s: failed but left *out not NULL", what);
    create_text(p, what, r);
    if (p->vt.last_error_copy) {
        char a[1100], b[1100];
        size_t need = 0;
        hkv_last_error(p, NULL, a, sizeof a);
        if (p->vt.last_error_copy(NULL, b, sizeof b, &need) != HK_STATUS_OK || strcmp(a, b))
            hkv_fail(r, "%s: last_error_copy(NULL) differs from last_error(NULL)", what);
    }
}

static void check_create_info_size(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    union {
        hk_create_info_t ci;
        unsigned char b[64];
    } u;
    const uint32_t small[] = {0, 4, 8, 11};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        memset(&u, 0, sizeof u);
        u.ci = (hk_create_info_t){small[i], HK_DEVICE_CURRENT, 0};
        char what[64];
        snprintf(what, sizeof what, "create_info.size = %u", small[i]);
        create_refused(p, &u.ci, HK_STATUS_INVALID_VALUE, what, r);
    }
    const uint32_t fine[] = {12, 64};
    for (size_t i = 0; i < 2; i++) {
        memset(&u, 0xff, sizeof u); /* bytes past the 1.0 fields must be ignored */
        u.ci = (hk_create_info_t){fine[i], HK_DEVICE_CURRENT, 0};
        hk_handle_t *h = NULL;
        hk_status_t st = p->vt.handle_create(&u.ci, &h);
        if (st != HK_STATUS_OK || !h)
            hkv_fail(r, "create_info.size = %u (tail 0xff) gave %s; want OK", fine[i], hkv_st(st));
        else
            hkv_destroy(p, h, r);
    }
    hkv_note(r, "sizes 0, 4, 8, 11: INVALID_VALUE, *out NULL; 12 and 64 (tail ignored): OK");
}

static void check_create_bad_device(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    const int32_t devs[] = {100000, -7};
    for (size_t i = 0; i < 2; i++) {
        hk_create_info_t ci = {sizeof ci, devs[i], 0};
        char what[64];
        snprintf(what, sizeof what, "create_info.device = %d", devs[i]);
        create_refused(p, &ci, HK_STATUS_INVALID_DEVICE, what, r);
    }
    hkv_note(r, "devices 100000 and -7: INVALID_DEVICE, *out NULL");
}

/* Every core slot that takes a handle, with h, must give want (last_error
 * must just not be NULL). ctx names the kind of handle in messages. */
static void core_slots(const hkv_plugin_t *p, hk_handle_t *h, hk_status_t want, const char *ctx,
                       hkv_result_t *r)
{
    hk_status_t st;
    void *s = NULL;
    hk_pointer_mode_t m;
    hk_handle_info_t info = {.size = sizeof info};
#define EXPECT(slot, call)                                                               \
    do {                                                                                 \
        if (p->vt.slot && (st = (call)) != want)                                        \
            hkv_fail(r, "%s with %s gave %s; want %s", #slot, ctx, hkv_st(st), hkv_st(want)); \
    } while (0)
    EXPECT(set_stream, p->vt.set_stream(h, NULL));
    EXPECT(get_stream, p->vt.get_stream(h, &s));
    EXPECT(set_pointer_mode, p->vt.set_pointer_mode(h, HK_POINTER_MODE_HOST));
    EXPECT(get_pointer_mode, p->vt.get_pointer_mode(h, &m));
    EXPECT(handle_info, p->vt.handle_info(h, &info));
    EXPECT(synchronize, p->vt.synchronize(h));
    if (h && p->vt.last_error_copy) {
        char buf[64];
        size_t need;
        EXPECT(last_error_copy, p->vt.last_error_copy(h, buf, sizeof buf, &need));
    }
#undef EXPECT
    if (h && p->vt.last_error && !p->vt.last_error(h))
        hkv_fail(r, "last_error with %s returned NULL", ctx);
}

/* hk.blas1/1 and hk.memory/1 with h; buffers of a live handle of this plugin. */
static void table_slots(const hkv_plugin_t *p, hk_handle_t *h, hk_handle_t *live, const char *ctx,
                        hkv_result_t *r)
{
    float *x = hkv_dalloc(p, live, 64, r), *y = hkv_dalloc(p, live, 64, r);
    float alpha = 2.0f;
    void *out = NULL;
    hk_status_t st;
    if (x && y && p->blas.saxpy &&
        (st = p->blas.saxpy(h, 4, &alpha, x, 1, y, 1)) != HK_STATUS_INVALID_HANDLE)
        hkv_fail(r, "saxpy with %s gave %s; want INVALID_HANDLE", ctx, hkv_st(st));
    if (p->mem.alloc && (st = p->mem.alloc(h, 64, &out)) != HK_STATUS_INVALID_HANDLE)
        hkv_fail(r, "alloc with %s gave %s; want INVALID_HANDLE", ctx, hkv_st(st));
    hkv_dfree(p, live, x);
    hkv_dfree(p, live, y);
}

static void check_null_handle(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    core_slots(p, NULL, HK_STATUS_INVALID_HANDLE, "a NULL handle", r);
    hk_status_t st = p->vt.handle_destroy(NULL);
    if (st != HK_STATUS_INVALID_HANDLE)
        hkv_fail(r, "handle_destroy(NULL) gave %s; want INVALID_HANDLE", hkv_st(st));
    hkv_note(r, "every core slot: INVALID_HANDLE");
}

static void check_destroyed(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_handle_t *live = hkv_handle(p, NULL, r), *h = hkv_handle(p, NULL, r);
    if (!live || !h)
        return;
    hkv_destroy(p, h, r);
    core_slots(p, h, HK_STATUS_INVALID_HANDLE, "a destroyed handle", r);
    table_slots(p, h, live, "a destroyed handle", r);
    hk_status_t st = p->vt.handle_destroy(h);
    if (st != HK_STATUS_INVALID_HANDLE)
        hkv_fail(r, "handle_destroy twice gave %s; want INVALID_HANDLE", hkv_st(st));
    hkv_destroy(p, live, r);
    hkv_note(r, "core slots, saxpy, alloc, a second destroy: INVALID_HANDLE");
}

/* A handle nobody made: a zeroed block of ours (a = 0) or a page nobody may
 * read (a = 1), which a plugin that reads through it crashes on. */
static void check_foreign_block(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    static _Alignas(64) unsigned char zeroed[4096];
    hk_handle_t *fake = k->a ? hkv_noaccess_page() : (hk_handle_t *)(void *)zeroed;
    hk_handle_t *live = hkv_handle(p, NULL, r);
    if (!fake || !live) {
        if (!fake)
            hkv_fail(r, "cannot map a page");
        return;
    }
    const char *ctx = k->a ? "an unreadable pointer" : "a zeroed block";
    core_slots(p, fake, HK_STATUS_INVALID_HANDLE, ctx, r);
    table_slots(p, fake, live, ctx, r);
    hk_status_t st = p->vt.handle_destroy(fake);
    if (st != HK_STATUS_INVALID_HANDLE)
        hkv_fail(r, "handle_destroy with %s gave %s; want INVALID_HANDLE", ctx, hkv_st(st));
    hkv_destroy(p, live, r);
    hkv_note(r, "%s: INVALID_HANDLE everywhere, nothing read through it", ctx);
}

static void check_foreign_copy(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hkv_plugin_t q;
    char why[320];
    if (hkv_plugin_load(&q, hkv.copy_path, why, sizeof why) != 0) {
        hkv_fail(r, "the second copy did not load: %s", why);
        return;
    }
    if (q.negotiate == p->negotiate) {
        hkv_skip(r, "the second copy shares the first one's code (the dynamic loader merged them)");
        return;
    }
    hk_handle_t *live = hkv_handle(p, NULL, r), *hq = hkv_handle(&q, NULL, r);
    if (!live || !hq)
        return;
    const char *ctx = "a handle of the second copy";
    core_slots(p, hq, HK_STATUS_INVALID_HANDLE, ctx, r);
    table_slots(p, hq, live, ctx, r);
    /* The handle still works where it was made. */
    if (q.blas.saxpy && hkv_can_move(&q)) {
        float in[4] = {1, 2, 3, 4}, out[4], alpha = 2.0f;
        float *x = hkv_dalloc(&q, hq, sizeof in, r), *y = hkv_dalloc(&q, hq, sizeof in, r);
        if (x && y && !hkv_put(&q, hq, x, in, sizeof in, r) && !hkv_put(&q, hq, y, in, sizeof in, r)) {
            hk_status_t st = q.blas.saxpy(hq, 4, &alpha, x, 1, y, 1);
            if (st != HK_STATUS_OK)
                hkv_fail(r, "after that, saxpy in its own copy gave %s", hkv_st(st));
            else if (!hkv_get(&q, hq, out, y, sizeof out, r) && out[3] != 12.0f)
                hkv_fail(r, "after that, saxpy in its own copy computed %g, not 12", out[3]);
        }
        hkv_dfree(&q, hq, x);
        hkv_dfree(&q, hq, y);
    }
    hk_status_t st = p->vt.handle_destroy(hq);
    if (st != HK_STATUS_INVALID_HANDLE)
        hkv_fail(r, "handle_destroy with %s gave %s; want INVALID_HANDLE", ctx, hkv_st(st));
    else
        hkv_destroy(&q, hq, r);
    hkv_destroy(p, live, r);
    hkv_note(r, "refused by the first copy; still usable in its own");
}

/* The fresh handle a check works on, once the slots it needs are there
 * (present; missing names the first one absent): NULL with the check marked
 * not supported when they are not, NULL with the failure recorded when no
 * handle can be made. */
static hk_handle_t *checked_handle(const hkv_plugin_t *p, int present, const char *missing,
                                   hkv_result_t *r)
{
    if (!present) {
        hkv_notsup(r, missing);
        return NULL;
    }
    return hkv_handle(p, NULL, r);
}

static void check_info_size(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_handle_t *h = checked_handle(p, p->vt.handle_info != NULL, "handle_info", r);
    if (!h)
        return;
    hk_status_t st = p->vt.handle_info(h, NULL);
    if (st != HK_STATUS_NULL_POINTER)
        hkv_fail(r, "handle_info(h, NULL) gave %s; want NULL_POINTER", hkv_st(st));
    union {
        hk_handle_info_t i;
        unsigned char b[sizeof(hk_handle_info_t) + 64];
    } u;
    const uint32_t sizes[] = {0, 1, 3, 4, 6, 8, 12, 16, 24, sizeof(hk_handle_info_t),
                              sizeof(hk_handle_info_t) + 32};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint32_t sz = sizes[i];
        memset(u.b, 0xa5, sizeof u.b);
        u.i.size = sz;
        st = p->vt.handle_info(h, &u.i);
        uint32_t n = u.i.size;
        if (sz < 4) {
            if (st != HK_STATUS_INVALID_VALUE)
                hkv_fail(r, "info.size = %u gave %s; want INVALID_VALUE", sz, hkv_st(st));
            size_t j = hkv_guard_broken(u.b, sizeof u.i.size, sizeof u.b, 0xa5);
            if (j < sizeof u.b)
                hkv_fail(r, "info.size = %u: refused, yet byte %zu was written", sz, j);
            continue;
        }
        if (st != HK_STATUS_OK) {
            hkv_fail(r, "info.size = %u gave %s; want OK", sz, hkv_st(st));
            continue;
        }
        int want_exact = sz <= sizeof(hk_handle_info_t); /* every 1.1 plugin knows this much */
        size_t j;
        if (n > sz || n < 4 || (want_exact && n != sz))
            hkv_fail(r, "info.size = %u: size set to %u; want min(%u, the plugin's sizeof)", sz, n,
                     sz);
        else if ((j = hkv_guard_broken(u.b, n, sizeof u.b, 0xa5)) < sizeof u.b)
            hkv_fail(r, "info.size = %u: %u bytes claimed, but byte %zu was written", sz, n, j);
    }
    hkv_destroy(p, h, r);
    hkv_note(r, "sizes below 4: INVALID_VALUE; others: n = min(size, sizeof) bytes, size = n");
}

static void check_info_fields(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_handle_t *h = checked_handle(p, p->vt.handle_info != NULL, "handle_info", r);
    if (!h)
        return;
    hk_handle_info_t i = {.size = sizeof i};
    hk_status_t st = p->vt.handle_info(h, &i);
    if (st != HK_STATUS_OK) {
        hkv_fail(r, "handle_info gave %s", hkv_st(st));
    } else {
        if (i.size >= sizeof i && (!i.plugin_name || strcmp(i.plugin_name, p->answer.name)))
            hkv_fail(r, "plugin_name \"%.40s\" is not the answer's name \"%s\"",
                     i.plugin_name ? i.plugin_name : "(null)", p->answer.name);
        if (i.device < -1)
            hkv_fail(r, "device %d", i.device);
        if (i.owns_primary != 0 && i.owns_primary != 1)
            hkv_fail(r, "owns_primary %d is neither 0 nor 1", i.owns_primary);
        int at12 = p->abi >= HKV_ABI_1_2;
        if (at12 && (p->answer.flags & HK_PLUGIN_MEMORY_HOST) && i.device != -1)
            hkv_fail(r, "memory flag HOST, yet device %d (want -1)", i.device);
        if (at12 && (p->answer.flags & HK_PLUGIN_MEMORY_CUDA) && i.device < 0)
            hkv_fail(r, "memory flag CUDA, yet device %d", i.device);
        if (i.device >= 0 && i.context_id == 0)
            hkv_fail(r, "device %d but context_id 0", i.device);
        hkv_note(r, "device %d, context %llu, owns_primary %d, flags 0x%x, %s", i.device,
                 (unsigned long long)i.context_id, i.owns_primary, i.flags,
                 i.plugin_name ? i.plugin_name : "(null)");
    }
    hkv_destroy(p, h, r);
}

static void check_pointer_mode(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_handle_t *h =
        checked_handle(p, p->vt.set_pointer_mode && p->vt.get_pointer_mode,
                       p->vt.set_pointer_mode ? "get_pointer_mode" : "set_pointer_mode", r);
    if (!h)
        return;
    hk_pointer_mode_t m = (hk_pointer_mode_t)99;
    const hk_pointer_mode_t modes[] = {HK_POINTER_MODE_DEVICE, HK_POINTER_MODE_HOST};
    for (int i = 0; i < 2; i++) {
        hk_status_t st = p->vt.set_pointer_mode(h, modes[i]);
        if (st != HK_STATUS_OK || p->vt.get_pointer_mode(h, &m) != HK_STATUS_OK || m != modes[i])
            hkv_fail(r, "set_pointer_mode(%d) then get gave %s, mode %d", (int)modes[i],
                     hkv_st(st), (int)m);
    }
    hk_status_t st = p->vt.set_pointer_mode(h, (hk_pointer_mode_t)7);
    char e[1100], why[128];
    if (st != HK_STATUS_INVALID_VALUE)
        hkv_fail(r, "set_pointer_mode(7) gave %s; want INVALID_VALUE", hkv_st(st));
    else if (!hkv_text_ok(hkv_last_error(p, h, e, sizeof e), why, sizeof why))
        hkv_fail(r, "set_pointer_mode(7): last_error: %s", why);
    if (p->vt.get_pointer_mode(h, &m) != HK_STATUS_OK || m != HK_POINTER_MODE_HOST)
        hkv_fail(r, "a refused set_pointer_mode changed the mode");
    st = p->vt.get_pointer_mode(h, NULL);
    if (st != HK_STATUS_NULL_POINTER)
        hkv_fail(r, "get_pointer_mode(h, NULL) gave %s; want NULL_POINTER", hkv_st(st));
    hkv_destroy(p, h, r);
    hkv_note(r, "round trip; mode 7: INVALID_VALUE, mode kept; NULL out: NULL_POINTER");
}

static void check_stream(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_handle_t *h = checked_handle(p, p->vt.set_stream && p->vt.get_stream,
                                    p->vt.set_stream ? "get_stream" : "set_stream", r);
    if (!h)
        return;
    void *s = (void *)1;
    hk_status_t st = p->vt.set_stream(h, NULL);
    if (st != HK_STATUS_OK || p->vt.get_stream(h, &s) != HK_STATUS_OK || s != NULL)
        hkv_fail(r, "set_stream(NULL) gave %s, then get_stream %p", hkv_st(st), s);
    if (hkv.probe.cuda) {
        st = p->vt.set_stream(h, HKV_STREAM_PER_THREAD);
        if (st != HK_STATUS_OK || p->vt.get_stream(h, &s) != HK_STATUS_OK ||
            s != HKV_STREAM_PER_THREAD)
            hkv_fail(r, "set_stream(CU_STREAM_PER_THREAD) gave %s, then get_stream %p",
                     hkv_st(st), s);
        p->vt.set_stream(h, NULL);
    }
    st = p->vt.get_stream(h, NULL);
    if (st != HK_STATUS_NULL_POINTER)
        hkv_fail(r, "get_stream(h, NULL) gave %s; want NULL_POINTER", hkv_st(st));
    hkv_destroy(p, h, r);
    hkv_note(r, "NULL%s round trip; NULL out: NULL_POINTER",
             hkv.probe.cuda ? " and CU_STREAM_PER_THREAD" : "");
}

/* Makes a create that must fail (create_info.size 4): 1 when it failed, so
 * that last_error(NULL) holds its line; 0, the handle destroyed, when the
 * plugin took it (handle.create-info-size reports that). */
static int failed_create(const hkv_plugin_t *p, hkv_result_t *r)
{
    hk_create_info_t ci = {4, HK_DEVICE_CURRENT, 0};
    hk_handle_t *bad = NULL;
    if (p->vt.handle_create(&ci, &bad) == HK_STATUS_OK) {
        hkv_destroy(p, bad, r);
        return 0;
    }
    return 1;
}

static void check_last_error(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_handle_t *h = checked_handle(p, p->vt.last_error != NULL, "last_error", r);
    if (!h)
        return;
    const char *s = p->vt.last_error(h);
    if (!s)
        hkv_fail(r, "last_error of a fresh handle is NULL");
    else if (s[0])
        hkv_fail(r, "last_error of a fresh handle is \"%.60s\", not \"\"", s);
    char e[1100], why[128];
    if (p->blas.saxpy) {
        float alpha = 1.0f, y[4] = {0};
        hk_status_t st = p->blas.saxpy(h, 4, &alpha, NULL, 1, y, 1);
        hkv_last_error(p, h, e, sizeof e);
        if (st == HK_STATUS_OK)
            hkv_fail(r, "saxpy with x NULL succeeded");
        else if (!hkv_text_ok(e, why, sizeof why))
            hkv_fail(r, "after saxpy with x NULL (%s): %s", hkv_st(st), why);
    }
    hkv_destroy(p, h, r);
    if (failed_create(p, r) && !hkv_text_ok(hkv_last_error(p, NULL, e, sizeof e), why, sizeof why))
        hkv_fail(r, "after a failed create, last_error(NULL): %s", why);
    hkv_note(r, "\"\" on a fresh handle; one line after a failure, with and without a handle");
}

/* ABI 1.2's last_error_copy: the handle's line into the caller's buffer,
 * *needed = its length + 1, never a byte past len; NULL handle: the thread's
 * create error; a handle that is not live: INVALID_HANDLE. */
static void check_last_error_copy(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_handle_t *h = checked_handle(p, p->vt.last_error_copy != NULL, "last_error_copy", r);
    if (!h)
        return;
    hk_status_t st = p->vt.set_pointer_mode ? p->vt.set_pointer_mode(h, (hk_pointer_mode_t)7)
                                            : HK_STATUS_OK;
    char want[1100], buf[1100];
    hkv_last_error(p, h, want, sizeof want);
    size_t need = 0, len = strlen(want);
    if (st == HK_STATUS_OK)
        hkv_skip(r, "no failing call to make (set_pointer_mode missing or accepting 7)");
    st = p->vt.last_error_copy(h, buf, sizeof buf, &need);
    if (st != HK_STATUS_OK || strcmp(buf, want) != 0 || need != len + 1)
        hkv_fail(r, "last_error_copy(h, 1100 bytes) gave %s, \"%.40s\", needed %zu; want OK, "
                 "\"%.40s\", %zu", hkv_st(st), st == HK_STATUS_OK ? buf : "", need, want, len + 1);
    const size_t lens[] = {0, 1, 5};
    for (size_t i = 0; i < 3 && len >= 5; i++) {
        memset(buf, 0xa5, 64);
        need = 0;
        st = p->vt.last_error_copy(h, buf, lens[i], &need);
        size_t j = hkv_guard_broken(buf, lens[i], 64, 0xa5);
        if (j < 64)
            hkv_fail(r, "last_error_copy with len %zu wrote byte %zu", lens[i], j);
        if (lens[i] > 0 && strnlen(buf, lens[i]) == lens[i])
            hkv_fail(r, "last_error_copy with len %zu left no terminating NUL", lens[i]);
        if (need != len + 1)
            hkv_fail(r, "last_error_copy with len %zu set *needed to %zu; want %zu", lens[i], need,
                     len + 1);
    }
    if (failed_create(p, r)) {
        hkv_last_error(p, NULL, want, sizeof want);
        st = p->vt.last_error_copy(NULL, buf, sizeof buf, &need);
        if (st != HK_STATUS_OK || strcmp(buf, want) != 0)
            hkv_fail(r, "last_error_copy(NULL) gave %s, not the failed create's line", hkv_st(st));
    }
    static _Alignas(64) unsigned char zeroed[256];
    st = p->vt.last_error_copy((const hk_handle_t *)(void *)zeroed, buf, sizeof buf, &need);
    if (st != HK_STATUS_INVALID_HANDLE)
        hkv_fail(r, "last_error_copy with a zeroed block gave %s; want INVALID_HANDLE",
                 hkv_st(st));
    hkv_destroy(p, h, r);
    hkv_note(r, "the line and its length; no byte past len; thread's line for NULL");
}

/* A plugin never prints (docs/abi.md, Errors): calls that succeed and calls
 * that fail, with stdout and stderr caught in a file. */
static void check_no_output(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    FILE *f = tmpfile();
    int o1 = dup(1), o2 = dup(2);
    if (!f || o1 < 0 || o2 < 0) {
        hkv_fail(r, "cannot catch the output");
        return;
    }
    fflush(NULL);
    dup2(fileno(f), 1);
    dup2(fileno(f), 2);
    hk_negotiate_answer_t a;
    hkv_negotiate(p, HKV_ABI_1_0, HKV_ABI_MAX, sizeof a, &a);
    hkv_negotiate(p, HK_ABI_VERSION(2, 0), HK_ABI_VERSION(2, 0), sizeof a, &a);
    const void *t;
    p->vt.get_table("hk.no-such-table/1", &t);
    hk_create_info_t small = {4, HK_DEVICE_CURRENT, 0};
    hk_handle_t *h = NULL;
    p->vt.handle_create(&small, &h);
    p->vt.handle_destroy(NULL);
    hkv_result_t ignored = {0};
    if ((h = hkv_handle(p, NULL, &ignored)) != NULL) {
        float alpha = 1, y[4] = {0};
        if (p->blas.saxpy)
            p->blas.saxpy(h, 4, &alpha, NULL, 1, y, 1);
        if (p->vt.set_pointer_mode)
            p->vt.set_pointer_mode(h, (hk_pointer_mode_t)7);
        if (p->blas.saxpy && hkv_can_move(p))
            hkv_op_case(p, h, 0, 0, 33, 1, 1, 5, NULL, &ignored);
        hkv_destroy(p, h, &ignored);
    }
    fflush(NULL);
    dup2(o1, 1);
    dup2(o2, 2);
    close(o1);
    close(o2);
    struct stat st;
    char line[200] = "";
    if (fstat(fileno(f), &st) == 0 && st.st_size > 0) {
        rewind(f);
        if (!fgets(line, sizeof line, f))
            line[0] = '\0';
        line[strcspn(line, "\n")] = '\0';
        hkv_fail(r, "the plugin printed %lld bytes: \"%.120s\"", (long long)st.st_size, line);
    }
    fclose(f);
    hkv_note(r, "nothing printed by successful and failing calls");
}

void hkv_register_handles(void)
{
    hkv_add("handle.create-destroy", check_create_destroy, HKV_NEED_PLUGIN, 0, 0, 0);
    hkv_add("handle.create-null-out", check_create_null_out, HKV_NEED_PLUGIN, 0, 0, 0);
    hkv_add("handle.create-info-size", check_create_info_size, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("handle.create-bad-device", check_create_bad_device, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("handle.null", check_null_handle, HKV_NEED_PLUGIN, 0, 0, 0);
    hkv_add("handle.destroyed", check_destroyed, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("handle.foreign-zeroed", check_foreign_block, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("handle.foreign-unreadable", check_foreign_block, HKV_NEED_HANDLE, 1, 0, 0);
    hkv_add("handle.foreign-second-copy", check_foreign_copy, HKV_NEED_HANDLE | HKV_NEED_COPY, 0,
            0, 0);
    hkv_add("handle.info-size", check_info_size, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("handle.info-fields", check_info_fields, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("handle.pointer-mode", check_pointer_mode, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("handle.stream", check_stream, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("error.last-error", check_last_error, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("error.last-error-copy", check_last_error_copy, HKV_NEED_HANDLE, 0, 0, 0);
    hkv_add("error.no-output", check_no_output, HKV_NEED_PLUGIN, 0, 0, 0);
}
