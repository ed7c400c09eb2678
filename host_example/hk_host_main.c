/* hk-host: list, inspect, run, validate, benchmark and swap handlekit plugins.
 *
 * Options before the command apply to it; commands that take hk-host's
 * options (list, info, run) also accept them after the command, while the
 * commands that parse their own (validate, bench, swap) get everything after
 * their name. Every command answers -h and --help with its usage (status 0).
 * The command line is read by the programs' common parser (hk__cli.h):
 * numbers are decimal. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_host.h"

#ifndef HKH_HANDLEKIT_VERSION
#define HKH_HANDLEKIT_VERSION "unknown"
#endif

/* hk-host's own options; an id is the short letter ('j': --json, which has
 * none), so that a command names those it takes as a string of letters. */
static const hk__cli_opt_t hkh_options[] = {
    {'p', 'p', "plugin", "REQUEST",
     "the plugin: NAME (its highest release), NAME@RANGE\n"
     "(e.g. hk-cuda@^1, hk-cpu@~1.0, 'hk-cuda@>=1.0, <2',\n"
     "hk-cuda@1.0.0) or a path to a .so file; default:\n"
     "hk-cuda when a handle can be made on it, else\n"
     "hk-cpu, saying why"},
    {'n', 'n', "size", "N", "vector length for run, at least 1 (default 1048576)"},
    {'d', 'd', "device", "DEV",
     "device ordinal of a CUDA plugin (default: the\n"
     "current one); a plugin that computes on the host\n"
     "has no devices, and -d with it is a usage error"},
    {'s', 's', "seed", "N", "random seed for run's data (default 1)"},
    {'j', 0, "json", NULL,
     "one JSON document on stdout (list, info, run): the\n"
     "text form's information, strings escaped; errors in\n"
     "its \"errors\" member and on stderr"},
    {'v', 'v', "verbose", NULL, "every loader and plugin message on stderr"},
    {'V', 'V', "version", NULL, "hk-host's version and the plugin ABI it speaks"},
    {0, 0, NULL, NULL, NULL},
};

/* One command. opts: the ids of hk-host's options it takes; NULL: it parses
 * its own, from hkh_opts_t.argc/argv. */
typedef struct hkh_cmd {
    const char *name;
    int (*fn)(const hkh_opts_t *opts);
    const char *opts;
    const char *synopsis; /* after "hk-host " */
    const char *help;
} hkh_cmd_t;

static const hkh_cmd_t hkh_commands[] = {
    {"list", hkh_cmd_list, "vj", "list [--json]",
     "every plugin found (name, version, ABI, path); * marks the one each name\n"
     "selects, with the reason under the others; every refused candidate"},
    {"info", hkh_cmd_info, "pdvj", "info [-p REQUEST] [-d DEV] [--json]",
     "the plugin's ABI, flags, tables and their sizes, and how a handle binds\n"
     "(exit status 1 when no handle can be made; the rest is shown still)"},
    {"run", hkh_cmd_run, "pndsvj", "run [-p REQUEST] [-n N] [-d DEV] [-s SEED] [--json]",
     "a verified workload: every hk.blas1/1 op in float and double, in host and\n"
     "device pointer mode; exits non-zero on a wrong result"},
    {"validate", hkh_cmd_validate, NULL, "validate PLUGIN [OPTIONS]",
     "runs hk-validate (beside hk-host) on PLUGIN, which is what -p takes; the\n"
     "options and the exit status are hk-validate's"},
    {"bench", hkh_cmd_bench, NULL,
     "bench [--csv FILE] [--plot DIR] [--compare OLD.csv [--tolerance SPEC]...] [ARGS...]",
     "runs hk-bench (beside hk-host; built with nvcc and cuBLAS) with ARGS and\n"
     "writes its CSV to FILE; --plot draws every figure into DIR; --compare\n"
     "flags ratios worse than OLD.csv's by more than the run-to-run tolerance\n"
     "(default 5 %, P4 50 %; SPEC is PCT or FIGURE=PCT, e.g. P2=10) and exits 1\n"
     "then; exit status otherwise hk-bench's (3: a missed target under --strict)"},
    {"swap", hkh_cmd_swap, NULL,
     "swap -p REQUEST_A -q REQUEST_B [-t THREADS] [-k SWAPS] [-n N] [-w MS] [-P]",
     "threads call through movable handles, every result checked, while the\n"
     "implementation is swapped between A and B, two builds: A and B resolving\n"
     "to the same file is a usage error (docs/swap.md)"},
    {"watch", hkh_cmd_watch, NULL,
     "watch [-r REQUEST] [-t THREADS] [-n N] [-s SECONDS] [-k SWAPS] [-D MS] [-R]",
     "threads call through movable handles on what REQUEST selects, every\n"
     "result checked, while new builds written into the search path go live\n"
     "by themselves; each event and swap printed (docs/deploy.md)"},
};
#define HKH_NCMDS (sizeof hkh_commands / sizeof hkh_commands[0])

