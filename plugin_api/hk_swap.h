/* handlekit movable handles and live swap of implementations.
 *
 * A movable handle (hk_mhandle_t) is made through the loader and is not tied
 * to one plugin: every call goes to the implementation the handle is bound to
 * at that moment, and hk_loader_swap binds every movable handle to another
 * implementation while other threads keep calling. A host uses a movable
 * handle like a plugin handle: hk_mhandle_vtable() and hk_mhandle_get_table()
 * give a core vtable and tables of the plugin types (hk_vtable_t,
 * hk_blas1_v1_t, hk_memory_v1_t, hk_kernels_v1_t, hk_cuda_v1_t) whose slots
 * forward to the current implementation, and hk_mhandle_handle() is the
 * handle to pass to them.
 *
 * The loader knows every movable handle and counts the calls in flight on
 * each, with atomics only: the call path takes no lock, and waits for a swap
 * only in the case "Held calls" below. A swap
 *   1. resolves its request (hk_loader_select rules) and reopens the plugin's
 *      snapshot (hk_loader_options_t.load_in_place: its file) if an earlier
 *      swap closed it;
 *   2. refuses a swap across memory domains (the caller's buffers would not
 *      follow): the domain is the plugin's HK_PLUGIN_MEMORY_HOST or
 *      HK_PLUGIN_MEMORY_CUDA flag, or for a plugin without one the device
 *      its handles report through handle_info (-1: host memory);
 *   3. verifies the new plugin on a handle of it, with what fits the
 *      plugin: its own known-answer workload when it offers hk.selfcheck/1
 *      (plugin_api/hk_selfcheck.h); else, when it offers hk.blas1/1 and
 *      hk.memory/1, the loader's workload through them, every result
 *      checked; else only the handle's create. It runs in a probe process
 *      when isolation is on (a crash, exit or hang there refuses the swap;
 *      a pass there is not repeated in the host): the loader's verifier,
 *      kept for every verification (hk_loader_options_t.verifier), else in
 *      the host; a build
 *      that passed on the device before is not verified again (docs/swap.md,
 *      "One verification per build"); a build that fails it (a wrong
 *      result, a crash, exit or hang in the probe process) is never
 *      selected by that loader again (HK_SELECT_FAILED). Then the host's
 *      own verification runs when it gives one (hk_swap_options_t.verify). The handle lives
 *      until step 6, so that what the plugin's first handle loaded stays
 *      loaded for the new handles. The new plugin must offer what the
 *      handles that move can call: every table and slot of the old
 *      implementation that movable handles forward (the core's, hk.blas1/1,
 *      hk.memory/1, hk.kernels/1, hk.cuda/1), and every other table the
 *      handles pinned (hk_mhandle_pin) with at least the slots the old one
 *      sets;
 *   4. creates, for every movable handle that moves, a handle of the new
 *      plugin with the same state: the same create flags; the same device
 *      and context (a handle bound to a primary context is made with that
 *      device given explicitly; one bound to another context, a user or green
 *      context, is made with HK_DEVICE_CURRENT and so needs that context
 *      current on the thread that swaps); the same stream and pointer mode;
 *      the new handle must report the same device and context ID; and
 *      loads every library loaded through those handles (see "User
 *      kernels") into the new plugin, finds the same kernels there and their
 *      functions in each new handle's context;
 *   5. switches every handle at a call boundary: calls already in flight
 *      finish on the old handle, calls that start later run on the new one;
 *   6. waits until the old handles have no call in flight, destroys them
 *      and the verification handle, and closes each old plugin's module once
 *      no movable handle is bound to it, no call is in flight in it, nobody
 *      holds hk_plugin_acquire on it, and it declared HK_PLUGIN_UNLOAD_SAFE;
 *      the module is then checked to be gone from the process
 *      (/proc/self/maps). The libraries are unloaded from an old plugin
 *      through the last of its old handles, before it is destroyed.
 * A failure in steps 1-4 changes nothing: every handle keeps its
 * implementation, and the loader's last error says why.
 *
 * User kernels. The forwarding hk.kernels/1 gives the program the loader's
 * own library and kernel objects (hk_library_t, hk_kernel_t): the loader
 * keeps each library's image and maps its objects to those of the
 * implementation a handle runs on, so a kernel stays valid, and its
 * launches right, across any number of swaps. A library loaded through a
 * movable handle serves the loader's movable handles that run on the same
 * implementation (a plugin's library serves that plugin's handles); a swap
 * takes it along with the handles, and a new plugin that cannot load its
 * image (no hk.kernels/1 table, no code for the device) refuses the swap.
 * The rules of hk_kernels.h hold for the loader's objects: a pointer that is
 * not a live object of this loader's movable handles (NULL aside: NULL_POINTER)
 * gives INVALID_VALUE without being read through, and the plugin's own
 * statuses (BUSY while other handles that launched the library's kernels
 * live, NOT_FOUND...) come through. A launch takes no lock: it counts itself
 * in flight on the handle like every call and finds the implementation's
 * kernel with atomic reads. unload unloads the library from the handle's
 * implementation and frees the loader's copy; destroying the last movable
 * handle on an implementation unloads the libraries from it, and a library
 * left in none is freed (its objects are then not live). load and unload
 * wait for a running swap, as creates do; get_kernel, launch and the
 * queries never do.
 *
 * Held calls. A CUDA driver lets launches into a context share what loading
 * code into the context and making a stream there need alone: while other
 * threads launch without pause, the verification (whose first handle loads
 * the new plugin's kernels) or the close of an old module can wait for as
 * long as the launches go on (docs/contexts.md, fact 25). So when one of the
 * swap's steps that may load or unload code runs longer than the hold time
 * (hk_swap_options_t.hold_after_us, 2 ms by default), the calls through
 * every movable handle of the loader wait at their next call boundary until
 * that step ends (calls in flight finish first), and the statistics count
 * the hold (HK_SWAP_STAT_HOLDS). A step that ends in time holds nothing. A hold never lasts
 * longer than the hold limit (hk_swap_options_t.hold_max_us, 0.4 ms
 * by default): then the calls are released, and held again one hold time
 * later if the step still runs, and so on until it ends (driver work that
 * needs the launches to pause gets its turn in each hold); the swap's
 * outcome does not change.
 *
 * A plugin whose module a swap closed stays in the loader's lists (its name,
 * version, path and reports remain valid), but its vtable copy reads as all
 * NULL slots until a movable-handle request or a swap resolves to it again,
 * which opens the same file again (it must be the same file, answering its
 * negotiation as before). Raw handles made through hk_plugin_vtable() and
 * tables taken from hk_plugin_table() are invisible to the loader: a host
 * that keeps them holds hk_plugin_acquire() on the plugin for as long as it
 * uses them, and an acquired plugin is never closed.
 *
 * Keeping the old build open. With hk_swap_options_t.keep_old the modules a
 * swap moves handles away from are not closed: their code, and what they
 * keep between handles (hk-cuda: its kernel library, loaded in the device
 * contexts), stay in the process, and a swap back to such a build opens
 * nothing and loads no code again. That is what makes a swap back cheap
 * when loading code is not (a driver loads code into a context only between
 * launches: under a flood of launches the load waits, see "Held calls").
 * The price is the old build's memory until the module is closed.
 *
 * Deadlines. Each call a swap makes into a plugin's handle_create,
 * handle_destroy or hk.trim/1 runs on a thread of its own, and the swap
 * waits for it up to the deadline (hk_swap_options_t.deadline_us; by
 * default the loader's hk_loader_options_t.deadline_ms, HK_STEP_DEADLINE_MS:
 * 30 s). A call still running then is given up, and the swap returns
 * HK_STATUS_TIMED_OUT with a line naming the call and the plugin ("hk-cpu
 * 1.0.12 handle_create (the verification handle) did not return within 300
 * ms (the deadline); ..."). Given up before the switch, nothing moved and
 * the old implementation keeps serving; after it (an old handle's destroy,
 * the old module's trim) every handle runs the new plugin. A thread stuck
 * in plugin code cannot be stopped, so the plugin's module is leaked on
 * purpose: kept mapped and never closed, by a swap or by hk_loader_destroy,
 * since its code may still run. The swap calls that plugin no more (its
 * other handles the swap would destroy stay with it), later swaps to it are
 * refused (TIMED_OUT), and a handle that the stuck create returns later is
 * destroyed by the thread that made it. Creates and destroys of movable
 * handles wait for a running swap, so for a stuck one only until its
 * deadline. A create bound to a context the old handle does not own runs on
 * the swapping thread, where that context is current, without a deadline.
 *
 * A swap from inside a call. hk_loader_swap and hk_loader_swap_prepare
 * called on a thread that is inside a call through a movable handle of the
 * same loader (a plugin slot, or a host callback such a slot calls) would
 * wait for that call to drain, so for ever: they return HK_STATUS_BUSY.
 *
 * Thread rules: every function here is [thread-safe] unless it says
 * otherwise; swaps, creates and destroys of movable handles of one loader are
 * serialised by the loader (a create or destroy waits for a running swap).
 * The forwarding slots follow the rules of the slots they forward to
 * ([handle-safe]). */
