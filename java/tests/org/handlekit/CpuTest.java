package org.handlekit;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Loader, Plugin, Handle, Blas1 and Memory over hk-cpu. */
class CpuTest {
    Loader loader;

    @BeforeEach
    void open() {
        loader = TestEnv.loader();
    }

    @AfterEach
    void close() { // after a skipped open too: nothing made, nothing to close
        if (loader != null)
            loader.close();
    }

    @Test
    void scanReportsEveryCandidate() {
        List<Loader.LoadReport> reports = loader.reports();
        assertTrue(reports.stream().anyMatch(r -> r.path().endsWith("/hk-cpu.so") && r.loaded()
                                             && r.stage().equals("loaded")
                                             && r.status().equals("OK")), reports.toString());
        assertTrue(loader.plugins().stream().anyMatch(p -> p.name().equals("hk-cpu")));
        assertTrue(Loader.version().startsWith("1."), Loader.version());
    }

    @Test
    void selectWithRangesAndExplain() {
        Plugin p = loader.select("hk-cpu@^1");
        assertEquals("hk-cpu", p.name());
        assertSame(p, loader.select("hk-cpu@>=1.0, <2"));
        assertSame(p, loader.find("hk-cpu"));
        assertNull(loader.find("no-such-plugin"));
        assertEquals(1, p.abiMajor());
        assertTrue(p.hostMemory());
        assertEquals(List.of("hk.blas1/1", "hk.memory/1"), p.tables());
        HandlekitException e = assertThrows(HandlekitException.class,
                                            () -> loader.select("hk-cpu@^2"));
        assertEquals("NOT_FOUND", e.statusName());
        assertTrue(e.reason().contains("hk-cpu"), e.reason());
        List<Loader.SelectEntry> why = loader.explain("hk-cpu@^2");
        assertEquals(1, why.size());
        assertEquals("out-of-range", why.get(0).verdict().replace('_', '-'));
        assertTrue(why.get(0).reason().contains("^2"), why.get(0).reason());
        assertEquals("chosen", loader.explain("hk-cpu").get(0).verdict());
    }

    @Test
    void handleInfoAndSettings() {
        try (Handle h = loader.select("hk-cpu").handle()) {
            Handle.Info info = h.info();
            assertEquals(-1, info.device());
            assertEquals("hk-cpu", info.pluginName());
            assertEquals(0, h.stream());
            h.setStream(0);
            HandlekitException e = assertThrows(HandlekitException.class, () -> h.setStream(16));
            assertEquals("NOT_SUPPORTED", e.statusName());
            assertFalse(e.reason().isEmpty());
            assertEquals(Handle.POINTER_MODE_HOST, h.pointerMode());
            h.setPointerMode(Handle.POINTER_MODE_DEVICE);
            assertEquals(Handle.POINTER_MODE_DEVICE, h.pointerMode());
            assertEquals("INVALID_VALUE", assertThrows(HandlekitException.class,
                                                       () -> h.setPointerMode(7)).statusName());
            h.synchronize();
            assertTrue(h.lastError().contains("7") || !h.lastError().isEmpty());
        }
    }

    @Test
    void blas1FloatOnBuffersAgainstReference() {
        try (Handle h = loader.select("hk-cpu").handle()) {
            Blas1 b = h.blas1();
            assertTrue(b.isDirect(), "the ops go by JNA direct mapping");
            ByteBuffer x = TestEnv.floats(1, 2, 3, 4, 5, 6), y = TestEnv.floats(1, 1, 1, 1, 1, 1);
            b.saxpy(6, 2f, x, 1, y, 1);
            assertArrayEquals(new float[] {3, 5, 7, 9, 11, 13}, TestEnv.readFloats(y, 6));
            assertEquals(1 * 3 + 2 * 5 + 3 * 7 + 4 * 9 + 5 * 11 + 6 * 13, b.sdot(6, x, 1, y, 1));
            assertEquals((float) Math.sqrt(1 + 4 + 9 + 16 + 25 + 36), b.snrm2(6, x, 1), 1e-6);
            b.sscal(3, -1f, x, 2); // every other element
            assertArrayEquals(new float[] {-1, 2, -3, 4, -5, 6}, TestEnv.readFloats(x, 6));
            ByteBuffer z = TestEnv.floats(0, 0, 0);
            b.scopy(3, x, 2, z, 1);
            assertArrayEquals(new float[] {-1, -3, -5}, TestEnv.readFloats(z, 3));
            x.position(8); // elements start at the position
            assertEquals(-3 * -3 + 4 * 4 + -5 * -5 + 6 * 6, b.sdot(4, x, 1, x, 1));
        }
    }

