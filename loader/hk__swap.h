/* handlekit movable handles and swap: internals shared by
 * hk_loader_swaphold.c (held calls), hk_loader_swapstate.c (the record,
 * failures, reading the state), hk_loader_swapkern.c (libraries and kernels
 * loaded through movable handles), hk_loader_swapmod.c (modules: close and
 * reopen), hk_loader_mhandle.c (handles: memory, create, destroy),
 * hk_loader_swapfwd.c (the forwarding vtable and tables),
 * hk_loader_swapstep.c (a swap's calls into plugins under the step deadline,
 * and its steps after the switch) and hk_loader_swap.c (the swap), each
 * calling only those listed before it
 * (loader/README.md). Never installed.
 *
 * The call path. A movable handle has two bindings (a plugin handle and
 * copies of the plugin's tables) and an atomic pointer to the current one.
 * A call increments the current binding's in-flight count, then reads the
 * pointer again: if a swap moved it meanwhile, the call takes its increment
 * back and starts over; otherwise it calls through the binding and
 * decrements. The swap stores the new pointer and then waits for the old
 * binding's count to reach zero. Both sides use sequentially consistent
 * operations, so either the call sees the new pointer or the swap sees the
 * call: no call runs on a binding the swap has drained. A call that loaded
 * the old pointer and increments late only touches the counter, which lives
 * as long as the handle, and the drained binding is only written again by
 * the swap after the next one, when the same rule has kept every call out.
 *
 * Locks. swap->lock serialises swaps, creates and destroys of movable
 * handles, loads and unloads of libraries through them, module closes and
 * reopens; it is held for a whole swap, drain included. swap->kern_lock
 * guards the libraries' list, their kernels and implementations (the
 * switch holds it, so that a kernel found meanwhile is found in the new
 * implementation too); it is never held across a call that may wait.
 * swap->list_lock guards the handle and module arrays and every write of a
 * binding's fields; it is only held for short reads and writes, so state
 * queries never wait for a swap. mh->lock guards a handle's settings
 * (stream, pointer mode) and its message buffers; a swap holds the locks of
 * the handles it moves while it switches them. Order: swap->lock, then
 * kern_lock, then mh->lock (in the swap's list order), then list_lock, then
 * the loader's gate or lock. */
#ifndef HK__SWAP_H
#define HK__SWAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hk__loader.h"
#include "hk_blas1.h"
#include "hk_cuda.h"
#include "hk_kernels.h"
#include "hk_memory.h"
#include "hk_swap.h"

#define HK__MH_LIVE 0x686b6d68616e646cULL /* "hkmhandl": a live movable handle */
#define HK__MH_DEAD 0x646561646d68646cULL /* destroyed; its memory is kept for reuse */
#define HK__MH_MSG 1024

/* One implementation a movable handle can be bound to. Padded so that the
 * counter, written by every call, shares no cache line with what calls read. */
typedef struct hk__binding {
    _Alignas(64) atomic_uint inflight;
    _Alignas(64) hk_handle_t *raw; /* NULL when the slot is empty */
    hk_plugin_t *plugin;
    hk_vtable_t core;              /* copies taken when the binding was made */
    hk_blas1_v1_t blas1;
    hk_memory_v1_t memory;
    hk_kernels_v1_t kernels;
    hk_cuda_v1_t cuda;
    const struct hk__ext *ext;     /* the tables it does not forward (pins) */
} hk__binding_t;

struct hk_mhandle {
    _Alignas(64) atomic_uint_fast64_t magic; /* HK__MH_LIVE while live */
    _Atomic(hk__binding_t *) cur;
    atomic_uint_fast64_t generation;
    hk__binding_t slot[2];
    hk_loader_t *loader;
    hk_mhandle_t *next_free;     /* the pool's free list */
    pthread_mutex_t lock;        /* settings and msg */
    hk_create_info_t info;       /* as given at create, size normalised */
    hk_handle_info_t bound;      /* handle_info of the first handle; size 0: unknown */
    void *stream;                /* the last stream set through set_stream */
    hk_pointer_mode_t mode;      /* the last pointer mode set */
    uint64_t settings_gen;       /* bumped by every successful setter */
    hk__binding_t *held_from;    /* while held: the binding cur had (list_lock) */
    char msg[HK__MH_MSG];
    /* The loader's own refusal of the last failed call on the handle (a
     * kernel that is not the loader's, a slot the implementation lacks),
     * which last_error gives while own_err is set; a call the plugin
     * refuses clears it. Written under lock. */
    atomic_int own_err;
    char own_msg[HK__MH_MSG];
};

