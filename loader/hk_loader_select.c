/* handlekit loader: choosing one loaded plugin for a request ("NAME",
 * "NAME@RANGE" or a path), with HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE.
 * The rules are in hk_loader.h ("Version selection"); versions and ranges in
 * hk_semver.c.
 *
 * Selection never calls into a plugin: it reads the names and versions the
 * loader copied at negotiation, so choosing is as safe as listing. */
#include "hk__loader.h"
#include "hk__trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "hk_semver.h"
#include "hk_status_text.h"

#define HK__PIN_ENV "HK_PLUGIN_PIN"
#define HK__EXCLUDE_ENV "HK_PLUGIN_EXCLUDE"

static const char hk__oom[] = "out of memory while selecting a plugin";

/* Makes line the loader's last error (a kept copy). Caller holds no lock. */
static void hk__set_error(hk_loader_t *loader, const char *line)
{
    hk__loader_keep_error(loader, line, hk__oom);
}

/* ---- a growing one-line text ---- */

typedef struct hk__text {
    char *buf;
    size_t len;
    size_t cap;
    int oom;
} hk__text_t;

static void hk__text_add(hk__text_t *t, const char *fmt, ...)
{
    va_list ap;
    if (t->oom)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (n >= 0 && t->len + (size_t)n + 1 > cap)
            cap *= 2;
        char *grown = n < 0 ? NULL : realloc(t->buf, cap);
        if (!grown) {
            t->oom = 1;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

/* Copies s[0..len) into dst with every control byte as '?', cut to fit:
 * text from the environment or a plugin must not break a one-line reason.
 * Bytes from 0x80 up stay, so a UTF-8 path reads as it is. */
static void hk__clean(char *dst, size_t n, const char *s, size_t len)
{
    size_t i = 0;
    for (; i < len && i + 1 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[i] = '\0';
}

static int hk__is_path(const char *s, size_t len)
{
    return memchr(s, '/', len) != NULL || (len >= 3 && memcmp(s + len - 3, ".so", 3) == 0);
}

/* The first space or control byte of s[0..len), or NULL. */
static const char *hk__bad_byte(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] == 0x7f)
            return s + i;
    return NULL;
}

/* ---- HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE ---- */

typedef struct hk__rule {
    const char *var;   /* the variable it came from */
    const char *entry; /* the entry text, NUL-terminated in the copy */
    const char *name;  /* NULL for a path entry */
    size_t name_len;
    int has_range;     /* 0: a whole-name exclusion */
    hk_semver_range_t range;
    const char *range_text;
    int have_id;       /* a path entry's file could be stat'ed */
    dev_t dev;
    ino_t ino;
} hk__rule_t;

typedef struct hk__rules {
    char *copies[2];
    hk__rule_t *list;
    size_t n;
} hk__rules_t;

static int hk__env_reported(hk_loader_t *loader, const char *var, const char *reason)
{
    int seen = 0;
    pthread_mutex_lock(&loader->lock);
    for (size_t i = 0; i < loader->nreports && !seen; i++) {
        const hk_load_report_t *r = &loader->reports[i]->pub;
        seen = strcmp(r->path, var) == 0 && strcmp(r->reason, reason) == 0;
    }
    pthread_mutex_unlock(&loader->lock);
    return seen;
}

/* Adds a report for a variable once per loader: a repeated select must not
 * repeat the complaint. The same path and reason means the same problem.
 * The first look needs no gate, so a select that only finds old
 * complaints never waits for a scan; adding enters it (hk__loader_report_add's
 * rule), and looks again under it so two threads cannot both add. */
static void hk__env_notice(hk_loader_t *loader, const char *var, hk_status_t status,
                           const char *reason)
{
    if (hk__env_reported(loader, var, reason))
        return;
    hk__gate_enter(loader);
    if (!hk__env_reported(loader, var, reason))
        hk__loader_report_add(loader, var, HK_STAGE_SCAN, status, reason, NULL, NULL);
    hk__gate_leave(loader);
}

static void hk__entry_refused(hk_loader_t *loader, const char *var, const char *entry,
                              const char *why)
{
    char clean[128], reason[512];
    hk__clean(clean, sizeof(clean), entry, strlen(entry));
    snprintf(reason, sizeof(reason), "entry '%s' ignored: %s", clean, why);
    hk__env_notice(loader, var, HK_STATUS_INVALID_VALUE, reason);
}

/* Parses one entry into *r. Returns 0, or -1 with why filled. */
static int hk__rule_parse(const char *var, char *entry, hk__rule_t *r, char *why, size_t wn)
{
    size_t len = strlen(entry);
    int is_pin = strcmp(var, HK__PIN_ENV) == 0;
    char sv[256];

    memset(r, 0, sizeof(*r));
    r->var = var;
    r->entry = entry;
    char *at = strchr(entry, '@');
    /* The request rule: a name never holds '/' nor ends in ".so", so such
     * an entry is a file even when its path contains an '@'. */
    int path = !is_pin && hk__is_path(entry, len);
    /* A range may hold spaces around its commas: the range parser judges
     * what follows the '@'. */
    if (hk__bad_byte(entry, at && !path ? (size_t)(at - entry) : len)) {
        snprintf(why, wn, "contains a space or control character");
        return -1;
    }
    if (path) {
        struct stat st;
        if (stat(entry, &st) == 0) {
            r->have_id = 1;
            r->dev = st.st_dev;
            r->ino = st.st_ino;
        }
        return 0;
    }
    if (!at && is_pin) {
        snprintf(why, wn, "a pin is NAME@RANGE");
        return -1;
    }
    r->name = entry;
    r->name_len = at ? (size_t)(at - entry) : len;
    if (r->name_len == 0) {
        snprintf(why, wn, "no plugin name before '@'");
        return -1;
    }
    if (!at)
        return 0;
    r->has_range = 1;
    r->range_text = at + 1;
    if (hk_semver_range_parse(at + 1, &r->range, sv, sizeof(sv)) != HK_STATUS_OK) {
        snprintf(why, wn, "bad range: %s", sv);
        return -1;
    }
    return 0;
}

/* The comma that ends the entry at e, or NULL when it runs to the end. A
 * comma followed (after spaces) by an operator continues the range of a
 * NAME@RANGE entry, as ranges list comparators with commas too; a path
 * entry never continues. */
static char *hk__entry_end(char *e)
{
    int ranged = 0, path = 0;
    for (char *c = e; *c; c++) {
        ranged |= *c == '@';
        path |= *c == '/';
        if (*c != ',')
            continue;
        const char *n = c + 1;
        while (*n == ' ')
            n++;
        int so = c - e >= 3 && memcmp(c - 3, ".so", 3) == 0;
        if (!ranged || path || so || !*n || !strchr("<>=^~", *n))
            return c;
    }
    return NULL;
}

/* Reads one variable into rules, reporting malformed entries. */
static int hk__rules_read(hk_loader_t *loader, const char *var, int slot, hk__rules_t *rules)
{
    const char *value = secure_getenv(var);
    if (!value) {
        if (getauxval(AT_SECURE) && getenv(var)) {
            char reason[160];
            snprintf(reason, sizeof(reason), "%s ignored: the process runs with elevated "
                     "privileges (AT_SECURE)", var);
            hk__env_notice(loader, var, HK_STATUS_INSECURE, reason);
        }
        return 0;
    }
    char *copy = rules->copies[slot] = strdup(value);
    if (!copy)
        return -1;
    size_t most = 1;
    for (const char *c = copy; *c; c++)
        most += *c == ',';
    hk__rule_t *grown = realloc(rules->list, (rules->n + most) * sizeof(*grown));
    if (!grown)
        return -1;
    rules->list = grown;
    char why[320];
    for (char *e = copy, *next; e; e = next) {
        next = hk__entry_end(e);
        if (next)
            *next++ = '\0';
        if (!*e)
            continue; /* empty entries are skipped */
        if (hk__rule_parse(var, e, &rules->list[rules->n], why, sizeof(why)) == 0)
            rules->n++;
        else
            hk__entry_refused(loader, var, e, why);
    }
    return 0;
}

static void hk__rules_free(hk__rules_t *rules)
{
    free(rules->copies[0]);
    free(rules->copies[1]);
    free(rules->list);
}

void hk__select_env_check(hk_loader_t *loader)
{
    hk__rules_t rules = {{NULL, NULL}, NULL, 0};
    if (hk__rules_read(loader, HK__PIN_ENV, 0, &rules) == 0)
        hk__rules_read(loader, HK__EXCLUDE_ENV, 1, &rules);
    hk__rules_free(&rules); /* out of memory: the next select reports it */
}

static int hk__rule_names(const hk__rule_t *r, const char *name)
{
    return r->name && strlen(name) == r->name_len && memcmp(r->name, name, r->name_len) == 0;
}

/* The exclude entry that removes candidate p (version v, NULL when its
 * version is not semantic), or NULL. */
static const hk__rule_t *hk__excluded_by(const hk__rules_t *rules, const hk_plugin_t *p,
                                         const hk_semver_t *v)
{
    for (size_t i = 0; i < rules->n; i++) {
        const hk__rule_t *r = &rules->list[i];
        if (strcmp(r->var, HK__EXCLUDE_ENV) != 0)
            continue;
        if (!r->name) {
            if (strcmp(r->entry, p->path) == 0
                || (r->have_id && r->dev == p->dev && r->ino == p->ino))
                return r;
        } else if (hk__rule_names(r, p->name)) {
            if (!r->has_range || (v && hk_semver_range_match(&r->range, v)))
                return r;
        }
    }
    return NULL;
}

typedef struct hk__request {
    const char *text;
    char *name;             /* owned copy of the name */
    const char *range_text; /* after '@', "*" when none */
    hk_semver_range_t range;
} hk__request_t;

/* Checks v against every range that applies to a request for p's name:
 * the request's and each HK_PLUGIN_PIN entry of that name. Returns
 * HK_SELECT_CHOSEN when v passes them all, else the verdict (and, for a pin,
 * the pin in *rule). A pre-release must in addition be named by one of them:
 * a pin to "2.0.0-rc.1" lets a plain request select 2.0.0-rc.1. */
static hk_select_verdict_t hk__in_ranges(const hk__request_t *req, const hk__rules_t *rules,
                                         const hk_plugin_t *p, const hk_semver_t *v,
                                         const hk__rule_t **rule)
{
    int named = v->pre_len == 0;
    if (hk_semver_range_match(&req->range, v))
        named = 1;
    else if (!hk_semver_range_skips_pre(&req->range, v))
        return HK_SELECT_OUT_OF_RANGE;
    for (size_t i = 0; i < rules->n; i++) {
        const hk__rule_t *r = &rules->list[i];
        if (strcmp(r->var, HK__PIN_ENV) != 0 || !hk__rule_names(r, p->name))
            continue;
        if (hk_semver_range_match(&r->range, v))
            named = 1;
        else if (!hk_semver_range_skips_pre(&r->range, v)) {
            *rule = r;
            return HK_SELECT_PINNED;
        }
    }
    return named ? HK_SELECT_CHOSEN : HK_SELECT_OUT_OF_RANGE;
}

/* ---- one request ---- */

typedef struct hk__sel_cand {
    hk_plugin_t *p;
    hk_semver_t v;
    int v_ok;
    hk_select_verdict_t verdict;
    const hk__rule_t *rule; /* the exclude or pin entry that decided */
    const hk_plugin_t *later; /* SUPERSEDED: the build that supersedes it */
    char bad[200];          /* why the version is not semantic */
} hk__sel_cand_t;

/* Splits and checks a NAME[@RANGE] request. Fails with a one-line error. */
static hk_status_t hk__request_parse(const char *text, hk__request_t *req, hk__text_t *err)
{
    char clean[160], sv[256];
    size_t len = strlen(text);
    const char *at = strchr(text, '@');
    size_t name_len = at ? (size_t)(at - text) : len;

    memset(req, 0, sizeof(*req));
    req->text = text;
    hk__clean(clean, sizeof(clean), text, len);
    if (len == 0) {
        hk__text_add(err, "hk_loader_select: the request is empty");
        return HK_STATUS_INVALID_VALUE;
    }
    if (name_len == 0) {
        hk__text_add(err, "%s: no plugin name before '@'", clean);
        return HK_STATUS_INVALID_VALUE;
    }
    if (hk__bad_byte(text, name_len)) {
        hk__text_add(err, "%s: the plugin name contains a space or control character", clean);
        return HK_STATUS_INVALID_VALUE;
    }
    req->name = strndup(text, name_len);
    if (!req->name) {
        hk__text_add(err, "%s", hk__oom);
        return HK_STATUS_OUT_OF_MEMORY;
    }
    req->range_text = at && at[1] ? at + 1 : "*";
    if (hk_semver_range_parse(at ? at + 1 : "", &req->range, sv, sizeof(sv)) != HK_STATUS_OK) {
        hk__text_add(err, "%s: bad range: %s", clean, sv);
        return HK_STATUS_INVALID_VALUE;
    }
    return HK_STATUS_OK;
}

/* Copies the loaded plugins named like the request, in load order. */
static hk_status_t hk__gather(hk_loader_t *loader, const hk__request_t *req, hk__sel_cand_t **out,
                              size_t *n)
{
    hk_status_t st = HK_STATUS_OK;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&loader->lock);
    size_t count = 0;
    for (size_t i = 0; i < loader->nplugins; i++)
        count += strcmp(loader->plugins[i]->name, req->name) == 0;
    if (count) {
        *out = calloc(count, sizeof(**out));
        if (!*out) {
            st = HK_STATUS_OUT_OF_MEMORY;
            goto out;
        }
        for (size_t i = 0; i < loader->nplugins; i++)
            if (strcmp(loader->plugins[i]->name, req->name) == 0)
                (*out)[(*n)++].p = loader->plugins[i];
    }
out:
    pthread_mutex_unlock(&loader->lock);
    return st;
}

