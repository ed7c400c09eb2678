/* simcuda contexts: the per-thread current-context stack, user contexts and
 * context queries (docs/contexts.md facts 6, 7, 9, 10, 15). Primary contexts live in
 * sim_device.c. */
#include "sim_internal.h"

#include <string.h>

int sim_ctx_valid(const struct CUctx_st *c)
{
    return c && c->hdr.magic == SIM_MAGIC_CTX;
}

CUresult sim_current(struct CUctx_st **out)
{
    struct CUctx_st *c = sim_tls.depth ? sim_tls.stack[sim_tls.depth - 1] : NULL;
    *out = c;
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    return c->alive ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

sim_owner_t sim_owner_of(struct CUctx_st *c)
{
    sim_owner_t o = {c, c->id};
    return o;
}

int sim_owner_valid(const sim_owner_t *o)
{
    return o->ctx && o->ctx->alive && o->ctx->id == o->ctx_id;
}

void sim_tls_set_top(struct CUctx_st *c)
{
    if (sim_tls.depth == 0)
        sim_tls.depth = 1;
    sim_tls.stack[sim_tls.depth - 1] = c;
}

/* A context ends (destroyed, or its primary deactivated): its ID dies with it,
 * its memory goes, and whatever it owned fails the owner check from now on. */
void sim_ctx_end(struct CUctx_st *c)
{
    if (!c->alive)
        return;
    sim_exec_flush(c); /* a reset or destroy waits for the context's work */
    c->alive = 0;
    c->id = 0;
    sim_mem_drop_ctx(c);
    sim_capture_drop_ctx(c);
}

void sim_ctx_start(struct CUctx_st *c)
{
    c->alive = 1;
    c->id = sim.next_ctx_id++;
}

/* Execution affinity and CIG are not modelled; asking for them is refused
 * (unsupported != 0) rather than silently ignored. */
static CUresult sim_ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev, int unsupported)
{
    SIM_BEGIN(cuCtxCreate);
    SIM_FAIL_IF(unsupported, CUDA_ERROR_NOT_SUPPORTED);
    SIM_FAIL_IF(!pctx, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(dev < 0 || dev >= sim.ndev, CUDA_ERROR_INVALID_DEVICE);
    SIM_FAIL_IF(sim_tls.depth >= SIM_STACK_MAX, CUDA_ERROR_OUT_OF_MEMORY);
    struct CUctx_st *c = sim_obj_new(SIM_MAGIC_CTX, sizeof *c);
    SIM_FAIL_IF(!c, CUDA_ERROR_OUT_OF_MEMORY);
    c->device = dev;
    c->kind = SIM_CTX_USER;
    c->flags = flags;
    sim_ctx_start(c);
    sim_tls.stack[sim_tls.depth++] = c;
    *pctx = c;
    SIM_END;
}

SIM_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return sim_ctx_create(pctx, flags, dev, 0);
}

SIM_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return sim_ctx_create(pctx, flags, dev, 0);
}

SIM_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int nparams,
                                unsigned int flags, CUdevice dev)
{
    return sim_ctx_create(pctx, flags, dev, params && nparams > 0);
}

SIM_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                CUdevice dev)
{
    return sim_ctx_create(pctx, flags, dev,
                          params && (params->execAffinityParams || params->cigParams));
}

static CUresult sim_ctx_destroy(CUcontext c)
{
    SIM_BEGIN(cuCtxDestroy);
    SIM_FAIL_IF(!sim_ctx_valid(c), CUDA_ERROR_INVALID_VALUE);
    /* The primary belongs to its retainers (fact 10); a green context to its
     * CUgreenCtx. */
    SIM_FAIL_IF(c->kind != SIM_CTX_USER, CUDA_ERROR_INVALID_CONTEXT);
    SIM_FAIL_IF(!c->alive, CUDA_ERROR_CONTEXT_IS_DESTROYED);
    sim_ctx_end(c);
    if (sim_tls.depth && sim_tls.stack[sim_tls.depth - 1] == c)
        sim_tls.depth--;
    SIM_END;
}

SIM_API CUresult cuCtxDestroy(CUcontext ctx)
{
    return sim_ctx_destroy(ctx);
}

SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    return sim_ctx_destroy(ctx);
}

SIM_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_BEGIN(cuCtxGetCurrent);
    SIM_FAIL_IF(!pctx, CUDA_ERROR_INVALID_VALUE);
    *pctx = sim_tls.depth ? sim_tls.stack[sim_tls.depth - 1] : NULL;
    SIM_END;
}

/* Fact 15: NULL pops the top; otherwise the top is replaced (or pushed onto an
 * empty stack). An inactive primary may be made current: the runtime does. */
SIM_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    SIM_BEGIN(cuCtxSetCurrent);
    if (!ctx) {
        if (sim_tls.depth)
            sim_tls.depth--;
        goto out;
    }
    SIM_FAIL_IF(!sim_ctx_valid(ctx), CUDA_ERROR_INVALID_CONTEXT);
    SIM_FAIL_IF(ctx->kind != SIM_CTX_PRIMARY && !ctx->alive, CUDA_ERROR_CONTEXT_IS_DESTROYED);
    sim_tls_set_top(ctx);
    SIM_END;
}

