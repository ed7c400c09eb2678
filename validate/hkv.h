/* hk-validate: checks any handlekit plugin against docs/abi.md and, for CUDA
 * plugins, docs/contexts.md.
 *
 * Files by concern: main.c (options, modes), runner.c (one process per check,
 * time limit, table/JSON output), spawn.c (the processes that run plugin
 * code, out of the validator's reach), plugin.c (loading a plugin instance
 * and the probe), util.c (results, memory through hk.memory/1, text rules),
 * cudrv.c (the validator's own access to the CUDA driver), and the checks:
 * checks_abi.c (negotiation, vtable, tables), checks_handles.c (handles,
 * create/info structs, errors), checks_matrix.c (the bad-input matrix),
 * checks_ops.c (numbers), checks_threads.c (thread rules), checks_trim.c and
 * checks_selfcheck.c (the optional tables hk.trim/1 and hk.selfcheck/1),
 * checks_cuda.c (the context contract).
 *
 * Every check runs in a process of its own, forked (under a keeper, in a
 * session of its own) from a process that never loaded CUDA, so a crash, a
 * hang or a signal to its parent or group is one failed check, and CUDA is
 * fresh in every check. */
#ifndef HKV_H
#define HKV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hk__json.h"
#include "hk_abi.h"
#include "hk_blas1.h"
#include "hk_memory.h"

/* ABI 1.2 names, for headers that predate them. */
#ifndef HK_PLUGIN_MEMORY_HOST
#define HK_PLUGIN_MEMORY_HOST 0x2u
#endif
#ifndef HK_PLUGIN_MEMORY_CUDA
#define HK_PLUGIN_MEMORY_CUDA 0x4u
#endif

/* The highest ABI whose rules this program knows; it asks for no more. */
#define HKV_ABI_MAX HK_ABI_VERSION(1, 2)
#define HKV_ABI_1_0 HK_ABI_VERSION(1, 0)
#define HKV_ABI_1_1 HK_ABI_VERSION(1, 1)
#define HKV_ABI_1_2 HK_ABI_VERSION(1, 2)

/* CU_STREAM_PER_THREAD, spelled without cuda.h. */
#define HKV_STREAM_PER_THREAD ((void *)0x2)

typedef hk_status_t (*hkv_last_error_copy_fn)(const hk_handle_t *handle, char *buf, size_t len,
                                              size_t *needed);

/* The core vtable as ABI 1.2 lays it out. A copy of the installed header's
 * layout up to 1.1 (checked in plugin.c), plus last_error_copy, so this
 * program validates 1.2 plugins whatever the headers it was built with. */
typedef struct hkv_vtable {
    size_t size;
    hk_status_t (*handle_create)(const hk_create_info_t *info, hk_handle_t **out);
    hk_status_t (*handle_destroy)(hk_handle_t *handle);
    hk_status_t (*set_stream)(hk_handle_t *handle, void *stream);
    hk_status_t (*get_stream)(hk_handle_t *handle, void **stream);
    hk_status_t (*set_pointer_mode)(hk_handle_t *handle, hk_pointer_mode_t mode);
    hk_status_t (*get_pointer_mode)(hk_handle_t *handle, hk_pointer_mode_t *mode);
    const char *(*last_error)(const hk_handle_t *handle);
    hk_status_t (*get_table)(const char *name, const void **table);
    hk_status_t (*enum_tables)(size_t index, const char **name);
    hk_status_t (*handle_info)(hk_handle_t *handle, hk_handle_info_t *info);
    hk_status_t (*synchronize)(hk_handle_t *handle);
    hkv_last_error_copy_fn last_error_copy;
} hkv_vtable_t;

#define HKV_VT_SIZE_1_0 offsetof(hkv_vtable_t, handle_info)
#define HKV_VT_SIZE_1_1 offsetof(hkv_vtable_t, last_error_copy)
#define HKV_VT_SIZE_1_2 sizeof(hkv_vtable_t)

/* ---- a loaded plugin instance (plugin.c) ---- */

