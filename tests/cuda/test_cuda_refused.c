/* hk-cuda when the driver refuses a give-back twice (simulated driver): a
 * destroy or a trim reports the refused step and does the rest, and leaves
 * exactly what was refused; a free is OK once done, whatever follows; a
 * context ID read as destroyed once is asked again. */
#include <stdio.h>
#include <string.h>

#include "hk_rt.h"
#include "hkct_context.h"

#define plug hkct_plug
#define sim hkct_sim
#define ndev hkct_ndev
#define OK HKCT_OK
#define SCENARIO HKCT_SCENARIO
#define primary hkct_primary
#define create hkct_create
#define snap hkct_snap
typedef hkct_snapshot_t snapshot_t;

/* A handle on dev with its workspace and its mapped result word. */
static hk_handle_t *handle_with_word(int dev)
{
    hk_handle_t *h = create(dev, HK_STATUS_OK);
    float v[4] = {3, 4, 0, 0}, r = 0.0f;
    void *d = NULL;
    if (!h)
        return NULL;
    CU_ASSERT_EQUAL(plug.mem->alloc(h, sizeof v, &d), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->copy_to_device(h, d, v, sizeof v), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.blas->snrm2(h, 4, d, 1, &r), HK_STATUS_OK);
    CU_ASSERT_DOUBLE_EQUAL(r, 5.0, 1e-6);
    CU_ASSERT_EQUAL(plug.mem->free_(h, d), HK_STATUS_OK);
    return h;
}

/* Each step of destroy refused twice: destroy reports that step's failure,
 * still does every other step, and leaves exactly what was refused; a trim
 * afterwards gives back what destroy left for the next create, so what is
 * left then is what was lost to the refusal. */
SCENARIO(t_destroy_refused_twice)
{
    static const struct {
        const char *entry;
        int blocks, words, retains;            /* left behind */
        int left_current;                      /* the handle's context stays current */
    } cases[] = {
        /* cannot tell whether the context still holds them: nothing freed */
        {"cuCtxGetId", 1, 1, 0, 0},
        {"cuCtxPushCurrent", 1, 1, 0, 0},
        /* a stream that cannot synchronise runs no more work: kept anyway */
        {"cuStreamSynchronize", 0, 0, 0, 0},
        {"cuCtxPopCurrent", 0, 0, 0, 1},
        {"cuDevicePrimaryCtxRelease", 0, 0, 1, 0},
    };
    int dev = ndev - 1;
    CUdevice d;
    CUcontext p = NULL;
    OK(cuDeviceGet(&d, dev));
    /* our own retain keeps the primary, and so what is left in it, alive */
    OK(cuDevicePrimaryCtxRetain(&p, d));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hkct_trim();
        hkct_snapshot_t base = hkct_snap();
        hkct_keep(dev); /* the destroy below gives back the retain it took */
        hkct_snapshot_t before = hkct_snap();
        hk_handle_t *h = handle_with_word(dev);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        sim.reset_counters();
        sim.fail_repeat(cases[c].entry, 1, 2, CUDA_ERROR_UNKNOWN);
        hk_status_t st = plug.vt->handle_destroy(h);
        unsigned long calls = sim.calls(cases[c].entry);
        sim.fail_clear();
        hkct_snapshot_t left = hkct_snap();
        const char *msg = plug.vt->last_error(NULL);
        if (st != HK_STATUS_CUDA_ERROR || !strstr(msg, cases[c].entry))
            printf("\n  %s refused twice: destroy gave %d: %s", cases[c].entry, (int)st, msg);
        CU_ASSERT_EQUAL(st, HK_STATUS_CUDA_ERROR);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, cases[c].entry));
        CU_ASSERT(calls >= 2); /* it was tried again */
        CU_ASSERT_PTR_EQUAL(left.current, cases[c].left_current ? p : NULL);
        CU_ASSERT_EQUAL(left.depth, cases[c].left_current);
        CU_ASSERT_EQUAL(left.refcount[dev] - before.refcount[dev], cases[c].retains);
        hkct_trim(); /* the kit's retain, the kept memory and library go */
        hkct_snapshot_t after = hkct_snap();
        CU_ASSERT_EQUAL(after.live - base.live, (size_t)(cases[c].blocks + cases[c].words));
        CU_ASSERT_EQUAL(after.live_host - base.live_host, (size_t)cases[c].words);
        CU_ASSERT_EQUAL(after.libraries, base.libraries);
        /* give back what the driver refused, as far as a program can */
        hkct_clear_current();
        for (int k = 0; k < cases[c].retains; k++)
            OK(cuDevicePrimaryCtxRelease(d));
    }
    OK(cuDevicePrimaryCtxRelease(d)); /* the primary ends, and what was left with it */
    CU_ASSERT_EQUAL(sim.refcount(dev), 0);
}

