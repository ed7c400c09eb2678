/* handlekit loader: reports, the list of loaded plugins, the last error, and
 * the accessors of all three. Every candidate's verdict passes through
 * hk__loader_report_add; nothing here calls into a plugin. */
#include "hk__loader.h"
#include "hk__trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_status_text.h"

static const char hk__oom[] = "out of memory";

/* The accessors take const loaders but must lock: the mutex is the one
 * member a reader changes. */
void hk__loader_lock(const hk_loader_t *loader)
{
    pthread_mutex_lock((pthread_mutex_t *)&loader->lock);
}

void hk__loader_unlock(const hk_loader_t *loader)
{
    pthread_mutex_unlock((pthread_mutex_t *)&loader->lock);
}

void hk__file_id_set(hk__file_id_t *id, const struct stat *st)
{
    memset(id, 0, sizeof(*id));
    if (!st)
        return;
    id->valid = 1;
    id->dev = st->st_dev;
    id->ino = st->st_ino;
    id->mode = st->st_mode;
    id->size = st->st_size;
    id->mtime = st->st_mtim;
    id->ctime = st->st_ctim;
}

static int hk__same_candidate(const hk__report_t *r, const char *path, const hk__file_id_t *id)
{
    if (!id->valid || !r->id.valid)
        return !id->valid && !r->id.valid && strcmp(r->pub.path, path) == 0;
    if (r->id.dev != id->dev || r->id.ino != id->ino)
        return 0;
    if (r->pub.plugin && !r->pub.plugin->from_snap)
        return 1; /* mapped in place: the same file cannot be loaded twice */
    /* A refused file, or a loaded snapshot's: once the file is written it
     * holds another build, which a scan must see. */
    return r->id.mode == id->mode && r->id.size == id->size
           && r->id.mtime.tv_sec == id->mtime.tv_sec
           && r->id.mtime.tv_nsec == id->mtime.tv_nsec
           && r->id.ctime.tv_sec == id->ctime.tv_sec
           && r->id.ctime.tv_nsec == id->ctime.tv_nsec;
}

hk__report_t *hk__loader_report_find(hk_loader_t *loader, const char *path,
                                     const hk__file_id_t *id)
{
    hk__report_t *found = NULL;
    hk__loader_lock(loader);
    /* Newest first: a refused file that was fixed has a newer report. */
    for (size_t i = loader->nreports; i-- > 0;) {
        if (hk__same_candidate(loader->reports[i], path, id)) {
            found = loader->reports[i];
            break;
        }
    }
    hk__loader_unlock(loader);
    return found;
}

void hk__loader_set_error(hk_loader_t *loader, const char *line)
{
    hk__loader_lock(loader);
    loader->last_error = line;
    hk__loader_unlock(loader);
}

/* A line kept for the loader's lifetime (hk__loader_keep_error). */
struct hk__kept {
    struct hk__kept *next;
    char line[];
};

const char *hk__loader_keep_error(hk_loader_t *loader, const char *line, const char *fallback)
{
    hk__loader_lock(loader);
    struct hk__kept *k = loader->kept;
    while (k && strcmp(k->line, line) != 0)
        k = k->next;
    if (!k) {
        size_t n = strlen(line) + 1;
        k = malloc(sizeof(*k) + n);
        if (k) {
            memcpy(k->line, line, n);
            k->next = loader->kept;
            loader->kept = k;
        }
    }
    const char *kept = k ? k->line : fallback;
    loader->last_error = kept;
    hk__loader_unlock(loader);
    return kept;
}

void hk__loader_kept_free(hk_loader_t *loader)
{
    while (loader->kept) {
        struct hk__kept *k = loader->kept;
        loader->kept = k->next;
        free(k);
    }
}

/* One trace line per report: every candidate's verdict passes here. */
__attribute__((cold, noinline)) static void hk__trace_report(const hk__report_t *r)
{
    const hk_plugin_t *p = r->pub.plugin;
    if (r->pub.stage == HK_STAGE_LOADED && p)
        HK__TRACE(HK__TRACE_DECISIONS, "load", "loaded %s: %s %s, ABI %u.%u, flags 0x%x",
                  r->pub.path, p->name, p->version, (unsigned)HK_ABI_VERSION_MAJOR(p->abi),
                  (unsigned)HK_ABI_VERSION_MINOR(p->abi), (unsigned)p->flags);
    else
        HK__TRACE(HK__TRACE_DECISIONS, "load", "refused %s at stage %s: %s: %s", r->pub.path,
                  hk_load_stage_name(r->pub.stage), hk_status_name(r->pub.status),
                  r->pub.reason);
}

