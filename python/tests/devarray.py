"""Test equipment: a 1-D array in a handle's memory made through the plugin's
own hk.memory/1 table, exposing __cuda_array_interface__ (v3) or, with
dlpack=True, only __dlpack__, as PyTorch, CuPy or Numba arrays do."""
import ctypes

import numpy as np

from handlekit import _abi
from handlekit._arrays import _DLDataType, _DLDevice, _DLTensor

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [('dl_tensor', _DLTensor), ('manager_ctx', ctypes.c_void_p),
                ('deleter', ctypes.c_void_p)]


class DeviceArray:
    def __init__(self, handle, host, stream=None, dlpack=False, step=1):
        """A copy of host (a NumPy vector) on handle's device; step > 1 makes a
        strided view of every step-th element of a larger block."""
        self.h, self.dtype, self.step = handle, host.dtype, step
        self.mem = handle.table(_abi.TABLE_MEMORY_V1, _abi.MemoryV1)
        self.n = len(host)
        block = np.zeros(max(self.n * step, 1), dtype=host.dtype)
        block[::step] = host
        ptr = ctypes.c_void_p()
        assert self.mem.alloc(handle._h(), block.nbytes, ctypes.byref(ptr)) == 0
        self.ptr, self.nbytes = ptr.value, block.nbytes
        assert self.mem.copy_to_device(handle._h(), self.ptr, block.ctypes.data, block.nbytes) == 0
        self.stream, self.dlpack, self.dlpack_streams = stream, dlpack, []

    @property
    def __cuda_array_interface__(self):
        if self.dlpack:
            raise AttributeError('__cuda_array_interface__')
        strides = None if self.step == 1 else (self.step * self.dtype.itemsize,)
        iface = {'shape': (self.n,), 'typestr': self.dtype.str, 'data': (self.ptr, False),
                 'strides': strides, 'version': 3}
        if self.stream is not None:
            iface['stream'] = self.stream
        return iface

    def __dlpack__(self, stream=None):
        self.dlpack_streams.append(stream)
        m = _DLManagedTensor()
        self._shape = (ctypes.c_int64 * 1)(self.n)
        self._strides = (ctypes.c_int64 * 1)(self.step)
        t = m.dl_tensor
        t.data, t.device = self.ptr, _DLDevice(2, self.h.device or 0)
        t.ndim, t.dtype = 1, _DLDataType(2, self.dtype.itemsize * 8, 1)
        t.shape, t.strides, t.byte_offset = self._shape, self._strides, 0
        self._managed = m  # lives as long as this object: the capsule has no deleter
        return _new_capsule(ctypes.addressof(m), b'dltensor', None)

    def __dlpack_device__(self):
        if not self.dlpack:
            raise AttributeError('__dlpack_device__')
        return (2, self.h.device or 0)

    def numpy(self):
        block = np.empty(max(self.n * self.step, 1), dtype=self.dtype)
        self.h.synchronize()
        assert self.mem.copy_to_host(self.h._h(), block.ctypes.data, self.ptr, self.nbytes) == 0
        return block[::self.step][:self.n].copy()

    def like(self, base, view):
        """The view of this array that view is of base (a NumPy view of the
        host vector this array was made from, step 1): same start, stride
        and length, over this array's device memory."""
        isz = base.dtype.itemsize
        start = (view.__array_interface__['data'][0] - base.__array_interface__['data'][0]) // isz
        return DeviceView(self, start, view.strides[0] // isz if len(view) > 1 else 1, len(view))

    def free(self):
        if self.ptr:
            self.mem.free_(self.h._h(), self.ptr)
            self.ptr = None


class DeviceView:
    """n elements of a DeviceArray (made with step 1) from element start,
    stride elements apart (negative, 0 or positive), through
    __cuda_array_interface__ v3."""

    def __init__(self, array, start, stride, n, offset_bytes=0):
        self.array, self.n = array, n
        isz = array.dtype.itemsize
        self.__cuda_array_interface__ = {
            'shape': (n,), 'typestr': array.dtype.str, 'version': 3,
            'strides': (stride * isz,), 'data': (array.ptr + start * isz + offset_bytes, False)}
