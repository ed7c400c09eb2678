/* handlekit: the command-line parser of the programs (hk__cli.h). */
#include <limits.h>
#include <stdarg.h>
#include <string.h>

#include "hk__cli.h"

void hk__cli_init(hk__cli_t *c, const hk__cli_opt_t *opts, int argc, char **argv)
{
    memset(c, 0, sizeof *c);
    c->opts = opts;
    c->argc = argc;
    c->argv = argv;
    c->index = 1;
}

static int hk__cli_fail(hk__cli_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int hk__cli_fail(hk__cli_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
    return HK__CLI_ERROR;
}

const hk__cli_opt_t *hk__cli_find(const hk__cli_opt_t *opts, int id)
{
    for (; opts->id; opts++)
        if (opts->id == id)
            return opts;
    return NULL;
}

/* The value of option o: attached (inline_value, may be NULL) or the next
 * argument. Returns o's id or HK__CLI_ERROR. */
static int hk__cli_take(hk__cli_t *c, const hk__cli_opt_t *o, const char *inline_value)
{
    if (!o->value) {
        if (inline_value)
            return hk__cli_fail(c, "%s takes no value (\"%.100s\" given)", c->arg, inline_value);
        return o->id;
    }
    if (inline_value) {
        c->value = inline_value;
        return o->id;
    }
    if (c->index >= c->argc)
        return hk__cli_fail(c, "%s needs a value (%s)", c->arg, o->value);
    c->value = c->argv[c->index++];
    return o->id;
}

/* "--name" or "--name=value" in a. */
static int hk__cli_long(hk__cli_t *c, const char *a)
{
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    snprintf(c->written, sizeof c->written, "--%.*s", (int)(len > 60 ? 60 : len), name);
    c->arg = c->written;
    if (len == 4 && strncmp(name, "help", 4) == 0)
        return HK__CLI_HELP;
    for (const hk__cli_opt_t *o = c->opts; o->id; o++)
        if (o->long_name && strlen(o->long_name) == len && strncmp(o->long_name, name, len) == 0)
            return hk__cli_take(c, o, eq ? eq + 1 : NULL);
    if (c->pass_unknown) {
        c->arg = a;
        return HK__CLI_UNKNOWN;
    }
    return hk__cli_fail(c, "unknown option %s", c->written);
}

/* The next letter of the group of short options in c->group. */
static int hk__cli_short(hk__cli_t *c)
{
    char letter = *c->group++;
    snprintf(c->written, sizeof c->written, "-%c", letter);
    c->arg = c->written;
    if (letter == 'h')
        return HK__CLI_HELP;
    for (const hk__cli_opt_t *o = c->opts; o->id; o++) {
        if (o->short_name && o->short_name == letter) {
            /* A value takes the rest of the group ("-n5") or the next argument. */
            const char *rest = o->value && *c->group ? c->group : NULL;
            if (rest)
                c->group = "";
            return hk__cli_take(c, o, rest);
        }
    }
    const char *whole = c->argv[c->index - 1];
    c->group = "";
    if (c->pass_unknown) {
        c->arg = whole;
        return HK__CLI_UNKNOWN;
    }
    if ((unsigned char)letter < 0x21 || (unsigned char)letter > 0x7e)
        return hk__cli_fail(c, "unknown option in \"%.100s\"", whole);
    return hk__cli_fail(c, "unknown option -%c", letter);
}

int hk__cli_next(hk__cli_t *c)
{
    c->value = NULL;
    if (c->group && *c->group)
        return hk__cli_short(c);
    c->group = NULL;
    if (c->index >= c->argc)
        return HK__CLI_END;
    const char *a = c->argv[c->index++];
    c->arg = a;
    if (c->after_dashes || a[0] != '-' || a[1] == '\0')
        return HK__CLI_OPERAND; /* "-" alone is an operand, by custom */
    if (strcmp(a, "--") == 0) {
        c->after_dashes = 1;
        return hk__cli_next(c);
    }
    if (a[1] == '-')
        return hk__cli_long(c, a);
    c->group = a + 1;
    return hk__cli_short(c);
}

int hk__cli_decimal(const char *text, long long lo, long long hi, long long *out)
{
    unsigned long long v = 0;
    if (!text || !*text)
        return -1;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (ULLONG_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v > (unsigned long long)LLONG_MAX || (long long)v < lo || (long long)v > hi)
        return -1;
    *out = (long long)v;
    return 0;
}

int hk__cli_number(hk__cli_t *c, const char *text, long long lo, long long hi, long long *out)
{
    if (hk__cli_decimal(text, lo, hi, out) == 0)
        return 0;
    hk__cli_fail(c, "%s %.100s: not a decimal number from %lld to %lld", c->arg, text, lo, hi);
    return -1;
}

const char *hk__cli_name(const hk__cli_opt_t *o, char *buf, size_t len)
{
    if (o->short_name && o->long_name)
        snprintf(buf, len, "-%c/--%s", o->short_name, o->long_name);
    else if (o->short_name)
        snprintf(buf, len, "-%c", o->short_name);
    else
        snprintf(buf, len, "--%s", o->long_name ? o->long_name : "?");
    return buf;
}

/* One entry: "  -n, --size N" padded to the help column, then the help,
 * each of its lines indented to that column. */
static void hk__cli_print_one(FILE *f, char s, const char *l, const char *value,
                              const char *help)
{
    enum { COLUMN = 26 };
    char head[128], name[80] = "";
    if (s && l)
        snprintf(name, sizeof name, "-%c, --%s", s, l);
    else if (s)
        snprintf(name, sizeof name, "-%c", s);
    else
        snprintf(name, sizeof name, "    --%s", l);
    int w = snprintf(head, sizeof head, "  %s%s%s", name, value ? " " : "", value ? value : "");
    fputs(head, f);
    if (w >= COLUMN - 1)
        fprintf(f, "\n%*s", COLUMN, "");
    else
        fprintf(f, "%*s", COLUMN - w, "");
    for (const char *p = help; *p; p++) {
        fputc(*p, f);
        if (*p == '\n')
            fprintf(f, "%*s", COLUMN, "");
    }
    fputc('\n', f);
}

void hk__cli_print_options(FILE *f, const hk__cli_opt_t *opts, const char *ids)
{
    for (const hk__cli_opt_t *o = opts; o->id; o++) {
        if (!o->help || (ids && (o->id >= 256 || !strchr(ids, o->id))))
            continue;
        hk__cli_print_one(f, o->short_name, o->long_name, o->value, o->help);
    }
    hk__cli_print_one(f, 'h', "help", NULL, "this text");
}
