/* hk-bench: P5 (8 threads, one handle each, one device, against raw
 * cuLaunchKernel of the same kernel from 8 threads, one stream each: the
 * driver's own ceiling, docs/contexts.md fact 21) and P6 (one handle on each
 * of 2 devices, against the sum of each device alone).
 *
 * Each worker thread makes its own lane (stream, hk handle, cuBLAS handle)
 * with its device current, checks its op once, then runs rounds between two
 * barriers that it shares with the main thread. The main thread's clock runs
 * from the release of the first barrier to the release of the second, and
 * each worker waits for its stream before it arrives there, so a round's
 * time covers the enqueueing and the GPU work of every thread. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkb.h"

#define P5_TARGET 0.95
#define P5_THREADS 8
#define P5_N (INT64_C(1) << 12)
#define P6_TARGET 0.9
#define P6_N (INT64_C(1) << 28)
#define MAX_ROUNDS 16

typedef struct job {
    const char *fig; /* "P5" or "P6", for messages */
    const hkb_plugin_t *plug;
    int index;
    int device;
    hkb_impl_t impl;
    int raw; /* raw cuLaunchKernel of hk-cuda's kernel instead of impl */
    hkb_op_t op;
    hkb_prec_t prec;
    int64_t n;
    int calls;  /* per round */
    int rounds;
    pthread_barrier_t *bar;
    double err; /* verification's relative error */
} job_t;

/* Both barriers of every round are always reached, even by a worker whose
 * set-up failed, so that a failure cannot leave the others waiting. */
static void *worker(void *arg)
{
    job_t *j = arg;
    size_t bytes = (size_t)j->n * hkb_prec_size(j->prec);
    unsigned char *buf[4] = {NULL, NULL, NULL, NULL};
    hkb_lane_t lane;
    hkb_raw_scratch_t scratch = {0};
    hkb_raw_t raw;
    int up = 0, ok = 0, sms = 0;

    hkb_where("%s thread %d (device %d, %s)", j->fig, j->index, j->device,
              j->raw ? "raw launch" : j->impl == HKB_HK ? "hk" : "cuBLAS");
    if (hkb_lane_init(&lane, j->plug, j->device) != 0)
        goto ready;
    up = 1;
    for (int i = 0; i < 4; i++)
        HKB_CUDA(cudaMalloc((void **)&buf[i], bytes), ready);
    HKB_TRY(hkb_fill_random(buf[0], j->prec, j->n, 10 + (uint64_t)j->index), ready);
    HKB_TRY(hkb_fill_random(buf[1], j->prec, j->n, 20 + (uint64_t)j->index), ready);
    HKB_TRY(hkb_lane_set_alpha(&lane, 0.999), ready);
    HKB_TRY(hkb_lane_set_mode(&lane, HK_POINTER_MODE_DEVICE), ready);
    HKB_TRY(hkb_verify(&lane, j->op, j->prec, j->n, buf[0], buf[1], buf[2], buf[3], &j->err),
            ready);
    if (j->raw) {
        /* the launch hk-cuda makes, with scratch of this thread's own */
        HKB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, j->device), ready);
        HKB_TRY(hkb_raw_scratch_alloc(&scratch, lane.alpha_f, lane.alpha_d), ready);
        HKB_TRY(hkb_raw_prepare(&raw, j->op, j->prec, j->n, buf[0], buf[1], &scratch, sms,
                                lane.alpha_f, lane.alpha_d),
                ready);
    }
    /* Warm-up: first launches in a context load code lazily. */
    for (int i = 0; i < 20; i++)
        HKB_TRY(j->raw ? hkb_raw_launch(&raw, lane.stream)
                       : hkb_call(&lane, j->impl, j->op, j->prec, j->n, buf[0], buf[1]),
                ready);
    HKB_CUDA(cudaStreamSynchronize(lane.stream), ready);
    ok = 1;
