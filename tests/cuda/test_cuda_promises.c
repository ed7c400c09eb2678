/* hk-cuda's [thread-safe] and [handle-safe] promises that no other test holds
 * to several threads at once: 8 threads start together at a barrier and call,
 * on one handle, the core slots (stream and pointer mode set and read while
 * others set them, handle_info, synchronize, get_table, enum_tables, the
 * entry point, last_error_copy of the handle and of each thread's own failed
 * create), hk.cuda/1 and hk.memory/1; and hk.kernels/1's load, get_kernel,
 * get_attributes, get_function and unload on one library and on libraries of
 * their own; and a checked handle's pointer check (hk_kit_check_pointer):
 * device memory passes, host memory is refused. Every answer is checked
 * against what one thread got first.
 * Runs on the simulated driver (2 devices) and unchanged on a GPU. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "hk_crowd.h"
#include "hkct_context.h"

#define THREADS 8
#define ROUNDS 50
#define BYTES 4096

typedef hk_crowd_t run_t;
typedef hk_crowd_arg_t arg_t;
#define EXPECT HK_CROWD_EXPECT

/* Runs fn on THREADS threads released together; none may see a wrong answer. */
static void run_threads(run_t *run, void *(*fn)(void *))
{
    hk_crowd_run(run, THREADS, fn);
}

/* What one thread saw before the others started. */
static struct {
    hk_handle_t *h;
    CUcontext ctx;
    CUstream stream;
    int device, ordinal;
    hk_handle_info_t info;
    const void *mem_storage;
    const char *table_names[8];
    size_t tables;
    hk_negotiate_fn negotiate;
    hk_negotiate_answer_t answer;
    char create_error[THREADS][256]; /* each thread's failed create */
    char null_error[256];            /* the failing call of the workers */
    hk_library_t *lib;
    hk_kernel_t *kernel;
    hk_kernel_attributes_t attrs;
    void *function;
} one;

static const hk_negotiate_request_t request = {
    {HK_STRUCT_NEGOTIATE_REQUEST, sizeof(hk_negotiate_request_t), 1},
    HK_ABI_VERSION(HK_ABI_MAJOR, 0), HK_ABI_CURRENT, NULL, NULL};

/* Two answers say the same (field by field: the padding is whatever the
 * plugin's copy held). */
static int same_answer(const hk_negotiate_answer_t *x, const hk_negotiate_answer_t *y)
{
    return x->header.struct_type == y->header.struct_type &&
           x->header.struct_size == y->header.struct_size &&
           x->header.struct_version == y->header.struct_version &&
           x->abi_version == y->abi_version && x->flags == y->flags && x->name == y->name &&
           x->version == y->version && x->vtable == y->vtable;
}

/* ---- one handle: core slots, hk.cuda/1, hk.memory/1 ---- */

static void core_round(arg_t *a, int r)
{
    const hk_vtable_t *vt = hkct_plug.vt;
    const hk_cuda_v1_t *c = hkct_plug.cuda;
    void *set = (r + a->id) % 2 ? one.stream : NULL;
    void *got = (void *)a;
    EXPECT(vt->set_stream(one.h, set) == HK_STATUS_OK, "set_stream");
    EXPECT(vt->get_stream(one.h, &got) == HK_STATUS_OK && (got == NULL || got == one.stream),
           "get_stream: one of the streams set");
    got = (void *)a;
    EXPECT(c->get_stream(one.h, &got) == HK_STATUS_OK && (got == NULL || got == one.stream),
           "hk.cuda/1 get_stream: one of the streams set");
    hk_pointer_mode_t m = (r + a->id) % 3 ? HK_POINTER_MODE_HOST : HK_POINTER_MODE_DEVICE;
    hk_pointer_mode_t gm = (hk_pointer_mode_t)-1;
    EXPECT(vt->set_pointer_mode(one.h, m) == HK_STATUS_OK, "set_pointer_mode");
    EXPECT(vt->get_pointer_mode(one.h, &gm) == HK_STATUS_OK &&
               (gm == HK_POINTER_MODE_HOST || gm == HK_POINTER_MODE_DEVICE), "get_pointer_mode");
    hk_handle_info_t info = {.size = sizeof info};
    EXPECT(vt->handle_info(one.h, &info) == HK_STATUS_OK && info.size == one.info.size &&
               info.device == one.info.device && info.context_id == one.info.context_id &&
               info.owns_primary == one.info.owns_primary && info.flags == one.info.flags &&
               info.plugin_name == one.info.plugin_name, "handle_info");
    void *ctx = NULL;
    int dev = -2, ord = -2;
    EXPECT(c->get_context(one.h, &ctx) == HK_STATUS_OK && ctx == (void *)one.ctx,
           "hk.cuda/1 get_context");
    EXPECT(c->get_device(one.h, &dev, &ord) == HK_STATUS_OK && dev == one.device &&
               ord == one.ordinal, "hk.cuda/1 get_device");
    const void *t = NULL;
    const char *name = NULL;
    EXPECT(vt->get_table(HK_TABLE_MEMORY_V1, &t) == HK_STATUS_OK && t == one.mem_storage,
           "get_table");
    size_t i = (size_t)(r + a->id) % (one.tables + 1);
    hk_status_t st = vt->enum_tables(i, &name);
    EXPECT(i < one.tables ? st == HK_STATUS_OK && name == one.table_names[i]
                          : st == HK_STATUS_NOT_FOUND, "enum_tables");
    hk_negotiate_answer_t ans;
    memset(&ans, 0, sizeof ans);
    ans.header.struct_size = sizeof ans;
    EXPECT(one.negotiate(&request, &ans) == HK_STATUS_OK &&
               same_answer(&ans, &one.answer), "hk_plugin_negotiate");
    EXPECT(vt->synchronize(one.h) == HK_STATUS_OK, "synchronize");
}

