/* hk-host: the command-line host. Shared declarations of its commands. */
#ifndef HK_HOST_H
#define HK_HOST_H

#include <stdint.h>
#include <stdio.h>

#include "hk_loader.h"

/* Exit statuses (hk-host --help lists them). */
#define HK_HOST_EXIT_OK 0     /* everything that ran was right */
#define HK_HOST_EXIT_FAIL 1   /* a wrong result, a failed call, no usable plugin */
#define HK_HOST_EXIT_USAGE 2  /* bad command line */
#define HK_HOST_EXIT_MEMORY 3 /* the workload's memory cannot be had (host or device) */

typedef struct hk_host_opts {
    const char *plugin; /* name or path; NULL: the default (hk-cuda if usable, else hk-cpu) */
    int64_t n;          /* vector length of the workload */
    int device;         /* HK_DEVICE_CURRENT or an ordinal */
    int verbose;
    unsigned seed;
} hk_host_opts_t;

/* Loads every plugin of the search path; NULL on failure (message on stderr).
 * Loader messages go to stderr: warnings unless quiet, everything if verbose. */
hk_loader_t *hk_host_loader(int verbose, int quiet);

/* A chosen plugin and a live handle on it. vt is the loader's copy of the
 * plugin's vtable: every slot is checked for NULL before it is called. */
typedef struct hk_host_target {
    hk_plugin_t *plugin;
    const hk_vtable_t *vt;
    hk_handle_t *handle;
} hk_host_target_t;

/* Picks the plugin (opts->plugin, else hk-cuda when a handle can be made, else
 * hk-cpu, saying why on stdout) and creates a handle. Returns 0 or an exit code. */
int hk_host_pick(hk_loader_t *loader, const hk_host_opts_t *opts, hk_host_target_t *out);
void hk_host_release(hk_host_target_t *t);

/* s with every byte outside printable ASCII (control characters, DEL, bytes
 * of 0x80 and up) shown as \xNN and a backslash as \\, so that a plugin's or
 * a file's name cannot move the cursor, recolour or forge lines. The result
 * lives in one of a few rotating static buffers (hk-host is single-threaded):
 * at most 8 results may be in use at once; a very long text is cut with
 * "...". NULL → "(null)". */
const char *hk_host_esc(const char *s);

/* The plugin's last error for handle (NULL: this thread's failed create),
 * escaped: last_error_copy when the plugin has it, else last_error. */
const char *hk_host_error(const hk_host_target_t *t, const hk_handle_t *handle);

int hk_host_cmd_list(const hk_host_opts_t *opts);
int hk_host_cmd_info(const hk_host_opts_t *opts);
int hk_host_cmd_run(const hk_host_opts_t *opts);

#endif /* HK_HOST_H */
