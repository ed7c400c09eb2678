/* simcuda quiet loads (docs/contexts.md facts 25 and 30), off unless a test
 * asks.
 *
 * On an H200, while threads launched into one context without pause (fact
 * 25), or ran a service there (copies, a launch and a stream synchronise in
 * a loop, fact 30), cuStreamCreate, the first load of a kernel into that
 * context, and (fact 30) allocations, frees, stream destruction, event
 * creation, module and library unloads and page-locked host allocations did
 * not return until the other threads paused: they share something in the
 * driver that these calls need alone. The model: each launch notes its
 * context's time; such a call waits until the context it works in has seen
 * no launch for quiet_us (every round of a service launches). Stream-ordered
 * allocations and frees, synchronisations, a lazy library load, primary
 * retains and context queries never wait.
 * It waits with sim.lock released and polls, so that the launches (and every
 * other call) go on; it stops waiting when the context dies or the model is
 * turned off, and its caller checks its objects again afterwards. */
#include "sim_internal.h"

#include <stdlib.h>
#include <time.h>

#define SIM_QUIET_POLL_NS 100000L /* 100 us between looks at the context */

static unsigned long long sim_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000u;
}

void sim_quiet_read_env(void)
{
    const char *v = getenv("SIMCUDA_QUIET_LOADS_US");
    if (v && *v)
        sim.quiet_us = (unsigned)strtoul(v, NULL, 10);
}

void sim_quiet_note_launch(struct CUctx_st *c)
{
    if (c)
        c->last_launch_us = sim_now_us();
}

/* Whether a call in c must still wait: the model is on, c is alive and a
 * launch went into c less than quiet_us ago. */
static int sim_quiet_busy(const struct CUctx_st *c)
{
    return sim.quiet_us && c->alive && c->last_launch_us &&
           sim_now_us() - c->last_launch_us < sim.quiet_us;
}

void sim_quiet_wait(struct CUctx_st *c)
{
    if (!c || !sim_quiet_busy(c))
        return;
    sim.loads_waiting++;
    const struct timespec poll = {0, SIM_QUIET_POLL_NS};
    do {
        pthread_mutex_unlock(&sim.lock);
        nanosleep(&poll, NULL);
        pthread_mutex_lock(&sim.lock);
    } while (sim_quiet_busy(c));
    sim.loads_waiting--;
}

void sim_quiet_wait_lib(const struct CUlib_st *l)
{
    if (!sim.quiet_us)
        return;
    /* A wait lets every other call run: the contexts are walked again from
     * the start after each one (a context that is quiet passes at once). */
    for (int again = 1; again;) {
        again = 0;
        for (sim_obj_t *o = sim.objects; o && !again; o = o->next_obj) {
            struct CUctx_st *c = (struct CUctx_st *)o;
            if (o->magic == SIM_MAGIC_CTX && sim_quiet_busy(c) && sim_lib_loaded(l, c)) {
                sim_quiet_wait(c);
                again = 1;
            }
        }
    }
}

SIM_API void simcuda_quiet_loads(unsigned quiet_us)
{
    pthread_mutex_lock(&sim.lock);
    sim.quiet_us = quiet_us;
    pthread_mutex_unlock(&sim.lock);
}

SIM_API unsigned simcuda_loads_waiting(void)
{
    pthread_mutex_lock(&sim.lock);
    unsigned n = sim.loads_waiting;
    pthread_mutex_unlock(&sim.lock);
    return n;
}
