/* hk.kernels/1 through hk-cuda: images whose sizes lie, and images too short
 * to hold any header. The driver reads an image as far as the sizes inside
 * it say, and a header's worth of bytes before it knows the kind
 * (docs/contexts.md fact 27), so load must refuse every such image before
 * the driver sees it, or hand the driver a copy it can read. The buffers
 * here are exactly as long as the image: a driver (or the simulated one,
 * which reads as the real one does) reading past them is a heap overflow
 * that AddressSanitizer reports. See test_cuda_kernels.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_le.h"
#include "test_cuda_kernels.h"

#define plug hkct_plug
#define sim hkct_sim
#define on_sim hkct_on_sim
#define SCENARIO HKCT_SCENARIO
#define create hkct_create

/* Either of the two: what the driver makes of bytes that are no image. */
#define OK_OR_INVALID ((hk_status_t)-1)

/* load of a heap copy of image (n bytes, exactly): want (or OK_OR_INVALID),
 * a message naming what, and (want not OK) nothing left loaded; the driver
 * not called when refused says so. */
static void load_copy(hk_handle_t *h, const void *image, size_t n, hk_status_t want,
                      const char *what, int before_driver)
{
    unsigned char *copy = malloc(n ? n : 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
    memcpy(copy, image, n);
    unsigned long loads = on_sim ? sim.calls("cuLibraryLoadData") : 0;
    hk_library_t *lib = (hk_library_t *)1;
    hk_status_t st = tk_k->load(h, copy, n, &lib);
    const char *msg = plug.vt->last_error(h);
    if (want == OK_OR_INVALID)
        want = st == HK_STATUS_OK ? HK_STATUS_OK : HK_STATUS_INVALID_VALUE;
    if (st != want || (what && !strstr(msg, what)))
        printf("\n  load of %zu bytes (%s): %d, want %d (%s) ", n, what ? what : "",
               (int)st, (int)want, msg);
    CU_ASSERT_EQUAL(st, want);
    if (what)
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, what));
    if (on_sim && before_driver)
        CU_ASSERT_EQUAL(sim.calls("cuLibraryLoadData"), loads);
    if (st == HK_STATUS_OK) {
        CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    } else {
        CU_ASSERT_PTR_NULL(lib);
    }
    free(copy);
}

/* 1 to 4 bytes: without a NUL refused as PTX; with one the driver gets a
 * padded copy and answers for itself (the simulated driver refuses it as no
 * image it knows); either way nothing is read past. */
SCENARIO(t_tiny_images)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    size_t libraries = on_sim ? sim.libraries() : 0;
    hk_status_t driver_says = on_sim ? HK_STATUS_INVALID_VALUE : OK_OR_INVALID;
    load_copy(h, "a", 1, HK_STATUS_INVALID_VALUE, "no terminating NUL", 1);
    load_copy(h, "//x", 3, HK_STATUS_INVALID_VALUE, "no terminating NUL", 1);
    load_copy(h, "ab", 3, driver_says, NULL, 0);
    load_copy(h, "\0\0\0", 4, driver_says, NULL, 0);
    load_copy(h, "", 1, driver_says, NULL, 0);
    if (on_sim)
        CU_ASSERT_EQUAL(sim.libraries(), libraries);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* The offset of the fatbin's first entry whose payload is a cubin; 0 if none. */
static size_t cubin_entry(const unsigned char *f, size_t n, size_t *cubin_size)
{
    size_t end = 16 + (size_t)hk_get_le(f + 8, 8);
    for (size_t off = 16; end <= n && off + 16 <= end;) {
        size_t hs = (size_t)hk_get_le(f + off + 4, 4), pay = (size_t)hk_get_le(f + off + 8, 8);
        if (hs < 16 || off + hs + pay > end)
            return 0;
        if (pay >= 4 && memcmp(f + off + hs, "\177ELF", 4) == 0) {
            *cubin_size = pay;
            return off;
        }
        off += hs + pay;
    }
    return 0;
}

typedef struct lie {
    const char *what;
    size_t at;      /* offset of the field in the image */
    int bytes;      /* its width */
    uint64_t value; /* written there */
} lie_t;

/* tk_fatbin with each lie written into a copy (or cut short): refused before
 * the driver reads it, naming the fatbin. The intact fatbin loads. */
