/* handlekit: the debug trace (hk__trace.h, docs/trace.md).
 *
 * Library code never prints unless asked: nothing here runs before a trace
 * site is reached, and with HK_TRACE unset, empty or 0 the first site only
 * reads the environment and turns every later site into a not-taken branch;
 * no file is opened and nothing is written. */
#include "hk__trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef HK__TRACE_MODULE
#define HK__TRACE_MODULE "kit"
#endif

#define HK__TRACE_NAME_MAX 32

atomic_int hk__trace_level = HK__TRACE_UNREAD;

static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static int trace_fd = STDERR_FILENO; /* set once under trace_once */

/* The module's name: written once (state 1 while written, 2 when set), so a
 * line being formatted on another thread never reads it half-written. */
static atomic_int name_state;
static char name_set[HK__TRACE_NAME_MAX];

static const char *module_name(void)
{
    return atomic_load_explicit(&name_state, memory_order_acquire) == 2 ? name_set
                                                                        : HK__TRACE_MODULE;
}

void hk__trace_set_module(const char *name)
{
    if (!name || !*name)
        return;
    int expect = 0;
    if (!atomic_compare_exchange_strong(&name_state, &expect, 1))
        return;
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof name_set; i++) {
        unsigned char c = (unsigned char)name[i];
        name_set[i] = c > 0x20 && c < 0x7f ? (char)c : '?';
    }
    name_set[i] = '\0';
    atomic_store_explicit(&name_state, 2, memory_order_release);
}

/* Formats one line and writes it with one write() call: lines of several
 * threads, modules and processes appending to one file never mix inside a
 * line (O_APPEND writes are atomic on a local file, and a line is at most
 * PIPE_BUF bytes, the atomic size of a pipe). The thread ID is asked with
 * syscall, since gettid() needs glibc 2.30. */
