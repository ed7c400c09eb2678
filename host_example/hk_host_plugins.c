/* hk-host: finding plugins, choosing one, and the list command. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_host.h"
#include "hk_status_text.h"

const char *hkh_error(const hkh_target_t *t, const hk_handle_t *handle, char *buf, size_t len)
{
    if (hk_plugin_last_error_copy(t->plugin, handle, buf, len, NULL) != HK_STATUS_OK)
        snprintf(buf, len, "(no message: the handle is not live)");
    return buf;
}

/* What of the environment a report's path names: "HK_PLUGIN_PIN" and the
 * like for a variable's own report, "dir" for a directory of HK_PLUGIN_PATH,
 * NULL for anything else. path[0..len) is compared. */
static const char *hkh_env_subject(const char *path, size_t len)
{
    static const char *const vars[] = {"HK_PLUGIN_PATH", "HK_PLUGIN_PIN", "HK_PLUGIN_EXCLUDE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (strlen(vars[i]) == len && strncmp(path, vars[i], len) == 0)
            return vars[i];
    const char *env = secure_getenv("HK_PLUGIN_PATH");
    for (const char *d = env; d && *d; d += strcspn(d, ":"), d += *d == ':') {
        size_t n = strcspn(d, ":");
        if (n && n == len && strncmp(d, path, len) == 0)
            return "dir";
    }
    return NULL;
}

/* The loader's line for a refusal that hkh_env_warnings says itself:
 * "PATH: scan: REASON" with PATH one of hkh_env_subject's. */
static int hkh_env_line(const char *msg)
{
    const char *scan = strstr(msg, ": scan: ");
    return scan && hkh_env_subject(msg, (size_t)(scan - msg)) != NULL;
}

/* hkh_env_check's and hkh_loader's: one warning per report about the
 * environment, once per process. */
static void hkh_env_warnings(const hk_loader_t *loader)
{
    static int done;
    if (done)
        return;
    done = 1;
    for (size_t i = 0; i < hk_loader_report_count(loader); i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        const char *what = hkh_env_subject(r->path, strlen(r->path));
        if (!what || r->stage != HK_STAGE_SCAN)
            continue;
        if (strcmp(what, "dir") == 0)
            hkh_warn("HK_PLUGIN_PATH directory %s refused, nothing in it is loaded: %s",
                     r->path, r->reason);
        else
            hkh_warn("%s: %s", r->path, r->reason);
    }
}

/* user: the log level to print up to (HK_LOG_ERROR .. HK_LOG_DEBUG). Lines
 * come from the loader and from plugins: shown escaped. A refusal that is
 * said as a warning after the scan is not said twice. */
static void hkh_log_line(void *user, hk_log_level_t level, const char *msg)
{
    if ((int)level <= *(const int *)user && !hkh_env_line(msg)) {
        hkh_progress_clear();
        fprintf(stderr, "hk-host: %s\n", hkh_esc(msg));
    }
}

/* The plugins built beside this program: <dir of exe>/../plugins. */
static int hkh_default_plugin_dir(char *buf, size_t len)
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

hk_loader_t *hkh_loader(int verbose, int quiet)
{
    static int max_level;
    static char dir[PATH_MAX];
    max_level = verbose ? HK_LOG_DEBUG : quiet ? HK_LOG_ERROR : HK_LOG_WARN;
    hk_loader_options_t lo = {.size = sizeof lo, .log = hkh_log_line, .log_user = &max_level};
    if (hkh_default_plugin_dir(dir, sizeof dir) == 0)
        lo.default_dir = dir;
    hk_loader_t *loader = NULL;
    hk_status_t st = hk_loader_create(&lo, &loader);
    if (st != HK_STATUS_OK) {
        hkh_fail("cannot create the plugin loader: %s", hk_status_string(st));
        return NULL;
    }
    st = hk_loader_scan(loader);
    if (st != HK_STATUS_OK) {
        hkh_fail("plugin scan failed: %s", hk_loader_last_error(loader));
        hk_loader_destroy(loader);
        return NULL;
    }
    hkh_env_warnings(loader);
    return loader;
}

void hkh_env_check(void)
{
    if (!secure_getenv("HK_PLUGIN_PATH") && !secure_getenv("HK_PLUGIN_PIN") &&
        !secure_getenv("HK_PLUGIN_EXCLUDE"))
        return;
    hk_loader_options_t lo = {.size = sizeof lo};
    hk_loader_t *loader = NULL;
    if (hk_loader_create(&lo, &loader) != HK_STATUS_OK)
        return;
    if (hk_loader_scan(loader) == HK_STATUS_OK)
        hkh_env_warnings(loader);
    hk_loader_destroy(loader);
}

/* What hk_loader_select_explain says about request, in a malloc'ed array
 * (*out, *n; the caller frees *out). Returns explain's status. */
static hk_status_t hkh_explain(hk_loader_t *loader, const char *request, hk_select_entry_t **out,
                               size_t *n)
{
    size_t cap = 4;
    hk_select_entry_t *e = NULL;
    *out = NULL;
    *n = 0;
    for (;;) {
        hk_select_entry_t *grown = realloc(e, cap * sizeof *e);
        if (!grown) {
            free(e);
            return HK_STATUS_OUT_OF_MEMORY;
        }
        e = grown;
        size_t count = 0;
        hk_status_t st = hk_loader_select_explain(loader, request, e, cap, &count);
        if (count <= cap) {
            *out = e;
            *n = count;
            return st;
        }
        cap = count; /* more plugins of that name than room: ask again */
    }
}

static int hkh_make_handle(hkh_target_t *t, const hkh_opts_t *opts)
{
    t->vt = hk_plugin_vtable(t->plugin);
    t->handle = NULL;
    t->handle_error[0] = '\0';
    if (!t->vt->handle_create) { /* the loader refuses such a plugin: defensive */
        snprintf(t->handle_error, sizeof t->handle_error,
                 "NOT_SUPPORTED: the plugin has no handle_create");
        return -1;
    }
    hk_create_info_t ci = {sizeof ci, opts->device, 0};
    hk_status_t st = t->vt->handle_create(&ci, &t->handle);
    if (st == HK_STATUS_OK)
        return 0;
    char msg[768];
    snprintf(t->handle_error, sizeof t->handle_error, "%s: %s", hk_status_name(st),
             hkh_error(t, NULL, msg, sizeof msg));
    t->handle = NULL;
    return -1;
}

/* A failure of the loader's select is a summary line, then one line per
 * refused candidate ("  PATH: STAGE: STATUS: REASON"). */

/* The summary's length: its first line, without the "; refused:" that
 * announces the lines after it. */
static int hkh_summary_len(const char *e)
{
    static const char tail[] = "; refused:";
    const size_t tn = sizeof tail - 1;
    const char *nl = strchr(e, '\n');
    size_t n = nl ? (size_t)(nl - e) : strlen(e);
    if (nl && n >= tn && memcmp(e + n - tn, tail, tn) == 0)
        n -= tn;
    return (int)n;
}

/* The failure as one line, for a reason in parentheses: "SUMMARY; refused:
 * A; B". */
static void hkh_one_line(const char *e, char *buf, size_t len)
{
    size_t k = 0;
    int first = 1;
    for (const char *p = e; *p && k + 3 < len; p++) {
        if (*p != '\n') {
            buf[k++] = *p;
            continue;
        }
        if (!first)
            buf[k++] = ';';
        buf[k++] = ' ';
        first = 0;
        p += strspn(p + 1, " "); /* the candidate lines' indentation */
    }
    buf[k] = '\0';
}

/* Whether text has a line equal to line[0..n) after its first. */
static int hkh_has_line(const char *text, const char *line, size_t n)
{
    for (const char *p = strchr(text, '\n'); p; p = strchr(p + 1, '\n'))
        if (strncmp(p + 1, line, n) == 0 && (p[1 + n] == '\n' || p[1 + n] == '\0'))
            return 1;
    return 0;
}

/* Each candidate line of e (after its summary) as an error line of its own;
 * lines that also are in skip (may be NULL) are left out. */
static void hkh_fail_candidates(const char *e, const char *skip)
{
    for (const char *nl = strchr(e, '\n'); nl;) {
        const char *line = nl + 1;
        nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (!skip || !hkh_has_line(skip, line, n))
            hkh_fail("%.*s", (int)n, line);
    }
}

/* Neither default plugin can be had: one line naming both failures, then
 * every refused candidate of either name once. cuda_err is hk-cuda's select
 * failure, or NULL when it loaded and cuda_why says why no handle could be
 * made on it; cpu_err is hk-cpu's select failure. */
static void hkh_fail_no_plugin(const char *cuda_err, const char *cuda_why, const char *cpu_err)
{
    int refused = strchr(cpu_err, '\n') || (cuda_err && strchr(cuda_err, '\n'));
    hkh_fail("no usable plugin: hk-cuda: %.*s; hk-cpu: %.*s%s",
             cuda_err ? hkh_summary_len(cuda_err) : (int)strlen(cuda_why),
             cuda_err ? cuda_err : cuda_why, hkh_summary_len(cpu_err), cpu_err,
             refused ? "; refused:" : "");
    if (cuda_err)
        hkh_fail_candidates(cuda_err, NULL);
    hkh_fail_candidates(cpu_err, cuda_err);
}

int hkh_is_path(const char *request)
{
    size_t n = strlen(request);
    return strchr(request, '/') || (n >= 3 && strcmp(request + n - 3, ".so") == 0);
}

int hkh_select(hk_loader_t *loader, const char *request, const char *prefix, hk_plugin_t **out)
{
    hk_status_t st = hk_loader_select(loader, request, out);
    if (st == HK_STATUS_OK)
        return 0;
    /* The loader names every candidate of that name it refused, a line each. */
    const char *e = hk_loader_last_error(loader);
    hkh_fail("%s%.*s", prefix, (int)strcspn(e, "\n"), e);
    hkh_fail_candidates(e, NULL);
    /* A malformed request (no name, a bad range) is the command line's fault. */
    return st == HK_STATUS_INVALID_VALUE && !hkh_is_path(request) ? HKH_EXIT_USAGE
                                                                  : HKH_EXIT_FAIL;
}

/* -d names a device, and a plugin that computes on the host has none (its
 * handles report device -1): one line saying so, the same for every
 * command, instead of the plugin's own refusal of a device it lacks.
 * Returns 0 or HKH_EXIT_USAGE. */
static int hkh_device_applies(const hkh_target_t *t, const hkh_opts_t *opts)
{
    if (opts->device == HK_DEVICE_CURRENT ||
        (hk_plugin_flags(t->plugin) & HK_PLUGIN_MEMORY_MASK) != HK_PLUGIN_MEMORY_HOST)
        return 0;
    const char *name = hk_plugin_name(t->plugin);
    hkh_fail("-d %d: %s %s computes on the host and has no devices (its handles report device "
             "-1); -d applies to plugins with CUDA devices (%s was chosen %s%s)",
             opts->device, name, hk_plugin_version(t->plugin), name,
             t->request ? "by -p " : "because ", t->request ? t->request : t->why);
    return HKH_EXIT_USAGE;
}

/* hkh_device_applies for the fallback to hk-cpu. When hk-cuda was loaded
 * and refused the device -d named (cuda_why: its handle's failure, NULL when
 * it did not load), the device is the cause, and is named first. */
static int hkh_device_applies_fallback(const hkh_target_t *t, const hkh_opts_t *opts,
                                       const char *cuda_why)
{
    static const char missing[] = "INVALID_DEVICE: ";
    if (opts->device == HK_DEVICE_CURRENT || !cuda_why ||
        strncmp(cuda_why, missing, sizeof missing - 1) != 0 ||
        (hk_plugin_flags(t->plugin) & HK_PLUGIN_MEMORY_MASK) != HK_PLUGIN_MEMORY_HOST)
        return hkh_device_applies(t, opts);
    hkh_fail("-d %d: no such device: hk-cuda: %s; %s %s, the fallback, computes on the host and "
             "has no devices", opts->device, cuda_why, hk_plugin_name(t->plugin),
             hk_plugin_version(t->plugin));
    return HKH_EXIT_USAGE;
}

/* The -p request: hkh_select, and why it chose what it chose. */
static int hkh_choose_requested(hk_loader_t *loader, const hkh_opts_t *opts, hkh_target_t *out)
{
    const char *req = opts->plugin;
    int rc = hkh_select(loader, req, "", &out->plugin);
    if (rc != 0)
        return rc;
    snprintf(out->why, sizeof out->why, "-p %s", req);
    hk_select_entry_t *e;
    size_t n;
    if (!hkh_is_path(req) && hkh_explain(loader, req, &e, &n) == HK_STATUS_OK) {
        for (size_t i = 0; i < n; i++) {
            const char *why = e[i].reason;
            if (e[i].verdict != HK_SELECT_CHOSEN)
                continue;
            if (strncmp(why, "chosen: ", 8) == 0)
                why += 8;
            snprintf(out->why, sizeof out->why, "-p %s: %s", req, why);
        }
        free(e);
    }
    if ((rc = hkh_device_applies(out, opts)) != 0)
        return rc;
    hkh_make_handle(out, opts);
    return 0;
}

int hkh_choose(hk_loader_t *loader, const hkh_opts_t *opts, hkh_target_t *out)
{
    memset(out, 0, sizeof *out);
    out->request = opts->plugin;
    if (opts->plugin)
        return hkh_choose_requested(loader, opts, out);
    /* Default: the GPU when one is usable, else the CPU, saying why. The
     * loader's failure texts are kept for the loader's lifetime. */
    char why_cuda[1024];
    const char *cuda_err = NULL;
    if (hk_loader_select(loader, "hk-cuda", &out->plugin) == HK_STATUS_OK) {
        if (hkh_make_handle(out, opts) == 0) {
            snprintf(out->why, sizeof out->why, "a CUDA device is usable");
            return 0;
        }
        snprintf(why_cuda, sizeof why_cuda, "%s", out->handle_error);
    } else {
        cuda_err = hk_loader_last_error(loader);
        hkh_one_line(cuda_err, why_cuda, sizeof why_cuda);
    }
    if (hk_loader_select(loader, "hk-cpu", &out->plugin) != HK_STATUS_OK) {
        hkh_fail_no_plugin(cuda_err, why_cuda, hk_loader_last_error(loader));
        return HKH_EXIT_FAIL;
    }
    snprintf(out->why, sizeof out->why, "hk-cuda is unusable: %s", why_cuda);
    if (hkh_device_applies_fallback(out, opts, cuda_err ? NULL : why_cuda) != 0)
        return HKH_EXIT_USAGE;
    hkh_make_handle(out, opts);
    return 0;
}

void hkh_release(hkh_target_t *t)
{
    if (t->handle && t->vt->handle_destroy) {
        hk_status_t st = t->vt->handle_destroy(t->handle);
        if (st != HK_STATUS_OK)
            hkh_fail("handle_destroy: %s", hk_status_name(st));
    }
    t->handle = NULL;
}

static const char *hkh_memory_of(const hk_plugin_t *p)
{
    uint32_t mem = hk_plugin_flags(p) & HK_PLUGIN_MEMORY_MASK;
    return mem == HK_PLUGIN_MEMORY_HOST ? "host" : mem == HK_PLUGIN_MEMORY_CUDA ? "cuda" : NULL;
}

/* The members that describe a plugin, into the open JSON object. */
static void hkh_json_plugin(hk__json_t *j, const hk_plugin_t *p)
{
    char abi[32];
    uint32_t v = hk_plugin_abi(p);
    snprintf(abi, sizeof abi, "%u.%u", HK_ABI_VERSION_MAJOR(v), HK_ABI_VERSION_MINOR(v));
    hk__json_str(j, "name", hk_plugin_name(p));
    hk__json_str(j, "version", hk_plugin_version(p));
    hk__json_str(j, "abi", abi);
    hk__json_str(j, "path", hk_plugin_path(p));
    hk__json_int(j, "flags", hk_plugin_flags(p));
    hk__json_bool(j, "unload_safe", (hk_plugin_flags(p) & HK_PLUGIN_UNLOAD_SAFE) != 0);
    hk__json_str(j, "memory", hkh_memory_of(p));
}

void hkh_print_choice(const hkh_target_t *t)
{
    hk__json_t *j = hkh_json();
    if (!j) {
        printf("plugin: %s %s (%s)\n", hkh_esc(hk_plugin_name(t->plugin)),
               hkh_esc(hk_plugin_version(t->plugin)), hkh_esc(t->why));
        return;
    }
    hk__json_open(j, "plugin", '{');
    hkh_json_plugin(j, t->plugin);
    hk__json_str(j, "request", t->request);
    hk__json_str(j, "why", t->why);
    hk__json_close(j);
}

/* ---- list ---- */

/* One line of the list: a plugin, whether its name selects it, and why. */
typedef struct hkh_list_row {
    hk_plugin_t *plugin;
    const char *verdict; /* hk_select_verdict_name, or NULL */
    char reason[HK_SELECT_REASON_MAX];
} hkh_list_row_t;

/* A name that a request can carry: not a path, no '@', no space or control
 * character (hk_loader.h, "Version selection"). */
static int hkh_requestable(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || strchr(name, '@') || strchr(name, '/') ||
        (n >= 3 && !strcmp(name + n - 3, ".so")))
        return 0;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c <= 0x20 || *c == 0x7f)
            return 0;
    return 1;
}