SCENARIO(t_lying_fatbins)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    size_t n = tk_fatbin_size, cub = 0, e = cubin_entry(tk_fatbin, n, &cub);
    CU_ASSERT_FATAL(e > 0);
    size_t hs = (size_t)hk_get_le(tk_fatbin + e + 4, 4);
    const lie_t lies[] = {
        {"fatbin's header claims", 8, 8, hk_get_le(tk_fatbin + 8, 8) + 4096},
        {"fatbin's header claims", 6, 2, 8},
        {"entry 1 has a header", 16 + 4, 4, 0x7fffffff},
        {"entry 1 has a header", 16 + 4, 4, 4},
        {"entry 1 claims", 16 + 8, 8, 1u << 20},
        {"entry", 8, 8, 16}, /* the fatbin smaller than its first entry */
        {"the section headers of the cubin in the fatbin's entry", e + hs + 0x28, 8, cub + 4096},
    };
    unsigned char *copy = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        memcpy(copy, tk_fatbin, n);
        hk_put_le(copy + lies[i].at, lies[i].bytes, lies[i].value);
        load_copy(h, copy, n, HK_STATUS_INVALID_VALUE, lies[i].what, 1);
    }
    load_copy(h, tk_fatbin, n / 2, HK_STATUS_INVALID_VALUE, "fatbin's header claims", 1);
    load_copy(h, tk_fatbin, 16, HK_STATUS_INVALID_VALUE, "fatbin's header claims", 1);
    load_copy(h, tk_fatbin, n, HK_STATUS_OK, NULL, 0);
    free(copy);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* The cubin of tk_fatbin alone, with each lie: refused before the driver,
 * naming the cubin. The intact cubin loads and its kernel computes. */
SCENARIO(t_lying_cubins)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    size_t n = 0, e = cubin_entry(tk_fatbin, tk_fatbin_size, &n);
    CU_ASSERT_FATAL(e > 0);
    const unsigned char *c = tk_fatbin + e + hk_get_le(tk_fatbin + e + 4, 4);
    uint64_t phoff = hk_get_le(c + 0x20, 8), shoff = hk_get_le(c + 0x28, 8);
    uint64_t phnum = hk_get_le(c + 0x38, 2), shnum = hk_get_le(c + 0x3c, 2), s = 1;
    CU_ASSERT_FATAL(phnum > 0 && shnum > 1);
    while (s < shnum && hk_get_le(c + shoff + s * 64 + 4, 4) == 8) /* SHT_NOBITS: no bytes */
        s++;
    CU_ASSERT_FATAL(s < shnum);
    char section[64];
    snprintf(section, sizeof section, "section %llu of the cubin ends past",
             (unsigned long long)s);
    const lie_t lies[] = {
        {"the program headers of the cubin end past", 0x20, 8, n + 4096},
        {"the program headers of the cubin end past", 0x38, 2, 0xfff0},
        {"the section headers of the cubin end past", 0x28, 8, n + 4096},
        {"the section headers of the cubin end past", 0x3c, 2, 0xfff0},
        {section, shoff + s * 64 + 0x20, 8, 1ull << 32},
        {"segment 0 of the cubin ends past", phoff + 0x20, 8, 1ull << 32},
        {"segment 0 of the cubin ends past", phoff + 0x08, 8, n + 65536},
        {"the cubin is not a 64-bit ELF", 4, 1, 1},
    };
    unsigned char *copy = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        memcpy(copy, c, n);
        hk_put_le(copy + lies[i].at, lies[i].bytes, lies[i].value);
        load_copy(h, copy, n, HK_STATUS_INVALID_VALUE, lies[i].what, 1);
    }
    load_copy(h, c, n / 2, HK_STATUS_INVALID_VALUE, "cubin", 1);
    load_copy(h, c, 64, HK_STATUS_INVALID_VALUE, "cubin", 1);
    memcpy(copy, c, n);
    hk_library_t *lib = tk_load(h, copy, n);
    free(copy); /* the image was copied */
    hk_kernel_t *k = NULL;
    if (lib) {
        CU_ASSERT_EQUAL(tk_k->get_kernel(h, lib, "hkt_axpy", &k), HK_STATUS_OK);
        CU_ASSERT_EQUAL(tk_axpy_checked(h, k, 1000), HK_STATUS_OK);
        CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    }
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

/* get_kernel with out NULL: NULL_POINTER naming it, whatever else is given. */
SCENARIO(t_get_kernel_out_null)
{
    hk_handle_t *h = create(0, HK_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    hk_library_t *lib = tk_load(h, tk_ptx, tk_ptx_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    CU_ASSERT_EQUAL(tk_k->get_kernel(h, lib, "hkt_axpy", NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_PTR_NOT_NULL(strstr(plug.vt->last_error(h), "out"));
    CU_ASSERT_EQUAL(tk_k->get_kernel(h, lib, "hkt_nothing", NULL), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(tk_k->unload(h, lib), HK_STATUS_OK);
    CU_ASSERT_EQUAL(plug.vt->handle_destroy(h), HK_STATUS_OK);
}

const hkct_scenario_t tk_image_scenarios[] = {
    {"1 to 4 byte images: refused or padded, never read past", t_tiny_images, 1, 0, 0},
    {"fatbins whose sizes lie: refused before the driver", t_lying_fatbins, 1, 0, 0},
    {"cubins whose headers lie: refused before the driver", t_lying_cubins, 1, 0, 0},
    {"get_kernel with out NULL: NULL_POINTER", t_get_kernel_out_null, 1, 0, 0},
};
const size_t tk_image_scenario_count = sizeof tk_image_scenarios / sizeof tk_image_scenarios[0];