#ifndef HK_SWAP_H
#define HK_SWAP_H

#include <stddef.h>
#include <stdint.h>

#include "hk_abi.h"
#include "hk_loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Memory-domain flags of hk_negotiate_answer_t.flags (ABI 1.2); defined here
 * too so that this header serves hosts built against ABI 1.1 headers. */
#ifndef HK_PLUGIN_MEMORY_HOST
#define HK_PLUGIN_MEMORY_HOST 0x2u /* the plugin's memory is host memory */
#endif
#ifndef HK_PLUGIN_MEMORY_CUDA
#define HK_PLUGIN_MEMORY_CUDA 0x4u /* the plugin's memory is CUDA device memory */
#endif

typedef struct hk_mhandle hk_mhandle_t;

/* Creates a movable handle on the plugin that request resolves to
 * (hk_loader_select: "NAME", "NAME@RANGE" or a path). info as for
 * handle_create (NULL: defaults; size below 12: HK_STATUS_INVALID_VALUE);
 * it is kept and used again at every swap. On success the caller owns *out
 * and frees it with hk_mhandle_destroy. Returns OK, NULL_POINTER (loader,
 * request or out NULL), INVALID_VALUE, what hk_loader_select returns, what
 * the plugin's handle_create returns, OUT_OF_MEMORY. On failure *out is NULL
 * and the reason is in hk_loader_last_error and in
 * hk_mhandle_last_error_copy(NULL, ...) on this thread. */
