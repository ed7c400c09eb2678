/* Helpers of the loader tests (see test_loader_util.h). */
#include "test_loader_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tl_plugin(const char *file)
{
    static _Thread_local char buf[4096];
    snprintf(buf, sizeof(buf), "%s/%s", HK_TEST_PLUGIN_DIR, file);
    return buf;
}

/* Under the build tree, not $TMPDIR: the loader refuses plugins below a
 * directory that others can write, and /tmp is one. */
int tl_mkdtemp(char *buf, size_t n)
{
    if (mkdir(HK_TEST_TMP_DIR, 0755) != 0 && errno != EEXIST)
        return -1;
    snprintf(buf, n, "%s/hk-loader-XXXXXX", HK_TEST_TMP_DIR);
    if (!mkdtemp(buf))
        return -1;
    return chmod(buf, 0755); /* a probe or helper of another user may read it */
}

void tl_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char path[4096];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            rmdir(path);
    }
    closedir(d);
    chmod(dir, 0700);
    rmdir(dir);
}

int tl_copy(const char *src, const char *dir, const char *name, mode_t mode,
            char *out, size_t n)
{
    char buf[65536];
    int rc = -1;
    snprintf(out, n, "%s/%s", dir, name);
    int in = open(src, O_RDONLY);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || fd < 0)
        goto out;
    for (;;) {
        ssize_t got = read(in, buf, sizeof(buf));
        if (got < 0)
            goto out;
        if (got == 0)
            break;
        if (write(fd, buf, (size_t)got) != got)
            goto out;
    }
    /* chmod, not the open mode: the umask must not hide a world-writable bit. */
    rc = fchmod(fd, mode);
out:
    if (in >= 0)
        close(in);
    if (fd >= 0)
        close(fd);
    return rc;
}

const hk_load_report_t *tl_report(const hk_loader_t *loader, const char *path)
{
    size_t n = hk_loader_report_count(loader);
    for (size_t i = 0; i < n; i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        if (r && strcmp(r->path, path) == 0)
            return r;
    }
    return NULL;
}

hk_loader_t *tl_loader(const char *dir)
{
    hk_loader_options_t o;
    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.default_dir = dir;
    o.ignore_env = 1;
    hk_loader_t *loader = NULL;
    if (hk_loader_create(&o, &loader) != HK_STATUS_OK)
        return NULL;
    return loader;
}

const hk_load_report_t *tl_open_one(const char *file, hk_loader_t **loader)
{
    *loader = tl_loader(NULL);
    if (!*loader)
        return NULL;
    const char *path = tl_plugin(file);
    hk_loader_open(*loader, path, NULL);
    return tl_report(*loader, path);
}

int tl_is_mapped(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[8192];
    int found = 0;
    if (!f)
        return -1;
    size_t n = strlen(path);
    while (!found && fgets(line, sizeof(line), f)) {
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        found = len >= n && strcmp(line + len - n, path) == 0;
    }
    fclose(f);
    return found;
}
