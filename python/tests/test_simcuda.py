"""handlekit on hk-cuda over the simulated CUDA driver (tests/simcuda): CUDA
arrays through __cuda_array_interface__ and DLPack, both pointer modes,
external streams, the producer's stream, and the plugin's errors. Runs only
when HK_TEST_SIMCUDA names the simulated libcuda.so.1 (scons test sets it and
HK_CUDA_DRIVER for this run)."""
import ctypes
import os
import unittest

try:
    import numpy as np
except ImportError:
    np = None

import handlekit as hk
from handlekit import _cuda

SIM = os.environ.get('HK_TEST_SIMCUDA')


def setUpModule():
    if not SIM:
        raise unittest.SkipTest('HK_TEST_SIMCUDA is not set: no simulated driver for this run')
    if np is None:
        raise unittest.SkipTest('NumPy is not installed')


def driver():
    drv = ctypes.CDLL(SIM)  # the same library hk-cuda opened (HK_CUDA_DRIVER)
    for name in ('cuStreamCreate', 'cuStreamDestroy_v2', 'cuDevicePrimaryCtxRetain',
                 'cuDevicePrimaryCtxRelease_v2', 'cuCtxPushCurrent_v2', 'cuCtxPopCurrent_v2',
                 'cuStreamBeginCapture_v2', 'cuStreamEndCapture', 'cuStreamIsCapturing',
                 'cuGraphInstantiateWithFlags', 'cuGraphLaunch', 'cuGraphExecDestroy',
                 'cuGraphDestroy', 'cuStreamSynchronize', 'cuCtxGetCurrent'):
        getattr(drv, name).restype = ctypes.c_int
    return drv


MODES = {'global': 0, 'thread_local': 1, 'relaxed': 2}  # CUstreamCaptureMode


class SimCuda(unittest.TestCase):
    def setUp(self):
        from devarray import DeviceArray
        self.DA = DeviceArray
        self.cuda = hk.load('hk-cuda')
        self.h = self.cuda.handle(device=0)
        self.drv = driver()
        self.rng = np.random.default_rng(3)
        self.made = []

    def tearDown(self):
        for a in self.made:
            a.free()
        self.h.close()

    def dev(self, host, **kw):
        a = self.DA(self.h, host, **kw)
        self.made.append(a)
        return a

    def new_stream(self, device=0):
        ctx, s = ctypes.c_void_p(), ctypes.c_void_p()
        self.assertEqual(self.drv.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device), 0)
        self.assertEqual(self.drv.cuCtxPushCurrent_v2(ctx), 0)
        self.assertEqual(self.drv.cuStreamCreate(ctypes.byref(s), 0), 0)
        self.assertEqual(self.drv.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p())), 0)
        return s.value

    def test_ops_match_numpy(self):
        self.assertEqual(self.h.memory, hk.CUDA)
        for dt in (np.float32, np.float64):
            x = self.rng.standard_normal(257).astype(dt)
            y = self.rng.standard_normal(257).astype(dt)
            dx, dy = self.dev(x), self.dev(y)
            self.h.axpy(1.5, dx, dy)
            np.testing.assert_allclose(dy.numpy(), 1.5 * x + y, rtol=1e-5)
            y2 = dy.numpy()
            self.assertAlmostEqual(self.h.dot(dx, dy), float(np.dot(x.astype(float), y2)),
                                   delta=1e-3)
            self.assertAlmostEqual(self.h.nrm2(dx), float(np.linalg.norm(x)), delta=1e-4)
            dc = self.dev(np.zeros_like(x))
            self.h.copy(dx, dc)
            np.testing.assert_array_equal(dc.numpy(), x)
            self.h.scal(2.0, dc)
            np.testing.assert_allclose(dc.numpy(), 2 * x, rtol=1e-6)

    def test_strided_and_dlpack(self):
        x = np.arange(10, dtype=np.float64)
        dx = self.dev(x, step=3)
        self.assertEqual(self.h.nrm2(dx), float(np.linalg.norm(x)))
        dl = self.dev(x, dlpack=True, step=2)
        self.assertEqual(self.h.dot(dl, dx), float(np.dot(x, x)))
        self.assertEqual(dl.dlpack_streams, [1])  # the legacy default stream, never 0
        s = self.new_stream()
        self.h.stream = s
        self.h.nrm2(dl)
        self.assertEqual(dl.dlpack_streams[-1], s)

    def test_host_array_refused(self):
        with self.assertRaisesRegex(TypeError, 'host array'):
            self.h.nrm2(np.ones(3))

    def test_device_pointer_mode(self):
        self.h.pointer_mode = 'device'
        x = np.arange(6, dtype=np.float32)
        dx, dy = self.dev(x), self.dev(np.ones(6, dtype=np.float32))
        alpha = self.dev(np.array([3.0], dtype=np.float32))
        self.h.axpy(alpha, dx, dy)
        out = self.dev(np.zeros(1, dtype=np.float32))
        self.assertIs(self.h.dot(dx, dy, out=out), out)
        self.assertEqual(out.numpy()[0], float(np.dot(x, 3 * x + 1)))

    def test_external_streams(self):
        s = self.new_stream()

        class Torchish:
            cuda_stream = s

        class Cupyish:
            ptr = s
        for obj in (s, Torchish(), Cupyish()):
            self.h.stream = obj
            self.assertEqual(self.h.stream, s)
            x = np.arange(4, dtype=np.float64)
            self.assertEqual(self.h.dot(self.dev(x), self.dev(x)), 14.0)
            self.h.stream = None
            self.assertEqual(self.h.stream, 0)

    def test_stream_of_another_device(self):
        s1 = self.new_stream(device=1)
        with self.assertRaises(hk.HandlekitError) as cm:
            self.h.stream = s1
        self.assertIs(cm.exception.status, hk.Status.STREAM_MISMATCH)
        self.assertIn('device 1', cm.exception.reason)

    def test_producer_stream_waited_for(self):
        calls = []
        real = _cuda.stream_synchronize

        def spy(stream, what):
            calls.append((stream, what))
            real(stream, what)
        _cuda.stream_synchronize = spy
        try:
            s = self.new_stream()
            x = self.dev(np.arange(3.0), stream=s)
            self.assertEqual(self.h.nrm2(x), float(np.linalg.norm(np.arange(3.0))))
            self.assertEqual(calls, [(s, 'x')])
            self.h.stream = s  # the same stream: ordered already, no wait
            self.h.nrm2(x)
            self.assertEqual(len(calls), 1)
        finally:
            _cuda.stream_synchronize = real

    def test_checked_pointer_of_another_device(self):
        with self.cuda.handle(device=1) as h1:
            other = self.DA(h1, np.ones(4))
            try:
                with self.cuda.handle(device=0, checked=True) as hc:
                    with self.assertRaises(hk.HandlekitError) as cm:
                        hc.nrm2(other)
                    self.assertIs(cm.exception.status, hk.Status.POINTER_MISMATCH)
                    self.assertIn('device 1', cm.exception.reason)
            finally:
                other.free()


