/* hk-validate: negotiation, the answer, the vtable and the tables
 * (docs/abi.md: Negotiation, Versions, Function tables). */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkv.h"

#define V(maj, min) HK_ABI_VERSION(maj, min)
#define VMAJ(v) HK_ABI_VERSION_MAJOR(v)
#define VMIN(v) HK_ABI_VERSION_MINOR(v)
#define ANS_MIN (offsetof(hk_negotiate_answer_t, vtable) + sizeof(void *))

/* Opens the plugin file for a negotiation check; 0 or -1 (recorded). */
static int open_only(hkv_plugin_t *p, hkv_result_t *r)
{
    char why[320];
    if (hkv_plugin_open(p, hkv.path, why, sizeof why) != 0) {
        hkv_fail(r, "%s", why);
        return -1;
    }
    return 0;
}

/* Opens the plugin file and negotiates [1.0, HKV_ABI_MAX] into *a: 0, or -1
 * with the failure recorded (also when need_vtable and there is none). */
static int open_negotiated(hkv_plugin_t *p, hk_negotiate_answer_t *a, int need_vtable,
                           hkv_result_t *r)
{
    if (open_only(p, r) != 0)
        return -1;
    if (hkv_negotiate(p, V(1, 0), HKV_ABI_MAX, sizeof *a, a) != HK_STATUS_OK ||
        (need_vtable && !a->vtable)) {
        hkv_fail(r, "%s", need_vtable ? "negotiation failed or gave no vtable" : "negotiation failed");
        return -1;
    }
    return 0;
}

/* The plugin's own (highest) version: what it picks from a range above it. */
static int own_version(const hkv_plugin_t *p, uint32_t *v, hkv_result_t *r)
{
    hk_negotiate_answer_t a;
    hk_status_t st = hkv_negotiate(p, V(1, 0), V(1, 999), sizeof a, &a);
    if (st != HK_STATUS_OK || VMAJ(a.abi_version) != 1) {
        hkv_fail(r, "a host accepting [1.0, 1.999] got %s, ABI %u.%u", hkv_st(st),
                 VMAJ(a.abi_version), VMIN(a.abi_version));
        return -1;
    }
    *v = a.abi_version;
    return 0;
}

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void check_load_quiet(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    /* Counted before and after: a sanitizer runtime may run a thread of its own. */
    int before = count_threads();
    if (open_only(p, r) != 0)
        return;
    hk_negotiate_answer_t a;
    hkv_negotiate(p, V(1, 0), HKV_ABI_MAX, sizeof a, &a);
    const char *env = getenv("HK_CUDA_DRIVER");
    const char *drivers[] = {"libcuda.so.1", "libcuda.so", env && *env ? env : NULL};
    for (size_t i = 0; i < 3; i++) {
        void *d = drivers[i] ? dlopen(drivers[i], RTLD_LAZY | RTLD_NOLOAD) : NULL;
        if (d) {
            hkv_fail(r, "loading and negotiating loaded the CUDA driver (%s)", drivers[i]);
            dlclose(d);
        }
    }
    int t = count_threads();
    if (before > 0 && t > before)
        hkv_fail(r, "loading and negotiating started %d thread(s)", t - before);
    hkv_note(r, "no driver loaded, no thread started");
}

static void check_current(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    uint32_t own;
    if (open_only(p, r) != 0 || own_version(p, &own, r) != 0)
        return;
    hk_negotiate_answer_t a;
    hk_status_t st = hkv_negotiate(p, V(1, 0), HKV_ABI_MAX, sizeof a, &a);
    if (st != HK_STATUS_OK) {
        hkv_fail(r, "[1.0, 1.%u] gave %s", VMIN(HKV_ABI_MAX), hkv_st(st));
        return;
    }
    uint32_t want = own < HKV_ABI_MAX ? own : HKV_ABI_MAX;
    if (a.abi_version != want)
        hkv_fail(r, "[1.0, 1.%u] chose ABI %u.%u; the highest in range it implements is %u.%u",
                 VMIN(HKV_ABI_MAX), VMAJ(a.abi_version), VMIN(a.abi_version), VMAJ(want),
                 VMIN(want));
    if (a.header.struct_type != HK_STRUCT_NEGOTIATE_ANSWER)
        hkv_fail(r, "answer struct_type 0x%x, not 0x%x", a.header.struct_type,
                 HK_STRUCT_NEGOTIATE_ANSWER);
    if (a.header.struct_size < ANS_MIN || a.header.struct_size > sizeof a)
        hkv_fail(r, "answer struct_size %u is outside [%zu, %zu]", a.header.struct_size, ANS_MIN,
                 sizeof a);
    if (a.header.struct_version < 1)
        hkv_fail(r, "answer struct_version is 0");
    hkv_note(r, "ABI %u.%u chosen from [1.0, 1.%u]", VMAJ(a.abi_version), VMIN(a.abi_version),
             VMIN(HKV_ABI_MAX));
}

