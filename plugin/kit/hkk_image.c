/* handlekit kit: a caller's kernel image, checked before the driver reads it.
 *
 * cuLibraryLoadData takes no length: the driver reads an image as far as the
 * sizes inside it say, and before it knows what kind of image it has it
 * reads a header's worth of bytes (docs/contexts.md fact 27, measured: a
 * fatbin whose header or an entry's header claims more than the buffer
 * holds, a cubin whose program or section header table, or one of whose
 * sections, lies past the buffer, and 3- or 4-byte images, NUL-terminated or
 * not, were all read past the buffer's end). So every size the driver
 * follows is checked against the caller's size here, and an image shorter
 * than HK__KIT_IMAGE_PAD is handed over in a zero-padded copy. The sizes the
 * driver does not follow (a segment's size in a program header, an entry's
 * padding) are checked too: an image whose headers contradict its size is
 * not one that a toolchain made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkk_internal.h"

#define HK__KIT_FATBIN_MAGIC 0xBA55ED50u
#define HK__KIT_ELF_CLASS64 2
#define HK__KIT_SHT_NOBITS 8 /* a section that takes no bytes of the file */

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* [off, off + len) lies within size bytes. */
static int within(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/* A 64-bit ELF file (a cubin) of size bytes at p; what names it in messages
 * ("the cubin", "the cubin in the fatbin's entry 2"). */
static hk_status_t check_elf(hk_kit_bind_t *err_to, const unsigned char *p, uint64_t size,
                             const char *what)
{
    if (size < 64 || p[4] != HK__KIT_ELF_CLASS64)
        return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                           "%s is not a 64-bit ELF file (%llu bytes)", what,
                           (unsigned long long)size);
    uint64_t phoff = le(p + 0x20, 8), phsize = le(p + 0x36, 2), phnum = le(p + 0x38, 2);
    uint64_t shoff = le(p + 0x28, 8), shsize = le(p + 0x3a, 2), shnum = le(p + 0x3c, 2);
    /* An ELF reader takes the real count from section 0 when e_shnum is 0. */
    uint64_t shread = shoff && !shnum ? 1 : shnum;
    if (phnum && (phsize < 56 || !within(phoff, phsize * phnum, size)))
        return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                           "the program headers of %s end past its size (%llu bytes)", what,
                           (unsigned long long)size);
    if (shread && (shsize < 64 || !within(shoff, shsize * shread, size)))
        return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                           "the section headers of %s end past its size (%llu bytes)", what,
                           (unsigned long long)size);
    for (uint64_t i = 0; i < phnum; i++) {
        const unsigned char *ph = p + phoff + i * phsize;
        if (!within(le(ph + 0x08, 8), le(ph + 0x20, 8), size))
            return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                               "segment %llu of %s ends past its size (%llu bytes)",
                               (unsigned long long)i, what, (unsigned long long)size);
    }
    for (uint64_t i = 0; i < shnum; i++) {
        const unsigned char *sh = p + shoff + i * shsize;
        if (le(sh + 0x04, 4) != HK__KIT_SHT_NOBITS &&
            !within(le(sh + 0x18, 8), le(sh + 0x20, 8), size))
            return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                               "section %llu of %s ends past its size (%llu bytes)",
                               (unsigned long long)i, what, (unsigned long long)size);
    }
    return HK_STATUS_OK;
}

/* A fatbin: its header, then entries (a header of headerSize bytes, then a
 * payload of paddedPayloadSize bytes), each within the fatbin, and a cubin
 * in an entry checked as a cubin. */
static hk_status_t check_fatbin(hk_kit_bind_t *err_to, const unsigned char *p, uint64_t size)
{
    uint64_t hdr = size >= 16 ? le(p + 6, 2) : 0, body = size >= 16 ? le(p + 8, 8) : 0;
    if (size < 16 || hdr < 16 || !within(hdr, body, size))
        return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                           "the fatbin's header claims %llu bytes, size is %llu",
                           size < 16 ? 16ull : (unsigned long long)(hdr + body),
                           (unsigned long long)size);
    uint64_t end = hdr + body;
    for (uint64_t off = hdr, n = 1; off < end; n++) {
        uint64_t hs = end - off >= 16 ? le(p + off + 4, 4) : 0;
        uint64_t pay = end - off >= 16 ? le(p + off + 8, 8) : 0;
        if (hs < 16 || !within(off, hs, end))
            return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                               "the fatbin's entry %llu has a header that ends past the "
                               "fatbin (%llu bytes)", (unsigned long long)n,
                               (unsigned long long)end);
        if (!within(off + hs, pay, end))
            return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                               "the fatbin's entry %llu claims %llu bytes, past the fatbin "
                               "(%llu bytes)", (unsigned long long)n, (unsigned long long)pay,
                               (unsigned long long)end);
        if (pay >= 4 && memcmp(p + off + hs, "\177ELF", 4) == 0) {
            char what[64];
            snprintf(what, sizeof what, "the cubin in the fatbin's entry %llu",
                     (unsigned long long)n);
            hk_status_t st = check_elf(err_to, p + off + hs, pay, what);
            if (st != HK_STATUS_OK)
                return st;
        }
        off += hs + pay;
    }
    return HK_STATUS_OK;
}

hk_status_t hkk_image_check(hk_kit_bind_t *err_to, const unsigned char *p, size_t size,
                                const char **kind)
{
    *kind = "PTX";
    if (size == 0)
        return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE, "the image's size is 0");
    if (size >= 4 && le(p, 4) == HK__KIT_FATBIN_MAGIC) {
        *kind = "fatbin";
        return check_fatbin(err_to, p, size);
    }
    if (size >= 4 && memcmp(p, "\177ELF", 4) == 0) {
        *kind = "cubin";
        return check_elf(err_to, p, size, "the cubin");
    }
    if (!memchr(p, '\0', size))
        return hk_kit_fail(err_to, HK_STATUS_INVALID_VALUE,
                           "the image is neither a fatbin nor a cubin, and as PTX text it has "
                           "no terminating NUL within size (%zu bytes)", size);
    return HK_STATUS_OK;
}

const void *hkk_image_padded(const void *image, size_t size, void **copy)
{
    *copy = NULL;
    if (size >= HK__KIT_IMAGE_PAD)
        return image;
    *copy = calloc(1, HK__KIT_IMAGE_PAD);
    if (*copy)
        memcpy(*copy, image, size);
    return *copy;
}
