/* The debug trace: HK_TRACE and HK_TRACE_FILE (docs/trace.md), checked from
 * outside. Every test runs a scenario in a child process with the variables
 * set for it alone (see trace_test.h) and reads what the child wrote: each
 * context decision of hk-cuda's kit with its device, the per-call switches at
 * level 2 and only there, the loader's verdicts, selections and swap phases,
 * the file name rules, whole lines from 8 threads, and nothing at all when
 * the trace is off or the process runs with elevated privileges. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "hk_rt.h"
#include "trace_test.h"

extern char **environ;

/* A child still running after this long is killed (and fails). */
#define TR_DEADLINE_S 60
#define TR_DEADLINE_TEXT "60 s"

/* ---- running a child ---- */

typedef struct tr_run {
    pid_t pid;
    int status;      /* wait status */
    char *err;       /* everything the child wrote to stderr (through a pipe) */
    char *out;       /* its stdout (through a file) */
    char *trace;     /* the trace file's contents; NULL when there is no file */
    int timed_out;   /* killed after TR_DEADLINE_S */
    char file[PATH_MAX];
} tr_run_t;

static char tmp_dir[2048]; /* below PATH_MAX, so the paths made from it fit */
static int ndev;

/* One read of fd into *buf (*len bytes of *cap used), which is grown first
 * when full. Returns 1 to read again (data came, or the read was
 * interrupted), 0 at the end: end of file, an error, or no memory to grow
 * (what was read is kept). */
static int read_step(int fd, char **buf, size_t *len, size_t *cap)
{
    if (*len + 1 == *cap) {
        char *grown = realloc(*buf, *cap * 2);
        if (!grown)
            return 0;
        *buf = grown;
        *cap *= 2;
    }
    ssize_t n = read(fd, *buf + *len, *cap - *len - 1);
    if (n < 0 && errno == EINTR)
        return 1;
    if (n <= 0)
        return 0;
    *len += (size_t)n;
    return 1;
}

