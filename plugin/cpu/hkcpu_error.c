/* hk-cpu: the registry of handles, the failure messages and the check that a
 * handle is live: below every other file of the plugin, which all record
 * failures here. */
#include <stdarg.h>
#include <stdio.h>

#include "hk__msg.h"
#include "hkcpu.h"

hk__registry_t hkcpu_handles = HK__REGISTRY_INIT(sizeof(struct hk_handle));

_Static_assert(HK__REG_SLOT_BYTES(sizeof(struct hk_handle)) != 0, "handle too big for a slot");

/* A failed create has no handle to carry its message: keep it per thread.
 * Calls whose handle is not live keep theirs apart, so that last_error(NULL)
 * stays the last failed create as docs/abi.md says. */
_Static_assert(HKCPU_MSG <= HK__MSG_MAX, "a message longer than hk__msg.h keeps");

static _Thread_local char create_msg[HKCPU_MSG];
static _Thread_local char stray_msg[HKCPU_MSG];

hk_status_t hkcpu_fail(hk_handle_t *h, hk_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (h)
        hk__msg_vset(&h->lock, h->msg, sizeof h->msg, fmt, ap);
    else
        hk__msg_vset(NULL, create_msg, sizeof create_msg, fmt, ap);
    va_end(ap);
    return status;
}

hk_status_t hkcpu_stray(hk_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(stray_msg, sizeof stray_msg, fmt, ap);
    va_end(ap);
    return status;
}

hk_status_t hkcpu_check(const hk_handle_t *h, const char *fn)
{
    if (hk__reg_live(&hkcpu_handles, h))
        return HK_STATUS_OK;
    if (!h)
        return hkcpu_stray(HK_STATUS_INVALID_HANDLE, "%s: handle is NULL", fn);
    return hkcpu_stray(HK_STATUS_INVALID_HANDLE,
                       "%s: %p is not a live hk-cpu handle (destroyed, or made by another "
                       "plugin or another loaded copy of hk-cpu)", fn, (const void *)h);
}

const char *hkcpu_last_error(const hk_handle_t *h)
{
    if (!h)
        return create_msg;
    if (!hk__reg_live(&hkcpu_handles, h)) {
        hkcpu_check(h, "last_error");
        return stray_msg;
    }
    /* The handle's own buffer, as the contract says: valid until the next
     * call on it. A reader racing a writer wants last_error_copy. */
    return h->msg;
}

hk_status_t hkcpu_last_error_copy(const hk_handle_t *h, char *buf, size_t len, size_t *needed)
{
    if (needed)
        *needed = 0;
    if (h && !hk__reg_live(&hkcpu_handles, h)) {
        if (buf && len > 0)
            buf[0] = '\0';
        return HK_STATUS_INVALID_HANDLE;
    }
    hk_handle_t *mh = (hk_handle_t *)h; /* the lock is not part of its value */
    if (mh)
        return hk__msg_copy(&mh->lock, mh->msg, sizeof mh->msg, buf, len, needed);
    return hk__msg_copy(NULL, create_msg, sizeof create_msg, buf, len, needed);
}
