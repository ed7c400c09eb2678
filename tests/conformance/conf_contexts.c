/* Conformance: context facts 1, 2, 6, 7, 10, 15 and 16 (docs/contexts.md). */
#include "conf.h"

#include <pthread.h>

#include "hk_rt.h"
#include "hk_test.h"

/* Fact 1: after cuInit nothing is current and no primary is active. */
static void fact01_nothing_after_init(void)
{
    CU_ASSERT_PTR_NULL(conf_current());
    for (int d = 0; d < conf_ndev; d++)
        CU_ASSERT_EQUAL(conf_primary_active(d), 0);
}

/* Fact 1, runtime half: cudaGetDevice on such a thread answers 0 and creates
 * nothing. */
static void fact01_runtime_get_device(void)
{
    int dev = -1;
    CU_ASSERT_EQUAL(hk_rt_get_device(&dev), 0);
    CU_ASSERT_EQUAL(dev, 0);
    CU_ASSERT_PTR_NULL(conf_current());
    for (int d = 0; d < conf_ndev; d++)
        CU_ASSERT_EQUAL(conf_primary_active(d), 0);
}

/* Fact 2: retain activates without making current; the last release
 * deactivates; a new retain gives the same pointer with a new ID and the old
 * one is dead (709). */
static void fact02_primary_lifecycle(void)
{
    CUcontext p, again;
    unsigned long long id1 = 0, id2 = 0, id;
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(conf_primary_active(0), 1);
    CU_ASSERT_PTR_NULL(conf_current());
    EXPECT(cuCtxGetId(p, &id1), CUDA_SUCCESS);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(conf_primary_active(0), 0);
    EXPECT(cuCtxGetId(p, &id), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&again, 0), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(again, p);
    EXPECT(cuCtxGetId(again, &id2), CUDA_SUCCESS);
    CU_ASSERT_NOT_EQUAL(id1, id2);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(conf_primary_active(0), 0);
}

/* Fact 6: cuCtxCreate pushes; pop returns it and uncovers the previous one;
 * a destroyed context's ID query gives 709. */
