/* handlekit semantic versions: strict parsing, precedence and ranges.
 *
 * Versions follow semantic versioning 2.0.0:
 *   MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]
 * - MAJOR, MINOR, PATCH: "0" or a decimal number without leading zero that
 *   fits in 64 bits. No leading "v", no spaces, nothing after the version.
 * - PRERELEASE: dot-separated identifiers of [0-9A-Za-z-], none empty; a
 *   numeric identifier has no leading zero and fits in 64 bits.
 * - BUILD: dot-separated identifiers of [0-9A-Za-z-], none empty (leading
 *   zeros allowed). Build metadata never takes part in a comparison.
 *
 * Precedence: major, minor, patch numerically; then a version with a
 * pre-release is lower than the same version without one; two pre-releases
 * compare identifier by identifier, numeric ones numerically, alphanumeric
 * ones by ASCII order, a numeric identifier below an alphanumeric one, and
 * when one list is a prefix of the other the shorter is lower:
 *   1.0.0-alpha < 1.0.0-alpha.1 < 1.0.0-alpha.beta < 1.0.0-beta < 1.0.0-beta.2
 *   < 1.0.0-beta.11 < 1.0.0-rc.1 < 1.0.0 < 1.2.0 < 1.10.0
 *
 * Ranges (the text after '@' in a plugin request) are comparators separated
 * by commas, all of which must hold ("AND"):
 *   "" or "*"   any release ('*' stands alone: never in a list)
 *   "1.2.3"     exactly this version (a pre-release may be given; build
 *   "=1.2.3"    metadata is allowed and ignored)
 *   "^1.2.3"    >= 1.2.3 with the same major; for major 0 the same minor
 *               ("^0.2.3": >= 0.2.3, < 0.3.0), and for 0.0.P the same patch
 *               ("^0.0.3": only 0.0.3). "^1.2" is "^1.2.0"; "^1" is >= 1.0.0,
 *               < 2.0.0; "^0" is < 1.0.0; "^0.0" is < 0.1.0.
 *   "~1.2.3"    >= 1.2.3 with the same major and minor; "~1.2" is "~1.2.0";
 *               "~1" is >= 1.0.0 with the same major.
 *   ">=1.2.3"   this version or any higher one; ">=1.2" is ">=1.2.0".
 *   ">1.2.3"    any version higher than this one.
 *   "<1.2.3"    any version lower than this one; "<2" is "<2.0.0".
 *   "<=1.2.3"   this version or any lower one.
 *   ">=1.2, <2" both: 1.2.0 up to, not including, 2.0.0.
 * After '^', '~', ">=" and '<', MINOR and PATCH may be left out (they count
 * as 0). '=', '>', "<=" and a bare version need all three numbers: ">1.2"
 * could mean above 1.2.0 or above every 1.2.x, and is refused rather than
 * guessed. A pre-release or build part needs all three numbers.
 * Spaces (0x20) directly before and after a comma are ignored; no other
 * space is accepted (not at either end, not between an operator and its
 * version), nor any other white space. A list holds at most
 * HK_SEMVER_RANGE_MAX comparators; an empty one (",," or a comma at either
 * end) is refused. Nothing else is accepted: no "v", no "x" wildcards, no
 * "||" alternatives, no hyphen ranges.
 *
 * Pre-releases: a version with a pre-release matches a range only when one of
 * the range's comparators names a pre-release of the same MAJOR.MINOR.PATCH
 * (and every comparator holds). So "^2.0.0-rc.1" matches 2.0.0-rc.1,
 * 2.0.0-rc.2, 2.0.0 and 2.5.0 but not 2.1.0-beta; ">=2.0.0-rc.1, <3"
 * matches 2.0.0-rc.2 but not 2.1.0-beta; and "*", "^2", ">=1" and "<2.0.0"
 * match no pre-release at all (not even 2.0.0-rc.1, which is below 2.0.0): a
 * pre-release is only ever chosen when asked for by name.
 *
 * One type carries a parsed range, list or not: hk_semver_range_t, whose
 * elements are its comparators (hk_semver_cmp_t). A plugin request's range
 * is parsed into it, and a single comparator is a range of one.
 *
 * Parsed structs borrow the text they were parsed from (pre and build point
 * into it): keep the text alive and unchanged while the struct is used.
 * Every function is [thread-safe]: none keeps state. */
#ifndef HK_SEMVER_H
#define HK_SEMVER_H

#include <stddef.h>
#include <stdint.h>

#include "hk_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A parsed version. pre/build point into the parsed text, without the '-'
 * or '+', and are not NUL-terminated: use pre_len/build_len. Both are NULL
 * with length 0 when absent. */
