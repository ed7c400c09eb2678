/* The driver conformance suite: one test per driver fact of docs/contexts.md, run
 * against the real driver on a GPU machine and against tests/simcuda in CI.
 * Written against the plain driver API (linked with -lcuda) plus the runtime
 * through tests/common/hk_rt.h. */
#ifndef CONF_H
#define CONF_H

#include <CUnit/CUnit.h>
#include <cuda.h>

/* Set by hk_test_register before any test runs. */
extern int conf_ndev;        /* devices the driver reports */
extern int conf_sim;         /* running on the simulated driver */
extern CUresult conf_preinit[6]; /* fact 9: calls made before cuInit, see conf_main.c */
extern CUresult conf_preinit_version; /* cuDriverGetVersion before cuInit */

/* The build's kernels fatbin, embedded (HkEmbed) so the binary runs anywhere. */
extern const unsigned char hk__conf_fatbin[];

/* Asserts that call returned want; on a mismatch prints both codes by name on
 * stderr, so one run against the real driver shows every disagreement. */
#define EXPECT(call, want) conf_expect((call), (want), #call, __FILE__, __LINE__, CU_FALSE)
#define EXPECT_FATAL(call, want) conf_expect((call), (want), #call, __FILE__, __LINE__, CU_TRUE)
int conf_expect(CUresult got, CUresult want, const char *what, const char *file, int line,
                CU_BOOL fatal);

/* Prints "observed: <what> = <code name>" on stderr: behaviour the suite
 * records without asserting, to compare the simulation with the real driver. */
void conf_observe(const char *what, CUresult got);
void conf_observe_int(const char *what, long value); /* the same for a plain number */

/* Pops the calling thread's whole context stack. */
void conf_clear_stack(void);

/* The current context (NULL if none; a failed query fails the test). */
CUcontext conf_current(void);

/* 1 when device dev's primary context is active. */
int conf_primary_active(int dev);

/* The fatbin loaded as a library and its probe kernel. */
CUresult conf_load_probe(CUlibrary *lib, CUkernel *k);

/* Launches the probe (f writes value to a fresh allocation of the current
 * context) on stream s and checks the value read back when the launch
 * succeeded. Returns the launch's result. */
CUresult conf_probe(CUfunction f, CUstream s, unsigned value);

/* A copy of n bytes ending just before 64 KiB that fault when read (never
 * freed); NULL when no memory could be mapped. */
void *conf_guarded(const void *src, size_t n);

/* How a child case ended (besides 0: all went well): it read past the end of
 * its buffer (a fault there), or the driver refused its call. */
#define CONF_READ_PAST 42
#define CONF_REFUSED 43

/* Runs this program again as a child for case name; its exit status, or -1. */
int conf_run_child(const char *name);

/* A signal handler: exits CONF_READ_PAST. */
void conf_read_past(int sig);

/* Run instead of the suite when HK_CONF_CHILD names a case (conf_images.c,
 * conf_launch.c): a case that may crash the process runs in a child of its
 * own, started before cuInit. Never returns. */
void conf_child_main(const char *name);
void conf_launch_child(const char *name);

/* Registration of each file's tests, in the order they must run. */
void conf_register_contexts(CU_pSuite s);
void conf_register_execution(CU_pSuite s);
void conf_register_runtime(CU_pSuite s);
void conf_register_streams(CU_pSuite s);
void conf_register_capture(CU_pSuite s);
void conf_register_images(CU_pSuite s);
void conf_register_launch(CU_pSuite s);
void conf_register_starve(CU_pSuite s);
void conf_register_last(CU_pSuite s);

#endif /* CONF_H */