/* Rows for every plugin named like plugin `first`, in load order, at most
 * room of them. */
static size_t hkh_group_rows(hk_loader_t *loader, hk_plugin_t *first, hkh_list_row_t *rows,
                             size_t room)
{
    const char *name = hk_plugin_name(first);
    size_t k = 0, np = hk_loader_plugin_count(loader);
    hk_select_entry_t *e = NULL;
    size_t n = 0;
    hk_status_t st =
        hkh_requestable(name) ? hkh_explain(loader, name, &e, &n) : HK_STATUS_INVALID_VALUE;
    if (e && (st == HK_STATUS_OK || st == HK_STATUS_NOT_FOUND)) {
        for (size_t i = 0; i < n && k < room; i++) {
            rows[k].plugin = e[i].plugin;
            rows[k].verdict = hk_select_verdict_name(e[i].verdict);
            snprintf(rows[k++].reason, sizeof rows[0].reason, "%s", e[i].reason);
        }
        free(e);
        return k;
    }
    free(e);
    for (size_t i = 0; i < np && k < room; i++) {
        hk_plugin_t *p = hk_loader_plugin(loader, i);
        if (strcmp(hk_plugin_name(p), name) != 0)
            continue;
        rows[k].plugin = p;
        rows[k].verdict = NULL;
        if (st == HK_STATUS_INVALID_VALUE)
            snprintf(rows[k++].reason, sizeof rows[0].reason,
                     "its name cannot be requested (a space, control character, '@' or '/', "
                     "or a .so ending): -p takes its path");
        else
            snprintf(rows[k++].reason, sizeof rows[0].reason, "not explained: %s",
                     hk_status_string(st));
    }
    return k;
}

