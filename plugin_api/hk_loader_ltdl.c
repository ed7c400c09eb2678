/* The loader's only contact with GNU libltdl.
 *
 * libltdl keeps its error string, handle list and loader list in globals
 * without locking, so every call below runs under one process-wide mutex.
 *
 * Why a module loader of our own: libltdl's dlopen back end reads dlerror(),
 * but lt_dlopenadvise then replaces that text with "file not found" for any
 * failure, so the one line that explains a refused file ("invalid ELF
 * header", "wrong ELF class: ELFCLASS32", "undefined symbol: ...") would be
 * lost. The loader registered here is consulted first, but only by a thread
 * inside hk__ltdl_open (other libltdl users in the process see no change);
 * it opens with RTLD_NOW | RTLD_LOCAL, so unresolved symbols are refused at
 * open time rather than crashing at first call, and keeps dlerror()'s text. */
#include "hk__loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HK__LTDL_LOADER_NAME "hk-dlopen"

static pthread_mutex_t hk__ltdl_mutex = PTHREAD_MUTEX_INITIALIZER;

/* All below are guarded by hk__ltdl_mutex, except the gate, which is per
 * thread so that only our own lt_dlopenadvise calls reach our back end. */
static _Thread_local int hk__gate;
static int hk__open_failed;
static char hk__open_error[512];
static int hk__pinned;

static lt_module hk__mod_open(lt_user_data data, const char *filename, lt_dladvise advise)
{
    (void)data;
    (void)advise; /* binding is always local: see the file comment */
    if (!hk__gate || !filename)
        return NULL;
    dlerror();
    void *module = dlopen(filename, RTLD_NOW | RTLD_LOCAL);
    if (!module) {
        const char *e = dlerror();
        hk__open_failed = 1;
        snprintf(hk__open_error, sizeof(hk__open_error), "%s", e ? e : "dlopen failed");
    }
    return module;
}

static int hk__mod_close(lt_user_data data, lt_module module)
{
    (void)data;
    return dlclose(module) != 0;
}

static void *hk__mod_sym(lt_user_data data, lt_module module, const char *name)
{
    (void)data;
    dlerror();
    return dlsym(module, name);
}

hk_status_t hk__ltdl_init(lt_dladvise *advise)
{
    hk_status_t st = HK_STATUS_OK;
    int inited = 0;

    pthread_mutex_lock(&hk__ltdl_mutex);
    if (lt_dlinit() != 0) {
        st = HK_STATUS_INTERNAL;
        goto out;
    }
    inited = 1;
    if (!lt_dlloader_find(HK__LTDL_LOADER_NAME)) {
        /* Heap-allocated: lt_dlexit frees every loader vtable when its count
         * drops to zero, and we add it again at the next first lt_dlinit. */
        lt_dlvtable *vt = calloc(1, sizeof(*vt));
        if (!vt) {
            st = HK_STATUS_OUT_OF_MEMORY;
            goto out;
        }
        vt->name = HK__LTDL_LOADER_NAME;
        vt->module_open = hk__mod_open;
        vt->module_close = hk__mod_close;
        vt->find_sym = hk__mod_sym;
        vt->priority = LT_DLLOADER_PREPEND;
        if (lt_dlloader_add(vt) != 0) {
            free(vt);
            st = HK_STATUS_INTERNAL;
            goto out;
        }
    }
    if (lt_dladvise_init(advise) != 0) {
        st = HK_STATUS_OUT_OF_MEMORY;
        goto out;
    }
    if (lt_dladvise_local(advise) != 0) {
        lt_dladvise_destroy(advise);
        st = HK_STATUS_INTERNAL;
        goto out;
    }
out:
    if (st != HK_STATUS_OK && inited)
        lt_dlexit();
    lt_dlerror(); /* leave no stale error for the next caller */
    pthread_mutex_unlock(&hk__ltdl_mutex);
    return st;
}

void hk__ltdl_exit(lt_dladvise *advise)
{
    pthread_mutex_lock(&hk__ltdl_mutex);
    lt_dladvise_destroy(advise);
    lt_dlexit();
    lt_dlerror();
    pthread_mutex_unlock(&hk__ltdl_mutex);
}

lt_dlhandle hk__ltdl_open(lt_dladvise advise, const char *path, char *err, size_t errlen)
{
    pthread_mutex_lock(&hk__ltdl_mutex);
    hk__open_failed = 0;
    hk__open_error[0] = '\0';
    hk__gate = 1;
    lt_dlhandle module = lt_dlopenadvise(path, advise);
    hk__gate = 0;
    if (module && hk__open_failed) {
        /* Our back end refused it but a later one (libltdl's lazy dlopen)
         * took it: the module has unresolved symbols or similar. Refuse it
         * with the first loader's reason. */
        lt_dlclose(module);
        module = NULL;
    }
    if (!module) {
        const char *e = lt_dlerror();
        snprintf(err, errlen, "%s", hk__open_error[0] ? hk__open_error
                                    : (e ? e : "lt_dlopenadvise failed"));
    }
    lt_dlerror();
    pthread_mutex_unlock(&hk__ltdl_mutex);
    return module;
}

void *hk__ltdl_sym(lt_dlhandle module, const char *name)
{
    pthread_mutex_lock(&hk__ltdl_mutex);
    void *sym = lt_dlsym(module, name);
    lt_dlerror();
    pthread_mutex_unlock(&hk__ltdl_mutex);
    return sym;
}

void hk__ltdl_close(lt_dlhandle module)
{
    pthread_mutex_lock(&hk__ltdl_mutex);
    lt_dlclose(module);
    lt_dlerror();
    pthread_mutex_unlock(&hk__ltdl_mutex);
}

void hk__ltdl_keep(lt_dlhandle module)
{
    pthread_mutex_lock(&hk__ltdl_mutex);
    lt_dlmakeresident(module);
    if (!hk__pinned) {
        /* lt_dlexit at count zero frees the loader vtables that resident
         * handles still point to; one reference that is never given back
         * keeps libltdl initialised for as long as such modules exist. */
        if (lt_dlinit() == 0)
            hk__pinned = 1;
    }
    lt_dlerror();
    pthread_mutex_unlock(&hk__ltdl_mutex);
}
