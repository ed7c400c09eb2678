/* hk-cuda: what a handle makes in its context, given to the kit as its arm
 * callbacks (hk_kit_ops_t): the kernels' functions and the first slab of
 * reduction workspaces, made at create and again after a reset of the
 * handle's primary context; freed by destroy. Also host pointer mode's
 * result word. The context rules themselves are the kit's. */
#include <stdatomic.h>
#include <stdlib.h>

#include "hkc_internal.h"

/* Set once an arm of this module ran: the first create of a process is the
 * one that pays for loading the code, and leaves host mode's word to the
 * handle's first host-mode call (hkc_result_slot); later arms make it. */
static atomic_int armed_before;

/* The arm's first slab, and host mode's word, from what destroyed handles
 * left with the kit in this incarnation (hk_kit_take_block), else made anew:
 * the slab always, the word for every arm after this module's first. A first
 * host-mode call would otherwise allocate it, and cuMemHostAlloc waits for a
 * pause in other threads' launches (fact 30): on an H200, 20 ms for the
 * first dot of each handle a swap had just made under a running service;
 * made here, in a swap it is made in the held prepare step. Making it in the
 * first create too cost that create 1.6 ms (the process's first page-locked
 * allocation). A word of an earlier incarnation the handle may hold died
 * with it. */
static hk_status_t take_kept(hk_handle_t *h, hkc_arm_t *a, hk_handle_t *err_to)
{
    hk_kit_block_t slab, word;
    hk_kit_take_block(a->base.ctx_id, HK_KIT_BLOCK_DEVICE, HKC_SLAB_BYTES, &slab);
    hk_kit_take_block(a->base.ctx_id, HK_KIT_BLOCK_HOST, HKC_WORD_BYTES, &word);
    pthread_mutex_lock(&h->lock);
    if (word.host) {
        h->slot = word.host;
        h->slot_dev = (CUdeviceptr)word.dev;
        h->slot_ctx = a->base.ctx_id;
    } else if (atomic_exchange(&armed_before, 1)) {
        /* optional (refused: the result is copied from ws), in relaxed
         * capture mode as every allocation: a create may come during
         * another thread's capture */
        int mode;
        CUdeviceptr unused;
        if (hkc_relax(&mode) == CUDA_SUCCESS) {
            (void)hkc_result_slot(h, a, &unused);
            hkc_relaxed_end(mode);
        }
    }
    pthread_mutex_unlock(&h->lock);
    if (slab.dev && hkc_ws_adopt(a, (CUdeviceptr)slab.dev) == 0)
        return HK_STATUS_OK;
    if (slab.dev) /* no host memory for its record: the slab goes back */
        (void)hkc_relaxed_free((CUdeviceptr)slab.dev);
    return hkc_ws_reserve(a, err_to);
}

/* Takes the functions for the handle's context, which the kit has made
 * current, and the memory of its first reduction workspaces. The workspaces
 * are handed to streams at the first dot or nrm2 there (hkc_ws_get), cleared
 * on that stream: create touches no stream, which a green context's
 * per-thread stream would refuse. Messages go to the create message while
 * the handle is being made (err_to NULL), else to the handle. */
static hk_status_t arm(hk_kit_bind_t *b, void *user, unsigned long long ctx_id,
                       hk_kit_bind_t *err_to, hk_kit_arm_t **out)
{
    hk_handle_t *h = user;
    hk_handle_t *eh = err_to ? h : NULL;
    hk_status_t st = HK_STATUS_OK;
    if (h->sm_count == 0) {
        int sms = 0;
        CUresult r = hkc_cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                                 hk_kit_cudevice(b));
        if (r != CUDA_SUCCESS)
            return hkc_fail_cu(eh, r, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
        h->sm_count = sms < 1 ? 1 : sms;
    }
    hkc_arm_t *a = calloc(1, sizeof *a);
    if (!a)
        return hkc_fail(eh, HK_STATUS_OUT_OF_MEMORY, "no memory for the handle's state");
    a->base.ctx_id = ctx_id;
    st = hkc_kernels_functions(eh, ctx_id, a->fn);
    if (st == HK_STATUS_OK)
        st = take_kept(h, a, eh);
    if (st != HK_STATUS_OK) {
        hkc_ws_free(a, 0, NULL);
        hkc_arm_free(a);
        return st;
    }
    *out = &a->base;
    return HK_STATUS_OK;
}

