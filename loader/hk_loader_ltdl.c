/* The loader's only contact with GNU libltdl, and the descriptor-based open.
 *
 * libltdl keeps its error string, handle list and loader list in globals
 * without locking, so every call below runs under one process-wide mutex.
 *
 * Why a module loader of our own: libltdl's dlopen back end reads dlerror(),
 * but lt_dlopenadvise then replaces that text with "file not found" for any
 * failure, so the one line that explains a refused file ("undefined symbol:
 * ...") would be lost. Worse, when a back end fails libltdl tries the next
 * one, and its own dlopen back end binds lazily: a file refused for an
 * unresolved symbol would be mapped again, and its constructors run. The back
 * end registered here is consulted first, but only by a thread inside
 * hk__ltdl_open_name (other libltdl users in the process see no change). It
 * opens with RTLD_NOW | RTLD_LOCAL, and when dlopen fails it still answers
 * with a sentinel module, so libltdl never asks another back end; the caller
 * closes the sentinel handle and reports dlerror()'s text.
 *
 * Why "/proc/<pid>/fd/<fd>": the host checks a file through one descriptor
 * (hk_loader_trust.c, hk_loader_elf.c) and the dynamic loader must map that
 * very file, not whatever the path names a moment later. The kernel resolves
 * the name to the descriptor's open file, with no path walk. The pid (not
 * "self") keeps the name usable by a debugger reading the link map.
 * glibc matches dlopen names against the names of loaded objects before it
 * opens anything (and adds every name an object was requested under), so a
 * name must never come to mean another file: the descriptor behind a name
 * stays open for as long as any object in the process may carry the name
 * (hk__mapped_t below), and a second open of a file already mapped this way
 * reuses the first name instead of adding one. A descriptor is closed only
 * after dlopen(name, RTLD_NOLOAD) finds nothing under it.
 *
 * A snapshot (hk_loader_snap.c) is a memfd of its own for every load, so
 * its own inode says nothing about which file it holds: a snapshot is the
 * same as one already mapped when both copied the same file (device and
 * inode) and their bytes are equal. Equal bytes, not the file's times: a
 * file rewritten within one tick of its clock keeps its size and times, and
 * reusing the older copy's name would run the older bytes. */
#include "hk__loader.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HK__LTDL_LOADER_NAME "hk-dlopen"

static pthread_mutex_t hk__ltdl_mutex = PTHREAD_MUTEX_INITIALIZER;

/* All below are guarded by hk__ltdl_mutex, except the gate, which is per
 * thread so that only our own lt_dlopenadvise calls reach our back end. */
static _Thread_local int hk__gate;
static _Thread_local int hk__mine; /* this thread holds hk__ltdl_mutex */
static int hk__open_failed;
static char hk__open_error[1024];
static int hk__pinned;
static char hk__refused_module; /* the sentinel's address is the sentinel */

struct hk__mapped {
    hk__mapped_t *next;
    dev_t dev; /* the file's (for a snapshot: the file it copied) */
    ino_t ino;
    int snapshot;
    dev_t map_dev; /* fd's own, as /proc/self/maps shows it */
    ino_t map_ino;
    int fd;
    unsigned uses; /* our open modules through this name */
    char name[48]; /* "/proc/<pid>/fd/<fd>" */
};
static hk__mapped_t *hk__mapped_list;

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
        return &hk__refused_module;
    }
    return module;
}

static int hk__mod_close(lt_user_data data, lt_module module)
{
    (void)data;
    if (module == &hk__refused_module)
        return 0;
    return dlclose(module) != 0;
}

static void *hk__mod_sym(lt_user_data data, lt_module module, const char *name)
{
    (void)data;
    if (module == &hk__refused_module)
        return NULL;
    dlerror();
    return dlsym(module, name);
}

static void hk__take(void)
{
    pthread_mutex_lock(&hk__ltdl_mutex);
    hk__mine = 1;
}

static void hk__give(void)
{
    hk__mine = 0;
    pthread_mutex_unlock(&hk__ltdl_mutex);
}

/* The fork handlers' use: a constructor that forks runs inside dlopen on a
 * thread that already holds the lock, and taking it again would deadlock
 * that thread; then the lock stays as it is (held by the same thread in
 * the child, which goes on to release it). */
void hk__ltdl_lock(void)
{
    if (!hk__mine)
        pthread_mutex_lock(&hk__ltdl_mutex);
}

void hk__ltdl_unlock(void)
{
    if (!hk__mine)
        pthread_mutex_unlock(&hk__ltdl_mutex);
}

hk_status_t hk__ltdl_init(lt_dladvise *advise)
{
    hk_status_t st = HK_STATUS_OK;
    int inited = 0;

    hk__take();
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
    hk__give();
    return st;
}

void hk__ltdl_exit(lt_dladvise *advise)
{
    hk__take();
    lt_dladvise_destroy(advise);
    lt_dlexit();
    lt_dlerror();
    hk__give();
}

void hk__reason_rename(char *text, size_t n, const char *from, const char *to)
{
    size_t flen = strlen(from), tlen = strlen(to);
    char *hit = flen ? strstr(text, from) : NULL;
    while (hit) {
        size_t tail = strlen(hit + flen);
        size_t pos = (size_t)(hit - text);
        if (pos + tlen + tail + 1 > n)
            return; /* no room: leave the rest as it is */
        memmove(hit + tlen, hit + flen, tail + 1);
        memcpy(hit, to, tlen);
        hit = strstr(hit + tlen, from);
    }
}

