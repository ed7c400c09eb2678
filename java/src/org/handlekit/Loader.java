package org.handlekit;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;

import java.lang.ref.Cleaner;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A plugin loader (hk_loader_t): scan, open, reports, selection with version
 * ranges and its explanation, movable handles and swap.
 *
 * Thread rules are the C API's (plugin_api/hk_loader.h): every method may be
 * called from any thread, but {@link #close()} from one thread while no other
 * uses the loader, its plugins or their handles.
 */
public final class Loader implements AutoCloseable {
    static final Cleaner CLEANER = Cleaner.create();

    /** One candidate file the loader looked at (hk_load_report_t). */
    public record LoadReport(String path, String stage, String status, String reason,
                             boolean loaded) {
    }

    /** One plugin of the name a request names, and why it was or was not chosen. */
    public record SelectEntry(Plugin plugin, String verdict, String reason) {
    }

    /** What hk_loader_swap_state says: the phase's name and what is live now. */
    public record SwapState(String phase, long handles, long inflight, long draining,
                            long libraries) {
    }

    /** Options of hk_loader_create; every field has the C default until set. */
    public static final class Options {
        String defaultDir;
        boolean ignoreEnv;
        boolean isolationOff;

        /** The directory searched after HK_PLUGIN_PATH. */
        public Options defaultDir(String dir) {
            defaultDir = dir;
            return this;
        }

        /** Do not read HK_PLUGIN_PATH. */
        public Options ignoreEnv(boolean ignore) {
            ignoreEnv = ignore;
            return this;
        }

        /** Negotiate candidates in this process instead of the probe process. */
        public Options isolationOff(boolean off) {
            isolationOff = off;
            return this;
        }
    }

    private static final class State implements Runnable {
        volatile long ptr;

        State(long ptr) {
            this.ptr = ptr;
        }

        @Override
        public void run() { // the safety net: a loader never closed
            long p = ptr;
            ptr = 0;
            if (p != 0)
                Lib.hk_loader_destroy(p);
        }
    }

    private final State state;
    private final Cleaner.Cleanable cleanable;
    private final ConcurrentHashMap<Long, Plugin> plugins = new ConcurrentHashMap<>();

    /** A loader with the default options (the installed plugin directory, HK_PLUGIN_PATH first). */
    public Loader() {
        this(new Options());
    }

    public Loader(Options o) {
        Memory name = o.defaultDir == null ? null : cstr(Lib.cstring(o.defaultDir, "defaultDir"));
        Memory opts = Lib.sized(Layout.LOADER_OPTIONS);
        if (name != null)
            opts.setPointer(Layout.LOADER_OPTIONS_DEFAULT_DIR, name);
        opts.setInt(Layout.LOADER_OPTIONS_IGNORE_ENV, o.ignoreEnv ? 1 : 0);
        opts.setInt(Layout.LOADER_OPTIONS_ISOLATION, o.isolationOff ? 1 : 0);
        long[] out = new long[1];
        int st = Lib.hk_loader_create(opts, out);
        java.lang.ref.Reference.reachabilityFence(name); // read through opts during the call
        if (st != Status.OK)
            throw new HandlekitException(st, "hk_loader_create refused the options");
        state = new State(out[0]);
        cleanable = CLEANER.register(this, state);
    }

    static Memory cstr(String s) {
        byte[] b = s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        Memory m = new Memory(b.length + 1);
        m.write(0, b, 0, b.length);
        m.setByte(b.length, (byte) 0);
        return m;
    }

    long ptr() {
        long p = state.ptr;
        if (p == 0)
            throw new HandlekitException(Status.INVALID_HANDLE, "the loader was closed");
        return p;
    }

    void check(int st) {
        if (st != Status.OK)
            throw new HandlekitException(st, Lib.hk_loader_last_error(ptr()));
    }

    /**
     * hk_loader_destroy. Throws BUSY, and does nothing, while a handle of one of
     * its plugins or a movable handle lives. Closing twice does nothing.
     */
    @Override
    public void close() {
        long p = state.ptr;
        if (p == 0)
            return;
        int st = Lib.hk_loader_destroy(p);
        if (st != Status.OK)
            throw new HandlekitException(st, st == Status.BUSY
                    ? "the loader has live handles or held plugins" : "hk_loader_destroy failed");
        state.ptr = 0;
        cleanable.clean();
    }

    /** The loader library's version and plugin ABI range. */
    public static String version() {
        return Lib.hk_loader_version(null, null);
    }

    /** Loads every plugin of the search path; refused files are in {@link #reports()}. */
    public Loader scan() {
        check(Lib.hk_loader_scan(ptr()));
        return this;
    }

    /** Loads one plugin file; the loader's reason when it refuses it. */
    public Plugin open(String path) {
        long[] out = new long[1];
        check(Lib.hk_loader_open(ptr(), Lib.cstring(path, "path"), out));
        return wrap(out[0]);
    }

    Plugin wrap(long p) {
        return p == 0 ? null : plugins.computeIfAbsent(p, k -> new Plugin(this, k));
    }

    /** Every candidate's report, in the order the loader met them. */
    public List<LoadReport> reports() {
        long l = ptr();
        long n = Lib.hk_loader_report_count(l);
        List<LoadReport> out = new ArrayList<>();
        for (long i = 0; i < n; i++) {
            Pointer r = Lib.ptr(Lib.hk_loader_report(l, i));
            if (r == null)
                break;
            Pointer path = r.getPointer(Layout.LOAD_REPORT_PATH),
                    reason = r.getPointer(Layout.LOAD_REPORT_REASON);
            out.add(new LoadReport(path == null ? "" : path.getString(0),
                                   Lib.hk_load_stage_name(r.getInt(Layout.LOAD_REPORT_STAGE)),
                                   Status.name(r.getInt(Layout.LOAD_REPORT_STATUS)),
                                   reason == null ? "" : reason.getString(0),
                                   r.getPointer(Layout.LOAD_REPORT_PLUGIN) != null));
        }
        return Collections.unmodifiableList(out);
    }

    /** The loaded plugins in load order. */
    public List<Plugin> plugins() {
        long l = ptr();
        long n = Lib.hk_loader_plugin_count(l);
        List<Plugin> out = new ArrayList<>();
        for (long i = 0; i < n; i++)
            out.add(wrap(Lib.hk_loader_plugin(l, i)));
        return Collections.unmodifiableList(out);
    }

    /** The first loaded plugin of this name, or null. */
    public Plugin find(String name) {
        return wrap(Lib.hk_loader_find(ptr(), Lib.cstring(name, "name")));
    }

    /**
     * hk_loader_select: the plugin a request ("NAME", "NAME@RANGE" such as
     * "hk-cpu@^1" or "hk-cuda@&gt;=1.0, &lt;2", or a path) resolves to.
     */
    public Plugin select(String request) {
        long[] out = new long[1];
        check(Lib.hk_loader_select(ptr(), Lib.cstring(request, "request"), out));
        return wrap(out[0]);
    }

    /** hk_loader_select_explain: every plugin of the request's name with its verdict. */
    public List<SelectEntry> explain(String request) {
        final int entry = Layout.SELECT_ENTRY;
        long[] count = new long[1];
        String req = Lib.cstring(request, "request");
        explained(Lib.hk_loader_select_explain(ptr(), req, null, 0, count));
        int cap = (int) Math.max(count[0], 1);
        Memory m = new Memory((long) cap * entry);
        m.clear();
        explained(Lib.hk_loader_select_explain(ptr(), req, m, cap, count));
        List<SelectEntry> out = new ArrayList<>();
        for (int i = 0; i < Math.min(cap, count[0]); i++) {
            long base = (long) i * entry;
            out.add(new SelectEntry(wrap(Lib.address(m.getPointer(base))),
                                    Lib.hk_select_verdict_name(m.getInt(base + Layout.SELECT_ENTRY_VERDICT)),
                                    m.getString(base + Layout.SELECT_ENTRY_REASON)));
        }
        return Collections.unmodifiableList(out);
    }

    /** NOT_FOUND (nothing chosen) is an answer of explain, not a failure. */
    private void explained(int st) {
        if (st != Status.NOT_FOUND)
            check(st);
    }

    /** The loader's last failure as one line ("" when none). */
    public String lastError() {
        return Lib.hk_loader_last_error(ptr());
    }

    /** A movable handle (hk_mhandle_create) on the plugin request resolves to. */
    public MovableHandle movableHandle(String request) {
        return movableHandle(request, Handle.DEVICE_CURRENT);
    }

    public MovableHandle movableHandle(String request, int device) {
        return new MovableHandle(this, Lib.cstring(request, "request"), null, device);
    }

    /**
     * hk_loader_swap: verifies the plugin request resolves to and moves every
     * movable handle of this loader to it (only those now on a plugin named
     * from, when from is not null); returns that plugin. The loader's reason
     * when refused, nothing moved then. Other threads may go on calling
     * through the movable handles meanwhile.
     */
    public Plugin swap(String request, String from) {
        Memory fromText = from == null ? null : cstr(Lib.cstring(from, "from"));
        Memory opts = Lib.sized(Layout.SWAP_OPTIONS);
        if (fromText != null)
            opts.setPointer(Layout.SWAP_OPTIONS_FROM, fromText);
        long[] to = new long[1];
        int st = Lib.hk_loader_swap(ptr(), Lib.cstring(request, "request"), opts, to);
        java.lang.ref.Reference.reachabilityFence(fromText); // read through opts
        check(st);
        return wrap(to[0]);
    }

    public Plugin swap(String request) {
        return swap(request, null);
    }

    /** hk_loader_swap_state. */
    public SwapState swapState() {
        Memory s = Lib.sized(Layout.SWAP_STATE);
        check(Lib.hk_loader_swap_state(ptr(), s));
        return new SwapState(Lib.hk_swap_phase_name(s.getInt(Layout.SWAP_STATE_PHASE)),
                             s.getLong(Layout.SWAP_STATE_HANDLES),
                             s.getLong(Layout.SWAP_STATE_INFLIGHT),
                             s.getLong(Layout.SWAP_STATE_DRAINING),
                             s.getLong(Layout.SWAP_STATE_LIBRARIES));
    }

    /**
     * hk_loader_swap_stats: every statistic the loader library knows, in its
     * order, by the library's own names ("swaps", "refused",
     * "last_switch_ns", ...; times in nanoseconds).
     */
    public Map<String, Long> swapStats() {
        long[] known = new long[1];
        check(Lib.hk_loader_swap_stats(ptr(), null, 0, known));
        long[] values = new long[(int) known[0]];
        check(Lib.hk_loader_swap_stats(ptr(), values, values.length, null));
        Map<String, Long> out = new LinkedHashMap<>();
        for (int i = 0; i < values.length; i++)
            out.put(Lib.hk_swap_stat_name(i), values[i]);
        return Collections.unmodifiableMap(out);
    }
}
