/* handlekit loader: one candidate file, from its path to a validated plugin.
 *
 * A candidate goes through two halves so that a scan can probe the new
 * candidates of a directory together (hk_loader_probe.c) between them:
 *   hk__cand_check   name, privileges, trust walk and open, ELF checks
 *   hk__cand_finish  the report of a refusal, or the host's own open,
 *                    symbol lookup, negotiation and validation
 * Each step that refuses names itself in the report (see hk_loader.h for the
 * statuses by stage). */
#include "hk__loader.h"
#include "hk__trace.h"

#include <errno.h>
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

void hk__cand_check(hk_loader_t *loader, hk__cand_t *c, const char *path, int in_default_dir)
{
    struct stat st0;
    char resolved[PATH_MAX];
    int fd = -1;

    c->path = path;
    c->fd = -1;
    c->seen = c->refused = 0;
    c->probe.answered = 0;
    c->reason[0] = '\0';
    hk__file_id_set(&c->id, stat(path, &st0) == 0 ? &st0 : NULL);
    const hk__report_t *prev = hk__loader_report_find(loader, path, &c->id);
    if (prev) {
        c->seen = 1;
        HK__TRACE(HK__TRACE_DECISIONS, "load", "candidate %s: the same file was %s before; "
                  "that verdict stands, nothing is checked again", path,
                  prev->pub.plugin ? "loaded" : "refused");
        return;
    }
    HK__TRACE(HK__TRACE_DECISIONS, "load", "candidate %s", path);

    if (!hk__plugin_name_ok(path)) {
        /* libltdl would read a ".la" file and load whatever it names, and
         * guess extensions for other names: only what we check is opened. */
        snprintf(c->reason, sizeof(c->reason), "not a plugin file name: only \"*.so\" files are "
                 "loaded (never a libtool .la file)");
        hk__refuse(c, HK_STAGE_SCAN, HK_STATUS_LOAD_FAILED);
        return;
    }
    /* Before anything is opened: with elevated privileges, even opening a
     * file the caller names (a device, a FIFO) is the caller's choice. */
    if (getauxval(AT_SECURE) && !in_default_dir
        && (!realpath(path, resolved) || !hk__in_default_dir(loader, resolved))) {
        snprintf(c->reason, sizeof(c->reason), "the process runs with elevated privileges "
                 "(AT_SECURE): only plugins in the default directory are loaded");
        hk__refuse(c, HK_STAGE_SCAN, HK_STATUS_INSECURE);
        return;
    }
    hk_status_t st = hk__trust_open(path, 0, 1, &fd, &c->st, resolved, c->reason,
                                    sizeof(c->reason));
    if (st != HK_STATUS_OK) {
        hk__refuse(c, HK_STAGE_SCAN, st);
        return;
    }
    if (getauxval(AT_SECURE) && !in_default_dir && !hk__in_default_dir(loader, resolved)) {
        /* A link changed between the two resolutions: the walk's is final. */
        snprintf(c->reason, sizeof(c->reason), "the process runs with elevated privileges "
                 "(AT_SECURE): only plugins in the default directory are loaded");
        hk__refuse(c, HK_STAGE_SCAN, HK_STATUS_INSECURE);
        goto fail;
    }
    if (!c->id.valid) {
        hk__file_id_set(&c->id, &c->st); /* created since the stat above */
    } else if (c->id.dev != c->st.st_dev || c->id.ino != c->st.st_ino) {
        snprintf(c->reason, sizeof(c->reason), "the file was replaced while it was checked");
        hk__refuse(c, HK_STAGE_SCAN, HK_STATUS_LOAD_FAILED);
        goto fail;
    }
    st = hk__elf_check(fd, c->st.st_size, c->reason, sizeof(c->reason));
    if (st != HK_STATUS_OK) {
        hk__refuse(c, HK_STAGE_OPEN, st);
        goto fail;
    }
    c->fd = fd;
    return;
fail:
    close(fd);
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

static void hk__plugin_drop(hk_plugin_t *plugin)
{
    if (!plugin)
        return;
    free(plugin->path);
    free(plugin->name);
    free(plugin->version);
    free(plugin);
}

/* A candidate reported before: its earlier outcome, and no new report. */
static hk_status_t hk__cand_seen(hk_loader_t *loader, hk__cand_t *c, const hk__report_t *prev,
                                 hk_plugin_t **out)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    if (prev->pub.plugin) {
        if (out)
            *out = prev->pub.plugin;
        return HK_STATUS_OK;
    }
    hk__loader_set_error(loader, prev->line);
    return prev->pub.status;
}

