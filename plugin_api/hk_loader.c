/* handlekit loader: lifetime, reports, plugin list and accessors.
 * Scanning is in hk_loader_scan.c, one candidate's path in hk_loader_open.c,
 * libltdl in hk_loader_ltdl.c. */
#include "hk__loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char hk__oom[] = "out of memory";

/* The accessors take const loaders but must lock: the mutex is the one
 * member a reader changes. */
static void hk__lock(const hk_loader_t *loader)
{
    pthread_mutex_lock((pthread_mutex_t *)&loader->lock);
}

static void hk__unlock(const hk_loader_t *loader)
{
    pthread_mutex_unlock((pthread_mutex_t *)&loader->lock);
}

hk_status_t hk_loader_create(const hk_loader_options_t *opts, hk_loader_t **out)
{
    hk_loader_options_t o;
    hk_loader_t *loader = NULL;
    hk_status_t st = HK_STATUS_OK;

    if (!out)
        return HK_STATUS_NULL_POINTER;
    *out = NULL;
    memset(&o, 0, sizeof(o));
    if (opts) {
        /* Read as much as both sides know; later fields keep their defaults. */
        if (opts->size < sizeof(uint32_t))
            return HK_STATUS_INVALID_VALUE;
        memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
    }
    uint32_t lo = o.abi_min ? o.abi_min : HK_ABI_VERSION(HK_ABI_MAJOR, 0);
    uint32_t hi = o.abi_max ? o.abi_max : HK_ABI_CURRENT;
    /* The host can only read vtables of the major it was built with, and no
     * minor newer than its headers describe. */
    if (HK_ABI_VERSION_MAJOR(lo) != HK_ABI_MAJOR || HK_ABI_VERSION_MAJOR(hi) != HK_ABI_MAJOR
        || lo > hi || hi > HK_ABI_CURRENT)
        return HK_STATUS_INVALID_VALUE;

    loader = calloc(1, sizeof(*loader));
    if (!loader)
        return HK_STATUS_OUT_OF_MEMORY;
    pthread_mutex_init(&loader->lock, NULL);
    pthread_mutex_init(&loader->open_lock, NULL);
    loader->ignore_env = o.ignore_env;
    loader->log = o.log;
    loader->log_user = o.log_user;
    loader->abi_min = lo;
    loader->abi_max = hi;
    loader->last_error = "";
    if (o.default_dir) {
        loader->default_dir = strdup(o.default_dir);
        if (!loader->default_dir) {
            st = HK_STATUS_OUT_OF_MEMORY;
            goto fail;
        }
    }
    st = hk__ltdl_init(&loader->advise);
    if (st != HK_STATUS_OK)
        goto fail;
    *out = loader;
    return HK_STATUS_OK;

fail:
    pthread_mutex_destroy(&loader->lock);
    pthread_mutex_destroy(&loader->open_lock);
    free(loader->default_dir);
    free(loader);
    return st;
}

static void hk__plugin_free(hk_plugin_t *p)
{
    if ((p->flags & HK_PLUGIN_UNLOAD_SAFE) && p->module) /* NULL: a swap closed it */
        hk__ltdl_close(p->module);
    /* Otherwise the module stays mapped (hk__ltdl_keep made it resident):
     * function pointers from its vtable or tables may still be held by
     * handles or callers outside the loader, and closing the code they
     * point into would turn their next call into a crash. */
    free(p->path);
    free(p->name);
    free(p->version);
    free(p);
}

hk_status_t hk_loader_destroy(hk_loader_t *loader)
{
    if (!loader)
        return HK_STATUS_OK;
    if (hk__swap_busy(loader)) /* a movable handle still calls into a module */
        return HK_STATUS_BUSY;
    hk__lock(loader);
    for (size_t i = 0; i < loader->nplugins; i++) {
        if (atomic_load(&loader->plugins[i]->refs) != 0) {
            loader->last_error = "loader destroy refused: a plugin is still acquired";
            hk__unlock(loader);
            return HK_STATUS_BUSY;
        }
    }
    hk__unlock(loader);

    for (size_t i = 0; i < loader->nplugins; i++)
        hk__plugin_free(loader->plugins[i]);
    for (size_t i = 0; i < loader->nreports; i++) {
        hk__report_t *r = loader->reports[i];
        free((char *)r->pub.path);
        free((char *)r->pub.reason);
        free(r->line);
        free(r);
    }
    hk__select_free(loader);
    hk__swap_free(loader);
    free(loader->plugins);
    free(loader->reports);
    hk__ltdl_exit(&loader->advise);
    free(loader->default_dir);
    pthread_mutex_destroy(&loader->lock);
    pthread_mutex_destroy(&loader->open_lock);
    free(loader);
    return HK_STATUS_OK;
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
}

