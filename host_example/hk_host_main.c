/* hk-host: list, inspect, run, validate and benchmark handlekit plugins.
 *
 * Options before the command apply to it; commands that take hk-host's
 * options (list, info, run) also accept them after the command, while
 * commands that run another program (validate, bench) pass everything after
 * their name on untouched. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_host.h"

#ifndef HK_HOST_HANDLEKIT_VERSION
#define HK_HOST_HANDLEKIT_VERSION "unknown"
#endif

/* One subcommand. opts: the hk-host options it takes, as their short letters
 * ('j' is --json); NULL: it takes none and gets every argument after its
 * name in hk_host_opts_t.argc/argv. */
typedef struct hk_host_cmd {
    const char *name;
    int (*fn)(const hk_host_opts_t *opts);
    const char *opts;
    const char *synopsis;
    const char *help;
} hk_host_cmd_t;

static const hk_host_cmd_t commands[] = {
    {"list", hk_host_cmd_list, "vj", "list [--json]",
     "every plugin found (name, version, ABI, path); * marks the one each name\n"
     "selects, with the reason under the others; every refused candidate"},
    {"info", hk_host_cmd_info, "pdvj", "info [-p REQUEST] [-d DEV] [--json]",
     "the plugin's ABI, flags, tables and their sizes, and how a handle binds\n"
     "(exit status 1 when no handle can be made; the rest is shown still)"},
    {"run", hk_host_cmd_run, "pndsvj", "run [-p REQUEST] [-n N] [-d DEV] [-s SEED] [--json]",
     "a verified workload: every hk.blas1/1 op in float and double, in host and\n"
     "device pointer mode; exits non-zero on a wrong result"},
    {"validate", hk_host_cmd_validate, NULL, "validate PLUGIN.so [ARGS...]",
     "runs hk-validate (beside hk-host) with these arguments; its exit status"},
    {"bench", hk_host_cmd_bench, NULL,
     "bench [--csv FILE] [--plot DIR] [--compare OLD.csv [--tolerance SPEC]...] [ARGS...]",
     "runs hk-bench (beside hk-host; built with nvcc and cuBLAS) with ARGS and\n"
     "writes its CSV to FILE; --plot draws every figure into DIR; --compare\n"
     "flags ratios worse than OLD.csv's by more than the run-to-run tolerance\n"
     "(default 5 %, P4 50 %; SPEC is PCT or FIGURE=PCT, e.g. P2=10) and exits 1\n"
     "then; exit status otherwise hk-bench's (3: a missed target under --strict)"},
    {"swap", hk_host_cmd_swap_args, NULL,
     "swap -p A -q B [-t THREADS] [-k SWAPS] [-n N] [-w MS]",
     "threads call through movable handles, every result checked, while the\n"
     "implementation is swapped between A and B (hk-host swap -h for details;\n"
     "docs/swap.md)"},
};
#define HK_HOST_NCMDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: hk-host [options] <command> [options]\n"
               "       hk-host --version | --help\n"
               "commands:\n");
    for (size_t i = 0; i < HK_HOST_NCMDS; i++) {
        fprintf(f, "  %s\n      ", commands[i].synopsis);
        for (const char *c = commands[i].help; *c; c++) {
            if (*c == '\n')
                fputs("\n      ", f);
            else
                fputc(*c, f);
        }
        fputc('\n', f);
    }
    fprintf(
        f,
        "options:\n"
        "  -p, --plugin REQUEST    the plugin: NAME (its highest release), NAME@RANGE\n"
        "                          (e.g. hk-cuda@^1, hk-cpu@~1.0, 'hk-cuda@>=1.0, <2',\n"
        "                          hk-cuda@1.0.0) or a path to a .so file; default:\n"
        "                          hk-cuda when a handle can be made on it, else\n"
        "                          hk-cpu, saying why\n"

        "  -n, --size N            vector length for run (default 1048576)\n"
        "  -d, --device N          device ordinal (default: the current one)\n"
        "  -s, --seed N            random seed for run's data (default 1)\n"
        "      --json              one JSON document on stdout (list, info, run): the\n"
        "                          text form's information, strings escaped; errors in\n"
        "                          its \"errors\" member and on stderr\n"
        "  -v, --verbose           every loader and plugin message on stderr\n"
        "  -V, --version           hk-host's version and the plugin ABI it speaks\n"
        "  -h, --help              this text\n"
        "run shows a progress line while it works when stdout is a terminal (never\n"
        "in a pipe or a file, never with --json).\n"
        "environment: HK_PLUGIN_PATH (colon-separated directories searched before the\n"
        "built-in plugin directory), HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE (comma-separated\n"
        "NAME@RANGE entries that narrow or remove candidates), HK_CUDA_DRIVER (path of\n"
        "the CUDA driver library)\n"
        "exit status:\n"
        "  0  everything that ran was right (ops a plugin lacks are shown as \"not\n"
        "     supported\" and not counted)\n"
        "  1  a wrong result, a failed call, no usable plugin, no handle (info), a\n"
        "     missing program (validate, bench), a regression (bench --compare)\n"
        "  2  bad usage\n"
        "  3  the workload's host or device memory cannot be had (-n too large)\n"
        "  validate and bench pass their program's own status on (see its --help)\n"
        "text from plugins and file names is shown with control characters and other\n"
        "non-printable bytes as \\xNN\n");
}

