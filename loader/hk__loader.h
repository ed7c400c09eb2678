/* handlekit loader internals: shared by hk_loader*.c, never installed.
 *
 * Locking: loader->gate serialises every scan and open of one loader (held
 * while candidates are checked, probed, opened and negotiated); loader->lock
 * guards the report and plugin arrays and is only held for short reads and
 * appends, so accessors never wait for a dlopen. Calls into libltdl take a
 * process-wide lock of their own (hk_loader_ltdl.c). Order: the gate (a flag,
 * never held as a mutex across work), then lock or the libltdl lock, never
 * the reverse; lock and the libltdl lock are never held together, except by
 * the fork handlers, which take the libltdl lock first.
 *
 * fork(): a pthread_atfork handler (hk_loader.c) takes, in this order, the
 * libltdl lock (unless the forking thread holds it: a plugin constructor
 * that forks), the registry of live loaders, and every loader's gate mutex
 * and lock, so the child gets them in a consistent state; the child then
 * marks every gate free, since the thread that held it (a scan in progress)
 * does not exist there. The gate is a flag under a mutex, not a mutex held for
 * the whole scan, precisely so that a fork never waits for a scan. */
#ifndef HK__LOADER_H
#define HK__LOADER_H

#include <ltdl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "hk_blas1.h"
#include "hk_loader.h"
#include "hk_memory.h"
#include "hk__trust.h"

/* Room for a reason that names a PATH_MAX path and a little text. */
#define HK__REASON_MAX 4608

/* Hooks of upper layers a loader can hold (hk__loader_hook_add). */
#define HK__LOADER_HOOKS 4

/* What identifies a candidate file between attempts: a file that changed
 * (mode, contents) since it was refused, or since a snapshot of it was
 * loaded, is a new candidate. */
typedef struct hk__file_id {
    int valid; /* 0 when the path could not be stat'ed: match by path then */
    dev_t dev;
    ino_t ino;
    mode_t mode;
    off_t size;
    struct timespec mtime;
    struct timespec ctime; /* a rewrite of the same size within mtime's tick */
} hk__file_id_t;

typedef struct hk__report {
    hk_load_report_t pub; /* first: hk_loader_report hands out &pub */
    char *line;           /* "<path>: <stage>: <reason>" for the log and last_error */
    hk__file_id_t id;
} hk__report_t;

/* A file the host's dynamic loader mapped through "/proc/<pid>/fd/<fd>"
 * (hk_loader_ltdl.c). */
typedef struct hk__mapped hk__mapped_t;

struct hk_plugin {
    hk_loader_t *loader;
    lt_dlhandle module;
    hk__mapped_t *mapped; /* the descriptor the module was opened through */
    char *path;
    char *name;
    char *version;
    uint32_t abi;
    uint32_t flags;
    hk_vtable_t vtable; /* the host's zero-filled copy, see hk__negotiate */
    struct hk__table_copy *tables; /* hk_plugin_table's copies; under loader->lock */
    atomic_uint refs;
    dev_t dev; /* the file at path when it was loaded */
    ino_t ino;
    /* 1 once its hk.trim/1 crashed, exited or hung in a probe process
     * (hk__probe_verify): the host never calls that trim, and keeps the
     * module mapped, as for a plugin that is not unload-safe. */
    atomic_int trim_failed;
    int from_snap; /* loaded from a snapshot (else in place) */
    /* The snapshot's descriptor while the module is closed (a reopen opens
     * it again); -1 while it is open, when the mapped record's descriptor
     * is the snapshot's: one descriptor per loaded plugin. */
    int snap_fd;
    /* A call into the plugin was given up at its deadline (hk__plugin_leak):
     * its code may still run, so the module is never closed. */
    atomic_int stuck;
    /* The devices it passed a swap's verification on, one bit each (bit
     * d + 1 for device d, bit 0 for HK_DEVICE_CURRENT): a plugin record is
     * one build's bytes (its snapshot), so its verdict stands for as long
     * as the record (hk__verified, hk__verified_note). */
    atomic_uint_fast64_t verified;
    /* Its verification failed (a wrong result, or a crash, exit or hang in
     * the probe process): no request selects it again (HK_SELECT_FAILED).
     * failed_why (set once, before failed is stored; freed with the record)
     * says why. */
    atomic_int failed;
    char *_Atomic failed_why;
    /* The swap layer's copies of the tables movable handles do not forward
     * (hk__swap.h), while the module is open; NULL until needed. */
    struct hk__ext *swap_ext;
};

