// The kernel of the client suite's PTX (tests/clients/case_cupy.py): built to
// PTX text by nvcc, then launched by cupy.RawKernel and by hk.kernels/1.

// y[i] += a * x[i] for i < n, any grid.
extern "C" __global__ void hkc_saxpy(long long n, float a, const float *x, float *y)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] += a * x[i];
}
