/* hk-bench: P4, the cost of making and freeing a handle, hk-cuda against
 * cublasCreate/cublasDestroy on the same thread and device.
 *
 * "first" is the first handle of the process; it must run before anything
 * else makes an hk handle, so main runs P4 first. The runtime's primary
 * context exists already (main made it): its birth is neither library's cost.
 * "later" creates happen while another handle of the same library is alive,
 * as in an application that already uses the library; "alone" creates happen
 * with no other handle alive, where hk-cuda may load its kernels again.
 * "cycle" is measured by hk-bench-bare (hkb_bare.c) in a child process that
 * has no CUDA runtime, so no keeper of the primary context but hk-cuda. */
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hkb.h"

extern char **environ;

#define P4_FIRST_US 2000.0
#define P4_LATER_US 20.0
#define P4_DESTROY_US 20.0
#define P4_CYCLE_US 20.0

static int hk_create(const hkb_plugin_t *p, hk_handle_t **h, double *us)
{
    hk_create_info_t ci = {sizeof ci, HK_DEVICE_CURRENT, 0};
    double t0 = hkb_now_ns();
    hk_status_t st = p->vt.handle_create(&ci, h);
    *us = (hkb_now_ns() - t0) / 1e3;
    return hkb_hk_ok(p, NULL, st, "handle_create");
}

static int hk_destroy(const hkb_plugin_t *p, hk_handle_t *h, double *us)
{
    double t0 = hkb_now_ns();
    hk_status_t st = p->vt.handle_destroy(h);
    *us = (hkb_now_ns() - t0) / 1e3;
    return hkb_hk_ok(p, NULL, st, "handle_destroy");
}

static int cb_create(cublasHandle_t *h, double *us)
{
    double t0 = hkb_now_ns();
    cublasStatus_t st = cublasCreate(h);
    *us = (hkb_now_ns() - t0) / 1e3;
    return hkb__cublas_ok(st, "cublasCreate", __FILE__, __LINE__);
}

static int cb_destroy(cublasHandle_t h, double *us)
{
    double t0 = hkb_now_ns();
    cublasStatus_t st = cublasDestroy(h);
    *us = (hkb_now_ns() - t0) / 1e3;
    return hkb__cublas_ok(st, "cublasDestroy", __FILE__, __LINE__);
}

/* hk-bench-bare next to the program, with its arguments, run to its end;
 * its one line of output in out. Returns 0 or -1 (reason recorded). */
