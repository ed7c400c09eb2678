/* simcuda internals shared by the files of the simulated driver.
 *
 * One mutex (sim.lock) guards all global state. Every driver entry starts with
 * SIM_BEGIN, which refuses calls in a forked child, counts the call, applies
 * injected failures, checks cuInit, and returns holding the lock; the entry
 * leaves through SIM_END, which releases it. The current-context stack is
 * thread-local and touched only by its own thread.
 *
 * Objects handed out as handles (contexts, streams, events, modules, ...) are
 * never freed before the process ends: a stale handle then reads as dead and
 * gets the driver's error code instead of a use-after-free. */
#ifndef SIM_INTERNAL_H
#define SIM_INTERNAL_H

/* Declares every versioned and legacy entry point of cuda.h, as the driver's
 * own build sees them, so each definition here is checked against it. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "simcuda.h"
#include "simcuda_emu.h"

#define SIM_API __attribute__((visibility("default")))

#define SIM_DRIVER_VERSION 13000
#define SIM_MAX_DEVICES 16
#define SIM_STACK_MAX 64
#define SIM_DEVICE_MEM (16ull << 30)
#define SIM_SM_COUNT 132
#define SIM_SHARED_DEFAULT 49152 /* dynamic shared memory a launch may ask by default */
#define SIM_SHARED_OPTIN 232448  /* and at most, once a kernel's attribute allows it */

/* Un-suffixed names of the entries that are counted and can be failed. */
#define SIM_ENTRIES(X)                                                                   \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                \
    X(cuGetProcAddress) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)            \
    X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)              \
    X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxGetState)                           \
    X(cuDevicePrimaryCtxSetFlags) X(cuDevicePrimaryCtxReset) X(cuCtxCreate)              \
    X(cuCtxDestroy) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxPushCurrent)            \
    X(cuCtxPopCurrent) X(cuCtxGetDevice) X(cuCtxGetId) X(cuCtxSynchronize)               \
    X(cuCtxGetApiVersion) X(cuCtxGetFlags) X(cuStreamCreate)                             \
    X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize)              \
    X(cuStreamQuery) X(cuStreamGetCtx) X(cuStreamWaitEvent) X(cuEventCreate)             \
    X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime)         \
    X(cuEventDestroy) X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo) X(cuMemcpy)             \
    X(cuMemHostAlloc) X(cuMemHostGetDevicePointer) X(cuMemFreeHost)                      \
    X(cuMemcpyAsync) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD)                     \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8)         \
    X(cuMemsetD32) X(cuMemsetD8Async) X(cuMemsetD32Async) X(cuPointerGetAttribute)       \
    X(cuPointerGetAttributes) X(cuModuleLoadData) X(cuModuleLoadDataEx)                  \
    X(cuModuleUnload) X(cuModuleGetFunction) X(cuLibraryLoadData) X(cuLibraryUnload)     \
    X(cuLibraryGetKernel) X(cuLibraryGetModule) X(cuKernelGetFunction)                   \
    X(cuKernelGetName) X(cuKernelGetAttribute) X(cuFuncGetName) X(cuLaunchKernel)        \
    X(cuKernelGetParamInfo) X(cuFuncGetParamInfo) X(cuKernelSetAttribute)                \
    X(cuFuncSetAttribute)                                                                \
    X(cuLaunchKernelEx)                                                                  \
    X(cuStreamBeginCapture)                                                              \
    X(cuStreamEndCapture) X(cuStreamIsCapturing) X(cuStreamGetCaptureInfo)               \
    X(cuGraphInstantiate)                                                                \
    X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy)                \
    X(cuGraphDestroy) X(cuDeviceGetDevResource) X(cuDevSmResourceSplitByCount)           \
    X(cuDevResourceGenerateDesc)                                                         \
    X(cuGreenCtxCreate) X(cuGreenCtxDestroy) X(cuCtxFromGreenCtx) X(cuStreamGetId)        \
    X(cuThreadExchangeStreamCaptureMode) X(cuCtxGetStreamPriorityRange)                   \
    X(cuMemAllocAsync) X(cuMemFreeAsync)

enum sim_entry {
#define SIM__ENUM(n) SIM_E_##n,
    SIM_ENTRIES(SIM__ENUM)
#undef SIM__ENUM
    SIM_E__COUNT
};

/* Every handle starts with this header; magic tells the kinds apart (a CUkernel
 * passed as a CUfunction, a stale or foreign pointer). */