hk_status_t hk_mhandle_create(hk_loader_t *loader, const char *request,
                              const hk_create_info_t *info, hk_mhandle_t **out);

/* The same on a plugin already chosen (owned by its loader). */
hk_status_t hk_mhandle_create_on(hk_plugin_t *plugin, const hk_create_info_t *info,
                                 hk_mhandle_t **out);

/* [not-concurrent with calls on this handle] Destroys the movable handle and
 * the plugin handle it is bound to. Returns INVALID_HANDLE for NULL or a
 * handle that is not live, BUSY (and destroys nothing) when it sees a call in
 * flight on it, else the status of the plugin's handle_destroy (the movable
 * handle is gone in every case but INVALID_HANDLE and BUSY). A destroy waits
 * for a swap that is running on its loader. The last movable handle on its
 * implementation first unloads from it the libraries loaded through movable
 * handles (see "User kernels"). The module of the plugin stays open (only a
 * swap closes modules, and hk_loader_destroy). */
hk_status_t hk_mhandle_destroy(hk_mhandle_t *mh);

/* The handle to pass to the forwarding vtable and tables: mh itself, typed
 * as a handle; NULL for NULL. Valid until hk_mhandle_destroy. */
hk_handle_t *hk_mhandle_handle(hk_mhandle_t *mh);

