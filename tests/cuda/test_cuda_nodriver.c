/* hk-cuda without a driver, and with driver files it must refuse.
 *
 * This program does not link libcuda. Loading and negotiating the plugin must
 * not touch the driver: the file HK_CUDA_DRIVER names is watched with inotify
 * from before the plugin is loaded, and /proc/self/maps must show no CUDA
 * driver. Create then answers HK_STATUS_NO_DRIVER with the dynamic loader's
 * reason, and refuses driver files others could have written (a world-writable
 * copy, a symlink into a world-writable directory, a directory) with a
 * one-line reason, mapping none of them. A file that passes the checks (a
 * copy of hk-cpu.so, an ELF file with no CUDA in it) is loaded and found too
 * old: the checks refuse what they should and nothing else. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hk_test.h"
#include "hk_trim.h"
#include "hkct_plugin.h"

#define MISSING_DRIVER "/nonexistent/libcuda.so.1"

static hkct_plugin_t plug;
static char dir[PATH_MAX / 2]; /* private directory for driver files */
static char watched[PATH_MAX]; /* HK_CUDA_DRIVER while the plugin loads */
static int watch_fd = -1;
static int dir_safe;           /* every directory above dir passes the rule */
static int under_sticky;       /* a sticky directory (/tmp) lies above dir */

/* Does any mapping of this process come from a file whose path contains s? */
static int mapped(const char *s)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[PATH_MAX + 128];
    int found = 0;
    if (!f)
        return -1;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, s) != NULL;
    fclose(f);
    return found;
}

/* Opens of the watched file since the last call. */
static int opens_seen(void)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int n = 0;
    ssize_t len;
    while ((len = read(watch_fd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            n += (ev->mask & IN_OPEN) != 0;
            p += sizeof *ev + ev->len;
        }
    }
    return n;
}

/* 1 when the loader's rule (and the kit's, plugin/kit/hkk_driver.c) passes
 * every directory from path up: none writable by others, but for one sticky
 * directory owned by root or us with only such directories below it. */
static int chain_safe(const char *path)
{
    char part[PATH_MAX];
    int strict_below = 1, sticky_passed = 0;
    snprintf(part, sizeof part, "%s", path);
    for (;;) {
        struct stat st;
        if (stat(part, &st) != 0)
            return 0;
        int owner_ok = st.st_uid == 0 || st.st_uid == geteuid();
        if (st.st_mode & S_IWOTH) {
            if (!(st.st_mode & S_ISVTX) || !owner_ok || !strict_below || sticky_passed)
                return 0;
            sticky_passed = 1;
        }
        strict_below &= owner_ok && !(st.st_mode & (S_IWGRP | S_IWOTH));
        char *slash = strrchr(part, '/');
        if (!slash || strcmp(part, "/") == 0)
            return 1;
        slash[slash == part ? 1 : 0] = '\0';
    }
}

/* 1 when no directory from path up is writable by others at all. */
static int chain_safe_strict(const char *path)
{
    char part[PATH_MAX];
    snprintf(part, sizeof part, "%s", path);
    for (;;) {
        struct stat st;
        if (stat(part, &st) != 0 || (st.st_mode & S_IWOTH))
            return 0;
        char *slash = strrchr(part, '/');
        if (!slash || strcmp(part, "/") == 0)
            return 1;
        slash[slash == part ? 1 : 0] = '\0';
    }
}

/* The directory of this program, where the build put it. */
static void program_dir(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    int w = snprintf(out, len, "%s", n > 0 ? exe : ".");
    if (w < 0 || (size_t)w >= len)
        snprintf(out, len, "."); /* too long a path: the working directory */
}

