/* Tests of the simulated driver itself: fault injection (API and
 * SIMCUDA_FAIL), call counting, two threads with their own context stacks,
 * primary reference counts, the launch log, emulation errors and graph replay,
 * emulations registered at run time, the simulated JIT log, kernel
 * attributes, an unload waiting for a held launch (fact 19), a paused call.
 * The driver facts shared with the real driver are in tests/conformance. */
#include "hk_test.h"
#include "simcuda.h"
#include "simcuda_emu.h"

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OK(call) CU_ASSERT_EQUAL_FATAL((call), CUDA_SUCCESS)

/* Small PTX images: the simulation accepts PTX text and finds kernels by name. */
static const char probe_ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
                                ".visible .entry hk_probe_kernel(.param .u64 a, .param .u32 b)\n"
                                "{ ret; }\n";
static const char noemu_ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
                                ".visible .entry kernel_without_emulation()\n{ ret; }\n";

static int init_suite(void)
{
    return cuInit(0) == CUDA_SUCCESS ? 0 : 1;
}

/* Leaves nothing current and no retain behind (each test starts clean). */
static void clear_stack(void)
{
    CUcontext c;
    while (cuCtxPopCurrent(&c) == CUDA_SUCCESS) {
    }
    simcuda_fail_clear();
}

static void test_fail_kth_call(void)
{
    CUcontext ctx;
    CUdeviceptr p[3];
    OK(cuCtxCreate(&ctx, NULL, 0, 0));
    unsigned long before = simcuda_call_count("cuMemAlloc");
    simcuda_fail("cuMemAlloc", 2, CUDA_ERROR_OUT_OF_MEMORY);
    CU_ASSERT_EQUAL(cuMemAlloc(&p[0], 64), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemAlloc(&p[1], 64), CUDA_ERROR_OUT_OF_MEMORY);
    CU_ASSERT_EQUAL(cuMemAlloc(&p[2], 64), CUDA_SUCCESS); /* succeeds again */
    CU_ASSERT_EQUAL(simcuda_call_count("cuMemAlloc"), before + 3);
    CU_ASSERT_EQUAL(simcuda_live_allocations(), 2);
    OK(cuMemFree(p[0]));
    OK(cuMemFree(p[2]));
    CU_ASSERT_EQUAL(simcuda_live_allocations(), 0);

    /* k = 0 disarms; simcuda_fail_clear disarms everything */
    simcuda_fail("cuMemAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY);
    simcuda_fail("cuMemAlloc", 0, CUDA_SUCCESS);
    simcuda_fail("cuStreamCreate", 1, CUDA_ERROR_INVALID_VALUE);
    simcuda_fail_clear();
    CUstream s;
    OK(cuMemAlloc(&p[0], 64));
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamDestroy(s));
    OK(cuMemFree(p[0]));

    /* A failed cuCtxCreate leaves the stack as it was. */
    simcuda_fail("cuCtxCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
    CUcontext other = NULL, cur;
    CU_ASSERT_EQUAL(cuCtxCreate(&other, NULL, 0, 1), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuCtxGetCurrent(&cur));
    CU_ASSERT_PTR_EQUAL(cur, ctx);
    OK(cuCtxDestroy(ctx));
    clear_stack();
}

static void test_fail_repeat_and_counts(void)
{
    CUcontext ctx;
    CUdeviceptr p;
    void *host = NULL;
    CUlibrary lib;
    size_t contexts = simcuda_live_contexts(), libs = simcuda_live_libraries();
    int depth = simcuda_stack_depth();
    OK(cuCtxCreate(&ctx, NULL, 0, 0));
    CU_ASSERT_EQUAL(simcuda_stack_depth(), depth + 1);
    CU_ASSERT_EQUAL(simcuda_live_contexts(), contexts + 1);
    /* calls 2 and 3 fail, 1 and 4 succeed */
    simcuda_fail_repeat("cuMemAlloc", 2, 2, CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAlloc(&p, 64));
    CU_ASSERT_EQUAL(cuMemAlloc(&p, 64), CUDA_ERROR_OUT_OF_MEMORY);
    CU_ASSERT_EQUAL(cuMemAlloc(&p, 64), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAlloc(&p, 64));
    OK(cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    CU_ASSERT_EQUAL(simcuda_live_allocations(), 3);
    CU_ASSERT_EQUAL(simcuda_live_host_allocations(), 1);
    OK(cuMemFreeHost(host));
    CU_ASSERT_EQUAL(simcuda_live_host_allocations(), 0);
    OK(cuLibraryLoadData(&lib, probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CU_ASSERT_EQUAL(simcuda_live_libraries(), libs + 1);
    OK(cuLibraryUnload(lib));
    CU_ASSERT_EQUAL(simcuda_live_libraries(), libs);
    OK(cuCtxDestroy(ctx)); /* its two blocks go with it */
    CU_ASSERT_EQUAL(simcuda_live_allocations(), 0);
    CU_ASSERT_EQUAL(simcuda_live_contexts(), contexts);
    CU_ASSERT_EQUAL(simcuda_stack_depth(), depth);
    clear_stack();
}

static void test_versioned_names_count_once(void)
{
    unsigned long before = simcuda_call_count("cuCtxCreate");
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    OK(cuGetProcAddress("cuCtxCreate", &fn, 11000, 0, &st));
    CU_ASSERT_EQUAL(st, CU_GET_PROC_ADDRESS_SUCCESS);
    CUcontext a, b;
    typedef CUresult (*create_v2_t)(CUcontext *, unsigned, CUdevice);
    OK(((create_v2_t)fn)(&a, 0, 0));
    OK(cuCtxCreate(&b, NULL, 0, 0));
    CU_ASSERT_EQUAL(simcuda_call_count("cuCtxCreate"), before + 2);
    CU_ASSERT_EQUAL(simcuda_call_count("no_such_entry"), 0);
    OK(cuCtxDestroy(b));
    OK(cuCtxDestroy(a));
    clear_stack();
}

/* The env form runs in a fresh process (this program again, see
 * hk_test_register), since SIMCUDA_FAIL is read once, at the first call
 * (SIMCUDA_QUIET_LOADS_US, checked there too, at cuInit). */
static void test_fail_from_env(void)
{
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        setenv("HK_SIMCUDA_ENV_CHILD", "1", 1);
        setenv("SIMCUDA_FAIL", "cuDeviceGetCount:2:999,cuMemAlloc:1:2", 1);
        setenv("SIMCUDA_QUIET_LOADS_US", "200000", 1);
        execl("/proc/self/exe", "test_simcuda", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT_TRUE(WIFEXITED(status));
    CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* In the env child (SIMCUDA_QUIET_LOADS_US=200000): a stream made right after
 * a launch into the current context waits out the 200 ms; with the model
 * turned off it does not. out: 4 writable bytes. Returns 0 when both hold. */
static int quiet_env_check(CUdeviceptr out)
{
    CUlibrary lib;
    CUkernel k;
    CUstream s[2];
    unsigned value = 3;
    void *args[] = {&out, &value};
    double waited[2] = {0, 0};
    if (cuLibraryLoadData(&lib, probe_ptx, NULL, NULL, 0, NULL, NULL, 0) != CUDA_SUCCESS ||
        cuLibraryGetKernel(&k, lib, "hk_probe_kernel") != CUDA_SUCCESS)
        return 1;
    for (int i = 0; i < 2; i++) {
        if (i == 1)
            simcuda_quiet_loads(0);
        double t0 = now_ms();
        if (cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) != CUDA_SUCCESS ||
            cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            return 1;
        waited[i] = now_ms() - t0;
        cuStreamDestroy(s[i]);
    }
    cuLibraryUnload(lib);
    return waited[0] < 190.0 || waited[1] > 100.0;
}

/* Child side of test_fail_from_env; returns the exit status. */
static int env_child(void)
{
    int n = 0, bad = 0;
    CUcontext ctx;
    CUdeviceptr p;
    bad |= cuInit(0) != CUDA_SUCCESS;
    bad |= (cuDeviceGetCount(&n) != CUDA_SUCCESS) << 1;
    bad |= (cuDeviceGetCount(&n) != (CUresult)999) << 2;
    bad |= (cuDeviceGetCount(&n) != CUDA_SUCCESS) << 3;
    bad |= (cuCtxCreate(&ctx, NULL, 0, 0) != CUDA_SUCCESS) << 4;
    bad |= (cuMemAlloc(&p, 16) != CUDA_ERROR_OUT_OF_MEMORY) << 5;
    bad |= (cuMemAlloc(&p, 16) != CUDA_SUCCESS) << 6;
    bad |= (simcuda_call_count("cuDeviceGetCount") != 3) << 7;
    bad |= quiet_env_check(p) << 8;
    if (bad)
        fprintf(stderr, "simcuda env child: failed checks mask 0x%x\n", bad);
    return bad ? 1 : 0;
}

static void test_refcounts(void)
{
    CUcontext p0, again;
    unsigned long long id1, id2;
    CU_ASSERT_EQUAL(simcuda_primary_refcount(0), 0);
    CU_ASSERT_EQUAL(simcuda_primary_active(0), 0);
    OK(cuDevicePrimaryCtxRetain(&p0, 0));
    OK(cuDevicePrimaryCtxRetain(&again, 0));
    CU_ASSERT_PTR_EQUAL(p0, again);
    CU_ASSERT_EQUAL(simcuda_primary_refcount(0), 2);
    CU_ASSERT_EQUAL(simcuda_primary_active(0), 1);
    OK(cuCtxGetId(p0, &id1));
    OK(cuDevicePrimaryCtxRelease(0));
    CU_ASSERT_EQUAL(simcuda_primary_refcount(0), 1);
    CU_ASSERT_EQUAL(simcuda_primary_active(0), 1);
    OK(cuDevicePrimaryCtxRelease(0));
    CU_ASSERT_EQUAL(simcuda_primary_active(0), 0);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    CU_ASSERT_EQUAL(simcuda_primary_refcount(0), 0);

    /* the runtime-like retain is taken once and dropped by its reset */
    CU_ASSERT_EQUAL(simcuda_rt_set_device(1), 0);
    CU_ASSERT_EQUAL(simcuda_rt_set_device(1), 0);
    CU_ASSERT_EQUAL(simcuda_primary_refcount(1), 1);
    CU_ASSERT_PTR_NOT_NULL(simcuda_current_context());
    OK(cuDevicePrimaryCtxRetain(&p0, 1));
    OK(cuCtxGetId(p0, &id1));
    CU_ASSERT_EQUAL(simcuda_rt_device_reset(), 0);
    CU_ASSERT_EQUAL(simcuda_primary_active(1), 0);
    /* the runtime's retain went with the reset; ours stays */
    CU_ASSERT_EQUAL(simcuda_primary_refcount(1), 1);
    OK(cuDevicePrimaryCtxRetain(&again, 1));
    CU_ASSERT_PTR_EQUAL(again, p0);
    OK(cuCtxGetId(again, &id2));
    CU_ASSERT_NOT_EQUAL(id1, id2);
    OK(cuDevicePrimaryCtxRelease(1));
    CU_ASSERT_EQUAL(simcuda_primary_active(1), 1);
    OK(cuDevicePrimaryCtxRelease(1));
    CU_ASSERT_EQUAL(simcuda_primary_active(1), 0);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRelease(1), CUDA_ERROR_INVALID_CONTEXT);
    CU_ASSERT_EQUAL(simcuda_primary_refcount(-1), -1);
    CU_ASSERT_EQUAL(simcuda_primary_active(99), -1);
    clear_stack();
}

/* ---- two threads, each with its own stack, working at once ---- */

enum { ROUNDS = 200 };

typedef struct worker {
    int device;
    CUlibrary lib;
    int errors;
    unsigned long long ids[2];
} worker_t;

static pthread_barrier_t start_line;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    CUcontext mine = NULL, cur = NULL;
    CUkernel k;
    if (simcuda_current_context() != NULL) /* fact 7: a new thread starts empty */
        w->errors++;
    if (cuCtxCreate(&mine, NULL, 0, w->device) != CUDA_SUCCESS ||
        cuLibraryGetKernel(&k, w->lib, "hk_probe_kernel") != CUDA_SUCCESS) {
        w->errors++;
        return NULL;
    }
    cuCtxGetId(mine, &w->ids[0]);
    pthread_barrier_wait(&start_line);
    for (unsigned i = 0; i < ROUNDS; i++) {
        CUdeviceptr d;
        unsigned value = (unsigned)w->device * 100000u + i, got = 0;
        void *args[] = {&d, &value};
        CUcontext popped;
        if (cuMemAlloc(&d, sizeof value) != CUDA_SUCCESS) {
            w->errors++;
            continue;
        }
        if (cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) != CUDA_SUCCESS ||
            cuMemcpyDtoH(&got, d, sizeof got) != CUDA_SUCCESS || got != value)
            w->errors++;
        /* push the device's primary over our context and pop it again */
        CUcontext prim;
        if (cuDevicePrimaryCtxRetain(&prim, w->device) != CUDA_SUCCESS ||
            cuCtxPushCurrent(prim) != CUDA_SUCCESS || simcuda_current_context() != prim ||
            cuCtxPopCurrent(&popped) != CUDA_SUCCESS || popped != prim ||
            cuDevicePrimaryCtxRelease(w->device) != CUDA_SUCCESS)
            w->errors++;
        if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != mine)
            w->errors++;
        if (cuMemFree(d) != CUDA_SUCCESS)
            w->errors++;
    }
    cuCtxGetId(NULL, &w->ids[1]);
    if (cuCtxDestroy(mine) != CUDA_SUCCESS || simcuda_current_context() != NULL)
        w->errors++;
    return NULL;
}

static void test_two_threads(void)
{
    size_t launches_before = simcuda_launch_count();
    CUlibrary lib;
    OK(cuLibraryLoadData(&lib, probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CUcontext main_ctx;
    OK(cuCtxCreate(&main_ctx, NULL, 0, 0));
    worker_t w[2] = {{.device = 0, .lib = lib}, {.device = 1, .lib = lib}};
    pthread_t t[2];
    CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&start_line, NULL, 2), 0);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start_line);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(w[i].errors, 0);
        CU_ASSERT_EQUAL(w[i].ids[0], w[i].ids[1]);
    }
    CU_ASSERT_NOT_EQUAL(w[0].ids[0], w[1].ids[0]);
    /* the workers' pushes and pops never touched this thread's stack */
    CU_ASSERT_PTR_EQUAL(simcuda_current_context(), main_ctx);
    CU_ASSERT_EQUAL(simcuda_launch_count() - launches_before, 2 * ROUNDS);
    CU_ASSERT_EQUAL(simcuda_live_allocations(), 0);
    CU_ASSERT_EQUAL(simcuda_primary_refcount(0), 0);
    CU_ASSERT_EQUAL(simcuda_primary_refcount(1), 0);
    OK(cuCtxDestroy(main_ctx));
    OK(cuLibraryUnload(lib));
    clear_stack();
}

