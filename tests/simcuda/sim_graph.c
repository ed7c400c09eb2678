/* simcuda stream capture and graphs (docs/contexts.md fact 13): a capturing stream
 * records its kernel launches, with copies of their argument values, into a
 * graph; an instantiated graph replays the emulations in order. Only kernel
 * launches are captured; copies and memsets on a capturing stream run at once.
 * While a global-mode capture is open anywhere, the calls the real driver
 * forbids (allocation, freeing, context synchronisation) fail with 900 and
 * invalidate it. */
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sim_nodes_free(sim_nodes_t *n)
{
    sim_node_t *p = n->first;
    while (p) {
        sim_node_t *next = p->next;
        free(p->args);
        free(p);
        p = next;
    }
    free(n);
}

void sim_nodes_unref(sim_nodes_t *n)
{
    if (n && --n->refs == 0)
        sim_nodes_free(n);
}

/* Which open captures forbid this thread's unsafe calls, as the driver's
 * documentation of cuThreadExchangeStreamCaptureMode puts it: in the thread's
 * GLOBAL mode, its own captures not begun RELAXED and every GLOBAL capture of
 * any thread; in THREAD_LOCAL mode, its own captures not begun RELAXED; in
 * RELAXED mode, none (fact 23). */
static int sim_capture_forbids(const struct CUstream_st *s)
{
    CUstreamCaptureMode mine = sim_tls.capture_mode;
    if (!s->capturing || mine == CU_STREAM_CAPTURE_MODE_RELAXED)
        return 0;
    int own = pthread_equal(s->capture_thread, pthread_self()) &&
              s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    return own || (mine == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                   s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult sim_capture_forbid(void)
{
    int forbidden = 0;
    if (sim.open_captures == 0)
        return CUDA_SUCCESS;
    for (sim_obj_t *o = sim.objects; o; o = o->next_obj) {
        struct CUstream_st *s = (struct CUstream_st *)o;
        if (o->magic == SIM_MAGIC_STREAM && sim_capture_forbids(s)) {
            s->capture_invalid = 1;
            forbidden = 1;
        }
    }
    return forbidden ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

SIM_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    SIM_BEGIN(cuThreadExchangeStreamCaptureMode);
    SIM_FAIL_IF(!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
                          *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                          *mode != CU_STREAM_CAPTURE_MODE_RELAXED),
                CUDA_ERROR_INVALID_VALUE);
    CUstreamCaptureMode old = sim_tls.capture_mode;
    sim_tls.capture_mode = *mode;
    *mode = old;
    SIM_END;
}

static void sim_capture_close(struct CUstream_st *s)
{
    sim.open_captures--;
    s->capturing = 0;
    s->capture_invalid = 0;
}

void sim_capture_drop_ctx(struct CUctx_st *c)
{
    for (sim_obj_t *o = sim.objects; o; o = o->next_obj) {
        struct CUstream_st *s = (struct CUstream_st *)o;
        if (o->magic == SIM_MAGIC_STREAM && s->capturing && s->own.ctx == c) {
            sim_capture_close(s);
            s->capture_graph = NULL; /* stays in the object list, freed at exit */
        }
    }
}

CUresult sim_capture_launch(struct CUstream_st *s, const simcuda_emu_entry_t *emu,
                            const char *name, const unsigned grid[3], const unsigned block[3],
                            unsigned shared_bytes, void **params)
{
    if (!emu || (emu->nparams && !params)) {
        fprintf(stderr, "simcuda: no emulation for kernel %s\n", name);
        return CUDA_ERROR_NOT_FOUND;
    }
    if (emu->nparams == 0 && params) {
        fprintf(stderr, "simcuda: cannot capture kernel %s: its emulation gives no parameter "
                        "sizes (SIMCUDA_EMULATION_ARGS)\n", name);
        s->capture_invalid = 1;
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    size_t total = 0;
    for (unsigned i = 0; i < emu->nparams; i++)
        total += (emu->param_size[i] + 15u) & ~15u;
    sim_node_t *n = calloc(1, sizeof *n);
    unsigned char *args = total ? malloc(total) : NULL;
    if (!n || (total && !args)) {
        free(n);
        free(args);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t off = 0;
    for (unsigned i = 0; i < emu->nparams; i++) {
        memcpy(args + off, params[i], emu->param_size[i]);
        n->argv[i] = args + off;
        off += (emu->param_size[i] + 15u) & ~15u;
    }
    n->args = args;
    n->emu = emu;
    memcpy(n->grid, grid, sizeof n->grid);
    memcpy(n->block, block, sizeof n->block);
    n->shared_bytes = shared_bytes;
    sim_nodes_t *list = s->capture_graph->nodes;
    if (list->last)
        list->last->next = n;
    else
        list->first = n;
    list->last = n;
    return CUDA_SUCCESS;
}

static CUresult sim_begin_capture(CUstream hs, CUstreamCaptureMode mode)
{
    SIM_BEGIN(cuStreamBeginCapture);
    SIM_FAIL_IF(mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                    mode != CU_STREAM_CAPTURE_MODE_RELAXED,
                CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    struct CUstream_st *s;
    SIM_CHECK(sim_stream_target(hs, &c, &s));
    /* The legacy default stream cannot be captured; a per-thread stream can. */
    SIM_FAIL_IF(s->kind == SIM_STREAM_LEGACY, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    SIM_FAIL_IF(s->capturing, CUDA_ERROR_ILLEGAL_STATE);
    struct CUgraph_st *g = sim_obj_new(SIM_MAGIC_GRAPH, sizeof *g);
    SIM_FAIL_IF(!g, CUDA_ERROR_OUT_OF_MEMORY);
    g->nodes = calloc(1, sizeof *g->nodes);
    SIM_FAIL_IF(!g->nodes, CUDA_ERROR_OUT_OF_MEMORY);
    g->nodes->refs = 1;
    g->own = s->own;
    s->capture_graph = g;
    s->capturing = 1;
    s->capture_invalid = 0;
    s->capture_mode = mode;
    s->capture_thread = pthread_self();
    sim.open_captures++;
    SIM_END;
}

SIM_API CUresult cuStreamBeginCapture(CUstream s)
{
    return sim_begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

SIM_API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    return sim_begin_capture(s, mode);
}

SIM_API CUresult cuStreamEndCapture(CUstream hs, CUgraph *out)
{
    SIM_BEGIN(cuStreamEndCapture);
    SIM_FAIL_IF(!out, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    SIM_FAIL_IF(!hs || hs == CU_STREAM_LEGACY, CUDA_ERROR_INVALID_HANDLE);
    SIM_CHECK(sim_stream_special(hs) ? sim_stream_target(hs, &c, &hs)
                                     : sim_stream_actual(hs, NULL, &hs));
    SIM_FAIL_IF(!hs->capturing, CUDA_ERROR_ILLEGAL_STATE);
    int invalid = hs->capture_invalid;
    struct CUgraph_st *g = hs->capture_graph;
    sim_capture_close(hs);
    hs->capture_graph = NULL;
    if (invalid) {
        *out = NULL;
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        goto out;
    }
    g->alive = 1;
    *out = g;
    SIM_END;
}

SIM_API CUresult cuStreamIsCapturing(CUstream hs, CUstreamCaptureStatus *status)
{
    SIM_BEGIN(cuStreamIsCapturing);
    SIM_FAIL_IF(!status, CUDA_ERROR_INVALID_VALUE);
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    struct CUctx_st *c;
    SIM_CHECK(sim_stream_special(hs) ? sim_stream_target(hs, &c, &hs)
                                     : sim_stream_actual(hs, NULL, &hs));
    if (hs->capturing)
        *status = hs->capture_invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    SIM_END;
}

static int sim_graph_live(const struct CUgraph_st *g)
{
    return g && g->hdr.magic == SIM_MAGIC_GRAPH && g->alive;
}

static CUresult sim_instantiate(CUgraphExec *out, CUgraph g)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_graph_live(g))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *x = sim_obj_new(SIM_MAGIC_GEXEC, sizeof *x);
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    x->own = g->own;
    x->nodes = g->nodes;
    x->nodes->refs++;
    x->alive = 1;
    *out = x;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g, unsigned long long flags)
{
    SIM_BEGIN(cuGraphInstantiateWithFlags);
    (void)flags;
    SIM_CHECK(sim_instantiate(out, g));
    SIM_END;
}

SIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *out, CUgraph g, CUgraphNode *err_node,
                                       char *log, size_t log_size)
{
    SIM_BEGIN(cuGraphInstantiate);
    if (err_node)
        *err_node = NULL;
    if (log && log_size)
        log[0] = '\0';
    SIM_CHECK(sim_instantiate(out, g));
    SIM_END;
}

/* Replays in the graph's context, whatever is current: the stream decides. */
SIM_API CUresult cuGraphLaunch(CUgraphExec x, CUstream hs)
{
    SIM_BEGIN(cuGraphLaunch);
    SIM_FAIL_IF(!x || x->hdr.magic != SIM_MAGIC_GEXEC || !x->alive, CUDA_ERROR_INVALID_HANDLE);
    SIM_FAIL_IF(!sim_owner_valid(&x->own), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    sim_quiet_note_launch(x->own.ctx); /* a launch into its context (fact 25) */
    struct CUstream_st *s;
    if (sim_stream_special(hs)) {
        struct CUctx_st *c;
        SIM_CHECK(sim_current(&c));
        SIM_FAIL_IF(c != x->own.ctx, CUDA_ERROR_INVALID_HANDLE);
    }
    SIM_CHECK(sim_stream_resolve(hs, x->own.ctx, &s));
    SIM_FAIL_IF(s->capturing, CUDA_ERROR_NOT_SUPPORTED); /* nested capture: not modelled */
    /* The entry protocol ran every pending block first: replays run whole. */
    for (sim_node_t *n = x->nodes->first; n; n = n->next)
        SIM_CHECK(sim_run(n->emu, n->emu->name, x->own.ctx, hs, n->grid, n->block,
                          n->shared_bytes, n->argv));
    SIM_END;
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec x)
{
    SIM_BEGIN(cuGraphExecDestroy);
    SIM_FAIL_IF(!x || x->hdr.magic != SIM_MAGIC_GEXEC || !x->alive, CUDA_ERROR_INVALID_VALUE);
    x->alive = 0;
    sim_nodes_unref(x->nodes);
    x->nodes = NULL;
    SIM_END;
}

SIM_API CUresult cuGraphDestroy(CUgraph g)
{
    SIM_BEGIN(cuGraphDestroy);
    SIM_FAIL_IF(!sim_graph_live(g), CUDA_ERROR_INVALID_VALUE);
    g->alive = 0;
    sim_nodes_unref(g->nodes);
    g->nodes = NULL;
    SIM_END;
}