/* The forwarding core vtable (static storage, never NULL). Its slots take
 * hk_mhandle_handle() handles and forward to the current implementation:
 * set_stream, get_stream, set_pointer_mode, get_pointer_mode, handle_info,
 * synchronize, last_error; set_stream and set_pointer_mode are remembered
 * and given to the next implementation at a swap. handle_destroy is
 * hk_mhandle_destroy; handle_create returns HK_STATUS_NOT_SUPPORTED (movable
 * handles are made with hk_mhandle_create); get_table and enum_tables offer
 * the forwarding tables (all four, whatever the implementation offers).
 * last_error returns a copy owned by the movable handle, valid until the
 * next last_error on it from any thread (NULL or not live: this thread's
 * last failure of a movable-handle function); after a call the loader
 * refused itself (a slot the implementation lacks, a kernel that is not
 * the loader's) it is the loader's line, after one the implementation
 * refused, the implementation's. A slot the current implementation lacks
 * returns HK_STATUS_NOT_SUPPORTED. A
 * handle that is not live gives HK_STATUS_INVALID_HANDLE; the loader
 * recognises its own handles from its records and reads no other memory. */
const hk_vtable_t *hk_mhandle_vtable(void);

/* Copies the forwarding table named name ("hk.blas1/1", "hk.memory/1",
 * "hk.kernels/1", "hk.cuda/1"; see "User kernels" above) into
 * the caller's table of size bytes: min(size, the loader's sizeof) bytes, the
 * rest zeroed, and the copy's size field set to the bytes copied. Returns
 * NULL_POINTER (name or table NULL), INVALID_VALUE (size smaller than the
 * size field), NOT_FOUND (no such table). */
hk_status_t hk_mhandle_get_table(const char *name, void *table, size_t size);

/* Copies the last error of the implementation mh is bound to (NULL or not
 * live: this thread's last failure of a movable-handle function) into buf,
 * cut to len - 1 bytes and NUL-terminated. Returns INVALID_HANDLE for a
 * handle not live (buf then holds this thread's line), NULL_POINTER for a
 * NULL buf or len 0. */
hk_status_t hk_mhandle_last_error_copy(hk_mhandle_t *mh, char *buf, size_t len);

/* A call on a table the loader does not forward (a plugin's own ops, its
 * self-check), held to the implementation a movable handle is bound to. */
typedef struct hk_mhandle_pin {
    uint32_t size;        /* set by the caller to sizeof as it knows it */
    hk_handle_t *handle;  /* the implementation's own handle: give it to the
                             table's slots */
    const void *table;    /* the implementation's table (the loader's clamped
                             copy; it starts with its size field) */
    hk_plugin_t *plugin;  /* the implementation, owned by the loader */
    void *internal[2];    /* the loader's; internal[0] is NULL once unpinned */
} hk_mhandle_pin_t;

/* [thread-safe] Pins mh to its current implementation for the length of
 * one call, and gives that implementation's handle and its table named
 * table (any table of the plugin but hk.trim/1; the four forwarded ones
 * too) in *pin. Until hk_mhandle_unpin(pin) the pin counts as a call in
 * flight: a swap switches mh to another implementation meanwhile, but
 * waits for the pin before it destroys the old handle, so the pinned
 * handle and table stay valid; the next pin gets the new implementation.
 * Like a forwarded call it waits while the calls are held ("Held calls").
 * A table pinned once is in use: a swap refuses a new implementation that
 * lacks it or a slot of it the old one sets. Pin for one call and unpin
 * at once; never keep a pin across a wait for something another thread's
 * swap may wait for (its own swap included). Returns OK; NULL_POINTER
 * (table or pin NULL); INVALID_VALUE (pin->size below sizeof as of this
 * version); INVALID_HANDLE (mh not live); NOT_FOUND (the implementation
 * offers no such table: the handle's last error says so). On failure
 * nothing is pinned. The per-call cost is measured by hk-bench (P9
 * "pinned"). */
