/* hk-bench's P8 run (bench/hkb_p8.c) on two builds of hk-cpu: both
 * workloads swap, every call lands in one class, the quantiles and each
 * swap's longest call agree with the histograms, refused swaps are counted
 * with their reason, and a wrong result or a missing build fails the run
 * with a reason. The times are the CPU's; none is asserted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_abi.h"
#include "hk_test.h"
#include "hkb_p8.h"

void hkb_test_register_p8(void);

static hkb_p8_setup_t setup(hkb_p8_load_t load, const char *a, const char *b, int swaps)
{
    return (hkb_p8_setup_t){.load = load, .path_a = a, .path_b = b,
                            .device = HK_DEVICE_CURRENT, .threads = 8, .swaps = swaps,
                            .gap_us = 1000};
}

/* What every successful run must show. */
static void check_run(const hkb_p8_result_t *r, int swaps, int refused)
{
    uint64_t counted = 0;
    double longest = 0.0;
    CU_ASSERT_EQUAL(r->swaps, swaps);
    CU_ASSERT_EQUAL(r->refused, refused);
    for (int c = 0; c < HKB_P8_CLASSES; c++) {
        hk__lat_summary_t s;
        hk__lat_summarize(&r->lat[c], &s);
        counted += s.count;
        CU_ASSERT(s.p50_us <= s.p99_us && s.p99_us <= s.p999_us && s.p999_us <= s.max_us);
    }
    CU_ASSERT_EQUAL(counted, r->calls);
    CU_ASSERT(r->lat[HKB_P8_DURING].count > 0);
    CU_ASSERT(r->lat[HKB_P8_QUIET].count > 0);
    CU_ASSERT(r->quiet_s >= r->swapping_s);
    for (int i = 0; i < r->swaps; i++) {
        const hkb_p8_swap_t *s = &r->swap[i];
        longest = s->longest_call_us > longest ? s->longest_call_us : longest;
        CU_ASSERT_EQUAL(s->ok, i >= refused);
        if (s->longest_call_us > 0.0) { /* the call it was, begun in the swap's window */
            CU_ASSERT_PTR_NOT_NULL(s->longest_what);
            CU_ASSERT(s->longest_at_us > -1e6 && s->longest_at_us < 60e6);
        }
        if (s->ok) {
            CU_ASSERT(s->us[HKB_P8_SWITCH] > 0.0);
            CU_ASSERT(s->us[HKB_P8_PREPARE_CALL] > 0.0);
            CU_ASSERT(s->us[HKB_P8_COMMIT_CALL] >= s->us[HKB_P8_SWITCH]);
            CU_ASSERT_FALSE(s->module_stayed); /* hk-cpu is unload-safe */
        }
    }
    /* The longest call of the during class is the longest of some swap. */
    CU_ASSERT_EQUAL(longest, (double)r->lat[HKB_P8_DURING].max_ns / 1e3);
}

static void run_load(hkb_p8_load_t load)
{
    hkb_p8_setup_t s = setup(load, HKB_TEST_CPU_A, HKB_TEST_CPU_B, 6);
    hkb_p8_result_t r;
    char why[512] = "";
    int rc = hkb_p8_run(&s, &r, why, sizeof why);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    if (rc != 0)
        fprintf(stderr, "\n  %s\n", why);
    CU_ASSERT_STRING_EQUAL(r.name_a, "hk-cpu 1.0.0");
    CU_ASSERT_STRING_EQUAL(r.name_b, "hk-cpu 1.0.1");
    check_run(&r, 6, 0);
    hk__lat_summary_t d, q;
    hk__lat_summarize(&r.lat[HKB_P8_DURING], &d);
    hk__lat_summarize(&r.lat[HKB_P8_QUIET], &q);
    printf("\n    %s: %llu calls; during swaps p50 %.1f p99.9 %.1f max %.1f us, quiet p50 %.1f "
           "p99.9 %.1f max %.1f us    ", hkb_p8_load_name(load), (unsigned long long)r.calls,
           d.p50_us, d.p999_us, d.max_us, q.p50_us, q.p999_us, q.max_us);
    hkb_p8_result_free(&r);
}

static void test_flood(void)
{
    run_load(HKB_P8_FLOOD);
}

static void test_service(void)
{
    run_load(HKB_P8_SERVICE);
}

static void test_refused_swaps_counted(void)
{
    hkb_p8_setup_t s = setup(HKB_P8_SERVICE, HKB_TEST_CPU_A, HKB_TEST_WRONG, 3);
    hkb_p8_result_t r;
    char why[512] = "";
    CU_ASSERT_EQUAL_FATAL(hkb_p8_run(&s, &r, why, sizeof why), 0);
    check_run(&r, 3, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.refusal, "failed verification"));
    hkb_p8_result_free(&r);
}

static void test_wrong_results_fail_the_run(void)
{
    for (int load = HKB_P8_FLOOD; load <= HKB_P8_SERVICE; load++) {
        hkb_p8_setup_t s = setup((hkb_p8_load_t)load, HKB_TEST_WRONG, HKB_TEST_CPU_A, 2);
        hkb_p8_result_t r;
        char why[512] = "";
        CU_ASSERT_EQUAL(hkb_p8_run(&s, &r, why, sizeof why), -1);
        CU_ASSERT_PTR_NULL(r.lat);
        /* the flood's y is not back to 0; the service's dot is off */
        CU_ASSERT_PTR_NOT_NULL(strstr(why, load == HKB_P8_FLOOD ? "expected 0" : "sdot gave"));
    }
}

static void test_bad_set_up(void)
{
    hkb_p8_setup_t s = setup(HKB_P8_FLOOD, HKB_TEST_CPU_A, "/nonexistent/hk-cpu-9.so", 2);
    hkb_p8_result_t r;
    char why[512] = "";
    CU_ASSERT_EQUAL(hkb_p8_run(&s, &r, why, sizeof why), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "/nonexistent/hk-cpu-9.so"));
    s = setup(HKB_P8_FLOOD, HKB_TEST_CPU_A, HKB_TEST_CPU_B, 0);
    CU_ASSERT_EQUAL(hkb_p8_run(&s, &r, why, sizeof why), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "bad set-up"));
    s.swaps = 1;
    s.threads = HKB_P8_MAX_THREADS + 1;
    CU_ASSERT_EQUAL(hkb_p8_run(&s, &r, why, sizeof why), -1);
}

void hkb_test_register_p8(void)
{
    CU_pSuite s = hk_test_suite("P8 run on hk-cpu", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"flood: 8 threads, 6 swaps", test_flood},
        {"service: 8 threads, 6 swaps", test_service},
        {"refused swaps counted, with the first reason", test_refused_swaps_counted},
        {"a wrong result fails the run", test_wrong_results_fail_the_run},
        {"a missing build or a bad set-up fails it", test_bad_set_up},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
