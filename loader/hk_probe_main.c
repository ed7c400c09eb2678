/* hk-probe: the program the handlekit loader starts to load and negotiate
 * candidate plugins away from the host (see hk__loader.h for the protocol).
 * Not meant to be run by hand. */
#include "hk__loader.h"

#include <stdio.h>
#include <string.h>

/* A plugin that calls exit() in the probe must end with its own status, not
 * with LeakSanitizer's: the leak check is off here. The hook is only read in
 * builds with LeakSanitizer. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: hk-probe (started by the handlekit loader, not by hand)\n"
               "Loads and negotiates candidate plugins, or runs a swap's verification\n"
               "workload, away from the host that started it, and reports to it. Its\n"
               "arguments and descriptors are the loader's; the loader finds it beside\n"
               "the host, in the build tree or in <libexecdir>/handlekit.\n");
        return 0;
    }
    return hk__probe_main(argc, argv);
}
