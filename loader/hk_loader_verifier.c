/* handlekit loader: the verifier, a probe process a loader keeps for its
 * swaps' verifications (the protocol is in hk__loader.h).
 *
 * A probe child verifies a build in a process of its own, so a crash, exit
 * or hang costs the build its swap and not the host its life; but a new
 * process per verification also makes a device context per verification
 * (most of a never-seen build's prepare time on a GPU). The verifier keeps
 * that isolation from the host and pays the process and the context once:
 * it verifies build after build, holds the device's primary context between
 * them, and is started again after anything went wrong in it (a refusal, a
 * crash, a hang past the time limit), so one bad build never leaves its
 * state to the next one's verification. What it gives up is isolation
 * between good builds verified one after the other in it (docs/swap.md,
 * "The verifier"). */
#include "hk__errtext.h"
#include "hk__loader.h"
#include "hk__trace.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct hk__verifier {
    pthread_mutex_t lock;
    pid_t pid;      /* 0: none runs */
    pid_t owner;    /* the process that started it (a fork's child has none) */
    int sock;       /* our end of its socket */
    unsigned served; /* requests sent to it */
};

static long long hk__vnow_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Ends the verifier (its whole session's process group) and reaps it;
 * *ws gets how it ended when it is given. */
static void hk__verifier_end(struct hk__verifier *v, int *ws)
{
    int st = 0;
    if (v->pid > 0 && v->owner == getpid()) {
        kill(-v->pid, SIGKILL);
        kill(v->pid, SIGKILL);
        while (waitpid(v->pid, &st, 0) < 0 && errno == EINTR)
            ;
    }
    if (ws)
        *ws = st;
    if (v->sock >= 0)
        close(v->sock);
    v->sock = -1;
    v->pid = 0;
}

static int hk__verifier_busy(hk_loader_t *loader)
{
    (void)loader;
    return 0;
}

static void hk__verifier_fini(hk_loader_t *loader)
{
    struct hk__verifier *v = loader->verifier;
    if (!v)
        return;
    hk__verifier_end(v, NULL);
    pthread_mutex_destroy(&v->lock);
    free(v);
    loader->verifier = NULL;
}

static const hk__loader_hook_t hk__verifier_hook = {hk__verifier_busy, hk__verifier_fini};

/* Starts a verifier: hk-probe --serve, through the checked program's
 * descriptor, fd 3 the other end of a socket pair. */
static hk_status_t hk__verifier_start(hk_loader_t *loader, struct hk__verifier *v, char *why,
                                      size_t n)
{
    int sv[2], tmp[2] = {-1, -1}, err;
    char a0[16], a1[16], a2[16], exe[48];
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    pid_t pid = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, n, "socketpair: %s", strerror(errno));
        return HK_STATUS_LOAD_FAILED;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    tmp[0] = fcntl(sv[1], F_DUPFD_CLOEXEC, 8);
    tmp[1] = fcntl(loader->probe_fd, F_DUPFD_CLOEXEC, 8);
    err = tmp[0] < 0 || tmp[1] < 0 ? errno : 0;
    if (!err) {
        posix_spawn_file_actions_adddup2(&fa, tmp[0], HK__PROBE_FD_HOST);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
                                            | POSIX_SPAWN_SETSID);
        snprintf(a0, sizeof(a0), "%u", (unsigned)loader->abi_min);
        snprintf(a1, sizeof(a1), "%u", (unsigned)loader->abi_max);
        snprintf(a2, sizeof(a2), "%u", loader->log ? HK__PROBE_LOG : 0u);
        snprintf(exe, sizeof(exe), "/proc/self/fd/%d", tmp[1]);
        char *argv[] = {"hk-probe", "--serve", a0, a1, a2, NULL};
        err = posix_spawn(&pid, exe, &fa, &attr, argv, environ);
    }
    for (int i = 0; i < 2; i++)
        if (tmp[i] >= 0)
            close(tmp[i]);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(sv[1]);
    if (err) {
        char ebuf[256];
        close(sv[0]);
        snprintf(why, n, "cannot start the verifier: %s", hk__errtext(err, ebuf, sizeof(ebuf)));
        return HK_STATUS_LOAD_FAILED;
    }
    v->pid = pid;
    v->owner = getpid();
    v->sock = sv[0];
    v->served = 0;
    HK__TRACE(HK__TRACE_VERBOSE, "probe", "the verifier started (pid %d)", (int)pid);
    return HK_STATUS_OK;
}

/* The loader's verifier record, made on first use (its hook frees it). */
static struct hk__verifier *hk__verifier_of(hk_loader_t *loader)
{
    pthread_mutex_lock(&loader->lock);
    struct hk__verifier *v = loader->verifier;
    if (!v && (v = calloc(1, sizeof(*v))) != NULL) {
        pthread_mutex_init(&v->lock, NULL);
        v->sock = -1;
        loader->verifier = v;
    }
    pthread_mutex_unlock(&loader->lock);
    if (v && hk__loader_hook_add(loader, &hk__verifier_hook) != HK_STATUS_OK)
        return NULL;
    return v;
}

