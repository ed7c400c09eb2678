/* A host written against the previous ABI minor's headers (v1.1/, as they
 * were released; compiled without plugin_api/) and linked with today's
 * libhkloader.so, as a program built then and never rebuilt runs after an
 * upgrade of the loader. For each plugin file named on the command line it
 * opens the plugin with the options struct of then, checks the answer and
 * the vtable copy through the accessors of then, and computes saxpy, sdot,
 * dnrm2 and a strided scopy through hk.blas1/1 and hk.memory/1, compared
 * with a host reference. One line per plugin: "PATH: NAME VERSION abi 1.M:
 * ok" or "PATH: <what failed>". Exit status: the number of plugins that
 * failed (2 for bad usage).
 *
 * usage: prev_host [-m] PLUGIN.so...
 *   -m  abi_max = HK_ABI_CURRENT as compiled (1.1): hold the plugins to the
 *       minor of this host's headers. Without it abi_max is 0, the loader
 *       library's own current minor, which may be newer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_blas1.h"
#include "hk_loader.h"
#include "hk_memory.h"

#define N 1000

typedef struct run {
    const hk_vtable_t *vt;
    const hk_blas1_v1_t *b;
    const hk_memory_v1_t *m;
    hk_handle_t *h;
    char why[300];
} run_t;

static int check(run_t *r, hk_status_t st, const char *what)
{
    if (st == HK_STATUS_OK)
        return 0;
    snprintf(r->why, sizeof r->why, "%s: status %d: %s", what, (int)st, r->vt->last_error(r->h));
    return -1;
}

/* The workload on device buffers dx, dy of N floats and dz of N doubles. */
static int compute(run_t *r, float *dx, float *dy, double *dz)
{
    float x[N], y[N], got[N], alpha = 2.5f, dot = 0;
    double z[N], nrm = 0, want_dot = 0, want_nrm = 0;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 17) - 8;
        y[i] = (float)(i % 5);
        z[i] = (i % 2 ? -1e150 : 3e150) / (1 + i % 7);
    }
    if (check(r, r->m->copy_to_device(r->h, dx, x, sizeof x), "copy_to_device") ||
        check(r, r->m->copy_to_device(r->h, dy, y, sizeof y), "copy_to_device") ||
        check(r, r->m->copy_to_device(r->h, dz, z, sizeof z), "copy_to_device") ||
        check(r, r->b->saxpy(r->h, N, &alpha, dx, 1, dy, 1), "saxpy") ||
        check(r, r->b->sdot(r->h, N, dx, 1, dy, 1, &dot), "sdot") ||
        check(r, r->b->dnrm2(r->h, N, dz, 1, &nrm), "dnrm2") ||
        check(r, r->vt->synchronize(r->h), "synchronize") ||
        check(r, r->m->copy_to_host(r->h, got, dy, sizeof got), "copy_to_host"))
        return -1;
    for (int i = 0; i < N; i++) {
        float want = y[i] + alpha * x[i];
        if (got[i] != want) {
            snprintf(r->why, sizeof r->why, "saxpy: y[%d] is %g, want %g", i, got[i], want);
            return -1;
        }
        want_dot += (double)x[i] * want;
        want_nrm += (z[i] / 1e150) * (z[i] / 1e150);
    }
    want_nrm = sqrt(want_nrm) * 1e150;
    if (fabs(dot - want_dot) > 1e-4 * fabs(want_dot) || fabs(nrm - want_nrm) > 1e-12 * want_nrm) {
        snprintf(r->why, sizeof r->why, "sdot %g (want %g) or dnrm2 %g (want %g) wrong", dot,
                 want_dot, nrm, want_nrm);
        return -1;
    }
    /* every other element of x, backwards, into y */
    if (check(r, r->b->scopy(r->h, N / 2, dx, -2, dy, 1), "scopy") ||
        check(r, r->m->copy_to_host(r->h, got, dy, sizeof got), "copy_to_host"))
        return -1;
    for (int i = 0; i < N / 2; i++)
        if (got[i] != x[N - 2 - 2 * i]) {
            snprintf(r->why, sizeof r->why, "scopy: y[%d] is %g, want %g", i, got[i],
                     x[N - 2 - 2 * i]);
            return -1;
        }
    return 0;
}

