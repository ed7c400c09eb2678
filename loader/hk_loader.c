/* handlekit loader: lifetime (create, destroy, fork handlers, the gate), and
 * the host's copies of a plugin's tables.
 * Reports and the plugin list are in hk_loader_report.c, scanning in
 * hk_loader_scan.c, one candidate's path in hk_loader_open.c, libltdl in
 * hk_loader_ltdl.c. */
#include "hk__loader.h"
#include "hk__trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_blas1.h"
#include "hk_cuda.h"
#include "hk_kernels.h"
#include "hk_memory.h"
#include "hk_selfcheck.h"
#include "hk_status_text.h"
#include "hk_trim.h"

/* One copy made by hk_plugin_table, kept for the plugin's life. */
struct hk__table_copy {
    struct hk__table_copy *next;
    char *name;
    alignas(max_align_t) unsigned char data[]; /* the table; starts with its size */
};

/* Live loaders, for the fork handlers (see hk__loader.h). */
static pthread_mutex_t hk__registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static hk_loader_t *hk__registry;
static pthread_once_t hk__atfork_once = PTHREAD_ONCE_INIT;

/* Before fork: every lock a child could need, in the documented order, so
 * that none is held by a thread that will not exist in the child. */
static void hk__fork_prepare(void)
{
    /* The libltdl lock first: a constructor that forks already holds it
     * (hk__ltdl_lock then takes nothing), and every thread must take the
     * locks in that one order or two forking threads could wait on each
     * other. */
    hk__ltdl_lock();
    pthread_mutex_lock(&hk__registry_mutex);
    for (hk_loader_t *l = hk__registry; l; l = l->next_live) {
        pthread_mutex_lock(&l->gate.mutex);
        pthread_mutex_lock(&l->lock);
    }
}

static void hk__fork_parent(void)
{
    for (hk_loader_t *l = hk__registry; l; l = l->next_live) {
        pthread_mutex_unlock(&l->lock);
        pthread_mutex_unlock(&l->gate.mutex);
    }
    pthread_mutex_unlock(&hk__registry_mutex);
    hk__ltdl_unlock();
}

/* In the child only the forking thread exists: a scan that another thread
 * was running will never finish, so its gate is free; waiters of the
 * condition variable do not exist either. */
static void hk__fork_child(void)
{
    for (hk_loader_t *l = hk__registry; l; l = l->next_live) {
        pthread_mutex_unlock(&l->lock);
        l->gate.busy = 0;
        pthread_cond_init(&l->gate.cond, NULL);
        pthread_mutex_unlock(&l->gate.mutex);
    }
    pthread_mutex_unlock(&hk__registry_mutex);
    hk__ltdl_unlock();
}

static void hk__atfork_install(void)
{
    pthread_atfork(hk__fork_prepare, hk__fork_parent, hk__fork_child);
}

void hk__gate_enter(hk_loader_t *loader)
{
    pthread_mutex_lock(&loader->gate.mutex);
    while (loader->gate.busy)
        pthread_cond_wait(&loader->gate.cond, &loader->gate.mutex);
    loader->gate.busy = 1;
    pthread_mutex_unlock(&loader->gate.mutex);
}

void hk__gate_leave(hk_loader_t *loader)
{
    pthread_mutex_lock(&loader->gate.mutex);
    loader->gate.busy = 0;
    pthread_cond_signal(&loader->gate.cond);
    pthread_mutex_unlock(&loader->gate.mutex);
}

hk_status_t hk__loader_hook_add(hk_loader_t *loader, const hk__loader_hook_t *hook)
{
    hk_status_t st = HK_STATUS_OK;
    pthread_mutex_lock(&loader->lock);
    size_t i = 0;
    while (i < loader->nhooks && loader->hooks[i] != hook)
        i++;
    if (i == loader->nhooks && i < HK__LOADER_HOOKS)
        loader->hooks[loader->nhooks++] = hook;
    else if (i == loader->nhooks)
        st = HK_STATUS_OUT_OF_MEMORY;
    pthread_mutex_unlock(&loader->lock);
    return st;
}

/* The hooks registered so far, copied out of the lock: a hook may take
 * locks of its own and set the last error. Returns their number. */
