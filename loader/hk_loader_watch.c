/* The watch (plugin_api/hk_watch.h): inotify on the directories of a
 * loader's search path, the rule that decides when a written file is
 * complete and stable, the one descriptor a host polls (an epoll set of the
 * inotify descriptor, a timer for what is due and, for the watch's thread,
 * a stop event), and that thread. What happens to a file once taken is in
 * hk_loader_watchtake.c. */
#include "hk__watch.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "hk__swap.h"
#include "hk__trace.h"
#include "hk_status_text.h"

#define HK__WATCH_RETRY_NS 1000000000ull /* missing or refused directories */
#define HK__WATCH_HELD_OPEN 10u          /* intervals a silent open writer gets */
#define HK__WATCH_DIR_MASK                                                              \
    (IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | \
     IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

/* Live watches, so that hk_loader_destroy refuses a loader one watches. */
static pthread_mutex_t hk__watches_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_watch_t *hk__watches;


/* A failure of create or process: the loader's last error, and st. */
static hk_status_t hk__watch_fail(hk_loader_t *loader, hk_status_t st, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    hk__loader_keep_error(loader, line, "hk_watch: out of memory");
    return st;
}

static int hk__watch_busy(hk_loader_t *loader)
{
    int busy = 0;
    pthread_mutex_lock(&hk__watches_lock);
    for (hk_watch_t *w = hk__watches; w && !busy; w = w->next_live)
        busy = w->loader == loader;
    pthread_mutex_unlock(&hk__watches_lock);
    if (busy)
        hk__loader_set_error(loader, "hk_loader_destroy: a watch (hk_watch_create) of this "
                             "loader lives; destroy it first");
    return busy;
}

static const hk__loader_hook_t hk__watch_hook = {hk__watch_busy, NULL};


/* ---- directories ---- */

/* Checks dir against the trust rule and watches it; one DIRECTORY event
 * when its state differs from the one reported last. */
static void hk__dir_check(hk_watch_t *w, hk__wdir_t *d, int announce_ok)
{
    char reason[HK__REASON_MAX];
    struct stat st;
    int fd = -1;
    hk_status_t s = hk__trust_open(d->path, 1, 0, &fd, &st, NULL, reason, sizeof(reason));
    if (fd >= 0)
        close(fd);
    d->trusted = s == HK_STATUS_OK;
    if (s == HK_STATUS_OK && d->wd < 0) {
        d->wd = inotify_add_watch(w->ino, d->path, HK__WATCH_DIR_MASK);
        if (d->wd < 0) {
            s = errno == ENOENT ? HK_STATUS_NOT_FOUND : HK_STATUS_LOAD_FAILED;
            snprintf(reason, sizeof(reason), "inotify_add_watch: %s", strerror(errno));
            d->trusted = 0;
        }
    }
    if (s == HK_STATUS_OK)
        snprintf(reason, sizeof(reason), "watched%s", d->reported == (hk_status_t)-1 ? ""
                 : " again: every plugin file in it is a candidate");
    else if (s == HK_STATUS_INSECURE)
        snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
                 "; nothing written into it is taken until it passes the trust rule again");
    else if (s == HK_STATUS_NOT_FOUND)
        snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
                 "; looked for again every second");
    if (s != d->reported && (s != HK_STATUS_OK || announce_ok))
        hk__watch_emit(w, HK_WATCH_DIRECTORY, s, d->path, NULL, reason, 0, 0);
    d->reported = s;
}

static int hk__candidate_name(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 3 && strcmp(name + n - 3, ".so") == 0;
}

/* dir/name into path (PATH_MAX bytes), as the scan names it. */
static void hk__join(char *path, const char *dir, const char *name)
{
    size_t len = strlen(dir);
    snprintf(path, PATH_MAX, "%s%s%s", dir, len && dir[len - 1] == '/' ? "" : "/", name);
}

/* The file at dir/name waits (again) from now; writing: it was written. */
static void hk__file_touch(hk_watch_t *w, size_t dir, const char *name, int writing)
{
    char path[PATH_MAX];
    hk__join(path, w->dirs[dir].path, name);
    hk__wfile_t *f = NULL;
    for (size_t i = 0; i < w->nfiles && !f; i++)
        if (strcmp(w->files[i].path, path) == 0)
            f = &w->files[i];
    if (!f) {
        if (w->nfiles == w->capfiles) {
            size_t cap = w->capfiles ? 2 * w->capfiles : 8;
            hk__wfile_t *grown = realloc(w->files, cap * sizeof(*grown));
            if (!grown)
                return; /* the next event about it tries again */
            w->files = grown;
            w->capfiles = cap;
        }
        char *copy = strdup(path);
        if (!copy)
            return;
        f = &w->files[w->nfiles++];
        *f = (hk__wfile_t){copy, dir, 0, 0};
    }
    f->last_ns = hk__watch_now();
    f->writing = writing;
}

