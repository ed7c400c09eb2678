/* handlekit live swap: moving every movable handle to another implementation
 * while other threads call through them (hk_swap.h states the steps, and
 * hk__swap.h the call path's protocol and the locks). */
#include "hk__swap.h"
#include "hk__trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hk_status_text.h"

enum { HK__DOM_UNKNOWN = 0, HK__DOM_HOST = 1, HK__DOM_CUDA = 2 };

/* Whether a handle_info answer of info->size bytes covers field. */
#define HK__HAS(info, field) \
    ((info).size >= offsetof(hk_handle_info_t, field) + sizeof((info).field))

static uint64_t hk__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *hk__dom_name(int dom)
{
    return dom == HK__DOM_HOST ? "host memory" : dom == HK__DOM_CUDA ? "CUDA device memory"
                                                                      : "an unknown domain";
}

static int hk__dom_of_flags(uint32_t flags)
{
    int host = (flags & HK_PLUGIN_MEMORY_HOST) != 0, cuda = (flags & HK_PLUGIN_MEMORY_CUDA) != 0;
    return host == cuda ? HK__DOM_UNKNOWN : host ? HK__DOM_HOST : HK__DOM_CUDA;
}

static int hk__dom_of_info(const hk_handle_info_t *info)
{
    if (!HK__HAS(*info, device))
        return HK__DOM_UNKNOWN;
    return info->device < 0 ? HK__DOM_HOST : HK__DOM_CUDA;
}

/* The movable handles that move: those not on the new plugin yet and, with
 * from, those whose plugin has that name. */
static hk_status_t hk__collect(hk__job_t *job)
{
    struct hk__swap *sw = job->sw;
    hk_status_t st = HK_STATUS_OK;
    pthread_mutex_lock(&sw->list_lock);
    job->movers = calloc(sw->nhandles ? sw->nhandles : 1, sizeof(*job->movers));
    if (!job->movers) {
        st = HK_STATUS_OUT_OF_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < sw->nhandles; i++) {
        hk_mhandle_t *mh = sw->handles[i];
        hk__binding_t *b = hk__mh_bound(mh); /* the prepare may hold it already */
        if (job->verify_only || b->plugin == job->to
            || (job->from && strcmp(b->plugin->name, job->from) != 0))
            continue;
        job->movers[job->nmovers].mh = mh;
        job->movers[job->nmovers].old = b;
        job->nmovers++;
    }
out:
    pthread_mutex_unlock(&sw->list_lock);
    return st;
}

/* Every mover's domain must be dom_new. */
static hk_status_t hk__check_domains(hk__job_t *job, int dom_new)
{
    for (size_t i = 0; i < job->nmovers; i++) {
        hk_plugin_t *old = job->movers[i].old->plugin;
        int dom = hk__dom_of_flags(old->flags);
        if (dom == HK__DOM_UNKNOWN)
            dom = hk__dom_of_info(&job->movers[i].mh->bound);
        if (dom == dom_new && dom != HK__DOM_UNKNOWN)
            continue;
        snprintf(job->why, sizeof(job->why),
                 "%s %s works in %s and %s %s in %s: the callers' buffers would not follow "
                 "(a swap stays within one memory domain)",
                 old->name, old->version, hk__dom_name(dom), job->to->name, job->to->version,
                 hk__dom_name(dom_new));
        return HK_STATUS_NOT_SUPPORTED;
    }
    return HK_STATUS_OK;
}

/* The memory domain of a handle of the new plugin made with ci, from its
 * handle_info. */
static int hk__dom_of_handle(hk__job_t *job, const hk_create_info_t *ci)
{
    const hk_vtable_t *vt = &job->fresh.core;
    hk_handle_t *h = NULL;
    hk_handle_info_t info = {.size = sizeof(info)};
    char line[512];
    if (hk__job_create(job, ci, &h, "a handle asked for its memory domain", 0, line,
                       sizeof(line)) != HK_STATUS_OK)
        return HK__DOM_UNKNOWN;
    if (!vt->handle_info || vt->handle_info(h, &info) != HK_STATUS_OK)
        info.size = 0;
    hk__job_destroy(job, vt, job->to, h, "a handle asked for its memory domain");
    return hk__dom_of_info(&info);
}

