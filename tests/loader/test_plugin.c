/* One source for every test plugin of the loader suite. Each build defines a
 * few TP_* macros (tests/loader/SConscript) to produce one loader path:
 *
 *   TP_NAME, TP_VERSION     the answer's name and semantic version
 *   TP_ABI_MIN, TP_ABI_MAX  the ABI range the plugin can serve
 *   TP_TAIL                 its vtable has one slot after the current ones (a build
 *                           of a newer minor)
 *   TP_VTABLE_SIZE          overrides vtable->size
 *   TP_NO_ENTRY             the entry point is not exported
 *   TP_ENTRY_STATUS         the entry point returns this after filling the answer
 *   TP_FORCE_ABI            answers this version whatever the host asked for
 *   TP_NULL_VTABLE, TP_NULL_NAME, TP_NULL_SLOT (get_table)
 *   TP_ANSWER_TYPE, TP_ANSWER_SIZE   corrupt the answer header
 *   TP_FLAGS                HK_PLUGIN_* flags
 *
 * Hostile builds (tests/loader/test_loader_hostile.c). Each one first appends
 * "<pid> <what>" to the file named by $HK_TP_MARKER, so a test can tell
 * which process ran its code:
 *   TP_CTOR=1..5            a constructor that marks, then: 1 returns,
 *                           2 crashes (SIGSEGV), 3 calls exit(3),
 *                           4 calls a symbol no library defines (build with
 *                           TP_UNRESOLVED, linked without -z defs), 5 hangs,
 *                           6 forks a child that exits at once, and waits
 *   TP_NEG=1..8             the entry point marks, then: 1 crashes, 2 calls
 *                           exit(3), 3 hangs, 4 writes garbage to every
 *                           descriptor from 3 to 63 and answers normally,
 *                           5 sends SIGKILL to its process group, 6 sends
 *                           SIGKILL to its parent process, 7 stops its parent
 *                           (SIGSTOP) and answers normally, 8 writes
 *                           TP_FLOOD_MIB MiB to stderr, then crashes
 *   TP_NEGLOG=1..8          the entry point, only when the host gives it a log
 *                           callback: 1 crashes, 2 calls exit(3), 3 hangs,
 *                           4 logs a message whose end is unmapped memory with
 *                           no NUL before it, 5 logs a NULL message, 6 logs
 *                           100000 lines, 7 logs from a thread it starts and
 *                           joins, 8 starts a thread that logs after the entry
 *                           point returned, every millisecond for 300 ms
 *                           (built unload-safe: the host may close it meanwhile)
 *   TP_INIT_FN              defines tp_init_fn, which the build names as
 *                           DT_INIT (-Wl,-init=tp_init_fn)
 *
 * Every build serves table "tp.info/1" so a test can tell which file's code
 * answered: two versions of one plugin loaded side by side each report their
 * own version and keep their own counter. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_abi.h"
#include "tp_info.h"

#ifndef TP_NAME
#define TP_NAME "tp-good"
#endif
#ifndef TP_VERSION
#define TP_VERSION "1.1.0"
#endif
#ifndef TP_ABI_MIN
#define TP_ABI_MIN HK_ABI_VERSION(1, 0)
#endif
#ifndef TP_ABI_MAX
#define TP_ABI_MAX HK_ABI_VERSION(1, 1)
#endif
#ifndef TP_FLAGS
#define TP_FLAGS 0u
#endif

#define TP_EXPORT __attribute__((visibility("default")))

#if defined(TP_CTOR) || defined(TP_NEG) || defined(TP_NEGLOG) || defined(TP_INIT_FN)
static void tp_mark(const char *what)
{
    const char *path = getenv("HK_TP_MARKER");
    char line[64];
    if (!path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    int n = snprintf(line, sizeof(line), "%ld %s\n", (long)getpid(), what);
    if (write(fd, line, (size_t)n) != n)
        n = -1;
    close(fd);
}

__attribute__((unused)) static void tp_hang(void)
{
    for (;;)
        pause();
}

/* Writes n bytes of text lines to fd (until it fails). */
__attribute__((unused)) static void tp_flood(int fd, size_t n)
{
    static char line[65536];
    for (size_t i = 0; i < sizeof(line); i++)
        line[i] = i % 64 == 63 ? '\n' : (char)('a' + i % 26);
    while (n > 0) {
        ssize_t w = write(fd, line, n < sizeof(line) ? n : sizeof(line));
        if (w <= 0)
            return;
        n -= (size_t)w;
    }
}

__attribute__((unused)) static void tp_crash(void)
{
    *(volatile int *)(uintptr_t)16 = 1;
    raise(SIGSEGV); /* should the store not fault */
}
#endif

#ifdef TP_NEGLOG
#include <pthread.h>
#include <sys/mman.h>

static hk_log_fn tp_log;
static void *tp_log_user;

static void tp_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

