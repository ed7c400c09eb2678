/* handlekit plugins: the registry of the handles a plugin made. Internal,
 * never installed; compiled into each plugin, so every loaded plugin file
 * (plugins are loaded with local binding and export only their entry point)
 * has a registry of its own.
 *
 * docs/abi.md asks every slot to answer HK_STATUS_INVALID_HANDLE for a
 * destroyed handle and for a handle of another plugin or of another copy of
 * the same plugin, without reading through a pointer the plugin did not hand
 * out as live. So the registry owns the memory of the handles themselves:
 *
 *   - a handle is an object inside a slot of one of the registry's chunks;
 *     chunks are never given back while the plugin is loaded, so a
 *     destroyed handle's memory is still the registry's and reading its
 *     slot header is always defined;
 *   - hk__reg_live decides from the pointer's address alone whether it is a
 *     slot's object in one of this registry's chunks (an address compare per
 *     chunk, then a mask), and only then reads that slot's state word: a
 *     pointer of anyone else is never dereferenced;
 *   - the state word is 2 * generation + live: every publish and retire bumps
 *     it, so a slot's incarnations are told apart;
 *   - freed slots are reused first in, first out, and only once more than
 *     HK__REG_QUARANTINE others wait, so a stale handle points at a dead slot
 *     for at least that many later destroys before its slot can carry a new
 *     handle.
 *
 * Costs: hk__reg_live takes no lock: one acquire load of the chunk count, a
 * compare and a mask per chunk looked at (the first chunk holds the first
 * 16 handles) and one acquire load of the state (a few ns). take and put
 * take the registry's mutex; they are only on handle_create/destroy. */
#ifndef HK__REGISTRY_H
#define HK__REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HK__REG_HEADER 64      /* bytes of a slot before its object */
#define HK__REG_CHUNKS 24      /* chunk i has HK__REG_FIRST << i slots */
#define HK__REG_FIRST 16
#define HK__REG_QUARANTINE 64  /* freed slots that wait before one is reused */

/* Slot size for objects of obj bytes: a power of two of at least header +
 * object, so that hk__reg_live checks a slot boundary with a mask. 0 (a
 * compile-time error in HK__REGISTRY_INIT's use) above 16 KiB. */
#define HK__REG_SLOT_BYTES(obj)                                                    \
    ((obj) + HK__REG_HEADER <= 256     ? (size_t)256                               \
     : (obj) + HK__REG_HEADER <= 512   ? (size_t)512                               \
     : (obj) + HK__REG_HEADER <= 1024  ? (size_t)1024                              \
     : (obj) + HK__REG_HEADER <= 2048  ? (size_t)2048                              \
     : (obj) + HK__REG_HEADER <= 4096  ? (size_t)4096                              \
     : (obj) + HK__REG_HEADER <= 8192  ? (size_t)8192                              \
     : (obj) + HK__REG_HEADER <= 16384 ? (size_t)16384                             \
                                       : (size_t)0)

typedef struct hk__reg_hdr {
    _Atomic uint64_t state;   /* 2 * generation + 1 while the object is live */
    struct hk__reg_hdr *next; /* next free slot in the FIFO; under the lock */
} hk__reg_hdr_t;

typedef struct hk__registry {
    size_t slot_bytes;                 /* constant, a power of two */
    atomic_uint nchunks;               /* chunks published (release) */
    uintptr_t first[HK__REG_CHUNKS];   /* object address of each chunk's slot 0 */
    size_t span[HK__REG_CHUNKS];       /* bytes of each chunk */
    void *mem[HK__REG_CHUNKS];         /* what aligned_alloc returned */
    pthread_mutex_t lock;              /* guards everything below, and chunk growth */
    size_t carved;                     /* slots handed out of the newest chunk */
    hk__reg_hdr_t *head, *tail;        /* free slots, oldest first */
    size_t nfree;
    size_t out;                        /* slots taken and not put back */
} hk__registry_t;

/* A registry for objects of obj_size bytes, for static storage. */
#define HK__REGISTRY_INIT(obj_size)                                                 \
    {                                                                               \
        .slot_bytes = HK__REG_SLOT_BYTES(obj_size), .lock = PTHREAD_MUTEX_INITIALIZER \
    }

/* [thread-safe] A zeroed object of the registry's size, not yet live, or NULL
 * when no memory is left. The caller initialises it, then publishes it. */
void *hk__reg_take(hk__registry_t *r);

/* [thread-safe] Makes a taken object live (a new generation of its slot).
 * Everything written to the object before is visible to a thread that sees
 * it live. */
void hk__reg_publish(hk__registry_t *r, void *obj);

/* [thread-safe] Makes a live object dead. Returns 1 when this call did it,
 * 0 when it was not live (two destroys racing: one wins). */
int hk__reg_retire(hk__registry_t *r, void *obj);

/* [thread-safe] Gives a taken object's slot back (retiring it first if it is
 * live); it is reused after HK__REG_QUARANTINE others. obj must come from
 * hk__reg_take of r. */
void hk__reg_put(hk__registry_t *r, void *obj);

/* [not-concurrent] Frees the chunks when no slot is out, for a plugin's
 * unload; otherwise keeps them (a handle not destroyed still points there). */
void hk__reg_fini(hk__registry_t *r);

/* [thread-safe] 1 when p is a live object of this registry, else 0. Reads
 * nothing through p unless p is a slot's object inside one of r's chunks. */
static inline int hk__reg_live(const hk__registry_t *r, const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    const unsigned n = atomic_load_explicit(&r->nchunks, memory_order_acquire);
    for (unsigned i = 0; i < n; i++) {
        const uintptr_t off = a - r->first[i];
        if (off < r->span[i]) {
            if (off & (r->slot_bytes - 1))
                return 0; /* inside a chunk but not an object's start */
            const hk__reg_hdr_t *h = (const hk__reg_hdr_t *)(a - HK__REG_HEADER);
            return (int)(atomic_load_explicit(&h->state, memory_order_acquire) & 1u);
        }
    }
    return 0;
}

#endif /* HK__REGISTRY_H */
