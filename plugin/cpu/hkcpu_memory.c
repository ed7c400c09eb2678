/* hk-cpu: table "hk.memory/1" (plugin_api/hk_memory.h). "Device" memory is
 * host memory, 64-byte aligned like a GPU allocation would be, so hosts can
 * run one workload anywhere.
 *
 * free_ must refuse a pointer it did not hand out instead of passing it on,
 * and must do so without reading memory that may not be there: see "blocks". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hk_memory.h"
#include "hkcpu.h"

/* ---- blocks ---- */

/* Every block is a private anonymous mapping of its own: a 64-byte header at
 * the start of the mapping, the caller's memory right after it. free_ tells
 * one of its blocks without trusting the pointer: it must sit 64 bytes past a
 * page boundary, that page must be mapped (mincore answers without touching
 * it), and the header there must carry the tag and its own address. The tag is
 * the same in every build of hk-cpu, so a buffer follows a swap between two of
 * them (docs/swap.md); a freed block is unmapped, so freeing it again finds no
 * mapping, and its tag is cleared first, so of two threads freeing it at once
 * only one unmaps it. */
#define BLOCK_TAG 0x686b6370752d6d65ull /* "hkcpu-me" */
#define BLOCK_HEADER 64

typedef struct block {
    uint64_t tag;    /* BLOCK_TAG while live */
    uint64_t self;   /* the mapping's address */
    uint64_t length; /* the mapping's length */
    uint64_t pad[5];
} block_t;

_Static_assert(sizeof(block_t) == BLOCK_HEADER, "the header is the alignment");

static size_t hkcpu_page_size(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : 4096;
}

/* The live block whose memory starts at ptr, or NULL. */
static block_t *hkcpu_block_of(const void *ptr)
{
    size_t page = hkcpu_page_size();
    uintptr_t p = (uintptr_t)ptr;
    if ((p & (page - 1)) != BLOCK_HEADER)
        return NULL;
    unsigned char resident;
    block_t *b = (block_t *)(p - BLOCK_HEADER);
    if (mincore(b, 1, &resident) != 0) /* ENOMEM: nothing is mapped there */
        return NULL;
    if (__atomic_load_n(&b->tag, __ATOMIC_ACQUIRE) != BLOCK_TAG || b->self != (uintptr_t)b ||
        b->length < page)
        return NULL;
    return b;
}

/* ---- the table ---- */

/* Bytes of memory this machine has; SIZE_MAX when unknown. A request past it
 * cannot be met, and refusing it here keeps such sizes away from malloc
 * (sanitizer runtimes abort on them rather than return NULL). */
static size_t hkcpu_machine_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t total;
    if (pages <= 0 || page <= 0 ||
        __builtin_mul_overflow((size_t)pages, (size_t)page, &total))
        return SIZE_MAX;
    return total;
}

static hk_status_t hkcpu_alloc(hk_handle_t *h, size_t bytes, void **out)
{
    HKCPU_CHECK(h, "alloc");
    if (!out)
        return hkcpu_fail(h, HK_STATUS_NULL_POINTER, "alloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return HK_STATUS_OK;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes)
        return hkcpu_fail(h, HK_STATUS_OUT_OF_MEMORY,
                          "alloc: %zu bytes cannot be allocated (rounding up to 64-byte "
                          "blocks overflows)", bytes);
    size_t have = hkcpu_machine_bytes();
    if (rounded > have)
        return hkcpu_fail(h, HK_STATUS_OUT_OF_MEMORY,
                          "alloc: %zu bytes is more than this machine's memory (%zu bytes)",
                          bytes, have);
    size_t page = hkcpu_page_size(), length;
    if (__builtin_add_overflow(rounded, BLOCK_HEADER + page - 1, &length))
        return hkcpu_fail(h, HK_STATUS_OUT_OF_MEMORY,
                          "alloc: %zu bytes cannot be allocated (rounding up overflows)", bytes);
    length &= ~(page - 1);
    void *m = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return hkcpu_fail(h, HK_STATUS_OUT_OF_MEMORY, "alloc: %zu bytes: out of memory", bytes);
    block_t *b = m;
    b->self = (uintptr_t)b;
    b->length = length;
    __atomic_store_n(&b->tag, BLOCK_TAG, __ATOMIC_RELEASE);
    *out = (char *)m + BLOCK_HEADER;
    return HK_STATUS_OK;
}

static hk_status_t hkcpu_free(hk_handle_t *h, void *ptr)
{
    HKCPU_CHECK(h, "free_");
    if (!ptr)
        return HK_STATUS_OK;
    block_t *b = hkcpu_block_of(ptr);
    uint64_t tag = BLOCK_TAG;
    if (!b || !__atomic_compare_exchange_n(&b->tag, &tag, 0, 0, __ATOMIC_ACQ_REL,
                                           __ATOMIC_ACQUIRE))
        return hkcpu_fail(h, HK_STATUS_INVALID_VALUE,
                          "free_: %p is not the start of a live hk-cpu allocation (foreign, "
                          "already freed, or inside a block)", ptr);
    munmap(b, (size_t)b->length);
    return HK_STATUS_OK;
}

/* bytes from p must not run past the end of the address space. */
static hk_status_t hkcpu_check_range(hk_handle_t *h, const char *fn, const char *name,
                                     const void *p, size_t bytes)
{
    if ((uintptr_t)p > UINTPTR_MAX - bytes)
        return hkcpu_fail(h, HK_STATUS_INVALID_VALUE,
                          "%s: %s: %zu bytes from %p wrap around the address space", fn, name,
                          bytes, p);
    return HK_STATUS_OK;
}

static hk_status_t hkcpu_copy_checked(hk_handle_t *h, const char *fn, void *dst, const void *src,
                                      size_t bytes)
{
    HKCPU_CHECK(h, fn);
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst || !src)
        return hkcpu_fail(h, HK_STATUS_NULL_POINTER, "%s: %s is NULL with %zu bytes", fn,
                          !dst ? "dst" : "src", bytes);
    hk_status_t st = hkcpu_check_range(h, fn, "dst", dst, bytes);
    if (st == HK_STATUS_OK)
        st = hkcpu_check_range(h, fn, "src", src, bytes);
    if (st == HK_STATUS_OK)
        memmove(dst, src, bytes);
    return st;
}

static hk_status_t hkcpu_copy_to_device(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    return hkcpu_copy_checked(h, "copy_to_device", dst, src, bytes);
}

static hk_status_t hkcpu_copy_to_host(hk_handle_t *h, void *dst, const void *src, size_t bytes)
{
    return hkcpu_copy_checked(h, "copy_to_host", dst, src, bytes);
}

static hk_status_t hkcpu_memset(hk_handle_t *h, void *dst, int value, size_t bytes)
{
    HKCPU_CHECK(h, "memset_");
    if (bytes == 0)
        return HK_STATUS_OK;
    if (!dst)
        return hkcpu_fail(h, HK_STATUS_NULL_POINTER, "memset_: dst is NULL with %zu bytes",
                          bytes);
    hk_status_t st = hkcpu_check_range(h, "memset_", "dst", dst, bytes);
    if (st == HK_STATUS_OK)
        memset(dst, (unsigned char)value, bytes);
    return st;
}

const hk_memory_v1_t hkcpu_memory = {
    .size = sizeof(hk_memory_v1_t),
    .alloc = hkcpu_alloc,
    .free_ = hkcpu_free,
    .copy_to_device = hkcpu_copy_to_device,
    .copy_to_host = hkcpu_copy_to_host,
    .memset_ = hkcpu_memset,
};
