/* The trust rule at a sticky directory (common/lib/hk__trust.c): a directory that
 * others may write is passed when it is sticky, owned by root or us, and
 * everything below it on the way to the plugin is ours (or root's) and
 * writable by nobody else; a plain world-writable directory never is, and a
 * process with elevated privileges keeps the strict rule. Each case builds
 * its own small tree under the build's temporary directory, with the modes
 * set by chmod (the umask must not decide them). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_test.h"
#include "test_loader_util.h"

static char tmp[4096]; /* this test's directory, under HK_TEST_TMP_DIR */

static void setup(void)
{
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(tmp, sizeof(tmp)), 0);
}

static void teardown(void)
{
    tl_rmtree(tmp);
}

/* Makes parent/name with mode (set after creation), into out. */
static void make_dir(const char *parent, const char *name, mode_t mode, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", parent, name);
    CU_ASSERT_EQUAL_FATAL(mkdir(out, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(out, mode), 0);
}

/* Opens path in a host child: 1 when it loaded. */
static int loads(const char *path)
{
    tl_host_job_t job = {.open_path = path};
    tl_host_run_t run;
    char line[8400];
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    snprintf(line, sizeof(line), "report=%s|loaded|OK|", path);
    return tl_has_line(&run, line) && tl_has_line(&run, "plugins=1");
}

/* Opens path in a host child and checks it was refused with this reason. */
static void refused(const char *path, const char *reason)
{
    tl_host_job_t job = {.open_path = path};
    tl_host_run_t run;
    char line[9000];
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    snprintf(line, sizeof(line), "report=%s|scan|INSECURE|%s", path, reason);
    CU_ASSERT(tl_has_line(&run, line));
    CU_ASSERT(tl_has_line(&run, "plugins=0"));
}

/* Our own directory below a sticky world-writable one, as a clone under
 * /tmp is: its plugins load, by path and by a scan of that directory. */
static void test_sticky_own_subdir_accepted(void)
{
    char sticky[4200], own[4300], p[4400];
    setup();
    make_dir(tmp, "sticky", 01777, sticky, sizeof(sticky));
    make_dir(sticky, "own", 0755, own, sizeof(own));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), own, "p.so", 0644, p, sizeof(p)), 0);
    CU_ASSERT(loads(p));
    tl_host_job_t job = {.scan_dir = own};
    tl_host_run_t run;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    CU_ASSERT(tl_has_line(&run, "plugins=1"));
    teardown();
}

/* Below the sticky directory every entry must be writable by its owner
 * only: a group- or world-writable directory or file there is refused, and
 * so is a second sticky directory (it is writable by others too). */
static void test_sticky_writable_entry_refused(void)
{
    char sticky[4200], gw[4300], ww[4300], own[4300], inner[4400], p[4500], reason[9000];
    setup();
    make_dir(tmp, "sticky", 01777, sticky, sizeof(sticky));
    make_dir(sticky, "gw", 0775, gw, sizeof(gw));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), gw, "p.so", 0644, p, sizeof(p)), 0);
    snprintf(reason, sizeof(reason), "directory %s is writable by its group (mode 0775)", gw);
    refused(p, reason);

    make_dir(sticky, "ww", 0777, ww, sizeof(ww));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), ww, "p.so", 0644, p, sizeof(p)), 0);
    snprintf(reason, sizeof(reason), "directory %s is writable by others (mode 0777)", ww);
    refused(p, reason);

    make_dir(sticky, "own", 0755, own, sizeof(own));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), own, "gw.so", 0664, p, sizeof(p)),
                          0);
    refused(p, "file is writable by its group (mode 0664)");

    make_dir(own, "sticky2", 01777, inner, sizeof(inner));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), inner, "p.so", 0644, p, sizeof(p)),
                          0);
    snprintf(reason, sizeof(reason), "directory %s is writable by others (mode 1777): below the "
             "sticky directory %s every directory must be writable by its owner only", inner,
             sticky);
    refused(p, reason);
    teardown();
}

