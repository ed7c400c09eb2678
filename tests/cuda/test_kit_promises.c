/* [thread-safe] promises of the kit (plugin_api/hk_kit.h) that its plugins
 * only ever reach from one thread at a time, called here directly from 8
 * threads at once: opening the driver, taking entry points, the fork watch,
 * and giving a primary retain back. This program links libhkkit.a as a
 * plugin does; on the simulated driver the primary's retain count is
 * checked to come back to where it was. */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#include "hk_crowd.h"
#include "hk_kit.h"
#include "hk_test.h"

#define THREADS 8
#define ROUNDS 200

typedef hk_crowd_arg_t arg_t;
#define EXPECT HK_CROWD_EXPECT

/* The first thread's entry points, which every other take must match. */
static void *first_get, *first_count;

static void *kit_worker(void *p)
{
    arg_t *a = p;
    pthread_barrier_wait(&a->run->start);
    for (int r = 0; r < ROUNDS; r++) {
        void *get = NULL, *count = NULL;
        const hk_kit_entry_t entries[] = {{"cuDeviceGet", 2000, &get},
                                          {"cuDeviceGetCount", 2000, &count}};
        EXPECT(hk_kit_driver_load(CUDA_VERSION) == HK_STATUS_OK, "driver_load");
        EXPECT(hk_kit_driver_take(entries, 2) == HK_STATUS_OK, "driver_take");
        EXPECT(get == first_get && count == first_count, "driver_take: other entry points");
        hk_kit_fork_watch();
        EXPECT(hk_kit_forked() == 0, "forked outside a fork child");
        CUdevice dev;
        CUcontext ctx = NULL;
        EXPECT(cuDeviceGet(&dev, 0) == CUDA_SUCCESS, "cuDeviceGet");
        EXPECT(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS && ctx, "retain");
        EXPECT(hk_kit_give_back_primary((int)dev) == CUDA_SUCCESS, "give_back_primary");
    }
    return NULL;
}

static void test_kit_from_threads(void)
{
    void *get = NULL, *count = NULL;
    const hk_kit_entry_t entries[] = {{"cuDeviceGet", 2000, &get},
                                      {"cuDeviceGetCount", 2000, &count}};
    CU_ASSERT_EQUAL_FATAL(hk_kit_driver_load(CUDA_VERSION), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_kit_driver_take(entries, 2), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(get);
    CU_ASSERT_PTR_NOT_NULL_FATAL(count);
    first_get = get;
    first_count = count;
    int (*refcount)(int);
    *(void **)&refcount = dlsym(RTLD_DEFAULT, "simcuda_primary_refcount");
    int before = refcount ? refcount(0) : 0;
    hk_crowd_t run = {.shared = NULL};
    hk_crowd_run(&run, THREADS, kit_worker);
    if (refcount)
        CU_ASSERT_EQUAL(refcount(0), before); /* every retain given back once */
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk_kit.h from 8 threads", NULL, NULL);
    CU_pTest t = hk_test_add(s, "driver_load, driver_take, fork_watch, forked, "
                                "give_back_primary: every answer right",
                             test_kit_from_threads);
    int n = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 1)
        hk_test_skip(t, "needs a CUDA driver with a device");
    return 0;
}