/* The handle's life on plugin p: tables, info, memory, the workload. */
static int use(run_t *r, hk_plugin_t *p)
{
    r->b = hk_plugin_table(p, HK_TABLE_BLAS1_V1);
    r->m = hk_plugin_table(p, HK_TABLE_MEMORY_V1);
    if (!r->b || !r->m || r->b->size < sizeof *r->b || r->m->size < sizeof *r->m) {
        snprintf(r->why, sizeof r->why, "no whole hk.blas1/1 or hk.memory/1 table");
        return -1;
    }
    hk_create_info_t info = {.size = sizeof info, .device = HK_DEVICE_CURRENT, .flags = 0};
    if (check(r, r->vt->handle_create(&info, &r->h), "handle_create"))
        return -1;
    hk_handle_info_t hi = {.size = sizeof hi};
    void *dx = NULL, *dy = NULL, *dz = NULL;
    int rc = check(r, r->vt->handle_info(r->h, &hi), "handle_info");
    if (rc == 0 && (hi.size != sizeof hi || !hi.plugin_name ||
                    strcmp(hi.plugin_name, hk_plugin_name(p)) != 0)) {
        snprintf(r->why, sizeof r->why, "handle_info: size %u, plugin %s", (unsigned)hi.size,
                 hi.plugin_name ? hi.plugin_name : "(null)");
        rc = -1;
    }
    if (rc == 0)
        rc = check(r, r->m->alloc(r->h, N * sizeof(float), &dx), "alloc") ||
             check(r, r->m->alloc(r->h, N * sizeof(float), &dy), "alloc") ||
             check(r, r->m->alloc(r->h, N * sizeof(double), &dz), "alloc") ||
             compute(r, dx, dy, dz) ? -1 : 0;
    r->m->free_(r->h, dx);
    r->m->free_(r->h, dy);
    r->m->free_(r->h, dz);
    if (check(r, r->vt->handle_destroy(r->h), "handle_destroy"))
        rc = -1;
    return rc;
}

static int one(hk_loader_t *loader, const char *path, int pin)
{
    hk_plugin_t *p = NULL;
    run_t r;
    memset(&r, 0, sizeof r);
    hk_status_t st = hk_loader_open(loader, path, &p);
    if (st != HK_STATUS_OK) {
        printf("%s: open: status %d: %s\n", path, (int)st, hk_loader_last_error(loader));
        return 1;
    }
    r.vt = hk_plugin_vtable(p);
    uint32_t abi = hk_plugin_abi(p);
    /* The same major, at least the minor this host knows, at most what it
     * asked for, and the 1.1 slots there. */
    if (HK_ABI_VERSION_MAJOR(abi) != HK_ABI_MAJOR || abi < HK_ABI_CURRENT ||
        (pin && abi > HK_ABI_CURRENT) || !r.vt->handle_info || !r.vt->synchronize) {
        printf("%s: negotiated abi %u.%u (this host knows %d.%d)\n", path,
               HK_ABI_VERSION_MAJOR(abi), HK_ABI_VERSION_MINOR(abi), HK_ABI_MAJOR, HK_ABI_MINOR);
        return 1;
    }
    if (use(&r, p) != 0) {
        printf("%s: %s\n", path, r.why);
        return 1;
    }
    printf("%s: %s %s abi %u.%u: ok\n", path, hk_plugin_name(p), hk_plugin_version(p),
           HK_ABI_VERSION_MAJOR(abi), HK_ABI_VERSION_MINOR(abi));
    return 0;
}

int main(int argc, char **argv)
{
    int pin = argc > 1 && strcmp(argv[1], "-m") == 0;
    if (argc < 2 + pin) {
        fprintf(stderr, "usage: %s [-m] PLUGIN.so...\n", argv[0]);
        return 2;
    }
    hk_loader_options_t o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o; /* the options of ABI 1.1: today's loader reads only these */
    o.ignore_env = 1;
    o.abi_max = pin ? HK_ABI_CURRENT : 0;
    hk_loader_t *loader = NULL;
    hk_status_t st = hk_loader_create(&o, &loader);
    if (st != HK_STATUS_OK) {
        printf("hk_loader_create: status %d: %s\n", (int)st, hk_loader_last_error(NULL));
        return 2;
    }
    int failed = 0;
    for (int i = 1 + pin; i < argc; i++)
        failed += one(loader, argv[i], pin);
    hk_loader_destroy(loader);
    return failed;
}