static int suite_init(void)
{
    char base[PATH_MAX / 2 - 32];
    program_dir(base, sizeof base);
    snprintf(dir, sizeof dir, "%s/hkct-driver-XXXXXX", base);
    if (!mkdtemp(dir))
        return -1;
    dir_safe = chain_safe(dir);
    under_sticky = !chain_safe_strict(dir);
    snprintf(watched, sizeof watched, "%s/watched-libcuda.so.1", dir);
    int fd = open(watched, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return -1;
    close(fd);
    watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (watch_fd < 0 || inotify_add_watch(watch_fd, watched, IN_OPEN) < 0)
        return -1;
    setenv("HK_CUDA_DRIVER", watched, 1);
    return hkct_plugin_open(&plug) == 0 ? 0 : -1;
}

static int suite_clean(void)
{
    char path[PATH_MAX + 32];
    static const char *const names[] = {"watched-libcuda.so.1", "open/libcuda.so.1", "open",
                                        "libcuda.so.1", "writable-libcuda.so.1",
                                        "group-libcuda.so.1", "good-libcuda.so.1",
                                        "sticky/own/libcuda.so.1", "sticky/own",
                                        "sticky/gw/libcuda.so.1", "sticky/gw", "sticky",
                                        "gw/libcuda.so.1", "gw", "foreign-libcuda.so.1"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        if (unlink(path) != 0)
            rmdir(path);
    }
    rmdir(dir);
    if (watch_fd >= 0)
        close(watch_fd);
    return 0;
}

static void test_negotiate_answer(void)
{
    CU_ASSERT_STRING_EQUAL(plug.answer.name, "hk-cuda");
    CU_ASSERT_EQUAL(plug.answer.abi_version, HK_ABI_CURRENT);
    CU_ASSERT_EQUAL(plug.vt->size, sizeof(hk_vtable_t));
    const char *name = NULL;
    const void *t0 = NULL;
    CU_ASSERT_EQUAL(plug.vt->enum_tables(0, &name), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(name);
    /* hk.blas1/1, hk.memory/1, hk.kernels/1, hk.cuda/1, hk.trim/1 */
    CU_ASSERT_EQUAL(plug.vt->enum_tables(4, &name), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(name, "hk.trim/1");
    CU_ASSERT_EQUAL(plug.vt->enum_tables(5, &name), HK_STATUS_NOT_FOUND);
    /* a trim with no driver opened gives back nothing, and says OK */
    CU_ASSERT_EQUAL(plug.vt->get_table("hk.trim/1", &t0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(((const hk_trim_v1_t *)t0)->size, sizeof(hk_trim_v1_t));
    CU_ASSERT_EQUAL(((const hk_trim_v1_t *)t0)->trim(), HK_STATUS_OK);
    const void *t = (const void *)1;
    CU_ASSERT_EQUAL(plug.vt->get_table("hk.nothing/1", &t), HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NULL(t);
}

static void test_negotiate_refuses_other_major(void)
{
    hk_negotiate_fn fn;
    *(void **)&fn = dlsym(plug.dl, HK_ENTRY_SYMBOL);
    hk_negotiate_request_t req = {{HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1},
                                  HK_ABI_VERSION(2, 0), HK_ABI_VERSION(2, 3), NULL, NULL};
    hk_negotiate_answer_t a = {{HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1}, 0, 0, NULL, NULL, NULL};
    CU_ASSERT_EQUAL(fn(&req, &a), HK_STATUS_ABI_MISMATCH);
    CU_ASSERT_EQUAL(a.abi_version, HK_ABI_CURRENT);
    /* An older host (1.0 only) gets 1.0. */
    req.abi_min = req.abi_max = HK_ABI_VERSION(1, 0);
    CU_ASSERT_EQUAL(fn(&req, &a), HK_STATUS_OK);
    CU_ASSERT_EQUAL(a.abi_version, HK_ABI_VERSION(1, 0));
}

/* Runs first: loading and negotiating (in suite_init, and again above)
 * opened neither the file HK_CUDA_DRIVER named nor any CUDA driver. */
static void test_load_touches_no_driver(void)
{
    CU_ASSERT_EQUAL(opens_seen(), 0);
    CU_ASSERT_EQUAL(mapped("libcuda"), 0);
    CU_ASSERT_EQUAL(mapped(watched), 0);
    /* the watch sees an open when there is one */
    int fd = open(watched, O_RDONLY);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    CU_ASSERT_EQUAL(opens_seen(), 1);
    /* and create is what opens the named file (empty: no ELF, refused) */
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL(plug.vt->handle_create(NULL, &h), HK_STATUS_NO_DRIVER);
    if (dir_safe) /* else it is refused for its directory before any open */
        CU_ASSERT(opens_seen() >= 1);
    CU_ASSERT_EQUAL(mapped(watched), 0);
}

static void test_create_no_driver(void)
{
    setenv("HK_CUDA_DRIVER", MISSING_DRIVER, 1);
    hk_handle_t *h = (hk_handle_t *)1;
    CU_ASSERT_EQUAL(plug.vt->handle_create(NULL, &h), HK_STATUS_NO_DRIVER);
    CU_ASSERT_PTR_NULL(h);
    const char *msg = plug.vt->last_error(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, MISSING_DRIVER));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "No such file or directory"));
    /* A second attempt says the same, and still no driver is mapped. */
    hk_create_info_t ci = {sizeof ci, 1, 0};
    CU_ASSERT_EQUAL(plug.vt->handle_create(&ci, &h), HK_STATUS_NO_DRIVER);
    CU_ASSERT_EQUAL(mapped("libcuda"), 0);
}

/* A copy of hk-cpu.so, an ELF shared object that is no CUDA driver, as
 * name in the private directory. */
static void make_driver(const char *name, unsigned mode, char *path, size_t len)
{
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s", hkct_plugin_path());
    char *slash = strrchr(src, '/');
    snprintf(slash ? slash + 1 : src, sizeof src - (size_t)(slash ? slash + 1 - src : 0),
             "hk-cpu.so");
    snprintf(path, len, "%s/%s", dir, name);
    CU_ASSERT_EQUAL_FATAL(hkct_copy_file(src, path, mode), 0);
}

/* create with HK_CUDA_DRIVER=path: NO_DRIVER, a one-line reason naming the
 * path and containing why, and nothing of the file mapped. */
static void refused(const char *path, const char *file, const char *why)
{
    setenv("HK_CUDA_DRIVER", path, 1);
    hk_handle_t *h = NULL;
    CU_ASSERT_EQUAL(plug.vt->handle_create(NULL, &h), HK_STATUS_NO_DRIVER);
    const char *msg = plug.vt->last_error(NULL);
    if (!strstr(msg, why))
        printf("\n  %s: %s\n", path, msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "refused"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, why));
    CU_ASSERT_PTR_NULL(strchr(msg, '\n'));
    CU_ASSERT_EQUAL(mapped(file), 0);
}

static void test_driver_file_checks(void)
{
    char good[PATH_MAX], writable[PATH_MAX], group[PATH_MAX], open_dir[PATH_MAX];
    char inside[PATH_MAX], link[PATH_MAX];
    /* passes the checks: loaded, and found to be no CUDA 12+ driver */
    make_driver("good-libcuda.so.1", 0755, good, sizeof good);
    setenv("HK_CUDA_DRIVER", good, 1);
    hk_handle_t *h = NULL;
    hk_status_t st = plug.vt->handle_create(NULL, &h);
    const char *why = dir_safe ? "predates CUDA 12.0" : "writable by others";
    CU_ASSERT_EQUAL(st, dir_safe ? HK_STATUS_DRIVER_TOO_OLD : HK_STATUS_NO_DRIVER);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(NULL), why));

    /* writable by others, by the group */
    make_driver("writable-libcuda.so.1", 0666, writable, sizeof writable);
    refused(writable, writable, dir_safe ? "writable by others (mode 0666)"
                                         : "writable by others");
    make_driver("group-libcuda.so.1", 0775, group, sizeof group);
    refused(group, group, dir_safe ? "writable by its group (mode 0775)"
                                   : "writable by others");
    /* the plugins' rule for every directory on the way: one its group may
     * write, one another user owns, and a link another user made */
    char gdir[PATH_MAX], gdrv[PATH_MAX];
    snprintf(gdir, sizeof gdir, "%s/gw", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(gdir, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(gdir, 0775), 0);
    make_driver("gw/libcuda.so.1", 0755, gdrv, sizeof gdrv);
    refused(gdrv, gdrv, dir_safe ? "writable by its group (mode 0775)" : "writable by others");
    if (geteuid() == 0 && dir_safe) {
        CU_ASSERT_EQUAL_FATAL(chmod(gdir, 0755), 0);
        CU_ASSERT_EQUAL_FATAL(chown(gdir, 65534, 65534), 0);
        refused(gdrv, gdrv, "is owned by uid 65534, neither root nor the effective user");
        snprintf(link, sizeof link, "%s/foreign-libcuda.so.1", dir);
        CU_ASSERT_EQUAL_FATAL(symlink(good, link), 0);
        CU_ASSERT_EQUAL_FATAL(lchown(link, 65534, 65534), 0);
        refused(link, good, "such a link is not followed");
    }
    /* a safe-looking symlink to a file in a directory anyone may write to */
    snprintf(open_dir, sizeof open_dir, "%s/open", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(open_dir, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(open_dir, 0777), 0);
    make_driver("open/libcuda.so.1", 0755, inside, sizeof inside);
    snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
    CU_ASSERT_EQUAL_FATAL(symlink(inside, link), 0);
    refused(link, inside, "writable by others (mode 0777)");
    if (dir_safe)
        CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(NULL), open_dir));
    /* not a regular file */
    refused(dir, "hkct-driver-", dir_safe ? "not a regular file" : "writable by others");
}