/* Entries of another user below the sticky directory (uid 65534): a
 * directory, a file, and the sticky directory itself, whose owner may
 * rename what others put in it. */
static void test_sticky_foreign_entry_refused(void)
{
    char sticky[4200], foreign[4300], p[4400], reason[9000];
    unsigned long me = (unsigned long)geteuid();
    setup();
    make_dir(tmp, "sticky", 01777, sticky, sizeof(sticky));
    make_dir(sticky, "foreign", 0755, foreign, sizeof(foreign));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), foreign, "p.so", 0644, p, sizeof(p)),
                          0);
    CU_ASSERT_EQUAL_FATAL(chown(foreign, 65534, 65534), 0);
    snprintf(reason, sizeof(reason), "directory %s is owned by uid 65534, neither root nor the "
             "effective user (uid %lu)", foreign, me);
    refused(p, reason);

    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), sticky, "f.so", 0644, p, sizeof(p)),
                          0);
    CU_ASSERT_EQUAL_FATAL(chown(p, 65534, 65534), 0);
    snprintf(reason, sizeof(reason), "file is owned by uid 65534, neither root nor the "
             "effective user (uid %lu)", me);
    refused(p, reason);

    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), sticky, "g.so", 0644, p, sizeof(p)),
                          0);
    CU_ASSERT_EQUAL_FATAL(chown(sticky, 65534, 65534), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(sticky, 01777), 0); /* after chown */
    snprintf(reason, sizeof(reason), "directory %s is writable by others (mode 1777) and owned "
             "by uid 65534: a sticky directory is trusted only when root or the effective user "
             "(uid %lu) owns it", sticky, me);
    refused(p, reason);
    teardown();
}

/* A file lying directly in the sticky directory is refused, ours or not:
 * a second name for a file of ours there may be a hard link another user
 * made where protected_hardlinks is off, and once we delete our own name
 * nothing tells it from a file we put there; a name there may have been
 * taken first by anybody. */
static void test_sticky_direct_file_refused(void)
{
    char sticky[4200], own[4300], p[4400], ln[4400], q[4400], reason[9000];
    setup();
    make_dir(tmp, "sticky", 01777, sticky, sizeof(sticky));
    make_dir(tmp, "own", 0755, own, sizeof(own));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), own, "p.so", 0644, p, sizeof(p)), 0);
    snprintf(ln, sizeof(ln), "%s/l.so", sticky);
    CU_ASSERT_EQUAL_FATAL(link(p, ln), 0);
    snprintf(reason, sizeof(reason), "file lies directly in the sticky directory %s, where "
             "others can make names (a hard link to another file, a name taken first): keep "
             "it in a directory of your own below it", sticky);
    refused(ln, reason);
    CU_ASSERT(loads(p)); /* the same file in our own directory */
    CU_ASSERT_EQUAL_FATAL(unlink(p), 0);
    refused(ln, reason); /* one link left: still refused */
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), sticky, "q.so", 0644, q, sizeof(q)),
                          0);
    refused(q, reason); /* a file of our own making there */
    teardown();
}

/* Without the sticky bit, others may rename and replace what is there:
 * refused whatever lies below. */
static void test_world_writable_not_sticky_refused(void)
{
    char ww[4200], own[4300], p[4400], reason[9000];
    setup();
    make_dir(tmp, "ww", 0777, ww, sizeof(ww));
    make_dir(ww, "own", 0755, own, sizeof(own));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), own, "p.so", 0644, p, sizeof(p)), 0);
    snprintf(reason, sizeof(reason), "directory %s is writable by others (mode 0777)", ww);
    refused(p, reason);
    teardown();
}

/* Elevated privileges keep the strict rule: the set-user-ID helper's
 * default directory (HK_TEST_SECURE_DIR, made here a link to our directory
 * below a sticky one) is refused at the sticky directory, while the same
 * helper without the bit loads it. */
