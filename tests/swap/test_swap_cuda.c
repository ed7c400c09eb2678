/* Swap between two builds of hk-cuda (1.0.0 and a second build answering
 * 1.0.1) over the CUDA driver the process uses (the simulated one in CI):
 * handles keep their device and context, device memory survives the swap,
 * the old module is closed and leaves the process, a handle bound to a user
 * context needs that context current on the swapping thread, a swap to
 * hk-cpu is refused, 8 threads calling see every result right over 100
 * swaps, hk-host swap between the two builds, and a swap that keeps the
 * old build open (keep_old), so that the way back loads no code again.
 * Every case runs on one
 * device; only the one named for two devices needs a second. The unload
 * cases (a module closed leaves nothing behind) are in test_swap_unload.c. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hk_status_text.h"
#include "swap_test.h"

#define N 1000

static hk_loader_t *L;
static hk_plugin_t *A, *B;
static hk_blas1_v1_t Bl;
static hk_memory_v1_t Me;

static int suite_init(void)
{
    if (cuInit(0) != CUDA_SUCCESS)
        return 0; /* the tests skip themselves */
    L = swp_loader();
    A = L ? swp_open(L, HK_SWAP_CUDA_A) : NULL;
    B = L ? swp_open(L, HK_SWAP_CUDA_B) : NULL;
    swp_tables(&Bl, &Me);
    return A && B ? 0 : -1;
}

static int suite_clean(void)
{
    return L && hk_loader_destroy(L) != HK_STATUS_OK;
}

static int devices(void)
{
    int n = 0;
    return L && cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : 0;
}

static void clear_current(void)
{
    CUcontext c = NULL;
    while (cuCtxGetCurrent(&c) == CUDA_SUCCESS && c)
        cuCtxSetCurrent(NULL); /* pops the top of the stack */
}

static hk_handle_info_t info_of(hk_mhandle_t *mh)
{
    hk_handle_info_t i = {.size = sizeof i};
    CU_ASSERT_EQUAL(hk_mhandle_vtable()->handle_info(hk_mhandle_handle(mh), &i), HK_STATUS_OK);
    return i;
}

/* Swaps to `to`, and checks that `from` (which no handle uses any more) was
 * closed and left the process. */
static void swap_and_close(hk_plugin_t *to, hk_plugin_t *from)
{
    uint64_t closes = swp_plugin_state(from).closes;
    hk_status_t st = hk_loader_swap(L, hk_plugin_path(to), NULL, NULL);
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    if (st != HK_STATUS_OK)
        fprintf(stderr, "\n%s\n", hk_loader_last_error(L));
    hk_swap_plugin_state_t s = swp_plugin_state(from);
    CU_ASSERT_EQUAL(s.module, HK_MODULE_CLOSED);
    CU_ASSERT_EQUAL(s.closes, closes + 1);
    CU_ASSERT_EQUAL(s.handles + s.inflight + s.draining, 0);
    CU_ASSERT(!swp_mapped(hk_plugin_path(from)));
}

/* Device buffers x, y of N floats with x[i] = i % 5 - 2, y[i] = i % 3 - 1. */
static int place(hk_mhandle_t *mh, void **dx, void **dy)
{
    float x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 5 - 2);
        y[i] = (float)(i % 3 - 1);
    }
    hk_handle_t *h = hk_mhandle_handle(mh);
    return Me.alloc(h, sizeof x, dx) == HK_STATUS_OK && Me.alloc(h, sizeof y, dy) == HK_STATUS_OK
           && Me.copy_to_device(h, *dx, x, sizeof x) == HK_STATUS_OK
           && Me.copy_to_device(h, *dy, y, sizeof y) == HK_STATUS_OK;
}

/* y += alpha * x on the device, read back and checked; rounds: how many
 * times alpha was added before, so y = y0 + rounds * alpha * x. */
static int axpy_ok(hk_mhandle_t *mh, void *dx, void *dy, float alpha, int rounds)
{
    float y[N];
    hk_handle_t *h = hk_mhandle_handle(mh);
    if (Bl.saxpy(h, N, &alpha, dx, 1, dy, 1) != HK_STATUS_OK
        || Me.copy_to_host(h, y, dy, sizeof y) != HK_STATUS_OK)
        return 0;
    for (int i = 0; i < N; i++)
        if (y[i] != (float)(i % 3 - 1) + (float)(rounds + 1) * alpha * (float)(i % 5 - 2))
            return 0;
    return 1;
}

