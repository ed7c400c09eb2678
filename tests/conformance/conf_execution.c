/* Conformance: execution facts 4, 5, 11, 13, 14 and 17 (docs/contexts.md): who may
 * launch what where, pointer ownership, capture, unloading, green contexts. */
#include "conf.h"

#include <dlfcn.h>

#include "hk_test.h"
#include "simcuda.h"

#define NEED_TWO "needs two devices; this machine has one"

/* Fact 4: a module's CUfunction only in its own context (400 elsewhere); a
 * library's CUkernel in any context of any device. */
static void fact04_module_vs_library(void)
{
    CUcontext a, b, other = NULL;
    CUmodule mod;
    CUfunction f;
    CUlibrary lib;
    CUkernel k;
    EXPECT_FATAL(cuCtxCreate(&a, NULL, 0, 0), CUDA_SUCCESS);
    EXPECT_FATAL(cuModuleLoadData(&mod, hk__conf_fatbin), CUDA_SUCCESS);
    EXPECT_FATAL(cuModuleGetFunction(&f, mod, "hk_probe_kernel"), CUDA_SUCCESS);
    EXPECT_FATAL(conf_load_probe(&lib, &k), CUDA_SUCCESS);
    EXPECT(conf_probe(f, NULL, 11), CUDA_SUCCESS);
    EXPECT(conf_probe((CUfunction)k, NULL, 12), CUDA_SUCCESS);
    EXPECT_FATAL(cuCtxCreate(&b, NULL, 0, 0), CUDA_SUCCESS); /* same device, now current */
    EXPECT(conf_probe(f, NULL, 13), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(conf_probe((CUfunction)k, NULL, 14), CUDA_SUCCESS);
    if (conf_ndev > 1) {
        EXPECT_FATAL(cuCtxCreate(&other, NULL, 0, 1), CUDA_SUCCESS);
        EXPECT(conf_probe(f, NULL, 15), CUDA_ERROR_INVALID_HANDLE);
        EXPECT(conf_probe((CUfunction)k, NULL, 16), CUDA_SUCCESS);
        /* a function taken from the kernel is bound like a module's */
        CUfunction fk;
        EXPECT(cuKernelGetFunction(&fk, k), CUDA_SUCCESS);
        EXPECT(conf_probe(fk, NULL, 17), CUDA_SUCCESS);
        EXPECT(cuCtxSetCurrent(b), CUDA_SUCCESS);
        conf_observe("fact 4: cuKernelGetFunction's function launched in another context",
                     conf_probe(fk, NULL, 18));
        EXPECT(cuCtxDestroy(other), CUDA_SUCCESS);
    }
    EXPECT(cuCtxDestroy(b), CUDA_SUCCESS);
    EXPECT(cuCtxSetCurrent(a), CUDA_SUCCESS);
    EXPECT(conf_probe(f, NULL, 19), CUDA_SUCCESS);
    EXPECT(cuModuleUnload(mod), CUDA_SUCCESS);
    EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);
    EXPECT(cuCtxDestroy(a), CUDA_SUCCESS);
    conf_clear_stack();
}

/* Fact 5, as the real driver behaves (one might read the documentation as a
 * refusal with 400; a run on two H200s
 * showed otherwise): a launch while context A is current, on a stream created
 * in context B, is accepted and runs in B, on B's device; cuStreamGetCtx names
 * B. Nothing in the driver stops it, so a library must check the stream's
 * context itself. The output lives in B's memory: with A's memory a launch on
 * another device faults (700) and poisons the process. */
static void fact05_foreign_stream(int other_device)
{
    CUcontext a, b, owner = NULL;
    CUstream sb;
    CUlibrary lib;
    CUkernel k;
    CUdeviceptr db;
    unsigned value = other_device ? 52 : 51, got = 0;
    EXPECT_FATAL(conf_load_probe(&lib, &k), CUDA_SUCCESS);
    EXPECT_FATAL(cuCtxCreate(&b, NULL, 0, other_device ? 1 : 0), CUDA_SUCCESS);
    EXPECT_FATAL(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT_FATAL(cuMemAlloc(&db, sizeof got), CUDA_SUCCESS);
    EXPECT(cuMemsetD32(db, 0, 1), CUDA_SUCCESS);
    EXPECT_FATAL(cuCtxCreate(&a, NULL, 0, 0), CUDA_SUCCESS);
    void *args[] = {&db, &value};
    EXPECT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, sb, args, NULL), CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(sb), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(conf_current(), a);
    EXPECT(cuStreamGetCtx(sb, &owner), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(owner, b);
    EXPECT(cuMemcpyDtoH(&got, db, sizeof got), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(got, value);
    if (conf_sim) {
        /* the simulation records the context a launch ran in */
        size_t (*count)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "simcuda_launch_count");
        int (*get)(size_t, simcuda_launch_record_t *) =
            (int (*)(size_t, simcuda_launch_record_t *))dlsym(RTLD_DEFAULT, "simcuda_launch_get");
        simcuda_launch_record_t rec;
        CU_ASSERT_FATAL(count && get && count() > 0);
        CU_ASSERT_EQUAL_FATAL(get(count() - 1, &rec), 0);
        CU_ASSERT_PTR_EQUAL(rec.ctx, b);
        CU_ASSERT_EQUAL(rec.device, other_device ? 1 : 0);
    }
    if (!other_device) {
        /* a module function of A on B's stream (same device) */
        CUmodule mod;
        CUfunction f;
        EXPECT_FATAL(cuModuleLoadData(&mod, hk__conf_fatbin), CUDA_SUCCESS);
        EXPECT_FATAL(cuModuleGetFunction(&f, mod, "hk_probe_kernel"), CUDA_SUCCESS);
        value = 53;
        CUresult lr = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, sb, args, NULL);
        conf_observe("fact 5: a module function of A launched on B's stream", lr);
        if (lr == CUDA_SUCCESS)
            EXPECT(cuStreamSynchronize(sb), CUDA_SUCCESS);
        EXPECT(cuModuleUnload(mod), CUDA_SUCCESS);
    }
    EXPECT(cuCtxDestroy(a), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(conf_current(), b);
    EXPECT(cuMemFree(db), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(sb), CUDA_SUCCESS);
    EXPECT(cuCtxDestroy(b), CUDA_SUCCESS);
    EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);
    conf_clear_stack();
}

