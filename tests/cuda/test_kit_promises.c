/* [thread-safe] promises of the kit (plugin_api/hk_kit.h) that its plugins
 * only ever reach from one thread at a time, called here directly from 8
 * threads at once: opening the driver, taking entry points, the fork watch,
 * giving a primary retain back, and the memory kept between handles
 * (hk_kit_keep_block, hk_kit_take_block), whose rules are checked first
 * from one thread. This program links libhkkit.a as a plugin does; on the
 * simulated driver the primary's retain count and the live allocations are
 * checked to come back to where they were. */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#include "hk_crowd.h"
#include "hk_kit.h"
#include "hk_test.h"

static size_t (*live)(void); /* simcuda_live_allocations; NULL on a GPU */

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
    /* The primary stays active throughout (as under the runtime): the
     * promise is about the give-back from many threads, not about building
     * and tearing the context down at every round */
    CUdevice dev;
    CUcontext keep = NULL;
    CU_ASSERT_EQUAL_FATAL(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(cuDevicePrimaryCtxRetain(&keep, dev), CUDA_SUCCESS);
    int before = refcount ? refcount(0) : 0;
    hk_crowd_t run = {.shared = NULL};
    hk_crowd_run(&run, THREADS, kit_worker);
    if (refcount)
        CU_ASSERT_EQUAL(refcount(0), before); /* every retain given back once */
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
}

/* ---- memory kept between handles ---- */

/* A binding of device 0's primary (no arm or release of its own) and its
 * context ID; the primary is current on return. */
static hk_kit_bind_t *bound(unsigned long long *id)
{
    static const hk_kit_ops_t none = {NULL, NULL, NULL};
    hk_kit_bind_t *b = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_kit_driver_load(CUDA_VERSION), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_kit_bind(0, &none, NULL, &b), HK_STATUS_OK);
    *id = hk_kit_context_id(b);
    CU_ASSERT_FATAL(*id != 0);
    CU_ASSERT_EQUAL_FATAL(cuCtxPushCurrent(hk_kit_context(b)), CUDA_SUCCESS);
    return b;
}

static void unbound(hk_kit_bind_t *b)
{
    CUcontext was;
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&was), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(hk_kit_unbind(b), HK_STATUS_OK);
}

static hk_kit_block_t device_block(size_t size)
{
    CUdeviceptr p = 0;
    CU_ASSERT_EQUAL(cuMemAlloc(&p, size), CUDA_SUCCESS);
    hk_kit_block_t blk = {HK_KIT_BLOCK_DEVICE, size, p, NULL};
    return blk;
}

/* Kept up to the limit, then refused (the caller keeps the block); taken by
 * incarnation, kind and size alone; malformed blocks refused; a trim frees
 * every kept block, and nothing else. */
