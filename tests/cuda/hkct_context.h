/* Helpers of the hk-cuda context program (test_cuda_context.c and
 * test_cuda_calls.c): the plugin, the devices, the simulated driver's test
 * API when it is there, and the checks every scenario repeats.
 *
 * The program links the driver (the toolkit's stub at link time) and runs
 * against the simulated driver in CI and against the real one on a GPU
 * machine; the simulation's API is found with dlsym, so it is only used
 * where it is present (hkct_on_sim). Assertions are CUnit's; none is _FATAL
 * outside the calling test's own thread. */
#ifndef HKCT_CONTEXT_H
#define HKCT_CONTEXT_H

#include <cuda.h>

#include "hk_test.h"
#include "hkct_plugin.h"
#include "simcuda.h"

extern hkct_plugin_t hkct_plug;
extern int hkct_ndev;   /* devices the driver lists */
extern int hkct_on_sim; /* the simulated driver, with its whole test API */

/* The simulation's test API (simcuda.h); NULL members on a real driver. */
typedef struct hkct_sim {
    int (*refcount)(int);
    int (*active)(int);
    size_t (*live)(void);
    size_t (*live_host)(void);
    size_t (*libraries)(void);
    size_t (*contexts)(void);
    int (*depth)(void);
    CUcontext (*top)(void); /* the current context, no driver call */
    void (*fail)(const char *, unsigned, CUresult);
    void (*fail_repeat)(const char *, unsigned, unsigned, CUresult);
    void (*fail_clear)(void);
    unsigned long (*calls)(const char *);
    void (*reset_counters)(void);
    size_t (*launch_count)(void);
    int (*launch_get)(size_t, simcuda_launch_record_t *);
} hkct_sim_t;
extern hkct_sim_t hkct_sim;

/* cuInit, the device count, the simulation's API and the plugin. Returns 0,
 * or -1 with a reason in why (then every scenario is skipped with it). */
int hkct_setup(char *why, size_t len);

#define HKCT_OK(call) CU_ASSERT_EQUAL_FATAL((call), CUDA_SUCCESS)

/* Closes hk-cuda (its module's unload gives back everything the kit keeps,
 * the primary retains included) and opens it again, as a new process would
 * find it. No handle may be live. The new mapping is placed away from the
 * old one, so every table must be fetched again (hkct_plug's are). */
void hkct_reload(void);

/* hk-cuda's hk.trim/1 (asserting it is offered and answers OK): gives back
 * what it keeps between handles, the memory destroyed handles left, its
 * kernel library and the kit's primary retains. No handle needs to be gone. */
void hkct_trim(void);

/* Creates and destroys a handle of device dev's primary, so that the kit
 * keeps its one retain there (docs/contexts.md, "What the kit keeps between
 * handles"): later handles' destroys give back their own retains. */
void hkct_keep(int dev);

/* The calling thread's current context (asserting the query works). */
CUcontext hkct_current(void);

/* Device dev's primary context pointer, the same for its whole life. Takes
 * and gives back a retain: when nothing else holds one the primary is
 * inactive again afterwards. */
CUcontext hkct_primary(int dev);

/* A new user context on device dev, current on the calling thread
 * (cuCtxCreate pushes it); asserts, fatally, that the driver made it. */
CUcontext hkct_user_context(int dev);

/* c's context ID (asserting the query works). */
unsigned long long hkct_ctx_id(CUcontext c);

/* handle_info of h, asserted OK. */
hk_handle_info_t hkct_info(hk_handle_t *h);

/* handle_create on device (HK_DEVICE_CURRENT or an ordinal), asserting that
 * it returns want; prints the message when it does not. */
hk_handle_t *hkct_create(int device, hk_status_t want);

/* Asserts (at the caller's file and line) that a call of the plugin
 * returned want; when it did not, prints the call's text, both statuses
 * and h's last error. Returns got. */
hk_status_t hkct_status_is(hk_handle_t *h, hk_status_t got, hk_status_t want, const char *call,
                           const char *file, int line);

/* Takes a retain of device dev's primary context (asserting, fatally, that
 * the driver gave it) and returns the context; nothing is made current. */
CUcontext hkct_retain_primary(int dev);

/* Gives back a retain taken with hkct_retain_primary (asserted, fatally). */
void hkct_release_primary(int dev);

/* y := 2x + y and x.y through the handle on its own memory, checked; asserts
 * after every call that expect is current. Returns the first failure. */
hk_status_t hkct_workload(hk_handle_t *h, CUcontext expect);

/* Runs fn in a new thread (nothing is current there) and waits for it. */
void hkct_in_thread(void (*fn)(void));

/* Empties the calling thread's context stack. */
void hkct_clear_current(void);

/* How many contexts the calling thread's stack holds, found by popping them
 * all (which empties it) and checking that the first popped is top. */
int hkct_pop_all(CUcontext top);

/* A scenario: its test function and what it needs to run. */
typedef struct hkct_scenario {
    const char *name;
    CU_TestFunc fn;
    int min_devices; /* skipped with a reason below this many devices */
    int needs_rt;    /* the CUDA runtime (cudart, or the simulation's stand-in) */
    int needs_sim;   /* the simulated driver's fault injection */
} hkct_scenario_t;

/* Adds the n scenarios of t to suite s, each skipped with its reason when it
 * cannot run here: skip (setup failed) for all; sim_why without the simulated
 * driver for those needing it; the device count; rt_skip (NULL when the
 * runtime is there) for those needing the runtime. */
void hkct_add_scenarios(CU_pSuite s, const hkct_scenario_t *t, size_t n, const char *skip,
                        const char *rt_skip, const char *sim_why);

/* What the simulated driver holds, as a leak check counts it. */
typedef struct hkct_snapshot {
    size_t live, live_host, libraries, contexts;
    int refcount[16], active[16];
    CUcontext current;
    int depth;
} hkct_snapshot_t;

/* Now (through the simulation's API, which counts no call). */
hkct_snapshot_t hkct_snap(void);

/* "" when a and b are equal, else what differs (in buf). */
const char *hkct_snap_diff(const hkct_snapshot_t *a, const hkct_snapshot_t *b, char *buf,
                           size_t len);

/* What calls leave behind, failing or not (test_cuda_calls.c). */
extern const hkct_scenario_t hkct_call_scenarios[];
extern const size_t hkct_call_scenario_count;

/* Destroy and trim when the driver refuses a give-back twice
 * (test_cuda_refused.c). */
extern const hkct_scenario_t hkct_refused_scenarios[];
extern const size_t hkct_refused_scenario_count;

/* What destroy waits for (test_cuda_destroy.c). */
extern const hkct_scenario_t hkct_destroy_scenarios[];
extern const size_t hkct_destroy_scenario_count;

/* hk.trim/1 racing creates, calls and destroys (test_cuda_trim.c). */
extern const hkct_scenario_t hkct_trim_scenarios[];
extern const size_t hkct_trim_scenario_count;

/* Defines test function name, which runs its body with nothing current and
 * hk-cuda freshly opened (the kit keeps no primary retain yet), and empties
 * the thread's context stack again afterwards. */
#define HKCT_SCENARIO(name)                                                  \
    static void name##_body(void);                                           \
    static void name(void)                                                   \
    {                                                                        \
        hkct_reload();                                                       \
        hkct_clear_current();                                                \
        name##_body();                                                       \
        hkct_clear_current();                                                \
    }                                                                        \
    static void name##_body(void)

#endif /* HKCT_CONTEXT_H */
