"""cuda-python's cuda.core as a client of hk-cuda: a Device made current and a
Stream of it handed to a handle, through the handlekit package (the stream's
__cuda_stream__) and through the raw ABI (its handle value); the ops' results
checked against NumPy on copies made with the plugin's hk.memory/1, and the
stream's own synchronisation seeing them done. The caller's current context
(cuda.core's) is unchanged after every call."""
import ctypes
from ctypes import byref, c_float, c_void_p

import handlekit
from handlekit import _abi

from hkclient import POINTER_MODE_HOST, Driver, Raw, Skip, Watch, need

N = 4096


def _core():
    need('cuda')
    try:
        from cuda.core.experimental import Device
    except ImportError:
        try:
            from cuda.core import Device
        except ImportError as e:
            raise Skip('not installed: cuda.core (%s)' % e) from None
    return Device


def _stream_handle(s):
    return int(s.__cuda_stream__()[1])


def stream_to_handle(api):
    np = need('numpy')
    Device = _core()
    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    drv = Driver()
    # The slots of the plugin that made the handle: the package's, or the raw loader's.
    if api == 'package':
        pkg, raw = handlekit.load('hk-cuda').handle(), None
        h, vt, blas = pkg._h(), pkg.plugin.vtable, pkg._blas1
        mem = pkg.plugin.table(_abi.TABLE_MEMORY_V1, _abi.MemoryV1)
    else:
        pkg, raw = None, Raw()
        h, vt, blas = raw.create(), raw.vt, raw.blas
        mem = _abi.read_struct(_abi.MemoryV1, raw.L.hk_plugin_table(raw.plugin,
                                                                    _abi.TABLE_MEMORY_V1))

    def call(st, what):
        if st != 0:
            msg = (vt.last_error(h) or b'').decode(errors='replace')
            raise AssertionError('%s gave status %d: %s' % (what, st, msg))
    x = np.linspace(-1.0, 1.0, N, dtype=np.float32)
    y = np.ones(N, dtype=np.float32)
    dx, dy = c_void_p(), c_void_p()
    try:
        call(mem.alloc(h, x.nbytes, byref(dx)), 'alloc')
        call(mem.alloc(h, y.nbytes, byref(dy)), 'alloc')
        call(mem.copy_to_device(h, dx, x.ctypes.data, x.nbytes), 'copy_to_device')
        call(mem.copy_to_device(h, dy, y.ctypes.data, y.nbytes), 'copy_to_device')
        w = Watch(drv, _stream_handle(s))
        if pkg:
            pkg.stream = s  # through __cuda_stream__
            if pkg.stream != _stream_handle(s):
                raise AssertionError('the handle took stream %#x, cuda.core gave %#x'
                                     % (pkg.stream, _stream_handle(s)))
        else:
            call(vt.set_stream(h, _stream_handle(s)), 'set_stream')
        w.check('set_stream')
        call(vt.set_pointer_mode(h, POINTER_MODE_HOST), 'set_pointer_mode')
        a = c_float(3.0)
        call(blas.saxpy(h, N, ctypes.addressof(a), dx, 1, dy, 1), 'saxpy')
        w.check('saxpy')
        s.sync()  # cuda.core's wait covers the handle's work on its stream
        back = np.empty_like(y)
        call(mem.copy_to_host(h, back.ctypes.data, dy, y.nbytes), 'copy_to_host')
        # One rounding of 3x + y (a fused multiply-add) or two: the error is
        # bounded by the terms, not by the result, which is near 0 for some x.
        want = 3.0 * x.astype(np.float64) + 1.0
        bound = 2 * np.finfo(np.float32).eps * (np.abs(3.0 * x.astype(np.float64)) + 1.0)
        if not np.all(np.abs(back - want) <= bound):
            raise AssertionError('saxpy on the cuda.core stream: %s, want %s' % (back[:4],
                                                                               want[:4]))
        r = c_float()
        call(blas.sdot(h, N, dx, 1, dy, 1, ctypes.addressof(r)), 'sdot')
        w.check('sdot')
        exact = float(np.dot(x.astype(np.float64), want.astype(np.float64)))
        if abs(r.value - exact) > 1e-4 * abs(exact) + 1e-3:
            raise AssertionError('sdot: %g, NumPy says %g' % (r.value, exact))
    finally:
        for p in (dx, dy):
            if p.value:
                mem.free_(h, p)
        if pkg:
            pkg.stream = None
            pkg.close()
        else:
            raw.vt.set_stream(h, None)
            raw.call(None, raw.vt.handle_destroy(h), 'handle_destroy')
            raw.close()
        s.close()


def cases():
    return [('cuda.core %s: a Device and Stream of cuda.core handed to a handle' % api,
             lambda a=api: stream_to_handle(a)) for api in ('package', 'raw')]
