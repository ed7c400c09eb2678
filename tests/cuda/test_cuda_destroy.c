/* What hk-cuda's destroy waits for (docs/contexts.md, "Destroy"): the streams
 * the handle's calls ran on, each with cuStreamSynchronize, and its device
 * memory freed in stream order on one of them (cuMemFreeAsync), so that a
 * destroy neither waits for other threads' queues nor makes the calls that
 * wait for a pause in other threads' launches (facts 25 and 30); context-wide
 * synchronisation only where a stream it used cannot be waited for from the
 * destroying thread. Counts come from the simulated driver. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hk_kit.h"
#include "hk_rt.h"
#include "hkct_context.h"

#define plug hkct_plug
#define sim hkct_sim
#define OK HKCT_OK
#define SCENARIO HKCT_SCENARIO
#define create hkct_create

/* Entry counts around one destroy. */
typedef struct counts {
    unsigned long ctx_sync, stream_sync, free_sync, free_async;
} counts_t;

static counts_t counts(void)
{
    counts_t c = {sim.calls("cuCtxSynchronize"), sim.calls("cuStreamSynchronize"),
                  sim.calls("cuMemFree"), sim.calls("cuMemFreeAsync")};
    return c;
}

/* A handle of device 0 on stream s (NULL: the legacy stream) that ran a
 * reduction there (its workspace is used on s): in host pointer mode, or in
 * device pointer mode (no page-locked result word, whose cuMemFreeHost waits
 * for a pause in other threads' calls: docs/contexts.md, "Destroy"). */
static hk_handle_t *used_handle_mode(CUstream s, void **x, int host_mode)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    float v[5] = {3, 4, 0, 0, 0}, r = 0.0f;
    if (!h)
        return NULL;
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->alloc(h, sizeof v, x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->copy_to_device(h, *x, v, sizeof v), HK_STATUS_OK);
    if (!host_mode) {
        float *dr = (float *)*x + 4;
        CU_ASSERT_EQUAL(plug.vt->set_pointer_mode(h, HK_POINTER_MODE_DEVICE), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug.blas->snrm2(h, 4, *x, 1, dr), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug.mem->copy_to_host(h, &r, dr, sizeof r), HK_STATUS_OK);
    } else {
        CU_ASSERT_EQUAL(plug.blas->snrm2(h, 4, *x, 1, &r), HK_STATUS_OK);
    }
    CU_ASSERT_DOUBLE_EQUAL(r, 5.0, 1e-6);
    return h;
}

static hk_handle_t *used_handle(CUstream s, void **x)
{
    return used_handle_mode(s, x, 1);
}

/* Handles of device 0 made, used in host mode and destroyed, n of them at
 * once: each leaves its slab and word to the kit, which keeps
 * HK_KIT_KEPT_BLOCKS at most. */
static void fill_kept(int n)
{
    hk_handle_t *h[HK_KIT_KEPT_BLOCKS];
    void *x = NULL;
    for (int i = 0; i < n; i++) {
        h[i] = used_handle_mode(NULL, &x, 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h[i]);
        CU_ASSERT_EQUAL(plug.mem->free_(h[i], x), HK_STATUS_OK);
    }
    for (int i = 0; i < n; i++)
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h[i]), HK_STATUS_OK);
}

/* One stream, set once: destroy waits for it alone and frees on it what the
 * kit does not keep for the next create (here the kit keeps as much as it
 * will already: other handles left theirs). */
