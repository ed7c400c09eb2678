/* The handle slots that the loader's test plugins (test_plugin.c and
 * tc_plugin.c) share: a handle is a zeroed struct hk_handle, which the
 * including file defines with at least a `mode` member, and its info names
 * TP_HANDLE_NAME, which the including file defines too. Static functions:
 * every plugin built from these sources carries its own copy. */
#ifndef TP_HANDLE_H
#define TP_HANDLE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hk_abi.h"

/* A zeroed handle; info is not read. */
static hk_status_t tp_handle_create(const hk_create_info_t *info, hk_handle_t **out)
{
    (void)info;
    if (!out)
        return HK_STATUS_NULL_POINTER;
    *out = calloc(1, sizeof(**out));
    return *out ? HK_STATUS_OK : HK_STATUS_OUT_OF_MEMORY;
}

static hk_status_t tp_handle_destroy(hk_handle_t *h)
{
    if (!h)
        return HK_STATUS_INVALID_HANDLE;
    free(h);
    return HK_STATUS_OK;
}

/* Keeps the mode; any value is taken. */
static hk_status_t tp_set_pointer_mode(hk_handle_t *h, hk_pointer_mode_t mode)
{
    if (!h)
        return HK_STATUS_INVALID_HANDLE;
    h->mode = mode;
    return HK_STATUS_OK;
}

/* No device (-1), named TP_HANDLE_NAME; writes no more than info->size. */
static hk_status_t tp_handle_info(hk_handle_t *h, hk_handle_info_t *info)
{
    if (!h)
        return HK_STATUS_INVALID_HANDLE;
    if (!info)
        return HK_STATUS_NULL_POINTER;
    hk_handle_info_t mine = {sizeof(mine), -1, 0, 0, 0, TP_HANDLE_NAME};
    size_t n = info->size < sizeof(mine) ? info->size : sizeof(mine);
    memcpy(info, &mine, n);
    info->size = (uint32_t)n;
    return HK_STATUS_OK;
}

#endif /* TP_HANDLE_H */
