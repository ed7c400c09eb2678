/* What hk-cuda's calls leave behind: every slot, failing or not, leaves the
 * caller's context as it was; destroy waits for the handle's work; and,
 * where the simulated driver can make its calls fail, no driver failure
 * inside create, an operation or destroy leaks anything or misleads.
 *
 * The fault walk fails the k-th call of one driver entry, for every k that a
 * create / operations / destroy sequence reaches, for every entry hk-cuda
 * uses, with several error codes, from every caller state of the contract.
 * After each run it compares the driver's state (device and mapped host
 * blocks, primary retains and activity, live contexts, loaded libraries, the
 * thread's context stack) with that of a run without failures. During a run
 * the test itself makes no driver call of an entry being walked: it looks
 * through the simulation's API, which counts no call. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hk_rt.h"
#include "hkct_names.h"

/* ---- every slot leaves the caller's context as it was ---- */

/* call must return want (KEPT_FAIL: any failure) and leave expect current. */
#define KEPT(call, want)                                                            \
    do {                                                                            \
        hkct_status_is(h, (call), (want), #call, __FILE__, __LINE__);               \
        CU_ASSERT_PTR_EQUAL(current(), expect);                                     \
    } while (0)
#define KEPT_FAIL(call)                                                             \
    do {                                                                            \
        CU_ASSERT_NOT_EQUAL((call), HK_STATUS_OK);                                  \
        CU_ASSERT_PTR_EQUAL(current(), expect);                                     \
    } while (0)

enum { SLOT_N = 64 };

/* Device buffers of the slot tests: floats x, y; doubles x, y; a result. */
typedef struct slot_bufs {
    void *x, *y, *dx, *dy, *r;
} slot_bufs_t;

/* hk.memory/1: allocations (kept in g), copies, memsets, frees. */
static void memory_slots(hk_handle_t *h, CUcontext expect, slot_bufs_t *g)
{
    const hk_memory_v1_t *m = plug.mem;
    float fx[SLOT_N], fy[SLOT_N];
    double dx[SLOT_N];
    void *got = NULL;
    hkct_fill_float(fx, SLOT_N, 1);
    hkct_fill_double(dx, SLOT_N, 2);
    KEPT(m->alloc(h, sizeof fx, &g->x), HK_STATUS_OK);
    KEPT(m->alloc(h, sizeof fy, &g->y), HK_STATUS_OK);
    KEPT(m->alloc(h, sizeof dx, &g->dx), HK_STATUS_OK);
    KEPT(m->alloc(h, sizeof dx, &g->dy), HK_STATUS_OK);
    KEPT(m->alloc(h, sizeof(double), &g->r), HK_STATUS_OK);
    if (!g->x || !g->y || !g->dx || !g->dy || !g->r)
        return;
    KEPT(m->alloc(h, 0, &got), HK_STATUS_OK);
    KEPT(m->alloc(h, 16, NULL), HK_STATUS_NULL_POINTER);
    KEPT_FAIL(m->alloc(h, (size_t)1 << 62, &got)); /* the driver refuses */
    KEPT(m->copy_to_device(h, g->x, fx, sizeof fx), HK_STATUS_OK);
    KEPT(m->copy_to_device(h, g->dx, dx, sizeof dx), HK_STATUS_OK);
    KEPT(m->copy_to_device(h, NULL, fx, sizeof fx), HK_STATUS_NULL_POINTER);
    KEPT(m->memset_(h, g->y, 0, sizeof fy), HK_STATUS_OK);
    KEPT(m->memset_(h, g->dy, 0, sizeof dx), HK_STATUS_OK);
    KEPT(m->memset_(h, NULL, 0, 4), HK_STATUS_NULL_POINTER);
    if (on_sim) /* a real GPU might take it and fault later, poisoning the context */
        KEPT_FAIL(m->memset_(h, (void *)(uintptr_t)0x10, 0, 4)); /* the driver refuses */
    KEPT(m->copy_to_host(h, fy, g->y, sizeof fy), HK_STATUS_OK);
    KEPT(m->copy_to_host(h, NULL, g->y, sizeof fy), HK_STATUS_NULL_POINTER);
    KEPT(m->free_(h, NULL), HK_STATUS_OK);
    KEPT_FAIL(m->free_(h, (void *)(uintptr_t)0x10)); /* the driver refuses */
}

/* The core vtable's slots besides create and destroy. */
static void core_slots(hk_handle_t *h, CUcontext expect, CUstream foreign)
{
    const hk_vtable_t *vt = plug.vt;
    void *got = NULL;
    KEPT(vt->set_stream(h, NULL), HK_STATUS_OK);
    KEPT(vt->set_stream(h, foreign), HK_STATUS_STREAM_MISMATCH);
    KEPT(vt->get_stream(h, &got), HK_STATUS_OK);
    KEPT(vt->get_stream(h, NULL), HK_STATUS_NULL_POINTER);
    KEPT(vt->set_pointer_mode(h, (hk_pointer_mode_t)7), HK_STATUS_INVALID_VALUE);
    KEPT(vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    hk_pointer_mode_t mode;
    KEPT(vt->get_pointer_mode(h, &mode), HK_STATUS_OK);
    KEPT(vt->get_pointer_mode(h, NULL), HK_STATUS_NULL_POINTER);
    hk_handle_info_t info = {sizeof info, 0, 0, 0, 0, NULL};
    KEPT(vt->handle_info(h, &info), HK_STATUS_OK);
    KEPT(vt->handle_info(h, NULL), HK_STATUS_NULL_POINTER);
    const void *table = NULL;
    KEPT(vt->get_table(HK_TABLE_BLAS1_V1, &table), HK_STATUS_OK);
    KEPT(vt->get_table("hk.none/1", &table), HK_STATUS_NOT_FOUND);
    const char *name = NULL;
    KEPT(vt->enum_tables(0, &name), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(vt->last_error(h));
    CU_ASSERT_PTR_EQUAL(current(), expect);
    KEPT(vt->synchronize(h), HK_STATUS_OK);
}

/* hk.blas1/1 in both pointer modes, with bad arguments and, in checked
 * mode, host memory where device memory belongs. */
static void blas_slots(hk_handle_t *h, CUcontext expect, const slot_bufs_t *g)
{
    const hk_blas1_v1_t *b = plug.blas;
    float fa = 0.5f, fr = 0.0f, host_only[SLOT_N] = {0};
    double da = 0.25, dr = 0.0;
    KEPT(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    KEPT(b->saxpy(h, SLOT_N, &fa, g->x, 1, g->y, 1), HK_STATUS_OK);
    KEPT(b->daxpy(h, SLOT_N, &da, g->dx, 1, g->dy, 1), HK_STATUS_OK);
    KEPT(b->sscal(h, SLOT_N, &fa, g->y, 1), HK_STATUS_OK);
    KEPT(b->dscal(h, SLOT_N, &da, g->dy, 1), HK_STATUS_OK);
    KEPT(b->scopy(h, SLOT_N, g->x, 1, g->y, 1), HK_STATUS_OK);
    KEPT(b->dcopy(h, SLOT_N, g->dx, 1, g->dy, 1), HK_STATUS_OK);
    KEPT(b->sdot(h, SLOT_N, g->x, 1, g->y, 1, &fr), HK_STATUS_OK);
    KEPT(b->ddot(h, SLOT_N, g->dx, 1, g->dy, 1, &dr), HK_STATUS_OK);
    KEPT(b->snrm2(h, SLOT_N, g->x, 1, &fr), HK_STATUS_OK);
    KEPT(b->dnrm2(h, SLOT_N, g->dx, 1, &dr), HK_STATUS_OK);
    KEPT(b->sdot(h, 0, NULL, 1, NULL, 1, &fr), HK_STATUS_OK);
    KEPT(b->saxpy(h, SLOT_N, &fa, g->x, 1, g->y, 0), HK_STATUS_INVALID_VALUE);
    KEPT(b->sdot(h, SLOT_N, g->x, 1, g->y, 1, NULL), HK_STATUS_NULL_POINTER);
    KEPT(b->sscal(h, SLOT_N, &fa, host_only, 1), HK_STATUS_POINTER_MISMATCH);
    KEPT(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    KEPT(b->sdot(h, SLOT_N, g->x, 1, g->y, 1, g->r), HK_STATUS_OK);
    KEPT(b->dnrm2(h, SLOT_N, g->dx, 1, g->r), HK_STATUS_OK);
    KEPT(b->sdot(h, SLOT_N, g->x, 1, g->y, 1, &fr), HK_STATUS_POINTER_MISMATCH);
    KEPT(plug.vt->synchronize(h), HK_STATUS_OK);
}

/* Every slot of the vtable and both tables, succeeding and failing (bad
 * arguments, a foreign stream, a foreign pointer in checked mode, pointers
 * the driver refuses), on a checked handle of device 0 made while expect is
 * current. */
static void every_slot(CUcontext expect, CUstream foreign)
{
    const hk_vtable_t *vt = plug.vt;
    hk_create_info_t ci = {sizeof ci, 0, HK_CREATE_CHECKED};
    hk_handle_t *h = NULL;
    slot_bufs_t g = {NULL, NULL, NULL, NULL, NULL};
    KEPT(vt->handle_create(&ci, &h), HK_STATUS_OK);
    if (!h)
        return;
    memory_slots(h, expect, &g);
    core_slots(h, expect, foreign);
    if (g.x && g.y && g.dx && g.dy && g.r)
        blas_slots(h, expect, &g);
    void *all[] = {g.x, g.y, g.dx, g.dy, g.r};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if (all[k])
            KEPT(plug.mem->free_(h, all[k]), HK_STATUS_OK);
    KEPT(vt->handle_destroy(h), HK_STATUS_OK);
    KEPT(vt->handle_destroy(NULL), HK_STATUS_INVALID_HANDLE);
    KEPT(vt->set_stream(NULL, NULL), HK_STATUS_INVALID_HANDLE);
}

SCENARIO(t_every_slot_restores)
{
    CUdevice d0;
    CUcontext other = NULL, uc = NULL, p0 = NULL;
    CUstream foreign = NULL;
    OK(cuDeviceGet(&d0, 0));
    /* a stream of another context than the handles' */
    OK(cuCtxCreate(&other, NULL, 0, d0));
    OK(cuStreamCreate(&foreign, CU_STREAM_NON_BLOCKING));
    OK(cuCtxPopCurrent(&other));

    /* nothing current */
    every_slot(NULL, foreign);
    CU_ASSERT_EQUAL(hkct_pop_all(NULL), 0);
    /* a user context of the same device */
    OK(cuCtxCreate(&uc, NULL, 0, d0));
    every_slot(uc, foreign);
    CU_ASSERT_EQUAL(hkct_pop_all(uc), 1);
    OK(cuCtxDestroy(uc));
    /* the handles' own context, device 0's primary */
    OK(cuDevicePrimaryCtxRetain(&p0, d0));
    OK(cuCtxPushCurrent(p0));
    every_slot(p0, foreign);
    CU_ASSERT_EQUAL(hkct_pop_all(p0), 1);
    /* another device's primary, when there is one */
    if (ndev > 1) {
        CUcontext p1 = hkct_retain_primary(1);
        OK(cuCtxPushCurrent(p1));
        every_slot(p1, foreign);
        CU_ASSERT_EQUAL(hkct_pop_all(p1), 1);
        hkct_release_primary(1);
    }
    OK(cuDevicePrimaryCtxRelease(d0));
    OK(cuCtxPushCurrent(other));
    OK(cuStreamDestroy(foreign));
    OK(cuCtxDestroy(other));
}

/* ---- destroy ---- */

/* destroy returns once the work issued through the handle is done: on a GPU
 * a hundred reductions of 2^24 floats are still running when the last call
 * returns; the simulation runs them at once, so there the synchronisation
 * itself is counted. */
SCENARIO(t_destroy_waits)
{
    CUdevice d0;
    CUcontext p0 = NULL;
    CUstream s = NULL;
    int64_t n = on_sim ? 4096 : (int64_t)1 << 24;
    OK(cuDeviceGet(&d0, 0));
    OK(cuDevicePrimaryCtxRetain(&p0, d0)); /* keeps the stream and memory past destroy */
    OK(cuCtxPushCurrent(p0));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x = 0, r = 0;
    OK(cuMemAlloc(&x, (size_t)n * sizeof(float)));
    OK(cuMemAlloc(&r, sizeof(float)));
    OK(cuMemsetD8(x, 0, (size_t)n * sizeof(float)));
    OK(cuCtxPopCurrent(&p0));
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
    int bad = 0;
    for (int k = 0; k < 100; k++)
        bad += plug.blas->sdot(h, n, (float *)(uintptr_t)x, 1, (float *)(uintptr_t)x, 1,
                               (float *)(uintptr_t)r) != HK_STATUS_OK;
    CU_ASSERT_EQUAL(bad, 0);
    unsigned long syncs = on_sim ? sim.calls("cuCtxSynchronize") : 0;
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(cuStreamQuery(s), CUDA_SUCCESS); /* nothing left running */
    if (on_sim) /* its stream waited for, not the whole context */
        CU_ASSERT_EQUAL(sim.calls("cuCtxSynchronize"), syncs);
    CU_ASSERT_PTR_NULL(current());
    OK(cuCtxPushCurrent(p0));
    OK(cuStreamDestroy(s));
    OK(cuMemFree(x));
    OK(cuMemFree(r));
    OK(cuCtxPopCurrent(&p0));
    OK(cuDevicePrimaryCtxRelease(d0));
}

/* ---- the fault walk (simulated driver only) ---- */

typedef enum { S_NOTHING, S_PRIMARY, S_USER, S_EXPLICIT, S__COUNT } caller_state_t;
static const char *const state_names[S__COUNT] = {
    "nothing current", "runtime primary current", "user context current", "explicit device"};

typedef enum { K_CREATE, K_OP, K_NAMING, K_DESTROY } call_kind_t;

/* Entries a call of that kind may refuse once without failing: each is given
 * back by a second attempt, or has a fallback (the mapped result word).
 * Destroy tries again every step it needs to free what it holds. */
static const char *const absorbable[4] = {
    [K_CREATE] = " cuDevicePrimaryCtxRelease cuCtxPopCurrent cuMemHostAlloc "
                 "cuMemHostGetDevicePointer ",
    [K_OP] = " cuMemHostAlloc cuMemHostGetDevicePointer cuMemFreeHost cuCtxPopCurrent "
             "cuDevicePrimaryCtxRelease ",
    /* set_stream with a foreign stream: the lookups only name its device */
    [K_NAMING] = " cuCtxPushCurrent cuCtxGetDevice cuDeviceGetCount cuDeviceGet "
                 "cuCtxPopCurrent ",
    [K_DESTROY] = " cuCtxGetId cuCtxPushCurrent cuCtxSynchronize cuStreamSynchronize cuMemFree "
                  "cuMemFreeAsync cuMemFreeHost cuCtxPopCurrent cuDevicePrimaryCtxRelease "
                  "cuLibraryUnload ",
};

/* Every driver entry hk-cuda calls once the driver is loaded. */
static const char *const walk_entries[] = {
    "cuCtxGetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxGetId", "cuCtxGetDevice",
    "cuCtxSynchronize", "cuCtxSetCurrent", "cuDeviceGet", "cuDeviceGetCount",
    "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease",
    "cuDevicePrimaryCtxGetState", "cuLibraryLoadData", "cuLibraryGetKernel", "cuLibraryUnload",
    "cuKernelGetFunction", "cuMemAlloc", "cuMemFree", "cuMemFreeAsync", "cuMemsetD8Async",
    "cuStreamSynchronize", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuLaunchKernelEx", "cuPointerGetAttributes",
    "cuMemHostAlloc", "cuMemHostGetDevicePointer", "cuMemFreeHost", "cuStreamGetCtx",
};

/* OUT_OF_MEMORY, INVALID_CONTEXT, UNKNOWN. CONTEXT_IS_DESTROYED is left out:
 * it is an answer about the context (a lie here), not a failure of a call. */
static const CUresult walk_codes[] = {CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_INVALID_CONTEXT,
                                      CUDA_ERROR_UNKNOWN};

typedef struct walk {
    caller_state_t state;
    int reset;             /* reset the handle's primary after create */
    int dev;               /* the handle's device */
    CUdevice cudev;
    CUcontext p_dev, uc;   /* its primary; the user context of S_USER */
    CUcontext expect;      /* current after every call */
    int depth;
    const char *entry;     /* injected: entry, k-th call, code (NULL: a clean run) */
    unsigned k;
    CUresult code;
    unsigned long before;
    int landed, absorbed, problems;
    char where[160];
} walk_t;

static int printed_problems;
static CUstream foreign_stream; /* of a user context no handle is bound to */

static void problem(walk_t *w, const char *call, const char *what)
{
    w->problems++;
    if (printed_problems++ < 25)
        printf("\n  [%s%s, %s #%u (%d)] %s: %s", state_names[w->state], w->reset ? ", reset" : "",
               w->entry ? w->entry : "no failure", w->k, (int)w->code, call, what);
}

static void step_begin(walk_t *w)
{
    w->before = w->entry ? sim.calls(w->entry) : 0;
}

/* After one call of the sequence: did the injected failure land in it, and
 * if so did it come back as the right status with a message naming the
 * driver's error (or was it one the call may absorb)? Is the caller's
 * context as it was? */
static hk_status_t step_end(walk_t *w, call_kind_t kind, hk_handle_t *h, const char *call,
                            hk_status_t st)
{
    /* set_stream with a foreign stream succeeds by refusing it */
    hk_status_t done = kind == K_NAMING ? HK_STATUS_STREAM_MISMATCH : HK_STATUS_OK;
    if (kind == K_CREATE && st == HK_STATUS_OK && w->state == S_NOTHING) {
        w->expect = w->p_dev; /* the runtime's rule: device 0's primary stays current */
        w->depth = 1;
    }
    if (w->entry) {
        unsigned long after = sim.calls(w->entry);
        if (w->before < w->k && w->k <= after) {
            w->landed = 1;
            char key[64];
            snprintf(key, sizeof key, " %s ", w->entry);
            if (st == done) {
                if (!strstr(absorbable[kind], key))
                    problem(w, call, "the injected failure was swallowed");
                w->absorbed++;
            } else {
                const char *msg = plug.vt->last_error(kind == K_CREATE || kind == K_DESTROY
                                                          ? NULL : h);
                const char *name = NULL;
                cuGetErrorName(w->code, &name);
                if (!msg || !name || !strstr(msg, name))
                    problem(w, call, "the message does not name the driver's error");
                int launch = strstr(call, "sscal") || strstr(call, "snrm2") || strstr(call, "sdot");
                hk_status_t want = w->code == CUDA_ERROR_OUT_OF_MEMORY ? HK_STATUS_OUT_OF_MEMORY
                                                                       : HK_STATUS_CUDA_ERROR;
                if (st != want && !(launch && st == HK_STATUS_LAUNCH_FAILED &&
                                    want == HK_STATUS_CUDA_ERROR)) {
                    char m[96];
                    snprintf(m, sizeof m, "status %d, want %d", (int)st, (int)want);
                    problem(w, call, m);
                }
            }
        } else if (st != done) {
            problem(w, call, "failed without an injected failure in it");
        }
    } else if (st != done) {
        problem(w, call, "failed in a run without failures");
    }
    if (sim.top() != w->expect || sim.depth() != w->depth)
        problem(w, call, "the caller's context was not given back as it was");
    return st;
}

#define STEP(w, kind, h, call) (step_begin(w), step_end(w, kind, h, #call, (call)))

/* free_ reports failure only when the block is still there. */
static void free_step(walk_t *w, hk_handle_t *h, void *p)
{
    size_t before = sim.live();
    if (STEP(w, K_OP, h, plug.mem->free_(h, p)) == HK_STATUS_OK) {
        if (sim.live() != before - 1)
            problem(w, "free_", "returned OK and the block is still there");
    } else if (sim.live() != before) {
        problem(w, "free_", "reported a failure after freeing");
    } else if (STEP(w, K_OP, h, plug.mem->free_(h, p)) != HK_STATUS_OK) {
        problem(w, "free_", "a second free of a block still there failed");
    }
}

/* create, operations in both pointer modes, destroy, as a careful user would:
 * stops at the first failing operation, frees what it allocated, destroys. */
static void sequence(walk_t *w)
{
    hk_handle_t *h = NULL;
    hk_create_info_t ci = {sizeof ci, w->state == S_EXPLICIT ? w->dev : HK_DEVICE_CURRENT,
                           HK_CREATE_CHECKED};
    hk_status_t st = STEP(w, K_CREATE, NULL, plug.vt->handle_create(&ci, &h));
    /* Not a walked entry; the primary stays current where it was. Also after
     * a failed create, so that every run ends in the same state. */
    if (w->reset)
        CU_ASSERT_EQUAL(cuDevicePrimaryCtxReset(w->cudev), CUDA_SUCCESS);
    if (st != HK_STATUS_OK) {
        if (h)
            problem(w, "handle_create", "failed but gave a handle");
        return;
    }
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, a = 2.0f, r = 0.0f, dot = 0.0f;
    void *d = NULL, *dr = NULL;
    const hk_blas1_v1_t *b = plug.blas;
    const hk_memory_v1_t *m = plug.mem;
    int ok = STEP(w, K_OP, h, m->alloc(h, sizeof v, &d)) == HK_STATUS_OK;
    ok = ok && STEP(w, K_OP, h, m->copy_to_device(h, d, v, sizeof v)) == HK_STATUS_OK;
    ok = ok && STEP(w, K_OP, h, plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST)) == 0;
    ok = ok && STEP(w, K_OP, h, b->sscal(h, 8, &a, d, 1)) == HK_STATUS_OK;
    ok = ok && STEP(w, K_OP, h, b->snrm2(h, 8, d, 1, &r)) == HK_STATUS_OK;
    if (ok && fabsf(r - 28.5657137f) > 1e-4f) /* 2 * sqrt(204) */
        problem(w, "snrm2", "wrong result without a failing status");
    ok = ok && STEP(w, K_OP, h, m->alloc(h, sizeof dot, &dr)) == HK_STATUS_OK;
    ok = ok && STEP(w, K_OP, h, plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE)) == 0;
    ok = ok && STEP(w, K_OP, h, b->sdot(h, 8, d, 1, d, 1, dr)) == HK_STATUS_OK;
    ok = ok && STEP(w, K_OP, h, m->copy_to_host(h, &dot, dr, sizeof dot)) == HK_STATUS_OK;
    if (ok && dot != 816.0f)
        problem(w, "sdot", "wrong result without a failing status");
    ok = ok && STEP(w, K_OP, h, plug.vt->synchronize(h)) == HK_STATUS_OK;
    ok = ok && STEP(w, K_NAMING, h, plug.vt->set_stream(h, foreign_stream)) ==
                   HK_STATUS_STREAM_MISMATCH;
    if (d)
        free_step(w, h, d);
    if (dr)
        free_step(w, h, dr);
    STEP(w, K_DESTROY, NULL, plug.vt->handle_destroy(h));
}

static void state_enter(walk_t *w)
{
    w->expect = NULL;
    w->depth = 0;
    w->uc = NULL;
    if (w->state == S_PRIMARY) {
        CU_ASSERT_EQUAL(hk_rt_set_device(w->dev), 0);
        w->expect = w->p_dev;
        w->depth = 1;
    } else if (w->state == S_USER) {
        CUdevice d;
        CU_ASSERT_EQUAL(cuDeviceGet(&d, w->dev), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(cuCtxCreate(&w->uc, NULL, 0, d), CUDA_SUCCESS);
        w->expect = w->uc;
        w->depth = 1;
    }
}

static void state_leave(walk_t *w)
{
    if (w->uc)
        CU_ASSERT_EQUAL(cuCtxDestroy(w->uc), CUDA_SUCCESS);
    /* A run with a reset ends with one more, so that its end state does not
     * depend on whether a handle re-activated the primary after the first
     * (a destroy keeps it active, its retain kept by the kit; a failed
     * create leaves it reset): the retains are compared, which is where a
     * leak shows. */
    if (w->reset)
        CU_ASSERT_EQUAL(cuDevicePrimaryCtxReset(w->cudev), CUDA_SUCCESS);
    hkct_clear_current();
}

/* One run: inject (entry NULL: none), run, check against base (NULL: none).
 * Returns whether the injected failure happened. */
static int run(walk_t *w, const char *entry, unsigned k, CUresult code, const hkct_snapshot_t *base,
               hkct_snapshot_t *out)
{
    char diff[200];
    w->entry = entry;
    w->k = k;
    w->code = code;
    w->landed = w->absorbed = 0;
    state_enter(w);
    sim.reset_counters();
    if (entry)
        sim.fail(entry, k, code);
    sequence(w);
    unsigned long calls = entry ? sim.calls(entry) : 0;
    sim.fail_clear();
    state_leave(w);
    hkct_snapshot_t now = hkct_snap();
    if (base && hkct_snap_diff(&now, base, diff, sizeof diff)[0])
        problem(w, "after destroy", diff);
    if (out)
        *out = now;
    if (entry && calls >= k && !w->landed)
        problem(w, "the sequence", "the failure landed outside every call");
    return entry && calls >= k;
}

SCENARIO(t_fault_walk)
{
    int dev = ndev - 1;
    unsigned injected = 0, absorbed = 0, runs = 0;
    walk_t w;
    memset(&w, 0, sizeof w);
    w.dev = dev;
    printed_problems = 0;
    CUdevice d0;
    CUcontext other = NULL;
    OK(cuDeviceGet(&d0, 0));
    OK(cuCtxCreate(&other, NULL, 0, d0));
    OK(cuStreamCreate(&foreign_stream, CU_STREAM_NON_BLOCKING));
    OK(cuCtxPopCurrent(&other));
    for (int s = 0; s < S__COUNT; s++) {
        for (int reset = 0; reset <= 1; reset++) {
            if (reset && s == S_USER)
                continue; /* a user context is not reset */
            w.state = (caller_state_t)s;
            w.reset = reset;
            w.dev = s == S_NOTHING ? 0 : dev;
            w.p_dev = primary(w.dev);
            CU_ASSERT_EQUAL(cuDeviceGet(&w.cudev, w.dev), CUDA_SUCCESS);
            hkct_snapshot_t base;
            run(&w, NULL, 0, CUDA_SUCCESS, NULL, &base);
            CU_ASSERT_EQUAL(w.problems, 0);
            for (size_t c = 0; c < sizeof walk_codes / sizeof walk_codes[0]; c++) {
                for (size_t e = 0; e < sizeof walk_entries / sizeof walk_entries[0]; e++) {
                    for (unsigned k = 1; k < 1000; k++) {
                        runs++;
                        if (!run(&w, walk_entries[e], k, walk_codes[c], &base, NULL))
                            break; /* fewer calls than k: this entry is walked */
                        injected++;
                        absorbed += w.absorbed;
                    }
                }
            }
        }
    }
    printf("\n  fault walk: %u runs, %u injected failures (%u given back or absorbed as "
           "documented), %d problems ",
           runs, injected, absorbed, w.problems);
    CU_ASSERT_EQUAL(w.problems, 0);
    CU_ASSERT(injected > 1000);
    OK(cuCtxPushCurrent(other));
    OK(cuStreamDestroy(foreign_stream));
    OK(cuCtxDestroy(other));
}

const hkct_scenario_t hkct_call_scenarios[] = {
    {"every slot, failing or not, leaves the caller's context", t_every_slot_restores, 1, 0, 0},
    {"destroy waits for the handle's work", t_destroy_waits, 1, 0, 0},
    {"fault walk: every failure of create/ops/destroy, every caller state", t_fault_walk, 1, 1,
     1},
};
const size_t hkct_call_scenario_count = sizeof hkct_call_scenarios / sizeof hkct_call_scenarios[0];
