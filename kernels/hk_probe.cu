// A one-thread kernel that writes a known word: the first launch of a new context
// and the conformance suite use it to check that the embedded fatbin runs.
extern "C" __global__ void hk_probe_kernel(unsigned int *out, unsigned int value)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *out = value;
}
