/* hk-validate: the check registry and the runner. Each check runs in a
 * process of its own, under a keeper in a session of its own (spawn.c), under
 * a time limit; it sends its result through a pipe. A check whose process
 * dies is a failed check named with its signal, one that overruns is a
 * failed check named a timeout, one that kills its parent (the keeper) is a
 * failed check saying so, and the run goes on. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hkv.h"

static hkv_check_t *checks;
static size_t nchecks, capchecks;

void hkv_add(const char *name, hkv_check_fn fn, unsigned needs, int a, int b, int c)
{
    if (nchecks == capchecks) {
        capchecks = capchecks ? capchecks * 2 : 256;
        checks = realloc(checks, capchecks * sizeof *checks);
        if (!checks) {
            fprintf(stderr, "hk-validate: out of memory\n");
            exit(2);
        }
    }
    hkv_check_t *k = &checks[nchecks++];
    memset(k, 0, sizeof *k);
    if (strlen(name) >= sizeof k->name) {
        fprintf(stderr, "hk-validate: check name too long: %s\n", name);
        abort();
    }
    strcpy(k->name, name);
    k->fn = fn;
    k->needs = needs;
    k->a = a;
    k->b = b;
    k->c = c;
}

size_t hkv_check_count(void)
{
    return nchecks;
}

hkv_check_t *hkv_check_at(size_t i)
{
    return i < nchecks ? &checks[i] : NULL;
}

/* Why the runner does not run a check here, or NULL. *failed: the reason is
 * the plugin's own defect, so the check fails rather than being skipped (a
 * plugin that cannot make a handle, for want of nothing here, fails every
 * check that needs one). */
static const char *unmet(const hkv_check_t *k, char *buf, size_t len, int *failed)
{
    const hkv_probe_t *pr = &hkv.probe;
    *failed = (k->needs & HKV_NEED_HANDLE) && pr->loaded && !pr->handle_ok && !pr->env_missing;
    if (*failed)
        snprintf(buf, len, "no handle to check with: %s", pr->create_why);
    else if ((k->needs & (HKV_NEED_PLUGIN | HKV_NEED_HANDLE | HKV_NEED_CUDA)) && !pr->loaded)
        snprintf(buf, len, "the plugin did not load: %s", pr->why);
    else if ((k->needs & HKV_NEED_HANDLE) && !pr->handle_ok)
        snprintf(buf, len, "no handle can be made here: %s", pr->create_why);
    else if ((k->needs & HKV_NEED_CUDA) && !pr->cuda)
        snprintf(buf, len, "not a CUDA plugin (%s)",
                 pr->abi >= HKV_ABI_1_2 && (pr->flags & HK_PLUGIN_MEMORY_HOST)
                     ? "memory flag HOST"
                     : "handle_info gives device -1 or is not supported");
    else if ((k->needs & HKV_NEED_CUDA) && !pr->driver_ok)
        snprintf(buf, len, "%s", pr->driver_why);
    else if ((k->needs & HKV_NEED_CUDA) && pr->ndev < 1)
        snprintf(buf, len, "no CUDA device");
    else if ((k->needs & HKV_NEED_2DEV) && pr->ndev < 2)
        snprintf(buf, len, "needs two CUDA devices; %d here", pr->ndev);
    else if ((k->needs & HKV_NEED_COPY) && !hkv.copy_path[0])
        snprintf(buf, len, "no second copy of the plugin file could be made");
    else
        return NULL;
    return buf;
}

/* The check's output goes to errfd (a file the runner reads back when the
 * check dies), or stays on the terminal with -v. */
