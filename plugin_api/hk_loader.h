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
 *   3. trust (docs/security.md): the path is walked from the root one
 *      component at a time; every directory down to the file, every
 *      symbolic link followed and the file itself must be owned by root or
 *      the effective user, and no directory or file writable by group or
 *      others; the file must be a regular file, and nothing else is ever
 *      opened for reading (a FIFO or a device node named like a plugin is
 *      looked at, not opened). One exception: a sticky directory such as
 *      /tmp, owned by root or the effective user, passes when every
 *      directory below it and the file pass the rule (no second writable
 *      directory), but no file lying directly in it is taken; not in a
 *      process with elevated privileges (AT_SECURE). The file is opened once
 *      and every later step uses that descriptor: the dynamic loader maps
 *      exactly the file checked;
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
 * thread of the parent was scanning at the fork.
 *
 * Debug trace: with HK_TRACE=1 (or 2, 3) in the environment the loader writes
 * one line per decision (every candidate and its verdict with stage and
 * reason, negotiations, loads, which plugin a request or name resolves to and
 * why the others were not chosen, swap phases, a refused destroy) to stderr
 * or to HK_TRACE_FILE. Both are read once, with secure_getenv (so ignored
 * under AT_SECURE), at the first decision. Off (unset, empty, 0) nothing is
 * written and no file is created. docs/trace.md has the levels and every
 * line. */
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
 *             candidate's path in place of the descriptor name it was given; or
 *             the loader's copy of the file failed ("the file changed while it
 *             was read", LOAD_FAILED; no room for it, OUT_OF_MEMORY)
 *   probe     LOAD_FAILED; "loading killed by SIGSEGV" (a constructor or the
 *             dynamic loader), "negotiation exited with status 3",
 *             "negotiation did not answer within 2000 ms", "negotiation wrote
 *             a malformed answer: ...", "the probe process was killed by
 *             SIGKILL while it probed this candidate alone", "negotiation
 *             broke the log callback's rules: ..." or "negotiation left 1
 *             thread running after it returned" (docs/abi.md, "Negotiation":
 *             the probe negotiates with a log callback of its own when the
 *             host gives one), or no usable probe program; what the
 *             candidate wrote to stderr there follows
 *             ("; stderr: N bytes, the first 1024: \"...\"", escaped)
 *   symbol    NOT_FOUND; the reason names HK_ENTRY_SYMBOL
 *   negotiate whatever the entry point returned; the reason names it, the
 *             plugin's ABI version and the host's range ("M.m-M.m")
 *   validate  INVALID_VALUE (answer header, vtable size, more than one
 *             HK_PLUGIN_MEMORY_* flag in an ABI 1.2 answer, or an answer that
 *             differs from the probe's), ABI_MISMATCH (answered version out of
 *             range), NULL_POINTER (NULL name, version, vtable or required
 *             slot: handle_create, handle_destroy, last_error, get_table); the
 *             reason names the field
 * The open, symbol, negotiate and validate refusals found by the probe are
 * reported with the same stage, status and reason as if the host had met
 * them itself; the host then never maps the file.
 * A candidate is one file (device and inode, and for a refused one, or one
 * loaded from a snapshot, also its mode, size, modification and change
 * times): it is reported once per loader, however often it is scanned or
 * opened; a file changed on disk after a refusal, or rewritten with another
 * build after it was loaded, is a new one. */
typedef struct hk_load_report {
    const char *path;     /* the candidate's path; owned by the loader */
    hk_load_stage_t stage;
    hk_status_t status;   /* HK_STATUS_OK when stage == HK_STAGE_LOADED */
    const char *reason;   /* one line; "" when loaded; owned by the loader */
    hk_plugin_t *plugin;  /* the loaded plugin, or NULL */
} hk_load_report_t;

