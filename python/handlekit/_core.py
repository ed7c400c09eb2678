"""Loader, plugins and handles over libhkloader.so."""
import ctypes
import math
import os
import threading
import weakref
from ctypes import byref, c_char_p, c_int, c_void_p

from . import _abi, _arrays, _limits
from ._lib import lib

HOST, CUDA = _arrays.HOST, _arrays.CUDA
_POINTER_MODES = {'host': _abi.POINTER_MODE_HOST, 'device': _abi.POINTER_MODE_DEVICE}


class HandlekitError(Exception):
    """A handlekit call failed. .status is the Status (an IntEnum: .name and the
    number; a plain int for a status newer than this package), .reason the one
    line the plugin or the loader left about it."""

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
        self._plugins = {}
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, self._lib.hk_loader_destroy, self._ptr)

    def scan(self):
        """Loads every plugin of the search path; returns self. Refused candidates
        are in reports(), not raised."""
        st = self._lib.hk_loader_scan(self._ptr)
        if st != _abi.Status.OK:
            raise HandlekitError(st, self.last_error)
        return self

    def open(self, path):
        """Loads one plugin file; HandlekitError with the loader's reason on refusal."""
        out = c_void_p()
        st = self._lib.hk_loader_open(self._ptr, _limits.cstring(path, 'path', path=True),
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
        n = self._lib.hk_loader_plugin_count(self._ptr)
        return [self._wrap(self._lib.hk_loader_plugin(self._ptr, i)) for i in range(n)]

    @property
    def reports(self):
        n = self._lib.hk_loader_report_count(self._ptr)
        return [LoadReport(self._lib.hk_loader_report(self._ptr, i).contents) for i in range(n)]

    def find(self, name):
        """The first loaded plugin of this name, or None."""
        ptr = self._lib.hk_loader_find(self._ptr, _limits.cstring(name, 'name'))
        return self._wrap(ptr) if ptr else None

    @property
    def last_error(self):
        return _text(self._lib.hk_loader_last_error(self._ptr))


class Plugin:
    """A loaded plugin: name, version, path, ABI, flags, tables, and handles."""

    def __init__(self, loader, ptr):
        self.loader = loader  # keeps the loader, and so the module, alive
        self._ptr = ptr
        L = loader._lib
        self.name = _text(L.hk_plugin_name(ptr))
        self.version = _text(L.hk_plugin_version(ptr))
        self.path = _text(L.hk_plugin_path(ptr))
        self.abi = _abi.abi_split(L.hk_plugin_abi(ptr))
        self.flags = L.hk_plugin_flags(ptr)
        # The loader's copy of the vtable; its size field is what came from the plugin.
        self.vtable = _abi.clear_newer(_abi.read_struct(_abi.Vtable, L.hk_plugin_vtable(ptr)),
                                       self.abi[1])
        self._tables = {}

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

    @property
    def tables(self):
        """Names of the function tables the plugin offers."""
        names, fn = [], self.vtable.enum_tables
        if not fn:
            return names
        name = c_char_p()
        while fn(len(names), byref(name)) == _abi.Status.OK:
            names.append(_text(name.value))
        return names

    def table(self, name, cls):
        """A zeroed cls holding min(the plugin's size, sizeof(cls)) bytes of the
        table, through hk_plugin_get_table when the loader has it; None when the
        plugin has no such table."""
        key = (name, cls)
        if key in self._tables:
            return self._tables[key]
        L = self.loader._lib
        bname = _limits.cstring(name, 'table name')
        if hasattr(L, 'hk_plugin_get_table'):
            out = cls()
            st = L.hk_plugin_get_table(self._ptr, bname, byref(out), ctypes.sizeof(cls))
            if st == _abi.Status.NOT_FOUND:
                out = None
            elif st != _abi.Status.OK:
                raise HandlekitError(st, self.loader.last_error)
        else:
            ptr = c_void_p()
            if not self.vtable.get_table or self.vtable.get_table(bname, byref(ptr)) != 0 \
                    or not ptr.value:
                out = None
            else:
                out = _abi.clear_newer(_abi.read_struct(cls, ptr.value), self.abi[1])
        self._tables[key] = out
        return out

    def handle(self, device=None, checked=False):
        """A new Handle (use it in a with block, or call close())."""
        return Handle(self, device=device, checked=checked)


def _destroy(fn, ptr):
    fn(ptr)


class Handle:
    """A plugin handle (hk_handle_t) and the hk.blas1/1 ops on array objects.

    device: None for the context contract's default (what is current), or an
    ordinal. checked: HK_CREATE_CHECKED. Host memory (NumPy, or a CPU DLPack
    tensor) for a host plugin such as hk-cpu; CUDA memory (anything with
    __cuda_array_interface__, or a CUDA DLPack tensor) for a CUDA plugin."""

    def __init__(self, plugin, device=None, checked=False):
        self.plugin = plugin
        vt = self._vt = plugin.vtable
        info = _abi.CreateInfo(ctypes.sizeof(_abi.CreateInfo),
                               _abi.DEVICE_CURRENT if device is None
                               else _limits.int32(device, 'device'),
                               _abi.CREATE_CHECKED if checked else 0)
        ptr = c_void_p()
        st = vt.handle_create(byref(info), byref(ptr))
        if st != _abi.Status.OK:
            raise HandlekitError(st, _text(vt.last_error(None)))
        self._ptr = ptr.value
        self._stream_obj = None
        self._finalizer = weakref.finalize(self, _destroy, vt.handle_destroy, self._ptr)
        self.memory = plugin.memory
        self.device = None
        if vt.handle_info:
            hi = self.info()
            self.device = hi['device'] if hi['device'] >= 0 else None
            if self.memory is None:
                self.memory = HOST if hi['device'] < 0 else CUDA
        if self.memory is None:
            self.memory = CUDA
        b = plugin.table(_abi.TABLE_BLAS1_V1, _abi.Blas1V1)
        self._blas1 = b

    # ---- lifetime ----
    def close(self):
        """Destroys the handle (waits for its work); later calls raise."""
        if self._finalizer.alive:
            fn, ptr = self._vt.handle_destroy, self._ptr
            self._finalizer.detach()
            self._ptr = None
            st = fn(ptr)
            if st != _abi.Status.OK:
                raise HandlekitError(st, 'handle_destroy failed')

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _h(self):
        if self._ptr is None:
            raise HandlekitError(_abi.Status.INVALID_HANDLE, 'the handle was closed')
        return self._ptr

    def _check(self, st, what):
        if st != _abi.Status.OK:
            raise HandlekitError(st, _text(self._vt.last_error(self._ptr)) or what)

    def _slot(self, struct, name, where):
        fn = getattr(struct, name) if struct is not None else None
        if not fn:
            raise HandlekitError(_abi.Status.NOT_SUPPORTED, '%s %s: %s does not offer it'
                                 % (where, name, self.plugin.name))
        return fn

    # ---- settings ----
    def info(self):
        """hk_handle_info_t as a dict."""
        hi = _abi.HandleInfo(size=ctypes.sizeof(_abi.HandleInfo))
        self._check(self._slot(self._vt, 'handle_info', 'vtable')(self._h(), byref(hi)),
                    'handle_info')
        return {'device': hi.device, 'context_id': hi.context_id,
                'owns_primary': bool(hi.owns_primary), 'flags': hi.flags,
                'plugin_name': _text(hi.plugin_name)}

    @property
    def stream(self):
        """The handle's CUstream as an int (0: the default stream). Set it to
        None, an int, or a stream object (PyTorch, CuPy, CUDA Python); the
        object is kept alive while it is set."""
        out = c_void_p()
        self._check(self._slot(self._vt, 'get_stream', 'vtable')(self._h(), byref(out)),
                    'get_stream')
        return out.value or 0

    @stream.setter
    def stream(self, stream):
        addr = stream_address(stream)
        self._check(self._slot(self._vt, 'set_stream', 'vtable')(self._h(), c_void_p(addr)),
                    'set_stream')
        self._stream_obj = stream

    @property
    def pointer_mode(self):
        """'host' (scalars and results are Python numbers) or 'device' (they are
        one-element arrays of the plugin's memory)."""
        out = c_int()
        self._check(self._slot(self._vt, 'get_pointer_mode', 'vtable')(self._h(), byref(out)),
                    'get_pointer_mode')
        return 'device' if out.value == _abi.POINTER_MODE_DEVICE else 'host'

    @pointer_mode.setter
    def pointer_mode(self, mode):
        value = _POINTER_MODES.get(mode) if isinstance(mode, str) else None
        if value is None:
            raise ValueError("pointer_mode is 'host' or 'device', not %r" % (mode,))
        self._check(self._slot(self._vt, 'set_pointer_mode', 'vtable')(self._h(), value),
                    'set_pointer_mode')

    def synchronize(self):
        """Waits until the work issued on the handle's stream is done."""
        self._check(self._slot(self._vt, 'synchronize', 'vtable')(self._h()), 'synchronize')

    # ---- hk.blas1/1 ----
    def _vec(self, obj, what, writable=False):
        v = _arrays.vector(obj, self.memory, what, writable, self._dlpack_stream())
        self._order_after_producer(v, what)
        return v

    def _dlpack_stream(self):
        if self.memory != CUDA:
            return None
        s = self.stream
        return s if s else 1  # DLPack: 1 is the legacy default stream, 0 is not allowed

    def _order_after_producer(self, v, what):
        # __cuda_array_interface__ v3: work on v.stream must be done before we use
        # the data, unless our work goes to that same stream.
        if v.domain != CUDA or v.stream is None:
            return
        ours = self.stream
        if v.stream == ours or (v.stream == 1 and ours == 0):
            return
        from . import _cuda
        _cuda.stream_synchronize(v.stream, what)

    def _alpha(self, alpha, dtype):
        if self.pointer_mode == 'device':
            v = _arrays.scalar(alpha, self.memory, 'alpha', dtype, False, self._dlpack_stream())
            self._order_after_producer(v, 'alpha')
            return v.first, v
        c = (ctypes.c_float if dtype == 'float32' else ctypes.c_double)(float(alpha))
        if math.isfinite(float(alpha)) and not math.isfinite(c.value):
            raise ValueError('alpha %r does not fit in %s' % (alpha, dtype))
        return ctypes.addressof(c), c

    def _pair(self, x, y, ywritable):
        vx = self._vec(x, 'x')
        vy = self._vec(y, 'y', ywritable)
        if vx.dtype != vy.dtype:
            raise TypeError('x is %s but y is %s' % (vx.dtype, vy.dtype))
        if vx.n != vy.n:
            raise ValueError('x has %d elements but y has %d' % (vx.n, vy.n))
        return vx, vy

    def _op(self, base, dtype):
        name = ('s' if dtype == 'float32' else 'd') + base
        return self._slot(self._blas1, name, 'hk.blas1/1'), name

    def axpy(self, alpha, x, y):
        """y := alpha * x + y, in place; returns y."""
        vx, vy = self._pair(x, y, True)
        fn, name = self._op('axpy', vx.dtype)
        (px, ix), (py, iy) = vx.blas(), vy.blas(written=True)
        a, keep = self._alpha(alpha, vx.dtype)
        self._check(fn(self._h(), vx.n, a, px, ix, py, iy), name)
        return y

    def scal(self, alpha, x):
        """x := alpha * x, in place; returns x."""
        vx = self._vec(x, 'x', True)
        fn, name = self._op('scal', vx.dtype)
        px, ix = vx.blas(ordered=False, written=True)
        a, keep = self._alpha(alpha, vx.dtype)
        self._check(fn(self._h(), vx.n, a, px, ix), name)
        return x

    def copy(self, x, y):
        """y := x; returns y."""
        vx, vy = self._pair(x, y, True)
        fn, name = self._op('copy', vx.dtype)
        (px, ix), (py, iy) = vx.blas(), vy.blas(written=True)
        self._check(fn(self._h(), vx.n, px, ix, py, iy), name)
        return y

    def _result(self, out, dtype):
        if self.pointer_mode == 'device':
            if out is None:
                raise ValueError('in device pointer mode the result goes to out=, a one-element '
                                 'array of the plugin\'s memory')
            v = _arrays.scalar(out, self.memory, 'out', dtype, True, self._dlpack_stream())
            return v.first, v
        if out is not None:
            v = _arrays.scalar(out, HOST, 'out', dtype, True)
            return v.first, v
        c = (ctypes.c_float if dtype == 'float32' else ctypes.c_double)()
        return ctypes.addressof(c), c

    def _answer(self, out, keep):
        if self.pointer_mode == 'device':
            return out
        if out is not None:
            return (ctypes.c_float if keep.dtype == 'float32' else ctypes.c_double) \
                .from_address(keep.first).value
        return keep.value

    def dot(self, x, y, out=None):
        """sum x[i] * y[i]: a float in host pointer mode (also written to out when
        given, a host array); in device pointer mode written to out, which is
        returned."""
        vx, vy = self._pair(x, y, False)
        fn, name = self._op('dot', vx.dtype)
        (px, ix), (py, iy) = vx.blas(), vy.blas()
        r, keep = self._result(out, vx.dtype)
        self._check(fn(self._h(), vx.n, px, ix, py, iy, r), name)
        return self._answer(out, keep)

    def nrm2(self, x, out=None):
        """sqrt(sum x[i]^2), returned as dot's result is."""
        vx = self._vec(x, 'x')
        fn, name = self._op('nrm2', vx.dtype)
        px, ix = vx.blas(ordered=False)
        r, keep = self._result(out, vx.dtype)
        self._check(fn(self._h(), vx.n, px, ix, r), name)
        return self._answer(out, keep)