/* The new plugin's tables and domain, and the verification workload on a
 * handle of it in a probe process, on the device of the first handle that
 * moves (hk__validate_here repeats it in this process). */
static hk_status_t hk__validate(hk__job_t *job)
{
    hk_plugin_t *to = job->to;
    int dom_new = hk__dom_of_flags(to->flags);
    hk_status_t st;
    if (dom_new != HK__DOM_UNKNOWN && (st = hk__check_domains(job, dom_new)) != HK_STATUS_OK)
        return st; /* refused before any code of the new plugin runs */

    if (!hk__ext_of(job->sw, to)) {
        snprintf(job->why, sizeof(job->why), "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    hk__binding_fill(&job->fresh, to, NULL);
    /* The generic rule: what the movers' implementations offer and the
     * handles use, the new one offers, table by table and slot by slot. */
    for (size_t i = 0; i < job->nmovers; i++) {
        const hk__binding_t *old = job->movers[i].old;
        char what[320];
        const char *fwd = hk__fwd_lacking(old, &job->fresh, what, sizeof(what));
        if (fwd || hk__ext_lacking(old->ext, job->fresh.ext, what, sizeof(what))) {
            snprintf(job->why, sizeof(job->why), "%s %s lacks %s, which %s %s offers%s",
                     to->name, to->version, what, old->plugin->name, old->plugin->version,
                     fwd ? "" : " and the movable handles use");
            return HK_STATUS_NOT_SUPPORTED;
        }
    }

    job->ci = (hk_create_info_t){sizeof(job->ci), HK_DEVICE_CURRENT, 0};
    if (job->nmovers && HK__HAS(job->movers[0].mh->bound, device)
        && job->movers[0].mh->bound.device >= 0)
        job->ci.device = job->movers[0].mh->bound.device;
    /* One verification per build and device: a build that passed before
     * runs nothing again. Else in a probe process first: a crash, exit or
     * hang of the new plugin there refuses the swap (here it would end the
     * host), and a pass there is the verification. */
    if (hk__verified(to, job->ci.device)) {
        job->verified = "verified before on this device: nothing run again";
        return HK_STATUS_OK;
    }
    char first[512];
    int passed = 0;
    st = hk__probe_verify(job->loader, to, job->ci.device, first, sizeof(first), &passed);
    if (st != HK_STATUS_OK)
        snprintf(job->why, sizeof(job->why), "%s %s failed in the probe process: %s", to->name,
                 to->version, first);
    if (passed) {
        hk__verified_note(to, job->ci.device);
        job->verified = "verified in the probe process";
    }
    return st;
}

/* The verification that fits the new plugin (hk__verify_handle), unless it
 * was met already (job->verified: this build passed before on this device,
 * or in the probe process just now), then the host's own when it gave one,
 * on the verification handle. */
static hk_status_t hk__verify_here(hk__job_t *job)
{
    hk_plugin_t *to = job->to;
    char what[600];
    const char *how = job->verified;
    what[0] = '\0';
    hk_status_t st = HK_STATUS_OK;
    if (!how) { /* neither before nor in a probe process: here */
        st = hk__verify_handle(to, job->vh, &how, what, sizeof(what));
        if (st == HK_STATUS_OK)
            hk__verified_note(to, job->ci.device);
        else /* the build's own verification: no request selects it again */
            hk__failed_note(to, what[0] ? what : hk_status_string(st));
    }
    if (st == HK_STATUS_OK && job->verify) {
        how = "the host's verify callback";
        st = job->verify(job->verify_user, to, job->vh, what, sizeof(what));
        what[sizeof(what) - 1] = '\0';
    }
    if (st != HK_STATUS_OK)
        snprintf(job->why, sizeof(job->why), "%s %s failed verification (%s): %.600s", to->name,
                 to->version, how, what[0] ? what : hk_status_string(st));
    else
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "%s %s: verification met (%s)%s", to->name,
                  to->version, job->verified ? job->verified : how,
                  job->verify ? ", and the host's verify callback passed" : "");
    return st;
}

/* The verification in this process: a handle of the new plugin on the
 * movable handles' device, and the verification on it. */
static hk_status_t hk__validate_here(hk__job_t *job)
{
    hk_plugin_t *to = job->to;
    int dom_new = hk__dom_of_flags(to->flags);
    hk_create_info_t ci = job->ci;
    const hk_vtable_t *vt = &job->fresh.core;
    hk_handle_t *h = NULL;
    char line[512];
    hk_status_t st = hk__job_create(job, &ci, &h, "the verification handle", 0, line,
                                    sizeof(line));
    if (st == HK_STATUS_TIMED_OUT)
        return st;
    if (st != HK_STATUS_OK && dom_new == HK__DOM_UNKNOWN && ci.device != HK_DEVICE_CURRENT) {
        /* It may have no such device because it works in another domain:
         * that is the better reason to give. */
        hk_create_info_t dflt = {sizeof(dflt), HK_DEVICE_CURRENT, 0};
        int dom = hk__dom_of_handle(job, &dflt);
        if (dom != HK__DOM_UNKNOWN && hk__check_domains(job, dom) != HK_STATUS_OK)
            return HK_STATUS_NOT_SUPPORTED;
        if (job->stuck) /* that handle's create or destroy hung */
            return HK_STATUS_TIMED_OUT;
    }
    if (st != HK_STATUS_OK) {
        snprintf(job->why, sizeof(job->why), "%s %s: handle_create: %s: %s", to->name,
                 to->version, hk_status_name(st), line);
        return st;
    }
    if (dom_new == HK__DOM_UNKNOWN) {
        hk_handle_info_t info = {.size = sizeof(info)};
        if (!vt->handle_info || vt->handle_info(h, &info) != HK_STATUS_OK)
            info.size = 0;
        st = hk__check_domains(job, hk__dom_of_info(&info));
    }
    job->vh = h; /* destroyed after the switch, or when the swap is refused */
    return st == HK_STATUS_OK ? hk__verify_here(job) : st;
}

/* Gives a new handle a movable handle's settings; force: also the defaults
 * (the settings changed since the handle was made). */
static hk_status_t hk__apply(const hk_vtable_t *vt, hk_handle_t *raw, void *stream,
                             hk_pointer_mode_t mode, int force, const char **what)
{
    hk_status_t st = HK_STATUS_OK;
    if (stream || force) {
        *what = "set_stream";
        st = vt->set_stream ? vt->set_stream(raw, stream)
                            : stream ? HK_STATUS_NOT_SUPPORTED : HK_STATUS_OK;
    }
    if (st == HK_STATUS_OK && (mode != HK_POINTER_MODE_HOST || force)) {
        *what = "set_pointer_mode";
        st = vt->set_pointer_mode ? vt->set_pointer_mode(raw, mode)
                                  : mode != HK_POINTER_MODE_HOST ? HK_STATUS_NOT_SUPPORTED
                                                                 : HK_STATUS_OK;
    }
    return st;
}

/* Makes the new handle of one mover with the same device, context, flags,
 * stream and pointer mode. */
static hk_status_t hk__make_new(hk__job_t *job, hk__mover_t *mv)
{
    hk_mhandle_t *mh = mv->mh;
    const hk_handle_info_t *bound = &mh->bound; /* fixed at create */
    const hk_vtable_t *vt = &job->fresh.core;
    pthread_mutex_lock(&mh->lock);
    hk_create_info_t ci = mh->info;
    mv->stream = mh->stream;
    mv->mode = mh->mode;
    mv->gen = mh->settings_gen;
    pthread_mutex_unlock(&mh->lock);

    int user_ctx = HK__HAS(*bound, owns_primary) && !bound->owns_primary;
    if (HK__HAS(*bound, device) && bound->device >= 0)
        ci.device = user_ctx ? HK_DEVICE_CURRENT : bound->device;
    char line[512];
    /* bound to a context current on this thread: made here, without a deadline */
    hk_status_t st = hk__job_create(job, &ci, &mv->raw, "a new handle", user_ctx, line,
                                    sizeof(line));
    if (st != HK_STATUS_OK) {
        mv->raw = NULL;
        if (st != HK_STATUS_TIMED_OUT)
            snprintf(job->why, sizeof(job->why), "%s %s: handle_create (device %d): %s: %s",
                     job->to->name, job->to->version, ci.device, hk_status_name(st), line);
        return st;
    }
    const char *what = "";
    st = hk__apply(vt, mv->raw, mv->stream, mv->mode, 0, &what);
    if (st != HK_STATUS_OK) {
        snprintf(job->why, sizeof(job->why), "%s %s: %s: %s: %s", job->to->name,
                 job->to->version, what, hk_status_name(st), vt->last_error(mv->raw));
        return st;
    }
    hk_handle_info_t now = {.size = sizeof(now)};
    if (!HK__HAS(*bound, device) || !vt->handle_info || vt->handle_info(mv->raw, &now) != HK_STATUS_OK)
        return HK_STATUS_OK; /* nothing to compare with */
    int same_ctx = !HK__HAS(*bound, context_id) || !HK__HAS(now, context_id)
                   || now.context_id == bound->context_id;
    if (now.device == bound->device && same_ctx)
        return HK_STATUS_OK;
    snprintf(job->why, sizeof(job->why),
             "a movable handle bound to device %d, context %llu would move to device %d, "
             "context %llu%s",
             bound->device, (unsigned long long)bound->context_id, now.device,
             (unsigned long long)now.context_id,
             user_ctx ? " (it is bound to a context it does not own: swap with that context "
                        "current)" : "");
    return HK_STATUS_NOT_SUPPORTED;
}

/* The libraries loaded through the movers: into the new implementation,
 * with their kernels, in the new handles' contexts (hk_loader_swapkern.c). */
static hk_status_t hk__libraries(hk__job_t *job)
{
    hk_plugin_t **from = calloc(job->nmovers ? job->nmovers : 1, sizeof(*from));
    hk_handle_t **news = calloc(job->nmovers ? job->nmovers : 1, sizeof(*news));
    hk_status_t st = HK_STATUS_OUT_OF_MEMORY;
    size_t nfrom = 0;
    if (!from || !news) {
        snprintf(job->why, sizeof(job->why), "out of memory");
        goto out;
    }
    for (size_t i = 0; i < job->nmovers; i++) {
        hk_plugin_t *p = job->movers[i].old->plugin;
        size_t k = 0;
        while (k < nfrom && from[k] != p)
            k++;
        if (k == nfrom)
            from[nfrom++] = p;
        news[i] = job->movers[i].raw;
    }
    st = hk__kern_prepare(job->sw, &job->fresh, job->vh, from, nfrom, news, job->nmovers,
                          job->why, sizeof(job->why));
out:
    free(from);
    free(news);
    return st;
}

/* Switches every mover at a call boundary. Settings changed since
 * hk__make_new are given to the new handle first; a failure there switches
 * nothing. The libraries' new implementation is published just before. */
static hk_status_t hk__commit(hk__job_t *job)
{
    const hk_vtable_t *vt = &job->fresh.core;
    hk_status_t st = hk__kern_commit_begin(job->sw, &job->fresh, job->vh, job->why,
                                           sizeof(job->why));
    if (st != HK_STATUS_OK)
        return st;
    for (size_t i = 0; i < job->nmovers; i++)
        pthread_mutex_lock(&job->movers[i].mh->lock);
    for (size_t i = 0; i < job->nmovers && st == HK_STATUS_OK; i++) {
        hk__mover_t *mv = &job->movers[i];
        if (mv->mh->settings_gen == mv->gen)
            continue;
        const char *what = "";
        st = hk__apply(vt, mv->raw, mv->mh->stream, mv->mh->mode, 1, &what);
        if (st != HK_STATUS_OK)
            snprintf(job->why, sizeof(job->why), "%s %s: %s: %s: %s", job->to->name,
                     job->to->version, what, hk_status_name(st), vt->last_error(mv->raw));
    }
    if (st == HK_STATUS_OK) {
        /* The tables the handles pinned stay in use on the new one. */
        for (size_t i = 0; i < job->nmovers; i++)
            hk__ext_carry(job->movers[i].old->ext, job->fresh.ext);
        pthread_mutex_lock(&job->sw->list_lock);
        hk__kern_publish(job->sw, job->to);
        for (size_t i = 0; i < job->nmovers; i++) {
            hk_mhandle_t *mh = job->movers[i].mh;
            hk__binding_t *spare = job->movers[i].old == &mh->slot[0] ? &mh->slot[1] : &mh->slot[0];
            hk__binding_fill(spare, job->to, job->movers[i].raw);
            atomic_store(&mh->cur, spare);
            atomic_fetch_add(&mh->generation, 1);
            job->movers[i].raw = NULL; /* the movable handle owns it now */
        }
        pthread_mutex_unlock(&job->sw->list_lock);
    }
    for (size_t i = job->nmovers; i-- > 0;)
        pthread_mutex_unlock(&job->movers[i].mh->lock);
    hk__kern_commit_end(job->sw);
    return st;
}

/* Everything up to the switch, timed step by step into job->t[1..3]; on
 * failure nothing has moved. */
static hk_status_t hk__prepare(hk__job_t *job, const char *request)
{
    hk_status_t st = HK_STATUS_OK;
    job->to = job->target;
    if (!job->to)
        st = hk_loader_select(job->loader, request, &job->to);
    if (st != HK_STATUS_OK) {
        snprintf(job->why, sizeof(job->why), "%s", hk_loader_last_error(job->loader));
        return st;
    }
    if (atomic_load(&job->to->stuck)) {
        snprintf(job->why, sizeof(job->why), "%s %s has a call that did not return by its "
                 "deadline", job->to->name, job->to->version);
        return HK_STATUS_TIMED_OUT;
    }
    job->reopened = job->to->module == NULL;
    st = hk__swap_ensure_open(job->loader, job->to, job->why, sizeof(job->why));
    if (st != HK_STATUS_OK)
        return st;
    job->t[1] = hk__now_ns();
    st = hk__collect(job);
    if (st != HK_STATUS_OK) {
        snprintf(job->why, sizeof(job->why), "out of memory");
        return st;
    }
    HK__TRACE(HK__TRACE_DECISIONS, "swap", "\"%s\" resolves to %s %s (%s); %zu movable "
              "handle%s to move%s%s", request, job->to->name, job->to->version, job->to->path,
              job->nmovers, job->nmovers == 1 ? "" : "s", job->from ? ", those of " : "",
              job->from ? job->from : "");
    return hk__validate(job);
}

/* The prepare's steps in this process, which may load code into a device
 * context: verification, new handles, the libraries loaded through them. */
static hk_status_t hk__prepare_here(hk__job_t *job)
{
    hk_status_t st = hk__validate_here(job);
    job->t[2] = hk__now_ns();
    if (st == HK_STATUS_OK)
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "verified %s %s: tables, memory domain and the "
                  "workload on a handle of its own", job->to->name, job->to->version);
    for (size_t i = 0; i < job->nmovers && st == HK_STATUS_OK; i++)
        st = hk__make_new(job, &job->movers[i]);
    if (st == HK_STATUS_OK)
        st = hk__libraries(job);
    job->t[3] = hk__now_ns();
    return st;
}

