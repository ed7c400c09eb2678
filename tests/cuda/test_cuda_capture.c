/* hk-cuda under stream capture: hk.blas1/1 and hk.memory/1 with the handle's
 * stream set inside the capture (where the stream is first seen), set again
 * there after earlier use, set before it, and the per-thread stream; the
 * calls that cannot be captured refused with their documented status; each
 * in the global, thread-local and relaxed capture modes. See tcap.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tcap.h"

#define plug hkct_plug
#define OK HKCT_OK

CUstreamCaptureMode tcap_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
const char *const tcap_mode_names[3] = {"global", "thread-local", "relaxed"};

/* ---- shared helpers (tcap.h) ---- */

int tcap_fix_up(tcap_fix_t *f)
{
    memset(f, 0, sizeof *f);
    CUdevice d;
    OK(cuDeviceGet(&d, 0));
    OK(cuDevicePrimaryCtxRetain(&f->ctx, d));
    OK(cuCtxPushCurrent(f->ctx));
    f->h = hkct_create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    if (!f->h)
        return -1;
    const hk_memory_v1_t *m = plug.mem;
    const size_t bytes = TCAP_N * sizeof(float);
    for (int i = 0; i < TCAP_N; i++) {
        f->hx[i] = (float)(i % 5) - 2.0f;
        f->hy0[i] = (float)(i % 3);
    }
    const float alpha[2] = {2.0f, 3.0f};
    int bad = m->alloc(f->h, bytes, &f->x) != HK_STATUS_OK ||
              m->alloc(f->h, bytes, &f->y) != HK_STATUS_OK ||
              m->alloc(f->h, bytes, &f->z) != HK_STATUS_OK ||
              m->alloc(f->h, 8 * sizeof(float), &f->r) != HK_STATUS_OK ||
              m->alloc(f->h, sizeof alpha, &f->alpha) != HK_STATUS_OK ||
              m->copy_to_device(f->h, f->x, f->hx, bytes) != HK_STATUS_OK ||
              m->copy_to_device(f->h, f->alpha, alpha, sizeof alpha) != HK_STATUS_OK ||
              plug.vt->set_pointer_mode(f->h, HK_POINTER_MODE_DEVICE) != HK_STATUS_OK;
    CU_ASSERT_FALSE_FATAL(bad);
    tcap_fix_reset(f);
    return 0;
}

void tcap_fix_down(tcap_fix_t *f)
{
    const hk_memory_v1_t *m = plug.mem;
    CU_ASSERT_EQUAL(plug.vt->set_stream(f->h, NULL), HK_STATUS_OK);
    void *blocks[] = {f->x, f->y, f->z, f->r, f->alpha};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        CU_ASSERT_EQUAL(m->free_(f->h, blocks[i]), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(f->h), HK_STATUS_OK);
    CUdevice d;
    OK(cuDeviceGet(&d, 0));
    hkct_clear_current();
    OK(cuDevicePrimaryCtxRelease(d));
}

int tcap_fix_up_stream(tcap_fix_t *f, CUstream *s)
{
    if (tcap_fix_up(f) != 0)
        return -1;
    OK(cuStreamCreate(s, CU_STREAM_NON_BLOCKING));
    return 0;
}

void tcap_fix_down_stream(tcap_fix_t *f, CUstream s)
{
    CU_ASSERT_EQUAL(plug.vt->set_stream(f->h, NULL), HK_STATUS_OK);
    OK(cuStreamDestroy(s));
    tcap_fix_down(f);
}

void tcap_fix_reset(tcap_fix_t *f)
{
    OK(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)f->y, f->hy0, sizeof f->hy0));
    OK(cuMemsetD8((CUdeviceptr)(uintptr_t)f->z, 0x7f, sizeof f->hy0));
    OK(cuMemsetD8((CUdeviceptr)(uintptr_t)f->r, 0, 8 * sizeof(float)));
}

void tcap_read(float *host, const void *p, size_t n)
{
    OK(cuMemcpyDtoH(host, (CUdeviceptr)(uintptr_t)p, n * sizeof *host));
}

void tcap_begin(CUstream s)
{
    CU_ASSERT_EQUAL_FATAL(cuStreamBeginCapture(s, tcap_mode), CUDA_SUCCESS);
}

