/* See hkct_emu.h. */
#include "hkct_emu.h"

#include <dlfcn.h>

CUresult (*hkct_emu_check)(const simcuda_launch_t *, const void *, size_t);

simcuda_emu_register_fn hkct_emu_find(void)
{
    simcuda_emu_register_fn reg;
    *(void **)&reg = dlsym(RTLD_DEFAULT, "simcuda_emu_register");
    *(void **)&hkct_emu_check = dlsym(RTLD_DEFAULT, "simcuda_emu_check");
    return reg;
}

CUresult hkct_emu_axpy(const simcuda_launch_t *l, void **params)
{
    long long n = *(long long *)params[0];
    float a = *(float *)params[1];
    const float *x = *(const float **)params[2];
    float *y = *(float **)params[3];
    CUresult r = n > 0 ? hkct_emu_check(l, x, (size_t)n * 4) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && n > 0)
        r = hkct_emu_check(l, y, (size_t)n * 4);
    for (long long i = 0; r == CUDA_SUCCESS && i < n; i++)
        y[i] += a * x[i];
    return r;
}
