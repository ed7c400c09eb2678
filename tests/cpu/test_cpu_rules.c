/* hk-cpu against every rule of docs/abi.md: create and query struct sizes,
 * last_error_copy, handle provenance, the hk.blas1/1 argument rules in their
 * order (n <= 0, NULL, increments, spans at the extremes), aliasing, and the
 * hk.memory/1 rules. A refused call is checked to have touched nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hk_test.h"
#include "tcpu.h"

/* ---- create and handle_info sizes ---- */

static void test_create_info_size(void)
{
    hk_handle_t *h = (hk_handle_t *)&h;
    hk_create_info_t ci = {8, HK_DEVICE_CURRENT, 0};
    CU_ASSERT_EQUAL(vt->handle_create(&ci, &h), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(NULL), "info->size 8 is below 12"));
    ci.size = 11;
    CU_ASSERT_EQUAL(vt->handle_create(&ci, &h), HK_STATUS_INVALID_VALUE);
    /* 12 and longer: the bytes past what hk-cpu knows are ignored. */
    struct {
        hk_create_info_t ci;
        unsigned char future[20];
    } longer;
    memset(&longer, 0xee, sizeof longer);
    longer.ci.size = sizeof longer;
    longer.ci.device = 0;
    longer.ci.flags = 0;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(&longer.ci, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
    ci.size = 12;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(&ci, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

static void test_handle_info_size(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    struct {
        hk_handle_info_t info;
        unsigned char after[16];
    } b;
    /* Below 4: refused, nothing written. */
    memset(&b, 0xee, sizeof b);
    b.info.size = 3;
    CU_ASSERT_EQUAL(vt->handle_info(h, &b.info), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(b.info.size, 3);
    CU_ASSERT_EQUAL(b.info.device, (int32_t)0xeeeeeeee);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "info->size 3"));
    /* 4: only the size field, which says 4. */
    b.info.size = 4;
    CU_ASSERT_EQUAL(vt->handle_info(h, &b.info), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b.info.size, 4);
    CU_ASSERT_EQUAL(b.info.device, (int32_t)0xeeeeeeee);
    /* 8: size and device. */
    b.info.size = 8;
    CU_ASSERT_EQUAL(vt->handle_info(h, &b.info), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b.info.size, 8);
    CU_ASSERT_EQUAL(b.info.device, -1);
    CU_ASSERT_EQUAL(b.info.context_id, 0xeeeeeeeeeeeeeeeeull);
    /* Longer than hk-cpu knows: its sizeof written and said, the rest left. */
    memset(&b, 0xee, sizeof b);
    b.info.size = sizeof b;
    CU_ASSERT_EQUAL(vt->handle_info(h, &b.info), HK_STATUS_OK);
    CU_ASSERT_EQUAL(b.info.size, sizeof(hk_handle_info_t));
    CU_ASSERT_STRING_EQUAL(b.info.plugin_name, "hk-cpu");
    CU_ASSERT_EQUAL(b.after[0], 0xee);
    CU_ASSERT_EQUAL(b.after[15], 0xee);
    CU_ASSERT_EQUAL(vt->handle_info(h, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- last_error_copy ---- */

static void test_last_error_copy(void)
{
    char buf[32];
    size_t needed = 99;
    hk_handle_t *h = NULL;
    hk_create_info_t ci = {sizeof ci, 77, 0};
    CU_ASSERT_EQUAL(vt->handle_create(&ci, &h), HK_STATUS_INVALID_DEVICE);
    const char *want = "handle_create: hk-cpu has one device (0); asked for 77";
    /* NULL handle: this thread's last failed create, whole or cut. */
    char big[128];
    CU_ASSERT_EQUAL(vt->last_error_copy(NULL, big, sizeof big, &needed), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(big, want);
    CU_ASSERT_EQUAL(needed, strlen(want) + 1);
    memset(buf, 'x', sizeof buf);
    CU_ASSERT_EQUAL(vt->last_error_copy(NULL, buf, 10, &needed), HK_STATUS_OK);
    CU_ASSERT_EQUAL(memcmp(buf, want, 9), 0);
    CU_ASSERT_EQUAL(buf[9], '\0');
    CU_ASSERT_EQUAL(buf[10], 'x');
    CU_ASSERT_EQUAL(needed, strlen(want) + 1);
    /* len 0: nothing written, buf may be NULL, needed still told. */
    needed = 0;
    CU_ASSERT_EQUAL(vt->last_error_copy(NULL, NULL, 0, &needed), HK_STATUS_OK);
    CU_ASSERT_EQUAL(needed, strlen(want) + 1);
    buf[0] = 'x';
    CU_ASSERT_EQUAL(vt->last_error_copy(NULL, buf, 0, NULL), HK_STATUS_OK);
    CU_ASSERT_EQUAL(buf[0], 'x');
    /* buf NULL with len > 0. */
    CU_ASSERT_EQUAL(vt->last_error_copy(NULL, NULL, 4, &needed), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(needed, 0);

    /* A live handle: "" until a call fails, then that call's line. */
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->last_error_copy(h, buf, sizeof buf, &needed), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_EQUAL(needed, 1);
    CU_ASSERT_EQUAL(vt->set_stream(h, (void *)0x10), HK_STATUS_NOT_SUPPORTED);
    CU_ASSERT_EQUAL(vt->last_error_copy(h, big, sizeof big, &needed), HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(big, "set_stream: hk-cpu runs on the calling thread"));
    CU_ASSERT_STRING_EQUAL(big, vt->last_error(h));
    /* A call with a dead handle does not overwrite the create message. */
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->set_stream(h, NULL), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_STRING_EQUAL(vt->last_error(NULL), want);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "not a live hk-cpu handle"));
    /* A handle that is not live: INVALID_HANDLE and buf "". */
    memset(buf, 'x', sizeof buf);
    needed = 99;
    CU_ASSERT_EQUAL(vt->last_error_copy(h, buf, sizeof buf, &needed), HK_STATUS_INVALID_HANDLE);
    CU_ASSERT_EQUAL(buf[0], '\0');
    CU_ASSERT_EQUAL(needed, 0);
}

/* ---- provenance: only live handles of this copy of hk-cpu ---- */

/* Calls every slot that takes a handle with h; returns how many did not say
 * HK_STATUS_INVALID_HANDLE. */
static int count_accepted(const hk_vtable_t *v, const hk_blas1_v1_t *b, const hk_memory_v1_t *m,
                          hk_handle_t *h)
{
    float f[4] = {1, 2, 3, 4}, r = 0, a = 1;
    double d[4] = {1, 2, 3, 4}, dr = 0, da = 1;
    void *p = NULL, *s = NULL;
    hk_pointer_mode_t mode;
    hk_handle_info_t info = {.size = sizeof info};
    char buf[16];
    hk_status_t st[] = {
        v->set_stream(h, NULL),
        v->get_stream(h, &s),
        v->set_pointer_mode(h, HK_POINTER_MODE_HOST),
        v->get_pointer_mode(h, &mode),
        v->handle_info(h, &info),
        v->synchronize(h),
        v->last_error_copy(h, buf, sizeof buf, NULL),
        b->saxpy(h, 4, &a, f, 1, f, 1),
        b->daxpy(h, 4, &da, d, 1, d, 1),
        b->sscal(h, 4, &a, f, 1),
        b->dscal(h, 4, &da, d, 1),
        b->scopy(h, 4, f, 1, f, 1),
        b->dcopy(h, 4, d, 1, d, 1),
        b->sdot(h, 4, f, 1, f, 1, &r),
        b->ddot(h, 4, d, 1, d, 1, &dr),
        b->snrm2(h, 4, f, 1, &r),
        b->dnrm2(h, 4, d, 1, &dr),
        m->alloc(h, 64, &p),
        m->free_(h, NULL),
        m->copy_to_device(h, f, f, sizeof f),
        m->copy_to_host(h, f, f, sizeof f),
        m->memset_(h, f, 0, 0),
        v->handle_destroy(h), /* last: it would free a live one */
    };
    int accepted = 0;
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
        accepted += st[i] != HK_STATUS_INVALID_HANDLE;
    /* last_error of a handle that is not live says so, never crashes. */
    accepted += strstr(v->last_error(h), "not a live hk-cpu handle") == NULL;
    return accepted;
}

static void test_destroyed_handle(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
    CU_ASSERT_EQUAL(count_accepted(vt, blas, mem, h), 0);
    /* NULL: every slot refuses it but last_error and last_error_copy, which
     * give this thread's create message. */
    CU_ASSERT_EQUAL(count_accepted(vt, blas, mem, NULL), 2);
}

/* Pointers that were never hk-cpu handles: an unreadable page (any read
 * crashes), freed heap memory (any read is a use after free under ASan), a
 * byte copy of a live handle elsewhere, and a pointer inside a live handle. */
static void test_foreign_pointers(void)
{
    void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(page != MAP_FAILED);
    CU_ASSERT_EQUAL(count_accepted(vt, blas, mem, (hk_handle_t *)page), 0);
    munmap(page, 4096);

    void *heap = malloc(512);
    CU_ASSERT_FATAL(heap != NULL);
    uintptr_t freed = (uintptr_t)heap;
    free(heap);
    CU_ASSERT_EQUAL(count_accepted(vt, blas, mem, (hk_handle_t *)freed), 0);

    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    unsigned char *forged = malloc(4096);
    CU_ASSERT_FATAL(forged != NULL);
    memcpy(forged, (unsigned char *)h - 64, 320); /* slot header and handle, byte for byte */
    CU_ASSERT_EQUAL(count_accepted(vt, blas, mem, (hk_handle_t *)(forged + 64)), 0);
    free(forged);
    CU_ASSERT_EQUAL(count_accepted(vt, blas, mem, (hk_handle_t *)((char *)h + 8)), 0);
    CU_ASSERT_EQUAL(vt->synchronize(h), HK_STATUS_OK); /* still live and itself */
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

/* Two loaded copies of hk-cpu: each refuses the other's handles and still
 * serves its own. Memory is another matter: it belongs to the host, and any
 * build of hk-cpu frees a block another one made (a swap between two builds
 * moves handles, and the buffers follow), once. */
static void test_other_copy(void)
{
    const hk_vtable_t *vt2;
    const hk_blas1_v1_t *blas2;
    const hk_memory_v1_t *mem2;
    void *dl = tcpu_open_copy(&vt2, &blas2, &mem2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dl);
    CU_ASSERT_PTR_NOT_EQUAL(vt2, vt);
    hk_handle_t *mine, *theirs;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &mine), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(vt2->handle_create(NULL, &theirs), HK_STATUS_OK);
    void *block = NULL;
    CU_ASSERT_EQUAL(mem2->alloc(theirs, 256, &block), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem->free_(mine, block), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem2->free_(theirs, block), HK_STATUS_INVALID_VALUE); /* freed already */
    CU_ASSERT_EQUAL(count_accepted(vt, blas, mem, theirs), 0);
    CU_ASSERT_EQUAL(count_accepted(vt2, blas2, mem2, mine), 0);
    CU_ASSERT_EQUAL(vt->synchronize(mine), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt2->synchronize(theirs), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt2->handle_destroy(theirs), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(mine), HK_STATUS_OK);
    tcpu_close_copy(dl);
}

/* A destroyed handle's slot is not reused by the next creates, so a stale
 * pointer keeps failing instead of reaching a new handle. */
static void test_stale_handle_not_reused_soon(void)
{
    hk_handle_t *old;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &old), HK_STATUS_OK);
    CU_ASSERT_EQUAL(vt->handle_destroy(old), HK_STATUS_OK);
    int reused = 0;
    for (int i = 0; i < 64; i++) {
        hk_handle_t *h;
        CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
        reused += h == old;
        CU_ASSERT_EQUAL(vt->synchronize(old), HK_STATUS_INVALID_HANDLE);
        CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
    }
    CU_ASSERT_EQUAL(reused, 0);
}

/* ---- hk.blas1/1: nothing to do ---- */

static void test_nothing_to_do(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    static const hk_pointer_mode_t modes[] = {HK_POINTER_MODE_HOST, HK_POINTER_MODE_DEVICE};
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(vt->set_pointer_mode(h, modes[k]), HK_STATUS_OK);
        for (int64_t n = -2; n <= 0; n++) {
            float r = 5;
            double dr = 5;
            CU_ASSERT_EQUAL(blas->saxpy(h, n, NULL, NULL, 1, NULL, 0), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->daxpy(h, n, NULL, NULL, INT64_MIN, NULL, 1), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->sscal(h, n, NULL, NULL, 1), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->dscal(h, n, NULL, NULL, 1), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->scopy(h, n, NULL, 1, NULL, 0), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->dcopy(h, n, NULL, 1, NULL, 1), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->sdot(h, n, NULL, 1, NULL, 1, &r), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->ddot(h, n, NULL, 1, NULL, 1, &dr), HK_STATUS_OK);
            CU_ASSERT(r == 0 && dr == 0);
            r = dr = 5;
            CU_ASSERT_EQUAL(blas->snrm2(h, n, NULL, 1, &r), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->dnrm2(h, n, NULL, 1, &dr), HK_STATUS_OK);
            CU_ASSERT(r == 0 && dr == 0);
            /* A NULL result is allowed here. */
            CU_ASSERT_EQUAL(blas->sdot(h, n, NULL, 1, NULL, 1, NULL), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->ddot(h, n, NULL, 1, NULL, 1, NULL), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->snrm2(h, n, NULL, 1, NULL), HK_STATUS_OK);
            CU_ASSERT_EQUAL(blas->dnrm2(h, n, NULL, 1, NULL), HK_STATUS_OK);
        }
        /* incx <= 0 for scal and nrm2, INT64_MIN included. */
        float x[2] = {3, 4}, r = 5, a = 2;
        CU_ASSERT_EQUAL(blas->sscal(h, 2, NULL, NULL, 0), HK_STATUS_OK);
        CU_ASSERT_EQUAL(blas->sscal(h, 2, &a, x, INT64_MIN), HK_STATUS_OK);
        CU_ASSERT(x[0] == 3 && x[1] == 4);
        CU_ASSERT_EQUAL(blas->snrm2(h, 2, x, -1, &r), HK_STATUS_OK);
        CU_ASSERT_EQUAL(r, 0);
        CU_ASSERT_EQUAL(blas->snrm2(h, 2, NULL, INT64_MIN, NULL), HK_STATUS_OK);
    }
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- NULL pointers, increments, and the order of the checks ---- */

static void test_null_and_increments(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    float x[4] = {1, 2, 3, 4}, y[4] = {5, 6, 7, 8}, a = 2, r = 9;
    const float y0[4] = {5, 6, 7, 8};
    CU_ASSERT_EQUAL(blas->saxpy(h, 4, NULL, x, 1, y, 1), HK_STATUS_NULL_POINTER);
    CU_ASSERT_STRING_EQUAL(vt->last_error(h), "cpu_saxpy: alpha is NULL with n = 4");
    CU_ASSERT_EQUAL(blas->sdot(h, 4, x, 1, y, 1, NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "result is NULL"));
    CU_ASSERT_EQUAL(blas->snrm2(h, 4, NULL, 1, &r), HK_STATUS_NULL_POINTER);
    /* NULL is checked before increments, increments before spans. */
    CU_ASSERT_EQUAL(blas->scopy(h, 4, x, 1, NULL, 0), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(blas->scopy(h, INT64_MAX, x, 1, y, 0), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "incy is 0 for the destination"));
    /* The handle before everything. */
    CU_ASSERT_EQUAL(blas->scopy(NULL, 4, NULL, INT64_MIN, NULL, 0), HK_STATUS_INVALID_HANDLE);

    /* Destination increment 0: refused, y untouched. */
    CU_ASSERT_EQUAL(blas->saxpy(h, 4, &a, x, 1, y, 0), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(blas->scopy(h, 4, x, 1, y, 0), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(memcmp(y, y0, sizeof y), 0);
    /* INT64_MIN anywhere it is read: refused. */
    CU_ASSERT_EQUAL(blas->saxpy(h, 2, &a, x, INT64_MIN, y, 1), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "incx is INT64_MIN"));
    CU_ASSERT_EQUAL(blas->saxpy(h, 2, &a, x, 1, y, INT64_MIN), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(blas->scopy(h, 2, x, INT64_MIN, y, 1), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(blas->sdot(h, 2, x, 1, y, INT64_MIN, &r), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(memcmp(y, y0, sizeof y), 0);
    CU_ASSERT_EQUAL(r, 9);
    /* A source increment of 0 reads one element n times. */
    CU_ASSERT_EQUAL(blas->saxpy(h, 4, &a, x + 2, 0, y, 1), HK_STATUS_OK);
    CU_ASSERT(y[0] == 11 && y[1] == 12 && y[2] == 13 && y[3] == 14);
    CU_ASSERT_EQUAL(blas->sdot(h, 3, x + 1, 0, x, 1, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(r, 2 * (1 + 2 + 3));
    CU_ASSERT_EQUAL(blas->scopy(h, 4, x + 3, 0, y, -1), HK_STATUS_OK);
    CU_ASSERT(y[0] == 4 && y[3] == 4);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- spans: refused without touching anything, UBSan-clean at the extremes ---- */

#define GUARD 8
static float fbuf[GUARD + 4 + GUARD];
static double dbuf[GUARD + 4 + GUARD];

static void fill_guards(void)
{
    for (size_t i = 0; i < sizeof fbuf / sizeof fbuf[0]; i++)
        fbuf[i] = (float)(100 + i);
    for (size_t i = 0; i < sizeof dbuf / sizeof dbuf[0]; i++)
        dbuf[i] = (double)(200 + i);
}

static int guards_intact(void)
{
    for (size_t i = 0; i < sizeof fbuf / sizeof fbuf[0]; i++)
        if (fbuf[i] != (float)(100 + i))
            return 0;
    for (size_t i = 0; i < sizeof dbuf / sizeof dbuf[0]; i++)
        if (dbuf[i] != (double)(200 + i))
            return 0;
    return 1;
}

/* Twelve calls whose spans cannot be: each is refused and nothing around
 * the vectors (guard elements on both sides) changes. */
static void test_spans_refused(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    float *fx = fbuf + GUARD, a = 2, r = 7;
    double *dx = dbuf + GUARD, da = 2, dr = 7;
    /* The top of the address space: 8 floats from here wrap around. */
    const float *top = (const float *)(uintptr_t)(UINTPTR_MAX - 15);
    double *dtop = (double *)(uintptr_t)(UINTPTR_MAX - 15);
    const int64_t big = (int64_t)1 << 60;
    fill_guards();
    const struct {
        const char *what;
        hk_status_t st;
    } c[] = {
#define SPAN(call) {#call, (call)}
        SPAN(blas->saxpy(h, 2, &a, fx, 1, fx, INT64_MAX)),
        SPAN(blas->saxpy(h, 2, &a, fx, INT64_MAX, fx, 1)),
        SPAN(blas->daxpy(h, INT64_MAX, &da, dx, 1, dx, 1)),
        SPAN(blas->scopy(h, 3, fx, 1, fx, INT64_MAX / 2 + 1)),
        SPAN(blas->dcopy(h, big, dx, 1, dx, 1)),
        SPAN(blas->dcopy(h, 2, dx, -INT64_MAX, dx, 1)),
        SPAN(blas->sdot(h, 8, top, 1, fx, 1, &r)),
        SPAN(blas->ddot(h, 2, dx, 1, dx, -big, &dr)),
        SPAN(blas->snrm2(h, 2, fx, INT64_MAX, &r)),
        SPAN(blas->sscal(h, 2, &a, fx, INT64_MAX / 4)),
        SPAN(blas->dscal(h, 3, &da, dtop, 1)),
        SPAN(blas->dnrm2(h, 2, dx, big, &dr)),
#undef SPAN
    };
    int wrong = 0;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        if (c[i].st != HK_STATUS_INVALID_VALUE) {
            fprintf(stderr, "\n    %s returned %d\n", c[i].what, (int)c[i].st);
            wrong++;
        }
    }
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT(guards_intact());
    CU_ASSERT(r == 7 && dr == 7);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

/* Each refusal's line names the vector and the problem. */
static void test_span_messages(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    float *fx = fbuf + GUARD, a = 2, r = 7;
    double *dx = dbuf + GUARD, dr = 7;
    const float *top = (const float *)(uintptr_t)(UINTPTR_MAX - 15);
    fill_guards();
    CU_ASSERT_EQUAL(blas->saxpy(h, 2, &a, fx, 1, fx, INT64_MAX), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_STRING_EQUAL(vt->last_error(h), "cpu_saxpy: y: n = 2 with increment "
                                              "9223372036854775807 spans more than "
                                              "PTRDIFF_MAX bytes");
    CU_ASSERT_EQUAL(blas->dcopy(h, 2, dx, -INT64_MAX, dx, 1), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "cpu_dcopy: x: n = 2 with increment "
                                                     "-9223372036854775807"));
    CU_ASSERT_EQUAL(blas->sdot(h, 8, top, 1, fx, 1, &r), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "cpu_sdot: x: 32 bytes from"));
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "wrap around the address space"));
    CU_ASSERT_EQUAL(blas->ddot(h, 2, dx, 1, dx, -((int64_t)1 << 60), &dr),
                    HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "cpu_ddot: y:"));
    CU_ASSERT(guards_intact());
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

/* One element with the largest increments: a valid span of one element,
 * computed right, with no overflow in the index arithmetic (UBSan). */
static void test_spans_extreme_but_valid(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    static const int64_t incs[] = {INT64_MAX, -INT64_MAX, INT64_MAX - 1, 0};
    for (size_t i = 0; i < sizeof incs / sizeof incs[0]; i++) {
        int64_t inc = incs[i], dinc = inc ? inc : 1; /* scal, nrm2: incx > 0 or nothing */
        fill_guards();
        float *x = fbuf + GUARD, *y = fbuf + GUARD + 1, a = 2, r = 0;
        double *dx = dbuf + GUARD, *dy = dbuf + GUARD + 1, da = 2, dr = 0;
        const float x0 = *x, y0 = *y;
        const double dx0 = *dx, dy0 = *dy;
        CU_ASSERT_EQUAL(blas->saxpy(h, 1, &a, x, inc, y, dinc), HK_STATUS_OK);
        CU_ASSERT_EQUAL(*y, y0 + 2 * x0);
        CU_ASSERT_EQUAL(blas->ddot(h, 1, dx, inc, dy, -dinc, &dr), HK_STATUS_OK);
        CU_ASSERT_EQUAL(dr, dx0 * dy0);
        CU_ASSERT_EQUAL(blas->dcopy(h, 1, dx, inc, dy, dinc), HK_STATUS_OK);
        CU_ASSERT_EQUAL(*dy, dx0);
        if (dinc > 0) {
            CU_ASSERT_EQUAL(blas->snrm2(h, 1, x, dinc, &r), HK_STATUS_OK);
            CU_ASSERT_EQUAL(r, x0);
            CU_ASSERT_EQUAL(blas->dscal(h, 1, &da, dx, dinc), HK_STATUS_OK);
            CU_ASSERT_EQUAL(*dx, 2 * dx0);
        }
        /* Nothing outside the one element each call may touch. */
        CU_ASSERT_EQUAL(fbuf[GUARD - 1], (float)(100 + GUARD - 1));
        CU_ASSERT_EQUAL(fbuf[GUARD + 2], (float)(100 + GUARD + 2));
        CU_ASSERT_EQUAL(dbuf[GUARD + 2], (double)(200 + GUARD + 2));
    }
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- aliasing and alpha == 0 ---- */

static void test_aliasing(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    double v[6] = {1, 2, 3, 4, 5, 6}, a = 3, r = 0;
    /* axpy with x == y, same increment: y = a*y + y. */
    CU_ASSERT_EQUAL(blas->daxpy(h, 3, &a, v, 2, v, 2), HK_STATUS_OK);
    CU_ASSERT(v[0] == 4 && v[1] == 2 && v[2] == 12 && v[4] == 20 && v[5] == 6);
    /* copy with x == y leaves y as it was. */
    CU_ASSERT_EQUAL(blas->dcopy(h, 6, v, -1, v, -1), HK_STATUS_OK);
    CU_ASSERT(v[0] == 4 && v[2] == 12 && v[5] == 6);
    /* dot with x == y sums squares. */
    CU_ASSERT_EQUAL(blas->ddot(h, 3, v, 2, v, 2, &r), HK_STATUS_OK);
    CU_ASSERT_EQUAL(r, 16.0 + 144 + 400);
    /* alpha == 0: y alone, even with NaN in x (reference BLAS returns early). */
    double nan_x[2] = {0.0 / 0.0, 1}, y[2] = {7, 8}, zero = 0;
    CU_ASSERT_EQUAL(blas->daxpy(h, 2, &zero, nan_x, 1, y, 1), HK_STATUS_OK);
    CU_ASSERT(y[0] == 7 && y[1] == 8);
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

/* ---- hk.memory/1 ---- */

static void test_memory_rules(void)
{
    hk_handle_t *h;
    CU_ASSERT_EQUAL_FATAL(vt->handle_create(NULL, &h), HK_STATUS_OK);
    void *p = (void *)&h;
    CU_ASSERT_EQUAL(mem->alloc(h, 0, &p), HK_STATUS_OK);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(mem->free_(h, NULL), HK_STATUS_OK);
    /* Sizes that cannot be allocated: a reason, *out NULL, no crash. */
    p = (void *)&h;
    CU_ASSERT_EQUAL(mem->alloc(h, SIZE_MAX, &p), HK_STATUS_OUT_OF_MEMORY);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "rounding up to 64-byte blocks overflows"));
    CU_ASSERT_EQUAL(mem->alloc(h, SIZE_MAX / 2, &p), HK_STATUS_OUT_OF_MEMORY);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "more than this machine's memory"));
    /* Foreign pointers: refused, nothing freed. */
    int local;
    void *heap = malloc(64);
    CU_ASSERT_FATAL(heap != NULL);
    CU_ASSERT_EQUAL(mem->free_(h, &local), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "is not the start of a live hk-cpu"));
    CU_ASSERT_EQUAL(mem->free_(h, heap), HK_STATUS_INVALID_VALUE);
    free(heap); /* still ours to free: hk-cpu did not */
    CU_ASSERT_EQUAL_FATAL(mem->alloc(h, 256, &p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem->free_(h, (char *)p + 64), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(mem->memset_(h, p, 1, 256), HK_STATUS_OK); /* still allocated */
    CU_ASSERT_EQUAL(mem->free_(h, p), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem->free_(h, p), HK_STATUS_INVALID_VALUE); /* twice */
    /* Copies and memset: 0 bytes touch nothing, NULL named, wrap refused. */
    char a[8] = "abcdefg", b[8] = "ABCDEFG";
    CU_ASSERT_EQUAL(mem->copy_to_device(h, NULL, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem->copy_to_host(h, NULL, a, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem->memset_(h, NULL, 0, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(mem->copy_to_device(h, a, NULL, 4), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "src is NULL"));
    CU_ASSERT_EQUAL(mem->memset_(h, NULL, 0, 4), HK_STATUS_NULL_POINTER);
    void *top = (void *)(uintptr_t)(UINTPTR_MAX - 3);
    CU_ASSERT_EQUAL(mem->copy_to_host(h, a, top, 8), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(mem->copy_to_device(h, top, b, 8), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(mem->memset_(h, top, 0, 8), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt->last_error(h), "wrap around the address space"));
    CU_ASSERT_STRING_EQUAL(a, "abcdefg");
    CU_ASSERT_EQUAL(mem->copy_to_host(h, a, b, 3), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(a, "ABCdefg");
    CU_ASSERT_EQUAL(vt->handle_destroy(h), HK_STATUS_OK);
}

void tcpu_register_rules(void)
{
    CU_pSuite s = hk_test_suite("hk-cpu ABI rules", tcpu_open, tcpu_close);
    static const hk_test_case_t tests[] = {
        {"create_info: size below 12 refused, longer ignored", test_create_info_size},
        {"handle_info: size below 4 refused, n written and said", test_handle_info_size},
        {"last_error_copy: NULL, cut, len 0, NULL buf, dead handle", test_last_error_copy},
        {"destroyed handle: every slot INVALID_HANDLE", test_destroyed_handle},
        {"foreign pointers as handles: INVALID_HANDLE, never read", test_foreign_pointers},
        {"another loaded copy of hk-cpu: handles and memory refused", test_other_copy},
        {"a destroyed handle's slot is not reused by the next creates",
         test_stale_handle_not_reused_soon},
        {"n <= 0 and scal/nrm2 incx <= 0: OK, 0 results, NULL allowed", test_nothing_to_do},
        {"NULL, INT64_MIN and destination increment 0, in order", test_null_and_increments},
        {"spans that overflow or wrap: refused, nothing touched", test_spans_refused},
        {"span refusals name the vector", test_span_messages},
        {"one element with extreme increments: right, no overflow", test_spans_extreme_but_valid},
        {"aliasing x == y and alpha == 0", test_aliasing},
        {"hk.memory/1: sizes, foreign frees, NULL, wrap", test_memory_rules},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