/* Starts the watchdog of a step with the job's hold time and limit. */
static void hk__guard_start(hk__job_t *job, hk__guard_t *g)
{
    hk__guard_begin(g, job->sw, job->hold_after_ns, job->hold_max_ns);
}

/* After the switch: drain, destroy and close what the handles left. */
static void hk__finish(hk__job_t *job)
{
    job->t[4] = hk__now_ns();
    job->switched = 1;
    HK__TRACE(HK__TRACE_DECISIONS, "swap", "switched %zu handle%s to %s %s, %.1f us after the "
              "%s call", job->nmovers, job->nmovers == 1 ? "" : "s", job->to->name,
              job->to->version,
              (double)(job->t[4] - (job->t_commit ? job->t_commit : job->t[0])) / 1e3,
              job->t_commit ? "commit" : "swap");
    atomic_fetch_add(&job->sw->generation, 1);
    hk__kern_settle(job->sw); /* the libraries' new implementation is theirs now */
    hk_plugin_t **olds = calloc(job->nmovers ? job->nmovers : 1, sizeof(*olds));
    for (size_t i = 0; olds && i < job->nmovers; i++)
        olds[i] = job->movers[i].old->plugin;
    hk__job_drain_wait(job);
    hk__guard_t g;
    hk__guard_start(job, &g);
    hk__job_drain(job);
    uint64_t t_drained = hk__now_ns();
    HK__TRACE(HK__TRACE_DECISIONS, "swap", "drained: no call runs on the %zu old binding%s any "
              "more, their handles destroyed, %.1f us after the switch", job->nmovers,
              job->nmovers == 1 ? "" : "s", (double)(t_drained - job->t[4]) / 1e3);
    if (olds && !job->keep_old) /* without the list the old modules just stay open */
        hk__job_close_old(job, olds);
    else if (job->keep_old)
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "the old modules stay open (keep_old)");
    hk__guard_done(&g, "destroying the old handles and closing their modules");
    free(olds);
    hk__swap_record_times(job->sw, job->t, job->t_commit, t_drained, hk__now_ns());
}

