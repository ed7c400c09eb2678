/* handlekit kit: the context contract (docs/contexts.md) as a small static
 * library, for anyone who writes a CUDA handle library with handlekit.
 *
 * It does what makes a library that launches its own kernels through the CUDA
 * driver API behave like a library of the CUDA runtime: open the driver (no
 * link to libcuda) and take its entry points through cuGetProcAddress; bind a
 * handle at create to what is current (or to a device's primary context) and
 * hold the primary's retain; guard every call (make the handle's context
 * current only when needed, restore the caller's, check the context's ID,
 * re-arm after a reset through a callback of the library); check streams;
 * notice fork(); keep the messages behind last_error; tell live handles from
 * anything else; and load kernel images once per process, launching them in
 * any context. hk-cuda is built on it; examples/hk-example shows a plugin of
 * its own on it, and plugin/kit/README.md walks through it.
 *
 * Linking: libhkkit.a, built with -fPIC and hidden visibility, is linked into
 * the plugin (pkg-config handlekit-kit); its names stay hidden there, so each
 * plugin has its own copy and its own state. The plugin includes <cuda.h> for
 * the driver's types; this header needs none: CUcontext, CUstream and
 * CUfunction are the struct pointers cuda.h declares (struct CUctx_st * ...),
 * a CUdevice and a CUresult are passed as int.
 *
 * Errors: a function that fails returns a status of hk_status.h and records
 * one line in the binding it was given (hk_kit_last_error), or, given NULL,
 * in the calling thread's create message (hk_kit_last_error(NULL)). The kit
 * never prints and never exits, unless asked to trace.
 *
 * Debug trace: with HK_TRACE=1 (or 2, 3) in the environment the kit writes one
 * line per decision (the driver file opened or why not, which context a
 * handle was bound to and why, primary retains given back, re-arms after a
 * reset, refusals; at 2 also every push of a handle's context over the
 * caller's and its restore) to stderr or to HK_TRACE_FILE. Both are read
 * once, with secure_getenv, at the first decision. Off (unset, empty, 0) it
 * writes nothing and creates no file, and a call whose context is already
 * current pays nothing for it. docs/trace.md has the levels and every line.
 *
 * Thread tags as in hk_abi.h: [thread-safe], [handle-safe] (any threads on one
 * binding at once), [not-concurrent]. */
#ifndef HK_KIT_H
#define HK_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "hk_kernels.h"
#include "hk_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_KIT_VERSION 1

struct CUctx_st;    /* CUcontext */
struct CUstream_st; /* CUstream */
struct CUfunc_st;   /* CUfunction */

typedef struct hk_kit_bind hk_kit_bind_t; /* a handle's binding: opaque */

/* ---- the driver ---- */

/* One entry point to take: name as cuGetProcAddress knows it ("cuMemAlloc"),
 * the API version that fixes its signature (the N of cudaTypedefs.h's
 * PFN_cuMemAlloc_vN), and where to store it. */
typedef struct hk_kit_entry {
    const char *name;
    int version;
    void **slot;
} hk_kit_entry_t;

/* [thread-safe] Opens the driver once for the process: libcuda.so.1, or the
 * file named by $HK_CUDA_DRIVER (ignored in privileged processes; refused
 * unless it and every directory above it are safe, see plugin/kit/README.md),
 * takes the kit's entry points, calls cuInit and checks that the driver
 * supports min_version (CUDA_VERSION of the toolkit that built the kernels).
 * Later calls return HK_STATUS_OK at once. Statuses: NO_DRIVER, NO_DEVICE,
 * DRIVER_TOO_OLD, FORKED (a fork() child of a CUDA process), with the reason
 * in the create message. Registers the fork handler (hk_kit_fork_watch). */
hk_status_t hk_kit_driver_load(int min_version);

/* [thread-safe] Takes count entry points into their slots, after
 * hk_kit_driver_load. A missing one → HK_STATUS_NO_DRIVER or
 * HK_STATUS_DRIVER_TOO_OLD naming it, in the create message; slots taken
 * before it stay set. */
hk_status_t hk_kit_driver_take(const hk_kit_entry_t *entries, size_t count);

/* [thread-safe] Registers, once, the fork handler that marks a fork() child. */
void hk_kit_fork_watch(void);

