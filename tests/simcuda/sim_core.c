/* simcuda core: global state, the entry protocol, objects, cuInit, fork,
 * driver version and error names. */
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

sim_state_t sim = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_ctx_id = 1,
                   .held_done = PTHREAD_COND_INITIALIZER};
volatile int sim_forked;
_Thread_local sim_tls_t sim_tls;

static const char *const entry_names[SIM_E__COUNT] = {
#define SIM__NAME(n) #n,
    SIM_ENTRIES(SIM__NAME)
#undef SIM__NAME
};

int sim_entry_index(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < SIM_E__COUNT; i++)
        if (strcmp(entry_names[i], name) == 0)
            return i;
    return -1;
}

const char *sim_entry_name(int e)
{
    return e >= 0 && e < SIM_E__COUNT ? entry_names[e] : "?";
}

/* SIMCUDA_FAIL="entry:k:code,..." arms failures as simcuda_fail would; bad
 * items are ignored (test equipment configured by a person, who sees the
 * test fail to inject). */
static void sim_read_env_locked(void)
{
    const char *trace = getenv("SIMCUDA_TRACE");
    sim.trace = trace && strcmp(trace, "1") == 0;
    const char *spec = getenv("SIMCUDA_FAIL");
    if (!spec || !*spec)
        return;
    char *copy = strdup(spec);
    if (!copy)
        return;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char name[64];
        unsigned k;
        int code;
        if (sscanf(item, " %63[^:]:%u:%d", name, &k, &code) != 3)
            continue;
        int e = sim_entry_index(name);
        if (e < 0)
            continue;
        sim.fail_k[e] = k;
        sim.fail_more[e] = 0;
        sim.fail_err[e] = (CUresult)code;
    }
    free(copy);
}

