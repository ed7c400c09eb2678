/* A host built outside the source tree against an installed handlekit: it
 * includes only the installed headers and links only the installed loader.
 *
 * usage: install-host [PLUGIN_DIR]
 * Without PLUGIN_DIR the loader's default directory is searched (for the shared
 * library: the installed plugins beside it; HOST_PLUGIN_DIR, when defined at
 * compile time, is used instead). Prints every loaded plugin, then runs saxpy
 * and ddot of hk.blas1/1 on hk-cpu and prints the results. Exits 0 on success. */
#include <stdio.h>
#include <string.h>

#include <hk_blas1.h>
#include <hk_loader.h>
#include <hk_status_text.h>

static int fail(const char *what, hk_status_t st, const char *why)
{
    printf("FAIL %s: %s: %s\n", what, hk_status_name(st), why);
    return 1;
}

static int run_blas1(hk_plugin_t *cpu)
{
    const hk_vtable_t *vt = hk_plugin_vtable(cpu);
    const hk_blas1_v1_t *b = hk_plugin_table(cpu, HK_TABLE_BLAS1_V1);
    hk_handle_t *h = NULL;
    int rc = 1;

    if (!b || !b->saxpy || !b->ddot)
        return fail("table", HK_STATUS_NOT_FOUND, HK_TABLE_BLAS1_V1);
    hk_status_t st = vt->handle_create(NULL, &h);
    if (st != HK_STATUS_OK)
        return fail("handle_create", st, vt->last_error(NULL));

    float alpha = 2.0f, x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, 1};
    st = b->saxpy(h, 4, &alpha, x, 1, y, 1);
    if (st != HK_STATUS_OK) {
        fail("saxpy", st, vt->last_error(h));
        goto out;
    }
    printf("saxpy: %g %g %g %g\n", y[0], y[1], y[2], y[3]);

    double u[3] = {1, 2, 3}, v[3] = {4, 5, 6}, dot = 0;
    st = b->ddot(h, 3, u, 1, v, 1, &dot);
    if (st != HK_STATUS_OK) {
        fail("ddot", st, vt->last_error(h));
        goto out;
    }
    printf("ddot: %g\n", dot);
    rc = 0;
out:
    vt->handle_destroy(h);
    return rc;
}

int main(int argc, char **argv)
{
    hk_loader_options_t opts = {.size = sizeof opts};
    hk_loader_t *loader = NULL;
    int rc = 1;

    if (argc > 1)
        opts.default_dir = argv[1];
#ifdef HOST_PLUGIN_DIR
    else
        opts.default_dir = HOST_PLUGIN_DIR;
#endif
    hk_status_t st = hk_loader_create(&opts, &loader);
    if (st != HK_STATUS_OK)
        return fail("hk_loader_create", st, "");
    hk_loader_scan(loader);
    for (size_t i = 0; i < hk_loader_report_count(loader); i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        if (r->plugin)
            printf("plugin: %s %s\n", hk_plugin_name(r->plugin), hk_plugin_path(r->plugin));
        else
            printf("refused: %s: %s\n", r->path, r->reason);
    }
    hk_plugin_t *cpu = hk_loader_find(loader, "hk-cpu");
    if (!cpu)
        fail("find", HK_STATUS_NOT_FOUND, "hk-cpu was not loaded");
    else
        rc = run_blas1(cpu);
    hk_loader_destroy(loader);
    return rc;
}