/* Per plugin that movable handles used: its module's state. */
typedef struct hk__swap_module {
    hk_plugin_t *plugin;
    atomic_int state; /* hk_module_state_t */
    atomic_uint_fast64_t closes;
    atomic_uint_fast64_t reopens;
} hk__swap_module_t;

struct hk__swap {
    pthread_mutex_t lock;
    pthread_mutex_t kern_lock;
    pthread_mutex_t list_lock;
    struct hk__mlib *libs; /* libraries loaded through movable handles (kern_lock) */
    hk_mhandle_t **handles;
    size_t nhandles, caphandles;
    hk__swap_module_t **modules;
    size_t nmodules, capmodules;
    atomic_int phase;
    atomic_uint_fast64_t generation, failed, closed, draining;
    atomic_uint_fast64_t last_switch_ns, last_drain_ns, max_switch_ns, max_drain_ns;
    /* the last swap's steps (hk_swap_state_t) */
    atomic_uint_fast64_t last_open_ns, last_verify_ns, last_create_ns, last_commit_ns;
    atomic_uint_fast64_t last_close_ns;
    /* calls held (see "Holding"): how often, the last and longest hold,
     * and how many the hold limit ended */
    atomic_uint_fast64_t holds, last_hold_ns, max_hold_ns, holds_cut;
    /* handle_destroy calls of swaps that failed, and the last one's status */
    atomic_uint_fast64_t destroys_failed;
    atomic_int last_destroy_status;
    struct hk__ext *exts; /* the plugins' tables for pins (swap->lock) */
    /* libraries live, and unloads from an implementation left that failed */
    atomic_uint_fast64_t libraries, unloads_failed;
};

/* ---- the call path ---- */

/* The pool of movable handles (hk_loader_mhandle.c): chunks never given
 * back while the process runs, so that a handle's memory stays the loader's
 * after its destroy. */
#define HK__POOL_MAX 24
extern hk_mhandle_t *hk__pool_base[HK__POOL_MAX]; /* written once, before publication */
extern size_t hk__pool_len[HK__POOL_MAX];
extern atomic_size_t hk__pool_chunks;

/* The live movable handle h names, or NULL: h must point at a handle of a
 * chunk (never read otherwise) whose magic says live. */
static inline hk_mhandle_t *hk__mh_of(const void *h)
{
    uintptr_t p = (uintptr_t)h;
    size_t n = atomic_load_explicit(&hk__pool_chunks, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        uintptr_t base = (uintptr_t)hk__pool_base[i];
        if (p < base || p - base >= hk__pool_len[i] * sizeof(hk_mhandle_t))
            continue;
        if ((p - base) % sizeof(hk_mhandle_t) != 0)
            return NULL;
        hk_mhandle_t *mh = (hk_mhandle_t *)(uintptr_t)h;
        return atomic_load_explicit(&mh->magic, memory_order_relaxed) == HK__MH_LIVE ? mh : NULL;
    }
    return NULL;
}

/* What a held movable handle's cur points at; never called through. */
extern hk__binding_t hk__held;

/* Waits until mh is no longer held (hk_loader_swaphold.c). */
void hk__mh_wait_released(hk_mhandle_t *mh);

/* One round of a wait loop: sched_yield for the first `yields` rounds, then
 * a 20 us sleep. */
void hk__swap_pause(unsigned spins, unsigned yields);

/* The movable handle whose forwarded call this thread is in, innermost
 * first (NULL: none): hk_loader_swap refuses to run inside such a call of
 * its own loader, whose drain would wait for that call, and so for itself.
 * Initial-exec: a plain load and store on the call path, where the default
 * model of a shared library calls __tls_get_addr. */
