/* handlekit movable handles: the libraries a program loads through them
 * (hk.kernels/1) and their kernels, kept by the loader so that they follow a
 * swap (hk__swap.h, "hk_loader_swapkern.c"; docs/swap.md, "User kernels").
 *
 * The loader keeps each library's image. A swap loads it into the new
 * implementation during its prepare, finds the same kernels there, and
 * publishes that implementation just before the switch, so a kernel the
 * program holds launches on whichever implementation its handle runs on.
 * Once no movable handle runs on an implementation, its copy of every
 * library is unloaded through the last handle of it, before that handle is
 * destroyed (the hk.kernels/1 rules: other handles that launched the
 * library's kernels would keep it BUSY). */
#include "hk__registry.h"
#include "hk__swap.h"
#include "hk__trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_status_text.h"

static hk__registry_t hk__libs = HK__REGISTRY_INIT(sizeof(hk__mlib_t));
static hk__registry_t hk__kerns = HK__REGISTRY_INIT(sizeof(hk__mkern_t));

/* A registry object's state word: 2 * generation + live. */
static uint64_t hk__state_of(const void *obj)
{
    hk__reg_hdr_t *h = (hk__reg_hdr_t *)(uintptr_t)((const char *)obj - HK__REG_HEADER);
    return atomic_load_explicit(&h->state, memory_order_acquire);
}

/* ---- the launch path ---- */

hk_kernel_t *hk__kern_resolve(const hk_loader_t *loader, const hk_plugin_t *plugin,
                              const void *kernel)
{
    if (!hk__reg_live(&hk__kerns, kernel))
        return NULL;
    hk__mkern_t *K = (hk__mkern_t *)(uintptr_t)kernel;
    uint64_t s = hk__state_of(K);
    hk__mlib_t *L = atomic_load_explicit(&K->lib, memory_order_relaxed);
    hk_kernel_t *k = NULL;
    if (L && atomic_load_explicit(&L->loader, memory_order_relaxed) == loader)
        for (int i = 0; i < HK__IMPLS && !k; i++)
            if (atomic_load_explicit(&L->impl[i].plugin, memory_order_acquire) == plugin)
                k = atomic_load_explicit(&K->k[i], memory_order_relaxed);
    /* Read again after the fields: a kernel unloaded meanwhile (whose memory
     * a later one may reuse) gives NULL, not another kernel. */
    atomic_thread_fence(memory_order_acquire);
    return (s & 1u) && hk__state_of(K) == s ? k : NULL;
}

void hk__kern_why(const hk_loader_t *loader, const hk_plugin_t *plugin, const void *kernel,
                  const char *slot, char *why, size_t n)
{
    const hk__mkern_t *K = kernel;
    const hk__mlib_t *L = hk__reg_live(&hk__kerns, kernel) ? atomic_load(&K->lib) : NULL;
    if (!L)
        snprintf(why, n, "%s: %p is not a live kernel of a library loaded through movable "
                 "handles (its library unloaded?)", slot, kernel);
    else if (atomic_load(&L->loader) != loader)
        snprintf(why, n, "%s: kernel %p belongs to another loader's movable handles", slot,
                 kernel);
    else
        snprintf(why, n, "%s: the library of kernel %.200s is not loaded in %s %s, the "
                 "implementation this handle runs on", slot, K->name, plugin->name,
                 plugin->version);
}

/* ---- the records ---- */

/* The implementation slot of L whose plugin is p (published), or -1. */
static int hk__impl_on(hk__mlib_t *L, const hk_plugin_t *p)
{
    for (int i = 0; i < HK__IMPLS; i++)
        if (atomic_load(&L->impl[i].plugin) == p)
            return i;
    return -1;
}

static int hk__impl_count(hk__mlib_t *L)
{
    int n = 0;
    for (int i = 0; i < HK__IMPLS; i++)
        n += L->impl[i].lib != NULL;
    return n;
}

/* Forgets L's implementation i (its kernels there included). Caller holds
 * kern_lock. */