/* The build loaded after c[i] from the same path that supersedes it: the
 * last one that is selectable too (verdict CHOSEN so far); NULL when none.
 * c is in load order. */
static const hk_plugin_t *hk__superseded_by(const hk__sel_cand_t *c, size_t n, size_t i)
{
    const hk_plugin_t *later = NULL;
    for (size_t j = i + 1; j < n; j++)
        if (c[j].verdict == HK_SELECT_CHOSEN && strcmp(c[j].p->path, c[i].p->path) == 0)
            later = c[j].p;
    return later;
}

/* The verdict of c (CHOSEN: selectable) before superseding and ranking. */
static hk_select_verdict_t hk__verdict(hk__sel_cand_t *c, const hk__request_t *req,
                                       const hk__rules_t *rules)
{
    c->v_ok = hk_semver_parse(c->p->version, &c->v, c->bad, sizeof(c->bad)) == HK_STATUS_OK;
    if (atomic_load(&c->p->failed))
        return HK_SELECT_FAILED;
    if ((c->rule = hk__excluded_by(rules, c->p, c->v_ok ? &c->v : NULL)) != NULL)
        return HK_SELECT_EXCLUDED;
    if (!c->v_ok)
        return HK_SELECT_BAD_VERSION;
    return hk__in_ranges(req, rules, c->p, &c->v, &c->rule);
}

