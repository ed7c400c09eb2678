/* Helpers of the loader tests (see test_loader_util.h). */
#include "test_loader_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hk_blas1.h"
#include "hk_status_text.h"
#include "hk_test.h"
#include "hk_swap.h"

const char *tl_plugin(const char *file)
{
    static _Thread_local char buf[4096];
    snprintf(buf, sizeof(buf), "%s/%s", HK_TEST_PLUGIN_DIR, file);
    return buf;
}

/* Under the build tree, not $TMPDIR: the loader refuses plugins below a
 * directory that others can write, and /tmp is one. */
int tl_mkdtemp(char *buf, size_t n)
{
    if (mkdir(HK_TEST_TMP_DIR, 0755) != 0 && errno != EEXIST)
        return -1;
    snprintf(buf, n, "%s/hk-loader-XXXXXX", HK_TEST_TMP_DIR);
    if (!mkdtemp(buf))
        return -1;
    return chmod(buf, 0755); /* a probe or helper of another user may read it */
}

void tl_marked_dir(char *dir, size_t n, char *marker, size_t m)
{
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(dir, n), 0);
    snprintf(marker, m, "%s/marker", dir);
    CU_ASSERT_EQUAL_FATAL(setenv("HK_TP_MARKER", marker, 1), 0);
}

void tl_marked_dir_remove(const char *dir)
{
    unsetenv("HK_TP_MARKER");
    tl_rmtree(dir);
}

const char *tl_hostile(const char *file)
{
    static _Thread_local char buf[4096];
    snprintf(buf, sizeof(buf), "%s/%s", HK_TEST_HOSTILE_DIR, file);
    return buf;
}

void tl_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char path[4096];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            tl_rmtree(path);
    }
    closedir(d);
    chmod(dir, 0700);
    rmdir(dir);
}

int tl_copy(const char *src, const char *dir, const char *name, mode_t mode,
            char *out, size_t n)
{
    char buf[65536];
    int rc = -1;
    snprintf(out, n, "%s/%s", dir, name);
    int in = open(src, O_RDONLY);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || fd < 0)
        goto out;
    for (;;) {
        ssize_t got = read(in, buf, sizeof(buf));
        if (got < 0)
            goto out;
        if (got == 0)
            break;
        if (write(fd, buf, (size_t)got) != got)
            goto out;
    }
    /* chmod, not the open mode: the umask must not hide a world-writable bit. */
    rc = fchmod(fd, mode);
out:
    if (in >= 0)
        close(in);
    if (fd >= 0)
        close(fd);
    return rc;
}

const hk_load_report_t *tl_report(const hk_loader_t *loader, const char *path)
{
    size_t n = hk_loader_report_count(loader);
    for (size_t i = 0; i < n; i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        if (r && strcmp(r->path, path) == 0)
            return r;
    }
    return NULL;
}

hk_loader_t *tl_loader(const char *dir)
{
    hk_loader_options_t o;
    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.default_dir = dir;
    o.ignore_env = 1;
    hk_loader_t *loader = NULL;
    if (hk_loader_create(&o, &loader) != HK_STATUS_OK)
        return NULL;
    return loader;
}

const hk_load_report_t *tl_open_one(const char *file, hk_loader_t **loader)
{
    *loader = tl_loader(NULL);
    if (!*loader)
        return NULL;
    const char *path = tl_plugin(file);
    hk_loader_open(*loader, path, NULL);
    return tl_report(*loader, path);
}

/* The inodes of the snapshots mapped when tl_forget_snapshots ran, which
 * tl_is_mapped does not count: a child inherits its parent's. */
static char tl_forgotten[65536];

/* The inode of a maps line of a snapshot ("/memfd:... (deleted)"), or 0. */
static unsigned long long tl_snapshot_inode(const char *line)
{
    unsigned long long ino = 0;
    if (!strstr(line, " /memfd:") || sscanf(line, "%*s %*s %*s %*s %llu", &ino) != 1)
        return 0;
    return ino;
}

void tl_forget_snapshots(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[8192];
    size_t len = 0;
    tl_forgotten[0] = '\0';
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long long ino = tl_snapshot_inode(line);
        if (ino && len + 32 < sizeof(tl_forgotten))
            len += (size_t)snprintf(tl_forgotten + len, sizeof(tl_forgotten) - len, " %llu ",
                                    ino);
    }
    if (f)
        fclose(f);
}