/* Two handles (devices d1 and 0, primary contexts) move to B and back: the
 * same device and context ID after each swap, memory made before used after,
 * the module left behind closed each time and opened again on the way back. */
static void primaries_follow(int d1)
{
    clear_current();
    hk_create_info_t on1 = {sizeof on1, d1, 0};
    hk_mhandle_t *m1 = NULL, *m0 = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(L, HK_SWAP_CUDA_A, &on1, &m1), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(L, HK_SWAP_CUDA_A, NULL, &m0), HK_STATUS_OK);
    hk_handle_info_t i1 = info_of(m1), i0 = info_of(m0);
    CU_ASSERT_EQUAL(i1.device, d1);
    CU_ASSERT_EQUAL(i0.device, 0);
    void *x1 = NULL, *y1 = NULL;
    CU_ASSERT_FATAL(place(m1, &x1, &y1));
    CU_ASSERT(axpy_ok(m1, x1, y1, 1.0f, 0));

    uint64_t reopens = swp_plugin_state(A).reopens;
    swap_and_close(B, A);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m1), B);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m0), B);
    hk_handle_info_t j1 = info_of(m1), j0 = info_of(m0);
    CU_ASSERT_EQUAL(j1.device, d1);
    CU_ASSERT_EQUAL(j1.context_id, i1.context_id);
    CU_ASSERT_EQUAL(j1.owns_primary, 1);
    CU_ASSERT_EQUAL(j0.device, 0);
    CU_ASSERT_EQUAL(j0.context_id, i0.context_id);
    /* Memory made through the old implementation, used by the new one. */
    CU_ASSERT(axpy_ok(m1, x1, y1, 1.0f, 1));

    swap_and_close(A, B);
    CU_ASSERT_EQUAL(swp_plugin_state(A).reopens, reopens + 1);
    CU_ASSERT_EQUAL(swp_plugin_state(A).module, HK_MODULE_OPEN);
    CU_ASSERT(axpy_ok(m1, x1, y1, 1.0f, 2));
    CU_ASSERT_EQUAL(Me.free_(hk_mhandle_handle(m1), x1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Me.free_(hk_mhandle_handle(m1), y1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(m1), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(m0), HK_STATUS_OK);
    clear_current();
}

static void test_primary_contexts_follow(void)
{
    if (devices() >= 1)
        primaries_follow(0);
}

static void test_two_devices_follow(void)
{
    if (devices() >= 2)
        primaries_follow(1);
}

static void test_user_context_needs_current(void)
{
    if (devices() < 1)
        return;
    clear_current();
    CUdevice d0;
    CUcontext uc = NULL, popped = NULL;
    unsigned long long uid = 0;
    CU_ASSERT_EQUAL_FATAL(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(cuCtxCreate(&uc, NULL, 0, d0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuCtxGetId(uc, &uid), CUDA_SUCCESS);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(L, HK_SWAP_CUDA_A, NULL, &mh), HK_STATUS_OK);
    hk_handle_info_t i = info_of(mh);
    CU_ASSERT_EQUAL(i.owns_primary, 0);
    CU_ASSERT_EQUAL(i.context_id, uid);
    void *x = NULL, *y = NULL;
    CU_ASSERT_FATAL(place(mh, &x, &y));

    /* Another context current on the swapping thread: refused, nothing moved. */
    CU_ASSERT_EQUAL(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(hk_loader_swap(L, HK_SWAP_CUDA_B, NULL, NULL), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(hk_loader_last_error(L), "swap with that context current"));
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), A);
    CU_ASSERT(axpy_ok(mh, x, y, 1.0f, 0));
    clear_current();

    CU_ASSERT_EQUAL(cuCtxPushCurrent(uc), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(hk_loader_swap(L, HK_SWAP_CUDA_B, NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), B);
    CU_ASSERT_EQUAL(info_of(mh).context_id, uid);
    CU_ASSERT(axpy_ok(mh, x, y, 1.0f, 1));
    Me.free_(hk_mhandle_handle(mh), x);
    Me.free_(hk_mhandle_handle(mh), y);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(cuCtxDestroy(uc), CUDA_SUCCESS);
    clear_current();
}

static void test_refused_to_host_memory(void)
{
    if (devices() < 1)
        return;
    hk_plugin_t *cpu = swp_open(L, HK_SWAP_CPU_A);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cpu);
    hk_create_info_t on = {sizeof on, devices() - 1, 0};
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(L, HK_SWAP_CUDA_A, &on, &mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(L, HK_SWAP_CPU_A, NULL, NULL), HK_STATUS_NOT_SUPPORTED);
    const char *why = hk_loader_last_error(L);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "in CUDA device memory and hk-cpu 1.0.0 in host memory"));
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), A);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
}

