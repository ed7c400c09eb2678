/* Conformance: facts 9 and 12 (initialisation, entry points), 3 and 8 (the
 * runtime's view: cudaSetDevice, cudaDeviceReset), 18 (fork). The runtime
 * tests run last: a reset leaves the primaries in a state the others do not
 * expect. */
#include "conf.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_rt.h"
#include "hk_test.h"

/* Fact 9: before cuInit every call that needs the driver → 3 (recorded at
 * registration; cuDriverGetVersion succeeds, as measured); with
 * nothing current → 201; the special streams name the current context. */
static void fact09_init_and_no_context(void)
{
    for (int i = 0; i < 6; i++)
        EXPECT(conf_preinit[i], CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(conf_preinit_version, CUDA_SUCCESS); /* the one call that works before cuInit */
    CUdeviceptr d;
    unsigned long long id;
    CUcontext c = NULL, mine;
    conf_clear_stack();
    EXPECT(cuMemAlloc(&d, 64), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuCtxGetId(NULL, &id), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(cuStreamGetCtx(NULL, &c), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_FATAL(cuCtxCreate(&mine, NULL, 0, conf_ndev - 1), CUDA_SUCCESS);
    EXPECT(cuStreamGetCtx(NULL, &c), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(c, mine);
    c = NULL;
    EXPECT(cuStreamGetCtx(CU_STREAM_LEGACY, &c), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(c, mine);
    c = NULL;
    EXPECT(cuStreamGetCtx(CU_STREAM_PER_THREAD, &c), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(c, mine);
    CUdeviceptr live = 0;
    EXPECT(cuMemAlloc(&live, 64), CUDA_SUCCESS);
    EXPECT(cuCtxPopCurrent(&c), CUDA_SUCCESS);
    conf_observe("fact 9: cuMemFree of live memory with nothing current", cuMemFree(live));
    conf_observe("fact 9: cuMemFree(0) with nothing current", cuMemFree(0));
    CUlibrary lib;
    CUresult lr = cuLibraryLoadData(&lib, hk__conf_fatbin, NULL, NULL, 0, NULL, NULL, 0);
    conf_observe("fact 9: cuLibraryLoadData with nothing current", lr);
    if (lr == CUDA_SUCCESS)
        EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);
    EXPECT(cuCtxDestroy(mine), CUDA_SUCCESS);
    conf_clear_stack();
}

typedef CUresult (*create_v2_fn)(CUcontext *, unsigned, CUdevice);
typedef CUresult (*create_v4_fn)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice);

/* Fact 12: cuGetProcAddress succeeds even when it finds nothing, reports why,
 * and maps (name, version) to the matching versioned entry. */
static void fact12_get_proc_address(void)
{
    void *fn = (void *)&fn;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    EXPECT(cuGetProcAddress("cuNoSuchEntryPoint", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st),
           CUDA_SUCCESS);
    CU_ASSERT_EQUAL(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CU_ASSERT_PTR_NULL(fn);
    fn = (void *)&fn;
    EXPECT(cuGetProcAddress("cuLibraryLoadData", &fn, 11080, CU_GET_PROC_ADDRESS_DEFAULT, &st),
           CUDA_SUCCESS);
    CU_ASSERT_EQUAL(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CU_ASSERT_PTR_NULL(fn);

    void *v13 = NULL, *v11 = NULL;
    EXPECT(cuGetProcAddress("cuCtxCreate", &v13, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st),
           CUDA_SUCCESS);
    CU_ASSERT_EQUAL(st, CU_GET_PROC_ADDRESS_SUCCESS);
    EXPECT(cuGetProcAddress("cuCtxCreate", &v11, 11000, CU_GET_PROC_ADDRESS_DEFAULT, &st),
           CUDA_SUCCESS);
    CU_ASSERT_EQUAL(st, CU_GET_PROC_ADDRESS_SUCCESS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v13);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v11);
    CU_ASSERT_PTR_NOT_EQUAL(v13, v11);
    fprintf(stderr, "observed: fact 12: cuCtxCreate at 13000 %s the linked cuCtxCreate_v4\n",
            v13 == (void *)&cuCtxCreate_v4 ? "is" : "is not");
    /* each pointer works with its own signature */
    CUcontext a = NULL, b = NULL;
    unsigned long long ida = 0, idb = 0;
    EXPECT(((create_v4_fn)v13)(&a, NULL, 0, 0), CUDA_SUCCESS);
    EXPECT(((create_v2_fn)v11)(&b, 0, 0), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(conf_current(), b);
    EXPECT(cuCtxGetId(a, &ida), CUDA_SUCCESS);
    EXPECT(cuCtxGetId(b, &idb), CUDA_SUCCESS);
    CU_ASSERT_NOT_EQUAL(ida, idb);
    if (b)
        EXPECT(cuCtxDestroy(b), CUDA_SUCCESS);
    if (a)
        EXPECT(cuCtxDestroy(a), CUDA_SUCCESS);
    conf_observe("fact 12: cuGetProcAddress at a version newer than the driver",
                 cuGetProcAddress("cuInit", &fn, 99000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    conf_clear_stack();
}

/* Fact 3: cudaSetDevice(n) makes n's primary active and current at once;
 * after cuCtxSetCurrent(p0), cudaGetDevice answers 0. */
static void fact03_runtime_set_device(void)
{
    int n = conf_ndev > 1 ? 1 : 0, dev = -1;
    CUcontext pn, p0;
    conf_clear_stack();
    CU_ASSERT_EQUAL_FATAL(hk_rt_set_device(n), 0);
    CU_ASSERT_EQUAL(conf_primary_active(n), 1);
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&pn, n), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(conf_current(), pn);
    CU_ASSERT_EQUAL(hk_rt_get_device(&dev), 0);
    CU_ASSERT_EQUAL(dev, n);
    EXPECT(cuDevicePrimaryCtxRelease(n), CUDA_SUCCESS);
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT(cuCtxSetCurrent(p0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(hk_rt_get_device(&dev), 0);
    CU_ASSERT_EQUAL(dev, 0);
    /* runtime memory and streams live in the current context */
    void *mem = NULL, *stream = NULL;
    CUcontext owner = NULL;
    CU_ASSERT_EQUAL(hk_rt_malloc(&mem, 1024), 0);
    EXPECT(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)(uintptr_t)mem),
           CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(owner, p0);
    CU_ASSERT_EQUAL(hk_rt_stream_create(&stream), 0);
    owner = NULL;
    EXPECT(cuStreamGetCtx((CUstream)stream, &owner), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(owner, p0);
    CU_ASSERT_EQUAL(hk_rt_stream_destroy(stream), 0);
    CU_ASSERT_EQUAL(hk_rt_free(mem), 0);
    /* give everything back: the runtime's retains go with a reset per device */
    CU_ASSERT_EQUAL(hk_rt_device_reset(), 0); /* device 0: the runtime took it on malloc */
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    if (n != 0) {
        CU_ASSERT_EQUAL(hk_rt_set_device(n), 0);
        CU_ASSERT_EQUAL(hk_rt_device_reset(), 0);
    }
    conf_clear_stack();
    for (int d = 0; d < conf_ndev; d++)
        CU_ASSERT_EQUAL(conf_primary_active(d), 0);
}

/* Fact 8: cudaDeviceReset while another party holds a retain: inactive at
 * once, still current, ID and launches 709; the next retain brings the same
 * pointer back with a new ID; CUkernels work again, old module functions 400.
 * Measured on the real driver: the reset drops only the runtime's own retain,
 * so the party's retain still counts (its release succeeds, one more → 201),
 * and the inactive primary still answers cuCtxGetDevice/cuCtxGetFlags. */
static void fact08_reset_under_a_retain(void)
{
    CUcontext p, again;
    CUmodule mod;
    CUfunction f;
    CUlibrary lib;
    CUkernel k;
    unsigned long long id1 = 0, id2 = 0, id;
    conf_clear_stack();
    CU_ASSERT_EQUAL_FATAL(hk_rt_set_device(0), 0);
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS); /* the other party */
    CU_ASSERT_PTR_EQUAL(conf_current(), p);
    EXPECT(cuCtxGetId(p, &id1), CUDA_SUCCESS);
    EXPECT_FATAL(cuModuleLoadData(&mod, hk__conf_fatbin), CUDA_SUCCESS);
    EXPECT_FATAL(cuModuleGetFunction(&f, mod, "hk_probe_kernel"), CUDA_SUCCESS);
    EXPECT_FATAL(conf_load_probe(&lib, &k), CUDA_SUCCESS);
    EXPECT(conf_probe(f, NULL, 81), CUDA_SUCCESS);
    EXPECT(conf_probe((CUfunction)k, NULL, 82), CUDA_SUCCESS);
    CUfunction fk = NULL;
    EXPECT(cuKernelGetFunction(&fk, k), CUDA_SUCCESS);
    CUdeviceptr before = 0;
    EXPECT(cuMemAlloc(&before, 64), CUDA_SUCCESS);

    CU_ASSERT_EQUAL(hk_rt_device_reset(), 0);
    CU_ASSERT_EQUAL(conf_primary_active(0), 0);
    CU_ASSERT_PTR_EQUAL(conf_current(), p);
    EXPECT(cuCtxGetId(p, &id), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    EXPECT(cuCtxGetId(NULL, &id), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    void *args[] = {&id, &id}; /* never read: the launch is refused first */
    EXPECT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
           CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CUdeviceptr d;
    CUstream s;
    conf_observe("fact 8: cuMemAlloc in the reset primary", cuMemAlloc(&d, 64));
    conf_observe("fact 8: cuStreamCreate in the reset primary", cuStreamCreate(&s, 0));
    conf_observe("fact 8: cuCtxSynchronize in the reset primary", cuCtxSynchronize());
    /* its device and flags still answer, and it can be made current */
    CUdevice dev = -1;
    unsigned flags = 0;
    EXPECT(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(dev, 0);
    EXPECT(cuCtxGetFlags(&flags), CUDA_SUCCESS);
    CUcontext top = NULL;
    EXPECT(cuCtxPushCurrent(p), CUDA_SUCCESS);
    EXPECT(cuCtxPopCurrent(&top), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(top, p);
    EXPECT(cuCtxSetCurrent(p), CUDA_SUCCESS);

    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&again, 0), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(again, p);
    CU_ASSERT_EQUAL(conf_primary_active(0), 1);
    EXPECT(cuCtxGetId(p, &id2), CUDA_SUCCESS);
    CU_ASSERT_NOT_EQUAL(id1, id2);
    EXPECT(conf_probe((CUfunction)k, NULL, 83), CUDA_SUCCESS);
    EXPECT(conf_probe(f, NULL, 84), CUDA_ERROR_INVALID_HANDLE);
    conf_observe("fact 8: a CUfunction from cuKernelGetFunction before the reset",
                 conf_probe(fk, NULL, 85));
    CUfunction fk2 = NULL;
    EXPECT(cuKernelGetFunction(&fk2, k), CUDA_SUCCESS);
    EXPECT(conf_probe(fk2, NULL, 86), CUDA_SUCCESS);
    CUcontext owner = NULL;
    conf_observe("fact 8: cuPointerGetAttribute(CONTEXT) of memory from before the reset",
                 cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, before));
    conf_observe("fact 8: cuMemFree of memory from before the reset", cuMemFree(before));
    EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);

    /* The reset dropped the runtime's retain only: the party's survives. */
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS); /* the new retain */
    CU_ASSERT_EQUAL(conf_primary_active(0), 1);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS); /* the party's, from before the reset */
    CU_ASSERT_EQUAL(conf_primary_active(0), 0);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    conf_clear_stack();
}

/* Fact 18: in a child after fork() every call that needs the driver
 * initialised, cuInit included, → 3; cuDriverGetVersion and cuGetProcAddress
 * still succeed there (measured), as they do before cuInit. */
static void fact18_fork_child(void)
{
    CUcontext p;
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS); /* the parent uses the GPU */
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        int n, bad = 0, version = 0;
        CUcontext c;
        CUdeviceptr d;
        void *fn;
        bad |= (cuInit(0) != CUDA_ERROR_NOT_INITIALIZED) << 0;
        bad |= (cuDeviceGetCount(&n) != CUDA_ERROR_NOT_INITIALIZED) << 1;
        bad |= (cuCtxGetCurrent(&c) != CUDA_ERROR_NOT_INITIALIZED) << 2;
        bad |= (cuDevicePrimaryCtxRetain(&c, 0) != CUDA_ERROR_NOT_INITIALIZED) << 3;
        bad |= (cuMemAlloc(&d, 16) != CUDA_ERROR_NOT_INITIALIZED) << 4;
        bad |= (cuCtxSetCurrent(p) != CUDA_ERROR_NOT_INITIALIZED) << 5;
        /* what works before cuInit also works here */
        bad |= (cuDriverGetVersion(&version) != CUDA_SUCCESS) << 6;
        bad |= (cuGetProcAddress("cuInit", &fn, 13000, 0, NULL) != CUDA_SUCCESS) << 7;
        if (bad)
            fprintf(stderr, "fact 18: child checks failed, mask 0x%x\n", bad);
        fflush(NULL);
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT_TRUE(WIFEXITED(status));
    CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
    /* the parent is unaffected */
    unsigned long long id;
    EXPECT(cuCtxGetId(p, &id), CUDA_SUCCESS);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

void conf_register_runtime(CU_pSuite s)
{
    hk_test_add(s, "fact 09: 3 before cuInit, 201 with nothing current, special streams",
                fact09_init_and_no_context);
    hk_test_add(s, "fact 12: cuGetProcAddress statuses and versioned lookup",
                fact12_get_proc_address);
    CU_pTest t3 = hk_test_add(s, "fact 03: cudaSetDevice activates and makes current",
                              fact03_runtime_set_device);
    CU_pTest t8 = hk_test_add(s, "fact 08: cudaDeviceReset under another party's retain",
                              fact08_reset_under_a_retain);
    if (!hk_rt_available()) {
        hk_test_skip(t3, "the CUDA runtime (libcudart.so.13) cannot be loaded here");
        hk_test_skip(t8, "the CUDA runtime (libcudart.so.13) cannot be loaded here");
    }
    hk_test_add(s, "fact 18: every call in a fork child returns 3", fact18_fork_child);
}
