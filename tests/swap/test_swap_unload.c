/* hk-cuda is unload-safe: once its module is closed (no handle, no call in
 * flight, no acquire), nothing is left pointing into it and nothing it loaded
 * is left behind.
 *   - the kit's fork handler goes with the module (glibc unregisters it at
 *     dlclose): a fork() after the close runs nothing of it, and the file is
 *     gone from /proc/self/maps;
 *   - the kernel library stays after the last handle and goes with a trim,
 *     which the loader asks for (hk.trim/1) before it closes the module,
 *     outside the dynamic loader's lock; a library loaded through
 *     hk.kernels/1 and left loaded goes with the module; no allocation or
 *     primary retain is left;
 *   - a destroy waits in the driver with no lock held that a create or a
 *     call on another handle needs: while the last handle's destroy waits
 *     for a kernel still running in its context (its context
 *     synchronisation), another thread creates a handle in another context,
 *     computes and finishes; and a swap closes a module while a kernel of
 *     another library runs in another context;
 *   - in a fork() child, closing the module touches nothing of the parent's;
 *   - at process exit (module still open) the destructor touches no driver,
 *     while a close gives back the library left loaded; and the driver stays
 *     mapped when the close drops the process's last reference to it
 *     (swap_exit_helper.c, a process of its own).
 * Each case uses a loader of its own on hk-cuda's files, which nothing else
 * in the process has opened (this suite runs first). The counting and the
 * held kernels are the simulated driver's (tests/simcuda). */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hk_shell.h"
#include "hk_kernels.h"
#include "hk_status_text.h"
#include "hk_trim.h"
#include "swap_test.h"

#define N 256

/* The simulated driver's counters and held launches (NULL on a real one). */
static struct {
    size_t (*live_libraries)(void);
    size_t (*live_allocations)(void);
    int (*primary_refcount)(int device);
    void (*fail_repeat)(const char *entry, unsigned k, unsigned n, CUresult err);
    void (*hold_launches)(unsigned n);
    void (*finish_launches)(void);
    unsigned (*syncs_waiting)(void);
    unsigned long (*call_count)(const char *entry);
    int (*pause_next)(const char *entry);
    int (*wait_paused)(unsigned n, unsigned timeout_ms);
    void (*resume)(void);
} sim;

/* A valid PTX image for any driver: one empty kernel. */
static const char probe_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                                ".visible .entry hk_unload_probe()\n{\n\tret;\n}\n";

#define SIM_FN(name) (dlsym(RTLD_DEFAULT, "simcuda_" #name))

static int sim_found(void)
{
    *(void **)&sim.live_libraries = SIM_FN(live_libraries);
    *(void **)&sim.live_allocations = SIM_FN(live_allocations);
    *(void **)&sim.primary_refcount = SIM_FN(primary_refcount);
    *(void **)&sim.fail_repeat = SIM_FN(fail_repeat);
    *(void **)&sim.hold_launches = SIM_FN(hold_launches);
    *(void **)&sim.finish_launches = SIM_FN(finish_launches);
    *(void **)&sim.syncs_waiting = SIM_FN(syncs_waiting);
    *(void **)&sim.call_count = SIM_FN(call_count);
    *(void **)&sim.pause_next = SIM_FN(pause_next);
    *(void **)&sim.wait_paused = SIM_FN(wait_paused);
    *(void **)&sim.resume = SIM_FN(resume);
    return sim.live_libraries && sim.live_allocations && sim.primary_refcount &&
           sim.fail_repeat && sim.hold_launches && sim.finish_launches && sim.syncs_waiting &&
           sim.call_count && sim.pause_next && sim.wait_paused && sim.resume;
}

/* A loader of its own with hk-cuda (path) opened and acquired, for raw
 * handles; the file must be mapped by nobody else. */
typedef struct rig {
    hk_loader_t *loader;
    hk_plugin_t *p;
    const hk_vtable_t *vt;
    const hk_blas1_v1_t *blas;
    const hk_memory_v1_t *mem;
    const hk_kernels_v1_t *kern;
} rig_t;