static void hk__impl_clear(hk__mlib_t *L, int i)
{
    atomic_store(&L->impl[i].plugin, NULL);
    L->impl[i].lib = NULL;
    L->impl[i].by_swap = 0;
    for (hk__mkern_t *K = L->kernels; K; K = K->next)
        atomic_store(&K->k[i], NULL);
}

/* Takes L out of sw's list and frees it with its kernels, retired first so
 * that a launch that found one sees it gone. Caller holds kern_lock. */
static void hk__lib_free(struct hk__swap *sw, hk__mlib_t *L)
{
    for (hk__mlib_t **p = &sw->libs; *p; p = &(*p)->next) {
        if (*p == L) {
            *p = L->next;
            break;
        }
    }
    for (hk__mkern_t *K = L->kernels; K; K = K->next)
        hk__reg_retire(&hk__kerns, K);
    hk__reg_retire(&hk__libs, L);
    hk__mkern_t *K = L->kernels;
    while (K) {
        hk__mkern_t *next = K->next;
        free(K->name);
        hk__reg_put(&hk__kerns, K);
        K = next;
    }
    free(L->image);
    hk__reg_put(&hk__libs, L);
    atomic_fetch_sub(&sw->libraries, 1);
}

/* L, when it is a live library of loader's movable handles; else NULL.
 * Caller holds kern_lock. */
static hk__mlib_t *hk__lib_of(const hk_loader_t *loader, hk_library_t *lib)
{
    hk__mlib_t *L = (hk__mlib_t *)(void *)lib;
    return hk__reg_live(&hk__libs, lib) && atomic_load(&L->loader) == loader ? L : NULL;
}

/* ---- the slots ---- */

hk_status_t hk__kern_load(struct hk__swap *sw, hk_loader_t *loader, const hk__binding_t *b,
                          const void *image, size_t size, hk_library_t **out, char *why,
                          size_t n)
{
    why[0] = '\0';
    if (!image || !out) {
        if (out)
            *out = NULL;
        snprintf(why, n, "load: %s is NULL", !out ? "out" : "image");
        return HK_STATUS_NULL_POINTER;
    }
    *out = NULL;
    hk_library_t *pl = NULL;
    hk__mlib_t *L = NULL;
    hk_status_t st = HK_STATUS_OUT_OF_MEMORY;
    /* The plugin loads the loader's copy: what a swap gives the next
     * implementation is then exactly what this one took. */
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy)
        goto out;
    memcpy(copy, image, size);
    st = b->kernels.load(b->raw, copy, size, &pl);
    if (st != HK_STATUS_OK)
        goto out; /* the plugin's refusal, in its last error */
    L = hk__reg_take(&hk__libs);
    if (!L) {
        b->kernels.unload(b->raw, pl);
        st = HK_STATUS_OUT_OF_MEMORY;
        goto out;
    }
    atomic_store(&L->loader, loader);
    L->image = copy;
    L->size = size;
    L->impl[0].lib = pl;
    atomic_store(&L->impl[0].plugin, b->plugin);
    copy = NULL;
    pthread_mutex_lock(&sw->kern_lock);
    L->next = sw->libs;
    sw->libs = L;
    hk__reg_publish(&hk__libs, L);
    pthread_mutex_unlock(&sw->kern_lock);
    atomic_fetch_add(&sw->libraries, 1);
    *out = (hk_library_t *)(void *)L;
out:
    if (st == HK_STATUS_OUT_OF_MEMORY)
        snprintf(why, n, "load: out of memory for the loader's copy of the library");
    free(copy);
    return st;
}