static int one_line_string(const char *s, size_t max)
{
    if (!s || !s[0])
        return 0;
    size_t n = strnlen(s, max + 1);
    if (n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20)
            return 0;
    return 1;
}

static void check_strings(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_negotiate_answer_t a;
    if (open_negotiated(p, &a, 0, r) != 0)
        return;
    if (!one_line_string(a.name, 63))
        hkv_fail(r, "name is NULL, empty, longer than 63 bytes or has control characters");
    if (!one_line_string(a.version, 63))
        hkv_fail(r, "version is NULL, empty, longer than 63 bytes or has control characters");
    else if (a.version[0] < '0' || a.version[0] > '9')
        hkv_fail(r, "version \"%s\" is not a semantic version (\"1.4.2\")", a.version);
    hk_negotiate_answer_t b;
    hkv_negotiate(p, V(1, 0), HKV_ABI_MAX, sizeof b, &b);
    if (a.name != b.name || a.version != b.version || a.vtable != b.vtable || a.flags != b.flags)
        hkv_fail(r, "a second negotiation answered other name, version, vtable or flags");
    if (r->verdict == HKV_PASS)
        hkv_note(r, "%s %s, the same answer twice", a.name, a.version);
}

static void check_vtable(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_negotiate_answer_t a;
    if (open_negotiated(p, &a, 1, r) != 0)
        return;
    size_t size = a.vtable->size;
    if (size < HKV_VT_SIZE_1_0 || size > 65536 || size % sizeof(void *)) {
        hkv_fail(r, "vtable size %zu: not a multiple of %zu in [%zu, 65536]", size,
                 sizeof(void *), HKV_VT_SIZE_1_0);
        return;
    }
    hkv_vtable_t vt;
    memset(&vt, 0, sizeof vt);
    memcpy(&vt, a.vtable, size < sizeof vt ? size : sizeof vt);
    if (!vt.handle_create || !vt.handle_destroy || !vt.get_table)
        hkv_fail(r, "a required slot is NULL:%s%s%s", vt.handle_create ? "" : " handle_create",
                 vt.handle_destroy ? "" : " handle_destroy", vt.get_table ? "" : " get_table");
    char missing[256] = "";
    static const struct {
        const char *name;
        size_t off;
        uint32_t since;
    } slots[] = {
        {"set_stream", offsetof(hkv_vtable_t, set_stream), V(1, 0)},
        {"get_stream", offsetof(hkv_vtable_t, get_stream), V(1, 0)},
        {"set_pointer_mode", offsetof(hkv_vtable_t, set_pointer_mode), V(1, 0)},
        {"get_pointer_mode", offsetof(hkv_vtable_t, get_pointer_mode), V(1, 0)},
        {"last_error", offsetof(hkv_vtable_t, last_error), V(1, 0)},
        {"enum_tables", offsetof(hkv_vtable_t, enum_tables), V(1, 0)},
        {"handle_info", offsetof(hkv_vtable_t, handle_info), V(1, 1)},
        {"synchronize", offsetof(hkv_vtable_t, synchronize), V(1, 1)},
        {"last_error_copy", offsetof(hkv_vtable_t, last_error_copy), V(1, 2)},
    };
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        void *fn;
        memcpy(&fn, (char *)&vt + slots[i].off, sizeof fn);
        if ((!fn || a.abi_version < slots[i].since) && strlen(missing) < 200)
            strcat(strcat(missing, " "), slots[i].name);
    }
    hkv_note(r, "%zu bytes for ABI %u.%u; not supported:%s", size, VMAJ(a.abi_version),
             VMIN(a.abi_version), missing[0] ? missing : " none");
}

