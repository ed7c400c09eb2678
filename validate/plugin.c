/* hk-validate: loading a plugin instance as a host does, and the probe that
 * learns what kind of plugin it is before any check runs. */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hk_status_text.h"
#include "hkv.h"
#include "hkv_cuda.h"

/* The mirror must match the installed header wherever both define a slot. */
_Static_assert(offsetof(hkv_vtable_t, synchronize) == offsetof(hk_vtable_t, synchronize),
               "hkv_vtable_t must follow hk_vtable_t's layout");
_Static_assert(HKV_VT_SIZE_1_0 == HK_VTABLE_SIZE_1_0, "ABI 1.0 vtable size");
#if HK_ABI_MINOR >= 2
_Static_assert(offsetof(hkv_vtable_t, last_error_copy) == offsetof(hk_vtable_t, last_error_copy),
               "last_error_copy is the first ABI 1.2 slot");
#endif

int hkv_plugin_open(hkv_plugin_t *p, const char *path, char *why, size_t len)
{
    memset(p, 0, sizeof *p);
    dlerror();
    p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) {
        const char *e = dlerror();
        snprintf(why, len, "cannot load %s: %s", path, e ? e : "unknown error");
        return -1;
    }
    void *sym = dlsym(p->dl, HK_ENTRY_SYMBOL);
    if (!sym) {
        snprintf(why, len, "%s has no %s", path, HK_ENTRY_SYMBOL);
        return -1;
    }
    memcpy(&p->negotiate, &sym, sizeof sym);
    return 0;
}

hk_status_t hkv_negotiate(const hkv_plugin_t *p, uint32_t lo, uint32_t hi, uint32_t ans_size,
                          hk_negotiate_answer_t *ans)
{
    hk_negotiate_request_t req = {
        .header = {HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1},
        .abi_min = lo,
        .abi_max = hi,
    };
    memset(ans, 0, sizeof *ans);
    ans->header.struct_type = HK_STRUCT_NEGOTIATE_ANSWER;
    ans->header.struct_size = ans_size;
    ans->header.struct_version = 1;
    return p->negotiate(&req, ans);
}

/* min(plugin size, ours) bytes of a table into a zeroed copy. */
static int take_table(const hkv_plugin_t *p, const char *name, void *copy, size_t size,
                      size_t *their)
{
    const void *t = NULL;
    memset(copy, 0, size);
    if (p->vt.get_table(name, &t) != HK_STATUS_OK || !t)
        return 0;
    size_t n;
    memcpy(&n, t, sizeof n);
    *their = n;
    if (n < sizeof(size_t) || n > 65536)
        return 0;
    memcpy(copy, t, n < size ? n : size);
    memcpy(copy, &n, sizeof n);
    return 1;
}

/* The host's re-validation of an answer (docs/abi.md, Negotiation, step 3). */
static int answer_ok(const hk_negotiate_answer_t *a, uint32_t lo, uint32_t hi, char *why,
                     size_t len)
{
    if (a->header.struct_type != HK_STRUCT_NEGOTIATE_ANSWER)
        snprintf(why, len, "answer struct_type is 0x%x", a->header.struct_type);
    else if (a->header.struct_size < offsetof(hk_negotiate_answer_t, vtable) + sizeof(void *))
        snprintf(why, len, "answer struct_size %u leaves out the vtable", a->header.struct_size);
    else if (a->abi_version < lo || a->abi_version > hi)
        snprintf(why, len, "answered ABI %u.%u is outside the range asked for",
                 HK_ABI_VERSION_MAJOR(a->abi_version), HK_ABI_VERSION_MINOR(a->abi_version));
    else if (!a->name || !a->name[0] || !a->version || !a->version[0])
        snprintf(why, len, "answer has no name or no version");
    else if (!a->vtable)
        snprintf(why, len, "answer has no vtable");
    else
        return 1;
    return 0;
}

