/* The flat include form (-I<includedir>/handlekit, which pkg-config and the
 * CMake targets give too) and the functions an installed library exports
 * for callers that cannot read its headers. Prints "loader VERSION ABI
 * M.m-M.m" and the name of status 0; exits 0. */
#include <stdio.h>

#include <hk_loader.h>
#include <hk_status_text.h>

int main(void)
{
    uint32_t lo = 0, hi = 0;
    const char *v = hk_loader_version(&lo, &hi);
    printf("loader %s ABI %u.%u-%u.%u\n", v, HK_ABI_VERSION_MAJOR(lo), HK_ABI_VERSION_MINOR(lo),
           HK_ABI_VERSION_MAJOR(hi), HK_ABI_VERSION_MINOR(hi));
    printf("status 0: %s\n", hk_status_name(0));
    return 0;
}