/* Serialises scan and open of one loader; see the file comment. */
typedef struct hk__gate {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int busy;
} hk__gate_t;

struct hk_loader {
    pthread_mutex_t lock;
    hk__gate_t gate;
    hk_loader_t *next_live; /* registry of live loaders, for fork */
    char *default_dir;
    int ignore_env;
    hk_log_fn log;
    void *log_user;
    uint32_t abi_min;
    uint32_t abi_max;
    uint32_t probe_timeout_ms;
    uint32_t isolation;
    int in_place;           /* load_in_place: map the files, no snapshots */
    uint32_t verifier_mode; /* HK_VERIFIER_KEEP or HK_VERIFIER_PER_SWAP */
    /* The verifier process (hk_loader_verifier.c) once one ran; its own
     * lock. Freed through its hook at destroy. */
    struct hk__verifier *verifier;
    uint64_t deadline_ns;   /* of a call into a plugin (hk_loader_deadline.c) */
    char *probe_path;       /* the option, or NULL */
    int probe_fd;           /* the checked probe program, -1 until found */
    char *probe_error;      /* why no probe program is usable, once known */
    lt_dladvise advise;
    hk__report_t **reports;
    size_t nreports;
    size_t capreports;
    hk_plugin_t **plugins;
    size_t nplugins;
    size_t capplugins;
    const char *last_error; /* a report's line, a kept line or a static string; never NULL */
    struct hk__kept *kept;  /* lines made last errors by hk__loader_keep_error */
    int env_notice_done;    /* the "HK_PLUGIN_PATH ignored" report was made */
    /* Upper layers' state, reached at destroy through hooks (see
     * hk__loader_hook_t); under lock. */
    const struct hk__loader_hook *hooks[HK__LOADER_HOOKS];
    size_t nhooks;
    /* The movable handles' record (hk_loader_swapstate.c): made on first use,
     * which registers its hook; the core only keeps the pointer. */
    struct hk__swap *_Atomic swap;
};

/* State that a layer above the core keeps with a loader (the movable
 * handles' record): the core reaches it only through these, registered when
 * the state is made, so that calls go down. At destroy every busy (may be
 * NULL) is asked first: nonzero refuses the destroy with HK_STATUS_BUSY, busy
 * having set the last error; once the loader goes, every fini frees its
 * state. Neither is called with a lock of the loader held. */
typedef struct hk__loader_hook {
    int (*busy)(hk_loader_t *loader);
    void (*fini)(hk_loader_t *loader);
} hk__loader_hook_t;

/* What the probe learnt about one candidate (hk_loader_probe.c). */
typedef struct hk__probe_result {
    int answered;           /* 1: the fields below hold the probe's answer */
    int phase;              /* how far the child got (hk_loader_probe.c) */
    hk_load_stage_t stage;  /* LOADED, or where the probe refused it */
    hk_status_t status;
    uint32_t abi;
    uint32_t flags;
    uint32_t vtable_size;
    char name[256];
    char version[256];
} hk__probe_result_t;

/* One candidate on its way from its path to a report (hk_loader_open.c). */
typedef struct hk__cand {
    const char *path;      /* as named by the caller or the scan; not owned */
    int in_default_dir;    /* the scan found it in the default directory */
    hk_plugin_t *again;    /* a reopen: the plugin whose closed module this file was */
    int fd;                /* the checked file or its snapshot; -1 when none */
    int snapshot;          /* fd is the snapshot (hk_loader_snap.c) */
    struct stat st;        /* fstat of the file (what the snapshot copied) */
    hk__file_id_t id;      /* from stat(path): the key of its report */
    int seen;              /* a report of this candidate already exists */
    int refused;           /* stage, status and reason below hold the refusal */
    hk_load_stage_t stage;
    hk_status_t status;
    char reason[HK__REASON_MAX];
    hk__probe_result_t probe;
    hk_status_t result;    /* the outcome, once admitted or refused */
    hk_plugin_t *plugin;   /* the plugin admitted (for a reopen, again), or NULL */
} hk__cand_t;