static void write_line(const char *area, const char *fmt, va_list ap)
{
    char line[HK__TRACE_LINE_MAX];
    const size_t limit = sizeof line - 1; /* the newline's byte stays free */
    int head = snprintf(line, sizeof line, "hk %ld:%ld %s %s: ", (long)getpid(),
                        (long)syscall(SYS_gettid), module_name(), area);
    if (head < 0)
        return;
    size_t len = (size_t)head < limit ? (size_t)head : limit;
    int body = vsnprintf(line + len, sizeof line - len, fmt, ap);
    size_t end = len + (body > 0 ? (size_t)body : 0);
    if (end > limit) {
        end = limit;
        memcpy(line + end - 3, "...", 3);
    }
    /* Paths, plugin names and reasons come from outside: one event, one line. */
    for (size_t i = len; i < end; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            line[i] = '?';
    line[end++] = '\n';
    ssize_t w;
    do /* a short write is left as it is: a second write could split the line */
        w = write(trace_fd, line, end);
    while (w < 0 && errno == EINTR);
}

static void note(const char *area, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const char *area, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    write_line(area, fmt, ap);
    va_end(ap);
}

/* The level HK_TRACE names; *understood 0 for a value that is none of them
 * (then 1: whoever set it wants a trace). */
static int parse_level(const char *v, int *understood)
{
    static const struct {
        const char *name;
        int level;
    } names[] = {{"off", 0},   {"no", 0},      {"false", 0},   {"decisions", 1}, {"info", 1},
                 {"calls", 2}, {"debug", 2},   {"verbose", 3}, {"all", 3}};
    *understood = 1;
    if (!v || !*v)
        return 0;
    if (strspn(v, "0123456789") == strlen(v)) {
        int n = 0;
        for (const char *p = v; *p && n <= HK__TRACE_VERBOSE; p++)
            n = n * 10 + (*p - '0');
        return n > HK__TRACE_VERBOSE ? HK__TRACE_VERBOSE : n;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(v, names[i].name) == 0)
            return names[i].level;
    *understood = 0;
    return HK__TRACE_DECISIONS;
}

/* HK_TRACE_FILE with "%p" replaced by the process ID and "%%" by "%"; any
 * other '%' stays. -1 when it does not fit. */
static int expand_name(const char *in, char *out, size_t n)
{
    size_t o = 0;
    for (const char *p = in; *p; p++) {
        char piece[24] = {*p, '\0'};
        if (p[0] == '%' && p[1] == 'p') {
            snprintf(piece, sizeof piece, "%ld", (long)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            p++;
        }
        size_t k = strlen(piece);
        if (o + k >= n)
            return -1;
        memcpy(out + o, piece, k);
        o += k;
    }
    out[o] = '\0';
    return 0;
}

static const char *file_kind(mode_t mode)
{
    return S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
           : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket"
           : S_ISDIR(mode) ? "a directory" : "not a regular file";
}

/* Opens the trace file: never through a symbolic link as its last component
 * (one planted by another user would make a privileged process append to a
 * file of the link's choosing), never waiting (an open of a FIFO for
 * writing waits for a reader), and only a regular file of this process's
 * user. Returns the descriptor, or -1 with why filled. */
static int open_file(const char *path, char *why, size_t n)
{
    struct stat st;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW
                  | O_NONBLOCK, 0600);
    if (fd < 0) {
        int err = errno, known = lstat(path, &st) == 0;
        if (known && S_ISLNK(st.st_mode))
            snprintf(why, n, "it is a symbolic link, which is not followed");
        else if (known && !S_ISREG(st.st_mode))
            snprintf(why, n, "it is %s, not a regular file", file_kind(st.st_mode));
        else
            snprintf(why, n, "%s", strerror(err));
        return -1;
    }
    if (fstat(fd, &st) != 0)
        snprintf(why, n, "%s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(why, n, "it is %s, not a regular file", file_kind(st.st_mode));
    else if (st.st_uid != geteuid())
        snprintf(why, n, "it is owned by uid %lu, not by this process's user (uid %lu)",
                 (unsigned long)st.st_uid, (unsigned long)geteuid());
    else if (fcntl(fd, F_SETFL, O_APPEND) == 0) /* writes wait again, as to stderr */
        return fd;
    else
        snprintf(why, n, "%s", strerror(errno));
    close(fd);
    return -1;
}

/* Once per module: the level, then, only when tracing, the output. */
static void read_env(void)
{
    int understood = 1;
    const char *value = secure_getenv("HK_TRACE");
    int level = parse_level(value, &understood);
    if (level == 0) {
        atomic_store(&hk__trace_level, 0);
        return;
    }
    const char *file = secure_getenv("HK_TRACE_FILE");
    char path[PATH_MAX], why[256] = "";
    if (file && *file) {
        int fd = -1;
        if (expand_name(file, path, sizeof path) != 0)
            snprintf(why, sizeof why, "the name is longer than PATH_MAX once expanded");
        else
            fd = open_file(path, why, sizeof why);
        if (fd >= 0)
            trace_fd = fd;
    }
    atomic_store(&hk__trace_level, level);
    if (why[0])
        note("trace", "cannot open HK_TRACE_FILE %s: %s; tracing to stderr", file, why);
    if (!understood)
        note("trace", "HK_TRACE=%s is not a level (0-3, off, decisions, calls, verbose); "
             "tracing decisions (level 1)", value);
    note("trace", "level %d (HK_TRACE=%s) to %s", level, value,
         trace_fd == STDERR_FILENO ? "stderr" : path);
}

int hk__trace_enabled(int level)
{
    int saved = errno;
    pthread_once(&trace_once, read_env);
    errno = saved;
    return atomic_load_explicit(&hk__trace_level, memory_order_relaxed) >= level;
}

void hk__trace_emit(int level, const char *area, const char *fmt, ...)
{
    int saved = errno;
    pthread_once(&trace_once, read_env);
    if (atomic_load_explicit(&hk__trace_level, memory_order_relaxed) >= level) {
        va_list ap;
        va_start(ap, fmt);
        write_line(area, fmt, ap);
        va_end(ap);
    }
    errno = saved;
}