static int hk__same_candidate(const hk__report_t *r, const char *path, const hk__file_id_t *id)
{
    if (!id->valid || !r->id.valid)
        return !id->valid && !r->id.valid && strcmp(r->pub.path, path) == 0;
    if (r->id.dev != id->dev || r->id.ino != id->ino)
        return 0;
    if (r->pub.plugin)
        return 1; /* already mapped: the same file cannot be loaded twice */
    return r->id.mode == id->mode && r->id.size == id->size
           && r->id.mtime.tv_sec == id->mtime.tv_sec
           && r->id.mtime.tv_nsec == id->mtime.tv_nsec;
}

hk__report_t *hk__loader_report_find(hk_loader_t *loader, const char *path,
                                     const hk__file_id_t *id)
{
    hk__report_t *found = NULL;
    hk__lock(loader);
    /* Newest first: a refused file that was fixed has a newer report. */
    for (size_t i = loader->nreports; i-- > 0;) {
        if (hk__same_candidate(loader->reports[i], path, id)) {
            found = loader->reports[i];
            break;
        }
    }
    hk__unlock(loader);
    return found;
}

void hk__loader_set_error(hk_loader_t *loader, const char *line)
{
    hk__lock(loader);
    loader->last_error = line;
    hk__unlock(loader);
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

    hk__lock(loader);
    if (loader->nreports == loader->capreports) {
        size_t cap = loader->capreports ? 2 * loader->capreports : 16;
        hk__report_t **grown = realloc(loader->reports, cap * sizeof(*grown));
        if (!grown) {
            hk__unlock(loader);
            goto oom;
        }
        loader->reports = grown;
        loader->capreports = cap;
    }
    loader->reports[loader->nreports++] = r;
    if (stage != HK_STAGE_LOADED)
        loader->last_error = r->line;
    hk__unlock(loader);

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
    hk__lock(loader);
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
    hk__unlock(loader);
    return st;
}

size_t hk_loader_report_count(const hk_loader_t *loader)
{
    if (!loader)
        return 0;
    hk__lock(loader);
    size_t n = loader->nreports;
    hk__unlock(loader);
    return n;
}

const hk_load_report_t *hk_loader_report(const hk_loader_t *loader, size_t index)
{
    const hk_load_report_t *r = NULL;
    if (!loader)
        return NULL;
    hk__lock(loader);
    if (index < loader->nreports)
        r = &loader->reports[index]->pub;
    hk__unlock(loader);
    return r;
}

size_t hk_loader_plugin_count(const hk_loader_t *loader)
{
    if (!loader)
        return 0;
    hk__lock(loader);
    size_t n = loader->nplugins;
    hk__unlock(loader);
    return n;
}

hk_plugin_t *hk_loader_plugin(const hk_loader_t *loader, size_t index)
{
    hk_plugin_t *p = NULL;
    if (!loader)
        return NULL;
    hk__lock(loader);
    if (index < loader->nplugins)
        p = loader->plugins[index];
    hk__unlock(loader);
    return p;
}

hk_plugin_t *hk_loader_find(const hk_loader_t *loader, const char *name)
{
    hk_plugin_t *p = NULL;
    if (!loader || !name)
        return NULL;
    hk__lock(loader);
    for (size_t i = 0; i < loader->nplugins; i++) {
        if (strcmp(loader->plugins[i]->name, name) == 0) {
            p = loader->plugins[i];
            break;
        }
    }
    hk__unlock(loader);
    return p;
}

const char *hk_loader_last_error(const hk_loader_t *loader)
{
    if (!loader)
        return "no loader";
    hk__lock(loader);
    const char *e = loader->last_error;
    hk__unlock(loader);
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

const void *hk_plugin_table(const hk_plugin_t *plugin, const char *name)
{
    const void *table = NULL;
    if (!plugin || !name || !plugin->vtable.get_table)
        return NULL;
    if (plugin->vtable.get_table(name, &table) != HK_STATUS_OK)
        return NULL;
    return table;
}

void hk_plugin_acquire(hk_plugin_t *plugin)
{
    if (plugin)
        atomic_fetch_add(&plugin->refs, 1);
}

void hk_plugin_release(hk_plugin_t *plugin)
{
    if (!plugin)
        return;
    /* An unbalanced release must not wrap the count and pin the loader. */
    unsigned n = atomic_load(&plugin->refs);
    while (n > 0 && !atomic_compare_exchange_weak(&plugin->refs, &n, n - 1))
        ;
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
    }
    return "unknown";
}
