/* hk-cuda: the kernel library, and the reduction kernels' workspaces.
 *
 * One process-wide library of the embedded fatbin, loaded through the kit by
 * the first handle and kept after the last one until a trim (hk_kit_trim,
 * through hk.trim/1 before a host closes the module, or the kit's destructor)
 * unloads it, so that a create after the last destroy finds it. A CUlibrary is
 * context-independent: its CUkernels launch in any context, and they survive
 * a primary-context reset (fact 8). The kit caches each kernel's CUfunction
 * per context ID, so a later handle in the same context skips
 * cuKernelGetFunction (whose first call in a context triggers the lazy
 * module load).
 *
 * dot and nrm2 need scratch memory (per-block partials and a last-block
 * counter). A workspace per stream, keyed by the stream's unique ID (or, for
 * a stream first seen while it is being captured, by the capture), lets any
 * number of threads call them on one handle on any streams: launches on one
 * stream run one after the other and reuse their workspace; launches on
 * different streams never share one. See plugin/cuda/README.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkc_internal.h"

hkc_cu_t hkc_cu;
pthread_mutex_t hkc_lock = PTHREAD_MUTEX_INITIALIZER;

/* The fatbin, embedded by site_scons/hk_embed.S (hidden symbols). */
extern const unsigned char hk__cuda_fatbin[];
extern const unsigned char hk__cuda_fatbin_end[];

static const char *const kernel_names[HK__K_COUNT] = {
    [HK__K_SAXPY] = "hk_saxpy_kernel", [HK__K_DAXPY] = "hk_daxpy_kernel",
    [HK__K_SSCAL] = "hk_sscal_kernel", [HK__K_DSCAL] = "hk_dscal_kernel",
    [HK__K_SCOPY] = "hk_scopy_kernel", [HK__K_DCOPY] = "hk_dcopy_kernel",
    [HK__K_SDOT] = "hk_sdot_kernel",   [HK__K_DDOT] = "hk_ddot_kernel",
    [HK__K_SNRM2] = "hk_snrm2_kernel", [HK__K_DNRM2] = "hk_dnrm2_kernel",
    [HK__K_SDOT_ALIGNED] = "hk_sdot_aligned_kernel",
    [HK__K_DDOT_ALIGNED] = "hk_ddot_aligned_kernel",
    [HK__K_SNRM2_ALIGNED] = "hk_snrm2_aligned_kernel",
    [HK__K_DNRM2_ALIGNED] = "hk_dnrm2_aligned_kernel",
};

/* All under hkc_lock. kernels[] is set before any handle that uses it is
 * published, and stays while refs (the live handles) is above 0; a trim at 0
 * takes the library out (library NULL) before it unloads it, so a create
 * meanwhile loads a library of its own. */
static hk_kit_library_t *library;
static hk_kit_kernel_t *kernels[HK__K_COUNT];
static unsigned long refs;
static int entries_taken;

hk_status_t hkc_driver_take(void)
{
    static const hk_kit_entry_t entries[] = {
#define HK__CU_ENTRY(name, ver) {#name, ver, (void **)&hkc_cu.name},
        HK__CU_ENTRY_POINTS(HK__CU_ENTRY)
#undef HK__CU_ENTRY
    };
    if (entries_taken)
        return HK_STATUS_OK;
    hk_status_t st = hk_kit_driver_take(entries, sizeof entries / sizeof entries[0]);
    entries_taken = st == HK_STATUS_OK;
    return st;
}

/* Unloads a library whose set-up failed; the set-up's failure, already in
 * the create message, is the one reported. */
static void give_back_library(hk_kit_library_t *lib)
{
    char first[512];
    snprintf(first, sizeof first, "%s", hk_kit_last_error(NULL));
    if (hk_kit_library_unload(NULL, lib) != HK_STATUS_OK) /* refused twice */
        hk_kit_fail(NULL, HK_STATUS_OK, "%s", first);
}

