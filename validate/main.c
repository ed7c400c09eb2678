/* hk-validate: checks a handlekit plugin against the ABI contract
 * (docs/abi.md) and, for a CUDA plugin, the context contract
 * (docs/contexts.md). See usage() for the modes. */
#include <fcntl.h>
#include <fnmatch.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hk__cli.h"
#include "hk__trust.h"
#include "hkv.h"

#define HKV_DEFAULT_TIMEOUT_MS 20000
#define HKV_MAX_ONLY 32

static pid_t main_pid;

enum { HKV_OPT_LIST = 1, HKV_OPT_ONLY, HKV_OPT_MATRIX, HKV_OPT_COMPARE, HKV_OPT_TIMEOUT,
       HKV_OPT_JSON, HKV_OPT_VERBOSE, HKV_OPT_INSECURE };

/* The options, read by the programs' common parser (common/prog/hk__cli.h). */
static const hk__cli_opt_t hkv_options[] = {
    {HKV_OPT_LIST, 0, "list", NULL, "print the check names and exit"},
    {HKV_OPT_ONLY, 0, "only", "PATTERN",
     "run only checks whose name matches PATTERN (a shell\n"
     "glob; without * ? [ it matches names containing it);\n"
     "repeatable"},
    {HKV_OPT_MATRIX, 0, "matrix", NULL, "print \"case status\" for every bad-input case"},
    {HKV_OPT_COMPARE, 0, "compare", NULL,
     "run the bad-input matrix on the two plugins A and B\n"
     "and print every case where their statuses differ;\n"
     "exit 1 if any does, or if none could be compared\n"
     "(each skipped on A or B)"},
    {HKV_OPT_TIMEOUT, 0, "timeout", "MS", "time limit of one check, 1 to 3600000 (default 20000)"},
    {HKV_OPT_JSON, 0, "json", NULL, "print the results as one JSON document"},
    {HKV_OPT_VERBOSE, 'v', "verbose", NULL,
     "let the checks' own output through (stderr of\n"
     "plugins)"},
    {HKV_OPT_INSECURE, 0, "insecure-path", NULL,
     "load the plugin files from their paths as they are,\n"
     "without the trust rule: only for your own file in\n"
     "your own directory (whoever can write it or a\n"
     "directory above it chooses the code run)"},
    {0, 0, NULL, NULL, NULL},
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hk-validate PLUGIN.so [--only PATTERN]... [--timeout MS] [--json] [-v]\n"
            "       hk-validate [PLUGIN.so] --list [--only PATTERN]...\n"
            "       hk-validate PLUGIN.so --matrix [--only PATTERN]...\n"
            "       hk-validate --compare A.so B.so [--only PATTERN]...\n"
            "\n"
            "Runs every check of the plugin ABI (and, for a CUDA plugin, of the context\n"
            "contract) against PLUGIN.so, each in its own process, and prints one row per\n"
            "check: name, PASS/FAIL/SKIP/NOT-SUPPORTED, one line of detail. The last line is\n"
            "\"N passed, N failed, N skipped\"; the exit status is 1 when a check failed, 2\n"
            "on bad usage.\n"
            "\n");
    hk__cli_print_options(f, hkv_options, NULL);
    fprintf(f,
            "\n"
            "A plugin file and every directory and link on the way to it must be owned by\n"
            "root or you and writable by nobody else (docs/security.md); /dev/fd/N names a\n"
            "descriptor the caller opened and checked (hk-host validate passes one).\n"
            "HK_CUDA_DRIVER names the CUDA driver library (default libcuda.so.1).\n"
            "--simulate[=N] runs over handlekit's simulated CUDA driver with N devices\n"
            "(default 2), found beside hk-validate: the plugin's CUDA code is checked\n"
            "without a GPU, as far as the simulation goes (docs/contexts.md).\n"
            "HK_VALIDATE_NO_FORK=1 runs the first selected check inside hk-validate itself and\n"
            "exits (for a debugger; a crash then ends the run).\n");
}

/* --json stands among the arguments (before any "--"). */
static int json_usage;

static int usage_error(const char *fmt, const char *arg)
{
    char line[1024];
    int k = snprintf(line, sizeof line, "hk-validate: ");
    snprintf(line + k, sizeof line - (size_t)k, fmt, arg);
    fprintf(stderr, "%s\n(hk-validate --help for usage)\n", line);
    if (json_usage) { /* under --json, the error is a document too */
        hk__json_t j;
        hk__json_init(&j, stdout);
        hk__json_open(&j, NULL, '{');
        hk__json_str(&j, "error", line);
        hk__json_int(&j, "exit_status", 2);
        hk__json_close(&j);
        fflush(stdout);
    }
    return 2;
}