hk_status_t hk_mhandle_pin(hk_mhandle_t *mh, const char *table, hk_mhandle_pin_t *pin);

/* [thread-safe] Ends a pin, on the thread that made it (NULL, or one
 * ended already: nothing). */
void hk_mhandle_unpin(hk_mhandle_pin_t *pin);

typedef struct hk_mhandle_state {
    uint32_t size;        /* set by the caller to sizeof as it knows it */
    hk_plugin_t *plugin;  /* the current implementation, owned by the loader */
    uint64_t generation;  /* how often this handle was switched */
    uint64_t inflight;    /* calls in flight on it now, old implementation included */
} hk_mhandle_state_t;

/* Fills min(state->size, sizeof) bytes of *state (a snapshot: a swap may
 * switch the handle right after). Returns INVALID_HANDLE, NULL_POINTER,
 * INVALID_VALUE (size below 4). */
hk_status_t hk_mhandle_state(hk_mhandle_t *mh, hk_mhandle_state_t *state);

/* A host's verification of a new implementation before a swap moves
 * handles to it (hk_swap_options_t.verify). [not-concurrent]: it runs on the
 * swapping thread, once per swap. */
typedef hk_status_t (*hk_swap_verify_fn)(void *user, hk_plugin_t *plugin, hk_handle_t *handle,
                                         char *why, size_t why_len);

typedef struct hk_swap_options {
    uint32_t size;     /* sizeof(hk_swap_options_t) as the caller knows it */
    const char *from;  /* move only the movable handles whose current plugin has
                          this name; NULL: every movable handle of the loader */
    /* The hold time, in microseconds (added after the fields above): when a
     * step that may load or unload code in a device context (the prepare:
     * verification and new handles; after the switch: drain, destroy and
     * close; giving a swap up) runs longer, calls through every movable
     * handle of the loader wait at their next boundary until the step ends
     * (see "Held calls" above). 0: the default, 2000 (2 ms); negative:
     * never hold; above a day: a day. */
    int64_t hold_after_us;
    /* The hold limit, in microseconds (added after the fields above): a
     * hold never lasts longer. When it is reached, every held call is
     * released; a step still running one hold time later holds them again,
     * and so on (see "Held calls" above): the swap's outcome is the same.
     * 0: the default, 400 (0.4 ms); negative: no limit (a hold lasts until
     * its step ends); above a day: a day. */
    int64_t hold_max_us;
    /* The deadline of each call a step makes into a plugin (handle_create,
     * handle_destroy, hk.trim/1), in microseconds (added after the fields
     * above): a call still running then is given up and so is the swap
     * (see "Deadlines" above). 0: the loader's (hk_loader_options_t
     * .deadline_ms, by default HK_STEP_DEADLINE_MS, 30 s); negative: none
     * (each call runs on the swapping thread, for as long as it takes);
     * above a day: a day. */
    int64_t deadline_us;
    /* The host's own verification (added after the fields above): called
     * on the verification handle of the new implementation in the host,
     * after the verification that fits the plugin passed (step 3), with the
     * plugin to find its tables (hk_plugin_get_table) and its vtable. It
     * returns HK_STATUS_OK, or a status and a one-line reason in why (up to
     * why_len bytes, NUL-terminated), which refuses the swap. NULL: none. */
    hk_swap_verify_fn verify;
    void *verify_user;     /* given to verify as it is */
    /* Added after the fields above. Nonzero: the modules this swap moves
     * handles away from stay open after the drain (no hk.trim/1, no close),
     * with their code and what they keep between handles still loaded, so
     * that a swap back to one of them opens nothing again and loads no code
     * into a device context again (see "Keeping the old build open"). Such
     * a module stays open until a later swap moves handles away from it
     * without keep_old and nothing reaches it, or hk_loader_destroy. 0 (the
     * default): closed after the drain when nothing reaches it. */
    uint32_t keep_old;
} hk_swap_options_t;