hk_status_t hkc_kernels_acquire(void)
{
    if (library) { /* loaded by an earlier handle, kept */
        refs++;
        return HK_STATUS_OK;
    }
    hk_kit_library_t *lib = NULL;
    hk_status_t st = hk_kit_library_load(NULL, hk__cuda_fatbin,
                                         (size_t)(hk__cuda_fatbin_end - hk__cuda_fatbin), 0,
                                         &lib);
    if (st != HK_STATUS_OK)
        return st;
    for (int k = 0; k < HK__K_COUNT; k++) {
        st = hk_kit_kernel_find(NULL, lib, kernel_names[k], &kernels[k]);
        if (st != HK_STATUS_OK) {
            give_back_library(lib);
            return st;
        }
    }
    library = lib;
    refs = 1;
    hk_kit_set_trim(hkc_kernels_trim);
    return HK_STATUS_OK;
}

hk_status_t hkc_kernels_release(void)
{
    /* The library stays loaded after the last handle, until a trim: the
     * next create then neither loads it nor asks for its functions again in
     * a context it already ran in, as the primary retain the kit keeps
     * (docs/contexts.md, "What the kit keeps between handles"). */
    pthread_mutex_lock(&hkc_lock);
    if (refs > 0)
        refs--;
    pthread_mutex_unlock(&hkc_lock);
    return HK_STATUS_OK;
}

hk_status_t hkc_kernels_trim(void)
{
    hk_kit_library_t *lib = NULL;
    hk_kit_kernel_t *ks[HK__K_COUNT];
    pthread_mutex_lock(&hkc_lock);
    if (refs == 0 && library) {
        lib = library;
        memcpy(ks, kernels, sizeof ks);
        memset(kernels, 0, sizeof kernels);
        library = NULL;
    }
    pthread_mutex_unlock(&hkc_lock);
    if (!lib)
        return HK_STATUS_OK;
    /* No lock held: the driver waits here for the library's running kernels
     * (fact 19), and for a pause in other threads' launches (fact 30). */
    hk_status_t st = hk_kit_library_unload(NULL, lib);
    if (st == HK_STATUS_OK)
        return HK_STATUS_OK;
    /* Refused (twice): kept for the next handle rather than lost, unless a
     * create loaded another one meanwhile; then the kit gives this one back
     * when the module is closed (hkk_module.c). */
    pthread_mutex_lock(&hkc_lock);
    if (!library) {
        library = lib;
        memcpy(kernels, ks, sizeof kernels);
    }
    pthread_mutex_unlock(&hkc_lock);
    return st;
}

hk_status_t hkc_kernels_functions(hk_handle_t *h, unsigned long long ctx_id,
                                  CUfunction out[HK__K_COUNT])
{
    for (int k = 0; k < HK__K_COUNT; k++) {
        hk_status_t st = hk_kit_kernel_function(kernels[k], ctx_id, h ? h->kb : NULL, &out[k]);
        if (st != HK_STATUS_OK)
            return st;
    }
    return HK_STATUS_OK;
}

/* ---- reduction workspaces, one per stream ---- */

/* The calling thread's per-thread stream, whatever the context: a token of
 * the thread's own. CU_STREAM_PER_THREAD is one value for a different stream
 * on every thread (fact 20), and the workspaces are per context incarnation
 * already, so the thread tells them apart; no driver call needed. Tokens are
 * never reused, so a stream of a thread that ended keeps its workspace to
 * itself (its last work may still be running). */
static atomic_ullong next_thread_token = 1;
static _Thread_local unsigned long long thread_key;

static unsigned long long per_thread_key(void)
{
    if (!thread_key)
        thread_key = HK__WS_THREAD_BIT |
                     atomic_fetch_add_explicit(&next_thread_token, 1, memory_order_relaxed);
    return thread_key;
}

