"""Handles of a plugin (hk_handle_t): settings and the hk.blas1/1 ops on
array objects. Movable handles (_swap.py) and kernel libraries
(_kernels.py) build on Handle."""
import ctypes
import math
import weakref
from ctypes import byref, c_int, c_void_p

from . import _abi, _arrays, _limits
from ._arrays import CUDA, HOST
from ._common import HandlekitError, _text, stream_address

_POINTER_MODES = {'host': _abi.POINTER_MODE_HOST, 'device': _abi.POINTER_MODE_DEVICE}


def create_info(device, checked):
    """hk_create_info_t for a device (None: HK_DEVICE_CURRENT) and the checked flag."""
    return _abi.CreateInfo(ctypes.sizeof(_abi.CreateInfo),
                           _abi.DEVICE_CURRENT if device is None
                           else _limits.int32(device, 'device'),
                           _abi.CREATE_CHECKED if checked else 0)


def _destroy(fn, ptr, plugin):
    try:
        return fn(ptr)
    finally:
        plugin.release()


class Handle:
    """A plugin handle (hk_handle_t) and the hk.blas1/1 ops on array objects.

    device: None for the context contract's default (what is current), or an
    ordinal. checked: HK_CREATE_CHECKED. Host memory (NumPy, or a CPU DLPack
    tensor) for a host plugin such as hk-cpu; CUDA memory (anything with
    __cuda_array_interface__, or a CUDA DLPack tensor) for a CUDA plugin.
    The handle holds its plugin (Plugin.acquire) while it lives, so that a
    swap never closes the module under it."""

    def __init__(self, plugin, device=None, checked=False):
        info = create_info(device, checked)
        plugin.acquire()
        try:
            vt = plugin.vtable
            if not vt.handle_create:
                raise HandlekitError(_abi.Status.NOT_SUPPORTED,
                                     '%s %s: its module is closed (a swap moved every handle '
                                     'away from it); swap to it again to reopen it'
                                     % (plugin.name, plugin.version))
            ptr = c_void_p()
            st = vt.handle_create(byref(info), byref(ptr))
            if st != _abi.Status.OK:
                raise HandlekitError(st, _text(vt.last_error(None)))
        except BaseException:
            plugin.release()
            raise
        self._plugin, self._vt, self._ptr = plugin, vt, ptr.value
        self._finalizer = weakref.finalize(self, _destroy, vt.handle_destroy, self._ptr, plugin)
        self._setup(plugin.memory)

    def _setup(self, memory):
        self._stream_obj = None
        self._tables = {}
        self._libraries = weakref.WeakSet()  # kernel libraries loaded through it
        self.memory = memory
        self.device = None
        if self._vt.handle_info:
            hi = self.info()
            self.device = hi['device'] if hi['device'] >= 0 else None
            if self.memory is None:
                self.memory = HOST if hi['device'] < 0 else CUDA
        if self.memory is None:
            self.memory = CUDA
        self._blas1 = self.table(_abi.TABLE_BLAS1_V1, _abi.Blas1V1)

    @property
    def plugin(self):
        """The Plugin whose code the handle runs."""
        return self._plugin

    def table(self, name, cls):
        """The table name of the handle's implementation as a cls (see
        Plugin.table), None when it has none; taken once per handle and valid
        while the handle lives."""
        key = (name, cls)
        if key not in self._tables:
            self._tables[key] = self._fetch_table(name, cls)
        return self._tables[key]

    def _fetch_table(self, name, cls):
        return self._plugin.table(name, cls)

    # ---- lifetime ----
    def close(self):
        """Unloads the kernel libraries loaded through the handle, then
        destroys it (waits for its work); later calls raise. The first
        failure is raised after everything was tried."""
        if not self._finalizer.alive:
            return
        first = None
        for lib in list(self._libraries):
            try:
                lib.unload()
            except HandlekitError as e:
                first = first or e
        self._ptr = None
        st = self._finalizer()
        if st != _abi.Status.OK:
            raise HandlekitError(st, 'handle_destroy failed')
        if first is not None:
            raise first

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

    # ---- hk.kernels/1 ----
    def load_library(self, image):
        """Loads a CUDA image through hk.kernels/1 and returns its
        KernelLibrary, whose kernels launch on this handle. image: PTX text (a
        str, or bytes; the NUL C needs is added), a cubin or a fatbin (bytes
        or any buffer), or a path (os.PathLike) of a file holding one. The
        library is unloaded by its unload(), a with block, or this handle's
        close()."""
        from ._kernels import KernelLibrary
        return KernelLibrary(self, image)

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
        if v.domain == CUDA:
            self._order_after(v.stream, what)

    def _order_after(self, stream, what):
        # __cuda_array_interface__ v3: work on the producer's stream must be
        # done before we use the data, unless our work goes to that same stream.
        if stream is None:
            return
        ours = self.stream
        if stream == ours or (stream == 1 and ours == 0):
            return
        from . import _cuda
        _cuda.stream_synchronize(stream, what)

    def _alpha(self, alpha, dtype):
        if self.pointer_mode == 'device':
            v = _arrays.scalar(alpha, self.memory, 'alpha', dtype, False, self._dlpack_stream())
            self._order_after_producer(v, 'alpha')
            return v.first, v
        # float() also parses text, of a str or any buffer: '2' or b'2' would
        # scale by 2. A number is what converts itself (__float__, __index__).
        kind = type(alpha)
        try:
            if not (hasattr(kind, '__float__') or hasattr(kind, '__index__')):
                raise TypeError
            a = float(alpha)
        except TypeError:
            raise TypeError('alpha must be a number (in host pointer mode), not %s'
                            % kind.__name__) from None
        c = (ctypes.c_float if dtype == 'float32' else ctypes.c_double)(a)
        if math.isfinite(a) and not math.isfinite(c.value):
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
