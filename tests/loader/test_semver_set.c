/* Ranges that list comparators (hk_semver_set_t in plugin_api/hk_semver.h):
 * the list grammar and its refusals, matching, and properties checked over a
 * table of versions in semver 2.0.0 precedence order. The properties are
 * stated by table position, not by hk_semver_compare, so a wrong precedence
 * and a wrong operator both show. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hk_semver.h"
#include "hk_test.h"

void ts_register_semver_set(CU_pSuite s); /* called by test_semver.c */

static void test_set_parse_valid(void)
{
    static const struct {
        const char *text;
        unsigned count;
    } ok[] = {
        {"", 0}, {"*", 0}, {"^1", 1}, {"1.2.3", 1}, {">=1.2,<2", 2}, {">=1.2, <2", 2},
        {">=1.2 ,<2", 2}, {">=1.2   ,   <2", 2}, {"^1, ~1.2, >1.2.0", 3},
        {"^1,~1.2,>1.2.0,<=1.9.9,=1.5.0,1.5.0,<2,>=1", HK_SEMVER_SET_MAX},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        hk_semver_set_t s;
        char why[256] = "x";
        hk_status_t st = hk_semver_set_parse(ok[i].text, &s, why, sizeof(why));
        if (st != HK_STATUS_OK)
            fprintf(stderr, "\n  refused '%s': %s", ok[i].text, why);
        CU_ASSERT_EQUAL(st, HK_STATUS_OK);
        CU_ASSERT_STRING_EQUAL(why, "");
        CU_ASSERT_EQUAL(s.count, ok[i].count);
    }
    /* fields of each comparator, and borrowing of the text */
    const char *t = ">=2.0.0-rc.1 , <3";
    hk_semver_set_t s;
    CU_ASSERT_EQUAL_FATAL(hk_semver_set_parse(t, &s, NULL, 0), HK_STATUS_OK);
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
    CU_ASSERT_EQUAL(hk_semver_set_parse_n(">=1, <2,,junk", 7, &s, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(s.count, 2);
}

static void test_set_parse_malformed(void)
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
        hk_semver_set_t s;
        char why[256] = "";
        memset(&s, 0xa5, sizeof(s));
        hk_status_t st = hk_semver_set_parse(bad[i].text, &s, why, sizeof(why));
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
    hk_semver_set_t s;
    CU_ASSERT_EQUAL(hk_semver_set_parse(huge, &s, why, sizeof(why)), HK_STATUS_INVALID_VALUE);
    CU_ASSERT(strlen(why) < 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "more than 8 comparators"));
    /* NULL */
    CU_ASSERT_EQUAL(hk_semver_set_parse(NULL, &s, why, sizeof(why)), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_set_parse("^1", NULL, NULL, 0), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_set_parse_n(NULL, 2, &s, NULL, 0), HK_STATUS_NULL_POINTER);
    CU_ASSERT_EQUAL(hk_semver_set_parse_n(NULL, 0, &s, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(s.count, 0);
}

static void test_set_match(void)
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
        hk_semver_set_t s;
        hk_semver_t v;
        CU_ASSERT_EQUAL_FATAL(hk_semver_set_parse(table[i].range, &s, NULL, 0), HK_STATUS_OK);
        CU_ASSERT_EQUAL_FATAL(hk_semver_parse(table[i].version, &v, NULL, 0), HK_STATUS_OK);
        int m = hk_semver_set_match(&s, &v), k = hk_semver_set_skips_pre(&s, &v);
        if (m != table[i].match || k != table[i].skips_pre)
            fprintf(stderr, "\n  %s in '%s': match %d skips_pre %d", table[i].version,
                    table[i].range, m, k);
        CU_ASSERT_EQUAL(m, table[i].match);
        CU_ASSERT_EQUAL(k, table[i].skips_pre);
    }
    hk_semver_set_t s;
    hk_semver_t v;
    CU_ASSERT_EQUAL(hk_semver_set_parse("*", &s, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_parse("1.0.0", &v, NULL, 0), HK_STATUS_OK);
    CU_ASSERT_EQUAL(hk_semver_set_match(NULL, &v), 0);
    CU_ASSERT_EQUAL(hk_semver_set_match(&s, NULL), 0);
    CU_ASSERT_EQUAL(hk_semver_set_skips_pre(NULL, &v), 0);
    CU_ASSERT_EQUAL(hk_semver_set_skips_pre(&s, NULL), 0);
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
    hk_semver_set_t s;
    char why[256];
    size_t bad = 0;
    if (hk_semver_set_parse(text, &s, why, sizeof(why)) != HK_STATUS_OK) {
        fprintf(stderr, "\n  '%s' refused: %s", text, why);
        return 1;
    }
    for (size_t k = 0; k < NPREC; k++) {
        int holds = 1, named = !pv[k].pre;
        for (size_t x = 0; x < nop; x++) {
            holds &= op_holds(op[x], k, o[x]);
            named |= names_pre(o[x], k);
        }
        int m = hk_semver_set_match(&s, &pv[k]), sk = hk_semver_set_skips_pre(&s, &pv[k]);
        int mb = hk_semver_set_match(&s, &pb[k]);
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
    hk_semver_set_t s;
    hk_semver_t x;
    return hk_semver_set_parse(r, &s, NULL, 0) == HK_STATUS_OK
           && hk_semver_parse(v, &x, NULL, 0) == HK_STATUS_OK && hk_semver_set_match(&s, &x);
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

void ts_register_semver_set(CU_pSuite s)
{
    static const hk_test_case_t tests[] = {
        {"range lists: grammar, spaces around commas", test_set_parse_valid},
        {"range lists: malformed, the comparator named", test_set_parse_malformed},
        {"range lists: every comparator holds", test_set_match},
        {"precedence table: order, antisymmetry, transitivity", test_precedence_properties},
        {"precedence table: every operator alone and in pairs", test_operator_properties},
    };
    hk_test_add_all(s, tests, sizeof tests / sizeof tests[0]);
}
