/* Build-level facts: status texts, ABI headers that compile alone, plugin
 * exports and needed libraries, and the embedded kernels fatbin. */
#include <dirent.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_shell.h"
#include "elf_dyn.h"
#include "hk_abi.h"
#include "hk_status_text.h"
#include "hk_test.h"

/* ---- status ---- */

static void test_status_names_unique_and_never_null(void)
{
    for (int i = 0; i < HK_STATUS__COUNT; i++) {
        const char *n = hk_status_name(i), *m = hk_status_string(i);
        CU_ASSERT_PTR_NOT_NULL_FATAL(n);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_STRING_NOT_EQUAL(n, "UNKNOWN");
        CU_ASSERT(strlen(m) > 0);
        for (int k = 0; k < i; k++)
            CU_ASSERT_STRING_NOT_EQUAL(n, hk_status_name(k));
    }
    CU_ASSERT_STRING_EQUAL(hk_status_name(HK_STATUS_OK), "OK");
    CU_ASSERT_STRING_EQUAL(hk_status_name(HK_STATUS_CONTEXT_RESET), "CONTEXT_RESET");
}

static void test_status_out_of_range(void)
{
    CU_ASSERT_STRING_EQUAL(hk_status_name(-1), "UNKNOWN");
    CU_ASSERT_STRING_EQUAL(hk_status_name(HK_STATUS__COUNT), "UNKNOWN");
    CU_ASSERT_STRING_EQUAL(hk_status_string(100000), "unknown status");
}

static void test_status_values_fixed(void)
{
    /* Values are ABI: a renumbering must fail here. */
    CU_ASSERT_EQUAL(HK_STATUS_OK, 0);
    CU_ASSERT_EQUAL(HK_STATUS_NO_DRIVER, 6);
    CU_ASSERT_EQUAL(HK_STATUS_CONTEXT_DESTROYED, 10);
    CU_ASSERT_EQUAL(HK_STATUS_STREAM_MISMATCH, 12);
    CU_ASSERT_EQUAL(HK_STATUS_FORKED, 14);
    CU_ASSERT_EQUAL(HK_STATUS_ABI_MISMATCH, 17);
}

/* ---- headers compile alone ---- */

static int compile_alone(const char *header, char *log, size_t len)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s -std=c11 -Wall -Wextra -pedantic -Werror -fsyntax-only -x c '%s' 2>&1",
             HK_TEST_CC, header);
    return hk_shell_into(cmd, log, len);
}

static void test_headers_compile_alone(void)
{
    DIR *d = opendir(HK_TEST_API_DIR);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    struct dirent *e;
    int headers = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 3 || strcmp(e->d_name + l - 2, ".h") != 0)
            continue;
        char path[1024], log[4096];
        snprintf(path, sizeof path, "%s/%s", HK_TEST_API_DIR, e->d_name);
        int rc = compile_alone(path, log, sizeof log);
        if (rc != 0)
            fprintf(stderr, "\n%s does not compile alone (status %d):\n%s", e->d_name, rc, log);
        CU_ASSERT_EQUAL(rc, 0);
        headers++;
    }
    closedir(d);
    CU_ASSERT(headers >= 6); /* status, status_text, abi, blas1, memory, loader */
}

/* A compile that must fail proves the check can fail. */
static void test_header_check_catches_errors(void)
{
    char path[] = "/tmp/hk_bad_headerXXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    const char *bad = "static int unused_variable_in_header(void) { int x; return 0; }\n";
    CU_ASSERT(write(fd, bad, strlen(bad)) == (ssize_t)strlen(bad));
    close(fd);
    char log[4096];
    CU_ASSERT_NOT_EQUAL(compile_alone(path, log, sizeof log), 0);
    unlink(path);
}

/* ---- plugin binaries ---- */

static void check_plugin(const char *file)
{
    char path[1024], why[256];
    snprintf(path, sizeof path, "%s/%s", HK_TEST_PLUGIN_DIR, file);
    elf_dyn_t d;
    int rc = elf_dyn_read(path, &d, why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "\n%s\n", why);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(d.total_exports, 1);
    for (size_t i = 0; i < d.nexports; i++) {
        if (strcmp(d.exports[i], "hk_plugin_negotiate") != 0)
            fprintf(stderr, "\n%s exports %s\n", file, d.exports[i]);
        CU_ASSERT_STRING_EQUAL(d.exports[i], "hk_plugin_negotiate");
    }
    for (size_t i = 0; i < d.nneeded; i++) {
        CU_ASSERT_PTR_NULL(strstr(d.needed[i], "libcuda"));
        CU_ASSERT_PTR_NULL(strstr(d.needed[i], "libcudart"));
    }
    CU_ASSERT_FALSE(d.has_soname);
    elf_dyn_free(&d);
}

/* The plugin's negotiation answer, into a buffer filled with 0xAA: no byte
 * of the plugin's stack reaches the host, so the padding between flags and
 * name reads 0, and every field is written. */