static char *read_all_fd(int fd)
{
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap);
    while (buf && read_step(fd, &buf, &len, &cap))
        ;
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* Reads fd to EOF (the child's end closes when it exits), but kills the
 * child when it has not ended within TR_DEADLINE_S: a child blocked for
 * good (in an open, say) fails its test instead of hanging the suite. */
static char *read_until(int fd, pid_t pid, int *timed_out)
{
    struct timespec t0, now;
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *timed_out = 0;
    while (buf) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = TR_DEADLINE_S * 1000L - ((now.tv_sec - t0.tv_sec) * 1000L
                                             + (now.tv_nsec - t0.tv_nsec) / 1000000L);
        if (left <= 0) {
            kill(pid, SIGKILL);
            *timed_out = 1;
            break;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, (int)left);
        if (r <= 0) {
            if (r < 0 && errno != EINTR)
                break;
            continue;
        }
        if (!read_step(fd, &buf, &len, &cap))
            break;
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

static char *read_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *s = read_all_fd(fd);
    close(fd);
    return s;
}

/* 1 when name=... is one of the variables set, or one the test controls. */
static int overridden(const char *entry, const char *const *set)
{
    static const char *const ours[] = {"HK_TRACE=", "HK_TRACE_FILE=", "HKTR_CHILD=", NULL};
    for (const char *const *p = ours; *p; p++)
        if (strncmp(entry, *p, strlen(*p)) == 0)
            return 1;
    for (const char *const *p = set; p && *p; p++) {
        size_t k = strcspn(*p, "=") + 1;
        if (strncmp(entry, *p, k) == 0)
            return 1;
    }
    return 0;
}

/* Runs prog argv with this process's environment minus the trace variables,
 * plus set ("NAME=VALUE", NULL-terminated); file: the trace file to read
 * afterwards (NULL: none). Fills run; 0 when the child ran. */
static int spawn(const char *prog, char *const argv[], const char *const *set, const char *file,
                 tr_run_t *run)
{
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    for (const char *const *p = set; p && *p; p++)
        k++;
    char **envp = calloc(n + k + 1, sizeof *envp);
    size_t e = 0;
    for (size_t i = 0; i < n; i++)
        if (!overridden(environ[i], set))
            envp[e++] = environ[i];
    for (size_t i = 0; i < k; i++)
        envp[e++] = (char *)set[i];
    envp[e] = NULL;

    char outpath[PATH_MAX];
    snprintf(outpath, sizeof outpath, "%s/stdout.txt", tmp_dir);
    int pipefd[2];
    memset(run, 0, sizeof *run);
    snprintf(run->file, sizeof run->file, "%s", file ? file : "");
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        free(envp);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    int rc = posix_spawn(&run->pid, prog, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        return -1;
    }
    run->err = read_until(pipefd[0], run->pid, &run->timed_out);
    close(pipefd[0]);
    while (waitpid(run->pid, &run->status, 0) < 0 && errno == EINTR) {
    }
    run->out = read_file(outpath);
    run->trace = file ? read_file(file) : NULL;
    return 0;
}

/* Runs scenario in a child of this program, with HK_TRACE=level (NULL: not
 * set) and the trace going to the file "name" in the temporary directory
 * (NULL: stderr), plus more variables. Asserts that the child passed. */
static void child(tr_run_t *run, const char *scenario, const char *level, const char *name,
                  const char *more)
{
    char self[PATH_MAX], v_child[128], v_level[128], v_file[PATH_MAX + 32], file[PATH_MAX];
    const char *set[5] = {v_child, NULL, NULL, NULL, NULL};
    int k = 1;
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CU_ASSERT_FATAL(len > 0);
    self[len] = '\0';
    snprintf(v_child, sizeof v_child, "HKTR_CHILD=%s", scenario);
    if (level) {
        snprintf(v_level, sizeof v_level, "HK_TRACE=%s", level);
        set[k++] = v_level;
    }
    if (name) {
        snprintf(file, sizeof file, "%s/%s", tmp_dir, name);
        snprintf(v_file, sizeof v_file, "HK_TRACE_FILE=%s", file);
        set[k++] = v_file;
        unlink(file);
    }
    if (more)
        set[k++] = more;
    char *argv[] = {self, NULL};
    CU_ASSERT_EQUAL_FATAL(spawn(self, argv, set, name ? file : NULL, run), 0);
    int passed = WIFEXITED(run->status) && WEXITSTATUS(run->status) == 0;
    if (!passed)
        printf("\n  child %s failed (wait status %d%s):\n%s\n%s\n", scenario, run->status,
               run->timed_out ? ", killed after " TR_DEADLINE_TEXT : "",
               run->out ? run->out : "", run->err ? run->err : "");
    CU_ASSERT(passed);
}

/* child() writing its trace to t.log, which it must have written (asserted,
 * fatally). */
static void traced(tr_run_t *run, const char *scenario, const char *level, const char *more)
{
    child(run, scenario, level, "t.log", more);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run->trace);
}

static void run_free(tr_run_t *run)
{
    free(run->err);
    free(run->out);
    free(run->trace);
    if (run->file[0])
        unlink(run->file);
    memset(run, 0, sizeof *run);
}

/* ---- reading the lines ---- */

/* How many lines of text contain every needle (NULL-terminated). */
static int lines_with(const char *text, ...)
{
    const char *needles[8];
    int n = 0, count = 0;
    va_list ap;
    va_start(ap, text);
    for (const char *s; n < 8 && (s = va_arg(ap, const char *)) != NULL;)
        needles[n++] = s;
    va_end(ap);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        int all = 1;
        for (int i = 0; i < n && all; i++) {
            const char *hit = memmem(line, len, needles[i], strlen(needles[i]));
            all = hit != NULL;
        }
        count += all;
        line = end ? end + 1 : NULL;
    }
    return count;
}

