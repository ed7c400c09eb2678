/* handlekit plugin ABI: negotiation, core vtable, handle structs.
 *
 * docs/abi.md states the rules every slot follows, the versioning policy and
 * what each ABI minor added; this header states each slot exactly.
 *
 * A plugin exports exactly one symbol, HK_ENTRY_SYMBOL, of type hk_negotiate_fn.
 * Same major on both sides, minor negotiated down to what both know. Every
 * struct that crosses the boundary starts with its size (and, for negotiation,
 * a type and version), grows only at the end, and is read as min(its size, the
 * reader's sizeof) into a zeroed copy. A NULL slot means "not supported": a
 * host checks a slot for NULL before calling it.
 *
 * Thread tags: [thread-safe] any thread, concurrently, on any objects;
 * [handle-safe] any thread, concurrently on different handles and on the same
 * handle, every result right; [not-concurrent] the caller serialises calls on
 * the same object.
 *
 * The caller's CUDA state: every slot leaves the calling thread's current CUDA
 * context as it found it, on success and on failure. The one exception is
 * handle_create with the default device while nothing is current (see there
 * and docs/contexts.md). A plugin without CUDA (hk-cpu) touches no CUDA state.
 *
 * Handles: a handle is valid only in the plugin instance (the loaded file)
 * that made it, from its handle_create to its handle_destroy. Every slot that
 * takes a handle returns HK_STATUS_INVALID_HANDLE for NULL, for a destroyed
 * handle and for a handle of another plugin or of another loaded copy of the
 * same plugin, deciding so from the plugin's own records without reading
 * through the pointer. Every failed call returns a status of hk_status.h and
 * records a one-line reason (see last_error). */
#ifndef HK_ABI_H
#define HK_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "hk_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_ABI_MAJOR 1
#define HK_ABI_MINOR 2
#define HK_ABI_VERSION(major, minor) ((uint32_t)(((uint32_t)(major) << 16) | ((uint32_t)(minor) & 0xffffu)))
#define HK_ABI_VERSION_MAJOR(v) ((uint32_t)(v) >> 16)
#define HK_ABI_VERSION_MINOR(v) ((uint32_t)(v) & 0xffffu)
#define HK_ABI_CURRENT HK_ABI_VERSION(HK_ABI_MAJOR, HK_ABI_MINOR)

/* The one exported name of every plugin. */
#define HK_ENTRY_SYMBOL "hk_plugin_negotiate"

/* struct_type values of negotiation structs ('H','K' in the high half). */
#define HK_STRUCT_NEGOTIATE_REQUEST 0x484b0001u
#define HK_STRUCT_NEGOTIATE_ANSWER  0x484b0002u

/* Every negotiation struct starts with this. struct_size is sizeof the writer's
 * struct; struct_version is 1 for the layouts below. */
typedef struct hk_struct_header {
    uint32_t struct_type;
    uint32_t struct_size;
    uint32_t struct_version;
} hk_struct_header_t;

typedef enum hk_log_level {
    HK_LOG_ERROR = 0,
    HK_LOG_WARN = 1,
    HK_LOG_INFO = 2,
    HK_LOG_DEBUG = 3
} hk_log_level_t;

/* Log sink given by the host. [thread-safe] It may be called from any thread
 * that calls into the plugin; msg is a NUL-terminated line without newline,
 * owned by the caller and valid only during the call. */
typedef void (*hk_log_fn)(void *user, hk_log_level_t level, const char *msg);

typedef struct hk_negotiate_request {
    hk_struct_header_t header; /* HK_STRUCT_NEGOTIATE_REQUEST, sizeof, 1 */
    uint32_t abi_min;          /* lowest HK_ABI_VERSION the host accepts */
    uint32_t abi_max;          /* highest HK_ABI_VERSION the host knows */
    hk_log_fn log;             /* may be NULL: the plugin then logs nothing */
    void *log_user;            /* passed back to log unchanged */
} hk_negotiate_request_t;

/* Flags in hk_negotiate_answer_t.flags */
#define HK_PLUGIN_UNLOAD_SAFE 0x1u /* the module may be closed once no handle uses it */
/* ABI 1.2: where the memory of the handle's "device" lives (x, y of the
 * tables, device-mode scalars, hk.memory/1 allocations). An ABI 1.2 answer
 * sets exactly one; the loader refuses an answer with more than one, and
 * clears both in answers below 1.2, whose plugins do not know them. */
