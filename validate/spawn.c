/* hk-validate: the processes that run a plugin's code (the probe, each check).
 *
 * A plugin may signal its parent, its process group or its session; none of
 * these may be the validator. So the validator forks a keeper, which starts
 * a session of its own (and with it a process group) and forks the worker
 * that runs the plugin: the worker's parent is the keeper, its group and
 * session are the keeper's. The keeper only waits for the worker and sends
 * the worker's wait status through a pipe. A worker that kills its keeper
 * (or its group) ends the check, never the run; and the validator ends the
 * whole session at once when the time is up, or when the keeper is gone. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hkv.h"

/* The keeper: never returns. */
static void keeper(int status_fd, void (*fn)(void *), void *arg)
{
    setsid();
    pid_t w = fork();
    if (w == 0) {
        close(status_fd);
        fn(arg);
        _exit(0);
    }
    int st = 0x7f00; /* no worker: as if it exited with 127 */
    if (w > 0)
        while (waitpid(w, &st, 0) < 0 && errno == EINTR)
            ;
    ssize_t n = write(status_fd, &st, sizeof st);
    _exit(n == (ssize_t)sizeof st ? 0 : 1);
}

int hkv_spawn(hkv_proc_t *p, void (*fn)(void *), void *arg)
{
    int sp[2];
    p->keeper = -1;
    p->status_fd = -1;
    p->reaped = 0;
    if (pipe(sp) != 0)
        return -1;
    fflush(NULL);
    pid_t k = fork();
    if (k < 0) {
        close(sp[0]);
        close(sp[1]);
        return -1;
    }
    if (k == 0) {
        close(sp[0]);
        keeper(sp[1], fn, arg);
    }
    close(sp[1]);
    fcntl(sp[0], F_SETFL, O_NONBLOCK);
    p->keeper = k;
    p->status_fd = sp[0];
    return 0;
}

/* What the keeper said, once it has ended: the worker's status, or the
 * keeper's own when it died before saying (a worker that killed it). */
static void keeper_ended(hkv_proc_t *p, int kst, hkv_end_t *e)
{
    int st;
    p->reaped = 1;
    e->status = kst;
    e->keeper_died = 1;
    if (WIFEXITED(kst) && WEXITSTATUS(kst) == 0 &&
        read(p->status_fd, &st, sizeof st) == (ssize_t)sizeof st) {
        e->status = st;
        e->keeper_died = 0;
    }
}

int hkv_proc_poll(hkv_proc_t *p, hkv_end_t *e)
{
    int kst = 0;
    if (p->reaped || waitpid(p->keeper, &kst, WNOHANG) != p->keeper)
        return p->reaped;
    keeper_ended(p, kst, e);
    return 1;
}

void hkv_proc_end(hkv_proc_t *p, hkv_end_t *e)
{
    if (p->keeper <= 0)
        return;
    /* Everything left in the session (all of it when the time is up), then
     * the keeper itself, in case it had not started its session yet. */
    kill(-p->keeper, SIGKILL);
    if (!p->reaped) {
        kill(p->keeper, SIGKILL);
        int kst = 0;
        while (waitpid(p->keeper, &kst, 0) < 0 && errno == EINTR)
            ;
        keeper_ended(p, kst, e);
    }
    close(p->status_fd);
    p->keeper = -1;
    p->status_fd = -1;
}

const char *hkv_signal_name(int sig, char *buf, size_t len)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGABRT, "SIGABRT"}, {SIGFPE, "SIGFPE"},
        {SIGILL, "SIGILL"},   {SIGKILL, "SIGKILL"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},
        {SIGTERM, "SIGTERM"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGINT, "SIGINT"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf(buf, len, "signal %d", sig);
    return buf;
}

void hkv_end_text(const hkv_end_t *e, int timed_out, char *buf, size_t len)
{
    char sb[32];
    if (timed_out)
        snprintf(buf, len, "did not finish in %d ms", hkv.timeout_ms);
    else if (e->keeper_died && WIFSIGNALED(e->status))
        snprintf(buf, len, "killed its parent process (by %s)",
                 hkv_signal_name(WTERMSIG(e->status), sb, sizeof sb));
    else if (e->keeper_died)
        snprintf(buf, len, "ended its parent process");
    else if (WIFSIGNALED(e->status))
        snprintf(buf, len, "crashed (killed by %s)",
                 hkv_signal_name(WTERMSIG(e->status), sb, sizeof sb));
    else
        snprintf(buf, len, "exited with status %d",
                 WIFEXITED(e->status) ? WEXITSTATUS(e->status) : -1);
}
