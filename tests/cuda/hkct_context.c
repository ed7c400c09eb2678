/* See hkct_context.h. */
#include "hkct_context.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

hkct_plugin_t hkct_plug;
int hkct_ndev;
int hkct_on_sim;
hkct_sim_t hkct_sim;

#define SIM_SYM(field, name) (*(void **)&hkct_sim.field = dlsym(RTLD_DEFAULT, name))

static void find_sim(void)
{
    if (!dlsym(RTLD_DEFAULT, "simcuda_is_simulated"))
        return;
    hkct_on_sim = SIM_SYM(refcount, "simcuda_primary_refcount") &&
                  SIM_SYM(active, "simcuda_primary_active") &&
                  SIM_SYM(live, "simcuda_live_allocations") &&
                  SIM_SYM(live_host, "simcuda_live_host_allocations") &&
                  SIM_SYM(libraries, "simcuda_live_libraries") &&
                  SIM_SYM(contexts, "simcuda_live_contexts") &&
                  SIM_SYM(depth, "simcuda_stack_depth") &&
                  SIM_SYM(top, "simcuda_current_context") &&
                  SIM_SYM(fail, "simcuda_fail") &&
                  SIM_SYM(fail_repeat, "simcuda_fail_repeat") &&
                  SIM_SYM(fail_clear, "simcuda_fail_clear") &&
                  SIM_SYM(calls, "simcuda_call_count") &&
                  SIM_SYM(reset_counters, "simcuda_reset_counters") &&
                  SIM_SYM(launch_count, "simcuda_launch_count") &&
                  SIM_SYM(launch_get, "simcuda_launch_get");
}

int hkct_setup(char *why, size_t len)
{
    find_sim();
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetCount(&hkct_ndev);
    if (r != CUDA_SUCCESS) {
        snprintf(why, len, "no usable CUDA driver (cuInit/cuDeviceGetCount: %d)", (int)r);
        return -1;
    }
    if (hkct_ndev < 1) {
        snprintf(why, len, "the CUDA driver lists no device");
        return -1;
    }
    if (hkct_plugin_open(&hkct_plug) != 0) {
        snprintf(why, len, "%s", hkct_plug.why);
        return -1;
    }
    return 0;
}

/* Takes the page where the unloaded plugin's vtable was, for good (address
 * space only, one page a reload), so that no later open maps the plugin
 * there again: a test that kept a pointer into an old mapping then fails
 * every time, not only when the system happens to place the plugin
 * elsewhere. */
static void hold_old_page(const void *old)
{
    long page = sysconf(_SC_PAGESIZE);
    if (!old || page <= 0)
        return;
    void *at = (void *)((uintptr_t)old & ~((uintptr_t)page - 1));
    void *r = mmap(at, (size_t)page, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (r != MAP_FAILED && r != at) /* a kernel that took the flag as a hint */
        munmap(r, (size_t)page);
}

void hkct_reload(void)
{
    const void *old = hkct_plug.vt;
    if (hkct_plug.dl)
        CU_ASSERT_EQUAL(dlclose(hkct_plug.dl), 0);
    hkct_plug.dl = NULL;
    hold_old_page(old);
    if (hkct_plugin_open(&hkct_plug) != 0) {
        printf("\n  reopening hk-cuda: %s\n", hkct_plug.why);
        CU_FAIL_FATAL("hk-cuda could not be opened again");
    }
}

void hkct_trim(void)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(hkct_plug.trim);
    hk_status_t st = hkct_plug.trim->trim();
    if (st != HK_STATUS_OK)
        printf("\n  trim: %d: %s\n", (int)st, hkct_plug.vt->last_error(NULL));
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
}

void hkct_keep(int dev)
{
    int rc = hkct_on_sim ? hkct_sim.refcount(dev) : 0;
    hk_handle_t *h = hkct_create(dev, HK_STATUS_OK);
    if (h)
        CU_ASSERT_EQUAL(hkct_plug.vt->handle_destroy(h), HK_STATUS_OK);
    if (hkct_on_sim)
        CU_ASSERT(hkct_sim.refcount(dev) <= rc + 1);
}

