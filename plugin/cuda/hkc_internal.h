/* hk-cuda internals shared by its source files. Not part of the ABI.
 *
 * Files by concern: hkc_driver.c (opening the driver, entry points),
 * hkc_error.c (messages), hkc_context.c (binding and the per-call guard),
 * hkc_kernels.c (the embedded kernel library), hkc_handle.c (core vtable),
 * hkc_blas1.c and hkc_memory.c (tables), hkc_plugin.c (negotiation). */
#ifndef HKC_INTERNAL_H
#define HKC_INTERNAL_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hk__registry.h"
#include "hk_abi.h"

/* ---- driver entry points (hkc_driver.c) ---- */

/* X(name, version): each entry point is taken with cuGetProcAddress at the
 * pinned version, which fixes its signature (cudaTypedefs.h's
 * PFN_<name>_v<version>) whatever the driver's own version is. */
#define HK__CU_ENTRY_POINTS(X)                \
    X(cuGetErrorName, 6000)                   \
    X(cuInit, 2000)                           \
    X(cuDriverGetVersion, 2020)               \
    X(cuDeviceGet, 2000)                      \
    X(cuDeviceGetCount, 2000)                 \
    X(cuDeviceGetAttribute, 2000)             \
    X(cuDevicePrimaryCtxRetain, 7000)         \
    X(cuDevicePrimaryCtxRelease, 11000)       \
    X(cuDevicePrimaryCtxGetState, 7000)       \
    X(cuCtxGetCurrent, 4000)                  \
    X(cuCtxSetCurrent, 4000)                  \
    X(cuCtxPushCurrent, 4000)                 \
    X(cuCtxPopCurrent, 4000)                  \
    X(cuCtxSynchronize, 2000)                 \
    X(cuCtxGetDevice, 2000)                   \
    X(cuCtxGetId, 12000)                      \
    X(cuStreamGetCtx, 9020)                   \
    X(cuStreamGetId, 12000)                   \
    X(cuStreamIsCapturing, 10000)             \
    X(cuThreadExchangeStreamCaptureMode, 10010) \
    X(cuStreamSynchronize, 2000)              \
    X(cuMemAlloc, 3020)                       \
    X(cuMemFree, 3020)                        \
    X(cuMemHostAlloc, 2020)                   \
    X(cuMemHostGetDevicePointer, 3020)        \
    X(cuMemFreeHost, 2000)                    \
    X(cuMemcpyHtoDAsync, 3020)                \
    X(cuMemcpyDtoHAsync, 3020)                \
    X(cuMemsetD8Async, 3020)                  \
    X(cuPointerGetAttributes, 7000)           \
    X(cuLibraryLoadData, 12000)               \
    X(cuLibraryUnload, 12000)                 \
    X(cuLibraryGetKernel, 12000)              \
    X(cuKernelGetFunction, 12000)             \
    X(cuLaunchKernel, 4000)

typedef struct hk__cu {
#define HK__CU_FIELD(name, ver) PFN_##name##_v##ver name;
    HK__CU_ENTRY_POINTS(HK__CU_FIELD)
#undef HK__CU_FIELD
} hk__cu_t;

/* The table; filled once under hk__lock, read-only afterwards. */
extern hk__cu_t hk__cu;

/* Guards driver loading, the kernel library's reference count and the
 * per-context function cache. Never taken on the hot path. */
extern pthread_mutex_t hk__lock;

/* Set in the child after fork(): every call then answers HK_STATUS_FORKED. */
extern atomic_int hk__forked;

/* Opens the driver, takes its entry points, cuInit, checks its version.
 * Caller holds hk__lock. Failures are written as the create error. */
hk_status_t hk__driver_load(void);

/* Registers the fork handler once (pthread_once), at the first create. */
void hk__fork_watch(void);

/* ---- errors (hkc_error.c) ---- */