static int tl_forgotten_line(const char *line)
{
    char key[32];
    unsigned long long ino = tl_snapshot_inode(line);
    snprintf(key, sizeof(key), " %llu ", ino);
    return ino && strstr(tl_forgotten, key) != NULL;
}

int tl_is_mapped(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[8192];
    int found = 0;
    if (!f)
        return -1;
    size_t n = strlen(path);
    /* The loader's snapshot of the file shows under its memfd name. */
    char snap[4096];
    const char *base = strrchr(path, '/');
    snprintf(snap, sizeof(snap), "/memfd:%s (deleted)", base ? base + 1 : path);
    size_t sn = strlen(snap);
    while (!found && fgets(line, sizeof(line), f)) {
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        found = (len >= n && strcmp(line + len - n, path) == 0)
                || (len >= sn && strcmp(line + len - sn, snap) == 0 && !tl_forgotten_line(line));
    }
    fclose(f);
    return found;
}

static double tl_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The log callback of the host child, written as a host writes one: it
 * takes msg as the string the ABI promises (strlen), and counts. */
static atomic_long tl_log_lines, tl_log_foreign;
static pthread_t tl_host_thread;
static char tl_log_first[8][160];

static void tl_host_log(void *user, hk_log_level_t level, const char *msg)
{
    (void)user;
    long n = atomic_fetch_add(&tl_log_lines, 1);
    if (!pthread_equal(pthread_self(), tl_host_thread))
        atomic_fetch_add(&tl_log_foreign, 1);
    size_t len = strlen(msg);
    if (n < 8)
        snprintf(tl_log_first[n], sizeof(tl_log_first[n]), "%d|%zu|%.100s", (int)level, len,
                 msg);
}

#ifndef HK_TEST_CPU_PLUGIN /* a program whose tests swap nothing */
#define HK_TEST_CPU_PLUGIN ""
#endif

/* A movable handle on hk-cpu, a swap to job->swap_to, then y = 2x + y
 * through the movable handle (y[0] = 2 * 1 + 1 = 3 whichever plugin runs
 * it), and what it is bound to. */
static void tl_host_swap(hk_loader_t *loader, const tl_host_job_t *job, int out)
{
    hk_mhandle_t *mh = NULL;
    hk_plugin_t *to = NULL;
    hk_blas1_v1_t b;
    float x[4] = {1, 1, 1, 1}, y[4] = {1, 1, 1, 1}, alpha = 2;
    if (hk_mhandle_create(loader, HK_TEST_CPU_PLUGIN, NULL, &mh) != HK_STATUS_OK) {
        dprintf(out, "mhandle=%s\n", hk_loader_last_error(loader));
        return;
    }
    hk_status_t st = hk_loader_swap(loader, job->swap_to, NULL, &to);
    dprintf(out, "swap=%s|%s\n", hk_status_name(st),
            st == HK_STATUS_OK ? "" : hk_loader_last_error(loader));
    st = hk_mhandle_get_table(HK_TABLE_BLAS1_V1, &b, sizeof(b));
    if (st == HK_STATUS_OK)
        st = b.saxpy(hk_mhandle_handle(mh), 4, &alpha, x, 1, y, 1);
    dprintf(out, "saxpy=%s|%g\n", hk_status_name(st), (double)y[0]);
    hk_mhandle_state_t ms = {.size = sizeof(ms)};
    if (hk_mhandle_state(mh, &ms) == HK_STATUS_OK)
        dprintf(out, "bound=%s %s\n", hk_plugin_name(ms.plugin), hk_plugin_version(ms.plugin));
    hk_mhandle_destroy(mh);
}

/* Lowers RLIMIT_NOFILE so that exactly free_fds descriptor numbers below
 * it are free: a descriptor is taken at the lowest free number, and those
 * open above the limit (inherited ones, say) stay usable. */
static void tl_host_nofile(int free_fds)
{
    static unsigned char open_fd[65536];
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        _exit(91);
    int self = dirfd(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd != self && fd < (int)sizeof(open_fd))
            open_fd[fd] = 1;
    }
    closedir(d);
    rlim_t limit = 0;
    for (int left = free_fds; left > 0; limit++)
        left -= !open_fd[limit];
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        _exit(91);
    rl.rlim_cur = limit;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        _exit(91);
}

