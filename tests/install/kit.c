/* A module linking the installed kit through handlekit::kit: it links with
 * no undefined symbol left (-Wl,-z,defs), so the target carries what the
 * kit needs. */
#include <handlekit/hk_kit.h>

const char *kit_user_cu_name(int result, char *buf, size_t len);

const char *kit_user_cu_name(int result, char *buf, size_t len)
{
    return hk_kit_cu_name(result, buf, len);
}
