/* hk-example: hk.selfcheck/1 (hk_selfcheck.h), the plugin's own
 * known-answer workload.
 *
 * A host that swaps a running library for a new build (handlekit's live
 * swap) moves its handles only once the new build has shown that it
 * computes right, and the host cannot know what example.ops/1 should
 * compute. This file does: it runs the example's own kernels, through the
 * code the table's slots use, on device memory of the handle, and compares
 * every element with an answer worked out here on the host.
 *
 * Each call below goes through a slot with the kit's call guard, so the
 * caller's context is as it was after every one of them. The handle's
 * pointer mode is never switched (other threads may be using the handle):
 * ex_scale takes the mode as an argument instead. */
#include <stdio.h>
#include <stdlib.h>

#include "example_internal.h"

/* Four 256-thread blocks and a tail of 3: a kernel that drops the last,
 * partial block, or runs past n, shows. */
#define SC_N 1027

typedef struct sc_run {
    hk_handle_t *h;
    char *why;
    size_t why_len;
} sc_run_t;

/* A step could not run: the slot recorded its reason, which becomes why. */
static hk_status_t could_not(const sc_run_t *s, hk_status_t st)
{
    if (s->why && s->why_len > 0)
        hk_kit_last_error_copy(s->h->kb, s->why, s->why_len, NULL);
    return st;
}

/* x back to the host, every element against its answer. */
static hk_status_t compare(const sc_run_t *s, const char *what, const float *dx, float *got,
                           const float *want)
{
    hk_status_t st = ex_memory_table.copy_to_host(s->h, got, dx, SC_N * sizeof *got);
    if (st != HK_STATUS_OK)
        return could_not(s, st);
    for (int i = 0; i < SC_N; i++)
        if (got[i] != want[i]) { /* also a NaN: no answer here is one */
            if (s->why && s->why_len > 0)
                snprintf(s->why, s->why_len, "%s: x[%d] is %g, expected %g", what, i,
                         (double)got[i], (double)want[i]);
            return hk_kit_fail(s->h->kb, HK_STATUS_INTERNAL, "selfcheck: %s: x[%d] is %g, "
                               "expected %g", what, i, (double)got[i], (double)want[i]);
        }
    return HK_STATUS_OK;
}

/* fill; scale with a host alpha; scale with a device alpha over all but the
 * last element. The answers are plain host arithmetic on the same floats. */
static hk_status_t workload(const sc_run_t *s, float *dx, float *dalpha, float *got, float *want)
{
    const float value = 2.5f, host_alpha = 3.0f, dev_alpha = -0.5f;
    /* NaN everywhere first, so an element the fill misses cannot look right */
    hk_status_t st = ex_memory_table.memset_(s->h, dx, 0xff, SC_N * sizeof *dx);
    if (st == HK_STATUS_OK)
        st = ex_ops_table.fill(s->h, SC_N, value, dx);
    if (st != HK_STATUS_OK)
        return could_not(s, st);
    for (int i = 0; i < SC_N; i++)
        want[i] = value;
    st = compare(s, "fill", dx, got, want);
    if (st != HK_STATUS_OK)
        return st;

    st = ex_scale(s->h, SC_N, &host_alpha, dx, 0);
    if (st != HK_STATUS_OK)
        return could_not(s, st);
    for (int i = 0; i < SC_N; i++)
        want[i] *= host_alpha;
    st = compare(s, "scale (host alpha)", dx, got, want);
    if (st != HK_STATUS_OK)
        return st;

    st = ex_memory_table.copy_to_device(s->h, dalpha, &dev_alpha, sizeof dev_alpha);
    if (st == HK_STATUS_OK)
        st = ex_scale(s->h, SC_N - 1, dalpha, dx, 1);
    if (st != HK_STATUS_OK)
        return could_not(s, st);
    for (int i = 0; i < SC_N - 1; i++)
        want[i] *= dev_alpha;
    return compare(s, "scale (device alpha, n - 1)", dx, got, want);
}

static hk_status_t run(hk_handle_t *h, char *why, size_t why_len)
{
    if (!ex_live(h)) {
        if (why && why_len > 0)
            snprintf(why, why_len, "run: not a live hk-example handle");
        return HK_STATUS_INVALID_HANDLE;
    }
    sc_run_t s = {h, why, why_len};
    float *host = malloc(2 * SC_N * sizeof *host);
    if (!host)
        return could_not(&s, hk_kit_fail(h->kb, HK_STATUS_OUT_OF_MEMORY,
                                         "selfcheck: no host memory"));
    void *dx = NULL, *dalpha = NULL;
    hk_status_t st = ex_memory_table.alloc(h, SC_N * sizeof(float), &dx);
    if (st == HK_STATUS_OK)
        st = ex_memory_table.alloc(h, sizeof(float), &dalpha);
    st = st == HK_STATUS_OK ? workload(&s, dx, dalpha, host, host + SC_N) : could_not(&s, st);
    hk_status_t st_alpha = ex_memory_table.free_(h, dalpha);
    hk_status_t st_x = ex_memory_table.free_(h, dx);
    if (st == HK_STATUS_OK && (st_alpha != HK_STATUS_OK || st_x != HK_STATUS_OK))
        st = could_not(&s, st_alpha != HK_STATUS_OK ? st_alpha : st_x);
    free(host);
    return st;
}

const hk_selfcheck_v1_t ex_selfcheck_table = {
    .size = sizeof(hk_selfcheck_v1_t),
    .run = run,
};
