package org.handlekit;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.sun.jna.Callback;
import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * hk-cuda over the simulated driver (tests/simcuda): device addresses, both
 * pointer modes against hk-cpu, hk.kernels/1 with a host emulation of the
 * kernel registered here, threads with streams of their own, and a swap
 * between two builds of hk-cuda under calls.
 */
class SimCudaTest {
    Loader loader;
    NativeLibrary drv;

    /** simcuda_emu_fn; kept for the life of the process, as the driver keeps it. */
    interface Emu extends Callback {
        int invoke(Pointer launch, Pointer params);
    }

    static final AtomicLong EMULATED = new AtomicLong();
    static Emu axpyEmu;

    @BeforeEach
    void open() {
        String sim = TestEnv.need("HK_TEST_SIMCUDA");
        drv = NativeLibrary.getInstance(sim);
        loader = TestEnv.loader();
    }

    @AfterEach
    void close() { // after a skipped open too: nothing made, nothing to close
        if (loader != null)
            loader.close();
    }

    int cu(String name, Object... args) {
        return drv.getFunction(name).invokeInt(args);
    }

    /** A new stream in device 0's primary context. */
    long stream() {
        long[] ctx = new long[1], s = new long[1];
        assertEquals(0, cu("cuDevicePrimaryCtxRetain", ctx, 0));
        assertEquals(0, cu("cuCtxPushCurrent_v2", new Pointer(ctx[0])));
        assertEquals(0, cu("cuStreamCreate", s, 0));
        assertEquals(0, cu("cuCtxPopCurrent_v2", new long[1]));
        return s[0];
    }

    static long put(Memory m, ByteBuffer host) {
        long d = m.alloc(host.capacity());
        m.copyToDevice(d, host, host.capacity());
        return d;
    }

    static float[] get(Memory m, long d, int n) {
        ByteBuffer b = TestEnv.floats(new float[n]);
        m.copyToHost(b, d, 4L * n);
        return TestEnv.readFloats(b, n);
    }

    @Test
    void blas1OnDeviceAddressesEqualsHkCpu() {
        float[] xs = {1, 2, 3, 4, 5, 6, 7, 8}, ys = {8, 7, 6, 5, 4, 3, 2, 1};
        ByteBuffer cx = TestEnv.floats(xs), cy = TestEnv.floats(ys);
        float cdot, cnrm;
        try (Handle c = loader.select("hk-cpu").handle()) {
            c.blas1().saxpy(8, 0.5f, cx, 1, cy, 1);
            cdot = c.blas1().sdot(8, cx, 1, cy, 1);
            cnrm = c.blas1().snrm2(8, cy, 1);
        }
        try (Handle h = loader.select("hk-cuda").handle(0, false)) {
            assertEquals(0, h.info().device());
            assertNotEquals(0, h.info().contextId());
            Memory m = h.memory();
            Blas1 b = h.blas1();
            long x = put(m, TestEnv.floats(xs)), y = put(m, TestEnv.floats(ys));
            long scal = put(m, TestEnv.floats(0.5f, 0));
            try {
                b.saxpy(8, 0.5f, x, 1, y, 1);
                assertArrayEquals(TestEnv.readFloats(cy, 8), get(m, y, 8));
                assertEquals(cdot, b.sdot(8, x, 1, y, 1));
                assertEquals(cnrm, b.snrm2(8, y, 1));
                h.setPointerMode(Handle.POINTER_MODE_DEVICE);
                b.sdotPtr(8, x, 1, y, 1, scal + 4);
                b.sscalPtr(8, scal, y, 1);
                h.synchronize();
                assertEquals(cdot, get(m, scal, 2)[1]);
                assertEquals(TestEnv.readFloats(cy, 8)[3] * 0.5f, get(m, y, 8)[3]);
                assertEquals("NULL_POINTER", assertThrows(HandlekitException.class,
                        () -> b.sscalPtr(8, 0, y, 1)).statusName());
            } finally {
                m.free(x);
                m.free(y);
                m.free(scal);
            }
        }
    }

    static synchronized void registerEmulation(NativeLibrary drv) {
        if (axpyEmu != null)
            return;
        // hkpy_axpy(long long n, float a, const float *x, float *y): device
        // memory is host memory in the simulation.
        axpyEmu = (launch, params) -> {
            long n = params.getPointer(0).getLong(0);
            float a = params.getPointer(8).getFloat(0);
            Pointer x = params.getPointer(16).getPointer(0), y = params.getPointer(24).getPointer(0);
            Function check = drv.getFunction("simcuda_emu_check");
            for (Pointer p : new Pointer[] {x, y}) {
                int r = check.invokeInt(new Object[] {launch, p, 4 * n});
                if (r != 0)
                    return r;
            }
            for (long i = 0; i < n; i++)
                y.setFloat(4 * i, y.getFloat(4 * i) + a * x.getFloat(4 * i));
            EMULATED.incrementAndGet();
            return 0;
        };
        com.sun.jna.Memory entry = new com.sun.jna.Memory(104); // simcuda_emu_entry_t
        entry.clear();
        com.sun.jna.Memory name = new com.sun.jna.Memory(16);
        name.setString(0, "hkpy_axpy");
        entry.setPointer(0, name);
        entry.setPointer(8, com.sun.jna.CallbackReference.getFunctionPointer(axpyEmu));
        assertEquals(0, drv.getFunction("simcuda_emu_register").invokeInt(new Object[] {entry}));
    }