hk_status_t hk__kern_unload(struct hk__swap *sw, hk_loader_t *loader, const hk__binding_t *b,
                            hk_library_t *lib, char *why, size_t n)
{
    why[0] = '\0';
    if (!lib) {
        snprintf(why, n, "unload: lib is NULL");
        return HK_STATUS_NULL_POINTER;
    }
    /* sw->lock is held: no swap, load or other unload changes L meanwhile. */
    pthread_mutex_lock(&sw->kern_lock);
    hk__mlib_t *L = hk__lib_of(loader, lib);
    int i = L ? hk__impl_on(L, b->plugin) : -1;
    hk_library_t *pl = i >= 0 ? L->impl[i].lib : NULL;
    pthread_mutex_unlock(&sw->kern_lock);
    if (!L) {
        snprintf(why, n, "unload: %p is not a live library loaded through this loader's movable "
                 "handles (unloaded already?)", (void *)lib);
        return HK_STATUS_INVALID_VALUE;
    }
    if (i < 0) {
        snprintf(why, n, "unload: the library is not loaded in %s %s, the implementation this "
                 "handle runs on", b->plugin->name, b->plugin->version);
        return HK_STATUS_INVALID_VALUE;
    }
    /* No lock of ours: the driver waits here for the library's kernels. */
    hk_status_t st = b->kernels.unload(b->raw, pl);
    if (st != HK_STATUS_OK)
        return st; /* BUSY or a driver failure: still loaded, still usable */
    pthread_mutex_lock(&sw->kern_lock);
    hk__impl_clear(L, i);
    if (hk__impl_count(L) == 0)
        hk__lib_free(sw, L);
    pthread_mutex_unlock(&sw->kern_lock);
    return HK_STATUS_OK;
}

/* K's kernel in L's implementation i, found now when not yet. Caller holds
 * kern_lock; h is a handle of that implementation. */
static hk_status_t hk__find(hk__mlib_t *L, hk__mkern_t *K, int i, const hk_kernels_v1_t *t,
                            hk_handle_t *h)
{
    if (atomic_load(&K->k[i]))
        return HK_STATUS_OK;
    hk_kernel_t *k = NULL;
    hk_status_t st = t->get_kernel(h, L->impl[i].lib, K->name, &k);
    if (st == HK_STATUS_OK)
        atomic_store(&K->k[i], k);
    return st;
}

/* A new kernel record called name in L, found in implementation i. Caller
 * holds kern_lock. */
