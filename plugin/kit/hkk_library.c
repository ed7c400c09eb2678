/* handlekit kit: kernel images loaded once per process and launched in any
 * context (hk.kernels/1's semantics, for any plugin).
 *
 * A library is one cuLibraryLoadData: context-independent, its CUkernels
 * launch in every context of every device and survive a primary reset
 * (docs/contexts.md facts 4, 8). A kernel's CUfunction in one context is
 * cached by context ID (IDs are never reused), read without a lock, so a
 * launch after the first one in a context makes no driver call besides the
 * launch itself.
 *
 * Unloading: cuLibraryUnload waits for the library's running kernels
 * (fact 19) and its kernels die with it (fact 14). So an unload first marks
 * the library closing and then looks at who uses it: launches in progress
 * (counted around every use of a kernel) and bindings that launched one of
 * its kernels (their queued work). Either way it gives HK_STATUS_BUSY and
 * unmarks; otherwise the driver unloads with no lock held. The mark and the
 * count are sequentially consistent on both sides, so a launch either sees
 * the mark and stops, or is seen by the unload.
 *
 * Libraries and kernels live in registries of their own (hk__registry.h):
 * a stale or foreign pointer is told apart without being read through. A
 * call finds its kernel live, then counts itself on the kernel's library;
 * between the two it passes a gate (one of a few dozen counters, one per
 * thread as far as they go, so uncontended). An unload that went through
 * retires the library and its kernels, then waits until every gate is empty
 * before it frees them: a call that looked before the retirement and counts
 * itself after it still reads live memory, sees the mark and stops; one that
 * looks after it finds nothing live. The wait is over at once but for a call
 * between two atomic operations of its own, so a launch takes no lock.
 *
 * The module's unload (hkk_driver.c's destructor) gives back what is still
 * loaded: every loaded library is also on a list (loaded_libs), and
 * hkk_libraries_fini unloads those that no binding uses any more. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk__registry.h"
#include "hkk_internal.h"

#define HK__KIT_JIT_LOG 4096 /* bytes of each JIT log (error, info) */

/* A kernel's functions by context ID. Entries below n are published and
 * never change; a full table is replaced by a larger copy and the old one
 * kept (older) until the library goes, so a reader never reads freed
 * memory. */
typedef struct fn_table {
    atomic_uint n;
    unsigned cap;
    struct fn_table *older;
    struct {
        unsigned long long ctx_id;
        CUfunction fn;
    } e[];
} fn_table_t;

struct hk_kit_kernel {
    hk_kit_library_t *lib;
    CUkernel kernel;
    atomic_int nparams; /* its parameter count; -1: the driver cannot say; -2: not asked yet */
    char *name;
    _Atomic(fn_table_t *) fns;
    hk_kit_kernel_t *next; /* in lib->kernels; under lib->lock */
};

struct hk_kit_library {
    CUlibrary lib;
    pthread_mutex_t lock; /* kernels, their function tables */
    atomic_int closing;   /* an unload is deciding, or done */
    atomic_long inflight; /* uses of its kernels in progress */
    atomic_long refs;     /* bindings that launched one of its kernels */
    hk_kit_kernel_t *kernels;
    char *jit_log; /* error log, then info log; the driver may write them
                    * whenever it compiles, so they live with the library */
    hk_kit_library_t *prev_loaded, *next_loaded; /* loaded_libs; under loaded_lock */
};

/* Every library loaded and not unloaded, for the module's unload. */
static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_kit_library_t *loaded_libs;

static void loaded_add(hk_kit_library_t *L)
{
    pthread_mutex_lock(&loaded_lock);
    L->prev_loaded = NULL;
    L->next_loaded = loaded_libs;
    if (loaded_libs)
        loaded_libs->prev_loaded = L;
    loaded_libs = L;
    pthread_mutex_unlock(&loaded_lock);
}

