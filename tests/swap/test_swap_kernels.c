/* A program's own kernels, loaded through movable handles, follow a swap:
 * 8 threads launch them (from a fatbin and from PTX, swap_kernels_gpu.cu)
 * through movable handles on streams of their own, every result checked,
 * while the main thread swaps between the two builds of hk-cuda 100 times;
 * then the rules of hk.kernels/1 for the loader's objects (BUSY while other
 * handles launched them, INVALID_VALUE once unloaded). On the simulated
 * driver the kernels' emulations are registered at run time; on a GPU the
 * same program launches the real ones. Also prints the host cost of a
 * launch through a movable handle against a raw cuLaunchKernel of the same
 * function (P10's method). test_swap_kernels_more.c has the refusals. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hk_status_text.h"
#include "simcuda_emu.h"
#include "swap_test.h"

extern const unsigned char swk__ptx[], swk__ptx_end[];
extern const unsigned char swk__fatbin[], swk__fatbin_end[];

hk_kernels_v1_t Kt;
hk_cuda_v1_t Ct;

/* ---- emulations, for the simulated driver ---- */

static CUresult (*emu_check)(const simcuda_launch_t *, const void *, size_t);

static CUresult emu_axpy(const simcuda_launch_t *l, void **params)
{
    int n = *(const int *)params[0];
    float a = *(const float *)params[1];
    const float *x = *(const float *const *)params[2];
    float *y = *(float *const *)params[3];
    CUresult r = n > 0 ? emu_check(l, x, (size_t)n * sizeof *x) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && n > 0)
        r = emu_check(l, y, (size_t)n * sizeof *y);
    for (int i = 0; r == CUDA_SUCCESS && i < n; i++)
        y[i] += a * x[i];
    return r;
}

static CUresult emu_iota(const simcuda_launch_t *l, void **params)
{
    int n = *(const int *)params[0], k = *(const int *)params[1];
    int *out = *(int *const *)params[2];
    CUresult r = n > 0 ? emu_check(l, out, (size_t)n * sizeof *out) : CUDA_SUCCESS;
    for (int i = 0; r == CUDA_SUCCESS && i < n; i++)
        out[i] = i * k;
    return r;
}

int swk_setup(void)
{
    static int done; /* 1: simulated, 2: a real driver, -1: failed */
    if (done)
        return done == 1 ? 1 : done == 2 ? 0 : -1;
    swp_kernel_tables(&Kt, &Ct);
    simcuda_emu_register_fn reg;
    *(void **)&reg = dlsym(RTLD_DEFAULT, "simcuda_emu_register");
    *(void **)&emu_check = dlsym(RTLD_DEFAULT, "simcuda_emu_check");
    if (!reg || !emu_check) {
        done = 2; /* a real driver: its kernels are the real ones */
        return 0;
    }
    const simcuda_emu_entry_t e[] = {
        SIMCUDA_EMU_ENTRY("swk_axpy", emu_axpy, sizeof(int), sizeof(float), sizeof(void *),
                          sizeof(void *)),
        SIMCUDA_EMU_ENTRY("swk_iota", emu_iota, sizeof(int), sizeof(int), sizeof(void *)),
    };
    done = 1;
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        if (reg(&e[i]) != 0)
            done = -1;
    return done;
}

const void *swk_fatbin(size_t *size)
{
    *size = (size_t)(swk__fatbin_end - swk__fatbin);
    return swk__fatbin;
}

const void *swk_ptx(size_t *size)
{
    *size = (size_t)(swk__ptx_end - swk__ptx) + 1; /* the NUL after it */
    return swk__ptx;
}

hk_status_t swk_axpy(hk_mhandle_t *mh, hk_kernel_t *k, int n, float a, void *dx, void *dy)
{
    void *args[] = {&n, &a, &dx, &dy};
    unsigned grid = (unsigned)((n + 127) / 128);
    return Kt.launch(hk_mhandle_handle(mh), k, grid, 1, 1, 128, 1, 1, 0, args);
}

