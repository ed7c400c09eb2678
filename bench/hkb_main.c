/* hk-bench: options, set-up, the order of the figures, and the exit code.
 *
 * Exit status: 0 when every selected figure was measured (MISS rows included,
 * unless --strict), 1 on any failure (one line "hk-bench: error: ..." on
 * stderr), 2 on a usage error, 3 with --strict when a row missed its target. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk__cli.h"
#include "hkb.h"

/* The figure running now, for the watchdog's message. Only ever points to
 * string literals, so the signal handler may read it. */
static const char *volatile stage = "set-up";

static void write_str(const char *s)
{
    size_t len = strlen(s);
    while (len > 0) {
        ssize_t w = write(STDERR_FILENO, s, len);
        if (w <= 0)
            return;
        s += w;
        len -= (size_t)w;
    }
}

/* A hung kernel or a deadlocked call would otherwise hold a remote machine
 * until its own limit, and say nothing. Only async-signal-safe calls here. */
static void on_alarm(int sig)
{
    (void)sig;
    write_str("\nhk-bench: error: timed out in ");
    write_str(stage);
    write_str(" (--timeout): a call or a kernel did not return\n");
    _exit(1);
}

enum { HKB_OPT_QUICK = 1, HKB_OPT_ONLY, HKB_OPT_CSV, HKB_OPT_PLUGIN, HKB_OPT_PLUGIN_B,
       HKB_OPT_DEVICE, HKB_OPT_STRICT, HKB_OPT_TIMEOUT, HKB_OPT_EXAMPLE, HKB_OPT_HOLD_AFTER,
       HKB_OPT_HOLD_MAX };

/* The options, read by the programs' common parser (common/prog/hk__cli.h). */
static const hk__cli_opt_t hkb_options[] = {
    {HKB_OPT_QUICK, 0, "quick", NULL, "fewer repetitions and sizes; well under a minute"},
    {HKB_OPT_ONLY, 0, "only", "LIST",
     "figures to run, among P1 P2 P3 P4 P5 P6 P8 P9 P10\n"
     "(default: all)"},
    {HKB_OPT_CSV, 0, "csv", "FILE", "also write the rows to FILE as CSV"},
    {HKB_OPT_PLUGIN, 0, "plugin", "PATH", "hk-cuda.so to measure (default: next to the program)"},
    {HKB_OPT_PLUGIN_B, 0, "plugin-b", "PATH",
     "the second build of hk-cuda that P8 swaps with\n"
     "(default: ../tests/swap_plugins/hk-cuda-1.0.1.so\n"
     "next to the program)"},
    {HKB_OPT_EXAMPLE, 0, "example", "A,B",
     "two builds of hk-example (a plugin without hk.blas1/1)\n"
     "that P8 also swaps between, its own ops through pins"},
    {HKB_OPT_DEVICE, 0, "device", "N",
     "device of P1..P5, P8, P9, 0 to 1024 (default 0); P6\n"
     "uses devices 0 and 1"},
    {HKB_OPT_HOLD_AFTER, 0, "hold-after", "US",
     "P8's swaps hold the calls after a step ran US\n"
     "microseconds (hk_swap_options_t.hold_after_us; default:\n"
     "the loader's, 2000; -1: never)"},
    {HKB_OPT_HOLD_MAX, 0, "hold-max", "US",
     "P8's holds last US microseconds at most\n"
     "(hk_swap_options_t.hold_max_us; default: the loader's,\n"
     "400; -1: no limit)"},
    {HKB_OPT_STRICT, 0, "strict", NULL, "exit 3 when a row misses its target"},
    {HKB_OPT_TIMEOUT, 0, "timeout", "S",
     "give up after S seconds, 0 to 86400 (default 480;\n"
     "0: never)"},
    {0, 0, NULL, NULL, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: hk-bench [--quick] [--only P1,P2,...] [--csv FILE] [--plugin PATH]\n"
               "                [--plugin-b PATH] [--example A,B] [--device N] [--strict]\n"
               "                [--hold-after US] [--hold-max US] [--timeout S]\n");
    hk__cli_print_options(f, hkb_options, NULL);
}

