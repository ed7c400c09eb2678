/* handlekit loader: the host's side of isolation.
 *
 * Before the host maps a new candidate, the probe program loads and
 * negotiates it in a process of its own, so that a constructor or a
 * negotiation that crashes, exits, hangs or writes garbage costs that file
 * its place and not the host its life (the protocol is in hk__loader.h).
 *
 * Why a separate program started with posix_spawn, and not fork(): a host may
 * be multithreaded, and a forked copy of it holds every lock that another
 * thread held at the fork (malloc arenas, the dynamic loader's, the host's
 * own), so dlopen in such a child can deadlock or run on inconsistent state.
 * posix_spawn (clone + exec in glibc) runs no fork handlers and copies no
 * lock; the probe starts single-threaded, and only it forks, one child per
 * candidate, which is safe there. The program is found through
 * hk_loader_options_t.probe_path, else "hk-probe" beside the executable,
 * else the one built with this loader (HK_PROBE_BUILD_PATH); it is checked
 * like a plugin (hk_loader_trust.c) and executed through the checked
 * descriptor. */
#include "hk__errtext.h"
#include "hk__loader.h"
#include "hk__trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Tries one place for the probe program. Returns 1 when found (usable or
 * not: *fd or reason says), 0 when there is no file there. */
static int hk__probe_try(const char *path, int *fd, char *reason, size_t n)
{
    struct stat st;
    char why[HK__REASON_MAX];
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return 0;
    if (hk__trust_open(path, 0, 1, fd, &st, NULL, why, sizeof(why)) != HK_STATUS_OK) {
        if (snprintf(reason, n, "%s: %s", path, why) >= (int)n && n > 4)
            memcpy(reason + n - 4, "...", 4); /* a cut reason says so */
        return 1;
    }
    if (!(st.st_mode & S_IXUSR)) {
        close(*fd);
        *fd = -1;
        snprintf(reason, n, "%s is not executable", path);
    }
    return 1;
}

/* Finds and checks the probe program once per loader. */
static hk_status_t hk__probe_ready(hk_loader_t *loader)
{
    char reason[HK__REASON_MAX], path[PATH_MAX + 16];
    int fd = -1;

    if (loader->probe_fd >= 0)
        return HK_STATUS_OK;
    if (loader->probe_error)
        return HK_STATUS_LOAD_FAILED;
    reason[0] = '\0';
    if (loader->probe_path) {
        if (!hk__probe_try(loader->probe_path, &fd, reason, sizeof(reason)))
            snprintf(reason, sizeof(reason), "%s: no such file", loader->probe_path);
    } else {
        int found = 0;
        ssize_t len = readlink("/proc/self/exe", path, PATH_MAX - 1);
        if (len > 0) {
            path[len] = '\0';
            char *dir = dirname(path);
            memmove(path, dir, strlen(dir) + 1);
            strcat(path, "/hk-probe");
            found = hk__probe_try(path, &fd, reason, sizeof(reason));
        }
#ifdef HK_PROBE_BUILD_PATH
        if (!found)
            found = hk__probe_try(HK_PROBE_BUILD_PATH, &fd, reason, sizeof(reason));
#endif
        if (!found)
            snprintf(reason, sizeof(reason), "hk-probe is neither beside the executable nor "
                     "where this loader was built; set probe_path or turn isolation off");
    }
    if (fd < 0) {
        size_t n = strlen(reason) + 32;
        loader->probe_error = malloc(n);
        if (loader->probe_error)
            snprintf(loader->probe_error, n, "no usable probe program: %s", reason);
        return HK_STATUS_LOAD_FAILED;
    }
    loader->probe_fd = fd;
    return HK_STATUS_OK;
}

static long long hk__now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* How one probe process is to run. */
typedef struct hk__probe_how {
    uint32_t timeout_ms; /* each child's time limit */
    uint32_t flags;      /* HK__PROBE_* */
    int device;          /* with HK__PROBE_VERIFY */
    unsigned parallel;   /* children at a time */
} hk__probe_how_t;

/* Starts the probe for cands[0..k) as how says; returns its pid or -1
 * (errno set) and *rd, the read end of its answer pipe. */