void tcap_keep(CUstream s, CUcontext expect, const char *file, int line)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = cuStreamIsCapturing(s, &cs);
    CU_assertImplementation(r == CUDA_SUCCESS && cs == CU_STREAM_CAPTURE_STATUS_ACTIVE,
                            (unsigned)line, "the capture is still active", file, "", CU_FALSE);
    if (r != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        printf("\n  %s:%d: cuStreamIsCapturing gave %d, status %d\n", file, line, (int)r,
               (int)cs);
    CU_assertImplementation(hkct_current() == expect, (unsigned)line,
                            "the caller's context is current", file, "", CU_FALSE);
}

void tcap_call_check(hk_handle_t *h, hk_status_t got, hk_status_t want, const char *what,
                     CUstream s, CUcontext expect, const char *file, int line)
{
    if (got != want)
        printf("\n  %s:%d: %s gave %d, want %d: %s\n", file, line, what, (int)got, (int)want,
               plug.vt->last_error(h));
    CU_assertImplementation(got == want, (unsigned)line, what, file, "", CU_FALSE);
    if (s)
        tcap_keep(s, expect, file, line);
    else
        CU_assertImplementation(hkct_current() == expect, (unsigned)line,
                                "the caller's context is current", file, "", CU_FALSE);
}

void tcap_refused(hk_handle_t *h, hk_status_t got, const char *what, CUstream s,
                  CUcontext expect, const char *file, int line)
{
    tcap_call_check(h, got, HK_STATUS_NOT_SUPPORTED, what, s, expect, file, line);
    const char *msg = plug.vt->last_error(h);
    int named = msg && strstr(msg, "captur") != NULL;
    if (!named)
        printf("\n  %s:%d: %s: the reason does not name the capture: %s\n", file, line, what,
               msg ? msg : "(null)");
    CU_assertImplementation(named, (unsigned)line, "the reason names the capture", file, "",
                            CU_FALSE);
}

CUgraphExec tcap_end(CUstream s)
{
    CUgraph g = NULL;
    CUgraphExec x = NULL;
    CUresult r = cuStreamEndCapture(s, &g);
    if (r != CUDA_SUCCESS)
        printf("\n  cuStreamEndCapture (%s mode) gave %d\n",
               tcap_mode_names[tcap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL ? 0
                               : tcap_mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? 1 : 2],
               (int)r);
    CU_ASSERT_EQUAL(r, CUDA_SUCCESS);
    if (r != CUDA_SUCCESS || !g)
        return NULL;
    r = cuGraphInstantiate(&x, g, 0);
    CU_ASSERT_EQUAL(r, CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuGraphDestroy(g), CUDA_SUCCESS); /* the executable keeps what it needs */
    return r == CUDA_SUCCESS ? x : NULL;
}

void tcap_replay(CUgraphExec x, CUstream s)
{
    CU_ASSERT_EQUAL(cuGraphLaunch(x, s), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuStreamSynchronize(s), CUDA_SUCCESS);
}

void tcap_blas_sequence(tcap_fix_t *f, CUstream s)
{
    const hk_blas1_v1_t *b = plug.blas;
    hk_handle_t *h = f->h;
    const float *a = f->alpha, *x = f->x;
    float *y = f->y, *z = f->z, *r = f->r;
    TCAP_CALL(h, s, f->ctx, b->saxpy(h, TCAP_N, a, x, 1, y, 1), HK_STATUS_OK);
    TCAP_CALL(h, s, f->ctx, b->sdot(h, TCAP_N, x, 1, y, 1, r), HK_STATUS_OK);
    TCAP_CALL(h, s, f->ctx, b->snrm2(h, TCAP_N, x, 1, r + 1), HK_STATUS_OK);
    TCAP_CALL(h, s, f->ctx, b->scopy(h, TCAP_N, y, 1, z, 1), HK_STATUS_OK);
    TCAP_CALL(h, s, f->ctx, b->sscal(h, TCAP_N, a + 1, z, 1), HK_STATUS_OK);
}

void tcap_blas_check(tcap_fix_t *f, int rounds)
{
    static float y[TCAP_N], z[TCAP_N];
    float r[2];
    tcap_read(y, f->y, TCAP_N);
    tcap_read(z, f->z, TCAP_N);
    tcap_read(r, f->r, 2);
    double dot = 0.0, sq = 0.0;
    int bad = 0;
    for (int i = 0; i < TCAP_N; i++) {
        float want = f->hy0[i] + 2.0f * (float)rounds * f->hx[i];
        bad += y[i] != want;
        if (rounds > 0)
            bad += z[i] != 3.0f * want;
        dot += (double)f->hx[i] * want;
        sq += (double)f->hx[i] * f->hx[i];
    }
    CU_ASSERT_EQUAL(bad, 0);
    if (rounds == 0) { /* captured, not run */
        CU_ASSERT_EQUAL(r[0], 0.0f);
        CU_ASSERT_EQUAL(r[1], 0.0f);
        return;
    }
    CU_ASSERT_DOUBLE_EQUAL(r[0], dot, 1e-4 * fabs(dot) + 1e-3);
    CU_ASSERT_DOUBLE_EQUAL(r[1], sqrt(sq), 1e-5 * sqrt(sq));
}