/* [thread-safe] 1 in the child of a fork() made after hk_kit_fork_watch. */
int hk_kit_forked(void);

/* [thread-safe] Names the plugin in the kit's debug trace lines ("hk
 * <pid>:<tid> <name> ctx: ..."); without a call they say "kit". The first
 * call with a non-empty name wins (up to 31 bytes; spaces and bytes outside
 * printable ASCII read '?'); NULL or "" is ignored. Prints nothing itself and
 * reads no environment; call it before hk_kit_driver_load. */
void hk_kit_trace_name(const char *name);

/* ---- messages ---- */

/* [thread-safe] Records the message for b (NULL: the calling thread's create
 * message) and returns st. */
hk_status_t hk_kit_fail(hk_kit_bind_t *b, hk_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* [thread-safe] Records "<what> failed: <CUDA error name> (<code>) (handle on
 * device N)" and returns the status of result (hk_kit_cu_status). */
hk_status_t hk_kit_fail_cu(hk_kit_bind_t *b, int result, const char *what);

/* [thread-safe] The status for a CUresult: OUT_OF_MEMORY, CONTEXT_DESTROYED,
 * INVALID_DEVICE, NO_DEVICE, FORKED (NOT_INITIALIZED in a fork child), else
 * CUDA_ERROR; OK for CUDA_SUCCESS. */
hk_status_t hk_kit_cu_status(int result);

/* [thread-safe] "CUDA_ERROR_OUT_OF_MEMORY (2)" into buf; returns buf. Works
 * before the driver is loaded ("CUDA error (2)"). */
const char *hk_kit_cu_name(int result, char *buf, size_t len);

/* [handle-safe] The last message recorded for b, or the calling thread's
 * create message for NULL, copied into a per-thread buffer: valid until the
 * calling thread's next hk_kit_last_error. Never NULL. For the vtable's
 * last_error slot (after checking that the handle is live). */
const char *hk_kit_last_error(const hk_kit_bind_t *b);

/* [thread-safe] The vtable's last_error_copy (hk_abi.h) for b or NULL, after
 * the plugin has checked that the handle is live. */
hk_status_t hk_kit_last_error_copy(const hk_kit_bind_t *b, char *buf, size_t len,
                                   size_t *needed);

/* ---- handles: live or not, without reading through the pointer ---- */

#define HK_KIT_HANDLE_MAX 448 /* the largest handle object, in bytes */

/* [thread-safe] A zeroed object of bytes (at most HK_KIT_HANDLE_MAX) from the
 * plugin's handle registry, not live yet; NULL when no memory is left or
 * bytes is too large. The plugin fills it and then publishes it. */
void *hk_kit_handle_take(size_t bytes);

/* [thread-safe] Makes a taken object live: hk_kit_handle_live says 1 from now. */
void hk_kit_handle_publish(void *handle);

/* [thread-safe] 1 when p is a live object of this plugin's registry, else 0.
 * Reads nothing through p unless p lies inside the registry's own memory, so
 * NULL, destroyed handles and other plugins' pointers are safe to ask about. */
int hk_kit_handle_live(const void *p);

/* [thread-safe] Makes a live object dead; returns 1 when this call did it, 0
 * when it was not live (two destroys racing: one wins). The memory stays the
 * registry's. For a fork() child, where hk_kit_handle_put's lock may be held. */
int hk_kit_handle_retire(void *handle);

/* [thread-safe] Gives a taken object back (retiring it first); its memory is
 * reused only after many other destroys, so stale pointers read as dead. */
void hk_kit_handle_put(void *handle);

/* ---- binding a handle, and the per-call guard ---- */

/* What a handle made in one incarnation of its context: the plugin's struct
 * starts with this. The kit sets ctx_id and older; the plugin never frees an
 * arm itself. */
typedef struct hk_kit_arm {
    unsigned long long ctx_id; /* the context ID this was made in */
    struct hk_kit_arm *older;  /* the arm it replaced (kept until unbind) */
} hk_kit_arm_t;

