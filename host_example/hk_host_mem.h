/* hk-host: the host memory a workload may take (hk_host_mem.c). Apart from
 * hk_host.h so that tests compile it with nothing else of hk-host. */
#ifndef HKH_MEM_H
#define HKH_MEM_H

#include <stddef.h>

/* Room for a cgroup file's path: a directory (2048) and a file name. */
#define HKH_CG_PATH 2100

/* The tightest memory limit among the cgroups this process is in. */
typedef struct hkh_cg_limit {
    unsigned long long limit;    /* bytes */
    unsigned long long usage;    /* bytes the cgroup uses now */
    unsigned long long headroom; /* limit - usage, 0 when it uses more */
    char file[HKH_CG_PATH];      /* the limit's file, without root's prefix */
} hkh_cg_limit_t;

/* Reads root/proc/self/cgroup and root/proc/self/mountinfo, and for the
 * cgroup v2 hierarchy and the v1 memory controller, each directory from the
 * process's cgroup up to the hierarchy's mount: memory.max and
 * memory.current (v2), memory.limit_in_bytes and memory.usage_in_bytes (v1).
 * root is "" for this system; a test gives a directory of fake files.
 * Returns 1 and the limit with the least headroom in *out, or 0 when no
 * cgroup limits memory ("max", a v1 limit of 2^62 bytes or more, no files). */
int hkh_cgroup_limit(const char *root, hkh_cg_limit_t *out);

/* Host memory that can be had now: the smaller of the kernel's estimate
 * (MemAvailable, or where /proc is not mounted the free and buffer memory
 * sysinfo reports) and the tightest cgroup's headroom. *source says which,
 * in words naming the limit's file; 0 and *source NULL: unknown. */
unsigned long long hkh_mem_available(char *source, size_t n);

#endif /* HKH_MEM_H */
