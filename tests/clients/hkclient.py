"""Shared equipment of the client suite (tests/clients/run.py).

- Skip: a case that cannot run here, with its reason.
- Driver: the few driver calls the cases make to watch the caller's state
  (the thread's current context, a stream's capture status), on the same
  libcuda.so.1 the process uses (HK_CUDA_DRIVER when set).
- Raw: hk-cuda through the plugin ABI itself: a loader of the shared loader
  library (HK_LOADER_LIBRARY, as the handlekit package finds it), the
  plugin's vtable and tables called slot by slot with ctypes, no handlekit
  object in between.
- Watch: asserts after every plugin call that the caller's context is the
  one it had and that a stream's capture is as it was.
"""
import ctypes
import os
from ctypes import CFUNCTYPE, POINTER, byref, c_char_p, c_int, c_size_t, c_uint32, c_void_p

import handlekit
from handlekit import _abi
from handlekit._lib import lib as loader_lib

CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED = 0, 1, 2
POINTER_MODE_HOST, POINTER_MODE_DEVICE = 0, 1


class Skip(Exception):
    """The case cannot run here; str() is the reason."""


def need(module_name):
    """The module, or Skip("not installed: ...")."""
    import importlib
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        raise Skip('not installed: %s (%s)' % (module_name, e)) from None


class Driver:
    def __init__(self):
        path = os.environ.get('HK_CUDA_DRIVER') or 'libcuda.so.1'
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise Skip('no CUDA driver: %s' % e) from None
        for name, args in (('cuCtxGetCurrent', [POINTER(c_void_p)]),
                           ('cuStreamIsCapturing', [c_void_p, POINTER(c_int)]),
                           ('cuStreamSynchronize', [c_void_p])):
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = c_int, args

    def current(self):
        c = c_void_p()
        rc = self.lib.cuCtxGetCurrent(byref(c))
        if rc != 0:
            raise AssertionError('cuCtxGetCurrent gave %d' % rc)
        return c.value

    def capture_status(self, stream):
        st = c_int(-1)
        rc = self.lib.cuStreamIsCapturing(c_void_p(stream), byref(st))
        if rc != 0:
            raise AssertionError('cuStreamIsCapturing(%#x) gave %d' % (stream or 0, rc))
        return st.value


class Watch:
    """What the caller had before a call: its current context and the capture
    status of a stream (None: no stream watched)."""

    def __init__(self, drv, stream=None):
        self.drv, self.stream = drv, stream
        self.ctx = drv.current()
        self.status = drv.capture_status(stream) if stream is not None else None

    def check(self, what):
        ctx = self.drv.current()
        if ctx != self.ctx:
            raise AssertionError('%s changed the current context (%#x -> %#x)'
                                 % (what, self.ctx or 0, ctx or 0))
        if self.stream is not None:
            st = self.drv.capture_status(self.stream)
            if st != self.status:
                raise AssertionError('%s changed the capture status of stream %#x (%d -> %d; '
                                     '2 is invalidated)' % (what, self.stream, self.status, st))


class KernelsV1(ctypes.Structure):
    """hk.kernels/1 (plugin_api/hk_kernels.h); get_attributes is not called."""
    _fields_ = [('size', c_size_t),
                ('load', CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, POINTER(c_void_p))),
                ('unload', CFUNCTYPE(c_int, c_void_p, c_void_p)),
                ('get_kernel', CFUNCTYPE(c_int, c_void_p, c_void_p, c_char_p, POINTER(c_void_p))),
                ('get_attributes', c_void_p),
                ('launch', CFUNCTYPE(c_int, c_void_p, c_void_p, c_uint32, c_uint32, c_uint32,
                                     c_uint32, c_uint32, c_uint32, c_uint32, POINTER(c_void_p)))]


class Raw:
    """hk-cuda loaded by a loader of its own; slots called directly."""

    def __init__(self):
        L = loader_lib()
        self.L = L
        loader = c_void_p()
        self._check(L.hk_loader_create(None, byref(loader)), 'hk_loader_create')
        self.loader = loader
        self._check(L.hk_loader_scan(loader), 'hk_loader_scan')
        self.plugin = L.hk_loader_find(loader, b'hk-cuda')
        if not self.plugin:
            raise Skip('the loader finds no hk-cuda: %s' % (L.hk_loader_last_error(loader) or b'')
                       .decode(errors='replace'))
        self.vt = _abi.read_struct(_abi.Vtable, L.hk_plugin_vtable(self.plugin))
        self.blas = _abi.read_struct(_abi.Blas1V1, L.hk_plugin_table(self.plugin,
                                                                     _abi.TABLE_BLAS1_V1))
        self.kern = _abi.read_struct(KernelsV1, L.hk_plugin_table(self.plugin, b'hk.kernels/1'))

    @staticmethod
    def _check(st, what):
        if st != 0:
            raise AssertionError('%s gave status %d' % (what, st))

    def create(self, device=-1):
        info = _abi.CreateInfo(ctypes.sizeof(_abi.CreateInfo), device, 0)
        h = c_void_p()
        st = self.vt.handle_create(byref(info), byref(h))
        if st != 0:
            raise AssertionError('handle_create gave %d: %s' % (st, self.error(None)))
        return h.value

    def error(self, h):
        msg = self.vt.last_error(h)
        return (msg or b'').decode(errors='replace')

    def call(self, h, st, what, want=0):
        if st != want:
            raise AssertionError('%s gave status %d, want %d: %s' % (what, st, want,
                                                                     self.error(h)))

    def close(self):
        self.L.hk_loader_destroy(self.loader)