/* Gives every candidate its verdict. Returns the chosen index or -1. */
static long hk__decide(hk__sel_cand_t *c, size_t n, const hk__request_t *req,
                       const hk__rules_t *rules)
{
    long best = -1;
    for (size_t i = 0; i < n; i++)
        c[i].verdict = hk__verdict(&c[i], req, rules);
    /* A file rewritten with a build that is selectable too: the path holds
     * that one now (later candidates first, so that a chain resolves to
     * the last build). */
    for (size_t i = n; i-- > 0;)
        if (c[i].verdict == HK_SELECT_CHOSEN && (c[i].later = hk__superseded_by(c, n, i)))
            c[i].verdict = HK_SELECT_SUPERSEDED;
    for (size_t i = 0; i < n; i++) {
        if (c[i].verdict != HK_SELECT_CHOSEN)
            continue;
        /* Selectable: LOWER until the best is known. Strictly higher only,
         * so an equal version loaded later never displaces the first. */
        c[i].verdict = HK_SELECT_LOWER;
        if (best < 0 || hk_semver_compare(&c[i].v, &c[best].v) > 0)
            best = (long)i;
    }
    for (size_t i = 0; best >= 0 && i < n; i++) {
        if (c[i].verdict != HK_SELECT_LOWER)
            continue;
        if ((long)i == best)
            c[i].verdict = HK_SELECT_CHOSEN;
        else if (hk_semver_compare(&c[i].v, &c[best].v) == 0)
            c[i].verdict = HK_SELECT_DUPLICATE;
    }
    return best;
}