/* ---- launch log and emulation outcomes ---- */

static void test_launch_log(void)
{
    CUcontext c0, c1;
    CUlibrary lib, bad;
    CUkernel k, kbad;
    CUstream s;
    CUdeviceptr d0, d1;
    unsigned value = 42;
    simcuda_reset_counters();
    CU_ASSERT_EQUAL(simcuda_launch_count(), 0);
    OK(cuLibraryLoadData(&lib, probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryLoadData(&bad, noemu_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_probe_kernel"));
    OK(cuLibraryGetKernel(&kbad, bad, "kernel_without_emulation"));
    CU_ASSERT_EQUAL(cuLibraryGetKernel(&kbad, bad, "hk_probe"), CUDA_ERROR_NOT_FOUND);
    OK(cuCtxCreate(&c1, NULL, 0, 1));
    OK(cuMemAlloc(&d1, 4));
    OK(cuCtxCreate(&c0, NULL, 0, 0));
    OK(cuMemAlloc(&d0, 4));
    OK(cuStreamCreate(&s, 0));

    void *args0[] = {&d0, &value};
    void *args1[] = {&d1, &value};
    OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, s, args0, NULL));
    /* memory of device 1 in a device-0 launch: an illegal address */
    CU_ASSERT_EQUAL(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args1, NULL),
                    CUDA_ERROR_ILLEGAL_ADDRESS);
    CU_ASSERT_EQUAL(cuLaunchKernel((CUfunction)kbad, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
                    CUDA_ERROR_NOT_FOUND);
    CU_ASSERT_EQUAL(simcuda_launch_count(), 3);
    simcuda_launch_record_t rec;
    unsigned long long id0;
    OK(cuCtxGetId(c0, &id0));
    CU_ASSERT_EQUAL_FATAL(simcuda_launch_get(0, &rec), 0);
    CU_ASSERT_STRING_EQUAL(rec.name, "hk_probe_kernel");
    CU_ASSERT_PTR_EQUAL(rec.ctx, c0);
    CU_ASSERT_EQUAL(rec.ctx_id, id0);
    CU_ASSERT_EQUAL(rec.device, 0);
    CU_ASSERT_PTR_EQUAL(rec.stream, s);
    CU_ASSERT_EQUAL(rec.result, CUDA_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(simcuda_launch_get(1, &rec), 0);
    CU_ASSERT_EQUAL(rec.result, CUDA_ERROR_ILLEGAL_ADDRESS);
    CU_ASSERT_PTR_NULL(rec.stream);
    CU_ASSERT_EQUAL_FATAL(simcuda_launch_get(2, &rec), 0);
    CU_ASSERT_STRING_EQUAL(rec.name, "kernel_without_emulation");
    CU_ASSERT_EQUAL(rec.result, CUDA_ERROR_NOT_FOUND);
    CU_ASSERT_EQUAL(simcuda_launch_get(3, &rec), -1);
    unsigned got = 0;
    OK(cuMemcpyDtoH(&got, d0, 4));
    CU_ASSERT_EQUAL(got, 42);

    /* a captured launch is logged when the graph runs, once per replay */
    CUgraph g;
    CUgraphExec x;
    CUstreamCaptureStatus cs;
    value = 7;
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamIsCapturing(s, &cs));
    CU_ASSERT_EQUAL(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, s, args0, NULL));
    value = 8; /* the capture copied 7 */
    OK(cuStreamEndCapture(s, &g));
    CU_ASSERT_EQUAL(simcuda_launch_count(), 3);
    OK(cuGraphInstantiate(&x, g, 0));
    OK(cuGraphDestroy(g)); /* the executable outlives its graph */
    OK(cuGraphLaunch(x, s));
    OK(cuGraphLaunch(x, s));
    CU_ASSERT_EQUAL(simcuda_launch_count(), 5);
    OK(cuMemcpyDtoH(&got, d0, 4));
    CU_ASSERT_EQUAL(got, 7);
    OK(cuGraphExecDestroy(x));

    simcuda_reset_counters();
    CU_ASSERT_EQUAL(simcuda_launch_count(), 0);
    CU_ASSERT_EQUAL(simcuda_call_count("cuLaunchKernel"), 0);
    OK(cuStreamDestroy(s));
    OK(cuMemFree(d0));
    OK(cuCtxDestroy(c0));
    /* destroying a context drops its memory */
    CU_ASSERT_EQUAL(simcuda_live_allocations(), 1);
    OK(cuCtxDestroy(c1));
    CU_ASSERT_EQUAL(simcuda_live_allocations(), 0);
    OK(cuLibraryUnload(lib));
    OK(cuLibraryUnload(bad));
    clear_stack();
}