/* The prefix every line has: "hk <pid>:<tid> <module> <area>: ". Returns the
 * number of lines, or -1 when one is not whole: no prefix, a pid other than
 * pid (0: any), or no newline at the end. */
static int whole_lines(const char *text, pid_t pid)
{
    int lines = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        long p = -1, t = -1;
        char module[64], area[64];
        int used = 0;
        if (!end || sscanf(line, "hk %ld:%ld %63s %63[^:]: %n", &p, &t, module, area, &used) < 4
            || used == 0 || (pid && p != (long)pid) || t <= 0 || used > end - line) {
            printf("\n  not a whole line: %.*s\n", (int)(end ? end - line : 80), line);
            return -1;
        }
        lines++;
        line = end + 1;
    }
    return lines;
}

#define HAS(text, ...) CU_ASSERT(lines_with((text), __VA_ARGS__, (const char *)NULL) > 0)
#define HAS_NOT(text, ...) CU_ASSERT_EQUAL(lines_with((text), __VA_ARGS__, (const char *)NULL), 0)

/* ---- hk-cuda's context decisions ---- */

static void t_nothing_current(void)
{
    tr_run_t r;
    traced(&r, "nothing", "1", NULL);
    HAS(r.trace, "hk-cuda driver: opened ", "named by HK_CUDA_DRIVER", "2 devices");
    HAS(r.trace, "hk-cuda ctx: handle 0x", "bound to the primary context of device 0 (",
        "retained; nothing was current");
    HAS(r.trace, "hk-cuda ctx: handle 0x", "destroyed: its retain of the primary context of "
        "device 0 kept by the kit (0 more given back)");
    HAS(r.trace, "hk-cuda ctx: device 0: the kit keeps a retain of the primary context (context "
        "id ", ") until trim or unload");
    HAS_NOT(r.trace, " call: "); /* level 2 only */
    CU_ASSERT(whole_lines(r.trace, r.pid) > 3);
    run_free(&r);
}

static void t_user_context(void)
{
    tr_run_t r;
    traced(&r, "user", "1", NULL);
    HAS(r.trace, "hk-cuda ctx: handle 0x", "bound to the current user context 0x",
        "of device 0 (context id ", "not retained");
    HAS_NOT(r.trace, "bound to the primary");
    HAS(r.trace, "hk-cuda ctx: handle 0x", "(device 0): refused CONTEXT_DESTROYED: ",
        "destroyed");
    HAS(r.trace, "destroyed: its context (device 0) is not the handle's to release",
        "its context was destroyed");
    run_free(&r);
}

static void t_switch_at_level_2(void)
{
    tr_run_t r;
    traced(&r, "other_device", "2", NULL);
    HAS(r.trace, "ctx: handle 0x", "bound to the primary context of device 0",
        "that device was asked for");
    int pushed = lines_with(r.trace, "hk-cuda call: handle 0x", "(device 0): the caller had "
                            "context 0x", ": pushed its context 0x", (const char *)NULL);
    int popped = lines_with(r.trace, "hk-cuda call: handle 0x", "(device 0): popped its "
                            "context: the caller's context 0x", " is current again",
                            (const char *)NULL);
    CU_ASSERT(pushed >= 1);
    CU_ASSERT_EQUAL(pushed, popped);
    run_free(&r);
    /* level 1: the same run without a line per call */
    traced(&r, "other_device", "1", NULL);
    HAS(r.trace, "bound to the primary context of device 0");
    HAS_NOT(r.trace, " call: ");
    run_free(&r);
}

static void t_failed_restore(void)
{
    tr_run_t r;
    traced(&r, "restore_fails", "1", NULL);
    HAS(r.trace, "hk-cuda call: handle 0x", "(device 0): restore FAILED: cuCtxPopCurrent refused "
        "twice (999); its context 0x", "is still current where the caller had nothing current");
    HAS_NOT(r.trace, "pushed its context"); /* the push is a level 2 line */
    run_free(&r);
}

