/* hk-cpu: table "hk.memory/1" (plugin_api/hk_memory.h). "Device" memory is
 * host memory, 64-byte aligned like a GPU allocation would be, so hosts can
 * run one workload anywhere.
 *
 * free_ must refuse a pointer it did not hand out instead of passing it to
 * free(), and must do so without reading memory around it (it may be no
 * memory at all), so every live allocation is recorded in a small hash set. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_memory.h"
#include "hkcpu.h"

#define CHECK_HANDLE(h, fn)                                                         \
    do {                                                                            \
        hk_status_t st_ = hk__cpu_check((h), fn);                                   \
        if (st_ != HK_STATUS_OK)                                                    \
            return st_;                                                             \
    } while (0)

/* ---- the set of live allocations: open addressing, linear probing ---- */

#define TOMB ((uintptr_t)1) /* a removed entry; 0 is an empty one */

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *rec;    /* cap entries; under rec_lock */
static size_t rec_cap;    /* a power of two, or 0 */
static size_t rec_used;   /* live entries plus tombstones */

static size_t rec_hash(uintptr_t p, size_t cap)
{
    return (size_t)(((uint64_t)p >> 6) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

/* Rebuilds the set with room for twice the live entries. Caller holds the
 * lock. Returns -1 when out of memory (the old set stays). */
static int rec_grow(void)
{
    size_t cap = rec_cap ? rec_cap * 2 : 64;
    uintptr_t *n = calloc(cap, sizeof *n);
    if (!n)
        return -1;
    size_t used = 0;
    for (size_t i = 0; i < rec_cap; i++) {
        if (rec[i] > TOMB) {
            size_t j = rec_hash(rec[i], cap);
            while (n[j])
                j = (j + 1) & (cap - 1);
            n[j] = rec[i];
            used++;
        }
    }
    free(rec);
    rec = n;
    rec_cap = cap;
    rec_used = used;
    return 0;
}

static int rec_add(uintptr_t p)
{
    int rc = 0;
    pthread_mutex_lock(&rec_lock);
    if ((rec_used + 1) * 2 > rec_cap && rec_grow() != 0) {
        rc = -1;
        goto out;
    }
    size_t j = rec_hash(p, rec_cap);
    while (rec[j] > TOMB)
        j = (j + 1) & (rec_cap - 1);
    if (rec[j] == 0)
        rec_used++;
    rec[j] = p;
out:
    pthread_mutex_unlock(&rec_lock);
    return rc;
}

/* Removes p; returns 1 when it was recorded. */
static int rec_remove(uintptr_t p)
{
    int found = 0;
    pthread_mutex_lock(&rec_lock);
    if (rec_cap) {
        size_t j = rec_hash(p, rec_cap);
        while (rec[j] != 0 && rec[j] != p)
            j = (j + 1) & (rec_cap - 1);
        if (rec[j] == p) {
            rec[j] = TOMB;
            found = 1;
        }
    }
    pthread_mutex_unlock(&rec_lock);
    return found;
}

void hk__cpu_memory_fini(void)
{
    pthread_mutex_lock(&rec_lock);
    free(rec);
    rec = NULL;
    rec_cap = rec_used = 0;
    pthread_mutex_unlock(&rec_lock);
}

/* ---- the table ---- */

/* Bytes of memory this machine has; SIZE_MAX when unknown. A request past it
 * cannot be met, and refusing it here keeps such sizes away from malloc
 * (sanitizer runtimes abort on them rather than return NULL). */
static size_t machine_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t total;
    if (pages <= 0 || page <= 0 ||
        __builtin_mul_overflow((size_t)pages, (size_t)page, &total))
        return SIZE_MAX;
    return total;
}

static hk_status_t cpu_alloc(hk_handle_t *h, size_t bytes, void **out)
{
    CHECK_HANDLE(h, "alloc");
    if (!out)
        return hk__cpu_fail(h, HK_STATUS_NULL_POINTER, "alloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return HK_STATUS_OK;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes)
        return hk__cpu_fail(h, HK_STATUS_OUT_OF_MEMORY,
                            "alloc: %zu bytes cannot be allocated (rounding up to 64-byte "
                            "blocks overflows)", bytes);
    size_t have = machine_bytes();
    if (rounded > have)
        return hk__cpu_fail(h, HK_STATUS_OUT_OF_MEMORY,
                            "alloc: %zu bytes is more than this machine's memory (%zu bytes)",
                            bytes, have);
    void *p = aligned_alloc(64, rounded);
    if (!p)
        return hk__cpu_fail(h, HK_STATUS_OUT_OF_MEMORY, "alloc: %zu bytes: out of memory", bytes);
    if (rec_add((uintptr_t)p) != 0) {
        free(p);
        return hk__cpu_fail(h, HK_STATUS_OUT_OF_MEMORY,
                            "alloc: %zu bytes: out of memory for its record", bytes);
    }
    *out = p;
    return HK_STATUS_OK;
}

static hk_status_t cpu_free(hk_handle_t *h, void *ptr)
{
    CHECK_HANDLE(h, "free_");
    if (!ptr)
        return HK_STATUS_OK;
    if (!rec_remove((uintptr_t)ptr))
        return hk__cpu_fail(h, HK_STATUS_INVALID_VALUE,
                            "free_: %p is not the start of a live hk-cpu allocation (foreign, "
                            "already freed, or inside a block)", ptr);
    free(ptr);
    return HK_STATUS_OK;
}

/* bytes from p must not run past the end of the address space. */
static hk_status_t check_range(hk_handle_t *h, const char *fn, const char *name, const void *p,
                               size_t bytes)
{
    if ((uintptr_t)p > UINTPTR_MAX - bytes)
        return hk__cpu_fail(h, HK_STATUS_INVALID_VALUE,
                            "%s: %s: %zu bytes from %p wrap around the address space", fn, name,
                            bytes, p);
    return HK_STATUS_OK;
}

static hk_status_t copy_checked(hk_handle_t *h, const char *fn, void *dst, const void *src,
                                size_t bytes)
{
    CHECK_HANDLE(h, fn);
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst || !src)
        return hk__cpu_fail(h, HK_STATUS_NULL_POINTER, "%s: %s is NULL with %zu bytes", fn,
                            !dst ? "dst" : "src", bytes);
    hk_status_t st = check_range(h, fn, "dst", dst, bytes);
    if (st == HK_STATUS_OK)
        st = check_range(h, fn, "src", src, bytes);
    if (st == HK_STATUS_OK)
        memmove(dst, src, bytes);
    return st;
}

static hk_status_t cpu_copy_to_device(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    return copy_checked(h, "copy_to_device", dst, src, bytes);
}

static hk_status_t cpu_copy_to_host(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    return copy_checked(h, "copy_to_host", dst, src, bytes);
}

static hk_status_t cpu_memset(hk_handle_t *h, void *dst, int value, size_t bytes)
{
    CHECK_HANDLE(h, "memset_");
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst)
        return hk__cpu_fail(h, HK_STATUS_NULL_POINTER, "memset_: dst is NULL with %zu bytes",
                            bytes);
    hk_status_t st = check_range(h, "memset_", "dst", dst, bytes);
    if (st == HK_STATUS_OK)
        memset(dst, (unsigned char)value, bytes);
    return st;
}

const hk_memory_v1_t hk__cpu_memory = {
    .size = sizeof(hk_memory_v1_t),
    .alloc = cpu_alloc,
    .free_ = cpu_free,
    .copy_to_device = cpu_copy_to_device,
    .copy_to_host = cpu_copy_to_host,
    .memset_ = cpu_memset,
};