/* The steps that may load or unload code in a device context, each under
 * the hold watchdog (hk__swap.h, "Holding"). */
static hk_status_t hk__prepare_guarded(hk__job_t *job, const char *request)
{
    /* What runs before (the checks, the probe process's verification) loads
     * no code here: holding the calls would not speed it up. */
    hk_status_t st = hk__prepare(job, request);
    if (st != HK_STATUS_OK) {
        job->t[2] = job->t[3] = hk__now_ns();
        return st;
    }
    hk__guard_t g;
    hk__guard_start(job, &g);
    st = hk__prepare_here(job);
    hk__guard_done(&g, "the prepare (verification, new handles)");
    return st;
}

static void hk__abandon_guarded(hk__job_t *job)
{
    hk__guard_t g;
    hk__guard_start(job, &g);
    hk__job_abandon(job);
    hk__guard_done(&g, "giving up the swap");
}

/* Commits a prepared job: switch, then drain and close; on failure nothing
 * moved. */
static hk_status_t hk__commit_and_finish(hk__job_t *job)
{
    hk_status_t st = hk__commit(job);
    if (st != HK_STATUS_OK)
        hk__abandon_guarded(job);
    else
        hk__finish(job);
    return st;
}

/* Checks the arguments, makes the job and takes the swap lock (held until
 * hk__job_end). Returns OK with *out, or the refusal (recorded). */