static size_t hk__hooks(hk_loader_t *loader, const hk__loader_hook_t **out)
{
    pthread_mutex_lock(&loader->lock);
    size_t n = loader->nhooks;
    memcpy(out, loader->hooks, n * sizeof(*out));
    pthread_mutex_unlock(&loader->lock);
    return n;
}

/* Reads the caller's options (as much as both sides know; later fields keep
 * their defaults) into *o and checks them; *lo and *hi get the ABI range. */
static hk_status_t hk__options_read(const hk_loader_options_t *opts, hk_loader_options_t *o,
                                    uint32_t *lo, uint32_t *hi)
{
    memset(o, 0, sizeof(*o));
    if (opts) {
        if (opts->size < sizeof(uint32_t))
            return HK_STATUS_INVALID_VALUE;
        memcpy(o, opts, opts->size < sizeof(*o) ? opts->size : sizeof(*o));
    }
    *lo = o->abi_min ? o->abi_min : HK_ABI_VERSION(HK_ABI_MAJOR, 0);
    *hi = o->abi_max ? o->abi_max : HK_ABI_CURRENT;
    /* The host can only read vtables of the major it was built with, and no
     * minor newer than its headers describe. */
    if (HK_ABI_VERSION_MAJOR(*lo) != HK_ABI_MAJOR || HK_ABI_VERSION_MAJOR(*hi) != HK_ABI_MAJOR
        || *lo > *hi || *hi > HK_ABI_CURRENT)
        return HK_STATUS_INVALID_VALUE;
    if (o->isolation != HK_ISOLATION_PROBE && o->isolation != HK_ISOLATION_OFF)
        return HK_STATUS_INVALID_VALUE;
    if (o->verifier != HK_VERIFIER_KEEP && o->verifier != HK_VERIFIER_PER_SWAP)
        return HK_STATUS_INVALID_VALUE;
    return HK_STATUS_OK;
}

hk_status_t hk_loader_create(const hk_loader_options_t *opts, hk_loader_t **out)
{
    hk_loader_options_t o;
    hk_loader_t *loader = NULL;
    uint32_t lo, hi;

    if (!out)
        return HK_STATUS_NULL_POINTER;
    *out = NULL;
    hk_status_t st = hk__options_read(opts, &o, &lo, &hi);
    if (st != HK_STATUS_OK)
        return st;

    pthread_once(&hk__atfork_once, hk__atfork_install);
    loader = calloc(1, sizeof(*loader));
    if (!loader)
        return HK_STATUS_OUT_OF_MEMORY;
    pthread_mutex_init(&loader->lock, NULL);
    pthread_mutex_init(&loader->gate.mutex, NULL);
    pthread_cond_init(&loader->gate.cond, NULL);
    loader->probe_fd = -1;
    loader->probe_timeout_ms = o.probe_timeout_ms ? o.probe_timeout_ms : HK_PROBE_TIMEOUT_MS;
    loader->isolation = o.isolation;
    loader->in_place = o.load_in_place != 0;
    loader->verifier_mode = o.verifier;
    loader->deadline_ns = o.deadline_ms == HK_DEADLINE_NONE ? 0
                          : (uint64_t)(o.deadline_ms ? o.deadline_ms : HK_STEP_DEADLINE_MS) * 1000000u;
    if (o.probe_path) {
        loader->probe_path = strdup(o.probe_path);
        if (!loader->probe_path) {
            st = HK_STATUS_OUT_OF_MEMORY;
            goto fail;
        }
    }
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
    pthread_mutex_lock(&hk__registry_mutex);
    loader->next_live = hk__registry;
    hk__registry = loader;
    pthread_mutex_unlock(&hk__registry_mutex);
    *out = loader;
    return HK_STATUS_OK;

fail:
    pthread_mutex_destroy(&loader->lock);
    pthread_mutex_destroy(&loader->gate.mutex);
    pthread_cond_destroy(&loader->gate.cond);
    free(loader->default_dir);
    free(loader->probe_path);
    free(loader);
    return st;
}

/* One HK_LOG_WARN line, prefix and text, through the loader's callback. */
static void hk__log_line(const hk_loader_t *loader, const char *prefix, const char *text)
{
    char line[640];
    snprintf(line, sizeof(line), "%s%s", prefix, text);
    loader->log(loader->log_user, HK_LOG_WARN, line);
}

