/* handlekit swap: what a swap does to modules and to a candidate plugin.
 *   - the verification workload a new implementation must pass;
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
 * nobody acquired it, and it may be unloaded at all. Caller holds list_lock. */
static int hk__unreachable(struct hk__swap *sw, hk_plugin_t *plugin)
{
    if (!(plugin->flags & HK_PLUGIN_UNLOAD_SAFE) || !plugin->module)
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

void hk__swap_try_close(hk_loader_t *loader, struct hk__swap *sw, hk_plugin_t *plugin)
{
    hk__swap_module_t *mod = hk__swap_module(sw, plugin);
    if (!mod)
        return;
    pthread_mutex_lock(&sw->list_lock);
    int closable = hk__unreachable(sw, plugin);
    pthread_mutex_unlock(&sw->list_lock);
    if (!closable) {
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "module of %s %s kept open: %s", plugin->name,
                  plugin->version, !(plugin->flags & HK_PLUGIN_UNLOAD_SAFE)
                  ? "the plugin is not unload-safe" : !plugin->module ? "it is closed already"
                  : atomic_load(&plugin->refs) ? "the plugin is acquired (hk_plugin_acquire)"
                  : "a movable handle is still bound to it");
        return;
    }

    char canon[PATH_MAX];
    const char *cpath = realpath(plugin->path, canon) ? canon : NULL;

    /* The vtable copy is cleared first: a host that ignores the acquire rule
     * then finds NULL slots rather than addresses in an unmapped file. */
    hk__gate_enter(loader);
    lt_dlhandle module = plugin->module;
    hk__mapped_t *mapped = plugin->mapped;
    plugin->mapped = NULL;
    size_t vsize = plugin->vtable.size;
    memset(&plugin->vtable, 0, sizeof(plugin->vtable));
    plugin->vtable.size = vsize;
    plugin->module = NULL;
    hk__gate_leave(loader);

    hk__ltdl_close(module, mapped);
    atomic_fetch_add(&mod->closes, 1);
    if (hk__mapped(plugin->dev, plugin->ino, cpath) == 0) {
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

/* ---- verification ---- */

#define HK__VN 1027 /* odd and past a power of two: tails get exercised */

/* Small integers: every sum and product below is exact in float and double. */
static double hk__vx(int i) { return (double)(i % 7 - 3); }
static double hk__vy(int i) { return (double)(i % 5 - 2); }

typedef struct hk__vctx {
    const hk_vtable_t *core;
    const hk_blas1_v1_t *b;
    const hk_memory_v1_t *m;
    hk_handle_t *h;
    char *why;
    size_t n;
} hk__vctx_t;

static hk_status_t hk__vfail(const hk__vctx_t *c, const char *what, hk_status_t st)
{
    snprintf(c->why, c->n, "%s: %s: %s", what, hk_status_name(st), c->core->last_error(c->h));
    return st;
}

/* Places the workload's data: dy zeroed by memset_ and checked through a
 * download, then x and y uploaded. T: type, P: s or d. */
#define HK__VPLACE(T, P)                                                                       \
    static hk_status_t hk__vplace_##P(const hk__vctx_t *c, T *hx, T *hy, void *dx, void *dy)  \
    {                                                                                          \
        const size_t bytes = HK__VN * sizeof(T);                                               \
        hk_status_t st;                                                                        \
        if ((st = c->m->memset_(c->h, dy, 0, bytes)) != HK_STATUS_OK                           \
            || (st = c->m->copy_to_host(c->h, hx, dy, bytes)) != HK_STATUS_OK)                 \
            return hk__vfail(c, "memset", st);                                                 \
        for (int i = 0; i < HK__VN; i++)                                                       \
            if (hx[i] != (T)0) {                                                               \
                snprintf(c->why, c->n, "memset left %g at element %d", (double)hx[i], i);      \
                return HK_STATUS_LOAD_FAILED;                                                  \
            }                                                                                  \
        for (int i = 0; i < HK__VN; i++) {                                                     \
            hx[i] = (T)hk__vx(i);                                                              \
            hy[i] = (T)hk__vy(i);                                                              \
        }                                                                                      \
        if ((st = c->m->copy_to_device(c->h, dx, hx, bytes)) != HK_STATUS_OK                   \
            || (st = c->m->copy_to_device(c->h, dy, hy, bytes)) != HK_STATUS_OK)               \
            return hk__vfail(c, "upload", st);                                                 \
        return HK_STATUS_OK;                                                                   \
    }

/* 1 when the first n elements of v (type T) equal the reference f(i);
 * otherwise why names the first wrong element. */
#define HK__VCHECK(T, P)                                                                       \
    static int hk__vcheck_##P(const hk__vctx_t *c, const char *op, const T *v,                 \
                              double (*f)(int))                                                \
    {                                                                                          \
        for (int i = 0; i < HK__VN; i++)                                                       \
            if ((double)v[i] != f(i)) {                                                        \
                snprintf(c->why, c->n, "%s gave %g at element %d, expected %g", op,            \
                         (double)v[i], i, f(i));                                               \
                return 0;                                                                      \
            }                                                                                  \
        return 1;                                                                              \
    }

/* One precision of the workload: dot and nrm2 of the placed data, then
 * y = 2x + y (downloaded and checked), then x = -x/2 and y = x (checked).
 * T: type, P: s or d, TOL: nrm2's relative tolerance. */
#define HK__VERIFY(T, P, TOL)                                                                  \
    HK__VPLACE(T, P)                                                                           \
    HK__VCHECK(T, P)                                                                           \
    static hk_status_t hk__vops_##P(const hk__vctx_t *c, T *hy, void *dx, void *dy)           \
    {                                                                                          \
        const size_t bytes = HK__VN * sizeof(T);                                               \
        T alpha = (T)2, half = (T)-0.5, r = 0;                                                 \
        double dot = 0.0, sq = 0.0;                                                            \
        hk_status_t st;                                                                        \
        for (int i = 0; i < HK__VN; i++) {                                                     \
            dot += hk__vx(i) * hk__vy(i);                                                      \
            sq += hk__vx(i) * hk__vx(i);                                                       \
        }                                                                                      \
        if ((st = c->b->P##dot(c->h, HK__VN, dx, 1, dy, 1, &r)) != HK_STATUS_OK)               \
            return hk__vfail(c, #P "dot", st);                                                 \
        if ((double)r != dot) {                                                                \
            snprintf(c->why, c->n, #P "dot gave %g, expected %g", (double)r, dot);             \
            return HK_STATUS_LOAD_FAILED;                                                      \
        }                                                                                      \
        if ((st = c->b->P##nrm2(c->h, HK__VN, dx, 1, &r)) != HK_STATUS_OK)                     \
            return hk__vfail(c, #P "nrm2", st);                                                \
        /* Compared squared: the loader does not link the math library. */                    \
        double rr = (double)r * (double)r;                                                     \
        if (!(rr - sq <= 2 * TOL * sq && sq - rr <= 2 * TOL * sq)) {                           \
            snprintf(c->why, c->n, #P "nrm2 gave %.9g, expected the root of %.9g", (double)r,  \
                     sq);                                                                      \
            return HK_STATUS_LOAD_FAILED;                                                      \
        }                                                                                      \
        if ((st = c->b->P##axpy(c->h, HK__VN, &alpha, dx, 1, dy, 1)) != HK_STATUS_OK           \
            || (st = c->m->copy_to_host(c->h, hy, dy, bytes)) != HK_STATUS_OK)                 \
            return hk__vfail(c, #P "axpy", st);                                                \
        if (!hk__vcheck_##P(c, #P "axpy", hy, hk__vaxpy))                                      \
            return HK_STATUS_LOAD_FAILED;                                                      \
        if ((st = c->b->P##scal(c->h, HK__VN, &half, dx, 1)) != HK_STATUS_OK                   \
            || (st = c->b->P##copy(c->h, HK__VN, dx, 1, dy, 1)) != HK_STATUS_OK                \
            || (st = c->m->copy_to_host(c->h, hy, dy, bytes)) != HK_STATUS_OK)                 \
            return hk__vfail(c, #P "scal, " #P "copy", st);                                    \
        if (!hk__vcheck_##P(c, #P "scal and " #P "copy", hy, hk__vscal))                       \
            return HK_STATUS_LOAD_FAILED;                                                      \
        return HK_STATUS_OK;                                                                   \
    }                                                                                          \
    static hk_status_t hk__verify_##P(const hk__vctx_t *c, T *hx, T *hy)                       \
    {                                                                                          \
        void *dx = NULL, *dy = NULL;                                                           \
        hk_status_t st = c->m->alloc(c->h, HK__VN * sizeof(T), &dx);                           \
        if (st == HK_STATUS_OK)                                                                \
            st = c->m->alloc(c->h, HK__VN * sizeof(T), &dy);                                   \
        if (st != HK_STATUS_OK)                                                                \
            st = hk__vfail(c, "alloc", st);                                                    \
        if (st == HK_STATUS_OK)                                                                \
            st = hk__vplace_##P(c, hx, hy, dx, dy);                                            \
        if (st == HK_STATUS_OK)                                                                \
            st = hk__vops_##P(c, hy, dx, dy);                                                  \
        if (dx)                                                                                \
            c->m->free_(c->h, dx);                                                             \
        if (dy)                                                                                \
            c->m->free_(c->h, dy);                                                             \
        return st;                                                                             \
    }

static double hk__vaxpy(int i) { return 2.0 * hk__vx(i) + hk__vy(i); }
static double hk__vscal(int i) { return -0.5 * hk__vx(i); }

HK__VERIFY(float, s, 1e-5)
HK__VERIFY(double, d, 1e-12)

hk_status_t hk__swap_verify(const hk_vtable_t *core, const hk_blas1_v1_t *b,
                            const hk_memory_v1_t *m, hk_handle_t *h, char *why, size_t n)
{
    hk__vctx_t c = {core, b, m, h, why, n};
    const char *missing = NULL;
    /* Every slot of both tables, as their headers list them. */
#define HK__HAS_MEMORY(name, minor, params, args) && m->name
#define HK__HAS_BLAS1(name, minor, params, args) && b->name
    if (!(1 HK_MEMORY_V1_SLOTS(HK__HAS_MEMORY)))
        missing = HK_TABLE_MEMORY_V1;
    else if (!(1 HK_BLAS1_V1_SLOTS(HK__HAS_BLAS1)))
        missing = HK_TABLE_BLAS1_V1;
#undef HK__HAS_BLAS1
#undef HK__HAS_MEMORY
    if (missing) {
        snprintf(why, n, "its %s table is incomplete", missing);
        return HK_STATUS_NOT_SUPPORTED;
    }
    double *hx = malloc(HK__VN * sizeof(double)), *hy = malloc(HK__VN * sizeof(double));
    hk_status_t st = HK_STATUS_OUT_OF_MEMORY;
    if (!hx || !hy) {
        snprintf(why, n, "out of memory");
        goto out;
    }
    st = hk__verify_s(&c, (float *)hx, (float *)hy);
    if (st == HK_STATUS_OK)
        st = hk__verify_d(&c, hx, hy);
out:
    free(hx);
    free(hy);
    return st;
}
