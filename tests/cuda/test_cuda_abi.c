/* hk-cuda against the ABI 1.2 rules of docs/abi.md that hk-cpu follows too:
 * the answer's memory domain, create and query struct sizes,
 * last_error_copy, and handle provenance (destroyed handles, handles of
 * hk-cpu and of another loaded copy of hk-cuda, stray pointers: all
 * INVALID_HANDLE, never read). Runs on the simulated driver in CI and
 * unchanged on a GPU; without a driver its tests are skipped. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hk_test.h"
#include "hkct_plugin.h"

static hkct_plugin_t plug; /* hk-cuda */
static hkct_plugin_t cpu;  /* hk-cpu, for handles of another plugin */

static void test_answer_flags(void)
{
    CU_ASSERT_EQUAL(plug.answer.abi_version, HK_ABI_CURRENT);
    CU_ASSERT_EQUAL(plug.answer.flags & HK_PLUGIN_MEMORY_MASK, HK_PLUGIN_MEMORY_CUDA);
    CU_ASSERT_PTR_NOT_NULL(plug.vt->last_error_copy);
    /* A 1.1 host gets no flag it does not know. */
    hk_negotiate_fn fn;
    *(void **)&fn = dlsym(plug.dl, HK_ENTRY_SYMBOL);
    hk_negotiate_request_t req = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1},
                                  HK_ABI_VERSION(1, 0), HK_ABI_VERSION(1, 1), NULL, NULL};
    hk_negotiate_answer_t a = {{HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1}, 0, 0, NULL, NULL, NULL};
    CU_ASSERT_EQUAL(fn(&req, &a), HK_STATUS_OK);
    CU_ASSERT_EQUAL(a.abi_version, HK_ABI_VERSION(1, 1));
    CU_ASSERT_EQUAL(a.flags & HK_PLUGIN_MEMORY_MASK, 0);
}

