/* See hkct_plugin.h. */
#include "hkct_plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *hkct_plugin_path(void)
{
    static char path[PATH_MAX];
    const char *env = getenv("HK_CUDA_PLUGIN");
    if (env && *env)
        return env;
    char exe[PATH_MAX - 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return "hk-cuda.so";
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(path, sizeof path, "%s/../plugins/hk-cuda.so", exe);
    return path;
}

static int open_path(hkct_plugin_t *p, const char *path)
{
    memset(p, 0, sizeof *p);
    p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) {
        snprintf(p->why, sizeof p->why, "cannot open %s: %s", path, dlerror());
        return -1;
    }
    hk_negotiate_fn fn;
    *(void **)&fn = dlsym(p->dl, HK_ENTRY_SYMBOL);
    if (!fn) {
        snprintf(p->why, sizeof p->why, "%s has no %s", path, HK_ENTRY_SYMBOL);
        return -1;
    }
    hk_negotiate_request_t req = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1},
                                  HK_ABI_VERSION(HK_ABI_MAJOR, 0), HK_ABI_CURRENT, NULL, NULL};
    p->answer.header.struct_type = HK_STRUCT_NEGOTIATE_ANSWER;
    p->answer.header.struct_size = sizeof p->answer;
    p->answer.header.struct_version = 1;
    hk_status_t st = fn(&req, &p->answer);
    if (st != HK_STATUS_OK || !p->answer.vtable) {
        snprintf(p->why, sizeof p->why, "negotiation with %s failed: %d", path, (int)st);
        return -1;
    }
    p->vt = p->answer.vtable;
    const void *t = NULL;
    if (p->vt->get_table(HK_TABLE_BLAS1_V1, &t) == HK_STATUS_OK)
        p->blas = t;
    if (p->vt->get_table(HK_TABLE_MEMORY_V1, &t) == HK_STATUS_OK)
        p->mem = t;
    if (p->vt->get_table(HK_TABLE_TRIM_V1, &t) == HK_STATUS_OK)
        p->trim = t;
    if (p->vt->get_table(HK_TABLE_KERNELS_V1, &t) == HK_STATUS_OK)
        p->kernels = t;
    if (p->vt->get_table(HK_TABLE_CUDA_V1, &t) == HK_STATUS_OK)
        p->cuda = t;
    if (!p->blas || !p->mem) {
        snprintf(p->why, sizeof p->why, "%s lacks a table", path);
        return -1;
    }
    return 0;
}

int hkct_plugin_open(hkct_plugin_t *p)
{
    return open_path(p, hkct_plugin_path());
}

int hkct_plugin_open_sibling(hkct_plugin_t *p, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", hkct_plugin_path());
    char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash + 1 - path) : 0;
    snprintf(path + dir, sizeof path - dir, "%s", name);
    return open_path(p, path);
}

int hkct_copy_file(const char *src, const char *dst, unsigned mode)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        close(in);
        return -1;
    }
    char buf[1 << 16];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof buf)) > 0) {
        if (write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    }
    if (n < 0 || fchmod(out, (mode_t)mode) != 0)
        rc = -1;
    int saved = errno;
    close(in);
    if (close(out) != 0)
        rc = -1;
    errno = saved;
    return rc;
}

int hkct_plugin_open_copy(hkct_plugin_t *p)
{
    char dir[] = "/tmp/hkct-plugin-XXXXXX", path[64];
    if (!mkdtemp(dir)) {
        memset(p, 0, sizeof *p);
        snprintf(p->why, sizeof p->why, "mkdtemp: %s", strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/hk-cuda-copy.so", dir);
    int rc = -1;
    if (hkct_copy_file(hkct_plugin_path(), path, 0755) == 0) {
        rc = open_path(p, path);
    } else {
        memset(p, 0, sizeof *p);
        snprintf(p->why, sizeof p->why, "copying %s: %s", hkct_plugin_path(), strerror(errno));
    }
    unlink(path); /* the mapping stays */
    rmdir(dir);
    return rc;
}

static double next_value(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 23) - 1.0;
}

void hkct_fill_float(float *v, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)next_value(&seed);
}

void hkct_fill_double(double *v, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = next_value(&seed);
}

int hkct_first_handle(const hkct_plugin_t *p, hk_handle_t **h, char *why, size_t len)
{
    hk_status_t st = p->vt->handle_create(NULL, h);
    if (st == HK_STATUS_NO_DRIVER || st == HK_STATUS_NO_DEVICE) {
        snprintf(why, len, "no CUDA driver or device: %s", p->vt->last_error(NULL));
        return 1;
    }
    if (st != HK_STATUS_OK) {
        fprintf(stderr, "handle_create: %d: %s\n", (int)st, p->vt->last_error(NULL));
        return -1;
    }
    return 0;
}