int hkv_plugin_load(hkv_plugin_t *p, const char *path, char *why, size_t len)
{
    if (hkv_plugin_open(p, path, why, len) != 0)
        return -1;
    hk_status_t st = hkv_negotiate(p, HKV_ABI_1_0, HKV_ABI_MAX, sizeof p->answer, &p->answer);
    if (st != HK_STATUS_OK) {
        snprintf(why, len, "negotiation at [1.0, 1.%u] gave %s", HK_ABI_VERSION_MINOR(HKV_ABI_MAX),
                 hkv_st(st));
        return -1;
    }
    if (!answer_ok(&p->answer, HKV_ABI_1_0, HKV_ABI_MAX, why, len))
        return -1;
    const hk_vtable_t *vt = p->answer.vtable;
    p->abi = p->answer.abi_version;
    p->vt_size = vt->size;
    if (p->vt_size < HKV_VT_SIZE_1_0 || p->vt_size > 65536 || p->vt_size % sizeof(void *)) {
        snprintf(why, len, "vtable size %zu is not sane", p->vt_size);
        return -1;
    }
    memcpy(&p->vt, vt, p->vt_size < sizeof p->vt ? p->vt_size : sizeof p->vt);
    /* A host calls no slot newer than the minor it negotiated. */
    if (p->abi < HKV_ABI_1_1)
        p->vt.handle_info = NULL, p->vt.synchronize = NULL;
    if (p->abi < HKV_ABI_1_2)
        p->vt.last_error_copy = NULL;
    if (!p->vt.handle_create || !p->vt.handle_destroy || !p->vt.get_table) {
        snprintf(why, len, "a required slot (handle_create, handle_destroy, get_table) is NULL");
        return -1;
    }
    p->has_blas = take_table(p, HK_TABLE_BLAS1_V1, &p->blas, sizeof p->blas, &p->blas_size);
    p->has_mem = take_table(p, HK_TABLE_MEMORY_V1, &p->mem, sizeof p->mem, &p->mem_size);
    return 0;
}

/* ---- the probe ---- */

static int env_status(hk_status_t st)
{
    return st == HK_STATUS_NO_DRIVER || st == HK_STATUS_NO_DEVICE ||
           st == HK_STATUS_DRIVER_TOO_OLD;
}

/* Sends what the probe knows so far: the parent keeps the last whole copy,
 * so a plugin that crashes, exits or hangs in a later step is named by it. */
static void probe_send(int fd, hkv_probe_t *pr, int stage)
{
    pr->stage = stage;
    if (write(fd, pr, sizeof *pr) != (ssize_t)sizeof *pr)
        _exit(1);
}

/* Whether it is a CUDA plugin, and whether its memory is host memory, from
 * what is known (the answer's flags, and handle_info's device if a handle
 * was made). */
static void probe_classify(hkv_probe_t *pr)
{
    int at12 = pr->abi >= HKV_ABI_1_2;
    pr->cuda = (at12 && (pr->flags & HK_PLUGIN_MEMORY_CUDA)) || pr->device >= 0 ||
               (pr->env_missing && !(at12 && (pr->flags & HK_PLUGIN_MEMORY_HOST)));
    pr->host_memory = (at12 && (pr->flags & HK_PLUGIN_MEMORY_HOST)) ||
                      (!pr->cuda && pr->device == -1);
}

