/* Helper of test_swap_cuda: loads hk-cuda (argv[1]) through a loader, makes a
 * handle, loads a library through hk.kernels/1 and leaves it loaded, destroys
 * the handle; then, with a second argument "close", destroys the loader
 * (closing the module), else exits with the module open. Prints "done" last.
 * The test runs it on the simulated driver with a failure injected into the
 * second cuLibraryUnload and reads the driver's trace: the module's close
 * gives the library back; an exit touches no driver. Exit status 0, or 1
 * when a step failed. */
#include <stdio.h>
#include <string.h>

#include "hk_kernels.h"
#include "hk_loader.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry hk_exit_probe()\n{\n\tret;\n}\n";

int main(int argc, char **argv)
{
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1};
    hk_loader_t *loader = NULL;
    hk_plugin_t *p = NULL;
    hk_handle_t *h = NULL;
    hk_library_t *lib = NULL;
    if (argc < 2 || hk_loader_create(&o, &loader) != HK_STATUS_OK
        || hk_loader_open(loader, argv[1], &p) != HK_STATUS_OK)
        return 1;
    hk_plugin_acquire(p);
    const hk_vtable_t *vt = hk_plugin_vtable(p);
    const hk_kernels_v1_t *k = hk_plugin_table(p, HK_TABLE_KERNELS_V1);
    if (!k || vt->handle_create(NULL, &h) != HK_STATUS_OK
        || k->load(h, ptx, sizeof ptx, &lib) != HK_STATUS_OK
        || vt->handle_destroy(h) != HK_STATUS_OK)
        return 1;
    hk_plugin_release(p);
    if (argc > 2 && strcmp(argv[2], "close") == 0 && hk_loader_destroy(loader) != HK_STATUS_OK)
        return 1;
    printf("done\n");
    return 0;
}
