/* simcuda images: what the driver reads of one (docs/contexts.md fact 27),
 * and the parameters of a kernel in PTX text.
 *
 * cuLibraryLoadData and cuModuleLoadData take no length. On an H200 the
 * driver read a header's worth of bytes before it knew the kind of image
 * (3- and 4-byte images, NUL-terminated or not, were read past their end,
 * an 1.8 KB PTX text was not), then followed the sizes inside the image: a
 * fatbin's size and each entry's header size, and a cubin's program header
 * table, section header table and sections; a lie in any of them was read
 * past the buffer; an entry holding a cubin is read as far as its padded
 * payload size says. It did not follow the padded size of a compressed PTX
 * entry past the fatbin's end, nor a segment's offset and size. The simulation reads the
 * same bytes, in place, before it copies the image, so a lying image is read
 * past the caller's buffer here as there: a guard page after the buffer
 * faults, and AddressSanitizer reports a heap buffer's overflow. */
#include "sim_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define SIM_FATBIN_MAGIC 0xBA55ED50u
#define SIM_IMAGE_SNIFF 64 /* read before the kind is known: more than 4, less than 1.8 KB */
#define SIM_SHT_NOBITS 8
#define SIM_READ_PAGE 4096

static volatile unsigned char sim_sink; /* keeps the reads */

