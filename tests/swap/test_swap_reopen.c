/* Opening a closed module again for a swap. By default it is the loader's
 * snapshot of the file that is opened again: a swap back to a plugin whose
 * file was since replaced or rewritten in place runs the bytes that were
 * loaded first, and the new file stays unmapped. With load_in_place the
 * file itself is opened again: it must still be the one that was loaded,
 * and answer as it did, or the swap back is refused before any handle
 * moves, and the closed module stays closed. */
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
    int in_place;        /* the loader maps files in place */
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
static int rfx_up(rfx_t *f, int in_place)
{
    memset(f, 0, sizeof *f);
    f->in_place = in_place;
    snprintf(f->dir, sizeof f->dir, "%s/reopen-XXXXXX", HK_SWAP_PLUGIN_DIR);
    if (!mkdtemp(f->dir))
        return 0;
    snprintf(f->path, sizeof f->path, "%s/hk-cpu.so", f->dir);
    hk_loader_options_t o = {.size = sizeof o, .ignore_env = 1, .load_in_place = 1};
    if (copy_file(SWP_A, f->path) != 0)
        return 0;
    if (in_place)
        hk_loader_create(&o, &f->loader);
    else
        f->loader = swp_loader();
    if (!f->loader)
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

/* The swap back to the copy opens its snapshot again: the handle computes
 * on hk-cpu 1.0.0, and the file at the path now is not mapped. */
static void expect_reopened(rfx_t *f)
{
    CU_ASSERT_EQUAL(hk_loader_swap(f->loader, "hk-cpu@1.0.0", NULL, NULL), HK_STATUS_OK);
    hk_mhandle_state_t ms = {.size = sizeof ms};
    CU_ASSERT_EQUAL(hk_mhandle_state(f->mh, &ms), HK_STATUS_OK);
    CU_ASSERT_PTR_EQUAL(ms.plugin, f->copy);
    hk_swap_plugin_state_t ps = {.size = sizeof ps};
    CU_ASSERT_EQUAL(hk_plugin_swap_state(f->copy, &ps), HK_STATUS_OK);
    CU_ASSERT_EQUAL(ps.module, HK_MODULE_OPEN);
    CU_ASSERT_EQUAL(ps.reopens, 1);
    hk_blas1_v1_t b;
    hk_memory_v1_t m;
    swp_tables(&b, &m);
    float x[4] = {1, 2, 3, 4}, y[4] = {0}, alpha = 2.0f;
    CU_ASSERT_EQUAL(b.saxpy(hk_mhandle_handle(f->mh), 4, &alpha, x, 1, y, 1), HK_STATUS_OK);
    CU_ASSERT(y[0] == 2.0f && y[3] == 8.0f);
    CU_ASSERT(!swp_mapped(f->path));
}

/* Another file renamed over the loaded one: refused before it is mapped
 * (in place), or the snapshot opened again. */
static void replaced(int in_place)
{
    rfx_t f;
    CU_ASSERT_FATAL(rfx_up(&f, in_place));
    char next[PATH_MAX + 32];
    snprintf(next, sizeof next, "%s.next", f.path);
    CU_ASSERT_FATAL(copy_file(SWP_B, next) == 0);
    CU_ASSERT_FATAL(rename(next, f.path) == 0);
    if (!in_place) {
        expect_reopened(&f);
    } else {
        expect_refused(&f, HK_STATUS_LOAD_FAILED, "no longer the file that was loaded");
        CU_ASSERT(!swp_mapped(f.path)); /* none of its code ran */
    }
    rfx_down(&f);
}

/* The same file (device and inode) rewritten with another build: in place,
 * opened, but refused for answering another version, and closed again; else
 * the snapshot opened again. */
static void rewritten(int in_place)
{
    rfx_t f;
    CU_ASSERT_FATAL(rfx_up(&f, in_place));
    struct stat before, after;
    CU_ASSERT_FATAL(stat(f.path, &before) == 0);
    CU_ASSERT_FATAL(copy_file(SWP_B, f.path) == 0);
    CU_ASSERT_FATAL(stat(f.path, &after) == 0);
    CU_ASSERT_FATAL(after.st_ino == before.st_ino && after.st_dev == before.st_dev);
    if (!in_place) {
        expect_reopened(&f);
    } else {
        expect_refused(&f, HK_STATUS_LOAD_FAILED, "answers otherwise than when it was loaded");
        CU_ASSERT(!swp_mapped(f.path));
    }
    rfx_down(&f);
}

static void test_reopen_snapshot_of_a_replaced_file(void)
{
    replaced(0);
}

static void test_reopen_snapshot_of_a_rewritten_file(void)
{
    rewritten(0);
}

static void test_reopen_refuses_a_replaced_file(void)
{
    replaced(1);
}

static void test_reopen_refuses_another_answer(void)
{
    rewritten(1);
}

void swp_register_reopen(void)
{
    CU_pSuite s = hk_test_suite("swap: opening a closed module again", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"a file replaced since it was loaded: its snapshot opened again",
         test_reopen_snapshot_of_a_replaced_file},
        {"a file rewritten with another build: its snapshot opened again",
         test_reopen_snapshot_of_a_rewritten_file},
        {"in place: a file replaced since it was loaded is refused unmapped",
         test_reopen_refuses_a_replaced_file},
        {"in place: a file rewritten with another build is refused and closed",
         test_reopen_refuses_another_answer},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
