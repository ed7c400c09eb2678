/* The parts of the cuda-blas1 test program: test_cuda_blas1.c (numbers,
 * argument rules, misaligned vectors) registers its suite, then the one of
 * test_cuda_blas1_streams.c (8 threads on every kind of stream), which
 * registers the one of test_cuda_blas1_contexts.c (capture, green contexts,
 * driver faults, 2^31 elements), which registers the one of
 * test_cuda_blas1_grids.c (the reduction kernels raw on 1 - 1024 blocks). */
#ifndef TEST_CUDA_BLAS1_H
#define TEST_CUDA_BLAS1_H

#include "hkct_plugin.h"

/* Registers the streams suite. plug is open; skip is NULL, or why every test
 * of the suite is skipped (no driver or no device). Returns 0. */
int blas1_register_streams(const hkct_plugin_t *plug, const char *skip);

/* The same for the capture, green context, fault and 2^31 suite; it
 * registers the one of test_cuda_blas1_grids.c. */
int blas1_register_contexts(const hkct_plugin_t *plug, const char *skip);

/* Registers the suite of the reduction kernels launched raw on every grid
 * size (test_cuda_blas1_grids.c); skip as above. Returns 0. */
int blas1_register_grids(const char *skip);

#endif /* TEST_CUDA_BLAS1_H */
