package org.handlekit;

import com.sun.jna.Memory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The hk.kernels/1 ops of one handle (plugin_api/hk_kernels.h): the caller's
 * own CUDA kernels (PTX text, a cubin or a fatbin) loaded once for the
 * process and launched on the handle's stream in the handle's context. A
 * CPU plugin has no such table. Thread-safe as the C slots are.
 */
public final class Kernels {
    /** Grid or block dimensions. */
    public record Dim(int x, int y, int z) {
        public static Dim of(int x) {
            return new Dim(x, 1, 1);
        }
    }

    /** hk_kernel_attributes_t. */
    public record Attributes(int registers, int maxThreadsPerBlock, int staticSharedBytes,
                             int maxDynamicSharedBytes, int constBytes, int localBytes,
                             int ptxVersion, int binaryVersion) {
    }

    /** One kernel argument as the kernel's parameter type takes it. */
    public static final class Arg {
        final byte[] bytes;

        private Arg(byte[] bytes) {
            this.bytes = bytes;
        }

        private static Arg of(int size, long bits) {
            byte[] b = new byte[size];
            for (int i = 0; i < size; i++) // little-endian, as the device reads it
                b[i] = (byte) (bits >>> (8 * i));
            return new Arg(b);
        }

        public static Arg i8(byte v) {
            return of(1, v);
        }

        public static Arg i16(short v) {
            return of(2, v);
        }

        public static Arg i32(int v) {
            return of(4, v);
        }

        public static Arg i64(long v) {
            return of(8, v);
        }

        public static Arg f32(float v) {
            return of(4, Float.floatToRawIntBits(v));
        }

        public static Arg f64(double v) {
            return of(8, Double.doubleToRawLongBits(v));
        }

        /** A device address (a pointer parameter). */
        public static Arg ptr(long address) {
            return of(8, address);
        }

        /** The bytes of a struct parameter, laid out as the kernel declares it. */
        public static Arg bytes(byte[] value) {
            if (value == null || value.length == 0)
                throw new HandlekitException(Status.INVALID_VALUE, "a struct argument of no bytes");
            return new Arg(value.clone());
        }
    }

    private final Handle h;
    private final long load, unload, getKernel, getAttributes, launch, getFunction;
    private final Set<Library> libraries = ConcurrentHashMap.newKeySet();

    Kernels(Handle h, Memory t) {
        this.h = h;
        load = t.getLong(Layout.KERNELS_LOAD);
        unload = t.getLong(Layout.KERNELS_UNLOAD);
        getKernel = t.getLong(Layout.KERNELS_GET_KERNEL);
        getAttributes = t.getLong(Layout.KERNELS_GET_ATTRIBUTES);
        launch = t.getLong(Layout.KERNELS_LAUNCH);
        getFunction = t.getLong(Layout.KERNELS_GET_FUNCTION);
    }

    /**
     * Loads an image: PTX text (a NUL is added when the bytes lack one), a
     * cubin or a fatbin. The JIT log's first line is the reason when PTX does
     * not build.
     */
    public Library load(byte[] image) {
        if (image == null)
            throw new HandlekitException(Status.NULL_POINTER, "image is null");
        byte[] img = image;
        if (looksLikePtx(image))
            img = java.util.Arrays.copyOf(image, image.length + 1);
        Memory m = new Memory(Math.max(img.length, 1));
        m.write(0, img, 0, img.length);
        long[] out = new long[1];
        h.callChecked(load, "load", m, (long) img.length, out);
        Library lib = new Library(out[0]);
        libraries.add(lib);
        return lib;
    }

