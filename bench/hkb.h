/* hk-bench internals: shared types, check macros and the functions each figure
 * file uses. The figures themselves are defined in docs/targets.md; bench/README.md
 * explains the columns. hk-bench is test equipment: it links the CUDA runtime
 * and cuBLAS to measure hk-cuda side by side with them in one process. */
#ifndef HKB_H
#define HKB_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "hk_abi.h"
#include "hk_blas1.h"
#include "hk_memory.h"

/* ---- errors (hkb_util.c) ------------------------------------------------- */

/* Sets the calling thread's "where" prefix of later failures, e.g.
 * "P1 axpy f32 n=2^26". Empty string clears it. */
void hkb_where(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Records a failure (the first one of the process wins, later ones are kept
 * only when none was recorded) and returns -1. [thread-safe] */
int hkb_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The first recorded failure as one line, or NULL when none. */
const char *hkb_failure(void);

int hkb__cuda_ok(cudaError_t e, const char *call, const char *file, int line);
int hkb__cublas_ok(cublasStatus_t s, const char *call, const char *file, int line);

/* Each macro runs call, and on failure records a one-line reason naming the
 * call and jumps to label. */
#define HKB_CUDA(call, label)                                                  \
    do {                                                                       \
        if (hkb__cuda_ok((call), #call, __FILE__, __LINE__) != 0)              \
            goto label;                                                        \
    } while (0)
#define HKB_CUBLAS(call, label)                                                \
    do {                                                                       \
        if (hkb__cublas_ok((call), #call, __FILE__, __LINE__) != 0)            \
            goto label;                                                        \
    } while (0)
/* For hk-bench's own functions, which return 0 or -1 after recording why. */
#define HKB_TRY(call, label)                                                   \
    do {                                                                       \
        if ((call) != 0)                                                       \
            goto label;                                                        \
    } while (0)

/* ---- timing and statistics (hkb_util.c) ----------------------------------- */

/* Monotonic host clock in nanoseconds. */
double hkb_now_ns(void);

/* Median of v[0..n-1] (v is reordered). n == 0 gives 0. */
double hkb_median(double *v, size_t n);

/* One timed unit of work, issued on the stream given to hkb_time_events. rep
 * counts from 0 over warm-up and timed repetitions alike. Returns 0 or -1. */
typedef int (*hkb_work_fn)(void *arg, int rep);

/* Runs fn warmup times untimed, then reps times, each between two CUDA events
 * on stream, and writes the median milliseconds to *ms. Returns 0 or -1. */
int hkb_time_events(cudaStream_t stream, int warmup, int reps, hkb_work_fn fn, void *arg,
                    double *ms);

/* "2^26" for a power of two, the decimal number otherwise. */
const char *hkb_fmt_n(int64_t n, char *buf, size_t len);

/* ---- the plugin (hkb_plugin.c) -------------------------------------------- */

typedef struct hkb_plugin {
    void *dl;
    char path[4096];
    const char *name;
    const char *version;
    uint32_t abi;
    hk_vtable_t vt;     /* min(plugin's size, sizeof) copied into zeros */
    hk_blas1_v1_t blas; /* likewise */
    hk_memory_v1_t mem;
} hkb_plugin_t;

/* Finds the default plugin file: next to the program (../plugins/hk-cuda.so)
 * or the build's plugin directory relative to the working directory. */
const char *hkb_plugin_default_path(char *buf, size_t len);

/* dlopens path with local binding, negotiates ABI 1.0..current, copies the
 * vtable and the two tables, and checks that every slot the bench calls is
 * there. Returns 0 or -1. Makes no CUDA call (the plugin makes none either). */
int hkb_plugin_open(hkb_plugin_t *p, const char *path);
void hkb_plugin_close(hkb_plugin_t *p);

/* Records "what: STATUS_NAME: plugin's last error" and returns -1 when st is
 * not OK; returns 0 otherwise. h may be NULL (a failed create). */
int hkb_hk_ok(const hkb_plugin_t *p, hk_handle_t *h, hk_status_t st, const char *what);

/* ---- lanes: one stream, one hk handle, one cuBLAS handle (hkb_lane.c) ----- */

typedef enum { HKB_AXPY, HKB_SCAL, HKB_COPY, HKB_DOT, HKB_NRM2, HKB_OP_COUNT } hkb_op_t;
typedef enum { HKB_F32, HKB_F64, HKB_PREC_COUNT } hkb_prec_t;
typedef enum { HKB_HK, HKB_CUBLAS } hkb_impl_t;

typedef struct hkb_lane {
    const hkb_plugin_t *plug;
    int device;
    cudaStream_t stream;
    hk_handle_t *hk;
    cublasHandle_t cublas;
    hk_pointer_mode_t mode;
    /* Device scalars, allocated through hk.memory/1: alpha as float and
     * double, then a float and a double result. */
    unsigned char *dev_scalars;
    float alpha_f;
    double alpha_d;
    float result_f;
    double result_d;
} hkb_lane_t;

const char *hkb_op_name(hkb_op_t op);
const char *hkb_prec_name(hkb_prec_t prec);
size_t hkb_prec_size(hkb_prec_t prec);
int hkb_op_is_reduction(hkb_op_t op);

/* Bytes an op moves through memory: every element read plus every element
 * written, the way the D2D copy reference is counted. */
double hkb_op_bytes(hkb_op_t op, hkb_prec_t prec, int64_t n);

/* Makes the lane on device: sets the device current (so the hk handle binds
 * to its primary context, as the contract's default says), a non-blocking
 * stream, both handles on that stream, pointer mode host, alpha = 1. */
int hkb_lane_init(hkb_lane_t *lane, const hkb_plugin_t *plug, int device);
void hkb_lane_fini(hkb_lane_t *lane);

/* Sets the pointer mode of both handles. */
int hkb_lane_set_mode(hkb_lane_t *lane, hk_pointer_mode_t mode);

/* Sets alpha for later axpy/scal calls, on the host and on the device. */
int hkb_lane_set_alpha(hkb_lane_t *lane, double alpha);

/* Issues one op through impl on the lane's stream with unit increments. scal
 * scales y; axpy: y += alpha x; copy: y := x; dot: x.y; nrm2: |x|. Results go
 * to the lane's result slot of the pointer mode in effect. */
int hkb_call(hkb_lane_t *lane, hkb_impl_t impl, hkb_op_t op, hkb_prec_t prec, int64_t n,
             const void *x, void *y);

/* Checks op once against cuBLAS in the lane's pointer mode: the vector ops
 * run on copies of y in w (hk) and r (cuBLAS), both at least n elements;
 * x and y are unchanged. Writes the relative error to *err and records a
 * failure when it exceeds the tolerance of the op. */
int hkb_verify(hkb_lane_t *lane, hkb_op_t op, hkb_prec_t prec, int64_t n, const void *x,
               const void *y, void *w, void *r, double *err);

/* Fills n elements at dev with uniform values in [0.5, 1.5) of prec, seeded,
 * through a random host block tiled by device copies. Synchronous. */
int hkb_fill_random(void *dev, hkb_prec_t prec, int64_t n, uint64_t seed);

/* ---- raw launches of hk-cuda's kernels (hkb_raw.c) -------------------------- */

/* Device scratch of raw launches: alpha (float, double), the result (one
 * double wide), the reductions' counter, and their partials. One per stream
 * that reductions run on at once: they must not share it. */
#define HKB_RAW_SCRATCH_BYTES (64 + 3 * 1024 * sizeof(double))
typedef struct hkb_raw_scratch {
    unsigned char *base;
    float *alpha_f;
    double *alpha_d;
    void *result;
    unsigned int *counter;
    double *partials;
} hkb_raw_scratch_t;

/* One raw launch, ready to repeat: function, grid and the parameter array,
 * which points into the struct itself (do not copy a prepared one). */
typedef struct hkb_raw {
    void *fn; /* CUfunction */
    hkb_op_t op;
    hkb_prec_t prec;
    unsigned grid;
    long long n, incx, incy;
    float alpha_f;
    double alpha_d;
    const void *alpha_ptr, *x, *y, *partials, *counter, *result;
    void *params[8];
} hkb_raw_t;

/* Takes the driver entry points and loads the embedded fatbin, once per
 * process. [thread-safe] Returns 0 or -1. */
int hkb_raw_init(void);

/* Allocates and clears scratch on the current device, alpha set. */
int hkb_raw_scratch_alloc(hkb_raw_scratch_t *s, float alpha_f, double alpha_d);
void hkb_raw_scratch_free(hkb_raw_scratch_t *s);

/* Prepares the launch hk-cuda makes for op in device pointer mode with unit
 * increments: the kernel's function in the current context, hk-cuda's grid
 * for n on a device of sms SMs, x and y, the scratch's alpha and result. */
int hkb_raw_prepare(hkb_raw_t *r, hkb_op_t op, hkb_prec_t prec, int64_t n, const void *x,
                    void *y, const hkb_raw_scratch_t *s, int sms, float alpha_f, double alpha_d);

/* One cuLaunchKernel of r on stream. Returns 0 or -1 (reason recorded). */
int hkb_raw_launch(hkb_raw_t *r, cudaStream_t stream);

/* The same as hk-cuda launches it: cuLaunchKernelEx allowing programmatic
 * stream serialization. Returns 0 or -1 (reason recorded). */
int hkb_raw_launch_pdl(hkb_raw_t *r, cudaStream_t stream);

/* Records "what: CUDA_ERROR_NAME (code)" and returns -1 for a CUresult r that
 * is not CUDA_SUCCESS; 0 otherwise. */
int hkb_raw_cu_ok(int r, const char *what);

/* The driver entry point name of the given CUDA version, through the
 * runtime. Returns 0, or -1 with the reason recorded. */
int hkb_raw_entry(const char *name, int version, void **fn);

/* ---- the floor of P8 (hkb_floor.c) ------------------------------------------ */

typedef struct hkb_floor {
    double load_us, load_max_us;     /* load + every kernel's function: median, max */
    double unload_us, unload_max_us; /* cuLibraryUnload */
    unsigned kernels;
    int lazy; /* the driver loads modules lazily (CUDA_MODULE_LOADING) */
} hkb_floor_t;

/* reps times, in the current context with nothing else running: loads the
 * embedded kernels fatbin (hk-cuda's, the same bytes in both builds) with
 * cuLibraryLoadData and takes every kernel's CUfunction in the context
 * (cuLibraryEnumerateKernels, cuKernelGetFunction), timed from the load
 * call until the last function is there; then cuLibraryUnload, timed apart.
 * Returns 0 or -1. */
int hkb_load_floor(int reps, hkb_floor_t *f);

/* ---- rows and output (hkb_report.c) ---------------------------------------- */

typedef enum {
    HKB_TARGET_NONE,     /* informational */
    HKB_TARGET_RATIO_GE, /* ok when ratio >= target */
    HKB_TARGET_RATIO_LE, /* ok when ratio <= target */
    HKB_TARGET_VALUE_LE, /* ok when the hk value <= target (same unit) */
    HKB_TARGET_EXTRA_LE  /* ok when hk - ref <= target (same unit) */
} hkb_target_kind_t;

typedef struct hkb_row {
    char id[8];
    char op[32];
    char prec[8];
    char n[16];
    char unit[12];
    double hk;
    double ref;
    double ratio;
    hkb_target_kind_t kind;
    double target;
    double cublas; /* cuBLAS's value of the same ratio, NAN when none */
    double err;    /* relative error of the verification, NAN when none */
    char note[48];
} hkb_row_t;

/* Fills the common fields; ratio = hk / ref. */
void hkb_row_set(hkb_row_t *row, const char *id, const char *op, const char *prec, int64_t n,
                 const char *unit, double hk, double ref, hkb_target_kind_t kind, double target);

/* Prints the row now and keeps it for the summary and the CSV. Returns 0 or -1
 * (out of memory). [not-concurrent] */
int hkb_report_add(const hkb_row_t *row);
void hkb_report_header(void);
size_t hkb_report_count(void);
/* Prints "summary: ..." and returns the number of MISS rows. */
int hkb_report_summary(void);
int hkb_report_csv(const char *path);
void hkb_report_free(void);

/* ---- figures ----------------------------------------------------------------- */

typedef struct hkb_opts {
    int quick;
    int device;       /* the device of P1..P5, P8, P9 */
    const char *only; /* NULL: all; else "P1,P3" */
    /* P8's rows for a plugin without hk.blas1/1: two builds of hk-example
     * (examples/hk-example), or NULL: none. */
    const char *example_a, *example_b;
    /* P8's swaps: hk_swap_options_t.hold_after_us and .hold_max_us (0: the
     * loader's defaults; negative: never hold, no limit). */
    long long hold_after_us, hold_max_us;
} hkb_opts_t;

/* ---- the enqueue method of P3 and P9 (hkb_enqueue.c) ------------------------ */

#define HKB_ENQ_N (INT64_C(1) << 12) /* vector length of P3 and P9 */
#define HKB_ENQ_BATCH 256            /* calls per timed batch: below the queue's depth */
#define HKB_ENQ_MAX_IMPLS 4

/* One implementation to time: a raw cuLaunchKernel of the prepared launch on
 * the lane's stream (raw HKB_ENQ_RAW), the same launch as hk-cuda makes it
 * (HKB_ENQ_RAW_PDL), or impl through the lane's handle (raw 0). */
#define HKB_ENQ_RAW 1
#define HKB_ENQ_RAW_PDL 2
typedef struct hkb_enq_impl {
    hkb_lane_t *lane;
    int raw;
    hkb_impl_t impl;
} hkb_enq_impl_t;

/* Device vectors of HKB_ENQ_N doubles (x, y and two scratch copies), the raw
 * launch's scratch, the device's SM count and the repetitions (--quick). */
typedef struct hkb_enq {
    int sms, reps;
    unsigned char *x, *y, *w, *v;
    hkb_raw_scratch_t s;
} hkb_enq_t;

/* Allocates *e on lane's device and sets the lane to device pointer mode.
 * On failure what was made is kept for hkb_enq_teardown. Returns 0 or -1. */
int hkb_enq_setup(hkb_lane_t *lane, const hkb_opts_t *o, hkb_enq_t *e);
/* Waits for the lane's stream and frees *e (also after a failed set-up). */
void hkb_enq_teardown(hkb_lane_t *lane, hkb_enq_t *e);
/* Random x and y of prec. */
int hkb_enq_fill(hkb_enq_t *e, hkb_prec_t prec);
/* Prepares the raw launch of op (hkb_raw_prepare), checks that it works, and
 * checks the lane's hk op against cuBLAS (relative error in *err). */
int hkb_enq_prepare(hkb_lane_t *lane, hkb_enq_t *e, hkb_op_t op, hkb_prec_t prec, hkb_raw_t *r,
                    double *err);
/* Interleaved batches of the n implementations (two warm-up batches, then
 * e->reps each, the order of the n reversed every other round); med[k] is
 * the median host ns per call of impls[k]. With diff not NULL, diff[i] is
 * round i's ns per call of impls[n - 1] minus impls[n - 2] (e->reps values):
 * the two measured side by side in the same round. */
int hkb_enq_medians(const hkb_enq_impl_t *impls, int n, hkb_raw_t *r, hkb_op_t op,
                    hkb_prec_t prec, const hkb_enq_t *e, double *med, double *diff);

int hkb_fig_stream(hkb_lane_t *lane, const hkb_opts_t *o, int want_p1, int want_p2); /* P1, P2 */
int hkb_fig_enqueue(hkb_lane_t *lane, const hkb_opts_t *o);                          /* P3 */
int hkb_fig_handles(const hkb_plugin_t *plug, const hkb_opts_t *o);                  /* P4 */
int hkb_fig_threads(const hkb_plugin_t *plug, const hkb_opts_t *o);                  /* P5 */
int hkb_fig_devices(const hkb_plugin_t *plug, const hkb_opts_t *o);                  /* P6 */
int hkb_fig_kernels(hkb_lane_t *lane, const hkb_opts_t *o);                          /* P10 */
int hkb_fig_moved_calls(hkb_lane_t *lane, const hkb_opts_t *o);                      /* P9 */
/* P8: swaps between the builds at path_a and path_b under 8 calling threads;
 * it loads both with a loader of its own, and no other loader should hold
 * either (the module left behind is then really closed and reopened). */
int hkb_fig_swap(const char *path_a, const char *path_b, const hkb_opts_t *o);       /* P8 */

/* The second build of hk-cuda for P8 (hkb_swap.c): next to the program
 * (../tests/swap_plugins/hk-cuda-1.0.1.so) or below the working directory. */
const char *hkb_plugin_b_default_path(char *buf, size_t len);

#endif /* HKB_H */
