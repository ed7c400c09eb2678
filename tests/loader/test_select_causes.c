/* When a request resolves to nothing usable, hk_loader_last_error names what
 * was refused that could have been it, one line each after the summary: a
 * refused file of that name (NAME.so, or NAME-<version>.so beside other
 * versions), a directory of the search path that was refused or could not be
 * read, HK_PLUGIN_PATH when it was ignored. A plugin loaded under another
 * name, or a refused file of another name, is not named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_loader_util.h"
#include "test_select.h"

/* Writes a text file named like a plugin: refused at the open stage. */
static int write_text(const char *dir, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", dir, name);
    FILE *f = fopen(out, "w");
    if (!f)
        return -1;
    fputs("this is a text file named like a plugin, longer than an ELF header.\n", f);
    return fclose(f) == 0 && chmod(out, 0644) == 0 ? 0 : -1;
}

typedef struct causes {
    char root[4096], gw[4200], ok[4200], missing[4200];
    char tpx[4400], tpx2[4400], other[4400];
} causes_t;

/* root/gw (group-writable, refused), root/ok (the default directory: a
 * refused tp-x.so and tp-x-2.0.0.so, a refused tp-other.so, tp-sel 1.0.0),
 * root/missing (in HK_PLUGIN_PATH, never made). */
static hk_loader_t *causes_loader(causes_t *c)
{
    char path[8800], p[4400];
    hk_loader_options_t o;
    hk_loader_t *loader = NULL;
    if (tl_mkdtemp(c->root, sizeof(c->root)) != 0)
        return NULL;
    snprintf(c->gw, sizeof(c->gw), "%s/gw", c->root);
    snprintf(c->ok, sizeof(c->ok), "%s/ok", c->root);
    snprintf(c->missing, sizeof(c->missing), "%s/missing", c->root);
    if (mkdir(c->gw, 0700) != 0 || chmod(c->gw, 0775) != 0 || mkdir(c->ok, 0700) != 0
        || chmod(c->ok, 0755) != 0 || write_text(c->ok, "tp-x.so", c->tpx, sizeof(c->tpx))
        || write_text(c->ok, "tp-x-2.0.0.so", c->tpx2, sizeof(c->tpx2))
        || write_text(c->ok, "tp-other.so", c->other, sizeof(c->other))
        || write_text(c->gw, "tp-x.so", p, sizeof(p))
        || tl_copy(tl_plugin("sel-a/sel_1_0_0.so"), c->ok, "tp-sel.so", 0644, p, sizeof(p)))
        return NULL;
    snprintf(path, sizeof(path), "%s:%s", c->gw, c->missing);
    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.default_dir = c->ok;
    if (setenv("HK_PLUGIN_PATH", path, 1) != 0 || hk_loader_create(&o, &loader) != HK_STATUS_OK)
        return NULL;
    hk_loader_scan(loader);
    return loader;
}

static void test_not_found_names_refused(void)
{
    causes_t c;
    char want[32768];
    hk_loader_t *loader = causes_loader(&c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_plugin_t *p = (hk_plugin_t *)1;
    CU_ASSERT_EQUAL(hk_loader_select(loader, "tp-x", &p), HK_STATUS_NOT_FOUND);
    CU_ASSERT_PTR_NULL(p);
    snprintf(want, sizeof(want),
             "no plugin named tp-x is loaded (loaded: tp-sel); refused:\n"
             "  %s (HK_PLUGIN_PATH): scan: INSECURE: directory is writable by its group "
             "(mode 0775)\n"
             "  %s (HK_PLUGIN_PATH): scan: NOT_FOUND: cannot read directory: No such file or "
             "directory\n"
             "  %s: open: LOAD_FAILED: not an ELF file\n"
             "  %s: open: LOAD_FAILED: not an ELF file",
             c.gw, c.missing, c.tpx2, c.tpx);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), want);
    if (strcmp(hk_loader_last_error(loader), want) != 0)
        printf("\n    got:\n%s\n    want:\n%s\n", hk_loader_last_error(loader), want);
    CU_ASSERT_PTR_NULL(strstr(hk_loader_last_error(loader), "tp-other"));

    /* none in range: the versions found, then what was refused of the name */
    CU_ASSERT_EQUAL(hk_loader_select(loader, "tp-sel@^3", &p), HK_STATUS_NOT_FOUND);
    snprintf(want, sizeof(want),
             "tp-sel@^3: found 1.0.0 (%s/tp-sel.so: outside ^3); none in range; refused:\n"
             "  %s (HK_PLUGIN_PATH): scan: INSECURE: directory is writable by its group "
             "(mode 0775)\n"
             "  %s (HK_PLUGIN_PATH): scan: NOT_FOUND: cannot read directory: No such file or "
             "directory", c.ok, c.gw, c.missing);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), want);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    unsetenv("HK_PLUGIN_PATH");

    /* with nothing refused the summary stands alone, as before */
    loader = tl_loader(c.ok);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_EQUAL(unlink(c.tpx), 0);
    CU_ASSERT_EQUAL(unlink(c.tpx2), 0);
    hk_loader_scan(loader);
    CU_ASSERT_EQUAL(hk_loader_select(loader, "tp-x", &p), HK_STATUS_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader),
                           "no plugin named tp-x is loaded (loaded: tp-sel)");
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tl_rmtree(c.root);
}

/* The default directory refused: every name's failure says so. */
static void test_not_found_default_dir_refused(void)
{
    char root[4096], dir[4200], want[9000];
    CU_ASSERT_EQUAL_FATAL(tl_mkdtemp(root, sizeof(root)), 0);
    snprintf(dir, sizeof(dir), "%s/ww", root);
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(dir, 0777), 0);
    hk_loader_t *loader = tl_loader(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    hk_loader_scan(loader);
    hk_plugin_t *p = NULL;
    CU_ASSERT_EQUAL(hk_loader_select(loader, "hk-cpu", &p), HK_STATUS_NOT_FOUND);
    snprintf(want, sizeof(want), "no plugin named hk-cpu is loaded (no plugin is loaded); "
             "refused:\n  %s (the default directory): scan: INSECURE: directory is writable "
             "by others (mode 0777)", dir);
    CU_ASSERT_STRING_EQUAL(hk_loader_last_error(loader), want);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
    tl_rmtree(root);
}

void ts_register_causes(CU_pSuite s)
{
    hk_test_add(s, "NOT_FOUND names each refused candidate, one line each",
                test_not_found_names_refused);
    hk_test_add(s, "NOT_FOUND names a refused default directory",
                test_not_found_default_dir_refused);
}
