// The kernels a program loads through movable handles in
// test_swap_kernels*.c, compiled at build time twice: to PTX text (the
// driver JIT-compiles it when loaded) and to a fatbin. On the simulated
// driver their host emulations live in test_swap_kernels.c and are
// registered at run time.

// y[i] += a * x[i] for i < n, any grid.
extern "C" __global__ void swk_axpy(int n, float a, const float *x, float *y)
{
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] += a * x[i];
}

// out[i] = i * k for i < n, any grid.
extern "C" __global__ void swk_iota(int n, int k, int *out)
{
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = i * k;
}
