/* hk-host: the command line's shared pieces, used by main and by the commands
 * that parse their own options (validate, bench, swap, watch): reading the
 * next argument, usage errors (a JSON document too under --json), and the
 * line that ends each command's help. */
#include <stdint.h>
#include <stdio.h>

#include "hk_host.h"

void hkh_usage_more(FILE *f)
{
    fprintf(f, "hk-host --help: the other commands, the environment and the exit statuses\n");
}

int hkh_json_wanted;

int hkh_usage_error(const char *cmd, const char *text)
{
    int doc = hkh_json_wanted && !hkh_json();
    if (doc) {
        hkh_opts_t o = {.json = 1};
        hkh_doc_begin(&o, cmd);
    }
    if (cmd)
        hkh_fail("%s: %s (see hk-host %s --help)", cmd, text, cmd);
    else
        hkh_fail("%s (see hk-host --help)", text);
    return doc ? hkh_doc_end(HKH_EXIT_USAGE) : HKH_EXIT_USAGE;
}

int hkh_cli_next(hk__cli_t *c, const char *cmd, void (*usage)(FILE *f))
{
    int id = hk__cli_next(c);
    if (id == HK__CLI_HELP)
        usage(stdout);
    else if (id == HK__CLI_ERROR)
        hkh_usage_error(cmd, c->error);
    return id;
}

int hkh_cli_exit(int what)
{
    return what == HK__CLI_HELP ? HKH_EXIT_OK : HKH_EXIT_USAGE;
}

/* Option id's value, checked against its entry of numbers, into opts. 1 when
 * id has no entry; 0 stored; -1 out of range (c->error). */
static int hkh_cli_store(hk__cli_t *c, int id, const hkh_number_t *numbers, void *opts)
{
    long long v;
    for (; numbers->id; numbers++) {
        if (numbers->id != id)
            continue;
        if (hk__cli_number(c, c->value, numbers->lo, numbers->hi, &v) != 0)
            return -1;
        char *field = (char *)opts + numbers->at;
        if (numbers->size == sizeof(uint32_t))
            *(uint32_t *)(void *)field = (uint32_t)v;
        else
            *(int64_t *)(void *)field = (int64_t)v;
        return 0;
    }
    return 1;
}

int hkh_cli_parse(hk__cli_t *c, const char *cmd, void (*usage)(FILE *f),
                  const hkh_number_t *numbers,
                  const char *(*other)(int id, const char *value, void *opts), void *opts)
{
    int id;
    while ((id = hkh_cli_next(c, cmd, usage)) > 0) {
        int r = hkh_cli_store(c, id, numbers, opts);
        if (r < 0)
            return hkh_usage_error(cmd, c->error);
        const char *bad = r > 0 ? other(id, c->value, opts) : NULL;
        if (bad)
            return hkh_usage_error(cmd, bad);
    }
    if (id == HK__CLI_OPERAND) {
        char text[HK__CLI_ERROR_MAX];
        snprintf(text, sizeof text, "unexpected argument \"%.200s\"", c->arg);
        return hkh_usage_error(cmd, text);
    }
    return id == HK__CLI_END ? -1 : hkh_cli_exit(id);
}
