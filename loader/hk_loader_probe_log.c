/* handlekit loader: the log callback the probe gives a candidate's
 * negotiation when the host gives one (hk_loader_probe_run.c), so that a
 * negotiation that behaves otherwise when it can log does so in the probe
 * first. It holds the negotiation to the callback's rules (docs/abi.md,
 * "Negotiation"), which the host's own callback cannot check without
 * risk: a message is a NUL-terminated string of at most
 * HK__PROBE_LOG_MSG_MAX bytes at a level of hk_log_level_t, read here
 * without ever faulting; at most HK__PROBE_LOG_LINES lines; only the thread
 * that negotiates calls it, and only until the negotiation returns, which
 * must leave no thread of the plugin's running. The first rule broken is
 * kept; the probe refuses the candidate with it.
 *
 * One child of the probe probes one candidate, so the state is static; the
 * callback is called from any thread the plugin likes, hence atomics. */
#include "hk__loader.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The rules' record of one negotiation. A probe child negotiates once; a
 * verifier negotiates build after build, and each gets a record of its own
 * (never freed: a build kept loaded may still call its callback), so a
 * call of an earlier build is never held against a later one. */
typedef struct hk__plog {
    pthread_t owner;   /* the thread that negotiates */
    atomic_int returned;
    atomic_uint lines;
    atomic_int state;  /* 0: no rule broken, 1: what being written, 2: written */
    char what[256];
} hk__plog_t;

static hk__plog_t hk__plog_first; /* the first negotiation's (no allocation) */
static hk__plog_t *hk__plog_now;  /* the negotiation in progress, or the last */

static void hk__plog_broken(hk__plog_t *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void hk__plog_broken(hk__plog_t *g, const char *fmt, ...)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&g->state, &expect, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->what, sizeof(g->what), fmt, ap);
    va_end(ap);
    atomic_store(&g->state, 2);
}

/* Reads msg a page at a time through the kernel, which reports a fault
 * instead of raising one. Returns 1 when a NUL comes within max bytes, 0
 * when none does, -1 when memory ends first (*got: the bytes read). Where
 * the kernel does not allow it, strnlen (a fault then ends the child, and
 * the host reports the signal). */
static int hk__plog_string(const char *msg, size_t max, size_t *got)
{
    static char buf[4096];
    const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    *got = 0;
    while (*got < max) {
        uintptr_t at = (uintptr_t)msg + *got;
        size_t chunk = (size_t)page - at % (size_t)page;
        if (chunk > max - *got)
            chunk = max - *got;
        if (chunk > sizeof(buf))
            chunk = sizeof(buf);
        struct iovec local = {buf, chunk}, remote = {(void *)at, chunk};
        ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (r < 0 && (errno == ENOSYS || errno == EPERM)) {
            size_t n = strnlen(msg + *got, max - *got);
            *got += n;
            return *got < max;
        }
        if (r <= 0)
            return -1;
        void *nul = memchr(buf, '\0', (size_t)r);
        if (nul) {
            *got += (size_t)((char *)nul - buf);
            return 1;
        }
        *got += (size_t)r;
        if ((size_t)r < chunk)
            return -1;
    }
    return 0;
}

static void hk__probe_log(void *user, hk_log_level_t level, const char *msg)
{
    hk__plog_t *g = user;
    size_t got = 0;
    unsigned line = atomic_fetch_add(&g->lines, 1) + 1;
    if (atomic_load(&g->returned))
        hk__plog_broken(g, "a call after hk_plugin_negotiate returned");
    else if (!pthread_equal(pthread_self(), g->owner))
        hk__plog_broken(g, "a call from a thread other than the one negotiating");
    else if (line > HK__PROBE_LOG_LINES)
        hk__plog_broken(g, "more than %u lines", HK__PROBE_LOG_LINES);
    else if ((unsigned)level > HK_LOG_DEBUG)
        hk__plog_broken(g, "level %u, not one of HK_LOG_ERROR to HK_LOG_DEBUG", (unsigned)level);
    else if (!msg)
        hk__plog_broken(g, "a NULL message");
    else {
        int r = hk__plog_string(msg, HK__PROBE_LOG_MSG_MAX, &got);
        if (r < 0)
            hk__plog_broken(g, "a message whose NUL is not in readable memory (%zu bytes "
                            "read)", got);
        else if (r == 0)
            hk__plog_broken(g, "a message with no NUL in its first %u bytes",
                            HK__PROBE_LOG_MSG_MAX);
    }
}

void hk__probe_log_begin(hk_loader_t *fake)
{
    hk__plog_t *g = hk__plog_now ? calloc(1, sizeof(*g)) : &hk__plog_first;
    if (!g) /* out of memory: this negotiation shares the last record */
        g = hk__plog_now;
    g->owner = pthread_self();
    hk__plog_now = g;
    fake->log = hk__probe_log;
    fake->log_user = g;
}

int hk__probe_threads(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC), n = -1;
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[len > 0 ? len : 0] = '\0';
    const char *at = strstr(buf, "\nThreads:");
    if (at && sscanf(at, "\nThreads: %d", &n) != 1)
        n = -1;
    return n;
}

/* The threads the plugin started that still run, of before there were
 * before it negotiated. ThreadSanitizer starts a thread of its own in a
 * forked child with the child's first new thread: one more, then, is its. */
static int hk__threads_left(int before)
{
    int now = hk__probe_threads();
#if defined(__SANITIZE_THREAD__)
    if (now > before)
        now--;
#endif
    return before > 0 && now > before ? now - before : 0;
}

const char *hk__probe_negotiated(int threads_before, char *buf, size_t n)
{
    hk__plog_t *g = hk__plog_now ? hk__plog_now : &hk__plog_first;
    atomic_store(&g->returned, 1);
    /* A thread the plugin joined can be on its way out for a moment. */
    int left = hk__threads_left(threads_before);
    for (int i = 0; i < 20 && left > 0; i++) {
        struct timespec ts = {0, 250000};
        nanosleep(&ts, NULL);
        left = hk__threads_left(threads_before);
    }
    if (left > 0) {
        snprintf(buf, n, "negotiation left %d thread%s running after it returned", left,
                 left == 1 ? "" : "s");
        return buf;
    }
    if (atomic_load(&g->state) == 0)
        return NULL;
    while (atomic_load(&g->state) != 2)
        sched_yield();
    snprintf(buf, n, "negotiation broke the log callback's rules: %s", g->what);
    return buf;
}