static void loaded_remove(hk_kit_library_t *L)
{
    pthread_mutex_lock(&loaded_lock);
    if (L->prev_loaded)
        L->prev_loaded->next_loaded = L->next_loaded;
    else if (loaded_libs == L)
        loaded_libs = L->next_loaded;
    if (L->next_loaded)
        L->next_loaded->prev_loaded = L->prev_loaded;
    L->prev_loaded = L->next_loaded = NULL;
    pthread_mutex_unlock(&loaded_lock);
}

static hk__registry_t libraries = HK__REGISTRY_INIT(sizeof(struct hk_kit_library));
static hk__registry_t kernels = HK__REGISTRY_INIT(sizeof(struct hk_kit_kernel));

/* ---- gates: calls between a look at an object and a count on it ---- */

#define HK__KIT_GATES 64

typedef struct gate {
    atomic_long n; /* calls inside */
    char pad[64 - sizeof(atomic_long)];
} gate_t;

static _Alignas(64) gate_t gates[HK__KIT_GATES];
static atomic_uint gates_given;
static _Thread_local unsigned my_gate; /* 1 + the calling thread's gate; 0: none yet */

static unsigned gate_enter(void)
{
    unsigned g = my_gate;
    if (!g)
        my_gate = g = 1 + atomic_fetch_add_explicit(&gates_given, 1, memory_order_relaxed) %
                              HK__KIT_GATES;
    atomic_fetch_add(&gates[g - 1].n, 1);
    /* Pairs with gates_drain's fence: either the drain sees this call inside,
     * or this call's look that follows sees what the unload retired. */
    atomic_thread_fence(memory_order_seq_cst);
    return g - 1;
}

static void gate_leave(unsigned g)
{
    atomic_fetch_sub_explicit(&gates[g].n, 1, memory_order_release);
}

/* Returns once no call that may have looked at an object before it was
 * retired is still between its look and its count. */
static void gates_drain(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    for (unsigned i = 0; i < HK__KIT_GATES; i++)
        while (atomic_load_explicit(&gates[i].n, memory_order_acquire) != 0)
            sched_yield();
}

int hk_kit_library_live(const void *p)
{
    return hk__reg_live(&libraries, p);
}

int hk_kit_kernel_live(const void *p)
{
    return hk__reg_live(&kernels, p);
}

const char *hk_kit_kernel_name(const hk_kit_kernel_t *k)
{
    return k->name;
}

/* ---- loading ---- */

/* A load the driver refused: an image it cannot build is the caller's bad
 * input; the JIT compiler's first error line says why. */
static hk_status_t load_failed(hk_kit_bind_t *err_to, CUresult r, const char *call,
                               const char *kind, size_t size, const char *log)
{
    char cu[96];
    hk_status_t st;
    switch (r) {
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_INVALID_SOURCE:
        st = HK_STATUS_INVALID_VALUE;
        break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
        st = HK_STATUS_NOT_SUPPORTED;
        break;
    default:
        st = hk_kit_cu_status(r);
    }
    size_t n = log ? strcspn(log, "\r\n") : 0;
    return hk_kit_fail(err_to, st, "%s of a %s image (%zu bytes) failed: %s%s%.*s", call, kind,
                       size, hk_kit_cu_name(r, cu, sizeof cu), n ? ": " : "", (int)n,
                       n ? log : "");
}

/* While a stream capture forbids "unsafe" calls, the driver refuses an
 * unload and lets a load through but invalidates the capture
 * (docs/contexts.md fact 26): both run in the relaxed capture mode, which
 * such captures allow, so that neither ever breaks a capture. */
static CUresult unload_twice(CUlibrary lib)
{
    int mode = 0;
    CUresult relaxed = hk_kit_capture_relax(&mode);
    CUresult r = KCU.cuLibraryUnload(lib);
    if (r != CUDA_SUCCESS)
        r = KCU.cuLibraryUnload(lib);
    if (relaxed == CUDA_SUCCESS)
        hk_kit_capture_restore(mode);
    return r;
}

