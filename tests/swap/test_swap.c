/* Movable handles and swap from one thread: forwarding, settings that follow
 * a swap, modules closed and opened again, refused swaps that leave the old
 * implementation serving, loader destroy while handles live, bad input. */
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_status_text.h"
#include "swap_test.h"

typedef struct fx {
    hk_loader_t *loader;
    hk_plugin_t *a; /* hk-cpu 1.0.0 */
    hk_plugin_t *b; /* hk-cpu 1.0.1 */
} fx_t;

static int fx_up(fx_t *f)
{
    memset(f, 0, sizeof *f);
    f->loader = swp_loader();
    if (!f->loader)
        return 0;
    f->a = swp_open(f->loader, SWP_A);
    f->b = swp_open(f->loader, SWP_B);
    return f->a && f->b;
}

static void fx_down(fx_t *f)
{
    CU_ASSERT_EQUAL(hk_loader_destroy(f->loader), HK_STATUS_OK);
}

/* fx_up, asserted, and a movable handle on hk-cpu 1.0.0 (f->a), asserted
 * made: the start of the swap tests of one handle. */
static hk_mhandle_t *fx_up_on_a(fx_t *f)
{
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_FATAL(fx_up(f));
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(f->a, NULL, &mh), HK_STATUS_OK);
    return mh;
}

/* The twin build (hk-cpu-twin 2.0.0) opened in f's loader; asserted,
 * fatally. */
