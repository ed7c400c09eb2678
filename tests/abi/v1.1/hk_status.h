/* handlekit: status codes shared by hosts and plugins.
 *
 * Values are part of the ABI: they are never renumbered, new ones are added just
 * before HK_STATUS__COUNT. Name and message come from the one list below. */
#ifndef HK_STATUS_H
#define HK_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message) */
#define HK_STATUS_MAP(X)                                                              \
    X(OK,                 0, "success")                                               \
    X(INVALID_VALUE,      1, "an argument is out of range")                          \
    X(NULL_POINTER,       2, "a required pointer argument is NULL")                   \
    X(INVALID_HANDLE,     3, "the handle is NULL or not a live handle")               \
    X(NOT_SUPPORTED,      4, "the operation is not supported by this implementation")\
    X(OUT_OF_MEMORY,      5, "memory could not be allocated")                        \
    X(NO_DRIVER,          6, "no usable CUDA driver was found")                       \
    X(DRIVER_TOO_OLD,     7, "the CUDA driver is older than the kernels need")        \
    X(NO_DEVICE,          8, "no CUDA device is available")                           \
    X(INVALID_DEVICE,     9, "the device ordinal does not name a device")             \
    X(CONTEXT_DESTROYED, 10, "the handle's CUDA context was destroyed")               \
    X(CONTEXT_RESET,     11, "the handle's primary context was reset")                \
    X(STREAM_MISMATCH,   12, "the stream belongs to another context than the handle's")\
    X(POINTER_MISMATCH,  13, "a pointer belongs to another device than the handle's") \
    X(FORKED,            14, "the handle was made before fork(); CUDA is unusable in the child") \
    X(CUDA_ERROR,        15, "the CUDA driver reported an error")                     \
    X(LAUNCH_FAILED,     16, "a kernel launch failed")                                \
    X(ABI_MISMATCH,      17, "the plugin and host ABI versions are incompatible")     \
    X(LOAD_FAILED,       18, "the plugin file could not be loaded")                   \
    X(NOT_FOUND,         19, "the requested item was not found")                      \
    X(INSECURE,          20, "a file or directory is writable by others")             \
    X(INTERNAL,          21, "internal error")                                        \
    X(BUSY,              22, "the object is still in use")

typedef enum hk_status {
#define HK__STATUS_ENUM(name, value, msg) HK_STATUS_##name = value,
    HK_STATUS_MAP(HK__STATUS_ENUM)
#undef HK__STATUS_ENUM
    HK_STATUS__COUNT /* sentinel: not a status */
} hk_status_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_STATUS_H */