/* ---- hk_loader_report.c ---- */

/* Appends a report (copies path and reason) and, for a refusal, makes it the
 * last error and logs it at HK_LOG_WARN. Caller holds the gate only.
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

/* Take and give back loader->lock, from accessors of a const loader too:
 * the mutex is the one member a reader changes. */
void hk__loader_lock(const hk_loader_t *loader);
void hk__loader_unlock(const hk_loader_t *loader);

/* Makes line, which must outlive the loader (a report's line, a static
 * string), the last error. */
void hk__loader_set_error(hk_loader_t *loader, const char *line);

/* Makes a copy of line the last error, kept until the loader is destroyed
 * (each text once): the loader hands out its last error without copying, so
 * a line made on the fly must outlive any reader. Returns the kept line, or
 * when none can be kept sets and returns fallback (a static string). */
const char *hk__loader_keep_error(hk_loader_t *loader, const char *line, const char *fallback);

/* Frees the kept lines; at destroy. */
void hk__loader_kept_free(hk_loader_t *loader);

/* Fills *id from st (NULL st: an invalid id). */
void hk__file_id_set(hk__file_id_t *id, const struct stat *st);

/* ---- hk_loader_select.c ---- */

/* Reads HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE as a select would, so that a
 * malformed entry (or a variable ignored under AT_SECURE) is reported once
 * the scan returns. Call without the gate held. */
void hk__select_env_check(hk_loader_t *loader);

/* ---- hk_loader.c ---- */

/* Enter and leave the loader's gate (scan and open). */
void hk__gate_enter(hk_loader_t *loader);
void hk__gate_leave(hk_loader_t *loader);

/* Registers hook (static storage) for loader, once: a hook already there is
 * not added again. HK_STATUS_OUT_OF_MEMORY when HK__LOADER_HOOKS are taken. */
hk_status_t hk__loader_hook_add(hk_loader_t *loader, const hk__loader_hook_t *hook);

/* ---- hk_loader_open.c: admission ---- */

/* A candidate for hk__admit: path (not copied), in_default_dir (the scan
 * found it in the default directory), again (NULL, or for a swap the plugin
 * whose closed module path is to be opened again). */
void hk__cand_init(hk__cand_t *c, const char *path, int in_default_dir, hk_plugin_t *again);

/* The one admission path, for a batch of n candidates: checks each one
 * (name, privileges, trust walk and open, ELF), probes the new ones
 * together, then finishes each one in order (the host's open, symbol,
 * negotiation and its checks). Each candidate ends with c->result and
 * c->plugin, and exactly one report unless it was seen before. A reopen
 * (c->again) must be the file that was loaded and answer as it did; it is
 * not probed (its verdict is known), makes no report, and on success its
 * plugin has a module and vtable again. Caller holds the gate. */
void hk__admit(hk_loader_t *loader, hk__cand_t **cands, size_t n);

/* ---- hk_loader_negotiate.c ---- */

/* Room for an answer from a plugin built against a longer answer struct: it
 * writes its own struct_size, and the loader reads only what it knows. */
typedef union hk__answer_buf {
    hk_negotiate_answer_t answer;
    unsigned char room[512];
} hk__answer_buf_t;

/* The loader's negotiation request (its ABI range and log) and an empty
 * answer buffer with its header set, ready for the entry point. */
void hk__negotiate_prepare(const hk_loader_t *loader, hk_negotiate_request_t *req,
                           hk__answer_buf_t *buf);

/* Calls the entry point and checks its answer against the loader's ABI range
 * (only abi_min, abi_max, log and log_user of loader are read). On success
 * fills p's name, version, abi, flags and vtable copy; otherwise sets *stage
 * and reason. Used by the host and by the probe program. */
hk_status_t hk__negotiate(hk_loader_t *loader, hk_negotiate_fn entry, hk_plugin_t *p,
                          hk_load_stage_t *stage, char *reason, size_t n);

/* Checks an answer's flags for its ABI version and writes the flags the host
 * sees to *out (memory-domain flags cleared below 1.2). On refusal writes the
 * reason and returns HK_STATUS_INVALID_VALUE. */