static void t_reset_rearmed(void)
{
    tr_run_t r;
    traced(&r, "reset", "1", NULL);
    HAS(r.trace, "ctx: handle 0x", "bound to the primary context of device 0",
        "retained; it was current)");
    HAS(r.trace, "ctx: handle 0x", ": the primary context of device 0 was reset (context id ",
        " gone); re-armed in context id ");
    HAS(r.trace, "destroyed: its retain of the primary context of device 0 kept by the kit");
    run_free(&r);
}

static void t_green_context(void)
{
    tr_run_t r;
    char dev[32];
    traced(&r, "green", "1", NULL);
    snprintf(dev, sizeof dev, "of device %d (", ndev - 1);
    HAS(r.trace, "ctx: handle 0x", "bound to a green context 0x", dev, "not retained");
    HAS_NOT(r.trace, "user context");
    run_free(&r);
}

static void t_no_driver(void)
{
    tr_run_t r;
    traced(&r, "nodriver", "1", "HK_CUDA_DRIVER=/nonexistent/libcuda.so.1");
    HAS(r.trace, "hk-cuda driver: not opened: NO_DRIVER: cannot open the CUDA driver "
        "/nonexistent/libcuda.so.1 (HK_CUDA_DRIVER): No such file or directory");
    run_free(&r);
}

static void t_fork_child(void)
{
    tr_run_t r;
    char who[64];
    long grandchild = 0;
    traced(&r, "fork", "1", NULL);
    const char *said = r.out ? strstr(r.out, "fork child ") : NULL;
    CU_ASSERT_FATAL(said && sscanf(said, "fork child %ld", &grandchild) == 1);
    snprintf(who, sizeof who, "hk %ld:", grandchild);
    HAS(r.trace, who, " hk-cuda ctx: handle 0x", "(device 0): refused FORKED: ", "fork()");
    run_free(&r);
}

/* ---- the loader's decisions ---- */

static void t_loader(void)
{
    tr_run_t r;
    char path[PATH_MAX + 16];
    traced(&r, "loader", "1", NULL);
    HAS(r.trace, "loader scan: directory " HK_TEST_PLUGIN_DIR " (the default directory): ");
    snprintf(path, sizeof path, "refused %s/x.so at stage open: LOAD_FAILED: not an ELF file",
             HK_TEST_PLUGIN_DIR);
    HAS(r.trace, "loader load: ", path);
    snprintf(path, sizeof path, "loaded %s/tp_good.so: tp-good 1.1.0, ABI 1.1", HK_TEST_PLUGIN_DIR);
    HAS(r.trace, "loader load: ", path);
    HAS(r.trace, "loader load: negotiated ", "/tp_twin2.so: tp-twin 2.0.0 chose ABI ");
    HAS(r.trace, "loader select: \"tp-twin\" resolves to tp-twin 2.0.0 (", "/tp_twin2.so): chosen");
    HAS(r.trace, "loader select: \"tp-twin\": not 1.0.0 (", "/tp_twin1.so): lower: lower than "
        "2.0.0");
    HAS(r.trace, "loader select: \"tp-twin@^3\": NOT_FOUND: ", "none in range");
    HAS(r.trace, "loader find: \"tp-good\": tp-good ", "the first loaded of 4 plugins");
    HAS(r.trace, "loader destroy: refused: BUSY: tp-unload 1.1.0 (", "is still acquired");
    HAS(r.trace, "loader destroy: loader destroyed: ");
    HAS_NOT(r.trace, "loader probe: "); /* level 3 */
    run_free(&r);
    traced(&r, "loader", "verbose", NULL);
    HAS(r.trace, "loader probe: ", "/tp_good.so: answered in the probe as tp-good 1.1.0");
    run_free(&r);
}