typedef struct hk_loader_options {
    uint32_t size;             /* sizeof(hk_loader_options_t) */
    const char *default_dir;   /* searched after HK_PLUGIN_PATH. NULL: the
                                  installed library, shared or static, searches
                                  its install's <libdir>/handlekit/plugins; the
                                  library of a build tree searches none */
    int ignore_env;            /* nonzero: do not read HK_PLUGIN_PATH */
    hk_log_fn log;             /* passed to plugins at negotiation, and gets one
                                  HK_LOG_WARN line per refused candidate (the
                                  hk_loader_last_error text); may be NULL. It
                                  must not call scan or open of this loader. */
    void *log_user;
    uint32_t abi_min;          /* 0 → HK_ABI_VERSION(HK_ABI_MAJOR, 0) */
    uint32_t abi_max;          /* 0 → the loader library's HK_ABI_CURRENT,
                                  which may be newer than the headers the
                                  host was built with (docs/abi.md,
                                  "Versions"); HK_ABI_CURRENT holds plugins
                                  to the host's own minor */
    /* Fields below were added after the first release; a caller built
     * before them passes a smaller size and gets their defaults. */
    uint32_t probe_timeout_ms; /* time one candidate may take to load and
                                  negotiate in the probe process before it is
                                  killed and refused; 0 → HK_PROBE_TIMEOUT_MS */
    uint32_t isolation;        /* HK_ISOLATION_PROBE (0, the default) or
                                  HK_ISOLATION_OFF */
    const char *probe_path;    /* the probe program. NULL: the installed
                                  library takes its install's
                                  <libexecdir>/handlekit/hk-probe; the library
                                  of a build tree "hk-probe" in the directory
                                  of the running executable, then the one
                                  built with it. It must pass the same trust
                                  checks as a plugin. Copied at create. */
    uint32_t load_in_place;    /* 0 (the default): each plugin is loaded
                                  from the loader's own sealed copy of the
                                  bytes it checked (docs/deploy.md, "What
                                  the loader loads"), so a file rewritten
                                  under a running host changes nothing in
                                  it. Nonzero, for debugging tools that
                                  need the file's own name in the process's
                                  maps: the file itself is mapped, and a
                                  file rewritten in place (cp, install)
                                  while it is loaded crashes the host
                                  (SIGBUS) or runs the other build's bytes. */
    /* Added after the fields above. */
    uint32_t deadline_ms;      /* how long one
                                  call into a plugin that a swap step or
                                  hk_loader_destroy makes (handle_create,
                                  handle_destroy, hk.trim/1) may take before
                                  it is given up and its module is left open
                                  for good (hk_swap.h, "Deadlines");
                                  0 → HK_STEP_DEADLINE_MS; HK_DEADLINE_NONE:
                                  none (each call runs on the calling
                                  thread, for as long as it takes) */
    /* Added after the fields above. */
    uint32_t verifier;         /* with isolation: where a swap verifies a
                                  build it has not verified before.
                                  HK_VERIFIER_KEEP (0, the default): one
                                  probe process kept by the loader for
                                  every verification, with the device's
                                  primary context, until the loader is
                                  destroyed (it starts again after a
                                  refusal); HK_VERIFIER_PER_SWAP: a new
                                  probe process, with its own context, for
                                  each (docs/swap.md, "The verifier") */
} hk_loader_options_t;

/* hk_loader_options_t.verifier. */
#define HK_VERIFIER_KEEP 0u
#define HK_VERIFIER_PER_SWAP 1u

/* Default of hk_loader_options_t.deadline_ms: far above any step measured
 * (a CUDA plugin's first handle, which loads its kernels: a quarter of a
 * second on an H200; eight seconds kept waiting by other threads' launches
 * without the swap's holds), so that only a call that hangs reaches it. */
#define HK_STEP_DEADLINE_MS 30000u
/* hk_loader_options_t.deadline_ms: no deadline. */
#define HK_DEADLINE_NONE 0xffffffffu

/* Default of hk_loader_options_t.probe_timeout_ms. */
#define HK_PROBE_TIMEOUT_MS 2000u

/* hk_loader_options_t.isolation:
 * HK_ISOLATION_PROBE: every new candidate is first loaded and negotiated in a
 *   child process (the probe program, started with posix_spawn in a session
 *   of its own, never a bare fork of the host), one process per candidate,
 *   each in a process group of its own, up to 8 at a time; a plugin about to
 *   be swapped in is verified there too (hk_swap.h). Only a candidate that
 *   answered there is opened by the host. Its verdict is
 *   remembered for the loader's life per file identity (device, inode, size,
 *   modification and change times, mode), so a rescan does not probe it again.
 * HK_ISOLATION_OFF: no child process (for hosts that may not create one);
 *   a crash, exit or hang of a plugin's load or negotiation then happens in
 *   the host. Every other check still applies. */
