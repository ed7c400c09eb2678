/* Conformance: fact 27 (docs/contexts.md), what the driver reads of an image
 * it is given without a length. Each image runs in a child process (this
 * program again, before cuInit, told the case by HK_CONF_CHILD), copied so
 * that its last byte sits just before pages nobody may read: the child
 * exits CONF_READ_PAST when the driver reads past the image (a fault there),
 * 0 when the image loads and its kernel is found, CONF_REFUSED when the
 * driver refuses it. The images are the build's fatbin, the cubin inside it,
 * and a few bytes, each with one size inside it made to lie. */
#include "conf.h"

#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_le.h"
#include "hk_test.h"


extern const unsigned char hk__conf_fatbin_end[];
extern char **environ;

/* A copy of n bytes ending just before 64 KiB that fault when read (so a
 * read a little way past the end faults too, not only one just past it). */
void *conf_guarded(const void *src, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), guard = 65536;
    size_t span = (n + page - 1) / page * page + guard;
    unsigned char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                            -1, 0);
    if (m == MAP_FAILED || mprotect(m + span - guard, guard, PROT_NONE) != 0)
        return NULL;
    unsigned char *p = m + span - guard - n;
    memcpy(p, src, n);
    return p;
}

void conf_read_past(int sig)
{
    (void)sig;
    _exit(CONF_READ_PAST);
}

/* The build's fatbin, and the offset of its entry holding a cubin. */
static size_t fatbin(const unsigned char **f, size_t *entry, size_t *cubin)
{
    *f = hk__conf_fatbin;
    size_t n = (size_t)(hk__conf_fatbin_end - hk__conf_fatbin), end = 16 + hk_get_le(*f + 8, 8);
    *entry = *cubin = 0;
    for (size_t off = 16; end <= n && off + 16 <= end;) {
        size_t hs = (size_t)hk_get_le(*f + off + 4, 4), pay = (size_t)hk_get_le(*f + off + 8, 8);
        if (pay >= 4 && memcmp(*f + off + hs, "\177ELF", 4) == 0) {
            *entry = off;
            *cubin = pay;
            break;
        }
        off += hs + pay;
    }
    return n;
}

/* The image of case name, in malloc'ed memory; its size in *n. */
static unsigned char *case_image(const char *name, size_t *n)
{
    const unsigned char *f;
    size_t e, cub, fn = fatbin(&f, &e, &cub), hs = e ? (size_t)hk_get_le(f + e + 4, 4) : 0;
    int elf = strncmp(name, "cubin", 5) == 0, fat = strncmp(name, "fatbin", 6) == 0;
    if ((elf || fat) && !e)
        return NULL;
    *n = elf ? cub : fat ? fn : strcmp(name, "3 bytes") == 0 ? 3 : 4;
    unsigned char *c = calloc(1, *n);
    if (!c)
        return NULL;
    if (!elf && !fat) { /* "ab" and its NUL, or 4 zero bytes */
        if (*n == 3)
            memcpy(c, "ab", 3);
        return c;
    }
    memcpy(c, elf ? f + e + hs : f, *n);
    unsigned char *x = elf ? c : c + e + hs; /* the cubin, wherever it is */
    uint64_t phoff = hk_get_le(x + 0x20, 8), shoff = hk_get_le(x + 0x28, 8);
    unsigned phnum = (unsigned)hk_get_le(x + 0x38, 2), shnum = (unsigned)hk_get_le(x + 0x3c, 2);
    if (strcmp(name, "fatbin size past the end") == 0)
        hk_put_le(c + 8, 8, hk_get_le(c + 8, 8) + 4096);
    else if (strcmp(name, "fatbin cubin entry's header size 2^31-1") == 0)
        hk_put_le(c + e + 4, 4, 0x7fffffff);
    else if (strcmp(name, "fatbin cubin entry's padded size 1 MiB") == 0)
        hk_put_le(c + e + 8, 8, 1u << 20);
    else if (strcmp(name, "cubin program headers past the end") == 0)
        hk_put_le(x + 0x20, 8, cub + 4096);
    else if (strcmp(name, "cubin section headers past the end") == 0)
        hk_put_le(x + 0x28, 8, cub + 4096);
    for (unsigned i = 0; strcmp(name, "cubin every segment 4 GiB") == 0 && i < phnum; i++)
        hk_put_le(x + phoff + i * 56 + 0x20, 8, 1ull << 32);
    for (unsigned i = 0; strcmp(name, "cubin every segment past the end") == 0 && i < phnum; i++)
        hk_put_le(x + phoff + i * 56 + 0x08, 8, cub + 65536);
    for (unsigned i = 1; strcmp(name, "cubin every section 4 GiB") == 0 && i < shnum; i++)
        if (hk_get_le(x + shoff + i * 64 + 4, 4) != 8) /* SHT_NOBITS takes no bytes */
            hk_put_le(x + shoff + i * 64 + 0x20, 8, 1ull << 32);
    return c;
}

