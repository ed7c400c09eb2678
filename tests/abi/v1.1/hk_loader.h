/* handlekit host-side loader: discovery, loading, negotiation, validation.
 *
 * Built on GNU libltdl with local binding, so two versions of one plugin can be
 * loaded side by side. Every candidate file yields one load report (path, stage
 * reached, reason), and a bad candidate never stops the others.
 *
 * Thread rule: a loader is [thread-safe] for lookups (find, plugin accessors,
 * acquire/release) once scanning has finished; scan and open take the loader's
 * lock and may run from any thread. */
#ifndef HK_LOADER_H
#define HK_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "hk_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hk_loader hk_loader_t;
typedef struct hk_plugin hk_plugin_t;

/* How far a candidate got. A plugin that loaded reports HK_STAGE_LOADED. */
typedef enum hk_load_stage {
    HK_STAGE_SCAN = 0,      /* refused before opening: permissions, not a file */
    HK_STAGE_OPEN = 1,      /* the dynamic loader refused it */
    HK_STAGE_SYMBOL = 2,    /* no HK_ENTRY_SYMBOL */
    HK_STAGE_NEGOTIATE = 3, /* the entry point refused or failed */
    HK_STAGE_VALIDATE = 4,  /* the answer was malformed or out of range */
    HK_STAGE_LOADED = 5
} hk_load_stage_t;

/* Status of a refused candidate, by stage:
 *   scan      NOT_FOUND (no such file or directory), INSECURE (writable by
 *             others, or HK_PLUGIN_PATH ignored), LOAD_FAILED (not a regular
 *             file or directory, unreadable)
 *   open      LOAD_FAILED; the reason is the dynamic loader's own message
 *   symbol    NOT_FOUND; the reason names HK_ENTRY_SYMBOL
 *   negotiate whatever the entry point returned; the reason names it, the
 *             plugin's ABI version and the host's range ("M.m-M.m")
 *   validate  INVALID_VALUE (answer header, vtable size), ABI_MISMATCH
 *             (answered version out of range), NULL_POINTER (NULL name,
 *             version, vtable or required slot); the reason names the field
 * A candidate is one file (device and inode, and for a refused one also its
 * mode, size and time): it is reported once per loader, however often it is
 * scanned or opened; a file changed on disk after a refusal is a new one. */
typedef struct hk_load_report {
    const char *path;     /* the candidate's path; owned by the loader */
    hk_load_stage_t stage;
    hk_status_t status;   /* HK_STATUS_OK when stage == HK_STAGE_LOADED */
    const char *reason;   /* one line; "" when loaded; owned by the loader */
    hk_plugin_t *plugin;  /* the loaded plugin, or NULL */
} hk_load_report_t;

typedef struct hk_loader_options {
    uint32_t size;             /* sizeof(hk_loader_options_t) */
    const char *default_dir;   /* searched after HK_PLUGIN_PATH; may be NULL */
    int ignore_env;            /* nonzero: do not read HK_PLUGIN_PATH */
    hk_log_fn log;             /* passed to plugins at negotiation, and gets one
                                  HK_LOG_WARN line per refused candidate (the
                                  hk_loader_last_error text); may be NULL. It
                                  must not call scan or open of this loader. */
    void *log_user;
    uint32_t abi_min;          /* 0 → HK_ABI_VERSION(HK_ABI_MAJOR, 0) */
    uint32_t abi_max;          /* 0 → HK_ABI_CURRENT */
} hk_loader_options_t;

/* [thread-safe] Creates a loader. opts may be NULL (defaults). The caller owns
 * *out and frees it with hk_loader_destroy. No file is opened yet. */
hk_status_t hk_loader_create(const hk_loader_options_t *opts, hk_loader_t **out);

/* [not-concurrent] Closes every module whose plugin is not in use and frees the
 * loader. Returns HK_STATUS_BUSY (and frees nothing) while a plugin is acquired.
 * NULL is a no-op returning HK_STATUS_OK. */
