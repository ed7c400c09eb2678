/* hk-bench: opening hk-cuda the way a host does (dlopen, negotiate, validate,
 * copy the vtable and tables). The bench does not use the host loader library:
 * it measures one named file and wants every refusal reason verbatim. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_status_text.h"
#include "hkb.h"

#ifndef HKB_PLUGIN_REL
#define HKB_PLUGIN_REL "build/release/plugins"
#endif
#define HKB_PLUGIN_FILE "hk-cuda.so"

const char *hkb_plugin_default_path(char *buf, size_t len)
{
    char exe[4096];
    ssize_t got = readlink("/proc/self/exe", exe, sizeof exe - 1);

    /* The program lives in <build>/bin and the plugin in <build>/plugins, so
     * a build directory carried to another machine still finds its plugin. */
    if (got > 0) {
        exe[got] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            int w = snprintf(buf, len, "%s/../plugins/%s", exe, HKB_PLUGIN_FILE);
            if (w > 0 && (size_t)w < len && access(buf, F_OK) == 0)
                return buf;
        }
    }
    snprintf(buf, len, "%s/%s", HKB_PLUGIN_REL, HKB_PLUGIN_FILE);
    return buf;
}

int hkb_hk_ok(const hkb_plugin_t *p, hk_handle_t *h, hk_status_t st, const char *what)
{
    if (st == HK_STATUS_OK)
        return 0;
    const char *detail = p->vt.last_error ? p->vt.last_error(h) : "";
    return hkb_fail("%s: %s: %s%s%s", what, hk_status_name(st), hk_status_string(st),
                    detail && detail[0] ? ": " : "", detail ? detail : "");
}

/* Copies a plugin struct that starts with its size: the bytes both sides know,
 * the rest zero (a NULL slot means "not supported"). */
static int copy_sized(void *dst, size_t dst_size, const void *src, const char *what)
{
    size_t have;
    memcpy(&have, src, sizeof have);
    if (have < sizeof(size_t))
        return hkb_fail("%s: size field %zu is too small", what, have);
    memset(dst, 0, dst_size);
    memcpy(dst, src, have < dst_size ? have : dst_size);
    return 0;
}

static int get_table(hkb_plugin_t *p, const char *name, void *dst, size_t dst_size)
{
    const void *t = NULL;
    hk_status_t st = p->vt.get_table(name, &t);
    char what[96];

    snprintf(what, sizeof what, "get_table(\"%s\")", name);
    if (hkb_hk_ok(p, NULL, st, what) != 0)
        return -1;
    if (!t)
        return hkb_fail("%s returned OK and a NULL table", what);
    return copy_sized(dst, dst_size, t, name);
}

int hkb_plugin_open(hkb_plugin_t *p, const char *path)
{
    char real[PATH_MAX];

    memset(p, 0, sizeof *p);
    /* The resolved path is the one the table header prints; a missing file
     * keeps the given path, and dlopen reports why it is missing. */
    snprintf(p->path, sizeof p->path, "%s", realpath(path, real) ? real : path);

    /* RTLD_LOCAL as the contract asks of hosts: the plugin's symbols must not
     * resolve the bench's own CUDA or cuBLAS symbols, nor the reverse. */
    p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) {
        const char *e = dlerror();
        return hkb_fail("cannot load plugin %s: %s (build it with `scons mode=release "
                        "builddir=...`, or pass --plugin PATH)",
                        path, e ? e : "unknown dlopen error");
    }
    hk_negotiate_fn negotiate;
    void *sym = dlsym(p->dl, HK_ENTRY_SYMBOL);
    if (!sym)
        goto no_entry;
    /* dlsym returns data pointers; POSIX guarantees this conversion works. */
    memcpy(&negotiate, &sym, sizeof negotiate);

    hk_negotiate_request_t req = {
        {HK_STRUCT_NEGOTIATE_REQUEST, sizeof req, 1},
        HK_ABI_VERSION(HK_ABI_MAJOR, 0),
        HK_ABI_CURRENT,
        NULL,
        NULL,
    };
    hk_negotiate_answer_t ans;
    memset(&ans, 0, sizeof ans);
    ans.header.struct_type = HK_STRUCT_NEGOTIATE_ANSWER;
    ans.header.struct_size = sizeof ans;
    ans.header.struct_version = 1;
    hk_status_t st = negotiate(&req, &ans);
    if (st != HK_STATUS_OK) {
        hkb_fail("plugin %s refused negotiation: %s (%s); it offers ABI %u.%u, the bench "
                 "knows %u.0..%u.%u",
                 path, hk_status_name(st), hk_status_string(st),
                 HK_ABI_VERSION_MAJOR(ans.abi_version), HK_ABI_VERSION_MINOR(ans.abi_version),
                 HK_ABI_MAJOR, HK_ABI_MAJOR, HK_ABI_MINOR);
        goto fail;
    }
    if (HK_ABI_VERSION_MAJOR(ans.abi_version) != HK_ABI_MAJOR || ans.abi_version > HK_ABI_CURRENT) {
        hkb_fail("plugin %s answered ABI %u.%u outside the requested range", path,
                 HK_ABI_VERSION_MAJOR(ans.abi_version), HK_ABI_VERSION_MINOR(ans.abi_version));
        goto fail;
    }
    if (!ans.vtable || !ans.name || !ans.version) {
        hkb_fail("plugin %s answered without vtable, name or version", path);
        goto fail;
    }
    p->abi = ans.abi_version;
    p->name = ans.name;
    p->version = ans.version;
    HKB_TRY(copy_sized(&p->vt, sizeof p->vt, ans.vtable, "vtable"), fail);
    if (!p->vt.handle_create || !p->vt.handle_destroy || !p->vt.set_stream ||
        !p->vt.set_pointer_mode || !p->vt.get_table || !p->vt.last_error) {
        hkb_fail("plugin %s lacks a core slot the bench needs (handle_create, handle_destroy, "
                 "set_stream, set_pointer_mode, get_table, last_error)", path);
        goto fail;
    }
    HKB_TRY(get_table(p, HK_TABLE_BLAS1_V1, &p->blas, sizeof p->blas), fail);
    HKB_TRY(get_table(p, HK_TABLE_MEMORY_V1, &p->mem, sizeof p->mem), fail);
    if (!p->blas.saxpy || !p->blas.daxpy || !p->blas.sscal || !p->blas.dscal ||
        !p->blas.scopy || !p->blas.dcopy || !p->blas.sdot || !p->blas.ddot ||
        !p->blas.snrm2 || !p->blas.dnrm2) {
        hkb_fail("plugin %s: table %s lacks an op", path, HK_TABLE_BLAS1_V1);
        goto fail;
    }
    if (!p->mem.alloc || !p->mem.free_ || !p->mem.copy_to_device || !p->mem.copy_to_host) {
        hkb_fail("plugin %s: table %s lacks alloc, free_, copy_to_device or copy_to_host", path,
                 HK_TABLE_MEMORY_V1);
        goto fail;
    }
    return 0;

no_entry:
    hkb_fail("plugin %s does not export %s", path, HK_ENTRY_SYMBOL);
fail:
    dlclose(p->dl);
    p->dl = NULL;
    return -1;
}

void hkb_plugin_close(hkb_plugin_t *p)
{
    if (p->dl)
        dlclose(p->dl);
    p->dl = NULL;
}