ready:
    for (int r = 0; r < j->rounds; r++) {
        pthread_barrier_wait(j->bar);
        for (int i = 0; ok && i < j->calls; i++)
            if ((j->raw ? hkb_raw_launch(&raw, lane.stream)
                        : hkb_call(&lane, j->impl, j->op, j->prec, j->n, buf[0], buf[1])) != 0)
                ok = 0;
        if (ok && hkb__cuda_ok(cudaStreamSynchronize(lane.stream), "cudaStreamSynchronize",
                               __FILE__, __LINE__) != 0)
            ok = 0;
        pthread_barrier_wait(j->bar);
    }
    for (int i = 0; i < 4; i++)
        if (buf[i])
            (void)hkb__cuda_ok(cudaFree(buf[i]), "cudaFree", __FILE__, __LINE__);
    hkb_raw_scratch_free(&scratch);
    if (up)
        hkb_lane_fini(&lane);
    return NULL;
}

/* Runs one worker per job for jobs[0].rounds rounds and writes the median
 * round time in seconds to *sec. Returns 0, or -1 when any worker failed. */
static int run_group(job_t *jobs, int njobs, double *sec)
{
    pthread_t tid[P5_THREADS];
    pthread_barrier_t *bar = malloc(sizeof *bar);
    int started = 0, rounds = jobs[0].rounds, rc = -1;
    double t[MAX_ROUNDS];

    if (!bar)
        return hkb_fail("run_group: out of host memory");
    if (njobs > P5_THREADS || rounds > MAX_ROUNDS) {
        free(bar);
        return hkb_fail("run_group: %d jobs, %d rounds: too many", njobs, rounds);
    }
    if (pthread_barrier_init(bar, NULL, (unsigned)njobs + 1) != 0) {
        free(bar);
        return hkb_fail("pthread_barrier_init failed");
    }
    for (; started < njobs; started++) {
        jobs[started].bar = bar;
        if (pthread_create(&tid[started], NULL, worker, &jobs[started]) != 0) {
            hkb_fail("pthread_create failed");
            break;
        }
    }
    if (started < njobs) {
        /* Workers already running wait on a barrier of njobs + 1 that they
         * can never pass: they cannot be joined, and the barrier must stay
         * valid under them, so it is left allocated. The run ends here. */
        return -1;
    }
    for (int r = 0; r < rounds; r++) {
        pthread_barrier_wait(bar);
        double t0 = hkb_now_ns();
        pthread_barrier_wait(bar);
        t[r] = (hkb_now_ns() - t0) / 1e9;
    }
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(bar);
    free(bar);
    if (hkb_failure())
        goto out;
    *sec = hkb_median(t, (size_t)rounds);
    rc = 0;
out:
    return rc;
}

static void job_fill(job_t *j, const char *fig, const hkb_plugin_t *p, int index, int device, hkb_impl_t impl,
                     hkb_op_t op, int64_t n, int calls, int rounds)
{
    memset(j, 0, sizeof *j);
    j->fig = fig;
    j->plug = p;
    j->index = index;
    j->device = device;
    j->impl = impl;
    j->op = op;
    j->prec = HKB_F32;
    j->n = n;
    j->calls = calls;
    j->rounds = rounds;
    j->err = NAN;
}

/* Rate of nthreads workers on one device, in calls per second: through impl,
 * or raw launches of the same kernel when raw is set. */
static int p5_rate(const hkb_plugin_t *p, const hkb_opts_t *o, hkb_impl_t impl, int raw,
                   hkb_op_t op, int nthreads, double *rate, double *err)
{
    job_t jobs[P5_THREADS];
    int calls = o->quick ? 3000 : 20000, rounds = o->quick ? 3 : 7;
    double sec = 0.0;

    for (int i = 0; i < nthreads; i++) {
        job_fill(&jobs[i], "P5", p, i, o->device, impl, op, P5_N, calls, rounds);
        jobs[i].raw = raw;
    }
    HKB_TRY(run_group(jobs, nthreads, &sec), fail);
    *rate = (double)nthreads * calls / sec;
    for (int i = 0; i < nthreads; i++)
        if (!(jobs[i].err <= *err) || isnan(*err))
            *err = jobs[i].err;
    return 0;
fail:
    return -1;
}

