/* hk_rt: the few CUDA runtime operations the scenario tests need, one source
 * for both machines.
 *
 * On the real driver the calls go to cudart (libcudart.so.13, reached with
 * dlopen, so no test program links cudart). On the simulated driver
 * (tests/simcuda) they go to its simcuda_rt_* operations and plain driver
 * calls, which model what the runtime does to the driver's state. A scenario
 * written against this header therefore runs unchanged in CI and on a GPU.
 *
 * The driver is found as the test program finds it: the file named by
 * HK_CUDA_DRIVER, else libcuda.so.1 on the library path.
 *
 * Every function is [thread-safe]. Functions returning int return 0 on
 * success, else the runtime's cudaError_t (real driver) or the CUresult
 * (simulation), or -1 when hk_rt_available() is 0. */
#ifndef HK_RT_H
#define HK_RT_H

#include <stddef.h>

/* 1 when the driver in this process is the simulated one. */
int hk_rt_is_sim(void);

/* 1 when the operations below work here: always on the simulation; on a real
 * driver when libcudart.so.13 could be opened and has every symbol needed. */
int hk_rt_available(void);

/* Why hk_rt_available() is 0 (the loader's message); "" when it is 1. Never NULL. */
const char *hk_rt_why_unavailable(void);

/* cudaSetDevice(dev). */
int hk_rt_set_device(int dev);

/* cudaGetDevice(dev). */
int hk_rt_get_device(int *dev);

/* cudaDeviceReset() of the calling thread's current device. */
int hk_rt_device_reset(void);

/* cudaMalloc(p, bytes): memory of the current device, freed with hk_rt_free. */
int hk_rt_malloc(void **p, size_t bytes);

/* cudaFree(p). */
int hk_rt_free(void *p);

/* cudaStreamCreate(stream): a stream of the current device (a CUstream on the
 * driver side), destroyed with hk_rt_stream_destroy. */
int hk_rt_stream_create(void **stream);

/* cudaStreamDestroy(stream). */
int hk_rt_stream_destroy(void *stream);

#endif /* HK_RT_H */
