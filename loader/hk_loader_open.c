/* handlekit loader: admission, the one path from a file to a validated
 * plugin, whichever way the file came: hk_loader_open, a directory scan
 * (hk_loader_scan.c), or a swap that opens a closed module again
 * (hk_loader_swapmod.c). hk__admit takes a batch of candidates through the
 * steps, so that the new candidates of a directory are probed together (as
 * many at a time as the free descriptors allow, hk__probe_fit):
 *   1. check each one (hk__cand_check, hk__cand_open): name, privileges,
 *      trust walk and open, ELF checks;
 *   2. probe the new ones in a process of their own (hk_loader_probe.c);
 *   3. finish each one in order (hk__cand_finish, hk__cand_load): the host's
 *      own open, the entry symbol, negotiation and its checks
 *      (hk_loader_negotiate.c), then one report.
 * A reopen (c->again) adds only that the file must be the one loaded, and
 * answer as it did; its probe verdict is known already, and it gives the
 * plugin its module back instead of a report. Each step that refuses names
 * itself in the report (see hk_loader.h for the statuses by stage). */
#include "hk__loader.h"
#include "hk__trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "hk_status_text.h"

static void hk__refuse(hk__cand_t *c, hk_load_stage_t stage, hk_status_t status)
{
    c->refused = 1;
    c->stage = stage;
    c->status = status;
}

/* 1 when resolved (a resolved file path) lies directly in the default
 * directory. */
static int hk__in_default_dir(const hk_loader_t *loader, const char *resolved)
{
    char dir[PATH_MAX];
    if (!loader->default_dir || !realpath(loader->default_dir, dir))
        return 0;
    size_t n = strlen(dir);
    if (n == 1)
        n = 0; /* "/" */
    return strncmp(resolved, dir, n) == 0 && resolved[n] == '/'
           && !strchr(resolved + n + 1, '/');
}

static void hk__refuse_secure(hk__cand_t *c)
{
    snprintf(c->reason, sizeof(c->reason), "the process runs with elevated privileges "
             "(AT_SECURE): only plugins in the default directory are loaded");
    hk__refuse(c, HK_STAGE_SCAN, HK_STATUS_INSECURE);
}

/* A reopen of a plugin loaded from a snapshot opens that snapshot again:
 * the bytes that were checked and ran, whatever the path holds now.
 * Returns the new descriptor (-1 when refused). */
static int hk__cand_snapshot_again(hk__cand_t *c)
{
    struct stat snap;
    int fd = hk__plugin_snap_dup(c->again);
    if (fd < 0 || fstat(fd, &snap) != 0) {
        snprintf(c->reason, sizeof(c->reason), "the loader's copy of the file: %s",
                 strerror(errno));
        hk__refuse(c, HK_STAGE_OPEN, HK_STATUS_LOAD_FAILED);
        return fd;
    }
    c->snapshot = 1;
    memset(&c->st, 0, sizeof(c->st));
    c->st.st_dev = c->again->dev;
    c->st.st_ino = c->again->ino;
    c->st.st_size = snap.st_size;
    return fd;
}

/* Unless the loader maps files in place: the loader's own copy of the file
 * that was opened as *fd, which takes its place. 0, or -1 when refused. */
static int hk__cand_snapshot(hk_loader_t *loader, hk__cand_t *c, int *fd)
{
    int snap = -1;
    if (loader->in_place)
        return 0;
    hk_status_t st = hk__snap_make(*fd, &c->st, c->path, &snap, c->reason, sizeof(c->reason));
    if (st != HK_STATUS_OK) {
        hk__refuse(c, HK_STAGE_OPEN, st);
        return -1;
    }
    close(*fd);
    *fd = snap;
    c->snapshot = 1;
    hk__file_id_set(&c->id, &c->st); /* its report stands for what was copied */
    return 0;
}

/* The file's own checks through one descriptor: the trust walk and open,
 * privileges again, the same file as stat'ed (for a reopen, the file that
 * was loaded), the snapshot, ELF (of the snapshot). Leaves an open c->fd,
 * or c->refused. */
