/* handlekit: the JSON writer of the programs (hk__json.h). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hk__json.h"

/* Length (1 to 4) of the valid UTF-8 sequence at s and its code point, or 0
 * when s does not start one (a stray continuation byte, a truncated or
 * overlong sequence, a surrogate, a value above U+10FFFF). */
static int hk__json_utf8(const unsigned char *s, uint32_t *cp)
{
    unsigned char c = s[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if ((c & 0xe0) == 0xc0) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (int i = 1; i < len; i++) { /* a NUL fails here: the string ends */
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

static void hk__json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        uint32_t cp;
        int len = hk__json_utf8(p, &cp);
        if (len == 0) { /* not UTF-8: the replacement character */
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        switch (cp) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            /* C0, DEL, C1 controls, and the two separators that end a line
             * in JavaScript: escaped, so no reader sees a raw control. */
            if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029)
                fprintf(f, "\\u%04x", (unsigned)cp);
            else
                fwrite(p, 1, (size_t)len, f);
        }
        p += len;
    }
    fputc('"', f);
}

/* Comma, line break and indentation before a value, and its key. */
static void hk__json_lead(hk__json_t *j, const char *key)
{
    if (j->depth > 0) {
        fputs(j->count[j->depth - 1]++ ? ",\n" : "\n", j->f);
        fprintf(j->f, "%*s", 2 * j->depth, "");
    }
    if (key && j->depth > 0 && j->kind[j->depth - 1] == '{') {
        hk__json_string(j->f, key);
        fputs(": ", j->f);
    }
}

void hk__json_init(hk__json_t *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
}

void hk__json_open(hk__json_t *j, const char *key, char kind)
{
    if (j->depth >= HK__JSON_DEPTH) /* a programming error: the shapes are fixed */
        return;
    hk__json_lead(j, key);
    fputc(kind, j->f);
    j->kind[j->depth] = kind;
    j->count[j->depth] = 0;
    j->depth++;
}

void hk__json_close(hk__json_t *j)
{
    if (j->depth == 0)
        return;
    j->depth--;
    if (j->count[j->depth])
        fprintf(j->f, "\n%*s", 2 * j->depth, "");
    fputc(j->kind[j->depth] == '{' ? '}' : ']', j->f);
    if (j->depth == 0)
        fputc('\n', j->f);
}

void hk__json_str(hk__json_t *j, const char *key, const char *v)
{
    hk__json_lead(j, key);
    if (v)
        hk__json_string(j->f, v);
    else
        fputs("null", j->f);
}

void hk__json_int(hk__json_t *j, const char *key, long long v)
{
    hk__json_lead(j, key);
    fprintf(j->f, "%lld", v);
}

void hk__json_num(hk__json_t *j, const char *key, double v)
{
    hk__json_lead(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.6g", v);
    else
        fputs("null", j->f);
}

void hk__json_bool(hk__json_t *j, const char *key, int v)
{
    hk__json_lead(j, key);
    fputs(v ? "true" : "false", j->f);
}

void hk__json_null(hk__json_t *j, const char *key)
{
    hk__json_lead(j, key);
    fputs("null", j->f);
}
