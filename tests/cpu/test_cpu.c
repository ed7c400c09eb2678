/* hk-cpu: negotiation, handles, hk.memory/1 and hk.blas1/1 against a
 * double-precision reference, and bad input. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_status_text.h"
#include "hk_test.h"
#include "tcpu.h"

static void *module;
static hk_negotiate_fn negotiate;
const hk_vtable_t *vt;
const hk_blas1_v1_t *blas;
const hk_memory_v1_t *mem;

/* Opens the hk-cpu file at path and negotiates the current ABI. */
static void *open_plugin(const char *path, hk_negotiate_fn *entry, const hk_vtable_t **v,
                         const hk_blas1_v1_t **b, const hk_memory_v1_t **m)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return NULL;
    }
    void *sym = dlsym(dl, HK_ENTRY_SYMBOL);
    memcpy(entry, &sym, sizeof *entry); /* object → function pointer, per POSIX */
    hk_negotiate_request_t rq = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof rq, 1},
                                 HK_ABI_VERSION(1, 0), HK_ABI_CURRENT, NULL, NULL};
    hk_negotiate_answer_t an;
    if (!*entry || (*entry)(&rq, &an) != HK_STATUS_OK ||
        an.vtable->get_table(HK_TABLE_BLAS1_V1, (const void **)b) != HK_STATUS_OK ||
        an.vtable->get_table(HK_TABLE_MEMORY_V1, (const void **)m) != HK_STATUS_OK) {
        dlclose(dl);
        return NULL;
    }
    *v = an.vtable;
    return dl;
}

int tcpu_open(void)
{
    module = open_plugin(HK_TEST_PLUGIN_DIR "/hk-cpu.so", &negotiate, &vt, &blas, &mem);
    return module ? 0 : -1;
}

int tcpu_close(void)
{
    int rc = module ? dlclose(module) : 0;
    module = NULL;
    return rc;
}

void *tcpu_open_copy(const hk_vtable_t **vt2, const hk_blas1_v1_t **blas2,
                     const hk_memory_v1_t **mem2)
{
    char path[] = "/tmp/hk_cpu_copyXXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    FILE *in = fopen(HK_TEST_PLUGIN_DIR "/hk-cpu.so", "rb");
    FILE *out = fdopen(fd, "wb");
    char buf[1 << 16];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out)
        ok &= fclose(out) == 0;
    else
        close(fd);
    hk_negotiate_fn entry;
    void *dl = ok ? open_plugin(path, &entry, vt2, blas2, mem2) : NULL;
    unlink(path); /* the mapping stays */
    return dl;
}

void tcpu_close_copy(void *dl)
{
    if (dl)
        dlclose(dl);
}

static int suite_init(void)
{
    return tcpu_open();
}

static int suite_clean(void)
{
    return tcpu_close();
}

static hk_negotiate_answer_t ask(uint32_t lo, uint32_t hi, hk_status_t *st)
{
    hk_negotiate_request_t rq = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof rq, 1}, lo, hi, NULL, NULL};
    hk_negotiate_answer_t an;
    memset(&an, 0xab, sizeof an);
    *st = negotiate(&rq, &an);
    return an;
}

static void test_negotiate_versions(void)
{
    hk_status_t st;
    hk_negotiate_answer_t an = ask(HK_ABI_VERSION(1, 0), HK_ABI_VERSION(1, 2), &st);
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    CU_ASSERT_EQUAL(an.abi_version, HK_ABI_VERSION(1, 2));
    CU_ASSERT_EQUAL(an.header.struct_type, HK_STRUCT_NEGOTIATE_ANSWER);
    CU_ASSERT_STRING_EQUAL(an.name, "hk-cpu");
    CU_ASSERT(an.vtable && an.vtable->size >= sizeof(hk_vtable_t));
    CU_ASSERT(an.vtable && an.vtable->last_error_copy != NULL);
    /* ABI 1.2: exactly one memory domain, host memory. */
    CU_ASSERT_EQUAL(an.flags & HK_PLUGIN_MEMORY_MASK, HK_PLUGIN_MEMORY_HOST);
    /* A 1.1 host gets 1.1 and no flag it does not know. */
    an = ask(HK_ABI_VERSION(1, 0), HK_ABI_VERSION(1, 1), &st);
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    CU_ASSERT_EQUAL(an.abi_version, HK_ABI_VERSION(1, 1));
    CU_ASSERT_EQUAL(an.flags & HK_PLUGIN_MEMORY_MASK, 0);
    /* An older host (max 1.0) gets 1.0. */
    an = ask(HK_ABI_VERSION(1, 0), HK_ABI_VERSION(1, 0), &st);
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    CU_ASSERT_EQUAL(an.abi_version, HK_ABI_VERSION(1, 0));
    /* A newer minor on the host side still gets what the plugin knows. */
    an = ask(HK_ABI_VERSION(1, 0), HK_ABI_VERSION(1, 7), &st);
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    CU_ASSERT_EQUAL(an.abi_version, HK_ABI_CURRENT);
    /* Another major is refused, naming the plugin's own version. */
    an = ask(HK_ABI_VERSION(2, 0), HK_ABI_VERSION(2, 3), &st);
    CU_ASSERT_EQUAL(st, HK_STATUS_ABI_MISMATCH);
    CU_ASSERT_EQUAL(an.abi_version, HK_ABI_CURRENT);
    /* A host that needs a minor newer than the plugin's is refused. */
    an = ask(HK_ABI_VERSION(1, 5), HK_ABI_VERSION(1, 9), &st);
    CU_ASSERT_EQUAL(st, HK_STATUS_ABI_MISMATCH);
}

