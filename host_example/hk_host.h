/* hk-host: the command-line host. Shared declarations of its commands. */
#ifndef HK_HOST_H
#define HK_HOST_H

#include <stdint.h>
#include <stdio.h>

#include "hk_loader.h"

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

/* A chosen plugin and a live handle on it. */
typedef struct hk_host_target {
    hk_plugin_t *plugin;
    const hk_vtable_t *vt;
    hk_handle_t *handle;
} hk_host_target_t;

/* Picks the plugin (opts->plugin, else hk-cuda when a handle can be made, else
 * hk-cpu, saying why on stdout) and creates a handle. Returns 0 or an exit code. */
int hk_host_pick(hk_loader_t *loader, const hk_host_opts_t *opts, hk_host_target_t *out);
void hk_host_release(hk_host_target_t *t);

int hk_host_cmd_list(const hk_host_opts_t *opts);
int hk_host_cmd_info(const hk_host_opts_t *opts);
int hk_host_cmd_run(const hk_host_opts_t *opts);
int hk_host_cmd_swap(int argc, char **argv); /* hk_host_swap.c; argv[0] is "swap" */

#endif /* HK_HOST_H */
