/* hk-bench P8's run: worker threads call through movable handles while the
 * main thread swaps every handle between two builds of a plugin, then as
 * long again without swaps; each call's time goes to its thread's
 * histograms (common/prog/hk__lat.h), classed by the swap windows. It needs no
 * CUDA of its own: every call, allocation and copy goes through the loader's
 * forwarding tables, so the same run works on hk-cpu (tests/bench runs it
 * there in CI) and on hk-cuda (hkb_swap.c gives each thread a stream and
 * turns the result into rows).
 *
 * The two workloads:
 *   flood    saxpy, n = 4096, host pointer mode, without pause; every 64
 *            calls the thread waits for its stream (vtable synchronize,
 *            untimed), so no call waits for a full launch queue. y is back
 *            to 0 at the end (x = 1, added and subtracted in turn).
 *   service  rounds of: a 256 KiB copy host to device (copy_to_device of y),
 *            saxpy, a host-mode sdot; every round's dot is compared with its
 *            exact value (small integers), which checks the copy and the
 *            saxpy too.
 *
 * Each swap's window runs from just before hk_loader_swap_prepare is called
 * until hk_loader_swap_commit has returned (or the prepare has failed).
 * A call is "during" when it overlaps a window, "quiet" when it overlaps the
 * quiet window (the time without swaps after them) and no swap window, and
 * "other" otherwise: the gaps between swaps, the calls before the first swap
 * and after the quiet time. */
#ifndef HKB_P8_H
#define HKB_P8_H

#include <stdint.h>

#include "hk__lat.h"

#define HKB_P8_MAX_THREADS 64
#define HKB_P8_FLOOD_N 4096
#define HKB_P8_SERVICE_N 65536 /* floats: 256 KiB */

typedef enum { HKB_P8_FLOOD, HKB_P8_SERVICE } hkb_p8_load_t;
typedef enum { HKB_P8_DURING, HKB_P8_QUIET, HKB_P8_OTHER, HKB_P8_CLASSES } hkb_p8_class_t;

/* A swap step by step, in us: the loader's last_open_ns .. last_close_ns,
 * its last_switch_ns (from the commit call), then the whole prepare call
 * and the whole commit call, timed around them. */
enum { HKB_P8_OPEN, HKB_P8_VERIFY, HKB_P8_CREATE, HKB_P8_COMMIT, HKB_P8_DRAIN, HKB_P8_CLOSE,
       HKB_P8_SWITCH, HKB_P8_PREPARE_CALL, HKB_P8_COMMIT_CALL, HKB_P8_STEPS };

typedef struct hkb_p8_setup {
    hkb_p8_load_t load;
    int isolation_off;           /* the loader's HK_ISOLATION_OFF: swaps verify here only */
    const char *path_a, *path_b; /* the threads start on a */
    int device;                  /* of the handles: an ordinal or HK_DEVICE_CURRENT */
    int threads;                 /* 1 .. HKB_P8_MAX_THREADS */
    int swaps;                   /* >= 1 */
    long gap_us;                 /* between two swaps */
    /* Optional (NULL: the handles keep their own stream). From the main
     * thread: a stream for one worker, and giving it back after the run.
     * Return 0, or -1 with a reason in why. */
    int (*stream_create)(void *ctx, void **stream, char *why, size_t len);
    void (*stream_destroy)(void *ctx, void *stream);
    /* Optional: in each worker thread before its first call. */
    int (*thread_init)(void *ctx, char *why, size_t len);
    void *ctx;
    /* The workloads through pins (hk_mhandle_pin) of the plugin's own
     * table "example.ops/1" (hk-example, a plugin without hk.blas1/1):
     * flood, scale by 2 and by 1/2 in turn (y, filled with 1, stays 1);
     * service, a copy of y to the device, scale by 1 or 2, and y read back
     * and checked element by element. */
    int pinned;
    /* hk_swap_options_t.keep_old: the build swapped away from stays open,
     * its code loaded, so each swap after the first two loads nothing */
    int keep_old;
    /* hk_swap_options_t.hold_after_us and .hold_max_us (0: the defaults) */
    long long hold_after_us, hold_max_us;
} hkb_p8_setup_t;

typedef struct hkb_p8_swap {
    int ok;                       /* committed; otherwise refused */
    double us[HKB_P8_STEPS];      /* for a committed swap */
    uint64_t holds_prepare;       /* steps of the prepare that held the calls */
    uint64_t holds_commit;        /* steps of the commit that did */
    double hold_prepare_us;       /* the last such hold of each, in us */
    double hold_commit_us;
    int module_stayed;            /* the build it left is still in the process */
    double longest_call_us;       /* the longest call whose first window this was */
    const char *longest_what;     /* that call ("sdot"), NULL: none */
    double longest_at_us;         /* when it began, from the swap call's start */
    uint64_t t0_ns;               /* the swap call's start (hk__lat_now_ns) */
} hkb_p8_swap_t;

typedef struct hkb_p8_result {
    char name_a[96], name_b[96]; /* "hk-cuda 1.0.0" */
    hk__lat_t *lat;              /* [HKB_P8_CLASSES], merged over the threads */
    hkb_p8_swap_t *swap;         /* [swaps] */
    int swaps, refused;
    uint64_t calls;              /* counted apart from the histograms */
    uint64_t holds;              /* steps that held the calls over the run */
    double max_hold_us;
    double swapping_s, quiet_s;  /* the two phases */
    char refusal[320];           /* the first refusal's reason */
} hkb_p8_result_t;

/* Runs setup: loads both builds with a loader of its own, makes a movable
 * handle, data and (when given) a stream for each thread, starts them on
 * path_a, swaps setup->swaps times (a refused swap is counted, its reason
 * kept, and the next one tried), waits as long again, stops and checks the
 * threads' data. Returns 0 with *r filled (free it with hkb_p8_result_free),
 * or -1 with one line in why (a failed call, a wrong result, a set-up
 * failure); *r then holds nothing to free. */
int hkb_p8_run(const hkb_p8_setup_t *setup, hkb_p8_result_t *r, char *why, size_t len);
void hkb_p8_result_free(hkb_p8_result_t *r);

/* "flood", "service". */
const char *hkb_p8_load_name(hkb_p8_load_t load);

#endif /* HKB_P8_H */
