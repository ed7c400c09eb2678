/* Conformance: fact 30, what a continuous service starves. Eight threads run
 * a service in device 0's primary context, each on its own non-blocking
 * stream, without pause: a 256 KiB copy in from pageable memory, a launch, a
 * 64-byte copy out to pageable memory, a stream synchronise. The test thread
 * makes one call at a time; a watchdog pauses the service once a call has
 * taken 2 s. A call that returned only after that pause, or that took more
 * than SV_SLOW_US without it, was starved: cuMemFreeHost, which waits for
 * the service to pause, got through after 1.1 s once on an H200 (the
 * non-starved calls take microseconds to a few milliseconds).
 *
 * On a GPU only: the simulated driver's model of this fact is checked in
 * tests/simcuda (test_simcuda_quiet.c), where a 2 s pause per starved call
 * would cost CI half a minute. Each call runs once (about 30 s in all). */
#include "conf.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hk_test.h"

#define SV_THREADS 8
#define SV_COPY (256 << 10)
#define SV_WATCHDOG_US 2000000L
#define SV_SLOW_US 200000L

typedef struct sv {
    CUcontext ctx;
    CUfunction f;
    CUstream s[SV_THREADS];
    CUdeviceptr x[SV_THREADS];
    char *host[SV_THREADS];
    pthread_t th[SV_THREADS];
    int next, stop, paused; /* atomic */
    unsigned long rounds;   /* atomic */
    CUresult r;             /* atomic: the first failure of a service call */
} sv_t;

static sv_t sv;

static long sv_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000L;
}

static void *sv_thread(void *arg)
{
    (void)arg;
    int i = __atomic_fetch_add(&sv.next, 1, __ATOMIC_RELAXED);
    unsigned value = 300u + (unsigned)i;
    char out[64];
    void *args[] = {&sv.x[i], &value};
    CUresult r = cuCtxSetCurrent(sv.ctx);
    while (r == CUDA_SUCCESS && !__atomic_load_n(&sv.stop, __ATOMIC_ACQUIRE)) {
        if (__atomic_load_n(&sv.paused, __ATOMIC_ACQUIRE)) {
            usleep(100);
            continue;
        }
        r = cuMemcpyHtoDAsync(sv.x[i], sv.host[i], SV_COPY, sv.s[i]);
        if (r == CUDA_SUCCESS)
            r = cuLaunchKernel(sv.f, 1, 1, 1, 1, 1, 1, 0, sv.s[i], args, NULL);
        if (r == CUDA_SUCCESS)
            r = cuMemcpyDtoHAsync(out, sv.x[i], sizeof out, sv.s[i]);
        if (r == CUDA_SUCCESS)
            r = cuStreamSynchronize(sv.s[i]);
        __atomic_add_fetch(&sv.rounds, 1, __ATOMIC_RELAXED);
    }
    if (r != CUDA_SUCCESS)
        __atomic_store_n(&sv.r, r, __ATOMIC_RELAXED);
    cuCtxSetCurrent(NULL);
    return NULL;
}

static int wd_done; /* atomic */

static void *sv_watchdog(void *arg)
{
    (void)arg;
    long t0 = sv_now_us();
    while (!__atomic_load_n(&wd_done, __ATOMIC_ACQUIRE)) {
        if (sv_now_us() - t0 > SV_WATCHDOG_US)
            __atomic_store_n(&sv.paused, 1, __ATOMIC_RELEASE);
        usleep(1000);
    }
    return NULL;
}

/* The test thread's state for the calls below (device 0's primary current). */
static struct {
    CUstream mine, made;
    CUdeviceptr block, word;
    CUlibrary probe, fresh, never;
    CUmodule mod;
    void *hostp;
    char *reg;
} op;

