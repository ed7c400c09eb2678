/* handlekit hot reload: a loader watches its search path for new builds.
 *
 * A watch follows the directories a scan of its loader reads
 * (HK_PLUGIN_PATH, then the default directory: hk_loader.h) with inotify.
 * When a "*.so" file there is created, rewritten, renamed in or has its
 * mode changed, the watch waits until the file is complete and stable, then
 * hands it to the loader exactly like a candidate of a scan (name, trust
 * walk, ELF checks, the loader's sealed copy, the probe process,
 * negotiation: hk_loader_open), verifies the new build with the
 * verification that fits it (hk_swap.h, step 3) and then, by the host's
 * policy, only reports it (HK_WATCH_REPORT) or swaps the movable handles
 * that follow the watch's request to it when that request now selects it
 * (HK_WATCH_SWAP). A build refused at any step is reported with its reason,
 * and whatever ran before keeps serving.
 *
 * Complete and stable. inotify says when a file was written and when a
 * writer closed it. A file is taken once no event about it came for the
 * debounce interval (hk_watch_options_t.debounce_ms) and every writer that
 * wrote it closed it again (or it was renamed into the directory whole). So
 * a build still being written, a copy under way, or a file written again
 * within the interval is not taken; each new write starts the interval
 * again, so ten builds written in a second give one candidate, the last. A
 * writer that keeps the file open without writing is waited for ten
 * intervals, then the file is taken as it is. A file that stopped halfway
 * (a copy that was killed) is taken once its writer is gone, and the
 * loader refuses it (a truncated ELF file: "open" stage); the next complete
 * build is a new candidate. The loader's own copy of a file written while
 * it copies is refused too ("the file changed while it was read"), and the
 * writer's next close makes it a candidate again.
 *
 * What goes live (HK_WATCH_SWAP). The request ("hk-cuda@^1") is resolved
 * with hk_loader_select after each new build of that name: the highest
 * version in range wins; a file rewritten with another build in range
 * supersedes the builds loaded from it before (HK_SELECT_SUPERSEDED), so a
 * rebuild with the same version, or a lower one written over the file (a
 * rollback), is what goes live; a build that failed its verification is never
 * selected again (HK_SELECT_FAILED). When the request resolves to the new
 * build, the movable handles of that name move to it (hk_swap.h: opts->from
 * is the request's name), verified by the swap; when it resolves to
 * another build the new one is reported as not taken, with the reason
 * hk_loader_select_explain gives (outside the range, lower).
 *
 * Directories. A directory of the search path that does not exist, or is
 * deleted or renamed while watched, is reported (HK_WATCH_DIRECTORY,
 * NOT_FOUND) and looked for again every second; once it is back, it is
 * watched and every "*.so" file in it is a candidate. A directory whose
 * mode or owner changes is checked against the trust rule again
 * (docs/security.md): one that fails it (made writable by others) is
 * reported (INSECURE) and nothing written into it is taken until it passes
 * again. The directories above it are checked with every candidate (the
 * loader's trust walk).
 *
 * Two ways to drive it. A host with its own loop adds hk_watch_fd() to its
 * poll/epoll set (readable: call hk_watch_process) and calls
 * hk_watch_process when it is readable; hk_watch_process never waits for
 * the descriptor, but the loading, verification and swap of a candidate run
 * in it (milliseconds on a CPU, a quarter of a second for a CUDA plugin
 * verified in a probe process). A host without a loop calls
 * hk_watch_start: a thread of the watch does the same until
 * hk_watch_destroy.
 *
 * Thread rules: hk_watch_process calls of one watch are serialised (one
 * from the host while the watch's thread runs waits for it). Events are
 * given to the callback on the thread that processes them, with no lock of
 * the loader held: it may call the loader's and the swap's functions, but
 * not hk_watch_process or hk_watch_destroy of its own watch. */
#ifndef HK_WATCH_H
#define HK_WATCH_H

#include <stdint.h>

#include "hk_loader.h"
#include "hk_swap.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hk_watch hk_watch_t;

/* hk_watch_options_t.policy. */
#define HK_WATCH_REPORT 0u /* verify and report new builds; the host swaps */
#define HK_WATCH_SWAP 1u   /* also swap the request's handles to them */

/* The default debounce interval, in milliseconds. */
#define HK_WATCH_DEBOUNCE_MS 200u

typedef enum hk_watch_kind {
    HK_WATCH_LOADED = 1,    /* a new build loaded and verified (plugin) */
    HK_WATCH_SWAPPED = 2,   /* the request's movable handles moved to it (plugin) */
    HK_WATCH_NOT_TAKEN = 3, /* loaded and verified, but the request selects
                               another build, or names another plugin (plugin,
                               reason says why) */
    HK_WATCH_REFUSED = 4,   /* a file refused: the loader's checks, the probe,
                               the verification or the swap (status, reason;
                               plugin when it was loaded) */
    HK_WATCH_DIRECTORY = 5  /* a directory of the search path: OK (watched again),
                               NOT_FOUND (missing or deleted), INSECURE (fails
                               the trust rule), or another status (cannot be
                               watched) with the reason */
} hk_watch_kind_t;

