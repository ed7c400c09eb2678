/* hk-host validate and bench: the programs built beside hk-host.
 *
 * validate replaces hk-host by hk-validate (exec), so its output and exit
 * status are hk-validate's own; a plugin named by a request (a name or
 * NAME@RANGE, what -p takes) is first resolved to its file by the loader.
 * bench runs hk-bench as a child with a CSV file, then the Python scripts
 * installed beside hk-host: hk-bench-plot.py (bench/plot.py) to draw the
 * figures and hk-bench-compare.py (bench/compare.py) to compare the CSV with
 * an older one. Both answer --help with their usage and the program's.
 *
 * Each of these files is held to the trust rule (docs/security.md) and run
 * through the descriptor checked, never through its name again: a program
 * that lies in /tmp must not run what another user put beside it. The
 * plugins hk-validate gets are handed over the same way, as /dev/fd/N. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk__trust.h"
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

/* Opens program `name` beside hk-host under the trust rule, executable
 * (exec) or only readable (a script run by python3); returns the open
 * descriptor (close-on-exec) with its path in buf, or -1 after one line
 * saying why (`what` tells how it is built). */
static int hkh_find_sibling(const char *cmd, const char *name, int exec, const char *what,
                            char *buf, size_t len)
{
    char why[PATH_MAX + 256];
    struct stat st;
    int fd = -1;
    if (hkh_sibling(name, buf, len) != 0) {
        hkh_fail("%s: cannot tell the directory of hk-host to find %s", cmd, name);
        return -1;
    }
    hk_status_t status = hk__trust_open(buf, 0, 1, &fd, &st, NULL, why, sizeof why);
    if (status == HK_STATUS_NOT_FOUND) {
        hkh_fail("%s: %s: not found (%s)", cmd, buf, what);
        return -1;
    }
    if (status != HK_STATUS_OK) {
        hkh_fail("%s: %s is refused: %s", cmd, buf, why);
        return -1;
    }
    if (exec && !(st.st_mode & S_IXUSR)) {
        hkh_fail("%s: %s is not executable (%s)", cmd, buf, what);
        close(fd);
        return -1;
    }
    return fd;
}

/* "/proc/self/fd/N" of fd into buf: the name under which exec runs the
 * open file itself, whatever its path names by then. */
static char *hkh_fd_name(int fd, char *buf, size_t len)
{
    snprintf(buf, len, "/proc/self/fd/%d", fd);
    return buf;
}

/* Runs the open program fd with argv, or argv[0] searched on PATH when fd
 * is -1, and waits. Returns its exit status, or -1 after one line saying
 * why it did not run or end. */