static void fact05_same_device(void)
{
    fact05_foreign_stream(0);
}

static void fact05_other_device(void)
{
    fact05_foreign_stream(1);
}

/* Fact 11: a pointer names its own context and device, whatever is current;
 * interior pointers work; a host pointer → 1. */
static void fact11_pointer_attributes(void)
{
    CUcontext p0, p1, ctx = NULL;
    CUdeviceptr d1, start = 0;
    int ordinal = -1;
    unsigned type = 0;
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p1, 1), CUDA_SUCCESS);
    EXPECT(cuCtxSetCurrent(p1), CUDA_SUCCESS);
    EXPECT_FATAL(cuMemAlloc(&d1, 4096), CUDA_SUCCESS);
    EXPECT(cuCtxSetCurrent(p0), CUDA_SUCCESS);
    EXPECT(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, d1), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(ctx, p1);
    EXPECT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d1), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(ordinal, 1);
    EXPECT(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d1), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(type, CU_MEMORYTYPE_DEVICE);
    ordinal = -1;
    EXPECT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d1 + 1000),
           CUDA_SUCCESS);
    CU_ASSERT_EQUAL(ordinal, 1);
    EXPECT(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d1 + 1000),
           CUDA_SUCCESS);
    CU_ASSERT_EQUAL(start, d1);
    int host_local = 0;
    EXPECT(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT,
                                 (CUdeviceptr)(uintptr_t)&host_local),
           CUDA_ERROR_INVALID_VALUE);
    /* the plural form, as libraries use it to check a pointer in one call */
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    ctx = NULL;
    ordinal = -1;
    void *data[2] = {&ctx, &ordinal};
    EXPECT(cuPointerGetAttributes(2, attrs, data, d1 + 8), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(ctx, p1);
    CU_ASSERT_EQUAL(ordinal, 1);
    conf_observe("fact 11: cuPointerGetAttributes of a host pointer",
                 cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)(uintptr_t)&host_local));
    EXPECT(cuCtxSetCurrent(p1), CUDA_SUCCESS);
    EXPECT(cuMemFree(d1), CUDA_SUCCESS);
    conf_clear_stack();
    EXPECT(cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

/* Fact 13: a CUkernel launch is captured, instantiated and replayed; during a
 * global-mode capture cuMemAlloc and cuCtxSynchronize → 900. */
static void fact13_capture(void)
{
    CUcontext c;
    CUstream s;
    CUlibrary lib;
    CUkernel k;
    CUdeviceptr d, extra;
    CUgraph g = NULL;
    CUgraphExec x = NULL;
    unsigned value = 31, got = 0;
    CUstreamCaptureStatus cs;
    EXPECT_FATAL(cuCtxCreate(&c, NULL, 0, 0), CUDA_SUCCESS);
    EXPECT_FATAL(conf_load_probe(&lib, &k), CUDA_SUCCESS);
    EXPECT_FATAL(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT_FATAL(cuMemAlloc(&d, sizeof got), CUDA_SUCCESS);
    EXPECT(cuMemsetD32(d, 0, 1), CUDA_SUCCESS);
    void *args[] = {&d, &value};
    EXPECT_FATAL(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    EXPECT(cuStreamIsCapturing(s, &cs), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), CUDA_SUCCESS);
    EXPECT(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    EXPECT(cuMemcpyDtoH(&got, d, sizeof got), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(got, 0); /* captured, not run */
    EXPECT_FATAL(cuGraphInstantiate(&x, g, 0), CUDA_SUCCESS);
    EXPECT(cuGraphLaunch(x, s), CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT(cuMemcpyDtoH(&got, d, sizeof got), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(got, 31);
    EXPECT(cuGraphExecDestroy(x), CUDA_SUCCESS);
    EXPECT(cuGraphDestroy(g), CUDA_SUCCESS);

    EXPECT_FATAL(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    EXPECT(cuMemAlloc(&extra, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUresult isr = cuStreamIsCapturing(s, &cs);
    conf_observe("fact 13: cuStreamIsCapturing after a forbidden call", isr);
    if (isr == CUDA_SUCCESS)
        conf_observe_int("fact 13: capture status after a forbidden call (0 none, 1 active, 2 invalidated)", cs);
    g = NULL;
    conf_observe("fact 13: cuStreamEndCapture after a forbidden call", cuStreamEndCapture(s, &g));
    if (g)
        EXPECT(cuGraphDestroy(g), CUDA_SUCCESS);
    EXPECT(cuStreamIsCapturing(s, &cs), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cs, CU_STREAM_CAPTURE_STATUS_NONE);
    EXPECT(cuMemFree(d), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);
    EXPECT(cuCtxDestroy(c), CUDA_SUCCESS);
    conf_clear_stack();
}

/* Fact 14: after cuLibraryUnload its CUkernel and a CUfunction from it → 400. */
static void fact14_library_unload(void)
{
    CUcontext c;
    CUlibrary lib;
    CUkernel k;
    CUfunction f;
    CUdevice dev;
    EXPECT_FATAL(cuCtxCreate(&c, NULL, 0, 0), CUDA_SUCCESS);
    EXPECT_FATAL(conf_load_probe(&lib, &k), CUDA_SUCCESS);
    EXPECT_FATAL(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
    EXPECT(conf_probe(f, NULL, 41), CUDA_SUCCESS);
    EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);
    EXPECT(conf_probe((CUfunction)k, NULL, 42), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(conf_probe(f, NULL, 43), CUDA_ERROR_INVALID_HANDLE);
    /* the context itself is unharmed */
    EXPECT(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    EXPECT(cuCtxDestroy(c), CUDA_SUCCESS);
    conf_clear_stack();
}

/* Fact 17: a green context is a CUcontext of its own (not the primary, own
 * ID); its streams belong to it; destroyed → 709. */
static void fact17_green_context(void)
{
    CUdevResource res;
    CUdevResourceDesc desc;
    CUgreenCtx g;
    CUcontext gc = NULL, p0, owner = NULL;
    CUstream s;
    unsigned long long gid = 0, pid = 0, id;
    EXPECT_FATAL(cuDeviceGetDevResource(0, &res, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
    CU_ASSERT(res.sm.smCount > 0);
    EXPECT_FATAL(cuDevResourceGenerateDesc(&desc, &res, 1), CUDA_SUCCESS);
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT_FATAL(cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
    EXPECT_FATAL(cuCtxFromGreenCtx(&gc, g), CUDA_SUCCESS);
    CU_ASSERT_PTR_NOT_NULL(gc);
    CU_ASSERT_PTR_NOT_EQUAL(gc, p0);
    CU_ASSERT_PTR_NULL(conf_current()); /* creating it makes nothing current */
    EXPECT(cuCtxGetId(gc, &gid), CUDA_SUCCESS);
    EXPECT(cuCtxGetId(p0, &pid), CUDA_SUCCESS);
    CU_ASSERT_NOT_EQUAL(gid, pid);
    EXPECT(cuCtxPushCurrent(gc), CUDA_SUCCESS);
    EXPECT_FATAL(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT(cuStreamGetCtx(s, &owner), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(owner, gc);
    CUlibrary lib;
    CUkernel k;
    if (EXPECT(conf_load_probe(&lib, &k), CUDA_SUCCESS)) {
        EXPECT(conf_probe((CUfunction)k, s, 51), CUDA_SUCCESS);
        EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);
    }
    EXPECT(cuStreamDestroy(s), CUDA_SUCCESS);
    conf_clear_stack();
    EXPECT(cuGreenCtxDestroy(g), CUDA_SUCCESS);
    EXPECT(cuCtxGetId(gc, &id), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    conf_observe_int("fact 17: primary 0 active after the green context and our retain are gone", conf_primary_active(0));
}

void conf_register_execution(CU_pSuite s)
{
    hk_test_add(s, "fact 04: module function bound to its context, CUkernel anywhere",
                fact04_module_vs_library);
    hk_test_add(s, "fact 05: a launch on another context's stream runs there (same device)",
                fact05_same_device);
    CU_pTest t = hk_test_add(s, "fact 11: pointer attributes name the owner's context and device",
                    fact11_pointer_attributes);
    if (conf_ndev < 2)
        hk_test_skip(t, NEED_TWO);
    static const hk_test_case_t tests[] = {
        {"fact 13: CUkernel capture and replay; 900 during global capture", fact13_capture},
        {"fact 14: kernels and functions of an unloaded library 400", fact14_library_unload},
        {"fact 17: green context has its own context, ID and streams", fact17_green_context},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}

/* Registered last of all: if the real driver ever ran this launch on the wrong
 * device, the fault would poison every test after it. */
void conf_register_last(CU_pSuite s)
{
    CU_pTest t = hk_test_add(s, "fact 05: a launch on another context's stream runs there (other device)",
                             fact05_other_device);
    if (conf_ndev < 2)
        hk_test_skip(t, NEED_TWO);
}