hk_status_t hk_kit_library_load(hk_kit_bind_t *err_to, const void *image, size_t size,
                                unsigned flags, hk_kit_library_t **out)
{
    const char *kind = NULL;
    if (!out)
        return hk_kit_fail(err_to, HK_STATUS_NULL_POINTER, "load: out is NULL");
    *out = NULL;
    if (!image)
        return hk_kit_fail(err_to, HK_STATUS_NULL_POINTER, "load: image is NULL");
    hk_status_t st = hkk_image_check(err_to, image, size, &kind);
    if (st != HK_STATUS_OK)
        return st;
    if (!KCU.cuLibraryLoadData)
        return hk_kit_fail(err_to, HK_STATUS_NO_DRIVER, "load before hk_kit_driver_load");
    void *copy = NULL;
    const void *given = hkk_image_padded(image, size, &copy);
    hk_kit_library_t *L = given ? hk__reg_take(&libraries) : NULL;
    if (!L) {
        free(copy);
        return hk_kit_fail(err_to, HK_STATUS_OUT_OF_MEMORY, "no memory for a library");
    }
    L->jit_log = calloc(2, HK__KIT_JIT_LOG);
    if (!L->jit_log) {
        hk__reg_put(&libraries, L);
        free(copy);
        return hk_kit_fail(err_to, HK_STATUS_OUT_OF_MEMORY, "no memory for the JIT logs");
    }
    CUjit_option opts[4] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *vals[4] = {L->jit_log, (void *)(uintptr_t)(HK__KIT_JIT_LOG - 1),
                     L->jit_log + HK__KIT_JIT_LOG, (void *)(uintptr_t)(HK__KIT_JIT_LOG - 1)};
    int mode = 0;
    CUresult r = hk_kit_capture_relax(&mode); /* see unload_twice */
    if (r != CUDA_SUCCESS) {
        free(copy);
        st = hk_kit_fail_cu(err_to, r, "load: cuThreadExchangeStreamCaptureMode");
        goto fail;
    }
    r = KCU.cuLibraryLoadData(&L->lib, given, opts, vals, 4, NULL, NULL, 0);
    hk_kit_capture_restore(mode);
    free(copy); /* the driver copied the image (docs/contexts.md fact 19) */
    if (r != CUDA_SUCCESS) {
        st = load_failed(err_to, r, "cuLibraryLoadData", kind, size, L->jit_log);
        goto fail;
    }
    if (flags & HK_KIT_LOAD_INTO_CURRENT) {
        /* Where the driver loads lazily, PTX is compiled when the library is
         * loaded into a context: make that happen now. */
        CUmodule m = NULL;
        r = KCU.cuLibraryGetModule(&m, L->lib);
        if (r != CUDA_SUCCESS) {
            st = load_failed(err_to, r, "cuLibraryGetModule", kind, size, L->jit_log);
            unload_twice(L->lib); /* refused twice: the load's failure is the one reported */
            goto fail;
        }
    }
    pthread_mutex_init(&L->lock, NULL);
    hk__reg_publish(&libraries, L);
    loaded_add(L);
    *out = L;
    return HK_STATUS_OK;
fail:
    free(L->jit_log);
    hk__reg_put(&libraries, L);
    return st;
}

/* ---- uses in progress ---- */

/* Counts a use of L in progress, unless an unload has marked it. The caller
 * is inside a gate, or holds a use already. */
static int lib_pin(hk_kit_library_t *L)
{
    atomic_fetch_add(&L->inflight, 1);
    if (!atomic_load(&L->closing))
        return 1;
    atomic_fetch_sub(&L->inflight, 1);
    return 0;
}

static void lib_unpin(hk_kit_library_t *L)
{
    atomic_fetch_sub(&L->inflight, 1);
}

/* Counts a use of k's library in progress, unless k is not live or its
 * library is being unloaded. Reads k only inside a gate, since an unload may
 * be retiring it meanwhile. */