/* What the chosen plugin had to satisfy: "^1 and HK_PLUGIN_PIN x@~1.2". */
static void hk__constraints(hk__text_t *t, const hk__request_t *req, const hk__rules_t *rules)
{
    int any = req->range.count == 0;
    hk__text_add(t, "%s", any ? "any release" : req->range_text);
    for (size_t i = 0; i < rules->n; i++) {
        const hk__rule_t *r = &rules->list[i];
        if (strcmp(r->var, HK__PIN_ENV) == 0 && hk__rule_names(r, req->name))
            hk__text_add(t, " and " HK__PIN_ENV " %s", r->entry);
    }
}

/* One candidate's reason into dst (n bytes). */
static void hk__reason(char *dst, size_t n, const hk__sel_cand_t *c, const hk__sel_cand_t *chosen,
                       size_t dups, const hk__request_t *req, const hk__rules_t *rules)
{
    hk__text_t t = {0};
    switch (c->verdict) {
    case HK_SELECT_CHOSEN:
        hk__text_add(&t, "chosen: highest version in ");
        hk__constraints(&t, req, rules);
        if (dups)
            hk__text_add(&t, " (loaded first of %zu files with %s)", dups + 1, c->p->version);
        break;
    case HK_SELECT_LOWER:
        hk__text_add(&t, "lower than %s, the chosen version", chosen->p->version);
        break;
    case HK_SELECT_DUPLICATE:
        hk__text_add(&t, "same version as the chosen %s, loaded earlier from %s",
                     chosen->p->version, chosen->p->path);
        break;
    case HK_SELECT_OUT_OF_RANGE:
        if (hk_semver_range_skips_pre(&req->range, &c->v))
            hk__text_add(&t, "pre-release outside %s (name a pre-release of %llu.%llu.%llu "
                         "in the request or " HK__PIN_ENV " to select it)", req->range_text,
                         (unsigned long long)c->v.major, (unsigned long long)c->v.minor,
                         (unsigned long long)c->v.patch);
        else
            hk__text_add(&t, "outside %s", req->range_text);
        break;
    case HK_SELECT_PINNED:
        hk__text_add(&t, "pinned to %s by " HK__PIN_ENV, c->rule->range_text);
        break;
    case HK_SELECT_EXCLUDED:
        hk__text_add(&t, "excluded by " HK__EXCLUDE_ENV " entry %s", c->rule->entry);
        break;
    case HK_SELECT_BAD_VERSION:
        hk__text_add(&t, "version is not a semantic version: %s", c->bad);
        break;
    case HK_SELECT_SUPERSEDED:
        hk__text_add(&t, "superseded: its file was rewritten with %s, loaded later",
                     c->later->version);
        break;
    case HK_SELECT_FAILED:
        hk__text_add(&t, "failed verification: %s", hk__failed_why(c->p));
        break;
    }
    hk__clean(dst, n, t.oom ? "out of memory" : t.buf ? t.buf : "",
              t.oom ? 13 : t.buf ? t.len : 0);
    free(t.buf);
}

