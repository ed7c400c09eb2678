/* hk-cuda: error messages.
 *
 * A handle keeps the message of its last failed call; a failed create has no
 * handle, so its message lives in the calling thread. last_error copies a
 * handle's message into a per-thread buffer under the handle's error lock, so
 * a reader never races with another thread writing a new message. Only the
 * failure paths write, so successful calls pay nothing. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hkc_internal.h"

#define HK__MSG_LEN 512

static _Thread_local char create_error[HK__MSG_LEN];
static _Thread_local char read_buffer[HK__MSG_LEN];

hk_status_t hk__fail(hk_handle_t *h, hk_status_t st, const char *fmt, ...)
{
    char msg[HK__MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (h) {
        pthread_mutex_lock(&h->errlock);
        snprintf(h->err, sizeof h->err, "%s", msg);
        pthread_mutex_unlock(&h->errlock);
    } else {
        snprintf(create_error, sizeof create_error, "%s", msg);
    }
    return st;
}

const char *hk__cu_name(CUresult r, char *buf, size_t len)
{
    const char *name = NULL;
    if (!hk__cu.cuGetErrorName || hk__cu.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "CUDA error";
    snprintf(buf, len, "%s (%d)", name, (int)r);
    return buf;
}

hk_status_t hk__cu_status(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return HK_STATUS_OK;
    case CUDA_ERROR_OUT_OF_MEMORY: return HK_STATUS_OUT_OF_MEMORY;
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return HK_STATUS_CONTEXT_DESTROYED;
    case CUDA_ERROR_INVALID_DEVICE: return HK_STATUS_INVALID_DEVICE;
    case CUDA_ERROR_NO_DEVICE: return HK_STATUS_NO_DEVICE;
    case CUDA_ERROR_NOT_INITIALIZED:
        return atomic_load(&hk__forked) ? HK_STATUS_FORKED : HK_STATUS_CUDA_ERROR;
    default: return HK_STATUS_CUDA_ERROR;
    }
}

hk_status_t hk__fail_cu(hk_handle_t *h, CUresult r, const char *what)
{
    char cu[96];
    hk__cu_name(r, cu, sizeof cu);
    if (h)
        return hk__fail(h, hk__cu_status(r), "%s failed: %s (handle on device %d)", what, cu,
                        h->device);
    return hk__fail(NULL, hk__cu_status(r), "%s failed: %s", what, cu);
}

const char *hk__last_error(const hk_handle_t *h)
{
    if (!h)
        return create_error;
    if (!hk__valid(h)) {
        snprintf(read_buffer, sizeof read_buffer, "not a live hk-cuda handle");
        return read_buffer;
    }
    hk_handle_t *mh = (hk_handle_t *)h; /* the lock is not part of the value */
    pthread_mutex_lock(&mh->errlock);
    memcpy(read_buffer, mh->err, sizeof read_buffer);
    pthread_mutex_unlock(&mh->errlock);
    read_buffer[sizeof read_buffer - 1] = '\0';
    return read_buffer;
}

hk_status_t hk__last_error_copy(const hk_handle_t *h, char *buf, size_t len, size_t *needed)
{
    if (needed)
        *needed = 0;
    if (h && !hk__valid(h)) {
        if (buf && len > 0)
            buf[0] = '\0';
        return HK_STATUS_INVALID_HANDLE;
    }
    if (!buf && len > 0)
        return HK_STATUS_NULL_POINTER;
    hk_handle_t *mh = (hk_handle_t *)h; /* the lock is not part of the value */
    if (mh)
        pthread_mutex_lock(&mh->errlock);
    const char *msg = mh ? mh->err : create_error;
    size_t n = strnlen(msg, HK__MSG_LEN - 1);
    if (len > 0) {
        size_t k = n < len - 1 ? n : len - 1;
        memcpy(buf, msg, k);
        buf[k] = '\0';
    }
    if (mh)
        pthread_mutex_unlock(&mh->errlock);
    if (needed)
        *needed = n + 1;
    return HK_STATUS_OK;
}
