/* The hk.kernels/1 and hk.cuda/1 tests of hk-cuda: shared set-up.
 *
 * test_cuda_kernels.c: images, lookup, launches, bad input, the JIT log, and
 * the emulations of the test kernels for the simulated driver (registered at
 * run time with simcuda_emu_register). test_cuda_kernels_ctx.c: the caller's
 * context, several devices, a reset, unload while in use, threads, stream
 * capture and hk.cuda/1. test_cuda_kernels_images.c: images whose sizes lie
 * and images of a few bytes. test_cuda_kernels_launch.c: launch arguments
 * and dynamic shared memory. test_cuda_kernels_race.c: unload racing
 * launches and look-ups from other threads. The same program runs on a GPU
 * with the real driver, where the kernels (test_cuda_kernels_gpu.cu) run as
 * PTX compiled by the driver and as a fatbin. */
#ifndef TEST_CUDA_KERNELS_H
#define TEST_CUDA_KERNELS_H

#include <stddef.h>

#include "hk_cuda.h"
#include "hk_kernels.h"
#include "hkct_context.h"

/* hk.kernels/1 and hk.cuda/1 of the plugin as opened now (a scenario's
 * reload maps it elsewhere: never keep these pointers across one). */
#define tk_k (hkct_plug.kernels)
#define tk_c (hkct_plug.cuda)

/* The images of test_cuda_kernels_gpu.cu (sizes include PTX's NUL). */
extern const unsigned char *tk_ptx, *tk_fatbin;
extern size_t tk_ptx_size, tk_fatbin_size;

/* Sets the simulation's blocking kernel free (sim only; see tk_block_wait). */
void tk_block_release(void);
/* Waits until a launch of hkt_block is inside its emulation (sim only). */
void tk_block_wait_started(void);
/* A PTX image with the kernel hkt_block (the simulation only). */
extern const char tk_block_ptx[];

/* Loads image through h, asserting OK; NULL on failure. */
hk_library_t *tk_load(hk_handle_t *h, const void *image, size_t size);

/* y := y + a x through hk.kernels/1 on n floats of the handle's memory,
 * launched on the handle's stream, checked against the host. Allocates and
 * frees its own memory through hk.memory/1. Returns the launch's status. */
hk_status_t tk_axpy_checked(hk_handle_t *h, hk_kernel_t *k, int n);

/* The launch of hkt_axpy on dx, dy (n floats) through h. */
hk_status_t tk_axpy(hk_handle_t *h, hk_kernel_t *k, long long n, float a, void *dx, void *dy);

/* The context of the last launch the simulation logged; NULL on a GPU. */
CUcontext tk_last_launch_context(void);

/* The context scenarios (test_cuda_kernels_ctx.c). */
extern const hkct_scenario_t tk_ctx_scenarios[];
extern const size_t tk_ctx_scenario_count;

/* Images whose sizes lie, and tiny ones (test_cuda_kernels_images.c). */
extern const hkct_scenario_t tk_image_scenarios[];
extern const size_t tk_image_scenario_count;

/* Launch arguments and dynamic shared memory (test_cuda_kernels_launch.c). */
extern const hkct_scenario_t tk_launch_scenarios[];
extern const size_t tk_launch_scenario_count;

/* Unload racing the other calls (test_cuda_kernels_race.c). */
extern const hkct_scenario_t tk_race_scenarios[];
extern const size_t tk_race_scenario_count;

#endif /* TEST_CUDA_KERNELS_H */