    @Test
    void kernelsFromPtxFileAndBytes() throws Exception {
        Path ptx = Paths.get(TestEnv.need("HK_TEST_KERNELS"), "pykernels.ptx");
        registerEmulation(drv);
        try (Handle h = loader.select("hk-cuda").handle(0, false)) {
            Kernels k = h.kernels();
            Memory m = h.memory();
            try (Kernels.Library lib = k.load(ptx)) {
                Kernels.Kernel axpy = lib.kernel("hkpy_axpy");
                assertTrue(axpy.attributes().maxThreadsPerBlock() > 0);
                assertNotEquals(0, axpy.function());
                long x = put(m, TestEnv.floats(1, 2, 3)), y = put(m, TestEnv.floats(1, 1, 1));
                long before = EMULATED.get();
                axpy.launch(Kernels.Dim.of(1), Kernels.Dim.of(32), 0, Kernels.Arg.i64(3),
                            Kernels.Arg.f32(2f), Kernels.Arg.ptr(x), Kernels.Arg.ptr(y));
                h.synchronize();
                assertEquals(before + 1, EMULATED.get());
                assertArrayEquals(new float[] {3, 5, 7}, get(m, y, 3));
                assertEquals("INVALID_VALUE", assertThrows(HandlekitException.class,
                        () -> axpy.launch(Kernels.Dim.of(0), Kernels.Dim.of(32), 0,
                                          Kernels.Arg.i64(3), Kernels.Arg.f32(2f),
                                          Kernels.Arg.ptr(x), Kernels.Arg.ptr(y))).statusName());
                assertEquals("NOT_FOUND", assertThrows(HandlekitException.class,
                        () -> lib.kernel("no_such_kernel")).statusName());
                lib.close();
                assertEquals("INVALID_VALUE", assertThrows(HandlekitException.class,
                        axpy::function).statusName());
                m.free(x);
                m.free(y);
            }
            String text = new String(Files.readAllBytes(ptx), StandardCharsets.UTF_8);
            try (Kernels.Library lib = k.loadPtx(text)) {
                assertNotEquals(0, lib.kernel("hkpy_axpy").function());
            }
            HandlekitException e = assertThrows(HandlekitException.class,
                                                () -> k.loadPtx(".version 9.0\nthis is not ptx"));
            assertEquals("INVALID_VALUE", e.statusName());
            assertFalse(e.reason().isEmpty());
            assertEquals("NULL_POINTER", assertThrows(HandlekitException.class,
                    () -> k.load((byte[]) null)).statusName());
        }
    }

    @Test
    void eightThreadsOnOneHandleEachWithItsOwnStreamHandle() throws Exception {
        try (Handle shared = loader.select("hk-cuda").handle(0, false)) {
            List<Throwable> errors = ThreadsSwapTest.run(ThreadsSwapTest.THREADS,
                                                         id -> deviceWork(shared, id, 20));
            assertTrue(errors.isEmpty(), errors.toString());
        }
        // and a handle per thread, each on a stream of its own
        Plugin cuda = loader.select("hk-cuda");
        List<Throwable> errors = ThreadsSwapTest.run(ThreadsSwapTest.THREADS, id -> {
            try (Handle h = cuda.handle(0, false)) {
                long s = stream();
                h.setStream(s);
                assertEquals(s, h.stream());
                deviceWork(h, id, 20);
            }
        });
        assertTrue(errors.isEmpty(), errors.toString());
    }

    static void deviceWork(Handle h, int id, int rounds) {
        Memory m = h.memory();
        Blas1 b = h.blas1();
        int n = 32 + id;
        float[] xs = new float[n], ys = new float[n];
        float want = 0;
        for (int i = 0; i < n; i++) {
            xs[i] = (i + id) % 5;
            ys[i] = 1;
            want += xs[i] * (2 * xs[i] + 1);
        }
        long x = put(m, TestEnv.floats(xs));
        try {
            for (int r = 0; r < rounds; r++) {
                long y = put(m, TestEnv.floats(ys));
                try {
                    b.saxpy(n, 2f, x, 1, y, 1);
                    assertEquals(want, b.sdot(n, x, 1, y, 1), "thread " + id);
                } finally {
                    m.free(y);
                }
            }
        } finally {
            m.free(x);
        }
    }

    @Test
    void swapOfHkCudaUnderCalls() throws Exception {
        Path dir = TestEnv.dirWith(TestEnv.pluginDir().resolve("hk-cuda.so"),
                                   Paths.get(TestEnv.need("HK_TEST_SWAP_PLUGINS"),
                                             "hk-cuda-1.0.1.so"));
        try (Loader l = new Loader(new Loader.Options().defaultDir(dir.toString())
                                   .ignoreEnv(true)).scan();
             MovableHandle m = l.movableHandle("hk-cuda@1.0.0", 0)) {
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong calls = new AtomicLong();
            Thread swapper = new Thread(() -> {
                try {
                    for (int k = 0; k < 6; k++) {
                        long seen = calls.get();
                        ThreadsSwapTest.waitFor(() -> calls.get() >= seen + 4,
                                                "calls between swaps");
                        l.swap(k % 2 == 0 ? "hk-cuda@1.0.1" : "hk-cuda@1.0.0");
                    }
                } finally {
                    stop.set(true);
                }
            });
            swapper.start();
            List<Throwable> errors = ThreadsSwapTest.run(4, id -> {
                while (!stop.get()) {
                    deviceWork(m, id, 1);
                    calls.incrementAndGet();
                }
            });
            swapper.join();
            assertTrue(errors.isEmpty(), errors.toString());
            assertEquals(6, m.generation());
            assertEquals(0, l.swapStats().get("refused"));
        } finally {
            TestEnv.remove(dir);
        }
    }
}
