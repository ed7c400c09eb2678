"""handlekit on hk-cuda with a real GPU, against PyTorch's and CuPy's own
results: __cuda_array_interface__, DLPack, strides and reversed views, both
pointer modes and the library's streams; the caller's kernels (hk.kernels/1,
the cases of kernelcases.py) on torch tensors and CuPy arrays, and beside
CuPy's RawModule running the same cubin; movable handles moved by a swap
between two builds of hk-cuda while threads call through them. Each class
skips when its library, a CUDA device or a usable hk-cuda is missing, and in
the simulated-driver run.

Files it needs from the build: the kernels of pykernels.cu (HK_TEST_KERNELS,
else build/release then build/debug python/tests/ of this checkout) and
hk-cuda-1.0.1.so of tests/swap (HK_TEST_SWAP_PLUGINS, else the builds'
tests/swap_plugins/)."""
import os
import shutil
import tempfile
import threading
import unittest

try:
    import numpy as np
except ImportError:
    np = None

import handlekit as hk
from kernelcases import ROOT, KernelCases

try:
    import torch
except ImportError:
    torch = None
try:
    import cupy
except ImportError:
    cupy = None


class DLPackOnly:
    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def cuda_handle(test):
    if os.environ.get('HK_TEST_SIMCUDA'):
        test.skipTest('the simulated driver runs no PyTorch or CuPy kernels')
    try:
        return hk.load('hk-cuda').handle()
    except hk.HandlekitError as e:
        test.skipTest('hk-cuda is not usable here: %s' % e)


class Torch(unittest.TestCase):
    def setUp(self):
        if torch is None or not torch.cuda.is_available():
            self.skipTest('PyTorch with a CUDA device is not available')
        torch.cuda.init()
        self.h = cuda_handle(self)
        self.h.stream = torch.cuda.current_stream()

    def tearDown(self):
        self.h.close()

    def test_ops_against_torch(self):
        for dt, tol in ((torch.float32, 1e-5), (torch.float64, 1e-12)):
            x = torch.randn(1 << 16, device='cuda', dtype=dt)
            y = torch.randn(1 << 16, device='cuda', dtype=dt)
            want = 0.25 * x + y
            self.h.axpy(0.25, x, y)
            torch.testing.assert_close(y, want, rtol=tol, atol=tol)
            self.assertAlmostEqual(self.h.dot(x, y), torch.dot(x, y).item(),
                                   delta=tol * 100 * abs(torch.dot(x.abs(), y.abs()).item()))
            self.assertAlmostEqual(self.h.nrm2(x[::3]), torch.linalg.vector_norm(x[::3]).item(),
                                   delta=tol * 10 * torch.linalg.vector_norm(x).item())
            z = x.clone()
            self.h.scal(-2.0, z[1::2])
            want = x.clone()
            want[1::2] *= -2.0
            torch.testing.assert_close(z, want, rtol=tol, atol=tol)
            c = torch.empty_like(x)
            self.h.copy(DLPackOnly(x), DLPackOnly(c))
            torch.testing.assert_close(c, x, rtol=0, atol=0)

    def test_device_pointer_mode(self):
        self.h.pointer_mode = 'device'
        x = torch.randn(1000, device='cuda', dtype=torch.float64)
        out = torch.zeros(1, device='cuda', dtype=torch.float64)
        self.h.nrm2(x, out=out)
        torch.testing.assert_close(out[0], torch.linalg.vector_norm(x))
        y = torch.zeros_like(x)
        self.h.axpy(torch.tensor([3.0], device='cuda', dtype=torch.float64), x, y)
        torch.testing.assert_close(y, 3.0 * x)

    def test_side_stream(self):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.randn(1 << 20, device='cuda')
            y = torch.randn(1 << 20, device='cuda')
            want = 2.0 * x + y
            self.h.stream = s
            self.h.axpy(2.0, x, y)
        s.synchronize()
        torch.testing.assert_close(y, want)
        self.assertEqual(self.h.stream, s.cuda_stream)


