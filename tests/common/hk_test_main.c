/* The shared main of every handlekit test program (see hk_test.h). */
#include "hk_test.h"

#include <CUnit/Basic.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HK__MAX_SKIPS 256

static struct {
    char *name;
    const char *reason;
} skips[HK__MAX_SKIPS];
static int nskips;

CU_pTest hk_test_add(CU_pSuite suite, const char *name, CU_TestFunc fn)
{
    CU_pTest t = CU_add_test(suite, name, fn);
    if (!t) {
        fprintf(stderr, "test setup: cannot add test %s: %s\n", name, CU_get_error_msg());
        abort();
    }
    return t;
}

CU_pTest hk_test_add_or_skip(CU_pSuite suite, const char *name, CU_TestFunc fn,
                             const char *skip)
{
    CU_pTest t = hk_test_add(suite, name, fn);
    if (skip)
        hk_test_skip(t, skip);
    return t;
}

void hk_test_add_all(CU_pSuite suite, const hk_test_case_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hk_test_add(suite, t[i].name, t[i].fn);
}

CU_pSuite hk_test_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean)
{
    CU_pSuite s = CU_add_suite(name, init, clean);
    if (!s) {
        fprintf(stderr, "test setup: cannot add suite %s: %s\n", name, CU_get_error_msg());
        abort();
    }
    return s;
}

void hk_test_skip(CU_pTest test, const char *reason)
{
    if (!test)
        return;
    CU_set_test_active(test, CU_FALSE);
    if (nskips < HK__MAX_SKIPS) {
        skips[nskips].name = strdup(test->pName); /* CUnit frees its copy at cleanup */
        skips[nskips].reason = reason;
        nskips++;
    }
}

void hk_test_skip_suite(CU_pSuite suite, const char *reason)
{
    for (CU_pTest t = suite ? suite->pTest : NULL; t; t = t->pNext)
        hk_test_skip(t, reason);
}

/* The child of hk_test_unreachable: takes uid, writes the first directory on
 * the way to path it cannot search (or path, if unreadable) to fd. */
static void hk__reach_child(unsigned uid, const char *path, int fd)
{
    char part[PATH_MAX];
    if (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0)
        _exit(2);
    size_t n = strlen(path);
    for (size_t i = 1; i <= n && i < sizeof part; i++) {
        if (i < n && path[i] != '/')
            continue;
        memcpy(part, path, i);
        part[i] = '\0';
        if (access(part, i == n ? R_OK | X_OK : X_OK) != 0) {
            dprintf(fd, "uid %u cannot %s %s (%s)", uid, i == n ? "read" : "search", part,
                    strerror(errno));
            break;
        }
    }
    _exit(0);
}

const char *hk_test_unreachable(unsigned uid, const char *path)
{
    static char why[PATH_MAX + 128];
    int p[2];
    if (geteuid() != 0 || pipe(p) != 0)
        return NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        hk__reach_child(uid, path, p[1]);
    }
    close(p[1]);
    ssize_t got = pid > 0 ? read(p[0], why, sizeof why - 1) : -1;
    close(p[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    if (got <= 0)
        return NULL;
    why[got] = '\0';
    return why;
}

/* Whether "suite: test" contains any of the patterns following flag in argv. */
static int named_in(int argc, char **argv, const char *flag, const char *suite, const char *test)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], flag) == 0 &&
            (strstr(suite, argv[i + 1]) || strstr(test, argv[i + 1])))
            return 1;
    return 0;
}

/* --only PATTERN and --except PATTERN (each repeatable, matched against the
 * suite's and the test's names): tests left out are made inactive and
 * counted apart from skips. Other arguments are left to the program (some
 * run themselves again with arguments of their own). Returns how many tests
 * were left out. */
static unsigned select_tests(int argc, char **argv)
{
    int only = 0;
    unsigned left_out = 0;
    for (int i = 1; i + 1 < argc; i++)
        only |= strcmp(argv[i], "--only") == 0;
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
        for (CU_pTest t = s->pTest; t; t = t->pNext) {
            if (!t->fActive)
                continue;
            if ((only && !named_in(argc, argv, "--only", s->pName, t->pName)) ||
                named_in(argc, argv, "--except", s->pName, t->pName)) {
                CU_set_test_active(t, CU_FALSE);
                left_out++;
            }
        }
    return left_out;
}

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        return 2;
    }
    if (hk_test_register() != 0) {
        fprintf(stderr, "test registration failed\n");
        CU_cleanup_registry();
        printf("0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    unsigned left_out = select_tests(argc, argv);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    putchar('\n');

    /* CUnit 2.1-3 sets no exit status: read the counts before cleaning up. */
    CU_pRunSummary sum = CU_get_run_summary();
    unsigned run = sum->nTestsRun, failed = sum->nTestsFailed;
    unsigned inactive = sum->nTestsInactive > left_out ? sum->nTestsInactive - left_out : 0;
    unsigned suites_failed = sum->nSuitesFailed;
    CU_cleanup_registry();

    const char *strict = getenv("HK_TEST_NO_SKIP");
    int no_skip = strict && strcmp(strict, "1") == 0;
    for (int i = 0; i < nskips; i++) {
        printf("skipped: %s (%s)%s\n", skips[i].name ? skips[i].name : "?", skips[i].reason,
               no_skip ? " -- counted as failed: HK_TEST_NO_SKIP=1" : "");
        free(skips[i].name);
    }
    if (suites_failed)
        printf("%u suite(s) failed to initialise; their tests did not run\n", suites_failed);

    if (left_out)
        printf("%u test(s) not selected (--only/--except)\n", left_out);
    unsigned passed = run - failed;
    unsigned nfail = failed + suites_failed + (no_skip ? inactive : 0);
    printf("%u passed, %u failed, %u skipped\n", passed, nfail, no_skip ? 0 : inactive);
    fflush(stdout);
    return (nfail > 0 || run == 0) ? 1 : 0;
}
