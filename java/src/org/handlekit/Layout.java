package org.handlekit;

/**
 * Sizes and field offsets of the C structs the binding reads and writes, for
 * LP64 Linux (plugin_api/*.h as the C compiler lays them out). LayoutTest
 * compares each with the compiler's own answer.
 */
final class Layout {
    private Layout() {
    }

    // hk_loader_options_t
    static final int LOADER_OPTIONS = 80, LOADER_OPTIONS_DEFAULT_DIR = 8,
            LOADER_OPTIONS_IGNORE_ENV = 16, LOADER_OPTIONS_ISOLATION = 52;
    // hk_load_report_t
    static final int LOAD_REPORT_PATH = 0, LOAD_REPORT_STAGE = 8, LOAD_REPORT_STATUS = 12,
            LOAD_REPORT_REASON = 16, LOAD_REPORT_PLUGIN = 24;
    // hk_select_entry_t: a pointer, an enum, char reason[HK_SELECT_REASON_MAX]
    static final int SELECT_ENTRY = 336, SELECT_ENTRY_VERDICT = 8, SELECT_ENTRY_REASON = 12;
    // hk_create_info_t
    static final int CREATE_INFO = 12, CREATE_INFO_DEVICE = 4, CREATE_INFO_FLAGS = 8;
    // hk_handle_info_t
    static final int HANDLE_INFO = 32, HANDLE_INFO_DEVICE = 4, HANDLE_INFO_CONTEXT_ID = 8,
            HANDLE_INFO_OWNS_PRIMARY = 16, HANDLE_INFO_FLAGS = 20, HANDLE_INFO_PLUGIN_NAME = 24;
    // hk_vtable_t
    static final int VT_HANDLE_CREATE = 8, VT_HANDLE_DESTROY = 16, VT_SET_STREAM = 24,
            VT_GET_STREAM = 32, VT_SET_POINTER_MODE = 40, VT_GET_POINTER_MODE = 48,
            VT_LAST_ERROR = 56, VT_ENUM_TABLES = 72, VT_HANDLE_INFO = 80, VT_SYNCHRONIZE = 88,
            VT_LAST_ERROR_COPY = 96;
    // the tables: hk_blas1_v1_t (saxpy first), hk_memory_v1_t, hk_kernels_v1_t
    static final int BLAS1 = 88, BLAS1_SAXPY = 8, MEMORY = 48, MEMORY_ALLOC = 8,
            MEMORY_FREE = 16, MEMORY_COPY_TO_DEVICE = 24, MEMORY_COPY_TO_HOST = 32,
            MEMORY_MEMSET = 40, KERNELS = 56, KERNELS_LOAD = 8, KERNELS_UNLOAD = 16,
            KERNELS_GET_KERNEL = 24, KERNELS_GET_ATTRIBUTES = 32, KERNELS_LAUNCH = 40,
            KERNELS_GET_FUNCTION = 48;
    // hk_kernel_attributes_t: size, then eight int32 from registers on
    static final int KERNEL_ATTRIBUTES = 36, KERNEL_ATTRIBUTES_REGISTERS = 4;
    // hk_swap_options_t, hk_mhandle_state_t, hk_swap_state_t
    static final int SWAP_OPTIONS = 64, SWAP_OPTIONS_FROM = 8;
    static final int MHANDLE_STATE = 32, MHANDLE_STATE_PLUGIN = 8, MHANDLE_STATE_GENERATION = 16;
    static final int SWAP_STATE = 40, SWAP_STATE_PHASE = 4, SWAP_STATE_HANDLES = 8,
            SWAP_STATE_INFLIGHT = 16, SWAP_STATE_DRAINING = 24, SWAP_STATE_LIBRARIES = 32;
}
