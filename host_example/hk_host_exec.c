/* hk-host validate and bench: the programs built beside hk-host.
 *
 * validate replaces hk-host by hk-validate (exec), so its output and exit
 * status are hk-validate's own; a plugin named by a request (a name or
 * NAME@RANGE, what -p takes) is first resolved to its file by the loader.
 * bench runs hk-bench as a child with a CSV file, then the Python scripts
 * installed beside hk-host: hk-bench-plot.py (bench/plot.py) to draw the
 * figures and hk-bench-compare.py (bench/compare.py) to compare the CSV with
 * an older one. Both answer --help with their usage and the program's. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_host.h"

extern char **environ;

/* <directory of the running hk-host>/name into buf; -1 when it cannot be
 * told. /proc/self/exe names the file itself, so a symbolic link to hk-host
 * (bindir → libdir/handlekit/bin) finds the programs installed beside it. */
static int hkh_sibling(const char *name, char *buf, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    int w = snprintf(buf, len, "%s/%s", dirname(exe), name);
    return (w < 0 || (size_t)w >= len) ? -1 : 0;
}

/* Finds program `name` beside hk-host, executable (X_OK) or readable
 * (R_OK: a script run by python3); on failure says so on one line (`what`
 * tells how it is built) and returns -1. */
static int hkh_find_sibling(const char *cmd, const char *name, int mode, const char *what,
                            char *buf, size_t len)
{
    if (hkh_sibling(name, buf, len) != 0) {
        hkh_fail("%s: cannot tell the directory of hk-host to find %s", cmd, name);
        return -1;
    }
    if (access(buf, mode) != 0) {
        hkh_fail("%s: %s: %s (%s)", cmd, buf, errno == ENOENT ? "not found" : strerror(errno),
                 what);
        return -1;
    }
    return 0;
}

/* Runs argv (argv[0] searched on PATH when search) and waits. Returns its
 * exit status, or -1 after one line saying why it did not run or end. */
static int hkh_spawn_wait(const char *cmd, char *const argv[], int search)
{
    pid_t pid;
    fflush(stdout);
    int err = search ? posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ)
                     : posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
    if (err != 0) {
        hkh_fail("%s: cannot run %s: %s", cmd, argv[0], strerror(err));
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            hkh_fail("%s: waiting for %s: %s", cmd, argv[0], strerror(errno));
            return -1;
        }
    }
    if (WIFSIGNALED(st)) {
        hkh_fail("%s: %s was killed by signal %d (%s)", cmd, argv[0], WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
        return -1;
    }
    return WEXITSTATUS(st);
}

/* After the usage of validate or bench: that of the program it runs, when
 * that is there (its absence is no error here: help always works). */
static int hkh_help_of(const char *program)
{
    char path[PATH_MAX];
    if (hkh_sibling(program, path, sizeof path) == 0 && access(path, X_OK) == 0) {
        char *argv[] = {path, "--help", NULL};
        printf("\n%s's own help:\n", program);
        hkh_spawn_wait(program, argv, 0);
    }
    return HKH_EXIT_OK;
}

/* hk-validate's options that take a value: hk-host knows them to tell which
 * arguments are plugins (validate/main.c's table has them all). */
static const hk__cli_opt_t hkh_validate_options[] = {
    {1, 0, "only", "PATTERN", NULL},
    {2, 0, "timeout", "MS", NULL},
    {0, 0, NULL, NULL, NULL},
};

static void hkh_validate_usage(FILE *f)
{
    fprintf(f, "usage: hk-host validate PLUGIN [OPTIONS]\n"
               "       hk-host validate --compare PLUGIN_A PLUGIN_B [OPTIONS]\n"
               "  runs hk-validate (beside hk-host) on the plugin. PLUGIN is what -p takes:\n"
               "  NAME (its highest release), NAME@RANGE, or a path to a .so file; a name\n"
               "  is resolved by the loader as for run and info, and hk-validate gets the\n"
               "  file. The options and the exit status are hk-validate's.\n");
    hkh_usage_more(f);
}

/* The positions of the plugins among validate's arguments into at[], and
 * their number into *n. Returns -1 to go on, else the exit status (0 after
 * --help). */
static int hkh_validate_plugins(const hkh_opts_t *opts, int *at, int *n)
{
    hk__cli_t c;
    int id;
    *n = 0;
    hk__cli_init(&c, hkh_validate_options, opts->argc, opts->argv);
    c.pass_unknown = 1; /* hk-validate's flags: passed on as they are */
    while ((id = hkh_cli_next(&c, "validate", hkh_validate_usage)) != HK__CLI_END) {
        if (id == HK__CLI_HELP)
            return hkh_help_of("hk-validate");
        if (id == HK__CLI_ERROR)
            return HKH_EXIT_USAGE;
        if (id == HK__CLI_OPERAND)
            at[(*n)++] = c.index - 1;
    }
    return -1;
}

/* Replaces each plugin named by a request (not a path) by the file the
 * loader selects for it, in args (a copy of validate's arguments); the
 * paths are malloc'ed and kept in owned[]. Returns 0 or an exit status. */