/* Binds movable handles to the plugin that request resolves to (see the file
 * comment for the steps). opts may be NULL (every movable handle). Handles
 * already bound to that plugin stay as they are; with no handle to move the
 * new plugin is still verified. Waits until the old handles are drained and
 * destroyed before it returns. *to (may be NULL) receives the new plugin on
 * success. Returns:
 *   OK             every handle that had to move runs the new plugin
 *   NULL_POINTER   loader or request NULL (no last error without a loader)
 *   INVALID_VALUE  opts->size below 4
 *   BUSY           called on a thread inside a call through a movable
 *                  handle of this loader (see "A swap from inside a call")
 *   TIMED_OUT      a step's handle_create, handle_destroy or hk.trim/1 did
 *                  not return within the deadline (see "Deadlines"): given
 *                  up before the switch nothing moved; after it every
 *                  handle that had to move runs the new plugin (*to is
 *                  set) and the last error starts "swap to <request>: ";
 *                  also a swap to a plugin with a call given up so
 *   what hk_loader_select returns; LOAD_FAILED, INSECURE or NOT_FOUND when
 *                  a closed plugin cannot be opened again (no descriptor
 *                  left; loaded in place: its file changed on disk,
 *                  writable by others, no entry point)
 *   NOT_SUPPORTED  the new plugin lacks a table or slot the old implementation
 *                  offers (a forwarded one, or one the handles pinned: the
 *                  reason names it); the memory domains differ
 *                  or one is unknown; a handle's device or context cannot be
 *                  bound again; it offers no hk.kernels/1 that could take the
 *                  libraries loaded through the handles that move
 *   LOAD_FAILED    the loader's verification workload computed a wrong
 *                  result, or the verification crashed, exited or hung in the
 *                  probe process
 *   the status of the plugin's self-check or of the host's verify callback
 *                  when it refuses (INTERNAL: a wrong result)
 *   the status of the new plugin's handle_create, set_stream,
 *                  set_pointer_mode or a table slot when one fails (its
 *                  hk.kernels/1 load of a library's image, say: "<name>
 *                  <version> cannot load a library loaded through movable
 *                  handles ...")
 *   OUT_OF_MEMORY
 * On failure (but TIMED_OUT after the switch) nothing moved;
 * hk_loader_last_error starts with "swap to <request> refused: " and says
 * why. A handle_destroy that fails during a
 * swap (the handle is gone anyway) does not change its status; it is
 * counted (HK_SWAP_STAT_DESTROYS_FAILED, HK_SWAP_STAT_LAST_DESTROY_STATUS) and
 * named in hk_loader_last_error: "swap to <request>: N handle_destroy
 * call(s) failed; the last: ...", after the reason of a refusal. */
hk_status_t hk_loader_swap(hk_loader_t *loader, const char *request,
                           const hk_swap_options_t *opts, hk_plugin_t **to);

/* The same swap in two calls, so that the slow part (opening the plugin,
 * verifying it, making the new handles: milliseconds for a CUDA plugin whose
 * module loads its kernels) happens before the moment the host chooses for
 * the switch itself. */
typedef struct hk_swap_prepared hk_swap_prepared_t;

/* [thread-safe] Does everything hk_loader_swap does before the switch
 * (resolve, open, memory domain, verification, new handles with the old ones'
 * state); on success *prepared (not NULL) waits for hk_loader_swap_commit or
 * hk_loader_swap_cancel, which the calling thread must make. Meanwhile every
 * handle keeps running its current implementation and settings may change
 * (they are given to the new handles at the commit), but creates, destroys
 * and other swaps of this loader's movable handles wait: the calling thread
 * must make none of those (nor a load or unload of a library through a
 * movable handle) before it commits or cancels. Returns what
 * hk_loader_swap returns (NULL_POINTER also for prepared NULL); on failure
 * *prepared is NULL and nothing is left to cancel. */
hk_status_t hk_loader_swap_prepare(hk_loader_t *loader, const char *request,
                                   const hk_swap_options_t *opts, hk_swap_prepared_t **prepared);

