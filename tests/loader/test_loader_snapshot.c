/* A loaded plugin's file rewritten under a running host (docs/deploy.md,
 * "What the loader loads"): a host computes through hk-cpu in a loop while
 * the test copies another build over its file, truncates it, writes garbage
 * over it, deletes it or renames another file over it. Every call must stay
 * right and the host must live on; the same loader opening the path again
 * must see what the path now holds (the new build, or a refusal), not its
 * earlier verdict. The host is a child process, so that a SIGBUS ends that
 * child and fails one named test. The plugin lives in a private directory
 * (mode 0700) of the build tree. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_blas1.h"
#include "hk_status_text.h"
#include "hk_test.h"
#include "test_loader_util.h"

#define SN_NEW_BUILD HK_TEST_HOSTILE_DIR "/tv_good.so"
#define SN_NEW_VERSION "1.0.5"
#define SN_N 64

typedef enum {
    SN_CP,          /* open O_TRUNC, then write another build: cp, install */
    SN_TRUNC_WRITE, /* truncate(2), then write another build in pieces */
    SN_GARBAGE,     /* the same size of garbage written over it */
    SN_TRUNC_ZERO,  /* truncated to zero, left so */
    SN_DELETE,      /* unlinked */
    SN_RENAME       /* another build renamed over it: the atomic install */
} sn_change_t;

/* One round of calls that must all be right: a new handle, saxpy, sdot,
 * snrm2, the handle destroyed. 0 when right. */
static int sn_round(const hk_vtable_t *vt, const hk_blas1_v1_t *b, int round)
{
    hk_create_info_t info = {sizeof info, HK_DEVICE_CURRENT, 0};
    hk_handle_t *h = NULL;
    if (vt->handle_create(&info, &h) != HK_STATUS_OK)
        return 1;
    float x[SN_N], y[SN_N], alpha = 2.0f, dot = 0.0f, nrm = 0.0f;
    for (int i = 0; i < SN_N; i++) {
        x[i] = 1.0f;
        y[i] = (float)(round % 7);
    }
    int bad = b->saxpy(h, SN_N, &alpha, x, 1, y, 1) != HK_STATUS_OK
              || b->sdot(h, SN_N, x, 1, y, 1, &dot) != HK_STATUS_OK
              || b->snrm2(h, SN_N, x, 1, &nrm) != HK_STATUS_OK;
    bad = bad || y[SN_N - 1] != (float)(round % 7) + 2.0f
          || dot != (float)SN_N * ((float)(round % 7) + 2.0f) || nrm != 8.0f;
    return vt->handle_destroy(h) != HK_STATUS_OK || bad;
}

static int sn_rounds(hk_plugin_t *p, int from, int count)
{
    hk_blas1_v1_t b;
    if (hk_plugin_get_table(p, HK_TABLE_BLAS1_V1, &b, sizeof b) != HK_STATUS_OK)
        return 1;
    for (int r = from; r < from + count; r++)
        if (sn_round(hk_plugin_vtable(p), &b, r))
            return 1;
    return 0;
}

/* The host: loads path, computes, tells 'R'eady on res, computes until a
 * byte arrives on cmd, computes more, then opens path again and reports.
 * Exits 0 when every call was right. */
static void sn_host(const char *path, int in_place, int cmd, int res)
{
    alarm(60); /* a hang ends the host, never the test program */
    /* The crash itself, not a sanitizer's report of it, ends the host. */
    signal(SIGBUS, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1, .load_in_place = in_place};
    hk_loader_t *loader = NULL;
    hk_plugin_t *p = NULL;
    if (hk_loader_create(&o, &loader) != HK_STATUS_OK || hk_loader_open(loader, path, &p)
        != HK_STATUS_OK) {
        dprintf(res, "open=%s\n", loader ? hk_loader_last_error(loader) : "no loader");
        _exit(10);
    }
    if (sn_rounds(p, 0, 20) != 0)
        _exit(11);
    if (write(res, "R", 1) != 1)
        _exit(12);
    int round = 20;
    struct pollfd pfd = {cmd, POLLIN, 0};
    while (poll(&pfd, 1, 0) == 0) {
        if (sn_rounds(p, round++, 1) != 0) {
            dprintf(res, "wrong=%d (during the change)\n", round - 1);
            _exit(2);
        }
    }
    if (sn_rounds(p, round, 50) != 0) {
        dprintf(res, "wrong (after the change)\n");
        _exit(2);
    }
    hk_plugin_t *q = NULL;
    hk_status_t st = hk_loader_open(loader, path, &q);
    dprintf(res, "again=%s|%s\n", hk_status_name(st), q ? hk_plugin_version(q) : "-");
    if (q && sn_rounds(q, 0, 20) != 0) {
        dprintf(res, "wrong (the new build)\n");
        _exit(2);
    }
    if (sn_rounds(p, round + 50, 20) != 0) {
        dprintf(res, "wrong (after the new build loaded)\n");
        _exit(2);
    }
    dprintf(res, "rounds=%d\n", round + 70);
    _exit(0);
}

