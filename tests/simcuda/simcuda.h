/* simcuda: the test-only API of the simulated CUDA driver.
 *
 * The simulated libcuda.so.1 (tests/simcuda, see README.md there) exports these
 * next to the driver entry points. Test programs that may also run against the
 * real driver must not link them: find them at run time with
 * dlsym(RTLD_DEFAULT, "simcuda_is_simulated") (tests/common/hk_rt.c does).
 *
 * Every function here is [thread-safe]. None of them counts as a driver call
 * (no fault injection, no call counting, no effect on the launch log). */
#ifndef SIMCUDA_H
#define SIMCUDA_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One entry of the launch log: a kernel launch (or graph replay of one). */
typedef struct simcuda_launch_record {
    char name[64];              /* kernel name, truncated */
    CUcontext ctx;              /* the context it ran in */
    unsigned long long ctx_id;  /* that context's ID at launch time */
    int device;                 /* ordinal of ctx's device */
    CUstream stream;            /* the stream as given (NULL, legacy, per-thread or a stream) */
    CUresult result;            /* what the launch returned */
} simcuda_launch_record_t;

/* Returns 1. Its presence tells a test that it runs on the simulation. */
int simcuda_is_simulated(void);

/* The top of the calling thread's context stack, NULL if empty. No side effect. */
CUcontext simcuda_current_context(void);

/* Retains currently held on device's primary context (the runtime's own retain
 * from simcuda_rt_set_device included); -1 for a bad ordinal. */
int simcuda_primary_refcount(int device);

/* 1 when device's primary context is active, 0 when not, -1 for a bad ordinal. */
int simcuda_primary_active(int device);

/* cuMemAlloc and cuMemHostAlloc blocks not yet freed (nor dropped by a
 * context's end), all devices. */
size_t simcuda_live_allocations(void);

/* Of those, the cuMemHostAlloc blocks (page-locked host memory). */
size_t simcuda_live_host_allocations(void);

/* Libraries loaded with cuLibraryLoadData and not yet unloaded. */
size_t simcuda_live_libraries(void);

/* Contexts alive: active primaries, user and green contexts not destroyed. */
size_t simcuda_live_contexts(void);

/* Depth of the calling thread's context stack (0: nothing current). */
int simcuda_stack_depth(void);

/* The k-th call (1-based, counted from now) of driver entry `entry` fails with
 * err, once; later calls succeed again. `entry` is the un-suffixed API name
 * ("cuMemAlloc", "cuCtxCreate") whichever versioned symbol is called. k = 0
 * clears the entry's pending failure. An unknown name is ignored. */
void simcuda_fail(const char *entry, unsigned k, CUresult err);

/* As simcuda_fail, but calls k to k + n - 1 all fail (n = 0 counts as 1). */
void simcuda_fail_repeat(const char *entry, unsigned k, unsigned n, CUresult err);

/* Clears every pending failure (those from SIMCUDA_FAIL included). */
void simcuda_fail_clear(void);

/* Calls of an entry (un-suffixed name) since start or the last reset, failed
 * ones included; 0 for an unknown name. */
unsigned long simcuda_call_count(const char *entry);

/* Number of records in the launch log. */
size_t simcuda_launch_count(void);

/* Copies the i-th record (0-based) of the launch log to *out. Returns 0, or -1
 * when i is out of range or out is NULL. */
int simcuda_launch_get(size_t i, simcuda_launch_record_t *out);

/* Zeroes every call count and empties the launch log. */
void simcuda_reset_counters(void);

/* Running kernels, for docs/contexts.md fact 19 (cuLibraryUnload waits for
 * the library's running kernels). The next n successful launches of kernels
 * that come from a library (cuLibraryLoadData), from any thread, count as
 * still running after they return, until simcuda_finish_launches: meanwhile a
 * cuLibraryUnload of their library, a cuCtxSynchronize of the context they
 * run in and a cuStreamSynchronize of the stream they run on wait, without
 * holding up any other driver call. Nothing else waits for them (their work
 * is done at launch, as always here). n = 0 holds no more launches; those
 * held stay held. */
