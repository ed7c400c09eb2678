/* simcuda paused calls (simcuda_pause_next), for tests of races.
 *
 * A library's code between two of its own steps cannot be stopped from
 * outside; a driver call between those steps can. A thread arms a pause for
 * its own next call of one entry; that call then waits at its start, before
 * it takes the simulation's lock, until the test resumes it, while every
 * other call of every thread goes on. So a test can hold a call on its way
 * exactly where a race would interleave another thread, and make that race
 * happen every time. Where two threads each wait for a step of the other, a
 * test resumes one entry's calls at a time (simcuda_resume_entry).
 *
 * Slowed calls widen a window in a stress test instead: a thread asks that
 * its own calls of one entry sleep at their start, so that the other
 * threads' steps land between that thread's two steps more often. */
#include "sim_internal.h"

#include <time.h>

static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pause_cond = PTHREAD_COND_INITIALIZER;
static unsigned paused;             /* calls waiting now */
static unsigned long resumes;       /* simcuda_resume calls so far */
static unsigned long resumes_of[SIM_E__COUNT]; /* simcuda_resume_entry calls, per entry */
static _Thread_local int armed = 0; /* 1 + the entry this thread's next call waits in */
static _Thread_local unsigned slow_us[SIM_E__COUNT]; /* simcuda_slow_calls */

void sim_pause_point(enum sim_entry e)
{
    if (slow_us[e]) {
        struct timespec d = {slow_us[e] / 1000000u, (long)(slow_us[e] % 1000000u) * 1000L};
        while (nanosleep(&d, &d) != 0)
            ;
    }
    if (armed != (int)e + 1)
        return;
    armed = 0;
    pthread_mutex_lock(&pause_lock);
    unsigned long seen = resumes, seen_e = resumes_of[e];
    paused++;
    pthread_cond_broadcast(&pause_cond);
    while (resumes == seen && resumes_of[e] == seen_e)
        pthread_cond_wait(&pause_cond, &pause_lock);
    paused--;
    pthread_mutex_unlock(&pause_lock);
}

SIM_API int simcuda_pause_next(const char *entry)
{
    int e = sim_entry_index(entry);
    if (e < 0)
        return -1;
    armed = e + 1;
    return 0;
}

SIM_API int simcuda_wait_paused(unsigned n, unsigned timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int timed_out = 0;
    pthread_mutex_lock(&pause_lock);
    while (paused < n && !timed_out)
        timed_out = pthread_cond_timedwait(&pause_cond, &pause_lock, &until) != 0;
    int ok = paused >= n;
    pthread_mutex_unlock(&pause_lock);
    return ok ? 0 : -1;
}

SIM_API void simcuda_resume(void)
{
    pthread_mutex_lock(&pause_lock);
    resumes++;
    pthread_cond_broadcast(&pause_cond);
    pthread_mutex_unlock(&pause_lock);
}

SIM_API int simcuda_resume_entry(const char *entry)
{
    int e = sim_entry_index(entry);
    if (e < 0)
        return -1;
    pthread_mutex_lock(&pause_lock);
    resumes_of[e]++;
    pthread_cond_broadcast(&pause_cond);
    pthread_mutex_unlock(&pause_lock);
    return 0;
}

SIM_API int simcuda_slow_calls(const char *entry, unsigned us)
{
    int e = sim_entry_index(entry);
    if (e < 0)
        return -1;
    slow_us[e] = us;
    return 0;
}
