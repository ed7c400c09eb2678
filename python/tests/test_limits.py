"""Every integer and string the package hands to C is checked first, on
hk-cpu: ctypes would keep an int's low bits (device=2**32 is device 0, a
stream of 2**64 the NULL stream, a shape of 2**64 + 4 four elements) and end
a string at its first NUL ("hk-cpu\\0evil" is "hk-cpu"). A misaligned array
would reach C as a misaligned float pointer (undefined behaviour, which
UBSan stops in the sanitizer build). Each is refused with ValueError or
TypeError naming it, and nothing is called."""
import unittest

try:
    import numpy as np
except ImportError:
    np = None

import handlekit as hk


class Interface:
    """A hand-made __array_interface__ over real memory (keep)."""

    def __init__(self, keep, **fields):
        self.keep = keep
        iface = {'shape': (4,), 'typestr': '<f4', 'strides': None, 'version': 3,
                 'data': (keep.__array_interface__['data'][0], False)}
        iface.update(fields)
        self.__array_interface__ = iface


class CudaInterface:
    def __init__(self, **fields):
        iface = {'shape': (4,), 'typestr': '<f4', 'strides': None, 'version': 3,
                 'data': (0x10000, False)}
        iface.update(fields)
        self.__cuda_array_interface__ = iface


class Strings(unittest.TestCase):
    def test_load_name_with_nul(self):
        with self.assertRaisesRegex(ValueError, 'NUL'):
            hk.load('hk-cpu\0evil')
        with self.assertRaisesRegex(ValueError, 'NUL'):
            hk.load('/no/such\0dir/x.so')
        with self.assertRaises(TypeError):
            hk.load(b'hk-cpu')

    def test_loader_strings_with_nul(self):
        loader = hk.default_loader()
        with self.assertRaisesRegex(ValueError, 'NUL'):
            loader.find('hk-cpu\0x')
        with self.assertRaisesRegex(ValueError, 'NUL'):
            loader.open(hk.load('hk-cpu').path + '\0.so')
        with self.assertRaisesRegex(ValueError, 'NUL'):
            hk.Loader(default_dir='/usr\0/lib')
        with self.assertRaisesRegex(ValueError, 'NUL'):
            hk.load('hk-cpu').table('hk.blas1/1\0x', hk._abi.Blas1V1)