void simcuda_hold_launches(unsigned n);

/* Ends every held launch (and holds no more): waiting unloads and
 * synchronisations go on. */
void simcuda_finish_launches(void);

/* Threads now waiting in cuLibraryUnload for a held launch. */
unsigned simcuda_unloads_waiting(void);

/* Threads now waiting in cuCtxSynchronize or cuStreamSynchronize for a held
 * launch. */
unsigned simcuda_syncs_waiting(void);

/* Quiet loads, for docs/contexts.md facts 25 and 30 (under launches that
 * never pause, or a service, making a stream, loading code into their context,
 * allocating, freeing and the like wait for a pause). quiet_us = 0 (the
 * default, unless SIMCUDA_QUIET_LOADS_US says otherwise) turns the model off.
 * Otherwise, from now on, these calls wait until the context they work in has
 * seen no kernel launch (cuLaunchKernel(Ex), attempted ones included, and
 * cuGraphLaunch) for quiet_us microseconds: cuStreamCreate,
 * cuStreamCreateWithPriority, cuModuleLoadData(Ex), the first load of a
 * library into a context (cuKernelGetFunction, cuLibraryGetModule, or the
 * launch of a CUkernel, when the library has no module there yet), cuMemAlloc,
 * cuMemFree, cuStreamDestroy, cuEventCreate, cuModuleUnload, cuLibraryUnload
 * of a library loaded in the context, cuMemHostAlloc and cuMemFreeHost. They
 * wait without holding up any other driver call, and stop waiting when the
 * context dies (then failing as for a dead context) or the model is turned
 * off. cuLibraryLoadData, launches into a loaded context, cuMemAllocAsync,
 * cuMemFreeAsync, synchronisations, primary retains and context queries never
 * wait. */
void simcuda_quiet_loads(unsigned quiet_us);

/* Calls now waiting for a pause in launches (see simcuda_quiet_loads). */
unsigned simcuda_loads_waiting(void);

/* Paused calls, for tests of races. The calling thread's next call of entry
 * (an un-suffixed API name) waits at its start, holding up no other call of
 * any thread, until simcuda_resume; -1 for an unknown entry. Only that one
 * call of that thread waits. */
int simcuda_pause_next(const char *entry);

/* Waits until at least n calls wait (see simcuda_pause_next); 0, or -1
 * after timeout_ms. */
int simcuda_wait_paused(unsigned n, unsigned timeout_ms);

/* Lets every waiting call go on. */
void simcuda_resume(void);

/* Lets only the calls waiting at the start of entry go on; the others keep
 * waiting. For races where two threads each wait for a step of the other.
 * 0, or -1 for an unknown entry. */
int simcuda_resume_entry(const char *entry);

/* Slowed calls, for stress tests of races: from now on, the calling thread's
 * calls of entry sleep us microseconds at their start, holding up no other
 * call of any thread (0: not any more). Other threads' calls are not slowed.
 * 0, or -1 for an unknown entry. */
int simcuda_slow_calls(const char *entry, unsigned us);

/* Runtime-like operations, so CI runs the scenarios that a GPU machine runs
 * with cudart. Each returns 0 or a CUresult. */

/* Like cudaSetDevice: the runtime's own retain of device's primary (taken
 * once, held until simcuda_rt_device_reset), activates it and makes it
 * current (replacing the top of the calling thread's stack). */
int simcuda_rt_set_device(int device);

/* Like cudaGetDevice: the device of the current context, 0 when none is
 * current. Creates nothing. */
int simcuda_rt_get_device(int *device);

/* Like cudaDeviceReset on the current device (device 0 when none is current):
 * drops the runtime's retain and resets the primary (docs/contexts.md fact 8). */
int simcuda_rt_device_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* SIMCUDA_H */
