/* handlekit movable handles: the tables they do not forward (hk__swap.h,
 * "hk_loader_swapext.c"). A movable handle forwards the four tables whose
 * slots the loader knows; any other table a plugin offers (its own ops, a
 * self-check) is reached through a pin, and these copies are what a pin
 * hands out. They are made from the plugin's enum_tables and get_table once
 * per open period of its module (a reopened module may lie elsewhere in
 * memory), and freed when the module closes or the loader goes. */
#include "hk__swap.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "hk_trim.h"

/* Tables that are no handle's: a pin of them would mean nothing. */
static int hk__ext_skipped(const char *name)
{
    static const char *const forwarded[] = {HK_TABLE_BLAS1_V1, HK_TABLE_MEMORY_V1,
                                            HK_TABLE_KERNELS_V1, HK_TABLE_CUDA_V1,
                                            HK_TABLE_TRIM_V1};
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        if (strcmp(name, forwarded[i]) == 0)
            return 1;
    return 0;
}

/* The names plugin enumerates (at most max), into names. */
static size_t hk__ext_names(const hk_plugin_t *plugin, const char **names, size_t max)
{
    size_t n = 0;
    if (!plugin->vtable.enum_tables)
        return 0;
    for (size_t i = 0; n < max; i++) {
        const char *name = NULL;
        if (plugin->vtable.enum_tables(i, &name) != HK_STATUS_OK)
            break;
        if (name && *name && strlen(name) < 256 && !hk__ext_skipped(name))
            names[n++] = name;
    }
    return n;
}

/* One entry: the loader's clamped copy of table name. 0 when it has none. */
static int hk__ext_take(const hk_plugin_t *plugin, const char *name, hk__ext_table_t *e)
{
    /* A fresh clamped copy (hk_plugin_table's cache would outlive a reopen
     * of the module at another address); 4 KiB of slots is plenty. */
    size_t raw[4096 / sizeof(size_t)];
    if (hk_plugin_get_table(plugin, name, raw, sizeof(raw)) != HK_STATUS_OK)
        return 0;
    size_t size = raw[0];
    e->name = strdup(name);
    e->table = malloc(size);
    if (!e->name || !e->table) {
        free(e->name);
        free(e->table);
        return -1;
    }
    memcpy(e->table, raw, size);
    e->size = size;
    atomic_init(&e->used, 0);
    return 1;
}

static void hk__ext_free(hk__ext_t *e)
{
    for (size_t i = 0; i < e->n; i++) {
        free(e->t[i].name);
        free(e->t[i].table);
    }
    free(e);
}

const hk__ext_t *hk__ext_of(struct hk__swap *sw, hk_plugin_t *plugin)
{
    enum { MAX = 64 };
    const char *names[MAX];
    if (plugin->swap_ext)
        return plugin->swap_ext;
    size_t n = hk__ext_names(plugin, names, MAX);
    hk__ext_t *e = calloc(1, sizeof(*e) + n * sizeof(e->t[0]));
    if (!e)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int got = hk__ext_take(plugin, names[i], &e->t[e->n]);
        if (got < 0) {
            hk__ext_free(e);
            return NULL;
        }
        e->n += (size_t)got;
    }
    e->plugin = plugin;
    e->next = sw->exts;
    sw->exts = e;
    plugin->swap_ext = e;
    return e;
}

void hk__ext_drop(struct hk__swap *sw, hk_plugin_t *plugin)
{
    for (hk__ext_t **pp = &sw->exts; *pp; pp = &(*pp)->next) {
        if ((*pp)->plugin == plugin) {
            hk__ext_t *e = *pp;
            *pp = e->next;
            hk__ext_free(e);
            break;
        }
    }
    plugin->swap_ext = NULL;
}

void hk__ext_free_all(struct hk__swap *sw)
{
    while (sw->exts) {
        hk__ext_t *e = sw->exts;
        sw->exts = e->next;
        hk__ext_free(e);
    }
}

hk__ext_table_t *hk__ext_find(const hk__ext_t *ext, const char *name)
{
    for (size_t i = 0; ext && i < ext->n; i++)
        if (strcmp(ext->t[i].name, name) == 0)
            return (hk__ext_table_t *)&ext->t[i];
    return NULL;
}

/* Whether slot i (a pointer after the size field) of table t is set. */
static int hk__ext_slot(const hk__ext_table_t *t, size_t i, void **slot)
{
    size_t at = sizeof(size_t) + i * sizeof(void *);
    if (at + sizeof(void *) > t->size)
        return 0;
    memcpy(slot, (const char *)t->table + at, sizeof(void *));
    return *slot != NULL;
}

int hk__ext_lacking(const hk__ext_t *old, const hk__ext_t *neu, char *what, size_t n)
{
    for (size_t i = 0; old && i < old->n; i++) {
        const hk__ext_table_t *o = &old->t[i];
        if (!atomic_load(&o->used))
            continue;
        const hk__ext_table_t *w = hk__ext_find(neu, o->name);
        if (!w) {
            snprintf(what, n, "table %s", o->name);
            return 1;
        }
        /* A table of slots after its size: a slot the old one sets must be
         * set in the new one (what each slot means is the table's own
         * contract, which a major in its name versions). */
        for (size_t k = 0; sizeof(size_t) + k * sizeof(void *) < o->size; k++) {
            void *a, *b;
            if (hk__ext_slot(o, k, &a) && !hk__ext_slot(w, k, &b)) {
                snprintf(what, n, "slot %zu of table %s", k, o->name);
                return 1;
            }
        }
    }
    return 0;
}

void hk__ext_carry(const hk__ext_t *old, const hk__ext_t *neu)
{
    for (size_t i = 0; old && i < old->n; i++) {
        hk__ext_table_t *w = atomic_load(&old->t[i].used) ? hk__ext_find(neu, old->t[i].name)
                                                           : NULL;
        if (w)
            atomic_store(&w->used, 1);
    }
}