/* The rig's loader's deadline_ms (0: the default). */
static uint32_t rig_deadline_ms;

static int rig_up(rig_t *r, const char *path)
{
    memset(r, 0, sizeof *r);
    CU_ASSERT(!swp_mapped(path)); /* this case sees the module go */
    r->loader = swp_loader_deadline(rig_deadline_ms);
    r->p = r->loader ? swp_open(r->loader, path) : NULL;
    if (!r->p)
        return 0;
    hk_plugin_acquire(r->p);
    r->vt = hk_plugin_vtable(r->p);
    r->blas = hk_plugin_table(r->p, HK_TABLE_BLAS1_V1);
    r->mem = hk_plugin_table(r->p, HK_TABLE_MEMORY_V1);
    r->kern = hk_plugin_table(r->p, HK_TABLE_KERNELS_V1);
    return r->vt && r->blas && r->mem && r->kern;
}

/* Gives the acquire back and destroys the loader, which closes the module. */
static void rig_down(rig_t *r, const char *path)
{
    hk_plugin_release(r->p);
    CU_ASSERT_EQUAL(hk_loader_destroy(r->loader), HK_STATUS_OK);
    CU_ASSERT(!swp_mapped(path));
}

/* saxpy on n = N through a raw handle, checked: 1 when right. */
static int computes(const rig_t *r, hk_handle_t *h)
{
    float x[N], y[N], two = 2.0f;
    void *dx = NULL, *dy = NULL;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 7);
        y[i] = 1.0f;
    }
    int ok = r->mem->alloc(h, sizeof x, &dx) == HK_STATUS_OK
             && r->mem->alloc(h, sizeof y, &dy) == HK_STATUS_OK
             && r->mem->copy_to_device(h, dx, x, sizeof x) == HK_STATUS_OK
             && r->mem->copy_to_device(h, dy, y, sizeof y) == HK_STATUS_OK
             && r->blas->saxpy(h, N, &two, dx, 1, dy, 1) == HK_STATUS_OK
             && r->mem->copy_to_host(h, y, dy, sizeof y) == HK_STATUS_OK;
    for (int i = 0; ok && i < N; i++)
        ok = y[i] == 2.0f * (float)(i % 7) + 1.0f;
    if (dx)
        r->mem->free_(h, dx);
    if (dy)
        r->mem->free_(h, dy);
    return ok;
}

/* A saxpy through a raw handle that keeps "running" (simcuda_hold_launches)
 * until sim.finish_launches, after which *dx and *dy are the caller's to
 * free: nothing here waits for it, as nothing may while a kernel runs
 * (its stream's synchronisation would wait, as on a GPU). 1 when issued. */
static int runs_held(const rig_t *r, hk_handle_t *h, void **dx, void **dy)
{
    float x[N], two = 2.0f;
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 7);
    *dx = *dy = NULL;
    int ok = r->mem->alloc(h, sizeof x, dx) == HK_STATUS_OK
             && r->mem->alloc(h, sizeof x, dy) == HK_STATUS_OK
             && r->mem->copy_to_device(h, *dx, x, sizeof x) == HK_STATUS_OK
             && r->mem->copy_to_device(h, *dy, x, sizeof x) == HK_STATUS_OK;
    sim.hold_launches(1);
    return ok && r->blas->saxpy(h, N, &two, *dx, 1, *dy, 1) == HK_STATUS_OK;
}

/* ---- the fork handler ---- */

/* In a child: 0 when hk-cuda's fork handler told the module it is a fork
 * child (create refuses with the handler's own words), else 1. */
static int child_was_told(const hk_vtable_t *vt)
{
    hk_handle_t *h = NULL;
    hk_status_t st = vt->handle_create(NULL, &h);
    return st == HK_STATUS_FORKED
                   && strstr(vt->last_error(NULL), "handle_create: this process is a fork() child")
               ? 0
               : 1;
}

/* Forks; the child runs fn(arg) (NULL: nothing) and exits with its value, 7
 * for none. Returns the child's exit status, or 128 + signal. */