/* ---- what was refused that could have been the request ---- */

/* Appends s with every control byte as '?': a refused file's name or reason
 * must not break the one line it gets. */
static void hk__text_add_clean(hk__text_t *t, const char *s)
{
    size_t from = t->len;
    hk__text_add(t, "%s", s);
    for (size_t i = from; !t->oom && i < t->len; i++)
        if ((unsigned char)t->buf[i] < 0x20 || (unsigned char)t->buf[i] == 0x7f)
            t->buf[i] = '?';
}

/* 1 when base (a file name) is a file of plugin name: "NAME.so", or
 * "NAME-<digit>...so" as versions installed side by side are named. */
static int hk__file_named(const char *base, const char *name)
{
    size_t n = strlen(name), len = strlen(base);
    if (len < n + 3 || strncmp(base, name, n) != 0 || strcmp(base + len - 3, ".so") != 0)
        return 0;
    return len == n + 3 || (base[n] == '-' && base[n + 1] >= '0' && base[n + 1] <= '9');
}

/* Which directory of the search path path names: "HK_PLUGIN_PATH", "the
 * default directory", or NULL for none. env: HK_PLUGIN_PATH as the scan read
 * it, or NULL. */
static const char *hk__search_dir(const hk_loader_t *loader, const char *path, const char *env)
{
    size_t plen = strlen(path);
    for (const char *p = env; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (len == plen && memcmp(p, path, len) == 0)
            return "HK_PLUGIN_PATH";
        p = colon ? colon + 1 : NULL;
    }
    return loader->default_dir && strcmp(path, loader->default_dir) == 0
           ? "the default directory" : NULL;
}