static int hkh_spawn_wait(const char *cmd, char *const argv[], int fd)
{
    pid_t pid;
    char exe[32];
    fflush(stdout);
    /* Open across the exec: a program that is a script is read by its
     * interpreter through the same name. */
    if (fd >= 0)
        fcntl(fd, F_SETFD, 0);
    int err = fd < 0 ? posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ)
                     : posix_spawn(&pid, hkh_fd_name(fd, exe, sizeof exe), NULL, NULL, argv,
                                   environ);
    if (fd >= 0)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
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
    char path[PATH_MAX], why[PATH_MAX + 256];
    struct stat st;
    int fd;
    if (hkh_sibling(program, path, sizeof path) == 0
        && hk__trust_open(path, 0, 1, &fd, &st, NULL, why, sizeof why) == HK_STATUS_OK) {
        char *argv[] = {path, "--help", NULL};
        printf("\n%s's own help:\n", program);
        if (st.st_mode & S_IXUSR)
            hkh_spawn_wait(program, argv, fd);
        close(fd);
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

/* Opens plugin file path under the trust rule and puts "/dev/fd/N" of it,
 * inherited by hk-validate, into *arg (malloc'ed, also kept in *owned).
 * A file that is not there is left to hk-validate to report. Returns 0 or
 * an exit status after one line. */
static int hkh_validate_hand_over(const char *path, char **arg, char **owned)
{
    char why[PATH_MAX + 256], name[32];
    struct stat st;
    int fd;
    hk_status_t status = hk__trust_open(path, 0, 1, &fd, &st, NULL, why, sizeof why);
    if (status == HK_STATUS_NOT_FOUND)
        return 0; /* left as it is: hk-validate says what is missing */
    if (status != HK_STATUS_OK) {
        hkh_fail("validate: %s is refused: %s", path, why);
        return HKH_EXIT_FAIL;
    }
    /* Open across the exec: hk-validate loads this very file. */
    fcntl(fd, F_SETFD, 0);
    snprintf(name, sizeof name, "/dev/fd/%d", fd);
    if (!(*owned = strdup(name))) {
        hkh_fail("validate: out of memory");
        close(fd);
        return HKH_EXIT_FAIL;
    }
    *arg = *owned;
    return 0;
}

/* Whether hk-validate is asked to load plugin paths as they are. */
static int hkh_validate_insecure(char *const *args, int argc)
{
    for (int i = 1; i < argc && strcmp(args[i], "--"); i++)
        if (!strcmp(args[i], "--insecure-path"))
            return 1;
    return 0;
}

/* Replaces each plugin in args (a copy of validate's arguments) by the
 * descriptor of its file, opened under the trust rule: a request by the
 * file the loader selects for it, a path by that path (left as it is under
 * --insecure-path, which hk-validate then takes at its word). The names are
 * malloc'ed and kept in owned[]. Returns 0 or an exit status. */
static int hkh_validate_resolve(char **args, int argc, const int *at, int n, char **owned)
{
    hk_loader_t *loader = NULL;
    int rc = 0, insecure = hkh_validate_insecure(args, argc);
    for (int i = 0; i < n && rc == 0; i++) {
        hk_plugin_t *p;
        const char *file = args[at[i]];
        if (hkh_is_path(file) && insecure)
            continue;
        if (!hkh_is_path(file)) {
            if (!loader && !(loader = hkh_loader(0, 1)))
                return HKH_EXIT_FAIL;
            if ((rc = hkh_select(loader, file, "validate: ", &p)) != 0)
                break;
            file = hk_plugin_path(p);
        }
        rc = hkh_validate_hand_over(file, &args[at[i]], &owned[i]);
    }
    /* Before hk-validate replaces this process: nothing of a plugin is left. */
    if (loader)
        hk_loader_destroy(loader);
    else
        hkh_env_check();
    return rc;
}

int hkh_cmd_validate(const hkh_opts_t *opts)
{
    char path[PATH_MAX];
    int *at = calloc((size_t)opts->argc + 1, sizeof *at);
    char **args = calloc((size_t)opts->argc + 1, sizeof *args);
    char **owned = calloc((size_t)opts->argc + 1, sizeof *owned);
    int rc = HKH_EXIT_FAIL, n, fd = -1;
    if (!at || !args || !owned) {
        hkh_fail("validate: out of memory");
        goto out;
    }
    if ((rc = hkh_validate_plugins(opts, at, &n)) >= 0)
        goto out;
    rc = HKH_EXIT_FAIL;
    fd = hkh_find_sibling("validate", "hk-validate", 1,
                          "hk-validate is built with hk-host by scons", path, sizeof path);
    if (fd < 0)
        goto out;
    memcpy(args, opts->argv, (size_t)opts->argc * sizeof *args);
    args[0] = path;
    if ((rc = hkh_validate_resolve(args, opts->argc, at, n, owned)) != 0)
        goto out;
    fflush(stdout);
    fcntl(fd, F_SETFD, 0); /* a script is read by its interpreter through fd */
    fexecve(fd, args, environ);
    hkh_fail("validate: cannot run %s: %s", path, strerror(errno));
    rc = HKH_EXIT_FAIL;
out:
    if (fd >= 0)
        close(fd);
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

/* The scripts bench needs, opened before the (long) benchmark runs: fds[0]
 * the plot's, fds[1] the comparison's (-1 when not needed). */
static int hkh_bench_scripts(const hkh_bench_args_t *b, int fds[2])
{
    const char *how = "installed beside hk-host from bench/ by scons";
    char path[PATH_MAX];
    if (b->plot && (fds[0] = hkh_find_sibling("bench", "hk-bench-plot.py", 0, how, path,
                                              sizeof path)) < 0)
        return -1;
    if (b->compare && (fds[1] = hkh_find_sibling("bench", "hk-bench-compare.py", 0, how, path,
                                                 sizeof path)) < 0)
        return -1;
    return 0;
}

/* Runs python3 on the open script fd with argv (argv[1] is set here to the
 * script's name in the child: a copy of fd left open across the exec). */
static int hkh_run_script(const char *cmd, int fd, char **argv)
{
    char name[32];
    int copy = fcntl(fd, F_DUPFD, 3); /* without close-on-exec */
    if (copy < 0) {
        hkh_fail("%s: cannot pass the script on: %s", cmd, strerror(errno));
        return -1;
    }
    argv[1] = hkh_fd_name(copy, name, sizeof name);
    int st = hkh_spawn_wait(cmd, argv, -1);
    close(copy);
    return st;
}

/* The plot and the comparison of a finished run. Returns 0, or 1 when the
 * plot failed or a ratio regressed. */
static int hkh_bench_after(const hkh_bench_args_t *b, const char *csv, const int fds[2])
{
    int rc = 0;
    if (b->plot) {
        char *argv[] = {"python3", NULL, (char *)csv, (char *)b->plot, NULL};
        /* On failure the script says why on one line; hk-host adds none. */
        if (hkh_run_script("bench --plot", fds[0], argv) != 0)
            rc = HKH_EXIT_FAIL;
    }
    if (b->compare) {
        char *argv[8 + 2 * 16] = {"python3", NULL, (char *)b->compare, (char *)csv};
        int k = 4;
        for (int i = 0; i < b->ntol; i++) {
            argv[k++] = "--tolerance";
            argv[k++] = (char *)b->tol[i];
        }
        argv[k] = NULL;
        /* compare.py prints the table and its verdict: 1 is a regression. */
        if (hkh_run_script("bench --compare", fds[1], argv) != 0)
            rc = HKH_EXIT_FAIL;
    }
    return rc;
}

int hkh_cmd_bench(const hkh_opts_t *opts)
{
    hkh_bench_args_t b;
    char bench[PATH_MAX], tmp[64] = "";
    int fds[3] = {-1, -1, -1}; /* the plot script, the comparison, hk-bench */
    int rc = hkh_bench_parse(opts, &b);
    if (rc >= 0)
        goto out;
    rc = HKH_EXIT_FAIL;
    hkh_env_check();
    const char *how = "it is built by `scons bench` where nvcc and cuBLAS are found";
    if ((fds[2] = hkh_find_sibling("bench", "hk-bench", 1, how, bench, sizeof bench)) < 0 ||
        hkh_bench_scripts(&b, fds) != 0)
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
    int st = hkh_spawn_wait("bench", b.rest, fds[2]);
    /* 0: measured; 3: measured, a target missed under --strict. Anything
     * else: hk-bench said why, and there is nothing to draw or compare. */
    if (st != 0 && st != 3) {
        rc = st < 0 ? HKH_EXIT_FAIL : st;
        goto out;
    }
    rc = hkh_bench_after(&b, csv, fds);
    if (rc == 0)
        rc = st;
out:
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (tmp[0])
        unlink(tmp);
    free(b.rest);
    return rc;
}