static void hkh_list_text(const hkh_list_row_t *rows, size_t n, hk_loader_t *loader)
{
    printf("%zu plugin(s) loaded; * marks the one its name selects (-p NAME):\n", n);
    for (size_t i = 0; i < n; i++) {
        hk_plugin_t *p = rows[i].plugin;
        uint32_t abi = hk_plugin_abi(p);
        int chosen = rows[i].verdict && strcmp(rows[i].verdict, "chosen") == 0;
        printf("  %c %-10s %-8s ABI %u.%u  %s\n", chosen ? '*' : ' ',
               hkh_esc(hk_plugin_name(p)), hkh_esc(hk_plugin_version(p)),
               HK_ABI_VERSION_MAJOR(abi), HK_ABI_VERSION_MINOR(abi),
               hkh_esc(hk_plugin_path(p)));
        if (!chosen)
            printf("      %s\n", hkh_esc(rows[i].reason));
    }
    size_t nr = hk_loader_report_count(loader), refused = 0;
    for (size_t i = 0; i < nr; i++)
        refused += hk_loader_report(loader, i)->stage != HK_STAGE_LOADED;
    if (!refused)
        return;
    printf("%zu candidate(s) refused:\n", refused);
    for (size_t i = 0; i < nr; i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        if (r->stage != HK_STAGE_LOADED)
            printf("  %s: %s: %s\n", hkh_esc(r->path), hk_load_stage_name(r->stage),
                   hkh_esc(r->reason));
    }
}