void hk__stuck_line(const hk_plugin_t *plugin, const char *what, uint64_t deadline_ns, char *why,
                    size_t n)
{
    snprintf(why, n, "%s %s %s did not return within %llu ms (the deadline); a thread is still "
             "in it, so its module stays open for the rest of the process", plugin->name,
             plugin->version, what, (unsigned long long)((deadline_ns + 999999u) / 1000000u));
}

void hk__plugin_leak(hk_plugin_t *plugin)
{
    /* Resident, so that neither a close nor libltdl's exit with the last
     * loader unmaps the code the stuck thread runs. */
    if (!atomic_exchange(&plugin->stuck, 1) && plugin->module)
        hk__ltdl_keep(plugin->module);
}

hk_status_t hk__plugin_trim(hk_plugin_t *plugin, uint64_t deadline_ns, char *why, size_t n)
{
    hk_trim_v1_t t; /* the loader's clamped copy: a short or broken table has no trim */
    if (atomic_load(&plugin->trim_failed)) /* it crashed, exited or hung in a probe: */
        return HK_STATUS_OK;                 /* never called, and the module stays */
    if (hk_plugin_get_table(plugin, HK_TABLE_TRIM_V1, &t, sizeof t) != HK_STATUS_OK || !t.trim)
        return HK_STATUS_OK;
    char line[512];
    hk_status_t st = hk__call_trim(deadline_ns, t.trim, plugin->vtable.last_error, line,
                                   sizeof(line));
    if (st == HK_STATUS_TIMED_OUT) {
        hk__plugin_leak(plugin);
        hk__stuck_line(plugin, "hk.trim/1 (before its module is closed)", deadline_ns, why, n);
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "%s", why);
        return st;
    }
    if (st == HK_STATUS_OK)
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "%s %s gave back what it keeps between handles "
                  "(hk.trim/1) before its module is closed", plugin->name, plugin->version);
    else
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "%s %s: hk.trim/1 before the close: %s: %s; its "
                  "unload tries again", plugin->name, plugin->version, hk_status_name(st),
                  line);
    return HK_STATUS_OK;
}

static void hk__plugin_free(hk_plugin_t *p)
{
    while (p->tables) {
        struct hk__table_copy *next = p->tables->next;
        free(p->tables->name);
        free(p->tables);
        p->tables = next;
    }
    /* module NULL: a swap closed it; stuck: a call into it was given up, and
     * its code may still run (hk__plugin_leak made it resident); trim_failed:
     * its trim crashed, exited or hung in a probe, and may in its unload. */
    if ((p->flags & HK_PLUGIN_UNLOAD_SAFE) && p->module && !atomic_load(&p->stuck)
        && !atomic_load(&p->trim_failed)) {
        char why[512];
        if (hk__plugin_trim(p, p->loader->deadline_ns, why, sizeof(why)) == HK_STATUS_OK)
            hk__ltdl_close(p->module, p->mapped);
        else if (p->loader->log)
            hk__log_line(p->loader, "hk_loader_destroy: ", why);
    }
    /* Otherwise the module stays mapped (hk__ltdl_keep made it resident):
     * function pointers from its vtable or tables may still be held by
     * handles or callers outside the loader, and closing the code they
     * point into would turn their next call into a crash; and a plugin whose
     * trim failed in a probe may fail as badly in its unload. */
    /* The snapshot goes with the plugin; a module kept mapped keeps its
     * pages through the mapping. */
    if (p->snap_fd >= 0)
        close(p->snap_fd);
    free(atomic_load(&p->failed_why));
    free(p->path);
    free(p->name);
    free(p->version);
    free(p);
}

/* The destroy's trace line: what it closes and what stays mapped. */
__attribute__((cold, noinline)) static void hk__trace_destroy(const hk_loader_t *loader)
{
    size_t closed = 0, kept = 0;
    for (size_t i = 0; i < loader->nplugins; i++) {
        const hk_plugin_t *p = loader->plugins[i];
        if (!p->module)
            continue; /* a swap closed it already */
        if (p->flags & HK_PLUGIN_UNLOAD_SAFE)
            closed++;
        else
            kept++;
    }
    HK__TRACE(HK__TRACE_DECISIONS, "destroy", "loader destroyed: %zu module%s closed "
              "(unload-safe), %zu kept mapped for the process (not unload-safe)", closed,
              closed == 1 ? "" : "s", kept);
}

