/* A host of hk-example, built against the installed loader (pkg-config
 * handlekit): loads the plugin file, fills and scales a vector of the
 * handle's device in both pointer modes, checks every element.
 *
 * usage: hk-example-demo [PLUGIN.so] [N]   (default ./hk-example.so, 2^20)
 * Prints one line per step; exits 0 when every value was right. */
#include <stdio.h>
#include <stdlib.h>

#include <hk_loader.h>
#include <hk_memory.h>
#include <hk_status_text.h>

#include "hk_example.h"

static int failed(const hk_vtable_t *vt, hk_handle_t *h, const char *what, hk_status_t st)
{
    printf("FAIL %s: %s: %s\n", what, hk_status_name(st), vt->last_error(h));
    return 1;
}

/* x := 3, x *= 2 (host pointer mode), x *= alpha on the device (0.5), then
 * every element must be 3. */
static int run(const hk_vtable_t *vt, const example_ops_v1_t *ops, const hk_memory_v1_t *mem,
               long long n)
{
    hk_handle_t *h = NULL;
    float *x = NULL, *alpha_dev = NULL, two = 2.0f, half = 0.5f;
    float *host = malloc((size_t)n * sizeof *host);
    hk_status_t st = vt->handle_create(NULL, &h);
    if (st != HK_STATUS_OK || !host)
        return failed(vt, NULL, "handle_create", st);
    hk_handle_info_t info = {.size = sizeof info};
    vt->handle_info(h, &info);
    printf("handle on device %d, context %llu\n", info.device,
           (unsigned long long)info.context_id);
    int rc = 1;
    if ((st = mem->alloc(h, (size_t)n * sizeof *x, (void **)&x)) != HK_STATUS_OK ||
        (st = mem->alloc(h, sizeof half, (void **)&alpha_dev)) != HK_STATUS_OK ||
        (st = mem->copy_to_device(h, alpha_dev, &half, sizeof half)) != HK_STATUS_OK) {
        failed(vt, h, "hk.memory/1", st);
        goto out;
    }
    if ((st = ops->fill(h, n, 3.0f, x)) != HK_STATUS_OK ||
        (st = ops->scale(h, n, &two, x)) != HK_STATUS_OK ||
        (st = vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE)) != HK_STATUS_OK ||
        (st = ops->scale(h, n, alpha_dev, x)) != HK_STATUS_OK) {
        failed(vt, h, "example.ops/1", st);
        goto out;
    }
    if ((st = mem->copy_to_host(h, host, x, (size_t)n * sizeof *x)) != HK_STATUS_OK) {
        failed(vt, h, "copy_to_host", st);
        goto out;
    }
    long long bad = 0;
    for (long long i = 0; i < n; i++)
        bad += host[i] != 3.0f;
    printf("fill 3, scale by 2 (host pointer), by 0.5 (device pointer): %lld of %lld wrong\n",
           bad, n);
    rc = bad != 0;
out:
    if (x)
        mem->free_(h, x);
    if (alpha_dev)
        mem->free_(h, alpha_dev);
    st = vt->handle_destroy(h);
    if (st != HK_STATUS_OK)
        rc = failed(vt, NULL, "handle_destroy", st);
    free(host);
    return rc;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "./hk-example.so";
    long long n = argc > 2 ? atoll(argv[2]) : 1 << 20;
    hk_loader_t *loader = NULL;
    hk_plugin_t *plugin = NULL;
    example_ops_v1_t ops;
    hk_memory_v1_t mem;
    if (n < 1) {
        fprintf(stderr, "usage: hk-example-demo [PLUGIN.so] [N >= 1]\n");
        return 2;
    }
    hk_status_t st = hk_loader_create(NULL, &loader);
    if (st == HK_STATUS_OK)
        st = hk_loader_open(loader, path, &plugin);
    if (st != HK_STATUS_OK) {
        printf("FAIL loading %s: %s: %s\n", path, hk_status_name(st),
               loader ? hk_loader_last_error(loader) : "");
        hk_loader_destroy(loader);
        return 1;
    }
    printf("plugin: %s %s\n", hk_plugin_name(plugin), hk_plugin_version(plugin));
    int rc = 1;
    /* The host's own copies, zeroed past what the plugin has: a slot the
     * plugin lacks reads NULL and is never called. */
    if (hk_plugin_get_table(plugin, EXAMPLE_TABLE_OPS_V1, &ops, sizeof ops) != HK_STATUS_OK ||
        hk_plugin_get_table(plugin, HK_TABLE_MEMORY_V1, &mem, sizeof mem) != HK_STATUS_OK ||
        !ops.fill || !ops.scale || !mem.alloc || !mem.free_ || !mem.copy_to_device ||
        !mem.copy_to_host)
        printf("FAIL: the plugin lacks %s or %s\n", EXAMPLE_TABLE_OPS_V1, HK_TABLE_MEMORY_V1);
    else
        rc = run(hk_plugin_vtable(plugin), &ops, &mem, n);
    printf("%s\n", rc == 0 ? "ok" : "FAILED");
    hk_loader_destroy(loader);
    return rc;
}