/* The child: loads the guarded image of case name; never returns. */
static void child(const char *name)
{
    size_t n = 0;
    unsigned char *img = case_image(name, &n);
    void *g = img ? conf_guarded(img, n) : NULL;
    CUdevice d;
    CUcontext c;
    CUlibrary lib;
    CUkernel k;
    CUfunction f;
    if (!g || cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&d, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS || cuCtxSetCurrent(c) != CUDA_SUCCESS)
        _exit(2);
    signal(SIGSEGV, conf_read_past);
    signal(SIGBUS, conf_read_past);
    CUresult r = cuLibraryLoadData(&lib, g, NULL, NULL, 0, NULL, NULL, 0);
    if (r == CUDA_SUCCESS)
        r = cuLibraryGetKernel(&k, lib, "hk_probe_kernel");
    if (r == CUDA_SUCCESS)
        r = cuKernelGetFunction(&f, k);
    if (r != CUDA_SUCCESS)
        fprintf(stderr, "conformance child \"%s\": %d\n", name, (int)r);
    _exit(r == CUDA_SUCCESS ? 0 : CONF_REFUSED);
}

void conf_child_main(const char *name)
{
    if (strncmp(name, "launch", 6) == 0)
        conf_launch_child(name);
    child(name);
}

int conf_run_child(const char *name)
{
    char path[4096], var[256];
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
    if (len <= 0)
        return -1;
    path[len] = '\0';
    snprintf(var, sizeof var, "HK_CONF_CHILD=%s", name);
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **env = calloc(ne + 2, sizeof *env);
    if (!env)
        return -1;
    env[0] = var;
    memcpy(env + 1, environ, ne * sizeof *env);
    char *argv[] = {path, NULL};
    pid_t pid;
    int st = -1;
    fflush(NULL);
    if (posix_spawn(&pid, path, NULL, NULL, argv, env) == 0)
        while (waitpid(pid, &st, 0) < 0)
            ;
    free(env);
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_case(const char *name, int want)
{
    int got = conf_run_child(name);
    if (got != want)
        fprintf(stderr, "\n  fact 27: %s: child exit %d, expected %d (%d: read past the image, "
                "%d: refused)\n", name, got, want, CONF_READ_PAST, CONF_REFUSED);
    CU_ASSERT_EQUAL(got, want);
}

/* Fact 27: the sizes inside a fatbin and a cubin that the driver follows, and
 * those it does not; and the bytes it reads before it knows the kind. */
static void fact27_image_sizes(void)
{
    expect_case("fatbin intact", 0);
    expect_case("cubin intact", 0);
    expect_case("fatbin size past the end", CONF_READ_PAST);
    expect_case("fatbin cubin entry's header size 2^31-1", CONF_READ_PAST);
    expect_case("fatbin cubin entry's padded size 1 MiB", CONF_READ_PAST);
    expect_case("cubin program headers past the end", CONF_READ_PAST);
    expect_case("cubin section headers past the end", CONF_READ_PAST);
    expect_case("cubin every section 4 GiB", CONF_READ_PAST);
    expect_case("cubin every segment 4 GiB", 0);
    expect_case("cubin every segment past the end", 0);
    expect_case("3 bytes", CONF_READ_PAST);
    expect_case("4 zero bytes", CONF_READ_PAST);
}

void conf_register_images(CU_pSuite s)
{
    hk_test_add(s, "fact 27: image sizes the driver follows past the buffer, and not",
                fact27_image_sizes);
}
