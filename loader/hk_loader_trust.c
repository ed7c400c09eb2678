/* handlekit loader: who may have written a candidate file.
 *
 * A plugin runs with the host's privileges, so whoever can change the file,
 * or any directory on the way to it (rename, replace, add a link), chooses
 * the host's code. The rule: the file and every directory from the root down
 * to it are owned by root or the effective user and writable by neither
 * group nor others, with one exception, a sticky directory such as /tmp.
 *
 * In a directory with the sticky bit only an entry's owner (and the
 * directory's owner, and root) may rename or remove that entry, whoever else
 * may write the directory. So a sticky directory owned by root or the
 * effective user is passed when everything below it on the way to the file
 * is ours (or root's) and writable by its owner only: another user can add
 * names there, but cannot replace ours, and a name they made is theirs and
 * refused. Two things remain, and both are refused: a second sticky (or any
 * writable) directory below the first, which the rule cannot vouch for, and a
 * file with more than one link lying directly in the sticky directory, which
 * another user may have linked there to a file of ours where the kernel
 * allows it (fs.protected_hardlinks off). A process with elevated privileges
 * (AT_SECURE) keeps the strict rule: there the less trusted party is the
 * caller, who may own files in /tmp.
 *
 * Symbolic links are resolved first (realpath) and the rule is applied to the
 * resolved path, walked one component at a time from an open descriptor of
 * the previous directory with O_NOFOLLOW: a component swapped for a link after
 * resolution is refused, not followed. The last component is opened once;
 * every later check uses that descriptor. Since each directory is checked
 * before we descend into it, and a checked directory can only be changed by
 * a trusted user, the walk is free of check-then-use races. */
#include "hk__loader.h"
#include "hk__errtext.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
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

/* What the walk has passed so far. */
typedef struct hk__walk {
    char sticky[PATH_MAX]; /* the sticky directory passed, "" while none */
    int in_sticky;         /* the last directory checked is that one */
    int self_unnamed;
} hk__walk_t;

/* The rule for one directory (st, named name; NULL: the path itself). A
 * directory others may write passes only as the sticky exception (see the
 * file comment); the reason says which condition it missed. */
static hk_status_t hk__trust_dir(const struct stat *st, const char *name, hk__walk_t *w,
                                 char *reason, size_t n)
{
    w->in_sticky = 0;
    if (!(st->st_mode & (S_IWGRP | S_IWOTH)) || !(st->st_mode & S_ISVTX))
        return hk__trust_stat(st, "directory", name, reason, n);
    char base[PATH_MAX + 96];
    snprintf(base, sizeof(base), "directory%s%s is writable by %s (mode %04o)", name ? " " : "",
             name ? name : "", st->st_mode & S_IWOTH ? "others" : "its group",
             (unsigned)(st->st_mode & 07777));
    uid_t me = geteuid();
    if (w->sticky[0]) {
        snprintf(reason, n, "%s: below the sticky directory %s every directory must be "
                 "writable by its owner only", base, w->sticky);
    } else if (getauxval(AT_SECURE)) {
        snprintf(reason, n, "%s: a sticky directory is trusted only without elevated "
                 "privileges (AT_SECURE)", base);
    } else if (st->st_uid != 0 && st->st_uid != me) {
        snprintf(reason, n, "%s and owned by uid %lu: a sticky directory is trusted only when "
                 "root or the effective user (uid %lu) owns it", base,
                 (unsigned long)st->st_uid, (unsigned long)me);
    } else {
        snprintf(w->sticky, sizeof(w->sticky), "%s", name ? name : "/");
        w->in_sticky = 1;
        return HK_STATUS_OK;
    }
    return HK_STATUS_INSECURE;
}