static pid_t hk__probe_spawn(hk_loader_t *loader, hk__cand_t **cands, size_t k,
                             const hk__probe_how_t *how, int *rd)
{
    /* Every source descriptor is first moved above the targets, so that no
     * dup2 of the file actions overwrites a source still to be copied. */
    int base = HK__PROBE_FD_FIRST + (int)k, tmp[HK__PROBE_CHUNK + 2], ntmp = 0, pfd[2];
    char a0[16], a1[16], a2[16], a3[16], a4[16], a5[16], a6[16], exe[48];
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    pid_t pid = -1;
    int err = 0;

    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    tmp[ntmp++] = fcntl(pfd[1], F_DUPFD_CLOEXEC, base);
    tmp[ntmp++] = fcntl(loader->probe_fd, F_DUPFD_CLOEXEC, base);
    for (size_t i = 0; i < k; i++)
        tmp[ntmp++] = fcntl(cands[i]->fd, F_DUPFD_CLOEXEC, base);
    for (int i = 0; i < ntmp; i++)
        if (tmp[i] < 0)
            err = errno ? errno : EMFILE;
    if (err)
        goto out;
    posix_spawn_file_actions_adddup2(&fa, tmp[0], HK__PROBE_FD_HOST);
    for (size_t i = 0; i < k; i++)
        posix_spawn_file_actions_adddup2(&fa, tmp[2 + i], HK__PROBE_FD_FIRST + (int)i);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    /* Default handlers and no blocked signal: a host that ignores SIGSEGV or
     * blocks SIGTERM must not pass that on to plugins' code. A session of
     * its own: a candidate that signals its process group or the probe's
     * never reaches the host's. */
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
                                        | POSIX_SPAWN_SETSID);
    snprintf(a0, sizeof(a0), "%u", (unsigned)loader->abi_min);
    snprintf(a1, sizeof(a1), "%u", (unsigned)loader->abi_max);
    snprintf(a2, sizeof(a2), "%u", (unsigned)how->timeout_ms);
    snprintf(a3, sizeof(a3), "%zu", k);
    snprintf(a4, sizeof(a4), "%u", how->parallel);
    /* The plugin gets a log callback in the probe when it will get one in
     * the host: a negotiation may behave otherwise with one. */
    snprintf(a5, sizeof(a5), "%u", how->flags | (loader->log ? HK__PROBE_LOG : 0u));
    snprintf(a6, sizeof(a6), "%u", (unsigned)how->device);
    snprintf(exe, sizeof(exe), "/proc/self/fd/%d", tmp[1]);
    char *argv[] = {"hk-probe", a0, a1, a2, a3, a4, a5, a6, NULL};
    err = posix_spawn(&pid, exe, &fa, &attr, argv, environ);
    if (err)
        pid = -1;
out:
    for (int i = 0; i < ntmp; i++)
        if (tmp[i] >= 0)
            close(tmp[i]);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        errno = err;
        return -1;
    }
    *rd = pfd[0];
    return pid;
}

static void hk__probe_refuse(hk__cand_t *c, const char *fmt, const char *phase, long long v)
{
    snprintf(c->reason, sizeof(c->reason), fmt, phase, v);
    c->refused = 1;
    c->stage = HK_STAGE_PROBE;
    c->status = HK_STATUS_LOAD_FAILED;
}

/* Copies a length-counted string of the answer; 0 when it holds a NUL or a
 * line break (a reason is one line) or does not fit. */
static int hk__answer_string(char *dst, size_t cap, const unsigned char *src, uint32_t len)
{
    if (len >= cap)
        return 0;
    for (uint32_t i = 0; i < len; i++)
        if (src[i] == '\0' || src[i] == '\n' || src[i] == '\r')
            return 0;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 1;
}

/* The child's answer after HK__PROBE_LOADED, if any: NULL when well formed
 * (c updated), else what is wrong with it. */
