/* handlekit: call times of the programs that measure a live swap (hk-bench's
 * P8, hk-host swap). Internal, never installed; compiled into each program.
 *
 * Histograms. Every worker thread times each call and adds the time to a
 * histogram of its own: no lock, no allocation, a few instructions a call,
 * so the recording does not change what it measures however many calls a
 * run makes. Percentiles are read after the run, from the threads'
 * histograms merged. Times below 256 ns have a bucket each; above, each power
 * of two is split into 128 buckets, so a bucket is at most 1/128 (0.8 %) of
 * its values wide. The exact longest time is kept as well.
 *
 * Windows. The thread that swaps opens a window just before it starts a
 * swap and closes it once the swap has returned; a window is the interval
 * between the two. A call overlaps a window when any part of it does: it is
 * classed by two reads of the window sequence, one just before its start
 * time is read and one just after its end time is read. The call overlapped
 * a window when one was open at the first read, or when one opened or closed
 * between the two reads (the sequence moved). Sequence 2k+1 means window k
 * is open, 2k+2 that it is closed. */
#ifndef HK__LAT_H
#define HK__LAT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HK__LAT_SUB_BITS 7
#define HK__LAT_SUB (1u << HK__LAT_SUB_BITS)
/* Buckets for every uint64_t: 2 * SUB exact ones, then SUB per power of two
 * from 2^(SUB_BITS + 1) up to 2^63. */
#define HK__LAT_BUCKETS ((65u - HK__LAT_SUB_BITS) * HK__LAT_SUB)

typedef struct hk__lat {
    uint64_t count;
    uint64_t max_ns;
    uint64_t bucket[HK__LAT_BUCKETS];
} hk__lat_t;

/* The bucket of a time in ns. */
static inline unsigned hk__lat_index(uint64_t ns)
{
    if (ns < 2 * HK__LAT_SUB)
        return (unsigned)ns;
    unsigned shift = (unsigned)(63 - __builtin_clzll(ns)) - HK__LAT_SUB_BITS;
    return (shift + 1) * HK__LAT_SUB + (unsigned)(ns >> shift) - HK__LAT_SUB;
}

/* [not-concurrent per histogram] Adds one time. */
static inline void hk__lat_add(hk__lat_t *h, uint64_t ns)
{
    h->bucket[hk__lat_index(ns)]++;
    h->count++;
    if (ns > h->max_ns)
        h->max_ns = ns;
}

/* The smallest and the largest time of bucket i (i < HK__LAT_BUCKETS). */
uint64_t hk__lat_lower(unsigned i);
uint64_t hk__lat_upper(unsigned i);

/* Empties h. */
void hk__lat_clear(hk__lat_t *h);

/* Adds every time of from to into. */
void hk__lat_merge(hk__lat_t *into, const hk__lat_t *from);

/* The nearest-rank quantile num/den (0 < num <= den): the time of the call of
 * rank ceil(count * num / den) in increasing order, given as the largest time
 * of its bucket but never more than the longest time; so it is at most
 * 0.8 % above the exact value and never below it. 0 for an empty histogram;
 * num == den gives the longest time. */
uint64_t hk__lat_quantile(const hk__lat_t *h, uint64_t num, uint64_t den);

/* What the programs print of a histogram, in microseconds. */
typedef struct hk__lat_summary {
    uint64_t count;
    double p50_us, p99_us, p999_us, max_us;
} hk__lat_summary_t;

void hk__lat_summarize(const hk__lat_t *h, hk__lat_summary_t *s);

/* Writes a zero to every page of the n bytes at p, so that the first calls
 * a worker records do not fault them in (calloc's large blocks are mapped
 * lazily). */
void hk__lat_prefault(void *p, size_t n);

/* Monotonic clock in ns. */
uint64_t hk__lat_now_ns(void);

/* ---- windows ---- */

typedef struct hk__lat_windows {
    _Atomic uint64_t seq;
} hk__lat_windows_t;

/* No window opened yet. */
void hk__lat_windows_init(hk__lat_windows_t *w);

/* [one thread] Opens the next window (none may be open) and closes it. */
void hk__lat_window_open(hk__lat_windows_t *w);
void hk__lat_window_close(hk__lat_windows_t *w);

/* [thread-safe] The sequence now: read once before a call's start time and
 * once after its end time. */
static inline uint64_t hk__lat_mark(hk__lat_windows_t *w)
{
    return atomic_load_explicit(&w->seq, memory_order_acquire);
}

/* 1 when a call whose marks were before and after overlapped a window. */
static inline int hk__lat_overlaps(uint64_t before, uint64_t after)
{
    return (before & 1u) || after != before;
}

/* The first window such a call overlapped (0 for the first window). */
static inline uint64_t hk__lat_window_of(uint64_t before)
{
    return before / 2;
}

/* Windows opened so far. */
uint64_t hk__lat_windows_opened(hk__lat_windows_t *w);

#endif /* HK__LAT_H */
