/* handlekit semantic versions (see hk_semver.h for the grammar and rules).
 *
 * The parser is written by hand rather than with sscanf or strtoull: those
 * accept signs, spaces, leading zeros and wrap on overflow, and every one of
 * those must be a refusal here. */
#include "hk_semver.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- reasons ---- */

/* Writes "'TEXT': DETAIL" into reason. The text is quoted with anything
 * unprintable shown as '?' and cut to keep the line short, so that a hostile
 * string can neither break the one-line reason nor flood it. */
static void hk__fail(char *reason, size_t rn, const char *text, size_t len, const char *fmt, ...)
{
    char quoted[72], detail[256];
    size_t shown = len > 60 ? 60 : len, q = 0;
    va_list ap;

    if (!reason || rn == 0)
        return;
    for (size_t i = 0; i < shown && text; i++) {
        unsigned char c = (unsigned char)text[i];
        quoted[q++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    quoted[q] = '\0';
    if (shown < len)
        strcat(quoted, "...");
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    snprintf(reason, rn, "'%s': %s", quoted, detail);
}

/* One character for a reason: itself when visible, else its code (a space
 * reads better as 0x20 than as ' '). */
static const char *hk__char_text(char c, char buf[8])
{
    unsigned char u = (unsigned char)c;
    if (u > 0x20 && u < 0x7f && u != '\'')
        snprintf(buf, 8, "'%c'", c);
    else
        snprintf(buf, 8, "0x%02x", (unsigned)u);
    return buf;
}

static void hk__ok(char *reason, size_t rn)
{
    if (reason && rn > 0)
        reason[0] = '\0';
}

/* ---- lexical pieces ---- */

static int hk__is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hk__is_ident_char(char c)
{
    return hk__is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

static int hk__all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!hk__is_digit(s[i]))
            return 0;
    return n > 0;
}

/* A decimal of n digits: 0 when it fits in 64 bits (value in *val). */
static int hk__to_u64(const char *s, size_t n, uint64_t *val)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *val = v;
    return 0;
}

enum { HK__NUM_OK, HK__NUM_NONE, HK__NUM_ZERO, HK__NUM_BIG };

/* Reads a MAJOR/MINOR/PATCH number at s[*pos]; advances *pos past it. */
static int hk__number(const char *s, size_t len, size_t *pos, uint64_t *val)
{
    size_t start = *pos, end = start;
    while (end < len && hk__is_digit(s[end]))
        end++;
    if (end == start)
        return HK__NUM_NONE;
    *pos = end;
    if (s[start] == '0' && end - start > 1)
        return HK__NUM_ZERO;
    return hk__to_u64(s + start, end - start, val) == 0 ? HK__NUM_OK : HK__NUM_BIG;
}

/* Checks a dot-separated identifier list s[0..n) (pre-release when is_pre,
 * else build metadata). The list ends at the end of n; the caller found it. */
static int hk__idents(const char *s, size_t n, int is_pre, const char *text, size_t len,
                      char *reason, size_t rn)
{
    const char *what = is_pre ? "pre-release" : "build metadata";
    char cb[8];
    size_t i = 0;

    if (n == 0) {
        hk__fail(reason, rn, text, len, "empty %s after '%c'", what, is_pre ? '-' : '+');
        return -1;
    }
    while (i <= n) {
        size_t start = i;
        while (i < n && s[i] != '.') {
            if (!hk__is_ident_char(s[i])) {
                hk__fail(reason, rn, text, len, "character %s not allowed in %s (only 0-9, "
                         "A-Z, a-z, '-')", hk__char_text(s[i], cb), what);
                return -1;
            }
            i++;
        }
        size_t idn = i - start;
        if (idn == 0) {
            hk__fail(reason, rn, text, len, "empty identifier in %s", what);
            return -1;
        }
        if (is_pre && hk__all_digits(s + start, idn)) {
            uint64_t v;
            if (s[start] == '0' && idn > 1) {
                hk__fail(reason, rn, text, len, "pre-release identifier '%.*s' has a leading "
                         "zero", (int)(idn > 40 ? 40 : idn), s + start);
                return -1;
            }
            if (hk__to_u64(s + start, idn, &v) != 0) {
                hk__fail(reason, rn, text, len, "pre-release number does not fit in 64 bits");
                return -1;
            }
        }
        i++; /* past the dot, or past the end to leave the loop */
    }
    return 0;
}