static void test_images(void)
{
    CUlibrary lib;
    static const unsigned char junk[64] = {1, 2, 3, 4};
    CU_ASSERT_EQUAL(cuLibraryLoadData(&lib, junk, NULL, NULL, 0, NULL, NULL, 0),
                    CUDA_ERROR_INVALID_IMAGE);
    CU_ASSERT_EQUAL(cuLibraryLoadData(&lib, NULL, NULL, NULL, 0, NULL, NULL, 0),
                    CUDA_ERROR_INVALID_VALUE);
    /* a minimal fatbin: magic, version 1, header size 16, 64 bytes of entries;
     * one entry: a 16-byte header (kind 1, header size 16, 48 bytes of
     * payload), then the payload holding the name */
    unsigned char fat[16 + 64] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 64};
    fat[16] = 1, fat[20] = 16, fat[24] = 48;
    memcpy(fat + 36, "hk_probe_kernel", 16);
    CUkernel k;
    OK(cuLibraryLoadData(&lib, fat, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_probe_kernel"));
    CU_ASSERT_EQUAL(cuLibraryGetKernel(&k, lib, "probe_kernel"), CUDA_ERROR_NOT_FOUND);
    OK(cuLibraryUnload(lib));
    CU_ASSERT_EQUAL(cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
}

/* ---- run-time emulations, JIT, attributes ---- */

static CUresult emu_write_one(const simcuda_launch_t *l, void **params)
{
    unsigned *out = *(unsigned **)params[0];
    CUresult r = simcuda_emu_check(l, out, sizeof *out);
    if (r == CUDA_SUCCESS)
        *out = 1;
    return r;
}

static CUresult emu_write_two(const simcuda_launch_t *l, void **params)
{
    unsigned *out = *(unsigned **)params[0];
    CUresult r = simcuda_emu_check(l, out, sizeof *out);
    if (r == CUDA_SUCCESS)
        *out = 2;
    return r;
}

static void test_registered_emulation(void)
{
    CUdevice d;
    CUcontext c;
    CUlibrary lib;
    CUkernel k;
    CUdeviceptr out;
    unsigned got = 0;
    OK(cuDeviceGet(&d, 0));
    OK(cuCtxCreate(&c, NULL, 0, d));
    OK(cuMemAlloc(&out, sizeof got));
    OK(cuLibraryLoadData(&lib, noemu_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "kernel_without_emulation"));
    simcuda_emu_entry_t e = SIMCUDA_EMU_ENTRY("kernel_without_emulation", emu_write_one,
                                              sizeof(void *));
    CU_ASSERT_EQUAL(simcuda_emu_register(&e), 0);
    void *args[] = {&out};
    OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuMemcpyDtoH(&got, out, sizeof got));
    CU_ASSERT_EQUAL(got, 1);
    e.fn = emu_write_two; /* a later registration replaces it */
    CU_ASSERT_EQUAL(simcuda_emu_register(&e), 0);
    OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuMemcpyDtoH(&got, out, sizeof got));
    CU_ASSERT_EQUAL(got, 2);
    e.fn = NULL;
    CU_ASSERT_EQUAL(simcuda_emu_register(&e), -1);
    CU_ASSERT_EQUAL(simcuda_emu_register(NULL), -1);
    OK(cuLibraryUnload(lib));
    OK(cuMemFree(out));
    OK(cuCtxDestroy(c));
    clear_stack();
}