hk_status_t hk_loader_destroy(hk_loader_t *loader)
{
    if (!loader)
        return HK_STATUS_OK;
    const hk__loader_hook_t *hooks[HK__LOADER_HOOKS];
    size_t nhooks = hk__hooks(loader, hooks);
    for (size_t i = 0; i < nhooks; i++) {
        if (hooks[i]->busy && hooks[i]->busy(loader)) { /* a movable handle still lives */
            HK__TRACE(HK__TRACE_DECISIONS, "destroy", "refused: BUSY: %s",
                      hk_loader_last_error(loader));
            return HK_STATUS_BUSY;
        }
    }
    hk__loader_lock(loader);
    for (size_t i = 0; i < loader->nplugins; i++) {
        if (atomic_load(&loader->plugins[i]->refs) != 0) {
            loader->last_error = "loader destroy refused: a plugin is still acquired";
            HK__TRACE(HK__TRACE_DECISIONS, "destroy", "refused: BUSY: %s %s (%s) is still "
                      "acquired (%u reference%s)", loader->plugins[i]->name,
                      loader->plugins[i]->version, loader->plugins[i]->path,
                      atomic_load(&loader->plugins[i]->refs),
                      atomic_load(&loader->plugins[i]->refs) == 1 ? "" : "s");
            hk__loader_unlock(loader);
            return HK_STATUS_BUSY;
        }
    }
    hk__loader_unlock(loader);

    pthread_mutex_lock(&hk__registry_mutex);
    for (hk_loader_t **pp = &hk__registry; *pp; pp = &(*pp)->next_live) {
        if (*pp == loader) {
            *pp = loader->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&hk__registry_mutex);

    if (hk__tracing(HK__TRACE_DECISIONS))
        hk__trace_destroy(loader);
    for (size_t i = 0; i < loader->nplugins; i++)
        hk__plugin_free(loader->plugins[i]);
    for (size_t i = 0; i < loader->nreports; i++) {
        hk__report_t *r = loader->reports[i];
        free((char *)r->pub.path);
        free((char *)r->pub.reason);
        free(r->line);
        free(r);
    }
    for (size_t i = 0; i < nhooks; i++)
        if (hooks[i]->fini)
            hooks[i]->fini(loader);
    hk__loader_kept_free(loader);
    free(loader->plugins);
    free(loader->reports);
    hk__ltdl_exit(&loader->advise);
    if (loader->probe_fd >= 0)
        close(loader->probe_fd);
    free(loader->probe_path);
    free(loader->probe_error);
    free(loader->default_dir);
    pthread_mutex_destroy(&loader->lock);
    pthread_mutex_destroy(&loader->gate.mutex);
    pthread_cond_destroy(&loader->gate.cond);
    free(loader);
    return HK_STATUS_OK;
}


/* ---- tables ---- */

/* Tables whose layout the loader knows, from their headers' slot lists: the
 * end of each slot and the ABI minor that added it. A plugin that negotiated
 * minor m is read up to the end of the last slot of minor m or older. */
typedef struct hk__slot_end {
    size_t end;
    uint32_t minor;
} hk__slot_end_t;

/* The end of slot NAME of table type T, and the minor that added it. */
#define HK__END(T, name, minor) {offsetof(T, name) + sizeof(((T *)0)->name), minor},
#define HK__BLAS1_END(name, minor, params, args) HK__END(hk_blas1_v1_t, name, minor)
#define HK__MEMORY_END(name, minor, params, args) HK__END(hk_memory_v1_t, name, minor)
#define HK__KERNELS_END(name, minor, params, args) HK__END(hk_kernels_v1_t, name, minor)
#define HK__CUDA_END(name, minor, params, args) HK__END(hk_cuda_v1_t, name, minor)
#define HK__SELFCHECK_END(name, minor, params, args) HK__END(hk_selfcheck_v1_t, name, minor)
static const hk__slot_end_t hk__blas1_ends[] = {HK_BLAS1_V1_SLOTS(HK__BLAS1_END)};
static const hk__slot_end_t hk__memory_ends[] = {HK_MEMORY_V1_SLOTS(HK__MEMORY_END)};
static const hk__slot_end_t hk__kernels_ends[] = {HK_KERNELS_V1_SLOTS(HK__KERNELS_END)};
static const hk__slot_end_t hk__cuda_ends[] = {HK_CUDA_V1_SLOTS(HK__CUDA_END)};
static const hk__slot_end_t hk__selfcheck_ends[] = {HK_SELFCHECK_V1_SLOTS(HK__SELFCHECK_END)};
#define HK__TRIM_END(name, minor, params, args) HK__END(hk_trim_v1_t, name, minor)
static const hk__slot_end_t hk__trim_ends[] = {HK_TRIM_V1_SLOTS(HK__TRIM_END)};

#define HK__KNOWN(NAME, T, ENDS) {NAME, sizeof(T), ENDS, sizeof ENDS / sizeof ENDS[0]}
static const struct {
    const char *name;
    size_t sizeof_now; /* sizeof the struct in these headers */
    const hk__slot_end_t *slots;
    size_t nslots;
} hk__known_tables[] = {
    HK__KNOWN(HK_TABLE_BLAS1_V1, hk_blas1_v1_t, hk__blas1_ends),
    HK__KNOWN(HK_TABLE_MEMORY_V1, hk_memory_v1_t, hk__memory_ends),
    HK__KNOWN(HK_TABLE_KERNELS_V1, hk_kernels_v1_t, hk__kernels_ends),
    HK__KNOWN(HK_TABLE_CUDA_V1, hk_cuda_v1_t, hk__cuda_ends),
    HK__KNOWN(HK_TABLE_SELFCHECK_V1, hk_selfcheck_v1_t, hk__selfcheck_ends),
    HK__KNOWN(HK_TABLE_TRIM_V1, hk_trim_v1_t, hk__trim_ends),
};

/* Index into hk__known_tables, or -1 for a name the loader does not know. */
static int hk__known_table(const char *name)
{
    for (size_t i = 0; i < sizeof hk__known_tables / sizeof hk__known_tables[0]; i++)
        if (strcmp(hk__known_tables[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* The bytes of known table k that ABI minor `minor` defines. */
static size_t hk__known_end(int k, uint32_t minor)
{
    size_t end = sizeof(size_t);
    for (size_t i = 0; i < hk__known_tables[k].nslots; i++) {
        const hk__slot_end_t *s = &hk__known_tables[k].slots[i];
        if (s->minor <= minor && s->end > end)
            end = s->end;
    }
    return end;
}

/* Asks the plugin for a table and checks its size field. On success *raw is
 * the plugin's table and *take the bytes a host may take from it (at most
 * the size field, and for a known table what the negotiated minor defines). */
static hk_status_t hk__table_lookup(const hk_plugin_t *plugin, const char *name,
                                    const void **raw, size_t *take)
{
    hk_loader_t *loader = plugin->loader;
    if (!plugin->vtable.get_table) {
        hk__loader_set_error(loader, "get_table: the plugin's vtable has no get_table slot");
        return HK_STATUS_NOT_SUPPORTED;
    }
    *raw = NULL;
    hk_status_t st = plugin->vtable.get_table(name, raw);
    if (st != HK_STATUS_OK) {
        /* NOT_FOUND is an answer, not a failure of the loader: a host probing
         * for optional tables must not bury a real error under it. */
        if (st != HK_STATUS_NOT_FOUND)
            hk__loader_set_error(loader, "get_table: the plugin's get_table failed");
        return st;
    }
    if (!*raw) {
        hk__loader_set_error(loader, "get_table: the plugin answered OK with a NULL table");
        return HK_STATUS_INVALID_VALUE;
    }
    size_t have;
    memcpy(&have, *raw, sizeof have);
    if (have < sizeof(size_t) || have > HK_TABLE_SIZE_MAX) {
        hk__loader_set_error(loader, have < sizeof(size_t)
                                         ? "get_table: the table's size field is below sizeof(size_t)"
                                         : "get_table: the table's size field is above "
                                           "HK_TABLE_SIZE_MAX (64 KiB): a corrupt table");
        return HK_STATUS_INVALID_VALUE;
    }
    int k = hk__known_table(name);
    if (k >= 0) {
        size_t end = hk__known_end(k, HK_ABI_VERSION_MINOR(plugin->abi));
        if (have > end)
            have = end;
    }
    *take = have;
    return HK_STATUS_OK;
}

hk_status_t hk_plugin_get_table(const hk_plugin_t *plugin, const char *name, void *table,
                                size_t size)
{
    if (!plugin || !name || !table) {
        if (plugin)
            hk__loader_set_error(plugin->loader, "hk_plugin_get_table: name or table is NULL");
        return HK_STATUS_NULL_POINTER;
    }
    if (size < sizeof(size_t)) {
        hk__loader_set_error(plugin->loader,
                             "hk_plugin_get_table: size is below sizeof(size_t)");
        return HK_STATUS_INVALID_VALUE;
    }
    memset(table, 0, size);
    const void *raw;
    size_t take;
    hk_status_t st = hk__table_lookup(plugin, name, &raw, &take);
    if (st != HK_STATUS_OK)
        return st;
    if (take > size)
        take = size;
    memcpy(table, raw, take);
    memcpy(table, &take, sizeof take);
    return HK_STATUS_OK;
}

const void *hk_plugin_table(const hk_plugin_t *plugin, const char *name)
{
    if (!plugin || !name)
        return NULL;
    hk_plugin_t *p = (hk_plugin_t *)plugin; /* the cache is not part of its value */
    const void *found = NULL;
    hk__loader_lock(p->loader);
    for (struct hk__table_copy *c = p->tables; c && !found; c = c->next)
        if (strcmp(c->name, name) == 0)
            found = c->data;
    hk__loader_unlock(p->loader);
    if (found)
        return found;

    const void *raw;
    size_t take;
    if (hk__table_lookup(plugin, name, &raw, &take) != HK_STATUS_OK)
        return NULL;
    int k = hk__known_table(name);
    size_t room = k >= 0 && hk__known_tables[k].sizeof_now > take ? hk__known_tables[k].sizeof_now
                                                                   : take;
    struct hk__table_copy *c = calloc(1, sizeof *c + room);
    char *dup = strdup(name);
    if (!c || !dup) {
        free(c);
        free(dup);
        hk__loader_set_error(p->loader, "hk_plugin_table: out of memory");
        return NULL;
    }
    c->name = dup;
    memcpy(c->data, raw, take);
    memcpy(c->data, &take, sizeof take);

    hk__loader_lock(p->loader);
    for (struct hk__table_copy *o = p->tables; o && !found; o = o->next)
        if (strcmp(o->name, name) == 0)
            found = o->data; /* another thread made it meanwhile: keep one */
    if (!found) {
        c->next = p->tables;
        p->tables = c;
        found = c->data;
        c = NULL;
    }
    hk__loader_unlock(p->loader);
    if (c) {
        free(c->name);
        free(c);
    }
    return found;
}

int hk__plugin_snap_dup(const hk_plugin_t *p)
{
    if (!p->from_snap) {
        errno = EINVAL;
        return -1;
    }
    if (p->mapped)
        return hk__ltdl_mapped_dup(p->mapped);
    return fcntl(p->snap_fd, F_DUPFD_CLOEXEC, 0);
}

hk_status_t hk_plugin_last_error_copy(const hk_plugin_t *plugin, const hk_handle_t *handle,
                                      char *buf, size_t len, size_t *needed)
{
    if (needed)
        *needed = 0;
    if (!plugin || (!buf && len > 0))
        return HK_STATUS_NULL_POINTER;
    if (plugin->vtable.last_error_copy)
        return plugin->vtable.last_error_copy(handle, buf, len, needed);
    const char *msg = plugin->vtable.last_error ? plugin->vtable.last_error(handle) : "";
    if (!msg)
        msg = "";
    size_t n = strlen(msg);
    if (len > 0) {
        size_t k = n < len - 1 ? n : len - 1;
        memcpy(buf, msg, k);
        buf[k] = '\0';
    }
    if (needed)
        *needed = n + 1;
    return HK_STATUS_OK;
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
