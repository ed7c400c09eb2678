/* hk.kernels/1 through hk-cuda: loading PTX and fatbin images, lookup,
 * attributes, launches with every kind of argument, bad input (refused before
 * any driver call), the JIT compiler's log. See test_cuda_kernels.h. */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_rt.h"
#include "hkct_emu.h"
#include "test_cuda_kernels.h"

#define plug hkct_plug
#define sim hkct_sim
#define on_sim hkct_on_sim
#define current hkct_current

const unsigned char *tk_ptx, *tk_fatbin;
size_t tk_ptx_size, tk_fatbin_size;

/* Embedded by the build (site_scons/hk_embed.S puts a NUL after each). */
extern const unsigned char hkt__ptx[], hkt__ptx_end[];
extern const unsigned char hkt__fatbin[], hkt__fatbin_end[];

/* A kernel only the simulation runs: its emulation waits to be released. */
const char tk_block_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                            ".visible .entry hkt_block()\n{\n\tret;\n}\n";

/* Not PTX the JIT compiler accepts (line 6); the simulation's JIT fails it by
 * its marker. */
static const char bad_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry hkt_bad()\n{\n\tthis is a syntax error;\n"
                              "\tret;\n}\n";

/* ---- emulations of test_cuda_kernels_gpu.cu for the simulated driver ---- */

/* hkt_axpy's is hkct_emu_axpy (hkct_emu.c). */
#define emu_check hkct_emu_check

static CUresult emu_index(const simcuda_launch_t *l, void **params)
{
    unsigned *out = *(unsigned **)params[0];
    const unsigned *g = l->grid, *b = l->block;
    unsigned per_block = b[0] * b[1] * b[2];
    CUresult r = emu_check(l, out, (size_t)g[0] * g[1] * g[2] * per_block * sizeof *out);
    for (unsigned bz = 0; r == CUDA_SUCCESS && bz < g[2]; bz++)
        for (unsigned by = 0; by < g[1]; by++)
            for (unsigned bx = 0; bx < g[0]; bx++)
                for (unsigned t = 0; t < per_block; t++) {
                    unsigned tx = t % b[0], ty = t / b[0] % b[1], tz = t / (b[0] * b[1]);
                    unsigned block = (bz * g[1] + by) * g[0] + bx;
                    out[block * per_block + t] = ((bz * 16 + by) * 16 + bx) * 4096 +
                                                 (tz * 64 + ty) * 64 + tx;
                }
    return r;
}

static CUresult emu_reverse(const simcuda_launch_t *l, void **params)
{
    float *x = *(float **)params[0];
    unsigned n = l->block[0];
    if (l->shared_bytes < n * sizeof(float)) /* the kernel would run past its shared memory */
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    CUresult r = emu_check(l, x, (size_t)l->grid[0] * n * sizeof *x);
    for (unsigned blk = 0; r == CUDA_SUCCESS && blk < l->grid[0]; blk++)
        for (unsigned i = 0; i < n / 2; i++) {
            float t = x[blk * n + i];
            x[blk * n + i] = x[blk * n + n - 1 - i];
            x[blk * n + n - 1 - i] = t;
        }
    return r;
}

static CUresult emu_noparams(const simcuda_launch_t *l, void **params)
{
    (void)l;
    return params == NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static atomic_int block_started, block_free;

static CUresult emu_block(const simcuda_launch_t *l, void **params)
{
    (void)l, (void)params;
    atomic_store(&block_started, 1);
    while (!atomic_load(&block_free))
        sched_yield();
    return CUDA_SUCCESS;
}

void tk_block_release(void)
{
    atomic_store(&block_free, 1);
}

void tk_block_wait_started(void)
{
    while (!atomic_load(&block_started))
        sched_yield();
}

/* Registers the emulations when the simulated driver is there. */
static int register_emulations(void)
{
    simcuda_emu_register_fn reg = hkct_emu_find();
    if (!reg || !emu_check)
        return 0;
    const simcuda_emu_entry_t e[] = {
        HKCT_EMU_AXPY_ENTRY,
        SIMCUDA_EMU_ENTRY("hkt_index", emu_index, sizeof(void *)),
        SIMCUDA_EMU_ENTRY("hkt_reverse", emu_reverse, sizeof(void *)),
        {"hkt_noparams", emu_noparams, 0, {0}, NULL, NULL},
        {"hkt_block", emu_block, 0, {0}, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        if (reg(&e[i]) != 0)
            return -1;
    return 1;
}

/* ---- helpers ---- */

hk_library_t *tk_load(hk_handle_t *h, const void *image, size_t size)
{
    hk_library_t *lib = NULL;
    hk_status_t st = tk_k->load(h, image, size, &lib);
    if (st != HK_STATUS_OK)
        printf("\n  load: %d (%s)\n", (int)st, plug.vt->last_error(h));
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    return lib;
}

hk_status_t tk_axpy(hk_handle_t *h, hk_kernel_t *k, long long n, float a, void *dx, void *dy)
{
    void *args[] = {&n, &a, &dx, &dy};
    unsigned grid = (unsigned)((n + 255) / 256);
    return tk_k->launch(h, k, grid > 64 ? 64 : grid, 1, 1, 256, 1, 1, 0, args);
}

hk_status_t tk_axpy_checked(hk_handle_t *h, hk_kernel_t *k, int n)
{
    const hk_memory_v1_t *m = plug.mem;
    float *x = calloc((size_t)n, sizeof *x), *y = calloc((size_t)n, sizeof *y);
    void *dx = NULL, *dy = NULL;
    hk_status_t st = x && y ? HK_STATUS_OK : HK_STATUS_OUT_OF_MEMORY;
    for (int i = 0; st == HK_STATUS_OK && i < n; i++) {
        x[i] = (float)(i % 13) - 6.0f;
        y[i] = (float)(i % 5);
    }
    if (st == HK_STATUS_OK && (st = m->alloc(h, (size_t)n * 4, &dx)) == HK_STATUS_OK &&
        (st = m->alloc(h, (size_t)n * 4, &dy)) == HK_STATUS_OK &&
        (st = m->copy_to_device(h, dx, x, (size_t)n * 4)) == HK_STATUS_OK &&
        (st = m->copy_to_device(h, dy, y, (size_t)n * 4)) == HK_STATUS_OK) {
        st = tk_axpy(h, k, n, 0.5f, dx, dy);
        if (st != HK_STATUS_OK)
            printf("\n  launch: %d (%s)\n", (int)st, plug.vt->last_error(h));
        if (st == HK_STATUS_OK)
            CU_ASSERT_EQUAL(m->copy_to_host(h, y, dy, (size_t)n * 4), HK_STATUS_OK);
        int bad = 0;
        for (int i = 0; st == HK_STATUS_OK && i < n; i++)
            bad += y[i] != (float)(i % 5) + 0.5f * ((float)(i % 13) - 6.0f);
        CU_ASSERT_EQUAL(bad, 0);
    }
    if (dx)
        CU_ASSERT_EQUAL(m->free_(h, dx), HK_STATUS_OK);
    if (dy)
        CU_ASSERT_EQUAL(m->free_(h, dy), HK_STATUS_OK);
    free(x);
    free(y);
    return st;
}

CUcontext tk_last_launch_context(void)
{
    simcuda_launch_record_t rec;
    size_t n = on_sim ? sim.launch_count() : 0;
    if (n == 0 || sim.launch_get(n - 1, &rec) != 0)
        return NULL;
    return rec.ctx;
}

/* A message is one line and names what it should. */
static void says(hk_handle_t *h, const char *what)
{
    const char *msg = plug.vt->last_error(h);
    if (!strstr(msg, what))
        printf("\n  message \"%s\" does not name \"%s\"\n", msg, what);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, what));
    CU_ASSERT_PTR_NULL(strchr(msg, '\n'));
}

#define EXPECT(call, want, what)                                                      \
    do {                                                                              \
        hk_status_t st_ = hkct_status_is(h, (call), (want), #call, __FILE__, __LINE__); \
        if (st_ != HK_STATUS_OK && what)                                              \
            says(h, what);                                                            \
    } while (0)

/* ---- the tests ---- */

/* Each image kind: load, find (twice: the same kernel), not found, the
 * attributes, a launch checked, the function, unload. */
static void t_load_find_launch(void)
{
    hk_handle_t *h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    const struct {
        const char *kind;
        const unsigned char *image;
        size_t size;
    } images[] = {{"PTX", tk_ptx, tk_ptx_size}, {"fatbin", tk_fatbin, tk_fatbin_size}};
    for (size_t i = 0; i < sizeof images / sizeof images[0]; i++) {
        hk_library_t *lib = tk_load(h, images[i].image, images[i].size);
        if (!lib)
            continue;
        CU_ASSERT_PTR_NULL(current()); /* an explicit device's handle leaves nothing */
        hk_kernel_t *k = NULL, *again = NULL, *none = (hk_kernel_t *)1;
        EXPECT(tk_k->get_kernel(h, lib, "hkt_axpy", &k), HK_STATUS_OK, NULL);
        EXPECT(tk_k->get_kernel(h, lib, "hkt_axpy", &again), HK_STATUS_OK, NULL);
        CU_ASSERT_PTR_EQUAL(k, again);
        EXPECT(tk_k->get_kernel(h, lib, "hkt_nothing", &none), HK_STATUS_NOT_FOUND,
               "hkt_nothing");
        CU_ASSERT_PTR_NULL(none);
        hk_kernel_attributes_t a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        EXPECT(tk_k->get_attributes(h, k, &a), HK_STATUS_OK, NULL);
        CU_ASSERT_EQUAL(a.size, sizeof a);
        CU_ASSERT(a.max_threads_per_block >= 32 && a.max_threads_per_block <= 1024);
        CU_ASSERT(a.registers >= 0 && a.registers <= 255);
        CU_ASSERT(a.ptx_version >= 10);
        CU_ASSERT(a.max_dynamic_shared_bytes >= 0);
        CU_ASSERT_EQUAL(tk_axpy_checked(h, k, 3000), HK_STATUS_OK);
        CU_ASSERT_PTR_NULL(current());
        void *fn = NULL;
        EXPECT(tk_k->get_function(h, k, &fn), HK_STATUS_OK, NULL);
        CU_ASSERT_PTR_NOT_NULL(fn);
        EXPECT(tk_k->unload(h, lib), HK_STATUS_OK, NULL);
        CU_ASSERT_PTR_NULL(current());
    }
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* Three dimensions of grid and block, each different, dynamic shared memory,
 * and a kernel without parameters. */
static void t_dims_shared_noparams(void)
{
    enum { GX = 3, GY = 2, GZ = 2, BX = 4, BY = 3, BZ = 2, TOTAL = GX * GY * GZ * BX * BY * BZ };
    const hk_memory_v1_t *m = plug.mem;
    hk_handle_t *h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    hk_library_t *lib = tk_load(h, tk_ptx, tk_ptx_size);
    hk_kernel_t *ki = NULL, *kr = NULL, *kn = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    EXPECT(tk_k->get_kernel(h, lib, "hkt_index", &ki), HK_STATUS_OK, NULL);
    EXPECT(tk_k->get_kernel(h, lib, "hkt_reverse", &kr), HK_STATUS_OK, NULL);
    EXPECT(tk_k->get_kernel(h, lib, "hkt_noparams", &kn), HK_STATUS_OK, NULL);
    unsigned out[TOTAL];
    void *d = NULL;
    CU_ASSERT_EQUAL_FATAL(m->alloc(h, sizeof out, &d), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->memset_(h, d, 0xff, sizeof out), HK_STATUS_OK);
    void *args[] = {&d};
    EXPECT(tk_k->launch(h, ki, GX, GY, GZ, BX, BY, BZ, 0, args), HK_STATUS_OK, NULL);
    CU_ASSERT_EQUAL(m->copy_to_host(h, out, d, sizeof out), HK_STATUS_OK);
    int bad = 0;
    for (unsigned i = 0; i < TOTAL; i++) {
        unsigned t = i % (BX * BY * BZ), blk = i / (BX * BY * BZ);
        unsigned bx = blk % GX, by = blk / GX % GY, bz = blk / (GX * GY);
        unsigned tx = t % BX, ty = t / BX % BY, tz = t / (BX * BY);
        bad += out[i] != ((bz * 16 + by) * 16 + bx) * 4096 + (tz * 64 + ty) * 64 + tx;
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* 4 blocks of 64 floats, each reversed through 256 bytes of shared memory */
    float v[256], w[256];
    for (int i = 0; i < 256; i++)
        v[i] = (float)i;
    CU_ASSERT_EQUAL(m->copy_to_device(h, d, v, sizeof v), HK_STATUS_OK);
    EXPECT(tk_k->launch(h, kr, 4, 1, 1, 64, 1, 1, 64 * sizeof(float), args), HK_STATUS_OK, NULL);
    CU_ASSERT_EQUAL(m->copy_to_host(h, w, d, sizeof w), HK_STATUS_OK);
    bad = 0;
    for (int i = 0; i < 256; i++)
        bad += w[i] != (float)(i / 64 * 64 + 63 - i % 64);
    CU_ASSERT_EQUAL(bad, 0);
    EXPECT(tk_k->launch(h, kn, 1, 1, 1, 32, 1, 1, 0, NULL), HK_STATUS_OK, NULL);
    CU_ASSERT_EQUAL(plug.vt->synchronize(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(m->free_(h, d), HK_STATUS_OK);
    EXPECT(tk_k->unload(h, lib), HK_STATUS_OK, NULL);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* Images refused before the driver sees them, and images it cannot build. */
static void t_bad_images(void)
{
    hk_handle_t *h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    hk_library_t *lib = (hk_library_t *)1;
    unsigned long loads = on_sim ? sim.calls("cuLibraryLoadData") : 0;
    size_t libraries = on_sim ? sim.libraries() : 0; /* hk-cuda's own included */
    EXPECT(tk_k->load(h, NULL, 100, &lib), HK_STATUS_NULL_POINTER, "image");
    CU_ASSERT_PTR_NULL(lib);
    EXPECT(tk_k->load(h, tk_ptx, tk_ptx_size, NULL), HK_STATUS_NULL_POINTER, "out");
    EXPECT(tk_k->load(h, tk_ptx, 0, &lib), HK_STATUS_INVALID_VALUE, "size is 0");
    /* PTX cut before its NUL */
    EXPECT(tk_k->load(h, tk_ptx, tk_ptx_size - 1, &lib), HK_STATUS_INVALID_VALUE, "NUL");
    /* a fatbin whose header claims more than size */
    EXPECT(tk_k->load(h, tk_fatbin, tk_fatbin_size - 1, &lib), HK_STATUS_INVALID_VALUE,
           "fatbin");
    EXPECT(tk_k->load(h, tk_fatbin, 12, &lib), HK_STATUS_INVALID_VALUE, "fatbin");
    /* an ELF header whose section headers lie past size */
    unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    elf[0x28] = 0x00, elf[0x29] = 0x10; /* section headers at 4096 */
    elf[0x3a] = 64, elf[0x3c] = 3;
    EXPECT(tk_k->load(h, elf, sizeof elf, &lib), HK_STATUS_INVALID_VALUE, "cubin");
    elf[4] = 1; /* 32-bit */
    EXPECT(tk_k->load(h, elf, sizeof elf, &lib), HK_STATUS_INVALID_VALUE, "64-bit");
    if (on_sim) /* none of the refused images reached the driver */
        CU_ASSERT_EQUAL(sim.calls("cuLibraryLoadData"), loads);
    /* text that is no image at all: the driver refuses it */
    static const char junk[] = "this is neither PTX nor anything else";
    EXPECT(tk_k->load(h, junk, sizeof junk, &lib), HK_STATUS_INVALID_VALUE, "cuLibrary");
    CU_ASSERT_PTR_NULL(lib);
    if (on_sim) /* nothing left loaded */
        CU_ASSERT_EQUAL(sim.libraries(), libraries);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* PTX the JIT compiler rejects: INVALID_VALUE, and its log's first line in
 * the handle's message (one line). */
static void t_jit_log(void)
{
    hk_handle_t *h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    hk_library_t *lib = (hk_library_t *)1;
    size_t libraries = on_sim ? sim.libraries() : 0;
    EXPECT(tk_k->load(h, bad_ptx, sizeof bad_ptx, &lib), HK_STATUS_INVALID_VALUE,
           "CUDA_ERROR_INVALID_PTX");
    CU_ASSERT_PTR_NULL(lib);
    const char *msg = plug.vt->last_error(h);
    const char *log = strstr(msg, "(218): ");
    CU_ASSERT_PTR_NOT_NULL(log); /* something of the log follows the error */
    if (log)
        CU_ASSERT(strlen(log + 7) > 3);
    if (on_sim) {
        says(h, "line 6; error   : syntax error");
        CU_ASSERT_EQUAL(sim.libraries(), libraries);
    }
    printf("\n  JIT: %s ", msg);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* Launch sizes refused before any driver call; NULL and foreign kernels;
 * handles that are not live. */
static void t_bad_launches(void)
{
    hk_handle_t *h = hkct_create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    hk_library_t *lib = tk_load(h, tk_ptx, tk_ptx_size);
    hk_kernel_t *k = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    EXPECT(tk_k->get_kernel(h, lib, "hkt_noparams", &k), HK_STATUS_OK, NULL);
    static const struct {
        unsigned g[3], b[3];
        const char *what;
    } bad[] = {
        {{0, 1, 1}, {32, 1, 1}, "grid_x is 0"},       {{1, 0, 1}, {32, 1, 1}, "grid_y is 0"},
        {{1, 1, 0}, {32, 1, 1}, "grid_z is 0"},       {{1, 1, 1}, {0, 1, 1}, "block_x is 0"},
        {{1, 1, 1}, {32, 0, 1}, "block_y is 0"},      {{1, 1, 1}, {32, 1, 0}, "block_z is 0"},
        {{1, 1, 1}, {1025, 1, 1}, "block_x is 1025"}, {{1, 1, 1}, {1, 1025, 1}, "block_y"},
        {{1, 1, 1}, {1, 1, 65}, "block_z is 65"},     {{1, 1, 1}, {32, 32, 2}, "2048 threads"},
        {{1, 65536, 1}, {1, 1, 1}, "grid_y is 65536"}, {{1, 1, 65536}, {1, 1, 1}, "grid_z"},
        {{2147483648u, 1, 1}, {1, 1, 1}, "grid_x is 2147483648"},
    };
    unsigned long launches = on_sim ? sim.calls("cuLaunchKernel") : 0;
    unsigned long queries = on_sim ? sim.calls("cuCtxGetCurrent") : 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT(tk_k->launch(h, k, bad[i].g[0], bad[i].g[1], bad[i].g[2], bad[i].b[0],
                            bad[i].b[1], bad[i].b[2], 0, NULL),
               HK_STATUS_INVALID_VALUE, bad[i].what);
    if (on_sim) { /* refused before any driver call, the guard's included */
        CU_ASSERT_EQUAL(sim.calls("cuLaunchKernel"), launches);
        CU_ASSERT_EQUAL(sim.calls("cuCtxGetCurrent"), queries);
    }
    int local = 0;
    hk_kernel_t *foreign = (hk_kernel_t *)&local;
    void *fn = NULL;
    hk_kernel_attributes_t a = {.size = sizeof a};
    EXPECT(tk_k->launch(h, NULL, 1, 1, 1, 1, 1, 1, 0, NULL), HK_STATUS_NULL_POINTER, "kernel");
    EXPECT(tk_k->launch(h, foreign, 1, 1, 1, 1, 1, 1, 0, NULL), HK_STATUS_INVALID_VALUE,
           "not a live kernel");
    EXPECT(tk_k->get_attributes(h, foreign, &a), HK_STATUS_INVALID_VALUE, "not a live kernel");
    EXPECT(tk_k->get_attributes(h, k, NULL), HK_STATUS_NULL_POINTER, "attrs");
    EXPECT(tk_k->get_function(h, k, NULL), HK_STATUS_NULL_POINTER, "function");
    hk_kernel_t *none = NULL;
    EXPECT(tk_k->get_kernel(h, lib, NULL, &none), HK_STATUS_NULL_POINTER, "name");
    EXPECT(tk_k->get_kernel(h, (hk_library_t *)&local, "hkt_axpy", &none),
           HK_STATUS_INVALID_VALUE, "not a live library");
    EXPECT(tk_k->unload(h, NULL), HK_STATUS_NULL_POINTER, "lib");
    EXPECT(tk_k->unload(h, (hk_library_t *)&local), HK_STATUS_INVALID_VALUE, "not a live");
    /* the size rule of the attributes: below 4 refused; a short struct gets
     * only its bytes */
    a.size = 2;
    EXPECT(tk_k->get_attributes(h, k, &a), HK_STATUS_INVALID_VALUE, "below 4");
    unsigned char raw[sizeof(hk_kernel_attributes_t)];
    memset(raw, 0xab, sizeof raw);
    uint32_t eight = 8;
    memcpy(raw, &eight, 4);
    EXPECT(tk_k->get_attributes(h, k, (hk_kernel_attributes_t *)raw), HK_STATUS_OK, NULL);
    CU_ASSERT_EQUAL(((hk_kernel_attributes_t *)raw)->size, 8);
    CU_ASSERT_EQUAL(raw[8], 0xab);
    /* unloaded: the library and its kernels are no longer live */
    EXPECT(tk_k->unload(h, lib), HK_STATUS_OK, NULL);
    EXPECT(tk_k->unload(h, lib), HK_STATUS_INVALID_VALUE, "not a live library");
    EXPECT(tk_k->launch(h, k, 1, 1, 1, 1, 1, 1, 0, NULL), HK_STATUS_INVALID_VALUE,
           "not a live kernel");
    EXPECT(tk_k->get_function(h, k, &fn), HK_STATUS_INVALID_VALUE, "not a live kernel");
    EXPECT(tk_k->get_kernel(h, lib, "hkt_axpy", &none), HK_STATUS_INVALID_VALUE, "not a live");
    /* handles that are not live */
    CU_ASSERT_EQUAL(tk_k->launch(NULL, k, 1, 1, 1, 1, 1, 1, 0, NULL), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(tk_k->load(h, tk_ptx, tk_ptx_size, &lib), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(tk_k->get_kernel(h, lib, "x", &k), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(tk_k->get_attributes(h, k, &a), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(tk_k->get_function(h, k, &fn), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(tk_c->get_context(h, &fn), HK_STATUS_INVALID_HANDLE);
}

/* ---- registration ---- */

static const hkct_scenario_t scenarios[] = {
    {"PTX and fatbin: load, find, attributes, launch, unload", t_load_find_launch, 1, 0, 0},
    {"3D grids and blocks, dynamic shared memory, no parameters", t_dims_shared_noparams, 1, 0,
     0},
    {"bad images refused before the driver; junk refused by it", t_bad_images, 1, 0, 0},
    {"PTX that does not compile: INVALID_VALUE with the JIT log", t_jit_log, 1, 0, 0},
    {"bad launches, kernels, libraries and handles", t_bad_launches, 1, 0, 0},
};

int hk_test_register(void)
{
    static char why[700];
    const char *skip = hkct_setup(why, sizeof why) == 0 ? NULL : why;
    tk_ptx = hkt__ptx;
    tk_ptx_size = (size_t)(hkt__ptx_end - hkt__ptx) + 1; /* the NUL after it */
    tk_fatbin = hkt__fatbin;
    tk_fatbin_size = (size_t)(hkt__fatbin_end - hkt__fatbin);
    if (!skip) {
        if (!tk_k || !tk_c || tk_k->size < sizeof *tk_k || tk_c->size < sizeof *tk_c)
            skip = "hk-cuda offers no hk.kernels/1 or hk.cuda/1 table of this size";
    }
    if (!skip && on_sim && register_emulations() != 1)
        skip = "the simulated driver refused the test kernels' emulations";
    const char *rt_skip = hk_rt_available() ? NULL : hk_rt_why_unavailable();
    CU_pSuite s = hk_test_suite("hk.kernels/1: images, lookup, launches", NULL, NULL);
    const char *sim_why = "needs the simulated driver (a launch held inside its emulation)";
    hkct_add_scenarios(s, scenarios, sizeof scenarios / sizeof scenarios[0], skip, rt_skip,
                       sim_why);
    CU_pSuite c = hk_test_suite("hk.kernels/1 and hk.cuda/1: contexts, threads", NULL, NULL);
    hkct_add_scenarios(c, tk_ctx_scenarios, tk_ctx_scenario_count, skip, rt_skip, sim_why);
    CU_pSuite i = hk_test_suite("hk.kernels/1: images that lie about their sizes", NULL, NULL);
    hkct_add_scenarios(i, tk_image_scenarios, tk_image_scenario_count, skip, rt_skip, sim_why);
    CU_pSuite l = hk_test_suite("hk.kernels/1: launch arguments, shared memory", NULL, NULL);
    hkct_add_scenarios(l, tk_launch_scenarios, tk_launch_scenario_count, skip, rt_skip, sim_why);
    CU_pSuite r = hk_test_suite("hk.kernels/1: unload racing other calls", NULL, NULL);
    hkct_add_scenarios(r, tk_race_scenarios, tk_race_scenario_count, skip, rt_skip,
                       "needs the simulated driver (a call paused on its way)");
    return 0;
}
