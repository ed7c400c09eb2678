/* Semantic versions and ranges (plugin_api/hk_semver.h): strict parsing,
 * precedence, range grammar and matching, including the pre-release rule and
 * numbers at the 64-bit limit. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hk_semver.h"
#include "hk_test.h"

void ts_register_semver(void); /* called by test_loader_select.c */
void ts_register_semver_set(CU_pSuite s); /* test_semver_set.c */

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
        CU_ASSERT_EQUAL(r.op, ok[i].op);
        CU_ASSERT_EQUAL(r.parts, ok[i].parts);
    }
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
        {"~1.2.3 || 2.0.0", "unexpected 0x20 after patch"},
        {"^1.2.3.4", "unexpected '.' after patch"},
        {">=1.2, <2", "unexpected ',' after minor"}, /* one comparator only */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hk_semver_range_t r;
        char why[256] = "";
        r.op = HK_SEMVER_GE;
        CU_ASSERT_EQUAL(hk_semver_range_parse(bad[i].text, &r, why, sizeof(why)),
                        HK_STATUS_INVALID_VALUE);
        if (!strstr(why, bad[i].why))
            fprintf(stderr, "\n  '%s': reason \"%s\", expected \"%s\"", bad[i].text, why,
                    bad[i].why);
        CU_ASSERT_PTR_NOT_NULL(strstr(why, bad[i].why));
        CU_ASSERT_EQUAL(r.op, HK_SEMVER_ANY); /* reset on failure */
    }
    hk_semver_range_t r;
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
        hk_semver_range_t r;
        hk_semver_t v;
        CU_ASSERT_EQUAL_FATAL(hk_semver_range_parse(match_table[i].range, &r, NULL, 0),
                              HK_STATUS_OK);
        CU_ASSERT_EQUAL_FATAL(hk_semver_parse(match_table[i].version, &v, NULL, 0),
                              HK_STATUS_OK);
        int m = hk_semver_range_match(&r, &v), s = hk_semver_range_skips_pre(&r, &v);
        if (m != match_table[i].match || s != match_table[i].skips_pre)
            fprintf(stderr, "\n  %s in '%s': match %d skips_pre %d", match_table[i].version,
                    match_table[i].range, m, s);
        CU_ASSERT_EQUAL(m, match_table[i].match);
        CU_ASSERT_EQUAL(s, match_table[i].skips_pre);
        /* the same text as a whole range (a list of one) decides the same */
        hk_semver_set_t set;
        CU_ASSERT_EQUAL_FATAL(hk_semver_set_parse(match_table[i].range, &set, NULL, 0),
                              HK_STATUS_OK);
        CU_ASSERT_EQUAL(set.count, r.op == HK_SEMVER_ANY ? 0u : 1u);
        CU_ASSERT_EQUAL(hk_semver_set_match(&set, &v), match_table[i].match);
        CU_ASSERT_EQUAL(hk_semver_set_skips_pre(&set, &v), match_table[i].skips_pre);
    }
    hk_semver_range_t r;
    hk_semver_t v;
    CU_ASSERT_EQUAL(hk_semver_range_parse("*", &r, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_parse("1.0.0", &v, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_range_match(NULL, &v), 0);
    CU_ASSERT_EQUAL(hk_semver_range_match(&r, NULL), 0);
    CU_ASSERT_EQUAL(hk_semver_range_skips_pre(NULL, &v), 0);
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
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
    ts_register_semver_set(s);
}
