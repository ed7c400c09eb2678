/* hk-cuda: error messages, kept by the kit (plugin/kit/hkk_error.c): a
 * handle's in its binding, a failed create's in the calling thread. */
#include <stdarg.h>
#include <stdio.h>

#include "hkc_internal.h"

hk_status_t hkc_fail(hk_handle_t *h, hk_status_t st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hk_kit_fail(h ? h->kb : NULL, st, "%s", msg);
}

hk_status_t hkc_fail_cu(hk_handle_t *h, CUresult r, const char *what)
{
    return hk_kit_fail_cu(h ? h->kb : NULL, (int)r, what);
}

const char *hkc_last_error(const hk_handle_t *h)
{
    static _Thread_local char not_live[64];
    if (h && !hkc_valid(h)) {
        snprintf(not_live, sizeof not_live, "not a live hk-cuda handle");
        return not_live;
    }
    return hk_kit_last_error(h ? h->kb : NULL);
}

hk_status_t hkc_last_error_copy(const hk_handle_t *h, char *buf, size_t len, size_t *needed)
{
    if (h && !hkc_valid(h)) {
        if (needed)
            *needed = 0;
        if (buf && len > 0)
            buf[0] = '\0';
        return HK_STATUS_INVALID_HANDLE;
    }
    return hk_kit_last_error_copy(h ? h->kb : NULL, buf, len, needed);
}
