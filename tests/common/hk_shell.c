/* See hk_shell.h. */
#include "hk_shell.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

int hk_shell(const char *cmd, const char *redirect, char **out)
{
    char full[8192];
    snprintf(full, sizeof full, "%s %s", cmd, redirect);
    FILE *p = popen(full, "r");
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    if (!p || !buf) {
        if (p)
            pclose(p);
        free(buf);
        *out = NULL;
        return -1;
    }
    while ((n = fread(buf + len, 1, cap - 1 - len, p)) > 0) {
        len += n;
        if (len == cap - 1) {
            char *grown = realloc(buf, cap * 2);
            if (!grown)
                break;
            buf = grown;
            cap *= 2;
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int hk_shell_into(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
