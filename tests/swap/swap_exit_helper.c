/* Helper of test_swap_cuda: loads hk-cuda (argv[1]) through a loader, makes a
 * handle, loads a library through hk.kernels/1 and leaves it loaded, destroys
 * the handle; then, with a second argument "close", destroys the loader
 * (closing the module) and prints whether the driver ($HK_CUDA_DRIVER) is
 * still mapped, else exits with the module open. Prints "done" last. It
 * links no driver: the only reference to it is the plugin's.
 * The test runs it on the simulated driver with a failure injected into the
 * second cuLibraryUnload and reads the driver's trace: the module's close
 * gives the library back; an exit touches no driver; and with a driver that
 * is not itself marked to stay loaded, the plugin's close leaves it mapped.
 * Exit status 0, or 1 when a step failed. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_kernels.h"
#include "hk_loader.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry hk_exit_probe()\n{\n\tret;\n}\n";

/* 1 when /proc/self/maps lists the file at path. */
static int mapped(const char *path)
{
    char real[PATH_MAX], line[PATH_MAX + 128];
    FILE *f = path && realpath(path, real) ? fopen("/proc/self/maps", "r") : NULL;
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        char *at = strchr(line, '/');
        found = at && strncmp(at, real, strlen(real)) == 0 && at[strlen(real)] == '\n';
    }
    if (f)
        fclose(f);
    return found;
}

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
    if (argc > 2 && strcmp(argv[2], "close") == 0) {
        if (hk_loader_destroy(loader) != HK_STATUS_OK)
            return 1;
        printf("driver mapped after the close: %d\n", mapped(getenv("HK_CUDA_DRIVER")));
    }
    printf("done\n");
    return 0;
}
