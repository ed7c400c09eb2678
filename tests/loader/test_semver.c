/* Semantic versions and ranges (plugin_api/hk_semver.h): strict parsing,
 * precedence, range grammar and matching, including the pre-release rule and
 * numbers at the 64-bit limit; ranges that list comparators, their refusals
 * and matching; and properties checked over a table of versions in semver
 * 2.0.0 precedence order. The properties are stated by table position, not
 * by hk_semver_compare, so a wrong precedence and a wrong operator both
 * show. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hk_semver.h"
#include "hk_test.h"

void ts_register_semver(void); /* called by test_loader_select.c */

#define U64MAX "18446744073709551615"
#define U64OVER "18446744073709551616"

static void test_parse_valid(void)
{
    hk_semver_t v;
    char why[256] = "x";

    CU_ASSERT_EQUAL(hk_semver_parse("1.2.3", &v, why, sizeof(why)), HK_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(why, "");
    CU_ASSERT(v.major == 1 && v.minor == 2 && v.patch == 3);
    CU_ASSERT_PTR_NULL(v.pre);
    CU_ASSERT_PTR_NULL(v.build);

    const char *t = "10.20.30-rc.1+build.007";
    CU_ASSERT_EQUAL(hk_semver_parse(t, &v, why, sizeof(why)), HK_STATUS_OK);
    CU_ASSERT(v.major == 10 && v.minor == 20 && v.patch == 30);
    CU_ASSERT_EQUAL(v.pre_len, 4);
    CU_ASSERT(v.pre && memcmp(v.pre, "rc.1", 4) == 0);
    CU_ASSERT_PTR_EQUAL(v.pre, t + 9); /* borrows the text */
    CU_ASSERT_EQUAL(v.build_len, 9);
    CU_ASSERT(v.build && memcmp(v.build, "build.007", 9) == 0);

    CU_ASSERT_EQUAL(hk_semver_parse(U64MAX "." U64MAX "." U64MAX, &v, NULL, 0), HK_STATUS_OK);
    CU_ASSERT(v.major == UINT64_MAX && v.minor == UINT64_MAX && v.patch == UINT64_MAX);

    static const char *const ok[] = {
        "0.0.0", "0.0.4", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0-x.7.z.92",
        "1.0.0-x-y-z.--", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85",
        "1.0.0+21AF26D3----117B344092BD", "1.0.0-alpha-a.b-c-somethinglong+build.1-aef.1-its",
        "1.2.3-" U64MAX, "1.2.3+0.00.000",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        hk_status_t st = hk_semver_parse(ok[i], &v, why, sizeof(why));
        if (st != HK_STATUS_OK)
            fprintf(stderr, "\n  refused %s: %s", ok[i], why);
        CU_ASSERT_EQUAL(st, HK_STATUS_OK);
    }
    /* a length-bounded parse reads no further than asked */
    CU_ASSERT_EQUAL(hk_semver_parse_n("1.2.3,junk", 5, &v, NULL, 0), HK_STATUS_OK);
    CU_ASSERT(v.patch == 3);
}

static void test_parse_malformed(void)
{
    static const struct {
        const char *text;
        const char *why; /* expected part of the reason */
    } bad[] = {
        {"", "empty version"},
        {"1", "needs major.minor.patch"},
        {"1.2", "needs major.minor.patch"},
        {"1.2.3.4", "unexpected '.' after patch"},
        {"01.2.3", "major has a leading zero"},
        {"1.02.3", "minor has a leading zero"},
        {"1.2.00", "patch has a leading zero"},
        {"v1.2.3", "major is not a number: found 'v'"},
        {" 1.2.3", "major is not a number: found 0x20"},
        {"1.2.3 ", "unexpected 0x20 after patch"},
        {"1.2.3\n", "unexpected 0x0a after patch"},
        {"-1.2.3", "major is not a number"},
        {"1..3", "minor is not a number: found '.'"},
        {"1.2.", "patch is missing after '.'"},
        {"1.2.x", "patch is not a number: found 'x'"},
        {"1.2-rc.1", "a pre-release needs major.minor.patch"},
        {"1.2.3-", "empty pre-release after '-'"},
        {"1.2.3-01", "pre-release identifier '01' has a leading zero"},
        {"1.2.3-a..b", "empty identifier in pre-release"},
        {"1.2.3-a.", "empty identifier in pre-release"},
        {"1.2.3-a_b", "character '_' not allowed in pre-release"},
        {"1.2.3+", "empty build metadata after '+'"},
        {"1.2.3+a+b", "character '+' not allowed in build metadata"},
        {"1.2.3+a..b", "empty identifier in build metadata"},
        {U64OVER ".0.0", "major does not fit in 64 bits"},
        {"1." U64OVER ".0", "minor does not fit in 64 bits"},
        {"1.0.99999999999999999999999999999", "patch does not fit in 64 bits"},
        {"1.2.3-" U64OVER, "pre-release number does not fit in 64 bits"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hk_semver_t v;
        char why[256] = "";
        memset(&v, 0xa5, sizeof(v));
        hk_status_t st = hk_semver_parse(bad[i].text, &v, why, sizeof(why));
        CU_ASSERT_EQUAL(st, HK_STATUS_INVALID_VALUE);
        if (!strstr(why, bad[i].why))
            fprintf(stderr, "\n  '%s': reason \"%s\", expected \"%s\"", bad[i].text, why,
                    bad[i].why);
        CU_ASSERT_PTR_NOT_NULL(strstr(why, bad[i].why));
        CU_ASSERT_PTR_NULL(strchr(why, '\n')); /* one line, whatever the input */
        CU_ASSERT(v.major == 0 && v.minor == 0 && v.patch == 0 && !v.pre && !v.build);
    }
    /* the reason quotes the text */
    char why[256];
    hk_semver_t v;
    CU_ASSERT_EQUAL(hk_semver_parse("1.02.3", &v, why, sizeof(why)), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_STRING_EQUAL(why, "'1.02.3': minor has a leading zero");
    /* a tiny reason buffer is cut, not overrun */
    char tiny[6];
    memset(tiny, 'z', sizeof(tiny));
    CU_ASSERT_EQUAL(hk_semver_parse("x", &v, tiny, 4), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_EQUAL(strlen(tiny), 3);
    CU_ASSERT_EQUAL(tiny[4], 'z');
    /* a huge text gives a short reason */
    static char huge[100000];
    memset(huge, '9', sizeof(huge) - 1);
    CU_ASSERT_EQUAL(hk_semver_parse(huge, &v, why, sizeof(why)), HK_STATUS_INVALID_VALUE);
    CU_ASSERT(strlen(why) < 160);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "does not fit in 64 bits"));
    /* NULL */
    CU_ASSERT_EQUAL(hk_semver_parse(NULL, &v, why, sizeof(why)), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_parse("1.2.3", NULL, NULL, 0), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_parse_n(NULL, 3, &v, NULL, 0), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_parse_n(NULL, 0, &v, NULL, 0), HK_STATUS_INVALID_VALUE);
}

static void test_precedence(void)
{
    /* strictly increasing */
    static const char *const order[] = {
        "0.0.0", "0.0.1", "0.1.0", "0.9.9", "1.0.0-0", "1.0.0-9", "1.0.0-10",
        "1.0.0-" U64MAX, "1.0.0-0a", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta",
        "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0-rc.2",
        "1.0.0-rc.10", "1.0.0", "1.2.0", "1.10.0", "2.0.0-rc.1", "2.0.0", "10.0.0",
        U64MAX ".0.0", U64MAX "." U64MAX "." U64MAX,
    };
    size_t n = sizeof(order) / sizeof(order[0]);
    hk_semver_t v[32];
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL_FATAL(hk_semver_parse(order[i], &v[i], NULL, 0), HK_STATUS_OK);
    for (size_t i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(hk_semver_compare(&v[i], &v[i]), 0);
        for (size_t j = i + 1; j < n; j++) {
            int lo = hk_semver_compare(&v[i], &v[j]), hi = hk_semver_compare(&v[j], &v[i]);
            if (lo >= 0 || hi <= 0)
                fprintf(stderr, "\n  %s vs %s: %d, %d", order[i], order[j], lo, hi);
            CU_ASSERT(lo < 0 && hi > 0);
        }
    }
    /* build metadata never counts */
    hk_semver_t a, b;
    CU_ASSERT_EQUAL(hk_semver_parse("1.2.0+b5", &a, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_parse("1.2.0+zz.1", &b, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_compare(&a, &b), 0);
    CU_ASSERT_EQUAL(hk_semver_parse("1.2.0-rc.1+x", &a, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_parse("1.2.0-rc.1", &b, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_compare(&a, &b), 0);
    /* NULL below everything */
    CU_ASSERT(hk_semver_compare(NULL, &a) < 0);
    CU_ASSERT(hk_semver_compare(&a, NULL) > 0);
    CU_ASSERT_EQUAL(hk_semver_compare(NULL, NULL), 0);
}

static void test_range_parse(void)
{
    static const struct {
        const char *text;
        hk_semver_op_t op;
        unsigned parts;
    } ok[] = {
        {"", HK_SEMVER_ANY, 0},       {"*", HK_SEMVER_ANY, 0},
        {"1.2.3", HK_SEMVER_EXACT, 3}, {"1.2.3-rc.1+b", HK_SEMVER_EXACT, 3},
        {"^1", HK_SEMVER_CARET, 1},   {"^1.2", HK_SEMVER_CARET, 2},
        {"^1.2.3", HK_SEMVER_CARET, 3}, {"~1", HK_SEMVER_TILDE, 1},
        {"~1.2", HK_SEMVER_TILDE, 2}, {">=1.2", HK_SEMVER_GE, 2},
        {">=2.0.0-rc.1", HK_SEMVER_GE, 3}, {"^" U64MAX, HK_SEMVER_CARET, 1},
        {"=1.2.3", HK_SEMVER_EXACT, 3}, {"=1.2.3-rc.1+b", HK_SEMVER_EXACT, 3},
        {">1.2.3", HK_SEMVER_GT, 3},  {">1.2.3-rc.1", HK_SEMVER_GT, 3},
        {"<2", HK_SEMVER_LT, 1},      {"<1.2", HK_SEMVER_LT, 2},
        {"<1.2.3-rc.1", HK_SEMVER_LT, 3}, {"<=1.2.3", HK_SEMVER_LE, 3},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        hk_semver_range_t r;
        char why[256];
        CU_ASSERT_EQUAL(hk_semver_range_parse(ok[i].text, &r, why, sizeof(why)), HK_STATUS_OK);
        /* "" and "*" are a range of no comparator, anything else a range of one */
        CU_ASSERT_EQUAL(r.count, ok[i].op == HK_SEMVER_ANY ? 0u : 1u);
        if (r.count == 1) {
            CU_ASSERT_EQUAL(r.cmp[0].op, ok[i].op);
            CU_ASSERT_EQUAL(r.cmp[0].parts, ok[i].parts);
        }
    }
    /* a comma joins comparators into one range */
    hk_semver_range_t list;
    CU_ASSERT_EQUAL(hk_semver_range_parse(">=1.2, <2", &list, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(list.count, 2);
    CU_ASSERT(list.cmp[0].op == HK_SEMVER_GE && list.cmp[0].parts == 2);
    CU_ASSERT(list.cmp[1].op == HK_SEMVER_LT && list.cmp[1].parts == 1);
    static const struct {
        const char *text;
        const char *why;
    } bad[] = {
        {"1.2", "an exact version needs major.minor.patch (write ^1.2 or ~1.2"},
        {"1", "an exact version needs major.minor.patch"},
        {"^", "no version after '^'"},
        {"~", "no version after '~'"},
        {">=", "no version after '>='"},
        {"<", "no version after '<'"},
        {">", "no version after '>'"},
        {"<=", "no version after '<='"},
        {"=", "no version after '='"},
        {">1.2", "'>' needs major.minor.patch ('>1.2' could mean >1.2.0 or above every 1.2.x)"},
        {">1", "'>' needs major.minor.patch"},
        {"<=1.2", "'<=' needs major.minor.patch ('<=1.2' could mean <=1.2.0 or up to every "
                  "1.2.x)"},
        {"=1.2", "an exact version needs major.minor.patch (write ^1.2 or ~1.2 for a range)"},
        {">= 1.2", "space between '>=' and its version"},
        {"< 2", "space between '<' and its version"},
        {"=>1.2.3", "major is not a number: found '>'"},
        {"<>1.2.3", "major is not a number: found '>'"},
        {">>1.2.3", "major is not a number: found '>'"},
        {"==1.2.3", "major is not a number: found '='"},
        {"v1.2.3", "unknown range: starts with 'v'"},
        {"x", "(a range is *, or comparators such as 1.2.3, ^1.2, ~1.2, >=1.2, <2 joined by "
              "commas)"},
        {" ^1", "unknown range: starts with 0x20"},
        {"**", "unknown range"},
        {"^1.x", "minor is not a number: found 'x'"},
        {"^1.2-rc", "a pre-release needs major.minor.patch"},
        {"^01", "major has a leading zero"},
        {"^" U64OVER, "major does not fit in 64 bits"},
        {"~1.2.3 || 2.0.0", "'||' (either of two ranges) is not supported"},
        {"~1.2.3 2.0.0", "unexpected 0x20 after patch"},
        {"^1.2.3.4", "unexpected '.' after patch"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hk_semver_range_t r;
        char why[256] = "";
        memset(&r, 0xa5, sizeof(r));
        CU_ASSERT_EQUAL(hk_semver_range_parse(bad[i].text, &r, why, sizeof(why)),
                        HK_STATUS_INVALID_VALUE);
        if (!strstr(why, bad[i].why))
            fprintf(stderr, "\n  '%s': reason \"%s\", expected \"%s\"", bad[i].text, why,
                    bad[i].why);
        CU_ASSERT_PTR_NOT_NULL(strstr(why, bad[i].why));
        CU_ASSERT_EQUAL(r.count, 0); /* any release on failure */
    }
    /* the reasons hk_semver.h quotes, whole: a single comparator's own, and a
     * list's naming the comparator at fault */
    hk_semver_range_t r;
    char why[256];
    CU_ASSERT_EQUAL(hk_semver_range_parse("^1.x", &r, why, sizeof(why)), HK_STATUS_INVALID_VALUE);
    CU_ASSERT_STRING_EQUAL(why, "'^1.x': minor is not a number: found 'x'");
    CU_ASSERT_EQUAL(hk_semver_range_parse(">=1.2, <2.x", &r, why, sizeof(why)),
                    HK_STATUS_INVALID_VALUE);
    CU_ASSERT_STRING_EQUAL(why, "'>=1.2, <2.x': comparator 2 '<2.x': minor is not a number: "
                                "found 'x'");
    CU_ASSERT_EQUAL(hk_semver_range_parse(NULL, &r, NULL, 0), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_range_parse("*", NULL, NULL, 0), HK_STATUS_NULL_POINTER);
}

/* range, version, expected match, expected skips_pre */
static const struct {
    const char *range;
    const char *version;
    int match;
    int skips_pre;
} match_table[] = {
    {"*", "0.0.0", 1, 0}, {"*", "1.2.3+b", 1, 0}, {"", "5.0.0", 1, 0},
    {"*", "2.0.0-rc.1", 0, 1}, /* a pre-release only when named */
    {"1.2.3", "1.2.3", 1, 0}, {"1.2.3", "1.2.3+other", 1, 0}, {"1.2.3", "1.2.4", 0, 0},
    {"1.2.3", "1.2.3-rc.1", 0, 0}, {"1.2.3-rc.1", "1.2.3-rc.1", 1, 0},
    {"1.2.3-rc.1", "1.2.3", 0, 0},
    {"^1.2", "1.2.0", 1, 0}, {"^1.2", "1.10.0", 1, 0}, {"^1.2", "1.1.9", 0, 0},
    {"^1.2", "2.0.0", 0, 0}, {"^1", "1.0.0", 1, 0}, {"^1", "1.99.99", 1, 0},
    {"^1", "1.5.0-beta", 0, 1}, {"^1", "2.0.0-rc.1", 0, 0}, {"^1", "0.9.0", 0, 0},
    {"^1.2.3", "1.2.2", 0, 0}, {"^1.2.3", "1.2.3", 1, 0}, {"^1.2.3", "1.9.0", 1, 0},
    {"^0.2.3", "0.2.3", 1, 0}, {"^0.2.3", "0.2.9", 1, 0}, {"^0.2.3", "0.3.0", 0, 0},
    {"^0.2", "0.2.0", 1, 0}, {"^0.2", "0.3.0", 0, 0}, {"^0.0.3", "0.0.3", 1, 0},
    {"^0.0.3", "0.0.4", 0, 0}, {"^0.0", "0.0.9", 1, 0}, {"^0.0", "0.1.0", 0, 0},
    {"^0", "0.9.0", 1, 0}, {"^0", "1.0.0", 0, 0},
    {"~1.2", "1.2.0", 1, 0}, {"~1.2", "1.2.9", 1, 0}, {"~1.2", "1.3.0", 0, 0},
    {"~1.2.3", "1.2.2", 0, 0}, {"~1.2.3", "1.2.4", 1, 0}, {"~1", "1.9.0", 1, 0},
    {"~1", "2.0.0", 0, 0},
    {">=1.2", "1.2.0", 1, 0}, {">=1.2", "99.0.0", 1, 0}, {">=1.2", "1.1.99", 0, 0},
    {">=1", "3.0.0-alpha", 0, 1},
    {"^2.0.0-rc.1", "2.0.0-rc.1", 1, 0}, {"^2.0.0-rc.1", "2.0.0-rc.2", 1, 0},
    {"^2.0.0-rc.1", "2.0.0-beta", 0, 0}, {"^2.0.0-rc.1", "2.0.0", 1, 0},
    {"^2.0.0-rc.1", "2.5.0", 1, 0}, {"^2.0.0-rc.1", "2.1.0-beta", 0, 1},
    {">=2.0.0-rc.1", "3.0.0", 1, 0}, {"~2.0.0-rc.1", "2.0.0-rc.3", 1, 0},
    {"=1.2.3", "1.2.3", 1, 0}, {"=1.2.3", "1.2.3+b.1", 1, 0}, {"=1.2.3", "1.2.4", 0, 0},
    {"=1.2.3", "1.2.3-rc.1", 0, 0}, {"=1.2.3-rc.1", "1.2.3-rc.1", 1, 0},
    {">1.2.3", "1.2.3", 0, 0}, {">1.2.3", "1.2.3+b", 0, 0}, {">1.2.3", "1.2.4", 1, 0},
    {">1.2.3", "9.0.0", 1, 0}, {">1.2.3", "1.2.2", 0, 0}, {">1.2.3", "1.2.4-rc.1", 0, 1},
    {">1.2.3-rc.1", "1.2.3-rc.2", 1, 0}, {">1.2.3-rc.1", "1.2.3", 1, 0},
    {">1.2.3-rc.1", "1.2.3-rc.1", 0, 0}, {">1.2.3-rc.1", "1.3.0-rc.1", 0, 1},
    {"<2", "1.99.99", 1, 0}, {"<2", "0.0.0", 1, 0}, {"<2", "2.0.0", 0, 0},
    {"<2", "2.0.0-rc.1", 0, 1}, /* below 2.0.0, but a pre-release not named */
    {"<2.0.0-rc.2", "2.0.0-rc.1", 1, 0}, {"<2.0.0-rc.2", "2.0.0-rc.2", 0, 0},
    {"<2.0.0-rc.2", "1.9.0-rc.1", 0, 1}, {"<1.2", "1.1.9", 1, 0}, {"<1.2", "1.2.0", 0, 0},
    {"<0.0.1", "0.0.0", 1, 0}, {"<0.0.0", "0.0.0", 0, 0},
    {"<=1.2.3", "1.2.3", 1, 0}, {"<=1.2.3", "1.2.3+b", 1, 0}, {"<=1.2.3", "1.2.4", 0, 0},
    {"<=1.2.3", "0.1.0", 1, 0}, {"<=1.2.3", "1.2.3-rc.1", 0, 1},
    {"<=1.2.3-rc.1", "1.2.3-beta", 1, 0}, {"<=1.2.3-rc.1", "1.2.3-rc.1", 1, 0},
    /* no overflow at the top of the range */
    {"^" U64MAX, U64MAX "." U64MAX ".0", 1, 0}, {"^" U64MAX, "1.0.0", 0, 0},
    {"~" U64MAX "." U64MAX, U64MAX "." U64MAX "." U64MAX, 1, 0},
    {">=" U64MAX "." U64MAX "." U64MAX, U64MAX "." U64MAX "." U64MAX, 1, 0},
    {">=" U64MAX "." U64MAX "." U64MAX, U64MAX "." U64MAX ".9", 0, 0},
    {">" U64MAX "." U64MAX "." U64MAX, U64MAX "." U64MAX "." U64MAX, 0, 0},
    {"<" U64MAX, U64MAX "." U64MAX "." U64MAX, 0, 0}, {"<" U64MAX, "1.0.0", 1, 0},
    {"<=" U64MAX "." U64MAX "." U64MAX, U64MAX "." U64MAX "." U64MAX, 1, 0},
};

static void test_range_match(void)
{
    for (size_t i = 0; i < sizeof(match_table) / sizeof(match_table[0]); i++) {
        const char *text = match_table[i].range;
        hk_semver_range_t r;
        hk_semver_t v;
        CU_ASSERT_EQUAL_FATAL(hk_semver_range_parse(text, &r, NULL, 0), HK_STATUS_OK);
        CU_ASSERT_EQUAL_FATAL(hk_semver_parse(match_table[i].version, &v, NULL, 0),
                              HK_STATUS_OK);
        /* one comparator is a range of one; "" and "*" a range of none */
        CU_ASSERT_EQUAL(r.count, (!*text || strcmp(text, "*") == 0) ? 0u : 1u);
        int m = hk_semver_range_match(&r, &v), s = hk_semver_range_skips_pre(&r, &v);
        if (m != match_table[i].match || s != match_table[i].skips_pre)
            fprintf(stderr, "\n  %s in '%s': match %d skips_pre %d", match_table[i].version,
                    text, m, s);
        CU_ASSERT_EQUAL(m, match_table[i].match);
        CU_ASSERT_EQUAL(s, match_table[i].skips_pre);
    }
    hk_semver_range_t r;
    hk_semver_t v;
    CU_ASSERT_EQUAL(hk_semver_range_parse("*", &r, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_parse("1.0.0", &v, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_range_match(NULL, &v), 0);
    CU_ASSERT_EQUAL(hk_semver_range_match(&r, NULL), 0);
    CU_ASSERT_EQUAL(hk_semver_range_skips_pre(NULL, &v), 0);
}

static void test_list_parse_valid(void)
{
    static const struct {
        const char *text;
        unsigned count;
    } ok[] = {
        {"", 0}, {"*", 0}, {"^1", 1}, {"1.2.3", 1}, {">=1.2,<2", 2}, {">=1.2, <2", 2},
        {">=1.2 ,<2", 2}, {">=1.2   ,   <2", 2}, {"^1, ~1.2, >1.2.0", 3},
        {"^1,~1.2,>1.2.0,<=1.9.9,=1.5.0,1.5.0,<2,>=1", HK_SEMVER_RANGE_MAX},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        hk_semver_range_t s;
        char why[256] = "x";
        hk_status_t st = hk_semver_range_parse(ok[i].text, &s, why, sizeof(why));
        if (st != HK_STATUS_OK)
            fprintf(stderr, "\n  refused '%s': %s", ok[i].text, why);
        CU_ASSERT_EQUAL(st, HK_STATUS_OK);
        CU_ASSERT_STRING_EQUAL(why, "");
        CU_ASSERT_EQUAL(s.count, ok[i].count);
    }
    /* fields of each comparator, and borrowing of the text */
    const char *t = ">=2.0.0-rc.1 , <3";
    hk_semver_range_t s;
    CU_ASSERT_EQUAL_FATAL(hk_semver_range_parse(t, &s, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(s.count, 2);
    CU_ASSERT_EQUAL(s.cmp[0].op, HK_SEMVER_GE);
    CU_ASSERT_EQUAL(s.cmp[0].parts, 3);
    CU_ASSERT(s.cmp[0].base.major == 2 && s.cmp[0].base.minor == 0 && s.cmp[0].base.patch == 0);
    CU_ASSERT_PTR_EQUAL(s.cmp[0].base.pre, t + 8);
    CU_ASSERT_EQUAL(s.cmp[0].base.pre_len, 4);
    CU_ASSERT_EQUAL(s.cmp[1].op, HK_SEMVER_LT);
    CU_ASSERT_EQUAL(s.cmp[1].parts, 1);
    CU_ASSERT(s.cmp[1].base.major == 3 && s.cmp[1].base.minor == 0 && !s.cmp[1].base.pre);
    /* a length-bounded parse reads no further than asked */
    CU_ASSERT_EQUAL(hk_semver_range_parse_n(">=1, <2,,junk", 7, &s, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(s.count, 2);
}

static void test_list_parse_malformed(void)
{
    static const struct {
        const char *text;
        const char *why; /* expected part of the reason */
    } bad[] = {
        {",", "',': comparator 1 is empty"},
        {">=1.2,,<2", "'>=1.2,,<2': comparator 2 is empty"},
        {">=1.2, ,<2", "comparator 2 is empty"},
        {">=1.2,", "comparator 2 is empty"},
        {">=1.2, ", "comparator 2 is empty"},
        {",<2", "comparator 1 is empty"},
        {">=1.2, <2.x", "'>=1.2, <2.x': comparator 2 '<2.x': minor is not a number: found 'x'"},
        {">1.2, <2", "comparator 1 '>1.2': '>' needs major.minor.patch"},
        {"^1, 1.2", "comparator 2 '1.2': an exact version needs major.minor.patch"},
        {">=1, <= 2.0.0", "comparator 2 '<= 2.0.0': space between '<=' and its version"},
        {">=1,\t<2", "comparator 2 '?<2': unknown range: starts with 0x09"},
        {">=1\t,<2", "comparator 1 '>=1?': unexpected 0x09 after major"},
        {" >=1, <2", "comparator 1 ' >=1': unknown range: starts with 0x20"},
        {">=1, <2 ", "comparator 2 '<2 ': unexpected 0x20 after major"},
        {">=1 <2", "'>=1 <2': unexpected 0x20 after major"},
        {"*, <2", "'*' stands alone: it cannot be listed with other comparators"},
        {"<2, *", "'*' stands alone"},
        {"^1 || ^2", "'||' (either of two ranges) is not supported: a comma joins "
                     "comparators that must all hold"},
        {"1.2.3 - 2.0.0", "unexpected 0x20 after patch"},
        {"^1,^1,^1,^1,^1,^1,^1,^1,^1", "more than 8 comparators"},
        {">=1.2\n,<2", "unexpected 0x0a after minor"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hk_semver_range_t s;
        char why[256] = "";
        memset(&s, 0xa5, sizeof(s));
        hk_status_t st = hk_semver_range_parse(bad[i].text, &s, why, sizeof(why));
        CU_ASSERT_EQUAL(st, HK_STATUS_INVALID_VALUE);
        if (!strstr(why, bad[i].why))
            fprintf(stderr, "\n  '%s': reason \"%s\", expected \"%s\"", bad[i].text, why,
                    bad[i].why);
        CU_ASSERT_PTR_NOT_NULL(strstr(why, bad[i].why));
        CU_ASSERT_PTR_NULL(strchr(why, '\n'));
        CU_ASSERT_EQUAL(s.count, 0); /* any release on failure, never half a list */
    }
    /* a long list of long comparators: the reason stays short and whole */
    static char huge[20000];
    for (size_t i = 0; i + 10 < sizeof(huge); i += 10)
        memcpy(huge + i, ">=1.2.3,  ", 10);
    char why[256];
    hk_semver_range_t s;
    CU_ASSERT_EQUAL(hk_semver_range_parse(huge, &s, why, sizeof(why)), HK_STATUS_INVALID_VALUE);
    CU_ASSERT(strlen(why) < 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "more than 8 comparators"));
    /* NULL */
    CU_ASSERT_EQUAL(hk_semver_range_parse(NULL, &s, why, sizeof(why)), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_range_parse("^1", NULL, NULL, 0), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_range_parse_n(NULL, 2, &s, NULL, 0), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_range_parse_n(NULL, 0, &s, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(s.count, 0);
}

static void test_list_match(void)
{
    static const struct {
        const char *range, *version;
        int match, skips_pre;
    } table[] = {
        {">=1.2, <2", "1.2.0", 1, 0}, {">=1.2, <2", "1.9.9", 1, 0},
        {">=1.2, <2", "2.0.0", 0, 0}, {">=1.2, <2", "1.1.9", 0, 0},
        {">=1.2, <2", "1.5.0-beta", 0, 1}, {">=1.2, <2", "2.0.0-rc.1", 0, 1},
        {">=1.2, <2", "1.5.0+b7", 1, 0},
        {">=2.0.0-rc.1, <3", "2.0.0-rc.2", 1, 0}, {">=2.0.0-rc.1, <3", "2.0.0", 1, 0},
        {">=2.0.0-rc.1, <3", "2.1.0-beta", 0, 1}, {">=2.0.0-rc.1, <3", "3.0.0", 0, 0},
        {">=2.0.0-rc.1, <3", "2.0.0-beta", 0, 0},
        /* a pre-release named by the upper comparator */
        {">=2.0.0-beta, <2.0.0-rc.2", "2.0.0-rc.1", 1, 0},
        {">=2.0.0-beta, <2.0.0-rc.2", "2.0.0-alpha", 0, 0},
        {">1.9.0, <2.0.0-0", "2.0.0-0", 0, 0}, {">1.9.0, <2.0.0-0", "1.9.1", 1, 0},
        {"^1, <=1.4.0, >1.0.0", "1.4.0", 1, 0}, {"^1, <=1.4.0, >1.0.0", "1.0.0", 0, 0},
        {"^1, <=1.4.0, >1.0.0", "1.0.1", 1, 0}, {"^1, <=1.4.0, >1.0.0", "1.4.1", 0, 0},
        {"~1.2, >1.2.3", "1.2.4", 1, 0}, {"~1.2, >1.2.3", "1.2.3", 0, 0},
        {"~1.2, >1.2.3", "1.3.0", 0, 0},
        {"^1, ^2", "1.5.0", 0, 0}, {"^1, ^2", "2.0.0", 0, 0}, /* empty intersection */
        {">1.0.0, <1.0.0", "1.0.0", 0, 0},
        {"=1.0.0+a, =1.0.0+b", "1.0.0+c", 1, 0}, /* build metadata never counts */
        {"1.0.0, <2", "1.0.0", 1, 0}, {"1.0.0, >=1.0.1", "1.0.0", 0, 0},
        {"<=1.0.0, >=1.0.0", "1.0.0", 1, 0}, {"<=1.0.0, >=1.0.0", "1.0.1", 0, 0},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        hk_semver_range_t s;
        hk_semver_t v;
        CU_ASSERT_EQUAL_FATAL(hk_semver_range_parse(table[i].range, &s, NULL, 0), HK_STATUS_OK);
        CU_ASSERT_EQUAL_FATAL(hk_semver_parse(table[i].version, &v, NULL, 0), HK_STATUS_OK);
        int m = hk_semver_range_match(&s, &v), k = hk_semver_range_skips_pre(&s, &v);
        if (m != table[i].match || k != table[i].skips_pre)
            fprintf(stderr, "\n  %s in '%s': match %d skips_pre %d", table[i].version,
                    table[i].range, m, k);
        CU_ASSERT_EQUAL(m, table[i].match);
        CU_ASSERT_EQUAL(k, table[i].skips_pre);
    }
    hk_semver_range_t s;
    hk_semver_t v;
    CU_ASSERT_EQUAL(hk_semver_range_parse("*", &s, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_parse("1.0.0", &v, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_range_match(NULL, &v), 0);
    CU_ASSERT_EQUAL(hk_semver_range_match(&s, NULL), 0);
    CU_ASSERT_EQUAL(hk_semver_range_skips_pre(NULL, &v), 0);
    CU_ASSERT_EQUAL(hk_semver_range_skips_pre(&s, NULL), 0);
}

/* ---- properties over a precedence table ---- */

/* Strictly increasing in semver 2.0.0 precedence: numeric identifiers
 * numerically and below alphanumeric ones, a shorter identifier list below a
 * longer one it begins, a pre-release below its release. */
static const char *const prec[] = {
    "0.0.0", "0.0.1", "0.1.0", "0.9.9", "1.0.0-0", "1.0.0-2", "1.0.0-10", "1.0.0-0a",
    "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
    "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1-x.7.z.92", "1.0.1", "1.2.0", "1.10.0",
    "2.0.0-rc.1", "2.0.0", "10.0.0",
};
#define NPREC (sizeof(prec) / sizeof(prec[0]))

/* Each version again with build metadata (its build twin): equal in
 * precedence. */
static char prec_build[NPREC][48];
static hk_semver_t pv[NPREC], pb[NPREC];

static int prec_init(void)
{
    for (size_t i = 0; i < NPREC; i++) {
        snprintf(prec_build[i], sizeof(prec_build[i]), "%s+build.%zu", prec[i], i);
        if (hk_semver_parse(prec[i], &pv[i], NULL, 0) != HK_STATUS_OK
            || hk_semver_parse(prec_build[i], &pb[i], NULL, 0) != HK_STATUS_OK)
            return -1;
    }
    return 0;
}

static int sign(int c)
{
    return (c > 0) - (c < 0);
}

static void test_precedence_properties(void)
{
    CU_ASSERT_EQUAL_FATAL(prec_init(), 0);
    size_t bad = 0;
    for (size_t i = 0; i < NPREC; i++)
        for (size_t j = 0; j < NPREC; j++) {
            int c = sign(hk_semver_compare(&pv[i], &pv[j]));
            int want = (i > j) - (i < j);
            /* order by position, antisymmetry, build metadata ignored */
            if (c != want || sign(hk_semver_compare(&pv[j], &pv[i])) != -c
                || sign(hk_semver_compare(&pb[i], &pv[j])) != want
                || sign(hk_semver_compare(&pb[i], &pb[j])) != want) {
                if (bad++ < 5)
                    fprintf(stderr, "\n  %s vs %s: %d", prec[i], prec[j], c);
            }
            /* transitivity, with the order left to the comparison alone */
            for (size_t k = 0; k < NPREC; k++)
                if (c < 0 && hk_semver_compare(&pv[j], &pv[k]) < 0
                    && hk_semver_compare(&pv[i], &pv[k]) >= 0 && bad++ < 5)
                    fprintf(stderr, "\n  not transitive: %s %s %s", prec[i], prec[j], prec[k]);
        }
    CU_ASSERT_EQUAL(bad, 0);
}

/* The operators a property runs over; op_holds gives their meaning by
 * table position. */
static const char *const ops[] = {"=", ">", ">=", "<", "<="};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

static int op_holds(size_t op, size_t k, size_t o)
{
    switch (op) {
    case 0: return k == o;
    case 1: return k > o;
    case 2: return k >= o;
    case 3: return k < o;
    default: return k <= o;
    }
}

/* The pre-release rule by hand: operand o names a pre-release of k's
 * MAJOR.MINOR.PATCH. */
static int names_pre(size_t o, size_t k)
{
    return pv[o].pre && pv[o].major == pv[k].major && pv[o].minor == pv[k].minor
           && pv[o].patch == pv[k].patch;
}

/* Checks range text, made of nop comparators op[x] on table versions o[x],
 * against every table version and its build twin. Returns the number of
 * disagreements. */
static size_t check_range(const char *text, size_t nop, const size_t op[2], const size_t o[2])
{
    hk_semver_range_t s;
    char why[256];
    size_t bad = 0;
    if (hk_semver_range_parse(text, &s, why, sizeof(why)) != HK_STATUS_OK) {
        fprintf(stderr, "\n  '%s' refused: %s", text, why);
        return 1;
    }
    for (size_t k = 0; k < NPREC; k++) {
        int holds = 1, named = !pv[k].pre;
        for (size_t x = 0; x < nop; x++) {
            holds &= op_holds(op[x], k, o[x]);
            named |= names_pre(o[x], k);
        }
        int m = hk_semver_range_match(&s, &pv[k]), sk = hk_semver_range_skips_pre(&s, &pv[k]);
        int mb = hk_semver_range_match(&s, &pb[k]);
        if (m != (holds && named) || sk != (holds && !named) || mb != m) {
            if (bad++ < 3)
                fprintf(stderr, "\n  %s in '%s': match %d (build twin %d) skips_pre %d", prec[k],
                        text, m, mb, sk);
        }
    }
    return bad;
}

/* 1 when version v is in range r (both well formed). */
static int in(const char *r, const char *v)
{
    hk_semver_range_t s;
    hk_semver_t x;
    return hk_semver_range_parse(r, &s, NULL, 0) == HK_STATUS_OK
           && hk_semver_parse(v, &x, NULL, 0) == HK_STATUS_OK && hk_semver_range_match(&s, &x);
}

/* Every operator on every table version, alone and with every other in a
 * list: a candidate matches exactly when each comparator holds by table
 * position and the pre-release rule lets it in. So, for a < b in the table,
 * "<b" never matches b and matches a unless a is a pre-release that b does
 * not name; ">=a, <b" matches a; "=a" matches only a and its build twin. */
static void test_operator_properties(void)
{
    CU_ASSERT_EQUAL_FATAL(prec_init(), 0);
    size_t bad = 0, ranges = 0;
    char text[128];
    for (size_t a = 0; a < NOPS; a++)
        for (size_t i = 0; i < NPREC; i++) {
            size_t op[2] = {a, 0}, o[2] = {i, 0};
            snprintf(text, sizeof(text), "%s%s", ops[a], prec[i]);
            bad += check_range(text, 1, op, o);
            ranges++;
            for (size_t b = 0; b < NOPS; b++)
                for (size_t j = 0; j < NPREC; j++) {
                    op[1] = b;
                    o[1] = j;
                    /* operands with build metadata, and each spacing allowed */
                    snprintf(text, sizeof(text), "%s%s%s%s%s", ops[a], prec_build[i],
                             (i + j) % 3 == 0 ? "," : (i + j) % 3 == 1 ? ", " : " , ",
                             ops[b], prec[j]);
                    bad += check_range(text, 2, op, o);
                    ranges++;
                }
        }
    CU_ASSERT_EQUAL(ranges, NOPS * NPREC * (1 + NOPS * NPREC));
    CU_ASSERT_EQUAL(bad, 0);
    /* the same, spelled out for a reader */
    CU_ASSERT(in("<1.0.0-beta.11", "1.0.0-beta.2") && !in("<1.0.0-beta.11", "1.0.0-beta.11"));
    CU_ASSERT(!in("<1.0.0", "1.0.0-rc.1")); /* a pre-release that <1.0.0 does not name */
    CU_ASSERT(in(">=1.0.0-rc.1, <1.0.0", "1.0.0-rc.1") && !in(">=1.0.0-rc.1, <1.0.0", "1.0.0"));
    CU_ASSERT(in("=1.0.0-alpha.1", "1.0.0-alpha.1+b") && !in("=1.0.0-alpha.1", "1.0.0-alpha"));
}

void ts_register_semver(void)
{
    CU_pSuite s = hk_test_suite("semver", NULL, NULL);
    static const hk_test_case_t tests[] = {
        {"valid versions parse, fields and borrowing", test_parse_valid},
        {"malformed versions: INVALID_VALUE and reason", test_parse_malformed},
        {"precedence, pre-release and build rules", test_precedence},
        {"range grammar: valid and malformed", test_range_parse},
        {"range matching, 0.x carets, pre-releases, 64-bit edges", test_range_match},
        {"range lists: grammar, spaces around commas", test_list_parse_valid},
        {"range lists: malformed, the comparator named", test_list_parse_malformed},
        {"range lists: every comparator holds", test_list_match},
        {"precedence table: order, antisymmetry, transitivity", test_precedence_properties},
        {"precedence table: every operator alone and in pairs", test_operator_properties},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