/* Records a message for h (or, h NULL, the calling thread's create error) and
 * returns st. */
hk_status_t hk__fail(hk_handle_t *h, hk_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "CUDA_ERROR_OUT_OF_MEMORY (2)" into buf; works before the driver loaded. */
const char *hk__cu_name(CUresult r, char *buf, size_t len);

/* The status for a failed driver call. */
hk_status_t hk__cu_status(CUresult r);

/* Records "<what> failed: <CUDA error> (device N)" and returns its status. */
hk_status_t hk__fail_cu(hk_handle_t *h, CUresult r, const char *what);

/* The message buffer of a handle or of the thread (for last_error). */
const char *hk__last_error(const hk_handle_t *h);

/* The vtable's last_error_copy (plugin_api/hk_abi.h). */
hk_status_t hk__last_error_copy(const hk_handle_t *h, char *buf, size_t len, size_t *needed);

/* ---- kernels (hkc_kernels.c) ---- */

typedef enum hk__kernel_id {
    HK__K_SAXPY, HK__K_DAXPY, HK__K_SSCAL, HK__K_DSCAL, HK__K_SCOPY, HK__K_DCOPY,
    HK__K_SDOT, HK__K_DDOT, HK__K_SNRM2, HK__K_DNRM2,
    HK__K_COUNT
} hk__kernel_id_t;

/* Must match kernels/hk_blas1_common.cuh. */
#define HK__BLOCK 256
#define HK__MAX_BLOCKS 1024
#define HK__UNROLL 4

/* Takes a reference on the process-wide kernel library, loading the embedded
 * fatbin on the first one. Caller holds hk__lock. */
hk_status_t hk__kernels_acquire(void);

/* Drops a reference; the last one unloads the library. Caller holds hk__lock. */
hk_status_t hk__kernels_release(void);

/* The CUfunctions of every kernel in the current context, whose ID is ctx_id,
 * from the per-context cache (filled on a miss). Takes hk__lock. */
hk_status_t hk__kernels_functions(hk_handle_t *h, unsigned long long ctx_id,
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
typedef struct hk__ws {
    unsigned long long key;
    CUdeviceptr base; /* inside one of the arm's slabs */
    /* The counter was cleared by a memset that ran outside stream capture. A
     * memset enqueued during capture only runs when the graph does, so until
     * then every call clears it again first (in stream order). */
    atomic_int cleared;
} hk__ws_t;

/* Keys: a created stream's driver ID (small counters, top bit clear); a
 * thread's per-thread stream: that thread's own token with the top bit set;
 * the legacy stream: all bits set. */
#define HK__WS_LEGACY (~0ull)
#define HK__WS_THREAD_BIT (1ull << 63)

/* Open addressing, read without a lock: slots are filled once (release) and
 * never emptied; a full enough table is replaced by a larger copy, the old
 * one kept (older) until the arm goes, so a reader never reads freed memory. */
typedef struct hk__ws_map {
    unsigned mask; /* capacity - 1, a power of two */
    unsigned count;
    struct hk__ws_map *older;
    _Atomic(hk__ws_t *) slot[];
} hk__ws_map_t;

/* Device memory for HK__WS_PER_SLAB workspaces in one allocation. The first
 * slab is made with the arm, so that the first reductions on the first
 * streams, during stream capture too, allocate nothing. */
#define HK__WS_PER_SLAB 8
typedef struct hk__slab {
    CUdeviceptr base;
    unsigned used; /* workspaces handed out; under hk__lock */
    struct hk__slab *next;
} hk__slab_t;

/* ---- handles and contexts (hkc_context.c, hkc_handle.c) ---- */

/* What a handle made in one incarnation of its context. ctx_id and fn are
 * immutable once published; the workspaces are added to (under hk__lock). A
 * re-arm publishes a new arm and keeps the old until destroy, so a thread
 * still reading the old one never reads freed memory. */
typedef struct hk__arm {
    unsigned long long ctx_id;
    CUfunction fn[HK__K_COUNT];
    _Atomic(hk__ws_map_t *) ws; /* NULL until the first workspace */
    hk__slab_t *slabs;          /* newest first; under hk__lock */
    struct hk__arm *older;
} hk__arm_t;

/* Lives in a slot of hk__handles (plugin/common/hk__registry.h), which
 * decides whether a pointer is a live handle of this copy of hk-cuda. */
struct hk_handle {
    int device;        /* ordinal */
    CUdevice cudev;
    CUcontext ctx;     /* the bound context; a primary keeps its pointer across resets */
    int is_primary;    /* bound to a primary context: re-armable after a reset */
    /* Retains of the primary the handle holds, each released by destroy:
     * 1 for a primary-bound handle, more only when the driver refused to take
     * back a re-arm's extra retain (kept here rather than lost). Changes under
     * lock after create. */
    int owns_primary;
    uint32_t flags;    /* HK_CREATE_* in effect */
    int sm_count;
    _Atomic(hk__arm_t *) arm;
    /* The stream setting: stream, user_stream and stream_id change together
     * under the sequence count stream_seq (odd while set_stream writes), so a
     * call reads all three of one setting (hk__stream_read). */
    atomic_uint stream_seq;
    _Atomic(CUstream) stream;
    atomic_int user_stream; /* the stream is a real stream (dies with its context) */
    _Atomic(unsigned long long) stream_id; /* a real stream's ID; 0: unknown or special */
    atomic_int pointer_mode;
    pthread_mutex_t lock;     /* re-arm and host-mode results (slow paths only) */
    /* Under lock: a page-locked host word mapped for the device, where host
     * pointer mode's dot and nrm2 write their result, so bringing it home is
     * one synchronise and no copy (about 8 us less per call on an H200).
     * Made at the first such call in context incarnation slot_ctx (made at
     * create it cost every handle ~8 us, the first ~0.5 ms); slot NULL with
     * slot_ctx set: the driver refused, the result is copied from ws. A word
     * whose device address the driver refused and whose free it refused too
     * stays in slot with slot_dev 0: unused, freed by destroy. */
    void *slot;
    CUdeviceptr slot_dev;
    unsigned long long slot_ctx;
    pthread_mutex_t errlock;  /* err */
    char err[512];
};

/* The handle's mapped result word for its current incarnation (see slot),
 * or NULL. Caller holds h->lock and has made the handle's context current. */
void *hk__result_slot(hk_handle_t *h, const hk__arm_t *a, CUdeviceptr *dev);

/* Per-call state: what to restore, and the call's stream setting. */
typedef struct hk__call {
    hk_handle_t *h;
    hk__arm_t *arm;
    CUcontext prev;    /* the caller's current context */
    int switched;      /* the handle's context was pushed over it */
    CUstream stream;
    unsigned long long stream_id; /* the stream's ID when set_stream learnt it, else 0 */
} hk__call_t;

/* Publishes a stream setting (set_stream). Writers exclude each other by the
 * odd sequence count. */
static inline void hk__stream_publish(hk_handle_t *h, CUstream s, int user,
                                      unsigned long long id)
{
    unsigned q = atomic_load_explicit(&h->stream_seq, memory_order_relaxed);
    for (;;) {
        if (!(q & 1u) && atomic_compare_exchange_weak_explicit(
                             &h->stream_seq, &q, q + 1u, memory_order_acquire,
                             memory_order_relaxed))
            break;
        q = atomic_load_explicit(&h->stream_seq, memory_order_relaxed);
    }
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&h->stream, s, memory_order_relaxed);
    atomic_store_explicit(&h->user_stream, user, memory_order_relaxed);
    atomic_store_explicit(&h->stream_id, id, memory_order_relaxed);
    atomic_store_explicit(&h->stream_seq, q + 2u, memory_order_release);
}

/* Reads one whole stream setting. [handle-safe] */
static inline void hk__stream_read(hk_handle_t *h, CUstream *s, unsigned long long *id)
{
    for (;;) {
        unsigned q = atomic_load_explicit(&h->stream_seq, memory_order_acquire);
        *s = atomic_load_explicit(&h->stream, memory_order_relaxed);
        *id = atomic_load_explicit(&h->stream_id, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (!(q & 1u) && atomic_load_explicit(&h->stream_seq, memory_order_relaxed) == q)
            return;
    }
}

/* The workspace of the call's stream in the call's arm, made (and its counter
 * cleared, in stream order) at the first use of the stream; the handle's
 * context is current. On a hit: no driver call, no lock, no allocation. */
hk_status_t hk__ws_get(hk__call_t *c, hk__ws_t **out);

/* Makes the arm's first slab of workspaces; its context is current. */
hk_status_t hk__ws_reserve(hk__arm_t *a, hk_handle_t *err_to);

/* Frees the device memory of an arm's workspaces; its context is current and
 * alive. Returns the first failure (every block is tried). */
CUresult hk__ws_free(hk__arm_t *a);

/* Frees an arm's host memory (its workspace records and tables) and the arm. */
void hk__arm_free(hk__arm_t *a);

/* Every handle this copy of hk-cuda made (hkc_handle.c). */
extern hk__registry_t hk__handles;

/* A live handle of this copy of hk-cuda? NULL, destroyed handles and pointers
 * of anyone else → no, decided without reading through h (no lock, a few ns). */
static inline int hk__valid(const hk_handle_t *h)
{
    return hk__reg_live(&hk__handles, h);
}

/* Binds a new handle per docs/contexts.md and arms it. Leaves
 * the caller's context as it was, except that with nothing current the bound
 * device-0 primary stays current (as a runtime call would leave it). */
hk_status_t hk__context_bind(hk_handle_t *h, int device);

/* The per-call guard: checks the handle's context (re-arming a reset primary),
 * pushes it over the caller's if it is not current, and fills c. On failure
 * the caller's context is as it was. */
hk_status_t hk__call_begin(hk_handle_t *h, hk__call_t *c);

/* Pops the handle's context if call_begin pushed it, so the caller's is
 * current again, and returns st: the status of the call's own work. A pop
 * the driver refuses twice is written to the handle's message but never
 * turns a call whose work was done into a failure (see README.md, "Failures"). */
hk_status_t hk__call_end(hk__call_t *c, hk_status_t st);

/* Destroy's half: waits for the handle's work, frees what it made if its
 * context still lives, gives back its retains, and leaves the caller's
 * context as it was. Goes on past a failing step; returns the first failure. */
hk_status_t hk__context_unbind(hk_handle_t *h);

/* Giving back: a free, a release or the pop of a context the handle pushed.
 * A driver call that fails is taken to have done nothing, so each of these is
 * tried a second time when refused: one transient refusal must not leak what
 * it gives back. Returns the last attempt's result. */
CUresult hk__give_back_mem(CUdeviceptr p);
CUresult hk__give_back_host(void *p);
CUresult hk__give_back_primary(CUdevice dev);
CUresult hk__give_back_library(CUlibrary lib);
CUresult hk__pop_current(void);

/* Validates that [p, p + bytes) is memory of the handle's device (checked
 * mode). what names the argument in the message. */
hk_status_t hk__check_pointer(hk_handle_t *h, const void *p, size_t bytes, const char *what);

/* Tables (hkc_blas1.c, hkc_memory.c) and the core vtable (hkc_handle.c). */
struct hk_blas1_v1;
struct hk_memory_v1;
extern const struct hk_blas1_v1 hk__blas1_table;
extern const struct hk_memory_v1 hk__memory_table;
extern const hk_vtable_t hk__vtable;

#endif /* HKC_INTERNAL_H */