__attribute__((unused)) static void *tp_log_thread(void *arg)
{
    if (arg) /* the entry point has returned by then */
        tp_sleep_ms(20);
    for (int i = 0; i < (arg ? 300 : 1); i++) {
        tp_log(tp_log_user, HK_LOG_INFO, "from a thread of the plugin");
        if (arg)
            tp_sleep_ms(1);
    }
    return NULL;
}

/* What the entry point does when it was given a log callback. */
static void tp_neglog(const hk_negotiate_request_t *req)
{
    tp_log = req->log;
    tp_log_user = req->log_user;
#if TP_NEGLOG == 1
    tp_crash();
#elif TP_NEGLOG == 2
    exit(3);
#elif TP_NEGLOG == 3
    tp_hang();
#elif TP_NEGLOG == 4
    long page = sysconf(_SC_PAGESIZE);
    char *two = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (two == MAP_FAILED)
        return;
    munmap(two + page, (size_t)page);
    memset(two + page - 16, 'A', 16);
    tp_log(tp_log_user, HK_LOG_WARN, two + page - 16);
#elif TP_NEGLOG == 5
    tp_log(tp_log_user, HK_LOG_WARN, NULL);
#elif TP_NEGLOG == 6
    char line[32];
    for (int i = 0; i < 100000; i++) {
        snprintf(line, sizeof(line), "line %d", i);
        tp_log(tp_log_user, HK_LOG_INFO, line);
    }
#elif TP_NEGLOG == 7
    pthread_t t;
    if (pthread_create(&t, NULL, tp_log_thread, NULL) == 0)
        pthread_join(t, NULL);
#elif TP_NEGLOG == 8
    static int after_return = 1;
    pthread_t t;
    if (pthread_create(&t, NULL, tp_log_thread, &after_return) == 0)
        pthread_detach(t);
#endif
}
#endif

#ifdef TP_UNRESOLVED
void tp_missing_symbol(void); /* defined nowhere: RTLD_NOW refuses the file */
#endif

#ifdef TP_CTOR
__attribute__((constructor)) static void tp_ctor(void)
{
    tp_mark("ctor");
#if TP_CTOR == 2
    tp_crash();
#elif TP_CTOR == 3
    exit(3);
#elif TP_CTOR == 4
    tp_missing_symbol();
#elif TP_CTOR == 5
    tp_hang();
#elif TP_CTOR == 6
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
#endif
}
#endif

#ifdef TP_INIT_FN
TP_EXPORT void tp_init_fn(void);
TP_EXPORT void tp_init_fn(void)
{
    tp_mark("init");
}
#endif

struct hk_handle {
    void *stream;
    hk_pointer_mode_t mode;
};

#define TP_HANDLE_NAME TP_NAME
#include "tp_handle.h"

#ifndef TP_NULL_SLOT /* that build has no get_table, hence no table */
static unsigned tp_counter;

static const char *tp_version(void)
{
    return TP_VERSION;
}

static unsigned tp_bump(void)
{
    return ++tp_counter;
}

static const tp_info_table_t tp_info = {sizeof(tp_info_table_t), tp_version, tp_bump};
#endif

static hk_status_t tp_set_stream(hk_handle_t *h, void *stream)
{
    if (!h)
        return HK_STATUS_INVALID_HANDLE;
    h->stream = stream;
    return HK_STATUS_OK;
}

static hk_status_t tp_get_stream(hk_handle_t *h, void **stream)
{
    if (!h)
        return HK_STATUS_INVALID_HANDLE;
    *stream = h->stream;
    return HK_STATUS_OK;
}

static hk_status_t tp_get_pointer_mode(hk_handle_t *h, hk_pointer_mode_t *mode)
{
    if (!h)
        return HK_STATUS_INVALID_HANDLE;
    *mode = h->mode;
    return HK_STATUS_OK;
}

static const char *tp_last_error(const hk_handle_t *h)
{
    (void)h;
    return "";
}

#ifndef TP_NULL_SLOT
static hk_status_t tp_get_table(const char *name, const void **table)
{
    if (!name || !table)
        return HK_STATUS_NULL_POINTER;
    if (strcmp(name, TP_INFO_TABLE) == 0) {
        *table = &tp_info;
        return HK_STATUS_OK;
    }
    *table = NULL;
    return HK_STATUS_NOT_FOUND;
}
#endif

static hk_status_t tp_enum_tables(size_t index, const char **name)
{
    if (!name)
        return HK_STATUS_NULL_POINTER;
    if (index > 0)
        return HK_STATUS_NOT_FOUND;
    *name = TP_INFO_TABLE;
    return HK_STATUS_OK;
}

static hk_status_t tp_synchronize(hk_handle_t *h)
{
    return h ? HK_STATUS_OK : HK_STATUS_INVALID_HANDLE;
}

