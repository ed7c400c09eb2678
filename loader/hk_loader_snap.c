/* handlekit loader: the snapshot, the loader's own copy of a checked file.
 *
 * Why: the dynamic loader maps a plugin's file, and a file rewritten in
 * place under a running host (cp, install, scp: open with O_TRUNC, then
 * write) takes the mapped pages with it: a page past the new end raises
 * SIGBUS, a page rewritten runs the other build's bytes. So the bytes are
 * copied, right after the trust open and through that one descriptor, into
 * a sealed memfd (no write, no shrink, no growth, no further seals), and
 * every later step reads or maps that copy: the ELF check, the probe, the
 * host's dlopen, a swap's reopen. The bytes checked are the bytes that run,
 * whatever happens to the file after.
 *
 * The memfd is named after the file, so /proc/PID/maps and debuggers show
 * "/memfd:hk-cpu.so (deleted)". A file being written while it is copied is
 * caught by its size and times before and after the copy; it is copied once
 * more, then refused. */
#include "hk__loader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <unistd.h>

#define HK__SNAP_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)
#define HK__SNAP_CHUNK ((size_t)1 << 20)

/* Copies size bytes from the start of src to the start of dst. Returns the
 * bytes copied (fewer: src ended early), or -1 with errno. The kernel's
 * copies come first; a file system that offers neither gets read/write. */
static off_t hk__snap_copy(int src, int dst, off_t size)
{
    off_t done = 0;
    int how = 0; /* 0 copy_file_range, 1 sendfile, 2 pread/write */
    char buf[16384]; /* the last resort's, per call: loaders copy concurrently */
    while (done < size) {
        size_t want = (size_t)(size - done) < HK__SNAP_CHUNK ? (size_t)(size - done)
                                                             : HK__SNAP_CHUNK;
        ssize_t got;
        off_t in = done, out = done;
        if (how == 0) {
            got = copy_file_range(src, &in, dst, &out, want, 0);
        } else if (how == 1) {
            if (lseek(dst, done, SEEK_SET) < 0)
                return -1;
            got = sendfile(dst, src, &in, want);
        } else {
            got = pread(src, buf, want < sizeof(buf) ? want : sizeof(buf), done);
            if (got > 0 && pwrite(dst, buf, (size_t)got, done) != got)
                return -1;
        }
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && how < 2 && done == 0
            && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP
                || errno == EBADF)) {
            how++;
            continue;
        }
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        done += got;
    }
    return done;
}

/* 1 when the file's size and times are still those of *was. */
static int hk__snap_unchanged(const struct stat *was, const struct stat *now)
{
    return was->st_dev == now->st_dev && was->st_ino == now->st_ino
           && was->st_size == now->st_size && was->st_mode == now->st_mode
           && was->st_uid == now->st_uid
           && was->st_mtim.tv_sec == now->st_mtim.tv_sec
           && was->st_mtim.tv_nsec == now->st_mtim.tv_nsec
           && was->st_ctim.tv_sec == now->st_ctim.tv_sec
           && was->st_ctim.tv_nsec == now->st_ctim.tv_nsec;
}

/* One copy of fd's st->st_size bytes into a fresh memfd. Returns the memfd,
 * or -1 with errno (0: the file changed under the copy; *st is then its
 * newer fstat, for the next attempt). */
static int hk__snap_try(int fd, struct stat *st, const char *name)
{
    int mfd = memfd_create(name, MFD_ALLOW_SEALING | MFD_CLOEXEC);
    if (mfd < 0)
        return -1;
    struct stat after;
    off_t got = ftruncate(mfd, st->st_size) == 0 ? hk__snap_copy(fd, mfd, st->st_size) : -1;
    int err = errno;
    if (got >= 0 && fstat(fd, &after) != 0)
        got = -1, err = errno;
    if (got >= 0 && (got != st->st_size || !hk__snap_unchanged(st, &after))) {
        *st = after;
        got = -1, err = 0;
    }
    if (got >= 0 && fcntl(mfd, F_ADD_SEALS, HK__SNAP_SEALS) != 0)
        got = -1, err = errno;
    if (got < 0) {
        close(mfd);
        errno = err;
        return -1;
    }
    return mfd;
}

hk_status_t hk__snap_make(int fd, struct stat *st, const char *path, int *out, char *reason,
                          size_t n)
{
    const char *base = strrchr(path, '/');
    char name[200]; /* memfd names stop at 249 bytes */
    snprintf(name, sizeof(name), "%s", base ? base + 1 : path);
    const struct stat checked = *st;
    int mfd = -1;
    *out = -1;
    for (int attempt = 0; attempt < 2 && mfd < 0; attempt++) {
        mfd = hk__snap_try(fd, st, name);
        if (mfd < 0 && errno != 0)
            break;
        /* The trust rule judged the owner and mode of the first look. */
        if (st->st_uid != checked.st_uid || st->st_mode != checked.st_mode)
            break;
    }
    if (mfd >= 0) {
        *out = mfd;
        return HK_STATUS_OK;
    }
    if (errno == ENOMEM || errno == ENOSPC || errno == EMFILE || errno == ENFILE) {
        snprintf(reason, n, "no room for the loader's copy of the file: %s", strerror(errno));
        return HK_STATUS_OUT_OF_MEMORY;
    }
    if (errno != 0)
        snprintf(reason, n, "the loader's copy of the file failed: %s", strerror(errno));
    else
        snprintf(reason, n, "the file changed while it was read (install a new build by "
                 "renaming a finished file over it)");
    return HK_STATUS_LOAD_FAILED;
}
