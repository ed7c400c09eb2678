/* simcuda cuGetProcAddress (docs/contexts.md fact 12): (name, CUDA version) to the
 * versioned entry point, as the real driver's table maps them; the versions
 * are those of the PFN_<name>_v<version> typedefs in cudaTypedefs.h. The
 * per-thread-stream forms are not separate here: streams behave the same. */
#include "sim_internal.h"

#include <string.h>

typedef struct sim_proc {
    const char *name;
    int version; /* the CUDA version that introduced this form */
    void *fn;
} sim_proc_t;

#define P(name, version, fn) {#name, version, (void *)fn}

static const sim_proc_t procs[] = {
    P(cuInit, 2000, cuInit),
    P(cuDriverGetVersion, 2020, cuDriverGetVersion),
    P(cuGetErrorName, 6000, cuGetErrorName),
    P(cuGetErrorString, 6000, cuGetErrorString),
    P(cuGetProcAddress, 11030, cuGetProcAddress),
    P(cuGetProcAddress, 12000, cuGetProcAddress_v2),
    P(cuDeviceGet, 2000, cuDeviceGet),
    P(cuDeviceGetCount, 2000, cuDeviceGetCount),
    P(cuDeviceGetName, 2000, cuDeviceGetName),
    P(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
    P(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
    P(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    P(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
    P(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
    P(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),
    P(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags),
    P(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2),
    P(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
    P(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
    P(cuCtxCreate, 2000, cuCtxCreate),
    P(cuCtxCreate, 3020, cuCtxCreate_v2),
    P(cuCtxCreate, 11040, cuCtxCreate_v3),
    P(cuCtxCreate, 12050, cuCtxCreate_v4),
    P(cuCtxDestroy, 2000, cuCtxDestroy),
    P(cuCtxDestroy, 4000, cuCtxDestroy_v2),
    P(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    P(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    P(cuCtxPushCurrent, 2000, cuCtxPushCurrent),
    P(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
    P(cuCtxPopCurrent, 2000, cuCtxPopCurrent),
    P(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
    P(cuCtxGetDevice, 2000, cuCtxGetDevice),
    P(cuCtxGetDevice, 13000, cuCtxGetDevice_v2),
    P(cuCtxGetId, 12000, cuCtxGetId),
    P(cuCtxSynchronize, 2000, cuCtxSynchronize),
    P(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
    P(cuCtxGetApiVersion, 3020, cuCtxGetApiVersion),
    P(cuCtxGetFlags, 7000, cuCtxGetFlags),
    P(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange),
    P(cuStreamCreate, 2000, cuStreamCreate),
    P(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
    P(cuStreamDestroy, 2000, cuStreamDestroy),
    P(cuStreamDestroy, 4000, cuStreamDestroy_v2),
    P(cuStreamSynchronize, 2000, cuStreamSynchronize),
    P(cuStreamQuery, 2000, cuStreamQuery),
    P(cuStreamGetCtx, 9020, cuStreamGetCtx),
    P(cuStreamGetCtx, 12050, cuStreamGetCtx_v2),
    P(cuStreamGetId, 12000, cuStreamGetId),
    P(cuStreamWaitEvent, 3020, cuStreamWaitEvent),
    P(cuEventCreate, 2000, cuEventCreate),
    P(cuEventRecord, 2000, cuEventRecord),
    P(cuEventSynchronize, 2000, cuEventSynchronize),
    P(cuEventQuery, 2000, cuEventQuery),
    P(cuEventElapsedTime, 2000, cuEventElapsedTime),
    P(cuEventElapsedTime, 12080, cuEventElapsedTime_v2),
    P(cuEventDestroy, 2000, cuEventDestroy),
    P(cuEventDestroy, 4000, cuEventDestroy_v2),
    P(cuMemAlloc, 3020, cuMemAlloc_v2),
    P(cuMemFree, 3020, cuMemFree_v2),
    P(cuMemAllocAsync, 11020, cuMemAllocAsync),
    P(cuMemFreeAsync, 11020, cuMemFreeAsync),
    P(cuMemGetInfo, 3020, cuMemGetInfo_v2),
    P(cuMemHostAlloc, 2020, cuMemHostAlloc),
    P(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2),
    P(cuMemFreeHost, 2000, cuMemFreeHost),
    P(cuMemcpy, 4000, cuMemcpy),
    P(cuMemcpyAsync, 4000, cuMemcpyAsync),
    P(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2),
    P(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2),
    P(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2),
    P(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2),
    P(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2),
    P(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2),
    P(cuMemsetD8, 3020, cuMemsetD8_v2),
    P(cuMemsetD32, 3020, cuMemsetD32_v2),
    P(cuMemsetD8Async, 3020, cuMemsetD8Async),
    P(cuMemsetD32Async, 3020, cuMemsetD32Async),
    P(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
    P(cuPointerGetAttributes, 7000, cuPointerGetAttributes),
    P(cuModuleLoadData, 2000, cuModuleLoadData),
    P(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx),
    P(cuModuleUnload, 2000, cuModuleUnload),
    P(cuModuleGetFunction, 2000, cuModuleGetFunction),
    P(cuLibraryLoadData, 12000, cuLibraryLoadData),
    P(cuLibraryUnload, 12000, cuLibraryUnload),
    P(cuLibraryGetKernel, 12000, cuLibraryGetKernel),
    P(cuLibraryGetModule, 12000, cuLibraryGetModule),
    P(cuKernelGetFunction, 12000, cuKernelGetFunction),
    P(cuKernelGetName, 12030, cuKernelGetName),
    P(cuKernelGetAttribute, 12000, cuKernelGetAttribute),
    P(cuFuncGetName, 12030, cuFuncGetName),
    P(cuKernelGetParamInfo, 12040, cuKernelGetParamInfo),
    P(cuFuncGetParamInfo, 12040, cuFuncGetParamInfo),
    P(cuKernelSetAttribute, 12000, cuKernelSetAttribute),
    P(cuFuncSetAttribute, 9000, cuFuncSetAttribute),
    P(cuLaunchKernel, 4000, cuLaunchKernel),
    P(cuLaunchKernelEx, 11060, cuLaunchKernelEx),
    P(cuStreamBeginCapture, 10000, cuStreamBeginCapture),
    P(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2),
    P(cuStreamEndCapture, 10000, cuStreamEndCapture),
    P(cuStreamIsCapturing, 10000, cuStreamIsCapturing),
    P(cuStreamGetCaptureInfo, 10010, cuStreamGetCaptureInfo),
    P(cuStreamGetCaptureInfo, 11030, cuStreamGetCaptureInfo_v2),
    P(cuStreamGetCaptureInfo, 12030, cuStreamGetCaptureInfo_v3),
    P(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode),
    P(cuGraphInstantiate, 11000, cuGraphInstantiate_v2),
    P(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
    P(cuGraphLaunch, 10000, cuGraphLaunch),
    P(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
    P(cuGraphDestroy, 10000, cuGraphDestroy),
    P(cuDeviceGetDevResource, 12040, cuDeviceGetDevResource),
    P(cuDevSmResourceSplitByCount, 12040, cuDevSmResourceSplitByCount),
    P(cuDevResourceGenerateDesc, 12040, cuDevResourceGenerateDesc),
    P(cuGreenCtxCreate, 12040, cuGreenCtxCreate),
    P(cuGreenCtxDestroy, 12040, cuGreenCtxDestroy),
    P(cuCtxFromGreenCtx, 12040, cuCtxFromGreenCtx),
};

#undef P

static CUresult sim_proc_lookup(const char *symbol, void **pfn, int version,
                                CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (version > SIM_DRIVER_VERSION)
        return CUDA_ERROR_INVALID_VALUE; /* newer than this driver, as documented */
    const sim_proc_t *best = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        if (strcmp(procs[i].name, symbol) != 0)
            continue;
        known = 1;
        if (procs[i].version <= version && (!best || procs[i].version > best->version))
            best = &procs[i];
    }
    *pfn = best ? best->fn : NULL;
    if (status)
        *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
                  : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    SIM_BEGIN_NOINIT(cuGetProcAddress);
    (void)flags;
    SIM_CHECK(sim_proc_lookup(symbol, pfn, version, status));
    SIM_END;
}

SIM_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    SIM_BEGIN_NOINIT(cuGetProcAddress);
    (void)flags;
    SIM_CHECK(sim_proc_lookup(symbol, pfn, version, NULL));
    SIM_END;
}