class Capture(unittest.TestCase):
    """The handle's stream set inside a stream capture (the PyTorch pattern:
    h.stream = torch.cuda.current_stream() inside torch.cuda.graph), in each
    capture mode, through the package and through the raw ABI: the capture
    stays active after every call, ends valid, and the graph replays with the
    right results; waits are refused with a reason, the capture intact."""

    def setUp(self):
        from devarray import DeviceArray
        self.DA = DeviceArray
        self.drv = driver()
        self.cuda = hk.load('hk-cuda')
        self.h = self.cuda.handle(device=0)
        self.ctx = ctypes.c_void_p()
        self.assertEqual(self.drv.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), 0), 0)
        self.assertEqual(self.drv.cuCtxPushCurrent_v2(self.ctx), 0)
        self.made = []

    def tearDown(self):
        self.h.stream = None
        for a in self.made:
            a.free()
        self.h.close()
        self.assertEqual(self.drv.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p())), 0)
        self.assertEqual(self.drv.cuDevicePrimaryCtxRelease_v2(0), 0)

    def dev(self, host):
        a = self.DA(self.h, host)
        self.made.append(a)
        return a

    def stream(self):
        s = ctypes.c_void_p()
        self.assertEqual(self.drv.cuStreamCreate(ctypes.byref(s), 1), 0)  # non-blocking
        self.addCleanup(self.drv.cuStreamDestroy_v2, s)
        return s.value

    def current(self):
        c = ctypes.c_void_p()
        self.assertEqual(self.drv.cuCtxGetCurrent(ctypes.byref(c)), 0)
        return c.value

    def active(self, s):
        st = ctypes.c_int(-1)
        self.assertEqual(self.drv.cuStreamIsCapturing(ctypes.c_void_p(s), ctypes.byref(st)), 0)
        self.assertEqual(st.value, 1, 'the capture is no longer active')
        self.assertEqual(self.current(), self.ctx.value)

    def capture(self, s, mode, body):
        """Runs body() inside a capture of s; returns the instantiated graph."""
        self.assertEqual(self.drv.cuStreamBeginCapture_v2(ctypes.c_void_p(s), mode), 0)
        try:
            body()
        finally:
            g = ctypes.c_void_p()
            end = self.drv.cuStreamEndCapture(ctypes.c_void_p(s), ctypes.byref(g))
        self.assertEqual(end, 0, 'the capture was invalidated')
        x = ctypes.c_void_p()
        self.assertEqual(self.drv.cuGraphInstantiateWithFlags(ctypes.byref(x), g, 0), 0)
        self.assertEqual(self.drv.cuGraphDestroy(g), 0)
        self.addCleanup(self.drv.cuGraphExecDestroy, x)
        return x

    def replay(self, x, s):
        self.assertEqual(self.drv.cuGraphLaunch(x, ctypes.c_void_p(s)), 0)
        self.assertEqual(self.drv.cuStreamSynchronize(ctypes.c_void_p(s)), 0)

    def test_package_stream_set_inside(self):
        for name, mode in MODES.items():
            with self.subTest(mode=name):
                x = np.arange(1, 65, dtype=np.float32)
                dx, dy = self.dev(x), self.dev(np.ones(64, dtype=np.float32))
                alpha, out = self.dev(np.array([2.0], np.float32)), self.dev(np.zeros(2, np.float32))
                s = self.stream()
                self.h.pointer_mode = 'device'

                def body():
                    self.h.stream = s
                    self.active(s)
                    self.h.axpy(alpha, dx, dy)
                    self.active(s)
                    self.h.dot(dx, dy, out=out)
                    self.active(s)
                    with self.assertRaises(hk.HandlekitError) as cm:
                        self.h.synchronize()
                    self.assertIs(cm.exception.status, hk.Status.NOT_SUPPORTED)
                    self.assertIn('captur', cm.exception.reason)
                    self.active(s)
                    self.h.pointer_mode = 'host'
                    with self.assertRaises(hk.HandlekitError) as cm:
                        self.h.nrm2(dx)
                    self.assertIs(cm.exception.status, hk.Status.NOT_SUPPORTED)
                    self.h.pointer_mode = 'device'
                    self.active(s)
                g = self.capture(s, mode, body)
                self.assertEqual(dy.numpy()[0], 1.0)  # captured, not run
                for k in (1, 2):
                    self.replay(g, s)
                    y = 1 + 2 * k * x
                    np.testing.assert_array_equal(dy.numpy(), y)
                    self.assertEqual(out.numpy()[0], float(np.dot(x, y)))
                self.h.pointer_mode = 'host'  # and directly on that stream afterwards
                self.assertEqual(self.h.nrm2(dx), float(np.linalg.norm(x)))
                self.h.stream = None

    def test_raw_abi_stream_set_inside(self):
        vt, blas = self.h._vt, self.h._blas1
        h = self.h._h()
        x = np.full(32, 3.0, dtype=np.float64)
        dx, out = self.dev(x), self.dev(np.zeros(1))
        self.assertEqual(vt.set_pointer_mode(h, 1), 0)  # HK_POINTER_MODE_DEVICE
        for name, mode in MODES.items():
            with self.subTest(mode=name):
                s = self.stream()

                def body():
                    self.assertEqual(vt.set_stream(h, ctypes.c_void_p(s)), 0)
                    self.active(s)
                    self.assertEqual(blas.dnrm2(h, 32, dx.ptr, 1, out.ptr), 0)
                    self.active(s)
                g = self.capture(s, mode, body)
                self.replay(g, s)
                self.assertAlmostEqual(out.numpy()[0], float(np.linalg.norm(x)))
                self.assertEqual(vt.set_stream(h, None), 0)

    def test_producer_stream_under_capture(self):
        """An array produced on the capturing stream while the handle works on
        another: the wait is refused, the capture kept; produced on a stream
        that is not capturing while this thread captures another: waited for
        (relaxed mode), the capture kept."""
        s, other = self.stream(), self.stream()
        x = np.arange(8, dtype=np.float64)
        on_cap = self.DA(self.h, x, stream=s)
        on_other = self.DA(self.h, x, stream=other)
        self.made += [on_cap, on_other]
        self.h.stream = None

        def body():
            with self.assertRaises(hk.HandlekitError) as cm:
                self.h.nrm2(on_cap)
            self.assertIs(cm.exception.status, hk.Status.NOT_SUPPORTED)
            self.active(s)
            self.assertEqual(self.h.nrm2(on_other), float(np.linalg.norm(x)))
            self.active(s)
        self.capture(s, MODES['global'], body)