/* Parses "P1,P3" into want[1..6], want[8..10]. Returns 0 or -1 on an
 * unknown name (P7 is test_loader's, not the bench's). */
static int parse_only(const char *list, int want[11])
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", list);
    memset(want, 0, 11 * sizeof *want);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int p = tok[0] == 'P' || tok[0] == 'p', p10 = p && strcmp(tok + 1, "10") == 0;
        if (!p10 && (!p || tok[1] < '1' || tok[1] > '9' || tok[1] == '7' || tok[2])) {
            fprintf(stderr, "hk-bench: --only: unknown figure '%s' (use P1..P6, P8..P10)\n",
                    tok);
            return -1;
        }
        want[p10 ? 10 : tok[1] - '0'] = 1;
    }
    return 0;
}

static int print_setup(int device, int *ndev)
{
    int drv = 0, rt = 0, major = 0, minor = 0, patch = 0;
    struct cudaDeviceProp prop;

    /* The first runtime call: on a machine without a driver or a GPU this is
     * where the bench stops, with the runtime's reason. */
    cudaError_t e = cudaGetDeviceCount(ndev);
    if (e != cudaSuccess) {
        /* The runtime says "driver version is insufficient" also when there
         * is no driver at all; the loader's own words are clearer. */
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        const char *why = lib ? NULL : dlerror();
        if (lib)
            dlclose(lib);
        return hkb_fail("no usable CUDA device: cudaGetDeviceCount: %s (%s)%s%s",
                        cudaGetErrorString(e), cudaGetErrorName(e),
                        why ? "; the NVIDIA driver is missing: " : "", why ? why : "");
    }
    if (*ndev < 1)
        return hkb_fail("no CUDA device");
    if (device < 0 || device >= *ndev)
        return hkb_fail("--device %d: the machine has %d device(s)", device, *ndev);
    HKB_CUDA(cudaDriverGetVersion(&drv), fail);
    HKB_CUDA(cudaRuntimeGetVersion(&rt), fail);
    HKB_CUDA(cudaGetDeviceProperties(&prop, device), fail);
    HKB_CUBLAS(cublasGetProperty(MAJOR_VERSION, &major), fail);
    HKB_CUBLAS(cublasGetProperty(MINOR_VERSION, &minor), fail);
    HKB_CUBLAS(cublasGetProperty(PATCH_LEVEL, &patch), fail);
    printf("device %d of %d: %s (sm_%d%d, %.0f GiB); driver %d.%d, runtime %d.%d, cuBLAS %d.%d.%d\n",
           device, *ndev, prop.name, prop.major, prop.minor,
           (double)prop.totalGlobalMem / 1073741824.0, drv / 1000, drv % 1000 / 10, rt / 1000,
           rt % 1000 / 10, major, minor, patch);
    return 0;
fail:
    return -1;
}

/* What the command line asks for. */
typedef struct hkb_args {
    hkb_opts_t o;
    const char *csv, *plugin_path, *plugin_b;
    char *example_a; /* --example's first path (its own copy) */
    int want[11]; /* want[k]: run figure Pk */
    long long timeout;
    int strict;
} hkb_args_t;