static hk_plugin_t *open_twin(fx_t *f)
{
    hk_plugin_t *twin = swp_open(f->loader, SWP_DOUBLE("swp_twin"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(twin);
    return twin;
}

static int has(const char *text, const char *needle)
{
    int ok = text && strstr(text, needle);
    if (!ok)
        fprintf(stderr, "\n--- expected \"%s\" in \"%s\"\n", needle, text ? text : "(null)");
    return ok;
}

static uint64_t generation_of(hk_mhandle_t *mh)
{
    hk_mhandle_state_t s = {.size = sizeof s};
    return hk_mhandle_state(mh, &s) == HK_STATUS_OK ? s.generation : UINT64_MAX;
}

static swp_state_t lstate(hk_loader_t *loader)
{
    return swp_state(loader);
}

/* y = 2x + y, then x.y, through mh on memory from its hk.memory/1: 1 when
 * every status and value is right. */
static int works(hk_mhandle_t *mh)
{
    enum { N = 100 };
    hk_blas1_v1_t b;
    hk_memory_v1_t m;
    swp_tables(&b, &m);
    hk_handle_t *h = hk_mhandle_handle(mh);
    float hx[N], hy[N], two = 2.0f, dot = -1.0f;
    void *dx = NULL, *dy = NULL;
    double want = 0.0;
    for (int i = 0; i < N; i++) {
        hx[i] = (float)(i % 5 - 2);
        hy[i] = (float)(i % 3);
        want += (double)hx[i] * (2.0 * hx[i] + hy[i]);
    }
    int ok = m.alloc(h, sizeof hx, &dx) == HK_STATUS_OK && m.alloc(h, sizeof hy, &dy) == HK_STATUS_OK
             && m.copy_to_device(h, dx, hx, sizeof hx) == HK_STATUS_OK
             && m.copy_to_device(h, dy, hy, sizeof hy) == HK_STATUS_OK
             && b.saxpy(h, N, &two, dx, 1, dy, 1) == HK_STATUS_OK
             && b.sdot(h, N, dx, 1, dy, 1, &dot) == HK_STATUS_OK
             && m.copy_to_host(h, hy, dy, sizeof hy) == HK_STATUS_OK;
    for (int i = 0; ok && i < N; i++)
        ok = hy[i] == 2.0f * (float)(i % 5 - 2) + (float)(i % 3);
    ok = ok && (double)dot == want;
    if (dx)
        m.free_(h, dx);
    if (dy)
        m.free_(h, dy);
    return ok;
}

static void test_forwarding(void)
{
    fx_t f;
    CU_ASSERT_FATAL(fx_up(&f));
    hk_mhandle_t *m1 = NULL, *m2 = NULL, *m3 = NULL;
    /* The request rules of hk_loader_select: a range, the highest, a plugin. */
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(f.loader, "hk-cpu@1.0.0", NULL, &m1), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(f.loader, "hk-cpu", NULL, &m2), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(f.a, NULL, &m3), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m1), f.a);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m2), f.b);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m3), f.a);
    CU_ASSERT(works(m1));
    CU_ASSERT(works(m2));

    const hk_vtable_t *vt = hk_mhandle_vtable();
    hk_handle_t *h = hk_mhandle_handle(m1);
    hk_pointer_mode_t mode = HK_POINTER_MODE_HOST;
    CU_ASSERT_EQUAL(vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->get_pointer_mode(h, &mode), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mode, HK_POINTER_MODE_DEVICE);
    void *stream = (void *)1;
    CU_ASSERT_EQUAL(vt->set_stream(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->get_stream(h, &stream), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(stream);
    CU_ASSERT_EQUAL(vt->synchronize(h), HK_STATUS_OK);
    hk_handle_info_t info = {.size = sizeof info};
    CU_ASSERT_EQUAL(vt->handle_info(h, &info), HK_STATUS_OK);
    CU_ASSERT_EQUAL(info.device, -1);
    CU_ASSERT_STRING_EQUAL(info.plugin_name, "hk-cpu");

    /* A failed call: the implementation's reason through both accessors. */
    hk_blas1_v1_t b;
    hk_memory_v1_t m;
    swp_tables(&b, &m);
    float y[4] = {0}, alpha = 1.0f;
    char line[256] = "";
    CU_ASSERT_EQUAL(b.saxpy(h, 4, &alpha, NULL, 1, y, 1), HK_STATUS_NULL_POINTER);
    CU_ASSERT(has(vt->last_error(h), "x is NULL"));
    CU_ASSERT_EQUAL(hk_mhandle_last_error_copy(m1, line, sizeof line), HK_STATUS_OK);
    CU_ASSERT(has(line, "x is NULL"));
    /* ... and through the forwarding vtable's ABI 1.2 slot, truncated too */
    size_t needed = 0;
    char small[4] = "zzz";
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt->last_error_copy);
    CU_ASSERT_EQUAL(vt->last_error_copy(h, line, sizeof line, &needed), HK_STATUS_OK);
    CU_ASSERT(has(line, "x is NULL"));
    CU_ASSERT_EQUAL(needed, strlen(line) + 1);
    CU_ASSERT_EQUAL(vt->last_error_copy(h, small, sizeof small, &needed), HK_STATUS_OK);
    CU_ASSERT_EQUAL(strlen(small), 3);
    CU_ASSERT_EQUAL(needed, strlen(line) + 1);
    CU_ASSERT_EQUAL(vt->last_error_copy(h, NULL, 8, &needed), HK_STATUS_NULL_POINTER);

    const void *table = NULL;
    const char *name = NULL;
    CU_ASSERT_EQUAL(vt->get_table(HK_TABLE_BLAS1_V1, &table), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(table);
    CU_ASSERT_EQUAL(vt->enum_tables(1, &name), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(name, HK_TABLE_MEMORY_V1);
    CU_ASSERT_EQUAL(vt->enum_tables(2, &name), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(name, HK_TABLE_KERNELS_V1);
    CU_ASSERT_EQUAL(vt->enum_tables(3, &name), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(name, HK_TABLE_CUDA_V1);
    CU_ASSERT_EQUAL(vt->enum_tables(4, &name), HK_STATUS_NOT_FOUND);
    CU_ASSERT_EQUAL(lstate(f.loader).handles, 3);
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).handles, 2);
    CU_ASSERT_EQUAL(swp_plugin_state(f.b).handles, 1);

    CU_ASSERT_EQUAL(hk_mhandle_destroy(m1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(hk_mhandle_handle(m2)), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(m3), HK_STATUS_OK);
    CU_ASSERT_EQUAL(lstate(f.loader).handles, 0);
    fx_down(&f);
}

static void test_bad_input(void)
{
    fx_t f;
    CU_ASSERT_FATAL(fx_up(&f));
    hk_mhandle_t *mh = (hk_mhandle_t *)&f;
    char line[256];
    CU_ASSERT_EQUAL(hk_mhandle_create(NULL, "hk-cpu", NULL, &mh), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NULL(mh);
    CU_ASSERT_EQUAL(hk_mhandle_create(f.loader, NULL, NULL, &mh), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_mhandle_create(f.loader, "hk-cpu", NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_mhandle_create_on(NULL, NULL, &mh), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_mhandle_create(f.loader, "no-such", NULL, &mh), HK_STATUS_NOT_FOUND);
    hk_mhandle_last_error_copy(NULL, line, sizeof line);
    CU_ASSERT(has(line, "no-such"));

    /* A create info too short for version 1: refused before the plugin runs. */
    hk_plugin_t *twin = open_twin(&f);
    swp_count_reset("hk-cpu-twin 2.0.0");
    hk_create_info_t shortinfo = {8, HK_DEVICE_CURRENT, 0};
    CU_ASSERT_EQUAL(hk_mhandle_create_on(twin, &shortinfo, &mh), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NULL(mh);
    CU_ASSERT_EQUAL(swp_creates(), 0);
    CU_ASSERT(has(hk_loader_last_error(f.loader), "info->size 8"));

    /* NULL, destroyed and foreign handles: INVALID_HANDLE, nothing touched. */
    hk_blas1_v1_t b;
    hk_memory_v1_t m;
    swp_tables(&b, &m);
    float x[2] = {1.0f, 2.0f}, two = 2.0f;
    CU_ASSERT_EQUAL(b.sscal(NULL, 2, &two, x, 1), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT(has(hk_mhandle_vtable()->last_error(NULL), "handle is NULL"));
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(f.a, NULL, &mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b.sscal(hk_mhandle_handle(mh), 2, &two, x, 1), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_INVALID_HANDLE);
    hk_mhandle_state_t ms = {.size = sizeof ms};
    CU_ASSERT_EQUAL(hk_mhandle_state(mh, &ms), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(hk_mhandle_last_error_copy(mh, line, sizeof line), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT(has(line, "not a live movable handle"));
    CU_ASSERT_EQUAL(hk_mhandle_vtable()->last_error_copy(hk_mhandle_handle(mh), line, sizeof line,
                                                         NULL),
                    HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_STRING_EQUAL(line, "");
    hk_plugin_acquire(f.a); /* a raw handle: the loader cannot see it */
    hk_handle_t *raw = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_plugin_vtable(f.a)->handle_create(NULL, &raw), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b.sscal(raw, 2, &two, x, 1), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(b.sscal((hk_handle_t *)(void *)line, 2, &two, x, 1),
                    HK_STATUS_INVALID_HANDLE);
    CU_ASSERT(x[0] == 1.0f && x[1] == 2.0f);
    CU_ASSERT_EQUAL(hk_plugin_vtable(f.a)->handle_destroy(raw), HK_STATUS_OK);
    hk_plugin_release(f.a);

    hk_blas1_v1_t part;
    CU_ASSERT_EQUAL(hk_mhandle_get_table("hk.nope/1", &part, sizeof part), HK_STATUS_NOT_FOUND);
    CU_ASSERT_EQUAL(hk_mhandle_get_table(HK_TABLE_BLAS1_V1, &part, 4), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(hk_mhandle_get_table(NULL, &part, sizeof part), HK_STATUS_NULL_POINTER);
    size_t cut = offsetof(hk_blas1_v1_t, sscal);
    CU_ASSERT_EQUAL(hk_mhandle_get_table(HK_TABLE_BLAS1_V1, &part, cut), HK_STATUS_OK);
    CU_ASSERT_EQUAL(part.size, cut);
    CU_ASSERT_PTR_NOT_NULL(part.daxpy);
    hk_handle_t *made = (hk_handle_t *)(void *)&f;
    CU_ASSERT_EQUAL(hk_mhandle_vtable()->handle_create(NULL, &made), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_PTR_NULL(made);

    hk_swap_options_t zero = {.size = 0};
    CU_ASSERT_EQUAL(hk_loader_swap(NULL, "hk-cpu", NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, NULL, NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, "hk-cpu", &zero, NULL), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, "no-such", NULL, NULL), HK_STATUS_NOT_FOUND);
    CU_ASSERT(has(hk_loader_last_error(f.loader), "swap to no-such refused: "));
    hk_swap_state_t s0 = {0};
    CU_ASSERT_EQUAL(hk_loader_swap_state(NULL, &s0), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_swap_state(f.loader, &s0), HK_STATUS_INVALID_VALUE);
    uint64_t v[2];
    size_t known = 7;
    CU_ASSERT_EQUAL(hk_loader_swap_stats(NULL, v, 2, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_swap_stats(f.loader, NULL, 2, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_swap_stats(f.loader, NULL, 0, &known), HK_STATUS_OK);
    CU_ASSERT_EQUAL(known, HK_SWAP_STAT__COUNT);
    CU_ASSERT_STRING_EQUAL(hk_swap_stat_name(HK_SWAP_STAT_SWAPS), "swaps");
    CU_ASSERT_STRING_EQUAL(hk_swap_stat_name(HK_SWAP_STAT_LAST_DESTROY_STATUS),
                           "last_destroy_status");
    CU_ASSERT_STRING_EQUAL(hk_swap_stat_name(HK_SWAP_STAT__COUNT), "unknown");
    CU_ASSERT_STRING_EQUAL(hk_swap_stat_name((hk_swap_stat_t)-1), "unknown");
    CU_ASSERT_EQUAL(hk_plugin_swap_state(NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_STRING_EQUAL(hk_swap_phase_name((hk_swap_phase_t)99), "unknown");
    CU_ASSERT_STRING_EQUAL(hk_module_state_name(HK_MODULE_STILL_MAPPED), "still-mapped");
    fx_down(&f);
}

static void test_swap_moves_state_and_closes(void)
{
    fx_t f;
    hk_mhandle_t *mh = fx_up_on_a(&f);
    hk_handle_t *h = hk_mhandle_handle(mh);
    const hk_vtable_t *vt = hk_mhandle_vtable();
    hk_blas1_v1_t b;
    hk_memory_v1_t m;
    swp_tables(&b, &m);
    float *buf = NULL, two = 2.0f;
    CU_ASSERT_EQUAL_FATAL(m.alloc(h, 4 * sizeof(float), (void **)&buf), HK_STATUS_OK);
    for (int i = 0; i < 4; i++)
        buf[i] = (float)i;
    CU_ASSERT_EQUAL(vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);

    hk_plugin_t *to = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_loader_swap(f.loader, SWP_B, NULL, &to), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(to, f.b);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), f.b);
    CU_ASSERT_EQUAL(generation_of(mh), 1);
    hk_pointer_mode_t mode = HK_POINTER_MODE_HOST;
    CU_ASSERT_EQUAL(vt->get_pointer_mode(h, &mode), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mode, HK_POINTER_MODE_DEVICE); /* the setting followed */
    /* Memory from the old implementation is in the same domain. */
    CU_ASSERT_EQUAL(b.sscal(h, 4, &two, buf, 1), HK_STATUS_OK);
    CU_ASSERT(buf[3] == 6.0f);
    CU_ASSERT_EQUAL(m.free_(h, buf), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);

    swp_state_t ls = lstate(f.loader);
    CU_ASSERT_EQUAL(ls.phase, HK_SWAP_IDLE);
    CU_ASSERT_EQUAL(ls.swaps, 1);
    CU_ASSERT_EQUAL(ls.modules_closed, 1);
    CU_ASSERT_EQUAL(ls.handles, 1);
    CU_ASSERT_EQUAL(ls.inflight, 0);
    CU_ASSERT(ls.last_switch_ns > 0);
    hk_swap_plugin_state_t pa = swp_plugin_state(f.a), pb = swp_plugin_state(f.b);
    CU_ASSERT_EQUAL(pa.module, HK_MODULE_CLOSED);
    CU_ASSERT_EQUAL(pa.handles, 0);
    CU_ASSERT_EQUAL(pa.closes, 1);
    CU_ASSERT_EQUAL(pb.module, HK_MODULE_OPEN);
    CU_ASSERT_EQUAL(pb.handles, 1);
    CU_ASSERT(!swp_mapped(SWP_A));
    CU_ASSERT(swp_mapped(SWP_B));
    /* The closed plugin is still listed, with no slot into the closed file. */
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(f.a), "1.0.0");
    CU_ASSERT_PTR_NULL(hk_plugin_vtable(f.a)->handle_create);
    CU_ASSERT_PTR_NULL(hk_plugin_table(f.a, HK_TABLE_BLAS1_V1));

    /* Back: the closed file is opened again. */
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, "hk-cpu@1.0.0", NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), f.a);
    CU_ASSERT(works(mh));
    pa = swp_plugin_state(f.a);
    CU_ASSERT_EQUAL(pa.module, HK_MODULE_OPEN);
    CU_ASSERT_EQUAL(pa.reopens, 1);
    CU_ASSERT_EQUAL(swp_plugin_state(f.b).module, HK_MODULE_CLOSED);
    CU_ASSERT(swp_mapped(SWP_A));
    CU_ASSERT(!swp_mapped(SWP_B));
    /* Already there: verified, nothing moves. */
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_A, NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(generation_of(mh), 2);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    fx_down(&f);
}

/* The last swap's steps add up to its switch time, and the verification
 * handle lives until after the switch (the new handles are made while it
 * lives, so a plugin keeps what its first handle loaded). */
static void test_swap_steps(void)
{
    fx_t f;
    CU_ASSERT_FATAL(fx_up(&f));
    open_twin(&f);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(f.a, NULL, &mh), HK_STATUS_OK);
    swp_count_reset("hk-cpu-twin 2.0.0");
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_DOUBLE("swp_twin"), NULL, NULL), HK_STATUS_OK);
    char seq[64];
    swp_sequence(seq, sizeof seq);
    CU_ASSERT_STRING_EQUAL(seq, "ccd"); /* verification, new handle; verification */
    swp_state_t ls = lstate(f.loader);
    CU_ASSERT(ls.last_verify_ns > 0 && ls.last_create_ns > 0 && ls.last_close_ns > 0);
    CU_ASSERT_EQUAL(ls.last_open_ns + ls.last_verify_ns + ls.last_create_ns + ls.last_commit_ns,
                    ls.last_switch_ns);
    /* A caller that knows fewer statistics gets those, and nothing past
     * them is written; one that knows more reads 0 past the loader's. */
    uint64_t few[HK_SWAP_STAT__COUNT + 2];
    memset(few, 0xab, sizeof few);
    CU_ASSERT_EQUAL(hk_loader_swap_stats(f.loader, few, HK_SWAP_STAT_LAST_OPEN_NS, NULL),
                    HK_STATUS_OK);
    CU_ASSERT_EQUAL(few[HK_SWAP_STAT_LAST_SWITCH_NS], ls.last_switch_ns);
    CU_ASSERT_EQUAL(few[HK_SWAP_STAT_LAST_OPEN_NS], 0xababababababababull); /* not written */
    size_t known = 0;
    CU_ASSERT_EQUAL(hk_loader_swap_stats(f.loader, few, HK_SWAP_STAT__COUNT + 2, &known),
                    HK_STATUS_OK);
    CU_ASSERT_EQUAL(known, HK_SWAP_STAT__COUNT);
    CU_ASSERT_EQUAL(few[HK_SWAP_STAT_LAST_OPEN_NS], ls.last_open_ns);
    CU_ASSERT_EQUAL(few[HK_SWAP_STAT__COUNT], 0);
    CU_ASSERT_EQUAL(few[HK_SWAP_STAT__COUNT + 1], 0);
    /* And the state struct, to a caller that knows it without libraries. */
    hk_swap_state_t old;
    memset(&old, 0xab, sizeof old);
    old.size = offsetof(hk_swap_state_t, libraries);
    CU_ASSERT_EQUAL(hk_loader_swap_state(f.loader, &old), HK_STATUS_OK);
    CU_ASSERT_EQUAL(old.size, offsetof(hk_swap_state_t, libraries));
    CU_ASSERT_EQUAL(old.handles, 1);
    CU_ASSERT_EQUAL(old.libraries, 0xababababababababull); /* not written */
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    fx_down(&f);
}

typedef struct commit_try {
    hk_swap_prepared_t *prepared;
    hk_status_t commit, cancel;
} commit_try_t;

static void *commit_elsewhere(void *arg)
{
    commit_try_t *t = arg;
    t->commit = hk_loader_swap_commit(t->prepared, NULL);
    t->cancel = hk_loader_swap_cancel(t->prepared);
    return NULL;
}

/* Prepare does everything but the switch: the handle keeps running the old
 * implementation, a setting changed meanwhile follows, commit switches (from
 * the preparing thread only) and cancel leaves everything as it was. */
static void test_prepare_commit_cancel(void)
{
    fx_t f;
    hk_mhandle_t *mh = fx_up_on_a(&f);
    hk_handle_t *h = hk_mhandle_handle(mh);
    const hk_vtable_t *vt = hk_mhandle_vtable();
    hk_swap_prepared_t *p = (hk_swap_prepared_t *)&f; /* must be set to NULL */
    CU_ASSERT_EQUAL(hk_loader_swap_prepare(f.loader, "no-such", NULL, &p), HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(hk_loader_swap_prepare(f.loader, SWP_B, NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_swap_commit(NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_loader_swap_cancel(NULL), HK_STATUS_NULL_POINTER);
    uint64_t failed = lstate(f.loader).refused;

    /* prepared, then cancelled: nothing moved */
    CU_ASSERT_EQUAL_FATAL(hk_loader_swap_prepare(f.loader, SWP_B, NULL, &p), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(lstate(f.loader).phase, HK_SWAP_PENDING);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), f.a);
    CU_ASSERT(works(mh)); /* the old implementation serves meanwhile */
    CU_ASSERT_EQUAL(hk_loader_swap_cancel(p), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), f.a);
    swp_state_t ls = lstate(f.loader);
    CU_ASSERT_EQUAL(ls.phase, HK_SWAP_IDLE);
    CU_ASSERT_EQUAL(ls.swaps, 0);
    CU_ASSERT_EQUAL(ls.refused, failed);

    /* prepared; a setting changed; another thread may not commit; commit */
    CU_ASSERT_EQUAL_FATAL(hk_loader_swap_prepare(f.loader, SWP_B, NULL, &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    commit_try_t t = {p, HK_STATUS_OK, HK_STATUS_OK};
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, commit_elsewhere, &t), 0);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(t.commit, HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(t.cancel, HK_STATUS_INVALID_VALUE);
    CU_ASSERT(has(hk_loader_last_error(f.loader), "prepared by another thread"));
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), f.a);
    hk_plugin_t *to = NULL;
    CU_ASSERT_EQUAL(hk_loader_swap_commit(p, &to), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(to, f.b);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), f.b);
    hk_pointer_mode_t mode = HK_POINTER_MODE_HOST;
    CU_ASSERT_EQUAL(vt->get_pointer_mode(h, &mode), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mode, HK_POINTER_MODE_DEVICE); /* set after the prepare, still followed */
    CU_ASSERT_EQUAL(vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    CU_ASSERT(works(mh));
    ls = lstate(f.loader);
    CU_ASSERT_EQUAL(ls.phase, HK_SWAP_IDLE);
    CU_ASSERT_EQUAL(ls.swaps, 1);
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).module, HK_MODULE_CLOSED);
    CU_ASSERT_EQUAL(ls.last_commit_ns, ls.last_switch_ns); /* counted from the commit */
    CU_ASSERT(ls.last_verify_ns > 0);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    fx_down(&f);
}

static void test_swap_from_name(void)
{
    fx_t f;
    CU_ASSERT_FATAL(fx_up(&f));
    hk_plugin_t *twin = open_twin(&f);
    hk_mhandle_t *m1 = NULL, *m2 = NULL, *m3 = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(f.a, NULL, &m1), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(f.a, NULL, &m2), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(twin, NULL, &m3), HK_STATUS_OK);
    hk_swap_options_t o = {.size = sizeof o, .from = "hk-cpu"};
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_B, &o, NULL), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m1), f.b);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m2), f.b);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m3), twin);
    CU_ASSERT_EQUAL(swp_plugin_state(twin).handles, 1);
    CU_ASSERT_EQUAL(swp_plugin_state(f.b).handles, 2);
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).module, HK_MODULE_CLOSED);
    /* Without from, every handle moves, across plugin names. */
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_B, NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m3), f.b);
    CU_ASSERT(works(m3));
    CU_ASSERT_EQUAL(swp_plugin_state(twin).module, HK_MODULE_CLOSED);
    CU_ASSERT(!swp_mapped(SWP_DOUBLE("swp_twin")));
    CU_ASSERT_EQUAL(hk_mhandle_destroy(m1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(m2), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(m3), HK_STATUS_OK);
    fx_down(&f);
}