static void t_swap(void)
{
    tr_run_t r;
    traced(&r, "swap", "1", NULL);
    HAS(r.trace, "loader swap: \"hk-cpu@1.0.1\" resolves to hk-cpu 1.0.1 (", "1 movable handle "
        "to move");
    HAS(r.trace, "loader swap: verified hk-cpu 1.0.1");
    HAS(r.trace, "loader swap: switched 1 handle to hk-cpu 1.0.1");
    HAS(r.trace, "loader swap: drained: ");
    HAS(r.trace, "loader swap: closed the module of hk-cpu 1.0.0 (");
    HAS(r.trace, "loader swap: to \"hk-cpu@1.0.2\" refused: LOAD_FAILED: ", "verification");
    HAS(r.trace, "loader destroy: refused: BUSY: loader destroy refused: 1 movable handle");
    run_free(&r);
}

/* ---- the switch itself ---- */

static void t_file_name_pid(void)
{
    tr_run_t r;
    char name[PATH_MAX + 64], prefix[64];
    child(&r, "loader", "1", "t-%p-%%.log", NULL);
    CU_ASSERT_PTR_NULL(r.trace); /* no file of the unexpanded name */
    snprintf(name, sizeof name, "%s/t-%ld-%%.log", tmp_dir, (long)r.pid);
    char *text = read_file(name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    snprintf(prefix, sizeof prefix, "hk %ld:", (long)r.pid);
    CU_ASSERT(strncmp(text, prefix, strlen(prefix)) == 0);
    CU_ASSERT(whole_lines(text, r.pid) > 3);
    struct stat st;
    CU_ASSERT_EQUAL(stat(name, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 0777, 0600); /* the owner's only */
    free(text);
    unlink(name);
    run_free(&r);
}

static void t_threads_whole_lines(void)
{
    tr_run_t r;
    traced(&r, "threads", "2", NULL);
    CU_ASSERT(whole_lines(r.trace, r.pid) > 0);
    const int calls = TR_THREADS * TR_CALLS;
    CU_ASSERT_EQUAL(lines_with(r.trace, "hk-cuda call: ", ": pushed its context 0x",
                               (const char *)NULL), calls);
    CU_ASSERT_EQUAL(lines_with(r.trace, "hk-cuda call: ", ": popped its context: ",
                               (const char *)NULL), calls);
    CU_ASSERT_EQUAL(lines_with(r.trace, " loader find: \"tp-good\": tp-good ",
                               (const char *)NULL), TR_THREADS * TR_FINDS);
    run_free(&r);
}

static void t_off(void)
{
    static const char *const offs[] = {NULL, "", "0", "off"};
    char name[PATH_MAX + 16];
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        const char *scenarios[] = {"nothing", "loader"};
        for (size_t k = 0; k < 2; k++) {
            tr_run_t r;
            child(&r, scenarios[k], offs[i], "off.log", NULL);
            snprintf(name, sizeof name, "%s/off.log", tmp_dir);
            CU_ASSERT_PTR_NULL(r.trace);
            CU_ASSERT_EQUAL(access(name, F_OK), -1); /* no file created */
            CU_ASSERT_PTR_NOT_NULL(r.err);
            if (r.err && r.err[0])
                printf("\n  HK_TRACE=%s wrote: %.200s\n", offs[i] ? offs[i] : "(unset)", r.err);
            CU_ASSERT(r.err && r.err[0] == '\0');
            run_free(&r);
        }
    }
}

static void t_stderr_and_fallback(void)
{
    tr_run_t r;
    /* no file: stderr, as the control that the pipe sees the lines */
    child(&r, "loader", "1", NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.err);
    HAS(r.err, "loader trace: level 1 (HK_TRACE=1) to stderr");
    HAS(r.err, "loader load: refused ", "/x.so at stage open");
    CU_ASSERT(whole_lines(r.err, r.pid) > 3);
    run_free(&r);
    /* a file that cannot be made: one line says why, the lines go to stderr */
    child(&r, "loader", "1", NULL, "HK_TRACE_FILE=/nonexistent/dir/t.log");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.err);
    HAS(r.err, "loader trace: cannot open HK_TRACE_FILE /nonexistent/dir/t.log: No such file or "
        "directory; tracing to stderr");
    CU_ASSERT_EQUAL(lines_with(r.err, "cannot open HK_TRACE_FILE", (const char *)NULL), 1);
    HAS(r.err, "loader load: loaded ", "/tp_good.so");
    run_free(&r);
}