static int sn_write_all(int fd, const void *data, size_t n, size_t piece)
{
    const char *at = data;
    while (n > 0) {
        ssize_t w = write(fd, at, n < piece ? n : piece);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        at += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The bytes of file, malloc'ed, in *n. */
static char *sn_read(const char *file, size_t *n)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char *data = NULL;
    if (fd >= 0 && fstat(fd, &st) == 0 && (data = malloc((size_t)st.st_size + 1)) != NULL) {
        *n = (size_t)st.st_size;
        if (pread(fd, data, *n, 0) != (ssize_t)*n) {
            free(data);
            data = NULL;
        }
    }
    if (fd >= 0)
        close(fd);
    return data;
}

static int sn_change(sn_change_t how, const char *dir, const char *path)
{
    size_t n = 0;
    char *data = sn_read(SN_NEW_BUILD, &n);
    char tmp[4096];
    int fd = -1, rc = -1;
    if (!data)
        return -1;
    switch (how) {
    case SN_CP:
        fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        rc = fd < 0 ? -1 : sn_write_all(fd, data, n, 65536);
        break;
    case SN_TRUNC_WRITE:
        fd = truncate(path, 0) == 0 ? open(path, O_WRONLY | O_CLOEXEC) : -1;
        rc = fd < 0 ? -1 : sn_write_all(fd, data, n, 4096);
        break;
    case SN_GARBAGE: {
        struct stat st;
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) != 0)
            break;
        char *junk = malloc((size_t)st.st_size);
        if (junk) {
            memset(junk, 0xcc, (size_t)st.st_size); /* int3 over the code too */
            rc = sn_write_all(fd, junk, (size_t)st.st_size, 65536);
        }
        free(junk);
        break;
    }
    case SN_TRUNC_ZERO:
        rc = truncate(path, 0);
        break;
    case SN_DELETE:
        rc = unlink(path);
        break;
    case SN_RENAME:
        rc = tl_copy(SN_NEW_BUILD, dir, "new.so.part", 0644, tmp, sizeof tmp) != 0
             ? -1 : rename(tmp, path);
        break;
    }
    if (fd >= 0 && close(fd) != 0)
        rc = -1;
    free(data);
    return rc;
}

/* Runs the host on a private copy of hk-cpu, changes the file once the host
 * computes, and checks the host's end and what it saw when it opened the
 * path again (want_again: "again=<status>|<version>"); want_again NULL: the
 * host loads in place, and must die of SIGBUS. */
static void sn_case(sn_change_t how, const char *want_again)
{
    int in_place = want_again == NULL;
    char dir[4096], path[4096], out[4096] = "";
    CU_ASSERT_FATAL(tl_mkdtemp(dir, sizeof dir) == 0);
    CU_ASSERT_FATAL(chmod(dir, 0700) == 0);
    CU_ASSERT_FATAL(tl_copy(HK_TEST_CPU_PLUGIN, dir, "hk-cpu.so", 0644, path, sizeof path) == 0);
    int cmd[2], res[2];
    CU_ASSERT_FATAL(pipe(cmd) == 0 && pipe(res) == 0);
    signal(SIGPIPE, SIG_IGN); /* a host that died must not take the test program along */
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        close(cmd[1]);
        close(res[0]);
        sn_host(path, in_place, cmd[0], res[1]);
    }
    close(cmd[0]);
    close(res[1]);
    char ready = 0;
    ssize_t got = read(res[0], &ready, 1);
    CU_ASSERT_EQUAL(got, 1);
    if (got == 1)
        CU_ASSERT_EQUAL(sn_change(how, dir, path), 0);
    /* Loaded in place, the host may have died of the change already (that
     * is the outcome checked below): the write then finds no reader. */
    ssize_t sent = write(cmd[1], "S", 1);
    if (!in_place)
        CU_ASSERT_EQUAL(sent, 1);
    size_t len = 0;
    while (len + 1 < sizeof out && (got = read(res[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)got;
    out[len] = '\0';
    int ws = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &ws, 0), pid);
    if (in_place) {
        CU_ASSERT(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGBUS);
        goto out;
    }
    if (WIFSIGNALED(ws))
        fprintf(stderr, "\n    the host died of %s; it wrote: %s", strsignal(WTERMSIG(ws)), out);
    else if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        fprintf(stderr, "\n    the host exited %d; it wrote: %s", WEXITSTATUS(ws), out);
    CU_ASSERT(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "rounds="));
    if (!strstr(out, want_again))
        fprintf(stderr, "\n    wanted %.*s; the host wrote: %s", (int)strlen(want_again) - 1, want_again, out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want_again));
out:
    close(cmd[1]);
    close(res[0]);
    tl_rmtree(dir);
}

static void test_cp_over(void)
{
    sn_case(SN_CP, "again=OK|" SN_NEW_VERSION "\n");
}

static void test_truncate_then_write(void)
{
    sn_case(SN_TRUNC_WRITE, "again=OK|" SN_NEW_VERSION "\n");
}