static hk_status_t use_begin(hk_kit_bind_t *b, hk_kit_kernel_t *k, const char *what)
{
    char name[208];
    unsigned g = gate_enter();
    if (!hk_kit_kernel_live(k)) {
        gate_leave(g);
        return hk_kit_fail(b, HK_STATUS_INVALID_VALUE, "%s: %p is not a live kernel (its "
                           "library was unloaded?)", what, (void *)k);
    }
    if (lib_pin(k->lib)) {
        gate_leave(g);
        return HK_STATUS_OK;
    }
    snprintf(name, sizeof name, "%s", k->name);
    gate_leave(g);
    return hk_kit_fail(b, HK_STATUS_INVALID_VALUE,
                       "%s: the library of kernel %s is being unloaded", what, name);
}

static void use_end(hk_kit_kernel_t *k)
{
    lib_unpin(k->lib);
}

/* ---- kernels and their functions ---- */

/* Finds or makes the kernel called name; caller holds a use of L. */
static hk_status_t kernel_find_pinned(hk_kit_bind_t *err_to, hk_kit_library_t *L,
                                      const char *name, hk_kit_kernel_t **out)
{
    hk_status_t st = HK_STATUS_OK;
    pthread_mutex_lock(&L->lock);
    for (hk_kit_kernel_t *k = L->kernels; k; k = k->next)
        if (strcmp(k->name, name) == 0) {
            *out = k;
            goto out;
        }
    CUkernel ck = NULL;
    CUresult r = KCU.cuLibraryGetKernel(&ck, L->lib, name);
    if (r == CUDA_ERROR_NOT_FOUND) {
        st = hk_kit_fail(err_to, HK_STATUS_NOT_FOUND, "no kernel named '%.200s' in the library",
                         name);
        goto out;
    }
    if (r != CUDA_SUCCESS) {
        char cu[96];
        st = hk_kit_fail(err_to, hk_kit_cu_status(r), "cuLibraryGetKernel(%.200s) failed: %s",
                         name, hk_kit_cu_name(r, cu, sizeof cu));
        goto out;
    }
    hk_kit_kernel_t *k = hk__reg_take(&kernels);
    char *copy = k ? strdup(name) : NULL;
    if (!copy) {
        if (k)
            hk__reg_put(&kernels, k);
        st = hk_kit_fail(err_to, HK_STATUS_OUT_OF_MEMORY, "no memory for a kernel");
        goto out;
    }
    k->lib = L;
    k->kernel = ck;
    atomic_init(&k->nparams, -2); /* asked at its first launch */
    k->name = copy;
    k->next = L->kernels;
    L->kernels = k;
    hk__reg_publish(&kernels, k);
    *out = k;
out:
    pthread_mutex_unlock(&L->lock);
    return st;
}

hk_status_t hk_kit_kernel_find(hk_kit_bind_t *err_to, hk_kit_library_t *L, const char *name,
                               hk_kit_kernel_t **out)
{
    if (!out || !L || !name)
        return hk_kit_fail(err_to, HK_STATUS_NULL_POINTER, "get_kernel: %s is NULL",
                           !out ? "out" : !L ? "lib" : "name");
    *out = NULL;
    unsigned g = gate_enter();
    int live = hk_kit_library_live(L), pinned = live && lib_pin(L);
    gate_leave(g);
    if (!live)
        return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                           "get_kernel: %p is not a live library of this plugin", (void *)L);
    if (!pinned)
        return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                           "get_kernel: the library is being unloaded");
    hk_status_t st = kernel_find_pinned(err_to, L, name, out);
    lib_unpin(L);
    return st;
}

static CUfunction fn_lookup(const hk_kit_kernel_t *k, unsigned long long ctx_id)
{
    const fn_table_t *t = atomic_load_explicit(&((hk_kit_kernel_t *)k)->fns, memory_order_acquire);
    if (!t)
        return NULL;
    /* newest first: the context in use is most likely the last one added */
    for (unsigned i = atomic_load_explicit(&((fn_table_t *)t)->n, memory_order_acquire); i-- > 0;)
        if (t->e[i].ctx_id == ctx_id)
            return t->e[i].fn;
    return NULL;
}

