/* Conformance: facts 28 and 29 (docs/contexts.md), a launch's arguments and
 * its dynamic shared memory. The probe kernel has two parameters (a pointer,
 * an unsigned). An argument array shorter than that runs in a child process
 * (see conf_images.c), its last entry just before pages nobody may read. */
#include "conf.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hk_test.h"

/* A kernel without parameters, as PTX text (the driver compiles it). */
static const char noparams_ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
                                   ".visible .entry conf_noparams()\n{\n\tret;\n}\n";

/* The probe of the build's fatbin, in a context of device 0 made current. */
static int probe_setup(CUcontext *c, CUlibrary *lib, CUkernel *k)
{
    EXPECT_FATAL(cuCtxCreate(c, NULL, 0, 0), CUDA_SUCCESS);
    return EXPECT(conf_load_probe(lib, k), CUDA_SUCCESS);
}

static void probe_teardown(CUcontext c, CUlibrary lib)
{
    EXPECT(cuLibraryUnload(lib), CUDA_SUCCESS);
    EXPECT(cuCtxDestroy(c), CUDA_SUCCESS);
    conf_clear_stack();
}

/* The probe launched with shared bytes of dynamic shared memory; on success
 * its value is checked. */
static CUresult probe_shared(CUfunction f, unsigned shared, unsigned value)
{
    CUdeviceptr d;
    unsigned got = 0;
    CUresult r = cuMemAlloc(&d, sizeof got);
    if (r != CUDA_SUCCESS)
        return r;
    void *args[] = {&d, &value};
    r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, shared, NULL, args, NULL);
    if (r == CUDA_SUCCESS) {
        EXPECT(cuCtxSynchronize(), CUDA_SUCCESS);
        EXPECT(cuMemcpyDtoH(&got, d, sizeof got), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(got, value);
    }
    EXPECT(cuMemFree(d), CUDA_SUCCESS);
    return r;
}

/* Fact 28: each parameter's offset and size, INVALID_VALUE past the last (at
 * 0 for a kernel without any); NULL arguments for a kernel with parameters
 * refused with INVALID_VALUE, the context fine afterwards; an array with
 * fewer entries than parameters read past its end. */
static void fact28_launch_arguments(void)
{
    CUcontext c;
    CUlibrary lib, none;
    CUkernel k, kn;
    CUfunction f;
    size_t off = 99, size = 99;
    if (!probe_setup(&c, &lib, &k))
        return;
    EXPECT(cuKernelGetParamInfo(k, 0, &off, &size), CUDA_SUCCESS);
    CU_ASSERT(off == 0 && size == 8);
    EXPECT(cuKernelGetParamInfo(k, 1, &off, &size), CUDA_SUCCESS);
    CU_ASSERT(off == 8 && size == 4);
    EXPECT(cuKernelGetParamInfo(k, 2, &off, &size), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
    EXPECT(cuFuncGetParamInfo(f, 1, &off, &size), CUDA_SUCCESS);
    CU_ASSERT(off == 8 && size == 4);
    EXPECT(cuFuncGetParamInfo(f, 2, &off, &size), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLibraryLoadData(&none, noparams_ptx, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    EXPECT(cuLibraryGetKernel(&kn, none, "conf_noparams"), CUDA_SUCCESS);
    EXPECT(cuKernelGetParamInfo(kn, 0, &off, &size), CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT(conf_probe((CUfunction)k, NULL, 27), CUDA_SUCCESS);
    int got = conf_run_child("launch with one argument of two");
    if (got != CONF_READ_PAST)
        fprintf(stderr, "\n  fact 28: the short array: child exit %d, expected %d\n", got,
                CONF_READ_PAST);
    CU_ASSERT_EQUAL(got, CONF_READ_PAST);
    EXPECT(cuLibraryUnload(none), CUDA_SUCCESS);
    probe_teardown(c, lib);
}

void conf_launch_child(const char *name)
{
    CUdevice d;
    CUcontext c;
    CUlibrary lib;
    CUkernel k;
    CUdeviceptr p;
    (void)name;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&d, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS ||
        conf_load_probe(&lib, &k) != CUDA_SUCCESS || cuMemAlloc(&p, 4) != CUDA_SUCCESS)
        _exit(2);
    void *one = &p;
    void **args = conf_guarded(&one, sizeof one); /* args[1] lies in the page after */
    if (!args)
        _exit(2);
    signal(SIGSEGV, conf_read_past);
    signal(SIGBUS, conf_read_past);
    CUresult r = cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
    if (r == CUDA_SUCCESS)
        r = cuCtxSynchronize();
    fprintf(stderr, "conformance child \"%s\": %d\n", name, (int)r);
    _exit(r == CUDA_SUCCESS ? 0 : CONF_REFUSED);
}

/* Fact 29: 48 KiB of dynamic shared memory by default; more (48 KiB + 4,
 * 2 GiB, 4 GiB - 1) refused with INVALID_VALUE and the context fine
 * afterwards; up to the device's opt-in maximum once the kernel's attribute
 * says so, which itself accepts no more than that. */
static void fact29_dynamic_shared_memory(void)
{
    CUcontext c;
    CUlibrary lib;
    CUkernel k;
    CUdevice d;
    int optin = 0, fixed = 0, deflt = 0;
    if (!probe_setup(&c, &lib, &k))
        return;
    CUfunction f = (CUfunction)k;
    EXPECT(cuDeviceGet(&d, 0), CUDA_SUCCESS);
    EXPECT(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                d), CUDA_SUCCESS);
    EXPECT(cuKernelGetAttribute(&fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k, d), CUDA_SUCCESS);
    EXPECT(cuKernelGetAttribute(&deflt, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, d),
           CUDA_SUCCESS);
    conf_observe_int("fact 29: opt-in shared memory per block", optin);
    CU_ASSERT_EQUAL(deflt, 48 * 1024 - fixed);
    const unsigned limit = (unsigned)deflt, refused[] = {limit + 4, 0x80000000u, 0xffffffffu};
    EXPECT(probe_shared(f, limit, 280), CUDA_SUCCESS);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        EXPECT(probe_shared(f, refused[i], 281), CUDA_ERROR_INVALID_VALUE);
        EXPECT(cuCtxSynchronize(), CUDA_SUCCESS);
        EXPECT(probe_shared(f, 0, 282), CUDA_SUCCESS);
    }
    int most = optin - fixed;
    EXPECT(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, most + 4, k, d),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, -1, k, d),
           CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, most, k, d),
           CUDA_SUCCESS);
    EXPECT(probe_shared(f, (unsigned)most, 283), CUDA_SUCCESS);
    EXPECT(probe_shared(f, (unsigned)most + 4, 284), CUDA_ERROR_INVALID_VALUE);
    EXPECT(probe_shared(f, 0xffffffffu, 285), CUDA_ERROR_INVALID_VALUE);
    EXPECT(probe_shared(f, 0, 286), CUDA_SUCCESS);
    probe_teardown(c, lib);
}

void conf_register_launch(CU_pSuite s)
{
    hk_test_add(s, "fact 28: parameters' offsets and sizes; NULL and short argument arrays",
                fact28_launch_arguments);
    hk_test_add(s, "fact 29: dynamic shared memory past the kernel's limit refused",
                fact29_dynamic_shared_memory);
}