/* The plugin's callbacks. user is what hk_kit_bind was given. */
typedef struct hk_kit_ops {
    /* Makes the per-context state (functions, workspace) for incarnation
     * ctx_id of the binding's context, which is current. Called at bind and
     * again when the call guard finds a reset primary (the reset re-arm);
     * under the binding's lock, never concurrently for one binding. Returns
     * OK with *out set (calloc'd by the plugin, first member hk_kit_arm_t),
     * or a failure recorded with hk_kit_fail(err_to, ...) after giving back
     * what it made. May be NULL: then the kit keeps a bare hk_kit_arm_t. */
    hk_status_t (*arm)(hk_kit_bind_t *b, void *user, unsigned long long ctx_id,
                       hk_kit_bind_t *err_to, hk_kit_arm_t **out);
    /* Frees the device memory of a, made in the incarnation that is current,
     * alive, and whose work through the handle is done (hk_kit_unbind).
     * When hk_kit_release_stream(b, &s) says so, frees in stream order on s
     * (cuMemFreeAsync; the kit waits for s afterwards), which, unlike
     * cuMemFree, does not wait for other threads' launches to pause
     * (docs/contexts.md fact 30); otherwise at once. Tries every block;
     * returns the first failure recorded with hk_kit_fail(b, ...). May be
     * NULL. */
    hk_status_t (*release)(hk_kit_bind_t *b, void *user, hk_kit_arm_t *a);
    /* Frees the host memory of a (and a itself). May be NULL when arm is. */
    void (*free_arm)(void *user, hk_kit_arm_t *a);
} hk_kit_ops_t;

/* [thread-safe] Binds a new handle per docs/contexts.md: device
 * HK_DEVICE_CURRENT (-1) binds to what is current (nothing: device 0's
 * primary, which stays current; a primary: it, retained; a user or green
 * context: it, not owned), an ordinal to that device's primary (retained; the
 * caller's context left alone); then calls ops->arm in the bound context.
 * After hk_kit_driver_load. On success *out is the binding (freed by
 * hk_kit_unbind); on failure *out is NULL, nothing is held, the caller's
 * context is as it was, and the create message says why (INVALID_DEVICE,
 * NO_DEVICE, CONTEXT_DESTROYED, driver failures, what arm returned). ops must
 * outlive the binding. */
hk_status_t hk_kit_bind(int device, const hk_kit_ops_t *ops, void *user, hk_kit_bind_t **out);

/* [not-concurrent with any other call on b] The destroy half: waits for the
 * work issued through the binding (the one stream its calls ran on, with
 * cuStreamSynchronize, when it can; else its whole context with
 * cuCtxSynchronize: docs/contexts.md, "Destroy"), calls ops->release if the
 * incarnation it armed is still alive, gives back every primary retain it
 * holds (also after a reset; while the primary is alive, one of them goes to
 * the kit, which keeps one per device until hk_kit_trim or the plugin's
 * unload, see docs/contexts.md), drops its library references, frees every
 * arm and b. Goes on past a failing step and returns the first failure, whose
 * message is then the create message (b is gone). The caller's context is
 * left as it was. In a fork() child it only frees host memory. */
hk_status_t hk_kit_unbind(hk_kit_bind_t *b);

/* [thread-safe] Gives back what the plugin keeps between handles: first what
 * the plugin itself keeps, through the function it set with
 * hk_kit_set_trim (hk-cuda: its kernel library when no handle uses it);
 * then the memory blocks kept for the next create (hk_kit_keep_block, below);
 * then the primary
 * retains the kit keeps (one per device where a handle bound a primary and
 * was destroyed while it was alive), so that a primary nobody else retains
 * is torn down now rather than at unload; the next handle there builds it
 * again. Live handles keep their own. A host calls it through the plugin's
 * hk.trim/1 table (hk_trim.h) before it closes the module, and the module's
 * unload (the kit's destructor) does the same. A kept retain whose context was reset since still counts and is given
 * back once; one somebody else released already is forgotten. Returns OK, or
 * the status of a release the driver refused twice (that retain stays kept,
 * for a later trim), with the reason in the create message
 * (hk_kit_last_error(NULL)). In a fork() child it does nothing. */
hk_status_t hk_kit_trim(void);