static int in_child(int (*fn)(const hk_vtable_t *), const hk_vtable_t *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        _exit(fn ? fn(arg) : 7);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void test_fork_after_close(void)
{
    rig_t r;
    CU_ASSERT_FATAL(rig_up(&r, HK_SWAP_CUDA_A));
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(r.vt->handle_create(NULL, &h), HK_STATUS_OK); /* registers it */
    CU_ASSERT_EQUAL(in_child(child_was_told, r.vt), 0); /* the handler is there */
    CU_ASSERT_EQUAL(r.vt->handle_destroy(h), HK_STATUS_OK);
    rig_down(&r, HK_SWAP_CUDA_A);
    /* Had the handler stayed registered, fork() would call into unmapped
     * memory in the child. */
    CU_ASSERT_EQUAL(in_child(NULL, NULL), 7);
}

/* In a fork child: the parent's handle destroyed (host memory only) and the
 * module closed run without the driver and without the parent's locks; the
 * file leaves the child. 0 when all went so. */
static hk_handle_t *fork_handle;
static rig_t fork_rig;

static int child_closes(const hk_vtable_t *vt)
{
    if (vt->handle_destroy(fork_handle) != HK_STATUS_OK)
        return 1;
    hk_plugin_release(fork_rig.p);
    if (hk_loader_destroy(fork_rig.loader) != HK_STATUS_OK)
        return 2;
    return swp_mapped(HK_SWAP_CUDA_A) ? 3 : 0;
}

static void test_close_in_fork_child(void)
{
    CU_ASSERT_FATAL(rig_up(&fork_rig, HK_SWAP_CUDA_A));
    CU_ASSERT_EQUAL_FATAL(fork_rig.vt->handle_create(NULL, &fork_handle), HK_STATUS_OK);
    CU_ASSERT(computes(&fork_rig, fork_handle)); /* the library is loaded */
    CU_ASSERT_EQUAL(in_child(child_closes, fork_rig.vt), 0);
    /* The parent's module and handle are untouched by the child's close. */
    CU_ASSERT(swp_mapped(HK_SWAP_CUDA_A));
    CU_ASSERT(computes(&fork_rig, fork_handle));
    CU_ASSERT_EQUAL(fork_rig.vt->handle_destroy(fork_handle), HK_STATUS_OK);
    rig_down(&fork_rig, HK_SWAP_CUDA_A);
}

/* ---- nothing left behind ---- */

static void test_nothing_left(void)
{
    size_t libs = sim.live_libraries(), allocs = sim.live_allocations();
    int refs = sim.primary_refcount(0);
    rig_t r;
    CU_ASSERT_FATAL(rig_up(&r, HK_SWAP_CUDA_A));
    hk_handle_t *h = NULL;
    hk_library_t *lib = NULL;
    CU_ASSERT_EQUAL_FATAL(r.vt->handle_create(NULL, &h), HK_STATUS_OK);
    CU_ASSERT(computes(&r, h));
    CU_ASSERT_EQUAL(r.kern->load(h, probe_ptx, sizeof probe_ptx, &lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.live_libraries(), libs + 2); /* the kernels and the caller's */
    CU_ASSERT_EQUAL(r.vt->handle_destroy(h), HK_STATUS_OK);
    /* The kernel library stays for the next handle, and the caller's, which
     * is process-wide, until unloaded: both go with the module. */
    CU_ASSERT_EQUAL(sim.live_libraries(), libs + 2);
    rig_down(&r, HK_SWAP_CUDA_A);
    CU_ASSERT_EQUAL(sim.live_libraries(), libs);
    CU_ASSERT_EQUAL(sim.live_allocations(), allocs);
    CU_ASSERT_EQUAL(sim.primary_refcount(0), refs);
}

/* The last destroy leaves the kernel library loaded (no cuLibraryUnload,
 * which waits for a running service), a later handle uses it again without
 * loading it, and the module's close unloads it. */
static void test_library_kept_until_close(void)
{
    size_t libs = sim.live_libraries();
    rig_t r;
    CU_ASSERT_FATAL(rig_up(&r, HK_SWAP_CUDA_A));
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(r.vt->handle_create(NULL, &h), HK_STATUS_OK);
    CU_ASSERT(computes(&r, h));
    unsigned long unloads = sim.call_count("cuLibraryUnload");
    unsigned long loads = sim.call_count("cuLibraryLoadData");
    CU_ASSERT_EQUAL(r.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.call_count("cuLibraryUnload"), unloads);
    CU_ASSERT_EQUAL(sim.live_libraries(), libs + 1);
    CU_ASSERT_EQUAL_FATAL(r.vt->handle_create(NULL, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.call_count("cuLibraryLoadData"), loads);
    CU_ASSERT(computes(&r, h));
    CU_ASSERT_EQUAL(r.vt->handle_destroy(h), HK_STATUS_OK);
    rig_down(&r, HK_SWAP_CUDA_A);
    CU_ASSERT_EQUAL(sim.live_libraries(), libs);
}

/* ---- the loader's trim before the close ---- */

static void *close_paused(void *arg)
{
    rig_t *r = arg;
    sim.pause_next("cuLibraryUnload");
    rig_down(r, HK_SWAP_CUDA_A);
    return NULL;
}

static void *dl_probe(void *arg)
{
    void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD); /* takes the dynamic loader's lock */
    if (h)
        dlclose(h);
    atomic_store((atomic_int *)arg, 1);
    return NULL;
}

/* The kept kernel library's unload waits in the driver (for a pause in other
 * threads' launches, fact 30); the loader has the plugin give it back
 * through hk.trim/1 before it closes the module, so that wait holds no lock
 * of the dynamic loader: while the unload is paused here, another thread's
 * dlopen returns. In the module's unload it would wait for the close.
 * Without a deadline the trim runs on the destroying thread, where the
 * simulated driver's pause is armed. */
static void test_unload_outside_dl_lock(void)
{
    size_t libs = sim.live_libraries();
    rig_t r;
    rig_deadline_ms = HK_DEADLINE_NONE;
    int up = rig_up(&r, HK_SWAP_CUDA_A);
    rig_deadline_ms = 0;
    CU_ASSERT_FATAL(up);
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(r.vt->handle_create(NULL, &h), HK_STATUS_OK);
    CU_ASSERT(computes(&r, h));
    CU_ASSERT_EQUAL(r.vt->handle_destroy(h), HK_STATUS_OK);
    pthread_t closer, prober;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&closer, NULL, close_paused, &r), 0);
    CU_ASSERT_EQUAL(sim.wait_paused(1, 5000), 0);
    atomic_int probed = 0;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&prober, NULL, dl_probe, &probed), 0);
    for (int i = 0; i < 1000 && !atomic_load(&probed); i++) /* up to 10 s */
        usleep(10000);
    CU_ASSERT(atomic_load(&probed)); /* not waiting for the dynamic loader's lock */
    sim.resume();
    pthread_join(closer, NULL);
    pthread_join(prober, NULL);
    CU_ASSERT_EQUAL(sim.live_libraries(), libs);
}