static void test_jit_log(void)
{
    static const char bad[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry k()\n{\n\ta syntax error;\n}\n";
    char err[256], info[64] = "x";
    CUjit_option opts[4] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *vals[4] = {err, (void *)(uintptr_t)sizeof err, info, (void *)(uintptr_t)sizeof info};
    CUlibrary lib;
    CU_ASSERT_EQUAL(cuLibraryLoadData(&lib, bad, opts, vals, 4, NULL, NULL, 0),
                    CUDA_ERROR_INVALID_PTX);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 6; error   : syntax error"));
    CU_ASSERT_EQUAL((size_t)(uintptr_t)vals[1], strlen(err) + 1);
    CU_ASSERT_STRING_EQUAL(info, "");
    vals[1] = (void *)(uintptr_t)8; /* a short buffer is cut, NUL-terminated */
    CU_ASSERT_EQUAL(cuLibraryLoadData(&lib, bad, opts, vals, 2, NULL, NULL, 0),
                    CUDA_ERROR_INVALID_PTX);
    CU_ASSERT_EQUAL(strlen(err), 7);
    CU_ASSERT_EQUAL(cuLibraryLoadData(&lib, bad, NULL, NULL, 0, NULL, NULL, 0),
                    CUDA_ERROR_INVALID_PTX);
    CU_ASSERT_EQUAL(simcuda_live_libraries(), 0);
    vals[1] = (void *)(uintptr_t)sizeof err;
    OK(cuLibraryLoadData(&lib, probe_ptx, opts, vals, 4, NULL, NULL, 0));
    OK(cuLibraryUnload(lib));
}

static void test_kernel_attributes(void)
{
    CUlibrary lib;
    CUkernel k;
    CUdevice d;
    int v = -1;
    OK(cuDeviceGet(&d, 1));
    OK(cuLibraryLoadData(&lib, probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, lib, "hk_probe_kernel"));
    OK(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, d));
    CU_ASSERT_EQUAL(v, 1024);
    OK(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, k, d));
    CU_ASSERT(v > 0);
    CU_ASSERT_EQUAL(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX, k, d),
                    CUDA_ERROR_INVALID_VALUE);
    CU_ASSERT_EQUAL(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 99),
                    CUDA_ERROR_INVALID_DEVICE);
    OK(cuLibraryUnload(lib));
    CU_ASSERT_EQUAL(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, k, d),
                    CUDA_ERROR_INVALID_HANDLE);
}

