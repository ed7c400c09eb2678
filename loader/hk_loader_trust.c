/* handlekit loader: the name rule of a plugin file. Who may have written a
 * candidate is decided by the project's one trust rule, common/lib/hk__trust.c
 * (docs/security.md), which every stage that opens a file goes through. */
#include "hk__loader.h"

#include <string.h>

int hk__plugin_name_ok(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    return n > 3 && strcmp(base + n - 3, ".so") == 0;
}