static void version(void)
{
    printf("hk-host %s\n", HK_HOST_VERSION);
    printf("handlekit %s: plugin ABI %u.%u (loads plugins of ABI %u.0 to %u.%u)\n",
           HK_HOST_HANDLEKIT_VERSION, HK_ABI_MAJOR, HK_ABI_MINOR, HK_ABI_MAJOR, HK_ABI_MAJOR,
           HK_ABI_MINOR);
}

static int parse_long(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || *s == '\0' || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static const struct option longopts[] = {
    {"plugin", required_argument, NULL, 'p'}, {"size", required_argument, NULL, 'n'},
    {"device", required_argument, NULL, 'd'}, {"seed", required_argument, NULL, 's'},
    {"verbose", no_argument, NULL, 'v'},      {"json", no_argument, NULL, 'j'},
    {"version", no_argument, NULL, 'V'},      {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* Applies one option. Returns 0, or an exit status (-h, -V: 0 after output,
 * as -1 - status so that the caller stops). */
static int apply(int c, char **argv, hk_host_opts_t *o, char *seen)
{
    long long v;
    if (c != '?' && c != ':' && strchr("pndsvj", c) && !strchr(seen, c))
        seen[strlen(seen)] = (char)c; /* at most 6 letters */
    switch (c) {
    case 'p': o->plugin = optarg; return 0;
    case 'v': o->verbose = 1; return 0;
    case 'j': o->json = 1; return 0;
    case 'h': usage(stdout); return -1;
    case 'V': version(); return -1;
    case 'n':
        if (parse_long(optarg, 0, INT64_MAX, &v) == 0)
            return o->n = v, 0;
        hk_host_fail("--size %s: not a number in 0..2^63-1", optarg);
        return HK_HOST_EXIT_USAGE;
    case 'd':
        if (parse_long(optarg, 0, 1024, &v) == 0)
            return o->device = (int)v, 0;
        hk_host_fail("--device %s: not a device ordinal", optarg);
        return HK_HOST_EXIT_USAGE;
    case 's':
        if (parse_long(optarg, 0, 0xffffffffLL, &v) == 0)
            return o->seed = (unsigned)v, 0;
        hk_host_fail("--seed %s: not a number", optarg);
        return HK_HOST_EXIT_USAGE;
    case ':':
        hk_host_fail("%s needs a value (see hk-host --help)", argv[optind - 1]);
        return HK_HOST_EXIT_USAGE;
    default:
        if (optopt)
            hk_host_fail("unknown option -%c (see hk-host --help)", optopt);
        else
            hk_host_fail("unknown option %s (see hk-host --help)", argv[optind - 1]);
        return HK_HOST_EXIT_USAGE;
    }
}

/* getopt over argv[0..argc); stop_at_command: up to the first non-option. */
static int parse(int argc, char **argv, int stop_at_command, hk_host_opts_t *o, char *seen)
{
    int c, rc;
    opterr = 0;
    optind = 0; /* glibc: start afresh, also on a second argv */
    const char *spec = stop_at_command ? "+:p:n:d:s:vhV" : ":p:n:d:s:vhV";
    while ((c = getopt_long(argc, argv, spec, longopts, NULL)) != -1)
        if ((rc = apply(c, argv, o, seen)) != 0)
            return rc;
    return 0;
}

int main(int argc, char **argv)
{
    hk_host_opts_t opts = {NULL, 1 << 20, -1, 0, 1, 0, 0, NULL};
    char seen[8] = "";
    int rc = parse(argc, argv, 1, &opts, seen);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    int at = optind;
    if (at >= argc) {
        hk_host_fail("no command given (see hk-host --help)");
        return HK_HOST_EXIT_USAGE;
    }
    const hk_host_cmd_t *cmd = NULL;
    for (size_t i = 0; i < HK_HOST_NCMDS && !cmd; i++)
        if (strcmp(argv[at], commands[i].name) == 0)
            cmd = &commands[i];
    if (!cmd) {
        hk_host_fail("unknown command \"%s\" (try --help)", argv[at]);
        return HK_HOST_EXIT_USAGE;
    }
    if (!cmd->opts) { /* a program of its own: everything after the name is its */
        if (seen[0]) {
            hk_host_fail("%s: put its options after it; hk-host's own do not apply", cmd->name);
            return HK_HOST_EXIT_USAGE;
        }
        opts.argc = argc - at - 1;
        opts.argv = argv + at + 1;
        return cmd->fn(&opts);
    }
    /* Options after the command too: argv[at] plays argv[0]. */
    rc = parse(argc - at, argv + at, 0, &opts, seen);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (optind < argc - at) {
        hk_host_fail("%s: unexpected argument \"%s\" (see hk-host --help)", cmd->name,
                     argv[at + optind]);
        return HK_HOST_EXIT_USAGE;
    }
    for (const char *s = seen; *s; s++) {
        if (!strchr(cmd->opts, *s)) {
            hk_host_fail("%s: %s does not apply to it (see hk-host --help)", cmd->name,
                         *s == 'j'   ? "--json"
                         : *s == 'p' ? "-p/--plugin"
                         : *s == 'n' ? "-n/--size"
                         : *s == 'd' ? "-d/--device"
                         : *s == 's' ? "-s/--seed"
                                     : "-v/--verbose");
            return HK_HOST_EXIT_USAGE;
        }
    }
    return cmd->fn(&opts);
}