typedef struct hk_watch_event {
    uint32_t size;           /* sizeof(hk_watch_event_t) as the loader knows it */
    hk_watch_kind_t kind;
    hk_status_t status;      /* HK_STATUS_OK but for REFUSED and DIRECTORY */
    const char *path;        /* the file or directory */
    hk_plugin_t *plugin;     /* the new build (owned by the loader), or NULL */
    const char *reason;      /* one line; "" when there is nothing to add */
    int64_t mtime_ns;        /* the file's modification time when it was
                                taken (CLOCK_REALTIME, ns); 0 for a directory */
    uint64_t seen_ns;        /* CLOCK_MONOTONIC: the watch's last event about
                                the file, the write it waited for */
    uint64_t done_ns;        /* CLOCK_MONOTONIC: when this event was made
                                (for SWAPPED: the handles had moved) */
} hk_watch_event_t;

/* Called for each event; the strings and the event live until it returns. */
typedef void (*hk_watch_fn)(void *user, const hk_watch_event_t *event);

typedef struct hk_watch_options {
    uint32_t size;          /* sizeof(hk_watch_options_t) as the caller knows it */
    uint32_t policy;        /* HK_WATCH_REPORT or HK_WATCH_SWAP */
    const char *request;    /* "NAME" or "NAME@RANGE" (hk_loader_select); needed
                               for HK_WATCH_SWAP; with HK_WATCH_REPORT, NULL or
                               a request whose selection each new build of
                               that name is reported against. Copied. */
    uint32_t debounce_ms;   /* 0: HK_WATCH_DEBOUNCE_MS; at most 60000 */
    hk_watch_fn on_event;   /* may be NULL */
    void *user;             /* given to on_event */
    const hk_swap_options_t *swap; /* the swaps' options (opts->from is
                                      replaced by the request's name); NULL:
                                      defaults. Copied; its verify_user
                                      must outlive the watch. */
} hk_watch_options_t;

/* [thread-safe] Starts watching the search path of loader (which must
 * outlive the watch). Nothing is loaded yet: files already there are the
 * scan's business (hk_loader_scan); the watch takes what changes from now
 * on. Returns OK with *out; NULL_POINTER (loader, opts or out NULL);
 * INVALID_VALUE (opts->size below sizeof as of this version, a policy
 * that is neither, HK_WATCH_SWAP without a request, a malformed request, a
 * debounce above a minute); NOT_SUPPORTED (no search directory to watch);
 * OUT_OF_MEMORY; LOAD_FAILED (inotify, epoll or a timer could not be made:
 * the reason names the call and errno, as for a user over
 * fs.inotify.max_user_instances). The reason is in hk_loader_last_error.
 * Directories missing or refused now are reported by the first
 * hk_watch_process. */
hk_status_t hk_watch_create(hk_loader_t *loader, const hk_watch_options_t *opts,
                            hk_watch_t **out);

/* [thread-safe] A descriptor that becomes readable when the watch has work:
 * an event to read, or a debounce interval or a directory retry that is
 * due. Owned by the watch; -1 for NULL. */
int hk_watch_fd(const hk_watch_t *watch);

/* Handles what is pending: reads the events, takes every file that is
 * complete and stable (loads, verifies, reports, swaps), retries missing
 * directories, and arms the descriptor for what is due next. Never waits
 * for an event. Returns OK (refusals are events, not failures),
 * NULL_POINTER, BUSY (called from the watch's own callback, or on a thread
 * inside a call through a movable handle of the loader: the swap would
 * wait for that call), LOAD_FAILED (reading the events failed; the reason
 * is in hk_loader_last_error). */
hk_status_t hk_watch_process(hk_watch_t *watch);

/* [thread-safe] Starts a thread of the watch that waits on the descriptor
 * and calls hk_watch_process, until hk_watch_destroy. Returns OK;
 * NULL_POINTER; BUSY (started already); OUT_OF_MEMORY (no thread could be
 * made). */
hk_status_t hk_watch_start(hk_watch_t *watch);

/* Stops the thread (waiting for the processing in progress), stops watching
 * and frees the watch. Files waiting for their interval are not taken.
 * What the watch loaded stays loaded, and swapped handles stay where they
 * are. NULL: OK; from the watch's own callback: BUSY, nothing done. */
hk_status_t hk_watch_destroy(hk_watch_t *watch);

/* Name of a kind ("loaded", "swapped", "not-taken", "refused", "directory");
 * "unknown" outside the list; never NULL. */
const char *hk_watch_kind_name(hk_watch_kind_t kind);

#ifdef __cplusplus
}
#endif

#endif /* HK_WATCH_H */
