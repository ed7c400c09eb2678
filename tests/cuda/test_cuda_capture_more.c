/* hk-cuda under stream capture, beyond hk.blas1/1: a user's kernel launched
 * through hk.kernels/1 (and the first launch of a kernel in a context inside
 * the capture), movable handles of the loader, a handle made during the
 * capture, and another thread's capture while this thread uses the handle on
 * a stream of its own; each in the three capture modes. See tcap.h. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hk_loader.h"
#include "hk_swap.h"
#include "hkct_emu.h"
#include "tcap.h"

#define plug hkct_plug
#define OK HKCT_OK

static const hk_kernels_v1_t *kern; /* hk.kernels/1 of the plugin */

/* 1 when hkt_axpy's emulation is registered (or on a real driver, where
 * nothing is needed). */
static int register_emulation(void)
{
    simcuda_emu_register_fn reg = hkct_emu_find();
    if (!reg)
        return 1;
    const simcuda_emu_entry_t e = HKCT_EMU_AXPY_ENTRY;
    return hkct_emu_check && reg(&e) == 0;
}

/* y += a x through the table on h's stream. */
static hk_status_t launch_axpy(hk_handle_t *h, hk_kernel_t *k, float a, void *x, void *y)
{
    long long n = TCAP_N;
    void *args[] = {&n, &a, &x, &y};
    return kern->launch(h, k, 4, 1, 1, 256, 1, 1, 0, args);
}

