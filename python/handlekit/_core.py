"""Loader, plugins and handles over libhkloader.so."""
import ctypes
import os
import threading
import warnings
import weakref
from ctypes import byref, c_char_p, c_void_p

from . import _abi, _arrays, _limits
from ._lib import lib

HOST, CUDA = _arrays.HOST, _arrays.CUDA


class HandlekitError(Exception):
    """A handlekit call failed. .status is the Status (an IntEnum: .name and the
    number; a plain int for a status newer than this package), .reason the
    line the plugin or the loader left about it (a request the loader cannot
    resolve adds a line for each candidate of that name it refused)."""

    def __init__(self, status, reason=''):
        status = to_status(status)
        self.status = status
        self.reason = reason or ''
        name = status.name if isinstance(status, _abi.Status) else 'UNKNOWN'
        text = self.reason or _abi.STATUS_MESSAGES.get(int(status), 'unknown status')
        super().__init__('%s (%d): %s' % (name, int(status), text))


def to_status(value):
    """value as a Status, or as an int when this package does not know it."""
    try:
        return _abi.Status(value)
    except ValueError:
        return int(value)


def _text(b):
    return b.decode('utf-8', 'replace') if b else ''


def stream_address(stream):
    """A CUstream as an int from None, an int, a ctypes pointer, or an object
    with __cuda_stream__ (CUDA Python), .cuda_stream (PyTorch), .ptr (CuPy) or
    .handle (Numba)."""
    if stream is None:
        return 0
    if hasattr(stream, '__cuda_stream__'):
        return _limits.address(stream.__cuda_stream__()[1], 'the stream')
    for attr in ('cuda_stream', 'ptr', 'handle'):
        if hasattr(stream, attr):
            stream = getattr(stream, attr)
            break
    if isinstance(stream, c_void_p):
        return stream.value or 0
    try:
        return _limits.address(stream, 'the stream')
    except TypeError:
        raise TypeError('a stream is None, an int (CUstream) or an object with __cuda_stream__, '
                        '.cuda_stream or .ptr; not %s' % type(stream).__name__) from None


class LoadReport:
    """One candidate file the loader looked at (hk_load_report_t)."""

    def __init__(self, r):
        self.path = _text(r.path)
        self.stage = _abi.STAGE_NAMES[r.stage] if 0 <= r.stage < 6 else str(r.stage)
        self.status = to_status(r.status)
        self.reason = _text(r.reason)
        self.loaded = bool(r.plugin)

    def __repr__(self):
        if self.loaded:
            return '<LoadReport %s loaded>' % self.path
        return '<LoadReport %s %s %s: %s>' % (self.path, self.stage, self.status.name
                                              if hasattr(self.status, 'name') else self.status,
                                              self.reason)