static CUresult o_ctx_sync(void) { return cuCtxSynchronize(); }
static CUresult o_alloc(void) { return cuMemAlloc(&op.block, 1 << 20); }
static CUresult o_free(void) { return cuMemFree(op.block); }
static CUresult o_free_async(void)
{
    CUresult r = cuMemFreeAsync(op.block, op.mine);
    return r == CUDA_SUCCESS ? cuStreamSynchronize(op.mine) : r;
}
static CUresult o_ordered(void)
{
    CUdeviceptr p = 0;
    CUresult r = cuMemAllocAsync(&p, 1 << 20, op.mine);
    if (r == CUDA_SUCCESS)
        r = cuMemFreeAsync(p, op.mine);
    return r == CUDA_SUCCESS ? cuStreamSynchronize(op.mine) : r;
}
static CUresult o_stream_create(void) { return cuStreamCreate(&op.made, CU_STREAM_NON_BLOCKING); }
static CUresult o_stream_destroy(void) { return cuStreamDestroy(op.made); }
static CUresult o_event(void)
{
    CUevent e;
    CUresult r = cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    return r == CUDA_SUCCESS ? cuEventDestroy(e) : r;
}
static CUresult o_stream_sync(void)
{
    unsigned value = 7;
    void *args[] = {&op.word, &value};
    CUresult r = cuLaunchKernel(sv.f, 1, 1, 1, 1, 1, 1, 0, op.mine, args, NULL);
    return r == CUDA_SUCCESS ? cuStreamSynchronize(op.mine) : r;
}
static CUresult o_lib_load(void)
{
    return cuLibraryLoadData(&op.fresh, hk__conf_fatbin, NULL, NULL, 0, NULL, NULL, 0);
}
static CUresult o_first_function(void)
{
    CUkernel k;
    CUfunction f;
    CUresult r = cuLibraryGetKernel(&k, op.fresh, "hk_probe_kernel");
    return r == CUDA_SUCCESS ? cuKernelGetFunction(&f, k) : r;
}
static CUresult o_lib_unload_loaded(void) { return cuLibraryUnload(op.fresh); }
static CUresult o_lib_unload_never(void) { return cuLibraryUnload(op.never); }
static CUresult o_module_load(void) { return cuModuleLoadData(&op.mod, hk__conf_fatbin); }
static CUresult o_module_unload(void) { return cuModuleUnload(op.mod); }
static CUresult o_host_alloc(void) { return cuMemAllocHost(&op.hostp, 1 << 20); }
static CUresult o_host_free(void) { return cuMemFreeHost(op.hostp); }
static CUresult o_register(void) { return cuMemHostRegister(op.reg, 1 << 20, 0); }
static CUresult o_unregister(void) { return cuMemHostUnregister(op.reg); }
static CUresult o_retain(void)
{
    CUcontext p;
    CUresult r = cuDevicePrimaryCtxRetain(&p, 0);
    return r == CUDA_SUCCESS ? cuDevicePrimaryCtxRelease(0) : r;
}
static CUresult o_ctx_id(void)
{
    unsigned long long id;
    return cuCtxGetId(NULL, &id);
}

/* In order: each call's objects come from the calls before it. held: the
 * service starves it (2: only with lazy loading; -2: only with eager). */
static const struct sv_op {
    const char *name;
    CUresult (*fn)(void);
    int held;
} sv_ops[] = {
    {"cuCtxSynchronize", o_ctx_sync, 0},
    {"cuMemAlloc", o_alloc, 1},
    {"cuMemFreeAsync of a cuMemAlloc block, cuStreamSynchronize", o_free_async, 0},
    {"cuMemAlloc", o_alloc, 1},
    {"cuMemFree", o_free, 1},
    {"cuMemAllocAsync, cuMemFreeAsync, cuStreamSynchronize", o_ordered, 0},
    {"cuStreamCreate", o_stream_create, 1},
    {"cuStreamDestroy", o_stream_destroy, 1},
    {"cuEventCreate", o_event, 1},
    {"a launch, cuStreamSynchronize of the caller's stream", o_stream_sync, 0},
    {"cuLibraryLoadData", o_lib_load, -2},
    {"first cuKernelGetFunction of a fresh library", o_first_function, 2},
    {"cuLibraryUnload of a library loaded into the context", o_lib_unload_loaded, 1},
    {"cuLibraryUnload of a library never loaded into the context", o_lib_unload_never, -2},
    {"cuModuleLoadData", o_module_load, 1},
    {"cuModuleUnload", o_module_unload, 1},
    {"cuMemAllocHost", o_host_alloc, 1},
    {"cuMemFreeHost", o_host_free, 1},
    {"cuMemHostRegister", o_register, 1},
    {"cuMemHostUnregister", o_unregister, 1},
    {"cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease", o_retain, 0},
    {"cuCtxGetId", o_ctx_id, 0},
};