/* A sticky directory that others may write, as /tmp is: a driver file in a
 * directory of ours below it passes the checks (and is found to be no CUDA
 * 12+ driver); below a directory its group may write, it is refused. Where
 * the build itself lies below a sticky directory, the one made here is a
 * second one, and refused. */
static void test_driver_below_sticky_dir(void)
{
    char sticky[PATH_MAX / 2 + 16], sub[PATH_MAX], own[PATH_MAX], gw[PATH_MAX];
    snprintf(sticky, sizeof sticky, "%s/sticky", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sticky, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(sticky, 01777), 0);
    snprintf(sub, sizeof sub, "%s/own", sticky);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(sub, 0755), 0);
    make_driver("sticky/own/libcuda.so.1", 0755, own, sizeof own);
    if (dir_safe && !under_sticky) {
        setenv("HK_CUDA_DRIVER", own, 1);
        hk_handle_t *h = NULL;
        CU_ASSERT_EQUAL(plug.vt->handle_create(NULL, &h), HK_STATUS_DRIVER_TOO_OLD);
        CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(NULL), "predates CUDA 12.0"));
    } else {
        refused(own, own, "writable by others (mode 1777)");
    }
    snprintf(sub, sizeof sub, "%s/gw", sticky);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(sub, 0775), 0);
    make_driver("sticky/gw/libcuda.so.1", 0755, gw, sizeof gw);
    refused(gw, gw, dir_safe && !under_sticky ? "writable by its group (mode 0775)"
                                              : "writable by others");
}

