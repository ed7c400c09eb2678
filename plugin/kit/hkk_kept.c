/* handlekit kit: the memory blocks a destroyed handle leaves for the next
 * handle in the same context (docs/contexts.md, "What the kit keeps between
 * handles").
 *
 * A handle's device and page-locked host memory would otherwise be freed at
 * every destroy and made again at every create: cuMemFree and cuMemFreeHost
 * wait for a pause in other threads' launches (fact 30), and so do the
 * allocations. Where handles come and go while other threads launch (a swap
 * moves every handle of a plugin to new ones), that wait is most of a
 * create/destroy cycle. So a plugin's release hands its blocks to the kit
 * (hk_kit_keep_block), up to HK_KIT_KEPT_BLOCKS of them, and its next arm in
 * the same context incarnation takes them back (hk_kit_take_block) instead
 * of allocating. The kit alone decides what it keeps and when it goes back:
 * at hk_kit_trim (hk.trim/1, before a host closes the module) and at the
 * module's unload, in their context while it lives in the blocks'
 * incarnation; the memory of a context reset or destroyed since went with it
 * and is only forgotten. */
#include <string.h>

#include "hk_status_text.h"
#include "hkk_internal.h"

typedef struct kept_block {
    unsigned long long ctx_id; /* 0: empty */
    CUcontext ctx;
    int primary; /* ctx is device dev's primary context */
    CUdevice dev;
    hk_kit_block_t blk;
} kept_block_t;

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static kept_block_t kept[HK_KIT_KEPT_BLOCKS]; /* under kept_lock */

/* Retains a trim held for its frees and the driver refused (twice) to take
 * back, per device: given back by the next trim. Under kept_lock. */
static int owed[HK__KIT_DEVICES];

static int block_valid(const hk_kit_block_t *blk)
{
    if (!blk || blk->size == 0)
        return 0;
    if (blk->kind == HK_KIT_BLOCK_DEVICE)
        return blk->dev != 0 && blk->host == NULL;
    return blk->kind == HK_KIT_BLOCK_HOST && blk->host != NULL;
}

int hk_kit_keep_block(const hk_kit_bind_t *b, unsigned long long ctx_id,
                      const hk_kit_block_t *blk)
{
    if (!b || ctx_id == 0 || !block_valid(blk) || atomic_load(&hkk_forked))
        return 0;
    kept_block_t *e = NULL;
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < HK_KIT_KEPT_BLOCKS; i++) {
        kept_block_t *k = &kept[i];
        if (k->ctx_id && k->ctx == b->ctx && k->ctx_id != ctx_id)
            memset(k, 0, sizeof *k); /* an earlier incarnation's: gone with it */
        if (!k->ctx_id && !e)
            e = k;
    }
    if (e) {
        e->ctx_id = ctx_id;
        e->ctx = b->ctx;
        e->primary = b->is_primary;
        e->dev = b->cudev;
        e->blk = *blk;
    }
    pthread_mutex_unlock(&kept_lock);
    return e != NULL;
}

int hk_kit_take_block(unsigned long long ctx_id, hk_kit_block_kind_t kind, size_t size,
                      hk_kit_block_t *out)
{
    if (!out)
        return 0;
    memset(out, 0, sizeof *out);
    if (ctx_id == 0 || atomic_load(&hkk_forked))
        return 0;
    int found = 0;
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < HK_KIT_KEPT_BLOCKS && !found; i++) {
        kept_block_t *k = &kept[i];
        if (k->ctx_id != ctx_id || k->blk.kind != kind || k->blk.size != size)
            continue;
        *out = k->blk;
        memset(k, 0, sizeof *k);
        found = 1;
    }
    pthread_mutex_unlock(&kept_lock);
    return found;
}

unsigned hk_kit_kept_blocks(void)
{
    unsigned n = 0;
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < HK_KIT_KEPT_BLOCKS; i++)
        n += kept[i].ctx_id != 0;
    pthread_mutex_unlock(&kept_lock);
    return n;
}