/* A refused swap: status, reason, and the old implementation still serving. */
static void refused(const char *target, hk_status_t want, const char *count, int creates,
                    const char *r1, const char *r2)
{
    fx_t f;
    hk_mhandle_t *mh = fx_up_on_a(&f);
    swp_count_reset(count);
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, target, NULL, NULL), want);
    const char *why = hk_loader_last_error(f.loader);
    CU_ASSERT(has(why, "swap to "));
    CU_ASSERT(has(why, " refused: "));
    CU_ASSERT(has(why, r1));
    CU_ASSERT(has(why, r2));
    CU_ASSERT_EQUAL(swp_creates(), creates);
    CU_ASSERT_EQUAL(swp_destroys(), want == HK_STATUS_OUT_OF_MEMORY ? 0 : creates);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), f.a);
    CU_ASSERT_EQUAL(generation_of(mh), 0);
    CU_ASSERT(works(mh));
    swp_state_t ls = lstate(f.loader);
    CU_ASSERT_EQUAL(ls.refused, 1);
    CU_ASSERT_EQUAL(ls.swaps, 0);
    CU_ASSERT_EQUAL(ls.modules_closed, 0);
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).module, HK_MODULE_OPEN);
    CU_ASSERT(swp_mapped(SWP_A));
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    fx_down(&f);
}