class Loader:
    """A plugin loader (hk_loader_t). default_dir None: the shared library's own
    plugin directory (<libdir>/handlekit/plugins); HK_PLUGIN_PATH is searched
    first unless ignore_env. log(level, message) gets the loader's and the
    plugins' log lines. Call scan() to load every plugin found, or open(path)."""

    def __init__(self, default_dir=None, ignore_env=False, log=None):
        self._lib = lib()
        opts = _abi.LoaderOptions(size=ctypes.sizeof(_abi.LoaderOptions))
        if default_dir is not None:
            self._default_dir = _limits.cstring(default_dir, 'default_dir', path=True)
            opts.default_dir = self._default_dir
        opts.ignore_env = 1 if ignore_env else 0
        self._log = None
        if log is not None and not callable(log):
            # Found out only at the first log line, in a ctypes callback, where
            # the exception cannot reach the caller.
            raise TypeError('log must be callable as log(level, message), not %s'
                            % type(log).__name__)
        if log is not None:
            def _log(user, level, msg, _fn=log):
                _fn(level, _text(msg))
            self._log = _abi.log_fn(_log)  # kept alive as long as the loader
            opts.log = self._log
        ptr = c_void_p()
        st = self._lib.hk_loader_create(byref(opts), byref(ptr))
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'hk_loader_create refused the options')
        self._ptr = ptr.value
        self._ignore_env = bool(ignore_env)
        self._env_warned = False
        self._plugins = {}
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, self._lib.hk_loader_destroy, self._ptr)

    def _p(self):
        if self._ptr is None:
            raise HandlekitError(_abi.Status.INVALID_HANDLE, 'the loader was closed')
        return self._ptr

    def close(self):
        """hk_loader_destroy: closes the modules and frees the loader; its
        plugins are unusable afterwards. HandlekitError BUSY (and nothing
        done) while a Handle of one of its plugins or a movable handle lives."""
        if not self._finalizer.alive:
            return
        from . import _swap
        _swap._cancel_orphans(self)
        st = self._lib.hk_loader_destroy(self._ptr)
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'the loader has live handles or held plugins'
                                 if st == _abi.Status.BUSY else 'hk_loader_destroy failed')
        self._finalizer.detach()
        self._ptr = None

    def mhandle(self, request, device=None, checked=False):
        """A new MovableHandle (hk_mhandle_create) on the plugin request
        resolves to ("NAME", "NAME@RANGE", a path, or a Plugin of this
        loader): a handle that a swap moves to another implementation."""
        from ._swap import MovableHandle
        return MovableHandle(self, request, device=device, checked=checked)

    def swap(self, request, from_name=None, hold_after_us=0, verify=None):
        """hk_loader_swap: moves the movable handles (only those whose plugin
        is named from_name, when given) to the plugin request resolves to,
        after verifying it (its self-check or the BLAS1 workload, then
        verify(plugin_address, handle_address) when given: raise to refuse);
        returns that Plugin. HandlekitError with the loader's reason when
        refused (nothing moved then)."""
        from . import _swap
        return _swap.swap(self, request, from_name, hold_after_us, verify)

    def swap_prepare(self, request, from_name=None, hold_after_us=0):
        """hk_loader_swap_prepare: everything a swap does before the switch;
        returns a PreparedSwap to commit() or cancel() from this thread (a
        with block cancels it unless committed, and so does dropping it)."""
        from . import _swap
        return _swap.PreparedSwap(self, request, from_name, hold_after_us)

    def swap_state(self):
        """hk_loader_swap_state as a dict (phase as a name, counts, times in ns)."""
        from . import _swap
        return _swap.loader_state(self)

    def scan(self):
        """Loads every plugin of the search path; returns self. Refused candidates
        are in reports(), not raised."""
        st = self._lib.hk_loader_scan(self._p())
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.last_error)
        self._warn_env()
        return self

    def _warn_env(self):
        """Says, once per loader, what the environment changed: a refused
        directory of HK_PLUGIN_PATH, and each report of HK_PLUGIN_PATH,
        HK_PLUGIN_PIN or HK_PLUGIN_EXCLUDE (a malformed entry, or a variable
        ignored under elevated privileges), a warnings.warn each."""
        if self._env_warned:
            return
        self._env_warned = True
        names = ('HK_PLUGIN_PATH', 'HK_PLUGIN_PIN', 'HK_PLUGIN_EXCLUDE')
        dirs = [] if self._ignore_env else \
            [d for d in os.environ.get('HK_PLUGIN_PATH', '').split(':') if d]
        for r in self.reports:
            if r.loaded or r.stage != 'scan':
                continue
            if r.path in names:
                warnings.warn('%s: %s' % (r.path, r.reason), stacklevel=3)
            elif r.path in dirs:
                warnings.warn('HK_PLUGIN_PATH directory %s refused, nothing in it is '
                              'loaded: %s' % (r.path, r.reason), stacklevel=3)

    def open(self, path):
        """Loads one plugin file; HandlekitError with the loader's reason on refusal."""
        out = c_void_p()
        st = self._lib.hk_loader_open(self._p(), _limits.cstring(path, 'path', path=True),
                                      byref(out))
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.last_error)
        return self._wrap(out.value)

    def _wrap(self, ptr):
        with self._lock:
            p = self._plugins.get(ptr)
            if p is None:
                p = self._plugins[ptr] = Plugin(self, ptr)
            return p

    @property
    def plugins(self):
        """Loaded plugins in load order."""
        ptr = self._p()
        n = self._lib.hk_loader_plugin_count(ptr)
        return [self._wrap(self._lib.hk_loader_plugin(ptr, i)) for i in range(n)]

    @property
    def reports(self):
        ptr = self._p()
        n = self._lib.hk_loader_report_count(ptr)
        return [LoadReport(self._lib.hk_loader_report(ptr, i).contents) for i in range(n)]

    def find(self, name):
        """The first loaded plugin of this name, or None."""
        ptr = self._lib.hk_loader_find(self._p(), _limits.cstring(name, 'name'))
        return self._wrap(ptr) if ptr else None

    def select(self, request):
        """hk_loader_select: the loaded plugin a request ("NAME", "NAME@RANGE",
        or a path) resolves to, with HK_PLUGIN_PIN and HK_PLUGIN_EXCLUDE
        applied; HandlekitError naming every candidate and why otherwise."""
        out = c_void_p()
        st = self._lib.hk_loader_select(self._p(), _limits.cstring(request, 'request', path=True),
                                        byref(out))
        self._warn_env()
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.last_error)
        return self._wrap(out.value)

    @property
    def last_error(self):
        return _text(self._lib.hk_loader_last_error(self._p()))