extern _Thread_local hk_mhandle_t *hk__in_call __attribute__((tls_model("initial-exec")));

/* Enters the current binding of mh and marks this thread as inside a call
 * on mh; *was receives the mark to give hk__mh_leave back (a slot may call
 * through another movable handle). */
static inline hk__binding_t *hk__mh_enter(hk_mhandle_t *mh, hk_mhandle_t **was)
{
    for (;;) {
        hk__binding_t *b = atomic_load_explicit(&mh->cur, memory_order_acquire);
        if (__builtin_expect(b == &hk__held, 0)) {
            hk__mh_wait_released(mh);
            continue;
        }
        atomic_fetch_add_explicit(&b->inflight, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&mh->cur, memory_order_seq_cst) == b) {
            *was = hk__in_call;
            hk__in_call = mh;
            return b;
        }
        atomic_fetch_sub_explicit(&b->inflight, 1, memory_order_release);
    }
}

static inline void hk__mh_leave(hk__binding_t *b, hk_mhandle_t *was)
{
    hk__in_call = was;
    atomic_fetch_sub_explicit(&b->inflight, 1, memory_order_release);
}

/* hk__mh_enter with mh->lock taken (setters, last_error): never waits for a
 * release while holding the lock, which a swap step may need. */
static inline hk__binding_t *hk__mh_enter_locked(hk_mhandle_t *mh, hk_mhandle_t **was)
{
    for (;;) {
        pthread_mutex_lock(&mh->lock);
        hk__binding_t *b = atomic_load_explicit(&mh->cur, memory_order_acquire);
        if (b != &hk__held) { /* one load: a hold may begin between two */
            atomic_fetch_add_explicit(&b->inflight, 1, memory_order_seq_cst);
            if (atomic_load_explicit(&mh->cur, memory_order_seq_cst) == b) {
                *was = hk__in_call;
                hk__in_call = mh;
                return b;
            }
            atomic_fetch_sub_explicit(&b->inflight, 1, memory_order_release);
        }
        pthread_mutex_unlock(&mh->lock);
        hk__mh_wait_released(mh);
    }
}

/* Whether this thread is inside a forwarded call through a movable handle
 * of loader (hk__in_call's handle cannot go meanwhile: its destroy is BUSY
 * while the call is in flight). */
static inline int hk__in_call_of(const hk_loader_t *loader)
{
    return hk__in_call && hk__in_call->loader == loader;
}

/* The binding mh runs on, a held one's included. Caller holds list_lock. */
static inline hk__binding_t *hk__mh_bound(hk_mhandle_t *mh)
{
    hk__binding_t *b = atomic_load(&mh->cur);
    return b == &hk__held ? mh->held_from : b;
}

/* ---- hk_loader_swaphold.c ---- */

/* The hold time when hk_swap_options_t.hold_after_us is 0. Under a flood
 * of launches a step that loads code waits for as long as the hold time
 * (docs/swap.md, "Choosing the defaults"): 2 ms keeps a prepare near 7 ms
 * on an H100 where 20 ms made it 22 ms. A step that takes longer than that
 * for its own reasons (a verification that loads a CUDA plugin's kernels:
 * 2-3 ms) is held too, for its last part: a bounded cost, see the limit. */
#define HK__HOLD_AFTER_DEFAULT_US 2000u
#define HK__HOLD_AFTER_MAX_US (INT64_C(86400) * 1000000) /* a day */
/* The hold limit when hk_swap_options_t.hold_max_us is 0. A code load or
 * unload that waits for the launches to pause gets in within a hold of
 * 0.4 ms (measured on an H100: the held steps ended within their first
 * three holds; tests/conformance, fact 25), and what is left of a longer
 * step gets its turn in the next hold. The limit was chosen as the flood's
 * budget (0.5 ms) less the scheduler's latency in releasing the callers;
 * but a caller released by the limit may still wait in its launch, 0.3 to
 * 0.8 ms on an H100, probably for driver work that got in during the hold
 * (docs/swap.md, "Choosing the defaults"). */
#define HK__HOLD_MAX_DEFAULT_US 400u