hk_status_t hk__answer_flags(uint32_t abi, uint32_t flags, uint32_t *out, char *reason, size_t n);

/* The loader's ABI range as text ("1.0-1.2"), for messages. */
void hk__range_text(char *buf, size_t n, const hk_loader_t *loader);

/* A new descriptor (close-on-exec) of the snapshot plugin was loaded from;
 * -1 with errno set (EINVAL: it was loaded in place). hk_loader.c. */
int hk__plugin_snap_dup(const hk_plugin_t *p);

/* ---- hk_loader_verify.c ---- */

/* Whether plugin passed a swap's verification on device before (always 0
 * for a plugin loaded in place, whose file may have changed), and the
 * record of a pass. */
int hk__verified(const hk_plugin_t *plugin, int device);
void hk__verified_note(hk_plugin_t *plugin, int device);

/* Records that plugin failed its verification, with why (copied; the first
 * reason stays): hk_loader_select passes it over from now on. */
void hk__failed_note(hk_plugin_t *plugin, const char *why);

/* The reason of a failed plugin ("" when it did not fail, or the reason
 * could not be kept). */
const char *hk__failed_why(const hk_plugin_t *plugin);

/* Runs the swap's verification workload on h through the given tables.
 * Returns OK, or the failing status with why filled. */
hk_status_t hk__verify_workload(const hk_vtable_t *core, const hk_blas1_v1_t *b,
                                const hk_memory_v1_t *m, hk_handle_t *h, char *why, size_t n);

/* The verification that fits plugin p, on its handle h: its self-check,
 * else the hk.blas1/1 workload, else nothing more (see the file). *how
 * names what ran (static text). Returns OK, or the failing status with why
 * filled. */
hk_status_t hk__verify_handle(const hk_plugin_t *p, hk_handle_t *h, const char **how, char *why,
                              size_t n);

/* ---- hk_loader_trust.c (the walk itself: common/lib/hk__trust.h) ---- */

/* 1 when name (the last path component) is a plugin file name: "*.so". */
int hk__plugin_name_ok(const char *path);

/* ---- hk_loader_elf.c ---- */

/* Checks the ELF file behind fd (size bytes) without mapping it: header,
 * class, byte order, machine, type, table and segment bounds, and the
 * initialization-function rule. Returns OK or LOAD_FAILED with reason. */
hk_status_t hk__elf_check(int fd, off_t size, char *reason, size_t n);

/* ---- hk_loader_snap.c ---- */

/* Copies the file behind fd (its fstat *st, checked by the trust rule) into
 * a sealed memfd named after path's last component: *out, O_CLOEXEC. A file
 * written during the copy is copied once more (*st then holds what was
 * copied), then refused. Returns OK, LOAD_FAILED or OUT_OF_MEMORY with a
 * reason. */
hk_status_t hk__snap_make(int fd, struct stat *st, const char *path, int *out, char *reason,
                          size_t n);

/* ---- the probe protocol (hk_loader_probe.c, hk_loader_probe_run.c) ----
 *
 * The host starts the probe program (posix_spawn, in a session of its own)
 * with
 *   argv: hk-probe <abi_min> <abi_max> <timeout_ms> <count> <parallel> <flags>
 *         <device> (flags: HK__PROBE_LOG, the host passes plugins a log
 *         callback; HK__PROBE_VERIFY, one candidate, a swap's: after the
 *         negotiation, the swap's verification on a handle of <device>, the
 *         child writing HK__PROBE_VERIFYING first, then, once the handle
 *         is destroyed, HK__PROBE_TRIMMING before the plugin's hk.trim/1 if
 *         it has one; <device> as an unsigned 32-bit number,
 *         HK_DEVICE_CURRENT included)
 *   fd 3: a pipe to the host; fds 4 .. 4+count-1: the checked candidates;
 *   fds 0 and 1: /dev/null; fd 2: the host's (a child's goes to the probe).
 * The probe (single-threaded, fresh from exec) forks one child per candidate,
 * <parallel> at a time, each in a process group of its own (killed whole
 * when the child ends). A child keeps only its candidate and a pipe of its own,
 * opens "/proc/self/fd/<n>" exactly as the host would, writes the byte
 * HK__PROBE_LOADED once the file is mapped (so a later death is blamed on the
 * negotiation, an earlier one on loading), negotiates and validates, writes
 * one hk__probe_answer_t followed by its strings, and _exits. Its stderr is
 * a pipe to the probe, which keeps the first HK__PROBE_ERR_KEEP bytes and
 * counts the rest. The probe relays, for each candidate, one
 * hk__probe_record_t followed by the child's answer bytes, then its kept
 * stderr bytes. The host trusts none of it: every field is checked. A probe that
 * ends or stops before it answered for every candidate is killed, and the
 * rest are probed again (hk_loader_probe.c). */
