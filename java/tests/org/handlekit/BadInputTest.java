package org.handlekit;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Bad input gives an exception with the status and a reason, never a crash. */
class BadInputTest {
    Loader loader;
    Handle h;

    @BeforeEach
    void open() {
        loader = TestEnv.loader();
        h = loader.select("hk-cpu").handle();
    }

    @AfterEach
    void close() { // after a skipped open too: nothing made, nothing to close
        if (h != null)
            h.close();
        if (loader != null)
            loader.close();
    }

    static HandlekitException fails(String status, Executable e) {
        HandlekitException x = assertThrows(HandlekitException.class, e);
        assertEquals(status, x.statusName(), x.getMessage());
        assertFalse(x.reason().isEmpty(), "a reason comes with " + status);
        assertTrue(x.getMessage().startsWith(status), x.getMessage());
        return x;
    }

    @Test
    void nullBuffersAreThePluginsNullPointer() {
        Blas1 b = h.blas1();
        ByteBuffer x = TestEnv.floats(1, 2);
        HandlekitException e = fails("NULL_POINTER", () -> b.sscal(2, 1f, null, 1));
        assertTrue(e.reason().contains("x"), e.reason());
        fails("NULL_POINTER", () -> b.saxpy(2, 1f, x, 1, null, 1));
        fails("NULL_POINTER", () -> b.sdot(2, null, 1, x, 1));
        fails("NULL_POINTER", () -> b.dnrm2(2, (ByteBuffer) null, 1));
        fails("NULL_POINTER", () -> h.memory().copyToHost(null, 0, 4));
    }

    @Test
    void buffersTooShortOrOfTheWrongKindAreRefusedBeforeTheCall() {
        Blas1 b = h.blas1();
        ByteBuffer x = TestEnv.floats(1, 2, 3);
        fails("INVALID_VALUE", () -> b.sscal(4, 1f, x, 1));
        fails("INVALID_VALUE", () -> b.sscal(2, 1f, x, 3)); // reaches element 3
        fails("INVALID_VALUE", () -> b.dscal(2, 1, x, 1)); // 16 bytes of 12
        fails("INVALID_VALUE", () -> b.sscal(Long.MAX_VALUE, 1f, x, Long.MAX_VALUE));
        fails("INVALID_VALUE", () -> b.sscal(1, 1f, ByteBuffer.allocate(4), 1)); // not direct
        ByteBuffer big = ByteBuffer.allocateDirect(16).order(
                ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN ? ByteOrder.LITTLE_ENDIAN
                                                                : ByteOrder.BIG_ENDIAN);
        fails("INVALID_VALUE", () -> b.sscal(1, 1f, big, 1));
        x.position(8);
        fails("INVALID_VALUE", () -> b.sdot(2, x, 1, x, 1)); // one element left
        fails("INVALID_VALUE", () -> h.memory().copyToDevice(0, TestEnv.floats(1), 8));
        assertArrayEquals(new float[] {1, 2, 3}, TestEnv.readFloats(x, 3), "nothing written");
    }

    @Test
    void pluginsOwnRefusals() {
        Blas1 b = h.blas1();
        ByteBuffer x = TestEnv.floats(1, 2);
        fails("INVALID_VALUE", () -> b.saxpy(2, 1f, x, 1, x, 0)); // one place written twice
        fails("OUT_OF_MEMORY", () -> h.memory().alloc(Long.MAX_VALUE));
        fails("NOT_SUPPORTED", h::kernels); // a CPU plugin has no hk.kernels/1
        fails("INVALID_VALUE", () -> loader.select("hk-cpu@not a range"));
        fails("INVALID_VALUE", () -> loader.select("hk-cpu\0x"));
        fails("NULL_POINTER", () -> loader.select(null));
    }

    @Test
    void closedHandleAndLoader() {
        Blas1 b = h.blas1();
        ByteBuffer x = TestEnv.floats(1);
        Handle other = loader.select("hk-cpu").handle();
        fails("BUSY", loader::close); // a handle lives
        other.close();
        other.close(); // a second close does nothing
        fails("INVALID_HANDLE", () -> other.blas1().sscal(1, 1f, x, 1));
        fails("INVALID_HANDLE", other::info);
        fails("INVALID_HANDLE", () -> other.setStream(0));
        h.close();
        fails("INVALID_HANDLE", () -> b.sscal(1, 1f, x, 1));
        fails("INVALID_HANDLE", () -> h.memory().alloc(4));
        assertTrue(h.isClosed());
        loader.close();
        fails("INVALID_HANDLE", loader::scan);
        fails("INVALID_HANDLE", () -> loader.select("hk-cpu"));
        loader.close();
    }

    @Test
    void refusedFilesAndOptions() throws Exception {
        fails("NOT_FOUND", () -> loader.open(TestEnv.pluginDir().resolve("none.so").toString()));
        String reason = fails("LOAD_FAILED", () -> loader.open("/etc/passwd")).reason();
        assertTrue(reason.contains("passwd"), reason);
    }
}
