/* handlekit table "hk.kernels/1": the caller's own kernels, loaded and
 * launched through a handle, with the handle's context rules.
 *
 * A program (or another library) hands a CUDA image to the handle library and
 * launches its kernels on the handle's stream, inside the handle's context,
 * from any thread and whatever context is current: the same promises as the
 * handle library's own operations (docs/contexts.md). A CPU plugin does not
 * offer this table.
 *
 * Objects: a library (hk_library_t) is one loaded image, process-wide and
 * context-independent: it serves every handle of the plugin instance that
 * loaded it, on every device and context, also after a primary context reset.
 * A kernel (hk_kernel_t) is one kernel of a library, found by name. Both are
 * opaque, owned by the caller through the library (unload frees both), and
 * valid only in the plugin instance that made them. A pointer that is not a
 * live object of this plugin instance (NULL aside: HK_STATUS_NULL_POINTER) →
 * HK_STATUS_INVALID_VALUE, decided from the plugin's own records without
 * reading through the pointer (an unloaded library's kernels included).
 *
 * Every slot: a handle that is not live → HK_STATUS_INVALID_HANDLE, checked
 * first; a refused call changes nothing and records a one-line reason
 * (last_error); the calling thread's current CUDA context is left as it was,
 * on success and on failure. Thread rules per slot. */
#ifndef HK_KERNELS_H
#define HK_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "hk_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_TABLE_KERNELS_V1 "hk.kernels/1"

typedef struct hk_library hk_library_t;
typedef struct hk_kernel hk_kernel_t;

/* A kernel's attributes on the handle's device, as the driver reports them
 * (cuKernelGetAttribute). size: set by the caller to the bytes its struct
 * has; below 4 → HK_STATUS_INVALID_VALUE. The plugin writes
 * n = min(size, its sizeof) bytes and sets size to n. */
typedef struct hk_kernel_attributes {
    uint32_t size;                    /* in: the caller's sizeof; out: the bytes written */
    int32_t registers;                /* registers per thread */
    int32_t max_threads_per_block;    /* the most threads a block of it may have here */
    int32_t static_shared_bytes;      /* shared memory declared in the kernel */
    int32_t max_dynamic_shared_bytes; /* the most dynamic shared memory a launch may ask */
    int32_t const_bytes;              /* constant memory it uses */
    int32_t local_bytes;              /* local memory per thread */
    int32_t ptx_version;              /* PTX target, major * 10 + minor (e.g. 90) */
    int32_t binary_version;           /* binary's architecture, major * 10 + minor */
} hk_kernel_attributes_t;

/* The slots of hk.kernels/1, one X(...) each (see HK_TABLE_SLOT in hk_abi.h);
 * all are ABI 1.2 slots, the table's own minor. */