CUresult sim_enter(enum sim_entry e, int need_init)
{
    /* In a fork child cuInit and everything needing it fail; the calls that
     * work before cuInit (version, error names, cuGetProcAddress) still work
     * (fact 18, as measured). */
    if (sim_forked && (need_init || e == SIM_E_cuInit))
        return CUDA_ERROR_NOT_INITIALIZED;
    sim_pause_point(e);
    pthread_mutex_lock(&sim.lock);
    if (!sim.env_read) {
        sim.env_read = 1;
        sim_read_env_locked();
    }
    sim.calls[e]++;
    if (sim.fail_k[e] && --sim.fail_k[e] == 0) {
        CUresult err = sim.fail_err[e];
        if (sim.fail_more[e]) { /* simcuda_fail_repeat: the next call fails too */
            sim.fail_more[e]--;
            sim.fail_k[e] = 1;
        }
        if (sim.trace)
            fprintf(stderr, "simcuda: %s -> %d (injected)\n", entry_names[e], (int)err);
        pthread_mutex_unlock(&sim.lock);
        return err;
    }
    if (need_init && !sim.initialized) {
        if (sim.trace)
            fprintf(stderr, "simcuda: %s -> 3 (before cuInit)\n", entry_names[e]);
        pthread_mutex_unlock(&sim.lock);
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    /* Whatever could observe a result first lets pending blocks finish. */
    if (sim.pending && !sim_entry_keeps_pending(e))
        sim_exec_flush(NULL);
    return CUDA_SUCCESS;
}

void sim_leave(enum sim_entry e, CUresult r)
{
    if (r != CUDA_SUCCESS && sim.trace)
        fprintf(stderr, "simcuda: %s -> %d\n", entry_names[e], (int)r);
    pthread_mutex_unlock(&sim.lock);
}

void *sim_obj_new(enum sim_magic magic, size_t size)
{
    sim_obj_t *o = calloc(1, size);
    if (!o)
        return NULL;
    o->magic = magic;
    o->next_obj = sim.objects;
    sim.objects = o;
    return o;
}

double sim_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A child of a process that used the driver cannot use it (docs/contexts.md fact 18).
 * The child has one thread, so no lock is held there; it is re-made anyway
 * for the simcuda_* functions, which still take it. */
static void sim_atfork_child(void)
{
    sim_forked = 1;
    pthread_mutex_init(&sim.lock, NULL);
    pthread_cond_init(&sim.held_done, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void sim_register_atfork(void)
{
    pthread_atfork(NULL, NULL, sim_atfork_child);
}

void sim_init_locked(void)
{
    if (sim.initialized)
        return;
    const char *n = getenv("SIMCUDA_DEVICES");
    int ndev = n && *n ? atoi(n) : 2;
    if (ndev < 1)
        ndev = 1;
    if (ndev > SIM_MAX_DEVICES)
        ndev = SIM_MAX_DEVICES;
    for (int d = 0; d < ndev; d++) {
        struct CUctx_st *p = sim_obj_new(SIM_MAGIC_CTX, sizeof *p);
        if (!p)
            return; /* stays uninitialised; cuInit reports out of memory */
        p->device = d;
        p->kind = SIM_CTX_PRIMARY;
        sim.dev[d].primary = p;
    }
    sim.ndev = ndev;
    sim_quiet_read_env();
    sim.initialized = 1;
    pthread_once(&atfork_once, sim_register_atfork);
}

SIM_API CUresult cuInit(unsigned int flags)
{
    SIM_BEGIN_NOINIT(cuInit);
    SIM_FAIL_IF(flags != 0, CUDA_ERROR_INVALID_VALUE);
    sim_init_locked();
    SIM_FAIL_IF(!sim.initialized, CUDA_ERROR_OUT_OF_MEMORY);
    SIM_END;
}

SIM_API CUresult cuDriverGetVersion(int *version)
{
    SIM_BEGIN_NOINIT(cuDriverGetVersion);
    SIM_FAIL_IF(!version, CUDA_ERROR_INVALID_VALUE);
    *version = SIM_DRIVER_VERSION;
    SIM_END;
}

#define SIM_ERRORS(X)                                                                   \
    X(CUDA_SUCCESS, "no error")                                                         \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                     \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                        \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                               \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                 \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                       \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                              \
    X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                       \
    X(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed")                           \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                             \
    X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current")                    \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                             \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation is not permitted in the current state")  \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                   \
    X(CUDA_ERROR_NOT_READY, "device not ready")                                         \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")           \
    X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                           \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")                          \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                              \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                              \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,                                            \
      "operation not permitted when stream is capturing")                               \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,                                            \
      "operation failed due to a previous error during capture")                        \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,                                              \
      "operation would have merged two independent capture sequences")                 \
    X(CUDA_ERROR_CAPTURED_EVENT,                                                        \
      "operation not permitted on an event last recorded in a capturing stream")        \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,                                               \
      "operation would make the legacy stream depend on a capturing blocking stream")   \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,                                           \
      "attempt to terminate a thread-local capture sequence from another thread")       \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

SIM_API CUresult cuGetErrorName(CUresult error, const char **str)
{
    SIM_BEGIN_NOINIT(cuGetErrorName);
    SIM_FAIL_IF(!str, CUDA_ERROR_INVALID_VALUE);
    switch (error) {
#define SIM__ERRNAME(code, text)                                                        \
    case code:                                                                          \
        *str = #code;                                                                   \
        goto out;
        SIM_ERRORS(SIM__ERRNAME)
#undef SIM__ERRNAME
    default:
        *str = NULL;
        r = CUDA_ERROR_INVALID_VALUE;
    }
    SIM_END;
}

SIM_API CUresult cuGetErrorString(CUresult error, const char **str)
{
    SIM_BEGIN_NOINIT(cuGetErrorString);
    SIM_FAIL_IF(!str, CUDA_ERROR_INVALID_VALUE);
    switch (error) {
#define SIM__ERRSTR(code, text)                                                         \
    case code:                                                                          \
        *str = text;                                                                    \
        goto out;
        SIM_ERRORS(SIM__ERRSTR)
#undef SIM__ERRSTR
    default:
        *str = NULL;
        r = CUDA_ERROR_INVALID_VALUE;
    }
    SIM_END;
}

/* Test equipment frees everything at exit so leak checkers see a clean run. */
__attribute__((destructor)) static void sim_fini(void)
{
    pthread_mutex_lock(&sim.lock);
    sim_exec_free();
    sim_mem_free_all();
    sim_log_free();
    sim_obj_t *o = sim.objects;
    sim.objects = NULL;
    while (o) {
        sim_obj_t *next = o->next_obj;
        if (o->magic == SIM_MAGIC_GRAPH)
            sim_nodes_unref(((struct CUgraph_st *)o)->nodes);
        else if (o->magic == SIM_MAGIC_GEXEC)
            sim_nodes_unref(((struct CUgraphExec_st *)o)->nodes);
        free(o->owned);
        free(o);
        o = next;
    }
    sim.initialized = 0;
    pthread_mutex_unlock(&sim.lock);
}
