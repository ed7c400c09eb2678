/* handlekit plugins: the handle registry (see hk__registry.h). */
#include "hk__registry.h"

#include <stdlib.h>
#include <string.h>

static hk__reg_hdr_t *hdr_of(void *obj)
{
    return (hk__reg_hdr_t *)((unsigned char *)obj - HK__REG_HEADER);
}

static void *obj_of(hk__reg_hdr_t *h)
{
    return (unsigned char *)h + HK__REG_HEADER;
}

/* A new slot from the newest chunk, adding a chunk when it is used up.
 * Caller holds the lock. NULL when no chunk can be added. */
static hk__reg_hdr_t *carve(hk__registry_t *r)
{
    unsigned n = atomic_load_explicit(&r->nchunks, memory_order_relaxed);
    size_t slots = n ? (size_t)HK__REG_FIRST << (n - 1) : 0;
    if (n == 0 || r->carved == slots) {
        if (n == HK__REG_CHUNKS)
            return NULL;
        size_t bytes = ((size_t)HK__REG_FIRST << n) * r->slot_bytes;
        void *mem = aligned_alloc(r->slot_bytes, bytes);
        if (!mem)
            return NULL;
        memset(mem, 0, bytes); /* every state 0: generation 0, dead */
        r->mem[n] = mem;
        r->first[n] = (uintptr_t)mem + HK__REG_HEADER;
        r->span[n] = bytes;
        r->carved = 0;
        /* Readers take first[n] and span[n] only after seeing the count. */
        atomic_store_explicit(&r->nchunks, n + 1, memory_order_release);
        n++;
    }
    unsigned char *base = r->mem[n - 1];
    return (hk__reg_hdr_t *)(base + r->carved++ * r->slot_bytes);
}

void *hk__reg_take(hk__registry_t *r)
{
    hk__reg_hdr_t *h = NULL;
    pthread_mutex_lock(&r->lock);
    if (r->nfree <= HK__REG_QUARANTINE)
        h = carve(r);
    if (!h && r->head) { /* past the quarantine, or no memory for a new chunk */
        h = r->head;
        r->head = h->next;
        if (!r->head)
            r->tail = NULL;
        r->nfree--;
    }
    if (h)
        r->out++;
    pthread_mutex_unlock(&r->lock);
    if (!h)
        return NULL;
    h->next = NULL;
    memset(obj_of(h), 0, r->slot_bytes - HK__REG_HEADER);
    return obj_of(h);
}

void hk__reg_publish(hk__registry_t *r, void *obj)
{
    (void)r;
    /* Dead (even) → live (odd): a new generation. Release: what the creator
     * wrote is visible to whoever sees the slot live. */
    atomic_fetch_add_explicit(&hdr_of(obj)->state, 1, memory_order_release);
}

int hk__reg_retire(hk__registry_t *r, void *obj)
{
    (void)r;
    hk__reg_hdr_t *h = hdr_of(obj);
    uint64_t s = atomic_load_explicit(&h->state, memory_order_relaxed);
    while (s & 1u) {
        if (atomic_compare_exchange_weak_explicit(&h->state, &s, s + 1, memory_order_acq_rel,
                                                  memory_order_relaxed))
            return 1;
    }
    return 0;
}

void hk__reg_put(hk__registry_t *r, void *obj)
{
    hk__reg_hdr_t *h = hdr_of(obj);
    hk__reg_retire(r, obj);
    pthread_mutex_lock(&r->lock);
    h->next = NULL;
    if (r->tail)
        r->tail->next = h;
    else
        r->head = h;
    r->tail = h;
    r->nfree++;
    r->out--;
    pthread_mutex_unlock(&r->lock);
}

void hk__reg_fini(hk__registry_t *r)
{
    pthread_mutex_lock(&r->lock);
    if (r->out == 0) {
        unsigned n = atomic_load_explicit(&r->nchunks, memory_order_relaxed);
        atomic_store_explicit(&r->nchunks, 0, memory_order_release);
        for (unsigned i = 0; i < n; i++) {
            free(r->mem[i]);
            r->mem[i] = NULL;
            r->first[i] = 0;
            r->span[i] = 0;
        }
        r->head = r->tail = NULL;
        r->nfree = 0;
        r->carved = 0;
    }
    pthread_mutex_unlock(&r->lock);
}
