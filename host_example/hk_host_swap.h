/* hk-host's swap workload, shared by `swap` (hk_host_swap.c) and `watch`
 * (hk_host_watch.c): worker threads calling through movable handles, every
 * result checked, each call timed into the swaps' windows; and the lines
 * that print a swap's steps and the calls' times. */
#ifndef HK_HOST_SWAP_H
#define HK_HOST_SWAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hk__lat.h"
#include "hk_swap.h"

typedef struct hkh_worker {
    pthread_t tid;
    hk_mhandle_t *mh;
    int64_t n;
    atomic_ullong calls, wrong, failed;
    char first[320];  /* the first failure, written by the worker only */
    atomic_int ready; /* 1: set up, -1: set-up failed */
    hk__lat_t lat[2]; /* the calls' times: [0] outside the swaps, [1] during one */
} hkh_worker_t;

/* Set to stop every worker; the swaps' windows the calls are classed by. */
extern atomic_int hkh_stop;
extern hk__lat_windows_t hkh_windows;

/* Fills the forwarding tables the workers call through (once, before
 * they start). */
void hkh_swap_tables(void);

/* A worker's thread: hk.blas1/1 rounds (saxpy, copy back, sdot), or the
 * plugin's own self-check through pins for a plugin without hk.blas1/1. */
void *hkh_work(void *arg);
void *hkh_work_selfcheck(void *arg);

/* The workers' calls, wrong and failed calls. */
void hkh_totals(hkh_worker_t *w, long n, unsigned long long t[3]);

/* The last swap's time by step (the loader's swap statistics): open,
 * verify, new handles, switch, drain, close; then the whole switch (the
 * first four). */
enum { STEP_OPEN, STEP_VERIFY, STEP_CREATE, STEP_COMMIT, STEP_DRAIN, STEP_CLOSE, STEP_SWITCH,
       STEPS };
void hkh_steps_of(hk_loader_t *loader, uint64_t v[STEPS]);

/* One swap statistic of loader (hk_loader_swap_stats). */
uint64_t hkh_stat(hk_loader_t *loader, hk_swap_stat_t stat);

/* The line of the steps' medians over n swaps (steps[i * STEPS + k]) and
 * the slowest switch's steps; the calls' times: two lines, during the
 * swaps and outside them, or with windows 0 one line for all. */
void hkh_print_steps(uint64_t *steps, long n);
void hkh_print_times(const hkh_worker_t *w, long n, int windows);

#endif /* HK_HOST_SWAP_H */
