/* The emulation of the test kernel hkt_axpy (test_cuda_kernels_gpu.cu) for
 * the simulated driver, shared by the kernels and capture programs, and the
 * look-up of the simulation's emulation API. The simulated driver exports
 * simcuda_emu_register and simcuda_emu_check; a real driver exports
 * neither, and nothing here is used there. */
#ifndef HKCT_EMU_H
#define HKCT_EMU_H

#include "simcuda_emu.h"

/* simcuda_emu_check of the simulated driver, set by hkct_emu_find; NULL on
 * a real driver. The emulations check every buffer they touch with it. */
extern CUresult (*hkct_emu_check)(const simcuda_launch_t *, const void *, size_t);

/* Finds the emulation API in the process: sets hkct_emu_check and returns
 * simcuda_emu_register (either may be NULL). */
simcuda_emu_register_fn hkct_emu_find(void);

/* hkt_axpy(long long n, float a, const float *x, float *y): y += a x, each
 * buffer checked first. Call hkct_emu_find before registering it. */
CUresult hkct_emu_axpy(const simcuda_launch_t *l, void **params);

/* The entry that registers hkct_emu_axpy under the kernel's name. */
#define HKCT_EMU_AXPY_ENTRY                                                          \
    SIMCUDA_EMU_ENTRY("hkt_axpy", hkct_emu_axpy, sizeof(long long), sizeof(float),   \
                      sizeof(void *), sizeof(void *))

#endif /* HKCT_EMU_H */