static void hk__file_forget(hk_watch_t *w, size_t i)
{
    free(w->files[i].path);
    w->files[i] = w->files[--w->nfiles];
}

/* Every plugin file in directory dir is a candidate (it is watched again,
 * or inotify lost events). */
static void hk__dir_all(hk_watch_t *w, size_t dir)
{
    DIR *d = opendir(w->dirs[dir].path);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (hk__candidate_name(e->d_name))
            hk__file_touch(w, dir, e->d_name, 0);
    closedir(d);
}

/* The directory is gone (deleted, renamed away) or its watch was dropped. */
static void hk__dir_lost(hk_watch_t *w, size_t dir)
{
    hk__wdir_t *d = &w->dirs[dir];
    if (d->wd >= 0)
        inotify_rm_watch(w->ino, d->wd); /* fails when the kernel dropped it: fine */
    d->wd = -1;
    d->trusted = 0;
    for (size_t i = w->nfiles; i-- > 0;)
        if (w->files[i].dir == dir)
            hk__file_forget(w, i);
    hk__dir_check(w, d, 1);
    if (w->retry_ns == 0)
        w->retry_ns = hk__watch_now() + HK__WATCH_RETRY_NS;
}

/* ---- events ---- */

static long hk__dir_of(const hk_watch_t *w, int wd)
{
    for (size_t i = 0; i < w->ndirs; i++)
        if (w->dirs[i].wd == wd)
            return (long)i;
    return -1;
}

/* One inotify event. */
static void hk__event(hk_watch_t *w, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) { /* lost events: every file may have changed */
        for (size_t i = 0; i < w->ndirs; i++)
            if (w->dirs[i].wd >= 0 && w->dirs[i].trusted)
                hk__dir_all(w, i);
        return;
    }
    long dir = hk__dir_of(w, ev->wd);
    if (dir < 0)
        return;
    hk__wdir_t *d = &w->dirs[dir];
    if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
        hk__dir_lost(w, (size_t)dir);
        return;
    }
    if (!ev->len) { /* the directory's own mode or owner */
        int was = d->trusted;
        hk__dir_check(w, d, 1);
        if (d->trusted && !was)
            hk__dir_all(w, (size_t)dir);
        if (!d->trusted && w->retry_ns == 0)
            w->retry_ns = hk__watch_now() + HK__WATCH_RETRY_NS;
        return;
    }
    if (!hk__candidate_name(ev->name) || !d->trusted)
        return;
    if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) { /* nothing there to take */
        char path[PATH_MAX];
        hk__join(path, d->path, ev->name);
        for (size_t i = 0; i < w->nfiles; i++)
            if (strcmp(w->files[i].path, path) == 0) {
                hk__file_forget(w, i);
                break;
            }
        return;
    }
    hk__file_touch(w, (size_t)dir, ev->name, (ev->mask & (IN_CREATE | IN_MODIFY)) != 0);
}

/* Reads every event waiting. Returns 0, or -1 with errno. */
static int hk__read_events(hk_watch_t *w)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(w->ino, buf, sizeof(buf));
        if (n < 0)
            return errno == EAGAIN ? 0 : -1;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            hk__event(w, ev);
            p += sizeof(*ev) + ev->len;
        }
    }
}

/* ---- what is due ---- */

/* Takes the files that are complete and stable; returns when the next one
 * is due (0: none waits). */
static uint64_t hk__take_due(hk_watch_t *w)
{
    for (;;) {
        uint64_t now = hk__watch_now(), next = 0;
        long due = -1;
        for (size_t i = 0; i < w->nfiles; i++) {
            hk__wfile_t *f = &w->files[i];
            uint64_t at = f->last_ns + w->debounce_ns * (f->writing ? HK__WATCH_HELD_OPEN : 1);
            if (at <= now && due < 0)
                due = (long)i;
            else if (at > now && (!next || at < next))
                next = at;
        }
        if (due < 0)
            return next;
        /* Off the list first: the callback's work may take long, and a new
         * event about the file makes it wait again. */
        hk__wfile_t f = w->files[due];
        w->files[due] = w->files[--w->nfiles];
        if (w->dirs[f.dir].trusted)
            hk__watch_take(w, f.path, f.last_ns);
        free(f.path);
        hk__read_events(w); /* what came meanwhile */
    }
}

