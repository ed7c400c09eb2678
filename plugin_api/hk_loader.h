/* handlekit host-side loader: discovery, checking, isolation, loading,
 * negotiation, validation.
 *
 * Built on GNU libltdl with local binding, so two versions of one plugin can be
 * loaded side by side. Every candidate file yields one load report (path, stage
 * reached, reason), and a bad candidate never stops the others.
 *
 * What a candidate must pass, in order, before any of its code runs in the
 * host:
 *   1. name: the file name ends in ".so" (libtool ".la" files and every other
 *      name are refused, so libltdl never resolves a file indirectly);
 *   2. privileges: in a process with elevated privileges (AT_SECURE) only
 *      files in the default directory are loaded;
 *   3. trust: the path is resolved (symbolic links followed), and every
 *      directory from the root down to the file, and the file itself, must be
 *      owned by root or the effective user and writable by neither group nor
 *      others (sticky directories such as /tmp included); the file must be a
 *      regular file. The file is opened once (O_NOFOLLOW) and every later step
 *      uses that descriptor: the dynamic loader maps exactly the file checked;
 *   4. ELF: read from the descriptor, never mapped: the host's class, byte
 *      order and machine, a shared object (ET_DYN), header tables and
 *      segments inside the file (a truncated file is refused here), and no
 *      initialization function besides the toolchain's one (DT_INIT at the
 *      .init section, at most one DT_INIT_ARRAY entry, no DT_PREINIT_ARRAY;
 *      this rule is off in loaders built with AddressSanitizer or
 *      ThreadSanitizer, whose runtimes add a constructor per source file);
 *   5. isolation (unless turned off): the file is opened and negotiated in a
 *      separate process with a time limit; a crash, exit, hang or malformed
 *      answer there refuses it;
 *   6. the host opens it (RTLD_NOW | RTLD_LOCAL: an unresolved symbol refuses
 *      the file and nothing is retried lazily), finds HK_ENTRY_SYMBOL,
 *      negotiates and validates the answer.
 * The dynamic loader is given the checked descriptor as "/proc/<pid>/fd/<n>"
 * (so /proc must be mounted), which is also the name the module carries in
 * the process's link map (debuggers read it while the process lives); a
 * plugin's "$ORIGIN" in DT_RUNPATH therefore names no useful directory. The
 * descriptor of a module that stays mapped stays open.
 *
 * Thread rule: a loader is [thread-safe] for lookups (find, plugin accessors,
 * acquire/release) once scanning has finished; scan and open serialise on the
 * loader and may run from any thread. fork() is safe at any time: a child may
 * create loaders and scan (or use the parent's loaders), even when another
 * thread of the parent was scanning at the fork. */
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
    HK_STAGE_SCAN = 0,      /* refused before reading it: name, privileges,
                               owner and permissions, not a regular file */
    HK_STAGE_OPEN = 1,      /* the ELF checks or the dynamic loader refused it */
    HK_STAGE_SYMBOL = 2,    /* no HK_ENTRY_SYMBOL */
    HK_STAGE_NEGOTIATE = 3, /* the entry point refused or failed */
    HK_STAGE_VALIDATE = 4,  /* the answer was malformed or out of range */
    HK_STAGE_LOADED = 5,
    HK_STAGE_PROBE = 6      /* loading or negotiating it in the probe process
                               crashed, exited, timed out or answered garbage,
                               or no probe process could run */
} hk_load_stage_t;