/* One option into *a. Returns 0, or -1 with one line on stderr. */
static int hkb_apply(hk__cli_t *c, int id, hkb_args_t *a)
{
    long long v;
    switch (id) {
    case HKB_OPT_QUICK: a->o.quick = 1; return 0;
    case HKB_OPT_STRICT: a->strict = 1; return 0;
    case HKB_OPT_ONLY: a->o.only = c->value; return parse_only(c->value, a->want);
    case HKB_OPT_CSV: a->csv = c->value; return 0;
    case HKB_OPT_PLUGIN: a->plugin_path = c->value; return 0;
    case HKB_OPT_PLUGIN_B: a->plugin_b = c->value; return 0;
    case HKB_OPT_EXAMPLE: {
        const char *comma = strchr(c->value, ',');
        if (!comma || comma == c->value || !comma[1]) {
            fprintf(stderr, "hk-bench: --example: give two paths, A,B (hk-bench --help for "
                    "usage)\n");
            return -1;
        }
        a->example_a = strndup(c->value, (size_t)(comma - c->value));
        a->o.example_a = a->example_a;
        a->o.example_b = comma + 1;
        return a->example_a ? 0 : -1;
    }
    case HKB_OPT_DEVICE:
        if (hk__cli_number(c, c->value, 0, 1024, &v) != 0)
            break;
        a->o.device = (int)v;
        return 0;
    case HKB_OPT_TIMEOUT:
        if (hk__cli_number(c, c->value, 0, 86400, &a->timeout) != 0)
            break;
        return 0;
    case HKB_OPT_HOLD_AFTER:
        if (hk__cli_number(c, c->value, -1, 86400000000LL, &a->o.hold_after_us) != 0)
            break;
        return 0;
    case HKB_OPT_HOLD_MAX:
        if (hk__cli_number(c, c->value, -1, 86400000000LL, &a->o.hold_max_us) != 0)
            break;
        return 0;
    }
    fprintf(stderr, "hk-bench: %s (hk-bench --help for usage)\n", c->error);
    return -1;
}

/* Fills *a from the command line. Returns -1 to go on, else the exit
 * status (0 after --help, 2 on bad usage). */
static int hkb_parse(int argc, char **argv, hkb_args_t *a)
{
    static const int all[11] = {0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1};
    hk__cli_t c;
    int id;
    memset(a, 0, sizeof *a);
    memcpy(a->want, all, sizeof all);
    a->timeout = 480;
    hk__cli_init(&c, hkb_options, argc, argv);
    while ((id = hk__cli_next(&c)) != HK__CLI_END) {
        if (id == HK__CLI_HELP) {
            usage(stdout);
            return 0;
        }
        if (id == HK__CLI_OPERAND)
            snprintf(c.error, sizeof c.error, "unexpected argument '%.200s'", c.arg);
        if (id == HK__CLI_ERROR || id == HK__CLI_OPERAND) {
            fprintf(stderr, "hk-bench: %s (hk-bench --help for usage)\n", c.error);
            return 2;
        }
        if (hkb_apply(&c, id, a) != 0)
            return 2;
    }
    return -1;
}

/* The --timeout watchdog. Returns 0 or -1 with one line on stderr. */
static int hkb_watchdog(long long seconds)
{
    struct sigaction sa;
    if (seconds == 0)
        return 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    if (sigaction(SIGALRM, &sa, NULL) != 0) {
        fprintf(stderr, "hk-bench: error: cannot install the --timeout handler\n");
        return -1;
    }
    alarm((unsigned)seconds);
    return 0;
}

/* The figures measured on one lane: P1, P2, P3, P10 and P9. Returns 0 or -1
 * (hkb_failure says why). */
static int hkb_lane_figures(hkb_plugin_t *plug, const hkb_opts_t *o, const int *want)
{
    hkb_lane_t lane;
    int rc = -1, up = 0;
    if (!(want[1] || want[2] || want[3] || want[9] || want[10]))
        return 0;
    hkb_where("lane set-up on device %d", o->device);
    HKB_TRY(hkb_lane_init(&lane, plug, o->device), out);
    up = 1;
    hkb_where("%s", "");
    stage = "P1/P2";
    if (want[1] || want[2])
        HKB_TRY(hkb_fig_stream(&lane, o, want[1], want[2]), out);
    stage = "P3";
    if (want[3])
        HKB_TRY(hkb_fig_enqueue(&lane, o), out);
    stage = "P10";
    if (want[10])
        HKB_TRY(hkb_fig_kernels(&lane, o), out);
    stage = "P9";
    if (want[9])
        HKB_TRY(hkb_fig_moved_calls(&lane, o), out);
    rc = 0;
out:
    if (up)
        hkb_lane_fini(&lane);
    return rc == 0 && hkb_failure() ? -1 : rc;
}