/* y0 + rounds * a x, checked. */
static void check_axpy(tcap_fix_t *f, const void *y, float a, int rounds)
{
    static float got[TCAP_N];
    tcap_read(got, y, TCAP_N);
    int bad = 0;
    for (int i = 0; i < TCAP_N; i++) {
        float want = f->hy0[i];
        for (int k = 0; k < rounds; k++)
            want += a * f->hx[i];
        bad += got[i] != want;
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* ---- hk.kernels/1 ---- */

/* Loaded before the capture; set_stream and launches inside it; replayed.
 * Then a handle in a user context, where the kernel was never launched:
 * its first launch there (the kernel's function taken in that context) is
 * inside a capture. */
static void case_kernels(void)
{
    tcap_fix_t f;
    CUstream s;
    if (tcap_fix_up_stream(&f, &s) != 0)
        return;
    hk_library_t *lib = NULL;
    hk_kernel_t *k = NULL;
    CU_ASSERT_EQUAL_FATAL(kern->load(f.h, hkt__ptx, (size_t)(hkt__ptx_end - hkt__ptx) + 1, &lib),
                          HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(kern->get_kernel(f.h, lib, "hkt_axpy", &k), HK_STATUS_OK);
    tcap_begin(s);
    TCAP_CALL(f.h, s, f.ctx, plug.vt->set_stream(f.h, s), HK_STATUS_OK);
    TCAP_CALL(f.h, s, f.ctx, launch_axpy(f.h, k, 0.5f, f.x, f.y), HK_STATUS_OK);
    TCAP_CALL(f.h, s, f.ctx, launch_axpy(f.h, k, 0.5f, f.x, f.y), HK_STATUS_OK);
    CUgraphExec x = tcap_end(s);
    check_axpy(&f, f.y, 0.5f, 0);
    if (x) {
        tcap_replay(x, s);
        check_axpy(&f, f.y, 0.5f, 2);
        tcap_replay(x, s);
        check_axpy(&f, f.y, 0.5f, 4);
        CU_ASSERT_EQUAL(cuGraphExecDestroy(x), CUDA_SUCCESS);
    }

    CUdevice d;
    CUcontext uc = NULL, popped;
    OK(cuDeviceGet(&d, 0));
    OK(cuCtxCreate(&uc, NULL, 0, d));
    hk_handle_t *h2 = hkct_create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CUstream s2;
    void *x2 = NULL, *y2 = NULL;
    OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    const size_t bytes = TCAP_N * sizeof(float);
    CU_ASSERT_FATAL(h2 && plug.mem->alloc(h2, bytes, &x2) == HK_STATUS_OK &&
                    plug.mem->alloc(h2, bytes, &y2) == HK_STATUS_OK &&
                    plug.mem->copy_to_device(h2, x2, f.hx, bytes) == HK_STATUS_OK &&
                    plug.mem->copy_to_device(h2, y2, f.hy0, bytes) == HK_STATUS_OK);
    tcap_begin(s2);
    TCAP_CALL(h2, s2, uc, plug.vt->set_stream(h2, s2), HK_STATUS_OK);
    TCAP_CALL(h2, s2, uc, launch_axpy(h2, k, 2.0f, x2, y2), HK_STATUS_OK);
    x = tcap_end(s2);
    check_axpy(&f, y2, 2.0f, 0);
    if (x) {
        tcap_replay(x, s2);
        check_axpy(&f, y2, 2.0f, 1);
        CU_ASSERT_EQUAL(cuGraphExecDestroy(x), CUDA_SUCCESS);
    }
    CU_ASSERT_EQUAL(plug.vt->set_stream(h2, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->free_(h2, x2), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->free_(h2, y2), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h2), HK_STATUS_OK);
    OK(cuStreamDestroy(s2));
    OK(cuCtxPopCurrent(&popped));
    OK(cuCtxDestroy(uc));

    CU_ASSERT_EQUAL(kern->unload(f.h, lib), HK_STATUS_OK);
    tcap_fix_down_stream(&f, s);
}

/* ---- movable handles ---- */

/* A movable handle of the loader on hk-cuda: its stream set inside the
 * capture through the forwarding vtable, ops through the forwarding table. */
static void case_movable(void)
{
    tcap_fix_t f;
    CUstream s;
    if (tcap_fix_up_stream(&f, &s) != 0)
        return;
    /* No isolation: hk-cuda's negotiation is not what this case is about, and
     * the probe program need not be carried to a GPU machine with the test. */
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1,
                             .isolation = HK_ISOLATION_OFF};
    hk_loader_t *loader = NULL;
    hk_plugin_t *p = NULL;
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    if (hk_loader_open(loader, hkct_plugin_path(), &p) != HK_STATUS_OK)
        printf("\n  cannot load %s: %s\n", hkct_plugin_path(), hk_loader_last_error(loader));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(p, NULL, &mh), HK_STATUS_OK);
    const hk_vtable_t *vt = hk_mhandle_vtable();
    hk_blas1_v1_t b;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_get_table(HK_TABLE_BLAS1_V1, &b, sizeof b), HK_STATUS_OK);
    hk_handle_t *h = hk_mhandle_handle(mh);
    CU_ASSERT_EQUAL(vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    tcap_begin(s);
    TCAP_CALL(NULL, s, f.ctx, vt->set_stream(h, s), HK_STATUS_OK);
    TCAP_CALL(NULL, s, f.ctx, b.saxpy(h, TCAP_N, f.alpha, f.x, 1, f.y, 1), HK_STATUS_OK);
    TCAP_CALL(NULL, s, f.ctx, b.sdot(h, TCAP_N, f.x, 1, f.y, 1, f.r), HK_STATUS_OK);
    TCAP_CALL(NULL, s, f.ctx, b.snrm2(h, TCAP_N, f.x, 1, (float *)f.r + 1), HK_STATUS_OK);
    CUgraphExec x = tcap_end(s);
    if (x) {
        for (int round = 1; round <= 2; round++) {
            tcap_replay(x, s);
            static float y[TCAP_N];
            float r[2];
            tcap_read(y, f.y, TCAP_N);
            tcap_read(r, f.r, 2);
            double dot = 0.0;
            int bad = 0;
            for (int i = 0; i < TCAP_N; i++) {
                float want = f.hy0[i] + 2.0f * (float)round * f.hx[i];
                bad += y[i] != want;
                dot += (double)f.hx[i] * want;
            }
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT_DOUBLE_EQUAL(r[0], dot, 1e-3);
        }
        CU_ASSERT_EQUAL(cuGraphExecDestroy(x), CUDA_SUCCESS);
    }
    CU_ASSERT_EQUAL(vt->set_stream(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tcap_fix_down_stream(&f, s);
}

/* ---- a handle made during the capture ---- */

static void case_made_inside(void)
{
    tcap_fix_t f;
    CUstream s;
    if (tcap_fix_up_stream(&f, &s) != 0)
        return;
    hk_handle_t *outer = f.h, *h = NULL;
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};
    tcap_begin(s);
    TCAP_CALL(NULL, s, f.ctx, plug.vt->handle_create(&ci, &h), HK_STATUS_OK);
    if (h) {
        TCAP_CALL(h, s, f.ctx, plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE),
                  HK_STATUS_OK);
        TCAP_CALL(h, s, f.ctx, plug.vt->set_stream(h, s), HK_STATUS_OK);
        f.h = h;
        tcap_blas_sequence(&f, s);
    }
    CUgraphExec x = tcap_end(s);
    if (h && x) {
        tcap_blas_check(&f, 0);
        tcap_replay(x, s);
        tcap_blas_check(&f, 1);
        CU_ASSERT_EQUAL(cuGraphExecDestroy(x), CUDA_SUCCESS);
    }
    if (h)
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    f.h = outer;
    tcap_fix_down_stream(&f, s);
}

/* ---- another thread's capture ---- */

typedef struct other {
    CUcontext ctx;
    pthread_barrier_t bar;
    CUstream s;
    CUresult begin, end;
} other_t;

/* Holds a capture (tcap_mode) of a stream of its own open while the main
 * thread works, then ends it. */
static void *capture_elsewhere(void *arg)
{
    other_t *o = arg;
    CUgraph g = NULL;
    o->begin = cuCtxSetCurrent(o->ctx);
    if (o->begin == CUDA_SUCCESS)
        o->begin = cuStreamBeginCapture(o->s, tcap_mode);
    pthread_barrier_wait(&o->bar);
    pthread_barrier_wait(&o->bar);
    o->end = o->begin == CUDA_SUCCESS ? cuStreamEndCapture(o->s, &g) : o->begin;
    if (g)
        cuGraphDestroy(g);
    cuCtxSetCurrent(NULL);
    return NULL;
}

/* Every slot on a stream first seen while another thread of the process
 * captures (this thread in the default, global mode): done, right, and the
 * other capture ends valid. */
static void case_other_thread(void)
{
    tcap_fix_t f;
    if (tcap_fix_up(&f) != 0)
        return;
    const hk_memory_v1_t *m = plug.mem;
    hk_handle_t *h = f.h;
    other_t o = {.ctx = f.ctx, .begin = CUDA_ERROR_UNKNOWN, .end = CUDA_ERROR_UNKNOWN};
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&o.s, CU_STREAM_NON_BLOCKING));
    CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&o.bar, NULL, 2), 0);
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, capture_elsewhere, &o), 0);
    pthread_barrier_wait(&o.bar);
    CUstream cs = o.begin == CUDA_SUCCESS ? o.s : NULL; /* checked after each call */
    TCAP_CALL(h, cs, f.ctx, plug.vt->set_stream(h, s), HK_STATUS_OK);
    tcap_blas_sequence(&f, cs);
    float dot = 0.0f, host[4];
    void *p = NULL;
    hk_handle_t *h2 = NULL;
    TCAP_CALL(h, cs, f.ctx, plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    TCAP_CALL(h, cs, f.ctx, plug.blas->sdot(h, TCAP_N, f.x, 1, f.x, 1, &dot), HK_STATUS_OK);
    TCAP_CALL(h, cs, f.ctx, m->copy_to_host(h, host, f.x, sizeof host), HK_STATUS_OK);
    TCAP_CALL(h, cs, f.ctx, m->copy_to_device(h, (float *)f.r + 4, host, sizeof host), HK_STATUS_OK);
    TCAP_CALL(h, cs, f.ctx, plug.vt->synchronize(h), HK_STATUS_OK);
    TCAP_CALL(h, cs, f.ctx, m->alloc(h, 4096, &p), HK_STATUS_OK);
    TCAP_CALL(h, cs, f.ctx, m->free_(h, p), HK_STATUS_OK);
    TCAP_CALL(NULL, cs, f.ctx, plug.vt->handle_create(NULL, &h2), HK_STATUS_OK);
    pthread_barrier_wait(&o.bar);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&o.bar);
    CU_ASSERT_EQUAL(o.begin, CUDA_SUCCESS);
    CU_ASSERT_EQUAL(o.end, CUDA_SUCCESS);
    if (h2)
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h2), HK_STATUS_OK);
    double want = 0.0;
    for (int i = 0; i < TCAP_N; i++)
        want += (double)f.hx[i] * f.hx[i];
    CU_ASSERT_DOUBLE_EQUAL(dot, want, 1e-6 * want);
    CU_ASSERT_EQUAL(host[3], f.hx[3]);
    CU_ASSERT_EQUAL(cuStreamSynchronize(s), CUDA_SUCCESS);
    tcap_blas_check(&f, 1);
    OK(cuStreamDestroy(s));
    OK(cuStreamDestroy(o.s));
    tcap_fix_down(&f);
}

