/* hk-cpu internals: the handle and the helpers shared by the plugin's files. */
#ifndef HKCPU_H
#define HKCPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hk__registry.h"
#include "hk_abi.h"

#define HKCPU_NAME "hk-cpu"
#ifndef HKCPU_VERSION /* a second build with another version serves the swap tests */
#define HKCPU_VERSION "1.0.0"
#endif
#define HKCPU_MSG 256

/* Lives in a slot of hkcpu_handles (hk__registry.h): its memory stays the
 * plugin's after destroy, and validity is the slot's live bit. */
struct hk_handle {
    atomic_int pointer_mode; /* hk_pointer_mode_t; set and read from any thread */
    uint32_t flags;          /* HK_CREATE_* as given */
    pthread_mutex_t lock;    /* guards msg: a handle may be used from several threads */
    char msg[HKCPU_MSG];     /* last failure on this handle; "" when none */
};

/* Every handle this copy of hk-cpu made. */
extern hk__registry_t hkcpu_handles;

/* Records a one-line reason and returns status, so that callers can write
 * `return hkcpu_fail(h, s, ...)`. h must be live (a checked handle) or NULL;
 * NULL records the calling thread's handle_create message. */
hk_status_t hkcpu_fail(hk_handle_t *h, hk_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records a failure that has no live handle to carry it (a handle that is not
 * live, get_table's refusals) on the calling thread, apart from the create
 * message; last_error of a handle that is not live returns it. */
hk_status_t hkcpu_stray(hk_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* HK_STATUS_OK for a live handle of this copy of hk-cpu; otherwise records why
 * (hkcpu_stray) and returns HK_STATUS_INVALID_HANDLE. Reads nothing through
 * h unless the registry says it is one of its slots. */
hk_status_t hkcpu_check(const hk_handle_t *h, const char *fn);

/* The core vtable's last_error and last_error_copy (docs/abi.md): a live
 * handle's message, the calling thread's last failed create for NULL, and
 * for a handle that is not live the reason hkcpu_check recorded. */
const char *hkcpu_last_error(const hk_handle_t *h);
hk_status_t hkcpu_last_error_copy(const hk_handle_t *h, char *buf, size_t len, size_t *needed);

/* Returns from the calling function with expr's status unless it is OK. */
#define HKCPU_TRY(expr)                                                             \
    do {                                                                            \
        hk_status_t st_ = (expr);                                                   \
        if (st_ != HK_STATUS_OK)                                                    \
            return st_;                                                             \
    } while (0)

/* Returns from the calling slot (named fn) unless h is a live handle. */
#define HKCPU_CHECK(h, fn) HKCPU_TRY(hkcpu_check((h), (fn)))


extern const struct hk_blas1_v1 hkcpu_blas1;
extern const struct hk_memory_v1 hkcpu_memory;

#endif /* HKCPU_H */
