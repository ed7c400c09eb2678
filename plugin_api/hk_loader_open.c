/* handlekit loader: one candidate file, from stat to a validated plugin.
 *
 * Each step that refuses names itself in the report (DESIGN.md "Plugin ABI"):
 *   scan      stat failed, not a regular file, writable by others
 *             (NOT_FOUND, LOAD_FAILED, INSECURE)
 *   open      the dynamic loader's own message (LOAD_FAILED)
 *   symbol    the missing symbol's name (NOT_FOUND)
 *   negotiate the entry point's status, its ABI version and the host's range
 *             (the plugin's status)
 *   validate  which field of the answer or vtable is wrong (INVALID_VALUE,
 *             ABI_MISMATCH, NULL_POINTER) */
#include "hk__loader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_status_text.h"

/* Room for an answer from a plugin built against a longer answer struct: it
 * writes its own struct_size, and we read only what we know. */
typedef union hk__answer_buf {
    hk_negotiate_answer_t answer;
    unsigned char room[512];
} hk__answer_buf_t;

static void hk__version_text(char *buf, size_t n, uint32_t v)
{
    snprintf(buf, n, "%u.%u", (unsigned)HK_ABI_VERSION_MAJOR(v), (unsigned)HK_ABI_VERSION_MINOR(v));
}

static void hk__range_text(char *buf, size_t n, const hk_loader_t *loader)
{
    char lo[16], hi[16];
    hk__version_text(lo, sizeof(lo), loader->abi_min);
    hk__version_text(hi, sizeof(hi), loader->abi_max);
    snprintf(buf, n, "%s-%s", lo, hi);
}

/* Bytes of hk_vtable_t that an ABI minor defines; slots after that are
 * cleared even when the plugin's vtable is longer, so a plugin that answered
 * 1.0 is never called through a 1.1 slot. */
static size_t hk__vtable_end(uint32_t minor)
{
    static const size_t ends[] = {HK_VTABLE_SIZE_1_0, HK_VTABLE_SIZE_1_1, sizeof(hk_vtable_t)};
    size_t n = sizeof(ends) / sizeof(ends[0]);
    return ends[minor < n ? minor : n - 1];
}

/* Calls the entry point and checks its answer. On success fills p's name,
 * version, abi, flags and vtable copy; otherwise sets *stage and reason. */
