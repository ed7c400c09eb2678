/* handlekit kit: the lines of the debug trace (docs/trace.md) that need more
 * than one format string: which driver file was opened, which context a
 * handle was bound to and why, what its destroy gave back, a re-arm, a
 * refusal with the handle's message.
 *
 * Every function here is cold and only reached from a branch taken when
 * tracing is on (hk__tracing), so the kit's calls pay nothing for it. The
 * driver calls made here to describe a decision (the driver's version, the
 * device count, whether a context is green) are made only while tracing, and
 * never change what the kit decides. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_status_text.h"
#include "hkk_internal.h"

#define COLD __attribute__((cold, noinline))

/* cuStreamGetCtx at 12050 (its _v2, which names a green context), taken only
 * while tracing: the kit itself must work with drivers that lack it. */
static _Atomic(PFN_cuStreamGetCtx_v12050) green_query;

void hk_kit_trace_name(const char *name)
{
    hk__trace_set_module(name);
}

/* What the handle is to its user: the user pointer given to hk_kit_bind (for
 * hk-cuda, the hk_handle_t the caller holds), else the binding. */
static const void *who(const hk_kit_bind_t *b)
{
    return b->user ? b->user : (const void *)b;
}

/* b's message, copied under its lock (hk_kit_last_error would overwrite the
 * calling thread's buffer, which its caller may still hold). */
static void message_of(hk_kit_bind_t *b, char *buf, size_t n)
{
    pthread_mutex_lock(&b->errlock);
    snprintf(buf, n, "%s", b->err);
    pthread_mutex_unlock(&b->errlock);
}

