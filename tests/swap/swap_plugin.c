/* Test doubles for the swap tests: hk-cpu's own sources (their entry point
 * renamed to hk__swp_inner, see tests/swap/SConscript) behind this entry
 * point, which changes the answer by macros:
 *   SWP_NAME, SWP_VERSION  the answer's name and version
 *   SWP_WRONG_SAXPY        saxpy adds 1 to the first element it writes
 *   SWP_CREATE_FAILS       handle_create fails with OUT_OF_MEMORY
 *   SWP_ADD_FLAGS          flags added to the answer (memory-domain flags)
 *   SWP_INFO_DEVICE        handle_info reports this device (a GPU's, say)
 *   SWP_HOLD_SSCAL         sscal waits while the bits of x[0] are SWP_HOLD, so
 *                          that a test can keep a call in flight
 *   SWP_SLOW_FIRST_CREATE_MS  the first handle_create after the module was
 *                          loaded takes this long (as a driver that keeps a
 *                          first kernel load waiting would make it)
 *   SWP_SLOW_DESTROY_MS    every handle_destroy takes this long (as one that
 *                          waits for a long kernel in its context would)
 *   SWP_DESTROY_FAILS      handle_destroy destroys the handle and returns
 *                          HK_STATUS_INTERNAL
 *   SWP_KERNELS_LOAD_FAILS hk.kernels/1's load refuses every image with
 *                          HK_STATUS_NOT_SUPPORTED (as for an image without
 *                          code for the device); with hk-cuda inside
 *   SWP_NO_KERNELS         no hk.kernels/1 table; with hk-cuda inside
 *   SWP_LOG_SSCAL          sscal logs "swp-sscal NAME VERSION" through the
 *                          host's log callback before it computes, so that a
 *                          host callback runs inside a movable-handle call
 *   SWP_HANG_CREATE, SWP_HANG_DESTROY, SWP_HANG_TRIM
 *                          handle_create, handle_destroy or the trim of an
 *                          hk.trim/1 table of the double's own block in
 *                          read() on the descriptor that the environment
 *                          variable SWP_HANG names as "PID:FD", in that
 *                          process only (not in the probe process), until
 *                          the test writes a byte or closes the pipe; they
 *                          log "swp-hang NAME VERSION" before and
 *                          "swp-hung NAME VERSION" after the wait
 *   SWP_THREAD_EXIT_MS     handle_destroy leaves a thread-specific value
 *                          whose destructor, run when the calling thread
 *                          ends, takes this long in the plugin's code (as a
 *                          plugin's per-thread clean-up at thread exit would)
 * Every handle_create and handle_destroy logs "swp-create NAME VERSION" or
 * "swp-destroy NAME VERSION" at HK_LOG_DEBUG through the host's log callback,
 * so a test sees whether any code of the plugin ran. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hk_blas1.h"
#include "hk_kernels.h"
#include "hk_trim.h"

#ifndef SWP_NAME
#define SWP_NAME "hk-cpu"
#endif
#ifndef SWP_VERSION
#define SWP_VERSION "1.0.9"
#endif
#ifndef SWP_ADD_FLAGS
#define SWP_ADD_FLAGS 0u
#endif

hk_status_t hk__swp_inner(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans);

static const hk_vtable_t *inner;
static const hk_blas1_v1_t *inner_blas;
static hk_vtable_t vtable;
static hk_blas1_v1_t blas;
static hk_log_fn host_log;
static void *host_log_user;

static void say(const char *what)
{
    if (host_log)
        host_log(host_log_user, HK_LOG_DEBUG, what);
}

#if defined(SWP_SLOW_FIRST_CREATE_MS) || defined(SWP_SLOW_DESTROY_MS) || \
    defined(SWP_THREAD_EXIT_MS)
static void swp_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}
#endif

#if defined(SWP_HANG_CREATE) || defined(SWP_HANG_DESTROY) || defined(SWP_HANG_TRIM)
/* Blocks until the test releases the pipe that SWP_HANG names for this
 * process; returns at once without it. */
static void swp_hang(void)
{
    const char *spec = getenv("SWP_HANG");
    long pid = 0;
    int fd = -1;
    if (!spec || sscanf(spec, "%ld:%d", &pid, &fd) != 2 || pid != (long)getpid())
        return;
    say("swp-hang " SWP_NAME " " SWP_VERSION);
    char c;
    while (read(fd, &c, 1) < 0)
        ;
    say("swp-hung " SWP_NAME " " SWP_VERSION);
}
#endif

static hk_status_t swp_create(const hk_create_info_t *info, hk_handle_t **out)
{
    say("swp-create " SWP_NAME " " SWP_VERSION);
#ifdef SWP_HANG_CREATE
    swp_hang();
#endif
#ifdef SWP_CREATE_FAILS
    (void)info;
    if (out)
        *out = NULL;
    return HK_STATUS_OUT_OF_MEMORY;
#else
#ifdef SWP_SLOW_FIRST_CREATE_MS
    static int created;
    if (!__atomic_exchange_n(&created, 1, __ATOMIC_ACQ_REL))
        swp_sleep_ms(SWP_SLOW_FIRST_CREATE_MS);
#endif
    return inner->handle_create(info, out);
#endif
}

#ifdef SWP_THREAD_EXIT_MS
static pthread_key_t swp_exit_key;
static int swp_exit_key_made;
static pthread_once_t swp_exit_once = PTHREAD_ONCE_INIT;

/* Runs in the plugin's code as a thread that called handle_destroy ends. */
static void swp_thread_exit(void *value)
{
    (void)value;
    swp_sleep_ms(SWP_THREAD_EXIT_MS);
}

