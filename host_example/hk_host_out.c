/* hk-host: what reaches the user: escaped text, the JSON document of --json,
 * error lines, and the progress line of long runs on a terminal. */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "hk_host.h"

const char *hk_host_esc(const char *s)
{
    static char ring[8][8192];
    static unsigned next;
    char *out = ring[next++ % 8];
    const size_t cap = sizeof ring[0];
    size_t k = 0;
    if (!s)
        s = "(null)";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char piece[8];
        if (c == '\\')
            snprintf(piece, sizeof piece, "\\\\");
        else if (c < 0x20 || c >= 0x7f)
            snprintf(piece, sizeof piece, "\\x%02x", c);
        else
            snprintf(piece, sizeof piece, "%c", c);
        size_t len = strlen(piece);
        if (k + len + 4 > cap) { /* room for "..." and the NUL */
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        memcpy(out + k, piece, len);
        k += len;
    }
    out[k] = '\0';
    return out;
}

/* ---- JSON ---- */

/* Length (1 to 4) of the valid UTF-8 sequence at s and its code point, or 0
 * when s does not start one (a stray continuation byte, a truncated or
 * overlong sequence, a surrogate, a value above U+10FFFF). */
static int utf8_seq(const unsigned char *s, uint32_t *cp)
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

static void json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        uint32_t cp;
        int len = utf8_seq(p, &cp);
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
static void json_lead(hk_json_t *j, const char *key)
{
    if (j->depth > 0) {
        fputs(j->count[j->depth - 1]++ ? ",\n" : "\n", j->f);
        fprintf(j->f, "%*s", 2 * j->depth, "");
    }
    if (key && j->depth > 0 && j->kind[j->depth - 1] == '{') {
        json_string(j->f, key);
        fputs(": ", j->f);
    }
}

void hk_json_open(hk_json_t *j, const char *key, char kind)
{
    if (j->depth >= HK_JSON_DEPTH) /* a programming error: the shapes are fixed */
        return;
    json_lead(j, key);
    fputc(kind, j->f);
    j->kind[j->depth] = kind;
    j->count[j->depth] = 0;
    j->depth++;
}

void hk_json_close(hk_json_t *j)
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

void hk_json_str(hk_json_t *j, const char *key, const char *v)
{
    json_lead(j, key);
    if (v)
        json_string(j->f, v);
    else
        fputs("null", j->f);
}

void hk_json_int(hk_json_t *j, const char *key, long long v)
{
    json_lead(j, key);
    fprintf(j->f, "%lld", v);
}

void hk_json_num(hk_json_t *j, const char *key, double v)
{
    json_lead(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.6g", v);
    else
        fputs("null", j->f);
}

void hk_json_bool(hk_json_t *j, const char *key, int v)
{
    json_lead(j, key);
    fputs(v ? "true" : "false", j->f);
}

void hk_json_null(hk_json_t *j, const char *key)
{
    json_lead(j, key);
    fputs("null", j->f);
}

/* ---- the document of a command, and its errors ---- */

#define HK_HOST_ERRORS 8
static hk_json_t doc;
static int doc_on;
static char errors[HK_HOST_ERRORS][2048];
static int nerrors, lost_errors;

hk_json_t *hk_host_json(void)
{
    return doc_on ? &doc : NULL;
}

void hk_host_doc_begin(const hk_host_opts_t *opts, const char *command)
{
    if (!opts->json)
        return;
    memset(&doc, 0, sizeof doc);
    doc.f = stdout;
    doc_on = 1;
    hk_json_open(&doc, NULL, '{');
    hk_json_str(&doc, "command", command);
}

int hk_host_doc_end(int rc)
{
    hk_host_progress_clear();
    if (!doc_on)
        return rc;
    while (doc.depth > 1)
        hk_json_close(&doc);
    hk_json_open(&doc, "errors", '[');
    for (int i = 0; i < nerrors; i++)
        hk_json_str(&doc, NULL, errors[i]);
    if (lost_errors)
        hk_json_str(&doc, NULL, "(more errors on stderr)");
    hk_json_close(&doc);
    hk_json_int(&doc, "exit_status", rc);
    hk_json_close(&doc);
    fflush(stdout);
    doc_on = 0;
    return rc;
}

void hk_host_fail(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    hk_host_progress_clear();
    fflush(stdout); /* keep the order of rows and errors on a shared terminal */
    fprintf(stderr, "hk-host: %s\n", hk_host_esc(line));
    if (!doc_on)
        return;
    if (nerrors < HK_HOST_ERRORS)
        memcpy(errors[nerrors++], line, sizeof line);
    else
        lost_errors = 1;
}

/* ---- the progress line ---- */

static struct {
    int active;            /* stdout is a terminal and no JSON is written */
    volatile sig_atomic_t shown; /* a line is on the screen now */
    int total;
    struct timespec t0;
} prog;

/* Ctrl-C during a run: erase the line, then die of the signal as usual, so
 * that the shell's prompt does not land on a stale progress line. */
static void progress_signal(int sig)
{
    static const char erase[] = "\r\033[K";
    if (prog.shown && write(STDOUT_FILENO, erase, sizeof erase - 1) < 0) {
        /* nothing more can be done in a signal handler */
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void hk_host_progress_start(const hk_host_opts_t *opts, int total)
{
    prog.active = !opts->json && isatty(STDOUT_FILENO);
    if (prog.active) {
        signal(SIGINT, progress_signal);
        signal(SIGTERM, progress_signal);
    }
    prog.shown = 0;
    prog.total = total;
    clock_gettime(CLOCK_MONOTONIC, &prog.t0);
}

void hk_host_progress(int step, const char *fmt, ...)
{
    if (!prog.active)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (now.tv_sec - prog.t0.tv_sec) * 1e3 + (now.tv_nsec - prog.t0.tv_nsec) * 1e-6;
    if (ms < HK_HOST_PROGRESS_AFTER_MS) /* short runs never show it */
        return;
    char text[512], line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    int w = snprintf(line, sizeof line, "[%d/%d] %s  %.1f s", step < prog.total ? step : prog.total,
                     prog.total, hk_host_esc(text), ms * 1e-3);
    /* Cut to the terminal's width: a wrapped line cannot be erased in place. */
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && w >= ws.ws_col &&
        (size_t)ws.ws_col <= sizeof line)
        line[ws.ws_col - 1] = '\0';
    printf("\r\033[K%s", line);
    fflush(stdout);
    prog.shown = 1;
}

void hk_host_progress_clear(void)
{
    if (!prog.shown)
        return;
    printf("\r\033[K");
    fflush(stdout);
    prog.shown = 0;
}