/* ---- registration ---- */


TCAP_IN_MODES(case_kernels)
TCAP_IN_MODES(case_movable)
TCAP_IN_MODES(case_made_inside)
TCAP_IN_MODES(case_other_thread)

void tcap_register_more(CU_pSuite s, const char *skip)
{
    static const struct {
        const char *name;
        CU_TestFunc fn[3];
    } cases[] = {
        {"hk.kernels/1: launches inside the capture, a first launch in a new context",
         {case_kernels_global, case_kernels_thread, case_kernels_relaxed}},
        {"movable handle: stream set and ops inside the capture",
         {case_movable_global, case_movable_thread, case_movable_relaxed}},
        {"a handle made and used inside the capture",
         {case_made_inside_global, case_made_inside_thread, case_made_inside_relaxed}},
        {"another thread captures; every slot on this thread's own stream",
         {case_other_thread_global, case_other_thread_thread, case_other_thread_relaxed}},
    };
    static char names[sizeof cases / sizeof cases[0]][3][200];
    if (!skip) {
        const void *t = NULL;
        if (plug.vt->get_table(HK_TABLE_KERNELS_V1, &t) == HK_STATUS_OK)
            kern = t;
        if (!kern)
            skip = "hk-cuda offers no hk.kernels/1 table";
        else if (!register_emulation())
            skip = "the simulated driver refused the test kernel's emulation";
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int m = 0; m < 3; m++) {
            snprintf(names[i][m], sizeof names[i][m], "%s (%s)", cases[i].name,
                     tcap_mode_names[m]);
            hk_test_add_or_skip(s, names[i][m], cases[i].fn[m], skip);
        }
}