class CuPy(unittest.TestCase):
    def setUp(self):
        if cupy is None:
            self.skipTest('CuPy is not installed')
        try:
            cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # CuPy raises its own CUDA errors
            self.skipTest('CuPy has no CUDA device: %s' % e)
        self.h = cuda_handle(self)
        self.h.stream = cupy.cuda.get_current_stream()

    def tearDown(self):
        self.h.close()

    def test_ops_against_cupy(self):
        for dt in (cupy.float32, cupy.float64):
            x = cupy.random.standard_normal(1 << 16).astype(dt)
            y = cupy.random.standard_normal(1 << 16).astype(dt)
            want = 1.5 * x + y
            self.h.axpy(1.5, x, y)
            # The kernel fuses the multiply and the add; CuPy's expression
            # rounds twice, so results near zero differ by an ulp of the
            # operands (about 1e-7 in float32): an absolute tolerance too.
            atol = 1e-6 if dt == cupy.float32 else 1e-14
            cupy.testing.assert_allclose(y, want, rtol=1e-5, atol=atol)
            self.assertAlmostEqual(self.h.dot(x[::-1], y[::-1]), float(cupy.dot(x, y)),
                                   delta=1e-3 * float(cupy.dot(cupy.abs(x), cupy.abs(y))))
            self.assertAlmostEqual(self.h.nrm2(x), float(cupy.linalg.norm(x)),
                                   delta=1e-5 * float(cupy.linalg.norm(x)))

    def test_reversed_and_stride0_views(self):
        x = cupy.random.standard_normal(1001).astype(cupy.float64)
        for v in (x[::-1], x[-2::-3], x[::7]):
            self.assertAlmostEqual(self.h.nrm2(v), float(cupy.linalg.norm(v)),
                                   delta=1e-12 * float(cupy.linalg.norm(x)))
        want = x.copy()
        want[-2::-3] *= 3.0
        self.h.scal(3.0, x[-2::-3])
        cupy.testing.assert_allclose(x, want, rtol=1e-15)
        y = cupy.zeros(1001)
        self.h.axpy(2.0, x[::-1], y[::-1])
        cupy.testing.assert_allclose(y, 2.0 * x, rtol=1e-15)
        one = cupy.broadcast_to(x[5:6], (1001,))
        self.assertAlmostEqual(self.h.dot(one, y), float(cupy.dot(one, y)),
                               delta=1e-9 * float(cupy.abs(y).sum()))
        with self.assertRaisesRegex(ValueError, 'stride 0'):
            self.h.scal(2.0, one)

    def test_side_stream(self):
        s = cupy.cuda.Stream(non_blocking=True)
        with s:
            x = cupy.arange(1 << 20, dtype=cupy.float64)
            self.h.stream = s
            self.h.scal(0.5, x)
        s.synchronize()
        cupy.testing.assert_allclose(x, cupy.arange(1 << 20, dtype=cupy.float64) * 0.5)


def torch_ready(test):
    if np is None:
        test.skipTest('NumPy is not installed')
    if torch is None or not torch.cuda.is_available():
        test.skipTest('PyTorch with a CUDA device is not available')
    torch.cuda.init()


def cupy_ready(test):
    if np is None:
        test.skipTest('NumPy is not installed')
    if cupy is None:
        test.skipTest('CuPy is not installed')
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CuPy raises its own CUDA errors
        test.skipTest('CuPy has no CUDA device: %s' % e)


class TorchArrays:
    """dev, host and stream of KernelCases and SwapCases with torch tensors
    (bytes on the device, so that every NumPy element type goes)."""

    def dev(self, a):
        t = torch.from_numpy(np.ascontiguousarray(a).view(np.uint8)).cuda()
        self._dtypes[id(t)] = (a.dtype, t)
        return t

    def host(self, t):
        torch.cuda.synchronize()
        return t.cpu().numpy().view(self._dtypes[id(t)][0])

    def stream(self):
        s = torch.cuda.Stream()
        return s, s.cuda_stream


class CuPyArrays:
    def dev(self, a):
        return cupy.asarray(a)

    def host(self, a):
        cupy.cuda.runtime.deviceSynchronize()
        return cupy.asnumpy(a)

    def stream(self):
        s = cupy.cuda.Stream(non_blocking=True)
        return s, s.ptr


class TorchKernels(TorchArrays, KernelCases, unittest.TestCase):
    def setUp(self):
        torch_ready(self)
        self._dtypes = {}
        self.h = cuda_handle(self)
        self.h.stream = torch.cuda.current_stream()

    def tearDown(self):
        self.h.close()


