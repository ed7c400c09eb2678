/* hk-cuda without a driver: the plugin loads and negotiates without touching
 * CUDA, and create answers HK_STATUS_NO_DRIVER with the dynamic loader's
 * reason. This program does not link libcuda; it points HK_CUDA_DRIVER at a
 * file that does not exist, so it tests the same thing on every machine. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "hk_test.h"
#include "hkct_plugin.h"

#define MISSING_DRIVER "/nonexistent/libcuda.so.1"

static hkct_plugin_t plug;

static int suite_init(void)
{
    setenv("HK_CUDA_DRIVER", MISSING_DRIVER, 1);
    return hkct_plugin_open(&plug) == 0 ? 0 : -1;
}

static void test_negotiate_answer(void)
{
    CU_ASSERT_STRING_EQUAL(plug.answer.name, "hk-cuda");
    CU_ASSERT_EQUAL(plug.answer.abi_version, HK_ABI_CURRENT);
    CU_ASSERT_EQUAL(plug.vt->size, sizeof(hk_vtable_t));
    const char *name = NULL;
    CU_ASSERT_EQUAL(plug.vt->enum_tables(0, &name), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(name);
    CU_ASSERT_EQUAL(plug.vt->enum_tables(2, &name), HK_STATUS_NOT_FOUND);
    const void *t = (const void *)1;
    CU_ASSERT_EQUAL(plug.vt->get_table("hk.nothing/1", &t), HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NULL(t);
}

static void test_negotiate_refuses_other_major(void)
{
    hk_negotiate_fn fn;
    *(void **)&fn = dlsym(plug.dl, HK_ENTRY_SYMBOL);
    hk_negotiate_request_t req = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1},
                                  HK_ABI_VERSION(2, 0), HK_ABI_VERSION(2, 3), NULL, NULL};
    hk_negotiate_answer_t a = {{HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1}, 0, 0, NULL, NULL, NULL};
    CU_ASSERT_EQUAL(fn(&req, &a), HK_STATUS_ABI_MISMATCH);
    CU_ASSERT_EQUAL(a.abi_version, HK_ABI_CURRENT);
    /* An older host (1.0 only) gets 1.0. */
    req.abi_min = req.abi_max = HK_ABI_VERSION(1, 0);
    CU_ASSERT_EQUAL(fn(&req, &a), HK_STATUS_OK);
    CU_ASSERT_EQUAL(a.abi_version, HK_ABI_VERSION(1, 0));
}

static void test_load_touches_no_driver(void)
{
    /* Loading and negotiating must not have opened any CUDA driver. */
    CU_ASSERT_PTR_NULL(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD));
}

static void test_create_no_driver(void)
{
    hk_handle_t *h = (hk_handle_t *)1;
    CU_ASSERT_EQUAL(plug.vt->handle_create(NULL, &h), HK_STATUS_NO_DRIVER);
    CU_ASSERT_PTR_NULL(h);
    const char *msg = plug.vt->last_error(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, MISSING_DRIVER));
    /* glibc's own reason, as dlerror() words it */
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "No such file or directory"));
    /* A second attempt says the same, and still nothing was loaded. */
    hk_create_info_t ci = {sizeof ci, 1, 0};
    CU_ASSERT_EQUAL(plug.vt->handle_create(&ci, &h), HK_STATUS_NO_DRIVER);
    CU_ASSERT_PTR_NULL(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD));
}

static void test_bad_arguments_without_driver(void)
{
    CU_ASSERT_EQUAL(plug.vt->handle_create(NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(NULL), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(plug.vt->set_stream(NULL, NULL), HK_STATUS_INVALID_HANDLE);
    float a = 1.0f, r = 0.0f;
    CU_ASSERT_EQUAL(plug.blas->saxpy(NULL, 4, &a, &a, 1, &r, 1), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(plug.blas->snrm2(NULL, 4, &a, 1, &r), HK_STATUS_INVALID_HANDLE);
    void *p = NULL;
    CU_ASSERT_EQUAL(plug.mem->alloc(NULL, 16, &p), HK_STATUS_INVALID_HANDLE);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk-cuda without a driver", suite_init, NULL);
    hk_test_add(s, "negotiation answer and tables", test_negotiate_answer);
    hk_test_add(s, "negotiation refuses another major", test_negotiate_refuses_other_major);
    hk_test_add(s, "loading opens no driver", test_load_touches_no_driver);
    hk_test_add(s, "create gives NO_DRIVER with the loader's reason", test_create_no_driver);
    hk_test_add(s, "bad arguments without a driver", test_bad_arguments_without_driver);
    return 0;
}
