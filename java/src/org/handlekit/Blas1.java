package org.handlekit;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.SymbolProvider;

import java.io.IOException;
import java.io.InputStream;
import java.lang.invoke.MethodHandles;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The hk.blas1/1 ops of one handle (plugin_api/hk_blas1.h, reference-BLAS
 * semantics), in three forms each:
 * <ul>
 * <li>on direct {@link ByteBuffer}s in the native byte order, for a plugin
 * whose memory is host memory (hk-cpu): {@code sscal(n, 2f, x, 1)}; the
 * elements start at the buffer's position, and a buffer too short for n and
 * inc is refused (INVALID_VALUE) before the plugin is called;</li>
 * <li>on device addresses ({@code long}, e.g. from {@link Memory#alloc}) with
 * scalars and results on the host, for hk-cuda in host pointer mode:
 * {@code sscal(n, 2f, xAddress, 1)};</li>
 * <li>{@code ...Ptr} forms where every argument is an address, scalars and
 * results included: what device pointer mode needs.</li>
 * </ul>
 * A null buffer or a 0 address is passed as NULL (the plugin answers
 * NULL_POINTER where it needs one). Addresses are the caller's to get right,
 * as in C. Every op may be called from many threads at once (each slot is
 * [handle-safe]). The calls go to the plugin by JNA direct mapping.
 */
public final class Blas1 {
    private static final String[] SLOTS = {"saxpy", "daxpy", "sscal", "dscal", "scopy", "dcopy",
                                           "sdot", "ddot", "snrm2", "dnrm2"};
    private static final ConcurrentHashMap<String, Blas1Calls> BOUND = new ConcurrentHashMap<>();
    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    /** 16 bytes of native memory per thread for host scalars and results. */
    private static final class Scratch {
        final ByteBuffer buf = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
        final long alpha = com.sun.jna.Pointer.nativeValue(Native.getDirectBufferPointer(buf));
        final long result = alpha + 8;
    }

    private final Handle h;
    private final Blas1Calls calls;
    private final boolean[] present = new boolean[SLOTS.length];
    private final boolean direct;

    Blas1(Handle h, com.sun.jna.Memory table) {
        this.h = h;
        long[] fns = new long[SLOTS.length];
        for (int i = 0; i < SLOTS.length; i++) {
            fns[i] = table.getLong(Layout.BLAS1_SAXPY + 8L * i);
            present[i] = fns[i] != 0;
        }
        Blas1Calls c;
        try {
            c = bind(fns);
        } catch (ReflectiveOperationException | IOException | LinkageError e) {
            c = null;
        }
        direct = c != null;
        calls = c != null ? c : new Indirect(fns);
    }

    /** True when the calls go by direct mapping (false: JNA's generic call). */
    boolean isDirect() {
        return direct;
    }

    /** The direct-mapped calls to these slot addresses, made once per distinct table. */
    private static Blas1Calls bind(long[] fns) throws ReflectiveOperationException, IOException {
        StringBuilder key = new StringBuilder();
        for (long f : fns)
            key.append(Long.toHexString(f)).append(',');
        Blas1Calls c = BOUND.get(key.toString());
        if (c != null)
            return c;
        try {
            synchronized (BOUND) {
                return bindLocked(key.toString(), fns);
            }
        } catch (ReflectiveOperationException | IOException e) {
            throw e;
        } catch (Throwable t) {
            throw new ReflectiveOperationException(t);
        }
    }

    private static Blas1Calls bindLocked(String key, long[] fns) throws Throwable {
        {
            Blas1Calls c = BOUND.get(key);
            if (c != null)
                return c;
            // A slot the plugin lacks is never called (see need()); it is bound to
            // a function that exists so that the registration succeeds.
            long stand = com.sun.jna.Pointer.nativeValue(
                    Lib.LIBRARY.getGlobalVariableAddress("hk_status_name"));
            Map<String, Long> addr = new HashMap<>();
            for (int i = 0; i < SLOTS.length; i++)
                addr.put("n_" + SLOTS[i], fns[i] != 0 ? fns[i] : stand);
            SymbolProvider slots = (handle, name, parent) -> {
                Long a = addr.get(name);
                return a != null ? a : parent.getSymbolAddress(handle, name, null);
            };
            Map<String, Object> options = new HashMap<>();
            options.put(com.sun.jna.Library.OPTION_SYMBOL_PROVIDER, slots);
            NativeLibrary lib = NativeLibrary.getInstance(Lib.LIBRARY.getFile().getPath(),
                                                          options);
            byte[] bytes;
            try (InputStream in = Blas1.class.getResourceAsStream("Blas1Direct.class")) {
                if (in == null)
                    throw new IOException("Blas1Direct.class is not in the jar");
                bytes = in.readAllBytes();
            }
            Class<?> cls = MethodHandles.lookup().defineHiddenClass(bytes, true).lookupClass();
            Native.register(cls, lib);
            c = (Blas1Calls) MethodHandles.lookup().findConstructor(
                    cls, java.lang.invoke.MethodType.methodType(void.class)).invoke();
            BOUND.put(key, c);
            return c;
        }
    }

    private void need(int slot) {
        if (!present[slot])
            throw new HandlekitException(Status.NOT_SUPPORTED, "hk.blas1/1 " + SLOTS[slot] + ": "
                                         + h.plugin().name() + " does not offer it");
    }

    private static final int SAXPY = 0, DAXPY = 1, SSCAL = 2, DSCAL = 3, SCOPY = 4, DCOPY = 5,
            SDOT = 6, DDOT = 7, SNRM2 = 8, DNRM2 = 9;

    private static long buf(ByteBuffer b, long n, long inc, int elem, String what) {
        return Lib.bufferAddress(b, n, inc, elem, what);
    }

    // ---- axpy: y := alpha * x + y ----
    public void saxpy(long n, float alpha, ByteBuffer x, long incx, ByteBuffer y, long incy) {
        saxpy(n, alpha, buf(x, n, incx, 4, "x"), incx, buf(y, n, incy, 4, "y"), incy);
    }

    public void saxpy(long n, float alpha, long x, long incx, long y, long incy) {
        Scratch s = SCRATCH.get();
        s.buf.putFloat(0, alpha);
        saxpyPtr(n, s.alpha, x, incx, y, incy);
    }

    public void saxpyPtr(long n, long alpha, long x, long incx, long y, long incy) {
        need(SAXPY);
        long p = h.enter();
        try {
            h.check(calls.saxpy(p, n, alpha, x, incx, y, incy), "saxpy");
        } finally {
            h.exit();
        }
    }

    public void daxpy(long n, double alpha, ByteBuffer x, long incx, ByteBuffer y, long incy) {
        daxpy(n, alpha, buf(x, n, incx, 8, "x"), incx, buf(y, n, incy, 8, "y"), incy);
    }

    public void daxpy(long n, double alpha, long x, long incx, long y, long incy) {
        Scratch s = SCRATCH.get();
        s.buf.putDouble(0, alpha);
        daxpyPtr(n, s.alpha, x, incx, y, incy);
    }

    public void daxpyPtr(long n, long alpha, long x, long incx, long y, long incy) {
        need(DAXPY);
        long p = h.enter();
        try {
            h.check(calls.daxpy(p, n, alpha, x, incx, y, incy), "daxpy");
        } finally {
            h.exit();
        }
    }

    // ---- scal: x := alpha * x ----
    public void sscal(long n, float alpha, ByteBuffer x, long incx) {
        sscal(n, alpha, buf(x, n, incx, 4, "x"), incx);
    }

    public void sscal(long n, float alpha, long x, long incx) {
        Scratch s = SCRATCH.get();
        s.buf.putFloat(0, alpha);
        sscalPtr(n, s.alpha, x, incx);
    }

    public void sscalPtr(long n, long alpha, long x, long incx) {
        need(SSCAL);
        long p = h.enter();
        try {
            h.check(calls.sscal(p, n, alpha, x, incx), "sscal");
        } finally {
            h.exit();
        }
    }

    public void dscal(long n, double alpha, ByteBuffer x, long incx) {
        dscal(n, alpha, buf(x, n, incx, 8, "x"), incx);
    }

    public void dscal(long n, double alpha, long x, long incx) {
        Scratch s = SCRATCH.get();
        s.buf.putDouble(0, alpha);
        dscalPtr(n, s.alpha, x, incx);
    }

    public void dscalPtr(long n, long alpha, long x, long incx) {
        need(DSCAL);
        long p = h.enter();
        try {
            h.check(calls.dscal(p, n, alpha, x, incx), "dscal");
        } finally {
            h.exit();
        }
    }

    // ---- copy: y := x ----
    public void scopy(long n, ByteBuffer x, long incx, ByteBuffer y, long incy) {
        scopy(n, buf(x, n, incx, 4, "x"), incx, buf(y, n, incy, 4, "y"), incy);
    }

    public void scopy(long n, long x, long incx, long y, long incy) {
        need(SCOPY);
        long p = h.enter();
        try {
            h.check(calls.scopy(p, n, x, incx, y, incy), "scopy");
        } finally {
            h.exit();
        }
    }

    public void dcopy(long n, ByteBuffer x, long incx, ByteBuffer y, long incy) {
        dcopy(n, buf(x, n, incx, 8, "x"), incx, buf(y, n, incy, 8, "y"), incy);
    }

    public void dcopy(long n, long x, long incx, long y, long incy) {
        need(DCOPY);
        long p = h.enter();
        try {
            h.check(calls.dcopy(p, n, x, incx, y, incy), "dcopy");
        } finally {
            h.exit();
        }
    }

    // ---- dot: sum x[i] * y[i] ----
    public float sdot(long n, ByteBuffer x, long incx, ByteBuffer y, long incy) {
        return sdot(n, buf(x, n, incx, 4, "x"), incx, buf(y, n, incy, 4, "y"), incy);
    }

    public float sdot(long n, long x, long incx, long y, long incy) {
        Scratch s = SCRATCH.get();
        sdotPtr(n, x, incx, y, incy, s.result);
        return s.buf.getFloat(8);
    }

    public void sdotPtr(long n, long x, long incx, long y, long incy, long result) {
        need(SDOT);
        long p = h.enter();
        try {
            h.check(calls.sdot(p, n, x, incx, y, incy, result), "sdot");
        } finally {
            h.exit();
        }
    }

    public double ddot(long n, ByteBuffer x, long incx, ByteBuffer y, long incy) {
        return ddot(n, buf(x, n, incx, 8, "x"), incx, buf(y, n, incy, 8, "y"), incy);
    }

    public double ddot(long n, long x, long incx, long y, long incy) {
        Scratch s = SCRATCH.get();
        ddotPtr(n, x, incx, y, incy, s.result);
        return s.buf.getDouble(8);
    }

    public void ddotPtr(long n, long x, long incx, long y, long incy, long result) {
        need(DDOT);
        long p = h.enter();
        try {
            h.check(calls.ddot(p, n, x, incx, y, incy, result), "ddot");
        } finally {
            h.exit();
        }
    }

    // ---- nrm2: sqrt(sum x[i]^2) ----
    public float snrm2(long n, ByteBuffer x, long incx) {
        return snrm2(n, buf(x, n, incx, 4, "x"), incx);
    }

    public float snrm2(long n, long x, long incx) {
        Scratch s = SCRATCH.get();
        snrm2Ptr(n, x, incx, s.result);
        return s.buf.getFloat(8);
    }

    public void snrm2Ptr(long n, long x, long incx, long result) {
        need(SNRM2);
        long p = h.enter();
        try {
            h.check(calls.snrm2(p, n, x, incx, result), "snrm2");
        } finally {
            h.exit();
        }
    }

    public double dnrm2(long n, ByteBuffer x, long incx) {
        return dnrm2(n, buf(x, n, incx, 8, "x"), incx);
    }

    public double dnrm2(long n, long x, long incx) {
        Scratch s = SCRATCH.get();
        dnrm2Ptr(n, x, incx, s.result);
        return s.buf.getDouble(8);
    }

    public void dnrm2Ptr(long n, long x, long incx, long result) {
        need(DNRM2);
        long p = h.enter();
        try {
            h.check(calls.dnrm2(p, n, x, incx, result), "dnrm2");
        } finally {
            h.exit();
        }
    }

    /** The same slots through JNA's generic call, where direct mapping is not available. */
    private static final class Indirect implements Blas1Calls {
        private final long[] f;

        Indirect(long[] f) {
            this.f = f;
        }

        private int c(int slot, Object... args) {
            return Lib.call(f[slot], args);
        }

        public int saxpy(long h, long n, long a, long x, long ix, long y, long iy) {
            return c(SAXPY, h, n, a, x, ix, y, iy);
        }

        public int daxpy(long h, long n, long a, long x, long ix, long y, long iy) {
            return c(DAXPY, h, n, a, x, ix, y, iy);
        }

        public int sscal(long h, long n, long a, long x, long ix) {
            return c(SSCAL, h, n, a, x, ix);
        }

        public int dscal(long h, long n, long a, long x, long ix) {
            return c(DSCAL, h, n, a, x, ix);
        }

        public int scopy(long h, long n, long x, long ix, long y, long iy) {
            return c(SCOPY, h, n, x, ix, y, iy);
        }

        public int dcopy(long h, long n, long x, long ix, long y, long iy) {
            return c(DCOPY, h, n, x, ix, y, iy);
        }

        public int sdot(long h, long n, long x, long ix, long y, long iy, long r) {
            return c(SDOT, h, n, x, ix, y, iy, r);
        }

        public int ddot(long h, long n, long x, long ix, long y, long iy, long r) {
            return c(DDOT, h, n, x, ix, y, iy, r);
        }

        public int snrm2(long h, long n, long x, long ix, long r) {
            return c(SNRM2, h, n, x, ix, r);
        }

        public int dnrm2(long h, long n, long x, long ix, long r) {
            return c(DNRM2, h, n, x, ix, r);
        }
    }
}