CUcontext hkct_current(void)
{
    CUcontext c = NULL;
    CU_ASSERT_EQUAL(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    return c;
}

CUcontext hkct_primary(int dev)
{
    CUdevice d;
    CUcontext p = NULL;
    CU_ASSERT_EQUAL(cuDeviceGet(&d, dev), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRetain(&p, d), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRelease(d), CUDA_SUCCESS);
    return p;
}

CUcontext hkct_retain_primary(int dev)
{
    CUdevice d;
    CUcontext p = NULL;
    HKCT_OK(cuDeviceGet(&d, dev));
    HKCT_OK(cuDevicePrimaryCtxRetain(&p, d));
    return p;
}

void hkct_release_primary(int dev)
{
    CUdevice d;
    HKCT_OK(cuDeviceGet(&d, dev));
    HKCT_OK(cuDevicePrimaryCtxRelease(d));
}

hk_status_t hkct_status_is(hk_handle_t *h, hk_status_t got, hk_status_t want, const char *call,
                           const char *file, int line)
{
    if (got != want)
        printf("\n  %s: %d, want %d (%s)\n", call, (int)got, (int)want,
               hkct_plug.vt->last_error(h));
    CU_assertImplementation(got == want, (unsigned)line, call, file, "", CU_FALSE);
    return got;
}

CUcontext hkct_user_context(int dev)
{
    CUdevice d;
    CUcontext uc = NULL;
    HKCT_OK(cuDeviceGet(&d, dev));
    HKCT_OK(cuCtxCreate(&uc, NULL, 0, d));
    return uc;
}

unsigned long long hkct_ctx_id(CUcontext c)
{
    unsigned long long id = 0;
    CU_ASSERT_EQUAL(cuCtxGetId(c, &id), CUDA_SUCCESS);
    return id;
}

hk_handle_info_t hkct_info(hk_handle_t *h)
{
    hk_handle_info_t i;
    memset(&i, 0, sizeof i);
    i.size = sizeof i;
    CU_ASSERT_EQUAL(hkct_plug.vt->handle_info(h, &i), HK_STATUS_OK);
    return i;
}

hk_handle_t *hkct_create(int device, hk_status_t want)
{
    hk_create_info_t ci = {sizeof ci, device, 0};
    hk_handle_t *h = NULL;
    hk_status_t st = hkct_plug.vt->handle_create(&ci, &h);
    if (st != want)
        printf("\n  create(device %d): %d (%s)\n", device, (int)st,
               hkct_plug.vt->last_error(NULL));
    CU_ASSERT_EQUAL(st, want);
    return h;
}

hk_status_t hkct_workload(hk_handle_t *h, CUcontext expect)
{
    enum { N = 1000 };
    const hk_memory_v1_t *mem = hkct_plug.mem;
    float x[N], y[N], out[N], a = 2.0f, dot = 0.0f;
    void *dx = NULL, *dy = NULL;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 7) - 3.0f;
        y[i] = 1.0f;
    }
    hk_status_t st = mem->alloc(h, sizeof x, &dx);
    CU_ASSERT_PTR_EQUAL(hkct_current(), expect);
    if (st == HK_STATUS_OK)
        st = mem->alloc(h, sizeof y, &dy);
    if (st == HK_STATUS_OK)
        st = mem->copy_to_device(h, dx, x, sizeof x);
    if (st == HK_STATUS_OK)
        st = mem->copy_to_device(h, dy, y, sizeof y);
    CU_ASSERT_PTR_EQUAL(hkct_current(), expect);
    if (st == HK_STATUS_OK)
        st = hkct_plug.vt->set_pointer_mode(h, HK_POINTER_MODE_HOST);
    if (st == HK_STATUS_OK)
        st = hkct_plug.blas->saxpy(h, N, &a, dx, 1, dy, 1);
    CU_ASSERT_PTR_EQUAL(hkct_current(), expect);
    if (st == HK_STATUS_OK)
        st = hkct_plug.blas->sdot(h, N, dx, 1, dy, 1, &dot);
    CU_ASSERT_PTR_EQUAL(hkct_current(), expect);
    if (st == HK_STATUS_OK)
        st = mem->copy_to_host(h, out, dy, sizeof out);
    CU_ASSERT_PTR_EQUAL(hkct_current(), expect);
    if (st == HK_STATUS_OK) {
        double want = 0.0;
        int bad = 0;
        for (int i = 0; i < N; i++) {
            bad += out[i] != 2.0f * x[i] + 1.0f;
            want += (double)x[i] * (2.0 * x[i] + 1.0);
        }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_DOUBLE_EQUAL(dot, want, 1e-3);
    }
    if (dx)
        CU_ASSERT_EQUAL(mem->free_(h, dx), HK_STATUS_OK);
    if (dy)
        CU_ASSERT_EQUAL(mem->free_(h, dy), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(hkct_current(), expect);
    return st;
}