/* Writes text into a new file path with mode; 0 on success. */
static int write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    return close(fd) == 0 && n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Runs the loader scenario with HK_TRACE_FILE=path and checks that the
 * file was refused with one line saying why, and that the lines went to
 * stderr instead. */
static void refused_file(const char *path, const char *why)
{
    tr_run_t r;
    char v_file[PATH_MAX + 32], line[PATH_MAX + 256];
    snprintf(v_file, sizeof v_file, "HK_TRACE_FILE=%s", path);
    child(&r, "loader", "1", NULL, v_file);
    CU_ASSERT_FALSE(r.timed_out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.err);
    snprintf(line, sizeof line, "loader trace: cannot open HK_TRACE_FILE %s: %s; tracing to "
             "stderr", path, why);
    CU_ASSERT_EQUAL(lines_with(r.err, line, (const char *)NULL), 1);
    if (lines_with(r.err, line, (const char *)NULL) != 1)
        printf("\n  expected once: %s\n  stderr: %.300s\n", line, r.err);
    HAS(r.err, "loader load: loaded ", "/tp_good.so");
    run_free(&r);
}

/* HK_TRACE_FILE naming what is not a regular file of this process's user:
 * a symbolic link (another user's where the test can make one, pointing at
 * a file of ours, which must stay as it was), a FIFO that nobody reads (an
 * open for writing would wait for a reader for good) and a file of another
 * user. Each is refused, said once, and the trace goes to stderr. */
static void t_file_refused(void)
{
    char victim[PATH_MAX], link[PATH_MAX], fifo[PATH_MAX], foreign[PATH_MAX], why[128];
    snprintf(victim, sizeof victim, "%s/victim.log", tmp_dir);
    snprintf(link, sizeof link, "%s/planted.log", tmp_dir);
    snprintf(fifo, sizeof fifo, "%s/fifo.log", tmp_dir);
    snprintf(foreign, sizeof foreign, "%s/foreign.log", tmp_dir);
    CU_ASSERT_EQUAL_FATAL(write_file(victim, "kept\n", 0600), 0);
    CU_ASSERT_EQUAL_FATAL(symlink(victim, link), 0);
    if (geteuid() == 0)
        CU_ASSERT_EQUAL(lchown(link, 65534, 65534), 0);
    refused_file(link, "it is a symbolic link, which is not followed");
    char *after = read_file(victim);
    CU_ASSERT(after && strcmp(after, "kept\n") == 0);
    free(after);

    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    refused_file(fifo, "it is a FIFO, not a regular file");

    if (geteuid() == 0) {
        CU_ASSERT_EQUAL_FATAL(write_file(foreign, "", 0666), 0);
        CU_ASSERT_EQUAL_FATAL(chown(foreign, 65534, 65534), 0);
        snprintf(why, sizeof why, "it is owned by uid 65534, not by this process's user "
                 "(uid 0)");
        refused_file(foreign, why);
        struct stat st;
        CU_ASSERT(stat(foreign, &st) == 0 && st.st_size == 0);
    } else {
        printf("\n  (a file of another user: needs root to make one; not run) ");
    }
    unlink(foreign);
    unlink(fifo);
    unlink(link);
    unlink(victim);
}

