/* The start that the set-user-ID helper programs of the loader tests share
 * (secure_helper.c, select_helper.c): each includes this header once, in
 * its only source file. */
#ifndef SETUID_HELPER_H
#define SETUID_HELPER_H

#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

#include "hk_loader.h"

/* LeakSanitizer cannot inspect a process whose effective uid differs from
 * the real one and kills it at exit (and it ignores ASAN_OPTIONS there);
 * its documented hook turns it off for the set-user-ID run only. Unused in
 * builds without sanitizers. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return getauxval(AT_SECURE) != 0;
}

/* Prints "secure=<getauxval(AT_SECURE)>", then creates a loader whose
 * default directory is dir, with ignore_env as given. Returns it, or NULL
 * after printing "error=loader create failed". */
static hk_loader_t *helper_loader(const char *dir, int ignore_env)
{
    hk_loader_options_t o;
    hk_loader_t *loader = NULL;

    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.default_dir = dir;
    o.ignore_env = ignore_env;
    printf("secure=%lu\n", getauxval(AT_SECURE));
    if (hk_loader_create(&o, &loader) != HK_STATUS_OK) {
        printf("error=loader create failed\n");
        return NULL;
    }
    return loader;
}

#endif /* SETUID_HELPER_H */
