/* Emulations of examples/hk-example/example_kernels.cu (the example plugin's
 * kernels), so that its test runs the example's demo on the simulation. */
#include "../simcuda_emu.h"

#define P(type, i) (*(type *)params[i])

static CUresult emu_fill(const simcuda_launch_t *l, void **params)
{
    long long n = P(long long, 0);
    float value = P(float, 1), *x = P(float *, 2);
    CUresult r = n > 0 ? simcuda_emu_check(l, x, (size_t)n * sizeof *x) : CUDA_SUCCESS;
    for (long long i = 0; r == CUDA_SUCCESS && i < n; i++)
        x[i] = value;
    return r;
}

static CUresult emu_scale(const simcuda_launch_t *l, void **params)
{
    long long n = P(long long, 0);
    float alpha = P(float, 1), *x = P(float *, 3);
    const float *alpha_ptr = P(const float *, 2);
    CUresult r = alpha_ptr ? simcuda_emu_check(l, alpha_ptr, sizeof *alpha_ptr) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && n > 0)
        r = simcuda_emu_check(l, x, (size_t)n * sizeof *x);
    if (r == CUDA_SUCCESS && alpha_ptr)
        alpha = *alpha_ptr;
    for (long long i = 0; r == CUDA_SUCCESS && i < n; i++)
        x[i] *= alpha;
    return r;
}

SIMCUDA_EMULATION_ARGS(hk_example_fill, emu_fill, sizeof(long long), sizeof(float),
                       sizeof(float *));
SIMCUDA_EMULATION_ARGS(hk_example_scale, emu_scale, sizeof(long long), sizeof(float),
                       sizeof(const float *), sizeof(float *));