/* Each give-back of a trim refused twice: the trim reports it, does the
 * rest, and keeps what was refused, which the next trim gives back. */
SCENARIO(t_trim_refused_twice)
{
    static const struct {
        const char *entry;
        unsigned first; /* the first of the two calls refused */
        int blocks, words, libraries, retains; /* kept by the refused trim */
    } cases[] = {
        {"cuDevicePrimaryCtxGetState", 1, 1, 1, 0, 0},
        {"cuDevicePrimaryCtxRetain", 1, 1, 1, 0, 0},
        {"cuCtxGetId", 1, 1, 1, 0, 0},
        {"cuCtxPushCurrent", 1, 1, 1, 0, 0},
        {"cuMemFree", 1, 1, 0, 0, 0},
        {"cuMemFreeHost", 1, 0, 1, 0, 0},
        {"cuLibraryUnload", 1, 0, 0, 1, 0},
        /* the retain the trim held for its frees, then the kit's kept one */
        {"cuDevicePrimaryCtxRelease", 1, 0, 0, 0, 1},
        {"cuDevicePrimaryCtxRelease", 2, 0, 0, 0, 1},
    };
    int dev = ndev - 1;
    CUdevice d;
    CUcontext p = NULL;
    OK(cuDeviceGet(&d, dev));
    OK(cuDevicePrimaryCtxRetain(&p, d)); /* the primary lives through the cases */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hkct_trim();
        hkct_snapshot_t before = hkct_snap();
        hk_handle_t *h = handle_with_word(dev);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
        sim.reset_counters();
        sim.fail_repeat(cases[c].entry, cases[c].first, 2, CUDA_ERROR_UNKNOWN);
        hk_status_t st = plug.trim->trim();
        unsigned long calls = sim.calls(cases[c].entry);
        sim.fail_clear();
        hkct_snapshot_t kept = hkct_snap();
        const char *msg = plug.vt->last_error(NULL);
        if (st != HK_STATUS_CUDA_ERROR || !strstr(msg, cases[c].entry))
            printf("\n  %s refused twice: trim gave %d: %s", cases[c].entry, (int)st, msg);
        CU_ASSERT_EQUAL(st, HK_STATUS_CUDA_ERROR);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, cases[c].entry));
        CU_ASSERT(calls >= cases[c].first + 1);
        CU_ASSERT_EQUAL(kept.live - before.live, (size_t)(cases[c].blocks + cases[c].words));
        CU_ASSERT_EQUAL(kept.live_host - before.live_host, (size_t)cases[c].words);
        CU_ASSERT_EQUAL(kept.libraries - before.libraries, (size_t)cases[c].libraries);
        CU_ASSERT_EQUAL(kept.refcount[dev] - before.refcount[dev], cases[c].retains);
        CU_ASSERT_PTR_EQUAL(kept.current, NULL);
        hkct_trim(); /* what was refused was kept: now it goes */
        hkct_snapshot_t after = hkct_snap();
        CU_ASSERT_EQUAL(after.live, before.live);
        CU_ASSERT_EQUAL(after.live_host, before.live_host);
        CU_ASSERT_EQUAL(after.libraries, before.libraries);
        CU_ASSERT_EQUAL(after.refcount[dev], before.refcount[dev]);
    }
    OK(cuDevicePrimaryCtxRelease(d));
    CU_ASSERT_EQUAL(sim.refcount(dev), 0);
}