/* Caller holds hk__ltdl_mutex. */
static lt_dlhandle hk__open_locked(lt_dladvise advise, const char *name, const char *shown,
                                   char *err, size_t errlen)
{
    hk__open_failed = 0;
    hk__open_error[0] = '\0';
    hk__gate = 1;
    lt_dlhandle module = lt_dlopenadvise(name, advise);
    hk__gate = 0;
    if (module && hk__open_failed) {
        /* The sentinel: our back end refused it. Nothing was mapped. */
        lt_dlclose(module);
        module = NULL;
    }
    if (!module) {
        const char *e = lt_dlerror();
        snprintf(err, errlen, "%s", hk__open_error[0] ? hk__open_error
                                    : (e ? e : "lt_dlopenadvise failed"));
        hk__reason_rename(err, errlen, name, shown);
    }
    lt_dlerror();
    return module;
}

lt_dlhandle hk__ltdl_open_name(lt_dladvise advise, const char *name, const char *shown,
                               char *err, size_t errlen)
{
    hk__take();
    lt_dlhandle module = hk__open_locked(advise, name, shown, err, errlen);
    hk__give();
    return module;
}

/* 1 when some object of the process still answers to m's name. */
static int hk__name_in_use(const hk__mapped_t *m)
{
    void *h = dlopen(m->name, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h)
        return 0;
    dlclose(h); /* NOLOAD took a reference */
    return 1;
}

static void hk__mapped_unlink(hk__mapped_t *m)
{
    for (hk__mapped_t **pp = &hk__mapped_list; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            return;
        }
    }
}

/* 1 when the files behind a and b hold the same bytes. */
static int hk__same_bytes(int a, int b)
{
    struct stat sa, sb;
    if (fstat(a, &sa) != 0 || fstat(b, &sb) != 0 || sa.st_size != sb.st_size)
        return 0;
    if (sa.st_size == 0)
        return 1;
    size_t n = (size_t)sa.st_size;
    void *pa = mmap(NULL, n, PROT_READ, MAP_PRIVATE, a, 0);
    void *pb = mmap(NULL, n, PROT_READ, MAP_PRIVATE, b, 0);
    int same = pa != MAP_FAILED && pb != MAP_FAILED && memcmp(pa, pb, n) == 0;
    if (pa != MAP_FAILED)
        munmap(pa, n);
    if (pb != MAP_FAILED)
        munmap(pb, n);
    return same;
}

/* The record a new open of fd may share: the same file, loaded the same
 * way (and for a snapshot, the same bytes). Caller holds hk__ltdl_mutex. */
static hk__mapped_t *hk__mapped_find(int fd, const struct stat *st, int snapshot)
{
    for (hk__mapped_t *m = hk__mapped_list; m; m = m->next)
        if (m->dev == st->st_dev && m->ino == st->st_ino && m->snapshot == snapshot
            && (!snapshot || hk__same_bytes(m->fd, fd)))
            return m;
    return NULL;
}

lt_dlhandle hk__ltdl_open_fd(lt_dladvise advise, int fd, const struct stat *st, int snapshot,
                             const char *shown, hk__mapped_t **mapped, char *err,
                             size_t errlen)
{
    hk__mapped_t *m = NULL, *fresh = NULL;
    lt_dlhandle module = NULL;
    struct stat own;

    *mapped = NULL;
    hk__take();
    m = hk__mapped_find(fd, st, snapshot);
    if (!m) {
        fresh = calloc(1, sizeof(*fresh));
        if (!fresh || fstat(fd, &own) != 0) {
            free(fresh);
            fresh = NULL;
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        fresh->dev = st->st_dev;
        fresh->ino = st->st_ino;
        fresh->snapshot = snapshot;
        fresh->map_dev = own.st_dev;
        fresh->map_ino = own.st_ino;
        fresh->fd = fd;
        snprintf(fresh->name, sizeof(fresh->name), "/proc/%ld/fd/%d", (long)getpid(), fd);
        m = fresh;
    }
    module = hk__open_locked(advise, m->name, shown, err, errlen);
    if (!module) {
        /* A failed dlopen leaves no object behind, hence no name. */
        free(fresh);
        goto out;
    }
    m->uses++;
    if (fresh) {
        fresh->next = hk__mapped_list;
        hk__mapped_list = fresh;
    } else {
        close(fd); /* the file is already mapped under m's name */
    }
    *mapped = m;
out:
    hk__give();
    return module;
}

/* m->fd and the identities never change while m has uses, which the
 * caller's module holds: no lock. */
int hk__ltdl_mapped_dup(const hk__mapped_t *mapped)
{
    return fcntl(mapped->fd, F_DUPFD_CLOEXEC, 0);
}

void hk__ltdl_mapped_id(const hk__mapped_t *mapped, dev_t *dev, ino_t *ino)
{
    *dev = mapped->map_dev;
    *ino = mapped->map_ino;
}

void *hk__ltdl_sym(lt_dlhandle module, const char *name)
{
    hk__take();
    void *sym = lt_dlsym(module, name);
    lt_dlerror();
    hk__give();
    return sym;
}

void hk__ltdl_close(lt_dlhandle module, hk__mapped_t *mapped)
{
    hk__take();
    lt_dlclose(module);
    lt_dlerror();
    if (mapped && mapped->uses > 0 && --mapped->uses == 0 && !hk__name_in_use(mapped)) {
        hk__mapped_unlink(mapped);
        close(mapped->fd);
        free(mapped);
    }
    hk__give();
}

void hk__ltdl_keep(lt_dlhandle module)
{
    hk__take();
    lt_dlmakeresident(module);
    if (!hk__pinned) {
        /* lt_dlexit at count zero frees the loader vtables that resident
         * handles still point to; one reference that is never given back
         * keeps libltdl initialised for as long as such modules exist. */
        if (lt_dlinit() == 0)
            hk__pinned = 1;
    }
    lt_dlerror();
    hk__give();
}
