/* handlekit plugins: the messages behind last_error and last_error_copy,
 * shared by hk-cpu and the kit. Internal, never installed.
 *
 * A message is one line in a fixed buffer: a handle's, guarded by the
 * handle's mutex because several threads may use one handle, or a
 * thread-local one (a failed create has no handle), which needs no lock.
 * Only failure paths write, so successful calls pay nothing.
 *
 * Everything here is static inline, so that every build of a plugin's
 * sources (the plugins, and the test doubles built from their files) has it
 * without compiling another file. */
#ifndef HK__MSG_H
#define HK__MSG_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "hk_status.h"

/* The largest message buffer these helpers serve; a longer one keeps this
 * many bytes (the terminating NUL included). */
#define HK__MSG_MAX 512

/* [thread-safe] Formats a message and keeps its first line, cut to cap - 1
 * bytes, in dst (cap bytes): under lock when lock is not NULL, directly into
 * a thread's own buffer when it is NULL. The ABI asks for one line, whatever
 * the text came from (a JIT log, a file name): nothing after a line break is
 * kept. */
static inline void hk__msg_vset(pthread_mutex_t *lock, char *dst, size_t cap, const char *fmt,
                                va_list ap)
{
    char line[HK__MSG_MAX];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\r\n")] = '\0';
    size_t n = strnlen(line, cap - 1);
    if (lock)
        pthread_mutex_lock(lock);
    memcpy(dst, line, n);
    dst[n] = '\0';
    if (lock)
        pthread_mutex_unlock(lock);
}

/* [thread-safe] The ABI's last_error_copy (hk_abi.h) of the message in msg
 * (a buffer of cap bytes), read under lock when lock is not NULL: copies what
 * fits into buf (len bytes, NUL-terminated when len > 0, no byte written at
 * or past len) and sets *needed (when not NULL) to the message's length + 1.
 * Returns HK_STATUS_OK, or HK_STATUS_NULL_POINTER when buf is NULL and len is
 * not 0 (nothing read; *needed 0). The caller has checked its handle. */
static inline hk_status_t hk__msg_copy(pthread_mutex_t *lock, const char *msg, size_t cap,
                                       char *buf, size_t len, size_t *needed)
{
    if (needed)
        *needed = 0;
    if (!buf && len > 0)
        return HK_STATUS_NULL_POINTER;
    if (lock)
        pthread_mutex_lock(lock);
    size_t n = strnlen(msg, cap - 1);
    if (len > 0) {
        size_t k = n < len - 1 ? n : len - 1;
        memcpy(buf, msg, k);
        buf[k] = '\0';
    }
    if (lock)
        pthread_mutex_unlock(lock);
    if (needed)
        *needed = n + 1;
    return HK_STATUS_OK;
}

#endif /* HK__MSG_H */