/* [not-concurrent] From the thread that prepared it: switches every handle
 * at once, at a call boundary, then drains, destroys and closes as
 * hk_loader_swap does, and frees prepared. *to (may be NULL) receives the new
 * plugin on success. HK_SWAP_STAT_LAST_SWITCH_NS then counts from this
 * call. Returns OK; the new plugin's status when giving it a setting
 * changed since prepare failed (nothing moved; prepared is freed, the new
 * handles destroyed); NULL_POINTER; INVALID_VALUE from another thread
 * (nothing done, prepared still waits for its own thread). */
hk_status_t hk_loader_swap_commit(hk_swap_prepared_t *prepared, hk_plugin_t **to);

/* [not-concurrent] From the thread that prepared it: gives up the swap
 * (nothing moved; the new handles are destroyed, a module the prepare opened
 * again is closed again) and frees prepared. Returns OK, NULL_POINTER, or
 * INVALID_VALUE from another thread. */
hk_status_t hk_loader_swap_cancel(hk_swap_prepared_t *prepared);

typedef enum hk_swap_phase {
    HK_SWAP_IDLE = 0,     /* no swap running */
    HK_SWAP_PENDING = 1,  /* resolving, verifying, making the new handles */
    HK_SWAP_DRAINING = 2, /* switched; waiting for calls on old handles */
    HK_SWAP_CLOSING = 3   /* closing modules nothing uses any more */
} hk_swap_phase_t;

/* What a host acts on: the phase and what is live now. The counters and
 * times of the swaps are statistics, read with hk_loader_swap_stats. */
typedef struct hk_swap_state {
    uint32_t size;            /* set by the caller to sizeof as it knows it */
    hk_swap_phase_t phase;
    uint64_t handles;         /* live movable handles */
    uint64_t inflight;        /* calls in flight through them */
    uint64_t draining;        /* old handles switched away from, not yet destroyed */
    uint64_t libraries;       /* libraries loaded through movable handles, live */
} hk_swap_state_t;

/* Fills min(state->size, sizeof) bytes of *state. Never waits for a running
 * swap. Returns NULL_POINTER, INVALID_VALUE (size below 4). */
hk_status_t hk_loader_swap_state(hk_loader_t *loader, hk_swap_state_t *state);

/* The statistics of a loader's swaps: each one number (uint64_t) at an index
 * of its own. An index never changes meaning; a later version of the
 * loader only adds indices at the end, so a host reads the ones it knows
 * and a generic tool lists them all by name (hk_swap_stat_name). Times
 * are in nanoseconds (_ns). */
