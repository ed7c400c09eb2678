/* handlekit loader internals: shared by hk_loader*.c, never installed.
 *
 * Locking: loader->open_lock serialises every scan and open of one loader
 * (held while a candidate is checked, opened and negotiated); loader->lock
 * guards the report and plugin arrays and is only held for short reads and
 * appends, so accessors never wait for a dlopen. Calls into libltdl take a
 * process-wide lock of their own (hk_loader_ltdl.c). Order: open_lock, then
 * lock or the libltdl lock, never the reverse. */
#ifndef HK__LOADER_H
#define HK__LOADER_H

#include <ltdl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "hk_loader.h"

/* What identifies a candidate file between attempts: a file that changed
 * (mode, contents) since it was refused is a new candidate. */
typedef struct hk__file_id {
    int valid; /* 0 when the path could not be stat'ed: match by path then */
    dev_t dev;
    ino_t ino;
    mode_t mode;
    off_t size;
    struct timespec mtime;
} hk__file_id_t;

typedef struct hk__report {
    hk_load_report_t pub; /* first: hk_loader_report hands out &pub */
    char *line;           /* "<path>: <stage>: <reason>" for the log and last_error */
    hk__file_id_t id;
} hk__report_t;

struct hk_plugin {
    hk_loader_t *loader;
    lt_dlhandle module;
    char *path;
    char *name;
    char *version;
    uint32_t abi;
    uint32_t flags;
    hk_vtable_t vtable; /* the host's zero-filled copy, see hk__plugin_validate */
    atomic_uint refs;
    dev_t dev;
    ino_t ino;
};

struct hk_loader {
    pthread_mutex_t lock;
    pthread_mutex_t open_lock;
    char *default_dir;
    int ignore_env;
    hk_log_fn log;
    void *log_user;
    uint32_t abi_min;
    uint32_t abi_max;
    lt_dladvise advise;
    hk__report_t **reports;
    size_t nreports;
    size_t capreports;
    hk_plugin_t **plugins;
    size_t nplugins;
    size_t capplugins;
    const char *last_error; /* a report's line or a static string; never NULL */
    int env_notice_done;    /* the "HK_PLUGIN_PATH ignored" report was made */
    struct hk__select_texts *select_texts; /* hk_loader_select.c; freed by hk__select_free */
    struct hk__swap *_Atomic swap; /* movable handles (hk_loader_mhandle.c); made on first use */
};

/* ---- hk_loader.c ---- */

/* Appends a report (copies path and reason) and, for a refusal, makes it the
 * last error and logs it at HK_LOG_WARN. Caller holds open_lock only.
 * Returns the stored report, or NULL when out of memory (the loader's last
 * error then says so). */
hk__report_t *hk__loader_report_add(hk_loader_t *loader, const char *path,
                                    hk_load_stage_t stage, hk_status_t status,
                                    const char *reason, hk_plugin_t *plugin,
                                    const hk__file_id_t *id);

/* The earlier report of the same candidate (see hk__file_id_t), or NULL.
 * For a loaded plugin only device and inode count: the file is mapped. */
hk__report_t *hk__loader_report_find(hk_loader_t *loader, const char *path,
                                     const hk__file_id_t *id);

/* Appends a loaded plugin. Returns HK_STATUS_OUT_OF_MEMORY on failure. */
hk_status_t hk__loader_plugin_add(hk_loader_t *loader, hk_plugin_t *plugin);

void hk__loader_set_error(hk_loader_t *loader, const char *line);

/* Fills *id from st (NULL st: an invalid id). */
void hk__file_id_set(hk__file_id_t *id, const struct stat *st);

/* ---- hk_loader_open.c ---- */

/* Checks, opens, negotiates and validates one candidate, recording exactly
 * one report unless the same candidate was seen before. dir_checked: the
 * caller already refused a writable directory. Caller holds open_lock. */
hk_status_t hk__loader_candidate(hk_loader_t *loader, const char *path, int dir_checked,
                                 hk_plugin_t **out);

void hk__select_free(hk_loader_t *loader); /* hk_loader_select.c, at destroy */

/* hk_loader_swap.c: nonzero (with the last error set) while a movable handle
 * lives; hk__swap_free frees the swap record at destroy. */
int hk__swap_busy(hk_loader_t *loader);
void hk__swap_free(hk_loader_t *loader);

/* ---- hk_loader_ltdl.c: every libltdl call goes through these ---- */

/* lt_dlinit for one loader and a local-binding advise for it. */
hk_status_t hk__ltdl_init(lt_dladvise *advise);
/* Balances hk__ltdl_init. */
void hk__ltdl_exit(lt_dladvise *advise);
/* Opens exactly path. On failure writes the dynamic loader's message to err. */
lt_dlhandle hk__ltdl_open(lt_dladvise advise, const char *path, char *err, size_t errlen);
void *hk__ltdl_sym(lt_dlhandle module, const char *name);
void hk__ltdl_close(lt_dlhandle module);
/* Keeps the module mapped for the rest of the process. */
void hk__ltdl_keep(lt_dlhandle module);

#endif /* HK__LOADER_H */
