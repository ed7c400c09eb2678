/* hk-bench-bare: P4's handle cycle in a process without the CUDA runtime.
 *
 * hk-bench links the runtime, which keeps each device's primary context
 * for as long as the process lives; a JVM or a plain-driver host has no such
 * keeper, and there a library may build and tear down the context with its
 * handles. This program links only the loader (hk-cuda reaches the driver by
 * itself) and makes --cycles create/use/destroy cycles of a handle on
 * --device, one after the other, with no other handle alive:
 *   create   handle_create
 *   use      hk.memory/1: two allocations of 4096 floats, x = 1 copied in,
 *            y cleared; saxpy (alpha 2) and a host-mode sdot, whose result
 *            (8192) is checked; both freed
 *   destroy  handle_destroy
 * and prints one line of figures in us: the first cycle (create + use +
 * destroy), then medians over the cycles after the first,
 *   cycles N first_us F cycle_us C cycle_max_us M create_us A destroy_us D use_us U
 * where cycle is create + destroy (the use, its kernels and copies, apart).
 * hk-bench runs it for the P4 rows `cycle` and `cycle-use`; it runs alone
 * too. Exit status 0; 1 on a failure (one line "hk-bench-bare: error: ..."
 * on stderr); 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk__cli.h"
#include "hk__lat.h"
#include "hk_blas1.h"
#include "hk_loader.h"
#include "hk_memory.h"
#include "hk_status_text.h"

#define BARE_N 4096

typedef struct bare {
    hk_loader_t *loader;
    hk_plugin_t *p;
    const hk_vtable_t *vt;
    hk_blas1_v1_t blas;
    hk_memory_v1_t mem;
    int device;
    float x[BARE_N];
} bare_t;

static int bare_fail(const char *what, const char *why)
{
    fprintf(stderr, "hk-bench-bare: error: %s: %s\n", what, why);
    return -1;
}

static int bare_status(bare_t *b, hk_handle_t *h, const char *what, hk_status_t st)
{
    char err[512];
    if (st == HK_STATUS_OK)
        return 0;
    hk_plugin_last_error_copy(b->p, h, err, sizeof err, NULL);
    fprintf(stderr, "hk-bench-bare: error: %s: %s: %s\n", what, hk_status_name(st), err);
    return -1;
}

/* What a program does with a handle: memory, a copy, two ops, a check. */
static int bare_use(bare_t *b, hk_handle_t *h)
{
    const size_t bytes = sizeof b->x;
    void *dx = NULL, *dy = NULL;
    float alpha = 2.0f, dot = 0.0f;
    int rc = -1;
    if (bare_status(b, h, "alloc", b->mem.alloc(h, bytes, &dx)) != 0 ||
        bare_status(b, h, "alloc", b->mem.alloc(h, bytes, &dy)) != 0 ||
        bare_status(b, h, "copy_to_device", b->mem.copy_to_device(h, dx, b->x, bytes)) != 0 ||
        bare_status(b, h, "memset_", b->mem.memset_(h, dy, 0, bytes)) != 0 ||
        bare_status(b, h, "saxpy", b->blas.saxpy(h, BARE_N, &alpha, dx, 1, dy, 1)) != 0 ||
        bare_status(b, h, "sdot", b->blas.sdot(h, BARE_N, dx, 1, dy, 1, &dot)) != 0)
        goto out;
    if (dot != 2.0f * BARE_N) {
        fprintf(stderr, "hk-bench-bare: error: sdot gave %g, expected %d\n", (double)dot,
                2 * BARE_N);
        goto out;
    }
    rc = 0;
out:
    if (dx && bare_status(b, h, "free_", b->mem.free_(h, dx)) != 0)
        rc = -1;
    if (dy && bare_status(b, h, "free_", b->mem.free_(h, dy)) != 0)
        rc = -1;
    return rc;
}

/* One cycle: create, use, destroy; the three times in t[0..2], in ns. */
static int bare_cycle(bare_t *b, uint64_t t[3])
{
    hk_create_info_t ci = {sizeof ci, b->device, 0};
    hk_handle_t *h = NULL;
    uint64_t t0 = hk__lat_now_ns();
    hk_status_t st = b->vt->handle_create(&ci, &h);
    uint64_t t1 = hk__lat_now_ns();
    if (bare_status(b, NULL, "handle_create", st) != 0)
        return -1;
    int rc = bare_use(b, h);
    uint64_t t2 = hk__lat_now_ns();
    st = b->vt->handle_destroy(h);
    uint64_t t3 = hk__lat_now_ns();
    if (bare_status(b, NULL, "handle_destroy", st) != 0)
        rc = -1;
    t[0] = t1 - t0;
    t[1] = t2 - t1;
    t[2] = t3 - t2;
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n-1] in us (v is sorted). */
static double median_us(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    return (n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0) / 1e3;
}

