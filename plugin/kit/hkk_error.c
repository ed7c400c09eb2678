/* handlekit kit: error messages, and the registry of the plugin's handles.
 *
 * A binding keeps the message of its handle's last failed call; a failed
 * create has no handle, so its message lives in the calling thread.
 * hk_kit_last_error copies a binding's message into a per-thread buffer under
 * the binding's error lock, so a reader never races with another thread
 * writing a new message. Only the failure paths write, so successful calls
 * pay nothing. Writing and copying a message are common/lib/hk__msg.h,
 * shared with hk-cpu.
 *
 * The handle registry is common/lib/hk__registry.h (compiled into the kit):
 * one per plugin, since each plugin links its own copy of the kit. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hk__msg.h"
#include "hkk_internal.h"

_Static_assert(HK__KIT_MSG_LEN <= HK__MSG_MAX, "a message longer than hk__msg.h keeps");

static _Thread_local char create_error[HK__KIT_MSG_LEN];
static _Thread_local char read_buffer[HK__KIT_MSG_LEN];

hk_status_t hk_kit_fail(hk_kit_bind_t *b, hk_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (b)
        hk__msg_vset(&b->errlock, b->err, sizeof b->err, fmt, ap);
    else
        hk__msg_vset(NULL, create_error, sizeof create_error, fmt, ap);
    va_end(ap);
    return st;
}

const char *hk_kit_cu_name(int result, char *buf, size_t len)
{
    const char *name = NULL;
    if (!KCU.cuGetErrorName || KCU.cuGetErrorName((CUresult)result, &name) != CUDA_SUCCESS ||
        !name)
        name = "CUDA error";
    snprintf(buf, len, "%s (%d)", name, result);
    return buf;
}

hk_status_t hk_kit_cu_status(int result)
{
    switch ((CUresult)result) {
    case CUDA_SUCCESS: return HK_STATUS_OK;
    case CUDA_ERROR_OUT_OF_MEMORY: return HK_STATUS_OUT_OF_MEMORY;
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return HK_STATUS_CONTEXT_DESTROYED;
    case CUDA_ERROR_INVALID_DEVICE: return HK_STATUS_INVALID_DEVICE;
    case CUDA_ERROR_NO_DEVICE: return HK_STATUS_NO_DEVICE;
    case CUDA_ERROR_NOT_INITIALIZED:
        return atomic_load(&hkk_forked) ? HK_STATUS_FORKED : HK_STATUS_CUDA_ERROR;
    default: return HK_STATUS_CUDA_ERROR;
    }
}

hk_status_t hk_kit_fail_cu(hk_kit_bind_t *b, int result, const char *what)
{
    char cu[96];
    hk_kit_cu_name(result, cu, sizeof cu);
    if (b)
        return hk_kit_fail(b, hk_kit_cu_status(result), "%s failed: %s (handle on device %d)",
                           what, cu, b->device);
    return hk_kit_fail(NULL, hk_kit_cu_status(result), "%s failed: %s", what, cu);
}

const char *hk_kit_last_error(const hk_kit_bind_t *b)
{
    if (!b)
        return create_error;
    hk_kit_bind_t *mb = (hk_kit_bind_t *)b; /* the lock is not part of the value */
    pthread_mutex_lock(&mb->errlock);
    memcpy(read_buffer, mb->err, sizeof read_buffer);
    pthread_mutex_unlock(&mb->errlock);
    read_buffer[sizeof read_buffer - 1] = '\0';
    return read_buffer;
}

hk_status_t hk_kit_last_error_copy(const hk_kit_bind_t *b, char *buf, size_t len,
                                   size_t *needed)
{
    hk_kit_bind_t *mb = (hk_kit_bind_t *)b; /* the lock is not part of the value */
    if (mb)
        return hk__msg_copy(&mb->errlock, mb->err, sizeof mb->err, buf, len, needed);
    return hk__msg_copy(NULL, create_error, sizeof create_error, buf, len, needed);
}
