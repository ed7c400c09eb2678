/* handlekit: an errno's text for a one-line reason. Internal, never installed.
 *
 * strerror_r comes in two forms: the POSIX one returns an int and fills the
 * buffer; the GNU one (glibc with _GNU_SOURCE, which the build defines)
 * returns the text, often a static string, and then leaves the buffer as it
 * was. A caller that takes the wrong form prints uninitialised bytes, so
 * every caller goes through hk__errtext, which picks the form the C library
 * declares (_Generic on the call's type; the call in it is not evaluated).
 * Static inline: it adds no symbol to the library it is compiled into. */
#ifndef HK__ERRTEXT_H
#define HK__ERRTEXT_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The POSIX form: the buffer holds the text when it returned 0. */
static inline const char *hk__errtext_posix(int rc, int e, char *buf, size_t n)
{
    if (rc != 0 || buf[0] == '\0')
        snprintf(buf, n, "errno %d", e);
    return buf;
}

/* The GNU form: the text is what it returned. */
static inline const char *hk__errtext_gnu(char *text, int e, char *buf, size_t n)
{
    if (text && text[0] != '\0')
        return text;
    snprintf(buf, n, "errno %d", e);
    return buf;
}

/* The text of errno value e, in buf (n > 0 bytes) or static storage; never
 * NULL, never uninitialised. e, buf and n are evaluated more than once:
 * pass variables. */
#define hk__errtext(e, buf, n)                                                               \
    (((buf)[0] = '\0'),                                                                      \
     _Generic(strerror_r((e), (buf), (n)), char *: hk__errtext_gnu,                          \
              default: hk__errtext_posix)(strerror_r((e), (buf), (n)), (e), (buf), (n)))

#endif /* HK__ERRTEXT_H */
