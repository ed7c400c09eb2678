/* hk-cuda: the kernel library.
 *
 * One process-wide cuLibraryLoadData of the embedded fatbin, loaded by the
 * first live handle and unloaded with the last (DESIGN.md "Driver access").
 * A CUlibrary is context-independent: its CUkernels launch in any context,
 * and they survive a primary-context reset (fact 8). The CUfunction of a
 * kernel in one context is cached per context ID, so a later handle in the
 * same context skips cuKernelGetFunction (whose first call in a context
 * triggers the lazy module load). */
#include <stdlib.h>

#include "hkc_internal.h"

/* The fatbin, embedded by site_scons/hk_embed.S (hidden symbols). */
extern const unsigned char hk__cuda_fatbin[];
extern const unsigned char hk__cuda_fatbin_end[];

static const char *const kernel_names[HK__K_COUNT] = {
    [HK__K_SAXPY] = "hk_saxpy_kernel", [HK__K_DAXPY] = "hk_daxpy_kernel",
    [HK__K_SSCAL] = "hk_sscal_kernel", [HK__K_DSCAL] = "hk_dscal_kernel",
    [HK__K_SCOPY] = "hk_scopy_kernel", [HK__K_DCOPY] = "hk_dcopy_kernel",
    [HK__K_SDOT] = "hk_sdot_kernel",   [HK__K_DDOT] = "hk_ddot_kernel",
    [HK__K_SNRM2] = "hk_snrm2_kernel", [HK__K_DNRM2] = "hk_dnrm2_kernel",
};

/* Per-context CUfunctions. Context IDs are never reused, so a stale entry
 * (its context gone) is never hit again; entries go with the library. */
typedef struct fn_entry {
    unsigned long long ctx_id;
    CUfunction fn[HK__K_COUNT];
    struct fn_entry *next;
} fn_entry_t;

/* All under hk__lock. */
static CUlibrary library;
static CUkernel kernels[HK__K_COUNT];
static unsigned long refs;
static fn_entry_t *fn_cache;

static void drop_cache(void)
{
    while (fn_cache) {
        fn_entry_t *e = fn_cache;
        fn_cache = e->next;
        free(e);
    }
}

hk_status_t hk__kernels_acquire(void)
{
    if (refs > 0 || library) { /* a library the driver would not unload is used again */
        refs++;
        return HK_STATUS_OK;
    }
    CUlibrary lib = NULL;
    CUresult r = hk__cu.cuLibraryLoadData(&lib, hk__cuda_fatbin, NULL, NULL, 0, NULL, NULL, 0);
    if (r != CUDA_SUCCESS)
        return hk__fail_cu(NULL, r, "cuLibraryLoadData of the embedded kernels");
    for (int k = 0; k < HK__K_COUNT; k++) {
        r = hk__cu.cuLibraryGetKernel(&kernels[k], lib, kernel_names[k]);
        if (r != CUDA_SUCCESS) {
            char cu[96];
            hk__give_back_library(lib); /* refused twice: the first failure is reported */
            return hk__fail(NULL, hk__cu_status(r), "cuLibraryGetKernel(%s) failed: %s",
                            kernel_names[k], hk__cu_name(r, cu, sizeof cu));
        }
    }
    library = lib;
    refs = 1;
    return HK_STATUS_OK;
}

hk_status_t hk__kernels_release(void)
{
    if (refs == 0 || --refs > 0)
        return HK_STATUS_OK;
    drop_cache();
    if (atomic_load(&hk__forked)) {
        library = NULL;
        return HK_STATUS_OK; /* the child has no driver to unload from */
    }
    CUresult r = hk__give_back_library(library);
    if (r != CUDA_SUCCESS) /* kept for the next handle rather than lost */
        return hk__fail_cu(NULL, r, "cuLibraryUnload of the embedded kernels");
    library = NULL;
    return HK_STATUS_OK;
}

hk_status_t hk__kernels_functions(hk_handle_t *h, unsigned long long ctx_id,
                                  CUfunction out[HK__K_COUNT])
{
    hk_status_t st = HK_STATUS_OK;
    pthread_mutex_lock(&hk__lock);
    fn_entry_t *e = fn_cache;
    while (e && e->ctx_id != ctx_id)
        e = e->next;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            st = hk__fail(h, HK_STATUS_OUT_OF_MEMORY, "no memory for the function cache");
            goto out;
        }
        for (int k = 0; k < HK__K_COUNT; k++) {
            CUresult r = hk__cu.cuKernelGetFunction(&e->fn[k], kernels[k]);
            if (r != CUDA_SUCCESS) {
                char cu[96];
                free(e);
                st = hk__fail(h, hk__cu_status(r), "cuKernelGetFunction(%s) failed: %s",
                              kernel_names[k], hk__cu_name(r, cu, sizeof cu));
                goto out;
            }
        }
        e->ctx_id = ctx_id;
        e->next = fn_cache;
        fn_cache = e;
    }
    for (int k = 0; k < HK__K_COUNT; k++)
        out[k] = e->fn[k];
out:
    pthread_mutex_unlock(&hk__lock);
    return st;
}
