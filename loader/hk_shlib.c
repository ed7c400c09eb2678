/* libhkloader.so only: the default plugin directory of the shared library.
 *
 * The shared library's hk_loader_create gives a loader whose options name no
 * default_dir the directory "handlekit/plugins" beside the library file itself
 * (<libdir>/handlekit/plugins once installed). It is found at run time from the
 * library's own path, not compiled in, so an installed tree that is moved or
 * staged under DESTDIR still finds its own plugins. The library's path is
 * resolved against the working directory the first time a loader is created,
 * which matters only when it was loaded through a relative path.
 *
 * The loader's own hk_loader_create is compiled under the name
 * hk__loader_create_impl for this library (loader/SConscript); the static
 * library keeps it as it is, with no default directory. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hk_loader.h"

hk_status_t hk__loader_create_impl(const hk_loader_options_t *opts, hk_loader_t **out);

#define HK__PLUGIN_SUBDIR "handlekit/plugins"
#define HK__PROBE_SUBPATH "handlekit/bin/hk-probe"

static char hk__plugin_dir[PATH_MAX]; /* "" when it could not be found */
/* The installed probe program beside the library's programs, or "" (then the
 * loader's own default applies: beside the executable, then the build's). */
static char hk__probe_path[PATH_MAX];
static pthread_once_t hk__plugin_dir_once = PTHREAD_ONCE_INIT;

static void hk__plugin_dir_init(void)
{
    Dl_info info;
    char self[PATH_MAX];

    /* Any address inside this library names the library's file. */
    if (!dladdr(hk__plugin_dir, &info) || !info.dli_fname || !realpath(info.dli_fname, self))
        return;
    const char *dir = dirname(self); /* points into self */
    int n = snprintf(hk__plugin_dir, sizeof hk__plugin_dir, "%s/" HK__PLUGIN_SUBDIR, dir);
    if (n < 0 || (size_t)n >= sizeof hk__plugin_dir)
        hk__plugin_dir[0] = '\0';
    n = snprintf(hk__probe_path, sizeof hk__probe_path, "%s/" HK__PROBE_SUBPATH, dir);
    if (n < 0 || (size_t)n >= sizeof hk__probe_path || access(hk__probe_path, X_OK) != 0)
        hk__probe_path[0] = '\0';
}

hk_status_t hk_loader_create(const hk_loader_options_t *opts, hk_loader_t **out)
{
    hk_loader_options_t o;

    /* Malformed options go through as they are, to be refused there. */
    if (opts && opts->size < sizeof(uint32_t))
        return hk__loader_create_impl(opts, out);
    pthread_once(&hk__plugin_dir_once, hk__plugin_dir_init);
    memset(&o, 0, sizeof o);
    if (opts)
        memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
    o.size = sizeof o;
    /* A directory or probe the host chose is kept. */
    if (!o.default_dir && hk__plugin_dir[0])
        o.default_dir = hk__plugin_dir;
    if (!o.probe_path && hk__probe_path[0])
        o.probe_path = hk__probe_path;
    return hk__loader_create_impl(&o, out);
}
