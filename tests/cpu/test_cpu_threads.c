/* hk-cpu's [handle-safe] promise: 8 threads on one handle call every slot
 * that takes a handle, with every result checked, while they change its
 * pointer mode, make calls fail and read the failures back through
 * last_error_copy; and last_error_copy(NULL) stays each thread's own. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hk_test.h"
#include "tcpu.h"

#define THREADS 8
#define ITERS 200
#define N 256

static hk_handle_t *shared;

typedef struct worker {
    int id;
    int errors;
    char first[200]; /* the first wrong thing seen, for the failure message */
} worker_t;

static void wrong(worker_t *w, const char *what, int it)
{
    if (!w->errors++)
        snprintf(w->first, sizeof w->first, "thread %d, iteration %d: %s", w->id, it, what);
}

#define EXPECT(cond, what)                                                          \
    do {                                                                            \
        if (!(cond))                                                                \
            wrong(w, what, it);                                                     \
    } while (0)

/* Level-1 ops on the thread's own vectors, each result checked exactly
 * (small integers: every sum and product is exact in float and double). */
static void blas_round(worker_t *w, int it)
{
    float x[N], y[N], y0[N], r = -1, a = 2;
    double dx[N], dy[N], dr = -1, da = -3;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 7 - 3 + w->id);
        y0[i] = y[i] = (float)(i % 5 + it % 3);
        dx[i] = x[i];
        dy[i] = y[i];
    }
    EXPECT(blas->saxpy(shared, N, &a, x, 1, y, 1) == HK_STATUS_OK, "saxpy status");
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += y[i] != y0[i] + 2 * x[i];
    EXPECT(!bad, "saxpy result");
    /* daxpy over every other x into y walked backwards. */
    EXPECT(blas->daxpy(shared, N / 2, &da, dx, 2, dy, -1) == HK_STATUS_OK, "daxpy status");
    bad = 0;
    for (int i = 0; i < N / 2; i++)
        bad += dy[N / 2 - 1 - i] != (double)y0[N / 2 - 1 - i] - 3 * dx[2 * i];
    EXPECT(!bad, "daxpy result");
    EXPECT(blas->scopy(shared, N, x, 1, y, 1) == HK_STATUS_OK && !memcmp(x, y, sizeof x),
           "scopy");
    EXPECT(blas->dcopy(shared, N, dx, -1, dy, -1) == HK_STATUS_OK && !memcmp(dx, dy, sizeof dx),
           "dcopy");
    double want = 0;
    for (int i = 0; i < N; i++)
        want += (double)x[i] * x[i];
    EXPECT(blas->sdot(shared, N, x, 1, y, 1, &r) == HK_STATUS_OK && r == (float)want, "sdot");
    EXPECT(blas->ddot(shared, N, dx, 1, dy, 1, &dr) == HK_STATUS_OK && dr == want, "ddot");
    EXPECT(blas->snrm2(shared, N, x, 1, &r) == HK_STATUS_OK &&
               fabs(r - sqrt(want)) <= 1e-6 * sqrt(want), "snrm2");
    EXPECT(blas->dnrm2(shared, N, dx, 1, &dr) == HK_STATUS_OK &&
               fabs(dr - sqrt(want)) <= 1e-14 * sqrt(want), "dnrm2");
    EXPECT(blas->sscal(shared, N, &a, y, 1) == HK_STATUS_OK && y[N - 1] == 2 * x[N - 1], "sscal");
    EXPECT(blas->dscal(shared, N / 2, &da, dy, 2) == HK_STATUS_OK && dy[2] == -3 * dx[2] &&
               dy[1] == dx[1], "dscal");
}

/* The core slots and hk.memory/1. */
static void core_round(worker_t *w, int it)
{
    hk_pointer_mode_t mode = (it + w->id) % 2 ? HK_POINTER_MODE_DEVICE : HK_POINTER_MODE_HOST;
    EXPECT(vt->set_pointer_mode(shared, mode) == HK_STATUS_OK, "set_pointer_mode");
    hk_pointer_mode_t got = (hk_pointer_mode_t)-1;
    EXPECT(vt->get_pointer_mode(shared, &got) == HK_STATUS_OK &&
               (got == HK_POINTER_MODE_HOST || got == HK_POINTER_MODE_DEVICE),
           "get_pointer_mode");
    void *s = (void *)w;
    EXPECT(vt->set_stream(shared, NULL) == HK_STATUS_OK, "set_stream");
    EXPECT(vt->get_stream(shared, &s) == HK_STATUS_OK && s == NULL, "get_stream");
    hk_handle_info_t info = {.size = sizeof info};
    EXPECT(vt->handle_info(shared, &info) == HK_STATUS_OK && info.size == sizeof info &&
               strcmp(info.plugin_name, "hk-cpu") == 0, "handle_info");
    EXPECT(vt->synchronize(shared) == HK_STATUS_OK, "synchronize");

    unsigned char src[100], back[100];
    for (int i = 0; i < 100; i++)
        src[i] = (unsigned char)(i + w->id);
    void *d = NULL;
    EXPECT(mem->alloc(shared, sizeof src, &d) == HK_STATUS_OK && d, "alloc");
    if (!d)
        return;
    EXPECT(mem->copy_to_device(shared, d, src, sizeof src) == HK_STATUS_OK, "copy_to_device");
    EXPECT(mem->memset_(shared, d, w->id, 10) == HK_STATUS_OK, "memset_");
    EXPECT(mem->copy_to_host(shared, back, d, sizeof back) == HK_STATUS_OK, "copy_to_host");
    EXPECT(back[9] == w->id && back[10] == src[10] && back[99] == src[99], "memory contents");
    EXPECT(mem->free_(shared, d) == HK_STATUS_OK, "free_");
}