/* The command whose options are being read, for its usage. */
static const hkh_cmd_t *hkh_current;

/* text with each of its lines after the first led by indent. */
static void hkh_indented(FILE *f, const char *indent, const char *text)
{
    fputs(indent, f);
    for (const char *c = text; *c; c++) {
        fputc(*c, f);
        if (*c == '\n')
            fputs(indent, f);
    }
    fputc('\n', f);
}

static void hkh_usage(FILE *f)
{
    fprintf(f, "usage: hk-host [options] <command> [options]\n"
               "       hk-host <command> --help\n"
               "       hk-host --version | --help\n"
               "commands:\n");
    for (size_t i = 0; i < HKH_NCMDS; i++) {
        fprintf(f, "  %s\n", hkh_commands[i].synopsis);
        hkh_indented(f, "      ", hkh_commands[i].help);
    }
    fprintf(f, "options:\n");
    hk__cli_print_options(f, hkh_options, NULL);
    fprintf(
        f,
        "run shows a progress line while it works when stdout is a terminal (never\n"
        "in a pipe or a file, never with --json).\n"
        "numbers are decimal (010 is ten).\n"
        "environment: HK_PLUGIN_PATH (colon-separated directories searched before the\n"
        "built-in plugin directory), HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE (comma-separated\n"
        "NAME@RANGE entries that narrow or remove candidates), HK_CUDA_DRIVER (path of\n"
        "the CUDA driver library)\n"
        "exit status:\n"
        "  0  everything that ran was right (ops a plugin lacks are shown as \"not\n"
        "     supported\" and not counted)\n"
        "  1  a wrong result, a failed call, no usable plugin, no handle (info), a\n"
        "     missing program (validate, bench), a regression (bench --compare)\n"
        "  2  bad usage, -d with a plugin that has no devices\n"
        "  3  the workload's host or device memory cannot be had (-n too large)\n"
        "  validate and bench pass their program's own status on (see its --help)\n"
        "text from plugins and file names is shown with control characters and other\n"
        "non-printable bytes as \\xNN\n");
}

/* The usage of the command hkh_current (list, info, run). */
static void hkh_cmd_usage(FILE *f)
{
    fprintf(f, "usage: hk-host %s\n", hkh_current->synopsis);
    hkh_indented(f, "  ", hkh_current->help);
    fprintf(f, "options:\n");
    hk__cli_print_options(f, hkh_options, hkh_current->opts);
    hkh_usage_more(f);
}

static void hkh_version(void)
{
    printf("hk-host %s\n", HKH_VERSION);
    printf("handlekit %s: plugin ABI %u.%u (loads plugins of ABI %u.0 to %u.%u)\n",
           HKH_HANDLEKIT_VERSION, HK_ABI_MAJOR, HK_ABI_MINOR, HK_ABI_MAJOR, HK_ABI_MAJOR,
           HK_ABI_MINOR);
}

/* Whether --json stands among the options (before any "--"), so that a
 * usage error met before it is read is a document too. */
static int hkh_json_given(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0)
            return 1;
    return 0;
}

/* Applies option id. Returns 0, -1 after -V (stop, status 0), or the exit
 * status of a usage error. */
