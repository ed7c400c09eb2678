/* handlekit loader: negotiation with a plugin's entry point, and the checks
 * of its answer, used alike by the host (hk_loader_open.c) and by the probe
 * program (hk_loader_probe_run.c):
 *   hk__negotiate_call   the request, the call, the answer's header
 *   hk__answer_check     version against the host's range, names, vtable size
 *   hk__answer_take      the host's vtable copy, required slots, flags, names
 * Each refusal names what was wrong (see hk_loader.h for the statuses). */
#include "hk__loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_status_text.h"

static void hk__version_text(char *buf, size_t n, uint32_t v)
{
    snprintf(buf, n, "%u.%u", (unsigned)HK_ABI_VERSION_MAJOR(v), (unsigned)HK_ABI_VERSION_MINOR(v));
}

void hk__range_text(char *buf, size_t n, const hk_loader_t *loader)
{
    char lo[16], hi[16];
    hk__version_text(lo, sizeof(lo), loader->abi_min);
    hk__version_text(hi, sizeof(hi), loader->abi_max);
    snprintf(buf, n, "%s-%s", lo, hi);
}

/* Bytes of hk_vtable_t that an ABI minor defines; slots after that are
 * cleared even when the plugin's vtable is longer, so a plugin that answered
 * 1.0 is never called through a 1.1 slot. */
static size_t hk__vtable_end(uint32_t minor)
{
    static const size_t ends[] = {HK_VTABLE_SIZE_1_0, HK_VTABLE_SIZE_1_1, sizeof(hk_vtable_t)};
    size_t n = sizeof(ends) / sizeof(ends[0]);
    return ends[minor < n ? minor : n - 1];
}

/* See hk__loader.h. */
void hk__negotiate_prepare(const hk_loader_t *loader, hk_negotiate_request_t *req,
                           hk__answer_buf_t *buf)
{
    memset(req, 0, sizeof(*req));
    req->header.struct_type = HK_STRUCT_NEGOTIATE_REQUEST;
    req->header.struct_size = sizeof(*req);
    req->header.struct_version = 1;
    req->abi_min = loader->abi_min;
    req->abi_max = loader->abi_max;
    req->log = loader->log;
    req->log_user = loader->log_user;
    memset(buf, 0, sizeof(*buf));
    buf->answer.header.struct_type = HK_STRUCT_NEGOTIATE_ANSWER;
    buf->answer.header.struct_size = sizeof(buf->answer);
    buf->answer.header.struct_version = 1;
}

/* Calls the entry point and reads its answer into *ans: the bytes both sides
 * know, the rest zeroed, once the answer's header checks out. */
static hk_status_t hk__negotiate_call(hk_loader_t *loader, hk_negotiate_fn entry,
                                      hk_negotiate_answer_t *ans, hk_load_stage_t *stage,
                                      char *reason, size_t n)
{
    hk_negotiate_request_t req;
    hk__answer_buf_t buf;
    char range[40], got[16];

    hk__negotiate_prepare(loader, &req, &buf);
    *stage = HK_STAGE_NEGOTIATE;
    hk_status_t st = entry(&req, &buf.answer);
    if (st != HK_STATUS_OK) {
        hk__version_text(got, sizeof(got), buf.answer.abi_version);
        hk__range_text(range, sizeof(range), loader);
        snprintf(reason, n, "%s returned %s (%s); plugin ABI %s, host accepts %s",
                 HK_ENTRY_SYMBOL, hk_status_name(st), hk_status_string(st), got, range);
        return st;
    }

    *stage = HK_STAGE_VALIDATE;
    const hk_struct_header_t *h = &buf.answer.header;
    if (h->struct_type != HK_STRUCT_NEGOTIATE_ANSWER) {
        snprintf(reason, n, "answer struct_type is 0x%08x, expected 0x%08x",
                 (unsigned)h->struct_type, (unsigned)HK_STRUCT_NEGOTIATE_ANSWER);
        return HK_STATUS_INVALID_VALUE;
    }
    if (h->struct_version < 1) {
        snprintf(reason, n, "answer struct_version is %u, expected 1 or later",
                 (unsigned)h->struct_version);
        return HK_STATUS_INVALID_VALUE;
    }
    if (h->struct_size < sizeof(hk_negotiate_answer_t)) {
        snprintf(reason, n, "answer struct_size is %u, smaller than the version 1 answer (%zu)",
                 (unsigned)h->struct_size, sizeof(hk_negotiate_answer_t));
        return HK_STATUS_INVALID_VALUE;
    }
    memset(ans, 0, sizeof(*ans));
    memcpy(ans, &buf.answer, h->struct_size < sizeof(*ans) ? h->struct_size : sizeof(*ans));
    return HK_STATUS_OK;
}