int swk_devices(void)
{
    int n = 0;
    return cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : 0;
}

int swk_live_libraries(void)
{
    int (*live)(void);
    *(void **)&live = dlsym(RTLD_DEFAULT, "simcuda_live_libraries");
    return live ? live() : -1;
}

/* ---- 8 threads, 100 swaps ---- */

#define KT 8
#define KSWAPS 100
#define KN 1000

typedef struct kworker {
    pthread_t tid;
    hk_mhandle_t *mh;
    CUstream stream;
    hk_kernel_t *k[2]; /* the same kernel from the fatbin and from the PTX */
    atomic_ullong rounds, bad;
    char first[300];
} kworker_t;

static atomic_int kstop;
static hk_memory_v1_t Km;

static void kfail(kworker_t *w, const char *what, hk_status_t st)
{
    atomic_fetch_add(&w->bad, 1);
    if (!w->first[0]) {
        char why[200];
        hk_mhandle_last_error_copy(w->mh, why, sizeof why);
        snprintf(w->first, sizeof w->first, "%s: %s: %s", what, hk_status_name(st), why);
    }
}

/* Each round y += x or y -= x by a launch of one library's kernel or the
 * other's, read back and checked whole: y is x, then 0 again. */
static void *kwork(void *arg)
{
    kworker_t *w = arg;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    static _Thread_local float x[KN], y[KN];
    void *dx = NULL, *dy = NULL;
    for (int i = 0; i < KN; i++) {
        x[i] = (float)(i % 7 - 3);
        y[i] = 0.0f;
    }
    hk_status_t st = Km.alloc(h, sizeof x, &dx);
    if (st == HK_STATUS_OK)
        st = Km.alloc(h, sizeof y, &dy);
    if (st == HK_STATUS_OK)
        st = Km.copy_to_device(h, dx, x, sizeof x);
    if (st == HK_STATUS_OK)
        st = Km.copy_to_device(h, dy, y, sizeof y);
    if (st != HK_STATUS_OK)
        kfail(w, "placing the data", st);
    for (unsigned r = 0; st == HK_STATUS_OK && !atomic_load(&kstop); r++) {
        int up = r % 2 == 0;
        st = swk_axpy(w->mh, w->k[(r / 2) % 2], KN, up ? 1.0f : -1.0f, dx, dy);
        if (st != HK_STATUS_OK) {
            kfail(w, "launch", st);
            break;
        }
        st = Km.copy_to_host(h, y, dy, sizeof y);
        if (st != HK_STATUS_OK) {
            kfail(w, "copy_to_host", st);
            break;
        }
        for (int i = 0; i < KN; i++)
            if (y[i] != (up ? x[i] : 0.0f)) {
                kfail(w, "a wrong value", HK_STATUS_OK);
                st = HK_STATUS_LOAD_FAILED;
                break;
            }
        atomic_fetch_add(&w->rounds, 1);
    }
    if (dx)
        Km.free_(h, dx);
    if (dy)
        Km.free_(h, dy);
    return NULL;
}

