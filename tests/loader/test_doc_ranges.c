/* The range examples a user reads select what ships: every "hk-cpu@RANGE"
 * and "hk-cuda@RANGE" in README.md, docs/ *.md and hk-host's --help is run
 * through hk_loader_select against the plugins this build made (and nothing
 * else), and must choose a plugin of that name. An example in an
 * HK_PLUGIN_EXCLUDE value must parse (it removes, so it need select
 * nothing), and one followed by ": bad range" shows a refusal and must be
 * refused. Lines of trace transcripts ("hk PID:TID ...") show test runs with
 * test builds and are left out. */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_semver.h"
#include "test_select.h"

void ts_register_doc_ranges(void); /* called by test_loader_select.c */

/* The whole of a stream, NUL-terminated, or NULL. */
static char *read_all(FILE *f)
{
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n + 1 < cap)
            break;
        char *grown = realloc(buf, cap *= 2);
        if (!grown)
            free(buf);
        buf = grown;
    }
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* Length of the range at r, read as a request reads it; a comma goes on
 * only before an operator, as in HK_PLUGIN_PIN, and a full stop that ends a
 * sentence is not part of it. */
static size_t range_len(const char *r)
{
    size_t n = 0;
    for (;;) {
        if (r[n] && (isalnum((unsigned char)r[n]) || strchr(".+-^~<>=*", r[n]))) {
            n++;
            continue;
        }
        size_t m = n;
        while (r[m] == ' ')
            m++;
        if (r[m] != ',')
            break;
        m++;
        while (r[m] == ' ')
            m++;
        if (!r[m] || !strchr("<>=^~", r[m]))
            break;
        n = m;
    }
    while (n > 0 && r[n - 1] == '.')
        n--;
    return n;
}

static int is_trace_line(const char *line)
{
    const char *c = line;
    if (strncmp(c, "hk ", 3) != 0)
        return 0;
    for (c += 3; isdigit((unsigned char)*c); c++)
        ;
    return c > line + 3 && *c == ':';
}

static int quiet; /* test_doc_reader's expected failures print nothing */

/* Checks one example; returns 1 when it is as documented. */
static int check_one(hk_loader_t *loader, const char *where, const char *name, const char *r,
                     size_t rn, const char *line, const char *at)
{
    char req[256];
    snprintf(req, sizeof(req), "%s@%.*s", name, (int)rn, r);
    const char *eol = strchr(line, '\n');
    char before[512];
    snprintf(before, sizeof(before), "%.*s", (int)(at - line), line);
    hk_plugin_t *p = NULL;
    hk_status_t st;
    int ok;
    if (strstr(before, "HK_PLUGIN_EXCLUDE")) {
        hk_semver_range_t s;
        ok = hk_semver_range_parse_n(r, rn, &s, NULL, 0) == HK_STATUS_OK;
        st = ok ? HK_STATUS_OK : HK_STATUS_INVALID_VALUE;
    } else if (strncmp(r + rn, ": bad range", 11) == 0) {
        st = hk_loader_select(loader, req, &p);
        ok = st == HK_STATUS_INVALID_VALUE;
    } else {
        st = hk_loader_select(loader, req, &p);
        ok = st == HK_STATUS_OK && p && strcmp(hk_plugin_name(p), name) == 0;
    }
    if (!ok && !quiet)
        fprintf(stderr, "\n  %s: \"%s\" (in \"%.*s\"): status %d, %s", where, req,
                (int)(eol ? eol - line : (long)strlen(line)), line, (int)st,
                hk_loader_last_error(loader));
    return ok;
}

/* Checks every example in text; returns how many there were, and adds the
 * wrong ones to *bad. */
static size_t check_text(hk_loader_t *loader, const char *where, const char *text, size_t *bad)
{
    static const char *const names[] = {"hk-cpu", "hk-cuda"};
    size_t found = 0;
    for (const char *c = text; *c; c++) {
        if (c > text && (isalnum((unsigned char)c[-1]) || c[-1] == '-' || c[-1] == '_'))
            continue;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            size_t nl = strlen(names[i]);
            if (strncmp(c, names[i], nl) != 0 || c[nl] != '@')
                continue;
            const char *line = c;
            while (line > text && line[-1] != '\n')
                line--;
            if (is_trace_line(line))
                continue;
            const char *r = c + nl + 1;
            found++;
            *bad += !check_one(loader, where, names[i], r, range_len(r), line, c);
        }
    }
    return found;
}