static const char *hk__probe_answer(hk__cand_t *c, size_t index, const unsigned char *p,
                                    size_t len)
{
    hk__probe_answer_t a;
    char from[32];
    hk__probe_result_t *r = &c->probe;

    if (len < sizeof(a))
        return "shorter than the answer header";
    memcpy(&a, p, sizeof(a));
    if (a.magic != HK__ANSWER_MAGIC)
        return "it does not start with the answer header";
    if (a.size != len || (uint64_t)a.name_len + a.version_len + a.reason_len
                             != (uint64_t)len - sizeof(a))
        return "its sizes do not add up";
    /* PROBE: a rule that only the probe holds a negotiation to. */
    if ((a.stage > HK_STAGE_LOADED && a.stage != HK_STAGE_PROBE) || a.stage == HK_STAGE_SCAN
        || a.status >= HK_STATUS__COUNT || (a.stage == HK_STAGE_LOADED) != (a.status == HK_STATUS_OK))
        return "stage or status out of range";
    p += sizeof(a);
    if (!hk__answer_string(r->name, sizeof(r->name), p, a.name_len)
        || !hk__answer_string(r->version, sizeof(r->version), p + a.name_len, a.version_len)
        || !hk__answer_string(c->reason, sizeof(c->reason), p + a.name_len + a.version_len,
                              a.reason_len))
        return "a string is too long or not one line";
    if (a.stage != HK_STAGE_LOADED) {
        /* The probe met a refusal the host would meet: report it as such. */
        snprintf(from, sizeof(from), "/proc/self/fd/%d", HK__PROBE_FD_FIRST + (int)index);
        hk__reason_rename(c->reason, sizeof(c->reason), from, c->path);
        c->refused = 1;
        c->stage = (hk_load_stage_t)a.stage;
        c->status = (hk_status_t)a.status;
        return NULL;
    }
    if (a.name_len == 0 || a.version_len == 0)
        return "a loaded plugin without name or version";
    c->reason[0] = '\0';
    r->answered = 1;
    r->stage = HK_STAGE_LOADED;
    r->status = HK_STATUS_OK;
    r->abi = a.abi;
    r->flags = a.flags;
    r->vtable_size = a.vtable_size;
    return NULL;
}

/* Where a child was when it ended, from the bytes it wrote first. */
enum { HK__PHASE_LOADING, HK__PHASE_NEGOTIATION, HK__PHASE_VERIFICATION, HK__PHASE_TRIM };

/* Applies one record of the probe to its candidate (timeout_ms: the
 * child's limit). Returns the phase the child reached. */
int hk__probe_apply(hk__cand_t *c, size_t index, const hk__probe_record_t *rec,
                    const unsigned char *p, uint32_t timeout_ms)
{
    static const char *const names[] = {"loading", "negotiation", "verification",
                                        "trim (hk.trim/1)"};
    size_t len = rec->len;
    int at = HK__PHASE_LOADING;
    if (len > 0 && p[0] == HK__PROBE_LOADED) {
        at = HK__PHASE_NEGOTIATION;
        p++;
        len--;
    }
    if (at == HK__PHASE_NEGOTIATION && len > 0 && p[0] == HK__PROBE_VERIFYING) {
        at = HK__PHASE_VERIFICATION;
        p++;
        len--;
    }
    if (at == HK__PHASE_VERIFICATION && len > 0 && p[0] == HK__PROBE_TRIMMING) {
        at = HK__PHASE_TRIM;
        p++;
        len--;
    }
    const char *phase = names[at];
    if (rec->kind == HK__PROBE_SIGNALED) {
        const char *abbrev = sigabbrev_np(rec->code);
        if (abbrev) {
            snprintf(c->reason, sizeof(c->reason), "%s killed by SIG%s", phase, abbrev);
            c->refused = 1;
            c->stage = HK_STAGE_PROBE;
            c->status = HK_STATUS_LOAD_FAILED;
        } else {
            hk__probe_refuse(c, "%s killed by signal %lld", phase, rec->code);
        }
    } else if (rec->kind == HK__PROBE_TIMEOUT) {
        hk__probe_refuse(c, at != HK__PHASE_NEGOTIATION ? "%s did not finish within %lld ms"
                                                       : "%s did not answer within %lld ms",
                         phase, timeout_ms);
    } else if (rec->kind == HK__PROBE_NOFORK) {
        hk__probe_refuse(c, "%s could not start: the probe cannot fork (errno %lld)", phase,
                         rec->code);
    } else if (rec->kind != HK__PROBE_EXITED) {
        hk__probe_refuse(c, "%s: the probe sent an unknown record (%lld)", phase, rec->kind);
    } else if (rec->overflow) {
        hk__probe_refuse(c, "%s wrote more than %lld bytes of answer", phase,
                         (long long)HK__PROBE_OUT_MAX);
    } else if (rec->code != 0 || len == 0) {
        hk__probe_refuse(c, "%s exited with status %lld", phase, rec->code);
    } else {
        const char *bad = hk__probe_answer(c, index, p, len);
        if (bad) {
            snprintf(c->reason, sizeof(c->reason), "%s wrote a malformed answer: %s", phase, bad);
            c->refused = 1;
            c->stage = HK_STAGE_PROBE;
            c->status = HK_STATUS_LOAD_FAILED;
        }
    }
    return at;
}