/* ---- under load ---- */

#define CT 8
#define CSWAPS 100

typedef struct cworker {
    pthread_t tid;
    hk_mhandle_t *mh;
    atomic_ullong issued, completed, bad;
} cworker_t;

static atomic_int cstop;

static void *cwork(void *arg)
{
    cworker_t *w = arg;
    void *dx = NULL, *dy = NULL;
    if (!place(w->mh, &dx, &dy)) {
        atomic_fetch_add(&w->bad, 1);
        return NULL;
    }
    for (int up = 1; !atomic_load(&cstop); up = !up) {
        /* +x then -x: y alternates between y0 + x and y0. */
        atomic_fetch_add(&w->issued, 1);
        int ok = axpy_ok(w->mh, dx, dy, up ? 1.0f : -1.0f, up ? 0 : -1);
        atomic_fetch_add(&w->completed, 1);
        if (!ok) {
            atomic_fetch_add(&w->bad, 1);
            break;
        }
    }
    Me.free_(hk_mhandle_handle(w->mh), dx);
    Me.free_(hk_mhandle_handle(w->mh), dy);
    return NULL;
}

/* 8 threads, a movable handle each (on every device in turn), call and check
 * while the main thread swaps 100 times: no call fails, computes wrong or is
 * lost; after every swap the old build is closed and gone from the maps, and
 * never more than the two builds are mapped. */
static void test_swap_under_load(void)
{
    int nd = devices();
    if (nd < 1)
        return;
    static cworker_t w[CT];
    static uint64_t sw_ns[CSWAPS];
    atomic_store(&cstop, 0);
    for (int t = 0; t < CT; t++) {
        hk_create_info_t on = {sizeof on, t % nd, 0};
        memset(&w[t], 0, sizeof w[t]);
        CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(L, HK_SWAP_CUDA_A, &on, &w[t].mh), HK_STATUS_OK);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&w[t].tid, NULL, cwork, &w[t]), 0);
    }
    int most = 0, not_closed = 0;
    for (int i = 0; i < CSWAPS; i++) {
        hk_plugin_t *to = (i % 2) ? A : B, *from = (i % 2) ? B : A;
        CU_ASSERT_EQUAL(hk_loader_swap(L, hk_plugin_path(to), NULL, NULL), HK_STATUS_OK);
        swp_state_t ls = swp_state(L);
        sw_ns[i] = ls.last_switch_ns;
        not_closed += swp_plugin_state(from).module != HK_MODULE_CLOSED || swp_mapped(hk_plugin_path(from));
        int mapped = swp_mapped_count("hk-cuda");
        most = mapped > most ? mapped : most;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&cstop, 1);
    unsigned long long issued = 0, completed = 0, bad = 0;
    for (int t = 0; t < CT; t++) {
        pthread_join(w[t].tid, NULL);
        issued += atomic_load(&w[t].issued);
        completed += atomic_load(&w[t].completed);
        bad += atomic_load(&w[t].bad);
        CU_ASSERT_PTR_EQUAL(swp_plugin_of(w[t].mh), A); /* an even number of swaps */
        CU_ASSERT_EQUAL(hk_mhandle_destroy(w[t].mh), HK_STATUS_OK);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(issued, completed);
    CU_ASSERT(issued > 0);
    CU_ASSERT_EQUAL(not_closed, 0);
    CU_ASSERT(most >= 1 && most <= 2);
    CU_ASSERT_EQUAL(swp_mapped_count("hk-cuda"), 1);
    uint64_t med = 0, max = 0;
    for (int i = 0; i < CSWAPS; i++) { /* the median without sorting a copy twice */
        int below = 0;
        for (int k = 0; k < CSWAPS; k++)
            below += sw_ns[k] < sw_ns[i];
        if (below == CSWAPS / 2)
            med = sw_ns[i];
        max = sw_ns[i] > max ? sw_ns[i] : max;
    }
    printf("\n    hk-cuda: %d threads on %d device(s), %d swaps: %llu verified rounds, %llu bad, "
           "%llu lost; switch median %.0f us, max %.0f us; at most %d builds mapped\n    ",
           CT, nd < CT ? nd : CT, CSWAPS, issued, bad, issued - completed, med / 1e3, max / 1e3,
           most);
}