class CuPyKernels(CuPyArrays, KernelCases, unittest.TestCase):
    def setUp(self):
        cupy_ready(self)
        self.h = cuda_handle(self)
        self.h.stream = cupy.cuda.get_current_stream()

    def tearDown(self):
        self.h.close()

    def test_same_cubin_as_cupy_raw_module(self):
        n = 1 << 16
        x = cupy.random.standard_normal(n).astype(cupy.float32)
        y = cupy.random.standard_normal(n).astype(cupy.float32)
        theirs = y.copy()
        raw = cupy.RawModule(path=self.image('cubin')).get_function('hkpy_axpy')
        raw((64,), (256,), (np.int64(n), np.float32(1.25), x, theirs))
        with self.load('cubin') as lib:
            lib['hkpy_axpy']((64,), (256,), (np.int64(n), np.float32(1.25), x, y))
        cupy.testing.assert_array_equal(y, theirs)


def _swap_plugin():
    for d in (os.environ.get('HK_TEST_SWAP_PLUGINS'),
              os.path.join(ROOT, 'build', 'release', 'tests', 'swap_plugins'),
              os.path.join(ROOT, 'build', 'debug', 'tests', 'swap_plugins')):
        if d and os.path.exists(os.path.join(d, 'hk-cuda-1.0.1.so')):
            return os.path.join(d, 'hk-cuda-1.0.1.so')
    return None


class SwapCases:
    """A movable handle on hk-cuda, moved between it and another build of it
    (1.0.1) with the arrays of a client library, while threads call."""

    def loader_with_both(self):
        other = _swap_plugin()
        if other is None:
            self.skipTest('hk-cuda-1.0.1.so of tests/swap is not built')
        # Copies in a directory of their own (the loader's trust rule wants one
        # nobody else can write), so that no module is shared with the
        # package's default loader.
        root = os.environ.get('HK_TEST_TMP') or os.path.join(ROOT, 'build')
        self.tmp = tempfile.mkdtemp(dir=root)
        self.addCleanup(shutil.rmtree, self.tmp)
        shutil.copy(hk.load('hk-cuda').path, self.tmp)
        shutil.copy(other, self.tmp)
        loader = hk.Loader(default_dir=self.tmp, ignore_env=True).scan()
        self.addCleanup(loader.close)
        return loader, loader.select('hk-cuda@1.0.1')

    def test_swap_under_calls(self):
        loader, new = self.loader_with_both()
        old = [p for p in loader.plugins if p is not new][0]
        n = 1 << 20
        xh = np.random.default_rng(1).standard_normal(n).astype(np.float32)
        with loader.mhandle(old) as m:
            self.set_stream(m)
            x, y = self.dev(xh), self.dev(np.zeros(n, dtype=np.float32))
            m.axpy(2.0, x, y)
            np.testing.assert_allclose(self.host(y), 2 * xh, rtol=1e-6)
            want = float(np.dot(xh.astype(np.float64), xh))
            stop, errors, calls = threading.Event(), [], []

            def work():
                try:
                    while not stop.is_set():
                        d = m.dot(x, x)
                        if abs(d - want) > 1e-3 * want:
                            errors.append('dot %r, want %r' % (d, want))
                        calls.append(1)
                except Exception as e:  # reported below
                    errors.append(repr(e))
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            try:
                for i in range(6):
                    self.assertIs(loader.swap(new if i % 2 == 0 else old),
                                  new if i % 2 == 0 else old)
            finally:
                stop.set()
                for t in threads:
                    t.join()
            self.assertEqual(errors, [])
            self.assertGreater(len(calls), 0)
            self.assertEqual(m.state()['generation'], 6)
            m.scal(0.5, self.odd(y))  # a view: every odd element
            want = 2 * xh
            want[1::2] = xh[1::2]
            np.testing.assert_allclose(self.host(y), want, rtol=1e-6)
        self.assertEqual(loader.swap_stats()['refused'], 0)


class TorchSwap(TorchArrays, SwapCases, unittest.TestCase):

    def setUp(self):
        torch_ready(self)
        self._dtypes = {}
        cuda_handle(self).close()

    def dev(self, a):
        return torch.from_numpy(a).cuda()

    def host(self, t):
        torch.cuda.synchronize()
        return t.cpu().numpy()

    def set_stream(self, m):
        m.stream = torch.cuda.current_stream()

    def odd(self, t):
        return t[1::2]  # PyTorch has no negative steps


class CuPySwap(CuPyArrays, SwapCases, unittest.TestCase):

    def setUp(self):
        cupy_ready(self)
        cuda_handle(self).close()

    def set_stream(self, m):
        m.stream = cupy.cuda.get_current_stream()

    def odd(self, a):
        return a[-1::-2]  # reversed: n is even
