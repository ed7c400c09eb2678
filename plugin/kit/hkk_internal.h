/* handlekit kit internals shared by its source files. Not installed.
 *
 * Files by concern, from the bottom layer up (each calls only files named
 * before it; README.md, "Calls between files"): hkk_table.c (the driver
 * table, the give-backs through it), hkk_fork.c (the fork and exit flags),
 * hkk_error.c (messages), hkk_trace.c (the debug trace's longer lines),
 * hkk_driver.c (opening the driver, entry points), hkk_image.c (images
 * checked before the driver reads them), hkk_params.c (a launch's arguments
 * against the kernel's parameters), hkk_stream.c (the stream setting, stream
 * capture), hkk_wait.c (the streams used, destroy's wait), hkk_bind.c
 * (binding at create, primaries, arming), hkk_keep.c (the primary retain
 * kept per device between handles, trim), hkk_library.c (libraries,
 * kernels, launch), hkk_call.c (the per-call guard, re-arm, unbind,
 * accessors, checked mode), hkk_module.c (hk_kit_driver_load, the handle
 * registry, the module's unload). */
#ifndef HKK_INTERNAL_H
#define HKK_INTERNAL_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hk__trace.h"
#include "hk_kit.h"

/* ---- driver entry points (hkk_table.c, filled by hkk_driver.c) ---- */

/* X(name, version): each entry point is taken with cuGetProcAddress at the
 * pinned version, which fixes its signature (cudaTypedefs.h's
 * PFN_<name>_v<version>) whatever the driver's own version is. */
#define HK__KIT_ENTRY_POINTS(X)               \
    X(cuGetErrorName, 6000)                   \
    X(cuInit, 2000)                           \
    X(cuDriverGetVersion, 2020)               \
    X(cuDeviceGet, 2000)                      \
    X(cuDeviceGetCount, 2000)                 \
    X(cuDevicePrimaryCtxRetain, 7000)         \
    X(cuDevicePrimaryCtxRelease, 11000)       \
    X(cuDevicePrimaryCtxGetState, 7000)       \
    X(cuCtxGetCurrent, 4000)                  \
    X(cuCtxPushCurrent, 4000)                 \
    X(cuCtxPopCurrent, 4000)                  \
    X(cuCtxSynchronize, 2000)                 \
    X(cuStreamSynchronize, 2000)              \
    X(cuCtxGetDevice, 2000)                   \
    X(cuCtxGetId, 12000)                      \
    X(cuMemFree, 3020)                        \
    X(cuMemFreeHost, 2000)                    \
    X(cuStreamGetCtx, 9020)                   \
    X(cuStreamGetId, 12000)                   \
    X(cuStreamIsCapturing, 10000)             \
    X(cuStreamGetCaptureInfo, 12030)          \
    X(cuThreadExchangeStreamCaptureMode, 10010) \
    X(cuPointerGetAttributes, 7000)           \
    X(cuLibraryLoadData, 12000)               \
    X(cuLibraryUnload, 12000)                 \
    X(cuLibraryGetKernel, 12000)              \
    X(cuLibraryGetModule, 12000)              \
    X(cuKernelGetFunction, 12000)             \
    X(cuKernelGetAttribute, 12000)            \
    X(cuLaunchKernel, 4000)

typedef struct hkk_cu {
#define HK__KIT_FIELD(name, ver) PFN_##name##_v##ver name;
    HK__KIT_ENTRY_POINTS(HK__KIT_FIELD)
#undef HK__KIT_FIELD
} hkk_cu_t;

/* The kit's table; filled once under the driver lock, read-only afterwards. */
extern hkk_cu_t hkk_cu;
#define KCU hkk_cu

/* Set in the child after fork() (hkk_fork.c). */
extern atomic_int hkk_forked;

/* Set when the process exits, before the module's destructor runs; not set
 * when the module is closed before that (hkk_fork.c). */
extern atomic_int hkk_exiting;

/* ---- the driver (hkk_driver.c) ---- */

/* hk_kit_driver_load's work once the fork watch is set and this is no fork
 * child: opens the driver unless it is open (once, under the driver lock),
 * and traces the attempt. */
hk_status_t hkk_driver_open(int min_version);

/* 1 once the driver is open (hk_kit_driver_load succeeded) until
 * hkk_driver_close. */
int hkk_driver_ready(void);

/* The module's unload: forgets the entry points and gives back the driver
 * reference (the driver stays mapped, RTLD_NODELETE). */
void hkk_driver_close(void);

/* ---- bindings ---- */

/* The libraries a binding launched kernels of: read without a lock, replaced
 * by a new copy under the binding's lock (the old kept until unbind). */
