/* hk-host run's memory check against a cgroup's limit: hk-host run in a
 * cgroup of its own with a memory limit far below MemAvailable (where this
 * process may make one: root, a writable v1 memory controller or v2
 * hierarchy), and hkh_cgroup_limit on fake /proc and /sys files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hk_host_mem.h"
#include "host_util.h"

#define CG_LIMIT (256ULL << 20)

static char cg_dir[1024]; /* the test's cgroup */

/* This process's cgroup path in the hierarchy whose /proc/self/cgroup line
 * starts with "0::" (v2) or names the memory controller (v1). */
static int cg_path(int v1, char *path, size_t n)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && !found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        found = v1 ? strstr(c1 + 1, "memory") != NULL : strcmp(line, "0:") == 0;
        if (found)
            snprintf(path, n, "%s", strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1);
    }
    if (f)
        fclose(f);
    return found;
}

static int write_text(const char *dir, const char *file, const char *text)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int rc = fputs(text, f) < 0;
    return fclose(f) != 0 || rc ? -1 : 0;
}

/* Makes a cgroup below this process's with a memory limit of CG_LIMIT into
 * cg_dir; NULL, or why not. */
static const char *cg_make(void)
{
    static const struct {
        int v1;
        const char *mount, *limit;
    } where[] = {{1, "/sys/fs/cgroup/memory", "memory.limit_in_bytes"},
                 {0, "/sys/fs/cgroup", "memory.max"},
                 {0, "/sys/fs/cgroup/unified", "memory.max"}};
    char path[512], text[32];
    snprintf(text, sizeof text, "%llu", CG_LIMIT);
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        if (!cg_path(where[i].v1, path, sizeof path))
            continue;
        snprintf(cg_dir, sizeof cg_dir, "%s%s/hk-host-test-%ld", where[i].mount, path,
                 (long)getpid());
        if (mkdir(cg_dir, 0755) != 0)
            continue;
        if (write_text(cg_dir, where[i].limit, text) == 0)
            return NULL;
        rmdir(cg_dir);
    }
    cg_dir[0] = '\0';
    return "no cgroup with a memory limit can be made here (root and a writable memory "
           "controller are needed)";
}

/* hk-host run in a cgroup limited to 256 MiB, with a size that needs 512
 * MiB and MemAvailable far more: refused, exit 3, one line naming the
 * cgroup's limit and its file. Before, the check read MemAvailable alone,
 * the run allocated, and the OOM killer ended it (SIGKILL). */
static void test_run_refuses_size_beyond_cgroup(void)
{
    char cmd[2048], want[1400];
    CU_ASSERT_PTR_NULL_FATAL(cg_make());
    long long n = (long long)(2 * CG_LIMIT / 32);
    snprintf(cmd, sizeof cmd, "echo $$ > %s/cgroup.procs && exec " NO_DRIVER HK_TEST_HOST
             " run -n %lld", cg_dir, n);
    snprintf(want, sizeof want, " bytes are available (the cgroup's limit, %llu bytes in %s/",
             CG_LIMIT, cg_dir);
    char *out = expect_kept(run, cmd, 3, "hk-host: --size ", want, NULL);
    CU_ASSERT_EQUAL(lines(out), 1);
    free(out);
    for (int i = 0; i < 100 && rmdir(cg_dir) != 0 && errno == EBUSY; i++)
        usleep(10000); /* the last exit is still being accounted */
}

static char fake[1024]; /* the fake root of the hkh_cgroup_limit tests */

/* Writes fake/rel (its directories made first). */
static void put(const char *rel, const char *text)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", fake, rel);
    for (char *p = path + strlen(fake) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        CU_ASSERT_FATAL(mkdir(path, 0755) == 0 || errno == EEXIST);
        *p = '/';
    }
    write_file(path, text, 0644);
}

#define MOUNT_V2 "41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n"
#define MOUNT_HYBRID                                                                         \
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"             \
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"

/* v2: the parent's limit binds when it leaves less room than the child's
 * own; "max" is no limit; usage past the limit leaves none. */