/* 1 when the probe process is stopped (a candidate sent it SIGSTOP, say):
 * it will send nothing more until killed. */
static int hk__probe_stopped(pid_t pid)
{
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    return waitid(P_PID, (id_t)pid, &info, WSTOPPED | WNOHANG | WNOWAIT) == 0
           && info.si_pid == pid && info.si_code == CLD_STOPPED;
}

/* The bytes that follow a record's header, or -1 when it is not one. */
static long hk__record_body(const hk__probe_record_t *rec)
{
    if (rec->magic != HK__RECORD_MAGIC || rec->len > HK__PROBE_OUT_MAX
        || rec->err_len > HK__PROBE_ERR_KEEP || rec->err_total < rec->err_len)
        return -1;
    return (long)rec->len + (long)rec->err_len;
}

/* Writes the n bytes of text to out (room cap) as one line of printable
 * ASCII: \n, \r, \t, \\, \" and \xNN for the rest; stops before a byte
 * whose form would not fit. Returns how many bytes of text it took. */
static size_t hk__escape(char *out, size_t cap, const unsigned char *text, size_t n)
{
    size_t k = 0, i = 0;
    for (; i < n; i++) {
        char piece[8];
        unsigned char b = text[i];
        if (b == '\n' || b == '\r' || b == '\t')
            snprintf(piece, sizeof(piece), "\\%c", b == '\n' ? 'n' : b == '\r' ? 'r' : 't');
        else if (b == '\\' || b == '"')
            snprintf(piece, sizeof(piece), "\\%c", b);
        else if (b < 0x20 || b >= 0x7f)
            snprintf(piece, sizeof(piece), "\\x%02x", b);
        else
            snprintf(piece, sizeof(piece), "%c", b);
        size_t len = strlen(piece);
        if (k + len + 1 > cap)
            break;
        memcpy(out + k, piece, len);
        k += len;
    }
    if (cap > 0)
        out[k] = '\0';
    return i;
}

/* What a refused candidate wrote to stderr in the probe, added to its
 * reason: how much, and its start as far as the reason has room. What an
 * answering candidate wrote is only traced. */
static void hk__probe_stderr(hk__cand_t *c, const hk__probe_record_t *rec,
                             const unsigned char *text)
{
    char shown[1200];
    if (rec->err_total == 0)
        return;
    if (!c->refused) {
        HK__TRACE(HK__TRACE_VERBOSE, "probe", "%s wrote %llu bytes to stderr in the probe, "
                  "not shown", c->path, (unsigned long long)rec->err_total);
        return;
    }
    size_t used = strlen(c->reason);
    char *at = c->reason + used;
    size_t room = sizeof(c->reason) - used;
    /* The text gets what the reason has left after the rest of the line. */
    size_t cap = room > 80 ? room - 80 : 1;
    size_t took = hk__escape(shown, cap < sizeof(shown) ? cap : sizeof(shown), text,
                             rec->err_len);
    if (took == rec->err_total)
        snprintf(at, room, "; stderr: %llu bytes: \"%s\"", (unsigned long long)rec->err_total,
                 shown);
    else
        snprintf(at, room, "; stderr: %llu bytes, the first %zu: \"%s\"",
                 (unsigned long long)rec->err_total, took, shown);
}

