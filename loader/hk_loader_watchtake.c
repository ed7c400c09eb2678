/* What the watch does with a file once it is complete and stable
 * (plugin_api/hk_watch.h): the loader's checks and load (hk_loader_open),
 * the verification that fits the build, and by the policy a report or a
 * swap of the request's handles. Every outcome is one event. */
#include "hk__watch.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "hk__swap.h"
#include "hk__trace.h"
#include "hk_status_text.h"

_Thread_local hk_watch_t *hk__in_watch __attribute__((tls_model("initial-exec")));

uint64_t hk__watch_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hk__watch_emit(hk_watch_t *w, hk_watch_kind_t kind, hk_status_t st, const char *path,
                    hk_plugin_t *plugin, const char *reason, int64_t mtime_ns, uint64_t seen_ns)
{
    hk_watch_event_t e = {sizeof(e), kind, st, path, plugin, reason ? reason : "", mtime_ns,
                          seen_ns, hk__watch_now()};
    HK__TRACE(HK__TRACE_DECISIONS, "watch", "%s: %s%s%s%s%s", path, hk_watch_kind_name(kind),
              st != HK_STATUS_OK ? " " : "", st != HK_STATUS_OK ? hk_status_name(st) : "",
              e.reason[0] ? ": " : "", e.reason);
    if (!w->on_event)
        return;
    hk_watch_t *was = hk__in_watch;
    hk__in_watch = w;
    w->on_event(w->user, &e);
    hk__in_watch = was;
}

const char *hk_watch_kind_name(hk_watch_kind_t kind)
{
    switch (kind) {
    case HK_WATCH_LOADED: return "loaded";
    case HK_WATCH_SWAPPED: return "swapped";
    case HK_WATCH_NOT_TAKEN: return "not-taken";
    case HK_WATCH_REFUSED: return "refused";
    case HK_WATCH_DIRECTORY: return "directory";
    }
    return "unknown";
}

/* The reason of the loader's latest report about path ("STAGE: REASON"),
 * else its last error. */
static void hk__report_reason(hk_loader_t *loader, const char *path, char *buf, size_t n)
{
    for (size_t i = hk_loader_report_count(loader); i-- > 0;) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        if (r && strcmp(r->path, path) == 0) {
            snprintf(buf, n, "%s: %s", hk_load_stage_name(r->stage), r->reason);
            return;
        }
    }
    snprintf(buf, n, "%s", hk_loader_last_error(loader));
}

/* 1 when p was loaded at index before or later: a build this open added. */
static int hk__is_new(hk_loader_t *loader, hk_plugin_t *p, size_t before)
{
    size_t n = hk_loader_plugin_count(loader);
    for (size_t i = before; i < n; i++)
        if (hk_loader_plugin(loader, i) == p)
            return 1;
    return 0;
}

/* Why the watch's request does not select p, as explain says it. */
static void hk__not_taken_reason(hk_watch_t *w, hk_plugin_t *p, char *buf, size_t n)
{
    size_t count = 0;
    snprintf(buf, n, "%s selects another build", w->request);
    hk_loader_select_explain(w->loader, w->request, NULL, 0, &count);
    hk_select_entry_t *e = count ? calloc(count, sizeof(*e)) : NULL;
    if (!e)
        return;
    size_t cap = count;
    hk_loader_select_explain(w->loader, w->request, e, cap, &count);
    for (size_t i = 0; i < cap && i < count; i++)
        if (e[i].plugin == p)
            snprintf(buf, n, "%s: %s: %s", w->request, hk_select_verdict_name(e[i].verdict),
                     e[i].reason);
    free(e);
}

/* Verifies p with no handle moving; REFUSED when it fails. Returns 1 when
 * it passed. */
static int hk__verify_only(hk_watch_t *w, hk_plugin_t *p, int64_t mtime, uint64_t seen)
{
    hk_swap_options_t o = w->swap;
    o.from = NULL;
    hk_status_t st = hk__swap_plugin(w->loader, p, &o, 1, NULL);
    if (st == HK_STATUS_OK)
        return 1;
    hk__watch_emit(w, HK_WATCH_REFUSED, st, p->path, p, hk_loader_last_error(w->loader), mtime,
                   seen);
    return 0;
}

/* Swaps the request's handles to sel, the request's selection; SWAPPED
 * when some moved, REFUSED when the swap was. */
