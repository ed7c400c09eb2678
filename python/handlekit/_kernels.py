"""The caller's own kernels through a handle (hk.kernels/1,
plugin_api/hk_kernels.h), in the manner of CuPy's RawModule and RawKernel.

    lib = h.load_library(ptx_text)            # PTX, cubin or fatbin
    k = lib.get_kernel('my_axpy')             # or lib['my_axpy']
    k((blocks,), (256,), (np.int64(n), np.float32(a), x, y))   # on h's stream
    lib.unload()                              # or: with h.load_library(...) as lib

Arguments reach the kernel as cuLaunchKernel takes them, one value each, and
their C type must be said: a ctypes value (ctypes.c_int32(5), a Structure
passed by value) or a NumPy scalar (numpy.float32(0.5)) is passed as its
bytes, an array of the handle's memory (anything an op takes, any element
type) as the pointer to its element 0, None as a NULL pointer. A Python int,
float or bool is refused: whether 5 is an int, a long long or a size_t is
the kernel's to say, and a wrong guess reads the wrong bytes.
"""
import ctypes
import os
import sys
import weakref
from ctypes import byref, c_void_p

from . import _abi, _arrays, _limits
from ._common import HandlekitError

_FATBIN_MAGIC = b'\x50\xed\x55\xba'  # 0xBA55ED50, little-endian
_ELF_MAGIC = b'\x7fELF'
_CTYPES = (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array)


def _image(image):
    """The bytes to hand to load: PTX text gets the NUL C needs."""
    if isinstance(image, os.PathLike):
        with open(image, 'rb') as f:
            image = f.read()
    if isinstance(image, str):
        b = image.encode('utf-8')
        if b'\0' in b:
            raise ValueError('image: PTX text with a NUL character, where C would end it')
        return b + b'\0'
    try:
        b = bytes(memoryview(image).cast('B'))
    except TypeError:
        raise TypeError('image: PTX text (str), a cubin or fatbin (bytes or another buffer) '
                        'or a path, not %s' % type(image).__name__) from None
    if not b.startswith((_FATBIN_MAGIC, _ELF_MAGIC)) and b'\0' not in b:
        b += b'\0'  # PTX read from a file as bytes
    return b


def _dims(value, what):
    """(x, y, z) from an int or a sequence of 1 to 3 ints, each a uint32."""
    if isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            raise ValueError('%s: 1 to 3 dimensions, not %d' % (what, len(value)))
        dims = list(value)
    else:
        dims = [value]
    dims = [_limits.uint32(d, '%s[%d]' % (what, i)) for i, d in enumerate(dims)]
    return tuple(dims + [1] * (3 - len(dims)))


def _arg(a, i, handle):
    """(a C value whose address goes into args, what keeps its memory alive)."""
    what = 'args[%d]' % i
    if isinstance(a, _CTYPES):
        return a, None
    np = sys.modules.get('numpy')
    if np is not None and isinstance(a, np.generic):
        if a.dtype.kind not in 'biufc':
            raise TypeError('%s: a NumPy %s scalar is no kernel argument' % (what, a.dtype))
        return (ctypes.c_ubyte * a.dtype.itemsize).from_buffer_copy(a.tobytes()), None
    if a is None:
        return c_void_p(None), None
    if isinstance(a, (bool, int, float, complex)):
        raise TypeError('%s: a Python %s has no C type; say it: numpy.int32(%r), '
                        'numpy.float32(...), ctypes.c_int64(...), ctypes.c_size_t(...)'
                        % (what, type(a).__name__, a))
    addr, stream, keep = _arrays.pointer(a, handle.memory, what, handle._dlpack_stream())
    handle._order_after(stream, what)
    return c_void_p(addr), keep


def _unload(handle, fn, ptr):
    if handle._ptr is not None:  # a closed handle unloaded its libraries first
        fn(handle._ptr, ptr)