/* Holds the primary of the group's device for the frees: a retain, taken
 * only while the primary is active (a retain of an inactive one would build
 * a context to free nothing in). Nothing else keeps it alive meanwhile: the
 * kit's kept retain may be given back already (by the trim before this one)
 * while a destroy that kept blocks still holds the last retain, and gives it
 * back whenever it comes to it. The primary may still end between the two
 * questions; the retain then builds a new incarnation, which the ID check
 * tells apart and the give-back ends again. 1: held; 0: inactive, the
 * blocks went with their incarnation; -1: the driver refused (twice), *st
 * says why. */
static int hold_primary(CUdevice dev, hk_status_t *st)
{
    unsigned flags = 0;
    int active = 0;
    CUcontext p = NULL;
    /* "Inactive" asked twice too: taken for gone, the blocks would leak */
    CUresult r = KCU.cuDevicePrimaryCtxGetState(dev, &flags, &active);
    if (r != CUDA_SUCCESS || !active)
        r = KCU.cuDevicePrimaryCtxGetState(dev, &flags, &active);
    if (r != CUDA_SUCCESS) {
        *st = hk_kit_fail_cu(NULL, r, "trim: cuDevicePrimaryCtxGetState of kept memory's context");
        return -1;
    }
    if (!active)
        return 0;
    r = KCU.cuDevicePrimaryCtxRetain(&p, dev);
    if (r != CUDA_SUCCESS)
        r = KCU.cuDevicePrimaryCtxRetain(&p, dev);
    if (r == CUDA_SUCCESS)
        return 1;
    *st = hk_kit_fail_cu(NULL, r, "trim: cuDevicePrimaryCtxRetain of kept memory's context");
    return -1;
}

/* Frees one block, in relaxed capture mode (another thread's capture must
 * neither refuse it nor be invalidated by it), tried twice. */
static CUresult free_block(hk_kit_block_t *blk)
{
    int mode;
    CUresult relaxed = (CUresult)hk_kit_capture_relax(&mode);
    CUresult r;
    if (blk->kind == HK_KIT_BLOCK_DEVICE) {
        r = KCU.cuMemFree(blk->dev);
        if (r != CUDA_SUCCESS)
            r = KCU.cuMemFree(blk->dev);
    } else {
        r = KCU.cuMemFreeHost(blk->host);
        if (r != CUDA_SUCCESS)
            r = KCU.cuMemFreeHost(blk->host);
    }
    if (relaxed == CUDA_SUCCESS)
        hk_kit_capture_restore(mode);
    if (r == CUDA_SUCCESS)
        memset(blk, 0, sizeof *blk);
    return r;
}

/* Frees the group's blocks g[0..n) in their context, which lives in their
 * incarnation and is held; made current for it. What the driver refuses
 * (twice) stays in g. */
static hk_status_t free_in_context(kept_block_t *g, int n)
{
    CUcontext was = NULL;
    hk_status_t st = HK_STATUS_OK;
    CUresult r = KCU.cuCtxPushCurrent(g[0].ctx);
    if (r != CUDA_SUCCESS)
        r = KCU.cuCtxPushCurrent(g[0].ctx);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "trim: cuCtxPushCurrent of kept memory's context");
    for (int i = 0; i < n; i++) {
        int device = g[i].blk.kind == HK_KIT_BLOCK_DEVICE;
        r = free_block(&g[i].blk);
        if (r == CUDA_SUCCESS)
            g[i].ctx_id = 0;
        else if (st == HK_STATUS_OK)
            st = hk_kit_fail_cu(NULL, r, device ? "trim: cuMemFree of kept device memory"
                                                : "trim: cuMemFreeHost of kept host memory");
    }
    r = KCU.cuCtxPopCurrent(&was);
    if (r != CUDA_SUCCESS)
        r = KCU.cuCtxPopCurrent(&was);
    if (r != CUDA_SUCCESS && st == HK_STATUS_OK)
        st = hk_kit_fail_cu(NULL, r, "trim: cuCtxPopCurrent after freeing kept memory");
    return st;
}

/* Puts back what a trim could not free, for a later trim. */
static void keep_again(const kept_block_t *g, int n)
{
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < n; i++) {
        if (!g[i].ctx_id)
            continue;
        for (int j = 0; j < HK_KIT_KEPT_BLOCKS; j++)
            if (!kept[j].ctx_id) {
                kept[j] = g[i];
                break;
            }
    }
    pthread_mutex_unlock(&kept_lock);
}