/* The watchdog of one swap step: when the step runs longer than after_ns
 * (0: never), every movable handle of sw is held until hk__guard_end, or
 * for max_ns at most (0: no limit); a hold so cut lets the calls run for
 * after_ns, then holds them again, until the step ends. */
typedef struct hk__guard {
    struct hk__swap *sw;
    uint64_t after_ns, max_ns, t_begin, t_held, held_ns;
    pthread_mutex_t m;
    pthread_cond_t cv;
    pthread_t tid;
    int started, done, held;
    unsigned cut, holds; /* holds cut by max_ns; holds in all */
} hk__guard_t;

/* Starts the watchdog (without one, when no thread can be made, the step
 * just runs unguarded). Caller holds swap->lock for the whole step. */
void hk__guard_begin(hk__guard_t *g, struct hk__swap *sw, uint64_t after_ns, uint64_t max_ns);

/* Ends the step: releases a hold, records the holds, stops the watchdog.
 * Returns the longest hold's length in ns (0: no hold); *holds and *cut
 * (each may be NULL) receive how many holds there were and how many of
 * them the hold limit ended. */
uint64_t hk__guard_end(hk__guard_t *g, unsigned *holds, unsigned *cut);

/* hk__guard_end, and a trace line naming step when it held the calls. */
void hk__guard_done(hk__guard_t *g, const char *step);

/* ---- hk_loader_swapstate.c ---- */

/* The loader's swap record, made on first use (which registers its hooks
 * with the loader: destroy is refused while a movable handle lives, and the
 * record is freed with the loader); NULL when out of memory. */
struct hk__swap *hk__swap_get(hk_loader_t *loader);

/* Records a failure line: keeps it for the loader's lifetime, makes it the
 * loader's last error and this thread's movable-handle message. Returns st. */
