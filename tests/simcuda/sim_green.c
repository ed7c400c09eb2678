/* simcuda green contexts (docs/contexts.md fact 17), a minimal model: one SM resource
 * per device, split into groups by count, descriptors that remember an SM
 * count, and green contexts that are CUcontexts of their own kind, each
 * holding a retain of its device's primary as the real driver does. */
#include "sim_internal.h"

#include <string.h>

SIM_API CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource *res, CUdevResourceType type)
{
    SIM_BEGIN(cuDeviceGetDevResource);
    SIM_FAIL_IF(!res || type != CU_DEV_RESOURCE_TYPE_SM, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(dev < 0 || dev >= sim.ndev, CUDA_ERROR_INVALID_DEVICE);
    memset(res, 0, sizeof *res);
    res->type = CU_DEV_RESOURCE_TYPE_SM;
    res->sm.smCount = SIM_SM_COUNT;
    res->sm.minSmPartitionSize = 2;
    res->sm.smCoscheduledAlignment = 2;
    SIM_END;
}

/* As the driver does for an SM resource: groups of minCount SMs rounded up
 * to the co-scheduling alignment, as many as asked for (*nbGroups) and as
 * fit; the SMs left over go to *remaining. */
SIM_API CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
                                             const CUdevResource *input,
                                             CUdevResource *remaining, unsigned int useFlags,
                                             unsigned int minCount)
{
    SIM_BEGIN(cuDevSmResourceSplitByCount);
    SIM_FAIL_IF(!nbGroups || !input || input->type != CU_DEV_RESOURCE_TYPE_SM || useFlags,
                CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(*nbGroups && !result, CUDA_ERROR_INVALID_VALUE);
    unsigned align = input->sm.smCoscheduledAlignment ? input->sm.smCoscheduledAlignment : 1;
    unsigned min = minCount < input->sm.minSmPartitionSize ? input->sm.minSmPartitionSize
                                                            : minCount;
    unsigned size = (min + align - 1) / align * align;
    unsigned fit = size ? input->sm.smCount / size : 0;
    SIM_FAIL_IF(fit == 0, CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
    unsigned groups = *nbGroups == 0 || *nbGroups > fit ? fit : *nbGroups;
    for (unsigned i = 0; result && i < groups; i++) {
        result[i] = *input;
        result[i].sm.smCount = size;
    }
    if (remaining) {
        *remaining = *input;
        remaining->sm.smCount = input->sm.smCount - groups * size;
    }
    *nbGroups = groups;
    SIM_END;
}

SIM_API CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *res,
                                           unsigned int n)
{
    SIM_BEGIN(cuDevResourceGenerateDesc);
    SIM_FAIL_IF(!desc || !res || n == 0, CUDA_ERROR_INVALID_VALUE);
    unsigned sms = 0;
    for (unsigned i = 0; i < n; i++) {
        SIM_FAIL_IF(res[i].type != CU_DEV_RESOURCE_TYPE_SM, CUDA_ERROR_INVALID_RESOURCE_TYPE);
        sms += res[i].sm.smCount;
    }
    struct CUdevResourceDesc_st *d = sim_obj_new(SIM_MAGIC_DESC, sizeof *d);
    SIM_FAIL_IF(!d, CUDA_ERROR_OUT_OF_MEMORY);
    d->sm_count = sms;
    *desc = d;
    SIM_END;
}

SIM_API CUresult cuGreenCtxCreate(CUgreenCtx *out, CUdevResourceDesc desc, CUdevice dev,
                                  unsigned int flags)
{
    SIM_BEGIN(cuGreenCtxCreate);
    SIM_FAIL_IF(!out || !desc || desc->hdr.magic != SIM_MAGIC_DESC, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(flags != CU_GREEN_CTX_DEFAULT_STREAM, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(dev < 0 || dev >= sim.ndev, CUDA_ERROR_INVALID_DEVICE);
    struct CUgreenCtx_st *g = sim_obj_new(SIM_MAGIC_GREEN, sizeof *g);
    SIM_FAIL_IF(!g, CUDA_ERROR_OUT_OF_MEMORY);
    struct CUctx_st *c = sim_obj_new(SIM_MAGIC_CTX, sizeof *c);
    SIM_FAIL_IF(!c, CUDA_ERROR_OUT_OF_MEMORY);
    sim_primary_retain(dev, NULL);
    c->device = dev;
    c->kind = SIM_CTX_GREEN;
    c->green = g;
    sim_ctx_start(c);
    g->ctx = c;
    *out = g;
    SIM_END;
}

SIM_API CUresult cuGreenCtxDestroy(CUgreenCtx g)
{
    SIM_BEGIN(cuGreenCtxDestroy);
    SIM_FAIL_IF(!g || g->hdr.magic != SIM_MAGIC_GREEN, CUDA_ERROR_INVALID_HANDLE);
    SIM_FAIL_IF(!g->ctx->alive, CUDA_ERROR_CONTEXT_IS_DESTROYED);
    sim_ctx_end(g->ctx);
    sim_primary_release(g->ctx->device);
    SIM_END;
}

SIM_API CUresult cuCtxFromGreenCtx(CUcontext *pctx, CUgreenCtx g)
{
    SIM_BEGIN(cuCtxFromGreenCtx);
    SIM_FAIL_IF(!pctx || !g || g->hdr.magic != SIM_MAGIC_GREEN, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(!g->ctx->alive, CUDA_ERROR_CONTEXT_IS_DESTROYED);
    *pctx = g->ctx;
    SIM_END;
}
