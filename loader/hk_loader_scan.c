/* handlekit loader: the search path and directory scanning.
 *
 * Order: each directory of HK_PLUGIN_PATH (colon-separated), then the
 * default directory. Inside a directory, regular files whose names end in
 * ".so" (hidden files skipped), sorted by name so every run loads in the same
 * order. libltdl's lt_dlforeachfile is not used: it strips and guesses
 * extensions, and we want to open exactly the files we list. The directory
 * is listed through the descriptor its trust check opened. */
#include "hk__loader.h"
#include "hk__trace.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#define HK__PATH_ENV "HK_PLUGIN_PATH"

static int hk__is_candidate_name(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 3 && strcmp(name + n - 3, ".so") == 0;
}

static int hk__cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks the directory and every directory above it (hk_loader_trust.c);
 * refuses it with one report, or returns OK with *fd open on it. A refused
 * directory is reported once per loader, like a refused file. */
static hk_status_t hk__check_dir(hk_loader_t *loader, const char *dir, int *fd)
{
    struct stat st;
    hk__file_id_t id;
    char reason[HK__REASON_MAX];

    hk_status_t status = hk__trust_open(dir, 1, 1, fd, &st, NULL, reason, sizeof(reason));
    if (status == HK_STATUS_OK)
        return HK_STATUS_OK;
    hk__file_id_set(&id, stat(dir, &st) == 0 ? &st : NULL);
    if (!hk__loader_report_find(loader, dir, &id))
        hk__loader_report_add(loader, dir, HK_STAGE_SCAN, status, reason, NULL, &id);
    return status;
}

/* The candidate names of an open directory, sorted; NULL with *count 0 when
 * there are none. Returns -1 when out of memory. Closes fd. */
static int hk__list_dir(int fd, char ***out, size_t *count)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    DIR *d = fdopendir(fd);

    *out = NULL;
    *count = 0;
    if (!d) {
        close(fd);
        return -1;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!hk__is_candidate_name(e->d_name))
            continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 32;
            char **grown = realloc(names, ncap * sizeof(*grown));
            if (!grown)
                goto oom;
            names = grown;
            cap = ncap;
        }
        names[n] = strdup(e->d_name);
        if (!names[n])
            goto oom;
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof(*names), hk__cmp_names);
    *out = names;
    *count = n;
    return 0;
oom:
    closedir(d);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return -1;
}

/* Admits the candidates of the directory as one batch (hk__admit): the new
 * ones are probed together, and reports come in name order. */
static void hk__scan_dir(hk_loader_t *loader, const char *dir, int is_default)
{
    char **names = NULL;
    size_t count = 0;
    hk__cand_t **cands = NULL;
    int fd = -1;

    if (hk__check_dir(loader, dir, &fd) != HK_STATUS_OK)
        return;
    if (hk__list_dir(fd, &names, &count) != 0)
        goto oom;
    HK__TRACE(HK__TRACE_DECISIONS, "scan", "directory %s (%s): %zu candidate file%s (*.so, "
              "name order)", dir, is_default ? "the default directory" : HK__PATH_ENV, count,
              count == 1 ? "" : "s");
    if (count == 0)
        return;
    cands = calloc(count, sizeof(*cands));
    if (!cands)
        goto oom;
    size_t dlen = strlen(dir);
    const char *sep = (dlen && dir[dlen - 1] == '/') ? "" : "/";
    for (size_t i = 0; i < count; i++) {
        size_t n = dlen + strlen(names[i]) + 2;
        char *path = malloc(n);
        cands[i] = calloc(1, sizeof(**cands));
        if (!path || !cands[i]) {
            free(path);
            goto oom;
        }
        snprintf(path, n, "%s%s%s", dir, sep, names[i]);
        free(names[i]);
        names[i] = path; /* the candidate's path, kept until it is finished */
        hk__cand_init(cands[i], path, is_default, NULL);
    }
    /* The outcome is in the report; a refusal never stops the scan. */
    hk__admit(loader, cands, count);
    goto out;

oom:
    hk__loader_set_error(loader, "out of memory while scanning a plugin directory");
out:
    for (size_t i = 0; i < count; i++) {
        free(names[i]);
        if (cands)
            free(cands[i]);
    }
    free(names);
    free(cands);
}

/* HK_PLUGIN_PATH lets whoever sets the environment choose the code we run;
 * in a set-user-ID or otherwise elevated process (AT_SECURE) that is the
 * less trusted party, so the variable is ignored and a report says so. */
static void hk__scan_env(hk_loader_t *loader)
{
    const char *value = secure_getenv(HK__PATH_ENV);
    if (!value) {
        if (getauxval(AT_SECURE) && getenv(HK__PATH_ENV) && !loader->env_notice_done) {
            loader->env_notice_done = 1;
            hk__loader_report_add(loader, HK__PATH_ENV, HK_STAGE_SCAN, HK_STATUS_INSECURE,
                                  HK__PATH_ENV " ignored: the process runs with elevated "
                                  "privileges (AT_SECURE)", NULL, NULL);
        }
        return;
    }
    char *copy = strdup(value);
    if (!copy) {
        hk__loader_set_error(loader, "out of memory while reading " HK__PATH_ENV);
        return;
    }
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
        hk__scan_dir(loader, dir, 0);
    free(copy);
}

hk_status_t hk_loader_scan(hk_loader_t *loader)
{
    if (!loader)
        return HK_STATUS_NULL_POINTER;
    hk__gate_enter(loader);
    if (hk__tracing(HK__TRACE_DECISIONS)) {
        const char *env = loader->ignore_env ? NULL : secure_getenv(HK__PATH_ENV);
        HK__TRACE(HK__TRACE_DECISIONS, "scan", "search path: %s%s, then %s%s",
                  loader->ignore_env ? "HK_PLUGIN_PATH not read (ignore_env)"
                  : env ? HK__PATH_ENV "=" : "HK_PLUGIN_PATH unset or ignored",
                  env ? env : "", loader->default_dir ? "the default directory "
                  : "no default directory", loader->default_dir ? loader->default_dir : "");
    }
    if (!loader->ignore_env)
        hk__scan_env(loader);
    if (loader->default_dir)
        hk__scan_dir(loader, loader->default_dir, 1);
    hk__gate_leave(loader);
    /* Every complaint about the environment is in the reports once the scan
     * returns, so a host can say what its environment changed. */
    hk__select_env_check(loader);
    return HK_STATUS_OK;
}
