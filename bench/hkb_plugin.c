/* hk-bench: opening hk-cuda the way a host does, through the host loader
 * library: one named file (hk_loader_open, local binding), the loader's
 * validated copy of the vtable, and the host's own copies of the tables
 * (hk_plugin_get_table), every slot the bench calls checked for NULL. A
 * refusal is reported with the loader's reason verbatim. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_loader.h"
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

static int get_table(hkb_plugin_t *p, hk_plugin_t *plugin, const char *name, void *dst,
                     size_t dst_size)
{
    hk_status_t st = hk_plugin_get_table(plugin, name, dst, dst_size);
    if (st == HK_STATUS_OK)
        return 0;
    return hkb_fail("plugin %s: table %s: %s: %s", p->path, name, hk_status_name(st),
                    st == HK_STATUS_NOT_FOUND ? "the plugin has none"
                                              : hk_loader_last_error(p->dl));
}

int hkb_plugin_open(hkb_plugin_t *p, const char *path)
{
    char real[PATH_MAX];
    hk_loader_t *loader = NULL;
    hk_plugin_t *plugin = NULL;

    memset(p, 0, sizeof *p);
    /* The resolved path is the one the table header prints; a missing file
     * keeps the given path, and the loader reports why it is missing. */
    snprintf(p->path, sizeof p->path, "%s", realpath(path, real) ? real : path);

    /* The loader opens with local binding, as the contract asks of hosts: the
     * plugin's symbols must not resolve the bench's own CUDA or cuBLAS
     * symbols, nor the reverse. It negotiates ABI 1.0..current. */
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1};
    hk_status_t st = hk_loader_create(&o, &loader);
    if (st != HK_STATUS_OK)
        return hkb_fail("cannot create the plugin loader: %s", hk_status_string(st));
    p->dl = loader; /* the loader holds the module; hkb_plugin_close destroys it */
    st = hk_loader_open(loader, path, &plugin);
    if (st != HK_STATUS_OK) {
        hkb_fail("cannot load plugin %s (build it with `scons mode=release builddir=...`, or "
                 "pass --plugin PATH)", hk_loader_last_error(loader));
        goto fail;
    }
    p->abi = hk_plugin_abi(plugin);
    p->name = hk_plugin_name(plugin);
    p->version = hk_plugin_version(plugin);
    p->vt = *hk_plugin_vtable(plugin); /* clamped to the negotiated minor */
    if (!p->vt.handle_create || !p->vt.handle_destroy || !p->vt.set_stream ||
        !p->vt.set_pointer_mode || !p->vt.get_table || !p->vt.last_error) {
        hkb_fail("plugin %s lacks a core slot the bench needs (handle_create, handle_destroy, "
                 "set_stream, set_pointer_mode, get_table, last_error)", path);
        goto fail;
    }
    HKB_TRY(get_table(p, plugin, HK_TABLE_BLAS1_V1, &p->blas, sizeof p->blas), fail);
    HKB_TRY(get_table(p, plugin, HK_TABLE_MEMORY_V1, &p->mem, sizeof p->mem), fail);
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

fail:
    hk_loader_destroy(loader);
    p->dl = NULL;
    return -1;
}

void hkb_plugin_close(hkb_plugin_t *p)
{
    if (p->dl)
        hk_loader_destroy(p->dl);
    p->dl = NULL;
}
