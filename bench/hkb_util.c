/* hk-bench: failure recording, clocks, event timing and medians. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hkb.h"

#define HKB_MSG 512

/* A figure may fail in a worker thread; the first reason is the one that
 * explains the run, later ones are usually consequences of it. */
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static char fail_msg[HKB_MSG + 160];
static int fail_set;
static _Thread_local char where_msg[150];

void hkb_where(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where_msg, sizeof where_msg, fmt, ap);
    va_end(ap);
}

int hkb_fail(const char *fmt, ...)
{
    char line[HKB_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* Keep the reason on one line whatever a library put into its message. */
    for (char *c = line; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    pthread_mutex_lock(&fail_lock);
    if (!fail_set) {
        if (where_msg[0])
            snprintf(fail_msg, sizeof fail_msg, "%s: %s", where_msg, line);
        else
            snprintf(fail_msg, sizeof fail_msg, "%s", line);
        fail_set = 1;
    }
    pthread_mutex_unlock(&fail_lock);
    return -1;
}

const char *hkb_failure(void)
{
    const char *m;
    pthread_mutex_lock(&fail_lock);
    m = fail_set ? fail_msg : NULL;
    pthread_mutex_unlock(&fail_lock);
    return m;
}

static const char *base_name(const char *file)
{
    const char *s = strrchr(file, '/');
    return s ? s + 1 : file;
}

int hkb__cuda_ok(cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess)
        return 0;
    return hkb_fail("%s:%d: %s: %s (%s)", base_name(file), line, call, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

int hkb__cublas_ok(cublasStatus_t s, const char *call, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    return hkb_fail("%s:%d: %s: %s (%s)", base_name(file), line, call,
                    cublasGetStatusString(s), cublasGetStatusName(s));
}

double hkb_now_ns(void)
{
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail with a valid pointer; a zero would only
     * show as an absurd figure, never a crash. */
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double hkb_median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    if (n % 2)
        return v[n / 2];
    return 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int hkb_time_events(cudaStream_t stream, int warmup, int reps, hkb_work_fn fn, void *arg,
                    double *ms)
{
    int rc = -1, made = 0;
    cudaEvent_t *ev = NULL;
    double *t = NULL;

    if (reps < 1)
        return hkb_fail("hkb_time_events: reps %d < 1", reps);
    ev = calloc((size_t)reps * 2, sizeof *ev);
    t = calloc((size_t)reps, sizeof *t);
    if (!ev || !t) {
        hkb_fail("hkb_time_events: out of host memory");
        goto out;
    }
    for (; made < reps * 2; made++)
        HKB_CUDA(cudaEventCreate(&ev[made]), out);
    for (int i = 0; i < warmup; i++)
        HKB_TRY(fn(arg, i), out);
    HKB_CUDA(cudaStreamSynchronize(stream), out);
    /* All repetitions are queued before any is read back, so the host never
     * leaves a gap on the stream between two timed units. */
    for (int i = 0; i < reps; i++) {
        HKB_CUDA(cudaEventRecord(ev[2 * i], stream), out);
        HKB_TRY(fn(arg, warmup + i), out);
        HKB_CUDA(cudaEventRecord(ev[2 * i + 1], stream), out);
    }
    HKB_CUDA(cudaStreamSynchronize(stream), out);
    for (int i = 0; i < reps; i++) {
        float f = 0.0f;
        HKB_CUDA(cudaEventElapsedTime(&f, ev[2 * i], ev[2 * i + 1]), out);
        t[i] = f;
    }
    *ms = hkb_median(t, (size_t)reps);
    rc = 0;
out:
    for (int i = 0; i < made; i++)
        (void)cudaEventDestroy(ev[i]); /* cleanup: the first error is already kept */
    free(ev);
    free(t);
    return rc;
}

const char *hkb_fmt_n(int64_t n, char *buf, size_t len)
{
    if (n > 0 && (n & (n - 1)) == 0) {
        int k = 0;
        while ((INT64_C(1) << k) != n)
            k++;
        snprintf(buf, len, "2^%d", k);
    } else {
        snprintf(buf, len, "%" PRId64, n);
    }
    return buf;
}