/* One call under the service: its status, whether it was starved. */
static void sv_run(const struct sv_op *o, int eager)
{
    char line[200];
    pthread_t wd;
    __atomic_store_n(&wd_done, 0, __ATOMIC_RELEASE);
    usleep(20000);
    unsigned long before = __atomic_load_n(&sv.rounds, __ATOMIC_RELAXED);
    if (pthread_create(&wd, NULL, sv_watchdog, NULL) != 0) {
        CU_FAIL("could not start the watchdog");
        return;
    }
    long t0 = sv_now_us();
    CUresult r = o->fn();
    long took = sv_now_us() - t0;
    __atomic_store_n(&wd_done, 1, __ATOMIC_RELEASE);
    pthread_join(wd, NULL);
    int starved = __atomic_load_n(&sv.paused, __ATOMIC_ACQUIRE) || took > SV_SLOW_US;
    __atomic_store_n(&sv.paused, 0, __ATOMIC_RELEASE);
    EXPECT(r, CUDA_SUCCESS);
    int want = o->held == 2 ? !eager : o->held == -2 ? eager : o->held;
    snprintf(line, sizeof line, "fact 30: %s under the service: us (starved: %s)", o->name,
             starved ? "yes" : "no");
    conf_observe_int(line, took);
    if (starved != want)
        fprintf(stderr, "fact 30: %s: starved %d, expected %d (%ld us, %lu service rounds "
                "meanwhile)\n", o->name, starved, want, took,
                __atomic_load_n(&sv.rounds, __ATOMIC_RELAXED) - before);
    CU_ASSERT_EQUAL(starved, want);
}

static int sv_start(void)
{
    CUkernel k;
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&sv.ctx, 0), CUDA_SUCCESS);
    EXPECT_FATAL(cuCtxPushCurrent(sv.ctx), CUDA_SUCCESS);
    EXPECT_FATAL(conf_load_probe(&op.probe, &k), CUDA_SUCCESS);
    EXPECT_FATAL(cuMemAlloc(&op.word, sizeof(unsigned)), CUDA_SUCCESS);
    EXPECT_FATAL(cuKernelGetFunction(&sv.f, k), CUDA_SUCCESS);
    EXPECT_FATAL(cuStreamCreate(&op.mine, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT_FATAL(cuLibraryLoadData(&op.never, hk__conf_fatbin, NULL, NULL, 0, NULL, NULL, 0),
                 CUDA_SUCCESS);
    op.reg = aligned_alloc(4096, 1 << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(op.reg);
    for (int i = 0; i < SV_THREADS; i++) {
        EXPECT_FATAL(cuStreamCreate(&sv.s[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        EXPECT_FATAL(cuMemAlloc(&sv.x[i], SV_COPY), CUDA_SUCCESS);
        sv.host[i] = calloc(1, SV_COPY);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sv.host[i]);
    }
    int n = 0;
    while (n < SV_THREADS && pthread_create(&sv.th[n], NULL, sv_thread, NULL) == 0)
        n++;
    CU_ASSERT_EQUAL(n, SV_THREADS);
    for (int t = 0; t < 5000 && __atomic_load_n(&sv.rounds, __ATOMIC_RELAXED) < 1000; t++)
        usleep(1000);
    CU_ASSERT(__atomic_load_n(&sv.rounds, __ATOMIC_RELAXED) >= 1000);
    return n;
}

/* Fact 30: which calls a service starves (see the file's comment). */
static void fact30_service_starves(void)
{
    const char *loading = getenv("CUDA_MODULE_LOADING");
    int eager = loading && strcmp(loading, "EAGER") == 0;
    memset(&sv, 0, sizeof sv);
    int n = sv_start();
    for (size_t i = 0; i < sizeof sv_ops / sizeof sv_ops[0]; i++)
        sv_run(&sv_ops[i], eager);
    __atomic_store_n(&sv.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < n; i++)
        pthread_join(sv.th[i], NULL);
    EXPECT(__atomic_load_n(&sv.r, __ATOMIC_RELAXED), CUDA_SUCCESS);
    for (int i = 0; i < SV_THREADS; i++) {
        EXPECT(cuStreamDestroy(sv.s[i]), CUDA_SUCCESS);
        EXPECT(cuMemFree(sv.x[i]), CUDA_SUCCESS);
        free(sv.host[i]);
    }
    EXPECT(cuStreamDestroy(op.mine), CUDA_SUCCESS);
    EXPECT(cuMemFree(op.word), CUDA_SUCCESS);
    EXPECT(cuLibraryUnload(op.probe), CUDA_SUCCESS);
    free(op.reg);
    conf_clear_stack();
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

void conf_register_starve(CU_pSuite s)
{
    CU_pTest t = hk_test_add(s, "fact 30: a service starves allocations, frees, streams, "
                                "events, code loads; not ordered frees, syncs, retains",
                             fact30_service_starves);
    if (conf_sim)
        hk_test_skip(t, "needs a GPU (the simulated driver's model of fact 30 is tested in "
                        "tests/simcuda, test_simcuda_quiet.c)");
}