@unittest.skipIf(np is None, 'NumPy is not installed')
class Integers(unittest.TestCase):
    def setUp(self):
        self.cpu = hk.load('hk-cpu')

    def test_device_out_of_int32(self):
        for dev in (2 ** 32, 2 ** 31, -2 ** 31 - 1, 2 ** 64):
            with self.subTest(device=dev):
                with self.assertRaisesRegex(ValueError, 'device'):
                    self.cpu.handle(device=dev)
        for dev in (1.0, '0', True):
            with self.subTest(device=dev):
                with self.assertRaises(TypeError):
                    self.cpu.handle(device=dev)
        with self.cpu.handle(device=np.int64(0)) as h:  # an integer of NumPy is an integer
            self.assertIsNone(h.device)

    def test_stream_out_of_pointer_range(self):
        with self.cpu.handle() as h:
            for s in (2 ** 64, 2 ** 64 + 0x1234, -1):
                with self.subTest(stream=s):
                    with self.assertRaisesRegex(ValueError, 'stream'):
                        h.stream = s
            with self.assertRaisesRegex(ValueError, 'stream'):
                hk.stream_address(type('S', (), {'cuda_stream': 2 ** 64})())

    def test_shape_beyond_int64(self):
        keep = np.zeros(4, dtype=np.float32)
        with self.cpu.handle() as h:
            for shape in ((2 ** 64 + 4,), (2 ** 63,), (-4,), (2 ** 32, 2 ** 32)):
                with self.subTest(shape=shape):
                    with self.assertRaisesRegex(ValueError, 'shape|elements'):
                        h.nrm2(Interface(keep, shape=shape))
            with self.assertRaisesRegex(ValueError, 'shape'):
                h.scal(1.0, Interface(keep, shape=(2 ** 64 + 4,)))
            with self.assertRaises(TypeError):
                h.nrm2(Interface(keep, shape=(4.0,)))

    def test_strides_and_addresses(self):
        keep = np.zeros(4, dtype=np.float32)
        base = keep.__array_interface__['data'][0]
        with self.cpu.handle() as h:
            bad = {'stride 2**66': dict(strides=(2 ** 66,)),
                   'stride beyond the address space': dict(strides=(2 ** 62,)),
                   'data 2**64': dict(data=(2 ** 64, False)),
                   'data negative': dict(data=(-4, False)),
                   'reversed below address 0': dict(data=(8, False), strides=(-4,)),
                   'past the top': dict(data=(2 ** 64 - 8, False))}
            for name, fields in bad.items():
                with self.subTest(name):
                    with self.assertRaises(ValueError):
                        h.nrm2(Interface(keep, **fields))
            self.assertEqual(h.nrm2(Interface(keep, data=(base, False))), 0.0)

    def test_misaligned_arrays(self):
        # Seen by UBSan in hk-cpu as a misaligned load when it reaches C.
        buf = np.zeros(64, dtype=np.uint8)
        for dt in (np.float32, np.float64):
            with self.subTest(dtype=dt.__name__):
                x = np.frombuffer(buf, dtype=dt, count=4, offset=1)
                y = np.frombuffer(buf.copy(), dtype=dt, count=4, offset=2)
                self.assertFalse(x.flags.aligned)
                with self.cpu.handle() as h:
                    for call in (lambda: h.nrm2(x), lambda: h.dot(x, y),
                                 lambda: h.copy(np.zeros(4, dtype=dt), y)):
                        with self.assertRaisesRegex(ValueError, 'not aligned'):
                            call()
                    h.pointer_mode = 'device'
                    out = np.frombuffer(bytearray(16), dtype=dt, count=1, offset=1)
                    with self.assertRaisesRegex(ValueError, 'out: .*not aligned'):
                        h.nrm2(np.ones(4, dtype=dt), out=out)

    def test_alpha_beyond_float32(self):
        with self.cpu.handle() as h:
            x = np.ones(4, dtype=np.float32)
            with self.assertRaisesRegex(ValueError, 'alpha'):
                h.scal(1e39, x)
            np.testing.assert_array_equal(x, np.ones(4, dtype=np.float32))
            h.scal(float('inf'), x)  # not finite to begin with: IEEE's to decide
            self.assertTrue(np.isinf(x).all())

    def test_cuda_interface_refused_on_a_host_plugin_before_reading(self):
        with self.cpu.handle() as h:
            with self.assertRaises(TypeError):
                h.nrm2(CudaInterface(shape=(2 ** 64 + 4,)))


class Types(unittest.TestCase):
    def test_log_must_be_callable(self):
        for bad in (123, 'print', b'log'):
            with self.subTest(log=bad):
                with self.assertRaisesRegex(TypeError, 'log must be callable'):
                    hk.Loader(ignore_env=True, log=bad)
        lines = []
        loader = hk.Loader(ignore_env=True, log=lambda level, msg: lines.append(msg))
        loader.close()


@unittest.skipIf(np is None, 'NumPy is not installed')
class Alpha(unittest.TestCase):
    """alpha in host pointer mode is a number: float() would take '2', b'2'
    or any buffer holding that text as a scale, and raise ValueError for 'x'."""

    def test_strings_and_non_numbers_are_type_errors(self):
        with hk.load('hk-cpu').handle() as h:
            x, y = np.ones(4, dtype=np.float32), np.ones(4, dtype=np.float32)
            for bad in ('2', b'2', bytearray(b'2'), memoryview(b'2'), 'x', None, 1j, [2.0]):
                with self.subTest(alpha=bad):
                    with self.assertRaisesRegex(TypeError, 'alpha must be a number'):
                        h.scal(bad, x)
                    with self.assertRaisesRegex(TypeError, 'alpha must be a number'):
                        h.axpy(bad, x, y)
            np.testing.assert_array_equal(x, np.ones(4, dtype=np.float32))
            np.testing.assert_array_equal(y, np.ones(4, dtype=np.float32))
            h.scal(2, x)
            h.scal(np.float64(1.5), x)
            h.axpy(True, x, y)  # bool is an int in Python's numbers
            np.testing.assert_array_equal(y, np.full(4, 4.0, dtype=np.float32))


