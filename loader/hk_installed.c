/* libhkloader as installed: where its plugins and hk-probe are.
 *
 * The library of a build tree (<build>/loader/libhkloader.a, for the tests
 * and programs there) searches no default plugin directory and finds
 * hk-probe beside the executable or where it was built. The installed forms
 * wrap hk_loader_create so that a loader whose options name no default_dir
 * or probe_path gets those of the install, and they never look into a build
 * tree (their objects are compiled without HK_PROBE_BUILD_PATH;
 * loader/SConscript builds them):
 *   - the shared library finds both from its own file at run time,
 *     <its directory>/handlekit/plugins and <its directory>/
 *     HK_LIBEXEC_FROM_LIBDIR/handlekit/hk-probe, so an installed tree that is
 *     moved or staged under DESTDIR finds its own. The library's path is
 *     resolved against the working directory the first time a loader is
 *     created, which matters only when it was loaded through a relative
 *     path;
 *   - the static archive cannot know where the program that links it lives,
 *     so it has both paths of the install it was built for compiled in
 *     (HK_INSTALL_PLUGIN_DIR, HK_INSTALL_PROBE).
 * A probe path is given even when no file is there, so that a refusal names
 * the place the program was looked for. The loader's own hk_loader_create
 * is compiled under the name hk__loader_create_impl for both. */
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
#define HK__PROBE_SUBPATH "handlekit/hk-probe"

#if defined(HK_INSTALL_PLUGIN_DIR) && defined(HK_INSTALL_PROBE)

static const char *hk__plugin_dir(void)
{
    return HK_INSTALL_PLUGIN_DIR;
}

static const char *hk__probe_path(void)
{
    return HK_INSTALL_PROBE;
}

#elif defined(HK_LIBEXEC_FROM_LIBDIR)

static char hk__plugin_dir_buf[PATH_MAX]; /* "" when it could not be found */
static char hk__probe_path_buf[PATH_MAX];
static pthread_once_t hk__paths_once = PTHREAD_ONCE_INIT;

static void hk__paths_init(void)
{
    Dl_info info;
    char self[PATH_MAX];

    /* Any address inside this library names the library's file. */
    if (!dladdr(hk__plugin_dir_buf, &info) || !info.dli_fname
        || !realpath(info.dli_fname, self))
        return;
    const char *dir = dirname(self); /* points into self */
    int n = snprintf(hk__plugin_dir_buf, sizeof hk__plugin_dir_buf, "%s/" HK__PLUGIN_SUBDIR, dir);
    if (n < 0 || (size_t)n >= sizeof hk__plugin_dir_buf)
        hk__plugin_dir_buf[0] = '\0';
    n = snprintf(hk__probe_path_buf, sizeof hk__probe_path_buf,
                 "%s/" HK_LIBEXEC_FROM_LIBDIR "/" HK__PROBE_SUBPATH, dir);
    if (n < 0 || (size_t)n >= sizeof hk__probe_path_buf)
        hk__probe_path_buf[0] = '\0';
}

static const char *hk__plugin_dir(void)
{
    pthread_once(&hk__paths_once, hk__paths_init);
    return hk__plugin_dir_buf[0] ? hk__plugin_dir_buf : NULL;
}

static const char *hk__probe_path(void)
{
    pthread_once(&hk__paths_once, hk__paths_init);
    return hk__probe_path_buf[0] ? hk__probe_path_buf : NULL;
}

#else
#error "an installed loader needs HK_INSTALL_PLUGIN_DIR and HK_INSTALL_PROBE, or HK_LIBEXEC_FROM_LIBDIR"
#endif

hk_status_t hk_loader_create(const hk_loader_options_t *opts, hk_loader_t **out)
{
    hk_loader_options_t o;

    /* Malformed options go through as they are, to be refused there. */
    if (opts && opts->size < sizeof(uint32_t))
        return hk__loader_create_impl(opts, out);
    memset(&o, 0, sizeof o);
    if (opts)
        memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
    o.size = sizeof o;
    /* A directory or probe the host chose is kept. */
    if (!o.default_dir)
        o.default_dir = hk__plugin_dir();
    if (!o.probe_path)
        o.probe_path = hk__probe_path();
    return hk__loader_create_impl(&o, out);
}