static int hkh_validate_resolve(char **args, const int *at, int n, char **owned)
{
    hk_loader_t *loader = NULL;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        hk_plugin_t *p;
        if (hkh_is_path(args[at[i]]))
            continue;
        if (!loader && !(loader = hkh_loader(0, 1)))
            return HKH_EXIT_FAIL;
        rc = hkh_select(loader, args[at[i]], "validate: ", &p);
        if (rc == 0 && !(owned[i] = strdup(hk_plugin_path(p)))) {
            hkh_fail("validate: out of memory");
            rc = HKH_EXIT_FAIL;
        }
        if (rc == 0)
            args[at[i]] = owned[i];
    }
    /* Before hk-validate replaces this process: nothing of a plugin is left. */
    if (loader)
        hk_loader_destroy(loader);
    return rc;
}

int hkh_cmd_validate(const hkh_opts_t *opts)
{
    char path[PATH_MAX];
    int *at = calloc((size_t)opts->argc + 1, sizeof *at);
    char **args = calloc((size_t)opts->argc + 1, sizeof *args);
    char **owned = calloc((size_t)opts->argc + 1, sizeof *owned);
    int rc = HKH_EXIT_FAIL, n;
    if (!at || !args || !owned) {
        hkh_fail("validate: out of memory");
        goto out;
    }
    if ((rc = hkh_validate_plugins(opts, at, &n)) >= 0)
        goto out;
    rc = HKH_EXIT_FAIL;
    if (hkh_find_sibling("validate", "hk-validate", X_OK,
                         "hk-validate is built with hk-host by scons", path, sizeof path) != 0)
        goto out;
    memcpy(args, opts->argv, (size_t)opts->argc * sizeof *args);
    args[0] = path;
    if ((rc = hkh_validate_resolve(args, at, n, owned)) != 0)
        goto out;
    fflush(stdout);
    execv(path, args);
    hkh_fail("validate: cannot run %s: %s", path, strerror(errno));
    rc = HKH_EXIT_FAIL;
out:
    for (int i = 0; owned && i < opts->argc; i++)
        free(owned[i]);
    free(owned);
    free(args);
    free(at);
    return rc;
}

/* bench's own options; everything else goes to hk-bench. */
typedef struct hkh_bench_args {
    const char *csv, *plot, *compare;
    const char *tol[16];
    int ntol;
    char **rest; /* hk-bench's arguments, from rest[1]; rest[0] is its path */
    int nrest;
} hkh_bench_args_t;

enum { HKH_BENCH_CSV = 1, HKH_BENCH_PLOT, HKH_BENCH_COMPARE, HKH_BENCH_TOLERANCE };

static const hk__cli_opt_t hkh_bench_options[] = {
    {HKH_BENCH_CSV, 0, "csv", "FILE",
     "write hk-bench's rows to FILE as CSV (else a\n"
     "temporary file when --plot or --compare needs one)"},
    {HKH_BENCH_PLOT, 0, "plot", "DIR", "draw every figure into DIR (python3, matplotlib)"},
    {HKH_BENCH_COMPARE, 0, "compare", "OLD.csv",
     "flag ratios worse than OLD.csv's by more than the\n"
     "run-to-run tolerance; exit status 1 then"},
    {HKH_BENCH_TOLERANCE, 0, "tolerance", "SPEC",
     "PCT or FIGURE=PCT (e.g. P2=10), repeatable; default\n"
     "5 %, P4 50 %"},
    {0, 0, NULL, NULL, NULL},
};

static void hkh_bench_usage(FILE *f)
{
    fprintf(f, "usage: hk-host bench [--csv FILE] [--plot DIR] [--compare OLD.csv "
               "[--tolerance SPEC]...] [ARGS...]\n"
               "  runs hk-bench (beside hk-host; built with nvcc and cuBLAS) with ARGS, then\n"
               "  draws and compares its rows. Every other argument, and all after --, is\n"
               "  hk-bench's. Exit status hk-bench's (3: a missed target under --strict),\n"
               "  or 1 when --compare finds a regression\n"
               "options:\n");
    hk__cli_print_options(f, hkh_bench_options, NULL);
    hkh_usage_more(f);
}

/* One of bench's own options. Returns 0 or the exit status of a usage error. */
static int hkh_bench_option(hkh_bench_args_t *b, int id, const char *value)
{
    if (id == HKH_BENCH_CSV) {
        b->csv = value;
    } else if (id == HKH_BENCH_PLOT) {
        b->plot = value;
    } else if (id == HKH_BENCH_COMPARE) {
        b->compare = value;
    } else if (b->ntol == (int)(sizeof b->tol / sizeof b->tol[0])) {
        return hkh_usage_error("bench", "more than 16 --tolerance options");
    } else {
        b->tol[b->ntol++] = value;
    }
    return 0;
}