COLD void hkk_trace_driver(hk_status_t st, const char *path, void *lib)
{
    static atomic_int told_open;
    if (!hk__trace_enabled(HK__TRACE_DECISIONS))
        return;
    if (st != HK_STATUS_OK) {
        hk__trace_emit(HK__TRACE_DECISIONS, "driver", "not opened: %s: %s", hk_status_name(st),
                       hk_kit_last_error(NULL));
        return;
    }
    if (!lib || atomic_exchange(&told_open, 1))
        return; /* already said, by the thread that opened it */
    const char *named = secure_getenv("HK_CUDA_DRIVER");
    struct link_map *map = NULL;
    const char *file = path;
    if (!(named && *named) && dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name[0])
        file = map->l_name; /* where the dynamic loader found libcuda.so.1 */
    int version = 0, count = -1;
    if (KCU.cuDriverGetVersion(&version) != CUDA_SUCCESS)
        version = 0;
    if (KCU.cuDeviceGetCount(&count) != CUDA_SUCCESS)
        count = -1;
    hk__trace_emit(HK__TRACE_DECISIONS, "driver",
                   "opened %s (%s), CUDA %d.%d, %d device%s", file,
                   named && *named ? "named by HK_CUDA_DRIVER"
                                   : "libcuda.so.1, found by the dynamic loader",
                   version / 1000, (version % 1000) / 10, count, count == 1 ? "" : "s");
    PFN_cuGetProcAddress_v12000 getproc =
        (PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2");
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    if (getproc && getproc("cuStreamGetCtx", &fn, 12050, CU_GET_PROC_ADDRESS_DEFAULT, &q)
                       == CUDA_SUCCESS && fn)
        atomic_store(&green_query, (PFN_cuStreamGetCtx_v12050)fn);
}

/* 1 when the current context (b's) is a green context's, 0 when not, -1 when
 * the driver cannot say. */
static int current_is_green(void)
{
    PFN_cuStreamGetCtx_v12050 q = atomic_load(&green_query);
    CUcontext c = NULL;
    CUgreenCtx g = NULL;
    if (!q || q(CU_STREAM_LEGACY, &c, &g) != CUDA_SUCCESS)
        return -1;
    return g != NULL;
}

COLD void hkk_trace_bound(const hk_kit_bind_t *b, const char *why)
{
    if (!hk__trace_enabled(HK__TRACE_DECISIONS))
        return;
    unsigned long long id = hkk_context_id(b);
    if (b->is_primary) {
        hk__trace_emit(HK__TRACE_DECISIONS, "ctx",
                       "handle %p bound to the primary context of device %d (%p, context id "
                       "%llu; retained; %s)", who(b), b->device, (void *)b->ctx, id, why);
        return;
    }
    /* Bound to what is current, and still current: the legacy stream names it. */
    int green = current_is_green();
    hk__trace_emit(HK__TRACE_DECISIONS, "ctx",
                   "handle %p bound to %s %p of device %d (context id %llu; not retained: %s)",
                   who(b), green == 1 ? "a green context" : green == 0
                                        ? "the current user context"
                                        : "the current user or green context",
                   (void *)b->ctx, b->device, id, why);
}

COLD void hkk_trace_refused(hk_kit_bind_t *b, hk_status_t st)
{
    char msg[HK__KIT_MSG_LEN];
    if (!hk__trace_enabled(HK__TRACE_DECISIONS))
        return;
    message_of(b, msg, sizeof msg);
    hk__trace_emit(HK__TRACE_DECISIONS, "ctx", "handle %p (device %d): refused %s: %s", who(b),
                   b->device, hk_status_name(st), msg);
}

COLD void hkk_trace_switch(const hk_kit_bind_t *b, CUcontext prev, int pushed, int r)
{
    char was[64];
    if (prev)
        snprintf(was, sizeof was, "context %p", (void *)prev);
    else
        snprintf(was, sizeof was, "nothing current");
    if (pushed)
        hk__trace_emit(HK__TRACE_CALLS, "call", "handle %p (device %d): the caller had %s: "
                       "pushed its context %p", who(b), b->device, was, (void *)b->ctx);
    else if (r == CUDA_SUCCESS && prev)
        hk__trace_emit(HK__TRACE_CALLS, "call", "handle %p (device %d): popped its context: "
                       "the caller's %s is current again", who(b), b->device, was);
    else if (r == CUDA_SUCCESS)
        hk__trace_emit(HK__TRACE_CALLS, "call", "handle %p (device %d): popped its context: "
                       "nothing is current again, as before the call", who(b), b->device);
    else
        hk__trace_emit(HK__TRACE_DECISIONS, "call", "handle %p (device %d): restore FAILED: "
                       "cuCtxPopCurrent refused twice (%d); its context %p is still current "
                       "where the caller had %s", who(b), b->device, r, (void *)b->ctx, was);
}

COLD void hkk_trace_rearmed(const hk_kit_bind_t *b, unsigned long long old_id)
{
    hk__trace_emit(HK__TRACE_DECISIONS, "ctx",
                   "handle %p: the primary context of device %d was reset (context id %llu "
                   "gone); re-armed in context id %llu", who(b), b->device, old_id,
                   hkk_context_id(b));
}

COLD void hkk_trace_unbound(hk_kit_bind_t *b, int released, int kept, int freed, int gone,
                            hk_status_t st)
{
    char msg[HK__KIT_MSG_LEN] = "";
    if (!hk__trace_enabled(HK__TRACE_DECISIONS))
        return;
    if (st != HK_STATUS_OK)
        message_of(b, msg, sizeof msg);
    char held[128];
    if (b->is_primary && kept)
        snprintf(held, sizeof held, "its retain of the primary context of device %d kept by the "
                 "kit (%d more given back)", b->device, released);
    else if (b->is_primary)
        snprintf(held, sizeof held, "the primary context of device %d released (%d retain%s "
                 "given back)", b->device, released, released == 1 ? "" : "s");
    else
        snprintf(held, sizeof held, "its context (device %d) is not the handle's to release",
                 b->device);
    hk__trace_emit(HK__TRACE_DECISIONS, "ctx", "handle %p destroyed: %s; %s%s%s%s%s", who(b),
                   held,
                   freed ? "what it made there was freed"
                   : gone ? (b->is_primary ? "the primary was reset: what it made went with it"
                                           : "its context was destroyed: nothing left to free")
                          : "nothing freed",
                   st == HK_STATUS_OK ? "" : "; first failure ",
                   st == HK_STATUS_OK ? "" : hk_status_name(st), msg[0] ? ": " : "", msg);
}