typedef struct hkv_plugin {
    void *dl;
    hk_negotiate_fn negotiate;
    hk_negotiate_answer_t answer; /* of the negotiation at [1.0, HKV_ABI_MAX] */
    uint32_t abi;                 /* negotiated */
    size_t vt_size;               /* the plugin's own vtable size */
    hkv_vtable_t vt;  /* clamped copy; slots newer than the negotiated minor cleared */
    hk_blas1_v1_t blas;  /* clamped copies, zeroed when absent */
    hk_memory_v1_t mem;
    int has_blas, has_mem;
    size_t blas_size, mem_size; /* the plugin's own table sizes */
} hkv_plugin_t;

/* dlopen (local binding) and the entry symbol. 0 on success, else -1 and why. */
int hkv_plugin_open(hkv_plugin_t *p, const char *path, char *why, size_t len);

/* Negotiates with a fresh request [lo, hi] into *ans, whose buffer size the
 * host declares as ans_size (the rest of *ans zeroed). */
hk_status_t hkv_negotiate(const hkv_plugin_t *p, uint32_t lo, uint32_t hi, uint32_t ans_size,
                          hk_negotiate_answer_t *ans);

/* Open, negotiate at [1.0, HKV_ABI_MAX], validate the answer as a host does,
 * copy the vtable and the two known tables. 0 on success, else -1 and why. */
int hkv_plugin_load(hkv_plugin_t *p, const char *path, char *why, size_t len);

/* ---- what the probe learned, before any check ran (plugin.c) ---- */

#define HKV_PROBE_LOADED 1  /* negotiated; handle_create(NULL) next */
#define HKV_PROBE_CREATED 2 /* a handle made; handle_info and handle_destroy next */
#define HKV_PROBE_DONE 3

typedef struct hkv_probe {
    int stage;             /* how far the probe got (HKV_PROBE_*) */
    int loaded;            /* negotiated and passed the host's checks */
    char why[320];         /* when not */
    char name[64], version[64];
    uint32_t abi, flags;
    int handle_ok;         /* handle_create(NULL) worked */
    int env_missing;       /* it failed for want of a driver or device */
    int create_failed;     /* it crashed, exited or hung (create_why says which) */
    char create_why[320];
    int device;            /* handle_info's device; -2 when unknown */
    int cuda;              /* a CUDA plugin: memory flag CUDA or device >= 0 */
    int host_memory;       /* its "device" memory is host memory */
    int driver_ok;         /* this program opened the CUDA driver */
    int ndev;
    char driver_why[320];
    int has_blas, has_mem;
} hkv_probe_t;

/* Runs the probe in a child process; fills *pr. 0 when the child reported. */
int hkv_probe_run(const char *path, int timeout_ms, hkv_probe_t *pr);

/* ---- the processes that run plugin code (spawn.c) ---- */

/* A worker under its keeper, in a session of the keeper's. */
typedef struct hkv_proc {
    pid_t keeper; /* also the session's and the process group's ID */
    int status_fd;
    int reaped;
} hkv_proc_t;

/* How a worker ended: its wait status, or, when keeper_died, the keeper's
 * (the worker killed its parent, or its group, before the keeper reported). */
typedef struct hkv_end {
    int status;
    int keeper_died;
} hkv_end_t;

/* Starts fn(arg) in a worker (fn ends the process; returning is _exit(0)).
 * 0, or -1 when no process could be made. */
int hkv_spawn(hkv_proc_t *p, void (*fn)(void *), void *arg);

/* 1 once the keeper has ended, with *e filled then; 0 while it runs. */
int hkv_proc_poll(hkv_proc_t *p, hkv_end_t *e);

/* Kills whatever is left in the session (the worker too when it still
 * runs), reaps the keeper if it was not yet (filling *e) and closes. */
void hkv_proc_end(hkv_proc_t *p, hkv_end_t *e);

/* A signal's name ("SIGSEGV"), or "signal N" written to buf. */
const char *hkv_signal_name(int sig, char *buf, size_t len);

/* How a worker ended, as the end of a sentence: "did not finish in N ms",
 * "crashed (killed by SIGSEGV)", "exited with status N", "killed its parent
 * process (by SIGKILL)". */
void hkv_end_text(const hkv_end_t *e, int timed_out, char *buf, size_t len);