/* A stream of the handle's own context, given to the handle. */
static int own_stream(kworker_t *w)
{
    void *ctx = NULL;
    CUcontext popped = NULL;
    hk_handle_t *h = hk_mhandle_handle(w->mh);
    if (Ct.get_context(h, &ctx) != HK_STATUS_OK || cuCtxPushCurrent(ctx) != CUDA_SUCCESS)
        return 0;
    int ok = cuStreamCreate(&w->stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
    cuCtxPopCurrent(&popped);
    return ok && hk_mhandle_vtable()->set_stream(h, w->stream) == HK_STATUS_OK;
}

/* The worker's stream goes before its handle: the handle may be the last
 * one on its device, whose destroy gives the primary context back. */
static void drop_worker(kworker_t *w)
{
    CU_ASSERT_EQUAL(hk_mhandle_vtable()->set_stream(hk_mhandle_handle(w->mh), NULL),
                    HK_STATUS_OK);
    CU_ASSERT_EQUAL(cuStreamDestroy(w->stream), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(w->mh), HK_STATUS_OK);
}

static swp_state_t kstate(hk_loader_t *loader)
{
    return swp_state(loader);
}

/* The libraries go: unload is BUSY while other handles that launched their
 * kernels live, then works; a kernel of an unloaded library and the library
 * itself are not live any more; the last handle takes the other library. */
static void kernels_end(hk_loader_t *loader, kworker_t *w, hk_library_t *fat, hk_library_t *ptx)
{
    hk_handle_t *h0 = hk_mhandle_handle(w[0].mh);
    char text[300];
    CU_ASSERT_EQUAL(Kt.unload(h0, fat), HK_STATUS_BUSY);
    hk_mhandle_last_error_copy(w[0].mh, text, sizeof text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "other handle"));
    for (int t = 1; t < KT; t++)
        drop_worker(&w[t]);
    CU_ASSERT_EQUAL(Kt.unload(h0, fat), HK_STATUS_OK);
    CU_ASSERT_EQUAL(kstate(loader).libraries, 1);
    CU_ASSERT_EQUAL(swk_axpy(w[0].mh, w[0].k[0], KN, 1.0f, NULL, NULL), HK_STATUS_INVALID_VALUE);
    hk_mhandle_last_error_copy(w[0].mh, text, sizeof text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "not a live kernel"));
    CU_ASSERT_EQUAL(Kt.unload(h0, fat), HK_STATUS_INVALID_VALUE);
    (void)ptx; /* goes with the last handle */
    drop_worker(&w[0]);
    swp_state_t s = kstate(loader);
    CU_ASSERT_EQUAL(s.libraries, 0);
    CU_ASSERT_EQUAL(s.unloads_failed, 0);
}

/* Loads the two libraries through two handles and gives every worker both
 * kernels, asked for through handles of their own. */
static int kernels_begin(kworker_t *w, hk_library_t **fat, hk_library_t **ptx)
{
    size_t nf, np;
    const void *f = swk_fatbin(&nf), *p = swk_ptx(&np);
    if (Kt.load(hk_mhandle_handle(w[0].mh), f, nf, fat) != HK_STATUS_OK
        || Kt.load(hk_mhandle_handle(w[1].mh), p, np, ptx) != HK_STATUS_OK)
        return 0;
    for (int t = 0; t < KT; t++) {
        hk_handle_t *h = hk_mhandle_handle(w[t].mh);
        if (Kt.get_kernel(h, *fat, "swk_axpy", &w[t].k[0]) != HK_STATUS_OK
            || Kt.get_kernel(h, *ptx, "swk_axpy", &w[t].k[1]) != HK_STATUS_OK)
            return 0;
    }
    return w[0].k[0] == w[KT - 1].k[0] && w[0].k[1] != w[0].k[0]; /* one record per name */
}

