/* simcuda graphs (docs/contexts.md fact 13): a capturing stream records its
 * kernel launches (with copies of their argument values), memsets and copies
 * into a graph, in order; an instantiated graph replays them. What a capture
 * refuses, and its life, are sim_capture.c's. */
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

struct CUgraph_st *sim_graph_new(const sim_owner_t *own)
{
    struct CUgraph_st *g = sim_obj_new(SIM_MAGIC_GRAPH, sizeof *g);
    if (!g)
        return NULL;
    g->nodes = calloc(1, sizeof *g->nodes);
    if (!g->nodes)
        return NULL; /* g stays in the object list, freed at exit */
    g->nodes->refs = 1;
    g->own = *own;
    return g;
}

static void sim_node_append(struct CUstream_st *s, sim_node_t *n)
{
    sim_nodes_t *list = s->capture_graph->nodes;
    if (list->last)
        list->last->next = n;
    else
        list->first = n;
    list->last = n;
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
    n->kind = SIM_NODE_KERNEL;
    n->args = args;
    n->emu = emu;
    memcpy(n->grid, grid, sizeof n->grid);
    memcpy(n->block, block, sizeof n->block);
    n->shared_bytes = shared_bytes;
    sim_node_append(s, n);
    return CUDA_SUCCESS;
}

CUresult sim_capture_memset(struct CUstream_st *s, void *dst, unsigned value, size_t unit,
                            size_t n)
{
    sim_node_t *node = calloc(1, sizeof *node);
    if (!node)
        return CUDA_ERROR_OUT_OF_MEMORY;
    node->kind = SIM_NODE_MEMSET;
    node->dst = dst;
    node->value = value;
    node->unit = unit;
    node->n = n;
    sim_node_append(s, node);
    return CUDA_SUCCESS;
}

CUresult sim_capture_copy(struct CUstream_st *s, void *dst, const void *src, size_t n)
{
    sim_node_t *node = calloc(1, sizeof *node);
    if (!node)
        return CUDA_ERROR_OUT_OF_MEMORY;
    node->kind = SIM_NODE_COPY;
    node->dst = dst;
    node->src = src;
    node->n = n;
    sim_node_append(s, node);
    return CUDA_SUCCESS;
}

/* One node of a replay in context ctx on stream hs. A memset or copy checks
 * its device side again: the memory may have been freed since the capture. */
static CUresult sim_node_run(sim_node_t *n, struct CUctx_st *ctx, CUstream hs)
{
    if (n->kind == SIM_NODE_KERNEL)
        return sim_run(n->emu, n->emu->name, ctx, hs, n->grid, n->block, n->shared_bytes,
                       n->argv);
    const sim_alloc_t *a = sim_mem_find((uintptr_t)n->dst);
    const sim_alloc_t *b = n->src ? sim_mem_find((uintptr_t)n->src) : NULL;
    size_t bytes = n->kind == SIM_NODE_MEMSET ? n->n * n->unit : n->n;
    if ((a && bytes > a->size - ((uintptr_t)n->dst - a->base)) ||
        (b && bytes > b->size - ((uintptr_t)n->src - b->base)))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    if (n->kind == SIM_NODE_COPY) {
        memmove(n->dst, n->src, n->n);
    } else if (n->unit == 1) {
        memset(n->dst, (int)(n->value & 0xff), n->n);
    } else {
        uint32_t *p = n->dst;
        for (size_t i = 0; i < n->n; i++)
            p[i] = n->value;
    }
    return CUDA_SUCCESS;
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
    SIM_CHECK(sim_capture_legacy(x->own.ctx, s));
    /* The entry protocol ran every pending block first: replays run whole. */
    for (sim_node_t *n = x->nodes->first; n; n = n->next)
        SIM_CHECK(sim_node_run(n, x->own.ctx, hs));
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