/* One swap of every handle to `to`, keeping the old build open or not. */
static void swap_keep(hk_plugin_t *to, uint32_t keep_old)
{
    hk_swap_options_t o = {.size = sizeof o, .keep_old = keep_old};
    hk_status_t st = hk_loader_swap(L, hk_plugin_path(to), &o, NULL);
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    if (st != HK_STATUS_OK)
        fprintf(stderr, "\n%s\n", hk_loader_last_error(L));
}

enum { KEEP_MORE = 7 }; /* movable handles beside the one test_keep_old computes on */

/* keep_old: the build left behind stays open, and the way back to it opens
 * nothing and loads no code again; without it, the way back opens the file
 * again and loads its library again. Once each build had its handles, a
 * round trip allocates and frees nothing either (their kits keep the
 * memory). Over the simulated driver the library loads, allocations and
 * frees are counted too; on a GPU the states alone. */
static void test_keep_old(void)
{
    if (devices() < 1)
        return;
    unsigned long (*loads)(const char *);
    *(void **)&loads = dlsym(RTLD_DEFAULT, "simcuda_call_count");
    clear_current();
    hk_mhandle_t *m = NULL, *more[KEEP_MORE] = {NULL};
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(L, HK_SWAP_CUDA_A, NULL, &m), HK_STATUS_OK);
    for (int i = 0; i < KEEP_MORE; i++) /* a swap moves every handle at once */
        CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(L, HK_SWAP_CUDA_A, NULL, &more[i]), HK_STATUS_OK);
    void *x = NULL, *y = NULL;
    CU_ASSERT_FATAL(place(m, &x, &y));
    CU_ASSERT(axpy_ok(m, x, y, 1.0f, 0));
    unsigned long l0 = loads ? loads("cuLibraryLoadData") : 0;
    hk_swap_plugin_state_t a0 = swp_plugin_state(A);

    swap_keep(B, 1); /* A stays open */
    hk_swap_plugin_state_t b1 = swp_plugin_state(B);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m), B);
    CU_ASSERT_EQUAL(swp_plugin_state(A).module, HK_MODULE_OPEN);
    CU_ASSERT_EQUAL(swp_plugin_state(A).closes, a0.closes);
    CU_ASSERT(axpy_ok(m, x, y, 1.0f, 1));
    swap_keep(A, 1); /* back: nothing opened again, B stays open */
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(m), A);
    CU_ASSERT_EQUAL(swp_plugin_state(A).reopens, a0.reopens);
    CU_ASSERT_EQUAL(swp_plugin_state(B).module, HK_MODULE_OPEN);
    CU_ASSERT(axpy_ok(m, x, y, 1.0f, 2));
    unsigned long kept = loads ? loads("cuLibraryLoadData") - l0 : 0;
    if (loads)
        CU_ASSERT(kept <= 1); /* B's, when it had none loaded; A's never again */

    /* Once both builds had every handle (and the verification handle) at
     * once, made after each module's first (which leaves host mode's word
     * to its first host-mode call), their kits keep their memory: a round
     * trip makes and frees nothing that waits for other threads' launches
     * to pause */
    swap_keep(B, 1);
    swap_keep(A, 1);
    static const char *const pausing[] = {"cuMemAlloc", "cuMemHostAlloc", "cuMemAllocHost",
                                          "cuMemFree", "cuMemFreeHost", "cuMemFreeAsync",
                                          "cuLibraryLoadData", "cuLibraryUnload"};
    enum { NP = sizeof pausing / sizeof pausing[0] };
    unsigned long p0[NP];
    for (int i = 0; i < NP; i++)
        p0[i] = loads ? loads(pausing[i]) : 0;
    swap_keep(B, 1);
    swap_keep(A, 1);
    for (int i = 0; loads && i < NP; i++) {
        if (loads(pausing[i]) != p0[i])
            printf("\n  a round trip between kept builds called %s %lu time(s) ", pausing[i],
                   loads(pausing[i]) - p0[i]);
        CU_ASSERT_EQUAL(loads(pausing[i]), p0[i]);
    }
    CU_ASSERT(axpy_ok(m, x, y, 1.0f, 3));

    swap_keep(B, 0); /* to B, open all along: no code loaded; A closed */
    CU_ASSERT_EQUAL(swp_plugin_state(B).reopens, b1.reopens);
    CU_ASSERT_EQUAL(swp_plugin_state(A).module, HK_MODULE_CLOSED);
    CU_ASSERT_EQUAL(swp_plugin_state(A).closes, a0.closes + 1);
    if (loads)
        CU_ASSERT_EQUAL(loads("cuLibraryLoadData") - l0, kept);
    swap_keep(A, 0); /* back without keep_old: A opened and its library loaded again */
    CU_ASSERT_EQUAL(swp_plugin_state(A).reopens, a0.reopens + 1);
    CU_ASSERT_EQUAL(swp_plugin_state(B).module, HK_MODULE_CLOSED);
    if (loads)
        CU_ASSERT_EQUAL(loads("cuLibraryLoadData") - l0, kept + 1);
    CU_ASSERT(axpy_ok(m, x, y, 1.0f, 4));
    CU_ASSERT_EQUAL(Me.free_(hk_mhandle_handle(m), x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Me.free_(hk_mhandle_handle(m), y), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(m), HK_STATUS_OK);
    for (int i = 0; i < KEEP_MORE; i++)
        CU_ASSERT_EQUAL(hk_mhandle_destroy(more[i]), HK_STATUS_OK);
    clear_current();
}