static void test_kernels_follow_swaps(void)
{
    int nd = swk_devices();
    CU_ASSERT_FATAL(nd > 0 && swk_setup() >= 0);
    int live_before = swk_live_libraries();
    hk_loader_t *loader = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = swp_open(loader, HK_SWAP_CUDA_A), *b = swp_open(loader, HK_SWAP_CUDA_B);
    CU_ASSERT_FATAL(a && b);
    hk_blas1_v1_t bl;
    swp_tables(&bl, &Km);
    static kworker_t w[KT];
    memset(w, 0, sizeof w);
    atomic_store(&kstop, 0);
    for (int t = 0; t < KT; t++) {
        hk_create_info_t on = {sizeof on, t % nd, 0};
        CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, &on, &w[t].mh), HK_STATUS_OK);
        CU_ASSERT_FATAL(own_stream(&w[t]));
    }
    hk_library_t *fat = NULL, *ptx = NULL;
    CU_ASSERT_FATAL(kernels_begin(w, &fat, &ptx));
    for (int t = 0; t < KT; t++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&w[t].tid, NULL, kwork, &w[t]), 0);
    int refused = 0, libs_wrong = 0;
    for (int i = 0; i < KSWAPS; i++) {
        hk_status_t st = hk_loader_swap(loader, hk_plugin_path(i % 2 ? a : b), NULL, NULL);
        if (st != HK_STATUS_OK && !refused++)
            fprintf(stderr, "\n    swap %d: %s\n", i, hk_loader_last_error(loader));
        libs_wrong += kstate(loader).libraries != 2;
    }
    atomic_store(&kstop, 1);
    unsigned long long rounds = 0, bad = 0;
    for (int t = 0; t < KT; t++) {
        pthread_join(w[t].tid, NULL);
        rounds += atomic_load(&w[t].rounds);
        bad += atomic_load(&w[t].bad);
        if (w[t].first[0])
            fprintf(stderr, "\n    worker %d: %s\n", t, w[t].first);
    }
    swp_state_t s = kstate(loader);
    printf("\n    %d threads on %d device(s), %d swaps: %llu checked launches of the program's "
           "kernels, %llu bad; %llu swaps done, %d refused\n    ", KT, nd < KT ? nd : KT,
           KSWAPS, rounds, bad, (unsigned long long)s.swaps, refused);
    CU_ASSERT_EQUAL(refused, 0);
    CU_ASSERT_EQUAL(libs_wrong, 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(rounds >= KT);
    CU_ASSERT_EQUAL(s.swaps, KSWAPS);
    kernels_end(loader, w, fat, ptx);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    /* hk-cuda keeps its own kernel library until its module is closed */
    if (live_before >= 0)
        CU_ASSERT_EQUAL(swk_live_libraries(), live_before);
}

/* ---- the cost of a launch through a movable handle (printed) ---- */

#define KBATCH 256
#define KROUNDS 40

static uint64_t median(uint64_t *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
            uint64_t t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
    return v[n / 2];
}

/* The same kernel three ways on one stream: raw cuLaunchKernel of its
 * function, hk.kernels/1 of the plugin on a raw handle, and through a
 * movable handle. */
typedef struct kpaths {
    CUfunction fn;
    CUstream stream;
    const hk_kernels_v1_t *rk;
    hk_handle_t *raw;
    hk_kernel_t *rawk;
    hk_mhandle_t *mh;
    hk_kernel_t *k;
    void **args;
} kpaths_t;

/* Host time of a batch of launches (below the queue's depth) one way;
 * failed counts the launches refused. */
static uint64_t batch(const kpaths_t *p, int way, int *failed)
{
    hk_handle_t *h = hk_mhandle_handle(p->mh);
    uint64_t t0 = swp_now_ns();
    for (int i = 0; i < KBATCH; i++)
        *failed += (way == 0   ? cuLaunchKernel(p->fn, 1, 1, 1, 32, 1, 1, 0, p->stream, p->args,
                                                NULL) != CUDA_SUCCESS
                    : way == 1 ? p->rk->launch(p->raw, p->rawk, 1, 1, 1, 32, 1, 1, 0, p->args)
                                     != HK_STATUS_OK
                               : Kt.launch(h, p->k, 1, 1, 1, 32, 1, 1, 0, p->args)
                                     != HK_STATUS_OK);
    uint64_t t = swp_now_ns() - t0;
    *failed += cuStreamSynchronize(p->stream) != CUDA_SUCCESS;
    return t;
}

/* Makes the raw handle's library and kernel, on the movable handle's
 * stream. */
static int raw_path(kpaths_t *p, hk_plugin_t *a, const void *image, size_t size,
                    hk_library_t **rl)
{
    hk_create_info_t on0 = {sizeof on0, 0, 0};
    p->rk = hk_plugin_table(a, HK_TABLE_KERNELS_V1);
    const hk_vtable_t *vt = hk_plugin_vtable(a);
    return p->rk && vt->handle_create(&on0, &p->raw) == HK_STATUS_OK
           && vt->set_stream(p->raw, p->stream) == HK_STATUS_OK
           && p->rk->load(p->raw, image, size, rl) == HK_STATUS_OK
           && p->rk->get_kernel(p->raw, *rl, "swk_axpy", &p->rawk) == HK_STATUS_OK;
}