static int hkh_apply(hk__cli_t *c, int id, const char *cmd, hkh_opts_t *o, char *seen)
{
    long long v;
    if (strchr("pndsvj", id) && !strchr(seen, id))
        seen[strlen(seen)] = (char)id; /* at most 6 letters */
    switch (id) {
    case 'p': o->plugin = c->value; return 0;
    case 'v': o->verbose = 1; return 0;
    case 'j': o->json = 1; return 0;
    case 'V': hkh_version(); return -1;
    case 'n':
        if (hk__cli_number(c, c->value, 1, INT64_MAX, &v) != 0)
            break;
        o->n = v;
        return 0;
    case 'd':
        if (hk__cli_number(c, c->value, 0, 1024, &v) != 0)
            break;
        o->device = (int)v;
        return 0;
    case 's':
        if (hk__cli_number(c, c->value, 0, UINT32_MAX, &v) != 0)
            break;
        o->seed = (unsigned)v;
        return 0;
    }
    return hkh_usage_error(cmd, c->error);
}

/* The options after a command that takes hk-host's (argv[c->index] on), then
 * a check that each option given applies to it. Returns -1 to go on, else
 * the exit status. */
static int hkh_command_options(hk__cli_t *c, const hkh_cmd_t *cmd, hkh_opts_t *o, char *seen)
{
    int id, rc;
    hkh_current = cmd;
    while ((id = hkh_cli_next(c, cmd->name, hkh_cmd_usage)) > 0)
        if ((rc = hkh_apply(c, id, cmd->name, o, seen)) != 0)
            return rc < 0 ? HKH_EXIT_OK : rc;
    if (id == HK__CLI_OPERAND) {
        char text[HK__CLI_ERROR_MAX];
        snprintf(text, sizeof text, "unexpected argument \"%.200s\"", c->arg);
        return hkh_usage_error(cmd->name, text);
    }
    if (id != HK__CLI_END)
        return hkh_cli_exit(id);
    for (const char *s = seen; *s; s++) {
        if (!strchr(cmd->opts, *s)) {
            char name[64], text[128];
            hk__cli_name(hk__cli_find(hkh_options, *s), name, sizeof name);
            snprintf(text, sizeof text, "%s does not apply to it", name);
            return hkh_usage_error(cmd->name, text);
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    hkh_opts_t opts = {NULL, 1 << 20, HK_DEVICE_CURRENT, 0, 1, 0, 0, NULL};
    char seen[16] = "";
    hk__cli_t c;
    int id, rc;
    hk__cli_init(&c, hkh_options, argc, argv);
    hkh_json_wanted = hkh_json_given(argc, argv);
    while ((id = hkh_cli_next(&c, NULL, hkh_usage)) > 0)
        if ((rc = hkh_apply(&c, id, NULL, &opts, seen)) != 0)
            return rc < 0 ? HKH_EXIT_OK : rc;
    if (id == HK__CLI_END)
        return hkh_usage_error(NULL, "no command given");
    if (id != HK__CLI_OPERAND)
        return hkh_cli_exit(id);
    const hkh_cmd_t *cmd = NULL;
    for (size_t i = 0; i < HKH_NCMDS && !cmd; i++)
        if (strcmp(c.arg, hkh_commands[i].name) == 0)
            cmd = &hkh_commands[i];
    if (!cmd) {
        char text[HK__CLI_ERROR_MAX];
        snprintf(text, sizeof text, "unknown command \"%.200s\"", c.arg);
        return hkh_usage_error(NULL, text);
    }
    if (!cmd->opts) { /* it parses its own: everything from its name on */
        if (seen[0])
            return hkh_usage_error(cmd->name, "put its options after it; hk-host's own do not "
                                              "apply");
        opts.argc = argc - (c.index - 1);
        opts.argv = argv + (c.index - 1);
        return cmd->fn(&opts);
    }
    if ((rc = hkh_command_options(&c, cmd, &opts, seen)) >= 0)
        return rc;
    return cmd->fn(&opts);
}