enum sim_magic {
    SIM_MAGIC_CTX = 0x5c0c7a01,
    SIM_MAGIC_STREAM,
    SIM_MAGIC_EVENT,
    SIM_MAGIC_MODULE,
    SIM_MAGIC_FUNC,
    SIM_MAGIC_LIB,
    SIM_MAGIC_KERNEL,
    SIM_MAGIC_GRAPH,
    SIM_MAGIC_GEXEC,
    SIM_MAGIC_GREEN,
    SIM_MAGIC_DESC,
};

typedef struct sim_obj {
    unsigned magic;
    struct sim_obj *next_obj; /* all objects, freed at exit */
    void *owned;              /* one extra block freed with the object */
} sim_obj_t;

enum sim_ctx_kind { SIM_CTX_PRIMARY, SIM_CTX_USER, SIM_CTX_GREEN };

struct CUctx_st {
    sim_obj_t hdr;
    int device;
    enum sim_ctx_kind kind;
    int alive;              /* primary: active; user/green: not destroyed */
    unsigned long long id;  /* valid while alive; a new one each activation */
    unsigned flags;
    struct CUgreenCtx_st *green;
    struct CUstream_st *legacy; /* its legacy default stream, made on first use */
    unsigned held;          /* launches into it held running (simcuda_hold_launches) */
    unsigned long long last_launch_us; /* monotonic time of its latest launch (sim_quiet.c) */
};

struct CUgreenCtx_st {
    sim_obj_t hdr;
    struct CUctx_st *ctx;
};

struct CUdevResourceDesc_st {
    sim_obj_t hdr;
    unsigned sm_count;
};

/* Objects that live in one context: usable while that context is alive and
 * still carries the ID it had when they were made. */
typedef struct sim_owner {
    struct CUctx_st *ctx;
    unsigned long long ctx_id;
} sim_owner_t;

/* What a CUstream value names: a stream made with cuStreamCreate, or one of the
 * special streams, which the simulation resolves to objects of their own: the
 * legacy stream of a context, and each thread's per-thread stream of each
 * context (fact 20: the same CU_STREAM_PER_THREAD value is a different stream
 * on every thread). Work pending on a stream (sim_exec.c) is kept in order. */
enum sim_stream_kind { SIM_STREAM_USER, SIM_STREAM_LEGACY, SIM_STREAM_PER_THREAD };

struct CUstream_st {
    sim_obj_t hdr;
    sim_owner_t own;
    int alive;
    unsigned flags;
    enum sim_stream_kind kind;
    unsigned long long id;  /* cuStreamGetId: unique for the life of the process */
    struct CUstream_st *next_ptds; /* the thread's other per-thread streams */
    int capturing;          /* a capture sequence is open */
    int capture_invalid;    /* an illegal call invalidated it */
    unsigned long long capture_id; /* of the open sequence, unique in the process */
    CUstreamCaptureMode capture_mode;
    pthread_t capture_thread; /* the thread that began it */
    struct CUgraph_st *capture_graph;
    unsigned held;          /* launches on it held running (simcuda_hold_launches) */
};

struct CUevent_st {
    sim_obj_t hdr;
    sim_owner_t own;
    int alive;
    unsigned flags;
    int recorded;
    double when_ms;
    unsigned long long capture_id; /* recorded into this capture sequence (0: outside one) */
};

struct CUmod_st {
    sim_obj_t hdr;
    sim_owner_t own;
    int alive;
    const unsigned char *image; /* own copy, or the library's */
    size_t image_size;
    struct CUlib_st *lib;       /* set for a library's per-context module */
    struct CUfunc_st *funcs;
    struct CUmod_st *next_in_lib;
};

/* A kernel's parameters and shared memory limits (sim_kinfo.c), made when
 * first asked for: most kernels and functions never are, and the objects
 * stay small (every object is on one list that some calls walk). */
struct sim_kinfo;

struct CUfunc_st {
    sim_obj_t hdr;
    sim_owner_t own;
    const char *name;
    struct CUmod_st *mod;       /* from cuModuleGetFunction, else NULL */
    struct CUkern_st *kernel;   /* from cuKernelGetFunction, else NULL */
    struct CUfunc_st *next;     /* in mod->funcs or kernel->funcs */
    struct sim_kinfo *kinfo;
};

struct CUlib_st {
    sim_obj_t hdr;
    int alive;
    unsigned running;           /* held launches of its kernels (simcuda_hold_launches) */
    const unsigned char *image;
    size_t image_size;
    struct CUkern_st *kernels;
    struct CUmod_st *modules;
};