@unittest.skipIf(np is None, 'NumPy is not installed')
class MalformedInterface(unittest.TestCase):
    """An object's array interface is its own to write: a strides or shape
    entry that is missing, of the wrong length or type, is refused with
    ValueError or TypeError naming it (strides=() was an IndexError)."""

    BAD = [  # fields, the exception, what its message says
        (dict(strides=()), ValueError, r'x: strides \(\) has 0 entries, shape \(4,\) has 1'),
        (dict(strides=(4, 4)), ValueError, 'x: strides .* has 2 entries, shape .* has 1'),
        (dict(shape=(), strides=(4,)), ValueError, 'x: strides .* has 1 entries, shape .* has 0'),
        (dict(strides=('4',)), TypeError, r'x: strides\[0\]'),
        (dict(strides=(4.0,)), TypeError, r'x: strides\[0\]'),
        (dict(strides=4), TypeError, 'x: strides must be None or a tuple'),
        (dict(strides='4'), TypeError, 'x: strides must be None or a tuple'),
        (dict(shape=None), TypeError, 'x: shape must be a tuple'),
        (dict(shape=4), TypeError, 'x: shape must be a tuple'),
        (dict(shape=('4',)), TypeError, r'x: shape\[0\]'),
        (dict(shape=(-4,)), ValueError, r'x: shape\[0\] is -4'),
        (dict(strides=(-4,), shape=(-1,)), ValueError, r'x: shape\[0\] is -1'),
        (dict(typestr=None), TypeError, 'x: the element type'),
    ]

    def test_host_interface(self):
        keep = np.ones(4, dtype=np.float32)
        with hk.load('hk-cpu').handle() as h:
            for fields, exc, says in self.BAD:
                with self.subTest(**{k: repr(v) for k, v in fields.items()}):
                    with self.assertRaisesRegex(exc, says):
                        h.scal(2.0, Interface(keep, **fields))
            for bad in (None, [('shape', (4,))], 'iface'):
                obj = Interface(keep)
                obj.__array_interface__ = bad
                with self.assertRaisesRegex(TypeError, 'x: __array_interface__ must be a dict'):
                    h.scal(2.0, obj)
            obj = Interface(keep)
            del obj.__array_interface__['shape']
            with self.assertRaisesRegex(TypeError, 'x: shape must be a tuple'):
                h.scal(2.0, obj)
            np.testing.assert_array_equal(keep, np.ones(4, dtype=np.float32))
            # A reversed view is well formed: its data address is its last element's.
            last = keep.__array_interface__['data'][0] + 12
            h.scal(2.0, Interface(keep, strides=(-4,), data=(last, False)))
            np.testing.assert_array_equal(keep, np.full(4, 2.0, dtype=np.float32))

    def test_cuda_interface(self):
        # Read as a CUDA plugin's op reads it, without one.
        for fields, exc, says in self.BAD:
            with self.subTest(**{k: repr(v) for k, v in fields.items()}):
                with self.assertRaisesRegex(exc, says):
                    hk._arrays.view(CudaInterface(**fields), hk.CUDA, 'x')
        obj = CudaInterface()
        obj.__cuda_array_interface__ = (4,)
        with self.assertRaisesRegex(TypeError, 'x: __cuda_array_interface__ must be a dict'):
            hk._arrays.view(obj, hk.CUDA, 'x')


@unittest.skipIf(np is None, 'NumPy is not installed')
class PointerMode(unittest.TestCase):
    def test_exactly_host_and_device(self):
        with hk.load('hk-cpu').handle() as h:
            for bad in ('gpu', 'Host', 'HOST', '', 0, 1, 2 ** 32, None, b'host'):
                with self.subTest(mode=bad):
                    with self.assertRaisesRegex(ValueError, "pointer_mode .*'host' or 'device'"):
                        h.pointer_mode = bad
                    self.assertEqual(h.pointer_mode, 'host')
            h.pointer_mode = 'device'
            self.assertEqual(h.pointer_mode, 'device')
            h.pointer_mode = 'host'
            self.assertEqual(h.pointer_mode, 'host')
