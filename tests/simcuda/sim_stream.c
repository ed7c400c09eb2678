/* simcuda streams and events. A stream carries its owner (docs/contexts.md facts 5,
 * 9), its ID, its capture state and, through sim_exec.c, the order of the work
 * still pending on it; synchronising runs that work. The special streams are
 * objects of their own: a context's legacy stream, and each thread's
 * per-thread stream of each context (fact 20), which a green context does not
 * have (fact 22). */
#include "sim_internal.h"

int sim_stream_special(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

static int sim_stream_live(const struct CUstream_st *s)
{
    return s->hdr.magic == SIM_MAGIC_STREAM && s->alive && sim_owner_valid(&s->own);
}

static struct CUstream_st *sim_stream_new(struct CUctx_st *c, enum sim_stream_kind kind,
                                          unsigned flags)
{
    struct CUstream_st *s = sim_obj_new(SIM_MAGIC_STREAM, sizeof *s);
    if (!s)
        return NULL;
    s->own = sim_owner_of(c);
    s->alive = 1;
    s->flags = flags;
    s->kind = kind;
    s->id = ++sim.next_stream_id;
    return s;
}

/* The special stream s of context c (alive), made on first use; a context
 * that comes back with a new ID (a re-activated primary) gets new ones. */
CUresult sim_stream_actual(CUstream s, struct CUctx_st *c, struct CUstream_st **out)
{
    *out = NULL;
    if (!sim_stream_special(s)) {
        if (!sim_stream_live(s))
            return CUDA_ERROR_INVALID_HANDLE;
        *out = s;
        return CUDA_SUCCESS;
    }
    if (s == CU_STREAM_PER_THREAD) {
        if (c->kind == SIM_CTX_GREEN)
            return CUDA_ERROR_INVALID_HANDLE; /* fact 22 */
        struct CUstream_st *p = sim_tls.ptds;
        while (p && !(p->own.ctx == c && p->own.ctx_id == c->id))
            p = p->next_ptds;
        if (!p) {
            p = sim_stream_new(c, SIM_STREAM_PER_THREAD, 0);
            if (!p)
                return CUDA_ERROR_OUT_OF_MEMORY;
            p->next_ptds = sim_tls.ptds;
            sim_tls.ptds = p;
        }
        *out = p;
        return CUDA_SUCCESS;
    }
    if (!c->legacy || c->legacy->own.ctx_id != c->id) {
        c->legacy = sim_stream_new(c, SIM_STREAM_LEGACY, 0);
        if (!c->legacy)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = c->legacy;
    return CUDA_SUCCESS;
}

CUresult sim_stream_resolve(CUstream s, struct CUctx_st *cur, struct CUstream_st **out)
{
    *out = NULL;
    if (sim_stream_special(s))
        return sim_stream_actual(s, cur, out);
    if (!sim_stream_live(s) || s->own.ctx != cur)
        return CUDA_ERROR_INVALID_HANDLE;
    *out = s;
    return CUDA_SUCCESS;
}

/* Fact 5 as the real driver behaves: work submitted to a stream runs in the
 * stream's context, whatever is current (a stream of another device's context
 * sends it to that device). Only a usable current context is required. */
CUresult sim_stream_target(CUstream s, struct CUctx_st **ctx, struct CUstream_st **out)
{
    *out = NULL;
    CUresult r = sim_current(ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_stream_special(s))
        return sim_stream_actual(s, *ctx, out);
    if (!sim_stream_live(s))
        return CUDA_ERROR_INVALID_HANDLE;
    *ctx = s->own.ctx;
    *out = s;
    return CUDA_SUCCESS;
}

static CUresult sim_stream_create(CUstream *out, unsigned flags)
{
    SIM_BEGIN(cuStreamCreate);
    SIM_FAIL_IF(!out || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING), CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    SIM_CHECK(sim_current(&c));
    /* Fact 25: under a flood of launches into c, making a stream there
     * waits for a pause (only when the quiet-load model is on); c may have
     * died meanwhile. */
    sim_quiet_wait(c);
    SIM_CHECK(sim_current(&c));
    struct CUstream_st *s = sim_stream_new(c, SIM_STREAM_USER, flags);
    SIM_FAIL_IF(!s, CUDA_ERROR_OUT_OF_MEMORY);
    *out = s;
    SIM_END;
}

SIM_API CUresult cuStreamCreate(CUstream *out, unsigned int flags)
{
    return sim_stream_create(out, flags);
}

SIM_API CUresult cuStreamCreateWithPriority(CUstream *out, unsigned int flags, int priority)
{
    (void)priority; /* priorities are not modelled */
    return sim_stream_create(out, flags);
}

static CUresult sim_stream_destroy(CUstream s)
{
    SIM_BEGIN(cuStreamDestroy);
    SIM_FAIL_IF(sim_stream_special(s) || !sim_stream_live(s), CUDA_ERROR_INVALID_HANDLE);
    /* Fact 30: waits for a pause in a service in its context (quiet model
     * only); destroyed meanwhile by another thread: 400. */
    sim_quiet_wait(s->own.ctx);
    SIM_FAIL_IF(!sim_stream_live(s), CUDA_ERROR_INVALID_HANDLE);
    if (s->capturing) {
        sim.open_captures--;
        s->capturing = 0;
    }
    s->alive = 0;
    SIM_END;
}

SIM_API CUresult cuStreamDestroy(CUstream s)
{
    return sim_stream_destroy(s);
}

SIM_API CUresult cuStreamDestroy_v2(CUstream s)
{
    return sim_stream_destroy(s);
}

/* A stream handle to check for synchronise/query: special ones need a usable
 * current context; a capturing stream cannot be synchronised or queried (its
 * capture is invalidated), nor the legacy stream while a blocking stream of
 * its context captures; and any other is an unsafe call while a capture
 * forbids those (fact 26). (The entry protocol has already run every pending
 * block.) */
static CUresult sim_stream_check(CUstream s, struct CUstream_st **out)
{
    struct CUctx_st *c = NULL;
    struct CUstream_st *st;
    CUresult r = sim_stream_special(s) ? sim_stream_target(s, &c, &st)
                                       : sim_stream_actual(s, NULL, &st);
    if (r == CUDA_SUCCESS)
        r = sim_capture_refuse(st, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    if (r == CUDA_SUCCESS && c)
        r = sim_capture_legacy(c, st);
    if (r == CUDA_SUCCESS && out)
        *out = st;
    return r == CUDA_SUCCESS ? sim_capture_forbid() : r;
}

/* Waits for the stream's launches held running (simcuda_hold_launches), with
 * the simulation's lock released meanwhile, as cuCtxSynchronize does for the
 * context's; the stream may die meanwhile. */
SIM_API CUresult cuStreamSynchronize(CUstream s)
{
    SIM_BEGIN(cuStreamSynchronize);
    struct CUstream_st *st = NULL;
    SIM_CHECK(sim_stream_check(s, &st));
    while (st->held && st->alive) {
        sim.sync_waiting++;
        pthread_cond_wait(&sim.held_done, &sim.lock);
        sim.sync_waiting--;
    }
    SIM_END;
}

SIM_API CUresult cuStreamQuery(CUstream s)
{
    SIM_BEGIN(cuStreamQuery);
    SIM_CHECK(sim_stream_check(s, NULL));
    SIM_END;
}

static CUresult sim_stream_get_ctx(CUstream s, CUcontext *pctx, CUgreenCtx *pgreen)
{
    SIM_BEGIN(cuStreamGetCtx);
    SIM_FAIL_IF(!pctx, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    if (sim_stream_special(s)) {
        /* fact 9: the special streams name the current context; a green
         * context has no per-thread stream (fact 22, as measured); asking
         * about the legacy stream is using it (fact 26) */
        struct CUstream_st *st;
        SIM_CHECK(sim_current(&c));
        SIM_FAIL_IF(s == CU_STREAM_PER_THREAD && c->kind == SIM_CTX_GREEN,
                    CUDA_ERROR_INVALID_HANDLE);
        if (s != CU_STREAM_PER_THREAD) {
            SIM_CHECK(sim_stream_actual(s, c, &st));
            SIM_CHECK(sim_capture_legacy(c, st));
        }
    } else {
        SIM_FAIL_IF(!sim_stream_live(s), CUDA_ERROR_INVALID_HANDLE);
        c = s->own.ctx;
    }
    *pctx = c;
    if (pgreen)
        *pgreen = c->kind == SIM_CTX_GREEN ? c->green : NULL;
    SIM_END;
}

SIM_API CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx)
{
    return sim_stream_get_ctx(s, pctx, NULL);
}

SIM_API CUresult cuStreamGetCtx_v2(CUstream s, CUcontext *pctx, CUgreenCtx *pgreen)
{
    return sim_stream_get_ctx(s, pctx, pgreen);
}

static int sim_event_live(const struct CUevent_st *e)
{
    return e && e->hdr.magic == SIM_MAGIC_EVENT && e->alive && sim_owner_valid(&e->own);
}

SIM_API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    SIM_BEGIN(cuStreamWaitEvent);
    (void)flags;
    struct CUctx_st *c;
    struct CUstream_st *st;
    SIM_CHECK(sim_current(&c));
    SIM_CHECK(sim_stream_resolve(s, c, &st));
    SIM_FAIL_IF(!sim_event_live(e), CUDA_ERROR_INVALID_HANDLE);
    SIM_CHECK(sim_capture_event_wait(st, e));
    SIM_END;
}

SIM_API CUresult cuEventCreate(CUevent *out, unsigned int flags)
{
    SIM_BEGIN(cuEventCreate);
    SIM_FAIL_IF(!out, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    SIM_CHECK(sim_current(&c));
    sim_quiet_wait(c); /* fact 30 (quiet model only); c may have died meanwhile */
    SIM_CHECK(sim_current(&c));
    struct CUevent_st *e = sim_obj_new(SIM_MAGIC_EVENT, sizeof *e);
    SIM_FAIL_IF(!e, CUDA_ERROR_OUT_OF_MEMORY);
    e->own = sim_owner_of(c);
    e->alive = 1;
    e->flags = flags;
    *out = e;
    SIM_END;
}

/* The event and the stream must share a context, as on the real driver. */
SIM_API CUresult cuEventRecord(CUevent e, CUstream s)
{
    SIM_BEGIN(cuEventRecord);
    SIM_FAIL_IF(!sim_event_live(e), CUDA_ERROR_INVALID_HANDLE);
    struct CUstream_st *st;
    if (sim_stream_special(s)) {
        struct CUctx_st *c;
        SIM_CHECK(sim_current(&c));
        SIM_FAIL_IF(c != e->own.ctx, CUDA_ERROR_INVALID_HANDLE);
    }
    SIM_CHECK(sim_stream_resolve(s, e->own.ctx, &st));
    e->recorded = 1;
    e->when_ms = sim_now_ms();
    e->capture_id = st->capturing ? st->capture_id : 0;
    SIM_END;
}

SIM_API CUresult cuEventSynchronize(CUevent e)
{
    SIM_BEGIN(cuEventSynchronize);
    SIM_FAIL_IF(!sim_event_live(e), CUDA_ERROR_INVALID_HANDLE);
    SIM_CHECK(sim_capture_event_query(e));
    SIM_END;
}

SIM_API CUresult cuEventQuery(CUevent e)
{
    SIM_BEGIN(cuEventQuery);
    SIM_FAIL_IF(!sim_event_live(e), CUDA_ERROR_INVALID_HANDLE);
    SIM_CHECK(sim_capture_event_query(e));
    SIM_END;
}

static CUresult sim_event_elapsed(float *ms, CUevent a, CUevent b)
{
    SIM_BEGIN(cuEventElapsedTime);
    SIM_FAIL_IF(!ms, CUDA_ERROR_INVALID_VALUE);
    SIM_FAIL_IF(!sim_event_live(a) || !sim_event_live(b), CUDA_ERROR_INVALID_HANDLE);
    SIM_FAIL_IF((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING, CUDA_ERROR_INVALID_HANDLE);
    SIM_FAIL_IF(!a->recorded || !b->recorded, CUDA_ERROR_INVALID_HANDLE);
    *ms = (float)(b->when_ms - a->when_ms);
    SIM_END;
}

SIM_API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    return sim_event_elapsed(ms, a, b);
}

SIM_API CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b)
{
    return sim_event_elapsed(ms, a, b);
}

static CUresult sim_event_destroy(CUevent e)
{
    SIM_BEGIN(cuEventDestroy);
    SIM_FAIL_IF(!e || e->hdr.magic != SIM_MAGIC_EVENT || !e->alive, CUDA_ERROR_INVALID_HANDLE);
    e->alive = 0;
    SIM_END;
}

SIM_API CUresult cuEventDestroy(CUevent e)
{
    return sim_event_destroy(e);
}

SIM_API CUresult cuEventDestroy_v2(CUevent e)
{
    return sim_event_destroy(e);
}

/* The ID of the stream s names for the calling thread: the per-thread stream
 * has one ID per thread (fact 20). A capturing stream's ID is refused, and
 * its capture invalidated, in every capture mode (fact 26). */
SIM_API CUresult cuStreamGetId(CUstream s, unsigned long long *id)
{
    SIM_BEGIN(cuStreamGetId);
    SIM_FAIL_IF(!id, CUDA_ERROR_INVALID_VALUE);
    struct CUctx_st *c;
    struct CUstream_st *st;
    if (sim_stream_special(s))
        SIM_CHECK(sim_stream_target(s, &c, &st));
    else
        SIM_CHECK(sim_stream_actual(s, NULL, &st));
    SIM_CHECK(sim_capture_refuse(st, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED));
    if (sim_stream_special(s))
        SIM_CHECK(sim_capture_legacy(c, st));
    *id = st->id;
    SIM_END;
}