static void check_memory_flags(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    hk_negotiate_answer_t a;
    if (open_negotiated(p, &a, 0, r) != 0)
        return;
    if (a.abi_version < HKV_ABI_1_2) {
        hkv_skip(r, "negotiated ABI %u.%u; memory-domain flags are ABI 1.2", VMAJ(a.abi_version),
                 VMIN(a.abi_version));
        return;
    }
    uint32_t m = a.flags & (HK_PLUGIN_MEMORY_HOST | HK_PLUGIN_MEMORY_CUDA);
    if (m == (HK_PLUGIN_MEMORY_HOST | HK_PLUGIN_MEMORY_CUDA))
        hkv_fail(r, "flags 0x%x claim both HOST and CUDA memory", a.flags);
    hkv_note(r, "flags 0x%x: %s", a.flags,
             m == HK_PLUGIN_MEMORY_HOST ? "host memory"
             : m == HK_PLUGIN_MEMORY_CUDA ? "CUDA memory"
                                          : "no memory-domain flag");
}

/* One host range: the expected status, and for OK the expected version
 * (0: the plugin's own, clamped to hi). */
static void check_range(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    uint32_t own;
    if (open_only(p, r) != 0 || own_version(p, &own, r) != 0)
        return;
    uint32_t lo, hi;
    switch (k->a) {
    case 0: lo = V(1, 0), hi = V(1, 0); break;     /* an older host */
    case 1: lo = V(1, 0), hi = V(1, 999); break;   /* a newer host */
    case 2: lo = V(1, 998), hi = V(1, 999); break; /* a host needing a newer plugin */
    case 3: lo = V(2, 0), hi = V(2, 5); break;     /* another major */
    case 4: lo = V(0, 0), hi = V(0, 9); break;     /* an older major */
    default: lo = V(1, 1), hi = V(1, 0); break;    /* an inverted range */
    }
    hk_negotiate_answer_t a;
    hk_status_t st = hkv_negotiate(p, lo, hi, sizeof a, &a);
    /* It implements every minor up to its own (docs/abi.md, Versions). */
    int fits = lo <= hi && lo <= own && hi >= V(1, 0);
    char range[48];
    snprintf(range, sizeof range, "[%u.%u, %u.%u]", VMAJ(lo), VMIN(lo), VMAJ(hi), VMIN(hi));
    if (fits) {
        uint32_t want = own < hi ? own : hi;
        if (st != HK_STATUS_OK)
            hkv_fail(r, "%s gave %s; want OK", range, hkv_st(st));
        else if (a.abi_version != want)
            hkv_fail(r, "%s chose %u.%u; want %u.%u", range, VMAJ(a.abi_version),
                     VMIN(a.abi_version), VMAJ(want), VMIN(want));
        else if (!a.vtable || a.vtable->size < HKV_VT_SIZE_1_0)
            hkv_fail(r, "%s: no vtable, or one smaller than ABI 1.0's", range);
        hkv_note(r, "%s: OK, ABI %u.%u", range, VMAJ(a.abi_version), VMIN(a.abi_version));
    } else {
        if (st != HK_STATUS_ABI_MISMATCH)
            hkv_fail(r, "%s gave %s; want ABI_MISMATCH", range, hkv_st(st));
        else if (a.abi_version != own)
            hkv_fail(r, "%s: ABI_MISMATCH with abi_version %u.%u; want its own, %u.%u", range,
                     VMAJ(a.abi_version), VMIN(a.abi_version), VMAJ(own), VMIN(own));
        hkv_note(r, "%s: ABI_MISMATCH naming its own %u.%u", range, VMAJ(own), VMIN(own));
    }
}

static void check_null_args(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (open_only(p, r) != 0)
        return;
    hk_negotiate_request_t req = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1}, V(1, 0),
                                  HKV_ABI_MAX, NULL, NULL};
    hk_negotiate_answer_t a = {{HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1}, 0, 0, NULL, NULL, NULL};
    hk_status_t st = p->negotiate(NULL, &a);
    if (st != HK_STATUS_NULL_POINTER)
        hkv_fail(r, "request NULL gave %s; want NULL_POINTER", hkv_st(st));
    st = p->negotiate(&req, NULL);
    if (st != HK_STATUS_NULL_POINTER)
        hkv_fail(r, "answer NULL gave %s; want NULL_POINTER", hkv_st(st));
    hkv_note(r, "NULL request or answer: NULL_POINTER");
}

/* An answer buffer with room past any answer for a guard pattern. */
typedef union answer_room {
    hk_negotiate_answer_t a;
    unsigned char b[sizeof(hk_negotiate_answer_t) + 128];
} answer_room_t;

/* Negotiates [1.0, HKV_ABI_MAX] into buf, declared as `declared` bytes, with
 * every other byte of buf set to pattern beforehand. */