#define HK_PLUGIN_MEMORY_HOST 0x2u /* ordinary host memory (hk-cpu) */
#define HK_PLUGIN_MEMORY_CUDA 0x4u /* CUDA device memory of the handle's device (hk-cuda) */
#define HK_PLUGIN_MEMORY_MASK (HK_PLUGIN_MEMORY_HOST | HK_PLUGIN_MEMORY_CUDA)

struct hk_vtable;

typedef struct hk_negotiate_answer {
    hk_struct_header_t header; /* HK_STRUCT_NEGOTIATE_ANSWER, sizeof, 1 */
    uint32_t abi_version;      /* the chosen version; on refusal, the plugin's own */
    uint32_t flags;            /* HK_PLUGIN_* */
    const char *name;          /* e.g. "hk-cuda"; static storage of the plugin */
    const char *version;       /* semantic version "1.2.3"; static storage */
    const struct hk_vtable *vtable; /* static storage; its first field is its size */
} hk_negotiate_answer_t;

/* The host sets answer->header.struct_size to the size of the buffer it
 * passes; a plugin writes no more than that (hk_answer_write does it). */

/* The entry point. [thread-safe] Fills *answer and returns HK_STATUS_OK when it
 * can serve a version in [abi_min, abi_max] (the highest one it can);
 * otherwise returns HK_STATUS_ABI_MISMATCH with answer->abi_version set to the
 * plugin's own version. A request whose struct_type is wrong or whose
 * struct_size is too small → HK_STATUS_INVALID_VALUE. NULL request or answer
 * → HK_STATUS_NULL_POINTER. Makes no CUDA call, allocates nothing, keeps no
 * pointer to request or answer. */
typedef hk_status_t (*hk_negotiate_fn)(const hk_negotiate_request_t *request,
                                       hk_negotiate_answer_t *answer);

/* For plugins: copies a complete answer into the host's buffer, no more than
 * the host's declared struct_size (0, from a host that set none, reads as
 * this header's size), and stamps the size actually written. The padding
 * after flags is written as zeros, whatever src held there (an answer built
 * on the plugin's stack would otherwise hand the host bytes of that stack). */
static inline void hk_answer_write(hk_negotiate_answer_t *dst, const hk_negotiate_answer_t *src)
{
    uint32_t room = dst->header.struct_size;
    uint32_t n = (room == 0 || room > (uint32_t)sizeof *src) ? (uint32_t)sizeof *src : room;
    const unsigned char *from = (const unsigned char *)src;
    unsigned char *to = (unsigned char *)dst;
    uint32_t pad = (uint32_t)(offsetof(hk_negotiate_answer_t, flags) + sizeof src->flags);
    uint32_t pad_end = (uint32_t)offsetof(hk_negotiate_answer_t, name);
    for (uint32_t i = 0; i < n; i++)
        to[i] = i >= pad && i < pad_end ? 0 : from[i];
    if (n >= sizeof dst->header)
        dst->header.struct_size = n;
}

/* Opaque handle; each plugin defines struct hk_handle for itself. A handle is
 * only ever passed back to the vtable of the plugin instance that made it;
 * any other plugin answers HK_STATUS_INVALID_HANDLE. */
typedef struct hk_handle hk_handle_t;

/* Device selection in hk_create_info_t.device */
#define HK_DEVICE_CURRENT (-1) /* the context contract's default: what is current */

/* Flags in hk_create_info_t.flags */
#define HK_CREATE_CHECKED 0x1u /* validate that pointers belong to the handle's device */

/* size: the bytes the caller's struct has. Below 12 (the three fields of
 * version 1.0) → HK_STATUS_INVALID_VALUE; bytes past what the plugin knows
 * are ignored. */
typedef struct hk_create_info {
    uint32_t size;   /* sizeof(hk_create_info_t) as the caller knows it */
    int32_t device;  /* HK_DEVICE_CURRENT or a device ordinal */
    uint32_t flags;  /* HK_CREATE_*; unknown bits are ignored */
} hk_create_info_t;

typedef enum hk_pointer_mode {
    HK_POINTER_MODE_HOST = 0,  /* scalars and results through host pointers; synchronous results */
    HK_POINTER_MODE_DEVICE = 1 /* through device pointers; asynchronous, capturable */
} hk_pointer_mode_t;

/* size: set by the caller to the bytes its struct has; below 4 →
 * HK_STATUS_INVALID_VALUE. The plugin writes n = min(size, its sizeof) bytes
 * and sets size to n, so a field past size was not written. */
