"""handlekit on hk-cuda with a real GPU, against PyTorch's and CuPy's own
results: __cuda_array_interface__, DLPack, strides, both pointer modes and the
library's streams. Each class skips when its library, a CUDA device or a
usable hk-cuda is missing, and in the simulated-driver run."""
import os
import unittest

import handlekit as hk

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

    def test_side_stream(self):
        s = cupy.cuda.Stream(non_blocking=True)
        with s:
            x = cupy.arange(1 << 20, dtype=cupy.float64)
            self.h.stream = s
            self.h.scal(0.5, x)
        s.synchronize()
        cupy.testing.assert_allclose(x, cupy.arange(1 << 20, dtype=cupy.float64) * 0.5)
