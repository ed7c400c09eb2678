/* Test helper: opens hk-cuda.so directly (dlopen + hk_plugin_negotiate), so
 * the suites do not depend on the host loader library. */
#ifndef HKCT_PLUGIN_H
#define HKCT_PLUGIN_H

#include <stddef.h>

#include "hk_abi.h"
#include "hk_blas1.h"
#include "hk_cuda.h"
#include "hk_kernels.h"
#include "hk_memory.h"
#include "hk_trim.h"

typedef struct hkct_plugin {
    void *dl;
    hk_negotiate_answer_t answer;
    const hk_vtable_t *vt;
    const hk_blas1_v1_t *blas;
    const hk_memory_v1_t *mem;
    const hk_trim_v1_t *trim;       /* NULL: the plugin offers no hk.trim/1 */
    const hk_kernels_v1_t *kernels; /* NULL: no hk.kernels/1 */
    const hk_cuda_v1_t *cuda;       /* NULL: no hk.cuda/1 */
    char why[512];
} hkct_plugin_t;

/* The plugin's path: $HK_CUDA_PLUGIN, else ../plugins/hk-cuda.so next to the
 * test program's directory (build/<dir>/tests → build/<dir>/plugins). */
const char *hkct_plugin_path(void);

/* Opens and negotiates (ABI 1.0..current); fills the tables. Returns 0, or -1
 * with p->why set. */
int hkct_plugin_open(hkct_plugin_t *p);

/* The same for the plugin file `name` in hk-cuda's directory (e.g.
 * "hk-cpu.so", the oracle the numbers are compared with). */
int hkct_plugin_open_sibling(hkct_plugin_t *p, const char *name);

/* Opens and negotiates a copy of the plugin file, made in a new temporary
 * directory and removed again once loaded: a second instance of hk-cuda in
 * the process, with state of its own that no earlier call touched. */
int hkct_plugin_open_copy(hkct_plugin_t *p);

/* A suite's first handle_create (on the current device), which tells
 * whether hk-cuda finds a driver and a device: 0 with the handle in *h; 1
 * when there is neither driver nor device, with the reason to skip the
 * suite's tests in why; -1, after printing the status and message to
 * stderr, when the create failed otherwise (the program then fails). */
int hkct_first_handle(const hkct_plugin_t *p, hk_handle_t **h, char *why, size_t len);

/* Copies file src to dst with mode. Returns 0, or -1 with errno set. */
int hkct_copy_file(const char *src, const char *dst, unsigned mode);

/* Deterministic values in [-1, 1). */
void hkct_fill_float(float *v, size_t n, unsigned seed);
void hkct_fill_double(double *v, size_t n, unsigned seed);

#endif /* HKCT_PLUGIN_H */
