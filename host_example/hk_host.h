/* hk-host: the command-line host. Shared declarations of its commands.
 *
 * hk-host is single-threaded: the output state below (JSON document, error
 * list, progress line) and the escaping buffers are process globals. */
#ifndef HKH_H
#define HKH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hk__cli.h"
#include "hk__json.h"
#include "hk_loader.h"

/* The program's own version, independent of the plugin ABI (hk-host
 * --version prints both). */
#define HKH_VERSION "1.0.0"

/* Exit statuses (hk-host --help lists them). */
#define HKH_EXIT_OK 0     /* everything that ran was right */
#define HKH_EXIT_FAIL 1   /* a wrong result, a failed call, no usable plugin */
#define HKH_EXIT_USAGE 2  /* bad command line, -d on a plugin without devices */
#define HKH_EXIT_MEMORY 3 /* the workload's memory cannot be had (host or device) */

typedef struct hkh_opts {
    const char *plugin; /* -p request: NAME, NAME@RANGE or a path; NULL: the default
                           (hk-cuda if usable, else hk-cpu) */
    int64_t n;          /* vector length of the workload, at least 1 */
    int device;         /* HK_DEVICE_CURRENT or an ordinal */
    int verbose;
    unsigned seed;
    int json;           /* --json: one JSON document on stdout */
    int argc;           /* commands that parse their own options (validate, bench, */
    char **argv;        /* swap): argv[0] is the command's name, then its arguments */
} hkh_opts_t;

/* ---- the command line (hk_host_cli.c) ---- */

/* Reads the next argument of c for the command cmd (e.g. "swap"): an option's
 * id or HK__CLI_OPERAND/END as hk__cli_next; help is printed by usage(stdout)
 * and an error is one line (hkh_fail) naming cmd, both as HK__CLI_HELP and
 * HK__CLI_ERROR, after which the caller returns hkh_cli_exit(that value). */
int hkh_cli_next(hk__cli_t *c, const char *cmd, void (*usage)(FILE *f));
int hkh_cli_exit(int what);

/* A number option of a command: its id, its range, and the field of the
 * command's options struct it is stored in (an integer of `size` bytes: 4,
 * unsigned, or 8). HKH_NUMBER fills one from the struct's type. */
typedef struct hkh_number {
    int id;
    long long lo, hi;
    size_t at, size;
} hkh_number_t;
#define HKH_NUMBER(id, lo, hi, type, field)                                                     \
    {(id), (lo), (hi), offsetof(type, field), sizeof(((type *)0)->field)}

/* The whole command line of a command that takes no operand: each option
 * found in numbers (ended by id 0) is stored there after its range is
 * checked; any other is given to other(id, value, opts), which returns 0 or
 * a usage error's text. Returns -1 to go on, else the exit status (help:
 * OK; a usage error: its line, HKH_EXIT_USAGE). */
int hkh_cli_parse(hk__cli_t *c, const char *cmd, void (*usage)(FILE *f),
                  const hkh_number_t *numbers,
                  const char *(*other)(int id, const char *value, void *opts), void *opts);

/* One usage error line, "CMD: TEXT (see hk-host CMD --help)" (cmd NULL:
 * none); returns HKH_EXIT_USAGE. When --json was given anywhere on the
 * command line (hkh_json_wanted) and no document is open yet, the error is
 * also one document on stdout, as a command's failure would be. */
extern int hkh_json_wanted;
int hkh_usage_error(const char *cmd, const char *text);

/* The line that ends the help of a command: where the rest is told. */
void hkh_usage_more(FILE *f);

/* ---- output (hk_host_out.c) ---- */

/* s with every byte outside printable ASCII (control characters, DEL, bytes
 * of 0x80 and up) shown as \xNN and a backslash as \\, so that a plugin's or
 * a file's name cannot move the cursor, recolour or forge lines. The result
 * lives in one of a few rotating static buffers: at most 8 results may be in
 * use at once; a very long text is cut with "...". NULL → "(null)". */
const char *hkh_esc(const char *s);

/* The document of a --json command: hkh_doc_begin opens the top object
 * with "command"; hkh_doc_end closes whatever is still open, adds
 * "errors" (every hkh_fail line) and "exit_status", and returns rc. NULL
 * when the command runs without --json. */
hk__json_t *hkh_json(void);
void hkh_doc_begin(const hkh_opts_t *opts, const char *command);
int hkh_doc_end(int rc);

/* One error: "hk-host: <text>" on stderr, escaped, on one line, and in the
 * document's "errors" under --json. Arguments are raw text. */
void hkh_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One warning: "hk-host: warning: <text>" on stderr, escaped, on one line,
 * and in the document's "warnings" under --json (the first 8). For what the
 * environment changed without failing the command. */