#define HK_ISOLATION_PROBE 0u
#define HK_ISOLATION_OFF 1u

/* [thread-safe] The loader library's version, "MAJOR.MINOR.PATCH" (static
 * storage, never NULL), where MAJOR.MINOR is the plugin ABI it implements
 * (HK_ABI_MAJOR, HK_ABI_MINOR of the headers it was built with; the shared
 * library's soname is libhkloader.so.MAJOR). *abi_min and *abi_max (each may
 * be NULL) receive the range of plugin ABI versions its loaders accept when
 * the options name none, as HK_ABI_VERSION values: MAJOR.0 to MAJOR.MINOR.
 * For a caller that must know what it runs against (a host built against
 * other headers, a foreign function interface). */
const char *hk_loader_version(uint32_t *abi_min, uint32_t *abi_max);

/* [thread-safe] Creates a loader. opts may be NULL (defaults). The caller owns
 * *out and frees it with hk_loader_destroy. No file is opened yet. Returns
 * INVALID_VALUE for an ABI range the host cannot read, a size smaller than
 * 4, or an isolation value other than the two above. */
hk_status_t hk_loader_create(const hk_loader_options_t *opts, hk_loader_t **out);

/* [not-concurrent] Closes every module whose plugin is not in use and frees the
 * loader. Returns HK_STATUS_BUSY (and frees nothing) while a plugin is acquired
 * or a movable handle (hk_swap.h) lives. NULL is a no-op returning HK_STATUS_OK.
 * The hk.trim/1 each unload-safe plugin gets before its close is waited for
 * up to the loader's deadline (hk_loader_options_t.deadline_ms): one still
 * running then leaves that module open for the rest of the process (its code
 * may still run on the stuck thread), and the log callback gets an
 * HK_LOG_WARN line "hk_loader_destroy: NAME VERSION hk.trim/1 (...) did not
 * return within N ms ..."; the loader is destroyed all the same (OK). So is
 * a module with a call an earlier swap gave up at its deadline. */
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
 * path "HK_PLUGIN_PATH", stage scan, status INSECURE says so.
 * HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE are read too (see "Version
 * selection"): a malformed entry is reported by the scan, not only by the
 * first select, so that once scan returns the reports hold every complaint
 * about the environment: a refused directory of the search path (its
 * directory as path, stage scan) and the variables' own reports (the
 * variable's name as path, stage scan). A host can tell its user what the
 * environment changed from them; the loader itself never prints. */
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
 * refused candidate: "<path>: <stage name>: <reason>". A NOT_FOUND of
 * hk_loader_select adds a line for each candidate it refused (see there). */
const char *hk_loader_last_error(const hk_loader_t *loader);

/* Plugin accessors: [thread-safe]; strings are owned by the loader and are
 * the plugin's own bytes: a host that prints them escapes control characters.
 * NULL plugin → NULL (strings) or 0. */
const char *hk_plugin_name(const hk_plugin_t *plugin);
const char *hk_plugin_version(const hk_plugin_t *plugin);
const char *hk_plugin_path(const hk_plugin_t *plugin);
uint32_t hk_plugin_abi(const hk_plugin_t *plugin);   /* negotiated HK_ABI_VERSION */
/* HK_PLUGIN_* of the answer. The memory-domain flags are validated for an
 * ABI 1.2 answer (at most one) and cleared for older answers. */
uint32_t hk_plugin_flags(const hk_plugin_t *plugin);

/* [thread-safe] The host's copy of the plugin's vtable: min(plugin size,
 * sizeof) bytes copied into a zeroed hk_vtable_t, so slots past the plugin's
 * minor read NULL. Slots newer than the negotiated minor are cleared too, and
 * the copy's size field holds the number of bytes taken from the plugin.
 * Owned by the loader, valid while the plugin is. NULL plugin → NULL. */
const hk_vtable_t *hk_plugin_vtable(const hk_plugin_t *plugin);

/* The largest table size field the loader accepts; a bigger one is taken for
 * a corrupt table. */
#define HK_TABLE_SIZE_MAX ((size_t)64 * 1024)

/* [thread-safe] Copies the plugin's table `name` into the caller's struct
 * `table` of `size` bytes (e.g. an hk_blas1_v1_t and its sizeof). The struct
 * is zeroed first; then min(the table's size field, size) bytes are copied,
 * and for a table the loader knows (hk.blas1/1, hk.memory/1) no byte past
 * what the negotiated ABI minor defines for it, so a slot the host or the
 * plugin does not have, or that is newer than the negotiated minor, reads
 * NULL. The struct's first size_t field then holds the number of bytes taken.
 * The caller owns *table; the function pointers in it stay valid while the
 * plugin's module is mapped. Returns:
 *   HK_STATUS_OK
 *   HK_STATUS_NULL_POINTER   plugin, name or table NULL (nothing written)
 *   HK_STATUS_INVALID_VALUE  size < sizeof(size_t) (nothing written); or the
 *                            plugin answered OK with a NULL table, or a table
 *                            whose size field is below sizeof(size_t) or above
 *                            HK_TABLE_SIZE_MAX (the struct stays zeroed)
 *   HK_STATUS_NOT_FOUND      the plugin has no table of that name
 *   HK_STATUS_NOT_SUPPORTED  the plugin's vtable has no get_table
 *   another status           what the plugin's get_table returned
 * On every failure after the zeroing the struct is all zero, and except for
 * NOT_FOUND (an answer, not a failure) hk_loader_last_error names the reason. */
hk_status_t hk_plugin_get_table(const hk_plugin_t *plugin, const char *name, void *table,
                                size_t size);

/* [thread-safe] Deprecated: use hk_plugin_get_table, which gives the host its
 * own copy of exactly the size it knows. Returns a loader-owned copy of the
 * table (never the plugin's own storage), made at the first call and kept
 * while the plugin is: for a table the loader knows, a zeroed struct of the
 * size the loader's headers give it, with at most the bytes the negotiated
 * minor defines copied in (so every slot of that struct may be read and a
 * missing one reads NULL); for another name, the plugin's size-field bytes.
 * NULL when absent, malformed (as hk_plugin_get_table says), or out of memory. */
const void *hk_plugin_table(const hk_plugin_t *plugin, const char *name);

/* [thread-safe as the plugin's slots are] The plugin's last error for handle
 * (NULL: this thread's last failed handle_create) copied into buf, with the
 * rules of the vtable's last_error_copy. A plugin whose vtable has no
 * last_error_copy (ABI 1.0 and 1.1) gets the text of its last_error slot
 * copied instead (that fallback is only as thread-safe as last_error is), and
 * one without either gets "". Returns HK_STATUS_OK, HK_STATUS_NULL_POINTER
 * (plugin NULL, or buf NULL with len > 0), or what last_error_copy returned. */
hk_status_t hk_plugin_last_error_copy(const hk_plugin_t *plugin, const hk_handle_t *handle,
                                      char *buf, size_t len, size_t *needed);

/* [thread-safe] Reference counting for swap: a caller that uses a plugin's
 * vtable outside the loader's lifetime rules holds a reference. The loader
 * cannot see handles made through hk_plugin_vtable() nor tables taken from
 * it: a host keeps a reference while it holds any, so that hk_loader_destroy
 * stays BUSY and a swap (hk_swap.h) never closes the module under them. A
 * release without an acquire is ignored. hk_loader_destroy closes a plugin's
 * module only if it declared HK_PLUGIN_UNLOAD_SAFE; other modules stay mapped
 * for the rest of the process. */
void hk_plugin_acquire(hk_plugin_t *plugin);
void hk_plugin_release(hk_plugin_t *plugin);

/* Name of a stage ("open", "symbol", "probe", ...); "unknown" for a value
 * outside the enum; never NULL. */
const char *hk_load_stage_name(hk_load_stage_t stage);

/* ==== Version selection (hk_loader_select.c) ===========================
 *
 * A request names what a host wants:
 *   "NAME"          the highest release of plugin NAME ("NAME@*")
 *   "NAME@RANGE"    the highest version of NAME in RANGE, one comparator or a
 *                   comma-separated list that must all hold ("hk-cpu@^1",
 *                   "hk-cpu@>=1.0, <2"; grammar, precedence and the
 *                   pre-release rule in hk_semver.h, hk_semver_range_t; build
 *                   metadata is ignored)
 *   a path          a request that contains '/' or ends in ".so" is a file:
 *                   it is loaded with hk_loader_open, exactly that file, and
 *                   neither HK_PLUGIN_PIN nor HK_PLUGIN_EXCLUDE applies.
 * Only plugins already loaded (hk_loader_scan, hk_loader_open) are
 * candidates. Among the candidates of that name that are selectable, the
 * highest version wins; between equal versions (same numbers and pre-release,
 * build metadata aside) the one loaded first wins, i.e. the first in
 * hk_loader_plugin order: after hk_loader_scan, the earlier directory of the
 * search path, and within a directory the earlier file name.
 *
 * A candidate is not selectable, checked in this order, when:
 *   it failed a swap's verification (a wrong
 *   result, or it crashed, exited or hung in the
 *   probe process), for the loader's life           HK_SELECT_FAILED
 *   an HK_PLUGIN_EXCLUDE entry matches it           HK_SELECT_EXCLUDED
 *   its version is not a semantic version           HK_SELECT_BAD_VERSION
 *   it is outside the request's range               HK_SELECT_OUT_OF_RANGE
 *   it is outside an HK_PLUGIN_PIN range of NAME    HK_SELECT_PINNED
 *   it is a pre-release that neither the request's
 *   range nor a pin of NAME names                   HK_SELECT_OUT_OF_RANGE
 * Last, a selectable candidate is superseded (HK_SELECT_SUPERSEDED) by a
 * selectable one loaded later from the same path (the same text): its file
 * was rewritten or renamed over and opened or scanned again, so the path
 * now holds the later build, whatever its version (a rebuild with the same
 * version, a rollback to a lower one). A later build that is not
 * selectable (outside the range, failed) supersedes nothing.
 * The pre-release rule of hk_semver.h applies to the request and its pins
 * together: a pre-release is selectable when one of them names a
 * pre-release of its MAJOR.MINOR.PATCH and it satisfies every operator
 * ("NAME" with HK_PLUGIN_PIN="NAME@2.0.0-rc.1" selects 2.0.0-rc.1, and
 * "NAME@^2" with that pin selects nothing, as 2.0.0-rc.1 < 2.0.0).
 *
 * Environment, read with secure_getenv at every call (so ignored in a
 * process with elevated privileges, AT_SECURE, where a report with path
 * "HK_PLUGIN_PIN" or "HK_PLUGIN_EXCLUDE", stage scan, status INSECURE says
 * so); each is a comma-separated list of entries, and empty entries are
 * skipped. A comma followed (after spaces) by an operator ('<', '>', '=',
 * '^' or '~') continues the range of the NAME@RANGE entry before it rather
 * than starting an entry: "hk-cpu@>=1.0, <2,hk-cuda@^1" is two entries. A
 * bare version after a comma starts an entry (write "=1.0.0" to list it in
 * a range there), and spaces are allowed only around such a comma.
 *   HK_PLUGIN_PIN="hk-cuda@1.4.1,hk-cpu@^1"
 *       each entry is NAME@RANGE and narrows what a request for NAME may
 *       select: a candidate must be in the request's range AND in every pin
 *       range of its name (an intersection; "hk-cuda@^2" with a pin
 *       "hk-cuda@1.4.1" selects nothing).
 *   HK_PLUGIN_EXCLUDE="hk-cuda@1.3.0,/opt/hk/old/hk-cpu.so,hk-test"
 *       each entry removes candidates: NAME@RANGE the versions of NAME in
 *       RANGE (pre-release rule included), NAME every version of NAME,
 *       pre-releases too, and a path (contains '/' or ends in ".so") the
 *       plugin loaded from that file (same path text, or the same file
 *       reached through another path).
 * A malformed entry (no name, a bad range, a pin without "@RANGE", spaces
 * or control characters) is ignored and the others still apply; it is
 * reported once per loader: a report with the variable's name as path, stage
 * scan, status INVALID_VALUE, and the reason "entry 'E' ignored: WHY", logged
 * like a refused candidate. A malformed variable never fails a request.
 *
 * Thread rule of both functions: [thread-safe]; they may run while other
 * threads scan or open. They must not be called from the loader's log
 * callback (they may add a report under the lock scan holds), and the
 * environment must not be changed while they run (setenv is not
 * thread-safe). */

typedef enum hk_select_verdict {
    HK_SELECT_CHOSEN = 0,       /* the request resolves to this plugin */
    HK_SELECT_LOWER = 1,        /* selectable, but a higher version was chosen */
    HK_SELECT_DUPLICATE = 2,    /* the chosen version, from a file loaded later */
    HK_SELECT_OUT_OF_RANGE = 3, /* outside the request's range */
    HK_SELECT_PINNED = 4,       /* outside an HK_PLUGIN_PIN range */
    HK_SELECT_EXCLUDED = 5,     /* removed by an HK_PLUGIN_EXCLUDE entry */
    HK_SELECT_BAD_VERSION = 6,  /* its version text is not a semantic version */
    /* Added after the others: a host written before them may meet these two
     * (hk_select_verdict_name names them). */
    HK_SELECT_SUPERSEDED = 7,   /* its file was rewritten with another
                                   selectable build, loaded later */
    HK_SELECT_FAILED = 8        /* it failed a swap's verification */
} hk_select_verdict_t;

#define HK_SELECT_REASON_MAX 320

/* Why one candidate was or was not chosen. */
typedef struct hk_select_entry {
    hk_plugin_t *plugin;              /* owned by the loader */
    hk_select_verdict_t verdict;
    char reason[HK_SELECT_REASON_MAX]; /* one line, cut to fit; e.g.
                                          "chosen: highest version in ^1",
                                          "lower than 1.10.0, the chosen version",
                                          "outside ^2",
                                          "pinned to 1.4.1 by HK_PLUGIN_PIN",
                                          "excluded by HK_PLUGIN_EXCLUDE entry hk-cuda@1.3.0" */
} hk_select_entry_t;

/* [thread-safe] Resolves request (see above) to one loaded plugin. *out
 * receives it (owned by the loader; NULL on failure). Returns:
 *   OK             *out is the chosen plugin
 *   NOT_FOUND      no plugin of that name is loaded, or none is selectable;
 *                  hk_loader_last_error names every candidate, e.g.
 *                  "hk-cuda@^2: found 1.0.0 (/p/a.so: outside ^2), 1.4.1
 *                  (/p/b.so: outside ^2); none in range", or "no plugin
 *                  named hk-cuda is loaded (loaded: hk-cpu)". When the
 *                  loader refused something that could have been the
 *                  request, that line ends in "; refused:" and each such
 *                  candidate follows on a line of its own, "  PATH: STAGE:
 *                  STATUS: REASON" (control bytes as '?'), in report order:
 *                  a file of that name (NAME.so, or NAME-<digit>...so as
 *                  versions side by side are named), a directory of the
 *                  search path that was refused or could not be read
 *                  ("  DIR (HK_PLUGIN_PATH): ..." or "(the default
 *                  directory)"), and HK_PLUGIN_PATH when it was ignored
 *   INVALID_VALUE  the request is empty, has no name before '@', a name
 *                  with spaces or control characters, or a malformed range;
 *                  the last error says which
 *   NULL_POINTER   loader, request or out is NULL (no last error without a
 *                  loader)
 *   OUT_OF_MEMORY  copying the environment or the candidate list failed
 *   a path request returns what hk_loader_open returns.
 * The failure's line stays readable through hk_loader_last_error for the
 * loader's lifetime. */
hk_status_t hk_loader_select(hk_loader_t *loader, const char *request, hk_plugin_t **out);

/* [thread-safe] Says, for a NAME or NAME@RANGE request, what hk_loader_select
 * would decide about every loaded plugin of that name, in load order. Fills
 * entries[0 .. min(capacity, *count)) (entries may be NULL when capacity is
 * 0) and sets *count to the number of plugins of that name, which may exceed
 * capacity. Returns the status hk_loader_select would return (OK with one
 * entry HK_SELECT_CHOSEN, NOT_FOUND with none, INVALID_VALUE for a malformed
 * request and also for a path request, which selects nothing: *count 0) and
 * sets the last error as it would. NULL loader, request or count:
 * NULL_POINTER. Nothing is allocated for the caller. */
hk_status_t hk_loader_select_explain(hk_loader_t *loader, const char *request,
                                     hk_select_entry_t *entries, size_t capacity,
                                     size_t *count);

/* [thread-safe] Name of a verdict ("chosen", "lower", "duplicate",
 * "out-of-range", "pinned", "excluded", "bad-version", "superseded",
 * "failed"); "unknown" outside the list; never NULL. */
const char *hk_select_verdict_name(hk_select_verdict_t verdict);

/* ==== end of version selection ======================================== */

#ifdef __cplusplus
}
#endif

#endif /* HK_LOADER_H */