/* ---- fact 19: an unload waits for a held launch; nothing else does ---- */

typedef struct unloader {
    CUlibrary lib;
    CUresult r;
    int done;
} unloader_t;

static void *unload_thread(void *arg)
{
    unloader_t *u = arg;
    u->r = cuLibraryUnload(u->lib);
    __atomic_store_n(&u->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_unload_waits_for_held_launch(void)
{
    CUcontext c;
    CUlibrary held, other;
    CUkernel k, ko;
    CUdeviceptr out;
    unsigned value = 5, got = 0;
    OK(cuCtxCreate(&c, NULL, 0, 0));
    OK(cuMemAlloc(&out, sizeof got));
    OK(cuLibraryLoadData(&held, probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryLoadData(&other, probe_ptx, NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&k, held, "hk_probe_kernel"));
    OK(cuLibraryGetKernel(&ko, other, "hk_probe_kernel"));
    void *args[] = {&out, &value};
    simcuda_hold_launches(1);
    OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuLaunchKernel((CUfunction)ko, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL)); /* not held */
    OK(cuLibraryUnload(other)); /* its launch ended: no wait */

    unloader_t u = {held, CUDA_ERROR_UNKNOWN, 0};
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, unload_thread, &u), 0);
    for (int i = 0; i < 5000 && simcuda_unloads_waiting() == 0; i++)
        usleep(1000);
    CU_ASSERT_EQUAL(simcuda_unloads_waiting(), 1);
    /* Meanwhile every other call goes on. */
    OK(cuMemcpyDtoH(&got, out, sizeof got));
    CU_ASSERT_EQUAL(got, 5);
    CU_ASSERT_EQUAL(__atomic_load_n(&u.done, __ATOMIC_ACQUIRE), 0);
    simcuda_finish_launches();
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(u.r, CUDA_SUCCESS);
    CU_ASSERT_EQUAL(simcuda_unloads_waiting(), 0);
    CU_ASSERT_EQUAL(cuLibraryUnload(held), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemFree(out));
    OK(cuCtxDestroy(c));
    clear_stack();
}