/* The key of the call's stream: its ID (learnt by set_stream for a created
 * stream, else through the kit here, once), the thread's token for the
 * per-thread stream, or HK__WS_LEGACY (the NULL stream is the legacy stream
 * with the entry points taken here). A created stream being captured whose
 * ID is not known yet is keyed by the capture (*capture set, see
 * the keys in hkc_internal.h): the ID cannot be asked there (fact 26), and a
 * graph with a workspace of its own shares it with no direct call. */
static hk_status_t stream_key(hkc_call_t *c, unsigned long long *key, uintptr_t *capture)
{
    *capture = 0;
    if (c->stream_id) {
        *key = c->stream_id;
        return HK_STATUS_OK;
    }
    if (c->stream == NULL || c->stream == CU_STREAM_LEGACY) {
        *key = HK__WS_LEGACY;
        return HK_STATUS_OK;
    }
    if (c->stream == CU_STREAM_PER_THREAD) {
        *key = per_thread_key();
        return HK_STATUS_OK;
    }
    unsigned long long seq = 0;
    hk_status_t st = hk_kit_stream_ident(&c->k, key, &seq);
    if (st != HK_STATUS_OK)
        return st;
    if (seq) {
        *key = seq;
        *capture = (uintptr_t)c->stream;
    } else if (*key & HK__WS_THREAD_BIT) {
        return hkc_fail(c->h, HK_STATUS_INTERNAL,
                        "cuStreamGetId gave %#llx, an ID with the top bit set", *key);
    }
    return HK_STATUS_OK;
}