static void test_bad_arguments_without_driver(void)
{
    CU_ASSERT_EQUAL(plug.vt->handle_create(NULL, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(NULL), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(plug.vt->set_stream(NULL, NULL), HK_STATUS_INVALID_HANDLE);
    float a = 1.0f, r = 0.0f;
    CU_ASSERT_EQUAL(plug.blas->saxpy(NULL, 4, &a, &a, 1, &r, 1), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(plug.blas->snrm2(NULL, 4, &a, 1, &r), HK_STATUS_INVALID_HANDLE);
    void *p = NULL;
    CU_ASSERT_EQUAL(plug.mem->alloc(NULL, 16, &p), HK_STATUS_INVALID_HANDLE);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("hk-cuda without a driver", suite_init, suite_clean);
    static const hk_test_case_t tests[] = {
        {"loading opens no driver", test_load_touches_no_driver},
        {"negotiation answer and tables", test_negotiate_answer},
        {"negotiation refuses another major", test_negotiate_refuses_other_major},
        {"create gives NO_DRIVER with the loader's reason", test_create_no_driver},
        {"HK_CUDA_DRIVER: unsafe files refused, a safe one loaded", test_driver_file_checks},
        {"HK_CUDA_DRIVER below a sticky directory: the rule of the loader",
         test_driver_below_sticky_dir},
        {"bad arguments without a driver", test_bad_arguments_without_driver},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    return 0;
}