typedef struct pauser {
    CUcontext c;
    CUcontext seen;
    CUresult r;
    int done;
} pauser_t;

static void *paused_query(void *arg)
{
    pauser_t *p = arg;
    CU_ASSERT_EQUAL(cuCtxPushCurrent(p->c), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(simcuda_pause_next("cuCtxGetCurrent"), 0);
    p->r = cuCtxGetCurrent(&p->seen);
    __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&p->seen), CUDA_SUCCESS);
    return NULL;
}

/* A paused call waits at its start until resumed; only that one call of that
 * thread waits, and every other call, of any thread, goes on meanwhile. */
static void test_paused_call(void)
{
    CUcontext c, seen = NULL;
    OK(cuCtxCreate(&c, NULL, 0, 0));
    CUcontext popped;
    OK(cuCtxPopCurrent(&popped));
    CU_ASSERT_EQUAL(simcuda_pause_next("cuNoSuchEntry"), -1);
    CU_ASSERT_EQUAL(simcuda_wait_paused(1, 10), -1); /* nothing waits */
    pauser_t p = {c, NULL, CUDA_ERROR_UNKNOWN, 0};
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, paused_query, &p), 0);
    CU_ASSERT_EQUAL(simcuda_wait_paused(1, 5000), 0);
    unsigned long before = simcuda_call_count("cuCtxGetCurrent");
    OK(cuCtxGetCurrent(&seen)); /* this thread's call goes on */
    CU_ASSERT_PTR_NULL(seen);
    CU_ASSERT_EQUAL(simcuda_call_count("cuCtxGetCurrent"), before + 1);
    usleep(20000);
    CU_ASSERT_EQUAL(__atomic_load_n(&p.done, __ATOMIC_ACQUIRE), 0);
    simcuda_resume();
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(p.r, CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(p.seen, c);
    CU_ASSERT_EQUAL(simcuda_wait_paused(1, 10), -1);
    OK(cuCtxDestroy(c));
    clear_stack();
}