/* The answer's version against the loader's range, its names and vtable
 * present, the vtable at least as long as ABI 1.0's. */
static hk_status_t hk__answer_check(const hk_loader_t *loader, const hk_negotiate_answer_t *ans,
                                    char *reason, size_t n)
{
    char range[40], got[16];
    hk__range_text(range, sizeof(range), loader);
    hk__version_text(got, sizeof(got), ans->abi_version);
    if (HK_ABI_VERSION_MAJOR(ans->abi_version) != HK_ABI_VERSION_MAJOR(loader->abi_min)) {
        snprintf(reason, n, "ABI major out of range: plugin answered %s, host accepts %s", got, range);
        return HK_STATUS_ABI_MISMATCH;
    }
    if (ans->abi_version < loader->abi_min || ans->abi_version > loader->abi_max) {
        snprintf(reason, n, "ABI minor out of range: plugin answered %s, host accepts %s", got, range);
        return HK_STATUS_ABI_MISMATCH;
    }
    const char *null_field = !ans->name      ? "name"
                             : !ans->version ? "version"
                             : !ans->vtable  ? "vtable"
                                             : NULL;
    if (null_field) {
        snprintf(reason, n, "answer %s is NULL", null_field);
        return HK_STATUS_NULL_POINTER;
    }
    if (ans->vtable->size < HK_VTABLE_SIZE_1_0) {
        snprintf(reason, n, "vtable size %zu is smaller than the ABI 1.0 vtable (%zu)",
                 ans->vtable->size, (size_t)HK_VTABLE_SIZE_1_0);
        return HK_STATUS_INVALID_VALUE;
    }
    return HK_STATUS_OK;
}

/* Takes a checked answer into p: the zero-filled vtable copy, cleared past
 * the negotiated minor, with its required slots; the flags; the names. */
static hk_status_t hk__answer_take(const hk_negotiate_answer_t *ans, hk_plugin_t *p, char *reason,
                                   size_t n)
{
    size_t vsize = ans->vtable->size;
    size_t copy = vsize < sizeof(hk_vtable_t) ? vsize : sizeof(hk_vtable_t);
    size_t end = hk__vtable_end(HK_ABI_VERSION_MINOR(ans->abi_version));
    if (copy > end)
        copy = end;
    memset(&p->vtable, 0, sizeof(p->vtable));
    memcpy(&p->vtable, ans->vtable, copy);
    p->vtable.size = copy;

    const hk_vtable_t *vt = &p->vtable;
    const char *missing = !vt->handle_create    ? "handle_create"
                          : !vt->handle_destroy ? "handle_destroy"
                          : !vt->last_error     ? "last_error"
                          : !vt->get_table      ? "get_table"
                                                : NULL;
    if (missing) {
        snprintf(reason, n, "required vtable slot %s is NULL", missing);
        return HK_STATUS_NULL_POINTER;
    }
    hk_status_t st = hk__answer_flags(ans->abi_version, ans->flags, &p->flags, reason, n);
    if (st != HK_STATUS_OK)
        return st;
    p->name = strdup(ans->name);
    p->version = strdup(ans->version);
    if (!p->name || !p->version) {
        snprintf(reason, n, "out of memory");
        return HK_STATUS_OUT_OF_MEMORY;
    }
    p->abi = ans->abi_version;
    return HK_STATUS_OK;
}

/* See hk__loader.h. */
hk_status_t hk__negotiate(hk_loader_t *loader, hk_negotiate_fn entry, hk_plugin_t *p,
                          hk_load_stage_t *stage, char *reason, size_t n)
{
    hk_negotiate_answer_t ans;
    hk_status_t st = hk__negotiate_call(loader, entry, &ans, stage, reason, n);
    if (st == HK_STATUS_OK)
        st = hk__answer_check(loader, &ans, reason, n);
    if (st == HK_STATUS_OK)
        st = hk__answer_take(&ans, p, reason, n);
    return st;
}

hk_status_t hk__answer_flags(uint32_t abi, uint32_t flags, uint32_t *out, char *reason, size_t n)
{
    if (HK_ABI_VERSION_MINOR(abi) < 2) {
        /* Those bits meant nothing before 1.2: whatever such a plugin set
         * there is not a memory domain. */
        *out = flags & ~HK_PLUGIN_MEMORY_MASK;
        return HK_STATUS_OK;
    }
    if ((flags & HK_PLUGIN_MEMORY_MASK) == HK_PLUGIN_MEMORY_MASK) {
        snprintf(reason, n, "answer flags 0x%x name more than one memory domain "
                 "(HK_PLUGIN_MEMORY_HOST and HK_PLUGIN_MEMORY_CUDA)", (unsigned)flags);
        return HK_STATUS_INVALID_VALUE;
    }
    *out = flags;
    return HK_STATUS_OK;
}
