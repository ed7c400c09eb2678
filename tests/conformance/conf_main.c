/* Conformance suite: registration, the calls made before cuInit (fact 9), and
 * helpers shared by the tests. */
#include "conf.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "hk_test.h"

int conf_ndev;
int conf_sim;
CUresult conf_preinit[6];
CUresult conf_preinit_version;

int conf_expect(CUresult got, CUresult want, const char *what, const char *file, int line,
                CU_BOOL fatal)
{
    if (got != want) {
        const char *g = NULL, *w = NULL;
        cuGetErrorName(got, &g);
        cuGetErrorName(want, &w);
        fprintf(stderr, "\n  %s:%d: %s returned %d (%s), expected %d (%s)\n", file, line, what,
                (int)got, g ? g : "?", (int)want, w ? w : "?");
    }
    return CU_assertImplementation(got == want, (unsigned)line, what, file, "", fatal);
}

void conf_observe(const char *what, CUresult got)
{
    const char *name = NULL;
    if (cuGetErrorName(got, &name) != CUDA_SUCCESS || !name)
        name = "no name";
    fprintf(stderr, "observed: %s = %d (%s)\n", what, (int)got, name);
}

void conf_observe_int(const char *what, long value)
{
    fprintf(stderr, "observed: %s = %ld\n", what, value);
}

void conf_clear_stack(void)
{
    CUcontext c;
    for (int i = 0; i < 64 && cuCtxPopCurrent(&c) == CUDA_SUCCESS; i++) {
    }
}

CUcontext conf_current(void)
{
    CUcontext c = NULL;
    EXPECT(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    return c;
}

int conf_primary_active(int dev)
{
    unsigned flags = 0;
    int active = -1;
    EXPECT(cuDevicePrimaryCtxGetState(dev, &flags, &active), CUDA_SUCCESS);
    return active;
}

CUresult conf_load_probe(CUlibrary *lib, CUkernel *k)
{
    CUresult r = cuLibraryLoadData(lib, hk__conf_fatbin, NULL, NULL, 0, NULL, NULL, 0);
    if (r != CUDA_SUCCESS)
        return r;
    r = cuLibraryGetKernel(k, *lib, "hk_probe_kernel");
    if (r != CUDA_SUCCESS)
        cuLibraryUnload(*lib);
    return r;
}

CUresult conf_probe(CUfunction f, CUstream s, unsigned value)
{
    CUdeviceptr d;
    unsigned got = 0;
    CUresult r = cuMemAlloc(&d, sizeof got);
    if (r != CUDA_SUCCESS)
        return r;
    void *args[] = {&d, &value};
    r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
    if (r == CUDA_SUCCESS) {
        EXPECT(cuStreamSynchronize(s), CUDA_SUCCESS);
        EXPECT(cuMemcpyDtoH(&got, d, sizeof got), CUDA_SUCCESS);
        CU_ASSERT_EQUAL(got, value);
    }
    EXPECT(cuMemFree(d), CUDA_SUCCESS);
    return r;
}

int hk_test_register(void)
{
    const char *child = getenv("HK_CONF_CHILD");
    if (child)
        conf_child_main(child);
    /* Fact 9, first half: these run before anything initialises the driver. */
    int n = 0;
    CUdevice dev;
    CUcontext c;
    CUdeviceptr p;
    unsigned long long id;
    int version = 0;
    conf_preinit[0] = cuDeviceGetCount(&n);
    conf_preinit[1] = cuDeviceGet(&dev, 0);
    conf_preinit[2] = cuCtxGetCurrent(&c);
    conf_preinit[3] = cuMemAlloc(&p, 16);
    conf_preinit[4] = cuCtxGetId(NULL, &id);
    conf_preinit[5] = cuDevicePrimaryCtxRetain(&c, 0);
    conf_preinit_version = cuDriverGetVersion(&version);

    conf_sim = dlsym(RTLD_DEFAULT, "simcuda_is_simulated") != NULL;
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetCount(&conf_ndev);
    fprintf(stderr, "conformance: %s driver, %d device(s)\n", conf_sim ? "simulated" : "real",
            conf_ndev);
    CU_pSuite s = hk_test_suite("driver facts", NULL, NULL);
    conf_register_contexts(s);
    conf_register_execution(s);
    conf_register_streams(s);
    conf_register_capture(s);
    conf_register_runtime(s);
    conf_register_images(s);
    conf_register_launch(s);
    conf_register_starve(s);
    conf_register_last(s);
    if (r != CUDA_SUCCESS || conf_ndev < 1)
        hk_test_skip_suite(s, "no usable CUDA driver or device (cuInit/cuDeviceGetCount failed)");
    return 0;
}