static hk_status_t hk__job_begin(hk_loader_t *loader, const char *request,
                                 const hk_swap_options_t *opts, hk__job_t **out)
{
    uint64_t t0 = hk__now_ns();
    *out = NULL;
    if (!loader)
        return HK_STATUS_NULL_POINTER;
    if (!request)
        return hk__swap_fail(loader, HK_STATUS_NULL_POINTER, "swap refused: request is NULL");
    hk_swap_options_t o = {.size = sizeof(o)};
    if (opts) {
        if (opts->size < sizeof(uint32_t))
            return hk__swap_fail(loader, HK_STATUS_INVALID_VALUE,
                                 "swap to %s refused: opts->size is %u", request,
                                 (unsigned)opts->size);
        memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
    }
    if (hk__in_call_of(loader)) /* its drain would wait for this thread's own call */
        return hk__swap_fail(loader, HK_STATUS_BUSY, "swap to %s refused: called from inside a "
                             "call through a movable handle of this loader (it would wait "
                             "for that call to end)", request);
    struct hk__swap *sw = hk__swap_get(loader);
    if (!sw)
        return hk__swap_fail(loader, HK_STATUS_OUT_OF_MEMORY, "swap refused: out of memory");
    /* The job holds a cache-line aligned binding: calloc's alignment is not enough. */
    hk__job_t *job = aligned_alloc(_Alignof(hk__job_t), sizeof(*job));
    if (job)
        memset(job, 0, sizeof(*job));
    if (!job)
        return hk__swap_fail(loader, HK_STATUS_OUT_OF_MEMORY, "swap refused: out of memory");
    job->loader = loader;
    job->sw = sw;
    job->from = o.from;
    /* Capped at a day (a longer hold time means never, in practice), so
     * that the ns and the watchdog's deadline cannot overflow. */
    int64_t hold_us = o.hold_after_us > HK__HOLD_AFTER_MAX_US ? HK__HOLD_AFTER_MAX_US
                                                              : o.hold_after_us;
    job->hold_after_ns = hold_us < 0    ? 0
                         : hold_us == 0 ? HK__HOLD_AFTER_DEFAULT_US * 1000u
                                        : (uint64_t)hold_us * 1000u;
    int64_t max_us = o.hold_max_us > HK__HOLD_AFTER_MAX_US ? HK__HOLD_AFTER_MAX_US
                                                           : o.hold_max_us;
    job->hold_max_ns = max_us < 0    ? 0
                       : max_us == 0 ? HK__HOLD_MAX_DEFAULT_US * 1000u
                                     : (uint64_t)max_us * 1000u;
    int64_t dl_us = o.deadline_us > HK__HOLD_AFTER_MAX_US ? HK__HOLD_AFTER_MAX_US : o.deadline_us;
    job->deadline_ns = dl_us < 0 ? 0 : dl_us == 0 ? loader->deadline_ns : (uint64_t)dl_us * 1000u;
    job->verify = o.verify;
    job->verify_user = o.verify_user;
    job->keep_old = o.keep_old != 0;
    job->t[0] = t0;
    job->owner = pthread_self();
    snprintf(job->request, sizeof(job->request), "%s", request);
    pthread_mutex_lock(&sw->lock);
    atomic_store(&sw->phase, HK_SWAP_PENDING);
    *out = job;
    return HK_STATUS_OK;
}