static void test_refused_wrong_result(void)
{
    refused(SWP_DOUBLE("swp_wrong"), HK_STATUS_LOAD_FAILED, "hk-cpu 1.0.2", 1,
            "failed verification", "saxpy gave");
}

static void test_refused_create_fails(void)
{
    refused(SWP_DOUBLE("swp_nocreate"), HK_STATUS_OUT_OF_MEMORY, "hk-cpu 1.0.3", 1,
            "handle_create", "OUT_OF_MEMORY");
}

/* Declared by flag: refused before any code of the plugin runs. */
static void test_refused_cross_domain_flag(void)
{
    refused(SWP_DOUBLE("swp_cudaflag"), HK_STATUS_NOT_SUPPORTED, "hk-gpu-like 1.0.0", 0,
            "works in host memory and hk-gpu-like 1.0.0 in CUDA device memory",
            "buffers would not follow");
}

/* Without a flag, its handle's device says it: one handle made and destroyed. */
static void test_refused_cross_domain_info(void)
{
    refused(SWP_DOUBLE("swp_cudainfo"), HK_STATUS_NOT_SUPPORTED, "hk-gpu-info 1.0.0", 1,
            "in CUDA device memory", "buffers would not follow");
}

/* A refused swap to a plugin whose module was closed closes it again. */
static void test_refused_leaves_closed(void)
{
    fx_t f;
    CU_ASSERT_FATAL(fx_up(&f));
    hk_plugin_t *gpu = swp_open(f.loader, SWP_DOUBLE("swp_cudainfo"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(gpu);
    hk_mhandle_t *m1 = NULL, *m2 = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(f.a, NULL, &m1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_B, NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).module, HK_MODULE_CLOSED);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(gpu, NULL, &m2), HK_STATUS_OK);
    /* m2 reports a GPU device: moving both to hk-cpu 1.0.0 is refused after
     * its file was opened again for the verification. */
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_A, NULL, NULL), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT(has(hk_loader_last_error(f.loader), "buffers would not follow"));
    hk_swap_plugin_state_t pa = swp_plugin_state(f.a);
    CU_ASSERT_EQUAL(pa.reopens, 1);
    CU_ASSERT_EQUAL(pa.module, HK_MODULE_CLOSED);
    CU_ASSERT(!swp_mapped(SWP_A));
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m1), f.b);
    CU_ASSERT(works(m1));
    CU_ASSERT_EQUAL(hk_mhandle_destroy(m1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(m2), HK_STATUS_OK);
    fx_down(&f);
}

