/* handlekit kit: the table of driver entry points every file calls through
 * (hkk_cu; filled by hkk_driver.c under its lock, read-only afterwards), and
 * the two give-backs that go through it twice (see hk_kit.h). Calls nothing
 * of the kit. */
#include "hkk_internal.h"

hkk_cu_t hkk_cu;

/* ---- giving back (see hk_kit.h) ---- */

int hk_kit_give_back_primary(int cudevice)
{
    CUresult r = KCU.cuDevicePrimaryCtxRelease(cudevice);
    return r == CUDA_SUCCESS ? r : KCU.cuDevicePrimaryCtxRelease(cudevice);
}

int hk_kit_pop_current(void)
{
    CUcontext popped = NULL;
    CUresult r = KCU.cuCtxPopCurrent(&popped);
    return r == CUDA_SUCCESS ? r : KCU.cuCtxPopCurrent(&popped);
}