/* Replays x twice on s, checking after each; then frees it. */
static void replay_checked(tcap_fix_t *f, CUgraphExec x, CUstream s)
{
    tcap_blas_check(f, 0);
    if (!x)
        return;
    for (int round = 1; round <= 2; round++) {
        tcap_replay(x, s);
        tcap_blas_check(f, round);
    }
    CU_ASSERT_EQUAL(cuGraphExecDestroy(x), CUDA_SUCCESS);
}

/* The sequence run directly on the handle's stream s, outside any capture. */
static void direct_checked(tcap_fix_t *f, CUstream s)
{
    tcap_fix_reset(f);
    tcap_blas_sequence(f, NULL);
    CU_ASSERT_EQUAL(cuStreamSynchronize(s), CUDA_SUCCESS);
    tcap_blas_check(f, 1);
}

/* ---- the cases ---- */

/* The PyTorch pattern: the capture stream first seen by the handle inside
 * the capture (set_stream there), every op captured, the graph replayed;
 * afterwards the same stream used directly. */
static void case_set_inside(void)
{
    tcap_fix_t f;
    CUstream s;
    if (tcap_fix_up_stream(&f, &s) != 0)
        return;
    tcap_begin(s);
    TCAP_CALL(f.h, s, f.ctx, plug.vt->set_stream(f.h, s), HK_STATUS_OK);
    tcap_blas_sequence(&f, s);
    replay_checked(&f, tcap_end(s), s);
    direct_checked(&f, s);
    tcap_fix_down_stream(&f, s);
}

/* A stream used before the capture (its workspace made), set to NULL and set
 * again inside the capture. */
static void case_used_before(void)
{
    tcap_fix_t f;
    CUstream s;
    if (tcap_fix_up_stream(&f, &s) != 0)
        return;
    CU_ASSERT_EQUAL(plug.vt->set_stream(f.h, s), HK_STATUS_OK);
    direct_checked(&f, s);
    CU_ASSERT_EQUAL(plug.vt->set_stream(f.h, NULL), HK_STATUS_OK);
    tcap_fix_reset(&f);
    tcap_begin(s);
    TCAP_CALL(f.h, s, f.ctx, plug.vt->set_stream(f.h, s), HK_STATUS_OK);
    TCAP_CALL(f.h, s, f.ctx, plug.vt->set_stream(f.h, s), HK_STATUS_OK); /* twice */
    tcap_blas_sequence(&f, s);
    replay_checked(&f, tcap_end(s), s);
    tcap_fix_down_stream(&f, s);
}

/* Set before the capture, its first reduction inside it. */
static void case_set_before(void)
{
    tcap_fix_t f;
    CUstream s;
    if (tcap_fix_up_stream(&f, &s) != 0)
        return;
    CU_ASSERT_EQUAL(plug.vt->set_stream(f.h, s), HK_STATUS_OK);
    tcap_begin(s);
    tcap_blas_sequence(&f, s);
    replay_checked(&f, tcap_end(s), s);
    direct_checked(&f, s);
    tcap_fix_down_stream(&f, s);
}

/* The calling thread's per-thread default stream, captured and set inside. */
static void case_per_thread(void)
{
    tcap_fix_t f;
    if (tcap_fix_up(&f) != 0)
        return;
    CUstream s = CU_STREAM_PER_THREAD;
    tcap_begin(s);
    TCAP_CALL(f.h, s, f.ctx, plug.vt->set_stream(f.h, s), HK_STATUS_OK);
    tcap_blas_sequence(&f, s);
    replay_checked(&f, tcap_end(s), s);
    tcap_fix_down(&f);
}

/* What cannot be captured is refused before anything is enqueued, with its
 * documented status and reason: host pointer mode's results, the
 * synchronous copies, synchronize. What can is captured (memset) or done
 * at once (alloc, free_). The capture stays valid throughout. */