static void probe_child(const char *path, hkv_probe_t *pr, int fd)
{
    hkv_plugin_t p;
    pr->device = -2;
    if (hkv_plugin_load(&p, path, pr->why, sizeof pr->why) != 0) {
        probe_send(fd, pr, HKV_PROBE_DONE);
        return;
    }
    pr->loaded = 1;
    snprintf(pr->name, sizeof pr->name, "%s", p.answer.name);
    snprintf(pr->version, sizeof pr->version, "%s", p.answer.version);
    pr->abi = p.abi;
    pr->flags = p.answer.flags;
    pr->has_blas = p.has_blas;
    pr->has_mem = p.has_mem;
    probe_send(fd, pr, HKV_PROBE_LOADED);
    hk_handle_t *h = NULL;
    hk_status_t st = p.vt.handle_create(NULL, &h);
    if (st != HK_STATUS_OK || !h) {
        char e[256];
        snprintf(pr->create_why, sizeof pr->create_why, "handle_create(NULL) gave %s: %s",
                 hkv_st(st), hkv_last_error(&p, NULL, e, sizeof e));
        pr->env_missing = env_status(st);
    } else {
        pr->handle_ok = 1;
        probe_send(fd, pr, HKV_PROBE_CREATED);
        hk_handle_info_t info = {.size = sizeof info};
        if (p.vt.handle_info && p.vt.handle_info(h, &info) == HK_STATUS_OK)
            pr->device = info.device;
        p.vt.handle_destroy(h);
    }
    probe_classify(pr);
    if (pr->cuda) {
        pr->driver_ok = hkv_cu_open(pr->driver_why, sizeof pr->driver_why) == 0;
        if (pr->driver_ok && hkv_cu.cuDeviceGetCount(&pr->ndev) != 0)
            pr->ndev = 0;
    }
    probe_send(fd, pr, HKV_PROBE_DONE);
}

typedef struct probe_run {
    const char *path;
    int rfd, fd;
} probe_run_t;

static void probe_worker(void *arg)
{
    const probe_run_t *a = arg;
    hkv_probe_t mine;
    memset(&mine, 0, sizeof mine);
    close(a->rfd);
    probe_child(a->path, &mine, a->fd);
    _exit(0);
}

/* The probe ended before it was done: what it last said, and where it was. */
static void probe_cut_short(hkv_probe_t *pr, int have, const hkv_end_t *e, int timed_out)
{
    char how[128];
    hkv_end_text(e, timed_out, how, sizeof how);
    if (!have || pr->stage < HKV_PROBE_LOADED) {
        memset(pr, 0, sizeof *pr);
        pr->device = -2;
        snprintf(pr->why, sizeof pr->why, "loading and negotiating %s", how);
        return;
    }
    if (pr->stage == HKV_PROBE_LOADED)
        snprintf(pr->create_why, sizeof pr->create_why, "handle_create(NULL) %s", how);
    else
        snprintf(pr->create_why, sizeof pr->create_why,
                 "after handle_create(NULL) made a handle, handle_info or handle_destroy %s",
                 how);
    pr->handle_ok = 0;
    pr->env_missing = 0;
    pr->create_failed = 1;
    pr->device = -2;
    probe_classify(pr);
}

int hkv_probe_run(const char *path, int timeout_ms, hkv_probe_t *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->device = -2;
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    probe_run_t a = {path, fd[0], fd[1]};
    hkv_proc_t p;
    if (hkv_spawn(&p, probe_worker, &a) != 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    close(fd[1]);
    hkv_probe_t in;
    size_t got = 0;
    int have = 0, timed_out = 0, eof = 0;
    hkv_end_t e = {0, 0};
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!eof && !(have && pr->stage == HKV_PROBE_DONE)) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long el = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (el >= timeout_ms) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {fd[0], POLLIN, 0};
        if (poll(&pf, 1, (int)(timeout_ms - el > 100 ? 100 : timeout_ms - el)) <= 0)
            continue;
        ssize_t r = read(fd[0], (char *)&in + got, sizeof in - got);
        eof = r <= 0;
        got += r > 0 ? (size_t)r : 0;
        if (got == sizeof in) {
            *pr = in;
            have = 1;
            got = 0;
        }
    }
    close(fd[0]);
    hkv_proc_end(&p, &e);
    if (have && pr->stage == HKV_PROBE_DONE)
        return 0;
    probe_cut_short(pr, have, &e, timed_out);
    return -1;
}