hk_status_t hk_loader_destroy(hk_loader_t *loader);

/* [thread-safe] Scans every directory of the search path (HK_PLUGIN_PATH, then
 * default_dir) for "*.so" files and loads each one. Returns HK_STATUS_OK even
 * when candidates were refused: read the reports. A directory that cannot be
 * read or is writable by others is reported as a refused candidate.
 * Files are taken in name order; hidden files and other names are skipped.
 * HK_PLUGIN_PATH is read with secure_getenv; in a process with elevated
 * privileges (AT_SECURE) it is ignored, and when it is set a report with
 * path "HK_PLUGIN_PATH", stage scan, status INSECURE says so. */
hk_status_t hk_loader_scan(hk_loader_t *loader);

/* [thread-safe] Loads one file. *out (may be NULL) receives the plugin, owned by
 * the loader. On failure the report holds the stage and reason, and
 * hk_loader_last_error returns the same line. Opening a file that this loader
 * already loaded returns the same plugin; one it refused returns the same
 * status. Its directory must not be writable by others either. */
hk_status_t hk_loader_open(hk_loader_t *loader, const char *path, hk_plugin_t **out);

/* [thread-safe] Number of reports so far, and the index-th one (NULL past the
 * end). Reports live as long as the loader. */
size_t hk_loader_report_count(const hk_loader_t *loader);
const hk_load_report_t *hk_loader_report(const hk_loader_t *loader, size_t index);

/* [thread-safe] Loaded plugins in load order (NULL past the end). */
size_t hk_loader_plugin_count(const hk_loader_t *loader);
hk_plugin_t *hk_loader_plugin(const hk_loader_t *loader, size_t index);

/* [thread-safe] The first loaded plugin with this name, or NULL. */
hk_plugin_t *hk_loader_find(const hk_loader_t *loader, const char *name);

/* [thread-safe] The last failure of this loader on any thread as one line; ""
 * when none. Owned by the loader, valid until its next failure. For a
 * refused candidate: "<path>: <stage name>: <reason>". */
const char *hk_loader_last_error(const hk_loader_t *loader);

/* Plugin accessors: [thread-safe]; strings are owned by the loader. */
const char *hk_plugin_name(const hk_plugin_t *plugin);
const char *hk_plugin_version(const hk_plugin_t *plugin);
const char *hk_plugin_path(const hk_plugin_t *plugin);
uint32_t hk_plugin_abi(const hk_plugin_t *plugin);   /* negotiated HK_ABI_VERSION */
uint32_t hk_plugin_flags(const hk_plugin_t *plugin); /* HK_PLUGIN_* */

/* The host's copy of the plugin's vtable: min(plugin size, sizeof) bytes copied
 * into a zeroed hk_vtable_t, so slots past the plugin's minor read NULL. Slots
 * newer than the negotiated minor are cleared too, and the copy's size field
 * holds the number of bytes taken from the plugin. */
const hk_vtable_t *hk_plugin_vtable(const hk_plugin_t *plugin);

/* Looks a table up through the plugin's get_table; NULL when absent. */
const void *hk_plugin_table(const hk_plugin_t *plugin, const char *name);

/* [thread-safe] Reference counting for swap: a caller that uses a plugin's
 * vtable outside the loader's lifetime rules holds a reference. A release
 * without an acquire is ignored. hk_loader_destroy closes a plugin's module
 * only if it declared HK_PLUGIN_UNLOAD_SAFE; other modules stay mapped for
 * the rest of the process. */
void hk_plugin_acquire(hk_plugin_t *plugin);
void hk_plugin_release(hk_plugin_t *plugin);

/* Name of a stage ("open", "symbol", ...); never NULL. */
const char *hk_load_stage_name(hk_load_stage_t stage);

#ifdef __cplusplus
}
#endif

#endif /* HK_LOADER_H */
