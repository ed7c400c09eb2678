/* The short names under which the hk-cuda scenario files (test_cuda_calls.c,
 * test_cuda_context.c, test_cuda_kernels_ctx.c) use hkct_context.h: the
 * scenarios read as the contract's rows, without the prefix on every call.
 * Include it after hkct_context.h (or a header that includes it), and only
 * in a file that has no identifier of these names of its own. */
#ifndef HKCT_NAMES_H
#define HKCT_NAMES_H

#include "hkct_context.h"

#define plug hkct_plug
#define sim hkct_sim
#define on_sim hkct_on_sim
#define ndev hkct_ndev
#define OK HKCT_OK
#define SCENARIO HKCT_SCENARIO
#define current hkct_current
#define primary hkct_primary
#define create hkct_create

#endif /* HKCT_NAMES_H */
