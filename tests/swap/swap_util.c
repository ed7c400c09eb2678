/* Helpers of the swap test programs (swap_test.h). */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "swap_test.h"

static char count_name[128];
static char sequence[64]; /* 'c' per create, 'd' per destroy, in order; under count_lock */
static atomic_int creates, destroys;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void count_log(void *user, hk_log_level_t level, const char *msg)
{
    (void)user;
    (void)level;
    int create = strncmp(msg, "swp-create ", 11) == 0;
    int destroy = strncmp(msg, "swp-destroy ", 12) == 0;
    pthread_mutex_lock(&count_lock);
    int match = count_name[0] && strstr(msg, count_name) != NULL;
    size_t n = strlen(sequence);
    if (match && (create || destroy) && n + 1 < sizeof sequence) {
        sequence[n] = create ? 'c' : 'd';
        sequence[n + 1] = '\0';
    }
    pthread_mutex_unlock(&count_lock);
    if (match && create)
        atomic_fetch_add(&creates, 1);
    if (match && destroy)
        atomic_fetch_add(&destroys, 1);
}

void swp_count_reset(const char *name)
{
    pthread_mutex_lock(&count_lock);
    snprintf(count_name, sizeof count_name, "%s", name);
    sequence[0] = '\0';
    pthread_mutex_unlock(&count_lock);
    atomic_store(&creates, 0);
    atomic_store(&destroys, 0);
}

void swp_sequence(char *buf, size_t len)
{
    pthread_mutex_lock(&count_lock);
    snprintf(buf, len, "%s", sequence);
    pthread_mutex_unlock(&count_lock);
}

int swp_creates(void)
{
    return atomic_load(&creates);
}

int swp_destroys(void)
{
    return atomic_load(&destroys);
}

hk_loader_t *swp_loader(void)
{
    return swp_loader_deadline(0);
}

hk_loader_t *swp_loader_deadline(uint32_t deadline_ms)
{
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1, .log = count_log,
                             .deadline_ms = deadline_ms};
    hk_loader_t *loader = NULL;
    if (hk_loader_create(&o, &loader) != HK_STATUS_OK)
        return NULL;
    return loader;
}

hk_plugin_t *swp_open(hk_loader_t *loader, const char *path)
{
    hk_plugin_t *p = NULL;
    if (hk_loader_open(loader, path, &p) != HK_STATUS_OK) {
        fprintf(stderr, "\ncannot load %s: %s\n", path, hk_loader_last_error(loader));
        return NULL;
    }
    return p;
}

/* The loader maps its snapshot of a file, "/memfd:<name> (deleted)": a
 * maps line (its path at at) of the file's name whose first mapping holds
 * the file's first bytes (not relocated: the headers and dynamic symbols)
 * is the snapshot of that file. */
static int swp_snapshot_of(const char *line, const char *at, const char *canon)
{
    unsigned long start, end, offset;
    char want[PATH_MAX + 32];
    const char *base = strrchr(canon, '/') + 1;
    snprintf(want, sizeof want, "/memfd:%s (deleted)", base);
    if (strncmp(at, want, strlen(want)) != 0 || (at[strlen(want)] != '\n' && at[strlen(want)]))
        return 0;
    if (sscanf(line, "%lx-%lx %*4s %lx", &start, &end, &offset) != 3 || offset != 0)
        return 0;
    FILE *f = fopen(canon, "rb");
    if (!f)
        return 0;
    static char buf[4096];
    size_t n = fread(buf, 1, end - start < sizeof buf ? end - start : sizeof buf, f);
    fclose(f);
    return n > 0 && memcmp((const void *)start, buf, n) == 0;
}

int swp_mapped(const char *path)
{
    char canon[PATH_MAX], line[PATH_MAX + 128];
    if (!realpath(path, canon))
        return 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    int found = 0;
    size_t n = strlen(canon);
    while (!found && fgets(line, sizeof line, f)) {
        char *at = strchr(line, '/');
        found = at && ((strncmp(at, canon, n) == 0 && (at[n] == '\n' || at[n] == '\0'))
                       || swp_snapshot_of(line, at, canon));
    }
    fclose(f);
    return found;
}

