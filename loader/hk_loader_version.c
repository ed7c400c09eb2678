/* handlekit loader: what the library is, for callers that cannot read its
 * headers: its version and plugin ABI range (hk_loader_version), and the
 * status texts of hk_status_text.h as functions of the library
 * (hk_status_name, hk_status_string) for a foreign function interface.
 *
 * This file does not include hk_status_text.h, whose functions of the same
 * names are static inline: the out-of-line copies here are made from the
 * same list (HK_STATUS_MAP), so both give the same text. */
#include <stdint.h>

#include "hk_abi.h"
#include "hk_status.h"

#ifndef HK_LOADER_VERSION_TEXT
#error "HK_LOADER_VERSION_TEXT (MAJOR.MINOR.PATCH) is defined by loader/SConscript"
#endif

const char *hk_loader_version(uint32_t *abi_min, uint32_t *abi_max);
const char *hk_status_name(int status);
const char *hk_status_string(int status);

const char *hk_loader_version(uint32_t *abi_min, uint32_t *abi_max)
{
    if (abi_min)
        *abi_min = HK_ABI_VERSION(HK_ABI_MAJOR, 0);
    if (abi_max)
        *abi_max = HK_ABI_CURRENT;
    return HK_LOADER_VERSION_TEXT;
}

const char *hk_status_name(int status)
{
    switch (status) {
#define HK__STATUS_NAME(name, value, msg) case value: return #name;
    HK_STATUS_MAP(HK__STATUS_NAME)
#undef HK__STATUS_NAME
    default: return "UNKNOWN";
    }
}

const char *hk_status_string(int status)
{
    switch (status) {
#define HK__STATUS_MSG(name, value, msg) case value: return msg;
    HK_STATUS_MAP(HK__STATUS_MSG)
#undef HK__STATUS_MSG
    default: return "unknown status";
    }
}