static void run_helper(const char *helper, char *out, size_t n)
{
    char cmd[9000];
    snprintf(cmd, sizeof(cmd), "'%s'", helper);
    FILE *f = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = '\0';
    CU_ASSERT_EQUAL(pclose(f), 0);
}

static void test_elevated_strict(void)
{
    char sticky[4200], own[4300], p[4400], helper[4400], out[65536], line[9000];
    setup();
    make_dir(tmp, "sticky", 01777, sticky, sizeof(sticky));
    make_dir(sticky, "own", 0755, own, sizeof(own));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), own, "p.so", 0644, p, sizeof(p)), 0);
    CU_ASSERT_EQUAL_FATAL(tl_copy(HK_TEST_SECURE_HELPER, tmp, "helper", 0755, helper,
                                  sizeof(helper)), 0);
    unlink(HK_TEST_SECURE_DIR);
    rmdir(HK_TEST_SECURE_DIR);
    CU_ASSERT_EQUAL_FATAL(symlink(own, HK_TEST_SECURE_DIR), 0);

    run_helper(helper, out, sizeof(out));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "secure=0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "plugins=1\n"));

    CU_ASSERT_EQUAL_FATAL(chown(helper, 65534, 65534), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(helper, 04755), 0); /* after chown, which clears it */
    run_helper(helper, out, sizeof(out));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "secure=1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "plugins=0\n"));
    snprintf(line, sizeof(line), "report=%s|scan|INSECURE|directory %s is writable by others "
             "(mode 1777): a sticky directory is trusted only without elevated privileges "
             "(AT_SECURE)\n", HK_TEST_SECURE_DIR, sticky);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, line));
    if (!strstr(out, line))
        printf("\n    helper said:\n%s", out);
    unlink(HK_TEST_SECURE_DIR);
    teardown();
}

/* Makes the link name -> target as uid 65534, in a child that gave up
 * root: what another local user can do in a sticky directory. 0 when made. */
static int symlink_as_other(const char *target, const char *name)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        _exit(symlink(target, name) == 0 ? 0 : 1);
    }
    int st = -1;
    if (pid > 0)
        waitpid(pid, &st, 0);
    return pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* A link another user made in a sticky directory is not followed, to a
 * file of ours or to anything else: what it points to is their choice (a
 * test build of ours with a higher version, a crashing one, a device). A
 * link we made there is followed. */
static void test_sticky_foreign_link_refused(void)
{
    char sticky[4200], own[4300], p[4400], theirs[4400], ours[4400], reason[9000];
    setup();
    CU_ASSERT_EQUAL_FATAL(chmod(tmp, 0755), 0); /* uid 65534 must reach the sticky one */
    make_dir(tmp, "sticky", 01777, sticky, sizeof(sticky));
    make_dir(tmp, "own", 0755, own, sizeof(own));
    CU_ASSERT_EQUAL_FATAL(tl_copy(tl_plugin("tp_good.so"), own, "p.so", 0644, p, sizeof(p)), 0);
    snprintf(theirs, sizeof(theirs), "%s/theirs.so", sticky);
    CU_ASSERT_EQUAL_FATAL(symlink_as_other(p, theirs), 0);
    snprintf(reason, sizeof(reason), "symbolic link %s is owned by uid 65534, neither root nor "
             "the effective user (uid %lu): such a link is not followed", theirs,
             (unsigned long)geteuid());
    refused(theirs, reason);
    tl_host_job_t job = {.scan_dir = sticky};
    tl_host_run_t run;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    CU_ASSERT(tl_has_line(&run, "plugins=0"));
    snprintf(ours, sizeof(ours), "%s/ours.so", sticky);
    CU_ASSERT_EQUAL_FATAL(symlink(p, ours), 0);
    CU_ASSERT(loads(ours));
    teardown();
}