SCENARIO(t_destroy_one_stream)
{
    CUdevice d0;
    CUcontext p0 = NULL;
    CUstream s = NULL;
    void *x = NULL;
    OK(cuDeviceGet(&d0, 0));
    OK(cuDevicePrimaryCtxRetain(&p0, d0));
    OK(cuCtxPushCurrent(p0));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuCtxPopCurrent(&p0));
    hk_handle_t *h = used_handle(s, &x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    fill_kept(HK_KIT_KEPT_BLOCKS / 2);
    CU_ASSERT_EQUAL(plug.mem->free_(h, x), HK_STATUS_OK);
    size_t live = sim.live();
    counts_t before = counts();
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    counts_t after = counts();
    CU_ASSERT_EQUAL(after.ctx_sync, before.ctx_sync);
    CU_ASSERT(after.stream_sync > before.stream_sync);
    CU_ASSERT_EQUAL(after.free_sync, before.free_sync);
    CU_ASSERT(after.free_async > before.free_async);
    CU_ASSERT(sim.live() < live); /* the workspace is gone when destroy returns */
    OK(cuCtxPushCurrent(p0));
    OK(cuStreamDestroy(s));
    OK(cuCtxPopCurrent(&p0));
    OK(cuDevicePrimaryCtxRelease(d0));
}

/* ---- what a destroy leaves for the next create ---- */

typedef struct cycle_counts {
    unsigned long alloc, host_alloc, free_host, free_sync, free_async, loads, unloads;
} cycle_counts_t;

static cycle_counts_t cycle_counts(void)
{
    cycle_counts_t c = {sim.calls("cuMemAlloc"), sim.calls("cuMemHostAlloc"),
                        sim.calls("cuMemFreeHost"), sim.calls("cuMemFree"),
                        sim.calls("cuMemFreeAsync"), sim.calls("cuLibraryLoadData"),
                        sim.calls("cuLibraryUnload")};
    return c;
}

/* Create, a host-mode reduction (workspace and result word), destroy: the
 * first cycle makes them, the next ones find what the last destroy left (no
 * workspace or word allocated or freed, no library loaded or unloaded: only
 * the cycle's own buffer comes and goes), and a trim gives everything back
 * (docs/contexts.md, "What the kit keeps between handles"). */
