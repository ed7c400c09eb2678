/* host-minimal: the smallest complete handlekit host. It loads the
 * installed plugins, picks one, makes a handle, runs saxpy and sdot of
 * hk.blas1/1 on the plugin's own memory (hk.memory/1, so the same code runs
 * on hk-cpu and on hk-cuda), checks the results, and destroys what it made.
 * It includes only the installed headers and links only the installed
 * loader (README.md says how to build it).
 *
 * usage: host-minimal [REQUEST]   REQUEST: a plugin name, NAME@RANGE or a
 *                                 path to a .so file (default hk-cpu@^1)
 * Exits 0 when every result is right, 1 otherwise; an error is one message
 * on stderr (the loader's, when nothing matches, names what it refused). */
#include <stdio.h>

#include <handlekit/hk_blas1.h>
#include <handlekit/hk_loader.h>
#include <handlekit/hk_memory.h>
#include <handlekit/hk_status_text.h>

#define N 1000

/* A failed call of the plugin, with the plugin's own reason. */
static int fail(const hk_vtable_t *vt, hk_handle_t *h, const char *what, hk_status_t st)
{
    fprintf(stderr, "host-minimal: %s: %s: %s\n", what, hk_status_name(st), vt->last_error(h));
    return 1;
}

/* y = 2x + y and dot(x, y) on the handle, then both checked. The values are
 * small integers, so every float sum is exact in any order. */
static int compute(const hk_vtable_t *vt, const hk_blas1_v1_t *blas, const hk_memory_v1_t *mem,
                   hk_handle_t *h)
{
    float x[N], y[N], alpha = 2.0f, dot = 0.0f, want = 0.0f;
    float *dx = NULL, *dy = NULL;
    int rc = 1, wrong = 0;
    hk_status_t st;

    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 7);
        y[i] = 1.0f;
        want += x[i] * (2.0f * x[i] + 1.0f);
    }
    if ((st = mem->alloc(h, sizeof x, (void **)&dx)) != HK_STATUS_OK ||
        (st = mem->alloc(h, sizeof y, (void **)&dy)) != HK_STATUS_OK ||
        (st = mem->copy_to_device(h, dx, x, sizeof x)) != HK_STATUS_OK ||
        (st = mem->copy_to_device(h, dy, y, sizeof y)) != HK_STATUS_OK) {
        fail(vt, h, "hk.memory/1", st);
        goto out;
    }
    if ((st = blas->saxpy(h, N, &alpha, dx, 1, dy, 1)) != HK_STATUS_OK ||
        (st = blas->sdot(h, N, dx, 1, dy, 1, &dot)) != HK_STATUS_OK) {
        fail(vt, h, "hk.blas1/1", st);
        goto out;
    }
    if ((st = mem->copy_to_host(h, y, dy, sizeof y)) != HK_STATUS_OK) {
        fail(vt, h, "copy_to_host", st);
        goto out;
    }
    for (int i = 0; i < N; i++)
        wrong += y[i] != 2.0f * x[i] + 1.0f;
    printf("saxpy: %d of %d wrong\nsdot: %g, expected %g\n", wrong, N, dot, want);
    rc = wrong != 0 || dot != want;
out:
    if (dx)
        mem->free_(h, dx);
    if (dy)
        mem->free_(h, dy);
    return rc;
}

/* The plugin's tables, with every slot compute() calls present. */
static int tables(hk_plugin_t *plugin, hk_blas1_v1_t *blas, hk_memory_v1_t *mem)
{
    hk_status_t st = hk_plugin_get_table(plugin, HK_TABLE_BLAS1_V1, blas, sizeof *blas);
    if (st == HK_STATUS_OK)
        st = hk_plugin_get_table(plugin, HK_TABLE_MEMORY_V1, mem, sizeof *mem);
    if (st == HK_STATUS_OK && blas->saxpy && blas->sdot && mem->alloc && mem->free_ &&
        mem->copy_to_device && mem->copy_to_host)
        return 0;
    fprintf(stderr, "host-minimal: %s lacks hk.blas1/1 or hk.memory/1 slots (%s)\n",
            hk_plugin_name(plugin), hk_status_name(st));
    return 1;
}

int main(int argc, char **argv)
{
    const char *request = argc > 1 ? argv[1] : "hk-cpu@^1";
    hk_loader_t *loader = NULL;
    hk_plugin_t *plugin = NULL;
    hk_handle_t *h = NULL;
    hk_blas1_v1_t blas;
    hk_memory_v1_t mem;
    int rc = 1;

    /* NULL options: the installed plugin directory, HK_PLUGIN_PATH first. */
    hk_status_t st = hk_loader_create(NULL, &loader);
    if (st != HK_STATUS_OK) {
        fprintf(stderr, "host-minimal: hk_loader_create: %s\n", hk_status_string(st));
        return 1;
    }
    hk_loader_scan(loader); /* a refused file is in the reports, not a failure */
    st = hk_loader_select(loader, request, &plugin);
    if (st != HK_STATUS_OK) {
        fprintf(stderr, "host-minimal: %s: %s\n", hk_status_name(st),
                hk_loader_last_error(loader));
        goto out;
    }
    printf("plugin: %s %s (%s)\n", hk_plugin_name(plugin), hk_plugin_version(plugin),
           hk_plugin_path(plugin));
    const hk_vtable_t *vt = hk_plugin_vtable(plugin);
    if (tables(plugin, &blas, &mem) != 0)
        goto out;
    hk_create_info_t info = {sizeof info, HK_DEVICE_CURRENT, 0};
    if ((st = vt->handle_create(&info, &h)) != HK_STATUS_OK) {
        fail(vt, NULL, "handle_create", st);
        goto out;
    }
    rc = compute(vt, &blas, &mem, h);
    if ((st = vt->handle_destroy(h)) != HK_STATUS_OK) {
        fprintf(stderr, "host-minimal: handle_destroy: %s\n", hk_status_string(st));
        rc = 1;
    }
    if (rc == 0)
        printf("all results right\n");
out:
    if ((st = hk_loader_destroy(loader)) != HK_STATUS_OK) {
        fprintf(stderr, "host-minimal: hk_loader_destroy: %s\n", hk_status_string(st));
        rc = 1;
    }
    return rc;
}
