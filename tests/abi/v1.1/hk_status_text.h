/* handlekit: names and messages of hk_status_t.
 *
 * Header-only so that hosts and plugins get the same text without sharing a
 * library: both functions are static inline and never return NULL. */
#ifndef HK_STATUS_TEXT_H
#define HK_STATUS_TEXT_H

#include "hk_status.h"

/* [thread-safe] Returns the enumerator name without prefix ("CONTEXT_RESET"), or
 * "UNKNOWN" for a value outside the list. Static storage; never NULL. */
static inline const char *hk_status_name(int status)
{
    switch (status) {
#define HK__STATUS_NAME(name, value, msg) case value: return #name;
    HK_STATUS_MAP(HK__STATUS_NAME)
#undef HK__STATUS_NAME
    default: return "UNKNOWN";
    }
}

/* [thread-safe] Returns a one-line English message for status, or "unknown status"
 * for a value outside the list. Static storage; never NULL. */
static inline const char *hk_status_string(int status)
{
    switch (status) {
#define HK__STATUS_MSG(name, value, msg) case value: return msg;
    HK_STATUS_MAP(HK__STATUS_MSG)
#undef HK__STATUS_MSG
    default: return "unknown status";
    }
}

#endif /* HK_STATUS_TEXT_H */