#define HK__PROBE_FD_HOST 3
#define HK__PROBE_FD_FIRST 4
#define HK__PROBE_PARALLEL 8      /* children at a time, at most */
#define HK__PROBE_CHUNK 64        /* candidates per probe process */
#define HK__PROBE_OUT_MAX 16384u  /* bytes of a child's answer relayed */
#define HK__PROBE_ERR_KEEP 1024u  /* bytes of a child's stderr relayed */
#define HK__PROBE_LOADED 'L'
#define HK__PROBE_VERIFYING 'V'
#define HK__PROBE_TRIMMING 'T'
#define HK__PROBE_LOG 0x1u        /* flags: negotiate with a log callback */
#define HK__PROBE_VERIFY 0x2u     /* flags: then run the swap's verification */
#define HK__PROBE_VERIFY_TIMES 10 /* its time limit, in probe time limits */
#define HK__ANSWER_MAGIC 0x41504b48u /* "HKPA" */
#define HK__RECORD_MAGIC 0x52504b48u /* "HKPR" */

/* The verifier (hk_loader_verifier.c, hk__probe_serve): one probe process
 * that a loader keeps for its swaps' verifications, so that no process
 * and no device context is made per verification. Started as
 *   argv: hk-probe --serve <abi_min> <abi_max> <flags: HK__PROBE_LOG>
 *   fd 3: a stream socket to the host; fds 0, 1 and 2: /dev/null,
 * in a session of its own, with no parent-death signal (that follows the
 * thread that started it). For each request the host sends an
 * hk__verify_req_t with the build's descriptor (SCM_RIGHTS); the verifier
 * writes what a probe child writes for one verification (the phase bytes,
 * then the answer) and waits for the next request. It ends after a refusal
 * (it answered, then exits: the next request starts a new one), after
 * HK__SERVE_MAX requests, or at EOF. The request's build is opened as
 * descriptor HK__SERVE_FD_BASE + the request's index, so a reason naming
 * "/proc/self/fd/N" is renamed by the host as for a probe child. */
#define HK__VERIFY_MAGIC 0x56504b48u /* "HKPV" */
#define HK__SERVE_FD_BASE 64
#define HK__SERVE_MAX 256
typedef struct hk__verify_req {
    uint32_t magic;
    uint32_t device; /* the verification handle's device, as in the probe's argv */
    uint32_t timeout_ms; /* its limit: the verifier's alarm ends it a little later */
} hk__verify_req_t;

typedef struct hk__probe_answer {
    uint32_t magic;
    uint32_t size; /* this struct and the three strings (no terminators) */
    uint32_t stage;
    uint32_t status;
    uint32_t abi;
    uint32_t flags;
    uint32_t vtable_size;
    uint32_t name_len;
    uint32_t version_len;
    uint32_t reason_len;
} hk__probe_answer_t;

enum { HK__PROBE_EXITED = 1, HK__PROBE_SIGNALED = 2, HK__PROBE_TIMEOUT = 3,
       HK__PROBE_NOFORK = 4 };

typedef struct hk__probe_record {
    uint32_t magic;
    uint32_t index;    /* 0 .. count-1 */
    uint32_t kind;     /* HK__PROBE_* */
    int32_t code;      /* exit status, signal number, or errno (NOFORK) */
    uint32_t len;      /* answer bytes that follow, at most HK__PROBE_OUT_MAX */
    uint32_t overflow; /* 1: the child wrote more than that */
    uint32_t err_len;  /* stderr bytes after those, at most HK__PROBE_ERR_KEEP */
    uint32_t reserved;
    uint64_t err_total; /* bytes the child wrote to stderr in all */
} hk__probe_record_t;

