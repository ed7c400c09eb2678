/* hk-bench: the floor of P8, the driver's own time to load a build's code.
 *
 * A swap's verification makes the new build's first handle, which loads the
 * build's kernels into the context; the old build's last handle unloads
 * them. Neither can take less than the driver itself needs for that work in
 * a context where nothing else runs, which this measures with the same
 * image: the kernels fatbin that hk-cuda embeds (both builds embed the same
 * bytes, and so does hk-bench). What is timed, each repetition:
 *   load    cuLibraryLoadData of the image, then cuLibraryGetKernelCount,
 *           cuLibraryEnumerateKernels and cuKernelGetFunction of every
 *           kernel in the current context: from the load call until the
 *           last function is there. With lazy loading the code reaches the
 *           context at the functions; with eager loading at the load.
 *   unload  cuLibraryUnload.
 * Medians and longest over the repetitions. */
#include <stdlib.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "hkb.h"

extern const unsigned char hk__bench_fatbin[];

static struct {
    PFN_cuLibraryLoadData_v12000 load;
    PFN_cuLibraryUnload_v12000 unload;
    PFN_cuLibraryGetKernelCount_v12040 count;
    PFN_cuLibraryEnumerateKernels_v12040 enumerate;
    PFN_cuKernelGetFunction_v12000 function;
    PFN_cuModuleGetLoadingMode_v11070 mode;
} fl;

static int floor_entries(void)
{
    HKB_TRY(hkb_raw_init(), fail); /* the error names of hkb_raw_cu_ok */
    HKB_TRY(hkb_raw_entry("cuLibraryLoadData", 12000, (void **)&fl.load), fail);
    HKB_TRY(hkb_raw_entry("cuLibraryUnload", 12000, (void **)&fl.unload), fail);
    HKB_TRY(hkb_raw_entry("cuLibraryGetKernelCount", 12040, (void **)&fl.count), fail);
    HKB_TRY(hkb_raw_entry("cuLibraryEnumerateKernels", 12040, (void **)&fl.enumerate), fail);
    HKB_TRY(hkb_raw_entry("cuKernelGetFunction", 12000, (void **)&fl.function), fail);
    HKB_TRY(hkb_raw_entry("cuModuleGetLoadingMode", 11070, (void **)&fl.mode), fail);
    return 0;
fail:
    return -1;
}

/* One load of the image with every kernel's function, and its unload. */
static int floor_once(double *load_us, double *unload_us, unsigned *kernels)
{
    CUlibrary lib = NULL;
    CUkernel *ks = NULL;
    unsigned n = 0;
    int rc = -1;
    double t0 = hkb_now_ns();
    HKB_TRY(hkb_raw_cu_ok(fl.load(&lib, hk__bench_fatbin, NULL, NULL, 0, NULL, NULL, 0),
                          "floor: cuLibraryLoadData"),
            out);
    HKB_TRY(hkb_raw_cu_ok(fl.count(&n, lib), "floor: cuLibraryGetKernelCount"), out);
    ks = calloc(n ? n : 1, sizeof *ks);
    if (!ks) {
        hkb_fail("out of host memory");
        goto out;
    }
    HKB_TRY(hkb_raw_cu_ok(fl.enumerate(ks, n, lib), "floor: cuLibraryEnumerateKernels"), out);
    for (unsigned i = 0; i < n; i++) {
        CUfunction fn = NULL;
        HKB_TRY(hkb_raw_cu_ok(fl.function(&fn, ks[i]), "floor: cuKernelGetFunction"), out);
    }
    *load_us = (hkb_now_ns() - t0) / 1e3;
    *kernels = n;
    rc = 0;
out:
    if (lib) {
        double t1 = hkb_now_ns();
        CUresult r = fl.unload(lib);
        *unload_us = (hkb_now_ns() - t1) / 1e3;
        if (hkb_raw_cu_ok(r, "floor: cuLibraryUnload") != 0)
            rc = -1;
    }
    free(ks);
    return rc;
}

int hkb_load_floor(int reps, hkb_floor_t *f)
{
    CUmoduleLoadingMode mode = CU_MODULE_LAZY_LOADING;
    int rc = -1;
    if (reps < 1)
        return hkb_fail("floor: no repetition");
    double *v = calloc(2 * (size_t)reps, sizeof *v);
    if (!v)
        return hkb_fail("out of host memory");
    HKB_TRY(floor_entries(), out);
    HKB_TRY(hkb_raw_cu_ok(fl.mode(&mode), "cuModuleGetLoadingMode"), out);
    f->lazy = mode == CU_MODULE_LAZY_LOADING;
    for (int i = 0; i < reps; i++)
        HKB_TRY(floor_once(&v[i], &v[reps + i], &f->kernels), out);
    f->load_max_us = f->unload_max_us = 0.0;
    for (int i = 0; i < reps; i++) {
        f->load_max_us = v[i] > f->load_max_us ? v[i] : f->load_max_us;
        f->unload_max_us = v[reps + i] > f->unload_max_us ? v[reps + i] : f->unload_max_us;
    }
    f->load_us = hkb_median(v, (size_t)reps);
    f->unload_us = hkb_median(v + reps, (size_t)reps);
    rc = 0;
out:
    free(v);
    return rc;
}
