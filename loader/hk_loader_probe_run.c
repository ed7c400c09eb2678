/* handlekit loader: the probe program's side of isolation (the protocol is
 * in hk__loader.h; the host's side in hk_loader_probe.c).
 *
 * The probe is a fresh single-threaded process, so fork() without exec is
 * safe here: no other thread can hold a lock at the fork. Each child loads
 * one candidate exactly as the host does (hk__ltdl_open_name, RTLD_NOW),
 * looks up the entry point and runs hk__negotiate, the host's own code, so a
 * refusal found here has the same stage, status and reason as in the host. */
#include "hk__loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hk_status_text.h"
#include "hk_trim.h"

/* One pipe from a child: the first bytes kept (up to a cap), the rest only
 * counted, so that a child that writes without end neither stalls nor
 * swells the probe. */
typedef struct hk__sink {
    int fd;
    int eof;
    uint32_t len;   /* bytes kept */
    uint64_t total; /* bytes read */
} hk__sink_t;

typedef struct hk__slot {
    int active;
    pid_t pid;
    uint32_t index;
    long long start_ms;
    hk__sink_t ans; /* the answer pipe */
    hk__sink_t err; /* the candidate's stderr */
    unsigned char out[HK__PROBE_OUT_MAX];
    unsigned char errbuf[HK__PROBE_ERR_KEEP];
} hk__slot_t;

static hk__slot_t hk__slots[HK__PROBE_PARALLEL];

/* SIGCHLD is blocked except inside ppoll, so a child's exit wakes the wait
 * at once (see hk__wait_any); children get the signal state back. */
static sigset_t hk__mask_orig, hk__mask_wait;

static void hk__on_child(int sig)
{
    (void)sig;
}

static long long hk__ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int hk__write_all(int fd, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Set in a verifier process (hk__probe_serve): it answers request after
 * request, and ends only after a refusal (or when the host goes). */
static int hk__serving;

/* Writes the answer and ends the child without running anyone's
 * destructors; in a verifier, a pass returns. */
static void hk__answer(int out, hk_load_stage_t stage, hk_status_t status, const hk_plugin_t *p,
                       const char *reason)
{
    static unsigned char buf[sizeof(hk__probe_answer_t) + 2 * 256 + HK__REASON_MAX];
    hk__probe_answer_t a;
    const char *name = p && p->name ? p->name : "";
    const char *version = p && p->version ? p->version : "";
    size_t nl = strnlen(name, 255), vl = strnlen(version, 255);
    size_t rl = strnlen(reason, HK__REASON_MAX - 1);

    memset(&a, 0, sizeof(a));
    a.magic = HK__ANSWER_MAGIC;
    a.size = (uint32_t)(sizeof(a) + nl + vl + rl);
    a.stage = (uint32_t)stage;
    a.status = (uint32_t)status;
    if (p) {
        a.abi = p->abi;
        a.flags = p->flags;
        a.vtable_size = (uint32_t)p->vtable.size;
    }
    a.name_len = (uint32_t)nl;
    a.version_len = (uint32_t)vl;
    a.reason_len = (uint32_t)rl;
    memcpy(buf, &a, sizeof(a));
    memcpy(buf + sizeof(a), name, nl);
    memcpy(buf + sizeof(a) + nl, version, vl);
    memcpy(buf + sizeof(a) + nl + vl, reason, rl);
    int rc = hk__write_all(out, buf, a.size) == 0 ? 0 : 1;
    /* A verifier (hk__probe_serve) goes on after a pass. */
    if (hk__serving && rc == 0 && stage == HK_STAGE_LOADED)
        return;
    /* The system call itself, not _exit: a sanitizer's _exit waits a second
     * when the plugin left a thread running, past the child's time limit. */
    syscall(SYS_exit_group, rc);
    _exit(1);
}

/* What the host asked for, from argv. */
static struct {
    uint32_t lo, hi;  /* the ABI range */
    uint32_t flags;   /* HK__PROBE_* */
    int device;       /* with HK__PROBE_VERIFY: the device of the handle */
} hk__args;

/* A child's process state before any code of its candidate runs. */
static void hk__child_setup(int fd, int out, int err)
{
    static const int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    struct rlimit no_core = {0, 0};

    /* A process group of its own: a candidate that signals its group (kill
     * with pid 0) reaches itself and what it started, not the probe and
     * the other candidates. */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the probe killed on timeout takes us along */
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &hk__mask_orig, NULL);
    setrlimit(RLIMIT_CORE, &no_core); /* a crash is an answer, not a core file */
    /* Only this candidate, our answer pipe (as fd 3, in the host pipe's
     * place) and our stderr pipe: a plugin that reads or writes stray
     * descriptors reaches neither the host nor another candidate's pipes. */
    dup2(out, HK__PROBE_FD_HOST);
    dup2(err, STDERR_FILENO);
    if (fd > HK__PROBE_FD_FIRST)
        close_range(HK__PROBE_FD_FIRST, (unsigned)fd - 1, 0);
    close_range((unsigned)fd + 1, ~0u, 0);
    /* A sanitizer runtime's handlers would turn a crash into an exit status;
     * the host reports the signal. */
    for (size_t i = 0; i < sizeof(crash) / sizeof(crash[0]); i++)
        signal(crash[i], SIG_DFL);
}

