/* hk-host: the host memory a workload may take.
 *
 * MemAvailable is the machine's; a process in a cgroup with a memory limit
 * is killed by the OOM killer once it passes that limit, however much the
 * machine has left. So the limit of every cgroup the process is in, up to
 * its hierarchy's root, counts too (a parent's limit binds its children),
 * in the cgroup v2 hierarchy and in a v1 memory controller, where mounted. */
#include "hk_host_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

/* Limits from this size on mean none: cgroup v1 writes "no limit" as the
 * largest page multiple below 2^63. */
#define HKH_NO_LIMIT (1ULL << 62)

/* The number in root/path, "max" as HKH_NO_LIMIT. 0 when unreadable. */
static int hkh_read_bytes(const char *root, const char *path, unsigned long long *v)
{
    char file[4096 + HKH_CG_PATH], text[64];
    snprintf(file, sizeof file, "%s%s", root, path);
    FILE *f = fopen(file, "re");
    if (!f)
        return 0;
    int ok = fgets(text, sizeof text, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    if (strncmp(text, "max", 3) == 0) {
        *v = HKH_NO_LIMIT;
        return 1;
    }
    char *end = NULL;
    *v = strtoull(text, &end, 10);
    return end != text;
}

/* 1 when word is one of the comma-separated items of list. */
static int hkh_has_item(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, word, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

/* The mount of the v2 hierarchy (v1 0) or of the v1 memory controller (v1
 * 1) in root/proc/self/mountinfo: its root in the hierarchy and its mount
 * point. 0 when not mounted. */
static int hkh_cg_mount(const char *root, int v1, char *mroot, char *mpoint, size_t n)
{
    char file[4096 + 32], line[4096], r[1024], m[1024], type[64], opts[1024];
    snprintf(file, sizeof file, "%s/proc/self/mountinfo", root);
    FILE *f = fopen(file, "re");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*d %*d %*s %1023s %1023s", r, m) != 2
            || sscanf(dash + 3, "%63s %*s %1023s", type, opts) != 2)
            continue;
        found = v1 ? strcmp(type, "cgroup") == 0 && hkh_has_item(opts, "memory")
                   : strcmp(type, "cgroup2") == 0;
    }
    if (f)
        fclose(f);
    if (found) {
        snprintf(mroot, n, "%s", r);
        snprintf(mpoint, n, "%s", m);
    }
    return found;
}

/* The directory of this process's cgroup (path, from /proc/self/cgroup) in
 * the hierarchy mounted at mpoint with root mroot. 0 when not below it. */
static int hkh_cg_dir(const char *mroot, const char *mpoint, const char *path, char *dir,
                      size_t n)
{
    size_t rl = strcmp(mroot, "/") == 0 ? 0 : strlen(mroot);
    if (strstr(path, "/..") || strncmp(path, mroot, rl) != 0
        || (path[rl] != '/' && path[rl] != '\0'))
        return 0;
    return snprintf(dir, n, "%s%s", mpoint, path + rl) < (int)n;
}

/* Walks from dir up to the mount point, keeping in *out the limit with the
 * least headroom. Returns 1 when one was kept. */
static int hkh_cg_walk(const char *root, const char *mpoint, char *dir, int v1,
                       hkh_cg_limit_t *out, int have)
{
    char path[HKH_CG_PATH];
    size_t ml = strlen(mpoint);
    for (;;) {
        unsigned long long limit, usage = 0;
        snprintf(path, sizeof path, "%s/%s", dir, v1 ? "memory.limit_in_bytes" : "memory.max");
        if (hkh_read_bytes(root, path, &limit) && limit < HKH_NO_LIMIT) {
            char upath[HKH_CG_PATH];
            snprintf(upath, sizeof upath, "%s/%s", dir,
                     v1 ? "memory.usage_in_bytes" : "memory.current");
            hkh_read_bytes(root, upath, &usage);
            unsigned long long room = usage < limit ? limit - usage : 0;
            if (!have || room < out->headroom) {
                out->limit = limit;
                out->usage = usage;
                out->headroom = room;
                snprintf(out->file, sizeof out->file, "%s", path);
                have = 1;
            }
        }
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= ml || !slash || (size_t)(slash - dir) < ml)
            break;
        *slash = '\0';
    }
    return have;
}

int hkh_cgroup_limit(const char *root, hkh_cg_limit_t *out)
{
    char file[4096 + 32], line[4096], mroot[1024], mpoint[1024], dir[2048];
    int have = 0;
    memset(out, 0, sizeof *out);
    snprintf(file, sizeof file, "%s/proc/self/cgroup", root);
    FILE *f = fopen(file, "re");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        int v2 = strcmp(line, "0") == 0 && c1[1] == '\0';
        int v1 = !v2 && hkh_has_item(c1 + 1, "memory");
        if ((v1 || v2) && hkh_cg_mount(root, v1, mroot, mpoint, sizeof mroot)
            && hkh_cg_dir(mroot, mpoint, c2 + 1, dir, sizeof dir))
            have = hkh_cg_walk(root, mpoint, dir, v1, out, have);
    }
    if (f)
        fclose(f);
    return have;
}

unsigned long long hkh_mem_available(char *source, size_t n)
{
    char line[256];
    unsigned long long kb, have = 0;
    int known = 0;
    FILE *f = fopen("/proc/meminfo", "re");
    source[0] = '\0';
    while (f && !known && fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1 && kb < (1ULL << 53)) {
            snprintf(source, n, "MemAvailable in /proc/meminfo");
            have = kb * 1024;
            known = 1;
        }
    }
    if (f)
        fclose(f);
    struct sysinfo si;
    if (!known && sysinfo(&si) == 0) {
        snprintf(source, n, "free and buffer memory by sysinfo");
        have = ((unsigned long long)si.freeram + si.bufferram) * si.mem_unit;
        known = 1;
    }
    hkh_cg_limit_t cg;
    if (hkh_cgroup_limit("", &cg) && (!known || cg.headroom < have)) {
        snprintf(source, n, "the cgroup's limit, %llu bytes in %s, of which %llu are used",
                 cg.limit, cg.file, cg.usage);
        have = cg.headroom;
    }
    return have;
}