static void hk__swap_to_selection(hk_watch_t *w, hk_plugin_t *sel, int64_t mtime, uint64_t seen)
{
    char why[HK_SELECT_REASON_MAX + 200];
    hk_swap_options_t o = w->swap;
    size_t moved = 0;
    o.from = w->name;
    hk_status_t st = hk__swap_plugin(w->loader, sel, &o, 0, &moved);
    if (st != HK_STATUS_OK) {
        hk__watch_emit(w, HK_WATCH_REFUSED, st, sel->path, sel, hk_loader_last_error(w->loader),
                       mtime, seen);
        return;
    }
    if (!moved)
        return;
    snprintf(why, sizeof(why), "%s selects %s %s; %zu movable handle%s of %s moved to it",
             w->request, sel->name, sel->version, moved, moved == 1 ? "" : "s", w->name);
    hk__watch_emit(w, HK_WATCH_SWAPPED, st, sel->path, sel, why, mtime, seen);
}

/* HK_WATCH_SWAP with a build of the request's name: the request resolved
 * again; the handles go to what it selects now (the new build, or another
 * one when the new build superseded what they ran: a rollback); a new build
 * it does not select is verified and reported as not taken. */
static void hk__follow(hk_watch_t *w, hk_plugin_t *p, int64_t mtime, uint64_t seen)
{
    char why[HK_SELECT_REASON_MAX + 200];
    hk_plugin_t *sel = NULL;
    if (hk_loader_select(w->loader, w->request, &sel) != HK_STATUS_OK)
        sel = NULL;
    if (sel != p && hk__verify_only(w, p, mtime, seen)) {
        hk__not_taken_reason(w, p, why, sizeof(why));
        hk__watch_emit(w, HK_WATCH_NOT_TAKEN, HK_STATUS_OK, p->path, p, why, mtime, seen);
    }
    if (sel)
        hk__swap_to_selection(w, sel, mtime, seen);
}

/* HK_WATCH_REPORT, or a build of another name: verify, then report it
 * against the request when there is one. */
static void hk__report(hk_watch_t *w, hk_plugin_t *p, int64_t mtime, uint64_t seen)
{
    char why[HK_SELECT_REASON_MAX + 200];
    if (!hk__verify_only(w, p, mtime, seen))
        return;
    if (!w->request) {
        hk__watch_emit(w, HK_WATCH_LOADED, HK_STATUS_OK, p->path, p, "", mtime, seen);
        return;
    }
    if (strcmp(p->name, w->name) != 0) {
        snprintf(why, sizeof(why), "%s names another plugin", w->request);
        hk__watch_emit(w, HK_WATCH_NOT_TAKEN, HK_STATUS_OK, p->path, p, why, mtime, seen);
        return;
    }
    hk_plugin_t *sel = NULL;
    if (hk_loader_select(w->loader, w->request, &sel) == HK_STATUS_OK && sel == p) {
        snprintf(why, sizeof(why), "%s selects it", w->request);
        hk__watch_emit(w, HK_WATCH_LOADED, HK_STATUS_OK, p->path, p, why, mtime, seen);
        return;
    }
    hk__not_taken_reason(w, p, why, sizeof(why));
    hk__watch_emit(w, HK_WATCH_NOT_TAKEN, HK_STATUS_OK, p->path, p, why, mtime, seen);
}

void hk__watch_take(hk_watch_t *w, const char *path, uint64_t seen_ns)
{
    struct stat st;
    int64_t mtime = stat(path, &st) == 0
                    ? (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec : 0;
    size_t before = hk_loader_plugin_count(w->loader);
    hk_plugin_t *p = NULL;
    hk_status_t s = hk_loader_open(w->loader, path, &p);
    if (s != HK_STATUS_OK) {
        char why[HK__REASON_MAX + 64];
        hk__report_reason(w->loader, path, why, sizeof(why));
        hk__watch_emit(w, HK_WATCH_REFUSED, s, path, NULL, why, mtime, seen_ns);
        return;
    }
    if (!hk__is_new(w->loader, p, before)) {
        HK__TRACE(HK__TRACE_VERBOSE, "watch", "%s: the build loaded before (%s %s), nothing "
                  "new", path, p->name, p->version);
        return;
    }
    HK__TRACE(HK__TRACE_DECISIONS, "watch", "%s: a new build, %s %s", path, p->name,
              p->version);
    if (w->policy == HK_WATCH_SWAP && strcmp(p->name, w->name) == 0)
        hk__follow(w, p, mtime, seen_ns);
    else
        hk__report(w, p, mtime, seen_ns);
}