/* ---- hk.trim/1 (hk_kit_trim) from several threads ---- */

typedef struct trimmer {
    const rig_t *r;
    hk_status_t (*trim)(void);
    int wrong;
} trimmer_t;

/* One line on a wrong step; 1. */
static int say_wrong(const char *what, hk_status_t st, const char *msg)
{
    printf("\n    %s: %s: %s", what, hk_status_name(st), msg ? msg : "");
    return 1;
}

/* Make a handle, compute, destroy it (its retain may go to the kit), trim
 * (the kit's retain goes back): every step checked, 20 times. */
static void *trim_worker(void *arg)
{
    trimmer_t *t = arg;
    for (int i = 0; i < 20; i++) {
        hk_handle_t *h = NULL;
        hk_status_t st = t->r->vt->handle_create(NULL, &h);
        if (st != HK_STATUS_OK || !computes(t->r, h))
            t->wrong += say_wrong("create or compute", st, t->r->vt->last_error(h));
        if (h && (st = t->r->vt->handle_destroy(h)) != HK_STATUS_OK)
            t->wrong += say_wrong("destroy", st, t->r->vt->last_error(NULL));
        if ((st = t->trim()) != HK_STATUS_OK)
            t->wrong += say_wrong("trim", st, t->r->vt->last_error(NULL));
    }
    return NULL;
}