static int matches(const char *name, const char *pat)
{
    if (strpbrk(pat, "*?["))
        return fnmatch(pat, name, 0) == 0;
    return strstr(name, pat) != NULL;
}

/* The plugins as named, for what hk-validate prints, and the names they
 * are loaded under. */
static struct {
    char load[32];
    char shown[PATH_MAX];
} named[2];

/* The name plugin (a load name) was given as. */
static const char *shown(const char *plugin)
{
    for (int i = 0; i < 2; i++)
        if (plugin == named[i].load)
            return named[i].shown;
    return plugin;
}

/* ---- the second copy of the plugin file ---- */

static void remove_copy(void)
{
    if (getpid() != main_pid) /* check processes exit through here too */
        return;
    if (hkv.copy_path[0])
        unlink(hkv.copy_path);
    if (hkv.copy_dir[0])
        rmdir(hkv.copy_dir);
    hkv.copy_path[0] = hkv.copy_dir[0] = '\0';
}

/* Copies path under another name into a private temporary directory, so that
 * loading it gives a second instance of the same plugin. */
static void make_copy(const char *path)
{
    remove_copy();
    const char *tmp = getenv("TMPDIR");
    snprintf(hkv.copy_dir, sizeof hkv.copy_dir, "%.3000s/hk-validate-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(hkv.copy_dir)) {
        hkv.copy_dir[0] = '\0';
        return;
    }
    char base[4096];
    snprintf(base, sizeof base, "%s", shown(path));
    snprintf(hkv.copy_path, sizeof hkv.copy_path, "%.3000s/second-copy-of-%.255s", hkv.copy_dir,
             basename(base));
    int in = open(path, O_RDONLY), out = open(hkv.copy_path, O_WRONLY | O_CREAT | O_EXCL, 0700);
    int ok = in >= 0 && out >= 0;
    char buf[65536];
    ssize_t n;
    while (ok && (n = read(in, buf, sizeof buf)) > 0)
        ok = write(out, buf, (size_t)n) == n;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = 0;
    if (!ok) {
        unlink(hkv.copy_path);
        hkv.copy_path[0] = '\0';
    }
}

/* Sets hkv up for one plugin: its copy and the probe. */
static void prepare(const char *path)
{
    hkv.path = path;
    make_copy(path);
    hkv_probe_run(path, hkv.timeout_ms, &hkv.probe);
}

static void describe(FILE *f, const char *path)
{
    const hkv_probe_t *pr = &hkv.probe;
    if (!pr->loaded) {
        fprintf(f, "plugin: %s: not loaded: %s\n", path, pr->why);
        return;
    }
    fprintf(f, "plugin: %s %s, ABI %u.%u, flags 0x%x, %s (%s)\n", pr->name, pr->version,
            HK_ABI_VERSION_MAJOR(pr->abi), HK_ABI_VERSION_MINOR(pr->abi), pr->flags,
            pr->cuda ? "CUDA plugin" : pr->host_memory ? "host memory" : "memory kind unknown",
            path);
    if (!pr->handle_ok)
        fprintf(f, "handles: %s\n", pr->create_why);
    if (pr->cuda)
        fprintf(f, "driver: %s\n", pr->driver_ok ? "opened" : pr->driver_why);
    if (pr->cuda && pr->driver_ok)
        fprintf(f, "devices: %d\n", pr->ndev);
}

static int run_compare(const char *a, const char *b, const unsigned char *sel, size_t n)
{
    hkv_result_t *ra = calloc(n, sizeof *ra), *rb = calloc(n, sizeof *rb);
    if (!ra || !rb)
        return 2;
    hkv_run_opts_t o = {.quiet = 1};
    int pa, sa, pb, sb;
    prepare(a);
    describe(stdout, shown(a));
    hkv_run(sel, ra, &o, &pa, &sa);
    prepare(b);
    describe(stdout, shown(b));
    hkv_run(sel, rb, &o, &pb, &sb);
    int same = 0, differ = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        if (!sel[i])
            continue;
        if (ra[i].verdict == HKV_SKIP || rb[i].verdict == HKV_SKIP) {
            skipped++;
            continue;
        }
        if (strcmp(ra[i].observed, rb[i].observed) == 0) {
            same++;
            continue;
        }
        differ++;
        printf("differs: %-44s A=%-16s B=%s\n", hkv_check_at(i)->name, ra[i].observed,
               rb[i].observed);
    }
    printf("A = %s\nB = %s\n%d cases give the same status, %d differ, %d skipped\n", shown(a),
           shown(b), same,
           differ, skipped);
    printf("%d passed, %d failed, %d skipped\n", same, differ, skipped);
    int rc = differ ? 1 : 0;
    if (same + differ == 0) { /* nothing compared: no answer, not a pass */
        size_t i = 0;
        while (i < n && !(sel[i] && (ra[i].verdict == HKV_SKIP || rb[i].verdict == HKV_SKIP)))
            i++;
        const hkv_result_t *r = i < n && ra[i].verdict == HKV_SKIP ? &ra[i] : &rb[i];
        fprintf(stderr, "hk-validate: --compare compared nothing: each of the %d cases was "
                "skipped on A or B (%s on %s: %s)\n", skipped,
                i < n ? hkv_check_at(i)->name : "?", r == &ra[i] ? "A" : "B",
                i < n ? r->detail : "?");
        rc = 1;
    }
    free(ra);
    free(rb);
    return rc;
}

