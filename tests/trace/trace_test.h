/* The debug trace suite (docs/trace.md): one program, test_trace, in two
 * roles. Run plainly it is the parent: each test starts the program again
 * (posix_spawn of /proc/self/exe) with HKTR_CHILD=<scenario> and HK_TRACE /
 * HK_TRACE_FILE set for that run alone, so the child reads its environment
 * fresh, then reads what the child traced (the file, its stderr through a
 * pipe) and checks the lines. Run with HKTR_CHILD set it is the child: it
 * registers that one scenario as its only CUnit test, so the scenario's own
 * assertions count too (the child's exit status).
 *
 * The hk-cuda scenarios use the context helpers of tests/cuda (hkct_*) over
 * the simulated driver; the loader ones use the test plugins of tests/loader
 * and tests/swap. */
#ifndef TRACE_TEST_H
#define TRACE_TEST_H

#include <stddef.h>
#include <sys/types.h>

#include "hk_test.h"

/* A scenario the child runs. */
typedef struct tr_scenario {
    const char *name;
    CU_TestFunc fn;
} tr_scenario_t;

extern const tr_scenario_t tr_scenarios[];
extern const size_t tr_scenario_count;

/* Threads and calls of the "threads" scenario (its lines are counted). */
#define TR_THREADS 8
#define TR_CALLS 200
#define TR_FINDS 100

/* Registers scenario name as the child's only test; -1 for an unknown name. */
int tr_child_register(const char *name);

#endif /* TRACE_TEST_H */