hk_status_t hk__swap_fail(hk_loader_t *loader, hk_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records the times of a swap that succeeded: t[] (call, opened,
 * verified, new handles made, switched), the commit call of a prepared swap
 * (else 0), then drained and closed. */
void hk__swap_record_times(struct hk__swap *sw, const uint64_t t[5], uint64_t t_commit,
                           uint64_t t_drained, uint64_t t_closed);

/* The calling thread's last failure of a movable-handle function ("" when
 * none), and the setter of it. */
const char *hk__mh_thread_msg(void);
void hk__mh_thread_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- hk_loader_swapfwd.c ---- */

/* A table or slot that movable handles forward, which old offers and neu
 * lacks: what names it ("table hk.blas1/1", "slot saxpy of hk.blas1/1")
 * and is returned; NULL when neu offers all of old's. */
const char *hk__fwd_lacking(const hk__binding_t *old, const hk__binding_t *neu, char *what,
                            size_t n);

/* ---- hk_loader_swapext.c: the tables movable handles do not forward ----
 *
 * Any table of an implementation other than the four the loader forwards
 * is reached through a pin (hk_mhandle_pin): the call path's protocol with
 * the implementation's own handle and table. The loader keeps a clamped
 * copy of each such table per plugin, for as long as its module is open;
 * a table pinned once through a movable handle is "used", and a swap
 * requires its new implementation to offer every used table with at least
 * the slots in use. */

typedef struct hk__ext_table {
    char *name;
    void *table;     /* the loader's clamped copy; starts with its size */
    size_t size;     /* that size */
    atomic_int used; /* pinned at least once (or taken over by a swap) */
} hk__ext_table_t;

typedef struct hk__ext {
    struct hk__ext *next; /* sw->exts: the record frees what is left */
    hk_plugin_t *plugin;
    size_t n;
    hk__ext_table_t t[];
} hk__ext_t;

/* The tables of plugin that movable handles do not forward, made at the
 * first need in each open period of its module (caller holds swap->lock);
 * NULL when out of memory. */
const hk__ext_t *hk__ext_of(struct hk__swap *sw, hk_plugin_t *plugin);

/* Frees plugin's copies: its module closes (no binding runs on it). Caller
 * holds swap->lock. */
void hk__ext_drop(struct hk__swap *sw, hk_plugin_t *plugin);

/* Frees every copy left: the record goes with the loader. */
void hk__ext_free_all(struct hk__swap *sw);

/* The entry named name, or NULL. */
hk__ext_table_t *hk__ext_find(const hk__ext_t *ext, const char *name);

/* A used table of old that neu lacks, or a slot of it neu lacks: 1 with
 * what ("table gen.ops/1", "slot 2 of gen.ops/1") filled; else 0. */
int hk__ext_lacking(const hk__ext_t *old, const hk__ext_t *neu, char *what, size_t n);

/* Marks in neu every table used in old: handles that move keep using them. */
void hk__ext_carry(const hk__ext_t *old, const hk__ext_t *neu);

/* ---- hk_loader_mhandle.c ---- */

/* Records "fn: not a live movable handle" (or NULL) as this thread's line.
 * Returns HK_STATUS_INVALID_HANDLE. */
hk_status_t hk__mh_not_live(const void *h, const char *fn);

/* Fills b (an empty slot) with plugin, raw and copies of its tables. Caller
 * holds list_lock, or the binding is not yet reachable. */
void hk__binding_fill(hk__binding_t *b, hk_plugin_t *plugin, hk_handle_t *raw);

/* Copies a plugin table clamped into the zeroed *dst of size bytes; 0 when
 * the plugin has no such table. */
int hk__table_copy(const hk_vtable_t *core, const char *name, void *dst, size_t size);

/* ---- hk_loader_swapkern.c: libraries and kernels of movable handles ----
 *
 * A library loaded through a movable handle is the loader's (hk__mlib_t): it
 * keeps the image, and the library the implementation made of it, in each
 * implementation it is loaded in: the one its handles run on, and during a
 * swap the new one too (HK__IMPLS). Its kernels (hk__mkern_t) keep the
 * implementation's kernel for each. Both are objects of registries
 * (common/lib/hk__registry.h), so a pointer that is not one of them is told
 * apart without being read through. A launch finds the kernel of the
 * implementation its binding names without a lock: the implementation's
 * plugin is published (release) after its kernels, and a kernel's slot
 * state is read again after its fields, so that a kernel unloaded meanwhile
 * is not taken for another one that reuses its memory. */

#define HK__IMPLS 2

typedef struct hk__mkern {
    _Atomic(struct hk__mlib *) lib;
    _Atomic(hk_kernel_t *) k[HK__IMPLS]; /* the kernel in lib->impl[i]; NULL: not found */
    char *name;
    struct hk__mkern *next; /* lib->kernels, under kern_lock */
} hk__mkern_t;

typedef struct hk__mlib {
    _Atomic(hk_loader_t *) loader;
    struct {
        _Atomic(hk_plugin_t *) plugin; /* launches find it here; NULL: not (yet) */
        hk_library_t *lib;              /* the implementation's library; NULL: none */
        int by_swap;                    /* loaded by the running swap */
    } impl[HK__IMPLS];
    unsigned char *image; /* the loader's copy */
    size_t size;
    hk__mkern_t *kernels;  /* under kern_lock */
    struct hk__mlib *next; /* sw->libs, under kern_lock */
} hk__mlib_t;

/* The kernel to give plugin's slots for kernel (a kernel pointer a program
 * got from a movable handle of loader), or NULL when kernel is not a live
 * kernel of loader's or its library is not loaded in plugin. No lock. */
hk_kernel_t *hk__kern_resolve(const hk_loader_t *loader, const hk_plugin_t *plugin,
                              const void *kernel);

/* Why hk__kern_resolve gave NULL, as "<slot>: ..." in why. */
void hk__kern_why(const hk_loader_t *loader, const hk_plugin_t *plugin, const void *kernel,
                  const char *slot, char *why, size_t n);

/* The slots that make and unmake the loader's objects, through binding b of
 * a movable handle of loader, entered by the caller. A refusal of the
 * loader's own fills why (else why[0] is NUL and the plugin's last error
 * says it). load and unload: the caller holds sw->lock. get_kernel sets
 * *retry (nothing done) when a swap moved mh off b meanwhile: enter again. */
hk_status_t hk__kern_load(struct hk__swap *sw, hk_loader_t *loader, const hk__binding_t *b,
                          const void *image, size_t size, hk_library_t **out, char *why,
                          size_t n);
hk_status_t hk__kern_unload(struct hk__swap *sw, hk_loader_t *loader, const hk__binding_t *b,
                            hk_library_t *lib, char *why, size_t n);
hk_status_t hk__kern_get(struct hk__swap *sw, hk_mhandle_t *mh, const hk__binding_t *b,
                         hk_library_t *lib, const char *name, hk_kernel_t **out, char *why,
                         size_t n, int *retry);

/* Unloads every library from b's implementation through b's handle when no
 * movable handle runs on that implementation any more (b is one that is
 * about to be destroyed); a library left in no implementation is freed.
 * Caller holds sw->lock. Returns the unloads that failed (the library is
 * forgotten anyway), the last one's line in why. */
unsigned hk__kern_drop(struct hk__swap *sw, const hk__binding_t *b, char *why, size_t n);

/* What a swap to `to` (tables fresh, verification handle vh; the movers'
 * old implementations from[nfrom] and new handles news[nnews]) does with
 * the libraries: the prepare loads each one whose handles move into `to`,
 * finds its kernels there and their functions in every new handle's
 * context; the commit finds kernels found since (under kern_lock, which it
 * keeps until hk__kern_commit_end) and publishes `to` just before the
 * switch; abandon unloads what the swap loaded; settle ends the swap's
 * claim on it. Caller holds sw->lock. A refusal fills why. */
hk_status_t hk__kern_prepare(struct hk__swap *sw, const hk__binding_t *fresh, hk_handle_t *vh,
                             hk_plugin_t *const *from, size_t nfrom, hk_handle_t *const *news,
                             size_t nnews, char *why, size_t n);
hk_status_t hk__kern_commit_begin(struct hk__swap *sw, const hk__binding_t *fresh,
                                  hk_handle_t *vh, char *why, size_t n);
void hk__kern_publish(struct hk__swap *sw, hk_plugin_t *to);
void hk__kern_commit_end(struct hk__swap *sw);
unsigned hk__kern_abandon(struct hk__swap *sw, const hk__binding_t *fresh, hk_handle_t *vh,
                          char *why, size_t n);
void hk__kern_settle(struct hk__swap *sw);

/* ---- hk_loader_swapmod.c ---- */

/* The module record of plugin (made when missing; NULL when out of memory).
 * Caller holds swap->lock. */
hk__swap_module_t *hk__swap_module(struct hk__swap *sw, hk_plugin_t *plugin);

/* Makes sure plugin's module is open: opens its file again when a swap
 * closed it. Caller holds swap->lock. On failure why says what was wrong. */
hk_status_t hk__swap_ensure_open(hk_loader_t *loader, hk_plugin_t *plugin, char *why, size_t n);

/* Closes plugin's module when nothing can reach it any more (see hk_swap.h,
 * step 6), and checks that it left the process. Caller holds swap->lock.
 * A plugin with a call stuck past its deadline is never closed. Returns OK,
 * or TIMED_OUT when its hk.trim/1 did not return within deadline_ns (0:
 * none): the module is then left open for good, and why says so. */
hk_status_t hk__swap_try_close(hk_loader_t *loader, struct hk__swap *sw, hk_plugin_t *plugin,
                               uint64_t deadline_ns, char *why, size_t n);

/* ---- a swap in progress (hk_loader_swapstep.c, hk_loader_swap.c) ---- */

typedef struct hk__mover {
    hk_mhandle_t *mh;
    hk__binding_t *old;    /* the binding it had when the swap began */
    hk_handle_t *raw;      /* the new plugin handle; NULL until made */
    void *stream;          /* the settings the new handle was given */
    hk_pointer_mode_t mode;
    uint64_t gen;
} hk__mover_t;

/* A swap in progress; the public hk_swap_prepared_t between prepare and
 * commit. */
typedef struct hk_swap_prepared {
    hk_loader_t *loader;
    struct hk__swap *sw;
    const char *from;
    hk_plugin_t *to;
    hk__binding_t fresh; /* the new plugin's tables (raw unused) */
    hk__mover_t *movers;
    size_t nmovers;
    int reopened; /* the new plugin's module was closed and this swap opened it */
    /* The verification handle, destroyed only after the switch: while it
     * lives, the new plugin keeps what its first handle loaded (a CUDA
     * plugin's kernels), so the new handles reuse it, and its destroy (which
     * may wait for the device) is not on the switch's clock. */
    hk_handle_t *vh;
    hk_create_info_t ci; /* where the verification handle is made */
    uint64_t t[5]; /* call, opened, verified, new handles made, switched */
    /* Made by hk_loader_swap_prepare: committed (or cancelled) later, by the
     * thread that prepared it (it holds the swap lock meanwhile). */
    int prepared;
    pthread_t owner;
    uint64_t t_commit; /* when hk_loader_swap_commit was called */
    uint64_t hold_after_ns; /* steps running longer hold the calls; 0: never */
    uint64_t hold_max_ns;   /* the longest a hold lasts; 0: no limit */
    uint64_t deadline_ns;   /* of each call into a plugin; 0: none */
    int switched;           /* the handles run the new plugin */
    int stuck;              /* a call into a plugin was given up at its deadline */
    const char *verified;   /* how the new plugin's verification was met
                               before the host's part (static text); NULL:
                               the host runs it */
    hk_swap_verify_fn verify; /* the host's own verification; NULL: none */
    void *verify_user;
    int keep_old;           /* hk_swap_options_t.keep_old: leave the old modules open */
    char stuck_why[640];    /* the first such call */
    unsigned destroys_failed; /* this swap's handle_destroy calls that failed */
    unsigned unloads_failed;  /* and unloads of libraries of movable handles */
    char destroy_why[512];    /* the last of them */
    char request[256]; /* for messages, cut */
    char why[768];
    hk_plugin_t *target; /* the plugin chosen by the caller, not by a request */
    int verify_only;     /* move nothing: verify target, then give the job up */
} hk__job_t;

/* hk_loader_swap to plugin itself rather than to what a request selects (the
 * watch: hk_loader_watch.c): the same steps, the same refusals, with the
 * plugin's path naming it in messages. With verify_only no handle moves: the
 * plugin is verified (tables of no handle, the verification that fits it, on
 * HK_DEVICE_CURRENT) and the job given up; OK when it passed. *moved (may
 * be NULL) receives the number of movable handles that moved. */
hk_status_t hk__swap_plugin(hk_loader_t *loader, hk_plugin_t *plugin,
                            const hk_swap_options_t *opts, int verify_only, size_t *moved);

/* Makes a handle of the swap's new plugin (what: "the verification
 * handle"...) with ci: on a helper thread within the job's deadline, or,
 * here set, on this thread without one (a create that binds the context
 * current on the swapping thread). On failure line holds the plugin's last
 * error; past the deadline the plugin is leaked, job->why says which call
 * hung, and it returns TIMED_OUT. */
hk_status_t hk__job_create(hk__job_t *job, const hk_create_info_t *ci, hk_handle_t **out,
                           const char *what, int here, char *line, size_t n);

/* Destroys raw, a handle the swap made or leaves behind (what: "an old
 * handle"...), through plugin's vtable vt within the job's deadline; a
 * plugin with a call stuck is not called again (the handle stays with its
 * module). A failure is counted for hk_swap_state_t, kept for the swap's
 * last error and logged; a call past the deadline leaks the plugin and is
 * kept as job->stuck_why. */
void hk__job_destroy(hk__job_t *job, const hk_vtable_t *vt, hk_plugin_t *plugin,
                     hk_handle_t *raw, const char *what);

/* After the switch: waiting for the calls on the old bindings; destroying
 * the old handles and the verification handle; closing the old modules
 * (olds[nmovers], reordered) that nothing reaches. */
void hk__job_drain_wait(hk__job_t *job);
void hk__job_drain(hk__job_t *job);
void hk__job_close_old(hk__job_t *job, hk_plugin_t **olds);

/* Gives up a swap before its switch: the new handles and the verification
 * handle go, a module this swap opened again is closed again. */
void hk__job_abandon(hk__job_t *job);

#endif /* HK__SWAP_H */