class Plugin:
    """A loaded plugin: name, version, path, ABI, flags, tables, and handles.

    A swap (Loader.swap) may close the module of a plugin nothing uses and
    open it again later: the plugin's code is reached only through what the
    loader gives at that moment, and a Handle holds the plugin (acquire) for
    as long as it lives, so that no swap closes the module under it."""

    def __init__(self, loader, ptr):
        self.loader = loader  # keeps the loader, and so the module, alive
        self._ptr = ptr
        L = loader._lib
        self.name = _text(L.hk_plugin_name(ptr))
        self.version = _text(L.hk_plugin_version(ptr))
        self.path = _text(L.hk_plugin_path(ptr))
        self.abi = _abi.abi_split(L.hk_plugin_abi(ptr))
        self.flags = L.hk_plugin_flags(ptr)

    def __repr__(self):
        return '<Plugin %s %s ABI %d.%d %s>' % (self.name, self.version, self.abi[0],
                                                self.abi[1], self.path)

    @property
    def memory(self):
        """HOST or CUDA when the plugin says (ABI 1.2 flags), else None."""
        if self.flags & _abi.PLUGIN_MEMORY_HOST:
            return HOST
        if self.flags & _abi.PLUGIN_MEMORY_CUDA:
            return CUDA
        return None

    def _p(self):
        self.loader._p()  # a closed loader freed its plugins
        return self._ptr

    @property
    def vtable(self):
        """A copy of the loader's copy of the vtable, read now: its slots are
        all NULL while a swap has the module closed. Its function pointers are
        valid while the plugin is held (acquire(), or a live Handle)."""
        return _abi.clear_newer(_abi.read_struct(_abi.Vtable,
                                                 self.loader._lib.hk_plugin_vtable(self._p())),
                                self.abi[1])

    def acquire(self):
        """hk_plugin_acquire: no swap closes the module, and the loader is not
        destroyed, until release()."""
        L = self.loader._lib
        if hasattr(L, 'hk_plugin_acquire'):
            L.hk_plugin_acquire(self._p())

    def release(self):
        L = self.loader._lib
        if hasattr(L, 'hk_plugin_release') and self.loader._ptr is not None:
            L.hk_plugin_release(self._ptr)

    @property
    def tables(self):
        """Names of the function tables the plugin offers."""
        self.acquire()
        try:
            names, fn = [], self.vtable.enum_tables
            if not fn:
                return names
            name = c_char_p()
            while fn(len(names), byref(name)) == _abi.Status.OK:
                names.append(_text(name.value))
            return names
        finally:
            self.release()

    def table(self, name, cls):
        """A zeroed cls holding min(the plugin's size, sizeof(cls)) bytes of the
        table, through hk_plugin_get_table when the loader has it; None when the
        plugin has no such table. Its function pointers are valid while the
        plugin is held (acquire(), or a live Handle of it)."""
        L = self.loader._lib
        bname = _limits.cstring(name, 'table name')
        if hasattr(L, 'hk_plugin_get_table'):
            out = cls()
            st = L.hk_plugin_get_table(self._p(), bname, byref(out), ctypes.sizeof(cls))
            if st == _abi.Status.NOT_FOUND:
                return None
            if st != _abi.Status.OK:
                raise HandlekitError(st, self.loader.last_error)
            return out
        ptr, vt = c_void_p(), self.vtable
        if not vt.get_table or vt.get_table(bname, byref(ptr)) != 0 or not ptr.value:
            return None
        return _abi.clear_newer(_abi.read_struct(cls, ptr.value), self.abi[1])

    def handle(self, device=None, checked=False):
        """A new Handle (use it in a with block, or call close())."""
        from ._handle import Handle
        return Handle(self, device=device, checked=checked)

    def swap_state(self):
        """hk_plugin_swap_state as a dict: module ('open', 'closed',
        'still-mapped'), handles, inflight, draining, closes, reopens."""
        from . import _swap
        return _swap.plugin_state(self)
