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

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hk-bench [--quick] [--only P1,P2,...] [--csv FILE] [--plugin PATH]\n"
            "                [--plugin-b PATH] [--device N] [--strict] [--timeout S]\n"
            "  --quick        fewer repetitions and sizes; well under a minute\n"
            "  --only LIST    figures to run, among P1 P2 P3 P4 P5 P6 P8 P9 P10\n"
            "                 (default: all)\n"
            "  --csv FILE     also write the rows to FILE as CSV\n"
            "  --plugin PATH  hk-cuda.so to measure (default: next to the program)\n"
            "  --plugin-b PATH  the second build of hk-cuda that P8 swaps with (default:\n"
            "                 ../tests/swap_plugins/hk-cuda-1.0.1.so next to the program)\n"
            "  --device N     device of P1..P5, P8, P9 (default 0); P6 uses devices 0 and 1\n"
            "  --strict       exit 3 when a row misses its target\n"
            "  --timeout S    give up after S seconds (default 480; 0: never)\n");
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

int main(int argc, char **argv)
{
    hkb_opts_t o = {0, 0, NULL};
    const char *csv = NULL, *plugin_path = NULL, *plugin_b = NULL;
    char default_path[4096], default_b[4096];
    int want[11] = {0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1};
    long timeout = 480;
    int strict = 0, ndev = 0, rc = 1, misses = 0, lane_up = 0;
    hkb_plugin_t plug;
    hkb_lane_t lane;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (strcmp(a, "--quick") == 0) {
            o.quick = 1;
        } else if (strcmp(a, "--strict") == 0) {
            strict = 1;
        } else if (strcmp(a, "--only") == 0 && has_val) {
            o.only = argv[++i];
            if (parse_only(o.only, want) != 0)
                return 2;
        } else if (strcmp(a, "--csv") == 0 && has_val) {
            csv = argv[++i];
        } else if (strcmp(a, "--plugin") == 0 && has_val) {
            plugin_path = argv[++i];
        } else if (strcmp(a, "--plugin-b") == 0 && has_val) {
            plugin_b = argv[++i];
        } else if (strcmp(a, "--device") == 0 && has_val) {
            char *end = NULL;
            long d = strtol(argv[++i], &end, 10);
            if (!end || *end || d < 0 || d > 1024) {
                fprintf(stderr, "hk-bench: --device: not a device ordinal: %s\n", argv[i]);
                return 2;
            }
            o.device = (int)d;
        } else if (strcmp(a, "--timeout") == 0 && has_val) {
            char *end = NULL;
            timeout = strtol(argv[++i], &end, 10);
            if (!end || *end || timeout < 0 || timeout > 86400) {
                fprintf(stderr, "hk-bench: --timeout: not a number of seconds: %s\n", argv[i]);
                return 2;
            }
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "hk-bench: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!plugin_path)
        plugin_path = hkb_plugin_default_path(default_path, sizeof default_path);
    if (!plugin_b)
        plugin_b = hkb_plugin_b_default_path(default_b, sizeof default_b);
    if (timeout > 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        if (sigaction(SIGALRM, &sa, NULL) != 0) {
            fprintf(stderr, "hk-bench: error: cannot install the --timeout handler\n");
            return 1;
        }
        alarm((unsigned)timeout);
    }

#ifdef HK_DEBUG
    printf("note: hk-bench built with mode=debug; build mode=release for figures that count\n");
#endif
    HKB_TRY(hkb_plugin_open(&plug, plugin_path), out);
    printf("plugin %s %s, ABI %u.%u, %s\n", plug.name, plug.version,
           HK_ABI_VERSION_MAJOR(plug.abi), HK_ABI_VERSION_MINOR(plug.abi), plug.path);
    fflush(stdout); /* the watchdog's _exit would drop buffered lines */
    HKB_TRY(print_setup(o.device, &ndev), out);
    /* Make the runtime's primary context now, so that P4 times handle
     * creation and not the context's birth (which cuBLAS would pay too). */
    HKB_CUDA(cudaSetDevice(o.device), out);
    HKB_CUDA(cudaFree(NULL), out);
    hkb_report_header();

    /* P4 first: it measures the first hk handle of the process. */
    stage = "P4";
    if (want[4])
        HKB_TRY(hkb_fig_handles(&plug, &o), out);
    if (want[1] || want[2] || want[3] || want[9] || want[10]) {
        hkb_where("lane set-up on device %d", o.device);
        HKB_TRY(hkb_lane_init(&lane, &plug, o.device), out);
        lane_up = 1;
        hkb_where("%s", "");
        stage = "P1/P2";
        if (want[1] || want[2])
            HKB_TRY(hkb_fig_stream(&lane, &o, want[1], want[2]), out);
        stage = "P3";
        if (want[3])
            HKB_TRY(hkb_fig_enqueue(&lane, &o), out);
        stage = "P10";
        if (want[10])
            HKB_TRY(hkb_fig_kernels(&lane, &o), out);
        stage = "P9";
        if (want[9])
            HKB_TRY(hkb_fig_moved_calls(&lane, &o), out);
        lane_up = 0;
        hkb_lane_fini(&lane);
        HKB_TRY(hkb_failure() ? -1 : 0, out);
    }
    stage = "P5";
    if (want[5])
        HKB_TRY(hkb_fig_threads(&plug, &o), out);
    stage = "P6";
    if (want[6]) {
        if (ndev < 2)
            printf("P6: skipped (%d device)\n", ndev);
        else
            HKB_TRY(hkb_fig_devices(&plug, &o), out);
    }
    stage = "P8";
    if (want[8]) {
        /* Last, with the bench's own loader gone: the build each swap leaves
         * is then really closed, and reopened by the next (hk-cuda is
         * unload-safe, and nothing of it is in use any more). */
        char path_a[sizeof plug.path];
        snprintf(path_a, sizeof path_a, "%s", plug.path);
        hkb_plugin_close(&plug);
        HKB_TRY(hkb_fig_swap(path_a, plugin_b, &o), out);
    }
    stage = "the summary";
    rc = 0;
out:
    if (lane_up)
        hkb_lane_fini(&lane);
    /* After an early failure an empty table says nothing: skip it. */
    if (hkb_report_count() > 0 || !hkb_failure())
        misses = hkb_report_summary();
    if (csv && hkb_report_csv(csv) == 0)
        printf("rows written to %s\n", csv);
    if (hkb_failure()) {
        fflush(stdout);
        fprintf(stderr, "hk-bench: error: %s\n", hkb_failure());
        rc = 1;
    } else if (strict && misses) {
        rc = 3;
    }
    hkb_report_free();
    /* The plugin stays mapped until exit (unless P8 ran): hk-cuda is
     * unload-safe, but nothing is gained by closing it here. */
    return rc;
}