/* Looks at missing or refused directories again when it is time; returns
 * when it will be time next (0: every directory is watched). */
static uint64_t hk__retry_due(hk_watch_t *w)
{
    uint64_t now = hk__watch_now();
    if (w->retry_ns == 0 || now < w->retry_ns)
        return w->retry_ns;
    int left = 0;
    for (size_t i = 0; i < w->ndirs; i++) {
        hk__wdir_t *d = &w->dirs[i];
        if (d->wd >= 0 && d->trusted)
            continue;
        hk__dir_check(w, d, 1);
        if (d->wd >= 0 && d->trusted)
            hk__dir_all(w, i);
        left |= d->wd < 0 || !d->trusted;
    }
    w->retry_ns = left ? now + HK__WATCH_RETRY_NS : 0;
    return w->retry_ns;
}

/* Arms the timer for at (CLOCK_MONOTONIC ns; 0 disarms). */
static void hk__arm(hk_watch_t *w, uint64_t at)
{
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (at) {
        its.it_value.tv_sec = (time_t)(at / 1000000000u);
        its.it_value.tv_nsec = (long)(at % 1000000000u);
    }
    timerfd_settime(w->timer, TFD_TIMER_ABSTIME, &its, NULL);
}

hk_status_t hk_watch_process(hk_watch_t *w)
{
    if (!w)
        return HK_STATUS_NULL_POINTER;
    if (hk__in_watch == w)
        return hk__watch_fail(w->loader, HK_STATUS_BUSY, "hk_watch_process: called from the "
                              "watch's own callback");
    if (hk__in_call_of(w->loader))
        return hk__watch_fail(w->loader, HK_STATUS_BUSY, "hk_watch_process: called from inside "
                              "a call through a movable handle of the watch's loader (its "
                              "swap would wait for that call)");
    pthread_mutex_lock(&w->lock);
    uint64_t expired;
    while (read(w->timer, &expired, sizeof(expired)) > 0) {
    }
    hk_status_t st = HK_STATUS_OK;
    int err = hk__read_events(w) != 0 ? errno : 0;
    if (err)
        st = hk__watch_fail(w->loader, HK_STATUS_LOAD_FAILED, "hk_watch_process: reading the "
                            "inotify events: %s", strerror(err));
    for (size_t i = 0; i < w->ndirs; i++) /* the first call: what create found */
        if (w->dirs[i].reported == (hk_status_t)-1)
            hk__dir_check(w, &w->dirs[i], 0);
    uint64_t retry = hk__retry_due(w);
    uint64_t next = hk__take_due(w);
    for (size_t i = 0; i < w->ndirs && !retry; i++)
        if (w->dirs[i].wd < 0 || !w->dirs[i].trusted)
            retry = w->retry_ns = hk__watch_now() + HK__WATCH_RETRY_NS;
    hk__arm(w, !next ? retry : !retry ? next : next < retry ? next : retry);
    pthread_mutex_unlock(&w->lock);
    return st;
}

/* ---- create, the thread, destroy ---- */

/* Appends a directory of the search path (a copy of len bytes of path). */
static int hk__dir_add(hk_watch_t *w, const char *path, size_t len)
{
    if (len == 0)
        return 0;
    hk__wdir_t *grown = realloc(w->dirs, (w->ndirs + 1) * sizeof(*grown));
    if (!grown)
        return -1;
    w->dirs = grown;
    char *copy = strndup(path, len);
    if (!copy)
        return -1;
    w->dirs[w->ndirs++] = (hk__wdir_t){copy, -1, 0, (hk_status_t)-1};
    return 0;
}

/* The scan's directories: HK_PLUGIN_PATH (unless ignored), then the
 * default directory. */
static int hk__dirs_of(hk_watch_t *w, hk_loader_t *loader)
{
    const char *env = loader->ignore_env ? NULL : secure_getenv("HK_PLUGIN_PATH");
    for (const char *p = env; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (hk__dir_add(w, p, len) != 0)
            return -1;
        p = colon ? colon + 1 : NULL;
    }
    if (loader->default_dir && hk__dir_add(w, loader->default_dir,
                                           strlen(loader->default_dir)) != 0)
        return -1;
    return 0;
}

