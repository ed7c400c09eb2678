/* hk-probe: the program the handlekit loader starts to load and negotiate
 * candidate plugins away from the host (see hk__loader.h for the protocol).
 * Not meant to be run by hand. */
#include "hk__loader.h"

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
    return hk__probe_main(argc, argv);
}
