/* handlekit: the one trust rule for every file the project loads or runs
 * (docs/security.md): plugins, hk-probe, hk-host's sibling programs, the
 * CUDA driver named by HK_CUDA_DRIVER, hk-validate's plugins. Internal, never
 * installed; compiled into the loader, the kit and the programs.
 *
 * A file is trusted when nobody but root and the effective user can have
 * chosen its bytes: the file, every directory from / down to it and every
 * symbolic link followed on the way are owned by root or the effective
 * user, and none is writable by group or others, except one sticky
 * directory (see hk__trust.c). The walk follows links itself, one component
 * at a time from an open descriptor, and opens the last component only once
 * it is known to be a regular file (or a directory when one is wanted), so
 * no device node, FIFO or socket is ever opened. Every later use goes
 * through the descriptor returned, never through the path again. */
#ifndef HK__TRUST_H
#define HK__TRUST_H

#include <stddef.h>
#include <sys/stat.h>

#include "hk_status.h"

/* Opens path under the trust rule. want_dir: the last component must be a
 * directory (opened O_RDONLY | O_DIRECTORY), else a regular file (opened
 * O_RDONLY). On success *fd is open (O_CLOEXEC), *st its fstat, and
 * resolved (may be NULL, size PATH_MAX) the path with every link resolved.
 * On failure *fd is -1, the status is NOT_FOUND (no such file), INSECURE
 * (the rule refused it) or LOAD_FAILED, and reason says why in one line; a
 * refusal of path itself (rather than of a directory or link on the way)
 * is worded without the path when self_unnamed is set. */
hk_status_t hk__trust_open(const char *path, int want_dir, int self_unnamed, int *fd,
                           struct stat *st, char *resolved, char *reason, size_t n);

/* The owner and mode part of the rule for one opened file or directory
 * (what: "file", "directory"; name may be NULL). */
hk_status_t hk__trust_stat(const struct stat *st, const char *what, const char *name,
                           char *reason, size_t n);

/* The rule for a descriptor a trusted caller opened and handed over (a
 * program started with /dev/fd/N): the file itself must be regular and pass
 * hk__trust_stat; the caller vouches for the way to it. *st gets its fstat. */
hk_status_t hk__trust_fd(int fd, struct stat *st, char *reason, size_t n);

/* fd of "/dev/fd/N" or "/proc/self/fd/N" (N a decimal descriptor number
 * that is open), else -1. */
int hk__trust_fd_name(const char *path);

#endif
