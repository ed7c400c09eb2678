"""The one CUDA driver call the package makes itself: waiting for the stream
on which another library produced an array (__cuda_array_interface__ v3),
when the handle's work goes to another stream. The driver is the one hk-cuda
uses: HK_CUDA_DRIVER, else libcuda.so.1.

Under stream capture (docs/contexts.md, "Stream capture") a capturing stream
cannot be waited for: that is refused before the driver is asked (its
refusal would invalidate the capture), and any other wait runs in the relaxed
capture mode, which no capture elsewhere forbids."""
import ctypes
import os
import threading

from . import _abi
from ._common import HandlekitError

_driver = None
_lock = threading.Lock()
_RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED
_IMPLICIT = 906  # CUDA_ERROR_STREAM_CAPTURE_IMPLICIT


def _open():
    global _driver
    with _lock:
        if _driver is None:
            path = os.environ.get('HK_CUDA_DRIVER') or 'libcuda.so.1'
            lib = ctypes.CDLL(path)
            lib.cuStreamSynchronize.restype = ctypes.c_int
            lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
            lib.cuStreamIsCapturing.restype = ctypes.c_int
            lib.cuStreamIsCapturing.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            lib.cuThreadExchangeStreamCaptureMode.restype = ctypes.c_int
            lib.cuThreadExchangeStreamCaptureMode.argtypes = [ctypes.POINTER(ctypes.c_int)]
            lib.cuGetErrorName.restype = ctypes.c_int
            lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            _driver = lib
    return _driver


def stream_synchronize(stream, what):
    try:
        drv = _open()
    except OSError as e:
        raise HandlekitError(_abi.Status.NO_DRIVER, '%s: cannot wait for its stream %#x: %s'
                             % (what, stream, e)) from None
    capturing = ctypes.c_int(0)
    rc = drv.cuStreamIsCapturing(ctypes.c_void_p(stream), ctypes.byref(capturing))
    if rc == _IMPLICIT or (rc == 0 and capturing.value != 0):
        raise HandlekitError(_abi.Status.NOT_SUPPORTED, '%s: its stream %#x is being captured '
                             '(or is the legacy stream beside a blocking capture) and cannot be '
                             'waited for; set the handle\'s stream to it' % (what, stream))
    mode = ctypes.c_int(_RELAXED)
    if rc == 0:
        rc = drv.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))
    if rc == 0:
        rc = drv.cuStreamSynchronize(ctypes.c_void_p(stream))
        drv.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))
    if rc != 0:
        name = ctypes.c_char_p()
        drv.cuGetErrorName(rc, ctypes.byref(name))
        raise HandlekitError(_abi.Status.CUDA_ERROR, '%s: cuStreamSynchronize(%#x) of the '
                             'producer stream failed: %s (%d)'
                             % (what, stream, (name.value or b'?').decode(), rc))