typedef struct entry_pauser {
    const char *entry;
    int done;
} entry_pauser_t;

static void *paused_entry(void *arg)
{
    entry_pauser_t *p = arg;
    int v = 0;
    CU_ASSERT_EQUAL(simcuda_pause_next(p->entry), 0);
    CUresult r = strcmp(p->entry, "cuDriverGetVersion") == 0 ? cuDriverGetVersion(&v)
                                                             : cuDeviceGetCount(&v);
    CU_ASSERT_EQUAL(r, CUDA_SUCCESS);
    __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* simcuda_resume_entry lets one entry's waiting calls go on, not another's. */
static void test_resume_entry(void)
{
    entry_pauser_t a = {"cuDriverGetVersion", 0}, b = {"cuDeviceGetCount", 0};
    pthread_t ta, tb;
    CU_ASSERT_EQUAL(simcuda_resume_entry("cuNoSuchEntry"), -1);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&ta, NULL, paused_entry, &a), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&tb, NULL, paused_entry, &b), 0);
    CU_ASSERT_EQUAL(simcuda_wait_paused(2, 5000), 0);
    CU_ASSERT_EQUAL(simcuda_resume_entry("cuDeviceGetCount"), 0);
    pthread_join(tb, NULL);
    CU_ASSERT_EQUAL(__atomic_load_n(&b.done, __ATOMIC_ACQUIRE), 1);
    usleep(20000);
    CU_ASSERT_EQUAL(__atomic_load_n(&a.done, __ATOMIC_ACQUIRE), 0);
    CU_ASSERT_EQUAL(simcuda_wait_paused(1, 10), 0); /* still waiting */
    CU_ASSERT_EQUAL(simcuda_resume_entry("cuDriverGetVersion"), 0);
    pthread_join(ta, NULL);
    CU_ASSERT_EQUAL(__atomic_load_n(&a.done, __ATOMIC_ACQUIRE), 1);
    CU_ASSERT_EQUAL(simcuda_wait_paused(1, 10), -1);
}