static hk_status_t negotiate_into(const hkv_plugin_t *p, answer_room_t *buf, uint32_t declared,
                                  unsigned char pattern)
{
    memset(buf->b, pattern, sizeof buf->b);
    buf->a.header.struct_type = HK_STRUCT_NEGOTIATE_ANSWER;
    buf->a.header.struct_size = declared;
    buf->a.header.struct_version = 1;
    hk_negotiate_request_t req = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1}, V(1, 0),
                                  HKV_ABI_MAX, NULL, NULL};
    return p->negotiate(&req, &buf->a);
}

/* The plugin writes no byte at or past the declared size (and stamps a size
 * no larger). pattern fills the rest of the buffer beforehand. */
static void short_answer(const hkv_plugin_t *p, uint32_t declared, unsigned char pattern,
                         hkv_result_t *r)
{
    answer_room_t buf;
    hk_status_t st = negotiate_into(p, &buf, declared, pattern);
    size_t first_bad = hkv_guard_broken(buf.b, declared, sizeof buf.b, pattern);
    if (first_bad < sizeof buf.b)
        hkv_fail(r, "declared %u bytes, the plugin wrote byte %zu (status %s)", declared,
                 first_bad, hkv_st(st));
    else if (buf.a.header.struct_size > declared)
        hkv_fail(r, "declared %u bytes, the plugin stamped struct_size %u", declared,
                 buf.a.header.struct_size);
}

static void check_short_answer(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (open_only(p, r) != 0)
        return;
    const uint32_t sizes[] = {
        sizeof(hk_struct_header_t), offsetof(hk_negotiate_answer_t, flags),
        offsetof(hk_negotiate_answer_t, name), offsetof(hk_negotiate_answer_t, version),
        offsetof(hk_negotiate_answer_t, vtable), sizeof(hk_negotiate_answer_t) - 1,
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        short_answer(p, sizes[i], 0xa5, r);
        short_answer(p, sizes[i], 0x5a, r);
    }
    hkv_note(r, "nothing written past %zu declared sizes (%u to %zu bytes)",
             sizeof sizes / sizeof sizes[0], sizes[0], sizeof(hk_negotiate_answer_t) - 1);
}

static void check_long_answer(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (open_only(p, r) != 0)
        return;
    answer_room_t buf;
    uint32_t declared = sizeof(hk_negotiate_answer_t) + 64;
    hk_status_t st = negotiate_into(p, &buf, declared, 0xa5);
    uint32_t stamped = buf.a.header.struct_size;
    size_t i;
    if (st != HK_STATUS_OK)
        hkv_fail(r, "a %u-byte answer buffer gave %s", declared, hkv_st(st));
    else if (stamped < ANS_MIN || stamped > declared)
        hkv_fail(r, "a %u-byte answer buffer: stamped struct_size %u", declared, stamped);
    else if ((i = hkv_guard_broken(buf.b, stamped, sizeof buf.b, 0xa5)) < sizeof buf.b)
        hkv_fail(r, "stamped %u bytes written, but byte %zu changed", stamped, i);
    hkv_note(r, "a %u-byte buffer: %u bytes written and stamped", declared, stamped);
}

static void check_long_request(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    if (open_only(p, r) != 0)
        return;
    union {
        hk_negotiate_request_t q;
        unsigned char b[sizeof(hk_negotiate_request_t) + 32];
    } req;
    memset(&req, 0, sizeof req);
    req.q.header = (hk_struct_header_t){HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1};
    req.q.abi_min = V(1, 0);
    req.q.abi_max = HKV_ABI_MAX;
    hk_negotiate_answer_t a = {{HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1}, 0, 0, NULL, NULL, NULL};
    hk_status_t st = p->negotiate(&req.q, &a);
    if (st != HK_STATUS_OK)
        hkv_fail(r, "a request from a newer host (%zu bytes, zero tail) gave %s", sizeof req,
                 hkv_st(st));
    hkv_note(r, "a %zu-byte request is read as far as the plugin knows", sizeof req);
}

/* ---- tables ---- */

#define MAX_TABLES 64

/* The names enum_tables lists, into names: how many, or -1 with the failure
 * recorded (not supported without enum_tables). */
