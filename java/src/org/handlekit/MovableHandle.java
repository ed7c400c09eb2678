package org.handlekit;

import com.sun.jna.Memory;

/**
 * A movable handle (plugin_api/hk_swap.h): a handle made through the loader,
 * whose calls go to the implementation it is bound to at that moment, so that
 * {@link Loader#swap} can move it to another plugin (another build) while
 * other threads keep calling. Its ops, settings and tables are a
 * {@link Handle}'s, through the loader's forwarding vtable and tables.
 */
public final class MovableHandle extends Handle {
    /** Destroys the movable handle (hk_mhandle_destroy). */
    static final class MState extends State {
        final long mh;

        MState(long mh, Plugin plugin) {
            super(0, 0, plugin);
            this.mh = mh;
        }

        @Override
        int destroy() {
            return Lib.hk_mhandle_destroy(mh);
        }
    }

    private final Loader loader;
    private final long mh;

    private MovableHandle(Loader loader, long mh) {
        super(new Plugin.Vtable(Lib.hk_mhandle_vtable()), Lib.hk_mhandle_handle(mh),
              new MState(mh, null));
        this.loader = loader;
        this.mh = mh;
    }

    MovableHandle(Loader loader, String request, Plugin on, int device) {
        this(loader, create(loader, request, on, device));
    }

    private static long create(Loader loader, String request, Plugin on, int device) {
        long[] out = new long[1];
        Memory info = Handle.createInfo(device, false);
        int st = on != null ? Lib.hk_mhandle_create_on(on.ptr(), info, out)
                : Lib.hk_mhandle_create(loader.ptr(), request, info, out);
        if (st != Status.OK) {
            Memory buf = new Memory(1024);
            Lib.hk_mhandle_last_error_copy(0, buf, 1024);
            String why = buf.getString(0);
            throw new HandlekitException(st, why.isEmpty() ? loader.lastError() : why);
        }
        return out[0];
    }

    /** The plugin the handle is bound to now. */
    @Override
    public Plugin plugin() {
        return loader.wrap(Lib.address(state().getPointer(Layout.MHANDLE_STATE_PLUGIN)));
    }

    /** How often a swap moved this handle. */
    public long generation() {
        return state().getLong(Layout.MHANDLE_STATE_GENERATION);
    }

    private Memory state() {
        Memory s = Lib.sized(Layout.MHANDLE_STATE);
        enter();
        try {
            int st = Lib.hk_mhandle_state(mh, s);
            if (st != Status.OK)
                throw new HandlekitException(st, "hk_mhandle_state failed");
        } finally {
            exit();
        }
        return s;
    }

    @Override
    Memory table(String name, int size) {
        Memory m = new Memory(size);
        m.clear();
        int st = Lib.hk_mhandle_get_table(name, m, size);
        if (st == Status.NOT_FOUND)
            return null;
        if (st != Status.OK)
            throw new HandlekitException(st, "hk_mhandle_get_table " + name);
        return m;
    }

    @Override
    String text(long h) {
        Memory buf = new Memory(1024);
        Lib.hk_mhandle_last_error_copy(mh, buf, 1024);
        return buf.getString(0);
    }
}