typedef enum hk_swap_stat {
    HK_SWAP_STAT_SWAPS = 0,           /* swaps that succeeded on this loader */
    HK_SWAP_STAT_REFUSED = 1,         /* swaps refused */
    HK_SWAP_STAT_MODULES_CLOSED = 2,  /* modules closed by swaps and gone from the
                                         process */
    HK_SWAP_STAT_LAST_SWITCH_NS = 3,  /* last swap: from the call (hk_loader_swap, or
                                         hk_loader_swap_commit of a prepared swap)
                                         until every handle ran the new implementation */
    HK_SWAP_STAT_LAST_DRAIN_NS = 4,   /* last swap: from then until the old handles were
                                         drained and destroyed (and the verification
                                         handle, kept until after the switch) */
    HK_SWAP_STAT_MAX_SWITCH_NS = 5,   /* the longest of each over this loader's swaps */
    HK_SWAP_STAT_MAX_DRAIN_NS = 6,
    /* The last swap step by step. The four add up to LAST_SWITCH_NS; for a
     * prepared swap the first three say what the prepare took and
     * LAST_COMMIT_NS is LAST_SWITCH_NS. */
    HK_SWAP_STAT_LAST_OPEN_NS = 7,    /* resolving the request, and opening the plugin's
                                         file again when a swap had closed it */
    HK_SWAP_STAT_LAST_VERIFY_NS = 8,  /* tables, memory domain, and the verification
                                         workload on a new handle (its create included:
                                         a freshly opened module loads its kernels there) */
    HK_SWAP_STAT_LAST_CREATE_NS = 9,  /* making the new handles with the old ones' state */
    HK_SWAP_STAT_LAST_COMMIT_NS = 10, /* switching every handle at once */
    HK_SWAP_STAT_LAST_CLOSE_NS = 11,  /* after the drain: closing the old modules and
                                         checking that they left the process */
    /* Held calls (see "Held calls" above). */
    HK_SWAP_STAT_HOLDS = 12,          /* holds of the calls, over this loader's swaps */
    HK_SWAP_STAT_LAST_HOLD_NS = 13,   /* the longest hold of the last step that held */
    HK_SWAP_STAT_MAX_HOLD_NS = 14,    /* the longest hold */
    HK_SWAP_STAT_HOLDS_CUT = 15,      /* holds ended by the hold limit (hold_max_us) */
    HK_SWAP_STAT_DESTROYS_FAILED = 16, /* handle_destroy calls of swaps that failed: old
                                          handles, verification handles, the new handles
                                          of a refused swap (each handle is gone anyway) */
    HK_SWAP_STAT_UNLOADS_FAILED = 17, /* unloads of libraries loaded through movable
                                         handles, from an implementation that no movable
                                         handle runs on any more, that failed (the
                                         library is forgotten anyway) */
    HK_SWAP_STAT_LAST_DESTROY_STATUS = 18, /* the last failed destroy's hk_status_t;
                                              HK_STATUS_OK (0) when none */
    HK_SWAP_STAT__COUNT = 19          /* how many this header knows: not a statistic */
} hk_swap_stat_t;

/* [thread-safe] Reads the first count statistics of loader into
 * values[0..count) (a snapshot, each read on its own; never waits for a
 * running swap). An index the loader does not know (count above what it
 * knows) reads 0. *known (may be NULL) receives how many the loader knows,
 * HK_SWAP_STAT__COUNT of its own version. Returns OK; NULL_POINTER (loader
 * NULL, or values NULL with count above 0). */
hk_status_t hk_loader_swap_stats(hk_loader_t *loader, uint64_t *values, size_t count,
                                 size_t *known);

/* The name of a statistic, its enumerator's lower-case tail ("swaps",
 * "last_switch_ns", "last_destroy_status"); "unknown" outside the list;
 * never NULL. */
const char *hk_swap_stat_name(hk_swap_stat_t stat);

typedef enum hk_module_state {
    HK_MODULE_OPEN = 0,        /* mapped and usable */
    HK_MODULE_CLOSED = 1,      /* closed by a swap and gone from the process */
    HK_MODULE_STILL_MAPPED = 2 /* closed by a swap, but the file is still mapped
                                  (another reference to it exists in the
                                  process, or /proc/self/maps was unreadable) */
} hk_module_state_t;

typedef struct hk_swap_plugin_state {
    uint32_t size;            /* set by the caller to sizeof as it knows it */
    hk_module_state_t module;
    uint64_t handles;         /* movable handles bound to this plugin */
    uint64_t inflight;        /* calls in flight in it through movable handles */
    uint64_t draining;        /* its old handles not yet destroyed by a swap */
    uint64_t closes;          /* times a swap closed its module */
    uint64_t reopens;         /* times its module was opened again */
} hk_swap_plugin_state_t;

/* Fills min(state->size, sizeof) bytes of *state for one plugin. Never waits
 * for a running swap. Returns NULL_POINTER, INVALID_VALUE (size below 4). */
hk_status_t hk_plugin_swap_state(hk_plugin_t *plugin, hk_swap_plugin_state_t *state);

/* "idle", "pending", "draining", "closing"; "open", "closed", "still-mapped";
 * "unknown" outside the lists; never NULL. */
const char *hk_swap_phase_name(hk_swap_phase_t phase);
const char *hk_module_state_name(hk_module_state_t state);

#ifdef __cplusplus
}
#endif

#endif /* HK_SWAP_H */
