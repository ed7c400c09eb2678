// Kernels of the Python package's hk.kernels/1 tests (test_kernels.py on the
// simulated driver, test_gpu.py on a GPU), built by python/SConscript as PTX
// text, a cubin and a fatbin. On the simulated driver, test_kernels.py
// registers host emulations of the same names that do the same work.

// y[i] += a * x[i] for i < n, any grid.
extern "C" __global__ void hkpy_axpy(long long n, float a, const float *x, float *y)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] += a * x[i];
}

struct hkpy_pair {
    int i;
    float f;
};

// Copies the bytes of every argument after out into out, packed in order
// (1 + 2 + 4 + 8 + 4 + 8 + 8 = 35 bytes), so that a test sees the C type
// each argument reached the kernel as.
extern "C" __global__ void hkpy_args(unsigned char *out, signed char i8, unsigned short u16,
                                     int i32, unsigned long long u64, float f32, double f64,
                                     hkpy_pair pair)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    unsigned char *p = out;
    memcpy(p, &i8, 1), p += 1;
    memcpy(p, &u16, 2), p += 2;
    memcpy(p, &i32, 4), p += 4;
    memcpy(p, &u64, 8), p += 8;
    memcpy(p, &f32, 4), p += 4;
    memcpy(p, &f64, 8), p += 8;
    memcpy(p, &pair, 8);
}

// Reverses each block's blockDim.x floats of x through dynamic shared memory
// (blockDim.x floats of it).
extern "C" __global__ void hkpy_reverse(float *x)
{
    extern __shared__ float s[];
    unsigned base = blockIdx.x * blockDim.x;
    s[threadIdx.x] = x[base + threadIdx.x];
    __syncthreads();
    x[base + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

// Every thread of a 3-D grid of 3-D blocks writes where it is at its linear
// position, so that dimensions passed in the wrong order are seen.
extern "C" __global__ void hkpy_index(unsigned *out)
{
    unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
    out[block * per_block + thread] = ((blockIdx.z * 16 + blockIdx.y) * 16 + blockIdx.x) * 4096 +
                                      (threadIdx.z * 64 + threadIdx.y) * 64 + threadIdx.x;
}
