"""Device arrays on hk-cuda over the simulated driver: every hk.blas1/1 op on
reversed, strided and stride-0 views of device memory
(__cuda_array_interface__) against NumPy, computing on the elements the view
shows or refused with ValueError before anything is touched; misaligned
arrays, shapes, strides, streams and devices beyond what C takes are refused.
Runs when HK_TEST_SIMCUDA names the simulated driver."""
import os
import unittest

try:
    import numpy as np
except ImportError:
    np = None

import handlekit as hk

SIM = os.environ.get('HK_TEST_SIMCUDA')


def setUpModule():
    if not SIM:
        raise unittest.SkipTest('HK_TEST_SIMCUDA is not set: no simulated driver for this run')
    if np is None:
        raise unittest.SkipTest('NumPy is not installed')


class Views(unittest.TestCase):
    def setUp(self):
        from devarray import DeviceArray, DeviceView
        from test_views import views
        self.DA, self.DV, self.views = DeviceArray, DeviceView, views
        self.h = hk.load('hk-cuda').handle(device=0)
        self.rng = np.random.default_rng(5)
        self.made = []

    def tearDown(self):
        for a in self.made:
            a.free()
        self.h.close()

    def pair(self, dt):
        """A random host base of 40 elements and its device copy."""
        b = self.rng.standard_normal(40).astype(dt)
        d = self.DA(self.h, b)
        self.made.append(d)
        return b, d

    def each(self):
        for dt, tol in ((np.float32, 1e-5), (np.float64, 1e-13)):
            for name in self.views(np.zeros(40)):
                yield self.subTest(dtype=dt.__name__, view=name), dt, tol, name

    def test_scal_and_nrm2(self):
        for sub, dt, tol, name in self.each():
            with sub:
                b, d = self.pair(dt)
                v = self.views(b)[name]
                self.assertAlmostEqual(self.h.nrm2(d.like(b, v)),
                                       float(np.linalg.norm(v.astype(np.float64))),
                                       delta=tol * 10)
                self.h.scal(-1.5, d.like(b, v))
                v *= dt(-1.5)
                np.testing.assert_allclose(d.numpy(), b, rtol=tol)

    def test_axpy_copy_dot_every_pair(self):
        for sub, dt, tol, xname in self.each():
            with sub:
                for yname in self.views(np.zeros(40)):
                    xb, xd = self.pair(dt)
                    yb, yd = self.pair(dt)
                    x, y = self.views(xb)[xname], self.views(yb)[yname]
                    want = float(np.dot(x.astype(np.float64), y.astype(np.float64)))
                    self.assertAlmostEqual(self.h.dot(xd.like(xb, x), yd.like(yb, y)), want,
                                           delta=tol * 10, msg=yname)
                    self.h.axpy(0.25, xd.like(xb, x), yd.like(yb, y))
                    y += dt(0.25) * x
                    np.testing.assert_allclose(yd.numpy(), yb, rtol=tol, atol=tol, err_msg=yname)
                    self.h.copy(xd.like(xb, x), yd.like(yb, y))
                    y[...] = x
                    np.testing.assert_array_equal(yd.numpy(), yb, err_msg=yname)

    def test_stride0(self):
        b, d = self.pair(np.float64)
        one = self.DV(d, 4, 0, 8)
        yb, yd = self.pair(np.float64)
        self.assertAlmostEqual(self.h.dot(one, yd.like(yb, yb[9:1:-1])),
                               float(np.dot(np.full(8, b[4]), yb[9:1:-1])), delta=1e-12)
        self.h.axpy(2.0, one, yd.like(yb, yb[::-5]))
        yb[::-5] += 2.0 * b[4]
        np.testing.assert_allclose(yd.numpy(), yb, rtol=1e-15)
        for call in (lambda: self.h.scal(2.0, one), lambda: self.h.nrm2(one),
                     lambda: self.h.copy(yd.like(yb, yb[:8]), one),
                     lambda: self.h.axpy(1.0, yd.like(yb, yb[:8]), one)):
            with self.assertRaisesRegex(ValueError, 'stride 0'):
                call()
        np.testing.assert_array_equal(d.numpy(), b)

    def test_misaligned_device_array_refused(self):
        b, d = self.pair(np.float32)
        for call in (lambda v: self.h.nrm2(v), lambda v: self.h.scal(2.0, v)):
            with self.assertRaisesRegex(ValueError, 'not aligned'):
                call(self.DV(d, 0, 1, 8, offset_bytes=2))
        np.testing.assert_array_equal(d.numpy(), b)


class Limits(unittest.TestCase):
    def setUp(self):
        from devarray import DeviceArray
        self.cuda = hk.load('hk-cuda')
        self.h = self.cuda.handle(device=0)
        self.x = DeviceArray(self.h, np.arange(4, dtype=np.float32))

    def tearDown(self):
        self.x.free()
        self.h.close()

    def iface(self, **fields):
        iface = dict(self.x.__cuda_array_interface__, **fields)
        return type('Hand', (), {'__cuda_array_interface__': iface})()

    def test_shape_beyond_int64(self):
        for shape in ((2 ** 64 + 4,), (2 ** 63,), (-1,)):
            with self.subTest(shape=shape):
                with self.assertRaisesRegex(ValueError, 'shape|elements'):
                    self.h.nrm2(self.iface(shape=shape))
                with self.assertRaisesRegex(ValueError, 'shape|elements'):
                    self.h.scal(2.0, self.iface(shape=shape))
        np.testing.assert_array_equal(self.x.numpy(), np.arange(4, dtype=np.float32))

    def test_producer_stream_beyond_a_pointer(self):
        for stream in (2 ** 64, 2 ** 64 + 1, 0, -1):
            with self.subTest(stream=stream):
                with self.assertRaisesRegex(ValueError, 'stream'):
                    self.h.nrm2(self.iface(stream=stream))

    def test_device_and_stream_beyond_c(self):
        with self.assertRaisesRegex(ValueError, 'device'):
            self.cuda.handle(device=2 ** 32)
        with self.assertRaisesRegex(ValueError, 'stream'):
            self.h.stream = 2 ** 64
        self.assertEqual(self.h.stream, 0)
