/* The two halves of the cuda-blas1 test program: test_cuda_blas1.c (numbers,
 * argument rules) registers its suite and then the one of
 * test_cuda_blas1_streams.c (threads, streams, capture, green contexts, large
 * and misaligned vectors). */
#ifndef TEST_CUDA_BLAS1_H
#define TEST_CUDA_BLAS1_H

#include "hkct_plugin.h"

/* Registers the streams suite. plug is open; skip is NULL, or why every test
 * of the suite is skipped (no driver or no device). Returns 0. */
int blas1_register_streams(const hkct_plugin_t *plug, const char *skip);

#endif /* TEST_CUDA_BLAS1_H */