/* A host that knows a shorter answer gets no byte past what it declared. */
static void test_negotiate_respects_answer_size(void)
{
    union {
        hk_negotiate_answer_t an;
        unsigned char bytes[sizeof(hk_negotiate_answer_t) + 16];
    } buf;
    memset(&buf, 0x5a, sizeof buf);
    const uint32_t room = (uint32_t)offsetof(hk_negotiate_answer_t, name);
    buf.an.header.struct_size = room;
    hk_negotiate_request_t rq = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof rq, 1},
                                 HK_ABI_VERSION(1, 0), HK_ABI_CURRENT, NULL, NULL};
    CU_ASSERT_EQUAL(negotiate(&rq, &buf.an), HK_STATUS_OK);
    CU_ASSERT_EQUAL(buf.an.header.struct_type, HK_STRUCT_NEGOTIATE_ANSWER);
    CU_ASSERT_EQUAL(buf.an.header.struct_size, room);
    CU_ASSERT_EQUAL(buf.an.abi_version, HK_ABI_CURRENT);
    int spilled = 0;
    for (size_t i = room; i < sizeof buf.bytes; i++)
        spilled += buf.bytes[i] != 0x5a;
    CU_ASSERT_EQUAL(spilled, 0);
}

static void test_negotiate_bad_input(void)
{
    hk_negotiate_answer_t an;
    CU_ASSERT_EQUAL(negotiate(NULL, &an), HK_STATUS_NULL_POINTER);
    hk_negotiate_request_t rq = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof rq, 1},
                                 HK_ABI_VERSION(1, 0), HK_ABI_CURRENT, NULL, NULL};
    CU_ASSERT_EQUAL(negotiate(&rq, NULL), HK_STATUS_NULL_POINTER);
    rq.header.struct_type = 0x12345678;
    CU_ASSERT_EQUAL(negotiate(&rq, &an), HK_STATUS_INVALID_VALUE);
}