    @Test
    void blas1DoubleAndPointerMode() {
        try (Handle h = loader.select("hk-cpu").handle()) {
            Blas1 b = h.blas1();
            ByteBuffer x = TestEnv.doubles(1, 2, 3), y = TestEnv.doubles(0.5, 0.5, 0.5);
            b.daxpy(3, 0.25, x, 1, y, 1);
            assertEquals(0.75, y.getDouble(0));
            b.dscal(3, 2, x, 1);
            assertEquals(6.0, x.getDouble(16));
            b.dcopy(3, x, 1, y, 1);
            assertEquals(2 * 2 + 4 * 4 + 6 * 6, b.ddot(3, x, 1, y, 1));
            assertEquals(Math.sqrt(56), b.dnrm2(3, x, 1), 1e-12);
            // device pointer mode: hk-cpu's memory is host memory, so the
            // scalar and the result are addresses of the plugin's memory.
            Memory m = h.memory();
            long a = m.alloc(16);
            try {
                m.copyToDevice(a, TestEnv.doubles(0.5), 8);
                h.setPointerMode(Handle.POINTER_MODE_DEVICE);
                long px = com.sun.jna.Pointer.nativeValue(com.sun.jna.Native
                        .getDirectBufferPointer(x));
                b.dscalPtr(3, a, px, 1);
                b.ddotPtr(3, px, 1, px, 1, a + 8);
                ByteBuffer r = TestEnv.doubles(0);
                m.copyToHost(r, a + 8, 8);
                assertEquals(1 + 4 + 9, r.getDouble(0));
            } finally {
                m.free(a);
            }
        }
    }

    @Test
    void memoryAllocCopiesMemset() {
        try (Handle h = loader.select("hk-cpu").handle()) {
            Memory m = h.memory();
            long d = m.alloc(16);
            assertNotEquals(0, d);
            m.copyToDevice(d, TestEnv.floats(1, 2, 3, 4), 16);
            ByteBuffer back = TestEnv.floats(0, 0, 0, 0);
            m.copyToHost(back, d, 16);
            assertArrayEquals(new float[] {1, 2, 3, 4}, TestEnv.readFloats(back, 4));
            h.blas1().sscal(4, 3f, d, 1); // the device-address form
            m.copyToHost(back, d, 16);
            assertArrayEquals(new float[] {3, 6, 9, 12}, TestEnv.readFloats(back, 4));
            assertEquals(3 * 3 + 6 * 6, h.blas1().sdot(2, d, 1, d, 1));
            m.memset(d, 0, 16);
            m.copyToHost(back, d, 16);
            assertArrayEquals(new float[] {0, 0, 0, 0}, TestEnv.readFloats(back, 4));
            m.free(d);
        }
    }

    @Test
    void aHandleNeverClosedIsDestroyedByTheCleaner() {
        makeAndDrop(loader.select("hk-cpu"));
        // The loader refuses to close (BUSY) while the dropped handle lives.
        long deadline = System.nanoTime() + 60_000_000_000L;
        for (;;) {
            System.gc();
            try {
                loader.close();
                break;
            } catch (HandlekitException e) {
                assertEquals("BUSY", e.statusName());
                assertTrue(System.nanoTime() < deadline, "the cleaner destroyed it within 60 s");
                Thread.onSpinWait();
            }
        }
        loader = TestEnv.loader(); // for close()
    }

    private static void makeAndDrop(Plugin p) {
        Handle h = p.handle();
        h.blas1().sscal(1, 2f, TestEnv.floats(1), 1);
    }
}