static int bare_spawn(const hkb_plugin_t *p, const hkb_opts_t *o, char *out, size_t len)
{
    char exe[4096], dev[16], cycles[16];
    ssize_t got = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = got > 0 ? (exe[got] = '\0', strrchr(exe, '/')) : NULL;
    if (!slash || (size_t)(slash - exe) + sizeof "/hk-bench-bare" > sizeof exe)
        return hkb_fail("P4 cycle: cannot tell where hk-bench is, to find hk-bench-bare");
    strcpy(slash, "/hk-bench-bare");
    snprintf(dev, sizeof dev, "%d", o->device);
    snprintf(cycles, sizeof cycles, "%d", o->quick ? 16 : 64);
    char *argv[] = {exe, "--plugin", (char *)p->path, "--device", dev, "--cycles", cycles, NULL};
    int fd[2], status = 0;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    if (pipe(fd) != 0)
        return hkb_fail("P4 cycle: pipe failed");
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    int e = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (e == 0 && n + 1 < len && (r = read(fd[0], out + n, len - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fd[0]);
    if (e != 0)
        return hkb_fail("P4 cycle: cannot run %s: %s (`scons mode=release bench` builds it)", exe,
                        strerror(e));
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return hkb_fail("P4 cycle: %s failed (its reason above)", exe);
    return 0;
}

/* The cycle rows, measured by hk-bench-bare in a process without the
 * runtime; ref: cublasCreate + cublasDestroy here (median of their sums). */
static int bare_rows(const hkb_plugin_t *p, const hkb_opts_t *o, double cublas_us)
{
    char line[512];
    int cycles = 0;
    double first = 0, cycle = 0, max = 0, create = 0, destroy = 0, use = 0;
    hkb_row_t row;
    fflush(stdout); /* the child's errors go to the same terminal, after ours */
    HKB_TRY(bare_spawn(p, o, line, sizeof line), fail);
    if (sscanf(line, "cycles %d first_us %lf cycle_us %lf cycle_max_us %lf create_us %lf "
                     "destroy_us %lf use_us %lf",
               &cycles, &first, &cycle, &max, &create, &destroy, &use) != 7)
        return hkb_fail("P4 cycle: hk-bench-bare printed \"%.200s\"", line);
    hkb_row_set(&row, "P4", "cycle", "-", 0, "us", cycle, cublas_us, HKB_TARGET_VALUE_LE,
                P4_CYCLE_US);
    snprintf(row.note, sizeof row.note, "no runtime; %d cycles, 1st %.0f us", cycles, first);
    HKB_TRY(hkb_report_add(&row), fail);
    hkb_row_set(&row, "P4", "cycle-use", "-", 0, "us", cycle + use, NAN, HKB_TARGET_NONE, NAN);
    snprintf(row.note, sizeof row.note, "+ copies, saxpy, sdot; max cycle %.0f", max);
    return hkb_report_add(&row);
fail:
    return -1;
}

static int add(const char *op, double hk, double ref, hkb_target_kind_t kind, double target,
               const char *note)
{
    hkb_row_t row;
    hkb_row_set(&row, "P4", op, "-", 0, "us", hk, ref, kind, target);
    snprintf(row.note, sizeof row.note, "%s", note);
    return hkb_report_add(&row);
}

int hkb_fig_handles(const hkb_plugin_t *p, const hkb_opts_t *o)
{
    enum { MAXR = 64 };
    int reps = o->quick ? 15 : MAXR, rc = -1;
    hk_handle_t *keep_hk = NULL, *h = NULL;
    cublasHandle_t keep_cb = NULL, c = NULL;
    double first[2], t[6][MAXR], m[6];

    hkb_where("P4");
    HKB_CUDA(cudaSetDevice(o->device), out);
    /* The first handle of each library is kept alive for the "later" loop. */
    HKB_TRY(hk_create(p, &keep_hk, &first[0]), out);
    HKB_TRY(cb_create(&keep_cb, &first[1]), out);
    HKB_TRY(add("create1st", first[0], first[1], HKB_TARGET_VALUE_LE, P4_FIRST_US,
                "ref = cublasCreate; first in process"), out);

    /* Rows of t: hk create, hk destroy, cuBLAS create, cuBLAS destroy, then
     * hk create and destroy with no other handle alive. */
    for (int i = 0; i < reps; i++) {
        HKB_TRY(hk_create(p, &h, &t[0][i]), out);
        /* A handle is gone after destroy, failed or not: never destroy twice. */
        hk_handle_t *dead = h;
        h = NULL;
        HKB_TRY(hk_destroy(p, dead, &t[1][i]), out);
        HKB_TRY(cb_create(&c, &t[2][i]), out);
        cublasHandle_t cdead = c;
        c = NULL;
        HKB_TRY(cb_destroy(cdead, &t[3][i]), out);
    }
    hk_handle_t *last = keep_hk;
    keep_hk = NULL;
    HKB_TRY(hk_destroy(p, last, &first[0]), out);
    for (int i = 0; i < reps; i++) {
        HKB_TRY(hk_create(p, &h, &t[4][i]), out);
        hk_handle_t *dead = h;
        h = NULL;
        HKB_TRY(hk_destroy(p, dead, &t[5][i]), out);
    }
    double cb_cycle[MAXR];
    for (int i = 0; i < reps; i++)
        cb_cycle[i] = t[2][i] + t[3][i];
    for (int k = 0; k < 6; k++)
        m[k] = hkb_median(t[k], (size_t)reps);
    HKB_TRY(add("create", m[0], m[2], HKB_TARGET_VALUE_LE, P4_LATER_US,
                "ref = cublasCreate; another handle alive"), out);
    HKB_TRY(add("destroy", m[1], m[3], HKB_TARGET_VALUE_LE, P4_DESTROY_US,
                "ref = cublasDestroy; another handle alive"), out);
    HKB_TRY(add("create0", m[4], m[2], HKB_TARGET_NONE, NAN, "no other hk handle alive"), out);
    HKB_TRY(add("destroy0", m[5], m[3], HKB_TARGET_NONE, NAN, "last hk handle of the process"),
            out);
    HKB_TRY(bare_rows(p, o, hkb_median(cb_cycle, (size_t)reps)), out);
    hkb_where("%s", "");
    rc = 0;
out:
    if (h)
        (void)hkb_hk_ok(p, NULL, p->vt.handle_destroy(h), "handle_destroy");
    if (keep_hk)
        (void)hkb_hk_ok(p, NULL, p->vt.handle_destroy(keep_hk), "handle_destroy");
    if (c)
        (void)hkb__cublas_ok(cublasDestroy(c), "cublasDestroy", __FILE__, __LINE__);
    if (keep_cb)
        (void)hkb__cublas_ok(cublasDestroy(keep_cb), "cublasDestroy", __FILE__, __LINE__);
    return rc;
}