struct CUkern_st {
    sim_obj_t hdr;
    struct CUlib_st *lib;
    const char *name;
    struct CUfunc_st *funcs;    /* one per context (ID) it was used in */
    struct CUkern_st *next;
    struct sim_kinfo *kinfo;
};

/* A captured operation, replayed by cuGraphLaunch: a kernel launch, or a
 * memset (dst, value, unit, n) or copy (dst, src, n) made on a capturing
 * stream. */
enum sim_node_kind { SIM_NODE_KERNEL, SIM_NODE_MEMSET, SIM_NODE_COPY };

typedef struct sim_node {
    struct sim_node *next;
    enum sim_node_kind kind;
    const simcuda_emu_entry_t *emu;
    unsigned grid[3], block[3], shared_bytes;
    void *argv[SIMCUDA_EMU_MAX_PARAMS];
    unsigned char *args;        /* copies of the argument values */
    void *dst;
    const void *src;
    unsigned value;
    size_t unit, n;
} sim_node_t;

/* Nodes are shared, read-only, by a graph and the executables made from it. */
typedef struct sim_nodes {
    int refs;
    sim_node_t *first, *last;
} sim_nodes_t;

struct CUgraph_st {
    sim_obj_t hdr;
    sim_owner_t own;
    int alive;
    sim_nodes_t *nodes;
};

struct CUgraphExec_st {
    sim_obj_t hdr;
    sim_owner_t own;
    int alive;
    sim_nodes_t *nodes;
};

typedef struct sim_alloc {
    uintptr_t base;
    size_t size;
    struct CUctx_st *ctx;
    int device;
    int host; /* page-locked host memory mapped for the device (cuMemHostAlloc) */
} sim_alloc_t;

typedef struct sim_device {
    struct CUctx_st *primary;
    int refcount;
    int rt_retained;  /* the runtime-like layer holds one of the retains */
    unsigned primary_flags;
} sim_device_t;

typedef struct sim_state {
    pthread_mutex_t lock;
    int initialized;
    int env_read;
    int trace;                 /* SIMCUDA_TRACE=1: failing calls on stderr */
    int ndev;
    sim_device_t dev[SIM_MAX_DEVICES];
    unsigned long long next_ctx_id;
    sim_obj_t *objects;
    sim_alloc_t *allocs;
    size_t nallocs, cap_allocs;
    unsigned long calls[SIM_E__COUNT];
    unsigned fail_k[SIM_E__COUNT];
    unsigned fail_more[SIM_E__COUNT]; /* further calls that fail after the k-th */
    CUresult fail_err[SIM_E__COUNT];
    simcuda_launch_record_t *log;
    size_t nlog, cap_log;
    int open_captures;         /* open capture sequences, any mode */
    unsigned long long next_capture_id;
    struct CUlib_st *libs;
    unsigned long long next_stream_id;
    struct sim_grid *pending;  /* launches not run to the end yet (sim_exec.c) */
    unsigned hold_next;        /* launches still to hold running (simcuda_hold_launches) */
    unsigned unload_waiting;   /* threads in cuLibraryUnload waiting for a held launch */
    unsigned sync_waiting;     /* threads in cuCtxSynchronize or cuStreamSynchronize
                                  waiting for a held launch */
    pthread_cond_t held_done;  /* signalled by simcuda_finish_launches */
    unsigned quiet_us;         /* simcuda_quiet_loads; 0: loads never wait */
    unsigned loads_waiting;    /* calls waiting for a pause in launches (sim_quiet.c) */
} sim_state_t;

extern sim_state_t sim;
extern volatile int sim_forked; /* set in a fork child; read without the lock */

typedef struct sim_tls {
    struct CUctx_st *stack[SIM_STACK_MAX];
    int depth;
    struct CUstream_st *ptds;          /* this thread's per-thread streams */
    CUstreamCaptureMode capture_mode;  /* cuThreadExchangeStreamCaptureMode */
} sim_tls_t;

extern _Thread_local sim_tls_t sim_tls;

/* Entry protocol; see the file comment. */
CUresult sim_enter(enum sim_entry e, int need_init);
void sim_leave(enum sim_entry e, CUresult r);

#define SIM_BEGIN(name)                                                                 \
    const enum sim_entry sim_entry_ = SIM_E_##name;                                     \
    CUresult r = sim_enter(sim_entry_, 1);                                              \
    if (r != CUDA_SUCCESS)                                                              \
        return r