/* ---- versions ---- */

static const char *const hk__part_names[] = {"major", "minor", "patch"};

/* Parses s[0..n) as MAJOR[.MINOR[.PATCH[-PRE][+BUILD]]] with at least
 * min_parts numbers. text/len is what a reason quotes (the whole range for
 * a range operand). */
static hk_status_t hk__version(const char *s, size_t n, unsigned min_parts, hk_semver_t *out,
                               unsigned *parts, const char *text, size_t len, char *reason,
                               size_t rn)
{
    uint64_t num[3] = {0, 0, 0};
    size_t pos = 0;
    unsigned k = 0;
    char cb[8];

    memset(out, 0, sizeof(*out));
    if (n == 0) {
        hk__fail(reason, rn, text, len, "empty version");
        return HK_STATUS_INVALID_VALUE;
    }
    for (k = 0; k < 3; k++) {
        int r = hk__number(s, n, &pos, &num[k]);
        if (r == HK__NUM_NONE) {
            if (pos < n)
                hk__fail(reason, rn, text, len, "%s is not a number: found %s",
                         hk__part_names[k], hk__char_text(s[pos], cb));
            else
                hk__fail(reason, rn, text, len, "%s is missing after '.'", hk__part_names[k]);
            return HK_STATUS_INVALID_VALUE;
        }
        if (r == HK__NUM_ZERO) {
            hk__fail(reason, rn, text, len, "%s has a leading zero", hk__part_names[k]);
            return HK_STATUS_INVALID_VALUE;
        }
        if (r == HK__NUM_BIG) {
            hk__fail(reason, rn, text, len, "%s does not fit in 64 bits", hk__part_names[k]);
            return HK_STATUS_INVALID_VALUE;
        }
        if (k == 2 || pos == n || s[pos] != '.')
            break;
        pos++;
    }
    unsigned got = k + 1;
    if (got < 3 && pos < n && (s[pos] == '-' || s[pos] == '+')) {
        hk__fail(reason, rn, text, len, "a %s needs major.minor.patch",
                 s[pos] == '-' ? "pre-release" : "build part");
        return HK_STATUS_INVALID_VALUE;
    }
    if (pos < n && s[pos] != '-' && s[pos] != '+') {
        hk__fail(reason, rn, text, len, "unexpected %s after %s", hk__char_text(s[pos], cb),
                 hk__part_names[got - 1]);
        return HK_STATUS_INVALID_VALUE;
    }
    if (got < min_parts) {
        hk__fail(reason, rn, text, len, "needs major.minor.patch");
        return HK_STATUS_INVALID_VALUE;
    }
    if (pos < n && s[pos] == '-') {
        size_t start = ++pos;
        while (pos < n && s[pos] != '+')
            pos++;
        if (hk__idents(s + start, pos - start, 1, text, len, reason, rn) != 0)
            return HK_STATUS_INVALID_VALUE;
        out->pre = s + start;
        out->pre_len = pos - start;
    }
    if (pos < n) { /* s[pos] == '+' */
        size_t start = ++pos;
        if (hk__idents(s + start, n - start, 0, text, len, reason, rn) != 0) {
            memset(out, 0, sizeof(*out));
            return HK_STATUS_INVALID_VALUE;
        }
        out->build = s + start;
        out->build_len = n - start;
    }
    out->major = num[0];
    out->minor = num[1];
    out->patch = num[2];
    *parts = got;
    hk__ok(reason, rn);
    return HK_STATUS_OK;
}

hk_status_t hk_semver_parse_n(const char *text, size_t len, hk_semver_t *out, char *reason,
                              size_t reason_size)
{
    unsigned parts;
    if (!out || (!text && len > 0)) {
        if (out)
            memset(out, 0, sizeof(*out));
        hk__fail(reason, reason_size, "", 0, "NULL argument");
        return HK_STATUS_NULL_POINTER;
    }
    hk_status_t st = hk__version(text, len, 3, out, &parts, text, len, reason, reason_size);
    if (st != HK_STATUS_OK)
        memset(out, 0, sizeof(*out));
    return st;
}

hk_status_t hk_semver_parse(const char *text, hk_semver_t *out, char *reason,
                            size_t reason_size)
{
    if (!text) {
        if (out)
            memset(out, 0, sizeof(*out));
        hk__fail(reason, reason_size, "", 0, "NULL argument");
        return HK_STATUS_NULL_POINTER;
    }
    return hk_semver_parse_n(text, strlen(text), out, reason, reason_size);
}