static void test_kept_rules(void)
{
    unsigned long long id;
    hk_kit_bind_t *b = bound(&id);
    CU_ASSERT_EQUAL(hk_kit_trim(), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_kit_kept_blocks(), 0);
    size_t base = live ? live() : 0;
    hk_kit_block_t blk = device_block(512), got;
    hk_kit_block_t zero = {HK_KIT_BLOCK_DEVICE, 0, blk.dev, NULL};
    hk_kit_block_t mixed = {HK_KIT_BLOCK_DEVICE, 512, blk.dev, &got};
    hk_kit_block_t nohost = {HK_KIT_BLOCK_HOST, 64, 0, NULL};
    hk_kit_block_t badkind = {(hk_kit_block_kind_t)7, 512, blk.dev, NULL};
    CU_ASSERT_EQUAL(hk_kit_keep_block(NULL, id, &blk), 0);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, 0, &blk), 0);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, NULL), 0);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &zero), 0);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &mixed), 0);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &nohost), 0);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &badkind), 0);
    CU_ASSERT_EQUAL(hk_kit_kept_blocks(), 0);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &blk), 1);
    CU_ASSERT_EQUAL(hk_kit_take_block(id, HK_KIT_BLOCK_DEVICE, 256, &got), 0);
    CU_ASSERT_EQUAL(got.dev, 0);
    CU_ASSERT_EQUAL(hk_kit_take_block(id, HK_KIT_BLOCK_HOST, 512, &got), 0);
    CU_ASSERT_EQUAL(hk_kit_take_block(id + 1, HK_KIT_BLOCK_DEVICE, 512, &got), 0);
    CU_ASSERT_EQUAL(hk_kit_take_block(id, HK_KIT_BLOCK_DEVICE, 512, NULL), 0);
    CU_ASSERT_EQUAL(hk_kit_take_block(id, HK_KIT_BLOCK_DEVICE, 512, &got), 1);
    CU_ASSERT_EQUAL(got.dev, blk.dev);
    CU_ASSERT_EQUAL(got.size, 512);
    CU_ASSERT_EQUAL(hk_kit_take_block(id, HK_KIT_BLOCK_DEVICE, 512, &got), 0); /* once */
    CU_ASSERT_EQUAL(cuMemFree(blk.dev), CUDA_SUCCESS);
    /* the limit: the block past it stays the caller's */
    for (int i = 0; i < HK_KIT_KEPT_BLOCKS; i++) {
        blk = device_block(1024);
        CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &blk), 1);
    }
    CU_ASSERT_EQUAL(hk_kit_kept_blocks(), HK_KIT_KEPT_BLOCKS);
    void *host = NULL;
    CU_ASSERT_EQUAL(cuMemHostAlloc(&host, 64, 0), CUDA_SUCCESS);
    hk_kit_block_t hblk = {HK_KIT_BLOCK_HOST, 64, 0, host};
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &hblk), 0);
    /* a host block kept once there is room, taken back by its kind */
    CU_ASSERT_EQUAL(hk_kit_take_block(id, HK_KIT_BLOCK_DEVICE, 1024, &got), 1);
    CU_ASSERT_EQUAL(cuMemFree(got.dev), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &hblk), 1);
    CU_ASSERT_EQUAL(hk_kit_take_block(id, HK_KIT_BLOCK_HOST, 64, &got), 1);
    CU_ASSERT_PTR_EQUAL(got.host, host);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &hblk), 1);
    /* the trim frees the 64 kept, in their context */
    CU_ASSERT_EQUAL(hk_kit_trim(), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_kit_kept_blocks(), 0);
    if (live)
        CU_ASSERT_EQUAL(live(), base);
    unbound(b);
    CU_ASSERT_EQUAL(hk_kit_trim(), HK_STATUS_OK);
}

/* A block kept before a reset of the primary went with its incarnation:
 * the next keep in the new incarnation forgets it, a take never gives it
 * out, and a trim does not free it again. */
static void test_kept_reset(void)
{
    unsigned long long id, id2;
    hk_kit_bind_t *b = bound(&id);
    hk_kit_block_t blk = device_block(512), got;
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id, &blk), 1);
    CUdevice dev;
    CUcontext was;
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&was), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
    CUcontext p = NULL;
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRetain(&p, dev), CUDA_SUCCESS); /* a new incarnation */
    CU_ASSERT_EQUAL(cuCtxPushCurrent(p), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuCtxGetId(p, &id2), CUDA_SUCCESS);
    CU_ASSERT_NOT_EQUAL(id2, id);
    CU_ASSERT_EQUAL(hk_kit_take_block(id2, HK_KIT_BLOCK_DEVICE, 512, &got), 0);
    size_t base = live ? live() : 0;
    hk_kit_block_t now = device_block(512);
    CU_ASSERT_EQUAL(hk_kit_keep_block(b, id2, &now), 1);
    CU_ASSERT_EQUAL(hk_kit_kept_blocks(), 1); /* the old one forgotten */
    unsigned long (*calls)(const char *);
    *(void **)&calls = dlsym(RTLD_DEFAULT, "simcuda_call_count");
    unsigned long frees = calls ? calls("cuMemFree") : 0;
    CU_ASSERT_EQUAL(hk_kit_trim(), HK_STATUS_OK);
    if (calls)
        CU_ASSERT_EQUAL(calls("cuMemFree"), frees + 1);
    if (live)
        CU_ASSERT_EQUAL(live(), base);
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&was), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(hk_kit_unbind(b), HK_STATUS_OK);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(hk_kit_trim(), HK_STATUS_OK);
}