typedef struct hk_handle_info {
    uint32_t size;           /* in: the caller's sizeof; out: the bytes written */
    int32_t device;          /* device ordinal; -1 for a CPU implementation */
    uint64_t context_id;     /* driver context ID the handle is bound to; 0 on CPU */
    int32_t owns_primary;    /* 1 when the handle holds a primary-context retain */
    uint32_t flags;          /* the HK_CREATE_* flags in effect */
    const char *plugin_name; /* static storage of the plugin */
} hk_handle_info_t;

/* The core vtable. The host reads min(size, sizeof) of it into a zeroed copy
 * and clears the slots newer than the negotiated minor (the loader does both:
 * hk_plugin_vtable). Slots are grouped by the ABI minor that added them. */
typedef struct hk_vtable {
    size_t size; /* sizeof(struct hk_vtable) as the plugin was built */

    /* ---- ABI 1.0 ---- */

    /* [thread-safe] Creates a handle. info NULL means all defaults (the current
     * device, no flags); info->size below 12 → HK_STATUS_INVALID_VALUE.
     * A device that does not exist → HK_STATUS_INVALID_DEVICE; no driver or
     * device → HK_STATUS_NO_DRIVER, DRIVER_TOO_OLD or NO_DEVICE; no memory →
     * HK_STATUS_OUT_OF_MEMORY; after fork() in a CUDA process → HK_STATUS_FORKED;
     * another driver failure → the status naming it (CONTEXT_DESTROYED,
     * CUDA_ERROR...).
     * On success the caller owns *out and frees it with handle_destroy; on
     * failure *out is NULL and last_error(NULL) on this thread says why.
     * out NULL → HK_STATUS_NULL_POINTER.
     * CUDA state: with an explicit device the caller's current context is
     * left alone; with HK_DEVICE_CURRENT and nothing current, the bound
     * device-0 primary context is left current, as a runtime call would leave
     * it (docs/contexts.md); otherwise what was current stays current. */
    hk_status_t (*handle_create)(const hk_create_info_t *info, hk_handle_t **out);

    /* [thread-safe; not concurrent with any other call on this handle]
     * Waits for the work issued through the handle to finish, then frees
     * everything the handle made (workspace, result words) and drops its
     * context retain; the caller's buffers and streams are never touched.
     * The handle is gone whatever the result: a failing step (its context
     * already destroyed, a driver error) is reported as that step's status
     * after the rest was released. Not live (NULL, destroyed, foreign) →
     * HK_STATUS_INVALID_HANDLE and nothing happens. Leaves the caller's
     * current context as it was. */
    hk_status_t (*handle_destroy)(hk_handle_t *handle);

    /* [handle-safe] Sets the stream of later calls: a CUstream of the
     * handle's context, or NULL for the default stream (where a new handle
     * starts). The stream stays owned by the caller and must outlive its use
     * by the handle. A stream of another context → HK_STATUS_STREAM_MISMATCH
     * (naming both devices) and the setting is unchanged; a plugin without
     * streams (hk-cpu) takes only NULL and answers HK_STATUS_NOT_SUPPORTED
     * otherwise. Not live → HK_STATUS_INVALID_HANDLE. A call running at the
     * same time uses the old or the new stream, never a mix. Leaves the
     * caller's current context as it was. */
    hk_status_t (*set_stream)(hk_handle_t *handle, void *stream);

    /* [handle-safe] Writes the handle's stream (not owned; NULL for the
     * default stream) to *stream. stream NULL → HK_STATUS_NULL_POINTER; not
     * live → HK_STATUS_INVALID_HANDLE. Makes no CUDA call. */
    hk_status_t (*get_stream)(hk_handle_t *handle, void **stream);

    /* [handle-safe] Sets where scalars and results live for later calls; a
     * new handle starts in HK_POINTER_MODE_HOST (so a host may run host-mode
     * work on a plugin without this slot).
     * A mode other than HK_POINTER_MODE_HOST or HK_POINTER_MODE_DEVICE →
     * HK_STATUS_INVALID_VALUE and the setting is unchanged; not live →
     * HK_STATUS_INVALID_HANDLE. A call running at the same time uses the old
     * or the new mode, never a mix. Makes no CUDA call. */
    hk_status_t (*set_pointer_mode)(hk_handle_t *handle, hk_pointer_mode_t mode);

    /* [handle-safe] Writes the pointer mode to *mode. mode NULL →
     * HK_STATUS_NULL_POINTER; not live → HK_STATUS_INVALID_HANDLE. Makes no
     * CUDA call. */
    hk_status_t (*get_pointer_mode)(hk_handle_t *handle, hk_pointer_mode_t *mode);

    /* [handle-safe] Returns the one-line message of the last failed call on
     * this handle (naming the argument, the value, the CUDA error name and
     * the devices where they apply), or "" when none failed. Owned by the
     * plugin; valid until the next call on this handle from any thread or the
     * next last_error call on the calling thread, whichever comes first
     * (last_error_copy keeps a copy instead). NULL handle → the message of the
     * calling thread's last failed handle_create ("" when none). A handle
     * that is not live → a line saying so. Never NULL; changes no handle's
     * message and no create message. Makes no CUDA call. */
    const char *(*last_error)(const hk_handle_t *handle);

    /* [thread-safe] Looks up a function table by versioned name ("hk.blas1/1").
     * *table points to static storage of the plugin whose first field is its
     * size (hosts take a clamped copy through hk_plugin_get_table). Unknown
     * name → HK_STATUS_NOT_FOUND and *table = NULL. name or table NULL →
     * HK_STATUS_NULL_POINTER. Makes no CUDA call. */
    hk_status_t (*get_table)(const char *name, const void **table);

    /* [thread-safe] Writes the name of the index-th table to *name (static
     * storage). index past the end → HK_STATUS_NOT_FOUND. name NULL →
     * HK_STATUS_NULL_POINTER. Makes no CUDA call. */
    hk_status_t (*enum_tables)(size_t index, const char **name);

    /* ---- ABI 1.1 ---- */

    /* [handle-safe] Describes the handle: info->size below 4 →
     * HK_STATUS_INVALID_VALUE; otherwise writes n = min(info->size, sizeof)
     * bytes of hk_handle_info_t and sets info->size to n. info NULL →
     * HK_STATUS_NULL_POINTER; not live → HK_STATUS_INVALID_HANDLE. Makes no
     * CUDA call. */
    hk_status_t (*handle_info)(hk_handle_t *handle, hk_handle_info_t *info);

    /* [handle-safe] Waits until all work issued on the handle's stream is
     * done (a CPU plugin's work is done on return: HK_STATUS_OK); a failure of
     * that work is reported as its status (CUDA_ERROR, LAUNCH_FAILED,
     * CONTEXT_DESTROYED...). Not live → HK_STATUS_INVALID_HANDLE. Leaves the
     * caller's current context as it was. */
    hk_status_t (*synchronize)(hk_handle_t *handle);

    /* ---- ABI 1.2 ---- */

    /* [thread-safe; not concurrent with handle_destroy of this handle]
     * Copies the message last_error would return into buf, which the caller
     * owns. NULL handle → the calling thread's last failed handle_create.
     * A handle that is not live → HK_STATUS_INVALID_HANDLE, and buf gets ""
     * when len > 0 and buf is not NULL. len 0 → nothing is written (buf may
     * be NULL). buf NULL with len > 0 → HK_STATUS_NULL_POINTER, nothing
     * written. A message longer than len - 1 bytes is cut to len - 1 bytes
     * plus the NUL (still HK_STATUS_OK). needed may be NULL; otherwise it
     * receives strlen(message) + 1 on HK_STATUS_OK (also for len 0, so a
     * caller can size its buffer) and 0 on failure. Changes no message and
     * makes no CUDA call. */
    hk_status_t (*last_error_copy)(const hk_handle_t *handle, char *buf, size_t len,
                                   size_t *needed);
} hk_vtable_t;

/* Named tables (hk_blas1.h, hk_memory.h, hk_kernels.h, hk_cuda.h): each
 * table header lists its slots once, in table order, as
 *   X(name, minor, (parameters), (arguments after the handle))
 * where minor is the ABI minor that added the slot. The table's struct is
 * made from that list (HK_TABLE_SLOT below), and so can be whatever else
 * must follow the table: a host's forwarders, its sizes per ABI minor, its
 * completeness checks. A slot is added at the end of its list, tagged with
 * the minor that adds it. Every table slot returns hk_status_t. */
#define HK_TABLE_SLOT(name, minor, params, args) hk_status_t(*name) params;

/* Size of an ABI 1.0 vtable: everything before the 1.1 slots. */
#define HK_VTABLE_SIZE_1_0 offsetof(hk_vtable_t, handle_info)
/* Size of an ABI 1.1 vtable: everything before the 1.2 slots. */
#define HK_VTABLE_SIZE_1_1 offsetof(hk_vtable_t, last_error_copy)

#ifdef __cplusplus
}
#endif

#endif /* HK_ABI_H */