static void case_refusals(void)
{
    tcap_fix_t f;
    CUstream s;
    if (tcap_fix_up_stream(&f, &s) != 0)
        return;
    const hk_blas1_v1_t *b = plug.blas;
    const hk_memory_v1_t *m = plug.mem;
    hk_handle_t *h = f.h;
    float host[4] = {42.0f, 42.0f, 42.0f, 42.0f};
    double dhost = 42.0;
    void *p = NULL;
    tcap_begin(s);
    TCAP_CALL(h, s, f.ctx, plug.vt->set_stream(h, s), HK_STATUS_OK);
    TCAP_CALL(h, s, f.ctx, plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    TCAP_REFUSED(h, s, f.ctx, b->sdot(h, TCAP_N, f.x, 1, f.x, 1, host));
    TCAP_REFUSED(h, s, f.ctx, b->snrm2(h, TCAP_N, f.x, 1, host + 1));
    TCAP_REFUSED(h, s, f.ctx, b->dnrm2(h, TCAP_N / 2, f.x, 1, &dhost));
    CU_ASSERT_EQUAL(host[0], 42.0f);
    CU_ASSERT_EQUAL(dhost, 42.0);
    TCAP_CALL(h, s, f.ctx, plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    TCAP_REFUSED(h, s, f.ctx, m->copy_to_device(h, f.y, host, sizeof host));
    TCAP_REFUSED(h, s, f.ctx, m->copy_to_host(h, host, f.y, sizeof host));
    TCAP_REFUSED(h, s, f.ctx, plug.vt->synchronize(h));
    TCAP_CALL(h, s, f.ctx, m->memset_(h, f.z, 0, TCAP_N * sizeof(float)), HK_STATUS_OK);
    TCAP_CALL(h, s, f.ctx, m->alloc(h, 4096, &p), HK_STATUS_OK);
    TCAP_CALL(h, s, f.ctx, m->free_(h, p), HK_STATUS_OK);
    CUgraphExec x = tcap_end(s);
    static float z[TCAP_N];
    tcap_read(z, f.z, TCAP_N);
    CU_ASSERT(z[0] != 0.0f); /* the memset was captured, not run */
    if (x) {
        tcap_replay(x, s);
        tcap_read(z, f.z, TCAP_N);
        int bad = 0;
        for (int i = 0; i < TCAP_N; i++)
            bad += z[i] != 0.0f;
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(cuGraphExecDestroy(x), CUDA_SUCCESS);
    }
    /* outside the capture they all work */
    CU_ASSERT_EQUAL(m->copy_to_host(h, host, f.x, sizeof host), HK_STATUS_OK);
    CU_ASSERT_EQUAL(host[1], f.hx[1]);
    CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_OK);
    tcap_fix_down_stream(&f, s);
}

/* ---- registration: every case in each mode ---- */

typedef struct tcap_case {
    const char *name;
    CU_TestFunc fn;
} tcap_case_t;

#define TCAP_CASE(name, fn) {name, fn##_global}, {name, fn##_thread}, {name, fn##_relaxed}

TCAP_IN_MODES(case_set_inside)
TCAP_IN_MODES(case_used_before)
TCAP_IN_MODES(case_set_before)
TCAP_IN_MODES(case_per_thread)
TCAP_IN_MODES(case_refusals)

static const tcap_case_t cases[] = {
    TCAP_CASE("blas1: stream set inside the capture, first use there", case_set_inside),
    TCAP_CASE("blas1: stream used before, set again inside the capture", case_used_before),
    TCAP_CASE("blas1: stream set before, first reduction inside the capture",
              case_set_before),
    TCAP_CASE("blas1: the per-thread stream set inside its capture", case_per_thread),
    TCAP_CASE("refused with a reason (host results, copies, synchronize), the rest captured",
              case_refusals),
};

int hk_test_register(void)
{
    static char why[700];
    static char names[sizeof cases / sizeof cases[0]][200];
    const char *skip = hkct_setup(why, sizeof why) == 0 ? NULL : why;
    CU_pSuite s = hk_test_suite("hk-cuda under stream capture: blas1 and memory", NULL, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(names[i], sizeof names[i], "%s (%s)", cases[i].name, tcap_mode_names[i % 3]);
        hk_test_add_or_skip(s, names[i], cases[i].fn, skip);
    }
    CU_pSuite more = hk_test_suite("hk-cuda under stream capture: kernels, movable handles, "
                                   "threads", NULL, NULL);
    tcap_register_more(more, skip);
    return 0;
}
