/* hk-host: finding plugins, choosing one, and the list and info commands. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_host.h"
#include "hk_status_text.h"

const char *hk_host_esc(const char *s)
{
    static char ring[8][8192];
    static unsigned next;
    char *out = ring[next++ % 8];
    const size_t cap = sizeof ring[0];
    size_t k = 0;
    if (!s)
        s = "(null)";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char piece[8];
        if (c == '\\')
            snprintf(piece, sizeof piece, "\\\\");
        else if (c < 0x20 || c >= 0x7f)
            snprintf(piece, sizeof piece, "\\x%02x", c);
        else
            snprintf(piece, sizeof piece, "%c", c);
        size_t len = strlen(piece);
        if (k + len + 4 > cap) { /* room for "..." and the NUL */
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        memcpy(out + k, piece, len);
        k += len;
    }
    out[k] = '\0';
    return out;
}

const char *hk_host_error(const hk_host_target_t *t, const hk_handle_t *handle)
{
    char msg[1024];
    if (hk_plugin_last_error_copy(t->plugin, handle, msg, sizeof msg, NULL) != HK_STATUS_OK)
        snprintf(msg, sizeof msg, "(no message: the handle is not live)");
    return hk_host_esc(msg);
}

/* user: the log level to print up to (HK_LOG_ERROR .. HK_LOG_DEBUG). Lines
 * come from the loader and from plugins: shown escaped. */
static void log_line(void *user, hk_log_level_t level, const char *msg)
{
    if ((int)level <= *(const int *)user)
        fprintf(stderr, "hk-host: %s\n", hk_host_esc(msg));
}

/* The plugins built beside this program: <dir of exe>/../plugins. */
static int default_plugin_dir(char *buf, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/../plugins", dirname(exe));
    char canon[PATH_MAX];
    const char *use = realpath(dir, canon) ? canon : dir; /* shorter paths in reports */
    int w = snprintf(buf, len, "%s", use);
    return (w < 0 || (size_t)w >= len) ? -1 : 0;
}

hk_loader_t *hk_host_loader(int verbose, int quiet)
{
    static int max_level;
    static char dir[PATH_MAX];
    max_level = verbose ? HK_LOG_DEBUG : quiet ? HK_LOG_ERROR : HK_LOG_WARN;
    hk_loader_options_t lo = {.size = sizeof lo, .log = log_line, .log_user = &max_level};
    if (default_plugin_dir(dir, sizeof dir) == 0)
        lo.default_dir = dir;
    hk_loader_t *loader = NULL;
    hk_status_t st = hk_loader_create(&lo, &loader);
    if (st != HK_STATUS_OK) {
        fprintf(stderr, "hk-host: cannot create the plugin loader: %s\n", hk_status_string(st));
        return NULL;
    }
    st = hk_loader_scan(loader);
    if (st != HK_STATUS_OK) {
        fprintf(stderr, "hk-host: plugin scan failed: %s\n",
                hk_host_esc(hk_loader_last_error(loader)));
        hk_loader_destroy(loader);
        return NULL;
    }
    return loader;
}

static const char *refusal_of(hk_loader_t *loader, const char *name)
{
    char want[64];
    snprintf(want, sizeof want, "/%s.so", name);
    for (size_t i = 0; i < hk_loader_report_count(loader); i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        size_t lp = strlen(r->path), lw = strlen(want);
        if (r->stage != HK_STAGE_LOADED && lp >= lw && strcmp(r->path + lp - lw, want) == 0)
            return r->reason;
    }
    return NULL;
}

static int make_handle(hk_host_target_t *t, const hk_host_opts_t *opts, char *why, size_t len)
{
    t->vt = hk_plugin_vtable(t->plugin);
    t->handle = NULL;
    if (!t->vt->handle_create || !t->vt->handle_destroy) { /* the loader refuses these */
        snprintf(why, len, "NOT_SUPPORTED: the plugin has no handle_create or handle_destroy");
        return -1;
    }
    hk_create_info_t ci = {sizeof ci, opts->device, 0};
    hk_status_t st = t->vt->handle_create(&ci, &t->handle);
    if (st == HK_STATUS_OK)
        return 0;
    snprintf(why, len, "%s: %s", hk_status_name(st), hk_host_error(t, NULL));
    t->handle = NULL;
    return -1;
}

