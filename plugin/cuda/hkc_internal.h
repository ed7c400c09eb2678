/* hk-cuda internals shared by its source files. Not part of the ABI.
 *
 * The context contract itself (driver loading, binding, the per-call guard,
 * re-arm, destroy, messages, the handle registry, kernel libraries) is the
 * kit's (plugin/kit, plugin_api/hk_kit.h); hk-cuda keeps what is its own:
 * hkc_arm.c (what a handle makes in its context: functions, reduction
 * workspaces, the result word), hkc_kernels.c (the embedded kernel library
 * and the workspaces), hkc_handle.c (core vtable), hkc_blas1.c and
 * hkc_memory.c (tables), hkc_tables.c (hk.kernels/1 and hk.cuda/1),
 * hkc_error.c (messages through the kit), hkc_plugin.c (negotiation). */
#ifndef HKC_INTERNAL_H
#define HKC_INTERNAL_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hk_abi.h"
#include "hk_kit.h"

/* ---- driver entry points hk-cuda calls itself (hkc_handle.c) ---- */

/* X(name, version): each entry point is taken through the kit
 * (hk_kit_driver_take, cuGetProcAddress) at the pinned version, which fixes
 * its signature (cudaTypedefs.h's PFN_<name>_v<version>) whatever the
 * driver's own version is. The kit's own calls use its own table. */
#define HK__CU_ENTRY_POINTS(X)                \
    X(cuDeviceGetAttribute, 2000)             \
    X(cuStreamIsCapturing, 10000)             \
    X(cuStreamSynchronize, 2000)              \
    X(cuMemAlloc, 3020)                       \
    X(cuMemFree, 3020)                        \
    X(cuMemFreeAsync, 11020)                  \
    X(cuMemHostAlloc, 2020)                   \
    X(cuMemHostGetDevicePointer, 3020)        \
    X(cuMemFreeHost, 2000)                    \
    X(cuMemcpyHtoDAsync, 3020)                \
    X(cuMemcpyDtoHAsync, 3020)                \
    X(cuMemsetD8Async, 3020)                  \
    X(cuLaunchKernelEx, 11060)               \
    X(cuCtxGetId, 12000)                      \
    X(cuCtxPushCurrent, 4000)                 \
    X(cuCtxPopCurrent, 4000)                  \
    X(cuDevicePrimaryCtxGetState, 7000)       \
    X(cuDevicePrimaryCtxRetain, 7000)

typedef struct hkc_cu {
#define HK__CU_FIELD(name, ver) PFN_##name##_v##ver name;
    HK__CU_ENTRY_POINTS(HK__CU_FIELD)
#undef HK__CU_FIELD
} hkc_cu_t;

/* The table; filled once under hkc_lock, read-only afterwards. */
extern hkc_cu_t hkc_cu;

/* Guards the entry points' taking, the embedded kernel library's reference
 * count and the making of reduction workspaces. Never taken on the hot path. */
extern pthread_mutex_t hkc_lock;

/* The kit's driver, then hk-cuda's entry points (once). Caller holds hkc_lock.
 * Failures are written as the create error. */
hk_status_t hkc_driver_take(void);

/* ---- errors (hkc_error.c): through the kit, to h's binding or the thread ---- */

/* Records a message for h (or, h NULL, the calling thread's create error) and
 * returns st. */