/* Sends one request with the build's descriptor. */
static int hk__verifier_send(struct hk__verifier *v, int fd, int device, uint32_t timeout_ms)
{
    hk__verify_req_t req = {HK__VERIFY_MAGIC, (uint32_t)device, timeout_ms};
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof(ctl));
    struct iovec iov = {&req, sizeof(req)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                       .msg_controllen = sizeof(ctl)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t w;
    while ((w = sendmsg(v->sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    return w == (ssize_t)sizeof(req) ? 0 : -1;
}

/* Where the answer starts in a reply: after its phase bytes. */
static size_t hk__reply_answer(const unsigned char *buf, size_t len)
{
    size_t i = 0;
    while (i < len && (buf[i] == HK__PROBE_LOADED || buf[i] == HK__PROBE_VERIFYING
                       || buf[i] == HK__PROBE_TRIMMING))
        i++;
    return i;
}

/* How many bytes of buf[0..len) make one whole reply: the phase bytes and
 * an answer whose size its header gives; 0 while incomplete. */
static size_t hk__reply_len(const unsigned char *buf, size_t len)
{
    size_t i = hk__reply_answer(buf, len);
    if (len - i < sizeof(hk__probe_answer_t))
        return 0;
    hk__probe_answer_t a;
    memcpy(&a, buf + i, sizeof(a));
    if (a.size < sizeof(a) || a.size > HK__PROBE_OUT_MAX - i)
        return len; /* malformed: the parse says so */
    return len - i >= a.size ? i + a.size : 0;
}

/* Reads the reply to one request until it is whole, the verifier ends, or
 * the deadline. Fills *rec as a probe would for a child. */
static void hk__verifier_read(struct hk__verifier *v, long long deadline, uint32_t timeout_ms,
                              hk__probe_record_t *rec, unsigned char *out)
{
    size_t len = 0, whole = 0;
    memset(rec, 0, sizeof(*rec));
    rec->magic = HK__RECORD_MAGIC;
    for (;;) {
        long long left = deadline - hk__vnow_ms();
        struct pollfd pf = {v->sock, POLLIN, 0};
        int r = left > 0 ? poll(&pf, 1, (int)(left > 1000 ? 1000 : left)) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0 && left <= 0) { /* hung: killed, and the next one starts anew */
            rec->kind = HK__PROBE_TIMEOUT;
            hk__verifier_end(v, NULL);
            break;
        }
        if (r == 0)
            continue;
        ssize_t got = read(v->sock, out + len, HK__PROBE_OUT_MAX - len);
        if (got > 0) {
            len += (size_t)got;
            if ((whole = hk__reply_len(out, len)) != 0 || len == HK__PROBE_OUT_MAX)
                break;
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        int ws = 0; /* it ended before its reply was whole */
        hk__verifier_end(v, &ws);
        rec->kind = WIFSIGNALED(ws) ? HK__PROBE_SIGNALED : HK__PROBE_EXITED;
        rec->code = WIFSIGNALED(ws) ? WTERMSIG(ws) : WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;
        break;
    }
    (void)timeout_ms;
    if (!rec->kind) {
        rec->kind = HK__PROBE_EXITED;
        rec->overflow = !whole;
    }
    rec->len = (uint32_t)(whole ? whole : len);
}

hk_status_t hk__verifier_run(hk_loader_t *loader, int fd, int device, uint32_t timeout_ms,
                             hk__probe_record_t *rec, unsigned char *out, int *fd_no,
                             char *why, size_t n)
{
    struct hk__verifier *v = hk__verifier_of(loader);
    if (!v) {
        snprintf(why, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&v->lock);
    hk_status_t st = HK_STATUS_OK;
    if (v->pid > 0 && v->owner != getpid()) { /* a fork's child: the parent's, not ours */
        close(v->sock);
        v->sock = -1;
        v->pid = 0;
    }
    if (v->pid > 0 && v->served >= HK__SERVE_MAX)
        hk__verifier_end(v, NULL);
    if (v->pid <= 0)
        st = hk__verifier_start(loader, v, why, n);
    if (st == HK_STATUS_OK && hk__verifier_send(v, fd, device, timeout_ms) != 0) {
        hk__verifier_end(v, NULL); /* it is gone: one more try with a new one */
        st = hk__verifier_start(loader, v, why, n);
        if (st == HK_STATUS_OK && hk__verifier_send(v, fd, device, timeout_ms) != 0) {
            snprintf(why, n, "cannot send the build to the verifier: %s", strerror(errno));
            hk__verifier_end(v, NULL);
            st = HK_STATUS_LOAD_FAILED;
        }
    }
    if (st == HK_STATUS_OK) {
        int reused = v->served > 0;
        *fd_no = HK__SERVE_FD_BASE + (int)v->served++;
        hk__verifier_read(v, hk__vnow_ms() + timeout_ms, timeout_ms, rec, out);
        /* A verifier that ended before it read a byte of the build (killed
         * from outside between two requests) is not the build's doing: once
         * more, in a new one. */
        if (reused && rec->len == 0 && rec->kind != HK__PROBE_TIMEOUT
            && hk__verifier_start(loader, v, why, n) == HK_STATUS_OK) {
            if (hk__verifier_send(v, fd, device, timeout_ms) == 0) {
                *fd_no = HK__SERVE_FD_BASE + (int)v->served++;
                hk__verifier_read(v, hk__vnow_ms() + timeout_ms, timeout_ms, rec, out);
            }
        }
        /* After a refusal it ends by itself: reaped now, so that the next
         * verification starts a clean one. */
        hk__probe_answer_t a;
        size_t i = hk__reply_answer(out, rec->len);
        if (v->pid > 0 && rec->kind == HK__PROBE_EXITED
            && (rec->len - i < sizeof(a) || (memcpy(&a, out + i, sizeof(a)),
                                            a.stage != HK_STAGE_LOADED)))
            hk__verifier_end(v, NULL);
    }
    pthread_mutex_unlock(&v->lock);
    return st;
}
