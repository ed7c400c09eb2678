/* Helper of the elevated-privileges selection test: the test runs a
 * set-user-ID copy of this program with HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE
 * set. It loads every plugin of the directory argv[1], resolves the request
 * argv[2] and prints, one item a line:
 *   secure=<getauxval(AT_SECURE)>
 *   select=<status name>|<version>|<path>     ("-" for no plugin)
 *   report=<path>|<status name>|<reason>      (one per report) */
#include <stdio.h>
#include <string.h>

#include "hk_status_text.h"
#include "setuid_helper.h"

int main(int argc, char **argv)
{
    hk_plugin_t *p = NULL;

    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR REQUEST\n", argv[0]);
        return 2;
    }
    hk_loader_t *loader = helper_loader(argv[1], 1);
    if (!loader)
        return 1;
    hk_loader_scan(loader);
    hk_status_t st = hk_loader_select(loader, argv[2], &p);
    printf("select=%s|%s|%s\n", hk_status_name(st), p ? hk_plugin_version(p) : "-",
           p ? hk_plugin_path(p) : "-");
    for (size_t i = 0; i < hk_loader_report_count(loader); i++) {
        const hk_load_report_t *r = hk_loader_report(loader, i);
        printf("report=%s|%s|%s\n", r->path, hk_status_name(r->status), r->reason);
    }
    hk_loader_destroy(loader);
    return 0;
}