static void test_destroy_busy_while_handles_live(void)
{
    hk_loader_t *loader = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = swp_open(loader, SWP_A);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, NULL, &mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_BUSY);
    CU_ASSERT(has(hk_loader_last_error(loader), "1 movable handle(s) still live"));
    CU_ASSERT(swp_mapped(SWP_A)); /* nothing was unmapped under the handle */
    CU_ASSERT(works(mh));
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    CU_ASSERT(!swp_mapped(SWP_A)); /* hk-cpu is unload-safe: destroy closed it */
}

static void test_acquired_plugin_stays_open(void)
{
    fx_t f;
    hk_mhandle_t *mh = fx_up_on_a(&f);
    hk_plugin_acquire(f.a);
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_B, NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).module, HK_MODULE_OPEN);
    CU_ASSERT(swp_mapped(SWP_A));
    hk_handle_t *raw = NULL; /* the raw user the acquire protects */
    CU_ASSERT_EQUAL(hk_plugin_vtable(f.a)->handle_create(NULL, &raw), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_plugin_vtable(f.a)->handle_destroy(raw), HK_STATUS_OK);
    hk_plugin_release(f.a);
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_A, NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(f.loader, SWP_B, NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).module, HK_MODULE_CLOSED);
    CU_ASSERT(!swp_mapped(SWP_A));
    /* A create on the closed plugin opens it again. */
    hk_mhandle_t *again = NULL;
    CU_ASSERT_EQUAL(hk_mhandle_create(f.loader, "hk-cpu@1.0.0", NULL, &again), HK_STATUS_OK);
    CU_ASSERT(works(again));
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).module, HK_MODULE_OPEN);
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).reopens, 1);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(again), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    fx_down(&f);
}