static void memory_round(arg_t *a, int r)
{
    const hk_memory_v1_t *mem = hkct_plug.mem;
    unsigned char src[BYTES], back[BYTES];
    for (int i = 0; i < BYTES; i++)
        src[i] = (unsigned char)(i * 7 + a->id + r);
    void *d = NULL;
    EXPECT(mem->alloc(one.h, BYTES, &d) == HK_STATUS_OK && d, "alloc");
    if (!d)
        return;
    EXPECT(mem->copy_to_device(one.h, d, src, BYTES) == HK_STATUS_OK, "copy_to_device");
    EXPECT(mem->memset_(one.h, (char *)d + 64, 0xa0 + a->id, 64) == HK_STATUS_OK, "memset_");
    memset(back, 0, sizeof back);
    EXPECT(mem->copy_to_host(one.h, back, d, BYTES) == HK_STATUS_OK, "copy_to_host");
    int bad = 0;
    for (int i = 0; i < BYTES; i++)
        bad += back[i] != (i >= 64 && i < 128 ? (unsigned char)(0xa0 + a->id) : src[i]);
    EXPECT(!bad, "the memory holds what this thread wrote");
    EXPECT(mem->free_(one.h, d) == HK_STATUS_OK, "free_");
}

/* A failing call of every thread, then the handle's line read back: all
 * threads fail the same way, so whichever is last the line is that one;
 * and each thread's failed create is its own. */
static void error_round(arg_t *a, int r)
{
    const hk_vtable_t *vt = hkct_plug.vt;
    char buf[256];
    size_t needed = 0;
    EXPECT(hkct_plug.mem->alloc(one.h, 16, NULL) == HK_STATUS_NULL_POINTER, "failing alloc");
    EXPECT(vt->last_error_copy(one.h, buf, sizeof buf, &needed) == HK_STATUS_OK &&
               strcmp(buf, one.null_error) == 0 && needed == strlen(buf) + 1,
           "last_error_copy of the handle");
    hk_create_info_t ci = {sizeof ci, 100 + a->id, 0};
    hk_handle_t *none = NULL;
    EXPECT(vt->handle_create(&ci, &none) == HK_STATUS_INVALID_DEVICE && !none, "failing create");
    EXPECT(vt->last_error_copy(NULL, buf, sizeof buf, NULL) == HK_STATUS_OK &&
               strcmp(buf, one.create_error[a->id]) == 0, "last_error_copy(NULL): own create");
    EXPECT(strcmp(vt->last_error(NULL), one.create_error[a->id]) == 0,
           "last_error(NULL): own create");
}

static void *handle_worker(void *p)
{
    arg_t *a = p;
    CUcontext before = NULL;
    cuCtxGetCurrent(&before);
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS; r++) {
        core_round(a, r);
        memory_round(a, r);
        error_round(a, r);
        CUcontext now = (CUcontext)a;
        EXPECT(cuCtxGetCurrent(&now) == CUDA_SUCCESS && now == before,
               "the thread's current context is left alone");
    }
    return NULL;
}

