/* handlekit: call-time histograms and swap windows (hk__lat.h). */
#include <string.h>
#include <time.h>

#include "hk__lat.h"

uint64_t hk__lat_lower(unsigned i)
{
    if (i < 2 * HK__LAT_SUB)
        return i;
    unsigned shift = i / HK__LAT_SUB - 1;
    return (uint64_t)(i % HK__LAT_SUB + HK__LAT_SUB) << shift;
}

uint64_t hk__lat_upper(unsigned i)
{
    if (i + 1 >= HK__LAT_BUCKETS)
        return UINT64_MAX;
    return hk__lat_lower(i + 1) - 1;
}

void hk__lat_clear(hk__lat_t *h)
{
    memset(h, 0, sizeof *h);
}

void hk__lat_merge(hk__lat_t *into, const hk__lat_t *from)
{
    for (unsigned i = 0; i < HK__LAT_BUCKETS; i++)
        into->bucket[i] += from->bucket[i];
    into->count += from->count;
    if (from->max_ns > into->max_ns)
        into->max_ns = from->max_ns;
}

uint64_t hk__lat_quantile(const hk__lat_t *h, uint64_t num, uint64_t den)
{
    if (h->count == 0 || den == 0)
        return 0;
    if (num >= den)
        return h->max_ns;
    /* In integers, so that p99.9 of 1000 calls is the 999th and not, through
     * a rounding of 0.999 * 1000, the 1000th. */
    uint64_t rank = (h->count / den) * num + ((h->count % den) * num + den - 1) / den;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HK__LAT_BUCKETS; i++) {
        seen += h->bucket[i];
        if (seen >= rank) {
            uint64_t up = hk__lat_upper(i);
            return up < h->max_ns ? up : h->max_ns;
        }
    }
    return h->max_ns; /* not reached: the buckets add up to count */
}

void hk__lat_summarize(const hk__lat_t *h, hk__lat_summary_t *s)
{
    s->count = h->count;
    s->p50_us = (double)hk__lat_quantile(h, 1, 2) / 1e3;
    s->p99_us = (double)hk__lat_quantile(h, 99, 100) / 1e3;
    s->p999_us = (double)hk__lat_quantile(h, 999, 1000) / 1e3;
    s->max_us = (double)h->max_ns / 1e3;
}

void hk__lat_prefault(void *p, size_t n)
{
    volatile unsigned char *b = p; /* volatile: not a store a compiler may drop */
    for (size_t off = 0; off < n; off += 4096)
        b[off] = 0;
    if (n)
        b[n - 1] = 0;
}

uint64_t hk__lat_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hk__lat_windows_init(hk__lat_windows_t *w)
{
    atomic_init(&w->seq, 0);
}

void hk__lat_window_open(hk__lat_windows_t *w)
{
    atomic_fetch_add_explicit(&w->seq, 1, memory_order_seq_cst);
}

void hk__lat_window_close(hk__lat_windows_t *w)
{
    atomic_fetch_add_explicit(&w->seq, 1, memory_order_seq_cst);
}

uint64_t hk__lat_windows_opened(hk__lat_windows_t *w)
{
    return (hk__lat_mark(w) + 1) / 2;
}
