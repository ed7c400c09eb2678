/* Helpers shared by the loader test files: temporary directories, file
 * copies, report lookup. Test code: failures of the helpers themselves abort
 * the test through CUnit assertions in the callers. */
#ifndef TEST_LOADER_UTIL_H
#define TEST_LOADER_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hk_loader.h"

/* Path of a built test plugin or generated candidate in HK_TEST_PLUGIN_DIR
 * ("tp_good.so"). Returns a static buffer of the calling thread. */
const char *tl_plugin(const char *file);

/* Creates a fresh directory under HK_TEST_TMP_DIR (in the build tree; mode
 * 0755) into buf. 0 on success. */
int tl_mkdtemp(char *buf, size_t n);

/* Removes a directory made by tl_mkdtemp and everything in it. */
void tl_rmtree(const char *dir);

/* The set-up of the tests of hostile candidates: a fresh directory
 * (tl_mkdtemp) into dir, and $HK_TP_MARKER set to dir/marker, whose path
 * goes into marker. Fails the calling test (a fatal assertion) when either
 * cannot be made. */
void tl_marked_dir(char *dir, size_t n, char *marker, size_t m);

/* Undoes tl_marked_dir: unsets $HK_TP_MARKER and removes dir. */
void tl_marked_dir_remove(const char *dir);

/* A hostile test build and the reason it must be refused with: the rows of
 * the tests' case tables. */
typedef struct tl_refusal {
    const char *file, *reason;
} tl_refusal_t;

/* Path of a hostile test build in HK_TEST_HOSTILE_DIR ("tp_neg_crash.so").
 * Returns a static buffer of the calling thread. */
const char *tl_hostile(const char *file);

/* Copies src to dir/name with mode; writes the new path into out. 0 on success. */
int tl_copy(const char *src, const char *dir, const char *name, mode_t mode,
            char *out, size_t n);

/* The report whose path equals path, or NULL. */
const hk_load_report_t *tl_report(const hk_loader_t *loader, const char *path);

/* A loader that ignores HK_PLUGIN_PATH and searches dir (may be NULL). */
hk_loader_t *tl_loader(const char *dir);

/* Opens one file with a fresh loader and returns its report (the loader is
 * kept in *loader for the caller to destroy). */
const hk_load_report_t *tl_open_one(const char *file, hk_loader_t **loader);

/* 1 when path, or the loader's snapshot of a file of its name
 * ("/memfd:<name> (deleted)"), is mapped into this process
 * (/proc/self/maps), else 0. Snapshots are told apart by name only:
 * those mapped when tl_forget_snapshots last ran do not count. */
int tl_is_mapped(const char *path);

/* See tl_is_mapped: a host child inherits its parent's snapshots. */
void tl_forget_snapshots(void);

/* A loader run in a child process, "the host": a plugin that crashes or
 * exits the host ends that child, not the test program. */
typedef struct tl_host_job {
    const char *open_path;  /* hk_loader_open this file, or NULL */
    const char *scan_dir;   /* or scan this directory (as the default one) */
    int scans;              /* how often to scan (0 → 1) */
    uint32_t isolation;     /* HK_ISOLATION_* */
    uint32_t timeout_ms;    /* probe_timeout_ms; 0 → 300 */
    const char *probe_path; /* may be NULL */
    int deadline_ms;        /* the child is killed after this; 0 → 60000 */
    int log;                /* pass a log callback as a host does (tl_host_log) */
    int linger_ms;          /* after reporting: destroy the loader, then wait this
                               long before exiting ("survived=1" once done) */
    int capture_stderr;     /* the host's stderr goes to a file: see err_bytes */
    const char *swap_to;    /* or: a movable handle on hk-cpu, swapped to this
                               path, then saxpy through it (tl_host_swap) */
    int nofile_free;        /* > 0: RLIMIT_NOFILE set so that this many descriptors
                               are free above the highest one open at the start */
} tl_host_job_t;

typedef struct tl_host_run {
    int wstatus;    /* the child's wait status, -1 when killed at the deadline */
    pid_t pid;      /* the host's pid */
    double ms;      /* how long create + open or scans took in the host */
    /* One line each: "report=<path>|<stage>|<status>|<reason>" per report,
     * "mapped=<path>" per report path mapped into the host, "plugins=<n>";
     * with job.log "log_lines=<n>" (every call of the log callback) and
     * "log_foreign=<n>" (those from a thread other than the host's); with
     * swap_to "swap=<status>|<last error>", "saxpy=<status>|<y[0]>" and
     * "bound=<name> <version>". */
    char out[65536];
    long long err_bytes; /* with capture_stderr: what the host wrote there */
    char err_head[1024]; /* and its first bytes */
} tl_host_run_t;

/* Runs job in a child with a deadline. The child is the leader of a
 * process group of its own, so that a plugin that signals its group reaches
 * no further than the host. Returns 0 when the child exited with status 0. */
int tl_host_run(const tl_host_job_t *job, tl_host_run_t *run);

/* 1 when run's output has exactly this line. */
int tl_has_line(const tl_host_run_t *run, const char *line);

/* 1 when run's output has a line starting with prefix and ending with suffix. */
int tl_has_line_like(const tl_host_run_t *run, const char *prefix, const char *suffix);

/* Marker lines ("<pid> <what>") written by the hostile test plugins into
 * the file named by $HK_TP_MARKER: how many in all, and how many by pid. */
void tl_marker_count(const char *marker, pid_t pid, int *total, int *by_pid);

/* The sticky directory that others may write (/tmp) above the build's
 * test directories, or NULL; a static buffer. */
const char *tl_sticky_above(void);

/* Why a set-user-ID copy of the helper cannot run here, or NULL when it can. */
const char *tl_setuid_unavailable(void);

/* The same, for a set-user-ID helper that must load plugins of the build
 * tree: its strict rule refuses them below a sticky directory too. */
const char *tl_setuid_loading_unavailable(void);

/* Registration of the test files. */
void tl_register_abi(void);
void tl_register_scan(void);
void tl_register_hostile(void);
void tl_register_fork(void);
void tl_register_threads(void);
void tl_register_trust(void);
void tl_register_probe(void);

#endif /* TEST_LOADER_UTIL_H */