/* ---- hk_loader_probe.c: the host's side of isolation ---- */

/* Probes the candidates of cands that are neither seen nor refused, several
 * at a time, and fills each one's probe result or refusal. Caller holds the
 * gate. */
void hk__probe_batch(hk_loader_t *loader, hk__cand_t **cands, size_t n);

/* How many of the next n candidates (at least 1) one batch of hk__admit
 * can take with the descriptors free now: each holds one from its check
 * until it is finished, and the probe takes another for it. */
size_t hk__probe_fit(const hk_loader_t *loader, size_t n);

/* Before a swap verifies plugin in the host, verifies it in a probe process
 * (HK__PROBE_VERIFY) on a handle of device, with HK__PROBE_VERIFY_TIMES the
 * probe's time limit. Returns OK when it passed there, when isolation is off,
 * or when the plugin only reported a failure there (a failed create: a
 * device the probe cannot use is not the plugin's fault; a wrong result:
 * the host's own verification finds it again, safely); LOAD_FAILED, with
 * why, when it crashed, exited, hung, answered garbage or broke a rule of
 * negotiation there, or no probe could run. The verification ends with the
 * plugin's hk.trim/1 after the handle's destroy; a trim that crashed, exited
 * or hung there also sets plugin->trim_failed and keeps its module mapped.
 * *passed is 1 when the verification ran there and passed (the host then
 * need not run it again), else 0. Caller holds no loader lock. */
hk_status_t hk__probe_verify(hk_loader_t *loader, hk_plugin_t *plugin, int device,
                             char *why, size_t n, int *passed);

/* Applies one record of the probe (or the verifier) to its candidate:
 * the phase it reached, the refusal or the answer (index: the probe's
 * descriptor of it less HK__PROBE_FD_FIRST, for renaming reasons;
 * timeout_ms: its limit, for the reason). Returns the phase reached. */
int hk__probe_apply(hk__cand_t *c, size_t index, const hk__probe_record_t *rec,
                    const unsigned char *p, uint32_t timeout_ms);

/* ---- hk_loader_verifier.c: the loader's verifier process ---- */

/* Verifies the build behind c->fd (a snapshot) in the loader's verifier,
 * started when none runs, on device, within timeout_ms: the outcome as a
 * probe record in *rec, with its bytes in out (HK__PROBE_OUT_MAX) and the
 * verifier's descriptor of the build in *fd_no. Returns OK, or a failure
 * to start or talk to a verifier (why filled: the caller falls back to a
 * probe process of its own). The loader's probe program must be ready.
 * Calls of one loader are serialised. */
hk_status_t hk__verifier_run(hk_loader_t *loader, int fd, int device, uint32_t timeout_ms,
                             hk__probe_record_t *rec, unsigned char *out, int *fd_no,
                             char *why, size_t n);

/* ---- hk_loader_probe_run.c: the probe program's side ---- */

/* main() of the probe program (hk_probe_main.c). */
int hk__probe_main(int argc, char **argv);

/* ---- hk_loader_probe_log.c: what the probe holds a negotiation to ---- */

#define HK__PROBE_LOG_LINES 256      /* log lines a negotiation may write */
#define HK__PROBE_LOG_MSG_MAX 4096u  /* bytes of a message, its NUL included */

/* Gives fake (the probe's loader record) the probe's log callback, for a
 * negotiation on the calling thread. */
void hk__probe_log_begin(hk_loader_t *fake);

/* The threads of this process now, or -1 when unknown. */
int hk__probe_threads(void);

/* After the negotiation returned: the first rule it broke (a thread of its
 * own still running, of the threads_before there were; a rule of the log
 * callback), written into buf as a refusal reason, or NULL. */
const char *hk__probe_negotiated(int threads_before, char *buf, size_t n);

/* ---- hk_loader_ltdl.c: every libltdl call goes through these ---- */

/* lt_dlinit for one loader and a local-binding advise for it. */
hk_status_t hk__ltdl_init(lt_dladvise *advise);
/* Balances hk__ltdl_init. */
void hk__ltdl_exit(lt_dladvise *advise);
/* Opens exactly name (RTLD_NOW | RTLD_LOCAL; never retried lazily, never
 * resolved through a .la file). On failure writes the dynamic loader's
 * message to err, with shown in place of name. */