/* ---- the run's settings, set before any check forks ---- */

typedef struct hkv_env {
    const char *path;      /* the plugin under test */
    char copy_path[4096];  /* the same file copied under another name; "" if none */
    char copy_dir[4096];
    hkv_probe_t probe;
    int timeout_ms;
    int verbose;
    int no_fork; /* HK_VALIDATE_NO_FORK=1: run the first check in this process (debuggers) */
} hkv_env_t;

extern hkv_env_t hkv; /* util.c */

/* ---- checks and results ---- */

typedef enum hkv_verdict { HKV_PASS = 0, HKV_FAIL = 1, HKV_SKIP = 2, HKV_NOTSUP = 3 } hkv_verdict_t;

typedef struct hkv_result {
    int verdict;
    int nfail;           /* failures found; detail holds the first */
    char detail[480];
    char observed[64];   /* matrix cases: the status seen, for --matrix */
} hkv_result_t;

/* What a check needs; the runner skips it with the reason when missing. */
#define HKV_NEED_PLUGIN 0x01u /* negotiated */
#define HKV_NEED_HANDLE 0x02u /* handle_create works */
#define HKV_NEED_CUDA 0x04u   /* a CUDA plugin and a driver this program opened */
#define HKV_NEED_2DEV 0x08u   /* at least two CUDA devices */
#define HKV_NEED_COPY 0x10u   /* the second copy of the file */
#define HKV_MATRIX 0x100u     /* a bad-input matrix case */

typedef struct hkv_check hkv_check_t;
typedef void (*hkv_check_fn)(const hkv_check_t *self, hkv_plugin_t *p, hkv_result_t *r);

struct hkv_check {
    char name[96];
    hkv_check_fn fn;
    unsigned needs;
    int a, b, c; /* parameters of generated checks */
};

/* Appends a check (aborts on a registration bug: a name too long, out of memory). */
void hkv_add(const char *name, hkv_check_fn fn, unsigned needs, int a, int b, int c);
size_t hkv_check_count(void);
hkv_check_t *hkv_check_at(size_t i);

/* Reports a usage error (one line, and a JSON document under --json) and
 * returns the exit status 2; fmt has one %s, for arg. */
typedef int (*hkv_usage_fn)(const char *fmt, const char *arg);

/* Takes --simulate[=N] out of argv (simulate.c) and, when given, points
 * HK_CUDA_DRIVER at the simulated driver with N devices. Returns -1 to go
 * on, else the exit status after one line on stderr (a malformed N goes
 * through usage). */
int hkv_simulate_args(int *argc, char **argv, hkv_usage_fn usage);

void hkv_register_abi(void);
void hkv_register_handles(void);
void hkv_register_matrix(void);
void hkv_register_ops(void);
void hkv_register_threads(void);
void hkv_register_trim(void);
void hkv_register_selfcheck(void);
void hkv_register_cuda(void);
/* The checks of the caller's current context after every slot
 * (checks_cudacur.c), registered after the other CUDA checks. */
void hkv_register_cuda_current(void);

/* Runs the checks whose select flag is set; prints as asked; returns the
 * number failed. Results land in results[i] (indexed like the checks). */
typedef struct hkv_run_opts {
    hk__json_t *json; /* the document's open "checks" array; NULL: a table */
    int matrix;  /* print "name observed" lines only */
    int quiet;   /* print nothing (compare mode) */
} hkv_run_opts_t;
int hkv_run(const unsigned char *select, hkv_result_t *results, const hkv_run_opts_t *o,
            int *passed, int *skipped);

/* ---- result helpers (util.c) ---- */

