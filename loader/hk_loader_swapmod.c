/* handlekit swap: what a swap does to modules.
 *   - closing a module nothing can reach any more, and checking that it
 *     left the process;
 *   - opening the file of a closed plugin again when it is asked for, through
 *     admission (hk_loader_open.c), as a first load would. */
#include "hk__swap.h"
#include "hk__trace.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "hk_status_text.h"

/* ---- module records ---- */

hk__swap_module_t *hk__swap_module(struct hk__swap *sw, hk_plugin_t *plugin)
{
    hk__swap_module_t *found = NULL;
    pthread_mutex_lock(&sw->list_lock);
    for (size_t i = 0; i < sw->nmodules && !found; i++)
        if (sw->modules[i]->plugin == plugin)
            found = sw->modules[i];
    if (found)
        goto out;
    if (sw->nmodules == sw->capmodules) {
        size_t cap = sw->capmodules ? 2 * sw->capmodules : 8;
        hk__swap_module_t **grown = realloc(sw->modules, cap * sizeof(*grown));
        if (!grown)
            goto out;
        sw->modules = grown;
        sw->capmodules = cap;
    }
    found = calloc(1, sizeof(*found));
    if (!found)
        goto out;
    found->plugin = plugin;
    atomic_init(&found->state, HK_MODULE_OPEN);
    sw->modules[sw->nmodules++] = found;
out:
    pthread_mutex_unlock(&sw->list_lock);
    return found;
}

/* ---- is a file still mapped? ---- */

/* 1 when /proc/self/maps lists the file (by device and inode, or by its
 * canonical path), 0 when not, -1 when the maps cannot be read. */
static int hk__mapped(dev_t dev, ino_t ino, const char *canon)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[PATH_MAX + 128];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned maj, min;
        unsigned long long inode;
        int path_at = 0;
        if (sscanf(line, "%*s %*s %*s %x:%x %llu %n", &maj, &min, &inode, &path_at) < 3)
            continue;
        if (inode == (unsigned long long)ino && maj == major(dev) && min == minor(dev))
            found = 1;
        if (canon && path_at > 0) {
            char *path = line + path_at;
            path[strcspn(path, "\n")] = '\0';
            if (strcmp(path, canon) == 0)
                found = 1;
        }
    }
    fclose(f);
    return found;
}

/* ---- close ---- */

/* Nothing reaches plugin when no binding of any movable handle names it,
 * nobody acquired it, and it may be unloaded at all (not once its trim
 * failed in a probe). Caller holds list_lock. */
static int hk__unreachable(struct hk__swap *sw, hk_plugin_t *plugin)
{
    if (!(plugin->flags & HK_PLUGIN_UNLOAD_SAFE) || !plugin->module || atomic_load(&plugin->stuck)
        || atomic_load(&plugin->trim_failed))
        return 0;
    if (atomic_load(&plugin->refs) != 0)
        return 0;
    /* A call in flight in plugin runs on a binding that names it: bindings
     * are emptied only after they drained. */
    for (size_t i = 0; i < sw->nhandles; i++)
        for (int s = 0; s < 2; s++)
            if (sw->handles[i]->slot[s].plugin == plugin)
                return 0;
    return 1;
}