hk__report_t *hk__loader_report_add(hk_loader_t *loader, const char *path,
                                    hk_load_stage_t stage, hk_status_t status,
                                    const char *reason, hk_plugin_t *plugin,
                                    const hk__file_id_t *id)
{
    hk__report_t *r = calloc(1, sizeof(*r));
    if (!r)
        goto oom;
    r->pub.path = strdup(path);
    r->pub.reason = strdup(reason);
    r->pub.stage = stage;
    r->pub.status = status;
    r->pub.plugin = plugin;
    if (id)
        r->id = *id;
    const char *stage_name = hk_load_stage_name(stage);
    size_t n = strlen(path) + strlen(stage_name) + strlen(reason) + 8;
    r->line = malloc(n);
    if (!r->pub.path || !r->pub.reason || !r->line)
        goto oom;
    if (stage == HK_STAGE_LOADED)
        snprintf(r->line, n, "%s: loaded", path);
    else
        snprintf(r->line, n, "%s: %s: %s", path, stage_name, reason);

    hk__loader_lock(loader);
    if (loader->nreports == loader->capreports) {
        size_t cap = loader->capreports ? 2 * loader->capreports : 16;
        hk__report_t **grown = realloc(loader->reports, cap * sizeof(*grown));
        if (!grown) {
            hk__loader_unlock(loader);
            goto oom;
        }
        loader->reports = grown;
        loader->capreports = cap;
    }
    loader->reports[loader->nreports++] = r;
    if (stage != HK_STAGE_LOADED)
        loader->last_error = r->line;
    hk__loader_unlock(loader);

    if (hk__tracing(HK__TRACE_DECISIONS))
        hk__trace_report(r);
    /* Outside the data lock so that the callback may read reports. */
    if (stage != HK_STAGE_LOADED && loader->log)
        loader->log(loader->log_user, HK_LOG_WARN, r->line);
    return r;

oom:
    if (r) {
        free((char *)r->pub.path);
        free((char *)r->pub.reason);
        free(r->line);
        free(r);
    }
    hk__loader_set_error(loader, hk__oom);
    return NULL;
}

hk_status_t hk__loader_plugin_add(hk_loader_t *loader, hk_plugin_t *plugin)
{
    hk_status_t st = HK_STATUS_OK;
    hk__loader_lock(loader);
    if (loader->nplugins == loader->capplugins) {
        size_t cap = loader->capplugins ? 2 * loader->capplugins : 8;
        hk_plugin_t **grown = realloc(loader->plugins, cap * sizeof(*grown));
        if (!grown) {
            st = HK_STATUS_OUT_OF_MEMORY;
            goto out;
        }
        loader->plugins = grown;
        loader->capplugins = cap;
    }
    loader->plugins[loader->nplugins++] = plugin;
out:
    hk__loader_unlock(loader);
    return st;
}

size_t hk_loader_report_count(const hk_loader_t *loader)
{
    if (!loader)
        return 0;
    hk__loader_lock(loader);
    size_t n = loader->nreports;
    hk__loader_unlock(loader);
    return n;
}

const hk_load_report_t *hk_loader_report(const hk_loader_t *loader, size_t index)
{
    const hk_load_report_t *r = NULL;
    if (!loader)
        return NULL;
    hk__loader_lock(loader);
    if (index < loader->nreports)
        r = &loader->reports[index]->pub;
    hk__loader_unlock(loader);
    return r;
}

size_t hk_loader_plugin_count(const hk_loader_t *loader)
{
    if (!loader)
        return 0;
    hk__loader_lock(loader);
    size_t n = loader->nplugins;
    hk__loader_unlock(loader);
    return n;
}

hk_plugin_t *hk_loader_plugin(const hk_loader_t *loader, size_t index)
{
    hk_plugin_t *p = NULL;
    if (!loader)
        return NULL;
    hk__loader_lock(loader);
    if (index < loader->nplugins)
        p = loader->plugins[index];
    hk__loader_unlock(loader);
    return p;
}

hk_plugin_t *hk_loader_find(const hk_loader_t *loader, const char *name)
{
    hk_plugin_t *p = NULL;
    size_t same = 0;
    if (!loader || !name)
        return NULL;
    hk__loader_lock(loader);
    for (size_t i = 0; i < loader->nplugins; i++) {
        if (strcmp(loader->plugins[i]->name, name) == 0) {
            same++;
            if (!p)
                p = loader->plugins[i];
        }
    }
    hk__loader_unlock(loader);
    if (p)
        HK__TRACE(HK__TRACE_DECISIONS, "find", "\"%s\": %s %s (%s), the first loaded of %zu "
                  "plugin%s of that name (hk_loader_find takes no version into account)", name,
                  p->name, p->version, p->path, same, same == 1 ? "" : "s");
    else
        HK__TRACE(HK__TRACE_DECISIONS, "find", "\"%s\": no plugin of that name is loaded", name);
    return p;
}

const char *hk_loader_last_error(const hk_loader_t *loader)
{
    if (!loader)
        return "no loader";
    hk__loader_lock(loader);
    const char *e = loader->last_error;
    hk__loader_unlock(loader);
    return e;
}

const char *hk_plugin_name(const hk_plugin_t *plugin)
{
    return plugin ? plugin->name : NULL;
}

const char *hk_plugin_version(const hk_plugin_t *plugin)
{
    return plugin ? plugin->version : NULL;
}

const char *hk_plugin_path(const hk_plugin_t *plugin)
{
    return plugin ? plugin->path : NULL;
}

uint32_t hk_plugin_abi(const hk_plugin_t *plugin)
{
    return plugin ? plugin->abi : 0;
}

uint32_t hk_plugin_flags(const hk_plugin_t *plugin)
{
    return plugin ? plugin->flags : 0;
}

const hk_vtable_t *hk_plugin_vtable(const hk_plugin_t *plugin)
{
    return plugin ? &plugin->vtable : NULL;
}

const char *hk_load_stage_name(hk_load_stage_t stage)
{
    switch (stage) {
    case HK_STAGE_SCAN: return "scan";
    case HK_STAGE_OPEN: return "open";
    case HK_STAGE_SYMBOL: return "symbol";
    case HK_STAGE_NEGOTIATE: return "negotiate";
    case HK_STAGE_VALIDATE: return "validate";
    case HK_STAGE_LOADED: return "loaded";
    case HK_STAGE_PROBE: return "probe";
    }
    return "unknown";
}
