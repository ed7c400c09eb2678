/* handlekit kit: opening the CUDA driver and taking its entry points, and
 * giving the driver back when the plugin's module is closed.
 *
 * docs/contexts.md, "Other rules": no link to libcuda; dlopen of libcuda.so.1
 * (or $HK_CUDA_DRIVER, checked like a plugin file) at the first create, never
 * at load or negotiation, and every entry point through cuGetProcAddress at a
 * pinned version.
 *
 * The fork and exit flags are hkk_fork.c's, the table hkk_table.c's; the
 * public hk_kit_driver_load and what the module gives back when it is closed
 * are hkk_module.c's. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hk__trust.h"
#include "hkk_internal.h"

/* Guards opening the driver; never taken on a call's path. */
static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;
static void *drv_lib;     /* our reference on the driver, given back at unload */
static int drv_pinned;    /* the driver stays mapped whatever we give back */
static char drv_path[PATH_MAX]; /* for messages */
static PFN_cuGetProcAddress_v12000 drv_getproc;
static atomic_int drv_ready;

static void version_text(int v, char *buf, size_t len)
{
    snprintf(buf, len, "%d.%d (%d)", v / 1000, (v % 1000) / 10, v);
}

/* The driver must run the kernels' PTX, so it must know the toolkit version
 * that built them (the plugin's CUDA_VERSION at build time). */
static hk_status_t check_version(int min_version)
{
    int v = 0;
    CUresult r = KCU.cuDriverGetVersion(&v);
    if (r != CUDA_SUCCESS)
        return hk_kit_fail_cu(NULL, r, "cuDriverGetVersion");
    if (v < min_version) {
        char have[32], need[32];
        version_text(v, have, sizeof have);
        version_text(min_version, need, sizeof need);
        return hk_kit_fail(NULL, HK_STATUS_DRIVER_TOO_OLD,
                           "the CUDA driver supports CUDA %s, the kernels were built with CUDA "
                           "%s; update the driver", have, need);
    }
    return HK_STATUS_OK;
}

/* Takes entries[0..count) through getproc; a missing one names itself. */
static hk_status_t take_entry_points(PFN_cuGetProcAddress_v12000 getproc, const char *path,
                                     const hk_kit_entry_t *entries, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (!entries[i].name || !entries[i].slot)
            return hk_kit_fail(NULL, HK_STATUS_NULL_POINTER,
                               "entry point %zu to take has a NULL name or slot", i);
        CUresult r = getproc(entries[i].name, &fn, entries[i].version,
                             CU_GET_PROC_ADDRESS_DEFAULT, &q);
        if (r != CUDA_SUCCESS || !fn) {
            char cu[96];
            hk_kit_cu_name(r, cu, sizeof cu);
            return hk_kit_fail(NULL, q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                         ? HK_STATUS_DRIVER_TOO_OLD : HK_STATUS_NO_DRIVER,
                               "the CUDA driver %s has no %s at API version %d (%s, %s)", path,
                               entries[i].name, entries[i].version,
                               q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                   ? "version not sufficient" : "symbol not found", cu);
        }
        *entries[i].slot = fn;
    }
    return HK_STATUS_OK;
}

/* The kit's own entry points. */
static hk_status_t take_kit_entry_points(PFN_cuGetProcAddress_v12000 getproc, const char *path)
{
    static const hk_kit_entry_t entries[] = {
#define HK__KIT_ENTRY(name, ver) {#name, ver, (void **)&hkk_cu.name},
        HK__KIT_ENTRY_POINTS(HK__KIT_ENTRY)
#undef HK__KIT_ENTRY
    };
    return take_entry_points(getproc, path, entries, sizeof entries / sizeof entries[0]);
}

/* The file named by $HK_CUDA_DRIVER runs with our privileges, so it is held to
 * the project's one trust rule (common/lib/hk__trust.c, docs/security.md), as a
 * plugin file is: every directory and link on the way and the file owned by
 * root or the effective user and writable by nobody else (but for a sticky
 * directory), a regular file. It is opened once, checked through that
 * descriptor and loaded through it (/proc/self/fd/N), so the file checked is
 * the file loaded. NULL with the create error written on refusal. */
static void *open_named_driver(const char *path)
{
    char why[PATH_MAX + 256], fdpath[64];
    struct stat st;
    int fd = -1;
    hk_status_t status = hk__trust_open(path, 0, 0, &fd, &st, NULL, why, sizeof why);
    if (status == HK_STATUS_NOT_FOUND) { /* the reason without the walk's "cannot stat: " */
        const char *tail = strncmp(why, "cannot stat: ", 13) == 0 ? why + 13 : why;
        hk_kit_fail(NULL, HK_STATUS_NO_DRIVER,
                    "cannot open the CUDA driver %s (HK_CUDA_DRIVER): %s", path, tail);
        return NULL;
    }
    if (status != HK_STATUS_OK) {
        hk_kit_fail(NULL, HK_STATUS_NO_DRIVER,
                    "the CUDA driver %s (HK_CUDA_DRIVER) is refused: %s", path, why);
        return NULL;
    }
    /* The dynamic loader knows a file it has loaded already by its device
     * and inode, so a driver the process uses already is not loaded twice. */
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
    void *lib = dlopen(fdpath, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        hk_kit_fail(NULL, HK_STATUS_NO_DRIVER,
                    "cannot open the CUDA driver %s (HK_CUDA_DRIVER): %s", path,
                    e ? e : "unknown reason");
    }
    close(fd);
    return lib;
}

