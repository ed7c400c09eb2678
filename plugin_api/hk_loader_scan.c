/* handlekit loader: the search path and directory scanning.
 *
 * Order: each directory of HK_PLUGIN_PATH (colon-separated), then the
 * default directory. Inside a directory, regular files whose names end in
 * ".so" (hidden files skipped), sorted by name so every run loads in the same
 * order. libltdl's lt_dlforeachfile is not used: it strips and guesses
 * extensions, and we want to open exactly the files we list. */
#include "hk__loader.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

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

/* Refuses the directory itself with one report, or returns OK. A refused
 * directory is reported once per loader, like a refused file. */
static hk_status_t hk__check_dir(hk_loader_t *loader, const char *dir)
{
    struct stat st;
    hk__file_id_t id;
    char reason[512], ebuf[256];
    hk_status_t status;

    if (stat(dir, &st) != 0) {
        int e = errno;
        hk__file_id_set(&id, NULL);
        status = e == ENOENT ? HK_STATUS_NOT_FOUND : HK_STATUS_LOAD_FAILED;
        snprintf(reason, sizeof(reason), "cannot read directory: %s",
                 strerror_r(e, ebuf, sizeof(ebuf)));
    } else if (!S_ISDIR(st.st_mode)) {
        hk__file_id_set(&id, &st);
        status = HK_STATUS_LOAD_FAILED;
        snprintf(reason, sizeof(reason), "not a directory");
    } else if (st.st_mode & S_IWOTH) {
        hk__file_id_set(&id, &st);
        status = HK_STATUS_INSECURE;
        snprintf(reason, sizeof(reason), "directory is writable by others (mode %04o)",
                 (unsigned)(st.st_mode & 07777));
    } else {
        return HK_STATUS_OK;
    }
    if (!hk__loader_report_find(loader, dir, &id))
        hk__loader_report_add(loader, dir, HK_STAGE_SCAN, status, reason, NULL, &id);
    return status;
}

static void hk__scan_dir(hk_loader_t *loader, const char *dir)
{
    char **names = NULL;
    size_t count = 0, cap = 0;
    char *path = NULL;
    DIR *d = NULL;

    if (hk__check_dir(loader, dir) != HK_STATUS_OK)
        return;
    d = opendir(dir);
    if (!d) {
        char reason[512], ebuf[256];
        hk__file_id_t id;
        hk__file_id_set(&id, NULL);
        snprintf(reason, sizeof(reason), "cannot read directory: %s",
                 strerror_r(errno, ebuf, sizeof(ebuf)));
        if (!hk__loader_report_find(loader, dir, &id))
            hk__loader_report_add(loader, dir, HK_STAGE_SCAN, HK_STATUS_LOAD_FAILED, reason,
                                  NULL, &id);
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!hk__is_candidate_name(e->d_name))
            continue;
        if (count == cap) {
            size_t ncap = cap ? 2 * cap : 32;
            char **grown = realloc(names, ncap * sizeof(*grown));
            if (!grown)
                goto oom;
            names = grown;
            cap = ncap;
        }
        names[count] = strdup(e->d_name);
        if (!names[count])
            goto oom;
        count++;
    }
    qsort(names, count, sizeof(*names), hk__cmp_names);

    size_t dlen = strlen(dir);
    for (size_t i = 0; i < count; i++) {
        size_t n = dlen + strlen(names[i]) + 2;
        char *grown = realloc(path, n);
        if (!grown)
            goto oom;
        path = grown;
        snprintf(path, n, "%s%s%s", dir, (dlen && dir[dlen - 1] == '/') ? "" : "/", names[i]);
        /* The outcome is in the report; a refusal never stops the scan. */
        hk__loader_candidate(loader, path, 1, NULL);
    }
    goto out;

oom:
    hk__loader_set_error(loader, "out of memory while scanning a plugin directory");
out:
    if (d)
        closedir(d);
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    free(path);
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
        hk__scan_dir(loader, dir);
    free(copy);
}

hk_status_t hk_loader_scan(hk_loader_t *loader)
{
    if (!loader)
        return HK_STATUS_NULL_POINTER;
    pthread_mutex_lock(&loader->open_lock);
    if (!loader->ignore_env)
        hk__scan_env(loader);
    if (loader->default_dir)
        hk__scan_dir(loader, loader->default_dir);
    pthread_mutex_unlock(&loader->open_lock);
    return HK_STATUS_OK;
}
