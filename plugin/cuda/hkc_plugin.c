/* hk-cuda: the entry point (negotiation).
 *
 * Negotiation makes no CUDA call and allocates nothing (docs/abi.md), so a
 * machine without a driver still loads and negotiates hk-cuda;
 * the driver is opened by the first handle_create. */
#include <string.h>

#include "hkc_internal.h"

#define HK__CUDA_VERSION "1.0.0"

__attribute__((visibility("default"))) hk_status_t
hk_plugin_negotiate(const hk_negotiate_request_t *request, hk_negotiate_answer_t *answer);

hk_status_t hk_plugin_negotiate(const hk_negotiate_request_t *request,
                                hk_negotiate_answer_t *answer)
{
    if (!request || !answer)
        return HK_STATUS_NULL_POINTER;
    if (request->header.struct_type != HK_STRUCT_NEGOTIATE_REQUEST ||
        request->header.struct_size < offsetof(hk_negotiate_request_t, log))
        return HK_STATUS_INVALID_VALUE;
    /* Unload-safe: once no handle lives, nothing points into the module. The
     * last handle unloads the kernel library; the kit's destructor gives back
     * anything else (libraries of hk.kernels/1 left loaded, the driver
     * reference); glibc removes the kit's fork handler when the module is
     * closed; no thread-local destructors (plugin/kit/hkk_module.c). */
    hk_negotiate_answer_t a = {
        {HK_STRUCT_NEGOTIATE_ANSWER, sizeof a, 1}, HK_ABI_CURRENT, HK_PLUGIN_UNLOAD_SAFE,
        "hk-cuda", HK__CUDA_VERSION, &hkc_vtable};
    /* Any 1.x up to ours: an older host reads a shorter vtable. */
    uint32_t lo = request->abi_min, hi = request->abi_max;
    uint32_t chosen = hi < HK_ABI_CURRENT ? hi : HK_ABI_CURRENT;
    hk_status_t st = HK_STATUS_OK;
    if (lo > hi || chosen < lo || HK_ABI_VERSION_MAJOR(chosen) != HK_ABI_MAJOR)
        st = HK_STATUS_ABI_MISMATCH;
    else
        a.abi_version = chosen;
    if (st == HK_STATUS_OK && HK_ABI_VERSION_MINOR(chosen) >= 2)
        a.flags |= HK_PLUGIN_MEMORY_CUDA; /* the flag means nothing to older hosts */
    hk_answer_write(answer, &a);
    return st;
}
