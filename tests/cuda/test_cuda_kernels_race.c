/* hk.kernels/1 through hk-cuda: unload racing the calls that use the same
 * library from other threads. hk_kernels.h promises HK_STATUS_BUSY or
 * HK_STATUS_INVALID_VALUE there, never a crash. A call paused in the
 * simulated driver on its way (simcuda_pause_next) makes each interleaving
 * happen every time: the unload runs to its end between a call's first look
 * at the kernel and its use of it, or while a look-up is inside the driver.
 * Then threads hammer one library while it is loaded and unloaded again and
 * again (on a GPU too). See test_cuda_kernels.h. */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "test_cuda_kernels.h"

#define plug hkct_plug
#define sim hkct_sim
#define on_sim hkct_on_sim
#define SCENARIO HKCT_SCENARIO
#define create hkct_create

/* The simulation's paused calls (simcuda.h), found at run time. */
static int (*pause_next)(const char *);
static int (*wait_paused)(unsigned, unsigned);
static void (*resume)(void);

static int find_pause(void)
{
    *(void **)&pause_next = dlsym(RTLD_DEFAULT, "simcuda_pause_next");
    *(void **)&wait_paused = dlsym(RTLD_DEFAULT, "simcuda_wait_paused");
    *(void **)&resume = dlsym(RTLD_DEFAULT, "simcuda_resume");
    CU_ASSERT_PTR_NOT_NULL(pause_next);
    CU_ASSERT_PTR_NOT_NULL(wait_paused);
    CU_ASSERT_PTR_NOT_NULL(resume);
    return pause_next && wait_paused && resume;
}

typedef enum { OP_LAUNCH, OP_ATTRIBUTES, OP_FUNCTION, OP_GET_KERNEL, OP__COUNT } op_t;
static const char *const op_names[OP__COUNT] = {"launch", "get_attributes", "get_function",
                                                "get_kernel"};

typedef struct call {
    hk_handle_t *h;
    hk_library_t *lib;
    hk_kernel_t *k;
    op_t op;
    const char *pause; /* the driver entry its first call of that kind waits in; NULL: none */
    hk_status_t st;
    hk_kernel_t *found; /* what get_kernel gave */
    char msg[512];
    atomic_int done;
} call_t;

static hk_status_t do_op(hk_handle_t *h, hk_library_t *lib, hk_kernel_t *k, op_t op,
                         hk_kernel_t **found)
{
    hk_kernel_attributes_t a = {.size = sizeof a};
    void *fn = NULL;
    switch (op) {
    case OP_LAUNCH:
        return tk_k->launch(h, k, 1, 1, 1, 32, 1, 1, 0, NULL);
    case OP_ATTRIBUTES:
        return tk_k->get_attributes(h, k, &a);
    case OP_FUNCTION:
        return tk_k->get_function(h, k, &fn);
    default:
        return tk_k->get_kernel(h, lib, "hkt_axpy", found);
    }
}

static void *call_thread(void *arg)
{
    call_t *c = arg;
    if (c->pause && pause_next(c->pause) != 0)
        c->st = HK_STATUS_INTERNAL;
    else
        c->st = do_op(c->h, c->lib, c->k, c->op, &c->found);
    snprintf(c->msg, sizeof c->msg, "%s", plug.vt->last_error(c->h));
    atomic_store(&c->done, 1);
    return NULL;
}

/* The library unloaded, to its end, while a call that already found its
 * kernel live waits in the driver (cuCtxGetCurrent, the context guard's
 * first question) before using it: the call must then see the kernel gone,
 * INVALID_VALUE, reading nothing the unload freed. */
static void unload_before_use(op_t op)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    size_t libraries = sim.libraries();
    hk_library_t *lib = tk_load(h, tk_ptx, tk_ptx_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    hk_kernel_t *k = NULL;
    void *fn = NULL;
    CU_ASSERT_EQUAL_FATAL(tk_k->get_kernel(h, lib, "hkt_noparams", &k), HK_STATUS_OK);
    /* its function cached in the handle's context, as after any first use */
    CU_ASSERT_EQUAL(tk_k->get_function(h, k, &fn), HK_STATUS_OK);
    call_t c = {h, lib, k, op, "cuCtxGetCurrent", HK_STATUS_INTERNAL, NULL, "", 0};
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, call_thread, &c), 0);
    CU_ASSERT_EQUAL(wait_paused(1, 10000), 0);
    hk_status_t st = tk_k->unload(h, lib);
    resume();
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    if (c.st != HK_STATUS_INVALID_VALUE || !strstr(c.msg, "not a live kernel"))
        printf("\n  %s after the unload: %d (%s) ", op_names[op], (int)c.st, c.msg);
    CU_ASSERT_EQUAL(c.st, HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.msg, "not a live kernel"));
    CU_ASSERT_EQUAL(sim.libraries(), libraries);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