hk_status_t hkc_fail(hk_handle_t *h, hk_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records "<what> failed: <CUDA error> (device N)" and returns its status. */
hk_status_t hkc_fail_cu(hk_handle_t *h, CUresult r, const char *what);

#define hkc_cu_name(r, buf, len) hk_kit_cu_name((int)(r), buf, len)
#define hkc_cu_status(r) hk_kit_cu_status((int)(r))

/* The vtable's last_error and last_error_copy (plugin_api/hk_abi.h). */
const char *hkc_last_error(const hk_handle_t *h);
hk_status_t hkc_last_error_copy(const hk_handle_t *h, char *buf, size_t len, size_t *needed);

/* ---- kernels (hkc_kernels.c) ---- */

typedef enum hkc_kernel_id {
    HK__K_SAXPY, HK__K_DAXPY, HK__K_SSCAL, HK__K_DSCAL, HK__K_SCOPY, HK__K_DCOPY,
    HK__K_SDOT, HK__K_DDOT, HK__K_SNRM2, HK__K_DNRM2,
    /* the reductions for 16-byte aligned vectors with unit increments, in
     * the same order (HK__K_ALIGNED) */
    HK__K_SDOT_ALIGNED, HK__K_DDOT_ALIGNED, HK__K_SNRM2_ALIGNED, HK__K_DNRM2_ALIGNED,
    HK__K_COUNT
} hkc_kernel_id_t;

/* The aligned kernel of reduction k. */
#define HK__K_ALIGNED(k) ((hkc_kernel_id_t)((k) - HK__K_SDOT + HK__K_SDOT_ALIGNED))

/* Must match kernels/hk_blas1_common.cuh. */
#define HK__BLOCK 256
#define HK__MAX_BLOCKS 1024
#define HK__UNROLL 4

/* Takes a reference on the process-wide kernel library, loading the embedded
 * fatbin on the first one and then setting hkc_kernels_trim as the plugin's
 * part of hk_kit_trim (hk_kit_set_trim). Caller holds hkc_lock. */
hk_status_t hkc_kernels_acquire(void);

/* Drops a reference; the library stays loaded after the last one, until
 * hkc_kernels_trim. The caller must not hold hkc_lock. */
hk_status_t hkc_kernels_release(void);

/* Unloads the library if no handle uses it (hk_kit_trim's part), after
 * letting go of hkc_lock, which the caller must not hold; a refused unload
 * keeps it for the next handle. */
hk_status_t hkc_kernels_trim(void);

/* The CUfunctions of every kernel in the current context, whose ID is ctx_id,
 * from the kit's per-context caches (filled on a miss). */
hk_status_t hkc_kernels_functions(hk_handle_t *h, unsigned long long ctx_id,
                                  CUfunction out[HK__K_COUNT]);

/* ---- reduction workspaces (hkc_kernels.c) ---- */

/* One stream's workspace for dot and nrm2: per-block partials, the
 * last-block counter, and a result word for host pointer mode. */
#define HK__WS_PARTIALS 0
#define HK__WS_COUNTER (3 * HK__MAX_BLOCKS * sizeof(double))
#define HK__WS_RESULT (HK__WS_COUNTER + 64)
#define HK__WS_BYTES (HK__WS_RESULT + 64)

/* Workspaces are per stream, keyed by the stream (its unique ID; the
 * per-thread stream is a different stream on every thread), so that
 * reductions running at once on different streams never share partials or
 * counter, while the calls on one stream reuse theirs in stream order. Made
 * at the first dot or nrm2 on a stream, never freed before the handle (or its
 * context incarnation) goes. */
typedef struct hkc_ws {
    unsigned long long key;
    uintptr_t capture; /* the stream, when key is a capture sequence's ID; else 0 */
    CUdeviceptr base; /* inside one of the arm's slabs */
    /* The counter was cleared by a memset that ran outside stream capture. A
     * memset enqueued during capture only runs when the graph does, so until
     * then every call clears it again first (in stream order). */
    atomic_int cleared;
} hkc_ws_t;

/* Keys: a created stream's driver ID (small counters, top bit clear); a
 * thread's per-thread stream: that thread's own token with the top bit set;
 * the legacy stream: all bits set. A created stream whose ID is not known
 * while it is being captured (the driver refuses it there, and set_stream
 * inside the capture could not ask): the capture sequence's ID, with the
 * stream in hkc_ws_t.capture, which no other key has. */
#define HK__WS_LEGACY (~0ull)
#define HK__WS_THREAD_BIT (1ull << 63)

/* Open addressing, read without a lock: slots are filled once (release) and
 * never emptied; a full enough table is replaced by a larger copy, the old
 * one kept (older) until the arm goes, so a reader never reads freed memory. */
typedef struct hkc_ws_map {
    unsigned mask; /* capacity - 1, a power of two */
    unsigned count;
    struct hkc_ws_map *older;
    _Atomic(hkc_ws_t *) slot[];
} hkc_ws_map_t;

/* Device memory for HK__WS_PER_SLAB workspaces in one allocation. The first
 * slab is made with the arm, so that the first reductions on the first
 * streams, during stream capture too, allocate nothing. */
#define HK__WS_PER_SLAB 8
typedef struct hkc_slab {
    CUdeviceptr base;
    unsigned used; /* workspaces handed out; under hkc_lock */
    struct hkc_slab *next;
} hkc_slab_t;

/* ---- handles and contexts (hkc_arm.c, hkc_handle.c) ---- */

/* What a handle made in one incarnation of its context (the kit's arm).
 * ctx_id and fn are immutable once published; the workspaces are added to
 * (under hkc_lock). A re-arm publishes a new arm and the kit keeps the old
 * until destroy, so a thread still reading the old one never reads freed
 * memory. */
typedef struct hkc_arm {
    hk_kit_arm_t base; /* ctx_id, older: the kit's */
    CUfunction fn[HK__K_COUNT];
    _Atomic(hkc_ws_map_t *) ws; /* NULL until the first workspace */
    hkc_slab_t *slabs;          /* newest first; under hkc_lock */
} hkc_arm_t;

/* Lives in a slot of the kit's handle registry (hk_kit_handle_take), which
 * decides whether a pointer is a live handle of this copy of hk-cuda. */
struct hk_handle {
    hk_kit_bind_t *kb; /* the binding: context, device, stream, message */
    int device;        /* the binding's ordinal and CUdevice, copied */
    CUdevice cudev;
    uint32_t flags;    /* HK_CREATE_* in effect */
    int sm_count;      /* set by the first arm */
    atomic_int pointer_mode;
    pthread_mutex_t lock; /* host-mode results (slow paths only) */
    /* Under lock: a page-locked host word mapped for the device, where host
     * pointer mode's dot and nrm2 write their result, so bringing it home is
     * one synchronise and no copy (about 8 us less per call on an H200).
     * Made by the arm of context incarnation slot_ctx, or taken from what a
     * destroyed handle left there, except by the module's first arm: that
     * handle's first such call makes it (hkc_arm.c). slot NULL with
     * slot_ctx set: the driver refused, the result is copied from ws. A word
     * whose device address the driver refused and whose free it refused too
     * stays in slot with slot_dev 0: unused, freed by destroy. */
    void *slot;
    CUdeviceptr slot_dev;
    unsigned long long slot_ctx;
};

_Static_assert(sizeof(struct hk_handle) <= HK_KIT_HANDLE_MAX, "handle too big for the registry");

/* The callbacks the kit calls to arm a handle's context (hkc_arm.c). */
extern const hk_kit_ops_t hkc_arm_ops;

/* The handle's mapped result word for its current incarnation (see slot),
 * or NULL. Caller holds h->lock and has made the handle's context current. */
void *hkc_result_slot(hk_handle_t *h, const hkc_arm_t *a, CUdeviceptr *dev);

/* Runs the driver calls between hkc_relax and hkc_relaxed_end in the relaxed
 * stream capture mode (the kit's hk_kit_capture_relax): an allocation, a
 * free or a synchronise of a stream that is not capturing then neither fails
 * nor invalidates a capture that another thread, or this one on another
 * stream, has open (docs/contexts.md, "Stream capture"). hkc_relax returns
 * the driver's result; on failure nothing was switched. */
static inline CUresult hkc_relax(int *saved)
{
    return (CUresult)hk_kit_capture_relax(saved);
}
static inline CUresult hkc_relaxed_end(int saved)
{
    return (CUresult)hk_kit_capture_restore(saved); /* tried twice */
}

/* cuMemAlloc and cuMemFree in relaxed capture mode (hkc_kernels.c). An
 * allocation whose mode the driver would not give back is freed again and
 * the failure returned: the caller's capture mode comes first. */
CUresult hkc_relaxed_alloc(CUdeviceptr *p, size_t bytes);
CUresult hkc_relaxed_free(CUdeviceptr p);

/* Per-call state: the kit's guard, and the call's arm and stream setting. */
typedef struct hkc_call {
    hk_kit_call_t k;
    hk_handle_t *h;
    hkc_arm_t *arm;
    CUstream stream;
    unsigned long long stream_id; /* the stream's ID when set_stream learnt it, else 0 */
} hkc_call_t;

/* The per-call guard (hk_kit_begin): checks the handle's context (re-arming
 * a reset primary), pushes it over the caller's if it is not current, and
 * fills c. On failure the caller's context is as it was. */
static inline hk_status_t hkc_call_begin(hk_handle_t *h, hkc_call_t *c)
{
    hk_status_t st = hk_kit_begin(h->kb, &c->k);
    c->h = h;
    c->arm = (hkc_arm_t *)c->k.arm;
    c->stream = c->k.stream;
    c->stream_id = c->k.stream_id;
    return st;
}

/* Pops the handle's context if call_begin pushed it, so the caller's is
 * current again, and returns st: the status of the call's own work. A pop
 * the driver refuses twice is written to the handle's message but never
 * turns a call whose work was done into a failure (see README.md, "Failures"). */
static inline hk_status_t hkc_call_end(hkc_call_t *c, hk_status_t st)
{
    return hk_kit_end(&c->k, st);
}

/* The workspace of the call's stream in the call's arm, made (and its counter
 * cleared, in stream order) at the first use of the stream; the handle's
 * context is current. On a hit: no driver call, no lock, no allocation. */
hk_status_t hkc_ws_get(hkc_call_t *c, hkc_ws_t **out);

/* Makes the arm's first slab of workspaces; its context is current. */
hk_status_t hkc_ws_reserve(hkc_arm_t *a, hk_handle_t *err_to);

/* Frees the device memory of an arm's workspaces, in stream order on s when
 * ordered (destroy, hk_kit_release_stream), else at once; its context is
 * current and alive. Returns the first failure (every block is tried). */
CUresult hkc_ws_free(hkc_arm_t *a, int ordered, CUstream s);

/* Frees an arm's host memory (its workspace records and tables) and the arm. */
void hkc_arm_free(hkc_arm_t *a);

/* Makes base (a slab's device memory, kept by the kit: hk_kit_take_block)
 * the arm's first slab; 0 on success, else base is left to the caller. */
int hkc_ws_adopt(hkc_arm_t *a, CUdeviceptr base);

/* The sizes of the blocks hk-cuda hands to the kit to keep between handles
 * (hk_kit_keep_block): a slab of workspaces, host mode's result word. */
#define HKC_SLAB_BYTES ((size_t)HK__WS_PER_SLAB * HK__WS_BYTES)
#define HKC_WORD_BYTES ((size_t)64)


/* A live handle of this copy of hk-cuda? NULL, destroyed handles and pointers
 * of anyone else → no, decided without reading through h (no lock, a few ns). */
static inline int hkc_valid(const hk_handle_t *h)
{
    return hk_kit_handle_live(h);
}

/* Giving back host memory: tried a second time when refused (a refused call
 * is taken to have done nothing; one transient refusal must not leak). */
CUresult hkc_give_back_host(void *p);

/* Tables (hkc_blas1.c, hkc_memory.c, hkc_tables.c) and the core vtable
 * (hkc_handle.c). */
struct hk_blas1_v1;
struct hk_memory_v1;
struct hk_kernels_v1;
struct hk_cuda_v1;
extern const struct hk_blas1_v1 hkc_blas1_table;
extern const struct hk_memory_v1 hkc_memory_table;
extern const struct hk_kernels_v1 hkc_kernels_table;
extern const struct hk_cuda_v1 hkc_cuda_table;
extern const hk_vtable_t hkc_vtable;

/* The tables by name, and the names by index (hkc_tables.c): the core
 * vtable's get_table and enum_tables. */
hk_status_t hkc_get_table(const char *name, const void **table);
hk_status_t hkc_enum_tables(size_t index, const char **name);

#endif /* HKC_INTERNAL_H */
