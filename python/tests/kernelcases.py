"""Test cases of hk.kernels/1 from Python, shared by the simulated driver's
run (test_simcuda_kernels.py, device arrays made through hk.memory/1) and
the GPU's (test_gpu.py, PyTorch tensors and CuPy arrays): the kernels of
pykernels.cu built as PTX, cubin and fatbin (HK_TEST_KERNELS names their
directory) loaded, found, launched with every kind of argument, grid, block,
dynamic shared memory and stream, their attributes, and what is refused.

A class using KernelCases sets self.h (a handle of a CUDA plugin) and
defines dev(numpy array) -> a device array, host(device array) -> a NumPy
array (after the work on it is done) and stream() -> (a stream object, its
address)."""
import ctypes
import os

try:
    import numpy as np
except ImportError:  # the classes using KernelCases skip first
    np = None

import handlekit as hk
from simkernels import index_values, packed_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kernels_dir():
    """Where pykernels.{ptx,cubin,fatbin} are: HK_TEST_KERNELS, else the
    release and then the debug build of this checkout; None when not built."""
    for d in (os.environ.get('HK_TEST_KERNELS'),
              os.path.join(ROOT, 'build', 'release', 'python', 'tests'),
              os.path.join(ROOT, 'build', 'debug', 'python', 'tests')):
        if d and os.path.exists(os.path.join(d, 'pykernels.fatbin')):
            return d
    return None


class Pair(ctypes.Structure):  # struct hkpy_pair
    _fields_ = [('i', ctypes.c_int), ('f', ctypes.c_float)]