lt_dlhandle hk__ltdl_open_name(lt_dladvise advise, const char *name, const char *shown,
                               char *err, size_t errlen);
/* Opens the file behind fd through "/proc/<pid>/fd/<fd>"; st is the fstat
 * of the file itself, or with snapshot set of the file fd is a snapshot of.
 * On success *mapped records the descriptor, which then belongs to it (do
 * not close fd); on failure fd is still the caller's. */
lt_dlhandle hk__ltdl_open_fd(lt_dladvise advise, int fd, const struct stat *st, int snapshot,
                             const char *shown, hk__mapped_t **mapped, char *err,
                             size_t errlen);
/* A new descriptor (O_CLOEXEC) of the file mapped's module was opened from,
 * or -1 with errno. */
int hk__ltdl_mapped_dup(const hk__mapped_t *mapped);
/* The device and inode of that file, as /proc/self/maps lists them. */
void hk__ltdl_mapped_id(const hk__mapped_t *mapped, dev_t *dev, ino_t *ino);
void *hk__ltdl_sym(lt_dlhandle module, const char *name);
/* Closes a module opened by hk__ltdl_open_fd and gives its descriptor back
 * to the system once nothing in the process is mapped under its name. */
void hk__ltdl_close(lt_dlhandle module, hk__mapped_t *mapped);

/* Before a module is closed: the plugin's hk.trim/1, if it offers one, gives
 * back what it keeps between handles (hk_trim.h) here, rather than in its
 * unload, which runs under the dynamic loader's lock. A refusal is traced;
 * the module's unload tries again. The plugin's vtable must be intact.
 * Waits for the trim deadline_ns at most (0: for as long as it takes):
 * then the plugin is leaked (hk__plugin_leak), why says so ("NAME VERSION
 * hk.trim/1 (...) did not return within ..."), and it returns TIMED_OUT, the
 * module to be left open; otherwise OK. */
hk_status_t hk__plugin_trim(hk_plugin_t *plugin, uint64_t deadline_ns, char *why, size_t n);
/* A call into plugin did not return by its deadline: its module is kept
 * mapped for the rest of the process and never closed (plugin->stuck). */
void hk__plugin_leak(hk_plugin_t *plugin);
/* "NAME VERSION WHAT did not return within N ms (the deadline); ..." into
 * why, for a call given up at deadline_ns. */
void hk__stuck_line(const hk_plugin_t *plugin, const char *what, uint64_t deadline_ns, char *why,
                    size_t n);

/* ---- hk_loader_deadline.c: calls into a plugin with a deadline ----
 * Each runs the plugin's function on a thread of its own and waits
 * deadline_ns at most (0: runs it on this thread, without a deadline; so
 * does one that finds no thread to spare). Past the deadline: TIMED_OUT,
 * and the thread is left in the call, touching nothing but its own record:
 * a handle that a create given up makes later is destroyed by it, through
 * the same vtable (the caller must leak the plugin, hk__plugin_leak, so that
 * the code stays). On time: the call's status; after a failure, why
 * (may be NULL for destroy) holds the plugin's last_error(NULL), taken on
 * the thread that made the call. */
hk_status_t hk__call_create(uint64_t deadline_ns, const hk_vtable_t *vt,
                            const hk_create_info_t *ci, hk_handle_t **out, char *why, size_t n);
hk_status_t hk__call_destroy(uint64_t deadline_ns, hk_status_t (*destroy)(hk_handle_t *),
                             hk_handle_t *raw);
hk_status_t hk__call_trim(uint64_t deadline_ns, hk_status_t (*trim)(void),
                          const char *(*last_error)(const hk_handle_t *), char *why, size_t n);
/* Keeps the module mapped for the rest of the process. */
void hk__ltdl_keep(lt_dlhandle module);
/* The libltdl lock, for the fork handlers. */
void hk__ltdl_lock(void);
void hk__ltdl_unlock(void);
/* Replaces every occurrence of from in text (capacity n) by to: the
 * descriptor's name in a dynamic loader's message by the path it stands for. */
void hk__reason_rename(char *text, size_t n, const char *from, const char *to);

#endif /* HK__LOADER_H */