/* ---- memory kept between handles ----
 *
 * A handle's memory, freed at destroy and made again at the next create,
 * costs a process whose handles come and go (a swap replaces every handle of
 * a plugin) two waits per block: cuMemFree, cuMemFreeHost and the
 * allocations wait for a pause in other threads' launches. A release
 * (ops->release) may instead hand a block to the kit, and a later arm
 * (ops->arm) in the same context incarnation take it back. The kit owns a
 * kept block until then, and gives every one back at hk_kit_trim or the
 * module's unload, in its context if that context still lives in the
 * block's incarnation (the memory of a context reset or destroyed since went
 * with it). A block is matched by kind and size alone: the plugin picks the
 * sizes it asks for (its own size classes). */
typedef enum hk_kit_block_kind {
    HK_KIT_BLOCK_DEVICE = 1, /* from cuMemAlloc: dev, given back with cuMemFree */
    HK_KIT_BLOCK_HOST = 2,   /* from cuMemHostAlloc or cuMemAllocHost: host (and dev
                                when it is mapped, else 0), given back with
                                cuMemFreeHost */
} hk_kit_block_kind_t;

typedef struct hk_kit_block {
    hk_kit_block_kind_t kind;
    size_t size;     /* bytes; nonzero */
    unsigned long long dev; /* DEVICE: the memory (a CUdeviceptr); HOST: its device
                               address, or 0 */
    void *host;      /* HOST: the memory; DEVICE: NULL */
} hk_kit_block_t;

/* The most blocks the kit keeps at a time, over every context. */
#define HK_KIT_KEPT_BLOCKS 64

/* [thread-safe] From ops->release (b's context current, its work done),
 * ctx_id the incarnation the block was made in: 1 when the kit keeps the
 * block (it owns it from now on), 0 when it does not (HK_KIT_KEPT_BLOCKS
 * kept already, a malformed block, b NULL, ctx_id 0, a fork() child): the
 * caller still owns it and frees it. Keeping forgets the blocks of an
 * earlier incarnation of b's context (gone with it). */
int hk_kit_keep_block(const hk_kit_bind_t *b, unsigned long long ctx_id,
                      const hk_kit_block_t *blk);

/* [thread-safe] From ops->arm, or a call, in incarnation ctx_id: 1 with *out
 * a block of that kind and size kept in that incarnation, which the caller
 * owns from now on; 0 with *out zeroed when there is none (or out NULL). */
int hk_kit_take_block(unsigned long long ctx_id, hk_kit_block_kind_t kind, size_t size,
                      hk_kit_block_t *out);

/* [thread-safe] How many blocks the kit keeps now (for tests and tools). */
unsigned hk_kit_kept_blocks(void);

/* [thread-safe] Sets the plugin's part of hk_kit_trim (NULL: none): fn gives
 * back what the plugin keeps between handles and returns OK or the first
 * failure, with the reason in the create message. */
void hk_kit_set_trim(hk_status_t (*fn)(void));

/* [not-concurrent] Within ops->release only: 1 with *s the stream on which
 * to free in stream order (cuMemFreeAsync), which the kit waits for after
 * release; 0 when the frees must be done at once (cuMemFree): the kit
 * waited for the whole context, or for nothing it could name. */
int hk_kit_release_stream(const hk_kit_bind_t *b, struct CUstream_st **s);

/* One call's state, filled by hk_kit_begin: read it, do not change it. */
typedef struct hk_kit_call {
    hk_kit_bind_t *b;
    hk_kit_arm_t *arm;          /* the state of the live incarnation */
    struct CUctx_st *prev;      /* the caller's current context */
    int switched;               /* the binding's context was pushed over it */
    struct CUstream_st *stream; /* the stream setting of this call */
    unsigned long long stream_id; /* its driver ID when set_stream learnt it, else 0 */
} hk_kit_call_t;

/* [handle-safe] The per-call guard: FORKED in a fork child; checks the
 * context by its ID (a destroyed user context → CONTEXT_DESTROYED; a reset
 * primary is re-armed through ops->arm, or CONTEXT_RESET when the handle's
 * stream died with it); makes the binding's context current if it is not
 * (pushed over the caller's); reads the stream setting. On failure the
 * caller's context is as it was and b's message says why. Costs two driver
 * queries (current context, its ID) when nothing needs doing. */
hk_status_t hk_kit_begin(hk_kit_bind_t *b, hk_kit_call_t *c);

