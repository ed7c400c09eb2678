/* handlekit kit: opening the CUDA driver and taking its entry points, the
 * fork handler, and what the plugin's module gives back when it is closed.
 *
 * docs/contexts.md, "Other rules": no link to libcuda; dlopen of libcuda.so.1
 * (or $HK_CUDA_DRIVER, checked like a plugin file) at the first create, never
 * at load or negotiation, and every entry point through cuGetProcAddress at a
 * pinned version.
 *
 * Unloading. A plugin built on the kit may be closed (dlclose) once nothing
 * uses it (docs/swap.md: no handle, no call in flight, no acquire), and may
 * be loaded again later, several builds of it side by side. When its module
 * goes, nothing may be left pointing into it and nothing it loaded may leak:
 *   - the fork handler: glibc registers a pthread_atfork handler with the
 *     registering object's __dso_handle and removes it when that object is
 *     closed (__cxa_finalize calls __unregister_atfork), so a fork() after the
 *     close runs nothing of the module (tests/swap checks it: the child runs
 *     and the file is gone from /proc/self/maps);
 *   - kernel libraries: the plugin unloads its own with its last handle, with
 *     no lock held (cuLibraryUnload waits for running kernels); the
 *     destructor below gives back whatever is left;
 *   - the driver: once it is known to be the driver, marked RTLD_NODELETE,
 *     and our reference given back at unload. The driver's state is the
 *     process's (the runtime and other libraries hold contexts in it, memory
 *     our handles allocated outlives them, the driver runs threads of its
 *     own): unmapping it because our reference was the last one would pull it
 *     from under all of them, and a later load would initialise a second
 *     copy. So it stays mapped for the life of the process, as the runtime
 *     keeps it;
 *   - no thread-local destructors: the kit's thread-local data are plain
 *     arrays (no pthread_key_create, no C++ thread_local), which glibc frees
 *     with the module's TLS block;
 *   - at process exit the destructor gives back nothing (see kit_unload). */
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

hkk_cu_t hkk_cu;
atomic_int hkk_forked;

/* Guards opening the driver; never taken on a call's path. */
static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;
static void *drv_lib;     /* our reference on the driver, given back at unload */
static int drv_pinned;    /* the driver stays mapped whatever we give back */
static char drv_path[PATH_MAX]; /* for messages */
static PFN_cuGetProcAddress_v12000 drv_getproc;
static atomic_int drv_ready;

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* The child of a fork() cannot use CUDA (docs/contexts.md fact 18), and the parent's
 * handles and library are meaningless there: flag it, touch nothing else.
 * Registered with this module's __dso_handle: closing the module removes it
 * (see the file comment). */
static void on_fork_child(void)
{
    atomic_store(&hkk_forked, 1);
}

/* Set when the process exits. Registered with this module's __dso_handle
 * too: at exit() it runs before any destructor (the dynamic loader's own
 * exit handler, which runs the destructors, was registered first), while at
 * dlclose it runs after this module's destructor (crtbegin's entry, which
 * calls __cxa_finalize, is the last one of the module's fini array to run).
 * So the destructor below knows an exit from a close. */
static atomic_int process_exiting;

/* glibc's (the C++ ABI's) registration of an exit handler owned by the
 * object dso: run at exit(), or when dso is closed, whichever comes first.
 * Called directly rather than through atexit(), which a sanitizer runtime
 * may intercept and register as the program's own (dso NULL): that handler
 * would outlive the module and be called in unmapped memory at exit. */
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);
extern void *__dso_handle __attribute__((visibility("hidden")));

static void on_exit_noted(void *unused)
{
    (void)unused;
    atomic_store(&process_exiting, 1);
}

static void register_fork_handler(void)
{
    /* pthread_atfork cannot fail except for lack of memory; then a child would
     * see CUDA errors instead of HK_STATUS_FORKED, which is still a status. */
    (void)pthread_atfork(NULL, NULL, on_fork_child);
    /* Without it (no memory), the destructor may give back at exit what it
     * would give back at a close: still correct while the driver answers. */
    (void)__cxa_atexit(on_exit_noted, NULL, &__dso_handle);
}

void hk_kit_fork_watch(void)
{
    pthread_once(&fork_once, register_fork_handler);
}

int hk_kit_forked(void)
{
    return atomic_load_explicit(&hkk_forked, memory_order_relaxed);
}

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
 * the project's one trust rule (common/hk__trust.c, docs/security.md), as a
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

hk_status_t hk_kit_driver_load(int min_version)
{
    hk_kit_fork_watch();
    if (atomic_load(&hkk_forked))
        return hk_kit_fail(NULL, HK_STATUS_FORKED,
                           "this process is a fork() child of a CUDA process");
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

/* ---- the module's unload ---- */

/* Runs when the plugin's module is closed, and at process exit. At exit it
 * does nothing: the process's end takes everything, and the driver's own
 * destructors may have run already (the dynamic loader orders the
 * destructors of objects that do not depend on each other by their place in
 * its list, which a driver loaded at start-up precedes). In a fork() child it
 * does nothing either: the driver is unusable there, and a lock another
 * parent thread held at the fork may stay held. Nor when a handle of the
 * plugin is still live (a module closed under a host's raw handles, against
 * the acquire rule). Otherwise it
 * unloads the kernel libraries still loaded (none can be running: every
 * handle synchronised its context when it was destroyed, so the driver does
 * not wait, although this runs inside dlclose), gives back the primary
 * retains the kit keeps (hkk_keep.c), frees the kit's registries, and gives
 * back the driver reference (the driver stays mapped:
 * RTLD_NODELETE). */
__attribute__((destructor)) static void kit_unload(void)
{
    if (atomic_load(&process_exiting) || atomic_load(&hkk_forked) ||
        hkk_handles_fini() > 0)
        return;
    /* What the plugin and the kit keep between handles first (a host that
     * closes the module should have called it already, hk_trim.h: here the
     * dynamic loader's lock is held while the driver works); a refusal
     * leaves it to what follows, or to the driver. */
    if (atomic_load(&drv_ready))
        (void)hk_kit_trim();
    if (atomic_load(&drv_ready) && hkk_libraries_fini() > 0)
        return; /* the driver refused an unload: keep the reference it needs */
    pthread_mutex_lock(&drv_lock);
    atomic_store(&drv_ready, 0);
    memset(&hkk_cu, 0, sizeof hkk_cu);
    drv_getproc = NULL;
    if (drv_lib && drv_pinned) /* unpinned (a dynamic loader that would not mark it): kept */
        dlclose(drv_lib);
    drv_lib = NULL;
    pthread_mutex_unlock(&drv_lock);
}