static void *trampoline(void *arg)
{
    void (**fn)(void) = arg;
    (*fn)();
    return NULL;
}

void hkct_in_thread(void (*fn)(void))
{
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, trampoline, &fn), 0);
    pthread_join(t, NULL);
}

void hkct_clear_current(void)
{
    CUcontext c;
    for (int k = 0; k < 64 && cuCtxPopCurrent(&c) == CUDA_SUCCESS; k++) {
    }
}

int hkct_pop_all(CUcontext top)
{
    CUcontext c = NULL;
    int n = 0;
    while (n < 64 && cuCtxPopCurrent(&c) == CUDA_SUCCESS) {
        if (n == 0)
            CU_ASSERT_PTR_EQUAL(c, top);
        n++;
    }
    return n;
}

void hkct_add_scenarios(CU_pSuite s, const hkct_scenario_t *t, size_t n, const char *skip,
                        const char *rt_skip, const char *sim_why)
{
    static char why[64][160]; /* CUnit keeps the pointers */
    static size_t used;
    for (size_t k = 0; k < n; k++) {
        CU_pTest test = hk_test_add(s, t[k].name, t[k].fn);
        if (skip) {
            hk_test_skip(test, skip);
        } else if (t[k].needs_sim && !hkct_on_sim) {
            hk_test_skip(test, sim_why);
        } else if (t[k].min_devices > hkct_ndev && used < 64) {
            snprintf(why[used], sizeof why[used], "needs %d devices, the driver lists %d",
                     t[k].min_devices, hkct_ndev);
            hk_test_skip(test, why[used++]);
        } else if (t[k].needs_rt && rt_skip) {
            hk_test_skip(test, rt_skip);
        }
    }
}

hkct_snapshot_t hkct_snap(void)
{
    hkct_snapshot_t s;
    memset(&s, 0, sizeof s);
    s.live = hkct_sim.live();
    s.live_host = hkct_sim.live_host();
    s.libraries = hkct_sim.libraries();
    s.contexts = hkct_sim.contexts();
    for (int d = 0; d < hkct_ndev && d < 16; d++) {
        s.refcount[d] = hkct_sim.refcount(d);
        s.active[d] = hkct_sim.active(d);
    }
    s.current = hkct_sim.top();
    s.depth = hkct_sim.depth();
    return s;
}

const char *hkct_snap_diff(const hkct_snapshot_t *a, const hkct_snapshot_t *b, char *buf,
                           size_t len)
{
    buf[0] = '\0';
    if (a->live != b->live || a->live_host != b->live_host)
        snprintf(buf, len, "blocks %zu (%zu mapped), were %zu (%zu)", a->live, a->live_host,
                 b->live, b->live_host);
    else if (a->libraries != b->libraries)
        snprintf(buf, len, "libraries %zu, were %zu", a->libraries, b->libraries);
    else if (a->contexts != b->contexts)
        snprintf(buf, len, "live contexts %zu, were %zu", a->contexts, b->contexts);
    else if (a->current != b->current || a->depth != b->depth)
        snprintf(buf, len, "context stack changed (depth %d, was %d)", a->depth, b->depth);
    for (int d = 0; !buf[0] && d < hkct_ndev && d < 16; d++)
        if (a->refcount[d] != b->refcount[d] || a->active[d] != b->active[d])
            snprintf(buf, len, "device %d primary: %d retains, active %d; were %d, %d", d,
                     a->refcount[d], a->active[d], b->refcount[d], b->active[d]);
    return buf;
}