/* Adds (ctx_id, fn); caller holds the library's lock. */
static int fn_add(hk_kit_kernel_t *k, unsigned long long ctx_id, CUfunction fn)
{
    fn_table_t *t = atomic_load_explicit(&k->fns, memory_order_relaxed);
    unsigned n = t ? atomic_load_explicit(&t->n, memory_order_relaxed) : 0;
    if (!t || n == t->cap) {
        unsigned cap = t ? 2 * t->cap : 4;
        fn_table_t *g = calloc(1, sizeof *g + cap * sizeof g->e[0]);
        if (!g)
            return -1;
        g->cap = cap;
        g->older = t;
        if (t)
            memcpy(g->e, t->e, n * sizeof g->e[0]);
        atomic_store_explicit(&g->n, n, memory_order_relaxed);
        atomic_store_explicit(&k->fns, g, memory_order_release);
        t = g;
    }
    t->e[n].ctx_id = ctx_id;
    t->e[n].fn = fn;
    atomic_store_explicit(&t->n, n + 1, memory_order_release);
    return 0;
}

/* The function of k in the current context; caller holds a use of k's
 * library. */
static hk_status_t function_of(hk_kit_kernel_t *k, unsigned long long ctx_id,
                               hk_kit_bind_t *err_to, CUfunction *out)
{
    hk_status_t st = HK_STATUS_OK;
    CUfunction fn = fn_lookup(k, ctx_id);
    if (fn) {
        *out = fn;
        return HK_STATUS_OK;
    }
    hk_kit_library_t *L = k->lib;
    pthread_mutex_lock(&L->lock);
    fn = fn_lookup(k, ctx_id); /* another thread may have added it meanwhile */
    if (!fn) {
        /* The kernel's first use in this context loads it there (lazy
         * loading), hence the lock: one thread does it. */
        CUresult r = KCU.cuKernelGetFunction(&fn, k->kernel);
        if (r != CUDA_SUCCESS) {
            char cu[96];
            st = hk_kit_fail(err_to, hk_kit_cu_status(r), "cuKernelGetFunction(%.200s) failed: %s",
                             k->name, hk_kit_cu_name(r, cu, sizeof cu));
        } else if (fn_add(k, ctx_id, fn) != 0) {
            st = hk_kit_fail(err_to, HK_STATUS_OUT_OF_MEMORY, "no memory for a function cache");
        }
    }
    pthread_mutex_unlock(&L->lock);
    *out = st == HK_STATUS_OK ? fn : NULL;
    return st;
}

hk_status_t hk_kit_kernel_function(hk_kit_kernel_t *k, unsigned long long ctx_id,
                                   hk_kit_bind_t *err_to, struct CUfunc_st **out)
{
    *out = NULL;
    hk_status_t st = use_begin(err_to, k, "get_function");
    if (st != HK_STATUS_OK)
        return st;
    st = function_of(k, ctx_id, err_to, out);
    use_end(k);
    return st;
}

static void kernel_free(hk_kit_kernel_t *k)
{
    fn_table_t *t = atomic_load(&k->fns);
    while (t) {
        fn_table_t *older = t->older;
        free(t);
        t = older;
    }
    free(k->name);
    hk__reg_put(&kernels, k);
}

/* ---- bindings' references ---- */

static int set_has(const hkk_libset_t *s, const hk_kit_library_t *L)
{
    for (unsigned i = 0; s && i < s->n; i++)
        if (s->lib[i] == L)
            return 1;
    return 0;
}

/* The binding's set with L added (add) or removed; the old set is kept
 * (older) for readers. Caller holds b->lock. */
static int set_change(hk_kit_bind_t *b, hk_kit_library_t *L, int add)
{
    hkk_libset_t *s = atomic_load_explicit(&b->libs, memory_order_relaxed);
    unsigned n = s ? s->n : 0;
    hkk_libset_t *g = calloc(1, sizeof *g + (n + 1) * sizeof g->lib[0]);
    if (!g)
        return -1;
    for (unsigned i = 0; i < n; i++)
        if (s->lib[i] != L)
            g->lib[g->n++] = s->lib[i];
    if (add)
        g->lib[g->n++] = L;
    g->older = s;
    atomic_store_explicit(&b->libs, g, memory_order_release);
    return 0;
}