hk_status_t hk__swap_try_close(hk_loader_t *loader, struct hk__swap *sw, hk_plugin_t *plugin,
                               uint64_t deadline_ns, char *why, size_t n)
{
    hk__swap_module_t *mod = hk__swap_module(sw, plugin);
    if (!mod)
        return HK_STATUS_OK;
    pthread_mutex_lock(&sw->list_lock);
    int closable = hk__unreachable(sw, plugin);
    pthread_mutex_unlock(&sw->list_lock);
    if (!closable) {
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "module of %s %s kept open: %s", plugin->name,
                  plugin->version, !(plugin->flags & HK_PLUGIN_UNLOAD_SAFE)
                  ? "the plugin is not unload-safe" : !plugin->module ? "it is closed already"
                  : atomic_load(&plugin->trim_failed) ? "its hk.trim/1 failed in a probe process"
                  : atomic_load(&plugin->stuck) ? "a call into it did not return by its deadline"
                  : atomic_load(&plugin->refs) ? "the plugin is acquired (hk_plugin_acquire)"
                  : "a movable handle is still bound to it");
        return HK_STATUS_OK;
    }

    /* A snapshot shows in the maps under its memfd name, never the path. */
    char canon[PATH_MAX];
    const char *cpath = !plugin->from_snap && realpath(plugin->path, canon) ? canon : NULL;
    hk_status_t st = hk__plugin_trim(plugin, deadline_ns, why, n);
    if (st != HK_STATUS_OK)
        return st; /* stuck in its trim: left open */

    /* The snapshot outlives the module, for a reopen: a descriptor of its
     * own from now on (the mapped record's goes with the module). */
    int snap = plugin->from_snap ? hk__plugin_snap_dup(plugin) : -1;
    /* The vtable copy is cleared first: a host that ignores the acquire rule
     * then finds NULL slots rather than addresses in an unmapped file. */
    hk__gate_enter(loader);
    lt_dlhandle module = plugin->module;
    hk__mapped_t *mapped = plugin->mapped;
    plugin->mapped = NULL;
    plugin->snap_fd = snap;
    size_t vsize = plugin->vtable.size;
    memset(&plugin->vtable, 0, sizeof(plugin->vtable));
    plugin->vtable.size = vsize;
    plugin->module = NULL;
    hk__gate_leave(loader);

    dev_t dev;
    ino_t ino;
    hk__ltdl_mapped_id(mapped, &dev, &ino);
    hk__ext_drop(sw, plugin); /* no binding runs on it: copies of a closing module */
    hk__ltdl_close(module, mapped);
    atomic_fetch_add(&mod->closes, 1);
    if (hk__mapped(dev, ino, cpath) == 0) {
        atomic_store(&mod->state, HK_MODULE_CLOSED);
        atomic_fetch_add(&sw->closed, 1);
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "closed the module of %s %s (%s): it left the "
                  "process", plugin->name, plugin->version, plugin->path);
    } else {
        atomic_store(&mod->state, HK_MODULE_STILL_MAPPED);
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "closed the module of %s %s (%s), but it is "
                  "still mapped (something else in the process holds it)", plugin->name,
                  plugin->version, plugin->path);
    }
    return HK_STATUS_OK;
}

/* ---- reopen ---- */

/* Opens plugin's file again through admission, the path of a first load;
 * the file must be the one that was loaded and answer as it did then.
 * Caller holds the gate. */
static hk_status_t hk__reopen(hk_loader_t *loader, hk_plugin_t *plugin, char *why, size_t n)
{
    hk__cand_t *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    hk__cand_init(c, plugin->path, 0, plugin);
    hk__admit(loader, &c, 1);
    hk_status_t st = c->result;
    if (st != HK_STATUS_OK)
        snprintf(why, n, "cannot open %s again: %s", plugin->path, c->reason);
    free(c);
    return st;
}

hk_status_t hk__swap_ensure_open(hk_loader_t *loader, hk_plugin_t *plugin, char *why, size_t n)
{
    struct hk__swap *sw = hk__swap_get(loader);
    if (!sw) {
        snprintf(why, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    hk__swap_module_t *mod = hk__swap_module(sw, plugin);
    if (!mod) {
        snprintf(why, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    hk__gate_enter(loader);
    hk_status_t st = HK_STATUS_OK;
    if (!plugin->module)
        st = hk__reopen(loader, plugin, why, n);
    hk__gate_leave(loader);
    if (st == HK_STATUS_OK && atomic_load(&mod->state) != HK_MODULE_OPEN) {
        atomic_store(&mod->state, HK_MODULE_OPEN);
        atomic_fetch_add(&mod->reopens, 1);
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "opened the module of %s %s (%s) again, with the "
                  "checks of a first load", plugin->name, plugin->version, plugin->path);
    }
    return st;
}
