/* handlekit: the JSON writer of the programs (hk-host's --json, hk-validate's
 * --json). Internal, never installed; compiled into each program that writes
 * JSON, so that every document follows the same rules:
 *
 * - a value per call, written as it comes (a long run shows its rows while
 *   it goes on), indented by two spaces, one member or element a line;
 * - every string, keys included, is escaped: quote, backslash and every
 *   control character (C0, DEL, C1, U+2028 and U+2029) as \uXXXX or the
 *   short forms, and a byte that is not part of valid UTF-8 as U+FFFD, so
 *   that any plugin's or file's name gives a valid document;
 * - a number that is not finite is written as null.
 *
 * Not thread-safe: one writer per document, used by one thread. */
#ifndef HK__JSON_H
#define HK__JSON_H

#include <stdio.h>

#define HK__JSON_DEPTH 16

typedef struct hk__json {
    FILE *f;
    int depth;
    int count[HK__JSON_DEPTH]; /* members written so far at each open level */
    char kind[HK__JSON_DEPTH]; /* '{' or '[' */
} hk__json_t;

/* A writer to f, with nothing written yet. */
void hk__json_init(hk__json_t *j, FILE *f);

/* key is NULL for array elements and the top value; in an object it names
 * the member. open takes '{' or '['; close ends the innermost one (a line
 * break after the top value). Deeper than HK__JSON_DEPTH is a programming
 * error and writes nothing. */
void hk__json_open(hk__json_t *j, const char *key, char kind);
void hk__json_close(hk__json_t *j);
/* str with v NULL writes null; num with a value that is not finite writes null. */
void hk__json_str(hk__json_t *j, const char *key, const char *v);
void hk__json_int(hk__json_t *j, const char *key, long long v);
void hk__json_num(hk__json_t *j, const char *key, double v);
void hk__json_bool(hk__json_t *j, const char *key, int v);
void hk__json_null(hk__json_t *j, const char *key);

#endif /* HK__JSON_H */
