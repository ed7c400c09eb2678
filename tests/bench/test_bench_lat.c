/* common/prog/hk__lat.c, the call-time histograms and swap windows of hk-bench's
 * P8 and hk-host swap: buckets, nearest-rank quantiles against a sort of the
 * same times, merging, and the classing of calls by the window sequence,
 * scripted and against the clock with threads calling while windows open
 * and close. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hk__lat.h"
#include "hk_test.h"

void hkb_test_register_lat(void);

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A time of random magnitude: uniform bits below a random top bit. */
static uint64_t rnd_time(unsigned max_bits)
{
    unsigned bits = (unsigned)(rnd() % (max_bits + 1));
    return bits == 0 ? 0 : rnd() >> (64 - bits);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_buckets_tile_every_time(void)
{
    unsigned bad_edge = 0, bad_index = 0, too_wide = 0, bad_value = 0;
    CU_ASSERT_EQUAL(hk__lat_lower(0), 0);
    CU_ASSERT_EQUAL(hk__lat_upper(HK__LAT_BUCKETS - 1), UINT64_MAX);
    CU_ASSERT_EQUAL(hk__lat_index(UINT64_MAX), HK__LAT_BUCKETS - 1);
    for (unsigned i = 0; i < HK__LAT_BUCKETS; i++) {
        uint64_t lo = hk__lat_lower(i), up = hk__lat_upper(i);
        bad_edge += i > 0 && lo != hk__lat_upper(i - 1) + 1;
        bad_index += hk__lat_index(lo) != i || hk__lat_index(up) != i;
        too_wide += i >= 2 * HK__LAT_SUB && up - lo >= lo / HK__LAT_SUB;
        bad_edge += i < 2 * HK__LAT_SUB && (lo != i || up != i); /* exact below 256 ns */
    }
    for (int k = 0; k < 200000; k++) {
        uint64_t v = rnd_time(64);
        unsigned i = hk__lat_index(v);
        bad_value += i >= HK__LAT_BUCKETS || v < hk__lat_lower(i) || v > hk__lat_upper(i);
    }
    CU_ASSERT_EQUAL(bad_edge, 0);
    CU_ASSERT_EQUAL(bad_index, 0);
    CU_ASSERT_EQUAL(too_wide, 0);
    CU_ASSERT_EQUAL(bad_value, 0);
}

static void test_quantiles_exact_below_256_ns(void)
{
    static hk__lat_t h;
    uint64_t v[200];
    hk__lat_clear(&h);
    for (int i = 0; i < 200; i++)
        v[i] = (uint64_t)i + 1;
    for (int i = 199; i > 0; i--) { /* in a random order */
        int j = (int)(rnd() % (uint64_t)(i + 1));
        uint64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    for (int i = 0; i < 200; i++)
        hk__lat_add(&h, v[i]);
    CU_ASSERT_EQUAL(h.count, 200);
    CU_ASSERT_EQUAL(h.max_ns, 200);
    CU_ASSERT_EQUAL(hk__lat_quantile(&h, 1, 2), 100);     /* rank 100 */
    CU_ASSERT_EQUAL(hk__lat_quantile(&h, 99, 100), 198);  /* rank 198 */
    CU_ASSERT_EQUAL(hk__lat_quantile(&h, 999, 1000), 200); /* rank ceil(199.8) */
    CU_ASSERT_EQUAL(hk__lat_quantile(&h, 1, 1000), 1);    /* rank ceil(0.2) */
    CU_ASSERT_EQUAL(hk__lat_quantile(&h, 1, 1), 200);
}

/* For each distribution and count: every quantile asked is the upper edge
 * of the bucket of the exact nearest-rank time, capped at the longest. */
static void test_quantiles_match_a_sort(void)
{
    static hk__lat_t h;
    static const size_t counts[] = {1, 2, 3, 999, 1000, 1001, 10007};
    static const uint64_t q[][2] = {{1, 2}, {99, 100}, {999, 1000}, {1, 1000}, {1, 3}, {1, 1}};
    uint64_t *v = malloc(10007 * sizeof *v);
    unsigned wrong = 0, cases = 0;
    CU_ASSERT_FATAL(v != NULL);
    for (int dist = 0; dist < 4; dist++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t n = counts[c];
            hk__lat_clear(&h);
            for (size_t i = 0; i < n; i++) {
                v[i] = dist == 0   ? 1000 + rnd() % 1000000          /* uniform, 1 us - 1 ms */
                       : dist == 1 ? rnd_time(40)                    /* every magnitude */
                       : dist == 2 ? 5000                            /* one time */
                                   : (i % 100 == 0 ? 60000000 : 3000); /* a rare long one */
                hk__lat_add(&h, v[i]);
            }
            qsort(v, n, sizeof *v, cmp_u64);
            CU_ASSERT_EQUAL(h.max_ns, v[n - 1]);
            for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
                uint64_t rank = (n * q[k][0] + q[k][1] - 1) / q[k][1];
                uint64_t exact = v[(rank ? rank : 1) - 1];
                uint64_t up = hk__lat_upper(hk__lat_index(exact));
                uint64_t want = up < v[n - 1] ? up : v[n - 1];
                uint64_t got = hk__lat_quantile(&h, q[k][0], q[k][1]);
                cases++;
                if (got != want || got < exact || got - exact > exact / HK__LAT_SUB) {
                    if (wrong++ < 5)
                        fprintf(stderr, "\n  dist %d n %zu q %llu/%llu: got %llu, exact %llu",
                                dist, n, (unsigned long long)q[k][0],
                                (unsigned long long)q[k][1], (unsigned long long)got,
                                (unsigned long long)exact);
                }
            }
        }
    CU_ASSERT_EQUAL(cases, 4 * 7 * 6);
    CU_ASSERT_EQUAL(wrong, 0);
    free(v);
}

static void test_empty_histogram(void)
{
    static hk__lat_t h;
    hk__lat_summary_t s;
    memset(&h, 0xff, sizeof h);
    hk__lat_clear(&h);
    CU_ASSERT_EQUAL(hk__lat_quantile(&h, 1, 2), 0);
    CU_ASSERT_EQUAL(hk__lat_quantile(&h, 1, 1), 0);
    hk__lat_summarize(&h, &s);
    CU_ASSERT_EQUAL(s.count, 0);
    CU_ASSERT_EQUAL(s.p50_us, 0.0);
    CU_ASSERT_EQUAL(s.max_us, 0.0);
}

static void test_merge_and_summary(void)
{
    static hk__lat_t all, a, b;
    hk__lat_summary_t s;
    hk__lat_clear(&all);
    hk__lat_clear(&a);
    hk__lat_clear(&b);
    for (int i = 0; i < 5000; i++) {
        uint64_t t = rnd_time(30);
        hk__lat_add(&all, t);
        hk__lat_add(i % 3 ? &a : &b, t);
    }
    hk__lat_merge(&a, &b);
    CU_ASSERT_EQUAL(a.count, all.count);
    CU_ASSERT_EQUAL(a.max_ns, all.max_ns);
    CU_ASSERT(memcmp(a.bucket, all.bucket, sizeof a.bucket) == 0);
    hk__lat_summarize(&all, &s);
    CU_ASSERT_EQUAL(s.count, 5000);
    CU_ASSERT_EQUAL(s.p50_us, (double)hk__lat_quantile(&all, 1, 2) / 1e3);
    CU_ASSERT_EQUAL(s.p99_us, (double)hk__lat_quantile(&all, 99, 100) / 1e3);
    CU_ASSERT_EQUAL(s.p999_us, (double)hk__lat_quantile(&all, 999, 1000) / 1e3);
    CU_ASSERT_EQUAL(s.max_us, (double)all.max_ns / 1e3);
    CU_ASSERT(s.p50_us <= s.p99_us && s.p99_us <= s.p999_us && s.p999_us <= s.max_us);
}

/* The sequence step by step, and how calls with given marks are classed. */
static void test_window_marks(void)
{
    hk__lat_windows_t w;
    hk__lat_windows_init(&w);
    uint64_t m0 = hk__lat_mark(&w);
    CU_ASSERT_EQUAL(m0, 0);
    CU_ASSERT_EQUAL(hk__lat_windows_opened(&w), 0);
    CU_ASSERT_FALSE(hk__lat_overlaps(m0, hk__lat_mark(&w))); /* no window yet */
    hk__lat_window_open(&w);
    uint64_t m1 = hk__lat_mark(&w);
    CU_ASSERT_EQUAL(hk__lat_windows_opened(&w), 1);
    CU_ASSERT_TRUE(hk__lat_overlaps(m0, m1));  /* it began before, ended inside */
    CU_ASSERT_TRUE(hk__lat_overlaps(m1, m1));  /* wholly inside */
    CU_ASSERT_EQUAL(hk__lat_window_of(m0), 0);
    CU_ASSERT_EQUAL(hk__lat_window_of(m1), 0);
    hk__lat_window_close(&w);
    uint64_t m2 = hk__lat_mark(&w);
    CU_ASSERT_TRUE(hk__lat_overlaps(m1, m2));  /* began inside, ended after */
    CU_ASSERT_TRUE(hk__lat_overlaps(m0, m2));  /* around the whole window */
    CU_ASSERT_FALSE(hk__lat_overlaps(m2, m2)); /* between windows */
    hk__lat_window_open(&w);
    uint64_t m3 = hk__lat_mark(&w);
    hk__lat_window_close(&w);
    hk__lat_window_open(&w);
    uint64_t m5 = hk__lat_mark(&w);
    CU_ASSERT_EQUAL(hk__lat_windows_opened(&w), 3);
    CU_ASSERT_TRUE(hk__lat_overlaps(m2, m3));
    CU_ASSERT_EQUAL(hk__lat_window_of(m2), 1); /* the second window */
    CU_ASSERT_EQUAL(hk__lat_window_of(m3), 1);
    CU_ASSERT_EQUAL(hk__lat_window_of(m5), 2);
    CU_ASSERT_TRUE(hk__lat_overlaps(m3, m5)); /* from window 1 into window 2: first is 1 */
}

/* Threads "call" (spin a random few tens of us) and record the marks and
 * clock times of each call, while the main thread opens and closes windows
 * noting the clock around each; afterwards every call's class must agree
 * with the clock: a call classed outside must not meet any window's surely
 * open part, and a call classed inside a window it began in must end after
 * that window opened. The clock is read on whichever CPU a thread runs;
 * readings on two CPUs may disagree by a few microseconds (a virtual
 * machine's clock, a thread moved between CPUs), so a call must meet a
 * window by more than WT_SKEW_NS to count against it. */
#define WT_SKEW_NS 50000u
#define WT_THREADS 3
#define WT_CALLS 40000
#define WT_WINDOWS 24

typedef struct wt_call {
    uint64_t before, after, t0, t1;
} wt_call_t;

typedef struct wt_thread {
    pthread_t tid;
    hk__lat_windows_t *w;
    atomic_int *stop;
    wt_call_t *calls;
    size_t n;
} wt_thread_t;

static void spin_until(uint64_t t)
{
    while (hk__lat_now_ns() < t)
        ;
}

static void *wt_work(void *arg)
{
    wt_thread_t *t = arg;
    uint64_t r = (uint64_t)(uintptr_t)t | 1;
    while (!atomic_load(t->stop) && t->n < WT_CALLS) {
        wt_call_t *c = &t->calls[t->n++];
        r = r * 6364136223846793005u + 1442695040888963407u;
        c->before = hk__lat_mark(t->w);
        c->t0 = hk__lat_now_ns();
        spin_until(c->t0 + (r >> 33) % 40000);
        c->t1 = hk__lat_now_ns();
        c->after = hk__lat_mark(t->w);
    }
    return NULL;
}

static void test_windows_agree_with_the_clock(void)
{
    static wt_thread_t th[WT_THREADS];
    static uint64_t open0[WT_WINDOWS], open1[WT_WINDOWS], close0[WT_WINDOWS];
    hk__lat_windows_t w;
    atomic_int stop;
    unsigned inside = 0, outside = 0, wrong = 0;
    hk__lat_windows_init(&w);
    atomic_init(&stop, 0);
    for (int i = 0; i < WT_THREADS; i++) {
        th[i] = (wt_thread_t){.w = &w, .stop = &stop, .calls = calloc(WT_CALLS, sizeof(wt_call_t))};
        CU_ASSERT_FATAL(th[i].calls != NULL);
        CU_ASSERT_FATAL(pthread_create(&th[i].tid, NULL, wt_work, &th[i]) == 0);
    }
    for (int k = 0; k < WT_WINDOWS; k++) {
        struct timespec gap = {0, 300000};
        nanosleep(&gap, NULL);
        open0[k] = hk__lat_now_ns();
        hk__lat_window_open(&w);
        open1[k] = hk__lat_now_ns();
        nanosleep(&gap, NULL);
        close0[k] = hk__lat_now_ns();
        hk__lat_window_close(&w);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < WT_THREADS; i++) {
        pthread_join(th[i].tid, NULL);
        for (size_t j = 0; j < th[i].n; j++) {
            const wt_call_t *c = &th[i].calls[j];
            if (!hk__lat_overlaps(c->before, c->after)) {
                outside++;
                for (int k = 0; k < WT_WINDOWS; k++)
                    wrong += c->t0 + WT_SKEW_NS <= close0[k] && c->t1 >= open1[k] + WT_SKEW_NS;
                continue;
            }
            uint64_t k = hk__lat_window_of(c->before);
            inside++;
            wrong += k >= WT_WINDOWS || c->after < c->before ||
                     ((c->before & 1) && c->t1 + WT_SKEW_NS < open0[k]);
        }
        free(th[i].calls);
    }
    CU_ASSERT(inside > 0);
    CU_ASSERT(outside > 0);
    CU_ASSERT_EQUAL(wrong, 0);
}

void hkb_test_register_lat(void)
{
    CU_pSuite s = hk_test_suite("call-time histogram", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"buckets tile every time, at most 1/128 wide", test_buckets_tile_every_time},
        {"quantiles exact below 256 ns", test_quantiles_exact_below_256_ns},
        {"quantiles: the bucket of a sort's nearest rank", test_quantiles_match_a_sort},
        {"an empty histogram", test_empty_histogram},
        {"merge, and the summary", test_merge_and_summary},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    s = hk_test_suite("swap windows", NULL, NULL);
    hk_test_add(s, "calls classed by the marks", test_window_marks);
    hk_test_add(s, "classes agree with the clock under threads", test_windows_agree_with_the_clock);
}