/* Only a regular file is ever opened for reading: a FIFO named like a
 * plugin (reached through a link of ours, as a device node would be) is
 * refused after a look at what it is, and never opened. inotify tells an
 * open; the control opens it and sees the event. */
static void test_special_file_never_opened(void)
{
    char own[4300], fifo[4400], link[4400], line[9000];
    char ev[sizeof(struct inotify_event) + NAME_MAX + 1];
    setup();
    make_dir(tmp, "own", 0755, own, sizeof(own));
    snprintf(fifo, sizeof(fifo), "%s/fifo", own);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0644), 0);
    snprintf(link, sizeof(link), "%s/f.so", own);
    CU_ASSERT_EQUAL_FATAL(symlink(fifo, link), 0);
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    CU_ASSERT_FATAL(in >= 0);
    CU_ASSERT_FATAL(inotify_add_watch(in, fifo, IN_OPEN) >= 0);
    tl_host_job_t job = {.open_path = link};
    tl_host_run_t run;
    CU_ASSERT_EQUAL(tl_host_run(&job, &run), 0);
    snprintf(line, sizeof(line), "report=%s|scan|LOAD_FAILED|not a regular file", link);
    CU_ASSERT(tl_has_line(&run, line));
    CU_ASSERT_EQUAL(read(in, ev, sizeof(ev)), -1); /* no event: never opened */
    int fd = open(fifo, O_RDONLY | O_NONBLOCK);
    CU_ASSERT(fd >= 0);
    if (fd >= 0)
        close(fd);
    CU_ASSERT(read(in, ev, sizeof(ev)) > 0); /* the control: an open is seen */
    close(in);
    teardown();
}

void tl_register_trust(void)
{
    /* Below /tmp a sticky directory made here is a second one, which the
     * rule refuses whatever lies below it: the cases that make one need a
     * build tree outside any (the build itself then shows the first). */
    static char nested[PATH_MAX + 160];
    const char *other;
    const char *sticky = tl_sticky_above();
    if (sticky)
        snprintf(nested, sizeof(nested), "the build tree lies below the sticky directory %s: "
                 "one made here would be a second, refused whatever lies below", sticky);
    CU_pSuite s = hk_test_suite("loader_trust", NULL, NULL);
    CU_pTest own = hk_test_add(s, "sticky directory, our own directory below: accepted",
                               test_sticky_own_subdir_accepted);
    CU_pTest entry = hk_test_add(s, "sticky directory, a writable entry below: refused",
                                 test_sticky_writable_entry_refused);
    CU_pTest foreign = hk_test_add(s, "sticky directory, another user's entry below: refused",
                                   test_sticky_foreign_entry_refused);
    CU_pTest hard = hk_test_add(s, "sticky directory, a file directly there (a hard link, "
                                "one link left, our own): refused",
                                test_sticky_direct_file_refused);
    hk_test_add(s, "world-writable directory without the sticky bit: refused",
                test_world_writable_not_sticky_refused);
    CU_pTest link = hk_test_add(s, "sticky directory, a link another user made: not followed; "
                                "ours is", test_sticky_foreign_link_refused);
    hk_test_add(s, "a FIFO named like a plugin: refused, never opened",
                test_special_file_never_opened);
    CU_pTest elevated = hk_test_add(s, "set-user-ID: a sticky directory above the default one "
                                    "is refused", test_elevated_strict);
    const char *why = tl_setuid_loading_unavailable();
    if (sticky) {
        hk_test_skip(own, nested);
        hk_test_skip(entry, nested);
        hk_test_skip(foreign, nested);
        hk_test_skip(hard, nested);
        hk_test_skip(link, nested);
    } else if (geteuid() != 0) {
        hk_test_skip(foreign, "needs root to give files to uid 65534");
        hk_test_skip(link, "needs root to act as uid 65534");
    } else if ((other = hk_test_unreachable(65534, HK_TEST_TMP_DIR))) {
        hk_test_skip(link, other);
    }
    if (why)
        hk_test_skip(elevated, why);
}