int main(int argc, char **argv)
{
    hkb_args_t a;
    char default_path[4096], default_b[4096];
    int ndev = 0, rc = hkb_parse(argc, argv, &a), misses = 0;
    const hkb_opts_t *o = &a.o;
    hkb_plugin_t plug;

    if (rc >= 0)
        return rc;
    rc = 1;
    const char *plugin_path = a.plugin_path, *plugin_b = a.plugin_b;
    if (!plugin_path)
        plugin_path = hkb_plugin_default_path(default_path, sizeof default_path);
    if (!plugin_b)
        plugin_b = hkb_plugin_b_default_path(default_b, sizeof default_b);
    if (hkb_watchdog(a.timeout) != 0)
        return 1;
#ifdef HK_DEBUG
    printf("note: hk-bench built with mode=debug; build mode=release for figures that count\n");
#endif
    HKB_TRY(hkb_plugin_open(&plug, plugin_path), out);
    printf("plugin %s %s, ABI %u.%u, %s\n", plug.name, plug.version,
           HK_ABI_VERSION_MAJOR(plug.abi), HK_ABI_VERSION_MINOR(plug.abi), plug.path);
    fflush(stdout); /* the watchdog's _exit would drop buffered lines */
    HKB_TRY(print_setup(o->device, &ndev), out);
    /* Make the runtime's primary context now, so that P4 times handle
     * creation and not the context's birth (which cuBLAS would pay too). */
    HKB_CUDA(cudaSetDevice(o->device), out);
    HKB_CUDA(cudaFree(NULL), out);
    hkb_report_header();

    /* P4 first: it measures the first hk handle of the process. */
    stage = "P4";
    if (a.want[4])
        HKB_TRY(hkb_fig_handles(&plug, o), out);
    HKB_TRY(hkb_lane_figures(&plug, o, a.want), out);
    stage = "P5";
    if (a.want[5])
        HKB_TRY(hkb_fig_threads(&plug, o), out);
    stage = "P6";
    if (a.want[6]) {
        if (ndev < 2)
            printf("P6: skipped (%d device)\n", ndev);
        else
            HKB_TRY(hkb_fig_devices(&plug, o), out);
    }
    stage = "P8";
    if (a.want[8]) {
        /* Last, with the bench's own loader gone: the build each swap leaves
         * is then really closed, and reopened by the next (hk-cuda is
         * unload-safe, and nothing of it is in use any more). */
        char path_a[sizeof plug.path];
        snprintf(path_a, sizeof path_a, "%s", plug.path);
        hkb_plugin_close(&plug);
        HKB_TRY(hkb_fig_swap(path_a, plugin_b, o), out);
    }
    stage = "the summary";
    rc = 0;
out:
    /* After an early failure an empty table says nothing: skip it. */
    if (hkb_report_count() > 0 || !hkb_failure())
        misses = hkb_report_summary();
    if (a.csv && hkb_report_csv(a.csv) == 0)
        printf("rows written to %s\n", a.csv);
    if (hkb_failure()) {
        fflush(stdout);
        fprintf(stderr, "hk-bench: error: %s\n", hkb_failure());
        rc = 1;
    } else if (a.strict && misses) {
        rc = 3;
    }
    hkb_report_free();
    free(a.example_a);
    /* The plugin stays mapped until exit (unless P8 ran): hk-cuda is
     * unload-safe, but nothing is gained by closing it here. */
    return rc;
}