/* Reads the probe's records until every candidate has one, the probe ends
 * or stops, or the deadline passes. Returns the number of bytes in *buf. */
static size_t hk__probe_read(int rd, pid_t pid, long long deadline, size_t want,
                             unsigned char **buf)
{
    size_t len = 0, cap = 0, have = 0;
    unsigned char *b = NULL;

    for (;;) {
        /* Count complete records so far. */
        size_t off = 0;
        have = 0;
        while (len - off >= sizeof(hk__probe_record_t)) {
            hk__probe_record_t rec;
            memcpy(&rec, b + off, sizeof(rec));
            long body = hk__record_body(&rec);
            if (body < 0)
                goto out; /* the rest is unusable */
            if (len - off - sizeof(rec) < (size_t)body)
                break;
            off += sizeof(rec) + (size_t)body;
            have++;
        }
        if (have >= want)
            break;
        long long left = deadline - hk__now_ms();
        if (left <= 0)
            break;
        /* Waits in slices, to see a stopped probe without a signal of ours
         * (the host owns SIGCHLD). */
        struct pollfd pf = {rd, POLLIN, 0};
        int r = poll(&pf, 1, left > 50 ? 50 : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0 && !hk__probe_stopped(pid))
            continue;
        if (r <= 0)
            break;
        if (cap - len < 4096) {
            size_t ncap = cap ? 2 * cap : 16384;
            unsigned char *grown = realloc(b, ncap);
            if (!grown)
                break;
            b = grown;
            cap = ncap;
        }
        ssize_t got = read(rd, b + len, cap - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
    }
out:
    *buf = b;
    return len;
}

/* Refuses c: the probe process ended or stopped (wstatus, when reaped)
 * before it answered for c; alone: c was the only candidate in it then. */
static void hk__probe_lost(hk__cand_t *c, int wstatus, int reaped, int alone)
{
    const char *how = NULL, *abbrev = NULL;
    int sig = 0;
    if (reaped && WIFSIGNALED(wstatus)) {
        how = "killed";
        sig = WTERMSIG(wstatus);
    } else if (reaped && WIFSTOPPED(wstatus)) {
        how = "stopped";
        sig = WSTOPSIG(wstatus);
    }
    if (how && (abbrev = sigabbrev_np(sig)) != NULL)
        snprintf(c->reason, sizeof(c->reason), "the probe process was %s by SIG%s while it "
                 "probed this candidate%s", how, abbrev, alone ? " alone" : "");
    else if (how)
        snprintf(c->reason, sizeof(c->reason), "the probe process was %s by signal %d while "
                 "it probed this candidate%s", how, sig, alone ? " alone" : "");
    else if (reaped && WIFEXITED(wstatus))
        snprintf(c->reason, sizeof(c->reason), "the probe process exited with status %d "
                 "before it answered for this candidate", WEXITSTATUS(wstatus));
    else
        snprintf(c->reason, sizeof(c->reason), "the probe process gave no answer in time");
    c->refused = 1;
    c->stage = HK_STAGE_PROBE;
    c->status = HK_STATUS_LOAD_FAILED;
}

/* One probe process for cands[0..k), parallel at a time: applies each
 * record it sends and marks done[i] for those. When it ends without them
 * all (it died, stopped, or passed its deadline) it is killed if need be,
 * and *wstatus is how it ended (*reaped 0: unknown). Returns the number of
 * candidates without a record, or -1 when it could not start (every
 * candidate refused then). */
static long hk__probe_round(hk_loader_t *loader, hk__cand_t **cands, size_t k,
                            const hk__probe_how_t *how, unsigned char *done, int *wstatus,
                            int *reaped)
{
    unsigned char *buf = NULL;
    int rd = -1;
    char ebuf[256];
    const char *etext;

    memset(done, 0, k);
    *wstatus = 0;
    *reaped = 0;
    pid_t pid = hk__probe_spawn(loader, cands, k, how, &rd);
    if (pid < 0) {
        int e = errno;
        etext = hk__errtext(e, ebuf, sizeof(ebuf));
        for (size_t i = 0; i < k; i++) {
            snprintf(cands[i]->reason, sizeof(cands[i]->reason),
                     "cannot start the probe program: %s", etext);
            cands[i]->refused = 1;
            cands[i]->stage = HK_STAGE_PROBE;
            cands[i]->status = HK_STATUS_LOAD_FAILED;
        }
        return -1;
    }
    /* The probe enforces each child's limit; this bounds the probe itself. */
    size_t rounds = (k + how->parallel - 1) / how->parallel;
    long long deadline = hk__now_ms() + (long long)how->timeout_ms * (long long)(rounds + 1)
                         + 2000;
    size_t len = hk__probe_read(rd, pid, deadline, k, &buf);
    close(rd);
    for (size_t off = 0; len - off >= sizeof(hk__probe_record_t);) {
        hk__probe_record_t rec;
        memcpy(&rec, buf + off, sizeof(rec));
        long body = hk__record_body(&rec);
        if (body < 0 || len - off - sizeof(rec) < (size_t)body)
            break;
        if (rec.index < k && !done[rec.index]) {
            const unsigned char *p = buf + off + sizeof(rec);
            done[rec.index] = 1;
            cands[rec.index]->probe.phase = hk__probe_apply(cands[rec.index], rec.index, &rec,
                                                            p, how->timeout_ms);
            hk__probe_stderr(cands[rec.index], &rec, p + rec.len);
        }
        off += sizeof(rec) + (size_t)body;
    }
    free(buf);
    long missing = 0;
    for (size_t i = 0; i < k; i++)
        missing += !done[i];
    /* How it ended, before it is killed: a stop is the candidate's doing. */
    if (missing && hk__probe_stopped(pid)) {
        *wstatus = W_STOPCODE(SIGSTOP); /* as waitpid would report it */
        *reaped = 1;
    }
    if (missing)
        kill(pid, SIGKILL); /* its children die with it */
    for (int ws = 0;;) {
        pid_t w = waitpid(pid, &ws, 0);
        if (w == pid && !*reaped) {
            *wstatus = ws;
            *reaped = 1;
        }
        if (w == pid || !(w < 0 && errno == EINTR))
            break; /* ECHILD: the host reaps its children itself */
    }
    return missing;
}

/* Probes cands[0..k). A probe process that ends before answering for every
 * candidate (one of them killed or stopped it, say) costs only the
 * candidate it was probing: the others are probed again in a new one, first
 * one at a time, so that the next death names its candidate (the lowest
 * without a record), which is refused; then the rest as before. */
static void hk__probe_chunk(hk_loader_t *loader, hk__cand_t **cands, size_t k)
{
    hk__cand_t *left[HK__PROBE_CHUNK];
    unsigned char done[HK__PROBE_CHUNK];
    hk__probe_how_t how = {loader->probe_timeout_ms, 0, 0, HK__PROBE_PARALLEL};
    size_t n = k;
    memcpy(left, cands, k * sizeof(*left));
    while (n > 0) {
        int wstatus = 0, reaped = 0;
        long missing = hk__probe_round(loader, left, n, &how, done, &wstatus, &reaped);
        if (missing <= 0)
            return;
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (!done[i])
                left[m++] = left[i];
        n = m;
        if (how.parallel > 1) {
            how.parallel = 1;
            continue;
        }
        hk__probe_lost(left[0], wstatus, reaped, 1);
        memmove(left, left + 1, (n - 1) * sizeof(*left));
        n--;
        how.parallel = HK__PROBE_PARALLEL;
    }
}

void hk__probe_batch(hk_loader_t *loader, hk__cand_t **cands, size_t n)
{
    hk__cand_t *chunk[HK__PROBE_CHUNK];
    size_t k = 0;

    if (loader->isolation == HK_ISOLATION_OFF)
        return;
    for (size_t i = 0; i <= n; i++) {
        if (i < n) {
            hk__cand_t *c = cands[i];
            /* A reopen is the file that passed here when it was loaded. */
            if (c->seen || c->refused || c->fd < 0 || c->again)
                continue;
            if (hk__probe_ready(loader) != HK_STATUS_OK) {
                snprintf(c->reason, sizeof(c->reason), "%s",
                         loader->probe_error ? loader->probe_error : "no usable probe program");
                c->refused = 1;
                c->stage = HK_STAGE_PROBE;
                c->status = HK_STATUS_LOAD_FAILED;
                continue;
            }
            chunk[k++] = c;
        }
        if (k > 0 && (k == HK__PROBE_CHUNK || i == n)) {
            HK__TRACE(HK__TRACE_VERBOSE, "probe", "%zu new candidate%s loaded and negotiated "
                      "in a probe process first (limit %u ms each)", k, k == 1 ? "" : "s",
                      (unsigned)loader->probe_timeout_ms);
            hk__probe_chunk(loader, chunk, k);
            for (size_t j = 0; j < k && hk__tracing(HK__TRACE_VERBOSE); j++) {
                const hk__cand_t *c = chunk[j];
                if (c->refused)
                    HK__TRACE(HK__TRACE_VERBOSE, "probe", "%s: refused in the probe at stage "
                              "%s: %s", c->path, hk_load_stage_name(c->stage), c->reason);
                else
                    HK__TRACE(HK__TRACE_VERBOSE, "probe", "%s: answered in the probe as %s %s; "
                              "the host opens it next", c->path, c->probe.name,
                              c->probe.version);
            }
            k = 0;
        }
    }
}

/* Descriptors kept free beyond a batch's own: the spawn's pipe and program,
 * the dynamic loader's open in the host's own load, the host's other
 * threads. */
#define HK__FD_MARGIN 8

/* How many descriptor numbers below RLIMIT_NOFILE are free now; LONG_MAX
 * when that cannot be told (no /proc), as if there were no limit. */
static long hk__fds_free(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY
        || rl.rlim_cur > (rlim_t)LONG_MAX)
        return LONG_MAX;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return errno == EMFILE || errno == ENFILE ? 0 : LONG_MAX;
    long used = 0;
    int self = dirfd(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        long fd = e->d_name[0] == '.' ? -1 : strtol(e->d_name, NULL, 10);
        used += fd >= 0 && fd != self && (rlim_t)fd < rl.rlim_cur;
    }
    closedir(d);
    return (long)rl.rlim_cur - used;
}

