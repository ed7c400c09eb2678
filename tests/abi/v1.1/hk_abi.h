/* handlekit plugin ABI: negotiation, core vtable, handle structs.
 *
 * A plugin exports exactly one symbol, HK_ENTRY_SYMBOL, of type hk_negotiate_fn.
 * Versioning (docs/abi.md, "Versions"): same major, minor negotiated down to what
 * both sides know. Every struct that crosses the boundary starts with its size
 * (and, for negotiation, a type and version), grows only at the end, and is read
 * as min(its size, the reader's sizeof) into a zeroed copy. A NULL slot means
 * "not supported" (HK_STATUS_NOT_SUPPORTED from the host's point of view).
 *
 * Thread tags: [thread-safe] any thread, concurrently; [handle-safe] any thread,
 * concurrently on different handles and on the same handle; [not-concurrent] the
 * caller serialises calls on the same object. */
#ifndef HK_ABI_H
#define HK_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "hk_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_ABI_MAJOR 1
#define HK_ABI_MINOR 1
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
 * can serve a version in [abi_min, abi_max]; otherwise returns
 * HK_STATUS_ABI_MISMATCH with answer->abi_version set to the plugin's own version.
 * Makes no CUDA call and allocates nothing. NULL arguments → HK_STATUS_NULL_POINTER. */
typedef hk_status_t (*hk_negotiate_fn)(const hk_negotiate_request_t *request,
                                       hk_negotiate_answer_t *answer);

/* For plugins: copies a complete answer into the host's buffer, no more than
 * the host's declared struct_size (0, from a host that set none, reads as
 * this header's size), and stamps the size actually written. */
static inline void hk_answer_write(hk_negotiate_answer_t *dst, const hk_negotiate_answer_t *src)
{
    uint32_t room = dst->header.struct_size;
    uint32_t n = (room == 0 || room > (uint32_t)sizeof *src) ? (uint32_t)sizeof *src : room;
    const unsigned char *from = (const unsigned char *)src;
    unsigned char *to = (unsigned char *)dst;
    for (uint32_t i = 0; i < n; i++)
        to[i] = from[i];
    if (n >= sizeof dst->header)
        dst->header.struct_size = n;
}

/* Opaque handle; each plugin defines struct hk_handle for itself. A handle is
 * only ever passed back to the vtable of the plugin that made it. */
typedef struct hk_handle hk_handle_t;

/* Device selection in hk_create_info_t.device */
#define HK_DEVICE_CURRENT (-1) /* the context contract's default: what is current */

/* Flags in hk_create_info_t.flags */
#define HK_CREATE_CHECKED 0x1u /* validate that pointers belong to the handle's device */

typedef struct hk_create_info {
    uint32_t size;   /* sizeof(hk_create_info_t) as the caller knows it */
    int32_t device;  /* HK_DEVICE_CURRENT or a device ordinal */
    uint32_t flags;  /* HK_CREATE_* */
} hk_create_info_t;

typedef enum hk_pointer_mode {
    HK_POINTER_MODE_HOST = 0,  /* scalars and results through host pointers; synchronous results */
    HK_POINTER_MODE_DEVICE = 1 /* through device pointers; asynchronous, capturable */
} hk_pointer_mode_t;

typedef struct hk_handle_info {
    uint32_t size;           /* set by the caller to sizeof as it knows it */
    int32_t device;          /* device ordinal; -1 for a CPU implementation */
    uint64_t context_id;     /* driver context ID the handle is bound to; 0 on CPU */
    int32_t owns_primary;    /* 1 when the handle holds a primary-context retain */
    uint32_t flags;          /* the HK_CREATE_* flags in effect */
    const char *plugin_name; /* static storage of the plugin */
} hk_handle_info_t;

/* The core vtable. The host reads min(size, sizeof) of it. */
typedef struct hk_vtable {
    size_t size; /* sizeof(struct hk_vtable) as the plugin was built */

    /* ---- ABI 1.0 ---- */

    /* [thread-safe] Creates a handle. info NULL means all defaults (current device,
     * no flags). On success the caller owns *out and frees it with handle_destroy.
     * *out is set to NULL on failure. out NULL → HK_STATUS_NULL_POINTER. */
    hk_status_t (*handle_create)(const hk_create_info_t *info, hk_handle_t **out);

    /* [thread-safe, not-concurrent on this handle] Destroys a handle and all it made.
     * NULL → HK_STATUS_INVALID_HANDLE. After return the handle must not be used. */
    hk_status_t (*handle_destroy)(hk_handle_t *handle);

    /* [handle-safe] Sets the stream (a CUstream, or NULL for the default stream) of
     * later calls. The stream stays owned by the caller and must outlive its use.
     * A stream of another context → HK_STATUS_STREAM_MISMATCH. */
    hk_status_t (*set_stream)(hk_handle_t *handle, void *stream);

    /* [handle-safe] Writes the handle's stream to *stream (not owned). */
    hk_status_t (*get_stream)(hk_handle_t *handle, void **stream);

    /* [handle-safe] Sets where scalars and results live (hk_pointer_mode_t). */
    hk_status_t (*set_pointer_mode)(hk_handle_t *handle, hk_pointer_mode_t mode);

    /* [handle-safe] Writes the pointer mode to *mode. */
    hk_status_t (*get_pointer_mode)(hk_handle_t *handle, hk_pointer_mode_t *mode);

    /* [handle-safe] Returns the message of the last failed call on this handle
     * (one line naming what was wrong, with CUDA error names and devices where
     * they apply), or "" when none failed. Owned by the handle, valid until the
     * next call on it from any thread. NULL handle → the message of the last
     * failed create on the calling thread. Never NULL. */
    const char *(*last_error)(const hk_handle_t *handle);

    /* [thread-safe] Looks up a function table by versioned name ("hk.blas1/1").
     * *table points to static storage of the plugin whose first field is its size.
     * Unknown name → HK_STATUS_NOT_FOUND and *table = NULL. */
    hk_status_t (*get_table)(const char *name, const void **table);

    /* [thread-safe] Writes the name of the index-th table to *name (static
     * storage). index past the end → HK_STATUS_NOT_FOUND. */
    hk_status_t (*enum_tables)(size_t index, const char **name);

    /* ---- ABI 1.1 ---- */

    /* [handle-safe] Fills min(info->size, sizeof) bytes of *info. */
    hk_status_t (*handle_info)(hk_handle_t *handle, hk_handle_info_t *info);

    /* [handle-safe] Waits until all work issued on the handle's stream is done. */
    hk_status_t (*synchronize)(hk_handle_t *handle);
} hk_vtable_t;

/* Size of an ABI 1.0 vtable: everything before the 1.1 slots. */
#define HK_VTABLE_SIZE_1_0 offsetof(hk_vtable_t, handle_info)

#ifdef __cplusplus
}
#endif

#endif /* HK_ABI_H */