static int list_tables(const hkv_plugin_t *p, const char **names, hkv_result_t *r)
{
    if (!p->vt.enum_tables) {
        hkv_notsup(r, "enum_tables");
        return -1;
    }
    int n = 0;
    for (size_t i = 0; i < MAX_TABLES; i++) {
        const char *name = NULL;
        hk_status_t st = p->vt.enum_tables(i, &name);
        if (st == HK_STATUS_NOT_FOUND)
            return n;
        if (st != HK_STATUS_OK || !one_line_string(name, 127)) {
            hkv_fail(r, "enum_tables(%zu) gave %s%s", i, hkv_st(st),
                     st == HK_STATUS_OK ? " with a NULL, empty or odd name" : "");
            return -1;
        }
        for (int j = 0; j < n; j++)
            if (strcmp(names[j], name) == 0) {
                hkv_fail(r, "enum_tables lists \"%s\" twice", name);
                return -1;
            }
        if (!strchr(name, '/'))
            hkv_fail(r, "table name \"%s\" has no \"/major\"", name);
        names[n++] = name;
    }
    hkv_fail(r, "enum_tables did not end with NOT_FOUND within %d tables", MAX_TABLES);
    return -1;
}

static void check_tables_enum(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    const char *names[MAX_TABLES];
    int n = list_tables(p, names, r);
    if (n < 0)
        return;
    char list[300] = "";
    for (int i = 0; i < n && strlen(list) < 200; i++)
        strcat(strcat(list, " "), names[i]);
    hkv_note(r, "%d table(s):%s", n, list);
}

static void check_tables_get(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    const char *names[MAX_TABLES];
    int n = list_tables(p, names, r);
    if (n < 0)
        return;
    for (int i = 0; i < n; i++) {
        const void *t = (const void *)1;
        hk_status_t st = p->vt.get_table(names[i], &t);
        size_t size = 0;
        if (st == HK_STATUS_OK && t)
            memcpy(&size, t, sizeof size);
        if (st != HK_STATUS_OK || !t)
            hkv_fail(r, "get_table(\"%s\") gave %s%s", names[i], hkv_st(st), t ? "" : " and NULL");
        else if (size < sizeof(size_t) + sizeof(void *) || size > 65536 || size % sizeof(void *))
            hkv_fail(r, "table \"%s\" has size %zu", names[i], size);
    }
    hkv_note(r, "%d table(s) obtainable, sizes sane; hk.blas1/1 %zu bytes, hk.memory/1 %zu bytes",
             n, p->blas_size, p->mem_size);
}

static void check_tables_unknown(const hkv_check_t *k, hkv_plugin_t *p, hkv_result_t *r)
{
    (void)k;
    const char *names[] = {"hk.no-such-table/1", "hk.blas1/999", "hk.blas1", "", "HK.BLAS1/1"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const void *t = (const void *)&names;
        hk_status_t st = p->vt.get_table(names[i], &t);
        if (st != HK_STATUS_NOT_FOUND)
            hkv_fail(r, "get_table(\"%s\") gave %s; want NOT_FOUND", names[i], hkv_st(st));
        else if (t != NULL)
            hkv_fail(r, "get_table(\"%s\"): NOT_FOUND but *table was not set to NULL", names[i]);
    }
    hkv_note(r, "unknown names: NOT_FOUND and *table = NULL");
}

void hkv_register_abi(void)
{
    hkv_add("load.quiet", check_load_quiet, 0, 0, 0, 0);
    hkv_add("negotiate.current", check_current, 0, 0, 0, 0);
    hkv_add("negotiate.answer-strings", check_strings, 0, 0, 0, 0);
    hkv_add("negotiate.vtable", check_vtable, 0, 0, 0, 0);
    hkv_add("negotiate.memory-flags", check_memory_flags, 0, 0, 0, 0);
    hkv_add("negotiate.older-minor-host", check_range, 0, 0, 0, 0);
    hkv_add("negotiate.newer-minor-host", check_range, 0, 1, 0, 0);
    hkv_add("negotiate.range-above-plugin", check_range, 0, 2, 0, 0);
    hkv_add("negotiate.other-major", check_range, 0, 3, 0, 0);
    hkv_add("negotiate.older-major", check_range, 0, 4, 0, 0);
    hkv_add("negotiate.inverted-range", check_range, 0, 5, 0, 0);
    hkv_add("negotiate.null-arguments", check_null_args, 0, 0, 0, 0);
    hkv_add("negotiate.short-answer", check_short_answer, 0, 0, 0, 0);
    hkv_add("negotiate.long-answer", check_long_answer, 0, 0, 0, 0);
    hkv_add("negotiate.long-request", check_long_request, 0, 0, 0, 0);
    hkv_add("tables.enum", check_tables_enum, HKV_NEED_PLUGIN, 0, 0, 0);
    hkv_add("tables.get", check_tables_get, HKV_NEED_PLUGIN, 0, 0, 0);
    hkv_add("tables.unknown-name", check_tables_unknown, HKV_NEED_PLUGIN, 0, 0, 0);
}