size_t hk__probe_fit(const hk_loader_t *loader, size_t n)
{
    /* Without a probe a candidate holds only its own descriptor. At least
     * one: its refusal then names the real shortage (too many open files). */
    long per = loader->isolation == HK_ISOLATION_OFF ? 1 : 2;
    long free_fds = hk__fds_free();
    if (free_fds == LONG_MAX)
        return n;
    long k = (free_fds - HK__FD_MARGIN) / per;
    if (k < 1)
        return 1;
    return (size_t)k < n ? (size_t)k : n;
}

/* The file of plugin as a candidate of its own: the snapshot it was loaded
 * from, else (loaded in place) opened through the trust walk again, when it
 * is still the file that was loaded. */
static hk_status_t hk__verify_cand(const hk_plugin_t *plugin, hk__cand_t *c)
{
    memset(c, 0, sizeof(*c));
    c->path = plugin->path;
    if (plugin->from_snap) {
        c->fd = hk__plugin_snap_dup(plugin);
        if (c->fd >= 0)
            return HK_STATUS_OK;
        snprintf(c->reason, sizeof(c->reason), "the loader's copy of %s: %s", plugin->path,
                 strerror(errno));
        return HK_STATUS_LOAD_FAILED;
    }
    hk_status_t st = hk__trust_open(plugin->path, 0, 1, &c->fd, &c->st, NULL, c->reason,
                                    sizeof(c->reason));
    if (st == HK_STATUS_OK && (c->st.st_dev != plugin->dev || c->st.st_ino != plugin->ino)) {
        snprintf(c->reason, sizeof(c->reason), "%s is no longer the file that was loaded",
                 plugin->path);
        st = HK_STATUS_LOAD_FAILED;
    }
    return st;
}

