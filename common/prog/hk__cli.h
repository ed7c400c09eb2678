/* handlekit: the command-line parser of the programs (hk-host, hk-validate,
 * hk-bench). Internal, never installed; compiled into each program, so that
 * every one reads its arguments by the same rules:
 *
 * - short options "-n 5" or "-n5", grouped flags "-vP"; long options
 *   "--size 5" or "--size=5", spelled out in full (no abbreviations);
 * - "-h" and "--help" are recognised by every program and subcommand
 *   (HK__CLI_HELP), so that help is always there and always exits 0;
 * - an option that takes a value takes the next argument whatever it looks
 *   like ("-n -5" gives "-5", then refused as a number);
 * - "--" ends the options: everything after it is an operand;
 * - numbers are decimal: digits only, no sign, no "0x", a leading zero is
 *   a zero ("010" is ten), and each option states its range.
 *
 * Messages are one line without the program's name, naming the option as the
 * user wrote it ("-n 0: ..."); the program prints them with its prefix. Not
 * thread-safe: one parser per thread, as main() uses it. */
#ifndef HK__CLI_H
#define HK__CLI_H

#include <stdio.h>

/* One option of a program. The table ends with an entry whose id is 0. */
typedef struct hk__cli_opt {
    int id;                /* > 0: what hk__cli_next returns for it; < 256 to be
                              named in an id filter (hk__cli_print_options) */
    char short_name;       /* '\0': none */
    const char *long_name; /* without the dashes; NULL: none */
    const char *value;     /* the value's name in help ("N"); NULL: a flag */
    const char *help;      /* '\n' starts a line of its own; NULL: not listed */
} hk__cli_opt_t;

/* What hk__cli_next returns besides an option's id. */
#define HK__CLI_END 0       /* no argument left */
#define HK__CLI_OPERAND (-1) /* arg is an operand (not an option, or after "--") */
#define HK__CLI_HELP (-2)    /* -h or --help */
#define HK__CLI_ERROR (-3)   /* error says why (an unknown option, a missing value) */
#define HK__CLI_UNKNOWN (-4) /* with pass_unknown: arg is an option of another program */

#define HK__CLI_ERROR_MAX 320

typedef struct hk__cli {
    const hk__cli_opt_t *opts;
    int argc;
    char **argv;
    int index;        /* the next argument to read; argv[0] is never read */
    int pass_unknown; /* set by the caller: unknown options come back as
                         HK__CLI_UNKNOWN, to pass on to another program */
    int after_dashes; /* "--" was read: every argument is an operand */
    const char *arg;  /* the argument just read: an operand, or the option as
                         written ("-n", "--size"; a whole "-xyz" when unknown) */
    const char *value; /* the value of an option that takes one */
    const char *group; /* the rest of a group of short options ("-vP") */
    char written[72];  /* an option as written, without "=value" */
    char error[HK__CLI_ERROR_MAX];
} hk__cli_t;

/* Starts reading argv[1 .. argc - 1] against opts. */
void hk__cli_init(hk__cli_t *c, const hk__cli_opt_t *opts, int argc, char **argv);

/* Reads the next argument: an option's id (value set when it takes one),
 * HK__CLI_OPERAND, HK__CLI_HELP, HK__CLI_UNKNOWN, HK__CLI_ERROR or
 * HK__CLI_END. The caller may stop at any point and take the rest from
 * argv[index] on (a command word: the rest is the command's). */
int hk__cli_next(hk__cli_t *c);

/* Reads text as a decimal number in lo..hi (lo >= 0). Returns 0, or -1 with
 * a message in c->error naming the option as read last ("-n 0x10: not a
 * decimal number from 1 to 1000"). */
int hk__cli_number(hk__cli_t *c, const char *text, long long lo, long long hi, long long *out);

/* The same without a parser: 0, or -1 when text is not such a number. */
int hk__cli_decimal(const char *text, long long lo, long long hi, long long *out);

/* Prints the options of opts whose id is in ids (every option when ids is
 * NULL), one "  -n, --size N   help" entry each, help aligned, plus -h. */
void hk__cli_print_options(FILE *f, const hk__cli_opt_t *opts, const char *ids);

/* How an option is written in messages and synopses: "-n/--size",
 * "--json", "-P". Returns buf. */
const char *hk__cli_name(const hk__cli_opt_t *o, char *buf, size_t len);

/* The entry of opts with this id, or NULL. */
const hk__cli_opt_t *hk__cli_find(const hk__cli_opt_t *opts, int id);

#endif /* HK__CLI_H */