typedef struct opts {
    const char *only[HKV_MAX_ONLY];
    int nonly, list, matrix, json, compare, insecure;
    const char *plugins[3]; /* the first ones named: one, or two with --compare */
    int nplugins;           /* how many were named */
    const char *plugin, *cmp_a, *cmp_b;
} opts_t;

/* One option's effect on *o. Returns -1 to go on, else the exit status. */
static int apply(hk__cli_t *c, int id, opts_t *o)
{
    long long v;
    switch (id) {
    case HKV_OPT_LIST: o->list = 1; break;
    case HKV_OPT_MATRIX: o->matrix = 1; break;
    case HKV_OPT_JSON: o->json = 1; break;
    case HKV_OPT_VERBOSE: hkv.verbose = 1; break;
    case HKV_OPT_COMPARE: o->compare = 1; break;
    case HKV_OPT_INSECURE: o->insecure = 1; break;
    case HKV_OPT_ONLY:
        if (o->nonly == HKV_MAX_ONLY)
            return usage_error("too many --only patterns (at most 32)%s", "");
        o->only[o->nonly++] = c->value;
        break;
    case HKV_OPT_TIMEOUT:
        if (hk__cli_number(c, c->value, 1, 3600000, &v) != 0)
            return usage_error("%s", c->error);
        hkv.timeout_ms = (int)v;
        break;
    }
    return -1;
}

/* Opens the i-th plugin *path under the trust rule (docs/security.md) and
 * points *path at "/proc/self/fd/N" of it, which every check process
 * inherits: the file checked is the file loaded. /dev/fd/N is a descriptor
 * the caller checked: the file itself is held to the rule. Returns -1 to go
 * on, else the exit status after one line. */
static int open_plugin(int i, int insecure, const char **path)
{
    char why[PATH_MAX + 256];
    struct stat st;
    int fd = hk__trust_fd_name(*path);
    hk_status_t status;
    if (fd >= 0) {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, named[i].shown, sizeof named[i].shown - 1);
        named[i].shown[k > 0 ? k : 0] = '\0';
        status = hk__trust_fd(fd, &st, why, sizeof why);
        if (k <= 0)
            snprintf(named[i].shown, sizeof named[i].shown, "%s", *path);
    } else if (insecure) {
        if (stat(*path, &st) != 0 || !S_ISREG(st.st_mode))
            return usage_error("%s: not a readable plugin file", *path);
        return -1;
    } else {
        snprintf(named[i].shown, sizeof named[i].shown, "%s", *path);
        status = hk__trust_open(*path, 0, 1, &fd, &st, NULL, why, sizeof why);
        if (status == HK_STATUS_NOT_FOUND)
            return usage_error("%s: not a readable plugin file", *path);
        if (status == HK_STATUS_OK)
            fcntl(fd, F_SETFD, 0);
    }
    if (status != HK_STATUS_OK) {
        fprintf(stderr, "hk-validate: %s is refused: %s (--insecure-path loads your own file "
                "as it is)\n", named[i].shown, why);
        return 1;
    }
    snprintf(named[i].load, sizeof named[i].load, "/proc/self/fd/%d", fd);
    *path = named[i].load;
    return -1;
}

/* The plugins named: one, or two with --compare. Returns -1 to go on, else
 * the exit status. */
static int check_plugins(opts_t *o)
{
    if (o->compare) {
        if (o->nplugins != 2)
            return usage_error("--compare needs two plugin files%s", "");
        if (o->matrix || o->list || o->json)
            return usage_error("--compare takes two plugins and no --matrix, --list or "
                               "--json%s", "");
        o->cmp_a = o->plugins[0];
        o->cmp_b = o->plugins[1];
    } else if (o->nplugins > 1) {
        return usage_error("one plugin at a time (extra argument \"%s\")", o->plugins[1]);
    } else {
        o->plugin = o->plugins[0];
    }
    if (!o->plugin && !o->cmp_a && !o->list)
        return usage_error("no plugin file given%s", "");
    if (o->matrix && o->json)
        return usage_error("--matrix and --json do not go together%s", "");
    for (int i = 0; i < o->nplugins && i < 2 && !o->list; i++) {
        int rc = open_plugin(i, o->insecure, &o->plugins[i]);
        if (rc >= 0)
            return rc;
    }
    o->plugin = o->plugin ? o->plugins[0] : NULL;
    o->cmp_a = o->cmp_a ? o->plugins[0] : NULL;
    o->cmp_b = o->cmp_b ? o->plugins[1] : NULL;
    return -1;
}