SCENARIO(t_unload_before_launch)
{
    if (find_pause())
        unload_before_use(OP_LAUNCH);
}

SCENARIO(t_unload_before_attributes)
{
    if (find_pause())
        unload_before_use(OP_ATTRIBUTES);
}

SCENARIO(t_unload_before_function)
{
    if (find_pause())
        unload_before_use(OP_FUNCTION);
}

typedef struct unloader {
    hk_handle_t *h;
    hk_library_t *lib;
    hk_status_t st;
    atomic_int done;
} unloader_t;

static void *unload_thread(void *arg)
{
    unloader_t *u = arg;
    u->st = tk_k->unload(u->h, u->lib);
    atomic_store(&u->done, 1);
    return NULL;
}

/* get_kernel inside the driver (cuLibraryGetKernel, a name looked up the
 * first time) while another thread unloads: the unload is BUSY at once and
 * the look-up finds the kernel; afterwards the unload goes through. */
SCENARIO(t_unload_during_get_kernel)
{
    if (!find_pause())
        return;
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    size_t libraries = sim.libraries();
    hk_library_t *lib = tk_load(h, tk_ptx, tk_ptx_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    call_t c = {h, lib, NULL, OP_GET_KERNEL, "cuLibraryGetKernel", HK_STATUS_INTERNAL, NULL,
                "", 0};
    pthread_t t, tu;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, call_thread, &c), 0);
    CU_ASSERT_EQUAL(wait_paused(1, 10000), 0);
    unloader_t u = {h, lib, HK_STATUS_INTERNAL, 0};
    CU_ASSERT_EQUAL_FATAL(pthread_create(&tu, NULL, unload_thread, &u), 0);
    for (int i = 0; i < 10000 && !atomic_load(&u.done); i++) /* up to 10 s */
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    int unload_returned = atomic_load(&u.done);
    resume();
    pthread_join(t, NULL);
    pthread_join(tu, NULL);
    CU_ASSERT_TRUE(unload_returned); /* it did not wait for the look-up */
    CU_ASSERT_EQUAL(u.st, HK_STATUS_BUSY);
    if (c.st != HK_STATUS_OK)
        printf("\n  get_kernel beside the unload: %d (%s) ", (int)c.st, c.msg);
    CU_ASSERT_EQUAL(c.st, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(c.found);
    if (u.st == HK_STATUS_BUSY)
        CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(sim.libraries(), libraries);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- many rounds ---- */

enum { HAMMERS = 2, ROUNDS = 200 };
#define BUDGET_S 1.5 /* rounds stop early after this much time (a loaded machine) */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The library and kernel of the current round, published to the hammers. */
static _Atomic(hk_library_t *) cur_lib;
static _Atomic(hk_kernel_t *) cur_kernel;
static atomic_int stop;
static atomic_ulong calls_made; /* by the hammers, all together */

/* Waits until the hammers have made n more calls (they run meanwhile). */
static void let_hammers_call(unsigned long n)
{
    unsigned long until = atomic_load(&calls_made) + n;
    while (atomic_load(&calls_made) < until)
        ;
}

typedef struct hammer {
    hk_handle_t *h;
    unsigned first; /* its first kind of call; then the next, in turn */
    unsigned long calls, ok, gone, bad;
    hk_status_t bad_st;
    op_t bad_op;
} hammer_t;

static void *hammer_thread(void *arg)
{
    hammer_t *m = arg;
    while (!atomic_load(&stop)) {
        hk_library_t *lib = atomic_load(&cur_lib);
        hk_kernel_t *k = atomic_load(&cur_kernel), *found = NULL;
        if (!lib || !k) {
            sched_yield();
            continue;
        }
        op_t op = (op_t)((m->first + m->calls) % OP__COUNT);
        hk_status_t st = do_op(m->h, lib, k, op, &found);
        m->calls++;
        if (st == HK_STATUS_OK)
            m->ok++;
        else if (st == HK_STATUS_INVALID_VALUE)
            m->gone++;
        else
            m->bad++, m->bad_st = st, m->bad_op = op;
        atomic_fetch_add(&calls_made, 1);
    }
    return NULL;
}

/* One thread loads a library, publishes it and its kernel, and unloads it
 * (again while BUSY), ROUNDS times (or for BUDGET_S); two threads call launch, get_attributes,
 * get_function and get_kernel in turn on whatever is published, before,
 * during and after its unload, all on the unloading thread's handle
 * (whose own launches do not hold the library back). Every call gives OK or
 * INVALID_VALUE, every unload OK or BUSY, and nothing is left loaded. */
SCENARIO(t_unload_hammered)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    /* hk-cuda's own library, loaded by h, stays until the module is closed */
    size_t libraries = on_sim ? sim.libraries() : 0;
    hammer_t m[HAMMERS];
    pthread_t t[HAMMERS];
    memset(m, 0, sizeof m);
    atomic_store(&stop, 0);
    for (int i = 0; i < HAMMERS; i++) {
        m[i].h = h;
        m[i].first = (unsigned)i;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, hammer_thread, &m[i]), 0);
    }
    unsigned long busy = 0, bad_unloads = 0;
    double t0 = now_s();
    int r = 0;
    for (; r < ROUNDS && !bad_unloads && now_s() - t0 < BUDGET_S; r++) {
        /* the fatbin: on a GPU it loads without compiling anything */
        hk_library_t *lib = tk_load(h, tk_fatbin, tk_fatbin_size);
        hk_kernel_t *k = NULL;
        if (!lib)
            break;
        hk_status_t st = tk_k->get_kernel(h, lib, "hkt_noparams", &k);
        if (st != HK_STATUS_OK) {
            printf("\n  round %d: get_kernel gave %d (%s) ", r, (int)st, plug.vt->last_error(h));
            bad_unloads++;
        }
        atomic_store(&cur_kernel, k);
        atomic_store(&cur_lib, lib);
        let_hammers_call(8); /* and they go on while it unloads */
        for (int tries = 0; (st = tk_k->unload(h, lib)) == HK_STATUS_BUSY; tries++) {
            busy++;
            if (tries == 50) { /* calls keep it busy: take it away from them */
                atomic_store(&cur_lib, NULL);
                atomic_store(&cur_kernel, NULL);
            }
            if (tries == 100000)
                break;
            if (tries > 50)
                sched_yield(); /* a hammer inside a call may be waiting for a core */
        }
        if (st != HK_STATUS_OK) {
            printf("\n  round %d: unload gave %d (%s) ", r, (int)st, plug.vt->last_error(h));
            bad_unloads++;
        }
        if (atomic_load(&cur_lib))
            let_hammers_call(4); /* with what was unloaded */
    }
    atomic_store(&stop, 1);
    unsigned long calls = 0, ok = 0, gone = 0, bad = 0;
    for (int i = 0; i < HAMMERS; i++) {
        pthread_join(t[i], NULL);
        calls += m[i].calls;
        ok += m[i].ok;
        gone += m[i].gone;
        bad += m[i].bad;
        if (m[i].bad)
            printf("\n  %lu calls failed; %s gave %d ", m[i].bad, op_names[m[i].bad_op],
                   (int)m[i].bad_st);
    }
    atomic_store(&cur_lib, NULL);
    atomic_store(&cur_kernel, NULL);
    printf("\n  %d rounds, %lu racing calls (%lu OK, %lu INVALID_VALUE), %lu BUSY unloads ", r,
           calls, ok, gone, busy);
    CU_ASSERT(r >= 3); /* a loaded machine, or a GPU under compute-sanitizer, makes few */
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(bad_unloads, 0);
    CU_ASSERT(ok > 0);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.libraries(), libraries);
}

const hkct_scenario_t tk_race_scenarios[] = {
    {"unload between launch's look at its kernel and its use", t_unload_before_launch, 1, 0, 1},
    {"unload between get_attributes' look and its use", t_unload_before_attributes, 1, 0, 1},
    {"unload between get_function's look and its use", t_unload_before_function, 1, 0, 1},
    {"unload while get_kernel is inside the driver: BUSY", t_unload_during_get_kernel, 1, 0, 1},
    {"unload racing four kinds of calls, many rounds", t_unload_hammered, 1, 0, 0},
};
const size_t tk_race_scenario_count = sizeof tk_race_scenarios / sizeof tk_race_scenarios[0];