typedef struct held {
    hk_mhandle_t *mh;
    hk_loader_t *loader;
    float *x;
    hk_status_t st;
} held_t;

static void *held_call(void *arg)
{
    held_t *c = arg;
    hk_blas1_v1_t b;
    hk_memory_v1_t m;
    swp_tables(&b, &m);
    float one = 1.0f;
    c->st = b.sscal(hk_mhandle_handle(c->mh), 2, &one, c->x, 1);
    return NULL;
}

static void *held_swap(void *arg)
{
    held_t *c = arg;
    c->st = hk_loader_swap(c->loader, SWP_A, NULL, NULL);
    return NULL;
}

/* A call in flight finishes on the old implementation while new calls run on
 * the new one; the swap waits for it, and says so in its state. */
static void test_call_boundary(void)
{
    fx_t f;
    CU_ASSERT_FATAL(fx_up(&f));
    hk_plugin_t *hold = swp_open(f.loader, SWP_DOUBLE("swp_hold"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(hold);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(hold, NULL, &mh), HK_STATUS_OK);
    float x[2] = {0.0f, 5.0f};
    uint32_t bits = SWP_HOLD;
    __atomic_store_n((uint32_t *)(void *)x, bits, __ATOMIC_RELEASE);
    held_t call = {mh, f.loader, x, HK_STATUS_INTERNAL}, sw = call;
    pthread_t tc, ts;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&tc, NULL, held_call, &call), 0);
    hk_mhandle_state_t ms = {.size = sizeof ms};
    do {
        sched_yield();
        hk_mhandle_state(mh, &ms);
    } while (ms.inflight == 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&ts, NULL, held_swap, &sw), 0);
    swp_state_t ls;
    do {
        sched_yield();
        ls = lstate(f.loader);
    } while (ls.phase != HK_SWAP_DRAINING);
    CU_ASSERT_EQUAL(ls.draining, 1);
    CU_ASSERT_EQUAL(ls.inflight, 1);
    hk_swap_plugin_state_t ph = swp_plugin_state(hold);
    CU_ASSERT_EQUAL(ph.handles, 0);
    CU_ASSERT_EQUAL(ph.inflight, 1);
    CU_ASSERT_EQUAL(ph.draining, 1);
    CU_ASSERT_EQUAL(swp_plugin_state(f.a).handles, 1);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), f.a);
    /* A new call does not wait for the drain: it runs on hk-cpu 1.0.0. */
    float y[2] = {1.0f, 2.0f}, three = 3.0f;
    hk_blas1_v1_t b;
    hk_memory_v1_t m;
    swp_tables(&b, &m);
    CU_ASSERT_EQUAL(b.sscal(hk_mhandle_handle(mh), 2, &three, y, 1), HK_STATUS_OK);
    CU_ASSERT(y[0] == 3.0f && y[1] == 6.0f);
    CU_ASSERT_EQUAL(hk_loader_destroy(f.loader), HK_STATUS_BUSY);
    CU_ASSERT(swp_mapped(SWP_DOUBLE("swp_hold"))); /* not closed under the call */

    float go = 7.0f;
    memcpy(&bits, &go, sizeof bits);
    __atomic_store_n((uint32_t *)(void *)x, bits, __ATOMIC_RELEASE);
    pthread_join(tc, NULL);
    pthread_join(ts, NULL);
    CU_ASSERT_EQUAL(call.st, HK_STATUS_OK);
    CU_ASSERT(x[0] == 7.0f && x[1] == 5.0f);
    CU_ASSERT_EQUAL(sw.st, HK_STATUS_OK);
    ls = lstate(f.loader);
    CU_ASSERT_EQUAL(ls.phase, HK_SWAP_IDLE);
    CU_ASSERT_EQUAL(ls.draining, 0);
    CU_ASSERT(ls.last_drain_ns > 0);
    CU_ASSERT_EQUAL(swp_plugin_state(hold).module, HK_MODULE_CLOSED);
    CU_ASSERT(!swp_mapped(SWP_DOUBLE("swp_hold")));
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    fx_down(&f);
}