/* The rule for the file itself, once open. */
static hk_status_t hk__trust_file(const struct stat *st, const hk__walk_t *w, char *reason,
                                  size_t n)
{
    hk_status_t status = hk__trust_stat(st, "file", NULL, reason, n);
    if (status == HK_STATUS_OK && w->in_sticky && st->st_nlink > 1) {
        snprintf(reason, n, "file has %lu hard links and lies in the sticky directory %s, "
                 "where another user may have linked it", (unsigned long)st->st_nlink,
                 w->sticky);
        status = HK_STATUS_INSECURE;
    }
    return status;
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
static hk_status_t hk__check_dir_fd(int dirfd, const char *upto, int is_self, hk__walk_t *w,
                                    char *reason, size_t n)
{
    struct stat st;
    char ebuf[256];
    if (fstat(dirfd, &st) != 0) {
        int e = errno;
        snprintf(reason, n, "cannot stat directory %s: %s", upto,
                 hk__errtext(e, ebuf, sizeof(ebuf)));
        return HK_STATUS_LOAD_FAILED;
    }
    return hk__trust_dir(&st, is_self && w->self_unnamed ? NULL : upto, w, reason, n);
}

/* Opens the next component comp of the walk from dirfd; on failure the
 * reason and status say why (upto: the path so far, for messages). */
static int hk__walk_step(int dirfd, const char *comp, const char *upto, int last, int want_dir,
                         hk_status_t *status, char *reason, size_t n)
{
    char ebuf[256];
    int next = last ? hk__open_last(dirfd, comp, want_dir)
                    : openat(dirfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next >= 0)
        return next;
    int e = errno;
    *status = HK_STATUS_LOAD_FAILED;
    if (last && want_dir && e == ENOTDIR) {
        snprintf(reason, n, "not a directory");
    } else if (e == ELOOP || (!last && e == ENOTDIR)) {
        snprintf(reason, n, "%s changed while it was checked", upto);
    } else if (e == ENXIO) { /* a socket */
        snprintf(reason, n, "not a regular file");
    } else {
        snprintf(reason, n, "cannot open: %s", hk__errtext(e, ebuf, sizeof(ebuf)));
        *status = hk__errno_status(e);
    }
    return -1;
}

/* Checks the last component, open as fd (its fstat into *st). */
static hk_status_t hk__check_last(int fd, const char *resolved, int want_dir, hk__walk_t *w,
                                  struct stat *st, char *reason, size_t n)
{
    char ebuf[256];
    if (fstat(fd, st) != 0) {
        int e = errno;
        snprintf(reason, n, "cannot stat: %s", hk__errtext(e, ebuf, sizeof(ebuf)));
        return HK_STATUS_LOAD_FAILED;
    }
    if (want_dir)
        return hk__trust_dir(st, w->self_unnamed ? NULL : resolved, w, reason, n);
    if (!S_ISREG(st->st_mode)) {
        snprintf(reason, n, "not a regular file");
        return HK_STATUS_LOAD_FAILED;
    }
    return hk__trust_file(st, w, reason, n);
}

/* Walks resolved (absolute, no links, no dot components). */
static hk_status_t hk__walk(const char *resolved, int want_dir, int self_unnamed, int *fd,
                            struct stat *st, char *reason, size_t n)
{
    char upto[PATH_MAX];
    char ebuf[256];
    hk__walk_t w = {.sticky = "", .in_sticky = 0, .self_unnamed = self_unnamed};
    hk_status_t status = HK_STATUS_OK;
    int dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    size_t len = strlen(resolved);

    if (dirfd < 0) {
        int e = errno;
        snprintf(reason, n, "cannot open /: %s", hk__errtext(e, ebuf, sizeof(ebuf)));
        return HK_STATUS_LOAD_FAILED;
    }
    status = hk__check_dir_fd(dirfd, "/", len == 1, &w, reason, n);
    if (status != HK_STATUS_OK || len == 1)
        goto out;
    for (const char *p = resolved + 1;;) {
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
        int next = hk__walk_step(dirfd, comp, upto, !slash, want_dir, &status, reason, n);
        if (next < 0)
            goto out;
        close(dirfd);
        dirfd = next;
        if (!slash)
            break;
        status = hk__check_dir_fd(dirfd, upto, 0, &w, reason, n);
        if (status != HK_STATUS_OK)
            goto out;
        p = slash + 1;
    }
    status = hk__check_last(dirfd, resolved, want_dir, &w, st, reason, n);
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
                 hk__errtext(e, ebuf, sizeof(ebuf)));
        return hk__errno_status(e);
    }
    if (resolved)
        memcpy(resolved, buf, strlen(buf) + 1);
    return hk__walk(buf, want_dir, self_unnamed, fd, st, reason, n);
}
