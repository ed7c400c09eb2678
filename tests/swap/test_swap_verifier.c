/* The verifier (hk_loader_options_t.verifier): one probe process a loader
 * keeps for its swaps' verifications. Builds never verified before are
 * verified one after the other by the same process; a build that crashes
 * its verification is refused, costs that process only, and the next
 * verification starts a new one; HK_VERIFIER_PER_SWAP starts one per
 * verification; the loader's destroy ends it. The process is found as a
 * child of this one running "hk-probe --serve". */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "swap_test.h"

#define GENP(file) HK_SWAP_PLUGIN_DIR "/" file

/* The pid of this process's verifier child, 0 when none runs, -1 when
 * there are several. */
static int verifier_pid(void)
{
    char path[320], buf[4096], cmd[512];
    int found = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/children", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        buf[n > 0 ? n : 0] = '\0';
        for (char *save = NULL, *tok = strtok_r(buf, " \n", &save); tok;
             tok = strtok_r(NULL, " \n", &save)) {
            snprintf(path, sizeof path, "/proc/%s/cmdline", tok);
            int c = open(path, O_RDONLY | O_CLOEXEC);
            ssize_t m = c >= 0 ? read(c, cmd, sizeof cmd - 1) : -1;
            if (c >= 0)
                close(c);
            cmd[m > 0 ? m : 0] = '\0';
            /* argv[0] NUL argv[1]: "hk-probe" then "--serve" */
            if (m > 9 && strcmp(cmd + strlen(cmd) + 1, "--serve") == 0)
                found = found ? -1 : atoi(tok);
        }
    }
    if (d)
        closedir(d);
    return found;
}

static hk_loader_t *loader_with(uint32_t verifier)
{
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1, .verifier = verifier};
    hk_loader_t *loader = NULL;
    return hk_loader_create(&o, &loader) == HK_STATUS_OK ? loader : NULL;
}

/* Three builds never verified, one verifier; a crash in the fourth's
 * verification refuses it and ends that verifier; the next starts anew;
 * the loader's destroy ends the last one. */
static void test_one_process(void)
{
    hk_loader_t *loader = loader_with(HK_VERIFIER_KEEP);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_FATAL(loader != NULL);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(loader, GENP("gen-a.so"), NULL, &mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(verifier_pid(), 0);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GENP("gen-b.so"), NULL, NULL), HK_STATUS_OK);
    int first = verifier_pid();
    CU_ASSERT(first > 0);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GENP("gen-a.so"), NULL, NULL), HK_STATUS_OK);
    hk_plugin_t *liar = swp_open(loader, GENP("gen-liar.so"));
    CU_ASSERT_FATAL(liar != NULL);
    CU_ASSERT_EQUAL(verifier_pid(), first);
    /* A build whose self-check crashes: refused, the host lives on. */
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GENP("gen-crash.so"), NULL, NULL),
                    HK_STATUS_LOAD_FAILED);
    CU_ASSERT(strstr(hk_loader_last_error(loader), "verification killed by SIGSEGV") != NULL);
    CU_ASSERT_EQUAL(verifier_pid(), 0);
    /* The next verification of a new build: a new verifier. */
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GENP("gen-b.so"), NULL, NULL), HK_STATUS_OK);
    hk_mhandle_state_t s = {.size = sizeof s};
    CU_ASSERT_EQUAL(hk_mhandle_state(mh, &s), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(hk_plugin_version(s.plugin), "1.1.0");
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(verifier_pid(), 0);
}

static void *swap_to_b(void *arg)
{
    return (void *)(intptr_t)hk_loader_swap(arg, GENP("gen-b.so"), NULL, NULL);
}

/* The verifier outlives the thread that started it: a second verification,
 * from another thread after that one ended, runs in the same process. */
static void test_outlives_thread(void)
{
    hk_loader_t *loader = loader_with(HK_VERIFIER_KEEP);
    hk_mhandle_t *mh = NULL;
    pthread_t t;
    void *st = NULL;
    CU_ASSERT_FATAL(loader != NULL);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(loader, GENP("gen-a.so"), NULL, &mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, swap_to_b, loader), 0);
    pthread_join(t, &st);
    CU_ASSERT_EQUAL((intptr_t)st, HK_STATUS_OK);
    int pid = verifier_pid();
    CU_ASSERT(pid > 0);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GENP("gen-a.so"), NULL, NULL), HK_STATUS_OK);
    CU_ASSERT(strstr(hk_loader_last_error(loader), "SIGKILL") == NULL);
    CU_ASSERT_EQUAL(verifier_pid(), pid);
    /* Killed from outside between two verifications: not held against the
     * next build, which a new verifier verifies. */
    CU_ASSERT_EQUAL(kill(pid, SIGKILL), 0);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GENP("gen-liar.so"), NULL, NULL), HK_STATUS_OK);
    CU_ASSERT(verifier_pid() > 0 && verifier_pid() != pid);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* HK_VERIFIER_PER_SWAP: no process stays between verifications; a value
 * that is neither is refused. */
static void test_per_swap(void)
{
    hk_loader_t *loader = loader_with(HK_VERIFIER_PER_SWAP);
    hk_mhandle_t *mh = NULL;
    CU_ASSERT_FATAL(loader != NULL);
    CU_ASSERT_EQUAL_FATAL(hk_mhandle_create(loader, GENP("gen-a.so"), NULL, &mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_swap(loader, GENP("gen-b.so"), NULL, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(verifier_pid(), 0);
    CU_ASSERT_EQUAL(hk_mhandle_destroy(mh), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    hk_loader_options_t o = {.size = sizeof o, .verifier = 2};
    CU_ASSERT_EQUAL(hk_loader_create(&o, &loader), HK_STATUS_INVALID_VALUE);
}

void swp_register_verifier(void)
{
    CU_pSuite s = hk_test_suite("swap verifier", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"one verifier process for build after build; a crash ends it", test_one_process},
        {"the verifier outlives the thread that started it", test_outlives_thread},
        {"HK_VERIFIER_PER_SWAP keeps none; a bad value is refused", test_per_swap},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