static hk_status_t hk__kern_new(hk__mlib_t *L, int i, const hk__binding_t *b, const char *name,
                                hk_kernel_t **out, char *why, size_t n)
{
    hk_kernel_t *k = NULL;
    hk_status_t st = b->kernels.get_kernel(b->raw, L->impl[i].lib, name, &k);
    if (st != HK_STATUS_OK)
        return st;
    hk__mkern_t *K = hk__reg_take(&hk__kerns);
    char *copy = K ? strdup(name) : NULL;
    if (!copy) {
        if (K)
            hk__reg_put(&hk__kerns, K);
        snprintf(why, n, "get_kernel: out of memory for the loader's kernel record");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    K->name = copy;
    atomic_store(&K->lib, L);
    atomic_store(&K->k[i], k);
    K->next = L->kernels;
    L->kernels = K;
    hk__reg_publish(&hk__kerns, K);
    *out = (hk_kernel_t *)(void *)K;
    return HK_STATUS_OK;
}

hk_status_t hk__kern_get(struct hk__swap *sw, hk_mhandle_t *mh, const hk__binding_t *b,
                         hk_library_t *lib, const char *name, hk_kernel_t **out, char *why,
                         size_t n, int *retry)
{
    why[0] = '\0';
    *retry = 0;
    if (out)
        *out = NULL;
    if (!lib || !name || !out) {
        snprintf(why, n, "get_kernel: %s is NULL", !lib ? "lib" : !name ? "name" : "out");
        return HK_STATUS_NULL_POINTER;
    }
    hk_status_t st = HK_STATUS_OK;
    pthread_mutex_lock(&sw->kern_lock);
    hk__mlib_t *L = hk__lib_of(mh->loader, lib);
    if (!L) {
        snprintf(why, n, "get_kernel: %p is not a live library loaded through this loader's "
                 "movable handles (unloaded already?)", (void *)lib);
        st = HK_STATUS_INVALID_VALUE;
        goto out;
    }
    /* A switch of mh takes kern_lock: as long as mh runs on b here, a kernel
     * found now is found in the swap's new implementation at its commit. */
    pthread_mutex_lock(&sw->list_lock);
    *retry = hk__mh_bound(mh) != b;
    pthread_mutex_unlock(&sw->list_lock);
    if (*retry)
        goto out;
    int i = hk__impl_on(L, b->plugin);
    if (i < 0) {
        snprintf(why, n, "get_kernel: the library is not loaded in %s %s, the implementation "
                 "this handle runs on", b->plugin->name, b->plugin->version);
        st = HK_STATUS_INVALID_VALUE;
        goto out;
    }
    hk__mkern_t *K = L->kernels;
    while (K && strcmp(K->name, name) != 0)
        K = K->next;
    if (!K) {
        st = hk__kern_new(L, i, b, name, out, why, n);
        goto out;
    }
    st = hk__find(L, K, i, &b->kernels, b->raw);
    if (st == HK_STATUS_OK)
        *out = (hk_kernel_t *)(void *)K;
out:
    pthread_mutex_unlock(&sw->kern_lock);
    return st;
}

/* ---- an implementation no movable handle runs on ---- */

unsigned hk__kern_drop(struct hk__swap *sw, const hk__binding_t *b, char *why, size_t n)
{
    unsigned failed = 0, dropped = 0;
    int used = 0;
    pthread_mutex_lock(&sw->list_lock);
    for (size_t i = 0; i < sw->nhandles && !used; i++)
        used = hk__mh_bound(sw->handles[i])->plugin == b->plugin;
    pthread_mutex_unlock(&sw->list_lock);
    if (used)
        return 0;
    /* sw->lock is held: the list changes only here meanwhile. */
    pthread_mutex_lock(&sw->kern_lock);
    hk__mlib_t *next = NULL;
    for (hk__mlib_t *L = sw->libs; L; L = next) {
        next = L->next;
        int i = hk__impl_on(L, b->plugin);
        if (i < 0)
            continue;
        hk_library_t *pl = L->impl[i].lib;
        pthread_mutex_unlock(&sw->kern_lock); /* the unload may wait for kernels */
        hk_status_t st = b->kernels.unload ? b->kernels.unload(b->raw, pl)
                                           : HK_STATUS_NOT_SUPPORTED;
        pthread_mutex_lock(&sw->kern_lock);
        if (st != HK_STATUS_OK) {
            failed++;
            atomic_fetch_add(&sw->unloads_failed, 1);
            snprintf(why, n, "%s %s unload of a library loaded through movable handles: %s: %s",
                     b->plugin->name, b->plugin->version, hk_status_name(st),
                     b->core.last_error(b->raw));
        }
        hk__impl_clear(L, i);
        if (hk__impl_count(L) == 0)
            hk__lib_free(sw, L);
        dropped++;
    }
    pthread_mutex_unlock(&sw->kern_lock);
    if (dropped)
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "no movable handle runs on %s %s any more: %u "
                  "librar%s loaded through movable handles unloaded from it (%u failed)",
                  b->plugin->name, b->plugin->version, dropped, dropped == 1 ? "y" : "ies",
                  failed);
    return failed;
}

/* ---- a swap ---- */

/* Whether L's handles move: it is loaded in one of the movers' old
 * implementations and not yet in `to`. */
static int hk__moves(hk__mlib_t *L, const hk_plugin_t *to, hk_plugin_t *const *from,
                     size_t nfrom)
{
    if (hk__impl_on(L, to) >= 0)
        return 0;
    for (size_t k = 0; k < nfrom; k++)
        if (hk__impl_on(L, from[k]) >= 0)
            return 1;
    return 0;
}

/* Finds every kernel of L in its implementation i (a swap's), through h.
 * Caller holds kern_lock. */
static hk_status_t hk__find_all(hk__mlib_t *L, int i, const hk__binding_t *fresh,
                                hk_handle_t *h, char *why, size_t n)
{
    for (hk__mkern_t *K = L->kernels; K; K = K->next) {
        hk_status_t st = hk__find(L, K, i, &fresh->kernels, h);
        if (st != HK_STATUS_OK) {
            snprintf(why, n, "%s %s has no kernel %.200s in a library loaded through movable "
                     "handles: %s: %s", fresh->plugin->name, fresh->plugin->version, K->name,
                     hk_status_name(st), fresh->core.last_error(h));
            return st;
        }
    }
    return HK_STATUS_OK;
}