static void hk__cand_open(hk_loader_t *loader, hk__cand_t *c)
{
    char resolved[PATH_MAX];
    int fd = -1;
    hk_status_t st;
    if (c->again && c->again->from_snap) {
        fd = hk__cand_snapshot_again(c);
        if (c->refused)
            goto fail;
        goto elf;
    }
    st = hk__trust_open(c->path, 0, 1, &fd, &c->st, resolved, c->reason, sizeof(c->reason));
    if (st != HK_STATUS_OK) {
        hk__refuse(c, HK_STAGE_SCAN, st);
        return;
    }
    if (getauxval(AT_SECURE) && !c->in_default_dir && !hk__in_default_dir(loader, resolved)) {
        hk__refuse_secure(c); /* a link changed between the two resolutions: the walk's is final */
        goto fail;
    }
    if (c->again && (c->st.st_dev != c->again->dev || c->st.st_ino != c->again->ino)) {
        snprintf(c->reason, sizeof(c->reason), "it is no longer the file that was loaded (load "
                 "the new file with hk_loader_open)");
        hk__refuse(c, HK_STAGE_SCAN, HK_STATUS_LOAD_FAILED);
        goto fail;
    }
    if (!c->id.valid) {
        hk__file_id_set(&c->id, &c->st); /* created since the stat above */
    } else if (c->id.dev != c->st.st_dev || c->id.ino != c->st.st_ino) {
        snprintf(c->reason, sizeof(c->reason), "the file was replaced while it was checked");
        hk__refuse(c, HK_STAGE_SCAN, HK_STATUS_LOAD_FAILED);
        goto fail;
    }
    if (hk__cand_snapshot(loader, c, &fd) != 0)
        goto fail;
elf:
    st = hk__elf_check(fd, c->st.st_size, c->reason, sizeof(c->reason));
    if (st != HK_STATUS_OK) {
        hk__refuse(c, HK_STAGE_OPEN, st);
        goto fail;
    }
    c->fd = fd;
    return;
fail:
    if (fd >= 0)
        close(fd);
}

/* Step 1: a candidate seen before keeps its verdict; otherwise the name
 * rule, the privileges rule, then the file's own checks. */
static void hk__cand_check(hk_loader_t *loader, hk__cand_t *c)
{
    struct stat st0;
    char resolved[PATH_MAX];

    hk__file_id_set(&c->id, stat(c->path, &st0) == 0 ? &st0 : NULL);
    const hk__report_t *prev = c->again ? NULL : hk__loader_report_find(loader, c->path, &c->id);
    if (prev) {
        c->seen = 1;
        HK__TRACE(HK__TRACE_DECISIONS, "load", "candidate %s: the same file was %s before; "
                  "that verdict stands, nothing is checked again", c->path,
                  prev->pub.plugin ? "loaded" : "refused");
        return;
    }
    if (!c->again)
        HK__TRACE(HK__TRACE_DECISIONS, "load", "candidate %s", c->path);
    if (!hk__plugin_name_ok(c->path)) {
        /* libltdl would read a ".la" file and load whatever it names, and
         * guess extensions for other names: only what we check is opened. */
        snprintf(c->reason, sizeof(c->reason), "not a plugin file name: only \"*.so\" files are "
                 "loaded (never a libtool .la file)");
        hk__refuse(c, HK_STAGE_SCAN, HK_STATUS_LOAD_FAILED);
        return;
    }
    /* Before anything is opened: with elevated privileges, even opening a
     * file the caller names (a device, a FIFO) is the caller's choice. */
    if (getauxval(AT_SECURE) && !c->in_default_dir
        && (!realpath(c->path, resolved) || !hk__in_default_dir(loader, resolved))) {
        hk__refuse_secure(c);
        return;
    }
    hk__cand_open(loader, c);
}

/* The probe's answer and the host's must agree: a plugin that answers
 * differently in the probe was not the plugin that was probed. */
static int hk__same_as_probe(const hk__cand_t *c, const hk_plugin_t *p, char *reason, size_t n)
{
    const hk__probe_result_t *r = &c->probe;
    const char *what = strcmp(r->name, p->name) != 0 ? "name"
                       : strcmp(r->version, p->version) != 0 ? "version"
                       : r->abi != p->abi ? "ABI version"
                       : r->flags != p->flags ? "flags"
                       : r->vtable_size != p->vtable.size ? "vtable size" : NULL;
    if (what)
        snprintf(reason, n, "the plugin answered another %s in the host than in the probe", what);
    return what == NULL;
}

/* A reopened file must answer as it did when it was loaded: the same name,
 * version, ABI version and flags, and a vtable at least as long as the part
 * the loader kept. */
static int hk__as_before(const hk_plugin_t *was, const hk_plugin_t *now, char *reason, size_t n)
{
    const char *what = strcmp(now->name, was->name) != 0 ? "name"
                       : strcmp(now->version, was->version) != 0 ? "version"
                       : now->abi != was->abi ? "ABI version"
                       : now->flags != was->flags ? "flags"
                       : now->vtable.size < was->vtable.size ? "vtable size" : NULL;
    if (what)
        snprintf(reason, n, "it answers otherwise than when it was loaded (another %s: %s %s)",
                 what, now->name, now->version);
    return what == NULL;
}

