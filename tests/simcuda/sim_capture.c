/* simcuda stream capture: a capture sequence's life (begin, end, status,
 * sequence ID) and what the driver refuses while one is open, as measured
 * on an H200 (docs/contexts.md facts 13, 23 and 26):
 *   - calls that may not touch a capturing stream (its ID, a synchronise, a
 *     query) fail with 900 and invalidate that capture, in every mode, from
 *     any thread; so does a context synchronisation while any stream of the
 *     context captures;
 *   - "unsafe" calls (allocation, freeing, page-locked allocation, a
 *     synchronise or query of another stream or of an event, a library
 *     unload) fail with 900 and invalidate the captures that forbid them, by
 *     the calling thread's mode (cuThreadExchangeStreamCaptureMode); a
 *     library or module load succeeds but invalidates them all the same;
 *   - work on the legacy stream, even asking its ID or context, while a
 *     blocking stream of its context captures fails with 906 and invalidates
 *     those captures (the legacy stream would wait for them); asking the
 *     legacy stream's capture status then gives 906 and invalidates nothing;
 *   - an event recorded into a capture is 907 to a query or synchronise; a
 *     capturing stream made to wait for an event recorded outside its
 *     capture gives 905; both invalidate the capture.
 * An invalidated capture stays open until cuStreamEndCapture, which gives
 * 901. The nodes of a capture are sim_graph.c's. */
#include "sim_internal.h"

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

CUresult sim_capture_refuse(struct CUstream_st *s, CUresult err)
{
    if (!s->capturing)
        return CUDA_SUCCESS;
    s->capture_invalid = 1;
    return err;
}

/* Blocking streams of c that capture (the per-thread stream is one: it
 * synchronises with the legacy stream); invalidated when invalidate is set.
 * Returns how many. */
static int sim_capture_blocking(struct CUctx_st *c, int invalidate)
{
    int n = 0;
    if (sim.open_captures == 0)
        return 0;
    for (sim_obj_t *o = sim.objects; o; o = o->next_obj) {
        struct CUstream_st *s = (struct CUstream_st *)o;
        if (o->magic == SIM_MAGIC_STREAM && s->capturing && s->own.ctx == c &&
            !(s->flags & CU_STREAM_NON_BLOCKING)) {
            n++;
            if (invalidate)
                s->capture_invalid = 1;
        }
    }
    return n;
}

CUresult sim_capture_legacy(struct CUctx_st *c, const struct CUstream_st *s)
{
    if (s->kind != SIM_STREAM_LEGACY || !sim_capture_blocking(c, 1))
        return CUDA_SUCCESS;
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

CUresult sim_capture_ctx_sync(struct CUctx_st *c)
{
    int hit = 0;
    for (sim_obj_t *o = sim.objects; sim.open_captures && o; o = o->next_obj) {
        struct CUstream_st *s = (struct CUstream_st *)o;
        if (o->magic == SIM_MAGIC_STREAM && s->capturing && s->own.ctx == c) {
            s->capture_invalid = 1;
            hit = 1;
        }
    }
    return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : sim_capture_forbid();
}

/* The open capture with this sequence ID, or NULL. */
static struct CUstream_st *sim_capture_by_id(unsigned long long id)
{
    for (sim_obj_t *o = sim.objects; id && sim.open_captures && o; o = o->next_obj) {
        struct CUstream_st *s = (struct CUstream_st *)o;
        if (o->magic == SIM_MAGIC_STREAM && s->capturing && s->capture_id == id)
            return s;
    }
    return NULL;
}

CUresult sim_capture_event_query(struct CUevent_st *e)
{
    struct CUstream_st *s = sim_capture_by_id(e->capture_id);
    if (!s)
        return sim_capture_forbid();
    s->capture_invalid = 1;
    return CUDA_ERROR_CAPTURED_EVENT;
}

CUresult sim_capture_event_wait(struct CUstream_st *s, const struct CUevent_st *e)
{
    if (!s->capturing || (e->capture_id && e->capture_id == s->capture_id))
        return CUDA_SUCCESS;
    s->capture_invalid = 1;
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
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
    s->capture_id = 0;
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
    struct CUgraph_st *g = sim_graph_new(&s->own);
    SIM_FAIL_IF(!g, CUDA_ERROR_OUT_OF_MEMORY);
    s->capture_graph = g;
    s->capturing = 1;
    s->capture_invalid = 0;
    s->capture_id = ++sim.next_capture_id;
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

/* The stream a status query is about. The legacy stream while a blocking
 * stream of its context captures: 906, nothing invalidated (as the driver's
 * documentation of cuStreamIsCapturing says). */
static CUresult sim_capture_queried(CUstream hs, struct CUstream_st **out)
{
    struct CUctx_st *c;
    CUresult r = sim_stream_special(hs) ? sim_stream_target(hs, &c, out)
                                        : sim_stream_actual(hs, NULL, out);
    if (r == CUDA_SUCCESS && (*out)->kind == SIM_STREAM_LEGACY && sim_capture_blocking(c, 0))
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    return r;
}

static CUstreamCaptureStatus sim_capture_status(const struct CUstream_st *s)
{
    if (!s->capturing)
        return CU_STREAM_CAPTURE_STATUS_NONE;
    return s->capture_invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                              : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

SIM_API CUresult cuStreamIsCapturing(CUstream hs, CUstreamCaptureStatus *status)
{
    SIM_BEGIN(cuStreamIsCapturing);
    SIM_FAIL_IF(!status, CUDA_ERROR_INVALID_VALUE);
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    struct CUstream_st *s;
    SIM_CHECK(sim_capture_queried(hs, &s));
    *status = sim_capture_status(s);
    SIM_END;
}

/* Status, the sequence's ID and its graph; no dependencies are modelled (a
 * capture is one chain of nodes), so a caller asking for them gets none. */
static CUresult sim_capture_info(CUstream hs, CUstreamCaptureStatus *status,
                                 cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                 const CUgraphEdgeData **edges, size_t *ndeps)
{
    SIM_BEGIN(cuStreamGetCaptureInfo);
    SIM_FAIL_IF(!status || (edges && !deps), CUDA_ERROR_INVALID_VALUE);
    struct CUstream_st *s;
    SIM_CHECK(sim_capture_queried(hs, &s));
    *status = sim_capture_status(s);
    int active = *status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id && active)
        *id = s->capture_id;
    if (graph && active)
        *graph = s->capture_graph;
    if (deps && active)
        *deps = NULL;
    if (edges && active)
        *edges = NULL;
    if (ndeps && active)
        *ndeps = 0;
    SIM_END;
}

SIM_API CUresult cuStreamGetCaptureInfo(CUstream hs, CUstreamCaptureStatus *status,
                                        cuuint64_t *id)
{
    return sim_capture_info(hs, status, id, NULL, NULL, NULL, NULL);
}

SIM_API CUresult cuStreamGetCaptureInfo_v2(CUstream hs, CUstreamCaptureStatus *status,
                                           cuuint64_t *id, CUgraph *graph,
                                           const CUgraphNode **deps, size_t *ndeps)
{
    return sim_capture_info(hs, status, id, graph, deps, NULL, ndeps);
}

SIM_API CUresult cuStreamGetCaptureInfo_v3(CUstream hs, CUstreamCaptureStatus *status,
                                           cuuint64_t *id, CUgraph *graph,
                                           const CUgraphNode **deps,
                                           const CUgraphEdgeData **edges, size_t *ndeps)
{
    return sim_capture_info(hs, status, id, graph, deps, edges, ndeps);
}