void swp_register_basic(void)
{
    CU_pSuite s = hk_test_suite("swap", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"movable handles forward every slot", test_forwarding},
        {"bad input is refused, nothing touched", test_bad_input},
        {"swap moves settings, closes and reopens modules", test_swap_moves_state_and_closes},
        {"swap moves only the handles of from", test_swap_from_name},
        {"prepare, then commit or cancel", test_prepare_commit_cancel},
        {"the last swap step by step; the verification handle outlives the switch",
         test_swap_steps},
        {"a call in flight finishes on the old implementation", test_call_boundary},
        {"refused: wrong verification result", test_refused_wrong_result},
        {"refused: handle_create fails", test_refused_create_fails},
        {"refused: other memory domain (flag)", test_refused_cross_domain_flag},
        {"refused: other memory domain (handle_info)", test_refused_cross_domain_info},
        {"refused: a closed module stays closed", test_refused_leaves_closed},
        {"loader destroy is BUSY while handles live", test_destroy_busy_while_handles_live},
        {"an acquired plugin is not closed", test_acquired_plugin_stays_open},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}

int hk_test_register(void)
{
    swp_register_basic();
    swp_register_reopen();
    swp_register_load();
    swp_register_hold();
    swp_register_host();
    swp_register_deadline();
    swp_register_generic();
    swp_register_verifier();
    swp_register_promises();
    return 0;
}
