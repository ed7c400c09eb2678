package org.handlekit;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A loaded plugin: name, version, path, negotiated ABI, flags and tables, and
 * the maker of {@link Handle}s. Owned by its {@link Loader}: unusable once the
 * loader is closed. Thread-safe.
 */
public final class Plugin {
    /** hk_plugin_flags bits (plugin_api/hk_abi.h, hk_swap.h). */
    public static final int UNLOAD_SAFE = 0x1, MEMORY_HOST = 0x2, MEMORY_CUDA = 0x4;

    private final Loader loader;
    private final long ptr;
    private final String name, version, path;
    private final int abi, flags;

    Plugin(Loader loader, long ptr) {
        this.loader = loader;
        this.ptr = ptr;
        name = Lib.hk_plugin_name(ptr);
        version = Lib.hk_plugin_version(ptr);
        path = Lib.hk_plugin_path(ptr);
        abi = Lib.hk_plugin_abi(ptr);
        flags = Lib.hk_plugin_flags(ptr);
    }

    public Loader loader() {
        return loader;
    }

    public String name() {
        return name;
    }

    public String version() {
        return version;
    }

    public String path() {
        return path;
    }

    /** The negotiated ABI major and minor. */
    public int abiMajor() {
        return abi >>> 16;
    }

    public int abiMinor() {
        return abi & 0xffff;
    }

    public int flags() {
        return flags;
    }

    /** True when the plugin's memory is host memory (hk-cpu): its ops take direct buffers. */
    public boolean hostMemory() {
        return (flags & MEMORY_HOST) != 0;
    }

    long ptr() {
        loader.ptr(); // a closed loader freed its plugins
        return ptr;
    }

    void acquire() {
        Lib.hk_plugin_acquire(ptr());
    }

    void release() {
        if (!loaderClosed())
            Lib.hk_plugin_release(ptr);
    }

    private boolean loaderClosed() {
        try {
            loader.ptr();
            return false;
        } catch (HandlekitException e) {
            return true;
        }
    }

    /** The loader's copy of the vtable, read now (all slots 0 while a swap has the module closed). */
    Vtable vtable() {
        return new Vtable(Lib.hk_plugin_vtable(ptr()));
    }

    /** A copy of the table name of size bytes, or null when the plugin has none. */
    Memory table(String tableName, int size) {
        Memory m = new Memory(size);
        m.clear();
        int st = Lib.hk_plugin_get_table(ptr(), tableName, m, size);
        if (st == Status.NOT_FOUND)
            return null;
        loader.check(st);
        return m;
    }

    /** The names of the function tables the plugin offers ("hk.blas1/1", ...). */
    public List<String> tables() {
        acquire();
        try {
            List<String> out = new ArrayList<>();
            long fn = vtable().enumTables;
            if (fn == 0)
                return out;
            Memory name = new Memory(8);
            while (Lib.call(fn, (long) out.size(), name) == Status.OK)
                out.add(name.getPointer(0).getString(0));
            return Collections.unmodifiableList(out);
        } finally {
            release();
        }
    }

    /** A new handle on the default device (the context contract's: what is current). */
    public Handle handle() {
        return new Handle(this, Handle.DEVICE_CURRENT, false);
    }

    /** A new handle on device (Handle.DEVICE_CURRENT or an ordinal); checked: HK_CREATE_CHECKED. */
    public Handle handle(int device, boolean checked) {
        return new Handle(this, device, checked);
    }

    @Override
    public String toString() {
        return name + " " + version + " (ABI " + abiMajor() + "." + abiMinor() + ", " + path + ")";
    }

    /** The slots of hk_vtable_t that the binding calls, as addresses (0: absent). */
    static final class Vtable {
        final long handleCreate, handleDestroy, setStream, getStream, setPointerMode,
                getPointerMode, lastError, enumTables, handleInfo, synchronize, lastErrorCopy;

        Vtable(long address) {
            Pointer p = Lib.ptr(address);
            long size = p == null ? 0 : p.getLong(0);
            handleCreate = slot(p, size, Layout.VT_HANDLE_CREATE);
            handleDestroy = slot(p, size, Layout.VT_HANDLE_DESTROY);
            setStream = slot(p, size, Layout.VT_SET_STREAM);
            getStream = slot(p, size, Layout.VT_GET_STREAM);
            setPointerMode = slot(p, size, Layout.VT_SET_POINTER_MODE);
            getPointerMode = slot(p, size, Layout.VT_GET_POINTER_MODE);
            lastError = slot(p, size, Layout.VT_LAST_ERROR);
            enumTables = slot(p, size, Layout.VT_ENUM_TABLES);
            handleInfo = slot(p, size, Layout.VT_HANDLE_INFO);
            synchronize = slot(p, size, Layout.VT_SYNCHRONIZE);
            lastErrorCopy = slot(p, size, Layout.VT_LAST_ERROR_COPY);
        }

        private static long slot(Pointer p, long size, int offset) {
            return p == null || size < offset + 8 ? 0 : p.getLong(offset);
        }
    }
}