/* Negotiates with entry as the host will: with a log callback when the
 * host gives one, then the rules of what a negotiation may leave behind.
 * Answers and ends the child on refusal. */
static void hk__child_negotiate(int out, hk_negotiate_fn entry, hk_plugin_t *p)
{
    static char reason[HK__REASON_MAX];
    hk_load_stage_t stage = HK_STAGE_NEGOTIATE;
    /* The ABI range and the log are read; the verification's table copies
     * may set its last error. */
    hk_loader_t *fake = calloc(1, sizeof(*fake));
    if (!fake || pthread_mutex_init(&fake->lock, NULL) != 0)
        hk__answer(out, HK_STAGE_NEGOTIATE, HK_STATUS_OUT_OF_MEMORY, NULL, "out of memory");
    p->loader = fake;
    fake->abi_min = hk__args.lo;
    fake->abi_max = hk__args.hi;
    if (hk__args.flags & HK__PROBE_LOG)
        hk__probe_log_begin(fake);
    int threads = hk__probe_threads();
    hk_status_t st = hk__negotiate(fake, entry, p, &stage, reason, sizeof(reason));
    char broke[512];
    if (hk__probe_negotiated(threads, broke, sizeof(broke)))
        hk__answer(out, HK_STAGE_PROBE, HK_STATUS_LOAD_FAILED, NULL, broke);
    if (st != HK_STATUS_OK)
        hk__answer(out, stage, st, NULL, reason);
}

/* The plugin's hk.trim/1 after its last handle is destroyed, as the host
 * calls it before it closes the module (a swap's close, the loader's
 * destroy): a trim that crashes, exits or hangs is found here, in a process
 * of its own, before the host ever maps the plugin. What it reports is not
 * a refusal: the host only notes a trim's failure, and the unload tries
 * again. */
static void hk__child_trim(int out, hk_plugin_t *p)
{
    hk_trim_v1_t t;
    char began = HK__PROBE_TRIMMING;
    if (hk_plugin_get_table(p, HK_TABLE_TRIM_V1, &t, sizeof(t)) != HK_STATUS_OK || !t.trim)
        return;
    if (hk__write_all(out, &began, 1) != 0)
        _exit(1);
    (void)t.trim();
}

/* Keeps the primary context of the verification's device while the
 * verifier lives, for a plugin that loaded the CUDA driver: the plugin
 * gives its own retain back at its trim, and a primary context nobody
 * retains is destroyed, so each verification would make the device's
 * context again (the cost the verifier is there to save). Called between
 * the verification handle's destroy and the trim, while the plugin still
 * keeps the context: the retain makes nothing. Only a driver a plugin
 * loaded already is used (RTLD_NOLOAD): for a plugin that did not, it does
 * nothing. */