static void hk__plugin_drop(hk_plugin_t *plugin)
{
    if (!plugin)
        return;
    if (plugin->snap_fd >= 0)
        close(plugin->snap_fd);
    free(atomic_load(&plugin->failed_why));
    free(plugin->path);
    free(plugin->name);
    free(plugin->version);
    free(plugin);
}

/* A candidate reported before: its earlier outcome, and no new report. */
static void hk__cand_seen(hk_loader_t *loader, hk__cand_t *c, const hk__report_t *prev)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->plugin = prev->pub.plugin;
    c->result = prev->pub.plugin ? HK_STATUS_OK : prev->pub.status;
    if (!prev->pub.plugin)
        hk__loader_set_error(loader, prev->line);
}

/* The debug trace's line for a negotiation the host accepted. */
static void hk__trace_negotiated(const hk_loader_t *loader, const char *path,
                             const hk_plugin_t *plugin)
{
    if (!hk__tracing(HK__TRACE_DECISIONS))
        return;
    char range[40];
    hk__range_text(range, sizeof(range), loader);
    HK__TRACE(HK__TRACE_DECISIONS, "load", "negotiated %s: %s %s chose ABI %u.%u (host "
              "accepts %s), flags 0x%x", path, plugin->name, plugin->version,
              (unsigned)HK_ABI_VERSION_MAJOR(plugin->abi),
              (unsigned)HK_ABI_VERSION_MINOR(plugin->abi), range, (unsigned)plugin->flags);
}

/* The host's own open of a checked candidate: the module from c->fd, its
 * entry symbol, negotiation into a new plugin record, and the answer
 * compared with the probe's (for a reopen, with the plugin's). On refusal c
 * says why, and what was made is left in *module and *plugin to be dropped. */
static void hk__cand_load(hk_loader_t *loader, hk__cand_t *c, lt_dlhandle *module,
                          hk__mapped_t **mapped, hk_plugin_t **plugin)
{
    char *reason = c->reason;
    const size_t n = sizeof(c->reason);
    hk_load_stage_t stage = HK_STAGE_OPEN;

    *module = hk__ltdl_open_fd(loader->advise, c->fd, &c->st, c->snapshot, c->path, mapped,
                               reason, n);
    if (!*module) {
        hk__refuse(c, HK_STAGE_OPEN, HK_STATUS_LOAD_FAILED);
        return;
    }
    c->fd = -1; /* the module's now */
    void *sym = hk__ltdl_sym(*module, HK_ENTRY_SYMBOL);
    if (!sym) {
        snprintf(reason, n, "missing entry symbol %s", HK_ENTRY_SYMBOL);
        hk__refuse(c, HK_STAGE_SYMBOL, HK_STATUS_NOT_FOUND);
        return;
    }
    /* POSIX guarantees that a data pointer from dlsym converts to a function
     * pointer; copying the bytes avoids ISO C's objection to the cast. */
    hk_negotiate_fn entry;
    memcpy(&entry, &sym, sizeof(entry));
    *plugin = calloc(1, sizeof(**plugin));
    if (!*plugin) {
        snprintf(reason, n, "out of memory");
        hk__refuse(c, HK_STAGE_SYMBOL, HK_STATUS_OUT_OF_MEMORY);
        return;
    }
    /* The mapped record's descriptor is the snapshot's while the module is
     * open; a reopen's plugin keeps the snapshot it has. */
    (*plugin)->snap_fd = -1;
    (*plugin)->from_snap = c->snapshot && !c->again;
    hk_status_t status = hk__negotiate(loader, entry, *plugin, &stage, reason, n);
    if (status != HK_STATUS_OK) {
        hk__refuse(c, stage, status);
        return;
    }
    if (c->again) {
        if (!hk__as_before(c->again, *plugin, reason, n))
            hk__refuse(c, HK_STAGE_VALIDATE, HK_STATUS_LOAD_FAILED);
        return;
    }
    hk__trace_negotiated(loader, c->path, *plugin);
    if (c->probe.answered && !hk__same_as_probe(c, *plugin, reason, n))
        hk__refuse(c, HK_STAGE_VALIDATE, HK_STATUS_INVALID_VALUE);
}