static double seconds_of_version_call(void)
{
    struct timespec t0, t1;
    int v = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU_ASSERT_EQUAL(cuDriverGetVersion(&v), CUDA_SUCCESS);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

static double other_thread_took;

static void *version_call_thread(void *arg)
{
    (void)arg;
    other_thread_took = seconds_of_version_call();
    return NULL;
}

/* simcuda_slow_calls slows the calling thread's calls of one entry, until
 * set to 0, and no other thread's. */
static void test_slow_calls(void)
{
    CU_ASSERT_EQUAL(simcuda_slow_calls("cuNoSuchEntry", 1000), -1);
    CU_ASSERT_EQUAL(simcuda_slow_calls("cuDriverGetVersion", 300000), 0);
    CU_ASSERT(seconds_of_version_call() >= 0.3);
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, version_call_thread, NULL), 0);
    pthread_join(t, NULL);
    CU_ASSERT(other_thread_took < 0.3);
    CU_ASSERT_EQUAL(simcuda_slow_calls("cuDriverGetVersion", 0), 0);
    CU_ASSERT(seconds_of_version_call() < 0.3);
}

int hk_test_register(void)
{
    if (getenv("HK_SIMCUDA_ENV_CHILD"))
        exit(env_child());
    if (!getenv("SIMCUDA_DEVICES"))
        setenv("SIMCUDA_DEVICES", "2", 1); /* the tests use devices 0 and 1 */
    CU_pSuite s = hk_test_suite("simcuda", init_suite, NULL);
    static const hk_test_case_t tests[] = {
        {"fail the k-th call, then succeed again", test_fail_kth_call},
        {"repeated failures; live blocks, libraries, contexts, stack depth",
         test_fail_repeat_and_counts},
        {"versioned symbols count under one entry name", test_versioned_names_count_once},
        {"SIMCUDA_FAIL and SIMCUDA_QUIET_LOADS_US from the environment", test_fail_from_env},
        {"primary reference counts and the runtime-like retain", test_refcounts},
        {"two threads with their own context stacks at once", test_two_threads},
        {"launch log, emulation errors, graph replay", test_launch_log},
        {"image formats and kernel names", test_images},
        {"emulations registered at run time, replaced", test_registered_emulation},
        {"JIT: PTX with a syntax error fails with a log", test_jit_log},
        {"kernel attributes", test_kernel_attributes},
        {"an unload waits for a held launch of its library, nothing else does",
         test_unload_waits_for_held_launch},
        {"a paused call waits until resumed, nothing else does", test_paused_call},
        {"resuming one entry's paused calls leaves another's waiting", test_resume_entry},
        {"slowed calls: the asking thread's, of one entry, until set to 0", test_slow_calls},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    return 0;
}
