/* Prints the layout of every struct the Python package mirrors, and the
 * constants it copies, as the C compiler sees them in plugin_api/:
 *   size STRUCT BYTES
 *   offset STRUCT FIELD BYTES
 *   const NAME VALUE
 *   status NAME VALUE MESSAGE
 * python/tests/test_layout.py compares them with handlekit._abi. The tables'
 * fields come from their headers' slot lists (HK_BLAS1_V1_SLOTS...). */
#include <stddef.h>
#include <stdio.h>

#include "hk_abi.h"
#include "hk_blas1.h"
#include "hk_kernels.h"
#include "hk_loader.h"
#include "hk_memory.h"
#include "hk_status_text.h"
#include "hk_swap.h"

#define SIZE(t) printf("size %s %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("offset %s %s %zu\n", #t, #f, offsetof(t, f))
#define CONST(n) printf("const %s %lld\n", #n, (long long)(n))

static void structs_abi(void)
{
    SIZE(hk_struct_header_t);
    OFF(hk_struct_header_t, struct_type);
    OFF(hk_struct_header_t, struct_size);
    OFF(hk_struct_header_t, struct_version);
    SIZE(hk_negotiate_request_t);
    OFF(hk_negotiate_request_t, header);
    OFF(hk_negotiate_request_t, abi_min);
    OFF(hk_negotiate_request_t, abi_max);
    OFF(hk_negotiate_request_t, log);
    OFF(hk_negotiate_request_t, log_user);
    SIZE(hk_negotiate_answer_t);
    OFF(hk_negotiate_answer_t, header);
    OFF(hk_negotiate_answer_t, abi_version);
    OFF(hk_negotiate_answer_t, flags);
    OFF(hk_negotiate_answer_t, name);
    OFF(hk_negotiate_answer_t, version);
    OFF(hk_negotiate_answer_t, vtable);
    SIZE(hk_create_info_t);
    OFF(hk_create_info_t, size);
    OFF(hk_create_info_t, device);
    OFF(hk_create_info_t, flags);
    SIZE(hk_handle_info_t);
    OFF(hk_handle_info_t, size);
    OFF(hk_handle_info_t, device);
    OFF(hk_handle_info_t, context_id);
    OFF(hk_handle_info_t, owns_primary);
    OFF(hk_handle_info_t, flags);
    OFF(hk_handle_info_t, plugin_name);
}

static void struct_vtable(void)
{
    SIZE(hk_vtable_t);
    OFF(hk_vtable_t, size);
    OFF(hk_vtable_t, handle_create);
    OFF(hk_vtable_t, handle_destroy);
    OFF(hk_vtable_t, set_stream);
    OFF(hk_vtable_t, get_stream);
    OFF(hk_vtable_t, set_pointer_mode);
    OFF(hk_vtable_t, get_pointer_mode);
    OFF(hk_vtable_t, last_error);
    OFF(hk_vtable_t, get_table);
    OFF(hk_vtable_t, enum_tables);
    OFF(hk_vtable_t, handle_info);
    OFF(hk_vtable_t, synchronize);
#if HK_ABI_MINOR >= 2
    OFF(hk_vtable_t, last_error_copy);
#endif
}

/* The tables' slots as their headers list them: the mirror follows the list. */
#define OFF_BLAS1(name, minor, params, args) OFF(hk_blas1_v1_t, name);
#define OFF_MEMORY(name, minor, params, args) OFF(hk_memory_v1_t, name);

static void structs_tables(void)
{
    SIZE(hk_blas1_v1_t);
    OFF(hk_blas1_v1_t, size);
    HK_BLAS1_V1_SLOTS(OFF_BLAS1)
    SIZE(hk_memory_v1_t);
    OFF(hk_memory_v1_t, size);
    HK_MEMORY_V1_SLOTS(OFF_MEMORY)
}

static void structs_kernels(void)
{
    SIZE(hk_kernel_attributes_t);
    OFF(hk_kernel_attributes_t, size);
    OFF(hk_kernel_attributes_t, registers);
    OFF(hk_kernel_attributes_t, max_threads_per_block);
    OFF(hk_kernel_attributes_t, static_shared_bytes);
    OFF(hk_kernel_attributes_t, max_dynamic_shared_bytes);
    OFF(hk_kernel_attributes_t, const_bytes);
    OFF(hk_kernel_attributes_t, local_bytes);
    OFF(hk_kernel_attributes_t, ptx_version);
    OFF(hk_kernel_attributes_t, binary_version);
    SIZE(hk_kernels_v1_t);
    OFF(hk_kernels_v1_t, size);
    OFF(hk_kernels_v1_t, load);
    OFF(hk_kernels_v1_t, unload);
    OFF(hk_kernels_v1_t, get_kernel);
    OFF(hk_kernels_v1_t, get_attributes);
    OFF(hk_kernels_v1_t, launch);
    OFF(hk_kernels_v1_t, get_function);
}