/* The verification of c in the loader's verifier (hk_loader_verifier.c):
 * its reply applied to c as a probe child's record. A verifier that
 * cannot run returns its failure (traced): the caller uses a probe
 * process of its own then. */
static hk_status_t hk__probe_in_verifier(hk_loader_t *loader, hk__cand_t *c,
                                         const hk__probe_how_t *how)
{
    hk__probe_record_t rec;
    char why[256];
    int fd_no = 0;
    unsigned char *out = malloc(HK__PROBE_OUT_MAX);
    if (!out)
        return HK_STATUS_OUT_OF_MEMORY;
    hk_status_t st = hk__verifier_run(loader, c->fd, how->device, how->timeout_ms, &rec, out,
                                      &fd_no, why, sizeof(why));
    if (st == HK_STATUS_OK)
        c->probe.phase = hk__probe_apply(c, (size_t)(fd_no - HK__PROBE_FD_FIRST), &rec, out,
                                         how->timeout_ms);
    else
        HK__TRACE(HK__TRACE_DECISIONS, "probe", "no verifier (%s): a probe process verifies "
                  "%s", why, c->path);
    free(out);
    return st;
}

hk_status_t hk__probe_verify(hk_loader_t *loader, hk_plugin_t *plugin, int device,
                             char *why, size_t n, int *passed)
{
    hk__cand_t *c = NULL;
    hk_status_t st = HK_STATUS_OK;
    *passed = 0;
    if (loader->isolation == HK_ISOLATION_OFF)
        return HK_STATUS_OK;
    hk__gate_enter(loader);
    st = hk__probe_ready(loader);
    hk__gate_leave(loader);
    if (st != HK_STATUS_OK) {
        snprintf(why, n, "%s", loader->probe_error ? loader->probe_error : "no probe program");
        return st;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    st = hk__verify_cand(plugin, c);
    if (st != HK_STATUS_OK) {
        snprintf(why, n, "%s", c->reason);
        goto out;
    }
    uint64_t limit = (uint64_t)loader->probe_timeout_ms * HK__PROBE_VERIFY_TIMES;
    hk__probe_how_t how = {limit > UINT32_MAX ? UINT32_MAX : (uint32_t)limit, HK__PROBE_VERIFY,
                           device, 1};
    if (loader->verifier_mode != HK_VERIFIER_KEEP
        || hk__probe_in_verifier(loader, c, &how) != HK_STATUS_OK) {
        unsigned char done[1];
        int wstatus = 0, reaped = 0;
        hk__cand_t *one[1] = {c};
        if (hk__probe_round(loader, one, 1, &how, done, &wstatus, &reaped) > 0)
            hk__probe_lost(c, wstatus, reaped, 1);
    }
    /* What the plugin reported there is for the host's own verification to
     * find again, safely; what only a process of its own survives is not. */
    int reported = c->refused && c->stage == HK_STAGE_VALIDATE
                   && c->probe.phase == HK__PHASE_VERIFICATION;
    HK__TRACE(HK__TRACE_VERBOSE, "probe", "%s %s verified in a probe process first (limit %u "
              "ms): %s%s", plugin->name, plugin->version, how.timeout_ms,
              !c->refused ? "passed" : reported ? "it reported a failure, the host's "
              "verification decides: " : "refused: ", c->refused ? c->reason : "");
    if (c->refused && !reported) {
        snprintf(why, n, "%s", c->reason);
        st = HK_STATUS_LOAD_FAILED;
        hk__failed_note(plugin, c->reason); /* it crashed, exited or hung there */
    }
    *passed = !c->refused;
    /* The host would call that trim before it closes the module, in a swap
     * or in hk_loader_destroy, and the module's unload may do as badly. */
    if (c->refused && c->probe.phase == HK__PHASE_TRIM && plugin->module) {
        atomic_store(&plugin->trim_failed, 1);
        hk__ltdl_keep(plugin->module);
    }
out:
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    return st;
}