/* cuInit failed. In the child of a fork() of a process that initialised the
 * driver (through hk-cuda or not, so our fork handler may never have run),
 * cuInit answers CUDA_ERROR_NOT_INITIALIZED while cuDriverGetVersion, which
 * needs no initialisation, still works (docs/contexts.md fact 18): that pair
 * is taken to mean a fork child, and the caller gets HK_STATUS_FORKED. */
static hk_status_t init_failed(CUresult r, const char *path)
{
    char cu[96];
    int v = 0;
    hk_kit_cu_name(r, cu, sizeof cu);
    if (r == CUDA_ERROR_NO_DEVICE)
        return hk_kit_fail(NULL, HK_STATUS_NO_DEVICE, "cuInit: %s", cu);
    if (r == CUDA_ERROR_NOT_INITIALIZED && KCU.cuDriverGetVersion(&v) == CUDA_SUCCESS)
        return hk_kit_fail(NULL, HK_STATUS_FORKED,
                           "cuInit: %s while cuDriverGetVersion works: this process is a fork() "
                           "child of a process that initialised CUDA, and cannot use it", cu);
    return hk_kit_fail(NULL, HK_STATUS_NO_DRIVER, "cuInit of the CUDA driver %s failed: %s",
                       path, cu);
}

/* Once the file is known to be the driver, it is marked to stay mapped for
 * the life of the process (see the file comment): dlopen of the same object
 * with RTLD_NOLOAD | RTLD_NODELETE marks it, and that extra reference is
 * given back at once. A file that turned out not to be a driver was opened
 * without the mark, so closing it unmaps it. 1 when marked. */
static int pin_driver(void *lib)
{
    struct link_map *lm = NULL;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name || !lm->l_name[0])
        return 0;
    void *again = dlopen(lm->l_name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD | RTLD_NODELETE);
    if (!again)
        return 0;
    dlclose(again);
    return 1;
}

/* Opens the driver and takes the kit's entry points; caller holds drv_lock. */
static hk_status_t open_driver(int min_version)
{
    hk_status_t st = HK_STATUS_OK;
    const char *path = secure_getenv("HK_CUDA_DRIVER");
    void *lib = NULL;
    if (path && *path) {
        lib = open_named_driver(path);
        if (!lib)
            return HK_STATUS_NO_DRIVER;
    } else {
        path = "libcuda.so.1";
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *why = dlerror();
            return hk_kit_fail(NULL, HK_STATUS_NO_DRIVER, "cannot open the CUDA driver %s: %s",
                               path, why ? why : "unknown reason");
        }
    }
    /* The _v2 form (CUDA 12.0+) reports why a symbol is missing. */
    PFN_cuGetProcAddress_v12000 getproc =
        (PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2");
    if (!getproc) {
        char need[32];
        version_text(min_version, need, sizeof need);
        st = hk_kit_fail(NULL, HK_STATUS_DRIVER_TOO_OLD,
                         "the CUDA driver %s predates CUDA 12.0 (no cuGetProcAddress_v2); "
                         "the kernels need CUDA %s", path, need);
        goto out;
    }
    st = take_kit_entry_points(getproc, path);
    if (st != HK_STATUS_OK)
        goto out;
    CUresult r = KCU.cuInit(0);
    if (r != CUDA_SUCCESS) {
        st = init_failed(r, path);
        goto out;
    }
    st = check_version(min_version);
out:
    if (st != HK_STATUS_OK) {
        memset(&hkk_cu, 0, sizeof hkk_cu);
        dlclose(lib);
        return st;
    }
    drv_lib = lib;
    drv_pinned = pin_driver(lib);
    snprintf(drv_path, sizeof drv_path, "%s", path);
    drv_getproc = getproc;
    return HK_STATUS_OK;
}

hk_status_t hkk_driver_open(int min_version)
{
    if (atomic_load_explicit(&drv_ready, memory_order_acquire))
        return HK_STATUS_OK;
    pthread_mutex_lock(&drv_lock);
    hk_status_t st = HK_STATUS_OK;
    if (!drv_lib)
        st = open_driver(min_version);
    if (st == HK_STATUS_OK)
        atomic_store_explicit(&drv_ready, 1, memory_order_release);
    HK__KIT_TRACE_DRIVER(st, drv_path, drv_lib);
    pthread_mutex_unlock(&drv_lock);
    return st;
}

hk_status_t hk_kit_driver_take(const hk_kit_entry_t *entries, size_t count)
{
    if (!atomic_load_explicit(&drv_ready, memory_order_acquire))
        return hk_kit_fail(NULL, HK_STATUS_NO_DRIVER,
                           "hk_kit_driver_take before hk_kit_driver_load succeeded");
    if (!entries && count > 0)
        return hk_kit_fail(NULL, HK_STATUS_NULL_POINTER, "hk_kit_driver_take: entries is NULL");
    return take_entry_points(drv_getproc, drv_path, entries, count);
}

/* ---- the module's unload (hkk_module.c) ---- */

int hkk_driver_ready(void)
{
    return atomic_load(&drv_ready);
}

void hkk_driver_close(void)
{
    pthread_mutex_lock(&drv_lock);
    atomic_store(&drv_ready, 0);
    memset(&hkk_cu, 0, sizeof hkk_cu);
    drv_getproc = NULL;
    if (drv_lib && drv_pinned) /* unpinned (a dynamic loader that would not mark it): kept */
        dlclose(drv_lib);
    drv_lib = NULL;
    pthread_mutex_unlock(&drv_lock);
}
