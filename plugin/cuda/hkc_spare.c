/* hk-cuda: what a destroyed handle leaves for the next create in the same
 * context (docs/contexts.md, "What the kit keeps between handles").
 *
 * A create makes a slab of reduction workspaces (cuMemAlloc) and the first
 * host-mode dot or nrm2 a page-locked result word (cuMemHostAlloc); destroy
 * freed both (cuMemFreeAsync, cuMemFreeHost). Where handles come and go in a
 * process that keeps no handle between them, that was most of a
 * create/destroy cycle, and cuMemFreeHost waits for a pause in other
 * threads' launches (fact 30). So a destroy, once the handle's work is done,
 * leaves its first slab and its word here, one set per context incarnation
 * (HKC_SPARES sets in all), and the next arm in that incarnation takes them.
 * A trim (hk_kit_trim) frees them in their context while it lives in that
 * incarnation; the memory of a context reset or destroyed since went with it
 * and is only forgotten. */
#include <string.h>

#include "hkc_internal.h"

#define HKC_SPARES 8

typedef struct spare {
    unsigned long long ctx_id; /* 0: empty */
    CUcontext ctx;
    CUdeviceptr slab; /* 0: none */
    void *word;       /* NULL: none */
    CUdeviceptr word_dev;
} spare_t;

static spare_t spares[HKC_SPARES]; /* under hkc_lock */

void hkc_spare_put(CUcontext ctx, unsigned long long ctx_id, CUdeviceptr *slab, void **word,
                   CUdeviceptr word_dev)
{
    spare_t *e = NULL;
    pthread_mutex_lock(&hkc_lock);
    for (int i = 0; i < HKC_SPARES; i++) {
        spare_t *s = &spares[i];
        if (s->ctx_id && s->ctx == ctx && s->ctx_id != ctx_id)
            memset(s, 0, sizeof *s); /* an earlier incarnation's: gone with it */
        if (s->ctx_id == ctx_id)
            e = s;
        else if (!s->ctx_id && !e)
            e = s;
    }
    if (e) {
        e->ctx_id = ctx_id;
        e->ctx = ctx;
        if (*slab && !e->slab) {
            e->slab = *slab;
            *slab = 0;
        }
        if (*word && !e->word) {
            e->word = *word;
            e->word_dev = word_dev;
            *word = NULL;
        }
    }
    pthread_mutex_unlock(&hkc_lock);
}

void hkc_spare_take(unsigned long long ctx_id, CUdeviceptr *slab, void **word,
                    CUdeviceptr *word_dev)
{
    *slab = 0;
    *word = NULL;
    *word_dev = 0;
    pthread_mutex_lock(&hkc_lock);
    for (int i = 0; i < HKC_SPARES; i++) {
        spare_t *s = &spares[i];
        if (s->ctx_id != ctx_id)
            continue;
        *slab = s->slab;
        *word = s->word;
        *word_dev = s->word_dev;
        memset(s, 0, sizeof *s);
        break;
    }
    pthread_mutex_unlock(&hkc_lock);
}

/* Frees one set in its context, made current for it, if that context still
 * lives in the set's incarnation. What the driver refuses (twice) is kept
 * again, for a later trim. */
static hk_status_t spare_free(spare_t *s)
{
    unsigned long long now = 0;
    CUcontext was = NULL;
    hk_status_t st = HK_STATUS_OK;
    /* Asked twice, as destroy asks (an answer the next one contradicts is
     * not taken) */
    CUresult r = hkc_cu.cuCtxGetId(s->ctx, &now);
    if (r != CUDA_SUCCESS || now != s->ctx_id)
        r = hkc_cu.cuCtxGetId(s->ctx, &now);
    if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED || (r == CUDA_SUCCESS && now != s->ctx_id))
        return HK_STATUS_OK; /* reset or destroyed since: its memory went with it */
    if (r != CUDA_SUCCESS) {
        st = hkc_fail_cu(NULL, r, "trim: cuCtxGetId of kept memory's context");
        goto keep;
    }
    r = hkc_cu.cuCtxPushCurrent(s->ctx);
    if (r != CUDA_SUCCESS)
        r = hkc_cu.cuCtxPushCurrent(s->ctx);
    if (r != CUDA_SUCCESS) {
        st = hkc_fail_cu(NULL, r, "trim: cuCtxPushCurrent of kept memory's context");
        goto keep;
    }
    if (s->slab) {
        r = hkc_relaxed_free(s->slab);
        if (r != CUDA_SUCCESS)
            r = hkc_relaxed_free(s->slab);
        if (r == CUDA_SUCCESS)
            s->slab = 0;
        else
            st = hkc_fail_cu(NULL, r, "trim: cuMemFree of kept reduction workspaces");
    }
    if (s->word) {
        r = hkc_give_back_host(s->word);
        if (r == CUDA_SUCCESS)
            s->word = NULL;
        else if (st == HK_STATUS_OK)
            st = hkc_fail_cu(NULL, r, "trim: cuMemFreeHost of a kept result word");
    }
    r = hkc_cu.cuCtxPopCurrent(&was);
    if (r != CUDA_SUCCESS)
        r = hkc_cu.cuCtxPopCurrent(&was);
    if (r != CUDA_SUCCESS && st == HK_STATUS_OK)
        st = hkc_fail_cu(NULL, r, "trim: cuCtxPopCurrent after freeing kept memory");
keep:
    if (s->slab || s->word)
        hkc_spare_put(s->ctx, s->ctx_id, &s->slab, &s->word, s->word_dev);
    return st;
}

hk_status_t hkc_spares_trim(void)
{
    spare_t all[HKC_SPARES];
    pthread_mutex_lock(&hkc_lock);
    memcpy(all, spares, sizeof all);
    memset(spares, 0, sizeof spares);
    pthread_mutex_unlock(&hkc_lock);
    hk_status_t st = HK_STATUS_OK;
    for (int i = 0; i < HKC_SPARES; i++) {
        hk_status_t s = all[i].ctx_id ? spare_free(&all[i]) : HK_STATUS_OK;
        if (st == HK_STATUS_OK)
            st = s;
    }
    return st;
}