/* Destroy: the context is current and alive, the handle's work done. The
 * workspaces are freed in stream order where the kit says so: cuMemFree would
 * wait for other threads' launches to pause (docs/contexts.md fact 30). Every
 * block is tried; the first failure is returned, its message in the binding
 * (the handle's own link to it may not be set yet when a create fails late). */
static hk_status_t release(hk_kit_bind_t *b, void *user, hk_kit_arm_t *base)
{
    hk_handle_t *h = user;
    hkc_arm_t *a = (hkc_arm_t *)base;
    hk_status_t st = HK_STATUS_OK;
    CUstream s = NULL;
    int ordered = hk_kit_release_stream(b, &s);
    /* The handle's work is done (the kit waited): its slabs and its word
     * go to the kit, which keeps them for the next arms in this incarnation
     * (hk_kit_keep_block) as far as it keeps any more; the rest is freed. A
     * word made in an earlier incarnation died with it. */
    for (hkc_slab_t *sl = a->slabs; sl; sl = sl->next) {
        hk_kit_block_t blk = {HK_KIT_BLOCK_DEVICE, HKC_SLAB_BYTES, sl->base, NULL};
        if (sl->base && hk_kit_keep_block(b, a->base.ctx_id, &blk))
            sl->base = 0; /* kept */
    }
    if (h->slot && h->slot_dev && h->slot_ctx == a->base.ctx_id) {
        hk_kit_block_t blk = {HK_KIT_BLOCK_HOST, HKC_WORD_BYTES, h->slot_dev, h->slot};
        if (hk_kit_keep_block(b, a->base.ctx_id, &blk))
            h->slot = NULL; /* kept */
    }
    CUresult r = hkc_ws_free(a, ordered, s);
    if (r != CUDA_SUCCESS)
        st = hk_kit_fail_cu(b, r, ordered ? "destroy: cuMemFreeAsync of the handle's workspaces"
                                          : "destroy: cuMemFree of the handle's workspaces");
    if (h->slot && h->slot_ctx == a->base.ctx_id) {
        r = hkc_give_back_host(h->slot);
        if (r == CUDA_SUCCESS)
            h->slot = NULL;
        else if (st == HK_STATUS_OK)
            st = hk_kit_fail_cu(b, r, "destroy: cuMemFreeHost of the handle's result word");
    }
    return st;
}

static void free_arm(void *user, hk_kit_arm_t *base)
{
    (void)user;
    hkc_arm_free((hkc_arm_t *)base);
}

const hk_kit_ops_t hkc_arm_ops = {arm, release, free_arm};

/* ---- host pointer mode's result word ---- */

void *hkc_result_slot(hk_handle_t *h, const hkc_arm_t *a, CUdeviceptr *dev)
{
    if (h->slot_ctx != a->base.ctx_id) {
        /* Optional: if the driver refuses, the caller copies from ws. A word
         * of an earlier incarnation died with it. */
        h->slot_ctx = a->base.ctx_id;
        h->slot_dev = 0;
        if (hkc_cu.cuMemHostAlloc(&h->slot, HKC_WORD_BYTES, CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS) {
            h->slot = NULL;
        } else if (hkc_cu.cuMemHostGetDevicePointer(&h->slot_dev, h->slot, 0) != CUDA_SUCCESS) {
            h->slot_dev = 0;
            if (hkc_give_back_host(h->slot) == CUDA_SUCCESS)
                h->slot = NULL; /* else kept, unused, for destroy to free */
        }
    }
    *dev = h->slot_dev;
    return h->slot_dev ? h->slot : NULL;
}