/* A failing call, then its line read back: whichever thread's failure is the
 * handle's last, the copy is one whole line of one of them, never a mix. */
static void error_round(worker_t *w, int it)
{
    float y[8] = {0}, a = 1;
    EXPECT(blas->saxpy(shared, w->id + 1, &a, NULL, 1, y, 1) == HK_STATUS_NULL_POINTER,
           "failing saxpy");
    char buf[128], again[128];
    size_t needed = 0;
    int n = -1;
    EXPECT(vt->last_error_copy(shared, buf, sizeof buf, &needed) == HK_STATUS_OK,
           "last_error_copy status");
    EXPECT(sscanf(buf, "cpu_saxpy: x is NULL with n = %d", &n) == 1 && n >= 1 && n <= THREADS,
           "last_error_copy line");
    snprintf(again, sizeof again, "cpu_saxpy: x is NULL with n = %d", n);
    EXPECT(strcmp(buf, again) == 0 && needed == strlen(buf) + 1, "last_error_copy whole line");

    /* The NULL handle's message is this thread's own failed create. */
    hk_handle_t *none = NULL;
    hk_create_info_t ci = {sizeof ci, 100 + w->id, 0};
    EXPECT(vt->handle_create(&ci, &none) == HK_STATUS_INVALID_DEVICE && !none, "failing create");
    snprintf(again, sizeof again, "handle_create: hk-cpu has one device (0); asked for %d",
             100 + w->id);
    EXPECT(vt->last_error_copy(NULL, buf, sizeof buf, NULL) == HK_STATUS_OK &&
               strcmp(buf, again) == 0, "last_error_copy(NULL)");
}

static void *worker(void *arg)
{
    worker_t *w = arg;
    for (int it = 0; it < ITERS; it++) {
        core_round(w, it);
        blas_round(w, it);
        error_round(w, it);
    }
    return NULL;
}

/* Runs fn on THREADS threads, each with a worker_t of its own (id set, the
 * rest zeroed), and waits for them; says each one's first error on stderr.
 * Returns the number of errors of all. */
static int run_workers(void *(*fn)(void *))
{
    pthread_t t[THREADS];
    worker_t w[THREADS];
    for (int k = 0; k < THREADS; k++) {
        memset(&w[k], 0, sizeof w[k]);
        w[k].id = k;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[k], NULL, fn, &w[k]), 0);
    }
    int errors = 0;
    for (int k = 0; k < THREADS; k++) {
        pthread_join(t[k], NULL);
        if (w[k].errors)
            fprintf(stderr, "\n    %d wrong, first: %s\n", w[k].errors, w[k].first);
        errors += w[k].errors;
    }
    return errors;
}

static void test_eight_threads_one_handle(void)
{
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &shared), HK_STATUS_OK);
    CU_ASSERT_EQUAL(run_workers(worker), 0);
    CU_ASSERT_EQUAL(vt->handle_destroy(shared), HK_STATUS_OK);
    shared = NULL;
}

/* handle_create and handle_destroy are [thread-safe]: 8 threads make and
 * destroy handles at once. The registry never gives one slot to two live
 * handles (every held handle is recorded and compared), and each handle keeps
 * its own settings while held. */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_handle_t *held[THREADS * 4];

/* Records h as held in slot i; 0 when another held handle is the same. */
static int hold(int i, hk_handle_t *h)
{
    int unique = 1;
    pthread_mutex_lock(&held_lock);
    for (int k = 0; k < THREADS * 4; k++)
        unique &= held[k] != h;
    held[i] = h;
    pthread_mutex_unlock(&held_lock);
    return unique;
}

static void unhold(int i)
{
    pthread_mutex_lock(&held_lock);
    held[i] = NULL;
    pthread_mutex_unlock(&held_lock);
}

static void *churn(void *arg)
{
    worker_t *w = arg;
    for (int it = 0; it < ITERS; it++) {
        hk_handle_t *h[4] = {NULL, NULL, NULL, NULL};
        for (int k = 0; k < 4; k++) {
            EXPECT(vt->handle_create(NULL, &h[k]) == HK_STATUS_OK && h[k], "create");
            EXPECT(hold(w->id * 4 + k, h[k]), "one slot given to two live handles");
        }
        for (int k = 0; k < 4; k++) {
            hk_pointer_mode_t m = (k + w->id) % 2 ? HK_POINTER_MODE_DEVICE : HK_POINTER_MODE_HOST;
            hk_pointer_mode_t got = (hk_pointer_mode_t)-1;
            EXPECT(vt->set_pointer_mode(h[k], m) == HK_STATUS_OK, "set_pointer_mode");
            EXPECT(vt->get_pointer_mode(h[k], &got) == HK_STATUS_OK && got == m,
                   "a handle keeps its own settings while held");
        }
        for (int k = 0; k < 4; k++) {
            unhold(w->id * 4 + k);
            EXPECT(vt->handle_destroy(h[k]) == HK_STATUS_OK, "destroy");
        }
    }
    return NULL;
}

static void test_create_destroy_threads(void)
{
    CU_ASSERT_EQUAL(run_workers(churn), 0);
}

void tcpu_register_threads(void)
{
    CU_pSuite s = hk_test_suite("hk-cpu handle-safe", tcpu_open, tcpu_close);
    hk_test_add(s, "8 threads, one handle: every slot, every result, last_error_copy",
                test_eight_threads_one_handle);
    hk_test_add(s, "create and destroy from 8 threads at once", test_create_destroy_threads);
}
