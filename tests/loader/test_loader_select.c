/* Version selection tests. Semantic version unit tests are in
 * test_semver.c. */
#include "hk_test.h"

void ts_register_semver(void); /* test_semver.c */

int hk_test_register(void)
{
    ts_register_semver();
    return 0;
}