class KernelCases:
    def image(self, kind):
        d = kernels_dir()
        if d is None:
            self.skipTest('the kernels of pykernels.cu are not built (no CUDA toolkit)')
        return os.path.join(d, 'pykernels.' + kind)

    def load(self, kind='fatbin'):
        with open(self.image(kind), 'rb') as f:
            return self.h.load_library(f.read())

    def run_axpy(self, lib, n=1000, **launch):
        x = np.arange(n, dtype=np.float32)
        y = np.ones(n, dtype=np.float32)
        dx, dy = self.dev(x), self.dev(y)
        k = lib.get_kernel('hkpy_axpy')
        k((4,), (128,), (np.int64(n), np.float32(0.5), dx, dy), **launch)
        np.testing.assert_allclose(self.host(dy), y + np.float32(0.5) * x, rtol=1e-6)

    def test_images_of_every_kind(self):
        with open(self.image('ptx'), 'rb') as f:
            ptx = f.read()
        images = {'ptx bytes': ptx, 'ptx str': ptx.decode(), 'ptx path': _Path(self.image('ptx')),
                  'cubin': None, 'fatbin': None}
        for kind, image in images.items():
            with self.subTest(image=kind):
                if image is None:
                    with open(self.image(kind), 'rb') as f:
                        image = bytearray(f.read())
                with self.h.load_library(image) as lib:
                    self.run_axpy(lib)
                self.assertFalse(lib.loaded)

    def test_argument_types(self):
        with self.load() as lib:
            out = self.dev(np.zeros(40, dtype=np.uint8))
            values = (np.int8(-5), ctypes.c_uint16(65535), np.int32(-7),
                      ctypes.c_uint64(2 ** 64 - 1), np.float32(1.5), ctypes.c_double(2.25),
                      Pair(3, -0.5))
            lib['hkpy_args'](1, 1, (out,) + values)
            got = self.host(out).tobytes()[:35]
            self.assertEqual(got, packed_args(-5, 65535, -7, 2 ** 64 - 1, 1.5, 2.25, (3, -0.5)))

    def test_python_numbers_refused(self):
        with self.load() as lib:
            k, y = lib['hkpy_axpy'], self.dev(np.ones(4, dtype=np.float32))
            for bad in (4, 0.5, True):
                with self.subTest(arg=bad):
                    with self.assertRaisesRegex(TypeError, r'args\[0\]: a Python .* no C type'):
                        k(1, 4, (bad, np.float32(1), y, y))
            with self.assertRaisesRegex(TypeError, 'args'):
                k(1, 4, (np.int64(4), np.float32(1), y, object()))
            with self.assertRaisesRegex(TypeError, 'args: a tuple'):
                k(1, 4, y)
            np.testing.assert_array_equal(self.host(y), np.ones(4, dtype=np.float32))

    def test_shared_memory_and_dimensions(self):
        with self.load() as lib:
            x = np.arange(3 * 64, dtype=np.float32)
            dx = self.dev(x)
            lib['hkpy_reverse'](3, 64, (dx,), shared_mem=64 * 4)
            np.testing.assert_array_equal(self.host(dx), x.reshape(3, 64)[:, ::-1].ravel())
            for grid, block in (((2, 3), (4, 2, 2)), ((3, 1, 2), (8,)), (2, [2, 3])):
                with self.subTest(grid=grid, block=block):
                    g = tuple(grid) + (1,) * (3 - len(grid)) if isinstance(grid, tuple) \
                        else (grid, 1, 1)
                    b = tuple(block) + (1,) * (3 - len(block))
                    want = index_values(g, b)
                    out = self.dev(np.zeros(len(want), dtype=np.uint32))
                    lib['hkpy_index'](grid, block, (out,))
                    np.testing.assert_array_equal(self.host(out), want)

    def test_dimensions_refused(self):
        with self.load() as lib:
            k, y = lib['hkpy_index'], self.dev(np.zeros(4, dtype=np.uint32))
            for grid, block, shared, err in ((2 ** 32, 1, 0, ValueError),
                                             ((1, 1, 1, 1), 1, 0, ValueError),
                                             (1, -1, 0, ValueError), (1, 1, 2 ** 32, ValueError),
                                             (1, 1, -1, ValueError), (1.0, 1, 0, TypeError)):
                with self.subTest(grid=grid, block=block, shared=shared):
                    with self.assertRaises(err):
                        k(grid, block, (y,), shared_mem=shared)
            for grid, block in ((0, 1), (1, 1025), ((1, 65536), 1), (1, (1, 1, 65))):
                with self.subTest(grid=grid, block=block):
                    with self.assertRaises(hk.HandlekitError) as cm:
                        k(grid, block, (y,))
                    self.assertIs(cm.exception.status, hk.Status.INVALID_VALUE)

    def test_stream(self):
        s, addr = self.stream()
        with self.load() as lib:
            self.run_axpy(lib, stream=s)
            self.assertEqual(self.h.stream, addr)

    def test_attributes_and_function(self):
        with self.load() as lib:
            k = lib['hkpy_reverse']
            a = k.attributes
            self.assertEqual(sorted(a), sorted(['registers', 'max_threads_per_block',
                                                'static_shared_bytes', 'max_dynamic_shared_bytes',
                                                'const_bytes', 'local_bytes', 'ptx_version',
                                                'binary_version']))
            self.assertGreaterEqual(a['max_threads_per_block'], 64)
            self.assertGreater(a['registers'], 0)
            self.assertGreaterEqual(a['binary_version'], 50)
            self.assertNotEqual(k.function, 0)
            self.assertIs(lib.get_kernel('hkpy_reverse'), k)

    def test_lookups_and_lifetime(self):
        lib = self.load()
        with self.assertRaises(hk.HandlekitError) as cm:
            lib.get_kernel('hkpy_nothing')
        self.assertIs(cm.exception.status, hk.Status.NOT_FOUND)
        self.assertIn('hkpy_nothing', cm.exception.reason)
        with self.assertRaisesRegex(ValueError, 'NUL'):
            lib.get_kernel('hkpy_axpy\0x')
        k = lib['hkpy_axpy']
        lib.unload()
        lib.unload()  # a second unload does nothing
        for call in (lambda: k(1, 1, ()), lambda: k.attributes, lambda: lib['hkpy_axpy']):
            with self.assertRaises(hk.HandlekitError) as cm:
                call()
            self.assertIs(cm.exception.status, hk.Status.INVALID_VALUE)

    def test_bad_images(self):
        for image, err in ((b'', hk.HandlekitError), ('.version 8.0\0', ValueError),
                           (12345, TypeError)):
            with self.subTest(image=image):
                with self.assertRaises(err) as cm:
                    self.h.load_library(image)
                if err is hk.HandlekitError:
                    self.assertIs(cm.exception.status, hk.Status.INVALID_VALUE)
        bad = ('.version 8.0\n.target sm_90\n.address_size 64\n'
               '.visible .entry hkpy_bad()\n{\n\tthis is a syntax error;\n\tret;\n}\n')
        with self.assertRaises(hk.HandlekitError) as cm:
            self.h.load_library(bad)
        self.assertIs(cm.exception.status, hk.Status.INVALID_VALUE)
        self.assertIn('error', cm.exception.reason)


class _Path(os.PathLike):
    def __init__(self, path):
        self.path = path

    def __fspath__(self):
        return self.path