static void record_reference(void)
{
    const hk_vtable_t *vt = hkct_plug.vt;
    one.negotiate = NULL;
    *(void **)&one.negotiate = dlsym(hkct_plug.dl, HK_ENTRY_SYMBOL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one.negotiate);
    memset(&one.answer, 0, sizeof one.answer);
    one.answer.header.struct_size = sizeof one.answer;
    CU_ASSERT_EQUAL_FATAL(one.negotiate(&request, &one.answer), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(vt->get_table(HK_TABLE_MEMORY_V1, &one.mem_storage), HK_STATUS_OK);
    one.tables = 0;
    while (one.tables < 8 && vt->enum_tables(one.tables, &one.table_names[one.tables]) ==
                                 HK_STATUS_OK)
        one.tables++;
    CU_ASSERT(one.tables >= 4);
    for (int i = 0; i < THREADS; i++) {
        hk_create_info_t ci = {sizeof ci, 100 + i, 0};
        hk_handle_t *none = NULL;
        CU_ASSERT_EQUAL(vt->handle_create(&ci, &none), HK_STATUS_INVALID_DEVICE);
        CU_ASSERT_EQUAL(vt->last_error_copy(NULL, one.create_error[i], sizeof one.create_error[i],
                                            NULL), HK_STATUS_OK);
        CU_ASSERT_NOT_EQUAL(one.create_error[i][0], '\0');
    }
    CU_ASSERT_EQUAL(hkct_plug.mem->alloc(one.h, 16, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(vt->last_error_copy(one.h, one.null_error, sizeof one.null_error, NULL),
                    HK_STATUS_OK);
    CU_ASSERT_NOT_EQUAL(one.null_error[0], '\0');
}

HKCT_SCENARIO(t_one_handle)
{
    one.h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one.h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(hkct_plug.cuda);
    void *ctx = NULL;
    CU_ASSERT_EQUAL_FATAL(hkct_plug.cuda->get_context(one.h, &ctx), HK_STATUS_OK);
    one.ctx = ctx;
    CU_ASSERT_EQUAL_FATAL(hkct_plug.cuda->get_device(one.h, &one.device, &one.ordinal),
                          HK_STATUS_OK);
    one.info = hkct_info(one.h);
    /* a stream of the handle's context (blocking: it waits for the default
     * stream and the default stream for it, so the copies of a thread stay
     * ordered whichever of the two another thread set) */
    HKCT_OK(cuCtxPushCurrent(one.ctx));
    HKCT_OK(cuStreamCreate(&one.stream, 0));
    HKCT_OK(cuCtxPopCurrent(NULL));
    record_reference();

    run_t run;
    run_threads(&run, handle_worker);

    CU_ASSERT_EQUAL(hkct_plug.vt->set_stream(one.h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hkct_plug.vt->handle_destroy(one.h), HK_STATUS_OK);
    HKCT_OK(cuCtxPushCurrent(one.ctx));
    HKCT_OK(cuStreamDestroy(one.stream));
    HKCT_OK(cuCtxPopCurrent(NULL));
}

/* ---- hk.kernels/1: one library shared, and one each ---- */

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry hkp_one()\n{\n\tret;\n}\n"
                          ".visible .entry hkp_two()\n{\n\tret;\n}\n";

static void *kernels_worker(void *p)
{
    arg_t *a = p;
    const hk_kernels_v1_t *k = hkct_plug.kernels;
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS; r++) {
        hk_kernel_t *kern = NULL, *two = NULL;
        EXPECT(k->get_kernel(one.h, one.lib, "hkp_one", &kern) == HK_STATUS_OK &&
                   kern == one.kernel, "get_kernel: the same kernel every time");
        EXPECT(k->get_kernel(one.h, one.lib, "hkp_none", &two) == HK_STATUS_NOT_FOUND && !two,
               "get_kernel of an absent name");
        hk_kernel_attributes_t at;
        memset(&at, 0, sizeof at);
        at.size = sizeof at;
        EXPECT(k->get_attributes(one.h, one.kernel, &at) == HK_STATUS_OK &&
                   memcmp(&at, &one.attrs, sizeof at) == 0, "get_attributes");
        void *fn = NULL;
        EXPECT(k->get_function(one.h, one.kernel, &fn) == HK_STATUS_OK && fn == one.function,
               "get_function");
        /* a library of the thread's own, loaded and unloaded while the
         * others use theirs and the shared one */
        hk_library_t *own = NULL;
        EXPECT(k->load(one.h, ptx, sizeof ptx, &own) == HK_STATUS_OK && own && own != one.lib,
               "load");
        if (!own)
            continue;
        EXPECT(k->get_kernel(one.h, own, "hkp_two", &two) == HK_STATUS_OK && two &&
                   two != one.kernel, "get_kernel in the own library");
        EXPECT(k->unload(one.h, own) == HK_STATUS_OK, "unload");
        EXPECT(k->unload(one.h, own) == HK_STATUS_INVALID_VALUE, "unload again");
    }
    return NULL;
}

HKCT_SCENARIO(t_kernels)
{
    const hk_kernels_v1_t *k = hkct_plug.kernels;
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    one.h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one.h);
    CU_ASSERT_EQUAL_FATAL(k->load(one.h, ptx, sizeof ptx, &one.lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(k->get_kernel(one.h, one.lib, "hkp_one", &one.kernel), HK_STATUS_OK);
    memset(&one.attrs, 0, sizeof one.attrs);
    one.attrs.size = sizeof one.attrs;
    CU_ASSERT_EQUAL_FATAL(k->get_attributes(one.h, one.kernel, &one.attrs), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(k->get_function(one.h, one.kernel, &one.function), HK_STATUS_OK);

    run_t run;
    run_threads(&run, kernels_worker);

    CU_ASSERT_EQUAL(k->unload(one.h, one.lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hkct_plug.vt->handle_destroy(one.h), HK_STATUS_OK);
}

/* ---- a checked handle: the pointer check from 8 threads ---- */

#define CN 512

static struct {
    hk_handle_t *h;
    float *dx, *dy; /* device memory of the handle's device */
    float dot;      /* x.y, exact: small integers */
} chk;

static void *checked_worker(void *p)
{
    arg_t *a = p;
    const hk_blas1_v1_t *b = hkct_plug.blas;
    float zero = 0.0f, host[CN];
    memset(host, 0, sizeof host);
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS; r++) {
        float got = -1.0f;
        EXPECT(b->saxpy(chk.h, CN, &zero, chk.dx, 1, chk.dy, 1) == HK_STATUS_OK,
               "saxpy on the device's memory");
        EXPECT(b->sdot(chk.h, CN, chk.dx, 1, chk.dy, 1, &got) == HK_STATUS_OK && got == chk.dot,
               "sdot on the device's memory");
        EXPECT(b->saxpy(chk.h, CN, &zero, host, 1, chk.dy, 1) == HK_STATUS_POINTER_MISMATCH,
               "saxpy of host memory: POINTER_MISMATCH");
    }
    return NULL;
}

HKCT_SCENARIO(t_checked_handle)
{
    hk_create_info_t ci = {sizeof ci, 0, HK_CREATE_CHECKED};
    chk.h = NULL;
    CU_ASSERT_EQUAL_FATAL(hkct_plug.vt->handle_create(&ci, &chk.h), HK_STATUS_OK);
    float x[CN], y[CN];
    chk.dot = 0.0f;
    for (int i = 0; i < CN; i++) {
        x[i] = (float)(i % 7);
        y[i] = 2.0f;
        chk.dot += x[i] * y[i];
    }
    const hk_memory_v1_t *m = hkct_plug.mem;
    void *dx = NULL, *dy = NULL;
    CU_ASSERT_EQUAL_FATAL(m->alloc(chk.h, sizeof x, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(m->alloc(chk.h, sizeof y, &dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->copy_to_device(chk.h, dx, x, sizeof x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->copy_to_device(chk.h, dy, y, sizeof y), HK_STATUS_OK);
    chk.dx = dx;
    chk.dy = dy;
    run_t run;
    run_threads(&run, checked_worker);
    CU_ASSERT_EQUAL(m->free_(chk.h, dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->free_(chk.h, dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hkct_plug.vt->handle_destroy(chk.h), HK_STATUS_OK);
}

static const hkct_scenario_t scenarios[] = {
    {"8 threads, one handle: core slots, hk.cuda/1, hk.memory/1, errors", t_one_handle, 1, 0, 0},
    {"8 threads, one handle: hk.kernels/1 look-ups, loads and unloads", t_kernels, 1, 0, 1},
    {"8 threads, one checked handle: device memory passes, host memory is refused",
     t_checked_handle, 1, 0, 0},
};

int hk_test_register(void)
{
    static char why[700];
    const char *skip = hkct_setup(why, sizeof why) == 0 ? NULL : why;
    CU_pSuite s = hk_test_suite("hk-cuda promises from 8 threads", NULL, NULL);
    hkct_add_scenarios(s, scenarios, sizeof scenarios / sizeof scenarios[0], skip, NULL,
                       "needs the simulated driver (its JIT takes the test's PTX as it is)");
    return 0;
}
