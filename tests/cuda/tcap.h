/* hk-cuda under stream capture (docs/contexts.md, "Stream capture"): shared
 * set-up of test_cuda_capture.c (hk.blas1/1 and hk.memory/1, the handle's
 * stream set before or inside the capture, in each capture mode) and
 * test_cuda_capture_more.c (hk.kernels/1, movable handles, a capture on
 * another thread, a handle made during a capture).
 *
 * Every case checks that the capture is still active after each call of
 * the plugin and ends valid (cuStreamEndCapture succeeds), that the graph
 * replays with the right results, and that the caller's current context is
 * unchanged; a call that cannot be captured must return its documented
 * status with a reason that names the capture. The program runs against
 * the simulated driver in CI and against the real driver on a GPU. */
#ifndef TCAP_H
#define TCAP_H

#include <cuda.h>

#include "hk_kernels.h"
#include "hkct_context.h"

/* The capture mode of the case being run (each case runs in all three). */
extern CUstreamCaptureMode tcap_mode;
extern const char *const tcap_mode_names[3];

/* Device buffers and host values shared by the cases: x, y, z of TCAP_N
 * floats, r of 8 floats (device-mode results), alpha[2] = {2, 3} in device
 * memory. y starts at y0. */
#define TCAP_N 1000
typedef struct tcap_fix {
    hk_handle_t *h;
    CUcontext ctx;      /* current while the case runs (device 0's primary) */
    void *x, *y, *z, *r, *alpha;
    float hx[TCAP_N], hy0[TCAP_N];
} tcap_fix_t;

/* A handle on device 0 (bound to its primary, made current here) and the
 * buffers, in device pointer mode. 0 on success. */
int tcap_fix_up(tcap_fix_t *f);
void tcap_fix_down(tcap_fix_t *f);

/* tcap_fix_up and a non-blocking stream in *s, for the case to capture.
 * 0 on success. */
int tcap_fix_up_stream(tcap_fix_t *f, CUstream *s);

/* Undoes tcap_fix_up_stream: the handle's stream set back to NULL
 * (asserted), s destroyed, then tcap_fix_down. */
void tcap_fix_down_stream(tcap_fix_t *f, CUstream s);

/* Puts y back to y0 and r to zero (outside any capture). */
void tcap_fix_reset(tcap_fix_t *f);

/* Begins a capture of s in tcap_mode, asserting it started. */
void tcap_begin(CUstream s);

/* Asserts that s is still capturing and that expect is current: what every
 * call of the plugin must leave. */
#define TCAP_KEEP(s, expect) tcap_keep((s), (expect), __FILE__, __LINE__)
void tcap_keep(CUstream s, CUcontext expect, const char *file, int line);

/* Runs call (an hk_status_t expression), asserts it returned want, the
 * capture of s is intact and expect is current; prints h's message when the
 * status differs. */
#define TCAP_CALL(h, s, expect, call, want)                                           \
    tcap_call_check((h), (call), (want), #call, (s), (expect), __FILE__, __LINE__)
void tcap_call_check(hk_handle_t *h, hk_status_t got, hk_status_t want, const char *what,
                     CUstream s, CUcontext expect, const char *file, int line);

/* A refusal of a call that cannot be captured: NOT_SUPPORTED, a message
 * naming the capture, the capture intact. */
#define TCAP_REFUSED(h, s, expect, call)                                              \
    tcap_refused((h), (call), #call, (s), (expect), __FILE__, __LINE__)
void tcap_refused(hk_handle_t *h, hk_status_t got, const char *what, CUstream s,
                  CUcontext expect, const char *file, int line);

/* Ends the capture of s, asserting it was valid, and instantiates the graph.
 * Returns NULL (after asserting) when either failed. */
CUgraphExec tcap_end(CUstream s);

/* Launches x on s and waits for it. */
void tcap_replay(CUgraphExec x, CUstream s);

/* The blas1 sequence in device pointer mode on the handle's stream:
 * y += 2x; r[0] = x.y; r[1] = |x|; z = y; z *= 3 — each call checked with
 * TCAP_CALL against the capture of s. */
void tcap_blas_sequence(tcap_fix_t *f, CUstream s);

/* Checks the buffers after `rounds` runs of the sequence from y0. */
void tcap_blas_check(tcap_fix_t *f, int rounds);

/* Copies n floats of device memory p to host through the driver (on the
 * legacy stream, outside any capture). */
void tcap_read(float *host, const void *p, size_t n);

/* Defines fn_global, fn_thread and fn_relaxed: test functions that run the
 * case fn with tcap_mode set to each capture mode. */
#define TCAP_IN_MODES(fn)                                                    \
    static void fn##_global(void)                                          \
    {                                                                      \
        tcap_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;                         \
        fn();                                                              \
    }                                                                      \
    static void fn##_thread(void)                                          \
    {                                                                      \
        tcap_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;                   \
        fn();                                                              \
    }                                                                      \
    static void fn##_relaxed(void)                                         \
    {                                                                      \
        tcap_mode = CU_STREAM_CAPTURE_MODE_RELAXED;                        \
        fn();                                                              \
    }

/* Registers the cases of test_cuda_capture_more.c into suite s. */
void tcap_register_more(CU_pSuite s, const char *skip);

/* The hkt_axpy kernel of test_cuda_kernels_gpu.cu, as PTX (with its NUL). */
extern const unsigned char hkt__ptx[], hkt__ptx_end[];

#endif /* TCAP_H */