static void child(const hkv_check_t *k, int fd, int errfd)
{
    if (!hkv.verbose && !hkv.no_fork && errfd >= 0) {
        dup2(errfd, 1);
        dup2(errfd, 2);
    }
    hkv_result_t r;
    memset(&r, 0, sizeof r);
    hkv_plugin_t p;
    memset(&p, 0, sizeof p);
    char why[320];
    if ((k->needs & (HKV_NEED_PLUGIN | HKV_NEED_HANDLE | HKV_NEED_CUDA)) &&
        hkv_plugin_load(&p, hkv.path, why, sizeof why) != 0)
        hkv_fail(&r, "the plugin did not load in the check's process: %s", why);
    else
        k->fn(k, &p, &r);
    hkv_finish(&r);
    if (hkv.no_fork) {
        printf("%s: %d %s\n", k->name, r.verdict, r.detail);
        exit(r.verdict == HKV_FAIL);
    }
    ssize_t w = write(fd, &r, sizeof r);
    close(fd);
    /* exit, not _exit: sanitizers report at exit and set the status. */
    exit(w == (ssize_t)sizeof r ? 0 : 3);
}

typedef struct check_run {
    const hkv_check_t *k;
    int rfd, fd, errfd;
} check_run_t;

static void check_worker(void *arg)
{
    const check_run_t *c = arg;
    close(c->rfd);
    child(c->k, c->fd, c->errfd);
}

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Appends the first line of a sanitizer's or the C library's report that the
 * check's process printed before it died, which usually names the bug. */
static void add_report(hkv_result_t *r, FILE *f)
{
    static const char *const marks[] = {"ERROR: ", "runtime error: ", "WARNING: ThreadSanitizer",
                                        "Fatal glibc error", "free(): ", "malloc(): "};
    char line[512];
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
            const char *m = strstr(line, marks[i]);
            if (!m)
                continue;
            line[strcspn(line, "\n")] = '\0';
            char *pc = strstr(line, " at pc 0x"); /* the addresses say nothing here */
            if (pc)
                *pc = '\0';
            size_t len = strlen(r->detail);
            snprintf(r->detail + len, sizeof r->detail - len, ": %s", m);
            return;
        }
    }
}