static CUresult sim_ctx_push(CUcontext ctx)
{
    SIM_BEGIN(cuCtxPushCurrent);
    SIM_FAIL_IF(!sim_ctx_valid(ctx), CUDA_ERROR_INVALID_CONTEXT);
    SIM_FAIL_IF(ctx->kind != SIM_CTX_PRIMARY && !ctx->alive, CUDA_ERROR_CONTEXT_IS_DESTROYED);
    SIM_FAIL_IF(sim_tls.depth >= SIM_STACK_MAX, CUDA_ERROR_OUT_OF_MEMORY);
    sim_tls.stack[sim_tls.depth++] = ctx;
    SIM_END;
}

SIM_API CUresult cuCtxPushCurrent(CUcontext ctx)
{
    return sim_ctx_push(ctx);
}

SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    return sim_ctx_push(ctx);
}

static CUresult sim_ctx_pop(CUcontext *pctx)
{
    SIM_BEGIN(cuCtxPopCurrent);
    SIM_FAIL_IF(sim_tls.depth == 0, CUDA_ERROR_INVALID_CONTEXT);
    struct CUctx_st *c = sim_tls.stack[--sim_tls.depth];
    if (pctx)
        *pctx = c;
    SIM_END;
}

SIM_API CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    return sim_ctx_pop(pctx);
}

SIM_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    return sim_ctx_pop(pctx);
}

/* ctx NULL means the current context. */
static CUresult sim_ctx_pick(CUcontext ctx, struct CUctx_st **out)
{
    if (!ctx)
        return sim_current(out);
    if (!sim_ctx_valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = ctx;
    return ctx->alive ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* A primary made inactive by a reset still answers for its device and flags
 * (measured), unlike its ID; a destroyed user or green context does not. */
static CUresult sim_ctx_pick_static(CUcontext ctx, struct CUctx_st **out)
{
    CUresult r = sim_ctx_pick(ctx, out);
    if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED && (*out)->kind == SIM_CTX_PRIMARY)
        r = CUDA_SUCCESS;
    return r;
}

static CUresult sim_ctx_get_device(CUdevice *device, CUcontext ctx)
{
    SIM_BEGIN(cuCtxGetDevice);
    SIM_FAIL_IF(!device, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    SIM_CHECK(sim_ctx_pick_static(ctx, &c));
    *device = c->device;
    SIM_END;
}

SIM_API CUresult cuCtxGetDevice(CUdevice *device)
{
    return sim_ctx_get_device(device, NULL);
}

SIM_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    return sim_ctx_get_device(device, ctx);
}

SIM_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    SIM_BEGIN(cuCtxGetId);
    SIM_FAIL_IF(!id, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    SIM_CHECK(sim_ctx_pick(ctx, &c));
    *id = c->id;
    SIM_END;
}

/* Waits for the context's launches held running (simcuda_hold_launches),
 * with the simulation's lock released meanwhile, as a synchronisation waits
 * for kernels still running on a GPU; the context may end meanwhile. */
static CUresult sim_ctx_sync(CUcontext ctx)
{
    SIM_BEGIN(cuCtxSynchronize);
    struct CUctx_st *c;
    SIM_CHECK(sim_ctx_pick(ctx, &c));
    SIM_CHECK(sim_capture_ctx_sync(c));
    while (c->held && c->alive) {
        sim.sync_waiting++;
        pthread_cond_wait(&sim.held_done, &sim.lock);
        sim.sync_waiting--;
    }
    SIM_END;
}

SIM_API CUresult cuCtxSynchronize(void)
{
    return sim_ctx_sync(NULL);
}

SIM_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    return sim_ctx_sync(ctx);
}

SIM_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    SIM_BEGIN(cuCtxGetApiVersion);
    SIM_FAIL_IF(!version, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    SIM_CHECK(sim_ctx_pick(ctx, &c));
    *version = 3020; /* the context API generation every current driver reports */
    SIM_END;
}

/* The H200's range: priorities are not modelled (a stream made with any
 * priority behaves the same). */
SIM_API CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    SIM_BEGIN(cuCtxGetStreamPriorityRange);
    struct CUctx_st *c;
    SIM_CHECK(sim_current(&c));
    if (least)
        *least = 0;
    if (greatest)
        *greatest = -5;
    SIM_END;
}

SIM_API CUresult cuCtxGetFlags(unsigned int *flags)
{
    SIM_BEGIN(cuCtxGetFlags);
    SIM_FAIL_IF(!flags, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    SIM_CHECK(sim_ctx_pick_static(NULL, &c));
    *flags = c->kind == SIM_CTX_PRIMARY ? sim.dev[c->device].primary_flags : c->flags;
    SIM_END;
}

SIM_API CUcontext simcuda_current_context(void)
{
    return sim_tls.depth ? sim_tls.stack[sim_tls.depth - 1] : NULL;
}

SIM_API int simcuda_stack_depth(void)
{
    return sim_tls.depth;
}

SIM_API size_t simcuda_live_contexts(void)
{
    pthread_mutex_lock(&sim.lock);
    size_t n = 0;
    for (const sim_obj_t *o = sim.objects; o; o = o->next_obj)
        n += o->magic == SIM_MAGIC_CTX && ((const struct CUctx_st *)o)->alive;
    pthread_mutex_unlock(&sim.lock);
    return n;
}