/* hk.trim/1's trim (hk_kit_trim) is [thread-safe]: 4 threads make, use and
 * destroy handles and trim in between; every call succeeds, every result is
 * right, and once all are done and trimmed no retain of the kit is left. */
static void test_trim_from_threads(void)
{
    int refs = sim.primary_refcount(0);
    rig_t r;
    CU_ASSERT_FATAL(rig_up(&r, HK_SWAP_CUDA_B));
    const void *table = NULL;
    CU_ASSERT_EQUAL_FATAL(r.vt->get_table(HK_TABLE_TRIM_V1, &table), HK_STATUS_OK);
    const hk_trim_v1_t *kit = table;
    CU_ASSERT_PTR_NOT_NULL_FATAL(kit);
    trimmer_t t[4];
    pthread_t th[4];
    int started = 0;
    for (; started < 4; started++) {
        t[started] = (trimmer_t){&r, kit->trim, 0};
        if (pthread_create(&th[started], NULL, trim_worker, &t[started]) != 0)
            break;
    }
    CU_ASSERT_EQUAL(started, 4);
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(t[i].wrong, 0);
    }
    CU_ASSERT_EQUAL(kit->trim(), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.primary_refcount(0), refs);
    rig_down(&r, HK_SWAP_CUDA_B);
    CU_ASSERT_EQUAL(sim.primary_refcount(0), refs);
}

/* ---- a destroy the driver keeps waiting stalls nobody else ---- */

typedef struct side {
    const rig_t *r;
    hk_handle_t *h;
    hk_loader_t *loader;
    const char *request;
    CUcontext ctx; /* made current by create_thread */
    hk_status_t st;
    atomic_int done;
} side_t;

static void *destroy_thread(void *arg)
{
    side_t *s = arg;
    s->st = s->r->vt->handle_destroy(s->h);
    atomic_store(&s->done, 1);
    return NULL;
}

/* Creates a handle in s->ctx, computes and destroys it. */
static void *create_thread(void *arg)
{
    side_t *s = arg;
    hk_handle_t *h = NULL;
    s->st = cuCtxSetCurrent(s->ctx) == CUDA_SUCCESS ? HK_STATUS_OK : HK_STATUS_CUDA_ERROR;
    if (s->st == HK_STATUS_OK)
        s->st = s->r->vt->handle_create(NULL, &h);
    if (s->st == HK_STATUS_OK && !computes(s->r, h))
        s->st = HK_STATUS_INTERNAL;
    if (h && s->r->vt->handle_destroy(h) != HK_STATUS_OK && s->st == HK_STATUS_OK)
        s->st = HK_STATUS_INTERNAL;
    cuCtxSetCurrent(NULL);
    atomic_store(&s->done, 1);
    return NULL;
}

static void *swap_thread(void *arg)
{
    side_t *s = arg;
    s->st = hk_loader_swap(s->loader, s->request, NULL, NULL);
    atomic_store(&s->done, 1);
    return NULL;
}

/* Waits up to 5 s for cond; 1 when it held. */
#define WAIT_FOR(cond)                                                                         \
    ({                                                                                         \
        int i_ = 0;                                                                            \
        for (; i_ < 5000 && !(cond); i_++) {                                                   \
            struct timespec ts_ = {0, 1000000};                                                \
            nanosleep(&ts_, NULL);                                                             \
        }                                                                                      \
        (cond) ? 1 : 0;                                                                        \
    })

