/* simcuda fault injection and call counting (simcuda.h). The counters and the
 * armed failures are consulted by sim_enter (sim_core.c) on every entry. */
#include "sim_internal.h"

SIM_API void simcuda_fail_repeat(const char *entry, unsigned k, unsigned n, CUresult err)
{
    int e = sim_entry_index(entry);
    if (e < 0)
        return;
    pthread_mutex_lock(&sim.lock);
    sim.env_read = 1; /* an explicit arming wins over SIMCUDA_FAIL read later */
    sim.fail_k[e] = k;
    sim.fail_more[e] = k && n > 1 ? n - 1 : 0;
    sim.fail_err[e] = err;
    pthread_mutex_unlock(&sim.lock);
}

SIM_API void simcuda_fail(const char *entry, unsigned k, CUresult err)
{
    simcuda_fail_repeat(entry, k, 1, err);
}

SIM_API void simcuda_fail_clear(void)
{
    pthread_mutex_lock(&sim.lock);
    sim.env_read = 1;
    for (int e = 0; e < SIM_E__COUNT; e++)
        sim.fail_k[e] = sim.fail_more[e] = 0;
    pthread_mutex_unlock(&sim.lock);
}

SIM_API unsigned long simcuda_call_count(const char *entry)
{
    int e = sim_entry_index(entry);
    if (e < 0)
        return 0;
    pthread_mutex_lock(&sim.lock);
    unsigned long n = sim.calls[e];
    pthread_mutex_unlock(&sim.lock);
    return n;
}

SIM_API void simcuda_reset_counters(void)
{
    pthread_mutex_lock(&sim.lock);
    for (int e = 0; e < SIM_E__COUNT; e++)
        sim.calls[e] = 0;
    sim.nlog = 0;
    pthread_mutex_unlock(&sim.lock);
}