/* Takes every kernel's function in every new handle's context, which loads
 * the library there now (a step that may hold the calls) rather than at a
 * launch after the switch. The kernels are L's in implementation i. */
static hk_status_t hk__warm(struct hk__swap *sw, hk__mlib_t *L, int i,
                            const hk__binding_t *fresh, hk_handle_t *const *news, size_t nnews,
                            char *why, size_t n)
{
    hk_status_t st = HK_STATUS_OK;
    size_t nk = 0;
    pthread_mutex_lock(&sw->kern_lock);
    for (hk__mkern_t *K = L->kernels; K; K = K->next)
        nk++;
    hk__mkern_t **ks = malloc((nk ? nk : 1) * sizeof(*ks));
    nk = 0;
    for (hk__mkern_t *K = ks ? L->kernels : NULL; K; K = K->next)
        ks[nk++] = K; /* freed only under sw->lock, which the swap holds */
    pthread_mutex_unlock(&sw->kern_lock);
    if (!ks) {
        snprintf(why, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    for (size_t h = 0; h < nnews && st == HK_STATUS_OK; h++) {
        for (size_t k = 0; k < nk && st == HK_STATUS_OK; k++) {
            void *fn = NULL;
            st = fresh->kernels.get_function(news[h], atomic_load(&ks[k]->k[i]), &fn);
            if (st != HK_STATUS_OK)
                snprintf(why, n, "%s %s cannot run kernel %.200s of a library loaded through "
                         "movable handles in a new handle's context: %s: %s",
                         fresh->plugin->name, fresh->plugin->version, ks[k]->name,
                         hk_status_name(st), fresh->core.last_error(news[h]));
        }
    }
    free(ks);
    return st;
}

/* Loads L into the swap's new implementation (a free slot of L), finds its
 * kernels and their functions there. */
static hk_status_t hk__move_one(struct hk__swap *sw, hk__mlib_t *L, const hk__binding_t *fresh,
                                hk_handle_t *vh, hk_handle_t *const *news, size_t nnews,
                                char *why, size_t n)
{
    const hk_plugin_t *to = fresh->plugin;
    int i = 0;
    while (i < HK__IMPLS && L->impl[i].lib)
        i++;
    if (i == HK__IMPLS) { /* a library is in one implementation between swaps */
        snprintf(why, n, "a library loaded through movable handles is in %d implementations "
                 "already", HK__IMPLS);
        return HK_STATUS_INTERNAL;
    }
    hk_library_t *nl = NULL;
    hk_status_t st = fresh->kernels.load(vh, L->image, L->size, &nl);
    if (st != HK_STATUS_OK) {
        snprintf(why, n, "%s %s cannot load a library loaded through movable handles (an image "
                 "of %zu bytes): %s: %s", to->name, to->version, L->size, hk_status_name(st),
                 fresh->core.last_error(vh));
        return st;
    }
    pthread_mutex_lock(&sw->kern_lock);
    L->impl[i].lib = nl; /* not published: no launch finds it before the switch */
    L->impl[i].by_swap = 1;
    st = hk__find_all(L, i, fresh, vh, why, n);
    pthread_mutex_unlock(&sw->kern_lock);
    if (st == HK_STATUS_OK)
        st = hk__warm(sw, L, i, fresh, news, nnews, why, n);
    return st;
}

hk_status_t hk__kern_prepare(struct hk__swap *sw, const hk__binding_t *fresh, hk_handle_t *vh,
                             hk_plugin_t *const *from, size_t nfrom, hk_handle_t *const *news,
                             size_t nnews, char *why, size_t n)
{
    size_t moving = 0;
    pthread_mutex_lock(&sw->kern_lock);
    for (hk__mlib_t *L = sw->libs; L; L = L->next)
        moving += hk__moves(L, fresh->plugin, from, nfrom);
    pthread_mutex_unlock(&sw->kern_lock);
    if (!moving)
        return HK_STATUS_OK;
    if (!fresh->kernels.load || !fresh->kernels.get_kernel || !fresh->kernels.get_function) {
        snprintf(why, n, "%s %s offers no complete %s table, which %zu librar%s loaded through "
                 "the movable handles that move need%s", fresh->plugin->name,
                 fresh->plugin->version, HK_TABLE_KERNELS_V1, moving, moving == 1 ? "y" : "ies",
                 moving == 1 ? "s" : "");
        return HK_STATUS_NOT_SUPPORTED;
    }
    hk_status_t st = HK_STATUS_OK;
    /* sw->lock is held: no library comes or goes meanwhile. */
    for (hk__mlib_t *L = sw->libs; L && st == HK_STATUS_OK; L = L->next) {
        pthread_mutex_lock(&sw->kern_lock);
        int moves = hk__moves(L, fresh->plugin, from, nfrom);
        pthread_mutex_unlock(&sw->kern_lock);
        if (moves)
            st = hk__move_one(sw, L, fresh, vh, news, nnews, why, n);
    }
    if (st == HK_STATUS_OK)
        HK__TRACE(HK__TRACE_DECISIONS, "swap", "%zu librar%s loaded through movable handles "
                  "loaded into %s %s, kernels found", moving, moving == 1 ? "y" : "ies",
                  fresh->plugin->name, fresh->plugin->version);
    return st;
}

hk_status_t hk__kern_commit_begin(struct hk__swap *sw, const hk__binding_t *fresh,
                                  hk_handle_t *vh, char *why, size_t n)
{
    hk_status_t st = HK_STATUS_OK;
    pthread_mutex_lock(&sw->kern_lock);
    for (hk__mlib_t *L = sw->libs; L && st == HK_STATUS_OK; L = L->next)
        for (int i = 0; i < HK__IMPLS && st == HK_STATUS_OK; i++)
            if (L->impl[i].by_swap) /* kernels found since the prepare */
                st = hk__find_all(L, i, fresh, vh, why, n);
    if (st != HK_STATUS_OK)
        pthread_mutex_unlock(&sw->kern_lock);
    return st;
}

void hk__kern_publish(struct hk__swap *sw, hk_plugin_t *to)
{
    for (hk__mlib_t *L = sw->libs; L; L = L->next)
        for (int i = 0; i < HK__IMPLS; i++)
            if (L->impl[i].by_swap)
                atomic_store_explicit(&L->impl[i].plugin, to, memory_order_release);
}

void hk__kern_commit_end(struct hk__swap *sw)
{
    pthread_mutex_unlock(&sw->kern_lock);
}

unsigned hk__kern_abandon(struct hk__swap *sw, const hk__binding_t *fresh, hk_handle_t *vh,
                          char *why, size_t n)
{
    unsigned failed = 0;
    pthread_mutex_lock(&sw->kern_lock);
    for (hk__mlib_t *L = sw->libs; L; L = L->next) {
        for (int i = 0; i < HK__IMPLS; i++) {
            if (!L->impl[i].by_swap)
                continue;
            hk_library_t *nl = L->impl[i].lib;
            hk__impl_clear(L, i); /* L keeps the implementation it had */
            pthread_mutex_unlock(&sw->kern_lock);
            hk_status_t st = vh && nl ? fresh->kernels.unload(vh, nl) : HK_STATUS_OK;
            pthread_mutex_lock(&sw->kern_lock);
            if (st != HK_STATUS_OK) {
                failed++;
                atomic_fetch_add(&sw->unloads_failed, 1);
                snprintf(why, n, "%s %s unload of a library the swap loaded: %s: %s",
                         fresh->plugin->name, fresh->plugin->version, hk_status_name(st),
                         fresh->core.last_error(vh));
            }
        }
    }
    pthread_mutex_unlock(&sw->kern_lock);
    return failed;
}

void hk__kern_settle(struct hk__swap *sw)
{
    pthread_mutex_lock(&sw->kern_lock);
    for (hk__mlib_t *L = sw->libs; L; L = L->next)
        for (int i = 0; i < HK__IMPLS; i++)
            L->impl[i].by_swap = 0;
    pthread_mutex_unlock(&sw->kern_lock);
}