/* ---- precedence ---- */

static int hk__sign(int c)
{
    return (c > 0) - (c < 0);
}

static int hk__cmp_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

/* One pre-release identifier against another (semver rule 11.4). Numeric
 * ones compare by length first: the parser refused leading zeros, so the
 * longer is the larger and no conversion is needed. */
static int hk__cmp_ident(const char *a, size_t an, const char *b, size_t bn)
{
    int na = hk__all_digits(a, an), nb = hk__all_digits(b, bn);
    if (na && nb) {
        /* Skip zeros a hand-made struct might carry. */
        while (an > 1 && *a == '0')
            a++, an--;
        while (bn > 1 && *b == '0')
            b++, bn--;
        if (an != bn)
            return an < bn ? -1 : 1;
        return hk__sign(memcmp(a, b, an));
    }
    if (na != nb)
        return na ? -1 : 1;
    size_t m = an < bn ? an : bn;
    int c = memcmp(a, b, m);
    if (c != 0)
        return hk__sign(c);
    return hk__cmp_u64(an, bn);
}

static int hk__cmp_pre(const char *a, size_t an, const char *b, size_t bn)
{
    if (an == 0 || bn == 0)
        return an == bn ? 0 : an == 0 ? 1 : -1; /* no pre-release is higher */
    size_t i = 0, j = 0;
    for (;;) {
        size_t si = i, sj = j;
        while (i < an && a[i] != '.')
            i++;
        while (j < bn && b[j] != '.')
            j++;
        int c = hk__cmp_ident(a + si, i - si, b + sj, j - sj);
        if (c != 0)
            return c;
        int a_end = i >= an, b_end = j >= bn;
        if (a_end || b_end)
            return a_end && b_end ? 0 : a_end ? -1 : 1;
        i++;
        j++;
    }
}

int hk_semver_compare(const hk_semver_t *a, const hk_semver_t *b)
{
    if (!a || !b)
        return (a != NULL) - (b != NULL);
    int c = hk__cmp_u64(a->major, b->major);
    if (!c)
        c = hk__cmp_u64(a->minor, b->minor);
    if (!c)
        c = hk__cmp_u64(a->patch, b->patch);
    if (!c)
        c = hk__cmp_pre(a->pre, a->pre ? a->pre_len : 0, b->pre, b->pre ? b->pre_len : 0);
    return c;
}

/* ---- comparators ---- */

static void hk__comparator_any(hk_semver_cmp_t *out)
{
    memset(out, 0, sizeof(*out));
    out->op = HK_SEMVER_ANY;
}

/* Operators, two-character ones first so that ">=" is not read as '>'.
 * min_parts: how many numbers the version after it needs (hk_semver.h says
 * why '>', "<=" and '=' take no shortened version). */
static const struct {
    const char *text;
    size_t len;
    hk_semver_op_t op;
    unsigned min_parts;
} hk__ops[] = {
    {">=", 2, HK_SEMVER_GE, 1}, {"<=", 2, HK_SEMVER_LE, 3}, {">", 1, HK_SEMVER_GT, 3},
    {"<", 1, HK_SEMVER_LT, 1},  {"=", 1, HK_SEMVER_EXACT, 3}, {"^", 1, HK_SEMVER_CARET, 1},
    {"~", 1, HK_SEMVER_TILDE, 1},
};

/* The reason for a shortened version v[0..vn) (parts numbers) after an
 * operator that needs all three. */
static void hk__short_fail(char *reason, size_t rn, const char *s, size_t n, size_t skip,
                           hk_semver_op_t op, unsigned parts)
{
    const char *v = s + skip, *zeros = parts == 1 ? ".0.0" : ".0";
    int vn = (int)(n - skip), on = (int)skip;

    if (op == HK_SEMVER_EXACT)
        hk__fail(reason, rn, s, n, "an exact version needs major.minor.patch (write ^%.*s or "
                 "~%.*s for a range)", vn, v, vn, v);
    else
        hk__fail(reason, rn, s, n, "'%.*s' needs major.minor.patch ('%.*s' could mean %.*s%s "
                 "or %s every %.*s.x)", on, s, (int)n, s, (int)n, s, zeros,
                 op == HK_SEMVER_GT ? "above" : "up to", vn, v);
}