/* Turns what came back from a check's process into its result. */
static void interpret(hkv_result_t *r, size_t got, const hkv_end_t *e, int timed_out)
{
    char sb[32];
    int status = e->status;
    if (timed_out) {
        memset(r, 0, sizeof *r);
        hkv_fail(r, "timed out after %d ms (a hang, or raise --timeout)", hkv.timeout_ms);
        snprintf(r->observed, sizeof r->observed, "TIMEOUT");
    } else if (e->keeper_died) {
        memset(r, 0, sizeof *r);
        if (WIFSIGNALED(status))
            hkv_fail(r, "killed its parent process (by %s)",
                     hkv_signal_name(WTERMSIG(status), sb, sizeof sb));
        else
            hkv_fail(r, "its parent process ended before it (status %d)",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        snprintf(r->observed, sizeof r->observed, "KILLED-PARENT");
    } else if (got != sizeof *r) {
        memset(r, 0, sizeof *r);
        if (WIFSIGNALED(status)) {
            const char *s = hkv_signal_name(WTERMSIG(status), sb, sizeof sb);
            hkv_fail(r, "killed by %s", s);
            snprintf(r->observed, sizeof r->observed, "%s", s);
        } else {
            hkv_fail(r, "the check's process exited with status %d without a result",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            snprintf(r->observed, sizeof r->observed, "EXIT-%d",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        }
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char prev[sizeof r->detail];
        snprintf(prev, sizeof prev, "%s", r->detail);
        int was_fail = r->verdict == HKV_FAIL;
        r->verdict = HKV_FAIL;
        r->nfail++;
        if (WIFSIGNALED(status))
            snprintf(r->detail, sizeof r->detail, "%.400s; then killed by %s at exit",
                     was_fail ? prev : "passed", hkv_signal_name(WTERMSIG(status), sb, sizeof sb));
        else
            snprintf(r->detail, sizeof r->detail,
                     "%.400s; then its process exited with status %d (a sanitizer report?)",
                     was_fail ? prev : "passed", WEXITSTATUS(status));
    }
}

static size_t read_more(int fd, hkv_result_t *r, size_t got)
{
    ssize_t n;
    while (got < sizeof *r && (n = read(fd, (char *)r + got, sizeof *r - got)) > 0)
        got += (size_t)n;
    return got;
}

/* Reads the check's result until its process ends or the time is up. */
static void run_one(const hkv_check_t *k, hkv_result_t *r)
{
    memset(r, 0, sizeof *r);
    int fd[2];
    if (pipe(fd) != 0) {
        hkv_fail(r, "pipe: %s", strerror(errno));
        return;
    }
    FILE *errf = tmpfile();
    check_run_t c = {k, fd[0], fd[1], errf ? fileno(errf) : -1};
    if (hkv.no_fork)
        check_worker(&c); /* exits */
    hkv_proc_t p;
    if (hkv_spawn(&p, check_worker, &c) != 0) {
        hkv_fail(r, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        if (errf)
            fclose(errf);
        return;
    }
    close(fd[1]);
    fcntl(fd[0], F_SETFL, O_NONBLOCK);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t got = 0;
    hkv_end_t e = {0, 0};
    int done = 0, timed_out = 0;
    while (!done) {
        struct pollfd pf = {fd[0], POLLIN, 0};
        poll(&pf, 1, 10);
        got = read_more(fd[0], r, got);
        if (hkv_proc_poll(&p, &e)) {
            got = read_more(fd[0], r, got);
            done = 1;
        } else if (elapsed_ms(&t0) > hkv.timeout_ms) {
            timed_out = done = 1;
        }
    }
    hkv_proc_end(&p, &e); /* anything the check left behind; all of it on a timeout */
    close(fd[0]);
    interpret(r, got, &e, timed_out);
    if (errf) {
        if (r->verdict == HKV_FAIL && (got != sizeof *r || e.keeper_died ||
                                       !WIFEXITED(e.status) || WEXITSTATUS(e.status) != 0))
            add_report(r, errf);
        fclose(errf);
    }
    r->detail[sizeof r->detail - 1] = '\0';
    r->observed[sizeof r->observed - 1] = '\0';
}

static const char *verdict_name(int v)
{
    switch (v) {
    case HKV_PASS: return "PASS";
    case HKV_FAIL: return "FAIL";
    case HKV_SKIP: return "SKIP";
    default: return "NOT-SUPPORTED";
    }
}

static void print_row(const hkv_check_t *k, const hkv_result_t *r, const hkv_run_opts_t *o)
{
    if (o->quiet)
        return;
    if (o->matrix) {
        printf("%s %s\n", k->name, r->observed[0] ? r->observed : verdict_name(r->verdict));
    } else if (o->json) {
        hk__json_open(o->json, NULL, '{');
        hk__json_str(o->json, "name", k->name);
        hk__json_str(o->json, "result", verdict_name(r->verdict));
        hk__json_str(o->json, "detail", r->detail);
        if (r->observed[0])
            hk__json_str(o->json, "observed", r->observed);
        hk__json_close(o->json);
    } else {
        printf("%-46s %-13s %s\n", k->name, verdict_name(r->verdict), r->detail);
    }
    fflush(stdout);
}

int hkv_run(const unsigned char *select, hkv_result_t *results, const hkv_run_opts_t *o,
            int *passed, int *skipped)
{
    int npass = 0, nfail = 0, nskip = 0;
    if (!o->quiet && !o->matrix && !o->json)
        printf("%-46s %-13s %s\n", "CHECK", "RESULT", "DETAIL");
    for (size_t i = 0; i < nchecks; i++) {
        if (!select[i])
            continue;
        hkv_result_t *r = &results[i];
        char why[400];
        int failed;
        const char *reason = unmet(&checks[i], why, sizeof why, &failed);
        if (reason) {
            memset(r, 0, sizeof *r);
            if (failed)
                hkv_fail(r, "%s", reason);
            else
                hkv_skip(r, "%s", reason);
            snprintf(r->observed, sizeof r->observed, failed ? "NO-HANDLE" : "SKIP");
        } else {
            run_one(&checks[i], r);
        }
        if (r->verdict == HKV_PASS && (checks[i].needs & HKV_MATRIX) && !r->observed[0])
            snprintf(r->observed, sizeof r->observed, "?");
        print_row(&checks[i], r, o);
        if (r->verdict == HKV_PASS)
            npass++;
        else if (r->verdict == HKV_FAIL)
            nfail++;
        else
            nskip++;
    }
    *passed = npass;
    *skipped = nskip;
    return nfail;
}
