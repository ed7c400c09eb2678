/* test_bench: hk-bench's parts that need no GPU (tests/bench/SConscript). */
#include "hk_test.h"

void hkb_test_register_lat(void);
void hkb_test_register_p8(void);
void hkb_test_register_bare(void);

int hk_test_register(void)
{
    hkb_test_register_lat();
    hkb_test_register_p8();
    hkb_test_register_bare();
    return 0;
}
