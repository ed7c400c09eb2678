/* handlekit kit: the plugin's module as a whole: hk_kit_driver_load (the
 * fork watch, then the driver opened once, hkk_driver.c), the registry of the
 * plugin's handles, and what the module gives back when it is closed.
 *
 * They sit in one file, on top of the kit, because a plugin links the kit as
 * a static archive, which brings in only the files whose names the plugin
 * uses: a plugin that loads the driver or takes a handle brings the
 * destructor below with them; one that does neither leaves it nothing to
 * give back.
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
#include "hk__registry.h"
#include "hkk_internal.h"

hk_status_t hk_kit_driver_load(int min_version)
{
    hk_kit_fork_watch();
    if (atomic_load(&hkk_forked))
        return hk_kit_fail(NULL, HK_STATUS_FORKED,
                           "this process is a fork() child of a CUDA process");
    return hkk_driver_open(min_version);
}

/* ---- the handle registry ----
 *
 * common/lib/hk__registry.h (compiled into the kit): one per plugin, since each
 * plugin links its own copy of the kit. */

static hk__registry_t handles = HK__REGISTRY_INIT(HK_KIT_HANDLE_MAX);

_Static_assert(HK__REG_SLOT_BYTES(HK_KIT_HANDLE_MAX) != 0, "HK_KIT_HANDLE_MAX too big for a slot");

void *hk_kit_handle_take(size_t bytes)
{
    return bytes <= HK_KIT_HANDLE_MAX ? hk__reg_take(&handles) : NULL;
}

void hk_kit_handle_publish(void *handle)
{
    hk__reg_publish(&handles, handle);
}

int hk_kit_handle_live(const void *p)
{
    return hk__reg_live(&handles, p);
}

int hk_kit_handle_retire(void *handle)
{
    return hk__reg_retire(&handles, handle);
}

void hk_kit_handle_put(void *handle)
{
    hk__reg_put(&handles, handle);
}

/* Frees the handle registry when every handle was given back; returns how
 * many were not. */
static size_t handles_fini(void)
{
    pthread_mutex_lock(&handles.lock);
    size_t out = handles.out;
    pthread_mutex_unlock(&handles.lock);
    if (out == 0)
        hk__reg_fini(&handles);
    return out;
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
    if (atomic_load(&hkk_exiting) || atomic_load(&hkk_forked) || handles_fini() > 0)
        return;
    /* What the plugin and the kit keep between handles first (a host that
     * closes the module should have called it already, hk_trim.h: here the
     * dynamic loader's lock is held while the driver works); a refusal
     * leaves it to what follows, or to the driver. */
    if (hkk_driver_ready())
        (void)hk_kit_trim();
    if (hkk_driver_ready() && hkk_libraries_fini() > 0)
        return; /* the driver refused an unload: keep the reference it needs */
    hkk_driver_close();
}
