/* Opening a closed module again for a swap: the file must still be the one
 * that was loaded, and it must answer as it did. A swap back to a plugin
 * whose file was replaced, or rewritten in place with another build, is
 * refused before any handle moves, and the closed module stays closed. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "swap_test.h"

/* A private directory under the swap plugins (mkdtemp: mode 0700, so the
 * loader's trust rule accepts it) holding a copy of hk-cpu 1.0.0. */
typedef struct rfx {
    char dir[PATH_MAX];
    char path[PATH_MAX + 16]; /* the copy */
    hk_loader_t *loader;
    hk_plugin_t *copy;   /* hk-cpu 1.0.0 from the copy */
    hk_plugin_t *b;      /* hk-cpu 1.0.1 */
    hk_mhandle_t *mh;    /* made on the copy, then moved to b */
} rfx_t;

/* Writes the bytes of from to a new file at to (mode 0644); 0 on success. */
static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        rc = fwrite(buf, 1, n, out) == n ? 0 : -1;
    if (in)
        fclose(in);
    if (out)
        rc = fclose(out) == 0 ? rc : -1;
    else if (fd >= 0)
        close(fd);
    return rc;
}

/* The copy loaded, a movable handle on it moved to hk-cpu 1.0.1: the copy's
 * module is closed. */
static int rfx_up(rfx_t *f)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s/reopen-XXXXXX", HK_SWAP_PLUGIN_DIR);
    if (!mkdtemp(f->dir))
        return 0;
    snprintf(f->path, sizeof f->path, "%s/hk-cpu.so", f->dir);
    if (copy_file(SWP_A, f->path) != 0 || !(f->loader = swp_loader()))
        return 0;
    f->copy = swp_open(f->loader, f->path);
    f->b = swp_open(f->loader, SWP_B);
    if (!f->copy || !f->b || hk_mhandle_create_on(f->copy, NULL, &f->mh) != HK_STATUS_OK)
        return 0;
    hk_swap_plugin_state_t s = {.size = sizeof s};
    return hk_loader_swap(f->loader, SWP_B, NULL, NULL) == HK_STATUS_OK
           && hk_plugin_swap_state(f->copy, &s) == HK_STATUS_OK && s.module == HK_MODULE_CLOSED
           && !swp_mapped(f->path);
}

static void rfx_down(rfx_t *f)
{
    if (f->mh)
        CU_ASSERT_EQUAL(hk_mhandle_destroy(f->mh), HK_STATUS_OK);
    if (f->loader)
        CU_ASSERT_EQUAL(hk_loader_destroy(f->loader), HK_STATUS_OK);
    unlink(f->path);
    rmdir(f->dir);
}

/* The swap back to the copy is refused with want (a status and a phrase of
 * the reason); nothing moved, and the copy's module is still closed. */
static void expect_refused(rfx_t *f, hk_status_t want, const char *phrase)
{
    CU_ASSERT_EQUAL(hk_loader_swap(f->loader, "hk-cpu@1.0.0", NULL, NULL), want);
    const char *why = hk_loader_last_error(f->loader);
    if (!strstr(why, phrase) || !strstr(why, f->path))
        fprintf(stderr, "\n--- expected \"%s\" and the path in \"%s\"\n", phrase, why);
    CU_ASSERT(strstr(why, phrase) != NULL && strstr(why, f->path) != NULL);
    hk_mhandle_state_t ms = {.size = sizeof ms};
    CU_ASSERT_EQUAL(hk_mhandle_state(f->mh, &ms), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(ms.plugin, f->b);
    hk_swap_plugin_state_t ps = {.size = sizeof ps};
    CU_ASSERT_EQUAL(hk_plugin_swap_state(f->copy, &ps), HK_STATUS_OK);
    CU_ASSERT_EQUAL(ps.module, HK_MODULE_CLOSED);
    CU_ASSERT_EQUAL(ps.reopens, 0);
    CU_ASSERT_PTR_NULL(hk_plugin_vtable(f->copy)->handle_create);
}

/* Another file renamed over the loaded one: refused before it is mapped. */
static void test_reopen_refuses_a_replaced_file(void)
{
    rfx_t f;
    CU_ASSERT_FATAL(rfx_up(&f));
    char next[PATH_MAX + 32];
    snprintf(next, sizeof next, "%s.next", f.path);
    CU_ASSERT_FATAL(copy_file(SWP_B, next) == 0);
    CU_ASSERT_FATAL(rename(next, f.path) == 0);
    expect_refused(&f, HK_STATUS_LOAD_FAILED, "no longer the file that was loaded");
    CU_ASSERT(!swp_mapped(f.path)); /* none of its code ran */
    rfx_down(&f);
}

/* The same file (device and inode) rewritten with another build: opened,
 * but refused for answering another version, and closed again. */
static void test_reopen_refuses_another_answer(void)
{
    rfx_t f;
    CU_ASSERT_FATAL(rfx_up(&f));
    struct stat before, after;
    CU_ASSERT_FATAL(stat(f.path, &before) == 0);
    CU_ASSERT_FATAL(copy_file(SWP_B, f.path) == 0);
    CU_ASSERT_FATAL(stat(f.path, &after) == 0);
    CU_ASSERT_FATAL(after.st_ino == before.st_ino && after.st_dev == before.st_dev);
    expect_refused(&f, HK_STATUS_LOAD_FAILED, "answers otherwise than when it was loaded");
    CU_ASSERT(!swp_mapped(f.path));
    rfx_down(&f);
}

void swp_register_reopen(void)
{
    CU_pSuite s = hk_test_suite("swap: opening a closed module again", NULL, NULL);
    hk_test_add(s, "a file replaced since it was loaded is refused unmapped",
                test_reopen_refuses_a_replaced_file);
    hk_test_add(s, "a file rewritten with another build is refused and closed",
                test_reopen_refuses_another_answer);
}