static void test_launch_cost(void)
{
    CU_ASSERT_FATAL(swk_devices() > 0 && swk_setup() >= 0);
    int simulated = swk_setup() == 1;
    hk_loader_t *loader = swp_loader();
    hk_plugin_t *a = loader ? swp_open(loader, HK_SWAP_CUDA_A) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    hk_blas1_v1_t bl;
    swp_tables(&bl, &Km);
    kworker_t w;
    memset(&w, 0, sizeof w);
    hk_create_info_t on0 = {sizeof on0, 0, 0};
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create_on(a, &on0, &w.mh), HK_STATUS_OK);
    CU_ASSERT_FATAL(own_stream(&w));
    hk_handle_t *h = hk_mhandle_handle(w.mh);
    size_t nf;
    const void *f = swk_fatbin(&nf);
    hk_library_t *lib = NULL, *rl = NULL;
    void *ctx = NULL, *dx = NULL, *dy = NULL;
    kpaths_t p = {.stream = w.stream, .mh = w.mh};
    CU_ASSERT_EQUAL_FATAL(Kt.load(h, f, nf, &lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(Kt.get_kernel(h, lib, "swk_axpy", &p.k), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(Kt.get_function(h, p.k, (void **)&p.fn), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(Ct.get_context(h, &ctx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(Km.alloc(h, 32 * sizeof(float), &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(Km.alloc(h, 32 * sizeof(float), &dy), HK_STATUS_OK);
    hk_plugin_acquire(a); /* raw handle and table */
    CU_ASSERT_FATAL(raw_path(&p, a, f, nf, &rl));
    int n = 32, failed = 0;
    float alpha = 0.0f;
    void *args[] = {&n, &alpha, &dx, &dy};
    p.args = args;
    uint64_t t[3][KROUNDS];
    CU_ASSERT_EQUAL_FATAL(cuCtxPushCurrent(ctx), CUDA_SUCCESS); /* no switch on any path */
    for (int r = 0; r < KROUNDS; r++)
        for (int way = 0; way < 3; way++)
            t[way][r] = batch(&p, way, &failed);
    CUcontext popped = NULL;
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(failed, 0);
    double ns[3];
    for (int way = 0; way < 3; way++)
        ns[way] = (double)median(t[way], KROUNDS) / KBATCH;
    printf("\n    a program's kernel, host enqueue per launch: raw cuLaunchKernel %.0f ns, "
           "hk.kernels/1 of hk-cuda %.0f ns (%.3f x raw), through a movable handle %.0f ns "
           "(%.3f x raw, %+.0f ns over hk-cuda; target 1.05 x raw)%s\n    ", ns[0], ns[1],
           ns[1] / ns[0], ns[2], ns[2] / ns[0], ns[2] - ns[1],
           simulated ? "; the simulated driver's times say nothing of a GPU's" : "");
    CU_ASSERT_EQUAL(p.rk->unload(p.raw, rl), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_plugin_vtable(a)->handle_destroy(p.raw), HK_STATUS_OK);
    hk_plugin_release(a);
    Km.free_(h, dx);
    Km.free_(h, dy);
    drop_worker(&w);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

void swp_register_kernels(void)
{
    CU_pSuite s = hk_test_suite("a program's kernels through movable handles", NULL, NULL);
    CU_pTest t[] = {
        hk_test_add(s, "8 threads x 100 swaps: the program's kernels launch right throughout",
                    test_kernels_follow_swaps),
        hk_test_add(s, "host cost of a launch through a movable handle (printed)",
                    test_launch_cost),
    };
    swp_register_kernels_more(s);
    if (swk_devices() < 1)
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            hk_test_skip(t[i], "needs a CUDA driver with a device");
}
