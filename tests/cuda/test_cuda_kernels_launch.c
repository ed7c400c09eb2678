/* hk.kernels/1 through hk-cuda: a launch's arguments and its dynamic shared
 * memory, where the driver reads one argument per kernel parameter (fact 28)
 * and refuses more shared memory than the kernel allows (fact 29) with the
 * context left usable. See test_cuda_kernels.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cuda_kernels.h"

#define plug hkct_plug
#define sim hkct_sim
#define on_sim hkct_on_sim
#define SCENARIO HKCT_SCENARIO
#define create hkct_create

static void says(hk_handle_t *h, const char *what)
{
    const char *msg = plug.vt->last_error(h);
    if (!strstr(msg, what))
        printf("\n  message \"%s\" does not name \"%s\" ", msg, what);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, what));
}

/* args NULL, or a NULL among the kernel's parameters: INVALID_VALUE naming
 * it, before the driver reads through it; a kernel without parameters takes
 * NULL; a whole array launches. */
SCENARIO(t_launch_args)
{
    const hk_memory_v1_t *m = plug.mem;
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    hk_library_t *lib = tk_load(h, tk_ptx, tk_ptx_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    hk_kernel_t *axpy = NULL, *none = NULL;
    CU_ASSERT_EQUAL_FATAL(tk_k->get_kernel(h, lib, "hkt_axpy", &axpy), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(tk_k->get_kernel(h, lib, "hkt_noparams", &none), HK_STATUS_OK);
    void *dx = NULL, *dy = NULL;
    CU_ASSERT_EQUAL_FATAL(m->alloc(h, 64 * sizeof(float), &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(m->alloc(h, 64 * sizeof(float), &dy), HK_STATUS_OK);
    long long n = 64;
    float a = 1.0f;
    void *args[] = {&n, &a, &dx, &dy}, *holed[] = {&n, &a, NULL, &dy};
    unsigned long launches = on_sim ? sim.calls("cuLaunchKernel") : 0;
    CU_ASSERT_EQUAL(tk_k->launch(h, axpy, 1, 1, 1, 64, 1, 1, 0, NULL), HK_STATUS_INVALID_VALUE);
    says(h, "args is NULL, and the kernel has 4 parameters");
    CU_ASSERT_EQUAL(tk_k->launch(h, axpy, 1, 1, 1, 64, 1, 1, 0, holed), HK_STATUS_INVALID_VALUE);
    says(h, "args[2] is NULL");
    if (on_sim)
        CU_ASSERT_EQUAL(sim.calls("cuLaunchKernel"), launches);
    CU_ASSERT_EQUAL(tk_k->launch(h, none, 1, 1, 1, 32, 1, 1, 0, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tk_k->launch(h, axpy, 1, 1, 1, 64, 1, 1, 0, args), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->free_(h, dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->free_(h, dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* hkt_reverse on 4 blocks of 64 floats, with shared bytes of dynamic shared
 * memory; the floats checked when it ran. */
static hk_status_t reverse(hk_handle_t *h, hk_kernel_t *k, void *d, unsigned shared)
{
    float v[256], w[256];
    for (int i = 0; i < 256; i++)
        v[i] = (float)i;
    CU_ASSERT_EQUAL(plug.mem->copy_to_device(h, d, v, sizeof v), HK_STATUS_OK);
    void *args[] = {&d};
    hk_status_t st = tk_k->launch(h, k, 4, 1, 1, 64, 1, 1, shared, args);
    CU_ASSERT_EQUAL(plug.mem->copy_to_host(h, w, d, sizeof w), HK_STATUS_OK);
    int bad = 0;
    for (int i = 0; i < 256; i++)
        bad += w[i] != (st == HK_STATUS_OK ? (float)(i / 64 * 64 + 63 - i % 64) : (float)i);
    CU_ASSERT_EQUAL(bad, 0);
    return st;
}

/* More dynamic shared memory than the kernel allows (48 KiB + 4, 4 GiB - 1):
 * INVALID_VALUE with the driver's error, and the next launch runs right. Up
 * to the device's opt-in maximum once the caller raised the kernel's limit
 * on the function get_function gave. */
SCENARIO(t_shared_memory)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    hk_library_t *lib = tk_load(h, tk_ptx, tk_ptx_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    hk_kernel_t *k = NULL;
    CU_ASSERT_EQUAL_FATAL(tk_k->get_kernel(h, lib, "hkt_reverse", &k), HK_STATUS_OK);
    void *d = NULL, *fn = NULL, *ctx = NULL;
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, 256 * sizeof(float), &d), HK_STATUS_OK);
    CU_ASSERT_EQUAL(reverse(h, k, d, 48 * 1024), HK_STATUS_OK);
    const unsigned too_much[] = {48 * 1024 + 4, 0x80000000u, 0xffffffffu};
    for (size_t i = 0; i < sizeof too_much / sizeof too_much[0]; i++) {
        CU_ASSERT_EQUAL(reverse(h, k, d, too_much[i]), HK_STATUS_INVALID_VALUE);
        says(h, "CUDA_ERROR_INVALID_VALUE");
        CU_ASSERT_EQUAL(reverse(h, k, d, 256), HK_STATUS_OK);
    }
    int optin = 0;
    CUdevice dev;
    CU_ASSERT_EQUAL(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuDeviceGetAttribute(
                        &optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
                    CUDA_SUCCESS);
    CU_ASSERT_EQUAL(tk_k->get_function(h, k, &fn), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tk_c->get_context(h, &ctx), HK_STATUS_OK);
    CUcontext popped = NULL;
    CU_ASSERT_EQUAL(cuCtxPushCurrent((CUcontext)ctx), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuFuncSetAttribute((CUfunction)fn,
                                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin),
                    CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    CU_ASSERT(optin >= 48 * 1024);
    CU_ASSERT_EQUAL(reverse(h, k, d, (unsigned)optin), HK_STATUS_OK);
    CU_ASSERT_EQUAL(reverse(h, k, d, (unsigned)optin + 4), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(reverse(h, k, d, 256), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->free_(h, d), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

const hkct_scenario_t tk_launch_scenarios[] = {
    {"launch arguments checked against the kernel's parameters", t_launch_args, 1, 0, 0},
    {"too much dynamic shared memory: INVALID_VALUE, then launches run", t_shared_memory, 1, 0,
     0},
};
const size_t tk_launch_scenario_count = sizeof tk_launch_scenarios / sizeof tk_launch_scenarios[0];