/* Appends "; refused:" and one line per refused report that could have
 * been a plugin named name: a file of that name, a directory of the search
 * path (which hid whatever it holds), HK_PLUGIN_PATH ignored. Nothing when
 * there is none. */
static void hk__refused_lines(hk_loader_t *loader, const char *name, hk__text_t *err)
{
    const char *env = loader->ignore_env ? NULL : secure_getenv("HK_PLUGIN_PATH");
    int any = 0;
    pthread_mutex_lock(&loader->lock);
    for (size_t i = 0; i < loader->nreports; i++) {
        const hk_load_report_t *r = &loader->reports[i]->pub;
        const char *base = strrchr(r->path, '/');
        const char *dir = hk__search_dir(loader, r->path, env);
        if (r->plugin || (!dir && !hk__file_named(base ? base + 1 : r->path, name)
                          && strcmp(r->path, "HK_PLUGIN_PATH") != 0))
            continue;
        hk__text_add(err, "%s\n  ", any++ ? "" : "; refused:");
        hk__text_add_clean(err, r->path);
        if (dir)
            hk__text_add(err, " (%s)", dir);
        hk__text_add(err, ": %s: %s: ", hk_load_stage_name(r->stage), hk_status_name(r->status));
        hk__text_add_clean(err, r->reason);
    }
    pthread_mutex_unlock(&loader->lock);
}

/* The NOT_FOUND line when nothing of the name is loaded: names what is. */
static void hk__none_loaded(hk_loader_t *loader, const hk__request_t *req, hk__text_t *err)
{
    char clean[128];
    /* A bare name is the request itself: say it once. */
    if (strcmp(req->text, req->name) == 0)
        hk__text_add(err, "no plugin named %s is loaded", req->name);
    else
        hk__text_add(err, "%s: no plugin named %s is loaded", req->text, req->name);
    pthread_mutex_lock(&loader->lock);
    size_t shown = 0;
    for (size_t i = 0; i < loader->nplugins; i++) {
        const char *name = loader->plugins[i]->name;
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++)
            dup = strcmp(loader->plugins[j]->name, name) == 0;
        hk__clean(clean, sizeof(clean), name, strlen(name));
        if (!dup)
            hk__text_add(err, "%s%s", shown++ ? ", " : " (loaded: ", clean);
    }
    pthread_mutex_unlock(&loader->lock);
    hk__text_add(err, "%s", shown ? ")" : " (no plugin is loaded)");
}