#ifdef TP_TAIL
static hk_status_t tp_future(hk_handle_t *h)
{
    (void)h;
    return HK_STATUS_OK;
}
#endif

/* The vtable as this build knows it: the current layout (its 1.2 slot
 * left NULL), plus a slot of a newer minor in TP_TAIL builds. A 1.0 build
 * still fills the 1.1 slots but declares the 1.0 size, so only the size keeps
 * the host from calling them. */
static const struct tp_vtable {
    hk_vtable_t core;
#ifdef TP_TAIL
    hk_status_t (*future)(hk_handle_t *h);
#endif
} tp_vtable = {
    .core = {
#ifdef TP_VTABLE_SIZE
        .size = TP_VTABLE_SIZE,
#else
        .size = sizeof(struct tp_vtable),
#endif
        .handle_create = tp_handle_create,
        .handle_destroy = tp_handle_destroy,
        .set_stream = tp_set_stream,
        .get_stream = tp_get_stream,
        .set_pointer_mode = tp_set_pointer_mode,
        .get_pointer_mode = tp_get_pointer_mode,
        .last_error = tp_last_error,
#ifndef TP_NULL_SLOT
        .get_table = tp_get_table,
#endif
        .enum_tables = tp_enum_tables,
        .handle_info = tp_handle_info,
        .synchronize = tp_synchronize,
    },
#ifdef TP_TAIL
    .future = tp_future,
#endif
};

#ifdef TP_NO_ENTRY
/* Same code under another name: hidden by plugin.map, so dlsym misses it. */
TP_EXPORT hk_status_t tp_negotiate_unexported(const hk_negotiate_request_t *req,
                                              hk_negotiate_answer_t *ans);
TP_EXPORT hk_status_t tp_negotiate_unexported(const hk_negotiate_request_t *req,
                                              hk_negotiate_answer_t *ans)
#else
TP_EXPORT hk_status_t hk_plugin_negotiate(const hk_negotiate_request_t *req,
                                          hk_negotiate_answer_t *ans);
TP_EXPORT hk_status_t hk_plugin_negotiate(const hk_negotiate_request_t *req,
                                          hk_negotiate_answer_t *ans)
#endif
{
#ifdef TP_NEG
    tp_mark("negotiate");
#if TP_NEG == 1
    tp_crash();
#elif TP_NEG == 2
    exit(3);
#elif TP_NEG == 3
    tp_hang();
#elif TP_NEG == 4
    static const char junk[] = "\x7f" "ELF garbage from a plugin's negotiation\n";
    for (int fd = 3; fd < 64; fd++)
        if (write(fd, junk, sizeof(junk) - 1) < 0)
            continue;
#elif TP_NEG == 5
    kill(0, SIGKILL);
#elif TP_NEG == 6
    kill(getppid(), SIGKILL);
    tp_hang();
#elif TP_NEG == 7
    kill(getppid(), SIGSTOP);
#elif TP_NEG == 8
    tp_flood(2, (size_t)TP_FLOOD_MIB << 20);
    tp_crash();
#endif
#endif
#ifdef TP_NEGLOG
    if (req && req->log) {
        tp_mark("negotiate");
        tp_neglog(req);
    }
#endif
    if (!req || !ans)
        return HK_STATUS_NULL_POINTER;
    memset(ans, 0, sizeof(*ans));
    ans->header.struct_type = HK_STRUCT_NEGOTIATE_ANSWER;
    ans->header.struct_size = sizeof(*ans);
    ans->header.struct_version = 1;
#ifdef TP_ANSWER_TYPE
    ans->header.struct_type = TP_ANSWER_TYPE;
#endif
#ifdef TP_ANSWER_SIZE
    ans->header.struct_size = TP_ANSWER_SIZE;
#endif

    uint32_t lo = req->abi_min > TP_ABI_MIN ? req->abi_min : TP_ABI_MIN;
    uint32_t hi = req->abi_max < TP_ABI_MAX ? req->abi_max : TP_ABI_MAX;
    if (HK_ABI_VERSION_MAJOR(req->abi_max) != HK_ABI_VERSION_MAJOR(TP_ABI_MAX) || lo > hi) {
        ans->abi_version = TP_ABI_MAX;
        return HK_STATUS_ABI_MISMATCH;
    }
    ans->abi_version = hi;
#ifdef TP_FORCE_ABI
    ans->abi_version = TP_FORCE_ABI;
#endif
    ans->flags = TP_FLAGS;
    ans->name = TP_NAME;
    ans->version = TP_VERSION;
    ans->vtable = &tp_vtable.core;
#ifdef TP_NULL_NAME
    ans->name = NULL;
#endif
#ifdef TP_NULL_VTABLE
    ans->vtable = NULL;
#endif
#ifdef TP_ENTRY_STATUS
    return TP_ENTRY_STATUS;
#else
    return HK_STATUS_OK;
#endif
}