/* The host: never returns. */
static void tl_host_child(const tl_host_job_t *job, int out)
{
    hk_loader_options_t o;
    hk_loader_t *loader = NULL;
    tl_host_thread = pthread_self();
    tl_forget_snapshots();
    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.ignore_env = 1;
    o.default_dir = job->scan_dir;
    o.isolation = job->isolation;
    o.probe_timeout_ms = job->timeout_ms ? job->timeout_ms : 300;
    o.probe_path = job->probe_path;
    if (job->log)
        o.log = tl_host_log;
    if (job->nofile_free > 0)
        tl_host_nofile(job->nofile_free);
    double t0 = tl_now_ms();
    if (hk_loader_create(&o, &loader) != HK_STATUS_OK)
        _exit(90);
    if (job->open_path)
        hk_loader_open(loader, job->open_path, NULL);
    for (int i = 0; job->scan_dir && i < (job->scans ? job->scans : 1); i++)
        hk_loader_scan(loader);
    if (job->swap_to)
        tl_host_swap(loader, job, out);
    dprintf(out, "ms=%.3f\n", tl_now_ms() - t0);
    for (size_t i = 0; i < hk_loader_report_count(loader); i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        dprintf(out, "report=%s|%s|%s|%s\n", r->path, hk_load_stage_name(r->stage),
                hk_status_name(r->status), r->reason);
        char real[4096];
        if (realpath(r->path, real) && tl_is_mapped(real) == 1)
            dprintf(out, "mapped=%s\n", r->path);
    }
    dprintf(out, "plugins=%zu\n", hk_loader_plugin_count(loader));
    if (job->linger_ms) {
        hk_loader_destroy(loader);
        struct timespec ts = {job->linger_ms / 1000, (job->linger_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
        dprintf(out, "survived=1\n");
    }
    if (job->log) {
        dprintf(out, "log_lines=%ld\nlog_foreign=%ld\n", atomic_load(&tl_log_lines),
                atomic_load(&tl_log_foreign));
        for (long i = 0; i < 8 && i < atomic_load(&tl_log_lines); i++)
            dprintf(out, "log=%s\n", tl_log_first[i]);
    }
    _exit(0);
}

/* The host child's stderr, when captured: a file in the build tree. */
static int tl_stderr_file(char *path, size_t n)
{
    if (mkdir(HK_TEST_TMP_DIR, 0755) != 0 && errno != EEXIST)
        return -1;
    snprintf(path, n, "%s/host-stderr-XXXXXX", HK_TEST_TMP_DIR);
    return mkstemp(path);
}

static void tl_stderr_read(int fd, tl_host_run_t *run)
{
    struct stat st;
    if (fstat(fd, &st) == 0)
        run->err_bytes = st.st_size;
    ssize_t got = pread(fd, run->err_head, sizeof(run->err_head) - 1, 0);
    run->err_head[got > 0 ? got : 0] = '\0';
}

int tl_host_run(const tl_host_job_t *job, tl_host_run_t *run)
{
    int p[2];
    size_t len = 0;
    memset(run, 0, sizeof(*run));
    run->wstatus = -1;
    char errpath[4200];
    int errfd = -1;
    if (job->capture_stderr && (errfd = tl_stderr_file(errpath, sizeof(errpath))) < 0)
        return -1;
    if (errfd >= 0)
        unlink(errpath);
    if (pipe(p) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        close(p[0]);
        if (errfd >= 0)
            dup2(errfd, 2);
        tl_host_child(job, p[1]);
    }
    setpgid(pid, pid); /* also here: before the child gets to it, a kill would miss */
    close(p[1]);
    run->pid = pid;
    double deadline = tl_now_ms() + (job->deadline_ms ? job->deadline_ms : 60000);
    for (;;) {
        double left = deadline - tl_now_ms();
        struct pollfd pf = {p[0], POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
            break;
        ssize_t got = read(p[0], run->out + len, sizeof(run->out) - 1 - len);
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    run->out[len] = '\0';
    close(p[0]);
    int ws = 0;
    for (;;) { /* EOF comes a moment before the child can be reaped */
        if (waitpid(pid, &ws, WNOHANG) == pid)
            break;
        if (tl_now_ms() > deadline) {
            kill(-pid, SIGKILL); /* and what it started in its group */
            waitpid(pid, &ws, 0);
            ws = -1;
            break;
        }
        usleep(200);
    }
    run->wstatus = ws;
    if (errfd >= 0) {
        tl_stderr_read(errfd, run);
        close(errfd);
    }
    const char *ms = strstr(run->out, "ms=");
    run->ms = ms ? atof(ms + 3) : -1;
    if (ws != 0)
        printf("\n    host child %ld ended with wait status %d; it said:\n%s", (long)pid, ws,
               run->out);
    return ws == 0 ? 0 : -1;
}

int tl_has_line(const tl_host_run_t *run, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = run->out; (p = strstr(p, line)) != NULL; p++)
        if ((p == run->out || p[-1] == '\n') && p[n] == '\n')
            return 1;
    printf("\n    no line \"%s\" in:\n%s", line, run->out);
    return 0;
}

int tl_has_line_like(const tl_host_run_t *run, const char *prefix, const char *suffix)
{
    size_t np = strlen(prefix), ns = strlen(suffix);
    for (const char *p = run->out; (p = strstr(p, prefix)) != NULL; p++) {
        if (p != run->out && p[-1] != '\n')
            continue;
        const char *end = strchr(p, '\n');
        if (end && (size_t)(end - p) >= np + ns && memcmp(end - ns, suffix, ns) == 0)
            return 1;
    }
    printf("\n    no line \"%s...%s\" in:\n%s", prefix, suffix, run->out);
    return 0;
}

void tl_marker_count(const char *marker, pid_t pid, int *total, int *by_pid)
{
    char line[256];
    *total = *by_pid = 0;
    FILE *f = fopen(marker, "r");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        (*total)++;
        if (atol(line) == (long)pid)
            (*by_pid)++;
    }
    fclose(f);
}

const char *tl_sticky_above(void)
{
    static char found[PATH_MAX];
    char part[PATH_MAX];
    if (!realpath(HK_TEST_TMP_DIR, part) && !realpath(HK_TEST_PLUGIN_DIR, part))
        return NULL;
    for (;;) {
        struct stat st;
        if (stat(part, &st) == 0 && (st.st_mode & S_ISVTX) && (st.st_mode & (S_IWGRP | S_IWOTH))) {
            snprintf(found, sizeof(found), "%s", part);
            return found;
        }
        char *slash = strrchr(part, '/');
        if (!slash || slash == part)
            return NULL;
        *slash = '\0';
    }
}

const char *tl_setuid_unavailable(void)
{
    struct statvfs vfs;
    if (geteuid() != 0)
        return "needs root to give a set-user-ID copy of the helper to uid 65534";
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
        return "no_new_privs is set: set-user-ID bits are not honoured";
    if (mkdir(HK_TEST_TMP_DIR, 0755) != 0 && errno != EEXIST)
        return "cannot make the test directory";
    if (statvfs(HK_TEST_TMP_DIR, &vfs) == 0 && (vfs.f_flag & ST_NOSUID))
        return "the build tree is mounted nosuid";
    /* The helper runs as uid 65534 and reads the build tree: a private
     * directory above the checkout (a home of mode 0700) keeps it out. */
    static char why[PATH_MAX + 200];
    const char *const need[] = {HK_TEST_TMP_DIR, HK_TEST_PLUGIN_DIR};
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        const char *no = hk_test_unreachable(65534, need[i]);
        if (no) {
            snprintf(why, sizeof(why), "the set-user-ID helper runs as uid 65534, which cannot "
                     "reach the build tree: %s", no + strlen("uid 65534 "));
            return why;
        }
    }
    return NULL;
}

const char *tl_setuid_loading_unavailable(void)
{
    static char why[PATH_MAX + 200];
    const char *no = tl_setuid_unavailable();
    if (no)
        return no;
    const char *sticky = tl_sticky_above();
    if (!sticky)
        return NULL;
    snprintf(why, sizeof(why), "the build tree lies below the sticky directory %s, which the "
             "set-user-ID helper's strict trust rule refuses", sticky);
    return why;
}