static hk_status_t hk__negotiate(hk_loader_t *loader, hk_negotiate_fn entry, hk_plugin_t *p,
                                 hk_load_stage_t *stage, char *reason, size_t n)
{
    hk_negotiate_request_t req;
    hk__answer_buf_t buf;
    hk_negotiate_answer_t ans;
    char range[40], got[16];

    memset(&req, 0, sizeof(req));
    req.header.struct_type = HK_STRUCT_NEGOTIATE_REQUEST;
    req.header.struct_size = sizeof(req);
    req.header.struct_version = 1;
    req.abi_min = loader->abi_min;
    req.abi_max = loader->abi_max;
    req.log = loader->log;
    req.log_user = loader->log_user;
    memset(&buf, 0, sizeof(buf));
    buf.answer.header.struct_type = HK_STRUCT_NEGOTIATE_ANSWER;
    buf.answer.header.struct_size = sizeof(buf.answer);
    buf.answer.header.struct_version = 1;
    hk__range_text(range, sizeof(range), loader);

    *stage = HK_STAGE_NEGOTIATE;
    hk_status_t st = entry(&req, &buf.answer);
    if (st != HK_STATUS_OK) {
        hk__version_text(got, sizeof(got), buf.answer.abi_version);
        snprintf(reason, n, "%s returned %s (%s); plugin ABI %s, host accepts %s",
                 HK_ENTRY_SYMBOL, hk_status_name(st), hk_status_string(st), got, range);
        return st;
    }

    *stage = HK_STAGE_VALIDATE;
    const hk_struct_header_t *h = &buf.answer.header;
    if (h->struct_type != HK_STRUCT_NEGOTIATE_ANSWER) {
        snprintf(reason, n, "answer struct_type is 0x%08x, expected 0x%08x",
                 (unsigned)h->struct_type, (unsigned)HK_STRUCT_NEGOTIATE_ANSWER);
        return HK_STATUS_INVALID_VALUE;
    }
    if (h->struct_version < 1) {
        snprintf(reason, n, "answer struct_version is %u, expected 1 or later",
                 (unsigned)h->struct_version);
        return HK_STATUS_INVALID_VALUE;
    }
    if (h->struct_size < sizeof(hk_negotiate_answer_t)) {
        snprintf(reason, n, "answer struct_size is %u, smaller than the version 1 answer (%zu)",
                 (unsigned)h->struct_size, sizeof(hk_negotiate_answer_t));
        return HK_STATUS_INVALID_VALUE;
    }
    memset(&ans, 0, sizeof(ans));
    memcpy(&ans, &buf.answer, h->struct_size < sizeof(ans) ? h->struct_size : sizeof(ans));

    hk__version_text(got, sizeof(got), ans.abi_version);
    if (HK_ABI_VERSION_MAJOR(ans.abi_version) != HK_ABI_VERSION_MAJOR(loader->abi_min)) {
        snprintf(reason, n, "ABI major out of range: plugin answered %s, host accepts %s", got, range);
        return HK_STATUS_ABI_MISMATCH;
    }
    if (ans.abi_version < loader->abi_min || ans.abi_version > loader->abi_max) {
        snprintf(reason, n, "ABI minor out of range: plugin answered %s, host accepts %s", got, range);
        return HK_STATUS_ABI_MISMATCH;
    }
    const char *null_field = !ans.name ? "name" : !ans.version ? "version" : !ans.vtable ? "vtable" : NULL;
    if (null_field) {
        snprintf(reason, n, "answer %s is NULL", null_field);
        return HK_STATUS_NULL_POINTER;
    }
    size_t vsize = ans.vtable->size;
    if (vsize < HK_VTABLE_SIZE_1_0) {
        snprintf(reason, n, "vtable size %zu is smaller than the ABI 1.0 vtable (%zu)",
                 vsize, (size_t)HK_VTABLE_SIZE_1_0);
        return HK_STATUS_INVALID_VALUE;
    }

    size_t copy = vsize < sizeof(hk_vtable_t) ? vsize : sizeof(hk_vtable_t);
    size_t end = hk__vtable_end(HK_ABI_VERSION_MINOR(ans.abi_version));
    if (copy > end)
        copy = end;
    memset(&p->vtable, 0, sizeof(p->vtable));
    memcpy(&p->vtable, ans.vtable, copy);
    p->vtable.size = copy;

    const hk_vtable_t *vt = &p->vtable;
    const char *missing = !vt->handle_create ? "handle_create"
                          : !vt->handle_destroy ? "handle_destroy"
                          : !vt->last_error ? "last_error"
                          : !vt->get_table ? "get_table" : NULL;
    if (missing) {
        snprintf(reason, n, "required vtable slot %s is NULL", missing);
        return HK_STATUS_NULL_POINTER;
    }
    st = hk__answer_flags(ans.abi_version, ans.flags, &p->flags, reason, n);
    if (st != HK_STATUS_OK)
        return st;

    p->name = strdup(ans.name);
    p->version = strdup(ans.version);
    if (!p->name || !p->version) {
        snprintf(reason, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    p->abi = ans.abi_version;
    return HK_STATUS_OK;
}

/* A candidate in a directory others may write to can be swapped under us. */
static hk_status_t hk__check_parent(const char *path, char *reason, size_t n)
{
    char dir[4096];
    struct stat st;

    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (stat(dir, &st) != 0)
        return HK_STATUS_OK; /* the open below reports what is wrong */
    if (st.st_mode & S_IWOTH) {
        snprintf(reason, n, "directory %s is writable by others (mode %04o)", dir,
                 (unsigned)(st.st_mode & 07777));
        return HK_STATUS_INSECURE;
    }
    return HK_STATUS_OK;
}

hk_status_t hk__loader_candidate(hk_loader_t *loader, const char *path, int dir_checked,
                                 hk_plugin_t **out)
{
    struct stat st;
    hk__file_id_t id;
    char reason[4608]; /* room for a PATH_MAX directory name in a reason */
    char ebuf[256];
    hk_load_stage_t stage = HK_STAGE_SCAN;
    hk_status_t status = HK_STATUS_OK;
    lt_dlhandle module = NULL;
    hk_plugin_t *plugin = NULL;
    int stat_errno = 0;

    if (out)
        *out = NULL;
    if (stat(path, &st) != 0) {
        stat_errno = errno;
        hk__file_id_set(&id, NULL);
    } else {
        hk__file_id_set(&id, &st);
    }

    hk__report_t *prev = hk__loader_report_find(loader, path, &id);
    if (prev) {
        if (prev->pub.plugin) {
            if (out)
                *out = prev->pub.plugin;
            return HK_STATUS_OK;
        }
        hk__loader_set_error(loader, prev->line);
        return prev->pub.status;
    }

    if (stat_errno) {
        status = stat_errno == ENOENT ? HK_STATUS_NOT_FOUND : HK_STATUS_LOAD_FAILED;
        snprintf(reason, sizeof(reason), "cannot stat: %s",
                 strerror_r(stat_errno, ebuf, sizeof(ebuf)));
        goto refuse;
    }
    if (!S_ISREG(st.st_mode)) {
        status = HK_STATUS_LOAD_FAILED;
        snprintf(reason, sizeof(reason), "not a regular file");
        goto refuse;
    }
    if (st.st_mode & S_IWOTH) {
        status = HK_STATUS_INSECURE;
        snprintf(reason, sizeof(reason), "file is writable by others (mode %04o)",
                 (unsigned)(st.st_mode & 07777));
        goto refuse;
    }
    if (!dir_checked) {
        status = hk__check_parent(path, reason, sizeof(reason));
        if (status != HK_STATUS_OK)
            goto refuse;
    }

    stage = HK_STAGE_OPEN;
    /* A bare file name would send libltdl and dlopen searching the library
     * path for some other file of that name: open the one we checked. */
    if (!strchr(path, '/')) {
        char here[4352];
        snprintf(here, sizeof(here), "./%s", path);
        module = hk__ltdl_open(loader->advise, here, reason, sizeof(reason));
    } else {
        module = hk__ltdl_open(loader->advise, path, reason, sizeof(reason));
    }
    if (!module) {
        status = HK_STATUS_LOAD_FAILED;
        goto refuse;
    }

    stage = HK_STAGE_SYMBOL;
    hk_negotiate_fn entry;
    void *sym = hk__ltdl_sym(module, HK_ENTRY_SYMBOL);
    if (!sym) {
        status = HK_STATUS_NOT_FOUND;
        snprintf(reason, sizeof(reason), "missing entry symbol %s", HK_ENTRY_SYMBOL);
        goto refuse;
    }
    /* POSIX guarantees that a data pointer from dlsym converts to a function
     * pointer; copying the bytes avoids ISO C's objection to the cast. */
    memcpy(&entry, &sym, sizeof(entry));

    plugin = calloc(1, sizeof(*plugin));
    if (!plugin) {
        status = HK_STATUS_OUT_OF_MEMORY;
        snprintf(reason, sizeof(reason), "out of memory");
        goto refuse;
    }
    status = hk__negotiate(loader, entry, plugin, &stage, reason, sizeof(reason));
    if (status != HK_STATUS_OK)
        goto refuse;
    plugin->loader = loader;
    plugin->module = module;
    plugin->dev = st.st_dev;
    plugin->ino = st.st_ino;
    plugin->path = strdup(path);
    if (!plugin->path || hk__loader_plugin_add(loader, plugin) != HK_STATUS_OK) {
        status = HK_STATUS_OUT_OF_MEMORY;
        snprintf(reason, sizeof(reason), "out of memory");
        goto refuse;
    }
    if (!(plugin->flags & HK_PLUGIN_UNLOAD_SAFE))
        hk__ltdl_keep(module);
    hk__loader_report_add(loader, path, HK_STAGE_LOADED, HK_STATUS_OK, "", plugin, &id);
    if (out)
        *out = plugin;
    return HK_STATUS_OK;

refuse:
    /* Nothing of a refused module was handed out, so closing it is safe. */
    if (module)
        hk__ltdl_close(module);
    if (plugin) {
        free(plugin->path);
        free(plugin->name);
        free(plugin->version);
        free(plugin);
    }
    hk__loader_report_add(loader, path, stage, status, reason, NULL, &id);
    return status;
}

hk_status_t hk_loader_open(hk_loader_t *loader, const char *path, hk_plugin_t **out)
{
    if (out)
        *out = NULL;
    if (!loader)
        return HK_STATUS_NULL_POINTER;
    if (!path) {
        hk__loader_set_error(loader, "hk_loader_open: path is NULL");
        return HK_STATUS_NULL_POINTER;
    }
    pthread_mutex_lock(&loader->open_lock);
    hk_status_t st = hk__loader_candidate(loader, path, 0, out);
    pthread_mutex_unlock(&loader->open_lock);
    return st;
}
