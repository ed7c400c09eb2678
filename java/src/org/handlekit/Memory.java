package org.handlekit;

import java.nio.ByteBuffer;

/**
 * The hk.memory/1 ops of one handle (plugin_api/hk_memory.h): memory of the
 * plugin's domain (host memory for hk-cpu, device memory for hk-cuda) as
 * addresses, and copies between it and direct buffers. Every op may be called
 * from many threads at once.
 */
public final class Memory {
    private final Handle h;
    private final long alloc, free, toDevice, toHost, memset;

    Memory(Handle h, com.sun.jna.Memory t) {
        this.h = h;
        alloc = t.getLong(Layout.MEMORY_ALLOC);
        free = t.getLong(Layout.MEMORY_FREE);
        toDevice = t.getLong(Layout.MEMORY_COPY_TO_DEVICE);
        toHost = t.getLong(Layout.MEMORY_COPY_TO_HOST);
        memset = t.getLong(Layout.MEMORY_MEMSET);
    }

    /** Allocates bytes of the plugin's memory; free it with {@link #free}. */
    public long alloc(long bytes) {
        long[] out = new long[1];
        h.callChecked(alloc, "alloc", bytes, out);
        return out[0];
    }

    /** Frees what alloc gave (0: nothing). */
    public void free(long address) {
        h.callChecked(free, "free", Lib.ptr(address));
    }

    /** Copies bytes from src's position to the plugin's memory at dst. */
    public void copyToDevice(long dst, ByteBuffer src, long bytes) {
        long s = Lib.spanAddress(src, bytes, "src");
        h.callChecked(toDevice, "copy_to_device", Lib.ptr(dst), Lib.ptr(s), bytes);
    }

    /** Copies bytes from the plugin's memory at src to dst's position. */
    public void copyToHost(ByteBuffer dst, long src, long bytes) {
        if (dst != null && dst.isReadOnly())
            throw new HandlekitException(Status.INVALID_VALUE, "dst is read-only");
        long d = Lib.spanAddress(dst, bytes, "dst");
        h.callChecked(toHost, "copy_to_host", Lib.ptr(d), Lib.ptr(src), bytes);
    }

    /** Sets bytes of the plugin's memory at dst to value's low byte. */
    public void memset(long dst, int value, long bytes) {
        h.callChecked(memset, "memset", Lib.ptr(dst), value, bytes);
    }
}