/* The cycles, then the line of figures. */
static int bare_run(bare_t *b, int cycles)
{
    uint64_t *v = calloc(4 * (size_t)cycles, sizeof *v), first = 0;
    size_t n = (size_t)cycles - 1;
    int rc = -1;
    if (!v)
        return bare_fail("cycles", "out of host memory");
    for (int i = 0; i < cycles; i++) {
        uint64_t t[3];
        if (bare_cycle(b, t) != 0)
            goto out;
        if (i == 0) {
            first = t[0] + t[1] + t[2];
            continue;
        }
        v[i - 1] = t[0] + t[2];     /* the cycle: create + destroy */
        v[n + i - 1] = t[0];        /* create */
        v[2 * n + i - 1] = t[2];    /* destroy */
        v[3 * n + i - 1] = t[1];    /* use */
    }
    double max = 0.0;
    for (size_t i = 0; i < n; i++)
        max = (double)v[i] / 1e3 > max ? (double)v[i] / 1e3 : max;
    printf("cycles %d first_us %.1f cycle_us %.2f cycle_max_us %.1f create_us %.2f destroy_us "
           "%.2f use_us %.2f\n",
           cycles, (double)first / 1e3, median_us(v, n), max, median_us(v + n, n),
           median_us(v + 2 * n, n), median_us(v + 3 * n, n));
    rc = fflush(stdout) == 0 ? 0 : bare_fail("stdout", "cannot write");
out:
    free(v);
    return rc;
}

static int bare_open(bare_t *b, const char *path)
{
    hk_loader_options_t lo = {.size = sizeof lo, .ignore_env = 1};
    hk_status_t st = hk_loader_create(&lo, &b->loader);
    if (st != HK_STATUS_OK)
        return bare_fail("hk_loader_create", hk_status_name(st));
    if (hk_loader_open(b->loader, path, &b->p) != HK_STATUS_OK)
        return bare_fail("cannot load the plugin", hk_loader_last_error(b->loader));
    b->vt = hk_plugin_vtable(b->p);
    if (hk_plugin_get_table(b->p, HK_TABLE_BLAS1_V1, &b->blas, sizeof b->blas) != HK_STATUS_OK ||
        hk_plugin_get_table(b->p, HK_TABLE_MEMORY_V1, &b->mem, sizeof b->mem) != HK_STATUS_OK ||
        !b->blas.saxpy || !b->blas.sdot || !b->mem.alloc || !b->mem.free_ ||
        !b->mem.copy_to_device || !b->mem.memset_)
        return bare_fail(path, "no hk.blas1/1 or hk.memory/1 with saxpy, sdot and the copies");
    for (int i = 0; i < BARE_N; i++)
        b->x[i] = 1.0f;
    return 0;
}

enum { OPT_PLUGIN = 1, OPT_DEVICE, OPT_CYCLES };

static const hk__cli_opt_t bare_options[] = {
    {OPT_PLUGIN, 0, "plugin", "PATH", "the plugin (hk-cuda.so) to measure"},
    {OPT_DEVICE, 0, "device", "N", "the device, 0 to 1024 (default 0)"},
    {OPT_CYCLES, 0, "cycles", "N", "cycles, 2 to 100000 (default 64)"},
    {0, 0, NULL, NULL, NULL},
};

/* Returns -1 to go on, else the exit status. */
static int bare_parse(int argc, char **argv, const char **path, int *device, int *cycles)
{
    hk__cli_t c;
    int id;
    long long v;
    hk__cli_init(&c, bare_options, argc, argv);
    while ((id = hk__cli_next(&c)) != HK__CLI_END) {
        if (id == HK__CLI_HELP) {
            printf("usage: hk-bench-bare --plugin PATH [--device N] [--cycles N]\n");
            hk__cli_print_options(stdout, bare_options, NULL);
            return 0;
        }
        if (id == OPT_PLUGIN) {
            *path = c.value;
            continue;
        }
        if (id == HK__CLI_OPERAND)
            snprintf(c.error, sizeof c.error, "unexpected argument '%.200s'", c.arg);
        else if ((id == OPT_DEVICE || id == OPT_CYCLES) &&
                 hk__cli_number(&c, c.value, id == OPT_DEVICE ? 0 : 2,
                                id == OPT_DEVICE ? 1024 : 100000, &v) == 0) {
            *(id == OPT_DEVICE ? device : cycles) = (int)v;
            continue;
        }
        fprintf(stderr, "hk-bench-bare: %s (hk-bench-bare --help for usage)\n", c.error);
        return 2;
    }
    if (*path)
        return -1;
    fprintf(stderr, "hk-bench-bare: --plugin is missing (hk-bench-bare --help for usage)\n");
    return 2;
}

int main(int argc, char **argv)
{
    static bare_t b; /* x is 16 KiB: not on the stack */
    const char *path = NULL;
    int cycles = 64, rc = bare_parse(argc, argv, &path, &b.device, &cycles);
    if (rc >= 0)
        return rc;
    rc = bare_open(&b, path) == 0 && bare_run(&b, cycles) == 0 ? 0 : 1;
    if (b.loader && hk_loader_destroy(b.loader) != HK_STATUS_OK && rc == 0)
        rc = bare_fail("hk_loader_destroy", hk_loader_last_error(b.loader)) ? 1 : 0;
    return rc;
}