/* The NOT_FOUND line naming every candidate and why it was passed over. */
static void hk__none_selectable(const hk__sel_cand_t *c, size_t n, const hk__request_t *req,
                                const hk__rules_t *rules, hk__text_t *err)
{
    char why[HK_SELECT_REASON_MAX], ver[64];
    int all_range = 1;
    hk__text_add(err, "%s: found ", req->text);
    for (size_t i = 0; i < n; i++) {
        hk__reason(why, sizeof(why), &c[i], NULL, 0, req, rules);
        hk__clean(ver, sizeof(ver), c[i].p->version, strlen(c[i].p->version));
        hk__text_add(err, "%s%s (%s: %s)", i ? ", " : "", ver, c[i].p->path, why);
        all_range &= c[i].verdict == HK_SELECT_OUT_OF_RANGE || c[i].verdict == HK_SELECT_PINNED;
    }
    hk__text_add(err, all_range ? "; none in range" : "; none selectable");
}

/* The trace of one resolution: the winner and why, then every other
 * candidate and why it was passed over (the reasons hk_loader_select_explain
 * gives), or the failure. */
__attribute__((cold, noinline)) static void hk__trace_run(const char *area, const char *request,
                                                          hk_status_t st,
                                                          const hk__sel_cand_t *c, size_t n,
                                                          long best, size_t dups,
                                                          const hk__request_t *req,
                                                          const hk__rules_t *rules,
                                                          const char *err)
{
    char why[HK_SELECT_REASON_MAX], clean[200];
    hk__clean(clean, sizeof(clean), request, strlen(request));
    if (best < 0) { /* the failure's summary, then each refused candidate: a trace line each */
        const char *nl = err ? strchr(err, '\n') : NULL;
        HK__TRACE(HK__TRACE_DECISIONS, area, "\"%s\": %s: %.*s", clean, hk_status_name(st),
                  nl ? (int)(nl - err) : (int)strlen(err ? err : ""), err ? err : "");
        for (const char *line = nl; line; line = nl) {
            const char *text = line + 1 + strspn(line + 1, " ");
            nl = strchr(text, '\n');
            HK__TRACE(HK__TRACE_DECISIONS, area, "\"%s\": refused %.*s", clean,
                      nl ? (int)(nl - text) : (int)strlen(text), text);
        }
        return;
    }
    hk__reason(why, sizeof(why), &c[best], &c[best], dups, req, rules);
    HK__TRACE(HK__TRACE_DECISIONS, area, "\"%s\" resolves to %s %s (%s): %s", clean,
              c[best].p->name, c[best].p->version, c[best].p->path, why);
    for (size_t i = 0; i < n; i++) {
        if ((long)i == best)
            continue;
        hk__reason(why, sizeof(why), &c[i], &c[best], dups, req, rules);
        HK__TRACE(HK__TRACE_DECISIONS, area, "\"%s\": not %s (%s): %s: %s", clean,
                  c[i].p->version, c[i].p->path, hk_select_verdict_name(c[i].verdict), why);
    }
}

