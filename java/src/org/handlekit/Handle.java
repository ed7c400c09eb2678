package org.handlekit;

import com.sun.jna.Memory;

import java.lang.ref.Cleaner;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A plugin handle (hk_handle_t): settings, and the ops of its tables through
 * {@link #blas1()}, {@link #memory()} and {@link #kernels()}.
 *
 * Thread rules are the C API's: every call may be made from any number of
 * threads at once (each slot is [handle-safe] or [thread-safe], see
 * plugin_api/hk_abi.h), with a stream of its own per thread where the plugin
 * has streams. {@link #close()} waits for the calls in flight on the handle
 * and then destroys it; a call made after it throws INVALID_HANDLE. A handle
 * never closed is destroyed by a {@link Cleaner} once unreachable, but close
 * it (try-with-resources): the cleaner runs late, or not at all at exit.
 */
public class Handle implements AutoCloseable {
    /** hk_create_info_t.device: the context contract's default, what is current. */
    public static final int DEVICE_CURRENT = -1;
    /** hk_pointer_mode_t. */
    public static final int POINTER_MODE_HOST = 0, POINTER_MODE_DEVICE = 1;

    /** hk_handle_info_t. */
    public record Info(int device, long contextId, boolean ownsPrimary, int flags,
                       String pluginName) {
    }

    private static final long CLOSED = Long.MIN_VALUE;

    /** What the cleaner destroys: the handle, then the plugin's hold. */
    static class State implements Runnable {
        final long destroy; // handle_destroy slot, or 0 for a movable handle
        final long ptr;
        final Plugin plugin;
        volatile boolean done;

        State(long destroy, long ptr, Plugin plugin) {
            this.destroy = destroy;
            this.ptr = ptr;
            this.plugin = plugin;
        }

        int destroy() {
            try {
                return Lib.call(destroy, Lib.ptr(ptr));
            } finally {
                plugin.release();
            }
        }

        @Override
        public void run() {
            if (!done) {
                done = true;
                destroy();
            }
        }
    }

    final Plugin.Vtable vt;
    final long ptr; // the handle given to the slots
    private final AtomicLong calls = new AtomicLong();
    private final State state;
    private final Cleaner.Cleanable cleanable;
    private volatile Blas1 blas1;
    private volatile org.handlekit.Memory memory;
    private volatile Kernels kernels;

    Handle(Plugin plugin, int device, boolean checked) {
        plugin.acquire();
        try {
            vt = plugin.vtable();
            if (vt.handleCreate == 0)
                throw new HandlekitException(Status.NOT_SUPPORTED, plugin.name() + " "
                        + plugin.version() + ": its module is closed (a swap moved every handle"
                        + " away from it); swap to it again to reopen it");
            long[] out = new long[1];
            int st = Lib.call(vt.handleCreate, createInfo(device, checked), out);
            if (st != Status.OK)
                throw new HandlekitException(st, text(0));
            ptr = out[0];
        } catch (RuntimeException e) {
            plugin.release();
            throw e;
        }
        state = new State(vt.handleDestroy, ptr, plugin);
        cleanable = Loader.CLEANER.register(this, state);
    }

    /** For MovableHandle: the loader's forwarding vtable, and its own state. */
    Handle(Plugin.Vtable vt, long ptr, State state) {
        this.vt = vt;
        this.ptr = ptr;
        this.state = state;
        cleanable = Loader.CLEANER.register(this, state);
    }

    static Memory createInfo(int device, boolean checked) {
        Memory info = Lib.sized(Layout.CREATE_INFO);
        info.setInt(Layout.CREATE_INFO_DEVICE, device);
        info.setInt(Layout.CREATE_INFO_FLAGS, checked ? 1 : 0);
        return info;
    }

    /** The plugin whose code the handle runs now. */
    public Plugin plugin() {
        return state.plugin;
    }

    // ---- the call guard: close() waits for the calls in flight ----
    final long enter() {
        for (;;) {
            long c = calls.get();
            if (c < 0)
                throw new HandlekitException(Status.INVALID_HANDLE, "the handle was closed");
            if (calls.compareAndSet(c, c + 1))
                return ptr;
        }
    }

    final void exit() {
        calls.decrementAndGet();
    }

    /** Throws the handle's failure when st is not OK. Call between enter() and exit(). */
    final void check(int st, String what) {
        if (st != Status.OK) {
            String reason = text(ptr);
            throw new HandlekitException(st, reason.isEmpty() ? what : reason);
        }
    }

    /** The one-line last error of the handle at h (0: this thread's last create). */
    String text(long h) {
        if (vt.lastErrorCopy != 0) {
            Memory buf = new Memory(1024);
            if (Lib.call(vt.lastErrorCopy, Lib.ptr(h), buf, 1024L, null) == Status.OK)
                return buf.getString(0);
            return "";
        }
        if (vt.lastError == 0)
            return "";
        long s = Lib.callPointer(vt.lastError, Lib.ptr(h));
        return s == 0 ? "" : Lib.ptr(s).getString(0);
    }

    /** The message of the last failed call on this handle ("" when none failed). */
    public String lastError() {
        enter();
        try {
            return text(ptr);
        } finally {
            exit();
        }
    }

    final long slot(long fn, String name) {
        if (fn == 0)
            throw new HandlekitException(Status.NOT_SUPPORTED, name + ": " + plugin().name()
                                         + " does not offer it");
        return fn;
    }

    /** An int-returning slot called with the handle first, checked. */
    final void callChecked(long fn, String name, Object... rest) {
        slot(fn, name);
        Object[] args = new Object[rest.length + 1];
        System.arraycopy(rest, 0, args, 1, rest.length);
        long h = enter();
        try {
            args[0] = Lib.ptr(h);
            check(Lib.call(fn, args), name);
        } finally {
            exit();
        }
    }

    /** hk_handle_info_t of the handle. */
    public Info info() {
        Memory m = Lib.sized(Layout.HANDLE_INFO);
        callChecked(vt.handleInfo, "handle_info", m);
        com.sun.jna.Pointer name = m.getPointer(Layout.HANDLE_INFO_PLUGIN_NAME);
        return new Info(m.getInt(Layout.HANDLE_INFO_DEVICE), m.getLong(Layout.HANDLE_INFO_CONTEXT_ID),
                        m.getInt(Layout.HANDLE_INFO_OWNS_PRIMARY) != 0,
                        m.getInt(Layout.HANDLE_INFO_FLAGS), name == null ? "" : name.getString(0));
    }

    /** The handle's CUstream (0: the default stream). */
    public long stream() {
        long[] out = new long[1];
        callChecked(vt.getStream, "get_stream", out);
        return out[0];
    }

    /** Sets the CUstream of later calls (0: the default stream); the caller keeps owning it. */
    public void setStream(long stream) {
        callChecked(vt.setStream, "set_stream", Lib.ptr(stream));
    }

    /** POINTER_MODE_HOST or POINTER_MODE_DEVICE. */
    public int pointerMode() {
        int[] out = new int[1];
        callChecked(vt.getPointerMode, "get_pointer_mode", out);
        return out[0];
    }

    public void setPointerMode(int mode) {
        callChecked(vt.setPointerMode, "set_pointer_mode", mode);
    }

    /** Waits until the work issued on the handle's stream is done. */
    public void synchronize() {
        callChecked(vt.synchronize, "synchronize");
    }

    /** A table copy of size bytes for this handle's implementation, or null. */
    Memory table(String name, int size) {
        return plugin().table(name, size);
    }

    /** The hk.blas1/1 ops on this handle (NOT_SUPPORTED when the plugin has no such table). */
    public Blas1 blas1() {
        Blas1 b = blas1;
        if (b == null) {
            Memory t = table("hk.blas1/1", Layout.BLAS1);
            if (t == null)
                throw new HandlekitException(Status.NOT_SUPPORTED, plugin().name()
                                             + " has no hk.blas1/1 table");
            blas1 = b = new Blas1(this, t);
        }
        return b;
    }

    /** The hk.memory/1 ops on this handle. */
    public org.handlekit.Memory memory() {
        org.handlekit.Memory m = memory;
        if (m == null) {
            Memory t = table("hk.memory/1", Layout.MEMORY);
            if (t == null)
                throw new HandlekitException(Status.NOT_SUPPORTED, plugin().name()
                                             + " has no hk.memory/1 table");
            memory = m = new org.handlekit.Memory(this, t);
        }
        return m;
    }

    /** The hk.kernels/1 ops on this handle (a CUDA plugin's). */
    public Kernels kernels() {
        Kernels k = kernels;
        if (k == null) {
            Memory t = table("hk.kernels/1", Layout.KERNELS);
            if (t == null)
                throw new HandlekitException(Status.NOT_SUPPORTED, plugin().name()
                                             + " has no hk.kernels/1 table");
            kernels = k = new Kernels(this, t);
        }
        return k;
    }

    /** True once close() began. */
    public boolean isClosed() {
        return calls.get() < 0;
    }

    /**
     * Unloads the kernel libraries loaded through the handle, waits for the
     * calls in flight on it, then destroys it. Later calls throw
     * INVALID_HANDLE; closing again does nothing. The plugin's failure of
     * handle_destroy is thrown (the handle is gone anyway), else the first
     * failed unload.
     */
    @Override
    public void close() {
        Kernels k = kernels;
        HandlekitException unload = k != null && !isClosed() ? k.unloadAll() : null;
        for (;;) {
            long c = calls.get();
            if (c < 0)
                return;
            if (calls.compareAndSet(c, c | CLOSED))
                break;
        }
        while (calls.get() != CLOSED)
            Thread.onSpinWait();
        state.done = true;
        cleanable.clean();
        int st = state.destroy();
        if (st != Status.OK)
            throw new HandlekitException(st, "handle_destroy failed");
        if (unload != null)
            throw unload;
    }
}
