/* See hk_crowd.h. */
#include "hk_crowd.h"

#include <stdio.h>

#include "hk_test.h"

void hk_crowd_wrong(hk_crowd_arg_t *a, int round, const char *what)
{
    pthread_mutex_lock(&a->run->first_lock);
    if (atomic_fetch_add(&a->run->wrong, 1) == 0)
        snprintf(a->run->first, sizeof a->run->first, "thread %d, round %d: %s", a->id, round,
                 what);
    pthread_mutex_unlock(&a->run->first_lock);
}

void hk_crowd_run(hk_crowd_t *run, int n, void *(*fn)(void *))
{
    pthread_t t[64];
    hk_crowd_arg_t args[64];
    int started = 0;
    CU_ASSERT_FATAL(n > 0 && n <= 64);
    atomic_init(&run->wrong, 0);
    atomic_init(&run->ok_count, 0);
    pthread_mutex_init(&run->first_lock, NULL);
    run->first[0] = '\0';
    CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&run->start, NULL, (unsigned)n), 0);
    for (; started < n; started++) {
        args[started] = (hk_crowd_arg_t){run, started};
        if (pthread_create(&t[started], NULL, fn, &args[started]) != 0)
            break;
    }
    CU_ASSERT_EQUAL_FATAL(started, n); /* a short start would hang the barrier */
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&run->start);
    pthread_mutex_destroy(&run->first_lock);
    if (atomic_load(&run->wrong))
        printf("\n    %d wrong, first: %s\n", atomic_load(&run->wrong), run->first);
    CU_ASSERT_EQUAL(atomic_load(&run->wrong), 0);
}
