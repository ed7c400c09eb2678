/* handlekit loader internals of the watch (plugin_api/hk_watch.h): shared
 * by hk_loader_watch.c (directories, events, the descriptor, the thread) and
 * hk_loader_watchtake.c (what happens to a file once it is taken). */
#ifndef HK__WATCH_H
#define HK__WATCH_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "hk__loader.h"
#include "hk_watch.h"

/* A directory of the search path. */
typedef struct hk__wdir {
    char *path;
    int wd;          /* inotify watch, -1 while missing or refused */
    int trusted;     /* it passed the trust rule when last checked */
    hk_status_t reported; /* the status of its last DIRECTORY event; -1: none yet */
} hk__wdir_t;

/* A file written lately, waiting to be complete and stable. */
typedef struct hk__wfile {
    char *path;
    size_t dir;       /* index in hk_watch.dirs */
    uint64_t last_ns; /* CLOCK_MONOTONIC of its last event */
    int writing;      /* written since its writers last closed it */
} hk__wfile_t;

struct hk_watch {
    hk_loader_t *loader;
    uint32_t policy;
    char *request;       /* NULL with HK_WATCH_REPORT and no request */
    char *name;          /* the request's plugin name */
    uint64_t debounce_ns;
    hk_watch_fn on_event;
    void *user;
    hk_swap_options_t swap;
    int ep;              /* epoll: the three below */
    int ino;             /* inotify */
    int timer;           /* timerfd: the next interval or retry that is due */
    int stop;            /* eventfd: the thread's stop */
    hk__wdir_t *dirs;
    size_t ndirs;
    hk__wfile_t *files;
    size_t nfiles, capfiles;
    uint64_t retry_ns;   /* when missing or refused directories are looked at again */
    pthread_mutex_t lock; /* one hk_watch_process at a time */
    pthread_t runner;    /* valid while started */
    int started;
    struct hk_watch *next_live; /* the registry, for hk_loader_destroy */
};

/* The watch whose callback this thread is in (hk__watch_emit), or NULL. */
extern _Thread_local hk_watch_t *hk__in_watch __attribute__((tls_model("initial-exec")));

/* CLOCK_MONOTONIC in ns. */
uint64_t hk__watch_now(void);

/* Gives one event to the callback. path is the file or directory. */
void hk__watch_emit(hk_watch_t *w, hk_watch_kind_t kind, hk_status_t st, const char *path,
                    hk_plugin_t *plugin, const char *reason, int64_t mtime_ns,
                    uint64_t seen_ns);

/* Takes one file that is complete and stable: hands it to the loader,
 * verifies it, and reports or swaps by the policy; every outcome is an
 * event. seen_ns: the watch's last event about it. (hk_loader_watchtake.c) */
void hk__watch_take(hk_watch_t *w, const char *path, uint64_t seen_ns);

#endif /* HK__WATCH_H */