static void hkh_list_json(hk__json_t *j, const hkh_list_row_t *rows, size_t n, hk_loader_t *loader)
{
    hk__json_open(j, "plugins", '[');
    for (size_t i = 0; i < n; i++) {
        hk__json_open(j, NULL, '{');
        hkh_json_plugin(j, rows[i].plugin);
        hk__json_bool(j, "selected", rows[i].verdict && !strcmp(rows[i].verdict, "chosen"));
        hk__json_str(j, "verdict", rows[i].verdict);
        hk__json_str(j, "reason", rows[i].reason);
        hk__json_close(j);
    }
    hk__json_close(j);
    hk__json_open(j, "refused", '[');
    for (size_t i = 0; i < hk_loader_report_count(loader); i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        if (r->stage == HK_STAGE_LOADED)
            continue;
        hk__json_open(j, NULL, '{');
        hk__json_str(j, "path", r->path);
        hk__json_str(j, "stage", hk_load_stage_name(r->stage));
        hk__json_str(j, "status", hk_status_name(r->status));
        hk__json_str(j, "reason", r->reason);
        hk__json_close(j);
    }
    hk__json_close(j);
}

int hkh_cmd_list(const hkh_opts_t *opts)
{
    hkh_doc_begin(opts, "list");
    /* Refusals are this command's output: no warning lines besides. */
    hk_loader_t *loader = hkh_loader(opts->verbose, 1);
    if (!loader)
        return hkh_doc_end(HKH_EXIT_FAIL);
    size_t np = hk_loader_plugin_count(loader), n = 0;
    hkh_list_row_t *rows = calloc(np ? np : 1, sizeof *rows);
    if (!rows) {
        hkh_fail("list: out of memory");
        hk_loader_destroy(loader);
        return hkh_doc_end(HKH_EXIT_FAIL);
    }
    /* Grouped by name, in the order each name was first loaded. */
    for (size_t i = 0; i < np; i++) {
        hk_plugin_t *p = hk_loader_plugin(loader, i);
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(hk_plugin_name(hk_loader_plugin(loader, k)), hk_plugin_name(p)) == 0;
        if (!seen)
            n += hkh_group_rows(loader, p, rows + n, np - n);
    }
    /* The reports are read after the selection: a malformed HK_PLUGIN_PIN or
     * HK_PLUGIN_EXCLUDE entry is reported by it. */
    hk__json_t *j = hkh_json();
    if (j)
        hkh_list_json(j, rows, n, loader);
    else
        hkh_list_text(rows, n, loader);
    free(rows);
    hk_loader_destroy(loader);
    return hkh_doc_end(np ? HKH_EXIT_OK : HKH_EXIT_FAIL);
}
