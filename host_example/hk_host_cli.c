/* hk-host: the command line's shared pieces, used by main and by the commands
 * that parse their own options (validate, bench, swap, watch): reading the
 * next argument, usage errors (a JSON document too under --json), and the
 * line that ends each command's help. */
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
