"""The one CUDA driver call the package makes itself: waiting for the stream
on which another library produced an array (__cuda_array_interface__ v3),
when the handle's work goes to another stream. The driver is the one hk-cuda
uses: HK_CUDA_DRIVER, else libcuda.so.1."""
import ctypes
import os
import threading

from . import _abi

_driver = None
_lock = threading.Lock()


def _open():
    global _driver
    with _lock:
        if _driver is None:
            path = os.environ.get('HK_CUDA_DRIVER') or 'libcuda.so.1'
            lib = ctypes.CDLL(path)
            lib.cuStreamSynchronize.restype = ctypes.c_int
            lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
            lib.cuGetErrorName.restype = ctypes.c_int
            lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            _driver = lib
    return _driver


def stream_synchronize(stream, what):
    from ._core import HandlekitError
    try:
        drv = _open()
    except OSError as e:
        raise HandlekitError(_abi.Status.NO_DRIVER, '%s: cannot wait for its stream %#x: %s'
                             % (what, stream, e)) from None
    rc = drv.cuStreamSynchronize(ctypes.c_void_p(stream))
    if rc != 0:
        name = ctypes.c_char_p()
        drv.cuGetErrorName(rc, ctypes.byref(name))
        raise HandlekitError(_abi.Status.CUDA_ERROR, '%s: cuStreamSynchronize(%#x) of the '
                             'producer stream failed: %s (%d)'
                             % (what, stream, (name.value or b'?').decode(), rc))