/* A user context of device 0, current on the calling thread until popped. */
static CUcontext user_context(void)
{
    CUdevice d;
    CUcontext c = NULL;
    CU_ASSERT_EQUAL_FATAL(cuDeviceGet(&d, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(cuCtxCreate(&c, NULL, 0, d), CUDA_SUCCESS);
    return c;
}

/* The last handle's destroy waits for its running kernel (the synchronisation
 * of its stream before its frees); meanwhile a handle in another
 * context is made, computes and is destroyed. (In the same context its own
 * synchronisations would wait too, on a GPU as here.) */
static void test_destroy_stalls_nobody(void)
{
    rig_t r;
    CU_ASSERT_FATAL(rig_up(&r, HK_SWAP_CUDA_A));
    CUcontext uc = user_context(), popped;
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    side_t d = {.r = &r}, c = {.r = &r, .ctx = uc};
    CU_ASSERT_EQUAL_FATAL(r.vt->handle_create(NULL, &d.h), HK_STATUS_OK);
    void *dx, *dy;
    CU_ASSERT(runs_held(&r, d.h, &dx, &dy)); /* its saxpy keeps "running" */
    pthread_t td, tc;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&td, NULL, destroy_thread, &d), 0);
    CU_ASSERT(WAIT_FOR(sim.syncs_waiting() == 1));
    CU_ASSERT_EQUAL(atomic_load(&d.done), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&tc, NULL, create_thread, &c), 0);
    CU_ASSERT(WAIT_FOR(atomic_load(&c.done)));
    CU_ASSERT_EQUAL(atomic_load(&d.done), 0); /* still waiting for the kernel */
    sim.finish_launches();
    pthread_join(tc, NULL);
    pthread_join(td, NULL);
    CU_ASSERT_EQUAL(c.st, HK_STATUS_OK);
    CU_ASSERT_EQUAL(d.st, HK_STATUS_OK);
    CU_ASSERT_EQUAL(cuCtxDestroy(uc), CUDA_SUCCESS);
    CUcontext p0 = NULL; /* the saxpy's buffers, in device 0's primary */
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuCtxPushCurrent(p0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFree((CUdeviceptr)(uintptr_t)dx), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuMemFree((CUdeviceptr)(uintptr_t)dy), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    rig_down(&r, HK_SWAP_CUDA_A);
}

/* A swap closes A (unloading A's kernel library) while a kernel of B's
 * library is running on a raw handle of B in a user context: nothing waits
 * for it. */
