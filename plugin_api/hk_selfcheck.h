/* handlekit table "hk.selfcheck/1": a plugin's own known-answer workload.
 *
 * A host that swaps implementations at run time (plugin_api/hk_swap.h) must
 * know that a new build computes right before it moves handles to it. The
 * loader's built-in workload knows only hk.blas1/1; a plugin with other
 * tables says whether it works through this table: run its own kernels on a
 * handle, on data whose every result it knows, and compare. The loader
 * prefers it to the built-in workload, in the probe process and in the
 * host; hk-validate checks that it tells the truth (a self-check that
 * passes a plugin whose results are wrong fails validation).
 *
 * The table is a handle's: found with get_table (hk_plugin_get_table) and
 * run on a handle of the plugin. */
#ifndef HK_SELFCHECK_H
#define HK_SELFCHECK_H

#include <stddef.h>

#include "hk_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_TABLE_SELFCHECK_V1 "hk.selfcheck/1"

/* X(name, ABI minor that added it, parameters, arguments) */
#define HK_SELFCHECK_V1_SLOTS(X)                                                \
    X(run, 2, (hk_handle_t * h, char *why, size_t why_len), (h, why, why_len))

typedef struct hk_selfcheck_v1 {
    size_t size; /* sizeof(hk_selfcheck_v1_t) as the plugin was built */
    /* [handle-safe] Runs the plugin's known-answer workload on h (its
     * device, context and stream), waits for it, and compares every result
     * with an answer the plugin did not compute with the code under test.
     * Returns HK_STATUS_OK when every result was right; HK_STATUS_INTERNAL
     * when one was wrong; any other status when the workload could not run
     * (OUT_OF_MEMORY, CONTEXT_DESTROYED, ...). h not live →
     * HK_STATUS_INVALID_HANDLE. why (may be NULL when why_len is 0) gets a
     * one-line, NUL-terminated reason on failure, naming the first wrong
     * result ("fill: x[17] is 0, expected 2.5"); the caller owns it. It
     * allocates and synchronises, so it must not be called inside a stream
     * capture; it leaves the caller's current context as it was. */
    hk_status_t (*run)(hk_handle_t *h, char *why, size_t why_len);
} hk_selfcheck_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_SELFCHECK_H */
