/* handlekit loader: a call into a plugin that the caller waits for up to a
 * deadline (a swap's handle_create, handle_destroy, hk.trim/1, and the trim
 * of hk_loader_destroy). The call runs on a thread of its own; past the
 * deadline the caller goes on without it. A thread stuck in plugin code
 * cannot be stopped, so the call's record is shared: whichever of the two
 * sides lets go last frees it, and the helper thread touches nothing else
 * (not the loader, not the plugin record, which may be gone by then). */
#include "hk__loader.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { HK__PC_CREATE, HK__PC_DESTROY, HK__PC_TRIM };

typedef struct hk__pcall {
    pthread_mutex_t m;
    pthread_cond_t cv;
    atomic_int refs; /* the caller and the helper thread */
    int kind, done, abandoned;
    hk_status_t (*create)(const hk_create_info_t *, hk_handle_t **);
    hk_status_t (*destroy)(hk_handle_t *);
    hk_status_t (*trim)(void);
    const char *(*last_error)(const hk_handle_t *);
    hk_create_info_t ci;
    hk_handle_t *raw; /* the create's result, or the handle to destroy */
    hk_status_t st;
    char why[512]; /* last_error(NULL) after a failure, read on the helper thread */
} hk__pcall_t;

static void hk__pcall_unref(hk__pcall_t *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&c->m);
    pthread_cond_destroy(&c->cv);
    free(c);
}

/* The call itself, on whichever thread runs it. The plugin's failure line
 * is thread-local to it, so it is taken here. */
static void hk__pcall_run(hk__pcall_t *c)
{
    hk_handle_t *raw = c->raw;
    hk_status_t st = c->kind == HK__PC_CREATE    ? c->create(&c->ci, &raw)
                     : c->kind == HK__PC_DESTROY ? c->destroy(raw)
                                                 : c->trim();
    char why[sizeof(c->why)] = "";
    if (st != HK_STATUS_OK && c->last_error) {
        const char *t = c->last_error(NULL);
        snprintf(why, sizeof(why), "%s", t ? t : "");
    }
    pthread_mutex_lock(&c->m);
    c->st = st;
    c->raw = c->kind == HK__PC_CREATE && st == HK_STATUS_OK ? raw : NULL;
    memcpy(c->why, why, sizeof(why));
    c->done = 1;
    int abandoned = c->abandoned;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->m);
    /* Given up on: a handle made late belongs to nobody. The module is never
     * closed once a call in it was given up, so its destroy is still there. */
    if (abandoned && c->raw && c->destroy)
        c->destroy(c->raw);
}

static void *hk__pcall_main(void *arg)
{
    hk__pcall_t *c = arg;
    hk__pcall_run(c);
    hk__pcall_unref(c);
    return NULL;
}

/* Runs c on a helper thread and waits for it until deadline_ns have passed.
 * Returns 1 when it ended in time (the results are in c), 0 when it was
 * given up. c is the caller's to unref either way. */
static int hk__pcall_wait(hk__pcall_t *c, uint64_t deadline_ns)
{
    pthread_t tid;
    atomic_store(&c->refs, 2);
    int made = pthread_create(&tid, NULL, hk__pcall_main, c) == 0;
    if (!made) { /* no thread to spare: the call runs here, without a deadline */
        atomic_store(&c->refs, 1);
        hk__pcall_run(c);
        return 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t end = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + deadline_ns;
    ts.tv_sec = (time_t)(end / 1000000000u);
    ts.tv_nsec = (long)(end % 1000000000u);
    pthread_mutex_lock(&c->m);
    while (!c->done)
        if (pthread_cond_timedwait(&c->cv, &c->m, &ts) == ETIMEDOUT && !c->done)
            break;
    int in_time = c->done;
    if (!in_time)
        c->abandoned = 1;
    pthread_mutex_unlock(&c->m);
    /* Done in time: the thread is joined, so that it has ended (its exit
     * run, its thread-local blocks of the plugin given back) before the
     * caller goes on, say to close the plugin's module. Given up: it is left
     * to end by itself. */
    if (in_time)
        pthread_join(tid, NULL);
    else
        pthread_detach(tid);
    return in_time;
}

static hk__pcall_t *hk__pcall_new(int kind)
{
    hk__pcall_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&c->m, NULL);
    atomic_init(&c->refs, 1);
    c->kind = kind;
    return c;
}

/* Runs c with the deadline (0: here, without one) and gives the caller its
 * status, or TIMED_OUT. */
static hk_status_t hk__pcall(hk__pcall_t *c, uint64_t deadline_ns, char *why, size_t n)
{
    int in_time = 1;
    if (deadline_ns)
        in_time = hk__pcall_wait(c, deadline_ns);
    else
        hk__pcall_run(c);
    hk_status_t st = in_time ? c->st : HK_STATUS_TIMED_OUT;
    if (why && n)
        snprintf(why, n, "%s", in_time ? c->why : "");
    return st;
}

hk_status_t hk__call_create(uint64_t deadline_ns, const hk_vtable_t *vt,
                            const hk_create_info_t *ci, hk_handle_t **out, char *why, size_t n)
{
    *out = NULL;
    hk__pcall_t *c = hk__pcall_new(HK__PC_CREATE);
    if (!c) {
        snprintf(why, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    c->create = vt->handle_create;
    c->destroy = vt->handle_destroy;
    c->last_error = vt->last_error;
    memcpy(&c->ci, ci, ci->size < sizeof(c->ci) ? ci->size : sizeof(c->ci));
    hk_status_t st = hk__pcall(c, deadline_ns, why, n);
    if (st == HK_STATUS_OK)
        *out = c->raw;
    hk__pcall_unref(c);
    return st;
}

hk_status_t hk__call_destroy(uint64_t deadline_ns, hk_status_t (*destroy)(hk_handle_t *),
                             hk_handle_t *raw)
{
    hk__pcall_t *c = hk__pcall_new(HK__PC_DESTROY);
    if (!c) /* the handle must go all the same */
        return destroy(raw);
    c->destroy = destroy;
    c->raw = raw;
    hk_status_t st = hk__pcall(c, deadline_ns, NULL, 0);
    hk__pcall_unref(c);
    return st;
}

hk_status_t hk__call_trim(uint64_t deadline_ns, hk_status_t (*trim)(void),
                          const char *(*last_error)(const hk_handle_t *), char *why, size_t n)
{
    hk__pcall_t *c = hk__pcall_new(HK__PC_TRIM);
    if (!c) {
        snprintf(why, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    c->trim = trim;
    c->last_error = last_error;
    hk_status_t st = hk__pcall(c, deadline_ns, why, n);
    hk__pcall_unref(c);
    return st;
}
