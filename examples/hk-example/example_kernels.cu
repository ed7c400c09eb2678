// hk-example's kernels. extern "C" keeps their names as written, which is
// how the plugin finds them (hk_kit_kernel_find). Launch: 256-thread blocks,
// any number of blocks (each loop strides over the whole grid).

// x[i] = value for i < n.
extern "C" __global__ void hk_example_fill(long long n, float value, float *x)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = value;
}

// x[i] *= alpha for i < n, where alpha is *alpha_ptr when alpha_ptr is not
// NULL (device pointer mode), else the value passed.
extern "C" __global__ void hk_example_scale(long long n, float alpha, const float *alpha_ptr,
                                            float *x)
{
    float a = alpha_ptr ? *alpha_ptr : alpha;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] *= a;
}
