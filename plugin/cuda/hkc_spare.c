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
    int primary; /* ctx is device dev's primary context */
    CUdevice dev;
    CUdeviceptr slab; /* 0: none */
    void *word;       /* NULL: none */
    CUdeviceptr word_dev;
} spare_t;

static spare_t spares[HKC_SPARES]; /* under hkc_lock */

/* Devices whose primary a trim holds while it frees there (the kit's own
 * limit for the retain it keeps) */
#define HKC_DEVICES 64

/* Retains a trim held for its frees and the driver refused (twice) to take
 * back, per device: given back by the next trim, as the kit's kept retain
 * is. Under hkc_lock. */
static int owed[HKC_DEVICES];

void hkc_spare_put(CUcontext ctx, unsigned long long ctx_id, int primary, CUdevice dev,
                   CUdeviceptr *slab, void **word, CUdeviceptr word_dev)
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
        e->primary = primary;
        e->dev = dev;
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

/* Holds s's primary context for the frees: a retain, taken only while the
 * primary is active (a retain of an inactive one would build a context to
 * free nothing in). Nothing else keeps it alive meanwhile: the kit's kept
 * retain may be given back already (by the trim before this one) while a
 * destroy that found it kept still holds the last retain, and gives it back
 * whenever it comes to it. The primary may still end between the two
 * questions; the retain then builds a new incarnation, which the ID check
 * tells apart and the give-back ends again. 1: held; 0: inactive, s's memory
 * went with its incarnation; -1: the driver refused (twice), *st says why. */
static int hold_primary(const spare_t *s, hk_status_t *st)
{
    unsigned flags = 0;
    int active = 0;
    CUcontext p = NULL;
    /* "Inactive" asked twice too: taken for gone, the set would leak */
    CUresult r = hkc_cu.cuDevicePrimaryCtxGetState(s->dev, &flags, &active);
    if (r != CUDA_SUCCESS || !active)
        r = hkc_cu.cuDevicePrimaryCtxGetState(s->dev, &flags, &active);
    if (r != CUDA_SUCCESS) {
        *st = hkc_fail_cu(NULL, r, "trim: cuDevicePrimaryCtxGetState of kept memory's context");
        return -1;
    }
    if (!active)
        return 0;
    r = hkc_cu.cuDevicePrimaryCtxRetain(&p, s->dev);
    if (r != CUDA_SUCCESS)
        r = hkc_cu.cuDevicePrimaryCtxRetain(&p, s->dev);
    if (r == CUDA_SUCCESS)
        return 1;
    *st = hkc_fail_cu(NULL, r, "trim: cuDevicePrimaryCtxRetain of kept memory's context");
    return -1;
}

/* Frees s's blocks in its context, which lives in s's incarnation and is
 * held; made current for it. What the driver refuses (twice) stays in s. */
static hk_status_t free_in_context(spare_t *s)
{
    CUcontext was = NULL;
    hk_status_t st = HK_STATUS_OK;
    CUresult r = hkc_cu.cuCtxPushCurrent(s->ctx);
    if (r != CUDA_SUCCESS)
        r = hkc_cu.cuCtxPushCurrent(s->ctx);
    if (r != CUDA_SUCCESS)
        return hkc_fail_cu(NULL, r, "trim: cuCtxPushCurrent of kept memory's context");
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
    return st;
}

/* Frees one set in its context if that context still lives in the set's
 * incarnation, holding a primary for the check and the frees: were it to end
 * between them, the addresses freed could be a new handle's in the next
 * incarnation. A user or green context cannot be held: the check is all
 * there is, and its owner must not destroy it while a trim may free there
 * (docs/contexts.md). What the driver refuses (twice) is kept again, for a
 * later trim. */
static hk_status_t spare_free(spare_t *s)
{
    unsigned long long now = 0;
    hk_status_t st = HK_STATUS_OK;
    int held = 0;
    if (s->primary && s->dev >= 0 && s->dev < HKC_DEVICES) {
        held = hold_primary(s, &st);
        if (held == 0)
            return HK_STATUS_OK; /* inactive: its memory went with its incarnation */
        if (held < 0)
            goto keep;
    }
    /* Asked twice, as destroy asks (an answer the next one contradicts is
     * not taken) */
    CUresult r = hkc_cu.cuCtxGetId(s->ctx, &now);
    if (r != CUDA_SUCCESS || now != s->ctx_id)
        r = hkc_cu.cuCtxGetId(s->ctx, &now);
    if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED || (r == CUDA_SUCCESS && now != s->ctx_id)) {
        s->slab = 0; /* reset or destroyed since: its memory went with it */
        s->word = NULL;
    } else if (r != CUDA_SUCCESS) {
        st = hkc_fail_cu(NULL, r, "trim: cuCtxGetId of kept memory's context");
    } else {
        st = free_in_context(s);
    }
    if (held) {
        /* Given back last: the primary may end here, after the frees */
        r = hk_kit_give_back_primary(s->dev);
        if (r != CUDA_SUCCESS) {
            pthread_mutex_lock(&hkc_lock);
            owed[s->dev]++;
            pthread_mutex_unlock(&hkc_lock);
            if (st == HK_STATUS_OK)
                st = hkc_fail_cu(NULL, r, "trim: cuDevicePrimaryCtxRelease after freeing kept "
                                 "memory");
        }
    }
keep:
    if (s->slab || s->word)
        hkc_spare_put(s->ctx, s->ctx_id, s->primary, s->dev, &s->slab, &s->word, s->word_dev);
    return st;
}

/* Gives back the retains earlier trims could not; what is refused (twice)
 * again stays owed. */
static hk_status_t pay_owed(void)
{
    hk_status_t st = HK_STATUS_OK;
    for (int d = 0; d < HKC_DEVICES; d++) {
        pthread_mutex_lock(&hkc_lock);
        int n = owed[d];
        owed[d] = 0;
        pthread_mutex_unlock(&hkc_lock);
        for (; n > 0; n--) {
            CUresult r = hk_kit_give_back_primary(d);
            if (r == CUDA_SUCCESS)
                continue;
            pthread_mutex_lock(&hkc_lock);
            owed[d] += n;
            pthread_mutex_unlock(&hkc_lock);
            if (st == HK_STATUS_OK)
                st = hkc_fail_cu(NULL, r, "trim: cuDevicePrimaryCtxRelease of a retain an "
                                 "earlier trim held");
            break;
        }
    }
    return st;
}

hk_status_t hkc_spares_trim(void)
{
    spare_t all[HKC_SPARES];
    pthread_mutex_lock(&hkc_lock);
    memcpy(all, spares, sizeof all);
    memset(spares, 0, sizeof spares);
    pthread_mutex_unlock(&hkc_lock);
    /* Earlier trims' first: one refused now is owed to the next trim */
    hk_status_t st = pay_owed();
    for (int i = 0; i < HKC_SPARES; i++) {
        hk_status_t s = all[i].ctx_id ? spare_free(&all[i]) : HK_STATUS_OK;
        if (st == HK_STATUS_OK)
            st = s;
    }
    return st;
}

hk_status_t hkc_trim(void)
{
    hk_status_t st = hkc_spares_trim();
    hk_status_t lst = hkc_kernels_trim();
    return st != HK_STATUS_OK ? st : lst;
}