/* Parses s[0..n) as one comparator, "" or "*", all of it. */
static hk_status_t hk__comparator(const char *s, size_t n, hk_semver_cmp_t *out, char *reason,
                                  size_t rn)
{
    hk_semver_cmp_t r;
    size_t skip = 0;
    unsigned min_parts = 3;
    char cb[8];

    hk__comparator_any(out);
    hk__comparator_any(&r);
    if (n == 0 || (n == 1 && s[0] == '*')) {
        hk__ok(reason, rn);
        return HK_STATUS_OK;
    }
    r.op = HK_SEMVER_EXACT;
    for (size_t i = 0; i < sizeof(hk__ops) / sizeof(hk__ops[0]); i++)
        if (n >= hk__ops[i].len && memcmp(s, hk__ops[i].text, hk__ops[i].len) == 0) {
            r.op = hk__ops[i].op;
            skip = hk__ops[i].len;
            min_parts = hk__ops[i].min_parts;
            break;
        }
    if (skip == 0 && !hk__is_digit(s[0])) {
        hk__fail(reason, rn, s, n, "unknown range: starts with %s (a range is *, or "
                 "comparators such as 1.2.3, ^1.2, ~1.2, >=1.2, <2 joined by commas)",
                 hk__char_text(s[0], cb));
        return HK_STATUS_INVALID_VALUE;
    }
    if (skip == n) {
        hk__fail(reason, rn, s, n, "no version after '%.*s'", (int)skip, s);
        return HK_STATUS_INVALID_VALUE;
    }
    if (s[skip] == ' ') {
        hk__fail(reason, rn, s, n, "space between '%.*s' and its version", (int)skip, s);
        return HK_STATUS_INVALID_VALUE;
    }
    hk_status_t st = hk__version(s + skip, n - skip, 1, &r.base, &r.parts, s, n, reason, rn);
    if (st != HK_STATUS_OK)
        return st;
    if (r.parts < min_parts) {
        hk__short_fail(reason, rn, s, n, skip, r.op, r.parts);
        return HK_STATUS_INVALID_VALUE;
    }
    *out = r;
    return HK_STATUS_OK;
}

/* ---- ranges: lists of comparators ---- */

static int hk__has_bars(const char *s, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '|' && s[i + 1] == '|')
            return 1;
    return 0;
}

/* Parses the comma-separated list text[0..len) into *out (zeroed by the
 * caller); a failure names the comparator by position and text. */
static hk_status_t hk__list(const char *text, size_t len, hk_semver_range_t *out,
                            char *reason, size_t rn)
{
    char sub[256];
    size_t start = 0, pieces = 1;

    for (size_t i = 0; i < len; i++)
        pieces += text[i] == ',';
    if (pieces > HK_SEMVER_RANGE_MAX) {
        hk__fail(reason, rn, text, len, "more than %d comparators", HK_SEMVER_RANGE_MAX);
        return HK_STATUS_INVALID_VALUE;
    }
    for (unsigned k = 0;; k++) {
        size_t end = start;
        while (end < len && text[end] != ',')
            end++;
        size_t a = start, b = end;
        while (k > 0 && a < b && text[a] == ' ') /* spaces after a comma */
            a++;
        while (end < len && b > a && text[b - 1] == ' ') /* spaces before one */
            b--;
        if (a == b) {
            hk__fail(reason, rn, text, len, "comparator %u is empty", k + 1);
            return HK_STATUS_INVALID_VALUE;
        }
        if (hk__comparator(text + a, b - a, &out->cmp[k], sub, sizeof(sub)) != HK_STATUS_OK) {
            hk__fail(reason, rn, text, len, "comparator %u %s", k + 1, sub);
            return HK_STATUS_INVALID_VALUE;
        }
        if (out->cmp[k].op == HK_SEMVER_ANY) {
            hk__fail(reason, rn, text, len, "'*' stands alone: it cannot be listed with other "
                     "comparators");
            return HK_STATUS_INVALID_VALUE;
        }
        out->count = k + 1;
        if (end == len)
            return HK_STATUS_OK;
        start = end + 1;
    }
}