class KernelLibrary:
    """A CUDA image loaded through a handle (hk_library_t): its kernels by
    name. Loaded once for the process (any device and context of the plugin
    instance); launches go through the handle that loaded it."""

    def __init__(self, handle, image):
        tbl = handle.table(_abi.TABLE_KERNELS_V1, _abi.KernelsV1)
        if tbl is None or not tbl.load:
            raise HandlekitError(_abi.Status.NOT_SUPPORTED,
                                 'hk.kernels/1: %s offers no kernels table through this handle '
                                 '(a CPU plugin)' % handle.plugin.name)
        data = _image(image)
        buf = ctypes.create_string_buffer(data, len(data))
        out = c_void_p()
        handle._check(tbl.load(handle._h(), buf, len(data), byref(out)), 'load')
        self.handle, self._table, self._ptr = handle, tbl, out.value
        self._kernels = {}
        self._finalizer = weakref.finalize(self, _unload, handle, tbl.unload, self._ptr)
        handle._libraries.add(self)

    def _p(self):
        if self._ptr is None:
            raise HandlekitError(_abi.Status.INVALID_VALUE, 'the kernel library was unloaded')
        return self._ptr

    @property
    def loaded(self):
        return self._ptr is not None

    def get_kernel(self, name):
        """The Kernel called name (the mangled name of a C++ kernel not
        declared extern "C"); HandlekitError NOT_FOUND naming it."""
        lib = self._p()
        k = self._kernels.get(name)
        if k is None:
            bname, out = _limits.cstring(name, 'kernel name'), c_void_p()
            h = self.handle
            h._check(self._table.get_kernel(h._h(), lib, bname, byref(out)),
                     'get_kernel %s' % name)
            k = self._kernels[name] = Kernel(self, name, out.value)
        return k

    __getitem__ = get_kernel

    def unload(self):
        """Unloads the library; its kernels go with it. HandlekitError BUSY
        (still loaded) while another thread launches one of them."""
        if not self._finalizer.alive:
            return
        h = self.handle
        h._check(self._table.unload(h._h(), self._ptr), 'unload')
        self._finalizer.detach()
        self._ptr = None
        h._libraries.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unload()


class Kernel:
    """One kernel of a KernelLibrary (hk_kernel_t): call it to launch."""

    def __init__(self, library, name, ptr):
        self.library, self.name, self._ptr = library, name, ptr

    def __repr__(self):
        return '<Kernel %s>' % self.name

    def _p(self):
        self.library._p()
        return self._ptr

    def __call__(self, grid, block, args=(), shared_mem=0, stream=None):
        """Launches on the handle's stream in the handle's context, with grid
        and block (an int, or 1 to 3 ints), shared_mem bytes of dynamic shared
        memory and args (see the module's documentation). stream, when given,
        becomes the handle's stream first (as h.stream = stream), so that the
        handle's later work is ordered after the kernel. Asynchronous: a fault
        in the kernel shows at a later synchronising call."""
        h = self.library.handle
        if not isinstance(args, (tuple, list)):
            raise TypeError('args: a tuple or list of the kernel\'s arguments, not %s'
                            % type(args).__name__)
        g, b = _dims(grid, 'grid'), _dims(block, 'block')
        shared = _limits.uint32(shared_mem, 'shared_mem')
        if stream is not None:
            h.stream = stream
        values = [_arg(a, i, h) for i, a in enumerate(args)]
        argv = None
        if values:
            argv = (c_void_p * len(values))(*[ctypes.addressof(v) for v, _ in values])
        h._check(self.library._table.launch(h._h(), self._p(), g[0], g[1], g[2], b[0], b[1],
                                            b[2], shared, argv),
                 'launch %s' % self.name)

    launch = __call__

    @property
    def attributes(self):
        """The kernel's attributes on the handle's device, as a dict:
        registers, max_threads_per_block, static_shared_bytes,
        max_dynamic_shared_bytes, const_bytes, local_bytes, ptx_version,
        binary_version (versions as major * 10 + minor)."""
        h, a = self.library.handle, _abi.KernelAttributes(size=ctypes.sizeof(_abi.KernelAttributes))
        h._check(self.library._table.get_attributes(h._h(), self._p(), byref(a)),
                 'get_attributes %s' % self.name)
        return {name: getattr(a, name) for name, _ in a._fields_[1:]}

    @property
    def function(self):
        """The kernel's CUfunction in the handle's context, as an int, for code
        that launches it itself (valid until the library is unloaded or the
        context is reset or destroyed)."""
        h, out = self.library.handle, c_void_p()
        h._check(self.library._table.get_function(h._h(), self._p(), byref(out)),
                 'get_function %s' % self.name)
        return out.value or 0
