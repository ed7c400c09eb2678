/* handlekit live swap: a swap's calls into plugins, each within the step
 * deadline (a thread stuck past it is left behind, and its plugin's module
 * never closed: hk_swap.h, "Deadlines"), and the steps after the switch:
 * drain, destroy, close; and giving a swap up before it. */
#include "hk__swap.h"

#include <stdio.h>
#include <string.h>

#include "hk_status_text.h"

/* A line of the swap's through the loader's log callback. */
static void hk__job_log(const hk__job_t *job, const char *text)
{
    if (!job->loader->log)
        return;
    char line[768];
    snprintf(line, sizeof(line), "swap: %s", text);
    job->loader->log(job->loader->log_user, HK_LOG_WARN, line);
}

/* A call given up at its deadline (line: hk__stuck_line's): the first one
 * is the swap's outcome after its switch. */
static void hk__job_stuck(hk__job_t *job, const char *line)
{
    if (!job->stuck)
        snprintf(job->stuck_why, sizeof(job->stuck_why), "%s", line);
    job->stuck = 1;
    hk__job_log(job, line);
}

hk_status_t hk__job_create(hk__job_t *job, const hk_create_info_t *ci, hk_handle_t **out,
                           const char *what, int here, char *line, size_t n)
{
    hk_status_t st = hk__call_create(here ? 0 : job->deadline_ns, &job->fresh.core, ci, out,
                                     line, n);
    if (st != HK_STATUS_TIMED_OUT)
        return st;
    char call[128];
    snprintf(call, sizeof(call), "handle_create (%s)", what);
    hk__plugin_leak(job->to);
    hk__stuck_line(job->to, call, job->deadline_ns, job->why, sizeof(job->why));
    hk__job_stuck(job, job->why);
    return st;
}

void hk__job_destroy(hk__job_t *job, const hk_vtable_t *vt, hk_plugin_t *plugin,
                     hk_handle_t *raw, const char *what)
{
    if (atomic_load(&plugin->stuck))
        return; /* its code may hold what this call would wait for */
    hk_status_t st = hk__call_destroy(job->deadline_ns, vt->handle_destroy, raw);
    if (st == HK_STATUS_OK)
        return;
    if (st == HK_STATUS_TIMED_OUT) {
        char call[128], line[640];
        snprintf(call, sizeof(call), "handle_destroy (%s)", what);
        hk__plugin_leak(plugin);
        hk__stuck_line(plugin, call, job->deadline_ns, line, sizeof(line));
        hk__job_stuck(job, line);
        return;
    }
    atomic_fetch_add(&job->sw->destroys_failed, 1);
    atomic_store(&job->sw->last_destroy_status, (int)st);
    job->destroys_failed++;
    snprintf(job->destroy_why, sizeof(job->destroy_why), "%s %s handle_destroy of %s: %s (%s)",
             plugin->name, plugin->version, what, hk_status_name(st), hk_status_string(st));
    hk__job_log(job, job->destroy_why);
}

/* Destroys the verification handle, if any. */
static void hk__drop_verify_handle(hk__job_t *job)
{
    if (!job->vh)
        return;
    hk__job_destroy(job, &job->fresh.core, job->to, job->vh, "the verification handle");
    job->vh = NULL;
}

/* A call in flight on a preempted thread can take long: no hold, which
 * would not help. */
void hk__job_drain_wait(hk__job_t *job)
{
    struct hk__swap *sw = job->sw;
    atomic_store(&sw->draining, job->nmovers);
    atomic_store(&sw->phase, HK_SWAP_DRAINING);
    for (size_t i = 0; i < job->nmovers; i++) {
        hk__binding_t *old = job->movers[i].old;
        for (unsigned spins = 0; atomic_load(&old->inflight) != 0; spins++)
            hk__swap_pause(spins, 64);
    }
}

/* Counts unloads of libraries of movable handles that failed (why: the
 * last one's line). */
static void hk__unloads_failed(hk__job_t *job, unsigned failed, const char *why)
{
    if (!failed)
        return;
    job->unloads_failed += failed;
    snprintf(job->destroy_why, sizeof(job->destroy_why), "%s", why);
}

/* Whether mover i is the last of the movers on its old implementation. */
static int hk__last_of_its_plugin(const hk__job_t *job, size_t i)
{
    for (size_t k = i + 1; k < job->nmovers; k++)
        if (job->movers[k].old->plugin == job->movers[i].old->plugin)
            return 0;
    return 1;
}

/* Destroys the drained old handles and empties their bindings; then
 * destroys the verification handle. The libraries of movable handles are
 * unloaded from an old implementation through the last of its handles, the
 * others destroyed first (they would keep the libraries BUSY). */
void hk__job_drain(hk__job_t *job)
{
    struct hk__swap *sw = job->sw;
    for (size_t i = 0; i < job->nmovers; i++) {
        hk__binding_t *old = job->movers[i].old;
        if (hk__last_of_its_plugin(job, i)) {
            char why[512];
            hk__unloads_failed(job, hk__kern_drop(sw, old, why, sizeof(why)), why);
        }
        hk__job_destroy(job, &old->core, old->plugin, old->raw, "an old handle");
        pthread_mutex_lock(&sw->list_lock);
        old->raw = NULL;
        old->plugin = NULL;
        pthread_mutex_unlock(&sw->list_lock);
        atomic_fetch_sub(&sw->draining, 1);
    }
    hk__drop_verify_handle(job);
}

/* Closes every plugin the movers left that nothing reaches any more. */
void hk__job_close_old(hk__job_t *job, hk_plugin_t **olds)
{
    atomic_store(&job->sw->phase, HK_SWAP_CLOSING);
    size_t n = 0;
    for (size_t i = 0; i < job->nmovers; i++) {
        hk_plugin_t *p = olds[i];
        int seen = 0;
        for (size_t k = 0; k < n && !seen; k++)
            seen = olds[k] == p;
        if (!seen)
            olds[n++] = p;
    }
    for (size_t k = 0; k < n; k++) {
        char why[640];
        if (hk__swap_try_close(job->loader, job->sw, olds[k], job->deadline_ns, why,
                               sizeof(why)) != HK_STATUS_OK)
            hk__job_stuck(job, why);
    }
}

/* A swap that will not happen: the new handles and the verification handle
 * go, a module this swap opened again is closed again; nothing moved. */
void hk__job_abandon(hk__job_t *job)
{
    char line[512];
    hk__unloads_failed(job, hk__kern_abandon(job->sw, &job->fresh, job->vh, line, sizeof(line)),
                       line);
    for (size_t i = 0; i < job->nmovers; i++)
        if (job->movers[i].raw)
            hk__job_destroy(job, &job->fresh.core, job->to, job->movers[i].raw,
                        "a new handle of the swap given up");
    hk__drop_verify_handle(job);
    char why[640];
    if (job->reopened /* leave it closed, as it was */
        && hk__swap_try_close(job->loader, job->sw, job->to, job->deadline_ns, why,
                              sizeof(why)) != HK_STATUS_OK)
        hk__job_stuck(job, why);
}
