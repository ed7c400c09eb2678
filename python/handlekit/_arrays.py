"""Vectors and scalars from array objects: what a handle's ops pass to C.

Host memory (hk-cpu) comes from __array_interface__ (NumPy) or a DLPack
capsule of a CPU tensor; CUDA memory from __cuda_array_interface__ (PyTorch,
CuPy, Numba) or a DLPack capsule of a CUDA tensor. The element type (float32
or float64) is the array's own. A view is not a BLAS (pointer, increment)
pair: View.blas gives the pair that makes an op compute on the elements the
view shows, or refuses a view no BLAS call can take.
"""
import ctypes
from ctypes import POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint64, c_void_p

from . import _limits

HOST, CUDA = 'host', 'cuda'
_DTYPES = {'f4': ('float32', 4), 'f8': ('float64', 8)}

# DLPack (dlpack.h, version 0.x capsules named "dltensor")
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_FLOAT = 2


class _DLDevice(Structure):
    _fields_ = [('device_type', c_int32), ('device_id', c_int32)]


class _DLDataType(Structure):
    _fields_ = [('code', c_uint8), ('bits', c_uint8), ('lanes', c_uint16)]


class _DLTensor(Structure):
    _fields_ = [('data', c_void_p), ('device', _DLDevice), ('ndim', c_int32),
                ('dtype', _DLDataType), ('shape', POINTER(c_int64)),
                ('strides', POINTER(c_int64)), ('byte_offset', c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class View:
    """One array as C sees it: the address of its element 0, its length, its
    stride in elements (signed), its element type. Every number is checked
    to be what C can take (see _limits), and the data address to be aligned
    to the element size, when the View is made."""
    __slots__ = ('first', 'n', 'stride', 'shape', 'dtype', 'itemsize', 'domain', 'device',
                 'readonly', 'stream', 'keep', 'what')

    def __init__(self, data, shape, strides, dtype, domain, what, device=None, readonly=False,
                 stream=None, keep=None):
        self.what = what
        self.dtype, self.itemsize = dtype
        self.domain, self.device, self.readonly = domain, device, readonly
        self.stream, self.keep = stream, keep  # keep: what must live while C uses data
        self.first = _limits.address(data or 0, '%s: the data address' % what)
        self.shape = tuple(_limits.integer(d, '%s: shape[%d]' % (what, i), 0, _limits.INT64_MAX)
                           for i, d in enumerate(shape))
        n = 1
        for d in self.shape:
            n *= d
        if n > _limits.INT64_MAX:
            raise ValueError('%s: shape %s has %d elements, more than C\'s int64_t counts'
                             % (what, self.shape, n))
        self.n = n
        self.stride = 1
        if len(self.shape) == 1 and strides is not None:
            # INT64_MIN is no increment (it has no magnitude): one above it.
            self.stride = _limits.integer(strides[0], '%s: the stride in elements' % what,
                                          _limits.INT64_MIN + 1, _limits.INT64_MAX)
        if n > 0:
            self._check_placement()

    def _check_placement(self):
        what, isz = self.what, self.itemsize
        span = ((self.n - 1) * abs(self.stride) + 1) * isz
        if span > _limits.PTRDIFF_MAX:
            raise ValueError('%s: %d elements %d apart span %d bytes, more than a C object may'
                             % (what, self.n, self.stride, span))
        low = self.lowest()
        if low < 0 or low + span > _limits.ADDRESS_END:
            raise ValueError('%s: %d elements %d apart from %#x lie outside the address space'
                             % (what, self.n, self.stride, self.first))
        if self.first % isz:
            # A misaligned float is undefined behaviour in C and a fault on a GPU.
            raise ValueError('%s: the data address %#x is not aligned to its %d-byte elements'
                             % (what, self.first, isz))

    def lowest(self):
        """The lowest address an element of the view has."""
        if self.stride < 0 and self.n > 1:
            return self.first + (self.n - 1) * self.stride * self.itemsize
        return self.first

    def blas(self, ordered=True, written=False):
        """(pointer, increment) that make a BLAS call see this view's elements.

        ordered: the op pairs element i with element i of another vector (axpy,
        copy, dot), so the order counts: a negative stride becomes BLAS's
        negative increment, whose walk starts at the far end of the lowest
        address given. Otherwise (scal, nrm2: the same result in any order;
        BLAS does nothing for an increment <= 0 there) the lowest address and
        the stride's magnitude. written: the op writes the view.
        ValueError for a stride-0 view of several elements where no BLAS call
        can compute on it: written, or not ordered (nrm2)."""
        if self.n <= 1:
            return self.first, 1
        if self.stride == 0:
            if written:
                raise ValueError('%s: a view of stride 0 (its %d elements are one memory '
                                 'location) cannot be written: each element would need its own '
                                 'result; pass a copy (numpy.ascontiguousarray)'
                                 % (self.what, self.n))
            if not ordered:
                raise ValueError('%s: a view of stride 0 (one element seen %d times): BLAS reads '
                                 'nothing for an increment of 0 here; pass a copy'
                                 % (self.what, self.n))
            return self.first, 0
        if self.stride < 0:
            return self.lowest(), self.stride if ordered else -self.stride
        return self.first, self.stride


def _dtype_of_typestr(typestr, what):
    if not isinstance(typestr, str) or len(typestr) != 3 or typestr[0] not in '<=|' \
            or typestr[1:] not in _DTYPES:
        raise TypeError('%s: the element type must be float32 or float64 (typestr "<f4" or '
                        '"<f8"), not %r' % (what, typestr))
    return _DTYPES[typestr[1:]]


def _interface(obj, name, what):
    """obj's array interface attribute name: a dict, which the object wrote
    itself, so nothing in it is taken on trust."""
    iface = getattr(obj, name)
    if not isinstance(iface, dict):
        raise TypeError('%s: %s must be a dict, not %s' % (what, name, type(iface).__name__))
    return iface


def _from_interface(iface, domain, what, keep):
    """(shape, strides in elements, data address, read-only, dtype, stream)."""
    dtype = _dtype_of_typestr(iface.get('typestr'), what)
    if iface.get('mask') is not None:
        raise TypeError('%s: masked arrays are not supported' % what)
    ptr = _data_address(iface, what)
    readonly = bool(iface['data'][1])
    shape = iface.get('shape')
    if not isinstance(shape, (tuple, list)):
        raise TypeError('%s: shape must be a tuple of integers, not %s'
                        % (what, type(shape).__name__))
    shape = tuple(shape)
    strides = iface.get('strides')
    if strides is not None:
        if not isinstance(strides, (tuple, list)):
            raise TypeError('%s: strides must be None or a tuple of integers, not %s'
                            % (what, type(strides).__name__))
        # View reads one stride per dimension: a short tuple would be read past its end.
        if len(strides) != len(shape):
            raise ValueError('%s: strides %r has %d entries, shape %r has %d'
                             % (what, tuple(strides), len(strides), shape, len(shape)))
        strides = tuple(_limits.int64(s, '%s: strides[%d] in bytes' % (what, i))
                        for i, s in enumerate(strides))
        if any(s % dtype[1] for s in strides):
            raise ValueError('%s: strides %s are not whole elements of %d bytes'
                             % (what, strides, dtype[1]))
        strides = tuple(s // dtype[1] for s in strides)
    elif len(shape) == 1:
        strides = (1,)
    return shape, strides, ptr, readonly, dtype, _producer_stream(iface, what)


def _data_address(iface, what):
    data = iface.get('data')
    if not isinstance(data, tuple) or len(data) != 2:
        raise TypeError('%s: the array interface gives no data pointer' % what)
    return _limits.address(data[0] or 0, '%s: the data address' % what)


def _producer_stream(iface, what):
    stream = iface.get('stream')
    if stream is None:
        return None
    # __cuda_array_interface__ v3: 0 is not a stream (ambiguous), 1 and 2 are
    # the legacy and per-thread default streams.
    return _limits.integer(stream, '%s: the producer\'s stream' % what, 1,
                           _limits.ADDRESS_END - 1)


def _dlpack_tensor(obj, domain, what, dlpack_stream):
    """(capsule, DLTensor) of obj's DLPack export; TypeError unless it is
    memory of domain. Only a CUDA producer is given a stream."""
    stream = None
    if hasattr(obj, '__dlpack_device__'):
        # Ask where the data is first: only a CUDA producer takes a stream.
        kind = int(obj.__dlpack_device__()[0])
        there = CUDA if kind in (_DL_CUDA, _DL_CUDA_MANAGED) else HOST
        if there != domain:
            raise TypeError('%s: a %s array, but this plugin works on %s memory'
                            % (what, there, domain))
        stream = dlpack_stream if there == CUDA else None
    elif domain == CUDA:
        stream = dlpack_stream
    try:
        capsule = obj.__dlpack__(stream=stream) if stream is not None else obj.__dlpack__()
    except TypeError:
        capsule = obj.__dlpack__()
    addr = _capsule_pointer(capsule, b'dltensor')  # a DLManagedTensor starts with its DLTensor
    t = _DLTensor.from_address(addr)
    kind = t.device.device_type
    if kind not in (_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        raise TypeError('%s: DLPack device type %d is neither CPU nor CUDA' % (what, kind))
    there = CUDA if kind in (_DL_CUDA, _DL_CUDA_MANAGED) else HOST
    if there != domain:
        raise TypeError('%s: a %s array, but this plugin works on %s memory'
                        % (what, there, domain))
    return capsule, t


def _from_dlpack(capsule, t, what):
    if t.dtype.code != _DL_FLOAT or t.dtype.bits not in (32, 64) or t.dtype.lanes != 1:
        raise TypeError('%s: the element type must be float32 or float64 (DLPack code %d, '
                        '%d bits, %d lanes)' % (what, t.dtype.code, t.dtype.bits, t.dtype.lanes))
    dtype = _DTYPES['f4' if t.dtype.bits == 32 else 'f8']
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    if strides is None and len(shape) == 1:
        strides = (1,)
    domain = CUDA if t.device.device_type in (_DL_CUDA, _DL_CUDA_MANAGED) else HOST
    data = (t.data or 0) + t.byte_offset
    # The capsule owns a reference to the tensor until it is collected.
    return View(data, shape, strides, dtype, domain, what, device=t.device.device_id,
                keep=capsule)


def _not_an_array(obj, domain, what):
    if hasattr(obj, '__cuda_array_interface__') or hasattr(obj, '__array_interface__'):
        raise TypeError('%s: a %s array, but this plugin works on %s memory'
                        % (what, CUDA if domain == HOST else HOST, domain))
    raise TypeError('%s: %s is not an array (no __array_interface__, '
                    '__cuda_array_interface__ or __dlpack__)' % (what, type(obj).__name__))


def view(obj, domain, what, dlpack_stream=None):
    """The View of obj for a plugin whose memory is domain (HOST or CUDA)."""
    if domain == CUDA and hasattr(obj, '__cuda_array_interface__'):
        iface = _interface(obj, '__cuda_array_interface__', what)
        shape, strides, ptr, ro, dtype, stream = _from_interface(iface, CUDA, what, obj)
        return View(ptr, shape, strides, dtype, CUDA, what, readonly=ro, stream=stream, keep=obj)
    if domain == HOST and hasattr(obj, '__array_interface__'):
        iface = _interface(obj, '__array_interface__', what)
        shape, strides, ptr, ro, dtype, _ = _from_interface(iface, HOST, what, obj)
        return View(ptr, shape, strides, dtype, HOST, what, readonly=ro, keep=obj)
    if hasattr(obj, '__dlpack__'):
        return _from_dlpack(*_dlpack_tensor(obj, domain, what, dlpack_stream), what)
    _not_an_array(obj, domain, what)


def pointer(obj, domain, what, dlpack_stream=None):
    """(address of element 0, the producer's stream or None, what keeps the
    memory alive) of an array of any element type in domain: a kernel
    argument, which C gets as a pointer."""
    if domain == CUDA and hasattr(obj, '__cuda_array_interface__'):
        iface = _interface(obj, '__cuda_array_interface__', what)
        return _data_address(iface, what), _producer_stream(iface, what), obj
    if domain == HOST and hasattr(obj, '__array_interface__'):
        return _data_address(_interface(obj, '__array_interface__', what), what), None, obj
    if hasattr(obj, '__dlpack__'):
        capsule, t = _dlpack_tensor(obj, domain, what, dlpack_stream)
        return (_limits.address((t.data or 0) + t.byte_offset, '%s: the data address' % what),
                None, capsule)
    _not_an_array(obj, domain, what)


def vector(obj, domain, what, writable=False, dlpack_stream=None):
    v = view(obj, domain, what, dlpack_stream)
    if len(v.shape) != 1:
        raise ValueError('%s: a 1-D array is needed, not shape %s' % (what, v.shape))
    if writable and v.readonly:
        raise ValueError('%s: the array is read-only' % what)
    return v


def scalar(obj, domain, what, dtype, writable=False, dlpack_stream=None):
    """A one-element array of dtype in domain (alpha or result in device pointer mode)."""
    v = view(obj, domain, what, dlpack_stream)
    if v.n < 1:
        raise ValueError('%s: the array is empty' % what)
    if v.dtype != dtype:
        raise TypeError('%s: %s, but the vectors are %s' % (what, v.dtype, dtype))
    if writable and v.readonly:
        raise ValueError('%s: the array is read-only' % what)
    return v