static void test_garbage_over(void)
{
    sn_case(SN_GARBAGE, "again=LOAD_FAILED|-\n");
}

static void test_truncated_to_zero(void)
{
    sn_case(SN_TRUNC_ZERO, "again=LOAD_FAILED|-\n");
}

static void test_deleted(void)
{
    sn_case(SN_DELETE, "again=NOT_FOUND|-\n");
}

static void test_renamed_over(void)
{
    sn_case(SN_RENAME, "again=OK|" SN_NEW_VERSION "\n");
}

/* The control, and load_in_place's documented risk: the file itself is
 * mapped, and its truncation kills the host at its next call. */
static void test_in_place_truncated(void)
{
    sn_case(SN_TRUNC_ZERO, NULL);
}

/* 1 when a descriptor of this process is the snapshot named name. */
static int sn_fd_open(const char *name)
{
    char link[64], target[512], want[300];
    snprintf(want, sizeof want, "/memfd:%s (deleted)", name);
    for (int fd = 0; fd < 1024; fd++) {
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            if (strcmp(target, want) == 0)
                return 1;
        }
    }
    return 0;
}

/* How many different files /proc/self/maps lists under lines ending in
 * tail (inodes). */
static int sn_maps_files(const char *tail)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[8192];
    unsigned long long seen[16];
    int n = 0;
    size_t tn = strlen(tail);
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        size_t len = strlen(line);
        unsigned long long ino = 0;
        if (len < tn || strcmp(line + len - tn, tail) != 0
            || sscanf(line, "%*s %*s %*s %*s %llu", &ino) != 1)
            continue;
        int known = 0;
        for (int i = 0; i < n; i++)
            known |= seen[i] == ino;
        if (!known && n < 16)
            seen[n++] = ino;
    }
    if (f)
        fclose(f);
    return n;
}

/* 1 when /proc/self/maps has a line ending in tail. */
static int sn_maps_has(const char *tail)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[8192];
    int found = 0;
    size_t n = strlen(tail);
    while (f && !found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        size_t len = strlen(line);
        found = len >= n && strcmp(line + len - n, tail) == 0;
    }
    if (f)
        fclose(f);
    return found;
}

/* What the process shows: the snapshot under the file's name as a memfd,
 * never the file, one copy for two loaders of it, until the loaders are
 * destroyed; with load_in_place the file itself. Unique names: no other
 * test maps them. */
static void test_maps_show(void)
{
    char dir[4096], path[4096], other[4096];
    CU_ASSERT_FATAL(tl_mkdtemp(dir, sizeof dir) == 0);
    CU_ASSERT_FATAL(chmod(dir, 0700) == 0);
    CU_ASSERT_FATAL(tl_copy(HK_TEST_CPU_PLUGIN, dir, "sn-shown.so", 0644, path, sizeof path) == 0);
    CU_ASSERT_FATAL(tl_copy(HK_TEST_CPU_PLUGIN, dir, "sn-inplace.so", 0644, other,
                            sizeof other) == 0);
    hk_loader_t *loader = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(hk_loader_open(loader, path, NULL), HK_STATUS_OK);
    CU_ASSERT(sn_maps_has("/memfd:sn-shown.so (deleted)"));
    CU_ASSERT(sn_fd_open("sn-shown.so"));
    CU_ASSERT(!sn_maps_has(path));
    /* A second loader of the unchanged file shares the mapped copy. */
    hk_loader_t *second = tl_loader(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(second);
    CU_ASSERT_EQUAL(hk_loader_open(second, path, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sn_maps_files("/memfd:sn-shown.so (deleted)"), 1);
    CU_ASSERT_EQUAL(hk_loader_destroy(second), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    /* hk-cpu is unload-safe: its copy goes with the loader. */
    CU_ASSERT(!sn_maps_has("/memfd:sn-shown.so (deleted)"));
    CU_ASSERT(!sn_fd_open("sn-shown.so"));

    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1, .load_in_place = 1};
    CU_ASSERT_EQUAL_FATAL(hk_loader_create(&o, &loader), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_loader_open(loader, other, NULL), HK_STATUS_OK);
    CU_ASSERT(sn_maps_has(other));
    CU_ASSERT(!sn_maps_has("/memfd:sn-inplace.so (deleted)"));
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tl_rmtree(dir);
}

int hk_test_register(void)
{
    CU_pSuite s = hk_test_suite("snapshot", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"cp of another build over the loaded file: calls right, new build seen", test_cp_over},
        {"truncated, then another build written: calls right, new build seen",
         test_truncate_then_write},
        {"garbage written over the loaded file: calls right, refused again", test_garbage_over},
        {"truncated to zero: calls right, refused again", test_truncated_to_zero},
        {"deleted: calls right, not found again", test_deleted},
        {"another build renamed over it: calls right, new build seen", test_renamed_over},
        {"maps show the snapshot as a memfd of the file's name, freed at destroy; "
         "in place the file", test_maps_show},
        {"load_in_place: truncated to zero, the host dies of SIGBUS", test_in_place_truncated},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    return 0;
}