SCENARIO(t_cycles_reuse)
{
    enum { CYCLES = 10 };
    size_t live = sim.live(), live_host = sim.live_host(), libs = sim.libraries();
    int refs = sim.refcount(0);
    void *x = NULL;
    hk_handle_t *h = used_handle_mode(NULL, &x, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(plug.mem->free_(h, x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    cycle_counts_t before = cycle_counts();
    for (int i = 0; i < CYCLES; i++) {
        h = used_handle_mode(NULL, &x, 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        CU_ASSERT_EQUAL(plug.mem->free_(h, x), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    }
    cycle_counts_t after = cycle_counts();
    CU_ASSERT_EQUAL(after.alloc - before.alloc, (unsigned long)CYCLES); /* x alone */
    CU_ASSERT_EQUAL(after.free_sync - before.free_sync, (unsigned long)CYCLES); /* x alone */
    CU_ASSERT_EQUAL(after.free_async, before.free_async);
    CU_ASSERT_EQUAL(after.host_alloc, before.host_alloc);
    CU_ASSERT_EQUAL(after.free_host, before.free_host);
    CU_ASSERT_EQUAL(after.loads, before.loads);
    CU_ASSERT_EQUAL(after.unloads, before.unloads);
    CU_ASSERT_EQUAL(sim.libraries(), libs + 1);
    hkct_trim();
    cycle_counts_t trimmed = cycle_counts();
    CU_ASSERT_EQUAL(trimmed.free_host, after.free_host + 1);
    CU_ASSERT_EQUAL(trimmed.unloads, after.unloads + 1);
    CU_ASSERT_EQUAL(sim.live(), live);
    CU_ASSERT_EQUAL(sim.live_host(), live_host);
    CU_ASSERT_EQUAL(sim.libraries(), libs);
    CU_ASSERT_EQUAL(sim.refcount(0), refs);
}

/* Many handles at once (a swap replaces every handle of a plugin): their
 * destroys free nothing the kit keeps, and as many new handles in the same
 * context allocate nothing (no slab, no word); beyond HK_KIT_KEPT_BLOCKS the
 * destroys free the rest; a trim gives every kept block back. */
SCENARIO(t_many_reuse)
{
    enum { MANY = HK_KIT_KEPT_BLOCKS / 2 + 8, AGAIN = HK_KIT_KEPT_BLOCKS / 2 };
    hk_handle_t *h[MANY];
    void *x = NULL;
    size_t live = sim.live(), live_host = sim.live_host();
    for (int i = 0; i < MANY; i++) {
        h[i] = used_handle_mode(NULL, &x, 1); /* each has a slab and a word */
        CU_ASSERT_PTR_NOT_NULL_FATAL(h[i]);
        CU_ASSERT_EQUAL(plug.mem->free_(h[i], x), HK_STATUS_OK);
    }
    cycle_counts_t before = cycle_counts();
    for (int i = 0; i < MANY; i++)
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h[i]), HK_STATUS_OK);
    cycle_counts_t mid = cycle_counts();
    unsigned long freed = (mid.free_sync - before.free_sync) +
                          (mid.free_async - before.free_async) +
                          (mid.free_host - before.free_host);
    CU_ASSERT_EQUAL(freed, (unsigned long)(2 * MANY - HK_KIT_KEPT_BLOCKS));
    for (int i = 0; i < AGAIN; i++) {
        h[i] = create(0, HK_STATUS_OK);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h[i]);
    }
    cycle_counts_t again = cycle_counts();
    CU_ASSERT_EQUAL(again.alloc, mid.alloc);
    CU_ASSERT_EQUAL(again.host_alloc, mid.host_alloc);
    for (int i = 0; i < AGAIN; i++)
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(h[i]), HK_STATUS_OK);
    cycle_counts_t gone = cycle_counts();
    CU_ASSERT_EQUAL(gone.free_sync, again.free_sync);
    CU_ASSERT_EQUAL(gone.free_async, again.free_async);
    CU_ASSERT_EQUAL(gone.free_host, again.free_host);
    hkct_trim();
    CU_ASSERT_EQUAL(sim.live(), live);
    CU_ASSERT_EQUAL(sim.live_host(), live_host);
}

/* Host mode's result word: the first create of the module leaves it to the
 * handle's first host-mode call; every later create makes it (its
 * cuMemHostAlloc waits for a pause in other threads' launches, fact 30, and
 * a swap's new handles are made in its held step), so that handle's first
 * host-mode reduction allocates nothing. */
SCENARIO(t_word_made_by_create)
{
    /* the module's first create (the scenario opened hk-cuda anew) */
    unsigned long host_allocs = sim.calls("cuMemHostAlloc");
    hk_handle_t *first = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(first);
    CU_ASSERT_EQUAL(sim.calls("cuMemHostAlloc"), host_allocs);
    /* a later one, while the first lives (nothing left by a destroy) */
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(sim.calls("cuMemHostAlloc"), host_allocs + 1);
    void *x = NULL;
    float v[2] = {3, 4}, r = 0.0f;
    CU_ASSERT_EQUAL(plug.mem->alloc(h, sizeof v, &x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->copy_to_device(h, x, v, sizeof v), HK_STATUS_OK);
    unsigned long allocs = sim.calls("cuMemAlloc");
    CU_ASSERT_EQUAL(plug.blas->snrm2(h, 2, x, 1, &r), HK_STATUS_OK);
    CU_ASSERT_DOUBLE_EQUAL(r, 5.0, 1e-6);
    CU_ASSERT_EQUAL(sim.calls("cuMemHostAlloc"), host_allocs + 1);
    CU_ASSERT_EQUAL(sim.calls("cuMemAlloc"), allocs);
    /* the first handle's first host-mode call makes its own */
    CU_ASSERT_EQUAL(plug.blas->snrm2(first, 2, x, 1, &r), HK_STATUS_OK);
    CU_ASSERT_DOUBLE_EQUAL(r, 5.0, 1e-6);
    CU_ASSERT_EQUAL(sim.calls("cuMemHostAlloc"), host_allocs + 2);
    CU_ASSERT_EQUAL(plug.mem->free_(h, x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(first), HK_STATUS_OK);
    hkct_trim();
}

/* What a destroy left before a reset of the primary died with it: the next
 * create makes its own, and a trim neither uses nor frees the old. */
SCENARIO(t_kept_before_reset)
{
    size_t live = sim.live(), live_host = sim.live_host();
    void *x = NULL;
    OK(hk_rt_set_device(0));
    hk_handle_t *h = used_handle_mode(NULL, &x, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(plug.mem->free_(h, x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT(sim.live() > live); /* kept for the next create */
    OK(hk_rt_device_reset());
    CU_ASSERT_EQUAL(sim.live(), live); /* gone with the context */
    CU_ASSERT_EQUAL(sim.live_host(), live_host);
    OK(hk_rt_set_device(0));
    unsigned long allocs = sim.calls("cuMemAlloc"), host_allocs = sim.calls("cuMemHostAlloc");
    h = used_handle_mode(NULL, &x, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(sim.calls("cuMemAlloc"), allocs + 2); /* its workspace and x */
    CU_ASSERT_EQUAL(sim.calls("cuMemHostAlloc"), host_allocs + 1);
    CU_ASSERT_EQUAL(plug.mem->free_(h, x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    unsigned long frees = sim.calls("cuMemFree"), host_frees = sim.calls("cuMemFreeHost");
    hkct_trim(); /* frees the new incarnation's set once, the old one not at all */
    CU_ASSERT_EQUAL(sim.calls("cuMemFree"), frees + 1);
    CU_ASSERT_EQUAL(sim.calls("cuMemFreeHost"), host_frees + 1);
    CU_ASSERT_EQUAL(sim.live(), live);
    CU_ASSERT_EQUAL(sim.live_host(), live_host);
    OK(hk_rt_device_reset());
}

/* The legacy stream (the default setting) is a stream like another. */
SCENARIO(t_destroy_legacy_stream)
{
    void *x = NULL;
    hk_handle_t *h = used_handle(NULL, &x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(plug.mem->free_(h, x), HK_STATUS_OK);
    counts_t before = counts();
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    counts_t after = counts();
    CU_ASSERT_EQUAL(after.ctx_sync, before.ctx_sync);
    CU_ASSERT_EQUAL(after.free_sync, before.free_sync);
}

/* Calls on a stream the handle no longer has: that stream may be gone
 * (its owner set another and destroyed it), so it is not touched; destroy
 * waits for the whole context, as it did for every handle before. */
/* Device 0's primary, retained, and two non-blocking streams of it. */
static CUcontext two_streams(CUstream *s1, CUstream *s2)
{
    CUdevice d0;
    CUcontext p0 = NULL;
    OK(cuDeviceGet(&d0, 0));
    OK(cuDevicePrimaryCtxRetain(&p0, d0));
    OK(cuCtxPushCurrent(p0));
    OK(cuStreamCreate(s1, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(s2, CU_STREAM_NON_BLOCKING));
    OK(cuCtxPopCurrent(&p0));
    return p0;
}

/* Destroys stream s of p0 (NULL: none); release: then gives device 0's
 * primary back too. */
static void stream_gone(CUcontext p0, CUstream s, int release)
{
    OK(cuCtxPushCurrent(p0));
    if (s)
        OK(cuStreamDestroy(s));
    OK(cuCtxPopCurrent(&p0));
    CUdevice d0;
    OK(cuDeviceGet(&d0, 0));
    if (release)
        OK(cuDevicePrimaryCtxRelease(d0));
}

SCENARIO(t_destroy_two_streams)
{
    CUstream s1 = NULL, s2 = NULL;
    void *x = NULL;
    CUcontext p0 = two_streams(&s1, &s2);
    hk_handle_t *h = used_handle(s1, &x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(plug.vt->set_stream(h, s2), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->free_(h, x), HK_STATUS_OK);
    stream_gone(p0, s1, 0);
    counts_t before = counts();
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    counts_t after = counts();
    CU_ASSERT_EQUAL(after.ctx_sync, before.ctx_sync + 1);
    stream_gone(p0, s2, 1);
}

/* ---- the per-call note of the stream ---- */

/* pthread_mutex_lock as this program sees it, counted while counting is on:
 * the plugin's calls resolve to this definition (the executable comes first
 * in the global scope). Left out under ThreadSanitizer, which defines the
 * function itself. */
#if !defined(__SANITIZE_THREAD__)
static atomic_ulong mutex_locks;
static atomic_int counting_locks;

int pthread_mutex_lock(pthread_mutex_t *m)
{
    static int (*real)(pthread_mutex_t *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "pthread_mutex_lock");
    if (atomic_load_explicit(&counting_locks, memory_order_relaxed))
        atomic_fetch_add_explicit(&mutex_locks, 1, memory_order_relaxed);
    return real(m);
}

/* Locks taken by n rounds of: set stream a, scale on it, set stream b, scale
 * on it. */
static unsigned long locks_of_rounds(hk_handle_t *h, CUstream a, CUstream b, void *x, int n)
{
    const float one = 1.0f;
    atomic_store(&mutex_locks, 0);
    atomic_store(&counting_locks, 1);
    for (int i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(plug.vt->set_stream(h, a), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug.blas->sscal(h, 4, &one, x, 1), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug.vt->set_stream(h, b), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug.blas->sscal(h, 4, &one, x, 1), HK_STATUS_OK);
    }
    atomic_store(&counting_locks, 0);
    return atomic_load(&mutex_locks);
}

/* Once a handle's calls ran on two streams, destroy waits for the context
 * whatever follows, so a call has nothing more to note: it takes no lock,
 * however often the stream changes. Counted against the same calls on one
 * stream. */
SCENARIO(t_note_many_streams)
{
    enum { ROUNDS = 200 };
    CUstream s1 = NULL, s2 = NULL;
    void *x = NULL;
    CUcontext p0 = two_streams(&s1, &s2);
    hk_handle_t *h = used_handle(s1, &x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    unsigned long one = locks_of_rounds(h, s1, s1, x, ROUNDS);
    (void)locks_of_rounds(h, s1, s2, x, 1); /* now noted: two streams */
    unsigned long two = locks_of_rounds(h, s1, s2, x, ROUNDS);
    printf("\n    locks in %d rounds: one stream %lu, two streams %lu\n    ", ROUNDS, one, two);
    CU_ASSERT(two <= one + 2);
    CU_ASSERT_EQUAL(plug.mem->free_(h, x), HK_STATUS_OK);
    unsigned long syncs = sim.calls("cuCtxSynchronize");
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.calls("cuCtxSynchronize"), syncs + 1); /* two streams: the context */
    stream_gone(p0, s1, 0);
    stream_gone(p0, s2, 1);
}
#endif /* !__SANITIZE_THREAD__ */

/* The per-thread stream of another thread cannot be waited for from this
 * one: the whole context is. */
static hk_handle_t *pt_handle;

static void pt_use(void)
{
    float v[2] = {3, 4}, r = 0.0f;
    void *x = NULL;
    CU_ASSERT_EQUAL(plug.mem->alloc(pt_handle, sizeof v, &x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->copy_to_device(pt_handle, x, v, sizeof v), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.blas->snrm2(pt_handle, 2, x, 1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.mem->free_(pt_handle, x), HK_STATUS_OK);
}

SCENARIO(t_destroy_per_thread_streams)
{
    for (int other = 0; other <= 1; other++) {
        pt_handle = create(0, HK_STATUS_OK);
        CU_ASSERT_PTR_NOT_NULL_FATAL(pt_handle);
        CU_ASSERT_EQUAL(plug.vt->set_stream(pt_handle, CU_STREAM_PER_THREAD), HK_STATUS_OK);
        pt_use();
        if (other)
            hkct_in_thread(pt_use);
        counts_t before = counts();
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(pt_handle), HK_STATUS_OK);
        counts_t after = counts();
        CU_ASSERT_EQUAL(after.ctx_sync, before.ctx_sync + (unsigned long)other);
        CU_ASSERT_EQUAL(hkct_current(), NULL);
    }
}

/* ---- under a service (the simulated driver's quiet model, fact 30) ---- */

enum { SERVICE_THREADS = 2, SERVICE_N = 256 };
#define SERVICE_QUIET_US 50000u /* as long as test_simcuda_quiet.c's, for the same reason */

typedef struct service {
    hk_handle_t *h[SERVICE_THREADS];
    CUstream s[SERVICE_THREADS];
    void *x[SERVICE_THREADS];
    pthread_t th[SERVICE_THREADS];
    int stop;              /* atomic */
    unsigned long rounds;  /* atomic */
    int bad;               /* atomic */
} service_t;

static service_t svc;

/* One thread of the service: a copy in, a saxpy, a copy out (which waits for
 * its stream), without pause, through its own handle on its own stream. */
static void *service_thread(void *arg)
{
    int i = (int)(intptr_t)arg;
    float v[SERVICE_N], two = 2.0f;
    for (int k = 0; k < SERVICE_N; k++)
        v[k] = 1.0f;
    while (!__atomic_load_n(&svc.stop, __ATOMIC_ACQUIRE)) {
        if (plug.mem->copy_to_device(svc.h[i], svc.x[i], v, sizeof v) != HK_STATUS_OK ||
            plug.blas->saxpy(svc.h[i], SERVICE_N, &two, svc.x[i], 1, svc.x[i], 1) !=
                HK_STATUS_OK ||
            plug.mem->copy_to_host(svc.h[i], v, svc.x[i], sizeof v) != HK_STATUS_OK ||
            v[0] != 3.0f)
            __atomic_add_fetch(&svc.bad, 1, __ATOMIC_RELAXED);
        v[0] = 1.0f;
        __atomic_add_fetch(&svc.rounds, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static hk_handle_t *destroying;
static int destroyed; /* atomic: 1 + the status once destroy returned */

static void *destroy_thread(void *arg)
{
    (void)arg;
    hk_status_t st = plug.vt->handle_destroy(destroying);
    __atomic_store_n(&destroyed, 1 + (int)st, __ATOMIC_RELEASE);
    return NULL;
}

/* A handle used on its stream is destroyed while two other threads run a
 * service in the same context: destroy returns while the service goes on,
 * having made none of the calls that wait for it to pause. */
SCENARIO(t_destroy_under_service)
{
    void (*quiet)(unsigned) = (void (*)(unsigned))dlsym(RTLD_DEFAULT, "simcuda_quiet_loads");
    unsigned (*waiting)(void) = (unsigned (*)(void))dlsym(RTLD_DEFAULT,
                                                          "simcuda_loads_waiting");
    CU_ASSERT_PTR_NOT_NULL_FATAL(quiet);
    CU_ASSERT_PTR_NOT_NULL_FATAL(waiting);
    CUdevice d0;
    CUcontext p0 = NULL;
    CUstream mine = NULL;
    void *x = NULL;
    memset(&svc, 0, sizeof svc);
    OK(cuDeviceGet(&d0, 0));
    OK(cuDevicePrimaryCtxRetain(&p0, d0));
    OK(cuCtxPushCurrent(p0));
    OK(cuStreamCreate(&mine, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < SERVICE_THREADS; i++)
        OK(cuStreamCreate(&svc.s[i], CU_STREAM_NON_BLOCKING));
    OK(cuCtxPopCurrent(&p0));
    for (int i = 0; i < SERVICE_THREADS; i++) {
        svc.h[i] = create(0, HK_STATUS_OK);
        CU_ASSERT_PTR_NOT_NULL_FATAL(svc.h[i]);
        CU_ASSERT_EQUAL(plug.vt->set_stream(svc.h[i], svc.s[i]), HK_STATUS_OK);
        CU_ASSERT_EQUAL_FATAL(plug.mem->alloc(svc.h[i], SERVICE_N * sizeof(float), &svc.x[i]),
                              HK_STATUS_OK);
    }
    destroying = used_handle_mode(mine, &x, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(destroying);
    CU_ASSERT_EQUAL(plug.mem->free_(destroying, x), HK_STATUS_OK);
    __atomic_store_n(&destroyed, 0, __ATOMIC_RELEASE);
    quiet(SERVICE_QUIET_US);
    /* from here on nothing fatal: the model must be turned off at the end */
    for (int i = 0; i < SERVICE_THREADS; i++)
        CU_ASSERT_EQUAL(pthread_create(&svc.th[i], NULL, service_thread, (void *)(intptr_t)i), 0);
    for (int t = 0; t < 5000 && __atomic_load_n(&svc.rounds, __ATOMIC_RELAXED) < 64; t++)
        usleep(1000);
    pthread_t td;
    CU_ASSERT_EQUAL(pthread_create(&td, NULL, destroy_thread, NULL), 0);
    for (int t = 0; t < 2000 && !__atomic_load_n(&destroyed, __ATOMIC_ACQUIRE); t++)
        usleep(1000);
    unsigned long rounds = __atomic_load_n(&svc.rounds, __ATOMIC_RELAXED);
    int done = __atomic_load_n(&destroyed, __ATOMIC_ACQUIRE);
    unsigned held = waiting();
    /* it went on: a round more, waited for (a loaded machine may keep the
     * service threads away for a while) */
    for (int t = 0; t < 10000 && __atomic_load_n(&svc.rounds, __ATOMIC_RELAXED) <= rounds; t++)
        usleep(1000);
    CU_ASSERT(__atomic_load_n(&svc.rounds, __ATOMIC_RELAXED) > rounds);
    __atomic_store_n(&svc.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < SERVICE_THREADS; i++)
        pthread_join(svc.th[i], NULL);
    pthread_join(td, NULL);
    quiet(0);
    if (!done)
        printf("\n  destroy did not return while the service ran (%u call(s) waiting for a "
               "pause) ", held);
    CU_ASSERT_EQUAL(done, 1 + (int)HK_STATUS_OK);
    CU_ASSERT_EQUAL(held, 0);
    CU_ASSERT_EQUAL(__atomic_load_n(&svc.bad, __ATOMIC_RELAXED), 0);
    for (int i = 0; i < SERVICE_THREADS; i++) {
        CU_ASSERT_EQUAL(plug.mem->free_(svc.h[i], svc.x[i]), HK_STATUS_OK);
        CU_ASSERT_EQUAL(plug.vt->handle_destroy(svc.h[i]), HK_STATUS_OK);
    }
    OK(cuCtxPushCurrent(p0));
    OK(cuStreamDestroy(mine));
    for (int i = 0; i < SERVICE_THREADS; i++)
        OK(cuStreamDestroy(svc.s[i]));
    OK(cuCtxPopCurrent(&p0));
    OK(cuDevicePrimaryCtxRelease(d0));
}

const hkct_scenario_t hkct_destroy_scenarios[] = {
    {"destroy waits for its one stream and frees on it", t_destroy_one_stream, 1, 0, 1},
    {"create/destroy cycles reuse what the last destroy left; trim gives it back",
     t_cycles_reuse, 1, 0, 1},
    {"what was kept before a reset is neither used nor freed", t_kept_before_reset, 1, 1, 1},
    {"as many handles again reuse what many destroys left, up to the kit's limit",
     t_many_reuse, 1, 0, 1},
    {"creates after the module's first make host mode's word: no allocation at a first dot",
     t_word_made_by_create, 1, 0, 1},
    {"destroy on the legacy stream: no context-wide wait", t_destroy_legacy_stream, 1, 0, 1},
    {"destroy after a change of stream waits for the context", t_destroy_two_streams, 1, 0, 1},
#if !defined(__SANITIZE_THREAD__) /* ThreadSanitizer has pthread_mutex_lock for its own */
    {"calls switching between two noted streams take no lock", t_note_many_streams, 1, 0, 1},
#endif
    {"destroy after per-thread streams of other threads waits for the context",
     t_destroy_per_thread_streams, 1, 0, 1},
    {"destroy returns while other threads run a service in its context",
     t_destroy_under_service, 1, 0, 1},
};
const size_t hkct_destroy_scenario_count =
    sizeof hkct_destroy_scenarios / sizeof hkct_destroy_scenarios[0];