typedef struct hkk_libset {
    unsigned n;
    struct hkk_libset *older;
    hk_kit_library_t *lib[];
} hkk_libset_t;

#define HK__KIT_MSG_LEN 512

struct hk_kit_bind {
    int device;     /* ordinal */
    CUdevice cudev;
    CUcontext ctx;  /* the bound context; a primary keeps its pointer across resets */
    int is_primary; /* bound to a primary context: re-armable after a reset */
    /* Retains of the primary held, each released by unbind: 1 for a
     * primary-bound handle, more only when the driver refused to take back a
     * re-arm's extra retain (kept here rather than lost). Under lock after
     * bind. */
    int owns_primary;
    const hk_kit_ops_t *ops;
    void *user;
    _Atomic(hk_kit_arm_t *) arm;
    /* The stream setting: stream, user_stream and stream_id change together
     * under the sequence count stream_seq (odd while a writer writes). */
    atomic_uint stream_seq;
    _Atomic(CUstream) stream;
    atomic_int user_stream; /* a real stream (dies with its context) */
    _Atomic(unsigned long long) stream_id; /* a real stream's ID; 0: unknown or special */
    _Atomic(hkk_libset_t *) libs;
    /* The streams the live incarnation's calls ran on, for destroy's wait
     * (hkk_call.c, docs/contexts.md "Destroy"). A call compares its stream
     * with used_last, or for the per-thread stream its thread's note with
     * serial, without a lock; a change is noted under lock. serial is new
     * for every binding and every re-arm. */
    _Atomic(CUstream) used_last; /* HKK_NO_STREAM until a call ran, HKK_MANY_STREAMS
                                    once calls ran on two or more */
    atomic_ullong serial;
    unsigned long long pt_thread; /* under lock: 0, the one thread (hkk_thread_serial)
                                     whose per-thread stream calls ran on, or ~0 */
    CUstream rel_stream;          /* during ops->release: frees in order on it */
    int rel_ordered;
    pthread_mutex_t lock; /* re-arm, owns_primary, libs, streams used (slow paths only) */
    pthread_mutex_t errlock;
    char err[HK__KIT_MSG_LEN];
};

/* A binding as its trace lines name it: the user pointer given to
 * hk_kit_bind (hk-cuda's handle), else the binding. */
#define WHO(b) ((b)->user ? (b)->user : (void *)(b))

/* b's context ID, from its newest arm; 0 before the first
 * (hk_kit_context_id; the trace's lines too). [handle-safe] */
static inline unsigned long long hkk_context_id(const hk_kit_bind_t *b)
{
    const hk_kit_arm_t *a = atomic_load_explicit(&((hk_kit_bind_t *)b)->arm,
                                                 memory_order_acquire);
    return a ? a->ctx_id : 0;
}

/* Reads one whole stream setting (hkk_stream.c). [handle-safe] */
void hkk_stream_read(hk_kit_bind_t *b, CUstream *s, unsigned long long *id);

/* used_last before any call ran, and once calls ran on several streams (no
 * stream has either value). */
#define HKK_NO_STREAM ((CUstream)~(uintptr_t)0)
#define HKK_MANY_STREAMS ((CUstream)~(uintptr_t)1)

/* Forgets the streams used: at bind and after a re-arm (the old
 * incarnation's streams died with it). Caller holds b->lock or owns b. */
void hkk_streams_forget(hk_kit_bind_t *b);

/* Notes that a call of b runs on s (hkk_wait.c); called by hk_kit_begin when
 * s is not the stream noted last (for the per-thread stream: when this
 * thread has not noted it for b's incarnation, hkk_pt_noted). */
void hkk_note_stream_slow(hk_kit_bind_t *b, CUstream s);
int hkk_pt_noted(hk_kit_bind_t *b);

/* Destroy's wait, b's context current (hkk_wait.c): for the one stream its
 * calls ran on when it can (then ops->release frees in order on it,
 * hk_kit_release_stream), else for the context; and, after ops->release,
 * for the stream-ordered frees. Each returns the first failure. */
hk_status_t hkk_wait_used(hk_kit_bind_t *b);
hk_status_t hkk_wait_freed(hk_kit_bind_t *b);

/* Makes and publishes a new arm for the binding's context, which is current
 * (hkk_bind.c): its ID, then ops->arm. */
hk_status_t hkk_arm(hk_kit_bind_t *b, hk_kit_bind_t *err_to);

/* Frees every arm's host memory (ops->free_arm) and clears b->arm. */
void hkk_free_arms(hk_kit_bind_t *b);

/* Devices (by CUdevice value) whose primary the kit remembers and keeps a
 * retain of; a device beyond them is served, just not remembered. */
