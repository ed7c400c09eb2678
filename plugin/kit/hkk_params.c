/* handlekit kit: a kernel's parameter count, and a launch's arguments checked
 * against it.
 *
 * cuLaunchKernel reads one argument pointer per parameter of the kernel and
 * the value behind each (docs/contexts.md fact 28): given fewer, it reads
 * past the caller's array; given NULL for a kernel with parameters it
 * refuses. The array carries no length, so its length cannot be checked;
 * what can be is that args is not NULL and that none of the first N
 * pointers is, N from cuKernelGetParamInfo (drivers of CUDA 12.4 and
 * later; with an older driver nothing is checked here). */
#include <stdio.h>

#include "hkk_internal.h"

typedef CUresult (*param_info_fn)(CUkernel, size_t, size_t *, size_t *);

static param_info_fn param_info;
static pthread_once_t param_info_once = PTHREAD_ONCE_INIT;

static void take_param_info(void)
{
    /* A missing entry point is named in the calling thread's create message:
     * it is not a failure of that thread's call, so its message is kept. */
    char keep[HK__KIT_MSG_LEN];
    snprintf(keep, sizeof keep, "%s", hk_kit_last_error(NULL));
    hk_kit_entry_t e = {"cuKernelGetParamInfo", 12040, (void **)&param_info};
    if (hk_kit_driver_take(&e, 1) != HK_STATUS_OK)
        param_info = NULL;
    hk_kit_fail(NULL, HK_STATUS_OK, "%s", keep);
}

int hkk_param_count(CUkernel k)
{
    pthread_once(&param_info_once, take_param_info);
    for (int i = 0; param_info && i <= 32768; i++) { /* 32 KiB of parameters at most */
        size_t off = 0, size = 0;
        CUresult r = param_info(k, (size_t)i, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE)
            return i; /* past the last */
        if (r != CUDA_SUCCESS)
            return -1;
    }
    return -1;
}

hk_status_t hkk_check_args(hk_kit_bind_t *b, const char *name, int nparams, void **args)
{
    if (nparams <= 0)
        return HK_STATUS_OK;
    if (!args)
        return hk_kit_fail(b, HK_STATUS_INVALID_VALUE,
                           "launch of %.200s: args is NULL, and the kernel has %d parameter%s",
                           name, nparams, nparams == 1 ? "" : "s");
    for (int i = 0; i < nparams; i++)
        if (!args[i])
            return hk_kit_fail(b, HK_STATUS_INVALID_VALUE,
                               "launch of %.200s: args[%d] is NULL (the kernel has %d "
                               "parameter%s, each read through its pointer)", name, i,
                               nparams, nparams == 1 ? "" : "s");
    return HK_STATUS_OK;
}
