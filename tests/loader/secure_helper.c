/* Helper of the elevated-privileges tests: the tests run a set-user-ID copy
 * of this program with HK_PLUGIN_PATH set, or with arguments "open PATH"
 * (any number). Its default directory is HK_TEST_SECURE_DIR, which the tests
 * create only when they need it. It scans with the environment allowed,
 * then opens each PATH, and prints what the loader did, one item a line:
 *   secure=<getauxval(AT_SECURE)>
 *   open=<path>|<status name>|<reason, "" when loaded>   (one per PATH)
 *   plugins=<number loaded>
 *   report=<path>|<stage>|<status name>|<reason>   (one per report) */
#include <stdio.h>
#include <string.h>

#include "hk_status_text.h"
#include "setuid_helper.h"

int main(int argc, char **argv)
{
    hk_loader_t *loader = helper_loader(HK_TEST_SECURE_DIR, 0);
    if (!loader)
        return 1;
    hk_loader_scan(loader);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "open") != 0)
            continue;
        hk_plugin_t *p = NULL;
        hk_status_t st = hk_loader_open(loader, argv[i + 1], &p);
        const char *line = hk_loader_last_error(loader);
        const char *reason = strstr(line, ": scan: ");
        printf("open=%s|%s|%s\n", argv[i + 1], hk_status_name(st),
               st == HK_STATUS_OK ? "" : reason ? reason + 8 : line);
    }
    printf("plugins=%zu\n", hk_loader_plugin_count(loader));
    for (size_t i = 0; i < hk_loader_report_count(loader); i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        printf("report=%s|%s|%s|%s\n", r->path, hk_load_stage_name(r->stage),
               hk_status_name(r->status), r->reason);
    }
    hk_loader_destroy(loader);
    return 0;
}
