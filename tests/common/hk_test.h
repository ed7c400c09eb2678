/* handlekit test programs: one shared CUnit runner.
 *
 * A test program defines hk_test_register(), which adds its suites with
 * CU_add_suite/CU_add_test. The runner (hk_test_main.c) runs them in CUnit's
 * verbose basic mode, prints the run summary and then one line
 * "N passed, N failed, N skipped", and exits non-zero when a test or suite
 * failed. Tests that need something absent here (a GPU, the CUDA runtime) are
 * made inactive with hk_test_skip(), counted as skipped and listed with reason.
 * With HK_TEST_NO_SKIP=1 in the environment a skipped test counts as failed.
 * Arguments `--only PATTERN` and `--except PATTERN` (repeatable; a pattern is
 * a substring of the suite's or the test's name) run a selection; the tests
 * left out are counted apart, neither passed nor skipped. */
#ifndef HK_TEST_H
#define HK_TEST_H

#include <stddef.h>

#include <CUnit/CUnit.h>

/* Defined by each test program: register its suites. Return 0, or non-zero
 * when registration itself failed. */
int hk_test_register(void);

/* Adds a test; aborts the program (a test-setup bug) when CUnit refuses. */
CU_pTest hk_test_add(CU_pSuite suite, const char *name, CU_TestFunc fn);

/* Adds a test as hk_test_add does and, when skip is not NULL, marks it
 * inactive with that reason (hk_test_skip). */
CU_pTest hk_test_add_or_skip(CU_pSuite suite, const char *name, CU_TestFunc fn,
                             const char *skip);

/* One row of a suite's table of tests: the test's name and its function. */
typedef struct hk_test_case {
    const char *name;
    CU_TestFunc fn;
} hk_test_case_t;

/* Adds the n tests of table t to suite, in the table's order (each as
 * hk_test_add does: CUnit keeps copies of the names). */
void hk_test_add_all(CU_pSuite suite, const hk_test_case_t *t, size_t n);

/* Adds a suite; aborts the program when CUnit refuses. */
CU_pSuite hk_test_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean);

/* Marks test inactive (skipped) with a reason that the runner prints. */
void hk_test_skip(CU_pTest test, const char *reason);

/* Marks every test of a suite inactive. */
void hk_test_skip_suite(CU_pSuite suite, const char *reason);

/* Why user uid cannot reach path (search every directory on the way to it
 * and read it), as "uid 65534 cannot search /home/me" when a private home
 * directory lies above a checkout; NULL when it can, or when this process
 * cannot take that uid to find out (not root). Found in a child process
 * that takes the uid. The text is in a static buffer, valid until the next
 * call. */
const char *hk_test_unreachable(unsigned uid, const char *path);

#endif /* HK_TEST_H */