/* Fills *o from the command line; returns -1 to go on, else an exit status. */
static int parse(int argc, char **argv, opts_t *o)
{
    hk__cli_t c;
    int id, rc;
    hk__cli_init(&c, hkv_options, argc, argv);
    while ((id = hk__cli_next(&c)) != HK__CLI_END) {
        if (id == HK__CLI_HELP) {
            usage(stdout);
            return 0;
        }
        if (id == HK__CLI_ERROR)
            return usage_error("%s", c.error);
        if (id == HK__CLI_OPERAND && o->nplugins < 3)
            o->plugins[o->nplugins++] = c.arg;
        else if (id == HK__CLI_OPERAND)
            o->nplugins++;
        else if ((rc = apply(&c, id, o)) >= 0)
            return rc;
    }
    return check_plugins(o);
}

/* Marks the checks the options select; returns how many. */
static size_t select_checks(const opts_t *o, unsigned char *sel)
{
    size_t nsel = 0;
    for (size_t i = 0; i < hkv_check_count(); i++) {
        const hkv_check_t *k = hkv_check_at(i);
        int ok = o->nonly == 0;
        for (int j = 0; j < o->nonly && !ok; j++)
            ok = matches(k->name, o->only[j]);
        if ((o->matrix || o->cmp_a) && !(k->needs & HKV_MATRIX))
            ok = 0;
        sel[i] = (unsigned char)ok;
        nsel += (size_t)ok;
    }
    return nsel;
}

static int run_single(const opts_t *o, const unsigned char *sel, size_t n)
{
    hkv_result_t *res = calloc(n, sizeof *res);
    if (!res)
        return 2;
    prepare(o->plugin);
    hk__json_t json, *j = o->json ? &json : NULL;
    if (j) {
        hk__json_init(j, stdout);
        hk__json_open(j, NULL, '{');
        hk__json_str(j, "plugin", hkv.probe.loaded ? hkv.probe.name : NULL);
        hk__json_open(j, "checks", '[');
    } else if (!o->matrix) {
        describe(stdout, shown(o->plugin));
        putchar('\n');
    }
    hkv_run_opts_t ro = {.json = j, .matrix = o->matrix};
    int passed, skipped;
    int failed = hkv_run(sel, res, &ro, &passed, &skipped);
    int notsup = 0;
    for (size_t i = 0; i < n; i++)
        notsup += sel[i] && res[i].verdict == HKV_NOTSUP;
    if (j) {
        hk__json_close(j); /* checks */
        hk__json_int(j, "passed", passed);
        hk__json_int(j, "failed", failed);
        hk__json_int(j, "skipped", skipped - notsup);
        hk__json_int(j, "not_supported", notsup);
        hk__json_close(j);
    } else if (!o->matrix) {
        printf("\n");
        if (notsup)
            printf("%d not supported (counted as skipped)\n", notsup);
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    }
    free(res);
    return o->matrix ? 0 : failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    hkv.timeout_ms = HKV_DEFAULT_TIMEOUT_MS;
    const char *nf = getenv("HK_VALIDATE_NO_FORK");
    hkv.no_fork = nf && !strcmp(nf, "1");
    opts_t o;
    memset(&o, 0, sizeof o);
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        json_usage |= strcmp(argv[i], "--json") == 0;
    int st = hkv_simulate_args(&argc, argv, usage_error);
    if (st >= 0)
        return st;
    st = parse(argc, argv, &o);
    if (st >= 0)
        return st;
    hkv_register_abi();
    hkv_register_handles();
    hkv_register_matrix();
    hkv_register_ops();
    hkv_register_threads();
    hkv_register_trim();
    hkv_register_selfcheck();
    hkv_register_cuda();
    hkv_register_cuda_current();
    size_t n = hkv_check_count();
    unsigned char *sel = calloc(n, 1);
    if (!sel)
        return 2;
    size_t nsel = select_checks(&o, sel);
    if (o.list) {
        for (size_t i = 0; i < n; i++)
            if (sel[i])
                printf("%s\n", hkv_check_at(i)->name);
        free(sel);
        return 0;
    }
    if (nsel == 0) {
        free(sel);
        return usage_error("no check matches the --only patterns%s", "");
    }
    main_pid = getpid();
    atexit(remove_copy);
    st = o.cmp_a ? run_compare(o.cmp_a, o.cmp_b, sel, n) : run_single(&o, sel, n);
    free(sel);
    return st;
}
