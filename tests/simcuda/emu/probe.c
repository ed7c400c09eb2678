/* Emulation of kernels/hk_probe.cu: thread (0,0) writes value to *out. */
#include "../simcuda_emu.h"

static CUresult emu_probe(const simcuda_launch_t *launch, void **params)
{
    unsigned int *out = *(unsigned int **)params[0];
    unsigned int value = *(const unsigned int *)params[1];
    CUresult r = simcuda_emu_check(launch, out, sizeof *out);
    if (r != CUDA_SUCCESS)
        return r;
    *out = value;
    return CUDA_SUCCESS;
}

SIMCUDA_EMULATION_ARGS(hk_probe_kernel, emu_probe, sizeof(unsigned int *), sizeof(unsigned int));