/* [handle-safe] Ends a call begun with OK: pops the binding's context if
 * hk_kit_begin pushed it, and returns st (the status of the call's own work):
 * a pop the driver refuses twice is written to b's message but never turns a
 * call whose work was done into a failure. */
hk_status_t hk_kit_end(hk_kit_call_t *c, hk_status_t st);

/* [handle-safe] Sets the stream of later calls (the set_stream slot): a
 * stream of another context → HK_STATUS_STREAM_MISMATCH naming both devices,
 * the setting unchanged; NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are
 * taken as they are. A call running at once uses the old or the new setting,
 * never a mix. what prefixes the messages ("set_stream"). */
hk_status_t hk_kit_set_stream(hk_kit_bind_t *b, struct CUstream_st *stream, const char *what);

/* [handle-safe] The stream setting (no driver call). */
struct CUstream_st *hk_kit_get_stream(const hk_kit_bind_t *b);

/* ---- stream capture (docs/contexts.md, "Stream capture") ---- */

/* [handle-safe] Within a call (hk_kit_begin): the identity of the call's
 * stream, a stream set with hk_kit_set_stream (not NULL, CU_STREAM_LEGACY or
 * CU_STREAM_PER_THREAD), for keying per-stream state. OK with *id the
 * stream's driver ID (unique for the life of the process; asked once, then
 * kept with the setting) and *capture 0; or, while the stream is being
 * captured, where asking its ID would fail and invalidate the capture,
 * *id 0 and *capture the ID of the capture sequence (unique for the life of
 * the process). A capture that something else already invalidated gives
 * HK_STATUS_NOT_SUPPORTED; driver failures their status. Never refused by
 * the driver during a capture. */
hk_status_t hk_kit_stream_ident(hk_kit_call_t *c, unsigned long long *id,
                                unsigned long long *capture);

/* [handle-safe] Within a call: HK_STATUS_OK when the call may wait here for
 * work on its stream (a synchronise, a synchronous copy, a result read on
 * the host). Otherwise HK_STATUS_NOT_SUPPORTED with "<what>: ..." saying
 * why: the stream is being captured (a synchronise there would fail and
 * invalidate the capture), or it is the legacy stream while a blocking
 * stream of the context is being captured. Asks only cuStreamIsCapturing,
 * which changes no capture. */
hk_status_t hk_kit_check_wait(hk_kit_call_t *c, const char *what);

/* [thread-safe] Switches the calling thread to the relaxed stream capture
 * mode (cuThreadExchangeStreamCaptureMode) until hk_kit_capture_restore(*saved):
 * meanwhile an allocation, a free, a synchronise of a stream that is not
 * capturing, or a library load or unload is neither refused nor invalidates
 * a capture that another thread, or this one on another stream, has open.
 * Returns the driver's result (a CUresult; *saved is set only on success). */
int hk_kit_capture_relax(int *saved);

/* [thread-safe] Gives the calling thread back the mode hk_kit_capture_relax
 * saved. Returns the driver's result. */
int hk_kit_capture_restore(int saved);

/* [handle-safe] Accessors (no driver call). The context and device never
 * change for a binding; context_id is the live incarnation's ID as armed,
 * owns_primary the primary retains the binding holds. */
struct CUctx_st *hk_kit_context(const hk_kit_bind_t *b);
int hk_kit_cudevice(const hk_kit_bind_t *b);
int hk_kit_device(const hk_kit_bind_t *b);
int hk_kit_is_primary(const hk_kit_bind_t *b);
unsigned long long hk_kit_context_id(const hk_kit_bind_t *b);
int hk_kit_owns_primary(hk_kit_bind_t *b);
void *hk_kit_user(const hk_kit_bind_t *b);

/* [handle-safe] Checked mode: [p, p + bytes) must be device memory of the
 * binding's device (its first and last byte are asked about with
 * cuPointerGetAttributes, which answers for host pointers too). Otherwise
 * HK_STATUS_POINTER_MISMATCH naming what and both devices. */
hk_status_t hk_kit_check_pointer(hk_kit_bind_t *b, const void *p, size_t bytes,
                                 const char *what);