static void hk__serve_hold(const hk_plugin_t *p, int device)
{
    static void *drv;
    static unsigned char held[64];
    int ordinal = device < 0 ? 0 : device;
    (void)p;
    if (ordinal >= 64 || held[ordinal])
        return;
    const char *env = getenv("HK_CUDA_DRIVER");
    if (!drv)
        drv = dlopen(env && env[0] ? env : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!drv)
        return;
    int (*get)(int *, int);
    int (*retain)(void **, int);
    void *sg = dlsym(drv, "cuDeviceGet"), *sr = dlsym(drv, "cuDevicePrimaryCtxRetain");
    memcpy(&get, &sg, sizeof(get));
    memcpy(&retain, &sr, sizeof(retain));
    int dev = 0;
    void *ctx = NULL;
    if (get && retain && get(&dev, ordinal) == 0 && retain(&ctx, dev) == 0)
        held[ordinal] = 1;
}

/* The swap's verification of a negotiated plugin, as the host will run it
 * (hk_loader_swap.c): a handle on the host's device, the verification that
 * fits the plugin (hk__verify_handle), the destroy. What the plugin reports (a failed create, a wrong result) is
 * answered at stage VALIDATE; the host tells it from a crash, an exit or a
 * hang, which only a process of its own survives. */
static void hk__child_verify(int out, hk_plugin_t *p)
{
    static char why[HK__REASON_MAX];
    char began = HK__PROBE_VERIFYING;
    const char *how;
    if (hk__write_all(out, &began, 1) != 0)
        _exit(1);
    hk_create_info_t ci = {sizeof(ci), hk__args.device, 0};
    hk_handle_t *h = NULL;
    hk_status_t st = p->vtable.handle_create(&ci, &h);
    if (st != HK_STATUS_OK) {
        const char *msg = p->vtable.last_error(NULL);
        snprintf(why, sizeof(why), "handle_create (device %d): %s: %s", ci.device,
                 hk_status_name(st), msg ? msg : "");
        hk__answer(out, HK_STAGE_VALIDATE, st, NULL, why);
    }
    st = hk__verify_handle(p, h, &how, why, sizeof(why));
    hk_status_t dst = p->vtable.handle_destroy(h);
    if (st == HK_STATUS_OK && dst != HK_STATUS_OK) {
        snprintf(why, sizeof(why), "handle_destroy: %s", hk_status_name(dst));
        st = dst;
    }
    if (st != HK_STATUS_OK)
        hk__answer(out, HK_STAGE_VALIDATE, st, NULL, why);
    if (hk__serving)
        hk__serve_hold(p, hk__args.device);
    hk__child_trim(out, p);
}

/* Loads the build behind fd (its /proc/self/fd name), says it loaded, and
 * negotiates with it into *p; a failure is answered (and the process ends).
 * The one-shot probe and the verifier's requests both start so. */
static lt_dlhandle hk__child_load(lt_dladvise advise, int fd, int out, hk_plugin_t *p)
{
    static char reason[HK__REASON_MAX];
    char name[48];
    snprintf(name, sizeof(name), "/proc/self/fd/%d", fd);
    lt_dlhandle module = hk__ltdl_open_name(advise, name, name, reason, sizeof(reason));
    if (!module)
        hk__answer(out, HK_STAGE_OPEN, HK_STATUS_LOAD_FAILED, NULL, reason);
    char loaded = HK__PROBE_LOADED;
    if (hk__write_all(out, &loaded, 1) != 0)
        _exit(1);
    void *sym = hk__ltdl_sym(module, HK_ENTRY_SYMBOL);
    if (!sym) {
        snprintf(reason, sizeof(reason), "missing entry symbol %s", HK_ENTRY_SYMBOL);
        hk__answer(out, HK_STAGE_SYMBOL, HK_STATUS_NOT_FOUND, NULL, reason);
    }
    hk_negotiate_fn entry;
    memcpy(&entry, &sym, sizeof(entry));
    memset(p, 0, sizeof(*p));
    hk__child_negotiate(out, entry, p);
    return module;
}

/* One candidate, in a child of the probe. Never returns. */
static void hk__probe_child(int fd, int out, int err)
{
    lt_dladvise advise;
    hk_plugin_t p;

    hk__child_setup(fd, out, err);
    out = HK__PROBE_FD_HOST;
    if (hk__ltdl_init(&advise) != HK_STATUS_OK)
        hk__answer(out, HK_STAGE_OPEN, HK_STATUS_INTERNAL, NULL, "libltdl cannot start");
    hk__child_load(advise, fd, out, &p);
    if (hk__args.flags & HK__PROBE_VERIFY)
        hk__child_verify(out, &p);
    hk__answer(out, HK_STAGE_LOADED, HK_STATUS_OK, &p, "");
}

