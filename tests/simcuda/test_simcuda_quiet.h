/* Shared by the simulated driver's stream tests (test_simcuda_streams.c) and
 * its quiet model's (test_simcuda_quiet.c), which are one program. */
#ifndef TEST_SIMCUDA_QUIET_H
#define TEST_SIMCUDA_QUIET_H

/* PTX naming the probe kernel (one thread writes a value), emulated at once. */
extern const char simt_probe_ptx[];

/* Empties the calling thread's context stack. */
void simt_clear_stack(void);

/* Fact 25: a flood of launches holds stream creation and code loading. */
void test_quiet_loads(void);

/* Fact 30: what a service starves, and what it does not. */
void test_quiet_service(void);

#endif /* TEST_SIMCUDA_QUIET_H */