/* A new plugin joins the loader's list, with its report. */
static void hk__cand_loaded(hk_loader_t *loader, hk__cand_t *c, lt_dlhandle module,
                            hk__mapped_t *mapped, hk_plugin_t *plugin)
{
    plugin->loader = loader;
    plugin->module = module;
    plugin->mapped = mapped;
    plugin->dev = c->st.st_dev;
    plugin->ino = c->st.st_ino;
    plugin->path = strdup(c->path);
    if (!plugin->path || hk__loader_plugin_add(loader, plugin) != HK_STATUS_OK) {
        snprintf(c->reason, sizeof(c->reason), "out of memory");
        hk__refuse(c, HK_STAGE_VALIDATE, HK_STATUS_OUT_OF_MEMORY);
        return;
    }
    if (!(plugin->flags & HK_PLUGIN_UNLOAD_SAFE))
        hk__ltdl_keep(module);
    hk__loader_report_add(loader, c->path, HK_STAGE_LOADED, HK_STATUS_OK, "", plugin, &c->id);
    c->plugin = plugin;
}

/* A reopened plugin takes its module back, and the part of the new vtable
 * it kept; the new record goes. */
static void hk__cand_reopened(hk__cand_t *c, lt_dlhandle module, hk__mapped_t *mapped,
                              hk_plugin_t *fresh)
{
    hk_plugin_t *p = c->again;
    size_t keep = p->vtable.size;
    hk_vtable_t vt;
    memset(&vt, 0, sizeof(vt));
    memcpy(&vt, &fresh->vtable, keep);
    vt.size = keep;
    p->vtable = vt;
    p->module = module;
    p->mapped = mapped;
    if (p->snap_fd >= 0) { /* the mapped record holds the snapshot again */
        close(p->snap_fd);
        p->snap_fd = -1;
    }
    if (!(p->flags & HK_PLUGIN_UNLOAD_SAFE))
        hk__ltdl_keep(module);
    hk__plugin_drop(fresh);
    c->plugin = p;
}

/* Step 3: the outcome of one candidate, and its report (none for a
 * reopen). Closes c->fd unless the module keeps it. */
static void hk__cand_finish(hk_loader_t *loader, hk__cand_t *c)
{
    lt_dlhandle module = NULL;
    hk__mapped_t *mapped = NULL;
    hk_plugin_t *plugin = NULL;

    /* Again: two names of one file in one batch are one candidate. */
    const hk__report_t *prev = c->again ? NULL : hk__loader_report_find(loader, c->path, &c->id);
    if (prev) {
        hk__cand_seen(loader, c, prev);
        return;
    }
    if (!c->refused)
        hk__cand_load(loader, c, &module, &mapped, &plugin);
    if (!c->refused && c->again)
        hk__cand_reopened(c, module, mapped, plugin);
    else if (!c->refused)
        hk__cand_loaded(loader, c, module, mapped, plugin);
    if (!c->refused) {
        c->result = HK_STATUS_OK;
        return;
    }
    /* Nothing of a refused module was handed out, so closing it is safe. */
    if (module)
        hk__ltdl_close(module, mapped);
    else if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    hk__plugin_drop(plugin);
    c->result = c->status;
    if (!c->again)
        hk__loader_report_add(loader, c->path, c->stage, c->status, c->reason, NULL, &c->id);
}

void hk__cand_init(hk__cand_t *c, const char *path, int in_default_dir, hk_plugin_t *again)
{
    memset(c, 0, sizeof(*c));
    c->path = path;
    c->fd = -1;
    c->in_default_dir = in_default_dir;
    c->again = again;
}

void hk__admit(hk_loader_t *loader, hk__cand_t **cands, size_t n)
{
    /* In batches that fit the free descriptors: a directory checked whole
     * would hold one per candidate, and the probe another, or refuse all. */
    for (size_t at = 0, k; at < n; at += k) {
        k = hk__probe_fit(loader, n - at);
        for (size_t i = at; i < at + k; i++)
            hk__cand_check(loader, cands[i]);
        hk__probe_batch(loader, cands + at, k);
        for (size_t i = at; i < at + k; i++)
            hk__cand_finish(loader, cands[i]);
    }
}

hk_status_t hk_loader_open(hk_loader_t *loader, const char *path, hk_plugin_t **out)
{
    if (out)
        *out = NULL;
    if (!loader)
        return HK_STATUS_NULL_POINTER;
    if (!path) {
        hk__loader_set_error(loader, "hk_loader_open: path is NULL");
        return HK_STATUS_NULL_POINTER;
    }
    hk__cand_t *c = calloc(1, sizeof(*c));
    if (!c) {
        hk__loader_set_error(loader, "hk_loader_open: out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    hk__cand_init(c, path, 0, NULL);
    hk__gate_enter(loader);
    hk__admit(loader, &c, 1);
    hk__gate_leave(loader);
    hk_status_t st = c->result;
    if (out)
        *out = c->plugin;
    free(c);
    return st;
}
