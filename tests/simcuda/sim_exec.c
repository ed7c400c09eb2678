/* simcuda execution of kernels emulated block by block.
 *
 * A GPU runs the grids of different streams at the same time, and their
 * blocks interleave; grids of one stream run one after the other. The
 * simulation keeps that much of the real behaviour for the kernels whose
 * emulation works block by block (SIMCUDA_EMULATION_BLOCKS), so that two
 * launches that share scratch memory from different streams race here as
 * they do on a GPU, deterministically for a given sequence of driver calls:
 *
 * - a launch first completes what stream order puts before it (its stream's
 *   pending grid; with the legacy stream, the other blocking streams of its
 *   context, and the other way round), then runs half of its blocks (rounded
 *   up), each followed by one block of every other pending grid, and leaves
 *   the rest pending on its stream;
 * - every driver call that could observe or depend on the results
 *   (synchronisation, copies, memsets, frees, events, graphs, context
 *   changes of life) runs all pending blocks first, round robin over the
 *   pending grids (sim_enter calls sim_exec_flush). The calls of a launch's
 *   hot path (current context, IDs, pointer queries, launches) do not.
 *
 * All of it runs under sim.lock on the calling thread. */
#include "sim_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct sim_grid {
    struct sim_grid *next;
    struct CUstream_st *stream;
    struct CUctx_st *ctx;
    unsigned long long ctx_id;
    const simcuda_emu_entry_t *emu;
    simcuda_launch_t launch;
    void *argv[SIMCUDA_EMU_MAX_PARAMS];
    unsigned char *args; /* copies of the argument values */
    unsigned next_block;
} sim_grid_t;

/* Entries that leave pending blocks pending: what a library calls on its
 * way to a launch, and the launch itself. */
int sim_entry_keeps_pending(enum sim_entry e)
{
    switch (e) {
    case SIM_E_cuLaunchKernel:
    case SIM_E_cuLaunchKernelEx:
    case SIM_E_cuCtxGetCurrent:
    case SIM_E_cuCtxSetCurrent:
    case SIM_E_cuCtxPushCurrent:
    case SIM_E_cuCtxPopCurrent:
    case SIM_E_cuCtxGetId:
    case SIM_E_cuCtxGetDevice:
    case SIM_E_cuCtxGetFlags:
    case SIM_E_cuCtxGetApiVersion:
    case SIM_E_cuStreamGetId:
    case SIM_E_cuStreamGetCtx:
    case SIM_E_cuStreamIsCapturing:
    case SIM_E_cuThreadExchangeStreamCaptureMode:
    case SIM_E_cuPointerGetAttribute:
    case SIM_E_cuPointerGetAttributes:
    case SIM_E_cuDeviceGet:
    case SIM_E_cuDeviceGetCount:
    case SIM_E_cuDeviceGetAttribute:
    case SIM_E_cuDevicePrimaryCtxGetState:
    case SIM_E_cuDriverGetVersion:
    case SIM_E_cuGetErrorName:
    case SIM_E_cuGetErrorString:
    case SIM_E_cuGetProcAddress:
    case SIM_E_cuKernelGetFunction:
    case SIM_E_cuLibraryGetKernel:
        return 1;
    default:
        return 0;
    }
}

static int grid_done(const sim_grid_t *g)
{
    return g->next_block >= g->launch.grid[0];
}

static void grid_step(sim_grid_t *g)
{
    if (!grid_done(g))
        g->emu->block(&g->launch, g->argv, g->next_block++);
}

static void grid_free(sim_grid_t *g)
{
    free(g->args);
    free(g);
}

/* Drops finished grids from the pending list. */
static void sweep(void)
{
    sim_grid_t **link = &sim.pending;
    while (*link) {
        sim_grid_t *g = *link;
        if (grid_done(g)) {
            *link = g->next;
            grid_free(g);
        } else {
            link = &g->next;
        }
    }
}

/* Work on a blocking stream (made without CU_STREAM_NON_BLOCKING, or a
 * per-thread stream) and on the legacy stream of its context wait for each
 * other. */
static int blocking(const struct CUstream_st *s)
{
    return s->kind != SIM_STREAM_USER || !(s->flags & CU_STREAM_NON_BLOCKING);
}

static int must_precede(const sim_grid_t *g, const struct CUstream_st *s)
{
    if (g->stream == s)
        return 1;
    if (g->ctx != s->own.ctx || g->ctx_id != s->own.ctx_id)
        return 0;
    if (s->kind == SIM_STREAM_LEGACY)
        return blocking(g->stream);
    return blocking(s) && g->stream->kind == SIM_STREAM_LEGACY;
}

void sim_exec_order(struct CUstream_st *s)
{
    for (sim_grid_t *g = sim.pending; g; g = g->next)
        if (must_precede(g, s))
            while (!grid_done(g))
                grid_step(g);
    sweep();
}

void sim_exec_flush(struct CUctx_st *ctx)
{
    int left = 1;
    while (left) {
        left = 0;
        for (sim_grid_t *g = sim.pending; g; g = g->next) {
            if (ctx && g->ctx != ctx)
                continue;
            grid_step(g);
            left |= !grid_done(g);
        }
    }
    sweep();
}

void sim_exec_free(void)
{
    while (sim.pending) {
        sim_grid_t *g = sim.pending;
        sim.pending = g->next;
        grid_free(g);
    }
}

/* Copies the argument values (the caller's storage is gone once the launch
 * returns). */
static CUresult grid_args(sim_grid_t *g, void **params)
{
    const simcuda_emu_entry_t *emu = g->emu;
    size_t total = 0, off = 0;
    if (emu->nparams && !params)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < emu->nparams; i++)
        total += (emu->param_size[i] + 15u) & ~15u;
    g->args = total ? malloc(total) : NULL;
    if (total && !g->args)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < emu->nparams; i++) {
        memcpy(g->args + off, params[i], emu->param_size[i]);
        g->argv[i] = g->args + off;
        off += (emu->param_size[i] + 15u) & ~15u;
    }
    return CUDA_SUCCESS;
}

CUresult sim_exec_launch(const simcuda_emu_entry_t *emu, const char *name, struct CUctx_st *ctx,
                         struct CUstream_st *s, CUstream hstream, const unsigned grid[3],
                         const unsigned block[3], unsigned shared_bytes, void **params)
{
    sim_grid_t *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->stream = s;
    g->ctx = ctx;
    g->ctx_id = ctx->id;
    g->emu = emu;
    g->launch = (simcuda_launch_t){.kernel_name = emu->name,
                                   .grid = {grid[0], grid[1], grid[2]},
                                   .block = {block[0], block[1], block[2]},
                                   .shared_bytes = shared_bytes,
                                   .ctx = ctx,
                                   .stream = hstream,
                                   .device = ctx->device};
    (void)name;
    CUresult r = emu->check(&g->launch, params);
    if (r == CUDA_SUCCESS)
        r = grid_args(g, params);
    if (r != CUDA_SUCCESS) {
        grid_free(g);
        return r;
    }
    sim_exec_order(s);
    g->next = sim.pending;
    sim.pending = g;
    unsigned now = (grid[0] + 1) / 2;
    for (unsigned k = 0; k < now; k++) {
        grid_step(g);
        for (sim_grid_t *o = g->next; o; o = o->next)
            grid_step(o);
    }
    sweep();
    return CUDA_SUCCESS;
}