#define SWAPSTATE(f) OFF(hk_swap_state_t, f)
#define PLUGINSTATE(f) OFF(hk_swap_plugin_state_t, f)

static void structs_swap(void)
{
    SIZE(hk_mhandle_state_t);
    OFF(hk_mhandle_state_t, size);
    OFF(hk_mhandle_state_t, plugin);
    OFF(hk_mhandle_state_t, generation);
    OFF(hk_mhandle_state_t, inflight);
    SIZE(hk_swap_options_t);
    OFF(hk_swap_options_t, size);
    OFF(hk_swap_options_t, from);
    OFF(hk_swap_options_t, hold_after_us);
    OFF(hk_swap_options_t, hold_max_us);
    OFF(hk_swap_options_t, deadline_us);
    OFF(hk_swap_options_t, verify);
    OFF(hk_swap_options_t, verify_user);
    OFF(hk_swap_options_t, keep_old);
    SIZE(hk_mhandle_pin_t);
    OFF(hk_mhandle_pin_t, size);
    OFF(hk_mhandle_pin_t, handle);
    OFF(hk_mhandle_pin_t, table);
    OFF(hk_mhandle_pin_t, plugin);
    OFF(hk_mhandle_pin_t, internal);
    SIZE(hk_swap_state_t);
    SWAPSTATE(size), SWAPSTATE(phase), SWAPSTATE(handles), SWAPSTATE(inflight);
    SWAPSTATE(draining), SWAPSTATE(libraries);
    SIZE(hk_swap_plugin_state_t);
    PLUGINSTATE(size), PLUGINSTATE(module), PLUGINSTATE(handles), PLUGINSTATE(inflight);
    PLUGINSTATE(draining), PLUGINSTATE(closes), PLUGINSTATE(reopens);
}

static void structs_loader(void)
{
    SIZE(hk_load_report_t);
    OFF(hk_load_report_t, path);
    OFF(hk_load_report_t, stage);
    OFF(hk_load_report_t, status);
    OFF(hk_load_report_t, reason);
    OFF(hk_load_report_t, plugin);
    SIZE(hk_loader_options_t);
    OFF(hk_loader_options_t, size);
    OFF(hk_loader_options_t, default_dir);
    OFF(hk_loader_options_t, ignore_env);
    OFF(hk_loader_options_t, log);
    OFF(hk_loader_options_t, log_user);
    OFF(hk_loader_options_t, abi_min);
    OFF(hk_loader_options_t, abi_max);
    OFF(hk_loader_options_t, probe_timeout_ms);
    OFF(hk_loader_options_t, isolation);
    OFF(hk_loader_options_t, probe_path);
    OFF(hk_loader_options_t, load_in_place);
    OFF(hk_loader_options_t, deadline_ms);
    OFF(hk_loader_options_t, verifier);
}

static void constants(void)
{
    CONST(HK_ABI_MAJOR);
    CONST(HK_ABI_MINOR);
    CONST(HK_STRUCT_NEGOTIATE_REQUEST);
    CONST(HK_STRUCT_NEGOTIATE_ANSWER);
    CONST(HK_PLUGIN_UNLOAD_SAFE);
#ifdef HK_PLUGIN_MEMORY_HOST
    CONST(HK_PLUGIN_MEMORY_HOST);
    CONST(HK_PLUGIN_MEMORY_CUDA);
#endif
    CONST(HK_DEVICE_CURRENT);
    CONST(HK_CREATE_CHECKED);
    CONST(HK_POINTER_MODE_HOST);
    CONST(HK_POINTER_MODE_DEVICE);
    CONST(HK_LOG_ERROR);
    CONST(HK_LOG_WARN);
    CONST(HK_LOG_INFO);
    CONST(HK_LOG_DEBUG);
    CONST(HK_STAGE_SCAN);
    CONST(HK_STAGE_OPEN);
    CONST(HK_STAGE_SYMBOL);
    CONST(HK_STAGE_NEGOTIATE);
    CONST(HK_STAGE_VALIDATE);
    CONST(HK_STAGE_LOADED);
    CONST(HK_SWAP_IDLE);
    CONST(HK_SWAP_PENDING);
    CONST(HK_SWAP_DRAINING);
    CONST(HK_SWAP_CLOSING);
    CONST(HK_MODULE_OPEN);
    CONST(HK_MODULE_CLOSED);
    CONST(HK_MODULE_STILL_MAPPED);
    for (int s = 0; s < HK_STATUS__COUNT; s++)
        printf("status %s %d %s\n", hk_status_name(s), s, hk_status_string(s));
}

int main(void)
{
    structs_abi();
    struct_vtable();
    structs_tables();
    structs_kernels();
    structs_swap();
    structs_loader();
    constants();
    return 0;
}