/* The debug trace's line for a negotiation the host accepted. */
static void trace_negotiated(const hk_loader_t *loader, const char *path,
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

hk_status_t hk__cand_finish(hk_loader_t *loader, hk__cand_t *c, hk_plugin_t **out)
{
    hk_load_stage_t stage = c->stage;
    hk_status_t status = c->status;
    char *reason = c->reason;
    const size_t n = sizeof(c->reason);
    lt_dlhandle module = NULL;
    hk__mapped_t *mapped = NULL;
    hk_plugin_t *plugin = NULL;

    if (out)
        *out = NULL;
    /* Again: two names of one file in one batch are one candidate. */
    hk__report_t *prev = hk__loader_report_find(loader, c->path, &c->id);
    if (prev)
        return hk__cand_seen(loader, c, prev, out);
    if (c->refused)
        goto refuse;

    stage = HK_STAGE_OPEN;
    module = hk__ltdl_open_fd(loader->advise, c->fd, &c->st, c->path, &mapped, reason, n);
    if (!module) {
        status = HK_STATUS_LOAD_FAILED;
        goto refuse;
    }
    c->fd = -1; /* the module's now */

    stage = HK_STAGE_SYMBOL;
    hk_negotiate_fn entry;
    void *sym = hk__ltdl_sym(module, HK_ENTRY_SYMBOL);
    if (!sym) {
        status = HK_STATUS_NOT_FOUND;
        snprintf(reason, n, "missing entry symbol %s", HK_ENTRY_SYMBOL);
        goto refuse;
    }
    /* POSIX guarantees that a data pointer from dlsym converts to a function
     * pointer; copying the bytes avoids ISO C's objection to the cast. */
    memcpy(&entry, &sym, sizeof(entry));

    plugin = calloc(1, sizeof(*plugin));
    if (!plugin) {
        status = HK_STATUS_OUT_OF_MEMORY;
        snprintf(reason, n, "out of memory");
        goto refuse;
    }
    status = hk__negotiate(loader, entry, plugin, &stage, reason, n);
    if (status != HK_STATUS_OK)
        goto refuse;
    trace_negotiated(loader, c->path, plugin);
    if (c->probe.answered && !hk__same_as_probe(c, plugin, reason, n)) {
        stage = HK_STAGE_VALIDATE;
        status = HK_STATUS_INVALID_VALUE;
        goto refuse;
    }
    plugin->loader = loader;
    plugin->module = module;
    plugin->mapped = mapped;
    plugin->dev = c->st.st_dev;
    plugin->ino = c->st.st_ino;
    plugin->path = strdup(c->path);
    if (!plugin->path || hk__loader_plugin_add(loader, plugin) != HK_STATUS_OK) {
        status = HK_STATUS_OUT_OF_MEMORY;
        snprintf(reason, n, "out of memory");
        goto refuse;
    }
    if (!(plugin->flags & HK_PLUGIN_UNLOAD_SAFE))
        hk__ltdl_keep(module);
    hk__loader_report_add(loader, c->path, HK_STAGE_LOADED, HK_STATUS_OK, "", plugin, &c->id);
    if (out)
        *out = plugin;
    return HK_STATUS_OK;

refuse:
    /* Nothing of a refused module was handed out, so closing it is safe. */
    if (module)
        hk__ltdl_close(module, mapped);
    else if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    hk__plugin_drop(plugin);
    hk__loader_report_add(loader, c->path, stage, status, reason, NULL, &c->id);
    return status;
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
    hk__gate_enter(loader);
    hk__cand_check(loader, c, path, 0);
    hk__probe_batch(loader, &c, 1);
    hk_status_t st = hk__cand_finish(loader, c, out);
    hk__gate_leave(loader);
    free(c);
    return st;
}
