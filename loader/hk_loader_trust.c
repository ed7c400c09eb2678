/* handlekit loader: who may have written a candidate file.
 *
 * A plugin runs with the host's privileges, so whoever can change the file,
 * or any directory on the way to it (rename, replace, add a link), chooses
 * the host's code. The rule: the file and every directory from the root down
 * to it are owned by root or the effective user and writable by neither
 * group nor others. A sticky world-writable directory such as /tmp fails it
 * too: others cannot replace our file there, but they can create the name
 * before we do.
 *
 * Symbolic links are resolved first (realpath) and the rule is applied to the
 * resolved path, walked one component at a time from an open descriptor of
 * the previous directory with O_NOFOLLOW: a component swapped for a link after
 * resolution is refused, not followed. The last component is opened once;
 * every later check uses that descriptor. Since each directory is checked
 * before we descend into it, and a checked directory can only be changed by
 * a trusted user, the walk is free of check-then-use races. */
#include "hk__loader.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hk__plugin_name_ok(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    return n > 3 && strcmp(base + n - 3, ".so") == 0;
}

hk_status_t hk__trust_stat(const struct stat *st, const char *what, const char *name,
                           char *reason, size_t n)
{
    const char *sep = name ? " " : "";
    name = name ? name : "";
    unsigned mode = (unsigned)(st->st_mode & 07777);
    if (st->st_mode & S_IWOTH) {
        snprintf(reason, n, "%s%s%s is writable by others (mode %04o)", what, sep, name, mode);
        return HK_STATUS_INSECURE;
    }
    if (st->st_mode & S_IWGRP) {
        snprintf(reason, n, "%s%s%s is writable by its group (mode %04o)", what, sep, name,
                 mode);
        return HK_STATUS_INSECURE;
    }
    uid_t me = geteuid();
    if (st->st_uid != 0 && st->st_uid != me) {
        snprintf(reason, n, "%s%s%s is owned by uid %lu, neither root nor the effective "
                 "user (uid %lu)", what, sep, name, (unsigned long)st->st_uid,
                 (unsigned long)me);
        return HK_STATUS_INSECURE;
    }
    return HK_STATUS_OK;
}

static hk_status_t hk__errno_status(int e)
{
    return e == ENOENT || e == ENOTDIR ? HK_STATUS_NOT_FOUND : HK_STATUS_LOAD_FAILED;
}

/* Opens the last component of the walk (dirfd, name). */
static int hk__open_last(int dirfd, const char *name, int want_dir)
{
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
    /* O_NONBLOCK: a FIFO named like a plugin must not block the open; the
     * type check below refuses it. No effect on regular files. */
    flags |= want_dir ? O_DIRECTORY : O_NONBLOCK;
    return openat(dirfd, name, flags);
}

/* One step of the walk: checks the directory open as dirfd, named upto. */
static hk_status_t hk__check_dir_fd(int dirfd, const char *upto, int is_self,
                                    int self_unnamed, char *reason, size_t n)
{
    struct stat st;
    char ebuf[256];
    if (fstat(dirfd, &st) != 0) {
        snprintf(reason, n, "cannot stat directory %s: %s", upto,
                 strerror_r(errno, ebuf, sizeof(ebuf)));
        return HK_STATUS_LOAD_FAILED;
    }
    return hk__trust_stat(&st, "directory", is_self && self_unnamed ? NULL : upto, reason, n);
}

/* Walks resolved (absolute, no links, no dot components). */
static hk_status_t hk__walk(const char *resolved, int want_dir, int self_unnamed, int *fd,
                            struct stat *st, char *reason, size_t n)
{
    char upto[PATH_MAX];
    char ebuf[256];
    hk_status_t status = HK_STATUS_OK;
    int dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    size_t len = strlen(resolved);

    if (dirfd < 0) {
        snprintf(reason, n, "cannot open /: %s", strerror_r(errno, ebuf, sizeof(ebuf)));
        return HK_STATUS_LOAD_FAILED;
    }
    status = hk__check_dir_fd(dirfd, "/", len == 1, self_unnamed, reason, n);
    if (status != HK_STATUS_OK || len == 1)
        goto out;
    const char *p = resolved + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t clen = slash ? (size_t)(slash - p) : strlen(p);
        char comp[NAME_MAX + 1];
        if (clen == 0 || clen > NAME_MAX) {
            snprintf(reason, n, "cannot resolve the path: bad component");
            status = HK_STATUS_LOAD_FAILED;
            goto out;
        }
        memcpy(comp, p, clen);
        comp[clen] = '\0';
        snprintf(upto, sizeof(upto), "%.*s", (int)(p + clen - resolved), resolved);
        int last = slash == NULL;
        int next = last ? hk__open_last(dirfd, comp, want_dir)
                        : openat(dirfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            int e = errno;
            if (last && want_dir && e == ENOTDIR) {
                snprintf(reason, n, "not a directory");
                status = HK_STATUS_LOAD_FAILED;
            } else if (e == ELOOP || (!last && e == ENOTDIR)) {
                snprintf(reason, n, "%s changed while it was checked", upto);
                status = HK_STATUS_LOAD_FAILED;
            } else if (e == ENXIO) { /* a socket */
                snprintf(reason, n, "not a regular file");
                status = HK_STATUS_LOAD_FAILED;
            } else {
                snprintf(reason, n, "cannot open: %s", strerror_r(e, ebuf, sizeof(ebuf)));
                status = hk__errno_status(e);
            }
            goto out;
        }
        close(dirfd);
        dirfd = next;
        if (last)
            break;
        status = hk__check_dir_fd(dirfd, upto, 0, self_unnamed, reason, n);
        if (status != HK_STATUS_OK)
            goto out;
        p = slash + 1;
    }
    if (fstat(dirfd, st) != 0) {
        snprintf(reason, n, "cannot stat: %s", strerror_r(errno, ebuf, sizeof(ebuf)));
        status = HK_STATUS_LOAD_FAILED;
        goto out;
    }
    if (want_dir) {
        status = hk__trust_stat(st, "directory", self_unnamed ? NULL : resolved, reason, n);
    } else if (!S_ISREG(st->st_mode)) {
        snprintf(reason, n, "not a regular file");
        status = HK_STATUS_LOAD_FAILED;
    } else {
        status = hk__trust_stat(st, "file", NULL, reason, n);
    }
    if (status != HK_STATUS_OK)
        goto out;
    *fd = dirfd;
    return HK_STATUS_OK;
out:
    close(dirfd);
    return status;
}

hk_status_t hk__trust_open(const char *path, int want_dir, int self_unnamed, int *fd,
                           struct stat *st, char *resolved, char *reason, size_t n)
{
    char buf[PATH_MAX];
    char ebuf[256];

    *fd = -1;
    if (!realpath(path, buf)) {
        int e = errno;
        snprintf(reason, n, "%s: %s", want_dir ? "cannot read directory" : "cannot stat",
                 strerror_r(e, ebuf, sizeof(ebuf)));
        return hk__errno_status(e);
    }
    if (resolved)
        memcpy(resolved, buf, strlen(buf) + 1);
    return hk__walk(buf, want_dir, self_unnamed, fd, st, reason, n);
}
