/* The scenarios test_trace runs in a child process (see trace_test.h). Each
 * one does what a user does, with its own assertions; what it traced is
 * checked by the parent. The hk-cuda ones start with nothing current and
 * leave nothing current. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_loader.h"
#include "hk_rt.h"
#include "hk_swap.h"
#include "hkct_context.h"
#include "trace_test.h"

#define plug hkct_plug
#define OK HKCT_OK

/* hkct_setup once, failing the scenario (not crashing) without a driver. */
static int setup(void)
{
    char why[512];
    if (hkct_setup(why, sizeof why) != 0) {
        printf("\n  %s\n", why);
        CU_FAIL("no usable driver or plugin");
        return -1;
    }
    hkct_clear_current();
    return 0;
}

/* Nothing current: device 0's primary, retained, left current; destroy
 * gives the retain back. */
static void s_nothing(void)
{
    if (setup() != 0)
        return;
    hk_handle_t *h = hkct_create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CUcontext p0 = hkct_primary(0);
    CU_ASSERT_PTR_EQUAL(hkct_current(), p0);
    CU_ASSERT_EQUAL(hkct_workload(h, p0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    hkct_clear_current();
}

/* A user context current: bound to it, not retained; destroyed by its
 * owner, the next call is refused. */
static void s_user(void)
{
    if (setup() != 0)
        return;
    CUdevice d0;
    CUcontext uc = NULL;
    OK(cuDeviceGet(&d0, 0));
    OK(cuCtxCreate(&uc, NULL, 0, d0));
    hk_handle_t *h = hkct_create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(hkct_info(h).owns_primary, 0);
    CU_ASSERT_EQUAL(hkct_workload(h, uc), HK_STATUS_OK);
    OK(cuCtxDestroy(uc));
    CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_CONTEXT_DESTROYED);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    hkct_clear_current();
}

/* Device 1's primary current, a handle of device 0: every call switches
 * and restores. */
static void s_other_device(void)
{
    if (setup() != 0)
        return;
    CUdevice d1;
    CUcontext p1 = NULL;
    OK(cuDeviceGet(&d1, 1));
    OK(cuDevicePrimaryCtxRetain(&p1, d1));
    OK(cuCtxSetCurrent(p1));
    hk_handle_t *h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(hkct_current(), p1);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    hkct_clear_current();
    OK(cuDevicePrimaryCtxRelease(d1));
}

/* A handle of device 0 called with nothing current, the restore refused
 * twice by the simulated driver: the call's work stands, the restore failed. */
static void s_restore_fails(void)
{
    if (setup() != 0)
        return;
    CU_ASSERT_FATAL(hkct_on_sim);
    hk_handle_t *h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    hkct_sim.fail_repeat("cuCtxPopCurrent", 1, 2, CUDA_ERROR_UNKNOWN);
    CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_OK);
    hkct_sim.fail_clear();
    hkct_clear_current();
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* cudaDeviceReset under a handle: the next call re-arms it. */
static void s_reset(void)
{
    if (setup() != 0)
        return;
    OK(hk_rt_set_device(0));
    CUcontext p0 = hkct_current();
    hk_handle_t *h = hkct_create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(hkct_workload(h, p0), HK_STATUS_OK);
    OK(hk_rt_device_reset());
    CU_ASSERT_EQUAL(hkct_workload(h, p0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    hkct_clear_current();
}

/* A green context of the last device current: bound to it. */
static void s_green(void)
{
    if (setup() != 0)
        return;
    CUdevice dev;
    CUdevResource res;
    CUdevResourceDesc desc;
    CUgreenCtx g;
    CUcontext gc = NULL, popped;
    OK(cuDeviceGet(&dev, hkct_ndev - 1));
    OK(cuDeviceGetDevResource(dev, &res, CU_DEV_RESOURCE_TYPE_SM));
    OK(cuDevResourceGenerateDesc(&desc, &res, 1));
    OK(cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
    OK(cuCtxFromGreenCtx(&gc, g));
    OK(cuCtxPushCurrent(gc));
    hk_handle_t *h = hkct_create(HK_DEVICE_CURRENT, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(hkct_info(h).owns_primary, 0);
    CU_ASSERT_EQUAL(hkct_workload(h, gc), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    OK(cuCtxPopCurrent(&popped));
    OK(cuGreenCtxDestroy(g));
}

/* No driver (the parent names a missing one in HK_CUDA_DRIVER). */
static void s_nodriver(void)
{
    if (setup() != 0)
        return;
    CU_ASSERT_PTR_NULL(hkct_create(HK_DEVICE_CURRENT, HK_STATUS_NO_DRIVER));
}

/* A handle made before fork(): the child's call is refused. */
static void s_fork(void)
{
    if (setup() != 0)
        return;
    hk_handle_t *h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    fflush(stdout);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        _exit(plug.vt->synchronize(h) == HK_STATUS_FORKED ? 0 : 1);
    int status = -1;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("\n  fork child %ld\n", (long)pid);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* A loader over the test plugins of tests/loader: a scan (x.so is not an ELF
 * file), a request that resolves among two versions, a name found. */
static hk_loader_t *plugin_loader(void)
{
    hk_loader_options_t o;
    hk_loader_t *loader = NULL;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.default_dir = HK_TEST_PLUGIN_DIR;
    o.ignore_env = 1;
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_scan(loader), HK_STATUS_OK);
    return loader;
}

static void s_loader(void)
{
    hk_loader_t *loader = plugin_loader();
    hk_plugin_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_select(loader, "tp-twin", &p), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(p), "2.0.0");
    CU_ASSERT_EQUAL(hk_loader_select(loader, "tp-twin@^3", &p), HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(hk_loader_find(loader, "tp-good"));
    /* an acquired plugin keeps the loader: destroy says BUSY */
    hk_plugin_acquire(hk_loader_find(loader, "tp-unload"));
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_BUSY);
    hk_plugin_release(hk_loader_find(loader, "tp-unload"));
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* A swap from hk-cpu 1.0.0 to 1.0.1 (tests/swap's build), then one refused:
 * swp_wrong (1.0.2) computes a wrong saxpy. */
static void s_swap(void)
{
    hk_loader_t *loader = NULL;
    hk_plugin_t *p = NULL;
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(NULL, &loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_open(loader, HK_TEST_CPU_PLUGIN, &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_open(loader, HK_TEST_SWAP_DIR "/hk-cpu-1.0.1.so", &p),
                    HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_open(loader, HK_TEST_SWAP_DIR "/swp_wrong.so", &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(loader, "hk-cpu@1.0.0", NULL, &mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, "hk-cpu@1.0.1", NULL, &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, "hk-cpu@1.0.2", NULL, &p), HK_STATUS_LOAD_FAILED);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_BUSY); /* mh lives */
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* ---- many threads tracing at once ---- */

static hk_loader_t *shared_loader;

/* Each thread has device 1's primary current and calls a handle of device
 * 0: two level-2 lines per call (push, pop), and loader lookups in between,
 * so the kit's and the loader's lines of 8 threads go to one file at once. */
static void *tracing_thread(void *arg)
{
    int *bad = arg;
    CUdevice d1;
    CUcontext p1 = NULL;
    if (cuDeviceGet(&d1, 1) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&p1, d1) != CUDA_SUCCESS
        || cuCtxSetCurrent(p1) != CUDA_SUCCESS) {
        (*bad)++;
        return NULL;
    }
    hk_create_info_t ci = {sizeof ci, 0, 0};
    hk_handle_t *h = NULL;
    if (plug.vt->handle_create(&ci, &h) != HK_STATUS_OK) {
        (*bad)++;
    } else {
        for (int k = 0; k < TR_CALLS; k++) {
            *bad += plug.vt->synchronize(h) != HK_STATUS_OK;
            if (k < TR_FINDS)
                *bad += hk_loader_find(shared_loader, "tp-good") == NULL;
        }
        *bad += plug.vt->handle_destroy(h) != HK_STATUS_OK;
    }
    CUcontext popped;
    cuCtxPopCurrent(&popped);
    cuDevicePrimaryCtxRelease(d1);
    return NULL;
}

static void s_threads(void)
{
    if (setup() != 0)
        return;
    shared_loader = plugin_loader();
    pthread_t t[TR_THREADS];
    int bad[TR_THREADS] = {0};
    for (int k = 0; k < TR_THREADS; k++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[k], NULL, tracing_thread, &bad[k]), 0);
    for (int k = 0; k < TR_THREADS; k++) {
        pthread_join(t[k], NULL);
        CU_ASSERT_EQUAL(bad[k], 0);
    }
    CU_ASSERT_EQUAL(hk_loader_destroy(shared_loader), HK_STATUS_OK);
}

const tr_scenario_t tr_scenarios[] = {
    {"nothing", s_nothing},   {"user", s_user},       {"other_device", s_other_device},
    {"reset", s_reset},       {"green", s_green},     {"nodriver", s_nodriver},
    {"restore_fails", s_restore_fails},
    {"fork", s_fork},         {"loader", s_loader},   {"swap", s_swap},
    {"threads", s_threads},
};
const size_t tr_scenario_count = sizeof tr_scenarios / sizeof tr_scenarios[0];

int tr_child_register(const char *name)
{
    for (size_t i = 0; i < tr_scenario_count; i++) {
        if (strcmp(tr_scenarios[i].name, name) == 0) {
            CU_pSuite s = hk_test_suite("trace child", NULL, NULL);
            hk_test_add(s, tr_scenarios[i].name, tr_scenarios[i].fn);
            return 0;
        }
    }
    return -1;
}