#define SIM_BEGIN_NOINIT(name)                                                          \
    const enum sim_entry sim_entry_ = SIM_E_##name;                                     \
    CUresult r = sim_enter(sim_entry_, 0);                                              \
    if (r != CUDA_SUCCESS)                                                              \
        return r
#define SIM_END                                                                         \
    out:                                                                                \
    sim_leave(sim_entry_, r);                                                           \
    return r
/* Sets r and jumps to the entry's exit when cond holds. */
#define SIM_FAIL_IF(cond, err)                                                          \
    do {                                                                                \
        if (cond) {                                                                     \
            r = (err);                                                                  \
            goto out;                                                                   \
        }                                                                               \
    } while (0)
#define SIM_CHECK(expr)                                                                 \
    do {                                                                                \
        r = (expr);                                                                     \
        if (r != CUDA_SUCCESS)                                                          \
            goto out;                                                                   \
    } while (0)

/* sim_core.c */
void *sim_obj_new(enum sim_magic magic, size_t size); /* zeroed; NULL when out of memory */
int sim_entry_index(const char *name);                /* -1 when unknown */
const char *sim_entry_name(int e);
void sim_init_locked(void);                           /* what cuInit sets up; idempotent */
double sim_now_ms(void);

/* sim_ctx.c (lock held) */
CUresult sim_current(struct CUctx_st **out);          /* 201 none, 709 dead */
int sim_ctx_valid(const struct CUctx_st *c);          /* a live context handle */
int sim_owner_valid(const sim_owner_t *o);
sim_owner_t sim_owner_of(struct CUctx_st *c);
CUresult sim_primary_retain(int dev, struct CUctx_st **out);
CUresult sim_primary_release(int dev);
void sim_primary_reset(int dev);
void sim_tls_set_top(struct CUctx_st *c);             /* cuCtxSetCurrent */
void sim_ctx_start(struct CUctx_st *c);               /* alive, with a new ID */
void sim_ctx_end(struct CUctx_st *c);                 /* dead: ID, memory, captures go */

/* sim_mem.c (lock held) */
void sim_mem_drop_ctx(struct CUctx_st *c);            /* frees what c allocated */
const sim_alloc_t *sim_mem_find(uintptr_t p);         /* the live block holding p */
void sim_mem_free_all(void);

/* sim_stream.c (lock held). The special streams (NULL, legacy, per-thread) are
 * resolved to their objects in the context concerned; the per-thread stream
 * of a green context does not exist (400, fact 22).
 * actual: s as seen in context ctx. resolve: s must belong to cur (400
 * otherwise). target: the context work on s runs in (s's own, or the current
 * one for the special streams) and the stream. */
int sim_stream_special(CUstream s);
CUresult sim_stream_actual(CUstream s, struct CUctx_st *ctx, struct CUstream_st **out);
CUresult sim_stream_resolve(CUstream s, struct CUctx_st *cur, struct CUstream_st **out);
CUresult sim_stream_target(CUstream s, struct CUctx_st **ctx, struct CUstream_st **out);

/* sim_capture.c (lock held): what the driver refuses while streams capture.
 * forbid: a call the driver forbids during capture by the calling thread's
 * capture mode (allocation, freeing, context synchronisation): 900,
 * invalidating the captures concerned, unless the mode allows it (fact 23).
 * refuse: a call that may not touch a capturing stream s (its ID, a
 * synchronise, a query): err, and s's capture is invalidated.
 * legacy: work on s, the legacy stream of c, while a blocking stream of c
 * captures: 906, invalidating those captures. */
CUresult sim_capture_forbid(void);
CUresult sim_capture_refuse(struct CUstream_st *s, CUresult err);
CUresult sim_capture_legacy(struct CUctx_st *c, const struct CUstream_st *s);
/* cuCtxSynchronize of c: refused (900) while any stream of c captures, in
 * every mode, invalidating those captures; else as sim_capture_forbid. */
CUresult sim_capture_ctx_sync(struct CUctx_st *c);
/* An event: recorded into a capture is 907 to a query or synchronise (that
 * capture invalidated); one recorded outside, waited for by a capturing
 * stream s, is 905 (s's capture invalidated). */
CUresult sim_capture_event_query(struct CUevent_st *e);
CUresult sim_capture_event_wait(struct CUstream_st *s, const struct CUevent_st *e);
void sim_capture_drop_ctx(struct CUctx_st *c);        /* close captures of c's streams */