/* Status of a refused candidate, by stage:
 *   scan      NOT_FOUND (no such file or directory), INSECURE (the file or a
 *             directory on its path is writable by group or others or owned by
 *             another user; HK_PLUGIN_PATH ignored or a caller-named path
 *             refused under elevated privileges), LOAD_FAILED (not a "*.so"
 *             name, not a regular file or directory, unreadable, replaced
 *             while checked)
 *   open      LOAD_FAILED; the reason names what is wrong with the ELF file
 *             ("not an ELF file", "ELF class 32, host is 64", "truncated ELF:
 *             program headers end at X, file is Y bytes", an initialization
 *             function) or is the dynamic loader's own message, with the
 *             candidate's path in place of the descriptor name it was given
 *   probe     LOAD_FAILED; "loading killed by SIGSEGV" (a constructor or the
 *             dynamic loader), "negotiation exited with status 3",
 *             "negotiation did not answer within 2000 ms", "negotiation wrote
 *             a malformed answer: ...", or no usable probe program
 *   symbol    NOT_FOUND; the reason names HK_ENTRY_SYMBOL
 *   negotiate whatever the entry point returned; the reason names it, the
 *             plugin's ABI version and the host's range ("M.m-M.m")
 *   validate  INVALID_VALUE (answer header, vtable size, or an answer that
 *             differs from the probe's), ABI_MISMATCH (answered version out of
 *             range), NULL_POINTER (NULL name, version, vtable or required
 *             slot); the reason names the field
 * The open, symbol, negotiate and validate refusals found by the probe are
 * reported with the same stage, status and reason as if the host had met
 * them itself; the host then never maps the file.
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
    /* Fields below were added after the first release; a caller built
     * before them passes a smaller size and gets their defaults. */
    uint32_t probe_timeout_ms; /* time one candidate may take to load and
                                  negotiate in the probe process before it is
                                  killed and refused; 0 → HK_PROBE_TIMEOUT_MS */
    uint32_t isolation;        /* HK_ISOLATION_PROBE (0, the default) or
                                  HK_ISOLATION_OFF */
    const char *probe_path;    /* the probe program; NULL → "hk-probe" in the
                                  directory of the running executable, then
                                  the one this loader was built with. It must
                                  pass the same trust checks as a plugin
                                  (owner, no group or other write on it or any
                                  directory above it). Copied at create. */
} hk_loader_options_t;

/* Default of hk_loader_options_t.probe_timeout_ms. */
#define HK_PROBE_TIMEOUT_MS 2000u

/* hk_loader_options_t.isolation:
 * HK_ISOLATION_PROBE: every new candidate is first loaded and negotiated in a
 *   child process (the probe program, started with posix_spawn, never a bare
 *   fork of the host), one process per candidate, up to 8 at a time. Only a
 *   candidate that answered there is opened by the host. Its verdict is
 *   remembered for the loader's life per file identity (device, inode, size,
 *   modification time, mode), so a rescan does not probe it again.
 * HK_ISOLATION_OFF: no child process (for hosts that may not create one);
 *   a crash, exit or hang of a plugin's load or negotiation then happens in
 *   the host. Every other check still applies. */
#define HK_ISOLATION_PROBE 0u
#define HK_ISOLATION_OFF 1u

/* [thread-safe] Creates a loader. opts may be NULL (defaults). The caller owns
 * *out and frees it with hk_loader_destroy. No file is opened yet. Returns
 * INVALID_VALUE for an ABI range the host cannot read, a size smaller than
 * 4, or an isolation value other than the two above. */
hk_status_t hk_loader_create(const hk_loader_options_t *opts, hk_loader_t **out);

/* [not-concurrent] Closes every module whose plugin is not in use and frees the
 * loader. Returns HK_STATUS_BUSY (and frees nothing) while a plugin is acquired.
 * NULL is a no-op returning HK_STATUS_OK. */
hk_status_t hk_loader_destroy(hk_loader_t *loader);

/* [thread-safe] Scans every directory of the search path (HK_PLUGIN_PATH, then
 * default_dir) for "*.so" files and loads each one. Returns HK_STATUS_OK even
 * when candidates were refused: read the reports. A directory that cannot be
 * read, or that fails the trust rule (itself or a directory above it), is
 * reported once as a refused candidate and nothing in it is opened.
 * Files are taken in name order; hidden files and other names are skipped;
 * reports come in that order. The new candidates of one directory are probed
 * together (see HK_ISOLATION_PROBE), so a few hanging files cost the time
 * limit about once, not once each.
 * HK_PLUGIN_PATH is read with secure_getenv; in a process with elevated
 * privileges (AT_SECURE) it is ignored, and when it is set a report with
 * path "HK_PLUGIN_PATH", stage scan, status INSECURE says so. */
hk_status_t hk_loader_scan(hk_loader_t *loader);

/* [thread-safe] Loads one file, after the same checks as a scanned one (see
 * the top of this file: a "*.so" name, every directory above it trusted).
 * A bare file name means the file in the current directory, never a search
 * of the library path. *out (may be NULL) receives the plugin, owned by the
 * loader. On failure the report holds the stage and reason, and
 * hk_loader_last_error returns the same line. Opening a file that this loader
 * already loaded returns the same plugin; one it refused returns the same
 * status. In a process with elevated privileges (AT_SECURE) a path outside
 * the default directory is refused (stage scan, INSECURE). */
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

/* Name of a stage ("open", "symbol", "probe", ...); "unknown" for a value
 * outside the enum; never NULL. */
const char *hk_load_stage_name(hk_load_stage_t stage);

#ifdef __cplusplus
}
#endif

#endif /* HK_LOADER_H */