/* [thread-safe] Tries a give-back a second time when the driver refuses the
 * first (a refused call is taken to have done nothing; one transient refusal
 * must not leak). Returns the last attempt's CUresult. */
int hk_kit_give_back_primary(int cudevice);
int hk_kit_pop_current(void);

/* ---- kernel images: load once per process, launch in any context ---- */

typedef struct hk_kit_library hk_kit_library_t;
typedef struct hk_kit_kernel hk_kit_kernel_t;

#define HK_KIT_LOAD_INTO_CURRENT 0x1u /* also load it into the current context now */

/* [thread-safe] Loads an image (fatbin, cubin or NUL-terminated PTX text of
 * size bytes, checked as hk.kernels/1's load says) with cuLibraryLoadData;
 * with HK_KIT_LOAD_INTO_CURRENT also into the current context, so that PTX is
 * compiled now. A build failure gives HK_STATUS_INVALID_VALUE with the first
 * line of the JIT error log in the message. *out is owned by the caller
 * (hk_kit_library_unload). err_to: where the message goes. */
hk_status_t hk_kit_library_load(hk_kit_bind_t *err_to, const void *image, size_t size,
                                 unsigned flags, hk_kit_library_t **out);

/* [thread-safe] 1 when p is a live library (or kernel) of this plugin. */
int hk_kit_library_live(const void *p);
int hk_kit_kernel_live(const void *p);

/* [thread-safe] Unloads lib: HK_STATUS_BUSY while a use of it is in
 * progress (a launch, the attributes or the function of one of its kernels,
 * a kernel_find on it), or while a binding other than caller (NULL: any
 * binding) holds a reference (it launched one of its kernels, hk_kit_launch);
 * HK_STATUS_INVALID_VALUE when lib is not live. No lock is held while the
 * driver unloads (cuLibraryUnload waits for running kernels). A driver
 * refusal (tried twice) → its status, lib stays loaded. Messages to caller. */
hk_status_t hk_kit_library_unload(hk_kit_bind_t *caller, hk_kit_library_t *lib);

/* [thread-safe] The kernel called name (NOT_FOUND otherwise), owned by lib;
 * the same object for the same name. */
hk_status_t hk_kit_kernel_find(hk_kit_bind_t *err_to, hk_kit_library_t *lib, const char *name,
                               hk_kit_kernel_t **out);

/* [thread-safe] The kernel's CUfunction in the current context, whose ID is
 * ctx_id (a call's arm->ctx_id): cached per context ID, so a hit makes no
 * driver call and takes no lock. k not live, or its library being unloaded →
 * HK_STATUS_INVALID_VALUE. */
hk_status_t hk_kit_kernel_function(hk_kit_kernel_t *k, unsigned long long ctx_id,
                                   hk_kit_bind_t *err_to, struct CUfunc_st **out);

/* The kernel's name (owned by the kernel). */
const char *hk_kit_kernel_name(const hk_kit_kernel_t *k);

/* [handle-safe] Within a call (hk_kit_begin): the kernel's attributes on the
 * binding's device, with the size rule of hk_kernel_attributes_t. */
hk_status_t hk_kit_kernel_attributes(hk_kit_call_t *c, hk_kit_kernel_t *k,
                                     hk_kernel_attributes_t *attrs);

/* [thread-safe] The launch dimension rules of hk.kernels/1 (no driver call):
 * HK_STATUS_INVALID_VALUE naming the first bad dimension, recorded in b. */
hk_status_t hk_kit_check_dims(hk_kit_bind_t *b, const uint32_t grid[3], const uint32_t block[3]);

/* [handle-safe] Within a call (hk_kit_begin): launches k on the call's stream
 * in the call's context (after hk_kit_check_dims). Counts itself in flight
 * for hk_kit_library_unload and makes the binding reference k's library.
 * Neither synchronises nor allocates on the way (its first launch in a
 * context takes the kernel's function, and a binding's first launch of a
 * library adds one reference). Statuses as hk.kernels/1's launch. */
hk_status_t hk_kit_launch(hk_kit_call_t *c, hk_kit_kernel_t *k, const uint32_t grid[3],
                          const uint32_t block[3], uint32_t shared_bytes, void **args);

#ifdef __cplusplus
}
#endif

#endif /* HK_KIT_H */