    /** PTX text without its NUL: no NUL byte, and not a fatbin or ELF magic. */
    private static boolean looksLikePtx(byte[] b) {
        if (b.length == 0 || b[b.length - 1] == 0)
            return false;
        if (b.length >= 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F')
            return false;
        for (byte x : b)
            if (x == 0)
                return false;
        return true;
    }

    /** Loads the image in a file. */
    public Library load(Path file) throws IOException {
        return load(Files.readAllBytes(file));
    }

    /** Loads PTX text. */
    public Library loadPtx(String ptx) {
        return load(ptx.getBytes(StandardCharsets.UTF_8));
    }

    /** Unloads every library loaded through this handle; the first failure, after all were tried. */
    HandlekitException unloadAll() {
        HandlekitException first = null;
        for (Library lib : libraries) {
            try {
                lib.close();
            } catch (HandlekitException e) {
                first = first == null ? e : first;
            }
        }
        return first;
    }

    /** One loaded image; {@link #close()} unloads it and its kernels. */
    public final class Library implements AutoCloseable {
        private volatile long ptr;

        Library(long ptr) {
            this.ptr = ptr;
        }

        long ptr() {
            long p = ptr;
            if (p == 0)
                throw new HandlekitException(Status.INVALID_VALUE, "the library was unloaded");
            return p;
        }

        /** The kernel of this name (NOT_FOUND naming it when there is none). */
        public Kernel kernel(String name) {
            long[] out = new long[1];
            h.callChecked(getKernel, "get_kernel", Lib.ptr(ptr()),
                          Lib.cstring(name, "name"), out);
            return new Kernel(this, out[0]);
        }

        /** Unloads the library (BUSY while another handle's work with it may be queued). */
        @Override
        public synchronized void close() {
            long p = ptr;
            if (p == 0)
                return;
            h.callChecked(unload, "unload", Lib.ptr(p));
            ptr = 0;
            libraries.remove(this);
        }
    }

    /** One kernel of a library. */
    public final class Kernel {
        private final Library lib;
        private final long ptr;

        Kernel(Library lib, long ptr) {
            this.lib = lib;
            this.ptr = ptr;
        }

        private com.sun.jna.Pointer p() {
            lib.ptr(); // refused once the library is unloaded
            return Lib.ptr(ptr);
        }

        /** The kernel's attributes on the handle's device. */
        public Attributes attributes() {
            Memory a = Lib.sized(Layout.KERNEL_ATTRIBUTES);
            h.callChecked(getAttributes, "get_attributes", p(), a);
            int[] v = a.getIntArray(Layout.KERNEL_ATTRIBUTES_REGISTERS, 8);
            return new Attributes(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
        }

        /** The kernel's CUfunction in the handle's context. */
        public long function() {
            long[] out = new long[1];
            h.callChecked(getFunction, "get_function", p(), out);
            return out[0];
        }

        /**
         * Launches the kernel on the handle's stream with one Arg per kernel
         * parameter, in order (the driver reads as many as the kernel has).
         */
        public void launch(Dim grid, Dim block, int sharedBytes, Arg... args) {
            if (grid == null || block == null)
                throw new HandlekitException(Status.NULL_POINTER, "grid or block is null");
            Memory values = null, ptrs = null;
            if (args != null && args.length > 0) {
                values = new Memory(8L * args.length + total(args));
                ptrs = new Memory(8L * args.length);
                long at = 0;
                for (int i = 0; i < args.length; i++) {
                    if (args[i] == null)
                        throw new HandlekitException(Status.NULL_POINTER, "argument " + i
                                                     + " is null");
                    values.write(at, args[i].bytes, 0, args[i].bytes.length);
                    ptrs.setPointer(8L * i, values.share(at));
                    at += (args[i].bytes.length + 7) & ~7;
                }
            }
            h.callChecked(launch, "launch", p(), grid.x(), grid.y(), grid.z(), block.x(),
                          block.y(), block.z(), sharedBytes, ptrs);
            java.lang.ref.Reference.reachabilityFence(values); // read through ptrs
        }

        private long total(Arg[] args) {
            long n = 0;
            for (Arg a : args)
                n += a == null ? 0 : a.bytes.length;
            return n;
        }
    }
}