static uint64_t sim_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Reads [off, off + len) in order, as the driver does, and widens *extent:
 * its first byte, a byte per page and its last, enough to fault on the first
 * page past the buffer; the whole extent is copied afterwards, which reads
 * every byte (and AddressSanitizer checks each), so a region here need not
 * be read whole, which keeps an image of a megabyte loaded again and again
 * cheap. dense: every byte (the bytes read before the kind is known, which
 * a short text's copy does not cover). */
static void sim_read(const unsigned char *p, uint64_t off, uint64_t len, uint64_t *extent,
                     int dense)
{
    unsigned char acc = 0;
    for (uint64_t i = 0; i < len; i += dense ? 1 : SIM_READ_PAGE)
        acc ^= p[off + i];
    if (len)
        acc ^= p[off + len - 1];
    sim_sink = acc;
    if (off + len > *extent)
        *extent = off + len;
}

/* A cubin at p + b: its header, program and section header tables, and every
 * section that takes bytes of the file. */
static void sim_read_elf(const unsigned char *p, uint64_t b, uint64_t *extent)
{
    sim_read(p, b, 64, extent, 0);
    const unsigned char *e = p + b;
    uint64_t phoff = sim_le(e + 0x20, 8), shoff = sim_le(e + 0x28, 8);
    uint64_t phsize = sim_le(e + 0x36, 2), phnum = sim_le(e + 0x38, 2);
    uint64_t shsize = sim_le(e + 0x3a, 2), shnum = sim_le(e + 0x3c, 2);
    sim_read(p, b + phoff, phsize * phnum, extent, 0);
    sim_read(p, b + shoff, shsize * shnum, extent, 0);
    for (uint64_t i = 0; shsize >= 64 && i < shnum; i++) {
        const unsigned char *sh = e + shoff + i * shsize;
        if (sim_le(sh + 4, 4) != SIM_SHT_NOBITS)
            sim_read(p, b + sim_le(sh + 0x18, 8), sim_le(sh + 0x20, 8), extent, 0);
    }
}

/* A fatbin: its header and its entries, from the header's end while within
 * the size the header gives (read whole, even when that size is smaller than
 * the first entry). */
static CUresult sim_read_fatbin(const unsigned char *p, uint64_t *extent)
{
    sim_read(p, 0, 16, extent, 0);
    uint64_t hdr = sim_le(p + 6, 2), body = sim_le(p + 8, 8);
    if (hdr < 16)
        return CUDA_ERROR_INVALID_IMAGE;
    if (body == 0 || body > (1ull << 32))
        return CUDA_ERROR_NO_BINARY_FOR_GPU; /* read no further */
    for (uint64_t off = hdr, end = hdr + body; off < end;) {
        sim_read(p, off, 16, extent, 0);
        uint64_t hs = sim_le(p + off + 4, 4), pad = sim_le(p + off + 8, 8);
        sim_read(p, off, hs, extent, 0);
        sim_read(p, off + hs, 4, extent, 0);
        if (memcmp(p + off + hs, "\177ELF", 4) == 0) {
            sim_read_elf(p, off + hs, extent);
            if (pad <= (1ull << 40))
                sim_read(p, off + hs, pad, extent, 0);
        }
        if (hs < 16 || pad > (1ull << 40))
            break;
        off += hs + pad;
    }
    return CUDA_SUCCESS;
}

CUresult sim_image_read(const void *image, size_t *size)
{
    const unsigned char *p = image;
    uint64_t extent = 0;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    sim_read(p, 0, SIM_IMAGE_SNIFF, &extent, 1);
    if (sim_le(p, 4) == SIM_FATBIN_MAGIC) {
        CUresult r = sim_read_fatbin(p, &extent);
        *size = (size_t)extent;
        return r;
    }
    if (memcmp(p, "\177ELF", 4) == 0) {
        if (p[4] != 2) /* ELFCLASS64 */
            return CUDA_ERROR_INVALID_IMAGE;
        sim_read_elf(p, 0, &extent);
        *size = (size_t)extent;
        return CUDA_SUCCESS;
    }
    if (isprint(p[0]) || isspace(p[0])) {
        size_t n = strlen((const char *)p);
        if (memmem(p, n, ".version", 8) && memmem(p, n, ".entry", 6)) {
            *size = n + 1;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_IMAGE;
}

/* ---- a kernel's parameters in PTX text ---- */

/* Bytes of one element of a PTX type (".u64" 8, ".f32" 4, ".b8" 1); 0 if
 * not a type. */
static unsigned sim_ptx_type_size(const char *t, size_t n)
{
    static const char *const types[] = {".b8", ".u8", ".s8", ".b16", ".u16", ".s16", ".f16",
                                        ".b32", ".u32", ".s32", ".f32", ".b64", ".u64",
                                        ".s64", ".f64"};
    static const unsigned sizes[] = {1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 8, 8, 8, 8};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strlen(types[i]) == n && memcmp(t, types[i], n) == 0)
            return sizes[i];
    return 0;
}

/* One ".param [.align A] .type [.ptr ...] name[N]" of [s, e): its size and
 * alignment. 0 when it is none. */
static int sim_ptx_param(const char *s, const char *e, unsigned *size, unsigned *align)
{
    unsigned elem = 0, al = 0, count = 1;
    for (const char *t = s; t < e;) {
        while (t < e && isspace((unsigned char)*t))
            t++;
        const char *w = t;
        while (t < e && !isspace((unsigned char)*t) && *t != '[')
            t++;
        size_t n = (size_t)(t - w);
        if (n == 6 && memcmp(w, ".align", 6) == 0 && !elem)
            al = (unsigned)strtoul(t, NULL, 10);
        else if (!elem)
            elem = sim_ptx_type_size(w, n);
        if (t < e && *t == '[')
            count = (unsigned)strtoul(t + 1, NULL, 10);
        while (t < e && *t == '[')
            t++;
    }
    if (!elem || !count)
        return 0;
    *size = elem * count;
    *align = al ? al : elem;
    return 1;
}

int sim_ptx_params(const unsigned char *img, size_t size, const char *name, unsigned *n,
                   unsigned offset[], unsigned psize[], unsigned max)
{
    const char *text = (const char *)img, *end = text + size;
    size_t len = strlen(name);
    for (const char *at = text; (at = memmem(at, (size_t)(end - at), ".entry", 6)); at += 6) {
        const char *w = at + 6;
        while (w < end && isspace((unsigned char)*w))
            w++;
        if ((size_t)(end - w) < len || memcmp(w, name, len) != 0 ||
            (w + len < end && (isalnum((unsigned char)w[len]) || w[len] == '_')))
            continue;
        const char *open = w + len;
        while (open < end && isspace((unsigned char)*open))
            open++;
        *n = 0;
        if (open == end || *open != '(')
            return 1; /* no parameter list */
        unsigned off = 0;
        for (const char *s = open + 1; s < end && *s != ')' && *n < max;) {
            const char *e = s;
            while (e < end && *e != ',' && *e != ')')
                e++;
            unsigned sz, al;
            if (sim_ptx_param(s, e, &sz, &al)) {
                off = (off + al - 1) / al * al;
                offset[*n] = off;
                psize[(*n)++] = sz;
                off += sz;
            }
            s = e < end && *e == ',' ? e + 1 : e;
        }
        return 1;
    }
    return 0;
}