static size_t check_file(hk_loader_t *loader, const char *path, size_t *bad)
{
    FILE *f = fopen(path, "r");
    char *text = f ? read_all(f) : NULL;
    if (f)
        fclose(f);
    CU_ASSERT_PTR_NOT_NULL(text);
    size_t n = text ? check_text(loader, path, text, bad) : 0;
    free(text);
    return n;
}

static size_t check_dir(hk_loader_t *loader, const char *dir, size_t *bad)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        char path[4096];
        if (len < 4 || strcmp(e->d_name + len - 3, ".md") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        n += check_file(loader, path, bad);
    }
    closedir(d);
    return n;
}

static void test_doc_ranges(void)
{
    size_t bad = 0;
    env_clear();
    hk_loader_t *loader = sel_loader(HK_TEST_SHIPPED_DIR, NULL, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    CU_ASSERT_PTR_NOT_NULL_FATAL(hk_loader_find(loader, "hk-cpu"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(hk_loader_find(loader, "hk-cuda"));

    /* Each source holds examples today: finding none means the reading broke. */
    size_t readme = check_file(loader, HK_TEST_SRC_DIR "/README.md", &bad);
    size_t docs = check_dir(loader, HK_TEST_SRC_DIR "/docs", &bad);
    docs += check_dir(loader, HK_TEST_SRC_DIR "/docs/bench", &bad);
    CU_ASSERT(readme >= 6);
    CU_ASSERT(docs >= 10);
#ifdef HK_TEST_HOST
    FILE *f = popen("'" HK_TEST_HOST "' --help 2>&1", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char *help = read_all(f);
    CU_ASSERT_EQUAL(pclose(f), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(help);
    CU_ASSERT(check_text(loader, "hk-host --help", help, &bad) >= 3);
    free(help);
#endif
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

/* The reader on made-up text, so that a reading that finds nothing or
 * too much cannot pass unseen. */
static void test_doc_reader(void)
{
    CU_ASSERT_EQUAL(range_len("^1` and"), 2);
    CU_ASSERT_EQUAL(range_len(">=1.0, <2'"), 9);
    CU_ASSERT_EQUAL(range_len(">=1.0 , <2,hk-cpu@^1\""), 10);
    CU_ASSERT_EQUAL(range_len("1.0.0."), 5);
    CU_ASSERT_EQUAL(range_len("<1.0.0,/path/x.so"), 6);
    CU_ASSERT_EQUAL(range_len(">=1.0, <2.x: bad range"), 11);
    CU_ASSERT(is_trace_line("hk 1953:1953 loader swap: \"hk-cpu@1.0.1\""));
    CU_ASSERT(!is_trace_line("hk-host run -p hk-cpu@^1"));

    env_clear();
    hk_loader_t *loader = sel_loader(HK_TEST_SHIPPED_DIR, NULL, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loader);
    size_t bad = 0;
    quiet = 1;
    CU_ASSERT_EQUAL(check_text(loader, "sample", "`hk-cpu@^1`, `xhk-cpu@^9`, `hk-cpu@^9`,\n"
                               "HK_PLUGIN_EXCLUDE=\"hk-cpu@^9,hk-cuda@^x\"\n"
                               "`hk-cpu@^x: bad range`, `hk-cpu@^1: bad range`\n"
                               "hk 12:12 loader swap: \"hk-cpu@7.0.0\"", &bad), 6);
    quiet = 0;
    CU_ASSERT_EQUAL(bad, 3); /* ^9 selects nothing, ^x does not parse, ^1 is no refusal */
    CU_ASSERT_EQUAL(hk_loader_destroy(loader), HK_STATUS_OK);
}

void ts_register_doc_ranges(void)
{
    CU_pSuite s = hk_test_suite("doc_ranges", NULL, NULL);
    hk_test_add(s, "the example reader on sample text", test_doc_reader);
    CU_pTest t = hk_test_add(s, "README, docs and hk-host --help: every range example selects "
                                "what ships", test_doc_ranges);
#ifndef HK_TEST_CUDA_PLUGIN
    hk_test_skip(t, "hk-cuda is not built (no nvcc): the examples name it");
#else
    (void)t;
#endif
}