/* The common core of select and explain. entries may be NULL. */
static hk_status_t hk__run(hk_loader_t *loader, const char *request, hk_select_entry_t *entries,
                           size_t capacity, size_t *count, hk_plugin_t **out, const char *area)
{
    hk__request_t req;
    hk__rules_t rules = {{NULL, NULL}, NULL, 0};
    hk__sel_cand_t *c = NULL;
    hk__text_t err = {0};
    size_t n = 0, dups = 0;
    long best = -1;

    hk_status_t st = hk__request_parse(request, &req, &err);
    if (st != HK_STATUS_OK)
        goto out;
    if (hk__rules_read(loader, HK__PIN_ENV, 0, &rules) != 0
        || hk__rules_read(loader, HK__EXCLUDE_ENV, 1, &rules) != 0
        || hk__gather(loader, &req, &c, &n) != HK_STATUS_OK) {
        st = HK_STATUS_OUT_OF_MEMORY;
        hk__text_add(&err, "%s", hk__oom);
        goto out;
    }
    *count = n;
    if (n == 0) {
        st = HK_STATUS_NOT_FOUND;
        hk__none_loaded(loader, &req, &err);
        hk__refused_lines(loader, req.name, &err);
        goto out;
    }
    best = hk__decide(c, n, &req, &rules);
    for (size_t i = 0; i < n; i++)
        dups += c[i].verdict == HK_SELECT_DUPLICATE;
    for (size_t i = 0; i < n && i < capacity; i++) {
        entries[i].plugin = c[i].p;
        entries[i].verdict = c[i].verdict;
        hk__reason(entries[i].reason, sizeof(entries[i].reason), &c[i],
                   best >= 0 ? &c[best] : NULL, dups, &req, &rules);
    }
    if (best < 0) {
        st = HK_STATUS_NOT_FOUND;
        hk__none_selectable(c, n, &req, &rules, &err);
        hk__refused_lines(loader, req.name, &err);
        goto out;
    }
    *out = c[best].p;

out:
    if (st != HK_STATUS_OK)
        hk__set_error(loader, err.oom || !err.buf ? hk__oom : err.buf);
    if (hk__tracing(HK__TRACE_DECISIONS))
        hk__trace_run(area, request, st, c, n, st == HK_STATUS_OK ? best : -1, dups, &req,
                      &rules, err.oom || !err.buf ? hk__oom : err.buf);
    free(err.buf);
    free(c);
    free(req.name);
    hk__rules_free(&rules);
    return st;
}

hk_status_t hk_loader_select(hk_loader_t *loader, const char *request, hk_plugin_t **out)
{
    size_t count = 0;
    if (out)
        *out = NULL;
    if (!loader)
        return HK_STATUS_NULL_POINTER;
    if (!request || !out) {
        hk__set_error(loader, request ? "hk_loader_select: out is NULL"
                                      : "hk_loader_select: request is NULL");
        return HK_STATUS_NULL_POINTER;
    }
    if (hk__is_path(request, strlen(request))) {
        HK__TRACE(HK__TRACE_DECISIONS, "select", "\"%s\" is a path: that file is opened, "
                  "HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE do not apply", request);
        return hk_loader_open(loader, request, out);
    }
    return hk__run(loader, request, NULL, 0, &count, out, "select");
}

hk_status_t hk_loader_select_explain(hk_loader_t *loader, const char *request,
                                     hk_select_entry_t *entries, size_t capacity,
                                     size_t *count)
{
    hk_plugin_t *chosen = NULL;
    if (count)
        *count = 0;
    if (!loader)
        return HK_STATUS_NULL_POINTER;
    if (!request || !count || (!entries && capacity > 0)) {
        hk__set_error(loader, !request ? "hk_loader_select_explain: request is NULL"
                              : !count ? "hk_loader_select_explain: count is NULL"
                                       : "hk_loader_select_explain: entries is NULL");
        return HK_STATUS_NULL_POINTER;
    }
    if (hk__is_path(request, strlen(request))) {
        hk__text_t t = {0};
        char clean[200];
        hk__clean(clean, sizeof(clean), request, strlen(request));
        hk__text_add(&t, "%s: a path names one file and selects nothing to explain", clean);
        hk__set_error(loader, t.buf ? t.buf : hk__oom);
        free(t.buf);
        return HK_STATUS_INVALID_VALUE;
    }
    return hk__run(loader, request, entries, capacity, count, &chosen, "explain");
}

const char *hk_select_verdict_name(hk_select_verdict_t verdict)
{
    switch (verdict) {
    case HK_SELECT_CHOSEN: return "chosen";
    case HK_SELECT_LOWER: return "lower";
    case HK_SELECT_DUPLICATE: return "duplicate";
    case HK_SELECT_OUT_OF_RANGE: return "out-of-range";
    case HK_SELECT_PINNED: return "pinned";
    case HK_SELECT_EXCLUDED: return "excluded";
    case HK_SELECT_BAD_VERSION: return "bad-version";
    case HK_SELECT_SUPERSEDED: return "superseded";
    case HK_SELECT_FAILED: return "failed";
    }
    return "unknown";
}