/* The descriptors: inotify, the timer, the stop event, the epoll set. */
static hk_status_t hk__fds_open(hk_watch_t *w)
{
    const char *what = "inotify_init1";
    w->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ino >= 0 && (what = "timerfd_create",
                        w->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) >= 0
        && (what = "eventfd", w->stop = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) >= 0
        && (what = "epoll_create1", w->ep = epoll_create1(EPOLL_CLOEXEC)) >= 0) {
        struct epoll_event a = {.events = EPOLLIN, .data.fd = w->ino};
        struct epoll_event b = {.events = EPOLLIN, .data.fd = w->timer};
        what = "epoll_ctl";
        if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->ino, &a) == 0
            && epoll_ctl(w->ep, EPOLL_CTL_ADD, w->timer, &b) == 0)
            return HK_STATUS_OK;
    }
    return hk__watch_fail(w->loader, HK_STATUS_LOAD_FAILED, "hk_watch_create: %s: %s%s", what,
                          strerror(errno), errno == EMFILE ? " (fs.inotify.max_user_instances, "
                          "or the open-file limit)" : "");
}

static void hk__watch_free(hk_watch_t *w)
{
    int fds[4] = {w->ep, w->ino, w->timer, w->stop};
    for (size_t i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    for (size_t i = 0; i < w->ndirs; i++)
        free(w->dirs[i].path);
    for (size_t i = 0; i < w->nfiles; i++)
        free(w->files[i].path);
    free(w->dirs);
    free(w->files);
    free(w->request);
    free(w->name);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

/* Checks the options into w. */
static hk_status_t hk__watch_opts(hk_watch_t *w, const hk_watch_options_t *o)
{
    if (o->size < sizeof(*o))
        return hk__watch_fail(w->loader, HK_STATUS_INVALID_VALUE, "hk_watch_create: opts->size "
                              "is %u, below %zu", (unsigned)o->size, sizeof(*o));
    if (o->policy != HK_WATCH_REPORT && o->policy != HK_WATCH_SWAP)
        return hk__watch_fail(w->loader, HK_STATUS_INVALID_VALUE, "hk_watch_create: policy %u "
                              "is neither HK_WATCH_REPORT nor HK_WATCH_SWAP", (unsigned)o->policy);
    if (o->debounce_ms > 60000)
        return hk__watch_fail(w->loader, HK_STATUS_INVALID_VALUE, "hk_watch_create: debounce_ms "
                              "%u is above a minute", (unsigned)o->debounce_ms);
    if (o->policy == HK_WATCH_SWAP && !o->request)
        return hk__watch_fail(w->loader, HK_STATUS_INVALID_VALUE, "hk_watch_create: "
                              "HK_WATCH_SWAP needs a request (\"NAME\" or \"NAME@RANGE\")");
    w->policy = o->policy;
    w->debounce_ns = (uint64_t)(o->debounce_ms ? o->debounce_ms : HK_WATCH_DEBOUNCE_MS) * 1000000u;
    w->on_event = o->on_event;
    w->user = o->user;
    w->swap.size = sizeof(w->swap);
    if (o->swap)
        memcpy(&w->swap, o->swap, o->swap->size < sizeof(w->swap) ? o->swap->size
                                                                  : sizeof(w->swap));
    w->swap.size = sizeof(w->swap);
    if (!o->request)
        return HK_STATUS_OK;
    size_t count = 0; /* a malformed request fails here, with its reason */
    hk_status_t st = hk_loader_select_explain(w->loader, o->request, NULL, 0, &count);
    if (st == HK_STATUS_INVALID_VALUE || st == HK_STATUS_OUT_OF_MEMORY)
        return st;
    const char *at = strchr(o->request, '@');
    w->request = strdup(o->request);
    w->name = at ? strndup(o->request, (size_t)(at - o->request)) : strdup(o->request);
    if (!w->request || !w->name)
        return hk__watch_fail(w->loader, HK_STATUS_OUT_OF_MEMORY, "hk_watch_create: out of "
                              "memory");
    return HK_STATUS_OK;
}

hk_status_t hk_watch_create(hk_loader_t *loader, const hk_watch_options_t *opts,
                            hk_watch_t **out)
{
    if (out)
        *out = NULL;
    if (!loader)
        return HK_STATUS_NULL_POINTER;
    if (!opts || !out)
        return hk__watch_fail(loader, HK_STATUS_NULL_POINTER, "hk_watch_create: %s is NULL",
                              opts ? "out" : "opts");
    hk_watch_t *w = calloc(1, sizeof(*w));
    if (!w)
        return hk__watch_fail(loader, HK_STATUS_OUT_OF_MEMORY, "hk_watch_create: out of memory");
    w->loader = loader;
    w->ep = w->ino = w->timer = w->stop = -1;
    pthread_mutex_init(&w->lock, NULL);
    hk_status_t st = hk__watch_opts(w, opts);
    if (st == HK_STATUS_OK && hk__dirs_of(w, loader) != 0)
        st = hk__watch_fail(loader, HK_STATUS_OUT_OF_MEMORY, "hk_watch_create: out of memory");
    if (st == HK_STATUS_OK && w->ndirs == 0)
        st = hk__watch_fail(loader, HK_STATUS_NOT_SUPPORTED, "hk_watch_create: the loader "
                            "has no directory to watch (HK_PLUGIN_PATH %s, no default "
                            "directory)", loader->ignore_env ? "not read" : "unset or empty");
    if (st == HK_STATUS_OK)
        st = hk__fds_open(w);
    if (st == HK_STATUS_OK && hk__loader_hook_add(loader, &hk__watch_hook) != HK_STATUS_OK)
        st = hk__watch_fail(loader, HK_STATUS_OUT_OF_MEMORY, "hk_watch_create: no room for "
                            "the loader's hook");
    if (st != HK_STATUS_OK) {
        hk__watch_free(w);
        return st;
    }
    for (size_t i = 0; i < w->ndirs; i++) { /* quietly: the first process reports */
        char reason[HK__REASON_MAX];
        struct stat sb;
        int fd = -1;
        if (hk__trust_open(w->dirs[i].path, 1, 0, &fd, &sb, NULL, reason, sizeof(reason))
            == HK_STATUS_OK) {
            close(fd);
            w->dirs[i].trusted = 1;
            w->dirs[i].wd = inotify_add_watch(w->ino, w->dirs[i].path, HK__WATCH_DIR_MASK);
        }
    }
    pthread_mutex_lock(&hk__watches_lock);
    w->next_live = hk__watches;
    hk__watches = w;
    pthread_mutex_unlock(&hk__watches_lock);
    hk__arm(w, hk__watch_now()); /* readable at once: the first process reports */
    HK__TRACE(HK__TRACE_DECISIONS, "watch", "watching %zu director%s, policy %s%s%s, debounce "
              "%llu ms", w->ndirs, w->ndirs == 1 ? "y" : "ies",
              w->policy == HK_WATCH_SWAP ? "swap" : "report", w->request ? ", request " : "",
              w->request ? w->request : "", (unsigned long long)(w->debounce_ns / 1000000u));
    *out = w;
    return HK_STATUS_OK;
}

int hk_watch_fd(const hk_watch_t *w)
{
    return w ? w->ep : -1;
}

static void *hk__runner(void *arg)
{
    hk_watch_t *w = arg;
    struct pollfd p[2] = {{w->ep, POLLIN, 0}, {w->stop, POLLIN, 0}};
    for (;;) {
        if (poll(p, 2, -1) < 0)
            continue; /* EINTR */
        if (p[1].revents)
            return NULL;
        if (p[0].revents)
            hk_watch_process(w);
    }
}

hk_status_t hk_watch_start(hk_watch_t *w)
{
    if (!w)
        return HK_STATUS_NULL_POINTER;
    pthread_mutex_lock(&w->lock);
    hk_status_t st = HK_STATUS_OK;
    if (w->started)
        st = hk__watch_fail(w->loader, HK_STATUS_BUSY, "hk_watch_start: started already");
    else if (pthread_create(&w->runner, NULL, hk__runner, w) != 0)
        st = hk__watch_fail(w->loader, HK_STATUS_OUT_OF_MEMORY, "hk_watch_start: no thread: %s",
                            strerror(errno));
    else
        w->started = 1;
    pthread_mutex_unlock(&w->lock);
    return st;
}

hk_status_t hk_watch_destroy(hk_watch_t *w)
{
    if (!w)
        return HK_STATUS_OK;
    if (hk__in_watch == w)
        return hk__watch_fail(w->loader, HK_STATUS_BUSY, "hk_watch_destroy: called from the "
                              "watch's own callback");
    if (w->started) {
        uint64_t one = 1;
        while (write(w->stop, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
        pthread_join(w->runner, NULL);
    }
    pthread_mutex_lock(&hk__watches_lock);
    for (hk_watch_t **p = &hk__watches; *p; p = &(*p)->next_live)
        if (*p == w) {
            *p = w->next_live;
            break;
        }
    pthread_mutex_unlock(&hk__watches_lock);
    hk__watch_free(w);
    return HK_STATUS_OK;
}

