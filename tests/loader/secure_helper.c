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
#include <sys/auxv.h>

#include "hk_loader.h"
#include "hk_status_text.h"

/* LeakSanitizer cannot inspect a process whose effective uid differs from
 * the real one and kills it at exit (and it ignores ASAN_OPTIONS there);
 * its documented hook turns it off for the set-user-ID run only. Unused in
 * builds without sanitizers. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return getauxval(AT_SECURE) != 0;
}

int main(int argc, char **argv)
{
    hk_loader_options_t o;
    hk_loader_t *loader = NULL;

    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    o.default_dir = HK_TEST_SECURE_DIR;
    printf("secure=%lu\n", getauxval(AT_SECURE));
    if (hk_loader_create(&o, &loader) != HK_STATUS_OK) {
        printf("error=loader create failed\n");
        return 1;
    }
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