static void test_swap_beside_running_kernel(void)
{
    rig_t rb;
    CU_ASSERT_FATAL(rig_up(&rb, HK_SWAP_CUDA_B));
    hk_plugin_t *a = swp_open(rb.loader, HK_SWAP_CUDA_A);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    hk_mhandle_t *mh = NULL;
    hk_handle_t *hb = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, NULL, &mh), HK_STATUS_OK);
    CUcontext uc = user_context(), popped;
    CU_ASSERT_EQUAL_FATAL(rb.vt->handle_create(NULL, &hb), HK_STATUS_OK);
    void *dx, *dy;
    CU_ASSERT(runs_held(&rb, hb, &dx, &dy)); /* a kernel of B's library keeps running in uc */
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    side_t s = {.loader = rb.loader, .request = HK_SWAP_CUDA_B};
    pthread_t ts;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&ts, NULL, swap_thread, &s), 0);
    CU_ASSERT(WAIT_FOR(atomic_load(&s.done)));
    sim.finish_launches();
    pthread_join(ts, NULL);
    CU_ASSERT_EQUAL(s.st, HK_STATUS_OK);
    hk_swap_plugin_state_t ps = {.size = sizeof ps};
    CU_ASSERT_EQUAL(hk_plugin_swap_state(a, &ps), HK_STATUS_OK);
    CU_ASSERT_EQUAL(ps.module, HK_MODULE_CLOSED);
    CU_ASSERT(!swp_mapped(HK_SWAP_CUDA_A));
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(rb.mem->free_(hb, dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(rb.mem->free_(hb, dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(rb.vt->handle_destroy(hb), HK_STATUS_OK);
    CU_ASSERT_EQUAL(cuCtxDestroy(uc), CUDA_SUCCESS);
    rig_down(&rb, HK_SWAP_CUDA_B);
}

/* ---- exit ---- */

/* Runs the helper on A (closing the module first when close) with the
 * second cuLibraryUnload failing and the driver's failures traced, on the
 * driver of the environment, or on driver when not NULL; the output in out.
 * Returns the exit status. */
static int run_helper(int close, const char *driver, char *out, size_t len)
{
    char cmd[8192], env[4200] = "";
    if (driver)
        snprintf(env, sizeof env, "HK_CUDA_DRIVER=%s ", driver);
    snprintf(cmd, sizeof cmd,
             "%sSIMCUDA_TRACE=1 SIMCUDA_FAIL=cuLibraryUnload:2:999 %s %s%s 2>&1", env,
             HK_SWAP_EXIT_HELPER, HK_SWAP_CUDA_A, close ? " close" : "");
    return hk_shell_into(cmd, out, len);
}

static void test_exit_touches_no_driver(void)
{
    char out[4096];
    /* The first unload (the kernel library, at the last destroy) works; the
     * second is the close's, of the library left loaded: traced. */
    CU_ASSERT_EQUAL(run_helper(1, NULL, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "done"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cuLibraryUnload -> 999 (injected)"));
    /* Exiting with the module open: no second unload, no driver call. */
    CU_ASSERT_EQUAL(run_helper(0, NULL, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "done"));
    CU_ASSERT_PTR_NULL(strstr(out, "cuLibraryUnload"));
}

/* The helper's only reference to the driver is hk-cuda's: with a driver not
 * marked to stay loaded by itself, hk-cuda's close still leaves it mapped
 * (the kit marked it RTLD_NODELETE). */
static void test_close_leaves_driver_mapped(void)
{
    char out[4096];
    CU_ASSERT_EQUAL(run_helper(1, HK_SWAP_UNPINNED_DRIVER, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cuLibraryUnload -> 999 (injected)")); /* it is used */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "driver mapped after the close: 1"));
    if (!strstr(out, "driver mapped after the close: 1"))
        fprintf(stderr, "\n%s\n", out);
}

void swp_register_unload(void)
{
    CU_pSuite s = hk_test_suite("hk-cuda unload", NULL, NULL);
    CU_pTest any[] = {
        hk_test_add(s, "closed: the fork handler is gone, the file unmapped, a child runs",
                    test_fork_after_close),
        hk_test_add(s, "closed in a fork child: nothing of the parent's touched",
                    test_close_in_fork_child),
    };
    CU_pTest on_sim[] = {
        hk_test_add(s, "closed: no library, allocation or primary retain left", test_nothing_left),
        hk_test_add(s, "hk.trim/1 from 4 threads making and destroying handles",
                    test_trim_from_threads),
        hk_test_add(s, "the kernel library stays after the last handle, goes with the module",
                    test_library_kept_until_close),
        hk_test_add(s, "the loader's trim unloads the kept library outside the dynamic "
                       "loader's lock", test_unload_outside_dl_lock),
        hk_test_add(s, "a destroy waiting for its context's kernel stalls no create or call "
                       "in another context", test_destroy_stalls_nobody),
        hk_test_add(s, "a swap closes a module beside a running kernel of another",
                    test_swap_beside_running_kernel),
        hk_test_add(s, "an exit with the module open touches no driver; a close does",
                    test_exit_touches_no_driver),
        hk_test_add(s, "the driver stays mapped when the plugin's close drops the last "
                       "reference", test_close_leaves_driver_mapped),
    };
    int n = 0;
    int gpu = cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&n) == CUDA_SUCCESS && n >= 1;
    for (size_t i = 0; i < sizeof any / sizeof any[0]; i++)
        if (!gpu)
            hk_test_skip(any[i], "needs a CUDA driver with a device");
    for (size_t i = 0; i < sizeof on_sim / sizeof on_sim[0]; i++)
        if (!gpu || !sim_found())
            hk_test_skip(on_sim[i], "needs the simulated driver (its counters and held "
                                    "kernels)");
}