int swp_mapped_count(const char *prefix)
{
    enum { MAX = 64 };
    static char seen[MAX][PATH_MAX];
    char line[PATH_MAX + 128];
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    int n = 0;
    size_t plen = strlen(prefix);
    while (fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        if (!path)
            continue;
        path[strcspn(path, "\n")] = '\0';
        const char *base = strrchr(path, '/') + 1;
        /* A snapshot, "/memfd:<name> (deleted)", is one file per inode. */
        char snap[256], key[PATH_MAX];
        unsigned long long ino = 0;
        if (strncmp(base, "memfd:", 6) == 0 && sscanf(line, "%*s %*s %*s %*s %llu", &ino) == 1) {
            snprintf(snap, sizeof snap, "%s", base + 6);
            snap[strcspn(snap, " ")] = '\0';
            base = snap;
            snprintf(key, sizeof key, "%s#%llu", snap, ino);
            path = key;
        }
        size_t blen = strlen(base);
        if (strncmp(base, prefix, plen) != 0 || blen < 3 || strcmp(base + blen - 3, ".so") != 0)
            continue;
        int known = 0;
        for (int i = 0; i < n && !known; i++)
            known = strcmp(seen[i], path) == 0;
        if (!known && n < MAX)
            snprintf(seen[n++], sizeof seen[0], "%s", path);
    }
    fclose(f);
    return n;
}

swp_state_t swp_state(hk_loader_t *loader)
{
    swp_state_t out;
    memset(&out, 0, sizeof out);
    hk_swap_state_t s = {.size = sizeof s};
    uint64_t v[HK_SWAP_STAT__COUNT];
    size_t known = 0;
    CU_ASSERT_EQUAL(hk_loader_swap_stats(loader, v, HK_SWAP_STAT__COUNT, &known), HK_STATUS_OK);
    CU_ASSERT_EQUAL(known, HK_SWAP_STAT__COUNT);
    CU_ASSERT_EQUAL(hk_loader_swap_state(loader, &s), HK_STATUS_OK);
    out.phase = s.phase;
    out.handles = s.handles;
    out.inflight = s.inflight;
    out.draining = s.draining;
    out.libraries = s.libraries;
    uint64_t *to[HK_SWAP_STAT__COUNT] = {
        [HK_SWAP_STAT_SWAPS] = &out.swaps,
        [HK_SWAP_STAT_REFUSED] = &out.refused,
        [HK_SWAP_STAT_MODULES_CLOSED] = &out.modules_closed,
        [HK_SWAP_STAT_LAST_SWITCH_NS] = &out.last_switch_ns,
        [HK_SWAP_STAT_LAST_DRAIN_NS] = &out.last_drain_ns,
        [HK_SWAP_STAT_MAX_SWITCH_NS] = &out.max_switch_ns,
        [HK_SWAP_STAT_MAX_DRAIN_NS] = &out.max_drain_ns,
        [HK_SWAP_STAT_LAST_OPEN_NS] = &out.last_open_ns,
        [HK_SWAP_STAT_LAST_VERIFY_NS] = &out.last_verify_ns,
        [HK_SWAP_STAT_LAST_CREATE_NS] = &out.last_create_ns,
        [HK_SWAP_STAT_LAST_COMMIT_NS] = &out.last_commit_ns,
        [HK_SWAP_STAT_LAST_CLOSE_NS] = &out.last_close_ns,
        [HK_SWAP_STAT_HOLDS] = &out.holds,
        [HK_SWAP_STAT_LAST_HOLD_NS] = &out.last_hold_ns,
        [HK_SWAP_STAT_MAX_HOLD_NS] = &out.max_hold_ns,
        [HK_SWAP_STAT_HOLDS_CUT] = &out.holds_cut,
        [HK_SWAP_STAT_DESTROYS_FAILED] = &out.destroys_failed,
        [HK_SWAP_STAT_UNLOADS_FAILED] = &out.unloads_failed,
    };
    for (int i = 0; i < HK_SWAP_STAT__COUNT; i++)
        if (to[i]) /* the status is not a count: below */
            *to[i] = v[i];
    out.last_destroy_status = (hk_status_t)v[HK_SWAP_STAT_LAST_DESTROY_STATUS];
    return out;
}

uint64_t swp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void swp_tables(hk_blas1_v1_t *blas, hk_memory_v1_t *mem)
{
    hk_mhandle_get_table(HK_TABLE_BLAS1_V1, blas, sizeof *blas);
    hk_mhandle_get_table(HK_TABLE_MEMORY_V1, mem, sizeof *mem);
}

void swp_kernel_tables(hk_kernels_v1_t *kernels, hk_cuda_v1_t *cuda)
{
    hk_mhandle_get_table(HK_TABLE_KERNELS_V1, kernels, sizeof *kernels);
    hk_mhandle_get_table(HK_TABLE_CUDA_V1, cuda, sizeof *cuda);
}

hk_plugin_t *swp_plugin_of(hk_mhandle_t *mh)
{
    hk_mhandle_state_t s = {.size = sizeof s};
    return hk_mhandle_state(mh, &s) == HK_STATUS_OK ? s.plugin : NULL;
}

hk_swap_plugin_state_t swp_plugin_state(hk_plugin_t *p)
{
    hk_swap_plugin_state_t s = {.size = sizeof s};
    CU_ASSERT_EQUAL(hk_plugin_swap_state(p, &s), HK_STATUS_OK);
    return s;
}