static void test_handle_life(void)
{
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    hk_handle_info_t info = {.size = sizeof info};
    CU_ASSERT_EQUAL(vt->handle_info(h, &info), HK_STATUS_OK);
    CU_ASSERT_EQUAL(info.device, -1);
    CU_ASSERT_EQUAL(info.owns_primary, 0);
    CU_ASSERT_STRING_EQUAL(info.plugin_name, "hk-cpu");
    hk_pointer_mode_t m;
    CU_ASSERT_EQUAL(vt->get_pointer_mode(h, &m), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m, HK_POINTER_MODE_HOST);
    CU_ASSERT_EQUAL(vt->set_pointer_mode(h, (hk_pointer_mode_t)7), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "mode 7"));
    CU_ASSERT_EQUAL(vt->set_stream(h, (void *)0x1234), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_EQUAL(vt->set_stream(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->synchronize(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

static void test_handle_bad_input(void)
{
    CU_ASSERT_EQUAL(vt->handle_create(NULL, NULL), HK_STATUS_NULL_POINTER);
    hk_handle_t *h = (hk_handle_t *)0x1;
    hk_create_info_t ci = {sizeof ci, 3, 0};
    CU_ASSERT_EQUAL(vt->handle_create(&ci, &h), HK_STATUS_INVALID_DEVICE);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(NULL), "asked for 3"));
    ci.size = 2;
    CU_ASSERT_EQUAL(vt->handle_create(&ci, &h), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(vt->handle_destroy(NULL), HK_STATUS_INVALID_HANDLE);
    float a = 1, r;
    CU_ASSERT_EQUAL(blas->saxpy(NULL, 4, &a, &a, 1, &a, 1), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(blas->sdot(NULL, 1, &a, 1, &a, 1, &r), HK_STATUS_INVALID_HANDLE);
    const void *t = (const void *)0x1;
    CU_ASSERT_EQUAL(vt->get_table("hk.blas1/9", &t), HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NULL(t);
    const char *name = NULL;
    CU_ASSERT_EQUAL(vt->enum_tables(0, &name), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(name);
    CU_ASSERT_EQUAL(vt->enum_tables(2, &name), HK_STATUS_NOT_FOUND);
}

static void test_blas_bad_input(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    double x[4] = {1, 2, 3, 4}, a = 2, r = -1;
    CU_ASSERT_EQUAL(blas->daxpy(h, 4, &a, NULL, 1, x, 1), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "x is NULL"));
    CU_ASSERT_EQUAL(blas->daxpy(h, 4, NULL, x, 1, x, 1), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(blas->ddot(h, 4, x, 1, x, 1, NULL), HK_STATUS_NULL_POINTER);
    /* n <= 0 is a no-op with result 0, as in reference BLAS. */
    CU_ASSERT_EQUAL(blas->ddot(h, -3, NULL, 1, NULL, 1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(r, 0.0);
    r = -1;
    CU_ASSERT_EQUAL(blas->dnrm2(h, 4, x, 0, &r), HK_STATUS_OK); /* incx <= 0 → 0 */
    CU_ASSERT_EQUAL(r, 0.0);
    CU_ASSERT_EQUAL(blas->dscal(h, 4, &a, x, -1), HK_STATUS_OK); /* incx <= 0: untouched */
    CU_ASSERT_EQUAL(x[0], 1.0);
    CU_ASSERT_EQUAL(blas->daxpy(h, -1, NULL, NULL, 1, NULL, 1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

static void test_memory_table(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    void *d = NULL;
    CU_ASSERT_EQUAL(mem->alloc(h, 0, &d), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(d);
    CU_ASSERT_EQUAL(mem->alloc(h, 100, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL_FATAL(mem->alloc(h, 100, &d), HK_STATUS_OK);
    CU_ASSERT_EQUAL((uintptr_t)d % 64, 0);
    unsigned char src[100], back[100];
    for (int i = 0; i < 100; i++)
        src[i] = (unsigned char)(i * 7);
    CU_ASSERT_EQUAL(mem->copy_to_device(h, d, src, sizeof src), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem->memset_(h, d, 0x1ff, 10), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem->copy_to_host(h, back, d, sizeof back), HK_STATUS_OK);
    CU_ASSERT_EQUAL(back[0], 0xff);
    CU_ASSERT_EQUAL(back[9], 0xff);
    CU_ASSERT_EQUAL(memcmp(back + 10, src + 10, 90), 0);
    CU_ASSERT_EQUAL(mem->copy_to_host(h, NULL, d, 4), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(mem->free_(h, d), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem->free_(h, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- numbers against a double reference ---- */

/* Element i of a BLAS vector with increment inc over n elements. */
static int64_t at(int64_t i, int64_t n, int64_t inc)
{
    return inc >= 0 ? i * inc : (n - 1 - i) * -inc;
}

static double lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

#include "test_cpu_numbers.inc"

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk-cpu core", suite_init, suite_clean);
    static const hk_test_case_t core_tests[] = {
        {"negotiation picks the highest common version", test_negotiate_versions},
        {"negotiation rejects bad requests", test_negotiate_bad_input},
        {"negotiation writes no more than the host's answer size",
         test_negotiate_respects_answer_size},
        {"handle life and settings", test_handle_life},
        {"handle bad input", test_handle_bad_input},
        {"blas1 bad input and n <= 0", test_blas_bad_input},
        {"hk.memory/1", test_memory_table},
    };
    hk_test_add_all(s, core_tests, sizeof core_tests / sizeof core_tests[0]);
    s = hk_test_suite("hk-cpu blas1 numbers", suite_init, suite_clean);
    static const hk_test_case_t number_tests[] = {
        {"float, host pointer mode", test_numbers_s_host},
        {"float, device pointer mode", test_numbers_s_device},
        {"double, host pointer mode", test_numbers_d_host},
        {"double, device pointer mode", test_numbers_d_device},
    };
    hk_test_add_all(s, number_tests, sizeof number_tests / sizeof number_tests[0]);
    tcpu_register_rules();
    tcpu_register_threads();
    return 0;
}