void hkh_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The progress line: only when stdout is a terminal and not under --json.
 * hkh_progress_start arms it for a run of `total` steps; from
 * HKH_PROGRESS_AFTER_MS after that on (short runs never show it),
 * hkh_progress writes "[step/total] text  seconds" in place of the
 * previous line, cut to the terminal's width; hkh_progress_clear erases
 * it (before any other output, and at the end). Text is raw, escaped here. */
#define HKH_PROGRESS_AFTER_MS 200
void hkh_progress_start(const hkh_opts_t *opts, int total);
void hkh_progress(int step, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hkh_progress_clear(void);

/* ---- plugins (hk_host_plugins.c) ---- */

/* Loads every plugin of the search path; NULL on failure (message on stderr).
 * Loader messages go to stderr: warnings unless quiet, everything if verbose.
 * list, info and run load quietly: list shows every refusal as its output,
 * and info and run name only the refusals of the names they tried. */
hk_loader_t *hkh_loader(int verbose, int quiet);

/* Every command says what its environment changed, whether or not it loads
 * a plugin: a refused directory of the search path (HK_PLUGIN_PATH, or the
 * built-in one) and each report of HK_PLUGIN_PATH, HK_PLUGIN_PIN and
 * HK_PLUGIN_EXCLUDE (malformed entries, or variables ignored under elevated
 * privileges) is one hkh_warn line. hkh_loader does it after its scan;
 * hkh_env_check is for the commands that make no loader of their own
 * (bench, validate of a path): when one of the variables is set it scans
 * the search path with a loader of its own (no plugin of the build's
 * directory), and warns alike. */
void hkh_env_check(void);

/* A chosen plugin and, when one could be made, a live handle on it. vt is
 * the loader's copy of the plugin's vtable: every slot is checked for NULL
 * before it is called. */
typedef struct hkh_target {
    hk_plugin_t *plugin;
    const hk_vtable_t *vt;
    hk_handle_t *handle;     /* NULL when handle_create failed */
    const char *request;     /* the -p request, or NULL for the default */
    char why[1100];          /* why this plugin, raw: "a CUDA device is usable",
                                "hk-cuda is unusable: ...", "-p x@^1: highest
                                version in ^1", "-p /path/x.so" */
    char handle_error[1024]; /* raw "STATUS: message" when handle is NULL */
} hkh_target_t;

/* Picks the plugin (opts->plugin through hk_loader_select, else hk-cuda when a
 * handle can be made on it, else hk-cpu) and tries to create a handle; the
 * handle's failure is recorded in handle_error, not reported. Returns 0, or
 * an exit code after hkh_fail when no plugin could be chosen (1: a line
 * naming both names' failures, then each refused candidate of either on a
 * line of its own) or -d names a device and the plugin computes on the host
 * (2). */
int hkh_choose(hk_loader_t *loader, const hkh_opts_t *opts, hkh_target_t *out);
void hkh_release(hkh_target_t *t);

/* Text: "plugin: NAME VERSION (WHY)". JSON: member "plugin" with name,
 * version, path, ABI, flags, request and why. */
void hkh_print_choice(const hkh_target_t *t);

/* The plugin's last error for handle (NULL: this thread's failed create),
 * raw, in buf: last_error_copy when the plugin has it, else last_error. */
const char *hkh_error(const hkh_target_t *t, const hk_handle_t *handle, char *buf,
                      size_t len);

/* Whether a request names a file (it contains '/' or ends in ".so"), as the
 * loader reads it. */
int hkh_is_path(const char *request);

/* hk_loader_select; on failure the loader's reason (after prefix) and then
 * each candidate of that name it refused, an error line each, and
 * HKH_EXIT_FAIL, or HKH_EXIT_USAGE for a malformed request (no name, a bad
 * range). prefix: "", "validate: " or "swap: ". */
int hkh_select(hk_loader_t *loader, const char *request, const char *prefix, hk_plugin_t **out);

/* ---- commands ---- */
int hkh_cmd_list(const hkh_opts_t *opts);     /* hk_host_plugins.c */
int hkh_cmd_info(const hkh_opts_t *opts);     /* hk_host_info.c */
int hkh_cmd_run(const hkh_opts_t *opts);      /* hk_host_run.c */
/* These parse their own options from opts->argc/argv. */
int hkh_cmd_validate(const hkh_opts_t *opts); /* hk_host_exec.c */
int hkh_cmd_bench(const hkh_opts_t *opts);    /* hk_host_exec.c */
int hkh_cmd_swap(const hkh_opts_t *opts);     /* hk_host_swap.c */
int hkh_cmd_watch(const hkh_opts_t *opts);    /* hk_host_watch.c */

#endif /* HKH_H */