/* cuCtxGetId answering CONTEXT_IS_DESTROYED once at destroy, whatever is
 * current: an answer about the context that the next question contradicts,
 * so destroy asks again and frees what the handle made; nothing is left. */
SCENARIO(t_destroy_id_destroyed_once)
{
    int dev = ndev - 1;
    for (int state = 0; state < 3; state++) { /* nothing, its primary, a user context */
        CUcontext uc = NULL, expect = NULL;
        hkct_trim();
        if (state == 1) {
            CU_ASSERT_EQUAL(hk_rt_set_device(dev), 0);
            expect = primary(dev);
        } else if (state == 2) {
            uc = hkct_user_context(dev);
            expect = uc;
        }
        hkct_snapshot_t before = hkct_snap();
        hk_handle_t *h = handle_with_word(dev);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        sim.fail("cuCtxGetId", 1, CUDA_ERROR_CONTEXT_IS_DESTROYED);
        hk_status_t st = plug.vt->handle_destroy(h);
        sim.fail_clear();
        CU_ASSERT_PTR_EQUAL(hkct_current(), expect);
        hkct_trim(); /* what destroy left for the next create goes too */
        hkct_snapshot_t after = hkct_snap();
        if (st != HK_STATUS_OK || after.live != before.live)
            printf("\n  caller state %d: destroy gave %d (%s), %zu blocks left ", state, (int)st,
                   plug.vt->last_error(NULL), after.live - before.live);
        CU_ASSERT_EQUAL(st, HK_STATUS_OK);
        CU_ASSERT_EQUAL(after.live, before.live);
        CU_ASSERT_EQUAL(after.live_host, before.live_host);
        CU_ASSERT_EQUAL(after.refcount[dev], before.refcount[dev]);
        CU_ASSERT_PTR_EQUAL(hkct_current(), expect);
        if (uc)
            OK(cuCtxDestroy(uc));
        hkct_clear_current();
    }
}

/* free_ never reports a failure once the block is freed: here the driver
 * refuses twice to give the caller's context back after the free. */
SCENARIO(t_free_done_then_pop_refused)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    void *d = NULL;
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, 64, &d), HK_STATUS_OK);
    size_t live = sim.live();
    sim.fail_repeat("cuCtxPopCurrent", 1, 2, CUDA_ERROR_UNKNOWN);
    CU_ASSERT_EQUAL(plug.mem->free_(h, d), HK_STATUS_OK);
    sim.fail_clear();
    CU_ASSERT_EQUAL(sim.live(), live - 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "cuCtxPopCurrent"));
    /* documented: the handle's context is what is left current then */
    CU_ASSERT_PTR_EQUAL(hkct_current(), primary(0));
    hkct_clear_current();
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

const hkct_scenario_t hkct_refused_scenarios[] = {
    {"destroy with a step refused twice: reported, the rest done", t_destroy_refused_twice, 1,
     0, 1},
    {"trim with a give-back refused twice: reported, kept for the next trim",
     t_trim_refused_twice, 1, 0, 1},
    {"free_ is OK once freed, even if the restore is refused", t_free_done_then_pop_refused, 1,
     0, 1},
    {"destroy asks again when the context reads destroyed once", t_destroy_id_destroyed_once, 1,
     1, 1},
};
const size_t hkct_refused_scenario_count =
    sizeof hkct_refused_scenarios / sizeof hkct_refused_scenarios[0];
