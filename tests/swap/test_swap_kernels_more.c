/* A program's kernels through movable handles (test_swap_kernels.c has the
 * swaps under load): hk.cuda/1 forwarded; the loader's libraries and kernels
 * keep the rules of hk.kernels/1 (NULL, foreign, stale and another loader's
 * objects refused without reaching the plugin, the plugin's own refusals as
 * it gives them); an implementation that cannot load a library refuses the
 * swap, one that can takes it over, a kernel found between prepare and
 * commit included; the last handle on an implementation takes its
 * libraries with it. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "hk_status_text.h"
#include "swap_test.h"

#define IN 300

static hk_memory_v1_t Mm;

static hk_mhandle_t *on_device0(hk_loader_t *loader, const char *request)
{
    hk_create_info_t on0 = {sizeof on0, 0, 0};
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_EQUAL(hk_mhandle_create(loader, request, &on0, &mh), HK_STATUS_OK);
    return mh;
}

static int has(hk_mhandle_t *mh, const char *text)
{
    char line[600];
    hk_mhandle_last_error_copy(mh, line, sizeof line);
    if (!strstr(line, text))
        fprintf(stderr, "\n    last error \"%s\" lacks \"%s\"\n", line, text);
    return strstr(line, text) != NULL;
}

/* out[i] = i * k by the kernel, read back and checked. */
static int iota_ok(hk_mhandle_t *mh, hk_kernel_t *k, int mult)
{
    hk_handle_t *h = hk_mhandle_handle(mh);
    int out[IN], n = IN;
    void *d = NULL;
    void *args[] = {&n, &mult, &d};
    int ok = Mm.alloc(h, sizeof out, &d) == HK_STATUS_OK
             && Kt.launch(h, k, 3, 1, 1, 128, 1, 1, 0, args) == HK_STATUS_OK
             && Mm.copy_to_host(h, out, d, sizeof out) == HK_STATUS_OK;
    for (int i = 0; ok && i < IN; i++)
        ok = out[i] == i * mult;
    if (d)
        Mm.free_(h, d);
    return ok;
}

static hk_library_t *load_fatbin(hk_mhandle_t *mh)
{
    size_t n;
    const void *f = swk_fatbin(&n);
    hk_library_t *lib = NULL;
    CU_ASSERT_EQUAL(Kt.load(hk_mhandle_handle(mh), f, n, &lib), HK_STATUS_OK);
    return lib;
}

static size_t sim_launches(void)
{
    size_t (*count)(void);
    *(void **)&count = dlsym(RTLD_DEFAULT, "simcuda_launch_count");
    return count ? count() : 0;
}