hk_status_t hk_semver_range_parse_n(const char *text, size_t len, hk_semver_range_t *out,
                                    char *reason, size_t reason_size)
{
    hk_status_t st;

    if (!out || (!text && len > 0)) {
        if (out)
            memset(out, 0, sizeof(*out));
        hk__fail(reason, reason_size, "", 0, "NULL argument");
        return HK_STATUS_NULL_POINTER;
    }
    memset(out, 0, sizeof(*out));
    if (hk__has_bars(text, len)) {
        hk__fail(reason, reason_size, text, len, "'||' (either of two ranges) is not "
                 "supported: a comma joins comparators that must all hold");
        return HK_STATUS_INVALID_VALUE;
    }
    if (len == 0 || !memchr(text, ',', len)) {
        /* One comparator: its reason is the comparator's own. */
        st = hk__comparator(text, len, &out->cmp[0], reason, reason_size);
        out->count = st == HK_STATUS_OK && out->cmp[0].op != HK_SEMVER_ANY;
    } else {
        st = hk__list(text, len, out, reason, reason_size);
    }
    if (st != HK_STATUS_OK) {
        memset(out, 0, sizeof(*out));
        return st;
    }
    hk__ok(reason, reason_size);
    return HK_STATUS_OK;
}

hk_status_t hk_semver_range_parse(const char *text, hk_semver_range_t *out, char *reason,
                                  size_t reason_size)
{
    if (!text) {
        if (out)
            memset(out, 0, sizeof(*out));
        hk__fail(reason, reason_size, "", 0, "NULL argument");
        return HK_STATUS_NULL_POINTER;
    }
    return hk_semver_range_parse_n(text, strlen(text), out, reason, reason_size);
}

/* ---- matching ---- */

static int hk__has_pre(const hk_semver_t *v)
{
    return v->pre && v->pre_len > 0;
}

/* The operator's own condition, pre-release rule left aside. Written as
 * "same major (and minor...)" rather than with an upper bound, so that a
 * range at UINT64_MAX needs no MAJOR+1 that would wrap. */
static int hk__op_holds(const hk_semver_cmp_t *r, const hk_semver_t *v)
{
    const hk_semver_t *b = &r->base;
    int c = hk_semver_compare(v, b);
    switch (r->op) {
    case HK_SEMVER_ANY:
        return 1;
    case HK_SEMVER_EXACT:
        return c == 0;
    case HK_SEMVER_GE:
        return c >= 0;
    case HK_SEMVER_GT:
        return c > 0;
    case HK_SEMVER_LT:
        return c < 0;
    case HK_SEMVER_LE:
        return c <= 0;
    case HK_SEMVER_TILDE:
        return c >= 0 && v->major == b->major && (r->parts < 2 || v->minor == b->minor);
    case HK_SEMVER_CARET:
        if (c < 0 || v->major != b->major)
            return 0;
        if (b->major != 0 || r->parts < 2)
            return 1;
        if (v->minor != b->minor)
            return 0;
        return b->minor != 0 || r->parts < 3 || v->patch == b->patch;
    }
    return 0;
}

/* The comparator names a pre-release of v's MAJOR.MINOR.PATCH. */
static int hk__names_pre_of(const hk_semver_cmp_t *r, const hk_semver_t *v)
{
    const hk_semver_t *b = &r->base;
    return r->op != HK_SEMVER_ANY && hk__has_pre(b) && b->major == v->major
           && b->minor == v->minor && b->patch == v->patch;
}

/* 1 when every comparator of r holds for v; *named says whether v is a
 * release or a pre-release that one of them names. A hand-made count past
 * the array is read as the array. */
static int hk__range_holds(const hk_semver_range_t *r, const hk_semver_t *v, int *named)
{
    unsigned n = r->count < HK_SEMVER_RANGE_MAX ? r->count : HK_SEMVER_RANGE_MAX;
    *named = !hk__has_pre(v);
    for (unsigned i = 0; i < n; i++) {
        if (!hk__op_holds(&r->cmp[i], v))
            return 0;
        *named |= hk__names_pre_of(&r->cmp[i], v);
    }
    return 1;
}

int hk_semver_range_match(const hk_semver_range_t *r, const hk_semver_t *v)
{
    int named;
    return r && v && hk__range_holds(r, v, &named) && named;
}

int hk_semver_range_skips_pre(const hk_semver_range_t *r, const hk_semver_t *v)
{
    int named;
    return r && v && hk__has_pre(v) && hk__range_holds(r, v, &named) && !named;
}
