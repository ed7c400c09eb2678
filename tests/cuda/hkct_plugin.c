/* See hkct_plugin.h. */
#include "hkct_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