static int hk__arg(const char *s, unsigned long max, unsigned long *v)
{
    char *end = NULL;
    errno = 0;
    *v = strtoul(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && *v <= max;
}

/* ---- the verifier: one process for the verifications of a loader ---- */


/* One verification in the verifier, of the build behind fd: as a probe
 * child does it, but a pass answers and returns (the module closed when it
 * is unload-safe, else kept), and the next request comes. */
static void hk__serve_one(lt_dladvise advise, int fd)
{
    hk_plugin_t p;
    int out = HK__PROBE_FD_HOST;
    lt_dlhandle module = hk__child_load(advise, fd, out, &p);
    hk__child_verify(out, &p);
    hk__answer(out, HK_STAGE_LOADED, HK_STATUS_OK, &p, "");
    if (p.flags & HK_PLUGIN_UNLOAD_SAFE)
        hk__ltdl_close(module, NULL);
    else
        hk__ltdl_keep(module);
    close(fd);
    pthread_mutex_destroy(&p.loader->lock);
    free(p.loader);
}

/* Receives one request: its header and the build's descriptor. Returns 1,
 * 0 when the host closed its end, -1 on a malformed request. */
static int hk__serve_recv(hk__verify_req_t *req, int *fd)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {req, sizeof(*req)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                       .msg_controllen = sizeof(ctl)};
    ssize_t n;
    while ((n = recvmsg(HK__PROBE_FD_HOST, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (n == 0)
        return 0;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (n != (ssize_t)sizeof(*req) || req->magic != HK__VERIFY_MAGIC || !c
        || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
        return -1;
    memcpy(fd, CMSG_DATA(c), sizeof(int));
    return 1;
}

/* main() of a verifier: argv hk-probe --serve <abi_min> <abi_max> <flags>,
 * fd 3 a stream socket to the host. Each request (hk__verify_req_t and the
 * build's descriptor) gets what a probe child writes for one verification.
 * The build is opened as a descriptor number used once (HK__SERVE_FD_BASE
 * and up, one per request): the dynamic loader knows a module by its name,
 * and a kept one keeps it. It ends after a refusal, after HK__SERVE_MAX
 * requests, or when the host closes its end. */
static int hk__probe_serve(int argc, char **argv)
{
    static const int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    unsigned long lo, hi, flags;
    struct rlimit no_core = {0, 0};
    lt_dladvise advise;
    if (argc != 5 || !hk__arg(argv[2], 0xffffffffu, &lo) || !hk__arg(argv[3], 0xffffffffu, &hi)
        || !hk__arg(argv[4], HK__PROBE_LOG, &flags)) {
        fprintf(stderr, "hk-probe: started by the handlekit loader only\n");
        return 2;
    }
    hk__args.lo = (uint32_t)lo;
    hk__args.hi = (uint32_t)hi;
    hk__args.flags = (uint32_t)flags | HK__PROBE_VERIFY;
    hk__serving = 1;
    /* No PR_SET_PDEATHSIG: it follows the thread that started us, which
     * may end long before the loader does. The host's end of the socket
     * ends us between requests; during one, the alarm below. */
    setrlimit(RLIMIT_CORE, &no_core);
    for (size_t i = 0; i < sizeof(crash) / sizeof(crash[0]); i++)
        signal(crash[i], SIG_DFL);
    close_range(HK__PROBE_FD_FIRST, ~0u, 0);
    if (hk__ltdl_init(&advise) != HK_STATUS_OK)
        return 3;
    for (int k = 0; k < HK__SERVE_MAX; k++) {
        hk__verify_req_t req;
        int fd = -1;
        int got = hk__serve_recv(&req, &fd);
        if (got <= 0)
            return got == 0 ? 0 : 2;
        int mine = HK__SERVE_FD_BASE + k;
        if (dup2(fd, mine) != mine)
            hk__answer(HK__PROBE_FD_HOST, HK_STAGE_OPEN, HK_STATUS_LOAD_FAILED, NULL,
                       "the verifier cannot place the file's descriptor");
        close(fd);
        hk__args.device = (int)(int32_t)req.device;
        /* A verification past its time limit is killed by the host; one
         * whose host is gone dies by the alarm. */
        alarm(req.timeout_ms / 1000 + 2);
        hk__serve_one(advise, mine);
        alarm(0);
    }
    return 0;
}

static void hk__emit(const hk__slot_t *s, uint32_t index, uint32_t kind, int32_t code)
{
    hk__probe_record_t rec = {HK__RECORD_MAGIC, index, kind, code, 0, 0, 0, 0, 0};
    if (s) {
        rec.len = s->ans.len;
        rec.overflow = s->ans.total > s->ans.len;
        rec.err_len = s->err.len;
        rec.err_total = s->err.total;
    }
    if (hk__write_all(HK__PROBE_FD_HOST, &rec, sizeof(rec)) != 0
        || (s && hk__write_all(HK__PROBE_FD_HOST, s->out, s->ans.len) != 0)
        || (s && hk__write_all(HK__PROBE_FD_HOST, s->errbuf, s->err.len) != 0))
        _exit(3); /* the host is gone or gave up */
}

static int hk__child_start(hk__slot_t *s, uint32_t index)
{
    int p[2] = {-1, -1}, e[2] = {-1, -1};
    if (pipe2(p, O_CLOEXEC) != 0 || pipe2(e, O_CLOEXEC) != 0) {
        int err = errno;
        if (p[0] >= 0) {
            close(p[0]);
            close(p[1]);
        }
        hk__emit(NULL, index, HK__PROBE_NOFORK, err);
        return 0;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        close(p[0]);
        close(p[1]);
        close(e[0]);
        close(e[1]);
        hk__emit(NULL, index, HK__PROBE_NOFORK, err);
        return 0;
    }
    if (pid == 0)
        hk__probe_child(HK__PROBE_FD_FIRST + (int)index, p[1], e[1]);
    setpgid(pid, pid); /* also here, so that its group exists before any kill of it */
    close(p[1]);
    close(e[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    fcntl(e[0], F_SETFL, O_NONBLOCK);
    memset(s, 0, offsetof(hk__slot_t, out));
    s->active = 1;
    s->pid = pid;
    s->ans.fd = p[0];
    s->err.fd = e[0];
    s->index = index;
    s->start_ms = hk__ms();
    return 1;
}

/* Takes what the child wrote on one pipe so far, keeping up to cap bytes in
 * buf; sets eof at its end. */
static void hk__sink_drain(hk__sink_t *k, unsigned char *buf, uint32_t cap)
{
    static unsigned char scratch[65536];
    while (!k->eof) {
        unsigned char *dst = k->len < cap ? buf + k->len : scratch;
        size_t room = k->len < cap ? cap - k->len : sizeof(scratch);
        ssize_t got = read(k->fd, dst, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return; /* EAGAIN: nothing more for now */
        if (got == 0) {
            k->eof = 1;
            return;
        }
        if (dst != scratch)
            k->len += (uint32_t)got;
        k->total += (uint64_t)got;
    }
}

static void hk__child_drain(hk__slot_t *s)
{
    hk__sink_drain(&s->ans, s->out, HK__PROBE_OUT_MAX);
    hk__sink_drain(&s->err, s->errbuf, HK__PROBE_ERR_KEEP);
}

/* Reports a child that ended (or is killed now, at its deadline). Either
 * way its process group goes first, with whatever the candidate started
 * there; the child itself is reaped only after that, so that its group
 * cannot have been taken over by an unrelated process meanwhile. */
static int hk__child_finish(hk__slot_t *s, uint32_t timeout_ms)
{
    int ws = 0;
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    if (waitid(P_PID, (id_t)s->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        info.si_pid = s->pid; /* cannot be: it is our child; take it as ended */
    int ended = info.si_pid == s->pid;
    if (!ended && hk__ms() - s->start_ms < (long long)timeout_ms)
        return 0;
    kill(-s->pid, SIGKILL);
    if (!ended)
        kill(s->pid, SIGKILL);
    while (waitpid(s->pid, &ws, 0) < 0 && errno == EINTR)
        ;
    /* What is in the pipes now, and no more: a process the candidate let
     * escape its group may hold them open for good. */
    hk__child_drain(s);
    if (!ended)
        hk__emit(s, s->index, HK__PROBE_TIMEOUT, 0);
    else if (WIFSIGNALED(ws))
        hk__emit(s, s->index, HK__PROBE_SIGNALED, WTERMSIG(ws));
    else
        hk__emit(s, s->index, HK__PROBE_EXITED, WEXITSTATUS(ws));
    close(s->ans.fd);
    close(s->err.fd);
    s->active = 0;
    return 1;
}

/* Waits for output, an end or a deadline of any active child. A child's
 * exit interrupts ppoll through SIGCHLD, also when it closed its pipe
 * before (or handed it to a process of its own and never closes it). */
static void hk__wait_any(uint32_t timeout_ms)
{
    struct pollfd pf[2 * HK__PROBE_PARALLEL];
    hk__slot_t *who[2 * HK__PROBE_PARALLEL];
    int n = 0;
    long long wait = 1000;
    long long now = hk__ms();
    for (int i = 0; i < HK__PROBE_PARALLEL; i++) {
        hk__slot_t *s = &hk__slots[i];
        if (!s->active)
            continue;
        long long left = s->start_ms + timeout_ms - now;
        if (left < wait)
            wait = left < 0 ? 0 : left;
        for (int k = 0; k < 2; k++) {
            const hk__sink_t *sink = k ? &s->err : &s->ans;
            if (sink->eof)
                continue;
            pf[n].fd = sink->fd;
            pf[n].events = POLLIN;
            who[n++] = s;
        }
    }
    struct timespec ts = {(time_t)(wait / 1000), (long)(wait % 1000) * 1000000L};
    if (ppoll(pf, (nfds_t)n, &ts, &hk__mask_wait) <= 0)
        return;
    for (int i = 0; i < n; i++)
        if (pf[i].revents)
            hk__child_drain(who[i]);
}


int hk__probe_main(int argc, char **argv)
{
    unsigned long lo, hi, timeout, count, parallel, flags, device;
    if (argc > 1 && strcmp(argv[1], "--serve") == 0)
        return hk__probe_serve(argc, argv);
    if (argc != 8 || !hk__arg(argv[1], 0xffffffffu, &lo) || !hk__arg(argv[2], 0xffffffffu, &hi)
        || !hk__arg(argv[3], 0xffffffffu, &timeout) || !hk__arg(argv[4], HK__PROBE_CHUNK, &count)
        || !hk__arg(argv[5], HK__PROBE_PARALLEL, &parallel)
        || !hk__arg(argv[6], HK__PROBE_LOG | HK__PROBE_VERIFY, &flags)
        || !hk__arg(argv[7], 0xffffffffu, &device) || count == 0 || timeout == 0
        || parallel == 0 || ((flags & HK__PROBE_VERIFY) && count != 1)) {
        fprintf(stderr, "hk-probe: started by the handlekit loader only\n");
        return 2;
    }
    hk__args.lo = (uint32_t)lo;
    hk__args.hi = (uint32_t)hi;
    hk__args.flags = (uint32_t)flags;
    hk__args.device = (int)(int32_t)(uint32_t)device; /* HK_DEVICE_CURRENT is -1 */
    /* The host started us in a session of our own: no terminal signal
     * reaches us, so its death must. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = hk__on_child;
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &hk__mask_orig);
    hk__mask_wait = hk__mask_orig;
    sigdelset(&hk__mask_wait, SIGCHLD);
    /* Nothing the host leaked without close-on-exec reaches plugin code. */
    close_range(HK__PROBE_FD_FIRST + (unsigned)count, ~0u, 0);

    size_t next = 0, done = 0;
    while (done < count) {
        for (int i = 0; i < (int)parallel && next < count; i++) {
            if (hk__slots[i].active)
                continue;
            if (!hk__child_start(&hk__slots[i], (uint32_t)next))
                done++;
            next++;
        }
        hk__wait_any((uint32_t)timeout);
        for (int i = 0; i < HK__PROBE_PARALLEL; i++)
            if (hk__slots[i].active && hk__child_finish(&hk__slots[i], (uint32_t)timeout))
                done++;
    }
    return 0;
}