/* The binding references L from its first launch of one of L's kernels: its
 * work may be queued until the binding is destroyed. */
static hk_status_t reference(hk_kit_bind_t *b, hk_kit_library_t *L)
{
    if (set_has(atomic_load_explicit(&b->libs, memory_order_acquire), L))
        return HK_STATUS_OK;
    hk_status_t st = HK_STATUS_OK;
    pthread_mutex_lock(&b->lock);
    if (!set_has(atomic_load_explicit(&b->libs, memory_order_relaxed), L)) {
        if (set_change(b, L, 1) == 0)
            atomic_fetch_add(&L->refs, 1);
        else
            st = hk_kit_fail(b, HK_STATUS_OUT_OF_MEMORY, "no memory for a library reference");
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

void hkk_libs_drop(hk_kit_bind_t *b)
{
    hkk_libset_t *s = atomic_load(&b->libs);
    for (unsigned i = 0; s && i < s->n; i++)
        atomic_fetch_sub(&s->lib[i]->refs, 1);
    while (s) {
        hkk_libset_t *older = s->older;
        free(s);
        s = older;
    }
    atomic_store(&b->libs, NULL);
}

/* ---- unload ---- */

/* Who still uses L, with the mark set: BUSY and the mark cleared, or OK. */
static hk_status_t check_unused(hk_kit_bind_t *caller, hk_kit_library_t *L, int *own)
{
    long inflight = atomic_load(&L->inflight);
    *own = caller && set_has(atomic_load(&caller->libs), L);
    long others = atomic_load(&L->refs) - *own;
    if (inflight <= 0 && others <= 0)
        return HK_STATUS_OK;
    atomic_store(&L->closing, 0);
    if (inflight > 0)
        return hk_kit_fail(caller, HK_STATUS_BUSY,
                           "unload: %ld use%s of the library (a launch or a look-up) in progress; "
                           "try again once %s returned", inflight, inflight == 1 ? "" : "s",
                           inflight == 1 ? "it has" : "they have");
    return hk_kit_fail(caller, HK_STATUS_BUSY,
                       "unload: %ld other handle%s launched the library's kernels and %s not "
                       "destroyed yet", others, others == 1 ? "" : "s",
                       others == 1 ? "is" : "are");
}

/* Frees an unloaded library and its kernels: retired first, so that no call
 * finds them live any more, then freed once no call that found them live
 * before is still between that look and its count on the library. */
static void library_free(hk_kit_library_t *L)
{
    hk__reg_retire(&libraries, L);
    pthread_mutex_lock(&L->lock);
    for (hk_kit_kernel_t *k = L->kernels; k; k = k->next)
        hk__reg_retire(&kernels, k);
    pthread_mutex_unlock(&L->lock);
    gates_drain();
    while (L->kernels) {
        hk_kit_kernel_t *k = L->kernels;
        L->kernels = k->next;
        kernel_free(k);
    }
    pthread_mutex_destroy(&L->lock);
    free(L->jit_log);
    hk__reg_put(&libraries, L);
}

hk_status_t hk_kit_library_unload(hk_kit_bind_t *caller, hk_kit_library_t *L)
{
    int own = 0, expected = 0;
    if (!L)
        return hk_kit_fail(caller, HK_STATUS_NULL_POINTER, "unload: lib is NULL");
    /* Inside a gate: another unload may free L meanwhile; whoever sets the
     * mark owns the unload, and nobody else frees L. */
    unsigned g = gate_enter();
    int live = hk_kit_library_live(L);
    int mine = live && atomic_compare_exchange_strong(&L->closing, &expected, 1);
    gate_leave(g);
    if (!live)
        return hk_kit_fail(caller, HK_STATUS_INVALID_VALUE,
                           "unload: %p is not a live library of this plugin (unloaded already?)",
                           (void *)L);
    if (!mine)
        return hk_kit_fail(caller, HK_STATUS_BUSY,
                           "unload: another thread is unloading the library");
    hk_status_t st = check_unused(caller, L, &own);
    if (st != HK_STATUS_OK)
        return st;
    /* No lock held: this waits for the library's running kernels. */
    CUresult r = unload_twice(L->lib);
    if (r != CUDA_SUCCESS) {
        atomic_store(&L->closing, 0); /* still loaded, still usable */
        return hk_kit_fail_cu(caller, r, "unload: cuLibraryUnload");
    }
    if (own) {
        pthread_mutex_lock(&caller->lock);
        if (set_change(caller, L, 0) == 0)
            atomic_fetch_sub(&L->refs, 1);
        /* else the reference stays in the set; the unbind drops it then */
        pthread_mutex_unlock(&caller->lock);
    }
    loaded_remove(L);
    library_free(L);
    return HK_STATUS_OK;
}

/* Called by the module's destructor, never in a fork() child: unloads every
 * library still loaded (those the plugin or its user did not unload, or whose
 * unload the driver refused), then frees the registries if nothing of them
 * is left. A library a binding still uses (a handle that launched one of its
 * kernels is live) stays, and so does its memory. Returns the libraries
 * left loaded. */
size_t hkk_libraries_fini(void)
{
    size_t left = 0;
    for (;;) {
        pthread_mutex_lock(&loaded_lock);
        hk_kit_library_t *L = loaded_libs;
        for (size_t i = 0; L && i < left; i++) /* the first `left` ones refused */
            L = L->next_loaded;
        pthread_mutex_unlock(&loaded_lock);
        if (!L)
            break;
        /* Every binding synchronised its context when it was destroyed, so
         * none of these libraries' kernels runs: the unload does not wait. */
        if (hk_kit_library_unload(NULL, L) != HK_STATUS_OK)
            left++;
    }
    if (left == 0) {
        hk__reg_fini(&kernels);
        hk__reg_fini(&libraries);
    }
    return left;
}

/* ---- attributes and launch ---- */

hk_status_t hk_kit_kernel_attributes(hk_kit_call_t *c, hk_kit_kernel_t *k,
                                     hk_kernel_attributes_t *attrs)
{
    static const struct {
        CUfunction_attribute attr;
        size_t off;
    } list[] = {
        {CU_FUNC_ATTRIBUTE_NUM_REGS, offsetof(hk_kernel_attributes_t, registers)},
        {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
         offsetof(hk_kernel_attributes_t, max_threads_per_block)},
        {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
         offsetof(hk_kernel_attributes_t, static_shared_bytes)},
        {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
         offsetof(hk_kernel_attributes_t, max_dynamic_shared_bytes)},
        {CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, offsetof(hk_kernel_attributes_t, const_bytes)},
        {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, offsetof(hk_kernel_attributes_t, local_bytes)},
        {CU_FUNC_ATTRIBUTE_PTX_VERSION, offsetof(hk_kernel_attributes_t, ptx_version)},
        {CU_FUNC_ATTRIBUTE_BINARY_VERSION, offsetof(hk_kernel_attributes_t, binary_version)},
    };
    hk_kit_bind_t *b = c->b;
    if (attrs->size < sizeof attrs->size)
        return hk_kit_fail(b, HK_STATUS_INVALID_VALUE,
                           "get_attributes: attrs->size %u is below 4 (the size field itself)",
                           attrs->size);
    hk_kernel_attributes_t v;
    memset(&v, 0, sizeof v);
    v.size = sizeof v;
    hk_status_t st = use_begin(b, k, "get_attributes");
    if (st != HK_STATUS_OK)
        return st;
    for (size_t i = 0; st == HK_STATUS_OK && i < sizeof list / sizeof list[0]; i++) {
        int value = 0;
        CUresult r = KCU.cuKernelGetAttribute(&value, list[i].attr, k->kernel, b->cudev);
        if (r != CUDA_SUCCESS) {
            char what[256];
            snprintf(what, sizeof what, "get_attributes: cuKernelGetAttribute(%d) of %.200s",
                     (int)list[i].attr, k->name);
            st = hk_kit_fail_cu(b, r, what);
        }
        memcpy((char *)&v + list[i].off, &value, sizeof value);
    }
    use_end(k);
    if (st == HK_STATUS_OK) {
        size_t n = attrs->size < sizeof v ? attrs->size : sizeof v;
        v.size = (uint32_t)n;
        memcpy(attrs, &v, n);
    }
    return st;
}

hk_status_t hk_kit_check_dims(hk_kit_bind_t *b, const uint32_t grid[3], const uint32_t block[3])
{
    static const char *const gname[3] = {"grid_x", "grid_y", "grid_z"};
    static const char *const bname[3] = {"block_x", "block_y", "block_z"};
    static const uint32_t gmax[3] = {2147483647u, 65535u, 65535u};
    static const uint32_t bmax[3] = {1024u, 1024u, 64u};
    for (int i = 0; i < 3; i++) {
        if (grid[i] == 0 || block[i] == 0)
            return hk_kit_fail(b, HK_STATUS_INVALID_VALUE, "launch: %s is 0",
                               grid[i] == 0 ? gname[i] : bname[i]);
        if (grid[i] > gmax[i])
            return hk_kit_fail(b, HK_STATUS_INVALID_VALUE, "launch: %s is %u, above %u",
                               gname[i], grid[i], gmax[i]);
        if (block[i] > bmax[i])
            return hk_kit_fail(b, HK_STATUS_INVALID_VALUE, "launch: %s is %u, above %u",
                               bname[i], block[i], bmax[i]);
    }
    unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
    if (threads > 1024)
        return hk_kit_fail(b, HK_STATUS_INVALID_VALUE,
                           "launch: a block of %llu threads (%u x %u x %u) is more than 1024",
                           threads, block[0], block[1], block[2]);
    return HK_STATUS_OK;
}

static hk_status_t launch_failed(hk_kit_call_t *c, hk_kit_kernel_t *k, CUresult r,
                                 const uint32_t grid[3], const uint32_t block[3],
                                 uint32_t shared)
{
    char cu[96];
    hk_status_t st = hk_kit_cu_status(r);
    if (r == CUDA_ERROR_INVALID_VALUE)
        st = HK_STATUS_INVALID_VALUE;
    else if (st == HK_STATUS_CUDA_ERROR)
        st = HK_STATUS_LAUNCH_FAILED;
    return hk_kit_fail(c->b, st,
                       "launch of %.200s: cuLaunchKernel failed: %s (grid %u x %u x %u, block "
                       "%u x %u x %u, %u shared bytes, device %d)", k->name,
                       hk_kit_cu_name(r, cu, sizeof cu), grid[0], grid[1], grid[2], block[0],
                       block[1], block[2], shared, c->b->device);
}

hk_status_t hk_kit_launch(hk_kit_call_t *c, hk_kit_kernel_t *k, const uint32_t grid[3],
                          const uint32_t block[3], uint32_t shared_bytes, void **args)
{
    hk_kit_bind_t *b = c->b;
    hk_status_t st = use_begin(b, k, "launch");
    if (st != HK_STATUS_OK)
        return st;
    CUfunction fn = NULL;
    int np = atomic_load_explicit(&k->nparams, memory_order_relaxed);
    if (np == -2) { /* two first launches may both ask: they get the same answer */
        np = hkk_param_count(k->kernel);
        atomic_store_explicit(&k->nparams, np, memory_order_relaxed);
    }
    st = hkk_check_args(b, k->name, np, args);
    if (st == HK_STATUS_OK)
        st = reference(b, k->lib);
    if (st == HK_STATUS_OK)
        st = function_of(k, c->arm->ctx_id, b, &fn);
    if (st == HK_STATUS_OK) {
        CUresult r = KCU.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1],
                                        block[2], shared_bytes, c->stream, args, NULL);
        if (r != CUDA_SUCCESS)
            st = launch_failed(c, k, r, grid, block, shared_bytes);
    }
    use_end(k);
    return st;
}