/* Records the job's outcome st (a refusal with its reason), gives the swap
 * lock back and frees the job. Returns st. */
static hk_status_t hk__job_end(hk__job_t *job, hk_status_t st, hk_plugin_t **to)
{
    struct hk__swap *sw = job->sw;
    char destroys[700] = "", counts[96] = "";
    unsigned d = job->destroys_failed, u = job->unloads_failed;
    if (d)
        snprintf(counts, sizeof(counts), "%u handle_destroy call%s", d, d > 1 ? "s" : "");
    if (u)
        snprintf(counts + strlen(counts), sizeof(counts) - strlen(counts),
                 "%s%u library unload%s", d ? " and " : "", u, u > 1 ? "s" : "");
    if (d || u)
        snprintf(destroys, sizeof(destroys), "%s failed; the last: %s", counts, job->destroy_why);
    if (st == HK_STATUS_OK && job->stuck && !job->switched) { /* a cancel */
        st = HK_STATUS_TIMED_OUT;
        hk__swap_fail(job->loader, st, "swap to %s cancelled: %s", job->request, job->stuck_why);
    } else if (st == HK_STATUS_OK && job->stuck) { /* after the switch: the handles moved */
        st = HK_STATUS_TIMED_OUT;
        hk__swap_fail(job->loader, st, "swap to %s: %s; every handle that moved runs %s %s%s%s",
                      job->request, job->stuck_why, job->to->name, job->to->version,
                      destroys[0] ? "; " : "", destroys);
        if (to)
            *to = job->to;
    } else if (st != HK_STATUS_OK) {
        atomic_fetch_add(&sw->failed, 1);
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "to \"%s\" refused: %s: %s; every handle stays "
                  "on its implementation", job->request, hk_status_name(st), job->why);
        hk__swap_fail(job->loader, st, "swap to %s refused: %s%s%s", job->request, job->why,
                      destroys[0] ? "; " : "", destroys);
    } else {
        if (destroys[0])
            hk__swap_fail(job->loader, st, "swap to %s: %s", job->request, destroys);
        if (to)
            *to = job->to;
    }
    atomic_store(&sw->phase, HK_SWAP_IDLE);
    pthread_mutex_unlock(&sw->lock);
    free(job->movers);
    free(job);
    return st;
}

