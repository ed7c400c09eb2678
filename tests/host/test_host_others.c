/* hk-host against another local user (docs/security.md): a copy of hk-host
 * lies in a sticky directory others can write, as a program in /tmp does,
 * and uid 65534 plants what hk-host would run beside it (hk-probe,
 * hk-validate, hk-bench) plus a script that records whether it ran. None of
 * it may run: each is refused with a line naming the file and why. The
 * attacker's steps run as uid 65534 in a child that gave up root; the cases
 * are skipped with the reason where the tests do not run as root or that
 * user cannot reach the build tree. */
#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_abi.h"
#include "host_util.h"

static char top[1024], sticky[1100];
/* The build tree lies below a sticky directory (a clone in /tmp): the one
 * made here is then a second one, refused before any name in it is looked
 * at, and each refusal says that instead of the reason of its own. */
static int nested;

/* What a refusal must say: the case's own reason, or the nested one. */
static const char *reason(const char *own)
{
    return nested ? "every directory must be writable by its owner only" : own;
}

/* Runs the shell command cmd as uid 65534; its exit status. */
static int as_other(const char *cmd)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(126);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st = -1;
    if (pid > 0)
        waitpid(pid, &st, 0);
    return pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* top (ours, 0755) holding sticky (mode 1777) with a copy of hk-host, and
 * the other user's script "run-me" there that writes "ran" when run. */
static void setup(void)
{
    char cmd[3000], from[1100], to[1200];
    temp_dir(top, sizeof top, "others");
    CU_ASSERT_FATAL(chmod(top, 0755) == 0);
    snprintf(sticky, sizeof sticky, "%s/sticky", top);
    CU_ASSERT_FATAL(mkdir(sticky, 0700) == 0 && chmod(sticky, 01777) == 0);
    snprintf(from, sizeof from, "%s", HK_TEST_HOST);
    snprintf(to, sizeof to, "%s/hk-host", sticky);
    copy_file(from, to, 0755);
    snprintf(cmd, sizeof cmd, "cd '%s' && printf 'id -u > %s/ran\\n' > run-me && chmod 755 run-me",
             sticky, sticky);
    CU_ASSERT_FATAL(as_other(cmd) == 0);
}

/* Whether the other user's script ran. */
static int ran(void)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/ran", sticky);
    return access(path, F_OK) == 0;
}

/* The loader of a program in a sticky directory finds "hk-probe" beside it:
 * a link to /bin/sh that uid 65534 made. Executed, /bin/sh would read its
 * first argument as a script from the current directory, where that user
 * put one named like it. */
static void test_planted_probe(void)
{
    char cmd[2000], script[32], *out;
    setup();
    snprintf(script, sizeof script, "%u", (unsigned)HK_ABI_VERSION(1, 0));
    snprintf(cmd, sizeof cmd, "cd '%s' && ln -s /bin/sh hk-probe && cp run-me %s", sticky,
             script);
    CU_ASSERT_FATAL(as_other(cmd) == 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && " TWINS "./hk-host list", sticky);
    run(cmd, &out);
    CU_ASSERT(has(out, "no usable probe program: "));
    CU_ASSERT(has(out, reason("/sticky/hk-probe: symbolic link ")));
    CU_ASSERT(has(out, reason("/sticky/hk-probe is owned by uid 65534, neither root nor the "
                              "effective user (uid 0): such a link is not followed")));
    CU_ASSERT(!ran());
    free(out);
    remove_tree(top);
}

/* hk-validate and hk-bench beside a hk-host in a sticky directory, made by
 * uid 65534: a script of theirs and a link of theirs to /bin/sh. */
static void test_planted_siblings(void)
{
    char cmd[2000], *out;
    setup();
    snprintf(cmd, sizeof cmd, "cd '%s' && cp run-me hk-validate && ln -s /bin/sh hk-bench && "
             "cp run-me x", sticky);
    CU_ASSERT_FATAL(as_other(cmd) == 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && " TWINS "./hk-host validate " HK_TEST_TWIN_A, sticky);
    out = expect_kept(run, cmd, 1, "hk-host: validate: ", "/sticky/hk-validate is refused: ",
                      reason("file is owned by uid 65534, neither root nor the effective user "
                             "(uid 0)"), NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    snprintf(cmd, sizeof cmd, "cd '%s' && ./hk-host bench x", sticky);
    out = expect_kept(run, cmd, 1, "hk-host: bench: ", "/sticky/hk-bench is refused: ",
                      reason("/sticky/hk-bench is owned by uid 65534"), NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    CU_ASSERT(!ran());
    /* Our own program directly in the sticky directory: refused all the
     * same, since anybody could have taken the name first. */
    snprintf(cmd, sizeof cmd, "cd '%s' && rm -f hk-validate && cp run-me hk-validate && "
             "chmod 755 hk-validate", sticky);
    CU_ASSERT_FATAL(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && " TWINS "./hk-host validate " HK_TEST_TWIN_A, sticky);
    expect(run, cmd, 1, "/sticky/hk-validate is refused: ",
           reason("file lies directly in the sticky directory "), NULL);
    CU_ASSERT(!ran());
    remove_tree(top);
}

void host_register_others(CU_pSuite s)
{
    CU_pTest probe = hk_test_add(s, "a planted hk-probe beside hk-host: refused, nothing of "
                                 "theirs runs", test_planted_probe);
    CU_pTest siblings = hk_test_add(s, "planted sibling programs (hk-validate, hk-bench): "
                                    "refused, nothing of theirs runs", test_planted_siblings);
    const char *no = NULL;
    char bin[1100], *copy = strdup(HK_TEST_HOST);
    snprintf(bin, sizeof bin, "%s", dirname(copy));
    free(copy);
    /* A sticky directory (writable by others) above the build tree? */
    for (char part[1100], *cut = strcpy(part, bin); (cut = strrchr(part, '/')) && cut != part;) {
        struct stat st;
        *cut = '\0';
        if (stat(part, &st) == 0 && (st.st_mode & S_ISVTX) && (st.st_mode & S_IWOTH))
            nested = 1;
    }
    if (geteuid() != 0)
        no = "needs root to act as uid 65534";
    else
        no = hk_test_unreachable(65534, bin);
    if (no) {
        hk_test_skip(probe, no);
        hk_test_skip(siblings, no);
    }
}
