package org.handlekit;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** Every size and offset the binding uses (Layout) against the C compiler's (python/tests/layout.c). */
class LayoutTest {
    @Test
    void layoutIsTheCompilers() throws Exception {
        Process p = new ProcessBuilder(TestEnv.need("HK_TEST_LAYOUT")).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        Map<String, Long> c = new HashMap<>();
        for (String line : out.split("\n")) {
            String[] w = line.split(" ");
            if (w[0].equals("size"))
                c.put(w[1], Long.parseLong(w[2]));
            else if (w[0].equals("offset"))
                c.put(w[1] + "." + w[2], Long.parseLong(w[3]));
        }
        Object[][] want = {
            {"hk_loader_options_t", Layout.LOADER_OPTIONS},
            {"hk_loader_options_t.default_dir", Layout.LOADER_OPTIONS_DEFAULT_DIR},
            {"hk_loader_options_t.ignore_env", Layout.LOADER_OPTIONS_IGNORE_ENV},
            {"hk_loader_options_t.isolation", Layout.LOADER_OPTIONS_ISOLATION},
            {"hk_load_report_t.path", Layout.LOAD_REPORT_PATH},
            {"hk_load_report_t.stage", Layout.LOAD_REPORT_STAGE},
            {"hk_load_report_t.status", Layout.LOAD_REPORT_STATUS},
            {"hk_load_report_t.reason", Layout.LOAD_REPORT_REASON},
            {"hk_load_report_t.plugin", Layout.LOAD_REPORT_PLUGIN},
            {"hk_create_info_t", Layout.CREATE_INFO},
            {"hk_create_info_t.device", Layout.CREATE_INFO_DEVICE},
            {"hk_create_info_t.flags", Layout.CREATE_INFO_FLAGS},
            {"hk_handle_info_t", Layout.HANDLE_INFO},
            {"hk_handle_info_t.device", Layout.HANDLE_INFO_DEVICE},
            {"hk_handle_info_t.context_id", Layout.HANDLE_INFO_CONTEXT_ID},
            {"hk_handle_info_t.owns_primary", Layout.HANDLE_INFO_OWNS_PRIMARY},
            {"hk_handle_info_t.flags", Layout.HANDLE_INFO_FLAGS},
            {"hk_handle_info_t.plugin_name", Layout.HANDLE_INFO_PLUGIN_NAME},
            {"hk_vtable_t.handle_create", Layout.VT_HANDLE_CREATE},
            {"hk_vtable_t.handle_destroy", Layout.VT_HANDLE_DESTROY},
            {"hk_vtable_t.set_stream", Layout.VT_SET_STREAM},
            {"hk_vtable_t.get_stream", Layout.VT_GET_STREAM},
            {"hk_vtable_t.set_pointer_mode", Layout.VT_SET_POINTER_MODE},
            {"hk_vtable_t.get_pointer_mode", Layout.VT_GET_POINTER_MODE},
            {"hk_vtable_t.last_error", Layout.VT_LAST_ERROR},
            {"hk_vtable_t.enum_tables", Layout.VT_ENUM_TABLES},
            {"hk_vtable_t.handle_info", Layout.VT_HANDLE_INFO},
            {"hk_vtable_t.synchronize", Layout.VT_SYNCHRONIZE},
            {"hk_vtable_t.last_error_copy", Layout.VT_LAST_ERROR_COPY},
            {"hk_blas1_v1_t", Layout.BLAS1},
            {"hk_blas1_v1_t.saxpy", Layout.BLAS1_SAXPY},
            {"hk_blas1_v1_t.daxpy", Layout.BLAS1_SAXPY + 8},
            {"hk_blas1_v1_t.dnrm2", Layout.BLAS1_SAXPY + 72},
            {"hk_memory_v1_t", Layout.MEMORY},
            {"hk_memory_v1_t.alloc", Layout.MEMORY_ALLOC},
            {"hk_memory_v1_t.free_", Layout.MEMORY_FREE},
            {"hk_memory_v1_t.copy_to_device", Layout.MEMORY_COPY_TO_DEVICE},
            {"hk_memory_v1_t.copy_to_host", Layout.MEMORY_COPY_TO_HOST},
            {"hk_memory_v1_t.memset_", Layout.MEMORY_MEMSET},
            {"hk_kernels_v1_t", Layout.KERNELS},
            {"hk_kernels_v1_t.load", Layout.KERNELS_LOAD},
            {"hk_kernels_v1_t.unload", Layout.KERNELS_UNLOAD},
            {"hk_kernels_v1_t.get_kernel", Layout.KERNELS_GET_KERNEL},
            {"hk_kernels_v1_t.get_attributes", Layout.KERNELS_GET_ATTRIBUTES},
            {"hk_kernels_v1_t.launch", Layout.KERNELS_LAUNCH},
            {"hk_kernels_v1_t.get_function", Layout.KERNELS_GET_FUNCTION},
            {"hk_kernel_attributes_t", Layout.KERNEL_ATTRIBUTES},
            {"hk_kernel_attributes_t.registers", Layout.KERNEL_ATTRIBUTES_REGISTERS},
            {"hk_kernel_attributes_t.binary_version", Layout.KERNEL_ATTRIBUTES_REGISTERS + 28},
            {"hk_swap_options_t", Layout.SWAP_OPTIONS},
            {"hk_swap_options_t.from", Layout.SWAP_OPTIONS_FROM},
            {"hk_mhandle_state_t", Layout.MHANDLE_STATE},
            {"hk_mhandle_state_t.plugin", Layout.MHANDLE_STATE_PLUGIN},
            {"hk_mhandle_state_t.generation", Layout.MHANDLE_STATE_GENERATION},
            {"hk_swap_state_t", Layout.SWAP_STATE},
            {"hk_swap_state_t.phase", Layout.SWAP_STATE_PHASE},
            {"hk_swap_state_t.handles", Layout.SWAP_STATE_HANDLES},
            {"hk_swap_state_t.inflight", Layout.SWAP_STATE_INFLIGHT},
            {"hk_swap_state_t.draining", Layout.SWAP_STATE_DRAINING},
            {"hk_swap_state_t.libraries", Layout.SWAP_STATE_LIBRARIES},
        };
        for (Object[] w : want) {
            assertTrue(c.containsKey((String) w[0]), w[0] + " is in the layout program's output");
            assertEquals(((Integer) w[1]).longValue(), c.get((String) w[0]), (String) w[0]);
        }
    }
}