/* Made at the first destroy (a plugin runs no code when loaded), and never
 * deleted: the double lives in test processes that end soon after. */
static void swp_exit_key_make(void)
{
    swp_exit_key_made = pthread_key_create(&swp_exit_key, swp_thread_exit) == 0;
}
#endif

static hk_status_t swp_destroy(hk_handle_t *h)
{
#ifdef SWP_THREAD_EXIT_MS
    pthread_once(&swp_exit_once, swp_exit_key_make);
    if (swp_exit_key_made)
        pthread_setspecific(swp_exit_key, (void *)1);
#endif
    say("swp-destroy " SWP_NAME " " SWP_VERSION);
#ifdef SWP_HANG_DESTROY
    swp_hang();
#endif
#ifdef SWP_SLOW_DESTROY_MS
    swp_sleep_ms(SWP_SLOW_DESTROY_MS);
#endif
    hk_status_t st = inner->handle_destroy(h);
#ifdef SWP_DESTROY_FAILS
    if (st == HK_STATUS_OK)
        st = HK_STATUS_INTERNAL;
#endif
    return st;
}

#ifdef SWP_INFO_DEVICE
static hk_status_t swp_info(hk_handle_t *h, hk_handle_info_t *info)
{
    hk_status_t st = inner->handle_info(h, info);
    if (st == HK_STATUS_OK && info->size >= 8)
        info->device = SWP_INFO_DEVICE;
    return st;
}
#endif

#ifdef SWP_WRONG_SAXPY
static hk_status_t swp_saxpy(hk_handle_t *h, int64_t n, const float *alpha, const float *x,
                             int64_t incx, float *y, int64_t incy)
{
    hk_status_t st = inner_blas->saxpy(h, n, alpha, x, incx, y, incy);
    if (st == HK_STATUS_OK && n > 0)
        y[incy < 0 ? (1 - n) * incy : 0] += 1.0f;
    return st;
}
#endif

#ifdef SWP_HOLD_SSCAL
static hk_status_t swp_sscal(hk_handle_t *h, int64_t n, const float *alpha, float *x,
                             int64_t incx)
{
    while (n > 0 && x && __atomic_load_n((const uint32_t *)(void *)x, __ATOMIC_ACQUIRE) == SWP_HOLD)
        sched_yield();
    return inner_blas->sscal(h, n, alpha, x, incx);
}
#endif

#ifdef SWP_LOG_SSCAL
static hk_status_t swp_sscal(hk_handle_t *h, int64_t n, const float *alpha, float *x,
                             int64_t incx)
{
    say("swp-sscal " SWP_NAME " " SWP_VERSION);
    return inner_blas->sscal(h, n, alpha, x, incx);
}
#endif

#ifdef SWP_HANG_TRIM
static hk_status_t swp_trim(void)
{
    swp_hang();
    return HK_STATUS_OK;
}

static const hk_trim_v1_t trim_table = {sizeof(hk_trim_v1_t), swp_trim};
#endif

#ifdef SWP_KERNELS_LOAD_FAILS
static hk_kernels_v1_t kernels;

static hk_status_t swp_load(hk_handle_t *h, const void *image, size_t size, hk_library_t **out)
{
    (void)h, (void)image, (void)size;
    if (out)
        *out = NULL;
    return HK_STATUS_NOT_SUPPORTED;
}
#endif

static hk_status_t swp_get_table(const char *name, const void **table)
{
#ifdef SWP_NO_KERNELS
    if (name && table && strcmp(name, HK_TABLE_KERNELS_V1) == 0) {
        *table = NULL;
        return HK_STATUS_NOT_FOUND;
    }
#endif
#ifdef SWP_HANG_TRIM
    if (name && table && strcmp(name, HK_TABLE_TRIM_V1) == 0) {
        *table = &trim_table;
        return HK_STATUS_OK;
    }
#endif
    hk_status_t st = inner->get_table(name, table);
#ifdef SWP_KERNELS_LOAD_FAILS
    if (st == HK_STATUS_OK && name && strcmp(name, HK_TABLE_KERNELS_V1) == 0) {
        kernels = *(const hk_kernels_v1_t *)*table;
        kernels.load = swp_load;
        *table = &kernels;
    }
#endif
    if (st == HK_STATUS_OK && name && strcmp(name, HK_TABLE_BLAS1_V1) == 0) {
        inner_blas = *table;
        blas = *inner_blas;
#ifdef SWP_WRONG_SAXPY
        blas.saxpy = swp_saxpy;
#endif
#if defined(SWP_HOLD_SSCAL) || defined(SWP_LOG_SSCAL)
        blas.sscal = swp_sscal;
#endif
        *table = &blas;
    }
    return st;
}

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *req, hk_negotiate_answer_t *ans)
{
    hk_status_t st = hk__swp_inner(req, ans);
    if (st != HK_STATUS_OK)
        return st;
    host_log = req->log;
    host_log_user = req->log_user;
    inner = ans->vtable;
    vtable = *inner;
    vtable.handle_create = swp_create;
    vtable.handle_destroy = swp_destroy;
    vtable.get_table = swp_get_table;
#ifdef SWP_INFO_DEVICE
    vtable.handle_info = swp_info;
#endif
    ans->vtable = &vtable;
    ans->name = SWP_NAME;
    ans->version = SWP_VERSION;
    /* Only the domain the macro says: 0x2u | 0x4u are the ABI 1.2 memory-domain
     * flags, which hk-cpu may declare itself. */
    ans->flags = (ans->flags & ~(uint32_t)0x6u) | SWP_ADD_FLAGS;
    return st;
}