/* hk.cuda/1 through a movable handle: the handle's device and context. */
static void cuda_table(hk_mhandle_t *mh)
{
    hk_handle_t *h = hk_mhandle_handle(mh);
    void *ctx = NULL, *stream = (void *)1;
    int dev = -1, ord = -1;
    CUdevice d0;
    CUcontext primary = NULL;
    CU_ASSERT_EQUAL(Ct.get_context(h, &ctx), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Ct.get_device(h, &dev, &ord), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Ct.get_stream(h, &stream), HK_STATUS_OK);
    CU_ASSERT_EQUAL(ord, 0);
    CU_ASSERT_PTR_NULL(stream);
    CU_ASSERT_EQUAL(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(dev, (int)d0);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRetain(&primary, d0), CUDA_SUCCESS);
    CU_ASSERT_PTR_EQUAL(ctx, primary);
    CU_ASSERT_EQUAL(cuDevicePrimaryCtxRelease(d0), CUDA_SUCCESS);
    CU_ASSERT_EQUAL(Ct.get_context(h, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(Ct.get_context(NULL, &ctx), HK_STATUS_INVALID_HANDLE);
}

/* Loads that the loader or the plugin refuses leave nothing behind. */
static void refused_loads(hk_loader_t *loader, hk_mhandle_t *mh)
{
    hk_handle_t *h = hk_mhandle_handle(mh);
    hk_library_t *lib = (hk_library_t *)&lib;
    static const char bad_ptx[] = ".version 8.0\n.target sm_90\nsyntax error here\n";
    CU_ASSERT_EQUAL(Kt.load(h, NULL, 8, &lib), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NULL(lib);
    CU_ASSERT(has(mh, "load: image is NULL"));
    CU_ASSERT_EQUAL(Kt.load(h, bad_ptx, 0, &lib), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(Kt.load(h, bad_ptx, sizeof bad_ptx, &lib), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NULL(lib);
    swp_state_t s = swp_state(loader);
    CU_ASSERT_EQUAL(s.libraries, 0);
}

/* A kernel made by the plugin itself (through a raw handle), given to a
 * movable handle: refused by the loader, never launched. */
static void raw_kernel_refused(hk_mhandle_t *mh, hk_plugin_t *a)
{
    const hk_vtable_t *vt = hk_plugin_vtable(a);
    const hk_kernels_v1_t *rk = hk_plugin_table(a, HK_TABLE_KERNELS_V1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rk);
    hk_create_info_t on0 = {sizeof on0, 0, 0};
    hk_handle_t *raw = NULL;
    hk_library_t *rl = NULL;
    hk_kernel_t *k = NULL;
    size_t n;
    const void *f = swk_fatbin(&n);
    hk_plugin_acquire(a);
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(&on0, &raw), HK_STATUS_OK);
    CU_ASSERT_EQUAL(rk->load(raw, f, n, &rl), HK_STATUS_OK);
    CU_ASSERT_EQUAL(rk->get_kernel(raw, rl, "swk_iota", &k), HK_STATUS_OK);
    size_t before = sim_launches();
    int cnt = IN, mult = 1;
    void *out = NULL;
    void *args[] = {&cnt, &mult, &out};
    CU_ASSERT_EQUAL(Kt.launch(hk_mhandle_handle(mh), k, 1, 1, 1, 32, 1, 1, 0, args),
                    HK_STATUS_INVALID_VALUE);
    CU_ASSERT(has(mh, "is not a live kernel of a library loaded through movable handles"));
    CU_ASSERT_EQUAL(sim_launches(), before);
    CU_ASSERT_EQUAL(rk->unload(raw, rl), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(raw), HK_STATUS_OK);
    hk_plugin_release(a);
}

/* Another loader's library and kernel are foreign here. */
static void other_loader_refused(hk_mhandle_t *mh, hk_kernel_t *mine)
{
    hk_handle_t *h = hk_mhandle_handle(mh);
    hk_loader_t *l2 = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(l2);
    hk_mhandle_t *mh2 = on_device0(l2, HK_SWAP_CUDA_A);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mh2);
    hk_library_t *lib2 = load_fatbin(mh2);
    hk_kernel_t *k2 = NULL, *k = NULL;
    CU_ASSERT_EQUAL(Kt.get_kernel(hk_mhandle_handle(mh2), lib2, "swk_iota", &k2), HK_STATUS_OK);
    CU_ASSERT(iota_ok(mh2, k2, 5));
    CU_ASSERT_EQUAL(Kt.launch(h, k2, 1, 1, 1, 32, 1, 1, 0, NULL), HK_STATUS_INVALID_VALUE);
    CU_ASSERT(has(mh, "belongs to another loader's movable handles"));
    CU_ASSERT_EQUAL(Kt.launch(hk_mhandle_handle(mh2), mine, 1, 1, 1, 32, 1, 1, 0, NULL),
                    HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(Kt.get_kernel(h, lib2, "swk_iota", &k), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(Kt.unload(h, lib2), HK_STATUS_INVALID_VALUE);
    CU_ASSERT(has(mh, "not a live library loaded through this loader's movable handles"));
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh2), HK_STATUS_OK); /* takes lib2 */
    CU_ASSERT_EQUAL(hk_loader_destroy(l2), HK_STATUS_OK);
}

static void test_kernel_objects(void)
{
    CU_ASSERT_FATAL(swk_devices() > 0 && swk_setup() >= 0);
    hk_blas1_v1_t bl;
    swp_tables(&bl, &Mm);
    hk_loader_t *loader = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = swp_open(loader, HK_SWAP_CUDA_A);
    hk_mhandle_t *mh = on_device0(loader, HK_SWAP_CUDA_A);
    CU_ASSERT_FATAL(a && mh);
    hk_handle_t *h = hk_mhandle_handle(mh);
    cuda_table(mh);
    refused_loads(loader, mh);

    hk_library_t *lib = load_fatbin(mh);
    hk_kernel_t *k = NULL, *again = NULL, *none = (hk_kernel_t *)&k;
    CU_ASSERT_EQUAL(Kt.get_kernel(h, lib, "swk_nope", &none), HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NULL(none);
    CU_ASSERT_EQUAL(Kt.get_kernel(h, lib, NULL, &k), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(Kt.get_kernel(h, (hk_library_t *)&k, "swk_iota", &k), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(Kt.get_kernel(h, lib, "swk_iota", &k), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Kt.get_kernel(h, lib, "swk_iota", &again), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(k, again);
    CU_ASSERT(iota_ok(mh, k, 3));

    CU_ASSERT_EQUAL(Kt.launch(h, NULL, 1, 1, 1, 32, 1, 1, 0, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT(has(mh, "launch: kernel is NULL"));
    CU_ASSERT_EQUAL(Kt.launch(h, (hk_kernel_t *)&k, 1, 1, 1, 32, 1, 1, 0, NULL),
                    HK_STATUS_INVALID_VALUE);
    CU_ASSERT(has(mh, "not a live kernel"));
    /* The plugin's own refusal: its line is the handle's last error again. */
    CU_ASSERT_EQUAL(Kt.launch(h, k, 0, 1, 1, 32, 1, 1, 0, NULL), HK_STATUS_INVALID_VALUE);
    char line[600];
    hk_mhandle_last_error_copy(mh, line, sizeof line);
    CU_ASSERT_PTR_NULL(strstr(line, "not a live kernel"));
    CU_ASSERT(line[0] != '\0');

    hk_kernel_attributes_t at = {.size = sizeof at};
    void *fn = NULL;
    CU_ASSERT_EQUAL(Kt.get_attributes(h, k, &at), HK_STATUS_OK);
    CU_ASSERT(at.max_threads_per_block > 0);
    CU_ASSERT_EQUAL(Kt.get_function(h, k, &fn), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(fn);
    CU_ASSERT_EQUAL(Kt.get_function(h, (hk_kernel_t *)&k, &fn), HK_STATUS_INVALID_VALUE);

    raw_kernel_refused(mh, a);
    other_loader_refused(mh, k);

    /* hk-cpu offers neither table: the loader says so. */
    hk_mhandle_t *cpu = NULL;
    void *ctx = NULL;
    hk_library_t *cl = NULL;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(loader, HK_SWAP_CPU_A, NULL, &cpu), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Kt.load(hk_mhandle_handle(cpu), swk_fatbin(&n), n, &cl),
                    HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT(has(cpu, "load: hk-cpu 1.0.0 does not offer this slot"));
    CU_ASSERT_EQUAL(Ct.get_context(hk_mhandle_handle(cpu), &ctx), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_EQUAL(Kt.launch(hk_mhandle_handle(cpu), k, 1, 1, 1, 32, 1, 1, 0, NULL),
                    HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(cpu), HK_STATUS_OK);

    /* The last movable handle on hk-cuda takes the library with it. */
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    swp_state_t s = swp_state(loader);
    CU_ASSERT_EQUAL(s.libraries, 0);
    mh = on_device0(loader, HK_SWAP_CUDA_A);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mh);
    CU_ASSERT_EQUAL(Kt.launch(hk_mhandle_handle(mh), k, 1, 1, 1, 32, 1, 1, 0, NULL),
                    HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(Kt.unload(hk_mhandle_handle(mh), lib), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* hk-cuda's sources behind entry points whose hk.kernels/1 cannot load an
 * image, or is missing: refused while a library lives, the library still
 * launching right on the old implementation; a prepared swap cancelled
 * leaves it as it was; a kernel found between a prepare and its commit is
 * found in the new implementation too. */
static void test_cannot_load_refuses(void)
{
    CU_ASSERT_FATAL(swk_devices() > 0 && swk_setup() >= 0);
    hk_blas1_v1_t bl;
    swp_tables(&bl, &Mm);
    hk_loader_t *loader = swp_loader();
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *a = swp_open(loader, HK_SWAP_CUDA_A), *b = swp_open(loader, HK_SWAP_CUDA_B);
    hk_plugin_t *noload = swp_open(loader, HK_SWAP_NOLOAD);
    hk_plugin_t *nok = swp_open(loader, HK_SWAP_NOKERNELS);
    hk_mhandle_t *mh = on_device0(loader, HK_SWAP_CUDA_A);
    CU_ASSERT_FATAL(a && b && noload && nok && mh);
    hk_handle_t *h = hk_mhandle_handle(mh);

    /* Without a library there is no image to give it. */
    CU_ASSERT_EQUAL(hk_loader_swap(loader, HK_SWAP_NOLOAD, NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, HK_SWAP_CUDA_A, NULL, NULL), HK_STATUS_OK);

    hk_library_t *lib = load_fatbin(mh);
    hk_kernel_t *k = NULL, *late = NULL;
    CU_ASSERT_EQUAL(Kt.get_kernel(h, lib, "swk_iota", &k), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, HK_SWAP_NOLOAD, NULL, NULL), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(hk_loader_last_error(loader),
                                  "refused: hk-cuda 1.0.2 cannot load a library loaded through "
                                  "movable handles"));
    CU_ASSERT_EQUAL(hk_loader_swap(loader, HK_SWAP_NOKERNELS, NULL, NULL),
                    HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(hk_loader_last_error(loader),
                                  "hk-cuda 1.0.3 lacks table hk.kernels/1, which hk-cuda 1.0.0 offers"));
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), a);
    CU_ASSERT(iota_ok(mh, k, 2));

    hk_swap_prepared_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_swap_prepare(loader, HK_SWAP_CUDA_B, NULL, &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap_cancel(p), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), a);
    CU_ASSERT(iota_ok(mh, k, 4));

    CU_ASSERT_EQUAL(hk_loader_swap_prepare(loader, HK_SWAP_CUDA_B, NULL, &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Kt.get_kernel(h, lib, "swk_axpy", &late), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap_commit(p, NULL), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(swp_plugin_of(mh), b);
    CU_ASSERT(iota_ok(mh, k, 6));
    void *dx = NULL, *dy = NULL;
    float x[IN], y[IN];
    for (int i = 0; i < IN; i++)
        x[i] = (float)i, y[i] = 1.0f;
    CU_ASSERT_EQUAL_FATAL(Mm.alloc(h, sizeof x, &dx), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(Mm.alloc(h, sizeof y, &dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Mm.copy_to_device(h, dx, x, sizeof x), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Mm.copy_to_device(h, dy, y, sizeof y), HK_STATUS_OK);
    CU_ASSERT_EQUAL(swk_axpy(mh, late, IN, 2.0f, dx, dy), HK_STATUS_OK);
    CU_ASSERT_EQUAL(Mm.copy_to_host(h, y, dy, sizeof y), HK_STATUS_OK);
    int right = 1;
    for (int i = 0; i < IN; i++)
        right &= y[i] == 1.0f + 2.0f * (float)i;
    CU_ASSERT(right);
    Mm.free_(h, dx);
    Mm.free_(h, dy);

    swp_state_t s = swp_state(loader);
    CU_ASSERT_EQUAL(s.refused, 2);
    CU_ASSERT_EQUAL(s.libraries, 1);
    CU_ASSERT_EQUAL(Kt.unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

void swp_register_kernels_more(CU_pSuite s)
{
    CU_pTest t[] = {
        hk_test_add(s, "the loader's libraries and kernels keep hk.kernels/1's rules; hk.cuda/1 "
                       "forwarded", test_kernel_objects),
        hk_test_add(s, "an implementation that cannot load a library refuses the swap; one "
                       "that can takes it, a kernel found before the commit included",
                    test_cannot_load_refuses),
    };
    if (swk_devices() < 1)
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            hk_test_skip(t[i], "needs a CUDA driver with a device");
}