static unsigned ws_hash(unsigned long long key, uintptr_t capture, unsigned mask)
{
    return (unsigned)(((key ^ capture) * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

static hkc_ws_t *ws_find(const hkc_ws_map_t *m, unsigned long long key, uintptr_t capture)
{
    if (!m)
        return NULL;
    for (unsigned i = ws_hash(key, capture, m->mask);; i = (i + 1) & m->mask) {
        hkc_ws_t *e = atomic_load_explicit(&m->slot[i], memory_order_acquire);
        if (!e || (e->key == key && e->capture == capture))
            return e; /* a table is never more than half full: an empty slot comes */
    }
}

static void ws_place(hkc_ws_map_t *m, hkc_ws_t *e)
{
    unsigned i = ws_hash(e->key, e->capture, m->mask);
    while (atomic_load_explicit(&m->slot[i], memory_order_relaxed))
        i = (i + 1) & m->mask;
    atomic_store_explicit(&m->slot[i], e, memory_order_release);
    m->count++;
}

/* Adds e to the arm's table, replacing the table by one twice as large when
 * it would be more than half full. Caller holds hkc_lock. */
static int ws_insert(hkc_arm_t *a, hkc_ws_t *e)
{
    hkc_ws_map_t *m = atomic_load_explicit(&a->ws, memory_order_relaxed);
    if (!m || 2 * (m->count + 1) > m->mask + 1) {
        unsigned cap = m ? 2 * (m->mask + 1) : 16;
        hkc_ws_map_t *n = calloc(1, sizeof *n + cap * sizeof n->slot[0]);
        if (!n)
            return -1;
        n->mask = cap - 1;
        n->older = m;
        for (unsigned i = 0; m && i <= m->mask; i++) {
            hkc_ws_t *old = atomic_load_explicit(&m->slot[i], memory_order_relaxed);
            if (old)
                ws_place(n, old);
        }
        atomic_store_explicit(&a->ws, n, memory_order_release);
        m = n;
    }
    ws_place(m, e);
    return 0;
}

/* Clears the counter in stream order. During capture the memset becomes part
 * of the graph and has not run, so the workspace is not marked cleared. */
static hk_status_t ws_clear(hkc_call_t *c, hkc_ws_t *e)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = hkc_cu.cuStreamIsCapturing(c->stream, &cs);
    if (r == CUDA_SUCCESS)
        r = hkc_cu.cuMemsetD8Async(e->base + HK__WS_COUNTER, 0, HK__WS_RESULT - HK__WS_COUNTER,
                                   c->stream);
    if (r != CUDA_SUCCESS)
        return hkc_fail_cu(c->h, r, "clearing a reduction workspace");
    if (cs == CU_STREAM_CAPTURE_STATUS_NONE)
        atomic_store_explicit(&e->cleared, 1, memory_order_release);
    return HK_STATUS_OK;
}

/* cuMemAlloc and cuMemFree are among the calls that a stream capture in
 * global mode (of any thread) or thread-local mode (of this thread) forbids
 * and that would invalidate it (fact 26): they run in relaxed mode, which
 * the driver allows (hkc_relax). */
CUresult hkc_relaxed_alloc(CUdeviceptr *p, size_t bytes)
{
    int mode;
    CUresult r = hkc_relax(&mode);
    if (r != CUDA_SUCCESS)
        return r;
    r = hkc_cu.cuMemAlloc(p, bytes);
    CUresult back = hkc_relaxed_end(mode);
    if (r == CUDA_SUCCESS && back != CUDA_SUCCESS) { /* the caller's mode comes first */
        hkc_cu.cuMemFree(*p);
        r = back;
    }
    return r;
}

CUresult hkc_relaxed_free(CUdeviceptr p)
{
    int mode;
    CUresult r = hkc_relax(&mode);
    if (r != CUDA_SUCCESS)
        return r;
    r = hkc_cu.cuMemFree(p);
    hkc_relaxed_end(mode);
    return r;
}

/* In relaxed capture mode, as every free (hkc_relaxed_free): the arm and
 * the spares give host mode's word back through it. */
CUresult hkc_give_back_host(void *p)
{
    int mode;
    CUresult relaxed = hkc_relax(&mode);
    CUresult r = hkc_cu.cuMemFreeHost(p);
    if (r != CUDA_SUCCESS)
        r = hkc_cu.cuMemFreeHost(p);
    if (relaxed == CUDA_SUCCESS)
        hkc_relaxed_end(mode);
    return r;
}

/* A new slab of workspaces, first in the arm's list. Caller holds hkc_lock or
 * owns the arm alone; the arm's context is current. */
static CUresult slab_add(hkc_arm_t *a)
{
    hkc_slab_t *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* A slab a destroyed handle left with the kit in this incarnation, else
     * a new one */
    hk_kit_block_t kept;
    CUresult r = CUDA_SUCCESS;
    if (hk_kit_take_block(a->base.ctx_id, HK_KIT_BLOCK_DEVICE, HKC_SLAB_BYTES, &kept))
        s->base = (CUdeviceptr)kept.dev;
    else
        r = hkc_relaxed_alloc(&s->base, HKC_SLAB_BYTES);
    if (r != CUDA_SUCCESS) {
        free(s);
        return r;
    }
    s->next = a->slabs;
    a->slabs = s;
    return CUDA_SUCCESS;
}

int hkc_ws_adopt(hkc_arm_t *a, CUdeviceptr base)
{
    hkc_slab_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->base = base;
    s->next = a->slabs;
    a->slabs = s;
    return 0;
}

hk_status_t hkc_ws_reserve(hkc_arm_t *a, hk_handle_t *err_to)
{
    CUresult r = slab_add(a);
    return r == CUDA_SUCCESS ? HK_STATUS_OK
                             : hkc_fail_cu(err_to, r, "cuMemAlloc of the reduction workspaces");
}

/* Slow path: the first reduction on this stream in this arm. Under hkc_lock,
 * so two threads on one stream make one workspace; the entry is published
 * only after its clear is enqueued, so any kernel enqueued by a thread that
 * finds it comes after the clear on that stream. The memory comes from the
 * arm's slab (made with the arm: no allocation for its first streams, so no
 * allocation during a capture either); a full slab gets a new one. */
static hk_status_t ws_make(hkc_call_t *c, unsigned long long key, uintptr_t capture,
                           hkc_ws_t **out)
{
    hk_status_t st = HK_STATUS_OK;
    hkc_arm_t *a = c->arm;
    pthread_mutex_lock(&hkc_lock);
    hkc_ws_t *e = ws_find(atomic_load_explicit(&a->ws, memory_order_acquire), key, capture);
    if (e)
        goto out;
    e = calloc(1, sizeof *e);
    if (!e) {
        st = hkc_fail(c->h, HK_STATUS_OUT_OF_MEMORY, "no memory for a reduction workspace");
        goto out;
    }
    e->key = key;
    e->capture = capture;
    if (!a->slabs || a->slabs->used == HK__WS_PER_SLAB) {
        CUresult r = slab_add(a);
        if (r != CUDA_SUCCESS) {
            st = hkc_fail_cu(c->h, r, "cuMemAlloc of more reduction workspaces");
            goto fail;
        }
    }
    e->base = a->slabs->base + (CUdeviceptr)a->slabs->used * HK__WS_BYTES;
    st = ws_clear(c, e);
    if (st == HK_STATUS_OK && ws_insert(a, e) != 0)
        st = hkc_fail(c->h, HK_STATUS_OUT_OF_MEMORY, "no memory for the workspace table");
    if (st == HK_STATUS_OK) {
        a->slabs->used++;
        goto out;
    }
fail:
    /* its memory stays free in the slab (a clear enqueued before a failure
     * only writes it) */
    free(e);
    e = NULL;
out:
    pthread_mutex_unlock(&hkc_lock);
    *out = e;
    return st;
}

hk_status_t hkc_ws_get(hkc_call_t *c, hkc_ws_t **out)
{
    unsigned long long key;
    uintptr_t capture;
    hk_status_t st = stream_key(c, &key, &capture);
    if (st != HK_STATUS_OK)
        return st;
    hkc_ws_t *e = ws_find(atomic_load_explicit(&c->arm->ws, memory_order_acquire), key, capture);
    if (!e)
        return ws_make(c, key, capture, out);
    *out = e;
    if (!atomic_load_explicit(&e->cleared, memory_order_acquire))
        return ws_clear(c, e);
    return HK_STATUS_OK;
}

/* cuMemFreeAsync on stream, in relaxed capture mode (stream is not
 * capturing: the kit checked). */
static CUresult relaxed_free_async(CUdeviceptr p, CUstream stream)
{
    int mode;
    CUresult r = hkc_relax(&mode);
    if (r != CUDA_SUCCESS)
        return r;
    r = hkc_cu.cuMemFreeAsync(p, stream);
    hkc_relaxed_end(mode);
    return r;
}

CUresult hkc_ws_free(hkc_arm_t *a, int ordered, CUstream stream)
{
    CUresult first = CUDA_SUCCESS;
    for (hkc_slab_t *s = a ? a->slabs : NULL; s; s = s->next) {
        if (!s->base)
            continue;
        CUresult r = ordered ? relaxed_free_async(s->base, stream) : hkc_relaxed_free(s->base);
        if (r != CUDA_SUCCESS) /* a give-back is tried twice (plugin/cuda/README.md) */
            r = ordered ? relaxed_free_async(s->base, stream) : hkc_relaxed_free(s->base);
        if (r == CUDA_SUCCESS)
            s->base = 0;
        else if (first == CUDA_SUCCESS)
            first = r;
    }
    return first;
}

void hkc_arm_free(hkc_arm_t *a)
{
    if (!a)
        return;
    hkc_ws_map_t *m = atomic_load(&a->ws);
    for (unsigned i = 0; m && i <= m->mask; i++)
        free(atomic_load_explicit(&m->slot[i], memory_order_relaxed));
    while (m) {
        hkc_ws_map_t *older = m->older;
        free(m);
        m = older;
    }
    while (a->slabs) {
        hkc_slab_t *next = a->slabs->next;
        free(a->slabs);
        a->slabs = next;
    }
    free(a);
}