/* sim_module.c (lock held) */
int sim_image_has_name(const unsigned char *img, size_t size, const char *name);

/* sim_kinfo.c (lock held): a launch's dynamic shared memory against the
 * function's limit, and its arguments read as the driver reads them (one
 * value per parameter; INVALID_VALUE for NULL args of a kernel that has
 * parameters). f: a CUkernel or a CUfunction, live. */
CUresult sim_launch_args(CUfunction f, int device, unsigned shared_bytes, void **params);
int sim_kernel_max_dynamic_shared(struct CUkern_st *k, int device);

/* sim_image.c: reads an image as the driver does (so a lying one is read
 * past its buffer) and gives the bytes to copy; INVALID_IMAGE when it is
 * none of the kinds, NO_BINARY_FOR_GPU for a fatbin without entries. */
CUresult sim_image_read(const void *image, size_t *size);

/* The parameters of kernel name in PTX text (offset and size of each, at
 * most max): 1 when the text declares it (*n may be 0), else 0. */
int sim_ptx_params(const unsigned char *img, size_t size, const char *name, unsigned *n,
                   unsigned offset[], unsigned psize[], unsigned max);
int sim_kernel_live(const struct CUkern_st *k);      /* its library is loaded */
int sim_lib_loaded(const struct CUlib_st *l, const struct CUctx_st *c); /* has a module in c */
int sim_func_live(const struct CUfunc_st *f);        /* context, ID and module alive */
CUresult sim_kernel_function(struct CUkern_st *k, struct CUctx_st *c, struct CUfunc_st **out);

/* sim_launch.c (lock held) */
const simcuda_emu_entry_t *sim_emu_find(const char *name);
CUresult sim_run(const simcuda_emu_entry_t *emu, const char *name, struct CUctx_st *ctx,
                 CUstream stream, const unsigned grid[3], const unsigned block[3],
                 unsigned shared_bytes, void **params);
void sim_log_free(void);

/* sim_exec.c (lock held): launches of kernels emulated block by block run
 * part of their blocks at the launch and the rest later, interleaved with the
 * blocks of launches on other streams, as concurrent streams run on a GPU.
 * launch: runs what stream order requires first, then starts the grid.
 * flush: runs every pending block (of one context; or all). */
CUresult sim_exec_launch(const simcuda_emu_entry_t *emu, const char *name, struct CUctx_st *ctx,
                         struct CUstream_st *s, CUstream hstream, const unsigned grid[3],
                         const unsigned block[3], unsigned shared_bytes, void **params);
void sim_exec_order(struct CUstream_st *s); /* what work on s must wait for */
void sim_exec_flush(struct CUctx_st *ctx);  /* ctx NULL: every context */
void sim_exec_free(void);
int sim_entry_keeps_pending(enum sim_entry e);

/* sim_quiet.c (lock held): the quiet-load model (simcuda_quiet_loads, fact
 * 25). note_launch: a launch (attempted or not) went into c now. wait: a call
 * that loads code into c or makes a stream there waits, with the lock
 * released, until c has seen no launch for quiet_us, c died or the model was
 * turned off; the caller must check its objects again afterwards.
 * read_env: SIMCUDA_QUIET_LOADS_US, at cuInit. */
void sim_quiet_note_launch(struct CUctx_st *c);
void sim_quiet_wait(struct CUctx_st *c);
/* The same for every context the library is loaded in (its unload). */
void sim_quiet_wait_lib(const struct CUlib_st *l);
void sim_quiet_read_env(void);

/* sim_pause.c (no lock held): the calling thread's next call of e waits here
 * when simcuda_pause_next armed it, until simcuda_resume or
 * simcuda_resume_entry(e); first it sleeps as simcuda_slow_calls asked. */
void sim_pause_point(enum sim_entry e);

/* sim_graph.c (lock held): operations on a capturing stream become nodes of
 * its graph instead of running. */
CUresult sim_capture_launch(struct CUstream_st *s, const simcuda_emu_entry_t *emu,
                            const char *name, const unsigned grid[3], const unsigned block[3],
                            unsigned shared_bytes, void **params);
CUresult sim_capture_memset(struct CUstream_st *s, void *dst, unsigned value, size_t unit,
                            size_t n);
CUresult sim_capture_copy(struct CUstream_st *s, void *dst, const void *src, size_t n);
struct CUgraph_st *sim_graph_new(const sim_owner_t *own); /* empty; NULL out of memory */
void sim_nodes_unref(sim_nodes_t *n);

#endif /* SIM_INTERNAL_H */
