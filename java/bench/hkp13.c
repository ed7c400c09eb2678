/* P13's baseline: the per-call cost of sscal called from C, in the JVM's own
 * process, on the same plugin file and the same memory as the Java side
 * (P13.java), so that both are measured side by side in one run. It makes its
 * own loader and handle through libhkloader. Returns statuses; never prints. */
#include <stdint.h>
#include <time.h>

#include "hk_blas1.h"
#include "hk_loader.h"

static hk_loader_t *loader;
static hk_handle_t *handle;
static const hk_vtable_t *vt;
static hk_blas1_v1_t blas;

/* Loads the plugin file at path and makes a handle on it. */
int hkp13_open(const char *path)
{
    hk_plugin_t *plugin = NULL;
    hk_status_t st = hk_loader_create(NULL, &loader);
    if (st != HK_STATUS_OK)
        return st;
    if ((st = hk_loader_open(loader, path, &plugin)) != HK_STATUS_OK ||
        (st = hk_plugin_get_table(plugin, HK_TABLE_BLAS1_V1, &blas, sizeof blas)) !=
            HK_STATUS_OK)
        return st;
    if (!blas.sscal)
        return HK_STATUS_NOT_SUPPORTED;
    vt = hk_plugin_vtable(plugin);
    return vt->handle_create(NULL, &handle);
}

/* Nanoseconds per sscal(n, alpha, x, 1) over iters calls; -1 when one failed. */
double hkp13_sscal_ns(float *x, int64_t n, float alpha, int64_t iters)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t i = 0; i < iters; i++)
        if (blas.sscal(handle, n, &alpha, x, 1) != HK_STATUS_OK)
            return -1.0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
           (double)iters;
}

/* Destroys the handle and the loader. */
int hkp13_close(void)
{
    int st = HK_STATUS_OK;
    if (handle)
        st = vt->handle_destroy(handle);
    handle = NULL;
    if (loader) {
        hk_status_t s2 = hk_loader_destroy(loader);
        if (st == HK_STATUS_OK)
            st = s2;
    }
    loader = NULL;
    return st;
}