static void t_level_names(void)
{
    tr_run_t r;
    traced(&r, "other_device", "calls", NULL);
    HAS(r.trace, "trace: level 2 (HK_TRACE=calls)");
    HAS(r.trace, "hk-cuda call: ", "pushed its context");
    run_free(&r);
    traced(&r, "other_device", "decisions", NULL);
    HAS(r.trace, "trace: level 1 (HK_TRACE=decisions)");
    HAS_NOT(r.trace, " call: ");
    run_free(&r);
    traced(&r, "other_device", "loud", NULL);
    HAS(r.trace, "hk-cuda trace: HK_TRACE=loud is not a level", "tracing decisions (level 1)");
    HAS(r.trace, "bound to the primary context of device 0");
    HAS_NOT(r.trace, " call: ");
    run_free(&r);
}

/* ---- elevated privileges ---- */

/* Why a set-user-ID copy of the loader's helper cannot run here, or NULL. */
static const char *setuid_unavailable(void)
{
    struct statvfs vfs;
    if (geteuid() != 0)
        return "needs root to give a set-user-ID copy of the helper to uid 65534";
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
        return "no_new_privs is set: set-user-ID bits are not honoured";
    if (statvfs(tmp_dir[0] ? tmp_dir : HK_TEST_TMP_DIR, &vfs) == 0 && (vfs.f_flag & ST_NOSUID))
        return "the build tree is mounted nosuid";
    /* A private directory above the checkout (a home of mode 0700) keeps the
     * helper, which runs as uid 65534, out of the build tree. */
    static char why[PATH_MAX + 160];
    const char *no = hk_test_unreachable(65534, HK_TEST_TMP_DIR);
    if (!no)
        no = hk_test_unreachable(65534, HK_TEST_PLUGIN_DIR);
    if (!no)
        return NULL;
    snprintf(why, sizeof why, "the set-user-ID helper runs as uid 65534: %s", no);
    return why;
}

static int copy_file(const char *src, const char *dst, mode_t mode)
{
    char *data = NULL;
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
    struct stat st;
    if (in < 0 || fstat(in, &st) != 0 || !(data = malloc((size_t)st.st_size + 1)))
        goto out;
    if (read(in, data, (size_t)st.st_size) != st.st_size)
        goto out;
    out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (out >= 0 && write(out, data, (size_t)st.st_size) == st.st_size && fchmod(out, mode) == 0)
        rc = 0;
out:
    free(data);
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return rc;
}

/* The loader's select helper (tests/loader) with the trace on: a plain copy
 * traces (the control), a set-user-ID copy ignores both variables. */
static void t_at_secure_ignored(void)
{
    char helper[PATH_MAX], file[PATH_MAX + 16], v_file[PATH_MAX + 32];
    snprintf(helper, sizeof helper, "%s/helper", tmp_dir);
    CU_ASSERT_EQUAL_FATAL(copy_file(HK_TEST_SELECT_HELPER, helper, 0755), 0);
    char *argv[] = {helper, tmp_dir, "tp-good", NULL};
    snprintf(file, sizeof file, "%s/secure.log", tmp_dir);
    snprintf(v_file, sizeof v_file, "HK_TRACE_FILE=%s", file);
    const char *set[] = {"HK_TRACE=1", v_file, NULL};
    tr_run_t r;
    CU_ASSERT_EQUAL_FATAL(spawn(helper, argv, set, file, &r), 0);
    CU_ASSERT_PTR_NOT_NULL(r.out && strstr(r.out, "secure=0\n"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.trace);
    HAS(r.trace, "loader scan: search path: ", "then the default directory ");
    run_free(&r);

    CU_ASSERT_EQUAL_FATAL(chown(helper, 65534, 65534), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(helper, 04755), 0); /* after chown, which clears it */
    CU_ASSERT_EQUAL_FATAL(spawn(helper, argv, set, file, &r), 0);
    CU_ASSERT_PTR_NOT_NULL(r.out && strstr(r.out, "secure=1\n"));
    CU_ASSERT_PTR_NULL(r.trace);
    CU_ASSERT_EQUAL(access(file, F_OK), -1);
    CU_ASSERT(r.err && r.err[0] == '\0');
    run_free(&r);
    unlink(helper);
}

/* ---- registration ---- */

static void skip_if(CU_pTest t, const char *why)
{
    if (why)
        hk_test_skip(t, why);
}

static int suite_init(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "%s/trace-XXXXXX", HK_TEST_TMP_DIR);
    if (mkdir(HK_TEST_TMP_DIR, 0755) != 0 && errno != EEXIST)
        return -1;
    if (!mkdtemp(tmp_dir) || chmod(tmp_dir, 0755) != 0)
        return -1;
    return 0;
}