int hkb_fig_threads(const hkb_plugin_t *p, const hkb_opts_t *o)
{
    static const hkb_op_t ops[] = {HKB_AXPY, HKB_DOT};

    HKB_TRY(hkb_raw_init(), fail);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        double raw = 0.0, hk = 0.0, cublas = 0.0, one = 0.0, err = NAN;
        hkb_row_t row;
        /* all in the same run, one after the other */
        HKB_TRY(p5_rate(p, o, HKB_HK, 1, ops[k], P5_THREADS, &raw, &err), fail);
        HKB_TRY(p5_rate(p, o, HKB_HK, 0, ops[k], P5_THREADS, &hk, &err), fail);
        HKB_TRY(p5_rate(p, o, HKB_CUBLAS, 0, ops[k], P5_THREADS, &cublas, &err), fail);
        HKB_TRY(p5_rate(p, o, HKB_HK, 0, ops[k], 1, &one, &err), fail);
        hkb_row_set(&row, "P5", hkb_op_name(ops[k]), "f32", P5_N, "calls/s", hk, raw,
                    HKB_TARGET_RATIO_GE, P5_TARGET);
        row.cublas = cublas / raw;
        row.err = err;
        snprintf(row.note, sizeof row.note, "ref = raw, 8 thr; hk 1 thr %.0f/s", one);
        HKB_TRY(hkb_report_add(&row), fail);
    }
    return 0;
fail:
    return -1;
}

/* Bandwidth in GB/s of saxpy at P6_N on the given devices at once. */
static int p6_gbs(const hkb_plugin_t *p, const hkb_opts_t *o, hkb_impl_t impl,
                  const int *devs, int ndevs, double *gbs, double *err)
{
    job_t jobs[2];
    int calls = o->quick ? 8 : 20, rounds = o->quick ? 3 : 5;
    double sec = 0.0;

    for (int i = 0; i < ndevs; i++)
        job_fill(&jobs[i], "P6", p, i, devs[i], impl, HKB_AXPY, P6_N, calls, rounds);
    HKB_TRY(run_group(jobs, ndevs, &sec), fail);
    *gbs = (double)ndevs * calls * hkb_op_bytes(HKB_AXPY, HKB_F32, P6_N) / sec / 1e9;
    for (int i = 0; i < ndevs; i++)
        if (!(jobs[i].err <= *err) || isnan(*err))
            *err = jobs[i].err;
    return 0;
fail:
    return -1;
}

int hkb_fig_devices(const hkb_plugin_t *p, const hkb_opts_t *o)
{
    static const int d0[] = {0}, d1[] = {1}, both[] = {0, 1};
    double s0[2], s1[2], agg[2], err = NAN;
    hkb_row_t row;

    for (int i = 0; i < 2; i++) {
        hkb_impl_t impl = i == 0 ? HKB_HK : HKB_CUBLAS;
        HKB_TRY(p6_gbs(p, o, impl, d0, 1, &s0[i], &err), fail);
        HKB_TRY(p6_gbs(p, o, impl, d1, 1, &s1[i], &err), fail);
        HKB_TRY(p6_gbs(p, o, impl, both, 2, &agg[i], &err), fail);
    }
    hkb_row_set(&row, "P6", "axpy", "f32", P6_N, "GB/s", agg[0], s0[0] + s1[0],
                HKB_TARGET_RATIO_GE, P6_TARGET);
    row.cublas = agg[1] / (s0[1] + s1[1]);
    row.err = err;
    snprintf(row.note, sizeof row.note, "2 dev; alone %.0f + %.0f GB/s", s0[0], s1[0]);
    return hkb_report_add(&row);
fail:
    return -1;
}