#define HK_KERNELS_V1_SLOTS(X)                                                                     \
    /* [thread-safe] Loads image once for the process (cuLibraryLoadData:                          \
     * context-independent) and gives the caller *out, which it owns and                           \
     * gives back with unload. image is a fatbin, a cubin (64-bit ELF) or PTX                      \
     * text; size is its length in bytes, and PTX text must contain its                            \
     * terminating NUL within size. The image is copied: the caller may free                       \
     * it once load returns. The library is loaded into the handle's context                       \
     * at once, so that a PTX image is compiled (JIT) here and not at a later                      \
     * launch.                                                                                     \
     * The driver reads an image as far as the sizes inside it say, and a                          \
     * header's worth of bytes before it knows the kind (docs/contexts.md                          \
     * fact 27): every such size is checked against size before the driver                         \
     * sees the image, and an image shorter than 4 KiB reaches the driver in                       \
     * a zero-padded copy.                                                                         \
     * Statuses: image or out NULL → HK_STATUS_NULL_POINTER; size 0, an image                      \
     * that is none of the three kinds, a fatbin whose header or one of whose                      \
     * entries claims more than size bytes, a cubin (alone or in a fatbin)                         \
     * whose program or section headers, or one of whose sections or                               \
     * segments, lie past its end, PTX without its NUL within size →                               \
     * HK_STATUS_INVALID_VALUE naming what is wrong; an image the driver                           \
     * cannot build (a PTX syntax error, an invalid image) →                                       \
     * HK_STATUS_INVALID_VALUE, and the reason names the driver's error and                        \
     * the first line of the JIT compiler's error log; an image without code                       \
     * for the handle's device → HK_STATUS_NOT_SUPPORTED; other driver                             \
     * failures → their status (OUT_OF_MEMORY, CUDA_ERROR...). *out is NULL                        \
     * on every failure. */                                                                        \
    X(load, 2, (hk_handle_t *h, const void *image, size_t size, hk_library_t **out),               \
      (image, size, out))                                                                          \
    /* [thread-safe] Unloads lib; its kernels go with it. Refused with                             \
     * HK_STATUS_BUSY, the library left loaded, while another thread is                            \
     * inside launch, get_attributes or get_function with one of its kernels                       \
     * or inside get_kernel on it, or while a handle other than h                                  \
     * that launched one of its kernels is not destroyed yet (that handle's                        \
     * work may still be queued). h's own launches do not hold it back; the                        \
     * driver waits for them to finish, and unload never waits while holding                       \
     * a lock that another call of the plugin needs. lib NULL →                                    \
     * HK_STATUS_NULL_POINTER; not a live library (unloaded already, foreign)                      \
     * → HK_STATUS_INVALID_VALUE. A driver failure → its status, and the                           \
     * library stays loaded and usable. Graphs that captured its kernels                           \
     * cannot run after it is unloaded. */                                                         \
    X(unload, 2, (hk_handle_t *h, hk_library_t *lib), (lib))                                       \
    /* [thread-safe] Finds the kernel called name (its mangled name for C++                        \
     * kernels not declared extern "C") in lib. *out is owned by lib (valid                        \
     * until lib is unloaded); asking twice for one name gives the same                            \
     * kernel. No such kernel → HK_STATUS_NOT_FOUND naming it, *out NULL.                          \
     * lib, name or out NULL → HK_STATUS_NULL_POINTER; lib not live →                              \
     * HK_STATUS_INVALID_VALUE. Makes no context current. */                                       \
    X(get_kernel, 2, (hk_handle_t *h, hk_library_t *lib, const char *name, hk_kernel_t **out),     \
      (lib, name, out))                                                                            \
    /* [handle-safe] Writes kernel's attributes on the handle's device to                          \
     * *attrs (see hk_kernel_attributes_t for the size rule). kernel or attrs                      \
     * NULL → HK_STATUS_NULL_POINTER; kernel not live →                                            \
     * HK_STATUS_INVALID_VALUE. Runs in the handle's context. */                                   \
    X(get_attributes, 2, (hk_handle_t *h, hk_kernel_t *kernel, hk_kernel_attributes_t *attrs),     \
      (kernel, attrs))                                                                             \
    /* [handle-safe] Launches kernel on the handle's stream in the handle's                        \
     * context, with a grid of grid_x * grid_y * grid_z blocks of                                  \
     * block_x * block_y * block_z threads, shared_bytes of dynamic shared                         \
     * memory, and args as cuLaunchKernel takes them: args[i] points to the                        \
     * value of the kernel's i-th parameter (args may be NULL only for a                           \
     * kernel without parameters). args must hold a pointer for every                              \
     * parameter: the driver reads that many (docs/contexts.md fact 28), and                       \
     * a shorter array is read past its end, which nothing can detect. The                         \
     * values are read before launch returns. Right on every device and                            \
     * context the library is used in (the kernel's function is taken per                          \
     * context incarnation). It neither synchronises nor allocates, so it                          \
     * can be captured into a CUDA graph;                                                          \
     * the kernel runs asynchronously, a fault in it shows at a later                              \
     * synchronising call.                                                                         \
     * Statuses: kernel NULL → HK_STATUS_NULL_POINTER; not live, or its                            \
     * library being unloaded → HK_STATUS_INVALID_VALUE; a dimension of 0, a                       \
     * block of more than 1024 threads, block_x or block_y above 1024,                             \
     * block_z above 64, grid_y or grid_z above 65535, grid_x above                                \
     * 2^31 - 1 → HK_STATUS_INVALID_VALUE naming it, checked before any                            \
     * driver call; args NULL for a kernel with parameters, or NULL among                          \
     * its first N pointers (N the kernel's parameters, where the driver                           \
     * tells them: CUDA 12.4 and later) → HK_STATUS_INVALID_VALUE naming it,                       \
     * before the driver reads them; a configuration the driver refuses                            \
     * (more threads than this kernel's max_threads_per_block, more dynamic                        \
     * shared memory than its max_dynamic_shared_bytes: 48 KiB unless raised                       \
     * with cuFuncSetAttribute on get_function's function, fact 29) →                              \
     * HK_STATUS_INVALID_VALUE with the driver's error; other launch failures                      \
     * → HK_STATUS_LAUNCH_FAILED (or CONTEXT_DESTROYED, CONTEXT_RESET,                             \
     * FORKED from the context guard). */                                                          \
    X(launch, 2, (hk_handle_t *h, hk_kernel_t *kernel, uint32_t grid_x, uint32_t grid_y,           \
                  uint32_t grid_z, uint32_t block_x, uint32_t block_y, uint32_t block_z,           \
                  uint32_t shared_bytes, void **args),                                             \
      (kernel, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, args))             \
    /* [handle-safe] Writes to *function the kernel's CUfunction in the                            \
     * handle's context, for code that launches it itself                                          \
     * (cuLaunchKernel, cuLaunchKernelEx, occupancy queries). Not owned by the                     \
     * caller; valid in that context until the library is unloaded or the                          \
     * context is reset or destroyed. kernel or function NULL →                                    \
     * HK_STATUS_NULL_POINTER; kernel not live → HK_STATUS_INVALID_VALUE. */                       \
    X(get_function, 2, (hk_handle_t *h, hk_kernel_t *kernel, void **function),                     \
      (kernel, function))

typedef struct hk_kernels_v1 {
    size_t size; /* sizeof(hk_kernels_v1_t) as the plugin was built */
    HK_KERNELS_V1_SLOTS(HK_TABLE_SLOT)
} hk_kernels_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* HK_KERNELS_H */