hk_status_t hk_loader_swap(hk_loader_t *loader, const char *request,
                           const hk_swap_options_t *opts, hk_plugin_t **to)
{
    hk__job_t *job = NULL;
    if (to)
        *to = NULL;
    hk_status_t st = hk__job_begin(loader, request, opts, &job);
    if (st != HK_STATUS_OK)
        return st;
    st = hk__prepare_guarded(job, request);
    if (st == HK_STATUS_OK)
        st = hk__commit_and_finish(job);
    else
        hk__abandon_guarded(job);
    return hk__job_end(job, st, to);
}

hk_status_t hk__swap_plugin(hk_loader_t *loader, hk_plugin_t *plugin,
                            const hk_swap_options_t *opts, int verify_only, size_t *moved)
{
    hk__job_t *job = NULL;
    if (moved)
        *moved = 0;
    hk_status_t st = hk__job_begin(loader, plugin->path, opts, &job);
    if (st != HK_STATUS_OK)
        return st;
    job->target = plugin;
    job->verify_only = verify_only;
    st = hk__prepare_guarded(job, plugin->path);
    if (st == HK_STATUS_OK && !verify_only)
        st = hk__commit_and_finish(job);
    else
        hk__abandon_guarded(job);
    if (moved && job->switched)
        *moved = job->nmovers;
    return hk__job_end(job, st, NULL);
}