/* Records a failure; the first one's text is kept, later ones counted. */
void hkv_fail(hkv_result_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets the detail of a passing check (ignored once failed). */
void hkv_note(hkv_result_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hkv_skip(hkv_result_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A NULL slot: the check reports "not supported" and calls nothing. */
void hkv_notsup(hkv_result_t *r, const char *slot);
/* Adds " (+N more)" to a failed detail with more than one failure. */
void hkv_finish(hkv_result_t *r);

/* Status name without prefix ("INVALID_VALUE"). */
const char *hkv_st(hk_status_t st);

/* One-line text rule: non-NULL, non-empty, no line break, under 1024 bytes.
 * 1 when it holds; else 0 and why. */
int hkv_text_ok(const char *s, char *why, size_t len);

/* 1 when text contains word as a whole identifier ("x" in "x is NULL"). */
int hkv_names(const char *text, const char *word);

/* A bounded copy of the handle's last_error (never NULL; "(null)" if it was). */
const char *hkv_last_error(const hkv_plugin_t *p, const hk_handle_t *h, char *buf, size_t len);

/* Creates a handle (info may be NULL); on failure records it in r, returns NULL. */
hk_handle_t *hkv_handle(const hkv_plugin_t *p, const hk_create_info_t *info, hkv_result_t *r);
/* Destroys h (NULL is a no-op); a failure is recorded in r. */
void hkv_destroy(const hkv_plugin_t *p, hk_handle_t *h, hkv_result_t *r);

/* Memory of the handle's device through hk.memory/1 (host memory for a
 * plugin without it whose memory is host memory). Return 0 or -1 (recorded). */
int hkv_can_move(const hkv_plugin_t *p);
void *hkv_dalloc(const hkv_plugin_t *p, hk_handle_t *h, size_t bytes, hkv_result_t *r);
void hkv_dfree(const hkv_plugin_t *p, hk_handle_t *h, void *ptr);
int hkv_put(const hkv_plugin_t *p, hk_handle_t *h, void *dst, const void *src, size_t bytes,
            hkv_result_t *r);
int hkv_get(const hkv_plugin_t *p, hk_handle_t *h, void *dst, const void *src, size_t bytes,
            hkv_result_t *r);

/* A page the process can neither read nor write (a "handle" nobody made). */
void *hkv_noaccess_page(void);

/* The index of the first byte of b[from, to) that is not pattern (a guard
 * the plugin must not write); to when every one still is. */
size_t hkv_guard_broken(const void *b, size_t from, size_t to, unsigned char pattern);

/* ---- hk.blas1/1 by op index (util.c) ---- */

/* The op families this program has rules for; HKV_OTHER: a slot of the
 * header's list that it has none for (checked for nothing but listed). */
typedef enum hkv_kind { HKV_AXPY, HKV_SCAL, HKV_COPY, HKV_DOT, HKV_NRM2, HKV_OTHER } hkv_kind_t;

typedef struct hkv_op {
    const char *name; /* "saxpy" */
    hkv_kind_t kind;  /* from the name: s or d, then the family */
    size_t esz;       /* 4 (s) or 8 (d) */
    size_t offset;    /* of its slot in hk_blas1_v1_t */
} hkv_op_t;

/* One op per slot of hk.blas1/1, in the order of HK_BLAS1_V1_SLOTS; kind and
 * esz are set by hkv_ops_init, which every register function calls. */
#define HKV_OP_ONE(name, minor, params, args) +1
enum { HKV_NOPS = 0 HK_BLAS1_V1_SLOTS(HKV_OP_ONE) };
extern hkv_op_t hkv_ops[HKV_NOPS];
void hkv_ops_init(void);

/* 1 when the op's slot is there. */
int hkv_op_present(const hkv_plugin_t *p, int op);
/* Calls op with the arguments it takes (the others ignored); an op of kind
 * HKV_OTHER is not called (HK_STATUS_NOT_SUPPORTED). */
hk_status_t hkv_call(const hkv_plugin_t *p, int op, hk_handle_t *h, int64_t n, const void *alpha,
                     const void *x, int64_t incx, void *y, int64_t incy, void *result);

/* One op on fresh vectors of n elements (checks_ops.c), verified against the
 * reference; seed varies the data. after_call (may be NULL) runs between the
 * op and reading back. 0, or -1 with the failure recorded. [handle-safe] use
 * from several threads is the point of it. */
int hkv_op_case(const hkv_plugin_t *p, hk_handle_t *h, int op, int dev, int64_t n, int64_t incx,
                int64_t incy, uint64_t seed, void (*after_call)(void), hkv_result_t *r);

/* Deterministic values in [-1, 1). */
double hkv_rand(uint64_t *state);

#endif /* HKV_H */