typedef struct hk_semver {
    uint64_t major;
    uint64_t minor;
    uint64_t patch;
    const char *pre;
    size_t pre_len;
    const char *build;
    size_t build_len;
} hk_semver_t;

typedef enum hk_semver_op {
    HK_SEMVER_ANY = 0,   /* "" or "*" */
    HK_SEMVER_EXACT = 1, /* "1.2.3" */
    HK_SEMVER_CARET = 2, /* "^1.2.3" */
    HK_SEMVER_TILDE = 3, /* "~1.2.3" */
    HK_SEMVER_GE = 4,    /* ">=1.2.3" */
    HK_SEMVER_GT = 5,    /* ">1.2.3" */
    HK_SEMVER_LT = 6,    /* "<1.2.3" */
    HK_SEMVER_LE = 7     /* "<=1.2.3" */
} hk_semver_op_t;

/* One parsed comparator, an element of a range: the operator ("=1.2.3" is
 * EXACT), the version written after it (numbers left out are 0) and how many
 * numbers were written (1 to 3; 0 for ANY). */
typedef struct hk_semver_cmp {
    hk_semver_op_t op;
    unsigned parts;
    hk_semver_t base;
} hk_semver_cmp_t;

/* Parses text[0..len) as one version (all of it: nothing may follow).
 * Returns HK_STATUS_OK and fills *out; HK_STATUS_INVALID_VALUE for malformed
 * text (a number with a leading zero or too big for 64 bits, a missing or
 * empty part, a character out of place), *out then zeroed; HK_STATUS_NULL_POINTER
 * when out is NULL, or text is NULL with len > 0. When reason is not NULL and
 * reason_size > 0, a failure writes one NUL-terminated line there naming the
 * text and what is wrong ("'1.02.3': minor has a leading zero"), truncated to
 * reason_size; on success reason gets "". out borrows text. */
hk_status_t hk_semver_parse_n(const char *text, size_t len, hk_semver_t *out,
                              char *reason, size_t reason_size);

/* hk_semver_parse_n over the NUL-terminated text (NULL: NULL_POINTER). */
hk_status_t hk_semver_parse(const char *text, hk_semver_t *out, char *reason,
                            size_t reason_size);

/* Precedence of a and b: < 0 when a is lower, 0 when equal (build metadata
 * ignored), > 0 when a is higher. NULL is lower than any version and equal
 * to NULL. */
int hk_semver_compare(const hk_semver_t *a, const hk_semver_t *b);

/* The most comparators one range may list. */
#define HK_SEMVER_RANGE_MAX 8

/* A parsed range: count comparators, all of which must hold; count 0 is
 * any release ("" or "*"). */
typedef struct hk_semver_range {
    unsigned count;
    hk_semver_cmp_t cmp[HK_SEMVER_RANGE_MAX];
} hk_semver_range_t;

/* Parses text[0..len) as a whole range: one comparator, a list, or "" or
 * "*" (grammar above). Returns HK_STATUS_OK and fills *out;
 * HK_STATUS_INVALID_VALUE for a malformed range (*out then any release,
 * count 0), with a one-line reason that quotes the range and, for a list,
 * names the comparator at fault by position and text ("'>=1.2, <2.x':
 * comparator 2 '<2.x': minor is not a number: found 'x'"); a single
 * comparator's reason is its own ("'^1.x': minor is not a number: found
 * 'x'"); HK_STATUS_NULL_POINTER as hk_semver_parse_n. Reason and borrowing
 * as hk_semver_parse_n. */
hk_status_t hk_semver_range_parse_n(const char *text, size_t len, hk_semver_range_t *out,
                                    char *reason, size_t reason_size);

/* hk_semver_range_parse_n over the NUL-terminated text (NULL: NULL_POINTER). */
hk_status_t hk_semver_range_parse(const char *text, hk_semver_range_t *out, char *reason,
                                  size_t reason_size);

/* 1 when version v is in range r: every comparator holds, and a pre-release
 * is named by one of them (rule above); else 0; 0 when either is NULL. */
int hk_semver_range_match(const hk_semver_range_t *r, const hk_semver_t *v);

/* 1 when v is not in r only because of the pre-release rule: v is a
 * pre-release, every comparator holds, but none names a pre-release of v's
 * MAJOR.MINOR.PATCH ("*" or "<2" and 2.0.0-rc.1). Otherwise 0, and 0 when
 * either is NULL. */
int hk_semver_range_skips_pre(const hk_semver_range_t *r, const hk_semver_t *v);

#ifdef __cplusplus
}
#endif

#endif /* HK_SEMVER_H */
