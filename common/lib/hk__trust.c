/* handlekit: who may have chosen a file we load or run (docs/security.md).
 *
 * A plugin, a program or a driver we load runs with our privileges, so
 * whoever can change the file, or any directory or link on the way to it
 * (rename, replace, add a link), chooses our code. The rule: the file, every
 * directory from the root down to it and every symbolic link followed are
 * owned by root or the effective user, and no file or directory is writable
 * by group or others, with one exception, a sticky directory such as /tmp.
 *
 * In a directory with the sticky bit only an entry's owner (and the
 * directory's owner, and root) may rename or remove that entry, whoever else
 * may write the directory. So a sticky directory owned by root or the
 * effective user is passed when everything below it on the way to the file
 * is ours (or root's) and writable by its owner only: another user can add
 * names there, but cannot replace ours, and a name they made is theirs and
 * refused. Refused all the same: a second sticky (or any writable)
 * directory below the first, which the rule cannot vouch for, and any file
 * lying directly in the sticky directory. Such a file may be a hard link
 * another user made to a file of ours (where fs.protected_hardlinks is off;
 * the link stays after we delete our own name, and then nothing tells it
 * from a file we put there), and its name is one anybody could have taken
 * first: a program's sibling "/tmp/hk-probe" is not ours because our
 * program lies in /tmp. A process with elevated privileges (AT_SECURE)
 * keeps the strict rule: there the less trusted party is the caller, who
 * may own files in /tmp.
 *
 * Links are followed here, not by realpath: a link is read only after its
 * own owner passed the rule (the kernel's protected-symlinks rule is
 * weaker, and realpath resolves in user space where that rule does not
 * apply at all), and its target is walked like any path. Every component is
 * opened with O_PATH | O_NOFOLLOW from the descriptor of the directory
 * checked before it, so a component swapped after its check is seen, not
 * followed; the last one is opened for reading only once fstat said it is a
 * regular file (or a directory), so a device node is never opened, and that
 * open must find the same inode. Since each directory is checked before we
 * descend into it, and a checked directory can only be changed by a trusted
 * user, the walk is free of check-then-use races. */
#include "hk__trust.h"
#include "hk__errtext.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#define HK__TRUST_MAX_LINKS 40 /* as the kernel's own limit for one path */

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

/* The walk: where it is and what it has passed. */
typedef struct hk__walk {
    int dirfd;             /* O_PATH descriptor of the directory reached, checked */
    char at[PATH_MAX];     /* its path, without links */
    char sticky[PATH_MAX]; /* the sticky directory passed, "" while none */
    int in_sticky;         /* the directory reached is that one */
    int links;             /* links followed so far */
    int self_unnamed;
    char *reason;
    size_t n;
} hk__walk_t;

/* The rule for one directory (st, named name; NULL: the path itself). A
 * directory others may write passes only as the sticky exception (see the
 * file comment); the reason says which condition it missed. */
