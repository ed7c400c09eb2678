package org.handlekit;

import com.sun.jna.Function;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;

import java.io.File;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The shared loader, libhkloader.so.1, bound by JNA direct mapping, and the
 * helpers the other classes share: calls through function pointers of the
 * plugins' vtables and tables, and checked addresses of direct buffers.
 *
 * The library is the file named by the system property
 * {@code handlekit.loader.library}, else by the environment variable
 * {@code HK_LOADER_LIBRARY}, else {@code libhkloader.so.1} as the dynamic
 * linker finds it (LD_LIBRARY_PATH, ldconfig's directories).
 */
final class Lib {
    static final String SONAME = "libhkloader.so.1";
    static final NativeLibrary LIBRARY;

    static {
        String name = System.getProperty("handlekit.loader.library");
        if (name == null || name.isEmpty())
            name = System.getenv("HK_LOADER_LIBRARY");
        if (name == null || name.isEmpty())
            name = SONAME;
        else if (!new File(name).isFile())
            throw new UnsatisfiedLinkError("handlekit: the loader library " + name
                                           + " (handlekit.loader.library or HK_LOADER_LIBRARY)"
                                           + " is not a file");
        LIBRARY = NativeLibrary.getInstance(name);
        Native.register(Lib.class, LIBRARY);
    }

    private Lib() {
    }

    // ---- hk_status_text.h, hk_loader.h ----
    static native String hk_status_name(int status);
    static native String hk_status_string(int status);
    static native String hk_loader_version(Pointer abiMin, Pointer abiMax);
    static native int hk_loader_create(Pointer opts, long[] out);
    static native int hk_loader_destroy(long loader);
    static native int hk_loader_scan(long loader);
    static native int hk_loader_open(long loader, String path, long[] out);
    static native long hk_loader_report_count(long loader);
    static native long hk_loader_report(long loader, long index);
    static native long hk_loader_plugin_count(long loader);
    static native long hk_loader_plugin(long loader, long index);
    static native long hk_loader_find(long loader, String name);
    static native String hk_loader_last_error(long loader);
    static native String hk_plugin_name(long plugin);
    static native String hk_plugin_version(long plugin);
    static native String hk_plugin_path(long plugin);
    static native int hk_plugin_abi(long plugin);
    static native int hk_plugin_flags(long plugin);
    static native long hk_plugin_vtable(long plugin);
    static native int hk_plugin_get_table(long plugin, String name, Pointer table, long size);
    static native void hk_plugin_acquire(long plugin);
    static native void hk_plugin_release(long plugin);
    static native String hk_load_stage_name(int stage);
    static native int hk_loader_select(long loader, String request, long[] out);
    static native int hk_loader_select_explain(long loader, String request, Pointer entries,
                                               long capacity, long[] count);
    static native String hk_select_verdict_name(int verdict);

    // ---- hk_swap.h ----
    static native int hk_mhandle_create(long loader, String request, Pointer info, long[] out);
    static native int hk_mhandle_create_on(long plugin, Pointer info, long[] out);
    static native int hk_mhandle_destroy(long mh);
    static native long hk_mhandle_handle(long mh);
    static native long hk_mhandle_vtable();
    static native int hk_mhandle_get_table(String name, Pointer table, long size);
    static native int hk_mhandle_last_error_copy(long mh, Pointer buf, long len);
    static native int hk_mhandle_state(long mh, Pointer state);
    static native int hk_loader_swap(long loader, String request, Pointer opts, long[] to);
    static native int hk_loader_swap_state(long loader, Pointer state);
    static native String hk_swap_phase_name(int phase);
    static native int hk_loader_swap_stats(long loader, long[] values, long count, long[] known);
    static native String hk_swap_stat_name(int stat);

    /** A text argument for C: refused when it holds a NUL (C would cut it there). */
    static String cstring(String s, String what) {
        if (s != null && s.indexOf('\0') >= 0)
            throw new HandlekitException(Status.INVALID_VALUE, what + " holds a NUL character");
        return s;
    }

    static Pointer ptr(long address) {
        return address == 0 ? null : new Pointer(address);
    }

    /** Calls the C function at fn (a slot of a vtable or table) returning an int. */
    static int call(long fn, Object... args) {
        return Function.getFunction(new Pointer(fn)).invokeInt(args);
    }

    /** Calls the C function at fn returning a pointer, as an address. */
    static long callPointer(long fn, Object... args) {
        return Pointer.nativeValue(Function.getFunction(new Pointer(fn)).invokePointer(args));
    }

    static long address(Pointer p) {
        return Pointer.nativeValue(p);
    }

    /** A zeroed struct of size bytes whose first field, a uint32, is its size. */
    static Memory sized(int size) {
        Memory m = new Memory(size);
        m.clear();
        m.setInt(0, size);
        return m;
    }

    /**
     * The address of buffer's element at its position, after checking that the
     * buffer is direct, in the native byte order, and holds the elements
     * ((n - 1) * |inc| + 1 of elem bytes each) a BLAS1 call with n and inc
     * reads. null gives 0 (the plugin answers NULL_POINTER when it needs one).
     */
    static long bufferAddress(Buffer b, long n, long inc, int elem, String what) {
        if (b == null)
            return 0;
        if (!b.isDirect())
            throw new HandlekitException(Status.INVALID_VALUE, what + " is not a direct buffer");
        if (b instanceof ByteBuffer && ((ByteBuffer) b).order() != ByteOrder.nativeOrder())
            throw new HandlekitException(Status.INVALID_VALUE, what
                                         + " is not in the native byte order (ByteOrder.nativeOrder())");
        int unit = b instanceof ByteBuffer ? 1 : elem;
        long have = (long) b.remaining() * unit;
        if (n > 0) {
            long need;
            try {
                need = Math.multiplyExact(Math.addExact(Math.multiplyExact(n - 1, Math.abs(inc)),
                                                        1), elem);
            } catch (ArithmeticException e) {
                need = Long.MAX_VALUE;
            }
            if (need > have)
                throw new HandlekitException(Status.INVALID_VALUE, what + ": n = " + n
                                             + ", inc = " + inc + " reach " + need
                                             + " bytes, the buffer has " + have
                                             + " from its position");
        }
        long base = Pointer.nativeValue(Native.getDirectBufferPointer(b));
        return base + (long) b.position() * unit;
    }

    /** The address of a direct buffer's position with at least bytes left. */
    static long spanAddress(Buffer b, long bytes, String what) {
        if (b == null)
            return 0;
        if (!b.isDirect())
            throw new HandlekitException(Status.INVALID_VALUE, what + " is not a direct buffer");
        if (bytes < 0)
            throw new HandlekitException(Status.INVALID_VALUE, what + ": a negative size");
        int unit = b instanceof ByteBuffer ? 1 : elementSize(b);
        if ((long) b.remaining() * unit < bytes)
            throw new HandlekitException(Status.INVALID_VALUE, what + ": " + bytes
                                         + " bytes asked, the buffer has "
                                         + (long) b.remaining() * unit + " from its position");
        return Pointer.nativeValue(Native.getDirectBufferPointer(b)) + (long) b.position() * unit;
    }

    private static int elementSize(Buffer b) {
        if (b instanceof java.nio.FloatBuffer || b instanceof java.nio.IntBuffer)
            return 4;
        if (b instanceof java.nio.DoubleBuffer || b instanceof java.nio.LongBuffer)
            return 8;
        if (b instanceof java.nio.ShortBuffer || b instanceof java.nio.CharBuffer)
            return 2;
        return 1;
    }
}
