/* hk-cpu internals: the handle and the helpers shared by the plugin's files. */
#ifndef HKCPU_H
#define HKCPU_H

#include <pthread.h>
#include <stdint.h>

#include "hk_abi.h"

#define HKCPU_NAME "hk-cpu"
#ifndef HKCPU_VERSION /* a second build with another version serves the swap tests */
#define HKCPU_VERSION "1.0.0"
#endif
#define HKCPU_MAGIC 0x686b637075u /* live handle */
#define HKCPU_DEAD 0xdeadu        /* destroyed: catches most use after destroy */
#define HKCPU_MSG 256

struct hk_handle {
    uint64_t magic;
    hk_pointer_mode_t pointer_mode;
    uint32_t flags;
    pthread_mutex_t lock; /* guards msg: a handle may be used from several threads */
    char msg[HKCPU_MSG];
};

/* Records a one-line reason on h (or, for h == NULL, on the calling thread) and
 * returns status, so that callers can write `return hk__cpu_fail(h, s, ...)`. */
hk_status_t hk__cpu_fail(hk_handle_t *h, hk_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* HK_STATUS_OK for a live handle; else records why on the calling thread. */
hk_status_t hk__cpu_check(hk_handle_t *h, const char *fn);

const char *hk__cpu_thread_error(void);

extern const struct hk_blas1_v1 hk__cpu_blas1;
extern const struct hk_memory_v1 hk__cpu_memory;

#endif /* HKCPU_H */
