// Kernels of the hk.kernels/1 tests (test_cuda_kernels*.c), compiled at build
// time twice: to PTX text (loaded as PTX, so the driver JIT-compiles it) and
// to a fatbin. On the simulated driver their host emulations live in
// test_cuda_kernels.c and are registered at run time.

// y[i] += a * x[i] for i < n, any grid.
extern "C" __global__ void hkt_axpy(long long n, float a, const float *x, float *y)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] += a * x[i];
}

// Every thread of a 3D grid of 3D blocks writes where it is, at its linear
// position, so that a launch with its dimensions mixed up is seen.
extern "C" __global__ void hkt_index(unsigned *out)
{
    unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
    out[block * per_block + thread] = ((blockIdx.z * 16 + blockIdx.y) * 16 + blockIdx.x) * 4096 +
                                      (threadIdx.z * 64 + threadIdx.y) * 64 + threadIdx.x;
}

// Reverses each block's blockDim.x floats of x through dynamic shared memory
// (blockDim.x floats of it).
extern "C" __global__ void hkt_reverse(float *x)
{
    extern __shared__ float s[];
    unsigned base = blockIdx.x * blockDim.x;
    s[threadIdx.x] = x[base + threadIdx.x];
    __syncthreads();
    x[base + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

// A kernel without parameters (launched with args NULL).
extern "C" __global__ void hkt_noparams(void)
{
}
