/* A crowd of threads for the tests of [thread-safe] and [handle-safe]
 * promises: n threads run one function, all released together by one
 * barrier, each wrong answer counted and the first one kept for the failure
 * message. */
#ifndef HK_CROWD_H
#define HK_CROWD_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct hk_crowd {
    pthread_barrier_t start; /* each thread waits here before its first call */
    void *shared;            /* what the threads share; the test's own */
    atomic_int wrong;
    atomic_int ok_count; /* for promises of "exactly one succeeds" */
    pthread_mutex_t first_lock;
    char first[256]; /* the first wrong answer */
} hk_crowd_t;

/* What each thread's function gets: its crowd and its number (0..n-1). */
typedef struct hk_crowd_arg {
    hk_crowd_t *run;
    int id;
} hk_crowd_arg_t;

/* Counts one wrong answer of thread a in round `round`. */
void hk_crowd_wrong(hk_crowd_arg_t *a, int round, const char *what);

/* Inside a thread's round r with its argument a: counts what is wrong. */
#define HK_CROWD_EXPECT(cond, what)                                               \
    do {                                                                          \
        if (!(cond))                                                              \
            hk_crowd_wrong(a, r, what);                                           \
    } while (0)

/* Runs fn on n threads (at most 64), released together by run->start, and
 * asserts (CUnit) that all started and that none saw a wrong answer, the
 * first of them printed. run->shared is left as the caller set it. */
void hk_crowd_run(hk_crowd_t *run, int n, void *(*fn)(void *));

#endif /* HK_CROWD_H */
