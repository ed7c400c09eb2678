/* Shared by the swap test files: a loader whose log callback counts the test
 * doubles' handle creates and destroys, and a look at the process's maps. */
#ifndef SWAP_TEST_H
#define SWAP_TEST_H

#include "hk_blas1.h"
#include "hk_cuda.h"
#include "hk_kernels.h"
#include "hk_memory.h"
#include "hk_swap.h"
#include "hk_test.h"

/* A loader that reads no environment and loads nothing yet. */
hk_loader_t *swp_loader(void);
/* The same with hk_loader_options_t.deadline_ms. */
hk_loader_t *swp_loader_deadline(uint32_t deadline_ms);

/* The plugin at path (loaded through hk_loader_open); NULL on failure. */
hk_plugin_t *swp_open(hk_loader_t *loader, const char *path);

/* Creates and destroys logged by the test doubles whose "NAME VERSION"
 * contains what, since the last swp_count_reset(what). */
void swp_count_reset(const char *name);
int swp_creates(void);
int swp_destroys(void);
/* The same, in order: 'c' for a create, 'd' for a destroy ("ccd"). */
void swp_sequence(char *buf, size_t len);

/* 1 when /proc/self/maps lists the file at path, or the loader's snapshot
 * of it (its name and first bytes), 0 when not. */
int swp_mapped(const char *path);

/* [not-concurrent] How many different files (or the loader's snapshots,
 * one per inode) whose name starts with prefix and ends in ".so"
 * /proc/self/maps lists (e.g. "hk-cuda": every build of hk-cuda mapped); -1
 * when the maps cannot be read. */
int swp_mapped_count(const char *prefix);

/* A loader's swap state (hk_loader_swap_state) and statistics
 * (hk_loader_swap_stats) in one struct, for the tests; each statistic under
 * the lower-case tail of its enumerator. */
typedef struct swp_state {
    hk_swap_phase_t phase;
    uint64_t handles, inflight, draining, libraries;
    uint64_t swaps, refused, modules_closed, last_switch_ns, last_drain_ns, max_switch_ns,
        max_drain_ns, last_open_ns, last_verify_ns, last_create_ns, last_commit_ns,
        last_close_ns, holds, last_hold_ns, max_hold_ns, holds_cut, destroys_failed,
        unloads_failed;
    hk_status_t last_destroy_status;
} swp_state_t;

/* Reads both, asserting that each read succeeds and that the loader knows
 * every statistic this header does. */
swp_state_t swp_state(hk_loader_t *loader);

/* Monotonic time in nanoseconds. */
uint64_t swp_now_ns(void);

/* The forwarding tables of movable handles. */
void swp_tables(hk_blas1_v1_t *blas, hk_memory_v1_t *mem);
void swp_kernel_tables(hk_kernels_v1_t *kernels, hk_cuda_v1_t *cuda);

/* The plugin a movable handle is on now (NULL when its state cannot be
 * read). */
hk_plugin_t *swp_plugin_of(hk_mhandle_t *mh);

/* p's swap state, asserted read. */
hk_swap_plugin_state_t swp_plugin_state(hk_plugin_t *p);

void swp_register_basic(void);
void swp_register_reopen(void);
void swp_register_load(void);
void swp_register_hold(void);
void swp_register_host(void);
void swp_register_deadline(void);
void swp_register_generic(void);
void swp_register_verifier(void);
void swp_register_promises(void);
void swp_register_unload(void); /* test_swap_unload.c, in test_swap_cuda */
void swp_register_flood(void);  /* test_swap_flood.c, in test_swap_cuda */

/* test_swap_kernels.c and test_swap_kernels_more.c, in test_swap_cuda: a
 * program's kernels (swap_kernels_gpu.cu) through movable handles. */
void swp_register_kernels(void);
void swp_register_kernels_more(CU_pSuite s);
extern hk_kernels_v1_t Kt; /* the forwarding tables (swk_setup fills them) */
extern hk_cuda_v1_t Ct;
/* Registers the kernels' emulations on the simulated driver: 1 there, 0 on
 * a real driver, -1 when that failed. */
int swk_setup(void);
/* The kernels as a fatbin and as PTX (its size counts the NUL). */
const void *swk_fatbin(size_t *size);
const void *swk_ptx(size_t *size);
/* y += a * x (n floats, device memory) by kernel k, on mh's stream. */
hk_status_t swk_axpy(hk_mhandle_t *mh, hk_kernel_t *k, int n, float a, void *dx, void *dy);
/* CUDA devices (0 without a driver), and the simulated driver's live
 * libraries (-1 on a real driver). */
int swk_devices(void);
int swk_live_libraries(void);

#define SWP_A HK_SWAP_CPU_A
#define SWP_B HK_SWAP_CPU_B
/* The bits of x[0] that keep swp_hold's sscal waiting. */
#define SWP_HOLD 0x7fc0beefu

#define SWP_DOUBLE(name) HK_SWAP_PLUGIN_DIR "/" name ".so"

#endif /* SWAP_TEST_H */
