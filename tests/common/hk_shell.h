/* Test programs: running a shell command as a user would and reading what
 * it writes (popen). Nothing here prints; the callers say what went wrong. */
#ifndef HK_SHELL_H
#define HK_SHELL_H

#include <stddef.h>

/* Runs "cmd redirect" through the shell (redirect: "2>&1" for stdout and
 * stderr, "2>/dev/null" for stdout only, "2>&1 >/dev/null" for stderr only).
 * Returns its exit status, -1 when it did not exit or could not start, and
 * all it wrote in a malloc'ed, NUL-terminated *out (NULL when it could not
 * start; the output may be cut short only when memory ran out). */
int hk_shell(const char *cmd, const char *redirect, char **out);

/* Runs cmd (its redirections written in it) and reads at most len - 1 bytes
 * of what it writes into out, NUL-terminated. Returns its exit status, -1
 * when it did not exit, or when it could not start (out then untouched). */
int hk_shell_into(const char *cmd, char *out, size_t len);

#endif /* HK_SHELL_H */