static void fact06_create_push_pop_destroy(void)
{
    CUcontext outer, inner, popped = NULL;
    unsigned long long id;
    EXPECT_FATAL(cuCtxCreate(&outer, NULL, 0, 0), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(conf_current(), outer);
    EXPECT_FATAL(cuCtxCreate(&inner, NULL, 0, conf_ndev - 1), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(conf_current(), inner);
    EXPECT(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(popped, inner);
    CU_ASSERT_PTR_EQUAL(conf_current(), outer);
    EXPECT(cuCtxDestroy(inner), CUDA_SUCCESS);
    EXPECT(cuCtxGetId(inner, &id), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CU_ASSERT_PTR_EQUAL(conf_current(), outer);
    /* destroying the current context also pops it */
    EXPECT(cuCtxDestroy(outer), CUDA_SUCCESS);
    CU_ASSERT_PTR_NULL(conf_current());
    EXPECT(cuCtxGetId(outer, &id), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    conf_observe("cuCtxPopCurrent on an empty stack", cuCtxPopCurrent(&popped));
    conf_clear_stack();
}

static void *fact07_thread(void *arg)
{
    CUcontext *seen = arg;
    if (cuCtxGetCurrent(seen) != CUDA_SUCCESS)
        *seen = (CUcontext)arg; /* a value the test rejects */
    return NULL;
}

/* Fact 7: a new thread starts with no current context. */
static void fact07_new_thread_empty(void)
{
    CUcontext mine, seen = (CUcontext)&seen;
    pthread_t t;
    EXPECT_FATAL(cuCtxCreate(&mine, NULL, 0, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, fact07_thread, &seen), 0);
    pthread_join(t, NULL);
    CU_ASSERT_PTR_NULL(seen);
    CU_ASSERT_PTR_EQUAL(conf_current(), mine);
    EXPECT(cuCtxDestroy(mine), CUDA_SUCCESS);
    conf_clear_stack();
}

/* Fact 10: release without a retain → 201; destroying a primary → 201 and it
 * stays usable. */
static void fact10_primary_misuse(void)
{
    CUcontext p;
    unsigned long long id;
    CUdeviceptr d;
    CU_ASSERT_EQUAL(conf_primary_active(0), 0);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    EXPECT(cuCtxDestroy(p), CUDA_ERROR_INVALID_CONTEXT);
    CU_ASSERT_EQUAL(conf_primary_active(0), 1);
    EXPECT(cuCtxGetId(p, &id), CUDA_SUCCESS);
    EXPECT(cuCtxPushCurrent(p), CUDA_SUCCESS);
    if (EXPECT(cuMemAlloc(&d, 256), CUDA_SUCCESS))
        EXPECT(cuMemFree(d), CUDA_SUCCESS);
    conf_clear_stack();
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(conf_primary_active(0), 0);
}

/* Fact 15: cuCtxSetCurrent(NULL) pops the top, and does nothing on an empty
 * stack. */
static void fact15_set_current_null_pops(void)
{
    CUcontext p0, p1;
    int d1 = conf_ndev > 1 ? 1 : 0;
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    EXPECT_FATAL(cuDevicePrimaryCtxRetain(&p1, d1), CUDA_SUCCESS);
    EXPECT(cuCtxPushCurrent(p0), CUDA_SUCCESS);
    EXPECT(cuCtxPushCurrent(p1), CUDA_SUCCESS);
    EXPECT(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(conf_current(), p0);
    EXPECT(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CU_ASSERT_PTR_NULL(conf_current());
    EXPECT(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CU_ASSERT_PTR_NULL(conf_current());
    EXPECT(cuDevicePrimaryCtxRelease(d1), CUDA_SUCCESS);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

static void *fact16_thread(void *arg)
{
    CUcontext p;
    CUresult *r = arg;
    r[0] = cuDevicePrimaryCtxRetain(&p, 0);
    r[1] = r[0] == CUDA_SUCCESS ? cuCtxSetCurrent(p) : r[0];
    return NULL; /* exits with the primary current */
}

/* Fact 16: a thread that exits with a primary current does not deactivate it. */
static void fact16_thread_exit_keeps_primary(void)
{
    CUresult r[2] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, fact16_thread, r), 0);
    pthread_join(t, NULL);
    EXPECT(r[0], CUDA_SUCCESS);
    EXPECT(r[1], CUDA_SUCCESS);
    CU_ASSERT_EQUAL(conf_primary_active(0), 1);
    EXPECT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS); /* the thread's retain */
    CU_ASSERT_EQUAL(conf_primary_active(0), 0);
}

void conf_register_contexts(CU_pSuite s)
{
    hk_test_add(s, "fact 01: nothing current or active after cuInit", fact01_nothing_after_init);
    CU_pTest t = hk_test_add(s, "fact 01: cudaGetDevice is 0 and creates nothing",
                             fact01_runtime_get_device);
    if (!hk_rt_available())
        hk_test_skip(t, "the CUDA runtime (libcudart.so.13) cannot be loaded here");
    static const hk_test_case_t tests[] = {
        {"fact 02: primary retain/release, same pointer, new ID, old ID 709",
         fact02_primary_lifecycle},
        {"fact 06: cuCtxCreate pushes, pop uncovers, destroyed ID 709",
         fact06_create_push_pop_destroy},
        {"fact 07: a new thread starts with no current context", fact07_new_thread_empty},
        {"fact 10: release without retain 201, cuCtxDestroy(primary) 201", fact10_primary_misuse},
        {"fact 15: cuCtxSetCurrent(NULL) pops the top", fact15_set_current_null_pops},
        {"fact 16: thread exit keeps its current primary active", fact16_thread_exit_keeps_primary},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
