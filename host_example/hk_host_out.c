/* hk-host: what reaches the user: escaped text, the JSON document of --json,
 * error lines, and the progress line of long runs on a terminal. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "hk_host.h"

const char *hkh_esc(const char *s)
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

/* ---- the document of a command, and its errors ---- */

#define HKH_ERRORS 8
static hk__json_t hkh_doc;
static int hkh_doc_on;
static char hkh_errors[HKH_ERRORS][2048];
static int hkh_nerrors, hkh_lost_errors;
static char hkh_warnings[HKH_ERRORS][2048];
static int hkh_nwarnings;

hk__json_t *hkh_json(void)
{
    return hkh_doc_on ? &hkh_doc : NULL;
}

void hkh_doc_begin(const hkh_opts_t *opts, const char *command)
{
    if (!opts->json)
        return;
    hk__json_init(&hkh_doc, stdout);
    hkh_doc_on = 1;
    hk__json_open(&hkh_doc, NULL, '{');
    hk__json_str(&hkh_doc, "command", command);
}

int hkh_doc_end(int rc)
{
    hkh_progress_clear();
    if (!hkh_doc_on)
        return rc;
    while (hkh_doc.depth > 1)
        hk__json_close(&hkh_doc);
    hk__json_open(&hkh_doc, "errors", '[');
    for (int i = 0; i < hkh_nerrors; i++)
        hk__json_str(&hkh_doc, NULL, hkh_errors[i]);
    if (hkh_lost_errors)
        hk__json_str(&hkh_doc, NULL, "(more errors on stderr)");
    hk__json_close(&hkh_doc);
    hk__json_open(&hkh_doc, "warnings", '[');
    for (int i = 0; i < hkh_nwarnings; i++)
        hk__json_str(&hkh_doc, NULL, hkh_warnings[i]);
    hk__json_close(&hkh_doc);
    hk__json_int(&hkh_doc, "exit_status", rc);
    hk__json_close(&hkh_doc);
    fflush(stdout);
    hkh_doc_on = 0;
    return rc;
}

void hkh_fail(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    hkh_progress_clear();
    fflush(stdout); /* keep the order of rows and errors on a shared terminal */
    fprintf(stderr, "hk-host: %s\n", hkh_esc(line));
    if (!hkh_doc_on)
        return;
    if (hkh_nerrors < HKH_ERRORS)
        memcpy(hkh_errors[hkh_nerrors++], line, sizeof line);
    else
        hkh_lost_errors = 1;
}

void hkh_warn(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    hkh_progress_clear();
    fflush(stdout);
    fprintf(stderr, "hk-host: warning: %s\n", hkh_esc(line));
    if (hkh_doc_on && hkh_nwarnings < HKH_ERRORS)
        memcpy(hkh_warnings[hkh_nwarnings++], line, sizeof line);
}

/* ---- the progress line ---- */

static struct {
    int active;            /* stdout is a terminal and no JSON is written */
    volatile sig_atomic_t shown; /* a line is on the screen now */
    int total;
    struct timespec t0;
} hkh_prog;

/* Ctrl-C during a run: erase the line, then die of the signal as usual, so
 * that the shell's prompt does not land on a stale progress line. */
static void hkh_progress_signal(int sig)
{
    static const char erase[] = "\r\033[K";
    if (hkh_prog.shown && write(STDOUT_FILENO, erase, sizeof erase - 1) < 0) {
        /* nothing more can be done in a signal handler */
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void hkh_progress_start(const hkh_opts_t *opts, int total)
{
    hkh_prog.active = !opts->json && isatty(STDOUT_FILENO);
    if (hkh_prog.active) {
        signal(SIGINT, hkh_progress_signal);
        signal(SIGTERM, hkh_progress_signal);
    }
    hkh_prog.shown = 0;
    hkh_prog.total = total;
    clock_gettime(CLOCK_MONOTONIC, &hkh_prog.t0);
}

void hkh_progress(int step, const char *fmt, ...)
{
    if (!hkh_prog.active)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms =
        (now.tv_sec - hkh_prog.t0.tv_sec) * 1e3 + (now.tv_nsec - hkh_prog.t0.tv_nsec) * 1e-6;
    if (ms < HKH_PROGRESS_AFTER_MS) /* short runs never show it */
        return;
    char text[512], line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    int w = snprintf(line, sizeof line, "[%d/%d] %s  %.1f s",
                     step < hkh_prog.total ? step : hkh_prog.total, hkh_prog.total, hkh_esc(text),
                     ms * 1e-3);
    /* Cut to the terminal's width: a wrapped line cannot be erased in place. */
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && w >= ws.ws_col &&
        (size_t)ws.ws_col <= sizeof line)
        line[ws.ws_col - 1] = '\0';
    printf("\r\033[K%s", line);
    fflush(stdout);
    hkh_prog.shown = 1;
}

void hkh_progress_clear(void)
{
    if (!hkh_prog.shown)
        return;
    printf("\r\033[K");
    fflush(stdout);
    hkh_prog.shown = 0;
}
