/* hk-host's tests: helpers that run the program as a user would (through
 * the shell) and check what it says (host_util.c), and the suites' parts. */
#ifndef HOST_UTIL_H
#define HOST_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "hk_test.h"

/* No CUDA driver, no plugin path of the caller's: hk-host takes hk-cpu. */
#define NO_DRIVER                                                                         \
    "env -u LD_LIBRARY_PATH -u HK_PLUGIN_PATH -u HK_PLUGIN_PIN -u HK_PLUGIN_EXCLUDE "    \
    "HK_CUDA_DRIVER=/nonexistent/libcuda.so.1 "
/* The two versions of hk-twin in the plugin path. */
#define TWINS "env -u LD_LIBRARY_PATH HK_PLUGIN_PATH=" HK_TEST_TWIN_DIR " HK_CUDA_DRIVER=/x "

/* Run the shell command cmd; return its exit status (-1 when it did not
 * exit) and its output in a malloc'ed *out: stdout and stderr (run), stdout
 * only (run_out), stderr only (run_err), or all of it through a
 * pseudo-terminal (run_tty). */
int run(const char *cmd, char **out);
int run_out(const char *cmd, char **out);
int run_err(const char *cmd, char **out);
int run_tty(const char *cmd, char **out);

/* Whether out holds needle; when not, says so with out on stderr. */
int has(const char *out, const char *needle);

/* Run cmd with runner, assert that it exits with rc and that its output
 * has each string of the NULL-terminated list; expect_kept returns the
 * output (malloc'ed) for checks of the caller's own. */
char *expect_kept(int (*runner)(const char *, char **), const char *cmd, int rc, ...)
    __attribute__((sentinel));
void expect(int (*runner)(const char *, char **), const char *cmd, int rc, ...)
    __attribute__((sentinel));

/* The number of line breaks in s. */
int lines(const char *s);

/* Feeds doc to tests/host/json_check.py with the Python expressions given
 * (NULL-terminated; the document is `d`). Returns the checker's status. */
int json_check(const char *doc, ...) __attribute__((sentinel));

/* A fresh directory beside the build's tests (the loader refuses anything
 * below a directory that others can write, /tmp included); removing it. */
void temp_dir(char *dir, size_t len, const char *tag);
void remove_tree(const char *dir);
void copy_file(const char *from, const char *to, mode_t mode);
void write_file(const char *path, const char *text, mode_t mode);

/* A fresh bin directory with a copy of hk-host and its bench scripts, and
 * neither hk-validate nor hk-bench. */
void bin_dir(char *dir, size_t len);

/* The command-line tests (test_host_cli.c), added to suite s. */
void host_register_cli(CU_pSuite s);
void host_register_others(CU_pSuite s);

/* Warnings about the environment in every command (test_host_warn.c). */
void host_register_warn(CU_pSuite s);

/* The memory check against cgroup limits (test_host_mem.c). */
void host_register_mem(CU_pSuite s);

#endif /* HOST_UTIL_H */