int hk_host_pick(hk_loader_t *loader, const hk_host_opts_t *opts, hk_host_target_t *out)
{
    char why[512];
    memset(out, 0, sizeof *out);
    if (opts->plugin) {
        if (strchr(opts->plugin, '/')) {
            if (hk_loader_open(loader, opts->plugin, &out->plugin) != HK_STATUS_OK) {
                fprintf(stderr, "hk-host: %s\n", hk_host_esc(hk_loader_last_error(loader)));
                return 1;
            }
        } else if (!(out->plugin = hk_loader_find(loader, opts->plugin))) {
            const char *r = refusal_of(loader, opts->plugin);
            fprintf(stderr, "hk-host: plugin \"%s\" %s%s (see hk-host list)\n",
                    hk_host_esc(opts->plugin), r ? "was refused: " : "was not found",
                    r ? hk_host_esc(r) : "");
            return 1;
        }
        if (make_handle(out, opts, why, sizeof why) != 0) {
            fprintf(stderr, "hk-host: %s: cannot create a handle: %s\n",
                    hk_host_esc(hk_plugin_name(out->plugin)), why);
            return 1;
        }
        printf("plugin: %s %s (chosen with --plugin)\n", hk_host_esc(hk_plugin_name(out->plugin)),
               hk_host_esc(hk_plugin_version(out->plugin)));
        return 0;
    }
    /* Default: the GPU when one is usable, else the CPU, saying why. */
    out->plugin = hk_loader_find(loader, "hk-cuda");
    if (out->plugin && make_handle(out, opts, why, sizeof why) == 0) {
        printf("plugin: hk-cuda %s (a CUDA device is usable)\n",
               hk_host_esc(hk_plugin_version(out->plugin)));
        return 0;
    }
    if (!out->plugin) {
        const char *r = refusal_of(loader, "hk-cuda");
        snprintf(why, sizeof why, "%s%s", r ? "refused: " : "not found in the plugin path",
                 r ? hk_host_esc(r) : "");
    }
    out->plugin = hk_loader_find(loader, "hk-cpu");
    if (!out->plugin) {
        const char *r = refusal_of(loader, "hk-cpu");
        fprintf(stderr, "hk-host: hk-cuda is unusable (%s) and hk-cpu %s%s\n", why,
                r ? "was refused: " : "was not found", r ? hk_host_esc(r) : "");
        return 1;
    }
    printf("plugin: hk-cpu %s (hk-cuda is unusable: %s)\n",
           hk_host_esc(hk_plugin_version(out->plugin)), why);
    if (make_handle(out, opts, why, sizeof why) != 0) {
        fprintf(stderr, "hk-host: hk-cpu: cannot create a handle: %s\n", why);
        return 1;
    }
    return 0;
}

void hk_host_release(hk_host_target_t *t)
{
    if (t->handle && t->vt->handle_destroy) {
        hk_status_t st = t->vt->handle_destroy(t->handle);
        if (st != HK_STATUS_OK)
            fprintf(stderr, "hk-host: handle_destroy: %s\n", hk_status_name(st));
    }
    t->handle = NULL;
}

int hk_host_cmd_list(const hk_host_opts_t *opts)
{
    /* Refusals are this command's output: no warning lines besides. */
    hk_loader_t *loader = hk_host_loader(opts->verbose, 1);
    if (!loader)
        return 1;
    size_t np = hk_loader_plugin_count(loader), nr = hk_loader_report_count(loader);
    printf("%zu plugin(s) loaded:\n", np);
    for (size_t i = 0; i < np; i++) {
        hk_plugin_t *p = hk_loader_plugin(loader, i);
        uint32_t abi = hk_plugin_abi(p);
        printf("  %-10s %-8s ABI %u.%u  %s\n", hk_host_esc(hk_plugin_name(p)),
               hk_host_esc(hk_plugin_version(p)), HK_ABI_VERSION_MAJOR(abi),
               HK_ABI_VERSION_MINOR(abi), hk_host_esc(hk_plugin_path(p)));
    }
    size_t refused = 0;
    for (size_t i = 0; i < nr; i++)
        refused += hk_loader_report(loader, i)->stage != HK_STAGE_LOADED;
    if (refused) {
        printf("%zu candidate(s) refused:\n", refused);
        for (size_t i = 0; i < nr; i++) {
            const hk_load_report_t *r = hk_loader_report(loader, i);
            if (r->stage != HK_STAGE_LOADED)
                printf("  %s: %s: %s\n", hk_host_esc(r->path), hk_load_stage_name(r->stage),
                       hk_host_esc(r->reason));
        }
    }
    hk_loader_destroy(loader);
    return np ? 0 : 1;
}

int hk_host_cmd_info(const hk_host_opts_t *opts)
{
    hk_loader_t *loader = hk_host_loader(opts->verbose, 0);
    if (!loader)
        return 1;
    hk_host_target_t t;
    int rc = hk_host_pick(loader, opts, &t);
    if (rc == 0) {
        uint32_t abi = hk_plugin_abi(t.plugin);
        printf("path: %s\nABI: %u.%u%s\ntables:", hk_host_esc(hk_plugin_path(t.plugin)),
               HK_ABI_VERSION_MAJOR(abi), HK_ABI_VERSION_MINOR(abi),
               (hk_plugin_flags(t.plugin) & HK_PLUGIN_UNLOAD_SAFE) ? " (unload-safe)" : "");
        const char *name;
        for (size_t i = 0; t.vt->enum_tables && t.vt->enum_tables(i, &name) == HK_STATUS_OK; i++)
            printf(" %s", hk_host_esc(name));
        printf("%s\n", t.vt->enum_tables ? "" : " (not supported: no enum_tables)");
        uint32_t mem = hk_plugin_flags(t.plugin) & HK_PLUGIN_MEMORY_MASK;
        printf("memory: %s\n", mem == HK_PLUGIN_MEMORY_HOST   ? "host"
                               : mem == HK_PLUGIN_MEMORY_CUDA ? "CUDA device"
                                                              : "not stated (ABI before 1.2)");
        hk_handle_info_t hi = {.size = sizeof hi};
        if (t.vt->handle_info && t.vt->handle_info(t.handle, &hi) == HK_STATUS_OK)
            printf("handle: device %d, context id %llu, owns primary: %s\n", hi.device,
                   (unsigned long long)hi.context_id, hi.owns_primary ? "yes" : "no");
        hk_host_release(&t);
    }
    hk_loader_destroy(loader);
    return rc;
}
