/* Test programs: little-endian fields of binary images (ELF, fatbin), read
 * and written in place, for tests that build images which lie about their
 * sizes. */
#ifndef HK_LE_H
#define HK_LE_H

#include <stdint.h>

/* The unsigned little-endian number of `bytes` bytes (1 to 8) at p. */
static inline uint64_t hk_get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Writes v's low `bytes` bytes (1 to 8) at p, little-endian. */
static inline void hk_put_le(unsigned char *p, int bytes, uint64_t v)
{
    for (int i = 0; i < bytes; i++, v >>= 8)
        p[i] = (unsigned char)v;
}

#endif /* HK_LE_H */