/* Frees one incarnation's blocks g[0..n) if their context still lives in
 * that incarnation, holding its primary for the check and the frees: were it
 * to end between them, the addresses freed could be a new handle's in the
 * next incarnation. A user or green context cannot be held: the check is all
 * there is, and its owner must not destroy it while a trim may free there
 * (docs/contexts.md). */
static hk_status_t free_group(kept_block_t *g, int n)
{
    unsigned long long now = 0;
    hk_status_t st = HK_STATUS_OK;
    int held = 0;
    if (g[0].primary && g[0].dev >= 0 && g[0].dev < HK__KIT_DEVICES) {
        held = hold_primary(g[0].dev, &st);
        if (held == 0)
            return HK_STATUS_OK; /* inactive: the memory went with its incarnation */
        if (held < 0)
            goto keep;
    }
    /* Asked twice, as destroy asks (an answer the next one contradicts is
     * not taken) */
    CUresult r = KCU.cuCtxGetId(g[0].ctx, &now);
    if (r != CUDA_SUCCESS || now != g[0].ctx_id)
        r = KCU.cuCtxGetId(g[0].ctx, &now);
    if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED || (r == CUDA_SUCCESS && now != g[0].ctx_id)) {
        for (int i = 0; i < n; i++)
            g[i].ctx_id = 0; /* reset or destroyed since: the memory went with it */
    } else if (r != CUDA_SUCCESS) {
        st = hk_kit_fail_cu(NULL, r, "trim: cuCtxGetId of kept memory's context");
    } else {
        st = free_in_context(g, n);
    }
    if (held) {
        /* Given back last: the primary may end here, after the frees */
        r = hk_kit_give_back_primary(g[0].dev);
        if (r != CUDA_SUCCESS) {
            pthread_mutex_lock(&kept_lock);
            owed[g[0].dev]++;
            pthread_mutex_unlock(&kept_lock);
            if (st == HK_STATUS_OK)
                st = hk_kit_fail_cu(NULL, r, "trim: cuDevicePrimaryCtxRelease after freeing kept "
                                    "memory");
        }
    }
keep:
    keep_again(g, n);
    return st;
}

/* Gives back the retains earlier trims could not; what is refused (twice)
 * again stays owed. */
static hk_status_t pay_owed(void)
{
    hk_status_t st = HK_STATUS_OK;
    for (int d = 0; d < HK__KIT_DEVICES; d++) {
        pthread_mutex_lock(&kept_lock);
        int n = owed[d];
        owed[d] = 0;
        pthread_mutex_unlock(&kept_lock);
        for (; n > 0; n--) {
            CUresult r = hk_kit_give_back_primary(d);
            if (r == CUDA_SUCCESS)
                continue;
            pthread_mutex_lock(&kept_lock);
            owed[d] += n;
            pthread_mutex_unlock(&kept_lock);
            if (st == HK_STATUS_OK)
                st = hk_kit_fail_cu(NULL, r, "trim: cuDevicePrimaryCtxRelease of a retain an "
                                    "earlier trim held");
            break;
        }
    }
    return st;
}

hk_status_t hkk_kept_trim(void)
{
    kept_block_t all[HK_KIT_KEPT_BLOCKS], group[HK_KIT_KEPT_BLOCKS];
    pthread_mutex_lock(&kept_lock);
    memcpy(all, kept, sizeof all);
    memset(kept, 0, sizeof kept);
    pthread_mutex_unlock(&kept_lock);
    /* Earlier trims' first: one refused now is owed to the next trim */
    hk_status_t st = pay_owed();
    for (int i = 0; i < HK_KIT_KEPT_BLOCKS; i++) {
        if (!all[i].ctx_id)
            continue;
        /* One incarnation at a time: its blocks freed under one hold */
        int n = 0;
        unsigned long long id = all[i].ctx_id;
        for (int j = i; j < HK_KIT_KEPT_BLOCKS; j++)
            if (all[j].ctx_id == id) {
                group[n++] = all[j];
                all[j].ctx_id = 0;
            }
        hk_status_t s = free_group(group, n);
        if (st == HK_STATUS_OK)
            st = s;
    }
    return st;
}