/* 8 threads keep and take blocks of one context at once, each its own size:
 * every take gives a block of the taker's size that the taker kept (never
 * one another thread holds), and nothing is lost: the trim brings the live
 * allocations back to where they were. */
typedef struct kept_run {
    hk_kit_bind_t *b;
    unsigned long long id;
} kept_run_t;

static void *kept_worker(void *p)
{
    arg_t *a = p;
    const kept_run_t *k = a->run->shared;
    size_t size = 256 + 16 * (size_t)a->id;
    CUdeviceptr mine[ROUNDS];
    int n = 0, r = -1;
    EXPECT(cuCtxPushCurrent(hk_kit_context(k->b)) == CUDA_SUCCESS, "push the context");
    pthread_barrier_wait(&a->run->start);
    for (r = 0; r < ROUNDS; r++) {
        hk_kit_block_t blk = {HK_KIT_BLOCK_DEVICE, size, 0, NULL}, got;
        if (r % 3 != 2) {
            EXPECT(cuMemAlloc(&blk.dev, size) == CUDA_SUCCESS, "cuMemAlloc");
            if (hk_kit_keep_block(k->b, k->id, &blk))
                mine[n++] = blk.dev;
            else
                EXPECT(cuMemFree(blk.dev) == CUDA_SUCCESS, "cuMemFree of a block not kept");
            continue;
        }
        if (!hk_kit_take_block(k->id, HK_KIT_BLOCK_DEVICE, size, &got))
            continue;
        int found = -1;
        for (int i = 0; i < n && found < 0; i++)
            if (mine[i] == got.dev)
                found = i;
        EXPECT(found >= 0 && got.size == size, "take: a block this thread did not keep");
        if (found >= 0)
            mine[found] = mine[--n];
        EXPECT(cuMemFree(got.dev) == CUDA_SUCCESS, "cuMemFree of a block taken");
    }
    CUcontext was;
    EXPECT(cuCtxPopCurrent(&was) == CUDA_SUCCESS, "pop");
    return NULL;
}

static void test_kept_from_threads(void)
{
    kept_run_t k;
    k.b = bound(&k.id);
    CU_ASSERT_EQUAL(hk_kit_trim(), HK_STATUS_OK);
    size_t base = live ? live() : 0;
    hk_crowd_t run = {.shared = &k};
    hk_crowd_run(&run, THREADS, kept_worker);
    CU_ASSERT(hk_kit_kept_blocks() <= HK_KIT_KEPT_BLOCKS);
    CU_ASSERT_EQUAL(hk_kit_trim(), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_kit_kept_blocks(), 0);
    if (live)
        CU_ASSERT_EQUAL(live(), base);
    unbound(k.b);
    CU_ASSERT_EQUAL(hk_kit_trim(), HK_STATUS_OK);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk_kit.h from 8 threads", NULL, NULL);
    CU_pTest t = hk_test_add(s, "driver_load, driver_take, fork_watch, forked, "
                                "give_back_primary: every answer right",
                             test_kit_from_threads);
    CU_pTest kt[] = {
        hk_test_add(s, "hk_kit_keep_block, hk_kit_take_block: every answer right, nothing "
                       "lost", test_kept_from_threads),
        hk_test_add(s, "kept blocks: the limit, the match, malformed blocks, the trim",
                    test_kept_rules),
        hk_test_add(s, "kept blocks: one kept before a reset is forgotten, not freed",
                    test_kept_reset),
    };
    *(void **)&live = dlsym(RTLD_DEFAULT, "simcuda_live_allocations");
    int n = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 1) {
        hk_test_skip(t, "needs a CUDA driver with a device");
        for (size_t i = 0; i < sizeof kt / sizeof kt[0]; i++)
            hk_test_skip(kt[i], "needs a CUDA driver with a device");
    }
    return 0;
}