static void check_answer(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", HK_TEST_PLUGIN_DIR, file);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        fprintf(stderr, "\n%s\n", dlerror());
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    hk_negotiate_fn fn;
    *(void **)&fn = dlsym(lib, "hk_plugin_negotiate");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fn);
    hk_negotiate_request_t rq;
    memset(&rq, 0, sizeof rq);
    rq.header = (hk_struct_header_t){HK_STRUCT_NEGOTIATE_REQUEST, sizeof rq, 1};
    rq.abi_min = HK_ABI_VERSION(HK_ABI_MAJOR, 0);
    rq.abi_max = HK_ABI_CURRENT;
    hk_negotiate_answer_t a;
    memset(&a, 0xAA, sizeof a);
    a.header.struct_size = sizeof a;
    CU_ASSERT_EQUAL(fn(&rq, &a), HK_STATUS_OK);
    const unsigned char *b = (const unsigned char *)&a;
    for (size_t i = offsetof(hk_negotiate_answer_t, flags) + sizeof a.flags;
         i < offsetof(hk_negotiate_answer_t, name); i++) {
        if (b[i] != 0)
            fprintf(stderr, "\n%s: answer byte %zu (padding) is 0x%02x\n", file, i, b[i]);
        CU_ASSERT_EQUAL(b[i], 0);
    }
    CU_ASSERT_EQUAL(a.header.struct_size, sizeof a);
    CU_ASSERT_EQUAL(a.abi_version, HK_ABI_CURRENT);
    CU_ASSERT_PTR_NOT_NULL(a.name);
    CU_ASSERT_PTR_NOT_NULL(a.version);
    CU_ASSERT_PTR_NOT_NULL(a.vtable);
    dlclose(lib);
}

static void test_cpu_plugin_answer(void)
{
    check_answer("hk-cpu.so");
}

static void test_cuda_plugin_answer(void)
{
    check_answer("hk-cuda.so");
}

static void test_cpu_plugin_exports(void)
{
    check_plugin("hk-cpu.so");
}

static void test_cuda_plugin_exports(void)
{
    check_plugin("hk-cuda.so");
}

/* The reader must see more than one export in an ordinary library, or the
 * export checks above could pass on a reader that finds nothing. */
static void test_elf_reader_sees_exports(void)
{
    elf_dyn_t d;
    char why[256];
    CU_ASSERT_EQUAL_FATAL(elf_dyn_read(HK_TEST_LIBC, &d, why, sizeof why), 0);
    CU_ASSERT(d.total_exports > 100);
    elf_dyn_free(&d);
}

/* ---- embedded fatbin ---- */

#ifdef HK_TEST_HAVE_FATBIN
extern const unsigned char hk__test_fatbin[];
extern const unsigned char hk__test_fatbin_end[];

static void test_fatbin_embedded(void)
{
    size_t n = (size_t)(hk__test_fatbin_end - hk__test_fatbin);
    CU_ASSERT_FATAL(n > 16);
    uint32_t magic;
    memcpy(&magic, hk__test_fatbin, sizeof magic);
    CU_ASSERT_EQUAL(magic, 0xBA55ED50u);
    CU_ASSERT_EQUAL((uintptr_t)hk__test_fatbin % 64, 0);
    /* The probe kernel's name is in the image (kernels/hk_probe.cu). */
    CU_ASSERT_PTR_NOT_NULL(memmem(hk__test_fatbin, n, "hk_probe_kernel", 15));
}
#endif

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("status", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"names unique and never NULL", test_status_names_unique_and_never_null},
        {"out of range", test_status_out_of_range},
        {"values fixed", test_status_values_fixed},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);

    s = hk_test_suite("abi headers", NULL, NULL);
    hk_test_add(s, "each compiles alone with -pedantic -Werror", test_headers_compile_alone);
    hk_test_add(s, "the check rejects a bad header", test_header_check_catches_errors);

    s = hk_test_suite("plugin binaries", NULL, NULL);
    hk_test_add(s, "ELF reader sees libc's exports", test_elf_reader_sees_exports);
    hk_test_add(s, "hk-cpu exports only the entry, needs no CUDA", test_cpu_plugin_exports);
    CU_pTest t = hk_test_add(s, "hk-cuda exports only the entry, needs no CUDA",
                             test_cuda_plugin_exports);
    hk_test_add(s, "hk-cpu's negotiation answer: every field written, padding zero",
                test_cpu_plugin_answer);
    CU_pTest ta = hk_test_add(s, "hk-cuda's negotiation answer: every field written, padding "
                                 "zero", test_cuda_plugin_answer);
#ifndef HK_TEST_HAVE_CUDA_PLUGIN
    hk_test_skip(t, "hk-cuda not built: no CUDA toolkit");
    hk_test_skip(ta, "hk-cuda not built: no CUDA toolkit");
#else
    (void)t;
    (void)ta;
#endif

    s = hk_test_suite("fatbin", NULL, NULL);
#ifdef HK_TEST_HAVE_FATBIN
    hk_test_add(s, "embedded blob starts with the fatbin magic", test_fatbin_embedded);
#endif
    return 0;
}