static int suite_clean(void)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/stdout.txt", tmp_dir);
    unlink(path);
    return rmdir(tmp_dir) == 0 ? 0 : -1;
}

int hk_test_register(void)
{
    const char *scenario = getenv("HKTR_CHILD");
    if (scenario) {
        if (tr_child_register(scenario) != 0) {
            fprintf(stderr, "no scenario %s\n", scenario);
            return -1;
        }
        return 0;
    }
    int n = 0;
    if (cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&n) == CUDA_SUCCESS)
        ndev = n;
    const char *no_dev = ndev < 1 ? "no CUDA device (run over tests/simcuda)" : NULL;
    const char *one_dev = ndev < 2 ? "needs 2 CUDA devices" : NULL;
    int on_sim = dlsym(RTLD_DEFAULT, "simcuda_fail_repeat") != NULL;

    CU_pSuite s = hk_test_suite("trace: hk-cuda's context decisions", suite_init, suite_clean);
    skip_if(hk_test_add(s, "nothing current: primary of device 0 bound, retained, released",
                        t_nothing_current), no_dev);
    skip_if(hk_test_add(s, "user context: bound, not retained; destroyed: refused",
                        t_user_context), no_dev);
    skip_if(hk_test_add(s, "another device current: switch and restore at level 2 only",
                        t_switch_at_level_2), one_dev);
    skip_if(hk_test_add(s, "a restore refused twice: traced at level 1", t_failed_restore),
            no_dev ? no_dev : !on_sim ? "needs the simulated driver's fault injection" : NULL);
    skip_if(hk_test_add(s, "reset primary: re-armed in a new context id", t_reset_rearmed),
            no_dev ? no_dev : !hk_rt_available() ? hk_rt_why_unavailable() : NULL);
    skip_if(hk_test_add(s, "green context current: bound to it", t_green_context), no_dev);
    skip_if(hk_test_add(s, "driver refused: why", t_no_driver), no_dev);
    skip_if(hk_test_add(s, "fork child: FORKED, traced with its own pid", t_fork_child),
            no_dev);

    s = hk_test_suite("trace: the loader's decisions", suite_init, suite_clean);
    hk_test_add(s, "verdicts, versions, resolution, find, destroy BUSY; probe at level 3",
                t_loader);
    hk_test_add(s, "swap phases and a refused swap", t_swap);

    s = hk_test_suite("trace: the switch", suite_init, suite_clean);
    hk_test_add(s, "HK_TRACE_FILE: %p is the pid, %% a percent sign, mode 0600", t_file_name_pid);
    skip_if(hk_test_add(s, "8 threads, two modules, one file: every line whole",
                        t_threads_whole_lines), one_dev);
    skip_if(hk_test_add(s, "off (unset, empty, 0, off): no file, nothing on stderr", t_off),
            no_dev);
    hk_test_add(s, "stderr by default; a file that cannot be opened: one line, then stderr",
                t_stderr_and_fallback);
    hk_test_add(s, "HK_TRACE_FILE a link, a FIFO, another user's file: refused, then stderr",
                t_file_refused);
    skip_if(hk_test_add(s, "level names; an unknown value traces decisions and says so",
                        t_level_names), one_dev);
    skip_if(hk_test_add(s, "set-user-ID (AT_SECURE): both variables ignored",
                        t_at_secure_ignored), setuid_unavailable());
    return 0;
}
