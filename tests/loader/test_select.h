/* Helpers of test_loader_select.c shared with the other selection tests. */
#ifndef TEST_SELECT_H
#define TEST_SELECT_H

#include "hk_loader.h"
#include "hk_test.h"

/* One plugin name, "tp-sel", in several versions (tests/loader/SConscript). */
#define SEL_A HK_TEST_PLUGIN_DIR "/sel-a"
#define SEL_B HK_TEST_PLUGIN_DIR "/sel-b"
#define SEL_COUNT 8

/* Unsets HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE. */
void env_clear(void);

/* A loader that scanned HK_PLUGIN_PATH="first:second" (second may be NULL);
 * NULL when it cannot be made. */
hk_loader_t *sel_loader(const char *first, const char *second, hk_log_fn log, void *user);

/* Selects request and checks that it resolved to file (below the test
 * plugin directory) with version, and that the module's code agrees. */
void expect_sel(hk_loader_t *loader, const char *request, const char *file,
                const char *version);

/* Selects request and checks NOT_FOUND with a last error containing want. */
void expect_none(hk_loader_t *loader, const char *request, const char *want);

/* test_select_ranges.c: ranges that list comparators, in requests and in
 * the variables. */
void ts_register_select_ranges(CU_pSuite s);

/* test_select_causes.c: a failure names what was refused of that name. */
void ts_register_causes(CU_pSuite s);

#endif