/* Returns -1 to go on, else the exit status (0 after --help). */
static int hkh_bench_parse(const hkh_opts_t *opts, hkh_bench_args_t *b)
{
    hk__cli_t c;
    int id, rc;
    memset(b, 0, sizeof *b);
    /* hk-bench's path, what the command does not take, "--csv FILE", NULL */
    b->rest = calloc((size_t)opts->argc + 4, sizeof *b->rest);
    if (!b->rest) {
        hkh_fail("bench: out of memory");
        return HKH_EXIT_FAIL;
    }
    b->nrest = 1;
    hk__cli_init(&c, hkh_bench_options, opts->argc, opts->argv);
    c.pass_unknown = 1;
    while ((id = hkh_cli_next(&c, "bench", hkh_bench_usage)) != HK__CLI_END) {
        if (id == HK__CLI_HELP)
            return hkh_help_of("hk-bench");
        if (id == HK__CLI_ERROR)
            return HKH_EXIT_USAGE;
        if (id == HK__CLI_OPERAND || id == HK__CLI_UNKNOWN)
            b->rest[b->nrest++] = (char *)c.arg;
        else if ((rc = hkh_bench_option(b, id, c.value)) != 0)
            return rc;
    }
    if (b->ntol && !b->compare)
        return hkh_usage_error("bench", "--tolerance applies to --compare, which is not given");
    if (b->compare && access(b->compare, R_OK) != 0) {
        hkh_fail("bench: --compare %s: %s", b->compare, strerror(errno));
        return HKH_EXIT_USAGE;
    }
    return -1;
}

/* The scripts bench needs, found before the (long) benchmark runs. */
static int hkh_bench_scripts(const hkh_bench_args_t *b, char *plot, char *cmp, size_t len)
{
    const char *how = "installed beside hk-host from bench/ by scons";
    if (b->plot && hkh_find_sibling("bench", "hk-bench-plot.py", R_OK, how, plot, len) != 0)
        return -1;
    if (b->compare && hkh_find_sibling("bench", "hk-bench-compare.py", R_OK, how, cmp, len) != 0)
        return -1;
    return 0;
}

/* The plot and the comparison of a finished run. Returns 0, or 1 when the
 * plot failed or a ratio regressed. */
static int hkh_bench_after(const hkh_bench_args_t *b, const char *csv, char *plot, char *cmp)
{
    int rc = 0;
    if (b->plot) {
        char *argv[] = {"python3", plot, (char *)csv, (char *)b->plot, NULL};
        /* On failure the script says why on one line; hk-host adds none. */
        if (hkh_spawn_wait("bench --plot", argv, 1) != 0)
            rc = HKH_EXIT_FAIL;
    }
    if (b->compare) {
        char *argv[8 + 2 * 16] = {"python3", cmp, (char *)b->compare, (char *)csv};
        int k = 4;
        for (int i = 0; i < b->ntol; i++) {
            argv[k++] = "--tolerance";
            argv[k++] = (char *)b->tol[i];
        }
        argv[k] = NULL;
        /* compare.py prints the table and its verdict: 1 is a regression. */
        if (hkh_spawn_wait("bench --compare", argv, 1) != 0)
            rc = HKH_EXIT_FAIL;
    }
    return rc;
}

int hkh_cmd_bench(const hkh_opts_t *opts)
{
    hkh_bench_args_t b;
    char bench[PATH_MAX], plot[PATH_MAX], cmp[PATH_MAX], tmp[64] = "";
    int rc = hkh_bench_parse(opts, &b);
    if (rc >= 0)
        goto out;
    rc = HKH_EXIT_FAIL;
    const char *how = "it is built by `scons bench` where nvcc and cuBLAS are found";
    if (hkh_find_sibling("bench", "hk-bench", X_OK, how, bench, sizeof bench) != 0 ||
        hkh_bench_scripts(&b, plot, cmp, sizeof plot) != 0)
        goto out;
    const char *csv = b.csv;
    if (!csv && (b.plot || b.compare)) { /* a CSV is needed: a temporary one */
        const char *dir = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/hk-bench-XXXXXX.csv",
                 dir && *dir && strlen(dir) < sizeof tmp - 24 ? dir : "/tmp");
        int fd = mkstemps(tmp, 4);
        if (fd < 0) {
            hkh_fail("bench: cannot make a temporary CSV file %s: %s", tmp, strerror(errno));
            tmp[0] = '\0';
            goto out;
        }
        close(fd);
        csv = tmp;
    }
    b.rest[0] = bench;
    if (csv) {
        b.rest[b.nrest++] = "--csv";
        b.rest[b.nrest++] = (char *)csv;
    }
    int st = hkh_spawn_wait("bench", b.rest, 0);
    /* 0: measured; 3: measured, a target missed under --strict. Anything
     * else: hk-bench said why, and there is nothing to draw or compare. */
    if (st != 0 && st != 3) {
        rc = st < 0 ? HKH_EXIT_FAIL : st;
        goto out;
    }
    rc = hkh_bench_after(&b, csv, plot, cmp);
    if (rc == 0)
        rc = st;
out:
    if (tmp[0])
        unlink(tmp);
    free(b.rest);
    return rc;
}