static void test_cgroup_v2_tightest(void)
{
    hkh_cg_limit_t cg;
    temp_dir(fake, sizeof fake, "cg");
    put("proc/self/mountinfo", "22 1 0:21 / /proc rw - proc proc rw\n" MOUNT_V2);
    put("proc/self/cgroup", "0::/a/b\n");
    put("sys/fs/cgroup/a/memory.max", "1000\n");
    put("sys/fs/cgroup/a/memory.current", "400\n");
    put("sys/fs/cgroup/a/b/memory.max", "2000\n");
    put("sys/fs/cgroup/a/b/memory.current", "100\n");
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 1);
    CU_ASSERT_EQUAL(cg.limit, 1000);
    CU_ASSERT_EQUAL(cg.usage, 400);
    CU_ASSERT_EQUAL(cg.headroom, 600);
    CU_ASSERT_STRING_EQUAL(cg.file, "/sys/fs/cgroup/a/memory.max");
    put("sys/fs/cgroup/a/memory.max", "max\n");
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 1);
    CU_ASSERT_EQUAL(cg.headroom, 1900);
    CU_ASSERT_STRING_EQUAL(cg.file, "/sys/fs/cgroup/a/b/memory.max");
    put("sys/fs/cgroup/a/b/memory.current", "2500\n");
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 1);
    CU_ASSERT_EQUAL(cg.headroom, 0);
    put("sys/fs/cgroup/a/b/memory.max", "max\n");
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 0);
    remove_tree(fake);
}

/* v1 beside v2 (a hybrid system): the memory controller's limit counts,
 * the v1 form of "no limit" does not, nor does a v2 hierarchy without a
 * limit; a mount of a cgroup namespace's root maps the path below it. */
static void test_cgroup_v1_and_namespace(void)
{
    hkh_cg_limit_t cg;
    temp_dir(fake, sizeof fake, "cg");
    put("proc/self/mountinfo", MOUNT_HYBRID);
    put("proc/self/cgroup", "9:name=systemd:/\n4:memory:/p\n3:cpu:/other\n0::/\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory/p/memory.limit_in_bytes", "3221225472\n");
    put("sys/fs/cgroup/memory/p/memory.usage_in_bytes", "1073741824\n");
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 1);
    CU_ASSERT_EQUAL(cg.limit, 3221225472ULL);
    CU_ASSERT_EQUAL(cg.headroom, 2147483648ULL);
    CU_ASSERT_STRING_EQUAL(cg.file, "/sys/fs/cgroup/memory/p/memory.limit_in_bytes");
    put("sys/fs/cgroup/memory/p/memory.limit_in_bytes", "9223372036854771712\n");
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 0);
    remove_tree(fake);

    temp_dir(fake, sizeof fake, "cg");
    put("proc/self/mountinfo", "41 31 0:38 /ns /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    put("proc/self/cgroup", "0::/ns/job\n");
    put("sys/fs/cgroup/job/memory.max", "4096\n");
    put("sys/fs/cgroup/job/memory.current", "1024\n");
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 1);
    CU_ASSERT_EQUAL(cg.headroom, 3072);
    CU_ASSERT_STRING_EQUAL(cg.file, "/sys/fs/cgroup/job/memory.max");
    put("proc/self/cgroup", "0::/elsewhere\n"); /* not below the mount: not visible */
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 0);
    remove_tree(fake);
}

/* Neither files nor a mount: no limit known. */
static void test_cgroup_none(void)
{
    hkh_cg_limit_t cg;
    temp_dir(fake, sizeof fake, "cg");
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 0);
    put("proc/self/cgroup", "0::/a\n");
    put("sys/fs/cgroup/a/memory.max", "1000\n");
    CU_ASSERT_EQUAL(hkh_cgroup_limit(fake, &cg), 0); /* no cgroup2 mount */
    remove_tree(fake);
}

void host_register_mem(CU_pSuite s)
{
    CU_pTest t = hk_test_add(s, "run in a cgroup with a memory limit: refused naming the limit",
                             test_run_refuses_size_beyond_cgroup);
    const char *why = cg_make(); /* whether one can be made: then made again by the test */
    if (why)
        hk_test_skip(t, why);
    else
        rmdir(cg_dir);
    static const hk_test_case_t tests[] = {
        {"cgroup v2: the tightest limit up to the root, max, usage past it",
         test_cgroup_v2_tightest},
        {"cgroup v1 beside v2, no-limit values, a namespace's mount", test_cgroup_v1_and_namespace},
        {"no cgroup files or mount: no limit", test_cgroup_none},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