/* hk-host swap between the two builds: its summary says one module of two is
 * still open (the other closed), and its second line breaks the time down. */
static void test_host_swap(void)
{
    if (devices() < 1)
        return;
    char cmd[4096], out[8192];
    snprintf(cmd, sizeof cmd, "%s swap -p %s -q %s -t 4 -k 20 -n 1000 2>&1", HK_TEST_HOST,
             HK_SWAP_CUDA_A, HK_SWAP_CUDA_B);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    int st = pclose(p);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wrong 0, failed 0, swaps 20 of 20 (0 refused)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "modules still open: 1 of 2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "swap: time by step"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nswap: call time during swaps ("));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nswap: call time outside swaps ("));
    if (st != 0 || !strstr(out, "modules still open: 1 of 2"))
        fprintf(stderr, "\n%s\n", out);
    const char *sum = strstr(out, "swap: calls");
    printf("\n    %s    ", sum ? sum : "");
    /* -K: the build swapped away from stays open, both at the end. */
    snprintf(cmd, sizeof cmd, "%s swap -p %s -q %s -t 2 -k 4 -n 1000 -P -K 2>&1", HK_TEST_HOST,
             HK_SWAP_CUDA_A, HK_SWAP_CUDA_B);
    p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    CU_ASSERT_EQUAL(pclose(p), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wrong 0, failed 0, swaps 4 of 4 (0 refused)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "modules still open: 2 of 2"));
}

int hk_test_register(void)
{
    swp_register_unload(); /* first: it needs the builds mapped by nobody else */
    swp_register_flood();  /* its own loader, every handle gone at its end */
    swp_register_kernels(); /* their own loaders too */
    CU_pSuite s = hk_test_suite("swap hk-cuda", suite_init, suite_clean);
    CU_pTest t[] = {
        hk_test_add(s, "handles keep device and primary context; the old build is closed",
                    test_primary_contexts_follow),
        hk_test_add(s, "a user-context handle needs it current", test_user_context_needs_current),
        hk_test_add(s, "refused: hk-cuda to hk-cpu", test_refused_to_host_memory),
        hk_test_add(s, "8 threads x 100 swaps: none wrong, failed or lost; old builds closed",
                    test_swap_under_load),
        hk_test_add(s, "hk-host swap between two builds of hk-cuda", test_host_swap),
        hk_test_add(s, "keep_old: the way back opens nothing and loads no code again",
                    test_keep_old),
    };
    CU_pTest two = hk_test_add(s, "handles on 2 devices keep their device and context",
                               test_two_devices_follow);
    int n = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 1) {
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            hk_test_skip(t[i], "needs a CUDA driver with a device");
        hk_test_skip(two, "needs a CUDA driver with a device");
    } else if (n < 2) {
        hk_test_skip(two, "needs 2 devices, the driver lists 1");
    }
    return 0;
}