static void test_create_info_size(void)
{
    hk_handle_t *h = (hk_handle_t *)&h;
    hk_create_info_t ci = {8, HK_DEVICE_CURRENT, 0};
    CU_ASSERT_EQUAL(plug.vt->handle_create(&ci, &h), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(NULL), "info->size 8 is below 12"));
    ci.size = 11;
    CU_ASSERT_EQUAL(plug.vt->handle_create(&ci, &h), HK_STATUS_INVALID_VALUE);
    ci.size = 12;
    ci.device = 0;
    CU_ASSERT_EQUAL_FATAL(plug.vt->handle_create(&ci, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

static void test_handle_info_size(void)
{
    hk_handle_t *h;
    hk_create_info_t ci = {sizeof ci, 0, 0};
    CU_ASSERT_EQUAL_FATAL(plug.vt->handle_create(&ci, &h), HK_STATUS_OK);
    struct {
        hk_handle_info_t info;
        unsigned char after[16];
    } b;
    memset(&b, 0xee, sizeof b);
    b.info.size = 3;
    CU_ASSERT_EQUAL(plug.vt->handle_info(h, &b.info), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(b.info.device, (int32_t)0xeeeeeeee);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "info->size 3"));
    b.info.size = 8;
    CU_ASSERT_EQUAL(plug.vt->handle_info(h, &b.info), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b.info.size, 8); /* n = bytes written */
    CU_ASSERT_EQUAL(b.info.device, 0);
    CU_ASSERT_EQUAL(b.info.context_id, 0xeeeeeeeeeeeeeeeeull);
    b.info.size = sizeof b;
    CU_ASSERT_EQUAL(plug.vt->handle_info(h, &b.info), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b.info.size, sizeof(hk_handle_info_t));
    CU_ASSERT_STRING_EQUAL(b.info.plugin_name, "hk-cuda");
    CU_ASSERT_EQUAL(b.after[0], 0xee);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

static void test_last_error_copy(void)
{
    char buf[32], big[256];
    size_t needed = 99;
    hk_handle_t *h = NULL;
    hk_create_info_t ci = {4, 0, 0};
    CU_ASSERT_EQUAL(plug.vt->handle_create(&ci, &h), HK_STATUS_INVALID_VALUE);
    const char *want = plug.vt->last_error(NULL);
    CU_ASSERT_EQUAL(plug.vt->last_error_copy(NULL, big, sizeof big, &needed), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(big, want);
    CU_ASSERT_EQUAL(needed, strlen(want) + 1);
    memset(buf, 'x', sizeof buf);
    CU_ASSERT_EQUAL(plug.vt->last_error_copy(NULL, buf, 6, &needed), HK_STATUS_OK);
    CU_ASSERT_EQUAL(memcmp(buf, want, 5), 0);
    CU_ASSERT_EQUAL(buf[5], '\0');
    CU_ASSERT_EQUAL(buf[6], 'x');
    CU_ASSERT_EQUAL(plug.vt->last_error_copy(NULL, NULL, 0, &needed), HK_STATUS_OK);
    CU_ASSERT_EQUAL(needed, strlen(want) + 1);
    CU_ASSERT_EQUAL(plug.vt->last_error_copy(NULL, NULL, 3, &needed), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(needed, 0);

    ci.size = sizeof ci;
    CU_ASSERT_EQUAL_FATAL(plug.vt->handle_create(&ci, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->last_error_copy(h, buf, sizeof buf, &needed), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_EQUAL(plug.vt->set_pointer_mode(h, (hk_pointer_mode_t)9), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(plug.vt->last_error_copy(h, big, sizeof big, &needed), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(big, "set_pointer_mode: unknown mode 9");
    CU_ASSERT_EQUAL(needed, strlen(big) + 1);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    memset(buf, 'x', sizeof buf);
    CU_ASSERT_EQUAL(plug.vt->last_error_copy(h, buf, sizeof buf, &needed),
                    HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(buf[0], '\0');
    CU_ASSERT_EQUAL(needed, 0);
}

/* Calls every slot that takes a handle with h; returns how many did not say
 * HK_STATUS_INVALID_HANDLE. */
static int count_accepted(const hkct_plugin_t *p, hk_handle_t *h)
{
    float f[4] = {1, 2, 3, 4}, r = 0, a = 1;
    double d[4] = {1, 2, 3, 4}, dr = 0, da = 1;
    void *mem = NULL, *s = NULL;
    hk_pointer_mode_t mode;
    hk_handle_info_t info = {.size = sizeof info};
    char buf[16];
    hk_status_t st[] = {
        p->vt->set_stream(h, NULL),
        p->vt->get_stream(h, &s),
        p->vt->set_pointer_mode(h, HK_POINTER_MODE_HOST),
        p->vt->get_pointer_mode(h, &mode),
        p->vt->handle_info(h, &info),
        p->vt->synchronize(h),
        p->vt->last_error_copy(h, buf, sizeof buf, NULL),
        p->blas->saxpy(h, 4, &a, f, 1, f, 1),
        p->blas->daxpy(h, 4, &da, d, 1, d, 1),
        p->blas->sscal(h, 4, &a, f, 1),
        p->blas->dscal(h, 4, &da, d, 1),
        p->blas->scopy(h, 4, f, 1, f, 1),
        p->blas->dcopy(h, 4, d, 1, d, 1),
        p->blas->sdot(h, 4, f, 1, f, 1, &r),
        p->blas->ddot(h, 4, d, 1, d, 1, &dr),
        p->blas->snrm2(h, 4, f, 1, &r),
        p->blas->dnrm2(h, 4, d, 1, &dr),
        p->mem->alloc(h, 64, &mem),
        p->mem->free_(h, NULL),
        p->mem->copy_to_device(h, f, f, sizeof f),
        p->mem->copy_to_host(h, f, f, sizeof f),
        p->mem->memset_(h, f, 0, sizeof f),
        p->vt->handle_destroy(h),
    };
    int accepted = 0;
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
        accepted += st[i] != HK_STATUS_INVALID_HANDLE;
    return accepted;
}

static void test_destroyed_and_stray(void)
{
    hk_handle_t *h;
    hk_create_info_t ci = {sizeof ci, 0, 0};
    CU_ASSERT_EQUAL_FATAL(plug.vt->handle_create(&ci, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(count_accepted(&plug, h), 0);
    /* NULL: refused by every slot but last_error_copy (this thread's create). */
    CU_ASSERT_EQUAL(count_accepted(&plug, NULL), 1);

    void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(page != MAP_FAILED);
    CU_ASSERT_EQUAL(count_accepted(&plug, (hk_handle_t *)page), 0);
    munmap(page, 4096);
    void *heap = malloc(2048);
    CU_ASSERT_FATAL(heap != NULL);
    volatile uintptr_t freed = (uintptr_t)heap; /* only the address is used */
    free(heap);
    CU_ASSERT_EQUAL(count_accepted(&plug, (hk_handle_t *)freed), 0);
}

/* hk-cpu's handles in hk-cuda and hk-cuda's in hk-cpu. */
static void test_other_plugin(void)
{
    hk_handle_t *ch, *gh;
    hk_create_info_t ci = {sizeof ci, 0, 0};
    CU_ASSERT_EQUAL_FATAL(cpu.vt->handle_create(NULL, &ch), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(plug.vt->handle_create(&ci, &gh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(count_accepted(&plug, ch), 0);
    CU_ASSERT_EQUAL(count_accepted(&cpu, gh), 0);
    CU_ASSERT_EQUAL(cpu.vt->synchronize(ch), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->synchronize(gh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(cpu.vt->handle_destroy(ch), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(gh), HK_STATUS_OK);
}

/* Another loaded copy of hk-cuda (the same file copied elsewhere): each copy
 * refuses the other's handles and still serves its own. */
static void test_other_copy(void)
{
    char path[] = "/tmp/hk_cuda_copyXXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    FILE *in = fopen(hkct_plugin_path(), "rb");
    FILE *out = fdopen(fd, "wb");
    CU_ASSERT_FATAL(in && out);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        CU_ASSERT_FATAL(fwrite(buf, 1, n, out) == n);
    fclose(in);
    CU_ASSERT_FATAL(fclose(out) == 0);
    const char *old = getenv("HK_CUDA_PLUGIN");
    char *saved = old ? strdup(old) : NULL;
    setenv("HK_CUDA_PLUGIN", path, 1);
    hkct_plugin_t copy;
    int rc = hkct_plugin_open(&copy);
    if (saved) {
        setenv("HK_CUDA_PLUGIN", saved, 1);
        free(saved);
    } else {
        unsetenv("HK_CUDA_PLUGIN");
    }
    unlink(path);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_EQUAL(copy.vt, plug.vt);

    hk_handle_t *mine, *theirs;
    hk_create_info_t ci = {sizeof ci, 0, 0};
    CU_ASSERT_EQUAL_FATAL(plug.vt->handle_create(&ci, &mine), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(copy.vt->handle_create(&ci, &theirs), HK_STATUS_OK);
    CU_ASSERT_EQUAL(count_accepted(&plug, theirs), 0);
    CU_ASSERT_EQUAL(count_accepted(&copy, mine), 0);
    CU_ASSERT_EQUAL(plug.vt->synchronize(mine), HK_STATUS_OK);
    CU_ASSERT_EQUAL(copy.vt->synchronize(theirs), HK_STATUS_OK);
    CU_ASSERT_EQUAL(copy.vt->handle_destroy(theirs), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(mine), HK_STATUS_OK);
    /* The copy stays open until the process ends, as a host might keep it. */
}

static void test_free_foreign(void)
{
    hk_handle_t *h;
    hk_create_info_t ci = {sizeof ci, 0, 0};
    CU_ASSERT_EQUAL_FATAL(plug.vt->handle_create(&ci, &h), HK_STATUS_OK);
    int local;
    CU_ASSERT_EQUAL(plug.mem->free_(h, &local), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "not the start of a live hk-cuda"));
    void *d = NULL;
    CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(h, 256, &d), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->free_(h, d), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->free_(h, d), HK_STATUS_INVALID_VALUE);
    /* A size no device has: OUT_OF_MEMORY naming it, *out NULL. */
    d = (void *)&local;
    CU_ASSERT_EQUAL(plug.mem->alloc(h, SIZE_MAX, &d), HK_STATUS_OUT_OF_MEMORY);
    CU_ASSERT_PTR_NULL(d);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "18446744073709551615 bytes"));
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk-cuda ABI 1.2 rules", NULL, NULL);
    struct {
        const char *name;
        CU_TestFunc fn;
    } t[] = {
        {"answer: HK_PLUGIN_MEMORY_CUDA at 1.2 only, last_error_copy", test_answer_flags},
        {"create_info: size below 12 refused", test_create_info_size},
        {"handle_info: size below 4 refused, n written and said", test_handle_info_size},
        {"last_error_copy: NULL, cut, len 0, NULL buf, dead handle", test_last_error_copy},
        {"destroyed and stray handles: every slot INVALID_HANDLE", test_destroyed_and_stray},
        {"hk-cpu's handles refused, and hk-cuda's by hk-cpu", test_other_plugin},
        {"another loaded copy of hk-cuda: handles refused both ways", test_other_copy},
        {"free_ of a foreign pointer: INVALID_VALUE; impossible alloc: OOM",
         test_free_foreign},
    };
    const char *skip = NULL;
    static char why[600];
    if (hkct_plugin_open(&plug) != 0) {
        snprintf(why, sizeof why, "%s", plug.why);
        skip = why;
    } else if (hkct_plugin_open_sibling(&cpu, "hk-cpu.so") != 0) {
        fprintf(stderr, "hk-cpu is unusable: %s\n", cpu.why);
        return 1;
    } else {
        hk_handle_t *h = NULL;
        int found = hkct_first_handle(&plug, &h, why, sizeof why);
        if (found < 0)
            return 1;
        if (found > 0)
            skip = why;
        else
            plug.vt->handle_destroy(h);
    }
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        hk_test_add_or_skip(s, t[i].name, t[i].fn, skip);
    return 0;
}