static hk_status_t hk__trust_dir(const struct stat *st, const char *name, hk__walk_t *w)
{
    char *reason = w->reason;
    size_t n = w->n;
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

/* The rule for the file itself (st, named name; NULL: the path itself). */
static hk_status_t hk__trust_file(const struct stat *st, const char *name, hk__walk_t *w)
{
    hk_status_t status = hk__trust_stat(st, "file", name, w->reason, w->n);
    if (status == HK_STATUS_OK && w->in_sticky) {
        snprintf(w->reason, w->n, "file%s%s lies directly in the sticky directory %s, where "
                 "others can make names (a hard link to another file, a name taken first): "
                 "keep it in a directory of your own below it", name ? " " : "",
                 name ? name : "", w->sticky);
        status = HK_STATUS_INSECURE;
    }
    return status;
}

/* A link is followed only when root or the effective user owns it: in a
 * sticky directory anybody may have made it, and what it points to is the
 * choice of whoever made it. */
static hk_status_t hk__trust_link(const struct stat *st, const char *name, hk__walk_t *w)
{
    uid_t me = geteuid();
    if (st->st_uid == 0 || st->st_uid == me)
        return HK_STATUS_OK;
    snprintf(w->reason, w->n, "symbolic link %s is owned by uid %lu, neither root nor the "
             "effective user (uid %lu): such a link is not followed", name,
             (unsigned long)st->st_uid, (unsigned long)me);
    return HK_STATUS_INSECURE;
}

/* Starts (again) at the root: the descriptor of / and its check. */
static hk_status_t hk__walk_root(hk__walk_t *w, int is_last)
{
    char ebuf[256];
    struct stat st;
    if (w->dirfd >= 0)
        close(w->dirfd);
    w->sticky[0] = '\0';
    w->in_sticky = 0;
    strcpy(w->at, "/");
    w->dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (w->dirfd < 0 || fstat(w->dirfd, &st) != 0) {
        snprintf(w->reason, w->n, "cannot open /: %s", hk__errtext(errno, ebuf, sizeof(ebuf)));
        return HK_STATUS_LOAD_FAILED;
    }
    return hk__trust_dir(&st, is_last && w->self_unnamed ? NULL : "/", w);
}

/* path + "/" + rest into todo (size PATH_MAX * 2); 0 when it does not fit. */
static int hk__join(char *todo, size_t size, const char *path, const char *rest)
{
    int k = snprintf(todo, size, "%s%s%s", path, *rest ? "/" : "", rest);
    return k >= 0 && (size_t)k < size;
}

/* Opens the last component name (already known as st) for use and checks
 * that it is still the inode checked. */
static int hk__open_checked(hk__walk_t *w, const char *name, const struct stat *st,
                            int want_dir)
{
    char ebuf[256];
    /* O_NONBLOCK: harmless for a regular file, and whatever is there now
     * must not block the open; the inode check refuses anything else. */
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY
                | (want_dir ? O_DIRECTORY : O_NONBLOCK);
    int fd = openat(w->dirfd, name, flags);
    struct stat now;
    if (fd < 0) {
        snprintf(w->reason, w->n, "cannot open: %s", hk__errtext(errno, ebuf, sizeof(ebuf)));
        return -1;
    }
    if (fstat(fd, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
        snprintf(w->reason, w->n, "%s changed while it was checked", name);
        close(fd);
        return -1;
    }
    if (!want_dir)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* The walk is done: the directory reached is the path (want_dir). */
static hk_status_t hk__walk_end_dir(hk__walk_t *w, int want_dir, int *fd, struct stat *st,
                                    char *resolved)
{
    char ebuf[256];
    if (!want_dir) {
        snprintf(w->reason, w->n, "not a regular file");
        return HK_STATUS_LOAD_FAILED;
    }
    *fd = openat(w->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0 || fstat(*fd, st) != 0) {
        snprintf(w->reason, w->n, "cannot read directory: %s",
                 hk__errtext(errno, ebuf, sizeof(ebuf)));
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return HK_STATUS_LOAD_FAILED;
    }
    if (resolved)
        snprintf(resolved, PATH_MAX, "%s", w->at);
    return HK_STATUS_OK;
}

/* Goes on from the link (cfd, named full, checked as cst) with what is left
 * of the path (rest): todo becomes its target followed by rest. */
static hk_status_t hk__walk_link(hk__walk_t *w, int cfd, const struct stat *cst,
                                 const char *full, const char *rest, char *todo, size_t size)
{
    char target[PATH_MAX], next[PATH_MAX * 2];
    hk_status_t status = hk__trust_link(cst, full, w);
    if (status != HK_STATUS_OK)
        return status;
    if (++w->links > HK__TRUST_MAX_LINKS) {
        snprintf(w->reason, w->n, "too many levels of symbolic links at %s", full);
        return HK_STATUS_LOAD_FAILED;
    }
    ssize_t k = readlinkat(cfd, "", target, sizeof(target));
    if (k > 0 && (size_t)k < sizeof(target))
        target[k] = '\0';
    if (k <= 0 || (size_t)k >= sizeof(target) || !hk__join(next, sizeof(next), target, rest)) {
        snprintf(w->reason, w->n, "cannot read the symbolic link %s", full);
        return HK_STATUS_LOAD_FAILED;
    }
    snprintf(todo, size, "%s", next);
    return target[0] == '/' ? hk__walk_root(w, 0) : HK_STATUS_OK;
}

/* The parent of the directory reached, then rest: the walk starts again at
 * the root over that path, which has no link left in it. */
static hk_status_t hk__walk_up(hk__walk_t *w, const char *rest, char *todo, size_t size)
{
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", w->at);
    char *s = strrchr(parent, '/');
    s[s == parent ? 1 : 0] = '\0';
    if (!hk__join(todo, size, parent, rest)) {
        snprintf(w->reason, w->n, "cannot resolve the path: too long");
        return HK_STATUS_LOAD_FAILED;
    }
    return hk__walk_root(w, 0);
}

/* One component that is no link (checked as cst, named full): a
 * directory to enter, or the last component, opened into *fd. */
static hk_status_t hk__walk_one(hk__walk_t *w, const struct stat *cst,
                                const char *comp, const char *full, int last, int want_dir,
                                int *fd)
{
    const char *name = last && w->self_unnamed ? NULL : full;
    hk_status_t status;
    if (!last || want_dir) {
        if (!S_ISDIR(cst->st_mode)) {
            snprintf(w->reason, w->n, last ? "not a directory" : "cannot stat: %s is not a "
                     "directory", full);
            return last ? HK_STATUS_LOAD_FAILED : HK_STATUS_NOT_FOUND;
        }
        status = hk__trust_dir(cst, name, w);
    } else if (!S_ISREG(cst->st_mode)) {
        snprintf(w->reason, w->n, "not a regular file");
        return HK_STATUS_LOAD_FAILED;
    } else {
        status = hk__trust_file(cst, name, w);
    }
    if (status != HK_STATUS_OK || !last)
        return status;
    *fd = hk__open_checked(w, comp, cst, want_dir);
    return *fd < 0 ? HK_STATUS_LOAD_FAILED : HK_STATUS_OK;
}

/* Opens the next component comp from the directory reached; -1 with the
 * reason and *status on failure. */
static int hk__walk_open(hk__walk_t *w, const char *comp, int want_dir, hk_status_t *status)
{
    char ebuf[256];
    int cfd = openat(w->dirfd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (cfd < 0) {
        int e = errno;
        snprintf(w->reason, w->n, "%s: %s", want_dir ? "cannot read directory" : "cannot stat",
                 hk__errtext(e, ebuf, sizeof(ebuf)));
        *status = hk__errno_status(e);
    }
    return cfd;
}

/* Walks todo (absolute) from the root. */
static hk_status_t hk__walk(char *todo, size_t size, hk__walk_t *w, int want_dir, int *fd,
                            struct stat *st, char *resolved)
{
    const char *p = todo;
    while (*p == '/')
        p++;
    hk_status_t status = hk__walk_root(w, !*p);
    while (status == HK_STATUS_OK) {
        char comp[NAME_MAX + 1], full[PATH_MAX], rest[PATH_MAX * 2];
        while (*p == '/')
            p++;
        if (!*p)
            return hk__walk_end_dir(w, want_dir, fd, st, resolved);
        size_t clen = strcspn(p, "/");
        if (clen > NAME_MAX) {
            snprintf(w->reason, w->n, "cannot resolve the path: bad component");
            return HK_STATUS_LOAD_FAILED;
        }
        memcpy(comp, p, clen);
        comp[clen] = '\0';
        p += clen;
        p += strspn(p, "/");
        snprintf(rest, sizeof(rest), "%s", p);
        int last = !*p;
        if (!strcmp(comp, "."))
            continue;
        if (!strcmp(comp, "..")) {
            status = hk__walk_up(w, rest, todo, size);
            p = todo;
            continue;
        }
        int k = snprintf(full, sizeof(full), "%s%s%s", w->at, strcmp(w->at, "/") ? "/" : "",
                         comp);
        if (k < 0 || (size_t)k >= sizeof(full)) {
            snprintf(w->reason, w->n, "cannot resolve the path: too long");
            return HK_STATUS_LOAD_FAILED;
        }
        int cfd = hk__walk_open(w, comp, want_dir, &status);
        struct stat cst;
        if (cfd < 0)
            return status;
        if (fstat(cfd, &cst) != 0) {
            snprintf(w->reason, w->n, "cannot stat %s", full);
            status = HK_STATUS_LOAD_FAILED;
        } else if (S_ISLNK(cst.st_mode)) {
            status = hk__walk_link(w, cfd, &cst, full, rest, todo, size);
            p = todo;
        } else if ((status = hk__walk_one(w, &cst, comp, full, last, want_dir, fd))
                       == HK_STATUS_OK && !last) {
            close(w->dirfd);
            w->dirfd = cfd;
            snprintf(w->at, sizeof(w->at), "%s", full);
            continue;
        } else if (status == HK_STATUS_OK) {
            *st = cst;
            if (resolved)
                snprintf(resolved, PATH_MAX, "%s", full);
        }
        close(cfd);
        if (status == HK_STATUS_OK && !S_ISLNK(cst.st_mode))
            return status;
    }
    return status;
}

hk_status_t hk__trust_open(const char *path, int want_dir, int self_unnamed, int *fd,
                           struct stat *st, char *resolved, char *reason, size_t n)
{
    char todo[PATH_MAX * 2], cwd[PATH_MAX], ebuf[256];
    hk__walk_t w = {.dirfd = -1, .self_unnamed = self_unnamed, .reason = reason, .n = n};

    *fd = -1;
    if (!path || !*path) {
        snprintf(reason, n, "%s: empty path", want_dir ? "cannot read directory" : "cannot stat");
        return HK_STATUS_NOT_FOUND;
    }
    if (path[0] != '/' && !getcwd(cwd, sizeof(cwd))) {
        snprintf(reason, n, "cannot tell the current directory: %s",
                 hk__errtext(errno, ebuf, sizeof(ebuf)));
        return HK_STATUS_LOAD_FAILED;
    }
    if (!hk__join(todo, sizeof(todo), path[0] == '/' ? "" : cwd, path)) {
        snprintf(reason, n, "cannot resolve the path: too long");
        return HK_STATUS_LOAD_FAILED;
    }
    hk_status_t status = hk__walk(todo, sizeof(todo), &w, want_dir, fd, st, resolved);
    if (w.dirfd >= 0)
        close(w.dirfd);
    if (status != HK_STATUS_OK && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    return status;
}

hk_status_t hk__trust_fd(int fd, struct stat *st, char *reason, size_t n)
{
    char ebuf[256];
    if (fstat(fd, st) != 0) {
        snprintf(reason, n, "cannot stat descriptor %d: %s", fd,
                 hk__errtext(errno, ebuf, sizeof(ebuf)));
        return HK_STATUS_LOAD_FAILED;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(reason, n, "descriptor %d is not a regular file", fd);
        return HK_STATUS_LOAD_FAILED;
    }
    return hk__trust_stat(st, "file", NULL, reason, n);
}

int hk__trust_fd_name(const char *path)
{
    const char *num = NULL;
    if (!strncmp(path, "/dev/fd/", 8))
        num = path + 8;
    else if (!strncmp(path, "/proc/self/fd/", 14))
        num = path + 14;
    if (!num || *num < '0' || *num > '9' || strlen(num) > 9)
        return -1;
    char *end;
    long v = strtol(num, &end, 10);
    if (*end || fcntl((int)v, F_GETFD) < 0)
        return -1;
    return (int)v;
}
