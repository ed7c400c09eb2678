/* hk-host validate and bench: the programs built beside hk-host.
 *
 * validate replaces hk-host by hk-validate (exec), so its output and exit
 * status are hk-validate's own. bench runs hk-bench as a child with a CSV
 * file, then the Python scripts installed beside hk-host: hk-bench-plot.py
 * (bench/plot.py) to draw the figures and hk-bench-compare.py
 * (bench/compare.py) to compare the CSV with an older one. */
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
static int hkh_find_sibling(const char *cmd, const char *name, int mode, const char *what, char *buf,
                        size_t len)
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

int hkh_cmd_validate(const hkh_opts_t *opts)
{
    char path[PATH_MAX];
    if (hkh_find_sibling("validate", "hk-validate", X_OK, "hk-validate is built with hk-host by scons",
                     path, sizeof path) != 0)
        return HKH_EXIT_FAIL;
    char **args = calloc((size_t)opts->argc + 2, sizeof *args);
    if (!args) {
        hkh_fail("validate: out of memory");
        return HKH_EXIT_FAIL;
    }
    args[0] = path;
    memcpy(args + 1, opts->argv, (size_t)opts->argc * sizeof *args);
    fflush(stdout);
    execv(path, args);
    hkh_fail("validate: cannot run %s: %s", path, strerror(errno));
    free(args);
    return HKH_EXIT_FAIL;
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

/* bench's own options; everything else goes to hk-bench. */
typedef struct hkh_bench_args {
    const char *csv, *plot, *compare;
    const char *tol[16];
    int ntol;
    char **rest; /* hk-bench's arguments, from rest[1]; rest[0] is its path */
    int nrest;
} hkh_bench_args_t;

/* "--name VALUE" or "--name=VALUE" at argv[*i]: the value, or NULL. */
static const char *hkh_value_of(const char *name, int argc, char **argv, int *i, int *bad)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        hkh_fail("bench: %s needs a value", name);
        *bad = 1;
        return NULL;
    }
    return argv[++*i];
}

static int hkh_bench_parse(const hkh_opts_t *opts, hkh_bench_args_t *b)
{
    int bad = 0, own = 1;
    memset(b, 0, sizeof *b);
    b->rest = calloc((size_t)opts->argc + 4, sizeof *b->rest);
    if (!b->rest) {
        hkh_fail("bench: out of memory");
        return HKH_EXIT_FAIL;
    }
    b->nrest = 1;
    for (int i = 0; i < opts->argc && !bad; i++) {
        const char *v;
        if (own && strcmp(opts->argv[i], "--") == 0)
            own = 0; /* the rest is hk-bench's, whatever it looks like */
        else if (own && (v = hkh_value_of("--csv", opts->argc, opts->argv, &i, &bad)))
            b->csv = v;
        else if (own && !bad && (v = hkh_value_of("--plot", opts->argc, opts->argv, &i, &bad)))
            b->plot = v;
        else if (own && !bad && (v = hkh_value_of("--compare", opts->argc, opts->argv, &i, &bad)))
            b->compare = v;
        else if (own && !bad && (v = hkh_value_of("--tolerance", opts->argc, opts->argv, &i, &bad))) {
            if (b->ntol == (int)(sizeof b->tol / sizeof b->tol[0])) {
                hkh_fail("bench: more than %d --tolerance options", b->ntol);
                bad = 1;
            } else {
                b->tol[b->ntol++] = v;
            }
        } else if (!bad)
            b->rest[b->nrest++] = opts->argv[i];
    }
    if (!bad && b->ntol && !b->compare) {
        hkh_fail("bench: --tolerance applies to --compare, which is not given");
        bad = 1;
    }
    if (!bad && b->compare && access(b->compare, R_OK) != 0) {
        hkh_fail("bench: --compare %s: %s", b->compare, strerror(errno));
        bad = 1;
    }
    return bad ? HKH_EXIT_USAGE : 0;
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
    if (rc != 0)
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