hk_status_t hk_loader_swap_prepare(hk_loader_t *loader, const char *request,
                                   const hk_swap_options_t *opts, hk_swap_prepared_t **prepared)
{
    hk__job_t *job = NULL;
    if (!prepared)
        return loader ? hk__swap_fail(loader, HK_STATUS_NULL_POINTER,
                                      "swap refused: prepared is NULL")
                      : HK_STATUS_NULL_POINTER;
    *prepared = NULL;
    hk_status_t st = hk__job_begin(loader, request, opts, &job);
    if (st != HK_STATUS_OK)
        return st;
    st = hk__prepare_guarded(job, request);
    if (st != HK_STATUS_OK) {
        hk__abandon_guarded(job);
        return hk__job_end(job, st, NULL);
    }
    job->prepared = 1;
    HK__TRACE(HK__TRACE_DECISIONS, "swap", "prepared: %zu new handle%s of %s %s wait for the "
              "commit", job->nmovers, job->nmovers == 1 ? "" : "s", job->to->name,
              job->to->version);
    *prepared = job;
    return HK_STATUS_OK;
}

/* A prepared swap, used from the thread that prepared it? */
static hk_status_t hk__check_prepared(hk_swap_prepared_t *job, const char *what)
{
    if (!job)
        return HK_STATUS_NULL_POINTER;
    if (!job->prepared || !pthread_equal(job->owner, pthread_self()))
        return hk__swap_fail(job->loader, HK_STATUS_INVALID_VALUE,
                             "%s: the swap to %s was prepared by another thread, which must "
                             "commit or cancel it", what, job->request);
    return HK_STATUS_OK;
}

hk_status_t hk_loader_swap_commit(hk_swap_prepared_t *prepared, hk_plugin_t **to)
{
    if (to)
        *to = NULL;
    hk_status_t st = hk__check_prepared(prepared, "hk_loader_swap_commit");
    if (st != HK_STATUS_OK)
        return st;
    prepared->t_commit = hk__now_ns();
    st = hk__commit_and_finish(prepared);
    return hk__job_end(prepared, st, to);
}

hk_status_t hk_loader_swap_cancel(hk_swap_prepared_t *prepared)
{
    hk_status_t st = hk__check_prepared(prepared, "hk_loader_swap_cancel");
    if (st != HK_STATUS_OK)
        return st;
    hk__abandon_guarded(prepared);
    HK__TRACE(HK__TRACE_DECISIONS, "swap", "prepared swap to \"%s\" cancelled; every handle "
              "stays on its implementation", prepared->request);
    return hk__job_end(prepared, HK_STATUS_OK, NULL);
}
