"""handlekit on hk-cpu with NumPy: loading, handles, every hk.blas1/1 op in
both precisions and pointer modes against NumPy, strides, DLPack, and errors."""
import ctypes
import os
import tempfile
import threading
import unittest
import warnings

try:
    import numpy as np
except ImportError:  # tools/setup.sh installs python3-numpy
    np = None

import handlekit as hk
from handlekit import _abi


def needs_numpy(cls):
    return unittest.skipIf(np is None, 'NumPy is not installed')(cls)



def _tmp_root():
    """The build's directory for test files (HK_TEST_TMP), or None for the
    system's; either passes the loader's trust rule."""
    root = os.environ.get('HK_TEST_TMP')
    if root:
        os.makedirs(root, mode=0o755, exist_ok=True)
    return root

class DLPackOnly:
    """Exposes only __dlpack__ of an array, as a tensor of another library would."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class FakeCuda:
    """An object that says it is CUDA memory."""
    __cuda_array_interface__ = {'shape': (4,), 'typestr': '<f4', 'data': (0x1000, False),
                                'strides': None, 'version': 3}


class Loading(unittest.TestCase):
    def test_plugins_and_reports(self):
        names = [p.name for p in hk.plugins()]
        self.assertIn('hk-cpu', names)
        cpu = hk.load('hk-cpu')
        self.assertTrue(cpu.path.endswith('/hk-cpu.so'))
        self.assertEqual(cpu.abi[0], hk.ABI_MAJOR)
        self.assertIn('hk.blas1/1', cpu.tables)
        self.assertTrue(any(r.loaded and r.path == cpu.path for r in hk.reports()))
        self.assertIs(hk.load('hk-cpu'), cpu)

    def test_unknown_name(self):
        with self.assertRaises(hk.HandlekitError) as cm:
            hk.load('no-such-plugin')
        self.assertIs(cm.exception.status, hk.Status.NOT_FOUND)
        self.assertIn('no-such-plugin', cm.exception.reason)

    def test_version_ranges(self):
        cpu = hk.load('hk-cpu')
        self.assertIs(hk.load('hk-cpu@^1'), cpu)
        self.assertIs(hk.load('hk-cpu@%s' % cpu.version), cpu)
        with self.assertRaises(hk.HandlekitError) as cm:
            hk.load('hk-cpu@^99')
        self.assertIs(cm.exception.status, hk.Status.NOT_FOUND)
        self.assertIn('outside ^99', cm.exception.reason)
        with self.assertRaises(hk.HandlekitError) as cm:
            hk.load('hk-cpu@not a range')
        self.assertIs(cm.exception.status, hk.Status.INVALID_VALUE)

    def test_not_found_names_a_refused_file_of_that_name(self):
        with tempfile.TemporaryDirectory(dir=_tmp_root()) as d:
            with open(os.path.join(d, 'hk-junk.so'), 'w') as f:
                f.write('not an ELF file\n' * 8)
            saved, hk._default = hk._default, hk.Loader(default_dir=d, ignore_env=True).scan()
            try:
                with self.assertRaises(hk.HandlekitError) as cm:
                    hk.load('hk-junk')
            finally:
                hk._default = saved
        self.assertIs(cm.exception.status, hk.Status.NOT_FOUND)
        # the loader's summary, then the refused file on a line of its own, once
        self.assertEqual(cm.exception.reason.splitlines(), [
            'no plugin named hk-junk is loaded (no plugin is loaded); refused:',
            '  %s: open: LOAD_FAILED: not an ELF file' % os.path.join(d, 'hk-junk.so')])

    def test_not_found_names_a_refused_directory(self):
        """The loader's default directory below one that anyone may write: the
        error names it and why, on a line of its own after the summary."""
        with tempfile.TemporaryDirectory(dir=_tmp_root()) as d:
            ww = os.path.join(d, 'ww')
            plugdir = os.path.join(ww, 'plugins')
            os.makedirs(plugdir)
            os.chmod(ww, 0o777)
            saved, hk._default = hk._default, hk.Loader(default_dir=plugdir,
                                                         ignore_env=True).scan()
            try:
                with self.assertRaises(hk.HandlekitError) as cm:
                    hk.load('hk-cpu')
            finally:
                hk._default = saved
        self.assertIs(cm.exception.status, hk.Status.NOT_FOUND)
        self.assertEqual(cm.exception.reason.splitlines(), [
            'no plugin named hk-cpu is loaded (no plugin is loaded); refused:',
            '  %s (the default directory): scan: INSECURE: directory %s is writable by '
            'others (mode 0777)' % (plugdir, os.path.realpath(ww))])

    def test_environment_refusals_warn_once(self):
        """A refused HK_PLUGIN_PATH directory and a malformed HK_PLUGIN_PIN
        entry: one warnings.warn each, once per loader however often it scans
        or selects; a loader that ignores the environment says nothing of the
        directory."""
        saved = {k: os.environ.get(k) for k in ('HK_PLUGIN_PATH', 'HK_PLUGIN_PIN')}
        with tempfile.TemporaryDirectory(dir=_tmp_root()) as d:
            os.chmod(d, 0o777)
            os.environ['HK_PLUGIN_PATH'] = d
            os.environ['HK_PLUGIN_PIN'] = 'hk-cpu@^^1'
            try:
                with warnings.catch_warnings(record=True) as got:
                    warnings.simplefilter('always')
                    loader = hk.Loader(default_dir=os.environ['HK_TEST_PLUGIN_DIR'])
                    loader.scan()
                    self.assertEqual(loader.select('hk-cpu').name, 'hk-cpu')
                    loader.scan()
                    quiet = hk.Loader(default_dir=os.environ['HK_TEST_PLUGIN_DIR'],
                                      ignore_env=True).scan()
                    quiet.select('hk-cpu')
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        texts = sorted(str(w.message) for w in got)
        self.assertEqual(len(texts), 3, texts)
        self.assertTrue(texts[0].startswith('HK_PLUGIN_PATH directory %s refused, nothing in '
                                            'it is loaded: ' % d), texts)
        self.assertIn('writable by others (mode 0777)', texts[0])
        # one per loader: the second loader still reads HK_PLUGIN_PIN
        self.assertEqual(texts[1], texts[2])
        self.assertTrue(texts[1].startswith("HK_PLUGIN_PIN: entry 'hk-cpu@^^1' ignored: bad "
                                            "range: "), texts)

    def test_refused_file_gives_the_loaders_reason(self):
        with tempfile.TemporaryDirectory(dir=_tmp_root()) as d:
            path = os.path.join(d, 'notaplugin.so')
            with open(path, 'w') as f:
                f.write('not an ELF file\n' * 8)
            loader = hk.Loader(default_dir=d, ignore_env=True)
            with self.assertRaises(hk.HandlekitError) as cm:
                loader.open(path)
            self.assertIs(cm.exception.status, hk.Status.LOAD_FAILED)
            self.assertIn(path, cm.exception.reason)
            rep = [r for r in loader.reports if r.path == path]
            self.assertEqual(len(rep), 1)
            self.assertEqual(rep[0].stage, 'open')
            self.assertFalse(rep[0].loaded)

    def test_own_loader_with_log(self):
        lines = []
        with tempfile.TemporaryDirectory(dir=_tmp_root()) as d:
            with open(os.path.join(d, 'x.so'), 'w') as f:
                f.write('text')
            loader = hk.Loader(default_dir=d, ignore_env=True,
                               log=lambda level, msg: lines.append((level, msg))).scan()
            self.assertEqual(loader.plugins, [])
            self.assertEqual(len(lines), 1)
            self.assertEqual(lines[0][0], _abi.LOG_WARN)
            self.assertIn('x.so', lines[0][1])

    def test_table_clamped_to_what_the_caller_knows(self):
        class Short(ctypes.Structure):  # a host that knows only saxpy
            _fields_ = [('size', ctypes.c_size_t), ('saxpy', ctypes.c_void_p)]
        cpu = hk.load('hk-cpu')
        full = cpu.table('hk.blas1/1', _abi.Blas1V1)
        short = cpu.table('hk.blas1/1', Short)
        self.assertEqual(full.size, ctypes.sizeof(_abi.Blas1V1))
        self.assertEqual(short.saxpy, ctypes.cast(full.saxpy, ctypes.c_void_p).value)
        self.assertIsNone(cpu.table('hk.nothing/1', _abi.Blas1V1))


    def test_table_through_the_loader_when_it_offers_it(self):
        # Loaders of ABI 1.2 copy tables themselves (hk_plugin_get_table); a
        # stand-in for it checks that the package then asks it, with its sizeof.
        cpu = hk.load('hk-cpu')
        real, calls = cpu.loader._lib, []

        class WithGetTable:
            def __getattr__(self, name):
                return getattr(real, name)

            def hk_plugin_get_table(self, plugin, name, table, size):
                calls.append((plugin, name, size))
                src = ctypes.c_void_p()
                if cpu.vtable.get_table(name, ctypes.byref(src)) != 0:
                    return hk.Status.NOT_FOUND
                n = min(ctypes.c_size_t.from_address(src.value).value, size)
                ctypes.memmove(ctypes.addressof(table._obj), src.value, n)
                return hk.Status.OK
        cpu.loader._lib = WithGetTable()
        try:
            fresh = hk.Plugin(cpu.loader, cpu._ptr)  # nothing cached yet
            t = fresh.table('hk.blas1/1', _abi.Blas1V1)
            self.assertIsNone(fresh.table('hk.nothing/1', _abi.Blas1V1))
        finally:
            cpu.loader._lib = real
        size = ctypes.sizeof(_abi.Blas1V1)
        self.assertEqual(calls, [(cpu._ptr, b'hk.blas1/1', size),
                                 (cpu._ptr, b'hk.nothing/1', size)])
        self.assertTrue(t.saxpy)

@needs_numpy
class Handles(unittest.TestCase):
    def setUp(self):
        self.cpu = hk.load('hk-cpu')

    def test_context_manager_closes(self):
        with self.cpu.handle() as h:
            self.assertEqual(h.memory, hk.HOST)
            self.assertEqual(h.info()['plugin_name'], 'hk-cpu')
        with self.assertRaises(hk.HandlekitError) as cm:
            h.dot(np.ones(2), np.ones(2))
        self.assertIs(cm.exception.status, hk.Status.INVALID_HANDLE)
        h.close()  # a second close is a no-op

    def test_create_error_has_the_plugins_reason(self):
        with self.assertRaises(hk.HandlekitError) as cm:
            self.cpu.handle(device=3)
        self.assertIs(cm.exception.status, hk.Status.INVALID_DEVICE)
        self.assertIn('3', cm.exception.reason)
        self.assertIn('INVALID_DEVICE (9)', str(cm.exception))

    def test_stream_refused_with_reason(self):
        with self.cpu.handle() as h:
            self.assertEqual(h.stream, 0)
            with self.assertRaises(hk.HandlekitError) as cm:
                h.stream = 0x1234
            self.assertIs(cm.exception.status, hk.Status.NOT_SUPPORTED)
            self.assertIn('stream', cm.exception.reason)
            h.stream = None  # the default stream is accepted

    def test_stream_objects(self):
        class Torchish:
            cuda_stream = 0x10

        class Cupyish:
            ptr = 0x20

        class CudaPython:
            def __cuda_stream__(self):
                return (0, 0x30)
        self.assertEqual(hk.stream_address(Torchish()), 0x10)
        self.assertEqual(hk.stream_address(Cupyish()), 0x20)
        self.assertEqual(hk.stream_address(CudaPython()), 0x30)
        self.assertEqual(hk.stream_address(ctypes.c_void_p(0x40)), 0x40)
        self.assertEqual(hk.stream_address(None), 0)
        with self.assertRaises(TypeError):
            hk.stream_address('stream')


@needs_numpy
class Blas1(unittest.TestCase):
    def setUp(self):
        self.h = hk.load('hk-cpu').handle()
        self.rng = np.random.default_rng(7)

    def tearDown(self):
        self.h.close()

    def vec(self, n, dtype):
        return self.rng.standard_normal(n).astype(dtype)

    def test_every_op_both_precisions(self):
        for dt, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
            with self.subTest(dtype=dt.__name__):
                x, y = self.vec(1000, dt), self.vec(1000, dt)
                want = 0.5 * x + y
                self.assertIs(self.h.axpy(0.5, x, y), y)
                np.testing.assert_allclose(y, want, rtol=tol)
                z = x.copy()
                self.h.scal(-3.0, z)
                np.testing.assert_allclose(z, -3.0 * x, rtol=tol)
                c = np.zeros_like(x)
                self.h.copy(x, c)
                np.testing.assert_array_equal(c, x)
                d = self.h.dot(x, y)
                self.assertIsInstance(d, float)
                self.assertAlmostEqual(d, float(np.dot(x.astype(np.float64), y)),
                                       delta=tol * 1000 * np.abs(x).max() * np.abs(y).max())
                self.assertAlmostEqual(self.h.nrm2(x), float(np.linalg.norm(x)),
                                       delta=tol * float(np.linalg.norm(x)))

    def test_strides_are_increments(self):
        a = np.arange(12, dtype=np.float64)
        b = np.ones(12, dtype=np.float64)
        self.assertEqual(self.h.dot(a[::3], b[::3]), float(np.dot(a[::3], b[::3])))
        # Negative strides: NumPy's reversed view is BLAS's negative increment.
        self.assertEqual(self.h.dot(a[::-2], a[::2]), float(np.dot(a[::-2], a[::2])))
        y = np.zeros(6)
        self.h.copy(a[::-2], y)
        np.testing.assert_array_equal(y, a[::-2])
        y = np.zeros(12)
        self.h.axpy(2.0, a[:6], y[::-2])
        want = np.zeros(12)
        want[::-2] = 2.0 * a[:6]
        np.testing.assert_array_equal(y, want)

    def test_zero_stride_source(self):
        one = np.lib.stride_tricks.as_strided(np.array([2.0]), shape=(5,), strides=(0,))
        self.assertEqual(self.h.dot(one, np.arange(5.0)), 20.0)
        y = np.zeros(5)
        self.h.copy(one, y)
        np.testing.assert_array_equal(y, np.full(5, 2.0))

    def test_bad_arrays(self):
        x = np.ones(4, dtype=np.float32)
        with self.assertRaisesRegex(TypeError, 'float32 or float64'):
            self.h.dot(np.ones(4, dtype=np.int32), x)
        with self.assertRaisesRegex(TypeError, 'x is float64 but y is float32'):
            self.h.dot(np.ones(4), x)
        with self.assertRaisesRegex(ValueError, '4 elements but y has 3'):
            self.h.axpy(1.0, x, np.ones(3, dtype=np.float32))
        with self.assertRaisesRegex(ValueError, '1-D'):
            self.h.nrm2(np.ones((2, 2)))
        ro = np.ones(4, dtype=np.float32)
        ro.flags.writeable = False
        with self.assertRaisesRegex(ValueError, 'read-only'):
            self.h.scal(2.0, ro)
        self.assertTrue((ro == 1).all())
        with self.assertRaisesRegex(TypeError, 'not an array'):
            self.h.nrm2([1.0, 2.0])
        with self.assertRaisesRegex(TypeError, 'cuda array'):
            self.h.nrm2(FakeCuda())
        byte_strided = np.ones(16, dtype=np.uint8)
        s = np.lib.stride_tricks.as_strided(byte_strided.view(np.float32), shape=(2,),
                                            strides=(6,))
        with self.assertRaisesRegex(ValueError, 'whole elements'):
            self.h.nrm2(s)

    def test_dlpack(self):
        x = np.arange(8, dtype=np.float32)
        y = np.ones(8, dtype=np.float32)
        self.assertEqual(self.h.dot(DLPackOnly(x), DLPackOnly(y)), 28.0)
        self.assertEqual(self.h.dot(DLPackOnly(x[::2]), DLPackOnly(y[::2])), 12.0)
        self.h.axpy(1.0, DLPackOnly(x), DLPackOnly(y))
        np.testing.assert_array_equal(y, x + 1)

    def test_device_pointer_mode(self):
        self.h.pointer_mode = 'device'
        self.assertEqual(self.h.pointer_mode, 'device')
        x = np.arange(4, dtype=np.float64)
        y = np.ones(4)
        self.h.axpy(np.array([2.0]), x, y)
        np.testing.assert_array_equal(y, 2 * x + 1)
        out = np.zeros(1)
        self.assertIs(self.h.dot(x, y, out=out), out)
        self.assertEqual(out[0], float(np.dot(x, y)))
        with self.assertRaisesRegex(ValueError, 'out='):
            self.h.nrm2(x)
        with self.assertRaisesRegex(TypeError, 'alpha: float32'):
            self.h.scal(np.array([2.0], dtype=np.float32), x)
        self.h.pointer_mode = 'host'
        out = np.zeros(1, dtype=np.float32)
        self.assertEqual(self.h.nrm2(np.array([3, 4], dtype=np.float32), out=out), 5.0)
        self.assertEqual(out[0], 5.0)

    def test_bad_pointer_mode_reason(self):
        # Only the two names reach C (test_limits has every other value).
        with self.assertRaisesRegex(ValueError, "'host' or 'device', not 7"):
            self.h.pointer_mode = 7

    def test_one_handle_from_several_threads(self):
        x = np.arange(1000, dtype=np.float64)
        want = float(np.dot(x, x))
        results, errors = [], []

        def work():
            try:
                for _ in range(200):
                    results.append(self.h.dot(x, x))
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 800)
        self.assertTrue(all(r == want for r in results))