#define HK__KIT_DEVICES 64

/* cuDevicePrimaryCtxRetain, learning the primary's pointer (hkk_bind.c). */
CUresult hkk_retain_primary(CUdevice dev, CUcontext *p);

/* dev's primary context pointer, once a retain of ours learnt it; else NULL. */
CUcontext hkk_known_primary(CUdevice dev);

/* ---- the kept primary retains (hkk_keep.c) ---- */

/* Offered one retain of dev's primary (ordinal: its ordinal) that a handle
 * gives back while the primary is alive in incarnation id: returns 1 when the
 * kit keeps it (it held none for dev), 0 when the caller must release it. */
int hkk_keep_primary(CUdevice dev, int ordinal, unsigned long long id);

/* ---- memory kept between handles (hkk_kept.c) ---- */

/* hk_kit_trim's part: gives back the retains earlier trims could not, then
 * frees every kept block in its context if that context still lives in the
 * block's incarnation (a primary held meanwhile). What the driver refuses
 * (twice) stays kept, for a later trim. OK or the first failure. */
hk_status_t hkk_kept_trim(void);

/* Drops b's references on libraries (hkk_library.c); frees the sets. */
void hkk_libs_drop(hk_kit_bind_t *b);

/* The ordinal of dev (cuDeviceGetCount, cuDeviceGet); -1 when not listed or
 * the driver will not say. */
int hkk_ordinal_of(CUdevice dev);

/* ---- the debug trace (hkk_trace.c, docs/trace.md) ----
 *
 * Cold functions, each called only from a branch taken when tracing is on
 * (hk__tracing); they check the level themselves. */

/* An attempt to open the driver ended with st: the file opened (path, the
 * handle lib) or why not (the create message). Caller holds the driver lock. */
void hkk_trace_driver(hk_status_t st, const char *path, void *lib);
#define HK__KIT_TRACE_DRIVER(st, path, lib)                \
    do {                                                   \
        if (hk__tracing(HK__TRACE_DECISIONS))              \
            hkk_trace_driver((st), (path), (lib));         \
    } while (0)

/* b was bound (its context current if it is not a primary's); why: the rule
 * that chose it. */
void hkk_trace_bound(const hk_kit_bind_t *b, const char *why);

/* A call on b was refused with st; b's message says why. */
void hkk_trace_refused(hk_kit_bind_t *b, hk_status_t st);

/* A call on b pushed its context over prev (pushed 1), or popped it (pushed
 * 0) with the result r of the pop: a failed restore is a level 1 line. */
void hkk_trace_switch(const hk_kit_bind_t *b, CUcontext prev, int pushed, int r);

/* b was re-armed after a reset; old_id: the incarnation that was gone. */
void hkk_trace_rearmed(const hk_kit_bind_t *b, unsigned long long old_id);

/* b's destroy: released primary retains given back, kept (its last one
 * went to the kit, hkk_keep.c), freed (what it made was freed), gone (its
 * context was reset or destroyed), st its status. */
void hkk_trace_unbound(hk_kit_bind_t *b, int released, int kept, int freed, int gone,
                       hk_status_t st);

/* ---- images (hkk_image.c) ---- */

/* Images shorter than this reach the driver in a zero-padded copy this long. */
#define HK__KIT_IMAGE_PAD 4096

/* Checks an image of size bytes as hk.kernels/1's load says, before the
 * driver reads it; *kind: "fatbin", "cubin" or "PTX". Messages to err_to. */
hk_status_t hkk_image_check(hk_kit_bind_t *err_to, const unsigned char *p, size_t size,
                                const char **kind);

/* image itself, or a zero-padded copy of HK__KIT_IMAGE_PAD bytes when it is
 * shorter (*copy: the copy to free; NULL when none). NULL: no memory. */
const void *hkk_image_padded(const void *image, size_t size, void **copy);

/* ---- parameters (hkk_params.c) ---- */

/* The parameter count of k (cuKernelGetParamInfo), or -1 when the driver
 * cannot say. */
int hkk_param_count(CUkernel k);

/* args against a kernel's nparams (-1: unknown, nothing checked): NULL, or a
 * NULL among the first nparams pointers → HK_STATUS_INVALID_VALUE naming it. */
hk_status_t hkk_check_args(hk_kit_bind_t *b, const char *name, int nparams, void **args);

/* ---- the module's unload (hkk_module.c's destructor; never in a fork child) ---- */

/* Unloads every library still loaded that no binding uses, frees the library
 * and kernel registries when none is left; returns how many are left
 * (hkk_library.c). */
size_t hkk_libraries_fini(void);

#endif /* HKK_INTERNAL_H */
