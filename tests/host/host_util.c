/* hk-host's tests: helpers that run the program as a user would (through
 * the shell) and check what it says. */
#include <errno.h>
#include <libgen.h>
#include <pty.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hk_shell.h"
#include "host_util.h"

int run(const char *cmd, char **out)
{
    return hk_shell(cmd, "2>&1", out);
}

int run_out(const char *cmd, char **out)
{
    return hk_shell(cmd, "2>/dev/null", out);
}

int run_err(const char *cmd, char **out)
{
    return hk_shell(cmd, "2>&1 >/dev/null", out);
}

/* Runs cmd with its stdout, stderr and stdin on a pseudo-terminal. */
int run_tty(const char *cmd, char **out)
{
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    if (pid < 0) {
        *out = NULL;
        return -1;
    }
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (ssize_t n; buf;) {
        if (len + 4096 > cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown)
                break;
            buf = grown;
        }
        n = read(master, buf + len, cap - len - 1);
        if (n > 0)
            len += (size_t)n;
        else if (!(n < 0 && errno == EINTR))
            break; /* EIO: the terminal's other side is closed */
    }
    if (buf)
        buf[len] = '\0';
    close(master);
    int st;
    waitpid(pid, &st, 0);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int has(const char *out, const char *needle)
{
    int ok = out && strstr(out, needle) != NULL;
    if (!ok)
        fprintf(stderr, "\n--- expected \"%s\" in:\n%s---\n", needle, out ? out : "(nothing)");
    return ok;
}

/* Runs cmd with runner (run, run_out or run_err), asserts that it exits with
 * rc and that its output has each string of the NULL-terminated list, and
 * returns the output (malloc'ed) for checks of the caller's own. */
static char *vexpect(int (*runner)(const char *, char **), const char *cmd, int rc, va_list ap)
{
    char *out;
    int got = runner(cmd, &out);
    if (got != rc)
        fprintf(stderr, "\n--- %s: exit status %d, expected %d\n", cmd, got, rc);
    CU_ASSERT_EQUAL(got, rc);
    for (const char *want; (want = va_arg(ap, const char *));)
        CU_ASSERT(has(out, want));
    return out;
}

/* vexpect, then the output is the caller's to check further and free. */
char *expect_kept(int (*runner)(const char *, char **), const char *cmd, int rc, ...)
{
    va_list ap;
    va_start(ap, rc);
    char *out = vexpect(runner, cmd, rc, ap);
    va_end(ap);
    return out;
}

/* vexpect, when the exit status and the strings are all there is to check. */
void expect(int (*runner)(const char *, char **), const char *cmd, int rc, ...)
{
    va_list ap;
    va_start(ap, rc);
    free(vexpect(runner, cmd, rc, ap));
    va_end(ap);
}

int lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

/* Feeds doc to tests/host/json_check.py with the Python expressions given
 * (NULL-terminated; the document is `d`). Returns the checker's status. */
int json_check(const char *doc, ...)
{
    char cmd[8192];
    int k = snprintf(cmd, sizeof cmd, "%s %s", HK_TEST_PYTHON, HK_TEST_JSON_CHECK);
    va_list ap;
    va_start(ap, doc);
    for (const char *e; (e = va_arg(ap, const char *));)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " '%s'", e);
    va_end(ap);
    FILE *p = popen(cmd, "w");
    if (!p)
        return -1;
    fputs(doc ? doc : "", p);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A fresh directory beside the build's tests: the loader refuses anything
 * below a directory that others can write, /tmp included. */
void temp_dir(char *dir, size_t len, const char *tag)
{
    char *copy = strdup(HK_TEST_HOST);
    snprintf(dir, len, "%s/../hk_host_%sXXXXXX", dirname(copy), tag);
    free(copy);
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
}

void remove_tree(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT(system(cmd) == 0);
}

void copy_file(const char *from, const char *to, mode_t mode)
{
    FILE *in = fopen(from, "rb"), *o = fopen(to, "wb");
    CU_ASSERT_FATAL(in && o);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        CU_ASSERT_FATAL(fwrite(buf, 1, n, o) == n);
    fclose(in);
    CU_ASSERT_FATAL(fclose(o) == 0);
    CU_ASSERT_FATAL(chmod(to, mode) == 0);
}

void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs(text, f);
    CU_ASSERT_FATAL(fclose(f) == 0);
    CU_ASSERT_FATAL(chmod(path, mode) == 0);
}

/* A bin directory with a copy of hk-host, its bench scripts, and whatever
 * the test puts beside them. */
void bin_dir(char *dir, size_t len)
{
    char from[1200], to[1200], *copy = strdup(HK_TEST_HOST);
    const char *bin = dirname(copy);
    temp_dir(dir, len, "bin");
    static const char *const files[] = {"hk-host", "hk-bench-plot.py", "hk-bench-compare.py"};
    for (int i = 0; i < 3; i++) {
        snprintf(from, sizeof from, "%s/%s", bin, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        copy_file(from, to, i == 0 ? 0755 : 0644); /* python3 runs the scripts */
    }
    free(copy);
}
